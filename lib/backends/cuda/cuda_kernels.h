// The CUDA backend's op kernels, registered per op group (as
// lib/backends/cpu/cpu_kernels.h) from lib/runtime/registry.cc after the CPU
// kernels.
#ifndef GROVE_LIB_BACKENDS_CUDA_CUDA_KERNELS_H_
#define GROVE_LIB_BACKENDS_CUDA_CUDA_KERNELS_H_

#include "absl/status/status.h"
#include "lib/ir/op_registry.h"

namespace grove::cuda {

absl::Status RegisterCudaShapeKernels(ir::OpRegistry& registry);
absl::Status RegisterCudaLayoutKernels(ir::OpRegistry& registry);

}  // namespace grove::cuda

#endif  // GROVE_LIB_BACKENDS_CUDA_CUDA_KERNELS_H_
