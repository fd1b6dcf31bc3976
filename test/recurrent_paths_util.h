// Pieces shared by the tests that run an LSTM, GRU or RNN through one of the
// CPU's fast paths and through the reference kernel in one process
// (test/ops/onednn_recurrent_test.cc, test/ops/recurrent_lstm_test.cc):
// random inputs of a spec, the input list, the comparison within
// 1e-5 + 1e-4 |ref| (or byte for byte), and an LSTM model with Y omitted
// run at several sequence lengths.
#ifndef GROVE_TEST_RECURRENT_PATHS_UTIL_H_
#define GROVE_TEST_RECURRENT_PATHS_UTIL_H_

#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "grove/grove.h"
#include "gtest/gtest.h"
#include "test/op_test_util.h"
#include "test/recurrent_test_util.h"

namespace grove::testing {

inline std::vector<float> RecurrentRandom(int64_t n, std::mt19937& rng, float scale) {
  std::uniform_real_distribution<float> dist(-scale, scale);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = dist(rng);
  return v;
}

struct RecurrentTensors {
  Tensor x, w, r, b, lens, h0, c0, p;
};

// Every input of `c`'s op (drawn in this order from one generator seeded with
// `seed`); sequence_lens holds `lengths` (i32).
inline RecurrentTensors MakeRecurrentTensors(const RecurrentSpec& c, const std::vector<int32_t>& lengths,
                                             uint32_t seed) {
  using Shape = std::vector<int64_t>;
  std::mt19937 rng(seed);
  const int64_t g = c.gates(), nd = c.dirs(), h = c.hidden;
  const Shape state = c.layout == 0 ? Shape{nd, c.batch, h} : Shape{c.batch, nd, h};
  RecurrentTensors t;
  t.x = MakeTensor<float>(DType::kF32, c.layout == 0 ? Shape{c.seq, c.batch, c.input} : Shape{c.batch, c.seq, c.input},
                          RecurrentRandom(c.seq * c.batch * c.input, rng, 1.0f));
  t.w = MakeTensor<float>(DType::kF32, {nd, g * h, c.input}, RecurrentRandom(nd * g * h * c.input, rng, 0.6f));
  t.r = MakeTensor<float>(DType::kF32, {nd, g * h, h}, RecurrentRandom(nd * g * h * h, rng, 0.6f));
  t.b = MakeTensor<float>(DType::kF32, {nd, 2 * g * h}, RecurrentRandom(nd * 2 * g * h, rng, 0.5f));
  t.lens = MakeTensor<int32_t>(DType::kI32, {c.batch}, lengths);
  t.h0 = MakeTensor<float>(DType::kF32, state, RecurrentRandom(nd * c.batch * h, rng, 0.8f));
  t.c0 = MakeTensor<float>(DType::kF32, state, RecurrentRandom(nd * c.batch * h, rng, 0.8f));
  t.p = MakeTensor<float>(DType::kF32, {nd, 3 * h}, RecurrentRandom(nd * 3 * h, rng, 0.5f));
  return t;
}

// The op's inputs as `c` has them (trailing absent ones left off).
inline std::vector<const Tensor*> RecurrentInputs(const RecurrentSpec& c, const RecurrentTensors& t,
                                                  bool has_lengths) {
  std::vector<const Tensor*> v = {&t.x, &t.w, &t.r};
  v.push_back(c.bias ? &t.b : nullptr);
  v.push_back(has_lengths ? &t.lens : nullptr);
  v.push_back(c.initial_h ? &t.h0 : nullptr);
  if (c.op == "LSTM") {
    v.push_back(c.initial_c ? &t.c0 : nullptr);
    v.push_back(c.peephole ? &t.p : nullptr);
  }
  while (v.back() == nullptr) v.pop_back();
  return v;
}

// Within 1e-5 + 1e-4 |want| (recurrent_test's bound against the double reference).
inline void ExpectRecurrentClose(const Tensor& got, const Tensor& want, const std::string& what) {
  ASSERT_EQ(got.shape(), want.shape()) << what;
  ASSERT_EQ(got.dtype(), want.dtype()) << what;
  const float* g = got.as<float>();
  const float* w = want.as<float>();
  int reported = 0;
  for (int64_t i = 0; i < got.view().num_elements(); ++i) {
    const double bound = 1e-5 + 1e-4 * std::fabs(w[i]);
    if (!(std::fabs(static_cast<double>(g[i]) - w[i]) <= bound) && reported++ < 5) {
      ADD_FAILURE() << what << ": element " << i << " is " << g[i] << ", the reference " << w[i];
    }
  }
}

// A case through a fast path and through the reference kernel: `run(fast,
// &made)` returns the op's outputs and sets `made` to the fast path's steps
// its prepare made (one where the path takes the case, `taken`, else none);
// the outputs agree within ExpectRecurrentClose's bound.
template <typename Run>
void ExpectFastPathAgrees(bool taken, Run run) {
  int64_t made = 0, made_reference = 0;
  absl::StatusOr<std::vector<Tensor>> got = run(true, &made);
  ASSERT_TRUE(got.ok()) << got.status();
  absl::StatusOr<std::vector<Tensor>> want = run(false, &made_reference);
  ASSERT_TRUE(want.ok()) << want.status();
  EXPECT_EQ(made, taken ? 1 : 0);
  ASSERT_EQ(got->size(), want->size());
  for (size_t i = 0; i < got->size(); ++i) ExpectRecurrentClose((*got)[i], (*want)[i], absl::StrCat("output ", i));
}

// The same f32 outputs, byte for byte.
inline void ExpectSameBytes(const std::vector<Tensor>& got, const std::vector<Tensor>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(got[i].view().num_elements(), want[i].view().num_elements());
    EXPECT_EQ(std::memcmp(got[i].as<float>(), want[i].as<float>(),
                          static_cast<size_t>(got[i].view().num_elements()) * sizeof(float)),
              0)
        << "output " << i;
  }
}

inline std::vector<uint8_t> FloatBytes(const Tensor& t) {
  std::vector<uint8_t> bytes(static_cast<size_t>(t.view().num_elements()) * sizeof(float));
  std::memcpy(bytes.data(), t.as<float>(), bytes.size());
  return bytes;
}

// A model's LSTM with Y omitted (its array in the workspace): x [seq, batch,
// input] with seq symbolic; W, R, B (and P when c.peephole) weights, or W a
// model input (`w_is_input`), which a prepare cannot read. Runs it through
// one session at sequence lengths 1, c.seq, 2, c.seq (three plans) and
// returns Y_h and Y_c of each run, one after another.
inline absl::StatusOr<std::vector<float>> RunLstmModelWithYOmitted(const RecurrentSpec& c, const RecurrentTensors& t,
                                                                   bool w_is_input) {
  const int64_t g = c.gates(), h = c.hidden, nd = c.dirs();
  ModelBuilder builder;
  builder.AddSymbol("seq", 1, 64);
  builder.AddInput("x", DType::kF32, {"seq", c.batch, c.input});
  if (w_is_input) {
    builder.AddInput("w", DType::kF32, {nd, g * h, c.input});
  } else {
    builder.AddWeight("w", DType::kF32, {nd, g * h, c.input}, FloatBytes(t.w));
  }
  builder.AddWeight("r", DType::kF32, {nd, g * h, h}, FloatBytes(t.r));
  builder.AddWeight("b", DType::kF32, {nd, 2 * g * h}, FloatBytes(t.b));
  std::vector<std::string> inputs = {"x", "w", "r", "b"};
  if (c.peephole) {
    builder.AddWeight("p", DType::kF32, {nd, 3 * h}, FloatBytes(t.p));
    inputs.insert(inputs.end(), {"", "", "", "p"});
  }
  builder.AddOp("LSTM", inputs, {"", "y_h", "y_c"}, {{"hidden_size", h}, {"direction", std::string(c.direction)}});
  builder.AddOutput("y_h");
  builder.AddOutput("y_c");
  absl::StatusOr<std::vector<uint8_t>> bytes = builder.Finish();
  if (!bytes.ok()) return bytes.status();
  absl::StatusOr<std::shared_ptr<const Model>> model = Model::LoadFromBuffer(*bytes);
  if (!model.ok()) return model.status();
  absl::StatusOr<std::unique_ptr<Session>> session = Session::Create(*model, {});
  if (!session.ok()) return session.status();
  std::vector<float> all;
  for (int64_t seq : {int64_t{1}, c.seq, int64_t{2}, c.seq}) {
    std::vector<TensorView> in = {TensorView(DType::kF32, {seq, c.batch, c.input}, t.x.as<float>())};
    if (w_is_input) in.push_back(TensorView(DType::kF32, t.w.shape(), const_cast<float*>(t.w.as<float>())));
    absl::StatusOr<std::vector<TensorView>> out = (*session)->Run(in);
    if (!out.ok()) return out.status();
    for (const TensorView& v : *out) {
      const float* p = v.as<const float>();
      all.insert(all.end(), p, p + v.num_elements());
    }
  }
  return all;
}

// The model of RunLstmModelWithYOmitted through a fast path and through the
// reference kernel, with W a weight and with W an input: `run(fast,
// w_is_input, &made)` returns its outputs and sets `made` to the fast path's
// steps its prepares made, one per plan (three) for W a weight, none for W
// an input (the prepare cannot read it) or for the reference kernel.
template <typename Run>
void ExpectModelPathsAgree(Run run) {
  for (bool w_is_input : {false, true}) {
    SCOPED_TRACE(w_is_input ? "W an input" : "W a weight");
    int64_t made = 0, made_reference = 0;
    absl::StatusOr<std::vector<float>> got = run(true, w_is_input, &made);
    ASSERT_TRUE(got.ok()) << got.status();
    absl::StatusOr<std::vector<float>> want = run(false, w_is_input, &made_reference);
    ASSERT_TRUE(want.ok()) << want.status();
    EXPECT_EQ(made, w_is_input ? 0 : 3);
    EXPECT_EQ(made_reference, 0);
    ASSERT_EQ(got->size(), want->size());
    for (size_t i = 0; i < got->size(); ++i) {
      EXPECT_NEAR((*got)[i], (*want)[i], 1e-5 + 1e-4 * std::fabs((*want)[i])) << "at " << i;
    }
  }
}

}  // namespace grove::testing

#endif  // GROVE_TEST_RECURRENT_PATHS_UTIL_H_
