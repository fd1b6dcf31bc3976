#include "lib/ir/graph.h"

#include <limits>

#include "absl/strings/str_cat.h"

namespace grove::ir {

const AttrValue* Attributes::Find(absl::string_view name) const {
  auto it = values_.find(name);
  return it == values_.end() ? nullptr : &it->second;
}

int64_t Attributes::GetInt(absl::string_view name, int64_t def) const {
  const AttrValue* v = Find(name);
  if (v == nullptr) return def;
  if (const auto* i = std::get_if<int64_t>(v)) return *i;
  if (const auto* f = std::get_if<double>(v)) return static_cast<int64_t>(*f);
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

absl::StatusOr<uint64_t> CheckedByteSize(DType dtype, absl::Span<const int64_t> dims,
                                         absl::string_view what) {
  uint64_t n = DTypeSize(dtype);
  if (n == 0) return absl::InvalidArgumentError(absl::StrCat(what, ": unknown dtype"));
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] < 0) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": dim ", i, " is negative (", dims[i], ")"));
    }
    const uint64_t d = static_cast<uint64_t>(dims[i]);
    if (d != 0 && n > std::numeric_limits<uint64_t>::max() / 2 / d) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": size overflows at dim ", i));
    }
    n *= d;
  }
  // Keep sizes well inside int64 and size_t.
  if (n > (uint64_t{1} << 48)) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": ", n, " bytes is larger than the 256 TiB limit"));
  }
  return n;
}

}  // namespace grove::ir
