// The shape function of Softmax and LogSoftmax (ONNX opset 13: one axis,
// default -1), shared by the reduction group and the nn group.
#ifndef GROVE_LIB_IR_OPS_SOFTMAX_SHAPE_H_
#define GROVE_LIB_IR_OPS_SOFTMAX_SHAPE_H_

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "lib/ir/ops/input_checks.h"

namespace grove::ir {

inline absl::Status InferSoftmaxFamily(ShapeContext& ctx) {
  if (absl::Status s = CheckInputDType(ctx, 0, "input", {DType::kF32, DType::kF64}); !s.ok()) return s;
  if (ctx.input_rank(0) == 0) {
    return ctx.Error(absl::StrCat("input 0 (input) is a scalar; ", ctx.node().type, " needs rank >= 1"));
  }
  const int64_t axis = ctx.attrs().GetInt("axis", -1);
  if (absl::StatusOr<int> a = NormalizeAxis(axis, ctx.input_rank(0)); !a.ok()) {
    return ctx.Error(absl::StrCat("attribute 'axis': ", a.status().message()));
  }
  ctx.SetOutput(0, ctx.input_dtype(0), ctx.input_shape(0));
  return absl::OkStatus();
}

}  // namespace grove::ir

#endif  // GROVE_LIB_IR_OPS_SOFTMAX_SHAPE_H_
