// The CPU kernel of FusedAttention (lib/ir/ops/attention_attrs.h), f32.
// Per (batch, head): K, scaled as the chain scaled it, is packed once as Kᵀ
// [d, sk] in the workspace; then blocks of kRows query rows get their scores
// [kRows, sk] (for each head dim c, a row of Kᵀ times q[c]: AVX2/FMA with
// kRows x 16 accumulators in registers where the CPU has them, over K and V
// packed once per head as panels of 16 keys / columns, or with fewer query
// rows than a block (a decode step) row by row on K and V in place; plain
// loops elsewhere), the scale and mask, and the row softmax
// exactly as the Softmax kernel computes it (lib/backends/cpu/norm.cc: the
// max, exp(x - max) in f32, their sum in double, times f32(1 / sum)); the
// output rows are sum_j p[j] * V[j], accumulated along V's rows (the same
// register blocking).
// The scores never leave the workspace: no [sq, sk] tensor is written. A
// head's row blocks are split over the session's intra-op threads (each row
// is computed the same way on any of them, so the bytes do not change).
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"
#include "lib/backends/common/attention_checks.h"
#include "lib/backends/cpu/attention.h"
#include "lib/backends/common/prepared.h"
#include "lib/backends/cpu/cpu_features.h"
#include "lib/backends/cpu/cpu_kernels.h"
#include "lib/backends/cpu/parallel_for.h"
#include "lib/backends/cpu/simd_exp.h"
#include "lib/backends/cpu/workspace_layout.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
// GCC 12 warns that the AVX-512 intrinsics' _mm512_undefined_ps() "may be
// used uninitialized" wherever they inline (GCC bug 105593): the warning's
// location is this header, so it is silenced for the header alone.
#if !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>
#if !defined(__clang__)
#pragma GCC diagnostic pop
#endif
#define GROVE_ATTENTION_AVX2 1
#endif

namespace grove::cpu {
namespace {

using backends::AttentionLayout;
using ir::AttentionMaskKind;
using ir::AttentionScaleOp;

// Query rows that share one pass over Kᵀ and V.
constexpr int64_t kRows = 4;

// A head's blocks of query rows are split over at most this many tasks of
// the session's intra-op threads, each with scratch of its own in the
// workspace; a task is worth at least kTaskMultiplyAdds.
constexpr int64_t kSlots = 8;
constexpr int64_t kTaskMultiplyAdds = int64_t{1} << 18;
// At most this many floats of panels for heads run at once (2 MiB).
constexpr int64_t kHeadSlotFloats = int64_t{1} << 19;

std::atomic<bool> simd_allowed{true};
std::atomic<bool> avx512_allowed{true};

inline float Scaled(float x, AttentionScaleOp op, float s) {
  switch (op) {
    case AttentionScaleOp::kMul: return x * s;
    case AttentionScaleOp::kDiv: return x / s;
    default: return x;
  }
}

// scores[r][j] = sum_c q[r][c] * kt[c][j] for r < kRows (q rows past `rows`
// are zeros), summed along c in order.
void ScoresBlock(const float* q, int64_t d, const float* kt, int64_t sk, float* scores) {
  for (int64_t r = 0; r < kRows; ++r) std::fill(scores + r * sk, scores + (r + 1) * sk, 0.0f);
  for (int64_t c = 0; c < d; ++c) {
    const float* kc = kt + c * sk;
    for (int64_t r = 0; r < kRows; ++r) {
      const float qv = q[r * d + c];
      float* sr = scores + r * sk;
      for (int64_t j = 0; j < sk; ++j) sr[j] += qv * kc[j];
    }
  }
}

// out[r][c] = sum_j p[r][j] * v[j][c] for r < rows, summed along j in order.
void OutputBlock(const float* p, int64_t sk, const float* v, int64_t dv, int64_t rows, float* out) {
  for (int64_t r = 0; r < rows; ++r) std::fill(out + r * dv, out + (r + 1) * dv, 0.0f);
  for (int64_t j = 0; j < sk; ++j) {
    const float* vj = v + j * dv;
    for (int64_t r = 0; r < rows; ++r) {
      const float pr = p[r * sk + j];
      float* o = out + r * dv;
      for (int64_t c = 0; c < dv; ++c) o[c] += pr * vj[c];
    }
  }
}

#if defined(GROVE_ATTENTION_AVX2)
// The same blocks with AVX2 and FMA: kRows x 16 accumulators in named
// registers (an array indexed in a loop would live on the stack at -O2);
// each sum still runs along c (scores) or j (output) in order, one fused
// multiply-add per term.
#define GROVE_ATTENTION_FMA_ROW(r, src, b0, b1) \
  do {                                          \
    const __m256 x = _mm256_broadcast_ss(src);  \
    a##r##0 = _mm256_fmadd_ps(x, b0, a##r##0);  \
    a##r##1 = _mm256_fmadd_ps(x, b1, a##r##1);  \
  } while (0)

// K packed as panels of 16 keys, [sk/16][d][16] (the last panel padded with
// zeros), so the loop over c reads memory in order.
void PackKeyPanels(const float* k, int64_t k_js, int64_t k_ds, AttentionScaleOp op, float scale, int64_t sk, int64_t d,
                   float* panels) {
  for (int64_t j0 = 0; j0 < sk; j0 += 16) {
    float* panel = panels + j0 * d;
    const int64_t width = std::min<int64_t>(16, sk - j0);
    for (int64_t c = 0; c < d; ++c) {
      float* row = panel + c * 16;
      for (int64_t t = 0; t < width; ++t) row[t] = Scaled(k[(j0 + t) * k_js + c * k_ds], op, scale);
      for (int64_t t = width; t < 16; ++t) row[t] = 0.0f;
    }
  }
}

// V packed as panels of 16 columns, [dv/16][sk][16] (zeros past dv).
void PackValuePanels(const float* v, int64_t sk, int64_t dv, float* panels) {
  for (int64_t c0 = 0; c0 < dv; c0 += 16) {
    float* panel = panels + c0 * sk;
    const int64_t width = std::min<int64_t>(16, dv - c0);
    for (int64_t j = 0; j < sk; ++j) {
      float* row = panel + j * 16;
      std::memcpy(row, v + j * dv + c0, static_cast<size_t>(width) * sizeof(float));
      for (int64_t t = width; t < 16; ++t) row[t] = 0.0f;
    }
  }
}

// Keys [0, end) only (end <= sk; the rows of `scores` are sk apart).
__attribute__((target("avx2,fma"))) void ScoresBlockAvx2(const float* q, int64_t d, const float* key_panels, int64_t sk,
                                                         int64_t end, float* scores) {
  static_assert(kRows == 4);
  for (int64_t j0 = 0; j0 < end; j0 += 16) {
    __m256 a00 = _mm256_setzero_ps(), a01 = a00, a10 = a00, a11 = a00, a20 = a00, a21 = a00, a30 = a00, a31 = a00;
    const float* k = key_panels + j0 * d;
    for (int64_t c = 0; c < d; ++c, k += 16) {
      const __m256 k0 = _mm256_loadu_ps(k), k1 = _mm256_loadu_ps(k + 8);
      GROVE_ATTENTION_FMA_ROW(0, q + c, k0, k1);
      GROVE_ATTENTION_FMA_ROW(1, q + d + c, k0, k1);
      GROVE_ATTENTION_FMA_ROW(2, q + 2 * d + c, k0, k1);
      GROVE_ATTENTION_FMA_ROW(3, q + 3 * d + c, k0, k1);
    }
    const __m256 acc[4][2] = {{a00, a01}, {a10, a11}, {a20, a21}, {a30, a31}};
    if (j0 + 16 <= end) {
      for (int r = 0; r < 4; ++r) {
        _mm256_storeu_ps(scores + r * sk + j0, acc[r][0]);
        _mm256_storeu_ps(scores + r * sk + j0 + 8, acc[r][1]);
      }
    } else {
      alignas(32) float tail[16];
      for (int r = 0; r < 4; ++r) {
        _mm256_store_ps(tail, acc[r][0]);
        _mm256_store_ps(tail + 8, acc[r][1]);
        std::memcpy(scores + r * sk + j0, tail, static_cast<size_t>(end - j0) * sizeof(float));
      }
    }
  }
}

// ScoresBlockAvx2 in AVX-512: a 512-bit accumulator per row and panel, two
// panels (32 keys) a pass (eight chains of fused multiply-adds in flight),
// each score the same fused multiply-adds along c in order as there.
// Keys [0, end) only.
__attribute__((target("avx512f"))) void ScoresBlockAvx512(const float* q, int64_t d, const float* key_panels,
                                                          int64_t sk, int64_t end, float* scores) {
  static_assert(kRows == 4);
  const float *q0 = q, *q1 = q + d, *q2 = q + 2 * d, *q3 = q + 3 * d;
  auto mask = [](int64_t width) { return static_cast<__mmask16>(width >= 16 ? 0xFFFFu : (1u << width) - 1u); };
  int64_t j0 = 0;
  for (; j0 + 16 < end; j0 += 32) {  // a second panel with at least one key
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, b0 = a0, b1 = a0, b2 = a0, b3 = a0;
    const float* ka = key_panels + j0 * d;
    const float* kb = ka + 16 * d;
    for (int64_t c = 0; c < d; ++c) {
      const __m512 va = _mm512_loadu_ps(ka + c * 16), vb = _mm512_loadu_ps(kb + c * 16);
      __m512 x = _mm512_set1_ps(q0[c]);
      a0 = _mm512_fmadd_ps(x, va, a0);
      b0 = _mm512_fmadd_ps(x, vb, b0);
      x = _mm512_set1_ps(q1[c]);
      a1 = _mm512_fmadd_ps(x, va, a1);
      b1 = _mm512_fmadd_ps(x, vb, b1);
      x = _mm512_set1_ps(q2[c]);
      a2 = _mm512_fmadd_ps(x, va, a2);
      b2 = _mm512_fmadd_ps(x, vb, b2);
      x = _mm512_set1_ps(q3[c]);
      a3 = _mm512_fmadd_ps(x, va, a3);
      b3 = _mm512_fmadd_ps(x, vb, b3);
    }
    const __mmask16 mb = mask(end - j0 - 16);
    _mm512_storeu_ps(scores + j0, a0);
    _mm512_storeu_ps(scores + sk + j0, a1);
    _mm512_storeu_ps(scores + 2 * sk + j0, a2);
    _mm512_storeu_ps(scores + 3 * sk + j0, a3);
    _mm512_mask_storeu_ps(scores + j0 + 16, mb, b0);
    _mm512_mask_storeu_ps(scores + sk + j0 + 16, mb, b1);
    _mm512_mask_storeu_ps(scores + 2 * sk + j0 + 16, mb, b2);
    _mm512_mask_storeu_ps(scores + 3 * sk + j0 + 16, mb, b3);
  }
  if (j0 < end) {  // one panel left
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    const float* ka = key_panels + j0 * d;
    for (int64_t c = 0; c < d; ++c) {
      const __m512 va = _mm512_loadu_ps(ka + c * 16);
      a0 = _mm512_fmadd_ps(_mm512_set1_ps(q0[c]), va, a0);
      a1 = _mm512_fmadd_ps(_mm512_set1_ps(q1[c]), va, a1);
      a2 = _mm512_fmadd_ps(_mm512_set1_ps(q2[c]), va, a2);
      a3 = _mm512_fmadd_ps(_mm512_set1_ps(q3[c]), va, a3);
    }
    const __mmask16 ma = mask(end - j0);
    _mm512_mask_storeu_ps(scores + j0, ma, a0);
    _mm512_mask_storeu_ps(scores + sk + j0, ma, a1);
    _mm512_mask_storeu_ps(scores + 2 * sk + j0, ma, a2);
    _mm512_mask_storeu_ps(scores + 3 * sk + j0, ma, a3);
  }
}

// Keys [0, end) only: the probabilities past `end` are zeros.
__attribute__((target("avx2,fma"))) void OutputBlockAvx2(const float* p, int64_t sk, int64_t end,
                                                         const float* value_panels, int64_t dv, int64_t rows,
                                                         float* out) {
  static_assert(kRows == 4);
  for (int64_t c0 = 0; c0 < dv; c0 += 16) {
    __m256 a00 = _mm256_setzero_ps(), a01 = a00, a10 = a00, a11 = a00, a20 = a00, a21 = a00, a30 = a00, a31 = a00;
    const float* vj = value_panels + c0 * sk;
    for (int64_t j = 0; j < end; ++j, vj += 16) {
      const __m256 v0 = _mm256_loadu_ps(vj), v1 = _mm256_loadu_ps(vj + 8);
      GROVE_ATTENTION_FMA_ROW(0, p + j, v0, v1);
      GROVE_ATTENTION_FMA_ROW(1, p + sk + j, v0, v1);
      GROVE_ATTENTION_FMA_ROW(2, p + 2 * sk + j, v0, v1);
      GROVE_ATTENTION_FMA_ROW(3, p + 3 * sk + j, v0, v1);
    }
    const __m256 acc[4][2] = {{a00, a01}, {a10, a11}, {a20, a21}, {a30, a31}};
    const int64_t width = std::min<int64_t>(16, dv - c0);
    alignas(32) float tail[16];
    for (int64_t r = 0; r < rows; ++r) {
      if (width == 16) {
        _mm256_storeu_ps(out + r * dv + c0, acc[r][0]);
        _mm256_storeu_ps(out + r * dv + c0 + 8, acc[r][1]);
      } else {
        _mm256_store_ps(tail, acc[r][0]);
        _mm256_store_ps(tail + 8, acc[r][1]);
        std::memcpy(out + r * dv + c0, tail, static_cast<size_t>(width) * sizeof(float));
      }
    }
  }
}
#undef GROVE_ATTENTION_FMA_ROW

// out[r * stride + [0, width)] = acc[r] for r < rows (width <= 16).
__attribute__((target("avx512f"))) inline void StoreRows16(float* out, int64_t stride, int64_t rows, int64_t width,
                                                           const __m512* acc) {
  const __mmask16 m = static_cast<__mmask16>(width >= 16 ? 0xFFFFu : (1u << width) - 1u);
  for (int64_t r = 0; r < rows; ++r) _mm512_mask_storeu_ps(out + r * stride, m, acc[r]);
}

// OutputBlockAvx2 in AVX-512: a 512-bit accumulator per row and panel of 16
// columns, two panels (32 columns) a pass (eight chains of fused
// multiply-adds in flight), each output the same fused multiply-adds along
// j in order as there (the same bytes). Keys [0, end) only.
__attribute__((target("avx512f"))) void OutputBlockAvx512(const float* p, int64_t sk, int64_t end,
                                                          const float* value_panels, int64_t dv, int64_t rows,
                                                          float* out) {
  static_assert(kRows == 4);
  const float *p0 = p, *p1 = p + sk, *p2 = p + 2 * sk, *p3 = p + 3 * sk;
  int64_t c0 = 0;
  for (; c0 + 16 < dv; c0 += 32) {  // a second panel with at least one column
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, b0 = a0, b1 = a0, b2 = a0, b3 = a0;
    const float* va = value_panels + c0 * sk;
    const float* vb = va + 16 * sk;
    for (int64_t j = 0; j < end; ++j) {
      const __m512 x0 = _mm512_loadu_ps(va + j * 16), x1 = _mm512_loadu_ps(vb + j * 16);
      __m512 w = _mm512_set1_ps(p0[j]);
      a0 = _mm512_fmadd_ps(w, x0, a0);
      b0 = _mm512_fmadd_ps(w, x1, b0);
      w = _mm512_set1_ps(p1[j]);
      a1 = _mm512_fmadd_ps(w, x0, a1);
      b1 = _mm512_fmadd_ps(w, x1, b1);
      w = _mm512_set1_ps(p2[j]);
      a2 = _mm512_fmadd_ps(w, x0, a2);
      b2 = _mm512_fmadd_ps(w, x1, b2);
      w = _mm512_set1_ps(p3[j]);
      a3 = _mm512_fmadd_ps(w, x0, a3);
      b3 = _mm512_fmadd_ps(w, x1, b3);
    }
    const __m512 first[4] = {a0, a1, a2, a3}, second[4] = {b0, b1, b2, b3};
    StoreRows16(out + c0, dv, rows, 16, first);
    StoreRows16(out + c0 + 16, dv, rows, dv - c0 - 16, second);
  }
  if (c0 < dv) {  // one panel left
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    const float* va = value_panels + c0 * sk;
    for (int64_t j = 0; j < end; ++j) {
      const __m512 x0 = _mm512_loadu_ps(va + j * 16);
      a0 = _mm512_fmadd_ps(_mm512_set1_ps(p0[j]), x0, a0);
      a1 = _mm512_fmadd_ps(_mm512_set1_ps(p1[j]), x0, a1);
      a2 = _mm512_fmadd_ps(_mm512_set1_ps(p2[j]), x0, a2);
      a3 = _mm512_fmadd_ps(_mm512_set1_ps(p3[j]), x0, a3);
    }
    const __m512 acc[4] = {a0, a1, a2, a3};
    StoreRows16(out + c0, dv, rows, dv - c0, acc);
  }
}

// x * s or x / s along a row (the same IEEE operation per element).
__attribute__((target("avx2,fma"))) void ScaleRowAvx2(float* x, int64_t n, AttentionScaleOp op, float s) {
  const __m256 sv = _mm256_set1_ps(s);
  int64_t j = 0;
  if (op == AttentionScaleOp::kMul) {
    for (; j + 8 <= n; j += 8) _mm256_storeu_ps(x + j, _mm256_mul_ps(_mm256_loadu_ps(x + j), sv));
    for (; j < n; ++j) x[j] *= s;
  } else {
    for (; j + 8 <= n; j += 8) _mm256_storeu_ps(x + j, _mm256_div_ps(_mm256_loadu_ps(x + j), sv));
    for (; j < n; ++j) x[j] /= s;
  }
}

// OutputBlockAvx2 for dv <= 8: one vector of columns per row, the keys
// taken two at a time into two accumulators per row (the products of the
// even keys and of the odd ones summed apart, then added): eight chains of
// fused multiply-adds in flight instead of four.
__attribute__((target("avx2,fma"))) void OutputBlock8Avx2(const float* p, int64_t sk, int64_t end,
                                                          const float* value_panels, int64_t dv, int64_t rows,
                                                          float* out) {
  static_assert(kRows == 4);
  __m256 a00 = _mm256_setzero_ps(), a01 = a00, a10 = a00, a11 = a00, a20 = a00, a21 = a00, a30 = a00, a31 = a00;
  const float* vj = value_panels;
  int64_t j = 0;
  for (; j + 2 <= end; j += 2, vj += 32) {
    const __m256 v0 = _mm256_loadu_ps(vj), v1 = _mm256_loadu_ps(vj + 16);
    a00 = _mm256_fmadd_ps(_mm256_broadcast_ss(p + j), v0, a00);
    a01 = _mm256_fmadd_ps(_mm256_broadcast_ss(p + j + 1), v1, a01);
    a10 = _mm256_fmadd_ps(_mm256_broadcast_ss(p + sk + j), v0, a10);
    a11 = _mm256_fmadd_ps(_mm256_broadcast_ss(p + sk + j + 1), v1, a11);
    a20 = _mm256_fmadd_ps(_mm256_broadcast_ss(p + 2 * sk + j), v0, a20);
    a21 = _mm256_fmadd_ps(_mm256_broadcast_ss(p + 2 * sk + j + 1), v1, a21);
    a30 = _mm256_fmadd_ps(_mm256_broadcast_ss(p + 3 * sk + j), v0, a30);
    a31 = _mm256_fmadd_ps(_mm256_broadcast_ss(p + 3 * sk + j + 1), v1, a31);
  }
  if (j < end) {
    const __m256 v0 = _mm256_loadu_ps(vj);
    a00 = _mm256_fmadd_ps(_mm256_broadcast_ss(p + j), v0, a00);
    a10 = _mm256_fmadd_ps(_mm256_broadcast_ss(p + sk + j), v0, a10);
    a20 = _mm256_fmadd_ps(_mm256_broadcast_ss(p + 2 * sk + j), v0, a20);
    a30 = _mm256_fmadd_ps(_mm256_broadcast_ss(p + 3 * sk + j), v0, a30);
  }
  const __m256 acc[4] = {_mm256_add_ps(a00, a01), _mm256_add_ps(a10, a11), _mm256_add_ps(a20, a21),
                         _mm256_add_ps(a30, a31)};
  alignas(32) float tail[8];
  for (int64_t r = 0; r < rows; ++r) {
    if (dv == 8) {
      _mm256_storeu_ps(out + r * dv, acc[r]);
    } else {
      _mm256_store_ps(tail, acc[r]);
      std::memcpy(out + r * dv, tail, static_cast<size_t>(dv) * sizeof(float));
    }
  }
}

// x[j] += add[j] (an added mask whose keys are contiguous).
__attribute__((target("avx2,fma"))) void AddRowAvx2(float* x, const float* add, int64_t n) {
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) _mm256_storeu_ps(x + j, _mm256_add_ps(_mm256_loadu_ps(x + j), _mm256_loadu_ps(add + j)));
  for (; j < n; ++j) x[j] += add[j];
}

// One past the last key in [from, to) a Where condition whose keys are
// contiguous keeps ((cond[j] != 0) != fill_if_true), or `from` when it keeps
// none there: 32 keys at a time from the end.
__attribute__((target("avx2,fma"))) int64_t LastKeptAvx2(const uint8_t* cond, int64_t from, int64_t to,
                                                         bool fill_if_true) {
  const __m256i zero = _mm256_setzero_si256();
  int64_t j = to;
  for (; j - 32 >= from; j -= 32) {
    // Bit b set where byte b is zero; kept keys are the zeros (fill where
    // true) or the others.
    const __m256i bytes = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(cond + j - 32));
    const uint32_t zeros = static_cast<uint32_t>(_mm256_movemask_epi8(_mm256_cmpeq_epi8(bytes, zero)));
    const uint32_t kept = fill_if_true ? zeros : ~zeros;
    if (kept != 0) return j - __builtin_clz(kept);  // one past the highest kept byte of [j - 32, j)
  }
  for (; j > from; --j) {
    if ((cond[j - 1] != 0) != fill_if_true) return j;
  }
  return from;
}

// x[j] = fill where (cond[j] != 0) == fill_if_true (a Where condition whose
// keys are contiguous), eight at a time.
__attribute__((target("avx2,fma"))) void WhereRowAvx2(float* x, const uint8_t* cond, int64_t n, float fill,
                                                      bool fill_if_true) {
  const __m256 fv = _mm256_set1_ps(fill);
  const __m256i zero = _mm256_setzero_si256();
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    int64_t bytes;
    std::memcpy(&bytes, cond + j, sizeof(bytes));
    const __m256i c = _mm256_cvtepu8_epi32(_mm_cvtsi64_si128(bytes));
    __m256i is_zero = _mm256_cmpeq_epi32(c, zero);  // all ones where cond[j] == 0
    const __m256 pick = _mm256_castsi256_ps(fill_if_true ? _mm256_xor_si256(is_zero, _mm256_set1_epi32(-1)) : is_zero);
    _mm256_storeu_ps(x + j, _mm256_blendv_ps(_mm256_loadu_ps(x + j), fv, pick));
  }
  for (; j < n; ++j) {
    if ((cond[j] != 0) == fill_if_true) x[j] = fill;
  }
}

__attribute__((target("avx2,fma"))) inline __m256 ScaledAvx2(__m256 x, AttentionScaleOp op, __m256 s) {
  return op == AttentionScaleOp::kMul ? _mm256_mul_ps(x, s) : (op == AttentionScaleOp::kDiv ? _mm256_div_ps(x, s) : x);
}

// One query row's scores, K read in place (no packing: a decode step reads
// each key once): scores[j] = sum_c q[c] * K'[j][c].
__attribute__((target("avx2,fma"))) void RowScoresAvx2(const float* q, const float* k, int64_t k_js, int64_t k_ds,
                                                       AttentionScaleOp op, float scale, int64_t sk, int64_t d,
                                                       float* scores) {
  const __m256 sv = _mm256_set1_ps(scale);
  if (k_ds == 1) {  // K's rows are contiguous: a dot product per key, 8 lanes then their sum
    for (int64_t j = 0; j < sk; ++j) {
      const float* kj = k + j * k_js;
      __m256 acc = _mm256_setzero_ps();
      int64_t c = 0;
      for (; c + 8 <= d; c += 8)
        acc = _mm256_fmadd_ps(_mm256_loadu_ps(q + c), ScaledAvx2(_mm256_loadu_ps(kj + c), op, sv), acc);
      alignas(32) float lanes[8];
      _mm256_store_ps(lanes, acc);
      float sum = ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) + ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]));
      for (; c < d; ++c) sum = std::fma(q[c], Scaled(kj[c], op, scale), sum);
      scores[j] = sum;
    }
    return;
  }
  // Kᵀ's rows are contiguous (k_js == 1): along the keys, per head dim.
  std::fill(scores, scores + sk, 0.0f);
  for (int64_t c = 0; c < d; ++c) {
    const float* kc = k + c * k_ds;
    const __m256 qc = _mm256_set1_ps(q[c]);
    int64_t j = 0;
    for (; j + 8 <= sk; j += 8) {
      _mm256_storeu_ps(scores + j,
                       _mm256_fmadd_ps(qc, ScaledAvx2(_mm256_loadu_ps(kc + j), op, sv), _mm256_loadu_ps(scores + j)));
    }
    for (; j < sk; ++j) scores[j] = std::fma(q[c], Scaled(kc[j], op, scale), scores[j]);
  }
}

// One output row: sum_j p[j] * V[j], V's rows read in place.
__attribute__((target("avx2,fma"))) void RowOutputAvx2(const float* p, const float* v, int64_t sk, int64_t dv,
                                                       float* out) {
  std::fill(out, out + dv, 0.0f);
  for (int64_t j = 0; j < sk; ++j) {
    const float* vj = v + j * dv;
    const __m256 pj = _mm256_set1_ps(p[j]);
    int64_t c = 0;
    for (; c + 8 <= dv; c += 8)
      _mm256_storeu_ps(out + c, _mm256_fmadd_ps(pj, _mm256_loadu_ps(vj + c), _mm256_loadu_ps(out + c)));
    for (; c < dv; ++c) out[c] = std::fma(p[j], vj[c], out[c]);
  }
}

// The CPU's own flags, the OS's saved AVX state included (cpu_features.h).
bool HasAvx2() { return UseAvx2Kernels(); }
#endif

struct CpuAttention {
  AttentionLayout l;
  bool pack_k = true;  // false: K is given as Kᵀ, unscaled, and is read in place
  bool avx2 = false;   // the AVX2/FMA blocks (chosen at prepare, by the CPU)
  bool avx512 = false;  // with them, the row softmax and the scores and output blocks in AVX-512 where the CPU has it
  // With AVX2, fewer query rows than a block: each row reads K and V in
  // place (a decode step), nothing is packed.
  bool rows_in_place = false;
  // With the AVX2 blocks and one mask, a Where filling -inf (a causal
  // mask): a block's keys past the last one any of its rows keeps are
  // skipped (their probabilities are exact zeros; see TrimmedKeys).
  bool trim = false;
  // Scratch for this many heads' panels at once: with the AVX2 blocks,
  // intra-op threads and several heads too small each to split their rows
  // (a GPT block's 4 x 4 heads of 64 rows), whole heads go to the threads.
  int64_t head_slots = 1;
};

absl::StatusOr<ir::PreparedKernel> PrepareAttention(const ir::KernelContext& ctx) {
  absl::StatusOr<AttentionLayout> l = backends::PlanAttention(ctx);
  if (!l.ok()) return l.status();
  if (l->dtype != DType::kF32) {
    return ctx.Error(absl::StrCat("Q has dtype ", DTypeName(l->dtype), "; the CPU kernel computes in f32 only"));
  }
  CpuAttention a;
  a.l = *l;
  a.pack_k = !(l->attrs.k_transposed && l->attrs.k_scale.op == AttentionScaleOp::kNone);
#if defined(GROVE_ATTENTION_AVX2)
  a.avx2 = simd_allowed.load(std::memory_order_relaxed) && HasAvx2();
  a.avx512 = a.avx2 && avx512_allowed.load(std::memory_order_relaxed) && HostCpuFeatures().avx512f;
  a.rows_in_place = a.avx2 && l->sq < kRows;
  // A finite fill trims too when it is so far below any score that exp
  // gives exact zeros (kTrimmableFill), except in a row that keeps no key:
  // there the fills share the row evenly, over all sk keys.
  a.trim = a.avx2 && !a.rows_in_place && l->has_mask(0) && !l->has_mask(1) &&
           l->attrs.masks[0].kind == AttentionMaskKind::kWhere && ir::IsTrimmableFill(l->attrs.masks[0].fill);
#endif
  WorkspaceLayout ws;
  const int64_t sk16 = (l->sk + 15) / 16 * 16, dv16 = (l->dv + 15) / 16 * 16;
  ir::IntraOpThreads* threads = IntraOpThreadsOf(ctx);
  if (a.avx2 && !a.rows_in_place && threads != nullptr && threads->num_threads() > 1 && l->b0 * l->b1 > 1 &&
      (sk16 * l->d + dv16 * l->sk) * kSlots <= kHeadSlotFloats) {
    a.head_slots = kSlots;
  }
  if (a.rows_in_place) {
    // nothing packed
  } else if (a.avx2) {
    for (int64_t slot = 0; slot < a.head_slots; ++slot) {
      ws.Add<float>(sk16 * l->d);   // key panels
      ws.Add<float>(dv16 * l->sk);  // value panels
    }
  } else if (a.pack_k) {
    ws.Add<float>(l->d * l->sk);  // Kᵀ
  }
  for (int64_t slot = 0; slot < kSlots; ++slot) {
    ws.Add<float>(kRows * l->sk);  // scores, then probabilities
    ws.Add<float>(kRows * l->d);   // scaled query rows
  }
  return backends::MakePrepared(std::move(a), ws.bytes());
}

absl::Status AttentionKernel(ir::KernelContext& ctx) {
  const CpuAttention* a = backends::PreparedParams<CpuAttention>(ctx);
  if (a == nullptr) return backends::NotPrepared(ctx, "CPU");
  const AttentionLayout& l = a->l;
  if (l.empty()) return absl::OkStatus();
  float* out = ctx.output(0).as<float>();
  if (l.sk == 0) {  // an empty softmax times an empty V: zeros, as MatMul with K = 0 gives
    std::fill(out, out + l.b0 * l.b1 * l.sq * l.dv, 0.0f);
    return absl::OkStatus();
  }
  const float* q = ctx.input(0).as<const float>();
  const float* k = ctx.input(1).as<const float>();
  const float* v = ctx.input(2).as<const float>();
  // Each mask: an added f32 tensor or a Where condition, as given.
  struct Mask {
    AttentionMaskKind kind = AttentionMaskKind::kNone;
    const float* add = nullptr;
    const uint8_t* cond = nullptr;
    float fill = 0;
    bool fill_if_true = true;
  } masks[2];
  for (int m = 0; m < 2; ++m) {
    if (!l.has_mask(m)) continue;
    masks[m].kind = l.attrs.masks[m].kind;
    masks[m].add = masks[m].kind == AttentionMaskKind::kAdd ? ctx.input(3 + m).as<const float>() : nullptr;
    masks[m].cond =
        masks[m].kind == AttentionMaskKind::kWhere ? static_cast<const uint8_t*>(ctx.input(3 + m).data) : nullptr;
    masks[m].fill = static_cast<float>(l.attrs.masks[m].fill);
    masks[m].fill_if_true = l.attrs.masks[m].fill_if_true;
  }
  const ir::AttentionAttrs& at = l.attrs;
  const float q_s = static_cast<float>(at.q_scale.value), k_s = static_cast<float>(at.k_scale.value);
  const float s_s = static_cast<float>(at.scale.value);
  const int64_t sq = l.sq, sk = l.sk, d = l.d, dv = l.dv;

  WorkspaceCursor ws(ctx.workspace());
  const int64_t sk16 = (sk + 15) / 16 * 16, dv16 = (dv + 15) / 16 * 16;
  const bool panels = a->avx2 && !a->rows_in_place;
  float* slot_key_panels[kSlots] = {};
  float* slot_value_panels[kSlots] = {};
  for (int64_t slot = 0; panels && slot < a->head_slots; ++slot) {
    slot_key_panels[slot] = ws.Take<float>(sk16 * d);
    slot_value_panels[slot] = ws.Take<float>(dv16 * sk);
  }
  float* kt_buf = !a->avx2 && a->pack_k ? ws.Take<float>(d * sk) : nullptr;
  float* slot_scores[kSlots];
  float* slot_q[kSlots];
  for (int64_t slot = 0; slot < kSlots; ++slot) {
    slot_scores[slot] = ws.Take<float>(kRows * sk);
    slot_q[slot] = ws.Take<float>(kRows * d);
  }
  ir::IntraOpThreads* threads = IntraOpThreadsOf(ctx);
  const int64_t blocks = (sq + kRows - 1) / kRows;
  int64_t tasks = 1;
  if (threads != nullptr && threads->num_threads() > 1) {
    // In double: the product of a model's dims may pass 2^63 (such a run
    // would never end, but the count must not overflow on the way).
    const double work = static_cast<double>(blocks) * kRows * static_cast<double>(sk) * static_cast<double>(d + dv);
    const int64_t by_work = work / kTaskMultiplyAdds >= kSlots ? kSlots : static_cast<int64_t>(work / kTaskMultiplyAdds);
    tasks = std::min({kSlots, threads->num_threads() * kRangesPerThread, blocks, std::max<int64_t>(1, by_work)});
  }
  // With a panel slot per task (head_slots), the heads' blocks as one range
  // split over one Run instead: a task packs each head it reaches into its
  // own slot (a head split over two tasks is packed twice: sk (d + dv)
  // floats copied against its blocks' sq sk (d + dv) multiply-adds) and
  // runs its share of that head's blocks. One fork and join a run rather
  // than one a head, and tasks of a few blocks keep both threads busy to
  // the end: per-head Runs of a few tens of microseconds (the exported
  // encoder's 4 heads of 8 dims over 256 tokens) cost what the second
  // thread saved.
  const int64_t heads = l.b0 * l.b1;
  int64_t flat_tasks = 1;
  if (a->head_slots > 1 && threads != nullptr && threads->num_threads() > 1) {
    const double work = static_cast<double>(heads) * static_cast<double>(blocks) * kRows * static_cast<double>(sk) *
                        static_cast<double>(d + dv);
    const int64_t by_work = work / kTaskMultiplyAdds >= kSlots ? kSlots : static_cast<int64_t>(work / kTaskMultiplyAdds);
    const double all_blocks = static_cast<double>(heads) * static_cast<double>(blocks);
    flat_tasks = std::min({a->head_slots, threads->num_threads() * kRangesPerThread,
                           all_blocks >= kSlots ? kSlots : static_cast<int64_t>(all_blocks), std::max<int64_t>(1, by_work)});
  }

  // Head h (b0 * l.b1 + b1): its K and V packed into slot `slot`'s panels,
  // then its blocks [first, end) on that slot (a task of the flat split), or
  // all of them split over `tasks` tasks (slot < 0).
  auto run_head = [&](int64_t h, int64_t slot, int64_t first_block, int64_t end_block) {
    {
      const int64_t b0 = h / l.b1, b1 = h % l.b1;
      float* key_panels = slot_key_panels[std::max<int64_t>(slot, 0)];
      float* value_panels = slot_value_panels[std::max<int64_t>(slot, 0)];
      const float* qh = q + b0 * l.q_b0 + b1 * l.q_b1;
      const float* kh = k + b0 * l.k_b0 + b1 / l.kv_group * l.k_b1;
      const float* vh = v + b0 * l.v_b0 + b1 / l.kv_group * l.v_b1;
      float* oh = out + (b0 * l.b1 + b1) * sq * dv;
      const float* kt = kh;  // Kᵀ [d, sk]
#if defined(GROVE_ATTENTION_AVX2)
      if (panels) {
        PackKeyPanels(kh, l.k_js, l.k_ds, at.k_scale.op, k_s, sk, d, key_panels);
        PackValuePanels(vh, sk, dv, value_panels);
      }
#endif
      if (kt_buf != nullptr) {  // the plain loops' Kᵀ
        for (int64_t c = 0; c < d; ++c) {
          float* row = kt_buf + c * sk;
          for (int64_t j = 0; j < sk; ++j) row[j] = Scaled(kh[j * l.k_js + c * l.k_ds], at.k_scale.op, k_s);
        }
        kt = kt_buf;
      }
      // Blocks [first, end) of this head on scratch slot `slot`; each block is
      // computed the same way whichever task runs it.
      auto run_blocks = [&](int64_t slot, int64_t first, int64_t end) {
        float* scores = slot_scores[slot];
        float* qbuf = slot_q[slot];
        for (int64_t i0 = first * kRows; i0 < end * kRows && i0 < sq; i0 += kRows) {
          const int64_t rows = std::min(kRows, sq - i0);
          for (int64_t r = 0; r < rows; ++r) {
            const float* qr = qh + (i0 + r) * d;
            for (int64_t c = 0; c < d; ++c) qbuf[r * d + c] = Scaled(qr[c], at.q_scale.op, q_s);
          }
          // Rows past the last query: zeros in, never stored out.
          std::fill(qbuf + rows * d, qbuf + kRows * d, 0.0f);
          // The keys [0, n) whose scores are computed: all of them, or with
          // a causal mask up to the last one a row of the block keeps. The
          // keys after are filled with -inf by the mask whatever their score,
          // so exp gives exact zeros there and they add nothing to the sum
          // or the output: the bytes are the same as over all sk keys
          // (unless V holds inf or NaN at a masked key, whose 0 * inf the
          // full sum would turn into NaN). A block whose rows keep no key
          // takes them all (NaN rows, as Softmax makes them).
          int64_t n = sk;
          if (a->trim) {
            const Mask& mk = masks[0];
            const AttentionLayout::MaskStrides& ms = l.masks[0];
            const bool finite = !std::isinf(mk.fill);
            n = 0;
            for (int64_t r = 0; r < rows; ++r) {
              const uint8_t* cond = mk.cond + b0 * ms.b0 + b1 * ms.b1 + (i0 + r) * ms.i;
              auto masked = [&](int64_t j) { return (cond[j * ms.j] != 0) == mk.fill_if_true; };
              int64_t j = sk;
              bool scanned = false;
#if defined(GROVE_ATTENTION_AVX2)
              if (ms.j == 1) {
                j = LastKeptAvx2(cond, n, sk, mk.fill_if_true);
                scanned = true;
              }
#endif
              if (!scanned) {
                while (j > n && masked(j - 1)) --j;
              }
              if (finite && j == n) {  // none kept from n on: a finite fill over a whole row counts every key
                int64_t k = 0;
                while (k < n && masked(k)) ++k;
                if (k == n) {
                  n = sk;
                  break;
                }
              }
              n = std::max(n, j);
            }
            if (n == 0) n = sk;
          }
#if defined(GROVE_ATTENTION_AVX2)
          if (a->rows_in_place) {
            for (int64_t r = 0; r < rows; ++r) {
              RowScoresAvx2(qbuf + r * d, kh, l.k_js, l.k_ds, at.k_scale.op, k_s, sk, d, scores + r * sk);
            }
          } else if (a->avx512) {
            ScoresBlockAvx512(qbuf, d, key_panels, sk, n, scores);
          } else if (a->avx2) {
            ScoresBlockAvx2(qbuf, d, key_panels, sk, n, scores);
          } else {
            ScoresBlock(qbuf, d, kt, sk, scores);
          }
#else
          ScoresBlock(qbuf, d, kt, sk, scores);
#endif
          for (int64_t r = 0; r < rows; ++r) {
            float* sr = scores + r * sk;
            bool scaled = false;
#if defined(GROVE_ATTENTION_AVX2)
            if (a->avx2 && at.scale.op != AttentionScaleOp::kNone) {
              ScaleRowAvx2(sr, n, at.scale.op, s_s);
              scaled = true;
            }
#endif
            if (!scaled && at.scale.op == AttentionScaleOp::kMul) {
              for (int64_t j = 0; j < sk; ++j) sr[j] *= s_s;
            } else if (!scaled && at.scale.op == AttentionScaleOp::kDiv) {
              for (int64_t j = 0; j < sk; ++j) sr[j] /= s_s;
            }
            for (int m = 0; m < 2; ++m) {
              const Mask& mk = masks[m];
              const AttentionLayout::MaskStrides& ms = l.masks[m];
              const int64_t row = b0 * ms.b0 + b1 * ms.b1 + (i0 + r) * ms.i;
#if defined(GROVE_ATTENTION_AVX2)
              if (a->avx2 && ms.j == 1 && mk.add != nullptr) {
                AddRowAvx2(sr, mk.add + row, n);
                continue;
              }
              if (a->avx2 && ms.j == 1 && mk.cond != nullptr) {
                WhereRowAvx2(sr, mk.cond + row, n, mk.fill, mk.fill_if_true);
                continue;
              }
#endif
              if (mk.add != nullptr) {
                for (int64_t j = 0; j < n; ++j) sr[j] += mk.add[row + j * ms.j];
              } else if (mk.cond != nullptr) {
                for (int64_t j = 0; j < n; ++j) {
                  if ((mk.cond[row + j * ms.j] != 0) == mk.fill_if_true) sr[j] = mk.fill;
                }
              }
            }
            bool done = false;
#if defined(GROVE_ATTENTION_AVX2)
            if (a->avx2) {
              if (a->avx512) {
                SoftmaxRowAvx512(sr, n);
              } else {
                SoftmaxRowAvx2(sr, n);
              }
              done = true;
            }
#endif
            if (!done) {
              // The Softmax kernel's arithmetic (an all -inf row gives NaN,
              // as there).
              float m = sr[0];
              for (int64_t j = 1; j < sk; ++j) m = sr[j] > m ? sr[j] : m;
              double total = 0;
              for (int64_t j = 0; j < sk; ++j) {
                sr[j] = std::exp(sr[j] - m);
                total += sr[j];
              }
              const float inv = static_cast<float>(1.0 / total);
              for (int64_t j = 0; j < sk; ++j) sr[j] *= inv;
            }
            // Where(IsNaN(p), 0, p): an all-masked row's NaNs become zeros.
            if (at.zero_nan_probs) {
              for (int64_t j = 0; j < n; ++j) {
                if (std::isnan(sr[j])) sr[j] = 0.0f;
              }
            }
          }
#if defined(GROVE_ATTENTION_AVX2)
          if (a->rows_in_place) {
            for (int64_t r = 0; r < rows; ++r) RowOutputAvx2(scores + r * sk, vh, sk, dv, oh + (i0 + r) * dv);
          } else if (a->avx2) {
            if (dv <= 8) {
              OutputBlock8Avx2(scores, sk, n, value_panels, dv, rows, oh + i0 * dv);
            } else if (a->avx512) {
              OutputBlockAvx512(scores, sk, n, value_panels, dv, rows, oh + i0 * dv);
            } else {
              OutputBlockAvx2(scores, sk, n, value_panels, dv, rows, oh + i0 * dv);
            }
          } else {
            OutputBlock(scores, sk, vh, dv, rows, oh + i0 * dv);
          }
#else
          OutputBlock(scores, sk, vh, dv, rows, oh + i0 * dv);
#endif
        }
      };
      if (slot >= 0) {
        run_blocks(slot, first_block, end_block);
      } else if (tasks <= 1) {
        run_blocks(0, 0, blocks);
      } else {
        const int64_t base = blocks / tasks, extra = blocks % tasks;
        threads->Run(tasks, [&](int64_t t) {
          const int64_t first = t * base + std::min(t, extra);
          run_blocks(t, first, first + base + (t < extra ? 1 : 0));
        });
      }
    }
  };
  if (flat_tasks > 1) {
    // Blocks of all heads in order (head h's are h * blocks .. h * blocks +
    // blocks - 1), in flat_tasks near-equal ranges; heads * blocks is
    // below 2^63 (a tensor's elements are).
    const int64_t all = heads * blocks;
    const int64_t base = all / flat_tasks, extra = all % flat_tasks;
    threads->Run(flat_tasks, [&](int64_t t) {
      const int64_t first = t * base + std::min(t, extra), end = first + base + (t < extra ? 1 : 0);
      for (int64_t h = first / blocks; h * blocks < end; ++h) {
        run_head(h, t, std::max(first, h * blocks) - h * blocks, std::min(end, h * blocks + blocks) - h * blocks);
      }
    });
  } else {
    for (int64_t h = 0; h < heads; ++h) run_head(h, -1, 0, blocks);
  }
  return absl::OkStatus();
}

}  // namespace

void SetAttentionSimdAllowed(bool allowed) { simd_allowed.store(allowed, std::memory_order_relaxed); }
void SetAttentionAvx512Allowed(bool allowed) { avx512_allowed.store(allowed, std::memory_order_relaxed); }

absl::Status RegisterAttentionKernels(ir::OpRegistry& registry) {
  return registry.SetKernel(ir::kFusedAttentionOp, ir::Backend::kCpu,
                            ir::KernelDef{&AttentionKernel, &PrepareAttention});
}

}  // namespace grove::cpu
