// Resize against a direct port of the ONNX reference implementation
// (onnx/reference/ops/op_resize.py): per output element, the recursion over
// dims, the neighbour search over an edge-padded row sorted by distance, and
// the coefficient functions, all in double. The kernel is organised quite
// differently (per-dim tap tables, one pass per dim), so agreement means
// something. Also the ONNX backend examples, every dtype, axes and
// keep_aspect_ratio_policy, antialias, the errors, and symbolic shapes.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test/model_test_util.h"
#include "test/op_test_util.h"
#include "test/ops/symbolic_shape_util.h"

namespace grove::testing {
namespace {

using ir::SymDim;
using ir::SymShape;
using Shape = std::vector<int64_t>;
using Attrs = std::vector<std::pair<std::string, AttrValue>>;

struct RefOptions {
  std::string mode = "nearest";
  std::string coord = "half_pixel";
  std::string nearest = "round_prefer_floor";
  double cubic_a = -0.75;
  bool exclude_outside = false;
  double extrapolation = 0.0;
  bool antialias = false;
  std::vector<double> roi;  // 2 * rank (f64 arithmetic), or empty
};

// get_neighbor_idxes: the n indices of [0, limit) nearest to x, ties to the
// smaller, in ascending order.
std::vector<int64_t> NeighborIdxes(double x, int64_t n, int64_t limit) {
  std::vector<int64_t> idx(static_cast<size_t>(limit));
  std::iota(idx.begin(), idx.end(), 0);
  std::stable_sort(idx.begin(), idx.end(), [x](int64_t a, int64_t b) {
    const double da = std::fabs(x - static_cast<double>(a)), db = std::fabs(x - static_cast<double>(b));
    return da != db ? da < db : a < b;
  });
  idx.resize(static_cast<size_t>(n));
  std::sort(idx.begin(), idx.end());
  return idx;
}

std::vector<double> Coeffs(const RefOptions& o, double ratio, double scale) {
  const double A = o.cubic_a;
  if (o.mode == "nearest") {
    if (ratio == std::floor(ratio)) return {0, 1};
    if (o.nearest == "round_prefer_floor") return {ratio <= 0.5 ? 1.0 : 0.0, ratio > 0.5 ? 1.0 : 0.0};
    if (o.nearest == "round_prefer_ceil") return {ratio < 0.5 ? 1.0 : 0.0, ratio >= 0.5 ? 1.0 : 0.0};
    if (o.nearest == "floor") return {1, 0};
    return {0, 1};
  }
  if (o.antialias) {
    const double s = std::min(scale, 1.0);
    std::vector<double> c;
    if (o.mode == "linear") {
      const int64_t start = static_cast<int64_t>(std::floor(-1 / s) + 1);
      const int64_t footprint = 2 - 2 * start;
      for (int64_t i = start; i < start + footprint; ++i) {
        c.push_back(std::clamp(1 - std::fabs((static_cast<double>(i) - ratio) * s), 0.0, 1.0));
      }
    } else {
      auto k = [A](double x) {
        x = std::fabs(x);
        if (x <= 1) return (A + 2) * x * x * x - (A + 3) * x * x + 1;
        if (x < 2) return A * x * x * x - 5 * A * x * x + 8 * A * x - 4 * A;
        return 0.0;
      };
      const int64_t start = static_cast<int64_t>(std::floor(-2 / s) + 1);
      for (int64_t i = start; i < 2 - start; ++i) c.push_back(k(s * (static_cast<double>(i) - ratio)));
    }
    const double sum = std::accumulate(c.begin(), c.end(), 0.0);
    for (double& v : c) v /= sum;
    return c;
  }
  if (o.mode == "linear") return {1 - ratio, ratio};
  const double r = ratio;
  return {((A * (r + 1) - 5 * A) * (r + 1) + 8 * A) * (r + 1) - 4 * A, ((A + 2) * r - (A + 3)) * r * r + 1,
          ((A + 2) * (1 - r) - (A + 3)) * (1 - r) * (1 - r) + 1,
          ((A * ((1 - r) + 1) - 5 * A) * ((1 - r) + 1) + 8 * A) * ((1 - r) + 1) - 4 * A};
}

// interpolate_1d_with_x.
double Interpolate1D(const std::vector<double>& data, double scale, int64_t x, int64_t out_int, double roi_start,
                     double roi_end, const RefOptions& o) {
  const double in = static_cast<double>(data.size());
  const double out_w = scale * in;
  const double xd = static_cast<double>(x);
  double c;
  if (o.coord == "align_corners") {
    c = out_w == 1 ? 0 : xd * (in - 1) / (out_w - 1);
  } else if (o.coord == "asymmetric") {
    c = xd / scale;
  } else if (o.coord == "tf_crop_and_resize") {
    c = out_w == 1 ? (roi_end - roi_start) * (in - 1) / 2 : xd * (roi_end - roi_start) * (in - 1) / (out_w - 1);
    c += roi_start * (in - 1);
    if (c < 0 || c > in - 1) return o.extrapolation;
  } else if (o.coord == "pytorch_half_pixel") {
    c = out_w == 1 ? -0.5 : (xd + 0.5) / scale - 0.5;
  } else if (o.coord == "tf_half_pixel_for_nn") {
    c = (xd + 0.5) / scale;
  } else if (o.coord == "half_pixel_symmetric") {
    const double adjustment = static_cast<double>(out_int) / out_w;
    c = in / 2 * (1 - adjustment) + (xd + 0.5) / scale - 0.5;
  } else {
    c = (xd + 0.5) / scale - 0.5;
  }
  const double c_int = std::floor(c);
  const double ratio = c == c_int ? 1.0 : c - c_int;
  std::vector<double> coeffs = Coeffs(o, ratio, scale);
  const int64_t n = static_cast<int64_t>(coeffs.size());
  // get_neighbor: pad by ceil(n / 2) in edge mode, take the n nearest.
  const int64_t pad = (n + 1) / 2;
  std::vector<double> padded;
  for (int64_t i = -pad; i < static_cast<int64_t>(data.size()) + pad; ++i) {
    padded.push_back(data[std::clamp<int64_t>(i, 0, static_cast<int64_t>(data.size()) - 1)]);
  }
  const std::vector<int64_t> idx =
      NeighborIdxes(c + static_cast<double>(pad), n, static_cast<int64_t>(padded.size()));
  if (o.exclude_outside && o.mode != "nearest") {
    double sum = 0;
    for (int64_t i = 0; i < n; ++i) {
      const int64_t orig = idx[i] - pad;
      if (orig < 0 || orig >= static_cast<int64_t>(data.size())) coeffs[i] = 0;
      sum += coeffs[i];
    }
    for (double& v : coeffs) v /= sum;
  }
  double r = 0;
  for (int64_t i = 0; i < n; ++i) r += coeffs[i] * padded[idx[i]];
  return r;
}

// interpolate_nd_with_x over dims [d, rank) of the block at `offset`.
double InterpolateND(const std::vector<double>& data, const Shape& shape, size_t d, int64_t offset,
                     const std::vector<double>& scales, const Shape& x, const Shape& out, const RefOptions& o) {
  int64_t stride = 1;
  for (size_t k = d + 1; k < shape.size(); ++k) stride *= shape[k];
  std::vector<double> row;
  for (int64_t i = 0; i < shape[d]; ++i) {
    row.push_back(d + 1 == shape.size()
                      ? data[offset + i]
                      : InterpolateND(data, shape, d + 1, offset + i * stride, scales, x, out, o));
  }
  const double rs = o.roi.empty() ? 0 : o.roi[d], re = o.roi.empty() ? 1 : o.roi[d + shape.size()];
  return Interpolate1D(row, scales[d], x[d], out[d], rs, re, o);
}

std::vector<double> ReferenceResize(const std::vector<double>& data, const Shape& shape, const Shape& out,
                                    const std::vector<double>& scales, const RefOptions& o) {
  int64_t total = 1;
  for (int64_t d : out) total *= d;
  std::vector<double> result;
  for (int64_t i = 0; i < total; ++i) {
    Shape x(out.size());
    int64_t r = i;
    for (int d = static_cast<int>(out.size()) - 1; d >= 0; --d) {
      x[d] = r % out[d];
      r /= out[d];
    }
    result.push_back(InterpolateND(data, shape, 0, 0, scales, x, out, o));
  }
  return result;
}

Attrs ToAttrs(const RefOptions& o) {
  Attrs a = {{"mode", o.mode},
             {"coordinate_transformation_mode", o.coord},
             {"nearest_mode", o.nearest},
             {"cubic_coeff_a", o.cubic_a},
             {"exclude_outside", int64_t{o.exclude_outside ? 1 : 0}},
             {"extrapolation_value", o.extrapolation}};
  if (o.antialias) a.push_back({"antialias", int64_t{1}});
  return a;
}

std::vector<double> Ramp(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  std::vector<double> v;
  // Not linear, so that linear interpolation of a ramp is not trivially exact.
  for (int64_t i = 0; i < n; ++i)
    v.push_back(std::sin(0.7 * static_cast<double>(i)) * 10 + static_cast<double>(i % 5));
  return v;
}

// Runs Resize on f64 data with scales (`sizes` empty) or sizes, and compares
// with the reference.
void CheckAgainstReference(const Shape& shape, const std::vector<float>& scales, const Shape& sizes,
                           const RefOptions& o) {
  SCOPED_TRACE(::testing::Message() << o.mode << " " << o.coord << " " << o.nearest << " a=" << o.cubic_a
                                    << " excl=" << o.exclude_outside << " aa=" << o.antialias << " in "
                                    << ::testing::PrintToString(shape) << " scales "
                                    << ::testing::PrintToString(scales) << " sizes "
                                    << ::testing::PrintToString(sizes));
  const std::vector<double> data = Ramp(shape);
  const Tensor x = MakeTensor<double>(DType::kF64, shape, data);
  Shape out(shape.size());
  std::vector<double> eff(shape.size());
  Tensor s, z, roi;
  std::vector<const Tensor*> inputs = {&x, nullptr, nullptr, nullptr};
  if (!o.roi.empty()) {
    roi = MakeTensor<double>(DType::kF64, {static_cast<int64_t>(o.roi.size())}, o.roi);
    inputs[1] = &roi;
  }
  if (sizes.empty()) {
    s = MakeTensor<float>(DType::kF32, {static_cast<int64_t>(scales.size())}, scales);
    inputs[2] = &s;
    for (size_t d = 0; d < shape.size(); ++d) {
      eff[d] = scales[d];
      out[d] = static_cast<int64_t>(std::floor(static_cast<double>(scales[d]) * static_cast<double>(shape[d])));
    }
  } else {
    z = MakeTensor<int64_t>(DType::kI64, {static_cast<int64_t>(sizes.size())}, sizes);
    inputs[3] = &z;
    for (size_t d = 0; d < shape.size(); ++d) {
      out[d] = sizes[d];
      eff[d] = static_cast<double>(sizes[d]) / static_cast<double>(shape[d]);
    }
  }
  auto got = RunOp("Resize", inputs, ToAttrs(o));
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ((*got)[0].shape(), out);
  const std::vector<double> want = ReferenceResize(data, shape, out, eff, o);
  const std::vector<double> have = Values<double>((*got)[0]);
  ASSERT_EQ(have.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_NEAR(have[i], want[i], 1e-12 * (1 + std::fabs(want[i]))) << "element " << i;
  }
}

const char* const kCoords[] = {"half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners",
                               "asymmetric", "tf_half_pixel_for_nn", "tf_crop_and_resize"};

struct Geometry {
  Shape shape;
  std::vector<float> scales;
  Shape sizes;
};

const Geometry kGeometries[] = {
    {{1, 1, 4, 5}, {1, 1, 2, 1.5f}, {}},     // upsample
    {{1, 1, 4, 5}, {1, 1, 0.5f, 0.6f}, {}},  // downsample
    {{1, 1, 4, 4}, {1, 1, 0.8f, 0.8f}, {}},
    {{1, 1, 4, 5}, {}, {1, 1, 7, 3}},
    {{2, 3, 4}, {}, {3, 5, 2}},        // every dim resized
    {{1, 1, 3, 4}, {}, {1, 1, 1, 1}},  // output of 1: the special cases
    {{5}, {3.0f}, {}},
    {{1, 2, 3, 3}, {1, 1, 1, 1}, {}},  // identity
};

TEST(ResizeTest, NearestMatchesReference) {
  for (const char* coord : kCoords) {
    for (const char* nearest : {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"}) {
      for (const Geometry& g : kGeometries) {
        RefOptions o;
        o.coord = coord;
        o.nearest = nearest;
        if (o.coord == "tf_crop_and_resize") {
          o.extrapolation = -3;
          o.roi.assign(2 * g.shape.size(), 0.0);
          for (size_t d = 0; d < g.shape.size(); ++d) {
            o.roi[d] = d % 2 == 0 ? 0.1 : -0.2;
            o.roi[d + g.shape.size()] = d % 2 == 0 ? 0.85 : 1.3;
          }
        }
        CheckAgainstReference(g.shape, g.scales, g.sizes, o);
      }
    }
  }
}

TEST(ResizeTest, LinearAndCubicMatchReference) {
  for (const char* mode : {"linear", "cubic"}) {
    for (const char* coord : kCoords) {
      for (const Geometry& g : kGeometries) {
        for (bool exclude : {false, true}) {
          RefOptions o;
          o.mode = mode;
          o.coord = coord;
          o.exclude_outside = exclude;
          o.cubic_a = exclude ? -0.5 : -0.75;
          if (o.coord == "tf_crop_and_resize") {
            o.extrapolation = 7.5;
            o.roi.assign(2 * g.shape.size(), 0.0);
            for (size_t d = 0; d < g.shape.size(); ++d) {
              o.roi[d] = d % 2 == 0 ? 0.2 : -0.1;
              o.roi[d + g.shape.size()] = d % 2 == 0 ? 0.7 : 1.25;
            }
          }
          CheckAgainstReference(g.shape, g.scales, g.sizes, o);
        }
      }
    }
  }
}

TEST(ResizeTest, AntialiasMatchesReference) {
  for (const char* mode : {"linear", "cubic"}) {
    for (const char* coord : {"half_pixel", "align_corners", "asymmetric", "pytorch_half_pixel"}) {
      for (bool exclude : {false, true}) {
        RefOptions o;
        o.mode = mode;
        o.coord = coord;
        o.antialias = true;
        o.exclude_outside = exclude;
        CheckAgainstReference({1, 1, 8, 9}, {1, 1, 0.5f, 0.3f}, {}, o);  // downsample: wider filters
        CheckAgainstReference({1, 1, 4, 4}, {1, 1, 2, 0.75f}, {}, o);
        CheckAgainstReference({1, 1, 9, 7}, {}, {1, 1, 2, 3}, o);
      }
    }
  }
  // Upsampling with antialias is the plain filter.
  RefOptions o;
  o.mode = "linear";
  o.antialias = true;
  const Tensor x = MakeTensor<float>(DType::kF32, {1, 1, 2, 2}, {1, 2, 3, 4});
  const Tensor s = MakeTensor<float>(DType::kF32, {4}, {1, 1, 2, 2});
  auto with = RunOp("Resize", {&x, nullptr, &s}, ToAttrs(o));
  o.antialias = false;
  auto without = RunOp("Resize", {&x, nullptr, &s}, ToAttrs(o));
  ASSERT_TRUE(with.ok() && without.ok());
  EXPECT_EQ(Values<float>((*with)[0]), Values<float>((*without)[0]));
}

// ---------------------------------------------------------------------------
// The ONNX backend tests' data (onnx 1.12, opset 13), f32 in and out.
// ---------------------------------------------------------------------------

std::vector<float> Iota16() {
  std::vector<float> v(16);
  std::iota(v.begin(), v.end(), 1.0f);
  return v;
}

absl::StatusOr<std::vector<float>> RunF32(const Tensor& x, const Tensor* roi, const Tensor* scales,
                                          const Tensor* sizes, Attrs attrs) {
  auto out = RunOp("Resize", {&x, roi, scales, sizes}, std::move(attrs));
  if (!out.ok()) return out.status();
  return Values<float>((*out)[0]);
}

TEST(ResizeTest, OnnxBackendExamples) {
  const Tensor x4 = MakeTensor<float>(DType::kF32, {1, 1, 4, 4}, Iota16());
  const Tensor down = MakeTensor<float>(DType::kF32, {4}, {1, 1, 0.8f, 0.8f});
  auto cubic = RunF32(x4, nullptr, &down, nullptr, {{"mode", std::string("cubic")}});
  ASSERT_TRUE(cubic.ok()) << cubic.status();
  EXPECT_THAT(*cubic,
              ::testing::ElementsAre(1.47119140625f, 2.78125f, 4.08251953125f, 6.71142578125f, 8.021484375f,
                                     9.32275390625f, 11.91650390625f, 13.2265625f, 14.52783203125f));
  auto excl = RunF32(x4, nullptr, &down, nullptr,
                     {{"mode", std::string("cubic")}, {"cubic_coeff_a", -0.5}, {"exclude_outside", int64_t{1}}});
  ASSERT_TRUE(excl.ok()) << excl.status();
  EXPECT_THAT(*excl, ::testing::ElementsAre(1.3681267499923706f, 2.669501304626465f, 4.013336658477783f,
                                            6.573625087738037f, 7.875f, 9.21883487701416f, 11.948966026306152f,
                                            13.250341415405273f, 14.594176292419434f));

  const Tensor x2 = MakeTensor<float>(DType::kF32, {1, 1, 2, 2}, {1, 2, 3, 4});
  const Tensor up = MakeTensor<float>(DType::kF32, {4}, {1, 1, 2, 2});
  auto align =
      RunF32(x2, nullptr, &up, nullptr,
             {{"mode", std::string("linear")}, {"coordinate_transformation_mode", std::string("align_corners")}});
  ASSERT_TRUE(align.ok()) << align.status();
  EXPECT_THAT(*align, ::testing::ElementsAre(1.0f, 1.3333333730697632f, 1.6666666269302368f, 2.0f,
                                             1.6666666269302368f, 2.0f, 2.3333332538604736f, 2.6666667461395264f,
                                             2.3333332538604736f, 2.6666667461395264f, 3.0f, 3.3333332538604736f,
                                             3.0f, 3.3333332538604736f, 3.6666667461395264f, 4.0f));
  auto linear = RunF32(x2, nullptr, &up, nullptr, {{"mode", std::string("linear")}});
  ASSERT_TRUE(linear.ok()) << linear.status();
  EXPECT_THAT(*linear, ::testing::ElementsAre(1, 1.25, 1.75, 2, 1.5, 1.75, 2.25, 2.5, 2.5, 2.75, 3.25, 3.5, 3,
                                              3.25, 3.75, 4));

  const Tensor sizes31 = MakeTensor<int64_t>(DType::kI64, {4}, {1, 1, 3, 1});
  auto pytorch = RunF32(
      x4, nullptr, nullptr, &sizes31,
      {{"mode", std::string("linear")}, {"coordinate_transformation_mode", std::string("pytorch_half_pixel")}});
  ASSERT_TRUE(pytorch.ok()) << pytorch.status();
  EXPECT_THAT(*pytorch, ::testing::ElementsAre(1.6666666269302368f, 7.0f, 12.333333015441895f));

  // tf_crop_and_resize with an f32 roi, partly outside: the reference's
  // float32 roi arithmetic matters for these values.
  const Tensor sizes33 = MakeTensor<int64_t>(DType::kI64, {4}, {1, 1, 3, 3});
  const Tensor roi_out = MakeTensor<float>(DType::kF32, {8}, {0, 0, 0.4f, 0.6f, 1, 1, 1.2f, 1.7f});
  auto extrapolated = RunF32(x4, &roi_out, nullptr, &sizes33,
                             {{"mode", std::string("linear")},
                              {"coordinate_transformation_mode", std::string("tf_crop_and_resize")},
                              {"extrapolation_value", 10.0}});
  ASSERT_TRUE(extrapolated.ok()) << extrapolated.status();
  EXPECT_THAT(*extrapolated,
              ::testing::ElementsAre(7.600000381469727f, 10, 10, 12.40000057220459f, 10, 10, 10, 10, 10));

  const Tensor sizes88 = MakeTensor<int64_t>(DType::kI64, {4}, {1, 1, 8, 8});
  auto ceil = RunF32(x4, nullptr, nullptr, &sizes88, {{"nearest_mode", std::string("ceil")}});
  ASSERT_TRUE(ceil.ok()) << ceil.status();
  const std::vector<float> first_rows = {1, 2, 2, 3, 3, 4, 4, 4, 5, 6, 6, 7, 7, 8, 8, 8};
  EXPECT_EQ(std::vector<float>(ceil->begin(), ceil->begin() + 16), first_rows);

  // Opset 11 style: an empty scales tensor before the sizes.
  const Tensor empty = MakeTensor<float>(DType::kF32, {0}, {});
  const Tensor sizes32 = MakeTensor<int64_t>(DType::kI64, {4}, {1, 1, 3, 2});
  auto nn = RunF32(x4, &empty, &empty, &sizes32,
                   {{"coordinate_transformation_mode", std::string("tf_half_pixel_for_nn")}});
  ASSERT_TRUE(nn.ok()) << nn.status();
  EXPECT_THAT(*nn, ::testing::ElementsAre(6, 8, 10, 12, 14, 16));
}

// ---------------------------------------------------------------------------
// DTypes, axes, keep_aspect_ratio_policy
// ---------------------------------------------------------------------------

TEST(ResizeTest, NearestCopiesEveryDType) {
  for (DType t : {DType::kF32, DType::kF64, DType::kF16, DType::kBF16, DType::kI64, DType::kI32, DType::kI8,
                  DType::kU8, DType::kBool}) {
    Tensor x = Tensor::Create(t, {2, 3}).value();
    const size_t es = DTypeSize(t);
    for (size_t i = 0; i < 6 * es; ++i) static_cast<uint8_t*>(x.data())[i] = static_cast<uint8_t>(i * 37 + 1);
    const Tensor sizes = MakeTensor<int64_t>(DType::kI64, {2}, {4, 2});
    auto out = RunOp("Resize", {&x, nullptr, nullptr, &sizes}, {{"nearest_mode", std::string("floor")}});
    ASSERT_TRUE(out.ok()) << out.status();
    // half_pixel, floor: rows 0 0 0 1 (from -0.25 clamped, 0.25, 0.75, 1.25), cols 0 1 (from 0.25, 1.75).
    const int64_t src[] = {0, 1, 0, 1, 0, 1, 3, 4};
    for (int i = 0; i < 8; ++i) {
      EXPECT_EQ(std::memcmp(static_cast<const uint8_t*>((*out)[0].data()) + i * es,
                            static_cast<const uint8_t*>(x.data()) + src[i] * static_cast<int64_t>(es), es),
                0)
          << DTypeName(t) << " element " << i;
    }
  }
}

TEST(ResizeTest, LinearOnOtherDTypes) {
  const Tensor sizes = MakeTensor<int64_t>(DType::kI64, {1}, {4});
  const Attrs linear = {{"mode", std::string("linear")}};
  const Tensor h = MakeTensor<uint16_t>(DType::kF16, {2}, {0x3c00, 0x4000});  // 1, 2
  auto out = RunOp("Resize", {&h, nullptr, nullptr, &sizes}, linear);
  ASSERT_TRUE(out.ok()) << out.status();
  // 1, 1.25, 1.75, 2 in f16.
  EXPECT_THAT(Values<uint16_t>((*out)[0]), ::testing::ElementsAre(0x3c00, 0x3d00, 0x3f00, 0x4000));
  const Tensor i = MakeTensor<int32_t>(DType::kI32, {2}, {0, 10});
  out = RunOp("Resize", {&i, nullptr, nullptr, &sizes}, linear);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(Values<int32_t>((*out)[0]), ::testing::ElementsAre(0, 2, 7, 10));  // truncated, as Cast
  const Tensor u = MakeTensor<uint8_t>(DType::kU8, {2}, {250, 0});
  out = RunOp("Resize", {&u, nullptr, nullptr, &sizes}, {{"mode", std::string("cubic")}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Values<uint8_t>((*out)[0])[0], 255);  // cubic overshoot saturates
}

TEST(ResizeTest, AxesAndAspectPolicy) {
  const std::vector<double> data = Ramp({2, 3, 4});
  const Tensor x = MakeTensor<double>(DType::kF64, {2, 3, 4}, data);
  const Tensor two = MakeTensor<int64_t>(DType::kI64, {2}, {6, 2});
  auto axes = RunOp("Resize", {&x, nullptr, nullptr, &two},
                    {{"axes", std::vector<int64_t>{-1, 1}}, {"mode", std::string("linear")}});
  ASSERT_TRUE(axes.ok()) << axes.status();
  EXPECT_EQ((*axes)[0].shape(), (Shape{2, 2, 6}));
  const Tensor full = MakeTensor<int64_t>(DType::kI64, {3}, {2, 2, 6});
  auto same = RunOp("Resize", {&x, nullptr, nullptr, &full}, {{"mode", std::string("linear")}});
  ASSERT_TRUE(same.ok()) << same.status();
  EXPECT_EQ(Values<double>((*axes)[0]), Values<double>((*same)[0]));

  const Tensor scales = MakeTensor<float>(DType::kF32, {1}, {2});
  auto one_axis = RunOp("Resize", {&x, nullptr, &scales}, {{"axes", std::vector<int64_t>{0}}});
  ASSERT_TRUE(one_axis.ok()) << one_axis.status();
  EXPECT_EQ((*one_axis)[0].shape(), (Shape{4, 3, 4}));

  // keep_aspect_ratio_policy: one scale for every resized axis.
  const Tensor box = MakeTensor<int64_t>(DType::kI64, {2}, {6, 6});
  auto larger =
      RunOp("Resize", {&x, nullptr, nullptr, &box},
            {{"axes", std::vector<int64_t>{1, 2}}, {"keep_aspect_ratio_policy", std::string("not_larger")}});
  ASSERT_TRUE(larger.ok()) << larger.status();
  EXPECT_EQ((*larger)[0].shape(), (Shape{2, 5, 6}));  // scale 1.5: 3 * 1.5 = 4.5 rounds half up
  auto smaller =
      RunOp("Resize", {&x, nullptr, nullptr, &box},
            {{"axes", std::vector<int64_t>{1, 2}}, {"keep_aspect_ratio_policy", std::string("not_smaller")}});
  ASSERT_TRUE(smaller.ok()) << smaller.status();
  EXPECT_EQ((*smaller)[0].shape(), (Shape{2, 6, 8}));  // scale 2
  // The unified scale drives the coordinates: not_smaller equals scales [1, 2, 2].
  const Tensor s122 = MakeTensor<float>(DType::kF32, {3}, {1, 2, 2});
  auto by_scale = RunOp("Resize", {&x, nullptr, &s122}, {});
  ASSERT_TRUE(by_scale.ok()) << by_scale.status();
  EXPECT_EQ(Values<double>((*smaller)[0]), Values<double>((*by_scale)[0]));
}

TEST(ResizeTest, ZeroSizeDims) {
  const Tensor x = MakeTensor<float>(DType::kF32, {0, 3}, {});
  const Tensor scales = MakeTensor<float>(DType::kF32, {2}, {2, 2});
  auto out = RunOp("Resize", {&x, nullptr, &scales}, {{"mode", std::string("linear")}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].shape(), (Shape{0, 6}));
  const Tensor y = MakeTensor<float>(DType::kF32, {2, 3}, {1, 2, 3, 4, 5, 6});
  const Tensor zero = MakeTensor<int64_t>(DType::kI64, {2}, {0, 3});
  out = RunOp("Resize", {&y, nullptr, nullptr, &zero});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].shape(), (Shape{0, 3}));
  const Tensor tiny = MakeTensor<float>(DType::kF32, {2}, {0.1f, 0.1f});
  out = RunOp("Resize", {&y, nullptr, &tiny});  // floor(0.2) = 0
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].shape(), (Shape{0, 0}));
}

// ---------------------------------------------------------------------------
// Errors and shapes
// ---------------------------------------------------------------------------

TEST(ResizeTest, Errors) {
  const Tensor x = MakeTensor<float>(DType::kF32, {1, 1, 2, 2}, {1, 2, 3, 4});
  const Tensor scales = MakeTensor<float>(DType::kF32, {4}, {1, 1, 2, 2});
  const Tensor sizes = MakeTensor<int64_t>(DType::kI64, {4}, {1, 1, 4, 4});
  auto err = [&](std::vector<const Tensor*> in, Attrs attrs = {}) { return RunOp("Resize", in, attrs).status(); };
  EXPECT_TRUE(
      ErrorContains(err({&x, nullptr, &scales, &sizes}), "scales (input 2) and sizes (input 3) are both given"));
  EXPECT_TRUE(ErrorContains(err({&x}), "needs scales (input 2) or sizes (input 3)"));
  EXPECT_TRUE(ErrorContains(err({&x, nullptr, &scales}, {{"mode", std::string("bilinear")}}),
                            "attribute mode is 'bilinear'; expected one of 'nearest', 'linear', 'cubic'"));
  EXPECT_TRUE(
      ErrorContains(err({&x, nullptr, &scales}, {{"coordinate_transformation_mode", std::string("corner")}}),
                    "attribute coordinate_transformation_mode is 'corner'"));
  EXPECT_TRUE(ErrorContains(err({&x, nullptr, &scales}, {{"nearest_mode", std::string("round")}}),
                            "attribute nearest_mode is 'round'"));
  EXPECT_TRUE(ErrorContains(err({&x, nullptr, &scales}, {{"keep_aspect_ratio_policy", std::string("fit")}}),
                            "attribute keep_aspect_ratio_policy is 'fit'"));
  EXPECT_TRUE(ErrorContains(err({&x, nullptr, &scales}, {{"exclude_outside", int64_t{2}}}),
                            "attribute exclude_outside is 2; expected 0 or 1"));
  EXPECT_TRUE(
      ErrorContains(err({&x, nullptr, &scales}, {{"antialias", int64_t{-1}}}), "attribute antialias is -1"));
  const Tensor three = MakeTensor<float>(DType::kF32, {3}, {1, 2, 2});
  EXPECT_TRUE(
      ErrorContains(err({&x, nullptr, &three}), "scales (input 2) has 3 elements; expected 4 (the input's rank)"));
  EXPECT_TRUE(ErrorContains(err({&x, nullptr, &three}, {{"axes", std::vector<int64_t>{2, 3}}}),
                            "expected 2 (one per axis in attribute axes)"));
  const Tensor zero_scale = MakeTensor<float>(DType::kF32, {4}, {1, 1, 0, 2});
  EXPECT_TRUE(ErrorContains(err({&x, nullptr, &zero_scale}), "scales (input 2) element 2 is 0; expected > 0"));
  const Tensor neg = MakeTensor<int64_t>(DType::kI64, {4}, {1, 1, -4, 4});
  EXPECT_TRUE(ErrorContains(err({&x, nullptr, nullptr, &neg}), "has a negative size"));
  const Tensor f_sizes = MakeTensor<float>(DType::kF32, {4}, {1, 1, 4, 4});
  EXPECT_TRUE(ErrorContains(err({&x, nullptr, nullptr, &f_sizes}), "input 3 (sizes) has dtype f32"));
  const Tensor i_scales = MakeTensor<int64_t>(DType::kI64, {4}, {1, 1, 2, 2});
  EXPECT_TRUE(ErrorContains(err({&x, nullptr, &i_scales}), "input 2 (scales) has dtype i64"));
  const Tensor b = MakeTensor<uint8_t>(DType::kBool, {2}, {1, 0});
  const Tensor s1 = MakeTensor<float>(DType::kF32, {1}, {2});
  EXPECT_TRUE(ErrorContains(err({&b, nullptr, &s1}, {{"mode", std::string("linear")}}), "X (input 0) is bool"));
  const Tensor scalar = MakeTensor<float>(DType::kF32, {}, {1});
  const Tensor none = MakeTensor<float>(DType::kF32, {0}, {});
  EXPECT_TRUE(ErrorContains(err({&scalar, nullptr, &none}), "is a scalar"));
  const Tensor roi = MakeTensor<float>(DType::kF32, {4}, {0, 0, 1, 1});
  EXPECT_TRUE(ErrorContains(
      err({&x, &roi, &scales}, {{"coordinate_transformation_mode", std::string("tf_crop_and_resize")}}),
      "roi (input 1) has 4 elements; expected 8"));
  EXPECT_TRUE(ErrorContains(err({&x, nullptr, &three}, {{"axes", std::vector<int64_t>{1, 4, 0}}}),
                            "attribute axes [1, 4, 0] has axis 4; expected -4..3"));
  EXPECT_TRUE(
      ErrorContains(err({&x, nullptr, &three}, {{"axes", std::vector<int64_t>{1, -3, 0}}}), "names dim 1 twice"));
  const Tensor empty_x = MakeTensor<float>(DType::kF32, {1, 0}, {});
  const Tensor grow = MakeTensor<int64_t>(DType::kI64, {2}, {1, 3});
  EXPECT_TRUE(
      ErrorContains(err({&empty_x, nullptr, nullptr, &grow}), "asks for 3 elements along dim 1, which is empty"));
  const Tensor huge = MakeTensor<float>(DType::kF32, {4}, {1, 1, 1e30f, 1});
  EXPECT_TRUE(ErrorContains(err({&x, nullptr, &huge}), "too large"));
  EXPECT_TRUE(ErrorContains(RunKernelPlanned("Resize", {&x, nullptr, &scales}, DType::kF32, {1, 1, 4, 5}).status(),
                            "output is f32 [1, 1, 4, 4] for these inputs but was planned as f32 [1, 1, 4, 5]"));
}

TEST(ResizeTest, SymbolicShapes) {
  const SymDim b = SymDim::Symbol(0), h = SymDim::Symbol(1);
  const Tensor scales = MakeTensor<float>(DType::kF32, {4}, {1, 1, 2, 1.5f});
  auto out = InferSymbolic("Resize", {{DType::kF32, {b, 3, h, 8}}, Absent(), {DType::kF32, {4}, &scales}});
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->shape.size(), 4u);
  EXPECT_EQ(out->shape[0], b);
  EXPECT_EQ(out->shape[1], SymDim(3));
  EXPECT_EQ(out->shape[2], SymDim(2) * h);  // an integer scale stays exact
  EXPECT_TRUE(out->shape[3].is_unknown());  // the kernel's floor() needs the dims: re-inferred at run
  const Tensor sizes = MakeTensor<int64_t>(DType::kI64, {4}, {1, 3, 16, 16});
  out = InferSymbolic("Resize", {{DType::kF32, {b, 3, h, 8}}, Absent(), Absent(), {DType::kI64, {4}, &sizes}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->shape, (SymShape{1, 3, 16, 16}));
  out = InferSymbolic("Resize", {{DType::kF32, {b, 3, h, 8}}, Absent(), Absent(), {DType::kI64, {2}}},
                      {{"axes", std::vector<int64_t>{2, 3}}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->shape[0], b);
  EXPECT_EQ(out->shape[1], SymDim(3));
  EXPECT_TRUE(out->shape[2].is_unknown() && out->shape[3].is_unknown());
  // An input known to be empty counts as omitted.
  out = InferSymbolic("Resize", {{DType::kF32, {b, 3}}, Absent(), {DType::kF32, {0}}, {DType::kI64, {2}}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(ErrorContains(
      InferSymbolic("Resize", {{DType::kF32, {b, 3}}, Absent(), {DType::kF32, {2}}, {DType::kI64, {2}}}).status(),
      "both given"));
}

TEST(ResizeTest, SizesKnownOnlyAtRunTime) {
  ModelBuilder builder;
  builder.AddSymbol("h", 1, 32);
  builder.AddInput("x", DType::kF32, {1, 1, "h", 2});
  builder.AddInput("sizes", DType::kI64, {4});
  builder.AddOp("Resize", {"x", "", "", "sizes"}, {"y"}, {{"mode", std::string("linear")}});
  builder.AddOutput("y");
  auto session = Session::Create(LoadOrDie(builder.Finish()), {Device::kCpu});
  ASSERT_TRUE(session.ok()) << session.status();
  std::vector<float> x = {1, 2, 3, 4};
  const std::vector<int64_t> sizes = {1, 1, 4, 4};
  auto out = (*session)->Run(
      {TensorView(DType::kF32, {1, 1, 2, 2}, x.data()), TensorView(DType::kI64, {4}, sizes.data())});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(
      Values<float>(Tensor::CopyOf((*out)[0]).value()),
      ::testing::ElementsAre(1, 1.25, 1.75, 2, 1.5, 1.75, 2.25, 2.5, 2.5, 2.75, 3.25, 3.5, 3, 3.25, 3.75, 4));
}

}  // namespace
}  // namespace grove::testing
