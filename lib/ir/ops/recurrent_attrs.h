// Attributes of LSTM, GRU and RNN (ONNX opset 14), read and checked once for
// the shape function and the CPU kernel: direction, layout, clip, the
// per-direction activation functions with their alpha/beta.
//
//   absl::StatusOr<RecurrentAttrs> a = ReadRecurrentAttrs(node.attrs, RecurrentKind::kLstm);
//   const Activation& g = a->activation(/*direction=*/1, /*slot=*/1);   // reverse g
#ifndef GROVE_LIB_IR_OPS_RECURRENT_ATTRS_H_
#define GROVE_LIB_IR_OPS_RECURRENT_ATTRS_H_

#include <cctype>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "lib/ir/graph.h"

namespace grove::ir {

enum class RecurrentKind { kRnn, kGru, kLstm };

enum class ActivationKind {
  kRelu,
  kTanh,
  kSigmoid,
  kAffine,
  kLeakyRelu,
  kThresholdedRelu,
  kScaledTanh,
  kHardSigmoid,
  kElu,
  kSoftsign,
  kSoftplus,
};

struct Activation {
  ActivationKind kind = ActivationKind::kTanh;
  double alpha = 0;
  double beta = 0;
};

// Gate blocks in W and R: RNN i; GRU z, r, h; LSTM i, o, f, c.
inline int GateCount(RecurrentKind kind) {
  return kind == RecurrentKind::kLstm ? 4 : kind == RecurrentKind::kGru ? 3 : 1;
}
// Activation functions per direction: RNN f; GRU f, g; LSTM f, g, h.
inline int ActivationsPerDirection(RecurrentKind kind) {
  return kind == RecurrentKind::kLstm ? 3 : kind == RecurrentKind::kGru ? 2 : 1;
}

struct RecurrentAttrs {
  RecurrentKind kind = RecurrentKind::kRnn;
  int num_directions = 1;
  bool reverse = false;      // direction == "reverse"
  int layout = 0;            // 0: [seq, batch, ...]; 1: [batch, seq, ...]
  int64_t hidden_size = -1;  // -1: not given (taken from R)
  bool has_clip = false;
  double clip = 0;
  bool input_forget = false;            // LSTM
  bool linear_before_reset = false;     // GRU
  std::vector<Activation> activations;  // ActivationsPerDirection(kind) per direction

  const Activation& activation(int direction, int slot) const {
    return activations[direction * ActivationsPerDirection(kind) + slot];
  }
};

namespace recurrent_internal {

struct ActivationInfo {
  const char* name;
  ActivationKind kind;
  bool uses_alpha, uses_beta;
  double default_alpha, default_beta;
};

// The defaults are those of the ONNX operators of the same name.
inline constexpr ActivationInfo kActivations[] = {
    {"Relu", ActivationKind::kRelu, false, false, 0, 0},
    {"Tanh", ActivationKind::kTanh, false, false, 0, 0},
    {"Sigmoid", ActivationKind::kSigmoid, false, false, 0, 0},
    {"Affine", ActivationKind::kAffine, true, true, 1.0, 0.0},
    {"LeakyRelu", ActivationKind::kLeakyRelu, true, false, 0.01, 0},
    {"ThresholdedRelu", ActivationKind::kThresholdedRelu, true, false, 1.0, 0},
    {"ScaledTanh", ActivationKind::kScaledTanh, true, true, 1.0, 1.0},
    {"HardSigmoid", ActivationKind::kHardSigmoid, true, true, 0.2, 0.5},
    {"Elu", ActivationKind::kElu, true, false, 1.0, 0},
    {"Softsign", ActivationKind::kSoftsign, false, false, 0, 0},
    {"Softplus", ActivationKind::kSoftplus, false, false, 0, 0},
};

inline bool EqualsIgnoreCase(absl::string_view a, absl::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i])))
      return false;
  }
  return true;
}

}  // namespace recurrent_internal

inline absl::StatusOr<RecurrentAttrs> ReadRecurrentAttrs(const Attributes& attrs, RecurrentKind kind) {
  namespace in = recurrent_internal;
  RecurrentAttrs a;
  a.kind = kind;
  const std::string direction = attrs.GetString("direction", "forward");
  if (direction == "forward") {
    a.num_directions = 1;
  } else if (direction == "reverse") {
    a.num_directions = 1;
    a.reverse = true;
  } else if (direction == "bidirectional") {
    a.num_directions = 2;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("attribute 'direction' is '", direction, "'; expected forward, reverse or bidirectional"));
  }
  const int64_t layout = attrs.GetInt("layout", 0);
  if (layout != 0 && layout != 1) {
    return absl::InvalidArgumentError(absl::StrCat("attribute 'layout' is ", layout, "; expected 0 or 1"));
  }
  a.layout = static_cast<int>(layout);
  if (attrs.Has("hidden_size")) {
    a.hidden_size = attrs.GetInt("hidden_size", 0);
    if (a.hidden_size < 1 || a.hidden_size > (int64_t{1} << 24)) {
      return absl::InvalidArgumentError(
          absl::StrCat("attribute 'hidden_size' is ", a.hidden_size, "; expected 1..", int64_t{1} << 24));
    }
  }
  if (attrs.Has("clip")) {
    a.has_clip = true;
    a.clip = attrs.GetFloat("clip", 0);
    if (!(a.clip > 0)) {
      return absl::InvalidArgumentError(
          absl::StrCat("attribute 'clip' is ", a.clip, "; expected a positive threshold"));
    }
  }
  const int64_t input_forget = attrs.GetInt("input_forget", 0);
  if (input_forget != 0 && input_forget != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("attribute 'input_forget' is ", input_forget, "; expected 0 or 1"));
  }
  a.input_forget = input_forget == 1;
  // ONNX defines linear_before_reset as "non-zero", not as 0/1.
  a.linear_before_reset = attrs.GetInt("linear_before_reset", 0) != 0;

  const int per_direction = ActivationsPerDirection(kind);
  std::vector<std::string> names;
  if (attrs.Has("activations")) {
    const AttrValue* v = attrs.Find("activations");
    if (const auto* list = std::get_if<std::vector<std::string>>(v)) names = *list;
    // One direction's list serves both directions of a bidirectional op.
    if (a.num_directions == 2 && static_cast<int>(names.size()) == per_direction) {
      const std::vector<std::string> once = names;
      names.insert(names.end(), once.begin(), once.end());
    }
    if (static_cast<int>(names.size()) != per_direction * a.num_directions) {
      return absl::InvalidArgumentError(
          absl::StrCat("attribute 'activations' has ", names.size(), " functions [", absl::StrJoin(names, ", "),
                       "]; expected ", per_direction * a.num_directions, " (", per_direction, " per direction, ",
                       a.num_directions, a.num_directions == 1 ? " direction)" : " directions)"));
    }
  } else {
    const std::vector<std::string> defaults =
        kind == RecurrentKind::kLstm  ? std::vector<std::string>{"Sigmoid", "Tanh", "Tanh"}
        : kind == RecurrentKind::kGru ? std::vector<std::string>{"Sigmoid", "Tanh"}
                                      : std::vector<std::string>{"Tanh"};
    for (int d = 0; d < a.num_directions; ++d) names.insert(names.end(), defaults.begin(), defaults.end());
  }
  // activation_alpha/beta are consumed in order by the functions that take
  // them; a function past the end of the list takes its default.
  const std::vector<double> alphas = attrs.GetFloats("activation_alpha");
  const std::vector<double> betas = attrs.GetFloats("activation_beta");
  size_t next_alpha = 0, next_beta = 0;
  for (const std::string& name : names) {
    const in::ActivationInfo* info = nullptr;
    for (const in::ActivationInfo& c : in::kActivations) {
      if (in::EqualsIgnoreCase(name, c.name)) info = &c;
    }
    if (info == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(
          "attribute 'activations' names '", name,
          "'; expected Relu, Tanh, Sigmoid, Affine, LeakyRelu, ThresholdedRelu, ScaledTanh, HardSigmoid, Elu, "
          "Softsign or Softplus"));
    }
    Activation act{info->kind, info->default_alpha, info->default_beta};
    if (info->uses_alpha && next_alpha < alphas.size()) act.alpha = alphas[next_alpha++];
    if (info->uses_beta && next_beta < betas.size()) act.beta = betas[next_beta++];
    a.activations.push_back(act);
  }
  return a;
}

}  // namespace grove::ir

#endif  // GROVE_LIB_IR_OPS_RECURRENT_ATTRS_H_
