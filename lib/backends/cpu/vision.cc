// CPU reference kernels of the vision and signal group: NonMaxSuppression,
// GridSample, RoiAlign, MaxUnpool, DFT, STFT and MelWeightMatrix, after the
// ONNX reference implementation (onnx/reference/ops). Float inputs are read
// as double and every output element is rounded once. Every index read from
// a tensor (batch indices, MaxUnpool's indices) and every coordinate turned
// into an index is checked or clamped before it addresses memory; the
// transforms are direct O(n^2) sums in double.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <numbers>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "lib/backends/common/kernel_checks.h"
#include "lib/backends/common/prepared.h"
#include "lib/backends/cpu/cpu_kernels.h"
#include "lib/backends/cpu/workspace_layout.h"
#include "lib/ir/element_types.h"
#include "lib/ir/ops/layout_params.h"
#include "lib/ir/ops/vision_params.h"

namespace grove::cpu {

using ir::BFloat16;
using ir::ConvertElement;
using ir::DoubleToBFloat16;
using ir::DoubleToHalf;
using ir::Half;
using ir::NumericTypes;
using ir::Visit;

namespace {

using backends::CheckOutput;
using backends::ShapeStr;
using ir::KernelContext;

bool IsFloat(DType d) { return d == DType::kF32 || d == DType::kF64 || d == DType::kF16 || d == DType::kBF16; }

// Element i of a float tensor as double.
double ReadFloat(const TensorView& t, int64_t i) { return ir::ReadNumber(t, i); }

// Element i of an integer tensor (i32 or i64).
int64_t ReadIndex(const TensorView& t, int64_t i) {
  return t.dtype == DType::kI64 ? t.as<const int64_t>()[i] : t.as<const int32_t>()[i];
}

// Writes element i of a float tensor, rounding once.
void StoreFloat(TensorView& t, int64_t i, double v) {
  switch (t.dtype) {
    case DType::kF32:
      t.as<float>()[i] = static_cast<float>(v);
      break;
    case DType::kF64:
      t.as<double>()[i] = v;
      break;
    case DType::kF16:
      t.as<Half>()[i] = DoubleToHalf(v);
      break;
    case DType::kBF16:
      t.as<BFloat16>()[i] = DoubleToBFloat16(v);
      break;
    default:
      break;
  }
}

absl::Status CheckFloatInput(const KernelContext& ctx, int i, absl::string_view name) {
  if (IsFloat(ctx.input(i).dtype)) return absl::OkStatus();
  return ctx.Error(absl::StrCat("input ", i, " (", name, ") has dtype ", DTypeName(ctx.input(i).dtype),
                                "; expected one of f32, f64, f16, bf16"));
}

absl::Status CheckIndexInput(const KernelContext& ctx, int i, absl::string_view name) {
  const DType d = ctx.input(i).dtype;
  if (d == DType::kI64 || d == DType::kI32) return absl::OkStatus();
  return ctx.Error(absl::StrCat("input ", i, " (", name, ") has dtype ", DTypeName(d), "; expected one of i64, i32"));
}

// A scalar input (rank 0 or one element of rank 1) of i32/i64.
absl::StatusOr<int64_t> ScalarInt(const KernelContext& ctx, int i, absl::string_view name) {
  if (absl::Status s = CheckIndexInput(ctx, i, name); !s.ok()) return s;
  const TensorView& t = ctx.input(i);
  if (t.shape.size() > 1 || t.num_elements() != 1) {
    return ctx.Error(absl::StrCat("input ", i, " (", name, ") has shape ", ShapeStr(t.shape), "; expected a scalar"));
  }
  return ReadIndex(t, 0);
}

absl::StatusOr<double> ScalarFloat(const KernelContext& ctx, int i, absl::string_view name) {
  if (absl::Status s = CheckFloatInput(ctx, i, name); !s.ok()) return s;
  const TensorView& t = ctx.input(i);
  if (t.shape.size() > 1 || t.num_elements() != 1) {
    return ctx.Error(absl::StrCat("input ", i, " (", name, ") has shape ", ShapeStr(t.shape), "; expected a scalar"));
  }
  return ReadFloat(t, 0);
}

absl::StatusOr<bool> FlagAttr(const KernelContext& ctx, absl::string_view name, int64_t def) {
  const int64_t v = ctx.attrs().GetInt(name, def);
  if (v != 0 && v != 1) return ctx.Error(absl::StrCat("attribute '", name, "' is ", v, "; expected 0 or 1"));
  return v == 1;
}

int64_t Product(const std::vector<int64_t>& s, size_t begin, size_t end) {
  int64_t n = 1;
  for (size_t d = begin; d < end; ++d) n *= s[d];
  return n;
}

// ---------------------------------------------------------------------------
// NonMaxSuppression
// ---------------------------------------------------------------------------

// An optional input of zero or one element: nullptr when absent or empty.
absl::StatusOr<const TensorView*> OptionalScalar(const KernelContext& ctx, int i, absl::string_view name,
                                                 bool integer) {
  if (!ctx.has_input(i)) return nullptr;
  const TensorView& t = ctx.input(i);
  absl::Status s = integer ? CheckIndexInput(ctx, i, name) : CheckFloatInput(ctx, i, name);
  if (!s.ok()) return s;
  if (t.shape.size() > 1 || t.num_elements() > 1) {
    return ctx.Error(
        absl::StrCat("input ", i, " (", name, ") has shape ", ShapeStr(t.shape), "; expected a scalar or one element"));
  }
  return t.num_elements() == 0 ? nullptr : &t;
}

struct Box {
  double x_min, x_max, y_min, y_max;
};

// The ONNX reference's corner order: [y1, x1, y2, x2] with either corner
// first, or [x_center, y_center, width, height].
Box ReadBox(const TensorView& boxes, int64_t offset, bool center) {
  const double a = ReadFloat(boxes, offset), b = ReadFloat(boxes, offset + 1);
  const double c = ReadFloat(boxes, offset + 2), d = ReadFloat(boxes, offset + 3);
  if (center) return {a - c / 2, a + c / 2, b - d / 2, b + d / 2};
  return {std::min(b, d), std::max(b, d), std::min(a, c), std::max(a, c)};
}

// IoU(a, b) > threshold; boxes that do not overlap or have no area never
// suppress each other.
bool Suppresses(const Box& a, const Box& b, double threshold) {
  const double ix_min = std::max(a.x_min, b.x_min), ix_max = std::min(a.x_max, b.x_max);
  if (!(ix_max > ix_min)) return false;
  const double iy_min = std::max(a.y_min, b.y_min), iy_max = std::min(a.y_max, b.y_max);
  if (!(iy_max > iy_min)) return false;
  const double inter = (ix_max - ix_min) * (iy_max - iy_min);
  const double area_a = (a.x_max - a.x_min) * (a.y_max - a.y_min);
  const double area_b = (b.x_max - b.x_min) * (b.y_max - b.y_min);
  const double uni = area_a + area_b - inter;
  if (!(inter > 0) || !(area_a > 0) || !(area_b > 0) || !(uni > 0)) return false;
  return inter / uni > threshold;
}

absl::Status NonMaxSuppressionKernel(KernelContext& ctx) {
  const TensorView& boxes = ctx.input(0);
  const TensorView& scores = ctx.input(1);
  if (absl::Status s = CheckFloatInput(ctx, 0, "boxes"); !s.ok()) return s;
  if (absl::Status s = CheckFloatInput(ctx, 1, "scores"); !s.ok()) return s;
  absl::StatusOr<bool> center = FlagAttr(ctx, "center_point_box", 0);
  if (!center.ok()) return center.status();
  if (boxes.shape.size() != 3 || boxes.shape[2] != 4) {
    return ctx.Error(absl::StrCat("input 0 (boxes) has shape ", ShapeStr(boxes.shape),
                                  "; expected [num_batches, spatial_dimension, 4]"));
  }
  const int64_t batches = boxes.shape[0], num_boxes = boxes.shape[1];
  if (scores.shape.size() != 3 || scores.shape[0] != batches || scores.shape[2] != num_boxes) {
    return ctx.Error(absl::StrCat("input 1 (scores) has shape ", ShapeStr(scores.shape), "; expected [", batches,
                                  ", num_classes, ", num_boxes, "] for input 0 (boxes) ", ShapeStr(boxes.shape)));
  }
  const int64_t classes = scores.shape[1];
  absl::StatusOr<const TensorView*> max_t = OptionalScalar(ctx, 2, "max_output_boxes_per_class", true);
  if (!max_t.ok()) return max_t.status();
  absl::StatusOr<const TensorView*> iou_t = OptionalScalar(ctx, 3, "iou_threshold", false);
  if (!iou_t.ok()) return iou_t.status();
  absl::StatusOr<const TensorView*> score_t = OptionalScalar(ctx, 4, "score_threshold", false);
  if (!score_t.ok()) return score_t.status();
  // No max_output_boxes_per_class selects nothing (the default is 0).
  const int64_t max_out = *max_t != nullptr ? std::clamp<int64_t>(ReadIndex(**max_t, 0), 0, num_boxes) : 0;
  const double iou = *iou_t != nullptr ? ReadFloat(**iou_t, 0) : 0.0;
  const bool filter = *score_t != nullptr;
  const double score_threshold = filter ? ReadFloat(**score_t, 0) : 0.0;

  std::vector<int64_t> selected;  // (batch, class, box) triples
  std::vector<int64_t> candidates;
  std::vector<double> class_scores(static_cast<size_t>(num_boxes));
  std::vector<Box> kept;
  for (int64_t b = 0; max_out > 0 && b < batches; ++b) {
    for (int64_t c = 0; c < classes; ++c) {
      const int64_t score_base = (b * classes + c) * num_boxes;
      candidates.clear();
      for (int64_t i = 0; i < num_boxes; ++i) {
        class_scores[i] = ReadFloat(scores, score_base + i);
        if (!filter || class_scores[i] > score_threshold) candidates.push_back(i);
      }
      // Highest score first, the lower index first among equals; NaN
      // scores (only without a score_threshold) come last.
      std::stable_sort(candidates.begin(), candidates.end(), [&](int64_t l, int64_t r) {
        const double sl = class_scores[l], sr = class_scores[r];
        if (std::isnan(sl) || std::isnan(sr)) return !std::isnan(sl) && std::isnan(sr);
        return sl > sr;
      });
      kept.clear();
      for (int64_t i : candidates) {
        if (static_cast<int64_t>(kept.size()) >= max_out) break;
        const Box box = ReadBox(boxes, (b * num_boxes + i) * 4, *center);
        bool suppressed = false;
        for (const Box& k : kept) {
          if (Suppresses(box, k, iou)) {
            suppressed = true;
            break;
          }
        }
        if (suppressed) continue;
        kept.push_back(box);
        selected.insert(selected.end(), {b, c, i});
      }
    }
  }
  absl::StatusOr<TensorView*> out = ctx.AllocateOutput(0, DType::kI64, {static_cast<int64_t>(selected.size() / 3), 3});
  if (!out.ok()) return out.status();
  std::copy(selected.begin(), selected.end(), (*out)->as<int64_t>());
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------
// GridSample
// ---------------------------------------------------------------------------

enum class SampleMode { kNearest, kLinear, kCubic };
enum class Padding { kZeros, kBorder, kReflection };

// Reflects x into [lo, hi] by the nearer border, as often as needed.
double Reflect(double x, double lo, double hi) {
  const double range = hi - lo;
  if (range <= 0) return lo;
  if (x >= lo && x <= hi) return x;
  const double dx = x < lo ? lo - x : x - hi;
  const double n = std::floor(dx / range);
  const double r = dx - n * range;
  const bool even = std::fmod(n, 2.0) == 0;
  if (x < lo) return even ? lo + r : hi - r;
  return even ? hi - r : lo + r;
}

// Keys' cubic convolution weights (alpha -0.75) of the four taps at
// floor(x) - 1 .. floor(x) + 2, t = x - floor(x).
void CubicWeights(double t, double w[4]) {
  constexpr double a = -0.75;
  auto near = [](double x) { return ((a + 2) * x - (a + 3)) * x * x + 1; };
  auto far = [](double x) { return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a; };
  w[0] = far(t + 1);
  w[1] = near(t);
  w[2] = near(1 - t);
  w[3] = far(2 - t);
}

absl::Status GridSampleKernel(KernelContext& ctx) {
  const TensorView& x = ctx.input(0);
  const TensorView& grid = ctx.input(1);
  if (absl::Status s = CheckFloatInput(ctx, 0, "X"); !s.ok()) return s;
  if (absl::Status s = CheckFloatInput(ctx, 1, "grid"); !s.ok()) return s;
  const std::string mode_attr = ctx.attrs().GetString("mode", "bilinear");
  SampleMode mode;
  if (mode_attr == "nearest") {
    mode = SampleMode::kNearest;
  } else if (mode_attr == "bilinear" || mode_attr == "linear") {
    mode = SampleMode::kLinear;
  } else if (mode_attr == "bicubic" || mode_attr == "cubic") {
    mode = SampleMode::kCubic;
  } else {
    return ctx.Error(absl::StrCat("attribute 'mode' is '", mode_attr,
                                  "'; expected 'bilinear', 'nearest' or 'bicubic' ('linear', 'cubic')"));
  }
  const std::string padding_attr = ctx.attrs().GetString("padding_mode", "zeros");
  Padding padding;
  if (padding_attr == "zeros") {
    padding = Padding::kZeros;
  } else if (padding_attr == "border") {
    padding = Padding::kBorder;
  } else if (padding_attr == "reflection") {
    padding = Padding::kReflection;
  } else {
    return ctx.Error(
        absl::StrCat("attribute 'padding_mode' is '", padding_attr, "'; expected 'zeros', 'border' or 'reflection'"));
  }
  absl::StatusOr<bool> align = FlagAttr(ctx, "align_corners", 0);
  if (!align.ok()) return align.status();
  const int rank = static_cast<int>(x.shape.size());
  if (rank < 3) {
    return ctx.Error(
        absl::StrCat("input 0 (X) has shape ", ShapeStr(x.shape), "; expected rank >= 3 (N, C, spatial dims...)"));
  }
  const int k = rank - 2;
  if (static_cast<int>(grid.shape.size()) != rank || grid.shape[0] != x.shape[0] || grid.shape.back() != k) {
    return ctx.Error(absl::StrCat("input 1 (grid) has shape ", ShapeStr(grid.shape), "; expected [", x.shape[0],
                                  ", output spatial dims (", k, ")..., ", k, "] for input 0 (X) ", ShapeStr(x.shape)));
  }
  std::vector<int64_t> out_shape = {x.shape[0], x.shape[1]};
  out_shape.insert(out_shape.end(), grid.shape.begin() + 1, grid.shape.end() - 1);
  if (absl::Status s = CheckOutput(ctx, 0, x.dtype, out_shape); !s.ok()) return s;
  TensorView& y = ctx.output(0);

  const int64_t n_batch = x.shape[0], channels = x.shape[1];
  const std::vector<int64_t> dims(x.shape.begin() + 2, x.shape.end());
  const int64_t plane = Product(x.shape, 2, x.shape.size());
  const int64_t positions = Product(grid.shape, 1, grid.shape.size() - 1);
  const std::vector<int64_t> strides = ir::Strides(dims);
  const int taps = mode == SampleMode::kNearest ? 1 : (mode == SampleMode::kLinear ? 2 : 4);
  int64_t corners = 1;
  for (int d = 0; d < k; ++d) {
    corners *= taps;
    if (corners > (int64_t{1} << 20)) return ctx.Error(absl::StrCat("X has ", k, " spatial dims; too many to sample"));
  }
  // Per dim: the first tap's index and each tap's weight.
  std::vector<int64_t> first(static_cast<size_t>(k));
  std::vector<double> weight(static_cast<size_t>(k * 4));
  std::vector<int64_t> offsets(static_cast<size_t>(corners));
  std::vector<double> corner_weight(static_cast<size_t>(corners));
  std::vector<double> acc(static_cast<size_t>(channels));

  // The index a tap reads along dim d, or -1 for a zero (padding 'zeros').
  auto tap_index = [&](int d, int64_t i) -> int64_t {
    const int64_t len = dims[d];
    if (i >= 0 && i < len) return i;
    if (padding == Padding::kZeros) return -1;
    if (padding == Padding::kBorder) return std::clamp<int64_t>(i, 0, len - 1);
    const double lo = *align ? 0.0 : -0.5, hi = *align ? len - 1.0 : len - 0.5;
    const int64_t r = static_cast<int64_t>(Reflect(static_cast<double>(i), lo, hi));
    return std::clamp<int64_t>(r, 0, len - 1);
  };

  for (int64_t n = 0; n < n_batch; ++n) {
    for (int64_t p = 0; p < positions; ++p) {
      bool valid = plane > 0;
      for (int d = 0; d < k && valid; ++d) {
        // grid's last dim lists the coordinates innermost spatial dim first.
        const double g = ReadFloat(grid, (n * positions + p) * k + (k - 1 - d));
        const double len = static_cast<double>(dims[d]);
        double c = *align ? (g + 1) / 2 * (len - 1) : ((g + 1) * len - 1) / 2;
        if (mode == SampleMode::kNearest) c = std::nearbyint(c);
        const double lo = *align ? 0.0 : -0.5, hi = *align ? len - 1 : len - 0.5;
        if (c < lo || c > hi) {
          if (padding == Padding::kBorder) c = std::clamp(c, 0.0, len - 1);
          if (padding == Padding::kReflection) c = Reflect(c, lo, hi);
        }
        // A NaN coordinate samples nothing; far-away ones (only with zero
        // padding) are brought near enough for an index, every tap still
        // outside.
        if (std::isnan(c)) {
          valid = false;
          break;
        }
        c = std::clamp(c, -len - 8, 2 * len + 8);
        const double f = std::floor(c);
        const double t = c - f;
        if (mode == SampleMode::kNearest) {
          first[d] = static_cast<int64_t>(c);
          weight[d * 4] = 1;
        } else if (mode == SampleMode::kLinear) {
          first[d] = static_cast<int64_t>(f);
          weight[d * 4] = 1 - t;
          weight[d * 4 + 1] = t;
        } else {
          first[d] = static_cast<int64_t>(f) - 1;
          CubicWeights(t, &weight[d * 4]);
        }
      }
      std::fill(acc.begin(), acc.end(), 0.0);
      if (valid) {
        // Every combination of taps: its offset in the plane (-1 if padded
        // with zeros) and its weight.
        for (int64_t corner = 0; corner < corners; ++corner) {
          int64_t rest = corner, offset = 0;
          double w = 1;
          for (int d = k - 1; d >= 0; --d) {
            const int tap = static_cast<int>(rest % taps);
            rest /= taps;
            const int64_t i = tap_index(d, first[d] + tap);
            if (i < 0 || offset < 0) {
              offset = -1;
            } else {
              offset += i * strides[d];
            }
            w *= weight[d * 4 + tap];
          }
          offsets[corner] = offset;
          corner_weight[corner] = w;
        }
        for (int64_t c = 0; c < channels; ++c) {
          const int64_t base = (n * channels + c) * plane;
          double sum = 0;
          for (int64_t corner = 0; corner < corners; ++corner) {
            if (offsets[corner] >= 0) sum += corner_weight[corner] * ReadFloat(x, base + offsets[corner]);
          }
          acc[c] = sum;
        }
      }
      for (int64_t c = 0; c < channels; ++c) StoreFloat(y, (n * channels + c) * positions + p, acc[c]);
    }
  }
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------
// RoiAlign
// ---------------------------------------------------------------------------

// RoiAlign after the checks of its attributes (shared with the shape
// function: ir::ReadRoiAlignAttrs), dtypes and shapes. The values of rois
// and batch_indices are checked when it runs.
struct RoiAlignParams {
  ir::RoiAlignAttrs attrs;
  int64_t num_rois = 0, batches = 0, channels = 0, height = 0, width = 0;
};

absl::StatusOr<ir::PreparedKernel> PrepareRoiAlign(const KernelContext& ctx) {
  const TensorView& x = ctx.input(0);
  const TensorView& rois = ctx.input(1);
  const TensorView& batch_indices = ctx.input(2);
  if (absl::Status s = CheckFloatInput(ctx, 0, "X"); !s.ok()) return s;
  if (absl::Status s = CheckFloatInput(ctx, 1, "rois"); !s.ok()) return s;
  if (absl::Status s = CheckIndexInput(ctx, 2, "batch_indices"); !s.ok()) return s;
  absl::StatusOr<ir::RoiAlignAttrs> attrs = ir::ReadRoiAlignAttrs(ctx.attrs());
  if (!attrs.ok()) return ctx.Error(attrs.status().message());
  if (x.shape.size() != 4) {
    return ctx.Error(absl::StrCat("input 0 (X) has shape ", ShapeStr(x.shape), "; expected [N, C, H, W]"));
  }
  if (rois.shape.size() != 2 || rois.shape[1] != 4) {
    return ctx.Error(absl::StrCat("input 1 (rois) has shape ", ShapeStr(rois.shape), "; expected [num_rois, 4]"));
  }
  RoiAlignParams p;
  p.attrs = *attrs;
  p.num_rois = rois.shape[0];
  if (batch_indices.shape != std::vector<int64_t>{p.num_rois}) {
    return ctx.Error(absl::StrCat("input 2 (batch_indices) has shape ", ShapeStr(batch_indices.shape), "; expected [",
                                  p.num_rois, "] (one per roi)"));
  }
  p.batches = x.shape[0];
  p.channels = x.shape[1];
  p.height = x.shape[2];
  p.width = x.shape[3];
  const int64_t oh = p.attrs.output_height, ow = p.attrs.output_width;
  if (absl::Status s = CheckOutput(ctx, 0, x.dtype, {p.num_rois, p.channels, oh, ow}); !s.ok()) return s;
  WorkspaceLayout layout;  // one accumulator per channel
  layout.Add<double>(p.channels);
  return backends::MakePrepared(std::move(p), layout.bytes());
}

absl::Status RoiAlignKernel(KernelContext& ctx) {
  const RoiAlignParams* p = backends::PreparedParams<RoiAlignParams>(ctx);
  if (p == nullptr) return backends::NotPrepared(ctx, "CPU");
  const TensorView& x = ctx.input(0);
  const TensorView& rois = ctx.input(1);
  const TensorView& batch_indices = ctx.input(2);
  const bool half_pixel = p->attrs.half_pixel;
  const bool average = p->attrs.average;
  const int64_t oh = p->attrs.output_height, ow = p->attrs.output_width;
  const int64_t sampling = p->attrs.sampling_ratio;
  const double scale = p->attrs.spatial_scale;
  const int64_t num_rois = p->num_rois;
  const int64_t batches = p->batches, channels = p->channels, height = p->height, width = p->width;
  TensorView& y = ctx.output(0);
  for (int64_t r = 0; r < num_rois; ++r) {
    const int64_t b = ReadIndex(batch_indices, r);
    if (b < 0 || b >= batches) {
      return ctx.Error(absl::StrCat("input 2 (batch_indices) holds ", b, " at [", r, "]; expected an index in [0, ",
                                    batches, ") (the batch of X)"));
    }
  }
  const double offset = half_pixel ? 0.5 : 0.0;
  const int64_t plane = height * width;
  double* acc = WorkspaceCursor(ctx.workspace()).Take<double>(channels);
  for (int64_t r = 0; r < num_rois; ++r) {
    const int64_t b = ReadIndex(batch_indices, r);
    double coords[4];
    for (int j = 0; j < 4; ++j) {
      coords[j] = ReadFloat(rois, r * 4 + j) * scale - offset;
      if (!std::isfinite(coords[j])) {
        return ctx.Error(absl::StrCat("input 1 (rois) holds a non-finite coordinate in roi ", r));
      }
    }
    const double start_w = coords[0], start_h = coords[1];
    double roi_w = coords[2] - coords[0], roi_h = coords[3] - coords[1];
    if (!half_pixel) {  // malformed rois become 1x1
      roi_w = std::max(roi_w, 1.0);
      roi_h = std::max(roi_h, 1.0);
    }
    const double bin_h = roi_h / static_cast<double>(oh), bin_w = roi_w / static_cast<double>(ow);
    // A negative size (possible with half_pixel) samples nothing.
    const double grid_hd = sampling > 0 ? static_cast<double>(sampling) : std::max(std::ceil(bin_h), 0.0);
    const double grid_wd = sampling > 0 ? static_cast<double>(sampling) : std::max(std::ceil(bin_w), 0.0);
    if (grid_hd * grid_wd * static_cast<double>(oh * ow) > 4294967296.0) {
      return ctx.Error(absl::StrCat("roi ", r, " needs ", grid_hd, " x ", grid_wd,
                                    " samples per output bin; too many (set sampling_ratio)"));
    }
    const int64_t grid_h = static_cast<int64_t>(grid_hd), grid_w = static_cast<int64_t>(grid_wd);
    const double count = static_cast<double>(std::max<int64_t>(grid_h * grid_w, 1));
    for (int64_t ph = 0; ph < oh; ++ph) {
      for (int64_t pw = 0; pw < ow; ++pw) {
        std::fill(acc, acc + channels, 0.0);
        bool first = true;
        for (int64_t iy = 0; iy < grid_h; ++iy) {
          double yy = start_h + static_cast<double>(ph) * bin_h +
                      (static_cast<double>(iy) + 0.5) * bin_h / static_cast<double>(grid_h);
          for (int64_t ix = 0; ix < grid_w; ++ix) {
            double xx = start_w + static_cast<double>(pw) * bin_w +
                        (static_cast<double>(ix) + 0.5) * bin_w / static_cast<double>(grid_w);
            // Four taps and weights; a sample outside the map (or a map
            // without pixels) reads pixel 0 with weight 0, as the reference.
            int64_t pos[4] = {0, 0, 0, 0};
            double w[4] = {0, 0, 0, 0};
            const bool inside = plane > 0 && yy >= -1.0 && yy <= static_cast<double>(height) && xx >= -1.0 &&
                                xx <= static_cast<double>(width);
            if (inside) {
              double yv = std::max(yy, 0.0), xv = std::max(xx, 0.0);
              int64_t y_low = static_cast<int64_t>(yv), x_low = static_cast<int64_t>(xv), y_high, x_high;
              if (y_low >= height - 1) {
                y_high = y_low = height - 1;
                yv = static_cast<double>(y_low);
              } else {
                y_high = y_low + 1;
              }
              if (x_low >= width - 1) {
                x_high = x_low = width - 1;
                xv = static_cast<double>(x_low);
              } else {
                x_high = x_low + 1;
              }
              const double ly = yv - static_cast<double>(y_low), lx = xv - static_cast<double>(x_low);
              const double hy = 1 - ly, hx = 1 - lx;
              pos[0] = y_low * width + x_low;
              pos[1] = y_low * width + x_high;
              pos[2] = y_high * width + x_low;
              pos[3] = y_high * width + x_high;
              w[0] = hy * hx;
              w[1] = hy * lx;
              w[2] = ly * hx;
              w[3] = ly * lx;
            }
            for (int64_t c = 0; c < channels; ++c) {
              const int64_t base = (b * channels + c) * plane;
              auto tap = [&](int j) { return plane > 0 ? w[j] * ReadFloat(x, base + pos[j]) : 0.0; };
              if (average) {
                acc[c] += tap(0) + tap(1) + tap(2) + tap(3);
              } else {
                const double v = std::max(std::max(tap(0), tap(1)), std::max(tap(2), tap(3)));
                acc[c] = first ? v : std::max(acc[c], v);
              }
            }
            first = false;
          }
        }
        for (int64_t c = 0; c < channels; ++c) {
          const double v = average ? acc[c] / count : acc[c];
          StoreFloat(y, ((r * channels + c) * oh + ph) * ow + pw, v);
        }
      }
    }
  }
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------
// MaxUnpool
// ---------------------------------------------------------------------------

// Each value of X goes to the flat position its index names in the tensor
// MaxPool read (the unpooled shape). With output_shape, as the ONNX
// reference and backend tests do, that tensor lies in the output's leading
// corner and the rest is zero.
absl::Status MaxUnpoolKernel(KernelContext& ctx) {
  const TensorView& x = ctx.input(0);
  const TensorView& ind = ctx.input(1);
  if (absl::Status s = CheckFloatInput(ctx, 0, "X"); !s.ok()) return s;
  if (ind.dtype != DType::kI64) {
    return ctx.Error(absl::StrCat("input 1 (I) has dtype ", DTypeName(ind.dtype), "; expected i64"));
  }
  const int rank = static_cast<int>(x.shape.size());
  if (rank < 3) {
    return ctx.Error(
        absl::StrCat("input 0 (X) has shape ", ShapeStr(x.shape), "; expected rank >= 3 (N, C, spatial dims...)"));
  }
  if (ind.shape != x.shape) {
    return ctx.Error(absl::StrCat("input 1 (I) has shape ", ShapeStr(ind.shape), "; expected the shape of input 0 (X) ",
                                  ShapeStr(x.shape)));
  }
  absl::StatusOr<ir::UnpoolWindow> window = ir::ReadUnpoolWindow(ctx.attrs(), rank - 2);
  if (!window.ok()) return ctx.Error(window.status().message());
  std::vector<int64_t> unpooled = {x.shape[0], x.shape[1]};
  for (int d = 0; d < rank - 2; ++d) {
    absl::StatusOr<int64_t> len = ir::UnpooledLength(*window, d, x.shape[2 + d]);
    if (!len.ok()) return ctx.Error(len.status().message());
    unpooled.push_back(*len);
  }
  std::vector<int64_t> out_shape = unpooled;
  if (ctx.has_input(2)) {
    const TensorView& os = ctx.input(2);
    if (absl::Status s = CheckIndexInput(ctx, 2, "output_shape"); !s.ok()) return s;
    if (os.shape != std::vector<int64_t>{rank}) {
      return ctx.Error(absl::StrCat("input 2 (output_shape) has shape ", ShapeStr(os.shape), "; expected [", rank,
                                    "] (one length per dim of X)"));
    }
    for (int d = 0; d < rank; ++d) out_shape[d] = ReadIndex(os, d);
    for (int d = 0; d < rank; ++d) {
      if (out_shape[d] < unpooled[d] || (d < 2 && out_shape[d] != unpooled[d])) {
        return ctx.Error(absl::StrCat("input 2 (output_shape) is ", ShapeStr(out_shape),
                                      "; expected N and C of X and each spatial length >= the unpooled shape ",
                                      ShapeStr(unpooled)));
      }
    }
  }
  const int64_t total = backends::BoundedProduct(unpooled, std::numeric_limits<int64_t>::max());
  if (total < 0) return ctx.Error(absl::StrCat("the unpooled shape ", ShapeStr(unpooled), " is too large"));
  if (absl::Status s = CheckOutput(ctx, 0, x.dtype, out_shape); !s.ok()) return s;
  TensorView& y = ctx.output(0);
  const int64_t count = x.num_elements();
  const int64_t* idx = ind.as<const int64_t>();
  for (int64_t e = 0; e < count; ++e) {
    if (idx[e] < 0 || idx[e] >= total) {
      return ctx.Error(absl::StrCat("input 1 (I) holds ", idx[e], " at flat position ", e,
                                    "; expected an index in [0, ", total, ") (the unpooled shape ", ShapeStr(unpooled),
                                    ")"));
    }
  }
  std::memset(y.data, 0, y.byte_size());
  const std::vector<int64_t> out_strides = ir::Strides(out_shape);
  for (int64_t e = 0; e < count; ++e) {
    int64_t rest = idx[e], flat = 0;
    for (int d = rank - 1; d >= 0; --d) {
      flat += (rest % unpooled[d]) * out_strides[d];
      rest /= unpooled[d];
    }
    StoreFloat(y, flat, ReadFloat(x, e));
  }
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------
// DFT, STFT
// ---------------------------------------------------------------------------

// cos and sin of 2 * pi * j / length for j in [0, length).
struct Twiddles {
  explicit Twiddles(int64_t length) : n(length), cos_(static_cast<size_t>(length)), sin_(static_cast<size_t>(length)) {
    for (int64_t j = 0; j < n; ++j) {
      const double a = 2 * std::numbers::pi * static_cast<double>(j) / static_cast<double>(n);
      cos_[j] = std::cos(a);
      sin_[j] = std::sin(a);
    }
  }
  // out[m] = sum_k in[k] * exp(sign * 2 pi i m k / n), m in [0, out_count);
  // `in` holds in_count <= n complex values (re, im), the rest are zeros.
  void Transform(const std::vector<double>& in, int64_t in_count, int sign, int64_t out_count,
                 std::vector<double>* out) const {
    for (int64_t m = 0; m < out_count; ++m) {
      double re = 0, im = 0;
      for (int64_t k = 0; k < in_count; ++k) {
        const int64_t j = (m * k) % n;
        const double c = cos_[j], s = sign * sin_[j];
        re += in[2 * k] * c - in[2 * k + 1] * s;
        im += in[2 * k] * s + in[2 * k + 1] * c;
      }
      (*out)[2 * m] = re;
      (*out)[2 * m + 1] = im;
    }
  }
  int64_t n;
  std::vector<double> cos_, sin_;
};

absl::Status DftKernel(KernelContext& ctx) {
  const TensorView& x = ctx.input(0);
  if (absl::Status s = CheckFloatInput(ctx, 0, "input"); !s.ok()) return s;
  absl::StatusOr<bool> onesided = FlagAttr(ctx, "onesided", 0);
  if (!onesided.ok()) return onesided.status();
  absl::StatusOr<bool> inverse = FlagAttr(ctx, "inverse", 0);
  if (!inverse.ok()) return inverse.status();
  const int rank = static_cast<int>(x.shape.size());
  if (rank < 2 || (x.shape.back() != 1 && x.shape.back() != 2)) {
    return ctx.Error(absl::StrCat("input 0 (input) has shape ", ShapeStr(x.shape),
                                  "; expected [batch, signal dims..., 1 or 2] (real or complex)"));
  }
  const int64_t axis_attr = ctx.attrs().GetInt("axis", 1);
  if (axis_attr < -rank || axis_attr > rank - 2 || axis_attr == -1) {
    return ctx.Error(absl::StrCat("attribute 'axis' is ", axis_attr, "; expected one in [", -rank, ", -2] or [0, ",
                                  rank - 2, "] for input 0 of rank ", rank));
  }
  const int axis = static_cast<int>(axis_attr < 0 ? axis_attr + rank : axis_attr);
  int64_t dft_length = -1;
  if (ctx.has_input(1)) {
    absl::StatusOr<int64_t> v = ScalarInt(ctx, 1, "dft_length");
    if (!v.ok()) return v.status();
    if (*v < 1) return ctx.Error(absl::StrCat("input 1 (dft_length) is ", *v, "; expected >= 1"));
    dft_length = *v;
  }
  const int64_t n = x.shape[axis];
  absl::StatusOr<ir::DftSizes> sizes = ir::ComputeDftSizes(n, dft_length, *onesided, *inverse);
  if (!sizes.ok()) return ctx.Error(sizes.status().message());
  std::vector<int64_t> out_shape = x.shape;
  out_shape[axis] = sizes->axis_out;
  out_shape.back() = sizes->complex_out;
  if (absl::Status s = CheckOutput(ctx, 0, x.dtype, out_shape); !s.ok()) return s;
  TensorView& y = ctx.output(0);

  const int64_t length = sizes->length;
  const int64_t outer = Product(x.shape, 0, axis);
  const int64_t inner = Product(x.shape, axis + 1, x.shape.size() - 1);
  const int64_t parts = x.shape.back();
  const bool irfft = *onesided && *inverse;
  // Samples read along the axis: the first min(n, L) (zero padding past n),
  // for the IRFFT the bins of the one-sided spectrum [0, L/2].
  const int64_t read = std::min(n, irfft ? length / 2 + 1 : length);
  const Twiddles tw(length);
  std::vector<double> signal(static_cast<size_t>(2 * length)), spectrum(static_cast<size_t>(2 * length));
  const int64_t y_axis = sizes->axis_out, y_parts = sizes->complex_out;
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      std::fill(signal.begin(), signal.end(), 0.0);
      for (int64_t k = 0; k < read; ++k) {
        const int64_t at = ((o * n + k) * inner + i) * parts;
        signal[2 * k] = ReadFloat(x, at);
        signal[2 * k + 1] = parts == 2 ? ReadFloat(x, at + 1) : 0.0;
      }
      int64_t count = read;
      if (irfft) {
        // The full Hermitian spectrum; DC's and Nyquist's imaginary parts
        // do not exist in a real signal's spectrum and are dropped.
        signal[1] = 0;
        if (length % 2 == 0 && length / 2 < read) signal[length + 1] = 0;
        for (int64_t k = 1; k < (length + 1) / 2; ++k) {
          signal[2 * (length - k)] = signal[2 * k];
          signal[2 * (length - k) + 1] = -signal[2 * k + 1];
        }
        count = length;
      }
      tw.Transform(signal, count, *inverse ? 1 : -1, y_axis, &spectrum);
      const double norm = *inverse ? 1.0 / static_cast<double>(length) : 1.0;
      for (int64_t m = 0; m < y_axis; ++m) {
        const int64_t at = ((o * y_axis + m) * inner + i) * y_parts;
        StoreFloat(y, at, spectrum[2 * m] * norm);
        if (y_parts == 2) StoreFloat(y, at + 1, spectrum[2 * m + 1] * norm);
      }
    }
  }
  return absl::OkStatus();
}

absl::Status StftKernel(KernelContext& ctx) {
  const TensorView& sig = ctx.input(0);
  if (absl::Status s = CheckFloatInput(ctx, 0, "signal"); !s.ok()) return s;
  absl::StatusOr<bool> onesided = FlagAttr(ctx, "onesided", 1);
  if (!onesided.ok()) return onesided.status();
  if (sig.shape.size() != 3 || (sig.shape[2] != 1 && sig.shape[2] != 2)) {
    return ctx.Error(absl::StrCat("input 0 (signal) has shape ", ShapeStr(sig.shape),
                                  "; expected [batch, signal_length, 1 or 2] (real or complex)"));
  }
  const int64_t batch = sig.shape[0], signal_length = sig.shape[1], parts = sig.shape[2];
  absl::StatusOr<int64_t> step = ScalarInt(ctx, 1, "frame_step");
  if (!step.ok()) return step.status();
  const TensorView* window = ctx.has_input(2) ? &ctx.input(2) : nullptr;
  int64_t frame_length = signal_length;
  if (window != nullptr) {
    if (window->dtype != sig.dtype) {
      return ctx.Error(absl::StrCat("input 2 (window) has dtype ", DTypeName(window->dtype), "; expected ",
                                    DTypeName(sig.dtype), " like input 0 (signal)"));
    }
    if (window->shape.size() != 1) {
      return ctx.Error(absl::StrCat("input 2 (window) has shape ", ShapeStr(window->shape), "; expected a 1-D tensor"));
    }
    frame_length = window->shape[0];
  }
  if (ctx.has_input(3)) {
    absl::StatusOr<int64_t> fl = ScalarInt(ctx, 3, "frame_length");
    if (!fl.ok()) return fl.status();
    if (window != nullptr && *fl != frame_length) {
      return ctx.Error(absl::StrCat("input 3 (frame_length) is ", *fl, " but input 2 (window) has ", frame_length,
                                    " elements; they must agree"));
    }
    frame_length = *fl;
  }
  absl::StatusOr<int64_t> frames = ir::StftFrames(signal_length, frame_length, *step);
  if (!frames.ok()) return ctx.Error(frames.status().message());
  const int64_t bins = *onesided ? frame_length / 2 + 1 : frame_length;
  if (absl::Status s = CheckOutput(ctx, 0, sig.dtype, {batch, *frames, bins, 2}); !s.ok()) return s;
  TensorView& y = ctx.output(0);
  const Twiddles tw(frame_length);
  std::vector<double> frame(static_cast<size_t>(2 * frame_length)), spectrum(static_cast<size_t>(2 * bins));
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t f = 0; f < *frames; ++f) {
      for (int64_t t = 0; t < frame_length; ++t) {
        const double w = window != nullptr ? ReadFloat(*window, t) : 1.0;
        const int64_t at = (b * signal_length + f * *step + t) * parts;
        frame[2 * t] = ReadFloat(sig, at) * w;
        frame[2 * t + 1] = parts == 2 ? ReadFloat(sig, at + 1) * w : 0.0;
      }
      tw.Transform(frame, frame_length, -1, bins, &spectrum);
      for (int64_t m = 0; m < bins; ++m) {
        const int64_t at = ((b * *frames + f) * bins + m) * 2;
        StoreFloat(y, at, spectrum[2 * m]);
        StoreFloat(y, at + 1, spectrum[2 * m + 1]);
      }
    }
  }
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------
// MelWeightMatrix
// ---------------------------------------------------------------------------

// Triangular filters between num_mel_bins + 2 points spaced evenly on the
// mel scale, mapped to spectrogram bins floor((dft_length + 1) * f /
// sample_rate). As the ONNX reference, the mel step divides the range by
// num_mel_bins + 2.
absl::Status MelWeightMatrixKernel(KernelContext& ctx) {
  absl::StatusOr<int64_t> mel_bins = ScalarInt(ctx, 0, "num_mel_bins");
  if (!mel_bins.ok()) return mel_bins.status();
  absl::StatusOr<int64_t> dft_length = ScalarInt(ctx, 1, "dft_length");
  if (!dft_length.ok()) return dft_length.status();
  absl::StatusOr<int64_t> sample_rate = ScalarInt(ctx, 2, "sample_rate");
  if (!sample_rate.ok()) return sample_rate.status();
  absl::StatusOr<double> lower = ScalarFloat(ctx, 3, "lower_edge_hertz");
  if (!lower.ok()) return lower.status();
  absl::StatusOr<double> upper = ScalarFloat(ctx, 4, "upper_edge_hertz");
  if (!upper.ok()) return upper.status();
  if (*mel_bins < 0 || *mel_bins > ir::kMaxVisionLength) {
    return ctx.Error(absl::StrCat("input 0 (num_mel_bins) is ", *mel_bins, "; expected >= 0"));
  }
  if (*dft_length < 1 || *dft_length > ir::kMaxVisionLength) {
    return ctx.Error(absl::StrCat("input 1 (dft_length) is ", *dft_length, "; expected >= 1"));
  }
  if (*sample_rate < 1) {
    return ctx.Error(absl::StrCat("input 2 (sample_rate) is ", *sample_rate, "; expected >= 1"));
  }
  if (!std::isfinite(*lower) || !std::isfinite(*upper) || *lower < 0 || *upper < *lower) {
    return ctx.Error(absl::StrCat("lower_edge_hertz ", *lower, " and upper_edge_hertz ", *upper,
                                  "; expected 0 <= lower_edge_hertz <= upper_edge_hertz"));
  }
  const int64_t rows = *dft_length / 2 + 1, cols = *mel_bins;
  const DType dtype = ctx.output(0).dtype;
  if (absl::Status s = CheckOutput(ctx, 0, dtype, {rows, cols}); !s.ok()) return s;
  const double ln10 = std::log(10.0);
  const double low_mel = 2595 * std::log1p(*lower / 700) / ln10;
  const double high_mel = 2595 * std::log1p(*upper / 700) / ln10;
  const double mel_step = (high_mel - low_mel) / static_cast<double>(cols + 2);
  std::vector<int64_t> points(static_cast<size_t>(cols + 2));
  for (int64_t i = 0; i < cols + 2; ++i) {
    const double hz = 700 * std::expm1((static_cast<double>(i) * mel_step + low_mel) / 2595 * ln10);
    const double bin = std::floor(static_cast<double>(*dft_length + 1) * hz / static_cast<double>(*sample_rate));
    // Past the last row is past it by any amount: the check below reports it.
    points[i] = static_cast<int64_t>(std::min(bin, static_cast<double>(rows + 1)));
  }
  std::vector<double> w(static_cast<size_t>(rows * cols), 0.0);
  // Points rise with i (lower <= upper); the highest must fall inside the
  // spectrogram.
  auto check = [&](int64_t j) -> absl::Status {
    if (j >= 0 && j < rows) return absl::OkStatus();
    return ctx.Error(absl::StrCat("upper_edge_hertz ", *upper, " maps to spectrogram bin ", j, ", past the ", rows,
                                  " bins of dft_length ", *dft_length,
                                  "; expected upper_edge_hertz <= sample_rate / 2"));
  };
  for (int64_t i = 0; i < cols; ++i) {
    const int64_t lo = points[i], center = points[i + 1], hi = points[i + 2];
    if (center == lo) {
      if (absl::Status s = check(center); !s.ok()) return s;
      w[center * cols + i] = 1;
    } else {
      for (int64_t j = lo; j <= center; ++j) {
        if (absl::Status s = check(j); !s.ok()) return s;
        w[j * cols + i] = static_cast<double>(j - lo) / static_cast<double>(center - lo);
      }
    }
    for (int64_t j = center; j < hi; ++j) {
      if (absl::Status s = check(j); !s.ok()) return s;
      w[j * cols + i] = static_cast<double>(hi - j) / static_cast<double>(hi - center);
    }
  }
  TensorView& y = ctx.output(0);
  return Visit(NumericTypes{}, ctx, dtype, [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    T* out = y.as<T>();
    for (size_t i = 0; i < w.size(); ++i) out[i] = ConvertElement<T, double>(w[i]);
    return absl::OkStatus();
  });
}

}  // namespace

absl::Status RegisterVisionKernels(ir::OpRegistry& registry) {
  const struct {
    const char* type;
    ir::KernelDef kernel;
  } kernels[] = {
      {"NonMaxSuppression", {&NonMaxSuppressionKernel}},
      {"GridSample", {&GridSampleKernel}},
      {"RoiAlign", {&RoiAlignKernel, &PrepareRoiAlign}},
      {"MaxUnpool", {&MaxUnpoolKernel}},
      {"DFT", {&DftKernel}},
      {"STFT", {&StftKernel}},
      {"MelWeightMatrix", {&MelWeightMatrixKernel}},
  };
  for (const auto& k : kernels) {
    if (absl::Status s = registry.SetKernel(k.type, ir::Backend::kCpu, k.kernel); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace grove::cpu
