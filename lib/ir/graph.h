// The in-memory graph of a loaded model: symbols, one table of tensors shared
// by all subgraphs, and subgraphs of nodes. Built by lib/format from a verified
// file; immutable afterwards. Weight data points into the model's mapping.
#ifndef GROVE_LIB_IR_GRAPH_H_
#define GROVE_LIB_IR_GRAPH_H_

#include <cstdint>
#include <string>
#include <utility>
#include "absl/strings/string_view.h"
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "grove/grove.h"
#include "lib/ir/sym_dim.h"

namespace grove::ir {

struct OpDef;

struct Symbol {
  std::string name;
  int64_t min = 1;
  int64_t max = 1;
};

struct TensorDecl {
  std::string name;
  DType dtype = DType::kUnknown;
  bool has_shape = false;  // declared shape (inputs, weights, optional hints)
  SymShape shape;
  // Weights: the bytes in the model's mapping (64-byte aligned).
  bool is_weight = false;
  const uint8_t* data = nullptr;
  uint64_t bytes = 0;
};

// Typed attribute lookup with defaults; wrong types are load-time errors, so
// these only see the declared kinds.
class Attributes {
 public:
  // Replaces a value of the same name.
  void Set(std::string name, AttrValue value);
  void Reserve(size_t n) { values_.reserve(n); }
  bool Has(absl::string_view name) const { return Find(name) != nullptr; }
  const AttrValue* Find(absl::string_view name) const;
  int64_t GetInt(absl::string_view name, int64_t def) const;
  double GetFloat(absl::string_view name, double def) const;
  std::string GetString(absl::string_view name, std::string def) const;
  std::vector<int64_t> GetInts(absl::string_view name, std::vector<int64_t> def = {}) const;
  std::vector<double> GetFloats(absl::string_view name, std::vector<double> def = {}) const;
  // -1 when absent.
  int GetSubgraph(absl::string_view name) const;
  // In the order they were first set.
  const std::vector<std::pair<std::string, AttrValue>>& all() const { return values_; }

 private:
  // A node has a handful: searched in order, they need no hash map per node
  // (one allocation, and little code, when a model is opened).
  std::vector<std::pair<std::string, AttrValue>> values_;
};

struct Node {
  std::string type;
  std::string name;  // may be empty; Describe() names it by index then
  const OpDef* def = nullptr;
  std::vector<int> inputs;   // tensor indices; -1 = omitted optional input
  std::vector<int> outputs;  // tensor indices; -1 = omitted optional output
  // Outer-scope tensors the node's subgraphs capture (If, Loop): read by the
  // node as if they were inputs, for lifetimes and ordering.
  std::vector<int> implicit_inputs;
  Attributes attrs;
  int subgraph = 0;
  int index = 0;  // position in its subgraph
  // "op 3 (MatMul 'fc1') in subgraph 'main'"-style context for errors.
  std::string Describe() const;
};

struct Subgraph {
  std::string name;
  std::vector<int> inputs;
  std::vector<int> outputs;
  std::vector<Node> nodes;
  // Tensors used here but defined in an enclosing subgraph (ONNX outer scope);
  // filled by the loader, resolved from the calling frame at run time.
  std::vector<int> captures;
  int depth = 0;  // 0 for main
};

struct Graph {
  std::vector<Symbol> symbols;
  std::vector<TensorDecl> tensors;
  std::vector<Subgraph> subgraphs;  // [0] is main
  std::vector<std::string> symbol_names() const;
};

// The largest tensor grove plans, runs or loads: 256 TiB, counted over the
// non-zero dims (an empty tensor's other dims stay within it too, since
// kernels loop over them). Every concrete shape a shape function sets (see
// ir::InferShapes), every input, weight, .npy array and kernel-allocated
// output passes CheckedByteSize, so the planner and kernels multiply dims out
// without overflow.
inline constexpr uint64_t kMaxTensorBytes = uint64_t{1} << 48;

// Bytes of `dims` elements of `dtype`, or InvalidArgument naming `what` on a
// negative dim or a size past the limits above (the message gives the true
// size).
absl::StatusOr<uint64_t> CheckedByteSize(DType dtype, absl::Span<const int64_t> dims,
                                         absl::string_view what);

}  // namespace grove::ir

#endif  // GROVE_LIB_IR_GRAPH_H_
