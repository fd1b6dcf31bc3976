// Cases of FusedAttention (lib/ir/ops/attention_attrs.h) and the unfused
// chain each one stands for, run op by op through the registry's CPU
// kernels: the reference the fused kernels must match. Shared by
// test/ops/attention_test.cc (CPU) and test/cuda/attention_test.cc.
#ifndef GROVE_TEST_ATTENTION_TEST_UTIL_H_
#define GROVE_TEST_ATTENTION_TEST_UTIL_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "grove/grove.h"
#include "test/op_test_util.h"

namespace grove::testing {

struct AttentionCase {
  std::string name;
  std::vector<int64_t> q, k, v;  // K's shape as given to the fused op (Kᵀ when k_transposed)
  bool k_transposed = false;
  int q_scale_op = 0, k_scale_op = 0, scale_op = 0;  // 0 none, 1 Mul, 2 Div
  double q_scale = 1, k_scale = 1, scale = 1;
  int mask = 0;  // 0 none, 1 added (f32), 2 Where condition (bool)
  std::vector<int64_t> mask_shape;
  bool fill_if_true = true;
  double mask_fill = -std::numeric_limits<double>::infinity();
  // Causal: the mask is true (masked) where key j > i + (sk - sq); else random.
  bool causal = false;
  bool mask_all_of_row0 = false;  // row 0 of every head fully masked
  // A second mask applied after the first (input 4): 1 added (random f32,
  // some -inf), 2 a random Where condition putting mask2_fill where true.
  int mask2 = 0;
  std::vector<int64_t> mask2_shape;
  double mask2_fill = -1e4;
  // Query heads per K/V head: K's and V's last batch dim holds heads / kv_group.
  int64_t kv_group = 1;
};

inline void PrintTo(const AttentionCase& c, std::ostream* os) { *os << c.name; }

// Deterministic values in [-1, 1).
inline Tensor AttnData(const std::vector<int64_t>& shape, uint32_t seed) {
  Tensor t = Tensor::Create(DType::kF32, shape).value();
  uint32_t x = seed * 2654435761u + 12345u;
  for (int64_t i = 0; i < t.view().num_elements(); ++i) {
    x = x * 1664525u + 1013904223u;
    t.as<float>()[i] = static_cast<float>((x >> 8) & 0xffff) / 32768.0f - 1.0f;
  }
  return t;
}

struct AttentionInputs {
  Tensor q, k, v;
  std::optional<Tensor> mask;
  std::optional<Tensor> mask2;
};

inline AttentionInputs MakeAttentionInputs(const AttentionCase& c) {
  AttentionInputs in{AttnData(c.q, 1), AttnData(c.k, 2), AttnData(c.v, 3), std::nullopt, std::nullopt};
  if (c.mask2 != 0) {
    Tensor m2 = Tensor::Create(c.mask2 == 1 ? DType::kF32 : DType::kBool, c.mask2_shape).value();
    uint32_t x = 4242;
    for (int64_t e = 0; e < Count(c.mask2_shape); ++e) {
      x = x * 1664525u + 1013904223u;
      const bool hit = ((x >> 11) % 5) == 0;
      if (c.mask2 == 1) {
        m2.as<float>()[e] = hit ? -std::numeric_limits<float>::infinity()
                                : static_cast<float>((x >> 3) & 0xff) / 128.0f - 1.0f;
      } else {
        m2.as<uint8_t>()[e] = hit ? 1 : 0;
      }
    }
    in.mask2 = std::move(m2);
  }
  if (c.mask == 0) return in;
  const std::vector<int64_t>& ms = c.mask_shape;
  const int64_t sq = c.q[c.q.size() - 2];
  const int64_t sk = c.k_transposed ? c.k.back() : c.k[c.k.size() - 2];
  const int64_t n = Count(ms), rows = ms.size() >= 2 ? ms[ms.size() - 2] : 1, cols = ms.back();
  Tensor m = Tensor::Create(c.mask == 1 ? DType::kF32 : DType::kBool, ms).value();
  uint32_t x = 777;
  for (int64_t e = 0; e < n; ++e) {
    const int64_t i = (e / cols) % rows, j = e % cols;
    x = x * 1664525u + 1013904223u;
    bool masked = ((x >> 10) & 3) == 0;  // a quarter masked at random
    if (c.causal) masked = j > i + (sk - (rows == 1 ? 1 : sq));
    if (c.mask_all_of_row0 && i == 0) masked = true;
    if (c.mask == 1) {
      m.as<float>()[e] = masked ? -std::numeric_limits<float>::infinity()
                                : static_cast<float>((x >> 4) & 0xff) / 64.0f - 2.0f;
    } else {
      m.as<uint8_t>()[e] = (masked == c.fill_if_true) ? 1 : 0;
    }
  }
  in.mask = std::move(m);
  return in;
}

inline std::vector<std::pair<std::string, AttrValue>> AttentionAttrsOf(const AttentionCase& c) {
  return {{"k_transposed", int64_t{c.k_transposed}}, {"q_scale_op", int64_t{c.q_scale_op}},
          {"q_scale", c.q_scale},                     {"k_scale_op", int64_t{c.k_scale_op}},
          {"k_scale", c.k_scale},                     {"scale_op", int64_t{c.scale_op}},
          {"scale", c.scale},                         {"mask", int64_t{c.mask}},
          {"mask_fill", c.mask_fill},                 {"fill_if_true", int64_t{c.fill_if_true}},
          {"mask2", int64_t{c.mask2}},                {"mask2_fill", c.mask2_fill},
          {"kv_group", c.kv_group}};
}

// `t` with each of its heads (the last batch dim, rank - 3) repeated
// `group` times in place: head i as heads i * group .. i * group + group - 1
// (what repeat_kv / repeat_interleave make of grouped-query K and V).
inline Tensor RepeatHeads(const Tensor& t, int64_t group) {
  std::vector<int64_t> shape = t.shape();
  const size_t axis = shape.size() - 3;
  int64_t outer = 1;
  for (size_t i = 0; i < axis; ++i) outer *= shape[i];
  const int64_t heads = shape[axis], inner = shape[axis + 1] * shape[axis + 2];
  shape[axis] *= group;
  Tensor out = Tensor::Create(DType::kF32, shape).value();
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t h = 0; h < heads * group; ++h) {
      const float* src = t.as<float>() + (o * heads + h / group) * inner;
      std::copy(src, src + inner, out.as<float>() + (o * heads * group + h) * inner);
    }
  }
  return out;
}

inline std::vector<const Tensor*> AttentionOperands(const AttentionInputs& in) {
  std::vector<const Tensor*> ops = {&in.q, &in.k, &in.v};
  if (in.mask.has_value()) ops.push_back(&*in.mask);
  if (in.mask2.has_value()) ops.push_back(&*in.mask2);
  return ops;
}

// The unfused chain on the CPU: [Transpose K] [scale Q, K] MatMul [scale]
// [Add | Where] Softmax MatMul.
inline absl::StatusOr<Tensor> UnfusedAttention(const AttentionCase& c, const AttentionInputs& in) {
  auto one = [](absl::StatusOr<std::vector<Tensor>> r) -> absl::StatusOr<Tensor> {
    if (!r.ok()) return r.status();
    return std::move((*r)[0]);
  };
  auto scalar = [](double v) { return MakeTensor<float>(DType::kF32, {}, {static_cast<float>(v)}); };
  auto scale = [&](const Tensor& x, int op, double s) -> absl::StatusOr<Tensor> {
    const Tensor st = scalar(s);
    return one(RunOp(op == 1 ? "Mul" : "Div", {&x, &st}));
  };
  const int rank = static_cast<int>(c.q.size());
  Tensor kt = Tensor::CastOf(in.k.view(), DType::kF32).value();
  Tensor v = Tensor::CastOf(in.v.view(), DType::kF32).value();
  if (c.kv_group > 1) {
    kt = RepeatHeads(kt, c.kv_group);
    v = RepeatHeads(v, c.kv_group);
  }
  if (!c.k_transposed) {
    std::vector<int64_t> perm;
    for (int i = 0; i < rank; ++i) perm.push_back(i);
    std::swap(perm[rank - 1], perm[rank - 2]);
    absl::StatusOr<Tensor> t = one(RunOp("Transpose", {&kt}, {{"perm", perm}}));
    if (!t.ok()) return t.status();
    kt = *std::move(t);
  }
  if (c.k_scale_op != 0) {
    absl::StatusOr<Tensor> t = scale(kt, c.k_scale_op, c.k_scale);
    if (!t.ok()) return t.status();
    kt = *std::move(t);
  }
  Tensor q = Tensor::CastOf(in.q.view(), DType::kF32).value();
  if (c.q_scale_op != 0) {
    absl::StatusOr<Tensor> t = scale(q, c.q_scale_op, c.q_scale);
    if (!t.ok()) return t.status();
    q = *std::move(t);
  }
  absl::StatusOr<Tensor> s = one(RunOp("MatMul", {&q, &kt}));
  if (!s.ok()) return s.status();
  if (c.scale_op != 0) s = scale(*s, c.scale_op, c.scale);
  if (!s.ok()) return s.status();
  if (c.mask == 1) {
    s = one(RunOp("Add", {&*s, &*in.mask}));
  } else if (c.mask == 2) {
    const Tensor fill = scalar(c.mask_fill);
    s = c.fill_if_true ? one(RunOp("Where", {&*in.mask, &fill, &*s})) : one(RunOp("Where", {&*in.mask, &*s, &fill}));
  }
  if (!s.ok()) return s.status();
  if (c.mask2 == 1) {
    s = one(RunOp("Add", {&*in.mask2, &*s}));
  } else if (c.mask2 == 2) {
    const Tensor fill = scalar(c.mask2_fill);
    s = one(RunOp("Where", {&*in.mask2, &fill, &*s}));
  }
  if (!s.ok()) return s.status();
  absl::StatusOr<Tensor> p = one(RunOp("Softmax", {&*s}, {{"axis", int64_t{-1}}}));
  if (!p.ok()) return p.status();
  return one(RunOp("MatMul", {&*p, &v}));
}

// "" when equal within |got - want| <= tol * (1 + |want|) (NaN where NaN),
// else the first difference.
inline std::string CompareAttention(const Tensor& want, const Tensor& got, double tol) {
  if (want.shape() != got.shape()) {
    return absl::StrCat("shape [", absl::StrJoin(got.shape(), ","), "], want [", absl::StrJoin(want.shape(), ","), "]");
  }
  const Tensor w = Tensor::CastOf(want.view(), DType::kF32).value();
  const Tensor g = Tensor::CastOf(got.view(), DType::kF32).value();
  for (int64_t i = 0; i < w.view().num_elements(); ++i) {
    const double a = w.as<float>()[i], b = g.as<float>()[i];
    if (std::isnan(a) || std::isnan(b)) {
      if (std::isnan(a) != std::isnan(b)) return absl::StrCat("element ", i, ": ", b, ", want ", a);
      continue;
    }
    if (std::abs(a - b) > tol * (1 + std::abs(a))) return absl::StrCat("element ", i, ": ", b, ", want ", a);
  }
  return "";
}

// The edge cases both kernels are held to.
inline std::vector<AttentionCase> AttentionEdgeCases() {
  const double ninf = -std::numeric_limits<double>::infinity();
  std::vector<AttentionCase> cs;
  cs.push_back({.name = "rank4_div", .q = {2, 3, 5, 8}, .k = {2, 3, 7, 8}, .v = {2, 3, 7, 6}, .scale_op = 2,
                .scale = std::sqrt(8.0)});
  cs.push_back({.name = "decode_seq1_odd_dims_kt_mul", .q = {3, 1, 5}, .k = {3, 5, 9}, .v = {3, 9, 3},
                .k_transposed = true, .scale_op = 1, .scale = 0.447});
  cs.push_back({.name = "seq1_both", .q = {1, 2, 1, 4}, .k = {1, 2, 1, 4}, .v = {1, 2, 1, 4}});
  cs.push_back({.name = "additive_mask", .q = {2, 2, 6, 8}, .k = {2, 2, 11, 8}, .v = {2, 2, 11, 8}, .scale_op = 2,
                .scale = 2.0, .mask = 1, .mask_shape = {2, 1, 6, 11}});
  cs.push_back({.name = "bool_mask_fill_if_true", .q = {2, 5, 7}, .k = {2, 7, 7}, .v = {2, 7, 5}, .scale_op = 1,
                .scale = 0.25, .mask = 2, .mask_shape = {5, 7}, .fill_if_true = true, .mask_fill = -1e9});
  cs.push_back({.name = "bool_mask_fill_if_false", .q = {2, 2, 5, 4}, .k = {2, 2, 9, 4}, .v = {2, 2, 9, 4},
                .mask = 2, .mask_shape = {2, 1, 1, 9}, .fill_if_true = false, .mask_fill = ninf});
  cs.push_back({.name = "causal_q_shorter", .q = {1, 2, 3, 8}, .k = {1, 2, 8, 8}, .v = {1, 2, 8, 8},
                .scale_op = 2, .scale = std::sqrt(8.0), .mask = 2, .mask_shape = {1, 1, 3, 8}, .mask_fill = ninf,
                .causal = true});
  cs.push_back({.name = "causal_long", .q = {1, 1, 40, 16}, .k = {1, 1, 40, 16}, .v = {1, 1, 40, 12},
                .scale_op = 2, .scale = 4.0, .mask = 2, .mask_shape = {40, 40}, .mask_fill = ninf, .causal = true});
  cs.push_back({.name = "all_masked_row_is_nan", .q = {1, 2, 4, 4}, .k = {1, 2, 6, 4}, .v = {1, 2, 6, 4},
                .mask = 2, .mask_shape = {4, 6}, .mask_fill = ninf, .mask_all_of_row0 = true});
  // GPT-2's export: a causal Where, then the attention mask added.
  cs.push_back({.name = "where_then_add", .q = {2, 2, 5, 8}, .k = {2, 2, 7, 8}, .v = {2, 2, 7, 8}, .scale_op = 2,
                .scale = std::sqrt(8.0), .mask = 2, .mask_shape = {1, 1, 5, 7}, .fill_if_true = false,
                .mask_fill = -3.4028234663852886e38, .causal = true, .mask2 = 1, .mask2_shape = {2, 1, 1, 7}});
  cs.push_back({.name = "add_then_where", .q = {3, 4, 6}, .k = {3, 9, 6}, .v = {3, 9, 5}, .mask = 1,
                .mask_shape = {4, 9}, .mask2 = 2, .mask2_shape = {3, 1, 9}});
  cs.push_back({.name = "all_masked_additive_is_nan", .q = {2, 3, 4}, .k = {2, 5, 4}, .v = {2, 5, 4}, .mask = 1,
                .mask_shape = {3, 5}, .mask_all_of_row0 = true});
  cs.push_back({.name = "q_and_k_scaled_kt", .q = {2, 2, 4, 8}, .k = {2, 2, 8, 4}, .v = {2, 2, 4, 8},
                .k_transposed = true, .q_scale_op = 1, .k_scale_op = 1, .q_scale = 0.5946, .k_scale = 0.5946});
  cs.push_back({.name = "q_div_k_div", .q = {2, 3, 6}, .k = {2, 5, 6}, .v = {2, 5, 7}, .q_scale_op = 2,
                .k_scale_op = 2, .q_scale = 1.5, .k_scale = 3.0});
  cs.push_back({.name = "kv_batch_broadcast", .q = {2, 3, 4, 8}, .k = {1, 3, 5, 8}, .v = {2, 1, 5, 8}});
  cs.push_back({.name = "long_keys_wide_v", .q = {1, 1, 3, 33}, .k = {1, 1, 100, 33}, .v = {1, 1, 100, 150},
                .scale_op = 1, .scale = 0.17});
  cs.push_back({.name = "no_keys", .q = {1, 2, 3, 4}, .k = {1, 2, 0, 4}, .v = {1, 2, 0, 5}});
  cs.push_back({.name = "no_queries", .q = {1, 2, 0, 4}, .k = {1, 2, 3, 4}, .v = {1, 2, 3, 5}});
  cs.push_back({.name = "head_dim_zero", .q = {1, 2, 3, 0}, .k = {1, 2, 4, 0}, .v = {1, 2, 4, 5}});
  // Grouped-query attention: K and V hold heads / kv_group heads.
  cs.push_back({.name = "gqa_causal", .q = {2, 4, 7, 8}, .k = {2, 2, 9, 8}, .v = {2, 2, 9, 8}, .scale_op = 2,
                .scale = std::sqrt(8.0), .mask = 2, .mask_shape = {7, 9}, .mask_fill = ninf, .causal = true,
                .kv_group = 2});
  cs.push_back({.name = "mqa_kt_wide_v", .q = {1, 4, 5, 8}, .k = {1, 1, 8, 6}, .v = {1, 1, 6, 11},
                .k_transposed = true, .scale_op = 1, .scale = 0.35, .kv_group = 4});
  cs.push_back({.name = "gqa_rank3", .q = {6, 3, 4}, .k = {2, 5, 4}, .v = {2, 5, 4}, .mask = 1, .mask_shape = {3, 5},
                .kv_group = 3});
  cs.push_back({.name = "gqa_batch_broadcast", .q = {2, 6, 3, 8}, .k = {1, 2, 6, 8}, .v = {2, 2, 6, 8},
                .kv_group = 3});
  return cs;
}


// A model holding one attention chain as exporters write it, for the plan
// pass's tests: inputs q, k (or kt, already transposed), v [, m]; output y
// (and, with the `leak_*` switches, an intermediate as a second output).
struct AttentionChainSpec {
  int rank = 4;
  bool transpose_k = true;  // K as given, through Transpose(perm swapping the last two)
  int scale = 2;            // 0 none, 1 Mul (weight on the left), 2 Div
  bool prescale_qk = false;  // Q and Kᵀ each times a scalar weight (nn.MultiheadAttention's export)
  // 0 none, 1 Add(scores, m), 2 Where(causal from Trilu, -inf, scores), 3
  // both: the Where, then the Add (GPT-2's export).
  int mask = 0;
  int softmax_axis = -1;
  bool leak_scores = false;     // the scaled scores also a model output
  bool leak_probs = false;      // Softmax's output also a model output
  bool v_rank2 = false;         // V is [s, d] (MatMul broadcasts it): not fused
  // Cast(to the dtype) and Identity before the Softmax, Dropout after it, as
  // some exporters leave them.
  bool pass_throughs = false;
  DType dtype = DType::kF32;  // of the inputs, weights and every float value (f32, f16, bf16)
};

inline absl::StatusOr<std::shared_ptr<const Model>> BuildAttentionChain(const AttentionChainSpec& c) {
  ModelBuilder b;
  b.AddSymbol("s", 1, 512);
  const int64_t d = 8;
  auto dims = [&](Dim rows, Dim cols) {
    return c.rank == 4 ? std::vector<Dim>{2, 3, rows, cols} : std::vector<Dim>{6, rows, cols};
  };
  const DType t = c.dtype;
  b.AddInput("q", t, dims("s", d));
  b.AddInput(c.transpose_k ? "k" : "kt", t, c.transpose_k ? dims("s", d) : dims(d, "s"));
  if (c.v_rank2) {
    b.AddInput("v", t, {"s", d});
  } else {
    b.AddInput("v", t, dims("s", d));
  }
  if (c.mask == 1 || c.mask == 3) b.AddInput("m", t, {1, "s", "s"});
  // A scalar weight of the chain's dtype (rounded to it).
  auto scalar = [&](const std::string& name, float v) {
    const Tensor w = Tensor::CastOf(TensorView{DType::kF32, {}, &v}, t).value();
    b.AddWeight(name, t, {}, absl::Span<const uint8_t>(static_cast<const uint8_t*>(w.data()), DTypeSize(t)));
  };
  std::string q = "q", kt = "kt";
  if (c.transpose_k) {
    std::vector<int64_t> perm = c.rank == 4 ? std::vector<int64_t>{0, 1, 3, 2} : std::vector<int64_t>{0, 2, 1};
    b.AddOp("Transpose", {"k"}, {"kt"}, {{"perm", perm}}, "k_t");
  }
  if (c.prescale_qk) {
    scalar("root_scale", 0.59460356f);
    b.AddOp("Mul", {"q", "root_scale"}, {"q_s"}, {}, "q_scaled");
    b.AddOp("Mul", {"kt", "root_scale"}, {"kt_s"}, {}, "k_scaled");
    q = "q_s";
    kt = "kt_s";
  }
  b.AddOp("MatMul", {q, kt}, {"scores"}, {}, "qk");
  std::string cur = "scores";
  if (c.scale == 1) {
    scalar("scale", 0.35355339f);
    b.AddOp("Mul", {"scale", cur}, {"scaled"}, {}, "scale");
    cur = "scaled";
  } else if (c.scale == 2) {
    scalar("scale", 2.8284271f);
    b.AddOp("Div", {cur, "scale"}, {"scaled"}, {}, "scale");
    cur = "scaled";
  }
  if (c.mask == 1) {
    b.AddOp("Add", {cur, "m"}, {"masked"}, {}, "mask");
    cur = "masked";
  } else if (c.mask >= 2) {
    // ones[s, s] -> Trilu (lower) -> == 0 above the diagonal -> -inf there.
    scalar("one", 1.0f);
    scalar("zero", 0.0f);
    scalar("ninf", -std::numeric_limits<float>::infinity());
    b.AddWeight("i2", DType::kI64, {1}, std::vector<int64_t>{c.rank - 2});
    b.AddWeight("i3", DType::kI64, {1}, std::vector<int64_t>{c.rank - 1});
    b.AddOp("Shape", {cur}, {"scores_shape"});
    b.AddOp("Slice", {"scores_shape", "i2", "i3"}, {"rows"});
    b.AddOp("Concat", {"rows", "rows"}, {"square"}, {{"axis", int64_t{0}}});
    b.AddOp("Expand", {"one", "square"}, {"ones"});
    b.AddOp("Trilu", {"ones"}, {"tril"}, {{"upper", int64_t{0}}});
    b.AddOp("Equal", {"tril", "zero"}, {"above"});
    b.AddOp("Where", {"above", "ninf", cur}, {"masked"}, {}, "causal");
    cur = "masked";
    if (c.mask == 3) {
      b.AddOp("Add", {cur, "m"}, {"masked2"}, {}, "mask");
      cur = "masked2";
    }
  }
  if (c.pass_throughs) {
    b.AddOp("Cast", {cur}, {"cast"}, {{"to", static_cast<int64_t>(t)}}, "cast");
    b.AddOp("Identity", {"cast"}, {"same"}, {}, "identity");
    cur = "same";
  }
  b.AddOp("Softmax", {cur}, {"probs"}, {{"axis", int64_t{c.softmax_axis}}}, "softmax");
  std::string probs = "probs";
  if (c.pass_throughs) {
    b.AddOp("Dropout", {"probs"}, {"dropped"}, {}, "dropout");
    probs = "dropped";
  }
  b.AddOp("MatMul", {probs, "v"}, {"y"}, {}, "pv");
  b.AddOutput("y");
  if (c.leak_scores) b.AddOutput(cur);
  if (c.leak_probs) b.AddOutput("probs");
  absl::StatusOr<std::vector<uint8_t>> bytes = b.Finish();
  if (!bytes.ok()) return bytes.status();
  return Model::LoadFromBuffer(*bytes);
}

// Inputs of BuildAttentionChain's model at sequence length s.
inline std::vector<Tensor> AttentionChainInputs(const AttentionChainSpec& c, int64_t s) {
  const int64_t d = 8;
  auto dims = [&](int64_t rows, int64_t cols) {
    return c.rank == 4 ? std::vector<int64_t>{2, 3, rows, cols} : std::vector<int64_t>{6, rows, cols};
  };
  std::vector<Tensor> in;
  in.push_back(AttnData(dims(s, d), 11));
  in.push_back(AttnData(c.transpose_k ? dims(s, d) : dims(d, s), 12));
  in.push_back(AttnData(c.v_rank2 ? std::vector<int64_t>{s, d} : dims(s, d), 13));
  if (c.mask == 1 || c.mask == 3) in.push_back(AttnData({1, s, s}, 14));
  if (c.dtype != DType::kF32) {
    for (Tensor& x : in) x = Tensor::CastOf(x.view(), c.dtype).value();
  }
  return in;
}

}  // namespace grove::testing

#endif  // GROVE_TEST_ATTENTION_TEST_UTIL_H_
