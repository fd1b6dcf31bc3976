// Elementwise ops against naive references written here: every op and dtype,
// numpy broadcasting (rank 0, size-1 and zero-size dims), f16/bf16 rounding,
// Cast across all dtype pairs, symbolic shapes, and every error returned.
#include <bit>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lib/ir/op_registry.h"
#include "lib/runtime/registry.h"
#include "test/op_test_util.h"
#include "test/ops/broadcast_ref.h"

namespace grove {
namespace {

using ::grove::testing::MakeTensor;
using ::grove::testing::RunOp;
using ::grove::testing::Values;
using ::testing::HasSubstr;
using Shape = std::vector<int64_t>;

using ::grove::testing::BroadcastRef;
using ::grove::testing::Count;
using ::grove::testing::SourceIndex;
using ::grove::testing::Unflatten;

template <typename T>
std::vector<T> Pattern(int64_t n, int64_t seed, bool nonzero = false) {
  std::vector<T> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    int64_t x = ((i + 1) * 37 + seed * 11) % 19 - 9;  // -9..9
    if (nonzero && x == 0) x = 5;
    if constexpr (std::is_floating_point_v<T>) {
      v[i] = static_cast<T>(x) * static_cast<T>(0.75);
    } else {
      v[i] = static_cast<T>(x);
    }
  }
  return v;
}

template <typename T, typename R = T>
void ExpectBinary(const std::string& op, DType dtype, DType out_dtype, const Shape& sa, const Shape& sb,
                  std::type_identity_t<std::function<R(T, T)>> ref) {
  SCOPED_TRACE(op + " " + std::string(DTypeName(dtype)));
  const std::vector<T> a = Pattern<T>(Count(sa), 1);
  const std::vector<T> b = Pattern<T>(Count(sb), 2, /*nonzero=*/op == "Div");
  Tensor ta = MakeTensor<T>(dtype, sa, a);
  Tensor tb = MakeTensor<T>(dtype, sb, b);
  absl::StatusOr<std::vector<Tensor>> out = RunOp(op, {&ta, &tb});
  ASSERT_TRUE(out.ok()) << out.status();
  const Shape so = BroadcastRef({sa, sb});
  ASSERT_EQ((*out)[0].shape(), so);
  ASSERT_EQ((*out)[0].dtype(), out_dtype);
  const std::vector<R> got = Values<R>((*out)[0]);
  for (int64_t i = 0; i < Count(so); ++i) {
    const Shape idx = Unflatten(i, so);
    const R want = ref(a[SourceIndex(idx, sa)], b[SourceIndex(idx, sb)]);
    ASSERT_EQ(got[i], want) << "at flat index " << i;
  }
}

const std::vector<std::pair<Shape, Shape>>& BroadcastCases() {
  static const auto* cases = new std::vector<std::pair<Shape, Shape>>{
      {{2, 3}, {2, 3}},
      {{3, 1}, {1, 4}},
      {{2, 3, 4}, {4}},
      {{2, 3, 4}, {3, 1}},
      {{}, {2, 3}},
      {{2, 3}, {}},
      {{}, {}},
      {{1}, {5}},
      {{2, 1, 4}, {3, 1}},
      {{0, 3}, {1, 3}},
      {{2, 0}, {2, 1}},
      {{0}, {}},
      {{4, 1, 3, 1}, {5, 1, 2}},
      {{1, 1, 7}, {6, 1}},
      {{2, 3, 4, 5}, {2, 3, 4, 5}},
      {{1000}, {1}},
  };
  return *cases;
}

// Integer arithmetic wraps; the reference does it in unsigned.
template <typename T>
T WrapAdd(T a, T b) {
  return static_cast<T>(static_cast<std::make_unsigned_t<T>>(a) + static_cast<std::make_unsigned_t<T>>(b));
}
template <typename T>
T WrapSub(T a, T b) {
  return static_cast<T>(static_cast<std::make_unsigned_t<T>>(a) - static_cast<std::make_unsigned_t<T>>(b));
}
template <typename T>
T WrapMul(T a, T b) {
  return static_cast<T>(static_cast<std::make_unsigned_t<T>>(a) * static_cast<std::make_unsigned_t<T>>(b));
}

template <typename T>
void ExpectArithmeticAllShapes(DType dtype) {
  for (const auto& [sa, sb] : BroadcastCases()) {
    SCOPED_TRACE(::testing::PrintToString(sa) + " op " + ::testing::PrintToString(sb));
    if constexpr (std::is_integral_v<T>) {
      ExpectBinary<T>("Add", dtype, dtype, sa, sb, WrapAdd<T>);
      ExpectBinary<T>("Sub", dtype, dtype, sa, sb, WrapSub<T>);
      ExpectBinary<T>("Mul", dtype, dtype, sa, sb, WrapMul<T>);
    } else {
      ExpectBinary<T>("Add", dtype, dtype, sa, sb, [](T x, T y) { return x + y; });
      ExpectBinary<T>("Sub", dtype, dtype, sa, sb, [](T x, T y) { return x - y; });
      ExpectBinary<T>("Mul", dtype, dtype, sa, sb, [](T x, T y) { return x * y; });
    }
    ExpectBinary<T>("Div", dtype, dtype, sa, sb, [](T x, T y) { return x / y; });
  }
}

TEST(ArithmeticTest, F32AllBroadcastShapes) { ExpectArithmeticAllShapes<float>(DType::kF32); }
TEST(ArithmeticTest, F64AllBroadcastShapes) { ExpectArithmeticAllShapes<double>(DType::kF64); }
TEST(ArithmeticTest, I32AllBroadcastShapes) { ExpectArithmeticAllShapes<int32_t>(DType::kI32); }
TEST(ArithmeticTest, I64AllBroadcastShapes) { ExpectArithmeticAllShapes<int64_t>(DType::kI64); }

TEST(ArithmeticTest, ThreeByOnePlusOneByFour) {
  Tensor a = MakeTensor<float>(DType::kF32, {3, 1}, {1, 2, 3});
  Tensor b = MakeTensor<float>(DType::kF32, {1, 4}, {10, 20, 30, 40});
  auto out = RunOp("Add", {&a, &b});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].shape(), (Shape{3, 4}));
  EXPECT_EQ(Values<float>((*out)[0]), (std::vector<float>{11, 21, 31, 41, 12, 22, 32, 42, 13, 23, 33, 43}));
}

TEST(ArithmeticTest, RankZeroScalars) {
  Tensor a = MakeTensor<double>(DType::kF64, {}, {6});
  Tensor b = MakeTensor<double>(DType::kF64, {}, {4});
  auto out = RunOp("Div", {&a, &b});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE((*out)[0].shape().empty());
  EXPECT_EQ(Values<double>((*out)[0]), std::vector<double>{1.5});
}

TEST(ArithmeticTest, FloatDivisionByZeroGivesInfAndNaN) {
  Tensor a = MakeTensor<float>(DType::kF32, {3}, {1, -1, 0});
  Tensor b = MakeTensor<float>(DType::kF32, {}, {0});
  auto out = RunOp("Div", {&a, &b});
  ASSERT_TRUE(out.ok()) << out.status();
  const std::vector<float> v = Values<float>((*out)[0]);
  EXPECT_EQ(v[0], std::numeric_limits<float>::infinity());
  EXPECT_EQ(v[1], -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(v[2]));
}

TEST(ArithmeticTest, IntegerDivisionTruncatesTowardZero) {
  Tensor a = MakeTensor<int32_t>(DType::kI32, {6}, {7, -7, 7, -7, std::numeric_limits<int32_t>::min(), 5});
  Tensor b = MakeTensor<int32_t>(DType::kI32, {6}, {2, 2, -2, -2, -1, 7});
  auto out = RunOp("Div", {&a, &b});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Values<int32_t>((*out)[0]),
            (std::vector<int32_t>{3, -3, -3, 3, std::numeric_limits<int32_t>::min(), 0}));
}

TEST(ArithmeticTest, IntegerOverflowWraps) {
  Tensor a = MakeTensor<int64_t>(DType::kI64, {2},
                                 {std::numeric_limits<int64_t>::max(), std::numeric_limits<int64_t>::min()});
  Tensor b = MakeTensor<int64_t>(DType::kI64, {2}, {1, 1});
  auto sum = RunOp("Add", {&a, &b});
  ASSERT_TRUE(sum.ok()) << sum.status();
  EXPECT_EQ(Values<int64_t>((*sum)[0]),
            (std::vector<int64_t>{std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::min() + 1}));
  Tensor c = MakeTensor<int64_t>(DType::kI64, {1}, {std::numeric_limits<int64_t>::min()});
  Tensor m1 = MakeTensor<int64_t>(DType::kI64, {1}, {-1});
  auto quot = RunOp("Div", {&c, &m1});
  ASSERT_TRUE(quot.ok()) << quot.status();
  EXPECT_EQ(Values<int64_t>((*quot)[0]), std::vector<int64_t>{std::numeric_limits<int64_t>::min()});
}

TEST(ArithmeticTest, IntegerDivisionByZeroIsAnError) {
  Tensor a32 = MakeTensor<int32_t>(DType::kI32, {2, 2}, {1, 2, 3, 4});
  Tensor b32 = MakeTensor<int32_t>(DType::kI32, {2}, {1, 0});
  auto out32 = RunOp("Div", {&a32, &b32});
  ASSERT_FALSE(out32.ok());
  EXPECT_THAT(out32.status().message(), HasSubstr("division by zero"));
  EXPECT_THAT(out32.status().message(), HasSubstr("input 1 (B)"));
  Tensor a64 = MakeTensor<int64_t>(DType::kI64, {}, {9});
  Tensor b64 = MakeTensor<int64_t>(DType::kI64, {}, {0});
  auto out64 = RunOp("Div", {&a64, &b64});
  ASSERT_FALSE(out64.ok());
  EXPECT_THAT(out64.status().message(), HasSubstr("division by zero"));
}

TEST(ArithmeticTest, ZeroDivisorInAnEmptyBroadcastIsNotUsed) {
  Tensor a = MakeTensor<int32_t>(DType::kI32, {0, 2}, {});
  Tensor b = MakeTensor<int32_t>(DType::kI32, {2}, {0, 0});
  auto out = RunOp("Div", {&a, &b});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].shape(), (Shape{0, 2}));
}

TEST(ArithmeticTest, NonBroadcastableShapesAreAnError) {
  Tensor a = MakeTensor<float>(DType::kF32, {2, 3}, {});
  Tensor b = MakeTensor<float>(DType::kF32, {4}, {});
  auto out = RunOp("Mul", {&a, &b});
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(out.status().message(), HasSubstr("do not broadcast"));
  EXPECT_THAT(out.status().message(), HasSubstr("input 0 (A) [2, 3]"));
  EXPECT_THAT(out.status().message(), HasSubstr("input 1 (B) [4]"));
  EXPECT_THAT(out.status().message(), HasSubstr("Mul"));

  Tensor z = MakeTensor<float>(DType::kF32, {0}, {});
  Tensor three = MakeTensor<float>(DType::kF32, {3}, {});
  EXPECT_FALSE(RunOp("Add", {&z, &three}).ok());
}

TEST(ArithmeticTest, DTypeMismatchIsAnError) {
  Tensor a = MakeTensor<float>(DType::kF32, {2}, {1, 2});
  Tensor b = MakeTensor<int32_t>(DType::kI32, {2}, {1, 2});
  auto out = RunOp("Add", {&a, &b});
  ASSERT_FALSE(out.ok());
  EXPECT_THAT(out.status().message(), HasSubstr("same dtype"));
  EXPECT_THAT(out.status().message(), HasSubstr("f32 and i32"));
}

TEST(ArithmeticTest, UnsupportedDTypeIsAnError) {
  Tensor a = MakeTensor<uint8_t>(DType::kBool, {2}, {1, 0});
  auto out = RunOp("Sub", {&a, &a});
  ASSERT_FALSE(out.ok());
  EXPECT_THAT(out.status().message(), HasSubstr("input 0 (A) has dtype"));
  EXPECT_THAT(out.status().message(), HasSubstr("expected one of f32"));
}

// 8-bit integers wrap like ONNX's (numpy's) uint8/int8 arithmetic.
TEST(ArithmeticTest, EightBitIntegersWrap) {
  Tensor a = MakeTensor<uint8_t>(DType::kU8, {3}, {250, 7, 9});
  Tensor b = MakeTensor<uint8_t>(DType::kU8, {3}, {10, 9, 2});
  EXPECT_EQ(Values<uint8_t>(RunOp("Add", {&a, &b}).value()[0]), (std::vector<uint8_t>{4, 16, 11}));
  EXPECT_EQ(Values<uint8_t>(RunOp("Sub", {&a, &b}).value()[0]), (std::vector<uint8_t>{240, 254, 7}));
  EXPECT_EQ(Values<uint8_t>(RunOp("Div", {&a, &b}).value()[0]), (std::vector<uint8_t>{25, 0, 4}));
  Tensor c = MakeTensor<int8_t>(DType::kI8, {3}, {-128, 100, -7});
  Tensor d = MakeTensor<int8_t>(DType::kI8, {3}, {-1, 2, 2});
  EXPECT_EQ(Values<int8_t>(RunOp("Div", {&c, &d}).value()[0]), (std::vector<int8_t>{-128, 50, -3}));
  EXPECT_EQ(Values<int8_t>(RunOp("Mul", {&c, &d}).value()[0]), (std::vector<int8_t>{-128, -56, -14}));
  Tensor zero = MakeTensor<uint8_t>(DType::kU8, {3}, {1, 0, 1});
  EXPECT_FALSE(RunOp("Div", {&a, &zero}).ok());
}

// Bit patterns: 1.0 0x3c00, 2.0 0x4000, 0.5 0x3800, 3.0 0x4200, 2.5 0x4100, 0.75 0x3a00.
TEST(ArithmeticTest, F16ComputesThroughFloat) {
  Tensor a = MakeTensor<uint16_t>(DType::kF16, {3}, {0x3c00, 0x4000, 0x3800});
  Tensor b = MakeTensor<uint16_t>(DType::kF16, {3}, {0x4000, 0x3800, 0x3400});
  auto add = RunOp("Add", {&a, &b});
  ASSERT_TRUE(add.ok()) << add.status();
  EXPECT_EQ(Values<uint16_t>((*add)[0]), (std::vector<uint16_t>{0x4200, 0x4100, 0x3a00}));
  auto mul = RunOp("Mul", {&a, &b});
  ASSERT_TRUE(mul.ok()) << mul.status();
  EXPECT_EQ(Values<uint16_t>((*mul)[0]), (std::vector<uint16_t>{0x4000, 0x3c00, 0x3000}));  // 2, 1, 0.125
  // 65504 + 32 is past the largest half: the sum rounds to inf.
  Tensor big = MakeTensor<uint16_t>(DType::kF16, {}, {0x7bff});
  Tensor t32 = MakeTensor<uint16_t>(DType::kF16, {}, {0x5000});
  auto inf = RunOp("Add", {&big, &t32});
  ASSERT_TRUE(inf.ok()) << inf.status();
  EXPECT_EQ(Values<uint16_t>((*inf)[0]), std::vector<uint16_t>{0x7c00});
}

// bf16: 1.0 0x3f80, 2.0 0x4000, 3.0 0x4040, 0.5 0x3f00, 1.5 0x3fc0.
TEST(ArithmeticTest, BF16ComputesThroughFloat) {
  Tensor a = MakeTensor<uint16_t>(DType::kBF16, {2, 1}, {0x3f80, 0x4000});
  Tensor b = MakeTensor<uint16_t>(DType::kBF16, {2}, {0x4000, 0x3f00});
  auto add = RunOp("Add", {&a, &b});
  ASSERT_TRUE(add.ok()) << add.status();
  EXPECT_EQ((*add)[0].shape(), (Shape{2, 2}));
  EXPECT_EQ(Values<uint16_t>((*add)[0]), (std::vector<uint16_t>{0x4040, 0x3fc0, 0x4080, 0x4020}));
  auto div = RunOp("Div", {&a, &b});
  ASSERT_TRUE(div.ok()) << div.status();
  EXPECT_EQ(Values<uint16_t>((*div)[0]), (std::vector<uint16_t>{0x3f00, 0x4000, 0x3f80, 0x4080}));
}

// --- activations -------------------------------------------------------------

template <typename T>
void ExpectUnary(const std::string& op, DType dtype, const std::vector<T>& in,
                 std::type_identity_t<std::function<T(T)>> ref) {
  SCOPED_TRACE(op + " " + std::string(DTypeName(dtype)));
  Tensor t = MakeTensor<T>(dtype, {static_cast<int64_t>(in.size())}, in);
  auto out = RunOp(op, {&t});
  ASSERT_TRUE(out.ok()) << out.status();
  const std::vector<T> got = Values<T>((*out)[0]);
  for (size_t i = 0; i < in.size(); ++i) {
    const T want = ref(in[i]);
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(got[i])) << "input " << in[i];
    } else if (std::isinf(want)) {
      EXPECT_EQ(got[i], want) << "input " << in[i];
    } else {
      EXPECT_NEAR(got[i], want, std::abs(want) * 1e-6 + 1e-7) << "input " << in[i];
    }
  }
}

template <typename T>
void ExpectActivations(DType dtype) {
  const T inf = std::numeric_limits<T>::infinity();
  const std::vector<T> in = {-100, -3.5, -1,  -0.25, 0,    0.25,
                             1,    3.5,  100, inf,   -inf, std::numeric_limits<T>::quiet_NaN()};
  ExpectUnary<T>("Relu", dtype, in, [](T x) { return std::isnan(x) ? x : (x > 0 ? x : T(0)); });
  ExpectUnary<T>("Sigmoid", dtype, in,
                 [](T x) { return static_cast<T>(1.0 / (1.0 + std::exp(-static_cast<double>(x)))); });
  ExpectUnary<T>("Tanh", dtype, in, [](T x) { return static_cast<T>(std::tanh(static_cast<double>(x))); });
}

TEST(ActivationTest, F32) { ExpectActivations<float>(DType::kF32); }

// A large f32 Sigmoid and Tanh: the vectorised paths (simd_exp.h) over several work
// chunks with an odd tail, against the formula in double.
TEST(ActivationTest, F32SigmoidOverManyChunks) {
  std::vector<float> in(100003);
  for (size_t i = 0; i < in.size(); ++i) in[i] = -95.0f + 190.0f * static_cast<float>(i) / in.size();
  ExpectUnary<float>("Sigmoid", DType::kF32, in,
                     [](float x) { return static_cast<float>(1.0 / (1.0 + std::exp(-static_cast<double>(x)))); });
  ExpectUnary<float>("Tanh", DType::kF32, in, [](float x) { return static_cast<float>(std::tanh(static_cast<double>(x))); });
}
TEST(ActivationTest, F64) { ExpectActivations<double>(DType::kF64); }

TEST(ActivationTest, F16AndBF16) {
  // f16: -2 0xc000, 0 0x0000, 2 0x4000; sigmoid(0) = 0.5 0x3800.
  Tensor h = MakeTensor<uint16_t>(DType::kF16, {3}, {0xc000, 0x0000, 0x4000});
  auto relu = RunOp("Relu", {&h});
  ASSERT_TRUE(relu.ok()) << relu.status();
  EXPECT_EQ(Values<uint16_t>((*relu)[0]), (std::vector<uint16_t>{0x0000, 0x0000, 0x4000}));
  auto sig = RunOp("Sigmoid", {&h});
  ASSERT_TRUE(sig.ok()) << sig.status();
  // sigmoid(2) = 0.880797 -> nearest half 0.88086 (0x3b0c); sigmoid(-2) = 0.119203 -> 0x2fa1.
  EXPECT_EQ(Values<uint16_t>((*sig)[0]), (std::vector<uint16_t>{0x2fa1, 0x3800, 0x3b0c}));
  // bf16: tanh(1) = 0.761594 -> 0x3f43 (0.76171875).
  Tensor b = MakeTensor<uint16_t>(DType::kBF16, {2}, {0x3f80, 0xbf80});
  auto tanh = RunOp("Tanh", {&b});
  ASSERT_TRUE(tanh.ok()) << tanh.status();
  EXPECT_EQ(Values<uint16_t>((*tanh)[0]), (std::vector<uint16_t>{0x3f43, 0xbf43}));
}

TEST(ActivationTest, ShapesAreKeptIncludingRankZeroAndEmpty) {
  Tensor s = MakeTensor<float>(DType::kF32, {}, {-2});
  auto out = RunOp("Relu", {&s});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE((*out)[0].shape().empty());
  EXPECT_EQ(Values<float>((*out)[0]), std::vector<float>{0});
  Tensor e = MakeTensor<float>(DType::kF32, {2, 0, 3}, {});
  auto empty = RunOp("Sigmoid", {&e});
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_EQ((*empty)[0].shape(), (Shape{2, 0, 3}));
}

TEST(ActivationTest, IntegerInputIsAnError) {
  Tensor t = MakeTensor<int32_t>(DType::kI32, {2}, {1, -1});
  for (const char* op : {"Relu", "Sigmoid", "Tanh"}) {
    auto out = RunOp(op, {&t});
    ASSERT_FALSE(out.ok()) << op;
    EXPECT_THAT(out.status().message(), HasSubstr("input 0 (X) has dtype i32"));
  }
}

// --- comparisons ------------------------------------------------------------

template <typename T>
void ExpectComparisons(DType dtype) {
  for (const auto& [sa, sb] : BroadcastCases()) {
    SCOPED_TRACE(::testing::PrintToString(sa) + " cmp " + ::testing::PrintToString(sb));
    ExpectBinary<T, uint8_t>("Greater", dtype, DType::kBool, sa, sb, [](T x, T y) -> uint8_t { return x > y; });
    ExpectBinary<T, uint8_t>("Less", dtype, DType::kBool, sa, sb, [](T x, T y) -> uint8_t { return x < y; });
    ExpectBinary<T, uint8_t>("Equal", dtype, DType::kBool, sa, sb, [](T x, T y) -> uint8_t { return x == y; });
  }
}

TEST(CompareTest, F32) { ExpectComparisons<float>(DType::kF32); }
TEST(CompareTest, F64) { ExpectComparisons<double>(DType::kF64); }
TEST(CompareTest, I32) { ExpectComparisons<int32_t>(DType::kI32); }
TEST(CompareTest, I64) { ExpectComparisons<int64_t>(DType::kI64); }
TEST(CompareTest, I8) { ExpectComparisons<int8_t>(DType::kI8); }

TEST(CompareTest, U8ComparesUnsigned) {
  Tensor a = MakeTensor<uint8_t>(DType::kU8, {2}, {200, 3});
  Tensor b = MakeTensor<uint8_t>(DType::kU8, {2}, {100, 3});
  auto out = RunOp("Greater", {&a, &b});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Values<uint8_t>((*out)[0]), (std::vector<uint8_t>{1, 0}));
}

TEST(CompareTest, F16AndBF16) {
  Tensor a = MakeTensor<uint16_t>(DType::kF16, {3}, {0x3c00, 0xc000, 0x7e00});  // 1, -2, NaN
  Tensor b = MakeTensor<uint16_t>(DType::kF16, {3}, {0x3c00, 0x3c00, 0x7e00});
  auto lt = RunOp("Less", {&a, &b});
  ASSERT_TRUE(lt.ok()) << lt.status();
  EXPECT_EQ(Values<uint8_t>((*lt)[0]), (std::vector<uint8_t>{0, 1, 0}));
  auto eq = RunOp("Equal", {&a, &b});
  ASSERT_TRUE(eq.ok()) << eq.status();
  EXPECT_EQ(Values<uint8_t>((*eq)[0]), (std::vector<uint8_t>{1, 0, 0}));  // NaN != NaN
  Tensor c = MakeTensor<uint16_t>(DType::kBF16, {2}, {0x3f80, 0x4000});
  Tensor d = MakeTensor<uint16_t>(DType::kBF16, {}, {0x3fc0});  // 1.5
  auto gt = RunOp("Greater", {&c, &d});
  ASSERT_TRUE(gt.ok()) << gt.status();
  EXPECT_EQ(Values<uint8_t>((*gt)[0]), (std::vector<uint8_t>{0, 1}));
}

TEST(CompareTest, EqualOnBoolTreatsAnyNonZeroByteAsTrue) {
  Tensor a = MakeTensor<uint8_t>(DType::kBool, {4}, {0, 1, 0, 7});
  Tensor b = MakeTensor<uint8_t>(DType::kBool, {4}, {0, 0, 1, 1});
  auto out = RunOp("Equal", {&a, &b});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Values<uint8_t>((*out)[0]), (std::vector<uint8_t>{1, 0, 0, 1}));
}

TEST(CompareTest, OrderedComparisonOfBoolIsAnError) {
  Tensor a = MakeTensor<uint8_t>(DType::kBool, {1}, {1});
  for (const char* op : {"Greater", "Less"}) {
    auto out = RunOp(op, {&a, &a});
    ASSERT_FALSE(out.ok()) << op;
    EXPECT_THAT(out.status().message(), HasSubstr("has dtype bool"));
  }
}

TEST(CompareTest, MismatchedDTypesAndShapesAreErrors) {
  Tensor a = MakeTensor<int64_t>(DType::kI64, {2}, {1, 2});
  Tensor b = MakeTensor<int32_t>(DType::kI32, {2}, {1, 2});
  EXPECT_THAT(RunOp("Equal", {&a, &b}).status().message(), HasSubstr("same dtype"));
  Tensor c = MakeTensor<int64_t>(DType::kI64, {3}, {1, 2, 3});
  EXPECT_THAT(RunOp("Less", {&a, &c}).status().message(), HasSubstr("do not broadcast"));
}

// --- Where ------------------------------------------------------------------

template <typename T>
void ExpectWhere(DType dtype, const Shape& sc, const Shape& sx, const Shape& sy) {
  SCOPED_TRACE(::testing::PrintToString(sc) + ::testing::PrintToString(sx) + ::testing::PrintToString(sy));
  std::vector<uint8_t> c(static_cast<size_t>(Count(sc)));
  for (size_t i = 0; i < c.size(); ++i) c[i] = static_cast<uint8_t>((i * 7 + 3) % 3 == 0);
  std::vector<T> x(static_cast<size_t>(Count(sx)));
  std::vector<T> y(static_cast<size_t>(Count(sy)));
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<T>(i + 1);
  for (size_t i = 0; i < y.size(); ++i) y[i] = static_cast<T>(100 + i);
  Tensor tc = MakeTensor<uint8_t>(DType::kBool, sc, c);
  Tensor tx = MakeTensor<T>(dtype, sx, x);
  Tensor ty = MakeTensor<T>(dtype, sy, y);
  auto out = RunOp("Where", {&tc, &tx, &ty});
  ASSERT_TRUE(out.ok()) << out.status();
  const Shape so = BroadcastRef({sc, sx, sy});
  ASSERT_EQ((*out)[0].shape(), so);
  ASSERT_EQ((*out)[0].dtype(), dtype);
  const std::vector<T> got = Values<T>((*out)[0]);
  for (int64_t i = 0; i < Count(so); ++i) {
    const Shape idx = Unflatten(i, so);
    const T want = c[SourceIndex(idx, sc)] ? x[SourceIndex(idx, sx)] : y[SourceIndex(idx, sy)];
    ASSERT_EQ(got[i], want) << "at flat index " << i;
  }
}

TEST(WhereTest, ThreeWayBroadcasting) {
  const std::vector<std::vector<Shape>> cases = {
      {{2, 3}, {2, 3}, {2, 3}},
      {{2, 1, 3}, {1, 4, 1}, {}},
      {{3, 1}, {1, 4}, {3, 4}},
      {{}, {5}, {5}},
      {{4}, {}, {}},
      {{}, {}, {}},
      {{0, 3}, {1, 3}, {3}},
      {{2, 1}, {1, 0}, {}},
      {{1, 5, 1}, {2, 1, 3}, {5, 1}},
      // Rows where the condition steps by 1 and each value by 0 or 1 (the
      // kernel's own loops for them): a causal mask, a value and a scalar.
      {{3, 17}, {3, 17}, {}},
      {{3, 17}, {}, {3, 17}},
      {{40, 33}, {1}, {}},
  };
  for (const auto& c : cases) {
    ExpectWhere<float>(DType::kF32, c[0], c[1], c[2]);
    ExpectWhere<int64_t>(DType::kI64, c[0], c[1], c[2]);
    ExpectWhere<int8_t>(DType::kI8, c[0], c[1], c[2]);
    ExpectWhere<uint16_t>(DType::kF16, c[0], c[1], c[2]);
    ExpectWhere<double>(DType::kF64, c[0], c[1], c[2]);
  }
}

TEST(WhereTest, BoolValues) {
  Tensor c = MakeTensor<uint8_t>(DType::kBool, {3}, {1, 0, 1});
  Tensor x = MakeTensor<uint8_t>(DType::kBool, {3}, {0, 0, 1});
  Tensor y = MakeTensor<uint8_t>(DType::kBool, {}, {1});
  auto out = RunOp("Where", {&c, &x, &y});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].dtype(), DType::kBool);
  EXPECT_EQ(Values<uint8_t>((*out)[0]), (std::vector<uint8_t>{0, 1, 1}));
}

TEST(WhereTest, Errors) {
  Tensor fc = MakeTensor<float>(DType::kF32, {2}, {1, 0});
  Tensor x = MakeTensor<float>(DType::kF32, {2}, {1, 2});
  Tensor xi = MakeTensor<int32_t>(DType::kI32, {2}, {1, 2});
  Tensor c = MakeTensor<uint8_t>(DType::kBool, {2}, {1, 0});
  Tensor c3 = MakeTensor<uint8_t>(DType::kBool, {3}, {1, 0, 1});
  EXPECT_THAT(RunOp("Where", {&fc, &x, &x}).status().message(), HasSubstr("input 0 (condition) has dtype f32"));
  EXPECT_THAT(RunOp("Where", {&c, &x, &xi}).status().message(), HasSubstr("input 1 (X) and input 2 (Y)"));
  auto bad = RunOp("Where", {&c3, &x, &x});
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("do not broadcast"));
  EXPECT_THAT(bad.status().message(), HasSubstr("input 0 (condition) [3]"));
}

// --- Cast -------------------------------------------------------------------

constexpr DType kAllDTypes[] = {DType::kF32, DType::kF64, DType::kF16, DType::kBF16, DType::kI64,
                                DType::kI32, DType::kI8,  DType::kU8,  DType::kBool};

// Test-side encoders for the four values {0, 1, 3, 100}, exact in every
// dtype (bool holds {0, 1, 1, 1}).
std::vector<uint8_t> Encode(DType dtype, const std::vector<double>& values) {
  std::vector<uint8_t> bytes;
  auto put = [&](auto v) {
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    bytes.insert(bytes.end(), p, p + sizeof(v));
  };
  for (double v : values) {
    switch (dtype) {
      case DType::kF32:
        put(static_cast<float>(v));
        break;
      case DType::kF64:
        put(v);
        break;
      case DType::kF16: {
        // Exact small integers: sign 0, exponent e+15, 10-bit mantissa.
        uint16_t h = 0;
        if (v != 0) {
          int e = 0;
          const double m = std::frexp(v, &e);  // v = m * 2^e, m in [0.5, 1)
          h = static_cast<uint16_t>(((e - 1 + 15) << 10) | static_cast<uint16_t>((m * 2 - 1) * 1024));
        }
        put(h);
        break;
      }
      case DType::kBF16:
        put(static_cast<uint16_t>(std::bit_cast<uint32_t>(static_cast<float>(v)) >> 16));
        break;
      case DType::kI64:
        put(static_cast<int64_t>(v));
        break;
      case DType::kI32:
        put(static_cast<int32_t>(v));
        break;
      case DType::kI8:
        put(static_cast<int8_t>(v));
        break;
      case DType::kU8:
        put(static_cast<uint8_t>(v));
        break;
      case DType::kBool:
        put(static_cast<uint8_t>(v != 0));
        break;
      default:
        break;
    }
  }
  return bytes;
}

std::vector<uint8_t> Bytes(const Tensor& t) {
  const auto* p = static_cast<const uint8_t*>(t.data());
  return std::vector<uint8_t>(p, p + t.view().byte_size());
}

TEST(CastTest, EveryPairOfDTypes) {
  const std::vector<double> values = {0, 1, 3, 100};
  for (DType from : kAllDTypes) {
    for (DType to : kAllDTypes) {
      SCOPED_TRACE(absl::StrCat(DTypeName(from), " -> ", DTypeName(to)));
      const std::vector<double> in = from == DType::kBool ? std::vector<double>{0, 1, 1, 1} : values;
      Tensor t = MakeTensor<uint8_t>(from, {2, 2}, Encode(from, in));
      auto out = RunOp("Cast", {&t}, {{"to", static_cast<int64_t>(to)}});
      ASSERT_TRUE(out.ok()) << out.status();
      EXPECT_EQ((*out)[0].dtype(), to);
      EXPECT_EQ((*out)[0].shape(), (Shape{2, 2}));
      EXPECT_EQ(Bytes((*out)[0]), Encode(to, in));
    }
  }
}

template <typename To, typename From>
std::vector<To> CastValues(DType from, DType to, const std::vector<From>& in) {
  Tensor t = MakeTensor<From>(from, {static_cast<int64_t>(in.size())}, in);
  auto out = RunOp("Cast", {&t}, {{"to", static_cast<int64_t>(to)}});
  EXPECT_TRUE(out.ok()) << out.status();
  if (!out.ok()) return {};
  return Values<To>((*out)[0]);
}

TEST(CastTest, FloatToIntegerTruncatesAndSaturates) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(CastValues<int32_t>(DType::kF32, DType::kI32,
                                std::vector<float>{2.7f, -2.7f, 0.5f, -0.5f, 1e10f, -1e10f, nan}),
            (std::vector<int32_t>{2, -2, 0, 0, std::numeric_limits<int32_t>::max(),
                                  std::numeric_limits<int32_t>::min(), 0}));
  EXPECT_EQ(CastValues<int64_t>(DType::kF64, DType::kI64, std::vector<double>{-7.99, 1e300, 9007199254740993.0}),
            (std::vector<int64_t>{-7, std::numeric_limits<int64_t>::max(), 9007199254740992}));
  EXPECT_EQ(CastValues<uint8_t>(DType::kF32, DType::kU8, std::vector<float>{200.9f, 255.5f, 256.0f, -3.0f}),
            (std::vector<uint8_t>{200, 255, 255, 0}));
  EXPECT_EQ(CastValues<int8_t>(DType::kF64, DType::kI8, std::vector<double>{-128.9, 127.9, 300}),
            (std::vector<int8_t>{-128, 127, 127}));
  // f16 -2.5 (0xc100) -> -2.
  EXPECT_EQ(CastValues<int32_t>(DType::kF16, DType::kI32, std::vector<uint16_t>{0xc100}),
            std::vector<int32_t>{-2});
}

TEST(CastTest, IntegerToIntegerWraps) {
  EXPECT_EQ(CastValues<int8_t>(DType::kI32, DType::kI8, std::vector<int32_t>{300, -129, 127}),
            (std::vector<int8_t>{44, 127, 127}));
  EXPECT_EQ(CastValues<uint8_t>(DType::kI64, DType::kU8, std::vector<int64_t>{-1, 256, 257}),
            (std::vector<uint8_t>{255, 0, 1}));
  EXPECT_EQ(CastValues<int64_t>(DType::kI32, DType::kI64, std::vector<int32_t>{-5}), std::vector<int64_t>{-5});
  EXPECT_EQ(CastValues<int32_t>(DType::kU8, DType::kI32, std::vector<uint8_t>{250}), std::vector<int32_t>{250});
  EXPECT_EQ(CastValues<int32_t>(DType::kI8, DType::kI32, std::vector<int8_t>{-6}), std::vector<int32_t>{-6});
}

TEST(CastTest, ToBoolIsNonZero) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(CastValues<uint8_t>(DType::kF32, DType::kBool, std::vector<float>{0.0f, -0.0f, 0.5f, -3.0f, nan}),
            (std::vector<uint8_t>{0, 0, 1, 1, 1}));
  EXPECT_EQ(CastValues<uint8_t>(DType::kI64, DType::kBool, std::vector<int64_t>{0, 1LL << 40}),
            (std::vector<uint8_t>{0, 1}));
  EXPECT_EQ(CastValues<uint8_t>(DType::kF16, DType::kBool, std::vector<uint16_t>{0x8000, 0x0001}),
            (std::vector<uint8_t>{0, 1}));
  // A bool byte other than 0/1 reads as true.
  EXPECT_EQ(CastValues<float>(DType::kBool, DType::kF32, std::vector<uint8_t>{0, 1, 42}),
            (std::vector<float>{0, 1, 1}));
}

TEST(CastTest, LargeIntegersRoundToNearestFloat) {
  EXPECT_EQ(CastValues<float>(DType::kI64, DType::kF32, std::vector<int64_t>{(1 << 24) + 1, (1 << 24) + 3}),
            (std::vector<float>{16777216.0f, 16777220.0f}));
  // bf16 has 8 significant bits: 257 ties to 256 (even), 259 rounds to 260.
  EXPECT_EQ(CastValues<uint16_t>(DType::kI32, DType::kBF16, std::vector<int32_t>{257, 259}),
            (std::vector<uint16_t>{0x4380, 0x4382}));
  // f16: 2049 ties to 2048, 2051 ties to 2052, 70000 overflows to inf.
  EXPECT_EQ(CastValues<uint16_t>(DType::kI32, DType::kF16, std::vector<int32_t>{2049, 2051, 70000, -70000}),
            (std::vector<uint16_t>{0x6800, 0x6802, 0x7c00, 0xfc00}));
}

// Test-side f16 decoder, written from the IEEE definition.
double HalfValue(uint16_t h) {
  const int exp = (h >> 10) & 0x1f;
  const int mant = h & 0x3ff;
  const double sign = (h & 0x8000) ? -1.0 : 1.0;
  if (exp == 0x1f) return mant ? std::numeric_limits<double>::quiet_NaN() : sign * INFINITY;
  if (exp == 0) return sign * std::ldexp(mant, -24);
  return sign * std::ldexp(1024 + mant, exp - 25);
}

std::vector<uint16_t> AllFiniteNonNegativeBits(uint16_t first_non_finite) {
  std::vector<uint16_t> bits;
  for (uint32_t b = 0; b < first_non_finite; ++b) bits.push_back(static_cast<uint16_t>(b));
  return bits;
}

TEST(CastTest, F16ToF32IsExactForEveryValue) {
  std::vector<uint16_t> all(65536);
  for (uint32_t i = 0; i < 65536; ++i) all[i] = static_cast<uint16_t>(i);
  const std::vector<float> f = CastValues<float>(DType::kF16, DType::kF32, all);
  ASSERT_EQ(f.size(), all.size());
  for (uint32_t i = 0; i < 65536; ++i) {
    const double want = HalfValue(static_cast<uint16_t>(i));
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(f[i])) << std::hex << i;
    } else {
      ASSERT_EQ(static_cast<double>(f[i]), want) << std::hex << i;
    }
  }
  // And back: every value round-trips, NaN stays NaN.
  const std::vector<uint16_t> back = CastValues<uint16_t>(DType::kF32, DType::kF16, f);
  for (uint32_t i = 0; i < 65536; ++i) {
    if (std::isnan(HalfValue(static_cast<uint16_t>(i)))) {
      EXPECT_TRUE(std::isnan(HalfValue(back[i]))) << std::hex << i;
    } else {
      ASSERT_EQ(back[i], i) << std::hex << i;
    }
  }
}

// Between two neighbouring halves, the midpoint goes to the one with an even
// mantissa and anything off the midpoint to the nearer one; f32 and f64
// sources alike.
TEST(CastTest, F32AndF64ToF16RoundToNearestEven) {
  const std::vector<uint16_t> lows = AllFiniteNonNegativeBits(0x7bff);  // each has a finite upper neighbour
  std::vector<float> mids, above, below;
  std::vector<double> mids64, above64;
  for (uint16_t h : lows) {
    const double mid = (HalfValue(h) + HalfValue(static_cast<uint16_t>(h + 1))) / 2;
    mids.push_back(static_cast<float>(mid));
    above.push_back(std::nextafter(static_cast<float>(mid), INFINITY));
    below.push_back(std::nextafter(static_cast<float>(mid), -INFINITY));
    mids64.push_back(mid);
    // Just above the midpoint by less than float precision: rounding the
    // double to float first would land on the midpoint and tie to even.
    above64.push_back(mid + std::ldexp(std::max(mid, 1e-30), -40));
  }
  const auto m = CastValues<uint16_t>(DType::kF32, DType::kF16, mids);
  const auto a = CastValues<uint16_t>(DType::kF32, DType::kF16, above);
  const auto b = CastValues<uint16_t>(DType::kF32, DType::kF16, below);
  const auto m64 = CastValues<uint16_t>(DType::kF64, DType::kF16, mids64);
  const auto a64 = CastValues<uint16_t>(DType::kF64, DType::kF16, above64);
  for (size_t i = 0; i < lows.size(); ++i) {
    const uint16_t lo = lows[i];
    const uint16_t hi = static_cast<uint16_t>(lo + 1);
    const uint16_t even = (lo & 1) == 0 ? lo : hi;
    ASSERT_EQ(m[i], even) << std::hex << lo;
    ASSERT_EQ(m64[i], even) << std::hex << lo;
    ASSERT_EQ(a[i], hi) << std::hex << lo;
    ASSERT_EQ(a64[i], hi) << std::hex << lo;
    ASSERT_EQ(b[i], lo) << std::hex << lo;
  }
}

TEST(CastTest, F16SpecialValues) {
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<uint16_t> h = CastValues<uint16_t>(
      DType::kF32, DType::kF16,
      std::vector<float>{65504.0f, 65519.99f, 65520.0f, 1e6f, -1e6f, inf, -inf, -0.0f, 1e-8f, 2.98023224e-8f,
                         std::ldexp(1.0f, -24), std::numeric_limits<float>::quiet_NaN()});
  ASSERT_EQ(h.size(), 12u);
  EXPECT_EQ(h[0], 0x7bff);
  EXPECT_EQ(h[1], 0x7bff);
  EXPECT_EQ(h[2], 0x7c00);  // the midpoint to 65536 ties to the even inf
  EXPECT_EQ(h[3], 0x7c00);
  EXPECT_EQ(h[4], 0xfc00);
  EXPECT_EQ(h[5], 0x7c00);
  EXPECT_EQ(h[6], 0xfc00);
  EXPECT_EQ(h[7], 0x8000);
  EXPECT_EQ(h[8], 0x0000);
  EXPECT_EQ(h[9], 0x0000);  // exactly half the smallest subnormal ties to 0
  EXPECT_EQ(h[10], 0x0001);
  EXPECT_EQ(h[11] & 0x7c00, 0x7c00);
  EXPECT_NE(h[11] & 0x03ff, 0);
}

double BFloat16Value(uint16_t b) { return std::bit_cast<float>(static_cast<uint32_t>(b) << 16); }

TEST(CastTest, F32AndF64ToBF16RoundToNearestEven) {
  // Every finite non-negative bf16 below the largest.
  const std::vector<uint16_t> lows = AllFiniteNonNegativeBits(0x7f7f);
  std::vector<float> mids, above, below;
  std::vector<double> above64;
  for (uint16_t h : lows) {
    const double mid = (BFloat16Value(h) + BFloat16Value(static_cast<uint16_t>(h + 1))) / 2;
    mids.push_back(static_cast<float>(mid));
    above.push_back(std::nextafter(static_cast<float>(mid), INFINITY));
    below.push_back(std::nextafter(static_cast<float>(mid), -INFINITY));
    above64.push_back(mid + std::ldexp(mid, -40));
  }
  const auto m = CastValues<uint16_t>(DType::kF32, DType::kBF16, mids);
  const auto a = CastValues<uint16_t>(DType::kF32, DType::kBF16, above);
  const auto b = CastValues<uint16_t>(DType::kF32, DType::kBF16, below);
  const auto a64 = CastValues<uint16_t>(DType::kF64, DType::kBF16, above64);
  for (size_t i = 0; i < lows.size(); ++i) {
    const uint16_t lo = lows[i];
    const uint16_t hi = static_cast<uint16_t>(lo + 1);
    ASSERT_EQ(m[i], (lo & 1) == 0 ? lo : hi) << std::hex << lo;
    ASSERT_EQ(a[i], hi) << std::hex << lo;
    ASSERT_EQ(b[i], lo) << std::hex << lo;
    ASSERT_EQ(a64[i], hi) << std::hex << lo;
  }
  const std::vector<uint16_t> s = CastValues<uint16_t>(
      DType::kF32, DType::kBF16,
      std::vector<float>{std::numeric_limits<float>::max(), -std::numeric_limits<float>::infinity(),
                         std::numeric_limits<float>::quiet_NaN(), -0.0f});
  EXPECT_EQ(s[0], 0x7f80);  // rounds up past the largest bf16
  EXPECT_EQ(s[1], 0xff80);
  EXPECT_EQ(s[2] & 0x7f80, 0x7f80);
  EXPECT_NE(s[2] & 0x007f, 0);
  EXPECT_EQ(s[3], 0x8000);
  // bf16 -> f32 is exact.
  EXPECT_EQ(CastValues<float>(DType::kBF16, DType::kF32, std::vector<uint16_t>{0x3f81, 0xc2f7}),
            (std::vector<float>{1.0078125f, -123.5f}));
}

TEST(CastTest, F16ToBF16AndBack) {
  // f16 1+2^-10 (0x3c01) is between bf16 1.0 and 1.0078125: rounds to 1.0.
  EXPECT_EQ(CastValues<uint16_t>(DType::kF16, DType::kBF16, std::vector<uint16_t>{0x3c01, 0x4000}),
            (std::vector<uint16_t>{0x3f80, 0x4000}));
  // bf16 1e5 (0x47c3 = 99840) is past the f16 range.
  EXPECT_EQ(CastValues<uint16_t>(DType::kBF16, DType::kF16, std::vector<uint16_t>{0x47c3, 0x3f80}),
            (std::vector<uint16_t>{0x7c00, 0x3c00}));
}

TEST(CastTest, RankZeroAndEmpty) {
  Tensor s = MakeTensor<double>(DType::kF64, {}, {-1.5});
  auto out = RunOp("Cast", {&s}, {{"to", static_cast<int64_t>(DType::kI32)}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE((*out)[0].shape().empty());
  EXPECT_EQ(Values<int32_t>((*out)[0]), std::vector<int32_t>{-1});
  Tensor e = MakeTensor<float>(DType::kF32, {3, 0}, {});
  auto empty = RunOp("Cast", {&e}, {{"to", static_cast<int64_t>(DType::kF16)}});
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_EQ((*empty)[0].shape(), (Shape{3, 0}));
}

TEST(CastTest, BadTargetIsAnError) {
  Tensor t = MakeTensor<float>(DType::kF32, {1}, {1});
  for (int64_t to : {0, 15, -1, 16}) {  // 14 is string
    auto out = RunOp("Cast", {&t}, {{"to", to}});
    ASSERT_FALSE(out.ok()) << to;
    EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(out.status().message(), HasSubstr(absl::StrCat("attribute 'to' is ", to)));
    EXPECT_THAT(out.status().message(), HasSubstr("expected a grove dtype"));
  }
  auto missing = RunOp("Cast", {&t});
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(missing.status().message(), HasSubstr("'to'"));
}

// --- Identity ---------------------------------------------------------------

TEST(IdentityTest, CopiesEveryDType) {
  for (DType dtype : kAllDTypes) {
    SCOPED_TRACE(DTypeName(dtype));
    std::vector<uint8_t> bytes(DTypeSize(dtype) * 6);
    for (size_t i = 0; i < bytes.size(); ++i)
      bytes[i] = static_cast<uint8_t>(dtype == DType::kBool ? i % 2 : i * 13 + 1);
    Tensor t = MakeTensor<uint8_t>(dtype, {2, 3}, bytes);
    auto out = RunOp("Identity", {&t});
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ((*out)[0].dtype(), dtype);
    EXPECT_EQ((*out)[0].shape(), (Shape{2, 3}));
    EXPECT_EQ(Bytes((*out)[0]), bytes);
  }
}

TEST(IdentityTest, RankZeroAndEmpty) {
  Tensor s = MakeTensor<int64_t>(DType::kI64, {}, {42});
  auto out = RunOp("Identity", {&s});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Values<int64_t>((*out)[0]), std::vector<int64_t>{42});
  Tensor e = MakeTensor<float>(DType::kF32, {0, 4}, {});
  auto empty = RunOp("Identity", {&e});
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_EQ((*empty)[0].shape(), (Shape{0, 4}));
}

// --- registry, symbolic shapes and run-time checks ---------------------------

TEST(ElementwiseRegistryTest, EveryOpHasACpuKernel) {
  const ir::OpRegistry& registry = runtime::GlobalOpRegistry();
  for (const char* op : {"Add", "Sub", "Mul", "Div", "Relu", "Sigmoid", "Tanh", "Greater", "Less", "Equal",
                         "Where", "Cast", "Identity"}) {
    EXPECT_TRUE(registry.Supports(op, ir::Backend::kCpu)) << op;
    ASSERT_NE(registry.Find(op), nullptr) << op;
    EXPECT_NE(registry.Find(op)->infer, nullptr) << op;
  }
  const ir::OpDef* cast = registry.Find("Cast");
  ASSERT_NE(cast->FindAttr("to"), nullptr);
  EXPECT_TRUE(cast->FindAttr("to")->required);
  EXPECT_EQ(cast->FindAttr("to")->kind, ir::AttrKind::kInt);
  EXPECT_EQ(registry.Find("Where")->min_inputs, 3);
  EXPECT_TRUE(registry.Find("Add")->attrs.empty());
}

struct SymbolicResult {
  absl::Status status;
  std::vector<ir::ShapeContext::Output> outputs;
};

SymbolicResult InferSymbolic(const std::string& type, std::vector<std::pair<DType, ir::SymShape>> inputs,
                             std::vector<std::pair<std::string, AttrValue>> attrs = {}) {
  ir::Graph graph;
  graph.symbols = {{"batch", 1, 64}, {"seq", 1, 512}};
  ir::Node node;
  node.type = type;
  node.def = runtime::GlobalOpRegistry().Find(type);
  node.outputs = {static_cast<int>(inputs.size())};
  for (auto& [name, value] : attrs) node.attrs.Set(name, value);
  std::vector<ir::ShapeContext::Input> in;
  for (auto& [dtype, shape] : inputs) {
    node.inputs.push_back(static_cast<int>(in.size()));
    in.push_back({true, dtype, shape, nullptr});
  }
  ir::ShapeContext ctx(node, graph, std::move(in), nullptr);
  SymbolicResult r;
  r.status = ir::InferShapes(ctx);
  r.outputs = ctx.outputs();
  return r;
}

TEST(ElementwiseShapeTest, SymbolicBroadcasting) {
  const ir::SymDim batch = ir::SymDim::Symbol(0), seq = ir::SymDim::Symbol(1);
  SymbolicResult r = InferSymbolic("Add", {{DType::kF32, {batch, 1}}, {DType::kF32, {1, 4}}});
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_EQ(r.outputs[0].shape, (ir::SymShape{batch, 4}));
  EXPECT_EQ(r.outputs[0].dtype, DType::kF32);

  r = InferSymbolic("Where", {{DType::kBool, {seq}}, {DType::kI64, {batch, 1}}, {DType::kI64, {}}});
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_EQ(r.outputs[0].shape, (ir::SymShape{batch, seq}));
  EXPECT_EQ(r.outputs[0].dtype, DType::kI64);

  r = InferSymbolic("Equal", {{DType::kI32, {batch * seq}}, {DType::kI32, {batch * seq}}});
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_EQ(r.outputs[0].shape, (ir::SymShape{batch * seq}));
  EXPECT_EQ(r.outputs[0].dtype, DType::kBool);

  r = InferSymbolic("Cast", {{DType::kF32, {batch, seq + 1}}}, {{"to", int64_t{6}}});
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_EQ(r.outputs[0].shape, (ir::SymShape{batch, seq + 1}));
  EXPECT_EQ(r.outputs[0].dtype, DType::kI32);

  // A symbolic dim against a constant other than 1 is accepted here and
  // checked by the kernel once both are concrete.
  r = InferSymbolic("Mul", {{DType::kF32, {batch, 3}}, {DType::kF32, {5, 3}}});
  ASSERT_TRUE(r.status.ok()) << r.status;
  ASSERT_EQ(r.outputs[0].shape.size(), 2u);
  EXPECT_EQ(r.outputs[0].shape[1], ir::SymDim(3));

  r = InferSymbolic("Sub", {{DType::kF32, {batch, 3}}, {DType::kF32, {batch, 4}}});
  ASSERT_FALSE(r.status.ok());
  EXPECT_THAT(r.status.message(), HasSubstr("input 0 (A) [batch, 3]"));
}

// The inputs' shapes are described only when they do not broadcast; the
// message names every input, in order, then the dim at fault.
TEST(ElementwiseShapeTest, BroadcastErrorDescribesEveryInput) {
  const ir::SymDim batch = ir::SymDim::Symbol(0);
  SymbolicResult r =
      InferSymbolic("Where", {{DType::kBool, {batch, 3}}, {DType::kF32, {batch, 4}}, {DType::kF32, {1}}});
  ASSERT_FALSE(r.status.ok());
  EXPECT_EQ(r.status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status.message(),
              HasSubstr(": input 0 (condition) [batch, 3] and input 1 (X) [batch, 4] and input 2 (Y) [1]: "
                        "shapes do not broadcast: dim 1 is 3 in one input and 4 in another"));

  r = InferSymbolic("Pow", {{DType::kF32, {2, batch}}, {DType::kF32, {3, 1}}});
  ASSERT_FALSE(r.status.ok());
  EXPECT_THAT(r.status.message(), HasSubstr("input 0 (X) [2, batch] and input 1 (Y) [3, 1]: shapes do not "
                                            "broadcast: dim 0 is 2 in one input and 3 in another"));
}

// The shape function let [seq] and [batch] broadcast to [seq]; if batch turns
// out to be 4 and seq 1, the kernel must refuse instead of writing past [1].
TEST(ElementwiseShapeTest, KernelChecksSymbolicDimsAtRunTime) {
  const ir::OpDef* def = runtime::GlobalOpRegistry().Find("Add");
  ir::Node node;
  node.type = "Add";
  node.def = def;
  node.inputs = {0, 1};
  node.outputs = {2};
  Tensor a = MakeTensor<float>(DType::kF32, {1}, {1});
  Tensor b = MakeTensor<float>(DType::kF32, {4}, {1, 2, 3, 4});
  Tensor out = MakeTensor<float>(DType::kF32, {1}, {});
  TensorView va = a.view(), vb = b.view(), vo = out.view();
  std::vector<TensorView*> ins = {&va, &vb};
  std::vector<TensorView*> outs = {&vo};
  ir::KernelContext ctx(node, ins, outs, nullptr);
  absl::Status s = ir::RunKernel(ir::Backend::kCpu, ctx);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("broadcast to [4]"));
  EXPECT_THAT(s.message(), HasSubstr("planned as [1]"));
}

}  // namespace
}  // namespace grove
