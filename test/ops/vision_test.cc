// The vision and signal group against naive references written here from the
// ONNX operator text (and, where the text is silent, the ONNX reference
// implementation): NonMaxSuppression, GridSample, RoiAlign, MaxUnpool, DFT,
// STFT and MelWeightMatrix. Covers every attribute and its default, optional
// inputs present and absent, f32/f64/f16 (and bf16 where it is cheap),
// zero-size tensors, symbolic shapes, and the errors the shape functions and
// kernels return.
#include <algorithm>
#include <cmath>
#include <complex>
#include <cstdint>
#include <numbers>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "lib/ir/op_registry.h"
#include "test/op_test_util.h"
#include "test/ops/symbolic_shape_util.h"

namespace grove::testing {
namespace {

using ir::SymDim;
using ir::SymShape;
using Shape = std::vector<int64_t>;
using Attrs = std::vector<std::pair<std::string, AttrValue>>;
using Complex = std::complex<double>;

// Deterministic values in [-2, 2], different per seed.
std::vector<float> Pattern(int64_t n, int seed) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[i] = static_cast<float>(((i * 37 + seed * 11 + 5) % 41) - 20) / 10.0f;
  return v;
}

template <typename T>
void ExpectNear(const std::vector<T>& got, const std::vector<double>& want, double tol = 1e-5) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_NEAR(static_cast<double>(got[i]), want[i], tol * (1 + std::abs(want[i]))) << "at " << i;
  }
}

std::vector<float> AsFloats(const Tensor& t) { return Values<float>(Tensor::CastOf(t.view(), DType::kF32).value()); }

Tensor F32(Shape shape, const std::vector<float>& v) { return MakeTensor<float>(DType::kF32, std::move(shape), v); }
Tensor I64(Shape shape, const std::vector<int64_t>& v) { return MakeTensor<int64_t>(DType::kI64, std::move(shape), v); }
Tensor I32(Shape shape, const std::vector<int32_t>& v) { return MakeTensor<int32_t>(DType::kI32, std::move(shape), v); }

// ===========================================================================
// NonMaxSuppression
// ===========================================================================

// Greedy selection as the operator text states it, boxes given as corners
// [y1, x1, y2, x2] (either order) or [xc, yc, w, h].
std::vector<int64_t> RefNms(const std::vector<float>& boxes, const std::vector<float>& scores, int64_t batches,
                            int64_t classes, int64_t n, int64_t max_out, float iou, const float* score_threshold,
                            bool center) {
  auto corners = [&](int64_t b, int64_t i) {
    const float* p = &boxes[(b * n + i) * 4];
    double y1, x1, y2, x2;
    if (center) {
      x1 = p[0] - p[2] / 2.0, x2 = p[0] + p[2] / 2.0, y1 = p[1] - p[3] / 2.0, y2 = p[1] + p[3] / 2.0;
    } else {
      y1 = std::min(p[0], p[2]), y2 = std::max(p[0], p[2]), x1 = std::min(p[1], p[3]), x2 = std::max(p[1], p[3]);
    }
    return std::vector<double>{y1, x1, y2, x2};
  };
  auto iou_of = [&](int64_t b, int64_t i, int64_t j) {
    const auto a = corners(b, i), c = corners(b, j);
    const double ih = std::max(0.0, std::min(a[2], c[2]) - std::max(a[0], c[0]));
    const double iw = std::max(0.0, std::min(a[3], c[3]) - std::max(a[1], c[1]));
    const double inter = ih * iw;
    const double uni = (a[2] - a[0]) * (a[3] - a[1]) + (c[2] - c[0]) * (c[3] - c[1]) - inter;
    return inter > 0 && uni > 0 ? inter / uni : 0.0;
  };
  std::vector<int64_t> out;
  for (int64_t b = 0; b < batches; ++b) {
    for (int64_t c = 0; c < classes; ++c) {
      std::vector<bool> used(static_cast<size_t>(n), false);
      std::vector<int64_t> kept;
      while (static_cast<int64_t>(kept.size()) < max_out) {
        int64_t best = -1;
        for (int64_t i = 0; i < n; ++i) {
          const float s = scores[(b * classes + c) * n + i];
          if (used[i] || (score_threshold != nullptr && !(s > *score_threshold))) continue;
          if (best < 0 || s > scores[(b * classes + c) * n + best]) best = i;
        }
        if (best < 0) break;
        used[best] = true;
        bool keep = true;
        for (int64_t k : kept) keep = keep && !(iou_of(b, best, k) > iou);
        if (keep) {
          kept.push_back(best);
          out.insert(out.end(), {b, c, best});
        }
      }
    }
  }
  return out;
}

// The ONNX operator text's boxes: two clusters near the origin and one far.
const std::vector<float> kNmsBoxes = {0, 0,  1, 1,  0, 0.1f,  1, 1.1f,  0, -0.1f, 1, 0.9f,
                                      0, 10, 1, 11, 0, 10.1f, 1, 11.1f, 0, 100,   1, 101};
const std::vector<float> kNmsScores = {0.9f, 0.75f, 0.6f, 0.95f, 0.5f, 0.3f};

absl::StatusOr<std::vector<int64_t>> RunNms(const Tensor& boxes, const Tensor& scores, const Tensor* max_out,
                                            const Tensor* iou, const Tensor* score, Attrs attrs = {}) {
  std::vector<const Tensor*> in = {&boxes, &scores, max_out, iou, score};
  while (in.size() > 2 && in.back() == nullptr) in.pop_back();
  auto out = RunOp("NonMaxSuppression", in, std::move(attrs));
  if (!out.ok()) return out.status();
  const Tensor& y = (*out)[0];
  if (y.dtype() != DType::kI64 || y.shape().size() != 2 || y.shape()[1] != 3) {
    return absl::InternalError("bad output shape");
  }
  return Values<int64_t>(y);
}

TEST(NonMaxSuppressionTest, OperatorTextExamples) {
  Tensor boxes = F32({1, 6, 4}, kNmsBoxes);
  Tensor scores = F32({1, 1, 6}, kNmsScores);
  Tensor max3 = I64({1}, {3}), max2 = I64({1}, {2});
  Tensor iou = F32({1}, {0.5f}), score0 = F32({1}, {0.0f}), score04 = F32({1}, {0.4f});
  // suppress_by_IOU
  auto got = RunNms(boxes, scores, &max3, &iou, &score0);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, (std::vector<int64_t>{0, 0, 3, 0, 0, 0, 0, 0, 5}));
  // limit_output_size
  got = RunNms(boxes, scores, &max2, &iou, &score0);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, (std::vector<int64_t>{0, 0, 3, 0, 0, 0}));
  // suppress_by_IOU_and_scores
  got = RunNms(boxes, scores, &max3, &iou, &score04);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, (std::vector<int64_t>{0, 0, 3, 0, 0, 0}));
  // center_point_box: the same boxes as centres and sizes.
  Tensor centered = F32({1, 6, 4}, {0.5f, 0.5f,  1, 1, 0.5f, 0.6f,  1, 1, 0.5f, 0.4f,   1, 1,
                                    0.5f, 10.5f, 1, 1, 0.5f, 10.6f, 1, 1, 0.5f, 100.5f, 1, 1});
  got = RunNms(centered, scores, &max3, &iou, &score0, {{"center_point_box", int64_t{1}}});
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, (std::vector<int64_t>{0, 0, 3, 0, 0, 0, 0, 0, 5}));
  // flipped coordinates select the same boxes.
  Tensor flipped = F32(
      {1, 6, 4}, {1, 1, 0, 0, 0, 0.1f, 1, 1.1f, 0, 0.9f, 1, -0.1f, 0, 10, 1, 11, 1, 10.1f, 0, 11.1f, 1, 101, 0, 100});
  got = RunNms(flipped, scores, &max3, &iou, &score0);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, (std::vector<int64_t>{0, 0, 3, 0, 0, 0, 0, 0, 5}));
}

TEST(NonMaxSuppressionTest, IdenticalBoxesKeepTheFirst) {
  std::vector<float> b, s(10, 0.9f);
  for (int i = 0; i < 10; ++i) b.insert(b.end(), {0, 0, 1, 1});
  Tensor boxes = F32({1, 10, 4}, b), scores = F32({1, 1, 10}, s);
  Tensor max3 = I64({1}, {3}), iou = F32({1}, {0.5f}), score0 = F32({1}, {0.0f});
  auto got = RunNms(boxes, scores, &max3, &iou, &score0);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, (std::vector<int64_t>{0, 0, 0}));
}

TEST(NonMaxSuppressionTest, AgainstReferenceManyBatchesAndClasses) {
  const int64_t batches = 2, classes = 3, n = 17;
  std::vector<float> boxes, scores;
  for (int64_t i = 0; i < batches * n; ++i) {
    const float y = static_cast<float>((i * 7) % 11) * 0.3f, x = static_cast<float>((i * 5) % 13) * 0.25f;
    boxes.insert(boxes.end(), {y, x, y + 1.0f + 0.1f * static_cast<float>(i % 3), x + 1.2f});
  }
  for (int64_t i = 0; i < batches * classes * n; ++i) scores.push_back(static_cast<float>((i * 29) % 31) / 31.0f);
  Tensor tb = F32({batches, n, 4}, boxes), ts = F32({batches, classes, n}, scores);
  for (int64_t max_out : {1, 4, 100}) {
    for (float iou : {0.0f, 0.3f, 0.7f}) {
      for (bool with_score : {false, true}) {
        SCOPED_TRACE(absl::StrCat("max ", max_out, " iou ", iou, " score ", with_score));
        const float score_threshold = 0.4f;
        Tensor tm = I64({}, {max_out}), ti = F32({}, {iou}), tsc = F32({}, {score_threshold});
        auto got = RunNms(tb, ts, &tm, &ti, with_score ? &tsc : nullptr);
        ASSERT_TRUE(got.ok()) << got.status();
        EXPECT_EQ(*got, RefNms(boxes, scores, batches, classes, n, max_out, iou,
                               with_score ? &score_threshold : nullptr, false));
      }
    }
  }
}

TEST(NonMaxSuppressionTest, DefaultsAndDTypes) {
  Tensor boxes = F32({1, 6, 4}, kNmsBoxes), scores = F32({1, 1, 6}, kNmsScores);
  // Without max_output_boxes_per_class nothing is selected; so with 0 or a
  // negative count, or an empty tensor.
  auto got = RunNms(boxes, scores, nullptr, nullptr, nullptr);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_TRUE(got->empty());
  Tensor neg = I64({1}, {-4}), empty = I64({0}, {});
  got = RunNms(boxes, scores, &neg, nullptr, nullptr);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_TRUE(got->empty());
  got = RunNms(boxes, scores, &empty, nullptr, nullptr);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_TRUE(got->empty());
  // iou_threshold defaults to 0 (any overlap suppresses), no score filter.
  Tensor max10 = I32({}, {10});
  got = RunNms(boxes, scores, &max10, nullptr, nullptr);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, (std::vector<int64_t>{0, 0, 3, 0, 0, 0, 0, 0, 5}));
  // f64 and f16 boxes and scores, f64 thresholds.
  Tensor iou = MakeTensor<double>(DType::kF64, {1}, {0.5});
  for (DType dtype : {DType::kF64, DType::kF16, DType::kBF16}) {
    SCOPED_TRACE(DTypeName(dtype));
    Tensor b = Tensor::CastOf(boxes.view(), dtype).value(), s = Tensor::CastOf(scores.view(), dtype).value();
    got = RunNms(b, s, &max10, &iou, nullptr);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(*got, (std::vector<int64_t>{0, 0, 3, 0, 0, 0, 0, 0, 5}));
  }
  // Zero boxes, zero classes, zero batches.
  for (const auto& [bs, ss] :
       std::vector<std::pair<Shape, Shape>>{{{1, 0, 4}, {1, 2, 0}}, {{2, 3, 4}, {2, 0, 3}}, {{0, 3, 4}, {0, 2, 3}}}) {
    Tensor b = F32(bs, {}), s = F32(ss, {});
    got = RunNms(b, s, &max10, nullptr, nullptr);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_TRUE(got->empty());
  }
}

TEST(NonMaxSuppressionTest, NaNScoresComeLast) {
  Tensor boxes = F32({1, 3, 4}, {0, 0, 1, 1, 0, 5, 1, 6, 0, 10, 1, 11});
  Tensor scores = F32({1, 1, 3}, {std::nanf(""), 0.2f, 0.5f});
  Tensor max3 = I64({1}, {3});
  auto got = RunNms(boxes, scores, &max3, nullptr, nullptr);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, (std::vector<int64_t>{0, 0, 2, 0, 0, 1, 0, 0, 0}));
  Tensor score0 = F32({1}, {0.0f});
  got = RunNms(boxes, scores, &max3, nullptr, &score0);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, (std::vector<int64_t>{0, 0, 2, 0, 0, 1}));
}

TEST(NonMaxSuppressionTest, ShapeFunction) {
  const SymDim b = SymDim::Symbol(0), n = SymDim::Symbol(1);
  auto out = InferSymbolic("NonMaxSuppression", {{DType::kF32, {b, n, 4}}, {DType::kF32, {b, 2, n}}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->dtype, DType::kI64);
  ASSERT_EQ(out->shape.size(), 2u);
  EXPECT_TRUE(out->shape[0].is_unknown());
  EXPECT_EQ(out->shape[1], SymDim(3));
  auto err = [](std::vector<SymInput> in, Attrs attrs = {}) {
    return InferSymbolic("NonMaxSuppression", std::move(in), std::move(attrs)).status();
  };
  EXPECT_TRUE(
      ErrorContains(err({{DType::kF32, {1, 6, 3}}, {DType::kF32, {1, 1, 6}}}), "input 0 (boxes) has shape [1, 6, 3]"));
  EXPECT_TRUE(
      ErrorContains(err({{DType::kF32, {1, 6, 4}}, {DType::kF32, {1, 1, 5}}}), "input 1 (scores) has shape [1, 1, 5]"));
  EXPECT_TRUE(
      ErrorContains(err({{DType::kF32, {1, 6, 4}}, {DType::kF64, {1, 1, 6}}}), "input 1 (scores) has dtype f64"));
  EXPECT_TRUE(
      ErrorContains(err({{DType::kI32, {1, 6, 4}}, {DType::kI32, {1, 1, 6}}}), "input 0 (boxes) has dtype i32"));
  EXPECT_TRUE(ErrorContains(err({{DType::kF32, {1, 6, 4}}, {DType::kF32, {1, 1, 6}}, {DType::kI64, {2}}}),
                            "input 2 (max_output_boxes_per_class) has shape [2]"));
  EXPECT_TRUE(ErrorContains(err({{DType::kF32, {1, 6, 4}}, {DType::kF32, {1, 1, 6}}, {DType::kF32, {1}}}),
                            "input 2 (max_output_boxes_per_class) has dtype f32"));
  EXPECT_TRUE(ErrorContains(err({{DType::kF32, {1, 6, 4}}, {DType::kF32, {1, 1, 6}}, Absent(), {DType::kI64, {1}}}),
                            "input 3 (iou_threshold) has dtype i64"));
  EXPECT_TRUE(
      ErrorContains(err({{DType::kF32, {1, 6, 4}}, {DType::kF32, {1, 1, 6}}}, {{"center_point_box", int64_t{2}}}),
                    "attribute 'center_point_box' is 2"));
}

TEST(NonMaxSuppressionTest, KernelErrors) {
  Tensor boxes = F32({1, 6, 4}, kNmsBoxes), scores = F32({1, 1, 6}, kNmsScores);
  Tensor bad_boxes = F32({1, 6, 2}, std::vector<float>(12)), bad_scores = F32({2, 1, 6}, std::vector<float>(12));
  Tensor max2 = I64({2}, {1, 2}), fmax = F32({1}, {1});
  EXPECT_TRUE(ErrorContains(RunNms(bad_boxes, scores, nullptr, nullptr, nullptr).status(),
                            "input 0 (boxes) has shape [1, 6, 2]"));
  EXPECT_TRUE(ErrorContains(RunNms(boxes, bad_scores, nullptr, nullptr, nullptr).status(),
                            "input 1 (scores) has shape [2, 1, 6]"));
  EXPECT_TRUE(ErrorContains(RunNms(boxes, scores, &max2, nullptr, nullptr).status(),
                            "input 2 (max_output_boxes_per_class) has shape [2]"));
  EXPECT_TRUE(ErrorContains(RunNms(boxes, scores, &fmax, nullptr, nullptr).status(),
                            "input 2 (max_output_boxes_per_class) has dtype f32"));
  EXPECT_TRUE(
      ErrorContains(RunNms(boxes, scores, nullptr, &max2, nullptr).status(), "input 3 (iou_threshold) has dtype i64"));
  EXPECT_TRUE(
      ErrorContains(RunNms(boxes, scores, nullptr, nullptr, nullptr, {{"center_point_box", int64_t{3}}}).status(),
                    "attribute 'center_point_box' is 3"));
}

// ===========================================================================
// GridSample
// ===========================================================================

// 2-D sampling written out per mode, as PyTorch's grid_sample documents it.
double RefGridSample2D(const std::vector<float>& x, int64_t h, int64_t w, double gx, double gy, const std::string& mode,
                       const std::string& padding, bool align) {
  auto unnorm = [&](double g, int64_t len) {
    return align ? (g + 1) / 2 * static_cast<double>(len - 1) : ((g + 1) * static_cast<double>(len) - 1) / 2;
  };
  auto reflect = [&](double v, int64_t len) {
    const double lo = align ? 0 : -0.5, hi = align ? static_cast<double>(len - 1) : static_cast<double>(len) - 0.5;
    const double span = hi - lo;
    if (span <= 0) return 0.0;
    while (v < lo || v > hi) v = v < lo ? 2 * lo - v : 2 * hi - v;
    return v;
  };
  auto fix = [&](double v, int64_t len) {
    const double lo = align ? 0 : -0.5, hi = align ? static_cast<double>(len - 1) : static_cast<double>(len) - 0.5;
    if (v >= lo && v <= hi) return v;
    if (padding == "border") return std::clamp(v, 0.0, static_cast<double>(len - 1));
    if (padding == "reflection") return reflect(v, len);
    return v;
  };
  auto pixel = [&](int64_t yi, int64_t xi) -> double {
    if (padding == "zeros") {
      if (yi < 0 || yi >= h || xi < 0 || xi >= w) return 0;
    } else if (padding == "border") {
      yi = std::clamp<int64_t>(yi, 0, h - 1);
      xi = std::clamp<int64_t>(xi, 0, w - 1);
    } else {
      yi = std::clamp<int64_t>(static_cast<int64_t>(reflect(static_cast<double>(yi), h)), 0, h - 1);
      xi = std::clamp<int64_t>(static_cast<int64_t>(reflect(static_cast<double>(xi), w)), 0, w - 1);
    }
    return x[yi * w + xi];
  };
  double px = unnorm(gx, w), py = unnorm(gy, h);
  if (mode == "nearest") {
    px = fix(std::nearbyint(px), w);
    py = fix(std::nearbyint(py), h);
    return pixel(static_cast<int64_t>(py), static_cast<int64_t>(px));
  }
  px = fix(px, w);
  py = fix(py, h);
  const int64_t x0 = static_cast<int64_t>(std::floor(px)), y0 = static_cast<int64_t>(std::floor(py));
  const double tx = px - static_cast<double>(x0), ty = py - static_cast<double>(y0);
  if (mode == "bilinear") {
    return (1 - ty) * ((1 - tx) * pixel(y0, x0) + tx * pixel(y0, x0 + 1)) +
           ty * ((1 - tx) * pixel(y0 + 1, x0) + tx * pixel(y0 + 1, x0 + 1));
  }
  auto cubic = [](double t) {
    const double a = -0.75;
    t = std::abs(t);
    if (t <= 1) return ((a + 2) * t - (a + 3)) * t * t + 1;
    if (t < 2) return ((a * t - 5 * a) * t + 8 * a) * t - 4 * a;
    return 0.0;
  };
  double sum = 0;
  for (int64_t j = -1; j <= 2; ++j) {
    for (int64_t i = -1; i <= 2; ++i) {
      sum += cubic(ty - static_cast<double>(j)) * cubic(tx - static_cast<double>(i)) * pixel(y0 + j, x0 + i);
    }
  }
  return sum;
}

TEST(GridSampleTest, EveryModePaddingAndAlignment) {
  const int64_t n = 2, c = 3, h = 4, w = 5, oh = 3, ow = 7;
  const std::vector<float> x = Pattern(n * c * h * w, 1);
  std::vector<float> grid;
  for (int64_t i = 0; i < n * oh * ow; ++i) {
    // Coordinates in [-1.7, 1.7]: inside, on and past the borders.
    grid.push_back(static_cast<float>((i * 13) % 35 - 17) / 10.0f);
    grid.push_back(static_cast<float>((i * 7 + 3) % 35 - 17) / 10.0f);
  }
  Tensor tx = F32({n, c, h, w}, x), tg = F32({n, oh, ow, 2}, grid);
  for (const char* mode : {"bilinear", "nearest", "bicubic"}) {
    for (const char* padding : {"zeros", "border", "reflection"}) {
      for (bool align : {false, true}) {
        SCOPED_TRACE(absl::StrCat(mode, " ", padding, " align ", align));
        auto out = RunOp(
            "GridSample", {&tx, &tg},
            {{"mode", std::string(mode)}, {"padding_mode", std::string(padding)}, {"align_corners", int64_t{align}}});
        ASSERT_TRUE(out.ok()) << out.status();
        EXPECT_EQ((*out)[0].shape(), (Shape{n, c, oh, ow}));
        std::vector<double> want;
        for (int64_t b = 0; b < n; ++b) {
          for (int64_t ch = 0; ch < c; ++ch) {
            const std::vector<float> plane(x.begin() + (b * c + ch) * h * w, x.begin() + (b * c + ch + 1) * h * w);
            for (int64_t p = 0; p < oh * ow; ++p) {
              want.push_back(RefGridSample2D(plane, h, w, grid[(b * oh * ow + p) * 2], grid[(b * oh * ow + p) * 2 + 1],
                                             mode, padding, align));
            }
          }
        }
        ExpectNear(Values<float>((*out)[0]), want, 1e-5);
      }
    }
  }
}

TEST(GridSampleTest, DefaultsOpset20NamesAndDTypes) {
  const std::vector<float> x = Pattern(12, 2);
  const std::vector<float> grid = {-1, -1, 0.3f, -0.2f, 1, 1, 0.9f, 0.1f};
  Tensor tx = F32({1, 1, 3, 4}, x), tg = F32({1, 2, 2, 2}, grid);
  auto def = RunOp("GridSample", {&tx, &tg});
  ASSERT_TRUE(def.ok()) << def.status();
  std::vector<double> want;
  for (int p = 0; p < 4; ++p)
    want.push_back(RefGridSample2D(x, 3, 4, grid[2 * p], grid[2 * p + 1], "bilinear", "zeros", false));
  ExpectNear(Values<float>((*def)[0]), want);
  auto linear = RunOp("GridSample", {&tx, &tg}, {{"mode", std::string("linear")}});
  ASSERT_TRUE(linear.ok()) << linear.status();
  EXPECT_EQ(Values<float>((*linear)[0]), Values<float>((*def)[0]));
  auto cubic = RunOp("GridSample", {&tx, &tg}, {{"mode", std::string("cubic")}});
  auto bicubic = RunOp("GridSample", {&tx, &tg}, {{"mode", std::string("bicubic")}});
  ASSERT_TRUE(cubic.ok() && bicubic.ok());
  EXPECT_EQ(Values<float>((*cubic)[0]), Values<float>((*bicubic)[0]));
  for (DType dtype : {DType::kF64, DType::kF16, DType::kBF16}) {
    SCOPED_TRACE(DTypeName(dtype));
    Tensor x2 = Tensor::CastOf(tx.view(), dtype).value();
    // The grid's dtype may differ from X's.
    auto out = RunOp("GridSample", {&x2, &tg});
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ((*out)[0].dtype(), dtype);
    ExpectNear(AsFloats((*out)[0]), want, dtype == DType::kF64 ? 1e-6 : 2e-2);
  }
}

TEST(GridSampleTest, OneAndThreeSpatialDims) {
  // 1-D: linear interpolation along a line.
  Tensor x1 = F32({1, 1, 4}, {0, 10, 20, 30});
  Tensor g1 = F32({1, 3, 1}, {-1, 0, 0.5f});
  auto out = RunOp("GridSample", {&x1, &g1}, {{"align_corners", int64_t{1}}});
  ASSERT_TRUE(out.ok()) << out.status();
  ExpectNear(Values<float>((*out)[0]), {0, 15, 22.5});
  // 3-D: trilinear of a linear function is exact: f(z, y, x) = z * 100 + y * 10 + x.
  std::vector<float> vol;
  for (int z = 0; z < 3; ++z) {
    for (int y = 0; y < 4; ++y) {
      for (int x = 0; x < 5; ++x) vol.push_back(static_cast<float>(z * 100 + y * 10 + x));
    }
  }
  Tensor x3 = F32({1, 1, 3, 4, 5}, vol);
  // grid entries are (x, y, z) normalized with align_corners.
  Tensor g3 = F32({1, 1, 1, 2, 3}, {0, 0, 0, 0.5f, -1, 1});
  out = RunOp("GridSample", {&x3, &g3}, {{"align_corners", int64_t{1}}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].shape(), (Shape{1, 1, 1, 1, 2}));
  ExpectNear(Values<float>((*out)[0]), {100 + 15 + 2, 200 + 0 + 3});
}

TEST(GridSampleTest, NaNAndFarCoordinatesAndEmpty) {
  Tensor x = F32({1, 1, 2, 2}, {1, 2, 3, 4});
  Tensor g = F32({1, 1, 3, 2}, {std::nanf(""), 0, 1e30f, -1e30f, -INFINITY, INFINITY});
  for (const char* padding : {"zeros", "border", "reflection"}) {
    for (const char* mode : {"bilinear", "nearest", "bicubic"}) {
      SCOPED_TRACE(absl::StrCat(mode, " ", padding));
      auto out = RunOp("GridSample", {&x, &g}, {{"mode", std::string(mode)}, {"padding_mode", std::string(padding)}});
      ASSERT_TRUE(out.ok()) << out.status();
      const std::vector<float> v = Values<float>((*out)[0]);
      EXPECT_EQ(v[0], 0.0f);  // NaN samples nothing
      if (std::string(padding) == "zeros") {
        EXPECT_EQ(v[1], 0.0f);
        EXPECT_EQ(v[2], 0.0f);
      }
      if (std::string(padding) == "border" && std::string(mode) != "bicubic") {
        EXPECT_EQ(v[1], 2.0f);  // x clamps to the last column, y to the first row
      }
    }
  }
  // Zero-size batch, channels and output positions; an empty X plane.
  for (const auto& [xs, gs] : std::vector<std::pair<Shape, Shape>>{{{0, 2, 3, 3}, {0, 2, 2, 2}},
                                                                   {{1, 0, 3, 3}, {1, 2, 2, 2}},
                                                                   {{1, 2, 3, 3}, {1, 0, 2, 2}},
                                                                   {{1, 2, 0, 3}, {1, 2, 2, 2}}}) {
    Tensor tx = F32(xs, std::vector<float>(static_cast<size_t>(Count(xs)), 1.0f));
    Tensor tg = F32(gs, std::vector<float>(static_cast<size_t>(Count(gs)), 0.0f));
    auto out = RunOp("GridSample", {&tx, &tg});
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ((*out)[0].shape(), (Shape{xs[0], xs[1], gs[1], gs[2]}));
    for (float v : Values<float>((*out)[0])) EXPECT_EQ(v, 0.0f);
  }
}

TEST(GridSampleTest, ShapeFunctionAndErrors) {
  const SymDim b = SymDim::Symbol(0), hh = SymDim::Symbol(1);
  auto out = InferSymbolic("GridSample", {{DType::kF32, {b, 3, hh, 8}}, {DType::kF32, {b, 5, 6, 2}}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->shape, (SymShape{b, 3, 5, 6}));
  auto err = [](std::vector<SymInput> in, Attrs attrs = {}) {
    return InferSymbolic("GridSample", std::move(in), std::move(attrs)).status();
  };
  const SymInput x{DType::kF32, {1, 1, 4, 4}}, g{DType::kF32, {1, 2, 2, 2}};
  EXPECT_TRUE(ErrorContains(err({x, g}, {{"mode", std::string("area")}}), "attribute 'mode' is 'area'"));
  EXPECT_TRUE(
      ErrorContains(err({x, g}, {{"padding_mode", std::string("wrap")}}), "attribute 'padding_mode' is 'wrap'"));
  EXPECT_TRUE(ErrorContains(err({x, g}, {{"align_corners", int64_t{2}}}), "attribute 'align_corners' is 2"));
  EXPECT_TRUE(ErrorContains(err({{DType::kF32, {1, 4}}, g}), "input 0 (X) has shape [1, 4]"));
  EXPECT_TRUE(ErrorContains(err({x, {DType::kF32, {1, 2, 2, 3}}}), "input 1 (grid) has shape [1, 2, 2, 3]"));
  EXPECT_TRUE(ErrorContains(err({x, {DType::kF32, {2, 2, 2, 2}}}), "input 1 (grid) has shape [2, 2, 2, 2]"));
  EXPECT_TRUE(ErrorContains(err({x, {DType::kF32, {1, 2, 2}}}), "input 1 (grid) has shape [1, 2, 2]"));
  EXPECT_TRUE(ErrorContains(err({{DType::kI32, {1, 1, 4, 4}}, g}), "input 0 (X) has dtype i32"));
  // Kernel checks, with the shape function skipped.
  Tensor tx = F32({1, 1, 4, 4}, Pattern(16, 3)), tg = F32({1, 2, 2, 3}, Pattern(12, 4));
  EXPECT_TRUE(ErrorContains(RunKernelPlanned("GridSample", {&tx, &tg}, DType::kF32, {1, 1, 2, 2}).status(),
                            "input 1 (grid) has shape [1, 2, 2, 3]"));
  Tensor tg2 = F32({1, 2, 2, 2}, Pattern(8, 4));
  EXPECT_TRUE(ErrorContains(RunKernelPlanned("GridSample", {&tx, &tg2}, DType::kF32, {1, 1, 2, 3}).status(),
                            "output 0 was allocated as f32 [1, 1, 2, 3]"));
  EXPECT_TRUE(ErrorContains(
      RunKernelPlanned("GridSample", {&tx, &tg2}, DType::kF32, {1, 1, 2, 2}, {{"mode", std::string("x")}}).status(),
      "attribute 'mode' is 'x'"));
}

// ===========================================================================
// RoiAlign
// ===========================================================================

// Average or max of bilinear samples on a regular grid in each bin, written
// from the operator text (Mask R-CNN) with the reference's treatment of
// samples outside the map and of max pooling (the largest weighted tap).
std::vector<double> RefRoiAlign(const std::vector<float>& x, const Shape& xs, const std::vector<float>& rois,
                                const std::vector<int64_t>& batch, int64_t oh, int64_t ow, int64_t sampling,
                                double scale, bool half_pixel, bool max_mode) {
  const int64_t c = xs[1], h = xs[2], w = xs[3];
  std::vector<double> out;
  for (size_t r = 0; r < batch.size(); ++r) {
    const double off = half_pixel ? 0.5 : 0;
    const double x1 = rois[r * 4] * scale - off, y1 = rois[r * 4 + 1] * scale - off;
    double rw = rois[r * 4 + 2] * scale - off - x1, rh = rois[r * 4 + 3] * scale - off - y1;
    if (!half_pixel) rw = std::max(rw, 1.0), rh = std::max(rh, 1.0);
    const double bh = rh / static_cast<double>(oh), bw = rw / static_cast<double>(ow);
    const int64_t gh = sampling > 0 ? sampling : static_cast<int64_t>(std::ceil(bh));
    const int64_t gw = sampling > 0 ? sampling : static_cast<int64_t>(std::ceil(bw));
    for (int64_t ch = 0; ch < c; ++ch) {
      auto at = [&](int64_t yi, int64_t xi) { return static_cast<double>(x[((batch[r] * c + ch) * h + yi) * w + xi]); };
      for (int64_t py = 0; py < oh; ++py) {
        for (int64_t px = 0; px < ow; ++px) {
          double sum = 0, best = 0;
          bool first = true;
          for (int64_t iy = 0; iy < gh; ++iy) {
            for (int64_t ix = 0; ix < gw; ++ix) {
              double yy =
                  y1 + static_cast<double>(py) * bh + (static_cast<double>(iy) + 0.5) * bh / static_cast<double>(gh);
              double xx =
                  x1 + static_cast<double>(px) * bw + (static_cast<double>(ix) + 0.5) * bw / static_cast<double>(gw);
              double taps[4] = {0, 0, 0, 0};
              if (!(yy < -1 || yy > static_cast<double>(h) || xx < -1 || xx > static_cast<double>(w))) {
                yy = std::min(std::max(yy, 0.0), static_cast<double>(h - 1));
                xx = std::min(std::max(xx, 0.0), static_cast<double>(w - 1));
                const int64_t y0 = static_cast<int64_t>(yy), x0 = static_cast<int64_t>(xx);
                const int64_t y1i = std::min(y0 + 1, h - 1), x1i = std::min(x0 + 1, w - 1);
                const double ly = yy - static_cast<double>(y0), lx = xx - static_cast<double>(x0);
                taps[0] = (1 - ly) * (1 - lx) * at(y0, x0);
                taps[1] = (1 - ly) * lx * at(y0, x1i);
                taps[2] = ly * (1 - lx) * at(y1i, x0);
                taps[3] = ly * lx * at(y1i, x1i);
              }
              sum += taps[0] + taps[1] + taps[2] + taps[3];
              const double m = std::max(std::max(taps[0], taps[1]), std::max(taps[2], taps[3]));
              best = first ? m : std::max(best, m);
              first = false;
            }
          }
          out.push_back(max_mode ? best : sum / static_cast<double>(std::max<int64_t>(gh * gw, 1)));
        }
      }
    }
  }
  return out;
}

TEST(RoiAlignTest, AgainstReference) {
  const Shape xs = {2, 3, 6, 7};
  const std::vector<float> x = Pattern(Count(xs), 5);
  // Rois inside, partly outside, degenerate (x2 < x1) and tiny.
  const std::vector<float> rois = {0, 0, 6, 5, 1.5f, 2.2f, 4.1f, 3.3f, -2, -1, 3, 9, 5, 4, 2, 1, 3, 3, 3.2f, 3.1f};
  const std::vector<int64_t> batch = {0, 1, 1, 0, 1};
  Tensor tx = F32(xs, x), tr = F32({5, 4}, rois), tb = I64({5}, batch);
  for (const char* ctm : {"half_pixel", "output_half_pixel"}) {
    for (const char* mode : {"avg", "max"}) {
      for (int64_t sampling : {0, 1, 2}) {
        for (double scale : {1.0, 0.5}) {
          SCOPED_TRACE(absl::StrCat(ctm, " ", mode, " sampling ", sampling, " scale ", scale));
          auto out = RunOp("RoiAlign", {&tx, &tr, &tb},
                           {{"coordinate_transformation_mode", std::string(ctm)},
                            {"mode", std::string(mode)},
                            {"output_height", int64_t{3}},
                            {"output_width", int64_t{2}},
                            {"sampling_ratio", sampling},
                            {"spatial_scale", scale}});
          ASSERT_TRUE(out.ok()) << out.status();
          EXPECT_EQ((*out)[0].shape(), (Shape{5, 3, 3, 2}));
          ExpectNear(Values<float>((*out)[0]),
                     RefRoiAlign(x, xs, rois, batch, 3, 2, sampling, scale, std::string(ctm) == "half_pixel",
                                 std::string(mode) == "max"),
                     1e-5);
        }
      }
    }
  }
}

TEST(RoiAlignTest, DefaultsDTypesAndEmpty) {
  const Shape xs = {1, 2, 5, 5};
  const std::vector<float> x = Pattern(Count(xs), 6);
  const std::vector<float> rois = {0.5f, 0.5f, 3.5f, 4};
  Tensor tx = F32(xs, x), tr = F32({1, 4}, rois);
  Tensor tb = I32({1}, {0});
  auto out = RunOp("RoiAlign", {&tx, &tr, &tb});  // 1x1 output, avg, half_pixel, adaptive sampling
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].shape(), (Shape{1, 2, 1, 1}));
  const std::vector<double> want = RefRoiAlign(x, xs, rois, {0}, 1, 1, 0, 1.0, true, false);
  ExpectNear(Values<float>((*out)[0]), want);
  for (DType dtype : {DType::kF64, DType::kF16}) {
    SCOPED_TRACE(DTypeName(dtype));
    Tensor x2 = Tensor::CastOf(tx.view(), dtype).value(), r2 = Tensor::CastOf(tr.view(), dtype).value();
    auto o = RunOp("RoiAlign", {&x2, &r2, &tb});
    ASSERT_TRUE(o.ok()) << o.status();
    EXPECT_EQ((*o)[0].dtype(), dtype);
    ExpectNear(AsFloats((*o)[0]), want, dtype == DType::kF64 ? 1e-6 : 2e-2);
  }
  // No rois; no channels.
  Tensor r0 = F32({0, 4}, {}), b0 = I64({0}, {});
  out = RunOp("RoiAlign", {&tx, &r0, &b0}, {{"output_height", int64_t{2}}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].shape(), (Shape{0, 2, 2, 1}));
  Tensor xc0 = F32({1, 0, 5, 5}, {});
  Tensor b1 = I64({1}, {0});
  out = RunOp("RoiAlign", {&xc0, &tr, &b1});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].shape(), (Shape{1, 0, 1, 1}));
  // An X without pixels gives zeros.
  Tensor xh0 = F32({1, 1, 0, 5}, {});
  out = RunOp("RoiAlign", {&xh0, &tr, &b1});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Values<float>((*out)[0]), (std::vector<float>{0}));
}

TEST(RoiAlignTest, Errors) {
  Tensor tx = F32({2, 1, 4, 4}, Pattern(32, 7)), tr = F32({2, 4}, {0, 0, 2, 2, 1, 1, 3, 3});
  Tensor tb = I64({2}, {0, 2}), tb_neg = I64({2}, {-1, 0}), tb_ok = I64({2}, {0, 1});
  EXPECT_TRUE(ErrorContains(RunOp("RoiAlign", {&tx, &tr, &tb}).status(),
                            "input 2 (batch_indices) holds 2 at [1]; expected an index in [0, 2)"));
  EXPECT_TRUE(ErrorContains(RunOp("RoiAlign", {&tx, &tr, &tb_neg}).status(), "holds -1 at [0]"));
  Tensor tr_nan = F32({2, 4}, {0, 0, 2, std::nanf(""), 1, 1, 3, 3});
  EXPECT_TRUE(ErrorContains(RunOp("RoiAlign", {&tx, &tr_nan, &tb_ok}).status(), "non-finite coordinate in roi 0"));
  Tensor tr_huge = F32({2, 4}, {0, 0, 3e9f, 3e9f, 1, 1, 3, 3});
  EXPECT_TRUE(ErrorContains(RunOp("RoiAlign", {&tx, &tr_huge, &tb_ok}).status(), "samples per output bin; too many"));
  auto err = [](std::vector<SymInput> in, Attrs attrs = {}) {
    return InferSymbolic("RoiAlign", std::move(in), std::move(attrs)).status();
  };
  const SymInput x{DType::kF32, {1, 1, 4, 4}}, r{DType::kF32, {3, 4}}, b{DType::kI64, {3}};
  EXPECT_TRUE(ErrorContains(err({x, r, b}, {{"mode", std::string("sum")}}), "attribute 'mode' is 'sum'"));
  EXPECT_TRUE(ErrorContains(err({x, r, b}, {{"coordinate_transformation_mode", std::string("asymmetric")}}),
                            "attribute 'coordinate_transformation_mode' is 'asymmetric'"));
  EXPECT_TRUE(ErrorContains(err({x, r, b}, {{"output_height", int64_t{0}}}), "attribute 'output_height' is 0"));
  EXPECT_TRUE(ErrorContains(err({x, r, b}, {{"output_width", int64_t{-2}}}), "attribute 'output_width' is -2"));
  EXPECT_TRUE(ErrorContains(err({x, r, b}, {{"sampling_ratio", int64_t{-1}}}), "attribute 'sampling_ratio' is -1"));
  EXPECT_TRUE(ErrorContains(err({{DType::kF32, {1, 4, 4}}, r, b}), "input 0 (X) has shape [1, 4, 4]"));
  EXPECT_TRUE(ErrorContains(err({x, {DType::kF32, {3, 5}}, b}), "input 1 (rois) has shape [3, 5]"));
  EXPECT_TRUE(ErrorContains(err({x, r, {DType::kI64, {2}}}), "input 2 (batch_indices) has shape [2]"));
  EXPECT_TRUE(ErrorContains(err({x, {DType::kF64, {3, 4}}, b}), "input 1 (rois) has dtype f64"));
  EXPECT_TRUE(ErrorContains(err({x, r, {DType::kF32, {3}}}), "input 2 (batch_indices) has dtype f32"));
  const SymDim n = SymDim::Symbol(0), k = SymDim::Symbol(1);
  auto out = InferSymbolic("RoiAlign", {{DType::kF32, {n, 8, 9, 9}}, {DType::kF32, {k, 4}}, {DType::kI64, {k}}},
                           {{"output_height", int64_t{7}}, {"output_width", int64_t{6}}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->shape, (SymShape{k, 8, 7, 6}));
}

// ===========================================================================
// MaxUnpool
// ===========================================================================

TEST(MaxUnpoolTest, UndoesMaxPool) {
  const Shape xs = {2, 3, 6, 4};
  const std::vector<float> x = Pattern(Count(xs), 8);
  Tensor tx = F32(xs, x);
  const Attrs pool = {{"kernel_shape", std::vector<int64_t>{2, 2}}, {"strides", std::vector<int64_t>{2, 2}}};
  auto pooled = RunOp("MaxPool", {&tx}, pool, 2);
  ASSERT_TRUE(pooled.ok()) << pooled.status();
  const Tensor& values = (*pooled)[0];
  const Tensor& indices = (*pooled)[1];
  // (3 - 1) * 2 + 2 = 6 rows, (2 - 1) * 2 + 2 = 4 cols: X's shape, so
  // MaxPool's flat indices into X name the unpooled positions.
  auto out = RunOp("MaxUnpool", {&values, &indices}, pool);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].shape(), xs);
  std::vector<double> want(static_cast<size_t>(Count(xs)), 0.0);
  for (int64_t b = 0; b < 6; ++b) {
    for (int64_t r = 0; r < 3; ++r) {
      for (int64_t c = 0; c < 2; ++c) {
        int64_t best = -1;
        for (int64_t dr = 0; dr < 2; ++dr) {
          for (int64_t dc = 0; dc < 2; ++dc) {
            const int64_t at = (b * 6 + 2 * r + dr) * 4 + 2 * c + dc;
            if (best < 0 || x[at] > x[best]) best = at;
          }
        }
        want[best] = x[best];
      }
    }
  }
  ExpectNear(Values<float>((*out)[0]), want);
  // A larger output_shape: the unpooled tensor sits in its leading corner,
  // as in the ONNX operator text's example.
  Tensor os = I64({4}, {2, 3, 7, 5});
  out = RunOp("MaxUnpool", {&values, &indices, &os}, pool);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].shape(), (Shape{2, 3, 7, 5}));
  std::vector<double> corner(static_cast<size_t>(2 * 3 * 7 * 5), 0.0);
  for (int64_t i = 0; i < Count(xs); ++i) corner[(i / 24) * 35 + (i % 24) / 4 * 5 + i % 4] = want[i];
  ExpectNear(Values<float>((*out)[0]), corner);
}

TEST(MaxUnpoolTest, OperatorTextExamplesPadsAndDTypes) {
  Tensor x = F32({1, 1, 2, 2}, {1, 2, 3, 4}), i = I64({1, 1, 2, 2}, {5, 7, 13, 15});
  const Attrs attrs = {{"kernel_shape", std::vector<int64_t>{2, 2}}, {"strides", std::vector<int64_t>{2, 2}}};
  auto out = RunOp("MaxUnpool", {&x, &i}, attrs);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Values<float>((*out)[0]), (std::vector<float>{0, 0, 0, 0, 0, 1, 0, 2, 0, 0, 0, 0, 0, 3, 0, 4}));
  Tensor os = I32({4}, {1, 1, 5, 5});
  out = RunOp("MaxUnpool", {&x, &i, &os}, attrs);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Values<float>((*out)[0]),
            (std::vector<float>{0, 0, 0, 0, 0, 0, 1, 0, 2, 0, 0, 0, 0, 0, 0, 0, 3, 0, 4, 0, 0, 0, 0, 0, 0}));
  // 1-D with pads and default strides (1): (3 - 1) * 1 - 1 - 0 + 2 = 3.
  Tensor x1 = F32({1, 2, 3}, {1, 2, 3, 4, 5, 6}), i1 = I64({1, 2, 3}, {0, 2, 1, 3, 5, 4});
  out =
      RunOp("MaxUnpool", {&x1, &i1}, {{"kernel_shape", std::vector<int64_t>{2}}, {"pads", std::vector<int64_t>{1, 0}}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].shape(), (Shape{1, 2, 3}));
  EXPECT_EQ(Values<float>((*out)[0]), (std::vector<float>{1, 3, 2, 4, 6, 5}));
  for (DType dtype : {DType::kF64, DType::kF16, DType::kBF16}) {
    Tensor xd = Tensor::CastOf(x.view(), dtype).value();
    auto o = RunOp("MaxUnpool", {&xd, &i}, attrs);
    ASSERT_TRUE(o.ok()) << o.status();
    EXPECT_EQ((*o)[0].dtype(), dtype);
    EXPECT_EQ(AsFloats((*o)[0]), (std::vector<float>{0, 0, 0, 0, 0, 1, 0, 2, 0, 0, 0, 0, 0, 3, 0, 4}));
  }
  // Zero-size batch.
  Tensor x0 = F32({0, 1, 2, 2}, {}), i0 = I64({0, 1, 2, 2}, {});
  out = RunOp("MaxUnpool", {&x0, &i0}, attrs);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].shape(), (Shape{0, 1, 4, 4}));
}

TEST(MaxUnpoolTest, Errors) {
  Tensor x = F32({1, 1, 2, 2}, {1, 2, 3, 4});
  const Attrs attrs = {{"kernel_shape", std::vector<int64_t>{2, 2}}, {"strides", std::vector<int64_t>{2, 2}}};
  Tensor high = I64({1, 1, 2, 2}, {0, 1, 2, 16}), neg = I64({1, 1, 2, 2}, {0, -1, 2, 3});
  EXPECT_TRUE(ErrorContains(RunOp("MaxUnpool", {&x, &high}, attrs).status(),
                            "input 1 (I) holds 16 at flat position 3; expected an index in [0, 16)"));
  EXPECT_TRUE(ErrorContains(RunOp("MaxUnpool", {&x, &neg}, attrs).status(), "holds -1 at flat position 1"));
  Tensor i = I64({1, 1, 2, 2}, {0, 1, 2, 3});
  Tensor small = I64({4}, {1, 1, 3, 5}), wrong_c = I64({4}, {1, 2, 4, 4}), short_os = I64({3}, {1, 1, 4});
  EXPECT_TRUE(
      ErrorContains(RunOp("MaxUnpool", {&x, &i, &small}, attrs).status(), "each spatial length >= the unpooled shape"));
  EXPECT_TRUE(ErrorContains(RunOp("MaxUnpool", {&x, &i, &wrong_c}, attrs).status(), "input 2 (output_shape) is"));
  EXPECT_TRUE(ErrorContains(RunOp("MaxUnpool", {&x, &i, &short_os}, attrs).status(),
                            "input 2 (output_shape) has shape [3]; expected [4]"));
  Tensor i_bad = I64({1, 1, 4}, {0, 1, 2, 3}), i32 = I32({1, 1, 2, 2}, {0, 1, 2, 3});
  EXPECT_TRUE(ErrorContains(RunOp("MaxUnpool", {&x, &i_bad}, attrs).status(), "input 1 (I) has shape [1, 1, 4]"));
  EXPECT_TRUE(ErrorContains(RunOp("MaxUnpool", {&x, &i32}, attrs).status(), "input 1 (I) has dtype i32"));
  EXPECT_TRUE(ErrorContains(RunOp("MaxUnpool", {&x, &i}).status(), "attribute 'kernel_shape' is required"));
  EXPECT_TRUE(ErrorContains(RunOp("MaxUnpool", {&x, &i}, {{"kernel_shape", std::vector<int64_t>{2}}}).status(),
                            "attribute 'kernel_shape' has 1 values; expected 2"));
  EXPECT_TRUE(ErrorContains(RunOp("MaxUnpool", {&x, &i}, {{"kernel_shape", std::vector<int64_t>{2, 0}}}).status(),
                            "attribute 'kernel_shape' is [2, 0]"));
  EXPECT_TRUE(
      ErrorContains(RunOp("MaxUnpool", {&x, &i},
                          {{"kernel_shape", std::vector<int64_t>{2, 2}}, {"strides", std::vector<int64_t>{0, 1}}})
                        .status(),
                    "attribute 'strides' is [0, 1]"));
  EXPECT_TRUE(ErrorContains(
      RunOp("MaxUnpool", {&x, &i}, {{"kernel_shape", std::vector<int64_t>{2, 2}}, {"pads", std::vector<int64_t>{0, 1}}})
          .status(),
      "attribute 'pads' has 2 values; expected 4"));
  EXPECT_TRUE(
      ErrorContains(RunOp("MaxUnpool", {&x, &i},
                          {{"kernel_shape", std::vector<int64_t>{1, 1}}, {"pads", std::vector<int64_t>{1, 1, 1, 1}}})
                        .status(),
                    "unpools to length 0"));
  Tensor x1 = F32({1, 4}, {1, 2, 3, 4}), i1 = I64({1, 4}, {0, 1, 2, 3});
  EXPECT_TRUE(ErrorContains(RunOp("MaxUnpool", {&x1, &i1}, attrs).status(), "expected rank >= 3"));
  // Symbolic: spatial dims unknown stay unknown; output_shape unknown gives
  // unknown dims of X's rank.
  const SymDim s = SymDim::Symbol(0);
  auto out = InferSymbolic("MaxUnpool", {{DType::kF32, {s, 2, s, 3}}, {DType::kI64, {s, 2, s, 3}}}, attrs);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->shape[0], s);
  EXPECT_TRUE(out->shape[2].is_unknown());
  EXPECT_EQ(out->shape[3], SymDim(6));
  out =
      InferSymbolic("MaxUnpool", {{DType::kF32, {1, 2, 3, 3}}, {DType::kI64, {1, 2, 3, 3}}, {DType::kI64, {4}}}, attrs);
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->shape.size(), 4u);
  EXPECT_TRUE(out->shape[3].is_unknown());
}

// ===========================================================================
// DFT
// ===========================================================================

// Direct DFT of one line.
std::vector<Complex> RefDft(const std::vector<Complex>& in, int64_t length, bool inverse) {
  std::vector<Complex> sig(static_cast<size_t>(length));
  for (int64_t k = 0; k < length && k < static_cast<int64_t>(in.size()); ++k) sig[k] = in[k];
  std::vector<Complex> out(static_cast<size_t>(length));
  const double sign = inverse ? 1 : -1;
  for (int64_t m = 0; m < length; ++m) {
    for (int64_t k = 0; k < length; ++k) {
      out[m] += sig[k] *
                std::polar(1.0, sign * 2 * std::numbers::pi * static_cast<double>(m * k) / static_cast<double>(length));
    }
    if (inverse) out[m] /= static_cast<double>(length);
  }
  return out;
}

// The DFT along `axis` of x [..., parts], output as interleaved values.
std::vector<double> RefDftTensor(const std::vector<float>& x, const Shape& xs, int axis, int64_t length, bool inverse,
                                 bool onesided) {
  const int64_t parts = xs.back();
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < axis; ++d) outer *= xs[d];
  for (size_t d = axis + 1; d + 1 < xs.size(); ++d) inner *= xs[d];
  const int64_t n = xs[axis];
  const bool irfft = onesided && inverse;
  const int64_t out_len = onesided && !inverse ? length / 2 + 1 : length;
  const int64_t out_parts = irfft ? 1 : 2;
  std::vector<double> out(static_cast<size_t>(outer * out_len * inner * out_parts));
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      std::vector<Complex> line(static_cast<size_t>(n));
      for (int64_t k = 0; k < n; ++k) {
        const int64_t at = ((o * n + k) * inner + i) * parts;
        line[k] = Complex(x[at], parts == 2 ? x[at + 1] : 0.0f);
      }
      if (irfft) {
        // Hermitian extension of the first length / 2 + 1 bins.
        std::vector<Complex> full(static_cast<size_t>(length));
        for (int64_t k = 0; k <= length / 2 && k < n; ++k) full[k] = line[k];
        full[0] = full[0].real();
        if (length % 2 == 0) full[length / 2] = full[length / 2].real();
        for (int64_t k = 1; k < (length + 1) / 2; ++k) full[length - k] = std::conj(full[k]);
        line = full;
      }
      const std::vector<Complex> y = RefDft(line, length, inverse);
      for (int64_t m = 0; m < out_len; ++m) {
        const int64_t at = ((o * out_len + m) * inner + i) * out_parts;
        out[at] = y[m].real();
        if (out_parts == 2) out[at + 1] = y[m].imag();
      }
    }
  }
  return out;
}

TEST(DftTest, AxesLengthsAndDirections) {
  for (const Shape& xs : std::vector<Shape>{{2, 5, 3, 1}, {2, 4, 3, 2}, {1, 6, 2}}) {
    const std::vector<float> x = Pattern(Count(xs), 9);
    Tensor tx = F32(xs, x);
    const int rank = static_cast<int>(xs.size());
    for (int axis = 0; axis <= rank - 2; ++axis) {
      for (int64_t length : {int64_t{-1}, int64_t{3}, int64_t{8}}) {
        for (bool inverse : {false, true}) {
          for (bool onesided : {false, true}) {
            // IRFFT takes a spectrum, and an axis of one bin needs a length.
            if (onesided && inverse && (xs.back() == 1 || (xs[axis] == 1 && length < 0))) continue;
            SCOPED_TRACE(absl::StrCat("shape ", xs.size(), "/", xs.back(), " axis ", axis, " length ", length,
                                      " inverse ", inverse, " onesided ", onesided));
            Tensor tl = I64({}, {length});
            std::vector<const Tensor*> in = {&tx};
            if (length > 0) in.push_back(&tl);
            // A negative axis names the same dim.
            const int64_t axis_attr = axis % 2 == 1 ? axis - rank : axis;
            auto out =
                RunOp("DFT", in, {{"axis", axis_attr}, {"inverse", int64_t{inverse}}, {"onesided", int64_t{onesided}}});
            ASSERT_TRUE(out.ok()) << out.status();
            const int64_t l = length > 0 ? length : (onesided && inverse ? 2 * (xs[axis] - 1) : xs[axis]);
            Shape want_shape = xs;
            want_shape[axis] = onesided && !inverse ? l / 2 + 1 : l;
            want_shape.back() = onesided && inverse ? 1 : 2;
            EXPECT_EQ((*out)[0].shape(), want_shape);
            ExpectNear(Values<float>((*out)[0]), RefDftTensor(x, xs, axis, l, inverse, onesided), 1e-5);
          }
        }
      }
    }
  }
}

TEST(DftTest, RoundTripsAndDefaults) {
  // Default axis 1; ifft(fft(x)) == x; irfft(rfft(x)) == x for even and odd
  // lengths (odd needs dft_length).
  for (int64_t n : {6, 7}) {
    const Shape xs = {2, n, 1};
    const std::vector<float> x = Pattern(Count(xs), 10);
    Tensor tx = F32(xs, x);
    auto spec = RunOp("DFT", {&tx});
    ASSERT_TRUE(spec.ok()) << spec.status();
    EXPECT_EQ((*spec)[0].shape(), (Shape{2, n, 2}));
    auto back = RunOp("DFT", {&(*spec)[0]}, {{"inverse", int64_t{1}}});
    ASSERT_TRUE(back.ok()) << back.status();
    const std::vector<float> b = Values<float>((*back)[0]);
    for (int64_t i = 0; i < 2 * n; ++i) {
      EXPECT_NEAR(b[2 * i], x[i], 1e-5);
      EXPECT_NEAR(b[2 * i + 1], 0, 1e-5);
    }
    auto half = RunOp("DFT", {&tx}, {{"onesided", int64_t{1}}});
    ASSERT_TRUE(half.ok()) << half.status();
    EXPECT_EQ((*half)[0].shape(), (Shape{2, n / 2 + 1, 2}));
    Tensor tl = I32({1}, {static_cast<int32_t>(n)});
    auto real = RunOp("DFT", {&(*half)[0], &tl}, {{"inverse", int64_t{1}}, {"onesided", int64_t{1}}});
    ASSERT_TRUE(real.ok()) << real.status();
    EXPECT_EQ((*real)[0].shape(), xs);
    std::vector<double> want(x.begin(), x.end());
    ExpectNear(Values<float>((*real)[0]), want, 1e-5);
  }
}

TEST(DftTest, DTypesAndEmpty) {
  const Shape xs = {1, 8, 2};
  const std::vector<float> x = Pattern(Count(xs), 11);
  const std::vector<double> want = RefDftTensor(x, xs, 1, 8, false, false);
  Tensor tx = F32(xs, x);
  for (DType dtype : {DType::kF64, DType::kF16, DType::kBF16}) {
    SCOPED_TRACE(DTypeName(dtype));
    Tensor xd = Tensor::CastOf(tx.view(), dtype).value();
    auto out = RunOp("DFT", {&xd});
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ((*out)[0].dtype(), dtype);
    ExpectNear(AsFloats((*out)[0]), want, dtype == DType::kF64 ? 1e-6 : (dtype == DType::kF16 ? 5e-3 : 3e-2));
  }
  // A zero-size batch; an empty axis with dft_length (all zeros).
  Tensor x0 = F32({0, 4, 1}, {});
  auto out = RunOp("DFT", {&x0});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].shape(), (Shape{0, 4, 2}));
  Tensor xe = F32({2, 0, 1}, {}), l3 = I64({}, {3});
  out = RunOp("DFT", {&xe, &l3});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].shape(), (Shape{2, 3, 2}));
  for (float v : Values<float>((*out)[0])) EXPECT_EQ(v, 0.0f);
}

TEST(DftTest, ShapeFunctionAndErrors) {
  const SymDim b = SymDim::Symbol(0), n = SymDim::Symbol(1);
  auto out = InferSymbolic("DFT", {{DType::kF32, {b, n, 1}}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->shape, (SymShape{b, n, 2}));
  out = InferSymbolic("DFT", {{DType::kF32, {b, n, 2}}}, {{"onesided", int64_t{1}}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(out->shape[1].is_unknown());
  out = InferSymbolic("DFT", {{DType::kF32, {b, 10, 2}}, {DType::kI64, {}}});  // dft_length not known
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(out->shape[1].is_unknown());
  EXPECT_EQ(out->shape[2], SymDim(2));
  Tensor l = I64({}, {16});
  out = InferSymbolic("DFT", {{DType::kF32, {b, n, 2}}, {DType::kI64, {}, &l}},
                      {{"onesided", int64_t{1}}, {"inverse", int64_t{1}}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->shape, (SymShape{b, 16, 1}));
  auto err = [](std::vector<SymInput> in, Attrs attrs = {}) {
    return InferSymbolic("DFT", std::move(in), std::move(attrs)).status();
  };
  const SymInput x{DType::kF32, {1, 8, 1}};
  EXPECT_TRUE(ErrorContains(err({x}, {{"axis", int64_t{-1}}}), "attribute 'axis' is -1"));
  EXPECT_TRUE(ErrorContains(err({x}, {{"axis", int64_t{2}}}), "attribute 'axis' is 2"));
  EXPECT_TRUE(ErrorContains(err({x}, {{"axis", int64_t{-4}}}), "attribute 'axis' is -4"));
  EXPECT_TRUE(ErrorContains(err({x}, {{"inverse", int64_t{2}}}), "attribute 'inverse' is 2"));
  EXPECT_TRUE(ErrorContains(err({x}, {{"onesided", int64_t{-1}}}), "attribute 'onesided' is -1"));
  EXPECT_TRUE(ErrorContains(err({{DType::kF32, {1, 8, 3}}}), "input 0 (input) has shape [1, 8, 3]"));
  EXPECT_TRUE(ErrorContains(err({{DType::kF32, {8}}}), "input 0 (input) has shape [8]"));
  EXPECT_TRUE(ErrorContains(err({{DType::kI32, {1, 8, 1}}}), "input 0 (input) has dtype i32"));
  EXPECT_TRUE(ErrorContains(err({x, {DType::kF32, {}}}), "input 1 (dft_length) has dtype f32"));
  EXPECT_TRUE(ErrorContains(err({x, {DType::kI64, {2}}}), "input 1 (dft_length) has shape [2]"));
  Tensor zero = I64({}, {0}), huge = I64({}, {int64_t{1} << 40});
  EXPECT_TRUE(ErrorContains(err({x, {DType::kI64, {}, &zero}}), "input 1 (dft_length) is 0"));
  EXPECT_TRUE(ErrorContains(err({x, {DType::kI64, {}, &huge}}), "dft_length is 1099511627776; expected <="));
  // IRFFT of a single bin has no default length.
  EXPECT_TRUE(ErrorContains(err({{DType::kF32, {1, 1, 2}}}, {{"onesided", int64_t{1}}, {"inverse", int64_t{1}}}),
                            "which gives dft_length 0"));
  // The kernel's own checks, with the shape function skipped.
  Tensor tx = F32({1, 4, 1}, {1, 2, 3, 4});
  EXPECT_TRUE(ErrorContains(RunKernelPlanned("DFT", {&tx, &zero}, DType::kF32, {1, 4, 2}).status(),
                            "input 1 (dft_length) is 0"));
  EXPECT_TRUE(ErrorContains(RunKernelPlanned("DFT", {&tx}, DType::kF32, {1, 5, 2}).status(),
                            "output 0 was allocated as f32 [1, 5, 2]"));
  EXPECT_TRUE(ErrorContains(RunKernelPlanned("DFT", {&tx}, DType::kF32, {1, 4, 2}, {{"axis", int64_t{-1}}}).status(),
                            "attribute 'axis' is -1"));
}

// ===========================================================================
// STFT
// ===========================================================================

std::vector<double> RefStft(const std::vector<float>& sig, const Shape& ss, int64_t step, int64_t fl,
                            const std::vector<float>* window, bool onesided) {
  const int64_t batch = ss[0], len = ss[1], parts = ss[2];
  const int64_t frames = (len - fl) / step + 1, bins = onesided ? fl / 2 + 1 : fl;
  std::vector<double> out;
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t f = 0; f < frames; ++f) {
      std::vector<Complex> frame(static_cast<size_t>(fl));
      for (int64_t t = 0; t < fl; ++t) {
        const int64_t at = (b * len + f * step + t) * parts;
        const double w = window != nullptr ? (*window)[t] : 1.0;
        frame[t] = Complex(sig[at], parts == 2 ? sig[at + 1] : 0.0f) * w;
      }
      const std::vector<Complex> y = RefDft(frame, fl, false);
      for (int64_t m = 0; m < bins; ++m) out.insert(out.end(), {y[m].real(), y[m].imag()});
    }
  }
  return out;
}

TEST(StftTest, AgainstReference) {
  for (const Shape& ss : std::vector<Shape>{{2, 20, 1}, {1, 17, 2}}) {
    const std::vector<float> sig = Pattern(Count(ss), 12);
    Tensor ts = F32(ss, sig);
    std::vector<float> hann;
    for (int t = 0; t < 8; ++t) hann.push_back(static_cast<float>(0.5 - 0.5 * std::cos(2 * std::numbers::pi * t / 8)));
    Tensor tw = F32({8}, hann);
    for (int64_t step : {1, 3, 8}) {
      for (bool onesided : {false, true}) {
        SCOPED_TRACE(absl::StrCat("parts ", ss[2], " step ", step, " onesided ", onesided));
        Tensor tstep = I64({}, {step}), tfl = I32({}, {8});
        const Attrs attrs = {{"onesided", int64_t{onesided}}};
        // Window alone; frame_length alone; both.
        auto a = RunOp("STFT", {&ts, &tstep, &tw}, attrs);
        ASSERT_TRUE(a.ok()) << a.status();
        const int64_t frames = (ss[1] - 8) / step + 1;
        EXPECT_EQ((*a)[0].shape(), (Shape{ss[0], frames, onesided ? 5 : 8, 2}));
        ExpectNear(Values<float>((*a)[0]), RefStft(sig, ss, step, 8, &hann, onesided), 1e-5);
        auto b = RunOp("STFT", {&ts, &tstep, nullptr, &tfl}, attrs);
        ASSERT_TRUE(b.ok()) << b.status();
        ExpectNear(Values<float>((*b)[0]), RefStft(sig, ss, step, 8, nullptr, onesided), 1e-5);
        auto c = RunOp("STFT", {&ts, &tstep, &tw, &tfl}, attrs);
        ASSERT_TRUE(c.ok()) << c.status();
        EXPECT_EQ(Values<float>((*c)[0]), Values<float>((*a)[0]));
      }
    }
  }
}

TEST(StftTest, DefaultsDTypesAndEmpty) {
  const Shape ss = {1, 10, 1};
  const std::vector<float> sig = Pattern(10, 13);
  Tensor ts = F32(ss, sig), step = I64({}, {2});
  // Neither window nor frame_length: one frame of the whole signal, onesided.
  auto out = RunOp("STFT", {&ts, &step});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].shape(), (Shape{1, 1, 6, 2}));
  const std::vector<double> want = RefStft(sig, ss, 2, 10, nullptr, true);
  ExpectNear(Values<float>((*out)[0]), want);
  for (DType dtype : {DType::kF64, DType::kF16}) {
    SCOPED_TRACE(DTypeName(dtype));
    Tensor sd = Tensor::CastOf(ts.view(), dtype).value();
    auto o = RunOp("STFT", {&sd, &step});
    ASSERT_TRUE(o.ok()) << o.status();
    EXPECT_EQ((*o)[0].dtype(), dtype);
    ExpectNear(AsFloats((*o)[0]), want, dtype == DType::kF64 ? 1e-6 : 5e-3);
  }
  Tensor s0 = F32({0, 10, 1}, {}), fl = I64({}, {4});
  out = RunOp("STFT", {&s0, &step, nullptr, &fl});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].shape(), (Shape{0, 4, 3, 2}));
}

TEST(StftTest, ShapeFunctionAndErrors) {
  const SymDim b = SymDim::Symbol(0);
  auto out = InferSymbolic("STFT", {{DType::kF32, {b, 128, 1}}, {DType::kI64, {}}, {DType::kF32, {16}}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->shape[0], b);
  EXPECT_TRUE(out->shape[1].is_unknown());  // frame_step not known
  EXPECT_EQ(out->shape[2], SymDim(9));
  Tensor step8 = I64({}, {8});
  out = InferSymbolic("STFT", {{DType::kF32, {b, 128, 1}}, {DType::kI64, {}, &step8}, {DType::kF32, {16}}},
                      {{"onesided", int64_t{0}}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->shape, (SymShape{b, 15, 16, 2}));
  Tensor ts = F32({1, 10, 1}, Pattern(10, 14));
  Tensor step0 = I64({}, {0}), step1 = I64({}, {1}), fl20 = I64({}, {20}), fl4 = I64({}, {4}), fl0 = I64({}, {0});
  Tensor w5 = F32({5}, Pattern(5, 1)), w5d = MakeTensor<double>(DType::kF64, {5}, std::vector<double>(5, 1.0));
  Tensor w2d = F32({1, 5}, Pattern(5, 1)), steps2 = I64({2}, {1, 2}), fstep = F32({}, {1});
  EXPECT_TRUE(ErrorContains(RunOp("STFT", {&ts, &step0}).status(), "frame_step is 0; expected >= 1"));
  EXPECT_TRUE(ErrorContains(RunOp("STFT", {&ts, &step1, nullptr, &fl20}).status(),
                            "frame_length 20 is longer than the signal (10 samples)"));
  EXPECT_TRUE(ErrorContains(RunOp("STFT", {&ts, &step1, nullptr, &fl0}).status(), "frame_length is 0"));
  EXPECT_TRUE(ErrorContains(RunOp("STFT", {&ts, &step1, &w5, &fl4}).status(),
                            "input 3 (frame_length) is 4 but input 2 (window) has 5 elements"));
  EXPECT_TRUE(ErrorContains(RunOp("STFT", {&ts, &step1, &w5d}).status(), "input 2 (window) has dtype f64"));
  EXPECT_TRUE(ErrorContains(RunOp("STFT", {&ts, &step1, &w2d}).status(), "input 2 (window) has shape [1, 5]"));
  EXPECT_TRUE(ErrorContains(RunOp("STFT", {&ts, &steps2}).status(), "input 1 (frame_step) has shape [2]"));
  EXPECT_TRUE(ErrorContains(RunOp("STFT", {&ts, &fstep}).status(), "input 1 (frame_step) has dtype f32"));
  Tensor s3 = F32({1, 10, 3}, Pattern(30, 1)), s2d = F32({10, 1}, Pattern(10, 1));
  EXPECT_TRUE(ErrorContains(RunOp("STFT", {&s3, &step1}).status(), "input 0 (signal) has shape [1, 10, 3]"));
  EXPECT_TRUE(ErrorContains(RunOp("STFT", {&s2d, &step1}).status(), "input 0 (signal) has shape [10, 1]"));
  EXPECT_TRUE(
      ErrorContains(RunOp("STFT", {&ts, &step1}, {{"onesided", int64_t{5}}}).status(), "attribute 'onesided' is 5"));
  // The kernel's checks when the shape function could not see the values.
  EXPECT_TRUE(
      ErrorContains(RunKernelPlanned("STFT", {&ts, &step0}, DType::kF32, {1, 1, 6, 2}).status(), "frame_step is 0"));
  EXPECT_TRUE(ErrorContains(RunKernelPlanned("STFT", {&ts, &step1, &w5, &fl4}, DType::kF32, {1, 7, 3, 2}).status(),
                            "input 3 (frame_length) is 4 but input 2 (window) has 5 elements"));
}

// ===========================================================================
// MelWeightMatrix
// ===========================================================================

std::vector<double> RefMel(int64_t mel_bins, int64_t dft_length, int64_t sample_rate, double lower, double upper) {
  const int64_t rows = dft_length / 2 + 1;
  auto to_mel = [](double hz) { return 2595 * std::log10(1 + hz / 700); };
  auto to_hz = [](double mel) { return 700 * (std::pow(10.0, mel / 2595) - 1); };
  const double lo = to_mel(lower), step = (to_mel(upper) - lo) / static_cast<double>(mel_bins + 2);
  std::vector<int64_t> pts;
  for (int64_t i = 0; i < mel_bins + 2; ++i) {
    pts.push_back(
        static_cast<int64_t>(std::floor(static_cast<double>(dft_length + 1) *
                                        to_hz(lo + step * static_cast<double>(i)) / static_cast<double>(sample_rate))));
  }
  std::vector<double> w(static_cast<size_t>(rows * mel_bins), 0.0);
  for (int64_t i = 0; i < mel_bins; ++i) {
    for (int64_t j = 0; j < rows; ++j) {
      if (pts[i + 1] == pts[i] && j == pts[i + 1]) w[j * mel_bins + i] = 1;
      if (j >= pts[i] && j <= pts[i + 1] && pts[i + 1] > pts[i]) {
        w[j * mel_bins + i] = static_cast<double>(j - pts[i]) / static_cast<double>(pts[i + 1] - pts[i]);
      }
      if (j >= pts[i + 1] && j < pts[i + 2]) {
        w[j * mel_bins + i] = static_cast<double>(pts[i + 2] - j) / static_cast<double>(pts[i + 2] - pts[i + 1]);
      }
    }
  }
  return w;
}

absl::StatusOr<std::vector<Tensor>> RunMel(int64_t mel_bins, int64_t dft_length, int64_t sample_rate, float lower,
                                           float upper, Attrs attrs = {}) {
  Tensor a = I32({}, {static_cast<int32_t>(mel_bins)}), b = I64({}, {dft_length}),
         c = I32({}, {static_cast<int32_t>(sample_rate)});
  Tensor d = F32({}, {lower}), e = F32({}, {upper});
  return RunOp("MelWeightMatrix", {&a, &b, &c, &d, &e}, std::move(attrs));
}

TEST(MelWeightMatrixTest, AgainstReference) {
  struct Case {
    int64_t mel_bins, dft_length, sample_rate;
    float lower, upper;
  };
  for (const Case& c : std::vector<Case>{{8, 16, 8192, 0, 4096},
                                         {10, 64, 16000, 20, 8000},
                                         {5, 33, 1000, 100, 300},
                                         {3, 8, 100, 10, 10},
                                         {0, 16, 100, 0, 50}}) {
    SCOPED_TRACE(absl::StrCat(c.mel_bins, " ", c.dft_length, " ", c.sample_rate, " ", c.lower, " ", c.upper));
    auto out = RunMel(c.mel_bins, c.dft_length, c.sample_rate, c.lower, c.upper);
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ((*out)[0].dtype(), DType::kF32);
    EXPECT_EQ((*out)[0].shape(), (Shape{c.dft_length / 2 + 1, c.mel_bins}));
    ExpectNear(Values<float>((*out)[0]), RefMel(c.mel_bins, c.dft_length, c.sample_rate, c.lower, c.upper), 1e-6);
  }
  // The ONNX test's first rows: bins 0 and 1 peak in the first spectrogram row.
  auto out = RunMel(8, 16, 8192, 0, 4096);
  ASSERT_TRUE(out.ok());
  const std::vector<float> v = Values<float>((*out)[0]);
  EXPECT_EQ(std::vector<float>(v.begin(), v.begin() + 8), (std::vector<float>{1, 1, 0, 0, 0, 0, 0, 0}));
}

TEST(MelWeightMatrixTest, OutputDataTypes) {
  const std::vector<double> want = RefMel(6, 32, 1000, 0, 500);
  for (DType dtype : {DType::kF64, DType::kF16, DType::kBF16, DType::kI32}) {
    SCOPED_TRACE(DTypeName(dtype));
    auto out = RunMel(6, 32, 1000, 0, 500, {{"output_datatype", static_cast<int64_t>(dtype)}});
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ((*out)[0].dtype(), dtype);
    if (dtype == DType::kI32) {
      const std::vector<int32_t> v = Values<int32_t>((*out)[0]);
      for (size_t i = 0; i < v.size(); ++i) EXPECT_EQ(v[i], static_cast<int32_t>(want[i]));
    } else {
      ExpectNear(AsFloats((*out)[0]), want, dtype == DType::kF64 ? 1e-9 : 1e-2);
    }
  }
}

TEST(MelWeightMatrixTest, Errors) {
  EXPECT_TRUE(ErrorContains(RunMel(8, 16, 8192, 0, 8192).status(), "past the 9 bins of dft_length 16"));
  EXPECT_TRUE(ErrorContains(RunMel(-1, 16, 8192, 0, 10).status(), "input 0 (num_mel_bins) is -1"));
  EXPECT_TRUE(ErrorContains(RunMel(4, 0, 8192, 0, 10).status(), "input 1 (dft_length) is 0"));
  EXPECT_TRUE(ErrorContains(RunMel(4, 16, 0, 0, 10).status(), "input 2 (sample_rate) is 0"));
  EXPECT_TRUE(ErrorContains(RunMel(4, 16, 100, 30, 10).status(), "expected 0 <= lower_edge_hertz <= upper_edge_hertz"));
  EXPECT_TRUE(ErrorContains(RunMel(4, 16, 100, -5, 10).status(), "expected 0 <= lower_edge_hertz"));
  EXPECT_TRUE(ErrorContains(RunMel(4, 16, 100, 0, std::nanf("")).status(), "expected 0 <= lower_edge_hertz"));
  EXPECT_TRUE(ErrorContains(RunMel(4, 16, 100, 0, 1e30f).status(), "past the 9 bins"));
  EXPECT_TRUE(ErrorContains(RunMel(4, 16, 100, 0, 10, {{"output_datatype", int64_t{9}}}).status(),
                            "attribute 'output_datatype' is 9"));
  auto err = [](std::vector<SymInput> in) { return InferSymbolic("MelWeightMatrix", std::move(in)).status(); };
  const SymInput i{DType::kI64, {}}, f{DType::kF32, {}};
  EXPECT_TRUE(ErrorContains(err({f, i, i, f, f}), "input 0 (num_mel_bins) has dtype f32"));
  EXPECT_TRUE(ErrorContains(err({i, i, i, i, f}), "input 3 (lower_edge_hertz) has dtype i64"));
  EXPECT_TRUE(ErrorContains(err({i, {DType::kI64, {3}}, i, f, f}), "input 1 (dft_length) has shape [3]"));
  auto out = InferSymbolic("MelWeightMatrix", {i, i, i, f, f});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(out->shape[0].is_unknown() && out->shape[1].is_unknown());
  EXPECT_EQ(out->dtype, DType::kF32);
}

}  // namespace
}  // namespace grove::testing
