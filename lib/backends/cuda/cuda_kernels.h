// Registration of the CUDA backend's op kernels, one function per op group
// (lib/backends/cuda/<group>.cc), called by lib/runtime/registry.cc after the
// CPU registrations.
#ifndef GROVE_LIB_BACKENDS_CUDA_CUDA_KERNELS_H_
#define GROVE_LIB_BACKENDS_CUDA_CUDA_KERNELS_H_

#include "absl/status/status.h"
#include "lib/ir/op_registry.h"

namespace grove::cuda {

absl::Status RegisterCudaLinalgKernels(ir::OpRegistry& registry);
absl::Status RegisterCudaNnKernels(ir::OpRegistry& registry);
absl::Status RegisterCudaRecurrentKernels(ir::OpRegistry& registry);

}  // namespace grove::cuda

#endif  // GROVE_LIB_BACKENDS_CUDA_CUDA_KERNELS_H_
