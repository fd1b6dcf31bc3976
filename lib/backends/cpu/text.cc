// CPU kernels of the text group: StringNormalizer (below), and
// TfIdfVectorizer over i32/i64 or string tokens, with the semantics of the
// ONNX reference (opset 9). Every n-gram of length n in
// [min_gram_length, max_gram_length] at positions i, i + d, ..., i + (n-1)d
// for skip distances d = 1..max_skip_count + 1 (unigrams once, d = 1) is
// looked up in the pool; a hit adds one to the count of its output
// coordinate. IDF truncates counts to 1 and TFIDF keeps them; both scale by
// weights[coordinate] when weights are given.
#include <locale.h>
#include <wctype.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "absl/base/const_init.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "lib/backends/common/layout_params.h"
#include "lib/backends/cpu/cpu_kernels.h"
#include "lib/ir/ops/layout_params.h"
#include "lib/ir/ops/tfidf_params.h"
#include "lib/ir/utf8.h"

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
  if (p.string_pool ? x.dtype != DType::kString : x.dtype != DType::kI32 && x.dtype != DType::kI64) {
    return ctx.Error(absl::StrCat("input 0 (X) has dtype ", DTypeName(x.dtype), "; expected ",
                                  p.string_pool ? "string (the pool is pool_strings)" : "i32 or i64"));
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
  std::vector<int64_t> token_ids(x.dtype == DType::kString ? static_cast<size_t>(c) : 0);
  for (int64_t r = 0; r < rows; ++r) {
    std::fill(counts.begin(), counts.end(), 0);
    if (x.dtype == DType::kString) {
      // Tokens become their ids in the pool's vocabulary; -1 matches nothing.
      for (int64_t k = 0; k < c; ++k) {
        auto it = p.vocabulary.find(x.as<const StringRef>()[r * c + k].view());
        token_ids[k] = it == p.vocabulary.end() ? -1 : it->second;
      }
      CountRow(p, map, token_ids.data(), c, counts.data());
    } else if (x.dtype == DType::kI32) {
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

// ---------------------------------------------------------------------------
// StringNormalizer: stopwords removed (compared case-folded unless
// is_case_sensitive), then the rest lowered or uppered, code point by code
// point with the C library's mapping for `locale` (its UTF-8 variant; C.UTF-8
// when that locale is not installed).
// ---------------------------------------------------------------------------

// A UTF-8 LC_CTYPE locale for `name` ("en_US", "tr_TR.UTF-8"...), made once
// per name and kept for the process; nullptr when none exists at all.
locale_t CaseLocale(const std::string& name) {
  static absl::Mutex mu(absl::kConstInit);
  static auto* const cache = new absl::flat_hash_map<std::string, locale_t>();
  absl::MutexLock lock(&mu);
  auto it = cache->find(name);
  if (it != cache->end()) return it->second;
  locale_t loc = nullptr;
  // A name from the model: only plain locale names are tried.
  const bool plain = name.size() < 64 && std::all_of(name.begin(), name.end(), [](char c) {
    return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.' || c == '@';
  });
  if (plain && !name.empty()) {
    std::string base = name.substr(0, name.find('.'));
    std::replace(base.begin(), base.end(), '-', '_');
    for (const std::string& candidate : {absl::StrCat(base, ".UTF-8"), absl::StrCat(base, ".utf8")}) {
      loc = newlocale(LC_CTYPE_MASK, candidate.c_str(), static_cast<locale_t>(0));
      if (loc != nullptr) break;
    }
  }
  if (loc == nullptr) loc = newlocale(LC_CTYPE_MASK, "C.UTF-8", static_cast<locale_t>(0));
  (*cache)[name] = loc;
  return loc;
}

enum class CaseChange { kNone, kLower, kUpper };

// `s` with every code point mapped; InvalidArgument on bad UTF-8.
absl::StatusOr<std::string> ChangeCase(const ir::KernelContext& ctx, absl::string_view s, CaseChange change,
                                       locale_t loc, int64_t element, std::vector<char32_t>& scratch) {
  scratch.clear();
  size_t bad = 0;
  if (!ir::DecodeUtf8(s, &scratch, &bad)) {
    return ctx.Error(absl::StrCat("element ", element, " is not valid UTF-8 (at byte ", bad, ")"));
  }
  std::string out;
  out.reserve(s.size());
  for (char32_t c : scratch) {
    uint32_t m = c;
    if (c < 0x80 || loc == nullptr) {
      // ASCII needs no locale (and stays ASCII: no Turkish dotless i).
      if (change == CaseChange::kLower && c >= 'A' && c <= 'Z') m = c + 32;
      if (change == CaseChange::kUpper && c >= 'a' && c <= 'z') m = c - 32;
    } else {
      const wint_t w = change == CaseChange::kLower ? towlower_l(static_cast<wint_t>(c), loc)
                                                    : towupper_l(static_cast<wint_t>(c), loc);
      if (ir::IsScalarValue(static_cast<uint32_t>(w))) m = static_cast<uint32_t>(w);
    }
    ir::AppendUtf8(static_cast<char32_t>(m), &out);
  }
  return out;
}

absl::Status StringNormalizerKernel(ir::KernelContext& ctx) {
  const TensorView& x = ctx.input(0);
  if (x.dtype != DType::kString) {
    return ctx.Error(absl::StrCat("input 0 (X) has dtype ", DTypeName(x.dtype), "; expected string"));
  }
  const bool two_dim = x.shape.size() == 2;
  if (!(x.shape.size() == 1 || (two_dim && x.shape[0] == 1))) {
    return ctx.Error(absl::StrCat("input 0 (X) has shape ", DimsString(x.shape), "; expected [C] or [1, C]"));
  }
  const std::string action = ctx.attrs().GetString("case_change_action", "NONE");
  if (action != "NONE" && action != "LOWER" && action != "UPPER") {
    return ctx.Error(absl::StrCat("attribute case_change_action is '", action, "'; expected NONE, LOWER or UPPER"));
  }
  const CaseChange change = action == "LOWER" ? CaseChange::kLower
                            : action == "UPPER" ? CaseChange::kUpper
                                                : CaseChange::kNone;
  const bool case_sensitive = ctx.attrs().GetInt("is_case_sensitive", 0) != 0;
  const locale_t loc = CaseLocale(ctx.attrs().GetString("locale", "en_US"));
  std::vector<char32_t> scratch;
  const auto* strings = ctx.attrs().Find("stopwords");
  absl::flat_hash_set<std::string> stopwords;
  if (strings != nullptr) {
    int64_t k = 0;
    for (const std::string& w : std::get<std::vector<std::string>>(*strings)) {
      if (case_sensitive) {
        stopwords.insert(w);
      } else {
        absl::StatusOr<std::string> folded = ChangeCase(ctx, w, CaseChange::kLower, loc, k, scratch);
        if (!folded.ok()) return ctx.Error(absl::StrCat("stopword ", k, " is not valid UTF-8"));
        stopwords.insert(*std::move(folded));
      }
      ++k;
    }
  }
  const int64_t n = x.num_elements();
  const StringRef* in = x.as<const StringRef>();
  std::vector<StringRef> kept;
  kept.reserve(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const absl::string_view s = in[i].view();
    if (!stopwords.empty()) {
      std::string key(s);
      if (!case_sensitive) {
        absl::StatusOr<std::string> folded = ChangeCase(ctx, s, CaseChange::kLower, loc, i, scratch);
        if (!folded.ok()) return folded.status();
        key = *std::move(folded);
      }
      if (stopwords.contains(key)) continue;
    }
    if (change == CaseChange::kNone) {
      // Unchanged text: its bytes live as long as the run's input does.
      kept.push_back(in[i]);
      continue;
    }
    absl::StatusOr<std::string> changed = ChangeCase(ctx, s, change, loc, i, scratch);
    if (!changed.ok()) return changed.status();
    absl::StatusOr<StringRef> stored = ctx.StoreString(*changed);
    if (!stored.ok()) return stored.status();
    kept.push_back(*stored);
  }
  // Everything removed: ONNX gives one empty string.
  if (kept.empty()) kept.emplace_back();
  const int64_t m = static_cast<int64_t>(kept.size());
  absl::StatusOr<TensorView*> y =
      ctx.AllocateOutput(0, DType::kString, two_dim ? std::vector<int64_t>{1, m} : std::vector<int64_t>{m});
  if (!y.ok()) return y.status();
  std::copy(kept.begin(), kept.end(), (*y)->as<StringRef>());
  return absl::OkStatus();
}

}  // namespace

absl::Status RegisterTextKernels(ir::OpRegistry& registry) {
  if (absl::Status s = registry.SetKernel("StringNormalizer", ir::Backend::kCpu, &StringNormalizerKernel); !s.ok()) {
    return s;
  }
  return registry.SetKernel("TfIdfVectorizer", ir::Backend::kCpu, &TfIdfVectorizerKernel);
}

}  // namespace grove::cpu
