// Small-M GEMM / GEMV for decode shapes (M <= 64): the weight B is streamed
// once per pass of MTILE rows of A, which is where cuBLAS's tiles (64 rows
// and up) compute padding. A thread owns one column j of C for MTILE rows
// at a time and a share of K (KSPLIT threads a column, summed through
// shared memory in a fixed order). With B [K, N] a warp's threads take
// neighbouring columns (B's rows coalesce); with B transposed ([N, K], as
// nn.Linear's weight) a column's KSPLIT threads are neighbours and read
// along K. f32, f16 and bf16 inputs; f32 accumulation.
//
// Variant parameters (jit/kernel_config.h, family "gemv"): GROVE_V_THREADS
// (the block, at most kGemvMaxThreads), GROVE_V_KSPLIT, GROVE_V_MTILE; the
// module without them is threads 128, ksplit 1, mtile 4. M, N, K, strides
// and batch are read at run time; blocks loop grid-stride over (batch,
// column block), so any grid gives the same result.
#ifndef GROVE_JIT_KERNELS_GEMV_CUH_
#define GROVE_JIT_KERNELS_GEMV_CUH_

#include "jit/kernels/gemv_params.h"
#include "jit/kernels/prelude.cuh"

namespace grove_k {
namespace gemv_k {

template <typename T, int MT>
GROVE_DEVICE void gemv(const GemvParams& p, int ksplit) {
  __shared__ float part[kGemvMaxThreads * MT];
  const T* A = static_cast<const T*>(p.a);
  const T* B = static_cast<const T*>(p.b);
  T* C = static_cast<T*>(p.c);
  const T* bias = static_cast<const T*>(p.bias);
  const int t = static_cast<int>(threadIdx.x);
  const int nthreads = static_cast<int>(blockDim.x) < kGemvMaxThreads ? static_cast<int>(blockDim.x) : kGemvMaxThreads;
  const int cols = nthreads / ksplit > 0 ? nthreads / ksplit : 1;
  // This thread's column within the block and its share of K.
  const int col_in = p.trans_b ? t / ksplit : t % cols;
  const int kp = p.trans_b ? t % ksplit : t / cols;
  const bool lane_ok = t < cols * ksplit;
  const i64 col_blocks = (p.n + cols - 1) / cols;
  for (i64 w = blockIdx.x; w < p.batch * col_blocks; w += gridDim.x) {
    const i64 bi = w / col_blocks;
    const i64 j = (w - bi * col_blocks) * cols + col_in;
    const T* a = A + bi * p.stride_a;
    const T* b = B + bi * p.stride_b;
    T* c = C + bi * p.stride_c;
    const bool active = lane_ok && j < p.n;
    for (i64 m0 = 0; m0 < p.m; m0 += MT) {
      float acc[MT];
      for (int r = 0; r < MT; ++r) acc[r] = 0.0f;
      if (active) {
        for (i64 kk = kp; kk < p.k; kk += ksplit) {
          const float bv = to_f32<T>(b[p.trans_b ? j * p.ldb + kk : kk * p.ldb + j]);
          for (int r = 0; r < MT; ++r) {
            const i64 mi = m0 + r;
            if (mi < p.m) acc[r] += to_f32<T>(a[p.trans_a ? kk * p.lda + mi : mi * p.lda + kk]) * bv;
          }
        }
      }
      if (ksplit > 1) {  // every thread of the block reaches both barriers
        if (t < kGemvMaxThreads) {
          for (int r = 0; r < MT; ++r) part[r * kGemvMaxThreads + t] = acc[r];
        }
        __syncthreads();
        if (active && kp == 0) {
          for (int r = 0; r < MT; ++r) {
            float s = 0.0f;
            for (int q = 0; q < ksplit; ++q) {
              s += part[r * kGemvMaxThreads + (p.trans_b ? col_in * ksplit + q : q * cols + col_in)];
            }
            acc[r] = s;
          }
        }
        __syncthreads();
      }
      if (active && kp == 0) {
        for (int r = 0; r < MT; ++r) {
          const i64 mi = m0 + r;
          if (mi >= p.m) break;
          float v = p.alpha * acc[r];
          if (p.beta != 0.0f) v += p.beta * to_f32<T>(c[mi * p.ldc + j]);
          if (bias != 0) v += to_f32<T>(bias[j]);
          c[mi * p.ldc + j] = from_f32<T>(v);
        }
      }
    }
  }
}

}  // namespace gemv_k
}  // namespace grove_k

#endif  // GROVE_JIT_KERNELS_GEMV_CUH_

#if defined(GROVE_T0)
#if defined(GROVE_V_MTILE)
#define GROVE_GEMV_MTILE GROVE_V_MTILE
#else
#define GROVE_GEMV_MTILE 4
#endif
#if defined(GROVE_V_KSPLIT)
#define GROVE_GEMV_KSPLIT GROVE_V_KSPLIT
#else
#define GROVE_GEMV_KSPLIT 1
#endif
GROVE_ENTRY(gemv, grove_k::GemvParams) { grove_k::gemv_k::gemv<GROVE_T0, GROVE_GEMV_MTILE>(p, GROVE_GEMV_KSPLIT); }
#undef GROVE_GEMV_MTILE
#undef GROVE_GEMV_KSPLIT
#endif
