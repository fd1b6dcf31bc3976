// GraphInference's environment: tensors set, weights looked up on first use
// (with their values), shape functions' outputs recorded.
#include "lib/runtime/shape_inference.h"

#include <cstdint>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lib/runtime/registry.h"

namespace grove::runtime {
namespace {

using ::testing::HasSubstr;

// y = Add(x, w): x [batch, 4] the input, w [4] a weight.
struct AddGraph {
  alignas(64) float weight[4] = {1, 2, 3, 4};
  ir::Graph graph;

  AddGraph() {
    graph.symbols = {{"batch", 1, 64}};
    graph.tensors.resize(3);
    graph.tensors[0] = {"x", DType::kF32, true, {ir::SymDim::Symbol(0), 4}};
    graph.tensors[1] = {"w", DType::kF32, true, {4}, true, reinterpret_cast<const uint8_t*>(weight), sizeof(weight)};
    graph.tensors[2] = {"y", DType::kF32};
    graph.subgraphs.resize(1);
    ir::Subgraph& main = graph.subgraphs[0];
    main.name = "main";
    main.inputs = {0};
    main.outputs = {2};
    main.nodes.resize(1);
    ir::Node& add = main.nodes[0];
    add.type = "Add";
    add.def = GlobalOpRegistry().Find("Add");
    add.inputs = {0, 1};
    add.outputs = {2};
  }
};

TEST(GraphInferenceTest, FindsOnlyWhatWasSet) {
  AddGraph g;
  GraphInference inference(g.graph, /*planning=*/false);
  EXPECT_EQ(inference.Find(0), nullptr);
  EXPECT_EQ(inference.Find(-1), nullptr);
  EXPECT_EQ(inference.Find(3), nullptr);  // past the graph's tensors
  const ir::SymShape x_shape{ir::SymDim::Symbol(0), 4};
  inference.Set(0, GraphInference::Input{true, DType::kF32, x_shape, nullptr});
  ASSERT_NE(inference.Find(0), nullptr);
  EXPECT_EQ(inference.Find(0)->shape, x_shape);
  EXPECT_EQ(inference.Find(1), nullptr);  // a weight is entered when looked up

  absl::StatusOr<const GraphInference::Input*> w = inference.Lookup(1);
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ((*w)->shape, (ir::SymShape{4}));
  ASSERT_NE((*w)->value, nullptr);
  EXPECT_EQ((*w)->value->data, static_cast<const void*>(g.weight));
  EXPECT_EQ((*w)->value->shape, (std::vector<int64_t>{4}));
  EXPECT_EQ(*inference.Lookup(1), *w);  // entered once
  EXPECT_EQ(inference.Find(1), *w);

  absl::StatusOr<const GraphInference::Input*> y = inference.Lookup(2);
  ASSERT_FALSE(y.ok());
  EXPECT_EQ(y.status().code(), absl::StatusCode::kInternal);
  EXPECT_EQ(y.status().message(), "shape inference: tensor 'y' has no shape yet");
}

TEST(GraphInferenceTest, RecordsEachNodesOutputs) {
  AddGraph g;
  GraphInference inference(g.graph, /*planning=*/false);
  const ir::SymShape x_shape{ir::SymDim::Symbol(0), 4};
  absl::StatusOr<std::vector<GraphInference::Output>> outs =
      inference.Infer(0, {GraphInference::Input{true, DType::kF32, x_shape, nullptr}});
  ASSERT_TRUE(outs.ok()) << outs.status();
  ASSERT_EQ(outs->size(), 1u);
  EXPECT_EQ((*outs)[0].dtype, DType::kF32);
  EXPECT_EQ((*outs)[0].shape, x_shape);
  ASSERT_NE(inference.Find(2), nullptr);
  EXPECT_EQ(inference.Find(2)->shape, x_shape);
  EXPECT_EQ(inference.Find(2)->value, nullptr);

  // A body's inputs that do not broadcast: the shape function's error.
  GraphInference bad(g.graph, /*planning=*/false);
  absl::StatusOr<std::vector<GraphInference::Output>> none =
      bad.Infer(0, {GraphInference::Input{true, DType::kF32, {ir::SymDim::Symbol(0), 5}, nullptr}});
  ASSERT_FALSE(none.ok());
  EXPECT_THAT(none.status().message(), HasSubstr("input 0 (A) [batch, 5] and input 1 (B) [4]: shapes do not broadcast"));
  EXPECT_EQ(bad.Find(2), nullptr);
}

}  // namespace
}  // namespace grove::runtime
