#include "lib/runtime/executor.h"

#include <algorithm>
#include <memory>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "lib/ir/value_type.h"
#include "lib/runtime/execution_plan.h"
#include "lib/runtime/step_host.h"

namespace grove::runtime {
namespace {

// On CUDA, inputs of a step whose shapes are inferred when run are read back
// for its shape function when at most this big (shape tensors are tiny).
constexpr uint64_t kHostReadLimitBytes = 1 << 16;

}  // namespace


absl::Status Executor::Execute(PlanInstance& inst, absl::Span<const TensorView> inputs,
                                  absl::Span<const TensorView> captures) {
  ++inst.active;
  absl::Cleanup done = [&inst] { --inst.active; };
  const ExecutionPlan& p = *inst.plan;
  Tracer* const tracer = tracer_;
  const int64_t bind_start = tracer != nullptr ? tracer->Now() : 0;
  if (absl::Status s = BindInputs(inst, inputs, captures); !s.ok()) return s;
  if (tracer != nullptr && (inst.family != nullptr || !host_memory_)) {
    tracer->Add("copy", "bind inputs", bind_start,
                TraceArgs()
                    .Str("subgraph", graph_.subgraphs[p.subgraph()].name)
                    .Bool("bucket_slots", inst.family != nullptr));
  }

  const std::vector<PlanStep>& steps = p.steps();
  int segment = -1;
  // Tracing: the segment running step by step, and since when.
  bool eager_traced = false;
  int64_t segment_start = 0;
  int segment_mark = -1;
  for (size_t s = 0; s < steps.size(); ++s) {
    const PlanStep& step = steps[s];
    if (step.segment != segment) {
      if (eager_traced) TraceSegment(inst, segment, segment_start, segment_mark, /*as_graph=*/false);
      eager_traced = false;
      segment = step.segment;
      if (segment >= 0) {
        ++stats_.segments_run;
        if (tracer != nullptr) {
          segment_start = tracer->Now();
          segment_mark = Mark();
        }
        if (graphs_enabled_) {
          if (interruptible_) {
            if (absl::Status st = CheckInterrupt(*step.node); !st.ok()) return st;
          }
          absl::StatusOr<bool> as_graph = RunSegmentGraph(inst, segment);
          if (!as_graph.ok()) return as_graph.status();
          if (*as_graph) {
            if (tracer != nullptr) TraceSegment(inst, segment, segment_start, segment_mark, /*as_graph=*/true);
            s = static_cast<size_t>(p.segments()[segment].end) - 1;
            continue;
          }
        }
        ++stats_.segments_run_eagerly;
        eager_traced = tracer != nullptr;
      }
    }
    if (step.outputs_empty) continue;
    if (interruptible_) {
      if (absl::Status st = CheckInterrupt(*step.node); !st.ok()) return st;
    }
    if (step.segment < 0 && step.kernel_allocates && !host_memory_ &&
        (step.node->type == "If" || step.node->type == "Loop")) {
      // The branch or the trips decided on the device, in a graph, where it
      // can be (control_graphs.cc).
      const int64_t start = tracer != nullptr ? tracer->Now() : 0;
      const int mark = tracer != nullptr ? Mark() : -1;
      absl::StatusOr<bool> in_graph = RunControlFlowGraph(inst, s);
      if (!in_graph.ok()) return in_graph.status();
      if (*in_graph) {
        if (tracer != nullptr) TraceControlGraph(inst, s, start, mark);
        continue;
      }
    }
    if (tracer != nullptr) [[unlikely]] {
      // A body's step inside a step of the caller: the caller's body time
      // is kept aside while this step counts its own.
      const int64_t outer_body_ns = body_ns_, outer_body_end_ns = body_end_ns_;
      body_ns_ = 0;
      const int64_t start = tracer->Now();
      const int mark = Mark();
      absl::Status st = RunStepOrFallback(inst, s);
      const int64_t body_ns = body_ns_, body_end_ns = body_end_ns_;
      body_ns_ = outer_body_ns;
      body_end_ns_ = outer_body_end_ns;
      TraceStep(inst, s, start, mark, body_ns, body_end_ns, st);
      if (!st.ok()) return st;
      continue;
    }
    if (absl::Status st = RunStepOrFallback(inst, s); !st.ok()) return st;
  }
  if (eager_traced) TraceSegment(inst, segment, segment_start, segment_mark, /*as_graph=*/false);
  return absl::OkStatus();
}

absl::Status Executor::BindInputs(PlanInstance& inst, absl::Span<const TensorView> inputs,
                                  absl::Span<const TensorView> captures) {
  const ExecutionPlan& p = *inst.plan;
  if (inst.family != nullptr) return BindToSlots(inst, inputs, captures);
  if (!host_memory_) {
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (absl::Status s = BindValue(inst, p.input_values()[i], inputs[i]); !s.ok()) return s;
    }
    for (size_t i = 0; i < captures.size(); ++i) {
      if (absl::Status s = BindValue(inst, p.capture_values()[i], captures[i]); !s.ok()) return s;
    }
    return absl::OkStatus();
  }
  for (size_t i = 0; i < inputs.size(); ++i) inst.views[p.input_values()[i]].data = inputs[i].data;
  for (size_t i = 0; i < captures.size(); ++i) inst.views[p.capture_values()[i]].data = captures[i].data;
  return absl::OkStatus();
}

absl::Status Executor::RunStepOrFallback(PlanInstance& inst, size_t s) {
  const PlanStep& step = inst.plan->steps()[s];
  if (host_memory_ || !step.host_fallback) return RunStep(inst, s);
  TensorView* const* ptrs = inst.ptrs.data() + inst.step_ptrs[s];
  absl::Span<TensorView* const> in_ptrs(ptrs, step.inputs.size());
  absl::Span<TensorView* const> out_ptrs(ptrs + step.inputs.size(), step.outputs.size());
  if (absl::Status st = RunFallbackStep(inst, static_cast<int>(s), in_ptrs, out_ptrs); !st.ok()) return st;
  ++stats_.kernels_run;
  ++stats_.cpu_fallback_steps;
  return absl::OkStatus();
}

absl::Status Executor::BindToSlots(PlanInstance& inst, absl::Span<const TensorView> inputs,
                                   absl::Span<const TensorView> captures) {
  BucketFamily& f = *inst.family;
  const ExecutionPlan& p = *inst.plan;
  const size_t n = inputs.size() + captures.size();
  auto given = [&](size_t i) -> const TensorView& { return i < inputs.size() ? inputs[i] : captures[i - inputs.size()]; };
  // A source inside another slot (a body's output that passed an input
  // through, fed back as another input) would be overwritten by an earlier
  // copy: such sources go to the staging buffer first.
  std::vector<const void*> source(n);
  uint64_t staged = 0;
  for (size_t i = 0; i < n; ++i) {
    source[i] = given(i).data;
    const uint64_t bytes = given(i).byte_size();
    if (bytes == 0 || source[i] == f.slots[i]) continue;
    const uint8_t* src = static_cast<const uint8_t*>(source[i]);
    for (size_t k = 0; k < n; ++k) {
      const uint8_t* slot = f.slots[k];
      if (k == i || src + bytes <= slot || src >= slot + f.input_bytes[k]) continue;
      void* to = f.staging->data() + staged;
      if (absl::Status s = backend_.CopyAsync(to, source[i], bytes); !s.ok()) return s;
      source[i] = to;
      staged += (bytes + 255) / 256 * 256;
      break;
    }
  }
  for (size_t i = 0; i < n; ++i) {
    const uint64_t bytes = given(i).byte_size();
    void* slot = f.slots[i];
    if (bytes > 0 && source[i] != slot) {
      if (absl::Status s = backend_.CopyAsync(slot, source[i], bytes); !s.ok()) return s;
      if (!backend_.IsDevicePointer(source[i])) stats_.bytes_host_to_device += static_cast<int64_t>(bytes);
    }
    inst.views[i < inputs.size() ? p.input_values()[i] : p.capture_values()[i - inputs.size()]].data = slot;
    if (p.subgraph() == 0) {
      stats_.bucket_input_bytes += static_cast<int64_t>(f.input_bytes[i]);
      stats_.bucket_padding_bytes += static_cast<int64_t>(f.input_bytes[i] - std::min(f.input_bytes[i], bytes));
    }
  }
  if (p.subgraph() == 0) ++stats_.bucketed_runs;
  return absl::OkStatus();
}

absl::Status Executor::RunStep(PlanInstance& inst, size_t s) {
  const ExecutionPlan& p = *inst.plan;
  const PlanStep& step = p.steps()[s];
  TensorView* const* ptrs = inst.ptrs.data() + inst.step_ptrs[s];
  absl::Span<TensorView* const> in_ptrs(ptrs, step.inputs.size());
  absl::Span<TensorView* const> out_ptrs(ptrs + step.inputs.size(), step.outputs.size());
  StepHost host(*this, inst, static_cast<int>(s));
  if (step.infer_at_run) {
    // Shapes follow from the actual inputs (and their values, all known now;
    // on CUDA small ones are read back for the shape function).
    std::vector<ir::ShapeContext::Input> ins(step.inputs.size());
    for (size_t i = 0; i < step.inputs.size(); ++i) {
      if (in_ptrs[i] == nullptr) continue;
      const TensorView* value = in_ptrs[i];
      if (!host_memory_ && !ir::IsBoxed(in_ptrs[i]->dtype)) {
        value = nullptr;
        if (in_ptrs[i]->byte_size() <= kHostReadLimitBytes) {
          absl::StatusOr<const TensorView*> h = HostCopy(inst, step.inputs[i], *in_ptrs[i]);
          if (!h.ok()) return h.status();
          value = *h;
        }
      }
      ins[i] = InputOfView(*in_ptrs[i], value);
    }
    if (absl::Status st = InferAndAllocate(step, std::move(ins), host); !st.ok()) return st;
  } else if (step.kernel_allocates) {
    for (int v : step.outputs) {
      if (v >= 0) inst.views[v] = TensorView();
    }
  }

  if (!host_memory_) {
    backend_.SetStepHostInputs(absl::MakeConstSpan(inst.host_ptrs.data() + inst.step_ptrs[s], step.inputs.size()));
  }
  ir::KernelContext ctx(*step.node, in_ptrs, out_ptrs, &host);
  if (step.prepared_at_plan) {
    ctx.SetPrepared(&step.prepared,
                    step.prepared.workspace_bytes > 0 ? inst.arena_base + step.workspace_offset : nullptr);
  }
  // Inside a segment on a device: no wait and no read may happen here.
  const bool watch = step.segment >= 0 && !host_memory_;
  BackendCounters before;
  if (watch) before = backend_.counters();
  absl::Status st = step.prepared_at_plan || step.prepare == nullptr ? step.kernel(ctx)
                                                                     : ir::RunKernel(step.backend, ctx);
  if (!st.ok()) return st;
  if (watch) {
    const BackendCounters after = backend_.counters();
    stats_.host_waits_inside_segments += (after.synchronizations - before.synchronizations) +
                                         (after.device_to_host_reads - before.device_to_host_reads);
  }
  ++stats_.kernels_run;

  if (step.kernel_allocates || step.infer_at_run) {
    for (size_t i = 0; i < step.outputs.size(); ++i) {
      const int v = step.outputs[i];
      if (v < 0) continue;
      const PlanValue& pv = p.values()[v];
      if (inst.views[v].dtype == DType::kUnknown) {
        return absl::InternalError(absl::StrCat(step.node->Describe(), ": output ", i, " was not produced"));
      }
      if (pv.shape_known && inst.views[v].shape != pv.shape) {
        return absl::InvalidArgumentError(absl::StrCat(
            step.node->Describe(), ": output ", i, " has shape ",
            ir::ShapeToString(ir::FromConcrete(inst.views[v].shape)), " but the plan expects ",
            ir::ShapeToString(ir::FromConcrete(pv.shape))));
      }
    }
  }
  return absl::OkStatus();
}


Executor::Executor(const internal::ModelImpl& model, const SessionOptions& options, Backend& backend,
                   SessionStats& stats)
    : model_(model), graph_(model.graph()), options_(options), backend_(backend), host_memory_(backend.host_memory()),
      stats_(stats), graphs_(stats), step_workspace_(&backend) {
  if (host_memory_) return;
  if (options.cuda_graphs == GraphMode::kOff) {
    stats_.graph_fallback_reason = "graphs are off (SessionOptions::cuda_graphs)";
  } else if (!backend.captures_graphs()) {
    stats_.graph_fallback_reason = absl::StrCat(backend.Describe(), " does not capture graphs");
  } else {
    graphs_enabled_ = true;
    conditional_graphs_ = backend.conditional_graphs();
  }
}

Executor::~Executor() = default;

absl::Status Executor::Init() {
  absl::StatusOr<const uint8_t*> weights = model_.DeviceBytes(backend_);
  if (!weights.ok()) return weights.status();
  device_weights_ = *weights;
  // Buckets serve graphs only; shape_buckets given to any session is still checked.
  if (!graphs_enabled_ && options_.shape_buckets.empty()) return absl::OkStatus();
  absl::StatusOr<BucketPolicy> buckets = BucketPolicy::Make(graph_, options_.shape_buckets);
  if (!buckets.ok()) return buckets.status();
  // Buckets serve graphs: on a backend that captures them, with some symbol
  // bucketed.
  if (graphs_enabled_ && !buckets->all_exact() && !graph_.symbols.empty()) buckets_ = *std::move(buckets);
  return absl::OkStatus();
}

absl::Status Executor::CheckCancelledBeforeStart() const {
  if (options_.cancellation != nullptr && options_.cancellation->IsCancelled()) {
    return absl::CancelledError("the run was cancelled before it started (CancellationToken::Reset lets runs go on)");
  }
  return absl::OkStatus();
}

void Executor::StartRun(bool runs_kernels) {
  ++run_serial_;
  if (runs_kernels) strings_.Reset();
  body_runs_ = 0;
  has_deadline_ = options_.run_deadline_ms > 0;
  interruptible_ = has_deadline_ || options_.cancellation != nullptr;
  if (has_deadline_) {
    // At most ~35 years ahead: steady_clock's nanoseconds must not overflow.
    const int64_t ms = std::min<int64_t>(options_.run_deadline_ms, int64_t{1} << 40);
    deadline_ = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  }
}

absl::Status Executor::CheckInterrupt(const ir::Node& next) const {
  if (options_.cancellation != nullptr && options_.cancellation->IsCancelled()) {
    return absl::CancelledError(absl::StrCat("the run was cancelled (stopped before ", next.Describe(), ")"));
  }
  if (has_deadline_ && std::chrono::steady_clock::now() >= deadline_) {
    return absl::DeadlineExceededError(absl::StrCat("the run passed its deadline of ", options_.run_deadline_ms,
                                                    " ms (stopped before ", next.Describe(), ")"));
  }
  return absl::OkStatus();
}

absl::Status Executor::InferAndAllocate(const PlanStep& step, std::vector<ir::ShapeContext::Input> ins,
                                           ir::KernelContext::Host& host) {
  ir::ShapeContext sctx(*step.node, graph_, std::move(ins), nullptr);
  if (absl::Status st = ir::InferShapes(sctx); !st.ok()) return st;
  for (size_t i = 0; i < step.outputs.size(); ++i) {
    if (step.outputs[i] < 0) continue;
    const auto& o = sctx.outputs()[i];
    if (ir::IsBoxed(o.dtype)) {
      absl::StatusOr<TensorView*> view = host.AllocateOutput(static_cast<int>(i), o.dtype, {});
      if (!view.ok()) return view.status();
      continue;
    }
    if (!o.rank_known || !ir::IsConcrete(o.shape)) {
      return absl::InvalidArgumentError(absl::StrCat(step.node->Describe(), ": cannot determine the shape of output ",
                                                     i, " from its inputs"));
    }
    absl::StatusOr<TensorView*> view = host.AllocateOutput(static_cast<int>(i), o.dtype, ir::ToConcrete(o.shape));
    if (!view.ok()) return view.status();
  }
  return absl::OkStatus();
}

}  // namespace grove::runtime
