// The reference CPU backend: kernels registered per op group, on host views.
// Correct first; GEMM-like ops call a BLAS (OpenBLAS).
#ifndef GROVE_LIB_BACKENDS_CPU_CPU_KERNELS_H_
#define GROVE_LIB_BACKENDS_CPU_CPU_KERNELS_H_

#include "absl/status/status.h"
#include "lib/ir/op_registry.h"

namespace grove::cpu {

absl::Status RegisterElementwiseKernels(ir::OpRegistry& registry);
absl::Status RegisterReductionKernels(ir::OpRegistry& registry);
absl::Status RegisterLinalgKernels(ir::OpRegistry& registry);
absl::Status RegisterShapeKernels(ir::OpRegistry& registry);
absl::Status RegisterControlFlowKernels(ir::OpRegistry& registry);
absl::Status RegisterMathKernels(ir::OpRegistry& registry);
absl::Status RegisterNnKernels(ir::OpRegistry& registry);
absl::Status RegisterNormKernels(ir::OpRegistry& registry);
absl::Status RegisterReduceSearchKernels(ir::OpRegistry& registry);
absl::Status RegisterLayoutKernels(ir::OpRegistry& registry);
absl::Status RegisterRecurrentKernels(ir::OpRegistry& registry);
absl::Status RegisterIndexingKernels(ir::OpRegistry& registry);
absl::Status RegisterLossKernels(ir::OpRegistry& registry);
absl::Status RegisterVisionKernels(ir::OpRegistry& registry);
absl::Status RegisterQuantizationKernels(ir::OpRegistry& registry);
absl::Status RegisterTextKernels(ir::OpRegistry& registry);
absl::Status RegisterSequenceKernels(ir::OpRegistry& registry);
absl::Status RegisterAttentionKernels(ir::OpRegistry& registry);

}  // namespace grove::cpu

#endif  // GROVE_LIB_BACKENDS_CPU_CPU_KERNELS_H_
