// The norm group (BatchNormalization, InstanceNormalization,
// LayerNormalization, MeanVarianceNormalization, Softmax, LogSoftmax,
// Hardmax) against naive references written here from the ONNX text: the
// normalizations and LogSoftmax from their formulas, Hardmax and
// MeanVarianceNormalization from the ONNX operator text, Softmax along every
// axis; symbolic shapes, and every error the shape functions and kernels
// return. Moved from nn_test.cc and reduction_test.cc as they were.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lib/backends/cpu/norm.h"
#include "lib/ir/op_registry.h"
#include "lib/runtime/registry.h"
#include "test/op_test_util.h"
#include "test/ops/symbolic_shape_util.h"

namespace grove::testing {
namespace {

using ir::SymDim;
using ir::SymShape;
using Shape = std::vector<int64_t>;
using Attrs = std::vector<std::pair<std::string, AttrValue>>;

// Deterministic values in [-1, 1], different per seed.
std::vector<float> Pattern(int64_t n, int seed) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[i] = static_cast<float>(((i * 37 + seed * 11 + 5) % 41) - 20) / 20.0f;
  return v;
}

Shape Unravel(int64_t flat, const Shape& dims) {
  Shape idx(dims.size());
  for (int d = static_cast<int>(dims.size()) - 1; d >= 0; --d) {
    idx[d] = flat % dims[d];
    flat /= dims[d];
  }
  return idx;
}

int64_t Ravel(const Shape& idx, const Shape& dims) {
  int64_t flat = 0;
  for (size_t d = 0; d < dims.size(); ++d) flat = flat * dims[d] + idx[d];
  return flat;
}

template <typename T>
void ExpectNear(const std::vector<T>& got, const std::vector<double>& want, double rtol = 1e-4,
                double atol = 1e-5) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_NEAR(static_cast<double>(got[i]), want[i], atol + rtol * std::abs(want[i])) << "at " << i;
  }
}

std::string Describe(const Shape& s) { return absl::StrCat("[", absl::StrJoin(s, ","), "]"); }

// ---------------------------------------------------------------------------
// Normalizations
// ---------------------------------------------------------------------------

TEST(NormTest, BatchNormalization) {
  for (const Shape& xs : {Shape{2, 3, 4, 5}, Shape{4, 3}, Shape{1, 3, 2, 2, 2}}) {
    for (double eps : {1e-5, 0.01}) {
      SCOPED_TRACE(absl::StrCat(Describe(xs), " epsilon ", eps));
      const std::vector<float> x = Pattern(Count(xs), 1), scale = Pattern(3, 2), bias = Pattern(3, 3),
                               mean = Pattern(3, 4);
      const std::vector<float> var = {0.5f, 1.5f, 0.25f};
      const int64_t inner = Count(xs) / (xs[0] * 3);
      std::vector<double> want(x.size());
      for (size_t i = 0; i < x.size(); ++i) {
        const int64_t c = (static_cast<int64_t>(i) / inner) % 3;
        want[i] = (x[i] - mean[c]) / std::sqrt(var[c] + eps) * scale[c] + bias[c];
      }
      Tensor xt = MakeTensor<float>(DType::kF32, xs, x);
      Tensor st = MakeTensor<float>(DType::kF32, {3}, scale), bt = MakeTensor<float>(DType::kF32, {3}, bias);
      Tensor mt = MakeTensor<float>(DType::kF32, {3}, mean), vt = MakeTensor<float>(DType::kF32, {3}, var);
      auto out = RunOp("BatchNormalization", {&xt, &st, &bt, &mt, &vt},
                       {{"epsilon", eps}, {"momentum", 0.9}, {"training_mode", int64_t{0}}});
      ASSERT_TRUE(out.ok()) << out.status();
      EXPECT_EQ((*out)[0].shape(), xs);
      ExpectNear(Values<float>((*out)[0]), want);
    }
  }
}

TEST(NormTest, BatchNormalizationMixedDTypes) {
  // opset 15: X f64 with f32 scale and statistics.
  Tensor x = MakeTensor<double>(DType::kF64, {1, 2, 2}, {1, 2, 3, 4});
  Tensor s = MakeTensor<float>(DType::kF32, {2}, {1, 2});
  Tensor b = MakeTensor<float>(DType::kF32, {2}, {0, 1});
  Tensor m = MakeTensor<float>(DType::kF32, {2}, {1, 3});
  Tensor v = MakeTensor<float>(DType::kF32, {2}, {4, 1});
  auto out = RunOp("BatchNormalization", {&x, &s, &b, &m, &v}, {{"epsilon", 0.0}});
  ASSERT_TRUE(out.ok()) << out.status();
  ExpectNear(Values<double>((*out)[0]), {0, 0.5, 1, 3}, 1e-12, 1e-12);
}

// training_mode=1: the batch's own mean and (biased) variance per channel,
// and running statistics moved toward them by (1 - momentum).
TEST(NormTest, BatchNormalizationTrainingMode) {
  const std::vector<int64_t> xs = {2, 3, 4};
  const std::vector<float> x = Pattern(24, 5), scale = Pattern(3, 6), bias = Pattern(3, 7), mean = Pattern(3, 8);
  const std::vector<float> var = {0.5f, 1.5f, 0.25f};
  const double eps = 1e-3;
  for (double momentum : {0.9, 0.7}) {
    SCOPED_TRACE(momentum);
    std::vector<double> bm(3, 0), bv(3, 0);
    for (size_t i = 0; i < x.size(); ++i) bm[(i / 4) % 3] += x[i] / 8.0;
    for (size_t i = 0; i < x.size(); ++i) bv[(i / 4) % 3] += (x[i] - bm[(i / 4) % 3]) * (x[i] - bm[(i / 4) % 3]) / 8.0;
    std::vector<double> want(x.size()), run_mean(3), run_var(3);
    for (size_t i = 0; i < x.size(); ++i) {
      const size_t c = (i / 4) % 3;
      want[i] = (x[i] - bm[c]) / std::sqrt(bv[c] + eps) * scale[c] + bias[c];
    }
    for (size_t c = 0; c < 3; ++c) {
      run_mean[c] = mean[c] * momentum + bm[c] * (1 - momentum);
      run_var[c] = var[c] * momentum + bv[c] * (1 - momentum);
    }
    Tensor xt = MakeTensor<float>(DType::kF32, xs, x);
    Tensor st = MakeTensor<float>(DType::kF32, {3}, scale), bt = MakeTensor<float>(DType::kF32, {3}, bias);
    Tensor mt = MakeTensor<float>(DType::kF32, {3}, mean), vt = MakeTensor<float>(DType::kF32, {3}, var);
    auto out = RunOp("BatchNormalization", {&xt, &st, &bt, &mt, &vt},
                     {{"epsilon", eps}, {"momentum", momentum}, {"training_mode", int64_t{1}}}, 3);
    ASSERT_TRUE(out.ok()) << out.status();
    ExpectNear(Values<float>((*out)[0]), want);
    EXPECT_EQ((*out)[1].shape(), std::vector<int64_t>{3});
    ExpectNear(Values<float>((*out)[1]), run_mean);
    ExpectNear(Values<float>((*out)[2]), run_var);
  }
}

TEST(NormTest, BatchNormalizationErrors) {
  Tensor x = MakeTensor<float>(DType::kF32, {2, 3, 4}, {});
  Tensor p = MakeTensor<float>(DType::kF32, {3}, {});
  Tensor bad = MakeTensor<float>(DType::kF32, {4}, {});
  Tensor x1 = MakeTensor<float>(DType::kF32, {3}, {});
  EXPECT_TRUE(
      ErrorContains(RunOp("BatchNormalization", {&x, &p, &p, &p, &p}, {{"training_mode", int64_t{2}}}).status(),
                    "attribute 'training_mode' is 2; expected 0 or 1"));
  EXPECT_TRUE(ErrorContains(RunOp("BatchNormalization", {&x, &p, &p, &p, &p}, {}, 3).status(),
                            "output 1 (running_mean) is given, but it exists only with training_mode=1"));
  EXPECT_TRUE(ErrorContains(RunOp("BatchNormalization", {&x, &p, &p, &bad, &p}).status(),
                            "input 3 (input_mean) has shape [4]; expected [3]"));
  EXPECT_TRUE(ErrorContains(RunOp("BatchNormalization", {&x1, &p, &p, &p, &p}).status(), "expected rank >= 2"));
}

std::vector<double> RefLayerNorm(const std::vector<float>& x, const Shape& xs, int axis,
                                 const std::vector<float>& scale, const Shape& ss, const std::vector<float>* bias,
                                 double eps, std::vector<double>* means, std::vector<double>* inv_stds) {
  int64_t rows = 1, n = 1;
  for (int d = 0; d < axis; ++d) rows *= xs[d];
  for (size_t d = axis; d < xs.size(); ++d) n *= xs[d];
  const Shape norm(xs.begin() + axis, xs.end());
  std::vector<double> y(x.size());
  for (int64_t r = 0; r < rows; ++r) {
    double mean = 0, var = 0;
    for (int64_t j = 0; j < n; ++j) mean += x[r * n + j];
    mean /= static_cast<double>(n);
    for (int64_t j = 0; j < n; ++j) var += (x[r * n + j] - mean) * (x[r * n + j] - mean);
    var /= static_cast<double>(n);
    const double inv = 1.0 / std::sqrt(var + eps);
    means->push_back(mean);
    inv_stds->push_back(inv);
    for (int64_t j = 0; j < n; ++j) {
      // Scale (and B, same shape here) broadcast onto the normalized dims.
      const Shape idx = Unravel(j, norm);
      Shape sidx(idx.end() - static_cast<int64_t>(ss.size()), idx.end());
      for (size_t d = 0; d < ss.size(); ++d) {
        if (ss[d] == 1) sidx[d] = 0;
      }
      const int64_t si = Ravel(sidx, ss);
      y[r * n + j] = (x[r * n + j] - mean) * inv * scale[si] + (bias != nullptr ? (*bias)[si] : 0.0);
    }
  }
  return y;
}

void ExpectLayerNorm(const Shape& xs, int64_t axis_attr, const Shape& ss, bool with_bias, double eps) {
  SCOPED_TRACE(absl::StrCat("LayerNormalization ", Describe(xs), " axis ", axis_attr, " scale ", Describe(ss),
                            " bias ", with_bias, " epsilon ", eps));
  const int axis = static_cast<int>(axis_attr < 0 ? axis_attr + static_cast<int64_t>(xs.size()) : axis_attr);
  const std::vector<float> x = Pattern(Count(xs), 1), scale = Pattern(Count(ss), 2), bias = Pattern(Count(ss), 3);
  std::vector<double> means, inv_stds;
  const std::vector<double> want =
      RefLayerNorm(x, xs, axis, scale, ss, with_bias ? &bias : nullptr, eps, &means, &inv_stds);
  Tensor xt = MakeTensor<float>(DType::kF32, xs, x);
  Tensor st = MakeTensor<float>(DType::kF32, ss, scale), bt = MakeTensor<float>(DType::kF32, ss, bias);
  const Attrs attrs = {{"axis", axis_attr}, {"epsilon", eps}};
  auto out = with_bias ? RunOp("LayerNormalization", {&xt, &st, &bt}, attrs, 3)
                       : RunOp("LayerNormalization", {&xt, &st}, attrs, 3);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].shape(), xs);
  ExpectNear(Values<float>((*out)[0]), want);
  Shape stat_shape(xs.begin(), xs.begin() + axis);
  stat_shape.resize(xs.size(), 1);
  EXPECT_EQ((*out)[1].shape(), stat_shape);
  EXPECT_EQ((*out)[1].dtype(), DType::kF32);
  EXPECT_EQ((*out)[2].shape(), stat_shape);
  ExpectNear(Values<float>((*out)[1]), means);
  ExpectNear(Values<float>((*out)[2]), inv_stds);
}

TEST(NormTest, LayerNormalizationEveryAxis) {
  for (const Shape& xs : {Shape{3, 4}, Shape{2, 3, 5}, Shape{2, 3, 4, 5}}) {
    const int64_t rank = static_cast<int64_t>(xs.size());
    for (int64_t axis = -rank; axis < rank; ++axis) {
      const int64_t a = axis < 0 ? axis + rank : axis;
      const Shape norm(xs.begin() + a, xs.end());
      ExpectLayerNorm(xs, axis, norm, true, 1e-5);
      ExpectLayerNorm(xs, axis, norm, false, 0.1);
    }
  }
  // Scale broadcast onto the normalized dims.
  ExpectLayerNorm({2, 3, 4}, 1, {4}, true, 1e-5);
  ExpectLayerNorm({2, 3, 4}, 1, {3, 1}, true, 1e-5);
  ExpectLayerNorm({2, 3, 4}, -1, {1}, false, 1e-5);
}

// f32 rows take the AVX loops where the CPU has AVX (four doubles a lane
// group, the tail past a multiple of 8 or 4 elements scalar): every width
// around those multiples, with and without B, against the reference and
// against the scalar loops (the sums' terms added in another order only).
TEST(NormTest, LayerNormalizationAvxRowsMatchTheScalarLoops) {
  for (int64_t n : {1, 2, 3, 4, 5, 7, 8, 9, 12, 15, 16, 17, 48, 61}) {
    for (bool with_bias : {true, false}) {
      const Shape xs = {5, n};
      SCOPED_TRACE(absl::StrCat("n ", n, " bias ", with_bias));
      std::vector<float> x = Pattern(Count(xs), 4);
      for (size_t i = 0; i < x.size(); ++i) x[i] = x[i] * 3.0f + static_cast<float>(i % 3);  // rows off zero mean
      const std::vector<float> scale = Pattern(n, 5), bias = Pattern(n, 6);
      std::vector<double> means, inv_stds;
      const std::vector<double> want = RefLayerNorm(x, xs, 1, scale, {n}, with_bias ? &bias : nullptr, 1e-5, &means,
                                                    &inv_stds);
      Tensor xt = MakeTensor<float>(DType::kF32, xs, x), st = MakeTensor<float>(DType::kF32, {n}, scale),
             bt = MakeTensor<float>(DType::kF32, {n}, bias);
      std::vector<std::vector<float>> got;
      for (bool simd : {true, false}) {
        cpu::SetNormSimdAllowed(simd);
        auto out = with_bias ? RunOp("LayerNormalization", {&xt, &st, &bt}, {}, 3)
                             : RunOp("LayerNormalization", {&xt, &st}, {}, 3);
        cpu::SetNormSimdAllowed(true);
        ASSERT_TRUE(out.ok()) << out.status();
        ExpectNear(Values<float>((*out)[0]), want);
        ExpectNear(Values<float>((*out)[1]), means);
        ExpectNear(Values<float>((*out)[2]), inv_stds);
        got.push_back(Values<float>((*out)[0]));
      }
      for (size_t i = 0; i < got[0].size(); ++i) {
        EXPECT_NEAR(got[0][i], got[1][i], 2e-7 * (1 + std::fabs(got[1][i]))) << i;
      }
    }
  }
}

TEST(NormTest, LayerNormalizationDefaultsAndOneOutput) {
  const Shape xs = {2, 6};
  const std::vector<float> x = Pattern(12, 9), scale = Pattern(6, 8);
  std::vector<double> means, inv_stds;
  const std::vector<double> want = RefLayerNorm(x, xs, 1, scale, {6}, nullptr, 1e-5, &means, &inv_stds);
  Tensor xt = MakeTensor<float>(DType::kF32, xs, x), st = MakeTensor<float>(DType::kF32, {6}, scale);
  auto out = RunOp("LayerNormalization", {&xt, &st});
  ASSERT_TRUE(out.ok()) << out.status();
  ExpectNear(Values<float>((*out)[0]), want);
}

TEST(NormTest, LayerNormalizationErrors) {
  Tensor x = MakeTensor<float>(DType::kF32, {2, 3}, {});
  Tensor s = MakeTensor<float>(DType::kF32, {3}, {});
  Tensor s_bad = MakeTensor<float>(DType::kF32, {2}, {});
  Tensor s64 = MakeTensor<double>(DType::kF64, {3}, {});
  EXPECT_TRUE(ErrorContains(RunOp("LayerNormalization", {&x, &s}, {{"stash_type", int64_t{0}}}).status(),
                            "attribute 'stash_type' is 0"));
  EXPECT_TRUE(
      ErrorContains(RunOp("LayerNormalization", {&x, &s}, {{"axis", int64_t{2}}}).status(), "attribute 'axis'"));
  EXPECT_TRUE(ErrorContains(RunOp("LayerNormalization", {&x, &s_bad}).status(),
                            "input 1 (Scale) has shape [2], which does not broadcast to the normalized dims [3]"));
  EXPECT_TRUE(ErrorContains(RunOp("LayerNormalization", {&x, &s, &s_bad}).status(), "input 2 (B) has shape [2]"));
  EXPECT_TRUE(ErrorContains(RunOp("LayerNormalization", {&x, &s64}).status(), "input 1 (Scale) has dtype f64"));
  auto sym = InferSymbolic("LayerNormalization", {{DType::kF32, {SymDim::Symbol(0), 3}}, {DType::kF32, {3}}});
  ASSERT_TRUE(sym.ok()) << sym.status();
  EXPECT_EQ(sym->shape, (SymShape{SymDim::Symbol(0), 3}));
}

TEST(NormTest, InstanceNormalization) {
  for (const Shape& xs : {Shape{2, 3, 4, 5}, Shape{1, 2, 1, 3}, Shape{2, 3, 7}}) {
    for (double eps : {1e-5, 0.01}) {
      SCOPED_TRACE(absl::StrCat(Describe(xs), " epsilon ", eps));
      const int64_t c = xs[1], inner = Count(xs) / (xs[0] * c);
      const std::vector<float> x = Pattern(Count(xs), 1), scale = Pattern(c, 2), bias = Pattern(c, 3);
      std::vector<double> want(x.size());
      for (int64_t r = 0; r < xs[0] * c; ++r) {
        double mean = 0, var = 0;
        for (int64_t j = 0; j < inner; ++j) mean += x[r * inner + j];
        mean /= static_cast<double>(inner);
        for (int64_t j = 0; j < inner; ++j) var += (x[r * inner + j] - mean) * (x[r * inner + j] - mean);
        var /= static_cast<double>(inner);
        for (int64_t j = 0; j < inner; ++j) {
          want[r * inner + j] = (x[r * inner + j] - mean) / std::sqrt(var + eps) * scale[r % c] + bias[r % c];
        }
      }
      Tensor xt = MakeTensor<float>(DType::kF32, xs, x);
      Tensor st = MakeTensor<float>(DType::kF32, {c}, scale), bt = MakeTensor<float>(DType::kF32, {c}, bias);
      auto out = RunOp("InstanceNormalization", {&xt, &st, &bt}, {{"epsilon", eps}});
      ASSERT_TRUE(out.ok()) << out.status();
      ExpectNear(Values<float>((*out)[0]), want);
    }
  }
  Tensor x = MakeTensor<float>(DType::kF32, {1, 2, 3}, {});
  Tensor bad = MakeTensor<float>(DType::kF32, {3}, {});
  Tensor x2 = MakeTensor<float>(DType::kF32, {2, 3}, {});
  EXPECT_TRUE(ErrorContains(RunOp("InstanceNormalization", {&x, &bad, &bad}).status(),
                            "input 1 (scale) has shape [3]; expected [2]"));
  EXPECT_TRUE(ErrorContains(RunOp("InstanceNormalization", {&x2, &bad, &bad}).status(), "expected rank >= 3"));
}

TEST(NormTest, LogSoftmaxEveryAxis) {
  const Shape xs = {3, 4, 5};
  const std::vector<float> x = Pattern(Count(xs), 5);
  for (int64_t axis = -3; axis < 3; ++axis) {
    SCOPED_TRACE(absl::StrCat("axis ", axis));
    const int a = static_cast<int>(axis < 0 ? axis + 3 : axis);
    std::vector<double> want(x.size());
    for (int64_t i = 0; i < Count(xs); ++i) {
      Shape idx = Unravel(i, xs);
      double m = -1e30, sum = 0;
      for (int64_t k = 0; k < xs[a]; ++k) {
        idx[a] = k;
        m = std::max<double>(m, x[Ravel(idx, xs)]);
      }
      for (int64_t k = 0; k < xs[a]; ++k) {
        idx[a] = k;
        sum += std::exp(x[Ravel(idx, xs)] - m);
      }
      want[i] = x[i] - m - std::log(sum);
    }
    Tensor xt = MakeTensor<float>(DType::kF32, xs, x);
    auto out = RunOp("LogSoftmax", {&xt}, {{"axis", axis}});
    ASSERT_TRUE(out.ok()) << out.status();
    ExpectNear(Values<float>((*out)[0]), want);
  }
}

TEST(NormTest, LogSoftmaxLargeNumbersAndErrors) {
  // test_logsoftmax_large_number: finite where exp overflows.
  Tensor x = MakeTensor<float>(DType::kF32, {2, 4}, {1, 2, 3, 4, 10000, 10001, 10002, 10003});
  auto out = RunOp("LogSoftmax", {&x});
  ASSERT_TRUE(out.ok()) << out.status();
  const std::vector<double> row = {-3.4401897, -2.4401897, -1.4401897, -0.4401897};
  std::vector<double> want = row;
  want.insert(want.end(), row.begin(), row.end());
  ExpectNear(Values<float>((*out)[0]), want);
  Tensor x64 = MakeTensor<double>(DType::kF64, {3}, {0, 0, 0});
  auto out64 = RunOp("LogSoftmax", {&x64});
  ASSERT_TRUE(out64.ok()) << out64.status();
  ExpectNear(Values<double>((*out64)[0]), std::vector<double>(3, -std::log(3.0)), 1e-12, 1e-12);
  Tensor s = MakeTensor<float>(DType::kF32, {}, {1});
  Tensor xi = MakeTensor<int32_t>(DType::kI32, {3}, {});
  EXPECT_TRUE(ErrorContains(RunOp("LogSoftmax", {&s}).status(), "LogSoftmax needs rank >= 1"));
  EXPECT_TRUE(ErrorContains(RunOp("LogSoftmax", {&x}, {{"axis", int64_t{2}}}).status(), "attribute 'axis'"));
  EXPECT_TRUE(ErrorContains(RunOp("LogSoftmax", {&xi}).status(), "input 0 (input) has dtype i32"));
}

// ---------------------------------------------------------------------------
// Hardmax
// ---------------------------------------------------------------------------

// 1 at the first maximum along `axis`, 0 elsewhere.
std::vector<double> RefHardmax(const std::vector<float>& x, const Shape& xs, int axis) {
  std::vector<double> y(x.size(), 0.0);
  for (int64_t i = 0; i < Count(xs); ++i) {
    Shape idx = Unravel(i, xs);
    const int64_t at = idx[axis];
    bool first_max = true;
    for (int64_t k = 0; k < xs[axis] && first_max; ++k) {
      idx[axis] = k;
      const float v = x[Ravel(idx, xs)];
      if (k < at ? v >= x[i] : v > x[i]) first_max = false;
    }
    y[i] = first_max ? 1.0 : 0.0;
  }
  return y;
}

TEST(HardmaxTest, EveryAxis) {
  for (const Shape& xs : {Shape{3, 4, 5}, Shape{7}, Shape{2, 1, 3, 2}}) {
    const int64_t rank = static_cast<int64_t>(xs.size());
    // Pattern repeats values, so rows hold ties.
    std::vector<float> x = Pattern(Count(xs), 6);
    for (float& v : x) v = std::round(v * 3.0f);
    Tensor xt = MakeTensor<float>(DType::kF32, xs, x);
    for (int64_t axis = -rank; axis < rank; ++axis) {
      SCOPED_TRACE(absl::StrCat(Describe(xs), " axis ", axis));
      auto out = RunOp("Hardmax", {&xt}, {{"axis", axis}});
      ASSERT_TRUE(out.ok()) << out.status();
      EXPECT_EQ((*out)[0].shape(), xs);
      ExpectNear(Values<float>((*out)[0]), RefHardmax(x, xs, static_cast<int>(axis < 0 ? axis + rank : axis)));
    }
    auto def = RunOp("Hardmax", {&xt});
    ASSERT_TRUE(def.ok()) << def.status();
    ExpectNear(Values<float>((*def)[0]), RefHardmax(x, xs, static_cast<int>(rank - 1)));
  }
}

TEST(HardmaxTest, TiesNaNDTypesAndEmpty) {
  // test_hardmax_one_hot: the first of equal maxima wins.
  Tensor ties = MakeTensor<float>(DType::kF32, {1, 4}, {3, 3, 3, 1});
  auto t = RunOp("Hardmax", {&ties});
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(Values<float>((*t)[0]), (std::vector<float>{1, 0, 0, 0}));
  // A NaN is the maximum, as numpy's argmax has it.
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Tensor xn = MakeTensor<float>(DType::kF32, {2, 3}, {1, nan, 5, nan, 7, nan});
  auto n = RunOp("Hardmax", {&xn});
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ(Values<float>((*n)[0]), (std::vector<float>{0, 1, 0, 1, 0, 0}));
  Tensor x64 = MakeTensor<double>(DType::kF64, {2, 2}, {-1, -2, 4, 8});
  auto d = RunOp("Hardmax", {&x64}, {{"axis", int64_t{0}}});
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(Values<double>((*d)[0]), (std::vector<double>{0, 0, 1, 1}));
  Tensor x16 = MakeTensor<uint16_t>(DType::kF16, {3}, {0x3c00, 0x4000, 0xc000});  // 1, 2, -2
  auto h = RunOp("Hardmax", {&x16});
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ((*h)[0].dtype(), DType::kF16);
  EXPECT_EQ(Values<uint16_t>((*h)[0]), (std::vector<uint16_t>{0, 0x3c00, 0}));
  Tensor xb = MakeTensor<uint16_t>(DType::kBF16, {2}, {0x4000, 0x3f80});  // 2, 1
  auto b = RunOp("Hardmax", {&xb});
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(Values<uint16_t>((*b)[0]), (std::vector<uint16_t>{0x3f80, 0}));
  for (const Shape& es : {Shape{2, 0}, Shape{0, 3}}) {
    Tensor e = MakeTensor<float>(DType::kF32, es, {});
    auto out = RunOp("Hardmax", {&e});
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ((*out)[0].shape(), es);
  }
}

TEST(HardmaxTest, Errors) {
  Tensor s = MakeTensor<float>(DType::kF32, {}, {1});
  Tensor x = MakeTensor<float>(DType::kF32, {2, 3}, {});
  Tensor xi = MakeTensor<int64_t>(DType::kI64, {3}, {});
  EXPECT_TRUE(ErrorContains(RunOp("Hardmax", {&s}).status(), "input 0 (input) is a scalar; Hardmax needs rank >= 1"));
  EXPECT_TRUE(ErrorContains(RunOp("Hardmax", {&x}, {{"axis", int64_t{2}}}).status(), "attribute 'axis'"));
  EXPECT_TRUE(ErrorContains(RunOp("Hardmax", {&x}, {{"axis", int64_t{-3}}}).status(), "attribute 'axis'"));
  EXPECT_TRUE(ErrorContains(RunOp("Hardmax", {&xi}).status(), "input 0 (input) has dtype i64"));
  EXPECT_TRUE(ErrorContains(RunKernelPlanned("Hardmax", {&x}, DType::kF32, {3, 2}).status(),
                            "output 0 was allocated as f32 [3, 2] but the kernel writes f32 [2, 3]"));
  EXPECT_TRUE(ErrorContains(RunKernelPlanned("Hardmax", {&x}, DType::kF32, {2, 3}, {{"axis", int64_t{5}}}).status(),
                            "attribute 'axis'"));
  EXPECT_TRUE(ErrorContains(RunKernelPlanned("Hardmax", {&s}, DType::kF32, {}).status(), "needs rank >= 1"));
  auto sym = InferSymbolic("Hardmax", {{DType::kF16, {SymDim::Symbol(0), 3}}});
  ASSERT_TRUE(sym.ok()) << sym.status();
  EXPECT_EQ(sym->shape, (SymShape{SymDim::Symbol(0), 3}));
  EXPECT_EQ(sym->dtype, DType::kF16);
}

// ---------------------------------------------------------------------------
// MeanVarianceNormalization
// ---------------------------------------------------------------------------

// The ONNX function body: (x - E[x]) / (sqrt(E[x^2] - E[x]^2) + 1e-9) over `axes`.
std::vector<double> RefMvn(const std::vector<float>& x, const Shape& xs, const Shape& axes) {
  const int64_t rank = static_cast<int64_t>(xs.size());
  std::vector<bool> reduced(xs.size(), axes.empty());
  for (int64_t a : axes) reduced[a < 0 ? a + rank : a] = true;
  std::vector<double> y(x.size());
  for (int64_t i = 0; i < Count(xs); ++i) {
    const Shape idx = Unravel(i, xs);
    double sum = 0, sq = 0, count = 0;
    for (int64_t j = 0; j < Count(xs); ++j) {
      const Shape jdx = Unravel(j, xs);
      bool same = true;
      for (size_t d = 0; d < xs.size(); ++d) same = same && (reduced[d] || jdx[d] == idx[d]);
      if (!same) continue;
      sum += x[j];
      sq += static_cast<double>(x[j]) * x[j];
      ++count;
    }
    const double mean = sum / count;
    y[i] = (x[i] - mean) / (std::sqrt(std::max(0.0, sq / count - mean * mean)) + 1e-9);
  }
  return y;
}

TEST(MvnTest, AxesAndDefault) {
  const Shape xs = {2, 3, 4, 5};
  const std::vector<float> x = Pattern(Count(xs), 7);
  Tensor xt = MakeTensor<float>(DType::kF32, xs, x);
  auto def = RunOp("MeanVarianceNormalization", {&xt});
  ASSERT_TRUE(def.ok()) << def.status();
  EXPECT_EQ((*def)[0].shape(), xs);
  ExpectNear(Values<float>((*def)[0]), RefMvn(x, xs, {0, 2, 3}));
  for (const Shape& axes : {Shape{1}, Shape{-1}, Shape{0, 1, 2, 3}, Shape{2, 3}, Shape{3, 0}, Shape{}}) {
    SCOPED_TRACE(absl::StrCat("axes ", Describe(axes)));
    auto out = RunOp("MeanVarianceNormalization", {&xt}, {{"axes", axes}});
    ASSERT_TRUE(out.ok()) << out.status();
    ExpectNear(Values<float>((*out)[0]), RefMvn(x, xs, axes));
  }
  const Shape xs3 = {3, 2, 4};
  const std::vector<float> x3 = Pattern(Count(xs3), 8);
  Tensor x3t = MakeTensor<float>(DType::kF32, xs3, x3);
  auto out3 = RunOp("MeanVarianceNormalization", {&x3t}, {{"axes", Shape{0, -1}}});
  ASSERT_TRUE(out3.ok()) << out3.status();
  ExpectNear(Values<float>((*out3)[0]), RefMvn(x3, xs3, {0, 2}));
}

TEST(MvnTest, ConstantGroupsDTypesAndEmpty) {
  // A group with no variance gives 0, not NaN (the 1e-9 in the divisor).
  Tensor c = MakeTensor<float>(DType::kF32, {1, 2, 1, 2}, {3, 3, 1, 2});
  auto out = RunOp("MeanVarianceNormalization", {&c});
  ASSERT_TRUE(out.ok()) << out.status();
  ExpectNear(Values<float>((*out)[0]), {0, 0, -1, 1});
  const Shape xs = {2, 2, 2, 3};
  const std::vector<float> x = Pattern(Count(xs), 9);
  const std::vector<double> want = RefMvn(x, xs, {0, 2, 3});
  Tensor x32 = MakeTensor<float>(DType::kF32, xs, x);
  for (DType dtype : {DType::kF64, DType::kF16, DType::kBF16}) {
    SCOPED_TRACE(DTypeName(dtype));
    Tensor xt = Tensor::CastOf(x32.view(), dtype).value();
    auto o = RunOp("MeanVarianceNormalization", {&xt});
    ASSERT_TRUE(o.ok()) << o.status();
    EXPECT_EQ((*o)[0].dtype(), dtype);
    const double tol = dtype == DType::kF64 ? 1e-6 : 3e-2;
    ExpectNear(Values<float>(Tensor::CastOf((*o)[0].view(), DType::kF32).value()), want, tol, tol);
  }
  Tensor e = MakeTensor<float>(DType::kF32, {2, 0, 3, 1}, {});
  auto eo = RunOp("MeanVarianceNormalization", {&e});
  ASSERT_TRUE(eo.ok()) << eo.status();
  EXPECT_EQ((*eo)[0].shape(), (Shape{2, 0, 3, 1}));
}

TEST(MvnTest, Errors) {
  Tensor x3 = MakeTensor<float>(DType::kF32, {2, 3, 4}, {});
  Tensor xi = MakeTensor<int32_t>(DType::kI32, {1, 1, 1, 1}, {});
  EXPECT_TRUE(ErrorContains(RunOp("MeanVarianceNormalization", {&x3}).status(),
                            "attribute 'axes': axis 3 is out of range for rank 3"));
  EXPECT_TRUE(ErrorContains(RunOp("MeanVarianceNormalization", {&x3}, {{"axes", Shape{1, -2}}}).status(),
                            "attribute 'axes': axes name dim 1 twice"));
  EXPECT_TRUE(ErrorContains(RunOp("MeanVarianceNormalization", {&xi}).status(), "input 0 (X) has dtype i32"));
  EXPECT_TRUE(ErrorContains(RunKernelPlanned("MeanVarianceNormalization", {&x3}, DType::kF32, {2, 3, 4}).status(),
                            "attribute 'axes': axis 3 is out of range for rank 3"));
  EXPECT_TRUE(ErrorContains(
      RunKernelPlanned("MeanVarianceNormalization", {&x3}, DType::kF64, {2, 3, 4}, {{"axes", Shape{1}}}).status(),
      "output 0 was allocated as f64 [2, 3, 4] but the kernel writes f32 [2, 3, 4]"));
  const SymDim n = SymDim::Symbol(0);
  auto sym = InferSymbolic("MeanVarianceNormalization", {{DType::kF32, {n, 3, 4, 5}}});
  ASSERT_TRUE(sym.ok()) << sym.status();
  EXPECT_EQ(sym->shape, (SymShape{n, 3, 4, 5}));
}

}  // namespace
}  // namespace grove::testing

// Softmax, from reduction_test.cc.
namespace grove {
namespace {

using ::grove::testing::Count;
using ::grove::testing::MakeTensor;
using ::grove::testing::RunOp;
using ::grove::testing::Values;
using ::testing::HasSubstr;
using Shape = std::vector<int64_t>;
using Attrs = std::vector<std::pair<std::string, AttrValue>>;

template <typename T>
std::vector<T> Pattern(int64_t n) {
  std::vector<T> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    v[i] = static_cast<T>((i * 29 + 7) % 23 - 11) / static_cast<T>(std::is_floating_point_v<T> ? 4 : 1);
  return v;
}

// --- Softmax ----------------------------------------------------------------

std::vector<double> SoftmaxRef(const Shape& shape, const std::vector<double>& x, int axis) {
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < axis; ++d) outer *= shape[d];
  for (size_t d = axis + 1; d < shape.size(); ++d) inner *= shape[d];
  const int64_t n = shape[axis];
  std::vector<double> y(x.size());
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      double m = -INFINITY, sum = 0;
      for (int64_t j = 0; j < n; ++j) m = std::max(m, x[(o * n + j) * inner + i]);
      for (int64_t j = 0; j < n; ++j) sum += std::exp(x[(o * n + j) * inner + i] - m);
      for (int64_t j = 0; j < n; ++j) y[(o * n + j) * inner + i] = std::exp(x[(o * n + j) * inner + i] - m) / sum;
    }
  }
  return y;
}

template <typename T>
void ExpectSoftmax(DType dtype, const Shape& shape, int64_t axis, T offset = 0) {
  SCOPED_TRACE(absl::StrCat(DTypeName(dtype), " [", absl::StrJoin(shape, ","), "] axis ", axis));
  std::vector<T> x = Pattern<T>(Count(shape));
  for (T& v : x) v += offset;
  Tensor t = MakeTensor<T>(dtype, shape, x);
  auto out = RunOp("Softmax", {&t}, {{"axis", axis}});
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ((*out)[0].shape(), shape);
  const int rank = static_cast<int>(shape.size());
  const std::vector<double> want =
      SoftmaxRef(shape, std::vector<double>(x.begin(), x.end()), static_cast<int>(axis < 0 ? axis + rank : axis));
  const std::vector<T> got = Values<T>((*out)[0]);
  const double tolerance = std::is_same_v<T, float> ? 1e-6 : 1e-12;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_TRUE(std::isfinite(got[i])) << "at " << i;
    EXPECT_NEAR(got[i], want[i], tolerance) << "at " << i;
  }
}

TEST(SoftmaxTest, EveryAxis) {
  for (int64_t axis : {-3, -2, -1, 0, 1, 2}) {
    ExpectSoftmax<float>(DType::kF32, {2, 3, 4}, axis);
    ExpectSoftmax<double>(DType::kF64, {2, 3, 4}, axis);
  }
  ExpectSoftmax<float>(DType::kF32, {7}, 0);
  ExpectSoftmax<float>(DType::kF32, {1, 9}, -1);
  ExpectSoftmax<double>(DType::kF64, {3, 1}, -1);
  ExpectSoftmax<float>(DType::kF32, {4, 33, 2, 5}, 1);
}

// f16 and bf16 compute in f32 and round once on store: within one ulp of
// the dtype of the double reference rounded to the dtype, along the last
// axis (contiguous rows) and a middle one (columns).
TEST(SoftmaxTest, HalfTypesRoundOnce) {
  const Shape shape = {3, 40, 5};
  std::vector<float> x = Pattern<float>(Count(shape));
  for (size_t i = 0; i < x.size(); ++i) x[i] *= 1.0f + static_cast<float>(i % 3);  // up to 8.25
  const Tensor x32 = MakeTensor<float>(DType::kF32, shape, x);
  for (DType dtype : {DType::kF16, DType::kBF16}) {
    const Tensor xt = Tensor::CastOf(x32.view(), dtype).value();
    const double ulp = dtype == DType::kF16 ? 1.0 / 1024 : 1.0 / 128;
    const Tensor xw = Tensor::CastOf(xt.view(), DType::kF32).value();
    const std::vector<float> xv = Values<float>(xw);
    for (const char* op : {"Softmax", "LogSoftmax"}) {
      for (int64_t axis : {-1, 1, 0}) {
        SCOPED_TRACE(absl::StrCat(op, " ", DTypeName(dtype), " axis ", axis));
        const int a = static_cast<int>(axis < 0 ? axis + 3 : axis);
        std::vector<double> want = SoftmaxRef(shape, std::vector<double>(xv.begin(), xv.end()), a);
        if (op == std::string("LogSoftmax")) {
          for (double& v : want) v = std::log(v);
        }
        const Tensor want_t = Tensor::CastOf(MakeTensor<double>(DType::kF64, shape, want).view(), dtype).value();
        auto out = RunOp(op, {&xt}, {{"axis", axis}});
        ASSERT_TRUE(out.ok()) << out.status();
        ASSERT_EQ((*out)[0].dtype(), dtype);
        const std::vector<float> got = Values<float>(Tensor::CastOf((*out)[0].view(), DType::kF32).value());
        const std::vector<float> w = Values<float>(Tensor::CastOf(want_t.view(), DType::kF32).value());
        for (size_t i = 0; i < got.size(); ++i) {
          EXPECT_NEAR(got[i], w[i], ulp * std::abs(w[i]) + 1e-7) << "at " << i;
        }
      }
    }
  }
}

TEST(SoftmaxTest, DefaultAxisIsLast) {
  Tensor t = MakeTensor<float>(DType::kF32, {2, 2}, {0, 0, 1, 1});
  auto out = RunOp("Softmax", {&t});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Values<float>((*out)[0]), (std::vector<float>{0.5, 0.5, 0.5, 0.5}));
}

TEST(SoftmaxTest, LargeInputsStayFinite) {
  ExpectSoftmax<float>(DType::kF32, {3, 5}, -1, 1000.0f);
  ExpectSoftmax<float>(DType::kF32, {3, 5}, 0, -1000.0f);
  ExpectSoftmax<double>(DType::kF64, {2, 4}, 1, 1e5);
}

TEST(SoftmaxTest, ZeroSizeDims) {
  for (const auto& [shape, axis] :
       std::vector<std::pair<Shape, int64_t>>{{{0, 3}, 1}, {{2, 0}, -1}, {{2, 0, 3}, 0}}) {
    Tensor t = MakeTensor<float>(DType::kF32, shape, {});
    auto out = RunOp("Softmax", {&t}, {{"axis", axis}});
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ((*out)[0].shape(), shape);
  }
}

TEST(SoftmaxTest, Errors) {
  Tensor t = MakeTensor<float>(DType::kF32, {2, 3, 4}, {});
  auto axis3 = RunOp("Softmax", {&t}, {{"axis", int64_t{3}}});
  ASSERT_FALSE(axis3.ok());
  EXPECT_THAT(axis3.status().message(), HasSubstr("attribute 'axis': axis 3 is out of range for rank 3"));
  EXPECT_FALSE(RunOp("Softmax", {&t}, {{"axis", int64_t{-4}}}).ok());
  Tensor s = MakeTensor<float>(DType::kF32, {}, {1});
  EXPECT_THAT(RunOp("Softmax", {&s}).status().message(), HasSubstr("rank >= 1"));
  Tensor ti = MakeTensor<int32_t>(DType::kI32, {2}, {1, 2});
  EXPECT_THAT(RunOp("Softmax", {&ti}).status().message(), HasSubstr("input 0 (input) has dtype i32"));
  Tensor tb = MakeTensor<uint8_t>(DType::kBool, {2}, {1, 0});
  EXPECT_THAT(RunOp("Softmax", {&tb}).status().message(), HasSubstr("input 0 (input) has dtype bool"));
}

TEST(SoftmaxTest, RegistryHasACpuKernelAndItsAxis) {
  const ir::OpRegistry& registry = runtime::GlobalOpRegistry();
  ASSERT_TRUE(registry.Supports("Softmax", ir::Backend::kCpu));
  EXPECT_NE(registry.Find("Softmax")->FindAttr("axis"), nullptr);
}

TEST(SoftmaxTest, SymbolicShapes) {
  const ir::SymDim batch = ir::SymDim::Symbol(0), seq = ir::SymDim::Symbol(1);
  absl::StatusOr<ir::ShapeContext::Output> r = testing::InferSymbolic("Softmax", {{DType::kF64, {batch, seq}}});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->shape, (ir::SymShape{batch, seq}));
  EXPECT_EQ(r->dtype, DType::kF64);
}

}  // namespace
}  // namespace grove
