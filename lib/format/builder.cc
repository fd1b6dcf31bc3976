// ModelBuilder: builds a model in code and serialises it as a .grove file
// (size-prefixed FlatBuffer, then the weights, each at a 64-byte aligned file
// offset). Mistakes are recorded and returned by Finish, so building code can
// stay linear.
#include <cstring>
#include <fstream>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "flatbuffers/flatbuffers.h"
#include "grove/grove.h"
#include "lib/format/file_layout.h"
#include "schemas/grove_generated.h"

namespace grove {

struct ModelBuilder::State {
  struct TensorEntry {
    std::string name;
    DType dtype = DType::kUnknown;
    bool has_shape = false;
    std::vector<Dim> shape;
    int buffer = -1;
    ValueKind kind = ValueKind::kTensor;
  };
  struct OpEntry {
    std::string type, name;
    std::vector<std::string> inputs, outputs;
    std::vector<std::pair<std::string, AttrValue>> attrs;
  };
  struct SubgraphEntry {
    std::string name;
    std::vector<std::string> inputs, outputs;
    std::vector<OpEntry> ops;
  };

  std::string producer = "grove ModelBuilder";
  std::vector<SymbolInfo> symbols;
  std::vector<TensorEntry> tensors;
  absl::flat_hash_map<std::string, int> tensor_index;
  std::vector<std::vector<uint8_t>> buffers;
  std::vector<SubgraphEntry> subgraphs;
  int current = 0;
  std::vector<std::string> errors;

  int Intern(const std::string& name) {
    auto it = tensor_index.find(name);
    if (it != tensor_index.end()) return it->second;
    tensors.push_back(TensorEntry{name});
    tensor_index[name] = static_cast<int>(tensors.size()) - 1;
    return static_cast<int>(tensors.size()) - 1;
  }
  bool Declared(const std::string& name) const {
    auto it = tensor_index.find(name);
    return it != tensor_index.end() &&
           (tensors[it->second].has_shape || tensors[it->second].dtype != DType::kUnknown);
  }
};

ModelBuilder::ModelBuilder() : state_(std::make_unique<State>()) {
  state_->subgraphs.push_back(State::SubgraphEntry{"main"});
}
ModelBuilder::~ModelBuilder() = default;

void ModelBuilder::AddSymbol(std::string name, int64_t min, int64_t max) {
  state_->symbols.push_back(SymbolInfo{std::move(name), min, max});
}

void ModelBuilder::SetProducer(std::string producer) { state_->producer = std::move(producer); }

int ModelBuilder::AddSubgraph(std::string name) {
  state_->subgraphs.push_back(State::SubgraphEntry{std::move(name)});
  state_->current = static_cast<int>(state_->subgraphs.size()) - 1;
  return state_->current;
}

void ModelBuilder::SetSubgraph(int index) {
  if (index < 0 || index >= static_cast<int>(state_->subgraphs.size())) {
    state_->errors.push_back(absl::StrCat("SetSubgraph(", index, "): no such subgraph"));
    return;
  }
  state_->current = index;
}

int ModelBuilder::current_subgraph() const { return state_->current; }

void ModelBuilder::AddInput(std::string name, DType dtype, std::vector<Dim> shape) {
  AddInput(std::move(name), ValueKind::kTensor, dtype, std::move(shape));
}

void ModelBuilder::AddInput(std::string name, ValueKind kind, DType dtype, std::optional<std::vector<Dim>> shape) {
  if (state_->Declared(name)) {
    state_->errors.push_back(absl::StrCat("AddInput: '", name, "' is already declared"));
    return;
  }
  const int t = state_->Intern(name);
  state_->tensors[t].dtype = dtype;
  state_->tensors[t].kind = kind;
  state_->tensors[t].has_shape = shape.has_value();
  if (shape.has_value()) state_->tensors[t].shape = *std::move(shape);
  state_->subgraphs[state_->current].inputs.push_back(std::move(name));
}

void ModelBuilder::AddOutput(std::string name) {
  state_->Intern(name);
  state_->subgraphs[state_->current].outputs.push_back(std::move(name));
}

void ModelBuilder::AddWeight(std::string name, DType dtype, std::vector<int64_t> shape,
                             absl::Span<const uint8_t> bytes) {
  if (state_->Declared(name)) {
    state_->errors.push_back(absl::StrCat("AddWeight: '", name, "' is already declared"));
    return;
  }
  if (dtype == DType::kString) {
    state_->errors.push_back(absl::StrCat("AddWeight: '", name, "' is a string weight; use AddStringWeight"));
    return;
  }
  const int t = state_->Intern(name);
  State::TensorEntry& e = state_->tensors[t];
  e.dtype = dtype;
  e.has_shape = true;
  for (int64_t d : shape) e.shape.emplace_back(d);
  e.buffer = static_cast<int>(state_->buffers.size());
  state_->buffers.emplace_back(bytes.begin(), bytes.end());
}

void ModelBuilder::AddStringWeight(std::string name, std::vector<int64_t> shape,
                                   absl::Span<const std::string> values) {
  if (state_->Declared(name)) {
    state_->errors.push_back(absl::StrCat("AddStringWeight: '", name, "' is already declared"));
    return;
  }
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0 || (d > 0 && n > (int64_t{1} << 40) / d)) {
      state_->errors.push_back(absl::StrCat("AddStringWeight: '", name, "' has a bad shape"));
      return;
    }
    n *= d;
  }
  if (n != static_cast<int64_t>(values.size())) {
    state_->errors.push_back(absl::StrCat("AddStringWeight: '", name, "' has ", n, " elements but ",
                                          values.size(), " strings were given"));
    return;
  }
  // schemas/grove.fbs: the end offsets, then the bytes.
  std::vector<uint8_t> buf(8 * values.size());
  uint64_t end = 0;
  for (size_t i = 0; i < values.size(); ++i) {
    end += values[i].size();
    std::memcpy(buf.data() + 8 * i, &end, 8);
  }
  for (const std::string& v : values) buf.insert(buf.end(), v.begin(), v.end());
  const int t = state_->Intern(name);
  State::TensorEntry& e = state_->tensors[t];
  e.dtype = DType::kString;
  e.has_shape = true;
  for (int64_t d : shape) e.shape.emplace_back(d);
  e.buffer = static_cast<int>(state_->buffers.size());
  state_->buffers.push_back(std::move(buf));
}

void ModelBuilder::AddOp(std::string type, std::vector<std::string> inputs,
                         std::vector<std::string> outputs,
                         std::vector<std::pair<std::string, AttrValue>> attributes, std::string name) {
  for (const std::string& in : inputs) {
    if (!in.empty()) state_->Intern(in);
  }
  for (const std::string& out : outputs) {
    if (!out.empty()) state_->Intern(out);
  }
  state_->subgraphs[state_->current].ops.push_back(State::OpEntry{
      std::move(type), std::move(name), std::move(inputs), std::move(outputs), std::move(attributes)});
}

absl::StatusOr<std::vector<uint8_t>> ModelBuilder::Finish() const {
  const State& st = *state_;
  if (!st.errors.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("ModelBuilder: ", st.errors.front()));
  }
  absl::flat_hash_map<std::string, int> symbol_index;
  for (size_t i = 0; i < st.symbols.size(); ++i) symbol_index[st.symbols[i].name] = static_cast<int>(i);

  flatbuffers::FlatBufferBuilder fbb(1 << 16);
  std::vector<flatbuffers::Offset<fb::Symbol>> symbols;
  for (const SymbolInfo& s : st.symbols) {
    symbols.push_back(fb::CreateSymbol(fbb, fbb.CreateString(s.name), s.min, s.max));
  }
  std::vector<flatbuffers::Offset<fb::Tensor>> tensors;
  for (const State::TensorEntry& t : st.tensors) {
    std::vector<flatbuffers::Offset<fb::Dim>> dims;
    for (const Dim& d : t.shape) {
      if (d.symbol.empty()) {
        dims.push_back(fb::CreateDim(fbb, d.value, -1));
      } else {
        auto it = symbol_index.find(d.symbol);
        if (it == symbol_index.end()) {
          return absl::InvalidArgumentError(
              absl::StrCat("ModelBuilder: tensor '", t.name, "' uses undeclared symbol '", d.symbol, "'"));
        }
        dims.push_back(fb::CreateDim(fbb, 0, it->second));
      }
    }
    tensors.push_back(fb::CreateTensor(fbb, fbb.CreateString(t.name), static_cast<fb::DType>(t.dtype),
                                       fbb.CreateVector(dims), t.buffer, t.has_shape,
                                       static_cast<fb::ValueKind>(t.kind)));
  }
  auto index_of = [&](const std::string& name) -> int {
    if (name.empty()) return -1;
    return st.tensor_index.at(name);
  };
  std::vector<flatbuffers::Offset<fb::Subgraph>> subgraphs;
  for (const State::SubgraphEntry& sg : st.subgraphs) {
    std::vector<int> ins, outs;
    for (const std::string& n : sg.inputs) ins.push_back(index_of(n));
    for (const std::string& n : sg.outputs) outs.push_back(index_of(n));
    std::vector<flatbuffers::Offset<fb::Operator>> ops;
    for (const State::OpEntry& op : sg.ops) {
      std::vector<int> oi, oo;
      for (const std::string& n : op.inputs) oi.push_back(index_of(n));
      for (const std::string& n : op.outputs) oo.push_back(index_of(n));
      std::vector<flatbuffers::Offset<fb::Attribute>> attrs;
      for (const auto& [name, value] : op.attrs) {
        auto n = fbb.CreateString(name);
        flatbuffers::Offset<fb::Attribute> a;
        if (const auto* v = std::get_if<int64_t>(&value)) {
          a = fb::CreateAttribute(fbb, n, fb::AttrType::INT, *v);
        } else if (const auto* v = std::get_if<double>(&value)) {
          a = fb::CreateAttribute(fbb, n, fb::AttrType::FLOAT, 0, *v);
        } else if (const auto* v = std::get_if<std::string>(&value)) {
          a = fb::CreateAttribute(fbb, n, fb::AttrType::STRING, 0, 0, fbb.CreateString(*v));
        } else if (const auto* v = std::get_if<std::vector<int64_t>>(&value)) {
          a = fb::CreateAttribute(fbb, n, fb::AttrType::INTS, 0, 0, 0, fbb.CreateVector(*v));
        } else if (const auto* v = std::get_if<std::vector<double>>(&value)) {
          a = fb::CreateAttribute(fbb, n, fb::AttrType::FLOATS, 0, 0, 0, 0, fbb.CreateVector(*v));
        } else if (const auto* v = std::get_if<std::vector<std::string>>(&value)) {
          a = fb::CreateAttribute(fbb, n, fb::AttrType::STRINGS, 0, 0, 0, 0, 0,
                                  fbb.CreateVectorOfStrings(*v));
        } else if (const auto* v = std::get_if<SubgraphRef>(&value)) {
          a = fb::CreateAttribute(fbb, n, fb::AttrType::SUBGRAPH, 0, 0, 0, 0, 0, 0, v->index);
        }
        attrs.push_back(a);
      }
      ops.push_back(fb::CreateOperator(fbb, fbb.CreateString(op.type), fbb.CreateString(op.name),
                                       fbb.CreateVector(oi), fbb.CreateVector(oo), fbb.CreateVector(attrs)));
    }
    subgraphs.push_back(fb::CreateSubgraph(fbb, fbb.CreateString(sg.name), fbb.CreateVector(ins),
                                           fbb.CreateVector(outs), fbb.CreateVector(ops)));
  }

  // Weights follow the FlatBuffer in the data region; offsets are relative
  // to its start, so they do not depend on the FlatBuffer's own size.
  std::vector<flatbuffers::Offset<fb::Buffer>> buffers;
  uint64_t data_size = 0;
  for (const std::vector<uint8_t>& buf : st.buffers) {
    data_size = AlignUp(data_size, kWeightAlignment);
    buffers.push_back(fb::CreateBuffer(fbb, data_size, buf.size()));
    data_size += buf.size();
  }
  auto model = fb::CreateModel(fbb, kFormatVersion, fbb.CreateString(st.producer),
                               fbb.CreateVector(symbols), fbb.CreateVector(tensors),
                               fbb.CreateVector(subgraphs), fbb.CreateVector(buffers));
  fb::FinishSizePrefixedModelBuffer(fbb, model);

  const uint64_t data_start = AlignUp(fbb.GetSize(), kWeightAlignment);
  std::vector<uint8_t> out(data_start + data_size, 0);
  std::memcpy(out.data(), fbb.GetBufferPointer(), fbb.GetSize());
  uint64_t off = 0;
  for (const std::vector<uint8_t>& buf : st.buffers) {
    off = AlignUp(off, kWeightAlignment);
    if (!buf.empty()) std::memcpy(out.data() + data_start + off, buf.data(), buf.size());
    off += buf.size();
  }
  return out;
}

absl::Status ModelBuilder::Save(const std::string& path) const {
  absl::StatusOr<std::vector<uint8_t>> bytes = Finish();
  if (!bytes.ok()) return bytes.status();
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) return absl::NotFoundError(absl::StrCat("cannot write '", path, "'"));
  f.write(reinterpret_cast<const char*>(bytes->data()), static_cast<std::streamsize>(bytes->size()));
  if (!f) return absl::DataLossError(absl::StrCat("write to '", path, "' failed"));
  return absl::OkStatus();
}

}  // namespace grove
