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
#include "lib/backends/cpu/parallel_for.h"
#include "lib/backends/cpu/strided_copy.h"
#include "lib/backends/common/layout_params.h"
#include "lib/ir/ops/layout_params.h"

namespace grove::cpu {
namespace {

using ir::DimsString;

absl::StatusOr<std::vector<int64_t>> ReadInts(const ir::KernelContext& ctx, int i, absl::string_view what) {
  const TensorView& t = ctx.input(i);
  std::vector<int64_t> out(static_cast<size_t>(t.num_elements()));
  if (t.dtype == DType::kI64) {
    if (!out.empty()) std::memcpy(out.data(), t.data, out.size() * sizeof(int64_t));
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
    return ctx.Error(absl::StrCat("Reshape of ", DimsString(x.shape), " (", x.num_elements(), " elements) into ",
                                  DimsString(y.shape), " (", y.num_elements(), " elements) at run time"));
  }
  if (y.data != x.data && x.byte_size() > 0) std::memmove(y.data, x.data, x.byte_size());
  return absl::OkStatus();
}

absl::Status TransposeKernel(ir::KernelContext& ctx) {
  const TensorView& x = ctx.input(0);
  absl::StatusOr<backends::ExpandView> view = backends::TransposeParams(ctx);
  if (!view.ok()) return view.status();
  const std::vector<int64_t>& shape = view->shape;
  const std::vector<int64_t>& strides = view->strides;
  if (x.num_elements() == 0) return absl::OkStatus();
  StridedCopy(IntraOpThreadsOf(ctx), DTypeSize(x.dtype), shape, x.data, strides, ctx.output(0).data);
  return absl::OkStatus();
}

absl::Status ConcatKernel(ir::KernelContext& ctx) {
  const int n = ctx.num_inputs();
  TensorView& y = ctx.output(0);
  absl::StatusOr<backends::ConcatPlan> plan = backends::ConcatParams(ctx);
  if (!plan.ok()) return plan.status();
  const int* axis = &plan->axis;
  const int64_t outer = plan->outer, inner = plan->inner;
  if (y.num_elements() == 0) return absl::OkStatus();
  const size_t es = DTypeSize(y.dtype);
  auto* out = static_cast<uint8_t*>(y.data);
  if (outer == 1) {  // one block per input, each split over the threads when large
    for (int i = 0; i < n; ++i) {
      const TensorView& x = ctx.input(i);
      const size_t bytes = static_cast<size_t>(x.shape[*axis] * inner) * es;
      if (bytes > 0) CopyBytes(ctx, out, x.data, bytes);
      out += bytes;
    }
    return absl::OkStatus();
  }
  // Output row o is every input's row o, in order: rows split over the threads.
  const size_t row_bytes = static_cast<size_t>(y.num_elements() / outer) * es;
  ParallelFor(ctx, outer, RowGrain(static_cast<int64_t>(row_bytes), 4 * kCheapGrain),
              [&](int64_t begin, int64_t end) {
                uint8_t* o_row = out + static_cast<size_t>(begin) * row_bytes;
                for (int64_t o = begin; o < end; ++o) {
                  for (int i = 0; i < n; ++i) {
                    const TensorView& x = ctx.input(i);
                    const size_t bytes = static_cast<size_t>(x.shape[*axis] * inner) * es;
                    if (bytes > 0) std::memcpy(o_row, static_cast<const uint8_t*>(x.data) + o * bytes, bytes);
                    o_row += bytes;
                  }
                }
              });
  return absl::OkStatus();
}

absl::Status GatherKernel(ir::KernelContext& ctx) {
  const TensorView& data = ctx.input(0);
  const int rank = static_cast<int>(data.shape.size());
  absl::StatusOr<int> axis = backends::GatherAxis(ctx);
  if (!axis.ok()) return axis.status();
  absl::StatusOr<std::vector<int64_t>> indices = ReadInts(ctx, 1, "Gather indices");
  if (!indices.ok()) return indices.status();
  const int64_t dim = data.shape[*axis];
  for (int64_t& i : *indices) {
    const int64_t given = i;
    if (i < 0) i += dim;
    if (i < 0 || i >= dim) return backends::GatherIndexError(ctx, given, *axis);
  }
  if (absl::Status s = backends::CheckPlanned(ctx, "Gather", backends::GatherOutputShape(ctx, *axis)); !s.ok()) {
    return s;
  }
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
  absl::StatusOr<backends::SliceView> view =
      backends::SliceParams(ctx, [&ctx](int i, absl::string_view what) { return ReadInts(ctx, i, what); });
  if (!view.ok()) return view.status();
  const std::vector<int64_t>& shape = view->shape;
  const std::vector<int64_t>& strides = view->strides;
  const int64_t offset = view->offset;
  if (ir::NumElements(shape) == 0) return absl::OkStatus();
  const size_t es = DTypeSize(x.dtype);
  StridedCopy(IntraOpThreadsOf(ctx), es, shape, static_cast<const uint8_t*>(x.data) + offset * static_cast<int64_t>(es),
              strides, ctx.output(0).data);
  return absl::OkStatus();
}

absl::Status ShapeKernel(ir::KernelContext& ctx) {
  const std::vector<int64_t>& dims = ctx.input(0).shape;
  absl::StatusOr<std::pair<int64_t, int64_t>> range = backends::ShapeRange(ctx);
  if (!range.ok()) return range.status();
  const auto [start, end] = *range;
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
