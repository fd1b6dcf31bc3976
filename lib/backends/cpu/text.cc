// CPU kernel of the text group: TfIdfVectorizer over i32/i64 tokens, with the
// semantics of the ONNX reference (opset 9). Every n-gram of length n in
// [min_gram_length, max_gram_length] at positions i, i + d, ..., i + (n-1)d
// for skip distances d = 1..max_skip_count + 1 (unigrams once, d = 1) is
// looked up in the pool; a hit adds one to the count of its output
// coordinate. IDF truncates counts to 1 and TFIDF keeps them; both scale by
// weights[coordinate] when weights are given.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "lib/backends/common/layout_params.h"
#include "lib/backends/cpu/cpu_kernels.h"
#include "lib/ir/ops/layout_params.h"
#include "lib/ir/ops/tfidf_params.h"

namespace grove::cpu {
namespace {

using backends::CheckPlannedOutput;
using ir::DimsString;

// Pool n-gram (its tokens) -> output coordinate. A pool n-gram listed twice
// maps to the coordinate of its last occurrence, as in the ONNX reference.
using NgramMap = absl::flat_hash_map<std::vector<int64_t>, int64_t>;

NgramMap BuildNgramMap(const ir::TfIdfParams& p) {
  NgramMap map;
  const int64_t pool_size = static_cast<int64_t>(p.pool.size());
  int64_t id = 0;
  for (size_t s = 0; s < p.ngram_counts.size(); ++s) {
    const int64_t n = static_cast<int64_t>(s) + 1;
    const int64_t begin = p.ngram_counts[s];
    const int64_t end = s + 1 < p.ngram_counts.size() ? p.ngram_counts[s + 1] : pool_size;
    for (int64_t at = begin; at + n <= end; at += n, ++id) {
      if (n < p.min_gram_length || n > p.max_gram_length) continue;
      map.insert_or_assign(std::vector<int64_t>(p.pool.begin() + at, p.pool.begin() + at + n), p.ngram_indexes[id]);
    }
  }
  return map;
}

// Counts the pool n-grams of one row of `c` tokens into counts[0, output_size).
template <typename T>
void CountRow(const ir::TfIdfParams& p, const NgramMap& map, const T* row, int64_t c, int64_t* counts) {
  std::vector<int64_t> key;
  // The pool holds no n-gram longer than its segments, nor a row one longer than c.
  const int64_t longest = std::min({p.max_gram_length, static_cast<int64_t>(p.ngram_counts.size()), c});
  for (int64_t n = p.min_gram_length; n <= longest; ++n) {
    const int64_t max_distance = n == 1 ? 1 : std::min(p.max_skip_count, c) + 1;
    for (int64_t d = 1; d <= max_distance; ++d) {
      // The last token of an n-gram starting at i is at i + (n - 1) * d.
      if ((n - 1) * d >= c) break;
      for (int64_t i = 0; i + (n - 1) * d < c; ++i) {
        key.clear();
        for (int64_t k = 0; k < n; ++k) key.push_back(static_cast<int64_t>(row[i + k * d]));
        auto it = map.find(key);
        if (it != map.end()) ++counts[it->second];
      }
    }
  }
}

absl::Status TfIdfVectorizerKernel(ir::KernelContext& ctx) {
  absl::StatusOr<ir::TfIdfParams> params = ir::ReadTfIdfParams(ctx.attrs());
  if (!params.ok()) return ctx.Error(params.status().message());
  const ir::TfIdfParams& p = *params;
  const TensorView& x = ctx.input(0);
  if (x.dtype != DType::kI32 && x.dtype != DType::kI64) {
    return ctx.Error(absl::StrCat("input 0 (X) has dtype ", DTypeName(x.dtype), "; expected i32 or i64"));
  }
  if (x.shape.size() != 1 && x.shape.size() != 2) {
    return ctx.Error(absl::StrCat("input 0 (X) has shape ", DimsString(x.shape), "; expected [C] or [N, C]"));
  }
  const int64_t rows = x.shape.size() == 2 ? x.shape[0] : 1;
  const int64_t c = x.shape.back();
  std::vector<int64_t> out_shape;
  if (x.shape.size() == 2) out_shape.push_back(rows);
  out_shape.push_back(p.output_size);
  if (absl::Status s = CheckPlannedOutput(ctx, 0, DType::kF32, out_shape); !s.ok()) return s;
  float* y = ctx.output(0).as<float>();
  const NgramMap map = BuildNgramMap(p);
  std::vector<int64_t> counts(static_cast<size_t>(p.output_size));
  for (int64_t r = 0; r < rows; ++r) {
    std::fill(counts.begin(), counts.end(), 0);
    if (x.dtype == DType::kI32) {
      CountRow(p, map, x.as<const int32_t>() + r * c, c, counts.data());
    } else {
      CountRow(p, map, x.as<const int64_t>() + r * c, c, counts.data());
    }
    float* out = y + r * p.output_size;
    for (int64_t j = 0; j < p.output_size; ++j) {
      const double w = p.weights.empty() ? 1.0 : p.weights[j];
      switch (p.mode) {
        case ir::TfIdfMode::kTF:
          out[j] = static_cast<float>(counts[j]);
          break;
        case ir::TfIdfMode::kIDF:
          out[j] = counts[j] > 0 ? static_cast<float>(w) : 0.0f;
          break;
        case ir::TfIdfMode::kTFIDF:
          out[j] = static_cast<float>(static_cast<double>(counts[j]) * w);
          break;
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status RegisterTextKernels(ir::OpRegistry& registry) {
  return registry.SetKernel("TfIdfVectorizer", ir::Backend::kCpu, &TfIdfVectorizerKernel);
}

}  // namespace grove::cpu
