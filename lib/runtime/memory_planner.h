// Arena offsets from tensor lifetimes (after TFLite's greedy-by-size planner).
//
//   MemoryPlanner p;
//   p.AddBuffer(/*bytes=*/4096, /*first_use=*/0, /*last_use=*/3);
//   p.AddBuffer(1024, 2, 5);
//   MemoryPlan plan = p.Plan();   // plan.offsets[i], plan.arena_bytes
//
// Buffers are placed largest first, each in the best-fitting gap between the
// placed buffers whose lifetimes meet its own (else above them), at 64-byte
// aligned offsets. The placed buffers live with one are found through a tree
// over lifetimes, so a plan costs O(n log n) plus the number of pairs of
// buffers live together; a graph where thousands of buffers live at once
// (where that number grows quadratically) is planned instead by one sweep
// over the steps with a best-fit free list, O(n log n). The lower bound is the
// largest total of (aligned) sizes live at one step: no planner can do better.
#ifndef GROVE_LIB_RUNTIME_MEMORY_PLANNER_H_
#define GROVE_LIB_RUNTIME_MEMORY_PLANNER_H_

#include <cstdint>
#include <vector>

namespace grove::runtime {

inline constexpr uint64_t kArenaAlignment = 64;

struct MemoryPlan {
  std::vector<uint64_t> offsets;  // per buffer, in AddBuffer order
  uint64_t arena_bytes = 0;
  uint64_t lower_bound_bytes = 0;
  int peak_step = -1;             // a step where the lower bound is reached
  std::vector<int> peak_buffers;  // buffers live there, largest first
};

class MemoryPlanner {
 public:
  // Returns the buffer's id. Lifetimes are inclusive step indices.
  int AddBuffer(uint64_t bytes, int first_use, int last_use);
  MemoryPlan Plan() const;

 private:
  // The greedy planner's budget: pairs of buffers live together it may visit.
  static constexpr uint64_t kGreedyWorkBase = uint64_t{1} << 21;
  static constexpr uint64_t kGreedyWorkPerBuffer = 16;

  struct Buffer {
    uint64_t bytes;  // aligned
    int first, last;
  };
  // Largest first into the best gap; false when it ran past its budget.
  bool PlanGreedyBySize(MemoryPlan* plan) const;
  // In order of first use, into a best-fit free list.
  void PlanBySweep(MemoryPlan* plan) const;
  std::vector<Buffer> buffers_;
};

}  // namespace grove::runtime

#endif  // GROVE_LIB_RUNTIME_MEMORY_PLANNER_H_
