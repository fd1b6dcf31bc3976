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
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>

#include "absl/cleanup/cleanup.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "lib/backends/cuda/device.h"
#include "lib/backends/cuda/exec_context.h"
#include "lib/ir/string_arena.h"
#include "lib/ir/value_type.h"
#include "lib/runtime/execution_plan.h"
#include "lib/runtime/model_impl.h"
#include "lib/runtime/session_internal.h"

namespace grove {
namespace internal {
namespace {

using runtime::ExecutionPlan;
using runtime::PlanStep;
using runtime::PlanValue;
using runtime::Storage;
using runtime::ValueSig;

// Grows only: host memory (64-byte aligned) or, given a device, device
// memory. Contents are not kept across a growth.
class Buffer {
 public:
  explicit Buffer(cuda::Device* device = nullptr) : device_(device) {}
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer() { Release(); }
  absl::Status Reserve(uint64_t bytes) {
    if (bytes <= capacity_ && data_ != nullptr) return absl::OkStatus();
    const uint64_t cap = (std::max<uint64_t>(bytes, 64) + 63) / 64 * 64;
    Release();
    if (device_ != nullptr) {
      absl::StatusOr<void*> p = device_->Allocate(cap);
      if (!p.ok()) return p.status();
      data_ = *p;
    } else {
      data_ = std::aligned_alloc(64, cap);
      if (data_ == nullptr) {
        return absl::ResourceExhaustedError(absl::StrCat("cannot allocate ", bytes, " bytes of activations"));
      }
    }
    capacity_ = cap;
    return absl::OkStatus();
  }
  uint8_t* data() const { return static_cast<uint8_t*>(data_); }
  void SetDevice(cuda::Device* device) {
    Release();
    device_ = device;
  }

 private:
  void Release() {
    if (data_ == nullptr) return;
    if (device_ != nullptr) {
      device_->Free(data_);
    } else {
      std::free(data_);
    }
    data_ = nullptr;
    capacity_ = 0;
  }
  cuda::Device* device_;
  void* data_ = nullptr;
  uint64_t capacity_ = 0;
};

struct PlanInstance {
  explicit PlanInstance(cuda::Device* device) : device(device), arena(device), folded(device) {}
  cuda::Device* device;  // nullptr on the CPU
  std::unique_ptr<ExecutionPlan> plan;
  Buffer arena;
  Buffer folded;                    // CUDA: the plan's folded values, uploaded
  std::vector<TensorView> views;    // one per plan value (device views on CUDA)
  std::vector<TensorView*> ptrs;    // per step: its inputs, then its outputs
  std::vector<size_t> step_ptrs;    // start of each step's pointers in `ptrs`
  std::vector<std::unique_ptr<Buffer>> dynamic;  // per value, dynamic ones only
  std::vector<std::unique_ptr<Value>> boxed;     // per value, sequences and optionals only
  // CUDA only, per value: host views of weights and folded values; staging
  // for host inputs; host copies for steps that fall back to the CPU; host
  // copies of outputs.
  std::vector<TensorView> host_views;
  std::vector<const TensorView*> host_ptrs;  // per step input, parallel to `ptrs`
  std::vector<std::unique_ptr<Buffer>> staging;
  std::vector<std::unique_ptr<Buffer>> host_copies;
  std::vector<TensorView> copy_views;  // views of host_copies
  uint64_t last_used = 0;
  uint64_t last_run = 0;  // the top-level run that used it last
  int active = 0;
};

// On CUDA, inputs of a step whose shapes are inferred when run are read back
// for its shape function when at most this big (shape tensors are tiny).
constexpr uint64_t kHostReadLimitBytes = 1 << 16;

std::string DescribeDeclared(const ir::TensorDecl& d, const ir::Graph& g) {
  if (ir::IsBoxed(d.dtype) && !d.has_shape) return std::string(DTypeName(d.dtype));
  return absl::StrCat(DTypeName(d.dtype), ir::ShapeToString(d.shape, g.symbol_names()));
}

// "the model takes 2 inputs (x, y), given 1".
absl::Status InputCountError(const ir::Graph& g, size_t given) {
  const ir::Subgraph& main = g.subgraphs[0];
  std::vector<std::string> names;
  for (int t : main.inputs) names.push_back(g.tensors[t].name);
  return absl::InvalidArgumentError(absl::StrCat("the model takes ", main.inputs.size(), " inputs (",
                                                 absl::StrJoin(names, ", "), "), given ", given));
}

// What a shape function sees of a value when it runs: a sequence or optional
// by the shape its tensors share.
ir::ShapeContext::Input InputOfView(const TensorView& view, const TensorView* value) {
  if (!ir::IsBoxed(view.dtype)) return ir::ShapeContext::Input{true, view.dtype, ir::FromConcrete(view.shape), value};
  std::vector<int64_t> shape;
  const bool rank_known = ir::SharedItemShape(ir::BoxedValue(view), &shape);
  return ir::ShapeContext::Input{true, view.dtype, ir::FromPartlyConcrete(shape), nullptr, rank_known};
}

// The empty value of a boxed dtype: an empty sequence, an absent optional.
Value EmptyBoxedValue(DType dtype) {
  if (ir::KindOf(dtype) == ValueKind::kSequence) return Value::Sequence(ir::ElemDType(dtype));
  return Value::None(ir::KindOf(dtype), ir::ElemDType(dtype));
}

// A produced dtype against the planned one; a planned sequence or optional
// whose tensors' dtype was left to the run takes any.
bool DTypeFits(DType got, DType planned) {
  if (planned == DType::kUnknown || got == planned) return true;
  // A Loop body input declared optional(T) takes the T its body returned.
  if (ir::IsOptionalDType(planned) && got == ir::UnwrapOptional(planned)) return true;
  return ir::IsBoxed(got) && planned == ir::BoxedDType(ir::KindOf(got), DType::kUnknown);
}

}  // namespace

class SessionImpl {
 public:
  SessionImpl(std::shared_ptr<const Model> model, const SessionOptions& options, Device device)
      : model_(std::move(model)), impl_(model_->impl()), graph_(impl_.graph()), options_(options),
        device_(device) {}
  ~SessionImpl() {
    plans_.clear();  // device buffers go back before the stream
    step_workspace_.SetDevice(nullptr);
    exec_.reset();
    if (cuda_ != nullptr && own_stream_) cuda_->DestroyStream(stream_);
  }
  // Binds the session to a CUDA device (real or emulated).
  absl::Status AttachCuda(std::shared_ptr<cuda::Device> device) {
    cuda_ = std::move(device);
    step_workspace_.SetDevice(cuda_.get());
    if (options_.cuda_stream != nullptr) {
      stream_ = options_.cuda_stream;
    } else {
      absl::StatusOr<cuda::Stream> s = cuda_->CreateStream();
      if (!s.ok()) return s.status();
      stream_ = *s;
      own_stream_ = true;
    }
    exec_ = std::make_unique<cuda::ExecContext>(*cuda_, stream_);
    exec_->set_gemm_math(static_cast<cuda::GemmDesc::Math>(options_.cuda_gemm_math));
    absl::StatusOr<const uint8_t*> weights = impl_.DeviceBytes(cuda_);
    if (!weights.ok()) return weights.status();
    device_weights_ = *weights;
    return absl::OkStatus();
  }

  std::shared_ptr<const Model> model_;
  const ModelImpl& impl_;
  const ir::Graph& graph_;
  SessionOptions options_;
  Device device_;
  SessionStats stats_;
  absl::flat_hash_map<std::vector<int64_t>, std::unique_ptr<PlanInstance>> plans_;
  std::vector<int64_t> key_;
  uint64_t tick_ = 0;
  uint64_t run_serial_ = 0;  // top-level runs started (Run, RunInto, Reshape)
  // CUDA
  std::shared_ptr<cuda::Device> cuda_;
  cuda::Stream stream_ = nullptr;
  bool own_stream_ = false;
  std::unique_ptr<cuda::ExecContext> exec_;
  const uint8_t* device_weights_ = nullptr;
  // Workspace of steps prepared when they run (device memory on CUDA).
  Buffer step_workspace_;
  // The bytes of strings kernels make; reset when a run starts, so a run's
  // string outputs stay valid until the next, as its other outputs do.
  ir::StringArena strings_;
  // String inputs of the current run, their bytes copied into strings_ so
  // that outputs referring to them outlive the caller's buffers.
  std::vector<TensorView> string_inputs_;
  std::vector<std::vector<StringRef>> string_input_refs_;
  // Set while a public call (Run, RunValues, RunInto, Reshape) is inside the
  // session: a second thread entering meanwhile is refused (see EntryGuard).
  std::atomic<bool> busy_{false};
  // The current run's stop conditions: its deadline and the cancellation
  // token. `interruptible_` is false when the session has neither, so the
  // per-step check is one branch.
  bool interruptible_ = false;
  bool has_deadline_ = false;
  // Subgraph runs of the current run, against SessionOptions::max_body_runs.
  int64_t body_runs_ = 0;
  std::chrono::steady_clock::time_point deadline_;

  // Arms the deadline (SessionOptions::run_deadline_ms) for a run starting now.
  void StartRunClock();
  // CANCELLED or DEADLINE_EXCEEDED when the run must stop before `next`
  // (the step or body about to run); called only when interruptible_.
  absl::Status CheckInterrupt(const ir::Node& next) const;

  // A step whose output shapes are known only when it runs: its shape
  // function on these inputs, then each output allocated through `host`.
  absl::Status InferAndAllocate(const PlanStep& step, std::vector<ir::ShapeContext::Input> ins,
                                ir::KernelContext::Host& host);
  absl::Status SetUpCudaInstance(PlanInstance& inst);
  absl::Status BindCudaValue(PlanInstance& inst, int v, const TensorView& given);
  absl::Status RunFallbackStep(PlanInstance& inst, int s, absl::Span<TensorView* const> in_ptrs,
                               absl::Span<TensorView* const> out_ptrs);
  absl::StatusOr<const TensorView*> HostCopy(PlanInstance& inst, int v, const TensorView& device_view);

  absl::Status ValidateMainInputs(absl::Span<const TensorView> inputs, bool need_data) const;
  // `inputs`, or copies of them whose strings live in strings_.
  absl::StatusOr<absl::Span<const TensorView>> InternStringInputs(absl::Span<const TensorView> inputs);
  absl::StatusOr<PlanInstance*> GetPlan(int subgraph, absl::Span<const TensorView> inputs,
                                        absl::Span<const TensorView> captures);
  absl::Status Execute(PlanInstance& inst, absl::Span<const TensorView> inputs,
                       absl::Span<const TensorView> captures);
  // `into` (RunInto's buffers, CUDA): outputs that live in the arena are
  // written straight into the caller's device buffers; `aliased` says which.
  absl::StatusOr<std::vector<TensorView>> RunMain(absl::Span<const TensorView> inputs, bool device_views = false,
                                                  absl::Span<const TensorView> into = {},
                                                  std::vector<bool>* aliased = nullptr);
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
    if (!DTypeFits(dtype, pv.dtype)) {
      return absl::InvalidArgumentError(absl::StrCat(step.node->Describe(), ": output ", i, " is ", DTypeName(dtype),
                                                     " but the plan expects ", DTypeName(pv.dtype)));
    }
    if (ir::IsBoxed(dtype)) {
      // A host grove::Value, emptied for the kernel to fill.
      if (inst_.boxed[v] == nullptr) inst_.boxed[v] = std::make_unique<Value>();
      *inst_.boxed[v] = EmptyBoxedValue(dtype);
      inst_.views[v] = TensorView(dtype, {}, static_cast<void*>(inst_.boxed[v].get()));
      return &inst_.views[v];
    }
    absl::StatusOr<uint64_t> bytes = ir::CheckedByteSize(dtype, shape, step.node->Describe());
    if (!bytes.ok()) return bytes.status();
    if (absl::Status s = inst_.dynamic[v]->Reserve(*bytes); !s.ok()) return s;
    inst_.views[v] = TensorView(dtype, std::move(shape), static_cast<void*>(inst_.dynamic[v]->data()));
    return &inst_.views[v];
  }

  void* backend_context() override { return session_.exec_.get(); }
  ir::StringArena* strings() override { return &session_.strings_; }
  absl::StatusOr<void*> Workspace(uint64_t bytes) override {
    if (absl::Status s = session_.step_workspace_.Reserve(bytes); !s.ok()) return s;
    return static_cast<void*>(session_.step_workspace_.data());
  }

  absl::StatusOr<std::vector<TensorView>> RunSubgraph(int subgraph, absl::Span<const TensorView> inputs) override {
    const ir::Graph& g = session_.graph_;
    if (subgraph <= 0 || subgraph >= static_cast<int>(g.subgraphs.size())) {
      return absl::InternalError(absl::StrCat("RunSubgraph: no subgraph ", subgraph));
    }
    // Every Loop, Scan and If body call passes here: a loop that runs for
    // hours (nested ones included) stops at the deadline, even when its
    // body has no steps.
    if (session_.interruptible_) {
      if (absl::Status s = session_.CheckInterrupt(*inst_.plan->steps()[step_].node); !s.ok()) return s;
    }
    if (++session_.body_runs_ > session_.options_.max_body_runs && session_.options_.max_body_runs > 0) {
      return absl::ResourceExhaustedError(absl::StrCat(
          inst_.plan->steps()[step_].node->Describe(), ": the run has made ", session_.options_.max_body_runs,
          " subgraph runs (If branches, Loop and Scan iterations), the limit of SessionOptions::max_body_runs"));
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

// What a CPU kernel calls back into when it runs inside a CUDA plan (an op
// with no CUDA kernel): outputs it allocates and subgraph results are host
// memory; the executor copies outputs to the device afterwards.
class FallbackHost : public ir::KernelContext::Host {
 public:
  FallbackHost(SessionImpl& session, PlanInstance& inst, int step, std::vector<TensorView>& host_outs,
               std::vector<TensorView*>& host_out_ptrs)
      : session_(session), inst_(inst), step_(step), device_host_(session, inst, step), host_outs_(host_outs),
        host_out_ptrs_(host_out_ptrs) {}

  absl::StatusOr<TensorView*> AllocateOutput(int i, DType dtype, std::vector<int64_t> shape) override {
    const PlanStep& step = inst_.plan->steps()[step_];
    if (i < 0 || i >= static_cast<int>(step.outputs.size()) || step.outputs[i] < 0) {
      return absl::InternalError(absl::StrCat(step.node->Describe(), ": allocates output ", i, " it does not have"));
    }
    const int v = step.outputs[i];
    const PlanValue& pv = inst_.plan->values()[v];
    if (dtype == DType::kUnknown) dtype = pv.dtype;
    if (ir::IsBoxed(dtype)) {
      // Sequences and optionals live on the host on every backend.
      absl::StatusOr<TensorView*> view = device_host_.AllocateOutput(i, dtype, {});
      if (!view.ok()) return view.status();
      host_outs_[i] = **view;
      host_out_ptrs_[i] = &host_outs_[i];
      return host_out_ptrs_[i];
    }
    absl::StatusOr<uint64_t> bytes = ir::CheckedByteSize(dtype, shape, step.node->Describe());
    if (!bytes.ok()) return bytes.status();
    if (absl::Status s = inst_.host_copies[v]->Reserve(*bytes); !s.ok()) return s;
    host_outs_[i] = TensorView(dtype, std::move(shape), static_cast<void*>(inst_.host_copies[v]->data()));
    host_out_ptrs_[i] = &host_outs_[i];
    return host_out_ptrs_[i];
  }

  ir::StringArena* strings() override { return &session_.strings_; }

  absl::StatusOr<std::vector<TensorView>> RunSubgraph(int subgraph, absl::Span<const TensorView> inputs) override {
    absl::StatusOr<std::vector<TensorView>> outs = device_host_.RunSubgraph(subgraph, inputs);
    if (!outs.ok()) return outs;
    // The CPU kernel reads the results on the host.
    copies_.resize(std::max(copies_.size(), outs->size()));
    for (size_t i = 0; i < outs->size(); ++i) {
      TensorView& o = (*outs)[i];
      if (ir::IsBoxed(o.dtype)) continue;  // on the host already
      if (copies_[i] == nullptr) copies_[i] = std::make_unique<Buffer>();
      if (absl::Status s = copies_[i]->Reserve(o.byte_size()); !s.ok()) return s;
      if (absl::Status s = session_.cuda_->CopyAsync(copies_[i]->data(), o.data, o.byte_size(), session_.stream_);
          !s.ok()) {
        return s;
      }
      session_.stats_.bytes_device_to_host += static_cast<int64_t>(o.byte_size());
      o.data = copies_[i]->data();
    }
    if (absl::Status s = session_.cuda_->Synchronize(session_.stream_); !s.ok()) return s;
    return outs;
  }

 private:
  SessionImpl& session_;
  PlanInstance& inst_;
  int step_;
  StepHost device_host_;
  std::vector<TensorView>& host_outs_;
  std::vector<TensorView*>& host_out_ptrs_;
  std::vector<std::unique_ptr<Buffer>> copies_;
};

}  // namespace

absl::Status SessionImpl::ValidateMainInputs(absl::Span<const TensorView> inputs, bool need_data) const {
  const ir::Subgraph& main = graph_.subgraphs[0];
  if (inputs.size() != main.inputs.size()) return InputCountError(graph_, inputs.size());
  std::vector<int64_t> bound(graph_.symbols.size(), -1);
  std::vector<int> bound_by(graph_.symbols.size(), -1);
  for (size_t i = 0; i < inputs.size(); ++i) {
    const ir::TensorDecl& d = graph_.tensors[main.inputs[i]];
    const TensorView& in = inputs[i];
    const std::string who = absl::StrCat("input '", d.name, "' (", DescribeDeclared(d, graph_), ")");
    if (in.dtype != d.dtype) {
      return absl::InvalidArgumentError(absl::StrCat(who, ": given dtype ", DTypeName(in.dtype)));
    }
    if (ir::IsBoxed(d.dtype)) {
      if (need_data && in.data == nullptr) return absl::InvalidArgumentError(absl::StrCat(who, ": value is null"));
      continue;  // RunValues checked its tensors
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
  std::vector<int64_t> items;
  for (absl::Span<const TensorView> group : {inputs, captures}) {
    for (const TensorView& v : group) {
      key_.push_back(static_cast<int64_t>(v.dtype));
      if (ir::IsBoxed(v.dtype)) {
        // By the shape its tensors share; -1 when they share no rank.
        const bool rank_known = ir::SharedItemShape(ir::BoxedValue(v), &items);
        key_.push_back(rank_known ? static_cast<int64_t>(items.size()) : -1);
        key_.insert(key_.end(), items.begin(), items.end());
        continue;
      }
      key_.push_back(static_cast<int64_t>(v.shape.size()));
      key_.insert(key_.end(), v.shape.begin(), v.shape.end());
    }
  }
  auto it = plans_.find(key_);
  if (it != plans_.end()) {
    ++stats_.plan_cache_hits;
    it->second->last_used = ++tick_;
    it->second->last_run = run_serial_;
    return it->second.get();
  }

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
      ExecutionPlan::Build(graph_, subgraph, in_sigs, cap_sigs, cuda_ ? ir::Backend::kCuda : ir::Backend::kCpu);
  if (!plan.ok()) return plan.status();
  if (cuda_ != nullptr && options_.strict_device) {
    std::vector<std::string> ops;
    for (const PlanStep& step : (*plan)->steps()) {
      if (step.host_fallback) ops.push_back(step.node->Describe());
    }
    if (!ops.empty()) {
      return absl::FailedPreconditionError(absl::StrCat("strict_device: no CUDA kernel for ",
                                                        absl::StrJoin(ops, "; ")));
    }
  }

  auto inst = std::make_unique<PlanInstance>(cuda_.get());
  inst->plan = std::move(*plan);
  const ExecutionPlan& p = *inst->plan;
  if (absl::Status s = inst->arena.Reserve(p.arena_bytes()); !s.ok()) return s;
  inst->views.resize(p.values().size());
  inst->dynamic.resize(p.values().size());
  inst->boxed.resize(p.values().size());
  for (size_t v = 0; v < p.values().size(); ++v) {
    const PlanValue& pv = p.values()[v];
    TensorView& view = inst->views[v];
    view.dtype = pv.dtype;
    view.shape = pv.shape;
    switch (pv.kind) {
      case Storage::kArena: view.data = inst->arena.data() + pv.offset; break;
      case Storage::kWeight:
      case Storage::kFolded: view.data = const_cast<void*>(pv.data); break;
      case Storage::kDynamic: inst->dynamic[v] = std::make_unique<Buffer>(cuda_.get()); break;
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
  if (cuda_ != nullptr) {
    if (absl::Status s = SetUpCudaInstance(*inst); !s.ok()) return s;
  }
  inst->last_used = ++tick_;
  inst->last_run = run_serial_;
  ++stats_.plans_created;
  PlanInstance* result = inst.get();
  plans_.emplace(key_, std::move(inst));

  // Eviction, never of a plan that is running (a Loop body's caller is
  // active while the body plans): the least recently used plan of an earlier
  // run; when every plan served this run (a loop whose carried shapes grow
  // past the limit), the most recently used one, so that one plan is lost
  // per run instead of all of them, as least-recently-used order would do
  // on a cycle longer than the cache.
  if (options_.max_cached_plans > 0 && static_cast<int>(plans_.size()) > options_.max_cached_plans) {
    auto victim = plans_.end(), newest = plans_.end();
    for (auto i = plans_.begin(); i != plans_.end(); ++i) {
      const PlanInstance& p = *i->second;
      if (i->second.get() == result || p.active > 0) continue;
      if (p.last_run != run_serial_) {
        if (victim == plans_.end() || p.last_used < victim->second->last_used) victim = i;
      } else if (newest == plans_.end() || p.last_used > newest->second->last_used) {
        newest = i;
      }
    }
    if (victim == plans_.end()) victim = newest;
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
  if (cuda_ != nullptr) {
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (absl::Status s = BindCudaValue(inst, p.input_values()[i], inputs[i]); !s.ok()) return s;
    }
    for (size_t i = 0; i < captures.size(); ++i) {
      if (absl::Status s = BindCudaValue(inst, p.capture_values()[i], captures[i]); !s.ok()) return s;
    }
  } else {
    for (size_t i = 0; i < inputs.size(); ++i) inst.views[p.input_values()[i]].data = inputs[i].data;
    for (size_t i = 0; i < captures.size(); ++i) inst.views[p.capture_values()[i]].data = captures[i].data;
  }

  const std::vector<PlanStep>& steps = p.steps();
  for (size_t s = 0; s < steps.size(); ++s) {
    const PlanStep& step = steps[s];
    if (step.outputs_empty) continue;
    if (interruptible_) {
      if (absl::Status st = CheckInterrupt(*step.node); !st.ok()) return st;
    }
    TensorView* const* ptrs = inst.ptrs.data() + inst.step_ptrs[s];
    absl::Span<TensorView* const> in_ptrs(ptrs, step.inputs.size());
    absl::Span<TensorView* const> out_ptrs(ptrs + step.inputs.size(), step.outputs.size());
    StepHost host(*this, inst, static_cast<int>(s));
    if (cuda_ != nullptr && step.host_fallback) {
      if (absl::Status st = RunFallbackStep(inst, static_cast<int>(s), in_ptrs, out_ptrs); !st.ok()) return st;
      ++stats_.kernels_run;
      ++stats_.cpu_fallback_steps;
      continue;
    }

    if (step.infer_at_run) {
      // Shapes follow from the actual inputs (and their values, all known now;
      // on CUDA small ones are read back for the shape function).
      std::vector<ir::ShapeContext::Input> ins(step.inputs.size());
      for (size_t i = 0; i < step.inputs.size(); ++i) {
        if (in_ptrs[i] == nullptr) continue;
        const TensorView* value = in_ptrs[i];
        if (cuda_ != nullptr && !ir::IsBoxed(in_ptrs[i]->dtype)) {
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

    if (exec_ != nullptr) {
      exec_->SetHostInputs(absl::MakeConstSpan(inst.host_ptrs.data() + inst.step_ptrs[s], step.inputs.size()));
    }
    ir::KernelContext ctx(*step.node, in_ptrs, out_ptrs, &host);
    if (absl::Status st = ir::RunKernel(cuda_ ? ir::Backend::kCuda : ir::Backend::kCpu, ctx); !st.ok()) return st;
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

absl::StatusOr<absl::Span<const TensorView>> SessionImpl::InternStringInputs(absl::Span<const TensorView> inputs) {
  bool any = false;
  for (const TensorView& in : inputs) any |= in.dtype == DType::kString;
  if (!any) return inputs;
  string_inputs_.assign(inputs.begin(), inputs.end());
  string_input_refs_.resize(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    TensorView& in = string_inputs_[i];
    if (in.dtype != DType::kString) continue;
    const std::string who = absl::StrCat("input '", graph_.tensors[graph_.subgraphs[0].inputs[i]].name, "'");
    if (cuda_ != nullptr && cuda_->IsDevicePointer(in.data)) {
      return absl::InvalidArgumentError(
          absl::StrCat(who, ": a string tensor must be in host memory (its bytes are host memory)"));
    }
    const int64_t n = in.num_elements();
    const StringRef* given = in.as<const StringRef>();
    std::vector<StringRef>& refs = string_input_refs_[i];
    refs.resize(static_cast<size_t>(n));
    for (int64_t k = 0; k < n; ++k) {
      if (given[k].size > 0 && given[k].data == nullptr) {
        return absl::InvalidArgumentError(
            absl::StrCat(who, ": element ", k, " has ", given[k].size, " bytes but no data"));
      }
      absl::StatusOr<StringRef> copy = strings_.Store(given[k].view());
      if (!copy.ok()) return copy.status();
      refs[k] = *copy;
    }
    in.data = refs.data();
  }
  return absl::Span<const TensorView>(string_inputs_);
}

absl::StatusOr<std::vector<TensorView>> SessionImpl::RunMain(absl::Span<const TensorView> inputs,
                                                             bool device_views, absl::Span<const TensorView> into,
                                                             std::vector<bool>* aliased) {
  StartRunClock();
  if (options_.cancellation != nullptr && options_.cancellation->IsCancelled()) {
    return absl::CancelledError("the run was cancelled before it started (CancellationToken::Reset lets runs go on)");
  }
  if (absl::Status s = ValidateMainInputs(inputs, true); !s.ok()) return s;
  ++run_serial_;
  strings_.Reset();
  absl::StatusOr<absl::Span<const TensorView>> bound = InternStringInputs(inputs);
  if (!bound.ok()) return bound.status();
  inputs = *bound;
  absl::StatusOr<PlanInstance*> inst = GetPlan(0, inputs, {});
  if (!inst.ok()) return inst.status();
  // Arena outputs go straight to the caller's device buffers (no copy after).
  const std::vector<int>& out_values = (*inst)->plan->output_values();
  std::vector<std::pair<int, void*>> restore;
  if (aliased != nullptr) aliased->assign(out_values.size(), false);
  if (cuda_ != nullptr && into.size() == out_values.size()) {
    for (size_t i = 0; i < out_values.size(); ++i) {
      const int v = out_values[i];
      const PlanValue& pv = (*inst)->plan->values()[v];
      if (pv.kind != Storage::kArena || !pv.shape_known || pv.bytes == 0) continue;
      if (std::count(out_values.begin(), out_values.end(), v) != 1) continue;
      if (into[i].dtype != pv.dtype || into[i].shape != pv.shape || !cuda_->IsDevicePointer(into[i].data)) continue;
      restore.emplace_back(v, (*inst)->views[v].data);
      (*inst)->views[v].data = into[i].data;
      (*aliased)[i] = true;
    }
  }
  absl::Status run = Execute(**inst, inputs, {});
  for (const auto& [v, data] : restore) (*inst)->views[v].data = data;
  if (!run.ok()) return run;
  ++stats_.runs;
  std::vector<TensorView> outs;
  outs.reserve((*inst)->plan->output_values().size());
  for (int v : (*inst)->plan->output_values()) {
    if (aliased != nullptr && (*aliased)[outs.size()]) {
      outs.push_back(into[outs.size()]);
    } else if (cuda_ != nullptr && !options_.outputs_on_device && !device_views) {
      absl::StatusOr<const TensorView*> h = HostCopy(**inst, v, (*inst)->views[v]);
      if (!h.ok()) return h.status();
      outs.push_back(**h);
    } else {
      outs.push_back((*inst)->views[v]);
    }
  }
  if (cuda_ != nullptr) {
    if (absl::Status s = cuda_->Synchronize(stream_); !s.ok()) return s;
  }
  return outs;
}


void SessionImpl::StartRunClock() {
  body_runs_ = 0;
  has_deadline_ = options_.run_deadline_ms > 0;
  interruptible_ = has_deadline_ || options_.cancellation != nullptr;
  if (has_deadline_) {
    // At most ~35 years ahead: steady_clock's nanoseconds must not overflow.
    const int64_t ms = std::min<int64_t>(options_.run_deadline_ms, int64_t{1} << 40);
    deadline_ = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  }
}

absl::Status SessionImpl::CheckInterrupt(const ir::Node& next) const {
  if (options_.cancellation != nullptr && options_.cancellation->IsCancelled()) {
    return absl::CancelledError(absl::StrCat("the run was cancelled (stopped before ", next.Describe(), ")"));
  }
  if (has_deadline_ && std::chrono::steady_clock::now() >= deadline_) {
    return absl::DeadlineExceededError(absl::StrCat("the run passed its deadline of ", options_.run_deadline_ms,
                                                    " ms (stopped before ", next.Describe(), ")"));
  }
  return absl::OkStatus();
}

absl::Status SessionImpl::InferAndAllocate(const PlanStep& step, std::vector<ir::ShapeContext::Input> ins,
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

absl::Status SessionImpl::SetUpCudaInstance(PlanInstance& inst) {
  const ExecutionPlan& p = *inst.plan;
  const size_t n = p.values().size();
  inst.host_views.assign(n, TensorView());
  inst.copy_views.assign(n, TensorView());
  inst.staging.resize(n);
  inst.host_copies.resize(n);
  for (size_t v = 0; v < n; ++v) {
    inst.staging[v] = std::make_unique<Buffer>(cuda_.get());
    inst.host_copies[v] = std::make_unique<Buffer>();
  }
  // Weights point into the model's bytes, uploaded once per device; folded
  // values (and any weight outside those bytes) are uploaded per plan.
  const uint8_t* host_base = impl_.host_bytes();
  const size_t host_size = impl_.host_byte_size();
  auto in_model = [&](const void* data) {
    const uint8_t* d = static_cast<const uint8_t*>(data);
    return d >= host_base && d < host_base + host_size;
  };
  uint64_t folded_bytes = 0;
  std::vector<uint64_t> folded_offset(n, 0);
  for (size_t v = 0; v < n; ++v) {
    const PlanValue& pv = p.values()[v];
    if (pv.kind != Storage::kWeight && pv.kind != Storage::kFolded) continue;
    inst.host_views[v] = TensorView(pv.dtype, pv.shape, pv.data);
    if (pv.kind == Storage::kWeight && in_model(pv.data)) {
      inst.views[v].data = const_cast<uint8_t*>(device_weights_ + (static_cast<const uint8_t*>(pv.data) - host_base));
      continue;
    }
    folded_offset[v] = folded_bytes;
    folded_bytes += (pv.bytes + 63) / 64 * 64;
  }
  if (folded_bytes > 0) {
    if (absl::Status s = inst.folded.Reserve(folded_bytes); !s.ok()) return s;
    for (size_t v = 0; v < n; ++v) {
      const PlanValue& pv = p.values()[v];
      const bool upload = pv.kind == Storage::kFolded || (pv.kind == Storage::kWeight && !in_model(pv.data));
      if (!upload) continue;
      inst.views[v].data = inst.folded.data() + folded_offset[v];
      if (absl::Status s = cuda_->CopyAsync(inst.views[v].data, pv.data, pv.bytes, stream_); !s.ok()) return s;
      stats_.bytes_host_to_device += static_cast<int64_t>(pv.bytes);
    }
  }
  inst.host_ptrs.assign(inst.ptrs.size(), nullptr);
  for (size_t s = 0; s < p.steps().size(); ++s) {
    const PlanStep& step = p.steps()[s];
    for (size_t i = 0; i < step.inputs.size(); ++i) {
      const int v = step.inputs[i];
      if (v >= 0 && inst.host_views[v].data != nullptr) inst.host_ptrs[inst.step_ptrs[s] + i] = &inst.host_views[v];
    }
  }
  return cuda_->Synchronize(stream_);
}

absl::Status SessionImpl::BindCudaValue(PlanInstance& inst, int v, const TensorView& given) {
  const uint64_t bytes = given.byte_size();
  if (bytes == 0 || cuda_->IsDevicePointer(given.data)) {
    inst.views[v].data = given.data;  // device memory: used in place
    return absl::OkStatus();
  }
  if (absl::Status s = inst.staging[v]->Reserve(bytes); !s.ok()) return s;
  if (absl::Status s = cuda_->CopyAsync(inst.staging[v]->data(), given.data, bytes, stream_); !s.ok()) return s;
  stats_.bytes_host_to_device += static_cast<int64_t>(bytes);
  inst.views[v].data = inst.staging[v]->data();
  return absl::OkStatus();
}

absl::StatusOr<const TensorView*> SessionImpl::HostCopy(PlanInstance& inst, int v, const TensorView& device_view) {
  if (inst.host_views[v].data != nullptr) return &inst.host_views[v];
  if (ir::IsBoxed(device_view.dtype)) return &device_view;  // a host grove::Value on every backend
  const uint64_t bytes = device_view.byte_size();
  if (absl::Status s = inst.host_copies[v]->Reserve(bytes); !s.ok()) return s;
  if (absl::Status s = cuda_->CopyAsync(inst.host_copies[v]->data(), device_view.data, bytes, stream_); !s.ok()) {
    return s;
  }
  if (absl::Status s = cuda_->Synchronize(stream_); !s.ok()) return s;
  stats_.bytes_device_to_host += static_cast<int64_t>(bytes);
  inst.copy_views[v] = TensorView(device_view.dtype, device_view.shape, static_cast<void*>(inst.host_copies[v]->data()));
  return &inst.copy_views[v];
}

absl::Status SessionImpl::RunFallbackStep(PlanInstance& inst, int s, absl::Span<TensorView* const> in_ptrs,
                                          absl::Span<TensorView* const> out_ptrs) {
  const PlanStep& step = inst.plan->steps()[s];
  // Inputs to the host (values the plan knows are there already).
  std::vector<TensorView> host_ins(step.inputs.size());
  std::vector<TensorView*> host_in_ptrs(step.inputs.size(), nullptr);
  for (size_t i = 0; i < step.inputs.size(); ++i) {
    if (in_ptrs[i] == nullptr) continue;
    absl::StatusOr<const TensorView*> h = HostCopy(inst, step.inputs[i], *in_ptrs[i]);
    if (!h.ok()) return h.status();
    host_ins[i] = **h;
    host_in_ptrs[i] = &host_ins[i];
  }
  // Outputs on the host: planned ones now, the rest when the kernel or the
  // shape function allocates them.
  std::vector<TensorView> host_outs(step.outputs.size());
  std::vector<TensorView*> host_out_ptrs(step.outputs.size(), nullptr);
  FallbackHost host(*this, inst, s, host_outs, host_out_ptrs);
  if (step.infer_at_run) {
    std::vector<ir::ShapeContext::Input> ins(step.inputs.size());
    for (size_t i = 0; i < step.inputs.size(); ++i) {
      if (host_in_ptrs[i] == nullptr) continue;
      ins[i] = InputOfView(host_ins[i], host_in_ptrs[i]);
    }
    if (absl::Status st = InferAndAllocate(step, std::move(ins), host); !st.ok()) return st;
  } else if (step.kernel_allocates) {
    // Empty until the kernel allocates them; has_output() is true for each.
    for (size_t i = 0; i < step.outputs.size(); ++i) {
      if (step.outputs[i] >= 0) host_out_ptrs[i] = &host_outs[i];
    }
  } else {
    for (size_t i = 0; i < step.outputs.size(); ++i) {
      if (out_ptrs[i] == nullptr) continue;
      const int v = step.outputs[i];
      if (ir::IsBoxed(out_ptrs[i]->dtype)) {
        host_outs[i] = *out_ptrs[i];
        host_out_ptrs[i] = &host_outs[i];
        continue;
      }
      if (absl::Status st = inst.host_copies[v]->Reserve(out_ptrs[i]->byte_size()); !st.ok()) return st;
      host_outs[i] = TensorView(out_ptrs[i]->dtype, out_ptrs[i]->shape, static_cast<void*>(inst.host_copies[v]->data()));
      host_out_ptrs[i] = &host_outs[i];
    }
  }
  ir::KernelContext ctx(*step.node, host_in_ptrs, host_out_ptrs, &host);
  if (absl::Status st = ir::RunKernel(ir::Backend::kCpu, ctx); !st.ok()) return st;
  // Outputs back to the device.
  for (size_t i = 0; i < step.outputs.size(); ++i) {
    const int v = step.outputs[i];
    if (v < 0) continue;
    if (host_out_ptrs[i] == nullptr || host_outs[i].dtype == DType::kUnknown) {
      return absl::InternalError(absl::StrCat(step.node->Describe(), ": output ", i, " was not produced"));
    }
    const TensorView& h = host_outs[i];
    const PlanValue& pv = inst.plan->values()[v];
    if (ir::IsBoxed(h.dtype)) continue;  // the kernel filled the host value itself
    if (pv.kind == Storage::kDynamic) {
      if (absl::Status st = inst.dynamic[v]->Reserve(h.byte_size()); !st.ok()) return st;
      inst.views[v] = TensorView(h.dtype, h.shape, static_cast<void*>(inst.dynamic[v]->data()));
    }
    if (pv.shape_known && h.shape != pv.shape) {
      return absl::InvalidArgumentError(absl::StrCat(step.node->Describe(), ": output ", i, " has shape ",
                                                     ir::ShapeToString(ir::FromConcrete(h.shape)),
                                                     " but the plan expects ",
                                                     ir::ShapeToString(ir::FromConcrete(pv.shape))));
    }
    if (absl::Status st = cuda_->CopyAsync(inst.views[v].data, h.data, h.byte_size(), stream_); !st.ok()) return st;
    stats_.bytes_host_to_device += static_cast<int64_t>(h.byte_size());
  }
  // The host buffers are reused by the next fallback step.
  return cuda_->Synchronize(stream_);
}

}  // namespace internal

Session::Session(std::unique_ptr<internal::SessionImpl> impl) : impl_(std::move(impl)) {}
Session::~Session() = default;

absl::StatusOr<GemmMath> ParseGemmMath(absl::string_view name) {
  if (name == "f32") return GemmMath::kF32;
  if (name == "tf32") return GemmMath::kTF32;
  if (name == "bf16") return GemmMath::kBF16;
  if (name == "f16") return GemmMath::kF16;
  return absl::InvalidArgumentError(absl::StrCat("unknown GEMM math '", name, "' (f32, tf32, bf16 or f16)"));
}

absl::StatusOr<std::unique_ptr<Session>> Session::Create(std::shared_ptr<const Model> model,
                                                         const SessionOptions& options) {
  if (model == nullptr) return absl::InvalidArgumentError("Session::Create: model is null");
  if (static_cast<int>(options.cuda_gemm_math) < 0 || static_cast<int>(options.cuda_gemm_math) > 3) {
    return absl::InvalidArgumentError("Session::Create: cuda_gemm_math is not a GemmMath");
  }
  if (options.max_cached_plans < 0) {
    return absl::InvalidArgumentError("Session::Create: max_cached_plans must be >= 0");
  }
  if (options.max_body_runs < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("Session::Create: max_body_runs must be >= 0 (0: no limit), is ", options.max_body_runs));
  }
  if (options.run_deadline_ms < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("Session::Create: run_deadline_ms must be >= 0 (0: no deadline), is ", options.run_deadline_ms));
  }
  std::shared_ptr<cuda::Device> cuda_device;
  switch (options.device) {
    case Device::kCpu: break;
    case Device::kAuto:
      // CUDA when a device exists; a machine without driver or GPU runs on the CPU.
      if (cuda::ProbeCuda().device_count > 0) {
        absl::StatusOr<std::shared_ptr<cuda::Device>> d = cuda::OpenCudaDevice(options.cuda_device);
        if (d.ok()) cuda_device = std::move(*d);
      }
      break;
    case Device::kCuda: {
      absl::StatusOr<std::shared_ptr<cuda::Device>> d = cuda::OpenCudaDevice(options.cuda_device);
      if (!d.ok()) {
        return absl::Status(d.status().code(), absl::StrCat("device 'cuda' requested: ", d.status().message(),
                                                            "; use --device cpu or auto"));
      }
      cuda_device = std::move(*d);
      break;
    }
    default:
      return absl::InvalidArgumentError(absl::StrCat("unknown device ", static_cast<int>(options.device)));
  }
  return internal::CreateSessionOnDevice(std::move(model), options, std::move(cuda_device));
}

namespace internal {

struct SessionAccess {
  static std::unique_ptr<Session> Make(std::unique_ptr<SessionImpl> impl) {
    return std::unique_ptr<Session>(new Session(std::move(impl)));
  }
};

absl::StatusOr<std::unique_ptr<Session>> CreateSessionOnDevice(std::shared_ptr<const Model> model,
                                                                const SessionOptions& options,
                                                                std::shared_ptr<cuda::Device> device) {
  if (model == nullptr) return absl::InvalidArgumentError("Session::Create: model is null");
  const Device kind = device != nullptr ? Device::kCuda : Device::kCpu;
  auto impl = std::make_unique<SessionImpl>(std::move(model), options, kind);
  if (device != nullptr) {
    if (absl::Status s = impl->AttachCuda(std::move(device)); !s.ok()) return s;
  }
  return SessionAccess::Make(std::move(impl));
}

}  // namespace internal

Device Session::device() const { return impl_->device_; }
std::string Session::device_description() const {
  return impl_->cuda_ != nullptr ? impl_->cuda_->Describe() : std::string("cpu");
}
const Model& Session::model() const { return *impl_->model_; }
SessionStats Session::stats() const { return impl_->stats_; }

namespace {

// Marks the session busy for one public call; a call from a second thread
// while it is finds it so and is refused before it touches anything. One
// atomic exchange on entry and one store on exit: it detects misuse, it does
// not serialise callers (the loser fails instead of waiting).
class EntryGuard {
 public:
  explicit EntryGuard(std::atomic<bool>& busy)
      : busy_(busy), entered_(!busy.exchange(true, std::memory_order_acquire)) {}
  ~EntryGuard() {
    if (entered_) busy_.store(false, std::memory_order_release);
  }
  EntryGuard(const EntryGuard&) = delete;
  EntryGuard& operator=(const EntryGuard&) = delete;
  absl::Status status() const {
    if (entered_) return absl::OkStatus();
    return absl::FailedPreconditionError(
        "session is already running on another thread; a Session is used by one thread at a time");
  }

 private:
  std::atomic<bool>& busy_;
  const bool entered_;
};

// Run, RunInto and Reshape speak tensors only.
absl::Status TensorsOnly(const ir::Graph& g, absl::Span<const TensorView> outputs) {
  for (int t : g.subgraphs[0].inputs) {
    if (ir::IsBoxed(g.tensors[t].dtype)) {
      return absl::FailedPreconditionError(absl::StrCat("input '", g.tensors[t].name, "' is a ",
                                                        DTypeName(g.tensors[t].dtype), "; use Session::RunValues"));
    }
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (ir::IsBoxed(outputs[i].dtype)) {
      return absl::FailedPreconditionError(absl::StrCat("output '", g.tensors[g.subgraphs[0].outputs[i]].name,
                                                        "' is a ", DTypeName(outputs[i].dtype),
                                                        "; use Session::RunValues"));
    }
  }
  return absl::OkStatus();
}

// A caller's Value as the view a plan takes, after checking it against the
// declared input.
absl::StatusOr<TensorView> ViewOfValue(const Value& value, const ir::TensorDecl& d, const ir::Graph& g) {
  const std::string who = absl::StrCat("input '", d.name, "' (", internal::DescribeDeclared(d, g), ")");
  if (!ir::IsBoxed(d.dtype)) {
    if (value.kind() != ValueKind::kTensor) {
      return absl::InvalidArgumentError(absl::StrCat(who, ": given ", value.DebugString()));
    }
    return value.tensor().view();
  }
  if (value.kind() != ir::KindOf(d.dtype)) {
    return absl::InvalidArgumentError(absl::StrCat(who, ": given ", value.DebugString()));
  }
  if (value.dtype() != ir::ElemDType(d.dtype)) {
    return absl::InvalidArgumentError(absl::StrCat(who, ": given ", value.DebugString()));
  }
  std::vector<const Tensor*> tensors;
  if (value.has_value()) {
    if (value.is_sequence()) {
      for (const Tensor& t : value.items()) tensors.push_back(&t);
    } else {
      tensors.push_back(&value.tensor());
    }
  }
  for (size_t k = 0; k < tensors.size(); ++k) {
    const Tensor& t = *tensors[k];
    const std::string item = value.is_sequence() ? absl::StrCat(": item ", k) : std::string(": its tensor");
    if (t.dtype() != value.dtype()) {
      return absl::InvalidArgumentError(absl::StrCat(who, item, " is ", DTypeName(t.dtype())));
    }
    if (t.view().byte_size() > 0 && t.data() == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(who, item, " has no data"));
    }
    if (!d.has_shape) continue;
    bool fits = t.shape().size() == d.shape.size();
    for (size_t j = 0; fits && j < d.shape.size(); ++j) {
      fits = !d.shape[j].is_const() || d.shape[j].value() == t.shape()[j];
    }
    if (!fits) {
      return absl::InvalidArgumentError(
          absl::StrCat(who, item, " has shape ", ir::ShapeToString(ir::FromConcrete(t.shape()))));
    }
  }
  return TensorView(d.dtype, {}, static_cast<const void*>(&value));
}

}  // namespace

absl::StatusOr<std::vector<TensorView>> Session::Run(absl::Span<const TensorView> inputs) {
  EntryGuard guard(impl_->busy_);
  if (absl::Status s = guard.status(); !s.ok()) return s;
  if (absl::Status s = TensorsOnly(impl_->graph_, {}); !s.ok()) return s;
  absl::StatusOr<std::vector<TensorView>> outs = impl_->RunMain(inputs);
  if (!outs.ok()) return outs;
  if (absl::Status s = TensorsOnly(impl_->graph_, *outs); !s.ok()) return s;
  return outs;
}

absl::StatusOr<std::vector<Value>> Session::RunValues(absl::Span<const Value> inputs) {
  EntryGuard guard(impl_->busy_);
  if (absl::Status s = guard.status(); !s.ok()) return s;
  const ir::Graph& g = impl_->graph_;
  const ir::Subgraph& main = g.subgraphs[0];
  if (inputs.size() != main.inputs.size()) return internal::InputCountError(g, inputs.size());
  std::vector<TensorView> views;
  for (size_t i = 0; i < inputs.size(); ++i) {
    absl::StatusOr<TensorView> view = ViewOfValue(inputs[i], g.tensors[main.inputs[i]], g);
    if (!view.ok()) return view.status();
    views.push_back(*std::move(view));
  }
  absl::StatusOr<std::vector<TensorView>> outs = impl_->RunMain(views);
  if (!outs.ok()) return outs.status();
  std::vector<Value> values;
  values.reserve(outs->size());
  for (const TensorView& o : *outs) {
    if (ir::IsBoxed(o.dtype)) {
      values.push_back(ir::BoxedValue(o));  // shares the tensors, which no kernel writes again
      continue;
    }
    absl::StatusOr<Tensor> t = Tensor::CopyOf(o);
    if (!t.ok()) return t.status();
    values.emplace_back(*std::move(t));
  }
  return values;
}

absl::Status Session::RunInto(absl::Span<const TensorView> inputs, absl::Span<const TensorView> outputs) {
  EntryGuard guard(impl_->busy_);
  if (absl::Status s = guard.status(); !s.ok()) return s;
  const std::vector<TensorInfo>& infos = impl_->impl_.outputs();
  if (outputs.size() != infos.size()) {
    return absl::InvalidArgumentError(absl::StrCat("the model has ", infos.size(), " outputs, given ",
                                                   outputs.size(), " buffers"));
  }
  if (absl::Status s = TensorsOnly(impl_->graph_, {}); !s.ok()) return s;
  const bool on_cuda = impl_->cuda_ != nullptr;
  std::vector<bool> aliased;
  absl::StatusOr<std::vector<TensorView>> results =
      impl_->RunMain(inputs, /*device_views=*/on_cuda, outputs, &aliased);
  if (!results.ok()) return results.status();
  if (absl::Status s = TensorsOnly(impl_->graph_, *results); !s.ok()) return s;
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (aliased[i]) continue;  // written in place by the kernels
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
      if (on_cuda) {
        // Host or device memory on either side: the copy finds out.
        if (absl::Status s = impl_->cuda_->CopyAsync(into.data, got.data, got.byte_size(), impl_->stream_); !s.ok()) {
          return s;
        }
        if (!impl_->cuda_->IsDevicePointer(into.data)) {
          impl_->stats_.bytes_device_to_host += static_cast<int64_t>(got.byte_size());
        }
      } else {
        std::memmove(into.data, got.data, got.byte_size());
      }
    }
  }
  if (on_cuda) return impl_->cuda_->Synchronize(impl_->stream_);
  return absl::OkStatus();
}

absl::StatusOr<MemoryReport> Session::Reshape(absl::Span<const std::vector<int64_t>> input_shapes,
                                              std::vector<std::vector<int64_t>>* out_output_shapes) {
  EntryGuard guard(impl_->busy_);
  if (absl::Status s = guard.status(); !s.ok()) return s;
  const ir::Graph& g = impl_->graph_;
  const ir::Subgraph& main = g.subgraphs[0];
  if (absl::Status s = TensorsOnly(g, {}); !s.ok()) return s;
  std::vector<TensorView> views;
  for (size_t i = 0; i < input_shapes.size() && i < main.inputs.size(); ++i) {
    views.emplace_back(g.tensors[main.inputs[i]].dtype, input_shapes[i], static_cast<void*>(nullptr));
  }
  if (input_shapes.size() != main.inputs.size()) views.resize(input_shapes.size());
  if (absl::Status s = impl_->ValidateMainInputs(views, false); !s.ok()) return s;
  ++impl_->run_serial_;
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
