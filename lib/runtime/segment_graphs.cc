// The executor's CUDA graphs: a segment captured once per buffer layout
// (up to SegmentGraph::kVariants of them), replayed, refreshed when its
// buffers moved or its bucket's shapes changed; and the bookkeeping of the
// If and Loop steps' conditional graphs (control_graphs.cc): their graphs,
// the host-driven verdict, the variants and the launches.
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "lib/runtime/execution_plan.h"
#include "lib/runtime/executor.h"

namespace grove::runtime {
namespace {

// Whether the segment met this set of buffer addresses lately (SegmentGraph::met).
bool Met(const SegmentGraph& g, uint64_t fingerprint) {
  for (uint64_t f : g.met) {
    if (f == fingerprint) return true;
  }
  return false;
}

// Notes a set of addresses met.
void Remember(SegmentGraph& g, uint64_t fingerprint) {
  if (Met(g, fingerprint)) return;
  g.met[g.met_next] = fingerprint;
  g.met_next = (g.met_next + 1) % SegmentGraph::kMet;
}

}  // namespace

absl::StatusOr<bool> Executor::RunSegmentGraph(PlanInstance& inst, int seg) {
  const ExecutionPlan& p = *inst.plan;
  const PlanSegment& range = p.segments()[seg];
  BucketFamily* family = inst.family;
  if (family != nullptr && !family->graphs[seg].no_refresh.empty()) {
    // Pinned: the segment cannot serve its whole bucket, so each exact plan
    // keeps its own graphs (as many shapes as the plan and graph caches
    // hold), and the bucket's go: the one holding the bound plan's own
    // parameters to that plan.
    PlanInstance& bound = *family->bound;
    if (bound.graphs.size() != p.segments().size()) bound.graphs.resize(p.segments().size());
    for (SegmentGraph::Variant& v : family->graphs[seg].variants) {
      if (v.held != nullptr && v.params_of == bound.serial) {
        for (SegmentGraph::Variant& to : bound.graphs[seg].variants) {
          if (to.held != nullptr) continue;
          graphs_.Move(&v.held, &to.held);
          to.fingerprint = v.fingerprint;
          to.params_of = v.params_of;
          to.last_used = v.last_used;
          break;
        }
      }
      v.held.reset();
    }
    family = nullptr;
  }
  if (family == nullptr && inst.graphs.size() != p.segments().size()) inst.graphs.resize(p.segments().size());
  SegmentGraph& g = family != nullptr ? family->graphs[seg] : inst.graphs[seg];
  if (!g.no_graph.empty()) return false;
  // The segment runs step by step from now on, for `why`.
  auto no_graph = [&](absl::string_view why) {
    for (SegmentGraph::Variant& v : g.variants) v.held.reset();
    g.no_graph = std::string(why);
    stats_.graph_fallback_reason =
        absl::StrCat("segment ", seg, " of subgraph '", graph_.subgraphs[p.subgraph()].name, "': ", why);
    Log(options_, LogLevel::kWarning, absl::StrCat(stats_.graph_fallback_reason, "; it runs step by step"));
    return false;
  };

  // A graph replays the pointers its kernels were given when captured: the
  // fingerprint of every buffer the segment's steps touch tells whether
  // those still hold (a caller's device input at a new address does not).
  // A bucket's graphs also hold one plan's parameters at a time.
  uint64_t fingerprint = 0xcbf29ce484222325u;
  int64_t steps_run = 0;
  for (int s = range.first; s < range.end; ++s) {
    const PlanStep& step = p.steps()[s];
    if (step.outputs_empty) continue;
    ++steps_run;
    if (!step.prepared_at_plan && step.prepare != nullptr) {
      return no_graph(absl::StrCat(step.node->Describe(), " is prepared when it runs (its input shapes are known ",
                                   "only then)"));
    }
    TensorView* const* ptrs = inst.ptrs.data() + inst.step_ptrs[s];
    for (size_t i = 0; i < step.inputs.size() + step.outputs.size(); ++i) {
      const uintptr_t data = ptrs[i] == nullptr ? 0 : reinterpret_cast<uintptr_t>(ptrs[i]->data);
      fingerprint = (fingerprint ^ data) * 0x100000001b3u;
    }
  }
  // Launches `v`'s graph: just captured, replayed, or replayed after a refresh.
  enum class Launch { kCaptured, kReplay, kRefreshed };
  auto launch = [&](SegmentGraph::Variant& v, Launch how) -> absl::StatusOr<bool> {
    v.fingerprint = fingerprint;
    v.params_of = inst.serial;
    v.last_used = ++graph_tick_;
    graphs_.Touch(*v.held);
    if (absl::Status st = backend_.LaunchGraph(v.held->graph()); !st.ok()) return st;
    if (how != Launch::kCaptured) ++stats_.graph_replays;
    if (how == Launch::kRefreshed) ++stats_.graph_refreshes;
    last_launch_ = how == Launch::kCaptured ? "captured" : how == Launch::kReplay ? "replayed" : "refreshed";
    stats_.kernels_run += steps_run;
    return true;
  };
  SegmentGraph::Variant* slot = nullptr;  // where a capture goes: a free one, else the least recently used
  SegmentGraph::Variant* newest = nullptr;
  for (SegmentGraph::Variant& v : g.variants) {
    if (v.held != nullptr && v.fingerprint == fingerprint && (family == nullptr || v.params_of == inst.serial)) {
      return launch(v, Launch::kReplay);
    }
    if (v.held != nullptr && (newest == nullptr || v.last_used > newest->last_used)) newest = &v;
    if (slot == nullptr || (slot->held != nullptr && (v.held == nullptr || v.last_used < slot->last_used))) slot = &v;
  }
  if (family != nullptr && newest != nullptr && g.no_refresh.empty()) {
    // Another shape of the bucket (or these buffers) had the graph last: its
    // parameters become this plan's.
    absl::StatusOr<bool> refreshed = RefreshSegmentGraph(inst, seg, g, *newest, /*bucket=*/true);
    if (!refreshed.ok()) return refreshed.status();
    if (*refreshed) return launch(*newest, Launch::kRefreshed);
    return RunSegmentGraph(inst, seg);  // pinned now: this plan's own graph
  }
  if (family == nullptr && newest != nullptr && g.no_refresh.empty() && !Met(g, fingerprint)) {
    // Addresses not met before (a buffer that moved): the least recently
    // used graph takes them by a refresh rather than a new capture; only a
    // set that recurs gets a graph of its own.
    SegmentGraph::Variant* oldest = nullptr;
    for (SegmentGraph::Variant& v : g.variants) {
      if (v.held != nullptr && (oldest == nullptr || v.last_used < oldest->last_used)) oldest = &v;
    }
    Remember(g, fingerprint);
    absl::StatusOr<bool> refreshed = RefreshSegmentGraph(inst, seg, g, *oldest, /*bucket=*/false);
    if (!refreshed.ok()) return refreshed.status();
    if (*refreshed) return launch(*oldest, Launch::kRefreshed);
    // Not refreshable (g.no_refresh says why; the graph is unchanged): a
    // capture, as below.
  }
  Remember(g, fingerprint);
  if (slot->held != nullptr) {
    // Every variant taken: the least recently used one takes these buffers
    // by a refresh of its kernels' parameters if it can, else by a capture.
    absl::StatusOr<bool> refreshed = RefreshSegmentGraph(inst, seg, g, *slot, family != nullptr);
    if (!refreshed.ok()) return refreshed.status();
    if (*refreshed) return launch(*slot, Launch::kRefreshed);
    slot->held.reset();
    if (++g.replaced > kMaxReplacedGraphs) {
      return no_graph(absl::StrCat("its buffers met more than ", SegmentGraph::kVariants + kMaxReplacedGraphs,
                                   " sets of addresses (a caller's device buffers at new addresses each run, a body ",
                                   "called with outer values from plans with different arenas, or the shapes of a ",
                                   "bucket whose graph cannot be refreshed from one to another)"));
    }
  }

  // Capture: the steps' kernels are recorded, not run; then the graph runs.
  // A bucket's graph is captured from the plan at its bound (the largest
  // grids, GEMMs and copies of the bucket), then refreshed for this plan.
  graphs_.MakeRoom(options_.max_cached_graphs);
  const bool from_bound = family != nullptr && family->bound.get() != &inst && g.no_refresh.empty();
  absl::StatusOr<std::unique_ptr<BackendGraph>> graph = CaptureSegment(from_bound ? *family->bound : inst, seg);
  if (!graph.ok()) {
    if (absl::IsUnimplemented(graph.status())) {
      graphs_enabled_ = false;
      conditional_graphs_ = false;
      stats_.graph_fallback_reason = std::string(graph.status().message());
      Log(options_, LogLevel::kWarning, absl::StrCat(graph.status().message(), "; segments run step by step"));
      return false;
    }
    return no_graph(graph.status().message());
  }
  graphs_.Hold(*std::move(graph), &slot->held);
  ++stats_.graphs_captured;
  graphs_.TrimBytes(options_.max_graph_bytes);
  if (from_bound) {
    absl::StatusOr<bool> refreshed = RefreshSegmentGraph(inst, seg, g, *slot, /*bucket=*/true);
    if (!refreshed.ok()) return refreshed.status();
    if (*refreshed) return launch(*slot, Launch::kCaptured);
    return RunSegmentGraph(inst, seg);  // pinned now (g.no_refresh says why): this plan's own graph
  }
  return launch(*slot, Launch::kCaptured);
}

absl::StatusOr<std::unique_ptr<BackendGraph>> Executor::CaptureSegment(PlanInstance& src, int seg) {
  const PlanSegment& range = src.plan->segments()[seg];
  const int64_t start = tracer_ != nullptr ? tracer_->Now() : 0;
  if (absl::Status st = backend_.BeginCapture(); !st.ok()) {
    ++stats_.graph_capture_failures;
    if (absl::IsUnimplemented(st)) return st;
    return absl::FailedPreconditionError(absl::StrCat("its capture could not start: ", st.message()));
  }
  const int64_t kernels_before = stats_.kernels_run;
  absl::Status run;
  for (int s = range.first; s < range.end && run.ok(); ++s) {
    if (!src.plan->steps()[s].outputs_empty) run = RunStep(src, static_cast<size_t>(s));
  }
  absl::StatusOr<std::unique_ptr<BackendGraph>> graph = backend_.EndCapture();
  stats_.kernels_run = kernels_before;  // recorded, not run
  if (tracer_ != nullptr) {
    TraceArgs args;
    args.Int("segment", seg)
        .Str("subgraph", graph_.subgraphs[src.plan->subgraph()].name)
        .Bool("at_bucket_bound", src.family != nullptr && src.family->bound.get() == &src)
        .Bool("ok", run.ok() && graph.ok());
    if (graph.ok()) args.Int("nodes", (*graph)->nodes());
    tracer_->Add("capture", absl::StrCat("capture segment ", seg), start, args);
  }
  if (run.ok() && graph.ok() && Logs(options_, LogLevel::kDebug)) {
    Log(options_, LogLevel::kDebug,
        absl::StrCat("segment ", seg, " of subgraph '", graph_.subgraphs[src.plan->subgraph()].name,
                     "' captured as a graph of ", (*graph)->nodes(), " nodes"));
  }
  if (!run.ok() || !graph.ok()) {
    // Nothing ran: the steps now run one by one, where an error that was
    // not the capture's comes back.
    ++stats_.graph_capture_failures;
    return absl::FailedPreconditionError(
        absl::StrCat("its capture failed: ", (!run.ok() ? run : graph.status()).message()));
  }
  return graph;
}

absl::StatusOr<bool> Executor::RefreshSegmentGraph(PlanInstance& inst, int seg, SegmentGraph& g,
                                                   SegmentGraph::Variant& variant, bool bucket) {
  BackendGraph& graph = variant.held->graph();
  if (!g.no_refresh.empty() || !backend_.Refreshable(graph)) return false;
  const PlanSegment& range = inst.plan->segments()[seg];
  const int64_t kernels_before = stats_.kernels_run;
  const int64_t start = tracer_ != nullptr ? tracer_->Now() : 0;
  backend_.BeginRefresh(graph, bucket);
  absl::Status run;
  for (int s = range.first; s < range.end && run.ok(); ++s) {
    if (!inst.plan->steps()[s].outputs_empty) run = RunStep(inst, static_cast<size_t>(s));
  }
  absl::Status refreshed = backend_.EndRefresh();
  stats_.kernels_run = kernels_before;  // nothing ran
  if (tracer_ != nullptr) {
    tracer_->Add("capture", absl::StrCat("refresh segment ", seg), start,
                 TraceArgs()
                     .Int("segment", seg)
                     .Str("subgraph", graph_.subgraphs[inst.plan->subgraph()].name)
                     .Bool("bucket", bucket)
                     .Bool("ok", refreshed.ok() && run.ok()));
  }
  if (refreshed.ok() && run.ok()) return true;
  // Its graphs bake something that moved (a GEMM's operands, a copy) or,
  // in a bucket, something that differs between its shapes: the segment
  // captures per set of addresses (per exact shape) from now on.
  g.no_refresh = std::string((!refreshed.ok() ? refreshed : run).message());
  if (bucket) {
    stats_.bucket_fallback_reason =
        absl::StrCat("segment ", seg, " of subgraph '", graph_.subgraphs[inst.plan->subgraph()].name,
                     "' is pinned to exact shapes: ", g.no_refresh);
    Log(options_, LogLevel::kWarning, stats_.bucket_fallback_reason);
  }
  return false;
}

SegmentGraph& Executor::ControlGraph(PlanInstance& inst, size_t s) {
  if (inst.control_graphs.size() != inst.plan->steps().size()) inst.control_graphs.resize(inst.plan->steps().size());
  std::unique_ptr<SegmentGraph>& held = inst.control_graphs[s];
  if (held == nullptr) held = std::make_unique<SegmentGraph>();
  return *held;
}

bool Executor::HostDriven(SegmentGraph& g, const ir::Node& node, absl::string_view reads, absl::string_view why) {
  for (SegmentGraph::Variant& v : g.variants) v.held.reset();
  g.no_graph = std::string(why);
  if (Logs(options_, LogLevel::kDebug)) {
    Log(options_, LogLevel::kDebug, absl::StrCat(node.Describe(), " runs host-driven (", reads, "): ", why));
  }
  return false;
}

std::string Executor::UncapturableBody(const PlanInstance& body) const {
  for (const PlanStep& st : body.plan->steps()) {
    if (st.outputs_empty) continue;
    if (st.segment < 0) {
      return absl::StrCat("has a step that needs the host (", st.node->Describe(), ": ", st.host_reason, ")");
    }
    if (!st.prepared_at_plan && st.prepare != nullptr) {
      return absl::StrCat("has a step prepared when it runs (", st.node->Describe(), ")");
    }
  }
  return "";
}

SegmentGraph::Variant* Executor::ControlVariant(SegmentGraph& g, uint64_t fingerprint, bool* hit) {
  *hit = false;
  SegmentGraph::Variant* slot = nullptr;
  for (SegmentGraph::Variant& v : g.variants) {
    if (v.held != nullptr && v.fingerprint == fingerprint) {
      *hit = true;
      return &v;
    }
    if (slot == nullptr || (slot->held != nullptr && (v.held == nullptr || v.last_used < slot->last_used))) slot = &v;
  }
  if (slot->held != nullptr) {
    slot->held.reset();
    if (++g.replaced > kMaxReplacedGraphs) return nullptr;
  }
  return slot;
}

absl::Status Executor::LaunchControlGraph(PlanInstance& inst, size_t s, SegmentGraph::Variant& v,
                                          uint64_t fingerprint, bool replay, absl::Span<const TensorView> outs) {
  v.fingerprint = fingerprint;
  v.params_of = inst.serial;
  v.last_used = ++graph_tick_;
  graphs_.Touch(*v.held);
  if (absl::Status st = backend_.LaunchGraph(v.held->graph()); !st.ok()) return st;
  // The graph is a segment of device work in the counts: run, and replayed
  // when it was not just captured (SessionStats).
  ++stats_.segments_run;
  if (replay) ++stats_.graph_replays;
  ++stats_.kernels_run;
  const PlanStep& step = inst.plan->steps()[s];
  for (size_t i = 0; i < step.outputs.size() && i < outs.size(); ++i) {
    if (step.outputs[i] >= 0) inst.views[step.outputs[i]] = outs[i];
  }
  return absl::OkStatus();
}

}  // namespace grove::runtime
