#include "lib/backends/common/reduce_checks.h"

#include "absl/strings/str_cat.h"
#include "lib/backends/common/kernel_checks.h"

namespace grove::backends {

absl::StatusOr<ArgReduceShape> ResolveArgReduce(const ir::KernelContext& ctx) {
  const TensorView& x = ctx.input(0);
  const int rank = static_cast<int>(x.shape.size());
  if (rank == 0) return ctx.Error("input 0 (data) is a scalar; an arg reduction needs rank >= 1");
  absl::StatusOr<int> axis = ir::NormalizeAxis(ctx.attrs().GetInt("axis", 0), rank);
  if (!axis.ok()) return ctx.Error(absl::StrCat("attribute 'axis': ", axis.status().message()));
  const bool keepdims = ctx.attrs().GetInt("keepdims", 1) != 0;
  ArgReduceShape r;
  r.axis = *axis;
  r.split = ir::SplitAt(x.shape, r.axis);
  if (r.split.n == 0) {
    return ctx.Error(absl::StrCat("input 0 (data) has no elements along axis ", r.axis, " (shape ", ShapeStr(x.shape),
                                  "), so there is no index to give"));
  }
  r.out_shape = x.shape;
  if (keepdims) {
    r.out_shape[r.axis] = 1;
  } else {
    r.out_shape.erase(r.out_shape.begin() + r.axis);
  }
  return r;
}

}  // namespace grove::backends
