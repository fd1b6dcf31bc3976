// grove's fused f32 LSTM (lib/backends/cpu/recurrent_lstm.h) against the
// reference kernel, both run in this process (cpu::ScopedLstmKernel and
// cpu::ScopedOneDnn pick the path; the reference kernel is checked against
// the ONNX equations in recurrent_test.cc): every direction and layout, with
// and without bias, initial states (h only, c only, both) and peepholes,
// hidden sizes that fill 8 lanes and ones that do not, seq and batch 1, odd
// batches (the GEMV's last single row), omitted outputs, sequence_lens (all
// full: the fused kernel; shorter: the reference kernel's bytes), a model
// whose weights the prepare packs and one whose W is an input (not packed:
// another path), and what the kernel does not take.
//
// Tolerance: the fused kernel's sigmoid and tanh are within 3e-7 of libm's
// and it sums the products in another order; the difference over 128 steps
// stays far below 1e-5 + 1e-4 |ref| (recurrent_test's bound against the
// double reference).
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "grove/grove.h"
#include "gtest/gtest.h"
#include "lib/backends/cpu/cpu_features.h"
#include "lib/backends/cpu/onednn.h"
#include "lib/backends/cpu/recurrent_lstm.h"
#include "test/op_test_util.h"
#include "test/recurrent_paths_util.h"
#include "test/recurrent_test_util.h"

namespace grove {
namespace {

using testing::MakeTensor;
using testing::RunOp;

struct Case : testing::RecurrentSpec {
  std::vector<int32_t> lengths;  // empty: no sequence_lens
  int num_outputs = 3;

  std::string Describe() const {
    return absl::StrCat(direction, " layout ", layout, " seq ", seq, " batch ", batch, " input ", input, " hidden ",
                        hidden, " bias ", bias, " h0 ", initial_h, " c0 ", initial_c, " P ", peephole, " acts [",
                        absl::StrJoin(activations, ","), "] clip ", clip, " lens [", absl::StrJoin(lengths, ","),
                        "] outputs ", num_outputs);
  }
};

using Tensors = testing::RecurrentTensors;

Tensors MakeInputs(const Case& c, uint32_t seed) { return testing::MakeRecurrentTensors(c, c.lengths, seed); }

// The case through the fused kernel when `fused` (in `mode`; oneDNN off, so
// that a run the kernel leaves goes to the reference kernel), else the
// reference kernel; `made` gets the fused kernels its prepare made.
absl::StatusOr<std::vector<Tensor>> RunCase(bool fused, const Case& c, const Tensors& t, int64_t* made = nullptr,
                                            cpu::LstmKernelMode mode = cpu::LstmKernelMode::kAuto) {
  cpu::ScopedLstmKernel lstm(fused ? mode : cpu::LstmKernelMode::kOff, cpu::LstmKernelAvx512Allowed());
  cpu::ScopedOneDnn onednn(false);
  const int64_t before = cpu::LstmKernelsMade();
  absl::StatusOr<std::vector<Tensor>> out =
      RunOp("LSTM", testing::RecurrentInputs(c, t, !c.lengths.empty()), testing::RecurrentAttrs(c), c.num_outputs);
  if (made != nullptr) *made = cpu::LstmKernelsMade() - before;
  return out;
}

// The fused kernel takes the case (`taken`) or leaves it, and either way
// gives the reference kernel's outputs.
void ExpectPath(const Case& c, bool taken, uint32_t seed = 1,
                cpu::LstmKernelMode mode = cpu::LstmKernelMode::kAuto) {
  SCOPED_TRACE(c.Describe());
  const Tensors t = MakeInputs(c, seed);
  testing::ExpectFastPathAgrees(taken, [&](bool fused, int64_t* made) { return RunCase(fused, c, t, made, mode); });
}

// Each test on AVX2 + FMA (8 lanes) and on AVX-512 (16 lanes) where the CPU
// has them.
class LstmKernelTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    if (!cpu::UseAvx2Kernels()) GTEST_SKIP() << "the fused LSTM needs AVX2 and FMA";
    if (GetParam() && !cpu::HostCpuFeatures().avx512f) GTEST_SKIP() << "no AVX-512 here";
    cpu::SetLstmKernelAvx512Allowed(GetParam());
    ASSERT_EQ(std::string(cpu::LstmKernelIsa()), GetParam() ? "avx512" : "avx2");
  }
  void TearDown() override { cpu::SetLstmKernelAvx512Allowed(true); }
};

INSTANTIATE_TEST_SUITE_P(Isa, LstmKernelTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) { return info.param ? "Avx512" : "Avx2"; });

TEST_P(LstmKernelTest, EveryDirectionLayoutBiasAndState) {
  for (const char* direction : {"forward", "reverse", "bidirectional"}) {
    for (int64_t layout : {0, 1}) {
      // 0: nothing, 1: bias, 2: bias + h0, 3: h0 + c0 + P, 4: c0 + P, 5: all
      for (int extras = 0; extras < 6; ++extras) {
        Case c;
        c.direction = direction;
        c.layout = layout;
        c.seq = 5;
        c.batch = 3;
        c.input = 4;
        c.hidden = 6;
        c.bias = extras == 1 || extras == 2 || extras == 5;
        c.initial_h = extras == 2 || extras == 3 || extras == 5;
        c.initial_c = extras >= 3;
        c.peephole = extras >= 3;
        ExpectPath(c, true, static_cast<uint32_t>(extras * 7 + layout));
      }
    }
  }
}

TEST_P(LstmKernelTest, EdgeShapes) {
  const std::vector<std::vector<int64_t>> shapes = {// seq, batch, input, hidden
                                                    {1, 1, 1, 1},    {1, 4, 3, 2},    {9, 1, 2, 17},
                                                    {3, 2, 33, 9},   {16, 5, 8, 32},  {7, 3, 5, 8},
                                                    {4, 2, 3, 24},   {6, 1, 7, 40},   {128, 1, 16, 32},
                                                    {64, 4, 32, 32}, {3, 2, 9, 128}, {2, 7, 1, 16},
                                                    {5, 1, 20, 256}, {3, 16, 4, 16}};
  for (const std::vector<int64_t>& s : shapes) {
    for (const char* direction : {"forward", "bidirectional"}) {
      Case c;
      c.seq = s[0];
      c.batch = s[1];
      c.input = s[2];
      c.hidden = s[3];
      c.direction = direction;
      c.bias = c.initial_h = c.initial_c = c.peephole = true;
      c.layout = s[1] % 2;
      ExpectPath(c, true);
    }
  }
}

TEST_P(LstmKernelTest, OmittedOutputs) {
  for (int outputs : {1, 2}) {
    Case c;
    c.direction = "bidirectional";
    c.layout = 1;
    c.bias = c.initial_h = true;
    c.num_outputs = outputs;
    ExpectPath(c, true);
  }
}

TEST_P(LstmKernelTest, SequenceLensRunsTheReferenceUnlessFull) {
  Case c;
  c.seq = 5;
  c.batch = 4;
  c.direction = "bidirectional";
  c.bias = c.initial_h = c.initial_c = true;
  c.lengths = {5, 5, 5, 5};
  ExpectPath(c, true);
  c.lengths = {5, 2, 0, 3};
  SCOPED_TRACE(c.Describe());
  const Tensors t = MakeInputs(c, 3);
  int64_t made = 0;
  absl::StatusOr<std::vector<Tensor>> got = RunCase(true, c, t, &made);
  absl::StatusOr<std::vector<Tensor>> want = RunCase(false, c, t);
  ASSERT_TRUE(got.ok() && want.ok());
  EXPECT_EQ(made, 1);  // made, not run
  testing::ExpectSameBytes(*got, *want);
}

TEST_P(LstmKernelTest, WhatTheKernelDoesNotTake) {
  Case clip;
  clip.clip = 0.5;
  clip.bias = true;
  ExpectPath(clip, false);
  Case input_forget;
  input_forget.input_forget = true;
  ExpectPath(input_forget, false);
  Case acts;
  acts.activations = {"HardSigmoid", "Tanh", "Tanh"};
  ExpectPath(acts, false);
  // Layers oneDNN runs faster: the fused kernel only when asked for always.
  // (batch x hidden above 2048, LstmKernelTakes).
  Case large;
  large.hidden = 520;
  large.batch = 4;
  large.input = 8;
  ExpectPath(large, false);
  ExpectPath(large, true, 1, cpu::LstmKernelMode::kAlways);
  Case wide;
  wide.batch = 257;
  wide.hidden = 8;
  ExpectPath(wide, false);
  ExpectPath(wide, true, 1, cpu::LstmKernelMode::kAlways);

  // f64 and GRU: other kernels, nothing made.
  Case c;
  const Tensors t = MakeInputs(c, 4);
  auto widen = [](const Tensor& f) {
    const float* p = f.as<float>();
    return MakeTensor<double>(DType::kF64, f.shape(), std::vector<double>(p, p + f.view().num_elements()));
  };
  const Tensor x = widen(t.x), w = widen(t.w), r = widen(t.r);
  cpu::ScopedLstmKernel scope(cpu::LstmKernelMode::kAlways, cpu::LstmKernelAvx512Allowed());
  const int64_t before = cpu::LstmKernelsMade();
  ASSERT_TRUE(RunOp("LSTM", {&x, &w, &r}, testing::RecurrentAttrs(c), 2).ok());
  const Tensor gw = MakeTensor<float>(DType::kF32, {1, 3 * c.hidden, c.input},
                                      std::vector<float>(static_cast<size_t>(3 * c.hidden * c.input), 0.1f));
  const Tensor gr = MakeTensor<float>(DType::kF32, {1, 3 * c.hidden, c.hidden},
                                      std::vector<float>(static_cast<size_t>(3 * c.hidden * c.hidden), 0.1f));
  Case gru = c;
  gru.op = "GRU";
  ASSERT_TRUE(RunOp("GRU", {&t.x, &gw, &gr}, testing::RecurrentAttrs(gru), 2).ok());
  EXPECT_EQ(cpu::LstmKernelsMade(), before);
}

// A model's LSTM (Y omitted; W, R, B and P weights the prepare packs) at
// several sequence lengths through one session, and the same LSTM with W a
// model input, which the prepare cannot pack.
absl::StatusOr<std::vector<float>> RunModel(bool fused, bool w_is_input, const Case& c, const Tensors& t,
                                            int64_t* made) {
  cpu::ScopedLstmKernel lstm(fused ? cpu::LstmKernelMode::kAuto : cpu::LstmKernelMode::kOff,
                             cpu::LstmKernelAvx512Allowed());
  cpu::ScopedOneDnn onednn(false);
  const int64_t before = cpu::LstmKernelsMade();
  absl::StatusOr<std::vector<float>> all = testing::RunLstmModelWithYOmitted(c, t, w_is_input);
  *made = cpu::LstmKernelsMade() - before;
  return all;
}

TEST_P(LstmKernelTest, ModelWithYOmitted) {
  Case c;
  c.seq = 6;
  c.batch = 3;
  c.hidden = 12;
  c.direction = "bidirectional";
  c.peephole = true;
  const Tensors t = MakeInputs(c, 5);
  testing::ExpectModelPathsAgree([&](bool fast, bool w_is_input, int64_t* made) {
    return RunModel(fast, w_is_input, c, t, made);
  });
}

// A layer worth splitting runs its directions and groups of its batch on
// the session's threads: Y, Y_h and Y_c are the bytes one thread gives
// (each batch entry is computed the same way on any thread and in any
// group), at several lengths through one session (a short sequence stays on
// one thread), and the reference kernel's within the file's tolerance.
void ExpectThreadsGiveTheSameBytes(const std::string& direction, int64_t batch, std::vector<int> thread_counts) {
  Case c;
  c.direction = direction;
  c.batch = batch;
  c.input = 16;
  c.hidden = 64;  // batch x hidden at most 2048: the fused kernel's
  c.seq = 40;
  c.bias = c.initial_h = c.initial_c = true;
  const Tensors t = MakeInputs(c, 9);
  const int64_t g = c.gates(), h = c.hidden, dirs = direction == "bidirectional" ? 2 : 1;
  ModelBuilder builder;
  builder.AddSymbol("seq", 1, 64);
  builder.AddInput("x", DType::kF32, {"seq", c.batch, c.input});
  builder.AddWeight("w", DType::kF32, {dirs, g * h, c.input}, testing::FloatBytes(t.w));
  builder.AddWeight("r", DType::kF32, {dirs, g * h, h}, testing::FloatBytes(t.r));
  builder.AddWeight("b", DType::kF32, {dirs, 2 * g * h}, testing::FloatBytes(t.b));
  builder.AddWeight("h0", DType::kF32, {dirs, c.batch, h}, testing::FloatBytes(t.h0));
  builder.AddWeight("c0", DType::kF32, {dirs, c.batch, h}, testing::FloatBytes(t.c0));
  builder.AddOp("LSTM", {"x", "w", "r", "b", "", "h0", "c0"}, {"y", "y_h", "y_c"},
                {{"hidden_size", h}, {"direction", direction}});
  for (const char* out : {"y", "y_h", "y_c"}) builder.AddOutput(out);
  std::shared_ptr<const Model> model = Model::LoadFromBuffer(*builder.Finish()).value();
  auto run = [&](int threads, bool fused) {
    cpu::ScopedLstmKernel lstm(fused ? cpu::LstmKernelMode::kAuto : cpu::LstmKernelMode::kOff,
                               cpu::LstmKernelAvx512Allowed());
    cpu::ScopedOneDnn onednn(false);
    SessionOptions options;
    options.intra_op_threads = threads;
    std::unique_ptr<Session> session = Session::Create(model, options).value();
    std::vector<std::vector<float>> all;
    // Runs of the long sequence back to back: the workers, awake, take
    // their tasks while the caller computes its own.
    for (int64_t seq : {c.seq, int64_t{1}, int64_t{23}, c.seq, c.seq, c.seq, c.seq, c.seq, c.seq, c.seq}) {
      const TensorView x(DType::kF32, {seq, c.batch, c.input}, const_cast<float*>(t.x.as<float>()));
      absl::StatusOr<std::vector<TensorView>> out = session->Run({x});
      EXPECT_TRUE(out.ok()) << out.status();
      if (!out.ok()) return all;
      for (const TensorView& v : *out) all.emplace_back(v.as<const float>(), v.as<const float>() + v.num_elements());
    }
    return all;
  };
  const int64_t before = cpu::LstmKernelsMade();
  const std::vector<std::vector<float>> one = run(1, true);
  EXPECT_GE(cpu::LstmKernelsMade() - before, 3);  // three lengths
  const std::vector<std::vector<float>> reference = run(1, false);
  ASSERT_EQ(one.size(), 30u);
  ASSERT_EQ(reference.size(), one.size());
  for (size_t i = 0; i < one.size(); ++i) {
    for (size_t j = 0; j < one[i].size(); ++j) {
      ASSERT_NEAR(one[i][j], reference[i][j], 1e-5 + 1e-4 * std::fabs(reference[i][j])) << "output " << i << " at " << j;
    }
  }
  for (int threads : thread_counts) {
    SCOPED_TRACE(::testing::Message() << direction << ", batch " << batch << ", " << threads << " threads");
    const std::vector<std::vector<float>> many = run(threads, true);
    ASSERT_EQ(many.size(), one.size());
    for (size_t i = 0; i < one.size(); ++i) {
      ASSERT_EQ(many[i].size(), one[i].size());
      EXPECT_EQ(std::memcmp(many[i].data(), one[i].data(), one[i].size() * sizeof(float)), 0) << "output " << i;
    }
  }
}

TEST_P(LstmKernelTest, BidirectionalOnTwoThreadsGivesTheSameBytes) {
  ExpectThreadsGiveTheSameBytes("bidirectional", 4, {2, 3});
}

// Five batch entries in groups of 3 + 2 (two threads) or 2 + 2 + 1 (three):
// passes of three, two and one rows over R.
TEST_P(LstmKernelTest, BatchGroupsOnThreadsGiveTheSameBytes) {
  ExpectThreadsGiveTheSameBytes("forward", 5, {2, 3, 4});
  ExpectThreadsGiveTheSameBytes("reverse", 8, {2});
  ExpectThreadsGiveTheSameBytes("bidirectional", 6, {4});
}

TEST(LstmBatchGroupsTest, CoversTheThreadsWithTasksWorthAForkAndJoin) {
  EXPECT_EQ(cpu::LstmBatchGroups(8, 1, 2, 1e6), 2);
  EXPECT_EQ(cpu::LstmBatchGroups(8, 2, 2, 1e6), 1);   // the two directions cover two threads
  EXPECT_EQ(cpu::LstmBatchGroups(8, 2, 4, 1e6), 2);
  EXPECT_EQ(cpu::LstmBatchGroups(3, 1, 8, 1e6), 3);   // no more groups than batch entries
  EXPECT_EQ(cpu::LstmBatchGroups(1, 1, 8, 1e6), 1);
  EXPECT_EQ(cpu::LstmBatchGroups(8, 1, 4, 1e5), 4);   // a group of two rows: 2e5 multiply-adds
  EXPECT_EQ(cpu::LstmBatchGroups(8, 1, 4, 9e4), 2);   // two rows 1.8e5: groups of four
  EXPECT_EQ(cpu::LstmBatchGroups(8, 1, 4, 2e4), 1);   // 1.6e5 in all: not worth a second thread
}

// Large pre-activations saturate the gates: the fused kernel's sigmoid and
// tanh at +-1 (and 0) must agree with libm's there too.
TEST_P(LstmKernelTest, SaturatedGates) {
  Case c;
  c.seq = 8;
  c.batch = 2;
  c.hidden = 16;
  c.bias = c.initial_h = c.initial_c = true;
  const Tensors t = MakeInputs(c, 9);
  Tensors big = t;
  std::vector<float> x(t.x.as<float>(), t.x.as<float>() + t.x.view().num_elements());
  for (float& v : x) v *= 40.0f;
  big.x = MakeTensor<float>(DType::kF32, t.x.shape(), x);
  absl::StatusOr<std::vector<Tensor>> got = RunCase(true, c, big);
  absl::StatusOr<std::vector<Tensor>> want = RunCase(false, c, big);
  ASSERT_TRUE(got.ok() && want.ok());
  for (size_t i = 0; i < got->size(); ++i) testing::ExpectRecurrentClose((*got)[i], (*want)[i], absl::StrCat("output ", i));
}

}  // namespace
}  // namespace grove
