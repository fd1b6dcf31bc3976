#include "lib/runtime/memory_planner.h"

#include <algorithm>
#include <functional>
#include <map>
#include <numeric>
#include <queue>
#include <set>
#include <utility>

namespace grove::runtime {
namespace {

// The placed buffers, looked up by lifetime: a max-tree over the buffers in
// order of first use whose leaves hold the last use of a placed buffer (-1
// while it is unplaced). The placed buffers whose lifetime meets [first, last]
// are those among the ones starting at or before `last` whose last use is at
// or after `first`; the tree finds them in O((k + 1) log n) for k of them.
class PlacedByLifetime {
 public:
  explicit PlacedByLifetime(const std::vector<std::pair<int, int>>& lifetimes) : lifetimes_(lifetimes) {
    const int n = static_cast<int>(lifetimes.size());
    by_first_.resize(n);
    std::iota(by_first_.begin(), by_first_.end(), 0);
    std::stable_sort(by_first_.begin(), by_first_.end(),
                     [&](int a, int b) { return lifetimes[a].first < lifetimes[b].first; });
    position_.resize(n);
    firsts_.resize(n);
    for (int i = 0; i < n; ++i) {
      position_[by_first_[i]] = i;
      firsts_[i] = lifetimes[by_first_[i]].first;
    }
    size_ = 1;
    while (size_ < n) size_ *= 2;
    tree_.assign(2 * static_cast<size_t>(size_), -1);
  }

  void Place(int id) {
    size_t i = static_cast<size_t>(size_) + position_[id];
    tree_[i] = lifetimes_[id].second;
    for (i /= 2; i >= 1; i /= 2) tree_[i] = std::max(tree_[2 * i], tree_[2 * i + 1]);
  }

  // Calls f(id) for each placed buffer live at some step of [first, last].
  template <typename F>
  void ForEachOverlapping(int first, int last, F&& f) const {
    const int end = static_cast<int>(std::upper_bound(firsts_.begin(), firsts_.end(), last) - firsts_.begin());
    if (end == 0) return;
    stack_.clear();
    stack_.push_back({1, 0, size_});
    while (!stack_.empty()) {
      const Range r = stack_.back();
      stack_.pop_back();
      if (r.lo >= end || tree_[r.node] < first) continue;
      if (r.hi - r.lo == 1) {
        f(by_first_[r.lo]);
        continue;
      }
      const int mid = (r.lo + r.hi) / 2;
      stack_.push_back({2 * r.node + 1, mid, r.hi});
      stack_.push_back({2 * r.node, r.lo, mid});
    }
  }

 private:
  struct Range {
    size_t node;
    int lo, hi;
  };
  const std::vector<std::pair<int, int>>& lifetimes_;
  std::vector<int> by_first_, position_, firsts_;
  int size_ = 1;
  std::vector<int> tree_;
  mutable std::vector<Range> stack_;
};

}  // namespace

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

  if (!PlanGreedyBySize(&plan)) PlanBySweep(&plan);

  for (int i = 0; i < n; ++i) {
    if (buffers_[i].first <= plan.peak_step && plan.peak_step <= buffers_[i].last) plan.peak_buffers.push_back(i);
  }
  std::sort(plan.peak_buffers.begin(), plan.peak_buffers.end(),
            [&](int a, int b) { return buffers_[a].bytes > buffers_[b].bytes; });
  return plan;
}

bool MemoryPlanner::PlanGreedyBySize(MemoryPlan* plan) const {
  const int n = static_cast<int>(buffers_.size());
  // Greedy by size, ties by earlier first use.
  std::vector<int> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    if (buffers_[a].bytes != buffers_[b].bytes) return buffers_[a].bytes > buffers_[b].bytes;
    return buffers_[a].first < buffers_[b].first;
  });
  std::vector<std::pair<int, int>> lifetimes(n);
  for (int i = 0; i < n; ++i) lifetimes[i] = {buffers_[i].first, buffers_[i].last};
  PlacedByLifetime placed(lifetimes);
  // Each buffer is compared with the placed buffers live with it: cheap for
  // real graphs (a few dozen), quadratic for one where thousands of buffers
  // live at once. Past this much work the sweep planner takes over.
  uint64_t budget = kGreedyWorkBase + kGreedyWorkPerBuffer * static_cast<uint64_t>(n);
  std::vector<std::pair<uint64_t, uint64_t>> busy;  // [offset, end) of lifetime-overlapping buffers
  for (int id : order) {
    const Buffer& b = buffers_[id];
    busy.clear();
    placed.ForEachOverlapping(b.first, b.last, [&](int p) {
      busy.emplace_back(plan->offsets[p], plan->offsets[p] + buffers_[p].bytes);
    });
    const uint64_t work = busy.size() + 1;
    if (work > budget) {
      plan->arena_bytes = 0;
      return false;
    }
    budget -= work;
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
    plan->offsets[id] = best != UINT64_MAX ? best : offset;
    plan->arena_bytes = std::max(plan->arena_bytes, plan->offsets[id] + b.bytes);
    placed.Place(id);
  }
  return true;
}

void MemoryPlanner::PlanBySweep(MemoryPlan* plan) const {
  const int n = static_cast<int>(buffers_.size());
  // Steps in order; at each, the buffers that died before it are freed, then
  // the ones born there are placed (largest first) in the smallest free
  // block that holds them, else at the end of the arena.
  std::vector<int> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    if (buffers_[a].first != buffers_[b].first) return buffers_[a].first < buffers_[b].first;
    return buffers_[a].bytes > buffers_[b].bytes;
  });
  std::map<uint64_t, uint64_t> free_by_offset;       // offset -> size
  std::set<std::pair<uint64_t, uint64_t>> free_by_size;  // (size, offset)
  uint64_t top = 0;
  auto erase_block = [&](std::map<uint64_t, uint64_t>::iterator it) {
    free_by_size.erase({it->second, it->first});
    free_by_offset.erase(it);
  };
  auto release = [&](uint64_t offset, uint64_t size) {
    auto next = free_by_offset.lower_bound(offset);
    if (next != free_by_offset.end() && next->first == offset + size) {
      size += next->second;
      erase_block(next);
    }
    auto prev = free_by_offset.lower_bound(offset);
    if (prev != free_by_offset.begin()) {
      --prev;
      if (prev->first + prev->second == offset) {
        offset = prev->first;
        size += prev->second;
        erase_block(prev);
      }
    }
    if (offset + size == top) {  // the end of the arena shrinks back
      top = offset;
      return;
    }
    free_by_offset[offset] = size;
    free_by_size.insert({size, offset});
  };
  using Death = std::pair<int, int>;  // (last use, buffer)
  std::priority_queue<Death, std::vector<Death>, std::greater<Death>> live;
  for (int id : order) {
    const Buffer& b = buffers_[id];
    while (!live.empty() && live.top().first < b.first) {
      const int dead = live.top().second;
      live.pop();
      release(plan->offsets[dead], buffers_[dead].bytes);
    }
    if (b.bytes == 0) {
      plan->offsets[id] = 0;
      continue;
    }
    auto fit = free_by_size.lower_bound({b.bytes, 0});
    if (fit != free_by_size.end()) {
      const uint64_t offset = fit->second, size = fit->first;
      erase_block(free_by_offset.find(offset));
      plan->offsets[id] = offset;
      if (size > b.bytes) {
        free_by_offset[offset + b.bytes] = size - b.bytes;
        free_by_size.insert({size - b.bytes, offset + b.bytes});
      }
    } else {
      plan->offsets[id] = top;
      top += b.bytes;
    }
    plan->arena_bytes = std::max(plan->arena_bytes, plan->offsets[id] + b.bytes);
    live.push({b.last, id});
  }
}

}  // namespace grove::runtime
