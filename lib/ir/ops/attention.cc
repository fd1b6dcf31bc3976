// Op definition of FusedAttention (lib/ir/ops/attention_attrs.h): a grove
// op that no ONNX file names; the plan pass makes it, and a .grove file that
// holds one is checked like any other op.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "lib/ir/ops/attention_attrs.h"
#include "lib/ir/ops/ops.h"

namespace grove::ir {
namespace {

constexpr char kQScale[] = "q_scale", kQScaleOp[] = "q_scale_op";
constexpr char kKScale[] = "k_scale", kKScaleOp[] = "k_scale_op";
constexpr char kScale[] = "scale", kScaleOp[] = "scale_op";
constexpr char kKTransposed[] = "k_transposed";
constexpr char kZeroNanProbs[] = "zero_nan_probs";
constexpr char kKvGroup[] = "kv_group";
constexpr const char* kMaskKind[2] = {"mask", "mask2"};
constexpr const char* kMaskFill[2] = {"mask_fill", "mask2_fill"};
constexpr const char* kFillIfTrue[2] = {"fill_if_true", "mask2_fill_if_true"};

absl::StatusOr<AttentionScale> ReadScale(const Attributes& attrs, const char* op_name, const char* value_name) {
  const int64_t op = attrs.GetInt(op_name, 0);
  if (op < 0 || op > static_cast<int64_t>(AttentionScaleOp::kDiv)) {
    return absl::InvalidArgumentError(
        absl::StrCat("attribute '", op_name, "' is ", op, "; expected 0 (none), 1 (multiply) or 2 (divide)"));
  }
  return AttentionScale{static_cast<AttentionScaleOp>(op), attrs.GetFloat(value_name, 1.0)};
}

bool ConstMismatch(const SymDim& a, const SymDim& b) {
  return a.is_const() && b.is_const() && a.value() != b.value();
}

absl::Status InferFusedAttention(ShapeContext& ctx) {
  absl::StatusOr<AttentionAttrs> a = ReadAttentionAttrs(ctx.attrs());
  if (!a.ok()) return ctx.Error(a.status().message());
  static constexpr const char* kNames[] = {"Q", "K", "V", "mask", "mask2"};
  for (int i = 0; i < 3; ++i) {
    if (!ctx.has_input(i)) return ctx.Error(absl::StrCat("input ", i, " (", kNames[i], ") is missing"));
    if (!IsAttentionDType(ctx.input_dtype(i)) || ctx.input_dtype(i) != ctx.input_dtype(0)) {
      return ctx.Error(absl::StrCat("input ", i, " (", kNames[i], ") has dtype ", DTypeName(ctx.input_dtype(i)),
                                    "; Q, K and V must share one of f32, f16, bf16"));
    }
  }
  for (int m = 0; m < 2; ++m) {
    const bool given = ctx.has_input(3 + m), wanted = a->masks[m].kind != AttentionMaskKind::kNone;
    if (given != wanted) {
      return ctx.Error(given ? absl::StrCat("input ", 3 + m, " (", kNames[3 + m], ") is given but attribute '",
                                            kMaskKind[m], "' is 0")
                             : absl::StrCat("attribute '", kMaskKind[m], "' asks for input ", 3 + m, " (",
                                            kNames[3 + m], "), which is missing"));
    }
  }
  const int rank = ctx.input_rank(0);
  if (rank != 3 && rank != 4) {
    return ctx.Error(absl::StrCat("input 0 (Q) has rank ", rank, "; expected 3 or 4"));
  }
  for (int i = 1; i < 3; ++i) {
    if (ctx.input_rank(i) != rank) {
      return ctx.Error(absl::StrCat("input ", i, " (", kNames[i], ") has rank ", ctx.input_rank(i),
                                    "; expected Q's rank ", rank));
    }
  }
  const SymShape& q = ctx.input_shape(0);
  const SymShape& k = ctx.input_shape(1);
  const SymShape& v = ctx.input_shape(2);
  const SymDim& kd = a->k_transposed ? k[rank - 2] : k[rank - 1];
  const SymDim& ks = a->k_transposed ? k[rank - 1] : k[rank - 2];
  if (ConstMismatch(q[rank - 1], kd)) return ctx.Error("Q and K have different head dims");
  if (ConstMismatch(ks, v[rank - 2])) return ctx.Error("K and V have different sequence lengths");
  // K's and V's key-value heads (their last batch dim) as the query heads
  // they serve: kv_group times as many.
  auto as_query_heads = [&](const SymShape& s) {
    SymShape batch(s.begin(), s.end() - 2);
    if (a->kv_group > 1 && !batch.empty()) batch.back() = batch.back() * SymDim(a->kv_group);
    return batch;
  };
  absl::StatusOr<SymShape> batch =
      BroadcastShapes({SymShape(q.begin(), q.end() - 2), as_query_heads(k), as_query_heads(v)});
  if (!batch.ok()) return ctx.Error(absl::StrCat("batch dims do not broadcast: ", batch.status().message()));
  for (int m = 0; m < 2; ++m) {
    const int i = 3 + m;
    if (!ctx.has_input(i)) continue;
    const DType want = a->masks[m].kind == AttentionMaskKind::kAdd ? ctx.input_dtype(0) : DType::kBool;
    if (ctx.input_dtype(i) != want) {
      return ctx.Error(absl::StrCat("input ", i, " (", kNames[i], ") has dtype ", DTypeName(ctx.input_dtype(i)),
                                    "; expected ", DTypeName(want)));
    }
    if (ctx.input_rank(i) > rank) {
      return ctx.Error(absl::StrCat("input ", i, " (", kNames[i], ") has rank ", ctx.input_rank(i), "; at most ",
                                    rank));
    }
  }
  SymShape out = *std::move(batch);
  out.push_back(q[rank - 2]);
  out.push_back(v[rank - 1]);
  ctx.SetOutput(0, ctx.input_dtype(0), std::move(out));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<AttentionAttrs> ReadAttentionAttrs(const Attributes& attrs) {
  AttentionAttrs a;
  const int64_t kt = attrs.GetInt(kKTransposed, 0);
  if (kt != 0 && kt != 1) {
    return absl::InvalidArgumentError(absl::StrCat("attribute 'k_transposed' is ", kt, "; expected 0 or 1"));
  }
  a.k_transposed = kt == 1;
  const int64_t zn = attrs.GetInt(kZeroNanProbs, 0);
  if (zn != 0 && zn != 1) {
    return absl::InvalidArgumentError(absl::StrCat("attribute 'zero_nan_probs' is ", zn, "; expected 0 or 1"));
  }
  a.zero_nan_probs = zn == 1;
  a.kv_group = attrs.GetInt(kKvGroup, 1);
  if (a.kv_group < 1 || a.kv_group > (int64_t{1} << 31)) {
    return absl::InvalidArgumentError(
        absl::StrCat("attribute 'kv_group' is ", a.kv_group, "; expected 1 to 2^31 query heads per key-value head"));
  }
  absl::StatusOr<AttentionScale> s = ReadScale(attrs, kQScaleOp, kQScale);
  if (!s.ok()) return s.status();
  a.q_scale = *s;
  if (s = ReadScale(attrs, kKScaleOp, kKScale); !s.ok()) return s.status();
  a.k_scale = *s;
  if (s = ReadScale(attrs, kScaleOp, kScale); !s.ok()) return s.status();
  a.scale = *s;
  for (int m = 0; m < 2; ++m) {
    const int64_t kind = attrs.GetInt(kMaskKind[m], 0);
    if (kind < 0 || kind > static_cast<int64_t>(AttentionMaskKind::kWhere)) {
      return absl::InvalidArgumentError(absl::StrCat("attribute '", kMaskKind[m], "' is ", kind,
                                                     "; expected 0 (none), 1 (added) or 2 (Where condition)"));
    }
    a.masks[m].kind = static_cast<AttentionMaskKind>(kind);
    a.masks[m].fill = attrs.GetFloat(kMaskFill[m], 0.0);
    const int64_t fit = attrs.GetInt(kFillIfTrue[m], 1);
    if (fit != 0 && fit != 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("attribute '", kFillIfTrue[m], "' is ", fit, "; expected 0 or 1"));
    }
    a.masks[m].fill_if_true = fit == 1;
  }
  if (a.masks[0].kind == AttentionMaskKind::kNone && a.masks[1].kind != AttentionMaskKind::kNone) {
    return absl::InvalidArgumentError("attribute 'mask2' is set but 'mask' is 0: the first mask is input 3");
  }
  return a;
}

void WriteAttentionAttrs(const AttentionAttrs& a, Attributes* attrs) {
  attrs->Set(kKTransposed, int64_t{a.k_transposed ? 1 : 0});
  attrs->Set(kZeroNanProbs, int64_t{a.zero_nan_probs ? 1 : 0});
  if (a.kv_group != 1) attrs->Set(kKvGroup, a.kv_group);
  attrs->Set(kQScaleOp, static_cast<int64_t>(a.q_scale.op));
  attrs->Set(kQScale, a.q_scale.value);
  attrs->Set(kKScaleOp, static_cast<int64_t>(a.k_scale.op));
  attrs->Set(kKScale, a.k_scale.value);
  attrs->Set(kScaleOp, static_cast<int64_t>(a.scale.op));
  attrs->Set(kScale, a.scale.value);
  for (int m = 0; m < 2; ++m) {
    attrs->Set(kMaskKind[m], static_cast<int64_t>(a.masks[m].kind));
    attrs->Set(kMaskFill[m], a.masks[m].fill);
    attrs->Set(kFillIfTrue[m], int64_t{a.masks[m].fill_if_true ? 1 : 0});
  }
}

absl::Status RegisterAttentionOps(OpRegistry& registry) {
  OpDef def;
  def.type = kFusedAttentionOp;
  def.min_inputs = 3;
  def.max_inputs = 5;
  def.attrs = {{kKTransposed, AttrKind::kInt}, {kQScaleOp, AttrKind::kInt}, {kQScale, AttrKind::kFloat},
               {kKScaleOp, AttrKind::kInt},    {kKScale, AttrKind::kFloat},   {kScaleOp, AttrKind::kInt},
               {kScale, AttrKind::kFloat},    {kZeroNanProbs, AttrKind::kInt}, {kKvGroup, AttrKind::kInt}};
  for (int m = 0; m < 2; ++m) {
    def.attrs.push_back({kMaskKind[m], AttrKind::kInt});
    def.attrs.push_back({kMaskFill[m], AttrKind::kFloat});
    def.attrs.push_back({kFillIfTrue[m], AttrKind::kInt});
  }
  def.infer = &InferFusedAttention;
  // Made by a plan pass from steps that are not folded either.
  def.foldable = false;
  return registry.Register(std::move(def));
}

}  // namespace grove::ir
