// The harness of the prepared CPU kernel tests (prepared_cpu_kernels_test.cc,
// prepared_cpu_kernels2_test.cc): a step as a plan holds it (PreparedStep:
// one prepare, then invokes on new values with the workspace it declared,
// filled with garbage), value patterns, and the two checks every prepared
// kernel passes: one prepare and several invokes equal fresh runs
// (RunOp) with no heap allocation, and a bad attribute or shape reported by
// the prepare.
//
// The heap allocations an invoke makes are counted by the operator new that
// prepared_cpu_kernels_test.cc replaces (once for the whole grove_op_tests
// binary) into the counters below, on this thread while a step watches.
#ifndef GROVE_TEST_OPS_PREPARED_STEP_H_
#define GROVE_TEST_OPS_PREPARED_STEP_H_

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lib/backends/cpu/onednn.h"
#include "lib/ir/element_types.h"
#include "lib/ir/op_registry.h"
#include "lib/runtime/registry.h"
#include "test/op_test_util.h"

namespace grove::testing::prepared_cpu {

// Heap allocations made through operator new while a step watches (this
// thread only): the invokes must take their scratch from the workspace.
inline thread_local bool g_watch_allocations = false;
inline thread_local size_t g_allocations = 0;
inline thread_local size_t g_largest_allocation = 0;

using Shape = std::vector<int64_t>;
using Attrs = std::vector<std::pair<std::string, AttrValue>>;

// Deterministic values in [-1, 1], different per seed.
inline std::vector<float> Pattern(int64_t n, int seed) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[i] = static_cast<float>(((i * 37 + seed * 11 + 5) % 41) - 20) / 20.0f;
  return v;
}

inline Tensor F32(const Shape& shape, int seed) {
  return MakeTensor<float>(DType::kF32, shape, Pattern(Count(shape), seed));
}

// Positive values (variances).
inline Tensor PositiveF32(const Shape& shape, int seed) {
  std::vector<float> v = Pattern(Count(shape), seed);
  for (float& x : v) x = std::fabs(x) + 0.25f;
  return MakeTensor<float>(DType::kF32, shape, v);
}

inline Tensor ToHalf(const Tensor& t, DType dtype) {
  Tensor out = Tensor::Create(dtype, t.shape()).value();
  const float* in = t.as<float>();
  uint16_t* o = static_cast<uint16_t*>(out.data());
  for (int64_t i = 0; i < t.view().num_elements(); ++i) {
    o[i] = dtype == DType::kF16 ? ir::FloatToHalf(in[i]).bits : ir::FloatToBFloat16(in[i]).bits;
  }
  return out;
}

// One op with its attributes and a generator of input values per seed (the
// shapes stay those of seed 0).
struct Case {
  std::string name;
  std::string type;
  Attrs attrs;
  std::function<std::vector<Tensor>(int seed)> inputs;
  int num_outputs = 1;
  bool uses_workspace = false;
  // An op that allocates its outputs (Compress, Unique): per output, the
  // dtype and element count of a buffer as large as any run's. Its invokes
  // may allocate the shapes they hand to AllocateOutput, nothing else.
  std::vector<std::pair<DType, int64_t>> capacity = {};
};

inline void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

// Integers of a pattern per seed, none 0 when `nonzero` (divisors).
template <typename T>
Tensor Ints(DType dtype, const Shape& shape, int seed, bool nonzero = false) {
  std::vector<T> v(static_cast<size_t>(Count(shape)));
  for (size_t i = 0; i < v.size(); ++i) {
    int64_t x = static_cast<int64_t>((i * 7 + seed * 5 + 3) % 13) - 6;
    if (nonzero && x == 0) x = 3;
    if constexpr (std::is_unsigned_v<T>) x = x < 0 ? -x : x;
    v[i] = static_cast<T>(x);
  }
  return MakeTensor<T>(dtype, shape, v);
}

inline Tensor Bools(const Shape& shape, int seed) {
  std::vector<uint8_t> v(static_cast<size_t>(Count(shape)));
  for (size_t i = 0; i < v.size(); ++i) v[i] = ((i * 5 + seed * 3) % 7) < 3 ? 1 : 0;
  return MakeTensor<uint8_t>(DType::kBool, shape, v);
}


inline Tensor I64(const Shape& shape, std::vector<int64_t> v) { return MakeTensor<int64_t>(DType::kI64, shape, v); }

inline const ir::OpDef& Def(const std::string& type) {
  const ir::OpDef* def = runtime::GlobalOpRegistry().Find(type);
  EXPECT_NE(def, nullptr) << type;
  return *def;
}

// A step as a plan holds it: the node, views whose pointers change per run,
// outputs allocated once, the prepared kernel and its workspace.
class PreparedStep {
 public:
  // Outputs get the dtypes and shapes of `like` (a RunOp's results).
  PreparedStep(const std::string& type, const Attrs& attrs, const std::vector<Tensor>& inputs,
               const std::vector<Tensor>& like)
      : def_(Def(type)) {
    node_.type = type;
    node_.def = &def_;
    for (auto& [name, value] : attrs) node_.attrs.Set(name, value);
    for (size_t i = 0; i < inputs.size(); ++i) node_.inputs.push_back(static_cast<int>(i));
    for (size_t i = 0; i < like.size(); ++i) node_.outputs.push_back(static_cast<int>(inputs.size() + i));
    in_views_.resize(inputs.size());
    for (size_t i = 0; i < inputs.size(); ++i) in_views_[i] = inputs[i].view();
    for (const Tensor& t : like) outs_.push_back(Tensor::Create(t.dtype(), t.shape()).value());
    out_views_.resize(outs_.size());
    for (size_t i = 0; i < outs_.size(); ++i) out_views_[i] = outs_[i].view();
    for (TensorView& v : in_views_) in_ptrs_.push_back(&v);
    for (TensorView& v : out_views_) out_ptrs_.push_back(&v);
    ctx_ = std::make_unique<ir::KernelContext>(node_, in_ptrs_, out_ptrs_, &host_);
  }
  ~PreparedStep() { std::free(workspace_); }

  absl::StatusOr<ir::PreparedKernel> Prepare() {
    const ir::PrepareFn prepare = def_.prepares[static_cast<int>(ir::Backend::kCpu)];
    if (prepare == nullptr) return absl::InternalError("no prepare");
    return prepare(*ctx_);
  }

  // Keeps `prepared` and a workspace of its size, filled with garbage.
  void Keep(ir::PreparedKernel prepared) {
    prepared_ = std::move(prepared);
    if (prepared_.workspace_bytes > 0) {
      const size_t bytes = (prepared_.workspace_bytes + 63) / 64 * 64;
      workspace_ = std::aligned_alloc(64, bytes);
      workspace_bytes_ = bytes;
    }
    ctx_->SetPrepared(&prepared_, workspace_);
  }

  // Points the inputs at `inputs` (same shapes) and invokes; `allocations`
  // and `largest` get the number and the largest of the heap allocations the
  // invoke made.
  absl::Status Invoke(const std::vector<Tensor>& inputs, size_t* largest, size_t* allocations = nullptr) {
    for (size_t i = 0; i < inputs.size(); ++i) in_views_[i].data = const_cast<void*>(inputs[i].data());
    if (workspace_ != nullptr) std::memset(workspace_, 0xA5, workspace_bytes_);
    const ir::KernelFn invoke = def_.kernels[static_cast<int>(ir::Backend::kCpu)];
    g_largest_allocation = 0;
    g_allocations = 0;
    g_watch_allocations = true;
    absl::Status s = invoke(*ctx_);
    g_watch_allocations = false;
    *largest = g_largest_allocation;
    if (allocations != nullptr) *allocations = g_allocations;
    return s;
  }

  // Input i's values unknown to the prepare (an activation in a plan).
  void ForgetValue(int i) { in_views_[i].data = nullptr; }

  absl::Status InvokeUnprepared() {
    ir::KernelContext bare(node_, in_ptrs_, out_ptrs_, nullptr);
    return def_.kernels[static_cast<int>(ir::Backend::kCpu)](bare);
  }

  const std::vector<Tensor>& outputs() const { return outs_; }
  // Output i as the kernel last set it (an allocating op's shape).
  const TensorView& output_view(int i) const { return out_views_[i]; }
  const ir::PreparedKernel& prepared() const { return prepared_; }

 private:
  // The host of an op that allocates its outputs (Compress, Unique): output
  // i becomes a view of the buffer of outs_[i], which must be large enough
  // (the step's `like` sets each buffer's size). Nothing else is offered.
  class OutputHost : public ir::KernelContext::Host {
   public:
    explicit OutputHost(PreparedStep& step) : step_(step) {}
    absl::StatusOr<TensorView*> AllocateOutput(int i, DType dtype, std::vector<int64_t> shape) override {
      if (i < 0 || i >= static_cast<int>(step_.outs_.size())) return absl::OutOfRangeError("output index");
      TensorView& v = step_.out_views_[i];
      v.dtype = dtype;
      v.shape = std::move(shape);
      v.data = step_.outs_[i].data();
      if (v.byte_size() > step_.outs_[i].view().byte_size()) return absl::ResourceExhaustedError("output too large");
      step_.out_ptrs_[i] = &v;
      return &v;
    }
    absl::StatusOr<std::vector<TensorView>> RunSubgraph(int, absl::Span<const TensorView>) override {
      return absl::UnimplementedError("no subgraphs");
    }

   private:
    PreparedStep& step_;
  };

  const ir::OpDef& def_;
  OutputHost host_{*this};
  ir::Node node_;
  std::vector<TensorView> in_views_, out_views_;
  std::vector<TensorView*> in_ptrs_, out_ptrs_;
  std::vector<Tensor> outs_;
  std::unique_ptr<ir::KernelContext> ctx_;
  ir::PreparedKernel prepared_;
  void* workspace_ = nullptr;
  size_t workspace_bytes_ = 0;
};

inline std::vector<const Tensor*> Ptrs(const std::vector<Tensor>& v) {
  std::vector<const Tensor*> p;
  for (const Tensor& t : v) p.push_back(&t);
  return p;
}

inline bool SameBytes(const TensorView& a, const TensorView& b) {
  return a.dtype == b.dtype && a.shape == b.shape && std::memcmp(a.data, b.data, a.byte_size()) == 0;
}
inline bool SameBytes(const Tensor& a, const Tensor& b) { return SameBytes(a.view(), b.view()); }

// The step of case `c` on `first`: outputs like a fresh run's, or the
// buffers of c.capacity.
inline absl::StatusOr<std::unique_ptr<PreparedStep>> StepOf(const Case& c, const std::vector<Tensor>& first) {
  std::vector<Tensor> like;
  if (c.capacity.empty()) {
    absl::StatusOr<std::vector<Tensor>> run = RunOp(c.type, Ptrs(first), c.attrs, c.num_outputs);
    if (!run.ok()) return run.status();
    like = *std::move(run);
  }
  for (const auto& [dtype, n] : c.capacity) like.push_back(Tensor::Create(dtype, {n}).value());
  return std::make_unique<PreparedStep>(c.type, c.attrs, first, like);
}

// One prepare, several invokes on new values, each equal to a fresh run byte
// for byte, with the scratch from the workspace. The reference kernels take
// nothing from the heap. A step oneDNN computes (lib/backends/cpu/onednn.h)
// takes its blocked copies and scratchpad from the workspace too, but
// oneDNN's execute builds a small argument map per call (a std::unordered_map
// inside libdnnl: about a dozen allocations of at most a few hundred bytes),
// which grove cannot avoid; those are bounded here instead of forbidden.
inline void CheckOnePrepareManyInvokes(const Case& c) {
  const std::vector<Tensor> first = c.inputs(0);
  absl::StatusOr<std::unique_ptr<PreparedStep>> made = StepOf(c, first);
  ASSERT_TRUE(made.ok()) << made.status();
  PreparedStep& step = **made;
  const int64_t onednn_before = cpu::OneDnnStepsMade();
  absl::StatusOr<ir::PreparedKernel> prepared = step.Prepare();
  ASSERT_TRUE(prepared.ok()) << prepared.status();
  const bool onednn = cpu::OneDnnStepsMade() > onednn_before;
  EXPECT_FALSE(prepared->needs_host);
  // (oneDNN's layouts, and so its workspace, depend on the CPU.)
  if (!onednn) EXPECT_EQ(prepared->workspace_bytes > 0, c.uses_workspace) << prepared->workspace_bytes;
  step.Keep(*std::move(prepared));
  for (int seed = 0; seed < 4; ++seed) {
    SCOPED_TRACE(absl::StrCat("seed ", seed));
    const std::vector<Tensor> inputs = c.inputs(seed);
    size_t largest = 0, allocations = 0;
    absl::Status s = step.Invoke(inputs, &largest, &allocations);
    ASSERT_TRUE(s.ok()) << s;
    // Its scratch is the workspace: nothing comes from the heap, but for
    // oneDNN's argument map: bounded in number and size, never a buffer of
    // the tensors' size; and for an op that allocates its outputs, the
    // shape (a few dims) it hands to AllocateOutput per output.
    if (onednn) {
      EXPECT_LE(allocations, 32u);
      EXPECT_LE(largest, 512u);
    } else if (!c.capacity.empty()) {
      EXPECT_LE(allocations, c.capacity.size());
      EXPECT_LE(largest, 4 * sizeof(int64_t));
    } else {
      EXPECT_EQ(allocations, 0u) << "the largest was " << largest << " bytes";
      if (step.prepared().workspace_bytes > 0) EXPECT_LT(largest, step.prepared().workspace_bytes);
    }
    absl::StatusOr<std::vector<Tensor>> fresh = RunOp(c.type, Ptrs(inputs), c.attrs, c.num_outputs);
    ASSERT_TRUE(fresh.ok()) << fresh.status();
    for (size_t i = 0; i < fresh->size(); ++i) {
      EXPECT_TRUE(SameBytes(step.output_view(static_cast<int>(i)), (*fresh)[i].view())) << "output " << i;
    }
  }
}

// A step invoked without its prepare: an internal error, not a crash.
inline void CheckInvokeWithoutPrepareIsAnInternalError(const Case& c) {
  absl::StatusOr<std::unique_ptr<PreparedStep>> step = StepOf(c, c.inputs(0));
  ASSERT_TRUE(step.ok()) << step.status();
  absl::Status s = (*step)->InvokeUnprepared();
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal) << s;
  EXPECT_THAT(s.message(), ::testing::HasSubstr("the CPU kernel was invoked without its prepare"));
}

// A step whose inputs `unknown` hold values its plan does not know
// (activations): the prepare defers what they decide, and each invoke reads
// them and gives a fresh run's bytes, with no heap allocation where
// `allocation_free`.
struct UnknownInputsCase {
  std::string type;
  Attrs attrs;
  std::function<std::vector<Tensor>(int seed)> inputs;
  std::vector<int> unknown;
  bool allocation_free = false;
};

inline void CheckUnknownInputsAreReadPerRun(const UnknownInputsCase& c) {
  SCOPED_TRACE(c.type);
  const std::vector<Tensor> first = c.inputs(0);
  absl::StatusOr<std::vector<Tensor>> like = RunOp(c.type, Ptrs(first), c.attrs);
  ASSERT_TRUE(like.ok()) << like.status();
  PreparedStep step(c.type, c.attrs, first, *like);
  for (int i : c.unknown) step.ForgetValue(i);
  absl::StatusOr<ir::PreparedKernel> prepared = step.Prepare();
  ASSERT_TRUE(prepared.ok()) << prepared.status();
  step.Keep(*std::move(prepared));
  for (int seed = 0; seed < 3; ++seed) {
    const std::vector<Tensor> in = c.inputs(seed);
    size_t largest = 0, allocations = 0;
    ASSERT_TRUE(step.Invoke(in, &largest, &allocations).ok());
    if (c.allocation_free) EXPECT_EQ(allocations, 0u) << "the largest was " << largest << " bytes";
    absl::StatusOr<std::vector<Tensor>> fresh = RunOp(c.type, Ptrs(in), c.attrs);
    ASSERT_TRUE(fresh.ok()) << fresh.status();
    EXPECT_TRUE(SameBytes(step.outputs()[0], (*fresh)[0])) << "seed " << seed;
  }
}

// A bad attribute or shape: the prepare reports `error` (and the op's type),
// as InvalidArgument; `outputs` are the planned outputs.
struct BadCase {
  std::string name;
  std::string type;
  Attrs attrs;
  std::vector<Tensor> inputs;
  std::vector<std::pair<DType, Shape>> outputs;
  std::string error;
};

inline void PrintTo(const BadCase& c, std::ostream* os) { *os << c.name; }

inline void CheckThePrepareReportsIt(const BadCase& c) {
  std::vector<Tensor> like;
  for (const auto& [dtype, shape] : c.outputs) like.push_back(Tensor::Create(dtype, shape).value());
  PreparedStep step(c.type, c.attrs, c.inputs, like);
  absl::StatusOr<ir::PreparedKernel> prepared = step.Prepare();
  ASSERT_FALSE(prepared.ok());
  EXPECT_EQ(prepared.status().code(), absl::StatusCode::kInvalidArgument) << prepared.status();
  EXPECT_THAT(prepared.status().message(), ::testing::HasSubstr(c.error));
  EXPECT_THAT(prepared.status().message(), ::testing::HasSubstr(c.type));
}

}  // namespace grove::testing::prepared_cpu

#endif  // GROVE_TEST_OPS_PREPARED_STEP_H_
