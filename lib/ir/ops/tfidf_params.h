// The attributes of TfIdfVectorizer (ONNX opset 9), read and checked once for
// the shape function and the CPU kernel: the n-gram pool of integers split
// into segments of 1-grams, 2-grams, ... by ngram_counts, the output index
// of each pool n-gram (ngram_indexes) and the weighting mode. A string pool
// (pool_strings, for string input) becomes a pool of token ids: `vocabulary`
// numbers the distinct strings in order of first appearance.
#ifndef GROVE_LIB_IR_OPS_TFIDF_PARAMS_H_
#define GROVE_LIB_IR_OPS_TFIDF_PARAMS_H_

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "lib/ir/graph.h"

namespace grove::ir {

enum class TfIdfMode { kTF, kIDF, kTFIDF };

struct TfIdfParams {
  int64_t min_gram_length = 0;
  int64_t max_gram_length = 0;
  int64_t max_skip_count = 0;
  TfIdfMode mode = TfIdfMode::kTF;
  std::vector<int64_t> ngram_counts;   // start of the n-gram segment in the pool, n = 1, 2, ...
  std::vector<int64_t> ngram_indexes;  // output coordinate of each pool n-gram, in pool order
  std::vector<int64_t> pool;           // pool_int64s, or the ids of pool_strings
  bool string_pool = false;            // pool_strings: the input holds strings
  absl::flat_hash_map<std::string, int64_t> vocabulary;  // string pools: string -> id
  std::vector<double> weights;         // empty, or one per output coordinate
  int64_t output_size = 0;             // max(ngram_indexes) + 1
};

// Reads and checks the attributes; the message says which attribute is wrong.
inline absl::StatusOr<TfIdfParams> ReadTfIdfParams(const Attributes& attrs) {
  TfIdfParams p;
  for (const char* name : {"max_gram_length", "min_gram_length", "max_skip_count", "mode", "ngram_counts",
                           "ngram_indexes"}) {
    if (!attrs.Has(name)) return absl::InvalidArgumentError(absl::StrCat("attribute '", name, "' is required"));
  }
  if (attrs.Has("pool_strings") == attrs.Has("pool_int64s")) {
    return absl::InvalidArgumentError("exactly one of the attributes 'pool_int64s' and 'pool_strings' is required");
  }
  p.min_gram_length = attrs.GetInt("min_gram_length", 0);
  p.max_gram_length = attrs.GetInt("max_gram_length", 0);
  p.max_skip_count = attrs.GetInt("max_skip_count", 0);
  if (p.min_gram_length < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("attribute 'min_gram_length' is ", p.min_gram_length, "; expected at least 1"));
  }
  if (p.max_gram_length < p.min_gram_length) {
    return absl::InvalidArgumentError(absl::StrCat("attribute 'max_gram_length' is ", p.max_gram_length,
                                                   "; expected at least min_gram_length (", p.min_gram_length,
                                                   ")"));
  }
  if (p.max_skip_count < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("attribute 'max_skip_count' is ", p.max_skip_count, "; expected 0 or more"));
  }
  const std::string mode = attrs.GetString("mode", "");
  if (mode == "TF") {
    p.mode = TfIdfMode::kTF;
  } else if (mode == "IDF") {
    p.mode = TfIdfMode::kIDF;
  } else if (mode == "TFIDF") {
    p.mode = TfIdfMode::kTFIDF;
  } else {
    return absl::InvalidArgumentError(absl::StrCat("attribute 'mode' is '", mode, "'; expected 'TF', 'IDF' or 'TFIDF'"));
  }
  p.ngram_counts = attrs.GetInts("ngram_counts");
  p.ngram_indexes = attrs.GetInts("ngram_indexes");
  if (const AttrValue* strings = attrs.Find("pool_strings")) {
    p.string_pool = true;
    for (const std::string& token : std::get<std::vector<std::string>>(*strings)) {
      auto it = p.vocabulary.try_emplace(token, static_cast<int64_t>(p.vocabulary.size())).first;
      p.pool.push_back(it->second);
    }
  } else {
    p.pool = attrs.GetInts("pool_int64s");
  }
  p.weights = attrs.GetFloats("weights");
  const int64_t pool_size = static_cast<int64_t>(p.pool.size());
  if (p.ngram_counts.empty()) return absl::InvalidArgumentError("attribute 'ngram_counts' is empty");
  // Segment n (n-grams of length n + 1) is pool[ngram_counts[n], ngram_counts[n + 1]).
  int64_t num_ngrams = 0;
  for (size_t n = 0; n < p.ngram_counts.size(); ++n) {
    const int64_t begin = p.ngram_counts[n];
    const int64_t end = n + 1 < p.ngram_counts.size() ? p.ngram_counts[n + 1] : pool_size;
    if (begin < 0 || begin > pool_size) {
      return absl::InvalidArgumentError(absl::StrCat("attribute 'ngram_counts'[", n, "] is ", begin,
                                                     "; expected 0..", pool_size, " (the size of the pool)"));
    }
    if (end < begin) {
      return absl::InvalidArgumentError(absl::StrCat("attribute 'ngram_counts' is not non-decreasing: [", n,
                                                     "] is ", begin, ", [", n + 1, "] is ", end));
    }
    const int64_t length = static_cast<int64_t>(n) + 1;
    if ((end - begin) % length != 0) {
      return absl::InvalidArgumentError(absl::StrCat("the ", length, "-gram segment of the pool (", begin, "..",
                                                     end, ") has ", end - begin, " items; expected a multiple of ",
                                                     length));
    }
    num_ngrams += (end - begin) / length;
  }
  if (static_cast<int64_t>(p.ngram_indexes.size()) != num_ngrams) {
    return absl::InvalidArgumentError(absl::StrCat("attribute 'ngram_indexes' has ", p.ngram_indexes.size(),
                                                   " entries but the pool and ngram_counts give ", num_ngrams,
                                                   " n-grams; expected one index per n-gram"));
  }
  if (p.ngram_indexes.empty()) return absl::InvalidArgumentError("attribute 'ngram_indexes' is empty");
  // Output coordinates stay below 2^31 so that [N, output_size] is a sane tensor.
  constexpr int64_t kMaxIndex = (int64_t{1} << 31) - 2;
  for (size_t i = 0; i < p.ngram_indexes.size(); ++i) {
    const int64_t v = p.ngram_indexes[i];
    if (v < 0 || v > kMaxIndex) {
      return absl::InvalidArgumentError(
          absl::StrCat("attribute 'ngram_indexes'[", i, "] is ", v, "; expected 0..", kMaxIndex));
    }
    p.output_size = std::max(p.output_size, v + 1);
  }
  if (!p.weights.empty() && static_cast<int64_t>(p.weights.size()) != p.output_size) {
    return absl::InvalidArgumentError(absl::StrCat("attribute 'weights' has ", p.weights.size(),
                                                   " entries; expected none or one per output coordinate (",
                                                   p.output_size, " = max(ngram_indexes) + 1)"));
  }
  return p;
}

}  // namespace grove::ir

#endif  // GROVE_LIB_IR_OPS_TFIDF_PARAMS_H_
