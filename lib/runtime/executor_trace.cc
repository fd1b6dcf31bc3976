// Run traces of the executor (Tracer, trace.h): one event per step with
// its op, node, backend and shapes; a segment's, and a graph launch's. On a
// backend that marks its stream (CUDA), steps, eager segments and graph
// launches are bracketed by marks (events) that the run's end turns into
// device times (Tracer::ResolveMarks); nothing is marked when not tracing.
#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "lib/runtime/executor.h"
#include "lib/runtime/execution_plan.h"

namespace grove::runtime {

void Executor::SetTracer(Tracer* tracer) {
  tracer_ = tracer;
  device_marks_ = tracer != nullptr && backend_.marks_stream();
}

int Executor::Mark() {
  if (!device_marks_) return -1;
  absl::StatusOr<int> mark = backend_.MarkStream();
  return mark.ok() ? *mark : -1;  // untimed on the device: the host's span stays
}

void Executor::BeginDeviceTrace() {
  if (!device_marks_ || !tracer_->in_run()) return;
  backend_.ResetMarks();
  // Taken before the base mark: the device passes that mark no earlier, so
  // device times placed from here stay inside the run's event.
  const int64_t at = tracer_->Now();
  tracer_->SetDeviceBase(Mark(), at);
}

void Executor::EndDeviceTrace() {
  if (!device_marks_ || !tracer_->in_run()) return;
  tracer_->ResolveMarks([this](int from, int to) { return backend_.MarkedMicros(from, to); });
}

namespace {

// "MatMul /blocks.0/attn/MatMul"; the op alone for a node without a name.
std::string StepName(const PlanStep& step) {
  if (step.node->name.empty()) return step.node->type;
  return absl::StrCat(step.node->type, " ", step.node->name);
}

}  // namespace

TraceArgs Executor::StepArgs(const PlanInstance& inst, size_t s, const absl::Status& status) const {
  const ExecutionPlan& p = *inst.plan;
  const PlanStep& step = p.steps()[s];
  TensorView* const* ptrs = inst.ptrs.data() + inst.step_ptrs[s];
  std::vector<std::string> ins, outs;
  ins.reserve(step.inputs.size());
  outs.reserve(step.outputs.size());
  for (size_t i = 0; i < step.inputs.size(); ++i) ins.push_back(ptrs[i] == nullptr ? "" : ShapeText(*ptrs[i]));
  if (status.ok()) {
    for (size_t i = 0; i < step.outputs.size(); ++i) {
      const TensorView* out = ptrs[step.inputs.size() + i];
      outs.push_back(out == nullptr ? "" : ShapeText(*out));
    }
  }
  const bool fallback = !host_memory_ && step.host_fallback;
  TraceArgs args;
  args.Int("step", static_cast<int64_t>(s))
      .Str("op", step.node->type)
      .Str("node", step.node->name)
      .Str("subgraph", graph_.subgraphs[p.subgraph()].name)
      .Str("backend", fallback ? "cpu (fallback)" : step.backend == ir::Backend::kCuda ? "cuda" : "cpu")
      .Int("segment", step.segment)
      .Strs("inputs", ins)
      .Strs("outputs", outs);
  if (!step.host_reason.empty()) args.Str("host_reason", step.host_reason);
  if (!status.ok()) args.Str("error", status.ToString());
  return args;
}

void Executor::TraceStep(const PlanInstance& inst, size_t s, int64_t start_ns, int mark, int64_t body_ns,
                         int64_t body_end_ns, const absl::Status& status) {
  const int64_t end_ns = tracer_->Now();
  const PlanStep& step = inst.plan->steps()[s];
  TraceArgs args = StepArgs(inst, s, status);
  if (body_ns <= 0) {
    tracer_->AddMarked("step", StepName(step), start_ns, end_ns, args, mark, mark >= 0 ? Mark() : -1);
    return;
  }
  // Its bodies' steps have device times of their own: its events keep the
  // host's (the device's span would hold theirs and count them twice).
  if (device_marks_) args.Str("clock", "host");
  // A step that called bodies (If, Loop, Scan): a "control" event spans it
  // with its body calls, and its step event is the part after its last
  // body call, so step events never overlap (their durations add up to at
  // most the run's) and nest properly in a viewer. `own_us`: all of its
  // time outside its bodies.
  const int64_t own_ns = std::max<int64_t>(0, end_ns - start_ns - body_ns);
  tracer_->AddSpan("control", StepName(step), start_ns, end_ns,
                   TraceArgs().Int("step", static_cast<int64_t>(s)).Int("body_ns", body_ns).Int("own_ns", own_ns));
  args.Int("body_ns", body_ns).Int("own_ns", own_ns);
  tracer_->AddSpan("step", StepName(step), std::clamp(body_end_ns, start_ns, end_ns), end_ns, args);
}

void Executor::TraceSegment(const PlanInstance& inst, int seg, int64_t start_ns, int mark, bool as_graph) {
  const ExecutionPlan& p = *inst.plan;
  const PlanSegment& range = p.segments()[seg];
  TraceArgs args;
  args.Int("segment", seg)
      .Str("subgraph", graph_.subgraphs[p.subgraph()].name)
      .Int("first_step", range.first)
      .Int("end_step", range.end)
      .Bool("bucketed", inst.family != nullptr);
  const int end_mark = mark >= 0 ? Mark() : -1;
  if (!as_graph) {
    tracer_->AddMarked("segment", absl::StrCat("segment ", seg, " (eager)"), start_ns, tracer_->Now(), args, mark,
                       end_mark);
    return;
  }
  // The graph's steps ran on the device as one launch: listed in its
  // event (timed by the device from its launch to its end, with marks),
  // and each a step event of no time at the graph's start (timed: false),
  // so every step run has its event on every backend. Times per step
  // inside a graph would need event nodes captured in it.
  std::vector<std::string> names;
  for (int s = range.first; s < range.end; ++s) {
    if (!p.steps()[s].outputs_empty) names.push_back(StepName(p.steps()[s]));
  }
  args.Str("graph", last_launch_).Strs("steps", names);
  const int64_t end_ns = tracer_->Now();
  tracer_->AddMarked("graph", absl::StrCat("segment ", seg, " (graph ", last_launch_, ")"), start_ns, end_ns, args,
                     mark, end_mark);
  for (int s = range.first; s < range.end; ++s) {
    if (p.steps()[s].outputs_empty) continue;
    TraceArgs step_args = StepArgs(inst, static_cast<size_t>(s), absl::OkStatus());
    step_args.Str("graph", last_launch_).Bool("timed", false);
    tracer_->AddMarked("step", StepName(p.steps()[s]), start_ns, start_ns, step_args, end_mark >= 0 ? mark : -1,
                       end_mark >= 0 ? mark : -1);
  }
}

void Executor::TraceControlGraph(const PlanInstance& inst, size_t s, int64_t start_ns, int mark) {
  const int end_mark = mark >= 0 ? Mark() : -1;
  const int64_t end_ns = tracer_->Now();
  const PlanStep& step = inst.plan->steps()[s];
  tracer_->AddMarked("graph", absl::StrCat(StepName(step), " (conditional graph)"), start_ns, end_ns,
                     TraceArgs()
                         .Int("step", static_cast<int64_t>(s))
                         .Str("subgraph", graph_.subgraphs[inst.plan->subgraph()].name)
                         .Strs("steps", {StepName(step)}),
                     mark, end_mark);
  TraceArgs args = StepArgs(inst, s, absl::OkStatus());
  args.Str("graph", "conditional").Bool("timed", false);
  tracer_->AddMarked("step", StepName(step), start_ns, start_ns, args, end_mark >= 0 ? mark : -1,
                     end_mark >= 0 ? mark : -1);
}

}  // namespace grove::runtime
