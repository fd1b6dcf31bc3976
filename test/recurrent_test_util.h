// Pieces shared by the RNN, GRU and LSTM tests (test/ops/recurrent_test.cc
// against a reference, test/cuda/recurrent_test.cc against the CPU): the
// deterministic input values, the part of a call's description both vary,
// and the attributes it gives.
#ifndef GROVE_TEST_RECURRENT_TEST_UTIL_H_
#define GROVE_TEST_RECURRENT_TEST_UTIL_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "grove/grove.h"

namespace grove::testing {

// Deterministic values in [-scale, scale].
inline std::vector<float> RecurrentPattern(int64_t n, int seed, float scale) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[i] = scale * static_cast<float>(((i * 29 + seed * 13 + 3) % 31) - 15) / 15.0f;
  return v;
}

// One call's op, dims and attributes (inputs beyond X, W and R as flags).
struct RecurrentSpec {
  std::string op = "LSTM";
  int64_t seq = 3, batch = 2, input = 3, hidden = 4;
  std::string direction = "forward";
  int64_t layout = 0;
  bool bias = false, initial_h = false, initial_c = false, peephole = false;
  std::vector<std::string> activations;
  std::vector<double> alphas, betas;
  double clip = 0;  // 0: no clip
  bool input_forget = false;
  int64_t linear_before_reset = 0;
  bool hidden_size_attr = true;

  int64_t gates() const { return op == "LSTM" ? 4 : op == "GRU" ? 3 : 1; }
  int64_t dirs() const { return direction == "bidirectional" ? 2 : 1; }
};

// The node attributes of a spec (defaults left out).
inline std::vector<std::pair<std::string, AttrValue>> RecurrentAttrs(const RecurrentSpec& s) {
  std::vector<std::pair<std::string, AttrValue>> a;
  if (s.hidden_size_attr) a.push_back({"hidden_size", s.hidden});
  if (s.direction != "forward") a.push_back({"direction", s.direction});
  if (s.layout != 0) a.push_back({"layout", s.layout});
  if (!s.activations.empty()) a.push_back({"activations", s.activations});
  if (!s.alphas.empty()) a.push_back({"activation_alpha", s.alphas});
  if (!s.betas.empty()) a.push_back({"activation_beta", s.betas});
  if (s.clip > 0) a.push_back({"clip", s.clip});
  if (s.input_forget) a.push_back({"input_forget", int64_t{1}});
  if (s.linear_before_reset != 0) a.push_back({"linear_before_reset", s.linear_before_reset});
  return a;
}

}  // namespace grove::testing

#endif  // GROVE_TEST_RECURRENT_TEST_UTIL_H_
