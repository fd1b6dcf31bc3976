// Cast from floating point to every integer dtype at the edges: +-inf, NaN,
// values past the target's range and fractions. grove's rule, the same on the
// CPU, the CUDA kernels (jit/kernels/cast.cuh, compared bit for bit with the
// CPU by test/cuda/elementwise_test.cc) and Tensor::CastOf: truncate toward
// zero, saturate to the target's min/max, NaN gives 0. ONNX leaves these
// cases undefined and ONNX Runtime converts with a plain C++ cast (on x86,
// INT_MIN-like "indefinite" values for every out-of-range input, +inf
// included); grove saturates as CUDA's own float-to-integer conversions do,
// so that +inf never becomes a negative number.
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "test/op_test_util.h"

namespace grove {
namespace {

using ::grove::testing::RunOp;
using ::grove::testing::Values;

constexpr double kInf = std::numeric_limits<double>::infinity();

// Edge values, given as f64 and converted exactly to each float dtype
// (1e30 becomes +inf in f16, stays finite in bf16 and f32).
const std::vector<double> kEdges = {kInf, -kInf, std::nan(""), 1e30, -1e30, 2.9, -2.9, 0.5, -0.5, 0.0, 100.0};

// What grove's Cast gives for `x` as the integer type I.
template <typename I>
I Expected(double x) {
  if (std::isnan(x)) return 0;
  const double t = std::trunc(x);
  if (t <= static_cast<double>(std::numeric_limits<I>::min())) return std::numeric_limits<I>::min();
  if (t >= static_cast<double>(std::numeric_limits<I>::max())) return std::numeric_limits<I>::max();
  return static_cast<I>(t);
}

template <typename I>
void ExpectSaturatingCasts(DType to) {
  for (DType from : {DType::kF32, DType::kF64, DType::kF16, DType::kBF16}) {
    SCOPED_TRACE(absl::StrCat(DTypeName(from), " -> ", DTypeName(to)));
    const TensorView edges(DType::kF64, {static_cast<int64_t>(kEdges.size())}, kEdges.data());
    Tensor src = Tensor::CastOf(edges, from).value();
    // The source's own values (f16/bf16 round 2.9 and 100) give the expectation.
    Tensor as_f64 = Tensor::CastOf(src.view(), DType::kF64).value();
    std::vector<I> want;
    for (double x : Values<double>(as_f64)) want.push_back(Expected<I>(x));

    absl::StatusOr<std::vector<Tensor>> out = RunOp("Cast", {&src}, {{"to", static_cast<int64_t>(to)}});
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ(Values<I>((*out)[0]), want);
    Tensor like = Tensor::Create(to, {1}).value();
    out = RunOp("CastLike", {&src, &like});
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ(Values<I>((*out)[0]), want);
    absl::StatusOr<Tensor> cast_of = Tensor::CastOf(src.view(), to);
    ASSERT_TRUE(cast_of.ok()) << cast_of.status();
    EXPECT_EQ(Values<I>(*cast_of), want);
  }
}

TEST(CastTest, FloatToEveryIntegerSaturatesAndNanIsZero) {
  ExpectSaturatingCasts<int8_t>(DType::kI8);
  ExpectSaturatingCasts<int16_t>(DType::kI16);
  ExpectSaturatingCasts<int32_t>(DType::kI32);
  ExpectSaturatingCasts<int64_t>(DType::kI64);
  ExpectSaturatingCasts<uint8_t>(DType::kU8);
  ExpectSaturatingCasts<uint16_t>(DType::kU16);
  ExpectSaturatingCasts<uint32_t>(DType::kU32);
  ExpectSaturatingCasts<uint64_t>(DType::kU64);
}

TEST(CastTest, InfinityToI64IsItsMaximumLikeI32) {
  // The case that was reported: +inf must not come out as INT64_MIN.
  const std::vector<float> in = {INFINITY, -INFINITY, NAN};
  Tensor src = testing::MakeTensor<float>(DType::kF32, {3}, in);
  auto i64 = RunOp("Cast", {&src}, {{"to", static_cast<int64_t>(DType::kI64)}});
  auto i32 = RunOp("Cast", {&src}, {{"to", static_cast<int64_t>(DType::kI32)}});
  ASSERT_TRUE(i64.ok() && i32.ok());
  EXPECT_EQ(Values<int64_t>((*i64)[0]), (std::vector<int64_t>{std::numeric_limits<int64_t>::max(),
                                                               std::numeric_limits<int64_t>::min(), 0}));
  EXPECT_EQ(Values<int32_t>((*i32)[0]), (std::vector<int32_t>{std::numeric_limits<int32_t>::max(),
                                                               std::numeric_limits<int32_t>::min(), 0}));
}

}  // namespace
}  // namespace grove
