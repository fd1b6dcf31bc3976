/* grove C ABI: load a model, create sessions, run them, from C or any
 * language with a C FFI. It wraps the C++ API of grove/grove.h.
 *
 *   grove_model_t* model = NULL;
 *   grove_status_t* status = grove_model_load_file("mlp.grove", &model);
 *   if (status) {
 *     fprintf(stderr, "%s\n", grove_status_message(status));
 *     grove_status_release(status);
 *     return 1;
 *   }
 *
 * Conventions
 *
 * - Naming: every symbol starts with `grove_` (macros and enum constants with
 *   `GROVE_`). Objects are opaque handles, `grove_x_t*`; out-parameters are
 *   named `out_x` and are written only when the call succeeds.
 *
 * - Errors: a function that can fail returns `grove_status_t*`. NULL means
 *   OK; anything else is an error the caller owns and frees with
 *   grove_status_release(). Codes mirror absl::StatusCode; messages say what
 *   was wrong and where (argument, tensor, dim). A NULL required argument is
 *   GROVE_STATUS_INVALID_ARGUMENT naming the argument. No C++ exception ever
 *   crosses this ABI (one that escapes the C++ side becomes
 *   GROVE_STATUS_INTERNAL) and no input makes the library abort. A failed
 *   call leaves its objects as they were and usable.
 *
 * - Ownership: `grove_x_create`/`grove_x_load_*` hand the caller a handle that
 *   it frees with `grove_x_release`; `grove_x_release(NULL)` does nothing.
 *   Strings returned by queries (names, messages) are owned by the object they
 *   came from and live as long as it. A session keeps its model alive, so the
 *   model may be released before the session.
 *
 * - Thread safety: a grove_model_t is immutable; any number of threads may
 *   query it and create sessions from it at once (release it only once no
 *   other call is using it). A grove_session_t is used by one thread at a time;
 *   use one session per thread. A run entered on a session while another
 *   thread runs it returns GROVE_STATUS_FAILED_PRECONDITION and changes
 *   nothing (a guard that catches the misuse, not a lock). A
 *   grove_cancel_token_t may be used from any thread at any time. A
 *   grove_status_t belongs to whoever received it.
 *
 * - Released handles: every handle carries a tag that its release clears.
 *   A released handle passed back (use after release, double release, or a
 *   handle of another kind) is refused with GROVE_STATUS_INVALID_ARGUMENT,
 *   and a second release does nothing. This is best effort: the memory of the
 *   last 1024 released handles is kept so that the check reads no freed
 *   memory; an older handle's memory may have been reused, and passing it is
 *   undefined behaviour as in any C API.
 *
 * - Bounded work: grove_session_options_t takes a per-run deadline and a
 *   cancellation token; a run past its deadline returns
 *   GROVE_STATUS_DEADLINE_EXCEEDED, a cancelled one GROVE_STATUS_CANCELLED,
 *   and the session stays usable. Loops obey one iteration and memory policy
 *   (see README: "Bounded work").
 *
 * - Tensors: grove_tensor_t is a plain struct describing a dense, row-major
 *   tensor of at most GROVE_MAX_RANK dims. Inputs are only read. For outputs,
 *   see grove_session_run: a caller may pass its own buffer or take a pointer
 *   into the session, which stays valid until the next grove_session_run on
 *   that session (successful or not) or its release;
 *   grove_session_run_into writes every output into the caller's buffers
 *   (host or device memory).
 *
 * - Versioned structs: a struct that the caller fills or allocates and hands
 *   to the library (grove_session_options_t, grove_session_stats_t,
 *   grove_kernel_compile_options_t, grove_kernel_report_summary_t) starts
 *   with `size_t struct_size`, the sizeof of the struct as the caller's
 *   header declares it, set by its initializer
 *   (grove_session_options_initialize(), GROVE_SESSION_STATS_INIT or
 *   grove_session_stats_initialize(), grove_kernel_compile_options_initialize(),
 *   GROVE_KERNEL_REPORT_SUMMARY_INIT or its _initialize()). Fields are only
 *   ever added
 *   at the end, so the size tells the library which version of the layout
 *   the caller was built with, and each struct's comment lists the fields
 *   of each version. The library:
 *     - reads only the fields within the caller's struct_size; a field of a
 *       later version than the caller's takes its default;
 *     - writes only the fields within the caller's struct_size (stats);
 *     - refuses with GROVE_STATUS_INVALID_ARGUMENT naming the struct a
 *       struct_size of 0, one below the struct's first version, one between
 *       two versions' sizes, or one above GROVE_MAX_STRUCT_SIZE (garbage);
 *     - serves a newer caller (struct_size above the sizes it knows): it
 *       reads and writes the fields it knows. Of an input struct (options)
 *       the bytes it does not know must be zero, else the call fails with
 *       INVALID_ARGUMENT ("a field it does not have was set"): a caller that
 *       sets an option this library lacks learns so instead of having it
 *       ignored. The library's initializer sets those bytes to 0, so a newer
 *       caller that leaves its new fields as initialized is served. Of an
 *       output struct (stats) the fields it does not know are left as the
 *       caller set them (GROVE_SESSION_STATS_INIT sets them to 0).
 *   A caller that sets struct_size itself (an FFI) sets it to the sizeof of
 *   the struct it declares; GROVE_*_SIZE_V<n> are the sizes of each version.
 *   Structs without struct_size are frozen: their layout never changes and
 *   what they lack comes as new functions or new structs (each says why).
 *
 * The ABI is versioned with the library (grove_version()); enum values only
 * grow and struct layouts only grow, at the end, as above. Layout version 1
 * of the versioned structs is the first with struct_size: a program built
 * against an earlier grove_c.h (no struct_size) must be rebuilt.
 */
#ifndef GROVE_GROVE_C_H_
#define GROVE_GROVE_C_H_

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__) || defined(__clang__)
#define GROVE_API __attribute__((visibility("default")))
#define GROVE_MUST_USE_RESULT __attribute__((warn_unused_result))
#else
#define GROVE_API
#define GROVE_MUST_USE_RESULT
#endif

#define GROVE_VERSION_MAJOR 0
#define GROVE_VERSION_MINOR 2
#define GROVE_VERSION_PATCH 0

/* The most dims a grove_tensor_t carries. */
#define GROVE_MAX_RANK 8

/* The largest struct_size the library accepts (see "Versioned structs"). */
#define GROVE_MAX_STRUCT_SIZE 4096

/* "MAJOR.MINOR.PATCH" of the linked library (may differ from the macros above
 * when the header and the shared library come from different builds). */
GROVE_API const char* grove_version(void);

/* ------------------------------------------------------------------------ */
/* Status                                                                    */
/* ------------------------------------------------------------------------ */

/* The same values as absl::StatusCode. */
typedef enum grove_status_code_e {
  GROVE_STATUS_OK = 0,
  GROVE_STATUS_CANCELLED = 1,
  GROVE_STATUS_UNKNOWN = 2,
  GROVE_STATUS_INVALID_ARGUMENT = 3,
  GROVE_STATUS_DEADLINE_EXCEEDED = 4,
  GROVE_STATUS_NOT_FOUND = 5,
  GROVE_STATUS_ALREADY_EXISTS = 6,
  GROVE_STATUS_PERMISSION_DENIED = 7,
  GROVE_STATUS_RESOURCE_EXHAUSTED = 8,
  GROVE_STATUS_FAILED_PRECONDITION = 9,
  GROVE_STATUS_ABORTED = 10,
  GROVE_STATUS_OUT_OF_RANGE = 11,
  GROVE_STATUS_UNIMPLEMENTED = 12,
  GROVE_STATUS_INTERNAL = 13,
  GROVE_STATUS_UNAVAILABLE = 14,
  GROVE_STATUS_DATA_LOSS = 15,
  GROVE_STATUS_UNAUTHENTICATED = 16,
} grove_status_code_t;

/* An error: a code and a message. NULL is OK. */
typedef struct grove_status_t grove_status_t;

/* GROVE_STATUS_OK for NULL. */
GROVE_API grove_status_code_t grove_status_code(const grove_status_t* status);
/* The message, owned by `status`; "" for NULL. */
GROVE_API const char* grove_status_message(const grove_status_t* status);
/* "INVALID_ARGUMENT", ...; "UNKNOWN" for values outside the enum. */
GROVE_API const char* grove_status_code_name(grove_status_code_t code);
GROVE_API void grove_status_release(grove_status_t* status);

/* ------------------------------------------------------------------------ */
/* Element types and tensors                                                 */
/* ------------------------------------------------------------------------ */

/* Element types: the values of grove::DType and of the model format. */
typedef int32_t grove_dtype_t;
enum grove_dtype_e {
  GROVE_DTYPE_UNKNOWN = 0,
  GROVE_DTYPE_F32 = 1,
  GROVE_DTYPE_F64 = 2,
  GROVE_DTYPE_F16 = 3,
  GROVE_DTYPE_BF16 = 4,
  GROVE_DTYPE_I64 = 5,
  GROVE_DTYPE_I32 = 6,
  GROVE_DTYPE_I8 = 7,
  GROVE_DTYPE_U8 = 8,
  GROVE_DTYPE_BOOL = 9,
  GROVE_DTYPE_I16 = 10,
  GROVE_DTYPE_U16 = 11,
  GROVE_DTYPE_U32 = 12,
  GROVE_DTYPE_U64 = 13,
  /* UTF-8 text; each element is a grove_string_t. */
  GROVE_DTYPE_STRING = 14,
};

/* One element of a GROVE_DTYPE_STRING tensor: `size` bytes of UTF-8 at `data`
 * (not NUL-terminated; data may be NULL when size is 0). The tensor's data is
 * an array of these. The bytes belong to whoever owns the tensor: the caller
 * for inputs (valid for the call); for outputs, the session, until its next
 * run. A zero-filled element is the empty string. Frozen (no struct_size):
 * it is grove::StringRef's layout, and string tensors are arrays of it. */
typedef struct grove_string_t {
  const char* data;
  size_t size;
} grove_string_t;

/* Bytes per element; 0 for an unknown dtype. */
GROVE_API size_t grove_dtype_size(grove_dtype_t dtype);
/* "f32", "i64", ...; "unknown" for anything else. Never NULL. */
GROVE_API const char* grove_dtype_name(grove_dtype_t dtype);

/* A dense, row-major tensor that the struct does not own. `byte_size` is the
 * capacity of `data` in bytes; it must be at least the tensor's size
 * (product of dims times grove_dtype_size). `data` may be NULL only when the
 * tensor has no elements. Dims past `rank` are ignored.
 *
 * Frozen (no struct_size): callers pass arrays of it, which the library
 * indexes by its own sizeof, so its size can never change. A tensor
 * described otherwise (strides, a device, DLPack) will be a new struct taken
 * by new functions. */
typedef struct grove_tensor_t {
  grove_dtype_t dtype;
  int32_t rank;
  int64_t dims[GROVE_MAX_RANK];
  void* data;
  size_t byte_size;
} grove_tensor_t;

/* ------------------------------------------------------------------------ */
/* Model                                                                     */
/* ------------------------------------------------------------------------ */

/* A loaded model: immutable, shareable across threads. */
typedef struct grove_model_t grove_model_t;

/* Maps the file read-only; the weights are used in place. A file of at most
 * 1 MiB is read into aligned memory instead (faster to open). */
GROVE_API GROVE_MUST_USE_RESULT grove_status_t* grove_model_load_file(const char* path,
                                                                      grove_model_t** out_model);
/* Copies `size` bytes at `data` into storage the model owns; the caller may
 * free `data` when this returns. */
GROVE_API GROVE_MUST_USE_RESULT grove_status_t* grove_model_load_buffer(const void* data, size_t size,
                                                                        grove_model_t** out_model);
GROVE_API void grove_model_release(grove_model_t* model);

/* A declared input or output. A symbolic dim (a dim that changes between
 * runs, such as the batch) has dims[i] == -1 and dim_symbols[i] naming the
 * symbol, or "?" for an output dim that depends on the data; a constant dim
 * has its value and dim_symbols[i] == NULL. Strings are owned by the model.
 *
 * grove_tensor_info_t and grove_symbol_info_t are frozen (no struct_size):
 * each answers one fixed question; what else a model says about an input
 * comes as a new query (as grove_model_input_kind() came), so an older
 * caller's struct is never written past its end. */
typedef struct grove_tensor_info_t {
  const char* name;
  grove_dtype_t dtype;
  int32_t rank;
  int64_t dims[GROVE_MAX_RANK];
  const char* dim_symbols[GROVE_MAX_RANK];
} grove_tensor_info_t;

/* A symbol and the inclusive range of values the model accepts for it. */
typedef struct grove_symbol_info_t {
  const char* name;
  int64_t min;
  int64_t max;
} grove_symbol_info_t;

GROVE_API GROVE_MUST_USE_RESULT grove_status_t* grove_model_input_count(const grove_model_t* model,
                                                                        size_t* out_count);
GROVE_API GROVE_MUST_USE_RESULT grove_status_t* grove_model_output_count(const grove_model_t* model,
                                                                         size_t* out_count);
GROVE_API GROVE_MUST_USE_RESULT grove_status_t* grove_model_symbol_count(const grove_model_t* model,
                                                                         size_t* out_count);
/* OUT_OF_RANGE for an index past the count, or for a tensor of rank above
 * GROVE_MAX_RANK (the C ABI cannot describe it). */
GROVE_API GROVE_MUST_USE_RESULT grove_status_t* grove_model_input_info(const grove_model_t* model, size_t index,
                                                                       grove_tensor_info_t* out_info);
GROVE_API GROVE_MUST_USE_RESULT grove_status_t* grove_model_output_info(const grove_model_t* model, size_t index,
                                                                        grove_tensor_info_t* out_info);
GROVE_API GROVE_MUST_USE_RESULT grove_status_t* grove_model_symbol_info(const grove_model_t* model, size_t index,
                                                                        grove_symbol_info_t* out_info);
/* The name of output `index` (owned by the model), without describing its
 * shape: grove_model_output_info infers the outputs' shapes on its first call
 * (once per model), which a caller that only needs the names (to run) can
 * skip. OUT_OF_RANGE for an index past the count. */
GROVE_API GROVE_MUST_USE_RESULT grove_status_t* grove_model_output_name(const grove_model_t* model, size_t index,
                                                                        const char** out_name);

/* What an input or output holds (see grove::ValueKind): a tensor, a sequence
 * of tensors of one dtype, or an optional tensor or sequence. For the
 * non-tensor kinds grove_tensor_info_t describes the tensors (rank 0 when
 * the model declares no shape for them). */
typedef int32_t grove_value_kind_t;
enum grove_value_kind_e {
  GROVE_VALUE_TENSOR = 0,
  GROVE_VALUE_SEQUENCE = 1,
  GROVE_VALUE_OPTIONAL_TENSOR = 2,
  GROVE_VALUE_OPTIONAL_SEQUENCE = 3,
};
GROVE_API GROVE_MUST_USE_RESULT grove_status_t* grove_model_input_kind(const grove_model_t* model, size_t index,
                                                                       grove_value_kind_t* out_kind);
GROVE_API GROVE_MUST_USE_RESULT grove_status_t* grove_model_output_kind(const grove_model_t* model, size_t index,
                                                                        grove_value_kind_t* out_kind);
/* The position of the input or output called `name`; NOT_FOUND if none is. */
GROVE_API GROVE_MUST_USE_RESULT grove_status_t* grove_model_input_index(const grove_model_t* model,
                                                                        const char* name, size_t* out_index);
GROVE_API GROVE_MUST_USE_RESULT grove_status_t* grove_model_output_index(const grove_model_t* model,
                                                                         const char* name, size_t* out_index);

/* ------------------------------------------------------------------------ */
/* Session                                                                   */
/* ------------------------------------------------------------------------ */

/* Where a session runs. */
typedef int32_t grove_device_t;
enum grove_device_e {
  GROVE_DEVICE_CPU = 0,
  GROVE_DEVICE_CUDA = 1,
  GROVE_DEVICE_AUTO = 2, /* CUDA when a device exists, else CPU */
};

/* How f32 matrix products multiply on CUDA (see grove::GemmMath). */
typedef int32_t grove_gemm_math_t;
enum grove_gemm_math_e {
  GROVE_GEMM_MATH_F32 = 0,  /* IEEE f32 (default) */
  GROVE_GEMM_MATH_TF32 = 1, /* inputs rounded to tf32, f32 accumulate */
  GROVE_GEMM_MATH_BF16 = 2, /* inputs rounded to bf16, f32 accumulate */
  GROVE_GEMM_MATH_F16 = 3,  /* inputs rounded to f16, f32 accumulate */
};

/* Whether a CUDA session replays its segments as CUDA graphs (see
 * grove::GraphMode and grove::SessionOptions::cuda_graphs). */
typedef int32_t grove_graph_mode_t;
enum grove_graph_mode_e {
  GROVE_GRAPH_MODE_AUTO = 0, /* graphs where the device captures them (default) */
  GROVE_GRAPH_MODE_ON = 1,   /* the same, and a device that cannot is an error at create */
  GROVE_GRAPH_MODE_OFF = 2,  /* every step launched one by one */
};

/* How much a session's message matters (grove::LogLevel). */
typedef int32_t grove_log_level_t;
enum grove_log_level_e {
  GROVE_LOG_DEBUG = 0,    /* what a run did: a plan made for new shapes, a graph captured */
  GROVE_LOG_INFO = 1,     /* a cache dropped something to stay within its limit */
  GROVE_LOG_WARNING = 2,  /* slower than it could be: a CPU fallback, a segment without a graph, a bucket pinned */
  GROVE_LOG_ERROR = 3,    /* a failure with no call to return it to (a trace not written at release) */
};

/* Receives a session's messages (grove_session_options_t.log_callback), on
 * the thread that runs the session. `message` is NUL-terminated UTF-8,
 * valid only during the call. It must not call back into the session. */
typedef void (*grove_log_callback_t)(void* user_data, grove_log_level_t level, const char* message);

/* Stops runs from another thread (ONNX Runtime's RunOptions::SetTerminate):
 * give it to sessions in grove_session_options_t.cancel_token, then
 * grove_cancel_token_cancel() from any thread makes their runs in progress
 * return GROVE_STATUS_CANCELLED at the next step or loop iteration. The flag
 * stays set (every run that starts returns CANCELLED at once) until
 * grove_cancel_token_reset(). Thread-safe. A session keeps its own reference,
 * so the token may be released before the sessions that watch it. */
typedef struct grove_cancel_token_t grove_cancel_token_t;

GROVE_API GROVE_MUST_USE_RESULT grove_status_t* grove_cancel_token_create(grove_cancel_token_t** out_token);
GROVE_API GROVE_MUST_USE_RESULT grove_status_t* grove_cancel_token_cancel(grove_cancel_token_t* token);
GROVE_API GROVE_MUST_USE_RESULT grove_status_t* grove_cancel_token_reset(grove_cancel_token_t* token);
/* *out_cancelled = 1 when cancelled, else 0. */
GROVE_API GROVE_MUST_USE_RESULT grove_status_t* grove_cancel_token_is_cancelled(const grove_cancel_token_t* token,
                                                                                int32_t* out_cancelled);
GROVE_API void grove_cancel_token_release(grove_cancel_token_t* token);

/* How a session runs. Fill with grove_session_options_initialize() (which
 * sets struct_size and every default) and then change fields.
 *
 * Versions (see "Versioned structs" at the top):
 *   1 (GROVE_SESSION_OPTIONS_SIZE_V1): device ... max_body_runs.
 *   2 (GROVE_SESSION_OPTIONS_SIZE_V2): cuda_graphs, max_cached_graphs.
 *   3 (GROVE_SESSION_OPTIONS_SIZE_V3): intra_op_threads.
 *   4 (GROVE_SESSION_OPTIONS_SIZE_V4): shape_buckets, max_graph_bytes.
 *   5 (GROVE_SESSION_OPTIONS_SIZE_V5): trace_path, log_callback,
 *     log_user_data, trace_max_runs, log_level.
 *   6 (GROVE_SESSION_OPTIONS_SIZE_V6): kernel_table. */
typedef struct grove_session_options_t {
  size_t struct_size;        /* sizeof(grove_session_options_t) as the caller declares it */
  grove_device_t device;     /* default GROVE_DEVICE_AUTO */
  int32_t max_cached_plans;  /* plans kept per session, LRU; 0 = no limit; default 64 */
  /* CUDA only (see grove::SessionOptions): */
  int32_t cuda_device;           /* device ordinal; default 0 */
  void* cuda_stream;             /* a cudaStream_t the caller owns; NULL (default): the session's own */
  int32_t strict_device;         /* nonzero: ops without a CUDA kernel are an error; default 0 */
  int32_t outputs_on_device;     /* nonzero: grove_session_run returns device pointers; default 0 */
  grove_gemm_math_t gemm_math;   /* default GROVE_GEMM_MATH_F32 */
  /* Each run must end within this many milliseconds of its start, else it
   * returns GROVE_STATUS_DEADLINE_EXCEEDED (checked between steps and loop
   * iterations); 0 (default): no deadline. */
  int64_t run_deadline_ms;
  /* Runs watch this token (see grove_cancel_token_t); NULL (default): none. */
  grove_cancel_token_t* cancel_token;
  /* Most subgraph runs (If branches, Loop and Scan iterations, nested ones
   * included) in one run, else GROVE_STATUS_RESOURCE_EXHAUSTED; 0: no limit
   * but the per-Loop one. Default 10,000,000. */
  int64_t max_body_runs;
  /* Version 2. CUDA graphs (see grove::SessionOptions::cuda_graphs): each
   * straight-line segment of a plan is captured on its first run and
   * replayed as one graph launch after. Default GROVE_GRAPH_MODE_AUTO. */
  grove_graph_mode_t cuda_graphs;
  /* Most graphs kept per session (least recently replayed dropped first);
   * 0: no limit. Default 512. */
  int32_t max_cached_graphs;
  /* Version 3. Threads a CPU session splits one large kernel's work over,
   * the calling thread included; the session starts intra_op_threads - 1
   * workers of its own (see grove::SessionOptions::intra_op_threads).
   * 1 (default): the calling thread only; 0: one per core the process may
   * run on; at most 256. */
  int64_t intra_op_threads;
  /* Version 4. CUDA graphs' shape buckets (see
   * grove::SessionOptions::shape_buckets): "SYMBOL=RULE;SYMBOL=RULE", each
   * RULE auto, pow2, step:N, a list of bounds A,B,C, or exact; SYMBOL * for
   * every symbol not named. Read (copied) by grove_session_create. NULL or
   * "" (default): every symbol auto. */
  const char* shape_buckets;
  /* Most bytes of CUDA graphs kept per session (least recently replayed
   * dropped first, the newest kept); 0 (default): no limit. */
  int64_t max_graph_bytes;
  /* Version 5. Traces runs into this file in the Chrome trace event format
   * (JSON that Perfetto and chrome://tracing open; see
   * grove::SessionOptions::trace_path): one event per run, per step run,
   * per segment, body call, plan made, capture and copy. Written when the
   * session is released and by grove_session_write_trace(). Read (copied)
   * by grove_session_create, which fails when the file cannot be written.
   * NULL or "" (default): no tracing. */
  const char* trace_path;
  /* The session's messages at log_level or above (grove_log_callback_t),
   * given `log_user_data`; NULL (default): none. The library prints
   * nothing to stderr itself. */
  grove_log_callback_t log_callback;
  void* log_user_data;
  /* Runs the trace keeps (the last ones); at least 1. Default 100. */
  int32_t trace_max_runs;
  /* Default GROVE_LOG_WARNING. */
  grove_log_level_t log_level;
  /* Version 6. A kernel dispatch table written by `grove tune` (see
   * grove::SessionOptions::kernel_table): CUDA steps take the kernel
   * variant measured fastest for their shape bucket from it, before the
   * tables shipped with grove. Read by grove_session_create, which fails
   * (GROVE_STATUS_INVALID_ARGUMENT naming the file) when it cannot be read
   * or is not a valid table. NULL or "" (default): the shipped tables only. */
  const char* kernel_table;
} grove_session_options_t;

/* The size of each version of grove_session_options_t. */
#define GROVE_SESSION_OPTIONS_SIZE_V1 \
  (offsetof(grove_session_options_t, max_body_runs) + sizeof(int64_t))
#define GROVE_SESSION_OPTIONS_SIZE_V2 \
  (offsetof(grove_session_options_t, max_cached_graphs) + sizeof(int32_t))
#define GROVE_SESSION_OPTIONS_SIZE_V3 \
  (offsetof(grove_session_options_t, intra_op_threads) + sizeof(int64_t))
#define GROVE_SESSION_OPTIONS_SIZE_V4 \
  (offsetof(grove_session_options_t, max_graph_bytes) + sizeof(int64_t))
#define GROVE_SESSION_OPTIONS_SIZE_V5 \
  (offsetof(grove_session_options_t, log_level) + sizeof(grove_log_level_t))
#define GROVE_SESSION_OPTIONS_SIZE_V6 \
  (offsetof(grove_session_options_t, kernel_table) + sizeof(const char*))

/* Sets out_options->struct_size to `struct_size` and writes the defaults of
 * the fields within it; bytes past the fields this library knows (a newer
 * caller's) are set to 0. Does nothing when `out_options` is NULL or
 * `struct_size` is not a size grove_session_create() accepts. FFI callers
 * call this with the sizeof of their struct; C and C++ callers call
 * grove_session_options_initialize(). */
GROVE_API void grove_session_options_initialize_sized(grove_session_options_t* out_options, size_t struct_size);

/* Writes the defaults and this header's struct_size. Does nothing when
 * `out_options` is NULL. (Inline, so the size is the caller's.) */
static inline void grove_session_options_initialize(grove_session_options_t* out_options) {
  grove_session_options_initialize_sized(out_options, sizeof(grove_session_options_t));
}

/* Runs a model; one thread at a time. */
typedef struct grove_session_t grove_session_t;

/* `options` may be NULL for the defaults. */
GROVE_API GROVE_MUST_USE_RESULT grove_status_t* grove_session_create(const grove_model_t* model,
                                                                     const grove_session_options_t* options,
                                                                     grove_session_t** out_session);
GROVE_API void grove_session_release(grove_session_t* session);

/* Writes the trace of the runs the session keeps (see
 * grove_session_options_t.trace_path) to `path`, or to trace_path when
 * `path` is NULL or "". FAILED_PRECONDITION when the session does not
 * trace; INVALID_ARGUMENT naming the file when it cannot be written. */
GROVE_API GROVE_MUST_USE_RESULT grove_status_t* grove_session_write_trace(const grove_session_t* session,
                                                                          const char* path);

/* The device the session runs on (never GROVE_DEVICE_AUTO). */
GROVE_API GROVE_MUST_USE_RESULT grove_status_t* grove_session_device(const grove_session_t* session,
                                                                     grove_device_t* out_device);

/* Runs the model once.
 *
 * `inputs` holds one tensor per model input, in model order
 * (grove_model_input_index finds a position by name); `n_inputs` must equal
 * the model's input count. `outputs` holds one entry per model output, in
 * model order; `n_outputs` must equal the model's output count. For each
 * output:
 *   - data == NULL: the session fills dtype, rank, dims, data and byte_size;
 *     `data` points into the session and stays valid until the next
 *     grove_session_run on this session (successful or not) or its release.
 *   - data != NULL: a caller-provided buffer. dtype, rank and dims must equal
 *     the result's and byte_size must be large enough, else the call fails
 *     with INVALID_ARGUMENT naming the output. The result is written there.
 * When every output has a buffer this is grove_session_run_into(). When
 * some do and some do not, the results are copied into the given buffers
 * with a host copy: on a CUDA session those buffers must be host memory,
 * and a session with outputs_on_device refuses the mix
 * (GROVE_STATUS_FAILED_PRECONDITION).
 * On error no output struct is modified (the contents of caller-provided
 * buffers are then unspecified). */
GROVE_API GROVE_MUST_USE_RESULT grove_status_t* grove_session_run(grove_session_t* session,
                                                                  const grove_tensor_t* inputs, size_t n_inputs,
                                                                  grove_tensor_t* outputs, size_t n_outputs);

/* Runs the model once, writing each output into the caller's buffer
 * (grove::Session::RunInto). `inputs` as for grove_session_run. `outputs`
 * holds one tensor per model output, in model order, and is only read: its
 * dtype, rank and dims must equal the result's (INVALID_ARGUMENT naming the
 * output otherwise; an output whose shape depends on the data needs
 * grove_session_run), byte_size must hold them and data must be non-NULL
 * unless the output has no elements. On a CUDA session inputs and outputs
 * may be host or device memory (device pointers of the session's device);
 * the kernels write device buffers directly where they can, so an output
 * buffer must not overlap an input. Returns when the results are in place
 * (the stream is synchronized). On error the buffers' contents are
 * unspecified. */
GROVE_API GROVE_MUST_USE_RESULT grove_status_t* grove_session_run_into(grove_session_t* session,
                                                                       const grove_tensor_t* inputs, size_t n_inputs,
                                                                       const grove_tensor_t* outputs,
                                                                       size_t n_outputs);

/* The session's own buffer for input `name` at `dims[0..rank)`
 * (grove::Session::InputBuffer): device memory on a CUDA session. Write the
 * input there and pass *out_tensor to a run as that input: it is used in
 * place (nothing copied in; a CUDA graph replays as captured). Valid until
 * the session is released or a larger shape is asked for the same input
 * (it then moves, its contents lost). Tensor inputs only. */
GROVE_API GROVE_MUST_USE_RESULT grove_status_t* grove_session_input_buffer(grove_session_t* session,
                                                                           const char* name, int32_t rank,
                                                                           const int64_t* dims,
                                                                           grove_tensor_t* out_tensor);

/* A value of any kind for grove_session_run_values. A tensor or a present
 * optional tensor has n_tensors == 1; a sequence (or a present optional
 * sequence) has one tensor per item; an absent optional has has_value == 0
 * and n_tensors == 0. `dtype` is the tensors' dtype (it also types an empty
 * sequence). The struct owns nothing. Frozen (no struct_size), as
 * grove_tensor_t: callers pass arrays of it. */
typedef struct grove_value_t {
  grove_value_kind_t kind;
  grove_dtype_t dtype;
  int32_t has_value;
  size_t n_tensors;
  grove_tensor_t* tensors;
} grove_value_t;

/* Runs a model whose inputs or outputs may be sequences or optionals (any
 * model works). `inputs` holds one value per model input, in model order; the
 * input tensors are copied, so the caller may free them when this returns.
 * The session fills every output: its kind, dtype, has_value, n_tensors and
 * `tensors`, an array it owns whose tensors point into the session; both
 * stay valid until the next run on this session (successful or not) or its
 * release. */
GROVE_API GROVE_MUST_USE_RESULT grove_status_t* grove_session_run_values(grove_session_t* session,
                                                                         const grove_value_t* inputs, size_t n_inputs,
                                                                         grove_value_t* outputs, size_t n_outputs);

/* Counters since the session was created (grove::SessionStats). Start from
 * GROVE_SESSION_STATS_INIT, or set struct_size to its sizeof and the rest to
 * anything: grove_session_stats() writes every field it knows within
 * struct_size and leaves the others (a newer caller's) as they were.
 *
 * Versions (see "Versioned structs" at the top):
 *   1 (GROVE_SESSION_STATS_SIZE_V1): runs ... host_waits_inside_segments.
 *   2 (GROVE_SESSION_STATS_SIZE_V2): cpu_fallback_steps,
 *     bytes_host_to_device, bytes_device_to_host.
 *   3 (GROVE_SESSION_STATS_SIZE_V3): graphs_captured ...
 *     graph_fallback_reason.
 *   4 (GROVE_SESSION_STATS_SIZE_V4): graph_refreshes.
 *   5 (GROVE_SESSION_STATS_SIZE_V5): buckets_made ... bucket_fallback_reason.
 *   6 (GROVE_SESSION_STATS_SIZE_V6): arena_bytes, arena_own_plans.
 *   7 (GROVE_SESSION_STATS_SIZE_V7): control_flow_in_graphs ...
 *     control_flow_fallback_reason. */
typedef struct grove_session_stats_t {
  size_t struct_size;  /* sizeof(grove_session_stats_t) as the caller declares it */
  /* Version 1: */
  int64_t runs;
  int64_t plans_created;    /* plan-cache misses, all subgraphs */
  int64_t plan_cache_hits;  /* all subgraphs (a Loop body hits once per trip) */
  int64_t plans_evicted;
  int64_t kernels_run;
  /* CUDA, made by this session's runs (0 on the CPU): */
  int64_t device_allocations;       /* device memory allocations (none at a plan-cache hit) */
  int64_t device_synchronizations;  /* waits for the session's stream */
  int64_t device_to_host_reads;     /* copies from device to host memory */
  /* Both backends: */
  int64_t segments_run;             /* straight-line segments executed (see grove inspect --device cuda) */
  /* Synchronizations and device-to-host reads made by a step that does not
   * end a segment: 0 when every segment could be captured as a CUDA graph. */
  int64_t host_waits_inside_segments;
  /* Version 2. CUDA (0 on the CPU): */
  int64_t cpu_fallback_steps;    /* steps of ops with no CUDA kernel, run on the CPU with copies */
  int64_t bytes_host_to_device;  /* inputs, fallbacks */
  int64_t bytes_device_to_host;  /* outputs, fallbacks, control-flow conditions */
  /* Version 3. CUDA graphs (grove_session_options_t.cuda_graphs); 0 on the
   * CPU but segments_run_eagerly, which there counts every segment run: */
  int64_t graphs_captured;          /* segment captures, recaptures included */
  int64_t graph_replays;            /* segment runs that were one launch of a graph captured before */
  int64_t segments_run_eagerly;     /* segment runs launched step by step (see graph_fallback_reason) */
  int64_t graph_capture_failures;   /* captures that failed; the segment then ran step by step */
  int64_t graphs_evicted;           /* dropped past max_cached_graphs */
  int64_t graphs_held;              /* graphs the session holds now */
  int64_t graph_nodes;              /* kernel, GEMM and copy nodes in them */
  int64_t graph_bytes;              /* their recorded parameters (the driver's share unseen) */
  int64_t graph_launches;           /* graph launches made (captures and replays) */
  int64_t launches_outside_graphs;  /* kernel launches and GEMMs made one by one */
  /* Why the last segment that runs step by step for good is not a graph;
   * "" when none. Owned by the session: valid until its next
   * grove_session_stats call, or its release. */
  const char* graph_fallback_reason;
  /* Version 4: replays whose buffers had moved, made after rewriting the
   * graph's kernel parameters instead of a new capture. */
  int64_t graph_refreshes;
  /* Version 5. Shape buckets (grove_session_options_t.shape_buckets; 0 on
   * the CPU): buckets made, runs that used their bucket's arena and graphs,
   * and over those runs the inputs' bytes at their bucket's bound and the
   * part past the actual shapes (the padding waste). */
  int64_t buckets_made;
  int64_t bucketed_runs;
  int64_t bucket_input_bytes;
  int64_t bucket_padding_bytes;
  /* Why the last shape that could not use its bucket ran with its own
   * arena and graphs; "" when none. Owned as graph_fallback_reason is. */
  const char* bucket_fallback_reason;
  /* Version 6. The session's stable arena (CUDA; 0 on the CPU): device
   * memory mapped in its address ranges, one per nesting depth of the
   * model's subgraphs, shared by every plan, bucket and graph of a depth at
   * addresses that never move; and plans that hold an arena of their own
   * instead (no ranges on the device, or a plan that outgrew its range). */
  int64_t arena_bytes;
  int64_t arena_own_plans;
  /* Version 7. Control flow on CUDA (If and Loop steps; 0 on the CPU): steps
   * that ran as one CUDA graph whose conditional node picked the branch or
   * ran the trips on the device (no condition read back), and steps the
   * host drove (the condition read back, each branch or trip launched from
   * the host). */
  int64_t control_flow_in_graphs;
  int64_t control_flow_host_driven;
  /* Why the last If or Loop step that ran host-driven could not be a
   * conditional node; "" when none. Owned as graph_fallback_reason is. */
  const char* control_flow_fallback_reason;
} grove_session_stats_t;

/* The size of each version of grove_session_stats_t. */
#define GROVE_SESSION_STATS_SIZE_V1 \
  (offsetof(grove_session_stats_t, host_waits_inside_segments) + sizeof(int64_t))
#define GROVE_SESSION_STATS_SIZE_V2 \
  (offsetof(grove_session_stats_t, bytes_device_to_host) + sizeof(int64_t))
#define GROVE_SESSION_STATS_SIZE_V3 \
  (offsetof(grove_session_stats_t, graph_fallback_reason) + sizeof(const char*))
#define GROVE_SESSION_STATS_SIZE_V4 \
  (offsetof(grove_session_stats_t, graph_refreshes) + sizeof(int64_t))
#define GROVE_SESSION_STATS_SIZE_V5 \
  (offsetof(grove_session_stats_t, bucket_fallback_reason) + sizeof(const char*))
#define GROVE_SESSION_STATS_SIZE_V6 \
  (offsetof(grove_session_stats_t, arena_own_plans) + sizeof(int64_t))
#define GROVE_SESSION_STATS_SIZE_V7 \
  (offsetof(grove_session_stats_t, control_flow_fallback_reason) + sizeof(const char*))

/* grove_session_stats_t stats = GROVE_SESSION_STATS_INIT; in C, or
 * grove_session_stats_initialize(&stats) (any C++: g++ -Wextra warns about
 * the fields the macro leaves to zero-initialization). */
#define GROVE_SESSION_STATS_INIT {.struct_size = sizeof(grove_session_stats_t)}
/* Zeroes `out_stats` and sets this header's struct_size (inline). */
static inline void grove_session_stats_initialize(grove_session_stats_t* out_stats) {
  if (out_stats == NULL) return;
  memset(out_stats, 0, sizeof(*out_stats));
  out_stats->struct_size = sizeof(*out_stats);
}

/* Writes the counters within out_stats->struct_size (see
 * grove_session_stats_t); struct_size itself is left as it was. */
GROVE_API GROVE_MUST_USE_RESULT grove_status_t* grove_session_stats(const grove_session_t* session,
                                                                    grove_session_stats_t* out_stats);

/* ------------------------------------------------------------------------ */
/* Ahead-of-time CUDA kernels                                                */
/* ------------------------------------------------------------------------ */

/* A shape: `rank` dims. Frozen (no struct_size), as grove_tensor_t: callers
 * pass arrays of it. */
typedef struct grove_shape_t {
  int32_t rank;
  int64_t dims[GROVE_MAX_RANK];
} grove_shape_t;

/* What grove_compile_kernels compiles (grove::KernelCompileOptions). Fill
 * with grove_kernel_compile_options_initialize(), then change fields.
 *
 * Versions (see "Versioned structs" at the top):
 *   1 (GROVE_KERNEL_COMPILE_OPTIONS_SIZE_V1): arch ... all_kernels. */
typedef struct grove_kernel_compile_options_t {
  size_t struct_size;  /* sizeof(grove_kernel_compile_options_t) as the caller declares it */
  /* "sm_90" (default), "sm_80", "90", "9.0"; NULL: the default. */
  const char* arch;
  /* One shape per model input, in model order: the model runs once on a
   * device that records the kernels it launches (zero-valued inputs).
   * Unused with all_kernels. Default none. */
  const grove_shape_t* input_shapes;
  size_t n_input_shapes;
  /* The cache folder; NULL or "" (default): $GROVE_CACHE_DIR, else
   * $XDG_CACHE_HOME/grove/kernels or ~/.cache/grove/kernels. */
  const char* cache_dir;
  /* Nonzero: every kernel module grove has, not only the model's. Default 0. */
  int32_t all_kernels;
  int32_t reserved; /* 0 */
} grove_kernel_compile_options_t;

#define GROVE_KERNEL_COMPILE_OPTIONS_SIZE_V1 \
  (offsetof(grove_kernel_compile_options_t, reserved) + sizeof(int32_t))

/* As grove_session_options_initialize_sized, for these options. */
GROVE_API void grove_kernel_compile_options_initialize_sized(grove_kernel_compile_options_t* out_options,
                                                             size_t struct_size);
/* Writes the defaults and this header's struct_size; NULL: does nothing. */
static inline void grove_kernel_compile_options_initialize(grove_kernel_compile_options_t* out_options) {
  grove_kernel_compile_options_initialize_sized(out_options, sizeof(grove_kernel_compile_options_t));
}

/* What a grove_compile_kernels call did: an immutable handle whose strings
 * live as long as it. */
typedef struct grove_kernel_report_t grove_kernel_report_t;

/* Compiles into the kernel disk cache, with NVRTC and no GPU, every CUDA
 * kernel `model` needs at `options->input_shapes` (or every kernel, with
 * all_kernels) for `options->arch`, so a first run on a GPU of that arch
 * compiles nothing (grove::CompileKernels; the CLI's `grove compile`).
 * `options` may be NULL for the defaults (then a model with inputs fails:
 * it needs their shapes). `out_report` may be NULL when only the status
 * matters. A second identical call compiles nothing. */
GROVE_API GROVE_MUST_USE_RESULT grove_status_t* grove_compile_kernels(const grove_model_t* model,
                                                                      const grove_kernel_compile_options_t* options,
                                                                      grove_kernel_report_t** out_report);
GROVE_API void grove_kernel_report_release(grove_kernel_report_t* report);

/* The numbers and notes of a report. Strings are owned by the report.
 *
 * Versions (see "Versioned structs" at the top):
 *   1 (GROVE_KERNEL_REPORT_SUMMARY_SIZE_V1): cache_dir ... compile_ms. */
typedef struct grove_kernel_report_summary_t {
  size_t struct_size;  /* sizeof(grove_kernel_report_summary_t) as the caller declares it */
  const char* cache_dir;  /* the cache folder filled */
  /* Why the set may be incomplete (the dry run stopped early, or took one
   * branch of data-dependent control flow); "" when nothing to say. */
  const char* note;
  int32_t arch;         /* 90 for sm_90 */
  int32_t n_modules;    /* kernel modules needed; see grove_kernel_report_module */
  int32_t compiled;     /* compiled by NVRTC now */
  int32_t cached;       /* found in the cache */
  int32_t corrupt;      /* found truncated or corrupt (then recompiled) */
  int32_t stale;        /* found for another NVRTC or key (then recompiled) */
  double compile_ms;    /* NVRTC time */
} grove_kernel_report_summary_t;

#define GROVE_KERNEL_REPORT_SUMMARY_SIZE_V1 \
  (offsetof(grove_kernel_report_summary_t, compile_ms) + sizeof(double))
/* grove_kernel_report_summary_t summary = GROVE_KERNEL_REPORT_SUMMARY_INIT;
 * or grove_kernel_report_summary_initialize(&summary), as for the stats. */
#define GROVE_KERNEL_REPORT_SUMMARY_INIT {.struct_size = sizeof(grove_kernel_report_summary_t)}
static inline void grove_kernel_report_summary_initialize(grove_kernel_report_summary_t* out_summary) {
  if (out_summary == NULL) return;
  memset(out_summary, 0, sizeof(*out_summary));
  out_summary->struct_size = sizeof(*out_summary);
}

/* Writes the fields within out_summary->struct_size. */
GROVE_API GROVE_MUST_USE_RESULT grove_status_t* grove_kernel_report_summary(
    const grove_kernel_report_t* report, grove_kernel_report_summary_t* out_summary);
/* The name of module `index` ("elementwise__f32", ...), owned by the report;
 * OUT_OF_RANGE past n_modules. */
GROVE_API GROVE_MUST_USE_RESULT grove_status_t* grove_kernel_report_module(const grove_kernel_report_t* report,
                                                                           size_t index, const char** out_name);

/* ------------------------------------------------------------------------ */
/* DLPack                                                                    */
/* ------------------------------------------------------------------------ */

/* DLPack's managed tensor (dlpack/dlpack.h, DLPack 0.6 or later: Debian's
 * libdlpack-dev), declared only, so that this header needs no DLPack
 * install; a caller that passes one includes dlpack/dlpack.h itself. The
 * versioned form of DLPack 1.0 (DLManagedTensorVersioned) is not taken:
 * Debian's DLPack 0.6 does not have it.
 *
 * What grove takes as a DLPack tensor for an input of a session (anything
 * else is GROVE_STATUS_INVALID_ARGUMENT naming the input and what was wrong):
 *   - device: kDLCPU or kDLCUDAHost (host memory) on any session; kDLCUDA on
 *     a CUDA session whose CUDA device (options.cuda_device) is device_id;
 *   - dtype: lanes 1, and kDLFloat 16/32/64, kDLBfloat 16, kDLInt and
 *     kDLUInt 8/16/32/64, or kDLBool (code 6, DLPack 0.8) 8 bits; DLPack has
 *     no strings;
 *   - layout: compact row-major (strides NULL, or every dim of extent above
 *     1 has the row-major stride); the data is read in place, never copied,
 *     so a strided view is refused: give a contiguous copy;
 *   - data + byte_offset aligned to the element size; ndim 0..GROVE_MAX_RANK,
 *     no negative dim, shape non-NULL when ndim > 0, data non-NULL unless
 *     the tensor has no elements. */
struct DLManagedTensor;

/* Checks `tensor` as an input of `session` (see above) and describes it in
 * *out_tensor, pointing at its data, for grove_session_run or _run_into:
 * so DLPack tensors and grove_tensor_t inputs mix in one run. Borrows: the
 * caller keeps `tensor` and calls its deleter once the run that used the
 * view has returned. */
GROVE_API GROVE_MUST_USE_RESULT grove_status_t* grove_dlpack_view(const grove_session_t* session,
                                                                  const struct DLManagedTensor* tensor,
                                                                  grove_tensor_t* out_tensor);

/* Runs the model once with DLPack inputs and outputs.
 *
 * `inputs` holds one tensor per model input, in model order, used in place.
 * The call consumes them: before it returns, whatever it returns (a NULL or
 * released session, a bad count, a refused tensor, a failed run included),
 * it calls the deleter of every non-NULL inputs[i] exactly once (a tensor
 * given for several inputs once), so the caller never calls them itself.
 *
 * On success out_outputs[i] is a new DLManagedTensor per model output, in
 * model order: host memory (kDLCPU, device_id 0), compact row-major with
 * strides given, holding a copy of the result that the tensor owns: it
 * outlives the session, and the caller calls out_outputs[i]->deleter(
 * out_outputs[i]) once when done, which frees it. On error out_outputs is
 * not written. A string output is refused (DLPack has no strings: use
 * grove_session_run), as is a CUDA session with outputs_on_device
 * (GROVE_STATUS_FAILED_PRECONDITION: use grove_session_run_into). */
GROVE_API GROVE_MUST_USE_RESULT grove_status_t* grove_session_run_dlpack(grove_session_t* session,
                                                                         struct DLManagedTensor* const* inputs,
                                                                         size_t n_inputs,
                                                                         struct DLManagedTensor** out_outputs,
                                                                         size_t n_outputs);

#ifdef __cplusplus
}  /* extern "C" */
#endif

#endif /* GROVE_GROVE_C_H_ */
