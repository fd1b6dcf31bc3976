// An ExecutionPlan is what "reshape" produces for one subgraph and one input
// signature (dtypes and concrete shapes of its inputs and captures): every
// value's shape and storage, the steps with their kernels, and the arena
// layout from the memory planner. Small shape arithmetic (Shape, Gather on
// shapes, Concat of dims...) is folded here, once, instead of run per call.
//
// Values whose shape depends on data (outputs of If/Loop with differing
// branches, ops downstream of them) are "dynamic": inferred and allocated
// when run; everything else lives in the arena.
#ifndef GROVE_LIB_RUNTIME_EXECUTION_PLAN_H_
#define GROVE_LIB_RUNTIME_EXECUTION_PLAN_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "grove/grove.h"
#include "lib/ir/graph.h"
#include "lib/ir/op_registry.h"
#include "lib/runtime/memory_planner.h"

namespace grove::runtime {

// kFusedAway: an intermediate of a fused elementwise chain (CUDA), computed
// inside the fused kernel and never stored.
// kBoxed: a sequence or optional (lib/ir/value_type.h), a host grove::Value
// the plan instance owns; its view's data points at it.
enum class Storage { kInput, kCapture, kWeight, kFolded, kArena, kDynamic, kFusedAway, kBoxed };

struct PlanValue {
  int tensor = -1;
  Storage kind = Storage::kArena;
  DType dtype = DType::kUnknown;
  std::vector<int64_t> shape;  // -1 dims: known only when run
  bool shape_known = true;
  uint64_t bytes = 0;
  uint64_t offset = 0;  // arena values
  int position = -1;    // input / capture index
  const void* data = nullptr;  // weights and folded values
  int first_use = -1, last_use = -1;
};

struct PlanStep {
  const ir::Node* node = nullptr;
  ir::KernelFn kernel = nullptr;
  std::vector<int> inputs;   // value ids; -1 = omitted
  std::vector<int> outputs;  // value ids; -1 = omitted
  bool infer_at_run = false;      // shapes known only when run
  bool kernel_allocates = false;  // If, Loop
  bool host_fallback = false;     // a CPU kernel in a CUDA plan: run with copies
  // Every output is planned with zero elements: there is nothing to write, so
  // the step is not run (no kernel loops over the other dims of an empty
  // tensor, however large they are).
  bool outputs_empty = false;
};

// A value's signature: what a plan is keyed by.
// A sequence or optional is keyed by the shape its tensors share (-1 dims
// where they differ), or by rank_known = false.
struct ValueSig {
  DType dtype = DType::kUnknown;
  std::vector<int64_t> shape;
  bool rank_known = true;
};

class ExecutionPlan {
 public:
  // Plans `subgraph` of `graph` for these input and capture signatures
  // (captures in the order of Subgraph::captures).
  static absl::StatusOr<std::unique_ptr<ExecutionPlan>> Build(const ir::Graph& graph, int subgraph,
                                                              absl::Span<const ValueSig> inputs,
                                                              absl::Span<const ValueSig> captures,
                                                              ir::Backend backend);

  int subgraph() const { return subgraph_; }
  const std::vector<PlanValue>& values() const { return values_; }
  const std::vector<PlanStep>& steps() const { return steps_; }
  const std::vector<int>& input_values() const { return input_values_; }
  const std::vector<int>& capture_values() const { return capture_values_; }
  const std::vector<int>& output_values() const { return output_values_; }
  // Value id of a tensor of the model in this plan, or -1.
  int ValueOf(int tensor) const;
  uint64_t arena_bytes() const { return memory_.arena_bytes; }
  MemoryReport Report(const ir::Graph& graph) const;
  // Steps that are fused elementwise chains, and the ops they replaced.
  int num_fused_steps() const { return num_fused_steps_; }
  int num_fused_ops() const { return num_fused_ops_; }

 private:
  ExecutionPlan() = default;
  int subgraph_ = 0;
  std::vector<PlanValue> values_;
  std::vector<PlanStep> steps_;
  std::vector<int> input_values_, capture_values_, output_values_;
  absl::flat_hash_map<int, int> value_of_tensor_;
  std::vector<std::unique_ptr<Tensor>> folded_;
  // CUDA: chains of single-use elementwise steps become one fused step.
  void FuseElementwiseChains();
  void RecomputeLifetimes();
  std::vector<std::unique_ptr<ir::Node>> fused_nodes_;
  int num_fused_steps_ = 0, num_fused_ops_ = 0;
  MemoryPlan memory_;
  std::vector<int> arena_value_of_buffer_;
};

}  // namespace grove::runtime

#endif  // GROVE_LIB_RUNTIME_EXECUTION_PLAN_H_
