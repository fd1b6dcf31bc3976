"""Every error path of the package: grove's own errors raised as grove.Error
with grove's message and code, and the package's argument checks."""
import numpy as np
import pytest

import grove


@pytest.fixture(scope="module")
def mlp(demo_dir):
    return grove.Session(grove.Model.load(demo_dir / "mlp.grove"), device="cpu")


def raises(code_name, fragment, fn, *args, **kwargs):
    with pytest.raises(grove.Error) as e:
        fn(*args, **kwargs)
    assert e.value.code_name == code_name, str(e.value)
    assert fragment in e.value.message, str(e.value)
    assert str(e.value) == f"{code_name}: {e.value.message}"
    return e.value


def test_grove_run_errors(mlp):
    x = np.ones((2, 16), np.float32)
    raises("INVALID_ARGUMENT", "grove_session_run: input 'x' (f32[batch, 16]): given dtype f64", mlp.run,
           {"x": x.astype(np.float64)})
    raises("INVALID_ARGUMENT", "given rank 3", mlp.run, {"x": x[None]})
    raises("INVALID_ARGUMENT", "batch", mlp.run, {"x": np.ones((2000, 16), np.float32)})  # past 1..1024
    raises("INVALID_ARGUMENT", "dim 1", mlp.run, {"x": np.ones((2, 15), np.float32)})
    # The session is usable after each.
    assert mlp.run({"x": x})["y"].shape == (2, 4)


def test_package_argument_errors(mlp):
    x = np.ones((2, 16), np.float32)
    raises("INVALID_ARGUMENT", "input 'x' is missing (the inputs: x)", mlp.run, {})
    raises("INVALID_ARGUMENT", "no model input is called 'y' (the inputs: x)", mlp.run, {"x": x, "y": x})
    raises("INVALID_ARGUMENT", "2 inputs given but the model has 1", mlp.run, [x, x])
    raises("INVALID_ARGUMENT", "NumPy dtype complex64 has no grove dtype", mlp.run, {"x": x.astype(np.complex64)})
    raises("INVALID_ARGUMENT", "rank 9 is above grove's 8", mlp.run, {"x": np.ones((1,) * 9, np.float32)})
    raises("INVALID_ARGUMENT", "an object array must hold str or bytes only", mlp.run,
           {"x": np.array([object()], dtype=object)})

    class Refuses:
        def __dlpack__(self, stream=None):
            raise BufferError("cannot export")
    raises("INVALID_ARGUMENT", "input 'x': Refuses.__dlpack__() failed: cannot export", mlp.run, {"x": Refuses()})

    class NotACapsule:
        def __dlpack__(self, stream=None):
            return "no capsule"
    raises("INVALID_ARGUMENT", "did not return an unconsumed 'dltensor' capsule", mlp.run, {"x": NotACapsule()})


def test_session_option_errors(demo_dir):
    model = grove.Model.load(demo_dir / "mlp.grove")
    raises("INVALID_ARGUMENT", "grove_session_create: options->max_cached_plans is negative (-1)", grove.Session,
           model, device="cpu", max_cached_plans=-1)
    raises("INVALID_ARGUMENT", "options->run_deadline_ms is negative", grove.Session, model, device="cpu",
           run_deadline_ms=-5)
    raises("INVALID_ARGUMENT", "options->cuda_device is negative", grove.Session, model, device="cpu", cuda_device=-1)
    with pytest.raises(ValueError, match="device must be one of 'cpu', 'cuda', 'auto', not 'tpu'"):
        grove.Session(model, device="tpu")
    with pytest.raises(ValueError, match="gemm_math"):
        grove.Session(model, device="cpu", gemm_math="f8")
    with pytest.raises(TypeError):
        grove.Session("mlp.grove")
    with pytest.raises(TypeError):
        grove.Session(model, device="cpu", cancel_token=object())


def test_cuda_without_a_gpu(demo_dir):
    model = grove.Model.load(demo_dir / "mlp.grove")
    with grove.Session(model, device="auto") as auto:
        if auto.device == "cuda":
            pytest.skip("this machine has a GPU")
    raises("FAILED_PRECONDITION", "grove_session_create", grove.Session, model, device="cuda")


def test_deadline_and_cancel(demo_dir):
    model = grove.Model.load(demo_dir / "loop.grove")
    endless = {"trip_count": np.array(10**12, np.int64), "x": np.full(8, -1, np.float32),
               "limit": np.array(0, np.float32)}
    session = grove.Session(model, device="cpu", run_deadline_ms=50, max_body_runs=0)
    raises("DEADLINE_EXCEEDED", "deadline of 50 ms", session.run, endless)
    raises("RESOURCE_EXHAUSTED", "", grove.Session(model, device="cpu", max_body_runs=100).run, endless)
    token = grove.CancelToken()
    token.cancel()
    assert token.cancelled
    cancelled = grove.Session(model, device="cpu", cancel_token=token)
    raises("CANCELLED", "", cancelled.run, endless)
    token.reset()
    assert not token.cancelled
    small = dict(endless, trip_count=np.array(3, np.int64))
    assert cancelled.run(small)["final"].shape == (8,)


def test_closed_session(demo_dir):
    session = grove.Session(grove.Model.load(demo_dir / "mlp.grove"), device="cpu")
    session.close()
    session.close()  # twice is fine
    raises("FAILED_PRECONDITION", "the session is closed", session.run, {"x": np.ones((1, 16), np.float32)})
    raises("FAILED_PRECONDITION", "the session is closed", session.stats)
