// The plan's steps made ready to run: each kernel's prepare, once per plan,
// and the cut of the step list into straight-line segments at the steps that
// need the host.
#include <deque>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "lib/runtime/backend.h"
#include "lib/runtime/execution_plan.h"

namespace grove::runtime {
namespace {

// What a prepare sees of its host: the backend's state and threads (oneDNN
// makes a primitive for the count its invoke will run on), nothing to
// allocate or run.
class PrepareHost : public ir::KernelContext::Host {
 public:
  PrepareHost(void* backend_context, ir::IntraOpThreads* threads)
      : backend_context_(backend_context), threads_(threads) {}
  void* backend_context() override { return backend_context_; }
  ir::IntraOpThreads* intra_op_threads() override { return threads_; }
  absl::StatusOr<TensorView*> AllocateOutput(int, DType, std::vector<int64_t>) override {
    return absl::InternalError("a kernel's prepare asked to allocate an output");
  }
  absl::StatusOr<std::vector<TensorView>> RunSubgraph(int, absl::Span<const TensorView>) override {
    return absl::InternalError("a kernel's prepare asked to run a subgraph");
  }

 private:
  void* backend_context_;
  ir::IntraOpThreads* threads_;
};

}  // namespace

absl::Status ExecutionPlan::PrepareSteps(Backend& backend) {
  PrepareHost host(backend.kernel_context(), backend.intra_op_threads());
  std::vector<TensorView> views;
  std::vector<TensorView*> in_ptrs, out_ptrs;
  std::vector<const TensorView*> host_inputs;
  std::deque<TensorView> host_copies;
  for (PlanStep& step : steps_) {
    if (step.host_fallback || step.infer_at_run || step.kernel_allocates || step.outputs_empty) continue;
    const ir::PrepareFn prepare = step.prepare;
    if (prepare == nullptr) continue;
    // Views of the planned dtypes and shapes; data only where the host has
    // it (weights, folded values), and on the CPU only.
    views.assign(step.inputs.size() + step.outputs.size(), TensorView());
    in_ptrs.assign(step.inputs.size(), nullptr);
    out_ptrs.assign(step.outputs.size(), nullptr);
    host_inputs.assign(step.inputs.size(), nullptr);
    auto view_of = [&](int v, size_t slot) {
      const PlanValue& pv = values_[v];
      views[slot] = TensorView(pv.dtype, pv.shape, static_cast<const void*>(nullptr));
      if (pv.kind == Storage::kWeight || pv.kind == Storage::kFolded) {
        if (backend.host_memory()) views[slot].data = const_cast<void*>(pv.data);
        return true;
      }
      return false;
    };
    for (size_t i = 0; i < step.inputs.size(); ++i) {
      if (step.inputs[i] < 0) continue;
      if (view_of(step.inputs[i], i)) {
        host_inputs[i] = &views[i];
        if (!backend.host_memory()) {
          // The host copy for ExecContext::host_input; the view itself stays data-less.
          const PlanValue& pv = values_[step.inputs[i]];
          host_copies.push_back(TensorView(pv.dtype, pv.shape, pv.data));
          host_inputs[i] = &host_copies.back();
        }
      }
      in_ptrs[i] = &views[i];
    }
    for (size_t i = 0; i < step.outputs.size(); ++i) {
      if (step.outputs[i] < 0) continue;
      view_of(step.outputs[i], step.inputs.size() + i);
      out_ptrs[i] = &views[step.inputs.size() + i];
    }
    backend.SetStepHostInputs(host_inputs);
    ir::KernelContext ctx(*step.node, in_ptrs, out_ptrs, &host);
    absl::StatusOr<ir::PreparedKernel> prepared = prepare(ctx);
    backend.SetStepHostInputs({});
    if (!prepared.ok()) {
      // A device kernel that does not take this step after all (a dtype or an
      // attribute it has no code for) says Unimplemented: the step runs its
      // CPU kernel with copies, as one the backend's Takes refused does
      // (strict_device still refuses the plan).
      const int cpu = static_cast<int>(ir::Backend::kCpu);
      if (absl::IsUnimplemented(prepared.status()) && step.backend != ir::Backend::kCpu &&
          step.node->def->kernels[cpu] != nullptr) {
        step.backend = ir::Backend::kCpu;
        step.host_fallback = true;
        step.kernel = step.node->def->kernels[cpu];
        step.prepare = step.node->def->prepares[cpu];
        continue;
      }
      return prepared.status();
    }
    step.prepared = *std::move(prepared);
    step.prepared_at_plan = true;
  }
  return absl::OkStatus();
}

void ExecutionPlan::CutSegments(ir::Backend backend) {
  segments_.clear();
  int first = -1;
  for (size_t s = 0; s < steps_.size(); ++s) {
    PlanStep& step = steps_[s];
    step.host_reason.clear();
    if (step.host_fallback) {
      step.host_reason = "runs its CPU kernel (no kernel of this backend takes it)";
    } else if (step.kernel_allocates) {
      bool has_body = false;
      for (const ir::AttrSpec& a : step.node->def->attrs) has_body |= a.kind == ir::AttrKind::kSubgraph;
      step.host_reason = has_body ? "control flow: the host picks the path"
                                  : "its output shapes depend on the data (the kernel allocates them)";
    } else if (step.infer_at_run) {
      step.host_reason = "its output shapes are known only when it runs";
    } else if (step.prepared_at_plan && step.prepared.needs_host) {
      step.host_reason = "its kernel reads device data back";
    } else if (backend != ir::Backend::kCpu) {
      const uint64_t reads = step.node->def->host_inputs[static_cast<int>(step.backend)];
      for (size_t i = 0; i < step.inputs.size() && i < 64; ++i) {
        if (!(reads >> i & 1) || step.inputs[i] < 0) continue;
        const Storage kind = values_[step.inputs[i]].kind;
        if (kind == Storage::kWeight || kind == Storage::kFolded) continue;
        step.host_reason = absl::StrCat("reads input ", i, " on the host (a value computed when run)");
        break;
      }
    }
    if (!step.host_reason.empty()) {
      step.segment = -1;
      if (first >= 0) segments_.push_back(PlanSegment{first, static_cast<int>(s)});
      first = -1;
      continue;
    }
    if (first < 0) first = static_cast<int>(s);
    step.segment = static_cast<int>(segments_.size());
  }
  if (first >= 0) segments_.push_back(PlanSegment{first, static_cast<int>(steps_.size())});
}

}  // namespace grove::runtime
