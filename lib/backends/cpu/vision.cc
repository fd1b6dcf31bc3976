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
#include "lib/backends/cpu/stable_sort.h"
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

// Input i holds one value (rank 0, or one element of rank 1): an i32 or
// i64 when `integer`, else a float.
absl::Status CheckScalarInput(const KernelContext& ctx, int i, absl::string_view name, bool integer) {
  if (absl::Status s = integer ? CheckIndexInput(ctx, i, name) : CheckFloatInput(ctx, i, name); !s.ok()) return s;
  const TensorView& t = ctx.input(i);
  if (t.shape.size() > 1 || t.num_elements() != 1) {
    return ctx.Error(absl::StrCat("input ", i, " (", name, ") has shape ", ShapeStr(t.shape), "; expected a scalar"));
  }
  return absl::OkStatus();
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

// NonMaxSuppression: the attribute, dtype and shape checks once; the three
// optional scalars (which may be activations) are read per run. The
// selection (at most max_output_boxes_per_class per batch and class: the
// plan's value when it knows it, else every box), the candidates, their
// sort and scores and the kept boxes live in the workspace. The output's
// size is the data's: the invoke allocates it.
struct NmsParams {
  bool center = false;
  int64_t batches = 0, num_boxes = 0, classes = 0;
  int64_t max_kept = 0;  // what the workspace holds per batch and class
};

absl::StatusOr<ir::PreparedKernel> PrepareNonMaxSuppression(const KernelContext& ctx) {
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
  NmsParams p;
  p.center = *center;
  p.batches = boxes.shape[0];
  p.num_boxes = boxes.shape[1];
  if (scores.shape.size() != 3 || scores.shape[0] != p.batches || scores.shape[2] != p.num_boxes) {
    return ctx.Error(absl::StrCat("input 1 (scores) has shape ", ShapeStr(scores.shape), "; expected [", p.batches,
                                  ", num_classes, ", p.num_boxes, "] for input 0 (boxes) ", ShapeStr(boxes.shape)));
  }
  p.classes = scores.shape[1];
  absl::StatusOr<const TensorView*> max_t = OptionalScalar(ctx, 2, "max_output_boxes_per_class", true);
  if (!max_t.ok()) return max_t.status();
  absl::StatusOr<const TensorView*> iou_t = OptionalScalar(ctx, 3, "iou_threshold", false);
  if (!iou_t.ok()) return iou_t.status();
  absl::StatusOr<const TensorView*> score_t = OptionalScalar(ctx, 4, "score_threshold", false);
  if (!score_t.ok()) return score_t.status();
  p.max_kept = p.num_boxes;
  if (*max_t == nullptr) {
    p.max_kept = 0;
  } else if ((*max_t)->data != nullptr) {
    p.max_kept = std::clamp<int64_t>(ReadIndex(**max_t, 0), 0, p.num_boxes);
  }
  WorkspaceLayout layout;
  layout.Add<int64_t>(p.batches * p.classes * p.max_kept * 3);  // selected
  layout.Add<int64_t>(p.num_boxes);                             // candidates
  layout.Add<int64_t>(p.num_boxes);                             // the sort's buffer
  layout.Add<double>(p.num_boxes);                              // class_scores
  layout.Add<Box>(p.max_kept);                                  // kept
  const uint64_t bytes = layout.bytes();
  return backends::MakePrepared(p, bytes);
}

absl::Status NonMaxSuppressionKernel(KernelContext& ctx) {
  const NmsParams* p = backends::PreparedParams<NmsParams>(ctx);
  if (p == nullptr) return backends::NotPrepared(ctx, "CPU");
  const TensorView& boxes = ctx.input(0);
  const TensorView& scores = ctx.input(1);
  const int64_t batches = p->batches, num_boxes = p->num_boxes, classes = p->classes;
  auto present = [&](int i) { return ctx.has_input(i) && ctx.input(i).num_elements() > 0; };
  // No max_output_boxes_per_class selects nothing (the default is 0).
  const int64_t max_out =
      std::min(present(2) ? std::clamp<int64_t>(ReadIndex(ctx.input(2), 0), 0, num_boxes) : 0, p->max_kept);
  const double iou = present(3) ? ReadFloat(ctx.input(3), 0) : 0.0;
  const bool filter = present(4);
  const double score_threshold = filter ? ReadFloat(ctx.input(4), 0) : 0.0;

  WorkspaceCursor ws(ctx.workspace());
  int64_t* selected = ws.Take<int64_t>(batches * classes * p->max_kept * 3);  // (batch, class, box) triples
  int64_t* candidates = ws.Take<int64_t>(num_boxes);
  int64_t* buffer = ws.Take<int64_t>(num_boxes);
  double* class_scores = ws.Take<double>(num_boxes);
  Box* kept = ws.Take<Box>(p->max_kept);
  int64_t num_selected = 0;
  for (int64_t b = 0; max_out > 0 && b < batches; ++b) {
    for (int64_t c = 0; c < classes; ++c) {
      const int64_t score_base = (b * classes + c) * num_boxes;
      int64_t num_candidates = 0;
      for (int64_t i = 0; i < num_boxes; ++i) {
        class_scores[i] = ReadFloat(scores, score_base + i);
        if (!filter || class_scores[i] > score_threshold) candidates[num_candidates++] = i;
      }
      // Highest score first, the lower index first among equals; NaN
      // scores (only without a score_threshold) come last.
      StableSortIndices(candidates, buffer, num_candidates, [&](int64_t l, int64_t r) {
        const double sl = class_scores[l], sr = class_scores[r];
        if (std::isnan(sl) || std::isnan(sr)) return !std::isnan(sl) && std::isnan(sr);
        return sl > sr;
      });
      int64_t num_kept = 0;
      for (int64_t n = 0; n < num_candidates; ++n) {
        const int64_t i = candidates[n];
        if (num_kept >= max_out) break;
        const Box box = ReadBox(boxes, (b * num_boxes + i) * 4, p->center);
        bool suppressed = false;
        for (int64_t k = 0; k < num_kept; ++k) {
          if (Suppresses(box, kept[k], iou)) {
            suppressed = true;
            break;
          }
        }
        if (suppressed) continue;
        kept[num_kept++] = box;
        selected[num_selected++] = b;
        selected[num_selected++] = c;
        selected[num_selected++] = i;
      }
    }
  }
  absl::StatusOr<TensorView*> out = ctx.AllocateOutput(0, DType::kI64, {num_selected / 3, 3});
  if (!out.ok()) return out.status();
  std::copy(selected, selected + num_selected, (*out)->as<int64_t>());
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------
// GridSample
// ---------------------------------------------------------------------------

using SampleMode = ir::GridSampleMode;
using Padding = ir::GridSamplePadding;

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

// GridSample: the modes, the shape and output checks, X's spatial dims and
// strides and the number of tap combinations, made once; per position the
// taps, their offsets and weights and the channels' sums live in the
// workspace.
struct GridSampleParams {
  SampleMode mode = SampleMode::kLinear;
  Padding padding = Padding::kZeros;
  bool align = false;
  int k = 0, taps = 1;
  int64_t n_batch = 0, channels = 0, plane = 0, positions = 0, corners = 1;
  std::vector<int64_t> dims, strides;
};

absl::StatusOr<ir::PreparedKernel> PrepareGridSample(const KernelContext& ctx) {
  const TensorView& x = ctx.input(0);
  const TensorView& grid = ctx.input(1);
  if (absl::Status s = CheckFloatInput(ctx, 0, "X"); !s.ok()) return s;
  if (absl::Status s = CheckFloatInput(ctx, 1, "grid"); !s.ok()) return s;
  absl::StatusOr<ir::GridSampleAttrs> attrs = ir::ReadGridSampleAttrs(ctx.attrs());
  if (!attrs.ok()) return ctx.Error(attrs.status().message());
  GridSampleParams p;
  p.mode = attrs->mode;
  p.padding = attrs->padding;
  p.align = attrs->align_corners;
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
  p.k = k;
  p.n_batch = x.shape[0];
  p.channels = x.shape[1];
  p.dims.assign(x.shape.begin() + 2, x.shape.end());
  p.plane = Product(x.shape, 2, x.shape.size());
  p.positions = Product(grid.shape, 1, grid.shape.size() - 1);
  p.strides = ir::Strides(p.dims);
  p.taps = p.mode == SampleMode::kNearest ? 1 : (p.mode == SampleMode::kLinear ? 2 : 4);
  for (int d = 0; d < k; ++d) {
    p.corners *= p.taps;
    if (p.corners > (int64_t{1} << 20)) {
      return ctx.Error(absl::StrCat("X has ", k, " spatial dims; too many to sample"));
    }
  }
  WorkspaceLayout layout;
  layout.Add<int64_t>(k);            // first
  layout.Add<double>(4 * k);         // weight
  layout.Add<int64_t>(p.corners);    // offsets
  layout.Add<double>(p.corners);     // corner_weight
  layout.Add<double>(p.channels);    // acc
  const uint64_t bytes = layout.bytes();
  return backends::MakePrepared(std::move(p), bytes);
}

absl::Status GridSampleKernel(KernelContext& ctx) {
  const GridSampleParams* prepared = backends::PreparedParams<GridSampleParams>(ctx);
  if (prepared == nullptr) return backends::NotPrepared(ctx, "CPU");
  const GridSampleParams& gp = *prepared;
  const TensorView& x = ctx.input(0);
  const TensorView& grid = ctx.input(1);
  TensorView& y = ctx.output(0);
  const SampleMode mode = gp.mode;
  const Padding padding = gp.padding;
  const bool align = gp.align;
  const int k = gp.k, taps = gp.taps;
  const int64_t n_batch = gp.n_batch, channels = gp.channels, plane = gp.plane, positions = gp.positions;
  const int64_t corners = gp.corners;
  const std::vector<int64_t>& dims = gp.dims;
  const std::vector<int64_t>& strides = gp.strides;
  // Per dim: the first tap's index and each tap's weight.
  WorkspaceCursor ws(ctx.workspace());
  int64_t* first = ws.Take<int64_t>(k);
  double* weight = ws.Take<double>(4 * k);
  int64_t* offsets = ws.Take<int64_t>(corners);
  double* corner_weight = ws.Take<double>(corners);
  double* acc = ws.Take<double>(channels);

  // The index a tap reads along dim d, or -1 for a zero (padding 'zeros').
  auto tap_index = [&](int d, int64_t i) -> int64_t {
    const int64_t len = dims[d];
    if (i >= 0 && i < len) return i;
    if (padding == Padding::kZeros) return -1;
    if (padding == Padding::kBorder) return std::clamp<int64_t>(i, 0, len - 1);
    const double lo = align ? 0.0 : -0.5, hi = align ? len - 1.0 : len - 0.5;
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
        double c = align ? (g + 1) / 2 * (len - 1) : ((g + 1) * len - 1) / 2;
        if (mode == SampleMode::kNearest) c = std::nearbyint(c);
        const double lo = align ? 0.0 : -0.5, hi = align ? len - 1 : len - 0.5;
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
          CubicWeights(t, weight + d * 4);
        }
      }
      std::fill(acc, acc + channels, 0.0);
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
// MaxUnpool: the dtype, shape and window checks, the unpooled shape and its
// element count, made once; the output's shape and strides too when the
// plan knows output_shape (absent, a weight or a folded value), per run
// otherwise (into the workspace). The indices are checked per run.
struct MaxUnpoolParams {
  int rank = 0;
  std::vector<int64_t> unpooled;
  int64_t total = 0;
  DType dtype = DType::kF32;
  bool planned = false;
  std::vector<int64_t> out_shape, out_strides;  // when planned
};

// The output shape (output_shape's values, or the unpooled shape) and its
// strides into out_shape and out_strides (rank each), checked against the
// unpooled shape and output 0.
absl::Status ResolveUnpoolOutput(const KernelContext& ctx, const MaxUnpoolParams& p, int64_t* out_shape,
                                 int64_t* out_strides) {
  const int rank = p.rank;
  std::copy(p.unpooled.begin(), p.unpooled.end(), out_shape);
  if (ctx.has_input(2)) {
    const TensorView& os = ctx.input(2);
    for (int d = 0; d < rank; ++d) out_shape[d] = ReadIndex(os, d);
    for (int d = 0; d < rank; ++d) {
      if (out_shape[d] < p.unpooled[d] || (d < 2 && out_shape[d] != p.unpooled[d])) {
        return ctx.Error(absl::StrCat("input 2 (output_shape) is ",
                                      ShapeStr(std::vector<int64_t>(out_shape, out_shape + rank)),
                                      "; expected N and C of X and each spatial length >= the unpooled shape ",
                                      ShapeStr(p.unpooled)));
      }
    }
  }
  if (absl::Status s = CheckOutput(ctx, 0, p.dtype, absl::Span<const int64_t>(out_shape, rank)); !s.ok()) return s;
  int64_t stride = 1;
  for (int d = rank - 1; d >= 0; --d) {
    out_strides[d] = stride;
    stride *= out_shape[d];
  }
  return absl::OkStatus();
}

absl::StatusOr<ir::PreparedKernel> PrepareMaxUnpool(const KernelContext& ctx) {
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
  MaxUnpoolParams p;
  p.rank = rank;
  p.dtype = x.dtype;
  p.unpooled = {x.shape[0], x.shape[1]};
  for (int d = 0; d < rank - 2; ++d) {
    absl::StatusOr<int64_t> len = ir::UnpooledLength(*window, d, x.shape[2 + d]);
    if (!len.ok()) return ctx.Error(len.status().message());
    p.unpooled.push_back(*len);
  }
  if (ctx.has_input(2)) {
    const TensorView& os = ctx.input(2);
    if (absl::Status s = CheckIndexInput(ctx, 2, "output_shape"); !s.ok()) return s;
    if (os.shape != std::vector<int64_t>{rank}) {
      return ctx.Error(absl::StrCat("input 2 (output_shape) has shape ", ShapeStr(os.shape), "; expected [", rank,
                                    "] (one length per dim of X)"));
    }
  }
  p.total = backends::BoundedProduct(p.unpooled, std::numeric_limits<int64_t>::max());
  if (p.total < 0) return ctx.Error(absl::StrCat("the unpooled shape ", ShapeStr(p.unpooled), " is too large"));
  p.planned = !ctx.has_input(2) || ctx.input(2).data != nullptr;
  WorkspaceLayout layout;
  if (p.planned) {
    p.out_shape.resize(rank);
    p.out_strides.resize(rank);
    if (absl::Status s = ResolveUnpoolOutput(ctx, p, p.out_shape.data(), p.out_strides.data()); !s.ok()) return s;
  } else {
    layout.Add<int64_t>(rank);  // out_shape
    layout.Add<int64_t>(rank);  // out_strides
  }
  const uint64_t bytes = layout.bytes();
  return backends::MakePrepared(std::move(p), bytes);
}

absl::Status MaxUnpoolKernel(KernelContext& ctx) {
  const MaxUnpoolParams* p = backends::PreparedParams<MaxUnpoolParams>(ctx);
  if (p == nullptr) return backends::NotPrepared(ctx, "CPU");
  const int rank = p->rank;
  const int64_t* out_strides = p->out_strides.data();
  if (!p->planned) {
    WorkspaceCursor ws(ctx.workspace());
    int64_t* out_shape = ws.Take<int64_t>(rank);
    int64_t* strides = ws.Take<int64_t>(rank);
    if (absl::Status s = ResolveUnpoolOutput(ctx, *p, out_shape, strides); !s.ok()) return s;
    out_strides = strides;
  }
  const TensorView& x = ctx.input(0);
  const TensorView& ind = ctx.input(1);
  const std::vector<int64_t>& unpooled = p->unpooled;
  const int64_t total = p->total;
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

// cos and sin of 2 * pi * j / n for j in [0, n): table[j] and table[n + j]
// (2n doubles).
void FillTwiddles(int64_t n, double* table) {
  for (int64_t j = 0; j < n; ++j) {
    const double a = 2 * std::numbers::pi * static_cast<double>(j) / static_cast<double>(n);
    table[j] = std::cos(a);
    table[n + j] = std::sin(a);
  }
}

// out[m] = sum_k in[k] * exp(sign * 2 pi i m k / n), m in [0, out_count),
// by the twiddles of n; `in` holds in_count <= n complex values (re, im),
// the rest are zeros.
void Transform(const double* table, int64_t n, const double* in, int64_t in_count, int sign, int64_t out_count,
               double* out) {
  const double* cos_ = table;
  const double* sin_ = table + n;
  for (int64_t m = 0; m < out_count; ++m) {
    double re = 0, im = 0;
    for (int64_t k = 0; k < in_count; ++k) {
      const int64_t j = (m * k) % n;
      const double c = cos_[j], s = sign * sin_[j];
      re += in[2 * k] * c - in[2 * k + 1] * s;
      im += in[2 * k] * s + in[2 * k + 1] * c;
    }
    out[2 * m] = re;
    out[2 * m + 1] = im;
  }
}

// The scratch of one transform in the workspace: the twiddles of its
// length when the plan did not make them (per run), its input (max_in
// complex values) and its output (max_out).
struct TransformScratch {
  const double* twiddles;
  double *in, *out;
};

uint64_t TransformScratchBytes(bool planned, int64_t max_in, int64_t max_out) {
  WorkspaceLayout layout;
  if (!planned) layout.Add<double>(2 * max_in);  // twiddles
  layout.Add<double>(2 * max_in);
  layout.Add<double>(2 * max_out);
  return layout.bytes();
}

// `planned_twiddles` (the prepare's) or, when empty, those of `length`
// made in the workspace.
TransformScratch TakeTransformScratch(void* workspace, const std::vector<double>& planned_twiddles, int64_t length,
                                      int64_t max_in, int64_t max_out) {
  WorkspaceCursor ws(workspace);
  TransformScratch s{};
  if (planned_twiddles.empty()) {
    double* t = ws.Take<double>(2 * max_in);
    FillTwiddles(length, t);
    s.twiddles = t;
  } else {
    s.twiddles = planned_twiddles.data();
  }
  s.in = ws.Take<double>(2 * max_in);
  s.out = ws.Take<double>(2 * max_out);
  return s;
}

// DFT: the flags, axis and shape checks once; dft_length's value, the
// sizes, the output check and the twiddles once per plan when the plan
// knows dft_length (absent, a weight or a folded value), per run otherwise
// (the twiddles then in the workspace, declared for the longest length the
// planned output allows). The signal and spectrum of one transform live in
// the workspace.
struct DftParams {
  bool onesided = false, inverse = false;
  int axis = 0;
  int64_t max_length = 0;  // what the workspace holds
  bool planned = false;
  ir::DftSizes sizes;           // when planned
  std::vector<double> twiddles;  // when planned
};

// dft_length's value (-1: absent), the sizes and the output check.
absl::StatusOr<ir::DftSizes> ResolveDftSizes(const KernelContext& ctx, const DftParams& p) {
  const TensorView& x = ctx.input(0);
  int64_t dft_length = -1;
  if (ctx.has_input(1)) {
    const int64_t v = ReadIndex(ctx.input(1), 0);
    if (v < 1) return ctx.Error(absl::StrCat("input 1 (dft_length) is ", v, "; expected >= 1"));
    dft_length = v;
  }
  const int64_t n = x.shape[p.axis];
  absl::StatusOr<ir::DftSizes> sizes = ir::ComputeDftSizes(n, dft_length, p.onesided, p.inverse);
  if (!sizes.ok()) return ctx.Error(sizes.status().message());
  const TensorView& y = ctx.output(0);
  const size_t rank = x.shape.size();
  // The output's shape: x's with the axis and the last dim replaced.
  bool same = y.dtype == x.dtype && y.shape.size() == rank;
  for (size_t d = 0; same && d < rank; ++d) {
    const int64_t want = d == static_cast<size_t>(p.axis) ? sizes->axis_out
                         : d + 1 == rank                  ? sizes->complex_out
                                                          : x.shape[d];
    same = y.shape[d] == want;
  }
  if (!same) {
    std::vector<int64_t> out_shape = x.shape;
    out_shape[p.axis] = sizes->axis_out;
    out_shape.back() = sizes->complex_out;
    if (absl::Status s = CheckOutput(ctx, 0, x.dtype, out_shape); !s.ok()) return s;
  }
  return sizes;
}

absl::StatusOr<ir::PreparedKernel> PrepareDft(const KernelContext& ctx) {
  const TensorView& x = ctx.input(0);
  if (absl::Status s = CheckFloatInput(ctx, 0, "input"); !s.ok()) return s;
  DftParams p;
  absl::StatusOr<bool> onesided = FlagAttr(ctx, "onesided", 0);
  if (!onesided.ok()) return onesided.status();
  absl::StatusOr<bool> inverse = FlagAttr(ctx, "inverse", 0);
  if (!inverse.ok()) return inverse.status();
  p.onesided = *onesided;
  p.inverse = *inverse;
  const int rank = static_cast<int>(x.shape.size());
  if (rank < 2 || (x.shape.back() != 1 && x.shape.back() != 2)) {
    return ctx.Error(absl::StrCat("input 0 (input) has shape ", ShapeStr(x.shape),
                                  "; expected [batch, signal dims..., 1 or 2] (real or complex)"));
  }
  absl::StatusOr<int> axis = ir::DftAxis(ctx.attrs().GetInt("axis", 1), rank);
  if (!axis.ok()) return ctx.Error(axis.status().message());
  p.axis = *axis;
  if (ctx.has_input(1)) {
    if (absl::Status s = CheckScalarInput(ctx, 1, "dft_length", true); !s.ok()) return s;
  }
  p.planned = !ctx.has_input(1) || ctx.input(1).data != nullptr;
  if (p.planned) {
    absl::StatusOr<ir::DftSizes> sizes = ResolveDftSizes(ctx, p);
    if (!sizes.ok()) return sizes.status();
    p.sizes = *sizes;
    p.max_length = sizes->length;
    p.twiddles.resize(static_cast<size_t>(2 * p.max_length));
    FillTwiddles(p.max_length, p.twiddles.data());
  } else {
    // The planned output's length along the axis is L, or L / 2 + 1 for
    // the one-sided forward transform: L < 2 * that either way.
    const TensorView& y = ctx.output(0);
    const int64_t axis_out = p.axis < static_cast<int>(y.shape.size()) ? y.shape[p.axis] : 0;
    p.max_length = std::min(2 * axis_out, ir::kMaxDftLength);
  }
  const uint64_t bytes = TransformScratchBytes(p.planned, p.max_length, p.max_length);
  return backends::MakePrepared(std::move(p), bytes);
}

// The transforms of a DFT whose sizes are known (planned, or made for this
// run: then without twiddles, which the workspace gets).
void RunDft(KernelContext& ctx, const DftParams* p) {
  const ir::DftSizes& sizes = p->sizes;
  const TransformScratch scratch =
      TakeTransformScratch(ctx.workspace(), p->twiddles, sizes.length, p->max_length, p->max_length);
  const double* table = scratch.twiddles;
  double* signal = scratch.in;
  double* spectrum = scratch.out;
  const TensorView& x = ctx.input(0);
  TensorView& y = ctx.output(0);
  const int axis = p->axis;
  const bool inverse = p->inverse;
  const int64_t n = x.shape[axis];
  const int64_t length = sizes.length;
  const int64_t outer = Product(x.shape, 0, axis);
  const int64_t inner = Product(x.shape, axis + 1, x.shape.size() - 1);
  const int64_t parts = x.shape.back();
  const bool irfft = p->onesided && inverse;
  // Samples read along the axis: the first min(n, L) (zero padding past n),
  // for the IRFFT the bins of the one-sided spectrum [0, L/2].
  const int64_t read = std::min(n, irfft ? length / 2 + 1 : length);
  const int64_t y_axis = sizes.axis_out, y_parts = sizes.complex_out;
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      std::fill(signal, signal + 2 * length, 0.0);
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
      Transform(table, length, signal, count, inverse ? 1 : -1, y_axis, spectrum);
      const double norm = inverse ? 1.0 / static_cast<double>(length) : 1.0;
      for (int64_t m = 0; m < y_axis; ++m) {
        const int64_t at = ((o * y_axis + m) * inner + i) * y_parts;
        StoreFloat(y, at, spectrum[2 * m] * norm);
        if (y_parts == 2) StoreFloat(y, at + 1, spectrum[2 * m + 1] * norm);
      }
    }
  }
}

absl::Status DftKernel(KernelContext& ctx) {
  return backends::InvokePlannedOrPerRun<DftParams>(
      ctx, "CPU",
      [](const KernelContext& c, const DftParams& prepared) -> absl::StatusOr<DftParams> {
        DftParams run = prepared;  // (no twiddles: not planned)
        absl::StatusOr<ir::DftSizes> sizes = ResolveDftSizes(c, prepared);
        if (!sizes.ok()) return sizes.status();
        run.sizes = *sizes;
        return run;
      },
      [&](const DftParams& p) { RunDft(ctx, &p); });
}

// STFT: the flag, dtype and shape checks once; frame_step's and
// frame_length's values, the frame count, the output check and the
// twiddles once per plan when the plan knows them (weights or folded
// values), per run otherwise (the twiddles then in the workspace, declared
// for the longest frame the planned output allows). One frame and its
// spectrum live in the workspace.
struct StftParams {
  bool onesided = true;
  int64_t max_frame = 0, max_bins = 0;  // what the workspace holds
  bool planned = false;
  int64_t step = 0, frame_length = 0, frames = 0, bins = 0;  // when planned
  std::vector<double> twiddles;                              // when planned
};

struct StftSizes {
  int64_t step = 0, frame_length = 0, frames = 0, bins = 0;
};

// The values of frame_step and frame_length, the frame count and the
// output check.
absl::StatusOr<StftSizes> ResolveStftSizes(const KernelContext& ctx, const StftParams& p) {
  const TensorView& sig = ctx.input(0);
  const int64_t batch = sig.shape[0], signal_length = sig.shape[1];
  StftSizes s;
  s.step = ReadIndex(ctx.input(1), 0);
  s.frame_length = ctx.has_input(2) ? ctx.input(2).shape[0] : signal_length;
  if (ctx.has_input(3)) {
    const int64_t fl = ReadIndex(ctx.input(3), 0);
    if (ctx.has_input(2) && fl != s.frame_length) {
      return ctx.Error(absl::StrCat("input 3 (frame_length) is ", fl, " but input 2 (window) has ", s.frame_length,
                                    " elements; they must agree"));
    }
    s.frame_length = fl;
  }
  absl::StatusOr<int64_t> frames = ir::StftFrames(signal_length, s.frame_length, s.step);
  if (!frames.ok()) return ctx.Error(frames.status().message());
  s.frames = *frames;
  s.bins = p.onesided ? s.frame_length / 2 + 1 : s.frame_length;
  const int64_t out_shape[] = {batch, s.frames, s.bins, 2};
  if (absl::Status st = CheckOutput(ctx, 0, sig.dtype, out_shape); !st.ok()) return st;
  return s;
}

absl::StatusOr<ir::PreparedKernel> PrepareStft(const KernelContext& ctx) {
  const TensorView& sig = ctx.input(0);
  if (absl::Status s = CheckFloatInput(ctx, 0, "signal"); !s.ok()) return s;
  StftParams p;
  absl::StatusOr<bool> onesided = FlagAttr(ctx, "onesided", 1);
  if (!onesided.ok()) return onesided.status();
  p.onesided = *onesided;
  if (sig.shape.size() != 3 || (sig.shape[2] != 1 && sig.shape[2] != 2)) {
    return ctx.Error(absl::StrCat("input 0 (signal) has shape ", ShapeStr(sig.shape),
                                  "; expected [batch, signal_length, 1 or 2] (real or complex)"));
  }
  if (absl::Status s = CheckScalarInput(ctx, 1, "frame_step", true); !s.ok()) return s;
  if (ctx.has_input(2)) {
    const TensorView& window = ctx.input(2);
    if (window.dtype != sig.dtype) {
      return ctx.Error(absl::StrCat("input 2 (window) has dtype ", DTypeName(window.dtype), "; expected ",
                                    DTypeName(sig.dtype), " like input 0 (signal)"));
    }
    if (window.shape.size() != 1) {
      return ctx.Error(absl::StrCat("input 2 (window) has shape ", ShapeStr(window.shape), "; expected a 1-D tensor"));
    }
  }
  if (ctx.has_input(3)) {
    if (absl::Status s = CheckScalarInput(ctx, 3, "frame_length", true); !s.ok()) return s;
  }
  p.planned = ctx.input(1).data != nullptr && (!ctx.has_input(3) || ctx.input(3).data != nullptr);
  if (p.planned) {
    absl::StatusOr<StftSizes> sizes = ResolveStftSizes(ctx, p);
    if (!sizes.ok()) return sizes.status();
    p.step = sizes->step;
    p.frame_length = sizes->frame_length;
    p.frames = sizes->frames;
    p.bins = sizes->bins;
    p.max_frame = p.frame_length;
    p.max_bins = p.bins;
    p.twiddles.resize(static_cast<size_t>(2 * p.frame_length));
    FillTwiddles(p.frame_length, p.twiddles.data());
  } else {
    // The planned output's bins: the frame length, or half of it plus one
    // when one-sided; and no frame is longer than the signal.
    const TensorView& y = ctx.output(0);
    const int64_t bins = y.shape.size() == 4 ? y.shape[2] : 0;
    p.max_frame = std::min(p.onesided ? 2 * bins : bins, sig.shape[1]);
    p.max_bins = bins;
  }
  const uint64_t bytes = TransformScratchBytes(p.planned, p.max_frame, p.max_bins);
  return backends::MakePrepared(std::move(p), bytes);
}

// The frames of an STFT whose sizes are known (planned, or made for this
// run: then without twiddles, which the workspace gets).
void RunStft(KernelContext& ctx, const StftParams* p) {
  const StftSizes sizes{p->step, p->frame_length, p->frames, p->bins};
  const TransformScratch scratch =
      TakeTransformScratch(ctx.workspace(), p->twiddles, sizes.frame_length, p->max_frame, p->max_bins);
  const double* table = scratch.twiddles;
  double* frame = scratch.in;
  double* spectrum = scratch.out;
  const TensorView& sig = ctx.input(0);
  const int64_t batch = sig.shape[0], signal_length = sig.shape[1], parts = sig.shape[2];
  const TensorView* window = ctx.has_input(2) ? &ctx.input(2) : nullptr;
  const int64_t frame_length = sizes.frame_length, frames = sizes.frames, bins = sizes.bins, step = sizes.step;
  TensorView& y = ctx.output(0);
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t f = 0; f < frames; ++f) {
      for (int64_t t = 0; t < frame_length; ++t) {
        const double w = window != nullptr ? ReadFloat(*window, t) : 1.0;
        const int64_t at = (b * signal_length + f * step + t) * parts;
        frame[2 * t] = ReadFloat(sig, at) * w;
        frame[2 * t + 1] = parts == 2 ? ReadFloat(sig, at + 1) * w : 0.0;
      }
      Transform(table, frame_length, frame, frame_length, -1, bins, spectrum);
      for (int64_t m = 0; m < bins; ++m) {
        const int64_t at = ((b * frames + f) * bins + m) * 2;
        StoreFloat(y, at, spectrum[2 * m]);
        StoreFloat(y, at + 1, spectrum[2 * m + 1]);
      }
    }
  }
}

absl::Status StftKernel(KernelContext& ctx) {
  return backends::InvokePlannedOrPerRun<StftParams>(
      ctx, "CPU",
      [](const KernelContext& c, const StftParams& prepared) -> absl::StatusOr<StftParams> {
        absl::StatusOr<StftSizes> sizes = ResolveStftSizes(c, prepared);
        if (!sizes.ok()) return sizes.status();
        StftParams run = prepared;  // (no twiddles: not planned)
        run.step = sizes->step;
        run.frame_length = sizes->frame_length;
        run.frames = sizes->frames;
        run.bins = sizes->bins;
        return run;
      },
      [&](const StftParams& p) { RunStft(ctx, &p); });
}

// ---------------------------------------------------------------------------
// MelWeightMatrix
// ---------------------------------------------------------------------------

// Triangular filters between num_mel_bins + 2 points spaced evenly on the
// mel scale, mapped to spectrogram bins floor((dft_length + 1) * f /
// sample_rate). As the ONNX reference, the mel step divides the range by
// num_mel_bins + 2.
// MelWeightMatrix: the inputs' dtype and shape checks once; the values, the
// output check and the table (rows x cols doubles) once per plan when the
// plan knows every input (weights or folded values: the usual case), per
// run otherwise, the table and the mel points then in the workspace,
// declared for the planned output.
struct MelParams {
  DType dtype = DType::kF32;
  int64_t rows = 0, cols = 0;  // the planned output's
  bool planned = false;
  std::vector<double> table;  // when planned
  void (*store)(const double* w, int64_t count, void* out) = nullptr;
};

template <typename T>
void StoreMel(const double* w, int64_t count, void* out_data) {
  T* out = static_cast<T*>(out_data);
  for (int64_t i = 0; i < count; ++i) out[i] = ConvertElement<T, double>(w[i]);
}

// The table of the inputs' values into w (rows * cols doubles, zeroed
// here) with points[cols + 2], after the values' and the output's checks.
absl::Status MelTable(const KernelContext& ctx, DType dtype, double* w, int64_t* points) {
  const int64_t mel_bins = ReadIndex(ctx.input(0), 0);
  const int64_t dft_length = ReadIndex(ctx.input(1), 0);
  const int64_t sample_rate = ReadIndex(ctx.input(2), 0);
  const double lower = ReadFloat(ctx.input(3), 0);
  const double upper = ReadFloat(ctx.input(4), 0);
  if (mel_bins < 0 || mel_bins > ir::kMaxVisionLength) {
    return ctx.Error(absl::StrCat("input 0 (num_mel_bins) is ", mel_bins, "; expected >= 0"));
  }
  if (dft_length < 1 || dft_length > ir::kMaxVisionLength) {
    return ctx.Error(absl::StrCat("input 1 (dft_length) is ", dft_length, "; expected >= 1"));
  }
  if (sample_rate < 1) {
    return ctx.Error(absl::StrCat("input 2 (sample_rate) is ", sample_rate, "; expected >= 1"));
  }
  if (!std::isfinite(lower) || !std::isfinite(upper) || lower < 0 || upper < lower) {
    return ctx.Error(absl::StrCat("lower_edge_hertz ", lower, " and upper_edge_hertz ", upper,
                                  "; expected 0 <= lower_edge_hertz <= upper_edge_hertz"));
  }
  const int64_t rows = dft_length / 2 + 1, cols = mel_bins;
  const int64_t out_shape[] = {rows, cols};
  if (absl::Status s = CheckOutput(ctx, 0, dtype, out_shape); !s.ok()) return s;
  const double ln10 = std::log(10.0);
  const double low_mel = 2595 * std::log1p(lower / 700) / ln10;
  const double high_mel = 2595 * std::log1p(upper / 700) / ln10;
  const double mel_step = (high_mel - low_mel) / static_cast<double>(cols + 2);
  for (int64_t i = 0; i < cols + 2; ++i) {
    const double hz = 700 * std::expm1((static_cast<double>(i) * mel_step + low_mel) / 2595 * ln10);
    const double bin = std::floor(static_cast<double>(dft_length + 1) * hz / static_cast<double>(sample_rate));
    // Past the last row is past it by any amount: the check below reports it.
    points[i] = static_cast<int64_t>(std::min(bin, static_cast<double>(rows + 1)));
  }
  std::fill(w, w + rows * cols, 0.0);
  // Points rise with i (lower <= upper); the highest must fall inside the
  // spectrogram.
  auto check = [&](int64_t j) -> absl::Status {
    if (j >= 0 && j < rows) return absl::OkStatus();
    return ctx.Error(absl::StrCat("upper_edge_hertz ", upper, " maps to spectrogram bin ", j, ", past the ", rows,
                                  " bins of dft_length ", dft_length,
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
  return absl::OkStatus();
}

absl::StatusOr<ir::PreparedKernel> PrepareMelWeightMatrix(const KernelContext& ctx) {
  const char* const names[] = {"num_mel_bins", "dft_length", "sample_rate", "lower_edge_hertz", "upper_edge_hertz"};
  for (int i = 0; i < 5; ++i) {
    if (absl::Status s = CheckScalarInput(ctx, i, names[i], i < 3); !s.ok()) return s;
  }
  MelParams p;
  p.dtype = ctx.output(0).dtype;
  const std::vector<int64_t>& planned = ctx.output(0).shape;
  if (planned.size() == 2) {
    p.rows = planned[0];
    p.cols = planned[1];
  }
  absl::Status chosen = Visit(NumericTypes{}, ctx, p.dtype, [&](auto tag) -> absl::Status {
    p.store = &StoreMel<typename decltype(tag)::type>;
    return absl::OkStatus();
  });
  p.planned = true;
  for (int i = 0; i < 5; ++i) p.planned = p.planned && ctx.input(i).data != nullptr;
  WorkspaceLayout layout;
  if (p.planned) {
    // (The table's size is the values': read before it is made.)
    const int64_t mel_bins = ReadIndex(ctx.input(0), 0), dft_length = ReadIndex(ctx.input(1), 0);
    const bool sized = mel_bins >= 0 && mel_bins <= ir::kMaxVisionLength && dft_length >= 1 &&
                       dft_length <= ir::kMaxVisionLength && p.rows == dft_length / 2 + 1 && p.cols == mel_bins;
    std::vector<int64_t> points(sized ? static_cast<size_t>(mel_bins + 2) : 0);
    if (sized) p.table.resize(static_cast<size_t>(p.rows * p.cols));
    if (absl::Status s = MelTable(ctx, p.dtype, p.table.data(), points.data()); !s.ok()) return s;
  } else {
    layout.Add<double>(p.rows * p.cols);  // the table
    layout.Add<int64_t>(p.cols + 2);      // the mel points
  }
  if (!chosen.ok()) return chosen;
  const uint64_t bytes = layout.bytes();
  return backends::MakePrepared(std::move(p), bytes);
}

absl::Status MelWeightMatrixKernel(KernelContext& ctx) {
  const MelParams* p = backends::PreparedParams<MelParams>(ctx);
  if (p == nullptr) return backends::NotPrepared(ctx, "CPU");
  const double* table = p->table.data();
  if (!p->planned) {
    WorkspaceCursor ws(ctx.workspace());
    double* w = ws.Take<double>(p->rows * p->cols);
    int64_t* points = ws.Take<int64_t>(p->cols + 2);
    if (absl::Status s = MelTable(ctx, p->dtype, w, points); !s.ok()) return s;
    table = w;
  }
  p->store(table, p->rows * p->cols, ctx.output(0).data);
  return absl::OkStatus();
}

}  // namespace

absl::Status RegisterVisionKernels(ir::OpRegistry& registry) {
  const struct {
    const char* type;
    ir::KernelDef kernel;
  } kernels[] = {
      {"NonMaxSuppression", {&NonMaxSuppressionKernel, &PrepareNonMaxSuppression}},
      {"GridSample", {&GridSampleKernel, &PrepareGridSample}},
      {"RoiAlign", {&RoiAlignKernel, &PrepareRoiAlign}},
      {"MaxUnpool", {&MaxUnpoolKernel, &PrepareMaxUnpool}},
      {"DFT", {&DftKernel, &PrepareDft}},
      {"STFT", {&StftKernel, &PrepareStft}},
      {"MelWeightMatrix", {&MelWeightMatrixKernel, &PrepareMelWeightMatrix}},
  };
  for (const auto& k : kernels) {
    if (absl::Status s = registry.SetKernel(k.type, ir::Backend::kCpu, k.kernel); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace grove::cpu
