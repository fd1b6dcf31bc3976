#include "lib/runtime/executor.h"

#include <algorithm>
#include <memory>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "lib/ir/value_type.h"
#include "lib/runtime/execution_plan.h"
#include "lib/runtime/step_host.h"

namespace grove::runtime {
namespace {

// On CUDA, inputs of a step whose shapes are inferred when run are read back
// for its shape function when at most this big (shape tensors are tiny).
constexpr uint64_t kHostReadLimitBytes = 1 << 16;
// A segment that keeps meeting new buffer addresses with all its graph
// variants taken replaces one this many times, then runs step by step (its
// graphs would be rebuilt on every run).
constexpr int kMaxReplacedGraphs = 8;

}  // namespace

absl::StatusOr<std::unique_ptr<ExecutionPlan>> Executor::BuildPlan(int subgraph, absl::Span<const TensorView> inputs,
                                                                   absl::Span<const TensorView> captures) {
  const ir::Subgraph& sg = graph_.subgraphs[subgraph];
  if (inputs.size() != sg.inputs.size()) {
    return absl::InvalidArgumentError(absl::StrCat("subgraph '", sg.name, "' takes ", sg.inputs.size(),
                                                   " inputs, given ", inputs.size()));
  }
  auto sig_of = [](const TensorView& v) {
    if (!ir::IsBoxed(v.dtype)) return ValueSig{v.dtype, v.shape};
    ValueSig sig{v.dtype, {}};
    sig.rank_known = ir::SharedItemShape(ir::BoxedValue(v), &sig.shape);
    return sig;
  };
  std::vector<ValueSig> in_sigs, cap_sigs;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const ir::TensorDecl& d = graph_.tensors[sg.inputs[i]];
    if (!DTypeFits(inputs[i].dtype, d.dtype)) {
      return absl::InvalidArgumentError(absl::StrCat("subgraph '", sg.name, "' input '", d.name, "' wants ",
                                                     DTypeName(d.dtype), ", given ", DTypeName(inputs[i].dtype)));
    }
    in_sigs.push_back(sig_of(inputs[i]));
  }
  for (const TensorView& c : captures) cap_sigs.push_back(sig_of(c));
  absl::StatusOr<std::unique_ptr<ExecutionPlan>> plan =
      ExecutionPlan::Build(graph_, subgraph, in_sigs, cap_sigs, &backend_);
  if (!plan.ok()) return plan.status();
  if (backend_.kind() != ir::Backend::kCpu && options_.strict_device) {
    std::vector<std::string> ops;
    for (const PlanStep& step : (*plan)->steps()) {
      if (step.host_fallback) ops.push_back(step.node->Describe());
    }
    if (!ops.empty()) {
      return absl::FailedPreconditionError(absl::StrCat("strict_device: no CUDA kernel for ",
                                                        absl::StrJoin(ops, "; ")));
    }
  } else if (backend_.kind() != ir::Backend::kCpu && Logs(options_, LogLevel::kWarning)) {
    std::vector<std::string> ops;
    for (const PlanStep& step : (*plan)->steps()) {
      if (step.host_fallback) ops.push_back(step.node->Describe());
    }
    if (!ops.empty()) {
      Log(options_, LogLevel::kWarning,
          absl::StrCat("subgraph '", sg.name, "': ", ops.size(), " step(s) with no CUDA kernel run on the CPU with ",
                       "copies: ", absl::StrJoin(ops, "; ")));
    }
  }
  return plan;
}

absl::StatusOr<std::unique_ptr<PlanInstance>> Executor::NewInstance(std::unique_ptr<ExecutionPlan> plan,
                                                                    BucketFamily* family) {
  auto inst = std::make_unique<PlanInstance>(&backend_);
  inst->plan = std::move(plan);
  inst->serial = ++instance_serial_;
  const ExecutionPlan& p = *inst->plan;
  if (family != nullptr) {
    inst->family = family;
    inst->arena_base = family->bound->arena_base;
  } else {
    absl::StatusOr<uint8_t*> shared = RangeArena(graph_.subgraphs[p.subgraph()].depth, p.arena_bytes());
    if (!shared.ok()) return shared.status();
    if (*shared != nullptr) {
      inst->arena_base = *shared;
    } else {
      if (absl::Status s = inst->arena.Reserve(p.arena_bytes()); !s.ok()) return s;
      inst->arena_base = inst->arena.data();
    }
  }
  inst->views.resize(p.values().size());
  inst->dynamic.resize(p.values().size());
  inst->boxed.resize(p.values().size());
  for (size_t v = 0; v < p.values().size(); ++v) {
    const PlanValue& pv = p.values()[v];
    TensorView& view = inst->views[v];
    view.dtype = pv.dtype;
    view.shape = pv.shape;
    switch (pv.kind) {
      case Storage::kArena: view.data = inst->arena_base + pv.offset; break;
      case Storage::kWeight:
      case Storage::kFolded: view.data = const_cast<void*>(pv.data); break;
      case Storage::kDynamic: inst->dynamic[v] = std::make_unique<Buffer>(&backend_); break;
      case Storage::kBoxed:
        inst->boxed[v] = std::make_unique<Value>(EmptyBoxedValue(pv.dtype));
        view.data = inst->boxed[v].get();
        break;
      case Storage::kInput:
      case Storage::kCapture:
      case Storage::kFusedAway: break;
    }
  }
  for (const PlanStep& step : p.steps()) {
    inst->step_ptrs.push_back(inst->ptrs.size());
    for (int v : step.inputs) inst->ptrs.push_back(v < 0 ? nullptr : &inst->views[v]);
    for (int v : step.outputs) inst->ptrs.push_back(v < 0 ? nullptr : &inst->views[v]);
  }
  if (!host_memory_) {
    if (absl::Status s = SetUpDeviceInstance(*inst); !s.ok()) return s;
  }
  ++stats_.plans_created;
  return inst;
}

absl::StatusOr<uint8_t*> Executor::RangeArena(int depth, uint64_t bytes) {
  if (host_memory_) return nullptr;
  if (ranges_off_) {
    ++stats_.arena_own_plans;
    return nullptr;
  }
  if (depth < 0) depth = 0;
  if (static_cast<size_t>(depth) >= ranges_.size()) ranges_.resize(depth + 1);
  std::unique_ptr<BackendRange>& range = ranges_[depth];
  if (range == nullptr) {
    absl::StatusOr<std::unique_ptr<BackendRange>> made = backend_.ReserveRange();
    if (!made.ok()) {
      // Plans keep arenas of their own, as on a backend without ranges.
      ranges_off_ = true;
      ++stats_.arena_own_plans;
      if (!absl::IsUnimplemented(made.status())) {
        Log(options_, LogLevel::kWarning,
            absl::StrCat("no stable arena (plans get arenas of their own): ", made.status().message()));
      }
      return nullptr;
    }
    range = *std::move(made);
  }
  if (absl::Status s = range->Grow(bytes); !s.ok()) {
    // This plan gets an arena of its own; the range and the graphs on it stay.
    ++stats_.arena_own_plans;
    Log(options_, LogLevel::kWarning,
        absl::StrCat("a plan of ", bytes, " arena bytes does not fit the session's stable arena (depth ", depth,
                     "), so it gets an arena of its own: ", s.message()));
    return nullptr;
  }
  int64_t mapped = 0;
  for (const std::unique_ptr<BackendRange>& r : ranges_) mapped += r != nullptr ? static_cast<int64_t>(r->mapped()) : 0;
  stats_.arena_bytes = mapped;
  return range->base();
}

absl::StatusOr<uint8_t*> Executor::MainInputSlot(size_t input, uint64_t bytes) {
  if (host_memory_ || ranges_off_) return nullptr;
  if (input >= input_ranges_.size()) input_ranges_.resize(input + 1);
  std::unique_ptr<BackendRange>& range = input_ranges_[input];
  if (range == nullptr) {
    absl::StatusOr<std::unique_ptr<BackendRange>> made = backend_.ReserveRange();
    if (!made.ok()) return nullptr;  // the bucket keeps a slot of its own
    range = *std::move(made);
  }
  if (!range->Grow(bytes).ok()) return nullptr;
  return range->base();
}

absl::StatusOr<void*> Executor::InputSlot(size_t input, const TensorView& view) {
  if (!buckets_.has_value()) return nullptr;
  std::vector<int64_t> bound;
  std::string why;
  if (!buckets_->BoundInputShape(graph_, input, view, &bound, &why)) return nullptr;
  absl::StatusOr<uint8_t*> slot = MainInputSlot(input, TensorView(view.dtype, bound, static_cast<void*>(nullptr)).byte_size());
  if (!slot.ok()) return slot.status();
  return static_cast<void*>(*slot);
}

std::vector<std::string> Executor::PinnedSegments(absl::Span<const TensorView> inputs) {
  std::vector<std::string> out;
  if (!buckets_.has_value()) return out;
  std::vector<std::vector<int64_t>> shapes;
  std::string why;
  if (!buckets_->BoundShapes(graph_, inputs, &shapes, &why)) return out;
  std::vector<TensorView> bound;
  for (size_t i = 0; i < inputs.size(); ++i) bound.emplace_back(inputs[i].dtype, shapes[i], static_cast<void*>(nullptr));
  std::vector<int64_t> key;
  PlanCache::Key(0, bound, {}, &key);
  const BucketFamily* f = plans_.FindFamily(key);
  if (f == nullptr || f->bound == nullptr) return out;
  for (const SegmentGraph& g : f->graphs) out.push_back(g.no_refresh);
  return out;
}

absl::StatusOr<BucketFamily*> Executor::Bucket(int subgraph, absl::Span<const TensorView> inputs,
                                               absl::Span<const TensorView> captures) {
  std::vector<std::vector<int64_t>> shapes, capture_shapes;
  std::string why;
  const bool bucketed = subgraph == 0
                            ? buckets_->BoundShapes(graph_, inputs, &shapes, &why)
                            : buckets_->BoundBodyShapes(inputs, captures, &shapes, &capture_shapes, &why);
  if (!bucketed) {
    if (subgraph == 0) stats_.bucket_fallback_reason = why;
    return nullptr;
  }
  std::vector<TensorView> bound, bound_captures;
  for (size_t i = 0; i < inputs.size(); ++i) bound.emplace_back(inputs[i].dtype, shapes[i], static_cast<void*>(nullptr));
  for (size_t i = 0; i < captures.size(); ++i) {
    bound_captures.emplace_back(captures[i].dtype, capture_shapes[i], static_cast<void*>(nullptr));
  }
  std::vector<int64_t> key;
  PlanCache::Key(subgraph, bound, bound_captures, &key);
  if (BucketFamily* f = plans_.FindFamily(key); f != nullptr) {
    if (f->bound == nullptr) stats_.bucket_fallback_reason = f->why_not;
    return f->bound == nullptr ? nullptr : f;
  }
  auto family = std::make_unique<BucketFamily>();
  family->key = std::move(key);
  absl::StatusOr<std::unique_ptr<ExecutionPlan>> plan = BuildPlan(subgraph, bound, bound_captures);
  if (!plan.ok()) {
    // Remembered, so the bound is planned once: its shapes run exact plans.
    std::vector<std::string> dims;
    for (const std::vector<int64_t>& s : shapes) dims.push_back(ir::ShapeToString(ir::FromConcrete(s)));
    for (const std::vector<int64_t>& s : capture_shapes) dims.push_back(ir::ShapeToString(ir::FromConcrete(s)));
    family->why_not = absl::StrCat("the bucket bound of subgraph '", graph_.subgraphs[subgraph].name,
                                   "' (inputs and captures ", absl::StrJoin(dims, ", "),
                                   ") does not plan: ", plan.status().message());
    stats_.bucket_fallback_reason = family->why_not;
    Log(options_, LogLevel::kWarning, family->why_not);
    plans_.AddFamily(std::move(family));
    return nullptr;
  }
  absl::StatusOr<std::unique_ptr<PlanInstance>> inst = NewInstance(*std::move(plan), nullptr);
  if (!inst.ok()) return inst.status();
  BucketFamily& f = plans_.AddFamily(std::move(family));
  f.bound = *std::move(inst);
  f.bound->family = &f;
  const ExecutionPlan& p = *f.bound->plan;
  uint64_t slot_bytes = 0;
  for (size_t i = 0; i < bound.size() + bound_captures.size(); ++i) {
    const bool input = i < bound.size();
    const TensorView& b = input ? bound[i] : bound_captures[i - bound.size()];
    f.input_bytes.push_back(b.byte_size());
    uint8_t* slot = nullptr;
    if (subgraph == 0 && input) {
      absl::StatusOr<uint8_t*> shared = MainInputSlot(i, b.byte_size());
      if (!shared.ok()) return shared.status();
      slot = *shared;
    }
    if (slot == nullptr) {
      f.own_slots.push_back(std::make_unique<Buffer>(&backend_));
      if (absl::Status s = f.own_slots.back()->Reserve(b.byte_size()); !s.ok()) return s;
      slot = f.own_slots.back()->data();
    }
    f.slots.push_back(slot);
    const int v = input ? p.input_values()[i] : p.capture_values()[i - bound.size()];
    f.bound->views[v].data = slot;
    slot_bytes += (b.byte_size() + 255) / 256 * 256;
  }
  f.staging = std::make_unique<Buffer>(&backend_);
  if (absl::Status s = f.staging->Reserve(slot_bytes); !s.ok()) return s;
  f.graphs.resize(p.segments().size());
  ++stats_.buckets_made;
  return &f;
}

absl::StatusOr<PlanInstance*> Executor::GetPlan(int subgraph, absl::Span<const TensorView> inputs,
                                                absl::Span<const TensorView> captures) {
  PlanCache::Key(subgraph, inputs, captures, &key_);
  last_plan_hit_ = true;
  if (PlanInstance* hit = plans_.Find(key_, run_serial_); hit != nullptr) {
    ++stats_.plan_cache_hits;
    return hit;
  }
  const int64_t plan_start = tracer_ != nullptr ? tracer_->Now() : 0;
  // A plan made: its trace event and debug message.
  auto made = [&](const PlanInstance& inst) {
    if (tracer_ == nullptr && !Logs(options_, LogLevel::kDebug)) return;
    const ExecutionPlan& plan = *inst.plan;
    std::vector<std::string> shapes;
    for (const TensorView& v : inputs) shapes.push_back(ShapeText(v));
    for (const TensorView& v : captures) shapes.push_back(ShapeText(v));
    const std::string& name = graph_.subgraphs[subgraph].name;
    if (tracer_ != nullptr) {
      tracer_->Add("plan", absl::StrCat("plan '", name, "'"), plan_start,
                   TraceArgs()
                       .Str("subgraph", name)
                       .Strs("inputs", shapes)
                       .Int("steps", static_cast<int64_t>(plan.steps().size()))
                       .Int("segments", static_cast<int64_t>(plan.segments().size()))
                       .Bool("bucketed", inst.family != nullptr));
    }
    Log(options_, LogLevel::kDebug,
        absl::StrCat("plan made for subgraph '", name, "' at ", absl::StrJoin(shapes, ", "), ": ",
                     plan.steps().size(), " steps, ", plan.segments().size(), " segments"));
  };
  // The bound's own shape, met again: its plan is its bucket's, under the
  // same key (a bound is its own bound), so no bucket is worked out per run.
  if (BucketFamily* f = buckets_.has_value() ? plans_.FindFamily(key_) : nullptr; f != nullptr && f->bound != nullptr) {
    ++stats_.plan_cache_hits;
    last_plan_hit_ = true;
    return f->bound.get();
  }
  BucketFamily* family = nullptr;
  if (buckets_.has_value()) {
    const int64_t plans_before = stats_.plans_created;
    absl::StatusOr<BucketFamily*> f = Bucket(subgraph, inputs, captures);
    if (!f.ok()) return f.status();
    family = *f;
    if (family != nullptr && family->key == key_) {  // the bound's own shape
      ++stats_.plan_cache_hits;
      // The bucket (its bound's plan) may have been made just now.
      last_plan_hit_ = stats_.plans_created == plans_before;
      if (!last_plan_hit_) made(*family->bound);
      return family->bound.get();
    }
  }
  last_plan_hit_ = false;
  absl::StatusOr<std::unique_ptr<ExecutionPlan>> plan = BuildPlan(subgraph, inputs, captures);
  if (!plan.ok()) return plan.status();
  if (family != nullptr) {
    if (absl::Status s = (*plan)->AdoptLayout(*family->bound->plan); !s.ok()) {
      stats_.bucket_fallback_reason = std::string(s.message());
      Log(options_, LogLevel::kWarning, s.message());
      family = nullptr;
    }
  }
  absl::StatusOr<std::unique_ptr<PlanInstance>> inst = NewInstance(*std::move(plan), family);
  if (!inst.ok()) return inst.status();
  PlanInstance* result = inst->get();
  if (plans_.Insert(key_, *std::move(inst), run_serial_, options_.max_cached_plans)) {
    ++stats_.plans_evicted;
    if (Logs(options_, LogLevel::kInfo)) {
      Log(options_, LogLevel::kInfo, absl::StrCat("a plan was dropped to keep at most ", options_.max_cached_plans,
                                                  " (SessionOptions::max_cached_plans)"));
    }
  }
  made(*result);
  return result;
}

absl::Status Executor::Execute(PlanInstance& inst, absl::Span<const TensorView> inputs,
                                  absl::Span<const TensorView> captures) {
  ++inst.active;
  absl::Cleanup done = [&inst] { --inst.active; };
  const ExecutionPlan& p = *inst.plan;
  Tracer* const tracer = tracer_;
  const int64_t bind_start = tracer != nullptr ? tracer->Now() : 0;
  if (absl::Status s = BindInputs(inst, inputs, captures); !s.ok()) return s;
  if (tracer != nullptr && (inst.family != nullptr || !host_memory_)) {
    tracer->Add("copy", "bind inputs", bind_start,
                TraceArgs()
                    .Str("subgraph", graph_.subgraphs[p.subgraph()].name)
                    .Bool("bucket_slots", inst.family != nullptr));
  }

  const std::vector<PlanStep>& steps = p.steps();
  int segment = -1;
  // Tracing: the segment running step by step, and since when.
  bool eager_traced = false;
  int64_t segment_start = 0;
  for (size_t s = 0; s < steps.size(); ++s) {
    const PlanStep& step = steps[s];
    if (step.segment != segment) {
      if (eager_traced) TraceSegment(inst, segment, segment_start, /*as_graph=*/false);
      eager_traced = false;
      segment = step.segment;
      if (segment >= 0) {
        ++stats_.segments_run;
        if (tracer != nullptr) segment_start = tracer->Now();
        if (graphs_enabled_) {
          if (interruptible_) {
            if (absl::Status st = CheckInterrupt(*step.node); !st.ok()) return st;
          }
          absl::StatusOr<bool> as_graph = RunSegmentGraph(inst, segment);
          if (!as_graph.ok()) return as_graph.status();
          if (*as_graph) {
            if (tracer != nullptr) TraceSegment(inst, segment, segment_start, /*as_graph=*/true);
            s = static_cast<size_t>(p.segments()[segment].end) - 1;
            continue;
          }
        }
        ++stats_.segments_run_eagerly;
        eager_traced = tracer != nullptr;
      }
    }
    if (step.outputs_empty) continue;
    if (interruptible_) {
      if (absl::Status st = CheckInterrupt(*step.node); !st.ok()) return st;
    }
    if (step.segment < 0 && conditional_graphs_ && step.kernel_allocates && !step.host_fallback &&
        (step.node->type == "If" || step.node->type == "Loop")) {
      // The branch or the trips decided on the device, in a graph
      // (control_graphs.cc).
      absl::StatusOr<bool> ran = step.node->type == "If" ? RunIfGraph(inst, s) : RunLoopGraph(inst, s);
      if (!ran.ok()) return ran.status();
      if (*ran) continue;
    }
    if (tracer != nullptr) [[unlikely]] {
      // A body's step inside a step of the caller: the caller's body time
      // is kept aside while this step counts its own.
      const int64_t outer_body_ns = body_ns_, outer_body_end_ns = body_end_ns_;
      body_ns_ = 0;
      const int64_t start = tracer->Now();
      absl::Status st = RunStepOrFallback(inst, s);
      const int64_t body_ns = body_ns_, body_end_ns = body_end_ns_;
      body_ns_ = outer_body_ns;
      body_end_ns_ = outer_body_end_ns;
      TraceStep(inst, s, start, body_ns, body_end_ns, st);
      if (!st.ok()) return st;
      continue;
    }
    if (absl::Status st = RunStepOrFallback(inst, s); !st.ok()) return st;
  }
  if (eager_traced) TraceSegment(inst, segment, segment_start, /*as_graph=*/false);
  return absl::OkStatus();
}

absl::Status Executor::BindInputs(PlanInstance& inst, absl::Span<const TensorView> inputs,
                                  absl::Span<const TensorView> captures) {
  const ExecutionPlan& p = *inst.plan;
  if (inst.family != nullptr) return BindToSlots(inst, inputs, captures);
  if (!host_memory_) {
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (absl::Status s = BindValue(inst, p.input_values()[i], inputs[i]); !s.ok()) return s;
    }
    for (size_t i = 0; i < captures.size(); ++i) {
      if (absl::Status s = BindValue(inst, p.capture_values()[i], captures[i]); !s.ok()) return s;
    }
    return absl::OkStatus();
  }
  for (size_t i = 0; i < inputs.size(); ++i) inst.views[p.input_values()[i]].data = inputs[i].data;
  for (size_t i = 0; i < captures.size(); ++i) inst.views[p.capture_values()[i]].data = captures[i].data;
  return absl::OkStatus();
}

absl::Status Executor::RunStepOrFallback(PlanInstance& inst, size_t s) {
  const PlanStep& step = inst.plan->steps()[s];
  if (host_memory_ || !step.host_fallback) return RunStep(inst, s);
  TensorView* const* ptrs = inst.ptrs.data() + inst.step_ptrs[s];
  absl::Span<TensorView* const> in_ptrs(ptrs, step.inputs.size());
  absl::Span<TensorView* const> out_ptrs(ptrs + step.inputs.size(), step.outputs.size());
  if (absl::Status st = RunFallbackStep(inst, static_cast<int>(s), in_ptrs, out_ptrs); !st.ok()) return st;
  ++stats_.kernels_run;
  ++stats_.cpu_fallback_steps;
  return absl::OkStatus();
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

void Executor::TraceStep(const PlanInstance& inst, size_t s, int64_t start_ns, int64_t body_ns,
                         int64_t body_end_ns, const absl::Status& status) {
  const int64_t end_ns = tracer_->Now();
  const PlanStep& step = inst.plan->steps()[s];
  TraceArgs args = StepArgs(inst, s, status);
  if (body_ns <= 0) {
    tracer_->AddSpan("step", StepName(step), start_ns, end_ns, args);
    return;
  }
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

void Executor::TraceSegment(const PlanInstance& inst, int seg, int64_t start_ns, bool as_graph) {
  const ExecutionPlan& p = *inst.plan;
  const PlanSegment& range = p.segments()[seg];
  TraceArgs args;
  args.Int("segment", seg)
      .Str("subgraph", graph_.subgraphs[p.subgraph()].name)
      .Int("first_step", range.first)
      .Int("end_step", range.end)
      .Bool("bucketed", inst.family != nullptr);
  if (!as_graph) {
    tracer_->Add("segment", absl::StrCat("segment ", seg, " (eager)"), start_ns, args);
    return;
  }
  // The graph's steps ran on the device as one launch: listed in its
  // event, and each a step event of no host time at the segment's start
  // (timed: false), so every step run has its event on every backend.
  std::vector<std::string> names;
  for (int s = range.first; s < range.end; ++s) {
    if (!p.steps()[s].outputs_empty) names.push_back(StepName(p.steps()[s]));
  }
  args.Str("graph", last_launch_).Strs("steps", names);
  const int64_t end_ns = tracer_->Now();
  tracer_->AddSpan("graph", absl::StrCat("segment ", seg, " (graph ", last_launch_, ")"), start_ns, end_ns, args);
  for (int s = range.first; s < range.end; ++s) {
    if (p.steps()[s].outputs_empty) continue;
    TraceArgs step_args = StepArgs(inst, static_cast<size_t>(s), absl::OkStatus());
    step_args.Str("graph", last_launch_).Bool("timed", false);
    tracer_->AddSpan("step", StepName(p.steps()[s]), start_ns, start_ns, step_args);
  }
}

absl::Status Executor::BindToSlots(PlanInstance& inst, absl::Span<const TensorView> inputs,
                                   absl::Span<const TensorView> captures) {
  BucketFamily& f = *inst.family;
  const ExecutionPlan& p = *inst.plan;
  const size_t n = inputs.size() + captures.size();
  auto given = [&](size_t i) -> const TensorView& { return i < inputs.size() ? inputs[i] : captures[i - inputs.size()]; };
  // A source inside another slot (a body's output that passed an input
  // through, fed back as another input) would be overwritten by an earlier
  // copy: such sources go to the staging buffer first.
  std::vector<const void*> source(n);
  uint64_t staged = 0;
  for (size_t i = 0; i < n; ++i) {
    source[i] = given(i).data;
    const uint64_t bytes = given(i).byte_size();
    if (bytes == 0 || source[i] == f.slots[i]) continue;
    const uint8_t* src = static_cast<const uint8_t*>(source[i]);
    for (size_t k = 0; k < n; ++k) {
      const uint8_t* slot = f.slots[k];
      if (k == i || src + bytes <= slot || src >= slot + f.input_bytes[k]) continue;
      void* to = f.staging->data() + staged;
      if (absl::Status s = backend_.CopyAsync(to, source[i], bytes); !s.ok()) return s;
      source[i] = to;
      staged += (bytes + 255) / 256 * 256;
      break;
    }
  }
  for (size_t i = 0; i < n; ++i) {
    const uint64_t bytes = given(i).byte_size();
    void* slot = f.slots[i];
    if (bytes > 0 && source[i] != slot) {
      if (absl::Status s = backend_.CopyAsync(slot, source[i], bytes); !s.ok()) return s;
      if (!backend_.IsDevicePointer(source[i])) stats_.bytes_host_to_device += static_cast<int64_t>(bytes);
    }
    inst.views[i < inputs.size() ? p.input_values()[i] : p.capture_values()[i - inputs.size()]].data = slot;
    if (p.subgraph() == 0) {
      stats_.bucket_input_bytes += static_cast<int64_t>(f.input_bytes[i]);
      stats_.bucket_padding_bytes += static_cast<int64_t>(f.input_bytes[i] - std::min(f.input_bytes[i], bytes));
    }
  }
  if (p.subgraph() == 0) ++stats_.bucketed_runs;
  return absl::OkStatus();
}

absl::Status Executor::RunStep(PlanInstance& inst, size_t s) {
  const ExecutionPlan& p = *inst.plan;
  const PlanStep& step = p.steps()[s];
  TensorView* const* ptrs = inst.ptrs.data() + inst.step_ptrs[s];
  absl::Span<TensorView* const> in_ptrs(ptrs, step.inputs.size());
  absl::Span<TensorView* const> out_ptrs(ptrs + step.inputs.size(), step.outputs.size());
  StepHost host(*this, inst, static_cast<int>(s));
  if (step.infer_at_run) {
    // Shapes follow from the actual inputs (and their values, all known now;
    // on CUDA small ones are read back for the shape function).
    std::vector<ir::ShapeContext::Input> ins(step.inputs.size());
    for (size_t i = 0; i < step.inputs.size(); ++i) {
      if (in_ptrs[i] == nullptr) continue;
      const TensorView* value = in_ptrs[i];
      if (!host_memory_ && !ir::IsBoxed(in_ptrs[i]->dtype)) {
        value = nullptr;
        if (in_ptrs[i]->byte_size() <= kHostReadLimitBytes) {
          absl::StatusOr<const TensorView*> h = HostCopy(inst, step.inputs[i], *in_ptrs[i]);
          if (!h.ok()) return h.status();
          value = *h;
        }
      }
      ins[i] = InputOfView(*in_ptrs[i], value);
    }
    if (absl::Status st = InferAndAllocate(step, std::move(ins), host); !st.ok()) return st;
  } else if (step.kernel_allocates) {
    for (int v : step.outputs) {
      if (v >= 0) inst.views[v] = TensorView();
    }
  }

  if (!host_memory_) {
    backend_.SetStepHostInputs(absl::MakeConstSpan(inst.host_ptrs.data() + inst.step_ptrs[s], step.inputs.size()));
  }
  ir::KernelContext ctx(*step.node, in_ptrs, out_ptrs, &host);
  if (step.prepared_at_plan) {
    ctx.SetPrepared(&step.prepared,
                    step.prepared.workspace_bytes > 0 ? inst.arena_base + step.workspace_offset : nullptr);
  }
  // Inside a segment on a device: no wait and no read may happen here.
  const bool watch = step.segment >= 0 && !host_memory_;
  BackendCounters before;
  if (watch) before = backend_.counters();
  absl::Status st = step.prepared_at_plan || step.prepare == nullptr ? step.kernel(ctx)
                                                                     : ir::RunKernel(step.backend, ctx);
  if (!st.ok()) return st;
  if (watch) {
    const BackendCounters after = backend_.counters();
    stats_.host_waits_inside_segments += (after.synchronizations - before.synchronizations) +
                                         (after.device_to_host_reads - before.device_to_host_reads);
  }
  ++stats_.kernels_run;

  if (step.kernel_allocates || step.infer_at_run) {
    for (size_t i = 0; i < step.outputs.size(); ++i) {
      const int v = step.outputs[i];
      if (v < 0) continue;
      const PlanValue& pv = p.values()[v];
      if (inst.views[v].dtype == DType::kUnknown) {
        return absl::InternalError(absl::StrCat(step.node->Describe(), ": output ", i, " was not produced"));
      }
      if (pv.shape_known && inst.views[v].shape != pv.shape) {
        return absl::InvalidArgumentError(absl::StrCat(
            step.node->Describe(), ": output ", i, " has shape ",
            ir::ShapeToString(ir::FromConcrete(inst.views[v].shape)), " but the plan expects ",
            ir::ShapeToString(ir::FromConcrete(pv.shape))));
      }
    }
  }
  return absl::OkStatus();
}

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

Executor::Executor(const internal::ModelImpl& model, const SessionOptions& options, Backend& backend,
                   SessionStats& stats)
    : model_(model), graph_(model.graph()), options_(options), backend_(backend), host_memory_(backend.host_memory()),
      stats_(stats), graphs_(stats), step_workspace_(&backend) {
  if (host_memory_) return;
  if (options.cuda_graphs == GraphMode::kOff) {
    stats_.graph_fallback_reason = "graphs are off (SessionOptions::cuda_graphs)";
  } else if (!backend.captures_graphs()) {
    stats_.graph_fallback_reason = absl::StrCat(backend.Describe(), " does not capture graphs");
  } else {
    graphs_enabled_ = true;
    conditional_graphs_ = backend.conditional_graphs();
  }
}

Executor::~Executor() = default;

absl::Status Executor::Init() {
  absl::StatusOr<const uint8_t*> weights = model_.DeviceBytes(backend_);
  if (!weights.ok()) return weights.status();
  device_weights_ = *weights;
  absl::StatusOr<BucketPolicy> buckets = BucketPolicy::Make(graph_, options_.shape_buckets);
  if (!buckets.ok()) return buckets.status();
  // Buckets serve graphs: on a backend that captures them, with some symbol
  // bucketed.
  if (graphs_enabled_ && !buckets->all_exact() && !graph_.symbols.empty()) buckets_ = *std::move(buckets);
  return absl::OkStatus();
}

absl::Status Executor::CheckCancelledBeforeStart() const {
  if (options_.cancellation != nullptr && options_.cancellation->IsCancelled()) {
    return absl::CancelledError("the run was cancelled before it started (CancellationToken::Reset lets runs go on)");
  }
  return absl::OkStatus();
}

void Executor::StartRun(bool runs_kernels) {
  ++run_serial_;
  if (runs_kernels) strings_.Reset();
  body_runs_ = 0;
  has_deadline_ = options_.run_deadline_ms > 0;
  interruptible_ = has_deadline_ || options_.cancellation != nullptr;
  if (has_deadline_) {
    // At most ~35 years ahead: steady_clock's nanoseconds must not overflow.
    const int64_t ms = std::min<int64_t>(options_.run_deadline_ms, int64_t{1} << 40);
    deadline_ = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  }
}

absl::Status Executor::CheckInterrupt(const ir::Node& next) const {
  if (options_.cancellation != nullptr && options_.cancellation->IsCancelled()) {
    return absl::CancelledError(absl::StrCat("the run was cancelled (stopped before ", next.Describe(), ")"));
  }
  if (has_deadline_ && std::chrono::steady_clock::now() >= deadline_) {
    return absl::DeadlineExceededError(absl::StrCat("the run passed its deadline of ", options_.run_deadline_ms,
                                                    " ms (stopped before ", next.Describe(), ")"));
  }
  return absl::OkStatus();
}

absl::Status Executor::InferAndAllocate(const PlanStep& step, std::vector<ir::ShapeContext::Input> ins,
                                           ir::KernelContext::Host& host) {
  ir::ShapeContext sctx(*step.node, graph_, std::move(ins), nullptr);
  if (absl::Status st = ir::InferShapes(sctx); !st.ok()) return st;
  for (size_t i = 0; i < step.outputs.size(); ++i) {
    if (step.outputs[i] < 0) continue;
    const auto& o = sctx.outputs()[i];
    if (ir::IsBoxed(o.dtype)) {
      absl::StatusOr<TensorView*> view = host.AllocateOutput(static_cast<int>(i), o.dtype, {});
      if (!view.ok()) return view.status();
      continue;
    }
    if (!o.rank_known || !ir::IsConcrete(o.shape)) {
      return absl::InvalidArgumentError(absl::StrCat(step.node->Describe(), ": cannot determine the shape of output ",
                                                     i, " from its inputs"));
    }
    absl::StatusOr<TensorView*> view = host.AllocateOutput(static_cast<int>(i), o.dtype, ir::ToConcrete(o.shape));
    if (!view.ok()) return view.status();
  }
  return absl::OkStatus();
}

}  // namespace grove::runtime
