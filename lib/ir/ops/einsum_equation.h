// Einsum's equation, parsed once for the shape function and the CPU kernel
// so the two agree: every dim of every input gets a label, and the output is
// a list of labels. Letters are labels 0..51 in ASCII order ('A'..'Z' then
// 'a'..'z', the order numpy's implicit output sorts them in); the dims an
// ellipsis covers get labels 52.. aligned to the right, as numpy broadcasts
// them.
//
//   EinsumTerms t = ParseEinsum("bij,bjk->bik", {3, 3}).value();
//   // t.inputs == {{27, 34, 35}, {27, 35, 36}}, t.output == {27, 34, 36}
#ifndef GROVE_LIB_IR_OPS_EINSUM_EQUATION_H_
#define GROVE_LIB_IR_OPS_EINSUM_EQUATION_H_

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace grove::ir {

inline constexpr int kEinsumLetterLabels = 52;

struct EinsumTerms {
  std::vector<std::vector<int>> inputs;  // one label per dim of each input
  std::vector<int> output;
  int ellipsis_rank = 0;  // dims the ellipsis stands for (the most any input gives it)
  int num_labels() const { return kEinsumLetterLabels + ellipsis_rank; }
};

namespace einsum_internal {

inline int LetterLabel(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return 26 + (c - 'a');
  return -1;
}

// One term: its letters' labels, and where the ellipsis sits among them
// (-1 when it has none).
struct Term {
  std::vector<int> letters;
  int ellipsis_at = -1;
};

inline absl::StatusOr<Term> ParseTerm(absl::string_view text, absl::string_view what) {
  Term term;
  for (size_t i = 0; i < text.size();) {
    const char c = text[i];
    if (c == '.') {
      if (text.substr(i, 3) != "...") {
        return absl::InvalidArgumentError(absl::StrCat(what, " '", text, "' has a '.' that is not part of '...'"));
      }
      if (term.ellipsis_at >= 0) {
        return absl::InvalidArgumentError(absl::StrCat(what, " '", text, "' has more than one '...'"));
      }
      term.ellipsis_at = static_cast<int>(term.letters.size());
      i += 3;
      continue;
    }
    const int label = LetterLabel(c);
    if (label < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, " '", text, "' has the character '", std::string(1, c), "'; expected letters and '...'"));
    }
    term.letters.push_back(label);
    ++i;
  }
  return term;
}

}  // namespace einsum_internal

// Parses `equation` for inputs of `ranks`. Errors (no node prefix) for a
// malformed equation, a term count other than the input count, a term whose
// letters do not match its input's rank, and an explicit output that repeats
// a letter, names one no input has, or drops the ellipsis's dims.
inline absl::StatusOr<EinsumTerms> ParseEinsum(absl::string_view equation, absl::Span<const int> ranks) {
  using einsum_internal::Term;
  std::string eq;
  for (char c : equation) {
    if (c != ' ' && c != '\t' && c != '\n') eq.push_back(c);
  }
  absl::string_view lhs = eq, rhs;
  const size_t arrow = eq.find("->");
  const bool explicit_output = arrow != std::string::npos;
  if (explicit_output) {
    lhs = absl::string_view(eq).substr(0, arrow);
    rhs = absl::string_view(eq).substr(arrow + 2);
    if (rhs.find("->") != absl::string_view::npos || rhs.find('-') != absl::string_view::npos ||
        rhs.find('>') != absl::string_view::npos) {
      return absl::InvalidArgumentError(absl::StrCat("equation '", equation, "' has more than one '->'"));
    }
    if (rhs.find(',') != absl::string_view::npos) {
      return absl::InvalidArgumentError(absl::StrCat("equation '", equation, "' has a ',' in its output"));
    }
  }
  const std::vector<absl::string_view> texts = absl::StrSplit(lhs, ',');
  if (texts.size() != ranks.size()) {
    return absl::InvalidArgumentError(absl::StrCat("equation '", equation, "' has ", texts.size(),
                                                   " input terms but the node has ", ranks.size(), " inputs"));
  }
  EinsumTerms out;
  std::vector<Term> terms;
  std::vector<int> ellipsis_dims(texts.size(), 0);
  for (size_t i = 0; i < texts.size(); ++i) {
    const std::string what = absl::StrCat("term ", i, " of equation '", equation, "'");
    absl::StatusOr<Term> t = einsum_internal::ParseTerm(texts[i], what);
    if (!t.ok()) return t.status();
    const int letters = static_cast<int>(t->letters.size());
    if (t->ellipsis_at < 0 ? letters != ranks[i] : letters > ranks[i]) {
      return absl::InvalidArgumentError(absl::StrCat(what, " names ", letters, " dims",
                                                     t->ellipsis_at < 0 ? "" : " besides '...'", " but input ", i,
                                                     " has rank ", ranks[i]));
    }
    ellipsis_dims[i] = t->ellipsis_at < 0 ? 0 : ranks[i] - letters;
    out.ellipsis_rank = std::max(out.ellipsis_rank, ellipsis_dims[i]);
    terms.push_back(*std::move(t));
  }
  std::vector<int> uses(kEinsumLetterLabels, 0);
  bool any_ellipsis = false;
  for (size_t i = 0; i < terms.size(); ++i) {
    const Term& t = terms[i];
    std::vector<int> labels;
    for (int j = 0; j <= static_cast<int>(t.letters.size()); ++j) {
      if (j == t.ellipsis_at) {
        any_ellipsis = true;
        for (int e = out.ellipsis_rank - ellipsis_dims[i]; e < out.ellipsis_rank; ++e) {
          labels.push_back(kEinsumLetterLabels + e);
        }
      }
      if (j < static_cast<int>(t.letters.size())) {
        labels.push_back(t.letters[j]);
        ++uses[t.letters[j]];
      }
    }
    out.inputs.push_back(std::move(labels));
  }
  if (!explicit_output) {
    for (int e = 0; e < out.ellipsis_rank; ++e) out.output.push_back(kEinsumLetterLabels + e);
    for (int l = 0; l < kEinsumLetterLabels; ++l) {
      if (uses[l] == 1) out.output.push_back(l);
    }
    return out;
  }
  absl::StatusOr<Term> o = einsum_internal::ParseTerm(rhs, absl::StrCat("the output of equation '", equation, "'"));
  if (!o.ok()) return o.status();
  std::vector<bool> seen(kEinsumLetterLabels, false);
  for (int l : o->letters) {
    if (uses[l] == 0) {
      return absl::InvalidArgumentError(absl::StrCat("the output of equation '", equation,
                                                     "' names a letter that no input term has"));
    }
    if (seen[l]) {
      return absl::InvalidArgumentError(
          absl::StrCat("the output of equation '", equation, "' names a letter more than once"));
    }
    seen[l] = true;
  }
  if (o->ellipsis_at < 0 && any_ellipsis && out.ellipsis_rank > 0) {
    return absl::InvalidArgumentError(absl::StrCat("equation '", equation,
                                                   "': the inputs' '...' covers dims but the output has no '...'"));
  }
  for (int j = 0; j <= static_cast<int>(o->letters.size()); ++j) {
    if (j == o->ellipsis_at) {
      for (int e = 0; e < out.ellipsis_rank; ++e) out.output.push_back(kEinsumLetterLabels + e);
    }
    if (j < static_cast<int>(o->letters.size())) out.output.push_back(o->letters[j]);
  }
  return out;
}

// The size of each label for inputs of concrete `shapes`: a letter's dims
// must agree; an ellipsis dim broadcasts (1 against n). -1 for labels no
// input uses. Error (no node prefix) on a mismatch.
inline absl::StatusOr<std::vector<int64_t>> EinsumLabelSizes(const EinsumTerms& terms,
                                                             absl::Span<const std::vector<int64_t>> shapes) {
  std::vector<int64_t> size(static_cast<size_t>(terms.num_labels()), -1);
  for (size_t i = 0; i < terms.inputs.size(); ++i) {
    for (size_t d = 0; d < terms.inputs[i].size(); ++d) {
      const int l = terms.inputs[i][d];
      const int64_t n = shapes[i][d];
      int64_t& s = size[l];
      if (s < 0 || (l >= kEinsumLetterLabels && s == 1)) {
        s = n;
      } else if (n != s && !(l >= kEinsumLetterLabels && n == 1)) {
        return absl::InvalidArgumentError(absl::StrCat("dim ", d, " of input ", i, " is ", n,
                                                       " but the same subscript elsewhere has size ", s));
      }
    }
  }
  return size;
}

}  // namespace grove::ir

#endif  // GROVE_LIB_IR_OPS_EINSUM_EQUATION_H_
