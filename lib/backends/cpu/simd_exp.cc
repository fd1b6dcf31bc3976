// Vectorised exp(x <= 0) and the row softmax on it (simd_exp.h).
#include "lib/backends/cpu/simd_exp.h"

#if defined(GROVE_SIMD_EXP)
#include <limits>

// GCC 12 warns that the AVX-512 intrinsics' _mm512_undefined_ps() "may be
// used uninitialized" ("is used" in the _mm512_reduce_* helpers) wherever
// they inline (GCC bug 105593): the warning's location is this header, so it
// is silenced for the header alone.
#if !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include <immintrin.h>
#if !defined(__clang__)
#pragma GCC diagnostic pop
#endif

namespace grove::cpu {
namespace {

// x = n ln2 + t with |t| <= ln2 / 2 (Cephes' reduction: ln 2 in two parts,
// so n ln2 is exact), exp(t) = 1 + t + t^2 P(t), then times 2^n. P is of
// degree 4 (Cephes' expf has 5): fitted here for the least maximum relative
// error of exp(t) over |t| <= ln2 / 2, 3.1e-9, far below a float's 6e-8, so
// the result stays within ~1 ulp of rounding (SimdExpTest measures 2 at most).
constexpr float kLog2e = 1.44269504088896341f;
constexpr float kLn2Hi = 0.693359375f;
constexpr float kLn2Lo = -2.12194440e-4f;
constexpr float kP0 = 1.381461043e-3f, kP1 = 8.368710056e-3f, kP2 = 4.166838899e-2f;
constexpr float kP3 = 1.666652113e-1f, kP4 = 4.999999404e-1f;
constexpr float kLogFltMin = -87.3365447f;  // below it exp(x) is subnormal: 0 instead

// AVX2 has no scalef: 2^n is built in the exponent field, and the lanes
// below log(FLT_MIN) are computed as exp(0) and then cleared (computed at
// the bound, y * 2^-126 would come out subnormal, and every such multiply
// takes a microcode assist, ~150 cycles on Intel cores). The clamp keeps a
// positive x (a masked-off lane of a row's tail) from a garbage exponent.
__attribute__((target("avx2,fma"))) inline __m256 Exp8(__m256 x) {
  const __m256 underflow = _mm256_cmp_ps(x, _mm256_set1_ps(kLogFltMin), _CMP_LT_OQ);  // false for NaN
  __m256 t = _mm256_min_ps(_mm256_set1_ps(88.3762626647949f), _mm256_andnot_ps(underflow, x));  // NaN stays
  const __m256 fx = _mm256_round_ps(_mm256_mul_ps(t, _mm256_set1_ps(kLog2e)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  t = _mm256_fnmadd_ps(fx, _mm256_set1_ps(kLn2Hi), t);
  t = _mm256_fnmadd_ps(fx, _mm256_set1_ps(kLn2Lo), t);
  __m256 y = _mm256_set1_ps(kP0);
  y = _mm256_fmadd_ps(y, t, _mm256_set1_ps(kP1));
  y = _mm256_fmadd_ps(y, t, _mm256_set1_ps(kP2));
  y = _mm256_fmadd_ps(y, t, _mm256_set1_ps(kP3));
  y = _mm256_fmadd_ps(y, t, _mm256_set1_ps(kP4));
  y = _mm256_fmadd_ps(y, _mm256_mul_ps(t, t), _mm256_add_ps(t, _mm256_set1_ps(1.0f)));
  const __m256i n = _mm256_cvttps_epi32(fx);
  const __m256 pow2n = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n, _mm256_set1_epi32(127)), 23));
  return _mm256_andnot_ps(underflow, _mm256_mul_ps(y, pow2n));
}

// AVX-512: n rounded to nearest in one instruction and the 2^n scaling by
// vscalefps, which takes n as a float and needs no clamp; the lanes below
// log(FLT_MIN) (-inf included, whose reduction gives NaN) are zeroed by the
// scaling's mask. Four instructions fewer than Exp8's sequence.
__attribute__((target("avx512f"))) inline __m512 Exp16(__m512 x) {
  const __mmask16 keep = _mm512_cmp_ps_mask(x, _mm512_set1_ps(kLogFltMin), _CMP_NLT_UQ);  // true for NaN
  const __m512 fx =
      _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(kLog2e)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 t = _mm512_fnmadd_ps(fx, _mm512_set1_ps(kLn2Hi), x);
  t = _mm512_fnmadd_ps(fx, _mm512_set1_ps(kLn2Lo), t);
  __m512 y = _mm512_set1_ps(kP0);
  y = _mm512_fmadd_ps(y, t, _mm512_set1_ps(kP1));
  y = _mm512_fmadd_ps(y, t, _mm512_set1_ps(kP2));
  y = _mm512_fmadd_ps(y, t, _mm512_set1_ps(kP3));
  y = _mm512_fmadd_ps(y, t, _mm512_set1_ps(kP4));
  y = _mm512_fmadd_ps(y, _mm512_mul_ps(t, t), _mm512_add_ps(t, _mm512_set1_ps(1.0f)));
  return _mm512_maskz_scalef_ps(keep, y, fx);
}

// The lanes' max and their sum in double, in registers (a store and a
// scalar loop over the lanes cost a quarter of a 256-key row's softmax).
__attribute__((target("avx2,fma"))) inline float MaxOf8(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  return _mm_cvtss_f32(_mm_max_ss(m, _mm_movehdup_ps(m)));
}

__attribute__((target("avx2,fma"))) inline double SumOf8(__m256 v) {
  const __m256d s = _mm256_add_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(v)),
                                  _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)));
  __m128d h = _mm_add_pd(_mm256_castpd256_pd128(s), _mm256_extractf128_pd(s, 1));
  return _mm_cvtsd_f64(_mm_add_sd(h, _mm_unpackhi_pd(h, h)));
}

__attribute__((target("avx512f"))) inline double SumOf16(__m512 v) {
  const __m256 hi = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1));
  return _mm512_reduce_add_pd(_mm512_add_pd(_mm512_cvtps_pd(_mm512_castps512_ps256(v)), _mm512_cvtps_pd(hi)));
}

// y[0..n) = F(x[0..n)) a vector at a time, the last n % 8 (n % 16)
// elements through masked loads and stores.
template <__m256 (*F)(__m256)>
__attribute__((target("avx2,fma"))) inline void Map8(const float* x, float* y, int64_t n) {
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) _mm256_storeu_ps(y + j, F(_mm256_loadu_ps(x + j)));
  if (j < n) {
    const __m256i tail =
        _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n - j)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    _mm256_maskstore_ps(y + j, tail, F(_mm256_maskload_ps(x + j, tail)));
  }
}

template <__m512 (*F)(__m512)>
__attribute__((target("avx512f"))) inline void Map16(const float* x, float* y, int64_t n) {
  int64_t j = 0;
  for (; j + 16 <= n; j += 16) _mm512_storeu_ps(y + j, F(_mm512_loadu_ps(x + j)));
  if (j < n) {
    const __mmask16 tail = static_cast<__mmask16>((1u << (n - j)) - 1u);
    _mm512_mask_storeu_ps(y + j, tail, F(_mm512_maskz_loadu_ps(tail, x + j)));
  }
}

}  // namespace

__attribute__((target("avx2,fma"))) void ExpNonPositiveAvx2(const float* x, float* y, int64_t n) {
  Map8<Exp8>(x, y, n);
}

__attribute__((target("avx512f"))) void ExpNonPositiveAvx512(const float* x, float* y, int64_t n) {
  Map16<Exp16>(x, y, n);
}

namespace {

// The Sigmoid kernel's arithmetic (elementwise.cc, SigmoidOp) on e = exp(-|x|):
// -|x| by setting the sign bit (NaN stays NaN, so its lane comes out NaN:
// x >= 0 is false and e / (1 + e) is NaN).
__attribute__((target("avx2,fma"))) inline __m256 Sigmoid8(__m256 x) {
  const __m256 e = Exp8(_mm256_or_ps(x, _mm256_set1_ps(-0.0f)));
  const __m256 one_plus_e = _mm256_add_ps(_mm256_set1_ps(1.0f), e);
  const __m256 nonnegative = _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_GE_OQ);
  return _mm256_blendv_ps(_mm256_div_ps(e, one_plus_e), _mm256_div_ps(_mm256_set1_ps(1.0f), one_plus_e),
                          nonnegative);
}

__attribute__((target("avx512f"))) inline __m512 Sigmoid16(__m512 x) {
  const __m512 e = Exp16(_mm512_castsi512_ps(
      _mm512_or_si512(_mm512_castps_si512(x), _mm512_set1_epi32(static_cast<int>(0x80000000u)))));
  const __m512 one_plus_e = _mm512_add_ps(_mm512_set1_ps(1.0f), e);
  const __mmask16 nonnegative = _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_GE_OQ);
  return _mm512_mask_blend_ps(nonnegative, _mm512_div_ps(e, one_plus_e),
                              _mm512_div_ps(_mm512_set1_ps(1.0f), one_plus_e));
}

// tanh: Cephes' tanhf. Below |x| 0.625, x + x^3 P(x^2); above, with
// e = exp(-2|x|) <= 0.29 (no cancellation in 1 - e), (1 - e) / (1 + e) with
// x's sign. NaN: e is NaN and the comparison false, so the lane is NaN.
constexpr float kT0 = -5.70498872745e-3f, kT1 = 2.06390887954e-2f, kT2 = -5.37397155531e-2f;
constexpr float kT3 = 1.33314422036e-1f, kT4 = -3.33332819422e-1f;

__attribute__((target("avx2,fma"))) inline __m256 Tanh8(__m256 x) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  const __m256 ax = _mm256_andnot_ps(sign, x);
  const __m256 z = _mm256_mul_ps(x, x);
  __m256 p = _mm256_set1_ps(kT0);
  p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(kT1));
  p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(kT2));
  p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(kT3));
  p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(kT4));
  // x's sign put back: the fma gives +0 for x = -0.
  const __m256 small = _mm256_or_ps(_mm256_and_ps(sign, x), _mm256_fmadd_ps(_mm256_mul_ps(p, z), x, x));
  const __m256 e = Exp8(_mm256_mul_ps(_mm256_set1_ps(-2.0f), ax));
  const __m256 one = _mm256_set1_ps(1.0f);
  const __m256 large = _mm256_or_ps(_mm256_and_ps(sign, x), _mm256_div_ps(_mm256_sub_ps(one, e), _mm256_add_ps(one, e)));
  return _mm256_blendv_ps(large, small, _mm256_cmp_ps(ax, _mm256_set1_ps(0.625f), _CMP_LT_OQ));
}

__attribute__((target("avx512f"))) inline __m512 Tanh16(__m512 x) {
  const __m512i sign = _mm512_set1_epi32(static_cast<int>(0x80000000u));
  const __m512 ax = _mm512_castsi512_ps(_mm512_andnot_si512(sign, _mm512_castps_si512(x)));
  const __m512 z = _mm512_mul_ps(x, x);
  __m512 p = _mm512_set1_ps(kT0);
  p = _mm512_fmadd_ps(p, z, _mm512_set1_ps(kT1));
  p = _mm512_fmadd_ps(p, z, _mm512_set1_ps(kT2));
  p = _mm512_fmadd_ps(p, z, _mm512_set1_ps(kT3));
  p = _mm512_fmadd_ps(p, z, _mm512_set1_ps(kT4));
  const __m512 small = _mm512_castsi512_ps(_mm512_or_si512(
      _mm512_and_si512(sign, _mm512_castps_si512(x)), _mm512_castps_si512(_mm512_fmadd_ps(_mm512_mul_ps(p, z), x, x))));
  const __m512 e = Exp16(_mm512_mul_ps(_mm512_set1_ps(-2.0f), ax));
  const __m512 one = _mm512_set1_ps(1.0f);
  const __m512 q = _mm512_div_ps(_mm512_sub_ps(one, e), _mm512_add_ps(one, e));
  const __m512 large = _mm512_castsi512_ps(
      _mm512_or_si512(_mm512_and_si512(sign, _mm512_castps_si512(x)), _mm512_castps_si512(q)));
  return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(ax, _mm512_set1_ps(0.625f), _CMP_LT_OQ), large, small);
}

}  // namespace

__attribute__((target("avx2,fma"))) void TanhAvx2(const float* x, float* y, int64_t n) {
  Map8<Tanh8>(x, y, n);
}

__attribute__((target("avx512f"))) void TanhAvx512(const float* x, float* y, int64_t n) {
  Map16<Tanh16>(x, y, n);
}

__attribute__((target("avx2,fma"))) void SigmoidAvx2(const float* x, float* y, int64_t n) {
  Map8<Sigmoid8>(x, y, n);
}

__attribute__((target("avx512f"))) void SigmoidAvx512(const float* x, float* y, int64_t n) {
  Map16<Sigmoid16>(x, y, n);
}

// Eight lanes at a time, the last n % 8 elements through masked loads and
// stores (lanes past n are -inf for the max and 0 for the sum). Every max
// lane starts at x[0] and keeps its value over a NaN (vmaxps returns its
// second operand), so the lanes are all NaN exactly when x[0] is, as with
// the scalar `x[j] > m` from m = x[0].
__attribute__((target("avx2,fma"))) void SoftmaxRowAvx2(float* x, int64_t n) {
  const int64_t full = n / 8 * 8;
  const __m256i tail =
      _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n - full)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  const __m256 tail_ps = _mm256_castsi256_ps(tail);
  const __m256 ninf = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
  __m256 m0 = _mm256_set1_ps(x[0]), m1 = m0;  // two chains of vmaxps
  int64_t j = 0;
  for (; j + 16 <= full; j += 16) {
    m0 = _mm256_max_ps(_mm256_loadu_ps(x + j), m0);
    m1 = _mm256_max_ps(_mm256_loadu_ps(x + j + 8), m1);
  }
  if (j < full) m0 = _mm256_max_ps(_mm256_loadu_ps(x + j), m0);
  if (full < n) m1 = _mm256_max_ps(_mm256_blendv_ps(ninf, _mm256_maskload_ps(x + full, tail), tail_ps), m1);
  const __m256 mv = _mm256_set1_ps(MaxOf8(_mm256_max_ps(m0, m1)));
  __m256 sum = _mm256_setzero_ps();
  for (j = 0; j < full; j += 8) {
    const __m256 e = Exp8(_mm256_sub_ps(_mm256_loadu_ps(x + j), mv));
    _mm256_storeu_ps(x + j, e);
    sum = _mm256_add_ps(sum, e);
  }
  if (full < n) {
    const __m256 e = _mm256_and_ps(Exp8(_mm256_sub_ps(_mm256_maskload_ps(x + full, tail), mv)), tail_ps);
    _mm256_maskstore_ps(x + full, tail, e);
    sum = _mm256_add_ps(sum, e);
  }
  const __m256 iv = _mm256_set1_ps(static_cast<float>(1.0 / SumOf8(sum)));
  for (j = 0; j < full; j += 8) _mm256_storeu_ps(x + j, _mm256_mul_ps(_mm256_loadu_ps(x + j), iv));
  if (full < n) _mm256_maskstore_ps(x + full, tail, _mm256_mul_ps(_mm256_maskload_ps(x + full, tail), iv));
}

// SoftmaxRowAvx2 sixteen lanes at a time (twice the exps per instruction,
// which bound a long row's softmax), the max over four chains.
__attribute__((target("avx512f"))) void SoftmaxRowAvx512(float* x, int64_t n) {
  const int64_t full = n / 16 * 16;
  const __mmask16 tail = static_cast<__mmask16>((1u << (n - full)) - 1u);
  const __m512 ninf = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  __m512 m0 = _mm512_set1_ps(x[0]), m1 = m0, m2 = m0, m3 = m0;
  int64_t j = 0;
  for (; j + 64 <= full; j += 64) {
    m0 = _mm512_max_ps(_mm512_loadu_ps(x + j), m0);
    m1 = _mm512_max_ps(_mm512_loadu_ps(x + j + 16), m1);
    m2 = _mm512_max_ps(_mm512_loadu_ps(x + j + 32), m2);
    m3 = _mm512_max_ps(_mm512_loadu_ps(x + j + 48), m3);
  }
  for (; j < full; j += 16) m0 = _mm512_max_ps(_mm512_loadu_ps(x + j), m0);
  if (full < n) m1 = _mm512_max_ps(_mm512_mask_loadu_ps(ninf, tail, x + full), m1);
  const __m512 mv = _mm512_set1_ps(_mm512_reduce_max_ps(_mm512_max_ps(_mm512_max_ps(m0, m1), _mm512_max_ps(m2, m3))));
  __m512 sum = _mm512_setzero_ps();
  for (j = 0; j < full; j += 16) {
    const __m512 e = Exp16(_mm512_sub_ps(_mm512_loadu_ps(x + j), mv));
    _mm512_storeu_ps(x + j, e);
    sum = _mm512_add_ps(sum, e);
  }
  if (full < n) {
    const __m512 e = _mm512_maskz_mov_ps(tail, Exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(tail, x + full), mv)));
    _mm512_mask_storeu_ps(x + full, tail, e);
    sum = _mm512_add_ps(sum, e);
  }
  const __m512 iv = _mm512_set1_ps(static_cast<float>(1.0 / SumOf16(sum)));
  for (j = 0; j < full; j += 16) _mm512_storeu_ps(x + j, _mm512_mul_ps(_mm512_loadu_ps(x + j), iv));
  if (full < n) _mm512_mask_storeu_ps(x + full, tail, _mm512_mul_ps(_mm512_maskz_loadu_ps(tail, x + full), iv));
}

}  // namespace grove::cpu

#endif  // GROVE_SIMD_EXP
