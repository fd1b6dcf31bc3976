// The attention plan pass, shared by every backend: scaled dot-product
// attention as PyTorch exports it becomes one FusedAttention step
// (lib/ir/ops/attention_attrs.h) whose kernel never writes the [sq, sk]
// scores:
//
//   MatMul(Q', K') -> [Mul|Div by a scalar] -> up to two masks, each
//     Add(., mask) or Where(cond, fill, .) -> Softmax(axis -1) -> MatMul(., V)
//
// with any pass-throughs exporters leave on either side of the Softmax
// (Identity, a Cast to the same dtype, an inference Dropout) absorbed too.
//
// Q' is Q or Q times/over a scalar; K' is Kᵀ: a Transpose swapping K's last
// two axes, or any tensor of shape [.., d, sk] (read in place), either one
// possibly times/over a scalar. Scalars are plan-time constants (weights,
// folded values) of one element. Rank 3 or 4, f32, batch dims broadcast.
// A chain is fused only when each of its intermediates is read by the next
// link alone (not by another step, a body's capture or the subgraph's
// outputs), every link runs on the plan's backend, and that backend's
// FusedAttention kernel takes it; anything else stays as it was.
//
// GROVE_FUSE_ATTENTION=0 in the environment (read once) turns the pass off,
// for comparison; SetAttentionFusionEnabled does the same in code.
#ifndef GROVE_LIB_RUNTIME_ATTENTION_FUSION_H_
#define GROVE_LIB_RUNTIME_ATTENTION_FUSION_H_

#include "lib/ir/op_registry.h"
#include "lib/runtime/plan_step.h"

namespace grove::runtime {

class Backend;

// Whether plans made from now on fuse attention.
bool AttentionFusionEnabled();
void SetAttentionFusionEnabled(bool enabled);

// Fuses the attention chains of `plan` (a plan for `backend`; backend_impl
// is asked whether it takes each fused step, nullptr: the CPU's kernel
// does). Counts each fused step in plan.fused_steps and the ops it replaced
// in plan.fused_ops; returns the number of fused steps.
int FuseAttention(PlanGraph& plan, ir::Backend backend, const Backend* backend_impl);

}  // namespace grove::runtime

#endif  // GROVE_LIB_RUNTIME_ATTENTION_FUSION_H_
