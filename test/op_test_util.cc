#include "test/op_test_util.h"

#include "absl/strings/str_cat.h"
#include "lib/ir/op_registry.h"
#include "lib/ir/string_arena.h"
#include "lib/runtime/registry.h"

namespace grove::testing {
namespace {

// Kernels that allocate their own outputs (data-dependent shapes) get them here.
class TestHost : public ir::KernelContext::Host {
 public:
  explicit TestHost(std::vector<Tensor>* outs, std::vector<TensorView*>* views) : outs_(outs), views_(views) {}
  absl::StatusOr<TensorView*> AllocateOutput(int i, DType dtype, std::vector<int64_t> shape) override {
    if (i < 0 || i >= static_cast<int>(outs_->size())) return absl::OutOfRangeError("output index");
    absl::StatusOr<Tensor> t = Tensor::Create(dtype, std::move(shape));
    if (!t.ok()) return t.status();
    (*outs_)[i] = std::move(*t);
    view_storage_[i] = (*outs_)[i].view();
    (*views_)[i] = &view_storage_[i];
    return (*views_)[i];
  }
  absl::StatusOr<std::vector<TensorView>> RunSubgraph(int, absl::Span<const TensorView>) override {
    return absl::UnimplementedError("RunOp cannot run subgraphs; use a model");
  }
  ir::StringArena* strings() override { return &strings_; }
  TensorView view_storage_[16];

 private:
  ir::StringArena strings_;
  std::vector<Tensor>* outs_;
  std::vector<TensorView*>* views_;
};

}  // namespace

Tensor MakeStrings(std::vector<int64_t> shape, const std::vector<std::string>& values) {
  std::vector<StringRef> refs(values.begin(), values.end());
  return Tensor::CopyOf(TensorView(DType::kString, std::move(shape), refs.data())).value();
}

std::vector<std::string> Strings(const Tensor& t) {
  std::vector<std::string> out;
  const StringRef* p = t.as<StringRef>();
  for (int64_t i = 0; i < t.view().num_elements(); ++i) out.emplace_back(p[i].view());
  return out;
}

absl::StatusOr<std::vector<Tensor>> RunOp(const std::string& type, std::vector<const Tensor*> inputs,
                                          std::vector<std::pair<std::string, AttrValue>> attrs,
                                          int num_outputs) {
  const ir::OpRegistry& registry = runtime::GlobalOpRegistry();
  const ir::OpDef* def = registry.Find(type);
  if (def == nullptr) return absl::NotFoundError(absl::StrCat("no op ", type));
  ir::Graph graph;
  ir::Node node;
  node.type = type;
  node.def = def;
  for (size_t i = 0; i < inputs.size(); ++i) node.inputs.push_back(inputs[i] ? static_cast<int>(i) : -1);
  for (int i = 0; i < num_outputs; ++i) node.outputs.push_back(static_cast<int>(inputs.size()) + i);
  for (auto& [name, value] : attrs) node.attrs.Set(name, value);

  std::vector<ir::ShapeContext::Input> shape_inputs(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i] == nullptr) continue;
    shape_inputs[i].present = true;
    shape_inputs[i].dtype = inputs[i]->dtype();
    shape_inputs[i].shape = ir::FromConcrete(inputs[i]->shape());
    shape_inputs[i].value = &inputs[i]->view();
  }
  ir::ShapeContext sctx(node, graph, std::move(shape_inputs), nullptr);
  std::vector<Tensor> outs(num_outputs);
  std::vector<TensorView*> out_views(num_outputs, nullptr);
  std::vector<TensorView> out_storage(num_outputs);
  if (!def->kernel_allocates_outputs) {
    if (def->infer == nullptr) return absl::InternalError(absl::StrCat(type, " has no shape function"));
    if (absl::Status s = ir::InferShapes(sctx); !s.ok()) return s;
    for (int i = 0; i < num_outputs; ++i) {
      const auto& o = sctx.outputs()[i];
      if (!o.set) return absl::InternalError(absl::StrCat(type, ": output ", i, " not set by shape function"));
      if (!ir::IsConcrete(o.shape)) {
        return absl::InternalError(absl::StrCat(type, ": output ", i, " shape not concrete"));
      }
      absl::StatusOr<Tensor> t = Tensor::Create(o.dtype, ir::ToConcrete(o.shape));
      if (!t.ok()) return t.status();
      outs[i] = std::move(*t);
      out_storage[i] = outs[i].view();
      out_views[i] = &out_storage[i];
    }
  }
  std::vector<TensorView> in_storage(inputs.size());
  std::vector<TensorView*> in_views(inputs.size(), nullptr);
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i] == nullptr) continue;
    in_storage[i] = inputs[i]->view();
    in_views[i] = &in_storage[i];
  }
  ir::KernelFn fn = def->kernels[static_cast<int>(ir::Backend::kCpu)];
  if (fn == nullptr) return absl::UnimplementedError(absl::StrCat(type, " has no CPU kernel"));
  TestHost host(&outs, &out_views);
  ir::KernelContext kctx(node, in_views, out_views, &host);
  if (absl::Status s = ir::RunKernel(ir::Backend::kCpu, kctx); !s.ok()) return s;
  // Strings the kernel made live in `host`: the results take their own copies.
  for (Tensor& t : outs) {
    if (t.dtype() != DType::kString) continue;
    absl::StatusOr<Tensor> owned = Tensor::CopyOf(t.view());
    if (!owned.ok()) return owned.status();
    t = *std::move(owned);
  }
  return outs;
}

}  // namespace grove::testing
