"""Adds any grove model to a Triton model repository: REPO/NAME/config.pbtxt
written from the model's declared inputs and outputs, grove_model.py as
REPO/NAME/1/model.py and the model as REPO/NAME/1/model.grove.

    python make_config.py MODEL.grove REPO NAME [--max-batch-size 8] [--instances 2]
                          [--no-batching] [--output-dtype NAME=TYPE_FP32 ...]

Batching: when every input and output has the same symbol as dim 0 (the
batch of an exported model), Triton's dynamic batcher is configured
(max_batch_size, at most that symbol's max) and the per-request dims leave
it out; otherwise max_batch_size is 0 and each request runs alone. Symbolic
dims are -1. An output whose dtype the model does not declare (the outputs
of an If, for example) takes the dtype of a trial run on zero inputs (each
symbol at min(max(its min, 2), its max)); when that run fails, give it with
--output-dtype. Needs the grove package.
"""
import argparse
import shutil
import sys
from pathlib import Path

import numpy as np

import grove

TRITON_TYPES = {
    "f32": "TYPE_FP32", "f64": "TYPE_FP64", "f16": "TYPE_FP16", "i64": "TYPE_INT64", "i32": "TYPE_INT32",
    "i16": "TYPE_INT16", "i8": "TYPE_INT8", "u8": "TYPE_UINT8", "u16": "TYPE_UINT16", "u32": "TYPE_UINT32",
    "u64": "TYPE_UINT64", "bool": "TYPE_BOOL", "string": "TYPE_STRING",
}
HERE = Path(__file__).resolve().parent


def batch_symbol(model: grove.Model):
    """The symbol at dim 0 of every input and output, or None."""
    specs = model.inputs + model.outputs
    if not specs or any(not s.shape for s in specs):
        return None
    first = specs[0].shape[0]
    if not isinstance(first, str) or first == "?":
        return None
    return first if all(s.shape[0] == first for s in specs) else None


def trial_dtypes(model: grove.Model):
    """{output name: grove dtype} from one CPU run on zeros, or None."""
    values = {s.name: min(max(s.min, 2), s.max) for s in model.symbols}
    feed = {}
    for spec in model.inputs:
        if spec.kind != "tensor" or spec.numpy_dtype is None:
            return None
        shape = [values.get(d, 1) if isinstance(d, str) else d for d in spec.shape]
        feed[spec.name] = np.zeros(shape, spec.numpy_dtype)
    try:
        tensors = grove.Session(model, device="cpu").run(feed, output_format="numpy")
    except grove.Error:
        return None
    names = {np.dtype(v): k for k, v in {"f32": np.float32, "f64": np.float64, "f16": np.float16,
                                          "i64": np.int64, "i32": np.int32, "i16": np.int16, "i8": np.int8,
                                          "u8": np.uint8, "u16": np.uint16, "u32": np.uint32, "u64": np.uint64,
                                          "bool": np.bool_}.items()}
    return {k: ("string" if v.dtype.kind == "U" else names.get(v.dtype)) for k, v in tensors.items()}


def config_text(model: grove.Model, name: str, max_batch: int, instances: int, batching: bool,
                output_dtypes: dict) -> str:
    symbol = batch_symbol(model) if batching else None
    if symbol is not None:
        limit = next(s.max for s in model.symbols if s.name == symbol)
        max_batch = min(max_batch, limit)
    else:
        max_batch = 0
    trial = None

    def entry(spec, is_output):
        nonlocal trial
        if spec.kind != "tensor":
            raise SystemExit(f"make_config: '{spec.name}' is a {spec.kind}; Triton's Python backend model serves tensors")
        dtype = spec.dtype
        if is_output and spec.name in output_dtypes:
            triton_type = output_dtypes[spec.name]
        else:
            if dtype not in TRITON_TYPES and is_output:
                if trial is None:
                    trial = trial_dtypes(model) or {}
                dtype = trial.get(spec.name) or dtype
            if dtype not in TRITON_TYPES:
                raise SystemExit(f"make_config: '{spec.name}' has dtype {dtype}, which this config cannot declare; "
                                 f"give --output-dtype {spec.name}=TYPE_...")
            triton_type = TRITON_TYPES[dtype]
        dims = spec.shape[1:] if symbol is not None else spec.shape
        dims = [-1 if isinstance(d, str) else int(d) for d in dims]
        if not dims:
            dims = [1]  # a scalar travels as [1] (Triton has no rank 0 with batching off either)
        return f'  {{ name: "{spec.name}" data_type: {triton_type} dims: [ {", ".join(map(str, dims))} ] }}'

    inputs = ",\n".join(entry(s, False) for s in model.inputs)
    outputs = ",\n".join(entry(s, True) for s in model.outputs)
    scalars = [s.name for s in model.inputs if not s.shape]
    lines = [f"# {name}: written by examples/triton/make_config.py from the grove model's declarations.",
             'backend: "python"', f"max_batch_size: {max_batch}", "input [", inputs, "]", "output [", outputs, "]"]
    if max_batch > 0:
        lines += ["dynamic_batching {", "  max_queue_delay_microseconds: 2000", "}"]
    lines += [f"instance_group [ {{ count: {instances} kind: KIND_CPU }} ]", "parameters ["]
    params = ['  { key: "grove_model" value: { string_value: "model.grove" } }']
    if scalars:
        params.append(f'  {{ key: "scalar_inputs" value: {{ string_value: "{",".join(scalars)}" }} }}')
    lines += [",\n".join(params), "]"]
    return "\n".join(lines) + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model", type=Path)
    parser.add_argument("repo", type=Path)
    parser.add_argument("name")
    parser.add_argument("--max-batch-size", type=int, default=8)
    parser.add_argument("--instances", type=int, default=2)
    parser.add_argument("--no-batching", action="store_true")
    parser.add_argument("--output-dtype", action="append", default=[], metavar="NAME=TYPE_...")
    args = parser.parse_args(argv)
    output_dtypes = {}
    for item in args.output_dtype:
        name, _, triton_type = item.partition("=")
        if not triton_type.startswith("TYPE_"):
            parser.error(f"--output-dtype {item}: want NAME=TYPE_FP32 (a Triton data type)")
        output_dtypes[name] = triton_type
    model = grove.Model.load(args.model)
    text = config_text(model, args.name, args.max_batch_size, args.instances, not args.no_batching, output_dtypes)
    folder = args.repo / args.name
    (folder / "1").mkdir(parents=True, exist_ok=True)
    (folder / "config.pbtxt").write_text(text)
    shutil.copyfile(HERE / "grove_model.py", folder / "1" / "model.py")
    if args.model.resolve() != (folder / "1" / "model.grove").resolve():
        shutil.copyfile(args.model, folder / "1" / "model.grove")
    print(f"make_config: {folder} (max_batch_size {text.split('max_batch_size: ')[1].split()[0]})")


if __name__ == "__main__":
    sys.exit(main())
