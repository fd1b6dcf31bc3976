// CPU reference kernels of ReduceSum and ReduceMean (Softmax is the norm
// group's, norm.cc). Reductions merge neighbouring dims that are all kept or
// all reduced, then stream the input once in memory order into an accumulator
// per output element (double for floats, f16 and bf16 included, which round
// once on store; wrapping 64-bit for integers), kept
// in the step's workspace. The prepare merges the dims and picks the loop.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "lib/backends/common/prepared.h"
#include "lib/backends/cpu/cpu_kernels.h"
#include "lib/backends/cpu/parallel_for.h"
#include "lib/backends/cpu/reduce_plan.h"
#include "lib/ir/element_types.h"

namespace grove::cpu {

using ir::VisitDType;

namespace {

using ir::KernelContext;

template <typename T>
using Accumulator = std::conditional_t<std::is_floating_point_v<ir::ComputeT<T>>, double, uint64_t>;

template <typename T>
Accumulator<T> Widen(T v) {
  return static_cast<Accumulator<T>>(ir::ToCompute(v));
}

// The accumulated value stored in T: f16 and bf16 round from the double once.
template <typename T>
T Narrow(Accumulator<T> v) {
  if constexpr (std::is_same_v<T, ir::Half>) {
    return ir::DoubleToHalf(v);
  } else if constexpr (std::is_same_v<T, ir::BFloat16>) {
    return ir::DoubleToBFloat16(v);
  } else {
    return static_cast<T>(v);
  }
}

// Sum of n contiguous elements, with four partial sums so the adds pipeline.
template <typename T>
Accumulator<T> SumRun(const T* x, int64_t n) {
  using A = Accumulator<T>;
  A s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    s0 += Widen(x[i]);
    s1 += Widen(x[i + 1]);
    s2 += Widen(x[i + 2]);
    s3 += Widen(x[i + 3]);
  }
  for (; i < n; ++i) s0 += Widen(x[i]);
  return (s0 + s1) + (s2 + s3);
}

// Adds x into acc, where acc[o] gathers every input element whose kept
// coordinates map to output element o.
// Split over the session's threads by output elements, each element's
// inputs added in the same order at any thread count.
template <typename T>
void AccumulateReduce(const KernelContext& ctx, const T* x, absl::Span<const ReduceGroup> groups,
                      Accumulator<T>* acc) {
  ForEachReduceRowParallel(IntraOpThreadsOf(ctx), groups, kCheapGrain, [&](int64_t in, int64_t out, int64_t len, bool folds) {
    if (folds) {
      acc[out] += SumRun(x + in, len);
    } else {
      for (int64_t j = 0; j < len; ++j) acc[out + j] += Widen(x[in + j]);
    }
  });
}

// What the prepare made: the input's dims merged into groups, the count per
// output element, and the loop of the dtype. The accumulator is the
// workspace. Axes given as an input whose values the plan does not know are
// read per run instead (`planned` false: the invoke plans as an unprepared
// run did).
struct ReduceParams {
  bool planned = false;
  bool empty = false;
  std::vector<ReduceGroup> groups;
  int64_t count = 1;
  void (*run)(const KernelContext& ctx, const ReduceParams& p, void* acc) = nullptr;
};

template <bool kMean, typename T>
void RunReduce(const KernelContext& ctx, const ReduceParams& p, void* acc_bytes) {
  using A = Accumulator<T>;
  TensorView& y = ctx.output(0);
  const int64_t n_out = y.num_elements();
  if (n_out == 0) return;
  A* acc = static_cast<A*>(acc_bytes);
  std::fill(acc, acc + n_out, A{0});
  if (!p.empty) AccumulateReduce(ctx, ctx.input(0).as<const T>(), p.groups, acc);
  T* out = y.as<T>();
  for (int64_t i = 0; i < n_out; ++i) {
    if constexpr (kMean) {
      // 0/0 is NaN for an empty reduction, as numpy gives.
      out[i] = Narrow<T>(acc[i] / static_cast<double>(p.count));
    } else {
      out[i] = Narrow<T>(acc[i]);
    }
  }
}

template <bool kMean>
absl::StatusOr<ReduceParams> PlanReduceParams(const KernelContext& ctx, uint64_t* acc_bytes) {
  const TensorView& x = ctx.input(0);
  absl::StatusOr<ReducePlan> plan = PlanReduce(ctx);
  if (!plan.ok()) return plan.status();
  ReduceParams p;
  p.planned = true;
  p.count = plan->count;
  p.groups = MergeReduceGroups(x.shape, plan->reduced, &p.empty);
  auto select = [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    *acc_bytes = static_cast<uint64_t>(ctx.output(0).num_elements()) * sizeof(Accumulator<T>);
    p.run = &RunReduce<kMean, T>;
    return absl::OkStatus();
  };
  absl::Status s = kMean ? VisitDType<float, double, ir::Half, ir::BFloat16>(ctx, x.dtype, select)
                         : VisitDType<float, double, ir::Half, ir::BFloat16, int32_t, int64_t>(ctx, x.dtype, select);
  if (!s.ok()) return s;
  return p;
}

template <bool kMean>
absl::StatusOr<ir::PreparedKernel> PrepareReduce(const KernelContext& ctx) {
  if (ctx.has_input(1) && ctx.input(1).data == nullptr && ctx.input(1).num_elements() > 0) {
    return backends::MakePrepared(ReduceParams{});  // axes known when run
  }
  uint64_t acc_bytes = 0;
  absl::StatusOr<ReduceParams> p = PlanReduceParams<kMean>(ctx, &acc_bytes);
  if (!p.ok()) return p.status();
  return backends::MakePrepared(*std::move(p), acc_bytes);
}

template <bool kMean>
absl::Status ReduceKernel(KernelContext& ctx) {
  const ReduceParams* p = backends::PreparedParams<ReduceParams>(ctx);
  if (p == nullptr) return backends::NotPrepared(ctx, "CPU");
  if (p->planned) {
    p->run(ctx, *p, ctx.workspace());
    return absl::OkStatus();
  }
  uint64_t acc_bytes = 0;
  absl::StatusOr<ReduceParams> run_plan = PlanReduceParams<kMean>(ctx, &acc_bytes);
  if (!run_plan.ok()) return run_plan.status();
  std::vector<uint64_t> acc((acc_bytes + 7) / 8);
  run_plan->run(ctx, *run_plan, acc.data());
  return absl::OkStatus();
}

}  // namespace

absl::Status RegisterReductionKernels(ir::OpRegistry& registry) {
  if (absl::Status s = registry.SetKernel("ReduceSum", ir::Backend::kCpu,
                                         ir::KernelDef{&ReduceKernel<false>, &PrepareReduce<false>});
      !s.ok()) {
    return s;
  }
  return registry.SetKernel("ReduceMean", ir::Backend::kCpu, ir::KernelDef{&ReduceKernel<true>, &PrepareReduce<true>});
}

}  // namespace grove::cpu
