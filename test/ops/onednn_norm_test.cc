// BatchNormalization (inference) and Softmax over the last axis through
// oneDNN (lib/backends/cpu/onednn.h) against the reference kernels, both run
// in this process (cpu::ScopedOneDnn), and what stays with the reference
// kernels (training_mode, other dtypes, empty tensors, an axis with elements
// after it, LogSoftmax: oneDNN 2.6's log is off by up to ~2e-6, 1.4e-6 for
// log(1), past the bound below).
//
// Tolerances. BatchNormalization: the reference computes
// (x - mean) / sqrt(var + epsilon) * scale + B in double and rounds once;
// oneDNN takes the same few steps in float, each within u = 2^-24 of its
// exact value, so the results differ by at most 8u * (|x - mean| * |scale| /
// sqrt(var + epsilon) + |B|). Softmax: the reference sums exp(x - max) in
// double; oneDNN's exp is within a few ulps and its float sum of n terms
// within gamma_n of the exact one, so y differs by at most (gamma_n + 8u) * y
// (plus 2^-126 where exp underflows).
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "lib/backends/cpu/onednn.h"
#include "test/op_test_util.h"
#include "test/ops/onednn_isa.h"

namespace grove {
namespace {

using testing::Count;
using testing::MakeTensor;
using testing::RunOp;
using Attrs = std::vector<std::pair<std::string, AttrValue>>;
using Shape = std::vector<int64_t>;

const double kU = std::ldexp(1.0, -24);

Tensor Uniform(const Shape& shape, std::mt19937& rng, float lo, float hi) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(static_cast<size_t>(Count(shape)));
  for (float& x : v) x = dist(rng);
  return MakeTensor<float>(DType::kF32, shape, v);
}

absl::StatusOr<Tensor> RunPath(bool onednn, const std::string& type, std::vector<const Tensor*> inputs,
                               const Attrs& attrs, int64_t* made = nullptr) {
  cpu::ScopedOneDnn scope(onednn);
  const int64_t before = cpu::OneDnnStepsMade();
  absl::StatusOr<std::vector<Tensor>> out = RunOp(type, std::move(inputs), attrs);
  if (made != nullptr) *made = cpu::OneDnnStepsMade() - before;
  if (!out.ok()) return out.status();
  return std::move((*out)[0]);
}

TEST(OneDnnBatchNormTest, RanksAndEpsilonsMatchTheReferenceKernel) {
  std::mt19937 rng(31);
  int cases = 0;
  for (const Shape& shape : {Shape{1, 7}, Shape{5, 16}, Shape{1, 3, 17}, Shape{2, 16, 9, 9}, Shape{1, 64, 8, 8},
                             Shape{3, 5, 4, 3, 6}, Shape{1, 1, 1, 1}}) {
    for (double epsilon : {1e-5, 1e-3, 0.5}) {
      const int64_t c = shape[1];
      const Tensor x = Uniform(shape, rng, -3, 3), scale = Uniform({c}, rng, -2, 2), b = Uniform({c}, rng, -1, 1);
      const Tensor mean = Uniform({c}, rng, -1, 1), var = Uniform({c}, rng, 0, 2);
      const Attrs attrs = {{"epsilon", epsilon}};
      const std::string what = absl::StrCat("X [", absl::StrJoin(shape, ","), "] epsilon ", epsilon);
      int64_t made = 0;
      absl::StatusOr<Tensor> fast = RunPath(true, "BatchNormalization", {&x, &scale, &b, &mean, &var}, attrs, &made);
      ASSERT_TRUE(fast.ok()) << what << ": " << fast.status();
      // Below AVX2 oneDNN may offer only its reference BN, which grove declines.
      if (::grove::testing::OneDnnHasAvx2()) EXPECT_EQ(made, 1) << what;
      absl::StatusOr<Tensor> ref = RunPath(false, "BatchNormalization", {&x, &scale, &b, &mean, &var}, attrs);
      ASSERT_TRUE(ref.ok()) << what << ": " << ref.status();
      ASSERT_EQ(fast->shape(), ref->shape());
      int64_t inner = 1;
      for (size_t d = 2; d < shape.size(); ++d) inner *= shape[d];
      int reported = 0;
      for (int64_t i = 0; i < x.view().num_elements(); ++i) {
        const int64_t ch = (i / inner) % c;
        const double centred = std::fabs(static_cast<double>(x.as<float>()[i]) - mean.as<float>()[ch]);
        const double inv_std = 1.0 / std::sqrt(static_cast<double>(var.as<float>()[ch]) + epsilon);
        const double bound = 8 * kU * (centred * std::fabs(scale.as<float>()[ch]) * inv_std +
                                       std::fabs(b.as<float>()[ch]));
        const double got = fast->as<float>()[i], want = ref->as<float>()[i];
        if (!(std::fabs(got - want) <= bound) && reported++ < 5) {
          ADD_FAILURE() << what << ": element " << i << " is " << got << ", the reference " << want << " (bound "
                        << bound << ")";
        }
      }
      ++cases;
    }
  }
  EXPECT_EQ(cases, 21);
}

TEST(OneDnnBatchNormTest, WhatOneDnnDoesNotTakeKeepsTheReferenceKernel) {
  std::mt19937 rng(32);
  const Tensor x = Uniform({2, 3, 4}, rng, -1, 1), scale = Uniform({3}, rng, 0.5, 1.5), b = Uniform({3}, rng, -1, 1);
  const Tensor mean = Uniform({3}, rng, -1, 1), var = Uniform({3}, rng, 0.5, 1);
  int64_t made = -1;
  // training_mode: the batch's own statistics, the reference kernel's.
  absl::StatusOr<Tensor> training =
      RunPath(true, "BatchNormalization", {&x, &scale, &b, &mean, &var}, {{"training_mode", int64_t{1}}}, &made);
  ASSERT_TRUE(training.ok()) << training.status();
  EXPECT_EQ(made, 0);
  absl::StatusOr<Tensor> inference = RunPath(true, "BatchNormalization", {&x, &scale, &b, &mean, &var}, {}, &made);
  ASSERT_TRUE(inference.ok()) << inference.status();
  if (::grove::testing::OneDnnHasAvx2()) EXPECT_EQ(made, 1);
  EXPECT_NE(testing::Values<float>(*training), testing::Values<float>(*inference));
  // f16 statistics with f32 X.
  Tensor mean16 = Tensor::Create(DType::kF16, {3}).value();
  absl::StatusOr<Tensor> mixed = RunPath(true, "BatchNormalization", {&x, &scale, &b, &mean16, &var}, {}, &made);
  ASSERT_TRUE(mixed.ok()) << mixed.status();
  EXPECT_EQ(made, 0);
  // An empty batch.
  const Tensor empty = Uniform({0, 3, 4}, rng, -1, 1);
  absl::StatusOr<Tensor> none = RunPath(true, "BatchNormalization", {&empty, &scale, &b, &mean, &var}, {}, &made);
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_EQ(made, 0);
  EXPECT_EQ(none->shape(), (Shape{0, 3, 4}));
}

// Softmax of `x` on both paths, checked within the file comment's bound;
// returns the oneDNN steps made.
int64_t CompareSoftmax(const Tensor& x, const Attrs& attrs, const std::string& what) {
  int64_t made = 0;
  absl::StatusOr<Tensor> fast = RunPath(true, "Softmax", {&x}, attrs, &made);
  absl::StatusOr<Tensor> ref = RunPath(false, "Softmax", {&x}, attrs);
  EXPECT_TRUE(fast.ok() && ref.ok()) << what << ": " << fast.status() << " / " << ref.status();
  if (!fast.ok() || !ref.ok()) return made;
  EXPECT_EQ(fast->shape(), ref->shape()) << what;
  const int64_t n = x.shape().back();
  const double gamma = n * kU / (1 - n * kU);
  int reported = 0;
  for (int64_t i = 0; i < x.view().num_elements(); ++i) {
    const double got = fast->as<float>()[i], want = ref->as<float>()[i];
    const double bound = (gamma + 8 * kU) * std::fabs(want) + std::ldexp(1.0, -126);
    if (!(std::fabs(got - want) <= bound) && reported++ < 5) {
      ADD_FAILURE() << what << ": element " << i << " is " << got << ", the reference " << want << " (bound "
                    << bound << ")";
    }
  }
  return made;
}

TEST(OneDnnSoftmaxTest, LastAxisMatchesTheReferenceKernel) {
  std::mt19937 rng(33);
  for (const Shape& shape : {Shape{1}, Shape{7}, Shape{1, 1000}, Shape{4, 3}, Shape{2, 5, 64}, Shape{2, 4, 7, 33},
                             Shape{3, 1}}) {
    const Tensor x = Uniform(shape, rng, -8, 8);
    const std::string what = absl::StrCat("X [", absl::StrJoin(shape, ","), "]");
    EXPECT_EQ(CompareSoftmax(x, {}, what), 1) << what;
    // The same axis named by its index.
    const int64_t axis = static_cast<int64_t>(shape.size()) - 1;
    EXPECT_EQ(CompareSoftmax(x, {{"axis", axis}}, what + " axis " + std::to_string(axis)), 1) << what;
  }
}

// Attention scores with a causal mask of -1e9: exp underflows to 0 on both
// paths.
TEST(OneDnnSoftmaxTest, MaskedScoresMatchTheReferenceKernel) {
  std::mt19937 rng(34);
  const int64_t t = 16;
  Tensor x = Uniform({2, t, t}, rng, -4, 4);
  for (int64_t b = 0; b < 2; ++b) {
    for (int64_t i = 0; i < t; ++i) {
      for (int64_t j = i + 1; j < t; ++j) x.as<float>()[(b * t + i) * t + j] = -1e9f;
    }
  }
  EXPECT_EQ(CompareSoftmax(x, {}, "masked"), 1);
}

// Rows with an infinity or a NaN (an all -inf masked row, +inf, NaN) give
// what the reference kernel gives, NaNs included: such an input runs the
// reference kernel, whose results the CUDA kernels match too.
TEST(OneDnnSoftmaxTest, NonFiniteRowsGiveTheReferenceResults) {
  const float inf = INFINITY;
  const Tensor x = MakeTensor<float>(DType::kF32, {4, 4}, {-inf, -inf, -inf, -inf, -inf, 1, 2, -inf, inf, 1, 2, 3,
                                                           NAN, 0, 1, 2});
  const Tensor finite = MakeTensor<float>(DType::kF32, {1, 4}, {0, 1, 2, 3});
  int64_t made = 0;
  absl::StatusOr<Tensor> fast = RunPath(true, "Softmax", {&x}, {}, &made);
  absl::StatusOr<Tensor> ref = RunPath(false, "Softmax", {&x}, {});
  ASSERT_TRUE(fast.ok() && ref.ok());
  EXPECT_EQ(made, 1) << "oneDNN still prepares the step; only such runs skip it";
  for (int64_t i = 0; i < 16; ++i) {
    const float got = fast->as<float>()[i], want = ref->as<float>()[i];
    EXPECT_TRUE((std::isnan(got) && std::isnan(want)) || got == want) << "element " << i << ": " << got << " vs " << want;
  }
  EXPECT_TRUE(std::isnan(fast->as<float>()[0])) << "an all -inf row is NaN, as ONNX Runtime and PyTorch give";
  EXPECT_EQ(CompareSoftmax(finite, {}, "finite"), 1);
}

TEST(OneDnnSoftmaxTest, WhatOneDnnDoesNotTakeKeepsTheReferenceKernel) {
  std::mt19937 rng(35);
  const Tensor x = Uniform({2, 5, 3}, rng, -2, 2);
  // An axis with elements after it.
  EXPECT_EQ(CompareSoftmax(x, {{"axis", int64_t{1}}}, "axis 1"), 0);
  EXPECT_EQ(CompareSoftmax(x, {{"axis", int64_t{0}}}, "axis 0"), 0);
  int64_t made = -1;
  // An empty row count.
  const Tensor empty = Uniform({0, 4}, rng, -1, 1);
  absl::StatusOr<Tensor> y = RunPath(true, "Softmax", {&empty}, {}, &made);
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(made, 0);
  // f64.
  Tensor x64 = Tensor::Create(DType::kF64, {2}).value();
  x64.as<double>()[0] = 0;
  x64.as<double>()[1] = std::log(3.0);
  absl::StatusOr<Tensor> y64 = RunPath(true, "Softmax", {&x64}, {}, &made);
  ASSERT_TRUE(y64.ok()) << y64.status();
  EXPECT_EQ(made, 0);
  EXPECT_NEAR(y64->as<double>()[0], 0.25, 1e-15);
  // LogSoftmax, even on the last axis of f32.
  const Tensor x1 = MakeTensor<float>(DType::kF32, {1, 1}, {0.5f});
  absl::StatusOr<Tensor> log = RunPath(true, "LogSoftmax", {&x1}, {}, &made);
  ASSERT_TRUE(log.ok()) << log.status();
  EXPECT_EQ(made, 0);
  EXPECT_EQ(log->as<float>()[0], 0.0f);
}

}  // namespace
}  // namespace grove
