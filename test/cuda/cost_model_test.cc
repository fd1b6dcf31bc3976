// The cost model's ranking on hand-worked cases (test/cuda/test_kernel_families.h
// gives the family's cost formula).
#include "jit/cost_model.h"

#include <algorithm>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "test/cuda/test_kernel_families.h"

namespace grove::testing {
namespace {

std::vector<std::string> Names(const std::vector<jit::RankedVariant>& r) {
  std::vector<std::string> out;
  for (const jit::RankedVariant& v : r) out.push_back(v.config.Name());
  return out;
}

// n = 512: estimates (threads, vec) -> passes * 0.1 + threads * 0.001:
//   (64,1) .864  (64,2) .464  (64,4) .264  (128,1) .528  (128,2) .328
//   (128,4) .228  (256,1) .456  (256,2) .356  (256,4) .356
// (256,2) and (256,4) tie, with equal (zero) waste and occupancy: the
// smaller config, (256,2), first.
TEST(CostModelTest, RanksEveryValidVariantCheapestFirst) {
  RowTestFamily family;
  std::vector<jit::RankedVariant> r = jit::RankVariants(family, RowProblem(512, 64), jit::GpuTraits::FromArch(90));
  EXPECT_EQ(Names(r), (std::vector<std::string>{
                          "rowtest__f32__threads128_vec4", "rowtest__f32__threads64_vec4",
                          "rowtest__f32__threads128_vec2", "rowtest__f32__threads256_vec2",
                          "rowtest__f32__threads256_vec4", "rowtest__f32__threads256_vec1",
                          "rowtest__f32__threads64_vec2", "rowtest__f32__threads128_vec1",
                          "rowtest__f32__threads64_vec1"}));
  ASSERT_EQ(r.size(), 9u);
  EXPECT_NEAR(r[0].cost.estimate_us, 0.228, 1e-12);
  EXPECT_NEAR(r[3].cost.estimate_us, 0.356, 1e-12);
  EXPECT_NEAR(r[4].cost.estimate_us, 0.356, 1e-12);
}

// n = 510 (even, not a multiple of 4): vec 4 is not valid.
//   (64,1) 8 passes .864  (64,2) 4 .464  (128,1) 4 .528  (128,2) 2 .328
//   (256,1) 2 .456  (256,2) 1 .356
TEST(CostModelTest, TopKKeepsOnlyValidVariants) {
  RowTestFamily family;
  std::vector<jit::RankedVariant> r = jit::RankVariants(family, RowProblem(510, 3), jit::GpuTraits::FromArch(80), 3);
  EXPECT_EQ(Names(r), (std::vector<std::string>{"rowtest__f32__threads128_vec2", "rowtest__f32__threads256_vec2",
                                                "rowtest__f32__threads256_vec1"}));
  EXPECT_EQ(jit::RankVariants(family, RowProblem(510, 3), jit::GpuTraits::FromArch(80), 0).size(), 6u);
  EXPECT_EQ(jit::RankVariants(family, RowProblem(510, 3), jit::GpuTraits::FromArch(80), 100).size(), 6u);
}

TEST(CostModelTest, FollowsTheProblemsDTypes) {
  RowTestFamily family;
  std::vector<jit::RankedVariant> r =
      jit::RankVariants(family, RowProblem(512, 64, DType::kF16), jit::GpuTraits::FromArch(90), 1);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].config.Name(), "rowtest__f16__threads128_vec4");
  // A dtype the family is not built for has no variant: the generic one runs.
  bool ranked = true;
  jit::RankedVariant best =
      jit::BestVariant(family, RowProblem(512, 64, DType::kI64), jit::GpuTraits::FromArch(90), &ranked);
  EXPECT_FALSE(ranked);
  EXPECT_EQ(best.config.Name(), "rowtest__i64__threads256_vec1");
}

TEST(CostModelTest, NonFiniteEstimatesRankLast) {
  RowTestFamily family;
  family.nan_threads = 128;  // the two best of n = 512 become NaN
  std::vector<jit::RankedVariant> r = jit::RankVariants(family, RowProblem(512, 64), jit::GpuTraits::FromArch(90));
  ASSERT_EQ(r.size(), 9u);
  EXPECT_EQ(r[0].config.Name(), "rowtest__f32__threads64_vec4");
  EXPECT_EQ(r[6].config.Name(), "rowtest__f32__threads128_vec1");  // NaNs last, in space order
  EXPECT_EQ(r[7].config.Name(), "rowtest__f32__threads128_vec2");
  EXPECT_EQ(r[8].config.Name(), "rowtest__f32__threads128_vec4");
}

TEST(CostModelTest, NoValidVariantGivesTheGenericOne) {
  RowTestFamily family;
  // n = 7: every vec divides it only for vec 1, so the pick is ranked...
  bool ranked = false;
  EXPECT_EQ(jit::BestVariant(family, RowProblem(7, 1), jit::GpuTraits::FromArch(90), &ranked).config.Name(),
            "rowtest__f32__threads64_vec1");
  EXPECT_TRUE(ranked);
  // ...but a family whose space lost every thread count has none.
  RowTestFamily empty(std::vector<int>{});
  EXPECT_TRUE(jit::RankVariants(empty, RowProblem(7, 1), jit::GpuTraits::FromArch(90)).empty());
  jit::RankedVariant best = jit::BestVariant(empty, RowProblem(7, 1), jit::GpuTraits::FromArch(90), &ranked);
  EXPECT_FALSE(ranked);
  EXPECT_EQ(best.config.Name(), "rowtest__f32__threads256_vec1");
}


// A family whose every variant has the same estimate (1 us), listed in an
// order unlike any tie-break: "occ" (occupancy 0.5 + occ / 4: the larger
// the better, against the smaller-config rule), "pad" (waste pad / 10) and
// "unroll" (no term) take values in shuffled and descending order.
class TieFamily : public jit::KernelFamily {
 public:
  absl::string_view name() const override { return "tietest"; }
  std::vector<std::vector<DType>> dtype_lists() const override { return {{DType::kF32}}; }
  std::vector<jit::ParamSpace> space() const override {
    return {{"occ", {2, 0, 1}}, {"pad", {2, 1, 0}}, {"unroll", {4, 1, 2}}};
  }
  bool Valid(const jit::KernelConfig& c, const jit::KernelProblem& p) const override { return InSpace(c); }
  jit::KernelConfig Generic(const jit::KernelProblem& p) const override {
    return jit::KernelConfig{"tietest", p.dtypes, {{"occ", 0}, {"pad", 0}, {"unroll", 1}}};
  }
  jit::CostTerms Cost(const jit::KernelConfig& c, const jit::KernelProblem&, const jit::GpuTraits&) const override {
    jit::CostTerms t;
    t.waste = c.Get("pad", 0) / 10.0;
    t.occupancy = 0.5 + c.Get("occ", 0) / 4.0;
    t.estimate_us = 1.0;
    return t;
  }
  jit::LaunchShape Launch(const jit::KernelConfig&, const jit::KernelProblem&) const override { return {1, 64}; }
};

jit::KernelConfig Tie(int occ, int pad, int unroll) {
  return jit::KernelConfig{"tietest", {DType::kF32}, {{"occ", occ}, {"pad", pad}, {"unroll", unroll}}};
}

// Ties: less waste first; at equal waste, higher occupancy; at equal terms,
// the smaller config (parameters in name order), whatever the listing order.
TEST(CostModelTest, TiesBreakByWasteThenOccupancyThenTheSmallerConfig) {
  TieFamily family;
  const jit::KernelProblem p{"tietest", {DType::kF32}, {}};
  std::vector<jit::RankedVariant> r = jit::RankVariants(family, p, jit::GpuTraits::FromArch(90));
  ASSERT_EQ(r.size(), 27u);
  // pad 0 (no waste) and occ 2 (occupancy 1): unroll 1, 2, 4.
  EXPECT_EQ(r[0].config, Tie(2, 0, 1));
  EXPECT_EQ(r[1].config, Tie(2, 0, 2));
  EXPECT_EQ(r[2].config, Tie(2, 0, 4));
  // Then pad 0 at lower occupancy (occ 1, then 0), before any waste,
  // though occ 0 is the smaller config.
  EXPECT_EQ(r[3].config, Tie(1, 0, 1));
  EXPECT_EQ(r[6].config, Tie(0, 0, 1));
  EXPECT_EQ(r[9].config, Tie(2, 1, 1));
  EXPECT_EQ(r[26].config, Tie(0, 2, 4));
  // The top-k of a tie is the ranking's head.
  std::vector<jit::RankedVariant> top = jit::RankVariants(family, p, jit::GpuTraits::FromArch(90), 2);
  ASSERT_EQ(top.size(), 2u);
  EXPECT_EQ(top[1].config, Tie(2, 0, 2));
}

}  // namespace
}  // namespace grove::testing
