// The executor: plans from the cache (made on a miss), run step by step on
// one backend. Steps of a segment run back to back; a step that needs the
// host (control flow, a CPU fallback, shapes or values read back) runs
// between segments. Control-flow kernels call back into RunSubgraph, which
// goes through the same cache for the body.
//
//   setup:  arena pointers are bound when an instance is made; a run binds
//           only its input and capture pointers (staged to the device when
//           the caller's memory is the host's).
//   invoke: a step prepared with its plan only fills pointers and runs;
//           steps whose shapes depend on data infer, allocate and prepare
//           when they run.
#ifndef GROVE_LIB_RUNTIME_EXECUTOR_H_
#define GROVE_LIB_RUNTIME_EXECUTOR_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "grove/grove.h"
#include "lib/ir/string_arena.h"
#include "lib/runtime/backend.h"
#include "lib/runtime/buckets.h"
#include "lib/runtime/buffer.h"
#include "lib/runtime/graph_cache.h"
#include "lib/runtime/model_impl.h"
#include "lib/runtime/plan_cache.h"
#include "lib/runtime/trace.h"

namespace grove::runtime {

class Executor {
 public:
  Executor(const internal::ModelImpl& model, const SessionOptions& options, Backend& backend, SessionStats& stats);
  ~Executor();
  // Uploads the model's weights to the backend (once per device).
  absl::Status Init();

  // A top-level run (Run, RunInto, Reshape) starts now: arms its deadline,
  // resets its body count and, for runs, its strings.
  void StartRun(bool runs_kernels);
  absl::Status CheckCancelledBeforeStart() const;

  absl::StatusOr<PlanInstance*> GetPlan(int subgraph, absl::Span<const TensorView> inputs,
                                        absl::Span<const TensorView> captures);
  absl::Status Execute(PlanInstance& inst, absl::Span<const TensorView> inputs,
                       absl::Span<const TensorView> captures);
  // The host bytes of value `v` (a view of backend memory): the host view of
  // a weight or folded value, or a copy read back. `wait` false: the copy is
  // only queued; the caller synchronizes before reading it (a run's outputs,
  // copied together).
  absl::StatusOr<const TensorView*> HostCopy(PlanInstance& inst, int v, const TensorView& device_view,
                                             bool wait = true);

  ir::StringArena& strings() { return strings_; }

  // Session::InputBuffer: the bucket slot main input `input` takes at
  // `view`'s shape (its bucket's bound), so a run given it copies nothing
  // in; nullptr when the main graph's shapes are not bucketed (or this
  // input's cannot be, or the backend has no stable ranges).
  absl::StatusOr<void*> InputSlot(size_t input, const TensorView& view);
  // Per segment of the bucket of these main inputs: why its graph cannot
  // serve every shape of the bucket (SegmentGraph::no_refresh), "" when it
  // can; empty when the shapes are not bucketed or the bucket is not made.
  std::vector<std::string> PinnedSegments(absl::Span<const TensorView> inputs);

  // Traces runs' plans, segments, body calls and steps into `tracer` (null:
  // none; owned by the session, outliving the executor's runs).
  void SetTracer(Tracer* tracer);
  // Device times for the run's trace (a backend that marks its stream):
  // Begin after Tracer::BeginRun, End after the run's wait, before EndRun.
  void BeginDeviceTrace();
  void EndDeviceTrace();
  Tracer* tracer() const { return tracer_; }
  // The last GetPlan found its plan in the cache (else it made one).
  bool last_plan_hit() const { return last_plan_hit_; }

 private:
  // A segment, If or Loop step that keeps meeting new buffer addresses (or
  // new branch and body plans) with all its graph variants taken replaces one
  // this many times, then runs step by step or host-driven for good: its
  // graphs would be rebuilt on every run.
  static constexpr int kMaxReplacedGraphs = 8;

  friend class StepHost;
  friend class FallbackHost;

  // A plan for these signatures (checked as GetPlan does), unprepared for
  // the instance.
  absl::StatusOr<std::unique_ptr<ExecutionPlan>> BuildPlan(int subgraph, absl::Span<const TensorView> inputs,
                                                           absl::Span<const TensorView> captures);
  // `plan` made ready to run: its arena (its own, or `family`'s bound's when
  // it has adopted that layout), views and pointers, uploads.
  absl::StatusOr<std::unique_ptr<PlanInstance>> NewInstance(std::unique_ptr<ExecutionPlan> plan,
                                                            BucketFamily* family);
  // The stable arena of subgraphs at nesting `depth` (ir::Subgraph::depth),
  // grown to `bytes`: plans of one depth never run at the same time (a
  // body's outputs are copied out before the next body call), so all share
  // it. nullptr: the plan keeps an arena of its own (the backend reserves no
  // ranges, or this one is full).
  absl::StatusOr<uint8_t*> RangeArena(int depth, uint64_t bytes);
  // The bucket slot of main input `input`, grown to `bytes`: one range per
  // main input, shared by every bucket (buckets never run at the same time)
  // at an address that never moves. nullptr: the bucket keeps its own slot.
  absl::StatusOr<uint8_t*> MainInputSlot(size_t input, uint64_t bytes);
  // Shape buckets: the bucket of these inputs and captures, made on first use
  // (its bound's plan and input slots); null when they are not bucketed (the
  // reason is in SessionStats::bucket_fallback_reason).
  absl::StatusOr<BucketFamily*> Bucket(int subgraph, absl::Span<const TensorView> inputs,
                                       absl::Span<const TensorView> captures);
  // Bucket at a bound with a body's dims bucketed where `varied` says
  // (empty: all; BucketPolicy::BoundBodyShapes); `quiet`: a bound that does
  // not plan is neither logged nor the fallback reason (a retry follows).
  absl::StatusOr<BucketFamily*> BucketAt(int subgraph, absl::Span<const TensorView> inputs,
                                         absl::Span<const TensorView> captures,
                                         absl::Span<const std::vector<bool>> varied, bool quiet = false);
  // Copies a bucket plan's inputs and captures into its family's slots.
  absl::Status BindToSlots(PlanInstance& inst, absl::Span<const TensorView> inputs,
                           absl::Span<const TensorView> captures);
  // Binds a plan's inputs and captures as Execute does (slots, staging or
  // pointers); on a device, inside a capture too (its copies are recorded).
  absl::Status BindInputs(PlanInstance& inst, absl::Span<const TensorView> inputs,
                          absl::Span<const TensorView> captures);
  // If or Loop step s (a device backend) as one graph with a conditional
  // node when it can be, counted in SessionStats::control_flow_in_graphs;
  // false, counted as host-driven with the reason, when it runs as its
  // kernel does.
  absl::StatusOr<bool> RunControlFlowGraph(PlanInstance& inst, size_t s);
  // An If whose condition only the device has, as one graph with a
  // conditional node (Backend::ComposeGraph): each branch's plan captured
  // with its outputs' copies into the If's, the branch picked on the device
  // when the graph replays. False when step s must run as its kernel does
  // (the host reads the condition): graphs or conditional nodes off, a
  // condition the host knows, outputs whose shapes depend on the branch, a
  // branch with a step that needs the host. control_graphs.cc.
  absl::StatusOr<bool> RunIfGraph(PlanInstance& inst, size_t s);
  // A Loop whose carried shapes hold across trips and which has no scan
  // outputs, as one graph with a WHILE node (Backend::ComposeGraph): the
  // initial values copied in, the body's plan captured once with its
  // carried outputs copied back and the trip counter stepped
  // (Backend::QueueLoopStep), the final values copied out. False when step s
  // must run as its kernel does (the host reads each trip's condition).
  absl::StatusOr<bool> RunLoopGraph(PlanInstance& inst, size_t s);
  // Control step s's graphs (made on first use).
  SegmentGraph& ControlGraph(PlanInstance& inst, size_t s);
  // Control step `node` runs host-driven from now on, for `why` (its
  // graphs dropped, the reason logged at debug level); returns false.
  bool HostDriven(SegmentGraph& g, const ir::Node& node, absl::string_view reads, absl::string_view why);
  // Why body plan `body` cannot be captured whole ("" when it can).
  std::string UncapturableBody(const PlanInstance& body) const;
  // The variant of `g` holding a graph for `fingerprint` (*hit true), else
  // the one a new capture goes to (emptied); nullptr when `g` has been
  // captured anew too often (then it runs host-driven: g.no_graph).
  SegmentGraph::Variant* ControlVariant(SegmentGraph& g, uint64_t fingerprint, bool* hit);
  // Composes `pieces` (Backend::ComposeGraph) into `slot` of control step
  // s's graphs and launches it; false (host-driven, `reads` in the log)
  // when the backend cannot compose them.
  absl::StatusOr<bool> ComposeAndLaunch(PlanInstance& inst, size_t s, SegmentGraph& g, SegmentGraph::Variant& slot,
                                        uint64_t fingerprint, std::vector<Backend::GraphPiece> pieces,
                                        absl::Span<const TensorView> outs, absl::string_view reads);
  // Launches `v`'s graph of control step s, counted as a segment run (and a
  // replay when `replay`); the step's outputs are then `outs`.
  absl::Status LaunchControlGraph(PlanInstance& inst, size_t s, SegmentGraph::Variant& v, uint64_t fingerprint,
                                  bool replay, absl::Span<const TensorView> outs);
  absl::Status SetUpDeviceInstance(PlanInstance& inst);
  absl::Status BindValue(PlanInstance& inst, int v, const TensorView& given);
  // Step s of a plan (not a CPU fallback): inputs read back for its shape
  // function when it infers at run time, its kernel, its outputs checked.
  absl::Status RunStep(PlanInstance& inst, size_t s);
  // Step s as Execute runs it: RunStep, or on a device a CPU fallback with
  // its copies.
  absl::Status RunStepOrFallback(PlanInstance& inst, size_t s);
  // Tracing: step s's event (from `start_ns`; `body_ns` of it spent in the
  // If, Loop or Scan bodies it called, the last ending at `body_end_ns`),
  // and a segment's.
  // `mark`: the backend's mark at the start (-1: none); executor_trace.cc.
  void TraceStep(const PlanInstance& inst, size_t s, int64_t start_ns, int mark, int64_t body_ns,
                 int64_t body_end_ns, const absl::Status& status);
  void TraceSegment(const PlanInstance& inst, int seg, int64_t start_ns, int mark, bool as_graph);
  // If or Loop step s run as one conditional graph launched since start_ns.
  void TraceControlGraph(const PlanInstance& inst, size_t s, int64_t start_ns, int mark);
  // A mark on the backend's stream now (Backend::MarkStream) when the trace
  // is timed on the device, else -1.
  int Mark();
  // Step s's event args: op, node, subgraph, backend, segment, shapes.
  TraceArgs StepArgs(const PlanInstance& inst, size_t s, const absl::Status& status) const;
  // CUDA graphs: runs segment `seg` as one graph launch (capturing it first
  // when it has no graph for these buffers yet) and returns true, or returns
  // false when the segment must run step by step (graphs off, a step that
  // cannot be captured, a capture that failed: the reason is kept).
  absl::StatusOr<bool> RunSegmentGraph(PlanInstance& inst, int seg);
  // Rewrites the kernel parameters of `variant`'s graph for the segment's
  // buffers now (Backend::BeginRefresh); false when its graph cannot take
  // them, remembered in SegmentGraph::no_refresh.
  // `bucket`: the graph was captured for another plan of inst's bucket
  // (Backend::BeginRefresh).
  absl::StatusOr<bool> RefreshSegmentGraph(PlanInstance& inst, int seg, SegmentGraph& g,
                                           SegmentGraph::Variant& variant, bool bucket);
  // Records segment `seg` of `src` as a graph (its kernels are not run).
  absl::StatusOr<std::unique_ptr<BackendGraph>> CaptureSegment(PlanInstance& src, int seg);
  absl::Status RunFallbackStep(PlanInstance& inst, int s, absl::Span<TensorView* const> in_ptrs,
                               absl::Span<TensorView* const> out_ptrs);
  // A step whose output shapes are known only when it runs: its shape
  // function on these inputs, then each output allocated through `host`.
  absl::Status InferAndAllocate(const PlanStep& step, std::vector<ir::ShapeContext::Input> ins,
                                ir::KernelContext::Host& host);
  // CANCELLED or DEADLINE_EXCEEDED when the run must stop before `next`
  // (the step or body about to run); called only when interruptible_.
  absl::Status CheckInterrupt(const ir::Node& next) const;

  const internal::ModelImpl& model_;
  const ir::Graph& graph_;
  const SessionOptions& options_;
  Backend& backend_;
  const bool host_memory_;  // backend_.host_memory(), asked once
  SessionStats& stats_;
  // The stable arena: one range per subgraph depth (RangeArena), declared
  // first so that it goes after every plan and graph on it.
  std::vector<std::unique_ptr<BackendRange>> ranges_;
  bool ranges_off_ = false;  // the backend reserves none
  std::vector<std::unique_ptr<BackendRange>> input_ranges_;  // per main input (MainInputSlot)
  // Declared before the plans, whose segments hold the graphs.
  GraphCache graphs_;
  // Graphs are tried (SessionOptions::cuda_graphs and a backend that
  // captures them); cleared when the backend turns out unable to.
  bool graphs_enabled_ = false;
  // Ifs may run as conditional graph nodes (graphs on and a backend that
  // has them; SessionOptions::cuda_graphs).
  bool conditional_graphs_ = false;
  std::string no_conditional_nodes_;  // the reason, made once
  uint64_t graph_tick_ = 0;  // orders a segment's graph variants by last use
  PlanCache plans_;
  std::vector<int64_t> key_;
  // Shape buckets: the policy, when the main graph's plans are bucketed (a
  // backend that captures graphs, some symbol not "exact").
  std::optional<BucketPolicy> buckets_;
  // Per body subgraph, which dims of its inputs and captures have varied
  // between calls: only those are bucketed (BoundBodyShapes).
  absl::flat_hash_map<int, BodyDims> body_dims_;
  uint64_t instance_serial_ = 0;
  uint64_t run_serial_ = 0;  // top-level runs started
  const uint8_t* device_weights_ = nullptr;
  // Workspace of steps prepared when they run (backend memory).
  Buffer step_workspace_;
  // The bytes of strings kernels make; reset when a run starts, so a run's
  // string outputs stay valid until the next, as its other outputs do.
  ir::StringArena strings_;
  // The current run's stop conditions: its deadline and the cancellation
  // token. `interruptible_` is false when the session has neither, so the
  // per-step check is one branch.
  bool interruptible_ = false;
  bool has_deadline_ = false;
  // Subgraph runs of the current run, against SessionOptions::max_body_runs.
  int64_t body_runs_ = 0;
  std::chrono::steady_clock::time_point deadline_;
  Tracer* tracer_ = nullptr;
  bool device_marks_ = false;  // tracing on a backend that marks its stream
  // Tracing: time the step running now has spent in its body calls so far,
  // and when the last of them ended.
  int64_t body_ns_ = 0;
  int64_t body_end_ns_ = 0;
  bool last_plan_hit_ = false;
  // How RunSegmentGraph launched its graph last ("captured", "replayed",
  // "refreshed"), for the segment's trace event.
  const char* last_launch_ = "";
};

}  // namespace grove::runtime

#endif  // GROVE_LIB_RUNTIME_EXECUTOR_H_
