// Run-time checks of ArgMax and ArgMin that the CPU and CUDA kernels make
// alike, with the same error messages.
#ifndef GROVE_LIB_BACKENDS_COMMON_REDUCE_CHECKS_H_
#define GROVE_LIB_BACKENDS_COMMON_REDUCE_CHECKS_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "lib/ir/op_registry.h"
#include "lib/ir/ops/reduce_axes.h"

namespace grove::backends {

// ArgMax/ArgMin over input 0: the axis made non-negative, the input split
// around it, and the output shape (the axis kept as 1 or dropped, by
// 'keepdims'). Fails for a scalar, a bad axis, or an empty axis.
struct ArgReduceShape {
  int axis = 0;
  ir::AxisSplit split;
  std::vector<int64_t> out_shape;
};
absl::StatusOr<ArgReduceShape> ResolveArgReduce(const ir::KernelContext& ctx);

}  // namespace grove::backends

#endif  // GROVE_LIB_BACKENDS_COMMON_REDUCE_CHECKS_H_
