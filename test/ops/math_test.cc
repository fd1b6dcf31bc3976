// The math ops against naive references written here: unary functions and
// activations (with their attributes) on every float dtype, integer Neg/Abs,
// Pow across base/exponent dtype pairs, Clip in both forms, the variadic
// Min Max Sum Mean with multidirectional broadcasting, GreaterOrEqual and
// LessOrEqual, Not And Or Xor, CastLike against Cast, the trigonometric and
// hyperbolic functions, Softsign Selu Celu ThresholdedRelu Shrink Sign, IsNaN
// IsInf, PRelu, Mod (both sign conventions), BitShift, Dropout's inference
// forms and the window generators, rank 0, zero-size dims, symbolic shapes and
// every error returned.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <numbers>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lib/ir/element_types.h"
#include "lib/ir/op_registry.h"
#include "lib/runtime/registry.h"
#include "test/op_test_util.h"
#include "test/ops/broadcast_ref.h"
#include "test/ops/symbolic_shape_util.h"

namespace grove {
namespace {

using ::grove::testing::ErrorContains;
using ::grove::testing::InferSymbolic;
using ::grove::testing::MakeTensor;
using ::grove::testing::RunKernelPlanned;
using ::grove::testing::RunOp;
using ::grove::testing::SymInput;
using ::grove::testing::Values;
using ::testing::HasSubstr;
using Shape = std::vector<int64_t>;
using Attrs = std::vector<std::pair<std::string, AttrValue>>;

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

using ::grove::testing::BroadcastRef;
using ::grove::testing::Count;
using ::grove::testing::SourceIndex;
using ::grove::testing::Unflatten;

template <typename T>
std::vector<T> Pattern(int64_t n, int64_t seed) {
  std::vector<T> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const int64_t x = ((i + 1) * 37 + seed * 11) % 19 - 9;  // -9..9
    if constexpr (std::is_floating_point_v<T>) {
      v[i] = static_cast<T>(x) * static_cast<T>(0.75);
    } else if constexpr (std::is_unsigned_v<T>) {
      v[i] = static_cast<T>(x + 9);
    } else {
      v[i] = static_cast<T>(x);
    }
  }
  return v;
}

// got within rtol/atol of want; NaN matches NaN, an infinity itself.
::testing::AssertionResult Close(double got, double want, double rtol, double atol = 1e-7) {
  if (std::isnan(want)) {
    if (std::isnan(got)) return ::testing::AssertionSuccess();
  } else if (std::isinf(want)) {
    if (got == want) return ::testing::AssertionSuccess();
  } else if (std::abs(got - want) <= atol + rtol * std::abs(want)) {
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure() << "got " << got << ", want " << want;
}

std::vector<uint16_t> ToHalf(const std::vector<float>& v) {
  std::vector<uint16_t> out;
  for (float f : v) out.push_back(ir::FloatToHalf(f).bits);
  return out;
}
std::vector<uint16_t> ToBF16(const std::vector<float>& v) {
  std::vector<uint16_t> out;
  for (float f : v) out.push_back(ir::FloatToBFloat16(f).bits);
  return out;
}
float FromHalf(uint16_t b) { return ir::HalfToFloat(ir::Half{b}); }
float FromBF16(uint16_t b) { return ir::BFloat16ToFloat(ir::BFloat16{b}); }

// --- unary functions and activations ------------------------------------------

struct UnaryCase {
  std::string op;
  Attrs attrs;
  std::function<double(double)> ref;
};

double Clamp01(double y) { return y < 0 ? 0 : (y > 1 ? 1 : y); }

std::vector<UnaryCase> UnaryCases() {
  return {
      {"Sqrt", {}, [](double x) { return std::sqrt(x); }},
      {"Exp", {}, [](double x) { return std::exp(x); }},
      {"Log", {}, [](double x) { return std::log(x); }},
      {"Reciprocal", {}, [](double x) { return 1.0 / x; }},
      {"Erf", {}, [](double x) { return std::erf(x); }},
      {"Neg", {}, [](double x) { return -x; }},
      {"Abs", {}, [](double x) { return std::fabs(x); }},
      {"Softplus", {}, [](double x) { return std::log1p(std::exp(x)); }},
      {"LeakyRelu", {}, [](double x) { return x < 0 ? 0.01 * x : x; }},
      {"LeakyRelu", {{"alpha", 0.2}}, [](double x) { return x < 0 ? 0.2 * x : x; }},
      {"Elu", {}, [](double x) { return x < 0 ? std::expm1(x) : x; }},
      {"Elu", {{"alpha", 2.0}}, [](double x) { return x < 0 ? 2.0 * std::expm1(x) : x; }},
      {"HardSigmoid", {}, [](double x) { return Clamp01(0.2 * x + 0.5); }},
      {"HardSigmoid", {{"alpha", 0.5}, {"beta", 0.25}}, [](double x) { return Clamp01(0.5 * x + 0.25); }},
      {"HardSwish", {}, [](double x) { return x * Clamp01(x / 6 + 0.5); }},
      {"Floor", {}, [](double x) { return std::floor(x); }},
      {"Ceil", {}, [](double x) { return std::ceil(x); }},
      {"Round", {}, [](double x) { return std::nearbyint(x); }},
      {"Gelu", {}, [](double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }},
      {"Gelu",
       {{"approximate", std::string("none")}},
       [](double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }},
      {"Gelu",
       {{"approximate", std::string("tanh")}},
       [](double x) {
         return 0.5 * x * (1 + std::tanh(std::sqrt(2 / std::numbers::pi) * (x + 0.044715 * x * x * x)));
       }},
  };
}

template <typename T>
void ExpectUnaryFloat(DType dtype) {
  const std::vector<T> in = {-100, -3.5, -1, -0.25, 0, 0.25, 1, 3.5, 100, T(kInf), T(-kInf), T(kNaN), -0.0};
  for (const UnaryCase& c : UnaryCases()) {
    SCOPED_TRACE(absl::StrCat(c.op, " ", DTypeName(dtype), " ", c.attrs.size(), " attrs"));
    Tensor t = MakeTensor<T>(dtype, {static_cast<int64_t>(in.size())}, in);
    auto out = RunOp(c.op, {&t}, c.attrs);
    ASSERT_TRUE(out.ok()) << out.status();
    ASSERT_EQ((*out)[0].dtype(), dtype);
    const std::vector<T> got = Values<T>((*out)[0]);
    for (size_t i = 0; i < in.size(); ++i) {
      // The reference runs in double on the value rounded to T.
      const double want = static_cast<double>(static_cast<T>(c.ref(static_cast<double>(in[i]))));
      EXPECT_TRUE(Close(got[i], want, 1e-6, 1e-30)) << "input " << in[i];
    }
  }
}

TEST(MathUnaryTest, F32) { ExpectUnaryFloat<float>(DType::kF32); }
TEST(MathUnaryTest, F64) { ExpectUnaryFloat<double>(DType::kF64); }

// f16 and bf16 compute in float and round once: within one rounding of the
// reference.
TEST(MathUnaryTest, F16AndBF16) {
  const std::vector<float> in = {-6, -2.5, -1, -0.375, 0, 0.375, 1, 2.5, 6};
  for (const UnaryCase& c : UnaryCases()) {
    SCOPED_TRACE(c.op);
    Tensor h = MakeTensor<uint16_t>(DType::kF16, {3, 3}, ToHalf(in));
    Tensor b = MakeTensor<uint16_t>(DType::kBF16, {9}, ToBF16(in));
    auto oh = RunOp(c.op, {&h}, c.attrs);
    auto ob = RunOp(c.op, {&b}, c.attrs);
    ASSERT_TRUE(oh.ok()) << oh.status();
    ASSERT_TRUE(ob.ok()) << ob.status();
    EXPECT_EQ((*oh)[0].dtype(), DType::kF16);
    EXPECT_EQ((*oh)[0].shape(), (Shape{3, 3}));
    EXPECT_EQ((*ob)[0].dtype(), DType::kBF16);
    const std::vector<uint16_t> gh = Values<uint16_t>((*oh)[0]);
    const std::vector<uint16_t> gb = Values<uint16_t>((*ob)[0]);
    for (size_t i = 0; i < in.size(); ++i) {
      const double want = c.ref(in[i]);
      EXPECT_TRUE(Close(FromHalf(gh[i]), want, 1e-3, 1e-4)) << "f16 input " << in[i];
      EXPECT_TRUE(Close(FromBF16(gb[i]), want, 8e-3, 1e-3)) << "bf16 input " << in[i];
    }
  }
}

TEST(MathUnaryTest, ShapesAreKeptIncludingRankZeroAndEmpty) {
  Tensor s = MakeTensor<float>(DType::kF32, {}, {4});
  auto out = RunOp("Sqrt", {&s});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE((*out)[0].shape().empty());
  EXPECT_EQ(Values<float>((*out)[0]), std::vector<float>{2});
  Tensor e = MakeTensor<float>(DType::kF32, {2, 0, 3}, {});
  for (const UnaryCase& c : UnaryCases()) {
    auto empty = RunOp(c.op, {&e}, c.attrs);
    ASSERT_TRUE(empty.ok()) << c.op << ": " << empty.status();
    EXPECT_EQ((*empty)[0].shape(), (Shape{2, 0, 3})) << c.op;
  }
}

TEST(MathUnaryTest, SoftplusDoesNotOverflow) {
  Tensor t = MakeTensor<float>(DType::kF32, {3}, {200, -200, 30});
  auto out = RunOp("Softplus", {&t});
  ASSERT_TRUE(out.ok()) << out.status();
  const std::vector<float> got = Values<float>((*out)[0]);
  EXPECT_EQ(got[0], 200.0f);
  EXPECT_EQ(got[1], 0.0f);
  EXPECT_NEAR(got[2], 30.0f, 1e-5);
}

TEST(MathUnaryTest, IntegerNegAndAbsWrap) {
  Tensor i8 = MakeTensor<int8_t>(DType::kI8, {5}, {-128, -5, 0, 7, 127});
  auto neg = RunOp("Neg", {&i8});
  ASSERT_TRUE(neg.ok()) << neg.status();
  EXPECT_EQ(Values<int8_t>((*neg)[0]), (std::vector<int8_t>{-128, 5, 0, -7, -127}));
  auto abs = RunOp("Abs", {&i8});
  ASSERT_TRUE(abs.ok()) << abs.status();
  EXPECT_EQ(Values<int8_t>((*abs)[0]), (std::vector<int8_t>{-128, 5, 0, 7, 127}));

  const int64_t min64 = std::numeric_limits<int64_t>::min();
  Tensor i64 = MakeTensor<int64_t>(DType::kI64, {2, 2}, {min64, -3, 4, 0});
  auto neg64 = RunOp("Neg", {&i64});
  ASSERT_TRUE(neg64.ok()) << neg64.status();
  EXPECT_EQ(Values<int64_t>((*neg64)[0]), (std::vector<int64_t>{min64, 3, -4, 0}));
  auto abs64 = RunOp("Abs", {&i64});
  ASSERT_TRUE(abs64.ok()) << abs64.status();
  EXPECT_EQ(Values<int64_t>((*abs64)[0]), (std::vector<int64_t>{min64, 3, 4, 0}));

  Tensor i32 = MakeTensor<int32_t>(DType::kI32, {}, {-9});
  auto abs32 = RunOp("Abs", {&i32});
  ASSERT_TRUE(abs32.ok()) << abs32.status();
  EXPECT_EQ(Values<int32_t>((*abs32)[0]), std::vector<int32_t>{9});

  Tensor u8 = MakeTensor<uint8_t>(DType::kU8, {3}, {0, 200, 255});
  auto absu = RunOp("Abs", {&u8});
  ASSERT_TRUE(absu.ok()) << absu.status();
  EXPECT_EQ(Values<uint8_t>((*absu)[0]), (std::vector<uint8_t>{0, 200, 255}));
  // Neg has no unsigned variant in ONNX.
  EXPECT_TRUE(ErrorContains(RunOp("Neg", {&u8}).status(), "input 0 (X) has dtype u8"));
}

TEST(MathUnaryTest, RoundSendsHalvesToTheEvenNeighbour) {
  Tensor t = MakeTensor<float>(DType::kF32, {8}, {0.5f, 1.5f, 2.5f, -0.5f, -1.5f, -2.5f, 2.4f, -2.6f});
  auto out = RunOp("Round", {&t});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Values<float>((*out)[0]), (std::vector<float>{0, 2, 2, -0.0f, -2, -2, 2, -3}));
}

TEST(MathUnaryTest, ErfOfIntegersTruncates) {
  Tensor t = MakeTensor<int32_t>(DType::kI32, {4}, {-10, 0, 1, 10});
  auto out = RunOp("Erf", {&t});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Values<int32_t>((*out)[0]), (std::vector<int32_t>{-1, 0, 0, 1}));
}

TEST(MathUnaryTest, FloatOnlyOpsRefuseOtherDTypes) {
  Tensor i = MakeTensor<int32_t>(DType::kI32, {2}, {1, 4});
  Tensor b = MakeTensor<uint8_t>(DType::kBool, {2}, {1, 0});
  for (const char* op :
       {"Sqrt", "Exp", "Log", "Reciprocal", "Softplus", "LeakyRelu", "Elu", "HardSigmoid", "HardSwish", "Gelu",
        "Floor", "Ceil", "Round"}) {
    EXPECT_TRUE(ErrorContains(RunOp(op, {&i}).status(), "input 0 (X) has dtype i32; expected one of f32")) << op;
  }
  for (const char* op : {"Abs", "Neg", "Erf"}) {
    EXPECT_TRUE(ErrorContains(RunOp(op, {&b}).status(), "has dtype bool")) << op;
  }
}

TEST(MathUnaryTest, GeluRejectsAnUnknownApproximation) {
  Tensor t = MakeTensor<float>(DType::kF32, {1}, {1});
  EXPECT_TRUE(ErrorContains(RunOp("Gelu", {&t}, {{"approximate", std::string("fast")}}).status(),
                            "attribute 'approximate' is 'fast'; expected 'none' or 'tanh'"));
}

TEST(MathUnaryTest, KernelChecksTheOutput) {
  Tensor t = MakeTensor<float>(DType::kF32, {3}, {1, 2, 3});
  EXPECT_TRUE(ErrorContains(RunKernelPlanned("Exp", {&t}, DType::kF32, {4}).status(),
                            "output 0 was allocated with shape [4] but the kernel writes [3]"));
  EXPECT_TRUE(ErrorContains(RunKernelPlanned("Exp", {&t}, DType::kF64, {3}).status(),
                            "output 0 was allocated as f64 but the kernel writes f32"));
}

// --- Pow ----------------------------------------------------------------------

template <typename B, typename E>
void ExpectPow(DType bd, DType ed, const Shape& sb, const Shape& se, const std::vector<B>& base,
               const std::vector<E>& exponent, std::function<B(B, E)> ref) {
  SCOPED_TRACE(absl::StrCat("Pow ", DTypeName(bd), "^", DTypeName(ed), " [", absl::StrJoin(sb, ","), "] [",
                            absl::StrJoin(se, ","), "]"));
  Tensor tb = MakeTensor<B>(bd, sb, base);
  Tensor te = MakeTensor<E>(ed, se, exponent);
  auto out = RunOp("Pow", {&tb, &te});
  ASSERT_TRUE(out.ok()) << out.status();
  const Shape so = BroadcastRef({sb, se});
  ASSERT_EQ((*out)[0].shape(), so);
  ASSERT_EQ((*out)[0].dtype(), bd);
  const std::vector<B> got = Values<B>((*out)[0]);
  for (int64_t i = 0; i < Count(so); ++i) {
    const Shape idx = Unflatten(i, so);
    const B want = ref(base[SourceIndex(idx, sb)], exponent[SourceIndex(idx, se)]);
    if constexpr (std::is_floating_point_v<B>) {
      EXPECT_TRUE(Close(got[i], want, 1e-6)) << "at " << i;
    } else {
      EXPECT_EQ(got[i], want) << "at " << i;
    }
  }
}

TEST(PowTest, FloatsBroadcast) {
  const std::vector<std::pair<Shape, Shape>> cases = {
      {{2, 3}, {2, 3}}, {{3, 1}, {1, 4}}, {{2, 3, 4}, {4}}, {{}, {2, 3}}, {{2, 3}, {}}, {{0, 3}, {1, 3}}, {{}, {}}};
  for (const auto& [sb, se] : cases) {
    std::vector<float> base = Pattern<float>(Count(sb), 1);
    std::vector<float> exponent = Pattern<float>(Count(se), 2);
    for (float& e : exponent) e /= 3;  // fractional powers of negative bases give NaN on both sides
    ExpectPow<float, float>(DType::kF32, DType::kF32, sb, se, base, exponent, [](float b, float e) {
      return static_cast<float>(std::pow(static_cast<double>(b), static_cast<double>(e)));
    });
    ExpectPow<double, double>(DType::kF64, DType::kF64, sb, se, Pattern<double>(Count(sb), 1),
                              Pattern<double>(Count(se), 2), [](double b, double e) { return std::pow(b, e); });
  }
}

TEST(PowTest, FloatBaseWithIntegerExponent) {
  const std::vector<float> base = {2, -3, 0.5, 10, 0};
  ExpectPow<float, int32_t>(DType::kF32, DType::kI32, {5}, {5}, base, {3, 2, -2, 5, 0},
                            [](float b, int32_t e) { return static_cast<float>(std::pow(b, e)); });
  ExpectPow<float, int64_t>(DType::kF32, DType::kI64, {5}, {1}, base, {3},
                            [](float b, int64_t e) { return static_cast<float>(std::pow(b, e)); });
  ExpectPow<double, uint8_t>(DType::kF64, DType::kU8, {5, 1}, {2}, {2, -3, 0.5, 10, 0}, {0, 7},
                             [](double b, uint8_t e) { return std::pow(b, e); });
  ExpectPow<double, float>(DType::kF64, DType::kF32, {3}, {3}, {2, 9, 0.25}, {0.5f, 0.5f, -1.5f},
                           [](double b, float e) { return std::pow(b, static_cast<double>(e)); });
}

TEST(PowTest, IntegerBaseIsExactAndWraps) {
  // 3^39 is past 2^53: a double pow would round it.
  ExpectPow<int64_t, int64_t>(DType::kI64, DType::kI64, {4}, {4}, {3, -2, 7, 0}, {39, 3, 0, 0},
                              [](int64_t b, int64_t e) -> int64_t {
                                int64_t r = 1;
                                for (int64_t i = 0; i < e; ++i) r *= b;
                                return r;
                              });
  Tensor b = MakeTensor<int32_t>(DType::kI32, {3}, {2, 2, -2});
  Tensor e = MakeTensor<int32_t>(DType::kI32, {3}, {31, 32, 31});
  auto out = RunOp("Pow", {&b, &e});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Values<int32_t>((*out)[0]),
            (std::vector<int32_t>{std::numeric_limits<int32_t>::min(), 0, std::numeric_limits<int32_t>::min()}));
  // Negative exponents: what truncating the real result gives; 0 saturates.
  Tensor nb = MakeTensor<int64_t>(DType::kI64, {5}, {2, 1, -1, -1, 0});
  Tensor ne = MakeTensor<int64_t>(DType::kI64, {5}, {-1, -5, -3, -2, -1});
  auto neg = RunOp("Pow", {&nb, &ne});
  ASSERT_TRUE(neg.ok()) << neg.status();
  EXPECT_EQ(Values<int64_t>((*neg)[0]), (std::vector<int64_t>{0, 1, -1, 1, std::numeric_limits<int64_t>::max()}));
}

TEST(PowTest, IntegerBaseWithFloatExponentTruncates) {
  ExpectPow<int32_t, float>(DType::kI32, DType::kF32, {4}, {4}, {2, 3, -8, 10}, {0.5f, 2.0f, 1.0f / 3, -1.0f},
                            [](int32_t b, float e) -> int32_t {
                              const double r = std::pow(static_cast<double>(b), static_cast<double>(e));
                              return std::isnan(r) ? 0 : static_cast<int32_t>(r);
                            });
  ExpectPow<int64_t, float>(DType::kI64, DType::kF32, {2, 2}, {}, {1, 2, 3, 4}, {2.5f},
                            [](int64_t b, float e) { return static_cast<int64_t>(std::pow(b, 2.5)); });
}

TEST(PowTest, SquareMatchesPow) {
  const std::vector<float> base = {-3.25, 1e-20f, 1.5, 1e20f, -0.0f, float(kNaN), float(kInf)};
  Tensor b = MakeTensor<float>(DType::kF32, {7}, base);
  for (DType ed : {DType::kF32, DType::kF64, DType::kI64}) {
    Tensor e = ed == DType::kF32   ? MakeTensor<float>(ed, {}, {2})
               : ed == DType::kF64 ? MakeTensor<double>(ed, {1}, {2})
                                   : MakeTensor<int64_t>(ed, {1, 1}, {2});
    auto out = RunOp("Pow", {&b, &e});
    ASSERT_TRUE(out.ok()) << out.status();
    const std::vector<float> got = Values<float>((*out)[0]);
    for (size_t i = 0; i < base.size(); ++i) EXPECT_TRUE(Close(got[i], std::pow(base[i], 2.0f), 0)) << i;
  }
  Tensor h = MakeTensor<uint16_t>(DType::kF16, {2}, ToHalf({3, -0.5}));
  Tensor two = MakeTensor<uint16_t>(DType::kF16, {}, ToHalf({2}));
  auto out = RunOp("Pow", {&h, &two});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Values<uint16_t>((*out)[0]), ToHalf({9, 0.25}));
}

// An f32 base cubed (a tanh GELU's x^3): what powf gives, over a sweep and
// the edge values, for each exponent dtype.
TEST(PowTest, CubeMatchesPow) {
  std::vector<float> base = {-3.25f, 1e-20f, 1.5f, 1e20f, -0.0f, 0.0f, float(kNaN), float(kInf), -float(kInf), 1e-13f};
  for (int i = 0; i < 20000; ++i) base.push_back(-40.0f + 80.0f * static_cast<float>(i) / 20000.0f + 1e-3f);
  const int64_t n = static_cast<int64_t>(base.size());
  Tensor b = MakeTensor<float>(DType::kF32, {n}, base);
  for (DType ed : {DType::kF32, DType::kF64, DType::kI64}) {
    Tensor e = ed == DType::kF32   ? MakeTensor<float>(ed, {}, {3})
               : ed == DType::kF64 ? MakeTensor<double>(ed, {1}, {3})
                                   : MakeTensor<int64_t>(ed, {1, 1}, {3});
    auto out = RunOp("Pow", {&b, &e});
    ASSERT_TRUE(out.ok()) << out.status();
    const std::vector<float> got = Values<float>((*out)[0]);
    for (size_t i = 0; i < base.size(); ++i) {
      const float want = static_cast<float>(std::pow(static_cast<double>(base[i]), 3.0));
      ASSERT_TRUE(Close(got[i], want, 1.2e-7, 0)) << "x=" << base[i];  // 1 ulp
    }
  }
}

TEST(PowTest, Errors) {
  Tensor i8 = MakeTensor<int8_t>(DType::kI8, {2}, {1, 2});
  Tensor f = MakeTensor<float>(DType::kF32, {2}, {1, 2});
  Tensor b = MakeTensor<uint8_t>(DType::kBool, {2}, {1, 0});
  Tensor f3 = MakeTensor<float>(DType::kF32, {3}, {1, 2, 3});
  EXPECT_TRUE(ErrorContains(RunOp("Pow", {&i8, &f}).status(), "input 0 (X) has dtype i8"));
  EXPECT_TRUE(ErrorContains(RunOp("Pow", {&f, &b}).status(), "input 1 (Y) has dtype bool"));
  EXPECT_TRUE(ErrorContains(RunOp("Pow", {&f, &f3}).status(), "input 0 (X) [2] and input 1 (Y) [3]"));
  EXPECT_TRUE(
      ErrorContains(RunKernelPlanned("Pow", {&f, &f}, DType::kF64, {2}).status(), "output 0 was allocated as f64"));
}

// --- Clip ---------------------------------------------------------------------

template <typename T>
std::vector<T> ClipRef(const std::vector<T>& x, double lo, double hi) {
  std::vector<T> out;
  for (T v : x) {
    double d = static_cast<double>(v);
    if (d < lo) d = lo;
    if (d > hi) d = hi;
    out.push_back(static_cast<T>(d));
  }
  return out;
}

TEST(ClipTest, BoundsAsInputs) {
  const std::vector<float> x = Pattern<float>(12, 3);
  Tensor t = MakeTensor<float>(DType::kF32, {3, 4}, x);
  Tensor lo = MakeTensor<float>(DType::kF32, {}, {-2});
  Tensor hi = MakeTensor<float>(DType::kF32, {1}, {3});  // exporters write [1] too
  struct Case {
    const Tensor* lo;
    const Tensor* hi;
    double want_lo, want_hi;
  };
  for (const Case& c : {Case{&lo, &hi, -2, 3}, Case{&lo, nullptr, -2, kInf}, Case{nullptr, &hi, -kInf, 3},
                        Case{nullptr, nullptr, -kInf, kInf}}) {
    std::vector<const Tensor*> inputs = {&t, c.lo};
    if (c.hi != nullptr) inputs.push_back(c.hi);
    if (c.lo == nullptr && c.hi == nullptr) inputs = {&t};
    auto out = RunOp("Clip", inputs);
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ((*out)[0].shape(), (Shape{3, 4}));
    EXPECT_EQ(Values<float>((*out)[0]), ClipRef(x, c.want_lo, c.want_hi)) << c.want_lo << " " << c.want_hi;
  }
}

TEST(ClipTest, BoundsAsAttributes) {
  const std::vector<double> x = Pattern<double>(10, 1);
  Tensor t = MakeTensor<double>(DType::kF64, {10}, x);
  auto both = RunOp("Clip", {&t}, {{"min", -1.5}, {"max", 0.75}});
  ASSERT_TRUE(both.ok()) << both.status();
  EXPECT_EQ(Values<double>((*both)[0]), ClipRef(x, -1.5, 0.75));
  auto max_only = RunOp("Clip", {&t}, {{"max", 0.0}});
  ASSERT_TRUE(max_only.ok()) << max_only.status();
  EXPECT_EQ(Values<double>((*max_only)[0]), ClipRef(x, -kInf, 0));
}

TEST(ClipTest, MinAboveMaxGivesMaxAndNaNPassesThrough) {
  Tensor t = MakeTensor<float>(DType::kF32, {4}, {-5, 0, 5, float(kNaN)});
  Tensor lo = MakeTensor<float>(DType::kF32, {}, {2});
  Tensor hi = MakeTensor<float>(DType::kF32, {}, {1});
  auto out = RunOp("Clip", {&t, &lo, &hi});
  ASSERT_TRUE(out.ok()) << out.status();
  const std::vector<float> got = Values<float>((*out)[0]);
  EXPECT_EQ(got[0], 1);
  EXPECT_EQ(got[1], 1);
  EXPECT_EQ(got[2], 1);
  EXPECT_TRUE(std::isnan(got[3]));
  // Infinite inputs without bounds stay infinite.
  Tensor inf = MakeTensor<float>(DType::kF32, {2}, {float(kInf), float(-kInf)});
  auto none = RunOp("Clip", {&inf});
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_EQ(Values<float>((*none)[0]), (std::vector<float>{float(kInf), float(-kInf)}));
}

TEST(ClipTest, IntegerAndHalfDTypes) {
  // As ONNX's test_clip_default_int8_min.
  Tensor i8 = MakeTensor<int8_t>(DType::kI8, {5}, {-128, -3, 0, 4, 127});
  Tensor lo8 = MakeTensor<int8_t>(DType::kI8, {}, {0});
  auto out8 = RunOp("Clip", {&i8, &lo8});
  ASSERT_TRUE(out8.ok()) << out8.status();
  EXPECT_EQ(Values<int8_t>((*out8)[0]), (std::vector<int8_t>{0, 0, 0, 4, 127}));
  Tensor u8 = MakeTensor<uint8_t>(DType::kU8, {3}, {0, 100, 255});
  Tensor hiu = MakeTensor<uint8_t>(DType::kU8, {}, {200});
  auto outu = RunOp("Clip", {&u8, nullptr, &hiu});
  ASSERT_TRUE(outu.ok()) << outu.status();
  EXPECT_EQ(Values<uint8_t>((*outu)[0]), (std::vector<uint8_t>{0, 100, 200}));
  Tensor i64 = MakeTensor<int64_t>(DType::kI64, {3}, {-7, 2, 9});
  Tensor lo64 = MakeTensor<int64_t>(DType::kI64, {}, {-1});
  Tensor hi64 = MakeTensor<int64_t>(DType::kI64, {}, {5});
  auto out64 = RunOp("Clip", {&i64, &lo64, &hi64});
  ASSERT_TRUE(out64.ok()) << out64.status();
  EXPECT_EQ(Values<int64_t>((*out64)[0]), (std::vector<int64_t>{-1, 2, 5}));
  // An opset-6 float attribute on an integer input truncates like Cast.
  Tensor i32 = MakeTensor<int32_t>(DType::kI32, {3}, {-7, 2, 9});
  auto out32 = RunOp("Clip", {&i32}, {{"min", -1.5}, {"max", 4.9}});
  ASSERT_TRUE(out32.ok()) << out32.status();
  EXPECT_EQ(Values<int32_t>((*out32)[0]), (std::vector<int32_t>{-1, 2, 4}));
  Tensor h = MakeTensor<uint16_t>(DType::kF16, {3}, ToHalf({-3, 0.5, 3}));
  Tensor loh = MakeTensor<uint16_t>(DType::kF16, {}, ToHalf({-1}));
  Tensor hih = MakeTensor<uint16_t>(DType::kF16, {}, ToHalf({1}));
  auto outh = RunOp("Clip", {&h, &loh, &hih});
  ASSERT_TRUE(outh.ok()) << outh.status();
  EXPECT_EQ(Values<uint16_t>((*outh)[0]), ToHalf({-1, 0.5, 1}));
}

TEST(ClipTest, RankZeroAndEmpty) {
  Tensor s = MakeTensor<float>(DType::kF32, {}, {9});
  auto out = RunOp("Clip", {&s}, {{"max", 1.0}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE((*out)[0].shape().empty());
  EXPECT_EQ(Values<float>((*out)[0]), std::vector<float>{1});
  Tensor e = MakeTensor<float>(DType::kF32, {0, 2}, {});
  auto empty = RunOp("Clip", {&e}, {{"max", 1.0}});
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_EQ((*empty)[0].shape(), (Shape{0, 2}));
}

TEST(ClipTest, Errors) {
  Tensor t = MakeTensor<float>(DType::kF32, {2}, {1, 2});
  Tensor two = MakeTensor<float>(DType::kF32, {2}, {0, 1});
  Tensor d = MakeTensor<double>(DType::kF64, {}, {0});
  Tensor one = MakeTensor<float>(DType::kF32, {}, {0});
  Tensor b = MakeTensor<uint8_t>(DType::kBool, {2}, {0, 1});
  EXPECT_TRUE(ErrorContains(RunOp("Clip", {&t, &two}).status(),
                            "input 1 (min) must hold one element (a scalar); got shape [2]"));
  EXPECT_TRUE(ErrorContains(RunOp("Clip", {&t, nullptr, &d}).status(),
                            "input 0 (input) and input 2 (max) must have the same dtype; got f32 and f64"));
  EXPECT_TRUE(ErrorContains(RunOp("Clip", {&t, &one}, {{"min", 0.0}}).status(),
                            "'min' is given both as an attribute (opset 6) and as input 1 (min)"));
  EXPECT_TRUE(ErrorContains(RunOp("Clip", {&b}).status(), "input 0 (input) has dtype bool"));
  // The kernel checks what a symbolic plan could not.
  EXPECT_TRUE(ErrorContains(RunKernelPlanned("Clip", {&t, &two}, DType::kF32, {2}).status(),
                            "input 1 (min) must hold one element (a scalar); got shape [2]"));
  EXPECT_TRUE(ErrorContains(RunKernelPlanned("Clip", {&t, nullptr, &d}, DType::kF32, {2}).status(),
                            "input 2 (max) has dtype f64; expected f32"));
}

// --- Min Max Sum Mean ---------------------------------------------------------

template <typename T>
void ExpectVariadic(const std::string& op, DType dtype, const std::vector<Shape>& shapes) {
  SCOPED_TRACE(absl::StrCat(op, " ", DTypeName(dtype), " ", shapes.size(), " inputs, first [",
                            absl::StrJoin(shapes[0], ","), "]"));
  std::vector<std::vector<T>> values;
  std::vector<Tensor> tensors;
  for (size_t k = 0; k < shapes.size(); ++k) {
    values.push_back(Pattern<T>(Count(shapes[k]), static_cast<int64_t>(k) + 1));
    tensors.push_back(MakeTensor<T>(dtype, shapes[k], values.back()));
  }
  std::vector<const Tensor*> inputs;
  for (const Tensor& t : tensors) inputs.push_back(&t);
  auto out = RunOp(op, inputs);
  ASSERT_TRUE(out.ok()) << out.status();
  const Shape so = BroadcastRef(shapes);
  ASSERT_EQ((*out)[0].shape(), so);
  ASSERT_EQ((*out)[0].dtype(), dtype);
  const std::vector<T> got = Values<T>((*out)[0]);
  for (int64_t i = 0; i < Count(so); ++i) {
    const Shape idx = Unflatten(i, so);
    double want = static_cast<double>(values[0][SourceIndex(idx, shapes[0])]);
    for (size_t k = 1; k < shapes.size(); ++k) {
      const double v = static_cast<double>(values[k][SourceIndex(idx, shapes[k])]);
      if (op == "Min") want = std::min(want, v);
      if (op == "Max") want = std::max(want, v);
      if (op == "Sum" || op == "Mean") want += v;
    }
    if (op == "Mean") want /= static_cast<double>(shapes.size());
    EXPECT_TRUE(Close(static_cast<double>(got[i]), want, 1e-6)) << "at " << i;
  }
}

const std::vector<std::vector<Shape>>& VariadicCases() {
  static const auto* cases = new std::vector<std::vector<Shape>>{
      {{2, 3}},
      {{}},
      {{2, 3}, {2, 3}},
      {{2, 3}, {3}},
      {{3, 1}, {1, 4}, {4}},
      {{}, {2, 2}},
      {{2, 2}, {}},
      {{0, 3}, {1, 3}},
      {{2, 1, 4}, {3, 1}, {}, {1, 1, 4}},
      {{1}, {5}, {1}},
      {{4, 1, 3, 1}, {5, 1, 2}},
  };
  return *cases;
}

template <typename T>
void ExpectVariadicAll(const std::vector<std::string>& ops, DType dtype) {
  for (const std::string& op : ops) {
    for (const std::vector<Shape>& shapes : VariadicCases()) ExpectVariadic<T>(op, dtype, shapes);
  }
}

TEST(VariadicTest, F32) { ExpectVariadicAll<float>({"Min", "Max", "Sum", "Mean"}, DType::kF32); }
TEST(VariadicTest, F64) { ExpectVariadicAll<double>({"Min", "Max", "Sum", "Mean"}, DType::kF64); }
TEST(VariadicTest, I32) { ExpectVariadicAll<int32_t>({"Min", "Max"}, DType::kI32); }
TEST(VariadicTest, I64) { ExpectVariadicAll<int64_t>({"Min", "Max"}, DType::kI64); }
TEST(VariadicTest, I8) { ExpectVariadicAll<int8_t>({"Min", "Max"}, DType::kI8); }
TEST(VariadicTest, U8) { ExpectVariadicAll<uint8_t>({"Min", "Max"}, DType::kU8); }

TEST(VariadicTest, HalfAccumulatesInFloat) {
  // 2048 + 1 + 1 in f16 steps would stay 2048; in float it is 2050.
  Tensor a = MakeTensor<uint16_t>(DType::kF16, {1}, ToHalf({2048}));
  Tensor b = MakeTensor<uint16_t>(DType::kF16, {}, ToHalf({1}));
  auto sum = RunOp("Sum", {&a, &b, &b});
  ASSERT_TRUE(sum.ok()) << sum.status();
  EXPECT_EQ(Values<uint16_t>((*sum)[0]), ToHalf({2050}));
  auto mean = RunOp("Mean", {&a, &b, &b, &b});
  ASSERT_TRUE(mean.ok()) << mean.status();
  EXPECT_EQ(Values<uint16_t>((*mean)[0]), ToHalf({512.75}));
  Tensor c = MakeTensor<uint16_t>(DType::kBF16, {2}, ToBF16({-1, 4}));
  Tensor d = MakeTensor<uint16_t>(DType::kBF16, {2, 1}, ToBF16({0, 2}));
  auto max = RunOp("Max", {&c, &d});
  ASSERT_TRUE(max.ok()) << max.status();
  EXPECT_EQ((*max)[0].shape(), (Shape{2, 2}));
  EXPECT_EQ(Values<uint16_t>((*max)[0]), ToBF16({0, 4, 2, 4}));
}

TEST(VariadicTest, MinAndMaxPropagateNaN) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Tensor a = MakeTensor<float>(DType::kF32, {3}, {nan, 1, 2});
  Tensor b = MakeTensor<float>(DType::kF32, {3}, {0, nan, 3});
  for (const char* op : {"Min", "Max"}) {
    auto out = RunOp(op, {&a, &b});
    ASSERT_TRUE(out.ok()) << out.status();
    const std::vector<float> got = Values<float>((*out)[0]);
    EXPECT_TRUE(std::isnan(got[0])) << op;
    EXPECT_TRUE(std::isnan(got[1])) << op;
    EXPECT_EQ(got[2], std::string(op) == "Min" ? 2 : 3);
  }
}

TEST(VariadicTest, Errors) {
  Tensor f = MakeTensor<float>(DType::kF32, {2}, {1, 2});
  Tensor f3 = MakeTensor<float>(DType::kF32, {3}, {1, 2, 3});
  Tensor d = MakeTensor<double>(DType::kF64, {2}, {1, 2});
  Tensor i = MakeTensor<int32_t>(DType::kI32, {2}, {1, 2});
  Tensor b = MakeTensor<uint8_t>(DType::kBool, {2}, {1, 0});
  EXPECT_TRUE(ErrorContains(RunOp("Max", {&f, &f, &d}).status(),
                            "input 0 (data_0) and input 2 (data_2) must have the same dtype; got f32 and f64"));
  EXPECT_TRUE(ErrorContains(RunOp("Sum", {&f, &f3}).status(), "input 0 (data_0) [2] and input 1 (data_1) [3]"));
  EXPECT_TRUE(ErrorContains(RunOp("Sum", {&i, &i}).status(), "input 0 (data_0) has dtype i32"));
  EXPECT_TRUE(ErrorContains(RunOp("Mean", {&i}).status(), "input 0 (data_0) has dtype i32"));
  EXPECT_TRUE(ErrorContains(RunOp("Min", {&b}).status(), "input 0 (data_0) has dtype bool"));
  EXPECT_TRUE(ErrorContains(RunOp("Min", {}).status(), "expected at least one input"));
  // Planned shapes that the run's shapes contradict.
  EXPECT_TRUE(ErrorContains(RunKernelPlanned("Sum", {&f, &f}, DType::kF32, {3, 2}).status(),
                            "output 0 was allocated with shape [3, 2] but the kernel writes [2]"));
  EXPECT_TRUE(ErrorContains(RunKernelPlanned("Max", {&f, &f3}, DType::kF32, {3}).status(), "do not broadcast"));
  EXPECT_TRUE(ErrorContains(RunKernelPlanned("Max", {&f, &i}, DType::kF32, {2}).status(),
                            "inputs 0 and 1 have dtypes f32 and i32"));
}

TEST(VariadicTest, SymbolicShapes) {
  const ir::SymDim batch = ir::SymDim::Symbol(0), seq = ir::SymDim::Symbol(1);
  auto out = InferSymbolic(
      "Max", {SymInput{DType::kF32, {batch, 1}}, SymInput{DType::kF32, {1, seq}}, SymInput{DType::kF32, {}}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->shape, (ir::SymShape{batch, seq}));
  EXPECT_EQ(out->dtype, DType::kF32);
  out = InferSymbolic("Mean", {SymInput{DType::kF16, {batch, 4}}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->shape, (ir::SymShape{batch, 4}));
}

// --- comparisons and logic ----------------------------------------------------

const std::vector<std::pair<Shape, Shape>>& BinaryCases() {
  static const auto* cases = new std::vector<std::pair<Shape, Shape>>{
      {{2, 3}, {2, 3}}, {{3, 1}, {1, 4}}, {{2, 3, 4}, {4}}, {{2, 3, 4}, {3, 1}}, {{}, {2, 3}},  {{2, 3}, {}},
      {{}, {}},         {{0, 3}, {1, 3}}, {{2, 0}, {2, 1}}, {{1, 1, 7}, {6, 1}}, {{1000}, {1}},
  };
  return *cases;
}

template <typename T>
void ExpectBinaryBool(const std::string& op, DType dtype, const Shape& sa, const Shape& sb, const std::vector<T>& a,
                      const std::vector<T>& b, std::function<bool(T, T)> ref) {
  SCOPED_TRACE(
      absl::StrCat(op, " ", DTypeName(dtype), " [", absl::StrJoin(sa, ","), "] [", absl::StrJoin(sb, ","), "]"));
  Tensor ta = MakeTensor<T>(dtype, sa, a);
  Tensor tb = MakeTensor<T>(dtype, sb, b);
  auto out = RunOp(op, {&ta, &tb});
  ASSERT_TRUE(out.ok()) << out.status();
  const Shape so = BroadcastRef({sa, sb});
  ASSERT_EQ((*out)[0].shape(), so);
  ASSERT_EQ((*out)[0].dtype(), DType::kBool);
  const std::vector<uint8_t> got = Values<uint8_t>((*out)[0]);
  for (int64_t i = 0; i < Count(so); ++i) {
    const Shape idx = Unflatten(i, so);
    ASSERT_EQ(got[i], ref(a[SourceIndex(idx, sa)], b[SourceIndex(idx, sb)]) ? 1 : 0) << "at " << i;
  }
}

template <typename T>
void ExpectOrderedCompare(DType dtype) {
  for (const auto& [sa, sb] : BinaryCases()) {
    const std::vector<T> a = Pattern<T>(Count(sa), 1), b = Pattern<T>(Count(sb), 2);
    ExpectBinaryBool<T>("GreaterOrEqual", dtype, sa, sb, a, b, [](T x, T y) { return x >= y; });
    ExpectBinaryBool<T>("LessOrEqual", dtype, sa, sb, a, b, [](T x, T y) { return x <= y; });
  }
}

TEST(CompareOrEqualTest, F32) { ExpectOrderedCompare<float>(DType::kF32); }
TEST(CompareOrEqualTest, F64) { ExpectOrderedCompare<double>(DType::kF64); }
TEST(CompareOrEqualTest, I32) { ExpectOrderedCompare<int32_t>(DType::kI32); }
TEST(CompareOrEqualTest, I64) { ExpectOrderedCompare<int64_t>(DType::kI64); }
TEST(CompareOrEqualTest, I8) { ExpectOrderedCompare<int8_t>(DType::kI8); }
TEST(CompareOrEqualTest, U8) { ExpectOrderedCompare<uint8_t>(DType::kU8); }

TEST(CompareOrEqualTest, HalfAndNaN) {
  Tensor a = MakeTensor<uint16_t>(DType::kF16, {3}, {0x3c00, 0xc000, 0x7e00});  // 1, -2, NaN
  Tensor b = MakeTensor<uint16_t>(DType::kF16, {3}, {0x3c00, 0x3c00, 0x7e00});
  auto ge = RunOp("GreaterOrEqual", {&a, &b});
  ASSERT_TRUE(ge.ok()) << ge.status();
  EXPECT_EQ(Values<uint8_t>((*ge)[0]), (std::vector<uint8_t>{1, 0, 0}));
  auto le = RunOp("LessOrEqual", {&a, &b});
  ASSERT_TRUE(le.ok()) << le.status();
  EXPECT_EQ(Values<uint8_t>((*le)[0]), (std::vector<uint8_t>{1, 1, 0}));
}

TEST(CompareOrEqualTest, Errors) {
  Tensor b = MakeTensor<uint8_t>(DType::kBool, {1}, {1});
  Tensor f = MakeTensor<float>(DType::kF32, {2}, {1, 2});
  Tensor i = MakeTensor<int32_t>(DType::kI32, {2}, {1, 2});
  Tensor f3 = MakeTensor<float>(DType::kF32, {3}, {1, 2, 3});
  EXPECT_TRUE(ErrorContains(RunOp("GreaterOrEqual", {&b, &b}).status(), "input 0 (A) has dtype bool"));
  EXPECT_TRUE(ErrorContains(RunOp("LessOrEqual", {&f, &i}).status(), "same dtype"));
  EXPECT_TRUE(ErrorContains(RunOp("LessOrEqual", {&f, &f3}).status(), "input 0 (A) [2] and input 1 (B) [3]"));
  EXPECT_TRUE(ErrorContains(RunKernelPlanned("GreaterOrEqual", {&f, &f}, DType::kF32, {2}).status(),
                            "output 0 was allocated as f32 but the kernel writes bool"));
}

TEST(LogicTest, AndOrXorBroadcast) {
  for (const auto& [sa, sb] : BinaryCases()) {
    std::vector<uint8_t> a(static_cast<size_t>(Count(sa))), b(static_cast<size_t>(Count(sb)));
    // Any non-zero byte is true.
    for (size_t i = 0; i < a.size(); ++i) a[i] = (i * 7 + 1) % 3 == 0 ? 0 : static_cast<uint8_t>(1 + i % 5);
    for (size_t i = 0; i < b.size(); ++i) b[i] = (i * 5 + 2) % 4 < 2 ? 0 : 1;
    ExpectBinaryBool<uint8_t>("And", DType::kBool, sa, sb, a, b, [](uint8_t x, uint8_t y) { return x && y; });
    ExpectBinaryBool<uint8_t>("Or", DType::kBool, sa, sb, a, b, [](uint8_t x, uint8_t y) { return x || y; });
    ExpectBinaryBool<uint8_t>("Xor", DType::kBool, sa, sb, a, b,
                              [](uint8_t x, uint8_t y) { return (x != 0) != (y != 0); });
  }
}

TEST(LogicTest, Not) {
  Tensor t = MakeTensor<uint8_t>(DType::kBool, {2, 2}, {0, 1, 7, 0});
  auto out = RunOp("Not", {&t});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].shape(), (Shape{2, 2}));
  EXPECT_EQ((*out)[0].dtype(), DType::kBool);
  EXPECT_EQ(Values<uint8_t>((*out)[0]), (std::vector<uint8_t>{1, 0, 0, 1}));
  Tensor s = MakeTensor<uint8_t>(DType::kBool, {}, {0});
  auto scalar = RunOp("Not", {&s});
  ASSERT_TRUE(scalar.ok()) << scalar.status();
  EXPECT_EQ(Values<uint8_t>((*scalar)[0]), std::vector<uint8_t>{1});
  Tensor e = MakeTensor<uint8_t>(DType::kBool, {0, 4}, {});
  auto empty = RunOp("Not", {&e});
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_EQ((*empty)[0].shape(), (Shape{0, 4}));
}

TEST(LogicTest, Errors) {
  Tensor f = MakeTensor<float>(DType::kF32, {1}, {1});
  Tensor b = MakeTensor<uint8_t>(DType::kBool, {1}, {1});
  Tensor b3 = MakeTensor<uint8_t>(DType::kBool, {3}, {1, 0, 1});
  Tensor b2 = MakeTensor<uint8_t>(DType::kBool, {2}, {1, 0});
  EXPECT_TRUE(ErrorContains(RunOp("Not", {&f}).status(), "input 0 (X) has dtype f32; expected bool"));
  EXPECT_TRUE(ErrorContains(RunOp("And", {&b, &f}).status(), "input 1 (B) has dtype f32; expected bool"));
  EXPECT_TRUE(ErrorContains(RunOp("Xor", {&b2, &b3}).status(), "input 0 (A) [2] and input 1 (B) [3]"));
  EXPECT_TRUE(ErrorContains(RunKernelPlanned("Or", {&f, &b}, DType::kBool, {1}).status(),
                            "input 0 (A) has dtype f32; expected bool"));
  EXPECT_TRUE(ErrorContains(RunKernelPlanned("Not", {&f}, DType::kBool, {1}).status(),
                            "input 0 (X) has dtype f32; expected bool"));
}

// --- CastLike -----------------------------------------------------------------

// CastLike(x, like) must give exactly what Cast(x, to = like's dtype) gives.
TEST(CastLikeTest, MatchesCastForEveryPairOfDTypes) {
  const DType all[] = {DType::kF32, DType::kF64, DType::kF16, DType::kBF16, DType::kI64,
                       DType::kI32, DType::kI8,  DType::kU8,  DType::kBool};
  const std::vector<double> values = {-300.75, -2.5, -1, 0, 0.5, 1, 3.25, 127, 200.5, 70000};
  for (DType from : all) {
    // Any value made with Cast from f64, so every source dtype holds it.
    Tensor src64 = MakeTensor<double>(DType::kF64, {2, 5}, values);
    auto src = RunOp("Cast", {&src64}, {{"to", static_cast<int64_t>(from)}});
    ASSERT_TRUE(src.ok()) << src.status();
    for (DType to : all) {
      SCOPED_TRACE(absl::StrCat(DTypeName(from), " -> ", DTypeName(to)));
      Tensor like = Tensor::Create(to, {0}).value();
      auto got = RunOp("CastLike", {&(*src)[0], &like});
      ASSERT_TRUE(got.ok()) << got.status();
      auto want = RunOp("Cast", {&(*src)[0]}, {{"to", static_cast<int64_t>(to)}});
      ASSERT_TRUE(want.ok()) << want.status();
      ASSERT_EQ((*got)[0].dtype(), to);
      ASSERT_EQ((*got)[0].shape(), (Shape{2, 5}));
      ASSERT_EQ(std::memcmp((*got)[0].data(), (*want)[0].data(), (*want)[0].view().byte_size()), 0);
    }
  }
}

TEST(CastLikeTest, RankZeroEmptyAndSymbolic) {
  Tensor s = MakeTensor<float>(DType::kF32, {}, {2.75});
  Tensor like = MakeTensor<int32_t>(DType::kI32, {3}, {0, 0, 0});
  auto out = RunOp("CastLike", {&s, &like});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE((*out)[0].shape().empty());
  EXPECT_EQ(Values<int32_t>((*out)[0]), std::vector<int32_t>{2});
  Tensor e = MakeTensor<float>(DType::kF32, {0, 3}, {});
  auto empty = RunOp("CastLike", {&e, &like});
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_EQ((*empty)[0].shape(), (Shape{0, 3}));
  const ir::SymDim batch = ir::SymDim::Symbol(0);
  auto sym = InferSymbolic("CastLike", {SymInput{DType::kF16, {batch, 2}}, SymInput{DType::kBF16, {batch}}});
  ASSERT_TRUE(sym.ok()) << sym.status();
  EXPECT_EQ(sym->dtype, DType::kBF16);
  EXPECT_EQ(sym->shape, (ir::SymShape{batch, 2}));
  EXPECT_TRUE(ErrorContains(RunKernelPlanned("CastLike", {&s, &like}, DType::kF32, {}).status(),
                            "output 0 was allocated as f32 but the kernel writes i32"));
}

// --- trigonometric, hyperbolic and the further activations ------------------

std::vector<UnaryCase> MoreUnaryCases() {
  return {
      {"Sin", {}, [](double x) { return std::sin(x); }},
      {"Cos", {}, [](double x) { return std::cos(x); }},
      {"Tan", {}, [](double x) { return std::tan(x); }},
      {"Asin", {}, [](double x) { return std::asin(x); }},
      {"Acos", {}, [](double x) { return std::acos(x); }},
      {"Atan", {}, [](double x) { return std::atan(x); }},
      {"Sinh", {}, [](double x) { return std::sinh(x); }},
      {"Cosh", {}, [](double x) { return std::cosh(x); }},
      {"Asinh", {}, [](double x) { return std::asinh(x); }},
      {"Acosh", {}, [](double x) { return std::acosh(x); }},
      {"Atanh", {}, [](double x) { return std::atanh(x); }},
      {"Softsign", {}, [](double x) { return std::isinf(x) ? (x > 0 ? 1.0 : -1.0) : x / (1 + std::fabs(x)); }},
      {"Selu",
       {},
       [](double x) {
         return 1.0507010221481323 * (x > 0 ? x : 1.6732631921768188 * (std::exp(x) - 1));
       }},
      {"Selu",
       {{"alpha", 2.0}, {"gamma", 3.0}},
       [](double x) { return 3.0 * (x > 0 ? x : 2.0 * (std::exp(x) - 1)); }},
      {"Celu", {}, [](double x) { return std::isnan(x) ? x : std::max(0.0, x) + std::min(0.0, std::exp(x) - 1); }},
      {"Celu",
       {{"alpha", 2.0}},
       [](double x) { return std::isnan(x) ? x : std::max(0.0, x) + std::min(0.0, 2.0 * (std::exp(x / 2) - 1)); }},
      {"ThresholdedRelu", {}, [](double x) { return std::isnan(x) ? 0.0 : (x > 1.0 ? x : 0.0); }},
      {"ThresholdedRelu", {{"alpha", -0.5}}, [](double x) { return std::isnan(x) ? 0.0 : (x > -0.5 ? x : 0.0); }},
      // NaN fails both tests and gives 0, as in ONNX's reference.
      {"Shrink", {}, [](double x) { return x < -0.5 ? x : (x > 0.5 ? x : 0.0); }},
      {"Shrink",
       {{"bias", 1.5}, {"lambd", 1.0}},
       [](double x) { return x < -1.0 ? x + 1.5 : (x > 1.0 ? x - 1.5 : 0.0); }},
      {"Sign", {}, [](double x) { return std::isnan(x) ? x : (x > 0 ? 1.0 : (x < 0 ? -1.0 : 0.0)); }},
  };
}

template <typename T>
void ExpectMoreUnaryFloat(DType dtype) {
  const std::vector<T> in = {-100, -3.5, -1, -0.75, -0.25, 0, 0.25, 0.75, 1, 1.5, 3.5, 100, T(kInf), T(-kInf), T(kNaN),
                             -0.0};
  for (const UnaryCase& c : MoreUnaryCases()) {
    SCOPED_TRACE(absl::StrCat(c.op, " ", DTypeName(dtype), " ", c.attrs.size(), " attrs"));
    Tensor t = MakeTensor<T>(dtype, {static_cast<int64_t>(in.size())}, in);
    auto out = RunOp(c.op, {&t}, c.attrs);
    ASSERT_TRUE(out.ok()) << out.status();
    ASSERT_EQ((*out)[0].dtype(), dtype);
    ASSERT_EQ((*out)[0].shape(), (Shape{static_cast<int64_t>(in.size())}));
    const std::vector<T> got = Values<T>((*out)[0]);
    for (size_t i = 0; i < in.size(); ++i) {
      const double want = static_cast<double>(static_cast<T>(c.ref(static_cast<double>(in[i]))));
      EXPECT_TRUE(Close(got[i], want, 1e-6, 1e-30)) << "input " << in[i];
    }
  }
}

TEST(MathMoreUnaryTest, F32) { ExpectMoreUnaryFloat<float>(DType::kF32); }
TEST(MathMoreUnaryTest, F64) { ExpectMoreUnaryFloat<double>(DType::kF64); }

TEST(MathMoreUnaryTest, F16AndBF16) {
  const std::vector<float> in = {-6, -2.5, -1, -0.375, 0, 0.375, 1, 2.5, 6};
  for (const UnaryCase& c : MoreUnaryCases()) {
    SCOPED_TRACE(absl::StrCat(c.op, " ", c.attrs.size(), " attrs"));
    Tensor h = MakeTensor<uint16_t>(DType::kF16, {3, 3}, ToHalf(in));
    Tensor b = MakeTensor<uint16_t>(DType::kBF16, {9}, ToBF16(in));
    auto oh = RunOp(c.op, {&h}, c.attrs);
    auto ob = RunOp(c.op, {&b}, c.attrs);
    ASSERT_TRUE(oh.ok()) << oh.status();
    ASSERT_TRUE(ob.ok()) << ob.status();
    EXPECT_EQ((*oh)[0].dtype(), DType::kF16);
    EXPECT_EQ((*oh)[0].shape(), (Shape{3, 3}));
    EXPECT_EQ((*ob)[0].dtype(), DType::kBF16);
    const std::vector<uint16_t> gh = Values<uint16_t>((*oh)[0]);
    const std::vector<uint16_t> gb = Values<uint16_t>((*ob)[0]);
    for (size_t i = 0; i < in.size(); ++i) {
      const double want = c.ref(in[i]);
      EXPECT_TRUE(Close(FromHalf(gh[i]), want, 1e-3, 1e-4)) << "f16 input " << in[i];
      EXPECT_TRUE(Close(FromBF16(gb[i]), want, 8e-3, 1e-3)) << "bf16 input " << in[i];
    }
  }
}

TEST(MathMoreUnaryTest, RankZeroAndEmpty) {
  Tensor s = MakeTensor<float>(DType::kF32, {}, {0.5f});
  Tensor e = MakeTensor<float>(DType::kF32, {2, 0, 3}, {});
  for (const UnaryCase& c : MoreUnaryCases()) {
    auto scalar = RunOp(c.op, {&s}, c.attrs);
    ASSERT_TRUE(scalar.ok()) << c.op << ": " << scalar.status();
    EXPECT_TRUE((*scalar)[0].shape().empty()) << c.op;
    EXPECT_TRUE(Close(Values<float>((*scalar)[0])[0], static_cast<float>(c.ref(0.5)), 1e-6)) << c.op;
    auto empty = RunOp(c.op, {&e}, c.attrs);
    ASSERT_TRUE(empty.ok()) << c.op << ": " << empty.status();
    EXPECT_EQ((*empty)[0].shape(), (Shape{2, 0, 3})) << c.op;
  }
}

TEST(MathMoreUnaryTest, FloatOnlyOpsRefuseIntegers) {
  Tensor i = MakeTensor<int32_t>(DType::kI32, {2}, {1, 4});
  for (const char* op : {"Sin", "Cos", "Tan", "Asin", "Acos", "Atan", "Sinh", "Cosh", "Asinh", "Acosh", "Atanh",
                         "Softsign", "Selu", "Celu", "ThresholdedRelu"}) {
    EXPECT_TRUE(ErrorContains(RunOp(op, {&i}).status(), "input 0 (X) has dtype i32; expected one of f32")) << op;
  }
  Tensor b = MakeTensor<uint8_t>(DType::kBool, {2}, {1, 0});
  for (const char* op : {"Sign", "Shrink"}) {
    EXPECT_TRUE(ErrorContains(RunOp(op, {&b}).status(), "input 0 (input) has dtype bool")) << op;
  }
  Tensor f = MakeTensor<float>(DType::kF32, {3}, {1, 2, 3});
  EXPECT_TRUE(ErrorContains(RunKernelPlanned("Sin", {&f}, DType::kF32, {2}).status(),
                            "output 0 was allocated with shape [2] but the kernel writes [3]"));
}

TEST(MathMoreUnaryTest, CeluRefusesAlphaZero) {
  Tensor t = MakeTensor<float>(DType::kF32, {1}, {1});
  EXPECT_TRUE(ErrorContains(RunOp("Celu", {&t}, {{"alpha", 0.0}}).status(),
                            "attribute 'alpha' is 0; expected a finite non-zero value"));
  EXPECT_TRUE(ErrorContains(RunOp("Celu", {&t}, {{"alpha", kInf}}).status(), "attribute 'alpha' is inf"));
}

TEST(MathMoreUnaryTest, SignOfIntegers) {
  Tensor i8 = MakeTensor<int8_t>(DType::kI8, {4}, {-128, -1, 0, 127});
  auto s8 = RunOp("Sign", {&i8});
  ASSERT_TRUE(s8.ok()) << s8.status();
  EXPECT_EQ(Values<int8_t>((*s8)[0]), (std::vector<int8_t>{-1, -1, 0, 1}));
  Tensor i64 = MakeTensor<int64_t>(DType::kI64, {2, 2}, {std::numeric_limits<int64_t>::min(), -7, 0, 9});
  auto s64 = RunOp("Sign", {&i64});
  ASSERT_TRUE(s64.ok()) << s64.status();
  EXPECT_EQ(Values<int64_t>((*s64)[0]), (std::vector<int64_t>{-1, -1, 0, 1}));
  Tensor i32 = MakeTensor<int32_t>(DType::kI32, {}, {-3});
  auto s32 = RunOp("Sign", {&i32});
  ASSERT_TRUE(s32.ok()) << s32.status();
  EXPECT_EQ(Values<int32_t>((*s32)[0]), std::vector<int32_t>{-1});
  Tensor u8 = MakeTensor<uint8_t>(DType::kU8, {3}, {0, 1, 255});
  auto su = RunOp("Sign", {&u8});
  ASSERT_TRUE(su.ok()) << su.status();
  EXPECT_EQ(Values<uint8_t>((*su)[0]), (std::vector<uint8_t>{0, 1, 1}));
}

// Integers compute in double and convert back like Cast: truncating toward
// zero, saturating.
TEST(MathMoreUnaryTest, ShrinkOfIntegers) {
  Tensor i32 = MakeTensor<int32_t>(DType::kI32, {5}, {-5, -1, 0, 1, 5});
  auto out = RunOp("Shrink", {&i32}, {{"bias", 1.5}, {"lambd", 1.0}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Values<int32_t>((*out)[0]), (std::vector<int32_t>{-3, 0, 0, 0, 3}));  // -3.5, 3.5 truncate
  Tensor u8 = MakeTensor<uint8_t>(DType::kU8, {4}, {0, 1, 2, 255});
  auto ou = RunOp("Shrink", {&u8}, {{"bias", -10.0}, {"lambd", 1.0}});
  ASSERT_TRUE(ou.ok()) << ou.status();
  EXPECT_EQ(Values<uint8_t>((*ou)[0]), (std::vector<uint8_t>{0, 0, 12, 255}));  // 265 saturates
  Tensor i8 = MakeTensor<int8_t>(DType::kI8, {3}, {-128, 0, 127});
  auto o8 = RunOp("Shrink", {&i8}, {{"bias", 2.0}});
  ASSERT_TRUE(o8.ok()) << o8.status();
  EXPECT_EQ(Values<int8_t>((*o8)[0]), (std::vector<int8_t>{-126, 0, 125}));
  Tensor i64 = MakeTensor<int64_t>(DType::kI64, {2}, {-2, 2});
  auto o64 = RunOp("Shrink", {&i64});
  ASSERT_TRUE(o64.ok()) << o64.status();
  EXPECT_EQ(Values<int64_t>((*o64)[0]), (std::vector<int64_t>{-2, 2}));
}

// --- IsNaN and IsInf ----------------------------------------------------------

TEST(MathPredicateTest, IsNaNAndIsInfOnEveryFloatDType) {
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> in = {1, -inf, inf, std::numeric_limits<float>::quiet_NaN(), 0, -2.5};
  const std::vector<std::pair<Attrs, std::vector<uint8_t>>> inf_cases = {
      {{}, {0, 1, 1, 0, 0, 0}},
      {{{"detect_negative", int64_t{0}}}, {0, 0, 1, 0, 0, 0}},
      {{{"detect_positive", int64_t{0}}}, {0, 1, 0, 0, 0, 0}},
      {{{"detect_positive", int64_t{0}}, {"detect_negative", int64_t{0}}}, {0, 0, 0, 0, 0, 0}},
  };
  std::vector<double> in64(in.begin(), in.end());
  Tensor f32 = MakeTensor<float>(DType::kF32, {2, 3}, in);
  Tensor f64 = MakeTensor<double>(DType::kF64, {2, 3}, in64);
  Tensor f16 = MakeTensor<uint16_t>(DType::kF16, {2, 3}, ToHalf(in));
  Tensor bf16 = MakeTensor<uint16_t>(DType::kBF16, {2, 3}, ToBF16(in));
  for (const Tensor* t : {&f32, &f64, &f16, &bf16}) {
    SCOPED_TRACE(DTypeName(t->dtype()));
    auto nan = RunOp("IsNaN", {t});
    ASSERT_TRUE(nan.ok()) << nan.status();
    EXPECT_EQ((*nan)[0].dtype(), DType::kBool);
    EXPECT_EQ((*nan)[0].shape(), (Shape{2, 3}));
    EXPECT_EQ(Values<uint8_t>((*nan)[0]), (std::vector<uint8_t>{0, 0, 0, 1, 0, 0}));
    for (const auto& [attrs, want] : inf_cases) {
      auto inf = RunOp("IsInf", {t}, attrs);
      ASSERT_TRUE(inf.ok()) << inf.status();
      EXPECT_EQ((*inf)[0].dtype(), DType::kBool);
      EXPECT_EQ(Values<uint8_t>((*inf)[0]), want) << attrs.size() << " attrs";
    }
  }
  Tensor s = MakeTensor<float>(DType::kF32, {}, {kNaN});
  auto scalar = RunOp("IsNaN", {&s});
  ASSERT_TRUE(scalar.ok()) << scalar.status();
  EXPECT_TRUE((*scalar)[0].shape().empty());
  EXPECT_EQ(Values<uint8_t>((*scalar)[0]), std::vector<uint8_t>{1});
  Tensor e = MakeTensor<float>(DType::kF32, {0, 2}, {});
  auto empty = RunOp("IsInf", {&e});
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_EQ((*empty)[0].shape(), (Shape{0, 2}));
}

TEST(MathPredicateTest, Errors) {
  Tensor i = MakeTensor<int32_t>(DType::kI32, {1}, {1});
  Tensor f = MakeTensor<float>(DType::kF32, {1}, {1});
  EXPECT_TRUE(ErrorContains(RunOp("IsNaN", {&i}).status(), "input 0 (X) has dtype i32; expected one of f32"));
  EXPECT_TRUE(ErrorContains(RunOp("IsInf", {&i}).status(), "input 0 (X) has dtype i32; expected one of f32"));
  EXPECT_TRUE(ErrorContains(RunOp("IsInf", {&f}, {{"detect_negative", int64_t{2}}}).status(),
                            "attribute 'detect_negative' is 2; expected 0 or 1"));
  EXPECT_TRUE(ErrorContains(RunOp("IsInf", {&f}, {{"detect_positive", int64_t{-1}}}).status(),
                            "attribute 'detect_positive' is -1; expected 0 or 1"));
  EXPECT_TRUE(ErrorContains(RunKernelPlanned("IsNaN", {&f}, DType::kF32, {1}).status(),
                            "output 0 was allocated as f32 but the kernel writes bool"));
}

// --- PRelu --------------------------------------------------------------------

template <typename T>
void ExpectPRelu(DType dtype, const Shape& sx, const Shape& ss) {
  SCOPED_TRACE(absl::StrCat("PRelu ", DTypeName(dtype), " [", absl::StrJoin(sx, ","), "] [", absl::StrJoin(ss, ","),
                            "]"));
  const std::vector<T> x = Pattern<T>(Count(sx), 1);
  std::vector<T> slope = Pattern<T>(Count(ss), 2);
  Tensor tx = MakeTensor<T>(dtype, sx, x);
  Tensor ts = MakeTensor<T>(dtype, ss, slope);
  auto out = RunOp("PRelu", {&tx, &ts});
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ((*out)[0].shape(), sx);
  ASSERT_EQ((*out)[0].dtype(), dtype);
  const std::vector<T> got = Values<T>((*out)[0]);
  for (int64_t i = 0; i < Count(sx); ++i) {
    const Shape idx = Unflatten(i, sx);
    const T v = x[i];
    const T want = v < 0 ? static_cast<T>(v * slope[SourceIndex(idx, ss)]) : v;
    EXPECT_EQ(got[i], want) << "at " << i;
  }
}

TEST(PReluTest, SlopeBroadcastsToX) {
  const std::vector<std::pair<Shape, Shape>> cases = {{{3, 4, 5}, {5}},    {{3, 4, 5}, {3, 4, 5}}, {{3, 4, 5}, {4, 1}},
                                                      {{2, 3, 4}, {1}},    {{2, 3, 4}, {}},        {{}, {}},
                                                      {{0, 3}, {3}},       {{2, 3, 1, 1}, {3, 1, 1}}};
  for (const auto& [sx, ss] : cases) {
    ExpectPRelu<float>(DType::kF32, sx, ss);
    ExpectPRelu<double>(DType::kF64, sx, ss);
    ExpectPRelu<int32_t>(DType::kI32, sx, ss);
    ExpectPRelu<int64_t>(DType::kI64, sx, ss);
  }
}

TEST(PReluTest, HalfAndNaN) {
  Tensor x = MakeTensor<uint16_t>(DType::kF16, {4}, ToHalf({-2, 3, -0.5f, kNaN}));
  Tensor s = MakeTensor<uint16_t>(DType::kF16, {1}, ToHalf({0.25f}));
  auto out = RunOp("PRelu", {&x, &s});
  ASSERT_TRUE(out.ok()) << out.status();
  const std::vector<uint16_t> got = Values<uint16_t>((*out)[0]);
  EXPECT_EQ(FromHalf(got[0]), -0.5f);
  EXPECT_EQ(FromHalf(got[1]), 3.0f);
  EXPECT_EQ(FromHalf(got[2]), -0.125f);
  EXPECT_TRUE(std::isnan(FromHalf(got[3])));
  Tensor xb = MakeTensor<uint16_t>(DType::kBF16, {2}, ToBF16({-4, 4}));
  Tensor sb = MakeTensor<uint16_t>(DType::kBF16, {2}, ToBF16({0.5f, 0.5f}));
  auto ob = RunOp("PRelu", {&xb, &sb});
  ASSERT_TRUE(ob.ok()) << ob.status();
  EXPECT_EQ(FromBF16(Values<uint16_t>((*ob)[0])[0]), -2.0f);
  EXPECT_EQ(FromBF16(Values<uint16_t>((*ob)[0])[1]), 4.0f);
}

TEST(PReluTest, Errors) {
  Tensor x = MakeTensor<float>(DType::kF32, {3, 4, 5}, std::vector<float>(60, 1));
  Tensor s4 = MakeTensor<float>(DType::kF32, {4}, {1, 2, 3, 4});
  Tensor big = MakeTensor<float>(DType::kF32, {2, 3, 4, 5}, std::vector<float>(120, 1));
  Tensor i = MakeTensor<int32_t>(DType::kI32, {5}, {1, 2, 3, 4, 5});
  Tensor u = MakeTensor<uint8_t>(DType::kU8, {1}, {1});
  EXPECT_TRUE(ErrorContains(RunOp("PRelu", {&x, &s4}).status(),
                            "input 1 (slope) [4] does not broadcast to input 0 (X) [3, 4, 5]"));
  // Multidirectional broadcasting would grow X; PRelu's is unidirectional.
  EXPECT_TRUE(ErrorContains(RunOp("PRelu", {&x, &big}).status(), "does not broadcast to input 0 (X)"));
  EXPECT_TRUE(ErrorContains(RunOp("PRelu", {&x, &i}).status(), "must have the same dtype"));
  EXPECT_TRUE(ErrorContains(RunOp("PRelu", {&u, &u}).status(), "input 0 (X) has dtype u8"));
  // A slope that a symbolic shape let through is checked on the concrete shapes.
  ir::SymDim n = ir::SymDim::Symbol(0);
  auto sym = InferSymbolic("PRelu", {{DType::kF32, {3, 4, n}}, {DType::kF32, {n}}});
  ASSERT_TRUE(sym.ok()) << sym.status();
  EXPECT_EQ(sym->shape, (ir::SymShape{3, 4, n}));
  EXPECT_FALSE(RunKernelPlanned("PRelu", {&x, &s4}, DType::kF32, {3, 4, 5}).ok());
  EXPECT_TRUE(ErrorContains(RunKernelPlanned("PRelu", {&x, &i}, DType::kF32, {3, 4, 5}).status(), "dtype"));
  EXPECT_TRUE(ErrorContains(RunKernelPlanned("PRelu", {&x, &x}, DType::kF32, {3, 4}).status(),
                            "output 0 was allocated with shape [3, 4] but the kernel writes [3, 4, 5]"));
}

// --- Mod ----------------------------------------------------------------------

template <typename T>
T PythonMod(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    if (b == 0) return std::numeric_limits<T>::quiet_NaN();
    T r = std::fmod(a, b);
    if (r != 0 && ((r < 0) != (b < 0))) r += b;
    if (r == 0) r = std::copysign(T(0), b);
    return r;
  } else {
    if (b == 0) return 0;
    // Floor division written out in a wide type.
    const long double q = std::floor(static_cast<long double>(a) / static_cast<long double>(b));
    return static_cast<T>(static_cast<long double>(a) - q * static_cast<long double>(b));
  }
}

template <typename T>
T CMod(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    return std::fmod(a, b);
  } else {
    if (b == 0) return 0;
    return static_cast<T>(static_cast<int64_t>(a) - static_cast<int64_t>(a / b) * static_cast<int64_t>(b));
  }
}

template <typename T>
void ExpectMod(DType dtype, bool fmod) {
  for (const auto& [sa, sb] : BinaryCases()) {
    SCOPED_TRACE(absl::StrCat("Mod ", DTypeName(dtype), " fmod ", fmod, " [", absl::StrJoin(sa, ","), "] [",
                              absl::StrJoin(sb, ","), "]"));
    const std::vector<T> a = Pattern<T>(Count(sa), 1);
    std::vector<T> b = Pattern<T>(Count(sb), 2);
    for (T& v : b) v = static_cast<T>(v / 2);  // some zeros and small divisors
    Tensor ta = MakeTensor<T>(dtype, sa, a);
    Tensor tb = MakeTensor<T>(dtype, sb, b);
    auto out = RunOp("Mod", {&ta, &tb}, {{"fmod", int64_t{fmod ? 1 : 0}}});
    ASSERT_TRUE(out.ok()) << out.status();
    const Shape so = BroadcastRef({sa, sb});
    ASSERT_EQ((*out)[0].shape(), so);
    ASSERT_EQ((*out)[0].dtype(), dtype);
    const std::vector<T> got = Values<T>((*out)[0]);
    for (int64_t i = 0; i < Count(so); ++i) {
      const Shape idx = Unflatten(i, so);
      const T x = a[SourceIndex(idx, sa)], y = b[SourceIndex(idx, sb)];
      const T want = fmod ? CMod(x, y) : PythonMod(x, y);
      if constexpr (std::is_floating_point_v<T>) {
        EXPECT_TRUE(Close(got[i], want, 0, 0)) << x << " mod " << y;
        if (want == 0) {
          EXPECT_EQ(std::signbit(got[i]), std::signbit(want)) << x << " mod " << y;
        }
      } else {
        EXPECT_EQ(got[i], want) << +x << " mod " << +y;
      }
    }
  }
}

TEST(ModTest, IntegersFollowTheDivisorsSign) {
  ExpectMod<int32_t>(DType::kI32, false);
  ExpectMod<int64_t>(DType::kI64, false);
  ExpectMod<int8_t>(DType::kI8, false);
  ExpectMod<uint8_t>(DType::kU8, false);
}
TEST(ModTest, IntegerFmodFollowsTheDividendsSign) {
  ExpectMod<int32_t>(DType::kI32, true);
  ExpectMod<int64_t>(DType::kI64, true);
  ExpectMod<int8_t>(DType::kI8, true);
  ExpectMod<uint8_t>(DType::kU8, true);
}
TEST(ModTest, Floats) {
  ExpectMod<float>(DType::kF32, true);
  ExpectMod<double>(DType::kF64, true);
  ExpectMod<float>(DType::kF32, false);
  ExpectMod<double>(DType::kF64, false);
}

TEST(ModTest, EdgeCases) {
  const int64_t min64 = std::numeric_limits<int64_t>::min();
  Tensor a = MakeTensor<int64_t>(DType::kI64, {5}, {min64, min64, 7, -7, 5});
  Tensor b = MakeTensor<int64_t>(DType::kI64, {5}, {-1, 3, 0, 3, -3});
  auto mod = RunOp("Mod", {&a, &b});
  ASSERT_TRUE(mod.ok()) << mod.status();
  EXPECT_EQ(Values<int64_t>((*mod)[0]), (std::vector<int64_t>{0, 1, 0, 2, -1}));
  auto fmod = RunOp("Mod", {&a, &b}, {{"fmod", int64_t{1}}});
  ASSERT_TRUE(fmod.ok()) << fmod.status();
  EXPECT_EQ(Values<int64_t>((*fmod)[0]), (std::vector<int64_t>{0, -2, 0, -1, 2}));
  Tensor i8a = MakeTensor<int8_t>(DType::kI8, {2}, {-128, -128});
  Tensor i8b = MakeTensor<int8_t>(DType::kI8, {2}, {-1, 127});
  auto m8 = RunOp("Mod", {&i8a, &i8b});
  ASSERT_TRUE(m8.ok()) << m8.status();
  EXPECT_EQ(Values<int8_t>((*m8)[0]), (std::vector<int8_t>{0, 126}));
  // ONNX's test_mod_mixed_sign_float16 values, fmod = 1; infinities and 0.
  Tensor h = MakeTensor<uint16_t>(DType::kF16, {4}, ToHalf({-4.3f, 7.2f, 5.0f, std::numeric_limits<float>::infinity()}));
  Tensor hd = MakeTensor<uint16_t>(DType::kF16, {4}, ToHalf({2.1f, -3.4f, 0.0f, 2.0f}));
  auto mh = RunOp("Mod", {&h, &hd}, {{"fmod", int64_t{1}}});
  ASSERT_TRUE(mh.ok()) << mh.status();
  const std::vector<uint16_t> gh = Values<uint16_t>((*mh)[0]);
  const float h0 = FromHalf(ToHalf({-4.3f})[0]), h1 = FromHalf(ToHalf({2.1f})[0]);
  EXPECT_EQ(FromHalf(gh[0]), FromHalf(ToHalf({std::fmod(h0, h1)})[0]));
  EXPECT_TRUE(std::isnan(FromHalf(gh[2])));
  EXPECT_TRUE(std::isnan(FromHalf(gh[3])));
  // A finite dividend over an infinite divisor: fmod keeps it, mod moves it
  // to the divisor's side.
  Tensor f = MakeTensor<double>(DType::kF64, {2}, {-3, 3});
  Tensor inf = MakeTensor<double>(DType::kF64, {}, {kInf});
  auto fi = RunOp("Mod", {&f, &inf}, {{"fmod", int64_t{1}}});
  ASSERT_TRUE(fi.ok()) << fi.status();
  EXPECT_EQ(Values<double>((*fi)[0]), (std::vector<double>{-3, 3}));
  auto mi = RunOp("Mod", {&f, &inf});
  ASSERT_TRUE(mi.ok()) << mi.status();
  EXPECT_EQ(Values<double>((*mi)[0]), (std::vector<double>{kInf, 3}));
}

TEST(ModTest, Errors) {
  Tensor f = MakeTensor<float>(DType::kF32, {2}, {1, 2});
  Tensor f3 = MakeTensor<float>(DType::kF32, {3}, {1, 2, 3});
  Tensor i = MakeTensor<int32_t>(DType::kI32, {2}, {1, 2});
  Tensor b = MakeTensor<uint8_t>(DType::kBool, {2}, {1, 0});
  EXPECT_TRUE(ErrorContains(RunOp("Mod", {&f, &f}, {{"fmod", int64_t{2}}}).status(),
                            "attribute 'fmod' is 2; expected 0 or 1"));
  EXPECT_TRUE(ErrorContains(RunOp("Mod", {&f, &i}).status(), "same dtype"));
  EXPECT_TRUE(ErrorContains(RunOp("Mod", {&b, &b}).status(), "input 0 (A) has dtype bool"));
  EXPECT_TRUE(ErrorContains(RunOp("Mod", {&f, &f3}).status(), "input 0 (A) [2] and input 1 (B) [3]"));
  EXPECT_TRUE(ErrorContains(RunKernelPlanned("Mod", {&f, &f}, DType::kF64, {2}).status(),
                            "output 0 was allocated as f64 but the kernel writes f32"));
  EXPECT_TRUE(ErrorContains(RunKernelPlanned("Mod", {&f, &i}, DType::kF32, {2}).status(), "dtype"));
}

// --- BitShift -----------------------------------------------------------------

TEST(BitShiftTest, LeftAndRightBroadcast) {
  for (const auto& [sa, sb] : BinaryCases()) {
    SCOPED_TRACE(absl::StrCat("[", absl::StrJoin(sa, ","), "] [", absl::StrJoin(sb, ","), "]"));
    std::vector<uint8_t> x(static_cast<size_t>(Count(sa))), y(static_cast<size_t>(Count(sb)));
    for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<uint8_t>(i * 37 + 5);
    for (size_t i = 0; i < y.size(); ++i) y[i] = static_cast<uint8_t>(i % 11);  // 8, 9, 10 shift everything out
    Tensor tx = MakeTensor<uint8_t>(DType::kU8, sa, x);
    Tensor ty = MakeTensor<uint8_t>(DType::kU8, sb, y);
    for (const char* direction : {"LEFT", "RIGHT"}) {
      auto out = RunOp("BitShift", {&tx, &ty}, {{"direction", std::string(direction)}});
      ASSERT_TRUE(out.ok()) << out.status();
      const Shape so = BroadcastRef({sa, sb});
      ASSERT_EQ((*out)[0].shape(), so);
      ASSERT_EQ((*out)[0].dtype(), DType::kU8);
      const std::vector<uint8_t> got = Values<uint8_t>((*out)[0]);
      for (int64_t i = 0; i < Count(so); ++i) {
        const Shape idx = Unflatten(i, so);
        const unsigned a = x[SourceIndex(idx, sa)], s = y[SourceIndex(idx, sb)];
        const unsigned want = s >= 8 ? 0 : (direction[0] == 'L' ? (a << s) & 0xff : a >> s);
        ASSERT_EQ(got[i], want) << direction << " " << a << " by " << s;
      }
    }
  }
}

TEST(BitShiftTest, WideUnsignedTypes) {
  Tensor x64 = MakeTensor<uint64_t>(DType::kU64, {3}, {1, 0x8000'0000'0000'0001ull, 5});
  Tensor y64 = MakeTensor<uint64_t>(DType::kU64, {3}, {63, 1, 64});
  auto left = RunOp("BitShift", {&x64, &y64}, {{"direction", std::string("LEFT")}});
  ASSERT_TRUE(left.ok()) << left.status();
  EXPECT_EQ(Values<uint64_t>((*left)[0]), (std::vector<uint64_t>{0x8000'0000'0000'0000ull, 2, 0}));
  Tensor x16 = MakeTensor<uint16_t>(DType::kU16, {2}, {0x8001, 0xffff});
  Tensor y16 = MakeTensor<uint16_t>(DType::kU16, {2}, {15, 16});
  auto right = RunOp("BitShift", {&x16, &y16}, {{"direction", std::string("RIGHT")}});
  ASSERT_TRUE(right.ok()) << right.status();
  EXPECT_EQ(Values<uint16_t>((*right)[0]), (std::vector<uint16_t>{1, 0}));
  auto left16 = RunOp("BitShift", {&x16, &y16}, {{"direction", std::string("LEFT")}});
  ASSERT_TRUE(left16.ok()) << left16.status();
  EXPECT_EQ(Values<uint16_t>((*left16)[0]), (std::vector<uint16_t>{0x8000, 0}));
  Tensor x32 = MakeTensor<uint32_t>(DType::kU32, {1}, {3});
  Tensor y32 = MakeTensor<uint32_t>(DType::kU32, {1}, {31});
  auto left32 = RunOp("BitShift", {&x32, &y32}, {{"direction", std::string("LEFT")}});
  ASSERT_TRUE(left32.ok()) << left32.status();
  EXPECT_EQ(Values<uint32_t>((*left32)[0]), (std::vector<uint32_t>{0x8000'0000u}));
}

TEST(BitShiftTest, Errors) {
  Tensor u = MakeTensor<uint8_t>(DType::kU8, {2}, {1, 2});
  Tensor u3 = MakeTensor<uint8_t>(DType::kU8, {3}, {1, 2, 3});
  Tensor i = MakeTensor<int32_t>(DType::kI32, {2}, {1, 2});
  const Attrs left = {{"direction", std::string("LEFT")}};
  EXPECT_TRUE(ErrorContains(RunOp("BitShift", {&u, &u}).status(), "attribute 'direction'"));
  EXPECT_TRUE(ErrorContains(RunOp("BitShift", {&u, &u}, {{"direction", std::string("left")}}).status(),
                            "attribute 'direction' is 'left'; expected 'LEFT' or 'RIGHT'"));
  EXPECT_TRUE(ErrorContains(RunOp("BitShift", {&i, &i}, left).status(), "input 0 (X) has dtype i32; expected one of u64, u32, u16, u8"));
  EXPECT_TRUE(ErrorContains(RunOp("BitShift", {&u, &i}, left).status(), "input 1 (Y) has dtype i32"));
  EXPECT_TRUE(ErrorContains(RunOp("BitShift", {&u, &u3}, left).status(), "input 0 (X) [2] and input 1 (Y) [3]"));
  EXPECT_TRUE(ErrorContains(RunKernelPlanned("BitShift", {&u, &u}, DType::kU8, {2}, {{"direction", std::string("UP")}})
                                .status(),
                            "attribute 'direction' is 'UP'"));
  EXPECT_TRUE(ErrorContains(RunKernelPlanned("BitShift", {&u, &u}, DType::kI8, {2}, left).status(),
                            "output 0 was allocated as i8 but the kernel writes u8"));
}

// --- Dropout ------------------------------------------------------------------

TEST(DropoutTest, InferenceIsIdentityWithAnAllTrueMask) {
  const std::vector<float> in = {1, -2, 3, kNaN, 0, 6};
  Tensor x = MakeTensor<float>(DType::kF32, {2, 3}, in);
  Tensor ratio = MakeTensor<float>(DType::kF32, {}, {0.75f});
  Tensor no = MakeTensor<uint8_t>(DType::kBool, {}, {0});
  Tensor yes = MakeTensor<uint8_t>(DType::kBool, {}, {1});
  Tensor zero = MakeTensor<double>(DType::kF64, {1}, {0.0});
  const std::vector<std::pair<std::vector<const Tensor*>, Attrs>> cases = {
      {{&x}, {}},
      {{&x}, {{"ratio", 0.2}}},  // opset 10
      {{&x}, {{"seed", int64_t{3}}}},
      {{&x, &ratio}, {}},
      {{&x, &ratio, &no}, {}},
      {{&x, nullptr, &no}, {}},
      {{&x, &zero, &yes}, {}},  // training with ratio 0 drops nothing
  };
  for (size_t k = 0; k < cases.size(); ++k) {
    SCOPED_TRACE(absl::StrCat("case ", k));
    for (int outputs : {1, 2}) {
      auto out = RunOp("Dropout", cases[k].first, cases[k].second, outputs);
      ASSERT_TRUE(out.ok()) << out.status();
      ASSERT_EQ(out->size(), static_cast<size_t>(outputs));
      EXPECT_EQ((*out)[0].dtype(), DType::kF32);
      EXPECT_EQ((*out)[0].shape(), (Shape{2, 3}));
      const std::vector<float> got = Values<float>((*out)[0]);
      EXPECT_EQ(std::memcmp(got.data(), in.data(), in.size() * sizeof(float)), 0);
      if (outputs == 2) {
        EXPECT_EQ((*out)[1].dtype(), DType::kBool);
        EXPECT_EQ((*out)[1].shape(), (Shape{2, 3}));
        EXPECT_EQ(Values<uint8_t>((*out)[1]), std::vector<uint8_t>(6, 1));
      }
    }
  }
  Tensor h = MakeTensor<uint16_t>(DType::kF16, {0, 4}, {});
  auto empty = RunOp("Dropout", {&h}, {}, 2);
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_EQ((*empty)[0].shape(), (Shape{0, 4}));
  EXPECT_EQ((*empty)[1].shape(), (Shape{0, 4}));
  Tensor d = MakeTensor<double>(DType::kF64, {}, {2.5});
  auto scalar = RunOp("Dropout", {&d});
  ASSERT_TRUE(scalar.ok()) << scalar.status();
  EXPECT_EQ(Values<double>((*scalar)[0]), std::vector<double>{2.5});
}

TEST(DropoutTest, TrainingWithARatioIsUnimplemented) {
  Tensor x = MakeTensor<float>(DType::kF32, {3}, {1, 2, 3});
  Tensor ratio = MakeTensor<float>(DType::kF32, {}, {0.5f});
  Tensor yes = MakeTensor<uint8_t>(DType::kBool, {}, {1});
  // Known at plan time: the shape function refuses.
  absl::Status s = RunOp("Dropout", {&x, &ratio, &yes}).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented) << s;
  EXPECT_TRUE(ErrorContains(s, "(Dropout) in subgraph 0: training_mode is true with ratio 0.5; grove is an inference"));
  // The default ratio is 0.5.
  EXPECT_EQ(RunOp("Dropout", {&x, nullptr, &yes}).status().code(), absl::StatusCode::kUnimplemented);
  // Known only when run: the kernel does.
  s = RunKernelPlanned("Dropout", {&x, &ratio, &yes}, DType::kF32, {3}).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented) << s;
  EXPECT_TRUE(ErrorContains(s, "training_mode is true with ratio 0.5"));
  Tensor half_ratio = MakeTensor<uint16_t>(DType::kF16, {}, ToHalf({0.25f}));
  s = RunKernelPlanned("Dropout", {&x, &half_ratio, &yes}, DType::kF32, {3}).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented) << s;
  EXPECT_EQ(RunKernelPlanned("Dropout", {&x, nullptr, &yes}, DType::kF32, {3}).status().code(),
            absl::StatusCode::kUnimplemented);
}

TEST(DropoutTest, Errors) {
  Tensor x = MakeTensor<float>(DType::kF32, {3}, {1, 2, 3});
  Tensor i = MakeTensor<int32_t>(DType::kI32, {3}, {1, 2, 3});
  Tensor r2 = MakeTensor<float>(DType::kF32, {2}, {0.5f, 0.5f});
  Tensor ri = MakeTensor<int32_t>(DType::kI32, {}, {0});
  Tensor f = MakeTensor<float>(DType::kF32, {}, {0});
  Tensor yes = MakeTensor<uint8_t>(DType::kBool, {}, {1});
  Tensor yes2 = MakeTensor<uint8_t>(DType::kBool, {2}, {1, 1});
  Tensor big = MakeTensor<float>(DType::kF32, {}, {1.5f});
  EXPECT_TRUE(ErrorContains(RunOp("Dropout", {&i}).status(), "input 0 (data) has dtype i32; expected one of f32"));
  EXPECT_TRUE(ErrorContains(RunOp("Dropout", {&x, &r2}).status(),
                            "input 1 (ratio) must hold one element (a scalar); got shape [2]"));
  EXPECT_TRUE(ErrorContains(RunOp("Dropout", {&x, &ri}).status(), "input 1 (ratio) has dtype i32"));
  EXPECT_TRUE(ErrorContains(RunOp("Dropout", {&x, &f, &f}).status(), "input 2 (training_mode) has dtype f32"));
  EXPECT_TRUE(ErrorContains(RunOp("Dropout", {&x, &f, &yes2}).status(),
                            "input 2 (training_mode) must hold one element"));
  // The kernel's own checks, for inputs a plan did not see.
  EXPECT_TRUE(ErrorContains(RunKernelPlanned("Dropout", {&x, &f, &yes2}, DType::kF32, {3}).status(),
                            "input 2 (training_mode) must be one bool; got bool [2]"));
  EXPECT_TRUE(ErrorContains(RunKernelPlanned("Dropout", {&x, &r2, &yes}, DType::kF32, {3}).status(),
                            "input 1 (ratio) must be one float; got f32 [2]"));
  EXPECT_TRUE(ErrorContains(RunOp("Dropout", {&x, &big, &yes}).status(),
                            "input 1 (ratio) is 1.5; expected a value in [0, 1)"));
  EXPECT_TRUE(ErrorContains(RunKernelPlanned("Dropout", {&x, &big, &yes}, DType::kF32, {3}).status(),
                            "input 1 (ratio) is 1.5; expected a value in [0, 1)"));
  EXPECT_TRUE(ErrorContains(RunKernelPlanned("Dropout", {&i}, DType::kI32, {3}).status(),
                            "does not support dtype i32"));
  EXPECT_TRUE(ErrorContains(RunKernelPlanned("Dropout", {&x}, DType::kF32, {4}).status(),
                            "output 0 was allocated with shape [4] but the kernel writes [3]"));
}

// --- window generators ----------------------------------------------------------

double WindowRef(const std::string& op, int64_t n, int64_t size, bool periodic) {
  const double big_n = static_cast<double>(periodic ? size : size - 1);
  const double c1 = std::cos(2 * std::numbers::pi * n / big_n);
  if (op == "HannWindow") return 0.5 - 0.5 * c1;
  if (op == "HammingWindow") return 25.0 / 46 - 21.0 / 46 * c1;
  return 0.42 - 0.5 * c1 + 0.08 * std::cos(4 * std::numbers::pi * n / big_n);
}

TEST(WindowTest, PeriodicAndSymmetric) {
  for (const std::string op : {"HannWindow", "HammingWindow", "BlackmanWindow"}) {
    for (int64_t size : {0, 1, 2, 5, 10, 64}) {
      for (int periodic : {-1, 0, 1}) {  // -1: the attribute's default (1)
        SCOPED_TRACE(absl::StrCat(op, " size ", size, " periodic ", periodic));
        Attrs attrs;
        if (periodic >= 0) attrs.push_back({"periodic", int64_t{periodic}});
        Tensor t = MakeTensor<int64_t>(DType::kI64, {}, {size});
        auto out = RunOp(op, {&t}, attrs);
        ASSERT_TRUE(out.ok()) << out.status();
        EXPECT_EQ((*out)[0].dtype(), DType::kF32);
        ASSERT_EQ((*out)[0].shape(), (Shape{size}));
        const std::vector<float> got = Values<float>((*out)[0]);
        for (int64_t n = 0; n < size; ++n) {
          EXPECT_TRUE(Close(got[n], static_cast<float>(WindowRef(op, n, size, periodic != 0)), 1e-6, 1e-7))
              << "n " << n;
        }
      }
    }
  }
}

TEST(WindowTest, OutputDatatypes) {
  Tensor t = MakeTensor<int32_t>(DType::kI32, {}, {8});
  auto f64 = RunOp("HammingWindow", {&t}, {{"output_datatype", int64_t{static_cast<int64_t>(DType::kF64)}}});
  ASSERT_TRUE(f64.ok()) << f64.status();
  EXPECT_EQ((*f64)[0].dtype(), DType::kF64);
  const std::vector<double> g = Values<double>((*f64)[0]);
  for (int64_t n = 0; n < 8; ++n) EXPECT_NEAR(g[n], WindowRef("HammingWindow", n, 8, true), 1e-15);
  auto f16 = RunOp("HannWindow", {&t}, {{"output_datatype", int64_t{static_cast<int64_t>(DType::kF16)}}});
  ASSERT_TRUE(f16.ok()) << f16.status();
  EXPECT_EQ((*f16)[0].dtype(), DType::kF16);
  EXPECT_EQ(FromHalf(Values<uint16_t>((*f16)[0])[4]), 1.0f);
  EXPECT_EQ(FromHalf(Values<uint16_t>((*f16)[0])[2]), 0.5f);
  // Integers truncate like Cast: only the window's peak of 1 survives.
  auto i32 = RunOp("HannWindow", {&t}, {{"output_datatype", int64_t{static_cast<int64_t>(DType::kI32)}}});
  ASSERT_TRUE(i32.ok()) << i32.status();
  EXPECT_EQ((*i32)[0].dtype(), DType::kI32);
  EXPECT_EQ(Values<int32_t>((*i32)[0]), (std::vector<int32_t>{0, 0, 0, 0, 1, 0, 0, 0}));
  auto u8 = RunOp("BlackmanWindow", {&t}, {{"output_datatype", int64_t{static_cast<int64_t>(DType::kU8)}}});
  ASSERT_TRUE(u8.ok()) << u8.status();
  EXPECT_EQ((*u8)[0].dtype(), DType::kU8);
}

TEST(WindowTest, UnknownSizeGivesAnUnknownDim) {
  auto sym = InferSymbolic("HannWindow", {{DType::kI64, {}}});
  ASSERT_TRUE(sym.ok()) << sym.status();
  ASSERT_EQ(sym->shape.size(), 1u);
  EXPECT_TRUE(sym->shape[0].is_unknown());
  EXPECT_EQ(sym->dtype, DType::kF32);
  Tensor t = MakeTensor<int64_t>(DType::kI64, {1}, {4});  // [1] is taken as a scalar
  auto planned = RunKernelPlanned("BlackmanWindow", {&t}, DType::kF64, {4}, {{"periodic", int64_t{0}}});
  ASSERT_TRUE(planned.ok()) << planned.status();
  const std::vector<double> got = Values<double>(*planned);
  for (int64_t n = 0; n < 4; ++n) EXPECT_NEAR(got[n], WindowRef("BlackmanWindow", n, 4, false), 1e-15);
}

TEST(WindowTest, Errors) {
  Tensor neg = MakeTensor<int64_t>(DType::kI64, {}, {-1});
  Tensor two = MakeTensor<int64_t>(DType::kI64, {2}, {3, 3});
  Tensor f = MakeTensor<float>(DType::kF32, {}, {3});
  Tensor huge = MakeTensor<int64_t>(DType::kI64, {}, {std::numeric_limits<int64_t>::max()});
  Tensor ok = MakeTensor<int64_t>(DType::kI64, {}, {3});
  EXPECT_TRUE(ErrorContains(RunOp("HannWindow", {&neg}).status(), "input 0 (size) is -1; expected >= 0"));
  EXPECT_TRUE(ErrorContains(RunOp("HammingWindow", {&two}).status(),
                            "input 0 (size) must hold one element (a scalar); got shape [2]"));
  EXPECT_TRUE(ErrorContains(RunOp("BlackmanWindow", {&f}).status(), "input 0 (size) has dtype f32"));
  EXPECT_FALSE(RunOp("HannWindow", {&huge}).ok());
  EXPECT_TRUE(ErrorContains(RunOp("HannWindow", {&ok}, {{"periodic", int64_t{2}}}).status(),
                            "attribute 'periodic' is 2; expected 0 or 1"));
  EXPECT_TRUE(ErrorContains(RunOp("HannWindow", {&ok}, {{"output_datatype", int64_t{9}}}).status(),
                            "attribute 'output_datatype' is 9; expected a numeric grove dtype"));
  EXPECT_TRUE(ErrorContains(RunOp("HannWindow", {&ok}, {{"output_datatype", int64_t{0}}}).status(),
                            "attribute 'output_datatype' is 0"));
  // The kernel's own checks.
  EXPECT_TRUE(ErrorContains(RunKernelPlanned("HannWindow", {&neg}, DType::kF32, {0}).status(),
                            "input 0 (size) is -1; expected >= 0"));
  EXPECT_TRUE(ErrorContains(RunKernelPlanned("HannWindow", {&two}, DType::kF32, {3}).status(),
                            "input 0 (size) must hold one element (a scalar); got shape [2]"));
  EXPECT_TRUE(ErrorContains(RunKernelPlanned("HannWindow", {&f}, DType::kF32, {3}).status(),
                            "input 0 (size) has dtype f32; expected i32 or i64"));
  EXPECT_TRUE(ErrorContains(RunKernelPlanned("HannWindow", {&ok}, DType::kF32, {4}).status(),
                            "output 0 was allocated with shape [4] but the kernel writes [3]"));
  EXPECT_TRUE(ErrorContains(RunKernelPlanned("HannWindow", {&ok}, DType::kBool, {3}).status(),
                            "does not support dtype bool"));
}

// --- registry -----------------------------------------------------------------

TEST(MathRegistryTest, EveryOpHasAShapeFunctionAndACpuKernel) {
  const ir::OpRegistry& registry = runtime::GlobalOpRegistry();
  for (const char* op :
       {"Pow",  "Sqrt",           "Exp",         "Log",       "Neg",      "Abs",  "Reciprocal", "Erf",     "LeakyRelu",
        "Elu",  "Gelu",           "HardSigmoid", "HardSwish", "Softplus", "Clip", "Min",        "Max",     "Sum",
        "Mean", "GreaterOrEqual", "LessOrEqual", "Not",       "And",      "Or",   "Xor",        "CastLike",
        "Floor", "Ceil",          "Round", "Sin", "Cos", "Tan", "Asin", "Acos", "Atan", "Sinh", "Cosh", "Asinh",
        "Acosh", "Atanh", "Softsign", "Selu", "Celu", "ThresholdedRelu", "Shrink", "Sign", "IsNaN", "IsInf", "PRelu",
        "Mod", "BitShift", "Dropout", "HannWindow", "HammingWindow", "BlackmanWindow"}) {
    ASSERT_NE(registry.Find(op), nullptr) << op;
    EXPECT_NE(registry.Find(op)->infer, nullptr) << op;
    EXPECT_TRUE(registry.Supports(op, ir::Backend::kCpu)) << op;
  }
  const ir::OpDef* clip = registry.Find("Clip");
  EXPECT_EQ(clip->max_inputs, 3);
  ASSERT_NE(clip->FindAttr("min"), nullptr);
  EXPECT_EQ(clip->FindAttr("min")->kind, ir::AttrKind::kFloat);
  EXPECT_EQ(registry.Find("Gelu")->FindAttr("approximate")->kind, ir::AttrKind::kString);
  EXPECT_EQ(registry.Find("HardSigmoid")->FindAttr("beta")->kind, ir::AttrKind::kFloat);
  EXPECT_EQ(registry.Find("Sum")->max_inputs, -1);
  EXPECT_EQ(registry.Find("Max")->min_inputs, 1);
  EXPECT_EQ(registry.Find("Dropout")->max_inputs, 3);
  EXPECT_EQ(registry.Find("Dropout")->max_outputs, 2);
  EXPECT_EQ(registry.Find("Dropout")->FindAttr("ratio")->kind, ir::AttrKind::kFloat);
  EXPECT_EQ(registry.Find("Dropout")->FindAttr("seed")->kind, ir::AttrKind::kInt);
  EXPECT_EQ(registry.Find("BitShift")->FindAttr("direction")->kind, ir::AttrKind::kString);
  EXPECT_EQ(registry.Find("HannWindow")->FindAttr("output_datatype")->kind, ir::AttrKind::kInt);
}

}  // namespace
}  // namespace grove
