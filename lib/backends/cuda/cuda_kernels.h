// The CUDA backend's op kernels, registered per op group (see
// lib/backends/cuda/exec_context.h for what a kernel sees).
#ifndef GROVE_LIB_BACKENDS_CUDA_CUDA_KERNELS_H_
#define GROVE_LIB_BACKENDS_CUDA_CUDA_KERNELS_H_

#include "absl/status/status.h"
#include "lib/ir/op_registry.h"

namespace grove::cuda {

absl::Status RegisterCudaElementwiseKernels(ir::OpRegistry& registry);

}  // namespace grove::cuda

#endif  // GROVE_LIB_BACKENDS_CUDA_CUDA_KERNELS_H_
