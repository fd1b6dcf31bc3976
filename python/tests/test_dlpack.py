"""Inputs through DLPack (grove_dlpack_view): NumPy's own __dlpack__, a
producer made here whose deleter counts its calls (exactly once, on success
and on every refusal), and PyTorch's when it is installed."""
import ctypes
import gc
import weakref

import numpy as np
import pytest

import grove
from grove import _capi

_capsule_new = ctypes.pythonapi.PyCapsule_New
_capsule_new.restype = ctypes.py_object
_capsule_new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]


class ViaDlpack:
    """Hands NumPy's own DLPack capsule over, so that Session.run takes the
    DLPack path (it reads ndarrays directly)."""

    def __init__(self, array):
        self.array = array

    def __dlpack__(self, **kwargs):
        return self.array.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self.array.__dlpack_device__()


class Producer:
    """A DLPack producer written with ctypes: its DLManagedTensor describes
    `array`'s memory as told (dtype, strides, device, byte_offset) and its
    deleter counts its calls."""

    def __init__(self, array, code=2, bits=32, lanes=1, strides=None, device=(1, 0), byte_offset=0, shape=None):
        self.array = array
        shape = array.shape if shape is None else shape
        self.shape = (ctypes.c_int64 * max(len(shape), 1))(*shape)
        self.strides = None if strides is None else (ctypes.c_int64 * len(strides))(*strides)
        self.managed = _capi.DLManagedTensor()
        t = self.managed.dl_tensor
        t.data = array.ctypes.data
        t.device = _capi.DLDevice(*device)
        t.ndim = len(shape)
        t.dtype = _capi.DLDataType(code, bits, lanes)
        t.shape = self.shape
        t.strides = self.strides
        t.byte_offset = byte_offset
        self.deleted = 0
        self._deleter = _capi.DLDeleter(self._on_delete)
        self.managed.deleter = self._deleter

    def _on_delete(self, managed):
        self.deleted += 1

    def __dlpack__(self, stream=None):
        return _capsule_new(ctypes.addressof(self.managed), b"dltensor", None)

    def __dlpack_device__(self):
        return (self.managed.dl_tensor.device.device_type, self.managed.dl_tensor.device.device_id)


@pytest.fixture(scope="module")
def mlp(demo_dir):
    session = grove.Session(grove.Model.load(demo_dir / "mlp.grove"), device="cpu")
    x = np.load(demo_dir / "mlp_x.npy")
    return session, x, session.run({"x": x})["y"]


def test_numpy_dlpack_equals_ndarray_input_and_is_released(mlp):
    session, x, want = mlp
    np.testing.assert_array_equal(session.run({"x": ViaDlpack(x)})["y"], want)
    # NumPy's deleter drops its reference to the array: once grove called it,
    # nothing keeps the array alive.
    array = x.copy()
    alive = weakref.ref(array)
    wrapper = ViaDlpack(array)
    del array
    np.testing.assert_array_equal(session.run({"x": wrapper})["y"], want)
    del wrapper
    gc.collect()
    assert alive() is None, "the DLPack tensor's deleter was not called"


def test_deleter_called_exactly_once_on_success(mlp):
    session, x, want = mlp
    p = Producer(x)
    np.testing.assert_array_equal(session.run({"x": p})["y"], want)
    assert p.deleted == 1
    # A size-1 dim with any stride and an aligned byte offset are read in place.
    buf = np.concatenate([np.zeros(16, np.float32), x[0]])
    p = Producer(buf, shape=(1, 16), strides=(999, 1), byte_offset=64)
    np.testing.assert_array_equal(session.run({"x": p})["y"], want[:1])
    assert p.deleted == 1


@pytest.mark.parametrize("kwargs,message", [
    (dict(code=2, bits=32, lanes=4), "has 4 lanes; grove takes scalar elements (lanes 1) only"),
    (dict(code=5, bits=64), "dtype (code 5, bits 64, lanes 1) has no grove dtype"),
    (dict(code=0, bits=32), "given dtype i32"),
    (dict(strides=(1, 3)), "are not compact row-major"),
    (dict(device=(2, 0)), "is on kDLCUDA device 0 but the session runs on the CPU"),
    (dict(device=(4, 0)), "is on kDLOpenCL"),
    (dict(byte_offset=2), "data + byte_offset (2) is not aligned to its f32 elements (4 bytes)"),
    (dict(shape=(6, 8)), "input 'x' (f32[batch, 16])"),
])
def test_refused_tensors_raise_and_are_released(mlp, kwargs, message):
    session, x, _ = mlp
    p = Producer(x, **kwargs)
    with pytest.raises(grove.Error) as e:
        session.run({"x": p})
    assert message in e.value.message
    assert e.value.code_name == "INVALID_ARGUMENT"
    assert p.deleted == 1


def test_released_when_another_input_fails(demo_dir):
    session = grove.Session(grove.Model.load(demo_dir / "loop.grove"), device="cpu")
    p = Producer(np.ones(4, np.float32))
    with pytest.raises(grove.Error) as e:
        session.run({"trip_count": np.array(3, np.int64), "x": p, "limit": np.zeros(2, np.complex64)})
    assert "complex64 has no grove dtype" in e.value.message
    assert p.deleted == 1


def test_numpy_strided_export_is_refused_with_groves_message(mlp):
    session, x, _ = mlp
    wide = np.zeros((x.shape[0], 32), np.float32)
    with pytest.raises(grove.Error) as e:
        session.run({"x": ViaDlpack(wide[:, ::2])})
    assert "input 'x'" in e.value.message and "not compact row-major" in e.value.message


def test_pytorch_tensor_inputs(mlp):
    torch = pytest.importorskip("torch", reason="PyTorch is not installed")
    session, x, want = mlp
    np.testing.assert_allclose(session.run({"x": torch.from_numpy(x)})["y"], want, rtol=0, atol=0)
    with pytest.raises(grove.Error, match="not compact row-major"):
        session.run({"x": torch.from_numpy(np.ascontiguousarray(x.T)).T})
