// FusedAttention's shapes checked once for both backends' prepares, and the
// layout their kernels walk: batch dims as [b0, b1] (rank 3: b0 = 1), an
// element stride per operand and batch dim (0 where it broadcasts), K's
// strides along keys and head dims (K or Kᵀ alike), each mask's strides over
// the scores [b0, b1, sq, sk]. The output is [b0, b1, sq, dv], contiguous.
#ifndef GROVE_LIB_BACKENDS_COMMON_ATTENTION_CHECKS_H_
#define GROVE_LIB_BACKENDS_COMMON_ATTENTION_CHECKS_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "lib/ir/op_registry.h"
#include "lib/ir/ops/attention_attrs.h"

namespace grove::backends {

struct AttentionLayout {
  ir::AttentionAttrs attrs;
  DType dtype = DType::kF32;
  int64_t b0 = 1, b1 = 1;
  int64_t sq = 0, sk = 0, d = 0, dv = 0;
  int64_t q_b0 = 0, q_b1 = 0;  // Q's rows are contiguous (d elements apart)
  int64_t k_b0 = 0, k_b1 = 0;
  int64_t k_js = 0, k_ds = 0;  // key j, head dim c at k[j * k_js + c * k_ds]
  int64_t v_b0 = 0, v_b1 = 0;  // V's rows are contiguous (dv elements apart)
  // Query head b1 reads K's and V's head b1 / kv_group (attribute kv_group):
  // their b1 strides step over key-value heads.
  int64_t kv_group = 1;
  struct MaskStrides {
    int64_t b0 = 0, b1 = 0, i = 0, j = 0;
  };
  MaskStrides masks[2];  // inputs 3 and 4, where given
  bool has_mask(int m) const { return attrs.masks[m].kind != ir::AttentionMaskKind::kNone; }
  // Nothing to write: sq, dv or a batch dim is 0.
  bool empty() const { return b0 == 0 || b1 == 0 || sq == 0 || dv == 0; }
};

// Checks the inputs' dtypes and shapes against the attributes and the
// output as allocated; InvalidArgument naming the input and dim otherwise.
absl::StatusOr<AttentionLayout> PlanAttention(const ir::KernelContext& ctx);

}  // namespace grove::backends

#endif  // GROVE_LIB_BACKENDS_COMMON_ATTENTION_CHECKS_H_
