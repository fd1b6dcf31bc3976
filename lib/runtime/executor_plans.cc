// The executor's plans: built for a subgraph's input shapes, instanced with
// their arena (the session's stable range at the plan's depth, or one of the
// plan's own), found again in the plan cache, or shared by the shapes of one
// bucket (buckets.h); and the main inputs' slots a caller may write into.
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "lib/ir/value_type.h"
#include "lib/runtime/execution_plan.h"
#include "lib/runtime/executor.h"
#include "lib/runtime/step_host.h"

namespace grove::runtime {

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
  if (subgraph == 0) return BucketAt(subgraph, inputs, captures, {});
  const absl::Span<const std::vector<bool>> noted = body_dims_[subgraph].Note(inputs, captures);
  const std::vector<std::vector<bool>> varied(noted.begin(), noted.end());  // body_dims_ may grow meanwhile
  const std::string reason = stats_.bucket_fallback_reason;
  absl::StatusOr<BucketFamily*> f = BucketAt(subgraph, inputs, captures, {}, /*quiet=*/true);
  if (!f.ok() || *f != nullptr) return f;
  stats_.bucket_fallback_reason = reason;
  // A body's bound (every dim bucketed) that does not plan, e.g. a hidden
  // size of 48 padded to 64 against a [144, 48] weight: again with only
  // the dims that have varied between its calls bucketed.
  return BucketAt(subgraph, inputs, captures, varied);
}

absl::StatusOr<BucketFamily*> Executor::BucketAt(int subgraph, absl::Span<const TensorView> inputs,
                                                 absl::Span<const TensorView> captures,
                                                 absl::Span<const std::vector<bool>> varied, bool quiet) {
  std::vector<std::vector<int64_t>> shapes, capture_shapes;
  std::string why;
  const bool bucketed = subgraph == 0
                            ? buckets_->BoundShapes(graph_, inputs, &shapes, &why)
                            : buckets_->BoundBodyShapes(inputs, captures, &shapes, &capture_shapes, &why, varied);
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
  backend_.SetBucketPlans(family.get());
  absl::StatusOr<std::unique_ptr<ExecutionPlan>> plan = BuildPlan(subgraph, bound, bound_captures);
  backend_.SetBucketPlans(nullptr);
  if (!plan.ok()) {
    // Remembered, so the bound is planned once: its shapes run exact plans.
    std::vector<std::string> dims;
    for (const std::vector<int64_t>& s : shapes) dims.push_back(ir::ShapeToString(ir::FromConcrete(s)));
    for (const std::vector<int64_t>& s : capture_shapes) dims.push_back(ir::ShapeToString(ir::FromConcrete(s)));
    family->why_not = absl::StrCat("the bucket bound of subgraph '", graph_.subgraphs[subgraph].name,
                                   "' (inputs and captures ", absl::StrJoin(dims, ", "),
                                   ") does not plan: ", plan.status().message());
    if (!quiet) {
      stats_.bucket_fallback_reason = family->why_not;
      Log(options_, LogLevel::kWarning, family->why_not);
    }
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
  // A shape of a bucket is prepared as its bound was (Backend::SetBucketPlans).
  backend_.SetBucketPlans(family);
  absl::StatusOr<std::unique_ptr<ExecutionPlan>> plan = BuildPlan(subgraph, inputs, captures);
  backend_.SetBucketPlans(nullptr);
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

}  // namespace grove::runtime
