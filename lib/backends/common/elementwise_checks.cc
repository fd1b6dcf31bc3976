#include "lib/backends/common/elementwise_checks.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "lib/backends/common/kernel_checks.h"
#include "lib/ir/sym_dim.h"

namespace grove::backends {

absl::Status CheckVariadicInputs(const ir::KernelContext& ctx) {
  const int n = ctx.num_inputs();
  if (n == 0) return ctx.Error("expected at least one input; got none");
  std::vector<ir::SymShape> shapes;
  for (int k = 0; k < n; ++k) {
    if (!ctx.has_input(k)) return ctx.Error(absl::StrCat("input ", k, " (data_", k, ") is missing"));
    if (k > 0) {
      if (absl::Status s = CheckSameInputDTypes(ctx, 0, k); !s.ok()) return s;
    }
    shapes.push_back(ir::FromConcrete(ctx.input(k).shape));
  }
  // Each input is checked against the output by the kernel; this checks
  // that the output is no larger than all of them together.
  absl::StatusOr<ir::SymShape> joint = ir::BroadcastShapes(shapes);
  if (!joint.ok()) return ctx.Error(absl::StrCat("inputs do not broadcast: ", joint.status().message()));
  return CheckOutputLike(ctx, ctx.input(0).dtype, ir::ToConcrete(*joint));
}

absl::Status CheckCastOutput(const ir::KernelContext& ctx) {
  const TensorView& in = ctx.input(0);
  const TensorView& out = ctx.output(0);
  const int64_t to = ctx.attrs().GetInt("to", 0);
  if (static_cast<int64_t>(out.dtype) != to) {
    return ctx.Error(
        absl::StrCat("output 0 was allocated as ", DTypeName(out.dtype), " but attribute 'to' is ", to));
  }
  return CheckOutputLike(ctx, out.dtype, in.shape);
}

absl::Status CheckNotInputs(const ir::KernelContext& ctx) {
  const TensorView& x = ctx.input(0);
  if (x.dtype != DType::kBool) {
    return ctx.Error(absl::StrCat("input 0 (X) has dtype ", DTypeName(x.dtype), "; expected bool"));
  }
  return CheckOutputLike(ctx, DType::kBool, x.shape);
}

absl::Status CheckLogicalInputs(const ir::KernelContext& ctx) {
  for (int i = 0; i < 2; ++i) {
    if (ctx.input(i).dtype != DType::kBool) {
      return ctx.Error(absl::StrCat("input ", i, i == 0 ? " (A)" : " (B)", " has dtype ", DTypeName(ctx.input(i).dtype),
                                    "; expected bool"));
    }
  }
  return CheckOutputDType(ctx, DType::kBool);
}

absl::Status CheckWhereInputs(const ir::KernelContext& ctx) {
  if (ctx.input(0).dtype != DType::kBool) {
    return ctx.Error(
        absl::StrCat("input 0 (condition) has dtype ", DTypeName(ctx.input(0).dtype), "; expected bool"));
  }
  if (absl::Status s = CheckSameInputDTypes(ctx, 1, 2); !s.ok()) return s;
  return CheckOutputDType(ctx, ctx.input(1).dtype);
}

}  // namespace grove::backends
