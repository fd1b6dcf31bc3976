// CPU kernels of the shape and data-movement group. Elements are moved as
// opaque bytes, so every dtype shares one path. Each kernel's prepare
// re-derives its output shape from the concrete inputs and compares it with
// the planned one (a shape function may have accepted symbolic dims or
// unknown values that only now can be checked) and keeps the strides and
// block sizes; the invoke copies. Slice's parameter inputs that the plan
// does not know, and Gather's indices, are read when it runs.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "lib/backends/common/prepared.h"
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

// Whether every present input of `first`..`last` has values the prepare can
// read (a weight, a folded value, or any value in a run outside a plan).
bool ValuesKnown(const ir::KernelContext& ctx, int first, int last) {
  for (int i = first; i <= last && i < ctx.num_inputs(); ++i) {
    if (ctx.has_input(i) && ctx.input(i).data == nullptr && ctx.input(i).num_elements() > 0) return false;
  }
  return true;
}

// Reshape (and the copies of layout.cc): checked once, the bytes move as
// they are.
struct ReshapeParams {};

absl::StatusOr<ir::PreparedKernel> PrepareReshape(const ir::KernelContext& ctx) {
  const TensorView& x = ctx.input(0);
  const TensorView& y = ctx.output(0);
  if (x.num_elements() != y.num_elements() || x.dtype != y.dtype) {
    return ctx.Error(absl::StrCat("Reshape of ", DimsString(x.shape), " (", x.num_elements(), " elements) into ",
                                  DimsString(y.shape), " (", y.num_elements(), " elements) at run time"));
  }
  return backends::MakePrepared(ReshapeParams{});
}

absl::Status ReshapeKernel(ir::KernelContext& ctx) {
  if (backends::PreparedParams<ReshapeParams>(ctx) == nullptr) return backends::NotPrepared(ctx, "CPU");
  const TensorView& x = ctx.input(0);
  TensorView& y = ctx.output(0);
  if (y.data != x.data && x.byte_size() > 0) std::memmove(y.data, x.data, x.byte_size());
  return absl::OkStatus();
}

// Transpose and Slice: a strided view of the input copied densely.
struct StridedParams {
  bool planned = true;  // false: Slice's parameters are read when it runs
  std::vector<int64_t> shape, strides;
  int64_t offset = 0;
  size_t es = 0;
};

absl::Status RunStrided(const ir::KernelContext& ctx, const std::vector<int64_t>& shape,
                        const std::vector<int64_t>& strides, int64_t offset) {
  const TensorView& x = ctx.input(0);
  if (ir::NumElements(shape) == 0) return absl::OkStatus();
  const size_t es = DTypeSize(x.dtype);
  StridedCopy(IntraOpThreadsOf(ctx), es, shape, static_cast<const uint8_t*>(x.data) + offset * static_cast<int64_t>(es),
              strides, ctx.output(0).data);
  return absl::OkStatus();
}

absl::StatusOr<ir::PreparedKernel> PrepareTranspose(const ir::KernelContext& ctx) {
  absl::StatusOr<backends::ExpandView> view = backends::TransposeParams(ctx);
  if (!view.ok()) return view.status();
  StridedParams p;
  p.shape = std::move(view->shape);
  p.strides = std::move(view->strides);
  return backends::MakePrepared(std::move(p));
}

absl::StatusOr<backends::SliceView> SliceViewOf(const ir::KernelContext& ctx) {
  return backends::SliceParams(ctx, [&ctx](int i, absl::string_view what) { return ReadInts(ctx, i, what); });
}

absl::StatusOr<ir::PreparedKernel> PrepareSlice(const ir::KernelContext& ctx) {
  StridedParams p;
  if (!ValuesKnown(ctx, 1, 4)) {
    p.planned = false;
    return backends::MakePrepared(std::move(p));
  }
  absl::StatusOr<backends::SliceView> view = SliceViewOf(ctx);
  if (!view.ok()) return view.status();
  p.shape = std::move(view->shape);
  p.strides = std::move(view->strides);
  p.offset = view->offset;
  return backends::MakePrepared(std::move(p));
}

absl::Status StridedKernel(ir::KernelContext& ctx) {
  const StridedParams* p = backends::PreparedParams<StridedParams>(ctx);
  if (p == nullptr) return backends::NotPrepared(ctx, "CPU");
  if (p->planned) return RunStrided(ctx, p->shape, p->strides, p->offset);
  absl::StatusOr<backends::SliceView> view = SliceViewOf(ctx);
  if (!view.ok()) return view.status();
  return RunStrided(ctx, view->shape, view->strides, view->offset);
}

// Concat: the axis, the blocks around it and each input's block bytes.
struct ConcatParamsCpu {
  int64_t outer = 1;
  std::vector<size_t> bytes;  // per input: its dims from the axis on, in bytes
};

absl::StatusOr<ir::PreparedKernel> PrepareConcat(const ir::KernelContext& ctx) {
  absl::StatusOr<backends::ConcatPlan> plan = backends::ConcatParams(ctx);
  if (!plan.ok()) return plan.status();
  const size_t es = DTypeSize(ctx.output(0).dtype);
  ConcatParamsCpu p;
  p.outer = plan->outer;
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    p.bytes.push_back(static_cast<size_t>(ctx.input(i).shape[plan->axis] * plan->inner) * es);
  }
  return backends::MakePrepared(std::move(p));
}

absl::Status ConcatKernel(ir::KernelContext& ctx) {
  const ConcatParamsCpu* p = backends::PreparedParams<ConcatParamsCpu>(ctx);
  if (p == nullptr) return backends::NotPrepared(ctx, "CPU");
  const int n = ctx.num_inputs();
  TensorView& y = ctx.output(0);
  const int64_t outer = p->outer;
  if (y.num_elements() == 0) return absl::OkStatus();
  const size_t es = DTypeSize(y.dtype);
  auto* out = static_cast<uint8_t*>(y.data);
  if (outer == 1) {  // one block per input, each split over the threads when large
    for (int i = 0; i < n; ++i) {
      const size_t bytes = p->bytes[i];
      if (bytes > 0) CopyBytes(ctx, out, ctx.input(i).data, bytes);
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
                    const size_t bytes = p->bytes[i];
                    if (bytes > 0) std::memcpy(o_row, static_cast<const uint8_t*>(ctx.input(i).data) + o * bytes, bytes);
                    o_row += bytes;
                  }
                }
              });
  return absl::OkStatus();
}

// Gather: the axis, the blocks around it and the loop of the indices'
// dtype; the indices themselves are read (and checked) per run.
struct GatherParams {
  int axis = 0;
  int64_t dim = 0, outer = 1;
  size_t row = 0;  // bytes per index
  absl::Status (*run)(const ir::KernelContext& ctx, const GatherParams& p) = nullptr;
};

template <typename I>
absl::Status RunGather(const ir::KernelContext& ctx, const GatherParams& p) {
  const TensorView& idx = ctx.input(1);
  const I* indices = idx.as<const I>();
  const int64_t n = idx.num_elements();
  const int64_t dim = p.dim;
  for (int64_t k = 0; k < n; ++k) {
    const int64_t given = indices[k];
    const int64_t i = given < 0 ? given + dim : given;
    if (i < 0 || i >= dim) return backends::GatherIndexError(ctx, given, p.axis);
  }
  TensorView& y = ctx.output(0);
  if (y.num_elements() == 0) return absl::OkStatus();
  const size_t row = p.row;
  const auto* in = static_cast<const uint8_t*>(ctx.input(0).data);
  auto* out = static_cast<uint8_t*>(y.data);
  for (int64_t o = 0; o < p.outer; ++o) {
    const uint8_t* block = in + static_cast<size_t>(o * dim) * row;
    for (int64_t k = 0; k < n; ++k) {
      const int64_t given = indices[k];
      const int64_t i = given < 0 ? given + dim : given;
      std::memcpy(out, block + static_cast<size_t>(i) * row, row);
      out += row;
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<ir::PreparedKernel> PrepareGather(const ir::KernelContext& ctx) {
  const TensorView& data = ctx.input(0);
  const int rank = static_cast<int>(data.shape.size());
  absl::StatusOr<int> axis = backends::GatherAxis(ctx);
  if (!axis.ok()) return axis.status();
  GatherParams p;
  const DType index_dtype = ctx.input(1).dtype;
  if (index_dtype == DType::kI64) {
    p.run = &RunGather<int64_t>;
  } else if (index_dtype == DType::kI32) {
    p.run = &RunGather<int32_t>;
  } else {
    return ctx.Error(absl::StrCat("Gather indices (input 1) has dtype ", DTypeName(index_dtype),
                                  "; expected i32 or i64"));
  }
  if (absl::Status s = backends::CheckPlanned(ctx, "Gather", backends::GatherOutputShape(ctx, *axis)); !s.ok()) {
    return s;
  }
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < *axis; ++d) outer *= data.shape[d];
  for (int d = *axis + 1; d < rank; ++d) inner *= data.shape[d];
  p.axis = *axis;
  p.dim = data.shape[*axis];
  p.outer = outer;
  p.row = static_cast<size_t>(inner) * DTypeSize(data.dtype);
  return backends::MakePrepared(std::move(p));
}

absl::Status GatherKernel(ir::KernelContext& ctx) {
  const GatherParams* p = backends::PreparedParams<GatherParams>(ctx);
  if (p == nullptr) return backends::NotPrepared(ctx, "CPU");
  return p->run(ctx, *p);
}

// Shape: the [start, end) range of dims, after the output checks.
struct ShapeParams {
  int64_t start = 0, end = 0;
};

absl::StatusOr<ir::PreparedKernel> PrepareShape(const ir::KernelContext& ctx) {
  absl::StatusOr<std::pair<int64_t, int64_t>> range = backends::ShapeRange(ctx);
  if (!range.ok()) return range.status();
  return backends::MakePrepared(ShapeParams{range->first, range->second});
}

absl::Status ShapeKernel(ir::KernelContext& ctx) {
  const ShapeParams* p = backends::PreparedParams<ShapeParams>(ctx);
  if (p == nullptr) return backends::NotPrepared(ctx, "CPU");
  const std::vector<int64_t>& dims = ctx.input(0).shape;
  int64_t* out = ctx.output(0).as<int64_t>();
  for (int64_t i = p->start; i < p->end; ++i) out[i - p->start] = dims[i];
  return absl::OkStatus();
}

}  // namespace

absl::Status RegisterShapeKernels(ir::OpRegistry& registry) {
  const absl::Status results[] = {
      registry.SetKernel("Reshape", ir::Backend::kCpu, ir::KernelDef{&ReshapeKernel, &PrepareReshape}),
      registry.SetKernel("Transpose", ir::Backend::kCpu, ir::KernelDef{&StridedKernel, &PrepareTranspose}),
      registry.SetKernel("Concat", ir::Backend::kCpu, ir::KernelDef{&ConcatKernel, &PrepareConcat}),
      registry.SetKernel("Gather", ir::Backend::kCpu, ir::KernelDef{&GatherKernel, &PrepareGather}),
      registry.SetKernel("Slice", ir::Backend::kCpu, ir::KernelDef{&StridedKernel, &PrepareSlice}),
      registry.SetKernel("Shape", ir::Backend::kCpu, ir::KernelDef{&ShapeKernel, &PrepareShape}),
  };
  for (const absl::Status& s : results) {
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace grove::cpu
