// A GEMM that reads every dim from its parameters: the matrix products of a
// plan that serves a shape bucket (SessionOptions::shape_buckets) whose N
// or K may change between the bucket's shapes (attention's QK^T and PV, a
// Conv's im2col product over the image size), where a cuBLASLt call baked
// into a CUDA graph would keep the captured sizes. Blocks loop grid-stride
// over (batch, row tile, column tile), so the grid captured for a bucket's
// bound serves every smaller shape. A block stages TK x TM and TK x TN
// slices of op(A) and op(B) through shared memory (any transpose, any
// leading dims; elements past M, N or K read as zero) and each of its
// (TM / RM) x (TN / RN) threads accumulates an RM x RN patch of C in f32, in
// order of k: the same sums, in the same order, as the emulated device's
// reference GEMM, whatever the tile. f32, f16 and bf16.
//
// Variant parameters (jit/kernel_config.h, family "gemm_tiled"):
// GROVE_V_TM, GROVE_V_TN (the tile of C), GROVE_V_TK (the K step),
// GROVE_V_RM, GROVE_V_RN (a thread's patch) and GROVE_V_THREADS, their
// product (the block); without them the generic tile of
// gemm_tiled_params.h.
#ifndef GROVE_JIT_KERNELS_GEMM_TILED_CUH_
#define GROVE_JIT_KERNELS_GEMM_TILED_CUH_

#include "jit/kernels/gemm_math.cuh"
#include "jit/kernels/gemm_tiled_params.h"
#include "jit/kernels/prelude.cuh"

namespace grove_k {
namespace gemm_tiled_k {

template <typename T, int TM, int TN, int TK, int RM, int RN>
GROVE_DEVICE void gemm_tiled(const GemmTiledParams& params) {
  static_assert(TM % RM == 0 && TN % RN == 0, "a micro-tile divides its tile");
  enum { kCols = TN / RN, kRows = TM / RM, kThreads = kCols * kRows };
  const GemvParams& p = params.g;
  __shared__ float as[TK][TM + 1];  // as[kk][i]: op(A)[i0 + i][k0 + kk]
  __shared__ float bs[TK][TN + 1];  // bs[kk][j]: op(B)[k0 + kk][j0 + j]
  const T* A = static_cast<const T*>(p.a);
  const T* B = static_cast<const T*>(p.b);
  T* C = static_cast<T*>(p.c);
  const T* bias = static_cast<const T*>(p.bias);
  const int t = static_cast<int>(threadIdx.x);
  const int nthreads = static_cast<int>(blockDim.x);
  // Rows tr + kRows r and columns tc + kCols q of the tile: neighbouring
  // threads read neighbouring columns of bs (no bank conflicts).
  const int tr = t / kCols, tc = t % kCols;
  const bool computes = t < kThreads;
  const int math = params.math;
  const i64 tiles_m = (p.m + TM - 1) / TM, tiles_n = (p.n + TN - 1) / TN;
  const i64 per_batch = tiles_m * tiles_n;
  for (i64 w = blockIdx.x; w < p.batch * per_batch; w += gridDim.x) {  // block-uniform: every thread reaches the barriers
    const i64 bi = w / per_batch;
    const i64 rest = w - bi * per_batch;
    const i64 i0 = (rest / tiles_n) * TM, j0 = (rest % tiles_n) * TN;
    const T* a = A + bi * p.stride_a;
    const T* b = B + bi * p.stride_b;
    T* c = C + bi * p.stride_c;
    float acc[RM][RN];
    GROVE_UNROLL
    for (int r = 0; r < RM; ++r) {
      GROVE_UNROLL
      for (int q = 0; q < RN; ++q) acc[r][q] = 0.0f;
    }
    for (i64 k0 = 0; k0 < p.k; k0 += TK) {
      for (int e = t; e < TK * TM; e += nthreads) {
        const int kk = e / TM, x = e % TM;
        const i64 gk = k0 + kk, gi = i0 + x;
        float av = 0.0f;
        if (gk < p.k && gi < p.m) av = gemm_input_rounded(to_f32<T>(a[p.trans_a ? gk * p.lda + gi : gi * p.lda + gk]), math);
        as[kk][x] = av;
      }
      for (int e = t; e < TK * TN; e += nthreads) {
        const int kk = e / TN, x = e % TN;
        const i64 gk = k0 + kk, gj = j0 + x;
        float bv = 0.0f;
        if (gk < p.k && gj < p.n) bv = gemm_input_rounded(to_f32<T>(b[p.trans_b ? gj * p.ldb + gk : gk * p.ldb + gj]), math);
        bs[kk][x] = bv;
      }
      __syncthreads();
      const int kn = p.k - k0 < TK ? static_cast<int>(p.k - k0) : TK;
      if (computes) {
        for (int kk = 0; kk < kn; ++kk) {
          GROVE_UNROLL
          for (int r = 0; r < RM; ++r) {
            const float av = as[kk][tr + kRows * r];
            GROVE_UNROLL
            for (int q = 0; q < RN; ++q) acc[r][q] += av * bs[kk][tc + kCols * q];
          }
        }
      }
      __syncthreads();
    }
    if (!computes) continue;
    GROVE_UNROLL
    for (int r = 0; r < RM; ++r) {
      const i64 i = i0 + tr + kRows * r;
      if (i >= p.m) break;
      GROVE_UNROLL
      for (int q = 0; q < RN; ++q) {
        const i64 j = j0 + tc + kCols * q;
        if (j >= p.n) break;
        float v = p.alpha * acc[r][q];
        if (p.beta != 0.0f) v += p.beta * to_f32<T>(c[i * p.ldc + j]);
        if (bias != 0) v += to_f32<T>(bias[j]);
        if (params.epilogue == 1) v = v > 0.0f ? v : 0.0f;
        if (params.epilogue == 2) v = 0.5f * v * (1.0f + erff(v * 0.70710678f));
        c[i * p.ldc + j] = from_f32<T>(v);
      }
    }
  }
}

}  // namespace gemm_tiled_k
}  // namespace grove_k

#endif  // GROVE_JIT_KERNELS_GEMM_TILED_CUH_

#if defined(GROVE_T0)
// The variant's tile (jit/kernel_config.h, family "gemm_tiled"), else the
// generic one: 32 x 32 tiles, K steps of 16, 4 x 4 per thread (64 threads).
#if defined(GROVE_V_TM)
#define GROVE_GEMM_TILE_ARGS GROVE_V_TM, GROVE_V_TN, GROVE_V_TK, GROVE_V_RM, GROVE_V_RN
#else
#define GROVE_GEMM_TILE_ARGS grove_k::kGemmTile, grove_k::kGemmTile, grove_k::kGemmTileK, 4, 4
#endif
GROVE_ENTRY(gemm_tiled, grove_k::GemmTiledParams) {
  grove_k::gemm_tiled_k::gemm_tiled<GROVE_T0, GROVE_GEMM_TILE_ARGS>(p);
}
#undef GROVE_GEMM_TILE_ARGS
#endif
