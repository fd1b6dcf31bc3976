// The CUDA backend's op kernels, registered per op group on top of the CPU
// ones (an op without a CUDA kernel runs on the CPU with copies).
#ifndef GROVE_LIB_BACKENDS_CUDA_CUDA_KERNELS_H_
#define GROVE_LIB_BACKENDS_CUDA_CUDA_KERNELS_H_

#include "absl/status/status.h"
#include "grove/grove.h"
#include "lib/ir/op_registry.h"

namespace grove::cuda {

// The dtypes the CUDA kernels are instantiated for (the type lists of
// jit/kernels/kernels.cmake): f32 f64 f16 bf16 i64 i32 i8 u8 bool. A step
// with an input or output of another dtype (i16 u16 u32 u64, and strings,
// whose bytes live on the host) runs its CPU kernel with copies, as an op
// without a CUDA kernel does.
inline bool CudaKernelsCoverDType(DType dtype) {
  if (static_cast<int>(dtype) >= 64) return false;  // a sequence or optional (lib/ir/value_type.h)
  switch (dtype) {
    case DType::kI16: case DType::kU16: case DType::kU32: case DType::kU64: case DType::kString:
    case DType::kUnknown: return false;
    default: return true;
  }
}

absl::Status RegisterCudaControlFlowKernels(ir::OpRegistry& registry);
absl::Status RegisterCudaShapeKernels(ir::OpRegistry& registry);
absl::Status RegisterCudaLayoutKernels(ir::OpRegistry& registry);
absl::Status RegisterCudaLinalgKernels(ir::OpRegistry& registry);
absl::Status RegisterCudaNnKernels(ir::OpRegistry& registry);
absl::Status RegisterCudaRecurrentKernels(ir::OpRegistry& registry);
absl::Status RegisterCudaReductionKernels(ir::OpRegistry& registry);
absl::Status RegisterCudaNormKernels(ir::OpRegistry& registry);
absl::Status RegisterCudaElementwiseKernels(ir::OpRegistry& registry);
absl::Status RegisterCudaAttentionKernels(ir::OpRegistry& registry);

// How FusedAttention runs on CUDA (lib/backends/cuda/attention.cc): kAuto
// picks per step, kKernel always the fused kernel, kGemm cuBLASLt's products
// around a Softmax kernel wherever they fold into one batched GEMM each
// (not in a bucketed plan). Read when a step is prepared; from
// GROVE_CUDA_ATTENTION=auto|kernel|gemm in the environment at first use,
// or set here (tests, gpu_bench).
enum class AttentionForm { kAuto, kKernel, kGemm };
void SetAttentionForm(AttentionForm form);
AttentionForm GetAttentionForm();

// Whether the kernel form's tiled kernel runs on tensor cores for f16 and
// bf16 on sm_80 and later (jit/kernels/attention_mma.cuh; default on,
// GROVE_CUDA_ATTENTION_TC=0 in the environment at first use, or set here:
// then the CUDA-core tiled kernel). Read when a step is prepared.
void SetAttentionTensorCores(bool on);
bool AttentionTensorCores();

}  // namespace grove::cuda

#endif  // GROVE_LIB_BACKENDS_CUDA_CUDA_KERNELS_H_
