// Conv / MatMul / Gemm + activation fusion on the CPU plan (see the header).
#include "lib/backends/cpu/activation_fusion.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
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

  // The step that writes each value (-1: inputs, weights, folded values).
  std::vector<int> producer(num_values, -1);
  for (size_t s = 0; s < steps.size(); ++s) {
    for (int v : steps[s].outputs) {
      if (v >= 0) producer[v] = static_cast<int>(s);
    }
  }
  // The step reading `v` when it is its only read, after step `s`; else -1.
  auto sole_consumer = [&](int v, size_t s) {
    return f32_arena(v) && uses[v] == 1 && consumer[v] > static_cast<int>(s) ? consumer[v] : -1;
  };
  // The two steps after `s` reading `v` (read by them only), in step order.
  auto two_readers = [&](int v, size_t s, int readers[2]) {
    if (!f32_arena(v) || uses[v] != 2) return false;
    int found = 0;
    for (size_t t = s + 1; t < steps.size() && found < 2; ++t) {
      if (std::find(steps[t].inputs.begin(), steps[t].inputs.end(), v) != steps[t].inputs.end()) {
        readers[found++] = static_cast<int>(t);
      }
    }
    return found == 2;
  };
  // SiLU written out, y = x * Sigmoid(x) (PyTorch's export of nn.SiLU and
  // F.silu): Sigmoid(x), then a Mul of x and that, the Sigmoid's output read
  // by the Mul only and x by the two only. {sigmoid, mul}, or empty.
  auto silu = [&](int x, size_t s) -> std::vector<int> {
    int readers[2];
    if (!two_readers(x, s, readers)) return {};
    const int g = readers[0], m = readers[1];
    const PlanStep& sig = steps[g];
    if (!Plain(sig) || sig.node->type != "Sigmoid" || sig.inputs.size() != 1 || SoleOutput(sig) < 0) return {};
    const int sg = SoleOutput(sig), y = SoleOutput(steps[m]);
    const std::vector<int>& in = steps[m].inputs;
    if (sole_consumer(sg, g) != m || !Plain(steps[m]) || steps[m].node->type != "Mul" || in.size() != 2 ||
        !((in[0] == x && in[1] == sg) || (in[0] == sg && in[1] == x)) || y < 0 || !f32_arena(y) ||
        values[sg].shape != values[x].shape || values[y].shape != values[x].shape) {
      return {};
    }
    return {g, m};
  };
  // The steps of the exact GELU written out, y = x * 0.5 * (1 + erf(x / sqrt 2)),
  // as PyTorch exports nn.GELU() at opsets before 20, reading x (the value
  // `x`, written by step s): Div(x, sqrt 2) or Mul(x, 1 / sqrt 2), Erf, Add 1,
  // then x, 0.5 and that sum multiplied by two Muls in any grouping and
  // operand order. Every intermediate is read once, by the next link (x by
  // the Div and one Mul); in step order, the last writing y. Empty: no match.
  auto erf_gelu = [&](int x, size_t s) -> std::vector<int> {
    const std::vector<int64_t>& shape = values[x].shape;
    // `step` is a Plain binary `type` step writing one value of x's shape,
    // reading `a` and something else (constant `c` when given): that other
    // input, or -1.
    auto binary = [&](int step, const char* type, int a, std::optional<float> c, float tol = 0.0f) {
      if (step < 0 || !Plain(steps[step]) || steps[step].node->type != type || steps[step].inputs.size() != 2) return -1;
      const std::vector<int>& in = steps[step].inputs;
      const int out = SoleOutput(steps[step]);
      if (out < 0 || !f32_arena(out) || values[out].shape != shape || in[0] == in[1]) return -1;
      const int other = in[0] == a ? in[1] : in[1] == a ? in[0] : -1;
      if (other < 0 || (type == std::string("Div") && in[0] != a)) return -1;
      if (c.has_value()) {
        const std::optional<float> got = constant_scalar(other);
        if (!got.has_value() || !(std::fabs(*got - *c) <= tol)) return -1;
      }
      return other;
    };
    auto out_of = [&](int step) { return SoleOutput(steps[step]); };
    int readers[2];
    if (!two_readers(x, s, readers)) return {};
    for (int first = 0; first < 2; ++first) {
      const int d = readers[first], m = readers[1 - first];
      const bool div = binary(d, "Div", x, 1.41421356f, 1e-6f) >= 0;
      if (!div && binary(d, "Mul", x, 0.70710678f, 1e-6f) < 0) continue;
      const int e = sole_consumer(out_of(d), d);
      if (e < 0 || !Plain(steps[e]) || steps[e].node->type != "Erf" || steps[e].inputs.size() != 1 ||
          out_of(e) < 0 || values[out_of(e)].shape != shape) {
        continue;
      }
      const int a = sole_consumer(out_of(e), e);
      if (binary(a, "Add", out_of(e), 1.0f) < 0) continue;
      const int after_a = sole_consumer(out_of(a), a);
      // x * (0.5 * (1 + erf)): the half first, then the Mul reading x.
      if (binary(after_a, "Mul", out_of(a), 0.5f) >= 0 && binary(m, "Mul", x, std::nullopt) == out_of(after_a) &&
          uses[out_of(after_a)] == 1) {
        return {d, e, a, after_a, m};
      }
      // (x * 0.5) * (1 + erf), or (x * (1 + erf)) * 0.5.
      if (binary(m, "Mul", x, 0.5f) >= 0 && binary(after_a, "Mul", out_of(a), std::nullopt) == out_of(m) &&
          uses[out_of(m)] == 1) {
        return {d, e, a, m, after_a};
      }
      if (after_a == m && binary(m, "Mul", x, std::nullopt) == out_of(a)) {
        const int h = sole_consumer(out_of(m), m);
        if (binary(h, "Mul", out_of(m), 0.5f) >= 0) return {d, e, a, m, h};
      }
    }
    return {};
  };

  std::vector<bool> removed(steps.size(), false);
  // The tanh GELU written out, y = 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715
  // x^3))), reading x (written by step s): PyTorch exports
  // F.gelu(approximate="tanh") so before opset 20, and GPT-2-style code
  // writes it by hand, in many groupings (Pow(x, 3) or x * x * x, the half
  // first or last, FastGELU's x * 0.7978846 * (1 + 0.044715 * x * x)). Rather
  // than a pattern per grouping: the steps after s computing from x and
  // constant scalars only (Add, Sub, Mul, Div, Pow, Tanh, every one of x's
  // shape, at most kMaxLinks) are evaluated on probe values of x, and the
  // first value among them that every read of x leads to, whose
  // intermediates nothing else reads, and that equals the formula at every
  // probe (these are analytic functions of x: equal on 81 points of [-6, 6],
  // to float rounding, is equal) is y. The steps computing it, in step
  // order (the last writes y); empty when none.
  auto tanh_gelu = [&](int x, size_t s) -> std::vector<int> {
    constexpr size_t kMaxLinks = 16;
    constexpr size_t kScan = 48;  // steps looked at after s
    const std::vector<int64_t>& shape = values[x].shape;
    std::vector<int> region;               // steps, in order
    std::vector<int> region_values = {x};  // x, then the region steps' outputs
    auto in_region = [&](int v) {
      return std::find(region_values.begin(), region_values.end(), v) != region_values.end();
    };
    for (size_t t = s + 1; t < steps.size() && t <= s + kScan && region.size() < kMaxLinks; ++t) {
      const PlanStep& step = steps[t];
      const std::string& type = step.node->type;
      const bool unary = type == "Tanh";
      const bool binary = type == "Add" || type == "Sub" || type == "Mul" || type == "Div" || type == "Pow";
      const int out = SoleOutput(step);
      if (removed[t] || !Plain(step) || !(unary || binary) || step.inputs.size() != (unary ? 1u : 2u) || out < 0 ||
          !f32_arena(out) || values[out].shape != shape) {
        continue;
      }
      bool reads_region = false, others_constant = true;
      for (int v : step.inputs) {
        if (v >= 0 && in_region(v)) {
          reads_region = true;
        } else if (v < 0 || !constant_scalar(v).has_value()) {
          others_constant = false;
        }
      }
      if (!reads_region || !others_constant) continue;
      region.push_back(static_cast<int>(t));
      region_values.push_back(out);
    }
    if (region.size() < 3) return {};
    // The probes, and each region value's values at them.
    constexpr int kProbes = 81;
    std::vector<std::vector<double>> at(region_values.size());
    at[0].resize(kProbes);
    for (int i = 0; i < kProbes; ++i) at[0][i] = -6.0 + 12.0 * i / (kProbes - 1);
    auto operand = [&](int v, int i) {
      for (size_t r = 0; r < region_values.size(); ++r) {
        if (region_values[r] == v) return at[r][i];
      }
      return static_cast<double>(*constant_scalar(v));
    };
    for (size_t r = 0; r < region.size(); ++r) {
      const PlanStep& step = steps[region[r]];
      const std::string& type = step.node->type;
      std::vector<double>& out = at[r + 1];
      out.resize(kProbes);
      for (int i = 0; i < kProbes; ++i) {
        const double a = operand(step.inputs[0], i);
        const double b = step.inputs.size() > 1 ? operand(step.inputs[1], i) : 0.0;
        out[i] = type == "Tanh"  ? std::tanh(a)
                 : type == "Add" ? a + b
                 : type == "Sub" ? a - b
                 : type == "Mul" ? a * b
                 : type == "Div" ? a / b
                                 : std::pow(a, b);
      }
    }
    for (size_t last = 0; last < region.size(); ++last) {
      // The region steps `last` depends on, walking back from it.
      std::vector<bool> needed(region.size(), false);
      needed[last] = true;
      for (size_t r = last + 1; r-- > 0;) {
        if (!needed[r]) continue;
        for (int v : steps[region[r]].inputs) {
          for (size_t q = 0; q < r; ++q) {
            if (region_values[q + 1] == v) needed[q] = true;
          }
        }
      }
      // Every read of x and of each intermediate is by these steps.
      std::vector<int> reads(region_values.size(), 0);
      bool has_tanh = false;
      for (size_t r = 0; r <= last; ++r) {
        if (!needed[r]) continue;
        has_tanh |= steps[region[r]].node->type == "Tanh";
        for (int v : steps[region[r]].inputs) {
          for (size_t q = 0; q < region_values.size(); ++q) reads[q] += region_values[q] == v;
        }
      }
      bool closed = has_tanh && reads[0] == uses[x];
      for (size_t r = 0; closed && r < last; ++r) closed = !needed[r] || reads[r + 1] == uses[region_values[r + 1]];
      if (!closed) continue;
      bool equal = true;
      for (int i = 0; equal && i < kProbes; ++i) {
        const double v = at[0][i];
        const double want = 0.5 * v * (1.0 + std::tanh(0.7978845608028654 * (v + 0.044715 * v * v * v)));
        const double got = at[last + 1][i];
        equal = std::isfinite(got) && std::fabs(got - want) <= 1e-5 * (1.0 + std::fabs(want));
      }
      if (!equal) continue;
      std::vector<int> found;
      for (size_t r = 0; r <= last; ++r) {
        if (needed[r]) found.push_back(region[r]);
      }
      return found;
    }
    return {};
  };
  int fused = 0;
  for (size_t s = 0; s < steps.size(); ++s) {
    PlanStep& base = steps[s];
    // The base's prepare reads the fused activation.
    if (removed[s] || !Plain(base) || base.prepare == nullptr || !IsFusionBase(*base.node)) continue;
    bool f32_inputs = true;
    for (int v : base.inputs) f32_inputs &= v < 0 || values[v].dtype == DType::kF32;
    if (!f32_inputs) continue;
    int cur = SoleOutput(base);  // the value the chain has computed so far
    std::vector<int> absorbed;
    std::vector<const ir::Node*> links = {base.node};
    int bias = -1;
    // MatMul + Add of a bias over the last dim ([N] or [1, ..., 1, N]), which
    // the fused step reads as its input 2: written before the base runs.
    if (base.node->type == "MatMul" && base.inputs.size() == 2 && base.inputs[1] >= 0 &&
        values[base.inputs[1]].shape.size() >= 2) {
      const int c = sole_consumer(cur, s);
      if (c >= 0 && Plain(steps[c]) && steps[c].node->type == "Add" && steps[c].inputs.size() == 2) {
        const PlanStep& add = steps[c];
        const int other = add.inputs[0] == cur ? add.inputs[1] : add.inputs[1] == cur ? add.inputs[0] : -1;
        const int out = SoleOutput(add);
        const std::vector<int64_t>& shape = values[cur].shape;
        bool fits = other >= 0 && other != cur && values[other].dtype == DType::kF32 && values[other].shape_known &&
                    values[other].kind != Storage::kFusedAway && producer[other] < static_cast<int>(s) &&
                    !shape.empty() && !values[other].shape.empty() && values[other].shape.size() <= shape.size() &&
                    values[other].shape.back() == shape.back() && f32_arena(out) && values[out].shape == shape;
        for (size_t d = 0; fits && d + 1 < values[other].shape.size(); ++d) fits = values[other].shape[d] == 1;
        if (fits) {
          absorbed.push_back(c);
          links.push_back(add.node);
          bias = other;
          cur = out;
        }
      }
    }
    // Conv + BatchNormalization (inference mode, constant inputs), before or
    // after the activation: a per-channel multiply and add (post_op.h).
    ChannelAffine affine;
    auto absorb_batch_norm = [&](bool before_activation) {
      if (base.node->type != "Conv" || !affine.empty()) return;
      const int c = sole_consumer(cur, absorbed.empty() ? s : absorbed.back());
      if (c < 0 || !Plain(steps[c]) || steps[c].node->type != "BatchNormalization") return;
      const PlanStep& bn = steps[c];
      const std::vector<int64_t>& shape = values[cur].shape;
      const int out = SoleOutput(bn);
      if (bn.inputs.size() != 5 || bn.inputs[0] != cur || shape.size() < 3 || !f32_arena(out) ||
          values[out].shape != shape || bn.node->attrs.GetInt("training_mode", 0) != 0 ||
          bn.node->attrs.GetInt("spatial", 1) != 1) {
        return;
      }
      const int64_t channels = shape[1];
      const float* params[4];
      for (int i = 0; i < 4; ++i) {
        const PlanValue& pv = values[bn.inputs[i + 1]];
        if (bn.inputs[i + 1] < 0 || (pv.kind != Storage::kWeight && pv.kind != Storage::kFolded) ||
            pv.data == nullptr || pv.dtype != DType::kF32 || pv.shape != std::vector<int64_t>{channels}) {
          return;
        }
        params[i] = static_cast<const float*>(pv.data);
      }
      const double epsilon = bn.node->attrs.GetFloat("epsilon", 1e-5);
      affine.before_post_op = before_activation;
      affine.scale.resize(static_cast<size_t>(channels));
      affine.shift.resize(static_cast<size_t>(channels));
      for (int64_t k = 0; k < channels; ++k) {
        // As the BatchNormalization kernel: (x - mean) * scale / sqrt(var + epsilon) + B.
        const double a = static_cast<double>(params[0][k]) / std::sqrt(static_cast<double>(params[3][k]) + epsilon);
        affine.scale[k] = static_cast<float>(a);
        affine.shift[k] = static_cast<float>(static_cast<double>(params[1][k]) - static_cast<double>(params[2][k]) * a);
      }
      absorbed.push_back(c);
      links.push_back(bn.node);
      cur = out;
    };
    absorb_batch_norm(/*before_activation=*/true);
    // Conv (+ BatchNormalization) + Add of a tensor of the same shape written
    // before the Conv runs (a residual connection): oneDNN's binary post-op,
    // before the activation; then neither a BatchNormalization after the
    // activation nor a pool (post_op.h's kResidualAttr).
    int residual = -1;
    if (base.node->type == "Conv" && base.inputs.size() <= 3) {
      const int c = sole_consumer(cur, absorbed.empty() ? s : absorbed.back());
      if (c >= 0 && Plain(steps[c]) && steps[c].node->type == "Add" && steps[c].inputs.size() == 2) {
        const PlanStep& add = steps[c];
        const int other = add.inputs[0] == cur ? add.inputs[1] : add.inputs[1] == cur ? add.inputs[0] : -1;
        const int out = SoleOutput(add);
        const std::vector<int64_t>& shape = values[cur].shape;
        if (other >= 0 && other != cur && values[other].dtype == DType::kF32 && values[other].shape_known &&
            values[other].kind != Storage::kFusedAway && producer[other] < static_cast<int>(s) &&
            values[other].shape == shape && shape.size() >= 3 && f32_arena(out) && values[out].shape == shape) {
          absorbed.push_back(c);
          links.push_back(add.node);
          residual = other;
          cur = out;
        }
      }
    }
    std::optional<PostOp> activation;
    int written_links = 0;  // links of a written-out GELU or SiLU (the last of `links`)
    std::string written_type;
    const int c = sole_consumer(cur, absorbed.empty() ? s : absorbed.back());
    if (c >= 0 && Plain(steps[c]) && !steps[c].inputs.empty() && steps[c].inputs[0] == cur) {
      const PlanStep& act = steps[c];
      const int out = SoleOutput(act);
      // Inputs past the first: Clip's bounds, constants only.
      std::optional<float> bounds[2];
      bool constant = true;
      for (size_t i = 1; i < act.inputs.size(); ++i) {
        if (act.inputs[i] < 0) continue;
        std::optional<float> f = i <= 2 ? constant_scalar(act.inputs[i]) : std::nullopt;
        if (!f.has_value()) constant = false;
        if (i <= 2) bounds[i - 1] = f;
      }
      const std::optional<PostOp> post_op =
          constant ? PostOpOf(*act.node, bounds[0], bounds[1]) : std::optional<PostOp>();
      if (post_op.has_value() && f32_arena(out) && values[out].shape == values[cur].shape) {
        absorbed.push_back(c);
        links.push_back(act.node);
        cur = out;
        activation = post_op;
      }
    }
    for (const auto& [kind, type] : {std::pair{PostOpKind::kGelu, "Gelu"}, std::pair{PostOpKind::kSilu, "SiLU"},
                                     std::pair{PostOpKind::kGeluTanh, "GeluTanh"}}) {
      if (activation.has_value()) break;
      const size_t after = absorbed.empty() ? s : absorbed.back();
      const std::vector<int> written = kind == PostOpKind::kGelu   ? erf_gelu(cur, after)
                                       : kind == PostOpKind::kSilu ? silu(cur, after)
                                                                   : tanh_gelu(cur, after);
      if (written.empty()) continue;
      for (int g : written) links.push_back(steps[g].node);
      absorbed.insert(absorbed.end(), written.begin(), written.end());
      cur = SoleOutput(steps[written.back()]);
      activation = PostOp{kind};
      written_links = static_cast<int>(written.size());
      written_type = type;
    }
    if (residual < 0) absorb_batch_norm(/*before_activation=*/false);
    // Conv (+ activation) + MaxPool (no Indices) or AveragePool: oneDNN hands
    // the Conv's output to the pool in its own layout.
    const ir::Node* pool = nullptr;
    std::vector<int64_t> pool_input;
    if (base.node->type == "Conv" && residual < 0) {
      const int c2 = sole_consumer(cur, absorbed.empty() ? s : absorbed.back());
      if (c2 >= 0 && Plain(steps[c2]) && steps[c2].prepare != nullptr &&
          (steps[c2].node->type == "MaxPool" || steps[c2].node->type == "AveragePool") &&
          steps[c2].inputs.size() == 1 && steps[c2].inputs[0] == cur && f32_arena(SoleOutput(steps[c2]))) {
        pool = steps[c2].node;
        pool_input = values[cur].shape;
        absorbed.push_back(c2);
        links.push_back(pool);
        cur = SoleOutput(steps[c2]);
      }
    }
    if (absorbed.empty()) continue;
    // The fused node: the base's, writing the chain's last value, the Add's
    // bias as its input 2, the activation and the pool in its attributes.
    auto node = std::make_unique<ir::Node>(*base.node);
    if (activation.has_value()) SetPostOpAttributes(*activation, &node->attrs);
    if (!affine.empty()) SetChannelAffineAttributes(affine, &node->attrs);
    if (pool != nullptr) {
      node->attrs.Set(std::string(kFusedPoolAttr), pool->type);
      node->attrs.Set(std::string(kFusedPoolInputAttr), pool_input);
      for (const auto& [name, value] : pool->attrs.all()) {
        node->attrs.Set(absl::StrCat(kFusedPoolAttrPrefix, name), value);
      }
    }
    std::vector<std::string> types, names;
    for (const ir::Node* link : links) {
      types.push_back(link->type);
      names.push_back(link->name.empty() ? link->type : link->name);
    }
    if (written_links > 0) {  // a written-out activation's links show as one: "MatMul+Add+Gelu"
      const size_t first = types.size() - static_cast<size_t>(written_links);
      types.resize(first);
      types.push_back(written_type);
      const std::string written_names = absl::StrCat(absl::AsciiStrToLower(written_type), "(",
                                                     absl::StrJoin(names.begin() + first, names.end(), "+"), ")");
      names.resize(first);
      names.push_back(written_names);
    }
    node->type = absl::StrJoin(types, "+");
    node->name = absl::StrCat("fused(", absl::StrJoin(names, "+"), ")");
    node->outputs = {steps[absorbed.back()].node->outputs[0]};
    if (residual >= 0) {
      const ir::Node& add = *steps[absorbed[affine.empty() ? 0 : 1]].node;
      node->attrs.Set(std::string(kResidualAttr), int64_t{1});
      node->inputs.resize(kResidualInput, -1);  // no B: omitted
      base.inputs.resize(kResidualInput, -1);
      node->inputs.push_back(add.inputs[0] == links[affine.empty() ? 0 : 1]->outputs[0] ? add.inputs[1]
                                                                                       : add.inputs[0]);
      base.inputs.push_back(residual);
    }
    if (bias >= 0) {
      const ir::Node& add = *steps[absorbed.front()].node;
      node->attrs.Set(std::string(kPostOpBiasAttr), int64_t{1});
      node->inputs.push_back(add.inputs[0] == base.node->outputs[0] ? add.inputs[1] : add.inputs[0]);
      base.inputs.push_back(bias);
    }
    plan.owned_nodes.push_back(std::move(node));
    base.node = plan.owned_nodes.back().get();
    // Every value but the last is computed inside the step, never stored.
    values[SoleOutput(base)].kind = Storage::kFusedAway;
    for (size_t i = 0; i + 1 < absorbed.size(); ++i) values[SoleOutput(steps[absorbed[i]])].kind = Storage::kFusedAway;
    base.outputs = {cur};
    for (int c2 : absorbed) removed[c2] = true;
    ++fused;
    ++plan.fused_steps;
    plan.fused_ops += static_cast<int>(absorbed.size()) + 1;
  }
  if (fused == 0) return;
  std::vector<PlanStep> kept;
  for (size_t s = 0; s < steps.size(); ++s) {
    if (!removed[s]) kept.push_back(std::move(steps[s]));
  }
  steps = std::move(kept);
}

namespace {

// A step whose type a oneDNN chain takes as a link after its first: a Conv
// (maybe fused), a MaxPool without Indices, an AveragePool, a global pool.
bool IsChainLink(const PlanStep& step) {
  const std::string& type = step.node->type;
  const bool conv = type == "Conv" || absl::StartsWith(type, "Conv+");
  const bool pool = type == "MaxPool" || type == "AveragePool" || type == "GlobalMaxPool" ||
                    type == "GlobalAveragePool";
  // A residual Add's tensor is an input of the link's own that the chain's
  // hand-overs do not carry: such a Conv is no link.
  return (conv || pool) && SoleOutput(step) >= 0 && !step.node->attrs.Has(kResidualAttr);
}

}  // namespace

namespace {

// A pass's switch: on unless the environment variable is "0" (read once).
bool OnUnlessZero(const char* variable) {
  const char* v = std::getenv(variable);
  return v == nullptr || std::string(v) != "0";
}

std::atomic<bool>& ChainsFlag() {
  static std::atomic<bool> enabled{OnUnlessZero("GROVE_CPU_ONEDNN_CHAINS")};
  return enabled;
}

}  // namespace

bool OneDnnChainsEnabled() { return ChainsFlag().load(std::memory_order_relaxed); }
void SetOneDnnChainsEnabled(bool enabled) { ChainsFlag().store(enabled, std::memory_order_relaxed); }

void FuseOneDnnChains(runtime::PlanGraph& plan) {
  if (!OneDnnEnabled() || !OneDnnChainsEnabled()) return;
  std::vector<PlanValue>& values = plan.values;
  std::vector<PlanStep>& steps = plan.steps;
  const int num_values = static_cast<int>(values.size());
  std::vector<int> uses(num_values, 0), consumer(num_values, -1), producer(num_values, -1);
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
    for (int v : steps[s].outputs) {
      if (v >= 0) producer[v] = static_cast<int>(s);
    }
  }
  for (int v : plan.output_values) uses[v] += 2;
  auto linkable = [&](const PlanStep& step) {
    if (!Plain(step) || step.prepare == nullptr || step.inputs.empty() || step.inputs[0] < 0) return false;
    for (int v : step.inputs) {
      if (v >= 0 && values[v].dtype != DType::kF32) return false;
    }
    const int out = SoleOutput(step);
    return out >= 0 && values[out].dtype == DType::kF32 && values[out].shape_known;
  };

  std::vector<bool> removed(steps.size(), false);
  int fused = 0;
  for (size_t s = 0; s < steps.size(); ++s) {
    PlanStep& head = steps[s];
    const std::string& type = head.node->type;
    if (removed[s] || !(type == "Conv" || absl::StartsWith(type, "Conv+")) || !linkable(head) ||
        head.node->attrs.Has(kResidualAttr)) {
      continue;
    }
    std::vector<int> links = {static_cast<int>(s)};
    for (;;) {
      const PlanStep& last = steps[links.back()];
      const int v = SoleOutput(last);
      const int c = consumer[v];
      if (uses[v] != 1 || values[v].kind != Storage::kArena || c <= links.back() || removed[c]) break;
      const PlanStep& next = steps[c];
      if (!IsChainLink(next) || !linkable(next) || next.inputs[0] != v) break;
      // Its other inputs (a Conv's W and B) exist when the chain's head runs.
      bool ready = true;
      for (size_t i = 1; i < next.inputs.size(); ++i) {
        const int u = next.inputs[i];
        ready &= u < 0 || (u != v && producer[u] < static_cast<int>(s) && values[u].kind != Storage::kFusedAway);
      }
      if (!ready) break;
      links.push_back(c);
    }
    if (links.size() < 2) continue;
    // The chain's node: the head's, its inputs every link's (after the value
    // handed over), the other links in its attributes (post_op.h).
    auto node = std::make_unique<ir::Node>(*head.node);
    std::vector<std::string> types, names;
    std::vector<int64_t> counts = {static_cast<int64_t>(head.inputs.size())};
    for (size_t l = 0; l < links.size(); ++l) {
      const PlanStep& link = steps[links[l]];
      types.push_back(link.node->type);
      names.push_back(link.node->name.empty() ? link.node->type : link.node->name);
      if (l == 0) continue;
      const int i = static_cast<int>(l);
      node->attrs.Set(ChainTypeAttr(i), link.node->type);
      node->attrs.Set(ChainShapeAttr(i), values[link.inputs[0]].shape);
      for (const auto& [name, value] : link.node->attrs.all()) node->attrs.Set(ChainAttrPrefix(i) + name, value);
      counts.push_back(static_cast<int64_t>(link.inputs.size()) - 1);
      for (size_t in = 1; in < link.inputs.size(); ++in) {
        node->inputs.push_back(link.node->inputs[in]);
        head.inputs.push_back(link.inputs[in]);
      }
      values[link.inputs[0]].kind = Storage::kFusedAway;
      removed[links[l]] = true;
    }
    node->attrs.Set(std::string(kChainLinksAttr), static_cast<int64_t>(links.size() - 1));
    node->attrs.Set(std::string(kChainInputsAttr), counts);
    node->type = absl::StrJoin(types, ">");
    node->name = absl::StrCat("chain(", absl::StrJoin(names, ","), ")");
    const PlanStep& tail = steps[links.back()];
    node->outputs = {tail.node->outputs[0]};
    head.outputs = {SoleOutput(tail)};
    plan.owned_nodes.push_back(std::move(node));
    head.node = plan.owned_nodes.back().get();
    // One fused step of every link's ops: links FuseActivations made were
    // counted as steps of their own.
    for (const std::string& t : types) {
      const int ops = static_cast<int>(std::count(t.begin(), t.end(), '+')) + 1;
      if (ops > 1) {
        --plan.fused_steps;
        plan.fused_ops -= ops;
      }
      plan.fused_ops += ops;
    }
    ++fused;
    ++plan.fused_steps;
  }
  if (fused == 0) return;
  std::vector<PlanStep> kept;
  for (size_t s = 0; s < steps.size(); ++s) {
    if (!removed[s]) kept.push_back(std::move(steps[s]));
  }
  steps = std::move(kept);
}

namespace {

std::atomic<bool>& ChannelsLastFlag() {
  static std::atomic<bool> enabled{OnUnlessZero("GROVE_CPU_CHANNELS_LAST")};
  return enabled;
}

// A window step the layout pass stores X or Y channels-last for (post_op.h's
// kChannelsLastAttr): its prepare and kernel take the attribute.
bool IsLayoutWindow(const PlanStep& step) {
  const std::string& type = step.node->type;
  const bool conv = type == "Conv" || absl::StartsWith(type, "Conv+") || absl::StartsWith(type, "Conv>");
  const bool pool = type == "MaxPool" || type == "AveragePool" || type == "GlobalAveragePool" ||
                    type == "GlobalMaxPool";
  // Inference only: training_mode's running statistics are more outputs.
  const bool norm = type == "BatchNormalization";
  return (conv || pool || norm) && step.prepare != nullptr && !step.inputs.empty() && SoleOutput(step) >= 0;
}

// Elementwise ops whose CPU kernels compute each element from the elements
// at the same index (and single-element operands): the same on any layout.
bool IsLayoutFreeElementwise(const std::string& type) {
  static const absl::flat_hash_set<std::string>* const kTypes = new absl::flat_hash_set<std::string>{
      "Relu",  "Sigmoid", "Tanh", "LeakyRelu", "Elu",  "Selu", "Celu", "HardSigmoid", "HardSwish", "Softplus",
      "Softsign", "Clip", "Exp", "Log", "Neg", "Abs",  "Sqrt", "Reciprocal", "Erf",  "Gelu", "Mish", "Floor",
      "Ceil", "Round", "Sign", "Sin", "Cos", "Add", "Sub",  "Mul", "Div", "Pow", "Max", "Min", "Sum", "Mean"};
  return kTypes->contains(type);
}

}  // namespace

bool ChannelsLastEnabled() { return ChannelsLastFlag().load(std::memory_order_relaxed); }
void SetChannelsLastEnabled(bool enabled) { ChannelsLastFlag().store(enabled, std::memory_order_relaxed); }

void AssignChannelsLast(runtime::PlanGraph& plan) {
  if (!OneDnnEnabled() || !ChannelsLastEnabled()) return;
  std::vector<PlanValue>& values = plan.values;
  std::vector<PlanStep>& steps = plan.steps;
  const int num_values = static_cast<int>(values.size());
  // Values of one elementwise step share a layout: a union-find of them.
  std::vector<int> root(num_values);
  for (int v = 0; v < num_values; ++v) root[v] = v;
  auto find = [&](int v) {
    while (root[v] != v) v = root[v] = root[root[v]];
    return v;
  };
  std::vector<bool> plain(num_values, false);  // must keep [N, C, ...]
  std::vector<bool> windowed(num_values, false);  // a window step's X or Y
  for (int v = 0; v < num_values; ++v) {
    const PlanValue& pv = values[v];
    bool ok = pv.kind == Storage::kArena && pv.dtype == DType::kF32 && pv.shape_known && pv.shape.size() >= 3 &&
              pv.shape.size() <= 5;
    for (int64_t d : pv.shape) ok &= d > 0;
    plain[v] = !ok;
  }
  for (int v : plan.output_values) plain[v] = true;
  for (const PlanStep& step : steps) {
    for (int t : step.node->implicit_inputs) {
      const int v = plan.value_of(t);
      if (v >= 0) plain[v] = true;
    }
  }
  auto single = [&](int v) { return values[v].shape_known && ir::NumElements(values[v].shape) == 1; };
  // A per-channel operand of an elementwise step whose output is [N, C,
  // S...]: [N or 1, C, 1...] (a squeeze-and-excitation's scale, a global
  // pool's output). Stored with the output, channels-last, it is [N, 1...,
  // C], the same bytes, which broadcasts over [N, S..., C] as it did over
  // [N, C, S...]. Its own group decides with the output's.
  auto channel_vector = [&](int v, int out) {
    const std::vector<int64_t>& a = values[v].shape;
    const std::vector<int64_t>& o = values[out].shape;
    if (!values[v].shape_known || a.size() != o.size() || a.size() < 3 || a == o) return false;
    if ((a[0] != o[0] && a[0] != 1) || a[1] != o[1] || a[1] == 1) return false;
    for (size_t d = 2; d < a.size(); ++d) {
      if (a[d] != 1) return false;
    }
    return true;
  };
  // A Concat of same-rank values: all stored alike, its axis moved with them.
  auto layout_concat = [&](const PlanStep& step) {
    const int out = SoleOutput(step);
    if (step.node->type != "Concat" || out < 0 || step.inputs.empty()) return false;
    for (int v : step.inputs) {
      if (v < 0 || values[v].shape.size() != values[out].shape.size()) return false;
    }
    return true;
  };
  for (const PlanStep& step : steps) {
    const bool usable = Plain(step);
    if (usable && layout_concat(step)) {
      for (int v : step.inputs) root[find(v)] = find(SoleOutput(step));
      continue;
    }
    if (usable && IsLayoutWindow(step)) {
      const int x = step.inputs[0], y = SoleOutput(step);
      if (x >= 0) windowed[x] = true;
      windowed[y] = true;
      // X read again as another operand (a W) must stay plain; a fused
      // residual Add's tensor is stored as Y is.
      const bool residual = step.node->attrs.Has(kResidualAttr);
      for (size_t i = 1; i < step.inputs.size(); ++i) {
        const int v = step.inputs[i];
        if (v < 0) continue;
        if (residual && i == kResidualInput) {
          root[find(v)] = find(y);
        } else {
          plain[v] = true;
        }
      }
      continue;
    }
    const int out = usable && IsLayoutFreeElementwise(step.node->type) ? SoleOutput(step) : -1;
    bool elementwise = out >= 0;
    if (elementwise) {
      for (int v : step.inputs) {
        elementwise &= v >= 0 && (values[v].shape == values[out].shape || single(v) || channel_vector(v, out));
      }
    }
    if (!elementwise) {  // whatever else this step reads or writes keeps its layout
      for (int v : step.inputs) {
        if (v >= 0) plain[v] = true;
      }
      for (int v : step.outputs) {
        if (v >= 0) plain[v] = true;
      }
      continue;
    }
    for (int v : step.inputs) {
      if (values[v].shape == values[out].shape || channel_vector(v, out)) root[find(v)] = find(out);
    }
  }
  // A group is stored channels-last when no member must stay plain and a
  // window step reads or writes one of them.
  std::vector<bool> group_plain(num_values, false), group_windowed(num_values, false);
  for (int v = 0; v < num_values; ++v) {
    group_plain[find(v)] = group_plain[find(v)] || plain[v];
    group_windowed[find(v)] = group_windowed[find(v)] || windowed[v];
  }
  std::vector<bool> last(num_values, false);
  int stored = 0;
  for (int v = 0; v < num_values; ++v) {
    if (group_plain[find(v)] || !group_windowed[find(v)]) continue;
    last[v] = true;
    ++stored;
    std::vector<int64_t>& shape = values[v].shape;
    std::rotate(shape.begin() + 1, shape.begin() + 2, shape.end());  // [N, C, S...] -> [N, S..., C]
  }
  if (stored == 0) return;
  // The step's node, copied with attribute `name` set to `value`.
  auto set_attr = [&](PlanStep& step, const std::string& name, int64_t value) {
    auto node = std::make_unique<ir::Node>(*step.node);
    node->attrs.Set(name, value);
    plan.owned_nodes.push_back(std::move(node));
    step.node = plan.owned_nodes.back().get();
  };
  for (PlanStep& step : steps) {
    if (Plain(step) && layout_concat(step) && last[SoleOutput(step)]) {
      // [N, C, S...] axis a is [N, S..., C] axis 0, rank - 1 (C) or a - 1.
      const int rank = static_cast<int>(values[SoleOutput(step)].shape.size());
      int64_t axis = step.node->attrs.GetInt("axis", 0);
      if (axis < 0) axis += rank;
      set_attr(step, "axis", axis == 0 ? 0 : axis == 1 ? rank - 1 : axis - 1);
      continue;
    }
    if (!Plain(step) || !IsLayoutWindow(step)) continue;
    const int x = step.inputs[0], y = SoleOutput(step);
    const int64_t bits = (x >= 0 && last[x] ? 1 : 0) | (last[y] ? 2 : 0);
    if (bits != 0) set_attr(step, std::string(kChannelsLastAttr), bits);
  }
}

}  // namespace grove::cpu
