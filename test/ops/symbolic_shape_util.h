// Helpers for the linalg and shape-op tests that go below RunOp: run one
// op's shape function on symbolic inputs, and run a CPU kernel against an
// output planned with a given shape (to reach the kernels' run-time checks
// of dims that a shape function accepted symbolically).
//
//   SymDim b = SymDim::Symbol(0);
//   auto out = InferSymbolic("MatMul", {{DType::kF32, {b, 32}}, {DType::kF32, {32, 8}}});
//   EXPECT_EQ(out->shape, (SymShape{b, 8}));
#ifndef GROVE_TEST_OPS_SYMBOLIC_SHAPE_UTIL_H_
#define GROVE_TEST_OPS_SYMBOLIC_SHAPE_UTIL_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "grove/grove.h"
#include "lib/ir/op_registry.h"
#include "lib/runtime/registry.h"

namespace grove::testing {

// One input of a symbolic shape inference: dtype, shape, optional value.
struct SymInput {
  DType dtype = DType::kUnknown;
  ir::SymShape shape;
  const Tensor* value = nullptr;
  bool present = true;
};

inline SymInput Absent() {
  SymInput in;
  in.present = false;
  return in;
}

inline absl::StatusOr<ir::ShapeContext::Output> InferSymbolic(
    const std::string& type, const std::vector<SymInput>& inputs,
    std::vector<std::pair<std::string, AttrValue>> attrs = {}) {
  const ir::OpDef* def = runtime::GlobalOpRegistry().Find(type);
  if (def == nullptr || def->infer == nullptr) return absl::NotFoundError(absl::StrCat("no op ", type));
  ir::Graph graph;
  ir::Node node;
  node.type = type;
  node.def = def;
  std::vector<ir::ShapeContext::Input> ins(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    node.inputs.push_back(inputs[i].present ? static_cast<int>(i) : -1);
    ins[i].present = inputs[i].present;
    ins[i].dtype = inputs[i].dtype;
    ins[i].shape = inputs[i].shape;
    ins[i].value = inputs[i].value ? &inputs[i].value->view() : nullptr;
  }
  node.outputs.push_back(static_cast<int>(inputs.size()));
  for (auto& [name, value] : attrs) node.attrs.Set(name, value);
  ir::ShapeContext ctx(node, graph, std::move(ins), nullptr);
  if (absl::Status s = ir::InferShapes(ctx); !s.ok()) return s;
  if (!ctx.outputs()[0].set) return absl::InternalError("output 0 not set");
  return ctx.outputs()[0];
}

// A failed status whose message contains `part`.
inline ::testing::AssertionResult ErrorContains(const absl::Status& s, absl::string_view part) {
  if (s.ok()) return ::testing::AssertionFailure() << "expected an error containing '" << part << "', got OK";
  if (!absl::StrContains(s.message(), part)) {
    return ::testing::AssertionFailure() << "expected an error containing '" << part << "', got " << s;
  }
  return ::testing::AssertionSuccess();
}

// Runs the CPU kernel of `type` with its output allocated as `out_shape`,
// skipping the shape function, as a plan made from symbolic shapes would.
inline absl::StatusOr<Tensor> RunKernelPlanned(const std::string& type, std::vector<const Tensor*> inputs,
                                               DType out_dtype, std::vector<int64_t> out_shape,
                                               std::vector<std::pair<std::string, AttrValue>> attrs = {}) {
  const ir::OpDef* def = runtime::GlobalOpRegistry().Find(type);
  if (def == nullptr) return absl::NotFoundError(absl::StrCat("no op ", type));
  ir::KernelFn fn = def->kernels[static_cast<int>(ir::Backend::kCpu)];
  if (fn == nullptr) return absl::UnimplementedError(absl::StrCat(type, " has no CPU kernel"));
  ir::Node node;
  node.type = type;
  node.def = def;
  for (auto& [name, value] : attrs) node.attrs.Set(name, value);
  absl::StatusOr<Tensor> out = Tensor::Create(out_dtype, std::move(out_shape));
  if (!out.ok()) return out.status();
  std::vector<TensorView> in_storage(inputs.size());
  std::vector<TensorView*> in_views(inputs.size(), nullptr);
  for (size_t i = 0; i < inputs.size(); ++i) {
    node.inputs.push_back(inputs[i] ? static_cast<int>(i) : -1);
    if (inputs[i] == nullptr) continue;
    in_storage[i] = inputs[i]->view();
    in_views[i] = &in_storage[i];
  }
  node.outputs.push_back(static_cast<int>(inputs.size()));
  TensorView out_view = out->view();
  std::vector<TensorView*> out_views = {&out_view};
  ir::KernelContext ctx(node, in_views, out_views, nullptr);
  if (absl::Status s = ir::RunKernel(ir::Backend::kCpu, ctx); !s.ok()) return s;
  return out;
}

}  // namespace grove::testing

#endif  // GROVE_TEST_OPS_SYMBOLIC_SHAPE_UTIL_H_
