// CPU kernels of the shape and data-movement group. Elements are moved as
// opaque bytes, so every dtype shares one path. Each kernel re-derives its
// output shape from the concrete inputs and compares it with the planned one:
// a shape function may have accepted symbolic dims or unknown values that
// only now can be checked.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "lib/backends/cpu/cpu_kernels.h"
#include "lib/backends/cpu/strided_copy.h"
#include "lib/ir/ops/slice_bounds.h"

namespace grove::cpu {
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

absl::StatusOr<std::vector<int64_t>> ReadInts(const ir::KernelContext& ctx, int i, absl::string_view what) {
  const TensorView& t = ctx.input(i);
  std::vector<int64_t> out(static_cast<size_t>(t.num_elements()));
  if (t.dtype == DType::kI64) {
    std::memcpy(out.data(), t.data, out.size() * sizeof(int64_t));
  } else if (t.dtype == DType::kI32) {
    const int32_t* p = t.as<const int32_t>();
    for (size_t k = 0; k < out.size(); ++k) out[k] = p[k];
  } else {
    return ctx.Error(absl::StrCat(what, " (input ", i, ") has dtype ", DTypeName(t.dtype), "; expected i32 or i64"));
  }
  return out;
}

absl::Status ReshapeKernel(ir::KernelContext& ctx) {
  const TensorView& x = ctx.input(0);
  TensorView& y = ctx.output(0);
  if (x.num_elements() != y.num_elements() || x.dtype != y.dtype) {
    return ctx.Error(absl::StrCat("Reshape of ", ShapeStr(x.shape), " (", x.num_elements(), " elements) into ",
                                  ShapeStr(y.shape), " (", y.num_elements(), " elements) at run time"));
  }
  if (y.data != x.data && x.byte_size() > 0) std::memmove(y.data, x.data, x.byte_size());
  return absl::OkStatus();
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
  StridedCopy(DTypeSize(x.dtype), shape, x.data, strides, ctx.output(0).data);
  return absl::OkStatus();
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
  const size_t es = DTypeSize(y.dtype);
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < *axis; ++d) outer *= y.shape[d];
  for (int d = *axis + 1; d < rank; ++d) inner *= y.shape[d];
  auto* out = static_cast<uint8_t*>(y.data);
  for (int64_t o = 0; o < outer; ++o) {
    for (int i = 0; i < n; ++i) {
      const TensorView& x = ctx.input(i);
      const size_t bytes = static_cast<size_t>(x.shape[*axis] * inner) * es;
      std::memcpy(out, static_cast<const uint8_t*>(x.data) + o * bytes, bytes);
      out += bytes;
    }
  }
  return absl::OkStatus();
}

absl::Status GatherKernel(ir::KernelContext& ctx) {
  const TensorView& data = ctx.input(0);
  const int rank = static_cast<int>(data.shape.size());
  if (rank == 0) return ctx.Error("Gather data (input 0) is a scalar (rank 0); expected rank >= 1");
  absl::StatusOr<int> axis = ir::NormalizeAxis(ctx.attrs().GetInt("axis", 0), rank);
  if (!axis.ok()) return ctx.Error(absl::StrCat("Gather: ", axis.status().message()));
  absl::StatusOr<std::vector<int64_t>> indices = ReadInts(ctx, 1, "Gather indices");
  if (!indices.ok()) return indices.status();
  const int64_t dim = data.shape[*axis];
  for (int64_t& i : *indices) {
    const int64_t given = i;
    if (i < 0) i += dim;
    if (i < 0 || i >= dim) {
      return ctx.Error(absl::StrCat("Gather index ", given, " is out of range for axis ", *axis, " of size ", dim,
                                    " (data ", ShapeStr(data.shape), ")"));
    }
  }
  const TensorView& idx = ctx.input(1);
  std::vector<int64_t> expected(data.shape.begin(), data.shape.begin() + *axis);
  expected.insert(expected.end(), idx.shape.begin(), idx.shape.end());
  expected.insert(expected.end(), data.shape.begin() + *axis + 1, data.shape.end());
  if (absl::Status s = CheckPlanned(ctx, "Gather", expected); !s.ok()) return s;
  TensorView& y = ctx.output(0);
  if (y.num_elements() == 0) return absl::OkStatus();
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < *axis; ++d) outer *= data.shape[d];
  for (int d = *axis + 1; d < rank; ++d) inner *= data.shape[d];
  const size_t row = static_cast<size_t>(inner) * DTypeSize(data.dtype);
  const auto* in = static_cast<const uint8_t*>(data.data);
  auto* out = static_cast<uint8_t*>(y.data);
  for (int64_t o = 0; o < outer; ++o) {
    const uint8_t* block = in + static_cast<size_t>(o * dim) * row;
    for (int64_t i : *indices) {
      std::memcpy(out, block + static_cast<size_t>(i) * row, row);
      out += row;
    }
  }
  return absl::OkStatus();
}

absl::Status SliceKernel(ir::KernelContext& ctx) {
  const TensorView& x = ctx.input(0);
  const int rank = static_cast<int>(x.shape.size());
  if (rank == 0) return ctx.Error("Slice data (input 0) is a scalar (rank 0); expected rank >= 1");
  absl::StatusOr<std::vector<int64_t>> starts = ReadInts(ctx, 1, "Slice starts");
  if (!starts.ok()) return starts.status();
  absl::StatusOr<std::vector<int64_t>> ends = ReadInts(ctx, 2, "Slice ends");
  if (!ends.ok()) return ends.status();
  const size_t n = starts->size();
  std::vector<int64_t> axes, steps(n, 1);
  if (ctx.has_input(3)) {
    absl::StatusOr<std::vector<int64_t>> a = ReadInts(ctx, 3, "Slice axes");
    if (!a.ok()) return a.status();
    axes = *std::move(a);
  } else {
    for (size_t i = 0; i < n; ++i) axes.push_back(static_cast<int64_t>(i));
  }
  if (ctx.has_input(4)) {
    absl::StatusOr<std::vector<int64_t>> s = ReadInts(ctx, 4, "Slice steps");
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
    strides[*axis] = in_strides[*axis] * steps[i];
    offset += r.start * in_strides[*axis];
  }
  if (absl::Status s = CheckPlanned(ctx, "Slice", shape); !s.ok()) return s;
  if (ir::NumElements(shape) == 0) return absl::OkStatus();
  const size_t es = DTypeSize(x.dtype);
  StridedCopy(es, shape, static_cast<const uint8_t*>(x.data) + offset * static_cast<int64_t>(es), strides,
              ctx.output(0).data);
  return absl::OkStatus();
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
  int64_t* out = ctx.output(0).as<int64_t>();
  for (int64_t i = start; i < end; ++i) out[i - start] = dims[i];
  return absl::OkStatus();
}

}  // namespace

absl::Status RegisterShapeKernels(ir::OpRegistry& registry) {
  const absl::Status results[] = {
      registry.SetKernel("Reshape", ir::Backend::kCpu, &ReshapeKernel),
      registry.SetKernel("Transpose", ir::Backend::kCpu, &TransposeKernel),
      registry.SetKernel("Concat", ir::Backend::kCpu, &ConcatKernel),
      registry.SetKernel("Gather", ir::Backend::kCpu, &GatherKernel),
      registry.SetKernel("Slice", ir::Backend::kCpu, &SliceKernel),
      registry.SetKernel("Shape", ir::Backend::kCpu, &ShapeKernel),
  };
  for (const absl::Status& s : results) {
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace grove::cpu
