// Registration of the CUDA backend's op kernels (lib/backends/cuda/*.cc),
// called by the runtime's registry after the CPU kernels.
#ifndef GROVE_LIB_BACKENDS_CUDA_CUDA_KERNELS_H_
#define GROVE_LIB_BACKENDS_CUDA_CUDA_KERNELS_H_

#include "absl/status/status.h"
#include "lib/ir/op_registry.h"

namespace grove::cuda {

absl::Status RegisterCudaReductionKernels(ir::OpRegistry& registry);
absl::Status RegisterCudaNormKernels(ir::OpRegistry& registry);

}  // namespace grove::cuda

#endif  // GROVE_LIB_BACKENDS_CUDA_CUDA_KERNELS_H_
