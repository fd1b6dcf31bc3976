// The plan as the attention pass (lib/runtime/attention_fusion.cc) reads
// it: who makes and who reads each value, and the small patterns a chain's
// links are made of (scalar scales, pass-throughs, Where(IsNaN(p), 0, p)).
#ifndef GROVE_LIB_RUNTIME_ATTENTION_FUSION_FINDER_H_
#define GROVE_LIB_RUNTIME_ATTENTION_FUSION_FINDER_H_

#include <algorithm>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "lib/ir/element_types.h"
#include "lib/ir/ops/attention_attrs.h"
#include "lib/runtime/plan_step.h"

namespace grove::runtime::attention_internal {

// Who makes and who reads each value of a plan.
class ChainFinder {
 public:
  ChainFinder(PlanGraph& plan, ir::Backend backend) : plan_(plan), backend_(backend) {
    const size_t n = plan.values.size();
    uses_.assign(n, 0);
    consumer_.assign(n, -1);
    producer_.assign(n, -1);
    for (size_t s = 0; s < plan.steps.size(); ++s) {
      const PlanStep& step = plan.steps[s];
      for (int v : step.outputs) {
        if (v >= 0) producer_[v] = static_cast<int>(s);
      }
      for (int v : step.inputs) {
        if (v < 0) continue;
        ++uses_[v];
        consumer_[v] = static_cast<int>(s);
      }
      for (int t : step.node->implicit_inputs) {
        const int v = plan.value_of(t);
        if (v >= 0) uses_[v] += 2;
      }
    }
    for (int v : plan.output_values) uses_[v] += 2;
    absorbed_.assign(plan.steps.size(), false);
  }

  // A step that may be a link: runs on the plan's backend, planned shapes,
  // not taken by an earlier chain.
  bool Linkable(int s) const {
    if (s < 0 || absorbed_[s]) return false;
    const PlanStep& st = plan_.steps[s];
    return !st.host_fallback && !st.infer_at_run && !st.kernel_allocates && st.backend == backend_ &&
           st.outputs.size() == 1 && st.outputs[0] >= 0;
  }
  // The step that makes `v` when it may be absorbed: read once, by the
  // chain, an arena value of known shape made by a linkable step of `type`.
  int AbsorbableProducer(int v, const char* type) const {
    if (v < 0 || uses_[v] != 1) return -1;
    const int p = producer_[v];
    if (!Linkable(p) || plan_.steps[p].node->type != type) return -1;
    const PlanValue& pv = plan_.values[v];
    if (pv.kind != Storage::kArena || !pv.shape_known) return -1;
    return p;
  }
  int consumer(int v) const { return uses_[v] == 1 ? consumer_[v] : -1; }
  int producer(int v) const { return producer_[v]; }

  // `s` passes its input 0 through unchanged, as exporters leave around a
  // Softmax: Identity, a Cast to the dtype it already has, a Dropout
  // (inference) without training_mode and mask. Whichever backend's kernel
  // it runs (CUDA's Dropout is the CPU's, with copies), it computes nothing.
  bool PassesThrough(int s) const {
    if (s < 0 || absorbed_[s]) return false;
    const PlanStep& st = plan_.steps[s];
    if (st.infer_at_run || st.kernel_allocates) return false;
    if (st.outputs.empty() || st.outputs[0] < 0 || st.inputs.empty() || st.inputs[0] < 0) return false;
    for (size_t i = 1; i < st.outputs.size(); ++i) {
      if (st.outputs[i] >= 0) return false;
    }
    const PlanValue& in = plan_.values[st.inputs[0]];
    const PlanValue& out = plan_.values[st.outputs[0]];
    if (in.dtype != out.dtype || in.shape != out.shape || out.kind != Storage::kArena) return false;
    const std::string& type = st.node->type;
    if (type == "Identity" || type == "Cast") return st.inputs.size() == 1;
    if (type == "Dropout") return st.inputs.size() < 3 || st.inputs[2] < 0;
    return false;
  }
  // The Where of Where(IsNaN(p), 0, p) when that pair alone reads p, the
  // IsNaN's output feeds that Where alone, and the Where is linkable (*isnan:
  // the IsNaN step); -1 otherwise. The 0 is a plan-time scalar constant.
  int ZeroedNans(int p, int* isnan) const {
    if (p < 0 || uses_[p] != 2) return -1;
    int n = -1, w = -1;
    for (size_t s = 0; s < plan_.steps.size(); ++s) {
      const PlanStep& st = plan_.steps[s];
      if (std::find(st.inputs.begin(), st.inputs.end(), p) == st.inputs.end()) continue;
      const std::string& type = st.node->type;
      if (type == "IsNaN" && n < 0) {
        n = static_cast<int>(s);
      } else if (type == "Where" && w < 0) {
        w = static_cast<int>(s);
      } else {
        return -1;
      }
    }
    // The IsNaN may run anywhere (CUDA has no kernel for it and runs the
    // CPU's): the fused kernel computes it, so it never runs.
    if (n < 0 || absorbed_[n] || !Linkable(w)) return -1;
    const PlanStep& in = plan_.steps[n];
    if (in.infer_at_run || in.kernel_allocates || in.outputs.size() != 1 || in.outputs[0] < 0) return -1;
    const PlanStep& where = plan_.steps[w];
    if (in.inputs.size() != 1 || in.inputs[0] != p) return -1;
    const int cond = in.outputs[0];
    if (uses_[cond] != 1 || consumer_[cond] != w || plan_.values[cond].kind != Storage::kArena) return -1;
    if (where.inputs.size() != 3 || where.inputs[0] != cond || where.inputs[2] != p) return -1;
    const int zero = where.inputs[1];
    std::optional<double> value = ScalarConstant(zero);
    if (!value.has_value() || *value != 0.0 || plan_.values[zero].shape.size() > plan_.values[p].shape.size()) {
      return -1;
    }
    const PlanValue& out = plan_.values[where.outputs[0]];
    if (out.kind != Storage::kArena || out.dtype != plan_.values[p].dtype || out.shape != plan_.values[p].shape) {
      return -1;
    }
    *isnan = n;
    return w;
  }
  void Absorb(int s) { absorbed_[s] = true; }
  const PlanValue& value(int v) const { return plan_.values[v]; }
  const PlanStep& step(int s) const { return plan_.steps[s]; }

  // A plan-time constant of one element (a weight or a folded value) of a
  // dtype FusedAttention takes, read in that dtype (f16 and bf16 widen to
  // f32 exactly).
  std::optional<double> ScalarConstant(int v) const {
    if (v < 0) return std::nullopt;
    const PlanValue& pv = plan_.values[v];
    if ((pv.kind != Storage::kWeight && pv.kind != Storage::kFolded) || pv.data == nullptr) return std::nullopt;
    if (!ir::IsAttentionDType(pv.dtype) || ir::NumElements(pv.shape) != 1) return std::nullopt;
    if (pv.dtype == DType::kF32) {
      float f;
      std::memcpy(&f, pv.data, sizeof(f));
      return f;
    }
    uint16_t bits;
    std::memcpy(&bits, pv.data, sizeof(bits));
    return pv.dtype == DType::kF16 ? ir::HalfToFloat(ir::Half{bits}) : ir::BFloat16ToFloat(ir::BFloat16{bits});
  }

  // `s` is Mul(x, c), Mul(c, x) or Div(x, c) with a scalar constant c whose
  // rank does not widen x: the scale, and x in *x.
  std::optional<ir::AttentionScale> ScaleOf(int s, int* x) const {
    const PlanStep& st = plan_.steps[s];
    if (st.inputs.size() != 2) return std::nullopt;
    const std::string& type = st.node->type;
    const int out = st.outputs[0];
    for (int side = 0; side < 2; ++side) {
      if (type == "Div" && side == 1) break;
      const int data = st.inputs[side], c = st.inputs[1 - side];
      if (data < 0 || data == c) continue;
      std::optional<double> value = ScalarConstant(c);
      if (!value.has_value() || plan_.values[c].shape.size() > plan_.values[data].shape.size()) continue;
      const PlanValue& dv = plan_.values[data];
      if (dv.shape != plan_.values[out].shape || dv.dtype != plan_.values[c].dtype) continue;
      *x = data;
      return ir::AttentionScale{type == "Div" ? ir::AttentionScaleOp::kDiv : ir::AttentionScaleOp::kMul, *value};
    }
    return std::nullopt;
  }
  // The producer of `v` if it is a Mul or Div by a scalar constant.
  int ScaleProducer(int v) const {
    int p = AbsorbableProducer(v, "Mul");
    if (p < 0) p = AbsorbableProducer(v, "Div");
    return p;
  }

 private:
  PlanGraph& plan_;
  ir::Backend backend_;
  std::vector<int> uses_, consumer_, producer_;
  std::vector<bool> absorbed_;
};

// Whether `shape` broadcasts to `target` without widening it.
inline bool BroadcastsTo(const std::vector<int64_t>& shape, const std::vector<int64_t>& target) {
  if (shape.size() > target.size()) return false;
  const size_t lead = target.size() - shape.size();
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] != 1 && shape[i] != target[lead + i]) return false;
  }
  return true;
}

}  // namespace grove::runtime::attention_internal

#endif  // GROVE_LIB_RUNTIME_ATTENTION_FUSION_FINDER_H_
