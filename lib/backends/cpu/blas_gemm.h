// Row-major GEMM for the CPU's reference kernels (MatMul, Gemm, Conv, the
// recurrent ops) through OpenBLAS, with the edge cases a BLAS does not take:
// empty matrices, and k == 0 (C = beta * C).
//
//   Gemm(false, true, m, n, k, 1.0, a, b, 0.0, c);   // C[m,n] = A[m,k] * B[n,k]^T
//
// OpenBLAS is loaded with dlopen on the first GEMM, not linked: a linked
// OpenBLAS starts its thread pool and maps its buffers in every process that
// loads grove, before main (some 6 ms of `grove version`'s start, and
// libgfortran with it), though oneDNN computes the f32 products of most
// models. GROVE_OPENBLAS_LIBRARY names the file to load instead of the
// soname; where no OpenBLAS can be loaded, the GEMMs run PortableGemm (the
// same results within float rounding, far slower) and `grove version
// --verbose` says so.
#ifndef GROVE_LIB_BACKENDS_CPU_BLAS_GEMM_H_
#define GROVE_LIB_BACKENDS_CPU_BLAS_GEMM_H_

#include <cstdint>
#include <limits>
#include <string>

namespace grove::cpu {

// Callers check every dim (and leading dim) they pass with this first: the
// BLAS takes 32-bit ints (Debian's LP64 OpenBLAS).
inline bool FitsBlasInt(int64_t v) { return v <= static_cast<int64_t>(std::numeric_limits<int>::max()); }

// Row-major C[m,n] = alpha * op(A) * op(B) + beta * C, A and B stored densely
// as [m,k]/[k,m] and [k,n]/[n,k]. beta == 0 never reads C.
void Gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha, const float* a, const float* b,
          double beta, float* c);
void Gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha, const double* a, const double* b,
          double beta, double* c);

// The same product as plain loops (sums over k in order, in T), what Gemm
// runs when no OpenBLAS can be loaded; exposed for the tests.
void PortableGemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha, const float* a, const float* b,
                  double beta, float* c);
void PortableGemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha, const double* a,
                  const double* b, double beta, double* c);

// Whether OpenBLAS is loaded (this loads it on the first call), and what it
// is: its config and core ("OpenBLAS 0.3.21 DYNAMIC_ARCH ..., core Zen"), or
// why it could not be loaded.
bool BlasLoaded();
std::string DescribeBlas();
// Whether the process has loaded OpenBLAS yet (loads nothing): for tests
// that check nothing loads it before a reference GEMM runs.
bool BlasLoadedYet();

}  // namespace grove::cpu

#endif  // GROVE_LIB_BACKENDS_CPU_BLAS_GEMM_H_
