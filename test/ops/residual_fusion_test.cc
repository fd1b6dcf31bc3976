// A residual Add fused into the Conv before it (activation_fusion.h,
// post_op.h's kResidualAttr): Y = act(Conv(X) [BatchNormalization] + R),
// R a tensor of Y's shape written before the Conv runs. Which steps the pass
// fuses and which it leaves (R written after the Conv, R broadcast, a
// BatchNormalization after the activation), and the fused step's results
// against the reference kernels (oneDNN off: every step its own) on one and
// two threads (the step cut into parts, R cut with Y), with activations
// channels-last or not, through the layout's transposed copies, and where
// oneDNN does not take the Conv (4 spatial dims: the im2col kernel adds R).
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "grove/grove.h"
#include "gtest/gtest.h"
#include "lib/backends/cpu/activation_fusion.h"
#include "lib/backends/cpu/onednn.h"
#include "test/op_test_util.h"
#include "test/ops/activation_fusion_test_util.h"
#include "test/ops/cpu_pass_switches.h"

namespace grove {
namespace {

using testing::ExpectNear;
using testing::PlannedOps;
using testing::RandomValues;
using testing::ScopedChannelsLast;
using testing::ScopedCopiesOnly;
using testing::Shape;
using Attrs = std::vector<std::pair<std::string, AttrValue>>;

struct Block {
  Shape x;                       // [N, C, spatial...]
  std::string residual = "a";    // "a": the first Conv's output; "x": the model's input; "late": written after
  bool batch_norm = false;       // a BatchNormalization between the second Conv and the Add
  bool bias = true;              // the second Conv's B
  std::string activation = "Relu";  // after the Add ("" for none)
  bool broadcast = false;        // R is [1, C, 1...] (not a residual: a channel bias)
  bool expose = false;           // y an output too (then y and R are plain)
  bool parts = false;            // on two threads, the Convs are cut into parts
};

// x -> Conv0 -> Relu -> a -> Conv1 [-> BatchNormalization] -> Add(., R)
// [-> activation] -> y -> Conv -> z, the output: y and R are stored
// channels-last when the pass may (z, an output, is plain). "late": R is
// Sigmoid(a) computed after Conv1 in the model's order.
std::shared_ptr<const Model> ResidualBlock(const Block& blk) {
  ModelBuilder b;
  const Shape& x = blk.x;
  const size_t spatial = x.size() - 2;
  const int64_t c = x[1];
  b.AddInput("x", DType::kF32, std::vector<Dim>(x.begin(), x.end()));
  auto conv = [&](const std::string& in, const std::string& out, bool bias, int seed) {
    Shape w = {c, c};
    for (size_t d = 0; d < spatial; ++d) w.push_back(3);
    b.AddWeight("W_" + out, DType::kF32, w, RandomValues(testing::Count(w), seed, 0.3f));
    std::vector<std::string> inputs = {in, "W_" + out};
    if (bias) {
      b.AddWeight("B_" + out, DType::kF32, {c}, RandomValues(c, seed + 1));
      inputs.push_back("B_" + out);
    }
    b.AddOp("Conv", inputs, {out}, {{"pads", Shape(2 * spatial, 1)}}, "conv_" + out);
  };
  conv("x", "a0", true, 1);
  b.AddOp("Relu", {"a0"}, {"a"}, {}, "relu_a");
  conv("a", "h", blk.bias, 3);
  std::string sum_in = "h";
  if (blk.batch_norm) {
    b.AddWeight("bn_scale", DType::kF32, {c}, RandomValues(c, 61, 1.5f));
    b.AddWeight("bn_bias", DType::kF32, {c}, RandomValues(c, 62));
    b.AddWeight("bn_mean", DType::kF32, {c}, RandomValues(c, 63));
    std::vector<float> var = RandomValues(c, 64);
    for (float& v : var) v = 0.5f + std::fabs(v);
    b.AddWeight("bn_var", DType::kF32, {c}, var);
    b.AddOp("BatchNormalization", {"h", "bn_scale", "bn_bias", "bn_mean", "bn_var"}, {"hn"}, {}, "bn");
    sum_in = "hn";
  }
  std::string r = blk.residual;
  if (blk.broadcast) {
    Shape bias = {1, c};
    for (size_t d = 0; d < spatial; ++d) bias.push_back(1);
    b.AddWeight("cb", DType::kF32, bias, RandomValues(c, 5));
    r = "cb";
  } else if (blk.residual == "late") {
    b.AddOp("Sigmoid", {"a"}, {"late"}, {}, "late");
  }
  const std::string sum = blk.activation.empty() ? "y" : "s";
  b.AddOp("Add", {sum_in, r}, {sum}, {}, "residual");
  if (!blk.activation.empty()) b.AddOp(blk.activation, {"s"}, {"y"}, {}, "act");
  conv("y", "z", true, 7);
  b.AddOutput("z");
  if (blk.expose) b.AddOutput("y");
  return Model::LoadFromBuffer(*b.Finish()).value();
}

// The outputs of two runs (the second replays the plan) of a session.
std::vector<Tensor> RunTwice(const std::shared_ptr<const Model>& model, const Tensor& x, bool onednn, int threads,
                        bool channels_last = true) {
  cpu::ScopedOneDnn scope(onednn);
  ScopedChannelsLast layout(channels_last);
  SessionOptions options;
  options.device = Device::kCpu;
  options.intra_op_threads = threads;
  std::unique_ptr<Session> session = Session::Create(model, options).value();
  std::vector<Tensor> out;
  for (int run = 0; run < 2; ++run) {
    absl::StatusOr<std::vector<TensorView>> views = session->Run({x.view()});
    EXPECT_TRUE(views.ok()) << views.status();
    if (!views.ok()) return {};
    out.clear();
    for (const TensorView& v : *views) out.push_back(Tensor::CopyOf(v).value());
  }
  return out;
}

// The fused steps' results against the reference kernels': the Convs' sums
// in another order (|values| < ~10, K <= 8 x 27): 1e-5 with room.
void ExpectMatchesReference(const Block& blk, const std::string& what) {
  std::shared_ptr<const Model> model = ResidualBlock(blk);
  const Tensor x = testing::MakeTensor<float>(DType::kF32, blk.x, RandomValues(testing::Count(blk.x), 17, 2));
  const std::vector<Tensor> reference = RunTwice(model, x, false, 1);
  ASSERT_EQ(reference.size(), blk.expose ? 2u : 1u) << what;
  for (int threads : {1, 2}) {
    for (bool channels_last : {true, false}) {
      const int64_t parts_before = cpu::OneDnnStepsPartitioned();
      const std::vector<Tensor> got = RunTwice(model, x, true, threads, channels_last);
      if (blk.parts && threads == 2 && channels_last) {
        EXPECT_GE(cpu::OneDnnStepsPartitioned() - parts_before, 3) << what << ": no parts";
      }
      ASSERT_EQ(got.size(), reference.size()) << what;
      for (size_t i = 0; i < got.size(); ++i) {
        ExpectNear(got[i], reference[i], 1e-5, 1e-5,
                   absl::StrCat(what, ": output ", i, ", ", threads, " threads",
                                channels_last ? ", channels-last" : ", plain layout"));
      }
    }
  }
  ScopedCopiesOnly copies;  // the window steps' fallback: X, Y and R transposed through the workspace
  const std::vector<Tensor> copied = RunTwice(model, x, true, 1);
  ASSERT_EQ(copied.size(), reference.size()) << what;
  for (size_t i = 0; i < copied.size(); ++i) {
    ExpectNear(copied[i], reference[i], 1e-5, 1e-5, absl::StrCat(what, ": output ", i, ", transposed copies"));
  }
}

TEST(ResidualFusionTest, TheAddAndItsActivationJoinTheConv) {
  struct Case {
    std::string what;
    Block block;
    std::string fused;  // the second Conv's step
  };
  const std::vector<Case> cases = {
      {"a basic block", {{1, 8, 12, 12}}, "Conv+Add+Relu"},
      {"a basic block, batch 3", {{3, 8, 10, 9}}, "Conv+Add+Relu"},
      {"folded BatchNormalization", {{2, 8, 12, 12}, "a", true}, "Conv+BatchNormalization+Add+Relu"},
      {"no bias, no activation", {{1, 8, 12, 12}, "a", false, false, ""}, "Conv+Add"},
      {"the model's input", {{1, 8, 12, 12}, "x"}, "Conv+Add+Relu"},
      {"1-d, Sigmoid", {{2, 8, 33}, "a", false, true, "Sigmoid"}, "Conv+Add+Sigmoid"},
      {"3-d", {{1, 8, 6, 7, 6}}, "Conv+Add+Relu"},
      {"y an output too", {{2, 8, 12, 12}, "a", false, true, "Relu", false, true}, "Conv+Add+Relu"},
      // 3.7M multiply-adds a Conv: on two threads, parts of rows, R's rows cut with Y's.
      {"in parts", {{1, 16, 40, 40}, "a", true, true, "Relu", false, false, true},
       "Conv+BatchNormalization+Add+Relu"},
      {"in parts, batch 2", {{2, 16, 24, 24}, "x", false, true, "Relu", false, false, true}, "Conv+Add+Relu"},
  };
  for (const Case& c : cases) {
    std::shared_ptr<const Model> model = ResidualBlock(c.block);
    const std::vector<std::string> ops = PlannedOps(*model, {c.block.x}, true);
    ASSERT_GE(ops.size(), 3u) << c.what;
    EXPECT_EQ(ops[1], c.fused) << c.what << ": " << absl::StrJoin(ops, ", ");
    EXPECT_EQ(ops.size(), 3u) << c.what << ": " << absl::StrJoin(ops, ", ");  // Conv+Relu, that, Conv
    ExpectMatchesReference(c.block, c.what);
  }
}

TEST(ResidualFusionTest, WhatIsNotAResidual) {
  // R written after the Conv: the fused step would run before it.
  Block late{{1, 8, 10, 10}, "late"};
  std::vector<std::string> ops = PlannedOps(*ResidualBlock(late), {late.x}, true);
  EXPECT_EQ(ops, (std::vector<std::string>{"Conv+Relu", "Conv", "Sigmoid", "Add", "Relu", "Conv"}))
      << absl::StrJoin(ops, ", ");
  ExpectMatchesReference(late, "R written after the Conv");
  // A [1, C, 1, 1] channel bias: a broadcast, not a tensor of Y's shape.
  Block broadcast{{1, 8, 10, 10}};
  broadcast.broadcast = true;
  ops = PlannedOps(*ResidualBlock(broadcast), {broadcast.x}, true);
  EXPECT_EQ(ops, (std::vector<std::string>{"Conv+Relu>Conv", "Add", "Relu", "Conv"}))
      << absl::StrJoin(ops, ", ");
  ExpectMatchesReference(broadcast, "a channel bias");
  // oneDNN off: nothing fused.
  Block basic{{1, 8, 10, 10}};
  ops = PlannedOps(*ResidualBlock(basic), {basic.x}, false);
  EXPECT_EQ(ops, (std::vector<std::string>{"Conv", "Relu", "Conv", "Add", "Relu", "Conv"}))
      << absl::StrJoin(ops, ", ");
}

// A Conv with 4 spatial dims: oneDNN does not take it; the fused step's
// im2col kernel adds R after its sums and before the activation, which is
// what the Add and Relu steps compute.
TEST(ResidualFusionTest, TheReferenceKernelAddsTheResidual) {
  const Block blk{{1, 2, 4, 3, 4, 3}};
  std::shared_ptr<const Model> model = ResidualBlock(blk);
  const std::vector<std::string> ops = PlannedOps(*model, {blk.x}, true);
  ASSERT_GE(ops.size(), 2u);
  EXPECT_EQ(ops[1], "Conv+Add+Relu") << absl::StrJoin(ops, ", ");
  const Tensor x = testing::MakeTensor<float>(DType::kF32, blk.x, RandomValues(testing::Count(blk.x), 18, 2));
  const int64_t before = cpu::OneDnnStepsMade();
  const std::vector<Tensor> fused = RunTwice(model, x, true, 1);
  EXPECT_EQ(cpu::OneDnnStepsMade(), before) << "oneDNN took a 4-d Conv";
  const std::vector<Tensor> reference = RunTwice(model, x, false, 1);
  ASSERT_EQ(fused.size(), reference.size());
  for (size_t i = 0; i < fused.size(); ++i) ExpectNear(fused[i], reference[i], 0, 0, "output " + std::to_string(i));
}

}  // namespace
}  // namespace grove

namespace grove {
namespace {

// The pass's attribute and the fused step's fourth input exist only in a
// plan: a model file whose Conv node carries either is refused when loaded.
TEST(ResidualFusionTest, AModelCannotSetTheResidualItself) {
  for (bool fourth_input : {false, true}) {
    ModelBuilder b;
    b.AddInput("x", DType::kF32, {1, 4, 6, 6});
    b.AddWeight("w", DType::kF32, {4, 4, 3, 3}, testing::RandomValues(144, 3));
    b.AddWeight("r", DType::kF32, {1, 4, 6, 6}, testing::RandomValues(144, 5));
    std::vector<std::string> inputs = {"x", "w"};
    Attrs attrs = {{"pads", testing::Shape{1, 1, 1, 1}}};
    if (fourth_input) {
      inputs = {"x", "w", "", "r"};
    } else {
      attrs.push_back({"grove_residual", int64_t{1}});
    }
    b.AddOp("Conv", inputs, {"y"}, attrs);
    b.AddOutput("y");
    absl::StatusOr<std::vector<uint8_t>> bytes = b.Finish();
    ASSERT_TRUE(bytes.ok()) << bytes.status();
    absl::StatusOr<std::shared_ptr<const Model>> model = Model::LoadFromBuffer(*bytes);
    ASSERT_FALSE(model.ok()) << (fourth_input ? "a Conv of 4 inputs" : "grove_residual") << " was loaded";
    EXPECT_NE(std::string(model.status().message()).find(fourth_input ? "has 4 inputs" : "grove_residual"),
              std::string::npos)
        << model.status();
  }
}

}  // namespace
}  // namespace grove
