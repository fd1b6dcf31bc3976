"""grove: load a model, make sessions, run them from Python.

A thin layer over grove's C ABI (grove_c.h) through ctypes and the shared
library libgrove.so: no compiled extension.

    import grove, numpy as np
    model = grove.Model.load("mlp.grove")
    session = grove.Session(model, device="cpu")
    out = session.run({"x": np.ones((3, 16), np.float32)})   # {"y": ndarray}

Inputs are NumPy arrays (anything np.asarray takes) or any object with
``__dlpack__`` (PyTorch, CuPy, JAX tensors), which grove reads in place
through its DLPack C functions; outputs are NumPy arrays the caller owns,
or with run(..., output_format="dlpack") grove.Tensor objects that any
DLPack consumer (np.from_dlpack, torch.from_dlpack, ...) reads in place,
host or CUDA device memory (Session(outputs_on_device=True)).
Errors from grove are raised as ``grove.Error`` carrying grove's message and
status code. The GIL is released while grove runs (ctypes.CDLL calls), so
threads with their own sessions run in parallel. A Model may be shared by
threads; a Session is used by one thread at a time.
"""

import collections.abc as _abc
import ctypes
import functools
import math
import os
import threading
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from . import _capi
from ._capi import lib as _lib
from ._dlpack import Tensor

_run = _lib.grove_session_run
# Opening a model is timed: these two calls skip ctypes' argtypes conversion
# (lib[name] is a fresh function object, without the argtypes _capi declares;
# the arguments below are always bytes and ctypes pointers).
_load_file = _lib["grove_model_load_file"]
_load_file.restype = _capi.lib.grove_model_load_file.restype
_session_create = _lib["grove_session_create"]
_session_create.restype = _capi.lib.grove_session_create.restype
_byref = ctypes.byref
_new_object = object.__new__
_ModelPointer = ctypes.POINTER(_capi.ModelHandle)
_SessionPointer = ctypes.POINTER(_capi.SessionHandle)
_run_by_address = _capi.run_by_address
_addressof = ctypes.addressof
_char_from_buffer = ctypes.c_char.from_buffer

__all__ = ["CancelToken", "Error", "Model", "Session", "Symbol", "Tensor", "TensorSpec", "library_path", "version"]

library_path = str(_capi.library_path)


class Error(Exception):
    """An error from grove: ``code`` (an int, as absl::StatusCode), ``code_name``
    ("INVALID_ARGUMENT", ...) and ``message`` (grove's text, naming the
    function, tensor and dim at fault)."""

    def __init__(self, code: int, message: str):
        self.code = code
        self.code_name = _capi.STATUS_CODE_NAMES.get(code, "UNKNOWN")
        self.message = message
        super().__init__(f"{self.code_name}: {message}")


def _check(status) -> None:
    if not status:
        return
    code = _lib.grove_status_code(status)
    message = _lib.grove_status_message(status).decode("utf-8", "replace")
    _lib.grove_status_release(status)
    raise Error(code, message)


def _invalid(message: str) -> Error:
    return Error(_capi.STATUS_INVALID_ARGUMENT, message)


def version() -> str:
    """The linked library's "MAJOR.MINOR.PATCH"."""
    return _lib.grove_version().decode()


# --- dtypes -------------------------------------------------------------------

@functools.lru_cache(maxsize=None)
def _bfloat16():
    # Looked up once: a failed import is retried on every call otherwise
    # (~135 us each, more than a small model's whole run).
    try:
        import ml_dtypes  # optional: NumPy has no bfloat16
        return np.dtype(ml_dtypes.bfloat16)
    except ImportError:
        return None


_NUMPY_OF_GROVE = {
    _capi.DTYPE_F32: np.dtype(np.float32), _capi.DTYPE_F64: np.dtype(np.float64),
    _capi.DTYPE_F16: np.dtype(np.float16), _capi.DTYPE_I64: np.dtype(np.int64),
    _capi.DTYPE_I32: np.dtype(np.int32), _capi.DTYPE_I8: np.dtype(np.int8), _capi.DTYPE_U8: np.dtype(np.uint8),
    _capi.DTYPE_BOOL: np.dtype(np.bool_), _capi.DTYPE_I16: np.dtype(np.int16),
    _capi.DTYPE_U16: np.dtype(np.uint16), _capi.DTYPE_U32: np.dtype(np.uint32),
    _capi.DTYPE_U64: np.dtype(np.uint64),
}
_GROVE_OF_NUMPY = {dt.newbyteorder("="): code for code, dt in _NUMPY_OF_GROVE.items()}
# Keyed by the dtypes arrays of this machine's byte order carry (np.dtype
# objects compare and hash by value, so a big-endian dtype misses it).
_GROVE_OF_NATIVE_NUMPY = {dt: code for code, dt in _NUMPY_OF_GROVE.items() if dt.isnative}


_DTYPE_NAMES: Dict[int, str] = {}


def _dtype_name(code: int) -> str:
    name = _DTYPE_NAMES.get(code)
    if name is None:  # asked of the library once per dtype (a model's specs ask per tensor)
        name = _DTYPE_NAMES[code] = _lib.grove_dtype_name(code).decode()
    return name


def _numpy_dtype(code: int):
    """The NumPy dtype of a grove dtype: str for text; bf16 is ml_dtypes.bfloat16
    when ml_dtypes is installed, else uint16 holding the raw bits."""
    if code == _capi.DTYPE_STRING:
        return np.dtype(str)
    if code == _capi.DTYPE_BF16:
        return _bfloat16() or np.dtype(np.uint16)
    return _NUMPY_OF_GROVE.get(code)


# --- model --------------------------------------------------------------------

@dataclass(frozen=True)
class TensorSpec:
    """A declared input or output. ``shape`` holds ints for fixed dims and
    symbol names (str) for dims that change between runs ("?" for an output
    dim that depends on the data). ``dtype`` is grove's name ("f32", "i64",
    "string", ...); ``kind`` is "tensor", "sequence", "optional_tensor" or
    "optional_sequence"."""
    name: str
    dtype: str
    shape: Tuple[Union[int, str], ...]
    kind: str

    @property
    def numpy_dtype(self):
        code = next((c for c in range(1, 15) if _dtype_name(c) == self.dtype), 0)
        return _numpy_dtype(code)


@dataclass(frozen=True)
class Symbol:
    """A symbolic dim and the inclusive range of values the model accepts."""
    name: str
    min: int
    max: int


# (count, info, kind) of the inputs and of the outputs: Model._specs.
_INPUT_SPEC_FUNCTIONS = (_lib.grove_model_input_count, _lib.grove_model_input_info, _lib.grove_model_input_kind)
_OUTPUT_SPEC_FUNCTIONS = (_lib.grove_model_output_count, _lib.grove_model_output_info, _lib.grove_model_output_kind)


class Model:
    """A loaded model: immutable, shareable by threads and sessions. Load it
    with Model.load(path) or Model.from_bytes(data)."""

    # Asked of the library on first use (a session asks for them at its first
    # run), so None until then: class attributes, which opening a model (timed)
    # does not store per instance.
    _inputs: Optional[List[TensorSpec]] = None
    _outputs: Optional[List[TensorSpec]] = None
    _output_names: Optional[Tuple[str, ...]] = None
    _symbols: Optional[List["Symbol"]] = None

    def __init__(self, handle):
        if type(handle) is not _ModelPointer:
            raise TypeError("use grove.Model.load(path) or grove.Model.from_bytes(data)")
        self._handle = handle

    @classmethod
    def load(cls, path) -> "Model":
        """Maps the file read-only (weights used in place); a file of at most
        1 MiB is read into memory instead."""
        handle = _ModelPointer()
        status = _load_file(path.encode() if type(path) is str else os.fsencode(path), _byref(handle))
        if status:
            _check(status)
        if cls is not Model:
            return cls(handle)  # a subclass's __init__ runs, as it always did
        model = _new_object(Model)  # __init__'s check is for callers; this handle is one
        model._handle = handle
        return model

    @classmethod
    def from_bytes(cls, data: bytes) -> "Model":
        """Copies `data` (a .grove file's bytes)."""
        data = bytes(data)
        handle = ctypes.POINTER(_capi.ModelHandle)()
        _check(_lib.grove_model_load_buffer(data, len(data), ctypes.byref(handle)))
        return cls(handle)

    def _specs(self, functions) -> List[TensorSpec]:
        # One count, info and kind struct for every tensor (what they point
        # to is copied out into str and int before the next call): opening a
        # model is timed, and each ctypes object and call counts.
        handle = self._handle
        count_fn, info_fn, kind_fn = functions
        n, info, kind = ctypes.c_size_t(), _capi.TensorInfo(), ctypes.c_int32()
        n_ref, info_ref, kind_ref = ctypes.byref(n), ctypes.byref(info), ctypes.byref(kind)
        kinds = _capi.VALUE_KINDS
        status = count_fn(handle, n_ref)
        if status:
            _check(status)
        specs = []
        for i in range(n.value):
            status = info_fn(handle, i, info_ref) or kind_fn(handle, i, kind_ref)
            if status:
                _check(status)
            rank = info.rank
            shape = tuple([d if s is None else s.decode()
                           for d, s in zip(info.dims[:rank], info.dim_symbols[:rank])])
            kind_value = kind.value
            specs.append(TensorSpec(info.name.decode(), _dtype_name(info.dtype), shape,
                                    kinds.get(kind_value) or str(kind_value)))
        return specs

    @property
    def inputs(self) -> List[TensorSpec]:
        """The model's inputs (asked of the library on first use)."""
        inputs = self._inputs
        if inputs is None:
            inputs = self._inputs = self._specs(_INPUT_SPEC_FUNCTIONS)
        return inputs

    @property
    def outputs(self) -> List[TensorSpec]:
        """The model's outputs (asked of the library on first use, which then
        infers their shapes: a session needs only their names)."""
        outputs = self._outputs
        if outputs is None:
            outputs = self._outputs = self._specs(_OUTPUT_SPEC_FUNCTIONS)
        return outputs

    def _names_of_outputs(self) -> Tuple[str, ...]:
        """The outputs' names, in order, without describing the outputs."""
        names = self._output_names
        if names is None:
            handle = self._handle
            n, name = ctypes.c_size_t(), ctypes.c_char_p()
            _check(_lib.grove_model_output_count(handle, ctypes.byref(n)))
            name_ref = ctypes.byref(name)
            listed = []
            for i in range(n.value):
                status = _lib.grove_model_output_name(handle, i, name_ref)
                if status:
                    _check(status)
                listed.append(name.value.decode())
            names = self._output_names = tuple(listed)
        return names

    @property
    def symbols(self) -> List[Symbol]:
        """The model's symbols (asked of the library on first use: a session
        does not need them)."""
        symbols = self._symbols
        if symbols is None:
            handle = self._handle
            n = ctypes.c_size_t()
            _check(_lib.grove_model_symbol_count(handle, ctypes.byref(n)))
            info = _capi.SymbolInfo()
            info_ref = ctypes.byref(info)
            symbols = []
            for i in range(n.value):
                _check(_lib.grove_model_symbol_info(handle, i, info_ref))
                symbols.append(Symbol(info.name.decode(), int(info.min), int(info.max)))
            self._symbols = symbols
        return symbols

    def __del__(self):
        handle = getattr(self, "_handle", None)
        if handle:
            _lib.grove_model_release(handle)
            self._handle = None

    def __repr__(self):
        return f"grove.Model(inputs={[s.name for s in self.inputs]}, outputs={list(self._names_of_outputs())})"


class CancelToken:
    """Stops runs from another thread: pass it to Session(cancel_token=...),
    then cancel() makes the runs in progress raise grove.Error (CANCELLED) at
    the next step; it stays set (later runs are cancelled at once) until
    reset(). Thread-safe."""

    def __init__(self):
        self._handle = ctypes.POINTER(_capi.TokenHandle)()
        _check(_lib.grove_cancel_token_create(ctypes.byref(self._handle)))

    def cancel(self) -> None:
        _check(_lib.grove_cancel_token_cancel(self._handle))

    def reset(self) -> None:
        _check(_lib.grove_cancel_token_reset(self._handle))

    @property
    def cancelled(self) -> bool:
        flag = ctypes.c_int32()
        _check(_lib.grove_cancel_token_is_cancelled(self._handle, ctypes.byref(flag)))
        return bool(flag.value)

    def __del__(self):
        handle = getattr(self, "_handle", None)
        if handle:
            _lib.grove_cancel_token_release(handle)  # sessions keep their own reference
            self._handle = None


# --- inputs -------------------------------------------------------------------

def _release_dlpack(dlpack: List[Any]) -> None:
    """Calls the deleter of each DLPack tensor a run took (exactly once, also
    when the run failed)."""
    for managed in dlpack:
        deleter = managed.contents.deleter
        if deleter:
            deleter(managed)


def _shape_of(t: "_capi.Tensor") -> Tuple[int, ...]:
    return tuple(int(t.dims[d]) for d in range(t.rank))


def _fill_numpy(slot: "_capi.Tensor", array: np.ndarray, spec: TensorSpec, keep: List[Any]) -> bool:
    """Fills `slot` from `array`; True when the array is read in place through
    its writable buffer, so that Session.run may refill only `data` for the
    next array of the same dtype and shape."""
    # The common case first (a native-order, C-contiguous array of a dtype
    # NumPy and grove share): no copy, one table lookup.
    code = _GROVE_OF_NATIVE_NUMPY.get(array.dtype)
    if code is not None and array.flags.c_contiguous and array.size and array.ndim <= _capi.GROVE_MAX_RANK:
        keep.append(array)
        slot.dtype = code
        slot.rank = array.ndim
        slot.dims[:array.ndim] = array.shape
        slot.byte_size = array.nbytes
        try:
            # 0.5 us where array.ctypes.data takes 2-4 (a writable array; a
            # read-only one raises and takes the slow property).
            slot.data = _addressof(_char_from_buffer(array))
            return True
        except (TypeError, ValueError, BufferError):
            slot.data = array.ctypes.data
            return False
    if array.ndim > _capi.GROVE_MAX_RANK:
        raise _invalid(f"input '{spec.name}': rank {array.ndim} is above grove's {_capi.GROVE_MAX_RANK}")
    if array.dtype.kind in "USO":
        # Text: an array of grove_string_t over UTF-8 bytes kept alive here.
        if array.dtype.kind == "O" and not all(isinstance(v, (str, bytes)) for v in array.flat):
            raise _invalid(f"input '{spec.name}': an object array must hold str or bytes only")
        encoded = [v if isinstance(v, bytes) else str(v).encode("utf-8") for v in array.flat]
        refs = (_capi.StringRef * max(len(encoded), 1))()
        for i, b in enumerate(encoded):
            refs[i].data = ctypes.cast(ctypes.c_char_p(b), ctypes.c_void_p).value if b else None
            refs[i].size = len(b)
        keep.extend([encoded, refs])
        code, data, nbytes = _capi.DTYPE_STRING, ctypes.addressof(refs), ctypes.sizeof(_capi.StringRef) * len(encoded)
    else:
        dtype = array.dtype
        if dtype.byteorder not in "=|":
            array = array.astype(dtype.newbyteorder("="))
        bf16 = _bfloat16()
        if bf16 is not None and array.dtype == bf16:
            code = _capi.DTYPE_BF16
        else:
            code = _GROVE_OF_NUMPY.get(array.dtype.newbyteorder("="))
        if code is None:
            raise _invalid(f"input '{spec.name}': NumPy dtype {array.dtype} has no grove dtype")
        if not array.flags.c_contiguous:
            array = array.copy(order="C")  # (np.ascontiguousarray would make a 0-d array 1-d)
        keep.append(array)
        data, nbytes = (array.ctypes.data if array.size else None), array.nbytes
    slot.dtype = code
    slot.rank = array.ndim
    for d, n in enumerate(array.shape):
        slot.dims[d] = n
    slot.data = data
    slot.byte_size = nbytes
    return False


def _fill_dlpack(slot: "_capi.Tensor", obj: Any, spec: TensorSpec, session: "Session", dlpack: List[Any]) -> None:
    try:
        capsule = obj.__dlpack__()
    except Exception as e:  # the producer refused (a read-only or strided NumPy array, ...)
        raise _invalid(f"input '{spec.name}': {type(obj).__name__}.__dlpack__() failed: {e}") from e
    if not _capi.capsule_is_valid(capsule, b"dltensor"):
        raise _invalid(f"input '{spec.name}': __dlpack__() did not return an unconsumed 'dltensor' capsule")
    managed = ctypes.cast(_capi.capsule_get_pointer(capsule, b"dltensor"), ctypes.POINTER(_capi.DLManagedTensor))
    # The tensor is ours now (the protocol's rename); its deleter is called
    # once, by _release_dlpack after the run, whatever happens.
    _capi.capsule_set_name(capsule, b"used_dltensor")
    dlpack.append(managed)
    status = _lib.grove_dlpack_view(session._handle, managed, ctypes.byref(slot))
    if status:
        try:
            _check(status)
        except Error as e:
            raise Error(e.code, f"input '{spec.name}': {e.message}") from None


def _is_dlpack(obj: Any) -> bool:
    return not isinstance(obj, np.ndarray) and hasattr(obj, "__dlpack__")


# --- outputs ------------------------------------------------------------------

def _host_view(t: "_capi.Tensor") -> Optional[np.ndarray]:
    """An ndarray over the session's buffer of output `t` (no copy), or None
    where _to_numpy_slow must read it (text, no elements, no NumPy dtype)."""
    dtype = _NUMPY_OF_GROVE.get(t.dtype)
    if dtype is None:
        return None
    shape = t.dims[:t.rank]
    nbytes = t.byte_size
    if nbytes == 0 or math.prod(shape) * dtype.itemsize != nbytes:
        return None
    return np.ndarray(shape, dtype, (ctypes.c_char * nbytes).from_address(t.data))


def _to_numpy(t: "_capi.Tensor") -> np.ndarray:
    view = _host_view(t)
    return view.copy() if view is not None else _to_numpy_slow(t)


def _to_numpy_slow(t: "_capi.Tensor") -> np.ndarray:
    shape = _shape_of(t)
    count = math.prod(shape)
    if t.dtype == _capi.DTYPE_STRING:
        refs = (_capi.StringRef * count).from_address(t.data) if count else []
        words = [ctypes.string_at(r.data, r.size).decode("utf-8", "replace") if r.size else "" for r in refs]
        return np.array(words, dtype=str).reshape(shape)
    dtype = _numpy_dtype(t.dtype)
    if dtype is None:
        raise Error(_capi.STATUS_UNIMPLEMENTED, f"output dtype {_dtype_name(t.dtype)} has no NumPy dtype")
    if count == 0:
        return np.empty(shape, dtype)
    raw = (ctypes.c_char * (count * dtype.itemsize)).from_address(t.data)
    return np.frombuffer(raw, dtype=dtype).reshape(shape).copy()


def _to_tensor(t: "_capi.Tensor", on_device: bool, cuda_device: int) -> Tensor:
    """An owned grove.Tensor of a session output (a copy: the session's own
    buffer is reused by its next run)."""
    shape = _shape_of(t)
    if not on_device:
        return Tensor(dtype_code=t.dtype, shape=shape, host=_to_numpy(t))
    from ._dlpack import _DeviceBuffer
    buffer = _DeviceBuffer(cuda_device, t.byte_size)
    if t.byte_size:
        buffer.driver.copy_device_to_device(cuda_device, buffer.ptr, t.data, t.byte_size)
    return Tensor(dtype_code=t.dtype, shape=shape, device_buffer=buffer, numpy_dtype=_numpy_dtype(t.dtype))


def _device_to_numpy(t: "_capi.Tensor", cuda_device: int) -> np.ndarray:
    from ._dlpack import _CudaDriver
    out = np.empty(_shape_of(t), _numpy_dtype(t.dtype))
    if out.nbytes:
        _CudaDriver.get().copy_device_to_host(cuda_device, out.ctypes.data, t.data, out.nbytes)
    return out


# --- session ------------------------------------------------------------------

_DEVICE_NAMES = {v: k for k, v in _capi.DEVICES.items()}


_DEFAULT_OPTIONS: List[bytes] = []
# Session: (pointer to the options struct, on the CPU, cuda_device,
# outputs_on_device) by the arguments that made it; at most 64 entries.
_PLAIN_OPTIONS: Dict[tuple, tuple] = {}


_BIND_LOCK = threading.Lock()  # Session._bind: once per session, whichever thread runs first


def _default_options() -> bytes:
    """grove_session_options_t as the library initializes it, asked once (a
    session copies it: opening a model is timed, and each ctypes call counts)."""
    if not _DEFAULT_OPTIONS:
        options = _capi.SessionOptions()
        _lib.grove_session_options_initialize_sized(ctypes.byref(options), ctypes.sizeof(options))
        if options.struct_size != ctypes.sizeof(options):
            raise Error(_capi.STATUS_FAILED_PRECONDITION, f"libgrove.so ({library_path}, grove {version()}) does not take this package's "
                           f"grove_session_options_t ({ctypes.sizeof(options)} bytes)")
        _DEFAULT_OPTIONS.append(bytes(options))
    return _DEFAULT_OPTIONS[0]


_TENSOR_ARRAY_TYPES: Dict[int, Any] = {}


def _tensor_array_type(n: int):
    """_capi.Tensor * n, made once per length and kept: ctypes caches array
    types only weakly, and remaking one after a collection costs ~20-130 us."""
    t = _TENSOR_ARRAY_TYPES.get(n)
    if t is None:
        t = _TENSOR_ARRAY_TYPES[n] = _capi.Tensor * n
    return t


class Session:
    """Runs a model on one device; used by one thread at a time (one Session
    per thread). Options (None: grove's default):

      device            "cpu", "cuda" or "auto" (CUDA when a GPU exists)
      max_cached_plans  plans kept, LRU (0: no limit)
      cuda_device       CUDA ordinal
      outputs_on_device CUDA: outputs stay in device memory; run(...,
                        output_format="dlpack") returns grove.Tensors on the
                        device (no host copy), "numpy" copies them to the host
      strict_device     ops without a CUDA kernel are an error
      gemm_math         "f32", "tf32", "bf16", "f16" (f32 matrix products on CUDA)
      run_deadline_ms   each run must end within this (0: none)
      cancel_token      a grove.CancelToken its runs watch
      max_body_runs     most If/Loop/Scan body runs in one run (0: no limit)
      cuda_graphs       "auto", "on", "off"
      max_cached_graphs most CUDA graphs kept (0: no limit)
      max_graph_bytes   most bytes of CUDA graphs kept (0: no limit)
      intra_op_threads  CPU threads one run splits a large kernel over, this
                        thread included (default 1; 0: one per core); the
                        session starts intra_op_threads - 1 threads of its own
      trace_path        write a trace of the runs there (Chrome trace event
                        JSON for ui.perfetto.dev or chrome://tracing) when the
                        session is closed and on write_trace()
      trace_max_runs    the trace keeps the last N runs (default 100)
      log               a callable(level, message) given the session's
                        messages ("debug", "info", "warning", "error": graph
                        and CPU fallbacks, pinned buckets, dropped plans)
      log_level         the least level `log` gets (default "warning")
      kernel_table      CUDA: a kernel dispatch table written by `grove tune`
                        (looked up before the shipped tables; a file that is
                        not a valid table is an error)
      shape_buckets     CUDA graphs: {symbol: rule} with rules "auto" (the
                        default), "pow2", "step:N", "A,B,C" (bounds) or
                        "exact"; "*" names every other symbol. The shapes of
                        a bucket share one arena and one graph per segment
    """

    # What a session made without them has: class attributes, which opening
    # a model (timed) does not store per instance. What runs need from the
    # model, the descriptors they reuse and the run lock are made by the first
    # run (_bind); _out_bytes/_out_views are the outputs as the last run left them.
    _handle = None
    _log_callback = None
    _outputs_on_device = False
    _run_args = None
    _out_bytes: Optional[bytes] = None
    _out_views: Tuple[np.ndarray, ...] = ()

    def __init__(self, model: Model, device: str = "auto", *, max_cached_plans: Optional[int] = None,
                 cuda_device: Optional[int] = None, strict_device: Optional[bool] = None,
                 gemm_math: Optional[str] = None, run_deadline_ms: Optional[int] = None,
                 cancel_token: Optional[CancelToken] = None, max_body_runs: Optional[int] = None,
                 cuda_graphs: Optional[str] = None, max_cached_graphs: Optional[int] = None,
                 intra_op_threads: Optional[int] = None, shape_buckets: Optional[Mapping[str, str]] = None,
                 max_graph_bytes: Optional[int] = None, trace_path: Optional[str] = None,
                 trace_max_runs: Optional[int] = None, log: Optional[Callable[[str, str], None]] = None,
                 log_level: Optional[str] = None, outputs_on_device: Optional[bool] = None,
                 kernel_table: Optional[str] = None):
        if not isinstance(model, Model):
            raise TypeError(f"model must be a grove.Model, not {type(model).__name__}")
        # Options that carry no pointer (no trace_path, kernel_table, log,
        # shape_buckets or cancel_token) are built once per combination and
        # shared, read-only: opening a model is timed, and building the struct
        # field by field costs more than grove's own session setup.
        key = entry = None
        if trace_path is None and kernel_table is None and log is None and shape_buckets is None \
                and cancel_token is None:
            key = (device, max_cached_plans, cuda_device, strict_device, gemm_math, run_deadline_ms, max_body_runs,
                   cuda_graphs, max_cached_graphs, intra_op_threads, max_graph_bytes, trace_max_runs, log_level,
                   outputs_on_device)
            try:
                entry = _PLAIN_OPTIONS.get(key)
            except TypeError:  # an unhashable value, refused while building below
                key = None
        keep = None
        if entry is None:
            options, keep, self._log_callback = _session_options(
                device, max_cached_plans, cuda_device, strict_device, gemm_math, run_deadline_ms, cancel_token,
                max_body_runs, cuda_graphs, max_cached_graphs, intra_op_threads, shape_buckets, max_graph_bytes,
                trace_path, trace_max_runs, log, log_level, outputs_on_device, kernel_table)
            entry = (ctypes.pointer(options), options.device == _capi.DEVICES["cpu"], int(options.cuda_device),
                     bool(options.outputs_on_device))
            if key is not None and len(_PLAIN_OPTIONS) < 64:
                _PLAIN_OPTIONS[key] = entry
        options_ptr, on_cpu, self.cuda_device, outputs_on_device = entry
        handle = _SessionPointer()
        status = _session_create(model._handle, options_ptr, _byref(handle))
        del keep  # grove has copied what the pointers point to
        if status:
            _check(status)
        self._handle = handle
        self.model = model
        if on_cpu:
            self.device = "cpu"  # as grove_session_device says of it, without the call
        else:
            kind = ctypes.c_int32()
            _check(_lib.grove_session_device(handle, ctypes.byref(kind)))
            self.device = _DEVICE_NAMES[kind.value]
            # grove honours outputs_on_device on a CUDA session only.
            self._outputs_on_device = self.device == "cuda" and outputs_on_device

    def _bind(self) -> None:
        """Looks up what every run needs from the model and makes the
        descriptors run() reuses; once per session, before its first run."""
        with _BIND_LOCK:
            if self._run_args is not None:
                return
            model = self.model
            self._input_names = tuple(spec.name for spec in model.inputs)
            self._output_names = output_names = model._names_of_outputs()  # not model.outputs: no shapes needed
            self._not_tensor_input = next((spec for spec in model.inputs if spec.kind != "tensor"), None)
            self._inputs_type = _tensor_array_type(len(model.inputs))
            self._outputs_type = _tensor_array_type(len(output_names))
            # The descriptors run() reuses, run after run (grove only reads the
            # inputs'; it fills the outputs' whose data is NULL). An input slot
            # keeps the (dtype, shape) it was filled for, so that the next array
            # of the same dtype and shape changes only its data pointer. The
            # outputs' bytes as the last run left them and an ndarray over each
            # output buffer they name: a run that reports the same descriptors
            # copies out of those views. Held by one run() at a time (_run_lock);
            # a second thread's run, which grove refuses, takes descriptors of
            # its own.
            self._in_tensors = self._inputs_type()
            self._in_slots = tuple(self._in_tensors)
            self._in_keys: List[Any] = [None] * len(model.inputs)
            self._out_tensors = self._outputs_type()
            self._out_slots = tuple(self._out_tensors)
            self._run_lock = threading.Lock()
            # Last: a run that finds it set finds everything above set.
            self._run_args = (_addressof(self._handle.contents), _addressof(self._in_tensors),
                              len(model.inputs), ctypes.addressof(self._out_tensors), len(output_names))

    def run(self, inputs: Union[Mapping[str, Any], Sequence[Any]],
            output_format: str = "numpy") -> Dict[str, Union[np.ndarray, Tensor]]:
        """Runs once. `inputs` maps each model input's name to an array (or is a
        list in model order); returns {output name: NumPy array}, or with
        output_format="dlpack" {output name: grove.Tensor}: memory of its own
        (host, or the CUDA device with outputs_on_device) that
        np.from_dlpack / torch.from_dlpack take without a copy (DLPack has no
        strings: a text output is an error). Arrays are
        read in place where they are C-contiguous in native byte order
        (copied to that otherwise); objects with __dlpack__ are read in place
        and must be compact row-major. A CUDA tensor (on a CUDA session) must be
        ready: grove's stream does not wait on the producer's, so finish its
        work first (torch.cuda.synchronize(), or the producer's equivalent)."""
        if not self._handle:
            self._check_open()
        if self._run_args is None:
            self._bind()
        if output_format == "numpy":
            to_numpy = True
        elif output_format == "dlpack":
            to_numpy = False
            for spec in self.model.outputs:
                if spec.dtype == "string":
                    raise _invalid(f"output '{spec.name}' is a string tensor, which DLPack cannot carry; use "
                                   "output_format='numpy'")
        else:
            raise ValueError(f"output_format must be 'numpy' or 'dlpack', not {output_format!r}")
        specs = self.model.inputs
        names = self._input_names
        if type(inputs) is dict or isinstance(inputs, _abc.Mapping):  # (typing.Mapping's check is slow)
            values = None
            if len(inputs) == len(names):
                try:
                    values = [inputs[name] for name in names]
                except KeyError:
                    pass
            if values is None:  # the errors, in this order
                unknown = [k for k in inputs if k not in set(names)]
                if unknown:
                    raise _invalid(f"no model input is called {unknown[0]!r} (the inputs: {', '.join(names)})")
                missing = [name for name in names if name not in inputs]
                raise _invalid(f"input {missing[0]!r} is missing (the inputs: {', '.join(names)})")
        else:
            values = list(inputs)
            if len(values) != len(specs):
                raise _invalid(f"{len(values)} inputs given but the model has {len(specs)}")
        if self._not_tensor_input is not None:
            spec = self._not_tensor_input
            raise Error(_capi.STATUS_UNIMPLEMENTED, f"input '{spec.name}' is a {spec.kind}; the Python package runs tensor inputs only")
        lock = self._run_lock
        if not lock.acquire(False):
            return self._run_unshared(values, to_numpy)
        try:
            # What keeps the descriptors' memory alive: NumPy arrays made
            # here, string bytes, and the DLPack tensors to release after the run.
            slots, keys, keep, dlpack = self._in_slots, self._in_keys, [], []
            try:
                for i, value in enumerate(values):
                    if type(value) is np.ndarray:
                        key = (value.dtype, value.shape)
                        if key == keys[i]:
                            try:  # the slot's dtype, rank, dims and byte_size stand
                                slots[i].data = _addressof(_char_from_buffer(value))
                                continue
                            except (TypeError, ValueError, BufferError):  # now strided or read-only
                                pass
                        keys[i] = None
                        if _fill_numpy(slots[i], value, specs[i], keep):
                            keys[i] = key
                        continue
                    keys[i] = None
                    self._fill_other(slots[i], value, specs[i], keep, dlpack)
                for slot in self._out_slots:
                    slot.data = None  # grove fills it
                status = _run_by_address(*self._run_args)
                if status:
                    _check(ctypes.cast(status, _capi._status))
            finally:
                if dlpack:
                    _release_dlpack(dlpack)
            # The session's buffers stay valid until its next run: copy them out now.
            if to_numpy and not self._outputs_on_device:
                outputs = self._out_tensors
                raw = bytes(outputs)
                if raw != self._out_bytes:
                    views = [_host_view(t) for t in outputs]
                    if any(v is None for v in views):
                        self._out_bytes, self._out_views = None, ()
                        return {name: _to_numpy(t) for name, t in zip(self._output_names, outputs)}
                    self._out_bytes, self._out_views = raw, tuple(views)
                return {name: v.copy() for name, v in zip(self._output_names, self._out_views)}
            return self._outputs(self._out_tensors, to_numpy)
        finally:
            lock.release()

    def _fill_other(self, slot: "_capi.Tensor", value: Any, spec: TensorSpec, keep: List[Any],
                    dlpack: List[Any]) -> None:
        """An input that is not an ndarray (a subclass included)."""
        if isinstance(value, np.ndarray):
            _fill_numpy(slot, value, spec, keep)
        elif hasattr(value, "__dlpack__"):
            _fill_dlpack(slot, value, spec, self, dlpack)
        else:
            # A list or Python scalar takes the input's dtype (an ndarray's
            # dtype is the caller's choice, checked by grove).
            _fill_numpy(slot, np.asarray(value, dtype=spec.numpy_dtype), spec, keep)

    def _run_unshared(self, values: List[Any], to_numpy: bool) -> Dict[str, Union[np.ndarray, Tensor]]:
        """A run with descriptors of its own, while another thread is inside
        run() (grove then refuses it as running on another thread)."""
        tensors, keep, dlpack = self._inputs_type(), [], []
        try:
            for i, value in enumerate(values):
                self._fill_other(tensors[i], value, self.model.inputs[i], keep, dlpack)
            outputs = self._outputs_type()
            _check(_run(self._handle, tensors, len(tensors), outputs, len(outputs)))
        finally:
            if dlpack:
                _release_dlpack(dlpack)
        return self._outputs(outputs, to_numpy)

    def _outputs(self, outputs: Any, to_numpy: bool) -> Dict[str, Union[np.ndarray, Tensor]]:
        """Copies of the outputs a run left in `outputs`."""
        names = self._output_names
        if to_numpy:
            if not self._outputs_on_device:
                return {name: _to_numpy(t) for name, t in zip(names, outputs)}
            return {name: (_device_to_numpy(t, self.cuda_device) if t.dtype != _capi.DTYPE_STRING
                           else _to_numpy(t)) for name, t in zip(names, outputs)}
        for name, t in zip(names, outputs):
            if t.dtype == _capi.DTYPE_STRING:
                raise _invalid(f"output '{name}' is a string tensor, which DLPack cannot carry; use "
                               "output_format='numpy'")
        return {name: _to_tensor(t, self._outputs_on_device, self.cuda_device) for name, t in zip(names, outputs)}

    def stats(self) -> Dict[str, Any]:
        """The session's counters since it was made (grove_session_stats_t)."""
        self._check_open()
        stats = _capi.SessionStats()
        stats.struct_size = ctypes.sizeof(stats)
        _check(_lib.grove_session_stats(self._handle, ctypes.byref(stats)))
        out: Dict[str, Any] = {name: int(getattr(stats, name)) for name in _capi.STATS_COUNTERS}
        reason = stats.graph_fallback_reason
        out["graph_fallback_reason"] = reason.decode("utf-8", "replace") if reason else ""
        out["graph_refreshes"] = int(stats.graph_refreshes)
        for name in _capi.BUCKET_COUNTERS:
            out[name] = int(getattr(stats, name))
        reason = stats.bucket_fallback_reason
        out["bucket_fallback_reason"] = reason.decode("utf-8", "replace") if reason else ""
        for name in _capi.ARENA_COUNTERS + _capi.CONTROL_FLOW_COUNTERS:
            out[name] = int(getattr(stats, name))
        reason = stats.control_flow_fallback_reason
        out["control_flow_fallback_reason"] = reason.decode("utf-8", "replace") if reason else ""
        return out

    def write_trace(self, path: Optional[str] = None) -> None:
        """Writes the trace of the runs kept so far to `path`, or to the
        session's trace_path (a session made without one has no trace)."""
        self._check_open()
        _check(_lib.grove_session_write_trace(self._handle, None if path is None else os.fsencode(path)))

    def close(self) -> None:
        """Releases the session now (also done when it is collected); a
        tracing session writes its trace_path."""
        handle, self._handle = self._handle, None
        self._out_bytes, self._out_views = None, ()
        if handle:
            _lib.grove_session_release(handle)

    def _check_open(self) -> None:
        if not self._handle:
            raise Error(_capi.STATUS_FAILED_PRECONDITION, "the session is closed")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        self.close()



def _session_options(device, max_cached_plans, cuda_device, strict_device, gemm_math, run_deadline_ms,
                     cancel_token, max_body_runs, cuda_graphs, max_cached_graphs, intra_op_threads, shape_buckets,
                     max_graph_bytes, trace_path, trace_max_runs, log, log_level, outputs_on_device, kernel_table):
    """grove_session_options_t for Session's arguments, and what its pointers
    point to (kept alive by the caller until grove_session_create returns; the
    log callback for as long as the session lives)."""
    callback = None
    options = _capi.SessionOptions.from_buffer_copy(_default_options())
    options.device = _choice("device", device, _capi.DEVICES)
    if gemm_math is not None:
        options.gemm_math = _choice("gemm_math", gemm_math, _capi.GEMM_MATH)
    if cuda_graphs is not None:
        options.cuda_graphs = _choice("cuda_graphs", cuda_graphs, _capi.GRAPH_MODES)
    for name, value in (("max_cached_plans", max_cached_plans), ("cuda_device", cuda_device),
                        ("run_deadline_ms", run_deadline_ms), ("max_body_runs", max_body_runs),
                        ("max_cached_graphs", max_cached_graphs), ("intra_op_threads", intra_op_threads),
                        ("max_graph_bytes", max_graph_bytes), ("trace_max_runs", trace_max_runs)):
        if value is not None:
            setattr(options, name, int(value))  # range errors come from grove
    if strict_device is not None:
        options.strict_device = 1 if strict_device else 0
    if outputs_on_device is not None:
        options.outputs_on_device = 1 if outputs_on_device else 0
    trace = None
    if trace_path is not None:
        trace = os.fsencode(trace_path)
        options.trace_path = trace  # kept alive by `trace` until the session is made (grove copies it)
    if log_level is not None:
        options.log_level = _choice("log_level", log_level, _capi.LOG_LEVELS)
    table = None
    if kernel_table is not None:
        table = os.fsencode(kernel_table)
        options.kernel_table = table  # kept alive by `table` until the session is made (grove reads it then)
    if log is not None:
        if not callable(log):
            raise TypeError("log must be a callable(level, message)")
        names = {v: k for k, v in _capi.LOG_LEVELS.items()}

        def deliver(_user_data, level, message):
            log(names.get(level, str(level)), message.decode("utf-8", "replace"))

        # Held by the session object: grove calls it until the handle is
        # released (a trace not written at release is reported through it).
        callback = _capi.LogCallback(deliver)
        options.log_callback = ctypes.cast(callback, ctypes.c_void_p)
    buckets = None
    if shape_buckets is not None:
        if not isinstance(shape_buckets, Mapping):
            raise TypeError("shape_buckets must be a mapping {symbol: rule}")
        for symbol, rule in shape_buckets.items():
            if not isinstance(symbol, str) or not isinstance(rule, str) or not symbol or any(
                    c in symbol + rule for c in "=;"):
                raise _invalid(f"shape_buckets: {symbol!r}: {rule!r} is not a symbol name and a rule")
        buckets = ";".join(f"{s}={r}" for s, r in shape_buckets.items()).encode("utf-8")
        options.shape_buckets = buckets  # kept alive by `buckets` until the session is made
    if cancel_token is not None:
        if not isinstance(cancel_token, CancelToken):
            raise TypeError("cancel_token must be a grove.CancelToken")
        options.cancel_token = cancel_token._handle
    return options, (trace, table, buckets), callback


def _choice(what: str, value: str, table: Dict[str, int]) -> int:
    if value not in table:
        raise ValueError(f"{what} must be one of {', '.join(repr(k) for k in table)}, not {value!r}")
    return table[value]
