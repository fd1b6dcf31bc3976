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
// "MatMul+Add+Gelu", the bias its input 2 (kPostOpBiasAttr). The exact GELU
// written out as PyTorch exports nn.GELU() before opset 20 (Div by sqrt 2 or
// Mul by 1 / sqrt 2, Erf, Add 1, and Muls by x and 0.5 in any grouping; x
// read by those two steps only) is taken as one Gelu activation: the five
// steps show as "+Gelu", named "gelu(div+erf+add+mul+mul)". SiLU written
// out, Mul(x, Sigmoid(x)) with x read by those two only, is taken as one
// activation too (oneDNN's swish): "Conv+SiLU", "silu(sigmoid+mul)". The
// tanh GELU written out (0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))),
// F.gelu(approximate="tanh") before opset 20, GPT-2's and FastGELU's
// hand-written forms: Add, Sub, Mul, Div, Pow and Tanh steps over x and
// scalar constants, found by evaluating them at probe values of x, not by
// pattern) is one gelu_tanh activation: "MatMul+Add+GeluTanh",
// "gelutanh(pow+mul+...)". A Conv (maybe
// with its activation) read only by a MaxPool without Indices or an
// AveragePool takes the pool too: "Conv+Relu+MaxPool", the pool's
// attributes under kFusedPoolAttrPrefix; when oneDNN computes both, the
// Conv's output reaches the pool in oneDNN's blocked layout without the two
// reorders through grove's. A Conv's BatchNormalization (inference mode,
// scale, B, mean and var constant [C] f32 values), right after the Conv or
// after its activation, folds into a per-channel multiply and add
// (kChannelScaleAttr...; two more oneDNN post-ops): "Conv+Relu+
// BatchNormalization+MaxPool", one step instead of two and four reorders. A
// Conv (maybe with a BatchNormalization right after it) read only by an Add
// of a tensor of the same shape written before the Conv runs (a residual
// connection) takes the Add, then maybe an activation: "Conv+Add+Relu", the
// tensor its input 3 (post_op.h's kResidualAttr); such a step takes no
// BatchNormalization after the activation and no pool. The intermediates become Storage::kFusedAway. Only when oneDNN is on
// (OneDnnEnabled): the reference kernels gain nothing from it, and plans
// made with oneDNN off stay step for step. Steps whose shapes are known only
// when run, fallbacks and steps of other backends are left alone.
void FuseActivations(runtime::PlanGraph& plan);

// After FuseActivations: a Conv step (maybe fused) followed by Conv,
// MaxPool (without Indices), AveragePool, GlobalAveragePool or GlobalMaxPool
// steps, each reading only the output of the one before (f32, known shapes,
// neither an output of the subgraph nor captured), becomes one step typed
// "Conv+Relu+MaxPool>Conv+Relu+MaxPool>GlobalAveragePool", named
// "chain(...)", the links in its attributes (post_op.h's kChainLinksAttr):
// where oneDNN computes two links in turn, the first writes its output in
// oneDNN's blocked layout straight into the array the second reads, so a
// CNN's activations are reordered only at the chain's ends. A step between
// that is none of these (a Relu left unfused, a Concat) ends the chain; so
// does a link's other input (W, B) written after the chain's first step,
// and a Conv with a fused residual Add (neither head nor link).
// Only when oneDNN is on and chains are (OneDnnChainsEnabled).
void FuseOneDnnChains(runtime::PlanGraph& plan);

// Whether plans made from now on chain oneDNN steps: true unless
// GROVE_CPU_ONEDNN_CHAINS is "0" (read once) or SetOneDnnChainsEnabled(false)
// (tests and benchmarks compare both in one process).
bool OneDnnChainsEnabled();
void SetOneDnnChainsEnabled(bool enabled);

// After FuseOneDnnChains: every f32 activation of rank 3-5 (known shape, in
// the arena, neither an output of the subgraph nor captured) that only
// window steps and elementwise steps touch is stored channels-last,
// [N, spatial..., C], the layout oneDNN's convolutions compute in, instead
// of [N, C, spatial...]. Window steps: Conv (maybe fused, or a chain's head)
// and MaxPool (without Indices), AveragePool, GlobalAveragePool,
// GlobalMaxPool, BatchNormalization (inference: one output), each through
// its X and Y only (channels_last.h wraps their kernels; a fused residual
// Add's tensor is stored as the step's Y is). Elementwise steps (Relu,
// Clip, Add, Mul, ... post_op-like unary ops and arithmetic) are the same
// on either layout when every operand is the same shape, a single element,
// or per-channel ([N or 1, C, 1...], stored [N or 1, 1..., C]: the same
// bytes, broadcast alike): such a step's operands are stored alike, all or
// none; so are a
// Concat's (of values of one rank), whose axis the pass moves with them. A
// value any other step reads (Flatten, a BatchNormalization left alone, a
// Conv's W) keeps the plain layout, and with it every value it shares a
// step with. The stored shape is the permuted one; each window step gets
// kChannelsLastAttr (post_op.h) saying which of its X and Y are stored so.
// A CNN's residual Adds and activations left between Convs then cost no
// reorder: a MobileNet-like block (bench/peers/export_variants.py's cnn_b)
// ran one reorder per run instead of six, 0.425 -> 0.381 ms at 4x3x64x64 on
// one thread. Only when oneDNN is on and the pass is (ChannelsLastEnabled).
void AssignChannelsLast(runtime::PlanGraph& plan);

// Whether plans made from now on store activations channels-last: true
// unless GROVE_CPU_CHANNELS_LAST is "0" (read once) or
// SetChannelsLastEnabled(false) (tests and benchmarks compare both).
bool ChannelsLastEnabled();
void SetChannelsLastEnabled(bool enabled);

// Tests: channels-last window steps are prepared as if their kernels could
// not read the layout (the reference kernels' case): each then transposes X
// and Y through copies in its workspace (nn.cc).
void SetChannelsLastCopiesOnly(bool copies);

// Window steps prepared with a channels-last X or Y since the process
// started, and of those, the ones given transposed copies (their kernel
// could not take the layout itself).
struct ChannelsLastCounts {
  int64_t prepared = 0;
  int64_t copied = 0;
};
ChannelsLastCounts ChannelsLastStepsPrepared();

}  // namespace grove::cpu

#endif  // GROVE_LIB_BACKENDS_CPU_ACTIVATION_FUSION_H_
