// The op registry: one OpDef per op type with its arity, attributes, shape
// function and one kernel per backend. Nothing switches over op types; the
// loader, planner and executor only look entries up here.
//
// An op group registers itself in two halves that live apart:
//   lib/ir/ops/<group>.cc            RegisterXxxOps(OpRegistry&)   (arity, attrs, shapes)
//   lib/backends/cpu/<group>.cc      RegisterCpuXxxKernels(OpRegistry&)
// and lib/runtime/registry.cc calls them all once.
#ifndef GROVE_LIB_IR_OP_REGISTRY_H_
#define GROVE_LIB_IR_OP_REGISTRY_H_

#include <memory>
#include <string>
#include "absl/strings/string_view.h"
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "grove/grove.h"
#include "lib/ir/graph.h"
#include "lib/ir/sym_dim.h"

namespace grove::ir {

class StringArena;
class IntraOpThreads;  // lib/ir/intra_op_threads.h

enum class Backend : int { kCpu = 0, kCuda = 1 };
inline constexpr int kNumBackends = 2;

enum class AttrKind { kInt, kFloat, kString, kInts, kFloats, kStrings, kSubgraph };
absl::string_view AttrKindName(AttrKind kind);

struct AttrSpec {
  std::string name;
  AttrKind kind;
  bool required = false;
};

// What a shape function sees. Shapes are symbolic or concrete; values are
// known only for weights and for small tensors folded at plan time (shape
// arithmetic), so a function that needs a value must cope with nullptr by
// giving unknown dims (SymDim::Unknown()) of the right rank when it can.
class ShapeContext {
 public:
  struct Input {
    bool present = false;
    DType dtype = DType::kUnknown;
    SymShape shape;
    const TensorView* value = nullptr;  // host bytes, when known
    // False: even the rank is known only when run (a tensor taken out of a
    // sequence whose items' ranks are not known); `shape` is then empty. For
    // a sequence or optional (lib/ir/value_type.h), about its tensors.
    bool rank_known = true;
  };
  struct Output {
    DType dtype = DType::kUnknown;
    SymShape shape;
    bool set = false;
    bool rank_known = true;
  };
  // Infers a subgraph's outputs from its inputs' dtypes and shapes (If, Loop).
  class SubgraphInferrer {
   public:
    virtual ~SubgraphInferrer() = default;
    virtual absl::StatusOr<std::vector<Output>> Infer(int subgraph, absl::Span<const Input> inputs) = 0;
    // True when the shapes are those of one call (a plan being built), false
    // for a model's symbolic inputs (the check at load).
    virtual bool planning() const = 0;
  };

  ShapeContext(const Node& node, const Graph& graph, std::vector<Input> inputs,
               SubgraphInferrer* inferrer);

  const Node& node() const { return node_; }
  const Attributes& attrs() const { return node_.attrs; }
  const Graph& graph() const { return graph_; }
  int num_inputs() const { return static_cast<int>(inputs_.size()); }
  int num_outputs() const { return static_cast<int>(outputs_.size()); }
  bool has_input(int i) const { return i < num_inputs() && inputs_[i].present; }
  const Input& input(int i) const { return inputs_[i]; }
  DType input_dtype(int i) const { return inputs_[i].dtype; }
  const SymShape& input_shape(int i) const { return inputs_[i].shape; }
  int input_rank(int i) const { return static_cast<int>(inputs_[i].shape.size()); }
  const TensorView* input_value(int i) const { return has_input(i) ? inputs_[i].value : nullptr; }
  // Reads an integer tensor value (i32 or i64) known at plan time.
  // Returns false when it is not known.
  bool InputInts(int i, std::vector<int64_t>* out) const;

  void SetOutput(int i, DType dtype, SymShape shape);
  // An output whose rank (or, boxed, whose tensors' rank) is known only when run.
  void SetOutputUnknownRank(int i, DType dtype);
  const std::vector<Output>& outputs() const { return outputs_; }
  SubgraphInferrer* inferrer() const { return inferrer_; }

  // InvalidArgument naming the node: "op 3 (Concat 'c') in subgraph 'main': <msg>".
  absl::Status Error(absl::string_view msg) const;

 private:
  const Node& node_;
  const Graph& graph_;
  std::vector<Input> inputs_;
  std::vector<Output> outputs_;
  SubgraphInferrer* inferrer_;
};

using ShapeFn = absl::Status (*)(ShapeContext& ctx);

// Runs the node's shape function (ctx.node().def->infer) and checks what it
// set: a constant dim is never negative, and every output whose shape is
// concrete passes CheckedByteSize (lib/ir/graph.h). The one way shape
// functions are called, so the planner and kernels multiply out only sizes
// checked here.
absl::Status InferShapes(ShapeContext& ctx);

// What a kernel sees. Inputs and outputs are host views on the CPU backend,
// device views on the CUDA backend (see lib/backends/cuda/exec_context.h); an
// omitted optional input is nullptr. Outputs are allocated before the call,
// except for ops whose OpDef says kernel_allocates_outputs: those call
// AllocateOutput once per output.
class KernelContext {
 public:
  class Host {
   public:
    virtual ~Host() = default;
    // dtype kUnknown takes the planned dtype (a Loop's scan output after
    // zero iterations).
    virtual absl::StatusOr<TensorView*> AllocateOutput(int i, DType dtype, std::vector<int64_t> shape) = 0;
    // Runs a subgraph of the model with these inputs (captures come from the
    // calling frame). The views stay valid until the next RunSubgraph of the
    // same subgraph with the same shapes, or the end of the calling op.
    virtual absl::StatusOr<std::vector<TensorView>> RunSubgraph(int subgraph,
                                                                absl::Span<const TensorView> inputs) = 0;
    // The backend's state for this step (cuda::ExecContext on the CUDA
    // backend), nullptr on the CPU backend.
    virtual void* backend_context() { return nullptr; }
    // The threads a CPU kernel may split its work over: the session's
    // intra-op pool (SessionOptions::intra_op_threads). nullptr: the calling
    // thread only (RunKernel's hosts, plan-time folding, prepares, a CUDA
    // session's CPU steps).
    virtual IntraOpThreads* intra_op_threads() { return nullptr; }
    // Where the bytes of strings the kernel makes live (lib/ir/string_arena.h);
    // nullptr where no strings may be made (plan-time folding).
    virtual StringArena* strings() { return nullptr; }
    // Workspace for a prepared kernel run outside a plan (RunKernel: tests,
    // plan-time folding, a step prepared when it runs): memory of the
    // backend that lives until the next call, 64-byte aligned. By default
    // host memory this Host owns; a CUDA host gives device memory. A plan's
    // steps get theirs from the arena instead.
    virtual absl::StatusOr<void*> Workspace(uint64_t bytes);

   private:
    std::unique_ptr<uint8_t[], void (*)(void*)> workspace_{nullptr, nullptr};
    uint64_t workspace_bytes_ = 0;
  };

  KernelContext(const Node& node, absl::Span<TensorView* const> inputs,
                absl::Span<TensorView* const> outputs, Host* host)
      : node_(node), inputs_(inputs), outputs_(outputs), host_(host) {}

  const Node& node() const { return node_; }
  const Attributes& attrs() const { return node_.attrs; }
  int num_inputs() const { return static_cast<int>(inputs_.size()); }
  int num_outputs() const { return static_cast<int>(outputs_.size()); }
  bool has_input(int i) const { return i < num_inputs() && inputs_[i] != nullptr; }
  const TensorView& input(int i) const { return *inputs_[i]; }
  bool has_output(int i) const { return i < num_outputs() && outputs_[i] != nullptr; }
  TensorView& output(int i) const { return *outputs_[i]; }
  Host* host() const { return host_; }

  // What the kernel's prepare made for this step (see PrepareFn), and its
  // workspace (PreparedKernel::workspace_bytes of backend memory). Set by
  // whoever invokes a kernel that has a prepare: the executor, RunKernel.
  void SetPrepared(const struct PreparedKernel* prepared, void* workspace) {
    prepared_ = prepared;
    workspace_ = workspace;
  }
  const struct PreparedKernel* prepared() const { return prepared_; }
  // The kernel's own parameters made by its prepare; T is the type it stored.
  template <typename T>
  const T& params() const;
  void* workspace() const { return workspace_; }
  absl::StatusOr<TensorView*> AllocateOutput(int i, DType dtype, std::vector<int64_t> shape) const {
    return host_->AllocateOutput(i, dtype, std::move(shape));
  }
  // A copy of `s` that lives as long as the run's strings (see Host::strings).
  absl::StatusOr<StringRef> StoreString(absl::string_view s) const;
  absl::Status Error(absl::string_view msg) const;

 private:
  const Node& node_;
  absl::Span<TensorView* const> inputs_;
  absl::Span<TensorView* const> outputs_;
  Host* host_;
  const struct PreparedKernel* prepared_ = nullptr;
  void* workspace_ = nullptr;
};

using KernelFn = absl::Status (*)(KernelContext& ctx);

// Prepare once, invoke cheaply (TFLite's prepare/eval, XNNPACK's
// reshape/setup/invoke). A kernel's prepare runs once per plan, on the step's
// planned dtypes and concrete shapes: it parses attributes, checks shapes,
// builds launch parameters and declares its workspace. Its invoke then only
// fills pointers and launches: no parsing, no validation, no allocation.
//
// What prepare sees: a KernelContext whose views carry the step's dtypes and
// shapes. Their data must not be read, except on the CPU an input whose host
// bytes the plan knows (a weight, folded shape arithmetic); on CUDA those
// bytes come from cuda::ExecContext::host_input(i). Host::backend_context()
// is the backend's state (cuda::ExecContext on CUDA: the device, to choose a
// variant), but nothing may be launched. A prepare may run again for the same
// shapes (RunKernel prepares on every call).
struct PreparedKernel {
  // The kernel's own parameter struct, read back by KernelContext::params<T>().
  std::shared_ptr<const void> params;
  // Scratch one invoke needs, planned in the arena (device memory on CUDA);
  // KernelContext::workspace() points at it. 64-byte aligned.
  uint64_t workspace_bytes = 0;
  // The invoke waits for the device or reads device data back whatever its
  // inputs (a data-dependent check): on CUDA its step ends a segment.
  bool needs_host = false;
};
using PrepareFn = absl::StatusOr<PreparedKernel> (*)(const KernelContext& ctx);

template <typename T>
const T& KernelContext::params() const {
  return *static_cast<const T*>(prepared_->params.get());
}

// One backend's kernel for an op.
struct KernelDef {
  KernelFn invoke = nullptr;
  PrepareFn prepare = nullptr;  // optional: kernels without one do it all in invoke
  // Bit i: the invoke reads input i's values on the host (Reshape's shape,
  // Slice's starts). On CUDA that costs nothing when the plan knows the value
  // (a weight or a folded value: ExecContext has its host copy); otherwise the
  // value is copied back, so the step ends a segment.
  uint64_t host_inputs = 0;
};

struct OpDef {
  std::string type;
  int min_inputs = 0;
  int max_inputs = 0;  // -1: variadic
  int min_outputs = 1;
  int max_outputs = 1;
  // Bit i set: input i (< min_inputs) may still be omitted (-1), as Loop's
  // trip count and condition.
  uint64_t omittable_inputs = 0;
  std::vector<AttrSpec> attrs;
  ShapeFn infer = nullptr;
  KernelFn kernels[kNumBackends] = {};
  // Per backend, beside kernels[b]: its prepare and host reads (KernelDef).
  PrepareFn prepares[kNumBackends] = {};
  uint64_t host_inputs[kNumBackends] = {};
  // If and Loop: output shapes are known only after running, so the kernel
  // allocates its outputs.
  bool kernel_allocates_outputs = false;
  // May be evaluated at plan time when every input value is known and the
  // outputs are small (shape arithmetic). Off for control flow.
  bool foldable = true;
  // False for ops that read only their inputs' shapes (Shape): they fold at
  // plan time even when the input values are not known.
  bool reads_input_values = true;
  // Its kernels on every backend take sequences and optionals (host values),
  // as If's and Loop's do; any other op given one runs its CPU kernel.
  bool boxed_on_every_backend = false;
  // Optional: false when the kernel of `backend` does not take this node's
  // attributes (BatchNormalization's training mode on CUDA); a CUDA plan then
  // runs the CPU kernel with copies.
  bool (*backend_takes)(Backend backend, const Node& node) = nullptr;

  const AttrSpec* FindAttr(absl::string_view name) const;
};

class OpRegistry {
 public:
  // Room for `ops` ops without rehashing (the library's registry is built
  // when a process first opens a model).
  void Reserve(size_t ops) { ops_.reserve(ops); }
  // Adds an op; fails if the type is taken.
  absl::Status Register(OpDef def);
  // Sets the kernel of an op already registered.
  absl::Status SetKernel(absl::string_view type, Backend backend, KernelFn fn);
  absl::Status SetKernel(absl::string_view type, Backend backend, const KernelDef& kernel);
  const OpDef* Find(absl::string_view type) const;
  bool Supports(absl::string_view type, Backend backend) const;
  std::vector<std::string> Types() const;  // sorted

 private:
  absl::flat_hash_map<std::string, std::unique_ptr<OpDef>> ops_;
};

// Runs `backend`'s kernel of ctx.node() outside a plan (tests, plan-time
// folding, a step whose shapes are known only when it runs): its prepare
// first when it has one, with the workspace from ctx.host()->Workspace().
absl::Status RunKernel(Backend backend, KernelContext& ctx);

// ---------------------------------------------------------------------------
// Helpers shared by shape functions and kernels.
// ---------------------------------------------------------------------------

// Normalises a possibly negative axis for `rank`; error if out of range.
absl::StatusOr<int> NormalizeAxis(int64_t axis, int rank);
// A shape that only concrete inputs can settle: an If whose branches differ
// in rank, picked by a test of a dim (`if x.shape[-1] == 1: x = x.squeeze(-1)`
// in a traced model). Over symbolic inputs (at load) it stops the inference
// without refusing the model; a plan, where the test folds, picks the branch.
absl::Status DeferredShapeError(absl::string_view msg);
bool IsDeferredShapeError(const absl::Status& status);

// True when a present tensor input's rank is not known (see
// ShapeContext::Input::rank_known): the node's shapes wait for the run, and
// its outputs' ranks are unknown until then.
bool RanksKnownOnlyWhenRun(absl::Span<const ShapeContext::Input> inputs);
// Dims of a concrete shape where -1 stands for a dim known only when run.
SymShape FromPartlyConcrete(absl::Span<const int64_t> dims);

// Numpy/ONNX multidirectional broadcasting of symbolic shapes. A symbolic
// dim against a constant (not 1) takes the constant; two different symbolic
// dims take the first. Kernels check the concrete shapes when they run.
absl::StatusOr<SymShape> BroadcastShapes(absl::Span<const SymShape> shapes);
// Row-major strides of `shape` (in elements).
std::vector<int64_t> Strides(absl::Span<const int64_t> shape);
int64_t NumElements(absl::Span<const int64_t> shape);

}  // namespace grove::ir

#endif  // GROVE_LIB_IR_OP_REGISTRY_H_
