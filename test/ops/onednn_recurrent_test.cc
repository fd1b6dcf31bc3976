// LSTM, GRU and RNN through oneDNN's RNN primitives (lib/backends/cpu/onednn.h)
// against the reference kernel, both run in this process (cpu::ScopedOneDnn;
// the reference kernel is checked against the ONNX equations in
// recurrent_test.cc): every direction and layout, with and without bias,
// initial states (h only, c only, both) and peepholes, GRU's two
// linear_before_reset forms, the RNN activations oneDNN has, seq and batch 1,
// omitted outputs (also Y omitted in a model, whose weights the prepare
// packs); then what oneDNN must not take (clip, input_forget, other
// activations, f64, a model whose W is an input) or not run (sequence_lens
// shorter than seq), which the reference kernel computes.
//
// Tolerance: oneDNN computes in float with its own exp/tanh (a few ulps)
// and sums the products in another order; over a few steps of gates in
// (-1, 1) the difference stays far below 1e-5 + 1e-4 |ref| (recurrent_test's
// bound against the double reference).
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
#include "lib/backends/cpu/onednn.h"
#include "lib/backends/cpu/recurrent_lstm.h"
#include "test/op_test_util.h"
#include "test/recurrent_paths_util.h"
#include "test/recurrent_test_util.h"

namespace grove {
namespace {

using testing::MakeTensor;
using testing::RecurrentSpec;
using testing::RunOp;

struct Case : RecurrentSpec {
  std::vector<int32_t> lengths;  // empty: no sequence_lens
  int num_outputs = 0;           // 0: all (2 for RNN and GRU, 3 for LSTM)

  std::string Describe() const {
    return absl::StrCat(op, " ", direction, " layout ", layout, " seq ", seq, " batch ", batch, " input ", input,
                        " hidden ", hidden, " bias ", bias, " h0 ", initial_h, " c0 ", initial_c, " P ", peephole,
                        " lbr ", linear_before_reset, " acts [", absl::StrJoin(activations, ","), "] lens [",
                        absl::StrJoin(lengths, ","), "] outputs ", num_outputs);
  }
};

using Tensors = testing::RecurrentTensors;

Tensors MakeInputs(const Case& c, uint32_t seed) { return testing::MakeRecurrentTensors(c, c.lengths, seed); }

std::vector<const Tensor*> Inputs(const Case& c, const Tensors& t) {
  return testing::RecurrentInputs(c, t, !c.lengths.empty());
}

// The case through the path `onednn` picks; `made` gets the oneDNN steps its
// prepare made.
absl::StatusOr<std::vector<Tensor>> RunCase(bool onednn, const Case& c, const Tensors& t, int64_t* made = nullptr) {
  cpu::ScopedOneDnn scope(onednn);
  cpu::ScopedLstmKernel lstm(cpu::LstmKernelMode::kOff);  // an LSTM's oneDNN step, not grove's fused kernel
  const int64_t before = cpu::OneDnnStepsMade();
  const int outputs = c.num_outputs > 0 ? c.num_outputs : (c.op == "LSTM" ? 3 : 2);
  absl::StatusOr<std::vector<Tensor>> out = RunOp(c.op, Inputs(c, t), testing::RecurrentAttrs(c), outputs);
  if (made != nullptr) *made = cpu::OneDnnStepsMade() - before;
  return out;
}

// oneDNN takes the case (`taken`) or leaves it to the reference kernel, and
// either way gives the reference kernel's outputs.
void ExpectPath(const Case& c, bool taken, uint32_t seed = 1) {
  SCOPED_TRACE(c.Describe());
  const Tensors t = MakeInputs(c, seed);
  testing::ExpectFastPathAgrees(taken, [&](bool onednn, int64_t* made) { return RunCase(onednn, c, t, made); });
}

TEST(OneDnnRecurrentTest, EveryDirectionLayoutBiasAndState) {
  for (const char* op : {"LSTM", "GRU", "RNN"}) {
    for (const char* direction : {"forward", "reverse", "bidirectional"}) {
      for (int64_t layout : {0, 1}) {
        // 0: nothing, 1: bias, 2: bias + h0, 3: h0 + c0 (+ P), 4: c0 only (+ P)
        for (int extras = 0; extras < 5; ++extras) {
          if (std::string(op) != "LSTM" && extras == 4) continue;
          Case c;
          c.op = op;
          c.direction = direction;
          c.layout = layout;
          c.seq = 5;
          c.batch = 3;
          c.input = 4;
          c.hidden = 6;
          c.bias = extras == 1 || extras == 2;
          c.initial_h = extras == 2 || extras == 3;
          c.initial_c = extras == 3 || extras == 4;
          c.peephole = extras >= 3;
          ExpectPath(c, true, static_cast<uint32_t>(extras * 7 + layout));
        }
      }
    }
  }
}

TEST(OneDnnRecurrentTest, EdgeShapes) {
  const std::vector<std::vector<int64_t>> shapes = {// seq, batch, input, hidden
                                                    {1, 1, 1, 1},
                                                    {1, 4, 3, 2},
                                                    {9, 1, 2, 17},
                                                    {3, 2, 33, 9},
                                                    {16, 5, 8, 32}};
  for (const char* op : {"LSTM", "GRU", "RNN"}) {
    for (const std::vector<int64_t>& s : shapes) {
      for (const char* direction : {"forward", "bidirectional"}) {
        Case c;
        c.op = op;
        c.seq = s[0];
        c.batch = s[1];
        c.input = s[2];
        c.hidden = s[3];
        c.direction = direction;
        c.bias = c.initial_h = c.initial_c = true;
        c.layout = s[1] % 2;
        ExpectPath(c, true);
      }
    }
  }
}

TEST(OneDnnRecurrentTest, GruLinearBeforeReset) {
  for (int64_t lbr : {0, 1}) {
    for (const char* direction : {"forward", "reverse", "bidirectional"}) {
      for (bool bias : {false, true}) {
        Case c;
        c.op = "GRU";
        c.direction = direction;
        c.linear_before_reset = lbr;
        c.bias = c.initial_h = bias;
        c.seq = 4;
        c.batch = 2;
        c.hidden = 5;
        ExpectPath(c, true);
      }
    }
  }
}

TEST(OneDnnRecurrentTest, RnnActivations) {
  const std::vector<std::pair<std::vector<std::string>, std::vector<double>>> acts = {
      {{"Tanh"}, {}}, {{"Relu"}, {}}, {{"Sigmoid"}, {}}, {{"LeakyRelu"}, {0.2}}};
  for (const auto& [names, alphas] : acts) {
    Case c;
    c.op = "RNN";
    c.activations = names;
    c.alphas = alphas;
    c.bias = c.initial_h = true;
    c.seq = 4;
    ExpectPath(c, true);
  }
  // Each direction its own.
  Case c;
  c.op = "RNN";
  c.direction = "bidirectional";
  c.activations = {"Relu", "Sigmoid"};
  c.bias = true;
  ExpectPath(c, true);
}

TEST(OneDnnRecurrentTest, OmittedOutputs) {
  for (const char* op : {"LSTM", "GRU", "RNN"}) {
    for (int outputs : {1, 2}) {
      Case c;
      c.op = op;
      c.direction = "bidirectional";
      c.layout = 1;
      c.bias = c.initial_h = true;
      c.num_outputs = outputs;
      ExpectPath(c, true);
    }
  }
}

TEST(OneDnnRecurrentTest, SequenceLensRunsTheReferenceUnlessFull) {
  for (const char* op : {"LSTM", "GRU", "RNN"}) {
    Case c;
    c.op = op;
    c.seq = 5;
    c.batch = 4;
    c.direction = "bidirectional";
    c.bias = c.initial_h = c.initial_c = true;
    // Every sequence to the end: oneDNN's result.
    c.lengths = {5, 5, 5, 5};
    ExpectPath(c, true);
    // Shorter ones: the step is made, the run is the reference kernel's (the
    // same bytes).
    c.lengths = {5, 2, 0, 3};
    SCOPED_TRACE(c.Describe());
    const Tensors t = MakeInputs(c, 3);
    absl::StatusOr<std::vector<Tensor>> got = RunCase(true, c, t);
    absl::StatusOr<std::vector<Tensor>> want = RunCase(false, c, t);
    ASSERT_TRUE(got.ok() && want.ok());
    testing::ExpectSameBytes(*got, *want);
  }
}

TEST(OneDnnRecurrentTest, WhatOneDnnDoesNotTake) {
  Case clip;
  clip.clip = 0.5;
  clip.bias = true;
  ExpectPath(clip, false);
  Case input_forget;
  input_forget.input_forget = true;
  ExpectPath(input_forget, false);
  Case lstm_acts;
  lstm_acts.activations = {"HardSigmoid", "Tanh", "Tanh"};
  ExpectPath(lstm_acts, false);
  Case gru_acts;
  gru_acts.op = "GRU";
  gru_acts.activations = {"Sigmoid", "Relu"};
  ExpectPath(gru_acts, false);
  Case rnn_acts;
  rnn_acts.op = "RNN";
  rnn_acts.activations = {"ScaledTanh"};
  rnn_acts.alphas = {0.8};
  rnn_acts.betas = {1.2};
  ExpectPath(rnn_acts, false);

  // f64: the reference kernel, no step.
  Case c;
  const Tensors t = MakeInputs(c, 4);
  auto widen = [](const Tensor& f) {
    const float* p = f.as<float>();
    return MakeTensor<double>(DType::kF64, f.shape(),
                              std::vector<double>(p, p + f.view().num_elements()));
  };
  const Tensor x = widen(t.x), w = widen(t.w), r = widen(t.r);
  cpu::ScopedOneDnn scope(true);
  const int64_t before = cpu::OneDnnStepsMade();
  absl::StatusOr<std::vector<Tensor>> out = RunOp("LSTM", {&x, &w, &r}, testing::RecurrentAttrs(c), 2);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(cpu::OneDnnStepsMade(), before);
}

// A model's LSTM: Y omitted (its array in the workspace), W, R and B
// weights the prepare packs, several sequence lengths through one session;
// and the same LSTM with W a model input, which the prepare cannot pack (the
// reference kernel).
absl::StatusOr<std::vector<float>> RunModel(bool onednn, bool w_is_input, const Case& c, const Tensors& t,
                                            int64_t* made) {
  cpu::ScopedOneDnn scope(onednn);
  cpu::ScopedLstmKernel lstm(cpu::LstmKernelMode::kOff);
  const int64_t before = cpu::OneDnnStepsMade();
  absl::StatusOr<std::vector<float>> all = testing::RunLstmModelWithYOmitted(c, t, w_is_input);
  *made = cpu::OneDnnStepsMade() - before;
  return all;
}

TEST(OneDnnRecurrentTest, ModelWithYOmitted) {
  Case c;
  c.seq = 6;
  c.batch = 3;
  c.direction = "bidirectional";
  c.bias = true;
  const Tensors t = MakeInputs(c, 5);
  testing::ExpectModelPathsAgree([&](bool fast, bool w_is_input, int64_t* made) {
    return RunModel(fast, w_is_input, c, t, made);
  });
}

}  // namespace
}  // namespace grove
