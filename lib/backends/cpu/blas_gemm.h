// Row-major GEMM through OpenBLAS for the CPU kernels (MatMul, Gemm, Conv,
// the recurrent ops), with the edge cases a BLAS does not take: empty
// matrices, and k == 0 (C = beta * C).
//
//   Gemm(false, true, m, n, k, 1.0, a, b, 0.0, c);   // C[m,n] = A[m,k] * B[n,k]^T
#ifndef GROVE_LIB_BACKENDS_CPU_BLAS_GEMM_H_
#define GROVE_LIB_BACKENDS_CPU_BLAS_GEMM_H_

#include <cblas.h>

#include <cstdint>
#include <limits>

namespace grove::cpu {

// Callers check every dim (and leading dim) they pass with this first.
inline bool FitsBlasInt(int64_t v) { return v <= static_cast<int64_t>(std::numeric_limits<blasint>::max()); }

// Row-major C[m,n] = alpha * op(A) * op(B) + beta * C, A and B stored densely
// as [m,k]/[k,m] and [k,n]/[n,k]. beta == 0 never reads C.
inline void Gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha, const float* a, const float* b,
                 double beta, float* c) {
  if (m == 0 || n == 0) return;
  if (k == 0) {
    for (int64_t i = 0; i < m * n; ++i) c[i] = beta == 0 ? 0.0f : static_cast<float>(beta * c[i]);
    return;
  }
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
              static_cast<blasint>(m), static_cast<blasint>(n), static_cast<blasint>(k), static_cast<float>(alpha),
              a, static_cast<blasint>(ta ? m : k), b, static_cast<blasint>(tb ? k : n), static_cast<float>(beta),
              c, static_cast<blasint>(n));
}

inline void Gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha, const double* a, const double* b,
                 double beta, double* c) {
  if (m == 0 || n == 0) return;
  if (k == 0) {
    for (int64_t i = 0; i < m * n; ++i) c[i] = beta == 0 ? 0.0 : beta * c[i];
    return;
  }
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
              static_cast<blasint>(m), static_cast<blasint>(n), static_cast<blasint>(k), alpha, a,
              static_cast<blasint>(ta ? m : k), b, static_cast<blasint>(tb ? k : n), beta, c,
              static_cast<blasint>(n));
}

}  // namespace grove::cpu

#endif  // GROVE_LIB_BACKENDS_CPU_BLAS_GEMM_H_
