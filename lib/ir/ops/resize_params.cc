// Resize attributes and geometry; see resize_params.h.
#include "lib/ir/ops/resize_params.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "lib/ir/ops/layout_params.h"

namespace grove::ir {
namespace {

template <typename E>
struct Choice {
  const char* name;
  E value;
};

template <typename E, size_t N>
absl::Status ParseChoice(const Attributes& attrs, absl::string_view attr, const Choice<E> (&choices)[N], E* out) {
  if (!attrs.Has(attr)) return absl::OkStatus();
  const std::string given = attrs.GetString(attr, "");
  std::vector<std::string> names;
  for (const Choice<E>& c : choices) {
    if (given == c.name) {
      *out = c.value;
      return absl::OkStatus();
    }
    names.push_back(absl::StrCat("'", c.name, "'"));
  }
  return absl::InvalidArgumentError(
      absl::StrCat("attribute ", attr, " is '", given, "'; expected one of ", absl::StrJoin(names, ", ")));
}

absl::Status ParseFlag(const Attributes& attrs, absl::string_view attr, bool* out) {
  const int64_t v = attrs.GetInt(attr, 0);
  if (v != 0 && v != 1)
    return absl::InvalidArgumentError(absl::StrCat("attribute ", attr, " is ", v, "; expected 0 or 1"));
  *out = v == 1;
  return absl::OkStatus();
}

bool IsFloatDType(DType t) {
  return t == DType::kF32 || t == DType::kF64 || t == DType::kF16 || t == DType::kBF16;
}

}  // namespace

absl::StatusOr<ResizeAttrs> ParseResizeAttrs(const Attributes& attrs) {
  static constexpr Choice<ResizeMode> kModes[] = {
      {"nearest", ResizeMode::kNearest}, {"linear", ResizeMode::kLinear}, {"cubic", ResizeMode::kCubic}};
  static constexpr Choice<ResizeCoordMode> kCoords[] = {
      {"half_pixel", ResizeCoordMode::kHalfPixel},
      {"half_pixel_symmetric", ResizeCoordMode::kHalfPixelSymmetric},
      {"pytorch_half_pixel", ResizeCoordMode::kPytorchHalfPixel},
      {"align_corners", ResizeCoordMode::kAlignCorners},
      {"asymmetric", ResizeCoordMode::kAsymmetric},
      {"tf_half_pixel_for_nn", ResizeCoordMode::kTfHalfPixelForNn},
      {"tf_crop_and_resize", ResizeCoordMode::kTfCropAndResize}};
  static constexpr Choice<ResizeNearestMode> kNearest[] = {
      {"round_prefer_floor", ResizeNearestMode::kRoundPreferFloor},
      {"round_prefer_ceil", ResizeNearestMode::kRoundPreferCeil},
      {"floor", ResizeNearestMode::kFloor},
      {"ceil", ResizeNearestMode::kCeil}};
  static constexpr Choice<ResizeAspectPolicy> kPolicies[] = {{"stretch", ResizeAspectPolicy::kStretch},
                                                             {"not_larger", ResizeAspectPolicy::kNotLarger},
                                                             {"not_smaller", ResizeAspectPolicy::kNotSmaller}};
  ResizeAttrs a;
  if (absl::Status s = ParseChoice(attrs, "mode", kModes, &a.mode); !s.ok()) return s;
  if (absl::Status s = ParseChoice(attrs, "coordinate_transformation_mode", kCoords, &a.coord); !s.ok()) return s;
  if (absl::Status s = ParseChoice(attrs, "nearest_mode", kNearest, &a.nearest); !s.ok()) return s;
  if (absl::Status s = ParseChoice(attrs, "keep_aspect_ratio_policy", kPolicies, &a.policy); !s.ok()) return s;
  if (absl::Status s = ParseFlag(attrs, "exclude_outside", &a.exclude_outside); !s.ok()) return s;
  if (absl::Status s = ParseFlag(attrs, "antialias", &a.antialias); !s.ok()) return s;
  a.cubic_a = attrs.GetFloat("cubic_coeff_a", -0.75);
  a.extrapolation_value = attrs.GetFloat("extrapolation_value", 0.0);
  a.has_axes = attrs.Has("axes");
  a.axes = attrs.GetInts("axes");
  return a;
}

absl::StatusOr<std::vector<int64_t>> ResizeAxes(const ResizeAttrs& attrs, int64_t rank) {
  std::vector<int64_t> axes;
  if (!attrs.has_axes) {
    for (int64_t d = 0; d < rank; ++d) axes.push_back(d);
    return axes;
  }
  absl::StatusOr<std::vector<bool>> mask = AxesMask(attrs.axes, rank, "attribute axes");
  if (!mask.ok()) return mask.status();
  for (int64_t a : attrs.axes) axes.push_back(a < 0 ? a + rank : a);
  return axes;
}

absl::StatusOr<ResizeGeometry> ResizeGeometryFor(absl::Span<const int64_t> in_dims, const ResizeAttrs& attrs,
                                                 const TensorView* roi, const TensorView* scales,
                                                 const TensorView* sizes) {
  const int64_t rank = static_cast<int64_t>(in_dims.size());
  absl::StatusOr<std::vector<int64_t>> axes_or = ResizeAxes(attrs, rank);
  if (!axes_or.ok()) return axes_or.status();
  const std::vector<int64_t>& axes = *axes_or;
  const int64_t n = static_cast<int64_t>(axes.size());
  const bool has_scales = ResizeInputGiven(scales), has_sizes = ResizeInputGiven(sizes);
  if (has_scales && has_sizes) {
    return absl::InvalidArgumentError("scales (input 2) and sizes (input 3) are both given; give only one");
  }
  if (!has_scales && !has_sizes) {
    return absl::InvalidArgumentError("needs scales (input 2) or sizes (input 3); both are missing or empty");
  }
  const std::string described = attrs.has_axes ? absl::StrCat(n, " (one per axis in attribute axes)")
                                               : absl::StrCat(n, " (the input's rank)");
  ResizeGeometry g;
  g.out_dims.assign(in_dims.begin(), in_dims.end());
  g.scales.assign(static_cast<size_t>(rank), 1.0);
  if (has_scales) {
    if (!IsFloatDType(scales->dtype)) {
      return absl::InvalidArgumentError(
          absl::StrCat("scales (input 2) has dtype ", DTypeName(scales->dtype), "; expected f32"));
    }
    if (scales->num_elements() != n) {
      return absl::InvalidArgumentError(
          absl::StrCat("scales (input 2) has ", scales->num_elements(), " elements; expected ", described));
    }
    for (int64_t i = 0; i < n; ++i) {
      const double s = ReadNumber(*scales, i);
      const int64_t d = axes[i];
      if (!(s > 0) || !std::isfinite(s)) {
        return absl::InvalidArgumentError(
            absl::StrCat("scales (input 2) element ", i, " is ", s, "; expected > 0"));
      }
      const double out = std::floor(s * static_cast<double>(in_dims[d]));
      if (out > 9.0e15) {
        return absl::InvalidArgumentError(
            absl::StrCat("scale ", s, " makes dim ", d, " of ", in_dims[d], " too large"));
      }
      g.out_dims[d] = static_cast<int64_t>(out);
      g.scales[d] = s;
    }
  } else {
    std::vector<int64_t> want;
    if (!ReadIntegers(*sizes, &want)) {
      return absl::InvalidArgumentError(
          absl::StrCat("sizes (input 3) has dtype ", DTypeName(sizes->dtype), "; expected i64"));
    }
    if (static_cast<int64_t>(want.size()) != n) {
      return absl::InvalidArgumentError(
          absl::StrCat("sizes (input 3) has ", want.size(), " elements; expected ", described));
    }
    for (int64_t i = 0; i < n; ++i) {
      const int64_t d = axes[i];
      if (want[i] < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("sizes (input 3) ", DimsString(want), " has a negative size"));
      }
      if (in_dims[d] == 0 && want[i] != 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("sizes (input 3) asks for ", want[i], " elements along dim ", d, ", which is empty"));
      }
      g.out_dims[d] = want[i];
      g.scales[d] = in_dims[d] == 0 ? 1.0 : static_cast<double>(want[i]) / static_cast<double>(in_dims[d]);
    }
    if (attrs.policy != ResizeAspectPolicy::kStretch && n > 0) {
      double scale = g.scales[axes[0]];
      for (int64_t d : axes) {
        scale = attrs.policy == ResizeAspectPolicy::kNotLarger ? std::min(scale, g.scales[d])
                                                               : std::max(scale, g.scales[d]);
      }
      for (int64_t d : axes) {
        g.scales[d] = scale;
        g.out_dims[d] = static_cast<int64_t>(scale * static_cast<double>(in_dims[d]) + 0.5);
      }
    }
  }
  if (attrs.coord == ResizeCoordMode::kTfCropAndResize) {
    g.roi_start.assign(static_cast<size_t>(rank), 0.0);
    g.roi_end.assign(static_cast<size_t>(rank), 1.0);
    g.roi_f32 = true;
    if (roi != nullptr && roi->num_elements() > 0) {
      if (!IsFloatDType(roi->dtype)) {
        return absl::InvalidArgumentError(
            absl::StrCat("roi (input 1) has dtype ", DTypeName(roi->dtype), "; expected a float type"));
      }
      if (roi->num_elements() != 2 * n) {
        return absl::InvalidArgumentError(absl::StrCat("roi (input 1) has ", roi->num_elements(),
                                                       " elements; expected ", 2 * n, " (starts and ends for ",
                                                       described, ")"));
      }
      for (int64_t i = 0; i < n; ++i) {
        g.roi_start[axes[i]] = ReadNumber(*roi, i);
        g.roi_end[axes[i]] = ReadNumber(*roi, i + n);
      }
      g.roi_f32 = roi->dtype != DType::kF64;
    }
  }
  return g;
}

}  // namespace grove::ir
