// FusedAttention's CPU kernel against the unfused chain it replaces (run op
// by op through the CPU kernels), at edge shapes, and its refusals.
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lib/backends/cpu/attention.h"
#include "test/attention_test_util.h"
#include "test/op_test_util.h"

namespace grove::testing {
namespace {

using ::testing::HasSubstr;

class CpuAttentionTest : public ::testing::TestWithParam<AttentionCase> {};

// Both the AVX2/FMA blocks (where the CPU has them) and the plain loops.
TEST_P(CpuAttentionTest, MatchesTheUnfusedChain) {
  const AttentionCase& c = GetParam();
  const AttentionInputs in = MakeAttentionInputs(c);
  absl::StatusOr<Tensor> want = UnfusedAttention(c, in);
  ASSERT_TRUE(want.ok()) << want.status();
  for (bool simd : {true, false}) {
    SCOPED_TRACE(simd ? "simd allowed" : "plain loops");
    cpu::SetAttentionSimdAllowed(simd);
    absl::StatusOr<std::vector<Tensor>> got = RunOp("FusedAttention", AttentionOperands(in), AttentionAttrsOf(c));
    cpu::SetAttentionSimdAllowed(true);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(CompareAttention(*want, (*got)[0], 1e-5), "");
  }
}

INSTANTIATE_TEST_SUITE_P(EdgeShapes, CpuAttentionTest, ::testing::ValuesIn(AttentionEdgeCases()),
                         [](const ::testing::TestParamInfo<AttentionCase>& info) { return info.param.name; });

TEST(CpuAttentionTest, AllMaskedRowIsNanAsSoftmaxMakesIt) {
  AttentionCase c{.name = "nan", .q = {1, 1, 2, 4}, .k = {1, 1, 3, 4}, .v = {1, 1, 3, 4}, .mask = 2,
                  .mask_shape = {2, 3}, .mask_all_of_row0 = true};
  const AttentionInputs in = MakeAttentionInputs(c);
  absl::StatusOr<std::vector<Tensor>> got = RunOp("FusedAttention", AttentionOperands(in), AttentionAttrsOf(c));
  ASSERT_TRUE(got.ok()) << got.status();
  const std::vector<float> out = Values<float>((*got)[0]);
  for (int j = 0; j < 4; ++j) EXPECT_TRUE(std::isnan(out[j])) << j;
}

TEST(CpuAttentionTest, Refusals) {
  const Tensor q = AttnData({1, 2, 3, 4}, 1), k = AttnData({1, 2, 5, 4}, 2), v = AttnData({1, 2, 5, 6}, 3);
  const Tensor k_bad = AttnData({1, 2, 5, 3}, 2), q3 = AttnData({2, 3, 4}, 1), v_bad = AttnData({1, 2, 4, 6}, 3);
  const Tensor f_mask = AttnData({3, 5}, 4), wide_mask = AttnData({1, 2, 3, 6}, 4);
  auto error = [](std::vector<const Tensor*> in, std::vector<std::pair<std::string, AttrValue>> attrs = {}) {
    absl::StatusOr<std::vector<Tensor>> r = RunOp("FusedAttention", in, attrs);
    return r.ok() ? std::string("ok") : std::string(r.status().message());
  };
  EXPECT_THAT(error({&q, &k_bad, &v}), HasSubstr("head dim"));
  EXPECT_THAT(error({&q, &k, &v_bad}), HasSubstr("V"));
  EXPECT_THAT(error({&q3, &k, &v}), HasSubstr("rank"));
  EXPECT_THAT(error({&q, &k, &v, &f_mask}), HasSubstr("mask"));
  EXPECT_THAT(error({&q, &k, &v}, {{"mask", int64_t{1}}}), HasSubstr("missing"));
  EXPECT_THAT(error({&q, &k, &v, &f_mask}, {{"mask", int64_t{2}}}), HasSubstr("bool"));
  EXPECT_THAT(error({&q, &k, &v, &wide_mask}, {{"mask", int64_t{1}}}), HasSubstr("broadcast"));
  EXPECT_THAT(error({&q, &k, &v}, {{"scale_op", int64_t{3}}}), HasSubstr("scale_op"));
  EXPECT_THAT(error({&q, &k, &v}, {{"k_transposed", int64_t{2}}}), HasSubstr("k_transposed"));
  EXPECT_THAT(error({&q, &k, &v}, {{"mask", int64_t{-1}}}), HasSubstr("mask"));
  EXPECT_THAT(error({&q, &k, &v}, {{"mask2", int64_t{1}}}), HasSubstr("mask2"));
  EXPECT_THAT(error({&q, &k, &v, &f_mask, &f_mask}, {{"mask", int64_t{1}}}), HasSubstr("input 4"));
  const Tensor qh = Tensor::CastOf(q.view(), DType::kF16).value(), kh = Tensor::CastOf(k.view(), DType::kF16).value(),
               vh = Tensor::CastOf(v.view(), DType::kF16).value();
  EXPECT_THAT(error({&qh, &kh, &vh}), HasSubstr("f32"));
  const Tensor qi = Tensor::CastOf(q.view(), DType::kI32).value();
  EXPECT_THAT(error({&qi, &k, &v}), HasSubstr("dtype"));
}

}  // namespace
}  // namespace grove::testing
