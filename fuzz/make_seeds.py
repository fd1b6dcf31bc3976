#!/usr/bin/env python3
"""Writes the generated part of the fuzz seed corpora (fuzz/corpus/): small
ONNX models (each opset range, control flow, the ops whose shape functions
take pads, strides and output shapes) and .npy files of every dtype and
layout. The .grove seeds come from grove_make_models (scripts/fuzz.sh
--seeds); test/models/*/model.onnx are copied as they are. Needs numpy and
onnx. Deterministic: rerunning rewrites the same bytes."""
import os
import shutil
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
corpus = os.path.join(root, "fuzz", "corpus")


def save_onnx(name, nodes, inputs, outputs, inits=(), opset=13):
    graph = helper.make_graph(nodes, name, inputs, outputs, list(inits))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)],
                              producer_name="grove-fuzz-seed")
    model.ir_version = 7 if opset < 15 else 8
    with open(os.path.join(corpus, "onnx_import", name + ".onnx"), "wb") as f:
        f.write(model.SerializeToString(deterministic=True))


def vi(name, dtype, shape):
    return helper.make_tensor_value_info(name, dtype, shape)


F = TensorProto.FLOAT
I64 = TensorProto.INT64

save_onnx("add_opset9", [helper.make_node("Add", ["x", "y"], ["z"])],
          [vi("x", F, ["n", 3]), vi("y", F, [1, 3])], [vi("z", F, ["n", 3])], opset=9)
save_onnx("relu_opset13", [helper.make_node("Relu", ["x"], ["y"])],
          [vi("x", F, ["n", 4])], [vi("y", F, ["n", 4])])
w = numpy_helper.from_array(np.ones((2, 1, 3, 3), np.float32), "w")
save_onnx("conv_pads", [helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1], strides=[2, 2])],
          [vi("x", F, [1, 1, 5, 5])], [vi("y", F, None)], [w])
wt = numpy_helper.from_array(np.ones((1, 2, 3, 3), np.float32), "w")
save_onnx("conv_transpose_output_shape",
          [helper.make_node("ConvTranspose", ["x", "w"], ["y"], strides=[2, 2], output_shape=[9, 9])],
          [vi("x", F, [1, 1, 4, 4])], [vi("y", F, None)], [wt])
save_onnx("maxpool", [helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[2, 2], pads=[0, 0, 1, 1],
                                       strides=[2, 2])],
          [vi("x", F, [1, 2, 5, 5])], [vi("y", F, None)])
save_onnx("averagepool_opset7", [helper.make_node("AveragePool", ["x"], ["y"], kernel_shape=[3],
                                                  strides=[1])],
          [vi("x", F, [1, 2, 6])], [vi("y", F, None)], opset=7)
save_onnx("depth_to_space_opset9", [helper.make_node("DepthToSpace", ["x"], ["y"], blocksize=2)],
          [vi("x", F, [1, 4, 2, 2])], [vi("y", F, None)], opset=9)
shape = numpy_helper.from_array(np.array([0, -1], np.int64), "shape")
save_onnx("reshape_topk", [helper.make_node("Reshape", ["x", "shape"], ["r"]),
                           helper.make_node("TopK", ["r", "k"], ["v", "i"], axis=-1)],
          [vi("x", F, ["b", 2, 3]), vi("k", I64, [1])], [vi("v", F, None), vi("i", I64, None)], [shape])
save_onnx("reduce_cumsum", [helper.make_node("ReduceSum", ["x", "axes"], ["s"], keepdims=0),
                            helper.make_node("CumSum", ["x", "axis"], ["c"])],
          [vi("x", F, [0, 3])], [vi("s", F, None), vi("c", F, None)],
          [numpy_helper.from_array(np.array([0], np.int64), "axes"),
           numpy_helper.from_array(np.array(1, np.int64), "axis")])
body = helper.make_graph(
    [helper.make_node("Add", ["v_in", "one"], ["v_out"]),
     helper.make_node("Identity", ["cond_in"], ["cond_out"])],
    "body", [vi("iter", I64, []), vi("cond_in", TensorProto.BOOL, []), vi("v_in", F, [2])],
    [vi("cond_out", TensorProto.BOOL, []), vi("v_out", F, [2])],
    [numpy_helper.from_array(np.ones(2, np.float32), "one")])
save_onnx("loop", [helper.make_node("Loop", ["m", "", "v"], ["v_final"], body=body)],
          [vi("m", I64, []), vi("v", F, [2])], [vi("v_final", F, [2])])
then_g = helper.make_graph([helper.make_node("Neg", ["x"], ["a"])], "then", [], [vi("a", F, None)])
else_g = helper.make_graph([helper.make_node("Abs", ["x"], ["b"])], "else", [], [vi("b", F, None)])
save_onnx("if", [helper.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g)],
          [vi("c", TensorProto.BOOL, []), vi("x", F, [3])], [vi("y", F, None)])
save_onnx("resize", [helper.make_node("Resize", ["x", "", "scales"], ["y"], mode="linear")],
          [vi("x", F, [1, 1, 2, 2])], [vi("y", F, None)],
          [numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "scales")])
save_onnx("string_ops", [helper.make_node("StringNormalizer", ["s"], ["t"], case_change_action="LOWER")],
          [vi("s", TensorProto.STRING, [2])], [vi("t", TensorProto.STRING, None)])
for d in sorted(os.listdir(os.path.join(root, "test", "models"))):
    src = os.path.join(root, "test", "models", d, "model.onnx")
    if os.path.exists(src) and os.path.getsize(src) < 20000:
        shutil.copy(src, os.path.join(corpus, "onnx_import", d + ".onnx"))

npy = os.path.join(corpus, "npy_reader")
np.save(os.path.join(npy, "f32_2x3.npy"), np.arange(6, dtype=np.float32).reshape(2, 3))
np.save(os.path.join(npy, "f16_scalar.npy"), np.array(1.5, np.float16))
np.save(os.path.join(npy, "f64_big_endian.npy"), np.arange(4, dtype=">f8"))
np.save(os.path.join(npy, "i64_fortran.npy"), np.asfortranarray(np.arange(6, dtype=np.int64).reshape(2, 3)))
np.save(os.path.join(npy, "i32_empty_0x4.npy"), np.zeros((0, 4), np.int32))
np.save(os.path.join(npy, "i8_u8_i16.npy"), np.array([-1, 2, 3], np.int8))
np.save(os.path.join(npy, "u16.npy"), np.array([1, 65535], np.uint16))
np.save(os.path.join(npy, "u32_u64.npy"), np.array([1, 2**63], np.uint64))
np.save(os.path.join(npy, "bool.npy"), np.array([[True, False]]))
np.save(os.path.join(npy, "unicode.npy"), np.array(["grove", "ünï", ""]))
np.save(os.path.join(npy, "bytes.npy"), np.array([b"ab", b"c"]))
with open(os.path.join(npy, "v2_header.npy"), "wb") as f:
    np.lib.format.write_array(f, np.arange(3, dtype=np.float32), version=(2, 0))

# op_run: the bytes are choices (fuzz/op_run_fuzzer.cc), any bytes will do.
rng = np.random.default_rng(16)
for i in range(16):
    with open(os.path.join(corpus, "op_run", "random_%02d" % i), "wb") as f:
        f.write(rng.integers(0, 256, int(rng.integers(16, 256)), dtype=np.uint8).tobytes())
