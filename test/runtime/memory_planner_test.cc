#include "lib/runtime/memory_planner.h"

#include <random>

#include "gtest/gtest.h"

namespace grove::runtime {
namespace {

struct Buf {
  uint64_t bytes;
  int first, last;
};

// No two buffers whose lifetimes meet may share bytes.
void ExpectNoOverlap(const std::vector<Buf>& bufs, const MemoryPlan& plan) {
  for (size_t i = 0; i < bufs.size(); ++i) {
    EXPECT_EQ(plan.offsets[i] % kArenaAlignment, 0u);
    EXPECT_LE(plan.offsets[i] + bufs[i].bytes, plan.arena_bytes);
    for (size_t j = i + 1; j < bufs.size(); ++j) {
      const bool live_together = bufs[i].first <= bufs[j].last && bufs[j].first <= bufs[i].last;
      const bool share = plan.offsets[i] < plan.offsets[j] + bufs[j].bytes &&
                         plan.offsets[j] < plan.offsets[i] + bufs[i].bytes;
      if (bufs[i].bytes > 0 && bufs[j].bytes > 0) {
        EXPECT_FALSE(live_together && share) << "buffers " << i << " and " << j;
      }
    }
  }
}

MemoryPlan PlanAll(const std::vector<Buf>& bufs) {
  MemoryPlanner p;
  for (const Buf& b : bufs) p.AddBuffer(b.bytes, b.first, b.last);
  return p.Plan();
}

TEST(MemoryPlannerTest, EmptyPlanIsEmpty) {
  MemoryPlan plan = MemoryPlanner().Plan();
  EXPECT_EQ(plan.arena_bytes, 0u);
  EXPECT_EQ(plan.lower_bound_bytes, 0u);
}

TEST(MemoryPlannerTest, ChainReusesMemory) {
  // a -> b -> c -> d: only neighbours are live together.
  std::vector<Buf> bufs = {{1024, 0, 1}, {1024, 1, 2}, {1024, 2, 3}, {1024, 3, 4}};
  MemoryPlan plan = PlanAll(bufs);
  ExpectNoOverlap(bufs, plan);
  EXPECT_EQ(plan.arena_bytes, 2048u);
  EXPECT_EQ(plan.lower_bound_bytes, 2048u);
}

TEST(MemoryPlannerTest, SizesAreAlignedTo64) {
  std::vector<Buf> bufs = {{1, 0, 0}, {65, 0, 0}};
  MemoryPlan plan = PlanAll(bufs);
  EXPECT_EQ(plan.lower_bound_bytes, 64u + 128u);
  EXPECT_EQ(plan.arena_bytes, 192u);
}

TEST(MemoryPlannerTest, PeakBuffersAreLargestFirst) {
  std::vector<Buf> bufs = {{64, 0, 2}, {4096, 1, 2}, {128, 2, 3}, {8192, 5, 6}};
  MemoryPlan plan = PlanAll(bufs);
  EXPECT_EQ(plan.lower_bound_bytes, 8192u);
  EXPECT_EQ(plan.peak_step, 5);
  ASSERT_EQ(plan.peak_buffers.size(), 1u);
  EXPECT_EQ(plan.peak_buffers[0], 3);
}

TEST(MemoryPlannerTest, RandomLifetimesNeverOverlapAndStayNearTheBound) {
  std::mt19937 rng(7);
  double worst = 1.0;
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<Buf> bufs;
    const int n = 1 + static_cast<int>(rng() % 40);
    for (int i = 0; i < n; ++i) {
      const int first = static_cast<int>(rng() % 30);
      bufs.push_back({64ull * (1 + rng() % 64), first, first + static_cast<int>(rng() % 5)});
    }
    MemoryPlan plan = PlanAll(bufs);
    ExpectNoOverlap(bufs, plan);
    ASSERT_GE(plan.arena_bytes, plan.lower_bound_bytes);
    worst = std::max(worst, double(plan.arena_bytes) / double(plan.lower_bound_bytes));
  }
  // Random interval graphs are harder than real models; this bounds regressions.
  EXPECT_LT(worst, 1.6);
}

}  // namespace
}  // namespace grove::runtime
