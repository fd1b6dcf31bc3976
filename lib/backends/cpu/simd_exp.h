// Vectorised exp for the CPU kernels' softmax rows, Sigmoid and Tanh (x86-64 with GCC or
// Clang: GROVE_SIMD_EXP is defined where these exist). exp(x) for x <= 0
// within 2 ulp of std::exp (a degree-6 polynomial after Cephes' reduction
// by ln 2 in two parts), 0 for -inf and for anything below
// log(FLT_MIN) (no subnormal result, so no microcode assist), NaN for NaN;
// and the row softmax on it, with the Softmax kernel's arithmetic (the max,
// exp(x - max) in f32, their sum in double, times f32(1 / sum)).
//
//   if (HostCpuFeatures().avx512f) SoftmaxRowAvx512(row, n);
//   else if (HasAvx2()) SoftmaxRowAvx2(row, n);
//
// The caller checks the CPU: the *Avx2 functions need AVX2 and FMA, the
// *Avx512 ones AVX-512F.
#ifndef GROVE_LIB_BACKENDS_CPU_SIMD_EXP_H_
#define GROVE_LIB_BACKENDS_CPU_SIMD_EXP_H_

#include <cstdint>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define GROVE_SIMD_EXP 1

namespace grove::cpu {

// y[i] = exp(x[i]) for i < n, each x[i] <= 0 or NaN (a positive x[i] gives
// an unspecified value); y may be x.
void ExpNonPositiveAvx2(const float* x, float* y, int64_t n);
void ExpNonPositiveAvx512(const float* x, float* y, int64_t n);

// y[i] = 1 / (1 + exp(-x[i])) for i < n, as the Sigmoid kernel computes it
// (exp of -|x| only: 1 / (1 + e) for x >= 0, e / (1 + e) below), within a few
// ulp of it; a result below FLT_MIN (x < -87.3) is 0, NaN stays NaN; y may be x.
void SigmoidAvx2(const float* x, float* y, int64_t n);
void SigmoidAvx512(const float* x, float* y, int64_t n);

// y[i] = tanh(x[i]) for i < n within 4 ulp of tanh in double (Cephes'
// tanhf: an odd polynomial below |x| 0.625, else 1 - 2 / (1 + exp(2|x|)) by
// way of exp(-2|x|), sign restored); NaN stays NaN; y may be x.
void TanhAvx2(const float* x, float* y, int64_t n);
void TanhAvx512(const float* x, float* y, int64_t n);

// x[0..n) (n >= 1) replaced by its softmax. The max ignores NaN as
// `x[j] > m` does; a NaN or an all -inf row comes out NaN.
void SoftmaxRowAvx2(float* x, int64_t n);
void SoftmaxRowAvx512(float* x, int64_t n);

}  // namespace grove::cpu

#endif
#endif  // GROVE_LIB_BACKENDS_CPU_SIMD_EXP_H_
