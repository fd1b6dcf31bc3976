#include "lib/runtime/shape_inference.h"

#include "absl/strings/str_cat.h"
#include "lib/ir/plain_host.h"
#include "lib/ir/value_type.h"

namespace grove::runtime {

namespace {

// As in the plan builder: outputs up to this size are shape arithmetic.
constexpr uint64_t kFoldLimitBytes = 4096;

}  // namespace

GraphInference::GraphInference(const ir::Graph& graph, bool planning)
    : graph_(graph), planning_(planning), env_(graph.tensors.size()), set_(graph.tensors.size(), false) {}

const GraphInference::Input* GraphInference::Find(int tensor) const {
  if (tensor < 0 || static_cast<size_t>(tensor) >= set_.size() || !set_[tensor]) return nullptr;
  return &env_[tensor];
}

absl::StatusOr<const GraphInference::Input*> GraphInference::Lookup(int tensor) {
  if (const Input* in = Find(tensor)) return in;
  const ir::TensorDecl& d = graph_.tensors[tensor];
  if (d.is_weight) {
    weight_views_.emplace_back(d.dtype, ir::ToConcrete(d.shape), static_cast<const void*>(d.data));
    Set(tensor, Input{true, d.dtype, d.shape, &weight_views_.back()});
    return &env_[tensor];
  }
  return absl::InternalError(absl::StrCat("shape inference: tensor '", d.name, "' has no shape yet"));
}

absl::StatusOr<std::vector<GraphInference::Input>> GraphInference::NodeInputs(const ir::Node& node) {
  std::vector<Input> inputs(node.inputs.size());
  for (size_t i = 0; i < node.inputs.size(); ++i) {
    if (node.inputs[i] < 0) continue;
    absl::StatusOr<const Input*> in = Lookup(node.inputs[i]);
    if (!in.ok()) return in.status();
    inputs[i] = **in;
  }
  return inputs;
}

bool GraphInference::MayFold(const ir::Node& node) const {
  return planning_ && node.def->foldable && !node.def->kernel_allocates_outputs && node.implicit_inputs.empty() &&
         node.def->kernels[static_cast<int>(ir::Backend::kCpu)] != nullptr;
}

absl::Status GraphInference::InferNode(const ir::Node& node) {
  absl::StatusOr<std::vector<Input>> inputs = NodeInputs(node);
  if (!inputs.ok()) return inputs.status();
  const bool ranks_unknown = ir::RanksKnownOnlyWhenRun(*inputs);
  // The shape context takes the inputs; a copy is kept only for a node that
  // may be folded after its shape function (planning: shape arithmetic).
  const bool may_fold = MayFold(node);
  std::vector<Input> kept;
  if (may_fold) kept = *inputs;
  ir::ShapeContext ctx(node, graph_, *std::move(inputs), this);
  if (ranks_unknown) {
    for (int i = 0; i < ctx.num_outputs(); ++i) ctx.SetOutputUnknownRank(i, DType::kUnknown);
  } else if (absl::Status s = ir::InferShapes(ctx); !s.ok()) {
    return s;
  }
  if (may_fold) {
    absl::StatusOr<bool> folded = Fold(node, kept, ctx.outputs());
    if (!folded.ok()) return folded.status();
    if (*folded) return absl::OkStatus();
  }
  for (size_t i = 0; i < node.outputs.size(); ++i) {
    if (node.outputs[i] < 0) continue;
    const Output& o = ctx.outputs()[i];
    if (!o.set) {
      return absl::InternalError(absl::StrCat(node.Describe(), ": shape function left output ", i, " unset"));
    }
    // `ctx` ends here, so its shapes move into the environment (a copy
    // allocates per dim, per node, at every load); ShapeContext only hands
    // its outputs out const.
    Set(node.outputs[i], Input{true, o.dtype, std::move(const_cast<ir::SymShape&>(o.shape)), nullptr, o.rank_known});
  }
  return absl::OkStatus();
}

absl::StatusOr<bool> GraphInference::Fold(const ir::Node& node, absl::Span<const Input> inputs,
                                          absl::Span<const Output> outputs) {
  if (!MayFold(node)) return false;
  std::vector<TensorView> in_views(inputs.size());
  std::vector<TensorView*> in_ptrs(inputs.size(), nullptr);
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (node.inputs[i] < 0) continue;
    const Input& in = inputs[i];
    if (ir::IsBoxed(in.dtype) || !in.rank_known || !ir::IsConcrete(in.shape)) return false;
    if (in.value == nullptr && node.def->reads_input_values) return false;
    in_views[i] = in.value != nullptr
                      ? *in.value
                      : TensorView(in.dtype, ir::ToConcrete(in.shape), static_cast<void*>(nullptr));
    in_ptrs[i] = &in_views[i];
  }
  uint64_t bytes = 0;
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (node.outputs[i] < 0) continue;
    // String outputs may hold bytes of the run's arena: never folded.
    if (ir::IsBoxed(outputs[i].dtype) || outputs[i].dtype == DType::kString || !outputs[i].rank_known ||
        !ir::IsConcrete(outputs[i].shape)) {
      return false;
    }
    bytes +=
        DTypeSize(outputs[i].dtype) * static_cast<uint64_t>(ir::NumElements(ir::ToConcrete(outputs[i].shape)));
  }
  if (bytes > kFoldLimitBytes) return false;

  std::vector<TensorView*> out_ptrs(outputs.size(), nullptr);
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (node.outputs[i] < 0) continue;
    absl::StatusOr<Tensor> t = Tensor::Create(outputs[i].dtype, ir::ToConcrete(outputs[i].shape));
    if (!t.ok()) return t.status();
    folded_.push_back(std::move(*t));
    folded_views_.push_back(folded_.back().view());
    out_ptrs[i] = &folded_views_.back();
  }
  ir::PlainHost no_host("folded op");  // folding never allocates or runs a subgraph
  ir::KernelContext kctx(node, in_ptrs, out_ptrs, &no_host);
  // Empty outputs have nothing to compute (as PlanStep::outputs_empty).
  if (bytes > 0) {
    if (absl::Status s = ir::RunKernel(ir::Backend::kCpu, kctx); !s.ok()) return s;
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (node.outputs[i] < 0) continue;
    Set(node.outputs[i], Input{true, outputs[i].dtype, outputs[i].shape, out_ptrs[i]});
  }
  return true;
}

absl::StatusOr<std::vector<GraphInference::Output>> GraphInference::Infer(int subgraph,
                                                                          absl::Span<const Input> inputs) {
  const ir::Subgraph& sg = graph_.subgraphs[subgraph];
  if (inputs.size() != sg.inputs.size()) {
    return absl::InvalidArgumentError(absl::StrCat("subgraph '", sg.name, "' takes ", sg.inputs.size(),
                                                   " inputs, given ", inputs.size()));
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    Input in = inputs[i];
    in.value = nullptr;  // a body's inputs change from call to call
    Set(sg.inputs[i], std::move(in));
  }
  for (const ir::Node& node : sg.nodes) {
    if (absl::Status s = InferNode(node); !s.ok()) return s;
  }
  std::vector<Output> outs;
  for (int t : sg.outputs) {
    absl::StatusOr<const Input*> in = Lookup(t);
    if (!in.ok()) return in.status();
    outs.push_back(Output{(*in)->dtype, (*in)->shape, true, (*in)->rank_known});
  }
  return outs;
}

}  // namespace grove::runtime
