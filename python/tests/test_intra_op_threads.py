"""Session(..., intra_op_threads=N): the exported CNN and transformer encoder
at sizes whose kernels split over threads give results at 2 and 3 threads
equal to 1 thread's (bit for bit where no oneDNN step runs; within float
rounding where one does), a session starts exactly N - 1 threads of its own
and stops them on close, and bad counts are grove's INVALID_ARGUMENT."""
import gc
import os

import numpy as np
import pytest

import grove


def native_threads():
    return len(os.listdir("/proc/self/task"))


def run_at(path, inputs, threads):
    session = grove.Session(grove.Model.load(path), device="cpu", intra_op_threads=threads)
    try:
        return session.run(inputs)
    finally:
        session.close()


def test_cnn_at_several_threads_agrees_with_one(exported_models):
    path, _ = exported_models["cnn"]
    model = grove.Model.load(path)
    name = model.inputs[0].name
    image = np.random.default_rng(3).standard_normal((4, 3, 96, 96)).astype(np.float32)
    want = run_at(path, {name: image}, 1)
    for threads in (2, 3):
        got = run_at(path, {name: image}, threads)
        assert got.keys() == want.keys()
        for k in want:
            np.testing.assert_allclose(got[k], want[k], rtol=1e-4, atol=1e-5, err_msg=f"{k} at {threads} threads")


def test_encoder_at_several_threads_equals_one(exported_models):
    path, cases = exported_models["transformer_encoder"]
    model = grove.Model.load(path)
    name = model.inputs[0].name
    width = int(np.load(cases[0][1][0]).shape[-1])
    x = np.random.default_rng(4).standard_normal((4, 128, width)).astype(np.float32)
    want = run_at(path, {name: x}, 1)
    for threads in (2, 3, 0):
        got = run_at(path, {name: x}, threads)
        for k in want:
            np.testing.assert_allclose(got[k], want[k], rtol=1e-5, atol=1e-6, err_msg=f"{k} at {threads} threads")


def test_a_session_owns_exactly_its_workers(demo_dir):
    model = grove.Model.load(demo_dir / "mlp.grove")
    gc.collect()
    before = native_threads()
    three = grove.Session(model, device="cpu", intra_op_threads=3)
    assert native_threads() == before + 2
    one = grove.Session(model, device="cpu", intra_op_threads=1)
    assert native_threads() == before + 2
    out = three.run({"x": np.ones((4, 16), np.float32)})
    np.testing.assert_array_equal(out["y"], one.run({"x": np.ones((4, 16), np.float32)})["y"])
    three.close()
    one.close()
    assert native_threads() == before


def test_bad_thread_counts(demo_dir):
    model = grove.Model.load(demo_dir / "mlp.grove")
    for bad in (-1, 257):
        with pytest.raises(grove.Error) as e:
            grove.Session(model, device="cpu", intra_op_threads=bad)
        assert e.value.code_name == "INVALID_ARGUMENT"
        assert f"options->intra_op_threads is {bad} (1 to 256, or 0 for one per core, expected)" in str(e.value)
