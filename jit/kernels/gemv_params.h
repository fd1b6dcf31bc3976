// Parameters of jit/kernels/gemv.cuh.
#ifndef GROVE_JIT_KERNELS_GEMV_PARAMS_H_
#define GROVE_JIT_KERNELS_GEMV_PARAMS_H_

#include "jit/kernels/types.h"

namespace grove_k {

// The most threads a gemv block may have (its shared partial sums).
enum { kGemvMaxThreads = 256 };

// C = alpha * op(A) op(B) + beta * C + bias, per batch, as cuda::GemmDesc:
// op(A) is [m, k] (A[i * lda + p], or A[p * lda + i] with trans_a), op(B)
// [k, n] (B[p * ldb + j], or B[j * ldb + p] with trans_b), C [m, n] with
// row stride ldc; batch b offsets A, B and C by b * stride_*. bias (null
// for none) is a row of n added to every row. Products accumulate in f32.
struct GemvParams {
  const void* a;
  const void* b;
  void* c;
  const void* bias;
  i64 m, n, k;
  i64 lda, ldb, ldc;
  i64 batch, stride_a, stride_b, stride_c;
  float alpha, beta;
  int trans_a, trans_b;
};

}  // namespace grove_k

#endif  // GROVE_JIT_KERNELS_GEMV_PARAMS_H_
