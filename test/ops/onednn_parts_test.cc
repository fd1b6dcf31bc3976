// Partitioned oneDNN steps (lib/backends/cpu/onednn_internal.h): at two or
// more intra-op threads a large Conv, pool, BatchNormalization, Softmax or
// MatMul is cut into parts, each its own primitive on one thread over a
// slice of the arrays, run side by side on the session's pool. Checked per
// case, at 2 and 3 threads (4 and 6 parts), over two runs of one session
// (the second on new values: the parts rebind every array):
//  - the step was cut (OneDnnStepsPartitioned), where the case says so;
//  - the output equals one thread's (one primitive over the whole tensors)
//    within float rounding, and the reference kernels' (oneDNN off) within
//    the bounds the other oneDNN tests use.
// The cuts: the batch (N > 1), else a window op's output rows, each part
// reading the input rows its windows cover with the padding it is owed
// (strides, dilation, asymmetric pads, ceil_mode, count_include_pad, 1-d),
// a MatMul's batch dim or M (A or B broadcast, B an input or a weight), and
// a chain of them (the CNN's Conv+Relu+MaxPool>...>GlobalAveragePool).
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "grove/grove.h"
#include "lib/backends/cpu/onednn.h"
#include "lib/backends/cpu/onednn_internal.h"
#include "test/model_test_util.h"
#include "test/op_test_util.h"
#include "test/ops/onednn_isa.h"

namespace grove {
namespace {

using Attrs = std::vector<std::pair<std::string, AttrValue>>;
using Shape = std::vector<int64_t>;
using testing::LoadOrDie;
using testing::RandomF32;
using testing::TensorF32;

struct Input {
  std::string name;
  Shape shape;
};

// Output 0 of the second of two runs of one session (the first on other
// values), and how many steps the session's prepares cut.
struct Result {
  std::vector<float> y;
  int64_t partitioned = 0;
};

Result RunTwice(const std::shared_ptr<const Model>& model, const std::vector<Input>& inputs, int threads,
                bool onednn) {
  cpu::ScopedOneDnn scope(onednn);
  SessionOptions options;
  options.device = Device::kCpu;
  options.intra_op_threads = threads;
  std::unique_ptr<Session> session = Session::Create(model, options).value();
  Result r;
  const int64_t before = cpu::OneDnnStepsPartitioned();
  for (int run = 0; run < 2; ++run) {
    std::vector<Tensor> tensors;
    std::vector<TensorView> views;
    for (size_t i = 0; i < inputs.size(); ++i) {
      tensors.push_back(TensorF32(inputs[i].shape,
                                  RandomF32(static_cast<size_t>(testing::Count(inputs[i].shape)), 31 * run + i)));
      views.push_back(tensors.back().view());
    }
    absl::StatusOr<std::vector<TensorView>> out = session->Run(views);
    EXPECT_TRUE(out.ok()) << out.status();
    if (!out.ok()) return r;
    r.y = testing::ToVector((*out)[0]);
  }
  r.partitioned = cpu::OneDnnStepsPartitioned() - before;
  return r;
}

void ExpectNear(const std::vector<float>& got, const std::vector<float>& want, double tol, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  int reported = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double bound = tol * (1 + std::fabs(want[i]));
    if (!(std::fabs(static_cast<double>(got[i]) - want[i]) <= bound) && reported++ < 5) {
      ADD_FAILURE() << what << ": element " << i << " is " << got[i] << ", expected " << want[i];
    }
  }
}

struct Case {
  std::string what;
  std::shared_ptr<const Model> model;
  std::vector<Input> inputs;
  bool cut = true;  // every size of the case partitions
  double tol = 1e-5;
};

void Check(const Case& c) {
  SCOPED_TRACE(c.what);
  const Result one = RunTwice(c.model, c.inputs, 1, true);
  EXPECT_EQ(one.partitioned, 0);
  const Result reference = RunTwice(c.model, c.inputs, 1, false);
  ExpectNear(one.y, reference.y, c.tol, c.what + ": 1 thread vs reference kernels");
  for (int threads : {2, 3}) {
    const Result parts = RunTwice(c.model, c.inputs, threads, true);
    // Below AVX2 oneDNN takes some of these Convs only as its reference
    // implementation, which grove declines: nothing to cut.
    if (c.cut && ::grove::testing::OneDnnHasAvx2()) EXPECT_GE(parts.partitioned, 1) << threads << " threads";
    ExpectNear(parts.y, one.y, c.tol, absl::StrCat(c.what, ": ", threads, " threads vs 1"));
  }
}

// x -> op(x, weights...) -> y, the weights given or model constants.
std::shared_ptr<const Model> OneOp(const std::string& op, const Shape& x, const std::vector<Shape>& weights,
                                   const Attrs& attrs, bool weights_are_inputs = false) {
  ModelBuilder b;
  b.AddInput("x", DType::kF32, std::vector<Dim>(x.begin(), x.end()));
  std::vector<std::string> args = {"x"};
  for (size_t i = 0; i < weights.size(); ++i) {
    const std::string name = "w" + std::to_string(i);
    if (weights_are_inputs) {
      b.AddInput(name, DType::kF32, std::vector<Dim>(weights[i].begin(), weights[i].end()));
    } else {
      b.AddWeight(name, DType::kF32, weights[i],
                  RandomF32(static_cast<size_t>(testing::Count(weights[i])), 100 + static_cast<uint32_t>(i)));
    }
    args.push_back(name);
  }
  b.AddOp(op, args, {"y"}, attrs, op);
  b.AddOutput("y");
  return LoadOrDie(b.Finish());
}

TEST(OneDnnParts, ConvCutAlongTheBatchOrTheOutputRows) {
  const std::vector<Case> cases = {
      {"batch 3", OneOp("Conv", {3, 8, 40, 40}, {{16, 8, 3, 3}, {16}}, {{"pads", Shape{1, 1, 1, 1}}}),
       {{"x", {3, 8, 40, 40}}}},
      {"batch 1, rows (67, not a multiple of the parts)",
       OneOp("Conv", {1, 8, 67, 45}, {{16, 8, 3, 3}, {16}}, {{"pads", Shape{1, 1, 1, 1}}}), {{"x", {1, 8, 67, 45}}}},
      {"stride 2, dilation 2, asymmetric pads, no bias",
       OneOp("Conv", {1, 4, 180, 65}, {{16, 4, 5, 3}},
             {{"pads", Shape{3, 0, 1, 2}}, {"strides", Shape{2, 1}}, {"dilations", Shape{2, 1}}}),
       {{"x", {1, 4, 180, 65}}}},
      {"1-d", OneOp("Conv", {1, 16, 3000}, {{32, 16, 5}, {32}}, {{"pads", Shape{2, 2}}}), {{"x", {1, 16, 3000}}}},
      // Cut where oneDNN takes it channels-last (AVX-512's brgconv); with
      // AVX2 only it is im2col + GEMM on grove's layout, whose rows are no
      // slice: then one thread, still right.
      {"grouped, channels-last", OneOp("Conv", {1, 24, 64, 64}, {{24, 6, 3, 3}, {24}},
                                       {{"pads", Shape{1, 1, 1, 1}}, {"group", int64_t{4}}}),
       {{"x", {1, 24, 64, 64}}}, /*cut=*/false},
      {"the weight an input (reordered every run)", OneOp("Conv", {2, 8, 48, 48}, {{16, 8, 3, 3}}, {}, true),
       {{"x", {2, 8, 48, 48}}, {"w0", {16, 8, 3, 3}}}},
      // Under 2M multiply-adds, cut for the elements they move (StepThreads):
      // a depthwise 3x3 (0.6M) and an RGB stem of stride 2 (1.8M), each some
      // 40-75 us on one thread.
      {"depthwise", OneOp("Conv", {4, 16, 32, 32}, {{16, 1, 3, 3}, {16}},
                          {{"pads", Shape{1, 1, 1, 1}}, {"group", int64_t{16}}}),
       {{"x", {4, 16, 32, 32}}}},
      {"3 input channels, stride 2", OneOp("Conv", {4, 3, 64, 64}, {{16, 3, 3, 3}, {16}},
                                           {{"pads", Shape{1, 1, 1, 1}}, {"strides", Shape{2, 2}}}),
       {{"x", {4, 3, 64, 64}}}},
  };
  for (const Case& c : cases) Check(c);
}

// ConvTranspose through oneDNN's deconvolution: several images cut along
// the batch; one image runs whole.
TEST(OneDnnParts, ConvTransposeCutAlongTheBatch) {
  const std::vector<Case> cases = {
      {"2x2 stride 2, batch 3", OneOp("ConvTranspose", {3, 32, 24, 20}, {{32, 16, 2, 2}, {16}},
                                      {{"strides", Shape{2, 2}}}),
       {{"x", {3, 32, 24, 20}}}},
      {"3x3, output_padding, groups, batch 2",
       OneOp("ConvTranspose", {2, 32, 20, 18}, {{32, 16, 3, 3}, {32}},
             {{"strides", Shape{2, 2}}, {"pads", Shape{1, 1, 1, 1}}, {"output_padding", Shape{1, 0}},
              {"group", int64_t{2}}}),
       {{"x", {2, 32, 20, 18}}}},
      {"batch 1: whole", OneOp("ConvTranspose", {1, 32, 24, 20}, {{32, 16, 2, 2}}, {{"strides", Shape{2, 2}}}),
       {{"x", {1, 32, 24, 20}}}, /*cut=*/false},
  };
  for (const Case& c : cases) Check(c);
}

// BatchNormalization of x with its statistics as weights (the variance
// positive).
std::shared_ptr<const Model> BatchNorm(const Shape& x) {
  const int64_t c = x[1];
  ModelBuilder b;
  b.AddInput("x", DType::kF32, std::vector<Dim>(x.begin(), x.end()));
  std::vector<float> var = RandomF32(static_cast<size_t>(c), 7);
  for (float& v : var) v = 0.5f + std::fabs(v);
  b.AddWeight("scale", DType::kF32, {c}, RandomF32(static_cast<size_t>(c), 4));
  b.AddWeight("bias", DType::kF32, {c}, RandomF32(static_cast<size_t>(c), 5));
  b.AddWeight("mean", DType::kF32, {c}, RandomF32(static_cast<size_t>(c), 6));
  b.AddWeight("var", DType::kF32, {c}, var);
  b.AddOp("BatchNormalization", {"x", "scale", "bias", "mean", "var"}, {"y"}, {{"epsilon", 1e-3f}}, "bn");
  b.AddOutput("y");
  return LoadOrDie(b.Finish());
}

TEST(OneDnnParts, PoolsAndBatchNormalization) {
  const Attrs max2 = {{"kernel_shape", Shape{2, 2}}, {"strides", Shape{2, 2}}};
  const Attrs avg_pads = {{"kernel_shape", Shape{3, 3}},
                          {"strides", Shape{2, 2}},
                          {"pads", Shape{1, 1, 1, 1}},
                          {"count_include_pad", int64_t{1}}};
  const Attrs ceil = {{"kernel_shape", Shape{3, 3}}, {"strides", Shape{2, 2}}, {"ceil_mode", int64_t{1}}};
  const std::vector<Case> cases = {
      // One image in a channel-blocked layout: cut into whole blocks of channels.
      {"MaxPool 2x2, batch 1", OneOp("MaxPool", {1, 32, 256, 130}, {}, max2), {{"x", {1, 32, 256, 130}}}},
      {"MaxPool 2x2, batch 4", OneOp("MaxPool", {4, 16, 64, 64}, {}, max2), {{"x", {4, 16, 64, 64}}}},
      {"AveragePool counting pads, stride 2", OneOp("AveragePool", {1, 32, 131, 129}, {}, avg_pads),
       {{"x", {1, 32, 131, 129}}}},
      {"MaxPool ceil_mode (the last window past the end)", OneOp("MaxPool", {1, 32, 130, 131}, {}, ceil),
       {{"x", {1, 32, 130, 131}}}},
      // 8 channels: one block, padded; rows of it are no slice. Not cut.
      {"MaxPool of 8 channels, batch 1", OneOp("MaxPool", {1, 8, 256, 130}, {}, max2), {{"x", {1, 8, 256, 130}}},
       /*cut=*/false},
      // Rows of a channel-blocked layout are no slice: batch 1 is not cut.
      {"BatchNormalization, batch 1", BatchNorm({1, 16, 128, 96}), {{"x", {1, 16, 128, 96}}}, /*cut=*/false},
      {"BatchNormalization, batch 1, two blocks of channels", BatchNorm({1, 32, 128, 64}), {{"x", {1, 32, 128, 64}}}},
      {"BatchNormalization, batch 4", BatchNorm({4, 16, 64, 64}), {{"x", {4, 16, 64, 64}}}},
  };
  for (const Case& c : cases) Check(c);
}

TEST(OneDnnParts, SoftmaxAndMatMul) {
  const std::vector<Case> cases = {
      {"Softmax rows", OneOp("Softmax", {4096, 512}, {}, {{"axis", int64_t{-1}}}), {{"x", {4096, 512}}}},
      {"MatMul M", OneOp("MatMul", {515, 256}, {{256, 192}}, {}), {{"x", {515, 256}}}},
      {"MatMul M after a batch dim of 1", OneOp("MatMul", {1, 300, 256}, {{256, 256}}, {}), {{"x", {1, 300, 256}}}},
      {"batched MatMul, both inputs cut", OneOp("MatMul", {8, 128, 64}, {{8, 64, 128}}, {}, true),
       {{"x", {8, 128, 64}}, {"w0", {8, 64, 128}}}},
      {"batched MatMul, B broadcast", OneOp("MatMul", {6, 128, 64}, {{1, 64, 128}}, {}, true),
       {{"x", {6, 128, 64}}, {"w0", {1, 64, 128}}}},
      {"Gemm with A transposed and a bias",
       OneOp("Gemm", {256, 512}, {{256, 128}, {128}}, {{"transA", int64_t{1}}, {"alpha", 0.5f}, {"beta", 2.0f}}),
       {{"x", {256, 512}}}, /*cut=*/false},  // rows of a transposed A are no slice; still right
  };
  for (const Case& c : cases) Check(c);
}

// The CNN of test/models/cnn as one chain of linked steps, cut step by step.
TEST(OneDnnParts, ChainOfLinkedSteps) {
  for (const Shape& x : {Shape{1, 3, 128, 128}, Shape{8, 3, 64, 64}}) {
    ModelBuilder b;
    b.AddInput("x", DType::kF32, std::vector<Dim>(x.begin(), x.end()));
    b.AddWeight("w1", DType::kF32, {8, 3, 3, 3}, RandomF32(8 * 3 * 9, 1));
    b.AddWeight("b1", DType::kF32, {8}, RandomF32(8, 2));
    b.AddWeight("w2", DType::kF32, {16, 8, 3, 3}, RandomF32(16 * 8 * 9, 3));
    b.AddWeight("b2", DType::kF32, {16}, RandomF32(16, 4));
    const Attrs pads = {{"pads", Shape{1, 1, 1, 1}}};
    const Attrs pool = {{"kernel_shape", Shape{2, 2}}, {"strides", Shape{2, 2}}};
    b.AddOp("Conv", {"x", "w1", "b1"}, {"c1"}, pads, "conv1");
    b.AddOp("Relu", {"c1"}, {"r1"}, {}, "relu1");
    b.AddOp("MaxPool", {"r1"}, {"p1"}, pool, "pool1");
    b.AddOp("Conv", {"p1", "w2", "b2"}, {"c2"}, pads, "conv2");
    b.AddOp("Relu", {"c2"}, {"r2"}, {}, "relu2");
    b.AddOp("MaxPool", {"r2"}, {"p2"}, pool, "pool2");
    b.AddOp("GlobalAveragePool", {"p2"}, {"y"}, {}, "gap");
    b.AddOutput("y");
    Check({absl::StrCat("chain, x [", absl::StrJoin(x, ","), "]"), LoadOrDie(b.Finish()), {{"x", x}}});
  }
  // Pools with padding and ceil_mode reading the Conv's channels-last rows:
  // each part's first and last window rows meet the padding or not.
  ModelBuilder b;
  const Shape x = {1, 8, 150, 97};
  b.AddInput("x", DType::kF32, std::vector<Dim>(x.begin(), x.end()));
  b.AddWeight("w", DType::kF32, {16, 8, 3, 3}, RandomF32(16 * 8 * 9, 5));
  b.AddOp("Conv", {"x", "w"}, {"c"}, {{"pads", Shape{1, 1, 1, 1}}}, "conv");
  b.AddOp("AveragePool", {"c"}, {"a"},
          {{"kernel_shape", Shape{3, 3}}, {"strides", Shape{2, 2}}, {"pads", Shape{1, 1, 1, 1}},
           {"count_include_pad", int64_t{1}}},
          "avg");
  b.AddOp("Conv", {"a", "w2"}, {"c2"}, {{"pads", Shape{2, 0, 0, 1}}}, "conv2");
  b.AddWeight("w2", DType::kF32, {16, 16, 3, 3}, RandomF32(16 * 16 * 9, 6));
  b.AddOp("MaxPool", {"c2"}, {"y"}, {{"kernel_shape", Shape{3, 3}}, {"strides", Shape{2, 2}}, {"ceil_mode", int64_t{1}}},
          "max");
  b.AddOutput("y");
  Check({"chain with padded and ceil_mode pools", LoadOrDie(b.Finish()), {{"x", x}}});
}

// The window rows a part reads, and the padding it is given, against a
// hand-worked case: kernel 3 with dilation 2 (5 rows), stride 2, pad_begin 3,
// 20 input rows (11 output rows with pad_end 3).
TEST(OneDnnParts, InputRowsOfAWindowSlice) {
  struct Want {
    cpu::SliceRange out;
    int64_t begin, end, pad_begin, pad_end;
  };
  for (const Want& w : std::vector<Want>{{{0, 3}, 0, 6, 3, 0}, {{3, 6}, 3, 12, 0, 0}, {{9, 11}, 15, 20, 0, 2},
                                         {{0, 11}, 0, 20, 3, 2}}) {
    const cpu::WindowSlice got = cpu::InputRowsOf(w.out, 20, 3, 2, 2, 3);
    EXPECT_EQ(got.input.begin, w.begin) << w.out.begin;
    EXPECT_EQ(got.input.end, w.end) << w.out.begin;
    EXPECT_EQ(got.pad_begin, w.pad_begin) << w.out.begin;
    EXPECT_EQ(got.pad_end, w.pad_end) << w.out.begin;
  }
}

TEST(OneDnnParts, EvenRangesCoverOnce) {
  for (int64_t n : {1, 2, 5, 67, 128}) {
    for (int parts : {1, 2, 4, 6}) {
      const std::vector<cpu::SliceRange> ranges = cpu::EvenRanges(n, parts);
      ASSERT_EQ(static_cast<int64_t>(ranges.size()), std::min<int64_t>(n, parts));
      int64_t next = 0;
      for (const cpu::SliceRange& r : ranges) {
        EXPECT_EQ(r.begin, next);
        EXPECT_GE(r.end - r.begin, n / parts);
        EXPECT_LE(r.end - r.begin, n / parts + 1);
        next = r.end;
      }
      EXPECT_EQ(next, n);
    }
  }
}

}  // namespace
}  // namespace grove
