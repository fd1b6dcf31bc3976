// Run-time shape resolution of MatMul and Gemm, shared by the CPU and CUDA
// kernels: the dtype and shape checks (with the same error messages on both
// backends) and the resulting M, N, K and broadcast batch dims.
#ifndef GROVE_LIB_BACKENDS_COMMON_MATMUL_SHAPES_H_
#define GROVE_LIB_BACKENDS_COMMON_MATMUL_SHAPES_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "lib/ir/op_registry.h"

namespace grove::backends {

// MatMul of A [..., M, K] by B [..., K, N] (rank-1 operands as in numpy).
struct MatMulShape {
  int64_t m = 0, n = 0, k = 0;
  // Broadcast batch dims of Y, and those of A and B padded with 1s to the
  // same rank.
  std::vector<int64_t> batch, a_batch, b_batch;
};

// Checks inputs 0, 1 and output 0 of a MatMul node and resolves its dims.
absl::StatusOr<MatMulShape> ResolveMatMul(const ir::KernelContext& ctx);

// Gemm: Y [M, N] = alpha * op(A) op(B) + beta * C, C broadcast from [cm, cn].
struct GemmShape {
  bool trans_a = false, trans_b = false;
  double alpha = 1.0, beta = 1.0;
  int64_t m = 0, n = 0, k = 0;
  int64_t cm = 1, cn = 1;
};

// Checks the inputs, attributes and output 0 of a Gemm node.
absl::StatusOr<GemmShape> ResolveGemm(const ir::KernelContext& ctx);

}  // namespace grove::backends

#endif  // GROVE_LIB_BACKENDS_COMMON_MATMUL_SHAPES_H_
