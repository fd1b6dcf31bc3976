// FusedAttention's CPU kernel against the unfused chain it replaces (run op
// by op through the CPU kernels), at edge shapes, and its refusals.
#include <cmath>
#include <limits>
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

// The AVX2/FMA blocks with the AVX-512 softmax and with the AVX2 one
// (where the CPU has them), and the plain loops.
TEST_P(CpuAttentionTest, MatchesTheUnfusedChain) {
  const AttentionCase& c = GetParam();
  const AttentionInputs in = MakeAttentionInputs(c);
  absl::StatusOr<Tensor> want = UnfusedAttention(c, in);
  ASSERT_TRUE(want.ok()) << want.status();
  for (int mode : {0, 1, 2}) {
    SCOPED_TRACE(mode == 0 ? "simd allowed" : mode == 1 ? "no avx-512" : "plain loops");
    cpu::SetAttentionSimdAllowed(mode != 2);
    cpu::SetAttentionAvx512Allowed(mode == 0);
    absl::StatusOr<std::vector<Tensor>> got = RunOp("FusedAttention", AttentionOperands(in), AttentionAttrsOf(c));
    cpu::SetAttentionSimdAllowed(true);
    cpu::SetAttentionAvx512Allowed(true);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(CompareAttention(*want, (*got)[0], 1e-5), "");
  }
}

INSTANTIATE_TEST_SUITE_P(EdgeShapes, CpuAttentionTest, ::testing::ValuesIn(AttentionEdgeCases()),
                         [](const ::testing::TestParamInfo<AttentionCase>& info) { return info.param.name; });

// The AVX2 blocks' cases beyond the edge cases: causal Where masks filling
// -inf (a block's keys past the last one its rows keep are skipped), with
// key counts no multiple of 16 and heads of 12 dims (the GPT block's); a
// -inf Where mask broadcast over the keys (key stride 0, whole rows masked
// at random: NaN rows, maybe a whole block of them); a finite fill (no
// skipping); an added mask and a Where whose keys are contiguous (their
// vector loops) over more than 8 keys.
std::vector<AttentionCase> SimdCases() {
  const double ninf = -std::numeric_limits<double>::infinity();
  std::vector<AttentionCase> cs;
  cs.push_back({.name = "causal_gpt_heads", .q = {2, 4, 37, 12}, .k = {2, 4, 37, 12}, .v = {2, 4, 37, 12},
                .scale_op = 2, .scale = std::sqrt(12.0), .mask = 2, .mask_shape = {37, 37}, .mask_fill = ninf,
                .causal = true});
  cs.push_back({.name = "causal_fill_if_false_q_shorter", .q = {1, 2, 21, 8}, .k = {1, 2, 50, 8},
                .v = {1, 2, 50, 20}, .mask = 2, .mask_shape = {1, 1, 21, 50}, .fill_if_true = false,
                .mask_fill = ninf, .causal = true});
  cs.push_back({.name = "rows_masked_keys_broadcast", .q = {1, 3, 29, 8}, .k = {1, 3, 20, 8}, .v = {1, 3, 20, 8},
                .mask = 2, .mask_shape = {29, 1}, .mask_fill = ninf});
  cs.push_back({.name = "causal_finite_fill", .q = {1, 2, 19, 8}, .k = {1, 2, 19, 8}, .v = {1, 2, 19, 8},
                .mask = 2, .mask_shape = {19, 19}, .mask_fill = -1e4, .causal = true});
  cs.push_back({.name = "encoder_heads_dv8", .q = {1, 4, 45, 8}, .k = {1, 4, 45, 8}, .v = {1, 4, 45, 8},
                .scale_op = 1, .scale = 0.3535});
  cs.push_back({.name = "dv5_odd_keys", .q = {2, 1, 7, 6}, .k = {2, 1, 33, 6}, .v = {2, 1, 33, 5}, .mask = 1,
                .mask_shape = {7, 33}});
  cs.push_back({.name = "additive_wide", .q = {2, 1, 9, 16}, .k = {2, 1, 41, 16}, .v = {2, 1, 41, 16}, .mask = 1,
                .mask_shape = {2, 1, 9, 41}});
  // Key counts at the AVX-512 scores' panel pairs: one whole panel, two.
  cs.push_back({.name = "keys16", .q = {1, 2, 11, 8}, .k = {1, 2, 16, 8}, .v = {1, 2, 16, 8}});
  cs.push_back({.name = "keys32_causal", .q = {1, 2, 32, 4}, .k = {1, 2, 32, 4}, .v = {1, 2, 32, 4}, .mask = 2,
                .mask_shape = {32, 32}, .mask_fill = ninf, .causal = true});
  // Value widths at the AVX-512 output block's panel pairs: one panel and a
  // part, two, two and a part, three, four (BERT's and GPT's heads of 32
  // and 64), with query rows that leave the last block part-full.
  for (int64_t dv : {20, 32, 33, 48, 64}) {
    cs.push_back({.name = "dv" + std::to_string(dv), .q = {1, 3, 13, 24}, .k = {1, 3, 70, 24},
                  .v = {1, 3, 70, dv}, .scale_op = 2, .scale = std::sqrt(24.0), .mask = 1,
                  .mask_shape = {13, 70}});
  }
  cs.push_back({.name = "dv64_causal", .q = {1, 2, 37, 64}, .k = {1, 2, 37, 64}, .v = {1, 2, 37, 64}, .mask = 2,
                .mask_shape = {37, 37}, .mask_fill = ninf, .causal = true});
  return cs;
}

INSTANTIATE_TEST_SUITE_P(SimdShapes, CpuAttentionTest, ::testing::ValuesIn(SimdCases()),
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
  EXPECT_THAT(error({&q, &k, &v}, {{"kv_group", int64_t{0}}}), HasSubstr("kv_group"));
  // Q's 2 heads against K's and V's 2 key-value heads of 2 query heads each.
  EXPECT_THAT(error({&q, &k, &v}, {{"kv_group", int64_t{2}}}), HasSubstr("do not broadcast"));
  const Tensor q3h = AttnData({1, 3, 3, 4}, 1), k1 = AttnData({1, 1, 5, 4}, 2), v1 = AttnData({1, 1, 5, 6}, 3);
  EXPECT_THAT(error({&q3h, &k1, &v1}, {{"kv_group", int64_t{2}}}), HasSubstr("do not broadcast"));
  EXPECT_EQ(error({&q3h, &k1, &v1}, {{"kv_group", int64_t{3}}}), "ok");
  EXPECT_THAT(error({&q3h, &k1, &v1}, {{"kv_group", int64_t{1} << 32}}), HasSubstr("kv_group"));
  EXPECT_THAT(error({&q, &k, &v, &f_mask, &f_mask}, {{"mask", int64_t{1}}}), HasSubstr("input 4"));
  const Tensor qh = Tensor::CastOf(q.view(), DType::kF16).value(), kh = Tensor::CastOf(k.view(), DType::kF16).value(),
               vh = Tensor::CastOf(v.view(), DType::kF16).value();
  EXPECT_THAT(error({&qh, &kh, &vh}), HasSubstr("f32"));
  const Tensor qi = Tensor::CastOf(q.view(), DType::kI32).value();
  EXPECT_THAT(error({&qi, &k, &v}), HasSubstr("dtype"));
}

}  // namespace
}  // namespace grove::testing
