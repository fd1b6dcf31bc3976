// Control flow inside CUDA graphs: an If whose condition only the device has
// runs as one graph whose conditional node picks the branch on the device
// (Backend::ComposeGraph), and a Loop whose carried shapes hold across trips
// as one graph whose WHILE node runs its trips (RunLoopGraph, in
// loop_graphs.cc), so the run neither waits for
// the device nor reads a condition back (a Loop with scan outputs writes
// each trip's slice at the trip the device counts, and reads back at most
// its trip count before and the trips run after). Each branch's plan is captured as a body graph that
// ends with its outputs copied into the If's outputs (buffers of their own,
// at addresses that hold across runs), so the graphs after the If read the
// same addresses whichever branch ran.
//
// The composed graph belongs to the caller's exact plan (it is not a
// bucket's: a branch's plan is made for these shapes) and to the branches'
// plans and buffers it captured: their addresses and the plans' serials make
// its fingerprint, and a change (a branch's plan dropped from the cache, a
// capture at a new address) captures anew, as a segment's graph does.
#include <algorithm>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "lib/runtime/executor.h"
#include "lib/ir/value_type.h"
#include "lib/runtime/execution_plan.h"
#include "lib/runtime/step_host.h"
#include "lib/runtime/trace.h"

namespace grove::runtime {
absl::StatusOr<bool> Executor::RunControlFlowGraph(PlanInstance& inst, size_t s) {
  const PlanStep& step = inst.plan->steps()[s];
  absl::string_view why;
  if (!conditional_graphs_) {
    if (!graphs_enabled_) {
      why = stats_.graph_fallback_reason;
    } else {
      if (no_conditional_nodes_.empty()) {
        no_conditional_nodes_ =
            absl::StrCat(backend_.Describe(), " has no conditional graph nodes (a CUDA 12.4 or newer driver has them)");
      }
      why = no_conditional_nodes_;
    }
  } else if (step.host_fallback) {
    why = "it runs on the CPU (no CUDA kernel)";
  } else {
    absl::StatusOr<bool> ran = step.node->type == "If" ? RunIfGraph(inst, s) : RunLoopGraph(inst, s);
    if (!ran.ok()) return ran.status();
    if (*ran) {
      ++stats_.control_flow_in_graphs;
      return true;
    }
    why = ControlGraph(inst, s).no_graph;
  }
  ++stats_.control_flow_host_driven;
  if (stats_.control_flow_fallback_reason != why) stats_.control_flow_fallback_reason = std::string(why);
  return false;
}

absl::StatusOr<bool> Executor::RunIfGraph(PlanInstance& inst, size_t s) {
  const ExecutionPlan& p = *inst.plan;
  const PlanStep& step = p.steps()[s];
  SegmentGraph& g = ControlGraph(inst, s);
  if (!g.no_graph.empty()) return false;
  auto host_driven = [&](absl::string_view why) { return HostDriven(g, *step.node, "its condition read back", why); };

  TensorView* const* ptrs = inst.ptrs.data() + inst.step_ptrs[s];
  const size_t num_inputs = step.inputs.size();
  if (num_inputs < 1 || ptrs[0] == nullptr) return host_driven("it has no condition");
  if (inst.host_ptrs[inst.step_ptrs[s]] != nullptr) {
    return host_driven("the host knows its condition (a weight or folded value), so it picks the branch");
  }
  const TensorView& cond = *ptrs[0];
  if (cond.dtype != DType::kBool || cond.num_elements() != 1 || !backend_.IsDevicePointer(cond.data)) {
    return host_driven("its condition is not one bool in device memory");
  }
  // The branches' plans, for the outer values they capture now.
  const int branches[2] = {step.node->attrs.GetSubgraph("then_branch"), step.node->attrs.GetSubgraph("else_branch")};
  PlanInstance* bodies[2] = {nullptr, nullptr};
  std::vector<TensorView> captures[2];
  uint64_t fingerprint = 0xcbf29ce484222325u;
  auto mix = [&fingerprint](uint64_t x) { fingerprint = (fingerprint ^ x) * 0x100000001b3u; };
  mix(reinterpret_cast<uintptr_t>(cond.data));
  absl::Cleanup inactive = [&bodies] {
    for (PlanInstance* b : bodies) {
      if (b != nullptr) --b->active;
    }
  };
  for (int b = 0; b < 2; ++b) {
    if (branches[b] <= 0 || branches[b] >= static_cast<int>(graph_.subgraphs.size())) {
      return host_driven("a branch is missing");
    }
    const ir::Subgraph& sg = graph_.subgraphs[branches[b]];
    for (int t : sg.captures) {
      const int v = p.ValueOf(t);
      if (v < 0) return absl::InternalError(absl::StrCat("capture '", graph_.tensors[t].name, "' is not in scope"));
      captures[b].push_back(inst.views[v]);
      mix(reinterpret_cast<uintptr_t>(inst.views[v].data));
    }
    absl::StatusOr<PlanInstance*> body = GetPlan(branches[b], {}, captures[b]);
    if (!body.ok()) {
      // A branch that cannot run on these values (one the condition rules
      // out for them, as a model's branch per sample rate): the host picks.
      return host_driven(absl::StrCat("branch '", sg.name, "' does not plan: ", body.status().message()));
    }
    bodies[b] = *body;
    ++bodies[b]->active;  // the other branch's GetPlan must not drop it
    mix(reinterpret_cast<uintptr_t>(bodies[b]));
    mix(bodies[b]->serial);
  }
  // The outputs: the shapes both branches' plans give (the If's shape
  // function knows them only when they agree and the plan says so), in
  // buffers of their own whose addresses hold across runs.
  std::vector<TensorView> outs(step.outputs.size());
  for (int b = 0; b < 2; ++b) {
    if (bodies[b]->plan->output_values().size() != outs.size()) {
      return host_driven("a branch gives another number of outputs");
    }
  }
  for (size_t i = 0; i < step.outputs.size(); ++i) {
    const int v = step.outputs[i];
    if (v < 0) continue;
    const PlanValue& pv = p.values()[v];
    const ExecutionPlan& then_plan = *bodies[0]->plan;
    const ExecutionPlan& else_plan = *bodies[1]->plan;
    const PlanValue& t = then_plan.values()[then_plan.output_values()[i]];
    const PlanValue& e = else_plan.values()[else_plan.output_values()[i]];
    if (!t.shape_known || !e.shape_known || t.shape != e.shape || t.dtype != e.dtype || ir::IsBoxed(t.dtype) ||
        t.dtype == DType::kUnknown) {
      return host_driven(absl::StrCat("its branches give output ", i, " different shapes or types, or ones known only ",
                                      "when they run"));
    }
    if ((pv.shape_known && pv.shape != t.shape) || (pv.dtype != DType::kUnknown && !DTypeFits(t.dtype, pv.dtype))) {
      return host_driven(absl::StrCat("output ", i, " of its branches is not the planned one"));
    }
    absl::StatusOr<uint64_t> bytes = ir::CheckedByteSize(t.dtype, t.shape, step.node->Describe());
    if (!bytes.ok()) return bytes.status();
    if (absl::Status st = inst.dynamic[v]->Reserve(*bytes); !st.ok()) return st;
    outs[i] = TensorView(t.dtype, t.shape, static_cast<void*>(inst.dynamic[v]->data()));
    mix(reinterpret_cast<uintptr_t>(outs[i].data));
  }

  // Every body run counts against SessionOptions::max_body_runs, as when
  // the host picks the branch.
  if (++body_runs_ > options_.max_body_runs && options_.max_body_runs > 0) {
    return absl::ResourceExhaustedError(absl::StrCat(
        step.node->Describe(), ": the run has made ", options_.max_body_runs,
        " subgraph runs (If branches, Loop and Scan iterations), the limit of SessionOptions::max_body_runs"));
  }

  bool hit = false;
  SegmentGraph::Variant* slot = ControlVariant(g, fingerprint, &hit);
  if (slot == nullptr) {
    return host_driven(absl::StrCat("its branches or buffers changed more than ", kMaxReplacedGraphs, " times"));
  }
  if (hit) {
    if (absl::Status st = LaunchControlGraph(inst, s, *slot, fingerprint, /*replay=*/true, outs); !st.ok()) return st;
    return true;
  }

  // Capture each branch: its inputs bound, its steps, its outputs copied out.
  std::unique_ptr<BackendGraph> body_graphs[2];
  for (int b = 0; b < 2; ++b) {
    PlanInstance& body = *bodies[b];
    const ExecutionPlan& bp = *body.plan;
    if (std::string why = UncapturableBody(body); !why.empty()) {
      return host_driven(absl::StrCat("branch '", graph_.subgraphs[branches[b]].name, "' ", why));
    }
    graphs_.MakeRoom(options_.max_cached_graphs);
    const int64_t kernels_before = stats_.kernels_run;
    if (absl::Status st = backend_.BeginCapture(); !st.ok()) {
      ++stats_.graph_capture_failures;
      return host_driven(absl::StrCat("a branch's capture could not start: ", st.message()));
    }
    absl::Status run = BindInputs(body, {}, captures[b]);
    for (size_t t = 0; t < bp.steps().size() && run.ok(); ++t) {
      if (!bp.steps()[t].outputs_empty) run = RunStep(body, t);
    }
    for (size_t i = 0; i < outs.size() && run.ok(); ++i) {
      if (step.outputs[i] < 0 || outs[i].byte_size() == 0) continue;
      const TensorView& from = body.views[bp.output_values()[i]];
      run = backend_.CopyAsync(outs[i].data, from.data, outs[i].byte_size());
    }
    absl::StatusOr<std::unique_ptr<BackendGraph>> captured = backend_.EndCapture();
    stats_.kernels_run = kernels_before;  // recorded, not run
    if (!run.ok() || !captured.ok()) {
      ++stats_.graph_capture_failures;
      return host_driven(absl::StrCat("a branch's capture failed: ", (!run.ok() ? run : captured.status()).message()));
    }
    body_graphs[b] = *std::move(captured);
  }
  std::vector<Backend::GraphPiece> pieces(1);
  pieces[0].kind = Backend::PieceKind::kIf;
  pieces[0].flag = cond.data;
  pieces[0].bodies.push_back(std::move(body_graphs[0]));
  pieces[0].bodies.push_back(std::move(body_graphs[1]));
  return ComposeAndLaunch(inst, s, g, *slot, fingerprint, std::move(pieces), outs, "its condition read back");
}

absl::StatusOr<bool> Executor::ComposeAndLaunch(PlanInstance& inst, size_t s, SegmentGraph& g,
                                                SegmentGraph::Variant& slot, uint64_t fingerprint,
                                                std::vector<Backend::GraphPiece> pieces,
                                                absl::Span<const TensorView> outs, absl::string_view reads) {
  const ir::Node& node = *inst.plan->steps()[s].node;
  absl::StatusOr<std::unique_ptr<BackendGraph>> composed = backend_.ComposeGraph(std::move(pieces));
  if (!composed.ok()) {
    ++stats_.graph_capture_failures;
    return HostDriven(g, node, reads,
                      absl::StrCat("its conditional graph could not be made: ", composed.status().message()));
  }
  graphs_.Hold(*std::move(composed), &slot.held);
  ++stats_.graphs_captured;
  graphs_.TrimBytes(options_.max_graph_bytes);
  if (Logs(options_, LogLevel::kDebug)) {
    Log(options_, LogLevel::kDebug, absl::StrCat(node.Describe(), ": one graph with a conditional node"));
  }
  if (absl::Status st = LaunchControlGraph(inst, s, slot, fingerprint, /*replay=*/false, outs); !st.ok()) return st;
  return true;
}

}  // namespace grove::runtime
