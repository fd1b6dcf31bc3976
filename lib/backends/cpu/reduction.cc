// CPU reference kernels of ReduceSum, ReduceMean and Softmax (softmax.h). Reductions
// merge neighbouring dims that are all kept or all reduced, then stream the
// input once in memory order into an accumulator per output element (double
// for floats, wrapping 64-bit for integers).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "lib/backends/cpu/cpu_kernels.h"
#include "lib/backends/cpu/element_types.h"
#include "lib/backends/cpu/softmax.h"
#include "lib/ir/ops/reduce_axes.h"

namespace grove::cpu {
namespace {

using ir::KernelContext;

std::string ShapeString(absl::Span<const int64_t> shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

template <typename T>
using Accumulator = std::conditional_t<std::is_floating_point_v<T>, double, uint64_t>;

// Sum of n contiguous elements, with four partial sums so the adds pipeline.
template <typename T>
Accumulator<T> SumRun(const T* x, int64_t n) {
  using A = Accumulator<T>;
  A s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    s0 += static_cast<A>(x[i]);
    s1 += static_cast<A>(x[i + 1]);
    s2 += static_cast<A>(x[i + 2]);
    s3 += static_cast<A>(x[i + 3]);
  }
  for (; i < n; ++i) s0 += static_cast<A>(x[i]);
  return (s0 + s1) + (s2 + s3);
}

// Adds x into acc, where acc[o] gathers every input element whose kept
// coordinates map to output element o.
template <typename T>
void AccumulateReduce(const T* x, absl::Span<const int64_t> shape, const std::vector<bool>& reduced,
                      Accumulator<T>* acc) {
  struct Group {
    int64_t size;
    bool reduced;
    int64_t out_stride;
  };
  std::vector<Group> groups;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 0) return;  // no input elements: the accumulators stay 0
    if (shape[d] == 1) continue;
    if (!groups.empty() && groups.back().reduced == reduced[d]) {
      groups.back().size *= shape[d];
    } else {
      groups.push_back({shape[d], reduced[d], 0});
    }
  }
  if (groups.empty()) {
    acc[0] += static_cast<Accumulator<T>>(x[0]);
    return;
  }
  int64_t stride = 1;
  for (int g = static_cast<int>(groups.size()) - 1; g >= 0; --g) {
    if (groups[g].reduced) continue;
    groups[g].out_stride = stride;
    stride *= groups[g].size;
  }
  const Group inner = groups.back();
  const int outer = static_cast<int>(groups.size()) - 1;
  int64_t rows = 1;
  for (int g = 0; g < outer; ++g) rows *= groups[g].size;
  std::vector<int64_t> index(outer, 0);
  int64_t out = 0;
  for (int64_t r = 0; r < rows; ++r, x += inner.size) {
    if (inner.reduced) {
      acc[out] += SumRun(x, inner.size);
    } else {
      for (int64_t j = 0; j < inner.size; ++j) acc[out + j] += static_cast<Accumulator<T>>(x[j]);
    }
    for (int g = outer - 1; g >= 0; --g) {
      out += groups[g].out_stride;
      if (++index[g] < groups[g].size) break;
      out -= groups[g].out_stride * groups[g].size;
      index[g] = 0;
    }
  }
}

template <bool kMean>
absl::Status ReduceKernel(KernelContext& ctx) {
  const TensorView& x = ctx.input(0);
  TensorView& y = ctx.output(0);
  const int rank = static_cast<int>(x.shape.size());
  std::vector<int64_t> axes = ctx.attrs().GetInts("axes");
  if (ctx.has_input(1)) {
    const TensorView& a = ctx.input(1);
    const int64_t n = a.num_elements();
    axes.resize(static_cast<size_t>(n));
    if (a.dtype == DType::kI64) {
      for (int64_t i = 0; i < n; ++i) axes[i] = a.as<const int64_t>()[i];
    } else if (a.dtype == DType::kI32) {
      for (int64_t i = 0; i < n; ++i) axes[i] = a.as<const int32_t>()[i];
    } else {
      return ctx.Error(absl::StrCat("input 1 (axes) has dtype ", DTypeName(a.dtype), "; expected i64"));
    }
  }
  const bool keepdims = ctx.attrs().GetInt("keepdims", 1) != 0;
  const bool noop = ctx.attrs().GetInt("noop_with_empty_axes", 0) != 0;
  absl::StatusOr<std::vector<bool>> reduced = ir::ReducedDims(axes, rank, noop);
  if (!reduced.ok()) return ctx.Error(reduced.status().message());

  std::vector<int64_t> out_shape;
  int64_t count = 1;  // input elements per output element
  for (int d = 0; d < rank; ++d) {
    if ((*reduced)[d]) {
      count *= x.shape[d];
      if (keepdims) out_shape.push_back(1);
    } else {
      out_shape.push_back(x.shape[d]);
    }
  }
  if (y.dtype != x.dtype || y.shape != out_shape) {
    return ctx.Error(absl::StrCat("output 0 was allocated as ", DTypeName(y.dtype), " ", ShapeString(y.shape),
                                  " but the kernel writes ", DTypeName(x.dtype), " ", ShapeString(out_shape)));
  }

  auto run = [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    using A = Accumulator<T>;
    const int64_t n_out = y.num_elements();
    std::vector<A> acc(static_cast<size_t>(n_out), A{0});
    if (n_out == 0) return absl::OkStatus();
    AccumulateReduce(x.as<const T>(), x.shape, *reduced, acc.data());
    T* out = y.as<T>();
    for (int64_t i = 0; i < n_out; ++i) {
      if constexpr (kMean) {
        // 0/0 is NaN for an empty reduction, as numpy gives.
        out[i] = static_cast<T>(acc[i] / static_cast<double>(count));
      } else {
        out[i] = static_cast<T>(acc[i]);
      }
    }
    return absl::OkStatus();
  };
  if constexpr (kMean) {
    return VisitDType<float, double>(ctx, x.dtype, run);
  } else {
    return VisitDType<float, double, int32_t, int64_t>(ctx, x.dtype, run);
  }
}

}  // namespace

absl::Status RegisterReductionKernels(ir::OpRegistry& registry) {
  if (absl::Status s = registry.SetKernel("ReduceSum", ir::Backend::kCpu, &ReduceKernel<false>); !s.ok()) return s;
  if (absl::Status s = registry.SetKernel("ReduceMean", ir::Backend::kCpu, &ReduceKernel<true>); !s.ok()) return s;
  return registry.SetKernel("Softmax", ir::Backend::kCpu, &SoftmaxFamilyKernel<false>);
}

}  // namespace grove::cpu
