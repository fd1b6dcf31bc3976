// ExecutionPlan::AdoptLayout: an exact shape's plan laid out in its shape
// bucket's arena (see SessionOptions::shape_buckets).
//
// Both plans come from one subgraph by the same passes, so when their steps
// and values match one for one, the bound plan's memory plan is valid for the
// exact one: each value is live over the same steps, and a value no larger
// than the bound's fits in the bound's slot.
#include "absl/strings/str_cat.h"
#include "lib/runtime/execution_plan.h"

namespace grove::runtime {
namespace {

bool SameNode(const ir::Node& a, const ir::Node& b) {
  if (&a == &b) return true;
  // Nodes a plan pass made (fused chains) are the plan's own.
  return a.type == b.type && a.inputs == b.inputs && a.outputs == b.outputs;
}

const char* StorageName(Storage s) {
  switch (s) {
    case Storage::kInput: return "input";
    case Storage::kCapture: return "capture";
    case Storage::kWeight: return "weight";
    case Storage::kFolded: return "folded";
    case Storage::kArena: return "arena";
    case Storage::kDynamic: return "dynamic";
    case Storage::kFusedAway: return "fused";
    case Storage::kBoxed: return "boxed";
  }
  return "?";
}

}  // namespace

absl::Status ExecutionPlan::AdoptLayout(const ExecutionPlan& bound) {
  auto differs = [](auto&&... what) {
    return absl::FailedPreconditionError(absl::StrCat("its plan differs from the bucket bound's: ", what...));
  };
  if (bound.subgraph_ != subgraph_) return differs("another subgraph");
  if (bound.steps_.size() != steps_.size()) {
    return differs(steps_.size(), " steps where the bound's plan has ", bound.steps_.size());
  }
  if (bound.values_.size() != values_.size()) {
    return differs(values_.size(), " values where the bound's plan has ", bound.values_.size());
  }
  for (size_t v = 0; v < values_.size(); ++v) {
    const PlanValue& a = values_[v];
    const PlanValue& b = bound.values_[v];
    if (a.tensor != b.tensor || a.kind != b.kind || a.dtype != b.dtype) {
      return differs("value ", v, " is ", StorageName(a.kind), " ", DTypeName(a.dtype), " where the bound's is ",
                     StorageName(b.kind), " ", DTypeName(b.dtype));
    }
    if (a.kind == Storage::kArena && a.bytes > b.bytes) {
      return differs("value ", v, " takes ", a.bytes, " bytes, more than the bound's ", b.bytes);
    }
  }
  for (size_t s = 0; s < steps_.size(); ++s) {
    const PlanStep& a = steps_[s];
    const PlanStep& b = bound.steps_[s];
    if (!SameNode(*a.node, *b.node) || a.inputs != b.inputs || a.outputs != b.outputs) {
      return differs("step ", s, " is ", a.node->Describe(), " where the bound's is ", b.node->Describe());
    }
    if (a.segment != b.segment || a.host_fallback != b.host_fallback || a.outputs_empty != b.outputs_empty ||
        a.infer_at_run != b.infer_at_run || a.prepared_at_plan != b.prepared_at_plan) {
      return differs("step ", s, " (", a.node->Describe(), ") runs differently (segment, fallback, empty outputs ",
                     "or shapes known only when run)");
    }
    if (a.prepared_at_plan && a.prepared.workspace_bytes > b.prepared.workspace_bytes) {
      return differs("step ", s, " (", a.node->Describe(), ") needs ", a.prepared.workspace_bytes,
                     " bytes of workspace, more than the bound's ", b.prepared.workspace_bytes);
    }
  }
  // Everything checked: now the layout changes, all at once.
  for (size_t v = 0; v < values_.size(); ++v) {
    if (values_[v].kind == Storage::kArena) values_[v].offset = bound.values_[v].offset;
  }
  for (size_t s = 0; s < steps_.size(); ++s) steps_[s].workspace_offset = bound.steps_[s].workspace_offset;
  memory_.arena_bytes = bound.memory_.arena_bytes;
  return absl::OkStatus();
}

}  // namespace grove::runtime
