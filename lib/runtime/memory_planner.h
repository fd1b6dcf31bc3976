// Arena offsets from tensor lifetimes (after TFLite's greedy-by-size planner).
//
//   MemoryPlanner p;
//   p.AddBuffer(/*bytes=*/4096, /*first_use=*/0, /*last_use=*/3);
//   p.AddBuffer(1024, 2, 5);
//   MemoryPlan plan = p.Plan();   // plan.offsets[i], plan.arena_bytes
//
// Buffers are placed largest first at the lowest 64-byte aligned offset that
// overlaps no placed buffer whose lifetime intersects. The lower bound is the
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
  struct Buffer {
    uint64_t bytes;  // aligned
    int first, last;
  };
  std::vector<Buffer> buffers_;
};

}  // namespace grove::runtime

#endif  // GROVE_LIB_RUNTIME_MEMORY_PLANNER_H_
