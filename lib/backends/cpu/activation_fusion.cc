// Conv / MatMul / Gemm + activation fusion on the CPU plan (see the header).
#include "lib/backends/cpu/activation_fusion.h"

#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "lib/backends/cpu/onednn.h"
#include "lib/backends/cpu/post_op.h"

namespace grove::cpu {
namespace {

using runtime::PlanStep;
using runtime::PlanValue;
using runtime::Storage;

bool IsFusionBase(const ir::Node& node) { return node.type == "Conv" || node.type == "MatMul" || node.type == "Gemm"; }

// A step the pass may touch: the CPU's own, its shapes known at plan time.
bool Plain(const PlanStep& step) {
  return step.backend == ir::Backend::kCpu && !step.host_fallback && !step.infer_at_run && !step.kernel_allocates &&
         step.node->implicit_inputs.empty();
}

// The only output of `step` (others omitted), or -1.
int SoleOutput(const PlanStep& step) {
  int out = -1;
  for (size_t i = 0; i < step.outputs.size(); ++i) {
    if (step.outputs[i] < 0) continue;
    if (i != 0) return -1;
    out = step.outputs[i];
  }
  return out;
}

}  // namespace

void FuseActivations(runtime::PlanGraph& plan) {
  if (!OneDnnEnabled()) return;
  std::vector<PlanValue>& values = plan.values;
  std::vector<PlanStep>& steps = plan.steps;
  const int num_values = static_cast<int>(values.size());
  // Who reads each value: fused only when read once, by one step, and
  // neither an output of the subgraph nor captured by a body.
  std::vector<int> uses(num_values, 0), consumer(num_values, -1);
  for (size_t s = 0; s < steps.size(); ++s) {
    for (int v : steps[s].inputs) {
      if (v < 0) continue;
      ++uses[v];
      consumer[v] = static_cast<int>(s);
    }
    for (int t : steps[s].node->implicit_inputs) {
      const int v = plan.value_of(t);
      if (v >= 0) uses[v] += 2;
    }
  }
  for (int v : plan.output_values) uses[v] += 2;

  auto f32_arena = [&](int v) {
    return v >= 0 && values[v].dtype == DType::kF32 && values[v].kind == Storage::kArena && values[v].shape_known;
  };
  // A Clip bound: a constant f32 scalar the plan holds.
  auto constant_scalar = [&](int v) -> std::optional<float> {
    const PlanValue& pv = values[v];
    if ((pv.kind != Storage::kWeight && pv.kind != Storage::kFolded) || pv.data == nullptr ||
        pv.dtype != DType::kF32 || pv.bytes != sizeof(float)) {
      return std::nullopt;
    }
    float f;
    std::memcpy(&f, pv.data, sizeof(f));
    return f;
  };

  std::vector<bool> removed(steps.size(), false);
  int fused = 0;
  for (size_t s = 0; s < steps.size(); ++s) {
    PlanStep& base = steps[s];
    // The base's prepare reads the fused activation.
    if (removed[s] || !Plain(base) || base.prepare == nullptr || !IsFusionBase(*base.node)) continue;
    const int mid = SoleOutput(base);
    if (!f32_arena(mid) || uses[mid] != 1 || consumer[mid] <= static_cast<int>(s)) continue;
    bool f32_inputs = true;
    for (int v : base.inputs) f32_inputs &= v < 0 || values[v].dtype == DType::kF32;
    if (!f32_inputs) continue;
    const int c = consumer[mid];
    const PlanStep& act = steps[c];
    if (!Plain(act) || act.inputs.empty() || act.inputs[0] != mid) continue;
    const int out = SoleOutput(act);
    if (!f32_arena(out) || values[out].shape != values[mid].shape) continue;
    // Inputs past the first: Clip's bounds, constants only.
    std::optional<float> bounds[2];
    bool constant = true;
    for (size_t i = 1; i < act.inputs.size(); ++i) {
      if (act.inputs[i] < 0) continue;
      std::optional<float> f = i <= 2 ? constant_scalar(act.inputs[i]) : std::nullopt;
      if (!f.has_value()) constant = false;
      if (i <= 2) bounds[i - 1] = f;
    }
    if (!constant) continue;
    const std::optional<PostOp> post_op = PostOpOf(*act.node, bounds[0], bounds[1]);
    if (!post_op.has_value()) continue;

    auto node = std::make_unique<ir::Node>(*base.node);
    const std::string base_name = base.node->name.empty() ? base.node->type : base.node->name;
    const std::string act_name = act.node->name.empty() ? act.node->type : act.node->name;
    node->type = absl::StrCat(base.node->type, "+", act.node->type);
    node->name = absl::StrCat("fused(", base_name, "+", act_name, ")");
    node->outputs = {act.node->outputs[0]};
    SetPostOpAttributes(*post_op, &node->attrs);
    plan.owned_nodes.push_back(std::move(node));
    base.node = plan.owned_nodes.back().get();
    base.outputs = {out};
    values[mid].kind = Storage::kFusedAway;
    removed[c] = true;
    ++fused;
    ++plan.fused_steps;
    plan.fused_ops += 2;
  }
  if (fused == 0) return;
  std::vector<PlanStep> kept;
  kept.reserve(steps.size() - fused);
  for (size_t s = 0; s < steps.size(); ++s) {
    if (!removed[s]) kept.push_back(std::move(steps[s]));
  }
  steps = std::move(kept);
}

}  // namespace grove::cpu
