// grove::Session: binding, the plan cache and the executor.
//
// reshape: the input signature (dtypes and dims of inputs and captures) keys
//   a PlanInstance; a miss builds an ExecutionPlan and allocates its arena once.
// setup:   arena pointers are bound when the instance is made; a call binds
//   only its input and capture pointers.
// invoke:  the steps run in order; steps whose shapes depend on data infer
//   and allocate when they run. Control-flow kernels call back into
//   RunSubgraph, which goes through the same cache for the body.
#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "absl/cleanup/cleanup.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "lib/runtime/execution_plan.h"
#include "lib/runtime/model_impl.h"

namespace grove {
namespace internal {
namespace {

using runtime::ExecutionPlan;
using runtime::PlanStep;
using runtime::PlanValue;
using runtime::ValueKind;
using runtime::ValueSig;

// Grows only; 64-byte aligned.
class AlignedBuffer {
 public:
  AlignedBuffer() = default;
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;
  ~AlignedBuffer() { std::free(data_); }
  absl::Status Reserve(uint64_t bytes) {
    if (bytes <= capacity_ && data_ != nullptr) return absl::OkStatus();
    const uint64_t cap = (std::max<uint64_t>(bytes, 64) + 63) / 64 * 64;
    void* p = std::aligned_alloc(64, cap);
    if (p == nullptr) {
      return absl::ResourceExhaustedError(absl::StrCat("cannot allocate ", bytes, " bytes of activations"));
    }
    std::free(data_);
    data_ = p;
    capacity_ = cap;
    return absl::OkStatus();
  }
  uint8_t* data() const { return static_cast<uint8_t*>(data_); }

 private:
  void* data_ = nullptr;
  uint64_t capacity_ = 0;
};

struct PlanInstance {
  std::unique_ptr<ExecutionPlan> plan;
  AlignedBuffer arena;
  std::vector<TensorView> views;    // one per plan value
  std::vector<TensorView*> ptrs;    // per step: its inputs, then its outputs
  std::vector<size_t> step_ptrs;    // start of each step's pointers in `ptrs`
  std::vector<std::unique_ptr<AlignedBuffer>> dynamic;  // per value, dynamic ones only
  uint64_t last_used = 0;
  int active = 0;
};

std::string DescribeDeclared(const ir::TensorDecl& d, const ir::Graph& g) {
  return absl::StrCat(DTypeName(d.dtype), ir::ShapeToString(d.shape, g.symbol_names()));
}

}  // namespace

class SessionImpl {
 public:
  SessionImpl(std::shared_ptr<const Model> model, const SessionOptions& options, Device device)
      : model_(std::move(model)), impl_(model_->impl()), graph_(impl_.graph()), options_(options),
        device_(device) {}

  std::shared_ptr<const Model> model_;
  const ModelImpl& impl_;
  const ir::Graph& graph_;
  SessionOptions options_;
  Device device_;
  SessionStats stats_;
  absl::flat_hash_map<std::vector<int64_t>, std::unique_ptr<PlanInstance>> plans_;
  std::vector<int64_t> key_;
  uint64_t tick_ = 0;

  absl::Status ValidateMainInputs(absl::Span<const TensorView> inputs, bool need_data) const;
  absl::StatusOr<PlanInstance*> GetPlan(int subgraph, absl::Span<const TensorView> inputs,
                                        absl::Span<const TensorView> captures);
  absl::Status Execute(PlanInstance& inst, absl::Span<const TensorView> inputs,
                       absl::Span<const TensorView> captures);
  absl::StatusOr<std::vector<TensorView>> RunMain(absl::Span<const TensorView> inputs);
};

namespace {

// What a kernel calls back into while step `step` of `inst` runs.
class StepHost : public ir::KernelContext::Host {
 public:
  StepHost(SessionImpl& session, PlanInstance& inst, int step) : session_(session), inst_(inst), step_(step) {}

  absl::StatusOr<TensorView*> AllocateOutput(int i, DType dtype, std::vector<int64_t> shape) override {
    const PlanStep& step = inst_.plan->steps()[step_];
    if (i < 0 || i >= static_cast<int>(step.outputs.size()) || step.outputs[i] < 0) {
      return absl::InternalError(absl::StrCat(step.node->Describe(), ": allocates output ", i, " it does not have"));
    }
    const int v = step.outputs[i];
    const PlanValue& pv = inst_.plan->values()[v];
    if (dtype == DType::kUnknown) dtype = pv.dtype;
    if (pv.dtype != DType::kUnknown && dtype != pv.dtype) {
      return absl::InvalidArgumentError(absl::StrCat(step.node->Describe(), ": output ", i, " is ", DTypeName(dtype),
                                                     " but the plan expects ", DTypeName(pv.dtype)));
    }
    absl::StatusOr<uint64_t> bytes = ir::CheckedByteSize(dtype, shape, step.node->Describe());
    if (!bytes.ok()) return bytes.status();
    if (absl::Status s = inst_.dynamic[v]->Reserve(*bytes); !s.ok()) return s;
    inst_.views[v] = TensorView(dtype, std::move(shape), static_cast<void*>(inst_.dynamic[v]->data()));
    return &inst_.views[v];
  }

  absl::StatusOr<std::vector<TensorView>> RunSubgraph(int subgraph, absl::Span<const TensorView> inputs) override {
    const ir::Graph& g = session_.graph_;
    if (subgraph <= 0 || subgraph >= static_cast<int>(g.subgraphs.size())) {
      return absl::InternalError(absl::StrCat("RunSubgraph: no subgraph ", subgraph));
    }
    const ir::Subgraph& sg = g.subgraphs[subgraph];
    std::vector<TensorView> captures;
    captures.reserve(sg.captures.size());
    for (int t : sg.captures) {
      const int v = inst_.plan->ValueOf(t);
      if (v < 0) return absl::InternalError(absl::StrCat("capture '", g.tensors[t].name, "' is not in scope"));
      captures.push_back(inst_.views[v]);
    }
    absl::StatusOr<PlanInstance*> child = session_.GetPlan(subgraph, inputs, captures);
    if (!child.ok()) return child.status();
    if (absl::Status s = session_.Execute(**child, inputs, captures); !s.ok()) return s;
    std::vector<TensorView> outs;
    outs.reserve((*child)->plan->output_values().size());
    for (int v : (*child)->plan->output_values()) outs.push_back((*child)->views[v]);
    return outs;
  }

 private:
  SessionImpl& session_;
  PlanInstance& inst_;
  int step_;
};

}  // namespace

absl::Status SessionImpl::ValidateMainInputs(absl::Span<const TensorView> inputs, bool need_data) const {
  const ir::Subgraph& main = graph_.subgraphs[0];
  if (inputs.size() != main.inputs.size()) {
    std::vector<std::string> names;
    for (int t : main.inputs) names.push_back(graph_.tensors[t].name);
    return absl::InvalidArgumentError(absl::StrCat("the model takes ", main.inputs.size(), " inputs (",
                                                   absl::StrJoin(names, ", "), "), given ", inputs.size()));
  }
  std::vector<int64_t> bound(graph_.symbols.size(), -1);
  std::vector<int> bound_by(graph_.symbols.size(), -1);
  for (size_t i = 0; i < inputs.size(); ++i) {
    const ir::TensorDecl& d = graph_.tensors[main.inputs[i]];
    const TensorView& in = inputs[i];
    const std::string who = absl::StrCat("input '", d.name, "' (", DescribeDeclared(d, graph_), ")");
    if (in.dtype != d.dtype) {
      return absl::InvalidArgumentError(absl::StrCat(who, ": given dtype ", DTypeName(in.dtype)));
    }
    if (in.shape.size() != d.shape.size()) {
      return absl::InvalidArgumentError(absl::StrCat(who, ": given rank ", in.shape.size(), ", wants rank ",
                                                     d.shape.size()));
    }
    for (size_t k = 0; k < d.shape.size(); ++k) {
      const int64_t got = in.shape[k];
      const ir::SymDim& want = d.shape[k];
      if (got < 0) return absl::InvalidArgumentError(absl::StrCat(who, ": dim ", k, " is negative (", got, ")"));
      if (want.is_const()) {
        if (got != want.value()) {
          return absl::InvalidArgumentError(absl::StrCat(who, ": dim ", k, " is ", got, ", wants ", want.value()));
        }
        continue;
      }
      const int s = want.symbol_index();
      if (s < 0) return absl::InternalError(absl::StrCat(who, ": dim ", k, " is not a symbol"));
      const ir::Symbol& sym = graph_.symbols[s];
      if (got < sym.min || got > sym.max) {
        return absl::InvalidArgumentError(absl::StrCat(who, ": dim ", k, " (", sym.name, ") is ", got,
                                                       ", outside ", sym.name, "'s range ", sym.min, "..", sym.max));
      }
      if (bound[s] >= 0 && bound[s] != got) {
        return absl::InvalidArgumentError(absl::StrCat(
            who, ": dim ", k, " (", sym.name, ") is ", got, " but input '",
            graph_.tensors[main.inputs[bound_by[s]]].name, "' gives ", sym.name, " = ", bound[s]));
      }
      bound[s] = got;
      bound_by[s] = static_cast<int>(i);
    }
    absl::StatusOr<uint64_t> bytes = ir::CheckedByteSize(in.dtype, in.shape, who);
    if (!bytes.ok()) return bytes.status();
    if (need_data && *bytes > 0 && in.data == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(who, ": data is null"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<PlanInstance*> SessionImpl::GetPlan(int subgraph, absl::Span<const TensorView> inputs,
                                                   absl::Span<const TensorView> captures) {
  key_.clear();
  key_.push_back(subgraph);
  for (absl::Span<const TensorView> group : {inputs, captures}) {
    for (const TensorView& v : group) {
      key_.push_back(static_cast<int64_t>(v.dtype));
      key_.push_back(static_cast<int64_t>(v.shape.size()));
      key_.insert(key_.end(), v.shape.begin(), v.shape.end());
    }
  }
  auto it = plans_.find(key_);
  if (it != plans_.end()) {
    ++stats_.plan_cache_hits;
    it->second->last_used = ++tick_;
    return it->second.get();
  }

  const ir::Subgraph& sg = graph_.subgraphs[subgraph];
  if (inputs.size() != sg.inputs.size()) {
    return absl::InvalidArgumentError(absl::StrCat("subgraph '", sg.name, "' takes ", sg.inputs.size(),
                                                   " inputs, given ", inputs.size()));
  }
  std::vector<ValueSig> in_sigs, cap_sigs;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const ir::TensorDecl& d = graph_.tensors[sg.inputs[i]];
    if (d.dtype != DType::kUnknown && d.dtype != inputs[i].dtype) {
      return absl::InvalidArgumentError(absl::StrCat("subgraph '", sg.name, "' input '", d.name, "' wants ",
                                                     DTypeName(d.dtype), ", given ", DTypeName(inputs[i].dtype)));
    }
    in_sigs.push_back(ValueSig{inputs[i].dtype, inputs[i].shape});
  }
  for (const TensorView& c : captures) cap_sigs.push_back(ValueSig{c.dtype, c.shape});
  absl::StatusOr<std::unique_ptr<ExecutionPlan>> plan =
      ExecutionPlan::Build(graph_, subgraph, in_sigs, cap_sigs, ir::Backend::kCpu);
  if (!plan.ok()) return plan.status();

  auto inst = std::make_unique<PlanInstance>();
  inst->plan = std::move(*plan);
  const ExecutionPlan& p = *inst->plan;
  if (absl::Status s = inst->arena.Reserve(p.arena_bytes()); !s.ok()) return s;
  inst->views.resize(p.values().size());
  inst->dynamic.resize(p.values().size());
  for (size_t v = 0; v < p.values().size(); ++v) {
    const PlanValue& pv = p.values()[v];
    TensorView& view = inst->views[v];
    view.dtype = pv.dtype;
    view.shape = pv.shape;
    switch (pv.kind) {
      case ValueKind::kArena: view.data = inst->arena.data() + pv.offset; break;
      case ValueKind::kWeight:
      case ValueKind::kFolded: view.data = const_cast<void*>(pv.data); break;
      case ValueKind::kDynamic: inst->dynamic[v] = std::make_unique<AlignedBuffer>(); break;
      case ValueKind::kInput:
      case ValueKind::kCapture: break;
    }
  }
  for (const PlanStep& step : p.steps()) {
    inst->step_ptrs.push_back(inst->ptrs.size());
    for (int v : step.inputs) inst->ptrs.push_back(v < 0 ? nullptr : &inst->views[v]);
    for (int v : step.outputs) inst->ptrs.push_back(v < 0 ? nullptr : &inst->views[v]);
  }
  inst->last_used = ++tick_;
  ++stats_.plans_created;
  PlanInstance* result = inst.get();
  plans_.emplace(key_, std::move(inst));

  // Least recently used eviction, never of a plan that is running (a Loop
  // body's caller is active while the body plans).
  if (options_.max_cached_plans > 0 && static_cast<int>(plans_.size()) > options_.max_cached_plans) {
    auto victim = plans_.end();
    for (auto i = plans_.begin(); i != plans_.end(); ++i) {
      if (i->second.get() == result || i->second->active > 0) continue;
      if (victim == plans_.end() || i->second->last_used < victim->second->last_used) victim = i;
    }
    if (victim != plans_.end()) {
      plans_.erase(victim);
      ++stats_.plans_evicted;
    }
  }
  return result;
}

absl::Status SessionImpl::Execute(PlanInstance& inst, absl::Span<const TensorView> inputs,
                                  absl::Span<const TensorView> captures) {
  ++inst.active;
  absl::Cleanup done = [&inst] { --inst.active; };
  const ExecutionPlan& p = *inst.plan;
  for (size_t i = 0; i < inputs.size(); ++i) inst.views[p.input_values()[i]].data = inputs[i].data;
  for (size_t i = 0; i < captures.size(); ++i) inst.views[p.capture_values()[i]].data = captures[i].data;

  const std::vector<PlanStep>& steps = p.steps();
  for (size_t s = 0; s < steps.size(); ++s) {
    const PlanStep& step = steps[s];
    TensorView* const* ptrs = inst.ptrs.data() + inst.step_ptrs[s];
    absl::Span<TensorView* const> in_ptrs(ptrs, step.inputs.size());
    absl::Span<TensorView* const> out_ptrs(ptrs + step.inputs.size(), step.outputs.size());
    StepHost host(*this, inst, static_cast<int>(s));

    if (step.infer_at_run) {
      // Shapes follow from the actual inputs (and their values, all known now).
      std::vector<ir::ShapeContext::Input> ins(step.inputs.size());
      for (size_t i = 0; i < step.inputs.size(); ++i) {
        if (in_ptrs[i] == nullptr) continue;
        ins[i] = ir::ShapeContext::Input{true, in_ptrs[i]->dtype, ir::FromConcrete(in_ptrs[i]->shape), in_ptrs[i]};
      }
      ir::ShapeContext sctx(*step.node, graph_, std::move(ins), nullptr);
      if (absl::Status st = step.node->def->infer(sctx); !st.ok()) return st;
      for (size_t i = 0; i < step.outputs.size(); ++i) {
        if (step.outputs[i] < 0) continue;
        const auto& o = sctx.outputs()[i];
        if (!ir::IsConcrete(o.shape)) {
          return absl::InvalidArgumentError(absl::StrCat(step.node->Describe(), ": cannot determine the shape of output ",
                                                         i, " from its inputs"));
        }
        absl::StatusOr<TensorView*> view = host.AllocateOutput(static_cast<int>(i), o.dtype, ir::ToConcrete(o.shape));
        if (!view.ok()) return view.status();
      }
    } else if (step.kernel_allocates) {
      for (int v : step.outputs) {
        if (v >= 0) inst.views[v] = TensorView();
      }
    }

    ir::KernelContext ctx(*step.node, in_ptrs, out_ptrs, &host);
    if (absl::Status st = step.kernel(ctx); !st.ok()) return st;
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
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<TensorView>> SessionImpl::RunMain(absl::Span<const TensorView> inputs) {
  if (absl::Status s = ValidateMainInputs(inputs, true); !s.ok()) return s;
  absl::StatusOr<PlanInstance*> inst = GetPlan(0, inputs, {});
  if (!inst.ok()) return inst.status();
  if (absl::Status s = Execute(**inst, inputs, {}); !s.ok()) return s;
  ++stats_.runs;
  std::vector<TensorView> outs;
  outs.reserve((*inst)->plan->output_values().size());
  for (int v : (*inst)->plan->output_values()) outs.push_back((*inst)->views[v]);
  return outs;
}

}  // namespace internal

Session::Session(std::unique_ptr<internal::SessionImpl> impl) : impl_(std::move(impl)) {}
Session::~Session() = default;

absl::StatusOr<std::unique_ptr<Session>> Session::Create(std::shared_ptr<const Model> model,
                                                         const SessionOptions& options) {
  if (model == nullptr) return absl::InvalidArgumentError("Session::Create: model is null");
  if (options.max_cached_plans < 0) {
    return absl::InvalidArgumentError("Session::Create: max_cached_plans must be >= 0");
  }
  Device device = options.device;
  switch (device) {
    case Device::kCpu: break;
    case Device::kAuto: device = Device::kCpu; break;  // the CUDA backend is not built in yet
    case Device::kCuda:
      return absl::FailedPreconditionError(
          "device 'cuda' requested, but this grove has no CUDA backend; use 'cpu' or 'auto'");
    default:
      return absl::InvalidArgumentError(absl::StrCat("unknown device ", static_cast<int>(device)));
  }
  return std::unique_ptr<Session>(
      new Session(std::make_unique<internal::SessionImpl>(std::move(model), options, device)));
}

Device Session::device() const { return impl_->device_; }
const Model& Session::model() const { return *impl_->model_; }
SessionStats Session::stats() const { return impl_->stats_; }

absl::StatusOr<std::vector<TensorView>> Session::Run(absl::Span<const TensorView> inputs) {
  return impl_->RunMain(inputs);
}

absl::Status Session::RunInto(absl::Span<const TensorView> inputs, absl::Span<const TensorView> outputs) {
  const std::vector<TensorInfo>& infos = impl_->impl_.outputs();
  if (outputs.size() != infos.size()) {
    return absl::InvalidArgumentError(absl::StrCat("the model has ", infos.size(), " outputs, given ",
                                                   outputs.size(), " buffers"));
  }
  absl::StatusOr<std::vector<TensorView>> results = impl_->RunMain(inputs);
  if (!results.ok()) return results.status();
  for (size_t i = 0; i < outputs.size(); ++i) {
    const TensorView& got = (*results)[i];
    const TensorView& into = outputs[i];
    if (into.dtype != got.dtype || into.shape != got.shape) {
      return absl::InvalidArgumentError(absl::StrCat(
          "output '", infos[i].name, "' is ", DTypeName(got.dtype), ir::ShapeToString(ir::FromConcrete(got.shape)),
          " but the caller's buffer is ", DTypeName(into.dtype), ir::ShapeToString(ir::FromConcrete(into.shape))));
    }
    if (got.byte_size() > 0) {
      if (into.data == nullptr) {
        return absl::InvalidArgumentError(absl::StrCat("output '", infos[i].name, "': buffer is null"));
      }
      std::memmove(into.data, got.data, got.byte_size());
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<MemoryReport> Session::Reshape(absl::Span<const std::vector<int64_t>> input_shapes,
                                              std::vector<std::vector<int64_t>>* out_output_shapes) {
  const ir::Graph& g = impl_->graph_;
  const ir::Subgraph& main = g.subgraphs[0];
  std::vector<TensorView> views;
  for (size_t i = 0; i < input_shapes.size() && i < main.inputs.size(); ++i) {
    views.emplace_back(g.tensors[main.inputs[i]].dtype, input_shapes[i], static_cast<void*>(nullptr));
  }
  if (input_shapes.size() != main.inputs.size()) views.resize(input_shapes.size());
  if (absl::Status s = impl_->ValidateMainInputs(views, false); !s.ok()) return s;
  absl::StatusOr<internal::PlanInstance*> inst = impl_->GetPlan(0, views, {});
  if (!inst.ok()) return inst.status();
  const runtime::ExecutionPlan& plan = *(*inst)->plan;
  if (out_output_shapes != nullptr) {
    out_output_shapes->clear();
    for (int v : plan.output_values()) out_output_shapes->push_back(plan.values()[v].shape);
  }
  return plan.Report(g);
}

absl::StatusOr<int> Session::InputIndex(absl::string_view name) const {
  const std::vector<TensorInfo>& inputs = impl_->impl_.inputs();
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].name == name) return static_cast<int>(i);
  }
  return absl::NotFoundError(absl::StrCat("the model has no input '", name, "'"));
}

}  // namespace grove
