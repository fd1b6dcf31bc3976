"""ctypes declarations of grove's C ABI (include/grove/grove_c.h) and the
loading of libgrove.so.

The library is found, in order, at $GROVE_LIBRARY (a path to the .so), next
to this file (where `pip install ./python` copies it), in $GROVE_BUILD_DIR,
and in the build folder of the source checkout this file sits in
(<repo>/build). Every call goes through ctypes.CDLL, which releases the GIL
for the duration of the C call.
"""

import ctypes
import os
from pathlib import Path

GROVE_MAX_RANK = 8

# grove_status_code_t (absl::StatusCode).
STATUS_CODE_NAMES = {
    0: "OK", 1: "CANCELLED", 2: "UNKNOWN", 3: "INVALID_ARGUMENT", 4: "DEADLINE_EXCEEDED", 5: "NOT_FOUND",
    6: "ALREADY_EXISTS", 7: "PERMISSION_DENIED", 8: "RESOURCE_EXHAUSTED", 9: "FAILED_PRECONDITION",
    10: "ABORTED", 11: "OUT_OF_RANGE", 12: "UNIMPLEMENTED", 13: "INTERNAL", 14: "UNAVAILABLE",
    15: "DATA_LOSS", 16: "UNAUTHENTICATED",
}
STATUS_INVALID_ARGUMENT = 3
STATUS_FAILED_PRECONDITION = 9
STATUS_UNIMPLEMENTED = 12
STATUS_INTERNAL = 13

# grove_dtype_t.
DTYPE_F32, DTYPE_F64, DTYPE_F16, DTYPE_BF16 = 1, 2, 3, 4
DTYPE_I64, DTYPE_I32, DTYPE_I8, DTYPE_U8, DTYPE_BOOL = 5, 6, 7, 8, 9
DTYPE_I16, DTYPE_U16, DTYPE_U32, DTYPE_U64, DTYPE_STRING = 10, 11, 12, 13, 14

# grove_device_t, grove_gemm_math_t, grove_graph_mode_t, grove_value_kind_t.
DEVICES = {"cpu": 0, "cuda": 1, "auto": 2}
GEMM_MATH = {"f32": 0, "tf32": 1, "bf16": 2, "f16": 3}
GRAPH_MODES = {"auto": 0, "on": 1, "off": 2}
LOG_LEVELS = {"debug": 0, "info": 1, "warning": 2, "error": 3}
VALUE_KINDS = {0: "tensor", 1: "sequence", 2: "optional_tensor", 3: "optional_sequence"}


class Status(ctypes.Structure):
    """Opaque grove_status_t."""


class ModelHandle(ctypes.Structure):
    """Opaque grove_model_t."""


class SessionHandle(ctypes.Structure):
    """Opaque grove_session_t."""


class TokenHandle(ctypes.Structure):
    """Opaque grove_cancel_token_t."""


class StringRef(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("size", ctypes.c_size_t)]


class Tensor(ctypes.Structure):
    _fields_ = [
        ("dtype", ctypes.c_int32),
        ("rank", ctypes.c_int32),
        ("dims", ctypes.c_int64 * GROVE_MAX_RANK),
        ("data", ctypes.c_void_p),
        ("byte_size", ctypes.c_size_t),
    ]


class TensorInfo(ctypes.Structure):
    _fields_ = [
        ("name", ctypes.c_char_p),
        ("dtype", ctypes.c_int32),
        ("rank", ctypes.c_int32),
        ("dims", ctypes.c_int64 * GROVE_MAX_RANK),
        ("dim_symbols", ctypes.c_char_p * GROVE_MAX_RANK),
    ]


class SymbolInfo(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("min", ctypes.c_int64), ("max", ctypes.c_int64)]


class SessionOptions(ctypes.Structure):
    """grove_session_options_t, layout version 5."""
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("device", ctypes.c_int32),
        ("max_cached_plans", ctypes.c_int32),
        ("cuda_device", ctypes.c_int32),
        ("cuda_stream", ctypes.c_void_p),
        ("strict_device", ctypes.c_int32),
        ("outputs_on_device", ctypes.c_int32),
        ("gemm_math", ctypes.c_int32),
        ("run_deadline_ms", ctypes.c_int64),
        ("cancel_token", ctypes.POINTER(TokenHandle)),
        ("max_body_runs", ctypes.c_int64),
        ("cuda_graphs", ctypes.c_int32),
        ("max_cached_graphs", ctypes.c_int32),
        ("intra_op_threads", ctypes.c_int64),
        ("shape_buckets", ctypes.c_char_p),
        ("max_graph_bytes", ctypes.c_int64),
        ("trace_path", ctypes.c_char_p),
        ("log_callback", ctypes.c_void_p),  # a LogCallback, cast
        ("log_user_data", ctypes.c_void_p),
        ("trace_max_runs", ctypes.c_int32),
        ("log_level", ctypes.c_int32),
        ("kernel_table", ctypes.c_char_p),  # version 6
    ]


# grove_log_callback_t: (user_data, level, message).
LogCallback = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int32, ctypes.c_char_p)


STATS_COUNTERS = [
    "runs", "plans_created", "plan_cache_hits", "plans_evicted", "kernels_run", "device_allocations",
    "device_synchronizations", "device_to_host_reads", "segments_run", "host_waits_inside_segments",
    "cpu_fallback_steps", "bytes_host_to_device", "bytes_device_to_host", "graphs_captured", "graph_replays",
    "segments_run_eagerly", "graph_capture_failures", "graphs_evicted", "graphs_held", "graph_nodes",
    "graph_bytes", "graph_launches", "launches_outside_graphs",
]


BUCKET_COUNTERS = ["buckets_made", "bucketed_runs", "bucket_input_bytes", "bucket_padding_bytes"]
ARENA_COUNTERS = ["arena_bytes", "arena_own_plans"]
CONTROL_FLOW_COUNTERS = ["control_flow_in_graphs", "control_flow_host_driven"]


class SessionStats(ctypes.Structure):
    """grove_session_stats_t, layout version 7."""
    _fields_ = ([("struct_size", ctypes.c_size_t)] + [(name, ctypes.c_int64) for name in STATS_COUNTERS] +
                [("graph_fallback_reason", ctypes.c_char_p), ("graph_refreshes", ctypes.c_int64)] +
                [(name, ctypes.c_int64) for name in BUCKET_COUNTERS] + [("bucket_fallback_reason", ctypes.c_char_p)] +
                [(name, ctypes.c_int64) for name in ARENA_COUNTERS] +
                [(name, ctypes.c_int64) for name in CONTROL_FLOW_COUNTERS] +
                [("control_flow_fallback_reason", ctypes.c_char_p)])


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


class DLManagedTensor(ctypes.Structure):
    pass


DLDeleter = ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensor))
DLManagedTensor._fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", DLDeleter)]


def _candidates():
    here = Path(__file__).resolve().parent
    env = os.environ.get("GROVE_LIBRARY")
    if env:
        return [Path(env)]  # asked for explicitly: nothing else
    found = [here / "libgrove.so"]
    build = os.environ.get("GROVE_BUILD_DIR")
    if build:
        found.append(Path(build) / "libgrove.so")
    found.append(here.parent.parent / "build" / "libgrove.so")  # a source checkout: python/grove -> <repo>/build
    return found


def _load():
    tried = []
    for path in _candidates():
        if path.is_file():
            try:
                return ctypes.CDLL(str(path)), path
            except OSError as e:
                tried.append(f"{path} ({e})")
        else:
            tried.append(f"{path} (not there)")
    raise ImportError("grove: cannot load libgrove.so; tried " + "; ".join(tried) +
                      ". Build it (cmake --build build --target grove) and set GROVE_BUILD_DIR, or set "
                      "GROVE_LIBRARY to its path, or reinstall the package (pip install ./python)")


lib, library_path = _load()

_P = ctypes.POINTER
_status = _P(Status)


def _declare(name, restype, *argtypes):
    fn = getattr(lib, name)
    fn.restype = restype
    fn.argtypes = list(argtypes)


_declare("grove_version", ctypes.c_char_p)
_declare("grove_status_code", ctypes.c_int, _status)
_declare("grove_status_message", ctypes.c_char_p, _status)
_declare("grove_status_release", None, _status)
_declare("grove_dtype_size", ctypes.c_size_t, ctypes.c_int32)
_declare("grove_dtype_name", ctypes.c_char_p, ctypes.c_int32)
_declare("grove_model_load_file", _status, ctypes.c_char_p, _P(_P(ModelHandle)))
_declare("grove_model_load_buffer", _status, ctypes.c_void_p, ctypes.c_size_t, _P(_P(ModelHandle)))
_declare("grove_model_release", None, _P(ModelHandle))
for _what in ("input", "output", "symbol"):
    _declare(f"grove_model_{_what}_count", _status, _P(ModelHandle), _P(ctypes.c_size_t))
_declare("grove_model_input_info", _status, _P(ModelHandle), ctypes.c_size_t, _P(TensorInfo))
_declare("grove_model_output_info", _status, _P(ModelHandle), ctypes.c_size_t, _P(TensorInfo))
_declare("grove_model_output_name", _status, _P(ModelHandle), ctypes.c_size_t, _P(ctypes.c_char_p))
_declare("grove_model_symbol_info", _status, _P(ModelHandle), ctypes.c_size_t, _P(SymbolInfo))
_declare("grove_model_input_kind", _status, _P(ModelHandle), ctypes.c_size_t, _P(ctypes.c_int32))
_declare("grove_model_output_kind", _status, _P(ModelHandle), ctypes.c_size_t, _P(ctypes.c_int32))
_declare("grove_cancel_token_create", _status, _P(_P(TokenHandle)))
_declare("grove_cancel_token_cancel", _status, _P(TokenHandle))
_declare("grove_cancel_token_reset", _status, _P(TokenHandle))
_declare("grove_cancel_token_is_cancelled", _status, _P(TokenHandle), _P(ctypes.c_int32))
_declare("grove_cancel_token_release", None, _P(TokenHandle))
_declare("grove_session_options_initialize_sized", None, _P(SessionOptions), ctypes.c_size_t)
_declare("grove_session_create", _status, _P(ModelHandle), _P(SessionOptions), _P(_P(SessionHandle)))
_declare("grove_session_release", None, _P(SessionHandle))
_declare("grove_session_device", _status, _P(SessionHandle), _P(ctypes.c_int32))
_declare("grove_session_run", _status, _P(SessionHandle), _P(Tensor), ctypes.c_size_t, _P(Tensor), ctypes.c_size_t)
# The same entry point over addresses (ints): Session.run's own path passes its
# descriptor arrays' addresses, which ctypes converts in a fraction of the
# time it takes to check and convert the typed pointers; the status comes
# back as an int (0: OK).
run_by_address = lib["grove_session_run"]
run_by_address.restype = ctypes.c_void_p
run_by_address.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p, ctypes.c_size_t]
_declare("grove_session_stats", _status, _P(SessionHandle), _P(SessionStats))
_declare("grove_session_write_trace", _status, _P(SessionHandle), ctypes.c_char_p)
_declare("grove_dlpack_view", _status, _P(SessionHandle), _P(DLManagedTensor), _P(Tensor))
_declare("grove_session_run_dlpack", _status, _P(SessionHandle), _P(_P(DLManagedTensor)), ctypes.c_size_t,
         _P(_P(DLManagedTensor)), ctypes.c_size_t)

# PyCapsule access for the DLPack protocol (the Python C API through ctypes).
capsule_get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
capsule_get_pointer.restype = ctypes.c_void_p
capsule_get_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
capsule_set_name = ctypes.pythonapi.PyCapsule_SetName
capsule_set_name.restype = ctypes.c_int
capsule_set_name.argtypes = [ctypes.py_object, ctypes.c_char_p]
capsule_is_valid = ctypes.pythonapi.PyCapsule_IsValid
capsule_is_valid.restype = ctypes.c_int
capsule_is_valid.argtypes = [ctypes.py_object, ctypes.c_char_p]
