// Symbolic dimensions: one type for the shape functions, whether the dims are
// concrete (a plan for bound inputs) or symbolic (a model inspected without
// shapes). A SymDim is a polynomial with integer coefficients over the model's
// symbols (seq, 2*batch*seq, seq+1), or an unknown dim that equals only itself.
//
//   SymDim b = SymDim::Symbol(0), s = SymDim::Symbol(1);
//   SymDim n = b * s;            // batch*seq
//   n.is_const();                // false
//   (SymDim(3) * SymDim(4)).value();  // 12
#ifndef GROVE_LIB_IR_SYM_DIM_H_
#define GROVE_LIB_IR_SYM_DIM_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/types/span.h"

namespace grove::ir {

class SymDim {
 public:
  SymDim() = default;
  SymDim(int64_t value) : const_(value) {}  // NOLINT: constants convert implicitly
  static SymDim Symbol(int index);
  // A fresh unknown dim (data dependent); equal only to copies of itself.
  static SymDim Unknown();

  bool is_const() const { return !unknown_ && terms_.empty(); }
  bool is_unknown() const { return unknown_ != 0; }
  // The constant's value; 0 when !is_const().
  int64_t value() const { return is_const() ? const_ : 0; }
  // The symbol's index when the dim is exactly one symbol, else -1.
  int symbol_index() const {
    return (!unknown_ && terms_.size() == 1 && terms_[0].coeff == 1 && terms_[0].syms.size() == 1)
               ? terms_[0].syms[0]
               : -1;
  }

  friend SymDim operator+(const SymDim& a, const SymDim& b);
  friend SymDim operator-(const SymDim& a, const SymDim& b);
  friend SymDim operator*(const SymDim& a, const SymDim& b);
  // Exact division: when every coefficient divides by a constant `b`, or both
  // are constants (floor division). Otherwise an unknown dim.
  friend SymDim operator/(const SymDim& a, const SymDim& b);
  friend bool operator==(const SymDim& a, const SymDim& b);
  friend bool operator!=(const SymDim& a, const SymDim& b) { return !(a == b); }

  // "batch*seq+1" with `names` for the symbols ("s0" when out of range).
  std::string ToString(absl::Span<const std::string> names = {}) const;

 private:
  struct Term {
    int64_t coeff;
    std::vector<int> syms;  // sorted symbol indices (a monomial)
  };
  // The dim's terms, a constant's included (a constant's one term, or none for 0).
  std::vector<Term> AllTerms() const;
  // Sorts and merges terms_, drops zero terms, and moves a lone constant term
  // into const_.
  void Canonicalize();
  // A constant is const_ with no terms (made without allocating: most dims
  // are constants); any other known dim is its terms_, the constant term
  // among them, and const_ is 0.
  std::vector<Term> terms_;
  int64_t const_ = 0;
  uint64_t unknown_ = 0;  // non-zero: unknown dim with this id
};

using SymShape = std::vector<SymDim>;

bool IsConcrete(const SymShape& shape);
// Concrete dims; callers check IsConcrete first (symbolic dims give -1).
std::vector<int64_t> ToConcrete(const SymShape& shape);
SymShape FromConcrete(absl::Span<const int64_t> dims);
std::string ShapeToString(const SymShape& shape, absl::Span<const std::string> names = {});

}  // namespace grove::ir

#endif  // GROVE_LIB_IR_SYM_DIM_H_
