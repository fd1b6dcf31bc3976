// FusedAttention: scaled dot-product attention as one op, made by the plan
// pass lib/runtime/attention_fusion.cc from the chain PyTorch exports
//   MatMul(Q', K') -> [Mul|Div scale] -> [mask] [mask2] -> Softmax(-1)
//     -> [Where(IsNaN(p), 0, p)] -> MatMul(., V)
// where Q' is Q or Q (Mul|Div) a scalar, K' is Kᵀ, possibly (Mul|Div) a
// scalar, and each mask is Add(., mask) or Where(cond, fill, .) (GPT-2's
// export has both: a causal Where, then the attention mask added). Its attributes say how each piece was written, so the kernels
// compute what the chain computed, rounding included:
//
//   inputs   Q [B.., sq, d], K [B.., sk, d] (or Kᵀ [B.., d, sk] with
//            k_transposed = 1), V [B.., sk, dv], mask and mask2 (optional,
//            applied in that order): broadcast to the scores [B.., sq, sk];
//            rank 3 or 4, batch dims broadcast. With kv_group = g > 1
//            (grouped-query attention), K's and V's last batch dim holds
//            the heads / g key-value heads that query head h reads as head
//            h / g: the chain's K and V were repeated g times each along
//            that dim (repeat_kv's Unsqueeze, Expand and Reshape, absorbed).
//   output   [B.., sq, dv]
//
//   ReadAttentionAttrs(node.attrs) checks them once for the shape function
//   and both backends' prepares; WriteAttentionAttrs is the pass's half.
#ifndef GROVE_LIB_IR_OPS_ATTENTION_ATTRS_H_
#define GROVE_LIB_IR_OPS_ATTENTION_ATTRS_H_

#include <cmath>
#include <cstdint>

#include "absl/status/statusor.h"
#include "lib/ir/graph.h"

namespace grove::ir {

inline constexpr char kFusedAttentionOp[] = "FusedAttention";

// The dtypes FusedAttention takes (Q, K, V, an added mask and the output
// share one of them).
inline bool IsAttentionDType(DType t) { return t == DType::kF32 || t == DType::kF16 || t == DType::kBF16; }

// How a scalar scale was applied: x * s or x / s (kNone: not at all).
enum class AttentionScaleOp : int64_t { kNone = 0, kMul = 1, kDiv = 2 };
// The mask input: none, added to the scores (a float mask of the scores'
// dtype), or a bool condition of Where that puts `mask_fill` in the scores
// where the condition is `fill_if_true` (Where(c, fill, s): true;
// Where(c, s, fill): false).
enum class AttentionMaskKind : int64_t { kNone = 0, kAdd = 1, kWhere = 2 };

// A mask fill at or below this (and -inf) lies below any score a model
// computes: x + fill rounds to fill for every |x| < 2^75 in f32 and bf16,
// and exp(fill - max) is exactly 0 beside a kept key's score. So an added
// mask of 0 and such a fill is a Where mask filling it (the plan pass), and
// a kernel may skip the keys it fills while a row keeps any key.
inline constexpr double kTrimmableFill = -0x1p100;
inline bool IsTrimmableFill(double fill) { return fill < 0 && (std::isinf(fill) || fill <= kTrimmableFill); }

struct AttentionScale {
  AttentionScaleOp op = AttentionScaleOp::kNone;
  double value = 1.0;
};

struct AttentionMask {
  AttentionMaskKind kind = AttentionMaskKind::kNone;
  double fill = 0;  // kWhere
  bool fill_if_true = true;
};

struct AttentionAttrs {
  bool k_transposed = false;
  AttentionScale q_scale;  // on Q's elements before the product
  AttentionScale k_scale;  // on K's elements before the product
  AttentionScale scale;    // on the scores
  // Input 3 (attributes mask, mask_fill, fill_if_true), then input 4
  // (mask2, mask2_fill, mask2_fill_if_true); the second only with the first.
  AttentionMask masks[2];
  // Probabilities that are NaN count as 0 (attribute zero_nan_probs):
  // PyTorch's export of scaled_dot_product_attention with a boolean mask,
  // Where(IsNaN(p), 0, p) after the Softmax, so that a row whose keys are all
  // masked gives 0 (0 * V summed: NaN only where V holds inf or NaN).
  bool zero_nan_probs = false;
  // Query heads per key-value head (attribute kv_group, at least 1).
  int64_t kv_group = 1;
};

// InvalidArgument naming the attribute when one is out of range.
absl::StatusOr<AttentionAttrs> ReadAttentionAttrs(const Attributes& attrs);
void WriteAttentionAttrs(const AttentionAttrs& a, Attributes* attrs);

}  // namespace grove::ir

#endif  // GROVE_LIB_IR_OPS_ATTENTION_ATTRS_H_
