// CUDA kernels of the shape group (lib/backends/cpu/shape_ops.cc): Reshape
// and Identity (device copies), Transpose and Slice (strided copies), Concat
// (a row copy per input), Gather and Shape. Each prepare re-derives the output
// shape from the concrete inputs and checks it against the planned one, as
// the CPU kernels do, and plans the copy; the invoke only copies. Integer
// parameter inputs (Slice's starts...) are read at prepare from the host
// copies the plan has; values computed on the device are read back with
// ExecContext::ReadInts when the step runs (declared in host_inputs).
//
// Gather's indices: when the plan knows them on the host they are checked
// at prepare; otherwise the kernel checks them on the device, reads and
// writes nothing out of bounds, and records an out-of-range index in the
// session's check record, which the run reads at its end (deferred checks,
// exec_context.h): a bad index is an error, as on the CPU, without a wait
// inside the segment.
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
struct CopyPrepared {
  uint64_t bytes = 0;
};

absl::StatusOr<ir::PreparedKernel> PrepareDeviceCopy(const ir::KernelContext& ctx) {
  const TensorView& x = ctx.input(0);
  const TensorView& y = ctx.output(0);
  if (x.num_elements() != y.num_elements() || x.dtype != y.dtype) {
    return ctx.Error(absl::StrCat("the input ", DTypeName(x.dtype), " ", DimsString(x.shape), " (", x.num_elements(),
                                  " elements) does not fit the planned output ", DTypeName(y.dtype), " ",
                                  DimsString(y.shape), " (", y.num_elements(), " elements) at run time"));
  }
  return MakePrepared(CopyPrepared{x.byte_size()});
}

absl::Status DeviceCopyKernel(ir::KernelContext& ctx) {
  const CopyPrepared* c = PreparedParams<CopyPrepared>(ctx);
  if (c == nullptr) return NotPrepared(ctx);
  const void* x = ctx.input(0).data;
  void* y = ctx.output(0).data;
  if (y == x || c->bytes == 0) return absl::OkStatus();
  ExecContext& ec = Exec(ctx);
  return ec.device().CopyAsync(y, x, c->bytes, ec.stream());
}

absl::StatusOr<ir::PreparedKernel> PrepareIdentity(const ir::KernelContext& ctx) {
  const TensorView& x = ctx.input(0);
  const TensorView& y = ctx.output(0);
  if (x.dtype != y.dtype || x.shape != y.shape) {
    return ctx.Error(absl::StrCat("the input ", DTypeName(x.dtype), " ", DimsString(x.shape),
                                  " does not match the planned output ", DTypeName(y.dtype), " ", DimsString(y.shape)));
  }
  return PrepareDeviceCopy(ctx);
}

// A strided copy of input 0 (at `offset` elements) into output 0.
struct StridedPrepared {
  StridedCopyPlan plan;
  int64_t offset_bytes = 0;
};

absl::Status RunStrided(ir::KernelContext& ctx, const StridedPrepared& sp) {
  return RunStridedCopy(Exec(ctx), sp.plan, ByteOffset(ctx.input(0).data, sp.offset_bytes), ctx.output(0).data);
}

absl::StatusOr<ir::PreparedKernel> PrepareTranspose(const ir::KernelContext& ctx) {
  const TensorView& x = ctx.input(0);
  absl::StatusOr<backends::ExpandView> view = backends::TransposeParams(ctx);
  if (!view.ok()) return view.status();
  StridedPrepared sp;
  if (x.num_elements() > 0) {
    // With the step's context: a 2-d (or batched) transpose takes the tile
    // variant the dispatcher picks for it (table, cost model).
    absl::StatusOr<StridedCopyPlan> plan =
        PlanStridedCopy(DTypeSize(x.dtype), view->shape, view->strides, /*wrap=*/{}, &ctx);
    if (!plan.ok()) return ctx.Error(plan.status().message());
    sp.plan = *std::move(plan);
  }
  return MakePrepared(std::move(sp));
}

absl::Status StridedKernel(ir::KernelContext& ctx) {
  const StridedPrepared* sp = PreparedParams<StridedPrepared>(ctx);
  if (sp == nullptr) return NotPrepared(ctx);
  absl::Status s = RunStrided(ctx, *sp);
  return s.ok() ? s : ctx.Error(s.message());
}

// Concat: a row copy per input.
struct ConcatPrepared {
  size_t es = 0;
  int64_t outer = 0, out_row = 0;
  std::vector<int64_t> rows, offsets;  // per input, in elements
};

absl::StatusOr<ir::PreparedKernel> PrepareConcat(const ir::KernelContext& ctx) {
  const int n = ctx.num_inputs();
  const TensorView& y = ctx.output(0);
  absl::StatusOr<backends::ConcatPlan> plan = backends::ConcatParams(ctx);
  if (!plan.ok()) return plan.status();
  ConcatPrepared cp;
  if (y.num_elements() == 0) return MakePrepared(std::move(cp));
  const int axis = plan->axis;
  const int64_t inner = plan->inner;
  cp.es = DTypeSize(y.dtype);
  cp.outer = plan->outer;
  cp.out_row = y.shape[axis] * inner;
  int64_t offset = 0;  // elements into an output row
  for (int i = 0; i < n; ++i) {
    const int64_t row = ctx.input(i).shape[axis] * inner;
    cp.rows.push_back(row);
    cp.offsets.push_back(offset);
    offset += row;
  }
  return MakePrepared(std::move(cp));
}

absl::Status ConcatKernel(ir::KernelContext& ctx) {
  const ConcatPrepared* cp = PreparedParams<ConcatPrepared>(ctx);
  if (cp == nullptr) return NotPrepared(ctx);
  ExecContext& ec = Exec(ctx);
  void* y = ctx.output(0).data;
  const int64_t es = static_cast<int64_t>(cp->es);
  for (size_t i = 0; i < cp->rows.size(); ++i) {
    const int64_t row = cp->rows[i];
    if (absl::Status s = CopyRows(ec, cp->es, cp->outer, row, ctx.input(static_cast<int>(i)).data, row,
                                  ByteOffset(y, cp->offsets[i] * es), cp->out_row);
        !s.ok()) {
      return ctx.Error(s.message());
    }
  }
  return absl::OkStatus();
}

// Gather: indices the plan knows are checked at prepare; others by the
// kernel on the device, a failure read at the run's end (deferred checks,
// exec_context.h), so the step needs no wait. An output with no element to
// move still has its unknown indices checked, by the check kernel alone.
struct GatherPrepared {
  bool empty = false;  // output empty: nothing to move
  int axis = 0;
  int64_t es = 0, dim = 0, outer = 1, inner = 1, num_indices = 0;
  bool indices_i64 = false;
  DeviceCheckSite check;  // no record: the indices were checked at prepare
};

absl::StatusOr<ir::PreparedKernel> PrepareGather(const ir::KernelContext& ctx) {
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
  GatherPrepared gp;
  gp.axis = *axis;
  gp.dim = data.shape[*axis];
  const std::vector<int64_t> expected = backends::GatherOutputShape(ctx, *axis);
  // Indices known on the host are checked here, the rest on the device.
  const bool known = ec.ValuesOnHost(ctx, 1);
  if (known) {
    absl::StatusOr<std::vector<int64_t>> indices = ec.ReadInts(ctx, 1);
    if (!indices.ok()) return indices.status();
    for (int64_t i : *indices) {
      if (i < -gp.dim || i >= gp.dim) return backends::GatherIndexError(ctx, i, gp.axis);
    }
  }
  if (absl::Status s = backends::CheckPlanned(ctx, "Gather", expected); !s.ok()) return s;
  gp.num_indices = idx.num_elements();
  gp.indices_i64 = idx.dtype == DType::kI64;
  if (!known) {
    absl::StatusOr<DeviceCheckSite> site =
        ec.CheckSite(ctx, [axis = gp.axis, shape = data.shape](const grove_k::CheckRecord& r) {
          return backends::GatherIndexMessage(r.value, axis, shape);
        });
    if (!site.ok()) return site.status();
    gp.check = *std::move(site);
  }
  if (ctx.output(0).num_elements() == 0) {
    gp.empty = true;
    return MakePrepared(std::move(gp));
  }
  for (int d = 0; d < *axis; ++d) gp.outer *= data.shape[d];
  for (int d = *axis + 1; d < rank; ++d) gp.inner *= data.shape[d];
  gp.es = static_cast<int64_t>(DTypeSize(data.dtype));
  return MakePrepared(std::move(gp));
}

absl::Status GatherKernel(ir::KernelContext& ctx) {
  const GatherPrepared* gp = PreparedParams<GatherPrepared>(ctx);
  if (gp == nullptr) return NotPrepared(ctx);
  ExecContext& ec = Exec(ctx);
  if (gp->empty) {
    if (gp->check.check.record == nullptr) return absl::OkStatus();
    return LaunchIndexCheck(ec, ctx.input(1).data, gp->indices_i64, gp->num_indices, {gp->dim}, gp->check.check);
  }
  const TensorView& data = ctx.input(0);
  TensorView& y = ctx.output(0);
  // Rows of inner elements move as the widest unit that divides them.
  const int64_t es = gp->es, inner = gp->inner;
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
  p.indices = ctx.input(1).data;
  p.dst = y.data;
  p.dim = gp->dim;
  p.num_indices = gp->num_indices;
  p.inner = inner * es / w;
  p.n = gp->outer * p.num_indices * p.inner;
  p.indices_i64 = gp->indices_i64 ? 1 : 0;
  p.check = gp->check.check;
  return ec.Launch(*module, "gather", Grid1D(p.n), p);
}

// Slice: starts, ends, axes and steps (inputs 1-4) parsed at prepare when
// the plan knows them, else read back when run (HostValuesKernel).
absl::StatusOr<StridedPrepared> PlanSlice(const ir::KernelContext& ctx) {
  ExecContext& ec = Exec(ctx);
  const TensorView& x = ctx.input(0);
  absl::StatusOr<backends::SliceView> view =
      backends::SliceParams(ctx, [&](int i, absl::string_view) { return ec.ReadInts(ctx, i); });
  if (!view.ok()) return view.status();
  StridedPrepared sp;
  if (ir::NumElements(view->shape) == 0) return sp;
  const size_t es = DTypeSize(x.dtype);
  sp.offset_bytes = view->offset * static_cast<int64_t>(es);
  absl::StatusOr<StridedCopyPlan> plan = PlanStridedCopy(es, view->shape, view->strides);
  if (!plan.ok()) return ctx.Error(plan.status().message());
  sp.plan = *std::move(plan);
  return sp;
}

absl::Status RunSlice(ir::KernelContext& ctx, const StridedPrepared& sp) {
  absl::Status s = RunStrided(ctx, sp);
  return s.ok() ? s : ctx.Error(s.message());
}

using SliceKernel = HostValuesKernel<StridedPrepared, &PlanSlice, &RunSlice, 0b11110>;

struct ShapePrepared {
  std::vector<int64_t> values;
};

absl::StatusOr<ir::PreparedKernel> PrepareShape(const ir::KernelContext& ctx) {
  const std::vector<int64_t>& dims = ctx.input(0).shape;
  absl::StatusOr<std::pair<int64_t, int64_t>> range = backends::ShapeRange(ctx);
  if (!range.ok()) return range.status();
  const auto [start, end] = *range;
  return MakePrepared(ShapePrepared{std::vector<int64_t>(dims.begin() + start, dims.begin() + end)});
}

absl::Status ShapeKernel(ir::KernelContext& ctx) {
  const ShapePrepared* sp = PreparedParams<ShapePrepared>(ctx);
  if (sp == nullptr) return NotPrepared(ctx);
  absl::Status s = WriteValues(Exec(ctx), ctx.output(0).data, sp->values);
  return s.ok() ? s : ctx.Error(s.message());
}

}  // namespace

absl::StatusOr<ir::PreparedKernel> PrepareSameBytes(const ir::KernelContext& ctx) { return PrepareDeviceCopy(ctx); }
absl::Status SameBytesKernel(ir::KernelContext& ctx) { return DeviceCopyKernel(ctx); }

absl::Status RegisterCudaShapeKernels(ir::OpRegistry& registry) {
  const absl::Status results[] = {
      registry.SetKernel("Reshape", ir::Backend::kCuda, ir::KernelDef{&DeviceCopyKernel, &PrepareDeviceCopy}),
      registry.SetKernel("Identity", ir::Backend::kCuda, ir::KernelDef{&DeviceCopyKernel, &PrepareIdentity}),
      registry.SetKernel("Transpose", ir::Backend::kCuda, ir::KernelDef{&StridedKernel, &PrepareTranspose}),
      registry.SetKernel("Concat", ir::Backend::kCuda, ir::KernelDef{&ConcatKernel, &PrepareConcat}),
      registry.SetKernel("Gather", ir::Backend::kCuda, ir::KernelDef{&GatherKernel, &PrepareGather}),
      registry.SetKernel("Slice", ir::Backend::kCuda, SliceKernel::Def()),
      registry.SetKernel("Shape", ir::Backend::kCuda, ir::KernelDef{&ShapeKernel, &PrepareShape}),
  };
  for (const absl::Status& s : results) {
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace grove::cuda
