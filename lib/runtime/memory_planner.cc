#include "lib/runtime/memory_planner.h"

#include <algorithm>
#include <numeric>

namespace grove::runtime {

int MemoryPlanner::AddBuffer(uint64_t bytes, int first_use, int last_use) {
  const uint64_t aligned = (bytes + kArenaAlignment - 1) / kArenaAlignment * kArenaAlignment;
  buffers_.push_back(Buffer{aligned, first_use, std::max(first_use, last_use)});
  return static_cast<int>(buffers_.size()) - 1;
}

MemoryPlan MemoryPlanner::Plan() const {
  const int n = static_cast<int>(buffers_.size());
  MemoryPlan plan;
  plan.offsets.assign(n, 0);
  if (n == 0) return plan;

  // Lower bound: sweep the steps.
  int last_step = 0;
  for (const Buffer& b : buffers_) last_step = std::max(last_step, b.last);
  std::vector<uint64_t> live(last_step + 2, 0);
  for (const Buffer& b : buffers_) {
    live[b.first] += b.bytes;
    live[b.last + 1] -= b.bytes;
  }
  uint64_t cur = 0;
  for (int s = 0; s <= last_step; ++s) {
    cur += live[s];
    if (plan.peak_step < 0 || cur > plan.lower_bound_bytes) {
      plan.lower_bound_bytes = cur;
      plan.peak_step = s;
    }
  }

  // Greedy by size, ties by earlier first use.
  std::vector<int> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    if (buffers_[a].bytes != buffers_[b].bytes) return buffers_[a].bytes > buffers_[b].bytes;
    return buffers_[a].first < buffers_[b].first;
  });
  std::vector<int> placed;
  std::vector<std::pair<uint64_t, uint64_t>> busy;  // [offset, end) of lifetime-overlapping buffers
  for (int id : order) {
    const Buffer& b = buffers_[id];
    busy.clear();
    for (int p : placed) {
      const Buffer& q = buffers_[p];
      if (q.first <= b.last && b.first <= q.last) busy.emplace_back(plan.offsets[p], plan.offsets[p] + q.bytes);
    }
    std::sort(busy.begin(), busy.end());
    uint64_t offset = 0;
    // Best fit among the gaps, else the end: keeps big holes for later.
    uint64_t best = UINT64_MAX, best_gap = UINT64_MAX;
    for (const auto& [start, end] : busy) {
      if (start >= offset && start - offset >= b.bytes && start - offset < best_gap) {
        best = offset;
        best_gap = start - offset;
      }
      offset = std::max(offset, end);
    }
    plan.offsets[id] = best != UINT64_MAX ? best : offset;
    plan.arena_bytes = std::max(plan.arena_bytes, plan.offsets[id] + b.bytes);
    placed.push_back(id);
  }

  for (int i = 0; i < n; ++i) {
    if (buffers_[i].first <= plan.peak_step && plan.peak_step <= buffers_[i].last) plan.peak_buffers.push_back(i);
  }
  std::sort(plan.peak_buffers.begin(), plan.peak_buffers.end(),
            [&](int a, int b) { return buffers_[a].bytes > buffers_[b].bytes; });
  return plan;
}

}  // namespace grove::runtime
