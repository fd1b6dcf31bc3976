#include "lib/runtime/shape_inference.h"

#include "absl/strings/str_cat.h"

namespace grove::runtime {

GraphInference::GraphInference(const ir::Graph& graph) : graph_(graph) {}

const GraphInference::Input* GraphInference::Find(int tensor) const {
  auto it = env_.find(tensor);
  return it == env_.end() ? nullptr : &it->second;
}

absl::StatusOr<GraphInference::Input> GraphInference::Lookup(int tensor) {
  if (const Input* in = Find(tensor)) return *in;
  const ir::TensorDecl& d = graph_.tensors[tensor];
  if (d.is_weight) {
    weight_views_.emplace_back(d.dtype, ir::ToConcrete(d.shape), static_cast<const void*>(d.data));
    Input in{true, d.dtype, d.shape, &weight_views_.back()};
    env_[tensor] = in;
    return in;
  }
  return absl::InternalError(absl::StrCat("shape inference: tensor '", d.name, "' has no shape yet"));
}

absl::StatusOr<std::vector<GraphInference::Input>> GraphInference::NodeInputs(const ir::Node& node) {
  std::vector<Input> inputs(node.inputs.size());
  for (size_t i = 0; i < node.inputs.size(); ++i) {
    if (node.inputs[i] < 0) continue;
    absl::StatusOr<Input> in = Lookup(node.inputs[i]);
    if (!in.ok()) return in.status();
    inputs[i] = std::move(*in);
  }
  return inputs;
}

absl::Status GraphInference::InferNode(const ir::Node& node) {
  absl::StatusOr<std::vector<Input>> inputs = NodeInputs(node);
  if (!inputs.ok()) return inputs.status();
  ir::ShapeContext ctx(node, graph_, std::move(*inputs), this);
  if (absl::Status s = node.def->infer(ctx); !s.ok()) return s;
  for (size_t i = 0; i < node.outputs.size(); ++i) {
    if (node.outputs[i] < 0) continue;
    const Output& o = ctx.outputs()[i];
    if (!o.set) {
      return absl::InternalError(absl::StrCat(node.Describe(), ": shape function left output ", i, " unset"));
    }
    env_[node.outputs[i]] = Input{true, o.dtype, o.shape, nullptr};
  }
  return absl::OkStatus();
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
    env_[sg.inputs[i]] = std::move(in);
  }
  for (const ir::Node& node : sg.nodes) {
    if (absl::Status s = InferNode(node); !s.ok()) return s;
  }
  std::vector<Output> outs;
  for (int t : sg.outputs) {
    absl::StatusOr<Input> in = Lookup(t);
    if (!in.ok()) return in.status();
    outs.push_back(Output{in->dtype, in->shape, true});
  }
  return outs;
}

}  // namespace grove::runtime
