#include "lib/runtime/memory_planner.h"

#include <algorithm>
#include <iterator>
#include <map>
#include <random>
#include <vector>

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

// The same check in O(n log n), for plans too big for the pairwise one: a
// sweep over the steps keeps the live buffers ordered by offset, which must
// stay disjoint, so a buffer that overlaps any live one overlaps a neighbour.
::testing::AssertionResult NoOverlapBySweep(const std::vector<Buf>& bufs, const MemoryPlan& plan) {
  std::vector<int> order(bufs.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
  std::sort(order.begin(), order.end(), [&](int a, int b) { return bufs[a].first < bufs[b].first; });
  std::map<uint64_t, int> live;  // offset -> buffer, for nonempty live buffers
  std::multimap<int, int> deaths;  // last use -> buffer
  for (int id : order) {
    while (!deaths.empty() && deaths.begin()->first < bufs[id].first) {
      live.erase(plan.offsets[deaths.begin()->second]);
      deaths.erase(deaths.begin());
    }
    const uint64_t lo = plan.offsets[id], hi = lo + bufs[id].bytes;
    if (lo % kArenaAlignment != 0 || hi > plan.arena_bytes) {
      return ::testing::AssertionFailure() << "buffer " << id << " is misplaced at " << lo;
    }
    if (bufs[id].bytes == 0) continue;
    auto next = live.lower_bound(lo);
    if (next != live.end() && next->first < hi) {
      return ::testing::AssertionFailure() << "buffers " << id << " and " << next->second << " share bytes";
    }
    if (next != live.begin()) {
      auto prev = std::prev(next);
      if (plan.offsets[prev->second] + bufs[prev->second].bytes > lo) {
        return ::testing::AssertionFailure() << "buffers " << id << " and " << prev->second << " share bytes";
      }
    }
    live[lo] = id;
    deaths.emplace(bufs[id].last, id);
  }
  return ::testing::AssertionSuccess();
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

// A model of a million ops in a chain plans in about a second (the planner
// once compared each buffer with every placed one: hours). Each buffer is
// compared only with the few that live with it, and the plan stays as tight.
TEST(MemoryPlannerTest, MillionBufferChainPlansNearTheBound) {
  std::vector<Buf> bufs;
  const int n = 1000000;
  bufs.reserve(n);
  for (int i = 0; i < n; ++i) bufs.push_back({64ull * (1 + static_cast<uint64_t>(i) * 7919 % 13), i, i + 1});
  MemoryPlan plan = PlanAll(bufs);
  EXPECT_TRUE(NoOverlapBySweep(bufs, plan));
  EXPECT_LE(double(plan.arena_bytes), 1.05 * double(plan.lower_bound_bytes))
      << plan.arena_bytes << " vs " << plan.lower_bound_bytes;
  // Equal sizes: exactly two buffers' worth, as a chain of four has.
  bufs.resize(n / 10);
  for (Buf& b : bufs) b.bytes = 1024;
  plan = PlanAll(bufs);
  EXPECT_TRUE(NoOverlapBySweep(bufs, plan));
  EXPECT_EQ(plan.arena_bytes, 2048u);
  EXPECT_EQ(plan.lower_bound_bytes, 2048u);
}

// Thousands of buffers live at once (a fan-out to one wide Concat) would make
// the greedy planner compare every pair; past its budget the sweep planner
// places them, still without overlap and near the bound.
TEST(MemoryPlannerTest, ManyBuffersLiveAtOnceArePlannedBySweep) {
  std::mt19937 rng(11);
  std::vector<Buf> bufs;
  const int wide = 8000;
  for (int i = 0; i < wide; ++i) bufs.push_back({64ull * (1 + rng() % 8), i, wide});  // all read by step `wide`
  for (int i = 0; i < 1000; ++i) bufs.push_back({64ull * (1 + rng() % 64), wide + i, wide + i + 1});
  MemoryPlan plan = PlanAll(bufs);
  EXPECT_TRUE(NoOverlapBySweep(bufs, plan));
  EXPECT_LE(double(plan.arena_bytes), 1.05 * double(plan.lower_bound_bytes))
      << plan.arena_bytes << " vs " << plan.lower_bound_bytes;

  // Random lifetimes in a wide graph: never overlapping, and within the
  // random test's bound above.
  for (int trial = 0; trial < 2; ++trial) {
    bufs.clear();
    for (int i = 0; i < 8000; ++i) {
      const int first = static_cast<int>(rng() % 1000);
      bufs.push_back({64ull * (1 + rng() % 64), first, first + static_cast<int>(rng() % 800)});
    }
    plan = PlanAll(bufs);
    EXPECT_TRUE(NoOverlapBySweep(bufs, plan));
    ASSERT_GE(plan.arena_bytes, plan.lower_bound_bytes);
    EXPECT_LT(double(plan.arena_bytes), 1.6 * double(plan.lower_bound_bytes))
        << plan.arena_bytes << " vs " << plan.lower_bound_bytes;
  }
}

}  // namespace
}  // namespace grove::runtime
