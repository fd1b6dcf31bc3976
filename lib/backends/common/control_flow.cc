#include "lib/backends/common/control_flow.h"

#include "absl/strings/str_cat.h"
#include "lib/ir/value_type.h"

namespace grove::backends {

absl::Status CheckCondShape(const ir::KernelContext& ctx, const TensorView& v, absl::string_view what) {
  if (v.num_elements() == 1) return absl::OkStatus();
  return ctx.Error(absl::StrCat(what, " must hold one element, has ", v.num_elements()));
}

absl::StatusOr<std::vector<TensorView>> RunIfBranch(ir::KernelContext& ctx, bool cond) {
  const int branch = ctx.attrs().GetSubgraph(cond ? "then_branch" : "else_branch");
  absl::StatusOr<std::vector<TensorView>> outs = ctx.host()->RunSubgraph(branch, {});
  if (!outs.ok()) return outs.status();
  if (static_cast<int>(outs->size()) != ctx.num_outputs()) {
    return ctx.Error(absl::StrCat("branch gave ", outs->size(), " outputs, wants ", ctx.num_outputs()));
  }
  return outs;
}

absl::StatusOr<std::vector<TensorView>> RunLoopBody(ir::KernelContext& ctx, int body, int64_t iter,
                                                    absl::Span<const TensorView> carried, LoopBodyScalars& scalars) {
  if (iter >= kMaxLoopIterations) {
    return absl::ResourceExhaustedError(absl::StrCat(
        ctx.node().Describe(), ": ran ", kMaxLoopIterations,
        " iterations without stopping (grove's limit for every Loop; set a deadline to stop sooner)"));
  }
  scalars.iter = iter;
  scalars.cond = 1;
  std::vector<TensorView> inputs(carried.size() + 2);
  inputs[0] = TensorView(DType::kI64, {}, &scalars.iter);
  inputs[1] = TensorView(DType::kBool, {}, &scalars.cond);
  for (size_t i = 0; i < carried.size(); ++i) inputs[2 + i] = carried[i];
  return ctx.host()->RunSubgraph(body, inputs);
}

absl::Status CheckScanBytes(const ir::KernelContext& ctx, int64_t iter, uint64_t held_bytes, uint64_t adding_bytes) {
  if (adding_bytes <= kMaxLoopScanBytes && held_bytes <= kMaxLoopScanBytes - adding_bytes) return absl::OkStatus();
  return absl::ResourceExhaustedError(absl::StrCat(
      ctx.node().Describe(), ": its scan outputs would hold ", held_bytes, " + ", adding_bytes, " bytes after iteration ",
      iter, ", past grove's limit of ", kMaxLoopScanBytes, " bytes for one Loop's scan outputs"));
}

absl::Status CheckScanShape(const ir::KernelContext& ctx, int j, int64_t iter, const TensorView& o,
                            TensorView& scan_shape) {
  if (iter == 0) {
    scan_shape = TensorView(o.dtype, o.shape, static_cast<void*>(nullptr));
  } else if (o.shape != scan_shape.shape || o.dtype != scan_shape.dtype) {
    return ctx.Error(absl::StrCat("scan output ", j, " changes shape between iterations"));
  }
  return absl::OkStatus();
}

absl::Status SetBoxedOutput(ir::KernelContext& ctx, int i, DType dtype, const Value& from) {
  absl::StatusOr<TensorView*> out = ctx.AllocateOutput(i, dtype, {});
  if (!out.ok()) return out.status();
  ir::MutableBoxedValue(**out) = from;
  return absl::OkStatus();
}

void CarriedBoxes::Enter(int i, const TensorView& in, TensorView& view) {
  if (!ir::IsBoxed(in.dtype)) return;
  values_[i] = ir::BoxedValue(in);
  view = TensorView(in.dtype, {}, static_cast<void*>(&values_[i]));
}

absl::Status CarriedBoxes::Stage(const ir::KernelContext& ctx, int i, TensorView& carried, const TensorView& out) {
  const bool fits = ir::IsBoxed(carried.dtype)
                        ? out.dtype == carried.dtype || out.dtype == ir::UnwrapOptional(carried.dtype)
                        : !ir::IsBoxed(out.dtype);
  if (!fits) {
    return ctx.Error(absl::StrCat("loop-carried value ", i, " enters as ", DTypeName(carried.dtype),
                                  " but the body returns ", DTypeName(out.dtype)));
  }
  if (ir::IsBoxed(out.dtype)) {
    next_[i] = ir::BoxedValue(out);
    carried.dtype = out.dtype;
  }
  return absl::OkStatus();
}

void CarriedBoxes::Commit() {
  for (size_t i = 0; i < values_.size(); ++i) {
    if (next_[i].kind() != ValueKind::kTensor) values_[i] = std::move(next_[i]);
    next_[i] = Value();
  }
}

bool ReadsOtherCarried(const TensorView& o, int i, absl::Span<const TensorView> carried) {
  if (ir::IsBoxed(o.dtype) || o.byte_size() == 0) return false;
  for (size_t j = 0; j < carried.size(); ++j) {
    if (static_cast<int>(j) != i && carried[j].data == o.data) return true;
  }
  return false;
}

absl::Status CheckScanIsTensor(const ir::KernelContext& ctx, int j, const TensorView& o) {
  if (!ir::IsBoxed(o.dtype)) return absl::OkStatus();
  return ctx.Error(absl::StrCat("scan output ", j, " is a ", DTypeName(o.dtype), "; scan outputs are tensors"));
}

}  // namespace grove::backends
