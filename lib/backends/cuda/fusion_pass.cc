// The CUDA plan pass: chains of single-use elementwise steps of one float
// dtype become one fused step running ew_chain (lib/backends/cuda/fusion.h);
// the intermediates are never stored (Storage::kFusedAway).
#include <functional>
#include <optional>
#include <vector>

#include "jit/kernels/elementwise_params.h"
#include "lib/backends/cuda/cuda_backend.h"
#include "lib/backends/cuda/fusion.h"

namespace grove::cuda {

void FuseElementwiseChains(runtime::PlanGraph& plan) {
  using runtime::PlanStep;
  using runtime::PlanValue;
  using runtime::Storage;
  std::vector<PlanValue>& values = plan.values;
  std::vector<PlanStep>& steps = plan.steps;
  const std::function<int(int)>& value_of = plan.value_of;
  int num_fused_steps = 0;
  const int num_values = static_cast<int>(values.size());
  // Who reads each value; a value read by one step, once, and not an output
  // of the subgraph or a capture of a body can live inside a fused kernel.
  std::vector<int> uses(num_values, 0), consumer(num_values, -1);
  for (size_t s = 0; s < steps.size(); ++s) {
    for (int v : steps[s].inputs) {
      if (v < 0) continue;
      ++uses[v];
      consumer[v] = static_cast<int>(s);
    }
    for (int t : steps[s].node->implicit_inputs) {
      const int v = value_of(t);
      if (v >= 0) uses[v] += 2;
    }
  }
  for (int v : plan.output_values) uses[v] += 2;

  auto float_dtype = [](DType d) {
    return d == DType::kF32 || d == DType::kF16 || d == DType::kBF16 || d == DType::kF64;
  };
  auto fusable = [&](const PlanStep& step) {
    if (step.host_fallback || step.infer_at_run || step.kernel_allocates) return false;
    if (step.outputs.size() != 1 || step.outputs[0] < 0) return false;
    if (!IsFusableElementwise(*step.node)) return false;
    const PlanValue& out = values[step.outputs[0]];
    if (!float_dtype(out.dtype) || out.kind != Storage::kArena) return false;
    for (int v : step.inputs) {
      if (v >= 0 && values[v].dtype != out.dtype) return false;
    }
    return true;
  };

  std::vector<bool> absorbed(steps.size(), false);
  std::vector<std::optional<PlanStep>> replacement(steps.size());
  for (size_t s = 0; s < steps.size(); ++s) {
    if (absorbed[s] || !fusable(steps[s])) continue;
    std::vector<int> chain{static_cast<int>(s)};
    while (static_cast<int>(chain.size()) < grove_k::kEwMaxLinks) {
      const PlanStep& cur = steps[chain.back()];
      const int v = cur.outputs[0];
      const int next = consumer[v];
      if (uses[v] != 1 || next <= chain.back() || absorbed[next] || !fusable(steps[next])) break;
      const PlanValue& nv = values[steps[next].outputs[0]];
      if (nv.dtype != values[v].dtype || nv.shape != values[v].shape) break;
      chain.push_back(next);
    }
    // Longest prefix the fused kernel takes (operand and link limits).
    while (chain.size() > 1) {
      std::vector<const ir::Node*> nodes;
      for (int c : chain) nodes.push_back(steps[c].node);
      std::vector<int> external;
      absl::StatusOr<ir::Node> fused = MakeFusedElementwiseNode(nodes, &external);
      if (!fused.ok()) {
        chain.pop_back();
        continue;
      }
      plan.owned_nodes.push_back(std::make_unique<ir::Node>(std::move(*fused)));
      const ir::Node* node = plan.owned_nodes.back().get();
      PlanStep step;
      step.node = node;
      step.backend = ir::Backend::kCuda;
      step.kernel = node->def->kernels[static_cast<int>(ir::Backend::kCuda)];
      step.prepare = node->def->prepares[static_cast<int>(ir::Backend::kCuda)];
      for (int t : external) step.inputs.push_back(value_of(t));
      step.outputs.push_back(steps[chain.back()].outputs[0]);
      for (size_t i = 0; i + 1 < chain.size(); ++i) {
        absorbed[chain[i]] = true;
        values[steps[chain[i]].outputs[0]].kind = Storage::kFusedAway;
      }
      replacement[chain.back()] = std::move(step);
      absorbed[chain.back()] = true;
      ++num_fused_steps;
      ++plan.fused_steps;
      plan.fused_ops += static_cast<int>(chain.size());
      break;
    }
  }
  if (num_fused_steps == 0) return;
  std::vector<PlanStep> kept;
  for (size_t s = 0; s < steps.size(); ++s) {
    if (replacement[s].has_value()) {
      kept.push_back(std::move(*replacement[s]));
    } else if (!absorbed[s]) {
      kept.push_back(std::move(steps[s]));
    }
  }
  steps = std::move(kept);
}

}  // namespace grove::cuda
