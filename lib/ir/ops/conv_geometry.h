// Window geometry of Conv, ConvTranspose, MaxPool and AveragePool (ONNX
// opset 11-17), shared by the shape functions and the CPU kernels so that a
// planned output shape and a computed one cannot differ: the attributes read
// and checked once, the output length of each spatial dim on SymDims (one
// formula for symbolic dims at load and concrete dims at run time), and the
// padding that auto_pad or ConvTranspose's output_shape imply.
//
//   absl::StatusOr<WindowGeometry> g = ReadWindowGeometry(attrs, WindowOp::kPool, 2, nullptr);
//   absl::StatusOr<SymDim> h_out = WindowOutputDim(*g, 0, h_in);   // h_in may be symbolic
#ifndef GROVE_LIB_IR_OPS_CONV_GEOMETRY_H_
#define GROVE_LIB_IR_OPS_CONV_GEOMETRY_H_

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "lib/ir/graph.h"
#include "lib/ir/sym_dim.h"

namespace grove::ir {

enum class AutoPad { kNotSet, kSameUpper, kSameLower, kValid };
enum class WindowOp { kConv, kConvTranspose, kPool };

// Kernel sizes, strides, dilations and pads above this are rejected: no real
// model comes near it, and it keeps every product below int64 overflow.
inline constexpr int64_t kMaxWindowAttr = int64_t{1} << 24;

struct WindowGeometry {
  int spatial = 0;
  AutoPad auto_pad = AutoPad::kNotSet;
  std::vector<int64_t> kernel;  // -1: not known (a Conv weight with a symbolic dim)
  std::vector<int64_t> strides;
  std::vector<int64_t> dilations;
  std::vector<int64_t> pads;  // begins then ends; used with NOTSET only
  bool ceil_mode = false;
  std::vector<int64_t> output_padding;  // ConvTranspose
  std::vector<int64_t> output_shape;    // ConvTranspose; spatial dims, empty when not given

  int64_t EffectiveKernel(int d) const { return (kernel[d] - 1) * dilations[d] + 1; }
};

namespace conv_geometry_internal {

// Reads `name` (when given) as exactly `count` values in [min, kMaxWindowAttr].
inline absl::Status ReadBoundedInts(const Attributes& attrs, absl::string_view name, int count, int64_t min,
                                    std::vector<int64_t>* out) {
  if (!attrs.Has(name)) return absl::OkStatus();
  std::vector<int64_t> v = attrs.GetInts(name);
  if (static_cast<int>(v.size()) != count) {
    return absl::InvalidArgumentError(absl::StrCat("attribute '", name, "' has ", v.size(), " values [",
                                                   absl::StrJoin(v, ", "), "]; expected ", count));
  }
  for (int64_t x : v) {
    if (x < min || x > kMaxWindowAttr) {
      return absl::InvalidArgumentError(absl::StrCat("attribute '", name, "' is [", absl::StrJoin(v, ", "),
                                                     "]; expected values in ", min, "..", kMaxWindowAttr));
    }
  }
  *out = std::move(v);
  return absl::OkStatus();
}

}  // namespace conv_geometry_internal

// Reads the window attributes of an op with `spatial` spatial dims.
// `weight_kernel` holds W's spatial dims (Conv, ConvTranspose), which an
// explicit kernel_shape must match; pooling passes nullptr and needs
// kernel_shape. Errors name the attribute, what was given and what was
// expected.
inline absl::StatusOr<WindowGeometry> ReadWindowGeometry(const Attributes& attrs, WindowOp op, int spatial,
                                                         const SymShape* weight_kernel) {
  namespace in = conv_geometry_internal;
  WindowGeometry g;
  g.spatial = spatial;
  const std::string auto_pad = attrs.GetString("auto_pad", "NOTSET");
  if (auto_pad == "NOTSET" || auto_pad.empty()) {
    g.auto_pad = AutoPad::kNotSet;
  } else if (auto_pad == "SAME_UPPER") {
    g.auto_pad = AutoPad::kSameUpper;
  } else if (auto_pad == "SAME_LOWER") {
    g.auto_pad = AutoPad::kSameLower;
  } else if (auto_pad == "VALID") {
    g.auto_pad = AutoPad::kValid;
  } else {
    return absl::InvalidArgumentError(absl::StrCat("attribute 'auto_pad' is '", auto_pad,
                                                   "'; expected NOTSET, SAME_UPPER, SAME_LOWER or VALID"));
  }

  if (!attrs.Has("kernel_shape") && weight_kernel == nullptr) {
    return absl::InvalidArgumentError("attribute 'kernel_shape' is required");
  }
  g.kernel.assign(spatial, -1);
  if (absl::Status s = in::ReadBoundedInts(attrs, "kernel_shape", spatial, 1, &g.kernel); !s.ok()) return s;
  if (weight_kernel != nullptr) {
    for (int d = 0; d < spatial; ++d) {
      const SymDim& w = (*weight_kernel)[d];
      if (!w.is_const()) continue;
      if (w.value() < 1 || w.value() > kMaxWindowAttr) {
        return absl::InvalidArgumentError(
            absl::StrCat("input 1 (W) has spatial dim ", d, " of ", w.value(), "; expected 1..", kMaxWindowAttr));
      }
      if (g.kernel[d] < 0) {
        g.kernel[d] = w.value();
      } else if (g.kernel[d] != w.value()) {
        std::vector<int64_t> w_dims;
        for (const SymDim& x : *weight_kernel) w_dims.push_back(x.is_const() ? x.value() : -1);
        return absl::InvalidArgumentError(
            absl::StrCat("attribute 'kernel_shape' is [", absl::StrJoin(g.kernel, ", "),
                         "] but input 1 (W) has spatial dims [", absl::StrJoin(w_dims, ", "), "]"));
      }
    }
  }
  g.strides.assign(spatial, 1);
  g.dilations.assign(spatial, 1);
  g.pads.assign(2 * spatial, 0);
  if (absl::Status s = in::ReadBoundedInts(attrs, "strides", spatial, 1, &g.strides); !s.ok()) return s;
  if (absl::Status s = in::ReadBoundedInts(attrs, "dilations", spatial, 1, &g.dilations); !s.ok()) return s;
  if (absl::Status s = in::ReadBoundedInts(attrs, "pads", 2 * spatial, 0, &g.pads); !s.ok()) return s;
  if (g.auto_pad != AutoPad::kNotSet &&
      std::any_of(g.pads.begin(), g.pads.end(), [](int64_t p) { return p != 0; })) {
    return absl::InvalidArgumentError(absl::StrCat("attribute 'pads' [", absl::StrJoin(g.pads, ", "),
                                                   "] cannot be used with auto_pad '", auto_pad, "'"));
  }

  if (op == WindowOp::kPool) {
    const int64_t ceil_mode = attrs.GetInt("ceil_mode", 0);
    if (ceil_mode != 0 && ceil_mode != 1) {
      return absl::InvalidArgumentError(absl::StrCat("attribute 'ceil_mode' is ", ceil_mode, "; expected 0 or 1"));
    }
    g.ceil_mode = ceil_mode == 1;
  } else {
    const int64_t group = attrs.GetInt("group", 1);
    if (group < 1 || group > kMaxWindowAttr) {
      return absl::InvalidArgumentError(
          absl::StrCat("attribute 'group' is ", group, "; expected 1..", kMaxWindowAttr));
    }
  }

  if (op == WindowOp::kConvTranspose) {
    g.output_padding.assign(spatial, 0);
    if (absl::Status s = in::ReadBoundedInts(attrs, "output_padding", spatial, 0, &g.output_padding); !s.ok()) {
      return s;
    }
    for (int d = 0; d < spatial; ++d) {
      if (g.output_padding[d] >= std::max(g.strides[d], g.dilations[d])) {
        return absl::InvalidArgumentError(
            absl::StrCat("attribute 'output_padding' is [", absl::StrJoin(g.output_padding, ", "), "]; dim ", d,
                         " must be less than its stride (", g.strides[d], ") or dilation (", g.dilations[d], ")"));
      }
    }
    if (attrs.Has("output_shape")) {
      std::vector<int64_t> shape = attrs.GetInts("output_shape");
      // Some exporters give the whole shape [N, C, spatial...]; the spatial
      // dims are the last ones either way.
      if (static_cast<int>(shape.size()) != spatial && static_cast<int>(shape.size()) != spatial + 2) {
        return absl::InvalidArgumentError(absl::StrCat("attribute 'output_shape' has ", shape.size(),
                                                       " values; expected ", spatial, " (the spatial dims)"));
      }
      shape.erase(shape.begin(), shape.end() - spatial);
      for (int64_t x : shape) {
        if (x < 1 || x > (int64_t{1} << 40)) {
          return absl::InvalidArgumentError(absl::StrCat("attribute 'output_shape' is [",
                                                         absl::StrJoin(shape, ", "), "]; expected positive dims"));
        }
      }
      g.output_shape = std::move(shape);
    }
  }
  return g;
}

// Output length of spatial dim d of a Conv or pooling window over `in`. A
// symbolic `in` gives a symbolic result when the division by the stride is
// exact (stride 1, or coefficients that divide), else an unknown dim.
inline absl::StatusOr<SymDim> WindowOutputDim(const WindowGeometry& g, int d, const SymDim& in) {
  if (g.kernel[d] < 0 || in.is_unknown()) return SymDim::Unknown();
  const int64_t s = g.strides[d];
  const int64_t ek = g.EffectiveKernel(d);
  if (g.auto_pad == AutoPad::kSameUpper || g.auto_pad == AutoPad::kSameLower) {
    return (in + SymDim(s - 1)) / SymDim(s);  // ceil(in / s)
  }
  const bool explicit_pads = g.auto_pad == AutoPad::kNotSet;
  const int64_t pb = explicit_pads ? g.pads[d] : 0;
  const int64_t pe = explicit_pads ? g.pads[g.spatial + d] : 0;
  const SymDim span = in + SymDim(pb + pe - ek);
  if (span.is_const() && span.value() < 0) {
    return absl::InvalidArgumentError(absl::StrCat("spatial dim ", d, " has length ", in.value(), " plus pads ",
                                                   pb, "+", pe, ", shorter than the window (kernel ", g.kernel[d],
                                                   ", dilation ", g.dilations[d], ")"));
  }
  const SymDim q = (g.ceil_mode ? span + SymDim(s - 1) : span) / SymDim(s);
  if (q.is_unknown()) return q;
  SymDim out = q + SymDim(1);
  if (g.ceil_mode) {
    // The last window must start inside the input or its begin padding
    // (ONNX, PyTorch); exact division leaves the difference constant.
    const SymDim overshoot = (out - SymDim(1)) * SymDim(s) - (in + SymDim(pb));
    if (!overshoot.is_const()) return SymDim::Unknown();
    if (overshoot.value() >= 0) out = out - SymDim(1);
  }
  return out;
}

// Begin and end padding of spatial dim d of a Conv or pooling window, for
// concrete input and output lengths.
inline std::pair<int64_t, int64_t> WindowPads(const WindowGeometry& g, int d, int64_t in, int64_t out) {
  switch (g.auto_pad) {
    case AutoPad::kNotSet:
      return {g.pads[d], g.pads[g.spatial + d]};
    case AutoPad::kValid:
      return {0, 0};
    case AutoPad::kSameUpper:
    case AutoPad::kSameLower: {
      const int64_t total = std::max<int64_t>(0, (out - 1) * g.strides[d] + g.EffectiveKernel(d) - in);
      const int64_t begin = g.auto_pad == AutoPad::kSameUpper ? total / 2 : total - total / 2;
      return {begin, total - begin};
    }
  }
  return {0, 0};
}

// Output length of spatial dim d of a ConvTranspose over `in`.
inline absl::StatusOr<SymDim> TransposedOutputDim(const WindowGeometry& g, int d, const SymDim& in) {
  if (!g.output_shape.empty()) return SymDim(g.output_shape[d]);
  if (in.is_unknown()) return in;
  const int64_t s = g.strides[d];
  if (in.is_const() && in.value() > (int64_t{1} << 40)) {
    return absl::InvalidArgumentError(absl::StrCat("spatial dim ", d, " has length ", in.value(), "; too long"));
  }
  if (g.kernel[d] < 0) return SymDim::Unknown();
  if (g.auto_pad == AutoPad::kSameUpper || g.auto_pad == AutoPad::kSameLower) return in * SymDim(s);
  const bool explicit_pads = g.auto_pad == AutoPad::kNotSet;
  const int64_t pads = explicit_pads ? g.pads[d] + g.pads[g.spatial + d] : 0;
  const SymDim out = in * SymDim(s) + SymDim(g.output_padding[d] + g.EffectiveKernel(d) - s - pads);
  if (out.is_const() && out.value() < 0) {
    return absl::InvalidArgumentError(absl::StrCat("spatial dim ", d, " of length ", in.value(),
                                                   " gives a negative output length ", out.value(),
                                                   " (pads exceed the transposed window)"));
  }
  return out;
}

// Begin padding of spatial dim d of a ConvTranspose: input position i with
// kernel tap k lands on output position i * stride + k * dilation - begin.
// With output_shape or SAME_*, ONNX derives it from the total padding, the
// odd unit at the end for SAME_UPPER and at the start otherwise.
inline int64_t TransposedPadBegin(const WindowGeometry& g, int d, int64_t in, int64_t out) {
  if (g.output_shape.empty() && g.auto_pad != AutoPad::kSameUpper && g.auto_pad != AutoPad::kSameLower) {
    return g.auto_pad == AutoPad::kNotSet ? g.pads[d] : 0;
  }
  const int64_t total =
      std::max<int64_t>(0, g.strides[d] * (in - 1) + g.output_padding[d] + g.EffectiveKernel(d) - out);
  return g.auto_pad == AutoPad::kSameUpper ? total / 2 : total - total / 2;
}

}  // namespace grove::ir

#endif  // GROVE_LIB_IR_OPS_CONV_GEOMETRY_H_
