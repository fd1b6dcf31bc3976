#include "lib/runtime/execution_plan.h"

#include <deque>
#include <optional>

#include "absl/strings/str_cat.h"
#include "lib/ir/plain_host.h"
#include "lib/ir/value_type.h"
#include "lib/runtime/attention_fusion.h"
#include "lib/runtime/backend.h"
#include "lib/runtime/shape_inference.h"

namespace grove::runtime {
namespace {

// Outputs up to this size whose inputs are all known are computed at plan
// time: shape arithmetic, never real activations.
constexpr uint64_t kFoldLimitBytes = 4096;

}  // namespace

int ExecutionPlan::ValueOf(int tensor) const {
  auto it = value_of_tensor_.find(tensor);
  return it == value_of_tensor_.end() ? -1 : it->second;
}

absl::StatusOr<std::unique_ptr<ExecutionPlan>> ExecutionPlan::Build(const ir::Graph& graph, int subgraph,
                                                                    absl::Span<const ValueSig> inputs,
                                                                    absl::Span<const ValueSig> captures,
                                                                    Backend* backend_impl) {
  const ir::Backend backend = backend_impl != nullptr ? backend_impl->kind() : ir::Backend::kCpu;
  auto plan = std::unique_ptr<ExecutionPlan>(new ExecutionPlan());
  plan->subgraph_ = subgraph;
  const ir::Subgraph& sg = graph.subgraphs[subgraph];
  if (inputs.size() != sg.inputs.size() || captures.size() != sg.captures.size()) {
    return absl::InternalError(absl::StrCat("plan for subgraph '", sg.name, "': wrong number of inputs"));
  }
  GraphInference inference(graph, /*planning=*/true);
  std::deque<TensorView> folded_views;

  auto add_value = [&](int tensor, PlanValue v) {
    v.tensor = tensor;
    const int id = static_cast<int>(plan->values_.size());
    plan->values_.push_back(std::move(v));
    plan->value_of_tensor_[tensor] = id;
    return id;
  };
  auto sig_value = [&](int tensor, const ValueSig& sig, Storage kind, int position) {
    PlanValue v;
    v.kind = kind;
    v.dtype = sig.dtype;
    v.position = position;
    if (ir::IsBoxed(sig.dtype)) {
      // The view is {} (a grove::Value); inference sees the items' shape.
      inference.Set(tensor, ir::ShapeContext::Input{true, sig.dtype, ir::FromPartlyConcrete(sig.shape), nullptr,
                                                    sig.rank_known});
    } else {
      v.shape = sig.shape;
      v.bytes = DTypeSize(sig.dtype) * static_cast<uint64_t>(ir::NumElements(sig.shape));
      inference.Set(tensor, ir::ShapeContext::Input{true, sig.dtype, ir::FromConcrete(sig.shape), nullptr});
    }
    return add_value(tensor, std::move(v));
  };
  for (size_t i = 0; i < inputs.size(); ++i) {
    plan->input_values_.push_back(sig_value(sg.inputs[i], inputs[i], Storage::kInput, static_cast<int>(i)));
  }
  for (size_t i = 0; i < captures.size(); ++i) {
    plan->capture_values_.push_back(
        sig_value(sg.captures[i], captures[i], Storage::kCapture, static_cast<int>(i)));
  }
  // Weights become values on first use.
  auto value_id = [&](int tensor) -> int {
    const int id = plan->ValueOf(tensor);
    if (id >= 0) return id;
    const ir::TensorDecl& d = graph.tensors[tensor];
    if (!d.is_weight) return -1;
    PlanValue v;
    v.kind = Storage::kWeight;
    v.dtype = d.dtype;
    v.shape = ir::ToConcrete(d.shape);
    v.bytes = d.bytes;
    v.data = d.data;
    return add_value(tensor, std::move(v));
  };

  ir::PlainHost no_host("folded op");  // folding never allocates or runs a subgraph
  for (const ir::Node& node : sg.nodes) {
    absl::StatusOr<std::vector<ir::ShapeContext::Input>> node_inputs = inference.NodeInputs(node);
    if (!node_inputs.ok()) return node_inputs.status();
    PlanStep step;
    step.node = &node;
    bool inputs_dynamic = false;  // some input's shape is known only when run
    bool values_known = true;
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      const int id = node.inputs[i] < 0 ? -1 : value_id(node.inputs[i]);
      if (node.inputs[i] >= 0 && id < 0) {
        return absl::InternalError(absl::StrCat(node.Describe(), ": input ", i, " has no value"));
      }
      step.inputs.push_back(id);
      if (id < 0) continue;
      if (!plan->values_[id].shape_known) inputs_dynamic = true;
      if ((*node_inputs)[i].value == nullptr) values_known = false;
    }
    for (int t : node.implicit_inputs) {
      if (value_id(t) < 0) return absl::InternalError(absl::StrCat(node.Describe(), ": capture has no value"));
    }
    ir::ShapeContext ctx(node, graph, *node_inputs, &inference);
    bool boxed = false;  // a sequence or optional goes in or out: never folded
    for (const auto& in : *node_inputs) boxed |= in.present && ir::IsBoxed(in.dtype);
    if (ir::RanksKnownOnlyWhenRun(*node_inputs)) {
      // An input's rank is known only when run: so is everything here.
      for (int i = 0; i < ctx.num_outputs(); ++i) ctx.SetOutputUnknownRank(i, DType::kUnknown);
    } else if (absl::Status s = ir::InferShapes(ctx); !s.ok()) {
      return s;
    }

    bool outputs_concrete = true;
    bool makes_strings = false;
    uint64_t out_bytes = 0;
    for (size_t i = 0; i < node.outputs.size(); ++i) {
      if (node.outputs[i] < 0) continue;
      const auto& o = ctx.outputs()[i];
      if (!o.set) return absl::InternalError(absl::StrCat(node.Describe(), ": output ", i, " not inferred"));
      if (ir::IsBoxed(o.dtype)) {
        boxed = true;
        continue;
      }
      // A kernel that makes strings keeps them in the run's arena, which a
      // plan outlives: string outputs are never folded.
      if (o.dtype == DType::kString) makes_strings = true;
      if (!o.rank_known || !ir::IsConcrete(o.shape)) {
        outputs_concrete = false;
      } else {
        out_bytes += DTypeSize(o.dtype) * static_cast<uint64_t>(ir::NumElements(ir::ToConcrete(o.shape)));
      }
    }
    // Folding runs on the host; a step the backend's kernels do not take
    // runs the CPU kernel with copies (host_fallback).
    const ir::KernelFn cpu_kernel = node.def->kernels[static_cast<int>(ir::Backend::kCpu)];
    bool takes = node.def->kernels[static_cast<int>(backend)] != nullptr;
    if (takes && backend_impl != nullptr && backend != ir::Backend::kCpu) {
      std::vector<DType> dtypes;
      for (size_t i = 0; i < node.inputs.size(); ++i) {
        if (node.inputs[i] >= 0) dtypes.push_back((*node_inputs)[i].dtype);
      }
      for (size_t i = 0; i < node.outputs.size(); ++i) {
        if (node.outputs[i] >= 0) dtypes.push_back(ctx.outputs()[i].dtype);
      }
      takes = backend_impl->Takes(node, dtypes);
    }
    step.backend = backend;
    if (!takes && backend != ir::Backend::kCpu && cpu_kernel != nullptr) {
      step.backend = ir::Backend::kCpu;
      step.host_fallback = true;
    } else if (!takes) {
      return absl::UnimplementedError(absl::StrCat(node.Describe(), ": no kernel for this backend"));
    }
    step.kernel = node.def->kernels[static_cast<int>(step.backend)];
    step.prepare = node.def->prepares[static_cast<int>(step.backend)];

    const bool fold = !boxed && !makes_strings && node.def->foldable && !node.def->kernel_allocates_outputs && outputs_concrete &&
                      !inputs_dynamic && (values_known || !node.def->reads_input_values) &&
                      out_bytes <= kFoldLimitBytes && node.implicit_inputs.empty();
    if (fold) {
      std::vector<TensorView> in_views(node.inputs.size());
      std::vector<TensorView*> in_ptrs(node.inputs.size(), nullptr);
      for (size_t i = 0; i < node.inputs.size(); ++i) {
        if (step.inputs[i] < 0) continue;
        const auto& in = (*node_inputs)[i];
        in_views[i] = in.value != nullptr ? *in.value
                                          : TensorView(in.dtype, ir::ToConcrete(in.shape), static_cast<void*>(nullptr));
        in_ptrs[i] = &in_views[i];
      }
      std::vector<TensorView*> out_ptrs(node.outputs.size(), nullptr);
      std::vector<Tensor*> out_tensors(node.outputs.size(), nullptr);
      for (size_t i = 0; i < node.outputs.size(); ++i) {
        if (node.outputs[i] < 0) continue;
        const auto& o = ctx.outputs()[i];
        absl::StatusOr<Tensor> t = Tensor::Create(o.dtype, ir::ToConcrete(o.shape));
        if (!t.ok()) return t.status();
        plan->folded_.push_back(std::make_unique<Tensor>(std::move(*t)));
        out_tensors[i] = plan->folded_.back().get();
        folded_views.push_back(out_tensors[i]->view());
        out_ptrs[i] = &folded_views.back();
      }
      ir::KernelContext kctx(node, in_ptrs, out_ptrs, &no_host);
      if (cpu_kernel == nullptr) return absl::InternalError(absl::StrCat(node.Describe(), ": no CPU kernel to fold"));
      // Empty outputs have nothing to compute (as PlanStep::outputs_empty).
      if (out_bytes > 0) {
        if (absl::Status s = ir::RunKernel(ir::Backend::kCpu, kctx); !s.ok()) return s;
      }
      for (size_t i = 0; i < node.outputs.size(); ++i) {
        if (node.outputs[i] < 0) continue;
        PlanValue v;
        v.kind = Storage::kFolded;
        v.dtype = out_tensors[i]->dtype();
        v.shape = out_tensors[i]->shape();
        v.bytes = out_tensors[i]->view().byte_size();
        v.data = out_tensors[i]->data();
        add_value(node.outputs[i], std::move(v));
        inference.Set(node.outputs[i],
                      ir::ShapeContext::Input{true, out_tensors[i]->dtype(), ctx.outputs()[i].shape, out_ptrs[i]});
      }
      continue;
    }

    step.kernel_allocates = node.def->kernel_allocates_outputs;
    step.infer_at_run = !step.kernel_allocates && (inputs_dynamic || !outputs_concrete);
    const int step_index = static_cast<int>(plan->steps_.size());
    for (size_t i = 0; i < node.outputs.size(); ++i) {
      if (node.outputs[i] < 0) {
        step.outputs.push_back(-1);
        continue;
      }
      const auto& o = ctx.outputs()[i];
      PlanValue v;
      v.dtype = o.dtype;
      v.kind = (step.kernel_allocates || step.infer_at_run) ? Storage::kDynamic : Storage::kArena;
      if (ir::IsBoxed(o.dtype)) {
        if (v.kind == Storage::kArena) v.kind = Storage::kBoxed;  // the view's shape is {}
      } else {
        v.shape = ir::ToConcrete(o.shape);
        v.shape_known = o.rank_known && ir::IsConcrete(o.shape);
        if (v.shape_known) v.bytes = DTypeSize(o.dtype) * static_cast<uint64_t>(ir::NumElements(v.shape));
      }
      v.first_use = step_index;
      v.last_use = step_index;
      step.outputs.push_back(add_value(node.outputs[i], std::move(v)));
      inference.Set(node.outputs[i], ir::ShapeContext::Input{true, o.dtype, o.shape, nullptr, o.rank_known});
    }
    // Lifetimes: every read, explicit or through a body's captures.
    for (int id : step.inputs) {
      if (id >= 0) plan->values_[id].last_use = step_index;
    }
    for (int t : node.implicit_inputs) plan->values_[plan->ValueOf(t)].last_use = step_index;
    plan->steps_.push_back(std::move(step));
  }

  const int end = static_cast<int>(plan->steps_.size());
  for (int t : sg.outputs) {
    const int id = value_id(t);
    if (id < 0) return absl::InternalError(absl::StrCat("subgraph '", sg.name, "' output has no value"));
    plan->values_[id].last_use = end;
    plan->output_values_.push_back(id);
  }

  if (backend_impl != nullptr) {
    PlanGraph graph_view{plan->values_, plan->steps_, plan->output_values_,
                         [p = plan.get()](int tensor) { return p->ValueOf(tensor); }, plan->fused_nodes_};
    // Attention first: the backend's passes (CUDA's elementwise chains)
    // would otherwise take its scale.
    FuseAttention(graph_view, backend, backend_impl);
    backend_impl->RefinePlan(graph_view);
    plan->num_fused_steps_ = graph_view.fused_steps;
    plan->num_fused_ops_ = graph_view.fused_ops;
    if (graph_view.fused_steps > 0) plan->RecomputeLifetimes();
  }

  for (PlanStep& step : plan->steps_) {
    if (step.infer_at_run || step.kernel_allocates) continue;
    bool any = false, empty = true;
    for (int id : step.outputs) {
      if (id < 0) continue;
      const PlanValue& v = plan->values_[id];
      any = true;
      empty &= v.kind == Storage::kArena && v.shape_known && v.bytes == 0;
    }
    step.outputs_empty = any && empty;
  }

  if (backend_impl != nullptr) {
    if (absl::Status s = plan->PrepareSteps(*backend_impl); !s.ok()) return s;
  }
  plan->CutSegments(backend);

  MemoryPlanner planner;
  // Each buffer is within kMaxTensorBytes; while their total stays below
  // 2^62 no offset the planner computes can wrap.
  uint64_t total_bytes = 0;
  for (size_t id = 0; id < plan->values_.size(); ++id) {
    PlanValue& v = plan->values_[id];
    if (v.kind != Storage::kArena) continue;
    total_bytes += v.bytes + kArenaAlignment;
    if (total_bytes > (uint64_t{1} << 62)) {
      return absl::InvalidArgumentError(absl::StrCat("plan for subgraph '", sg.name,
                                                     "': its tensors need more than 2^62 bytes in all"));
    }
    planner.AddBuffer(v.bytes, v.first_use, v.last_use);
    plan->arena_value_of_buffer_.push_back(static_cast<int>(id));
  }
  // Workspaces: live only while their step runs.
  std::vector<int> workspace_step;
  for (size_t s = 0; s < plan->steps_.size(); ++s) {
    const PlanStep& step = plan->steps_[s];
    if (!step.prepared_at_plan || step.prepared.workspace_bytes == 0) continue;
    total_bytes += step.prepared.workspace_bytes + kArenaAlignment;
    if (step.prepared.workspace_bytes > ir::kMaxTensorBytes || total_bytes > (uint64_t{1} << 62)) {
      return absl::InvalidArgumentError(absl::StrCat(step.node->Describe(), ": its workspace of ",
                                                     step.prepared.workspace_bytes, " bytes is too large"));
    }
    planner.AddBuffer(step.prepared.workspace_bytes, static_cast<int>(s), static_cast<int>(s));
    workspace_step.push_back(static_cast<int>(s));
  }
  plan->memory_ = planner.Plan();
  const size_t num_values = plan->arena_value_of_buffer_.size();
  for (size_t b = 0; b < num_values; ++b) {
    plan->values_[plan->arena_value_of_buffer_[b]].offset = plan->memory_.offsets[b];
  }
  for (size_t w = 0; w < workspace_step.size(); ++w) {
    plan->steps_[workspace_step[w]].workspace_offset = plan->memory_.offsets[num_values + w];
  }
  return plan;
}

void ExecutionPlan::RecomputeLifetimes() {
  for (PlanValue& v : values_) {
    if (v.kind == Storage::kArena || v.kind == Storage::kDynamic) v.first_use = v.last_use = -1;
  }
  auto touch = [&](int v, int step) {
    if (v < 0) return;
    PlanValue& pv = values_[v];
    if (pv.first_use < 0) pv.first_use = step;
    pv.last_use = std::max(pv.last_use, step);
  };
  for (size_t s = 0; s < steps_.size(); ++s) {
    const int i = static_cast<int>(s);
    for (int v : steps_[s].outputs) touch(v, i);
    for (int v : steps_[s].inputs) touch(v, i);
    for (int t : steps_[s].node->implicit_inputs) touch(ValueOf(t), i);
  }
  for (int v : output_values_) touch(v, static_cast<int>(steps_.size()));
}

MemoryReport ExecutionPlan::Report(const ir::Graph& graph) const {
  MemoryReport r;
  r.arena_bytes = memory_.arena_bytes;
  r.lower_bound_bytes = memory_.lower_bound_bytes;
  r.peak_step = memory_.peak_step;
  r.num_steps = static_cast<int>(steps_.size());
  // The arena's buffers are the values', then the steps' workspaces in step
  // order (see Build).
  std::vector<const PlanStep*> workspaces;
  for (const PlanStep& step : steps_) {
    if (step.prepared_at_plan && step.prepared.workspace_bytes > 0) workspaces.push_back(&step);
  }
  for (int b : memory_.peak_buffers) {
    const size_t i = static_cast<size_t>(b);
    if (i < arena_value_of_buffer_.size()) {
      const PlanValue& v = values_[arena_value_of_buffer_[i]];
      r.peak_tensors.push_back(PeakTensor{graph.tensors[v.tensor].name, v.bytes});
    } else if (i - arena_value_of_buffer_.size() < workspaces.size()) {
      const PlanStep& step = *workspaces[i - arena_value_of_buffer_.size()];
      r.peak_tensors.push_back(
          PeakTensor{absl::StrCat("workspace of ", step.node->Describe()), step.prepared.workspace_bytes});
    }
  }
  for (const PlanValue& v : values_) {
    if (v.kind == Storage::kArena) ++r.num_arena_tensors;
    if (v.kind == Storage::kFolded) ++r.num_folded_tensors;
    if (v.kind == Storage::kDynamic) ++r.num_dynamic_tensors;
  }
  return r;
}

}  // namespace grove::runtime
