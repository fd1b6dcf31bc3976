// What kernels call back into while the executor runs a step
// (ir::KernelContext::Host): outputs allocated when run, subgraph runs
// (If, Loop, Scan bodies), strings and workspaces. Private to lib/runtime's
// executor (executor.cc, device_steps.cc).
#ifndef GROVE_LIB_RUNTIME_STEP_HOST_H_
#define GROVE_LIB_RUNTIME_STEP_HOST_H_

#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "lib/ir/value_type.h"
#include "lib/runtime/executor.h"

namespace grove::runtime {

// What a shape function sees of a value when it runs: a sequence or optional
// by the shape its tensors share.
inline ir::ShapeContext::Input InputOfView(const TensorView& view, const TensorView* value) {
  if (!ir::IsBoxed(view.dtype)) return ir::ShapeContext::Input{true, view.dtype, ir::FromConcrete(view.shape), value};
  std::vector<int64_t> shape;
  const bool rank_known = ir::SharedItemShape(ir::BoxedValue(view), &shape);
  return ir::ShapeContext::Input{true, view.dtype, ir::FromPartlyConcrete(shape), nullptr, rank_known};
}

// The empty value of a boxed dtype: an empty sequence, an absent optional.
inline Value EmptyBoxedValue(DType dtype) {
  if (ir::KindOf(dtype) == ValueKind::kSequence) return Value::Sequence(ir::ElemDType(dtype));
  return Value::None(ir::KindOf(dtype), ir::ElemDType(dtype));
}

// A produced dtype against the planned one; a planned sequence or optional
// whose tensors' dtype was left to the run takes any.
inline bool DTypeFits(DType got, DType planned) {
  if (planned == DType::kUnknown || got == planned) return true;
  // A Loop body input declared optional(T) takes the T its body returned.
  if (ir::IsOptionalDType(planned) && got == ir::UnwrapOptional(planned)) return true;
  return ir::IsBoxed(got) && planned == ir::BoxedDType(ir::KindOf(got), DType::kUnknown);
}

// Output i of step `s` of `inst` as planned: its value id, and `dtype`
// kUnknown made the planned dtype (a Loop's scan output after zero trips).
inline absl::StatusOr<int> PlannedOutput(const PlanInstance& inst, int s, int i, DType* dtype) {
  const PlanStep& step = inst.plan->steps()[s];
  if (i < 0 || i >= static_cast<int>(step.outputs.size()) || step.outputs[i] < 0) {
    return absl::InternalError(absl::StrCat(step.node->Describe(), ": allocates output ", i, " it does not have"));
  }
  const int v = step.outputs[i];
  if (*dtype == DType::kUnknown) *dtype = inst.plan->values()[v].dtype;
  return v;
}

// What a kernel calls back into while step `step` of `inst` runs.
class StepHost : public ir::KernelContext::Host {
 public:
  StepHost(Executor& session, PlanInstance& inst, int step) : session_(session), inst_(inst), step_(step) {}

  absl::StatusOr<TensorView*> AllocateOutput(int i, DType dtype, std::vector<int64_t> shape) override {
    const PlanStep& step = inst_.plan->steps()[step_];
    absl::StatusOr<int> value = PlannedOutput(inst_, step_, i, &dtype);
    if (!value.ok()) return value.status();
    const int v = *value;
    const PlanValue& pv = inst_.plan->values()[v];
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
  ir::IntraOpThreads* intra_op_threads() override { return session_.backend_.intra_op_threads(); }
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
    Tracer* const tracer = session_.tracer_;
    const int64_t start = tracer != nullptr ? tracer->Now() : 0;
    absl::StatusOr<PlanInstance*> child = session_.GetPlan(subgraph, inputs, captures);
    if (!child.ok()) return child.status();
    const bool plan_hit = session_.last_plan_hit_;
    absl::Status ran = session_.Execute(**child, inputs, captures);
    if (tracer != nullptr) {
      // One event per body call (an If branch, a Loop or Scan iteration).
      TraceArgs args;
      args.Str("subgraph", sg.name)
          .Str("caller", inst_.plan->steps()[step_].node->Describe())
          .Str("plan", plan_hit ? "cache hit" : "created")
          .Int("body_run", session_.body_runs_);
      if (!ran.ok()) args.Str("error", ran.ToString());
      const int64_t end = tracer->Now();
      tracer->AddSpan("subgraph", absl::StrCat("body '", sg.name, "'"), start, end, args);
      session_.body_ns_ += end - start;  // not the calling step's own time
      session_.body_end_ns_ = end;
    }
    if (!ran.ok()) return ran;
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

}  // namespace grove::runtime

#endif  // GROVE_LIB_RUNTIME_STEP_HOST_H_
