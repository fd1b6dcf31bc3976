// Reduction op definitions (ONNX opset 13-18): ReduceSum, ReduceMean and
// Softmax. The axes of a Reduce* op come from the `axes` attribute (opset 13
// ReduceMean and earlier) or from the optional second input (opset 13
// ReduceSum, opset 18 ReduceMean). When that input's value is known only at
// run time the output dims are inferred again when the op runs; with
// keepdims=0 the output rank comes from the input's length.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "lib/ir/ops/input_checks.h"
#include "lib/ir/ops/ops.h"
#include "lib/ir/ops/reduce_axes.h"
#include "lib/ir/ops/softmax_shape.h"

namespace grove::ir {
namespace {

absl::Status InferReduceSum(ShapeContext& ctx) {
  return InferReduceShape(ctx, {DType::kF32, DType::kF64, DType::kI32, DType::kI64});
}

absl::Status InferReduceMean(ShapeContext& ctx) { return InferReduceShape(ctx, {DType::kF32, DType::kF64}); }

}  // namespace

absl::Status RegisterReductionOps(OpRegistry& registry) {
  if (absl::Status s = registry.Register(ReduceOpDef("ReduceSum", &InferReduceSum)); !s.ok()) return s;
  if (absl::Status s = registry.Register(ReduceOpDef("ReduceMean", &InferReduceMean)); !s.ok()) return s;
  OpDef softmax;
  softmax.type = "Softmax";
  softmax.min_inputs = 1;
  softmax.max_inputs = 1;
  softmax.attrs = {{"axis", AttrKind::kInt}};
  softmax.infer = &InferSoftmaxFamily;
  return registry.Register(std::move(softmax));
}

}  // namespace grove::ir
