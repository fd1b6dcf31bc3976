// Op definitions of the loss group (ONNX opsets 12..22):
// NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss. Both take scores
// [N, C, d1..dk] (k >= 0), class indices [N, d1..dk] and an optional
// per-class weight [C], and give the loss per sample (reduction "none") or
// its sum or (weighted) mean as a scalar. SoftmaxCrossEntropyLoss may also
// give log(softmax(scores)) along C. Whether each class index is in [0, C)
// (or ignore_index) is known only from the values, so the kernels check it.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "lib/ir/ops/input_checks.h"
#include "lib/ir/ops/loss_params.h"
#include "lib/ir/ops/ops.h"

namespace grove::ir {
namespace {

bool ConstMismatch(const SymDim& a, const SymDim& b) { return a.is_const() && b.is_const() && a.value() != b.value(); }

// Input names per op: scores, class indices, weight.
struct LossNames {
  const char* scores;
  const char* target;
  const char* weight;
};

LossNames NamesOf(const ShapeContext& ctx) {
  if (ctx.node().type == "SoftmaxCrossEntropyLoss") return {"scores", "labels", "weights"};
  return {"input", "target", "weight"};
}

absl::Status InferLoss(ShapeContext& ctx) {
  const LossNames names = NamesOf(ctx);
  absl::StatusOr<LossReduction> reduction = ReadLossReduction(ctx.attrs());
  if (!reduction.ok()) return ctx.Error(reduction.status().message());
  if (absl::Status s = CheckInputDType(ctx, 0, names.scores, kFloatDTypes); !s.ok()) return s;
  if (absl::Status s = CheckInputDType(ctx, 1, names.target, {DType::kI64, DType::kI32}); !s.ok()) return s;
  const SymShape& x = ctx.input_shape(0);
  const SymShape& t = ctx.input_shape(1);
  if (x.size() < 2) {
    return ctx.Error(absl::StrCat(InputName(0, names.scores), " has shape ", ShapeString(ctx, x),
                                  "; expected rank >= 2 (N, C, d1...)"));
  }
  // The target is the scores' shape without C.
  bool target_ok = t.size() + 1 == x.size();
  for (size_t d = 0; target_ok && d < t.size(); ++d) {
    if (ConstMismatch(t[d], x[d == 0 ? 0 : d + 1])) target_ok = false;
  }
  if (!target_ok) {
    return ctx.Error(absl::StrCat(InputName(1, names.target), " has shape ", ShapeString(ctx, t),
                                  "; expected the shape of ", InputName(0, names.scores), " ", ShapeString(ctx, x),
                                  " without dim 1 (C)"));
  }
  if (ctx.has_input(2)) {
    if (absl::Status s = CheckInputDType(ctx, 2, names.weight, {ctx.input_dtype(0)}); !s.ok()) return s;
    const SymShape& w = ctx.input_shape(2);
    if (w.size() != 1 || ConstMismatch(w[0], x[1])) {
      return ctx.Error(absl::StrCat(InputName(2, names.weight), " has shape ", ShapeString(ctx, w), "; expected [",
                                    x[1].ToString(ctx.graph().symbol_names()), "] (one weight per class)"));
    }
  }
  SymShape loss;
  if (*reduction == LossReduction::kNone) {
    // A dim known as a constant on either side is the better one to plan with.
    for (size_t d = 0; d < t.size(); ++d) {
      const SymDim& xd = x[d == 0 ? 0 : d + 1];
      loss.push_back(xd.is_const() ? xd : t[d]);
    }
  }
  ctx.SetOutput(0, ctx.input_dtype(0), std::move(loss));
  if (ctx.num_outputs() > 1) ctx.SetOutput(1, ctx.input_dtype(0), x);
  return absl::OkStatus();
}

OpDef LossDef(std::string type, int max_outputs) {
  OpDef def;
  def.type = std::move(type);
  def.min_inputs = 2;
  def.max_inputs = 3;
  def.max_outputs = max_outputs;
  def.attrs = {{"ignore_index", AttrKind::kInt}, {"reduction", AttrKind::kString}};
  def.infer = &InferLoss;
  return def;
}

}  // namespace

absl::Status RegisterLossOps(OpRegistry& registry) {
  OpDef defs[] = {LossDef("NegativeLogLikelihoodLoss", 1), LossDef("SoftmaxCrossEntropyLoss", 2)};
  for (OpDef& def : defs) {
    if (absl::Status s = registry.Register(std::move(def)); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace grove::ir
