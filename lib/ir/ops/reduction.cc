// Reduction op definitions (ONNX opset 13-18): ReduceSum, ReduceMean and
// Softmax. The axes of a Reduce* op come from the `axes` attribute (opset 13
// ReduceMean and earlier) or from the optional second input (opset 13
// ReduceSum, opset 18 ReduceMean), which must then be known at plan time.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "lib/ir/ops/input_checks.h"
#include "lib/ir/ops/ops.h"
#include "lib/ir/ops/reduce_axes.h"

namespace grove::ir {
namespace {

absl::Status InferReduceSum(ShapeContext& ctx) {
  return InferReduceShape(ctx, {DType::kF32, DType::kF64, DType::kI32, DType::kI64});
}

absl::Status InferReduceMean(ShapeContext& ctx) { return InferReduceShape(ctx, {DType::kF32, DType::kF64}); }

absl::Status InferSoftmax(ShapeContext& ctx) {
  if (absl::Status s = CheckInputDType(ctx, 0, "input", {DType::kF32, DType::kF64}); !s.ok()) return s;
  if (ctx.input_rank(0) == 0) return ctx.Error("input 0 (input) is a scalar; Softmax needs rank >= 1");
  const int64_t axis = ctx.attrs().GetInt("axis", -1);
  if (absl::StatusOr<int> a = NormalizeAxis(axis, ctx.input_rank(0)); !a.ok()) {
    return ctx.Error(absl::StrCat("attribute 'axis': ", a.status().message()));
  }
  ctx.SetOutput(0, ctx.input_dtype(0), ctx.input_shape(0));
  return absl::OkStatus();
}

}  // namespace

absl::Status RegisterReductionOps(OpRegistry& registry) {
  if (absl::Status s = registry.Register(ReduceOpDef("ReduceSum", &InferReduceSum)); !s.ok()) return s;
  if (absl::Status s = registry.Register(ReduceOpDef("ReduceMean", &InferReduceMean)); !s.ok()) return s;
  OpDef softmax;
  softmax.type = "Softmax";
  softmax.min_inputs = 1;
  softmax.max_inputs = 1;
  softmax.attrs = {{"axis", AttrKind::kInt}};
  softmax.infer = &InferSoftmax;
  return registry.Register(std::move(softmax));
}

}  // namespace grove::ir
