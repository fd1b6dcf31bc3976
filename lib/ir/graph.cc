#include "lib/ir/graph.h"

#include <cmath>
#include <limits>
#include <string>

#include "absl/strings/str_cat.h"

namespace grove::ir {

void Attributes::Set(std::string name, AttrValue value) {
  for (auto& [have, v] : values_) {
    if (have == name) {
      v = std::move(value);
      return;
    }
  }
  values_.emplace_back(std::move(name), std::move(value));
}

const AttrValue* Attributes::Find(absl::string_view name) const {
  for (const auto& [have, v] : values_) {
    if (have == name) return &v;
  }
  return nullptr;
}

int64_t Attributes::GetInt(absl::string_view name, int64_t def) const {
  const AttrValue* v = Find(name);
  if (v == nullptr) return def;
  if (const auto* i = std::get_if<int64_t>(v)) return *i;
  if (const auto* f = std::get_if<double>(v)) {
    // Saturating, as a model's float may be anything (a cast out of range is UB).
    if (std::isnan(*f)) return def;
    if (*f >= 9.2233720368547758e18) return std::numeric_limits<int64_t>::max();
    if (*f <= -9.2233720368547758e18) return std::numeric_limits<int64_t>::min();
    return static_cast<int64_t>(*f);
  }
  return def;
}

double Attributes::GetFloat(absl::string_view name, double def) const {
  const AttrValue* v = Find(name);
  if (v == nullptr) return def;
  if (const auto* f = std::get_if<double>(v)) return *f;
  if (const auto* i = std::get_if<int64_t>(v)) return static_cast<double>(*i);
  return def;
}

std::string Attributes::GetString(absl::string_view name, std::string def) const {
  const AttrValue* v = Find(name);
  if (v == nullptr) return def;
  if (const auto* s = std::get_if<std::string>(v)) return *s;
  return def;
}

std::vector<int64_t> Attributes::GetInts(absl::string_view name, std::vector<int64_t> def) const {
  const AttrValue* v = Find(name);
  if (v == nullptr) return def;
  if (const auto* s = std::get_if<std::vector<int64_t>>(v)) return *s;
  return def;
}

std::vector<double> Attributes::GetFloats(absl::string_view name, std::vector<double> def) const {
  const AttrValue* v = Find(name);
  if (v == nullptr) return def;
  if (const auto* s = std::get_if<std::vector<double>>(v)) return *s;
  return def;
}

int Attributes::GetSubgraph(absl::string_view name) const {
  const AttrValue* v = Find(name);
  if (v == nullptr) return -1;
  if (const auto* s = std::get_if<SubgraphRef>(v)) return s->index;
  return -1;
}

std::string Node::Describe() const {
  if (name.empty()) return absl::StrCat("op ", index, " (", type, ") in subgraph ", subgraph);
  return absl::StrCat("op ", index, " (", type, " '", name, "') in subgraph ", subgraph);
}

std::vector<std::string> Graph::symbol_names() const {
  std::vector<std::string> names;
  names.reserve(symbols.size());
  for (const Symbol& s : symbols) names.push_back(s.name);
  return names;
}

namespace {

// Saturates at 2^127: past that a message need not be exact.
using Wide = unsigned __int128;
constexpr Wide kWideCap = Wide{1} << 127;

Wide SaturatingMul(Wide a, uint64_t b) {
  if (b != 0 && a > kWideCap / b) return kWideCap;
  return a * b;
}

std::string WideToString(Wide v) {
  if (v >= kWideCap) return "more than 2^127";
  std::string s;
  do {
    s.insert(s.begin(), static_cast<char>('0' + static_cast<int>(v % 10)));
    v /= 10;
  } while (v != 0);
  return s;
}

}  // namespace

absl::StatusOr<uint64_t> CheckedByteSize(DType dtype, absl::Span<const int64_t> dims,
                                         absl::string_view what) {
  const uint64_t element = DTypeSize(dtype);
  if (element == 0) return absl::InvalidArgumentError(absl::StrCat(what, ": unknown dtype"));
  // The product of the non-zero dims bounds every loop a kernel may run over
  // the shape (rows of an empty tensor included), so it is held to the limit
  // even when a zero dim makes the tensor empty.
  Wide nonzero = 1;
  bool empty = false;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] < 0) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": dim ", i, " is negative (", dims[i], ")"));
    }
    if (dims[i] == 0) {
      empty = true;
    } else {
      nonzero = SaturatingMul(nonzero, static_cast<uint64_t>(dims[i]));
    }
  }
  // Counted over the non-zero dims: the size the tensor would have with its
  // zero dims taken as 1.
  const Wide counted = SaturatingMul(nonzero, element);
  if (counted > kMaxTensorBytes) {
    const std::string size =
        absl::StrCat(WideToString(counted), " bytes (", WideToString(nonzero), " elements of ", element, " bytes",
                     empty ? ", counting the non-zero dims of an empty tensor" : "", ")");
    return absl::InvalidArgumentError(absl::StrCat(what, counted >= (Wide{1} << 63) ? ": size overflows: " : ": ",
                                                   size, " is larger than the 256 TiB limit"));
  }
  const Wide bytes = empty ? 0 : counted;
  return static_cast<uint64_t>(bytes);
}

}  // namespace grove::ir
