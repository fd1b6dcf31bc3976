// grove::Session: the public API over the runtime's pieces. A session owns
// one backend (lib/runtime/backend.h: the CPU, or a CUDA device and stream)
// and one executor (plan cache, steps, control flow); binding.h checks the
// inputs of each call.
#include <algorithm>
#include <atomic>
#include <cstring>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "lib/ir/value_type.h"
#include "lib/runtime/backend.h"
#include "lib/runtime/binding.h"
#include "lib/runtime/executor.h"
#include "lib/runtime/model_impl.h"
#include "lib/runtime/session_internal.h"
#include "lib/runtime/trace.h"

namespace grove {
namespace internal {

class SessionImpl {
 public:
  SessionImpl(std::shared_ptr<const Model> model, const SessionOptions& options,
              std::unique_ptr<runtime::Backend> backend, std::unique_ptr<runtime::Tracer> tracer)
      : model_(std::move(model)), impl_(model_->impl()), graph_(impl_.graph()), options_(options),
        device_(backend->kind() == ir::Backend::kCuda ? Device::kCuda : Device::kCpu), backend_(std::move(backend)),
        tracer_(std::move(tracer)), executor_(impl_, options_, *backend_, stats_) {
    executor_.SetTracer(tracer_.get());
  }
  ~SessionImpl() {
    // Runs traced since the last WriteTrace go to SessionOptions::trace_path;
    // a failure has no caller to return to but the log sink.
    if (tracer_ != nullptr && tracer_->unwritten()) {
      if (absl::Status s = tracer_->Write(""); !s.ok()) {
        runtime::Log(options_, LogLevel::kError, absl::StrCat("the trace was not written: ", s.message()));
      }
    }
  }

  // `into` (RunInto's buffers, CUDA): outputs that live in the arena are
  // written straight into the caller's device buffers; `aliased` says which.
  absl::StatusOr<std::vector<TensorView>> RunMain(absl::Span<const TensorView> inputs, bool device_views = false,
                                                  absl::Span<const TensorView> into = {},
                                                  std::vector<bool>* aliased = nullptr);

  std::shared_ptr<const Model> model_;
  const ModelImpl& impl_;
  const ir::Graph& graph_;
  SessionOptions options_;
  Device device_;
  SessionStats stats_;
  // Declared before the executor: its plans (backend memory) go first.
  std::unique_ptr<runtime::Backend> backend_;
  // SessionOptions::trace_path; null when not tracing. Outlives the executor.
  std::unique_ptr<runtime::Tracer> tracer_;
  runtime::Executor executor_;
  runtime::StringInputs string_inputs_;
  // Per main input, the buffer InputBuffer hands out (backend memory).
  std::vector<std::unique_ptr<runtime::Buffer>> input_buffers_;
  // Set while a public call (Run, RunValues, RunInto, Reshape) is inside the
  // session: a second thread entering meanwhile is refused (see EntryGuard).
  std::atomic<bool> busy_{false};
};

absl::StatusOr<std::vector<TensorView>> SessionImpl::RunMain(absl::Span<const TensorView> inputs,
                                                             bool device_views, absl::Span<const TensorView> into,
                                                             std::vector<bool>* aliased) {
  if (absl::Status s = executor_.CheckCancelledBeforeStart(); !s.ok()) return s;
  if (absl::Status s = runtime::ValidateMainInputs(graph_, inputs, true); !s.ok()) return s;
  executor_.StartRun(/*runs_kernels=*/true);
  runtime::Backend& backend = *backend_;
  // Tracing: the run's event encloses everything below, failed or not.
  runtime::Tracer* const tracer = tracer_.get();
  const int64_t run_start = tracer != nullptr ? tracer->Now() : 0;
  const int64_t run_number = stats_.runs + 1;
  absl::Status run_status;
  if (tracer != nullptr) {
    tracer->BeginRun();
    executor_.BeginDeviceTrace();
  }
  absl::Cleanup end_run = [&] {
    if (tracer == nullptr) return;
    executor_.EndDeviceTrace();
    std::vector<std::string> shapes;
    for (const TensorView& v : inputs) shapes.push_back(runtime::ShapeText(v));
    runtime::TraceArgs args;
    args.Int("run", run_number)
        .Str("device", device_ == Device::kCuda ? "cuda" : "cpu")
        .Strs("inputs", shapes)
        .Str("plan", executor_.last_plan_hit() ? "cache hit" : "created");
    if (!run_status.ok()) args.Str("error", run_status.ToString());
    tracer->EndRun(absl::StrCat("run ", run_number), run_start, args);
  };
  auto fail = [&run_status](absl::Status s) {
    run_status = s;
    return s;
  };
  absl::StatusOr<absl::Span<const TensorView>> bound = string_inputs_.Intern(
      graph_, inputs, executor_.strings(),
      [&backend](const void* p) { return !backend.host_memory() && backend.IsDevicePointer(p); });
  if (!bound.ok()) return fail(bound.status());
  inputs = *bound;
  absl::StatusOr<runtime::PlanInstance*> inst = executor_.GetPlan(0, inputs, {});
  if (!inst.ok()) return fail(inst.status());
  // Arena outputs go straight to the caller's device buffers (no copy after).
  const std::vector<int>& out_values = (*inst)->plan->output_values();
  std::vector<std::pair<int, void*>> restore;
  if (aliased != nullptr) aliased->assign(out_values.size(), false);
  // Not in a shape bucket: its graphs write the bound's rows past the actual
  // ones, which the caller's buffer of the actual shape has no room for.
  if (!backend.host_memory() && into.size() == out_values.size() && (*inst)->family == nullptr) {
    for (size_t i = 0; i < out_values.size(); ++i) {
      const int v = out_values[i];
      const runtime::PlanValue& pv = (*inst)->plan->values()[v];
      if (pv.kind != runtime::Storage::kArena || !pv.shape_known || pv.bytes == 0) continue;
      if (std::count(out_values.begin(), out_values.end(), v) != 1) continue;
      if (into[i].dtype != pv.dtype || into[i].shape != pv.shape || !backend.IsDevicePointer(into[i].data)) continue;
      restore.emplace_back(v, (*inst)->views[v].data);
      (*inst)->views[v].data = into[i].data;
      (*aliased)[i] = true;
    }
  }
  absl::Status run = executor_.Execute(**inst, inputs, {});
  for (const auto& [v, data] : restore) (*inst)->views[v].data = data;
  if (!run.ok()) return fail(run);
  ++stats_.runs;
  std::vector<TensorView> outs;
  outs.reserve((*inst)->plan->output_values().size());
  const int64_t outputs_start = tracer != nullptr ? tracer->Now() : 0;
  for (int v : (*inst)->plan->output_values()) {
    if (aliased != nullptr && (*aliased)[outs.size()]) {
      outs.push_back(into[outs.size()]);
    } else if (!backend.host_memory() && !options_.outputs_on_device && !device_views) {
      absl::StatusOr<const TensorView*> h = executor_.HostCopy(**inst, v, (*inst)->views[v], /*wait=*/false);
      if (!h.ok()) return fail(h.status());
      outs.push_back(**h);
    } else {
      outs.push_back((*inst)->views[v]);
    }
  }
  if (!backend.host_memory()) {
    if (absl::Status s = backend.Synchronize(); !s.ok()) return fail(s);
    if (tracer != nullptr) {
      // The stream's work ends here: the step events before are enqueue times.
      tracer->Add("copy", "outputs and synchronize", outputs_start,
                  runtime::TraceArgs().Bool("outputs_on_device", options_.outputs_on_device || device_views));
    }
  }
  return outs;
}

}  // namespace internal

Session::Session(std::unique_ptr<internal::SessionImpl> impl) : impl_(std::move(impl)) {}
Session::~Session() = default;

absl::StatusOr<GemmMath> ParseGemmMath(absl::string_view name) {
  if (name == "f32") return GemmMath::kF32;
  if (name == "tf32") return GemmMath::kTF32;
  if (name == "bf16") return GemmMath::kBF16;
  if (name == "f16") return GemmMath::kF16;
  return absl::InvalidArgumentError(absl::StrCat("unknown GEMM math '", name, "' (f32, tf32, bf16 or f16)"));
}

absl::string_view LogLevelName(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug: return "debug";
    case LogLevel::kInfo: return "info";
    case LogLevel::kWarning: return "warning";
    case LogLevel::kError: return "error";
  }
  return "unknown";
}

absl::StatusOr<GraphMode> ParseGraphMode(absl::string_view name) {
  if (name == "auto") return GraphMode::kAuto;
  if (name == "on") return GraphMode::kOn;
  if (name == "off") return GraphMode::kOff;
  return absl::InvalidArgumentError(absl::StrCat("unknown graph mode '", name, "' (auto, on or off)"));
}

absl::StatusOr<std::unique_ptr<Session>> Session::Create(std::shared_ptr<const Model> model,
                                                         const SessionOptions& options) {
  if (model == nullptr) return absl::InvalidArgumentError("Session::Create: model is null");
  if (static_cast<int>(options.cuda_gemm_math) < 0 || static_cast<int>(options.cuda_gemm_math) > 3) {
    return absl::InvalidArgumentError("Session::Create: cuda_gemm_math is not a GemmMath");
  }
  if (static_cast<int>(options.cuda_graphs) < 0 || static_cast<int>(options.cuda_graphs) > 2) {
    return absl::InvalidArgumentError("Session::Create: cuda_graphs is not a GraphMode");
  }
  if (options.max_cached_graphs < 0) {
    return absl::InvalidArgumentError("Session::Create: max_cached_graphs must be >= 0");
  }
  if (options.max_graph_bytes < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("Session::Create: max_graph_bytes must be >= 0 (0: no limit), is ", options.max_graph_bytes));
  }
  if (options.max_cached_plans < 0) {
    return absl::InvalidArgumentError("Session::Create: max_cached_plans must be >= 0");
  }
  if (options.max_body_runs < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("Session::Create: max_body_runs must be >= 0 (0: no limit), is ", options.max_body_runs));
  }
  if (options.run_deadline_ms < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("Session::Create: run_deadline_ms must be >= 0 (0: no deadline), is ", options.run_deadline_ms));
  }
  if (options.trace_max_runs < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("Session::Create: trace_max_runs must be >= 1, is ", options.trace_max_runs));
  }
  if (static_cast<int>(options.log_level) < 0 || static_cast<int>(options.log_level) > 3) {
    return absl::InvalidArgumentError("Session::Create: log_level is not a LogLevel");
  }
  if (options.intra_op_threads < 0 || options.intra_op_threads > kMaxIntraOpThreads) {
    return absl::InvalidArgumentError(absl::StrCat("Session::Create: intra_op_threads must be 1 to ", kMaxIntraOpThreads,
                                                   " (0: one per core), is ", options.intra_op_threads));
  }
  absl::StatusOr<std::unique_ptr<runtime::Backend>> backend = runtime::CreateBackend(options);
  if (!backend.ok()) return backend.status();
  return internal::CreateSessionWithBackend(std::move(model), options, *std::move(backend));
}

namespace internal {

struct SessionAccess {
  static std::unique_ptr<Session> Make(std::unique_ptr<SessionImpl> impl) {
    return std::unique_ptr<Session>(new Session(std::move(impl)));
  }
  static SessionImpl& Impl(Session& session) { return *session.impl_; }
};

std::vector<std::string> PinnedSegments(Session& session, absl::Span<const TensorView> inputs) {
  return SessionAccess::Impl(session).executor_.PinnedSegments(inputs);
}

absl::StatusOr<std::unique_ptr<Session>> CreateSessionWithBackend(std::shared_ptr<const Model> model,
                                                                   const SessionOptions& options,
                                                                   std::unique_ptr<runtime::Backend> backend) {
  if (model == nullptr) return absl::InvalidArgumentError("Session::Create: model is null");
  if (backend == nullptr) return absl::InvalidArgumentError("Session::Create: backend is null");
  if (options.cuda_graphs == GraphMode::kOn && backend->kind() == ir::Backend::kCuda && !backend->captures_graphs()) {
    return absl::FailedPreconditionError(absl::StrCat("Session::Create: cuda_graphs is on but ", backend->Describe(),
                                                      " does not capture graphs"));
  }
  std::unique_ptr<runtime::Tracer> tracer;
  if (!options.trace_path.empty()) {
    static std::atomic<int64_t> sessions{0};
    absl::StatusOr<std::unique_ptr<runtime::Tracer>> made = runtime::Tracer::Create(
        options.trace_path, options.trace_max_runs,
        absl::StrCat("session ", ++sessions, " (", backend->Describe(), ")"));
    if (!made.ok()) return absl::Status(made.status().code(), absl::StrCat("Session::Create: ", made.status().message()));
    tracer = *std::move(made);
  }
  auto impl = std::make_unique<SessionImpl>(std::move(model), options, std::move(backend), std::move(tracer));
  if (absl::Status s = impl->executor_.Init(); !s.ok()) return s;
  return SessionAccess::Make(std::move(impl));
}

}  // namespace internal

Device Session::device() const { return impl_->device_; }
std::string Session::device_description() const { return impl_->backend_->Describe(); }
const Model& Session::model() const { return *impl_->model_; }
SessionStats Session::stats() const {
  SessionStats stats = impl_->stats_;
  const runtime::BackendCounters device = impl_->backend_->counters();
  stats.device_allocations = device.allocations;
  stats.device_synchronizations = device.synchronizations;
  stats.device_to_host_reads = device.device_to_host_reads;
  stats.graph_launches = device.graph_launches;
  stats.launches_outside_graphs = device.launches;
  return stats;
}

namespace {

// Marks the session busy for one public call; a call from a second thread
// while it is finds it so and is refused before it touches anything. One
// atomic exchange on entry and one store on exit: it detects misuse, it does
// not serialise callers (the loser fails instead of waiting).
class EntryGuard {
 public:
  explicit EntryGuard(std::atomic<bool>& busy)
      : busy_(busy), entered_(!busy.exchange(true, std::memory_order_acquire)) {}
  ~EntryGuard() {
    if (entered_) busy_.store(false, std::memory_order_release);
  }
  EntryGuard(const EntryGuard&) = delete;
  EntryGuard& operator=(const EntryGuard&) = delete;
  absl::Status status() const {
    if (entered_) return absl::OkStatus();
    return absl::FailedPreconditionError(
        "session is already running on another thread; a Session is used by one thread at a time");
  }

 private:
  std::atomic<bool>& busy_;
  const bool entered_;
};

}  // namespace

absl::StatusOr<std::vector<TensorView>> Session::Run(absl::Span<const TensorView> inputs) {
  EntryGuard guard(impl_->busy_);
  if (absl::Status s = guard.status(); !s.ok()) return s;
  if (absl::Status s = runtime::TensorsOnly(impl_->graph_, {}); !s.ok()) return s;
  absl::StatusOr<std::vector<TensorView>> outs = impl_->RunMain(inputs);
  if (!outs.ok()) return outs;
  if (absl::Status s = runtime::TensorsOnly(impl_->graph_, *outs); !s.ok()) return s;
  return outs;
}

absl::StatusOr<std::vector<Value>> Session::RunValues(absl::Span<const Value> inputs) {
  EntryGuard guard(impl_->busy_);
  if (absl::Status s = guard.status(); !s.ok()) return s;
  const ir::Graph& g = impl_->graph_;
  const ir::Subgraph& main = g.subgraphs[0];
  if (inputs.size() != main.inputs.size()) return runtime::InputCountError(g, inputs.size());
  std::vector<TensorView> views;
  for (size_t i = 0; i < inputs.size(); ++i) {
    absl::StatusOr<TensorView> view = runtime::ViewOfValue(inputs[i], g.tensors[main.inputs[i]], g);
    if (!view.ok()) return view.status();
    views.push_back(*std::move(view));
  }
  absl::StatusOr<std::vector<TensorView>> outs = impl_->RunMain(views);
  if (!outs.ok()) return outs.status();
  std::vector<Value> values;
  values.reserve(outs->size());
  for (const TensorView& o : *outs) {
    if (ir::IsBoxed(o.dtype)) {
      values.push_back(ir::BoxedValue(o));  // shares the tensors, which no kernel writes again
      continue;
    }
    absl::StatusOr<Tensor> t = Tensor::CopyOf(o);
    if (!t.ok()) return t.status();
    values.emplace_back(*std::move(t));
  }
  return values;
}

absl::Status Session::RunInto(absl::Span<const TensorView> inputs, absl::Span<const TensorView> outputs) {
  EntryGuard guard(impl_->busy_);
  if (absl::Status s = guard.status(); !s.ok()) return s;
  const std::vector<std::string>& names = impl_->impl_.output_names();
  if (outputs.size() != names.size()) {
    return absl::InvalidArgumentError(absl::StrCat("the model has ", names.size(), " outputs, given ",
                                                   outputs.size(), " buffers"));
  }
  if (absl::Status s = runtime::TensorsOnly(impl_->graph_, {}); !s.ok()) return s;
  runtime::Backend& backend = *impl_->backend_;
  const bool on_cuda = !backend.host_memory();
  std::vector<bool> aliased;
  absl::StatusOr<std::vector<TensorView>> results =
      impl_->RunMain(inputs, /*device_views=*/on_cuda, outputs, &aliased);
  if (!results.ok()) return results.status();
  if (absl::Status s = runtime::TensorsOnly(impl_->graph_, *results); !s.ok()) return s;
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (aliased[i]) continue;  // written in place by the kernels
    const TensorView& got = (*results)[i];
    const TensorView& into = outputs[i];
    if (into.dtype != got.dtype || into.shape != got.shape) {
      return absl::InvalidArgumentError(absl::StrCat(
          "output '", names[i], "' is ", DTypeName(got.dtype), ir::ShapeToString(ir::FromConcrete(got.shape)),
          " but the caller's buffer is ", DTypeName(into.dtype), ir::ShapeToString(ir::FromConcrete(into.shape))));
    }
    if (got.byte_size() > 0) {
      if (into.data == nullptr) {
        return absl::InvalidArgumentError(absl::StrCat("output '", names[i], "': buffer is null"));
      }
      if (on_cuda) {
        // Host or device memory on either side: the copy finds out.
        if (absl::Status s = backend.CopyAsync(into.data, got.data, got.byte_size()); !s.ok()) return s;
        if (!backend.IsDevicePointer(into.data)) {
          impl_->stats_.bytes_device_to_host += static_cast<int64_t>(got.byte_size());
        }
      } else {
        std::memmove(into.data, got.data, got.byte_size());
      }
    }
  }
  if (on_cuda) return backend.Synchronize();
  return absl::OkStatus();
}

absl::StatusOr<MemoryReport> Session::Reshape(absl::Span<const std::vector<int64_t>> input_shapes,
                                              std::vector<std::vector<int64_t>>* out_output_shapes) {
  EntryGuard guard(impl_->busy_);
  if (absl::Status s = guard.status(); !s.ok()) return s;
  const ir::Graph& g = impl_->graph_;
  const ir::Subgraph& main = g.subgraphs[0];
  if (absl::Status s = runtime::TensorsOnly(g, {}); !s.ok()) return s;
  std::vector<TensorView> views;
  for (size_t i = 0; i < input_shapes.size() && i < main.inputs.size(); ++i) {
    views.emplace_back(g.tensors[main.inputs[i]].dtype, input_shapes[i], static_cast<void*>(nullptr));
  }
  if (input_shapes.size() != main.inputs.size()) views.resize(input_shapes.size());
  if (absl::Status s = runtime::ValidateMainInputs(g, views, false); !s.ok()) return s;
  impl_->executor_.StartRun(/*runs_kernels=*/false);
  absl::StatusOr<runtime::PlanInstance*> inst = impl_->executor_.GetPlan(0, views, {});
  if (!inst.ok()) return inst.status();
  const runtime::ExecutionPlan& plan = *(*inst)->plan;
  if (out_output_shapes != nullptr) {
    out_output_shapes->clear();
    for (int v : plan.output_values()) out_output_shapes->push_back(plan.values()[v].shape);
  }
  return plan.Report(g);
}

absl::StatusOr<TensorView> Session::InputBuffer(absl::string_view name, absl::Span<const int64_t> shape) {
  EntryGuard guard(impl_->busy_);
  if (absl::Status s = guard.status(); !s.ok()) return s;
  absl::StatusOr<int> i = InputIndex(name);
  if (!i.ok()) return i.status();
  const ir::Graph& g = impl_->graph_;
  const ir::TensorDecl& d = g.tensors[g.subgraphs[0].inputs[*i]];
  if (ir::IsBoxed(d.dtype) || d.dtype == DType::kString) {
    return absl::InvalidArgumentError(absl::StrCat("InputBuffer: input '", d.name, "' is a ", DTypeName(d.dtype),
                                                   "; only numeric tensor inputs have a buffer"));
  }
  TensorView view(d.dtype, std::vector<int64_t>(shape.begin(), shape.end()), static_cast<void*>(nullptr));
  if (absl::Status s = runtime::ValidateMainInput(g, static_cast<size_t>(*i), view, /*need_data=*/false); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("InputBuffer: ", s.message()));
  }
  // A bucketed shape: the input's bucket slot, which every bucket shares,
  // so the run copies nothing in and its graphs replay.
  absl::StatusOr<void*> slot = impl_->executor_.InputSlot(static_cast<size_t>(*i), view);
  if (!slot.ok()) return slot.status();
  if (*slot != nullptr) {
    view.data = *slot;
    return view;
  }
  auto& buffers = impl_->input_buffers_;
  if (buffers.empty()) buffers.resize(g.subgraphs[0].inputs.size());
  if (buffers[*i] == nullptr) buffers[*i] = std::make_unique<runtime::Buffer>(impl_->backend_.get());
  if (absl::Status s = buffers[*i]->Reserve(view.byte_size()); !s.ok()) return s;
  view.data = buffers[*i]->data();
  return view;
}

absl::Status Session::WriteTrace(const std::string& path) const {
  if (impl_->tracer_ == nullptr) {
    return absl::FailedPreconditionError("WriteTrace: the session does not trace (SessionOptions::trace_path is empty)");
  }
  return impl_->tracer_->Write(path);
}

absl::StatusOr<int> Session::InputIndex(absl::string_view name) const {
  const std::vector<TensorInfo>& inputs = impl_->impl_.inputs();
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].name == name) return static_cast<int>(i);
  }
  return absl::NotFoundError(absl::StrCat("the model has no input '", name, "'"));
}

}  // namespace grove
