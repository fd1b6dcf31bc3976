// The CPU plan pass that fuses an activation into the Conv, MatMul or Gemm
// step before it (lib/backends/cpu/activation_fusion.h): which steps it
// fuses and which it leaves (an intermediate read twice or that is an
// output, oneDNN off), what DescribeExecution (grove inspect) shows, and the
// fused step's results for every activation it takes on each base op:
//  - against the same model unfused (the base's output also an output of the
//    model, so the pass leaves it; oneDNN computes the base in both): Relu,
//    LeakyRelu and Clip equal, the others within kActivationTolerance;
//  - against the reference kernels (oneDNN off), within the sum bound of the
//    base op (onednn_test.cc) plus that tolerance;
//  - where oneDNN does not take the base (a Conv with 4 spatial dims), the
//    reference kernel followed by ApplyPostOp equals the unfused steps.
//
// kActivationTolerance: oneDNN's eltwise post-ops compute tanh, logistic,
// gelu, elu, soft_relu and hardswish with their own vectorised polynomials;
// measured against libm on these inputs (|y| < ~8), they are within a few
// float ulps of 1: 2e-6 absolute plus 2e-6 relative covers them with room.
#include <cmath>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "grove/grove.h"
#include "lib/backends/cpu/onednn.h"
#include "test/op_test_util.h"
#include "test/ops/activation_fusion_test_util.h"
#include "test/ops/onednn_isa.h"

namespace grove {
namespace {

using Attrs = std::vector<std::pair<std::string, AttrValue>>;
using testing::ExpectNear;
using testing::Shape;
using testing::PlannedOps;
using testing::RandomValues;
using testing::RunOnce;

constexpr double kActivationTolerance = 2e-6;

struct Activation {
  std::string type;
  Attrs attrs;
  bool clip_inputs = false;  // Clip with min and max as constant inputs
  bool exact = false;        // fused and unfused are equal
};

std::vector<Activation> Activations() {
  return {
      {"Relu", {}, false, true},
      {"LeakyRelu", {{"alpha", 0.1}}, false, true},
      {"Clip", {}, true, true},
      {"Sigmoid", {}},
      {"Tanh", {}},
      {"Gelu", {}},
      {"Gelu", {{"approximate", std::string("tanh")}}},
      {"Elu", {{"alpha", 0.7}}},
      {"HardSwish", {}},
      {"Softplus", {}},
  };
}

enum class Base { kConv, kMatMul, kGemm };
const char* BaseName(Base b) { return b == Base::kConv ? "Conv" : b == Base::kMatMul ? "MatMul" : "Gemm"; }

// x -> base -> activation -> y; with `expose`, the base's output "h" is an
// output of the model too (the pass then leaves both steps).
std::shared_ptr<const Model> BaseThenActivation(Base base, const Activation& act, bool expose, Shape* x_shape) {
  ModelBuilder b;
  std::string base_type = BaseName(base);
  switch (base) {
    case Base::kConv:
      *x_shape = {2, 8, 12, 12};
      b.AddInput("x", DType::kF32, {2, 8, 12, 12});
      b.AddWeight("w", DType::kF32, {16, 8, 3, 3}, RandomValues(16 * 8 * 9, 1, 0.3f));
      b.AddWeight("bias", DType::kF32, {16}, RandomValues(16, 2));
      b.AddOp("Conv", {"x", "w", "bias"}, {"h"}, {{"pads", Shape{1, 1, 1, 1}}});
      break;
    case Base::kMatMul:
      *x_shape = {3, 5, 32};
      b.AddInput("x", DType::kF32, {3, 5, 32});
      b.AddWeight("w", DType::kF32, {32, 24}, RandomValues(32 * 24, 3, 0.5f));
      b.AddOp("MatMul", {"x", "w"}, {"h"});
      break;
    case Base::kGemm:
      *x_shape = {7, 40};
      b.AddInput("x", DType::kF32, {7, 40});
      b.AddWeight("w", DType::kF32, {24, 40}, RandomValues(24 * 40, 4, 0.5f));
      b.AddWeight("c", DType::kF32, {24}, RandomValues(24, 5));
      b.AddOp("Gemm", {"x", "w", "c"}, {"h"}, {{"transB", int64_t{1}}, {"alpha", 0.75}, {"beta", 0.5}});
      break;
  }
  std::vector<std::string> act_inputs = {"h"};
  if (act.clip_inputs) {
    b.AddWeight("lo", DType::kF32, {}, std::vector<float>{-0.5f});
    b.AddWeight("hi", DType::kF32, {}, std::vector<float>{0.75f});
    act_inputs.push_back("lo");
    act_inputs.push_back("hi");
  }
  b.AddOp(act.type, act_inputs, {"y"}, act.attrs);
  b.AddOutput("y");
  if (expose) b.AddOutput("h");
  absl::StatusOr<std::vector<uint8_t>> bytes = b.Finish();
  EXPECT_TRUE(bytes.ok()) << bytes.status();
  absl::StatusOr<std::shared_ptr<const Model>> model = Model::LoadFromBuffer(*bytes);
  EXPECT_TRUE(model.ok()) << model.status();
  return *model;
}

TEST(ActivationFusionTest, InspectShowsTheFusedSteps) {
  ModelBuilder b;
  b.AddInput("x", DType::kF32, {1, 3, 16, 16});
  b.AddWeight("w1", DType::kF32, {8, 3, 3, 3}, RandomValues(8 * 27, 6));
  b.AddWeight("b1", DType::kF32, {8}, RandomValues(8, 7));
  b.AddWeight("w2", DType::kF32, {8 * 8 * 8, 10}, RandomValues(8 * 8 * 8 * 10, 8));
  b.AddWeight("b2", DType::kF32, {10}, RandomValues(10, 9));
  b.AddOp("Conv", {"x", "w1", "b1"}, {"c1"}, {{"pads", Shape{1, 1, 1, 1}}}, "conv1");
  b.AddOp("Relu", {"c1"}, {"r1"}, {}, "relu1");
  b.AddOp("MaxPool", {"r1"}, {"p1"}, {{"kernel_shape", Shape{2, 2}}, {"strides", Shape{2, 2}}}, "pool1");
  b.AddOp("Flatten", {"p1"}, {"f"}, {}, "flatten");
  b.AddOp("Gemm", {"f", "w2", "b2"}, {"g"}, {}, "fc");
  b.AddOp("Sigmoid", {"g"}, {"y"}, {}, "prob");
  b.AddOutput("y");
  std::shared_ptr<const Model> model = Model::LoadFromBuffer(*b.Finish()).value();
  std::vector<std::string> nodes;
  EXPECT_EQ(PlannedOps(*model, {{1, 3, 16, 16}}, true, &nodes),
            (std::vector<std::string>{"Conv+Relu+MaxPool", "Flatten", "Gemm+Sigmoid"}));
  EXPECT_EQ(nodes, (std::vector<std::string>{"fused(conv1+relu1+pool1)", "flatten", "fused(fc+prob)"}));
  EXPECT_EQ(PlannedOps(*model, {{1, 3, 16, 16}}, false),
            (std::vector<std::string>{"Conv", "Relu", "MaxPool", "Flatten", "Gemm", "Sigmoid"}));
}

TEST(ActivationFusionTest, AnIntermediateReadElsewhereIsNotFused) {
  Shape x_shape;
  const Activation relu{"Relu", {}, false, true};
  // An output of the model.
  std::shared_ptr<const Model> exposed = BaseThenActivation(Base::kConv, relu, /*expose=*/true, &x_shape);
  EXPECT_EQ(PlannedOps(*exposed, {x_shape}, true), (std::vector<std::string>{"Conv", "Relu"}));
  std::shared_ptr<const Model> fused = BaseThenActivation(Base::kConv, relu, /*expose=*/false, &x_shape);
  EXPECT_EQ(PlannedOps(*fused, {x_shape}, true), (std::vector<std::string>{"Conv+Relu"}));
  // Read by a second step; and an activation that is not the only reader of
  // a MatMul's output feeding an Add.
  ModelBuilder b;
  b.AddInput("x", DType::kF32, {4, 16});
  b.AddWeight("w", DType::kF32, {16, 16}, RandomValues(256, 10));
  b.AddOp("MatMul", {"x", "w"}, {"h"});
  b.AddOp("Relu", {"h"}, {"r"});
  b.AddOp("Add", {"h", "r"}, {"y"});
  b.AddOutput("y");
  std::shared_ptr<const Model> twice = Model::LoadFromBuffer(*b.Finish()).value();
  EXPECT_EQ(PlannedOps(*twice, {{4, 16}}, true), (std::vector<std::string>{"MatMul", "Relu", "Add"}));
  // Clip whose bound is computed, not a constant.
  ModelBuilder c;
  c.AddInput("x", DType::kF32, {4, 16});
  c.AddInput("lo", DType::kF32, {});
  c.AddWeight("w", DType::kF32, {16, 16}, RandomValues(256, 11));
  c.AddOp("MatMul", {"x", "w"}, {"h"});
  c.AddOp("Clip", {"h", "lo", ""}, {"y"});
  c.AddOutput("y");
  std::shared_ptr<const Model> computed_bound = Model::LoadFromBuffer(*c.Finish()).value();
  EXPECT_EQ(PlannedOps(*computed_bound, {{4, 16}, {}}, true), (std::vector<std::string>{"MatMul", "Clip"}));
}

TEST(ActivationFusionTest, FusedStepsMatchUnfusedAndReferenceSteps) {
  int cases = 0;
  for (Base base : {Base::kConv, Base::kMatMul, Base::kGemm}) {
    for (const Activation& act : Activations()) {
      const std::string what = absl::StrCat(BaseName(base), "+", act.type, act.attrs.empty() ? "" : " (attrs)");
      Shape x_shape;
      std::shared_ptr<const Model> fused = BaseThenActivation(base, act, false, &x_shape);
      std::shared_ptr<const Model> unfused = BaseThenActivation(base, act, true, &x_shape);
      ASSERT_EQ(PlannedOps(*fused, {x_shape}, true),
                (std::vector<std::string>{absl::StrCat(BaseName(base), "+", act.type)}))
          << what;
      const Tensor x = testing::MakeTensor<float>(DType::kF32, x_shape, RandomValues(testing::Count(x_shape), 12, 2));
      int64_t made = 0;
      const Tensor y_fused = RunOnce(fused, x, true, &made);
      EXPECT_EQ(made, 1) << what;
      const Tensor y_unfused = RunOnce(unfused, x, true);
      const Tensor y_ref = RunOnce(unfused, x, false);
      if (act.exact) {
        ExpectNear(y_fused, y_unfused, 0, 0, what + " fused vs unfused");
      } else {
        ExpectNear(y_fused, y_unfused, kActivationTolerance, kActivationTolerance, what + " fused vs unfused");
      }
      // The base's sums in another order (|y| < ~8, K <= 72): 1e-5 covers
      // 2 gamma_K sum|x w| with room.
      ExpectNear(y_fused, y_ref, 1e-5, 1e-5, what + " fused vs reference");
      ++cases;
    }
  }
  EXPECT_EQ(cases, 30);
}

// A Conv with 4 spatial dims: oneDNN does not take it, the fused step runs
// the im2col kernel and then the activation (ApplyPostOp), which computes
// what the activation's own kernel does.
TEST(ActivationFusionTest, ReferenceKernelAppliesTheFusedActivation) {
  for (const Activation& act : Activations()) {
    ModelBuilder b;
    b.AddInput("x", DType::kF32, {1, 2, 4, 3, 4, 3});
    b.AddWeight("w", DType::kF32, {3, 2, 2, 2, 2, 2}, RandomValues(3 * 2 * 16, 13, 0.5f));
    b.AddOp("Conv", {"x", "w"}, {"h"});
    std::vector<std::string> act_inputs = {"h"};
    if (act.clip_inputs) {
      b.AddWeight("lo", DType::kF32, {}, std::vector<float>{-0.25f});
      b.AddWeight("hi", DType::kF32, {}, std::vector<float>{0.5f});
      act_inputs.push_back("lo");
      act_inputs.push_back("hi");
    }
    b.AddOp(act.type, act_inputs, {"y"}, act.attrs);
    b.AddOutput("y");
    std::shared_ptr<const Model> model = Model::LoadFromBuffer(*b.Finish()).value();
    const Shape x_shape = {1, 2, 4, 3, 4, 3};
    ASSERT_EQ(PlannedOps(*model, {x_shape}, true), (std::vector<std::string>{"Conv+" + act.type})) << act.type;
    const Tensor x = testing::MakeTensor<float>(DType::kF32, x_shape, RandomValues(testing::Count(x_shape), 14, 2));
    int64_t made = -1;
    const Tensor y_fused = RunOnce(model, x, true, &made);
    EXPECT_EQ(made, 0) << act.type;
    const Tensor y_ref = RunOnce(model, x, false);
    ExpectNear(y_fused, y_ref, 0, 2e-7, act.type);
  }
}

// x [2, 5, 32] -> MatMul(w [32, 24]) -> Add(bias) [-> activation] -> y; with
// `expose`, the MatMul's output is an output too (nothing fused).
std::shared_ptr<const Model> MatMulAdd(const Shape& bias_shape, bool bias_first, const Activation* act, bool expose) {
  ModelBuilder b;
  b.AddInput("x", DType::kF32, {2, 5, 32});
  b.AddWeight("w", DType::kF32, {32, 24}, RandomValues(32 * 24, 21, 0.5f));
  b.AddWeight("bias", DType::kF32, bias_shape, RandomValues(testing::Count(bias_shape), 22));
  b.AddOp("MatMul", {"x", "w"}, {"h"}, {}, "fc");
  b.AddOp("Add", bias_first ? std::vector<std::string>{"bias", "h"} : std::vector<std::string>{"h", "bias"}, {"a"}, {},
          "bias_add");
  std::string out = "a";
  if (act != nullptr) {
    b.AddOp(act->type, {"a"}, {"y"}, act->attrs, "act");
    out = "y";
  }
  b.AddOutput(out);
  if (expose) b.AddOutput("h");
  return Model::LoadFromBuffer(*b.Finish()).value();
}

TEST(ActivationFusionTest, MatMulAddBiasAndActivationAreOneStep) {
  const Shape x_shape = {2, 5, 32};
  const Tensor x = testing::MakeTensor<float>(DType::kF32, x_shape, RandomValues(testing::Count(x_shape), 23, 2));
  const Activation relu{"Relu", {}, false, true};
  const Activation gelu{"Gelu", {}};
  struct Case {
    Shape bias;
    bool bias_first;
    const Activation* act;
    std::vector<std::string> ops;
    bool exact;
  };
  const std::vector<Case> cases = {
      {{24}, false, nullptr, {"MatMul+Add"}, true},
      {{24}, true, nullptr, {"MatMul+Add"}, true},
      {{1, 1, 24}, false, &relu, {"MatMul+Add+Relu"}, true},
      {{1, 24}, true, &gelu, {"MatMul+Add+Gelu"}, false},
      // Not a bias over the last dim: every step stays (an Add is no base).
      {{5, 1}, false, &relu, {"MatMul", "Add", "Relu"}, true},
      {{2, 5, 24}, false, nullptr, {"MatMul", "Add"}, true},
  };
  for (const Case& c : cases) {
    const std::string what = absl::StrCat("bias [", absl::StrJoin(c.bias, ","), "]", c.bias_first ? " first" : "",
                                          c.act != nullptr ? " + " + c.act->type : "");
    std::shared_ptr<const Model> fused = MatMulAdd(c.bias, c.bias_first, c.act, false);
    std::shared_ptr<const Model> unfused = MatMulAdd(c.bias, c.bias_first, c.act, true);
    std::vector<std::string> nodes;
    const std::vector<std::string> ops = PlannedOps(*fused, {x_shape}, true, &nodes);
    EXPECT_EQ(ops, c.ops) << what;
    if (ops.size() == 1) {
      EXPECT_EQ(nodes[0], absl::StrCat("fused(fc+bias_add", c.act != nullptr ? "+act" : "", ")")) << what;
    }
    EXPECT_EQ(PlannedOps(*unfused, {x_shape}, true)[0], "MatMul") << what;
    const Tensor y_fused = RunOnce(fused, x, true);
    const Tensor y_unfused = RunOnce(unfused, x, true);
    const Tensor y_ref = RunOnce(unfused, x, false);
    const double tol = c.exact ? 0 : kActivationTolerance;
    ExpectNear(y_fused, y_unfused, tol, tol, what + " fused vs unfused");
    ExpectNear(y_fused, y_ref, 1e-5, 1e-5, what + " fused vs reference");
  }
}

// x [2, 5, 32] -> MatMul -> Add(bias) -> h -> the exact GELU written out as
// PyTorch exports nn.GELU() before opset 20: Div(h, sqrt 2) (or Mul by
// 1 / sqrt 2), Erf, Add 1, and h, 0.5 and that sum multiplied in the
// grouping `form` names ("x*(half*sum)", "(x*half)*sum", "(x*sum)*half").
// `divisor` replaces sqrt 2; with `expose`, h is an output too.
std::shared_ptr<const Model> MatMulErfGelu(const std::string& form, bool mul_by_inverse, float divisor, bool expose) {
  ModelBuilder b;
  b.AddInput("x", DType::kF32, {2, 5, 32});
  b.AddWeight("w", DType::kF32, {32, 24}, RandomValues(32 * 24, 31, 0.5f));
  b.AddWeight("bias", DType::kF32, {24}, RandomValues(24, 32));
  b.AddWeight("root2", DType::kF32, {}, std::vector<float>{mul_by_inverse ? 1.0f / divisor : divisor});
  b.AddWeight("one", DType::kF32, {}, std::vector<float>{1.0f});
  b.AddWeight("half", DType::kF32, {1}, std::vector<float>{0.5f});
  b.AddOp("MatMul", {"x", "w"}, {"m"}, {}, "fc");
  b.AddOp("Add", {"m", "bias"}, {"h"}, {}, "bias_add");
  b.AddOp(mul_by_inverse ? "Mul" : "Div", {"h", "root2"}, {"scaled"}, {}, "div");
  b.AddOp("Erf", {"scaled"}, {"erf"}, {}, "erf");
  b.AddOp("Add", {"one", "erf"}, {"sum"}, {}, "add1");
  if (form == "x*(half*sum)") {
    b.AddOp("Mul", {"half", "sum"}, {"p"}, {}, "mul_a");
    b.AddOp("Mul", {"h", "p"}, {"y"}, {}, "mul_b");
  } else if (form == "(x*half)*sum") {
    b.AddOp("Mul", {"h", "half"}, {"p"}, {}, "mul_a");
    b.AddOp("Mul", {"sum", "p"}, {"y"}, {}, "mul_b");
  } else {
    b.AddOp("Mul", {"sum", "h"}, {"p"}, {}, "mul_a");
    b.AddOp("Mul", {"p", "half"}, {"y"}, {}, "mul_b");
  }
  b.AddOutput("y");
  if (expose) b.AddOutput("h");
  return Model::LoadFromBuffer(*b.Finish()).value();
}

TEST(ActivationFusionTest, WrittenOutErfGeluIsOneGeluPostOp) {
  const Shape x_shape = {2, 5, 32};
  const Tensor x = testing::MakeTensor<float>(DType::kF32, x_shape, RandomValues(testing::Count(x_shape), 33, 2));
  const std::vector<std::string> unfused_ops = {"MatMul+Add", "Div", "Erf", "Add", "Mul", "Mul"};
  for (const std::string form : {"x*(half*sum)", "(x*half)*sum", "(x*sum)*half"}) {
    for (bool inverse : {false, true}) {
      const std::string what = absl::StrCat(form, inverse ? ", Mul by 1/sqrt 2" : ", Div by sqrt 2");
      std::shared_ptr<const Model> model = MatMulErfGelu(form, inverse, std::sqrt(2.0f), false);
      std::vector<std::string> nodes;
      EXPECT_EQ(PlannedOps(*model, {x_shape}, true, &nodes), std::vector<std::string>{"MatMul+Add+Gelu"}) << what;
      if (!nodes.empty()) {
        EXPECT_EQ(nodes[0], "fused(fc+bias_add+gelu(div+erf+add1+mul_a+mul_b))") << what;
      }
      // Against the chain as the reference kernels compute it (oneDNN off:
      // nothing fused), and the same model with h exposed (the chain
      // unfused after oneDNN's MatMul+Add).
      std::vector<std::string> exposed_ops = unfused_ops;
      if (inverse) exposed_ops[1] = "Mul";
      std::shared_ptr<const Model> exposed = MatMulErfGelu(form, inverse, std::sqrt(2.0f), true);
      EXPECT_EQ(PlannedOps(*exposed, {x_shape}, true), exposed_ops) << what;
      const Tensor y_fused = RunOnce(model, x, true);
      ExpectNear(y_fused, RunOnce(exposed, x, true), kActivationTolerance, kActivationTolerance, what + " vs unfused");
      ExpectNear(y_fused, RunOnce(model, x, false), 1e-5, 1e-5, what + " vs reference");
    }
  }
  // Another divisor is no GELU: the steps stay.
  std::shared_ptr<const Model> other = MatMulErfGelu("x*(half*sum)", false, 2.0f, false);
  EXPECT_EQ(PlannedOps(*other, {x_shape}, true), unfused_ops);
}

// x [2, 5, 32] -> MatMul -> Add(bias) -> h -> the steps of `chain`, each
// {type, inputs, output}; the inputs "c:<float>" are scalar constants
// (weights). The last step writes y; `also_outputs` are outputs too.
struct ChainStep {
  std::string type;
  std::vector<std::string> inputs;
  std::string output;
};
std::shared_ptr<const Model> MatMulThen(const std::vector<ChainStep>& chain,
                                        const std::vector<std::string>& also_outputs = {}) {
  ModelBuilder b;
  b.AddInput("x", DType::kF32, {2, 5, 32});
  b.AddWeight("w", DType::kF32, {32, 24}, RandomValues(32 * 24, 41, 0.5f));
  b.AddWeight("bias", DType::kF32, {24}, RandomValues(24, 42));
  b.AddOp("MatMul", {"x", "w"}, {"m"}, {}, "fc");
  b.AddOp("Add", {"m", "bias"}, {"h"}, {}, "bias_add");
  int constants = 0;
  for (const ChainStep& step : chain) {
    std::vector<std::string> inputs;
    for (const std::string& in : step.inputs) {
      if (in.rfind("c:", 0) != 0) {
        inputs.push_back(in);
        continue;
      }
      const std::string name = absl::StrCat("const", constants++);
      b.AddWeight(name, DType::kF32, {}, std::vector<float>{std::stof(in.substr(2))});
      inputs.push_back(name);
    }
    b.AddOp(step.type, inputs, {step.output}, {}, step.output);
  }
  b.AddOutput(chain.back().output);
  for (const std::string& o : also_outputs) b.AddOutput(o);
  return Model::LoadFromBuffer(*b.Finish()).value();
}

// y = 0.5 h (1 + tanh(sqrt(2 / pi) (h + 0.044715 h^3))) as exporters and
// hand-written code group it, each one GeluTanh post-op; near misses stay.
TEST(ActivationFusionTest, WrittenOutTanhGeluIsOneGeluTanhPostOp) {
  const Shape x_shape = {2, 5, 32};
  const Tensor x = testing::MakeTensor<float>(DType::kF32, x_shape, RandomValues(testing::Count(x_shape), 43, 2));
  struct Form {
    std::string what;
    std::vector<ChainStep> chain;
  };
  const std::string k = "c:0.7978846", c = "c:0.044715";
  const std::vector<Form> forms = {
      {"torch.onnx dynamo (Pow, the half last)",
       {{"Pow", {"h", "c:3"}, "p"},
        {"Mul", {c, "p"}, "m1"},
        {"Add", {"h", "m1"}, "a1"},
        {"Mul", {k, "a1"}, "m2"},
        {"Tanh", {"m2"}, "t"},
        {"Add", {"t", "c:1"}, "a2"},
        {"Mul", {"c:0.5", "a2"}, "m3"},
        {"Mul", {"h", "m3"}, "y"}}},
      {"GPT-2 by hand (the half first, x * x * x)",
       {{"Mul", {"h", "c:0.5"}, "half"},
        {"Mul", {"h", "h"}, "sq"},
        {"Mul", {"sq", "h"}, "cube"},
        {"Mul", {"cube", c}, "m1"},
        {"Add", {"h", "m1"}, "a1"},
        {"Mul", {"a1", k}, "m2"},
        {"Tanh", {"m2"}, "t"},
        {"Add", {"c:1", "t"}, "a2"},
        {"Mul", {"half", "a2"}, "y"}}},
      {"FastGELU (x * k * (1 + c x x), Div by 2)",
       {{"Mul", {"h", "h"}, "sq"},
        {"Mul", {"sq", c}, "m1"},
        {"Add", {"m1", "c:1"}, "a1"},
        {"Mul", {"h", k}, "hk"},
        {"Mul", {"hk", "a1"}, "m2"},
        {"Tanh", {"m2"}, "t"},
        {"Add", {"t", "c:1"}, "a2"},
        {"Mul", {"h", "a2"}, "m3"},
        {"Div", {"m3", "c:2"}, "y"}}},
  };
  for (const Form& form : forms) {
    std::shared_ptr<const Model> model = MatMulThen(form.chain);
    std::vector<std::string> nodes;
    EXPECT_EQ(PlannedOps(*model, {x_shape}, true, &nodes), std::vector<std::string>{"MatMul+Add+GeluTanh"})
        << form.what;
    std::vector<std::string> names;
    for (const ChainStep& step : form.chain) names.push_back(step.output);
    if (!nodes.empty()) {
      EXPECT_EQ(nodes[0], absl::StrCat("fused(fc+bias_add+gelutanh(", absl::StrJoin(names, "+"), "))")) << form.what;
    }
    // Against the chain step by step: oneDNN off (nothing fused), and the
    // same model with h an output too (oneDNN's MatMul+Add, the chain after).
    std::shared_ptr<const Model> exposed = MatMulThen(form.chain, {"h"});
    EXPECT_EQ(PlannedOps(*exposed, {x_shape}, true).size(), form.chain.size() + 1) << form.what;
    const Tensor y_fused = RunOnce(model, x, true);
    ExpectNear(y_fused, RunOnce(exposed, x, true), 1e-5, 1e-5, form.what + " vs unfused");
    ExpectNear(y_fused, RunOnce(model, x, false), 1e-5, 1e-5, form.what + " vs reference");
  }
  const std::vector<ChainStep>& dynamo = forms[0].chain;
  // Another constant (0.05 for 0.044715) is another function: the steps stay.
  std::vector<ChainStep> other = dynamo;
  other[1].inputs[0] = "c:0.05";
  EXPECT_EQ(PlannedOps(*MatMulThen(other), {x_shape}, true).size(), dynamo.size() + 1);
  // An intermediate read elsewhere (an output) must be stored: the steps stay.
  EXPECT_EQ(PlannedOps(*MatMulThen(dynamo, {"t"}), {x_shape}, true).size(), dynamo.size() + 1);
  // A step after the GELU (y * 3) is not part of it.
  std::vector<ChainStep> scaled = dynamo;
  scaled.back().output = "g";
  scaled.push_back({"Mul", {"g", "c:3"}, "y"});
  EXPECT_EQ(PlannedOps(*MatMulThen(scaled), {x_shape}, true), (std::vector<std::string>{"MatMul+Add+GeluTanh", "Mul"}));
}

// A bias written by a step after the MatMul (here computed from the input
// after it) cannot be read by the fused step, which runs where the MatMul
// did: the Add stays.
TEST(ActivationFusionTest, ABiasComputedAfterTheMatMulIsNotFused) {
  ModelBuilder b;
  b.AddInput("x", DType::kF32, {4, 16});
  b.AddInput("c", DType::kF32, {16});
  b.AddWeight("w", DType::kF32, {16, 16}, RandomValues(256, 24));
  b.AddOp("MatMul", {"x", "w"}, {"h"});
  b.AddOp("Neg", {"c"}, {"bias"});
  b.AddOp("Add", {"h", "bias"}, {"y"});
  b.AddOutput("y");
  std::shared_ptr<const Model> model = Model::LoadFromBuffer(*b.Finish()).value();
  EXPECT_EQ(PlannedOps(*model, {{4, 16}, {16}}, true), (std::vector<std::string>{"MatMul", "Neg", "Add"}));
  // A bias that is a model input is there before the MatMul runs.
  ModelBuilder d;
  d.AddInput("x", DType::kF32, {4, 16});
  d.AddInput("bias", DType::kF32, {16});
  d.AddWeight("w", DType::kF32, {16, 16}, RandomValues(256, 25));
  d.AddOp("MatMul", {"x", "w"}, {"h"});
  d.AddOp("Add", {"h", "bias"}, {"y"});
  d.AddOutput("y");
  std::shared_ptr<const Model> input_bias = Model::LoadFromBuffer(*d.Finish()).value();
  EXPECT_EQ(PlannedOps(*input_bias, {{4, 16}, {16}}, true), (std::vector<std::string>{"MatMul+Add"}));
  const Tensor x = testing::MakeTensor<float>(DType::kF32, {4, 16}, RandomValues(64, 26));
  const Tensor bias = testing::MakeTensor<float>(DType::kF32, {16}, RandomValues(16, 27));
  SessionOptions options;
  options.device = Device::kCpu;
  std::vector<Tensor> results;
  for (bool onednn : {true, false}) {
    cpu::ScopedOneDnn scope(onednn);
    std::unique_ptr<Session> session = Session::Create(input_bias, options).value();
    absl::StatusOr<std::vector<TensorView>> out = session->Run({x.view(), bias.view()});
    ASSERT_TRUE(out.ok()) << out.status();
    results.push_back(Tensor::CopyOf((*out)[0]).value());
  }
  ExpectNear(results[0], results[1], 1e-5, 1e-5, "input bias");
}

// K = 0: oneDNN does not take the product, the reference kernel writes zeros
// and adds the bias, then the activation.
TEST(ActivationFusionTest, ReferenceKernelAddsTheFusedBias) {
  ModelBuilder b;
  b.AddInput("x", DType::kF32, {3, 0});
  b.AddInput("w", DType::kF32, {0, 4});
  b.AddWeight("bias", DType::kF32, {4}, std::vector<float>{-1.0f, 0.5f, 2.0f, -0.25f});
  b.AddOp("MatMul", {"x", "w"}, {"h"});
  b.AddOp("Add", {"h", "bias"}, {"a"});
  b.AddOp("Relu", {"a"}, {"y"});
  b.AddOutput("y");
  std::shared_ptr<const Model> model = Model::LoadFromBuffer(*b.Finish()).value();
  EXPECT_EQ(PlannedOps(*model, {{3, 0}, {0, 4}}, true), (std::vector<std::string>{"MatMul+Add+Relu"}));
  cpu::ScopedOneDnn on(true);
  SessionOptions options;
  options.device = Device::kCpu;
  std::unique_ptr<Session> session = Session::Create(model, options).value();
  const Tensor x = Tensor::Create(DType::kF32, {3, 0}).value(), w = Tensor::Create(DType::kF32, {0, 4}).value();
  const int64_t before = cpu::OneDnnStepsMade();
  absl::StatusOr<std::vector<TensorView>> out = session->Run({x.view(), w.view()});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(cpu::OneDnnStepsMade() - before, 0);
  const Tensor y = Tensor::CopyOf((*out)[0]).value();
  EXPECT_EQ(testing::Values<float>(y), (std::vector<float>{0, 0.5f, 2, 0, 0, 0.5f, 2, 0, 0, 0.5f, 2, 0}));
}

// x -> Conv (3x3, pads 1) [-> activation] -> pool -> y; with `expose`, the
// Conv's output is an output too (nothing fused).
std::shared_ptr<const Model> ConvThenPool(const Shape& x_shape, const Shape& w_shape, const Activation* act,
                                          const std::string& pool, const Attrs& pool_attrs, bool expose) {
  ModelBuilder b;
  std::vector<Dim> dims(x_shape.begin(), x_shape.end());
  b.AddInput("x", DType::kF32, dims);
  b.AddWeight("w", DType::kF32, w_shape, RandomValues(testing::Count(w_shape), 31, 0.3f));
  b.AddWeight("bias", DType::kF32, {w_shape[0]}, RandomValues(w_shape[0], 32));
  const int spatial = static_cast<int>(x_shape.size()) - 2;
  b.AddOp("Conv", {"x", "w", "bias"}, {"h"}, {{"pads", Shape(2 * spatial, 1)}}, "conv");
  std::string cur = "h";
  if (act != nullptr) {
    b.AddOp(act->type, {"h"}, {"a"}, act->attrs, "act");
    cur = "a";
  }
  b.AddOp(pool, {cur}, {"y"}, pool_attrs, "pool");
  b.AddOutput("y");
  if (expose) b.AddOutput("h");
  return Model::LoadFromBuffer(*b.Finish()).value();
}

TEST(ActivationFusionTest, ConvActivationAndPoolAreOneStep) {
  const Activation relu{"Relu", {}, false, true};
  const Activation sigmoid{"Sigmoid", {}};
  struct Case {
    std::string what;
    Shape x, w;
    const Activation* act;
    std::string pool;
    Attrs attrs;
    std::string fused_op;
  };
  const std::vector<Case> cases = {
      // oneDNN takes both: the Conv's blocked output goes to the pool as it is.
      {"max 2x2", {2, 8, 16, 16}, {16, 8, 3, 3}, &relu, "MaxPool",
       {{"kernel_shape", Shape{2, 2}}, {"strides", Shape{2, 2}}}, "Conv+Relu+MaxPool"},
      {"average 3x3 count_include_pad", {1, 8, 9, 9}, {8, 8, 3, 3}, nullptr, "AveragePool",
       {{"kernel_shape", Shape{3, 3}}, {"pads", Shape{1, 1, 1, 1}}, {"count_include_pad", int64_t{1}}},
       "Conv+AveragePool"},
      {"1-d max, odd length", {1, 4, 15}, {6, 4, 3}, &relu, "MaxPool",
       {{"kernel_shape", Shape{3}}, {"strides", Shape{2}}}, "Conv+Relu+MaxPool"},
      // The pool stays with its reference kernel (dilated; a count_include_pad
      // window past the end padding): the Conv writes grove's layout for it.
      {"dilated max", {1, 8, 12, 12}, {8, 8, 3, 3}, &relu, "MaxPool",
       {{"kernel_shape", Shape{2, 2}}, {"dilations", Shape{2, 2}}}, "Conv+Relu+MaxPool"},
      {"average ceil past the pads", {1, 4, 5, 5}, {4, 4, 3, 3}, &sigmoid, "AveragePool",
       {{"kernel_shape", Shape{2, 2}}, {"strides", Shape{2, 2}}, {"ceil_mode", int64_t{1}},
        {"count_include_pad", int64_t{1}}},
       "Conv+Sigmoid+AveragePool"},
      // Neither is oneDNN's: 4 spatial dims.
      {"4-d", {1, 2, 4, 3, 4, 3}, {3, 2, 2, 2, 2, 2}, &sigmoid, "MaxPool",
       {{"kernel_shape", Shape{2, 2, 2, 2}}}, "Conv+Sigmoid+MaxPool"},
  };
  for (const Case& c : cases) {
    std::shared_ptr<const Model> fused = ConvThenPool(c.x, c.w, c.act, c.pool, c.attrs, false);
    std::shared_ptr<const Model> unfused = ConvThenPool(c.x, c.w, c.act, c.pool, c.attrs, true);
    std::vector<std::string> nodes;
    EXPECT_EQ(PlannedOps(*fused, {c.x}, true, &nodes), (std::vector<std::string>{c.fused_op})) << c.what;
    EXPECT_EQ(nodes, (std::vector<std::string>{c.act != nullptr ? "fused(conv+act+pool)" : "fused(conv+pool)"}))
        << c.what;
    EXPECT_EQ(PlannedOps(*unfused, {c.x}, true)[0], "Conv") << c.what;
    const Tensor x = testing::MakeTensor<float>(DType::kF32, c.x, RandomValues(testing::Count(c.x), 33, 2));
    const Tensor y_fused = RunOnce(fused, x, true);
    const Tensor y_unfused = RunOnce(unfused, x, true);
    const Tensor y_ref = RunOnce(unfused, x, false);
    // The same Conv and pool arithmetic on the same values, whatever layout
    // hands them over; oneDNN's Sigmoid post-op against the Sigmoid kernel
    // within kActivationTolerance. (Below AVX2 oneDNN's Conv for each layout
    // is a different implementation: a few ulps.)
    const double exact = ::grove::testing::OneDnnHasAvx2() ? 0 : 1e-6;
    const double tol = c.act == nullptr || c.act->exact ? exact : kActivationTolerance;
    ExpectNear(y_fused, y_unfused, tol, tol, c.what + " fused vs unfused");
    ExpectNear(y_fused, y_ref, 1e-5, 1e-5, c.what + " fused vs reference");
  }
}

// MaxPool's Indices need the reference kernel's walk of grove's layout: such
// a pool stays a step of its own.
TEST(ActivationFusionTest, AMaxPoolWithIndicesIsNotFused) {
  ModelBuilder b;
  b.AddInput("x", DType::kF32, {1, 4, 8, 8});
  b.AddWeight("w", DType::kF32, {4, 4, 3, 3}, RandomValues(144, 34));
  b.AddOp("Conv", {"x", "w"}, {"h"}, {{"pads", Shape{1, 1, 1, 1}}});
  b.AddOp("Relu", {"h"}, {"a"});
  b.AddOp("MaxPool", {"a"}, {"y", "i"}, {{"kernel_shape", Shape{2, 2}}, {"strides", Shape{2, 2}}});
  b.AddOutput("y");
  b.AddOutput("i");
  std::shared_ptr<const Model> model = Model::LoadFromBuffer(*b.Finish()).value();
  EXPECT_EQ(PlannedOps(*model, {{1, 4, 8, 8}}, true), (std::vector<std::string>{"Conv+Relu", "MaxPool"}));
}

}  // namespace
}  // namespace grove

namespace grove {
namespace {

// x -> Conv(w, b) -> [BatchNormalization, activation in `order`] [-> pool]
// -> y, the BatchNormalization's scale, B, mean and var weights (var > 0);
// with `mean_input`, its mean a model input instead (not constant: not
// folded); with `expose`, the Conv's output an output too (nothing fused).
std::shared_ptr<const Model> ConvBatchNorm(const Shape& x, const Shape& w, const std::vector<std::string>& order,
                                           const std::string& pool, bool mean_input, bool expose) {
  ModelBuilder b;
  const int64_t m = w[0];
  b.AddInput("x", DType::kF32, std::vector<Dim>(x.begin(), x.end()));
  b.AddWeight("w", DType::kF32, w, RandomValues(testing::Count(w), 41, 0.5f));
  b.AddWeight("b", DType::kF32, {m}, RandomValues(m, 42, 0.5f));
  b.AddWeight("scale", DType::kF32, {m}, RandomValues(m, 43, 1.5f));
  b.AddWeight("shift", DType::kF32, {m}, RandomValues(m, 44, 1.0f));
  std::vector<float> var = RandomValues(m, 45, 1.0f);
  for (float& v : var) v = std::fabs(v) + 0.05f;
  b.AddWeight("var", DType::kF32, {m}, var);
  if (mean_input) {
    b.AddInput("mean", DType::kF32, {m});
  } else {
    b.AddWeight("mean", DType::kF32, {m}, RandomValues(m, 46, 0.5f));
  }
  Shape pads(2 * (x.size() - 2), 1);
  b.AddOp("Conv", {"x", "w", "b"}, {"h"}, {{"pads", pads}}, "conv");
  std::string cur = "h";
  for (const std::string& op : order) {
    const std::string out = cur + "_" + op;
    if (op == "BatchNormalization") {
      b.AddOp(op, {cur, "scale", "shift", "mean", "var"}, {out}, {{"epsilon", 1e-3}}, "bn");
    } else {
      b.AddOp(op, {cur}, {out}, {}, "act");
    }
    cur = out;
  }
  if (!pool.empty()) {
    const Shape window(x.size() - 2, 2);
    b.AddOp(pool, {cur}, {"y"}, {{"kernel_shape", window}, {"strides", window}}, "pool");
  } else {
    b.AddOp("Identity", {cur}, {"y"});
  }
  b.AddOutput("y");
  if (expose) b.AddOutput("h");
  return Model::LoadFromBuffer(*b.Finish()).value();
}

TEST(ActivationFusionTest, ConvBatchNormalizationFoldsIntoTheStep) {
  struct Case {
    std::string what;
    Shape x, w;
    std::vector<std::string> order;
    std::string pool;
    std::string fused_op;
  };
  const std::vector<Case> cases = {
      // The exported CNN's block: oneDNN's Conv with relu, mul, add post-ops
      // handing its blocked output to the pool.
      {"relu then bn then max", {2, 8, 16, 16}, {16, 8, 3, 3}, {"Relu", "BatchNormalization"}, "MaxPool",
       "Conv+Relu+BatchNormalization+MaxPool"},
      {"bn then relu", {1, 3, 9, 9}, {8, 3, 3, 3}, {"BatchNormalization", "Relu"}, "",
       "Conv+BatchNormalization+Relu"},
      {"bn alone, pointwise", {1, 4, 7, 7}, {6, 4, 1, 1}, {"BatchNormalization"}, "", "Conv+BatchNormalization"},
      {"1-d bn then tanh then average", {2, 4, 15}, {6, 4, 3}, {"BatchNormalization", "Tanh"}, "AveragePool",
       "Conv+BatchNormalization+Tanh+AveragePool"},
      // Not oneDNN's (4 spatial dims): the reference Conv applies both.
      {"4-d bn then sigmoid", {1, 2, 4, 3, 4, 3}, {3, 2, 2, 2, 2, 2}, {"BatchNormalization", "Sigmoid"}, "",
       "Conv+BatchNormalization+Sigmoid"},
  };
  for (const Case& c : cases) {
    std::shared_ptr<const Model> fused = ConvBatchNorm(c.x, c.w, c.order, c.pool, false, false);
    const std::vector<std::string> ops = PlannedOps(*fused, {c.x}, true);
    ASSERT_FALSE(ops.empty()) << c.what;
    EXPECT_EQ(ops[0], c.fused_op) << c.what;
    // Exposing the Conv's output leaves every step as it was.
    std::shared_ptr<const Model> exposed = ConvBatchNorm(c.x, c.w, c.order, c.pool, false, true);
    EXPECT_EQ(PlannedOps(*exposed, {c.x}, true)[0], "Conv") << c.what;
    const Tensor x = testing::MakeTensor<float>(DType::kF32, c.x, RandomValues(testing::Count(c.x), 47, 2));
    const Tensor y_fused = RunOnce(fused, x, true);
    const Tensor y_exposed = RunOnce(exposed, x, true);
    const Tensor y_ref = RunOnce(fused, x, false);  // oneDNN off: every step its reference kernel, unfused
    // The folded x * a + b against BatchNormalization's (x - mean) * a + B:
    // a few float roundings of values below ~10, plus the activations'
    // tolerance; the Conv's sum as in onednn_test.cc.
    ExpectNear(y_fused, y_exposed, 1e-5, 1e-5, c.what + " fused vs unfused");
    ExpectNear(y_fused, y_ref, 2e-5, 1e-5, c.what + " fused vs reference");
  }
}

TEST(ActivationFusionTest, ABatchNormalizationWithAComputedInputIsNotFolded) {
  const Shape x_shape = {1, 4, 6, 6};
  std::shared_ptr<const Model> model =
      ConvBatchNorm(x_shape, {4, 4, 3, 3}, {"Relu", "BatchNormalization"}, "", true, false);
  cpu::ScopedOneDnn scope(true);
  SessionOptions options;
  options.device = Device::kCpu;
  std::unique_ptr<Session> session = Session::Create(model, options).value();
  const Tensor x = testing::MakeTensor<float>(DType::kF32, x_shape, RandomValues(testing::Count(x_shape), 48, 2));
  const Tensor mean = testing::MakeTensor<float>(DType::kF32, {4}, RandomValues(4, 49, 0.5f));
  absl::StatusOr<std::vector<TensorView>> out = session->Run({x.view(), mean.view()});
  ASSERT_TRUE(out.ok()) << out.status();
  const std::vector<std::string> ops = PlannedOps(*model, {x_shape, {4}}, true);
  EXPECT_EQ(ops[0], "Conv+Relu");
  EXPECT_EQ(ops[1], "BatchNormalization");
}

}  // namespace
}  // namespace grove
