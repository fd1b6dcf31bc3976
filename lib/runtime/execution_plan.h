// An ExecutionPlan is what "reshape" produces for one subgraph and one input
// signature (dtypes and concrete shapes of its inputs and captures): every
// value's shape and storage, the steps with their kernels, and the arena
// layout from the memory planner. Small shape arithmetic (Shape, Gather on
// shapes, Concat of dims...) is folded here, once, instead of run per call.
//
// Values whose shape depends on data (outputs of If/Loop with differing
// branches, ops downstream of them) are "dynamic": inferred and allocated
// when run; everything else lives in the arena.
//
// Each step's kernel is prepared here, once (ir::PrepareFn), its workspace
// planned in the arena; steps that need the host (CPU fallbacks, control
// flow, shapes or values read back) cut the step list into straight-line
// segments, the units a CUDA graph will capture.
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
#include "lib/runtime/plan_step.h"

namespace grove::runtime {

class Backend;

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
  // (captures in the order of Subgraph::captures) on `backend`, preparing
  // its steps; a null backend plans for the CPU without preparing (the
  // model's check at load, benchmarks of planning).
  static absl::StatusOr<std::unique_ptr<ExecutionPlan>> Build(const ir::Graph& graph, int subgraph,
                                                              absl::Span<const ValueSig> inputs,
                                                              absl::Span<const ValueSig> captures,
                                                              Backend* backend);

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
  // The straight-line runs of steps that need no host, in order.
  const std::vector<PlanSegment>& segments() const { return segments_; }

  // Shape buckets: takes the arena layout of `bound`, the plan of the same
  // subgraph at the bucket's bound (a larger shape), so both run in one
  // arena and one graph per segment serves both (plan_layout.cc). Needs the
  // same steps (nodes, segments, prepared workspaces no larger) and the same
  // values (tensor, storage, dtype), each arena value and workspace at most
  // the bound's bytes. Else FAILED_PRECONDITION saying what differs, and the
  // plan is unchanged.
  absl::Status AdoptLayout(const ExecutionPlan& bound);

 private:
  ExecutionPlan() = default;
  int subgraph_ = 0;
  std::vector<PlanValue> values_;
  std::vector<PlanStep> steps_;
  std::vector<int> input_values_, capture_values_, output_values_;
  absl::flat_hash_map<int, int> value_of_tensor_;
  std::vector<std::unique_ptr<Tensor>> folded_;
  void RecomputeLifetimes();
  // Runs each step's prepare (kernels that have one) on its planned shapes.
  absl::Status PrepareSteps(Backend& backend);
  // Why each step needs the host, and the segments between those steps.
  void CutSegments(ir::Backend backend);
  std::vector<std::unique_ptr<ir::Node>> fused_nodes_;
  int num_fused_steps_ = 0, num_fused_ops_ = 0;
  std::vector<PlanSegment> segments_;
  MemoryPlan memory_;
  std::vector<int> arena_value_of_buffer_;
};

}  // namespace grove::runtime

#endif  // GROVE_LIB_RUNTIME_EXECUTION_PLAN_H_
