// An elementwise activation fused into the CPU step before it: Conv+Relu,
// MatMul+Gelu, Gemm+Clip (the plan pass of activation_fusion.h makes the
// fused step). The fused node is the Conv, MatMul or Gemm node with the
// activation's output as its own and the activation in its attributes
// (kPostOpAttr...; the model loader refuses these names on a model's nodes,
// so only the pass sets them). Its prepare reads them with ReadPostOp: a
// oneDNN primitive applies the activation as an eltwise post-op; the
// reference kernels call ApplyPostOp on the output they wrote.
//
//   absl::StatusOr<PostOp> post = ReadPostOp(ctx.attrs());   // prepare
//   ...
//   ApplyPostOp(p->post_op, y, n);                           // reference invoke
#ifndef GROVE_LIB_BACKENDS_CPU_POST_OP_H_
#define GROVE_LIB_BACKENDS_CPU_POST_OP_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "lib/ir/graph.h"

namespace grove::cpu {

enum class PostOpKind {
  kNone,
  kRelu,
  kLeakyRelu,  // alpha: the slope below 0
  kClip,       // alpha, beta: the bounds (-inf, +inf when absent)
  kSigmoid,
  kTanh,
  kGelu,      // the exact (erf) form
  kGeluTanh,  // approximate = "tanh"
  kElu,       // alpha
  kHardSwish,
  kSoftplus,
  kSilu,  // x * sigmoid(x): Sigmoid and Mul written out (activation_fusion.h)
};

struct PostOp {
  PostOpKind kind = PostOpKind::kNone;
  float alpha = 0.0f, beta = 0.0f;
};

// The fused node's attributes: the kind's name ("relu", "gelu_tanh", ...)
// and its parameters.
inline constexpr absl::string_view kPostOpAttr = "grove_post_op";
inline constexpr absl::string_view kPostOpAlphaAttr = "grove_post_alpha";
inline constexpr absl::string_view kPostOpBetaAttr = "grove_post_beta";
// A MatMul fused with the Add after it (and maybe an activation after
// that): 1, and the node's input 2 is the bias, [N] or [1, ..., 1, N] over
// Y's last dim, added before the activation.
inline constexpr absl::string_view kPostOpBiasAttr = "grove_post_bias";
// A Conv (maybe with an activation) fused with the MaxPool or AveragePool
// after it: the pool's type, each of its attributes under the prefix, and
// the shape of the pool's input (the Conv's output, never stored).
inline constexpr absl::string_view kFusedPoolAttr = "grove_pool";
inline constexpr absl::string_view kFusedPoolAttrPrefix = "grove_pool.";
inline constexpr absl::string_view kFusedPoolInputAttr = "grove_pool_input";

// A Conv fused with the BatchNormalization (inference mode, constant
// inputs) after it or after its activation: y = y * scale[c] + shift[c] per
// output channel c, the pass having folded the BatchNormalization's scale, B,
// mean, var and epsilon into the two lists (f32 values as doubles);
// kChannelAffineFirstAttr 1 when it comes before the activation
// (Conv+BatchNormalization+Relu), 0 after it (Conv+Relu+BatchNormalization).
inline constexpr absl::string_view kChannelScaleAttr = "grove_channel_scale";
inline constexpr absl::string_view kChannelShiftAttr = "grove_channel_shift";
inline constexpr absl::string_view kChannelAffineFirstAttr = "grove_channel_affine_first";

// A Conv (maybe with a BatchNormalization folded in right after it) fused
// with the Add of a tensor of its output's shape after it, a residual
// connection (written before the Conv runs), and maybe an activation after
// the Add: 1, and the node's input 3 is that tensor (input 2 the bias,
// omitted when the Conv has none): Y = act(Conv(X) [* scale + shift] + R), R stored
// in Y's layout. oneDNN adds R as a binary post-op; the reference kernel
// after its loops.
inline constexpr absl::string_view kResidualAttr = "grove_residual";
inline constexpr int kResidualInput = 3;

// A chain of oneDNN steps (a Conv step, maybe fused, then Conv, MaxPool,
// AveragePool, GlobalAveragePool or GlobalMaxPool steps, each reading the one
// before: FuseOneDnnChains) as one step, so that each hands its output to
// the next in oneDNN's blocked layout: the first link is the node itself
// (its own attributes, and its first inputs), link i >= 1 of
// kChainLinksAttr has its type under ChainTypeAttr(i), its attributes
// under ChainAttrPrefix(i), the shape of the input it reads from the link
// before under ChainShapeAttr(i); kChainInputsAttr lists how many of the
// node's inputs each link takes, in order (link 0's include X, the others'
// exclude the value the link before hands them).
inline constexpr absl::string_view kChainLinksAttr = "grove_chain_links";
inline constexpr absl::string_view kChainInputsAttr = "grove_chain_inputs";
inline std::string ChainTypeAttr(int link) { return "grove_chain" + std::to_string(link) + "_type"; }
inline std::string ChainShapeAttr(int link) { return "grove_chain" + std::to_string(link) + "_shape"; }
inline std::string ChainAttrPrefix(int link) { return "grove_chain" + std::to_string(link) + "."; }

// A window step (Conv, maybe fused or a chain's head; MaxPool, AveragePool,
// the global pools, BatchNormalization) whose X (bit 1) or Y (bit 2) grove
// stores channels-last,
// [N, spatial..., C] (AssignChannelsLast, activation_fusion.h): the step's
// kernel takes its logical [N, C, spatial...] view, and oneDNN reads or
// writes the layout in place; a kernel that cannot (the reference loops) is
// given transposed copies.
inline constexpr absl::string_view kChannelsLastAttr = "grove_channels_last";

struct ChannelAffine {
  std::vector<float> scale, shift;  // empty: none
  bool before_post_op = false;
  bool empty() const { return scale.empty(); }
};

// The fused step's channel affine (empty when it has none); an error when
// the lists are not `channels` long.
absl::StatusOr<ChannelAffine> ReadChannelAffine(const ir::Attributes& attrs, int64_t channels);
void SetChannelAffineAttributes(const ChannelAffine& affine, ir::Attributes* attrs);

// y[n, c, i] = y[n, c, i] * scale[c] + shift[c] over y [images, channels, inner].
void ApplyChannelAffine(const ChannelAffine& affine, float* y, int64_t images, int64_t channels, int64_t inner);

// The post-op that computes `activation` (an ONNX node: Relu, LeakyRelu,
// Clip, Sigmoid, Tanh, Gelu, Elu, HardSwish, Softplus), or nullopt when it is
// none of them or has a form this does not take. Clip's bounds are
// `clip_min` / `clip_max` (its inputs 1 and 2, read by the caller from
// constant values; nullopt: absent) or its opset-6 attributes.
std::optional<PostOp> PostOpOf(const ir::Node& activation, std::optional<float> clip_min,
                               std::optional<float> clip_max);

// Writes `op` into a fused node's attributes; ReadPostOp reads it back
// (kNone when the node has none, an error naming an unknown kind).
void SetPostOpAttributes(const PostOp& op, ir::Attributes* attrs);
absl::StatusOr<PostOp> ReadPostOp(const ir::Attributes& attrs);

// y[i] = op(y[i]) for n floats, computed as the activation's own CPU kernel
// computes it (float arithmetic, libm; Sigmoid and SiLU's sigmoid with the
// Sigmoid kernel's vectorised exp where that kernel uses it).
void ApplyPostOp(const PostOp& op, float* y, int64_t n);

// The kind's attribute name ("relu"); "" for kNone.
std::string PostOpName(PostOpKind kind);

}  // namespace grove::cpu

#endif  // GROVE_LIB_BACKENDS_CPU_POST_OP_H_
