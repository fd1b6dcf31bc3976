// oneDNN chains (lib/backends/cpu/activation_fusion.h, FuseOneDnnChains): a
// CNN's Conv, pool and global pool steps run as one step whose links hand
// each other their outputs in oneDNN's blocked layout. Checked:
//  - which steps chain (grove inspect's view), and which do not: a step
//    between that is not a link (an Add, a Relu left unfused), an
//    intermediate that is also an output or read twice, oneDNN off;
//  - the chained step equals the same plan unchained byte for byte (the same
//    primitives on the same values: the reorders it drops are copies), at 1
//    and 2 intra-op threads, over two runs with new inputs;
//  - and the reference kernels (oneDNN off) within 1e-5, as the fusion tests:
//    odd channel counts (3, 5, 7, 13: blocks of 8 or 16 padded), 1-d and 2-d,
//    strides, average pools counting the padding, batch 1 and 3.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "grove/grove.h"
#include "lib/backends/cpu/activation_fusion.h"
#include "lib/backends/cpu/onednn.h"
#include "test/op_test_util.h"
#include "test/ops/cpu_pass_switches.h"
#include "test/ops/onednn_isa.h"

namespace grove {
namespace {

using Attrs = std::vector<std::pair<std::string, AttrValue>>;
using Shape = std::vector<int64_t>;

std::vector<float> RandomValues(int64_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-scale, scale);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = dist(rng);
  return v;
}

using testing::ScopedChains;
using testing::ScopedChannelsLast;
using testing::ScopedCopiesOnly;

std::vector<std::string> PlannedOps(const Model& model, const Shape& x, bool onednn, bool chains) {
  cpu::ScopedOneDnn scope(onednn);
  ScopedChains chain_scope(chains);
  ExecutionInfoOptions options;
  options.device = Device::kCpu;
  options.input_shapes = {x};
  absl::StatusOr<ExecutionInfo> info = DescribeExecution(model, options);
  EXPECT_TRUE(info.ok()) << info.status();
  std::vector<std::string> ops;
  if (!info.ok() || info->paths.empty()) return ops;
  for (const StepInfo& s : info->paths[0].steps) ops.push_back(s.op);
  return ops;
}

// Every output of two runs (the second's) of one CPU session on `threads`:
// the first on other values, so the second shows that the invoke rebinds
// every array.
std::vector<Tensor> RunSessionTwice(const std::shared_ptr<const Model>& model, const Tensor& x, int threads) {
  SessionOptions options;
  options.device = Device::kCpu;
  options.intra_op_threads = threads;
  std::unique_ptr<Session> session = Session::Create(model, options).value();
  Tensor other = Tensor::CopyOf(x.view()).value();
  float* o = other.as<float>();
  for (int64_t i = 0; i < other.view().num_elements(); ++i) o[i] = -2 * o[i] + 0.5f;
  EXPECT_TRUE(session->Run({other.view()}).ok());
  absl::StatusOr<std::vector<TensorView>> out = session->Run({x.view()});
  EXPECT_TRUE(out.ok()) << out.status();
  std::vector<Tensor> copies;
  if (!out.ok()) return copies;
  for (const TensorView& t : *out) copies.push_back(Tensor::CopyOf(t).value());
  return copies;
}

// Output 0 of RunSessionTwice, with oneDNN and its chains on or off.
Tensor RunTwice(const std::shared_ptr<const Model>& model, const Tensor& x, bool onednn, bool chains,
                int threads = 1) {
  cpu::ScopedOneDnn scope(onednn);
  ScopedChains chain_scope(chains);
  std::vector<Tensor> out = RunSessionTwice(model, x, threads);
  return out.empty() ? Tensor() : std::move(out[0]);
}

void ExpectNear(const Tensor& got, const Tensor& want, double tol, const std::string& what) {
  ASSERT_EQ(got.shape(), want.shape()) << what;
  const float* g = got.as<float>();
  const float* w = want.as<float>();
  int reported = 0;
  for (int64_t i = 0; i < got.view().num_elements(); ++i) {
    const double bound = tol + tol * std::fabs(w[i]);
    if (!(std::fabs(static_cast<double>(g[i]) - w[i]) <= bound) && reported++ < 5) {
      ADD_FAILURE() << what << ": element " << i << " is " << g[i] << ", expected " << w[i];
    }
  }
}

void ExpectEqual(const Tensor& got, const Tensor& want, const std::string& what) { ExpectNear(got, want, 0, what); }

// One layer of a CNN as the builder adds it.
struct Layer {
  std::string op;  // "Conv", "Relu", "MaxPool", "AveragePool", "GlobalAveragePool", "Add", ...
  int64_t out_channels = 0;  // Conv
  Attrs attrs;
};

// x [n, c, spatial...] through the layers; `expose`: layer indices whose
// output is an output of the model too.
std::shared_ptr<const Model> Cnn(const Shape& x, const std::vector<Layer>& layers, std::vector<int> expose = {}) {
  ModelBuilder b;
  std::vector<Dim> dims(x.begin(), x.end());
  b.AddInput("x", DType::kF32, dims);
  std::string cur = "x";
  int64_t channels = x[1];
  const size_t spatial = x.size() - 2;
  std::vector<std::string> extra_outputs;
  for (size_t i = 0; i < layers.size(); ++i) {
    const Layer& l = layers[i];
    const std::string out = "h" + std::to_string(i), tag = std::to_string(i);
    if (l.op == "Conv") {
      Shape w = {l.out_channels, channels};
      for (size_t d = 0; d < spatial; ++d) w.push_back(3);
      b.AddWeight("w" + tag, DType::kF32, w, RandomValues(testing::Count(w), 100 + i, 0.4f));
      b.AddWeight("b" + tag, DType::kF32, {l.out_channels}, RandomValues(l.out_channels, 200 + i));
      Attrs attrs = l.attrs;
      if (attrs.empty()) attrs = {{"pads", Shape(2 * spatial, 1)}};
      b.AddOp("Conv", {cur, "w" + tag, "b" + tag}, {out}, attrs, "conv" + tag);
      channels = l.out_channels;
    } else if (l.op == "Add") {
      b.AddWeight("k" + tag, DType::kF32, {}, std::vector<float>{0.25f});
      b.AddOp("Add", {cur, "k" + tag}, {out}, {}, "add" + tag);
    } else {
      b.AddOp(l.op, {cur}, {out}, l.attrs, l.op + tag);
    }
    cur = out;
    for (int e : expose) {
      if (e == static_cast<int>(i)) extra_outputs.push_back(out);
    }
  }
  b.AddOutput(cur);
  for (const std::string& o : extra_outputs) b.AddOutput(o);
  return Model::LoadFromBuffer(*b.Finish()).value();
}

const Attrs kPool2 = {{"kernel_shape", Shape{2, 2}}, {"strides", Shape{2, 2}}};

TEST(OneDnnChainTest, ConsecutiveStepsRunAsOneChainEqualToUnchained) {
  struct Case {
    std::string what;
    Shape x;
    std::vector<Layer> layers;
    std::vector<std::string> chained;  // the plan's steps
  };
  const std::vector<Case> cases = {
      {"the small CNN: two blocks and a global pool",
       {3, 3, 20, 20},
       {{"Conv", 8}, {"Relu"}, {"MaxPool", 0, kPool2}, {"Conv", 16}, {"Relu"}, {"MaxPool", 0, kPool2},
        {"GlobalAveragePool"}},
       {"Conv+Relu+MaxPool>Conv+Relu+MaxPool>GlobalAveragePool"}},
      {"odd channel counts (3, 5, 7, 13)",
       {1, 3, 17, 15},
       {{"Conv", 5}, {"Relu"}, {"Conv", 7}, {"MaxPool", 0, kPool2}, {"Conv", 13}, {"GlobalMaxPool"}},
       {"Conv+Relu>Conv+MaxPool>Conv>GlobalMaxPool"}},
      {"pools as links of their own, strided Conv, average counting pads",
       {2, 16, 12, 12},
       {{"Conv", 16, {{"pads", Shape{1, 1, 1, 1}}, {"strides", Shape{2, 2}}}},
        {"Relu"},
        {"Conv", 32},
        {"Sigmoid"},
        {"AveragePool", 0, {{"kernel_shape", Shape{3, 3}}, {"pads", Shape{1, 1, 1, 1}}, {"count_include_pad", int64_t{1}}}}},
       {"Conv+Relu>Conv+Sigmoid+AveragePool"}},
      {"1-d",
       {2, 4, 31},
       {{"Conv", 8}, {"Relu"}, {"MaxPool", 0, {{"kernel_shape", Shape{2}}, {"strides", Shape{2}}}}, {"Conv", 6},
        {"GlobalAveragePool"}},
       {"Conv+Relu+MaxPool>Conv>GlobalAveragePool"}},
  };
  for (const Case& c : cases) {
    std::shared_ptr<const Model> model = Cnn(c.x, c.layers);
    EXPECT_EQ(PlannedOps(*model, c.x, true, true), c.chained) << c.what;
    const std::vector<std::string> unchained = PlannedOps(*model, c.x, true, false);
    EXPECT_EQ(static_cast<int64_t>(unchained.size()), std::count(c.chained[0].begin(), c.chained[0].end(), '>') + 1)
        << c.what;
    const Tensor x = testing::MakeTensor<float>(DType::kF32, c.x, RandomValues(testing::Count(c.x), 7, 2));
    const Tensor chained = RunTwice(model, x, true, true);
    ExpectEqual(chained, RunTwice(model, x, true, false), c.what + ": chained vs unchained");
    ExpectNear(chained, RunTwice(model, x, false, false), 1e-5, c.what + ": chained vs reference kernels");
    ExpectEqual(RunTwice(model, x, true, true, 2), RunTwice(model, x, true, false, 2),
                c.what + ": chained vs unchained, 2 threads");
  }
}

TEST(OneDnnChainTest, StepsThatAreNotLinksEndTheChain) {
  const Shape x = {1, 8, 16, 16};
  struct Case {
    std::string what;
    std::vector<Layer> layers;
    std::vector<int> expose;
    std::vector<std::string> planned;
  };
  const std::vector<Case> cases = {
      {"an Add between", {{"Conv", 8}, {"Relu"}, {"Add"}, {"Conv", 8}, {"MaxPool", 0, kPool2}}, {},
       {"Conv+Relu", "Add", "Conv+MaxPool"}},
      {"a Relu that no Conv takes (after a pool)",
       {{"Conv", 8}, {"MaxPool", 0, kPool2}, {"Relu"}, {"Conv", 16}, {"GlobalAveragePool"}}, {},
       {"Conv+MaxPool", "Relu", "Conv>GlobalAveragePool"}},
      {"an intermediate that is an output", {{"Conv", 8}, {"Relu"}, {"Conv", 8}, {"Relu"}}, {1},
       {"Conv+Relu", "Conv+Relu"}},
      {"a chain that starts with a pool", {{"MaxPool", 0, kPool2}, {"Conv", 8}, {"GlobalAveragePool"}}, {},
       {"MaxPool", "Conv>GlobalAveragePool"}},
  };
  for (const Case& c : cases) {
    std::shared_ptr<const Model> model = Cnn(x, c.layers, c.expose);
    EXPECT_EQ(PlannedOps(*model, x, true, true), c.planned) << c.what;
    const Tensor in = testing::MakeTensor<float>(DType::kF32, x, RandomValues(testing::Count(x), 9, 2));
    ExpectEqual(RunTwice(model, in, true, true), RunTwice(model, in, true, false), c.what + ": chained vs unchained");
    ExpectNear(RunTwice(model, in, true, true), RunTwice(model, in, false, false), 1e-5,
               c.what + ": vs reference kernels");
  }
  // oneDNN off: the reference kernels, step for step.
  std::shared_ptr<const Model> model = Cnn(x, {{"Conv", 8}, {"Relu"}, {"Conv", 8}, {"GlobalAveragePool"}});
  EXPECT_EQ(PlannedOps(*model, x, false, true), (std::vector<std::string>{"Conv", "Relu", "Conv", "GlobalAveragePool"}));
}

// A pool reads the layout the Conv before it hands over (PrepareOneDnnPool's
// `source`), so the small CNN's hand-overs need no reorder: Conv -> MaxPool
// twice and MaxPool -> GlobalAveragePool, at 8 channels (not a whole block of
// 16), 16, and 3 (padded), batch 1 and 8.
TEST(OneDnnChainTest, PoolsReadTheLayoutTheConvHandsOver) {
  for (const auto& [x, first] : std::vector<std::pair<Shape, int64_t>>{
           {{8, 3, 32, 32}, 8}, {{1, 3, 16, 16}, 16}, {{1, 3, 17, 15}, 3}}) {
    const std::string what = absl::StrCat("X [", absl::StrJoin(x, ","), "], ", first, " channels first");
    std::shared_ptr<const Model> model =
        Cnn(x, {{"Conv", first}, {"Relu"}, {"MaxPool", 0, kPool2}, {"Conv", 16}, {"Relu"}, {"MaxPool", 0, kPool2},
                {"GlobalAveragePool"}});
    const Tensor in = testing::MakeTensor<float>(DType::kF32, x, RandomValues(testing::Count(x), 13, 2));
    const int64_t before = cpu::OneDnnStepsLinked();
    const Tensor chained = RunTwice(model, in, true, true);
    const int64_t linked = cpu::OneDnnStepsLinked() - before;
    if (linked == 0) GTEST_SKIP() << "oneDNN's Conv writes grove's own layout on this CPU: nothing to link";
    if (::grove::testing::OneDnnHasAvx2()) EXPECT_GE(linked, 3) << what;
    ExpectEqual(chained, RunTwice(model, in, true, false), what + ": chained vs unchained");
    ExpectNear(chained, RunTwice(model, in, false, false), 1e-5, what + ": chained vs reference kernels");
  }
}

// A Conv oneDNN does not take (4 spatial dims) chained with one it does:
// the links hand over grove's layout in the chain's workspace instead.
TEST(OneDnnChainTest, LinksOneDnnDoesNotTakeRunTheirReferenceKernels) {
  const Shape x = {1, 2, 4, 4, 4, 4};
  std::shared_ptr<const Model> model = Cnn(x, {{"Conv", 3}, {"Relu"}, {"Conv", 4}, {"GlobalAveragePool"}});
  const std::vector<std::string> ops = PlannedOps(*model, x, true, true);
  ASSERT_EQ(ops.size(), 1u);
  EXPECT_TRUE(absl::StrContains(ops[0], ">")) << ops[0];
  const Tensor in = testing::MakeTensor<float>(DType::kF32, x, RandomValues(testing::Count(x), 11, 2));
  ExpectNear(RunTwice(model, in, true, true), RunTwice(model, in, false, false), 1e-5, "4-d chain vs reference");
}

// ---------------------------------------------------------------------------
// Channels-last activations (AssignChannelsLast): values only window and
// elementwise steps touch are stored [N, spatial..., C].

// A residual CNN: x -> Conv+Relu (a) -> Conv (b) -> Add(b, a) -> Relu (r)
// -> `pool` -> Conv (c) -> Mul(c, 0.5) -> GlobalAveragePool -> Flatten.
// With `concat`, r is also concatenated with itself along the channels (a
// step that needs [N, C, ...]) and that is an output too. With
// `channel_bias`, the Add takes a [C, 1, 1] bias as well (a broadcast along
// the channels: plain).
std::shared_ptr<const Model> ResidualCnn(const Shape& x, const std::string& pool, bool concat, bool channel_bias,
                                         bool batch_norm = false) {
  ModelBuilder b;
  b.AddInput("x", DType::kF32, std::vector<Dim>(x.begin(), x.end()));
  const size_t spatial = x.size() - 2;
  const int64_t c = 8;
  auto conv = [&](const std::string& in, int64_t in_c, const std::string& out, int seed) {
    Shape w = {c, in_c};
    for (size_t d = 0; d < spatial; ++d) w.push_back(3);
    b.AddWeight("W_" + out, DType::kF32, w, RandomValues(testing::Count(w), seed, 0.4f));
    b.AddWeight("B_" + out, DType::kF32, {c}, RandomValues(c, seed + 1));
    b.AddOp("Conv", {in, "W_" + out, "B_" + out}, {out}, {{"pads", Shape(2 * spatial, 1)}}, "conv_" + out);
  };
  conv("x", x[1], "a0", 1);
  b.AddOp("Relu", {"a0"}, {"a"}, {}, "relu_a");
  conv("a", c, "b", 3);
  std::string sum_in = "b";
  if (channel_bias) {
    Shape bias = {c};
    for (size_t d = 0; d < spatial; ++d) bias.push_back(1);
    b.AddWeight("cb", DType::kF32, bias, RandomValues(c, 5));
    b.AddOp("Add", {"b", "cb"}, {"bb"}, {}, "channel_bias");
    sum_in = "bb";
  }
  b.AddOp("Add", {sum_in, "a"}, {"s"}, {}, "residual");
  std::string to_relu = "s";
  if (batch_norm) {  // after the Add, so not folded into a Conv: a step of its own
    b.AddWeight("bn_scale", DType::kF32, {c}, RandomValues(c, 61));
    b.AddWeight("bn_bias", DType::kF32, {c}, RandomValues(c, 62));
    b.AddWeight("bn_mean", DType::kF32, {c}, RandomValues(c, 63));
    std::vector<float> var = RandomValues(c, 64);
    for (float& v : var) v = 1.0f + std::fabs(v);
    b.AddWeight("bn_var", DType::kF32, {c}, var);
    b.AddOp("BatchNormalization", {"s", "bn_scale", "bn_bias", "bn_mean", "bn_var"}, {"sn"}, {}, "norm");
    to_relu = "sn";
  }
  b.AddOp("Relu", {to_relu}, {"r"}, {}, "relu_r");
  const Shape window(spatial, 2);
  b.AddOp(pool, {"r"}, {"p"}, {{"kernel_shape", window}, {"strides", window}}, "pool");
  conv("p", c, "cc", 7);
  b.AddWeight("half", DType::kF32, {}, std::vector<float>{0.5f});
  b.AddOp("Mul", {"cc", "half"}, {"m"}, {}, "scale");
  b.AddOp("GlobalAveragePool", {"m"}, {"g"}, {}, "gap");
  b.AddOp("Flatten", {"g"}, {"y"}, {}, "flatten");
  b.AddOutput("y");
  if (concat) {
    b.AddOp("Concat", {"r", "r"}, {"rr"}, {{"axis", int64_t{1}}}, "concat");
    b.AddOutput("rr");
  }
  return Model::LoadFromBuffer(*b.Finish()).value();
}

// RunSessionTwice with oneDNN and the layout pass on or off.
std::vector<Tensor> RunAllTwice(const std::shared_ptr<const Model>& model, const Tensor& x, bool onednn,
                                bool channels_last, int threads) {
  cpu::ScopedOneDnn scope(onednn);
  ScopedChannelsLast layout(channels_last);
  return RunSessionTwice(model, x, threads);
}

TEST(ChannelsLastTest, ResidualCnnsMatchThePlainLayoutAndTheReferenceKernels) {
  struct Case {
    Shape x;
    std::string pool;
    bool concat, channel_bias;
    bool stored;  // whether any window step gets a channels-last X or Y
    bool batch_norm = false;
  };
  const std::vector<Case> cases = {
      {{2, 3, 16, 16}, "MaxPool", false, false, true, true},  // a BatchNormalization of its own
      {{1, 4, 30}, "AveragePool", false, false, true, true},
      {{1, 3, 6, 6, 6}, "MaxPool", false, false, true, true},
      {{1, 3, 16, 16}, "MaxPool", false, false, true},
      {{3, 5, 12, 10}, "AveragePool", false, false, true},
      {{2, 4, 30}, "MaxPool", false, false, true},                // 1-d
      {{1, 3, 8, 8, 8}, "AveragePool", false, false, true},       // 3-d
      {{2, 3, 16, 16}, "MaxPool", true, false, true},             // r stays plain; the rest need not
      {{1, 3, 16, 16}, "MaxPool", false, true, true},             // b, a, s, r stay plain
  };
  for (const Case& c : cases) {
    const std::string what = absl::StrCat("X [", absl::StrJoin(c.x, ","), "] ", c.pool, c.concat ? " + Concat" : "",
                                          c.channel_bias ? " + channel bias" : "", c.batch_norm ? " + BatchNorm" : "");
    std::shared_ptr<const Model> model = ResidualCnn(c.x, c.pool, c.concat, c.channel_bias, c.batch_norm);
    const Tensor x = testing::MakeTensor<float>(DType::kF32, c.x, RandomValues(testing::Count(c.x), 17, 2));
    const std::vector<Tensor> reference = RunAllTwice(model, x, false, false, 1);
    const cpu::ChannelsLastCounts before = cpu::ChannelsLastStepsPrepared();
    const std::vector<Tensor> last = RunAllTwice(model, x, true, true, 1);
    const cpu::ChannelsLastCounts after = cpu::ChannelsLastStepsPrepared();
    EXPECT_EQ(after.prepared > before.prepared, c.stored) << what;
    if (::grove::testing::OneDnnHasAvx2()) EXPECT_EQ(after.copied, before.copied) << what << ": oneDNN takes them all";
    const std::vector<Tensor> plain = RunAllTwice(model, x, true, false, 1);
    ASSERT_EQ(last.size(), reference.size()) << what;
    ASSERT_EQ(plain.size(), reference.size()) << what;
    for (size_t i = 0; i < last.size(); ++i) {
      ExpectNear(last[i], plain[i], 1e-5, what + ": channels-last vs plain layout");
      ExpectNear(last[i], reference[i], 1e-5, what + ": channels-last vs reference kernels");
    }
    const std::vector<Tensor> two = RunAllTwice(model, x, true, true, 2);
    for (size_t i = 0; i < two.size(); ++i) ExpectNear(two[i], reference[i], 1e-5, what + ": 2 threads");
    // The kernels' fallback: X and Y transposed through the workspace.
    ScopedCopiesOnly copies;
    const cpu::ChannelsLastCounts copied_before = cpu::ChannelsLastStepsPrepared();
    const std::vector<Tensor> copied = RunAllTwice(model, x, true, true, 1);
    if (c.stored) EXPECT_GT(cpu::ChannelsLastStepsPrepared().copied, copied_before.copied) << what;
    for (size_t i = 0; i < copied.size(); ++i) {
      ExpectNear(copied[i], reference[i], 1e-5, what + ": through transposed copies");
    }
  }
}

// x -> Conv+Relu (a) -> Conv (b) -> Concat(a, b) along `axis` -> Conv ->
// GlobalAveragePool -> Flatten: the Concat's values are stored
// channels-last with the Convs', the axis moved (channels: the last).
TEST(ChannelsLastTest, ConcatAlongAnyAxisKeepsChannelsLast) {
  for (const auto& [x, axis] : std::vector<std::pair<Shape, int64_t>>{
           {{2, 3, 12, 10}, 1}, {{1, 3, 12, 10}, -3}, {{1, 3, 12, 10}, 2}, {{2, 3, 12, 10}, -1}, {{2, 4, 20}, 1},
           {{1, 4, 20}, 2}}) {
    const std::string what = absl::StrCat("X [", absl::StrJoin(x, ","), "], axis ", axis);
    const size_t spatial = x.size() - 2;
    ModelBuilder b;
    b.AddInput("x", DType::kF32, std::vector<Dim>(x.begin(), x.end()));
    auto conv = [&](const std::string& in, int64_t in_c, int64_t out_c, const std::string& out, int seed) {
      Shape w = {out_c, in_c};
      for (size_t d = 0; d < spatial; ++d) w.push_back(3);
      b.AddWeight("W_" + out, DType::kF32, w, RandomValues(testing::Count(w), seed, 0.4f));
      b.AddOp("Conv", {in, "W_" + out}, {out}, {{"pads", Shape(2 * spatial, 1)}}, "conv_" + out);
    };
    conv("x", x[1], 8, "a0", 31);
    b.AddOp("Relu", {"a0"}, {"a"}, {}, "relu");
    conv("a", 8, 8, "b", 33);
    b.AddOp("Concat", {"a", "b"}, {"ab"}, {{"axis", axis}}, "concat");
    const bool channels = axis == 1 || axis == -static_cast<int64_t>(x.size()) + 1;
    conv("ab", channels ? 16 : 8, 4, "c", 35);
    b.AddOp("GlobalAveragePool", {"c"}, {"g"}, {}, "gap");
    b.AddOp("Flatten", {"g"}, {"y"}, {}, "flatten");
    b.AddOutput("y");
    std::shared_ptr<const Model> model = Model::LoadFromBuffer(*b.Finish()).value();
    const Tensor in = testing::MakeTensor<float>(DType::kF32, x, RandomValues(testing::Count(x), 37, 2));
    const std::vector<Tensor> reference = RunAllTwice(model, in, false, false, 1);
    const cpu::ChannelsLastCounts before = cpu::ChannelsLastStepsPrepared();
    const std::vector<Tensor> last = RunAllTwice(model, in, true, true, 1);
    // conv_a0's Y, conv_b's X and Y, conv_c's X: the Concat between them.
    EXPECT_GE(cpu::ChannelsLastStepsPrepared().prepared - before.prepared, 3) << what;
    ASSERT_EQ(last.size(), 1u) << what;
    ExpectNear(last[0], reference[0], 1e-5, what + ": channels-last vs reference kernels");
    ExpectNear(RunAllTwice(model, in, true, false, 1)[0], reference[0], 1e-5, what + ": plain layout");
    ExpectNear(RunAllTwice(model, in, true, true, 2)[0], reference[0], 1e-5, what + ": 2 threads");
  }
}

// DescribeExecution (grove inspect --device cpu) names the steps that run
// channels-last, and none when the pass is off.
TEST(ChannelsLastTest, InspectNamesTheChannelsLastSteps) {
  const Shape x = {1, 3, 16, 16};
  std::shared_ptr<const Model> residual = ResidualCnn(x, "MaxPool", false, false);
  for (bool pass : {true, false}) {
    cpu::ScopedOneDnn scope(true);
    ScopedChannelsLast layout(pass);
    ExecutionInfoOptions o;
    o.input_shapes = {x};
    absl::StatusOr<ExecutionInfo> info = DescribeExecution(*residual, o);
    ASSERT_TRUE(info.ok()) << info.status();
    ASSERT_FALSE(info->paths.empty());
    int channels_last = 0;
    for (const StepInfo& st : info->paths[0].steps) {
      if (st.layout.empty()) continue;
      ++channels_last;
      EXPECT_TRUE(st.layout == "channels-last X and Y" || st.layout == "channels-last X" ||
                  st.layout == "channels-last Y")
          << st.op << " " << st.node << ": " << st.layout;
      EXPECT_EQ(st.backend, "cpu");
    }
    if (pass) {
      EXPECT_GE(channels_last, 2);
    } else {
      EXPECT_EQ(channels_last, 0);
    }
  }
}

// A squeeze-and-excitation block: h = Conv(x); s = Sigmoid(Conv(Relu(Conv(
// GlobalAveragePool(h))))) [N, C, 1, 1] (or a [1, C, 1, 1] weight, which
// keeps its group plain); y = Conv(h * s). The per-channel s is stored with
// h, channels-last ([N, 1, 1, C], the same bytes), so h, the pool and the
// Convs around the Mul need no reorder, and the results are the plain
// layout's and the reference kernels'.
TEST(ChannelsLastTest, SqueezeAndExcitationScalesStayChannelsLast) {
  for (const auto& [x, weight_scale] : std::vector<std::pair<Shape, bool>>{
           {{1, 3, 20, 18}, false}, {{3, 3, 12, 12}, false}, {{2, 3, 10, 11}, true}, {{1, 3, 30}, false}}) {
    const std::string what = absl::StrCat("X [", absl::StrJoin(x, ","), "]", weight_scale ? ", a weight scale" : "");
    const size_t spatial = x.size() - 2;
    const int64_t c = 16;
    ModelBuilder b;
    b.AddInput("x", DType::kF32, std::vector<Dim>(x.begin(), x.end()));
    auto conv = [&](const std::string& in, int64_t in_c, int64_t out_c, const std::string& out, int64_t k, int seed) {
      Shape w = {out_c, in_c};
      for (size_t d = 0; d < spatial; ++d) w.push_back(k);
      b.AddWeight("W_" + out, DType::kF32, w, RandomValues(testing::Count(w), seed, 0.4f));
      b.AddWeight("B_" + out, DType::kF32, {out_c}, RandomValues(out_c, seed + 1));
      b.AddOp("Conv", {in, "W_" + out, "B_" + out}, {out}, {{"pads", Shape(2 * spatial, k / 2)}}, "conv_" + out);
    };
    conv("x", x[1], c, "h", 3, 41);
    Shape vec = {weight_scale ? 1 : x[0], c};
    for (size_t d = 0; d < spatial; ++d) vec.push_back(1);
    if (weight_scale) {
      b.AddWeight("s", DType::kF32, vec, RandomValues(c, 43));
    } else {
      b.AddOp("GlobalAveragePool", {"h"}, {"g"}, {}, "gap");
      conv("g", c, c / 4, "e", 1, 45);
      b.AddOp("Relu", {"e"}, {"er"}, {}, "relu");
      conv("er", c / 4, c, "f", 1, 47);
      b.AddOp("Sigmoid", {"f"}, {"s"}, {}, "gate");
    }
    b.AddOp("Mul", {"h", "s"}, {"hs"}, {}, "scale");
    conv("hs", c, 8, "y", 3, 49);
    b.AddOutput("y");
    std::shared_ptr<const Model> model = Model::LoadFromBuffer(*b.Finish()).value();
    const Tensor in = testing::MakeTensor<float>(DType::kF32, x, RandomValues(testing::Count(x), 51, 2));
    const std::vector<Tensor> reference = RunAllTwice(model, in, false, false, 1);
    // Which steps run channels-last: conv_y's X with s computed; none of
    // h's readers with a weight scale (its group holds a weight: plain).
    cpu::ScopedOneDnn scope(true);
    ExecutionInfoOptions o;
    o.input_shapes = {x};
    absl::StatusOr<ExecutionInfo> info = DescribeExecution(*model, o);
    ASSERT_TRUE(info.ok()) << info.status();
    std::string y_layout = "?";
    for (const StepInfo& st : info->paths[0].steps) {
      if (st.node == "conv_y") y_layout = st.layout;
    }
    EXPECT_EQ(y_layout, weight_scale ? "" : "channels-last X") << what;
    ASSERT_EQ(reference.size(), 1u);
    ExpectNear(RunAllTwice(model, in, true, true, 1)[0], reference[0], 1e-5, what + ": channels-last");
    ExpectNear(RunAllTwice(model, in, true, false, 1)[0], reference[0], 1e-5, what + ": plain layout");
    ExpectNear(RunAllTwice(model, in, true, true, 2)[0], reference[0], 1e-5, what + ": 2 threads");
    ScopedCopiesOnly copies;
    ExpectNear(RunAllTwice(model, in, true, true, 1)[0], reference[0], 1e-5, what + ": transposed copies");
  }
}

// Nothing is stored channels-last when oneDNN is off, when the pass is, or
// when no window step's X or Y could be (a Conv read by Concat and Flatten
// only).
TEST(ChannelsLastTest, PlainWhereThePassDoesNotApply) {
  const Shape x = {1, 3, 16, 16};
  std::shared_ptr<const Model> residual = ResidualCnn(x, "MaxPool", false, false);
  const Tensor in = testing::MakeTensor<float>(DType::kF32, x, RandomValues(testing::Count(x), 19, 2));
  for (const auto& [onednn, pass] : std::vector<std::pair<bool, bool>>{{false, true}, {true, false}}) {
    const int64_t before = cpu::ChannelsLastStepsPrepared().prepared;
    RunAllTwice(residual, in, onednn, pass, 1);
    EXPECT_EQ(cpu::ChannelsLastStepsPrepared().prepared, before) << "oneDNN " << onednn << ", pass " << pass;
  }
  ModelBuilder b;
  b.AddInput("x", DType::kF32, std::vector<Dim>(x.begin(), x.end()));
  b.AddWeight("w", DType::kF32, {4, 3, 3, 3}, RandomValues(108, 23, 0.4f));
  b.AddOp("Conv", {"x", "w"}, {"h"}, {{"pads", Shape{1, 1, 1, 1}}}, "conv");
  b.AddOp("Concat", {"h", "h"}, {"hh"}, {{"axis", int64_t{1}}}, "concat");
  b.AddOp("Flatten", {"hh"}, {"y"}, {}, "flatten");
  b.AddOutput("y");
  std::shared_ptr<const Model> model = Model::LoadFromBuffer(*b.Finish()).value();
  const int64_t before = cpu::ChannelsLastStepsPrepared().prepared;
  const std::vector<Tensor> got = RunAllTwice(model, in, true, true, 1);
  EXPECT_EQ(cpu::ChannelsLastStepsPrepared().prepared, before);
  const std::vector<Tensor> want = RunAllTwice(model, in, false, false, 1);
  ASSERT_EQ(got.size(), 1u);
  ExpectNear(got[0], want[0], 1e-5, "Conv -> Concat");
}

}  // namespace
}  // namespace grove
