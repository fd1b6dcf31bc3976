#include "lib/runtime/attention_fusion.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "lib/ir/ops/attention_attrs.h"
#include "lib/runtime/attention_fusion_finder.h"
#include "lib/runtime/backend.h"
#include "lib/runtime/registry.h"

namespace grove::runtime {
namespace {

using attention_internal::BroadcastsTo;
using attention_internal::ChainFinder;

std::atomic<bool>& FusionSwitch() {
  static std::atomic<bool> enabled{[] {
    const char* env = std::getenv("GROVE_FUSE_ATTENTION");
    return env == nullptr || std::strcmp(env, "0") != 0;
  }()};
  return enabled;
}

// One chain found: its steps (in plan order at the end), the fused node's
// inputs (value ids) and attributes.
struct Chain {
  std::vector<int> steps;
  std::vector<int> intermediates;  // values computed inside the fused kernel
  int q = -1, k = -1, v = -1, out = -1;
  int masks[2] = {-1, -1};  // the fused node's inputs 3 and 4
  ir::AttentionAttrs attrs;
};

// A mask applied to `scores`: the step that applies it, its input (the
// fused node's mask input), how, and the scores it was applied to.
struct MaskFound {
  int step = -1, input = -1, data = -1;
  ir::AttentionMask mask;
  // An added mask made by Where(cond, fill, 0) (or Where(cond, 0, fill)),
  // taken as that Where's condition: the Where when only the Add reads its
  // output (absorbed with the chain), and that output.
  int where_step = -1, where_value = -1;
};

// The added mask `mask` as a condition: when a Where makes it from a bool
// condition (broadcasting to the scores) and the scalar constants `fill`
// (-inf, or a finite one at most ir::kTrimmableFill) and 0, adding it to the
// scores puts fill where the condition picks it and leaves the scores as
// they are elsewhere (x + 0 is x; x + fill rounds to fill for any score
// below 2^75 in size), which is a Where mask filling `fill`: the kernels
// then see which keys a causal mask drops (PyTorch's dynamo export of
// scaled_dot_product_attention(is_causal=True) builds its mask this way,
// with torch.finfo(float32).min). Only scores beyond that size, inf or NaN
// differ (+inf + -inf is NaN in the chain, the fill in the Where).
bool AddedMaskAsCondition(const ChainFinder& f, int mask, const std::vector<int64_t>& scores_shape, MaskFound* m) {
  const int w = f.producer(mask);
  if (w < 0 || !f.Linkable(w) || f.step(w).node->type != "Where") return false;
  const PlanStep& where = f.step(w);
  if (where.inputs.size() != 3 || where.inputs[0] < 0) return false;
  const std::optional<double> a = f.ScalarConstant(where.inputs[1]), b = f.ScalarConstant(where.inputs[2]);
  if (!a.has_value() || !b.has_value()) return false;
  // -inf, or (f32 and bf16, whose range reaches it) a fill at or below
  // kTrimmableFill: torch.finfo(float32).min, the dynamo exporter's.
  const DType dtype = f.value(mask).dtype;
  auto is_fill = [&](double v) {
    return ir::IsTrimmableFill(v) && (std::isinf(v) || dtype == DType::kF32 || dtype == DType::kBF16);
  };
  const bool fill_if_true = is_fill(*a) && *b == 0.0;
  if (!fill_if_true && !(*a == 0.0 && is_fill(*b))) return false;
  const PlanValue& cv = f.value(where.inputs[0]);
  if (cv.dtype != DType::kBool || !cv.shape_known || !BroadcastsTo(cv.shape, scores_shape)) return false;
  m->input = where.inputs[0];
  m->mask.kind = ir::AttentionMaskKind::kWhere;
  m->mask.fill = fill_if_true ? *a : *b;
  m->mask.fill_if_true = fill_if_true;
  if (f.AbsorbableProducer(mask, "Where") == w) {
    m->where_step = w;
    m->where_value = mask;
  }
  return true;
}

std::optional<MaskFound> MaskAt(const ChainFinder& f, int scores, const std::vector<int64_t>& scores_shape) {
  // The scores' side of an Add leads on to the product (its scale, or the
  // mask applied before).
  auto leads_on = [&](int data) {
    return f.ScaleProducer(data) >= 0 || f.AbsorbableProducer(data, "MatMul") >= 0 ||
           f.AbsorbableProducer(data, "Where") >= 0 || f.AbsorbableProducer(data, "Add") >= 0;
  };
  if (int p = f.AbsorbableProducer(scores, "Add"); p >= 0) {
    const PlanStep& add = f.step(p);
    if (add.inputs.size() != 2 || add.inputs[0] == add.inputs[1]) return std::nullopt;
    for (int side = 0; side < 2; ++side) {
      const int data = add.inputs[side], mask = add.inputs[1 - side];
      if (data < 0 || mask < 0 || f.value(data).shape != scores_shape || !leads_on(data)) continue;
      const PlanValue& mv = f.value(mask);
      if (mv.dtype != f.value(data).dtype || !mv.shape_known || !BroadcastsTo(mv.shape, scores_shape)) continue;
      MaskFound m;
      m.step = p;
      m.input = mask;
      m.data = data;
      m.mask.kind = ir::AttentionMaskKind::kAdd;
      AddedMaskAsCondition(f, mask, scores_shape, &m);
      return m;
    }
    return std::nullopt;
  }
  const int w = f.AbsorbableProducer(scores, "Where");
  if (w < 0) return std::nullopt;
  const PlanStep& where = f.step(w);
  if (where.inputs.size() != 3 || where.inputs[1] == where.inputs[2] || where.inputs[0] < 0) return std::nullopt;
  const int cond = where.inputs[0];
  for (int side = 1; side <= 2; ++side) {
    const int data = where.inputs[side], fill = where.inputs[3 - side];
    std::optional<double> value = f.ScalarConstant(fill);
    if (data < 0 || !value.has_value() || f.value(data).shape != scores_shape) continue;
    if (f.value(fill).shape.size() > scores_shape.size()) continue;
    const PlanValue& cv = f.value(cond);
    if (cv.dtype != DType::kBool || !cv.shape_known || !BroadcastsTo(cv.shape, scores_shape)) continue;
    MaskFound m;
    m.step = w;
    m.input = cond;
    m.data = data;
    m.mask.kind = ir::AttentionMaskKind::kWhere;
    m.mask.fill = *value;
    m.mask.fill_if_true = side == 2;  // Where(cond, fill, scores)
    return m;
  }
  return std::nullopt;
}

// `v` as repeat_kv (Hugging Face's grouped-query attention) writes it: x
// [P.., n, a, b] made [P.., n, 1, a, b] (Unsqueeze, or a Reshape), expanded
// to [P.., n, g, a, b] (Expand, or a Tile: the TorchScript exporter's
// repeat_interleave) and reshaped to [P.., n * g, a, b], each step's output
// read by the next alone. Only the Expand moves data: its copy repeats x's
// head i as heads i * g .. i * g + g - 1, which a kernel reads in place as
// head h / g (attribute kv_group). The shapes alone decide it: neither an
// Unsqueeze nor a Reshape reorders elements, and an Expand's copy is fixed
// by its input's and output's shapes, as a Tile's is when every axis but
// the one it grows from 1 keeps its size.
// Three absorbable steps that make `v` from x, walked back from v: the
// producer of v is one of types[0], the producer of that step's input 0 one
// of types[1], the producer of that one's input 0 one of types[2], whose
// input 0 is x (of known shape and v's dtype).
struct ThreeSteps {
  int x = -1;
  int steps[3] = {-1, -1, -1};  // from v back
  int values[3] = {-1, -1, -1};  // their outputs: v, then the inner ones
};

std::optional<ThreeSteps> ThreeStepsTo(const ChainFinder& f, int v,
                                       const std::array<std::vector<const char*>, 3>& types) {
  ThreeSteps r;
  int cur = v;
  for (int i = 0; i < 3; ++i) {
    r.values[i] = cur;
    for (const char* type : types[i]) {
      if (r.steps[i] = f.AbsorbableProducer(cur, type); r.steps[i] >= 0) break;
    }
    if (r.steps[i] < 0 || f.step(r.steps[i]).inputs.empty() || f.step(r.steps[i]).inputs[0] < 0) return std::nullopt;
    cur = f.step(r.steps[i]).inputs[0];
  }
  r.x = cur;
  const PlanValue& xv = f.value(r.x);
  if (!xv.shape_known || xv.dtype != f.value(v).dtype) return std::nullopt;
  return r;
}

struct RepeatedHeads {
  ThreeSteps chain;  // Reshape, Expand or Tile, Unsqueeze or Reshape
  int64_t group = 1;
};

std::optional<RepeatedHeads> RepeatedHeadsOf(const ChainFinder& f, int v) {
  std::optional<ThreeSteps> chain = ThreeStepsTo(f, v, {{{"Reshape"}, {"Expand", "Tile"}, {"Unsqueeze", "Reshape"}}});
  if (!chain.has_value()) return std::nullopt;
  RepeatedHeads r{*chain};
  const std::vector<int64_t>& vs = f.value(v).shape;
  const std::vector<int64_t>& es = f.value(chain->values[1]).shape;
  const std::vector<int64_t>& us = f.value(chain->values[2]).shape;
  const std::vector<int64_t>& xs = f.value(chain->x).shape;
  const size_t rank = vs.size();
  if (rank < 3 || xs.size() != rank || es.size() != rank + 1 || us.size() != rank + 1) return std::nullopt;
  const size_t heads = rank - 3;
  for (size_t i = 0; i < rank; ++i) {
    const size_t at = i <= heads ? i : i + 1;  // u's and e's axis of x's axis i
    if (us[at] != xs[i] || es[at] != xs[i] || (i != heads && vs[i] != xs[i])) return std::nullopt;
  }
  r.group = es[heads + 1];
  if (us[heads + 1] != 1 || r.group < 2 || vs[heads] != xs[heads] * r.group) return std::nullopt;
  return r;
}

// `v` as x with its last two axes swapped the way the dynamo exporter's
// scaled_dot_product_attention writes Kᵀ: x [L.., a, b] reshaped to
// [N, a, b] (its leading dims merged), Transpose(perm 0, 2, 1), reshaped to
// [L.., b, a], each output read by the next alone. Neither Reshape reorders
// elements, so the three are x's last two axes swapped.
std::optional<ThreeSteps> SwappedThroughRank3(const ChainFinder& f, int v) {
  std::optional<ThreeSteps> r = ThreeStepsTo(f, v, {{{"Reshape"}, {"Transpose"}, {"Reshape"}}});
  if (!r.has_value()) return std::nullopt;
  const PlanStep& transpose = f.step(r->steps[1]);
  if (transpose.inputs.size() != 1 || transpose.node->attrs.GetInts("perm") != std::vector<int64_t>{0, 2, 1}) {
    return std::nullopt;
  }
  const std::vector<int64_t>& xs = f.value(r->x).shape;
  const std::vector<int64_t>& us = f.value(r->values[2]).shape;
  const std::vector<int64_t>& ts = f.value(r->values[1]).shape;
  const std::vector<int64_t>& vs = f.value(v).shape;
  const size_t rank = xs.size();
  if (rank < 2 || vs.size() != rank) return std::nullopt;
  const int64_t a = xs[rank - 2], b = xs[rank - 1];
  const int64_t n = ir::NumElements(std::vector<int64_t>(xs.begin(), xs.end() - 2));
  if (us != std::vector<int64_t>{n, a, b} || ts != std::vector<int64_t>{n, b, a}) return std::nullopt;
  if (!std::equal(xs.begin(), xs.end() - 2, vs.begin()) || vs[rank - 2] != b || vs[rank - 1] != a) return std::nullopt;
  return r;
}

std::optional<Chain> MatchAt(const ChainFinder& f, int softmax) {
  if (!f.Linkable(softmax)) return std::nullopt;
  const PlanStep& sm = f.step(softmax);
  if (sm.node->type != "Softmax" || sm.inputs.size() != 1 || sm.inputs[0] < 0) return std::nullopt;
  Chain c;
  const int probs = sm.outputs[0];
  const PlanValue& scores_v = f.value(sm.inputs[0]);
  const int rank = static_cast<int>(scores_v.shape.size());
  if (!ir::IsAttentionDType(scores_v.dtype) || !scores_v.shape_known || (rank != 3 && rank != 4)) return std::nullopt;
  absl::StatusOr<int> axis = ir::NormalizeAxis(sm.node->attrs.GetInt("axis", -1), rank);
  if (!axis.ok() || *axis != rank - 1) return std::nullopt;
  if (f.value(probs).kind != Storage::kArena) return std::nullopt;
  const std::vector<int64_t> scores_shape = scores_v.shape;

  // Forward: [pass-throughs] MatMul(probs, V).
  c.steps = {softmax};
  c.intermediates = {probs};
  int p = probs;
  while (f.PassesThrough(f.consumer(p))) {
    const int next = f.consumer(p);
    c.steps.push_back(next);
    p = f.step(next).outputs[0];
    c.intermediates.push_back(p);
  }
  // PyTorch's export of a boolean mask zeroes the NaN probabilities of the
  // rows it masks whole: Where(IsNaN(p), 0, p), then maybe pass-throughs.
  if (int isnan = -1, w = f.ZeroedNans(p, &isnan); w >= 0) {
    c.attrs.zero_nan_probs = true;
    c.steps.push_back(isnan);
    c.steps.push_back(w);
    c.intermediates.push_back(f.step(isnan).outputs[0]);
    p = f.step(w).outputs[0];
    c.intermediates.push_back(p);
    while (f.PassesThrough(f.consumer(p))) {
      const int next = f.consumer(p);
      c.steps.push_back(next);
      p = f.step(next).outputs[0];
      c.intermediates.push_back(p);
    }
  }
  const int m2 = f.consumer(p);
  if (!f.Linkable(m2) || f.step(m2).node->type != "MatMul") return std::nullopt;
  const PlanStep& pv = f.step(m2);
  if (pv.inputs.size() != 2 || pv.inputs[0] != p || pv.inputs[1] == p || pv.inputs[1] < 0) return std::nullopt;
  c.v = pv.inputs[1];
  c.out = pv.outputs[0];
  c.steps.push_back(m2);

  // Backward from the scores: [pass-throughs], the mask, then the scale, then
  // MatMul(Q', K').
  int cur = sm.inputs[0];
  for (int prev = f.producer(cur);
       f.consumer(cur) >= 0 && f.value(cur).kind == Storage::kArena && f.PassesThrough(prev);
       prev = f.producer(cur)) {
    c.steps.push_back(prev);
    c.intermediates.push_back(cur);
    cur = f.step(prev).inputs[0];
  }
  // Up to two masks, the one nearer the Softmax applied last (GPT-2's
  // export: a causal Where, then the attention mask added).
  MaskFound found[2];
  int num_masks = 0;
  while (num_masks < 2) {
    std::optional<MaskFound> m = MaskAt(f, cur, scores_shape);
    if (!m.has_value()) break;
    c.steps.push_back(m->step);
    c.intermediates.push_back(cur);
    if (m->where_step >= 0) {
      c.steps.push_back(m->where_step);
      c.intermediates.push_back(m->where_value);
    }
    cur = m->data;
    found[num_masks++] = *m;
  }
  for (int m = 0; m < num_masks; ++m) {
    const MaskFound& mf = found[num_masks - 1 - m];
    c.masks[m] = mf.input;
    c.attrs.masks[m] = mf.mask;
  }
  if (int p = f.ScaleProducer(cur); p >= 0) {
    int x = -1;
    if (std::optional<ir::AttentionScale> s = f.ScaleOf(p, &x); s.has_value()) {
      c.attrs.scale = *s;
      c.steps.push_back(p);
      c.intermediates.push_back(cur);
      cur = x;
    }
  }
  const int m1 = f.AbsorbableProducer(cur, "MatMul");
  if (m1 < 0) return std::nullopt;
  const PlanStep& qk = f.step(m1);
  if (qk.inputs.size() != 2 || qk.inputs[0] < 0 || qk.inputs[1] < 0 || qk.inputs[0] == qk.inputs[1]) {
    return std::nullopt;
  }
  c.steps.push_back(m1);
  c.intermediates.push_back(cur);
  int q = qk.inputs[0], k = qk.inputs[1];
  if (int p = f.ScaleProducer(q); p >= 0) {
    int x = -1;
    if (std::optional<ir::AttentionScale> s = f.ScaleOf(p, &x); s.has_value()) {
      c.attrs.q_scale = *s;
      c.steps.push_back(p);
      c.intermediates.push_back(q);
      q = x;
    }
  }
  // K': a scale and a Transpose of the last two axes, in either order.
  bool transposed_away = false;
  for (int round = 0; round < 2; ++round) {
    if (c.attrs.k_scale.op == ir::AttentionScaleOp::kNone) {
      if (int p = f.ScaleProducer(k); p >= 0) {
        int x = -1;
        if (std::optional<ir::AttentionScale> s = f.ScaleOf(p, &x); s.has_value()) {
          c.attrs.k_scale = *s;
          c.steps.push_back(p);
          c.intermediates.push_back(k);
          k = x;
          continue;
        }
      }
    }
    if (!transposed_away) {
      if (int p = f.AbsorbableProducer(k, "Transpose"); p >= 0) {
        const PlanStep& t = f.step(p);
        std::vector<int64_t> perm = t.node->attrs.GetInts("perm");
        std::vector<int64_t> swap_last(rank);
        for (int i = 0; i < rank; ++i) swap_last[i] = i;
        std::swap(swap_last[rank - 1], swap_last[rank - 2]);
        if (t.inputs.size() == 1 && t.inputs[0] >= 0 && perm == swap_last) {
          transposed_away = true;
          c.steps.push_back(p);
          c.intermediates.push_back(k);
          k = t.inputs[0];
          continue;
        }
      }
      if (std::optional<ThreeSteps> sw = SwappedThroughRank3(f, k); sw.has_value()) {
        transposed_away = true;
        c.steps.insert(c.steps.end(), sw->steps, sw->steps + 3);
        c.intermediates.insert(c.intermediates.end(), sw->values, sw->values + 3);
        k = sw->x;
        continue;
      }
    }
    break;
  }
  c.attrs.k_transposed = !transposed_away;
  c.q = q;
  c.k = k;

  // Shapes: Q [B.., sq, d], K [B.., sk, d] (Kᵀ [B.., d, sk]), V [B.., sk, dv].
  for (int id : {c.q, c.k, c.v, c.out}) {
    const PlanValue& val = f.value(id);
    if (val.dtype != scores_v.dtype || !val.shape_known || static_cast<int>(val.shape.size()) != rank) {
      return std::nullopt;
    }
  }
  const std::vector<int64_t>& qs = f.value(c.q).shape;
  const std::vector<int64_t>& ks = f.value(c.k).shape;
  const std::vector<int64_t>& vs = f.value(c.v).shape;
  const int64_t sk = c.attrs.k_transposed ? ks[rank - 1] : ks[rank - 2];
  const int64_t kd = c.attrs.k_transposed ? ks[rank - 2] : ks[rank - 1];
  if (kd != qs[rank - 1] || sk != vs[rank - 2] || scores_shape[rank - 2] != qs[rank - 2] ||
      scores_shape[rank - 1] != sk) {
    return std::nullopt;
  }
  std::vector<int64_t> out_shape(scores_shape.begin(), scores_shape.end() - 2);
  for (const std::vector<int64_t>* s : {&qs, &ks, &vs}) {
    if (!BroadcastsTo(std::vector<int64_t>(s->begin(), s->end() - 2), out_shape)) return std::nullopt;
  }
  out_shape.push_back(qs[rank - 2]);
  out_shape.push_back(vs[rank - 1]);
  if (f.value(c.out).shape != out_shape) return std::nullopt;
  // Grouped-query attention: K and V repeated alike along their heads are
  // read in place, g query heads to each of theirs.
  std::optional<RepeatedHeads> rk = RepeatedHeadsOf(f, c.k);
  std::optional<RepeatedHeads> rv = rk.has_value() ? RepeatedHeadsOf(f, c.v) : std::nullopt;
  if (rv.has_value() && rv->group == rk->group) {
    c.attrs.kv_group = rk->group;
    for (const ThreeSteps* r : {&rk->chain, &rv->chain}) {
      c.steps.insert(c.steps.end(), r->steps, r->steps + 3);
      c.intermediates.insert(c.intermediates.end(), r->values, r->values + 3);
    }
    c.k = rk->chain.x;
    c.v = rv->chain.x;
  }
  std::sort(c.steps.begin(), c.steps.end());
  return c;
}

}  // namespace

bool AttentionFusionEnabled() { return FusionSwitch().load(std::memory_order_relaxed); }
void SetAttentionFusionEnabled(bool enabled) { FusionSwitch().store(enabled, std::memory_order_relaxed); }

int FuseAttention(PlanGraph& plan, ir::Backend backend, const Backend* backend_impl) {
  if (!AttentionFusionEnabled()) return 0;
  const ir::OpDef* def = GlobalOpRegistry().Find(ir::kFusedAttentionOp);
  if (def == nullptr || def->kernels[static_cast<int>(backend)] == nullptr) return 0;
  ChainFinder finder(plan, backend);
  std::vector<std::optional<PlanStep>> replacement(plan.steps.size());
  std::vector<bool> removed(plan.steps.size(), false);
  int fused = 0;
  for (size_t s = 0; s < plan.steps.size(); ++s) {
    std::optional<Chain> chain = MatchAt(finder, static_cast<int>(s));
    if (!chain.has_value()) continue;
    // f16 and bf16 chains fuse on CUDA only, whose kernel reads them and
    // computes in f32 (one rounding, on the output, where the chain rounds
    // the scores, the probabilities and each scaled operand); the CPU kernel
    // is f32 only and leaves them to the unfused steps.
    if (backend == ir::Backend::kCpu && plan.values[chain->q].dtype != DType::kF32) continue;
    auto node = std::make_unique<ir::Node>();
    node->type = ir::kFusedAttentionOp;
    node->def = def;
    std::vector<std::string> names;
    for (int st : chain->steps) {
      const ir::Node& n = *plan.steps[st].node;
      names.push_back(n.name.empty() ? n.type : n.name);
    }
    node->name = absl::StrCat("attention(", absl::StrJoin(names, "+"), ")");
    std::vector<int> inputs = {chain->q, chain->k, chain->v};
    for (int m : chain->masks) {
      if (m >= 0) inputs.push_back(m);
    }
    std::vector<DType> dtypes;
    for (int v : inputs) {
      node->inputs.push_back(plan.values[v].tensor);
      dtypes.push_back(plan.values[v].dtype);
    }
    node->outputs = {plan.values[chain->out].tensor};
    dtypes.push_back(plan.values[chain->out].dtype);
    ir::WriteAttentionAttrs(chain->attrs, &node->attrs);
    const ir::Node& last = *plan.steps[chain->steps.back()].node;
    node->subgraph = last.subgraph;
    node->index = last.index;
    if (backend_impl != nullptr && backend != ir::Backend::kCpu && !backend_impl->Takes(*node, dtypes)) continue;

    PlanStep step;
    step.node = node.get();
    step.backend = backend;
    step.kernel = def->kernels[static_cast<int>(backend)];
    step.prepare = def->prepares[static_cast<int>(backend)];
    step.inputs = inputs;
    step.outputs = {chain->out};
    plan.owned_nodes.push_back(std::move(node));
    for (int st : chain->steps) {
      finder.Absorb(st);
      removed[st] = true;
    }
    for (int v : chain->intermediates) plan.values[v].kind = Storage::kFusedAway;
    replacement[chain->steps.back()] = std::move(step);
    ++fused;
    ++plan.fused_steps;
    plan.fused_ops += static_cast<int>(chain->steps.size());
  }
  if (fused == 0) return 0;
  std::vector<PlanStep> kept;
  for (size_t s = 0; s < plan.steps.size(); ++s) {
    if (replacement[s].has_value()) {
      kept.push_back(std::move(*replacement[s]));
    } else if (!removed[s]) {
      kept.push_back(std::move(plan.steps[s]));
    }
  }
  plan.steps = std::move(kept);
  return fused;
}

}  // namespace grove::runtime
