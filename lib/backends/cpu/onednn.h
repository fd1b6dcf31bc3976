// oneDNN (Debian's libdnnl, the library PyTorch and OpenVINO run on the CPU)
// for the CPU kernels where it beats the reference loops: f32 Conv, MatMul and
// Gemm (with a fused activation, post_op.h), MaxPool, AveragePool, the global
// pools, BatchNormalization (inference), Softmax over the last axis, and the
// LSTM, GRU and RNN layers. A
// kernel's prepare asks for a OneDnnStep; it gets one, or nullptr when oneDNN
// does not take the step (a dtype, an empty dim, more than 3 spatial dims, no
// implementation better than oneDNN's own reference), and then keeps its
// reference kernel. The step holds what the prepare made once per plan: the
// primitive, the reorders between grove's plain row-major layouts and the
// blocked ones oneDNN prefers (for pooling and batch normalization, the only
// ones its JIT code reads), and the weights reordered into that layout when
// the prepare could read them (a model weight). Its invoke only binds
// pointers and runs; the blocked copies and oneDNN's scratchpad live in the
// step's workspace, so no buffer is allocated per run (oneDNN's execute does
// make its small argument map).
//
//   WorkspaceLayout layout;                                    // prepare
//   absl::StatusOr<std::shared_ptr<OneDnnStep>> step = PrepareOneDnnConv(ctx, conv, &layout);
//   ...
//   if (p->onednn != nullptr) return RunOneDnnStep(*p->onednn, ctx);  // invoke
//
// Threads: oneDNN runs on the session's intra-op threads
// (SessionOptions::intra_op_threads, 1 by default). A step worth splitting
// (StepThreads) is cut into parts (onednn_internal.h): along the batch, a
// window op's output rows (each part reading the rows its windows cover),
// whole blocks of channels, or a MatMul's batch dim or M; each part is a
// primitive of its own made for one thread, and the parts and the reorders'
// slices run side by side on grove's pool, where the caller takes the parts a
// late worker has not started. Every primitive runs on one thread: Debian
// builds oneDNN on OpenMP, whose team splits a primitive statically and spins
// at its barriers, and on a busy machine one descheduled teammate held the
// whole step (measured 8-16x slower than ONNX Runtime). A step no cut fits (a
// transposed A, one block of channels) and the recurrent layers run on the
// calling thread: the calling thread's OpenMP count is set to 1 around each
// prepare and run and restored, so an application's own OpenMP use is left
// as it was.
//
// The switch: GROVE_CPU_ONEDNN=0 in the environment (read once) makes every
// CPU step keep its reference kernel; SetOneDnnEnabled does the same for the
// steps prepared after it (tests and benchmarks compare both paths in one
// process).
#ifndef GROVE_LIB_BACKENDS_CPU_ONEDNN_H_
#define GROVE_LIB_BACKENDS_CPU_ONEDNN_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "lib/backends/common/recurrent_checks.h"
#include "lib/backends/common/window.h"
#include "lib/backends/cpu/post_op.h"
#include "lib/backends/cpu/workspace_layout.h"
#include "lib/ir/op_registry.h"
#include "lib/ir/ops/recurrent_attrs.h"

namespace grove::cpu {

// Whether kernels prepared from now on may use oneDNN: true unless
// GROVE_CPU_ONEDNN is "0" (or "off", "false"), or SetOneDnnEnabled(false).
bool OneDnnEnabled();
void SetOneDnnEnabled(bool enabled);

// Sets OneDnnEnabled for a scope (tests, benchmarks), then restores it.
class ScopedOneDnn {
 public:
  explicit ScopedOneDnn(bool enabled) : before_(OneDnnEnabled()) { SetOneDnnEnabled(enabled); }
  ~ScopedOneDnn() { SetOneDnnEnabled(before_); }
  ScopedOneDnn(const ScopedOneDnn&) = delete;
  ScopedOneDnn& operator=(const ScopedOneDnn&) = delete;

 private:
  bool before_;
};

// Which of a window step's activations (input 0, output 0) grove stores
// channels-last ([N, spatial..., C] in memory; the CPU plan's layout pass,
// activation_fusion.h) rather than [N, C, spatial...]. The prepares below
// take the logical [N, C, ...] shapes and give the step's operand that
// layout, so the primitive reads or writes it in place where it computes in
// it (oneDNN's brgconv does): no reorder.
struct ChannelsLast {
  bool src = false;
  bool dst = false;
};

// A oneDNN primitive bound to a step's inputs, outputs and workspace. Made by
// a prepare, invoked by the step's session: one thread at a time (the invoke
// rebinds the step's own memory handles).
class OneDnnStep;

// Conv (ConvShape from backends::ResolveConv) through oneDNN, or nullptr when
// oneDNN does not take it. Adds the step's scratch to `layout`, after what
// the layout already holds. `post_op` (a fused activation) is an eltwise
// post-op of the primitive, or, where the primitive does not take it,
// applied to Y by the invoke after the primitive (ApplyPostOp).
// `affine` (a fused BatchNormalization, per output channel) is a pair of
// binary post-ops (multiply, add) in its place before or after `post_op`;
// with one, the step is made only when the primitive takes both as
// post-ops (nullptr otherwise). `residual` (a fused residual Add, post_op.h's
// kResidualAttr): input kResidualInput, stored as Y is, added by a binary
// post-op after `affine` and before `post_op`; the step is made only when
// the primitive takes every post-op.
absl::StatusOr<std::shared_ptr<OneDnnStep>> PrepareOneDnnConv(const ir::KernelContext& ctx,
                                                              const backends::ConvShape& conv,
                                                              WorkspaceLayout* layout,
                                                              const PostOp& post_op = {},
                                                              const ChannelAffine& affine = {},
                                                              ChannelsLast io = {}, bool residual = false);

// ConvTranspose (ConvShape from backends::ResolveConvTranspose) through
// oneDNN's deconvolution, or nullptr when oneDNN does not take it (an empty
// tensor, a dtype other than f32, only its reference loops). X and Y are
// grove's plain layout, reordered to and from oneDNN's pick; W (ONNX's [C,
// M / group, kernel...]) is packed once; B is added after the primitive;
// several images run as parts on the session's threads.
absl::StatusOr<std::shared_ptr<OneDnnStep>> PrepareOneDnnConvTranspose(const ir::KernelContext& ctx,
                                                                       const backends::ConvShape& conv,
                                                                       WorkspaceLayout* layout);

// A MatMul or Gemm as oneDNN's matmul: Y[..., M, N] = alpha * A[..., M, K] *
// B[..., K, N] (+ beta * Y as it was, when `accumulate`: the caller writes the
// broadcast C into Y first). Dims of equal rank, batch dims broadcast where
// 1; A (B) stored transposed when trans_a (trans_b), rank 2 only. Inputs 0
// and 1 of ctx are A and B, output 0 is Y.
struct OneDnnMatMulShape {
  std::vector<int64_t> a, b, y;
  bool trans_a = false, trans_b = false;
  float alpha = 1.0f;
  bool accumulate = false;
  float beta = 0.0f;
  PostOp post_op;  // after the sum, as for Conv
  // Input 2 of ctx is a bias over Y's last dim ([N] or [1, ..., 1, N]),
  // added after the sum and before post_op (MatMul + Add).
  bool bias = false;
};
absl::StatusOr<std::shared_ptr<OneDnnStep>> PrepareOneDnnMatMul(const ir::KernelContext& ctx,
                                                                const OneDnnMatMulShape& shape,
                                                                WorkspaceLayout* layout);

// MaxPool (`max`) or AveragePool over window `w` of input 0 ([N, C,
// w.in...], f32) into output 0 (MaxPool's Indices stay with the reference
// kernel), or nullptr when oneDNN does not take it: a window wholly in the
// padding (oneDNN has no element to give), AveragePool with
// count_include_pad (`include_padding`) whose ceil_mode windows pass the end
// padding (oneDNN divides by the whole kernel, ONNX by the taps inside the
// input and its pads). A window past pad_end (ceil_mode) is otherwise given
// to oneDNN as a larger end padding, which max and average without padding
// ignore. The global pools are the window of the whole input. `source`: the
// oneDNN step that writes input 0 (a chain's link before, or null); the pool
// reads the layout it hands over when oneDNN has a JIT kernel for that, so
// that the two can be linked (LinkOneDnnSteps) without a reorder between.
absl::StatusOr<std::shared_ptr<OneDnnStep>> PrepareOneDnnPool(const ir::KernelContext& ctx,
                                                              const backends::Window& w, bool max,
                                                              bool include_padding, WorkspaceLayout* layout,
                                                              const OneDnnStep* source = nullptr,
                                                              ChannelsLast io = {});

// BatchNormalization in inference mode (training_mode stays with the
// reference kernel): Y = (X - input_mean) * scale / sqrt(input_var +
// epsilon) + B over X [N, C, ...] (rank 2-5), every input f32 (inputs 0-4:
// X, scale, B, input_mean, input_var), or nullptr when oneDNN does not take it.
absl::StatusOr<std::shared_ptr<OneDnnStep>> PrepareOneDnnBatchNorm(const ir::KernelContext& ctx, float epsilon,
                                                                   WorkspaceLayout* layout,
                                                                   ChannelsLast io = {});

// Softmax of input 0 seen as `rows` contiguous rows of n f32 elements (the
// last axis, or the axis with nothing after it), into output 0; nullptr when
// oneDNN does not take it. LogSoftmax is not offered: oneDNN 2.6's
// softmax_log computes its log to about 2^-19 (1.4e-6 for log(1)).
absl::StatusOr<std::shared_ptr<OneDnnStep>> PrepareOneDnnSoftmax(const ir::KernelContext& ctx, int64_t rows,
                                                                 int64_t n, WorkspaceLayout* layout);

// LSTM, GRU (either linear_before_reset) and RNN (Tanh, Sigmoid, Relu or
// LeakyRelu) in f32 through oneDNN's RNN primitives, one per direction, or
// nullptr when oneDNN does not take the node: other activations, clip,
// input_forget, an empty dim, another dtype, or weights (W, R, B, P) whose
// bytes the prepare cannot read (they are reordered into oneDNN's gate order
// and layout here, once). Y, Y_h and Y_c are written in place in either
// layout. sequence_lens is the caller's: oneDNN runs every sequence to the
// end, so a run with a shorter one takes the reference kernel.
class OneDnnRecurrentStep;
absl::StatusOr<std::shared_ptr<OneDnnRecurrentStep>> PrepareOneDnnRecurrent(const ir::KernelContext& ctx,
                                                                            const ir::RecurrentAttrs& attrs,
                                                                            const backends::RecurrentDims& dims,
                                                                            WorkspaceLayout* layout);
// Runs the step on ctx's pointers and ctx.workspace(); false (nothing
// written) when a weight is not the one the prepare packed, for the caller's
// reference kernel.
absl::StatusOr<bool> RunOneDnnRecurrent(OneDnnRecurrentStep& step, ir::KernelContext& ctx);
std::string OneDnnRecurrentImpl(const OneDnnRecurrentStep& step);

// Whether `first`'s output 0 can go to `second`'s input 0 in oneDNN's own
// layout, never reordered to grove's: both steps reorder that tensor, into
// and out of the same layout, and `first` applies no activation after its
// primitive. LinkOneDnnSteps then makes `first` write it into `second`'s
// array for it, which lies `second_workspace` bytes past `first`'s
// workspace (the two steps run on one workspace, `second`'s at that
// offset, which may be negative: before `first`'s): neither reads or writes
// grove's tensor (Conv+Relu+MaxPool, and the links of a oneDNN chain).
bool CanLinkOneDnnSteps(const OneDnnStep& first, const OneDnnStep& second);
void LinkOneDnnSteps(OneDnnStep& first, OneDnnStep& second, int64_t second_workspace);

// Runs the step on ctx's pointers and ctx.workspace().
absl::Status RunOneDnnStep(OneDnnStep& step, ir::KernelContext& ctx);

// How many oneDNN steps prepares have made in this process: tests check
// which path a kernel took with it.
int64_t OneDnnStepsMade();

// How many pairs of steps prepares have linked (LinkOneDnnSteps) in this
// process: a chain's hand-overs that need no reorder.
int64_t OneDnnStepsLinked();

// How many steps prepares have cut into parts for the session's intra-op
// threads in this process (onednn_internal.h: each part a primitive of its
// own on one thread, side by side on grove's pool instead of one primitive on
// an OpenMP team).
int64_t OneDnnStepsPartitioned();

// How many weights prepares have reordered into a primitive's layout in this
// process. A Conv's or MatMul's weight is reordered once per model: every
// step (every plan, every session) that packs the same bytes into the same
// layout shares the packed copy while one of them lives.
int64_t OneDnnWeightsPacked();

// The implementation oneDNN chose ("jit:avx2", "brg:avx512_core", ...), for
// tests and benchmarks.
std::string OneDnnStepImpl(const OneDnnStep& step);

}  // namespace grove::cpu

#endif  // GROVE_LIB_BACKENDS_CPU_ONEDNN_H_
