// LSTM, GRU and RNN against a step-by-step reference written here from the
// ONNX equations (one batch entry and one gate unit at a time, in double):
// every direction, both layouts, with and without bias and initial states,
// peepholes, input_forget, clip, linear_before_reset, custom activations with
// alpha/beta, sequence_lens, omitted outputs (also through a loaded model),
// symbolic shapes and every error.
#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "grove/grove.h"
#include "gtest/gtest.h"
#include "lib/ir/op_registry.h"
#include "test/op_test_util.h"
#include "test/recurrent_test_util.h"
#include "test/ops/symbolic_shape_util.h"

namespace grove::testing {
namespace {

using ir::SymDim;
using ir::SymShape;
using Shape = std::vector<int64_t>;
using Attrs = std::vector<std::pair<std::string, AttrValue>>;

std::vector<float> Pattern(int64_t n, int seed, float scale = 1.0f) { return RecurrentPattern(n, seed, scale); }

struct Spec : RecurrentSpec {
  std::vector<int32_t> lengths;  // empty: no sequence_lens

  std::string Describe() const {
    return absl::StrCat(op, " ", direction, " layout ", layout, " seq ", seq, " batch ", batch, " bias ", bias,
                        " h0 ", initial_h, " c0 ", initial_c, " P ", peephole, " lens [",
                        absl::StrJoin(lengths, ","), "] acts [", absl::StrJoin(activations, ","), "] clip ", clip,
                        " input_forget ", input_forget, " linear_before_reset ", linear_before_reset);
  }
};

struct Inputs {
  std::vector<float> x, w, r, b, h0, c0, p;
};

Inputs MakeInputs(const Spec& s) {
  const int64_t g = s.gates(), nd = s.dirs(), h = s.hidden;
  Inputs in;
  in.x = Pattern(s.seq * s.batch * s.input, 1);
  in.w = Pattern(nd * g * h * s.input, 2, 0.6f);
  in.r = Pattern(nd * g * h * h, 3, 0.6f);
  in.b = Pattern(nd * 2 * g * h, 4, 0.5f);
  in.h0 = Pattern(nd * s.batch * h, 5, 0.8f);
  in.c0 = Pattern(nd * s.batch * h, 6, 0.8f);
  in.p = Pattern(nd * 3 * h, 7, 0.5f);
  return in;
}

struct Act {
  std::string name;
  double alpha = 0, beta = 0;
};

double Apply(const Act& a, double x) {
  std::string n;
  for (char c : a.name) n.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  if (n == "relu") return std::max(0.0, x);
  if (n == "tanh") return std::tanh(x);
  if (n == "sigmoid") return 1.0 / (1.0 + std::exp(-x));
  if (n == "affine") return a.alpha * x + a.beta;
  if (n == "leakyrelu") return x >= 0 ? x : a.alpha * x;
  if (n == "thresholdedrelu") return x > a.alpha ? x : 0.0;
  if (n == "scaledtanh") return a.alpha * std::tanh(a.beta * x);
  if (n == "hardsigmoid") return std::min(1.0, std::max(0.0, a.alpha * x + a.beta));
  if (n == "elu") return x >= 0 ? x : a.alpha * (std::exp(x) - 1);
  if (n == "softsign") return x / (1 + std::abs(x));
  if (n == "softplus") return std::log(1 + std::exp(x));
  ADD_FAILURE() << "unknown activation " << a.name;
  return 0;
}

// The spec's activation list with alpha/beta: functions that take them
// consume the lists in order, the others skip them.
std::vector<Act> Activations(const Spec& s) {
  std::vector<std::string> names = s.activations;
  const std::vector<std::string> defaults = s.op == "LSTM"  ? std::vector<std::string>{"Sigmoid", "Tanh", "Tanh"}
                                            : s.op == "GRU" ? std::vector<std::string>{"Sigmoid", "Tanh"}
                                                            : std::vector<std::string>{"Tanh"};
  if (names.empty()) names = defaults;
  // One direction's list serves both directions.
  if (s.dirs() == 2 && names.size() == defaults.size()) {
    const std::vector<std::string> once = names;
    names.insert(names.end(), once.begin(), once.end());
  }
  std::vector<Act> acts;
  size_t ia = 0, ib = 0;
  for (const std::string& name : names) {
    Act a{name};
    if (name == "LeakyRelu" || name == "ThresholdedRelu" || name == "Elu" || name == "Affine" ||
        name == "ScaledTanh" || name == "HardSigmoid") {
      a.alpha = ia < s.alphas.size()    ? s.alphas[ia++]
                : name == "LeakyRelu"   ? 0.01
                : name == "HardSigmoid" ? 0.2
                                        : 1.0;
    }
    if (name == "Affine" || name == "ScaledTanh" || name == "HardSigmoid") {
      a.beta = ib < s.betas.size()     ? s.betas[ib++]
               : name == "HardSigmoid" ? 0.5
               : name == "ScaledTanh"  ? 1.0
                                       : 0.0;
    }
    acts.push_back(a);
  }
  return acts;
}

struct Outputs {
  std::vector<double> y, y_h, y_c;
};

// One batch entry, one direction, one gate unit at a time.
Outputs Reference(const Spec& s, const Inputs& in) {
  const int64_t g = s.gates(), nd = s.dirs(), h = s.hidden, I = s.input, T = s.seq, B = s.batch;
  const std::vector<Act> acts = Activations(s);
  const int64_t per_dir = static_cast<int64_t>(acts.size()) / nd;
  auto x_at = [&](int64_t t, int64_t b, int64_t i) {
    return static_cast<double>(in.x[(s.layout == 0 ? (t * B + b) : (b * T + t)) * I + i]);
  };
  auto state_index = [&](int64_t d, int64_t b, int64_t j) {
    return (s.layout == 0 ? (d * B + b) : (b * nd + d)) * h + j;
  };
  auto y_index = [&](int64_t t, int64_t d, int64_t b, int64_t j) {
    return (s.layout == 0 ? ((t * nd + d) * B + b) : ((b * T + t) * nd + d)) * h + j;
  };
  auto clip = [&](double v) { return s.clip > 0 ? std::min(s.clip, std::max(-s.clip, v)) : v; };
  Outputs out;
  out.y.assign(static_cast<size_t>(T * nd * B * h), 0.0);
  out.y_h.assign(static_cast<size_t>(nd * B * h), 0.0);
  out.y_c.assign(static_cast<size_t>(nd * B * h), 0.0);
  for (int64_t d = 0; d < nd; ++d) {
    const bool reverse = s.direction == "reverse" || d == 1;
    const Act* a = &acts[d * per_dir];
    // Row `row` of gate block `gate`: W x + R h (+ biases) for unit j.
    auto w_dot = [&](int64_t gate, int64_t j, int64_t t, int64_t b) {
      double v = 0;
      for (int64_t i = 0; i < I; ++i) v += in.w[((d * g + gate) * h + j) * I + i] * x_at(t, b, i);
      return v;
    };
    auto r_dot = [&](int64_t gate, int64_t j, const std::vector<double>& hv) {
      double v = 0;
      for (int64_t k = 0; k < h; ++k) v += in.r[((d * g + gate) * h + j) * h + k] * hv[k];
      return v;
    };
    auto wb = [&](int64_t gate, int64_t j) { return s.bias ? in.b[d * 2 * g * h + gate * h + j] : 0.0; };
    auto rb = [&](int64_t gate, int64_t j) { return s.bias ? in.b[d * 2 * g * h + (g + gate) * h + j] : 0.0; };
    for (int64_t b = 0; b < B; ++b) {
      std::vector<double> hv(h), cv(h);
      for (int64_t j = 0; j < h; ++j) {
        hv[j] = s.initial_h ? in.h0[state_index(d, b, j)] : 0.0;
        cv[j] = s.initial_c ? in.c0[state_index(d, b, j)] : 0.0;
      }
      const int64_t len = s.lengths.empty() ? T : s.lengths[b];
      for (int64_t step = 0; step < len; ++step) {
        const int64_t t = reverse ? len - 1 - step : step;
        std::vector<double> hn(h), cn(h);
        if (s.op == "RNN") {
          for (int64_t j = 0; j < h; ++j)
            hn[j] = Apply(a[0], clip(w_dot(0, j, t, b) + r_dot(0, j, hv) + wb(0, j) + rb(0, j)));
        } else if (s.op == "GRU") {
          std::vector<double> z(h), rg(h), rh(h);
          for (int64_t j = 0; j < h; ++j) {
            z[j] = Apply(a[0], clip(w_dot(0, j, t, b) + r_dot(0, j, hv) + wb(0, j) + rb(0, j)));
            rg[j] = Apply(a[0], clip(w_dot(1, j, t, b) + r_dot(1, j, hv) + wb(1, j) + rb(1, j)));
            rh[j] = rg[j] * hv[j];
          }
          for (int64_t j = 0; j < h; ++j) {
            const double pre = s.linear_before_reset != 0
                                   ? w_dot(2, j, t, b) + rg[j] * (r_dot(2, j, hv) + rb(2, j)) + wb(2, j)
                                   : w_dot(2, j, t, b) + r_dot(2, j, rh) + rb(2, j) + wb(2, j);
            const double cand = Apply(a[1], clip(pre));
            hn[j] = (1 - z[j]) * cand + z[j] * hv[j];
          }
        } else {
          for (int64_t j = 0; j < h; ++j) {
            auto pi = [&](int k) { return s.peephole ? static_cast<double>(in.p[d * 3 * h + k * h + j]) : 0.0; };
            auto pre = [&](int64_t gate) {
              return w_dot(gate, j, t, b) + r_dot(gate, j, hv) + wb(gate, j) + rb(gate, j);
            };
            const double ig = Apply(a[0], clip(pre(0) + pi(0) * cv[j]));
            const double fg = s.input_forget ? 1 - ig : Apply(a[0], clip(pre(2) + pi(2) * cv[j]));
            const double cg = Apply(a[1], clip(pre(3)));
            cn[j] = fg * cv[j] + ig * cg;
            const double og = Apply(a[0], clip(pre(1) + pi(1) * cn[j]));
            hn[j] = og * Apply(a[2], cn[j]);
          }
        }
        hv = hn;
        cv = cn;
        for (int64_t j = 0; j < h; ++j) out.y[y_index(t, d, b, j)] = hv[j];
      }
      for (int64_t j = 0; j < h; ++j) {
        out.y_h[state_index(d, b, j)] = hv[j];
        out.y_c[state_index(d, b, j)] = cv[j];
      }
    }
  }
  return out;
}

void ExpectNear(const std::vector<float>& got, const std::vector<double>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got[i], want[i], 1e-5 + 1e-4 * std::abs(want[i])) << "at " << i;
}

Attrs MakeAttrs(const Spec& s) { return RecurrentAttrs(s); }

struct OpTensors {
  Tensor x, w, r, b, lens, h0, c0, p;
};

OpTensors MakeTensors(const Spec& s, const Inputs& in) {
  const int64_t g = s.gates(), nd = s.dirs(), h = s.hidden;
  const Shape state = s.layout == 0 ? Shape{nd, s.batch, h} : Shape{s.batch, nd, h};
  OpTensors t;
  t.x = MakeTensor<float>(DType::kF32,
                          s.layout == 0 ? Shape{s.seq, s.batch, s.input} : Shape{s.batch, s.seq, s.input}, in.x);
  t.w = MakeTensor<float>(DType::kF32, {nd, g * h, s.input}, in.w);
  t.r = MakeTensor<float>(DType::kF32, {nd, g * h, h}, in.r);
  t.b = MakeTensor<float>(DType::kF32, {nd, 2 * g * h}, in.b);
  t.lens = MakeTensor<int32_t>(DType::kI32, {s.batch}, s.lengths);
  t.h0 = MakeTensor<float>(DType::kF32, state, in.h0);
  t.c0 = MakeTensor<float>(DType::kF32, state, in.c0);
  t.p = MakeTensor<float>(DType::kF32, {nd, 3 * h}, in.p);
  return t;
}

std::vector<const Tensor*> OpInputs(const Spec& s, const OpTensors& t) {
  std::vector<const Tensor*> v = {&t.x, &t.w, &t.r};
  v.push_back(s.bias ? &t.b : nullptr);
  v.push_back(s.lengths.empty() ? nullptr : &t.lens);
  v.push_back(s.initial_h ? &t.h0 : nullptr);
  if (s.op == "LSTM") {
    v.push_back(s.initial_c ? &t.c0 : nullptr);
    v.push_back(s.peephole ? &t.p : nullptr);
  }
  while (v.back() == nullptr) v.pop_back();
  return v;
}

void ExpectRecurrent(const Spec& s) {
  SCOPED_TRACE(s.Describe());
  const Inputs in = MakeInputs(s);
  const Outputs want = Reference(s, in);
  const OpTensors t = MakeTensors(s, in);
  const int num_outputs = s.op == "LSTM" ? 3 : 2;
  auto out = RunOp(s.op, OpInputs(s, t), MakeAttrs(s), num_outputs);
  ASSERT_TRUE(out.ok()) << out.status();
  const int64_t nd = s.dirs();
  EXPECT_EQ((*out)[0].shape(),
            s.layout == 0 ? (Shape{s.seq, nd, s.batch, s.hidden}) : (Shape{s.batch, s.seq, nd, s.hidden}));
  const Shape state = s.layout == 0 ? Shape{nd, s.batch, s.hidden} : Shape{s.batch, nd, s.hidden};
  EXPECT_EQ((*out)[1].shape(), state);
  ExpectNear(Values<float>((*out)[0]), want.y);
  ExpectNear(Values<float>((*out)[1]), want.y_h);
  if (s.op == "LSTM") {
    EXPECT_EQ((*out)[2].shape(), state);
    ExpectNear(Values<float>((*out)[2]), want.y_c);
  }
}

// Every direction and layout, with and without bias and initial states.
void ExpectAllBasics(const std::string& op) {
  for (const char* direction : {"forward", "reverse", "bidirectional"}) {
    for (int64_t layout : {0, 1}) {
      for (bool extras : {false, true}) {
        Spec s;
        s.op = op;
        s.direction = direction;
        s.layout = layout;
        s.bias = s.initial_h = s.initial_c = extras;
        ExpectRecurrent(s);
      }
    }
  }
}

TEST(LstmTest, DirectionsLayoutsBiasInitialStates) { ExpectAllBasics("LSTM"); }

TEST(LstmTest, PeepholesInputForgetClip) {
  Spec s;
  s.bias = s.initial_h = s.initial_c = s.peephole = true;
  ExpectRecurrent(s);
  s.direction = "bidirectional";
  ExpectRecurrent(s);
  s.input_forget = true;
  ExpectRecurrent(s);
  s.clip = 0.3;
  ExpectRecurrent(s);
  s.layout = 1;
  ExpectRecurrent(s);
}

TEST(LstmTest, SequenceLens) {
  for (const char* direction : {"forward", "reverse", "bidirectional"}) {
    for (int64_t layout : {0, 1}) {
      Spec s;
      s.seq = 5;
      s.batch = 4;
      s.direction = direction;
      s.layout = layout;
      s.bias = s.initial_h = s.initial_c = true;
      s.lengths = {5, 2, 0, 3};
      ExpectRecurrent(s);
    }
  }
  // test_lstm_with_peepholes passes sequence_lens equal to seq_length.
  Spec s;
  s.seq = 1;
  s.input = 4;
  s.hidden = 3;
  s.bias = s.initial_h = s.initial_c = s.peephole = true;
  s.lengths = {1, 1};
  ExpectRecurrent(s);
}

TEST(LstmTest, ActivationsAndHiddenSizeFromR) {
  Spec s;
  s.activations = {"HardSigmoid", "LeakyRelu", "Softsign"};
  s.alphas = {0.3, 0.2};
  s.betas = {0.4};
  s.bias = true;
  ExpectRecurrent(s);
  s.direction = "bidirectional";
  s.activations = {"Sigmoid", "Elu", "Softplus", "ScaledTanh", "Affine", "ThresholdedRelu"};
  s.alphas = {0.5, 0.9, 1.1};
  s.betas = {0.7};
  ExpectRecurrent(s);
  // One direction's functions serve both directions.
  s.activations = {"Sigmoid", "Relu", "Tanh"};
  s.alphas.clear();
  s.betas.clear();
  ExpectRecurrent(s);
  // Case does not matter; hidden_size may be left to R.
  s.activations = {"sigmoid", "TANH", "tanh"};
  s.hidden_size_attr = false;
  ExpectRecurrent(s);
}

TEST(GruTest, DirectionsLayoutsBiasInitialStates) { ExpectAllBasics("GRU"); }

TEST(GruTest, LinearBeforeResetClipSequenceLens) {
  for (int64_t lbr : {0, 1}) {
    for (const char* direction : {"forward", "reverse", "bidirectional"}) {
      Spec s;
      s.op = "GRU";
      s.seq = 4;
      s.batch = 3;
      s.hidden = 5;
      s.direction = direction;
      s.bias = s.initial_h = true;
      s.linear_before_reset = lbr;
      ExpectRecurrent(s);
      s.lengths = {4, 1, 3};
      ExpectRecurrent(s);
      s.clip = 0.25;
      s.layout = 1;
      ExpectRecurrent(s);
      s.bias = false;  // linear_before_reset without B
      ExpectRecurrent(s);
    }
  }
}

TEST(GruTest, Activations) {
  Spec s;
  s.op = "GRU";
  s.direction = "bidirectional";
  s.activations = {"HardSigmoid", "Relu", "Sigmoid", "Softsign"};
  s.alphas = {0.25};
  s.betas = {0.45};
  s.bias = true;
  ExpectRecurrent(s);
}

TEST(RnnTest, DirectionsLayoutsBiasInitialStates) { ExpectAllBasics("RNN"); }

TEST(RnnTest, ActivationsClipSequenceLens) {
  Spec s;
  s.op = "RNN";
  s.seq = 4;
  s.batch = 3;
  s.activations = {"Relu"};
  s.bias = s.initial_h = true;
  ExpectRecurrent(s);
  s.direction = "bidirectional";
  s.activations = {"LeakyRelu", "Tanh"};
  s.alphas = {0.2};
  s.lengths = {2, 4, 0};
  ExpectRecurrent(s);
  s.clip = 0.5;
  s.layout = 1;
  ExpectRecurrent(s);
}

TEST(RecurrentTest, OptionalOutputsAndFloat64) {
  Spec s;
  s.bias = true;
  const Inputs in = MakeInputs(s);
  const Outputs want = Reference(s, in);
  const OpTensors t = MakeTensors(s, in);
  auto y_only = RunOp("LSTM", OpInputs(s, t), MakeAttrs(s), 1);
  ASSERT_TRUE(y_only.ok()) << y_only.status();
  ExpectNear(Values<float>((*y_only)[0]), want.y);

  // f64 end to end.
  auto widen = [](const Tensor& f) {
    const std::vector<float> v = Values<float>(f);
    return MakeTensor<double>(DType::kF64, f.shape(), std::vector<double>(v.begin(), v.end()));
  };
  Tensor x = widen(t.x), w = widen(t.w), r = widen(t.r), b = widen(t.b);
  auto out = RunOp("LSTM", {&x, &w, &r, &b}, MakeAttrs(s), 2);
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ((*out)[1].dtype(), DType::kF64);
  const std::vector<double> got = Values<double>((*out)[1]);
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want.y_h[i], 1e-12) << "at " << i;
}

// f16 and bf16 layers compute in f32: against the reference run on the
// inputs as rounded to the half type, each output is within its own rounding
// (plus f32's). Every float input is given (bias, initial states, peepholes),
// both directions, and a sequence shorter than the others.
TEST(RecurrentTest, HalfFloatsComputeInF32) {
  for (const DType half : {DType::kF16, DType::kBF16}) {
    for (const char* op : {"LSTM", "GRU", "RNN"}) {
      Spec s;
      s.op = op;
      s.direction = "bidirectional";
      s.bias = s.initial_h = s.initial_c = s.peephole = true;
      s.lengths = {3, 1};
      SCOPED_TRACE(absl::StrCat(DTypeName(half), " ", s.Describe()));
      const Inputs in = MakeInputs(s);
      const OpTensors t = MakeTensors(s, in);
      auto narrow = [&](const Tensor& f) { return Tensor::CastOf(f.view(), half).value(); };
      auto widen = [](const Tensor& h) { return Values<float>(Tensor::CastOf(h.view(), DType::kF32).value()); };
      OpTensors th{narrow(t.x), narrow(t.w), narrow(t.r), narrow(t.b), t.lens, narrow(t.h0), narrow(t.c0), narrow(t.p)};
      const Inputs rounded{widen(th.x), widen(th.w), widen(th.r), widen(th.b), widen(th.h0), widen(th.c0), widen(th.p)};
      const Outputs want = Reference(s, rounded);
      const int num_outputs = s.op == "LSTM" ? 3 : 2;
      auto out = RunOp(s.op, OpInputs(s, th), MakeAttrs(s), num_outputs);
      ASSERT_TRUE(out.ok()) << out.status();
      const double eps = half == DType::kF16 ? 1.0 / 2048 : 1.0 / 256;  // half an ulp is eps/2
      auto expect = [&](const Tensor& got_half, const std::vector<double>& w) {
        ASSERT_EQ(got_half.dtype(), half);
        const std::vector<float> got = widen(got_half);
        ASSERT_EQ(got.size(), w.size());
        for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], w[i], 1e-5 + eps * std::abs(w[i])) << "at " << i;
      };
      expect((*out)[0], want.y);
      expect((*out)[1], want.y_h);
      if (s.op == "LSTM") expect((*out)[2], want.y_c);
    }
  }
}

// Empty half-float layers: no batch, no steps, or no hidden units (every
// operand empty, so no workspace) give empty or zero outputs, as f32 does.
TEST(RecurrentTest, EmptyHalfFloatLayers) {
  for (const DType half : {DType::kF16, DType::kBF16}) {
    for (const auto& [seq, batch, hidden] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{
             {3, 0, 4}, {0, 2, 4}, {0, 0, 0}, {3, 2, 0}}) {
      SCOPED_TRACE(absl::StrCat(DTypeName(half), " seq ", seq, " batch ", batch, " hidden ", hidden));
      auto zeros = [&](Shape shape) {
        return Tensor::CastOf(MakeTensor<float>(DType::kF32, shape, std::vector<float>(testing::Count(shape))).view(),
                              half)
            .value();
      };
      const Tensor x = zeros({seq, batch, 3}), w = zeros({1, 4 * hidden, 3}), r = zeros({1, 4 * hidden, hidden});
      auto out = RunOp("LSTM", {&x, &w, &r}, {}, 3);
      ASSERT_TRUE(out.ok()) << out.status();
      EXPECT_EQ((*out)[0].shape(), (Shape{seq, 1, batch, hidden}));
      EXPECT_EQ((*out)[1].shape(), (Shape{1, batch, hidden}));
      for (const Tensor& o : *out) {
        for (float v : Values<float>(Tensor::CastOf(o.view(), DType::kF32).value())) EXPECT_EQ(v, 0.0f);
      }
    }
  }
}

// LSTM with Y omitted (ONNX ""), as in test_lstm_defaults, through a model.
TEST(RecurrentTest, OmittedFirstOutputInModel) {
  Spec s;
  s.bias = true;
  const Inputs in = MakeInputs(s);
  const Outputs want = Reference(s, in);
  const int64_t g = s.gates(), h = s.hidden;
  ModelBuilder builder;
  builder.AddSymbol("seq", 1, 16);
  builder.AddInput("x", DType::kF32, {"seq", s.batch, s.input});
  auto bytes_of = [](const std::vector<float>& v) {
    std::vector<uint8_t> bytes(v.size() * sizeof(float));
    std::memcpy(bytes.data(), v.data(), bytes.size());
    return bytes;
  };
  builder.AddWeight("w", DType::kF32, {1, g * h, s.input}, bytes_of(in.w));
  builder.AddWeight("r", DType::kF32, {1, g * h, h}, bytes_of(in.r));
  builder.AddWeight("b", DType::kF32, {1, 2 * g * h}, bytes_of(in.b));
  builder.AddOp("LSTM", {"x", "w", "r", "b"}, {"", "y_h"}, {{"hidden_size", h}});
  builder.AddOutput("y_h");
  absl::StatusOr<std::vector<uint8_t>> bytes = builder.Finish();
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  absl::StatusOr<std::shared_ptr<const Model>> model = Model::LoadFromBuffer(*bytes);
  ASSERT_TRUE(model.ok()) << model.status();
  absl::StatusOr<std::unique_ptr<Session>> session = Session::Create(*model, {});
  ASSERT_TRUE(session.ok()) << session.status();
  std::vector<float> x = in.x;
  TensorView xv(DType::kF32, {s.seq, s.batch, s.input}, x.data());
  absl::StatusOr<std::vector<TensorView>> y = (*session)->Run({xv});
  ASSERT_TRUE(y.ok()) << y.status();
  ASSERT_EQ(y->size(), 1u);
  EXPECT_EQ((*y)[0].shape, (Shape{1, s.batch, h}));
  const float* p = (*y)[0].as<const float>();
  ExpectNear(std::vector<float>(p, p + (*y)[0].num_elements()), want.y_h);
}

TEST(RecurrentTest, SymbolicShapes) {
  const SymDim seq = SymDim::Symbol(0), batch = SymDim::Symbol(1);
  auto y =
      InferSymbolic("LSTM", {{DType::kF32, {seq, batch, 3}}, {DType::kF32, {2, 16, 3}}, {DType::kF32, {2, 16, 4}}},
                    {{"hidden_size", int64_t{4}}, {"direction", std::string("bidirectional")}});
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(y->shape, (SymShape{seq, 2, batch, 4}));
  auto y1 =
      InferSymbolic("GRU", {{DType::kF32, {batch, seq, 3}}, {DType::kF32, {1, 12, 3}}, {DType::kF32, {1, 12, 4}}},
                    {{"layout", int64_t{1}}});
  ASSERT_TRUE(y1.ok()) << y1.status();
  EXPECT_EQ(y1->shape, (SymShape{batch, seq, 1, 4}));
  auto sym_hidden = InferSymbolic(
      "RNN", {{DType::kF32, {seq, batch, 3}}, {DType::kF32, {1, seq, 3}}, {DType::kF32, {1, seq, seq}}});
  ASSERT_TRUE(sym_hidden.ok()) << sym_hidden.status();
  EXPECT_EQ(sym_hidden->shape, (SymShape{seq, 1, batch, seq}));
}

TEST(RecurrentTest, Errors) {
  Spec s;
  s.bias = true;
  const Inputs in = MakeInputs(s);
  const OpTensors t = MakeTensors(s, in);
  auto run = [&](Attrs attrs, std::vector<const Tensor*> inputs = {}) {
    if (inputs.empty()) inputs = {&t.x, &t.w, &t.r};
    if (attrs.empty() || attrs[0].first != "hidden_size") attrs.insert(attrs.begin(), {"hidden_size", int64_t{4}});
    return RunOp("LSTM", inputs, attrs, 2).status();
  };
  EXPECT_TRUE(ErrorContains(run({{"direction", std::string("both")}}), "attribute 'direction' is 'both'"));
  EXPECT_TRUE(ErrorContains(run({{"layout", int64_t{2}}}), "attribute 'layout' is 2"));
  EXPECT_TRUE(ErrorContains(run({{"hidden_size", int64_t{0}}}), "attribute 'hidden_size' is 0"));
  EXPECT_TRUE(
      ErrorContains(run({{"hidden_size", int64_t{5}}}), "input 1 (W) has shape [1, 16, 3]; expected [1, 20, 3]"));
  EXPECT_TRUE(ErrorContains(run({{"clip", -1.0}}), "attribute 'clip' is -1"));
  EXPECT_TRUE(ErrorContains(run({{"input_forget", int64_t{2}}}), "attribute 'input_forget' is 2"));
  EXPECT_TRUE(ErrorContains(run({{"activations", std::vector<std::string>{"Sigmoid", "Tanh"}}}),
                            "attribute 'activations' has 2 functions [Sigmoid, Tanh]; expected 3"));
  EXPECT_TRUE(ErrorContains(run({{"activations", std::vector<std::string>{"Sigmoid", "Gelu", "Tanh"}}}),
                            "attribute 'activations' names 'Gelu'"));
  EXPECT_TRUE(ErrorContains(run({{"direction", std::string("bidirectional")}}),
                            "input 1 (W) has shape [1, 16, 3]; expected [2, 16, 3]"));
  Tensor bad_b = MakeTensor<float>(DType::kF32, {1, 16}, {});
  EXPECT_TRUE(
      ErrorContains(run({}, {&t.x, &t.w, &t.r, &bad_b}), "input 3 (B) has shape [1, 16]; expected [1, 32]"));
  Tensor lens = MakeTensor<int32_t>(DType::kI32, {2}, {3, 4});
  EXPECT_TRUE(ErrorContains(run({}, {&t.x, &t.w, &t.r, nullptr, &lens}),
                            "input 4 (sequence_lens) gives length 4 for batch entry 1; expected 0..3"));
  Tensor neg = MakeTensor<int32_t>(DType::kI32, {2}, {-1, 2});
  EXPECT_TRUE(ErrorContains(run({}, {&t.x, &t.w, &t.r, nullptr, &neg}), "gives length -1 for batch entry 0"));
  Tensor lens_f = MakeTensor<float>(DType::kF32, {2}, {});
  EXPECT_TRUE(
      ErrorContains(run({}, {&t.x, &t.w, &t.r, nullptr, &lens_f}), "input 4 (sequence_lens) has dtype f32"));
  Tensor h0_bad = MakeTensor<float>(DType::kF32, {1, 3, 4}, {});
  EXPECT_TRUE(ErrorContains(run({}, {&t.x, &t.w, &t.r, nullptr, nullptr, &h0_bad}),
                            "input 5 (initial_h) has shape [1, 3, 4]; expected [1, 2, 4]"));
  Tensor p_bad = MakeTensor<float>(DType::kF32, {1, 4}, {});
  EXPECT_TRUE(ErrorContains(run({}, {&t.x, &t.w, &t.r, nullptr, nullptr, nullptr, nullptr, &p_bad}),
                            "input 7 (P) has shape [1, 4]; expected [1, 12]"));
  Tensor w64 = MakeTensor<double>(DType::kF64, {1, 16, 3}, {});
  EXPECT_TRUE(ErrorContains(run({}, {&t.x, &w64, &t.r}), "input 1 (W) has dtype f64"));
  Tensor x2 = MakeTensor<float>(DType::kF32, {3, 6}, {});
  EXPECT_TRUE(ErrorContains(run({}, {&x2, &t.w, &t.r}), "input 0 (X) has shape [3, 6]; expected [seq_length"));
  Tensor xi = MakeTensor<int32_t>(DType::kI32, {3, 2, 3}, {});
  EXPECT_TRUE(ErrorContains(run({}, {&xi, &t.w, &t.r}), "input 0 (X) has dtype i32"));
  // The kernel checks what symbolic planning could not.
  EXPECT_TRUE(ErrorContains(
      RunKernelPlanned("LSTM", {&t.x, &t.w, &t.r}, DType::kF32, {3, 1, 2, 5}, {{"hidden_size", int64_t{4}}})
          .status(),
      "output 0 (Y) was allocated as f32 [3, 1, 2, 5] but the kernel writes f32 [3, 1, 2, 4]"));
}

}  // namespace
}  // namespace grove::testing
