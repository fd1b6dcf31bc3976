// Math op definitions (ONNX opset 11-17, Gelu as opset 20 defines it):
// unary functions and activations, Pow with mixed base/exponent dtypes, Clip
// in both of its forms (opset 6 min/max attributes, opset 11+ min/max
// inputs), the variadic Min Max Sum Mean, GreaterOrEqual LessOrEqual, the
// boolean Not And Or Xor, and CastLike. Everything that takes two or more
// tensors broadcasts like numpy.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "lib/ir/ops/input_checks.h"
#include "lib/ir/ops/ops.h"

namespace grove::ir {
namespace {

constexpr DType kSignedDTypes[] = {DType::kF32, DType::kF64, DType::kF16, DType::kBF16,
                                   DType::kI64, DType::kI32, DType::kI16, DType::kI8};
constexpr DType kPowBaseDTypes[] = {DType::kF32, DType::kF64, DType::kF16, DType::kBF16, DType::kI32, DType::kI64};

absl::Status InferUnary(ShapeContext& ctx, absl::string_view name, absl::Span<const DType> allowed) {
  if (absl::Status s = CheckInputDType(ctx, 0, name, allowed); !s.ok()) return s;
  ctx.SetOutput(0, ctx.input_dtype(0), ctx.input_shape(0));
  return absl::OkStatus();
}

absl::Status InferFloatUnary(ShapeContext& ctx) { return InferUnary(ctx, "X", kFloatDTypes); }
absl::Status InferSignedUnary(ShapeContext& ctx) { return InferUnary(ctx, "X", kSignedDTypes); }
absl::Status InferNumericUnary(ShapeContext& ctx) { return InferUnary(ctx, "X", kNumericDTypes); }
absl::Status InferNot(ShapeContext& ctx) { return InferUnary(ctx, "X", {DType::kBool}); }

absl::Status InferGelu(ShapeContext& ctx) {
  const std::string approximate = ctx.attrs().GetString("approximate", "none");
  if (approximate != "none" && approximate != "tanh") {
    return ctx.Error(absl::StrCat("attribute 'approximate' is '", approximate, "'; expected 'none' or 'tanh'"));
  }
  return InferFloatUnary(ctx);
}

absl::Status InferOrderedCompare(ShapeContext& ctx) { return InferBroadcastBinary(ctx, kNumericDTypes, DType::kBool); }
absl::Status InferLogical(ShapeContext& ctx) { return InferBroadcastBinary(ctx, {DType::kBool}, DType::kBool); }

// Opset 15: the exponent may have any numeric dtype; the result has the
// base's.
absl::Status InferPow(ShapeContext& ctx) {
  if (absl::Status s = CheckInputDType(ctx, 0, "X", kPowBaseDTypes); !s.ok()) return s;
  if (absl::Status s = CheckInputDType(ctx, 1, "Y", kNumericDTypes); !s.ok()) return s;
  SymShape shape;
  if (absl::Status s = BroadcastInputs(ctx, {"X", "Y"}, &shape); !s.ok()) return s;
  ctx.SetOutput(0, ctx.input_dtype(0), std::move(shape));
  return absl::OkStatus();
}

// Min Max Sum Mean: one or more inputs of one dtype, all broadcast together.
absl::Status InferVariadic(ShapeContext& ctx, absl::Span<const DType> allowed) {
  if (ctx.num_inputs() == 0) return ctx.Error("expected at least one input; got none");
  std::vector<std::string> names;
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    names.push_back(absl::StrCat("data_", i));
    if (absl::Status s = CheckInputDType(ctx, i, names.back(), allowed); !s.ok()) return s;
    if (i > 0) {
      if (absl::Status s = CheckSameDType(ctx, 0, names[0], i, names[i]); !s.ok()) return s;
    }
  }
  std::vector<absl::string_view> views(names.begin(), names.end());
  SymShape shape;
  if (absl::Status s = BroadcastInputs(ctx, views, &shape); !s.ok()) return s;
  ctx.SetOutput(0, ctx.input_dtype(0), std::move(shape));
  return absl::OkStatus();
}

absl::Status InferMinMax(ShapeContext& ctx) { return InferVariadic(ctx, kNumericDTypes); }
absl::Status InferSumMean(ShapeContext& ctx) { return InferVariadic(ctx, kFloatDTypes); }

// Opset 11+ takes the bounds as optional scalar inputs, opset 6 as float
// attributes; a node has one form or the other for each bound.
absl::Status InferClip(ShapeContext& ctx) {
  if (absl::Status s = CheckInputDType(ctx, 0, "input", kNumericDTypes); !s.ok()) return s;
  constexpr absl::string_view kBounds[] = {"min", "max"};
  for (int i = 1; i <= 2; ++i) {
    const absl::string_view name = kBounds[i - 1];
    if (!ctx.has_input(i)) continue;
    if (ctx.attrs().Has(name)) {
      return ctx.Error(absl::StrCat("'", name, "' is given both as an attribute (opset 6) and as ", InputName(i, name),
                                    " (opset 11); give one"));
    }
    if (absl::Status s = CheckInputPresent(ctx, i, name); !s.ok()) return s;
    if (absl::Status s = CheckSameDType(ctx, 0, "input", i, name); !s.ok()) return s;
    // ONNX asks for a scalar; exporters also write [1].
    for (const SymDim& d : ctx.input_shape(i)) {
      if (d.is_const() && d.value() != 1) {
        return ctx.Error(absl::StrCat(InputName(i, name), " must hold one element (a scalar); got shape ",
                                      ShapeString(ctx, ctx.input_shape(i))));
      }
    }
  }
  ctx.SetOutput(0, ctx.input_dtype(0), ctx.input_shape(0));
  return absl::OkStatus();
}

absl::Status InferCastLike(ShapeContext& ctx) {
  if (absl::Status s = CheckInputPresent(ctx, 0, "input"); !s.ok()) return s;
  if (absl::Status s = CheckInputPresent(ctx, 1, "target_type"); !s.ok()) return s;
  ctx.SetOutput(0, ctx.input_dtype(1), ctx.input_shape(0));
  return absl::OkStatus();
}

OpDef Def(std::string type, int min_inputs, int max_inputs, ShapeFn infer, std::vector<AttrSpec> attrs = {}) {
  OpDef def;
  def.type = std::move(type);
  def.min_inputs = min_inputs;
  def.max_inputs = max_inputs;
  def.attrs = std::move(attrs);
  def.infer = infer;
  return def;
}

}  // namespace

absl::Status RegisterMathOps(OpRegistry& registry) {
  std::vector<OpDef> defs;
  for (const char* type : {"Sqrt", "Exp", "Log", "Reciprocal", "Softplus", "HardSwish", "Floor", "Ceil", "Round"}) {
    defs.push_back(Def(type, 1, 1, &InferFloatUnary));
  }
  defs.push_back(Def("Erf", 1, 1, &InferNumericUnary));
  defs.push_back(Def("Neg", 1, 1, &InferSignedUnary));
  defs.push_back(Def("Abs", 1, 1, &InferNumericUnary));
  defs.push_back(Def("LeakyRelu", 1, 1, &InferFloatUnary, {{"alpha", AttrKind::kFloat}}));
  defs.push_back(Def("Elu", 1, 1, &InferFloatUnary, {{"alpha", AttrKind::kFloat}}));
  defs.push_back(Def("HardSigmoid", 1, 1, &InferFloatUnary, {{"alpha", AttrKind::kFloat}, {"beta", AttrKind::kFloat}}));
  defs.push_back(Def("Gelu", 1, 1, &InferGelu, {{"approximate", AttrKind::kString}}));
  defs.push_back(Def("Pow", 2, 2, &InferPow));
  defs.push_back(Def("Clip", 1, 3, &InferClip, {{"min", AttrKind::kFloat}, {"max", AttrKind::kFloat}}));
  for (const char* type : {"Min", "Max"}) defs.push_back(Def(type, 1, -1, &InferMinMax));
  for (const char* type : {"Sum", "Mean"}) defs.push_back(Def(type, 1, -1, &InferSumMean));
  for (const char* type : {"GreaterOrEqual", "LessOrEqual"}) defs.push_back(Def(type, 2, 2, &InferOrderedCompare));
  defs.push_back(Def("Not", 1, 1, &InferNot));
  for (const char* type : {"And", "Or", "Xor"}) defs.push_back(Def(type, 2, 2, &InferLogical));
  // 'saturate' (opset 19) only changes casts to float8, which grove lacks.
  defs.push_back(Def("CastLike", 2, 2, &InferCastLike, {{"saturate", AttrKind::kInt}}));
  for (OpDef& def : defs) {
    if (absl::Status s = registry.Register(std::move(def)); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace grove::ir
