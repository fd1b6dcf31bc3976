// The plan cache: one PlanInstance (an ExecutionPlan with its arena and
// bound views) per subgraph and input signature, with least-recently-used
// eviction that never drops a plan in use.
#ifndef GROVE_LIB_RUNTIME_PLAN_CACHE_H_
#define GROVE_LIB_RUNTIME_PLAN_CACHE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/types/span.h"
#include "grove/grove.h"
#include "lib/runtime/backend.h"
#include "lib/runtime/buffer.h"
#include "lib/runtime/execution_plan.h"
#include "lib/runtime/graph_cache.h"

namespace grove::runtime {

// A plan made ready to run on one backend.
struct BucketFamily;

struct PlanInstance {
  explicit PlanInstance(Backend* backend) : arena(backend), folded(backend) {}
  std::unique_ptr<ExecutionPlan> plan;
  uint64_t serial = 0;              // unique in its session
  Buffer arena;                     // values, then workspaces, at planned offsets
  // Where the arena values and workspaces are: `arena`, or the arena of the
  // bucket the plan belongs to (`family`; the plan then has its layout).
  uint8_t* arena_base = nullptr;
  BucketFamily* family = nullptr;
  Buffer folded;                    // backends with their own memory: folded values, uploaded
  std::vector<TensorView> views;    // one per plan value (backend memory)
  std::vector<TensorView*> ptrs;    // per step: its inputs, then its outputs
  std::vector<size_t> step_ptrs;    // start of each step's pointers in `ptrs`
  std::vector<std::unique_ptr<Buffer>> dynamic;  // per value, dynamic ones only
  std::vector<std::unique_ptr<Value>> boxed;     // per value, sequences and optionals only
  // Backends with their own memory, per value: host views of weights and
  // folded values; staging for host inputs; host copies for steps that fall
  // back to the CPU and for outputs.
  std::vector<TensorView> host_views;
  std::vector<const TensorView*> host_ptrs;  // per step input, parallel to `ptrs`
  std::vector<std::unique_ptr<Buffer>> staging;
  std::vector<std::unique_ptr<Buffer>> host_copies;
  std::vector<TensorView> copy_views;  // views of host_copies
  // Per segment of the plan (CUDA graphs): its graph, made on its first run
  // (the bucket's, when the plan has a family).
  std::vector<SegmentGraph> graphs;
  // Per step, for If and Loop steps run as conditional graphs
  // (Executor::RunIfGraph, RunLoopGraph).
  std::vector<std::unique_ptr<SegmentGraph>> control_graphs;
  // A Loop run as a WHILE node: its trip counter, flag and the body's
  // constant-true condition (`scalars`: 8, 1 and 1 bytes), its carried
  // values and their staging copies, at addresses that hold across runs.
  struct LoopState {
    explicit LoopState(Backend* backend) : scalars(backend) {}
    Buffer scalars;
    std::vector<std::unique_ptr<Buffer>> carried, staged;
  };
  std::vector<std::unique_ptr<LoopState>> loop_states;  // per step
  uint64_t last_used = 0;
  uint64_t last_run = 0;  // the top-level run that used it last
  int active = 0;         // executions in progress (a Loop body's caller)
};

// Shape buckets (SessionOptions::shape_buckets): what the exact plans of one
// bucket of a subgraph share. The plan at the bucket's bound lends
// its arena layout (ExecutionPlan::AdoptLayout) and arena; each input and
// capture is copied into a slot of the bound's size; each segment has one SegmentGraph,
// captured from the bound's plan and refreshed for the exact plan that runs.
struct BucketFamily {
  std::vector<int64_t> key;             // the bound's PlanCache::Key
  std::unique_ptr<PlanInstance> bound;  // null: the bound does not plan (why_not)
  std::string why_not;
  // Per input, then per capture: its slot, and its bytes at the bound. The
  // main graph's slots are the session's (Executor::MainInputSlot: one per
  // input, shared by every bucket, at an address that never moves, lent by
  // Session::InputBuffer); a body's are its own (`own_slots`).
  std::vector<uint8_t*> slots;
  std::vector<std::unique_ptr<Buffer>> own_slots;
  std::vector<uint64_t> input_bytes;
  // Room for every slot's bytes: a source that lies in another slot (a
  // Loop body's output fed back as another input) goes through it first.
  std::unique_ptr<Buffer> staging;
  std::vector<SegmentGraph> graphs;                  // per segment; never resized
};

class PlanCache {
 public:
  // The key of a subgraph's input and capture signature: dtypes and dims (a
  // sequence or optional by the shape its tensors share).
  static void Key(int subgraph, absl::Span<const TensorView> inputs, absl::Span<const TensorView> captures,
                  std::vector<int64_t>* key);

  // The instance for `key`, marked used by run `run`, or nullptr.
  PlanInstance* Find(const std::vector<int64_t>& key, uint64_t run);
  // Adds an instance; past `max_plans` (0: no limit) evicts one other that
  // is not active: the least recently used of an earlier run, else the most
  // recently used one (so a loop whose carried shapes cycle past the limit
  // loses one plan per run, not all of them). Returns whether it evicted.
  bool Insert(const std::vector<int64_t>& key, std::unique_ptr<PlanInstance> instance, uint64_t run,
              int max_plans);
  void Clear() {
    plans_.clear();
    families_.clear();
  }

  // Shape buckets, by the bound's key: kept as long as the session (a few per
  // symbol: bounds grow geometrically or by steps).
  BucketFamily* FindFamily(const std::vector<int64_t>& key);
  BucketFamily& AddFamily(std::unique_ptr<BucketFamily> family);

 private:
  // Declared before the plans, which point at them: destroyed after.
  absl::flat_hash_map<std::vector<int64_t>, std::unique_ptr<BucketFamily>> families_;
  absl::flat_hash_map<std::vector<int64_t>, std::unique_ptr<PlanInstance>> plans_;
  uint64_t tick_ = 0;
};

}  // namespace grove::runtime

#endif  // GROVE_LIB_RUNTIME_PLAN_CACHE_H_
