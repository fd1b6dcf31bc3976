// The pieces of an ExecutionPlan a backend sees: values (where each lives),
// steps (which kernel, prepared how, and whether the step needs the host),
// and PlanGraph, the view a backend's plan pass edits (CUDA's elementwise
// fusion). Part of the backend interface (lib/runtime/backend.h): it depends
// on ir only, so backends may include it.
#ifndef GROVE_LIB_RUNTIME_PLAN_STEP_H_
#define GROVE_LIB_RUNTIME_PLAN_STEP_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "grove/grove.h"
#include "lib/ir/graph.h"
#include "lib/ir/op_registry.h"

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
  // Whose kernel runs: the plan's backend, or the CPU for a fallback step;
  // that backend's kernel of the node and its prepare (nullptr: none).
  ir::Backend backend = ir::Backend::kCpu;
  ir::KernelFn kernel = nullptr;
  ir::PrepareFn prepare = nullptr;
  std::vector<int> inputs;   // value ids; -1 = omitted
  std::vector<int> outputs;  // value ids; -1 = omitted
  bool infer_at_run = false;      // shapes known only when run
  bool kernel_allocates = false;  // If, Loop
  bool host_fallback = false;     // a CPU kernel in a CUDA plan: run with copies
  // Every output is planned with zero elements: there is nothing to write, so
  // the step is not run (no kernel loops over the other dims of an empty
  // tensor, however large they are).
  bool outputs_empty = false;
  // The kernel's prepare ran when the plan was made (ir::PrepareFn); its
  // workspace lies in the arena at workspace_offset. Steps prepared when they
  // run (infer_at_run, fallbacks) have prepared_at_plan false.
  bool prepared_at_plan = false;
  ir::PreparedKernel prepared;
  uint64_t workspace_offset = 0;
  // Non-empty when the step needs the host (a fallback, control flow, shapes
  // or values read back): it ends a straight-line segment; says why.
  std::string host_reason;
  int segment = -1;  // the segment of a step that needs no host, else -1
};

// A straight-line run of steps that need no host: steps [first, end).
struct PlanSegment {
  int first = 0;
  int end = 0;
};

// A plan under construction, as a backend's plan pass edits it: after every
// step's kernel is chosen and before lifetimes and memory are planned.
struct PlanGraph {
  std::vector<PlanValue>& values;
  std::vector<PlanStep>& steps;
  const std::vector<int>& output_values;
  std::function<int(int tensor)> value_of;  // value id of a tensor, or -1
  // Nodes a pass makes (fused chains) live as long as the plan.
  std::vector<std::unique_ptr<ir::Node>>& owned_nodes;
  int fused_steps = 0;
  int fused_ops = 0;
};

}  // namespace grove::runtime

#endif  // GROVE_LIB_RUNTIME_PLAN_STEP_H_
