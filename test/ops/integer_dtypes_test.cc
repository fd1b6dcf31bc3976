// The 16-bit and wide unsigned integer dtypes (i16 u16 u32 u64) through the
// ops that take any numeric dtype: wrapping arithmetic, division checks,
// comparisons, Min/Max, Abs/Neg, Pow exponents, reductions, ArgMax and every
// Cast pair with them, against values worked out here.
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test/op_test_util.h"

namespace grove {
namespace {

using ::grove::testing::MakeTensor;
using ::grove::testing::RunOp;
using ::grove::testing::Values;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(IntegerDTypesTest, ArithmeticWrapsInTheOperandType) {
  Tensor a16 = MakeTensor<uint16_t>(DType::kU16, {3}, {65535, 0, 300});
  Tensor b16 = MakeTensor<uint16_t>(DType::kU16, {3}, {1, 1, 300});
  auto add = RunOp("Add", {&a16, &b16});
  ASSERT_TRUE(add.ok()) << add.status();
  EXPECT_EQ((*add)[0].dtype(), DType::kU16);
  EXPECT_THAT(Values<uint16_t>((*add)[0]), ElementsAre(0, 1, 600));
  auto sub = RunOp("Sub", {&b16, &a16});
  ASSERT_TRUE(sub.ok()) << sub.status();
  EXPECT_THAT(Values<uint16_t>((*sub)[0]), ElementsAre(2, 1, 0));
  // 65535 * 65535 would overflow int after promotion; it wraps in u16.
  auto mul = RunOp("Mul", {&a16, &a16});
  ASSERT_TRUE(mul.ok()) << mul.status();
  EXPECT_THAT(Values<uint16_t>((*mul)[0]), ElementsAre(1, 0, static_cast<uint16_t>(90000)));

  Tensor a64 = MakeTensor<uint64_t>(DType::kU64, {2}, {std::numeric_limits<uint64_t>::max(), 10});
  Tensor b64 = MakeTensor<uint64_t>(DType::kU64, {1}, {3});
  auto add64 = RunOp("Add", {&a64, &b64});
  ASSERT_TRUE(add64.ok()) << add64.status();
  EXPECT_THAT(Values<uint64_t>((*add64)[0]), ElementsAre(2, 13));
  auto div64 = RunOp("Div", {&a64, &b64});
  ASSERT_TRUE(div64.ok()) << div64.status();
  EXPECT_THAT(Values<uint64_t>((*div64)[0]), ElementsAre(std::numeric_limits<uint64_t>::max() / 3, 3));

  Tensor i16 = MakeTensor<int16_t>(DType::kI16, {2}, {-32768, 7});
  Tensor m1 = MakeTensor<int16_t>(DType::kI16, {2}, {-1, -2});
  auto div16 = RunOp("Div", {&i16, &m1});
  ASSERT_TRUE(div16.ok()) << div16.status();
  EXPECT_THAT(Values<int16_t>((*div16)[0]), ElementsAre(-32768, -3));
}

TEST(IntegerDTypesTest, IntegerDivisionByZeroIsAnError) {
  Tensor a = MakeTensor<uint32_t>(DType::kU32, {2}, {4, 5});
  Tensor b = MakeTensor<uint32_t>(DType::kU32, {2}, {2, 0});
  auto out = RunOp("Div", {&a, &b});
  ASSERT_FALSE(out.ok());
  EXPECT_THAT(std::string(out.status().message()), HasSubstr("integer division by zero"));
}

TEST(IntegerDTypesTest, ComparisonsMinMaxAbsNeg) {
  Tensor a = MakeTensor<uint32_t>(DType::kU32, {3}, {4000000000u, 1, 7});
  Tensor b = MakeTensor<uint32_t>(DType::kU32, {3}, {1, 4000000000u, 7});
  auto less = RunOp("Less", {&a, &b});
  ASSERT_TRUE(less.ok()) << less.status();
  EXPECT_THAT(Values<uint8_t>((*less)[0]), ElementsAre(0, 1, 0));
  auto eq = RunOp("Equal", {&a, &b});
  ASSERT_TRUE(eq.ok()) << eq.status();
  EXPECT_THAT(Values<uint8_t>((*eq)[0]), ElementsAre(0, 0, 1));
  auto max = RunOp("Max", {&a, &b});
  ASSERT_TRUE(max.ok()) << max.status();
  EXPECT_THAT(Values<uint32_t>((*max)[0]), ElementsAre(4000000000u, 4000000000u, 7));
  auto min = RunOp("Min", {&a, &b});
  ASSERT_TRUE(min.ok()) << min.status();
  EXPECT_THAT(Values<uint32_t>((*min)[0]), ElementsAre(1, 1, 7));

  Tensor s = MakeTensor<int16_t>(DType::kI16, {3}, {-5, 0, -32768});
  auto abs = RunOp("Abs", {&s});
  ASSERT_TRUE(abs.ok()) << abs.status();
  EXPECT_THAT(Values<int16_t>((*abs)[0]), ElementsAre(5, 0, -32768));  // wraps, as numpy does
  auto neg = RunOp("Neg", {&s});
  ASSERT_TRUE(neg.ok()) << neg.status();
  EXPECT_THAT(Values<int16_t>((*neg)[0]), ElementsAre(5, 0, -32768));
  Tensor u = MakeTensor<uint16_t>(DType::kU16, {1}, {3});
  auto neg_unsigned = RunOp("Neg", {&u});
  EXPECT_FALSE(neg_unsigned.ok()) << "Neg is defined on signed types only";
}

TEST(IntegerDTypesTest, PowTakesUnsignedExponents) {
  Tensor base = MakeTensor<float>(DType::kF32, {3}, {2.0f, 3.0f, 0.5f});
  Tensor e = MakeTensor<uint64_t>(DType::kU64, {3}, {10, 0, 2});
  auto out = RunOp("Pow", {&base, &e});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].dtype(), DType::kF32);
  EXPECT_THAT(Values<float>((*out)[0]), ElementsAre(1024.0f, 1.0f, 0.25f));
}

TEST(IntegerDTypesTest, ReduceMaxAndArgMax) {
  Tensor x = MakeTensor<uint64_t>(DType::kU64, {2, 3}, {5, 18446744073709551615ull, 1, 0, 2, 2});
  auto max = RunOp("ReduceMax", {&x}, {{"axes", std::vector<int64_t>{1}}, {"keepdims", int64_t{0}}});
  ASSERT_TRUE(max.ok()) << max.status();
  EXPECT_THAT(Values<uint64_t>((*max)[0]), ElementsAre(18446744073709551615ull, 2));
  auto arg = RunOp("ArgMax", {&x}, {{"axis", int64_t{1}}, {"keepdims", int64_t{0}}});
  ASSERT_TRUE(arg.ok()) << arg.status();
  EXPECT_THAT(Values<int64_t>((*arg)[0]), ElementsAre(1, 1));
}

TEST(IntegerDTypesTest, CastToAndFromTheNewDTypes) {
  Tensor f = MakeTensor<float>(DType::kF32, {4}, {-1.5f, 65535.0f, 3.9f, 70000.0f});
  auto to_i16 = RunOp("Cast", {&f}, {{"to", static_cast<int64_t>(DType::kI16)}});
  ASSERT_TRUE(to_i16.ok()) << to_i16.status();
  // float -> integer truncates toward zero and saturates (see Cast's kernel).
  EXPECT_THAT(Values<int16_t>((*to_i16)[0]), ElementsAre(-1, 32767, 3, 32767));
  auto to_u16 = RunOp("Cast", {&f}, {{"to", static_cast<int64_t>(DType::kU16)}});
  ASSERT_TRUE(to_u16.ok()) << to_u16.status();
  EXPECT_THAT(Values<uint16_t>((*to_u16)[0]), ElementsAre(0, 65535, 3, 65535));

  // Integer -> integer keeps the low bits, as C and numpy do.
  Tensor big = MakeTensor<uint64_t>(DType::kU64, {2}, {0x1'0000'0005ull, 18446744073709551615ull});
  auto to_u32 = RunOp("Cast", {&big}, {{"to", static_cast<int64_t>(DType::kU32)}});
  ASSERT_TRUE(to_u32.ok()) << to_u32.status();
  EXPECT_THAT(Values<uint32_t>((*to_u32)[0]), ElementsAre(5u, 4294967295u));
  auto to_f64 = RunOp("Cast", {&big}, {{"to", static_cast<int64_t>(DType::kF64)}});
  ASSERT_TRUE(to_f64.ok()) << to_f64.status();
  EXPECT_THAT(Values<double>((*to_f64)[0]), ElementsAre(4294967301.0, 18446744073709551615.0));

  // Every pair round-trips a value that all thirteen dtypes hold exactly.
  const DType all[] = {DType::kF32, DType::kF64, DType::kF16, DType::kBF16, DType::kI64, DType::kI32, DType::kI16,
                       DType::kI8,  DType::kU64, DType::kU32, DType::kU16,  DType::kU8,  DType::kBool};
  Tensor one = MakeTensor<float>(DType::kF32, {1}, {1.0f});
  for (DType from : all) {
    auto src = RunOp("Cast", {&one}, {{"to", static_cast<int64_t>(from)}});
    ASSERT_TRUE(src.ok()) << src.status();
    for (DType to : all) {
      SCOPED_TRACE(absl::StrCat(DTypeName(from), " -> ", DTypeName(to)));
      auto mid = RunOp("Cast", {&(*src)[0]}, {{"to", static_cast<int64_t>(to)}});
      ASSERT_TRUE(mid.ok()) << mid.status();
      EXPECT_EQ((*mid)[0].dtype(), to);
      auto back = RunOp("Cast", {&(*mid)[0]}, {{"to", static_cast<int64_t>(DType::kF32)}});
      ASSERT_TRUE(back.ok()) << back.status();
      EXPECT_EQ(Values<float>((*back)[0])[0], 1.0f);
    }
  }
}

TEST(IntegerDTypesTest, CastRefusesADTypeCodeBeyondTheLast) {
  Tensor f = MakeTensor<float>(DType::kF32, {1}, {1.0f});
  auto out = RunOp("Cast", {&f}, {{"to", int64_t{15}}});
  ASSERT_FALSE(out.ok());
  EXPECT_THAT(std::string(out.status().message()), HasSubstr("13 (u64) or 14 (string)"));
}

TEST(IntegerDTypesTest, DataMovementIsDTypeAgnostic) {
  Tensor x = MakeTensor<uint16_t>(DType::kU16, {2, 3}, {1, 2, 3, 4, 5, 6});
  auto t = RunOp("Transpose", {&x}, {{"perm", std::vector<int64_t>{1, 0}}});
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ((*t)[0].dtype(), DType::kU16);
  EXPECT_THAT(Values<uint16_t>((*t)[0]), ElementsAre(1, 4, 2, 5, 3, 6));
  Tensor y = MakeTensor<uint64_t>(DType::kU64, {2}, {7, 8});
  Tensor z = MakeTensor<uint64_t>(DType::kU64, {1}, {9});
  auto c = RunOp("Concat", {&y, &z}, {{"axis", int64_t{0}}});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_THAT(Values<uint64_t>((*c)[0]), ElementsAre(7, 8, 9));
}

TEST(IntegerDTypesTest, DepthToSpaceSpaceToDepthEyeLikeAndUniqueTakeThem) {
  // [1, 4, 1, 1] -> [1, 1, 2, 2] and back, in u32 with values past 2^31.
  Tensor x = MakeTensor<uint32_t>(DType::kU32, {1, 4, 1, 1}, {4000000000u, 1, 2, 3});
  auto d2s = RunOp("DepthToSpace", {&x}, {{"blocksize", int64_t{2}}});
  ASSERT_TRUE(d2s.ok()) << d2s.status();
  EXPECT_EQ((*d2s)[0].shape(), std::vector<int64_t>({1, 1, 2, 2}));
  EXPECT_THAT(Values<uint32_t>((*d2s)[0]), ElementsAre(4000000000u, 1, 2, 3));
  auto s2d = RunOp("SpaceToDepth", {&(*d2s)[0]}, {{"blocksize", int64_t{2}}});
  ASSERT_TRUE(s2d.ok()) << s2d.status();
  EXPECT_THAT(Values<uint32_t>((*s2d)[0]), ElementsAre(4000000000u, 1, 2, 3));

  Tensor sq = MakeTensor<int16_t>(DType::kI16, {2, 3}, {0, 0, 0, 0, 0, 0});
  auto eye = RunOp("EyeLike", {&sq}, {{"k", int64_t{1}}});
  ASSERT_TRUE(eye.ok()) << eye.status();
  EXPECT_EQ((*eye)[0].dtype(), DType::kI16);
  EXPECT_THAT(Values<int16_t>((*eye)[0]), ElementsAre(0, 1, 0, 0, 0, 1));
  auto eye64 = RunOp("EyeLike", {&sq}, {{"dtype", static_cast<int64_t>(DType::kU64)}});
  ASSERT_TRUE(eye64.ok()) << eye64.status();
  EXPECT_EQ((*eye64)[0].dtype(), DType::kU64);
  EXPECT_THAT(Values<uint64_t>((*eye64)[0]), ElementsAre(1, 0, 0, 0, 1, 0));

  // Sorted by value as unsigned: 2^64 - 1 is the largest, not -1.
  Tensor u = MakeTensor<uint64_t>(DType::kU64, {5}, {std::numeric_limits<uint64_t>::max(), 3, 3, 0, 7});
  auto unique = RunOp("Unique", {&u}, {}, 4);
  ASSERT_TRUE(unique.ok()) << unique.status();
  EXPECT_THAT(Values<uint64_t>((*unique)[0]), ElementsAre(0, 3, 7, std::numeric_limits<uint64_t>::max()));
  EXPECT_THAT(Values<int64_t>((*unique)[1]), ElementsAre(3, 1, 4, 0));  // first occurrences
  EXPECT_THAT(Values<int64_t>((*unique)[3]), ElementsAre(1, 2, 1, 1));  // counts
  Tensor h = MakeTensor<uint16_t>(DType::kU16, {4}, {65535, 1, 65535, 1});
  auto unsorted = RunOp("Unique", {&h}, {{"sorted", int64_t{0}}});
  ASSERT_TRUE(unsorted.ok()) << unsorted.status();
  EXPECT_THAT(Values<uint16_t>((*unsorted)[0]), ElementsAre(65535, 1));
}

}  // namespace
}  // namespace grove
