// grove: an embedded inference runtime for dynamic neural networks.
//
// The C++ API. A Model is loaded once (read-only, weights used in place) and
// shared by any number of Sessions; a Session runs it for one thread at a time.
//
//   auto model = grove::Model::LoadFromFile("mlp.grove");
//   if (!model.ok()) return model.status();
//   auto session = grove::Session::Create(*model, {});
//   std::vector<float> x(3 * 16);
//   grove::TensorView in(grove::DType::kF32, {3, 16}, x.data());
//   absl::StatusOr<std::vector<grove::TensorView>> out = (*session)->Run({in});
//
// Errors are absl::Status values; nothing here throws or aborts on bad input.
#ifndef GROVE_GROVE_H_
#define GROVE_GROVE_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include "absl/strings/string_view.h"
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace grove {

// Library version, also returned by grove_version() in the C ABI.
inline constexpr int kVersionMajor = 0;
inline constexpr int kVersionMinor = 2;
inline constexpr int kVersionPatch = 0;
// "0.2.0".
absl::string_view Version();
// The newest model format version this library reads and writes.
inline constexpr uint32_t kFormatVersion = 1;

// Element types. Values match the model format and the C ABI.
enum class DType : int32_t {
  kUnknown = 0,
  kF32 = 1,
  kF64 = 2,
  kF16 = 3,
  kBF16 = 4,
  kI64 = 5,
  kI32 = 6,
  kI8 = 7,
  kU8 = 8,
  kBool = 9,
  kI16 = 10,
  kU16 = 11,
  kU32 = 12,
  kU64 = 13,
  // UTF-8 text: each element is a grove::StringRef (see below).
  kString = 14,
};
// Bytes per element (sizeof(StringRef) for kString); 0 for kUnknown.
size_t DTypeSize(DType dtype);
// "f32", "i64", ...; "unknown" for anything else.
absl::string_view DTypeName(DType dtype);
// Parses a DTypeName() string.
absl::StatusOr<DType> ParseDType(absl::string_view name);

// One element of a kString tensor: `size` bytes of UTF-8 at `data` (not
// NUL-terminated; data may be null when size is 0). A string tensor's data is
// an array of these, so copying, reshaping or gathering it moves references,
// never the bytes. Whoever owns the tensor owns the bytes: the caller for
// inputs (a run copies them first, so outputs never point into the caller's
// buffers); for outputs of Session::Run and RunInto the session, until the
// next run (as for Run's arrays themselves); an owning Tensor for itself.
// Zero-filled elements are empty strings. String tensors live in host memory
// on every device. Layout-compatible with grove_string_t in the C ABI.
struct StringRef {
  StringRef() = default;
  StringRef(absl::string_view s) : data(s.data()), size(s.size()) {}  // NOLINT: implicit on purpose
  absl::string_view view() const { return absl::string_view(data, size); }
  operator absl::string_view() const { return view(); }  // NOLINT
  const char* data = nullptr;
  size_t size = 0;
};

// A non-owning view of a dense, row-major tensor. Whoever made the view owns
// the memory; views returned by Session::Run point into the session and stay
// valid until the next Run on that session or its destruction.
struct TensorView {
  TensorView() = default;
  TensorView(DType dtype, std::vector<int64_t> shape, void* data)
      : dtype(dtype), shape(std::move(shape)), data(data) {}
  TensorView(DType dtype, std::vector<int64_t> shape, const void* data)
      : dtype(dtype), shape(std::move(shape)), data(const_cast<void*>(data)) {}

  // Product of dims (1 for rank 0).
  int64_t num_elements() const;
  size_t byte_size() const { return static_cast<size_t>(num_elements()) * DTypeSize(dtype); }
  template <typename T>
  T* as() const { return static_cast<T*>(data); }

  DType dtype = DType::kUnknown;
  std::vector<int64_t> shape;
  void* data = nullptr;
};

// An owning, 64-byte aligned tensor, for callers that want the library to hold
// the bytes (the CLI, tests, copies of session-owned outputs).
class Tensor {
 public:
  Tensor() = default;
  // Zero-filled storage (empty strings for kString). Fails on negative dims
  // or a size that overflows.
  static absl::StatusOr<Tensor> Create(DType dtype, std::vector<int64_t> shape);
  // A deep copy of `view`; for kString, of the strings' bytes too (the copy
  // owns them and no longer refers to `view`'s).
  static absl::StatusOr<Tensor> CopyOf(const TensorView& view);
  // A copy of `view` converted to `dtype` by the Cast op's rules: f16 and
  // bf16 round to nearest even, floats to integers truncate (saturating, NaN
  // gives 0), anything to bool is "!= 0"; numbers to kString are written as
  // NumPy prints them (the shortest text that reads back to the same value),
  // kString to numbers is parsed ("NaN", "INF", "-INF" included) and text
  // that is not a number of that type is an InvalidArgument error.
  static absl::StatusOr<Tensor> CastOf(const TensorView& view, DType dtype);

  const TensorView& view() const { return view_; }
  DType dtype() const { return view_.dtype; }
  const std::vector<int64_t>& shape() const { return view_.shape; }
  void* data() { return view_.data; }
  const void* data() const { return view_.data; }
  template <typename T>
  T* as() { return static_cast<T*>(view_.data); }
  template <typename T>
  const T* as() const { return static_cast<const T*>(view_.data); }

 private:
  std::shared_ptr<void> storage_;
  TensorView view_;
};

// What a model input or output holds (ONNX's value types): a tensor, a
// sequence of tensors of one dtype (their shapes may differ), or an optional
// tensor or sequence that may be absent.
enum class ValueKind : int32_t {
  kTensor = 0,
  kSequence = 1,
  kOptionalTensor = 2,
  kOptionalSequence = 3,
};
// "tensor", "sequence", "optional tensor", "optional sequence".
absl::string_view ValueKindName(ValueKind kind);

// A value of any kind, owning its tensors (copies share their bytes). For
// models whose inputs or outputs are sequences or optionals; see
// Session::RunValues.
//
//   grove::Value seq = grove::Value::Sequence(grove::DType::kF32, {a, b});
//   grove::Value none = grove::Value::None(grove::ValueKind::kOptionalTensor, grove::DType::kF32);
class Value {
 public:
  Value() = default;  // a tensor value with no tensor (dtype kUnknown)
  explicit Value(Tensor tensor);
  // A sequence of `dtype` tensors; every item must have that dtype.
  static Value Sequence(DType dtype, std::vector<Tensor> items = {});
  // An absent optional; `kind` is kOptionalTensor or kOptionalSequence.
  static Value None(ValueKind kind, DType dtype);
  // A present optional holding `inner` (a tensor or a sequence value).
  static Value Some(Value inner);

  ValueKind kind() const { return kind_; }
  DType dtype() const { return dtype_; }  // the tensor's or the items' dtype
  bool is_sequence() const { return kind_ == ValueKind::kSequence || kind_ == ValueKind::kOptionalSequence; }
  // False only for an absent optional.
  bool has_value() const { return present_; }
  // The tensor of a tensor value or of a present optional tensor.
  const Tensor& tensor() const { return tensor_; }
  // The items of a sequence or of a present optional sequence.
  const std::vector<Tensor>& items() const { return items_; }
  std::vector<Tensor>& items() { return items_; }
  // "f32[2,3]", "seq(f32) of 4", "optional(seq(f32))" (absent), ...
  std::string DebugString() const;

 private:
  ValueKind kind_ = ValueKind::kTensor;
  DType dtype_ = DType::kUnknown;
  bool present_ = true;
  Tensor tensor_;
  std::vector<Tensor> items_;
};

// A dim of a declared shape: a constant, or a named symbol.
struct DimInfo {
  int64_t value = 0;   // meaningful when symbol is empty
  std::string symbol;  // non-empty: a dynamic dim
  bool is_symbolic() const { return !symbol.empty(); }
};

struct TensorInfo {
  std::string name;
  DType dtype = DType::kUnknown;  // for sequences and optionals, the tensors' dtype
  std::vector<DimInfo> shape;     // for sequences and optionals, the tensors' shape when declared
  ValueKind kind = ValueKind::kTensor;
};

struct SymbolInfo {
  std::string name;
  int64_t min = 1;
  int64_t max = 1;
};

// A summary of a model's content, for tools and logs.
struct ModelSummary {
  std::vector<std::pair<std::string, int>> op_counts;  // sorted by op type
  int num_subgraphs = 0;
  int num_operators = 0;  // all subgraphs
  uint64_t weight_bytes = 0;
  uint32_t format_version = 0;
  std::string producer;
  // Non-empty when symbolic shape inference (without concrete input shapes)
  // could not follow the whole graph; output shapes are then as declared, and
  // each plan infers its concrete shapes exactly.
  std::string shape_inference_note;
};

namespace internal {
class ModelImpl;
class SessionImpl;
struct SessionAccess;
}  // namespace internal

// An immutable, loaded model. Safe to share across threads.
class Model {
 public:
  // Maps the file read-only; weights are used in place, never copied on CPU.
  // A file of at most 1 MiB is read into aligned memory instead: one read
  // opens a small model faster than a mapping and its page faults.
  static absl::StatusOr<std::shared_ptr<const Model>> LoadFromFile(const std::string& path);
  // Copies `bytes` once into 64-byte aligned storage owned by the model.
  static absl::StatusOr<std::shared_ptr<const Model>> LoadFromBuffer(absl::Span<const uint8_t> bytes);

  ~Model();
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  const std::vector<TensorInfo>& inputs() const;
  // The outputs' names, dtypes and shapes: described on first use (symbolic
  // shape inference over the graph, once per model), not at load.
  const std::vector<TensorInfo>& outputs() const;
  // The outputs' names, in order, without describing them: what a run, the
  // outputs' count and a lookup by name need.
  const std::vector<std::string>& output_names() const;
  const std::vector<SymbolInfo>& symbols() const;
  ModelSummary Summary() const;

  const internal::ModelImpl& impl() const { return *impl_; }

 private:
  explicit Model(std::unique_ptr<internal::ModelImpl> impl);
  std::unique_ptr<internal::ModelImpl> impl_;
};

enum class Device : int32_t {
  kCpu = 0,
  kCuda = 1,
  kAuto = 2,  // CUDA when a device exists, else CPU
};
// Parses "cpu", "cuda" or "auto".
absl::StatusOr<Device> ParseDevice(absl::string_view name);

enum class GemmMath : int32_t { kF32 = 0, kTF32 = 1, kBF16 = 2, kF16 = 3 };
// Parses "f32", "tf32", "bf16" or "f16".
absl::StatusOr<GemmMath> ParseGemmMath(absl::string_view name);

// Whether a CUDA session replays its segments as CUDA graphs
// (SessionOptions::cuda_graphs).
enum class GraphMode : int32_t { kAuto = 0, kOn = 1, kOff = 2 };
// Parses "auto", "on" or "off".
absl::StatusOr<GraphMode> ParseGraphMode(absl::string_view name);

// Stops runs from another thread, as ONNX Runtime's RunOptions::SetTerminate
// does. Thread-safe: Cancel() may be called from any thread while a session
// that watches the token (SessionOptions::cancellation) is running; the run
// returns CANCELLED at its next check (before each step, each Loop, Scan or
// If body call), the session stays usable. The flag stays set, and every run
// that starts after it returns CANCELLED at once, until Reset().
//
//   auto token = std::make_shared<grove::CancellationToken>();
//   options.cancellation = token;
//   ... another thread: token->Cancel();
class CancellationToken {
 public:
  void Cancel() noexcept { cancelled_.store(true, std::memory_order_relaxed); }
  void Reset() noexcept { cancelled_.store(false, std::memory_order_relaxed); }
  bool IsCancelled() const noexcept { return cancelled_.load(std::memory_order_relaxed); }

 private:
  std::atomic<bool> cancelled_{false};
};

// How much a message of the library (SessionOptions::log_sink) matters.
// Values match the C ABI's grove_log_level_t.
enum class LogLevel : int32_t {
  kDebug = 0,    // what a run did: a plan made for new shapes, a graph captured
  kInfo = 1,     // a cache dropped something to stay within its limit
  kWarning = 2,  // slower than it could be: a CPU fallback, a segment without a graph, a bucket pinned
  kError = 3,    // something failed with no call to return it to (a trace not written at destruction)
};
// "debug", "info", "warning", "error".
absl::string_view LogLevelName(LogLevel level);
// Receives a session's messages, on the thread that runs the session; the
// message is valid only during the call. It must not call back into the
// session.
using LogSink = std::function<void(LogLevel level, absl::string_view message)>;

// The most threads SessionOptions::intra_op_threads takes.
inline constexpr int kMaxIntraOpThreads = 256;

struct SessionOptions {
  Device device = Device::kAuto;
  // Each run (Run, RunInto, RunValues) must end within this many
  // milliseconds of its start, else it returns DEADLINE_EXCEEDED; the
  // session stays usable. Checked before each step and each Loop, Scan or If
  // body call, so one long kernel overruns it by its own length. 0: none.
  int64_t run_deadline_ms = 0;
  // Runs watch this token (see CancellationToken); null: none. Several
  // sessions may share one.
  std::shared_ptr<const CancellationToken> cancellation;
  // Most subgraph runs (If branches, Loop and Scan body iterations, nested
  // ones included) in one run; past it the run returns RESOURCE_EXHAUSTED.
  // Bounds a Loop whose trip count or condition never stops it, without a
  // deadline: at the default a trivial body ends it in seconds. 0: no limit
  // but the per-Loop one (100,000,000 iterations).
  int64_t max_body_runs = 10'000'000;
  // Most plans (input signatures, Loop bodies' included) kept per session;
  // past this the least recently used one of an earlier run is dropped (or,
  // when all served the current run, the most recently used). 0: no limit.
  int max_cached_plans = 64;
  // Threads a CPU session splits one large kernel's work over, the calling
  // thread included: elementwise ops, reductions, Softmax and the norms (by
  // rows), transposes, copies and Concat, and oneDNN's steps (Conv, MatMul,
  // Gemm). The session starts intra_op_threads - 1 worker threads of its
  // own, which no other session uses, so sessions whose counts add up to the
  // cores do not oversubscribe them (two sessions of 2 on 4 cores). Small
  // tensors stay on the calling thread. The reference kernels' results do
  // not depend on the count (work is split by elements and rows, never
  // inside one sum); oneDNN's agree within its usual bounds. 1 (the
  // default): the calling thread only; 0: one thread per core this process
  // may run on (its CPU affinity); at most kMaxIntraOpThreads. A CUDA
  // session's CPU steps run on the calling thread. OpenBLAS (f64 and
  // half-precision GEMMs, the recurrent ops) keeps its own process-wide
  // threads: OPENBLAS_NUM_THREADS.
  int intra_op_threads = 1;

  // --- CUDA only ---
  int cuda_device = 0;          // device ordinal
  // A cudaStream_t the caller owns (a serving application's stream); the
  // session enqueues all its work there. nullptr: the session makes its own.
  void* cuda_stream = nullptr;
  // Ops without a CUDA kernel run on the CPU with copies (counted in
  // SessionStats::cpu_fallback_steps); strict_device makes that an error.
  bool strict_device = false;
  // Run returns device pointers (valid until the next Run) instead of host
  // copies. Inputs may always be host or device pointers; device pointers
  // are used in place, host ones are copied in.
  bool outputs_on_device = false;
  // How f32 matrix products (MatMul, Gemm, Conv, the RNN projections) run on
  // CUDA: kF32 in IEEE f32 (the default, matches the CPU to ~1e-6); kTF32,
  // kBF16 or kF16 round the two inputs to tf32 (10-bit mantissa), bf16
  // (7-bit) or f16 (10-bit, range +-65504) and accumulate in f32 on tensor
  // cores. Each product then has a relative error of at most about 2^-10
  // (tf32, f16) or 2^-7 (bf16) of sum |a||b|; tests/cuda checks a transformer
  // block end to end within 2e-2 (bf16) and 4e-3 (f16, tf32) of the f32 run.
  // Elementwise ops, reductions and every stored tensor stay f32.
  GemmMath cuda_gemm_math = GemmMath::kF32;
  // A kernel dispatch table (schemas/kernels.fbs, written by `grove tune`):
  // the kernel variant measured fastest per (GPU arch, kernel family, dtypes,
  // shape bucket), looked up before the tables shipped with grove when a
  // step is prepared; a step no table covers runs the cost model's pick.
  // Session::Create fails (INVALID_ARGUMENT naming the file and what is
  // wrong) when the file cannot be read or is not a valid table. "" (the
  // default): the shipped tables only. Read by CUDA sessions only.
  std::string kernel_table;
  // CUDA graphs. A plan's straight-line segments (the steps between those
  // that need the host: see `grove inspect --device cuda`) are each captured
  // as a CUDA graph on their first run and replayed as one graph launch on
  // every later run of the same plan. A segment whose buffers moved (device
  // inputs given at new addresses) is captured again; after a few such
  // recaptures, or when a capture fails, it is launched step by step, with
  // the reason in SessionStats::graph_fallback_reason. kAuto and kOn: graphs
  // where the device captures them (a GPU, the emulated device; kOn makes a
  // device that cannot an error at Session::Create); kOff: every step
  // launched one by one.
  GraphMode cuda_graphs = GraphMode::kAuto;
  // Most graphs kept per session; past it the least recently replayed one is
  // dropped (and captured again if its segment runs again). 0: no limit.
  // Graphs also go with their plan when the plan cache drops it.
  int max_cached_graphs = 512;
  // Most bytes of graphs kept per session (SessionStats::graph_bytes: their
  // recorded nodes and parameter blocks); past it the least recently
  // replayed ones are dropped, the newest always kept. 0: no limit.
  int64_t max_graph_bytes = 0;
  // Shape buckets (CUDA graphs). The main graph's inputs are grouped by the
  // bucket each symbol's value falls in: the exact shapes of one bucket share
  // one arena (laid out for the bucket's bound, the largest shape it holds)
  // and one graph per segment, captured once at the bound and replayed for
  // each shape of the bucket after its kernels' parameters are refreshed
  // (kernels read the actual sizes; GEMMs whose only varying dim is M run at
  // the bound's M, into rows the arena holds for the bound). Inputs are copied
  // into the bucket's input slots. Per symbol, by name ("*": every symbol not
  // named), one of:
  //   "auto"     powers of two up to 256, then multiples of 256 (the default)
  //   "pow2"     powers of two
  //   "step:N"   multiples of N
  //   "A,B,C"    the listed bounds, ascending; values above the last are exact
  //   "exact"    no bucket: each shape is its own (plans, arenas and graphs
  //              per exact shape)
  // Bounds are clamped to the symbol's declared maximum. A shape whose plan
  // cannot take its bucket's layout (a step list or value that differs from
  // the bound's) runs with its own arena: SessionStats::bucket_fallback_reason.
  std::vector<std::pair<std::string, std::string>> shape_buckets;

  // --- Observability ---
  // Traces runs into this file in the Chrome trace event format (JSON that
  // Perfetto, ui.perfetto.dev, and chrome://tracing open). Each run is one
  // complete event ("ph":"X") enclosing its plan creation, input and output
  // copies, its segments (a CUDA graph launch, or steps one by one), each
  // If, Loop or Scan body call and one event per step run (op, node,
  // shapes, backend, segment). A segment replayed as a CUDA graph is one
  // event listing its steps. Times are host clocks: on CUDA a step's event
  // is the time to enqueue its kernels, and the run's event ends after the
  // stream is synchronized. The session keeps the events of its last
  // trace_max_runs runs and writes them when it is destroyed and on
  // Session::WriteTrace. Session::Create fails when the file cannot be
  // written. "" (default): no tracing (the executor pays one branch per
  // step).
  std::string trace_path;
  // Runs the trace keeps (the last ones); at least 1. A run keeps at most
  // 1,000,000 events; past that it counts the ones it dropped.
  int trace_max_runs = 100;
  // Messages of the session at log_level or above (graph fallbacks, CPU
  // fallbacks, pinned buckets, dropped plans and graphs); null (default):
  // none. The library writes nothing to stderr itself.
  LogSink log_sink;
  LogLevel log_level = LogLevel::kWarning;
};

// One tensor held at the peak of a memory plan.
struct PeakTensor {
  std::string name;
  uint64_t bytes = 0;
};

// The memory plan of the main graph for one input signature.
struct MemoryReport {
  uint64_t arena_bytes = 0;        // bytes the plan's arena takes
  uint64_t lower_bound_bytes = 0;  // the largest total of tensors live at one step
  int peak_step = -1;              // the step where that total is reached
  std::vector<PeakTensor> peak_tensors;  // largest first
  int num_steps = 0;
  int num_arena_tensors = 0;
  int num_folded_tensors = 0;      // computed at plan time (shape arithmetic)
  int num_dynamic_tensors = 0;     // shape known only when run (data dependent)
};

struct SessionStats {
  int64_t runs = 0;
  int64_t plans_created = 0;     // plan-cache misses, all subgraphs
  int64_t plan_cache_hits = 0;   // all subgraphs (a Loop body hits once per trip)
  int64_t plans_evicted = 0;
  int64_t kernels_run = 0;
  // CUDA: steps of ops with no CUDA kernel, run on the CPU with copies.
  int64_t cpu_fallback_steps = 0;
  int64_t bytes_host_to_device = 0;  // inputs, fallbacks
  int64_t bytes_device_to_host = 0;  // outputs, fallbacks, control-flow conditions
  // CUDA, made by this session's runs (0 on the CPU):
  int64_t device_allocations = 0;       // device memory allocations (none at a plan-cache hit)
  int64_t device_synchronizations = 0;  // waits for the session's stream
  int64_t device_to_host_reads = 0;     // copies from device to host memory
  // Both backends:
  int64_t segments_run = 0;             // straight-line segments executed (see grove inspect --device cuda)
  // Synchronizations and device-to-host reads made by a step that does not
  // end a segment: 0 when every segment could be captured as a CUDA graph.
  int64_t host_waits_inside_segments = 0;
  // CUDA graphs (SessionOptions::cuda_graphs; all 0 on the CPU):
  int64_t graphs_captured = 0;         // segment captures, recaptures included
  int64_t graph_replays = 0;           // segment runs that were one launch of a graph captured before
  // Replays whose buffers had moved: the graph's kernel parameters were
  // rewritten (one pass of host code, no launch) instead of a new capture.
  int64_t graph_refreshes = 0;
  int64_t segments_run_eagerly = 0;    // segment runs launched step by step (no graph: see graph_fallback_reason)
  int64_t graph_capture_failures = 0;  // captures that failed; the segment then ran step by step
  int64_t graphs_evicted = 0;          // dropped past max_cached_graphs
  int64_t graphs_held = 0;             // graphs the session holds now
  int64_t graph_nodes = 0;             // kernel, GEMM and copy nodes in them
  int64_t graph_bytes = 0;             // their recorded parameters (DeviceGraph::bytes; the driver's share unseen)
  int64_t graph_launches = 0;          // graph launches made (captures and replays)
  // Kernel launches and GEMMs made one by one (not in a graph): 0 in a
  // steady-state run of a model whose segments all replay.
  int64_t launches_outside_graphs = 0;
  // Why the last segment that runs step by step for good is not a graph
  // ("" when none): "graphs are off", a step prepared when it runs, a capture
  // that failed, buffers that keep moving.
  std::string graph_fallback_reason;
  // Shape buckets (SessionOptions::shape_buckets; CUDA graphs only):
  int64_t buckets_made = 0;         // buckets whose shapes share an arena and graphs
  int64_t bucketed_runs = 0;        // runs whose plan used its bucket's arena and graphs
  // Over bucketed runs: the main inputs' bytes at their bucket's bound, and
  // the part of them past the actual shapes (the padding waste is
  // bucket_padding_bytes / bucket_input_bytes).
  int64_t bucket_input_bytes = 0;
  int64_t bucket_padding_bytes = 0;
  // Why the last shape that could not use its bucket ran with its own plan
  // arena and graphs ("" when none).
  std::string bucket_fallback_reason;
  // The session's stable arena (CUDA): one device address range per nesting
  // depth of the model's subgraphs (the main graph, If/Loop/Scan bodies,
  // bodies inside those, ...), reserved once and mapped as the largest plan
  // of that depth needs, so every plan, bucket and graph of a depth shares
  // its memory and their addresses never move (graphs captured earlier stay
  // valid when it grows). arena_bytes: device memory mapped in those ranges
  // now. arena_own_plans: plans that hold an arena of their own instead (the
  // device cannot reserve address ranges, or a plan outgrew its range).
  int64_t arena_bytes = 0;
  int64_t arena_own_plans = 0;
  // Control flow on CUDA (If and Loop steps; 0 on the CPU): steps that ran
  // as one CUDA graph whose conditional node picked the branch or ran the
  // trips on the device (no condition read back), and steps the host drove
  // (the condition read back, each branch or trip launched from the host).
  int64_t control_flow_in_graphs = 0;
  int64_t control_flow_host_driven = 0;
  // Why the last If or Loop step that ran host-driven could not be a
  // conditional node ("" when none): graphs off, a driver without
  // conditional nodes, a condition the host knows, branches of different
  // shapes, scan outputs, a body step that needs the host, ...
  std::string control_flow_fallback_reason;
};

// Runs a model. Not thread-safe: use one Session per thread. A call that
// enters a session while another thread is in Run, RunValues, RunInto or
// Reshape on it returns FAILED_PRECONDITION and changes nothing (a cheap
// guard that catches the misuse; it is no lock to rely on).
class Session {
 public:
  static absl::StatusOr<std::unique_ptr<Session>> Create(std::shared_ptr<const Model> model,
                                                         const SessionOptions& options);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // The device this session runs on (never kAuto).
  Device device() const;
  // "cpu", or the CUDA device's name and arch ("NVIDIA H200 (sm_90, 139 GiB)").
  std::string device_description() const;
  const Model& model() const;

  // Runs with one input per model input, in model order. The returned views
  // point into the session and stay valid until the next Run or destruction.
  // On error the session stays usable. On CUDA, inputs may be host or device
  // pointers, and Run returns after the work is done (the stream is synced).
  absl::StatusOr<std::vector<TensorView>> Run(absl::Span<const TensorView> inputs);
  // Runs a model whose inputs or outputs may be sequences or optionals (any
  // model: tensors are Values too). One input per model input, of its kind
  // and dtype; the outputs are owned copies, independent of the session.
  absl::StatusOr<std::vector<Value>> RunValues(absl::Span<const Value> inputs);
  // Same, writing into caller-owned outputs whose dtype and shape must equal
  // the results' (use Reshape to learn them when they do not depend on data).
  // On CUDA the outputs may be host or device memory; device buffers are
  // written by the kernels directly (no copy), so they must not overlap the
  // inputs.
  absl::Status RunInto(absl::Span<const TensorView> inputs, absl::Span<const TensorView> outputs);

  // Plans (or finds the cached plan for) these input shapes without running,
  // and returns the memory plan. Output shapes that depend on data are -1.
  absl::StatusOr<MemoryReport> Reshape(absl::Span<const std::vector<int64_t>> input_shapes,
                                       std::vector<std::vector<int64_t>>* out_output_shapes = nullptr);

  // A buffer for input `name` at `shape`, in the session's own memory
  // (device memory on CUDA): write the input there, then pass the returned
  // view (or any view of its pointer) to Run as that input. It is used in
  // place, so the run copies nothing in, and a CUDA graph that captured it
  // replays as is (a caller's own device buffer at a new address each run
  // would be captured again). It stays valid until the session goes or
  // InputBuffer asks for more bytes for the same input (it then grows, at a
  // new address, its contents lost); a smaller shape reuses it. Tensor
  // inputs only; the shape must fit the input's declaration.
  absl::StatusOr<TensorView> InputBuffer(absl::string_view name, absl::Span<const int64_t> shape);

  // Index of the model input called `name`, or NotFound.
  absl::StatusOr<int> InputIndex(absl::string_view name) const;

  SessionStats stats() const;

  // Writes the trace of the runs kept so far (SessionOptions::trace_path)
  // to `path`, or to trace_path when `path` is empty. FAILED_PRECONDITION
  // when the session does not trace.
  absl::Status WriteTrace(const std::string& path = "") const;

 private:
  friend struct internal::SessionAccess;
  explicit Session(std::unique_ptr<internal::SessionImpl> impl);
  std::unique_ptr<internal::SessionImpl> impl_;
};

// ---------------------------------------------------------------------------
// Ahead-of-time CUDA kernels: fills the kernel cache without a GPU (a
// container build or CI step warms it before deployment).
// ---------------------------------------------------------------------------

// A kernel variant chosen for a step when it was prepared (CUDA): which
// configuration runs it and why.
struct KernelChoiceInfo {
  std::string config;   // "softmax__f32__threads128_vec4"
  std::string source;   // "table" (a dispatch table's entry), "cost model" or "generic"
  std::string problem;  // the step's extents for the family: "n=509,rows=4096"
  std::string bucket;   // the table's shape bucket of it (extents above 8 rounded up to a power of two)
  double estimate_us = 0;  // the cost model's estimate for the config
  double measured_us = 0;  // a table hit: the time `grove tune` measured; else 0
  std::string op;       // the step's op and node
  std::string node;
};

struct KernelCompileOptions {
  std::string arch = "sm_90";  // "sm_80", "90", "9.0"
  // One shape per model input: the model runs once on a device that records
  // the kernels it launches (zero-valued inputs). Empty with all_kernels.
  std::vector<std::vector<int64_t>> input_shapes;
  std::string cache_dir;     // "" = $GROVE_CACHE_DIR, else $XDG_CACHE_HOME/grove/kernels
  bool all_kernels = false;  // every kernel module grove has, not only the model's
  std::string kernel_table;  // as SessionOptions::kernel_table
};

struct KernelCompileReport {
  std::string cache_dir;
  int arch = 0;
  std::vector<std::string> modules;  // "elementwise__f32", ...
  int compiled = 0;  // compiled by NVRTC now
  int cached = 0;    // found in the cache
  int corrupt = 0;   // found truncated or corrupt (then recompiled)
  int stale = 0;     // found for another NVRTC or key (then recompiled)
  double compile_ms = 0;
  // Why the set may be incomplete (the dry run stopped, or took one branch
  // of data-dependent control flow); empty when nothing to say.
  std::string note;
  // The kernel variants the dry run's steps chose (empty with all_kernels).
  std::vector<KernelChoiceInfo> choices;
};

// Compiles into the disk cache every kernel `model` needs at those shapes.
absl::StatusOr<KernelCompileReport> CompileKernels(const Model& model, const KernelCompileOptions& options);

// ---------------------------------------------------------------------------
// Tuning kernel variants on a GPU (grove tune): a dispatch table for the
// shapes a model meets.
// ---------------------------------------------------------------------------

struct KernelTuneOptions {
  // The shapes to tune for: each one shape per model input (a sweep gives
  // several). The model runs once per shape set to find its steps' kernel
  // problems; each (family, dtypes, shape bucket) is tuned once, at the first
  // problem met in it.
  std::vector<std::vector<std::vector<int64_t>>> shape_sets;
  int top_k = 4;     // cost-model-ranked variants timed per bucket, besides the generic one
  int warmup = 3;    // untimed runs of each variant first
  int repeats = 15;  // timed runs; the median is kept
  // List the search space (problems, buckets, candidates and their cost
  // estimates) without timing anything; needs no GPU (plans for `arch`).
  bool dry_run = false;
  std::string arch = "sm_90";  // the dry run's arch
  int cuda_device = 0;
  // One line per bucket timed ("[3/12] softmax f32 n=512,rows=64: ..."); null: none.
  std::function<void(const std::string&)> progress;
};

struct KernelTuneCandidate {
  std::string config;       // "softmax__f32__threads128_vec4"
  double estimate_us = 0;   // the cost model's
  double measured_us = 0;   // median of repeats (0 in a dry run)
  bool generic = false;     // the family's generic variant (the baseline)
};

struct KernelTuneBucket {
  std::string family;
  std::string dtypes;   // "f32" or "f16,f32"
  std::string bucket;   // "n=512,rows=64"
  std::string problem;  // the problem timed: "n=509,rows=37"
  std::vector<KernelTuneCandidate> candidates;  // cost-model order, the generic one last unless ranked
  std::string best;     // the fastest measured (empty in a dry run)
};

struct KernelTuneReport {
  std::string device;  // "NVIDIA H200 (sm_90, 139 GiB)"; a dry run: "sm_90 (dry run)"
  int arch = 0;
  std::vector<KernelTuneBucket> buckets;
  int candidates = 0;  // variants in the search space (timed unless a dry run)
  // The table (schemas/kernels.fbs) with one entry per bucket; empty in a dry run.
  std::vector<uint8_t> table;
};

// Tunes on CUDA device options.cuda_device (FAILED_PRECONDITION naming why
// when there is none), or lists the search space with options.dry_run.
absl::StatusOr<KernelTuneReport> TuneKernels(const Model& model, const KernelTuneOptions& options);

// ---------------------------------------------------------------------------
// How a model runs: its plans' steps and straight-line segments (grove inspect).
// ---------------------------------------------------------------------------

struct StepInfo {
  std::string op;       // "MatMul"; "FusedElementwise" for a fused chain (CUDA)
  std::string node;     // the node's name ("" when it has none)
  std::string backend;  // whose kernel runs it: "cpu" or "cuda"
  std::vector<KernelChoiceInfo> kernels;  // CUDA: the variants its prepare chose
  // CPU: how the step's kernel lays out its activations where not as the
  // model says: "channels-last X and Y", "channels-last X" or
  // "channels-last Y" ([N, spatial..., C]; see "CPU layouts" in the
  // README); "" otherwise.
  std::string layout;
};

// A step that needs the host, so a segment ends at it: control flow (the
// host picks the path), a step that runs its CPU kernel with copies, output
// shapes known only when run, or a value read back from the device.
struct HostStepInfo {
  int step = 0;  // its index in the path's steps
  std::string op;
  std::string node;
  std::string reason;
};

// A run of steps that need no host: on CUDA, one graph to capture.
struct SegmentInfo {
  int first_step = 0;  // steps [first_step, end_step) of the path
  int end_step = 0;
  std::vector<StepInfo> steps;
  // CUDA, main path, shape buckets (SessionOptions::shape_buckets at their
  // defaults): why this segment cannot serve every shape of its bucket with
  // one graph, so it keeps a graph per exact shape ("" when it can, or when
  // the inputs are not bucketed). Found by a dry run on a recording device:
  // the bucket's bound captured, then refreshed for these shapes.
  std::string pinned;
};

// One control-flow path: the main graph, or a body of If, Loop or Scan
// (planned for the shapes of its first run where the plan knows them).
struct PathInfo {
  std::string path;  // "main", "main / Loop 'decode' / body"
  std::vector<StepInfo> steps;
  std::vector<SegmentInfo> segments;
  std::vector<HostStepInfo> host_steps;
  std::string note;  // why a path has no plan here (its inputs' shapes are known only when run)
};

struct ExecutionInfo {
  std::string device;  // "cpu", or the CUDA device planned for
  std::vector<PathInfo> paths;
};

struct ExecutionInfoOptions {
  // kCpu or kCuda. kCuda plans for the CUDA backend on a device that only
  // records (no GPU or driver needed): which kernels take each step, where
  // the host is needed, as a run on that arch would.
  Device device = Device::kCpu;
  std::string arch = "sm_90";
  std::vector<std::vector<int64_t>> input_shapes;  // one per model input
  std::string kernel_table;  // kCuda: as SessionOptions::kernel_table
};

// Plans the model for these input shapes without running it and describes
// every control-flow path's steps and segments.
absl::StatusOr<ExecutionInfo> DescribeExecution(const Model& model, const ExecutionInfoOptions& options);

// ---------------------------------------------------------------------------
// Building models in code.
// ---------------------------------------------------------------------------

// An attribute value. Subgraph references use SubgraphRef.
struct SubgraphRef {
  int index = -1;
};
using AttrValue = std::variant<int64_t, double, std::string, std::vector<int64_t>,
                               std::vector<double>, std::vector<std::string>, SubgraphRef>;

// A dim for the builder: a constant or a symbol name ("seq").
struct Dim {
  Dim(int64_t v) : value(v) {}  // NOLINT: implicit on purpose
  Dim(int v) : value(v) {}      // NOLINT
  Dim(const char* s) : symbol(s) {}         // NOLINT
  Dim(std::string s) : symbol(std::move(s)) {}  // NOLINT
  int64_t value = 0;
  std::string symbol;
};

// Builds a model and serialises it. Values are named; every name is unique in
// the model. Subgraph 0 is the main graph. Errors found while adding are kept
// and returned by Finish/Save, so building code can stay linear.
//
//   grove::ModelBuilder b;
//   b.AddSymbol("batch", 1, 64);
//   b.AddInput("x", DType::kF32, {"batch", 4});
//   b.AddWeight("w", DType::kF32, {4, 2}, w_bytes);
//   b.AddOp("MatMul", {"x", "w"}, {"y"});
//   b.AddOutput("y");
//   absl::Status s = b.Save("mm.grove");
class ModelBuilder {
 public:
  ModelBuilder();
  ~ModelBuilder();

  void AddSymbol(std::string name, int64_t min, int64_t max);
  void SetProducer(std::string producer);

  // Starts a new subgraph (an If branch or Loop body) and makes it current;
  // returns its index for SubgraphRef. SetSubgraph switches back (0 = main).
  int AddSubgraph(std::string name);
  void SetSubgraph(int index);
  int current_subgraph() const;

  // Declares an input of the current subgraph.
  void AddInput(std::string name, DType dtype, std::vector<Dim> shape);
  // Declares an input that is a sequence or an optional (`kind`) of `dtype`
  // tensors; `shape`, when given, is the shape each of its tensors has.
  void AddInput(std::string name, ValueKind kind, DType dtype, std::optional<std::vector<Dim>> shape = std::nullopt);
  // Marks a value as an output of the current subgraph.
  void AddOutput(std::string name);
  // Declares a weight with its bytes (copied into the file, 64-byte aligned).
  void AddWeight(std::string name, DType dtype, std::vector<int64_t> shape,
                 absl::Span<const uint8_t> bytes);
  template <typename T>
  void AddWeight(std::string name, DType dtype, std::vector<int64_t> shape,
                 const std::vector<T>& values) {
    AddWeight(std::move(name), dtype, std::move(shape),
              absl::Span<const uint8_t>(reinterpret_cast<const uint8_t*>(values.data()),
                                        values.size() * sizeof(T)));
  }
  // Declares a string weight (kString) holding `values` in row-major order.
  // (AddWeight refuses kString: its bytes would be pointers.)
  void AddStringWeight(std::string name, std::vector<int64_t> shape, absl::Span<const std::string> values);
  // Adds an operator to the current subgraph. An empty input name marks an
  // omitted optional input. New output names become values of the model.
  void AddOp(std::string type, std::vector<std::string> inputs, std::vector<std::string> outputs,
             std::vector<std::pair<std::string, AttrValue>> attributes = {},
             std::string name = "");

  // Serialises the model: the FlatBuffer followed by the aligned weights.
  absl::StatusOr<std::vector<uint8_t>> Finish() const;
  absl::Status Save(const std::string& path) const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace grove

#endif  // GROVE_GROVE_H_
