"""Outputs as DLPack producers: grove.Tensor.

A Tensor owns its memory (a NumPy array on the host, or a CUDA allocation of
its own on a device) and hands it to any DLPack consumer without a copy:
``np.from_dlpack(t)``, ``torch.from_dlpack(t)``, ``cupy.from_dlpack(t)``,
``jax.dlpack.from_dlpack(t)``. Each ``__dlpack__()`` call makes one managed
tensor (the versioned DLPack 1.0 form when the consumer passes max_version
>= (1, 0), the legacy ``DLManagedTensor`` otherwise) that keeps the Tensor
alive until the consumer calls its deleter; a capsule that no consumer took
calls the deleter itself when it is collected. So the memory lives exactly
as long as the Tensor or any consumer's view of it.

Device memory comes from the CUDA driver (libcuda, loaded on first use, as
grove itself loads CUDA): a CUDA session with outputs_on_device returns its
outputs in its own device memory, valid until its next run, and each is
copied device to device into a Tensor's own allocation (freed with the
Tensor's last reference, on the primary context grove's runtime uses).
"""

import ctypes
import itertools
import os
import threading
from typing import Any, Dict, Optional, Tuple

import numpy as np

from . import _capi

KDL_CPU, KDL_CUDA = 1, 2

# grove dtype -> (DLDataTypeCode, bits): kDLInt 0, kDLUInt 1, kDLFloat 2, kDLBfloat 4, kDLBool 6.
DL_DTYPES = {
    _capi.DTYPE_F32: (2, 32), _capi.DTYPE_F64: (2, 64), _capi.DTYPE_F16: (2, 16), _capi.DTYPE_BF16: (4, 16),
    _capi.DTYPE_I64: (0, 64), _capi.DTYPE_I32: (0, 32), _capi.DTYPE_I16: (0, 16), _capi.DTYPE_I8: (0, 8),
    _capi.DTYPE_U64: (1, 64), _capi.DTYPE_U32: (1, 32), _capi.DTYPE_U16: (1, 16), _capi.DTYPE_U8: (1, 8),
    _capi.DTYPE_BOOL: (6, 8),
}


# --- the versioned form (DLPack 1.0) ------------------------------------------

class DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class DLManagedTensorVersioned(ctypes.Structure):
    pass


DLDeleterVersioned = ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensorVersioned))
DLManagedTensorVersioned._fields_ = [
    ("version", DLPackVersion), ("manager_ctx", ctypes.c_void_p), ("deleter", DLDeleterVersioned),
    ("flags", ctypes.c_uint64), ("dl_tensor", _capi.DLTensor),
]

# Capsule names: PyCapsule keeps the pointer, so these bytes live forever.
_LEGACY = b"dltensor"
_VERSIONED = b"dltensor_versioned"

_capsule_new = ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p)(
    ("PyCapsule_New", ctypes.pythonapi))
# Raw PyObject* forms for the destructor, which must not touch the dying
# capsule's reference count.
_capsule_is_valid_raw = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p)(
    ("PyCapsule_IsValid", ctypes.pythonapi))
_capsule_get_pointer_raw = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", ctypes.pythonapi))

# Exports not yet released by their deleter: key (the manager_ctx) -> what
# keeps the memory and the managed struct alive.
_exports: Dict[int, Tuple[Any, ...]] = {}
_exports_lock = threading.Lock()
_keys = itertools.count(1)


def live_exports() -> int:
    """Managed tensors handed out whose deleter has not run yet."""
    with _exports_lock:
        return len(_exports)


def _release(key: Optional[int]) -> None:
    if key:
        with _exports_lock:
            _exports.pop(key, None)


def _delete_legacy(managed):
    _release(managed.contents.manager_ctx)


def _delete_versioned(managed):
    _release(managed.contents.manager_ctx)


_delete_legacy_c = _capi.DLDeleter(_delete_legacy)
_delete_versioned_c = DLDeleterVersioned(_delete_versioned)


@ctypes.CFUNCTYPE(None, ctypes.c_void_p)
def _capsule_destructor(capsule):
    # A capsule still under its original name was never consumed: call the
    # deleter (a consumer renames it to "used_dltensor..." and owns it).
    if _capsule_is_valid_raw(capsule, _LEGACY):
        managed = ctypes.cast(_capsule_get_pointer_raw(capsule, _LEGACY), ctypes.POINTER(_capi.DLManagedTensor))
        _delete_legacy(managed)
    elif _capsule_is_valid_raw(capsule, _VERSIONED):
        managed = ctypes.cast(_capsule_get_pointer_raw(capsule, _VERSIONED),
                              ctypes.POINTER(DLManagedTensorVersioned))
        _delete_versioned(managed)


# --- CUDA memory through the driver -------------------------------------------

class _CudaDriver:
    """The few libcuda calls a device Tensor needs, on the device's primary
    context (the one grove's CUDA runtime calls use)."""

    _instance = None
    _instance_lock = threading.Lock()

    @classmethod
    def get(cls) -> "_CudaDriver":
        with cls._instance_lock:
            if cls._instance is None:
                cls._instance = cls()
            return cls._instance

    def __init__(self):
        last = None
        # GROVE_CUDA_DRIVER: another libcuda (the tests' host-memory double).
        names = [os.environ["GROVE_CUDA_DRIVER"]] if os.environ.get("GROVE_CUDA_DRIVER") else ["libcuda.so.1",
                                                                                               "libcuda.so"]
        for name in names:
            try:
                self.lib = ctypes.CDLL(name)
                break
            except OSError as e:
                last = e
        else:
            raise _error(_capi.STATUS_FAILED_PRECONDITION, f"cannot load the CUDA driver (libcuda.so.1): {last}")
        c = ctypes
        self._fn("cuInit", c.c_uint)
        self._fn("cuDeviceGet", c.POINTER(c.c_int), c.c_int)
        self._fn("cuDevicePrimaryCtxRetain", c.POINTER(c.c_void_p), c.c_int)
        self._fn("cuCtxPushCurrent_v2", c.c_void_p)
        self._fn("cuCtxPopCurrent_v2", c.POINTER(c.c_void_p))
        self._fn("cuCtxSynchronize")
        self._fn("cuMemAlloc_v2", c.POINTER(c.c_uint64), c.c_size_t)
        self._fn("cuMemFree_v2", c.c_uint64)
        self._fn("cuMemcpyDtoD_v2", c.c_uint64, c.c_uint64, c.c_size_t)
        self._fn("cuMemcpyDtoH_v2", c.c_void_p, c.c_uint64, c.c_size_t)
        self._fn("cuGetErrorString", c.c_int, c.POINTER(c.c_char_p))
        self._check(self.lib.cuInit(0), "cuInit")
        self._contexts: Dict[int, int] = {}
        self._lock = threading.Lock()

    def _fn(self, name, *argtypes):
        fn = getattr(self.lib, name)
        fn.restype = ctypes.c_int
        fn.argtypes = list(argtypes)

    def _check(self, result: int, what: str) -> None:
        if result != 0:
            text = ctypes.c_char_p()
            self.lib.cuGetErrorString(result, ctypes.byref(text))
            message = text.value.decode() if text.value else "unknown error"
            raise _error(_capi.STATUS_INTERNAL, f"{what} failed: CUDA error {result} ({message})")

    def _context(self, ordinal: int) -> int:
        with self._lock:
            if ordinal not in self._contexts:
                device = ctypes.c_int()
                self._check(self.lib.cuDeviceGet(ctypes.byref(device), ordinal), f"cuDeviceGet({ordinal})")
                ctx = ctypes.c_void_p()
                # Retained for the life of the process: grove's sessions use it too.
                self._check(self.lib.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), device), "cuDevicePrimaryCtxRetain")
                self._contexts[ordinal] = ctx.value
            return self._contexts[ordinal]

    def _call(self, ordinal: int, what: str, fn, *args) -> None:
        self._check(self.lib.cuCtxPushCurrent_v2(self._context(ordinal)), "cuCtxPushCurrent")
        try:
            self._check(fn(*args), what)
        finally:
            popped = ctypes.c_void_p()
            self.lib.cuCtxPopCurrent_v2(ctypes.byref(popped))

    def alloc(self, ordinal: int, nbytes: int) -> int:
        ptr = ctypes.c_uint64()
        self._call(ordinal, f"cuMemAlloc({nbytes} bytes)", self.lib.cuMemAlloc_v2, ctypes.byref(ptr), nbytes)
        return ptr.value

    def free(self, ordinal: int, ptr: int) -> None:
        self._call(ordinal, "cuMemFree", self.lib.cuMemFree_v2, ptr)

    def copy_device_to_device(self, ordinal: int, dst: int, src: int, nbytes: int) -> None:
        self._call(ordinal, "cuMemcpyDtoD", self.lib.cuMemcpyDtoD_v2, dst, src, nbytes)
        # Finished before a consumer on another stream reads it.
        self._call(ordinal, "cuCtxSynchronize", self.lib.cuCtxSynchronize)

    def copy_device_to_host(self, ordinal: int, dst: int, src: int, nbytes: int) -> None:
        self._call(ordinal, "cuMemcpyDtoH", self.lib.cuMemcpyDtoH_v2, dst, src, nbytes)


class _DeviceBuffer:
    """A CUDA allocation of nbytes on device `ordinal`, freed with the object."""

    def __init__(self, ordinal: int, nbytes: int):
        self.ordinal = ordinal
        self.nbytes = nbytes
        self.ptr = 0
        if nbytes:
            self.driver = _CudaDriver.get()
            self.ptr = self.driver.alloc(ordinal, nbytes)

    def __del__(self):
        ptr, self.ptr = getattr(self, "ptr", 0), 0
        if ptr:
            try:
                self.driver.free(self.ordinal, ptr)
            except Exception:  # at interpreter exit the driver may be gone
                pass


def _error(code: int, message: str):
    from . import Error  # the package's exception type
    return Error(code, message)


# --- the Tensor ---------------------------------------------------------------

class Tensor:
    """An output of ``Session.run(..., output_format="dlpack")``: memory of its
    own, host or CUDA device, readable in place by any DLPack consumer
    (``np.from_dlpack``, ``torch.from_dlpack``, ...). ``shape``, ``dtype``
    (grove's name: "f32", ...), ``device`` ("cpu" or "cuda:N");
    ``numpy()`` gives the host data (a view of a host Tensor, a copy of a
    device one)."""

    def __init__(self, *, dtype_code: int, shape: Tuple[int, ...], host: Optional[np.ndarray] = None,
                 device_buffer: Optional[_DeviceBuffer] = None, numpy_dtype=None):
        self._code = dtype_code
        self.shape = tuple(int(d) for d in shape)
        self._host = host
        self._device = device_buffer
        self._numpy_dtype = numpy_dtype if numpy_dtype is not None else (host.dtype if host is not None else None)

    @property
    def dtype(self) -> str:
        return _capi.lib.grove_dtype_name(self._code).decode()

    @property
    def numpy_dtype(self):
        """The NumPy dtype numpy() gives (uint16 for bf16 without ml_dtypes)."""
        return self._numpy_dtype

    @property
    def device(self) -> str:
        return "cpu" if self._device is None else f"cuda:{self._device.ordinal}"

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * int(_capi.lib.grove_dtype_size(self._code))

    def _data_pointer(self) -> int:
        if self._device is not None:
            return self._device.ptr
        return self._host.ctypes.data

    def numpy(self) -> np.ndarray:
        """The data as a NumPy array: this Tensor's own memory for a host
        Tensor (no copy), a host copy for a device one."""
        if self._device is None:
            return self._host
        out = np.empty(self.shape, self._numpy_dtype)
        if out.nbytes:
            self._device.driver.copy_device_to_host(self._device.ordinal, out.ctypes.data, self._device.ptr,
                                                    out.nbytes)
        return out

    def __dlpack_device__(self) -> Tuple[int, int]:
        if self._device is None:
            return (KDL_CPU, 0)
        return (KDL_CUDA, self._device.ordinal)

    def __dlpack__(self, *, stream: Any = None, max_version: Optional[Tuple[int, int]] = None,
                   dl_device: Optional[Tuple[int, int]] = None, copy: Optional[bool] = None):
        """A PyCapsule holding a managed tensor of this Tensor's memory (the
        DLPack protocol). The data is complete when this returns (grove's
        runs and copies are synchronized), so any consumer `stream` may read
        it at once. dl_device (1, 0) on a device Tensor copies to the host
        unless copy=False; copy=True always hands over a copy."""
        source = self
        if dl_device is not None and tuple(dl_device) != self.__dlpack_device__():
            if tuple(dl_device) != (KDL_CPU, 0) or copy is False:
                raise BufferError(f"grove.Tensor on {self.device} cannot be exported to DLPack device "
                                  f"{tuple(dl_device)} without a copy" if copy is False else
                                  f"grove.Tensor on {self.device} can be exported to the host (1, 0) only, "
                                  f"not {tuple(dl_device)}")
            source = Tensor(dtype_code=self._code, shape=self.shape, host=self.numpy())
        elif copy:
            source = self._copy()
        versioned = max_version is not None and int(max_version[0]) >= 1
        return source._export(versioned)

    def _copy(self) -> "Tensor":
        if self._device is None:
            return Tensor(dtype_code=self._code, shape=self.shape, host=self._host.copy())
        buffer = _DeviceBuffer(self._device.ordinal, self._device.nbytes)
        if buffer.nbytes:
            buffer.driver.copy_device_to_device(buffer.ordinal, buffer.ptr, self._device.ptr, buffer.nbytes)
        return Tensor(dtype_code=self._code, shape=self.shape, device_buffer=buffer, numpy_dtype=self._numpy_dtype)

    def _export(self, versioned: bool):
        rank = len(self.shape)
        shape = (ctypes.c_int64 * max(rank, 1))(*self.shape)
        strides = (ctypes.c_int64 * max(rank, 1))()
        step = 1
        for d in range(rank - 1, -1, -1):
            strides[d] = step
            step *= self.shape[d]
        key = next(_keys)
        managed = DLManagedTensorVersioned() if versioned else _capi.DLManagedTensor()
        t = managed.dl_tensor
        t.data = self._data_pointer() or None
        t.device = _capi.DLDevice(*self.__dlpack_device__())
        t.ndim = rank
        code, bits = DL_DTYPES[self._code]
        t.dtype = _capi.DLDataType(code, bits, 1)
        t.shape = shape
        t.strides = strides
        t.byte_offset = 0
        managed.manager_ctx = key
        if versioned:
            managed.version = DLPackVersion(1, 0)
            managed.flags = 0  # writable, not a copy of someone else's
            managed.deleter = _delete_versioned_c
        else:
            managed.deleter = _delete_legacy_c
        with _exports_lock:
            _exports[key] = (self, managed, shape, strides)
        try:
            return _capsule_new(ctypes.addressof(managed), _VERSIONED if versioned else _LEGACY,
                                ctypes.cast(_capsule_destructor, ctypes.c_void_p))
        except BaseException:
            _release(key)
            raise

    def __repr__(self):
        return f"grove.Tensor(shape={self.shape}, dtype={self.dtype!r}, device={self.device!r})"
