// The loss group against a naive reference written here from the ONNX text:
// NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss over inputs of rank
// 2 to 6, every reduction, with and without weights, ignore_index inside,
// below (negative) and above the class range, i32 and i64 targets, f32, f64
// and f16 scores, the optional log_prob output, the operator text's worked
// examples, symbolic shapes, and every error the shape function and kernels
// return.
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
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

// Deterministic values in [-2, 2], different per seed.
std::vector<float> Pattern(int64_t n, int seed) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[i] = static_cast<float>(((i * 37 + seed * 11 + 5) % 41) - 20) / 10.0f;
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

std::string Describe(const Shape& s) { return absl::StrCat("[", absl::StrJoin(s, ","), "]"); }

template <typename T>
void ExpectNear(const std::vector<T>& got, const std::vector<double>& want, double rtol = 1e-5, double atol = 1e-6) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_NEAR(static_cast<double>(got[i]), want[i], atol + rtol * std::abs(want[i])) << "at " << i;
  }
}

struct LossCase {
  Shape xs;               // [N, C, d1..dk]
  bool softmax = false;   // SoftmaxCrossEntropyLoss, else NegativeLogLikelihoodLoss
  std::string reduction;  // empty: attribute absent (mean)
  bool weighted = false;
  std::optional<int64_t> ignore;
};

// Target values: class (i * 7 + 3) % C, with every fifth sample set to
// `ignore` when there is one.
std::vector<int64_t> MakeTargets(const Shape& ts, int64_t classes, std::optional<int64_t> ignore) {
  std::vector<int64_t> t(static_cast<size_t>(Count(ts)));
  for (size_t i = 0; i < t.size(); ++i) {
    t[i] = static_cast<int64_t>(i * 7 + 3) % classes;
    if (ignore.has_value() && i % 5 == 1) t[i] = *ignore;
  }
  return t;
}

// The loss as the operator text defines it: the log-probabilities (the
// input, or log(softmax(scores)) along C) gathered at each sample's class,
// negated, weighted, then reduced.
std::vector<double> RefLoss(const LossCase& c, const std::vector<float>& x, const std::vector<int64_t>& target,
                            const std::vector<float>& weight, std::vector<double>* log_prob) {
  const Shape& xs = c.xs;
  const int64_t classes = xs[1];
  log_prob->assign(x.begin(), x.end());
  if (c.softmax) {
    for (int64_t i = 0; i < Count(xs); ++i) {
      Shape idx = Unravel(i, xs);
      double sum = 0;
      for (int64_t k = 0; k < classes; ++k) {
        idx[1] = k;
        sum += std::exp(static_cast<double>(x[Ravel(idx, xs)]));
      }
      (*log_prob)[i] = std::log(std::exp(static_cast<double>(x[i])) / sum);
    }
  }
  Shape ts = xs;
  ts.erase(ts.begin() + 1);
  std::vector<double> loss(target.size());
  double total = 0, weights = 0;
  for (size_t s = 0; s < target.size(); ++s) {
    if (c.ignore.has_value() && target[s] == *c.ignore) continue;
    Shape idx = Unravel(static_cast<int64_t>(s), ts);
    idx.insert(idx.begin() + 1, target[s]);
    const double w = c.weighted ? weight[target[s]] : 1.0;
    loss[s] = -(*log_prob)[Ravel(idx, xs)] * w;
    total += loss[s];
    weights += w;
  }
  if (c.reduction == "none") return loss;
  if (c.reduction == "sum") return {total};
  return {total / weights};
}

Attrs LossAttrs(const LossCase& c) {
  Attrs a;
  if (!c.reduction.empty()) a.push_back({"reduction", c.reduction});
  if (c.ignore.has_value()) a.push_back({"ignore_index", *c.ignore});
  return a;
}

void ExpectLoss(const LossCase& c, DType target_dtype = DType::kI64) {
  const char* op = c.softmax ? "SoftmaxCrossEntropyLoss" : "NegativeLogLikelihoodLoss";
  SCOPED_TRACE(absl::StrCat(op, " ", Describe(c.xs), " reduction '", c.reduction, "' weighted ", c.weighted, " ignore ",
                            c.ignore.has_value() ? absl::StrCat(*c.ignore) : "none", " target ",
                            DTypeName(target_dtype)));
  const int64_t classes = c.xs[1];
  Shape ts = c.xs;
  ts.erase(ts.begin() + 1);
  const std::vector<float> x = Pattern(Count(c.xs), 1);
  const std::vector<float> weight = {0.5f, 1.5f, 0.25f, 2.0f, 1.0f, 0.75f, 3.0f};
  const std::vector<int64_t> target = MakeTargets(ts, classes, c.ignore);
  std::vector<double> log_prob;
  const std::vector<double> want = RefLoss(c, x, target, weight, &log_prob);

  Tensor xt = MakeTensor<float>(DType::kF32, c.xs, x);
  Tensor tt = target_dtype == DType::kI64
                  ? MakeTensor<int64_t>(DType::kI64, ts, target)
                  : MakeTensor<int32_t>(DType::kI32, ts, std::vector<int32_t>(target.begin(), target.end()));
  Tensor wt = MakeTensor<float>(DType::kF32, {classes}, std::vector<float>(weight.begin(), weight.begin() + classes));
  std::vector<const Tensor*> inputs = {&xt, &tt};
  if (c.weighted) inputs.push_back(&wt);
  const int outputs = c.softmax ? 2 : 1;
  auto out = RunOp(op, inputs, LossAttrs(c), outputs);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].dtype(), DType::kF32);
  EXPECT_EQ((*out)[0].shape(), c.reduction == "none" ? ts : Shape{});
  ExpectNear(Values<float>((*out)[0]), want);
  if (c.softmax) {
    EXPECT_EQ((*out)[1].shape(), c.xs);
    ExpectNear(Values<float>((*out)[1]), log_prob);
    // log_prob is optional: the loss alone is the same.
    auto one = RunOp(op, inputs, LossAttrs(c));
    ASSERT_TRUE(one.ok()) << one.status();
    ExpectNear(Values<float>((*one)[0]), want);
  }
}

TEST(LossTest, EveryReductionWeightAndIgnoreIndex) {
  const std::vector<Shape> shapes = {{3, 5}, {2, 3, 4}, {2, 3, 2, 3}, {1, 4, 2, 1, 3}, {2, 3, 1, 2, 1, 2}};
  const std::vector<std::optional<int64_t>> ignores = {std::nullopt, 1, -1, -100, 10};
  for (bool softmax : {false, true}) {
    for (const Shape& xs : shapes) {
      for (const char* reduction : {"none", "sum", "mean", ""}) {
        for (bool weighted : {false, true}) {
          for (const std::optional<int64_t>& ignore : ignores) {
            ExpectLoss({xs, softmax, reduction, weighted, ignore});
          }
        }
      }
    }
  }
}

TEST(LossTest, Int32Targets) {
  for (bool softmax : {false, true}) {
    ExpectLoss({{2, 3, 4}, softmax, "mean", true, -1}, DType::kI32);
    ExpectLoss({{4, 5}, softmax, "none", false, std::nullopt}, DType::kI32);
  }
}

// The three examples of the NegativeLogLikelihoodLoss operator text.
TEST(LossTest, OperatorTextExamples) {
  Tensor x = MakeTensor<float>(DType::kF32, {2, 3, 2}, {1, 2, 2, 2, 3, 2, 0, 1, 2, 2, 1, 2});
  Tensor t = MakeTensor<int64_t>(DType::kI64, {2, 2}, {2, 1, 0, 2});
  Tensor w = MakeTensor<float>(DType::kF32, {3}, {0.2f, 0.3f, 0.1f});
  auto none = RunOp("NegativeLogLikelihoodLoss", {&x, &t}, {{"reduction", std::string("none")}});
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_EQ((*none)[0].shape(), (Shape{2, 2}));
  ExpectNear(Values<float>((*none)[0]), {-3, -2, 0, -2});
  auto sum = RunOp("NegativeLogLikelihoodLoss", {&x, &t, &w}, {{"reduction", std::string("sum")}});
  ASSERT_TRUE(sum.ok()) << sum.status();
  ExpectNear(Values<float>((*sum)[0]), {-1.1});
  auto mean = RunOp("NegativeLogLikelihoodLoss", {&x, &t, &w});
  ASSERT_TRUE(mean.ok()) << mean.status();
  ExpectNear(Values<float>((*mean)[0]), {-1.1 / 0.7});
}

TEST(LossTest, MeanWithWeightsDividesByTheCountedWeights) {
  // Samples 0 and 2 are ignored; the mean is the weighted sum over samples 1
  // and 3 divided by their weights (0.3 + 0.1), not by all four.
  Tensor x = MakeTensor<float>(DType::kF32, {4, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12});
  Tensor t = MakeTensor<int64_t>(DType::kI64, {4}, {-5, 1, -5, 2});
  Tensor w = MakeTensor<float>(DType::kF32, {3}, {0.2f, 0.3f, 0.1f});
  auto out = RunOp("NegativeLogLikelihoodLoss", {&x, &t, &w}, {{"ignore_index", int64_t{-5}}});
  ASSERT_TRUE(out.ok()) << out.status();
  ExpectNear(Values<float>((*out)[0]), {-(5 * 0.3 + 12 * 0.1) / 0.4});
  // Without weights: the mean over the two samples counted.
  auto plain = RunOp("NegativeLogLikelihoodLoss", {&x, &t}, {{"ignore_index", int64_t{-5}}});
  ASSERT_TRUE(plain.ok()) << plain.status();
  ExpectNear(Values<float>((*plain)[0]), {-(5 + 12) / 2.0});
  // Every sample ignored: 0 / 0, NaN as in the ONNX reference.
  Tensor all = MakeTensor<int64_t>(DType::kI64, {4}, {-5, -5, -5, -5});
  auto nan = RunOp("SoftmaxCrossEntropyLoss", {&x, &all, &w}, {{"ignore_index", int64_t{-5}}});
  ASSERT_TRUE(nan.ok()) << nan.status();
  EXPECT_TRUE(std::isnan(Values<float>((*nan)[0])[0]));
  auto zero =
      RunOp("SoftmaxCrossEntropyLoss", {&x, &all}, {{"ignore_index", int64_t{-5}}, {"reduction", std::string("sum")}});
  ASSERT_TRUE(zero.ok()) << zero.status();
  EXPECT_EQ(Values<float>((*zero)[0]), std::vector<float>{0.0f});
}

TEST(LossTest, Float64AndFloat16) {
  const Shape xs = {2, 3, 2};
  const std::vector<float> xf = Pattern(12, 4);
  const std::vector<int64_t> target = {0, 2, 1, 1};
  LossCase c{xs, true, "none", true, std::nullopt};
  const std::vector<float> weight = {0.5f, 1.5f, 0.25f};
  std::vector<double> log_prob;
  const std::vector<double> want = RefLoss(c, xf, target, weight, &log_prob);
  Tensor x32 = MakeTensor<float>(DType::kF32, xs, xf);
  Tensor w32 = MakeTensor<float>(DType::kF32, {3}, weight);
  Tensor t = MakeTensor<int64_t>(DType::kI64, {2, 2}, target);
  for (DType dtype : {DType::kF64, DType::kF16, DType::kBF16}) {
    SCOPED_TRACE(DTypeName(dtype));
    Tensor x = Tensor::CastOf(x32.view(), dtype).value();
    Tensor w = Tensor::CastOf(w32.view(), dtype).value();
    for (bool softmax : {false, true}) {
      const char* op = softmax ? "SoftmaxCrossEntropyLoss" : "NegativeLogLikelihoodLoss";
      auto out = RunOp(op, {&x, &t, &w}, {{"reduction", std::string("none")}}, softmax ? 2 : 1);
      ASSERT_TRUE(out.ok()) << out.status();
      EXPECT_EQ((*out)[0].dtype(), dtype);
      const std::vector<float> got = Values<float>(Tensor::CastOf((*out)[0].view(), DType::kF32).value());
      const double tol = dtype == DType::kF64 ? 1e-6 : 2e-2;
      if (softmax) {
        ExpectNear(got, want, tol, tol);
        const std::vector<float> lp = Values<float>(Tensor::CastOf((*out)[1].view(), DType::kF32).value());
        ExpectNear(lp, log_prob, tol, tol);
      } else {
        std::vector<double> nll(4);
        for (int s = 0; s < 4; ++s) {
          const int64_t n = s / 2, d = s % 2;
          nll[s] = -xf[(n * 3 + target[s]) * 2 + d] * weight[target[s]];
        }
        ExpectNear(got, nll, tol, tol);
      }
    }
  }
  // f64 exactly, through the double path.
  Tensor x64 = MakeTensor<double>(DType::kF64, {1, 2}, {0.0, 0.0});
  Tensor t1 = MakeTensor<int64_t>(DType::kI64, {1}, {1});
  auto out = RunOp("SoftmaxCrossEntropyLoss", {&x64, &t1});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_NEAR(Values<double>((*out)[0])[0], std::log(2.0), 1e-15);
}

TEST(LossTest, SoftmaxIsStableForLargeScores) {
  Tensor x = MakeTensor<float>(DType::kF32, {1, 3}, {10000, 10001, 10002});
  Tensor t = MakeTensor<int64_t>(DType::kI64, {1}, {2});
  auto out = RunOp("SoftmaxCrossEntropyLoss", {&x, &t}, {}, 2);
  ASSERT_TRUE(out.ok()) << out.status();
  ExpectNear(Values<float>((*out)[0]), {0.40760596});
  ExpectNear(Values<float>((*out)[1]), {-2.40760596, -1.40760596, -0.40760596});
}

TEST(LossTest, ZeroSizeBatch) {
  Tensor x = MakeTensor<float>(DType::kF32, {0, 3, 2}, {});
  Tensor t = MakeTensor<int64_t>(DType::kI64, {0, 2}, {});
  auto none = RunOp("SoftmaxCrossEntropyLoss", {&x, &t}, {{"reduction", std::string("none")}}, 2);
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_EQ((*none)[0].shape(), (Shape{0, 2}));
  EXPECT_EQ((*none)[1].shape(), (Shape{0, 3, 2}));
  auto sum = RunOp("NegativeLogLikelihoodLoss", {&x, &t}, {{"reduction", std::string("sum")}});
  ASSERT_TRUE(sum.ok()) << sum.status();
  EXPECT_EQ(Values<float>((*sum)[0]), std::vector<float>{0.0f});
}

TEST(LossTest, SymbolicShapes) {
  const SymDim n = SymDim::Symbol(0), d = SymDim::Symbol(1);
  auto none = InferSymbolic("NegativeLogLikelihoodLoss", {{DType::kF32, {n, 4, d}}, {DType::kI64, {n, d}}},
                            {{"reduction", std::string("none")}});
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_EQ(none->shape, (SymShape{n, d}));
  EXPECT_EQ(none->dtype, DType::kF32);
  // A constant from either side wins over a symbol.
  auto mixed = InferSymbolic("SoftmaxCrossEntropyLoss", {{DType::kF16, {n, 4, d}}, {DType::kI32, {2, 5}}},
                             {{"reduction", std::string("none")}});
  ASSERT_TRUE(mixed.ok()) << mixed.status();
  EXPECT_EQ(mixed->shape, (SymShape{2, 5}));
  EXPECT_EQ(mixed->dtype, DType::kF16);
  auto mean = InferSymbolic("SoftmaxCrossEntropyLoss", {{DType::kF64, {n, 4}}, {DType::kI64, {n}}, {DType::kF64, {4}}});
  ASSERT_TRUE(mean.ok()) << mean.status();
  EXPECT_EQ(mean->shape, SymShape{});
}

TEST(LossTest, Errors) {
  Tensor x = MakeTensor<float>(DType::kF32, {2, 3}, Pattern(6, 1));
  Tensor t = MakeTensor<int64_t>(DType::kI64, {2}, {0, 2});
  Tensor t_high = MakeTensor<int64_t>(DType::kI64, {2}, {0, 3});
  Tensor t_neg = MakeTensor<int32_t>(DType::kI32, {2}, {-1, 0});
  Tensor t_bad_shape = MakeTensor<int64_t>(DType::kI64, {3}, {0, 0, 0});
  Tensor t_float = MakeTensor<float>(DType::kF32, {2}, {0, 0});
  Tensor w = MakeTensor<float>(DType::kF32, {3}, {1, 1, 1});
  Tensor w_bad = MakeTensor<float>(DType::kF32, {2}, {1, 1});
  Tensor w64 = MakeTensor<double>(DType::kF64, {3}, {1, 1, 1});
  Tensor x1 = MakeTensor<float>(DType::kF32, {3}, {});
  Tensor xi = MakeTensor<int32_t>(DType::kI32, {2, 3}, {});
  for (const char* op : {"NegativeLogLikelihoodLoss", "SoftmaxCrossEntropyLoss"}) {
    SCOPED_TRACE(op);
    const bool sce = std::string(op) == "SoftmaxCrossEntropyLoss";
    const std::string target = sce ? "input 1 (labels)" : "input 1 (target)";
    EXPECT_TRUE(ErrorContains(RunOp(op, {&x, &t_high}).status(),
                              absl::StrCat(target, " holds 3 at [1]; expected a class index in [0, 3)")));
    EXPECT_TRUE(ErrorContains(RunOp(op, {&x, &t_neg}, {{"ignore_index", int64_t{5}}}).status(),
                              absl::StrCat(target,
                                           " holds -1 at [0]; expected a class index in [0, 3) or "
                                           "ignore_index 5")));
    EXPECT_TRUE(ErrorContains(RunOp(op, {&x, &t_bad_shape}).status(),
                              absl::StrCat(target, " has shape [3]; expected the shape of input 0")));
    EXPECT_TRUE(ErrorContains(RunOp(op, {&x, &t_float}).status(), absl::StrCat(target, " has dtype f32")));
    EXPECT_TRUE(
        ErrorContains(RunOp(op, {&x, &t, &w_bad}).status(), sce ? "input 2 (weights) has shape [2]; expected [3]"
                                                                : "input 2 (weight) has shape [2]; expected [3]"));
    EXPECT_TRUE(ErrorContains(RunOp(op, {&x, &t, &w64}).status(), "has dtype f64; expected f32"));
    EXPECT_TRUE(ErrorContains(RunOp(op, {&x, &t}, {{"reduction", std::string("max")}}).status(),
                              "attribute 'reduction' is 'max'; expected 'none', 'sum' or 'mean'"));
    EXPECT_TRUE(ErrorContains(RunOp(op, {&x1, &t}).status(), "has shape [3]; expected rank >= 2"));
    EXPECT_TRUE(ErrorContains(RunOp(op, {&xi, &t}).status(),
                              absl::StrCat(sce ? "input 0 (scores)" : "input 0 (input)",
                                           " has dtype i32; expected one of f32, f64, f16, bf16")));
    // The kernel's own checks, for shapes a symbolic plan let through.
    EXPECT_TRUE(ErrorContains(RunKernelPlanned(op, {&x, &t_bad_shape}, DType::kF32, {}).status(),
                              absl::StrCat(target, " has shape [3]; expected [2]")));
    EXPECT_TRUE(ErrorContains(RunKernelPlanned(op, {&x, &t, &w_bad}, DType::kF32, {}).status(),
                              "has shape [2]; expected [3] (one weight per class)"));
    EXPECT_TRUE(
        ErrorContains(RunKernelPlanned(op, {&x, &t, &w64}, DType::kF32, {}).status(), "has dtype f64; expected f32"));
    EXPECT_TRUE(ErrorContains(RunKernelPlanned(op, {&x, &t}, DType::kF32, {2}).status(),
                              "output 0 was allocated as f32 [2] but the kernel writes f32 []"));
    EXPECT_TRUE(
        ErrorContains(RunKernelPlanned(op, {&x, &t}, DType::kF32, {}, {{"reduction", std::string("avg")}}).status(),
                      "attribute 'reduction' is 'avg'"));
    EXPECT_TRUE(ErrorContains(RunKernelPlanned(op, {&x1, &t}, DType::kF32, {}).status(), "expected rank >= 2"));
    EXPECT_TRUE(ErrorContains(RunKernelPlanned(op, {&x, &t_float}, DType::kF32, {}).status(),
                              absl::StrCat(target, " has dtype f32; expected one of i64, i32")));
    EXPECT_TRUE(ErrorContains(RunKernelPlanned(op, {&x, &t_high}, DType::kF32, {}).status(), "holds 3 at [1]"));
  }
  // The position of a bad class is named in full.
  Tensor x3 = MakeTensor<float>(DType::kF32, {2, 3, 2, 2}, Pattern(24, 2));
  Tensor t3 = MakeTensor<int64_t>(DType::kI64, {2, 2, 2}, {0, 1, 2, 0, 1, 2, 7, 0});
  EXPECT_TRUE(ErrorContains(RunOp("NegativeLogLikelihoodLoss", {&x3, &t3}).status(), "holds 7 at [1, 1, 0]"));
}

}  // namespace
}  // namespace grove::testing
