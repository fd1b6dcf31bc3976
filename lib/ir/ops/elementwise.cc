// Elementwise op definitions (ONNX opset 13-17): arithmetic, activations,
// comparisons, Where, Cast and Identity. Binary ops broadcast like numpy;
// symbolic dims that cannot be proven to broadcast are checked by the kernel.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "lib/ir/ops/input_checks.h"
#include "lib/ir/ops/ops.h"

namespace grove::ir {
namespace {

absl::Status InferArithmetic(ShapeContext& ctx) { return InferBroadcastBinary(ctx, kNumericDTypes, DType::kUnknown); }

absl::Status InferOrderedCompare(ShapeContext& ctx) { return InferBroadcastBinary(ctx, kNumericDTypes, DType::kBool); }

// Opset 19 adds strings, compared by their bytes.
absl::Status InferEqual(ShapeContext& ctx) {
  return InferBroadcastBinary(ctx, kAllDTypesAndString, DType::kBool);
}

absl::Status InferFloatUnary(ShapeContext& ctx) {
  if (absl::Status s = CheckInputDType(ctx, 0, "X", kFloatDTypes); !s.ok()) return s;
  ctx.SetOutput(0, ctx.input_dtype(0), ctx.input_shape(0));
  return absl::OkStatus();
}

absl::Status InferWhere(ShapeContext& ctx) {
  if (absl::Status s = CheckInputDType(ctx, 0, "condition", {DType::kBool}); !s.ok()) return s;
  if (absl::Status s = CheckInputPresent(ctx, 1, "X"); !s.ok()) return s;
  if (absl::Status s = CheckInputPresent(ctx, 2, "Y"); !s.ok()) return s;
  if (absl::Status s = CheckSameDType(ctx, 1, "X", 2, "Y"); !s.ok()) return s;
  SymShape shape;
  if (absl::Status s = BroadcastInputs(ctx, {"condition", "X", "Y"}, &shape); !s.ok()) return s;
  ctx.SetOutput(0, ctx.input_dtype(1), std::move(shape));
  return absl::OkStatus();
}

absl::Status InferCast(ShapeContext& ctx) {
  if (absl::Status s = CheckInputPresent(ctx, 0, "input"); !s.ok()) return s;
  if (!ctx.attrs().Has("to")) return ctx.Error("attribute 'to' (the target dtype) is required");
  const int64_t to = ctx.attrs().GetInt("to", 0);
  if (to < static_cast<int64_t>(DType::kF32) || to > static_cast<int64_t>(DType::kString)) {
    return ctx.Error(absl::StrCat("attribute 'to' is ", to,
                                  "; expected a grove dtype: 1 (f32), 2 (f64), 3 (f16), 4 (bf16), 5 (i64), "
                                  "6 (i32), 7 (i8), 8 (u8), 9 (bool), 10 (i16), 11 (u16), 12 (u32), 13 (u64) "
                                  "or 14 (string)"));
  }
  ctx.SetOutput(0, static_cast<DType>(to), ctx.input_shape(0));
  return absl::OkStatus();
}

absl::Status InferIdentity(ShapeContext& ctx) {
  if (absl::Status s = CheckInputPresent(ctx, 0, "input"); !s.ok()) return s;
  if (!ctx.input(0).rank_known) {
    ctx.SetOutputUnknownRank(0, ctx.input_dtype(0));  // a sequence or optional of unknown rank
  } else {
    ctx.SetOutput(0, ctx.input_dtype(0), ctx.input_shape(0));
  }
  return absl::OkStatus();
}

OpDef Def(std::string type, int num_inputs, ShapeFn infer, std::vector<AttrSpec> attrs = {}) {
  OpDef def;
  def.type = std::move(type);
  def.min_inputs = num_inputs;
  def.max_inputs = num_inputs;
  def.attrs = std::move(attrs);
  def.infer = infer;
  return def;
}

}  // namespace

absl::Status RegisterElementwiseOps(OpRegistry& registry) {
  std::vector<OpDef> defs;
  for (const char* type : {"Add", "Sub", "Mul", "Div"}) defs.push_back(Def(type, 2, &InferArithmetic));
  for (const char* type : {"Relu", "Sigmoid", "Tanh"}) defs.push_back(Def(type, 1, &InferFloatUnary));
  for (const char* type : {"Greater", "Less"}) defs.push_back(Def(type, 2, &InferOrderedCompare));
  defs.push_back(Def("Equal", 2, &InferEqual));
  defs.push_back(Def("Where", 3, &InferWhere));
  // 'saturate' (opset 19) only changes casts to float8, which grove lacks.
  defs.push_back(Def("Cast", 1, &InferCast, {{"to", AttrKind::kInt, /*required=*/true}, {"saturate", AttrKind::kInt}}));
  defs.push_back(Def("Identity", 1, &InferIdentity));
  for (OpDef& def : defs) {
    if (absl::Status s = registry.Register(std::move(def)); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace grove::ir
