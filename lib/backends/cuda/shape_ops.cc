// CUDA kernels of the shape group (lib/backends/cpu/shape_ops.cc): Reshape
// and Identity (device copies), Transpose and Slice (strided copies), Concat
// (a row copy per input), Gather and Shape. Each re-derives its output shape
// from the concrete inputs and checks it against the planned one, as the CPU
// kernels do; integer parameter inputs (Slice's starts...) are read with
// ExecContext::ReadInts, from host copies when the plan has them.
//
// Gather's indices: when the plan knows them on the host they are checked
// there; otherwise the kernel checks them on the device and reports an
// out-of-range index through a flag in scratch memory that is read back after
// the launch (one synchronisation), so a bad index is an error, as on the
// CPU, and never an out-of-bounds read.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "jit/kernels/gather_params.h"
#include "lib/backends/cuda/cuda_kernels.h"
#include "lib/backends/cuda/exec_context.h"
#include "lib/backends/cuda/strided_copy.h"
#include "lib/ir/ops/layout_params.h"
#include "lib/backends/common/layout_params.h"

namespace grove::cuda {
namespace {

using ir::DimsString;

// Reshape, Identity (and Flatten, Squeeze, Unsqueeze in layout.cc): the
// bytes do not change; the planner gives the output its own buffer.
absl::Status DeviceCopyKernel(ir::KernelContext& ctx) {
  const TensorView& x = ctx.input(0);
  TensorView& y = ctx.output(0);
  if (x.num_elements() != y.num_elements() || x.dtype != y.dtype) {
    return ctx.Error(absl::StrCat("the input ", DTypeName(x.dtype), " ", DimsString(x.shape), " (", x.num_elements(),
                                  " elements) does not fit the planned output ", DTypeName(y.dtype), " ",
                                  DimsString(y.shape), " (", y.num_elements(), " elements) at run time"));
  }
  if (y.data == x.data || x.byte_size() == 0) return absl::OkStatus();
  ExecContext& ec = Exec(ctx);
  return ec.device().CopyAsync(y.data, x.data, x.byte_size(), ec.stream());
}

absl::Status IdentityKernel(ir::KernelContext& ctx) {
  const TensorView& x = ctx.input(0);
  const TensorView& y = ctx.output(0);
  if (x.dtype != y.dtype || x.shape != y.shape) {
    return ctx.Error(absl::StrCat("the input ", DTypeName(x.dtype), " ", DimsString(x.shape),
                                  " does not match the planned output ", DTypeName(y.dtype), " ", DimsString(y.shape)));
  }
  return DeviceCopyKernel(ctx);
}

absl::Status TransposeKernel(ir::KernelContext& ctx) {
  const TensorView& x = ctx.input(0);
  absl::StatusOr<backends::ExpandView> view = backends::TransposeParams(ctx);
  if (!view.ok()) return view.status();
  const std::vector<int64_t>& shape = view->shape;
  const std::vector<int64_t>& strides = view->strides;
  if (x.num_elements() == 0) return absl::OkStatus();
  absl::Status s = StridedCopy(Exec(ctx), DTypeSize(x.dtype), shape, x.data, strides, ctx.output(0).data);
  return s.ok() ? s : ctx.Error(s.message());
}

absl::Status ConcatKernel(ir::KernelContext& ctx) {
  const int n = ctx.num_inputs();
  TensorView& y = ctx.output(0);
  absl::StatusOr<backends::ConcatPlan> plan = backends::ConcatParams(ctx);
  if (!plan.ok()) return plan.status();
  const int* axis = &plan->axis;
  const int64_t outer = plan->outer, inner = plan->inner;
  if (y.num_elements() == 0) return absl::OkStatus();
  ExecContext& ec = Exec(ctx);
  const size_t es = DTypeSize(y.dtype);
  const int64_t out_row = y.shape[*axis] * inner;
  int64_t offset = 0;  // elements into an output row
  for (int i = 0; i < n; ++i) {
    const TensorView& x = ctx.input(i);
    const int64_t row = x.shape[*axis] * inner;
    if (absl::Status s = CopyRows(ec, es, outer, row, x.data, row, ByteOffset(y.data, offset * es), out_row);
        !s.ok()) {
      return ctx.Error(s.message());
    }
    offset += row;
  }
  return absl::OkStatus();
}

absl::Status GatherKernel(ir::KernelContext& ctx) {
  ExecContext& ec = Exec(ctx);
  const TensorView& data = ctx.input(0);
  const TensorView& idx = ctx.input(1);
  const int rank = static_cast<int>(data.shape.size());
  absl::StatusOr<int> axis = backends::GatherAxis(ctx);
  if (!axis.ok()) return axis.status();
  if (idx.dtype != DType::kI64 && idx.dtype != DType::kI32) {
    return ctx.Error(absl::StrCat("Gather indices (input 1) has dtype ", DTypeName(idx.dtype),
                                  "; expected i32 or i64"));
  }
  const int64_t dim = data.shape[*axis];
  auto out_of_range = [&](int64_t given) { return backends::GatherIndexError(ctx, given, *axis); };
  const std::vector<int64_t> expected = backends::GatherOutputShape(ctx, *axis);
  TensorView& y = ctx.output(0);
  // Indices known on the host (or an output with nothing to launch for) are
  // checked here; the rest on the device.
  const bool check_on_host = HostValues(ec, ctx, 1) != nullptr || ir::NumElements(expected) == 0;
  if (check_on_host) {
    absl::StatusOr<std::vector<int64_t>> indices = ec.ReadInts(ctx, 1);
    if (!indices.ok()) return indices.status();
    for (int64_t i : *indices) {
      if (i < -dim || i >= dim) return out_of_range(i);
    }
  }
  if (absl::Status s = backends::CheckPlanned(ctx, "Gather", expected); !s.ok()) return s;
  if (y.num_elements() == 0) return absl::OkStatus();
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < *axis; ++d) outer *= data.shape[d];
  for (int d = *axis + 1; d < rank; ++d) inner *= data.shape[d];
  // Rows of inner elements move as the widest unit that divides them.
  const int64_t es = static_cast<int64_t>(DTypeSize(data.dtype));
  int64_t w = 8;
  while (w > es && ((inner * es) % w != 0 || reinterpret_cast<uintptr_t>(data.data) % w != 0 ||
                    reinterpret_cast<uintptr_t>(y.data) % w != 0)) {
    w /= 2;
  }
  if (w < es) w = es;
  absl::StatusOr<jit::ModuleSpec> module = WidthModule("gather", static_cast<size_t>(w));
  if (!module.ok()) return ctx.Error(module.status().message());
  grove_k::GatherParams p{};
  p.data = data.data;
  p.indices = idx.data;
  p.dst = y.data;
  p.dim = dim;
  p.num_indices = idx.num_elements();
  p.inner = inner * es / w;
  p.n = outer * p.num_indices * p.inner;
  p.indices_i64 = idx.dtype == DType::kI64 ? 1 : 0;
  if (!check_on_host) {
    absl::StatusOr<void*> flag = ArmIndexCheck(ec);
    if (!flag.ok()) return flag.status();
    p.error = *flag;
  }
  if (absl::Status s = ec.Launch(*module, "gather", Grid1D(p.n), p); !s.ok()) return s;
  if (p.error != nullptr) {
    absl::StatusOr<std::optional<int64_t>> bad = ReadIndexCheck(ec, p.error);
    if (!bad.ok()) return bad.status();
    if (bad->has_value()) return out_of_range(**bad);
  }
  return absl::OkStatus();
}

absl::Status SliceKernel(ir::KernelContext& ctx) {
  ExecContext& ec = Exec(ctx);
  const TensorView& x = ctx.input(0);
  absl::StatusOr<backends::SliceView> view =
      backends::SliceParams(ctx, [&](int i, absl::string_view) { return ec.ReadInts(ctx, i); });
  if (!view.ok()) return view.status();
  const std::vector<int64_t>& shape = view->shape;
  const std::vector<int64_t>& strides = view->strides;
  const int64_t offset = view->offset;
  if (ir::NumElements(shape) == 0) return absl::OkStatus();
  const size_t es = DTypeSize(x.dtype);
  absl::Status s = StridedCopy(ec, es, shape, ByteOffset(x.data, offset * static_cast<int64_t>(es)), strides,
                               ctx.output(0).data);
  return s.ok() ? s : ctx.Error(s.message());
}

absl::Status ShapeKernel(ir::KernelContext& ctx) {
  const std::vector<int64_t>& dims = ctx.input(0).shape;
  absl::StatusOr<std::pair<int64_t, int64_t>> range = backends::ShapeRange(ctx);
  if (!range.ok()) return range.status();
  const auto [start, end] = *range;
  absl::Status s = WriteValues(Exec(ctx), ctx.output(0).data,
                               absl::MakeConstSpan(dims).subspan(static_cast<size_t>(start),
                                                                 static_cast<size_t>(end - start)));
  return s.ok() ? s : ctx.Error(s.message());
}

}  // namespace

absl::Status SameBytesKernel(ir::KernelContext& ctx) { return DeviceCopyKernel(ctx); }

absl::Status RegisterCudaShapeKernels(ir::OpRegistry& registry) {
  const absl::Status results[] = {
      registry.SetKernel("Reshape", ir::Backend::kCuda, &DeviceCopyKernel),
      registry.SetKernel("Identity", ir::Backend::kCuda, &IdentityKernel),
      registry.SetKernel("Transpose", ir::Backend::kCuda, &TransposeKernel),
      registry.SetKernel("Concat", ir::Backend::kCuda, &ConcatKernel),
      registry.SetKernel("Gather", ir::Backend::kCuda, &GatherKernel),
      registry.SetKernel("Slice", ir::Backend::kCuda, &SliceKernel),
      registry.SetKernel("Shape", ir::Backend::kCuda, &ShapeKernel),
  };
  for (const absl::Status& s : results) {
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace grove::cuda
