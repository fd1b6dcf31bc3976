// Models with string tensors built with ModelBuilder, shared by the runtime
// tests (test/runtime/string_model_test.cc) and the same tests on the CUDA
// executor (test/cuda/string_model_test.cc), with the naive references their
// outputs are checked against.
#ifndef GROVE_TEST_STRING_TEST_MODELS_H_
#define GROVE_TEST_STRING_TEST_MODELS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "grove/grove.h"

namespace grove::testing {

using Strs = std::vector<std::string>;

// The string weight "vocab" of BuildStringLookup.
const Strs& LookupVocab();

// inputs: words string[n], ids i64[m] (n, m in 1..8). A string weight vocab,
// a string scalar target "日本" and a string scalar star "★":
//   picked = Gather(vocab, ids)            string[m]
//   joined = Concat(words, picked)         string[n + m]
//   hit    = Equal(joined, target)         bool[n + m]
//   column = Reshape(Where(hit, star, joined), [-1, 1])   string[n + m, 1]
// outputs, in order: picked, joined, hit, column.
absl::StatusOr<std::vector<uint8_t>> BuildStringLookup();
struct LookupResult {
  Strs picked, joined;
  std::vector<uint8_t> hit;
  Strs column;
};
LookupResult LookupReference(const Strs& words, const std::vector<int64_t>& ids);

// The string weight "digits" of BuildStringLoop ("零" .. "九").
const Strs& LoopDigits();

// inputs: m i64 scalar (1..10), seed string[k] (k in 1..4). One Loop
// carries a growing string tensor and a list of strings: trip i Concats
// digits[i] to the tensor, inserts it into the list and emits the list's
// newest item (SequenceAt) as its scan output. Another carries two string[1]
// tensors: trip i shifts held into older and takes digits[i] out of a
// one-item list made that trip into held. outputs, in order:
//   grown     string[k + m]  seed, then digits[0..m)
//   listed    string[m]      ConcatFromSequence of the list
//   newest    string[m, 1]   the scan output
//   older_out string[1]      digits[m - 2] ("—" for m = 1)
//   held_out  string[1]      digits[m - 1]
absl::StatusOr<std::vector<uint8_t>> BuildStringLoop();

// inputs: flag bool scalar, words string[n]. The If's then branch returns
// Concat(words, tail), its else branch Gather(tail, [1]), tail = {"end", "终"}.
// output: y.
absl::StatusOr<std::vector<uint8_t>> BuildStringIf();
Strs IfReference(bool flag, const Strs& words);

// inputs: parts seq(string[r]), words string[n].
//   s2     = SequenceInsert(parts, words, 0)
//   cat    = ConcatFromSequence(s2, axis 0)
//   last   = SequenceAt(s2, -1)
//   pieces = SplitToSequence(cat, keepdims 0)   one scalar per string
// outputs, in order: cat, last, s2, pieces.
absl::StatusOr<std::vector<uint8_t>> BuildStringSequence();

// inputs: s0 string[1], xs string[t]. A Scan over xs whose state is the
// string before: outputs last (string[1], xs[t - 1]) and pairs
// (string[t, 2], (previous, current) per position).
absl::StatusOr<std::vector<uint8_t>> BuildStringScan();
Strs ScanPairsReference(const std::string& s0, const Strs& xs);

// The elements of a string view (Strings in test/op_test_util.h takes a
// Tensor).
Strs StringsOf(const TensorView& view);

}  // namespace grove::testing

#endif  // GROVE_TEST_STRING_TEST_MODELS_H_
