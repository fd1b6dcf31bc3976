// Parameters of jit/kernels/gemm_tiled.cuh.
#ifndef GROVE_JIT_KERNELS_GEMM_TILED_PARAMS_H_
#define GROVE_JIT_KERNELS_GEMM_TILED_PARAMS_H_

#include "jit/kernels/types.h"

namespace grove_k {

// The block of the tiled GEMM: kGemmTileThreads threads (8 x 8), each
// computing 4 x 4 elements of a kGemmTile x kGemmTile tile of C, stepping
// through K kGemmTileK at a time.
enum { kGemmTile = 32, kGemmTileK = 16, kGemmTileThreads = 64 };

// C = epilogue(alpha * op(A) op(B) + beta * C + bias), per batch, as
// cuda::GemmDesc: op(A) is [m, k] (A[i * lda + p], or A[p * lda + i] with
// trans_a), op(B) [k, n] (B[p * ldb + j], or B[j * ldb + p] with trans_b),
// C [m, n] with row stride ldc; batch b offsets A, B and C by b * stride_*.
// bias (null for none) is a row of n added to every row. Products
// accumulate in f32, in order of p. math (f32 data only): 0 exact, 1 tf32,
// 2 bf16, 3 f16: A and B rounded so before the multiply (GemmDesc::Math).
// epilogue: 0 none, 1 ReLU, 2 GELU (erf). Every size and stride is read
// when the kernel runs, so one launch (a CUDA graph's node) serves any
// problem whose buffers it may touch.
struct GemmTiledParams {
  const void* a;
  const void* b;
  void* c;
  const void* bias;
  i64 m, n, k;
  i64 lda, ldb, ldc;
  i64 batch, stride_a, stride_b, stride_c;
  float alpha, beta;
  int trans_a, trans_b;
  int math, epilogue;
};

}  // namespace grove_k

#endif  // GROVE_JIT_KERNELS_GEMM_TILED_PARAMS_H_
