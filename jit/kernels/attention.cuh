// FusedAttention: softmax(mask2(mask(scale(Q'·K'ᵀ)))) · V for one query row per
// block, whose warps take its key tiles in turn and are combined at the end
// (a decode step's few rows still fill the GPU's warps). Keys come in tiles
// of 32, one per lane: the lane computes its score
// (Q' and K' scaled element by element as the unfused chain did, then the
// scale and the mask), the warp takes the tile's max, rescales its running
// sum and output columns by exp(old max - new max) and adds exp(s - max) and
// exp(s - max) * V[j] (online softmax; each lane owns kAttnColsPerLane
// columns of the output per pass over the keys). A row whose scores are all
// -inf gives NaN, as Softmax gives exp(-inf - -inf) there (with
// zero_nan_probs: 0, as Where(IsNaN(p), 0, p) then MatMul give); no keys give 0.
//
// The tiled variant (module parameters bk, bq, hd and threads 128: GROVE_V_BK,
// GROVE_V_BQ, GROVE_V_HD) is the same computation for d, dv <= hd, a block of 128
// threads per tile of bq query rows of one head: Q' (scaled) is staged in
// shared memory once, then per tile of bk keys K' is staged, each thread
// computes a (bq / 16) x (bk / 8) patch of the scores (the dot products
// summed over d in order, as above), the 8 lanes that share a row take its
// max and sum by shuffles, V's tile replaces K's in shared memory and each
// thread adds its rows' probabilities times V into a (bq / 16) x (hd / 8)
// patch of the output. Q, K and V are read from global memory once per
// tile instead of once per query row.
//
// With AttentionParams::splits > 1 the block-per-row kernel splits each
// row's keys among blocks (flash decoding: a decode step's few rows fill the
// GPU) and attention_combine merges their parts.
//
// attention_probs (module without parameters) is the Softmax of the step's
// GEMM form (lib/backends/cuda/attention.cc): the masks and Softmax over the
// f32 scores cuBLASLt wrote, as AttentionProbsParams says.
#ifndef GROVE_JIT_KERNELS_ATTENTION_CUH_
#define GROVE_JIT_KERNELS_ATTENTION_CUH_

// Both kernels launch at most 128 threads a block: compiled for that, the
// warp-per-row kernel keeps its accumulators in registers (at 1024 threads'
// cap of 64 registers it spilled 384 bytes).
#if !defined(GROVE_V_THREADS) && !defined(GROVE_MAX_THREADS)
#define GROVE_MAX_THREADS 128
#endif

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

// Score s of query i and key j of head (b0, b1) after the masks, in order.
template <typename T>
GROVE_DEVICE float masked(const AttentionParams& p, i64 b0, i64 b1, i64 i, i64 j, float s) {
  GROVE_UNROLL
  for (int mi = 0; mi < 2; ++mi) {
    const AttnMaskParams& mk = p.masks[mi];
    if (mk.kind == kAttnMaskNone) continue;  // no offset arithmetic per score without a mask
    const i64 off = b0 * mk.b0 + b1 * mk.b1 + i * mk.i + j * mk.j;
    if (mk.kind == kAttnMaskAdd) {
      s = s + to_f32(static_cast<const T*>(mk.data)[off]);
    } else if (mk.kind == kAttnMaskWhere) {
      const bool cond = static_cast<const u8*>(mk.data)[off] != 0;
      if (cond == (mk.fill_if_true != 0)) s = mk.fill;
    }
  }
  return s;
}

// Output column c of a row from its running sum `acc`, max `m` and
// denominator `l`; v is the head's V.
template <typename T>
GROVE_DEVICE float finish(const AttentionParams& p, const T* v, i64 c, float acc, float m, float l) {
  const float neg_inf = -inf_f32();
  if (p.sk == 0) return 0.0f;
  if (p.zero_nan_probs != 0 && (m == neg_inf || l != l)) {
    // Softmax's probabilities are all NaN here (every score -inf, or a NaN
    // or +inf score made the sum NaN); counted as zeros, the row is
    // sum_j 0 * V[j]: NaN where a V[j] is inf or NaN, else 0.
    float r = 0.0f;
    GROVE_NO_UNROLL
    for (i64 j = 0; j < p.sk; ++j) {
      const float x = to_f32(v[j * p.dv + c]);
      if (!(x - x == 0.0f)) r = neg_inf - neg_inf;
    }
    return r;
  }
  if (m == neg_inf) return neg_inf - neg_inf;  // NaN
  return acc / l;
}

// The key chunk of each split (see AttentionParams::splits), whole tiles.
GROVE_DEVICE i64 split_chunk(const AttentionParams& p, i64 splits) {
  const i64 chunk = (p.sk + splits - 1) / splits;
  return (chunk + 31) / 32 * 32;
}

// The max of two scores for the rows' reductions (rdx::group_all,
// rdx::lanes_all): a NaN does not raise it (as Softmax's).
template <typename A>
struct MaxOp {
  GROVE_DEVICE A combine(A a, A b) const { return b > a ? b : a; }
};

// The keys a tile of query rows [i0, i0 + rows) of head (b0, b1) reads with
// p.trim: up to the last key one of its rows keeps. The keys after it are
// masked in every row, so their probabilities are exact zeros (exp of -inf,
// or of a fill far below any score) and they add nothing: the outputs are
// those over all sk keys, unless V holds inf or NaN at such a key (0 * inf
// is NaN over all keys; the CPU kernel trims the same way). A row that keeps
// no key needs all of them under a finite fill (the fills share it evenly);
// under -inf it is NaN whatever is read. No key kept anywhere: all sk. The
// warps take rows in turn, the bottom ones first (a causal mask's longest);
// a row's keys are scanned 32 a step from the end down to what the warp
// needs already. Every thread of the block calls it.
GROVE_DEVICE i64 trimmed_keys(const AttentionParams& p, i64 b0, i64 b1, i64 i0, i64 rows) {
  const AttnMaskParams& mk = p.masks[0];
  const u8* cond = static_cast<const u8*>(mk.data) + b0 * mk.b0 + b1 * mk.b1;
  const bool finite = mk.fill != -inf_f32();
  const int lane = static_cast<int>(threadIdx.x & 31u), warp = static_cast<int>(threadIdx.x >> 5);
  const int warps = static_cast<int>(blockDim.x >> 5);
  const MaxOp<i64> max_op;
  i64 need = 0;  // the warp's: keys [0, need) are read
  if (mk.i == 0) rows = 1;  // the rows share one mask row (a padding mask): scan it once
  for (i64 r = rows - 1 - warp; r >= 0 && need < p.sk; r -= warps) {
    const u8* row = cond + (i0 + r) * mk.i;
    auto kept = [&](i64 j) { return (row[j * mk.j] != 0) != (mk.fill_if_true != 0); };
    i64 last = -1;
    for (i64 jb = p.sk; jb > need && last < 0; jb -= 32) {
      const i64 j = jb - 32 + lane;
      last = rdx::warp_all(max_op, j >= need && kept(j) ? j : i64{-1});
    }
    if (last >= 0) {
      need = last + 1;
    } else if (finite) {
      // Nothing kept from `need` on: unless it keeps one below, the row needs all.
      i64 any = -1;
      for (i64 j0 = 0; j0 < need && any < 0; j0 += 32) {
        const i64 j = j0 + lane;
        any = rdx::warp_all(max_op, j < need && kept(j) ? j : i64{-1});
      }
      if (any < 0) need = p.sk;
    }
  }
  const i64 n = rdx::block_all(max_op, need);
  return n > 0 ? n : p.sk;
}

// Work item `item` of a tiled kernel (grid-stride over heads x query tiles of
// bq rows): its head, first row and the head's Q, K and V.
template <typename T>
struct HeadTile {
  i64 b0, b1, i0;
  const T *q, *k, *v;
};
template <typename T>
GROVE_DEVICE HeadTile<T> head_tile(const AttentionParams& p, i64 item, i64 qtiles, int bq) {
  HeadTile<T> h;
  const i64 bb = item / qtiles;
  h.b1 = bb % p.b1;
  h.b0 = bb / p.b1;
  h.i0 = item % qtiles * bq;
  h.q = static_cast<const T*>(p.q) + h.b0 * p.q_b0 + h.b1 * p.q_b1;
  h.k = static_cast<const T*>(p.k) + h.b0 * p.k_b0 + h.b1 / p.kv_group * p.k_b1;
  h.v = static_cast<const T*>(p.v) + h.b0 * p.v_b0 + h.b1 / p.kv_group * p.v_b1;
  return h;
}

template <typename T>
GROVE_DEVICE void attention(const AttentionParams& p) {
  // A block per query row (per row and key split with p.splits > 1); its
  // warps (at most kAttnRowWarps) take the key tiles in turn, each with its
  // own max, sum and output columns, and warp 0 combines them through
  // shared memory.
  __shared__ float part_m[kAttnRowWarps], part_l[kAttnRowWarps];
  __shared__ float part_acc[kAttnRowWarps][32 * kAttnColsPerLane];
  const T* Q = static_cast<const T*>(p.q);
  const T* K = static_cast<const T*>(p.k);
  const T* V = static_cast<const T*>(p.v);
  T* O = static_cast<T*>(p.out);
  const int lane = static_cast<int>(threadIdx.x & 31u);
  const int w = static_cast<int>(threadIdx.x >> 5);
  const int nw = static_cast<int>(blockDim.x >> 5);
  const i64 splits = p.splits > 1 ? p.splits : 1;
  const i64 chunk = split_chunk(p, splits);
  const i64 rows = p.b0 * p.b1 * p.sq;
  const float neg_inf = -inf_f32();
  // Rows along the grid's x, splits along its y (grid-stride both ways,
  // block-uniform).
  for (i64 split = blockIdx.y; split < splits; split += gridDim.y)
  for (i64 row = blockIdx.x; row < rows; row += gridDim.x) {
    const i64 item = row * splits + split;
    const i64 j_begin = split * chunk;
    const i64 j_end = p.sk < j_begin + chunk ? p.sk : j_begin + chunk;
    const i64 i = row % p.sq;
    const i64 bb = row / p.sq;
    const i64 b1 = bb % p.b1, b0 = bb / p.b1;
    const T* q = Q + b0 * p.q_b0 + b1 * p.q_b1 + i * p.d;
    const T* k = K + b0 * p.k_b0 + b1 / p.kv_group * p.k_b1;
    const T* v = V + b0 * p.v_b0 + b1 / p.kv_group * p.v_b1;
    T* o = O + row * p.dv;
    for (i64 c0 = 0; c0 < p.dv; c0 += 32 * kAttnColsPerLane) {
      float acc[kAttnColsPerLane];
      GROVE_UNROLL
      for (int t = 0; t < kAttnColsPerLane; ++t) acc[t] = 0.0f;
      float m = neg_inf, l = 0.0f;
      for (i64 j0 = j_begin + i64{32} * w; j0 < j_end; j0 += i64{32} * nw) {
        const i64 j = j0 + lane;
        float s = neg_inf;
        if (j < j_end) {
          float dot = 0.0f;
          const T* kj = k + j * p.k_js;
          for (i64 c = 0; c < p.d; ++c) {
            dot += scaled(to_f32(q[c]), p.q_scale_op, p.q_scale) * scaled(to_f32(kj[c * p.k_ds]), p.k_scale_op, p.k_scale);
          }
          s = masked<T>(p, b0, b1, i, j, scaled(dot, p.scale_op, p.scale));
        }
        // The tile's max; NaN scores do not raise it (as Softmax's max) but
        // make their exp, and so the row, NaN.
        const float tmax = rdx::warp_all(MaxOp<float>(), s);
        const float m_new = tmax > m ? tmax : m;
        if (m_new == neg_inf) continue;  // every score so far is -inf: nothing to add yet (warp-uniform)
        const float corr = g_exp(m - m_new);
        const float pj = j < j_end ? g_exp(s - m_new) : 0.0f;
        l = l * corr + warp_sum(pj);
        GROVE_UNROLL
        for (int t = 0; t < kAttnColsPerLane; ++t) acc[t] *= corr;
        const i64 tile = j_end - j0 < 32 ? j_end - j0 : 32;
        for (i64 kk = 0; kk < tile; ++kk) {
          const float pk = __shfl_sync(0xffffffffu, pj, static_cast<int>(kk));
          const T* vr = v + (j0 + kk) * p.dv;
          GROVE_UNROLL
          for (int t = 0; t < kAttnColsPerLane; ++t) {
            const i64 c = c0 + t * 32 + lane;
            if (c < p.dv) acc[t] += pk * to_f32(vr[c]);
          }
        }
        m = m_new;
      }
      __syncthreads();  // the previous pass's parts are read
      if (lane == 0) {
        part_m[w] = m;
        part_l[w] = l;
      }
      GROVE_UNROLL
      for (int t = 0; t < kAttnColsPerLane; ++t) part_acc[w][t * 32 + lane] = acc[t];
      __syncthreads();
      if (w != 0) continue;
      // The row's max over the warps' maxima, and their sums and columns
      // rescaled to it (a warp that saw only -inf adds nothing).
      float mr = neg_inf;
      for (int x = 0; x < nw; ++x) mr = part_m[x] > mr ? part_m[x] : mr;
      float lr = 0.0f, ar[kAttnColsPerLane];
      GROVE_UNROLL
      for (int t = 0; t < kAttnColsPerLane; ++t) ar[t] = 0.0f;
      for (int x = 0; x < nw; ++x) {
        const float f = part_m[x] == neg_inf ? 0.0f : g_exp(part_m[x] - mr);
        lr += part_l[x] * f;
        GROVE_UNROLL
        for (int t = 0; t < kAttnColsPerLane; ++t) ar[t] += part_acc[x][t * 32 + lane] * f;
      }
      if (splits > 1) {  // the split's part, for attention_combine
        float* part = p.partial + item * (p.dv + 2);
        if (lane == 0) {
          part[0] = mr;
          part[1] = lr;
        }
        GROVE_UNROLL
        for (int t = 0; t < kAttnColsPerLane; ++t) {
          const i64 c = c0 + t * 32 + lane;
          if (c < p.dv) part[2 + c] = ar[t];
        }
        continue;
      }
      GROVE_UNROLL
      for (int t = 0; t < kAttnColsPerLane; ++t) {
        const i64 c = c0 + t * 32 + lane;
        if (c < p.dv) o[c] = from_f32<T>(finish(p, v, c, ar[t], mr, lr));
      }
    }
  }
}

// The rows of a split launch (AttentionParams::splits > 1), a block per row
// (grid-stride) and a thread per output column: the splits' maxima, sums
// and columns rescaled to the row's max and summed as the warps' are above
// (a split that saw only -inf, or no keys, adds nothing), then finished as
// the unsplit kernel finishes.
template <typename T>
GROVE_DEVICE void attention_combine(const AttentionParams& p) {
  const T* V = static_cast<const T*>(p.v);
  T* O = static_cast<T*>(p.out);
  const float neg_inf = -inf_f32();
  const i64 splits = p.splits > 1 ? p.splits : 1;
  const i64 rows = p.b0 * p.b1 * p.sq;
  for (i64 row = blockIdx.x; row < rows; row += gridDim.x) {
    const i64 bb = row / p.sq;
    const i64 b1 = bb % p.b1, b0 = bb / p.b1;
    const T* v = V + b0 * p.v_b0 + b1 / p.kv_group * p.v_b1;
    const float* part = p.partial + row * splits * (p.dv + 2);
    float m = neg_inf;
    for (i64 s = 0; s < splits; ++s) {
      const float ms = part[s * (p.dv + 2)];
      m = ms > m ? ms : m;
    }
    for (i64 c = threadIdx.x; c < p.dv; c += blockDim.x) {
      float l = 0.0f, acc = 0.0f;
      for (i64 s = 0; s < splits; ++s) {
        const float* ps = part + s * (p.dv + 2);
        if (ps[0] == neg_inf) continue;
        const float f = g_exp(ps[0] - m);
        l += ps[1] * f;
        acc += ps[2 + c] * f;
      }
      O[row * p.dv + c] = from_f32<T>(finish(p, v, c, acc, m, l));
    }
  }
}

// acc[r][c] += a[r] * b[c]: a thread's patch of a product, in registers.
template <int R, int C>
GROVE_DEVICE void outer_add(float (&acc)[R][C], const float (&a)[R], const float (&b)[C]) {
  GROVE_UNROLL
  for (int r = 0; r < R; ++r) {
    GROVE_UNROLL
    for (int c = 0; c < C; ++c) acc[r][c] += a[r] * b[c];
  }
}

// The tiled variant (see the top of the file). Block: 128 threads, thread t
// owns rows (t / 8) + 16 r of the query tile and columns (t % 8) + 8 c of
// the key tile and of the output; the 8 lanes of a row are neighbours.
template <typename T, int BQ, int BK, int HD>
GROVE_DEVICE void attention_tiled(const AttentionParams& p) {
  enum { kThreads = 128, kTC = 8, kTR = 16, RQ = BQ / kTR, RK = BK / kTC, RV = HD / kTC };
  static_assert(BQ % kTR == 0 && BK % kTC == 0 && HD % kTC == 0, "tiles divide among the threads");
  enum { kKvFloats = HD * (BK + 1) > BK * HD ? HD * (BK + 1) : BK * HD };
  // qs[c * (BQ + 1) + r] = Q'[i0 + r][c]; kv holds K'[j0 + j][c] at
  // c * (BK + 1) + j, then V[j0 + j][c] at j * HD + c (the padding keeps the
  // transposed stores and the reads free of bank conflicts).
  __shared__ float qs[HD * (BQ + 1)];
  __shared__ float kv[kKvFloats];
  T* O = static_cast<T*>(p.out);
  const int t = static_cast<int>(threadIdx.x);
  const int tr = t / kTC, tc = t % kTC;
  const int lane = t & 31;
  const float neg_inf = -inf_f32();
  const int dl = p.d < HD ? static_cast<int>(p.d) : HD;
  const i64 qtiles = (p.sq + BQ - 1) / BQ;
  for (i64 w = blockIdx.x; w < p.b0 * p.b1 * qtiles; w += gridDim.x) {  // block-uniform
    const HeadTile<T> h = head_tile<T>(p, w, qtiles, BQ);
    const i64 b0 = h.b0, b1 = h.b1, i0 = h.i0;
    const T *q = h.q, *k = h.k, *v = h.v;
    for (int e = t; e < BQ * HD; e += kThreads) {
      const int r = e / HD, c = e % HD;
      float x = 0.0f;
      if (i0 + r < p.sq && c < p.d) x = scaled(to_f32(q[(i0 + r) * p.d + c]), p.q_scale_op, p.q_scale);
      qs[c * (BQ + 1) + r] = x;
    }
    float o[RQ][RV], m[RQ], l[RQ];
    GROVE_UNROLL
    for (int r = 0; r < RQ; ++r) {
      m[r] = neg_inf;
      l[r] = 0.0f;
      GROVE_UNROLL
      for (int c = 0; c < RV; ++c) o[r][c] = 0.0f;
    }
    // The keys this tile reads: all, or with p.trim up to the last one its rows keep.
    const i64 n_keys = p.trim != 0 ? trimmed_keys(p, b0, b1, i0, p.sq - i0 < BQ ? p.sq - i0 : BQ) : p.sk;
    for (i64 j0 = 0; j0 < n_keys; j0 += BK) {
      __syncthreads();  // the previous tile's V (and, first, nothing) is no longer read
      for (int e = t; e < BK * HD; e += kThreads) {
        const int j = e / HD, c = e % HD;
        float x = 0.0f;
        if (j0 + j < p.sk && c < p.d) x = scaled(to_f32(k[(j0 + j) * p.k_js + c * p.k_ds]), p.k_scale_op, p.k_scale);
        kv[c * (BK + 1) + j] = x;
      }
      __syncthreads();
      float s[RQ][RK];
      GROVE_UNROLL
      for (int r = 0; r < RQ; ++r) {
        GROVE_UNROLL
        for (int c = 0; c < RK; ++c) s[r][c] = 0.0f;
      }
      for (int c = 0; c < dl; ++c) {
        float qa[RQ], kb[RK];
        GROVE_UNROLL
        for (int r = 0; r < RQ; ++r) qa[r] = qs[c * (BQ + 1) + tr + kTR * r];
        GROVE_UNROLL
        for (int x = 0; x < RK; ++x) kb[x] = kv[c * (BK + 1) + tc + kTC * x];
        outer_add(s, qa, kb);
      }
      GROVE_UNROLL
      for (int r = 0; r < RQ; ++r) {
        const i64 i = i0 + tr + kTR * r;
        float tmax = neg_inf;
        GROVE_UNROLL
        for (int x = 0; x < RK; ++x) {
          const i64 j = j0 + tc + kTC * x;
          float sc = neg_inf;
          if (i < p.sq && j < p.sk) {
            sc = masked<T>(p, b0, b1, i, j, scaled(s[r][x], p.scale_op, p.scale));
          }
          s[r][x] = sc;
          tmax = sc > tmax ? sc : tmax;  // NaN does not raise the max (as Softmax's)
        }
        tmax = rdx::lanes_all(MaxOp<float>(), tmax, kTC);
        const float m_new = tmax > m[r] ? tmax : m[r];
        float corr = 1.0f, sum = 0.0f;
        GROVE_UNROLL
        for (int x = 0; x < RK; ++x) {
          // Every score so far -inf: nothing to add yet (the row's lanes agree).
          const float e = m_new == neg_inf ? 0.0f : g_exp(s[r][x] - m_new);
          s[r][x] = e;
          sum += e;
        }
        if (m_new != neg_inf) corr = g_exp(m[r] - m_new);
        sum = rdx::lanes_all(rdx::AddOp<float>(), sum, kTC);
        l[r] = l[r] * corr + sum;
        GROVE_UNROLL
        for (int c = 0; c < RV; ++c) o[r][c] *= corr;
        m[r] = m_new;
      }
      __syncthreads();  // K's tile is read: V's takes its place
      for (int e = t; e < BK * HD; e += kThreads) {
        const int j = e / HD, c = e % HD;
        kv[j * HD + c] = j0 + j < p.sk && c < p.dv ? to_f32(v[(j0 + j) * p.dv + c]) : 0.0f;
      }
      __syncthreads();
      GROVE_UNROLL
      for (int j = 0; j < BK; ++j) {
        float pk[RQ], vb[RV];
        GROVE_UNROLL
        for (int r = 0; r < RQ; ++r) pk[r] = __shfl_sync(0xffffffffu, s[r][j / kTC], (lane & ~(kTC - 1)) | (j % kTC));
        GROVE_UNROLL
        for (int c = 0; c < RV; ++c) vb[c] = kv[j * HD + tc + kTC * c];
        outer_add(o, pk, vb);
      }
    }
    GROVE_UNROLL
    for (int r = 0; r < RQ; ++r) {
      const i64 i = i0 + tr + kTR * r;
      if (i >= p.sq) continue;
      T* orow = O + ((b0 * p.b1 + b1) * p.sq + i) * p.dv;
      GROVE_UNROLL
      for (int c = 0; c < RV; ++c) {
        const i64 col = tc + kTC * c;
        if (col < p.dv) orow[col] = from_f32<T>(finish(p, v, col, o[r][c], m[r], l[r]));
      }
    }
  }
}

// The probabilities of the GEMM form (AttentionProbsParams): a row per warp
// or block, grid-stride, so sq and sk are read at run time.
template <typename T>
GROVE_DEVICE void attention_probs(const AttentionProbsParams& pp) {
  const AttentionParams& p = pp.a;
  const rdx::Group g = rdx::make_group(pp.mode);
  const MaxOp<float> max_op;
  const rdx::AddOp<float> add_op;
  T* Y = static_cast<T*>(pp.probs);
  const i64 rows = p.b0 * p.b1 * p.sq;
  for (i64 row = g.first; row < rows; row += g.step) {  // uniform in the group
    const i64 i = row % p.sq;
    const i64 bb = row / p.sq;
    const i64 b1 = bb % p.b1, b0 = bb / p.b1;
    const float* s = pp.scores + row * p.sk;
    T* y = Y + row * p.sk;
    // NaN scores do not raise the max (as Softmax's) but make their exp, and
    // so the row, NaN; a row of -inf gives exp(-inf - -inf): NaN.
    float m = -inf_f32();
    for (i64 j = g.lane; j < p.sk; j += g.width) m = max_op.combine(m, masked<T>(p, b0, b1, i, j, s[j]));
    m = rdx::group_all(max_op, m, g.mode);
    float l = 0.0f;
    for (i64 j = g.lane; j < p.sk; j += g.width) l += g_exp(masked<T>(p, b0, b1, i, j, s[j]) - m);
    l = rdx::group_all(add_op, l, g.mode);
    const float inv = 1.0f / l;
    for (i64 j = g.lane; j < p.sk; j += g.width) {
      float pj = g_exp(masked<T>(p, b0, b1, i, j, s[j]) - m) * inv;
      if (p.zero_nan_probs != 0 && pj != pj) pj = 0.0f;
      y[j] = from_f32<T>(pj);
    }
  }
}

}  // namespace attn
}  // namespace grove_k

#endif  // GROVE_JIT_KERNELS_ATTENTION_CUH_

// attention_mma.cuh takes the helpers above without these entries.
#if !defined(GROVE_ATTENTION_HELPERS_ONLY)
#if defined(GROVE_T0) && defined(GROVE_V_HD)
// Three blocks an SM: ptxas (sm_90) gives the tiled kernel 168 registers
// and no spills, where it took 255 (two blocks an SM) uncapped.
GROVE_ENTRY_BOUNDED(attention, grove_k::AttentionParams, 3) {
  grove_k::attn::attention_tiled<GROVE_T0, GROVE_V_BQ, GROVE_V_BK, GROVE_V_HD>(p);
}
#elif defined(GROVE_T0)
GROVE_ENTRY(attention, grove_k::AttentionParams) { grove_k::attn::attention<GROVE_T0>(p); }
#endif
#if defined(GROVE_T0)
// In every module of the file, as each variant's holds the entries of the
// module without parameters (the GEMM form launches the latter's).
GROVE_ENTRY(attention_probs, grove_k::AttentionProbsParams) { grove_k::attn::attention_probs<GROVE_T0>(p); }
GROVE_ENTRY(attention_combine, grove_k::AttentionParams) { grove_k::attn::attention_combine<GROVE_T0>(p); }
#endif
#endif  // !GROVE_ATTENTION_HELPERS_ONLY
