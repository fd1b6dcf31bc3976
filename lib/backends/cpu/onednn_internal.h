// The insides of a oneDNN step (onednn.h), shared by onednn.cc, which makes
// and runs steps, and onednn_parts.cc, which cuts a step into parts that the
// session's intra-op threads run side by side.
//
// Why parts: Debian's oneDNN runs on OpenMP, whose team splits a primitive
// statically and whose threads spin at its barriers (libgomp: some 300,000
// pauses, milliseconds on this project's Xeon) while a teammate that another
// process took the core from has its share still to do. Measured on a 2-core
// machine with two other busy processes: the CNN at b1 128x128 took 28-55 ms
// on a team of two against 3.5 ms for ONNX Runtime. A partitioned step runs
// each part's primitive on one thread (OpenMP team of 1: nothing spins in
// libgomp) and hands the parts to grove's pool (thread_pool.h), where the
// caller takes every part a late worker has not started: a busy core slows
// the step down to the caller's own speed, never past it.
#ifndef GROVE_LIB_BACKENDS_CPU_ONEDNN_INTERNAL_H_
#define GROVE_LIB_BACKENDS_CPU_ONEDNN_INTERNAL_H_

#include <oneapi/dnnl/dnnl.h>
#include <oneapi/dnnl/dnnl.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "lib/backends/cpu/onednn.h"
#include "lib/backends/cpu/post_op.h"
#include "lib/backends/cpu/workspace_layout.h"
#include "lib/ir/op_registry.h"

namespace grove::cpu {

using dnnl::memory;

struct PackedWeights;  // onednn.cc

// One argument of the primitive: a step input or output in grove's plain
// layout, reordered into (out of) oneDNN's layout in the workspace when the
// primitive wants another, or taken from `packed` when it is the weight the
// prepare reordered and the invoke sees the same bytes.
struct OneDnnOperand {
  int arg = 0;          // DNNL_ARG_*
  bool output = false;  // ctx.output(index), else ctx.input(index)
  int index = 0;
  memory user;          // the plain layout; handle bound per run
  bool reordered = false;
  memory inner;         // oneDNN's layout at `offset` in the workspace
  // Bytes from the step's workspace; negative for a linked output written
  // into the array of a step whose workspace lies before this one's (a
  // chain's ping-pong regions, LinkOneDnnSteps).
  int64_t offset = 0;
  dnnl::reorder reorder;  // user -> inner (inputs), inner -> user (outputs)
  const void* packed_from = nullptr;
  memory packed;
  std::shared_ptr<const PackedWeights> packed_owner;  // keeps `packed`'s bytes, shared (PackedWeightsOf)
  // The inner array is written by the step before (an input) or read by the
  // step after (an output), LinkOneDnnSteps: no user memory, no reorder.
  bool linked = false;
};


// A reorder of one slice of an operand between grove's tensor and the step's
// inner array (or of the whole operand, for one the parts share: a weight
// the prepare could not pack). The slices of one operand do not overlap, so
// they run side by side: in the tasks of the parts they belong to, or before
// the parts (an input whose parts overlap, a whole operand).
struct OneDnnSliceReorder {
  int operand = 0;
  dnnl::stream stream;
  dnnl::reorder reorder;
  memory user, inner;  // views, bound per run at the offsets
  int64_t user_offset = 0, inner_offset = 0;
};

// What one part of a partitioned step runs: its own primitive (made for its
// slice of the problem, on one thread) over slices of the step's arrays.
struct OneDnnPart {
  dnnl::stream stream;
  dnnl::primitive primitive;
  std::string impl;
  // Per operand of the step: the part's view of the operand's array (the
  // inner array when the step reorders the operand, else grove's tensor),
  // bound per run `offsets` bytes past the array's start.
  std::vector<memory> views;
  std::vector<int64_t> offsets;
  bool has_scratchpad = false;
  memory scratchpad;
  uint64_t scratchpad_offset = 0;
  std::vector<dnnl_exec_arg_t> args;  // views, the step's constants, the scratchpad
  // The reorders of the part's own slices, in its task: inputs before the
  // primitive, outputs after.
  std::vector<OneDnnSliceReorder> before, after;
};

class OneDnnStep {
 public:
  dnnl::stream stream;
  dnnl::primitive primitive;
  std::string impl;
  std::vector<OneDnnOperand> operands;
  bool has_scratchpad = false;
  memory scratchpad;
  uint64_t scratchpad_offset = 0;
  std::vector<dnnl_exec_arg_t> args;  // filled per run, never resized
  // Arguments the step owns (a fused BatchNormalization's per-channel scale
  // and shift), bound once: their entries follow the operands' in `args`.
  std::vector<std::vector<float>> constant_data;
  std::vector<std::pair<int, memory>> constants;
  // A fused activation the primitive did not take: applied to output 0
  // (plain f32, `post_op_elements` of them) after it.
  PostOp post_op_after;
  int64_t post_op_elements = 0;
  // A bias the primitive is not given (oneDNN 2.6's deconvolution adds one
  // in a loop that took ~8x the deconvolution's own time): input
  // bias_after_input ([C] f32) added to output 0 (plain [images, C, inner])
  // after the primitive, before post_op_after. -1: none.
  int bias_after_input = -1;
  int64_t bias_after_images = 0, bias_after_channels = 0, bias_after_inner = 0;
  // Non-empty: the step runs as these parts (PartitionOneDnnStep), not as
  // `primitive`, with its operands' reorders cut into slices.
  std::vector<OneDnnPart> parts;
  std::vector<OneDnnSliceReorder> input_reorders;  // run before the parts
  std::vector<uint8_t*> arrays;  // per operand, resolved per run
};

// How an operand of a partitioned step is cut: along the split dim by the
// parts' input ranges (a Conv's or pool's source, whose ranges overlap by
// the window's halo), by their output ranges, or not at all (a weight, a
// bias, a broadcast operand: every part reads all of it).
enum class SliceKind { kWhole, kInput, kOutput };

struct SliceRange {
  int64_t begin = 0, end = 0;
};

struct PartitionSpec {
  int dim = 0;                     // the dim cut, in every cut operand
  std::vector<int> dims;           // or per operand (a per-channel vector's 0 beside the data's 1)
  std::vector<SliceKind> kinds;    // per operand of the step
  std::vector<SliceRange> input;   // per part
  std::vector<SliceRange> output;  // per part

  int DimOf(size_t operand) const { return dims.empty() ? dim : dims[operand]; }
};

// Part `part`'s primitive, made for `descs` (per operand of the step: the
// layout of its slice, or of the whole operand); nullopt when oneDNN takes
// no implementation better than its reference loops for it. `used`: the
// layouts the primitive reads and writes, per operand, which must be `descs`.
struct MadePart {
  dnnl::primitive primitive;
  std::string impl;
  memory::desc scratchpad;
  std::vector<memory::desc> used;
};
using MakePart = absl::FunctionRef<std::optional<MadePart>(int part, const std::vector<memory::desc>& descs)>;

// Cuts `step` (its operands added, its scratchpad not yet) into the parts of
// `spec`, each made by `make` under one OpenMP thread, with their
// scratchpads in `layout`. False (the step unchanged; `layout` may have
// grown) when a slice is not a dense block of its array in the layout oneDNN
// chose (a cut through channel blocks, a transposed matrix) or a part has no
// implementation.
bool PartitionOneDnnStep(OneDnnStep& step, const PartitionSpec& spec, MakePart make, WorkspaceLayout* layout);

// What the invoke does after the primitive (or the parts): the bias the
// primitive was not given, then the activation it did not take.
void ApplyAfter(const OneDnnStep& step, ir::KernelContext& ctx);

// Runs a partitioned step on ctx's pointers and workspace, its parts and
// reorder slices spread over the session's intra-op threads.
absl::Status RunPartitionedOneDnnStep(OneDnnStep& step, ir::KernelContext& ctx);

// Ranges of [0, n) cut into `parts` nearly equal pieces.
std::vector<SliceRange> EvenRanges(int64_t n, int parts);

// The input rows a window op's output rows [out.begin, out.end) read along
// one spatial dim (input extent `in`, kernel `k`, stride `s`, dilation
// `dil` (1: none), `pad_begin`), clipped to the input, and the padding
// before and after them that the part's primitive is given.
struct WindowSlice {
  SliceRange input;
  int64_t pad_begin = 0, pad_end = 0;
};
WindowSlice InputRowsOf(SliceRange out, int64_t in, int64_t k, int64_t s, int64_t dil, int64_t pad_begin);

// The elements of `dim` in each of the layout's inner blocks: 16 for the
// channels of nChw16c, 1 when `dim` is not blocked.
int64_t InnerBlock(const memory::desc& d, int dim);

// Shared with onednn.cc.
const dnnl::engine& CpuEngine();
uint64_t ReserveWorkspace(WorkspaceLayout* layout, uint64_t bytes);
absl::Status DnnlError(absl::string_view what, dnnl_status_t status);

// oneDNN on `threads` threads for the scope: its OpenMP runtime would
// otherwise start a thread per core inside every call of every session. The
// count is the calling thread's (OpenMP keeps it per thread, and gives each
// calling thread its own team), restored after, so an application's own
// OpenMP use is left as it was.
class OmpThreadScope {
 public:
  explicit OmpThreadScope(int threads);
  ~OmpThreadScope();
  OmpThreadScope(const OmpThreadScope&) = delete;
  OmpThreadScope& operator=(const OmpThreadScope&) = delete;

 private:
  int before_ = 1;
  int threads_ = 1;
};

}  // namespace grove::cpu

#endif  // GROVE_LIB_BACKENDS_CPU_ONEDNN_INTERNAL_H_
