// The CPU plan pass that fuses an elementwise activation (and a MatMul's bias
// Add, a Conv's pool) into the Conv, MatMul or Gemm step before it
// (Conv+Relu+MaxPool, Gemm+Gelu, MatMul+Add+Gelu): oneDNN applies them as
// post-ops inside the primitive, while the output is still in cache, and
// hands a Conv's output to its pool in its own layout.
#ifndef GROVE_LIB_BACKENDS_CPU_ACTIVATION_FUSION_H_
#define GROVE_LIB_BACKENDS_CPU_ACTIVATION_FUSION_H_

#include "lib/runtime/plan_step.h"

namespace grove::cpu {

// Replaces each f32 Conv, MatMul or Gemm step whose output is read only by
// one activation step (post_op.h: Relu, LeakyRelu, Clip with constant
// bounds, Sigmoid, Tanh, Gelu, Elu, HardSwish, Softplus) and is not an output
// of the subgraph nor captured by a body, with one step: a copy of its node
// named "fused(conv+relu)", typed "Conv+Relu", writing the activation's
// output, the activation in its attributes (kPostOpAttr). A MatMul (B of rank
// >= 2) read only by an Add of a bias over its last dim ([N] or [1, ..., 1,
// N], f32, written before the MatMul runs: a weight, an input, an earlier
// step's) takes that Add too, and then maybe an activation: "MatMul+Add",
// "MatMul+Add+Gelu", the bias its input 2 (kPostOpBiasAttr). A Conv (maybe
// with its activation) read only by a MaxPool without Indices or an
// AveragePool takes the pool too: "Conv+Relu+MaxPool", the pool's
// attributes under kFusedPoolAttrPrefix; when oneDNN computes both, the
// Conv's output reaches the pool in oneDNN's blocked layout without the two
// reorders through grove's. A Conv's BatchNormalization (inference mode,
// scale, B, mean and var constant [C] f32 values), right after the Conv or
// after its activation, folds into a per-channel multiply and add
// (kChannelScaleAttr...; two more oneDNN post-ops): "Conv+Relu+
// BatchNormalization+MaxPool", one step instead of two and four reorders. The intermediates become Storage::kFusedAway. Only when oneDNN is on
// (OneDnnEnabled): the reference kernels gain nothing from it, and plans
// made with oneDNN off stay step for step. Steps whose shapes are known only
// when run, fallbacks and steps of other backends are left alone.
void FuseActivations(runtime::PlanGraph& plan);

}  // namespace grove::cpu

#endif  // GROVE_LIB_BACKENDS_CPU_ACTIVATION_FUSION_H_
