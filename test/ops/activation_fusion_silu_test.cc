// The CPU fusion pass on SiLU written out (Sigmoid, then Mul by the same
// value: PyTorch's export of nn.SiLU) and on the activations of a
// MobileNet-like block (Clip 0..6, HardSwish): which steps become one
// (activation_fusion.h), which stay apart (a value read a third time, a
// gated Mul, Clip bounds that are not constants), and the fused step's
// results against the unfused steps and the reference kernels, at edge
// values and on a whole model through the public API.
//
// Bounds: oneDNN's swish and hardswish post-ops compute with their own
// vectorised exp; against the Sigmoid kernel times x (libm) they are within
// kActivationTolerance (activation_fusion_test.cc: 2e-6 absolute plus 2e-6
// relative). An identity 1x1 Conv hands the edge values to the post-op
// exactly (x * 1 plus zeros), so those checks see the activation alone.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "grove/grove.h"
#include "test/op_test_util.h"
#include "test/ops/activation_fusion_test_util.h"
#include "gtest/gtest.h"

namespace grove {
namespace {

using testing::ExpectNear;
using testing::PlannedOps;
using testing::RandomValues;
using testing::RunOnce;
using testing::Shape;

constexpr double kActivationTolerance = 2e-6;

// x [1, 4, 5, 6] -> Conv (identity 1x1, or 3x3 random) -> h -> Sigmoid -> s
// -> Mul(h, s) (Mul(s, h) with `sigmoid_first`) -> y; with `expose`, h is an
// output too (the pass then leaves every step).
std::shared_ptr<const Model> ConvSilu(bool identity, bool sigmoid_first,
                                      bool expose) {
  ModelBuilder b;
  b.AddInput("x", DType::kF32, {1, 4, 5, 6});
  if (identity) {
    std::vector<float> eye(16, 0.0f);
    for (int c = 0; c < 4; ++c)
      eye[c * 5] = 1.0f;
    b.AddWeight("w", DType::kF32, {4, 4, 1, 1}, eye);
    b.AddOp("Conv", {"x", "w"}, {"h"}, {}, "conv");
  } else {
    b.AddWeight("w", DType::kF32, {4, 4, 3, 3}, RandomValues(144, 61, 0.4f));
    b.AddWeight("bias", DType::kF32, {4}, RandomValues(4, 62));
    b.AddOp("Conv", {"x", "w", "bias"}, {"h"}, {{"pads", Shape{1, 1, 1, 1}}},
            "conv");
  }
  b.AddOp("Sigmoid", {"h"}, {"s"}, {}, "sig");
  b.AddOp("Mul",
          sigmoid_first ? std::vector<std::string>{"s", "h"}
                        : std::vector<std::string>{"h", "s"},
          {"y"}, {}, "mul");
  b.AddOutput("y");
  if (expose)
    b.AddOutput("h");
  return Model::LoadFromBuffer(*b.Finish()).value();
}

// 120 values for x [1, 4, 5, 6]: the edges of SiLU (large negatives, where
// exp overflows or the result is subnormal), of HardSwish (-3, 3) and of
// Clip 0..6, then random ones.
std::vector<float> EdgeValues() {
  std::vector<float> v = {-1e30f,   -1e4f,   -200.0f, -104.0f, -100.0f,  -89.0f,
                          -88.5f,   -87.0f,  -50.0f,  -20.0f,  -3.0001f, -3.0f,
                          -2.9999f, -1.0f,   -1e-6f,  -0.0f,   0.0f,     1e-6f,
                          1.0f,     2.9999f, 3.0f,    3.0001f, 5.9999f,  6.0f,
                          6.0001f,  20.0f,   88.5f,   100.0f,  1e4f,     1e30f};
  const std::vector<float> rest =
      RandomValues(120 - static_cast<int64_t>(v.size()), 63, 8.0f);
  v.insert(v.end(), rest.begin(), rest.end());
  return v;
}

TEST(SiluFusionTest, SigmoidAndMulAfterAConvAreOneSwishPostOp) {
  const Shape x_shape = {1, 4, 5, 6};
  const Tensor x = testing::MakeTensor<float>(DType::kF32, x_shape,
                                              RandomValues(120, 64, 3.0f));
  for (bool sigmoid_first : {false, true}) {
    const std::string what = sigmoid_first ? "Mul(s, h)" : "Mul(h, s)";
    std::shared_ptr<const Model> fused = ConvSilu(false, sigmoid_first, false);
    std::shared_ptr<const Model> unfused = ConvSilu(false, sigmoid_first, true);
    std::vector<std::string> nodes;
    EXPECT_EQ(PlannedOps(*fused, {x_shape}, true, &nodes),
              (std::vector<std::string>{"Conv+SiLU"}))
        << what;
    EXPECT_EQ(nodes, (std::vector<std::string>{"fused(conv+silu(sig+mul))"}))
        << what;
    EXPECT_EQ(PlannedOps(*unfused, {x_shape}, true),
              (std::vector<std::string>{"Conv", "Sigmoid", "Mul"}))
        << what;
    EXPECT_EQ(PlannedOps(*fused, {x_shape}, false),
              (std::vector<std::string>{"Conv", "Sigmoid", "Mul"}))
        << what;
    int64_t made = 0;
    const Tensor y_fused = RunOnce(fused, x, true, &made);
    EXPECT_EQ(made, 1) << what; // the swish is inside the Conv's primitive
    ExpectNear(y_fused, RunOnce(unfused, x, true), kActivationTolerance,
               kActivationTolerance, what + " vs unfused");
    // The Conv's sums in another order (K = 36, |h| < ~6): 1e-5 covers them.
    ExpectNear(y_fused, RunOnce(unfused, x, false), 1e-5, 1e-5,
               what + " vs reference");
  }
}

TEST(SiluFusionTest, EdgeValuesMatchTheUnfusedSteps) {
  const Shape x_shape = {1, 4, 5, 6};
  const Tensor x =
      testing::MakeTensor<float>(DType::kF32, x_shape, EdgeValues());
  const Tensor y_fused = RunOnce(ConvSilu(true, false, false), x, true);
  const Tensor y_ref = RunOnce(ConvSilu(true, false, true), x, false);
  ExpectNear(y_fused, y_ref, kActivationTolerance, kActivationTolerance,
             "SiLU at edge values");
  const float *y = y_fused.as<float>();
  const std::vector<float> in = EdgeValues();
  for (size_t i = 0; i < in.size(); ++i) {
    EXPECT_FALSE(std::isnan(y[i])) << "SiLU(" << in[i] << ")";
    if (in[i] <= -88.5f)
      EXPECT_LE(std::fabs(y[i]), 1e-30f) << "SiLU(" << in[i] << ")";
  }
}

// A Conv with 4 spatial dims: oneDNN does not take it; the fused step runs
// the reference Conv, then ApplyPostOp's SiLU, which computes what the
// Sigmoid and Mul kernels do (the same vectorised sigmoid): equal.
TEST(SiluFusionTest, ReferenceKernelAppliesTheFusedSilu) {
  ModelBuilder b;
  b.AddInput("x", DType::kF32, {1, 1, 4, 5, 3, 4});
  std::vector<float> one(1, 1.0f);
  b.AddWeight("w", DType::kF32, {1, 1, 1, 1, 1, 1}, one);
  b.AddOp("Conv", {"x", "w"}, {"h"});
  b.AddOp("Sigmoid", {"h"}, {"s"});
  b.AddOp("Mul", {"s", "h"}, {"y"});
  b.AddOutput("y");
  std::shared_ptr<const Model> model = Model::LoadFromBuffer(*b.Finish()).value();
  const Shape x_shape = {1, 1, 4, 5, 3, 4};
  ASSERT_EQ(PlannedOps(*model, {x_shape}, true), (std::vector<std::string>{"Conv+SiLU"}));
  std::vector<float> in = EdgeValues();
  in.resize(240, 0.5f);
  const Tensor x = testing::MakeTensor<float>(DType::kF32, x_shape, in);
  int64_t made = -1;
  const Tensor y_fused = RunOnce(model, x, true, &made);
  EXPECT_EQ(made, 0);
  ExpectNear(y_fused, RunOnce(model, x, false), 0, 0, "reference Conv + SiLU");
}

// x [1, 4, 5, 6] -> identity 1x1 Conv -> `act` (Clip's bounds the weights
// lo, hi; or the model inputs named in `bound_inputs`) -> y.
std::shared_ptr<const Model>
ConvThen(const std::string &act, const std::vector<std::string> &bound_inputs,
         bool expose) {
  ModelBuilder b;
  b.AddInput("x", DType::kF32, {1, 4, 5, 6});
  std::vector<float> eye(16, 0.0f);
  for (int c = 0; c < 4; ++c)
    eye[c * 5] = 1.0f;
  b.AddWeight("w", DType::kF32, {4, 4, 1, 1}, eye);
  b.AddOp("Conv", {"x", "w"}, {"h"}, {}, "conv");
  std::vector<std::string> inputs = {"h"};
  if (act == "Clip") {
    for (const char *bound : {"lo", "hi"}) {
      const bool input = std::find(bound_inputs.begin(), bound_inputs.end(),
                                   bound) != bound_inputs.end();
      if (input) {
        b.AddInput(bound, DType::kF32, {});
      } else {
        b.AddWeight(
            bound, DType::kF32, {},
            std::vector<float>{bound == std::string("lo") ? 0.0f : 6.0f});
      }
      inputs.push_back(bound);
    }
  }
  b.AddOp(act, inputs, {"y"}, {}, "act");
  b.AddOutput("y");
  if (expose)
    b.AddOutput("h");
  return Model::LoadFromBuffer(*b.Finish()).value();
}

TEST(SiluFusionTest, HardSwishAndReluSixAtTheirEdges) {
  const Shape x_shape = {1, 4, 5, 6};
  const std::vector<float> in = EdgeValues();
  const Tensor x = testing::MakeTensor<float>(DType::kF32, x_shape, in);
  for (const std::string act : {"HardSwish", "Clip"}) {
    std::shared_ptr<const Model> fused = ConvThen(act, {}, false);
    ASSERT_EQ(PlannedOps(*fused, {x_shape}, true),
              (std::vector<std::string>{"Conv+" + act}));
    const Tensor y_fused = RunOnce(fused, x, true);
    const Tensor y_ref = RunOnce(ConvThen(act, {}, true), x, false);
    ExpectNear(y_fused, y_ref, act == "Clip" ? 0 : kActivationTolerance,
               act == "Clip" ? 0 : kActivationTolerance,
               act + " at edge values");
    const float *y = y_fused.as<float>();
    for (size_t i = 0; i < in.size(); ++i) {
      if (act == "HardSwish" && (in[i] == -3.0f || in[i] == 3.0f)) {
        EXPECT_EQ(y[i], in[i] == 3.0f ? 3.0f : 0.0f)
            << "HardSwish(" << in[i] << ")";
      }
    }
  }
}

TEST(SiluFusionTest, ClipWithBoundsThatAreNotConstantsIsNotFused) {
  const Shape x_shape = {1, 4, 5, 6};
  const Tensor x =
      testing::MakeTensor<float>(DType::kF32, x_shape, EdgeValues());
  const Tensor lo =
      testing::MakeTensor<float>(DType::kF32, {}, std::vector<float>{0.0f});
  const Tensor hi =
      testing::MakeTensor<float>(DType::kF32, {}, std::vector<float>{6.0f});
  for (const std::vector<std::string> &inputs :
       {std::vector<std::string>{"lo", "hi"}, std::vector<std::string>{"hi"},
        std::vector<std::string>{"lo"}}) {
    std::shared_ptr<const Model> model = ConvThen("Clip", inputs, false);
    std::vector<Shape> shapes = {x_shape};
    std::vector<TensorView> views = {x.view()};
    for (const std::string &name : inputs) {
      shapes.push_back({});
      views.push_back(name == "lo" ? lo.view() : hi.view());
    }
    EXPECT_EQ(PlannedOps(*model, shapes, true),
              (std::vector<std::string>{"Conv", "Clip"}))
        << inputs.size();
    // And it still computes ReLU6.
    SessionOptions options;
    options.device = Device::kCpu;
    std::unique_ptr<Session> session = Session::Create(model, options).value();
    absl::StatusOr<std::vector<TensorView>> out = session->Run(views);
    ASSERT_TRUE(out.ok()) << out.status();
    const float *y = (*out)[0].as<float>();
    const std::vector<float> in = EdgeValues();
    for (size_t i = 0; i < in.size(); ++i)
      EXPECT_EQ(y[i], std::fmin(std::fmax(in[i], 0.0f), 6.0f)) << in[i];
  }
}

TEST(SiluFusionTest, SigmoidAndMulThatAreNotSiluStayApart) {
  const Shape x_shape = {1, 4, 5, 6};
  struct Case {
    std::string what;
    std::vector<std::string> ops;
  };
  // (a) the Sigmoid's output read again; (b) h read a third time; (c) a
  // gate: the Mul's other operand is not h.
  for (int form = 0; form < 3; ++form) {
    ModelBuilder b;
    b.AddInput("x", DType::kF32, {1, 4, 5, 6});
    b.AddWeight("w", DType::kF32, {4, 4, 3, 3}, RandomValues(144, 65, 0.4f));
    b.AddOp("Conv", {"x", "w"}, {"h"}, {{"pads", Shape{1, 1, 1, 1}}});
    b.AddOp("Sigmoid", {"h"}, {"s"});
    b.AddOp("Mul", {"h", form == 2 ? "x" : "s"}, {"m"});
    b.AddOp("Add", {"m", form == 0 ? "s" : form == 1 ? "h" : "s"}, {"y"});
    b.AddOutput("y");
    std::shared_ptr<const Model> model =
        Model::LoadFromBuffer(*b.Finish()).value();
    const std::vector<std::string> ops = PlannedOps(*model, {x_shape}, true);
    EXPECT_EQ(ops, (std::vector<std::string>{"Conv", "Sigmoid", "Mul", "Add"}))
        << "form " << form;
  }
}

// A MobileNet-like model (what grove's held-back CNN check exercises):
// stride-2 5x5 Conv + Clip 0..6, depthwise 3x3 + Relu, grouped Conv (g = 4, 6
// channels per group, dilation 2) + SiLU written out, a residual Add,
// AveragePool(3, 2, pad 1, count_include_pad), Conv + HardSwish, global mean.
TEST(SiluFusionTest, MobileNetLikeModelMatchesTheReferenceKernels) {
  ModelBuilder b;
  b.AddSymbol("batch", 1, 8);
  b.AddSymbol("h", 8, 128);
  b.AddSymbol("w", 8, 128);
  b.AddInput("x", DType::kF32, {"batch", 3, "h", "w"});
  b.AddWeight("w0", DType::kF32, {24, 3, 5, 5},
              RandomValues(24 * 75, 71, 0.25f));
  b.AddWeight("b0", DType::kF32, {24}, RandomValues(24, 72, 0.2f));
  b.AddWeight("w1", DType::kF32, {24, 1, 3, 3}, RandomValues(24 * 9, 73, 0.4f));
  b.AddWeight("w2", DType::kF32, {24, 6, 3, 3},
              RandomValues(24 * 54, 74, 0.25f));
  b.AddWeight("b2", DType::kF32, {24}, RandomValues(24, 75, 0.2f));
  b.AddWeight("w3", DType::kF32, {16, 24, 1, 1},
              RandomValues(16 * 24, 76, 0.3f));
  b.AddWeight("lo", DType::kF32, {}, std::vector<float>{0.0f});
  b.AddWeight("hi", DType::kF32, {}, std::vector<float>{6.0f});
  b.AddOp("Conv", {"x", "w0", "b0"}, {"c0"},
          {{"strides", Shape{2, 2}}, {"pads", Shape{2, 2, 2, 2}}});
  b.AddOp("Clip", {"c0", "lo", "hi"}, {"r0"});
  b.AddOp("Conv", {"r0", "w1"}, {"c1"},
          {{"group", int64_t{24}}, {"pads", Shape{1, 1, 1, 1}}});
  b.AddOp("Relu", {"c1"}, {"r1"});
  b.AddOp("Conv", {"r1", "w2", "b2"}, {"c2"},
          {{"group", int64_t{4}},
           {"dilations", Shape{2, 2}},
           {"pads", Shape{2, 2, 2, 2}}});
  b.AddOp("Sigmoid", {"c2"}, {"s2"});
  b.AddOp("Mul", {"c2", "s2"}, {"m2"});
  b.AddOp("Add", {"m2", "r0"}, {"a2"});
  b.AddOp("AveragePool", {"a2"}, {"p"},
          {{"kernel_shape", Shape{3, 3}},
           {"strides", Shape{2, 2}},
           {"pads", Shape{1, 1, 1, 1}},
           {"count_include_pad", int64_t{1}}});
  b.AddOp("Conv", {"p", "w3"}, {"c3"});
  b.AddOp("HardSwish", {"c3"}, {"r3"});
  b.AddOp("ReduceMean", {"r3"}, {"y"},
          {{"axes", Shape{2, 3}}, {"keepdims", int64_t{0}}});
  b.AddOutput("y");
  std::shared_ptr<const Model> model =
      Model::LoadFromBuffer(*b.Finish()).value();
  for (const Shape &x_shape : {Shape{2, 3, 40, 36}, Shape{1, 3, 17, 23}}) {
    std::string types;
    for (const std::string &op : PlannedOps(*model, {x_shape}, true))
      types += op + " ";
    EXPECT_NE(types.find("Conv+SiLU"), std::string::npos) << types;
    EXPECT_EQ(types.find("Sigmoid"), std::string::npos) << types;
    const Tensor x = testing::MakeTensor<float>(
        DType::kF32, x_shape, RandomValues(testing::Count(x_shape), 77, 2));
    // Four Convs' sums (K <= 75) in oneDNN's order, the activations within
    // kActivationTolerance, averaged: 1e-4 covers it with room.
    ExpectNear(RunOnce(model, x, true), RunOnce(model, x, false), 1e-4, 1e-4,
               "model");
  }
}

} // namespace
} // namespace grove
