// The CPU kernel of Resize, registered with the layout group.
#ifndef GROVE_LIB_BACKENDS_CPU_RESIZE_KERNEL_H_
#define GROVE_LIB_BACKENDS_CPU_RESIZE_KERNEL_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "lib/ir/op_registry.h"

namespace grove::cpu {

// ONNX Resize (opsets 11-19): nearest, linear and cubic, every coordinate
// transformation mode, antialias, axes and keep_aspect_ratio_policy.
// The prepare keeps the taps per dim, nearest's source offsets and
// interpolation's buffers (the workspace).
absl::StatusOr<ir::PreparedKernel> PrepareResize(const ir::KernelContext& ctx);
absl::Status ResizeKernel(ir::KernelContext& ctx);

}  // namespace grove::cpu

#endif  // GROVE_LIB_BACKENDS_CPU_RESIZE_KERNEL_H_
