// The CUDA backend's op kernels, registered per op group on top of the CPU
// ones (an op without a CUDA kernel runs on the CPU with copies).
#ifndef GROVE_LIB_BACKENDS_CUDA_CUDA_KERNELS_H_
#define GROVE_LIB_BACKENDS_CUDA_CUDA_KERNELS_H_

#include "absl/status/status.h"
#include "lib/ir/op_registry.h"

namespace grove::cuda {

absl::Status RegisterCudaControlFlowKernels(ir::OpRegistry& registry);
absl::Status RegisterCudaShapeKernels(ir::OpRegistry& registry);
absl::Status RegisterCudaLayoutKernels(ir::OpRegistry& registry);
absl::Status RegisterCudaLinalgKernels(ir::OpRegistry& registry);
absl::Status RegisterCudaNnKernels(ir::OpRegistry& registry);
absl::Status RegisterCudaRecurrentKernels(ir::OpRegistry& registry);
absl::Status RegisterCudaReductionKernels(ir::OpRegistry& registry);
absl::Status RegisterCudaNormKernels(ir::OpRegistry& registry);
absl::Status RegisterCudaElementwiseKernels(ir::OpRegistry& registry);

}  // namespace grove::cuda

#endif  // GROVE_LIB_BACKENDS_CUDA_CUDA_KERNELS_H_
