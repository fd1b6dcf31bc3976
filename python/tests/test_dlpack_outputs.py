"""Outputs through DLPack: Session.run(..., output_format="dlpack") returns
grove.Tensor objects that np.from_dlpack (and torch.from_dlpack when torch is
installed) read without a copy; each managed tensor's deleter runs exactly
once (consumed or not, from any thread), the memory lives as long as the
Tensor or a consumer's view, and the values equal the NumPy outputs (which
the other tests hold against `grove run`). CUDA device outputs run where a
GPU is; they are skipped with the reason elsewhere."""
import ctypes
import gc
import threading
import weakref

import numpy as np
import pytest

import grove
from grove import _capi, _dlpack
from conftest import grove_run

_capsule_get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_get_pointer.restype = ctypes.c_void_p
_capsule_get_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_capsule_set_name = ctypes.pythonapi.PyCapsule_SetName
_capsule_set_name.restype = ctypes.c_int
_capsule_set_name.argtypes = [ctypes.py_object, ctypes.c_char_p]


def consume(capsule, versioned):
    """What a consumer does: take the managed tensor (rename the capsule)
    and return it; the caller calls its deleter when done."""
    name = b"dltensor_versioned" if versioned else b"dltensor"
    pointer = _capsule_get_pointer(capsule, name)
    _capsule_set_name(capsule, b"used_" + name)
    kind = _dlpack.DLManagedTensorVersioned if versioned else _capi.DLManagedTensor
    return ctypes.cast(pointer, ctypes.POINTER(kind))


def check_equal(tensor, want, what):
    """np.from_dlpack(tensor) equals `want`, dtype included (in a function
    of its own, so the consumer's array is gone when it returns)."""
    got = np.from_dlpack(tensor)
    assert got.dtype == want.dtype, what
    np.testing.assert_array_equal(got, want, err_msg=what)


def collect():
    gc.collect()
    return _dlpack.live_exports()


@pytest.fixture(scope="module")
def mlp(demo_dir):
    session = grove.Session(grove.Model.load(demo_dir / "mlp.grove"), device="cpu")
    return session, np.load(demo_dir / "mlp_x.npy")


def test_host_outputs_equal_numpy_outputs_and_share_memory(mlp):
    session, x = mlp
    want = session.run({"x": x})["y"]
    tensor = session.run({"x": x}, output_format="dlpack")["y"]
    assert isinstance(tensor, grove.Tensor)
    assert (tensor.shape, tensor.dtype, tensor.device) == (want.shape, "f32", "cpu")
    assert tensor.__dlpack_device__() == (1, 0)
    got = np.from_dlpack(tensor)
    np.testing.assert_array_equal(got, want)
    assert got.dtype == np.float32
    # Zero copy: the consumer's array is the Tensor's memory.
    assert np.shares_memory(got, tensor.numpy())
    got[0, 0] = 42.0
    assert tensor.numpy()[0, 0] == 42.0
    del got
    assert collect() == 0


def test_exported_models_through_dlpack_equal_grove_run(grove_bin, exported_models, tmp_path):
    """Every output of every exported model (f32, i64, scalars, data-dependent
    shapes), taken by np.from_dlpack, equals `grove run`."""
    for name, (path, cases) in exported_models.items():
        session = grove.Session(grove.Model.load(path), device="cpu")
        case, inputs, outputs = cases[0]
        feed = {spec.name: np.load(f) for spec, f in zip(session.model.inputs, inputs)}
        tensors = session.run(feed, output_format="dlpack")
        want = grove_run(grove_bin, path, feed, [s.name for s in session.model.outputs], tmp_path / name)
        for out_name, tensor in tensors.items():
            check_equal(tensor, want[out_name], f"{name} {case} {out_name}")
    assert collect() == 0


def test_tensor_outlives_session_and_consumer_keeps_memory(demo_dir):
    session = grove.Session(grove.Model.load(demo_dir / "mlp.grove"), device="cpu")
    x = np.load(demo_dir / "mlp_x.npy")
    want = session.run({"x": x})["y"].copy()
    tensor = session.run({"x": x}, output_format="dlpack")["y"]
    session.run({"x": x[:1]})  # the session's buffers are reused: the Tensor has its own
    session.close()
    del session
    array = np.from_dlpack(tensor)
    alive = weakref.ref(tensor)
    del tensor
    gc.collect()
    assert alive() is not None, "the consumer's view must keep the Tensor's memory"
    np.testing.assert_array_equal(array, want)
    del array
    gc.collect()
    assert alive() is None, "the deleter did not release the Tensor"
    assert _dlpack.live_exports() == 0


@pytest.mark.parametrize("versioned", [False, True])
def test_managed_tensor_fields_and_deleter_once(mlp, versioned):
    session, x = mlp
    tensor = session.run({"x": x}, output_format="dlpack")["y"]
    capsule = tensor.__dlpack__(max_version=(1, 0) if versioned else None)
    assert _dlpack.live_exports() == 1
    managed = consume(capsule, versioned)
    del capsule
    assert _dlpack.live_exports() == 1, "a consumed capsule must not call the deleter"
    m = managed.contents
    if versioned:
        assert (m.version.major, m.version.minor, m.flags) == (1, 0, 0)
    t = m.dl_tensor
    assert (t.device.device_type, t.device.device_id, t.ndim) == (1, 0, 2)
    assert (t.dtype.code, t.dtype.bits, t.dtype.lanes) == (2, 32, 1)
    assert [t.shape[i] for i in range(2)] == [3, 4] and [t.strides[i] for i in range(2)] == [4, 1]
    assert t.byte_offset == 0 and t.data == tensor.numpy().ctypes.data
    # Called from another thread, as a consumer may.
    worker = threading.Thread(target=lambda: m.deleter(managed))
    worker.start()
    worker.join()
    assert collect() == 0


def test_unconsumed_capsule_calls_the_deleter(mlp):
    session, x = mlp
    tensor = session.run({"x": x}, output_format="dlpack")["y"]
    for versioned in (False, True):
        capsule = tensor.__dlpack__(max_version=(1, 0) if versioned else None)
        assert capsule is not None and _dlpack.live_exports() == 1
        del capsule
        assert collect() == 0


def test_dl_device_and_copy_requests(mlp):
    session, x = mlp
    tensor = session.run({"x": x}, output_format="dlpack")["y"]
    on_cpu = np.from_dlpack(tensor, device="cpu")
    assert np.shares_memory(on_cpu, tensor.numpy())
    copied = np.from_dlpack(tensor, copy=True)
    assert not np.shares_memory(copied, tensor.numpy())
    np.testing.assert_array_equal(copied, tensor.numpy())
    with pytest.raises(BufferError, match="host"):
        tensor.__dlpack__(dl_device=(2, 0))
    del on_cpu, copied
    assert collect() == 0


def test_dtype_codes_match_numpy():
    """grove's DLPack dtype of each element type, read back by NumPy's own
    from_dlpack (bf16, which NumPy does not take, is checked by code)."""
    for code, dtype in [(_capi.DTYPE_F32, np.float32), (_capi.DTYPE_F64, np.float64), (_capi.DTYPE_F16, np.float16),
                        (_capi.DTYPE_I64, np.int64), (_capi.DTYPE_I32, np.int32), (_capi.DTYPE_I16, np.int16),
                        (_capi.DTYPE_I8, np.int8), (_capi.DTYPE_U8, np.uint8), (_capi.DTYPE_U16, np.uint16),
                        (_capi.DTYPE_U32, np.uint32), (_capi.DTYPE_U64, np.uint64), (_capi.DTYPE_BOOL, np.bool_)]:
        host = (np.arange(6) % 2).astype(dtype).reshape(2, 3)
        tensor = grove.Tensor(dtype_code=code, shape=host.shape, host=host)
        got = np.from_dlpack(tensor)
        assert got.dtype == host.dtype, dtype
        np.testing.assert_array_equal(got, host)
        del got
    bf16 = grove.Tensor(dtype_code=_capi.DTYPE_BF16, shape=(2,), host=np.zeros(2, np.uint16))
    managed = consume(bf16.__dlpack__(), False)
    assert (managed.contents.dl_tensor.dtype.code, managed.contents.dl_tensor.dtype.bits) == (4, 16)
    managed.contents.deleter(managed)
    assert collect() == 0


def test_scalar_and_empty_outputs(exported_models):
    path, cases = exported_models["early_exit"]
    session = grove.Session(grove.Model.load(path), device="cpu")
    _, inputs, _ = cases[0]
    feed = {spec.name: np.load(f) for spec, f in zip(session.model.inputs, inputs)}
    confidence = session.run(feed, output_format="dlpack")["confidence"]
    assert confidence.shape == ()
    np.testing.assert_array_equal(np.from_dlpack(confidence), session.run(feed)["confidence"])
    empty = grove.Tensor(dtype_code=_capi.DTYPE_F32, shape=(0, 4), host=np.empty((0, 4), np.float32))
    assert np.from_dlpack(empty).shape == (0, 4)
    assert collect() == 0


def test_refusals(mlp, strings_model_path):
    session, x = mlp
    with pytest.raises(ValueError, match="output_format"):
        session.run({"x": x}, output_format="torch")
    text = grove.Session(grove.Model.load(strings_model_path), device="cpu")
    inputs = {"words": np.array(["a", "b"]), "idx": np.array([1, 0], np.int64), "x": np.zeros(3, np.float32)}
    with pytest.raises(grove.Error, match="string tensor, which DLPack cannot carry") as info:
        text.run(inputs, output_format="dlpack")
    assert info.value.code_name == "INVALID_ARGUMENT"
    assert text.run(inputs)["picked"].tolist() == ["b", "a"]  # still usable


@pytest.fixture(scope="module")
def strings_model_path(grove_bin, tmp_path_factory):
    import re
    import subprocess
    from conftest import REPO
    script = (REPO / "test" / "cli" / "strings_test.sh").read_text()
    escaped = "".join(re.findall(r"^STRINGS_ONNX\+='([^']*)'$", script, re.M))
    onnx = bytes(int(h, 16) for h in re.findall(r"\\x([0-9a-f]{2})", escaped))
    out = tmp_path_factory.mktemp("strings_dlpack")
    (out / "strings.onnx").write_bytes(onnx)
    subprocess.run([str(grove_bin), "import", str(out / "strings.onnx"), "-o", str(out / "strings.grove")],
                   check=True, capture_output=True)
    return out / "strings.grove"


def test_torch_from_dlpack_when_installed(mlp):
    torch = pytest.importorskip("torch")
    session, x = mlp
    tensor = session.run({"x": x}, output_format="dlpack")["y"]
    got = torch.from_dlpack(tensor)
    assert got.data_ptr() == tensor.numpy().ctypes.data
    np.testing.assert_array_equal(got.numpy(), session.run({"x": x})["y"])
    del got
    assert collect() == 0


def _cuda_session(path):
    try:
        return grove.Session(grove.Model.load(path), device="cuda", outputs_on_device=True)
    except grove.Error as e:
        pytest.skip(f"no CUDA session here: {e.message}")


def test_cuda_device_outputs(demo_dir, exported_models):
    """On a GPU: outputs stay on the device (kDLCUDA) in memory of their own,
    equal to the CPU's (within f32 rounding of other kernels)."""
    for path, x_feed in [(demo_dir / "mlp.grove", {"x": np.load(demo_dir / "mlp_x.npy")}),
                         (exported_models["transformer_encoder"][0],
                          {"x": np.load(exported_models["transformer_encoder"][1][0][1][0])})]:
        session = _cuda_session(path)
        cpu = grove.Session(grove.Model.load(path), device="cpu").run(x_feed)
        tensors = session.run(x_feed, output_format="dlpack")
        for name, tensor in tensors.items():
            assert tensor.device == f"cuda:{session.cuda_device}"
            assert tensor.__dlpack_device__() == (2, session.cuda_device)
            np.testing.assert_allclose(tensor.numpy(), cpu[name], rtol=1e-4, atol=1e-5)
        # "numpy" on an outputs_on_device session copies to the host.
        for name, array in session.run(x_feed).items():
            np.testing.assert_allclose(array, cpu[name], rtol=1e-4, atol=1e-5)
        # The host export of a device Tensor is a copy; the device one is not.
        tensor = next(iter(tensors.values()))
        np.testing.assert_array_equal(np.from_dlpack(tensor, device="cpu"), tensor.numpy())
        managed = consume(tensor.__dlpack__(max_version=(1, 0)), True)
        assert managed.contents.dl_tensor.device.device_type == 2
        assert managed.contents.dl_tensor.data == tensor._device.ptr
        managed.contents.deleter(managed)
        try:
            import torch
        except ImportError:
            torch = None
        if torch is not None and torch.cuda.is_available():
            on_gpu = torch.from_dlpack(tensor)
            assert on_gpu.is_cuda and on_gpu.data_ptr() == tensor._device.ptr
            np.testing.assert_array_equal(on_gpu.cpu().numpy(), tensor.numpy())
            del on_gpu
        del tensors, tensor
        assert collect() == 0


# --- the device path against a host-memory CUDA driver ------------------------

@pytest.fixture
def host_cuda_driver(tmp_path, monkeypatch):
    """grove's device Tensors over tests/data/host_cuda_driver.c (libcuda's
    memory calls on host memory): the device path runs without a GPU.
    Yields a function returning (allocations, frees, pushes, pops, depth)."""
    import shutil
    import subprocess
    from pathlib import Path
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler for the host CUDA driver")
    library = tmp_path / "libhostcuda.so"
    source = Path(__file__).resolve().parent / "data" / "host_cuda_driver.c"
    subprocess.run([cc, "-shared", "-fPIC", "-O1", "-o", str(library), str(source)], check=True)
    monkeypatch.setenv("GROVE_CUDA_DRIVER", str(library))
    monkeypatch.setattr(_dlpack._CudaDriver, "_instance", None)
    driver = _dlpack._CudaDriver.get()

    def counts():
        out = (ctypes.c_int * 5)()
        driver.lib.host_cuda_driver_counts(out)
        return tuple(out)

    yield counts
    monkeypatch.setattr(_dlpack._CudaDriver, "_instance", None)


def _session_output(array):
    """A grove_tensor_t as a session with outputs_on_device fills it (here
    over host memory, which the host driver treats as device memory)."""
    t = _capi.Tensor()
    t.dtype = _capi.DTYPE_F32
    t.rank = array.ndim
    for d, n in enumerate(array.shape):
        t.dims[d] = n
    t.data = array.ctypes.data
    t.byte_size = array.nbytes
    return t


def test_device_tensor_lifecycle_with_host_driver(host_cuda_driver):
    from grove import _to_tensor, _device_to_numpy
    source = np.arange(12, dtype=np.float32).reshape(3, 4)
    tensor = _to_tensor(_session_output(source), True, 0)
    assert (tensor.device, tensor.__dlpack_device__(), tensor.shape, tensor.dtype) == ("cuda:0", (2, 0), (3, 4), "f32")
    assert host_cuda_driver()[:2] == (1, 0)
    source[:] = -1  # the session's buffer is reused by its next run: the Tensor has its own copy
    np.testing.assert_array_equal(tensor.numpy(), np.arange(12, dtype=np.float32).reshape(3, 4))
    np.testing.assert_array_equal(_device_to_numpy(_session_output(source), 0), source)

    # A kDLCUDA managed tensor over the Tensor's own allocation.
    managed = consume(tensor.__dlpack__(max_version=(1, 0)), True)
    t = managed.contents.dl_tensor
    assert (t.device.device_type, t.device.device_id, t.data) == (2, 0, tensor._device.ptr)
    del tensor
    gc.collect()
    assert host_cuda_driver()[1] == 0, "freed while a consumer holds it"
    data = ctypes.cast(t.data, ctypes.POINTER(ctypes.c_float))
    assert [data[i] for i in range(12)] == list(range(12))
    managed.contents.deleter(managed)
    gc.collect()
    allocations, frees, pushes, pops, depth = host_cuda_driver()
    assert (allocations, frees) == (1, 1), "the deleter must free the device memory"
    assert pushes == pops and depth == 0


def test_device_tensor_copy_and_host_export_with_host_driver(host_cuda_driver):
    from grove import _to_tensor
    source = np.linspace(-1, 1, 8, dtype=np.float32).reshape(2, 4)
    tensor = _to_tensor(_session_output(source), True, 0)
    # copy=True: a second device allocation; dl_device=(1, 0): a host copy.
    managed = consume(tensor.__dlpack__(copy=True), False)
    assert managed.contents.dl_tensor.data != tensor._device.ptr
    assert managed.contents.dl_tensor.device.device_type == 2
    assert host_cuda_driver()[0] == 2
    managed.contents.deleter(managed)
    gc.collect()
    assert host_cuda_driver()[1] == 1
    on_host = np.from_dlpack(tensor, device="cpu")
    np.testing.assert_array_equal(on_host, source)
    with pytest.raises(BufferError):
        tensor.__dlpack__(dl_device=(1, 0), copy=False)
    with pytest.raises(BufferError):
        tensor.__dlpack__(dl_device=(2, 1))
    empty = _to_tensor(_session_output(np.empty((0, 4), np.float32)), True, 0)
    assert empty.numpy().shape == (0, 4) and host_cuda_driver()[0] == 2  # no allocation for no bytes
    del tensor, on_host, empty
    assert collect() == 0
    allocations, frees, pushes, pops, depth = host_cuda_driver()
    assert allocations == frees == 2 and pushes == pops and depth == 0


def test_device_errors_carry_the_driver_message(host_cuda_driver):
    from grove import _to_tensor
    with pytest.raises(grove.Error, match=r"cuDeviceGet\(1\) failed: CUDA error 101 \(invalid device ordinal\)"):
        _to_tensor(_session_output(np.ones(4, np.float32)), True, 1)
    assert host_cuda_driver()[4] == 0


def test_output_tensor_feeds_the_next_run(exported_models):
    """A grove.Tensor is a DLPack producer, so it is also an input: the
    encoder's output fed back in equals feeding the NumPy output, and the
    run takes it in place (its deleter ran: nothing left exported)."""
    path, cases = exported_models["transformer_encoder"]
    session = grove.Session(grove.Model.load(path), device="cpu")
    x = np.load(cases[0][1][0])
    once = session.run({"x": x}, output_format="dlpack")["y"]
    want = session.run({"x": session.run({"x": x})["y"]})["y"]
    np.testing.assert_array_equal(session.run({"x": once})["y"], want)
    assert collect() == 0
