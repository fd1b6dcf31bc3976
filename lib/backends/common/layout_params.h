// Parameter parsing and shape checks of the layout and shape ops that every
// backend's kernel does the same way before it moves any data (CPU:
// lib/backends/cpu/{layout,shape_ops}.cc, CUDA: lib/backends/cuda/...). Each
// returns this node's error (ctx.Error) with the exact text the kernels have
// always given. Integer parameter inputs are read through an IntReader that
// the backend supplies (the CPU reads host memory; CUDA reads host copies or
// the device).
#ifndef GROVE_LIB_BACKENDS_COMMON_LAYOUT_PARAMS_H_
#define GROVE_LIB_BACKENDS_COMMON_LAYOUT_PARAMS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "lib/ir/op_registry.h"
#include "lib/ir/ops/layout_params.h"

namespace grove::backends {

// Reads integer input `input`; `what` names it for the backend's error text.
using IntReader = absl::FunctionRef<absl::StatusOr<std::vector<int64_t>>(int input, absl::string_view what)>;

// Output i must be `dtype` `shape` (layout ops; nothing to check when the
// output is not wanted).
absl::Status CheckPlannedOutput(const ir::KernelContext& ctx, int i, DType dtype, const std::vector<int64_t>& shape);

// Output 0 must have the shape `expected` (shape ops; `op` names the op).
absl::Status CheckPlanned(const ir::KernelContext& ctx, absl::string_view op, const std::vector<int64_t>& expected);

// The product of dims[begin..end).
int64_t Product(absl::Span<const int64_t> dims, size_t begin, size_t end);

// The list given as input i (opset 13), read as `name`, or attribute `attr`
// (opset 11); false `*given` when neither is.
absl::Status ReadIntArg(const ir::KernelContext& ctx, IntReader read, int i, absl::string_view name,
                        absl::string_view attr, std::vector<int64_t>* out, bool* given);

// `what` (a shape given as an input) must have no negative dim.
absl::Status CheckNonNegativeDims(const ir::KernelContext& ctx, const std::vector<int64_t>& shape,
                                  absl::string_view what);

// Split: the normalised axis of input 0 (rank >= 1), then the parts' sizes
// along it (with the outputs checked against them).
absl::StatusOr<int> SplitAxis(const ir::KernelContext& ctx);
absl::StatusOr<std::vector<int64_t>> SplitOutputSizes(const ir::KernelContext& ctx, int axis,
                                                      const std::vector<int64_t>* split);

// GatherElements and ScatterElements: data (input 0) and indices (input 1)
// of the same rank >= 1, indices no larger than data but along the axis; the
// normalised axis.
absl::StatusOr<int> ElementsAxis(const ir::KernelContext& ctx);
// GatherElements: ElementsAxis and the output check; the error for an index
// out of range.
absl::StatusOr<int> GatherElementsAxis(const ir::KernelContext& ctx);
absl::Status GatherElementsIndexError(const ir::KernelContext& ctx, int64_t given, int axis);
std::string GatherElementsIndexMessage(int64_t given, int axis, const std::vector<int64_t>& data_shape);

// ScatterND: the reduction attribute, and the length k of the index tuples
// after the shape checks (and the output check).
enum class ScatterReduction { kNone, kAdd, kMul, kMax, kMin };
absl::StatusOr<ScatterReduction> ParseScatterReduction(const ir::KernelContext& ctx);
absl::StatusOr<int64_t> ScatterNDIndexDepth(const ir::KernelContext& ctx);
// What an index of tuple `entry` out of range for dim `coordinate` is told.
std::string ScatterNDIndexMessage(int64_t given, int64_t entry, int64_t coordinate,
                                  const std::vector<int64_t>& data_shape);

// Expand: the output shape for `shape` (input 1) and the input strides that
// read it (0 along broadcast dims), after the output check.
struct ExpandView {
  std::vector<int64_t> shape, strides;
};
absl::StatusOr<ExpandView> ExpandParams(const ir::KernelContext& ctx, const std::vector<int64_t>& shape);

// Tile: the output shape for `repeats` (input 1), after the output check.
absl::StatusOr<std::vector<int64_t>> TileOutputShape(const ir::KernelContext& ctx,
                                                     const std::vector<int64_t>& repeats);

// Pad: the mode is checked by the caller. Reads pads (input 1 or attribute)
// and axes (input 3), checks the output and the constant_value input.
struct PadPlan {
  ir::PadAmounts amounts;
  std::vector<int64_t> out_shape;
};
absl::StatusOr<PadPlan> PadParams(const ir::KernelContext& ctx, IntReader read, absl::string_view mode);
absl::Status CheckPadValue(const ir::KernelContext& ctx);

// Range: start, limit and delta are single elements of one dtype.
absl::Status CheckRangeInputs(const ir::KernelContext& ctx);

// ConstantOfShape: the output dtype (of the value input, f32 without one).
absl::StatusOr<DType> ConstantOfShapeDType(const ir::KernelContext& ctx);

// Trilu: k (input 1, default 0) after the rank check.
absl::StatusOr<int64_t> TriluK(const ir::KernelContext& ctx, IntReader read);

// OneHot: depth (input 1) must be one element; then, from its value on the
// host, depth, the normalised axis and the output shape (checked).
absl::Status CheckOneHotDepthInput(const ir::KernelContext& ctx);
struct OneHotPlan {
  int64_t depth = 0, axis = 0;
  std::vector<int64_t> out_shape;
};
absl::StatusOr<OneHotPlan> OneHotParams(const ir::KernelContext& ctx, const TensorView& depth_on_host);

// Transpose: the output shape and the input strides that read it.
absl::StatusOr<ExpandView> TransposeParams(const ir::KernelContext& ctx);

// Concat: the axis after the inputs are checked against the planned output,
// with the products of the dims before and after it.
struct ConcatPlan {
  int axis = 0;
  int64_t outer = 1, inner = 1;
};
absl::StatusOr<ConcatPlan> ConcatParams(const ir::KernelContext& ctx);

// Gather: the normalised axis (data rank >= 1), the error for an index out of
// range, and the output shape.
absl::StatusOr<int> GatherAxis(const ir::KernelContext& ctx);
absl::Status GatherIndexError(const ir::KernelContext& ctx, int64_t given, int axis);
std::string GatherIndexMessage(int64_t given, int axis, const std::vector<int64_t>& data_shape);
std::vector<int64_t> GatherOutputShape(const ir::KernelContext& ctx, int axis);

// Slice: the output shape, the strides that read it and the element offset of
// its first element, after the output check.
struct SliceView {
  std::vector<int64_t> shape, strides;
  int64_t offset = 0;
};
absl::StatusOr<SliceView> SliceParams(const ir::KernelContext& ctx, IntReader read);

// Shape: the [start, end) range of dims written, after the output checks.
absl::StatusOr<std::pair<int64_t, int64_t>> ShapeRange(const ir::KernelContext& ctx);

}  // namespace grove::backends

#endif  // GROVE_LIB_BACKENDS_COMMON_LAYOUT_PARAMS_H_
