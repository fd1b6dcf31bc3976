// Valid model files whose shapes multiply out past the size limit, through
// the public API: refused by name when the plan is made (or the model is
// loaded), never a wrapped arena size that a kernel writes past. Empty
// outputs are not computed, however large the tensor's other dims.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "grove/grove.h"
#include "test/model_test_util.h"

namespace grove::testing {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

Tensor F32(std::vector<int64_t> shape, float v = 1.0f) {
  Tensor t = Tensor::Create(DType::kF32, std::move(shape)).value();
  for (int64_t i = 0; i < t.view().num_elements(); ++i) t.as<float>()[i] = v;
  return t;
}

// Runs a one-op model `op(x, weights...)` on x of `shape`.
absl::StatusOr<std::vector<Tensor>> RunOneOp(const std::string& op, std::vector<int64_t> shape,
                                             std::vector<std::pair<std::string, AttrValue>> attrs,
                                             std::vector<std::pair<std::string, std::vector<int64_t>>> weights = {},
                                             int outputs = 1) {
  ModelBuilder b;
  std::vector<Dim> dims(shape.begin(), shape.end());
  b.AddInput("x", DType::kF32, dims);
  std::vector<std::string> ins = {"x"};
  for (auto& [name, wshape] : weights) {
    int64_t n = 1;
    for (int64_t d : wshape) n *= d;
    b.AddWeight(name, DType::kF32, wshape, std::vector<float>(static_cast<size_t>(n), 0.5f));
    ins.push_back(name);
  }
  std::vector<std::string> outs;
  for (int i = 0; i < outputs; ++i) outs.push_back(absl::StrCat("y", i));
  b.AddOp(op, ins, outs, std::move(attrs), "the_op");
  for (const std::string& o : outs) b.AddOutput(o);
  absl::StatusOr<std::vector<uint8_t>> bytes = b.Finish();
  if (!bytes.ok()) return bytes.status();
  absl::StatusOr<std::shared_ptr<const Model>> model = Model::LoadFromBuffer(*bytes);
  if (!model.ok()) return model.status();
  std::unique_ptr<Session> session = CpuSession(*model);
  const Tensor x = F32(shape);
  absl::StatusOr<std::vector<TensorView>> out = session->Run({x.view()});
  if (!out.ok()) return out.status();
  std::vector<Tensor> owned;
  for (const TensorView& t : *out) owned.push_back(Tensor::CopyOf(t).value());
  return owned;
}

TEST(SizeLimitsTest, PoolingWithHugePadsIsRefusedWhenPlanned) {
  const int64_t p = int64_t{1} << 22;
  absl::StatusOr<std::vector<Tensor>> out =
      RunOneOp("MaxPool", {1, 1, 2, 2, 2},
               {{"kernel_shape", std::vector<int64_t>{1, 1, 1}}, {"pads", std::vector<int64_t>{p, p, p, p, p, p}}});
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(out.status().message(), AllOf(HasSubstr("MaxPool 'the_op'"), HasSubstr("256 TiB limit")));
  out = RunOneOp("AveragePool", {1, 1, 2, 2, 2},
                 {{"kernel_shape", std::vector<int64_t>{1, 1, 1}}, {"pads", std::vector<int64_t>{p, p, p, p, p, p}}});
  ASSERT_FALSE(out.ok());
  EXPECT_THAT(out.status().message(), HasSubstr("256 TiB limit"));
}

TEST(SizeLimitsTest, ConvTransposeOutputShapeIsCheckedAsAProduct) {
  const int64_t d = int64_t{1} << 21;
  absl::StatusOr<std::vector<Tensor>> out =
      RunOneOp("ConvTranspose", {1, 1, 1, 1, 1}, {{"output_shape", std::vector<int64_t>{d, d, d}}},
               {{"w", {1, 1, 1, 1, 1}}});
  ASSERT_FALSE(out.ok());
  EXPECT_THAT(out.status().message(), AllOf(HasSubstr("ConvTranspose 'the_op'"), HasSubstr("256 TiB limit")));
}

TEST(SizeLimitsTest, StaticInputDimsPastTheLimitAreRefusedAtLoadOrRun) {
  ModelBuilder b;
  b.AddInput("x", DType::kF32, {Dim(int64_t{1} << 32), Dim(int64_t{1} << 32)});
  b.AddOp("Relu", {"x"}, {"y"});
  b.AddOutput("y");
  absl::StatusOr<std::shared_ptr<const Model>> model = Model::LoadFromBuffer(b.Finish().value());
  if (!model.ok()) {
    EXPECT_THAT(model.status().message(), HasSubstr("256 TiB"));
    return;
  }
  std::unique_ptr<Session> session = CpuSession(*model);
  const Tensor small = F32({2, 2});
  absl::StatusOr<std::vector<TensorView>> out = session->Run({small.view()});
  EXPECT_FALSE(out.ok());
}

// An empty tensor whose other dims hold 2^40 rows: within the limit, so it
// is planned, but nothing loops over those rows (an empty output is not
// computed) and the answer comes at once.
TEST(SizeLimitsTest, EmptyOutputsOverManyRowsAreNotComputed) {
  ModelBuilder b;
  b.AddInput("x", DType::kF32, {Dim(2), Dim(0)});
  b.AddWeight("shape", DType::kI64, {3}, std::vector<int64_t>{int64_t{1} << 20, int64_t{1} << 20, 0});
  b.AddWeight("axes", DType::kI64, {1}, std::vector<int64_t>{2});
  b.AddWeight("k", DType::kI64, {1}, std::vector<int64_t>{0});
  b.AddOp("Reshape", {"x", "shape"}, {"r"}, {{"allowzero", int64_t{1}}});
  b.AddOp("CumSum", {"r", "axes"}, {"c"});
  b.AddOp("TopK", {"c", "k"}, {"v", "i"});
  b.AddOp("ReduceSum", {"v", "axes"}, {"s"}, {{"keepdims", int64_t{0}}});
  b.AddOutput("c");
  b.AddOutput("i");
  b.AddOutput("s");
  std::shared_ptr<const Model> model = LoadOrDie(b.Finish());
  std::unique_ptr<Session> session = CpuSession(model);
  const Tensor x = F32({2, 0});
  absl::StatusOr<std::vector<TensorView>> out = session->Run({x.view()});
  // The sum over the empty axis is 2^40 zeros: 4 TiB, within the limit but
  // not within this machine, so the arena is refused when allocated; the
  // empty steps before it never looped over their 2^40 rows.
  ASSERT_FALSE(out.ok()) << "a 4 TiB arena was allocated";
  EXPECT_NE(out.status().code(), absl::StatusCode::kInternal) << out.status();
}

TEST(SizeLimitsTest, EmptyStepsStillGiveTheirEmptyOutputs) {
  ModelBuilder b;
  b.AddInput("x", DType::kF32, {Dim(3), Dim(0)});
  b.AddWeight("axes", DType::kI64, {1}, std::vector<int64_t>{0});
  b.AddWeight("k", DType::kI64, {1}, std::vector<int64_t>{0});
  b.AddOp("CumSum", {"x", "axes"}, {"c"});
  b.AddOp("TopK", {"c", "k"}, {"v", "i"});
  b.AddOp("ReduceSum", {"c", "axes"}, {"s"}, {{"keepdims", int64_t{0}}});
  b.AddOutput("c");
  b.AddOutput("i");
  b.AddOutput("s");
  std::unique_ptr<Session> session = CpuSession(LoadOrDie(b.Finish()));
  const Tensor x = F32({3, 0});
  absl::StatusOr<std::vector<TensorView>> out = session->Run({x.view()});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].shape, (std::vector<int64_t>{3, 0}));
  EXPECT_EQ((*out)[1].shape, (std::vector<int64_t>{3, 0}));
  EXPECT_EQ((*out)[1].dtype, DType::kI64);
  EXPECT_EQ((*out)[2].shape, (std::vector<int64_t>{0}));
}

}  // namespace
}  // namespace grove::testing
