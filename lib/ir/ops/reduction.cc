// Reduction op definitions (ONNX opset 13-18): ReduceSum and ReduceMean
// (Softmax is the norm group's, norm.cc). The axes of a Reduce* op come from
// the `axes` attribute (opset 13 ReduceMean and earlier) or from the optional
// second input (opset 13 ReduceSum, opset 18 ReduceMean). When that input's
// value is known only at run time the output dims are inferred again when the
// op runs; with keepdims=0 the output rank comes from the input's length.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "lib/ir/ops/input_checks.h"
#include "lib/ir/ops/ops.h"
#include "lib/ir/ops/reduce_axes.h"

namespace grove::ir {
namespace {

absl::Status InferReduceSum(ShapeContext& ctx) {
  return InferReduceShape(ctx, {DType::kF32, DType::kF64, DType::kF16, DType::kBF16, DType::kI32, DType::kI64});
}

absl::Status InferReduceMean(ShapeContext& ctx) { return InferReduceShape(ctx, kFloatDTypes); }

}  // namespace

absl::Status RegisterReductionOps(OpRegistry& registry) {
  if (absl::Status s = registry.Register(ReduceOpDef("ReduceSum", &InferReduceSum)); !s.ok()) return s;
  return registry.Register(ReduceOpDef("ReduceMean", &InferReduceMean));
}

}  // namespace grove::ir
