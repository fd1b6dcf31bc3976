#include "lib/runtime/executor.h"

#include <algorithm>
#include <memory>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "lib/ir/value_type.h"
#include "lib/runtime/execution_plan.h"

namespace grove::runtime {
namespace {

// On CUDA, inputs of a step whose shapes are inferred when run are read back
// for its shape function when at most this big (shape tensors are tiny).
constexpr uint64_t kHostReadLimitBytes = 1 << 16;

// What a shape function sees of a value when it runs: a sequence or optional
// by the shape its tensors share.
ir::ShapeContext::Input InputOfView(const TensorView& view, const TensorView* value) {
  if (!ir::IsBoxed(view.dtype)) return ir::ShapeContext::Input{true, view.dtype, ir::FromConcrete(view.shape), value};
  std::vector<int64_t> shape;
  const bool rank_known = ir::SharedItemShape(ir::BoxedValue(view), &shape);
  return ir::ShapeContext::Input{true, view.dtype, ir::FromPartlyConcrete(shape), nullptr, rank_known};
}

// The empty value of a boxed dtype: an empty sequence, an absent optional.
Value EmptyBoxedValue(DType dtype) {
  if (ir::KindOf(dtype) == ValueKind::kSequence) return Value::Sequence(ir::ElemDType(dtype));
  return Value::None(ir::KindOf(dtype), ir::ElemDType(dtype));
}

// A produced dtype against the planned one; a planned sequence or optional
// whose tensors' dtype was left to the run takes any.
bool DTypeFits(DType got, DType planned) {
  if (planned == DType::kUnknown || got == planned) return true;
  // A Loop body input declared optional(T) takes the T its body returned.
  if (ir::IsOptionalDType(planned) && got == ir::UnwrapOptional(planned)) return true;
  return ir::IsBoxed(got) && planned == ir::BoxedDType(ir::KindOf(got), DType::kUnknown);
}

}  // namespace

// What a kernel calls back into while step `step` of `inst` runs.
class StepHost : public ir::KernelContext::Host {
 public:
  StepHost(Executor& session, PlanInstance& inst, int step) : session_(session), inst_(inst), step_(step) {}

  absl::StatusOr<TensorView*> AllocateOutput(int i, DType dtype, std::vector<int64_t> shape) override {
    const PlanStep& step = inst_.plan->steps()[step_];
    if (i < 0 || i >= static_cast<int>(step.outputs.size()) || step.outputs[i] < 0) {
      return absl::InternalError(absl::StrCat(step.node->Describe(), ": allocates output ", i, " it does not have"));
    }
    const int v = step.outputs[i];
    const PlanValue& pv = inst_.plan->values()[v];
    if (dtype == DType::kUnknown) dtype = pv.dtype;
    if (!DTypeFits(dtype, pv.dtype)) {
      return absl::InvalidArgumentError(absl::StrCat(step.node->Describe(), ": output ", i, " is ", DTypeName(dtype),
                                                     " but the plan expects ", DTypeName(pv.dtype)));
    }
    if (ir::IsBoxed(dtype)) {
      // A host grove::Value, emptied for the kernel to fill.
      if (inst_.boxed[v] == nullptr) inst_.boxed[v] = std::make_unique<Value>();
      *inst_.boxed[v] = EmptyBoxedValue(dtype);
      inst_.views[v] = TensorView(dtype, {}, static_cast<void*>(inst_.boxed[v].get()));
      return &inst_.views[v];
    }
    absl::StatusOr<uint64_t> bytes = ir::CheckedByteSize(dtype, shape, step.node->Describe());
    if (!bytes.ok()) return bytes.status();
    if (absl::Status s = inst_.dynamic[v]->Reserve(*bytes); !s.ok()) return s;
    inst_.views[v] = TensorView(dtype, std::move(shape), static_cast<void*>(inst_.dynamic[v]->data()));
    return &inst_.views[v];
  }

  void* backend_context() override { return session_.backend_.kernel_context(); }
  ir::StringArena* strings() override { return &session_.strings_; }
  absl::StatusOr<void*> Workspace(uint64_t bytes) override {
    if (absl::Status s = session_.step_workspace_.Reserve(bytes); !s.ok()) return s;
    return static_cast<void*>(session_.step_workspace_.data());
  }

  absl::StatusOr<std::vector<TensorView>> RunSubgraph(int subgraph, absl::Span<const TensorView> inputs) override {
    const ir::Graph& g = session_.graph_;
    if (subgraph <= 0 || subgraph >= static_cast<int>(g.subgraphs.size())) {
      return absl::InternalError(absl::StrCat("RunSubgraph: no subgraph ", subgraph));
    }
    // Every Loop, Scan and If body call passes here: a loop that runs for
    // hours (nested ones included) stops at the deadline, even when its
    // body has no steps.
    if (session_.interruptible_) {
      if (absl::Status s = session_.CheckInterrupt(*inst_.plan->steps()[step_].node); !s.ok()) return s;
    }
    if (++session_.body_runs_ > session_.options_.max_body_runs && session_.options_.max_body_runs > 0) {
      return absl::ResourceExhaustedError(absl::StrCat(
          inst_.plan->steps()[step_].node->Describe(), ": the run has made ", session_.options_.max_body_runs,
          " subgraph runs (If branches, Loop and Scan iterations), the limit of SessionOptions::max_body_runs"));
    }
    const ir::Subgraph& sg = g.subgraphs[subgraph];
    std::vector<TensorView> captures;
    captures.reserve(sg.captures.size());
    for (int t : sg.captures) {
      const int v = inst_.plan->ValueOf(t);
      if (v < 0) return absl::InternalError(absl::StrCat("capture '", g.tensors[t].name, "' is not in scope"));
      captures.push_back(inst_.views[v]);
    }
    absl::StatusOr<PlanInstance*> child = session_.GetPlan(subgraph, inputs, captures);
    if (!child.ok()) return child.status();
    if (absl::Status s = session_.Execute(**child, inputs, captures); !s.ok()) return s;
    std::vector<TensorView> outs;
    outs.reserve((*child)->plan->output_values().size());
    for (int v : (*child)->plan->output_values()) outs.push_back((*child)->views[v]);
    return outs;
  }

 private:
  Executor& session_;
  PlanInstance& inst_;
  int step_;
};

// What a CPU kernel calls back into when it runs inside a CUDA plan (an op
// with no CUDA kernel): outputs it allocates and subgraph results are host
// memory; the executor copies outputs to the device afterwards.
class FallbackHost : public ir::KernelContext::Host {
 public:
  FallbackHost(Executor& session, PlanInstance& inst, int step, std::vector<TensorView>& host_outs,
               std::vector<TensorView*>& host_out_ptrs)
      : session_(session), inst_(inst), step_(step), device_host_(session, inst, step), host_outs_(host_outs),
        host_out_ptrs_(host_out_ptrs) {}

  absl::StatusOr<TensorView*> AllocateOutput(int i, DType dtype, std::vector<int64_t> shape) override {
    const PlanStep& step = inst_.plan->steps()[step_];
    if (i < 0 || i >= static_cast<int>(step.outputs.size()) || step.outputs[i] < 0) {
      return absl::InternalError(absl::StrCat(step.node->Describe(), ": allocates output ", i, " it does not have"));
    }
    const int v = step.outputs[i];
    const PlanValue& pv = inst_.plan->values()[v];
    if (dtype == DType::kUnknown) dtype = pv.dtype;
    if (ir::IsBoxed(dtype)) {
      // Sequences and optionals live on the host on every backend.
      absl::StatusOr<TensorView*> view = device_host_.AllocateOutput(i, dtype, {});
      if (!view.ok()) return view.status();
      host_outs_[i] = **view;
      host_out_ptrs_[i] = &host_outs_[i];
      return host_out_ptrs_[i];
    }
    absl::StatusOr<uint64_t> bytes = ir::CheckedByteSize(dtype, shape, step.node->Describe());
    if (!bytes.ok()) return bytes.status();
    if (absl::Status s = inst_.host_copies[v]->Reserve(*bytes); !s.ok()) return s;
    host_outs_[i] = TensorView(dtype, std::move(shape), static_cast<void*>(inst_.host_copies[v]->data()));
    host_out_ptrs_[i] = &host_outs_[i];
    return host_out_ptrs_[i];
  }

  ir::StringArena* strings() override { return &session_.strings_; }

  absl::StatusOr<std::vector<TensorView>> RunSubgraph(int subgraph, absl::Span<const TensorView> inputs) override {
    absl::StatusOr<std::vector<TensorView>> outs = device_host_.RunSubgraph(subgraph, inputs);
    if (!outs.ok()) return outs;
    // The CPU kernel reads the results on the host.
    copies_.resize(std::max(copies_.size(), outs->size()));
    for (size_t i = 0; i < outs->size(); ++i) {
      TensorView& o = (*outs)[i];
      if (ir::IsBoxed(o.dtype)) continue;  // on the host already
      if (copies_[i] == nullptr) copies_[i] = std::make_unique<Buffer>();
      if (absl::Status s = copies_[i]->Reserve(o.byte_size()); !s.ok()) return s;
      if (absl::Status s = session_.backend_.CopyAsync(copies_[i]->data(), o.data, o.byte_size());
          !s.ok()) {
        return s;
      }
      session_.stats_.bytes_device_to_host += static_cast<int64_t>(o.byte_size());
      o.data = copies_[i]->data();
    }
    if (absl::Status s = session_.backend_.Synchronize(); !s.ok()) return s;
    return outs;
  }

 private:
  Executor& session_;
  PlanInstance& inst_;
  int step_;
  StepHost device_host_;
  std::vector<TensorView>& host_outs_;
  std::vector<TensorView*>& host_out_ptrs_;
  std::vector<std::unique_ptr<Buffer>> copies_;
};

absl::StatusOr<PlanInstance*> Executor::GetPlan(int subgraph, absl::Span<const TensorView> inputs,
                                                absl::Span<const TensorView> captures) {
  PlanCache::Key(subgraph, inputs, captures, &key_);
  if (PlanInstance* hit = plans_.Find(key_, run_serial_); hit != nullptr) {
    ++stats_.plan_cache_hits;
    return hit;
  }

  const ir::Subgraph& sg = graph_.subgraphs[subgraph];
  if (inputs.size() != sg.inputs.size()) {
    return absl::InvalidArgumentError(absl::StrCat("subgraph '", sg.name, "' takes ", sg.inputs.size(),
                                                   " inputs, given ", inputs.size()));
  }
  auto sig_of = [](const TensorView& v) {
    if (!ir::IsBoxed(v.dtype)) return ValueSig{v.dtype, v.shape};
    ValueSig sig{v.dtype, {}};
    sig.rank_known = ir::SharedItemShape(ir::BoxedValue(v), &sig.shape);
    return sig;
  };
  std::vector<ValueSig> in_sigs, cap_sigs;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const ir::TensorDecl& d = graph_.tensors[sg.inputs[i]];
    if (!DTypeFits(inputs[i].dtype, d.dtype)) {
      return absl::InvalidArgumentError(absl::StrCat("subgraph '", sg.name, "' input '", d.name, "' wants ",
                                                     DTypeName(d.dtype), ", given ", DTypeName(inputs[i].dtype)));
    }
    in_sigs.push_back(sig_of(inputs[i]));
  }
  for (const TensorView& c : captures) cap_sigs.push_back(sig_of(c));
  absl::StatusOr<std::unique_ptr<ExecutionPlan>> plan =
      ExecutionPlan::Build(graph_, subgraph, in_sigs, cap_sigs, &backend_);
  if (!plan.ok()) return plan.status();
  if (backend_.kind() != ir::Backend::kCpu && options_.strict_device) {
    std::vector<std::string> ops;
    for (const PlanStep& step : (*plan)->steps()) {
      if (step.host_fallback) ops.push_back(step.node->Describe());
    }
    if (!ops.empty()) {
      return absl::FailedPreconditionError(absl::StrCat("strict_device: no CUDA kernel for ",
                                                        absl::StrJoin(ops, "; ")));
    }
  }

  auto inst = std::make_unique<PlanInstance>(&backend_);
  inst->plan = std::move(*plan);
  const ExecutionPlan& p = *inst->plan;
  if (absl::Status s = inst->arena.Reserve(p.arena_bytes()); !s.ok()) return s;
  inst->views.resize(p.values().size());
  inst->dynamic.resize(p.values().size());
  inst->boxed.resize(p.values().size());
  for (size_t v = 0; v < p.values().size(); ++v) {
    const PlanValue& pv = p.values()[v];
    TensorView& view = inst->views[v];
    view.dtype = pv.dtype;
    view.shape = pv.shape;
    switch (pv.kind) {
      case Storage::kArena: view.data = inst->arena.data() + pv.offset; break;
      case Storage::kWeight:
      case Storage::kFolded: view.data = const_cast<void*>(pv.data); break;
      case Storage::kDynamic: inst->dynamic[v] = std::make_unique<Buffer>(&backend_); break;
      case Storage::kBoxed:
        inst->boxed[v] = std::make_unique<Value>(EmptyBoxedValue(pv.dtype));
        view.data = inst->boxed[v].get();
        break;
      case Storage::kInput:
      case Storage::kCapture:
      case Storage::kFusedAway: break;
    }
  }
  for (const PlanStep& step : p.steps()) {
    inst->step_ptrs.push_back(inst->ptrs.size());
    for (int v : step.inputs) inst->ptrs.push_back(v < 0 ? nullptr : &inst->views[v]);
    for (int v : step.outputs) inst->ptrs.push_back(v < 0 ? nullptr : &inst->views[v]);
  }
  if (!backend_.host_memory()) {
    if (absl::Status s = SetUpDeviceInstance(*inst); !s.ok()) return s;
  }
  ++stats_.plans_created;
  PlanInstance* result = inst.get();
  if (plans_.Insert(key_, std::move(inst), run_serial_, options_.max_cached_plans)) ++stats_.plans_evicted;
  return result;
}

absl::Status Executor::Execute(PlanInstance& inst, absl::Span<const TensorView> inputs,
                                  absl::Span<const TensorView> captures) {
  ++inst.active;
  absl::Cleanup done = [&inst] { --inst.active; };
  const ExecutionPlan& p = *inst.plan;
  if (!backend_.host_memory()) {
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (absl::Status s = BindValue(inst, p.input_values()[i], inputs[i]); !s.ok()) return s;
    }
    for (size_t i = 0; i < captures.size(); ++i) {
      if (absl::Status s = BindValue(inst, p.capture_values()[i], captures[i]); !s.ok()) return s;
    }
  } else {
    for (size_t i = 0; i < inputs.size(); ++i) inst.views[p.input_values()[i]].data = inputs[i].data;
    for (size_t i = 0; i < captures.size(); ++i) inst.views[p.capture_values()[i]].data = captures[i].data;
  }

  const std::vector<PlanStep>& steps = p.steps();
  int segment = -1;
  for (size_t s = 0; s < steps.size(); ++s) {
    const PlanStep& step = steps[s];
    if (step.segment != segment) {
      segment = step.segment;
      if (segment >= 0) ++stats_.segments_run;
    }
    if (step.outputs_empty) continue;
    if (interruptible_) {
      if (absl::Status st = CheckInterrupt(*step.node); !st.ok()) return st;
    }
    TensorView* const* ptrs = inst.ptrs.data() + inst.step_ptrs[s];
    absl::Span<TensorView* const> in_ptrs(ptrs, step.inputs.size());
    absl::Span<TensorView* const> out_ptrs(ptrs + step.inputs.size(), step.outputs.size());
    StepHost host(*this, inst, static_cast<int>(s));
    if (!backend_.host_memory() && step.host_fallback) {
      if (absl::Status st = RunFallbackStep(inst, static_cast<int>(s), in_ptrs, out_ptrs); !st.ok()) return st;
      ++stats_.kernels_run;
      ++stats_.cpu_fallback_steps;
      continue;
    }

    if (step.infer_at_run) {
      // Shapes follow from the actual inputs (and their values, all known now;
      // on CUDA small ones are read back for the shape function).
      std::vector<ir::ShapeContext::Input> ins(step.inputs.size());
      for (size_t i = 0; i < step.inputs.size(); ++i) {
        if (in_ptrs[i] == nullptr) continue;
        const TensorView* value = in_ptrs[i];
        if (!backend_.host_memory() && !ir::IsBoxed(in_ptrs[i]->dtype)) {
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

    if (!backend_.host_memory()) {
      backend_.SetStepHostInputs(absl::MakeConstSpan(inst.host_ptrs.data() + inst.step_ptrs[s], step.inputs.size()));
    }
    ir::KernelContext ctx(*step.node, in_ptrs, out_ptrs, &host);
    if (step.prepared_at_plan) {
      // Inside a segment on a device: no wait and no read may happen here.
      const bool watch = step.segment >= 0 && !backend_.host_memory();
      BackendCounters before;
      if (watch) before = backend_.counters();
      ctx.SetPrepared(&step.prepared,
                      step.prepared.workspace_bytes > 0 ? inst.arena.data() + step.workspace_offset : nullptr);
      if (absl::Status st = step.node->def->kernels[static_cast<int>(step.backend)](ctx); !st.ok()) return st;
      if (watch) {
        const BackendCounters after = backend_.counters();
        stats_.host_waits_inside_segments += (after.synchronizations - before.synchronizations) +
                                             (after.device_to_host_reads - before.device_to_host_reads);
      }
    } else if (step.segment >= 0 && !backend_.host_memory()) {
      const BackendCounters before = backend_.counters();
      if (absl::Status st = ir::RunKernel(step.backend, ctx); !st.ok()) return st;
      const BackendCounters after = backend_.counters();
      stats_.host_waits_inside_segments += (after.synchronizations - before.synchronizations) +
                                           (after.device_to_host_reads - before.device_to_host_reads);
    } else if (absl::Status st = ir::RunKernel(step.backend, ctx); !st.ok()) {
      return st;
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
  }
  return absl::OkStatus();
}

Executor::Executor(const internal::ModelImpl& model, const SessionOptions& options, Backend& backend,
                   SessionStats& stats)
    : model_(model), graph_(model.graph()), options_(options), backend_(backend), stats_(stats),
      step_workspace_(&backend) {}

Executor::~Executor() = default;

absl::Status Executor::Init() {
  absl::StatusOr<const uint8_t*> weights = model_.DeviceBytes(backend_);
  if (!weights.ok()) return weights.status();
  device_weights_ = *weights;
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

absl::Status Executor::SetUpDeviceInstance(PlanInstance& inst) {
  const ExecutionPlan& p = *inst.plan;
  const size_t n = p.values().size();
  inst.host_views.assign(n, TensorView());
  inst.copy_views.assign(n, TensorView());
  inst.staging.resize(n);
  inst.host_copies.resize(n);
  for (size_t v = 0; v < n; ++v) {
    inst.staging[v] = std::make_unique<Buffer>(&backend_);
    inst.host_copies[v] = std::make_unique<Buffer>();
  }
  // Weights point into the model's bytes, uploaded once per device; folded
  // values (and any weight outside those bytes) are uploaded per plan.
  const uint8_t* host_base = model_.host_bytes();
  const size_t host_size = model_.host_byte_size();
  auto in_model = [&](const void* data) {
    const uint8_t* d = static_cast<const uint8_t*>(data);
    return d >= host_base && d < host_base + host_size;
  };
  uint64_t folded_bytes = 0;
  std::vector<uint64_t> folded_offset(n, 0);
  for (size_t v = 0; v < n; ++v) {
    const PlanValue& pv = p.values()[v];
    if (pv.kind != Storage::kWeight && pv.kind != Storage::kFolded) continue;
    inst.host_views[v] = TensorView(pv.dtype, pv.shape, pv.data);
    if (pv.kind == Storage::kWeight && in_model(pv.data)) {
      inst.views[v].data = const_cast<uint8_t*>(device_weights_ + (static_cast<const uint8_t*>(pv.data) - host_base));
      continue;
    }
    folded_offset[v] = folded_bytes;
    folded_bytes += (pv.bytes + 63) / 64 * 64;
  }
  if (folded_bytes > 0) {
    if (absl::Status s = inst.folded.Reserve(folded_bytes); !s.ok()) return s;
    for (size_t v = 0; v < n; ++v) {
      const PlanValue& pv = p.values()[v];
      const bool upload = pv.kind == Storage::kFolded || (pv.kind == Storage::kWeight && !in_model(pv.data));
      if (!upload) continue;
      inst.views[v].data = inst.folded.data() + folded_offset[v];
      if (absl::Status s = backend_.CopyAsync(inst.views[v].data, pv.data, pv.bytes); !s.ok()) return s;
      stats_.bytes_host_to_device += static_cast<int64_t>(pv.bytes);
    }
  }
  inst.host_ptrs.assign(inst.ptrs.size(), nullptr);
  for (size_t s = 0; s < p.steps().size(); ++s) {
    const PlanStep& step = p.steps()[s];
    for (size_t i = 0; i < step.inputs.size(); ++i) {
      const int v = step.inputs[i];
      if (v >= 0 && inst.host_views[v].data != nullptr) inst.host_ptrs[inst.step_ptrs[s] + i] = &inst.host_views[v];
    }
  }
  return backend_.Synchronize();
}

absl::Status Executor::BindValue(PlanInstance& inst, int v, const TensorView& given) {
  const uint64_t bytes = given.byte_size();
  if (bytes == 0 || backend_.IsDevicePointer(given.data)) {
    inst.views[v].data = given.data;  // device memory: used in place
    return absl::OkStatus();
  }
  if (absl::Status s = inst.staging[v]->Reserve(bytes); !s.ok()) return s;
  if (absl::Status s = backend_.CopyAsync(inst.staging[v]->data(), given.data, bytes); !s.ok()) return s;
  stats_.bytes_host_to_device += static_cast<int64_t>(bytes);
  inst.views[v].data = inst.staging[v]->data();
  return absl::OkStatus();
}

absl::StatusOr<const TensorView*> Executor::HostCopy(PlanInstance& inst, int v, const TensorView& device_view) {
  if (inst.host_views[v].data != nullptr) return &inst.host_views[v];
  if (ir::IsBoxed(device_view.dtype)) return &device_view;  // a host grove::Value on every backend
  const uint64_t bytes = device_view.byte_size();
  if (absl::Status s = inst.host_copies[v]->Reserve(bytes); !s.ok()) return s;
  if (absl::Status s = backend_.CopyAsync(inst.host_copies[v]->data(), device_view.data, bytes); !s.ok()) {
    return s;
  }
  if (absl::Status s = backend_.Synchronize(); !s.ok()) return s;
  stats_.bytes_device_to_host += static_cast<int64_t>(bytes);
  inst.copy_views[v] = TensorView(device_view.dtype, device_view.shape, static_cast<void*>(inst.host_copies[v]->data()));
  return &inst.copy_views[v];
}

absl::Status Executor::RunFallbackStep(PlanInstance& inst, int s, absl::Span<TensorView* const> in_ptrs,
                                          absl::Span<TensorView* const> out_ptrs) {
  const PlanStep& step = inst.plan->steps()[s];
  // Inputs to the host (values the plan knows are there already).
  std::vector<TensorView> host_ins(step.inputs.size());
  std::vector<TensorView*> host_in_ptrs(step.inputs.size(), nullptr);
  for (size_t i = 0; i < step.inputs.size(); ++i) {
    if (in_ptrs[i] == nullptr) continue;
    absl::StatusOr<const TensorView*> h = HostCopy(inst, step.inputs[i], *in_ptrs[i]);
    if (!h.ok()) return h.status();
    host_ins[i] = **h;
    host_in_ptrs[i] = &host_ins[i];
  }
  // Outputs on the host: planned ones now, the rest when the kernel or the
  // shape function allocates them.
  std::vector<TensorView> host_outs(step.outputs.size());
  std::vector<TensorView*> host_out_ptrs(step.outputs.size(), nullptr);
  FallbackHost host(*this, inst, s, host_outs, host_out_ptrs);
  if (step.infer_at_run) {
    std::vector<ir::ShapeContext::Input> ins(step.inputs.size());
    for (size_t i = 0; i < step.inputs.size(); ++i) {
      if (host_in_ptrs[i] == nullptr) continue;
      ins[i] = InputOfView(host_ins[i], host_in_ptrs[i]);
    }
    if (absl::Status st = InferAndAllocate(step, std::move(ins), host); !st.ok()) return st;
  } else if (step.kernel_allocates) {
    // Empty until the kernel allocates them; has_output() is true for each.
    for (size_t i = 0; i < step.outputs.size(); ++i) {
      if (step.outputs[i] >= 0) host_out_ptrs[i] = &host_outs[i];
    }
  } else {
    for (size_t i = 0; i < step.outputs.size(); ++i) {
      if (out_ptrs[i] == nullptr) continue;
      const int v = step.outputs[i];
      if (ir::IsBoxed(out_ptrs[i]->dtype)) {
        host_outs[i] = *out_ptrs[i];
        host_out_ptrs[i] = &host_outs[i];
        continue;
      }
      if (absl::Status st = inst.host_copies[v]->Reserve(out_ptrs[i]->byte_size()); !st.ok()) return st;
      host_outs[i] = TensorView(out_ptrs[i]->dtype, out_ptrs[i]->shape, static_cast<void*>(inst.host_copies[v]->data()));
      host_out_ptrs[i] = &host_outs[i];
    }
  }
  ir::KernelContext ctx(*step.node, host_in_ptrs, host_out_ptrs, &host);
  if (absl::Status st = ir::RunKernel(ir::Backend::kCpu, ctx); !st.ok()) return st;
  // Outputs back to the device.
  for (size_t i = 0; i < step.outputs.size(); ++i) {
    const int v = step.outputs[i];
    if (v < 0) continue;
    if (host_out_ptrs[i] == nullptr || host_outs[i].dtype == DType::kUnknown) {
      return absl::InternalError(absl::StrCat(step.node->Describe(), ": output ", i, " was not produced"));
    }
    const TensorView& h = host_outs[i];
    const PlanValue& pv = inst.plan->values()[v];
    if (ir::IsBoxed(h.dtype)) continue;  // the kernel filled the host value itself
    if (pv.kind == Storage::kDynamic) {
      if (absl::Status st = inst.dynamic[v]->Reserve(h.byte_size()); !st.ok()) return st;
      inst.views[v] = TensorView(h.dtype, h.shape, static_cast<void*>(inst.dynamic[v]->data()));
    }
    if (pv.shape_known && h.shape != pv.shape) {
      return absl::InvalidArgumentError(absl::StrCat(step.node->Describe(), ": output ", i, " has shape ",
                                                     ir::ShapeToString(ir::FromConcrete(h.shape)),
                                                     " but the plan expects ",
                                                     ir::ShapeToString(ir::FromConcrete(pv.shape))));
    }
    if (absl::Status st = backend_.CopyAsync(inst.views[v].data, h.data, h.byte_size()); !st.ok()) return st;
    stats_.bytes_host_to_device += static_cast<int64_t>(h.byte_size());
  }
  // The host buffers are reused by the next fallback step.
  return backend_.Synchronize();
}

}  // namespace grove::runtime
