// Parameters of jit/kernels/attention.cuh (FusedAttention; the layout is
// lib/backends/common/attention_checks.h's AttentionLayout).
#ifndef GROVE_JIT_KERNELS_ATTENTION_PARAMS_H_
#define GROVE_JIT_KERNELS_ATTENTION_PARAMS_H_

#include "jit/kernels/types.h"

namespace grove_k {

// Scale ops (ir::AttentionScaleOp) and mask kinds (ir::AttentionMaskKind).
enum AttnScaleOp { kAttnScaleNone = 0, kAttnScaleMul = 1, kAttnScaleDiv = 2 };
enum AttnMask { kAttnMaskNone = 0, kAttnMaskAdd = 1, kAttnMaskWhere = 2 };

// Output columns a lane keeps in registers per pass; a longer V row takes
// more passes over the keys.
constexpr int kAttnColsPerLane = 4;
// Warps of the warp-per-row kernel's blocks at most (they split the row's
// key tiles).
constexpr int kAttnRowWarps = 4;

// One mask over the scores [b0, b1, sq, sk] (element strides, 0 where it
// broadcasts).
struct AttnMaskParams {
  const void* data;  // T (kAttnMaskAdd) or bool (kAttnMaskWhere) elements
  i64 b0, b1, i, j;
  float fill;
  int kind, fill_if_true;
};

// attention_mma's K and V tiles (jit/kernels/attention_mma.cuh): 2, one each,
// where Q's tile of BQ rows and both tiles of BK keys, 16-bit rows of HD + 8
// values, fit in 48 KB of static shared memory; else 1, shared by K and V.
// (A constant, not a function: NVRTC takes no host functions.)
template <int BQ, int BK, int HD>
struct AttnMmaKvTiles {
  static constexpr int value = (BQ + 2 * BK) * (HD + 8) * 2 <= 48 * 1024 ? 2 : 1;
};

// A block per query row (grid-stride over b0 * b1 * sq rows), its warps
// taking keys in tiles of 32 (a lane each) with an online softmax; sq and sk
// are read here at run time, so one module serves every sequence length.
struct AttentionParams {
  const void* q;
  const void* k;
  const void* v;
  void* out;
  i64 b0, b1, sq, sk, d, dv;
  i64 q_b0, q_b1, k_b0, k_b1, k_js, k_ds, v_b0, v_b1;
  i64 kv_group;  // query head b1 reads K's and V's head b1 / kv_group
  float q_scale, k_scale, scale;
  int q_scale_op, k_scale_op, scale_op;
  int zero_nan_probs;  // 1: NaN probabilities count as 0 (Where(IsNaN(p), 0, p))
  // 1: mask 0 is a Where filling -inf or a fill far below any score
  // (ir::IsTrimmableFill) and the only mask, so a tile of query rows may stop
  // at the last key one of its rows keeps (trimmed_keys; the tiled kernels
  // do).
  int trim;
  AttnMaskParams masks[2];  // applied in order
  // The block-per-row kernel's key splits (flash decoding), 0 or 1: none.
  // With splits > 1 its work items are (row, split): split s takes the keys
  // [s * chunk, min(sk, (s + 1) * chunk)), chunk = ceil(sk / splits) rounded
  // up to 32, and writes its max, sum and output columns to
  // partial[(row * splits + s) * (dv + 2)] as [m, l, acc[dv]];
  // attention_combine then writes the rows. sk is read at run time, splits
  // fixed by the prepare.
  i64 splits;
  float* partial;
};

// The Softmax of FusedAttention's GEMM form (lib/backends/cuda/attention.cc:
// cuBLASLt's QKᵀ into f32 scores, this, cuBLASLt's PV): per row of the
// scores [b0 * b1 * sq, sk] (the product, already scaled), the masks of `a`
// in order, Softmax as the Softmax kernel computes it (max, sum of
// exp(s - max), exp(s - max) * (1 / sum)), NaN probabilities as 0 with
// a.zero_nan_probs, written as T. `probs` may be `scores` (f32: each element
// is read, then written, by the same thread). a's sizes and masks are used,
// its q, k, v, out and scales are not.
struct AttentionProbsParams {
  AttentionParams a;
  const float* scores;
  void* probs;
  int mode;  // 1: a warp per row; 2: a block per row
};

}  // namespace grove_k

#endif  // GROVE_JIT_KERNELS_ATTENTION_PARAMS_H_
