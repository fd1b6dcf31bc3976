// Shape inference over subgraphs, symbolic or concrete: the environment maps
// tensor index -> (dtype, shape, value when known). The plan builder seeds it
// with concrete shapes; Model load seeds it with the declared symbolic inputs.
// Control-flow ops infer their bodies through this class (SubgraphInferrer).
// Inside a body, small shape arithmetic with known inputs is evaluated as the
// plan builder does, so a body's shape tests (an If on `Shape(x)[-1] == 1`)
// have values when the shapes are concrete.
#ifndef GROVE_LIB_RUNTIME_SHAPE_INFERENCE_H_
#define GROVE_LIB_RUNTIME_SHAPE_INFERENCE_H_

#include <deque>
#include <vector>

#include "absl/status/statusor.h"
#include "lib/ir/graph.h"
#include "lib/ir/op_registry.h"

namespace grove::runtime {

class GraphInference : public ir::ShapeContext::SubgraphInferrer {
 public:
  using Input = ir::ShapeContext::Input;
  using Output = ir::ShapeContext::Output;

  // `planning`: the shapes are those of one call (see SubgraphInferrer).
  GraphInference(const ir::Graph& graph, bool planning);

  void Set(int tensor, Input value) {
    env_[tensor] = std::move(value);
    set_[tensor] = true;
  }
  const Input* Find(int tensor) const;
  // The environment entry for `tensor`: set, or a weight (with its value).
  absl::StatusOr<const Input*> Lookup(int tensor);

  // The ShapeContext inputs of `node` from the environment.
  absl::StatusOr<std::vector<Input>> NodeInputs(const ir::Node& node);
  // Runs `node`'s shape function and records its outputs.
  absl::Status InferNode(const ir::Node& node);

  // Infers a body from its inputs; captures come from the environment.
  absl::StatusOr<std::vector<Output>> Infer(int subgraph, absl::Span<const Input> inputs) override;
  bool planning() const override { return planning_; }

 private:
  // Whether `node` is an op Fold may evaluate (planning, foldable, a CPU kernel).
  bool MayFold(const ir::Node& node) const;
  // Evaluates `node` when it is small shape arithmetic whose inputs are known;
  // false when it is not such a node.
  absl::StatusOr<bool> Fold(const ir::Node& node, absl::Span<const Input> inputs,
                            absl::Span<const Output> outputs);

  const ir::Graph& graph_;
  const bool planning_;
  // Indexed by tensor (graph_.tensors): a vector, not a map, since a load
  // or a plan visits most tensors; set_[t] says whether env_[t] is filled.
  std::vector<Input> env_;
  std::vector<bool> set_;
  std::deque<TensorView> weight_views_;
  std::deque<Tensor> folded_;
  std::deque<TensorView> folded_views_;
};

}  // namespace grove::runtime

#endif  // GROVE_LIB_RUNTIME_SHAPE_INFERENCE_H_
