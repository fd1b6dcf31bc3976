// Resize on the CPU, written to reproduce the ONNX reference implementation
// (onnx/reference/ops/op_resize.py) rather than any one framework: the same
// coordinate arithmetic in the same precision, the same choice of neighbours
// (a coordinate that lands exactly on a sample counts as ratio 1 from the one
// before), edge clamping for taps outside the input, and the interpolation
// applied one dim at a time from the last dim to the first in double
// precision, as the reference's recursion does. Nearest copies bytes (any
// dtype); linear and cubic compute in double and convert back as ONNX Cast
// would (integers truncate).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "lib/backends/common/prepared.h"
#include "lib/backends/cpu/resize_kernel.h"
#include "lib/backends/cpu/workspace_layout.h"
#include "lib/ir/element_types.h"
#include "lib/ir/ops/layout_params.h"
#include "lib/ir/ops/resize_params.h"

namespace grove::cpu {

using ir::BFloat16;
using ir::ConvertElement;
using ir::Half;
using ir::ToCompute;
using ir::VisitAnyDType;
using ir::VisitDType;

namespace {

using ir::ResizeAttrs;
using ir::ResizeCoordMode;
using ir::ResizeGeometry;
using ir::ResizeMode;
using ir::ResizeNearestMode;

struct Tap {
  int64_t index;
  double weight;
};

// How one dim is resampled: for output coordinate x, the taps
// [first[x], first[x + 1]), or the extrapolation value when outside[x].
struct AxisPlan {
  int64_t in = 0, out = 0;
  bool identity = false;
  std::vector<int64_t> first;
  std::vector<Tap> taps;
  std::vector<bool> outside;
};

// The input coordinate output coordinate x maps to; `outside` is set when
// tf_crop_and_resize samples beyond the input.
double Coordinate(const ResizeAttrs& a, const ResizeGeometry& g, size_t dim, int64_t in_w, int64_t x,
                  bool* outside) {
  *outside = false;
  const double scale = g.scales[dim];
  const double xd = static_cast<double>(x);
  const double in_d = static_cast<double>(in_w);
  // The reference's output_width is scale * input, not the integer size.
  const double out_w = scale * in_d;
  switch (a.coord) {
    case ResizeCoordMode::kHalfPixel:
      return (xd + 0.5) / scale - 0.5;
    case ResizeCoordMode::kHalfPixelSymmetric: {
      const double adjustment = static_cast<double>(g.out_dims[dim]) / out_w;
      const double center = in_d / 2;
      const double offset = center * (1 - adjustment);
      return offset + (xd + 0.5) / scale - 0.5;
    }
    case ResizeCoordMode::kPytorchHalfPixel:
      return out_w == 1 ? -0.5 : (xd + 0.5) / scale - 0.5;
    case ResizeCoordMode::kAlignCorners:
      return out_w == 1 ? 0.0 : xd * (in_d - 1) / (out_w - 1);
    case ResizeCoordMode::kAsymmetric:
      return xd / scale;
    case ResizeCoordMode::kTfHalfPixelForNn:
      return (xd + 0.5) / scale;
    case ResizeCoordMode::kTfCropAndResize: {
      double c;
      if (g.roi_f32) {
        // numpy keeps float32 roi arithmetic in float32 until it meets a
        // float64 operand; follow it step by step.
        const float start = static_cast<float>(g.roi_start[dim]), end = static_cast<float>(g.roi_end[dim]);
        const float span = end - start;
        const float start_px = start * static_cast<float>(in_w - 1);
        if (out_w == 1) {
          c = static_cast<double>(span * static_cast<float>(in_w - 1) / 2.0f + start_px);
        } else {
          c = xd * static_cast<double>(span) * (in_d - 1) / (out_w - 1) + static_cast<double>(start_px);
        }
      } else {
        const double start = g.roi_start[dim], span = g.roi_end[dim] - g.roi_start[dim];
        c = (out_w == 1 ? span * (in_d - 1) / 2 : xd * span * (in_d - 1) / (out_w - 1)) + start * (in_d - 1);
      }
      *outside = c < 0 || c > in_d - 1;
      return c;
    }
  }
  return 0.0;
}

double CubicCoeff(double x, double A) {
  x = std::fabs(x);
  const double x2 = x * x, x3 = x * x2;
  if (x <= 1) return (A + 2) * x3 - (A + 3) * x2 + 1;
  if (x < 2) return A * x3 - 5 * A * x2 + 8 * A * x - 4 * A;
  return 0.0;
}

// Offsets (relative to `base`) and weights of one output sample at
// `ratio` in (0, 1] past `base`.
void Weights(const ResizeAttrs& a, double scale, double ratio, std::vector<int64_t>* offsets,
             std::vector<double>* w) {
  offsets->clear();
  w->clear();
  if (a.mode == ResizeMode::kNearest) {
    bool up;
    if (ratio == 1.0) {
      up = true;
    } else {
      switch (a.nearest) {
        case ResizeNearestMode::kRoundPreferFloor:
          up = ratio > 0.5;
          break;
        case ResizeNearestMode::kRoundPreferCeil:
          up = ratio >= 0.5;
          break;
        case ResizeNearestMode::kFloor:
          up = false;
          break;
        default:
          up = true;
          break;
      }
    }
    offsets->push_back(up ? 1 : 0);
    w->push_back(1.0);
    return;
  }
  if (a.antialias) {
    // The filter widens by 1/scale when downsampling; weights sum to 1.
    const double s = std::min(scale, 1.0);
    double sum = 0;
    if (a.mode == ResizeMode::kLinear) {
      const int64_t start = static_cast<int64_t>(std::floor(-1 / s) + 1);
      const int64_t footprint = 2 - 2 * start;
      for (int64_t i = start; i < start + footprint; ++i) {
        const double c = std::clamp(1 - std::fabs((static_cast<double>(i) - ratio) * s), 0.0, 1.0);
        offsets->push_back(i);
        w->push_back(c);
        sum += c;
      }
    } else {
      const int64_t start = static_cast<int64_t>(std::floor(-2 / s) + 1);
      for (int64_t i = start; i < 2 - start; ++i) {
        const double c = CubicCoeff(s * (static_cast<double>(i) - ratio), a.cubic_a);
        offsets->push_back(i);
        w->push_back(c);
        sum += c;
      }
    }
    for (double& c : *w) c /= sum;
    return;
  }
  if (a.mode == ResizeMode::kLinear) {
    *offsets = {0, 1};
    *w = {1 - ratio, ratio};
    return;
  }
  const double A = a.cubic_a, r = ratio;
  *offsets = {-1, 0, 1, 2};
  *w = {((A * (r + 1) - 5 * A) * (r + 1) + 8 * A) * (r + 1) - 4 * A, ((A + 2) * r - (A + 3)) * r * r + 1,
        ((A + 2) * (1 - r) - (A + 3)) * (1 - r) * (1 - r) + 1,
        ((A * ((1 - r) + 1) - 5 * A) * ((1 - r) + 1) + 8 * A) * ((1 - r) + 1) - 4 * A};
}

AxisPlan PlanAxis(const ResizeAttrs& a, const ResizeGeometry& g, size_t dim, int64_t in) {
  AxisPlan p;
  p.in = in;
  p.out = g.out_dims[dim];
  p.first.reserve(static_cast<size_t>(p.out) + 1);
  p.outside.assign(static_cast<size_t>(p.out), false);
  std::vector<int64_t> offsets;
  std::vector<double> w;
  bool identity = p.out == in;
  for (int64_t x = 0; x < p.out; ++x) {
    p.first.push_back(static_cast<int64_t>(p.taps.size()));
    bool outside = false;
    const double c = Coordinate(a, g, dim, in, x, &outside);
    if (outside) {
      p.outside[x] = true;
      identity = false;
      continue;
    }
    // A coordinate exactly on a sample is taken as ratio 1 from the sample
    // before it, which decides which neighbours a tap set covers.
    const double fl = std::floor(c);
    const double ratio = c == fl ? 1.0 : c - fl;
    const int64_t base = static_cast<int64_t>(fl) - (c == fl ? 1 : 0);
    Weights(a, g.scales[dim], ratio, &offsets, &w);
    if (a.exclude_outside && a.mode != ResizeMode::kNearest) {
      double sum = 0;
      for (size_t t = 0; t < w.size(); ++t) {
        const int64_t i = base + offsets[t];
        if (i < 0 || i >= in) w[t] = 0;
        sum += w[t];
      }
      for (double& v : w) v /= sum;
    }
    int nonzero = 0;
    for (size_t t = 0; t < w.size(); ++t) {
      const int64_t i = std::clamp<int64_t>(base + offsets[t], 0, in - 1);
      p.taps.push_back({i, w[t]});
      if (w[t] != 0) {
        ++nonzero;
        identity &= i == x && w[t] == 1.0;
      }
    }
    identity &= nonzero == 1;
  }
  p.first.push_back(static_cast<int64_t>(p.taps.size()));
  p.identity = identity;
  return p;
}

int64_t Product(const std::vector<int64_t>& dims, size_t begin, size_t end) {
  int64_t p = 1;
  for (size_t i = begin; i < end; ++i) p *= dims[i];
  return p;
}

// What the prepare made: per dim its taps, and for nearest the input offset
// each output index reads (or -1) and the extrapolation bytes; for linear
// and cubic the loop of the dtype and the two ping-pong buffers of doubles
// (the workspace). Made once when the plan knows roi, scales and sizes
// (inputs 1-3: weights or folded values, as exported models have); per run
// otherwise (`planned` false).
struct ResizeParams {
  bool planned = false;
  bool nearest = false;
  bool empty = false;  // an empty output: nothing to do
  std::vector<AxisPlan> plans;
  std::vector<std::vector<int64_t>> src;  // nearest: per dim
  alignas(StringRef) uint8_t extrapolation[sizeof(StringRef)] = {};
  double extrapolation_value = 0;
  int64_t buffer_elements = 0;  // per ping-pong buffer
  void (*interpolate)(const ir::KernelContext& ctx, const ResizeParams& p, double* a, double* b) = nullptr;
};

// Nearest: output element = input element at each dim's chosen index, or the
// extrapolation value when some dim samples outside the crop.
void ResizeNearest(const ResizeParams& p, const TensorView& x, TensorView& y) {
  const size_t rank = p.plans.size();
  const size_t es = DTypeSize(x.dtype);
  const auto* in = static_cast<const uint8_t*>(x.data);
  auto* out = static_cast<uint8_t*>(y.data);
  const int64_t total = y.num_elements();
  const int64_t row = y.shape[rank - 1];
  const std::vector<int64_t>& last = p.src[rank - 1];
  absl::InlinedVector<int64_t, 8> pos(rank - 1, 0);
  for (int64_t start = 0; start < total; start += row) {
    int64_t base = 0;
    for (size_t d = 0; d + 1 < rank && base >= 0; ++d) {
      const int64_t s = p.src[d][pos[d]];
      base = s < 0 ? -1 : base + s;
    }
    uint8_t* o = out + start * static_cast<int64_t>(es);
    for (int64_t j = 0; j < row; ++j) {
      const uint8_t* from =
          base < 0 || last[j] < 0 ? p.extrapolation : in + (base + last[j]) * static_cast<int64_t>(es);
      std::memcpy(o + j * static_cast<int64_t>(es), from, es);
    }
    for (int d = static_cast<int>(rank) - 2; d >= 0; --d) {
      if (++pos[d] < y.shape[d]) break;
      pos[d] = 0;
    }
  }
}

// Linear and cubic: one pass per resampled dim, last dim first, from buffer
// `buf` into the other; returns the buffer holding the result.
double* ResizeInterpolate(const std::vector<AxisPlan>& plans, double* buf, double* other,
                          absl::Span<const int64_t> in_shape, double extrapolation) {
  absl::InlinedVector<int64_t, 8> shape(in_shape.begin(), in_shape.end());
  for (int d = static_cast<int>(plans.size()) - 1; d >= 0; --d) {
    const AxisPlan& p = plans[d];
    if (p.identity) continue;
    int64_t outer = 1, inner = 1;
    for (int k = 0; k < d; ++k) outer *= shape[k];
    for (size_t k = static_cast<size_t>(d) + 1; k < shape.size(); ++k) inner *= shape[k];
    double* next = other;
    std::fill(next, next + outer * p.out * inner, 0.0);
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t x = 0; x < p.out; ++x) {
        double* dst = next + (o * p.out + x) * inner;
        if (p.outside[x]) {
          std::fill(dst, dst + inner, extrapolation);
          continue;
        }
        for (int64_t t = p.first[x]; t < p.first[x + 1]; ++t) {
          const double w = p.taps[t].weight;
          const double* src = buf + (o * p.in + p.taps[t].index) * inner;
          for (int64_t i = 0; i < inner; ++i) dst[i] += w * src[i];
        }
      }
    }
    shape[d] = p.out;
    other = buf;
    buf = next;
  }
  return buf;
}

template <typename T>
void RunInterpolate(const ir::KernelContext& ctx, const ResizeParams& p, double* a, double* b) {
  const TensorView& x = ctx.input(0);
  const T* in = x.as<const T>();
  const int64_t n = x.num_elements();
  for (int64_t i = 0; i < n; ++i) a[i] = static_cast<double>(ToCompute(in[i]));
  const double* result = ResizeInterpolate(p.plans, a, b, x.shape, p.extrapolation_value);
  TensorView& y = ctx.output(0);
  T* out = y.as<T>();
  const int64_t m = y.num_elements();
  for (int64_t i = 0; i < m; ++i) out[i] = ConvertElement<T>(result[i]);
}

absl::StatusOr<ResizeParams> MakeResizeParams(const ir::KernelContext& ctx) {
  const TensorView& x = ctx.input(0);
  absl::StatusOr<ResizeAttrs> attrs = ir::ParseResizeAttrs(ctx.attrs());
  if (!attrs.ok()) return ctx.Error(attrs.status().message());
  if (x.shape.empty()) return ctx.Error("X (input 0) is a scalar; Resize needs rank >= 1");
  auto optional = [&](int i) { return ctx.has_input(i) ? &ctx.input(i) : nullptr; };
  absl::StatusOr<ResizeGeometry> g = ir::ResizeGeometryFor(x.shape, *attrs, optional(1), optional(2), optional(3));
  if (!g.ok()) return ctx.Error(g.status().message());
  const TensorView& y = ctx.output(0);
  if (y.dtype != x.dtype || y.shape != g->out_dims) {
    return ctx.Error(absl::StrCat("output is ", DTypeName(x.dtype), " ", ir::DimsString(g->out_dims),
                                  " for these inputs but was planned as ", DTypeName(y.dtype), " ",
                                  ir::DimsString(y.shape)));
  }
  ResizeParams p;
  p.planned = true;
  if (y.num_elements() == 0) {
    p.empty = true;
    return p;
  }
  if (x.num_elements() == 0) {
    return ctx.Error(absl::StrCat("X (input 0) ", ir::DimsString(x.shape), " is empty but the output ",
                                  ir::DimsString(y.shape), " is not"));
  }
  for (size_t d = 0; d < x.shape.size(); ++d) p.plans.push_back(PlanAxis(*attrs, *g, d, x.shape[d]));
  p.extrapolation_value = attrs->extrapolation_value;

  if (attrs->mode == ResizeMode::kNearest) {
    p.nearest = true;
    // Nearest only moves elements, so it takes strings too; their
    // extrapolation value is the empty string (all zero bytes).
    if (x.dtype != DType::kString) {
      absl::Status s = VisitAnyDType(ctx, x.dtype, [&](auto tag) {
        using T = typename decltype(tag)::type;
        const T v = ConvertElement<T>(attrs->extrapolation_value);
        std::memcpy(p.extrapolation, &v, sizeof(T));
        return absl::OkStatus();
      });
      if (!s.ok()) return s;
    }
    const std::vector<int64_t> strides = ir::Strides(x.shape);
    p.src.resize(p.plans.size());  // per dim: input offset, or -1
    for (size_t d = 0; d < p.plans.size(); ++d) {
      const AxisPlan& a = p.plans[d];
      p.src[d].resize(static_cast<size_t>(a.out));
      for (int64_t o = 0; o < a.out; ++o) {
        p.src[d][o] = a.outside[o] ? -1 : a.taps[a.first[o]].index * strides[d];
      }
    }
    return p;
  }
  absl::Status s =
      VisitDType<float, double, Half, BFloat16, int64_t, int32_t, int8_t, uint8_t>(ctx, x.dtype, [&](auto tag) {
        p.interpolate = &RunInterpolate<typename decltype(tag)::type>;
        return absl::OkStatus();
      });
  if (!s.ok()) return s;
  // The largest tensor of the passes: the input, then each resampled dim.
  std::vector<int64_t> shape = x.shape;
  int64_t largest = x.num_elements();
  for (int d = static_cast<int>(p.plans.size()) - 1; d >= 0; --d) {
    if (p.plans[d].identity) continue;
    shape[d] = p.plans[d].out;
    largest = std::max(largest, Product(shape, 0, shape.size()));
  }
  p.buffer_elements = largest;
  return p;
}

void RunResize(const ir::KernelContext& ctx, const ResizeParams& p, double* a, double* b) {
  if (p.empty) return;
  if (p.nearest) {
    ResizeNearest(p, ctx.input(0), ctx.output(0));
    return;
  }
  p.interpolate(ctx, p, a, b);
}

uint64_t ResizeWorkspaceBytes(const ResizeParams& p) {
  WorkspaceLayout layout;
  if (p.interpolate != nullptr && !p.empty) {
    layout.Add<double>(p.buffer_elements);
    layout.Add<double>(p.buffer_elements);
  }
  return layout.bytes();
}

}  // namespace

absl::StatusOr<ir::PreparedKernel> PrepareResize(const ir::KernelContext& ctx) {
  for (int i = 1; i <= 3; ++i) {
    if (ctx.has_input(i) && ctx.input(i).data == nullptr && ctx.input(i).num_elements() > 0) {
      return backends::MakePrepared(ResizeParams{});  // roi, scales or sizes known when run
    }
  }
  absl::StatusOr<ResizeParams> p = MakeResizeParams(ctx);
  if (!p.ok()) return p.status();
  const uint64_t bytes = ResizeWorkspaceBytes(*p);
  return backends::MakePrepared(*std::move(p), bytes);
}

absl::Status ResizeKernel(ir::KernelContext& ctx) {
  const ResizeParams* p = backends::PreparedParams<ResizeParams>(ctx);
  if (p == nullptr) return backends::NotPrepared(ctx, "CPU");
  if (p->planned) {
    WorkspaceCursor ws(ctx.workspace());
    double* a = p->interpolate != nullptr && !p->empty ? ws.Take<double>(p->buffer_elements) : nullptr;
    double* b = p->interpolate != nullptr && !p->empty ? ws.Take<double>(p->buffer_elements) : nullptr;
    RunResize(ctx, *p, a, b);
    return absl::OkStatus();
  }
  absl::StatusOr<ResizeParams> run = MakeResizeParams(ctx);
  if (!run.ok()) return run.status();
  std::vector<double> a(static_cast<size_t>(run->interpolate != nullptr ? run->buffer_elements : 0));
  std::vector<double> b(a.size());
  RunResize(ctx, *run, a.data(), b.data());
  return absl::OkStatus();
}

}  // namespace grove::cpu
