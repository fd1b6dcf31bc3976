// Resize's attributes and geometry (output dims, the scale each dim's
// coordinate transform uses, the crop region), shared by its shape function
// and its CPU kernel. Follows the ONNX reference implementation (opsets
// 11-19): with `sizes` the scale is sizes/input in double precision, with
// `scales` the output is floor(scale * input) and the given scale is used.
//
//   absl::StatusOr<ResizeAttrs> a = ParseResizeAttrs(node.attrs);
//   absl::StatusOr<ResizeGeometry> g = ResizeGeometryFor({1, 3, 4, 4}, *a, roi, scales, sizes);
//   g->out_dims;  // {1, 3, 8, 8} for scales {1, 1, 2, 2}
#ifndef GROVE_LIB_IR_OPS_RESIZE_PARAMS_H_
#define GROVE_LIB_IR_OPS_RESIZE_PARAMS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "grove/grove.h"
#include "lib/ir/graph.h"

namespace grove::ir {

enum class ResizeMode { kNearest, kLinear, kCubic };
enum class ResizeCoordMode {
  kHalfPixel,
  kHalfPixelSymmetric,
  kPytorchHalfPixel,
  kAlignCorners,
  kAsymmetric,
  kTfHalfPixelForNn,
  kTfCropAndResize,
};
enum class ResizeNearestMode { kRoundPreferFloor, kRoundPreferCeil, kFloor, kCeil };
enum class ResizeAspectPolicy { kStretch, kNotLarger, kNotSmaller };

struct ResizeAttrs {
  ResizeMode mode = ResizeMode::kNearest;
  ResizeCoordMode coord = ResizeCoordMode::kHalfPixel;
  ResizeNearestMode nearest = ResizeNearestMode::kRoundPreferFloor;
  double cubic_a = -0.75;
  bool exclude_outside = false;
  double extrapolation_value = 0.0;
  bool antialias = false;
  bool has_axes = false;
  std::vector<int64_t> axes;  // as given (opset 18); normalised by ResizeAxes
  ResizeAspectPolicy policy = ResizeAspectPolicy::kStretch;
};

absl::StatusOr<ResizeAttrs> ParseResizeAttrs(const Attributes& attrs);

// The dims that scales/sizes/roi describe, in order: the axes attribute
// normalised (each once), or every dim.
absl::StatusOr<std::vector<int64_t>> ResizeAxes(const ResizeAttrs& attrs, int64_t rank);

struct ResizeGeometry {
  std::vector<int64_t> out_dims;
  std::vector<double> scales;  // per dim; 1 for dims not resized
  // tf_crop_and_resize: per dim, normalised coordinates of the crop.
  std::vector<double> roi_start, roi_end;
  // The ONNX reference does part of the crop arithmetic in the roi's own
  // float32 precision; the kernel repeats that when this is set.
  bool roi_f32 = false;
};

// A scales or sizes input counts as given when it is present and not empty
// (opset 11 passes an empty scales tensor to use sizes).
inline bool ResizeInputGiven(const TensorView* v) { return v != nullptr && v->num_elements() > 0; }

// Output dims and per-dim scales for an input of `in_dims`; roi, scales and
// sizes may be null (omitted).
absl::StatusOr<ResizeGeometry> ResizeGeometryFor(absl::Span<const int64_t> in_dims, const ResizeAttrs& attrs,
                                                 const TensorView* roi, const TensorView* scales,
                                                 const TensorView* sizes);

}  // namespace grove::ir

#endif  // GROVE_LIB_IR_OPS_RESIZE_PARAMS_H_
