// ONNX → .grove. One pass over the graph in ONNX's (topological) order:
// values known at import time (initializers, Constant nodes, and nodes whose
// inputs are all such values) are kept aside and written as weights only when
// an op or a graph output still reads them; every other node becomes a grove
// op of the same name. Nested graphs become grove subgraphs; since grove names
// values model-wide, a body's local names that collide with a name already
// taken are renamed.
#include "tools/onnx/onnx_importer.h"

#include <algorithm>
#include <exception>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>
#include <optional>
#include <sstream>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "lib/format/file_layout.h"
#include "lib/format/regular_file.h"
#include "lib/ir/ops/layout_params.h"
#include "lib/ir/ops/ops.h"
#include "tools/onnx/onnx_tensor.h"
#include "tools/onnx/opset_upgrade.h"

namespace grove::onnx_import {
namespace {

using ::onnx::AttributeProto;
using ::onnx::GraphProto;
using ::onnx::ModelProto;
using ::onnx::NodeProto;
using ::onnx::TensorProto;
using ::onnx::TypeProto;
using ::onnx::ValueInfoProto;

using Attribute = std::pair<std::string, AttrValue>;

// Ops whose result changes from run to run: folding them would freeze one
// sample into the model.
constexpr absl::string_view kNondeterministicOps[] = {"RandomNormal",      "RandomNormalLike", "RandomUniform",
                                                      "RandomUniformLike", "Bernoulli",        "Multinomial"};

// Ops whose axis meant "flatten to 2-D here" before opset 13.
constexpr absl::string_view kCoercingOps[] = {"Softmax", "LogSoftmax", "Hardmax"};

// Integer attributes that hold an ONNX TensorProto dtype (Cast.to, EyeLike.dtype,
// HannWindow.output_datatype, ...); grove stores its own DType values there.
constexpr absl::string_view kDTypeAttributes[] = {"to", "dtype", "output_datatype"};

// If/Loop/Scan bodies nest at most this deep (each level recurses here).
constexpr int kMaxBodyDepth = 64;

// A declared input rank above this is refused (grove's tensors go to 16).
constexpr int kMaxInputRank = 16;

bool IsDefaultDomain(const std::string& domain) { return domain.empty() || domain == "ai.onnx"; }

std::string NodeWhere(const NodeProto& node, int index) {
  if (node.name().empty()) return absl::StrCat("node #", index, " (op ", node.op_type(), ")");
  return absl::StrCat("node '", node.name(), "' (op ", node.op_type(), ")");
}

absl::string_view AttrTypeName(int type) {
  switch (type) {
    case AttributeProto::FLOAT:
      return "float";
    case AttributeProto::INT:
      return "int";
    case AttributeProto::STRING:
      return "string";
    case AttributeProto::TENSOR:
      return "tensor";
    case AttributeProto::GRAPH:
      return "graph";
    case AttributeProto::SPARSE_TENSOR:
      return "sparse tensor";
    case AttributeProto::TYPE_PROTO:
      return "type";
    case AttributeProto::FLOATS:
      return "floats";
    case AttributeProto::INTS:
      return "ints";
    case AttributeProto::STRINGS:
      return "strings";
    case AttributeProto::TENSORS:
      return "tensors";
    case AttributeProto::GRAPHS:
      return "graphs";
    case AttributeProto::SPARSE_TENSORS:
      return "sparse tensors";
    case AttributeProto::TYPE_PROTOS:
      return "types";
    default:
      return "undefined";
  }
}

// Old writers leave AttributeProto.type unset; the field that is filled says it.
int AttributeType(const AttributeProto& a) {
  if (a.type() != AttributeProto::UNDEFINED) return a.type();
  if (a.has_f()) return AttributeProto::FLOAT;
  if (a.has_i()) return AttributeProto::INT;
  if (a.has_s()) return AttributeProto::STRING;
  if (a.has_t()) return AttributeProto::TENSOR;
  if (a.has_g()) return AttributeProto::GRAPH;
  if (a.floats_size() > 0) return AttributeProto::FLOATS;
  if (a.ints_size() > 0) return AttributeProto::INTS;
  if (a.strings_size() > 0) return AttributeProto::STRINGS;
  return AttributeProto::UNDEFINED;
}

// An ONNX value type as grove declares it: tensor(T), seq(tensor(T)),
// optional(tensor(T)) or optional(seq(tensor(T))); `tensor` is the tensors'
// type (for their shape). Maps, sparse tensors and deeper nesting are refused.
struct OnnxValueType {
  ValueKind kind = ValueKind::kTensor;
  DType dtype = DType::kUnknown;  // kUnknown when the type leaves it open
  const TypeProto::Tensor* tensor = nullptr;
};

absl::StatusOr<OnnxValueType> ValueTypeOf(const TypeProto& type) {
  OnnxValueType out;
  const TypeProto* t = &type;
  if (t->has_optional_type()) {
    t = &t->optional_type().elem_type();
    out.kind = ValueKind::kOptionalTensor;
  }
  if (t->has_sequence_type()) {
    t = &t->sequence_type().elem_type();
    out.kind = out.kind == ValueKind::kOptionalTensor ? ValueKind::kOptionalSequence : ValueKind::kSequence;
  }
  if (!t->has_tensor_type()) {
    if (t->value_case() == TypeProto::VALUE_NOT_SET && out.kind != ValueKind::kTensor) return out;
    return absl::UnimplementedError(
        " is not a tensor, a sequence of tensors or an optional of either (a map, a sparse tensor or a nested "
        "sequence); grove does not support it");
  }
  out.tensor = &t->tensor_type();
  if (out.tensor->elem_type() != TensorProto::UNDEFINED) {
    absl::StatusOr<DType> dtype = DTypeFromOnnx(out.tensor->elem_type());
    if (!dtype.ok()) return absl::Status(dtype.status().code(), absl::StrCat(": ", dtype.status().message()));
    out.dtype = *dtype;
  }
  return out;
}

// grove's name of a tensor or sequence type ("f32", "seq(f32)"), as the
// Optional op's `type` attribute takes it.
absl::StatusOr<std::string> OptionalTypeName(const TypeProto& type) {
  absl::StatusOr<OnnxValueType> t = ValueTypeOf(type);
  if (!t.ok()) return t.status();
  if (t->kind != ValueKind::kTensor && t->kind != ValueKind::kSequence) {
    return absl::UnimplementedError(": an optional of an optional is not supported");
  }
  if (t->dtype == DType::kUnknown) return absl::UnimplementedError(": the type has no element type");
  const std::string name(DTypeName(t->dtype));
  return t->kind == ValueKind::kSequence ? absl::StrCat("seq(", name, ")") : name;
}

// Whether a value of ONNX attribute type `type` fits grove's declared kind;
// the loader widens ints to floats, so those fit too.
bool KindFits(int type, ir::AttrKind kind) {
  switch (type) {
    case AttributeProto::INT:
      return kind == ir::AttrKind::kInt || kind == ir::AttrKind::kFloat;
    case AttributeProto::FLOAT:
      return kind == ir::AttrKind::kFloat;
    case AttributeProto::STRING:
      return kind == ir::AttrKind::kString;
    case AttributeProto::INTS:
      return kind == ir::AttrKind::kInts || kind == ir::AttrKind::kFloats;
    case AttributeProto::FLOATS:
      return kind == ir::AttrKind::kFloats;
    case AttributeProto::STRINGS:
      return kind == ir::AttrKind::kStrings;
    case AttributeProto::GRAPH:
      return kind == ir::AttrKind::kSubgraph;
    case AttributeProto::TYPE_PROTO:  // Optional's type, as its name
      return kind == ir::AttrKind::kString;
    default:
      return false;
  }
}

// Declares `t` as the weight `name`: a string tensor through AddStringWeight
// (its elements are references, not bytes to store), any other as its bytes.
void AddTensorWeight(ModelBuilder& b, const std::string& name, const Tensor& t) {
  if (t.dtype() == DType::kString) {
    const StringRef* refs = t.as<StringRef>();
    std::vector<std::string> values;
    values.reserve(static_cast<size_t>(t.view().num_elements()));
    for (int64_t i = 0; i < t.view().num_elements(); ++i) values.emplace_back(refs[i].view());
    b.AddStringWeight(name, t.shape(), values);
    return;
  }
  b.AddWeight(name, t.dtype(), t.shape(),
              absl::Span<const uint8_t>(static_cast<const uint8_t*>(t.data()), t.view().byte_size()));
}

// The bytes `t` takes in a model: for strings, the end offsets and the text.
uint64_t StoredBytes(const Tensor& t) {
  if (t.dtype() != DType::kString) return t.view().byte_size();
  return StringWeightBytes(absl::MakeConstSpan(t.as<StringRef>(), static_cast<size_t>(t.view().num_elements())));
}

// Runs one node on constant inputs through grove's own CPU kernels, so
// folding has exactly the semantics the runtime would have.
absl::StatusOr<std::vector<std::optional<Tensor>>> EvaluateNode(const std::string& type,
                                                                const std::vector<const Tensor*>& inputs,
                                                                const std::vector<bool>& output_present,
                                                                const std::vector<Attribute>& attrs) {
  ModelBuilder b;
  b.SetProducer("grove import (constant folding)");
  std::vector<std::string> in_names, out_names;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i] == nullptr) {
      in_names.emplace_back();
      continue;
    }
    in_names.push_back(absl::StrCat("in", i));
    AddTensorWeight(b, in_names.back(), *inputs[i]);
  }
  for (size_t i = 0; i < output_present.size(); ++i) {
    out_names.push_back(output_present[i] ? absl::StrCat("out", i) : std::string());
  }
  b.AddOp(type, in_names, out_names, attrs, "folded");
  for (const std::string& n : out_names) {
    if (!n.empty()) b.AddOutput(n);
  }
  absl::StatusOr<std::vector<uint8_t>> bytes = b.Finish();
  if (!bytes.ok()) return bytes.status();
  absl::StatusOr<std::shared_ptr<const Model>> model = Model::LoadFromBuffer(*bytes);
  if (!model.ok()) return model.status();
  SessionOptions so;
  so.device = Device::kCpu;
  absl::StatusOr<std::unique_ptr<Session>> session = Session::Create(*model, so);
  if (!session.ok()) return session.status();
  absl::StatusOr<std::vector<TensorView>> outs = (*session)->Run({});
  if (!outs.ok()) return outs.status();
  std::vector<std::optional<Tensor>> result(output_present.size());
  size_t k = 0;
  for (size_t i = 0; i < output_present.size(); ++i) {
    if (!output_present[i]) continue;
    // A deep copy: string outputs refer to the model's weights or the run's
    // strings, which go with the session.
    absl::StatusOr<Tensor> copy = Tensor::CopyOf((*outs)[k++]);
    if (!copy.ok()) return copy.status();
    result[i] = *std::move(copy);
  }
  return result;
}

// ONNX names to grove names for one graph; bodies chain to their parents.
struct Scope {
  const Scope* parent = nullptr;
  absl::flat_hash_map<std::string, std::string> names;

  const std::string* Find(const std::string& onnx_name) const {
    for (const Scope* s = this; s != nullptr; s = s->parent) {
      auto it = s->names.find(onnx_name);
      if (it != s->names.end()) return &it->second;
    }
    return nullptr;
  }
};

class Importer {
 public:
  Importer(const ImportOptions& options, absl::string_view model_dir)
      : options_(options), model_dir_(model_dir), registry_(ir::OpDefinitions()) {}

  absl::StatusOr<std::vector<uint8_t>> Import(const ModelProto& model, ImportReport* report);

 private:
  absl::Status CheckOpset(const ModelProto& model);
  void ReserveDimParams(const GraphProto& graph);
  absl::Status ImportMainInputs(const GraphProto& graph, Scope& scope);
  void ReserveNames(const GraphProto& graph, Scope& scope);
  absl::Status ImportInitializers(const GraphProto& graph, const Scope& scope);
  absl::Status ImportNodes(const GraphProto& graph, Scope& scope);
  absl::Status ImportOutputs(const GraphProto& graph, const Scope& scope, bool main);
  absl::Status ImportNode(const NodeProto& node, int index, Scope& scope);
  absl::Status ImportConstant(const NodeProto& node, const std::string& where, const Scope& scope);
  absl::StatusOr<int> ImportBody(const GraphProto& body, const std::string& name, const Scope& outer);
  absl::StatusOr<int> ImportBodyAt(const GraphProto& body, const std::string& name, const Scope& outer);
  absl::StatusOr<std::string> Resolve(const std::string& onnx_name, const Scope& scope, const std::string& where);
  absl::StatusOr<Attribute> ConvertAttribute(const AttributeProto& a, const ir::OpDef& def,
                                             const std::string& where, const Scope& scope, const NodeProto& node);
  absl::Status Emit(const ir::OpDef& def, const std::string& where, const std::string& name,
                    const std::vector<std::string>& inputs, const std::vector<std::string>& outputs,
                    const std::vector<Attribute>& attrs);
  absl::Status ImportCoercingOp(const ir::OpDef& def, const std::string& where, const std::string& name,
                                const std::vector<std::string>& inputs, const std::vector<std::string>& outputs,
                                const std::vector<Attribute>& attrs);
  absl::Status ApplyOpsetSemantics(const ir::OpDef& def, const std::string& where, std::vector<std::string>* inputs,
                                   std::vector<Attribute>* attrs);
  absl::Status TryFold(const std::string& where, const std::vector<std::string>& inputs,
                       const std::vector<std::string>& outputs, const std::vector<Attribute>& attrs,
                       const ir::OpDef& def, bool* folded);
  absl::StatusOr<std::vector<Dim>> InputDims(const ValueInfoProto& input, const TypeProto::Tensor& type);
  std::string UniqueName(const std::string& name);
  std::string UniqueSymbol(const std::string& name);
  void AddSymbol(const std::string& name);
  // Writes a constant as a weight the first time an op or output reads it.
  void EmitIfConstant(const std::string& grove_name);
  void Define(const std::string& grove_name) { defined_.insert(grove_name); }

  const ImportOptions& options_;
  std::string model_dir_;
  const ir::OpRegistry& registry_;
  ModelBuilder builder_;
  ImportReport report_;
  absl::flat_hash_set<std::string> used_names_;
  absl::flat_hash_set<std::string> defined_;
  absl::flat_hash_map<std::string, Tensor> constants_;
  // Main inputs whose dims are all constants, by grove name.
  absl::flat_hash_map<std::string, TensorView> static_inputs_;
  absl::flat_hash_set<std::string> emitted_;
  absl::flat_hash_set<std::string> symbol_names_;
  absl::flat_hash_set<std::string> dim_params_;  // reserved before generated names are picked
  int next_body_ = 0;
  int body_depth_ = 0;
};

std::string Importer::UniqueName(const std::string& name) {
  if (used_names_.insert(name).second) return name;
  for (int k = 1;; ++k) {
    std::string candidate = absl::StrCat(name, "__", k);
    if (used_names_.insert(candidate).second) return candidate;
  }
}

std::string Importer::UniqueSymbol(const std::string& name) {
  if (!symbol_names_.contains(name) && !dim_params_.contains(name)) return name;
  for (int k = 1;; ++k) {
    std::string candidate = absl::StrCat(name, "_", k);
    if (!symbol_names_.contains(candidate) && !dim_params_.contains(candidate)) return candidate;
  }
}

void Importer::AddSymbol(const std::string& name) {
  if (!symbol_names_.insert(name).second) return;
  SymbolInfo s{name, options_.default_dim_min, options_.default_dim_max};
  if (auto it = options_.dim_ranges.find(name); it != options_.dim_ranges.end()) {
    s.min = it->second.first;
    s.max = it->second.second;
  }
  builder_.AddSymbol(s.name, s.min, s.max);
  report_.symbols.push_back(s);
}

void Importer::EmitIfConstant(const std::string& grove_name) {
  auto it = constants_.find(grove_name);
  if (it == constants_.end() || !emitted_.insert(grove_name).second) return;
  const Tensor& t = it->second;
  AddTensorWeight(builder_, grove_name, t);
  ++report_.weights;
  report_.weight_bytes += StoredBytes(t);
}

absl::StatusOr<std::string> Importer::Resolve(const std::string& onnx_name, const Scope& scope,
                                              const std::string& where) {
  const std::string* g = scope.Find(onnx_name);
  if (g == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        where, ": reads '", onnx_name, "', which no graph input, initializer or earlier node defines"));
  }
  if (!defined_.contains(*g)) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": reads '", onnx_name,
                                                   "' before the node that defines it (the graph is not sorted)"));
  }
  return *g;
}

absl::Status Importer::CheckOpset(const ModelProto& model) {
  // The version as the file holds it (an int64): a huge one is reported as it is.
  const int64_t opset = DefaultDomainOpset(model);
  if (opset < 0) {
    bool any_default = false;
    std::vector<std::string> others;
    for (const ::onnx::OperatorSetIdProto& o : model.opset_import()) {
      any_default = any_default || IsDefaultDomain(o.domain());
      others.push_back(absl::StrCat(o.domain().empty() ? "ai.onnx" : o.domain(), " ", o.version()));
    }
    if (any_default) {
      return absl::InvalidArgumentError(absl::StrCat("the model imports ai.onnx opset ", opset,
                                                     ", which is not an opset version"));
    }
    // Only other domains (training, ML): nothing grove has.
    return absl::UnimplementedError(absl::StrCat("the model imports no ai.onnx opset (its opsets: ",
                                                 others.empty() ? "none" : absl::StrJoin(others, ", "), ")"));
  }
  if (opset < kMinOpset || opset > kMaxOpset) {
    return absl::UnimplementedError(
        absl::StrCat("opset ", opset, " is not supported: grove imports ai.onnx opsets ", kMinOpset, " through ",
                     kMaxOpset, " (convert the model with onnx.version_converter)"));
  }
  report_.opset = static_cast<int>(opset);
  return absl::OkStatus();
}

// Collects the dim_params first, so a generated name never takes one.
void Importer::ReserveDimParams(const GraphProto& graph) {
  for (const ValueInfoProto& in : graph.input()) {
    if (!in.type().has_tensor_type() || !in.type().tensor_type().has_shape()) continue;
    for (const auto& d : in.type().tensor_type().shape().dim()) {
      if (!d.has_dim_value() && !d.dim_param().empty()) dim_params_.insert(d.dim_param());
    }
  }
}

absl::StatusOr<std::vector<Dim>> Importer::InputDims(const ValueInfoProto& input, const TypeProto::Tensor& type) {
  std::vector<Dim> dims;
  if (!type.has_shape()) {
    auto it = options_.input_ranks.find(input.name());
    if (it == options_.input_ranks.end()) {
      return absl::InvalidArgumentError(absl::StrCat("input '", input.name(),
                                                     "' declares no shape; grove needs at least its rank "
                                                     "(grove import --input-rank ",
                                                     input.name(), "=R)"));
    }
    if (it->second < 0 || it->second > 16) {
      return absl::InvalidArgumentError(
          absl::StrCat("input '", input.name(), "': rank ", it->second, " is outside 0..16"));
    }
    for (int k = 0; k < it->second; ++k) {
      const std::string s = UniqueSymbol(absl::StrCat(input.name(), "_d", k));
      AddSymbol(s);
      dims.emplace_back(s);
    }
    return dims;
  }
  const auto& shape = type.shape();
  if (shape.dim_size() > kMaxInputRank) {
    return absl::InvalidArgumentError(
        absl::StrCat("input '", input.name(), "': rank ", shape.dim_size(), " is above ", kMaxInputRank));
  }
  for (int k = 0; k < shape.dim_size(); ++k) {
    const auto& d = shape.dim(k);
    if (d.has_dim_value()) {
      if (d.dim_value() < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("input '", input.name(), "': dim ", k, " is ", d.dim_value()));
      }
      dims.emplace_back(d.dim_value());
    } else if (!d.dim_param().empty()) {
      AddSymbol(d.dim_param());
      dims.emplace_back(d.dim_param());
    } else {
      const std::string s = UniqueSymbol(absl::StrCat(input.name(), "_d", k));
      AddSymbol(s);
      dims.emplace_back(s);
    }
  }
  return dims;
}

absl::Status Importer::ImportMainInputs(const GraphProto& graph, Scope& scope) {
  absl::flat_hash_set<std::string> initializers;
  for (const TensorProto& t : graph.initializer()) initializers.insert(t.name());
  for (const ValueInfoProto& in : graph.input()) {
    // An input with an initializer is a weight with a default ONNX lets the
    // caller override; grove keeps the default.
    if (initializers.contains(in.name())) continue;
    if (in.name().empty()) return absl::InvalidArgumentError("a graph input has no name");
    absl::StatusOr<OnnxValueType> vt = ValueTypeOf(in.type());
    if (!vt.ok()) return absl::UnimplementedError(absl::StrCat("input '", in.name(), "'", vt.status().message()));
    if (vt->kind != ValueKind::kTensor) {
      // A sequence or optional: the tensors' shape when the model declares one.
      if (vt->dtype == DType::kUnknown) {
        return absl::UnimplementedError(absl::StrCat("input '", in.name(), "' declares no element type"));
      }
      std::optional<std::vector<Dim>> item_dims;
      if (vt->tensor != nullptr && vt->tensor->has_shape()) {
        absl::StatusOr<std::vector<Dim>> dims = InputDims(in, *vt->tensor);
        if (!dims.ok()) return dims.status();
        item_dims = *std::move(dims);
      }
      const std::string& g = scope.names.at(in.name());
      builder_.AddInput(g, vt->kind, vt->dtype, std::move(item_dims));
      Define(g);
      continue;
    }
    const TypeProto::Tensor& tt = in.type().tensor_type();
    absl::StatusOr<DType> dtype = DTypeFromOnnx(tt.elem_type());
    if (!dtype.ok())
      return absl::UnimplementedError(absl::StrCat("input '", in.name(), "': ", dtype.status().message()));
    absl::StatusOr<std::vector<Dim>> dims = InputDims(in, tt);
    if (!dims.ok()) return dims.status();
    const std::string& g = scope.names.at(in.name());
    std::vector<int64_t> constant_dims;
    for (const Dim& d : *dims) {
      if (d.symbol.empty()) constant_dims.push_back(d.value);
    }
    if (constant_dims.size() == dims->size()) {
      // Only the dtype and shape are kept: a view with no data.
      static_inputs_[g] = TensorView(*dtype, constant_dims, static_cast<const void*>(nullptr));
    }
    builder_.AddInput(g, *dtype, *std::move(dims));
    Define(g);
  }
  return absl::OkStatus();
}

// Gives every name this graph defines its grove name before any node runs,
// so names generated later (and nested bodies) cannot take them.
void Importer::ReserveNames(const GraphProto& graph, Scope& scope) {
  auto reserve = [&](const std::string& name) {
    if (name.empty() || scope.names.contains(name)) return;
    scope.names[name] = UniqueName(name);
  };
  for (const ValueInfoProto& in : graph.input()) reserve(in.name());
  for (const TensorProto& t : graph.initializer()) reserve(t.name());
  for (const NodeProto& n : graph.node()) {
    for (const std::string& o : n.output()) reserve(o);
  }
}

absl::Status Importer::ImportInitializers(const GraphProto& graph, const Scope& scope) {
  if (graph.sparse_initializer_size() > 0) {
    return absl::UnimplementedError(
        absl::StrCat("sparse initializer '", graph.sparse_initializer(0).values().name(), "' is not supported"));
  }
  for (const TensorProto& t : graph.initializer()) {
    if (t.name().empty()) return absl::InvalidArgumentError("an initializer has no name");
    absl::StatusOr<Tensor> value = DecodeTensor(t, model_dir_);
    if (!value.ok()) {
      return absl::Status(value.status().code(), absl::StrCat("initializer: ", value.status().message()));
    }
    const std::string& g = scope.names.at(t.name());
    constants_[g] = *std::move(value);
    Define(g);
  }
  return absl::OkStatus();
}

absl::Status Importer::ImportOutputs(const GraphProto& graph, const Scope& scope, bool main) {
  for (const ValueInfoProto& out : graph.output()) {
    const std::string where =
        absl::StrCat(main ? "graph" : absl::StrCat("graph '", graph.name(), "'"), " output '", out.name(), "'");
    if (out.type().value_case() != TypeProto::VALUE_NOT_SET) {
      absl::StatusOr<OnnxValueType> vt = ValueTypeOf(out.type());
      if (!vt.ok()) return absl::UnimplementedError(absl::StrCat(where, vt.status().message()));
    }
    absl::StatusOr<std::string> g = Resolve(out.name(), scope, where);
    if (!g.ok()) return g.status();
    EmitIfConstant(*g);
    builder_.AddOutput(*g);
  }
  return absl::OkStatus();
}

absl::StatusOr<int> Importer::ImportBody(const GraphProto& body, const std::string& name, const Scope& outer) {
  if (body_depth_ >= kMaxBodyDepth) {
    return absl::InvalidArgumentError(
        absl::StrCat("graph '", name, "' is nested more than ", kMaxBodyDepth, " bodies deep"));
  }
  ++body_depth_;
  absl::StatusOr<int> index = ImportBodyAt(body, name, outer);
  --body_depth_;
  return index;
}

absl::StatusOr<int> Importer::ImportBodyAt(const GraphProto& body, const std::string& name, const Scope& outer) {
  Scope scope;
  scope.parent = &outer;
  ReserveNames(body, scope);
  const int parent = builder_.current_subgraph();
  const int index = builder_.AddSubgraph(name);
  ++report_.subgraphs;
  absl::flat_hash_set<std::string> initializers;
  for (const TensorProto& t : body.initializer()) initializers.insert(t.name());
  for (const ValueInfoProto& in : body.input()) {
    if (initializers.contains(in.name())) continue;
    // A body's input shapes come from its caller at run time; only the dtype
    // is declared.
    OnnxValueType vt;
    if (in.type().value_case() != TypeProto::VALUE_NOT_SET) {
      absl::StatusOr<OnnxValueType> t = ValueTypeOf(in.type());
      if (!t.ok()) {
        return absl::UnimplementedError(absl::StrCat("graph '", name, "' input '", in.name(), "'", t.status().message()));
      }
      vt = *t;
    }
    const std::string& g = scope.names.at(in.name());
    if (vt.kind != ValueKind::kTensor) {
      builder_.AddInput(g, vt.kind, vt.dtype);
    } else {
      builder_.AddInput(g, vt.dtype, {});
    }
    Define(g);
  }
  if (absl::Status s = ImportInitializers(body, scope); !s.ok()) return s;
  if (absl::Status s = ImportNodes(body, scope); !s.ok()) return s;
  if (absl::Status s = ImportOutputs(body, scope, false); !s.ok()) return s;
  builder_.SetSubgraph(parent);
  return index;
}

absl::Status Importer::ImportNodes(const GraphProto& graph, Scope& scope) {
  for (int i = 0; i < graph.node_size(); ++i) {
    if (absl::Status s = ImportNode(graph.node(i), i, scope); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status Importer::ImportConstant(const NodeProto& node, const std::string& where, const Scope& scope) {
  if (node.output_size() != 1 || node.output(0).empty()) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": Constant must have exactly one output"));
  }
  if (node.attribute_size() != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": Constant must have exactly one attribute, has ", node.attribute_size()));
  }
  const AttributeProto& a = node.attribute(0);
  std::optional<Tensor> value;
  auto filled = [&](DType dtype, std::vector<int64_t> shape, const void* data) -> absl::Status {
    absl::StatusOr<Tensor> t = Tensor::Create(dtype, std::move(shape));
    if (!t.ok()) return t.status();
    if (t->view().byte_size() > 0) std::memcpy(t->data(), data, t->view().byte_size());
    value = *std::move(t);
    return absl::OkStatus();
  };
  absl::Status st;
  if (a.name() == "value") {
    absl::StatusOr<Tensor> t = DecodeTensor(a.t(), model_dir_);
    if (!t.ok()) return absl::Status(t.status().code(), absl::StrCat(where, ": ", t.status().message()));
    value = *std::move(t);
  } else if (a.name() == "value_float") {
    const float f = a.f();
    st = filled(DType::kF32, {}, &f);
  } else if (a.name() == "value_floats") {
    std::vector<float> v(a.floats().begin(), a.floats().end());
    st = filled(DType::kF32, {static_cast<int64_t>(v.size())}, v.data());
  } else if (a.name() == "value_int") {
    const int64_t i = a.i();
    st = filled(DType::kI64, {}, &i);
  } else if (a.name() == "value_ints") {
    std::vector<int64_t> v(a.ints().begin(), a.ints().end());
    st = filled(DType::kI64, {static_cast<int64_t>(v.size())}, v.data());
  } else if (a.name() == "value_string" || a.name() == "value_strings") {
    // A scalar string, or a 1-D tensor of them.
    std::vector<StringRef> refs;
    std::vector<int64_t> shape;
    if (a.name() == "value_string") {
      refs.emplace_back(a.s());
    } else {
      for (const std::string& v : a.strings()) refs.emplace_back(v);
      shape.push_back(static_cast<int64_t>(refs.size()));
    }
    absl::StatusOr<Tensor> t = refs.empty() ? Tensor::Create(DType::kString, shape)
                                            : Tensor::CopyOf(TensorView(DType::kString, shape, refs.data()));
    if (t.ok()) {
      value = *std::move(t);
    } else {
      st = t.status();
    }
  } else {
    return absl::UnimplementedError(absl::StrCat("attribute '", a.name(), "' of ", where,
                                                 " is not supported by grove (it takes value, value_float(s), "
                                                 "value_int(s) and value_string(s); sparse tensors are not "
                                                 "supported)"));
  }
  if (!st.ok()) return absl::InvalidArgumentError(absl::StrCat(where, ": ", st.message()));
  const std::string& g = scope.names.at(node.output(0));
  constants_[g] = *std::move(value);
  Define(g);
  ++report_.constant_nodes;
  return absl::OkStatus();
}

absl::StatusOr<Attribute> Importer::ConvertAttribute(const AttributeProto& a, const ir::OpDef& def,
                                                     const std::string& where, const Scope& scope,
                                                     const NodeProto& node) {
  const int type = AttributeType(a);
  const std::string what = absl::StrCat("attribute '", a.name(), "' of ", where);
  if (!a.ref_attr_name().empty()) {
    return absl::UnimplementedError(absl::StrCat(what, " refers to a function attribute; not supported by grove"));
  }
  const ir::AttrSpec* spec = def.FindAttr(a.name());
  if (spec == nullptr) return absl::UnimplementedError(absl::StrCat(what, " is not supported by grove"));
  if (!KindFits(type, spec->kind)) {
    return absl::UnimplementedError(absl::StrCat(what, " is ", AttrTypeName(type), "; grove's ", def.type,
                                                 " takes it as ", ir::AttrKindName(spec->kind)));
  }
  const bool dtype_attr =
      type == AttributeProto::INT &&
      std::find(std::begin(kDTypeAttributes), std::end(kDTypeAttributes), a.name()) != std::end(kDTypeAttributes);
  switch (type) {
    case AttributeProto::INT: {
      if (!dtype_attr) return Attribute{a.name(), AttrValue(static_cast<int64_t>(a.i()))};
      absl::StatusOr<DType> dtype = DTypeFromOnnx(static_cast<int32_t>(a.i()));
      if (!dtype.ok()) return absl::UnimplementedError(absl::StrCat(what, ": ", dtype.status().message()));
      return Attribute{a.name(), AttrValue(static_cast<int64_t>(*dtype))};
    }
    case AttributeProto::FLOAT:
      return Attribute{a.name(), AttrValue(static_cast<double>(a.f()))};
    case AttributeProto::STRING:
      return Attribute{a.name(), AttrValue(a.s())};
    case AttributeProto::INTS:
      return Attribute{a.name(), AttrValue(std::vector<int64_t>(a.ints().begin(), a.ints().end()))};
    case AttributeProto::FLOATS:
      return Attribute{a.name(), AttrValue(std::vector<double>(a.floats().begin(), a.floats().end()))};
    case AttributeProto::STRINGS:
      return Attribute{a.name(), AttrValue(std::vector<std::string>(a.strings().begin(), a.strings().end()))};
    case AttributeProto::TYPE_PROTO: {
      absl::StatusOr<std::string> name = OptionalTypeName(a.tp());
      if (!name.ok()) return absl::UnimplementedError(absl::StrCat(what, name.status().message()));
      return Attribute{a.name(), AttrValue(*std::move(name))};
    }
    case AttributeProto::GRAPH: {
      const std::string body_name =
          absl::StrCat(node.name().empty() ? node.op_type() : node.name(), "/", a.name());
      absl::StatusOr<int> index = ImportBody(a.g(), body_name, scope);
      if (!index.ok()) return index.status();
      return Attribute{a.name(), AttrValue(SubgraphRef{*index})};
    }
    default:
      break;
  }
  return absl::UnimplementedError(absl::StrCat(what, " is ", AttrTypeName(type), "; not supported by grove"));
}

absl::Status Importer::TryFold(const std::string& where, const std::vector<std::string>& inputs,
                               const std::vector<std::string>& outputs, const std::vector<Attribute>& attrs,
                               const ir::OpDef& def, bool* folded) {
  *folded = false;
  if (!options_.fold_constants || !def.foldable || def.kernel_allocates_outputs || inputs.empty()) {
    return absl::OkStatus();
  }
  if (std::find(std::begin(kNondeterministicOps), std::end(kNondeterministicOps), def.type) !=
      std::end(kNondeterministicOps)) {
    return absl::OkStatus();
  }
  for (const Attribute& a : attrs) {
    if (std::holds_alternative<SubgraphRef>(a.second)) return absl::OkStatus();
  }
  std::vector<const Tensor*> values;
  std::vector<Tensor> stand_ins;  // for inputs whose shape alone is known
  stand_ins.reserve(inputs.size());
  for (const std::string& in : inputs) {
    if (in.empty()) {
      values.push_back(nullptr);
      continue;
    }
    if (auto it = constants_.find(in); it != constants_.end()) {
      values.push_back(&it->second);
      continue;
    }
    // Shape and Size of an input with constant dims do not depend on the
    // data (the session refuses any other shape), so they fold too.
    auto it = static_inputs_.find(in);
    if (def.reads_input_values || it == static_inputs_.end()) return absl::OkStatus();
    absl::StatusOr<Tensor> zeros = Tensor::Create(it->second.dtype, it->second.shape);
    if (!zeros.ok() || zeros->view().byte_size() > options_.max_folded_bytes) return absl::OkStatus();
    stand_ins.push_back(*std::move(zeros));
    values.push_back(&stand_ins.back());
  }
  std::vector<bool> present;
  for (const std::string& out : outputs) present.push_back(!out.empty());
  absl::StatusOr<std::vector<std::optional<Tensor>>> results = EvaluateNode(def.type, values, present, attrs);
  if (!results.ok()) {
    return absl::Status(
        results.status().code(),
        absl::StrCat(where, ": evaluating it on its constant inputs failed: ", results.status().message()));
  }
  uint64_t bytes = 0;
  for (const std::optional<Tensor>& r : *results) {
    if (r.has_value()) bytes += StoredBytes(*r);
  }
  if (bytes > options_.max_folded_bytes) return absl::OkStatus();
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (outputs[i].empty()) continue;
    constants_[outputs[i]] = *std::move((*results)[i]);
    Define(outputs[i]);
  }
  ++report_.constants_folded;
  *folded = true;
  return absl::OkStatus();
}

absl::Status Importer::ImportNode(const NodeProto& node, int index, Scope& scope) {
  ++report_.onnx_nodes;
  const std::string where = NodeWhere(node, index);
  if (!IsDefaultDomain(node.domain())) {
    return absl::UnimplementedError(
        absl::StrCat(where, ": domain '", node.domain(), "' is not supported by grove (only ai.onnx)"));
  }
  if (node.op_type() == "Constant") return ImportConstant(node, where, scope);
  const ir::OpDef* def = registry_.Find(node.op_type());
  if (def == nullptr) return absl::UnimplementedError(absl::StrCat(where, ": not supported by grove"));

  // Trailing empty names are omitted optional inputs/outputs; grove simply
  // takes fewer. Empty names in the middle stay as omitted ("").
  int num_inputs = node.input_size();
  while (num_inputs > 0 && node.input(num_inputs - 1).empty()) --num_inputs;
  int num_outputs = node.output_size();
  while (num_outputs > 0 && node.output(num_outputs - 1).empty()) --num_outputs;
  std::vector<std::string> inputs;
  for (int i = 0; i < num_inputs; ++i) {
    if (node.input(i).empty()) {
      inputs.emplace_back();
      continue;
    }
    absl::StatusOr<std::string> g = Resolve(node.input(i), scope, where);
    if (!g.ok()) return g.status();
    inputs.push_back(*std::move(g));
  }
  std::vector<std::string> outputs;
  for (int i = 0; i < num_outputs; ++i) {
    outputs.push_back(node.output(i).empty() ? std::string() : scope.names.at(node.output(i)));
  }

  std::vector<Attribute> attrs;
  for (const AttributeProto& a : node.attribute()) {
    if (def->type == "ConstantOfShape" && a.name() == "value") {
      // grove's ConstantOfShape takes the fill value as an optional input.
      absl::StatusOr<Tensor> value = DecodeTensor(a.t(), model_dir_);
      if (!value.ok()) {
        return absl::Status(value.status().code(),
                            absl::StrCat("attribute 'value' of ", where, ": ", value.status().message()));
      }
      const std::string name = UniqueName(absl::StrCat(outputs.empty() ? node.name() : outputs[0], "_value"));
      constants_[name] = *std::move(value);
      Define(name);
      inputs.resize(std::max<size_t>(inputs.size(), 1));
      inputs.push_back(name);
      continue;
    }
    absl::StatusOr<Attribute> converted = ConvertAttribute(a, *def, where, scope, node);
    if (!converted.ok()) return converted.status();
    attrs.push_back(*std::move(converted));
  }
  if (absl::Status s = ApplyOpsetSemantics(*def, where, &inputs, &attrs); !s.ok()) return s;
  for (const ir::AttrSpec& spec : def->attrs) {
    if (!spec.required) continue;
    const bool given =
        std::any_of(attrs.begin(), attrs.end(), [&](const Attribute& a) { return a.first == spec.name; });
    if (!given) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": required attribute '", spec.name, "' is missing"));
    }
  }
  const int ni = static_cast<int>(inputs.size()), no = static_cast<int>(outputs.size());
  if (ni < def->min_inputs || (def->max_inputs >= 0 && ni > def->max_inputs)) {
    return absl::UnimplementedError(
        absl::StrCat(where, ": has ", ni, " inputs; grove's ", def->type, " takes ", def->min_inputs, "..",
                     def->max_inputs < 0 ? std::string("any") : absl::StrCat(def->max_inputs)));
  }
  if (no < def->min_outputs || (def->max_outputs >= 0 && no > def->max_outputs)) {
    return absl::UnimplementedError(
        absl::StrCat(where, ": has ", no, " outputs; grove's ", def->type, " gives ", def->min_outputs, "..",
                     def->max_outputs < 0 ? std::string("any") : absl::StrCat(def->max_outputs)));
  }

  if (report_.opset < 13 &&
      std::find(std::begin(kCoercingOps), std::end(kCoercingOps), def->type) != std::end(kCoercingOps)) {
    return ImportCoercingOp(*def, where, node.name(), inputs, outputs, attrs);
  }
  return Emit(*def, where, node.name(), inputs, outputs, attrs);
}

absl::Status Importer::Emit(const ir::OpDef& def, const std::string& where, const std::string& name,
                            const std::vector<std::string>& inputs, const std::vector<std::string>& outputs,
                            const std::vector<Attribute>& attrs) {
  bool folded = false;
  if (absl::Status s = TryFold(where, inputs, outputs, attrs, def, &folded); !s.ok()) return s;
  if (folded) return absl::OkStatus();
  for (const std::string& in : inputs) {
    if (!in.empty()) EmitIfConstant(in);
  }
  builder_.AddOp(def.type, inputs, outputs, attrs, name);
  ++report_.nodes_imported;
  for (const std::string& out : outputs) {
    if (!out.empty()) Define(out);
  }
  return absl::OkStatus();
}

// grove's ops follow one opset's definition each; where another opset that
// grove imports means something else by the same node, the node is rewritten:
// - RoiAlign before opset 16 had no coordinate_transformation_mode and
//   computed what opset 16 calls "output_half_pixel" (its default is
//   "half_pixel");
// - DFT from opset 20 takes the axis as input 2 (default -2) where opset 17
//   has an attribute (default 1); a constant input becomes the attribute.
absl::Status Importer::ApplyOpsetSemantics(const ir::OpDef& def, const std::string& where,
                                           std::vector<std::string>* inputs, std::vector<Attribute>* attrs) {
  const auto has_attr = [&](absl::string_view name) {
    return std::any_of(attrs->begin(), attrs->end(), [&](const Attribute& a) { return a.first == name; });
  };
  if (def.type == "RoiAlign" && report_.opset < 16 && !has_attr("coordinate_transformation_mode")) {
    attrs->emplace_back("coordinate_transformation_mode", AttrValue(std::string("output_half_pixel")));
  }
  if (def.type == "DFT" && report_.opset >= 20) {
    if (has_attr("axis")) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": has an 'axis' attribute, which DFT lost at opset 20"));
    }
    int64_t axis = -2;
    if (inputs->size() >= 3 && !(*inputs)[2].empty()) {
      auto it = constants_.find((*inputs)[2]);
      std::vector<int64_t> values;
      if (it == constants_.end() || !ir::ReadIntegers(it->second.view(), &values) || values.size() != 1) {
        return absl::UnimplementedError(absl::StrCat(
            where, ": axis (input 2) must be a constant integer scalar; grove's DFT takes the axis when imported"));
      }
      axis = values[0];
    }
    if (inputs->size() > 2) inputs->resize(2);
    while (!inputs->empty() && inputs->back().empty()) inputs->pop_back();
    attrs->emplace_back("axis", AttrValue(axis));
  }
  return absl::OkStatus();
}

// Before opset 13, Softmax, LogSoftmax and Hardmax flatten their input to 2-D
// at `axis` (default 1) and normalise each row; grove's ops follow opset 13
// (one axis). axis = -1 means the same in both; any other axis is rewritten
// as Flatten -> op(axis=1) -> Reshape back to the input's shape.
absl::Status Importer::ImportCoercingOp(const ir::OpDef& def, const std::string& where, const std::string& name,
                                        const std::vector<std::string>& inputs,
                                        const std::vector<std::string>& outputs,
                                        const std::vector<Attribute>& attrs) {
  int64_t axis = 1;
  for (const Attribute& a : attrs) {
    if (a.first == "axis" && std::holds_alternative<int64_t>(a.second)) axis = std::get<int64_t>(a.second);
  }
  if (axis == -1) return Emit(def, where, name, inputs, outputs, attrs);
  const ir::OpDef* flatten = registry_.Find("Flatten");
  const ir::OpDef* shape = registry_.Find("Shape");
  const ir::OpDef* reshape = registry_.Find("Reshape");
  if (flatten == nullptr || shape == nullptr || reshape == nullptr || inputs.empty() || outputs.empty()) {
    return absl::UnimplementedError(
        absl::StrCat(where, ": at opset ", report_.opset, " it normalises the input flattened to 2-D at axis ",
                     axis, "; grove imports that as Flatten, Shape and Reshape around it, and lacks Flatten"));
  }
  const std::string& x = inputs[0];
  const std::string& y = outputs[0];
  const std::string flat = UniqueName(absl::StrCat(y, "/flat"));
  const std::string flat_y = UniqueName(absl::StrCat(y, "/flat_out"));
  const std::string x_shape = UniqueName(absl::StrCat(y, "/in_shape"));
  if (absl::Status s =
          Emit(*flatten, where, absl::StrCat(name, "/flatten"), {x}, {flat}, {{"axis", AttrValue(axis)}});
      !s.ok()) {
    return s;
  }
  if (absl::Status s = Emit(def, where, name, {flat}, {flat_y}, {{"axis", AttrValue(int64_t{1})}}); !s.ok())
    return s;
  if (absl::Status s = Emit(*shape, where, absl::StrCat(name, "/shape"), {x}, {x_shape}, {}); !s.ok()) return s;
  return Emit(*reshape, where, absl::StrCat(name, "/reshape"), {flat_y, x_shape}, {y}, {});
}

absl::StatusOr<std::vector<uint8_t>> Importer::Import(const ModelProto& model, ImportReport* report) {
  if (model.has_producer_name()) {
    report_.producer =
        absl::StrCat(model.producer_name(), model.producer_version().empty() ? "" : " ", model.producer_version());
  }
  if (absl::Status s = CheckOpset(model); !s.ok()) return s;
  for (const auto& [name, range] : options_.dim_ranges) {
    if (range.first < 0 || range.second < range.first) {
      return absl::InvalidArgumentError(
          absl::StrCat("dim '", name, "': range ", range.first, ":", range.second, " is not 0 <= MIN <= MAX"));
    }
  }
  if (options_.default_dim_min < 0 || options_.default_dim_max < options_.default_dim_min) {
    return absl::InvalidArgumentError("the default dim range is not 0 <= MIN <= MAX");
  }
  builder_.SetProducer(report_.producer.empty() ? "grove import (onnx)"
                                                : absl::StrCat("grove import (onnx: ", report_.producer, ")"));
  const GraphProto& graph = model.graph();
  Scope scope;
  ReserveNames(graph, scope);
  ReserveDimParams(graph);
  if (absl::Status s = ImportMainInputs(graph, scope); !s.ok()) return s;
  if (absl::Status s = ImportInitializers(graph, scope); !s.ok()) return s;
  if (absl::Status s = ImportNodes(graph, scope); !s.ok()) return s;
  if (absl::Status s = ImportOutputs(graph, scope, true); !s.ok()) return s;
  if (graph.output_size() == 0) return absl::InvalidArgumentError("the graph has no outputs");

  std::vector<std::string> unknown;
  for (const auto& [name, range] : options_.dim_ranges) {
    if (!symbol_names_.contains(name)) unknown.push_back(name);
  }
  if (!unknown.empty()) {
    std::vector<std::string> names;
    for (const SymbolInfo& s : report_.symbols) names.push_back(s.name);
    return absl::InvalidArgumentError(absl::StrCat(
        "the model has no dynamic dim named ", absl::StrJoin(unknown, ", "),
        " (its dynamic dims: ", names.empty() ? std::string("none") : absl::StrJoin(names, ", "), ")"));
  }

  absl::StatusOr<std::vector<uint8_t>> bytes = builder_.Finish();
  if (!bytes.ok()) return bytes.status();
  // Loading checks what the loader checks at run time (dataflow, arity,
  // shapes), so a model grove cannot run fails here, not at deployment.
  absl::StatusOr<std::shared_ptr<const Model>> loaded = Model::LoadFromBuffer(*bytes);
  if (!loaded.ok()) {
    return absl::Status(loaded.status().code(),
                        absl::StrCat("the imported model does not load: ", loaded.status().message()));
  }
  if (report != nullptr) *report = report_;
  return bytes;
}

}  // namespace

absl::StatusOr<ModelProto> ParseOnnxModel(absl::string_view bytes, absl::string_view what) {
  if (bytes.size() > static_cast<size_t>(std::numeric_limits<int>::max())) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " is larger than 2 GiB; store its weights as external data"));
  }
  ModelProto model;
  bool ok = false;
  try {
    ok = model.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()));
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": not a valid ONNX model (", e.what(), ")"));
  }
  if (!ok)
    return absl::InvalidArgumentError(absl::StrCat(what, ": not a valid ONNX model (protobuf parse failed)"));
  return model;
}

absl::StatusOr<std::vector<uint8_t>> ImportOnnxModel(const ModelProto& model, absl::string_view model_dir,
                                                     const ImportOptions& options, ImportReport* report) {
  // Below opset 11: convert to kUpgradeOpset first (a copy; the caller's
  // model stays as it was).
  const int64_t opset = DefaultDomainOpset(model);
  std::optional<ModelProto> upgraded;
  if (opset >= 1 && opset < kMinOpset) {
    absl::StatusOr<ModelProto> converted =
        UpgradeOpset(model, static_cast<int>(opset), kUpgradeOpset, options.converter_timeout_seconds);
    if (!converted.ok()) return converted.status();
    upgraded = *std::move(converted);
  }
  try {
    Importer importer(options, model_dir);
    absl::StatusOr<std::vector<uint8_t>> bytes = importer.Import(upgraded ? *upgraded : model, report);
    if (bytes.ok() && upgraded && report != nullptr) report->converted_from_opset = static_cast<int>(opset);
    if (!bytes.ok() && upgraded) {
      return absl::Status(bytes.status().code(),
                          absl::StrCat(bytes.status().message(), " (in the model as converted from opset ", opset,
                                       " to ", kUpgradeOpset, " by ONNX's version converter)"));
    }
    return bytes;
  } catch (const std::bad_alloc&) {
    return absl::ResourceExhaustedError("out of memory while importing the model");
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("importing the model failed: ", e.what()));
  }
}

absl::StatusOr<std::vector<uint8_t>> ImportOnnxFile(const std::string& path, const ImportOptions& options,
                                                    ImportReport* report) {
  // Checked to be a regular file before any read: a FIFO or a device must
  // not hang the import.
  absl::StatusOr<format::RegularFile> file = format::RegularFile::Open(path, "ONNX file");
  if (!file.ok()) return file.status();
  if (file->size() > static_cast<uint64_t>(std::numeric_limits<int>::max())) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, " is larger than 2 GiB; store its weights as external data"));
  }
  std::string bytes(static_cast<size_t>(file->size()), '\0');
  if (absl::Status s = file->ReadAt(0, bytes.data(), bytes.size()); !s.ok()) return s;
  absl::StatusOr<ModelProto> model = ParseOnnxModel(bytes, path);
  if (!model.ok()) return model.status();
  std::string dir = std::filesystem::path(path).parent_path().string();
  if (dir.empty()) dir = ".";
  return ImportOnnxModel(*model, dir, options, report);
}

}  // namespace grove::onnx_import
