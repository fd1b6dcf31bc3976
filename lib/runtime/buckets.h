// Shape buckets: each symbol's values grouped into ranges whose largest
// value (the bound) stands for all of them. The exact shapes of one bucket
// share an arena laid out for the bound and one CUDA graph per segment
// (SessionOptions::shape_buckets; the executor's BucketFamily).
//
//   absl::StatusOr<BucketPolicy> p = BucketPolicy::Make(graph, {{"seq", "pow2"}});
//   p->Bound(seq_index, 5);   // 8
//   p->Bound(seq_index, 8);   // 8
#ifndef GROVE_LIB_RUNTIME_BUCKETS_H_
#define GROVE_LIB_RUNTIME_BUCKETS_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "grove/grove.h"
#include "lib/ir/graph.h"

namespace grove::runtime {

// How one symbol's values are bucketed.
struct BucketRule {
  enum class Kind { kExact, kPow2, kStep, kList, kAuto };
  Kind kind = Kind::kAuto;
  int64_t step = 0;             // kStep
  std::vector<int64_t> bounds;  // kList, ascending
  // "auto" | "pow2" | "step:N" | "A,B,C" | "exact"; an error says what is wrong.
  static absl::StatusOr<BucketRule> Parse(absl::string_view spec);
  // The bound of the bucket holding `value` (>= value), before clamping.
  int64_t Bound(int64_t value) const;
  std::string ToString() const;
};

// "auto" below this: powers of two; from it on, multiples of it.
inline constexpr int64_t kAutoBucketStep = 256;

// Which dims of a body's inputs and captures have varied between its calls:
// the first call's shapes, and per dim whether a later call differed.
class BodyDims {
 public:
  // Notes a call's shapes (inputs then captures); the varied mask after it.
  absl::Span<const std::vector<bool>> Note(absl::Span<const TensorView> inputs, absl::Span<const TensorView> captures);

 private:
  std::vector<std::vector<int64_t>> first_;
  std::vector<std::vector<bool>> varied_;
};

class BucketPolicy {
 public:
  // Rules per symbol of `graph` from SessionOptions::shape_buckets: an
  // unknown symbol name, a name given twice or a bad spec is INVALID_ARGUMENT.
  static absl::StatusOr<BucketPolicy> Make(const ir::Graph& graph,
                                           absl::Span<const std::pair<std::string, std::string>> specs);

  // The bound of symbol `symbol`'s bucket holding `value`: in [value, max]
  // where max is the symbol's declared maximum (value when above it).
  int64_t Bound(int symbol, int64_t value) const;
  // Whether every symbol is "exact" (no buckets at all).
  bool all_exact() const { return all_exact_; }

  // The main inputs' shapes at their bucket's bound, from `inputs` (checked
  // against the declarations already). False, with `why`, when the inputs
  // cannot be bucketed: a dim declared as an expression of symbols (seq+1),
  // or a sequence or optional input.
  bool BoundShapes(const ir::Graph& graph, absl::Span<const TensorView> inputs,
                   std::vector<std::vector<int64_t>>* bound, std::string* why) const;
  // Main input `input`'s shape at its bucket's bound (a bound depends on
  // that input's own dims only), as BoundShapes gives it.
  bool BoundInputShape(const ir::Graph& graph, size_t input, const TensorView& view, std::vector<int64_t>* bound,
                       std::string* why) const;

  // A body's (If branch, Loop or Scan body) inputs and captures at their
  // bucket's bound: every dim by the rule of symbols not named ("*", else
  // auto), since a body's dims are not declared with symbols. False, with
  // `why`, for a sequence, optional or string value, or when that rule is
  // exact. `varied` (optional: empty buckets every dim), per input then
  // per capture, per dim: whether that dim has varied between the body's
  // calls (BodyDims); a dim that has not stays exact, so a fixed size that
  // a weight must match (a hidden size of 48) is never padded to 64.
  bool BoundBodyShapes(absl::Span<const TensorView> inputs, absl::Span<const TensorView> captures,
                       std::vector<std::vector<int64_t>>* bound_inputs,
                       std::vector<std::vector<int64_t>>* bound_captures, std::string* why,
                       absl::Span<const std::vector<bool>> varied = {}) const;

 private:
  std::vector<BucketRule> rules_;  // per symbol
  BucketRule other_;               // of symbols not named: '*', else auto
  std::vector<int64_t> max_;       // per symbol: its declared maximum
  bool all_exact_ = true;
};

}  // namespace grove::runtime

#endif  // GROVE_LIB_RUNTIME_BUCKETS_H_
