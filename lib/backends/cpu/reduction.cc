// CPU reference kernels of ReduceSum and ReduceMean (Softmax is the norm
// group's, norm.cc). Reductions merge neighbouring dims that are all kept or
// all reduced, then stream the input once in memory order into an accumulator
// per output element (double for floats, wrapping 64-bit for integers).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "lib/backends/cpu/cpu_kernels.h"
#include "lib/backends/cpu/parallel_for.h"
#include "lib/backends/cpu/reduce_plan.h"
#include "lib/ir/element_types.h"

namespace grove::cpu {

using ir::VisitDType;

namespace {

using ir::KernelContext;

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
// Split over the session's threads by output elements, each element's
// inputs added in the same order at any thread count.
template <typename T>
void AccumulateReduce(const KernelContext& ctx, const T* x, absl::Span<const int64_t> shape,
                      const std::vector<bool>& reduced, Accumulator<T>* acc) {
  ForEachReduceRowParallel(IntraOpThreadsOf(ctx), shape, reduced, kCheapGrain, [&](int64_t in, int64_t out, int64_t len, bool folds) {
    if (folds) {
      acc[out] += SumRun(x + in, len);
    } else {
      for (int64_t j = 0; j < len; ++j) acc[out + j] += static_cast<Accumulator<T>>(x[in + j]);
    }
  });
}

template <bool kMean>
absl::Status ReduceKernel(KernelContext& ctx) {
  const TensorView& x = ctx.input(0);
  TensorView& y = ctx.output(0);
  absl::StatusOr<ReducePlan> plan = PlanReduce(ctx);
  if (!plan.ok()) return plan.status();
  const int64_t count = plan->count;

  auto run = [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    using A = Accumulator<T>;
    const int64_t n_out = y.num_elements();
    std::vector<A> acc(static_cast<size_t>(n_out), A{0});
    if (n_out == 0) return absl::OkStatus();
    AccumulateReduce(ctx, x.as<const T>(), x.shape, plan->reduced, acc.data());
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
  return registry.SetKernel("ReduceMean", ir::Backend::kCpu, &ReduceKernel<true>);
}

}  // namespace grove::cpu
