// Tensor::CastOf: the public face of the CPU Cast kernel, so tools and users
// convert dtypes with exactly the rules models get.
#include "absl/strings/str_cat.h"
#include "grove/grove.h"
#include "lib/ir/op_registry.h"
#include "lib/ir/plain_host.h"
#include "lib/runtime/registry.h"

namespace grove {

absl::StatusOr<Tensor> Tensor::CastOf(const TensorView& view, DType dtype) {
  if (DTypeSize(dtype) == 0 || DTypeSize(view.dtype) == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("Tensor::CastOf: cannot cast ", DTypeName(view.dtype), " to ", DTypeName(dtype)));
  }
  if (view.byte_size() > 0 && view.data == nullptr) {
    return absl::InvalidArgumentError("Tensor::CastOf: data is null");
  }
  absl::StatusOr<Tensor> out = Create(dtype, view.shape);
  if (!out.ok()) return out.status();
  const ir::OpDef* cast = runtime::GlobalOpRegistry().Find("Cast");
  if (cast == nullptr || cast->kernels[static_cast<int>(ir::Backend::kCpu)] == nullptr) {
    return absl::InternalError("Tensor::CastOf: no CPU Cast kernel");
  }
  ir::Node node;
  node.type = "Cast";
  node.def = cast;
  node.attrs.Set("to", static_cast<int64_t>(dtype));
  TensorView in = view;
  TensorView result = out->view();
  TensorView* ins[] = {&in};
  TensorView* outs[] = {&result};
  ir::PlainHost host("Tensor::CastOf", /*strings=*/true);
  ir::KernelContext ctx(node, ins, outs, &host);
  if (absl::Status s = ir::RunKernel(ir::Backend::kCpu, ctx); !s.ok()) return s;
  // Strings the kernel made live in `host`: the result takes its own copy.
  if (dtype == DType::kString) return CopyOf(out->view());
  return out;
}

}  // namespace grove
