// Size arithmetic and attribute checks of the vision and signal ops that the
// shape functions (lib/ir/ops/vision.cc) and the CPU kernels
// (lib/backends/cpu/vision.cc) both do: GridSample's and RoiAlign's
// attributes, DFT's axis, MaxUnpool's unpooled lengths, DFT's transform and
// output lengths, STFT's frame count. Each checks what it reads and returns
// an error message (without the op's name, which the caller adds) instead
// of a size that would overflow or be negative.
#ifndef GROVE_LIB_IR_OPS_VISION_PARAMS_H_
#define GROVE_LIB_IR_OPS_VISION_PARAMS_H_

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "lib/ir/graph.h"

namespace grove::ir {

// Lengths past this are refused: every product of two of them still fits
// in int64 and no real signal or image comes near it.
inline constexpr int64_t kMaxVisionLength = int64_t{1} << 31;

// A DFT's length: its twiddle table and work buffers hold this many
// complex values, so a length read from a model is bounded.
inline constexpr int64_t kMaxDftLength = int64_t{1} << 24;

// GridSample's attributes (opset 16; the mode names 'linear' and 'cubic' of
// opset 20), checked: mode, padding_mode, align_corners 0 or 1.
enum class GridSampleMode { kNearest, kLinear, kCubic };
enum class GridSamplePadding { kZeros, kBorder, kReflection };
struct GridSampleAttrs {
  GridSampleMode mode = GridSampleMode::kLinear;
  GridSamplePadding padding = GridSamplePadding::kZeros;
  bool align_corners = false;
};

inline absl::StatusOr<GridSampleAttrs> ReadGridSampleAttrs(const Attributes& attrs) {
  GridSampleAttrs a;
  const std::string mode = attrs.GetString("mode", "bilinear");
  if (mode == "nearest") {
    a.mode = GridSampleMode::kNearest;
  } else if (mode == "bilinear" || mode == "linear") {
    a.mode = GridSampleMode::kLinear;
  } else if (mode == "bicubic" || mode == "cubic") {
    a.mode = GridSampleMode::kCubic;
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "attribute 'mode' is '", mode, "'; expected 'bilinear', 'nearest' or 'bicubic' ('linear', 'cubic')"));
  }
  const std::string padding = attrs.GetString("padding_mode", "zeros");
  if (padding == "zeros") {
    a.padding = GridSamplePadding::kZeros;
  } else if (padding == "border") {
    a.padding = GridSamplePadding::kBorder;
  } else if (padding == "reflection") {
    a.padding = GridSamplePadding::kReflection;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("attribute 'padding_mode' is '", padding, "'; expected 'zeros', 'border' or 'reflection'"));
  }
  const int64_t align = attrs.GetInt("align_corners", 0);
  if (align != 0 && align != 1) {
    return absl::InvalidArgumentError(absl::StrCat("attribute 'align_corners' is ", align, "; expected 0 or 1"));
  }
  a.align_corners = align == 1;
  return a;
}

// DFT's axis attribute over an input of `rank` whose last dim holds the
// real and imaginary parts: in [-rank, -2] or [0, rank - 2]; the axis.
inline absl::StatusOr<int> DftAxis(int64_t axis_attr, int rank) {
  if (axis_attr < -rank || axis_attr > rank - 2 || axis_attr == -1) {
    return absl::InvalidArgumentError(absl::StrCat("attribute 'axis' is ", axis_attr, "; expected one in [", -rank,
                                                   ", -2] or [0, ", rank - 2, "] for input 0 (input) of rank ", rank,
                                                   " (the last dim holds the real and imaginary parts)"));
  }
  return static_cast<int>(axis_attr < 0 ? axis_attr + rank : axis_attr);
}

// RoiAlign's attributes (opset 16), checked: mode 'avg' or 'max',
// coordinate_transformation_mode 'half_pixel' or 'output_half_pixel',
// output_height and output_width >= 1, sampling_ratio >= 0 (0: adaptive).
struct RoiAlignAttrs {
  bool average = true;     // mode 'avg'
  bool half_pixel = true;  // coordinate_transformation_mode 'half_pixel'
  int64_t output_height = 1, output_width = 1;
  int64_t sampling_ratio = 0;
  double spatial_scale = 1.0;
};

inline absl::StatusOr<RoiAlignAttrs> ReadRoiAlignAttrs(const Attributes& attrs) {
  RoiAlignAttrs a;
  const std::string mode = attrs.GetString("mode", "avg");
  if (mode != "avg" && mode != "max") {
    return absl::InvalidArgumentError(absl::StrCat("attribute 'mode' is '", mode, "'; expected 'avg' or 'max'"));
  }
  const std::string ctm = attrs.GetString("coordinate_transformation_mode", "half_pixel");
  if (ctm != "half_pixel" && ctm != "output_half_pixel") {
    return absl::InvalidArgumentError(absl::StrCat("attribute 'coordinate_transformation_mode' is '", ctm,
                                                   "'; expected 'half_pixel' or 'output_half_pixel'"));
  }
  a.average = mode == "avg";
  a.half_pixel = ctm == "half_pixel";
  a.output_height = attrs.GetInt("output_height", 1);
  a.output_width = attrs.GetInt("output_width", 1);
  a.sampling_ratio = attrs.GetInt("sampling_ratio", 0);
  a.spatial_scale = attrs.GetFloat("spatial_scale", 1.0);
  if (a.output_height < 1 || a.output_height > kMaxVisionLength) {
    return absl::InvalidArgumentError(
        absl::StrCat("attribute 'output_height' is ", a.output_height, "; expected >= 1"));
  }
  if (a.output_width < 1 || a.output_width > kMaxVisionLength) {
    return absl::InvalidArgumentError(absl::StrCat("attribute 'output_width' is ", a.output_width, "; expected >= 1"));
  }
  if (a.sampling_ratio < 0 || a.sampling_ratio > kMaxVisionLength) {
    return absl::InvalidArgumentError(
        absl::StrCat("attribute 'sampling_ratio' is ", a.sampling_ratio, "; expected >= 0"));
  }
  return a;
}

// MaxUnpool's window attributes over `spatial` dims: kernel_shape (required,
// each >= 1), strides (default 1s, each >= 1), pads (default 0s, each >= 0,
// begins then ends).
struct UnpoolWindow {
  std::vector<int64_t> kernel, strides, pads;
};

inline absl::StatusOr<UnpoolWindow> ReadUnpoolWindow(const Attributes& attrs, int spatial) {
  UnpoolWindow w;
  if (!attrs.Has("kernel_shape")) return absl::InvalidArgumentError("attribute 'kernel_shape' is required");
  w.kernel = attrs.GetInts("kernel_shape");
  w.strides = attrs.GetInts("strides", std::vector<int64_t>(static_cast<size_t>(spatial), 1));
  w.pads = attrs.GetInts("pads", std::vector<int64_t>(static_cast<size_t>(2 * spatial), 0));
  if (static_cast<int>(w.kernel.size()) != spatial) {
    return absl::InvalidArgumentError(absl::StrCat("attribute 'kernel_shape' has ", w.kernel.size(),
                                                   " values; expected ", spatial, " (one per spatial dim of X)"));
  }
  if (static_cast<int>(w.strides.size()) != spatial) {
    return absl::InvalidArgumentError(
        absl::StrCat("attribute 'strides' has ", w.strides.size(), " values; expected ", spatial));
  }
  if (static_cast<int>(w.pads.size()) != 2 * spatial) {
    return absl::InvalidArgumentError(
        absl::StrCat("attribute 'pads' has ", w.pads.size(), " values; expected ", 2 * spatial, " (begins, ends)"));
  }
  for (int d = 0; d < spatial; ++d) {
    if (w.kernel[d] < 1 || w.kernel[d] > kMaxVisionLength) {
      return absl::InvalidArgumentError(
          absl::StrCat("attribute 'kernel_shape' is [", absl::StrJoin(w.kernel, ", "), "]; expected values >= 1"));
    }
    if (w.strides[d] < 1 || w.strides[d] > kMaxVisionLength) {
      return absl::InvalidArgumentError(
          absl::StrCat("attribute 'strides' is [", absl::StrJoin(w.strides, ", "), "]; expected values >= 1"));
    }
  }
  for (int64_t p : w.pads) {
    if (p < 0 || p > kMaxVisionLength) {
      return absl::InvalidArgumentError(
          absl::StrCat("attribute 'pads' is [", absl::StrJoin(w.pads, ", "), "]; expected values >= 0"));
    }
  }
  return w;
}

// The length MaxPool's input had along spatial dim d for an output of
// `in` elements: (in - 1) * stride - pad_begin - pad_end + kernel.
inline absl::StatusOr<int64_t> UnpooledLength(const UnpoolWindow& w, int d, int64_t in) {
  if (in < 1) return absl::InvalidArgumentError(absl::StrCat("spatial dim ", d, " of X is ", in, "; expected >= 1"));
  if (in > kMaxVisionLength) {
    return absl::InvalidArgumentError(absl::StrCat("spatial dim ", d, " of X is ", in, "; too large"));
  }
  const int64_t spatial = static_cast<int64_t>(w.kernel.size());
  const int64_t len = (in - 1) * w.strides[d] - w.pads[d] - w.pads[spatial + d] + w.kernel[d];
  if (len < 1) {
    return absl::InvalidArgumentError(absl::StrCat("spatial dim ", d, " of X (", in, ") with kernel ", w.kernel[d],
                                                   ", stride ", w.strides[d], " and pads ", w.pads[d], "+",
                                                   w.pads[spatial + d], " unpools to length ", len, "; expected >= 1"));
  }
  return len;
}

// DFT over `n` elements along its axis: the transform length and the
// output's length along the axis and in the last dim (1 real, 2 complex).
struct DftSizes {
  int64_t length = 0;       // dft_length
  int64_t axis_out = 0;     // output length along the axis
  int64_t complex_out = 2;  // output's last dim
};

// `dft_length` < 0: the input did not give one. onesided forward is the RFFT
// (floor(L/2) + 1 bins), onesided inverse the IRFFT (a real signal of L
// samples, L = 2 * (n - 1) by default).
inline absl::StatusOr<DftSizes> ComputeDftSizes(int64_t n, int64_t dft_length, bool onesided, bool inverse) {
  DftSizes s;
  if (dft_length >= 0) {
    s.length = dft_length;
  } else {
    s.length = onesided && inverse ? 2 * (n - 1) : n;
  }
  if (s.length < 1) {
    return absl::InvalidArgumentError(
        dft_length >= 0
            ? absl::StrCat("dft_length is ", dft_length, "; expected >= 1")
            : absl::StrCat("the axis has ", n, " elements, which gives dft_length ", s.length, "; expected >= 1"));
  }
  if (s.length > kMaxDftLength) {
    return absl::InvalidArgumentError(absl::StrCat("dft_length is ", s.length, "; expected <= ", kMaxDftLength));
  }
  s.axis_out = onesided && !inverse ? s.length / 2 + 1 : s.length;
  s.complex_out = onesided && inverse ? 1 : 2;
  return s;
}

// STFT's frame count: floor((signal_length - frame_length) / frame_step) + 1.
inline absl::StatusOr<int64_t> StftFrames(int64_t signal_length, int64_t frame_length, int64_t frame_step) {
  if (frame_step < 1) return absl::InvalidArgumentError(absl::StrCat("frame_step is ", frame_step, "; expected >= 1"));
  if (frame_length < 1 || frame_length > kMaxDftLength) {
    return absl::InvalidArgumentError(absl::StrCat("frame_length is ", frame_length, "; expected >= 1"));
  }
  if (frame_length > signal_length) {
    return absl::InvalidArgumentError(
        absl::StrCat("frame_length ", frame_length, " is longer than the signal (", signal_length, " samples)"));
  }
  return (signal_length - frame_length) / frame_step + 1;
}

}  // namespace grove::ir

#endif  // GROVE_LIB_IR_OPS_VISION_PARAMS_H_
