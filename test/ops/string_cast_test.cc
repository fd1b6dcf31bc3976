// Cast and CastLike between strings and every other dtype, Tensor::CastOf to
// and from strings, and StringNormalizer, against expectations written out
// here (NumPy's and the ONNX test data's text for floats).
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test/op_test_util.h"

namespace grove {
namespace {

using ::grove::testing::MakeStrings;
using ::grove::testing::MakeTensor;
using ::grove::testing::RunOp;
using ::grove::testing::Strings;
using ::grove::testing::Values;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

absl::StatusOr<Tensor> Cast(const Tensor& x, DType to) {
  absl::StatusOr<std::vector<Tensor>> out = RunOp("Cast", {&x}, {{"to", static_cast<int64_t>(to)}});
  if (!out.ok()) return out.status();
  return (*out)[0];
}

TEST(StringCastTest, FloatToStringIsTheShortestRoundTripText) {
  const std::vector<float> v = {0.9767611f, 0.039187793f, 0.064147495f, 1e-5f, 1e8f, 123456.0f, 3.0f,
                                0.0f,       -0.0f,        -2.5f,        16777216.0f};
  absl::StatusOr<Tensor> s = Cast(MakeTensor<float>(DType::kF32, {11}, v), DType::kString);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->dtype(), DType::kString);
  EXPECT_THAT(Strings(*s), ElementsAre("0.9767611", "0.039187793", "0.064147495", "1e-05", "1e+08", "123456", "3",
                                       "0", "-0", "-2.5", "16777216"));
}

TEST(StringCastTest, SpecialValuesUseOnnxLiterals) {
  const float inf = std::numeric_limits<float>::infinity();
  absl::StatusOr<Tensor> s =
      Cast(MakeTensor<float>(DType::kF32, {3}, {std::nanf(""), inf, -inf}), DType::kString);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_THAT(Strings(*s), ElementsAre("NaN", "INF", "-INF"));
}

TEST(StringCastTest, DoublesKeepTheirOwnPrecision) {
  absl::StatusOr<Tensor> s = Cast(MakeTensor<double>(DType::kF64, {3}, {0.1, 1e-300, 1.0 / 3}), DType::kString);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_THAT(Strings(*s), ElementsAre("0.1", "1e-300", "0.3333333333333333"));
}

TEST(StringCastTest, IntegersBoolsAndHalfsToString) {
  absl::StatusOr<Tensor> i = Cast(
      MakeTensor<int64_t>(DType::kI64, {3}, {0, -9223372036854775807LL - 1, 42}), DType::kString);
  ASSERT_TRUE(i.ok()) << i.status();
  EXPECT_THAT(Strings(*i), ElementsAre("0", "-9223372036854775808", "42"));
  absl::StatusOr<Tensor> u = Cast(MakeTensor<uint8_t>(DType::kU8, {2}, {255, 7}), DType::kString);
  ASSERT_TRUE(u.ok()) << u.status();
  EXPECT_THAT(Strings(*u), ElementsAre("255", "7"));
  absl::StatusOr<Tensor> b = Cast(MakeTensor<uint8_t>(DType::kBool, {2}, {1, 0}), DType::kString);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_THAT(Strings(*b), ElementsAre("1", "0"));
  // f16 0x3C00 = 1.0, 0x3555 = 0.33325195..., bf16 0x3EF5 = 0.478515625.
  absl::StatusOr<Tensor> h = Cast(MakeTensor<uint16_t>(DType::kF16, {2}, {0x3C00, 0x3555}), DType::kString);
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_THAT(Strings(*h), ElementsAre("1", "0.33325195"));
  absl::StatusOr<Tensor> bf = Cast(MakeTensor<uint16_t>(DType::kBF16, {1}, {0x3EF5}), DType::kString);
  ASSERT_TRUE(bf.ok()) << bf.status();
  EXPECT_THAT(Strings(*bf), ElementsAre("0.47851562"));
}

TEST(StringCastTest, StringToFloatParsesNumbersAndLiterals) {
  Tensor s = MakeStrings({10}, {"0.47892547", "NaN", "INF", "+INF", "-INF", " 2.5 ", "1e3", "-inf", "infinity",
                                "1e50"});
  absl::StatusOr<Tensor> f = Cast(s, DType::kF32);
  ASSERT_TRUE(f.ok()) << f.status();
  const std::vector<float> v = Values<float>(*f);
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(v[0], 0.47892547f);
  EXPECT_TRUE(std::isnan(v[1]));
  EXPECT_EQ(v[2], inf);
  EXPECT_EQ(v[3], inf);
  EXPECT_EQ(v[4], -inf);
  EXPECT_EQ(v[5], 2.5f);
  EXPECT_EQ(v[6], 1000.0f);
  EXPECT_EQ(v[7], -inf);
  EXPECT_EQ(v[8], inf);
  EXPECT_EQ(v[9], inf);  // overflows f32: as strtof, infinity
  absl::StatusOr<Tensor> d = Cast(MakeStrings({3}, {"1e-400", "-1e-400", "0.1"}), DType::kF64);
  ASSERT_TRUE(d.ok()) << d.status();
  const std::vector<double> dv = Values<double>(*d);
  EXPECT_EQ(dv[0], 0.0);
  EXPECT_TRUE(std::signbit(dv[1]));
  EXPECT_EQ(dv[2], 0.1);
}

TEST(StringCastTest, StringToHalfRoundsOnce) {
  // 1 + 2^-11 + 2^-30 lies just above the tie between two f16 values: one
  // correct rounding goes up (0x3C01); rounding to f32 first would tie to even.
  absl::StatusOr<Tensor> h = Cast(MakeStrings({2}, {"1.00048828218690", "0.5"}), DType::kF16);
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_THAT(Values<uint16_t>(*h), ElementsAre(0x3C01, 0x3800));
}

TEST(StringCastTest, StringToIntegers) {
  absl::StatusOr<Tensor> i =
      Cast(MakeStrings({5}, {"42", "-7", "+3", "100.5", "-9223372036854775808"}), DType::kI64);
  ASSERT_TRUE(i.ok()) << i.status();
  EXPECT_THAT(Values<int64_t>(*i), ElementsAre(42, -7, 3, 100, std::numeric_limits<int64_t>::min()));
  absl::StatusOr<Tensor> u = Cast(MakeStrings({2}, {"255", "18446744073709551615"}), DType::kU64);
  ASSERT_TRUE(u.ok()) << u.status();
  EXPECT_THAT(Values<uint64_t>(*u), ElementsAre(255u, std::numeric_limits<uint64_t>::max()));
  absl::StatusOr<Tensor> i8 = Cast(MakeStrings({2}, {"127", "-128"}), DType::kI8);
  ASSERT_TRUE(i8.ok()) << i8.status();
  EXPECT_THAT(Values<int8_t>(*i8), ElementsAre(127, -128));
}

TEST(StringCastTest, StringToBool) {
  absl::StatusOr<Tensor> b = Cast(MakeStrings({6}, {"true", "False", "1", "0", "2.5", "TRUE"}), DType::kBool);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_THAT(Values<uint8_t>(*b), ElementsAre(1, 0, 1, 0, 1, 1));
}

TEST(StringCastTest, TextThatIsNotANumberIsAnErrorNamingTheElement) {
  for (const auto& [text, to] : std::vector<std::pair<std::string, DType>>{{"abc", DType::kF32},
                                                                           {"1.5abc", DType::kF32},
                                                                           {"", DType::kF64},
                                                                           {"--1", DType::kF32},
                                                                           {"+-1", DType::kI32},
                                                                           {"0x10", DType::kI32},
                                                                           {"128", DType::kI8},
                                                                           {"-1", DType::kU8},
                                                                           {"nan", DType::kI64},
                                                                           {"1e30", DType::kI64},
                                                                           {"yes", DType::kBool}}) {
    absl::StatusOr<Tensor> r = Cast(MakeStrings({2}, {"1", text}), to);
    ASSERT_FALSE(r.ok()) << "'" << text << "' to " << DTypeName(to);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(r.status().message(), HasSubstr("element 1"));
    EXPECT_THAT(r.status().message(), HasSubstr(std::string("is not a ") + std::string(DTypeName(to))));
  }
}

TEST(StringCastTest, RoundTripThroughStringIsExact) {
  std::vector<float> v;
  for (int i = 0; i < 1000; ++i) v.push_back(std::ldexp(static_cast<float>(i * 7919 % 1000 + 1) / 997.0f, i % 60 - 30));
  const Tensor x = MakeTensor<float>(DType::kF32, {1000}, v);
  absl::StatusOr<Tensor> s = Cast(x, DType::kString);
  ASSERT_TRUE(s.ok()) << s.status();
  absl::StatusOr<Tensor> back = Cast(*s, DType::kF32);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(Values<float>(*back), v);
}

TEST(StringCastTest, StringToStringKeepsTheText) {
  absl::StatusOr<Tensor> s = Cast(MakeStrings({2}, {"a", "Müller"}), DType::kString);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_THAT(Strings(*s), ElementsAre("a", "Müller"));
}

TEST(StringCastTest, CastLikeTakesTheStringDTypeOfItsSecondInput) {
  const Tensor x = MakeTensor<float>(DType::kF32, {2}, {0.5f, 2.0f});
  const Tensor like = MakeStrings({1}, {"x"});
  absl::StatusOr<std::vector<Tensor>> out = RunOp("CastLike", {&x, &like});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(Strings((*out)[0]), ElementsAre("0.5", "2"));
  const Tensor s = MakeStrings({2}, {"1.5", "-2"});
  const Tensor f = MakeTensor<double>(DType::kF64, {1}, {0});
  absl::StatusOr<std::vector<Tensor>> back = RunOp("CastLike", {&s, &f});
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_THAT(Values<double>((*back)[0]), ElementsAre(1.5, -2.0));
}

TEST(StringCastTest, TensorCastOfOwnsItsStrings) {
  absl::StatusOr<Tensor> s = Tensor::CastOf(MakeTensor<int32_t>(DType::kI32, {2}, {12, -3}).view(), DType::kString);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_THAT(Strings(*s), ElementsAre("12", "-3"));
  absl::StatusOr<Tensor> back = Tensor::CastOf(s->view(), DType::kI32);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_THAT(Values<int32_t>(*back), ElementsAre(12, -3));
}

// --- StringNormalizer -------------------------------------------------------

absl::StatusOr<Tensor> Normalize(const Tensor& x, std::vector<std::pair<std::string, AttrValue>> attrs) {
  absl::StatusOr<std::vector<Tensor>> out = RunOp("StringNormalizer", {&x}, std::move(attrs));
  if (!out.ok()) return out.status();
  return (*out)[0];
}

const std::vector<std::string> kDays = {"monday", "tuesday", "wednesday", "thursday"};

TEST(StringNormalizerTest, RemovesStopwordsThenChangesCase) {
  absl::StatusOr<Tensor> y = Normalize(MakeStrings({4}, kDays), {{"case_change_action", std::string("UPPER")},
                                                                  {"is_case_sensitive", int64_t{1}},
                                                                  {"stopwords", std::vector<std::string>{"monday"}}});
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(y->shape(), std::vector<int64_t>({3}));
  EXPECT_THAT(Strings(*y), ElementsAre("TUESDAY", "WEDNESDAY", "THURSDAY"));
}

TEST(StringNormalizerTest, CaseInsensitiveStopwordsOnTwoDims) {
  absl::StatusOr<Tensor> y =
      Normalize(MakeStrings({1, 6}, {"Monday", "tuesday", "wednesday", "MONDAY", "tuesday", "wednesday"}),
                {{"case_change_action", std::string("LOWER")}, {"stopwords", std::vector<std::string>{"monDay"}}});
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(y->shape(), std::vector<int64_t>({1, 4}));
  EXPECT_THAT(Strings(*y), ElementsAre("tuesday", "wednesday", "tuesday", "wednesday"));
}

TEST(StringNormalizerTest, CaseSensitiveStopwordsKeepOtherCases) {
  absl::StatusOr<Tensor> y = Normalize(MakeStrings({3}, {"Monday", "monday", "x"}),
                                       {{"is_case_sensitive", int64_t{1}},
                                        {"stopwords", std::vector<std::string>{"monday"}}});
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_THAT(Strings(*y), ElementsAre("Monday", "x"));
}

TEST(StringNormalizerTest, EverythingRemovedGivesOneEmptyString) {
  absl::StatusOr<Tensor> y = Normalize(MakeStrings({2}, {"monday", "monday"}),
                                       {{"stopwords", std::vector<std::string>{"monday"}}});
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(y->shape(), std::vector<int64_t>({1}));
  EXPECT_THAT(Strings(*y), ElementsAre(""));
  absl::StatusOr<Tensor> y2 = Normalize(MakeStrings({1, 1}, {"monday"}),
                                        {{"stopwords", std::vector<std::string>{"monday"}}});
  ASSERT_TRUE(y2.ok()) << y2.status();
  EXPECT_EQ(y2->shape(), std::vector<int64_t>({1, 1}));
}

TEST(StringNormalizerTest, NoStopwordsNoChangeIsTheInput) {
  absl::StatusOr<Tensor> y = Normalize(MakeStrings({2}, {"monday", ""}), {});
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_THAT(Strings(*y), ElementsAre("monday", ""));
}

TEST(StringNormalizerTest, ChangesTheCaseOfNonAsciiLetters) {
  absl::StatusOr<Tensor> up = Normalize(MakeStrings({3}, {"straße", "müller", "élan"}),
                                        {{"case_change_action", std::string("UPPER")}});
  ASSERT_TRUE(up.ok()) << up.status();
  // Code point by code point: ß has no one-letter capital and stays.
  EXPECT_THAT(Strings(*up), ElementsAre("STRAßE", "MÜLLER", "ÉLAN"));
  absl::StatusOr<Tensor> low = Normalize(MakeStrings({2}, {"ΑΒΓ", "ÉLAN"}), {{"case_change_action", std::string("LOWER")}});
  ASSERT_TRUE(low.ok()) << low.status();
  EXPECT_THAT(Strings(*low), ElementsAre("αβγ", "élan"));
  // An unknown locale falls back to C.UTF-8 rather than failing.
  absl::StatusOr<Tensor> other = Normalize(MakeStrings({1}, {"Ä"}), {{"case_change_action", std::string("LOWER")},
                                                                      {"locale", std::string("xx_NOWHERE")}});
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_THAT(Strings(*other), ElementsAre("ä"));
}

TEST(StringNormalizerTest, Errors) {
  const Tensor f = MakeTensor<float>(DType::kF32, {2}, {1, 2});
  absl::StatusOr<Tensor> r = Normalize(f, {});
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("expected string"));
  r = Normalize(MakeStrings({2, 2}, {"a", "b", "c", "d"}), {});
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("[C] or [1, C]"));
  r = Normalize(MakeStrings({1}, {"a"}), {{"case_change_action", std::string("TITLE")}});
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("NONE, LOWER or UPPER"));
  r = Normalize(MakeStrings({2}, {"ok", std::string("bad\xff", 4)}), {{"case_change_action", std::string("UPPER")}});
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("element 1 is not valid UTF-8"));
}

}  // namespace
}  // namespace grove
