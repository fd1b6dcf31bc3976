#include "lib/runtime/binding.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "lib/ir/value_type.h"

namespace grove::runtime {

std::string DescribeDeclared(const ir::TensorDecl& d, const ir::Graph& g) {
  if (ir::IsBoxed(d.dtype) && !d.has_shape) return std::string(DTypeName(d.dtype));
  return absl::StrCat(DTypeName(d.dtype), ir::ShapeToString(d.shape, g.symbol_names()));
}

// "the model takes 2 inputs (x, y), given 1".
absl::Status InputCountError(const ir::Graph& g, size_t given) {
  const ir::Subgraph& main = g.subgraphs[0];
  std::vector<std::string> names;
  for (int t : main.inputs) names.push_back(g.tensors[t].name);
  return absl::InvalidArgumentError(absl::StrCat("the model takes ", main.inputs.size(), " inputs (",
                                                 absl::StrJoin(names, ", "), "), given ", given));
}

absl::Status ValidateMainInput(const ir::Graph& g, size_t i, const TensorView& in, bool need_data) {
  const ir::TensorDecl& d = g.tensors[g.subgraphs[0].inputs[i]];
  // Named only in an error: formatting the declared shape on every run cost
  // ~1 us a run (a tenth of a small model's).
  auto who = [&] { return absl::StrCat("input '", d.name, "' (", DescribeDeclared(d, g), ")"); };
  if (in.dtype != d.dtype) {
    return absl::InvalidArgumentError(absl::StrCat(who(), ": given dtype ", DTypeName(in.dtype)));
  }
  if (ir::IsBoxed(d.dtype)) {
    if (need_data && in.data == nullptr) return absl::InvalidArgumentError(absl::StrCat(who(), ": value is null"));
    return absl::OkStatus();  // RunValues checked its tensors
  }
  if (in.shape.size() != d.shape.size()) {
    return absl::InvalidArgumentError(absl::StrCat(who(), ": given rank ", in.shape.size(), ", wants rank ",
                                                   d.shape.size()));
  }
  for (size_t k = 0; k < d.shape.size(); ++k) {
    const int64_t got = in.shape[k];
    const ir::SymDim& want = d.shape[k];
    if (got < 0) return absl::InvalidArgumentError(absl::StrCat(who(), ": dim ", k, " is negative (", got, ")"));
    if (want.is_const()) {
      if (got != want.value()) {
        return absl::InvalidArgumentError(absl::StrCat(who(), ": dim ", k, " is ", got, ", wants ", want.value()));
      }
      continue;
    }
    const int s = want.symbol_index();
    if (s < 0) return absl::InternalError(absl::StrCat(who(), ": dim ", k, " is not a symbol"));
    const ir::Symbol& sym = g.symbols[s];
    if (got < sym.min || got > sym.max) {
      return absl::InvalidArgumentError(absl::StrCat(who(), ": dim ", k, " (", sym.name, ") is ", got, ", outside ",
                                                     sym.name, "'s range ", sym.min, "..", sym.max));
    }
  }
  absl::StatusOr<uint64_t> bytes = ir::CheckedByteSize(in.dtype, in.shape, "");
  if (!bytes.ok()) return ir::CheckedByteSize(in.dtype, in.shape, who()).status();
  if (need_data && *bytes > 0 && in.data == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(who(), ": data is null"));
  }
  return absl::OkStatus();
}

absl::Status ValidateMainInputs(const ir::Graph& g, absl::Span<const TensorView> inputs, bool need_data) {
  const ir::Subgraph& main = g.subgraphs[0];
  if (inputs.size() != main.inputs.size()) return InputCountError(g, inputs.size());
  // Each input alone, then the symbols two inputs share must agree.
  std::vector<int64_t> bound(g.symbols.size(), -1);
  std::vector<int> bound_by(g.symbols.size(), -1);
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (absl::Status s = ValidateMainInput(g, i, inputs[i], need_data); !s.ok()) return s;
    const ir::TensorDecl& d = g.tensors[main.inputs[i]];
    if (ir::IsBoxed(d.dtype)) continue;
    for (size_t k = 0; k < d.shape.size(); ++k) {
      if (d.shape[k].is_const()) continue;
      const int s = d.shape[k].symbol_index();
      const int64_t got = inputs[i].shape[k];
      if (bound[s] >= 0 && bound[s] != got) {
        const ir::Symbol& sym = g.symbols[s];
        return absl::InvalidArgumentError(absl::StrCat(
            "input '", d.name, "' (", DescribeDeclared(d, g), "): dim ", k, " (", sym.name, ") is ", got,
            " but input '", g.tensors[main.inputs[bound_by[s]]].name, "' gives ", sym.name, " = ", bound[s]));
      }
      bound[s] = got;
      bound_by[s] = static_cast<int>(i);
    }
  }
  return absl::OkStatus();
}

// Run, RunInto and Reshape speak tensors only.
absl::Status TensorsOnly(const ir::Graph& g, absl::Span<const TensorView> outputs) {
  for (int t : g.subgraphs[0].inputs) {
    if (ir::IsBoxed(g.tensors[t].dtype)) {
      return absl::FailedPreconditionError(absl::StrCat("input '", g.tensors[t].name, "' is a ",
                                                        DTypeName(g.tensors[t].dtype), "; use Session::RunValues"));
    }
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (ir::IsBoxed(outputs[i].dtype)) {
      return absl::FailedPreconditionError(absl::StrCat("output '", g.tensors[g.subgraphs[0].outputs[i]].name,
                                                        "' is a ", DTypeName(outputs[i].dtype),
                                                        "; use Session::RunValues"));
    }
  }
  return absl::OkStatus();
}

// A caller's Value as the view a plan takes, after checking it against the
// declared input.
absl::StatusOr<TensorView> ViewOfValue(const Value& value, const ir::TensorDecl& d, const ir::Graph& g) {
  const std::string who = absl::StrCat("input '", d.name, "' (", DescribeDeclared(d, g), ")");
  if (!ir::IsBoxed(d.dtype)) {
    if (value.kind() != ValueKind::kTensor) {
      return absl::InvalidArgumentError(absl::StrCat(who, ": given ", value.DebugString()));
    }
    return value.tensor().view();
  }
  if (value.kind() != ir::KindOf(d.dtype)) {
    return absl::InvalidArgumentError(absl::StrCat(who, ": given ", value.DebugString()));
  }
  if (value.dtype() != ir::ElemDType(d.dtype)) {
    return absl::InvalidArgumentError(absl::StrCat(who, ": given ", value.DebugString()));
  }
  std::vector<const Tensor*> tensors;
  if (value.has_value()) {
    if (value.is_sequence()) {
      for (const Tensor& t : value.items()) tensors.push_back(&t);
    } else {
      tensors.push_back(&value.tensor());
    }
  }
  for (size_t k = 0; k < tensors.size(); ++k) {
    const Tensor& t = *tensors[k];
    const std::string item = value.is_sequence() ? absl::StrCat(": item ", k) : std::string(": its tensor");
    if (t.dtype() != value.dtype()) {
      return absl::InvalidArgumentError(absl::StrCat(who, item, " is ", DTypeName(t.dtype())));
    }
    if (t.view().byte_size() > 0 && t.data() == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(who, item, " has no data"));
    }
    if (!d.has_shape) continue;
    bool fits = t.shape().size() == d.shape.size();
    for (size_t j = 0; fits && j < d.shape.size(); ++j) {
      fits = !d.shape[j].is_const() || d.shape[j].value() == t.shape()[j];
    }
    if (!fits) {
      return absl::InvalidArgumentError(
          absl::StrCat(who, item, " has shape ", ir::ShapeToString(ir::FromConcrete(t.shape()))));
    }
  }
  return TensorView(d.dtype, {}, static_cast<const void*>(&value));
}

absl::StatusOr<absl::Span<const TensorView>> StringInputs::Intern(const ir::Graph& g, absl::Span<const TensorView> inputs,
                                                                 ir::StringArena& arena,
                                                                 const std::function<bool(const void*)>& on_device) {
  bool any = false;
  for (const TensorView& in : inputs) any |= in.dtype == DType::kString;
  if (!any) return inputs;
  inputs_.assign(inputs.begin(), inputs.end());
  refs_.resize(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    TensorView& in = inputs_[i];
    if (in.dtype != DType::kString) continue;
    const std::string who = absl::StrCat("input '", g.tensors[g.subgraphs[0].inputs[i]].name, "'");
    if (on_device(in.data)) {
      return absl::InvalidArgumentError(
          absl::StrCat(who, ": a string tensor must be in host memory (its bytes are host memory)"));
    }
    const int64_t n = in.num_elements();
    const StringRef* given = in.as<const StringRef>();
    std::vector<StringRef>& refs = refs_[i];
    refs.resize(static_cast<size_t>(n));
    for (int64_t k = 0; k < n; ++k) {
      if (given[k].size > 0 && given[k].data == nullptr) {
        return absl::InvalidArgumentError(
            absl::StrCat(who, ": element ", k, " has ", given[k].size, " bytes but no data"));
      }
      absl::StatusOr<StringRef> copy = arena.Store(given[k].view());
      if (!copy.ok()) return copy.status();
      refs[k] = *copy;
    }
    in.data = refs.data();
  }
  return absl::Span<const TensorView>(inputs_);
}

}  // namespace grove::runtime
