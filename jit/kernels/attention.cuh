// FusedAttention: softmax(mask2(mask(scale(Q'·K'ᵀ)))) · V for one query row per
// warp. Keys come in tiles of 32, one per lane: the lane computes its score
// (Q' and K' scaled element by element as the unfused chain did, then the
// scale and the mask), the warp takes the tile's max, rescales its running
// sum and output columns by exp(old max - new max) and adds exp(s - max) and
// exp(s - max) * V[j] (online softmax; each lane owns kAttnColsPerLane
// columns of the output per pass over the keys). A row whose scores are all
// -inf gives NaN, as Softmax gives exp(-inf - -inf) there (with
// zero_nan_probs: 0, as Where(IsNaN(p), 0, p) then MatMul give); no keys give 0.
#ifndef GROVE_JIT_KERNELS_ATTENTION_CUH_
#define GROVE_JIT_KERNELS_ATTENTION_CUH_

#include "jit/kernels/attention_params.h"
#include "jit/kernels/prelude.cuh"
#include "jit/kernels/reduce_common.cuh"

namespace grove_k {
namespace attn {

using rdx::g_exp;
using rdx::inf_f32;

GROVE_DEVICE float scaled(float x, int op, float s) {
  return op == kAttnScaleMul ? x * s : (op == kAttnScaleDiv ? x / s : x);
}

template <typename T>
GROVE_DEVICE void attention(const AttentionParams& p) {
  const T* Q = static_cast<const T*>(p.q);
  const T* K = static_cast<const T*>(p.k);
  const T* V = static_cast<const T*>(p.v);
  T* O = static_cast<T*>(p.out);
  const int lane = static_cast<int>(threadIdx.x & 31u);
  const i64 warp = global_thread() >> 5;
  const i64 warps = grid_threads() >> 5;
  const i64 rows = p.b0 * p.b1 * p.sq;
  const float neg_inf = -inf_f32();
  for (i64 row = warp; row < rows; row += warps) {
    const i64 i = row % p.sq;
    const i64 bb = row / p.sq;
    const i64 b1 = bb % p.b1, b0 = bb / p.b1;
    const T* q = Q + b0 * p.q_b0 + b1 * p.q_b1 + i * p.d;
    const T* k = K + b0 * p.k_b0 + b1 / p.kv_group * p.k_b1;
    const T* v = V + b0 * p.v_b0 + b1 / p.kv_group * p.v_b1;
    T* o = O + row * p.dv;
    for (i64 c0 = 0; c0 < p.dv; c0 += 32 * kAttnColsPerLane) {
      float acc[kAttnColsPerLane];
      for (int t = 0; t < kAttnColsPerLane; ++t) acc[t] = 0.0f;
      float m = neg_inf, l = 0.0f;
      for (i64 j0 = 0; j0 < p.sk; j0 += 32) {
        const i64 j = j0 + lane;
        float s = neg_inf;
        if (j < p.sk) {
          float dot = 0.0f;
          const T* kj = k + j * p.k_js;
          for (i64 c = 0; c < p.d; ++c) {
            dot += scaled(to_f32(q[c]), p.q_scale_op, p.q_scale) * scaled(to_f32(kj[c * p.k_ds]), p.k_scale_op, p.k_scale);
          }
          s = scaled(dot, p.scale_op, p.scale);
          for (int mi = 0; mi < 2; ++mi) {
            const AttnMaskParams& mk = p.masks[mi];
            const i64 off = b0 * mk.b0 + b1 * mk.b1 + i * mk.i + j * mk.j;
            if (mk.kind == kAttnMaskAdd) {
              s = s + to_f32(static_cast<const T*>(mk.data)[off]);
            } else if (mk.kind == kAttnMaskWhere) {
              const bool cond = static_cast<const u8*>(mk.data)[off] != 0;
              if (cond == (mk.fill_if_true != 0)) s = mk.fill;
            }
          }
        }
        // The tile's max; NaN scores do not raise it (as Softmax's max) but
        // make their exp, and so the row, NaN.
        float tmax = s;
        for (int off = 16; off > 0; off >>= 1) {
          const float other = __shfl_xor_sync(0xffffffffu, tmax, off);
          tmax = other > tmax ? other : tmax;
        }
        const float m_new = tmax > m ? tmax : m;
        if (m_new == neg_inf) continue;  // every score so far is -inf: nothing to add yet (warp-uniform)
        const float corr = g_exp(m - m_new);
        const float pj = j < p.sk ? g_exp(s - m_new) : 0.0f;
        l = l * corr + warp_sum(pj);
        for (int t = 0; t < kAttnColsPerLane; ++t) acc[t] *= corr;
        const i64 tile = p.sk - j0 < 32 ? p.sk - j0 : 32;
        for (i64 kk = 0; kk < tile; ++kk) {
          const float pk = __shfl_sync(0xffffffffu, pj, static_cast<int>(kk));
          const T* vr = v + (j0 + kk) * p.dv;
          for (int t = 0; t < kAttnColsPerLane; ++t) {
            const i64 c = c0 + t * 32 + lane;
            if (c < p.dv) acc[t] += pk * to_f32(vr[c]);
          }
        }
        m = m_new;
      }
      for (int t = 0; t < kAttnColsPerLane; ++t) {
        const i64 c = c0 + t * 32 + lane;
        if (c >= p.dv) continue;
        float r;
        if (p.sk == 0) {
          r = 0.0f;
        } else if (p.zero_nan_probs != 0 && (m == neg_inf || l != l)) {
          // Softmax's probabilities are all NaN here (every score -inf, or
          // a NaN or +inf score made the sum NaN); counted as zeros, the
          // row is sum_j 0 * V[j]: NaN where a V[j] is inf or NaN, else 0.
          r = 0.0f;
          for (i64 j = 0; j < p.sk; ++j) {
            const float x = to_f32(v[j * p.dv + c]);
            if (!(x - x == 0.0f)) r = neg_inf - neg_inf;
          }
        } else if (m == neg_inf) {
          r = neg_inf - neg_inf;  // NaN
        } else {
          r = acc[t] / l;
        }
        o[c] = from_f32<T>(r);
      }
    }
  }
}

}  // namespace attn
}  // namespace grove_k

#endif  // GROVE_JIT_KERNELS_ATTENTION_CUH_

#if defined(GROVE_T0)
GROVE_ENTRY(attention, grove_k::AttentionParams) { grove_k::attn::attention<GROVE_T0>(p); }
#endif
