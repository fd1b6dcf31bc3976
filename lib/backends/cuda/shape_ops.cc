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
#include "lib/ir/ops/slice_bounds.h"

namespace grove::cuda {
namespace {

std::string ShapeStr(absl::Span<const int64_t> s) { return absl::StrCat("[", absl::StrJoin(s, ", "), "]"); }

absl::Status CheckPlanned(const ir::KernelContext& ctx, absl::string_view op, const std::vector<int64_t>& expected) {
  const TensorView& y = ctx.output(0);
  if (y.shape != expected) {
    return ctx.Error(absl::StrCat(op, " gives ", ShapeStr(expected), " for these inputs but the planned output is ",
                                  ShapeStr(y.shape)));
  }
  return absl::OkStatus();
}

// Reshape, Identity (and Flatten, Squeeze, Unsqueeze in layout.cc): the
// bytes do not change; the planner gives the output its own buffer.
absl::Status DeviceCopyKernel(ir::KernelContext& ctx) {
  const TensorView& x = ctx.input(0);
  TensorView& y = ctx.output(0);
  if (x.num_elements() != y.num_elements() || x.dtype != y.dtype) {
    return ctx.Error(absl::StrCat("the input ", DTypeName(x.dtype), " ", ShapeStr(x.shape), " (", x.num_elements(),
                                  " elements) does not fit the planned output ", DTypeName(y.dtype), " ",
                                  ShapeStr(y.shape), " (", y.num_elements(), " elements) at run time"));
  }
  if (y.data == x.data || x.byte_size() == 0) return absl::OkStatus();
  ExecContext& ec = Exec(ctx);
  return ec.device().CopyAsync(y.data, x.data, x.byte_size(), ec.stream());
}

absl::Status IdentityKernel(ir::KernelContext& ctx) {
  const TensorView& x = ctx.input(0);
  const TensorView& y = ctx.output(0);
  if (x.dtype != y.dtype || x.shape != y.shape) {
    return ctx.Error(absl::StrCat("the input ", DTypeName(x.dtype), " ", ShapeStr(x.shape),
                                  " does not match the planned output ", DTypeName(y.dtype), " ", ShapeStr(y.shape)));
  }
  return DeviceCopyKernel(ctx);
}

absl::Status TransposeKernel(ir::KernelContext& ctx) {
  const TensorView& x = ctx.input(0);
  const int rank = static_cast<int>(x.shape.size());
  std::vector<int64_t> perm;
  if (ctx.attrs().Has("perm")) {
    perm = ctx.attrs().GetInts("perm");
  } else {
    for (int i = rank - 1; i >= 0; --i) perm.push_back(i);
  }
  if (static_cast<int>(perm.size()) != rank) {
    return ctx.Error(absl::StrCat("Transpose perm has ", perm.size(), " entries for rank ", rank));
  }
  const std::vector<int64_t> in_strides = ir::Strides(x.shape);
  std::vector<int64_t> shape(rank), strides(rank);
  std::vector<bool> seen(rank, false);
  for (int i = 0; i < rank; ++i) {
    if (perm[i] < 0 || perm[i] >= rank || seen[perm[i]]) {
      return ctx.Error(absl::StrCat("Transpose perm [", absl::StrJoin(perm, ","), "] is not a permutation"));
    }
    seen[perm[i]] = true;
    shape[i] = x.shape[perm[i]];
    strides[i] = in_strides[perm[i]];
  }
  if (absl::Status s = CheckPlanned(ctx, "Transpose", shape); !s.ok()) return s;
  if (x.num_elements() == 0) return absl::OkStatus();
  absl::Status s = StridedCopy(Exec(ctx), DTypeSize(x.dtype), shape, x.data, strides, ctx.output(0).data);
  return s.ok() ? s : ctx.Error(s.message());
}

absl::Status ConcatKernel(ir::KernelContext& ctx) {
  const int n = ctx.num_inputs();
  TensorView& y = ctx.output(0);
  const int rank = static_cast<int>(y.shape.size());
  absl::StatusOr<int> axis = ir::NormalizeAxis(ctx.attrs().GetInt("axis", 0), rank);
  if (!axis.ok() || rank == 0) return ctx.Error("Concat axis is out of range for the output");
  int64_t axis_total = 0;
  for (int i = 0; i < n; ++i) {
    if (!ctx.has_input(i)) return ctx.Error(absl::StrCat("Concat input ", i, " is missing"));
    const TensorView& x = ctx.input(i);
    bool ok = x.dtype == y.dtype && static_cast<int>(x.shape.size()) == rank;
    for (int d = 0; ok && d < rank; ++d) ok = d == *axis || x.shape[d] == y.shape[d];
    if (!ok) {
      return ctx.Error(absl::StrCat("Concat input ", i, " has shape ", ShapeStr(x.shape), " (", DTypeName(x.dtype),
                                    "), which does not match the output ", ShapeStr(y.shape), " (",
                                    DTypeName(y.dtype), ") outside axis ", *axis, " at run time"));
    }
    axis_total += x.shape[*axis];
  }
  if (axis_total != y.shape[*axis]) {
    return ctx.Error(absl::StrCat("Concat inputs sum to ", axis_total, " along axis ", *axis,
                                  " but the planned output is ", ShapeStr(y.shape)));
  }
  if (y.num_elements() == 0) return absl::OkStatus();
  ExecContext& ec = Exec(ctx);
  const size_t es = DTypeSize(y.dtype);
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < *axis; ++d) outer *= y.shape[d];
  for (int d = *axis + 1; d < rank; ++d) inner *= y.shape[d];
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
  if (rank == 0) return ctx.Error("Gather data (input 0) is a scalar (rank 0); expected rank >= 1");
  absl::StatusOr<int> axis = ir::NormalizeAxis(ctx.attrs().GetInt("axis", 0), rank);
  if (!axis.ok()) return ctx.Error(absl::StrCat("Gather: ", axis.status().message()));
  if (idx.dtype != DType::kI64 && idx.dtype != DType::kI32) {
    return ctx.Error(absl::StrCat("Gather indices (input 1) has dtype ", DTypeName(idx.dtype),
                                  "; expected i32 or i64"));
  }
  const int64_t dim = data.shape[*axis];
  auto out_of_range = [&](int64_t given) {
    return ctx.Error(absl::StrCat("Gather index ", given, " is out of range for axis ", *axis, " of size ", dim,
                                  " (data ", ShapeStr(data.shape), ")"));
  };
  std::vector<int64_t> expected(data.shape.begin(), data.shape.begin() + *axis);
  expected.insert(expected.end(), idx.shape.begin(), idx.shape.end());
  expected.insert(expected.end(), data.shape.begin() + *axis + 1, data.shape.end());
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
  if (absl::Status s = CheckPlanned(ctx, "Gather", expected); !s.ok()) return s;
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
  const int rank = static_cast<int>(x.shape.size());
  if (rank == 0) return ctx.Error("Slice data (input 0) is a scalar (rank 0); expected rank >= 1");
  absl::StatusOr<std::vector<int64_t>> starts = ec.ReadInts(ctx, 1);
  if (!starts.ok()) return starts.status();
  absl::StatusOr<std::vector<int64_t>> ends = ec.ReadInts(ctx, 2);
  if (!ends.ok()) return ends.status();
  const size_t n = starts->size();
  std::vector<int64_t> axes, steps(n, 1);
  if (ctx.has_input(3)) {
    absl::StatusOr<std::vector<int64_t>> a = ec.ReadInts(ctx, 3);
    if (!a.ok()) return a.status();
    axes = *std::move(a);
  } else {
    for (size_t i = 0; i < n; ++i) axes.push_back(static_cast<int64_t>(i));
  }
  if (ctx.has_input(4)) {
    absl::StatusOr<std::vector<int64_t>> s = ec.ReadInts(ctx, 4);
    if (!s.ok()) return s.status();
    steps = *std::move(s);
  }
  if (ends->size() != n || axes.size() != n || steps.size() != n) {
    return ctx.Error(absl::StrCat("Slice starts, ends, axes and steps have different lengths (", n, ", ",
                                  ends->size(), ", ", axes.size(), ", ", steps.size(), ")"));
  }
  const std::vector<int64_t> in_strides = ir::Strides(x.shape);
  std::vector<int64_t> shape = x.shape, strides = in_strides;
  std::vector<bool> seen(rank, false);
  int64_t offset = 0;
  for (size_t i = 0; i < n; ++i) {
    absl::StatusOr<int> axis = ir::NormalizeAxis(axes[i], rank);
    if (!axis.ok()) return ctx.Error(absl::StrCat("Slice axes: ", axis.status().message()));
    if (seen[*axis]) return ctx.Error(absl::StrCat("Slice axes repeat axis ", *axis));
    seen[*axis] = true;
    if (steps[i] == 0) return ctx.Error("Slice steps contain 0; a step must be non-zero");
    const ir::SliceRange r = ir::ClampSlice(x.shape[*axis], (*starts)[i], (*ends)[i], steps[i]);
    shape[*axis] = r.length;
    // A huge step visits at most one element; don't let it overflow the stride.
    strides[*axis] = in_strides[*axis] * (r.length > 1 ? steps[i] : 1);
    offset += r.start * in_strides[*axis];
  }
  if (absl::Status s = CheckPlanned(ctx, "Slice", shape); !s.ok()) return s;
  if (ir::NumElements(shape) == 0) return absl::OkStatus();
  const size_t es = DTypeSize(x.dtype);
  absl::Status s = StridedCopy(ec, es, shape, ByteOffset(x.data, offset * static_cast<int64_t>(es)), strides,
                               ctx.output(0).data);
  return s.ok() ? s : ctx.Error(s.message());
}

absl::Status ShapeKernel(ir::KernelContext& ctx) {
  const std::vector<int64_t>& dims = ctx.input(0).shape;
  const int64_t rank = static_cast<int64_t>(dims.size());
  auto clamp = [rank](int64_t v) {
    if (v < 0) v += rank;
    return std::max<int64_t>(0, std::min(v, rank));
  };
  const int64_t start = clamp(ctx.attrs().GetInt("start", 0));
  const int64_t end = std::max(start, clamp(ctx.attrs().GetInt("end", rank)));
  if (absl::Status s = CheckPlanned(ctx, "Shape", {end - start}); !s.ok()) return s;
  if (ctx.output(0).dtype != DType::kI64) return ctx.Error("Shape output must be i64");
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
