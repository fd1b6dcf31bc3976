// If whose branches differ in rank. Traced models test a dim and squeeze or
// unsqueeze (`if x.shape[-1] == 1: x = x.squeeze(-1)`, Silero VAD has a dozen):
// the condition is shape arithmetic that a plan folds, so the plan knows the
// branch and its rank. A model like that loads; a plan where the condition
// depends on data and the ranks differ is refused with a clear error.
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "grove/grove.h"
#include "gtest/gtest.h"
#include "test/model_test_util.h"

namespace grove {
namespace {

using ::testing::HasSubstr;
using testing::CpuSession;
using testing::LoadOrDie;
using testing::ToVector;

// y = Relu(x.shape[-1] == 1 ? Squeeze(x, -1) : x), x f32[rows, cols]; the
// branches are nested one level inside an If on a data flag, as in Silero
// VAD, whose outer If picks the sample rate.
absl::StatusOr<std::vector<uint8_t>> BuildSqueezeIfLastDimIsOne() {
  ModelBuilder b;
  b.AddSymbol("rows", 1, 16);
  b.AddSymbol("cols", 1, 16);
  b.AddInput("x", DType::kF32, {"rows", "cols"});
  b.AddInput("flag", DType::kBool, {});
  b.AddWeight("last", DType::kI64, {}, std::vector<int64_t>{-1});
  b.AddWeight("one", DType::kI64, {}, std::vector<int64_t>{1});
  b.AddWeight("axes", DType::kI64, {1}, std::vector<int64_t>{-1});

  // A subgraph belongs to one op, so each outer branch has its own pair.
  int squeeze[2], keep[2];
  for (int k = 0; k < 2; ++k) {
    squeeze[k] = b.AddSubgraph(absl::StrCat("squeeze_", k));
    b.AddOp("Squeeze", {"x", "axes"}, {absl::StrCat("x_squeezed_", k)});
    b.AddOutput(absl::StrCat("x_squeezed_", k));
    keep[k] = b.AddSubgraph(absl::StrCat("keep_", k));
    b.AddOp("Identity", {"x"}, {absl::StrCat("x_kept_", k)});
    b.AddOutput(absl::StrCat("x_kept_", k));
  }

  // The outer If's branches both run the dim test; one negates the result.
  const int outer_then = b.AddSubgraph("outer_then");
  b.AddOp("Shape", {"x"}, {"shape_t"});
  b.AddOp("Gather", {"shape_t", "last"}, {"cols_t"}, {{"axis", int64_t{0}}});
  b.AddOp("Equal", {"cols_t", "one"}, {"is_one_t"});
  b.AddOp("If", {"is_one_t"}, {"z_t"},
          {{"then_branch", SubgraphRef{squeeze[0]}}, {"else_branch", SubgraphRef{keep[0]}}});
  b.AddOp("Relu", {"z_t"}, {"y_t"});
  b.AddOutput("y_t");
  const int outer_else = b.AddSubgraph("outer_else");
  b.AddOp("Shape", {"x"}, {"shape_e"});
  b.AddOp("Gather", {"shape_e", "last"}, {"cols_e"}, {{"axis", int64_t{0}}});
  b.AddOp("Equal", {"cols_e", "one"}, {"is_one_e"});
  b.AddOp("If", {"is_one_e"}, {"z_e"},
          {{"then_branch", SubgraphRef{squeeze[1]}}, {"else_branch", SubgraphRef{keep[1]}}});
  b.AddOp("Neg", {"z_e"}, {"y_e"});
  b.AddOutput("y_e");

  b.SetSubgraph(0);
  b.AddOp("If", {"flag"}, {"y"},
          {{"then_branch", SubgraphRef{outer_then}}, {"else_branch", SubgraphRef{outer_else}}});
  b.AddOutput("y");
  return b.Finish();
}

TEST(IfOnShapeTest, BranchesOfDifferentRankPickedByADimTest) {
  auto session = CpuSession(LoadOrDie(BuildSqueezeIfLastDimIsOne()));
  std::vector<float> x = {-1, 2, -3, 4, 5, -6};
  const std::vector<float> relu = {0, 2, 0, 4, 5, 0}, neg = {1, -2, 3, -4, -5, 6};
  for (bool flag : {true, false}) {
    SCOPED_TRACE(flag ? "Relu" : "Neg");
    const uint8_t f = flag;
    auto column = session->Run({TensorView(DType::kF32, {6, 1}, x.data()), TensorView(DType::kBool, {}, &f)});
    ASSERT_TRUE(column.ok()) << column.status();
    EXPECT_EQ((*column)[0].shape, (std::vector<int64_t>{6}));
    EXPECT_EQ(ToVector((*column)[0]), flag ? relu : neg);
    auto matrix = session->Run({TensorView(DType::kF32, {2, 3}, x.data()), TensorView(DType::kBool, {}, &f)});
    ASSERT_TRUE(matrix.ok()) << matrix.status();
    EXPECT_EQ((*matrix)[0].shape, (std::vector<int64_t>{2, 3}));
    EXPECT_EQ(ToVector((*matrix)[0]), flag ? relu : neg);
  }
}

TEST(IfOnShapeTest, DataDependentConditionWithRanksThatDifferIsRefused) {
  ModelBuilder b;
  b.AddSymbol("n", 1, 16);
  b.AddInput("x", DType::kF32, {"n", 1});
  b.AddInput("flag", DType::kBool, {});
  b.AddWeight("axes", DType::kI64, {1}, std::vector<int64_t>{-1});
  const int squeeze = b.AddSubgraph("squeeze");
  b.AddOp("Squeeze", {"x", "axes"}, {"x_squeezed"});
  b.AddOutput("x_squeezed");
  const int keep = b.AddSubgraph("keep");
  b.AddOp("Identity", {"x"}, {"x_kept"});
  b.AddOutput("x_kept");
  b.SetSubgraph(0);
  b.AddOp("If", {"flag"}, {"z"}, {{"then_branch", SubgraphRef{squeeze}}, {"else_branch", SubgraphRef{keep}}});
  b.AddOp("Relu", {"z"}, {"y"});
  b.AddOutput("y");
  // It loads (a plan could fold the condition) ...
  auto session = CpuSession(LoadOrDie(b.Finish()));
  std::vector<float> x = {1, 2};
  const uint8_t f = 1;
  // ... but the flag is data, so no plan can know the rank of what follows.
  auto out = session->Run({TensorView(DType::kF32, {2, 1}, x.data()), TensorView(DType::kBool, {}, &f)});
  ASSERT_FALSE(out.ok());
  EXPECT_THAT(out.status().message(), HasSubstr("depends on data"));
  EXPECT_THAT(out.status().message(), HasSubstr("rank 1 in then_branch but 2 in else_branch"));
}

TEST(IfOnShapeTest, BranchThatCannotTakeTheShapesDoesNotBlockThePlan) {
  // then: Reshape to [2, 3] (only 6 elements fit); else: Identity. With 4
  // elements only the else branch can run; the plan takes its prediction.
  ModelBuilder b;
  b.AddSymbol("n", 1, 16);
  b.AddInput("x", DType::kF32, {"n"});
  b.AddInput("flag", DType::kBool, {});
  b.AddWeight("shape", DType::kI64, {2}, std::vector<int64_t>{2, 3});
  const int reshape = b.AddSubgraph("reshape");
  b.AddOp("Reshape", {"x", "shape"}, {"x_2x3"});
  b.AddOp("ReduceSum", {"x_2x3"}, {"x_sum"}, {{"keepdims", int64_t{0}}});
  b.AddOutput("x_sum");
  const int keep = b.AddSubgraph("keep");
  b.AddOp("ReduceSum", {"x"}, {"x_kept"}, {{"keepdims", int64_t{0}}});
  b.AddOutput("x_kept");
  b.SetSubgraph(0);
  b.AddOp("If", {"flag"}, {"y"}, {{"then_branch", SubgraphRef{reshape}}, {"else_branch", SubgraphRef{keep}}});
  b.AddOutput("y");
  auto session = CpuSession(LoadOrDie(b.Finish()));
  std::vector<float> x = {1, 2, 3, 4, 5, 6};
  uint8_t f = 0;
  auto out = session->Run({TensorView(DType::kF32, {4}, x.data()), TensorView(DType::kBool, {}, &f)});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(ToVector((*out)[0]), std::vector<float>{10});
  // The data picks the branch that cannot run: an error from that branch.
  f = 1;
  out = session->Run({TensorView(DType::kF32, {4}, x.data()), TensorView(DType::kBool, {}, &f)});
  EXPECT_FALSE(out.ok());
  // Six elements: both branches can run.
  out = session->Run({TensorView(DType::kF32, {6}, x.data()), TensorView(DType::kBool, {}, &f)});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(ToVector((*out)[0]), std::vector<float>{21});
}

}  // namespace
}  // namespace grove
