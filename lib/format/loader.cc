// Verified loading of .grove files. The file is untrusted: the FlatBuffers
// verifier bounds every table and vector, then the checks here bound every
// index, size and dim before the graph is built, and the dataflow checks make
// sure each op reads only values defined before it (so there are no cycles).
#include "lib/format/loader.h"

#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "absl/container/inlined_vector.h"
#include "absl/hash/hash.h"
#include "absl/strings/str_cat.h"
#include "flatbuffers/flatbuffers.h"
#include "lib/format/file_layout.h"
#include "lib/format/regular_file.h"
#include "lib/ir/value_type.h"
#include "schemas/grove_generated.h"

namespace grove::format {
namespace {

absl::Status Bad(absl::string_view where, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("invalid model: ", where, ": ", what));
}

// A FlatBuffers string as a view into the model's bytes (no copy).
absl::string_view View(const flatbuffers::String* s) { return absl::string_view(s->c_str(), s->size()); }

// The index of the first table in `items` whose name an earlier one has
// (tables without a name are skipped: they are refused on their own), or -1.
// One pass over an open-addressed table of indices (absl::Hash is seeded per
// process, so crafted names cannot make the probes quadratic): little code,
// and no allocation up to 64 names.
template <typename T>
int FirstRepeatedName(const flatbuffers::Vector<flatbuffers::Offset<T>>* items) {
  if (items == nullptr) return -1;
  const flatbuffers::uoffset_t n = items->size();
  size_t slots = 128;  // a power of two, at least twice the names
  while (slots < 2 * static_cast<size_t>(n)) slots <<= 1;
  absl::InlinedVector<int, 128> table(slots, -1);  // an index into items, or -1
  const size_t mask = slots - 1;
  for (flatbuffers::uoffset_t i = 0; i < n; ++i) {
    const flatbuffers::String* name = items->Get(i)->name();
    if (name == nullptr || name->size() == 0) continue;
    const absl::string_view view = View(name);
    for (size_t h = absl::HashOf(view) & mask;; h = (h + 1) & mask) {
      const int j = table[h];
      if (j < 0) {
        table[h] = static_cast<int>(i);
        break;
      }
      if (View(items->Get(j)->name()) == view) return static_cast<int>(i);  // the first i with an earlier twin
    }
  }
  return -1;
}

std::string TensorWhere(int index, const fb::Tensor* t) {
  if (t != nullptr && t->name() != nullptr) return absl::StrCat("tensor ", index, " ('", t->name()->str(), "')");
  return absl::StrCat("tensor ", index);
}

std::string OpWhere(int sg, int op, const fb::Operator* o) {
  std::string type = o->type() ? o->type()->str() : "?";
  if (o->name() != nullptr && o->name()->size() > 0) {
    return absl::StrCat("subgraph ", sg, " op ", op, " (", type, " '", o->name()->str(), "')");
  }
  return absl::StrCat("subgraph ", sg, " op ", op, " (", type, ")");
}

// The verifier checks only that a vector's length field sits on a 4-byte
// boundary, not that its elements are aligned to their own size: a [long] or
// [double] vector at an odd multiple of 4 passes it, and reading it through
// FlatBuffers is then a misaligned 8-byte load. Builders always align a
// vector's elements to their size, so such a vector comes from a crafted
// file, and it is refused here. (The file's first byte is page- or
// 64-byte-aligned, so an offset's alignment is the address's.)
template <typename T, typename Where>
absl::Status CheckElementsAligned(const flatbuffers::Vector<T>* v, const Where& where, absl::string_view name) {
  if (v == nullptr || v->size() == 0) return absl::OkStatus();
  if (reinterpret_cast<uintptr_t>(v->Data()) % alignof(T) != 0) {
    return Bad(where(), absl::StrCat("attribute '", name, "' has a vector whose ", sizeof(T),
                                   "-byte elements are not aligned to ", alignof(T), " bytes (corrupt file)"));
  }
  return absl::OkStatus();
}

// `where` makes the error's context ("subgraph 0 op 3 (Conv 'c1')"); it is
// called only on an error, so a valid model builds no message strings.
template <typename Where>
absl::StatusOr<AttrValue> ConvertAttribute(const fb::Attribute& a, ir::AttrKind want, const Where& where,
                                           int num_subgraphs) {
  const absl::string_view name = View(a.name());
  auto mismatch = [&](absl::string_view got) {
    return Bad(where(), absl::StrCat("attribute '", name, "' must be ", ir::AttrKindName(want), ", got ", got));
  };
  if (absl::Status s = CheckElementsAligned(a.ints(), where, name); !s.ok()) return s;
  if (absl::Status s = CheckElementsAligned(a.floats(), where, name); !s.ok()) return s;
  switch (a.type()) {
    case fb::AttrType::INT:
      if (want == ir::AttrKind::kFloat) return AttrValue(static_cast<double>(a.i()));
      if (want != ir::AttrKind::kInt) return mismatch("int");
      return AttrValue(static_cast<int64_t>(a.i()));
    case fb::AttrType::FLOAT:
      if (want != ir::AttrKind::kFloat) return mismatch("float");
      return AttrValue(a.f());
    case fb::AttrType::STRING:
      if (want != ir::AttrKind::kString) return mismatch("string");
      return AttrValue(a.s() ? a.s()->str() : std::string());
    case fb::AttrType::INTS: {
      if (want == ir::AttrKind::kFloats) {
        std::vector<double> v;
        if (a.ints()) for (int64_t x : *a.ints()) v.push_back(static_cast<double>(x));
        return AttrValue(std::move(v));
      }
      if (want != ir::AttrKind::kInts) return mismatch("ints");
      std::vector<int64_t> v;
      if (a.ints()) v.assign(a.ints()->begin(), a.ints()->end());
      return AttrValue(std::move(v));
    }
    case fb::AttrType::FLOATS: {
      if (want != ir::AttrKind::kFloats) return mismatch("floats");
      std::vector<double> v;
      if (a.floats()) v.assign(a.floats()->begin(), a.floats()->end());
      return AttrValue(std::move(v));
    }
    case fb::AttrType::STRINGS: {
      if (want != ir::AttrKind::kStrings) return mismatch("strings");
      std::vector<std::string> v;
      if (a.strings()) {
        for (const flatbuffers::String* s : *a.strings()) v.push_back(s ? s->str() : std::string());
      }
      return AttrValue(std::move(v));
    }
    case fb::AttrType::SUBGRAPH:
      if (want != ir::AttrKind::kSubgraph) return mismatch("subgraph");
      if (a.subgraph() <= 0 || a.subgraph() >= num_subgraphs) {
        return Bad(where(), absl::StrCat("attribute '", name, "' refers to subgraph ", a.subgraph(),
                                       ", which is not a body subgraph (1..", num_subgraphs - 1, ")"));
      }
      return AttrValue(SubgraphRef{a.subgraph()});
  }
  return Bad(where(), absl::StrCat("attribute '", name, "' has unknown type ", static_cast<int>(a.type())));
}

// Checks the dataflow of subgraph `sg` given the tensors visible from
// enclosing scopes, records captures, and recurses into bodies.
class ScopeChecker {
 public:
  ScopeChecker(ir::Graph& graph, std::vector<int>& reference_count)
      : graph_(graph), refs_(reference_count), scope_of_(graph.tensors.size(), -1),
        active_(graph.subgraphs.size(), false) {}

  // A tensor is visible in subgraph `sg` when it is a weight, or was defined
  // (so far) in `sg` or in a subgraph on the chain of bodies being checked
  // around it: the enclosing scopes at this point. A body's tensors go out of
  // view when its check ends. No set of visible tensors is copied per body.
  absl::Status Check(int sg, int depth) {
    if (depth > kMaxSubgraphDepth) {
      return Bad(absl::StrCat("subgraph ", sg), absl::StrCat("subgraphs nest deeper than ", kMaxSubgraphDepth));
    }
    ir::Subgraph& s = graph_.subgraphs[sg];
    s.depth = depth;
    active_[sg] = true;
    std::vector<int> captures;  // sorted and made unique at the end
    auto define = [&](int t, const auto& where) -> absl::Status {
      if (graph_.tensors[t].is_weight) {
        return Bad(where(), absl::StrCat("writes weight '", graph_.tensors[t].name, "'"));
      }
      if (scope_of_[t] >= 0) {
        return Bad(where(), absl::StrCat("tensor ", t, " ('", graph_.tensors[t].name,
                                         "') is defined more than once"));
      }
      scope_of_[t] = sg;
      return absl::OkStatus();
    };
    auto use = [&](int t, const auto& where) -> absl::Status {
      const int scope = scope_of_[t];
      if (graph_.tensors[t].is_weight || scope == sg) return absl::OkStatus();
      if (scope >= 0 && active_[scope]) {
        captures.push_back(t);
        return absl::OkStatus();
      }
      return Bad(where(), absl::StrCat("reads tensor ", t, " ('", graph_.tensors[t].name,
                                       "') before it is defined (or from outside its scope)"));
    };
    auto input_where = [sg] { return absl::StrCat("subgraph ", sg, " input"); };
    for (int t : s.inputs) {
      if (absl::Status st = define(t, input_where); !st.ok()) return st;
    }
    std::vector<int> bodies;
    for (ir::Node& node : s.nodes) {
      auto where = [&node] { return node.Describe(); };
      for (int t : node.inputs) {
        if (t < 0) continue;
        if (absl::Status st = use(t, where); !st.ok()) return st;
      }
      // Bodies see everything visible here, at this point.
      bodies.clear();
      for (const auto& [name, value] : node.attrs.all()) {
        if (const auto* ref = std::get_if<SubgraphRef>(&value)) bodies.push_back(ref->index);
      }
      if (!bodies.empty()) {
        std::sort(bodies.begin(), bodies.end());
        std::vector<int> implicit;
        for (int b : bodies) {
          if (++refs_[b] > 1) {
            return Bad(where(), absl::StrCat("subgraph ", b, " is used by more than one op (or recursively)"));
          }
          if (absl::Status st = Check(b, depth + 1); !st.ok()) return st;
          for (int c : graph_.subgraphs[b].captures) {
            implicit.push_back(c);
            if (absl::Status st = use(c, where); !st.ok()) return st;
          }
        }
        SortUnique(implicit);
        node.implicit_inputs = std::move(implicit);
      } else {
        node.implicit_inputs.clear();
      }
      for (int t : node.outputs) {
        if (t < 0) continue;
        if (absl::Status st = define(t, where); !st.ok()) return st;
      }
    }
    auto output_where = [sg] { return absl::StrCat("subgraph ", sg, " output"); };
    for (int t : s.outputs) {
      if (absl::Status st = use(t, output_where); !st.ok()) return st;
    }
    SortUnique(captures);
    s.captures = std::move(captures);
    active_[sg] = false;
    return absl::OkStatus();
  }

 private:
  static void SortUnique(std::vector<int>& v) {
    std::sort(v.begin(), v.end());
    v.erase(std::unique(v.begin(), v.end()), v.end());
  }

  ir::Graph& graph_;
  std::vector<int>& refs_;
  std::vector<int> scope_of_;  // per tensor: the subgraph that defines it, -1 before
  std::vector<bool> active_;   // per subgraph: on the chain being checked now
};

// A string weight's buffer (schemas/grove.fbs): `n` u64 end offsets, then
// the bytes. The references point into the mapping: nothing is copied.
absl::Status DecodeStringWeight(const uint8_t* buf, uint64_t size, uint64_t n, absl::string_view where,
                                LoadedGraph& out) {
  if (n > size / 8) {
    return Bad(where, absl::StrCat("string buffer holds ", size, " bytes, too few for the offsets of ", n,
                                   " strings"));
  }
  const uint64_t text_size = size - 8 * n;
  const char* text = reinterpret_cast<const char*>(buf + 8 * n);
  std::vector<StringRef> refs(n);
  uint64_t begin = 0;
  for (uint64_t i = 0; i < n; ++i) {
    uint64_t end;
    std::memcpy(&end, buf + 8 * i, 8);  // little-endian, as every supported host
    if (end < begin || end > text_size) {
      return Bad(where, absl::StrCat("string ", i, " ends at byte ", end, ", outside ", begin, "..", text_size));
    }
    refs[i] = StringRef(absl::string_view(end > begin ? text + begin : nullptr, end - begin));
    begin = end;
  }
  if (begin != text_size) {
    return Bad(where, absl::StrCat("string buffer has ", text_size - begin, " bytes after its last string"));
  }
  out.string_weights.push_back(std::move(refs));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::shared_ptr<const ModelBytes>> ModelBytes::MapFile(const std::string& path) {
  // A FIFO or device is refused before anything could block on it.
  absl::StatusOr<RegularFile> file = RegularFile::Open(path, "model");
  if (!file.ok()) return file.status();
  if (file->size() > std::numeric_limits<size_t>::max()) {
    return absl::InvalidArgumentError(absl::StrCat("model '", path, "' is too large to map"));
  }
  auto bytes = std::shared_ptr<ModelBytes>(new ModelBytes());
  bytes->size_ = static_cast<size_t>(file->size());
  if (bytes->size_ > 0 && bytes->size_ <= ModelBytes::kReadBelow) {
    // One read into aligned memory: mmap, the first touch's page fault and
    // munmap at release cost several times what copying a small file does.
    void* p = std::aligned_alloc(kWeightAlignment, AlignUp(bytes->size_, kWeightAlignment));
    if (p == nullptr) return absl::ResourceExhaustedError(absl::StrCat("cannot allocate memory for model '", path, "'"));
    bytes->data_ = static_cast<const uint8_t*>(p);  // freed by ~ModelBytes from here on
    absl::Status read = file->ReadAt(0, p, bytes->size_);
    if (!read.ok()) return read;
  } else if (bytes->size_ > 0) {
    void* p = ::mmap(nullptr, bytes->size_, PROT_READ, MAP_PRIVATE, file->fd(), 0);
    if (p == MAP_FAILED) {
      return absl::InternalError(absl::StrCat("cannot map model '", path, "': ", std::strerror(errno)));
    }
    bytes->data_ = static_cast<const uint8_t*>(p);
    bytes->mapped_ = true;
  }
  return std::shared_ptr<const ModelBytes>(std::move(bytes));
}

absl::StatusOr<std::shared_ptr<const ModelBytes>> ModelBytes::CopyOf(absl::Span<const uint8_t> in) {
  auto bytes = std::shared_ptr<ModelBytes>(new ModelBytes());
  bytes->size_ = in.size();
  if (!in.empty()) {
    void* p = std::aligned_alloc(kWeightAlignment, AlignUp(in.size(), kWeightAlignment));
    if (p == nullptr) return absl::ResourceExhaustedError("cannot allocate a copy of the model");
    std::memcpy(p, in.data(), in.size());
    bytes->data_ = static_cast<const uint8_t*>(p);
  }
  return std::shared_ptr<const ModelBytes>(std::move(bytes));
}

ModelBytes::~ModelBytes() {
  if (data_ == nullptr) return;
  if (mapped_) {
    ::munmap(const_cast<uint8_t*>(data_), size_);
  } else {
    std::free(const_cast<uint8_t*>(data_));
  }
}

absl::StatusOr<LoadedGraph> LoadGraph(const ModelBytes& bytes, const ir::OpRegistry& registry) {
  const uint8_t* data = bytes.data();
  const uint64_t file_size = bytes.size();
  if (file_size < 8) {
    return Bad("file", absl::StrCat("is ", file_size, " bytes, too small to be a grove model"));
  }
  // The identifier first (bytes 8..11 of a size-prefixed table): a file of
  // another kind (an ONNX model given where a .grove one is wanted) is named
  // as such, not as a grove model of an impossible size.
  if (file_size >= 12 && !fb::SizePrefixedModelBufferHasIdentifier(data)) {
    // An ONNX ModelProto starts with field 1 (ir_version, a varint): 0x08.
    return Bad("file", absl::StrCat("not a grove model (missing the 'GROV' file identifier)",
                                    data[0] == 0x08 ? "; if it is an ONNX model, convert it first: grove import "
                                                      "MODEL.onnx -o MODEL.grove"
                                                    : ""));
  }
  const uint64_t fb_size = flatbuffers::ReadScalar<uint32_t>(data);
  if (fb_size + 4 > file_size) {
    return Bad("file", absl::StrCat("is truncated: the model table claims ", fb_size + 4,
                                    " bytes but the file has ", file_size));
  }
  if (fb_size + 4 >= FLATBUFFERS_MAX_BUFFER_SIZE) return Bad("file", "model table is larger than 2 GiB");
  if (!fb::SizePrefixedModelBufferHasIdentifier(data)) {
    return Bad("file", "not a grove model (missing the 'GROV' file identifier)");
  }
  flatbuffers::Verifier::Options opts;
  opts.max_depth = 64;
  opts.max_tables = 10'000'000;
  flatbuffers::Verifier verifier(data, fb_size + 4, opts);
  if (!fb::VerifySizePrefixedModelBuffer(verifier)) {
    return Bad("file", "the FlatBuffers verifier rejected the model table (corrupt or truncated)");
  }
  const fb::Model* m = fb::GetSizePrefixedModel(data);
  LoadedGraph out;
  out.format_version = m->format_version();
  if (out.format_version == 0 || out.format_version > kFormatVersion) {
    return Bad("header", absl::StrCat("format version ", out.format_version, " is not supported (this grove reads 1..",
                                      kFormatVersion, ")"));
  }
  if (m->producer()) out.producer = m->producer()->str();
  ir::Graph& g = out.graph;

  // Symbols.
  // Names are views into the model's bytes; error contexts ("symbol 3") are
  // made only when there is an error.
  if (m->symbols()) {
    const int repeated = FirstRepeatedName(m->symbols());
    g.symbols.reserve(m->symbols()->size());
    for (flatbuffers::uoffset_t i = 0; i < m->symbols()->size(); ++i) {
      const fb::Symbol* s = m->symbols()->Get(i);
      auto where = [i] { return absl::StrCat("symbol ", i); };
      if (s->name() == nullptr || s->name()->size() == 0) return Bad(where(), "has no name");
      if (static_cast<int>(i) == repeated) {
        return Bad(where(), absl::StrCat("name '", s->name()->str(), "' is used twice"));
      }
      if (s->min() < 0 || s->max() < s->min() || s->max() > kMaxDim) {
        return Bad(absl::StrCat(where(), " ('", s->name()->str(), "')"),
                   absl::StrCat("range ", s->min(), "..", s->max(), " is not 0 <= min <= max <= 2^40"));
      }
      g.symbols.push_back(ir::Symbol{s->name()->str(), s->min(), s->max()});
    }
  }

  // Buffers: inside the data region, aligned, not overlapping the table.
  const uint64_t data_start = AlignUp(fb_size + 4, kWeightAlignment);
  const int num_buffers = m->buffers() ? static_cast<int>(m->buffers()->size()) : 0;
  for (int i = 0; i < num_buffers; ++i) {
    const fb::Buffer* b = m->buffers()->Get(i);
    auto where = [i] { return absl::StrCat("buffer ", i); };
    if (b->offset() % kWeightAlignment != 0) {
      return Bad(where(), absl::StrCat("offset ", b->offset(), " is not a multiple of 64"));
    }
    if (b->offset() > file_size || b->size() > file_size || data_start > file_size ||
        data_start + b->offset() > file_size - b->size()) {
      return Bad(where(), absl::StrCat("bytes [", b->offset(), ", +", b->size(), ") of the data region at ", data_start,
                                     " run past the end of the ", file_size, "-byte file (truncated?)"));
    }
  }

  // Tensors.
  const int num_tensors = m->tensors() ? static_cast<int>(m->tensors()->size()) : 0;
  std::vector<int> buffer_users(num_buffers, 0);
  const int repeated_tensor = FirstRepeatedName(m->tensors());
  g.tensors.resize(num_tensors);
  for (int i = 0; i < num_tensors; ++i) {
    const fb::Tensor* t = m->tensors()->Get(i);
    auto where = [i, t] { return TensorWhere(i, t); };
    if (t->name() == nullptr || t->name()->size() == 0) return Bad(where(), "has no name");
    if (i == repeated_tensor) return Bad(where(), "name is used by another tensor");
    ir::TensorDecl& d = g.tensors[i];
    d.name = t->name()->str();
    const int dt = static_cast<int>(t->dtype());
    if (dt < 0 || dt > static_cast<int>(DType::kString)) return Bad(where(), absl::StrCat("dtype ", dt, " is unknown"));
    d.dtype = static_cast<DType>(dt);
    const int kind = static_cast<int>(t->kind());
    if (kind < 0 || kind > static_cast<int>(ValueKind::kOptionalSequence)) {
      return Bad(where(), absl::StrCat("value kind ", kind, " is unknown"));
    }
    if (kind != 0) {
      if (t->buffer() >= 0) return Bad(where(), "a weight must be a tensor");
      d.dtype = ir::BoxedDType(static_cast<ValueKind>(kind), d.dtype);
    }
    d.has_shape = t->has_shape();
    if (t->shape()) {
      if (t->shape()->size() > 16) return Bad(where(), absl::StrCat("rank ", t->shape()->size(), " is above 16"));
      d.shape.reserve(t->shape()->size());
      for (flatbuffers::uoffset_t k = 0; k < t->shape()->size(); ++k) {
        const fb::Dim* dim = t->shape()->Get(k);
        if (dim->symbol() >= 0) {
          if (dim->symbol() >= static_cast<int>(g.symbols.size())) {
            return Bad(where(), absl::StrCat("dim ", k, " uses symbol ", dim->symbol(), " but the model has ",
                                           g.symbols.size(), " symbols"));
          }
          d.shape.push_back(ir::SymDim::Symbol(dim->symbol()));
        } else {
          if (dim->value() < 0 || dim->value() > kMaxDim) {
            return Bad(where(), absl::StrCat("dim ", k, " is ", dim->value(), ", outside 0..2^40"));
          }
          d.shape.push_back(ir::SymDim(dim->value()));
        }
      }
    }
    // A declared constant shape is held to the size limit like any other, so
    // shape functions over it multiply out only sizes that fit.
    // A weight (checked below to have such a shape) keeps the size.
    uint64_t declared_bytes = 0;
    if (kind == 0 && d.dtype != DType::kUnknown && d.has_shape && ir::IsConcrete(d.shape)) {
      int64_t dims[16];  // the rank is at most 16 (above)
      for (size_t k = 0; k < d.shape.size(); ++k) dims[k] = d.shape[k].value();
      absl::StatusOr<uint64_t> bytes =
          ir::CheckedByteSize(d.dtype, absl::MakeConstSpan(dims, d.shape.size()), "declared shape");
      if (!bytes.ok()) return Bad(where(), bytes.status().message());
      declared_bytes = *bytes;
    }
    if (t->buffer() >= 0) {
      if (t->buffer() >= num_buffers) {
        return Bad(where(), absl::StrCat("buffer index ", t->buffer(), " is out of range (", num_buffers, " buffers)"));
      }
      if (d.dtype == DType::kUnknown) return Bad(where(), "a weight needs a dtype");
      if (!d.has_shape || !ir::IsConcrete(d.shape)) return Bad(where(), "a weight needs a constant shape");
      // Its declared shape passed the size check above (kind 0, a dtype, a
      // constant shape), which gave its size: declared_bytes.
      const fb::Buffer* b = m->buffers()->Get(t->buffer());
      if (d.dtype == DType::kString) {
        absl::Status st = DecodeStringWeight(data + data_start + b->offset(), b->size(),
                                             declared_bytes / sizeof(StringRef), where(), out);
        if (!st.ok()) return st;
        ++buffer_users[t->buffer()];
        d.is_weight = true;
        d.bytes = declared_bytes;
        d.data = reinterpret_cast<const uint8_t*>(out.string_weights.back().data());
        continue;
      }
      if (b->size() != declared_bytes) {
        return Bad(where(), absl::StrCat("buffer ", t->buffer(), " holds ", b->size(), " bytes but ",
                                         DTypeName(d.dtype), ir::ShapeToString(d.shape), " needs ", declared_bytes));
      }
      ++buffer_users[t->buffer()];
      d.is_weight = true;
      d.bytes = b->size();
      d.data = data + data_start + b->offset();
    }
  }

  // Subgraphs and operators.
  const int num_subgraphs = m->subgraphs() ? static_cast<int>(m->subgraphs()->size()) : 0;
  if (num_subgraphs == 0) return Bad("model", "has no subgraphs (subgraph 0 is the main graph)");
  // `where` and `role` name the place in an error ("subgraph 0 op 3 (Conv)",
  // "input 1"); both are callables, run only on an error.
  auto check_index = [&](int t, const auto& where, const auto& role, bool allow_missing) -> absl::Status {
    if (t == -1 && allow_missing) return absl::OkStatus();
    if (t < 0 || t >= num_tensors) {
      return Bad(where(), absl::StrCat(role(), " tensor index ", t, " is out of range (", num_tensors, " tensors)"));
    }
    return absl::OkStatus();
  };
  g.subgraphs.resize(num_subgraphs);
  absl::InlinedVector<bool, 64> seen;  // per attribute of the op's definition: given
  for (int si = 0; si < num_subgraphs; ++si) {
    const fb::Subgraph* s = m->subgraphs()->Get(si);
    ir::Subgraph& sg = g.subgraphs[si];
    auto where = [si] { return absl::StrCat("subgraph ", si); };
    sg.name = s->name() ? s->name()->str() : absl::StrCat("subgraph", si);
    if (s->inputs()) {
      sg.inputs.reserve(s->inputs()->size());
      for (int t : *s->inputs()) {
        if (absl::Status st = check_index(t, where, [] { return "input"; }, false); !st.ok()) return st;
        sg.inputs.push_back(t);
      }
    }
    if (s->outputs()) {
      sg.outputs.reserve(s->outputs()->size());
      for (int t : *s->outputs()) {
        if (absl::Status st = check_index(t, where, [] { return "output"; }, false); !st.ok()) return st;
        sg.outputs.push_back(t);
      }
    }
    const int num_ops = s->operators() ? static_cast<int>(s->operators()->size()) : 0;
    sg.nodes.resize(num_ops);
    for (int oi = 0; oi < num_ops; ++oi) {
      const fb::Operator* o = s->operators()->Get(oi);
      auto ow = [si, oi, o] { return OpWhere(si, oi, o); };
      ir::Node& n = sg.nodes[oi];
      n.subgraph = si;
      n.index = oi;
      if (o->type() == nullptr) return Bad(ow(), "has no op type");
      n.type = o->type()->str();
      if (o->name()) n.name = o->name()->str();
      n.def = registry.Find(n.type);
      if (n.def == nullptr) return Bad(ow(), absl::StrCat("op type '", n.type, "' is not supported by this grove"));
      const int ni = o->inputs() ? static_cast<int>(o->inputs()->size()) : 0;
      const int no = o->outputs() ? static_cast<int>(o->outputs()->size()) : 0;
      if (ni < n.def->min_inputs || (n.def->max_inputs >= 0 && ni > n.def->max_inputs)) {
        return Bad(ow(), absl::StrCat("has ", ni, " inputs; ", n.type, " takes ", n.def->min_inputs, "..",
                                      n.def->max_inputs < 0 ? std::string("any") : absl::StrCat(n.def->max_inputs)));
      }
      if (no < n.def->min_outputs || (n.def->max_outputs >= 0 && no > n.def->max_outputs)) {
        return Bad(ow(), absl::StrCat("has ", no, " outputs; ", n.type, " gives ", n.def->min_outputs, "..",
                                      n.def->max_outputs < 0 ? std::string("any") : absl::StrCat(n.def->max_outputs)));
      }
      n.inputs.reserve(ni);
      for (int k = 0; k < ni; ++k) {
        const int t = o->inputs()->Get(k);
        auto role = [k] { return absl::StrCat("input ", k); };
        if (absl::Status st = check_index(t, ow, role, true); !st.ok()) return st;
        if (t < 0 && k < n.def->min_inputs && !(k < 64 && (n.def->omittable_inputs >> k) & 1)) return Bad(ow(), absl::StrCat("required input ", k, " is missing"));
        n.inputs.push_back(t);
      }
      n.outputs.reserve(no);
      for (int k = 0; k < no; ++k) {
        const int t = o->outputs()->Get(k);
        // Output 0 may be omitted only where the op makes every output optional (LSTM's Y).
        const bool may_omit = k > 0 || n.def->min_outputs == 0;
        auto role = [k] { return absl::StrCat("output ", k); };
        if (absl::Status st = check_index(t, ow, role, may_omit); !st.ok()) return st;
        n.outputs.push_back(t);
      }
      // Every attribute must be one of the definition's (an unknown one is an
      // error at once), so "given twice" is tracked per definition entry.
      seen.assign(n.def->attrs.size(), false);
      if (o->attributes()) {
        // At most one of each the definition has (more is an error below):
        // a crafted vector's length does not size the allocation.
        n.attrs.Reserve(std::min<size_t>(o->attributes()->size(), n.def->attrs.size()));
        for (const fb::Attribute* a : *o->attributes()) {
          if (a->name() == nullptr) return Bad(ow(), "has an attribute without a name");
          const absl::string_view an = View(a->name());
          const ir::AttrSpec* spec = n.def->FindAttr(an);
          if (spec == nullptr) return Bad(ow(), absl::StrCat("unknown attribute '", an, "' for ", n.type));
          const size_t which = static_cast<size_t>(spec - n.def->attrs.data());
          if (seen[which]) return Bad(ow(), absl::StrCat("attribute '", an, "' appears twice"));
          seen[which] = true;
          absl::StatusOr<AttrValue> v = ConvertAttribute(*a, spec->kind, ow, num_subgraphs);
          if (!v.ok()) return v.status();
          n.attrs.Set(std::string(an), std::move(*v));
        }
      }
      for (size_t i = 0; i < n.def->attrs.size(); ++i) {
        const ir::AttrSpec& spec = n.def->attrs[i];
        if (spec.required && !seen[i]) {
          return Bad(ow(), absl::StrCat("required attribute '", spec.name, "' is missing"));
        }
      }
    }
  }

  // Main graph inputs need a dtype and a declared shape; bodies' inputs may
  // leave their shapes to inference.
  for (int t : g.subgraphs[0].inputs) {
    const ir::TensorDecl& d = g.tensors[t];
    // A sequence or optional may leave its tensors' shape undeclared.
    if (d.dtype == DType::kUnknown || (!d.has_shape && !ir::IsBoxed(d.dtype))) {
      return Bad(absl::StrCat("main input '", d.name, "'"), "needs a dtype and a declared shape");
    }
    if (d.is_weight) return Bad(absl::StrCat("main input '", d.name, "'"), "is also a weight");
  }
  if (g.subgraphs[0].outputs.empty()) return Bad("main graph", "has no outputs");

  std::vector<int> refs(num_subgraphs, 0);
  ScopeChecker checker(g, refs);
  if (absl::Status st = checker.Check(0, 0); !st.ok()) return st;
  if (!g.subgraphs[0].captures.empty()) return Bad("main graph", "reads values nobody defines");
  for (int si = 1; si < num_subgraphs; ++si) {
    if (refs[si] == 0) return Bad(absl::StrCat("subgraph ", si, " ('", g.subgraphs[si].name, "')"), "is not used by any op");
  }
  return out;
}

}  // namespace grove::format
