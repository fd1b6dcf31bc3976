// Math op definitions (ONNX opset 11-17, Gelu as opset 20 defines it):
// unary functions and activations, Pow with mixed base/exponent dtypes, Clip
// in both of its forms (opset 6 min/max attributes, opset 11+ min/max
// inputs), the variadic Min Max Sum Mean, GreaterOrEqual LessOrEqual, the
// boolean Not And Or Xor, CastLike, the trigonometric and hyperbolic
// functions, Softsign Selu Celu ThresholdedRelu Shrink Sign IsNaN IsInf,
// PRelu, Mod, BitShift, Dropout (inference only) and the window generators
// HannWindow HammingWindow BlackmanWindow (opset 17). Everything that takes
// two or more tensors broadcasts like numpy, except PRelu's slope, which
// broadcasts to X.
#include <cmath>
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

// ---------------------------------------------------------------------------
// Trigonometric and hyperbolic functions, the activations Softsign Selu Celu
// ThresholdedRelu Shrink, Sign, IsNaN IsInf, PRelu, Mod, BitShift, Dropout
// (inference) and the window generators.
// ---------------------------------------------------------------------------

constexpr DType kPReluDTypes[] = {DType::kF32, DType::kF64, DType::kF16, DType::kBF16, DType::kI32, DType::kI64};
// ONNX BitShift (opset 11): unsigned integers.
constexpr DType kBitShiftDTypes[] = {DType::kU64, DType::kU32, DType::kU16, DType::kU8};
constexpr DType kWindowSizeDTypes[] = {DType::kI32, DType::kI64};

absl::Status InferFloatPredicate(ShapeContext& ctx) {
  if (absl::Status s = CheckInputDType(ctx, 0, "X", kFloatDTypes); !s.ok()) return s;
  ctx.SetOutput(0, DType::kBool, ctx.input_shape(0));
  return absl::OkStatus();
}

absl::Status InferIsInf(ShapeContext& ctx) {
  bool flag = false;
  if (absl::Status s = ReadBoolAttr(ctx, "detect_negative", 1, &flag); !s.ok()) return s;
  if (absl::Status s = ReadBoolAttr(ctx, "detect_positive", 1, &flag); !s.ok()) return s;
  return InferFloatPredicate(ctx);
}

// Celu divides by alpha.
absl::Status InferCelu(ShapeContext& ctx) {
  const double alpha = ctx.attrs().GetFloat("alpha", 1.0);
  if (alpha == 0.0 || !std::isfinite(alpha)) {
    return ctx.Error(absl::StrCat("attribute 'alpha' is ", alpha, "; expected a finite non-zero value"));
  }
  return InferFloatUnary(ctx);
}

absl::Status InferShrink(ShapeContext& ctx) { return InferUnary(ctx, "input", kNumericDTypes); }
absl::Status InferSign(ShapeContext& ctx) { return InferUnary(ctx, "input", kNumericDTypes); }

// slope broadcasts to X (unidirectionally): the output has X's shape.
absl::Status InferPRelu(ShapeContext& ctx) {
  if (absl::Status s = CheckInputDType(ctx, 0, "X", kPReluDTypes); !s.ok()) return s;
  if (absl::Status s = CheckInputDType(ctx, 1, "slope", kPReluDTypes); !s.ok()) return s;
  if (absl::Status s = CheckSameDType(ctx, 0, "X", 1, "slope"); !s.ok()) return s;
  const SymShape& x = ctx.input_shape(0);
  const SymShape& slope = ctx.input_shape(1);
  bool fits = slope.size() <= x.size();
  for (size_t k = 0; fits && k < slope.size(); ++k) {
    const SymDim& ds = slope[slope.size() - 1 - k];
    const SymDim& dx = x[x.size() - 1 - k];
    // Symbolic dims are checked by the kernel on the concrete shapes.
    if (ds.is_const() && ds.value() != 1 && dx.is_const() && ds.value() != dx.value()) fits = false;
  }
  if (!fits) {
    return ctx.Error(absl::StrCat(InputName(1, "slope"), " ", ShapeString(ctx, slope), " does not broadcast to ",
                                  InputName(0, "X"), " ", ShapeString(ctx, x)));
  }
  ctx.SetOutput(0, ctx.input_dtype(0), x);
  return absl::OkStatus();
}

absl::Status InferMod(ShapeContext& ctx) {
  bool fmod = false;
  if (absl::Status s = ReadBoolAttr(ctx, "fmod", 0, &fmod); !s.ok()) return s;
  return InferBroadcastBinary(ctx, kNumericDTypes, DType::kUnknown);
}

absl::Status InferBitShift(ShapeContext& ctx) {
  if (!ctx.attrs().Has("direction")) return ctx.Error("attribute 'direction' ('LEFT' or 'RIGHT') is required");
  const std::string direction = ctx.attrs().GetString("direction", "");
  if (direction != "LEFT" && direction != "RIGHT") {
    return ctx.Error(absl::StrCat("attribute 'direction' is '", direction, "'; expected 'LEFT' or 'RIGHT'"));
  }
  if (absl::Status s = CheckInputDType(ctx, 0, "X", kBitShiftDTypes); !s.ok()) return s;
  if (absl::Status s = CheckInputDType(ctx, 1, "Y", kBitShiftDTypes); !s.ok()) return s;
  if (absl::Status s = CheckSameDType(ctx, 0, "X", 1, "Y"); !s.ok()) return s;
  SymShape shape;
  if (absl::Status s = BroadcastInputs(ctx, {"X", "Y"}, &shape); !s.ok()) return s;
  ctx.SetOutput(0, ctx.input_dtype(0), std::move(shape));
  return absl::OkStatus();
}

// Input i holds one element: rank 0, or [1] as some exporters write it.
absl::Status CheckOneElement(const ShapeContext& ctx, int i, absl::string_view name) {
  const SymShape& shape = ctx.input_shape(i);
  bool one = shape.size() <= 1;
  for (const SymDim& d : shape) {
    if (d.is_const() && d.value() != 1) one = false;
  }
  if (!one) {
    return ctx.Error(absl::StrCat(InputName(i, name), " must hold one element (a scalar); got shape ",
                                  ShapeString(ctx, shape)));
  }
  return absl::OkStatus();
}

// Opset 10 takes the ratio as an attribute and always infers; opset 12+
// takes optional ratio and training_mode inputs. grove runs inference only:
// training_mode true with a ratio above 0 would drop elements at random.
absl::Status InferDropout(ShapeContext& ctx) {
  if (absl::Status s = CheckInputDType(ctx, 0, "data", kFloatDTypes); !s.ok()) return s;
  if (ctx.has_input(1)) {
    if (absl::Status s = CheckInputDType(ctx, 1, "ratio", kFloatDTypes); !s.ok()) return s;
    if (absl::Status s = CheckOneElement(ctx, 1, "ratio"); !s.ok()) return s;
  }
  if (ctx.has_input(2)) {
    if (absl::Status s = CheckInputDType(ctx, 2, "training_mode", {DType::kBool}); !s.ok()) return s;
    if (absl::Status s = CheckOneElement(ctx, 2, "training_mode"); !s.ok()) return s;
    const TensorView* mode = ctx.input_value(2);
    if (mode != nullptr && mode->num_elements() == 1 && mode->as<const uint8_t>()[0] != 0) {
      // The kernel decides once the ratio is known; a known one is checked now.
      const TensorView* ratio = ctx.input_value(1);
      // (f16/bf16 ratios are left to the kernel.)
      bool known = !ctx.has_input(1);
      double r = 0.5;
      if (ratio != nullptr && ratio->num_elements() == 1) {
        if (ratio->dtype == DType::kF32) {
          r = ratio->as<const float>()[0];
          known = true;
        } else if (ratio->dtype == DType::kF64) {
          r = ratio->as<const double>()[0];
          known = true;
        }
      }
      if (known && !(r >= 0 && r < 1)) {
        return ctx.Error(absl::StrCat(InputName(1, "ratio"), " is ", r, "; expected a value in [0, 1)"));
      }
      if (known && r > 0) {
        return absl::UnimplementedError(
            absl::StrCat(ctx.node().Describe(), ": training_mode is true with ratio ", r,
                         "; grove is an inference runtime and does not drop elements at random"));
      }
    }
  }
  ctx.SetOutput(0, ctx.input_dtype(0), ctx.input_shape(0));
  if (ctx.num_outputs() > 1) ctx.SetOutput(1, DType::kBool, ctx.input_shape(0));
  return absl::OkStatus();
}

// HannWindow HammingWindow BlackmanWindow: a vector of `size` elements of
// output_datatype (a grove dtype, converted from ONNX's by the importer).
absl::Status InferWindow(ShapeContext& ctx) {
  bool periodic = true;
  if (absl::Status s = ReadBoolAttr(ctx, "periodic", 1, &periodic); !s.ok()) return s;
  const int64_t out = ctx.attrs().GetInt("output_datatype", static_cast<int64_t>(DType::kF32));
  if (out < static_cast<int64_t>(DType::kF32) || out > static_cast<int64_t>(DType::kU8)) {
    return ctx.Error(absl::StrCat("attribute 'output_datatype' is ", out,
                                  "; expected a numeric grove dtype: 1 (f32), 2 (f64), 3 (f16), 4 (bf16), 5 (i64), "
                                  "6 (i32), 7 (i8) or 8 (u8)"));
  }
  const DType dtype = static_cast<DType>(out);
  if (absl::Status s = CheckInputDType(ctx, 0, "size", kWindowSizeDTypes); !s.ok()) return s;
  if (absl::Status s = CheckOneElement(ctx, 0, "size"); !s.ok()) return s;
  std::vector<int64_t> size;
  if (!ctx.InputInts(0, &size) || size.size() != 1) {
    ctx.SetOutput(0, dtype, {SymDim::Unknown()});
    return absl::OkStatus();
  }
  if (size[0] < 0) return ctx.Error(absl::StrCat(InputName(0, "size"), " is ", size[0], "; expected >= 0"));
  if (absl::StatusOr<uint64_t> b = CheckedByteSize(dtype, {size[0]}, "the window"); !b.ok()) {
    return ctx.Error(b.status().message());
  }
  ctx.SetOutput(0, dtype, {SymDim(size[0])});
  return absl::OkStatus();
}

OpDef Def(std::string type, int min_inputs, int max_inputs, ShapeFn infer, std::vector<AttrSpec> attrs = {}) {
  return MakeOpDef(std::move(type), min_inputs, max_inputs, std::move(attrs), infer);
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
  for (const char* type : {"Sin", "Cos", "Tan", "Asin", "Acos", "Atan", "Sinh", "Cosh", "Asinh", "Acosh", "Atanh",
                           "Softsign"}) {
    defs.push_back(Def(type, 1, 1, &InferFloatUnary));
  }
  defs.push_back(Def("Selu", 1, 1, &InferFloatUnary, {{"alpha", AttrKind::kFloat}, {"gamma", AttrKind::kFloat}}));
  defs.push_back(Def("Celu", 1, 1, &InferCelu, {{"alpha", AttrKind::kFloat}}));
  defs.push_back(Def("ThresholdedRelu", 1, 1, &InferFloatUnary, {{"alpha", AttrKind::kFloat}}));
  defs.push_back(Def("Shrink", 1, 1, &InferShrink, {{"bias", AttrKind::kFloat}, {"lambd", AttrKind::kFloat}}));
  defs.push_back(Def("Sign", 1, 1, &InferSign));
  defs.push_back(Def("IsNaN", 1, 1, &InferFloatPredicate));
  defs.push_back(
      Def("IsInf", 1, 1, &InferIsInf, {{"detect_negative", AttrKind::kInt}, {"detect_positive", AttrKind::kInt}}));
  defs.push_back(Def("PRelu", 2, 2, &InferPRelu));
  defs.push_back(Def("Mod", 2, 2, &InferMod, {{"fmod", AttrKind::kInt}}));
  defs.push_back(Def("BitShift", 2, 2, &InferBitShift, {{"direction", AttrKind::kString, /*required=*/true}}));
  {
    OpDef dropout = Def("Dropout", 1, 3, &InferDropout, {{"ratio", AttrKind::kFloat}, {"seed", AttrKind::kInt}});
    dropout.max_outputs = 2;
    defs.push_back(std::move(dropout));
  }
  for (const char* type : {"HannWindow", "HammingWindow", "BlackmanWindow"}) {
    defs.push_back(
        Def(type, 1, 1, &InferWindow, {{"periodic", AttrKind::kInt}, {"output_datatype", AttrKind::kInt}}));
  }
  for (OpDef& def : defs) {
    if (absl::Status s = registry.Register(std::move(def)); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace grove::ir
