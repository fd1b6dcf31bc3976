// The executor's work on a backend with memory of its own (CUDA): plans'
// weights and folded values uploaded, inputs staged, values read back to the
// host, and steps that run their CPU kernel with copies (no kernel of the
// backend takes them).
#include <algorithm>
#include <memory>

#include "absl/strings/str_cat.h"
#include "lib/ir/value_type.h"
#include "lib/runtime/execution_plan.h"
#include "lib/runtime/executor.h"
#include "lib/runtime/step_host.h"

namespace grove::runtime {

// What a CPU kernel calls back into when it runs inside a CUDA plan (an op
// with no CUDA kernel): outputs it allocates and subgraph results are host
// memory; the executor copies outputs to the device afterwards.
class FallbackHost : public ir::KernelContext::Host {
 public:
  FallbackHost(Executor& session, PlanInstance& inst, int step, std::vector<TensorView>& host_outs,
               std::vector<TensorView*>& host_out_ptrs)
      : session_(session), inst_(inst), step_(step), device_host_(session, inst, step), host_outs_(host_outs),
        host_out_ptrs_(host_out_ptrs) {}

  absl::StatusOr<TensorView*> AllocateOutput(int i, DType dtype, std::vector<int64_t> shape) override {
    const PlanStep& step = inst_.plan->steps()[step_];
    absl::StatusOr<int> value = PlannedOutput(inst_, step_, i, &dtype);
    if (!value.ok()) return value.status();
    const int v = *value;
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
      if (absl::Status s = session_.backend_.CopyAsync(copies_[i]->data(), o.data, o.byte_size());
          !s.ok()) {
        return s;
      }
      session_.stats_.bytes_device_to_host += static_cast<int64_t>(o.byte_size());
      o.data = copies_[i]->data();
    }
    if (absl::Status s = session_.backend_.Synchronize(); !s.ok()) return s;
    return outs;
  }

 private:
  Executor& session_;
  PlanInstance& inst_;
  int step_;
  StepHost device_host_;
  std::vector<TensorView>& host_outs_;
  std::vector<TensorView*>& host_out_ptrs_;
  std::vector<std::unique_ptr<Buffer>> copies_;
};

absl::Status Executor::SetUpDeviceInstance(PlanInstance& inst) {
  const ExecutionPlan& p = *inst.plan;
  const size_t n = p.values().size();
  inst.host_views.assign(n, TensorView());
  inst.copy_views.assign(n, TensorView());
  inst.staging.resize(n);
  inst.host_copies.resize(n);
  for (size_t v = 0; v < n; ++v) {
    inst.staging[v] = std::make_unique<Buffer>(&backend_);
    inst.host_copies[v] = std::make_unique<Buffer>();
  }
  // Weights point into the model's bytes, uploaded once per device; folded
  // values (and any weight outside those bytes) are uploaded per plan.
  const uint8_t* host_base = model_.host_bytes();
  const size_t host_size = model_.host_byte_size();
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
      if (absl::Status s = backend_.CopyAsync(inst.views[v].data, pv.data, pv.bytes); !s.ok()) return s;
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
  return backend_.Synchronize();
}

absl::Status Executor::BindValue(PlanInstance& inst, int v, const TensorView& given) {
  const uint64_t bytes = given.byte_size();
  if (bytes == 0 || backend_.IsDevicePointer(given.data)) {
    inst.views[v].data = given.data;  // device memory: used in place
    return absl::OkStatus();
  }
  if (absl::Status s = inst.staging[v]->Reserve(bytes); !s.ok()) return s;
  if (absl::Status s = backend_.CopyAsync(inst.staging[v]->data(), given.data, bytes); !s.ok()) return s;
  stats_.bytes_host_to_device += static_cast<int64_t>(bytes);
  inst.views[v].data = inst.staging[v]->data();
  return absl::OkStatus();
}

absl::StatusOr<const TensorView*> Executor::HostCopy(PlanInstance& inst, int v, const TensorView& device_view,
                                                    bool wait) {
  if (inst.host_views[v].data != nullptr) return &inst.host_views[v];
  if (ir::IsBoxed(device_view.dtype)) return &device_view;  // a host grove::Value on every backend
  const uint64_t bytes = device_view.byte_size();
  if (absl::Status s = inst.host_copies[v]->Reserve(bytes); !s.ok()) return s;
  if (absl::Status s = backend_.CopyAsync(inst.host_copies[v]->data(), device_view.data, bytes); !s.ok()) {
    return s;
  }
  if (wait) {
    if (absl::Status s = backend_.Synchronize(); !s.ok()) return s;
  }
  stats_.bytes_device_to_host += static_cast<int64_t>(bytes);
  inst.copy_views[v] = TensorView(device_view.dtype, device_view.shape, static_cast<void*>(inst.host_copies[v]->data()));
  return &inst.copy_views[v];
}

absl::Status Executor::RunFallbackStep(PlanInstance& inst, int s, absl::Span<TensorView* const> in_ptrs,
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
    if (absl::Status st = backend_.CopyAsync(inst.views[v].data, h.data, h.byte_size()); !st.ok()) return st;
    stats_.bytes_host_to_device += static_cast<int64_t>(h.byte_size());
  }
  // The host buffers are reused by the next fallback step.
  return backend_.Synchronize();
}

}  // namespace grove::runtime
