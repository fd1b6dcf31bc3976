// Fused elementwise chains (lib/backends/cuda/fusion.h): the fused node's
// result on the emulated device against the links run one by one on the CPU.
// The fused kernel computes in f32 between links where the CPU rounds every
// link to f16/bf16, so halves compare with a looser tolerance.
#include "lib/backends/cuda/fusion.h"

#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "lib/backends/cuda/emulated_device.h"
#include "lib/backends/cuda/exec_context.h"
#include "lib/runtime/registry.h"
#include "test/cuda_op_test_util.h"
#include "test/op_test_util.h"

namespace grove {
namespace {

using testing::CompareTensors;

class NoHost : public ir::KernelContext::Host {
 public:
  explicit NoHost(cuda::ExecContext& exec) : exec_(exec) {}
  absl::StatusOr<TensorView*> AllocateOutput(int, DType, std::vector<int64_t>) override {
    return absl::UnimplementedError("no allocation");
  }
  absl::StatusOr<std::vector<TensorView>> RunSubgraph(int, absl::Span<const TensorView>) override {
    return absl::UnimplementedError("no subgraphs");
  }
  void* backend_context() override { return &exec_; }

 private:
  cuda::ExecContext& exec_;
};

// Runs `node` (its CUDA kernel) on `dev` with output dtype/shape from its
// shape function.
absl::StatusOr<Tensor> RunNodeCuda(cuda::Device& dev, const ir::Node& node, const std::vector<const Tensor*>& inputs) {
  ir::Graph graph;
  std::vector<ir::ShapeContext::Input> sin;
  for (const Tensor* t : inputs) sin.push_back({true, t->dtype(), ir::FromConcrete(t->shape()), nullptr});
  ir::ShapeContext sctx(node, graph, std::move(sin), nullptr);
  if (absl::Status s = ir::InferShapes(sctx); !s.ok()) return s;
  const auto& o = sctx.outputs()[0];
  std::vector<void*> ptrs;
  auto alloc = [&](size_t bytes) -> absl::StatusOr<void*> {
    absl::StatusOr<void*> p = dev.Allocate(bytes);
    if (p.ok()) ptrs.push_back(*p);
    return p;
  };
  std::vector<TensorView> in_storage(inputs.size());
  std::vector<TensorView*> in_views;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const TensorView& h = inputs[i]->view();
    absl::StatusOr<void*> p = alloc(h.byte_size());
    if (!p.ok()) return p.status();
    if (absl::Status s = dev.CopyAsync(*p, h.data, h.byte_size(), nullptr); !s.ok()) return s;
    in_storage[i] = TensorView(h.dtype, h.shape, *p);
    in_views.push_back(&in_storage[i]);
  }
  TensorView out(o.dtype, ir::ToConcrete(o.shape), static_cast<void*>(nullptr));
  absl::StatusOr<void*> p = alloc(out.byte_size());
  if (!p.ok()) return p.status();
  out.data = *p;
  std::vector<TensorView*> out_views = {&out};
  absl::Status run;
  {
    cuda::ExecContext exec(dev, nullptr);
    NoHost host(exec);
    ir::KernelContext kctx(node, in_views, out_views, &host);
    run = ir::RunKernel(ir::Backend::kCuda, kctx);
    if (absl::Status s = dev.Synchronize(nullptr); run.ok()) run = s;
  }
  absl::StatusOr<Tensor> result = Tensor::Create(out.dtype, out.shape);
  if (run.ok() && result.ok() && out.byte_size() > 0) {
    run = dev.CopyAsync(result->data(), out.data, out.byte_size(), nullptr);
    if (run.ok()) run = dev.Synchronize(nullptr);
  }
  for (void* q : ptrs) dev.Free(q);
  if (!run.ok()) return run;
  return result;
}

// A chain under construction: tensors by id, link nodes, and the CPU result.
class Chain {
 public:
  // An external input; returns its id.
  int Input(Tensor t) {
    const int id = next_++;
    tensors_.emplace(id, std::move(t));
    return id;
  }
  // Appends a link reading `inputs` (kPrev = the previous link's output,
  // -1 = omitted); runs it on the CPU.
  static constexpr int kPrev = -100;
  void Link(const std::string& type, std::vector<int> inputs,
            std::vector<std::pair<std::string, AttrValue>> attrs = {}) {
    ir::Node n;
    n.type = type;
    n.name = type + std::to_string(nodes_.size());
    n.def = runtime::GlobalOpRegistry().Find(type);
    ASSERT_NE(n.def, nullptr) << type;
    std::vector<const Tensor*> ins;
    for (int& i : inputs) {
      if (i == kPrev) i = last_;
      ins.push_back(i < 0 ? nullptr : &tensors_.at(i));
    }
    n.inputs = inputs;
    for (auto& [k, v] : attrs) n.attrs.Set(k, v);
    absl::StatusOr<std::vector<Tensor>> r = testing::RunOp(type, ins, attrs);
    ASSERT_TRUE(r.ok()) << type << ": " << r.status();
    last_ = next_++;
    tensors_.emplace(last_, std::move((*r)[0]));
    n.outputs = {last_};
    nodes_.push_back(std::move(n));
  }
  std::vector<const ir::Node*> nodes() const {
    std::vector<const ir::Node*> v;
    for (const ir::Node& n : nodes_) v.push_back(&n);
    return v;
  }
  const Tensor& tensor(int id) const { return tensors_.at(id); }
  const Tensor& result() const { return tensors_.at(last_); }

 private:
  std::map<int, Tensor> tensors_;
  std::vector<ir::Node> nodes_;
  int next_ = 0;
  int last_ = -1;
};

Tensor Random(DType dtype, std::vector<int64_t> shape, uint32_t seed, double lo = -2, double hi = 2) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  std::vector<double> v(n);
  uint32_t s = seed * 2654435761u + 7u;
  for (int64_t i = 0; i < n; ++i) {
    s = s * 1664525u + 1013904223u;
    v[i] = lo + (hi - lo) * ((s >> 8) / 16777216.0);
  }
  Tensor f = testing::MakeTensor<double>(DType::kF64, shape, v);
  return Tensor::CastOf(f.view(), dtype).value();
}

// Fuses the chain, runs it, compares with the CPU's link-by-link result.
void ExpectFusedMatches(cuda::Device& dev, const Chain& chain, double tol) {
  std::vector<int> ext;
  absl::StatusOr<ir::Node> fused = cuda::MakeFusedElementwiseNode(chain.nodes(), &ext);
  ASSERT_TRUE(fused.ok()) << fused.status();
  EXPECT_EQ(fused->inputs, ext);
  EXPECT_EQ(fused->outputs, std::vector<int>{chain.nodes().back()->outputs[0]});
  std::vector<const Tensor*> ins;
  for (int id : ext) ins.push_back(&chain.tensor(id));
  absl::StatusOr<Tensor> got = RunNodeCuda(dev, *fused, ins);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(CompareTensors(chain.result(), *got, tol), "");
}

double Tol(DType d) { return d == DType::kF16 ? 1e-2 : d == DType::kBF16 ? 6e-2 : 1e-5; }

TEST(CudaFusionTest, LongChainWithBroadcastOperands) {
  auto dev = testing::TestDevice();
  for (DType dt : {DType::kF32, DType::kF16, DType::kBF16, DType::kF64}) {
    for (const std::vector<int64_t>& shape :
         std::vector<std::vector<int64_t>>{{2, 3, 4}, {1}, {7}, {257}, {1000}, {}, {3, 1, 5}}) {
      SCOPED_TRACE(std::string(DTypeName(dt)) + " rank " + std::to_string(shape.size()));
      Chain c;
      const int x = c.Input(Random(dt, shape, 1));
      std::vector<int64_t> last(shape.empty() ? 0 : 1, shape.empty() ? 1 : shape.back());
      const int w = c.Input(Random(dt, last, 2));
      std::vector<int64_t> col = shape;
      if (!col.empty()) col.back() = 1;
      const int b = c.Input(Random(dt, col, 3));
      const int lo = c.Input(Random(dt, {}, 4, -1.0, -0.5));
      const int hi = c.Input(Random(dt, {1}, 5, 0.5, 1.0));
      const int two = c.Input(testing::MakeTensor<double>(DType::kF64, {}, {2.0}));
      Tensor two_t = Tensor::CastOf(c.tensor(two).view(), dt).value();
      const int two_d = c.Input(std::move(two_t));
      c.Link("Mul", {x, w});
      c.Link("Add", {b, Chain::kPrev});
      c.Link("Sigmoid", {Chain::kPrev});
      c.Link("Clip", {Chain::kPrev, lo, hi});
      c.Link("Gelu", {Chain::kPrev}, {{"approximate", std::string("tanh")}});
      c.Link("LeakyRelu", {Chain::kPrev}, {{"alpha", 0.2}});
      c.Link("Pow", {Chain::kPrev, two_d});
      c.Link("Sub", {Chain::kPrev, x});
      c.Link("Max", {w, Chain::kPrev});
      c.Link("Mean", {Chain::kPrev, b});
      c.Link("Div", {x, Chain::kPrev});
      c.Link("Tanh", {Chain::kPrev});
      c.Link("HardSigmoid", {Chain::kPrev}, {{"alpha", 0.3}, {"beta", 0.4}});
      c.Link("Gelu", {Chain::kPrev});
      c.Link("Elu", {Chain::kPrev}, {{"alpha", 0.7}});
      c.Link("Min", {Chain::kPrev});
      ExpectFusedMatches(*dev, c, Tol(dt));
    }
  }
}

TEST(CudaFusionTest, EveryFusableUnaryOp) {
  auto dev = testing::TestDevice();
  for (const char* op : {"Neg", "Abs", "Exp", "Log", "Sqrt", "Reciprocal", "Erf", "Tanh", "Sigmoid", "Relu",
                         "LeakyRelu", "Elu", "Gelu", "HardSigmoid", "HardSwish", "Softplus", "Sin", "Cos",
                         "Atan", "Sinh", "Asinh", "Softsign", "Selu", "Celu", "ThresholdedRelu"}) {
    for (DType dt : {DType::kF32, DType::kF16}) {
      SCOPED_TRACE(std::string(op) + " " + std::string(DTypeName(dt)));
      Chain c;
      const int x = c.Input(Random(dt, {257}, 11, -3, 3));
      const int y = c.Input(Random(dt, {257}, 12, 0.5, 2));
      c.Link("Mul", {x, y});
      c.Link(op, {Chain::kPrev});
      c.Link("Sum", {y, Chain::kPrev});
      ExpectFusedMatches(*dev, c, Tol(dt));
    }
  }
}

TEST(CudaFusionTest, SingleLinksAndEmpty) {
  auto dev = testing::TestDevice();
  for (const std::vector<int64_t>& shape : std::vector<std::vector<int64_t>>{{0, 3}, {5}}) {
    Chain c;
    const int x = c.Input(Random(DType::kF32, shape, 1));
    c.Link("Relu", {x});
    ExpectFusedMatches(*dev, c, 0);
    Chain d;
    const int a = d.Input(Random(DType::kF32, shape, 2));
    const int b = d.Input(Random(DType::kF32, {3}, 3));
    if (shape.back() == 3) {
      d.Link("Add", {a, b});
      d.Link("Clip", {Chain::kPrev, -1, -1});  // no bounds: a copy
      ExpectFusedMatches(*dev, d, 0);
    }
  }
}

TEST(CudaFusionTest, WhatIsFusable) {
  auto node = [](const std::string& type, std::vector<int> in, std::vector<std::pair<std::string, AttrValue>> a = {}) {
    ir::Node n;
    n.type = type;
    n.def = runtime::GlobalOpRegistry().Find(type);
    n.inputs = std::move(in);
    n.outputs = {99};
    for (auto& [k, v] : a) n.attrs.Set(k, v);
    return n;
  };
  EXPECT_TRUE(cuda::IsFusableElementwise(node("Relu", {0})));
  EXPECT_TRUE(cuda::IsFusableElementwise(node("Add", {0, 1})));
  EXPECT_TRUE(cuda::IsFusableElementwise(node("Clip", {0, -1, 2})));
  EXPECT_TRUE(cuda::IsFusableElementwise(node("Sum", {0, 1})));
  EXPECT_TRUE(cuda::IsFusableElementwise(node("Gelu", {0}, {{"approximate", std::string("tanh")}})));
  EXPECT_FALSE(cuda::IsFusableElementwise(node("Sum", {0, 1, 2})));
  EXPECT_FALSE(cuda::IsFusableElementwise(node("Clip", {0}, {{"min", 0.0}})));
  EXPECT_FALSE(cuda::IsFusableElementwise(node("Equal", {0, 1})));
  EXPECT_FALSE(cuda::IsFusableElementwise(node("Cast", {0}, {{"to", int64_t{1}}})));
  EXPECT_FALSE(cuda::IsFusableElementwise(node("Where", {0, 1, 2})));
  EXPECT_FALSE(cuda::IsFusableElementwise(node("MatMul", {0, 1})));
  EXPECT_FALSE(cuda::IsFusableElementwise(node("Add", {0})));
  EXPECT_FALSE(cuda::IsFusableElementwise(node("Gelu", {0}, {{"approximate", std::string("what")}})));
}

TEST(CudaFusionTest, RefusedChains) {
  auto dev = testing::TestDevice();
  std::vector<int> ext;
  EXPECT_FALSE(cuda::MakeFusedElementwiseNode({}, &ext).ok());
  {
    // Reads the previous output twice.
    Chain c;
    const int x = c.Input(Random(DType::kF32, {4}, 1));
    c.Link("Relu", {x});
    c.Link("Mul", {Chain::kPrev, Chain::kPrev});
    EXPECT_FALSE(cuda::MakeFusedElementwiseNode(c.nodes(), &ext).ok());
  }
  {
    // Does not read it at all.
    Chain c;
    const int x = c.Input(Random(DType::kF32, {4}, 1));
    c.Link("Relu", {x});
    c.Link("Exp", {x});
    EXPECT_FALSE(cuda::MakeFusedElementwiseNode(c.nodes(), &ext).ok());
  }
  {
    // A comparison.
    Chain c;
    const int x = c.Input(Random(DType::kF32, {4}, 1));
    c.Link("Relu", {x});
    c.Link("Greater", {Chain::kPrev, x});
    EXPECT_FALSE(cuda::MakeFusedElementwiseNode(c.nodes(), &ext).ok());
  }
  {
    // 17 links; 9 external inputs.
    Chain c;
    const int x = c.Input(Random(DType::kF32, {4}, 1));
    c.Link("Relu", {x});
    for (int i = 0; i < 16; ++i) c.Link("Neg", {Chain::kPrev});
    EXPECT_FALSE(cuda::MakeFusedElementwiseNode(c.nodes(), &ext).ok());
    Chain d;
    d.Link("Relu", {d.Input(Random(DType::kF32, {4}, 1))});
    for (int i = 0; i < 8; ++i) d.Link("Add", {Chain::kPrev, d.Input(Random(DType::kF32, {4}, 2 + i))});
    EXPECT_FALSE(cuda::MakeFusedElementwiseNode(d.nodes(), &ext).ok());
  }
  {
    // Fuses, then the kernel refuses operands of another dtype or shape.
    Chain c;
    const int x = c.Input(Random(DType::kF32, {4}, 1));
    const int y = c.Input(Random(DType::kF32, {4}, 2));
    c.Link("Add", {x, y});
    c.Link("Exp", {Chain::kPrev});
    absl::StatusOr<ir::Node> fused = cuda::MakeFusedElementwiseNode(c.nodes(), &ext);
    ASSERT_TRUE(fused.ok()) << fused.status();
    EXPECT_EQ(fused->def->foldable, false);
    EXPECT_EQ(fused->def->kernels[static_cast<int>(ir::Backend::kCpu)], nullptr);
    Tensor a = Random(DType::kF32, {4}, 1);
    Tensor i = Random(DType::kI32, {4}, 2);
    Tensor h = Random(DType::kF16, {4}, 2);
    Tensor wrong = Random(DType::kF32, {3}, 2);
    EXPECT_FALSE(RunNodeCuda(*dev, *fused, {&a, &i}).ok());
    EXPECT_FALSE(RunNodeCuda(*dev, *fused, {&a, &h}).ok());
    EXPECT_FALSE(RunNodeCuda(*dev, *fused, {&a, &wrong}).ok());
    EXPECT_FALSE(RunNodeCuda(*dev, *fused, {&i, &i}).ok());
    EXPECT_TRUE(RunNodeCuda(*dev, *fused, {&a, &a}).ok());
  }
}

}  // namespace
}  // namespace grove
