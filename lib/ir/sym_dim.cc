// Symbolic dims as canonical polynomials (sorted monomials, no zero terms;
// a constant held apart, without terms).
#include "lib/ir/sym_dim.h"

#include <algorithm>
#include <atomic>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace grove::ir {
namespace {
std::atomic<uint64_t> next_unknown{1};

// Coefficients saturate instead of wrapping: a model's dims may be anything
// up to int64, and a saturated dim is refused by the size check every
// shape goes through (CheckedByteSize) rather than wrapping to a small one.
int64_t SaturatingAdd(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) return a < 0 ? INT64_MIN : INT64_MAX;
  return r;
}

int64_t SaturatingMul(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) return (a < 0) != (b < 0) ? INT64_MIN : INT64_MAX;
  return r;
}

int64_t SaturatingNeg(int64_t a) { return a == INT64_MIN ? INT64_MAX : -a; }
}  // namespace

SymDim SymDim::Symbol(int index) {
  SymDim d;
  d.terms_.push_back({1, {index}});
  return d;
}

SymDim SymDim::Unknown() {
  SymDim d;
  d.unknown_ = next_unknown.fetch_add(1, std::memory_order_relaxed);
  return d;
}

std::vector<SymDim::Term> SymDim::AllTerms() const {
  if (!terms_.empty()) return terms_;
  if (const_ != 0) return {Term{const_, {}}};
  return {};
}

void SymDim::Canonicalize() {
  std::sort(terms_.begin(), terms_.end(),
            [](const Term& a, const Term& b) { return a.syms < b.syms; });
  std::vector<Term> merged;
  for (Term& t : terms_) {
    if (!merged.empty() && merged.back().syms == t.syms) {
      merged.back().coeff = SaturatingAdd(merged.back().coeff, t.coeff);
    } else {
      merged.push_back(std::move(t));
    }
  }
  merged.erase(std::remove_if(merged.begin(), merged.end(), [](const Term& t) { return t.coeff == 0; }),
               merged.end());
  const_ = 0;
  if (merged.size() == 1 && merged[0].syms.empty()) {
    const_ = merged[0].coeff;
    merged.clear();
  }
  terms_ = std::move(merged);
}

SymDim operator+(const SymDim& a, const SymDim& b) {
  if (a.is_unknown() || b.is_unknown()) return SymDim::Unknown();
  if (a.is_const() && b.is_const()) return SymDim(SaturatingAdd(a.const_, b.const_));
  SymDim r;
  r.terms_ = a.AllTerms();
  for (SymDim::Term& t : b.AllTerms()) r.terms_.push_back(std::move(t));
  r.Canonicalize();
  return r;
}

SymDim operator-(const SymDim& a, const SymDim& b) {
  if (a.is_unknown() || b.is_unknown()) return SymDim::Unknown();
  if (a.is_const() && b.is_const()) return SymDim(SaturatingAdd(a.const_, SaturatingNeg(b.const_)));
  SymDim r;
  r.terms_ = a.AllTerms();
  for (SymDim::Term& t : b.AllTerms()) {
    t.coeff = SaturatingNeg(t.coeff);
    r.terms_.push_back(std::move(t));
  }
  r.Canonicalize();
  return r;
}

SymDim operator*(const SymDim& a, const SymDim& b) {
  if (a.is_unknown() || b.is_unknown()) {
    if ((a.is_const() && a.value() == 0) || (b.is_const() && b.value() == 0)) return SymDim(0);
    return SymDim::Unknown();
  }
  if (a.is_const() && b.is_const()) return SymDim(SaturatingMul(a.const_, b.const_));
  SymDim r;
  const std::vector<SymDim::Term> at = a.AllTerms(), bt = b.AllTerms();
  for (const SymDim::Term& x : at) {
    for (const SymDim::Term& y : bt) {
      SymDim::Term t{SaturatingMul(x.coeff, y.coeff), x.syms};
      t.syms.insert(t.syms.end(), y.syms.begin(), y.syms.end());
      std::sort(t.syms.begin(), t.syms.end());
      r.terms_.push_back(std::move(t));
    }
  }
  r.Canonicalize();
  return r;
}

SymDim operator/(const SymDim& a, const SymDim& b) {
  if (a.is_unknown() || b.is_unknown()) return SymDim::Unknown();
  if (!b.is_const() || b.value() == 0) {
    if (a == b) return SymDim(1);
    // a / b where b is a single monomial dividing every term of a.
    if (b.terms_.size() == 1 && !b.terms_[0].syms.empty()) {
      const SymDim::Term& d = b.terms_[0];
      SymDim r;
      for (const SymDim::Term& t : a.AllTerms()) {
        if ((d.coeff == -1 && t.coeff == INT64_MIN) || t.coeff % d.coeff != 0) return SymDim::Unknown();
        std::vector<int> rest = t.syms;
        for (int s : d.syms) {
          auto it = std::find(rest.begin(), rest.end(), s);
          if (it == rest.end()) return SymDim::Unknown();
          rest.erase(it);
        }
        r.terms_.push_back({t.coeff / d.coeff, std::move(rest)});
      }
      r.Canonicalize();
      return r;
    }
    return SymDim::Unknown();
  }
  const int64_t d = b.value();
  if (d == -1) return SymDim(0) - a;  // INT64_MIN / -1 saturates
  if (a.is_const()) {
    int64_t q = a.value() / d;
    if ((a.value() % d != 0) && ((a.value() < 0) != (d < 0))) --q;
    return SymDim(q);
  }
  SymDim r;
  for (const SymDim::Term& t : a.terms_) {
    if (t.coeff % d != 0) return SymDim::Unknown();
    r.terms_.push_back({t.coeff / d, t.syms});
  }
  r.Canonicalize();
  return r;
}

bool operator==(const SymDim& a, const SymDim& b) {
  if (a.unknown_ != b.unknown_) return false;
  if (a.unknown_ != 0) return true;
  if (a.const_ != b.const_ || a.terms_.size() != b.terms_.size()) return false;
  for (size_t i = 0; i < a.terms_.size(); ++i) {
    if (a.terms_[i].coeff != b.terms_[i].coeff || a.terms_[i].syms != b.terms_[i].syms) return false;
  }
  return true;
}

std::string SymDim::ToString(absl::Span<const std::string> names) const {
  if (unknown_ != 0) return "?";
  if (terms_.empty()) return absl::StrCat(const_);
  std::string out;
  for (size_t i = 0; i < terms_.size(); ++i) {
    const Term& t = terms_[i];
    std::vector<std::string> parts;
    int64_t c = t.coeff;
    if (i > 0) {
      absl::StrAppend(&out, c < 0 ? "-" : "+");
      c = c < 0 ? -c : c;
    } else if (c < 0 && !t.syms.empty()) {
      absl::StrAppend(&out, "-");
      c = -c;
    }
    if (c != 1 || t.syms.empty()) parts.push_back(absl::StrCat(c));
    for (int s : t.syms) {
      parts.push_back(s >= 0 && static_cast<size_t>(s) < names.size() ? names[s] : absl::StrCat("s", s));
    }
    absl::StrAppend(&out, absl::StrJoin(parts, "*"));
  }
  return out;
}

bool IsConcrete(const SymShape& shape) {
  return std::all_of(shape.begin(), shape.end(), [](const SymDim& d) { return d.is_const(); });
}

std::vector<int64_t> ToConcrete(const SymShape& shape) {
  std::vector<int64_t> out;
  out.reserve(shape.size());
  for (const SymDim& d : shape) out.push_back(d.is_const() ? d.value() : -1);
  return out;
}

SymShape FromConcrete(absl::Span<const int64_t> dims) {
  return SymShape(dims.begin(), dims.end());
}

std::string ShapeToString(const SymShape& shape, absl::Span<const std::string> names) {
  std::vector<std::string> parts;
  for (const SymDim& d : shape) parts.push_back(d.ToString(names));
  return absl::StrCat("[", absl::StrJoin(parts, ", "), "]");
}

}  // namespace grove::ir
