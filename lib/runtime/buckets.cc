#include "lib/runtime/buckets.h"

#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "lib/ir/value_type.h"

namespace grove::runtime {
namespace {

constexpr int64_t kMaxBound = int64_t{1} << 62;

int64_t NextPow2(int64_t v) {
  int64_t b = 1;
  while (b < v && b < kMaxBound) b <<= 1;
  return std::max(b, v);
}

int64_t RoundUp(int64_t v, int64_t step) {
  const int64_t q = v / step + (v % step != 0 ? 1 : 0);
  return q > kMaxBound / step ? v : q * step;
}

}  // namespace

absl::StatusOr<BucketRule> BucketRule::Parse(absl::string_view spec) {
  BucketRule r;
  if (spec == "auto") return r;
  if (spec == "exact") {
    r.kind = Kind::kExact;
    return r;
  }
  if (spec == "pow2") {
    r.kind = Kind::kPow2;
    return r;
  }
  if (absl::ConsumePrefix(&spec, "step:")) {
    r.kind = Kind::kStep;
    if (!absl::SimpleAtoi(spec, &r.step) || r.step < 1) {
      return absl::InvalidArgumentError(absl::StrCat("bucket step '", spec, "' is not a positive integer"));
    }
    return r;
  }
  r.kind = Kind::kList;
  for (absl::string_view item : absl::StrSplit(spec, ',')) {
    int64_t b = 0;
    if (!absl::SimpleAtoi(item, &b) || b < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "bucket spec '", spec, "' is none of auto, pow2, step:N, exact or a list of bounds A,B,C ('", item,
          "' is not a bound)"));
    }
    if (!r.bounds.empty() && b <= r.bounds.back()) {
      return absl::InvalidArgumentError(absl::StrCat("bucket bounds '", spec, "' must be ascending"));
    }
    r.bounds.push_back(b);
  }
  return r;
}

int64_t BucketRule::Bound(int64_t value) const {
  if (value <= 0) return value;  // an empty dim stays empty
  switch (kind) {
    case Kind::kExact: return value;
    case Kind::kPow2: return NextPow2(value);
    case Kind::kStep: return RoundUp(value, step);
    case Kind::kList: {
      auto it = std::lower_bound(bounds.begin(), bounds.end(), value);
      return it == bounds.end() ? value : *it;
    }
    case Kind::kAuto:
      return value <= kAutoBucketStep ? NextPow2(value) : RoundUp(value, kAutoBucketStep);
  }
  return value;
}

std::string BucketRule::ToString() const {
  switch (kind) {
    case Kind::kExact: return "exact";
    case Kind::kPow2: return "pow2";
    case Kind::kStep: return absl::StrCat("step:", step);
    case Kind::kList: return absl::StrJoin(bounds, ",");
    case Kind::kAuto: return "auto";
  }
  return "?";
}

absl::StatusOr<BucketPolicy> BucketPolicy::Make(const ir::Graph& graph,
                                                absl::Span<const std::pair<std::string, std::string>> specs) {
  BucketPolicy p;
  const size_t n = graph.symbols.size();
  p.rules_.assign(n, BucketRule());
  p.max_.resize(n);
  for (size_t s = 0; s < n; ++s) p.max_[s] = graph.symbols[s].max;
  std::vector<bool> named(n, false);
  const BucketRule* fallback = nullptr;
  BucketRule star;
  bool star_seen = false;
  for (const auto& [name, spec] : specs) {
    absl::StatusOr<BucketRule> rule = BucketRule::Parse(spec);
    if (!rule.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("shape_buckets['", name, "']: ", rule.status().message()));
    }
    if (name == "*") {
      if (star_seen) return absl::InvalidArgumentError("shape_buckets: '*' given twice");
      star_seen = true;
      star = *rule;
      fallback = &star;
      continue;
    }
    size_t s = 0;
    while (s < n && graph.symbols[s].name != name) ++s;
    if (s == n) {
      std::vector<std::string> names;
      for (const ir::Symbol& sym : graph.symbols) names.push_back(sym.name);
      return absl::InvalidArgumentError(absl::StrCat(
          "shape_buckets: the model has no symbol '", name, "' (its symbols: ",
          names.empty() ? std::string("none") : absl::StrJoin(names, ", "), "; '*' names them all)"));
    }
    if (named[s]) return absl::InvalidArgumentError(absl::StrCat("shape_buckets: symbol '", name, "' given twice"));
    named[s] = true;
    p.rules_[s] = *rule;
  }
  if (fallback != nullptr) p.other_ = *fallback;
  for (size_t s = 0; s < n; ++s) {
    if (!named[s] && fallback != nullptr) p.rules_[s] = *fallback;
    if (p.rules_[s].kind != BucketRule::Kind::kExact) p.all_exact_ = false;
  }
  return p;
}

int64_t BucketPolicy::Bound(int symbol, int64_t value) const {
  if (symbol < 0 || symbol >= static_cast<int>(rules_.size())) return value;
  const int64_t b = rules_[symbol].Bound(value);
  return std::max(value, std::min(b, max_[symbol]));
}

bool BucketPolicy::BoundShapes(const ir::Graph& graph, absl::Span<const TensorView> inputs,
                               std::vector<std::vector<int64_t>>* bound, std::string* why) const {
  const ir::Subgraph& main = graph.subgraphs[0];
  bound->clear();
  for (size_t i = 0; i < inputs.size() && i < main.inputs.size(); ++i) {
    std::vector<int64_t> shape;
    if (!BoundInputShape(graph, i, inputs[i], &shape, why)) return false;
    bound->push_back(std::move(shape));
  }
  return true;
}

bool BucketPolicy::BoundInputShape(const ir::Graph& graph, size_t input, const TensorView& view,
                                   std::vector<int64_t>* bound, std::string* why) const {
  const ir::Subgraph& main = graph.subgraphs[0];
  if (input >= main.inputs.size()) {
    *why = absl::StrCat("no main input ", input);
    return false;
  }
  const ir::TensorDecl& d = graph.tensors[main.inputs[input]];
  if (ir::IsBoxed(view.dtype) || view.dtype == DType::kString) {
    *why = absl::StrCat("input '", d.name, "' is a ", DTypeName(view.dtype));
    return false;
  }
  std::vector<int64_t> shape = view.shape;
  if (d.has_shape && d.shape.size() == shape.size()) {
    for (size_t k = 0; k < shape.size(); ++k) {
      const ir::SymDim& dim = d.shape[k];
      if (dim.is_const()) continue;
      const int s = dim.symbol_index();
      if (s < 0) {
        *why = absl::StrCat("input '", d.name, "' dim ", k, " is ",
                            dim.ToString([&] {
                              std::vector<std::string> names;
                              for (const ir::Symbol& sym : graph.symbols) names.push_back(sym.name);
                              return names;
                            }()),
                            ", not one symbol");
        return false;
      }
      shape[k] = Bound(s, shape[k]);
    }
  }
  *bound = std::move(shape);
  return true;
}

bool BucketPolicy::BoundBodyShapes(absl::Span<const TensorView> inputs, absl::Span<const TensorView> captures,
                                   std::vector<std::vector<int64_t>>* bound_inputs,
                                   std::vector<std::vector<int64_t>>* bound_captures, std::string* why,
                                   absl::Span<const std::vector<bool>> varied) const {
  if (other_.kind == BucketRule::Kind::kExact) {
    *why = "bodies are bucketed by the rule of symbols not named ('*'), which is exact";
    return false;
  }
  size_t index = 0;  // into varied
  for (auto [group, out] : {std::pair{inputs, bound_inputs}, std::pair{captures, bound_captures}}) {
    out->clear();
    for (const TensorView& v : group) {
      if (ir::IsBoxed(v.dtype) || v.dtype == DType::kString) {
        *why = absl::StrCat("a body takes a ", DTypeName(v.dtype));
        return false;
      }
      std::vector<int64_t> shape = v.shape;
      const std::vector<bool>* mask = index < varied.size() ? &varied[index] : nullptr;
      for (size_t d = 0; d < shape.size(); ++d) {
        if (mask == nullptr || varied.empty() || (d < mask->size() && (*mask)[d])) shape[d] = other_.Bound(shape[d]);
      }
      ++index;
      out->push_back(std::move(shape));
    }
  }
  return true;
}

absl::Span<const std::vector<bool>> BodyDims::Note(absl::Span<const TensorView> inputs,
                                                   absl::Span<const TensorView> captures) {
  size_t i = 0;
  for (absl::Span<const TensorView> group : {inputs, captures}) {
    for (const TensorView& v : group) {
      if (i == first_.size()) {
        first_.push_back(v.shape);
        varied_.emplace_back(v.shape.size(), false);
      } else if (first_[i].size() != v.shape.size()) {
        varied_[i].assign(std::max(varied_[i].size(), v.shape.size()), true);  // its rank changed: every dim
      } else {
        for (size_t d = 0; d < v.shape.size(); ++d) {
          if (v.shape[d] != first_[i][d]) varied_[i][d] = true;
        }
      }
      ++i;
    }
  }
  return absl::MakeConstSpan(varied_).subspan(0, std::min(i, varied_.size()));
}

}  // namespace grove::runtime
