// CPU reference kernels of the reductions other than sum and mean, ArgMax,
// ArgMin, TopK, CumSum and NonZero. Reductions walk the input once in memory
// order (reduce_plan.h) into one accumulator per output element: the
// element's own compute type for max and min, double for sums and products of
// floats, wrapping 64-bit for integers. An empty reduction gives the
// identity of the operation: -inf (or the dtype's lowest) for max, +inf (or
// highest) for min, 1 for a product, 0 for sums, log(0) = -inf for the logs.
// NaN wins max, min, ArgMax and ArgMin and sorts as the greatest value in
// TopK, as in numpy. Each kernel's prepare reads the axes and attributes,
// checks the output and picks the loop of the dtype once per plan; the
// invokes keep their accumulators and walks in the declared workspace.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "lib/backends/common/reduce_checks.h"
#include "lib/backends/cpu/binary_kernel.h"
#include "lib/backends/cpu/cpu_kernels.h"
#include "lib/backends/cpu/reduce_plan.h"
#include "lib/ir/element_types.h"
#include "lib/ir/ops/nonzero_count.h"
#include "lib/ir/ops/reduce_axes.h"

namespace grove::cpu {

using ir::BFloat16;
using ir::ComputeT;
using ir::ConvertElement;
using ir::FromCompute;
using ir::Half;
using ir::NumericTypes;
using ir::ToCompute;
using ir::TypeList;
using ir::Visit;

namespace {

using ir::KernelContext;

using ArithmeticTypes = TypeList<float, double, Half, BFloat16, int32_t, int64_t>;

// a ranks above b: NaN above everything, then by value.
template <typename C>
bool Greater(C a, C b) {
  if constexpr (std::is_floating_point_v<C>) {
    if (std::isnan(a)) return !std::isnan(b);
    if (std::isnan(b)) return false;
  }
  return a > b;
}
// a ranks below b for a minimum: NaN below everything, then by value.
template <typename C>
bool Less(C a, C b) {
  if constexpr (std::is_floating_point_v<C>) {
    if (std::isnan(a)) return !std::isnan(b);
    if (std::isnan(b)) return false;
  }
  return a < b;
}

// Sums of floats in double, of integers in wrapping 64-bit.
template <typename T>
using SumAcc = std::conditional_t<std::is_floating_point_v<ComputeT<T>>, double, uint64_t>;

template <typename T, typename A>
T FromSum(A acc) {
  if constexpr (std::is_same_v<A, double>) {
    return ConvertElement<T>(acc);
  } else {
    return ConvertElement<T>(static_cast<int64_t>(acc));
  }
}

template <typename C>
C HighestOf() {
  return std::numeric_limits<C>::has_infinity ? std::numeric_limits<C>::infinity() : std::numeric_limits<C>::max();
}
template <typename C>
C LowestOf() {
  return std::numeric_limits<C>::has_infinity ? -std::numeric_limits<C>::infinity() : std::numeric_limits<C>::lowest();
}

// Each reduction: the accumulator type, its start value, how an element
// folds in, and the output element made from the accumulator.
struct MaxReduce {
  template <typename T>
  using Acc = ComputeT<T>;
  template <typename T>
  static Acc<T> Init() {
    return LowestOf<Acc<T>>();
  }
  template <typename T>
  static Acc<T> Fold(Acc<T> a, T x) {
    const Acc<T> v = ToCompute(x);
    return Greater(v, a) ? v : a;
  }
  template <typename T>
  static T Finish(Acc<T> a) {
    return FromCompute<T>(a);
  }
};
struct MinReduce {
  template <typename T>
  using Acc = ComputeT<T>;
  template <typename T>
  static Acc<T> Init() {
    return HighestOf<Acc<T>>();
  }
  template <typename T>
  static Acc<T> Fold(Acc<T> a, T x) {
    const Acc<T> v = ToCompute(x);
    return Less(v, a) ? v : a;
  }
  template <typename T>
  static T Finish(Acc<T> a) {
    return FromCompute<T>(a);
  }
};
struct ProdReduce {
  template <typename T>
  using Acc = SumAcc<T>;
  template <typename T>
  static Acc<T> Init() {
    return 1;
  }
  template <typename T>
  static Acc<T> Fold(Acc<T> a, T x) {
    return a * static_cast<Acc<T>>(ToCompute(x));
  }
  template <typename T>
  static T Finish(Acc<T> a) {
    return FromSum<T>(a);
  }
};
struct L1Reduce {
  template <typename T>
  using Acc = SumAcc<T>;
  template <typename T>
  static Acc<T> Init() {
    return 0;
  }
  template <typename T>
  static Acc<T> Fold(Acc<T> a, T x) {
    const auto v = ToCompute(x);
    if constexpr (std::is_floating_point_v<decltype(v)>) {
      return a + std::fabs(static_cast<double>(v));
    } else {
      // |MIN| wraps to MIN, as Abs gives.
      const uint64_t u = static_cast<uint64_t>(static_cast<int64_t>(v));
      return a + (v < 0 ? uint64_t{0} - u : u);
    }
  }
  template <typename T>
  static T Finish(Acc<T> a) {
    return FromSum<T>(a);
  }
};
struct SumSquareReduce {
  template <typename T>
  using Acc = SumAcc<T>;
  template <typename T>
  static Acc<T> Init() {
    return 0;
  }
  template <typename T>
  static Acc<T> Fold(Acc<T> a, T x) {
    const Acc<T> v = static_cast<Acc<T>>(ToCompute(x));
    return a + v * v;
  }
  template <typename T>
  static T Finish(Acc<T> a) {
    return FromSum<T>(a);
  }
};
// The square root and the logarithm need a real sum, also for integers.
struct L2Reduce {
  template <typename T>
  using Acc = double;
  template <typename T>
  static double Init() {
    return 0;
  }
  template <typename T>
  static double Fold(double a, T x) {
    const double v = static_cast<double>(ToCompute(x));
    return a + v * v;
  }
  template <typename T>
  static T Finish(double a) {
    return ConvertElement<T>(std::sqrt(a));
  }
};
struct LogSumReduce {
  template <typename T>
  using Acc = double;
  template <typename T>
  static double Init() {
    return 0;
  }
  template <typename T>
  static double Fold(double a, T x) {
    return a + static_cast<double>(ToCompute(x));
  }
  template <typename T>
  static T Finish(double a) {
    return ConvertElement<T>(std::log(a));
  }
};

// Folds every input element into acc[o] of the output element it feeds,
// split over the session's threads by output elements (each folds its
// inputs in the same order at any thread count). `groups`: the input's dims
// merged (MergeReduceGroups of a non-empty input).
template <typename Op, typename T, typename A>
void FoldReduce(const KernelContext& ctx, const T* x, absl::Span<const ReduceGroup> groups, A* acc) {
  auto fold = [&](int64_t in, int64_t out, int64_t len, bool folds) {
    const T* row = x + in;
    if (folds) {
      A a = acc[out];
      for (int64_t j = 0; j < len; ++j) a = Op::template Fold<T>(a, row[j]);
      acc[out] = a;
    } else {
      A* o = acc + out;
      for (int64_t j = 0; j < len; ++j) o[j] = Op::template Fold<T>(o[j], row[j]);
    }
  };
  ForEachReduceRowParallel(IntraOpThreadsOf(ctx), groups, kCheapGrain, fold);
}

// What the prepare of a reduction makes: the input's dims merged into
// groups and the loop of the dtype; the accumulators are the workspace
// (declared from the planned output, so also when the axes are an input the
// plan does not know: then `planned` is false and the invoke plans as an
// unprepared run did).
struct ReduceSearchParams {
  bool planned = false;
  bool empty = false;
  std::vector<ReduceGroup> groups;
  void (*run)(const KernelContext& ctx, const ReduceSearchParams& p, void* workspace) = nullptr;
};
using ReduceSearchRunFn = decltype(ReduceSearchParams::run);

template <typename Op, typename T>
void RunReduce(const KernelContext& ctx, const ReduceSearchParams& p, void* workspace) {
  using A = typename Op::template Acc<T>;
  TensorView& y = ctx.output(0);
  const int64_t n_out = y.num_elements();
  A* acc = static_cast<A*>(workspace);
  std::fill(acc, acc + n_out, Op::template Init<T>());
  if (!p.empty) FoldReduce<Op>(ctx, ctx.input(0).as<const T>(), p.groups, acc);
  T* out = y.as<T>();
  for (int64_t i = 0; i < n_out; ++i) out[i] = Op::template Finish<T>(acc[i]);
}

// Calls row(in_offset, out_offset, len, folds) for the input's elements in
// memory order (ForEachReduceRow over groups merged once), on this thread.
template <typename RowFn>
void ForEachGroupRow(absl::Span<const ReduceGroup> groups, RowFn& row) {
  if (groups.empty()) {
    row(int64_t{0}, int64_t{0}, int64_t{1}, true);
    return;
  }
  WalkReduceRows(groups, 0, 0, 0, 0, groups.back().size, row);
}

// log(sum(exp(x))) as max + log(sum(exp(x - max))) so that large inputs do
// not overflow: one pass for the max, one for the sum. The workspace holds
// the max (compute type), then the shift and the sum (double) per output.
template <typename T>
uint64_t LogSumExpShiftOffset(int64_t n_out) {
  return (static_cast<uint64_t>(n_out) * sizeof(ComputeT<T>) + 63) / 64 * 64;
}

template <typename T>
void RunLogSumExp(const KernelContext& ctx, const ReduceSearchParams& p, void* workspace) {
  TensorView& y = ctx.output(0);
  const int64_t n_out = y.num_elements();
  const T* in = ctx.input(0).as<const T>();
  auto* w = static_cast<uint8_t*>(workspace);
  ComputeT<T>* max = reinterpret_cast<ComputeT<T>*>(w);
  double* shift = reinterpret_cast<double*>(w + LogSumExpShiftOffset<T>(n_out));
  double* sum = shift + n_out;
  std::fill(max, max + n_out, MaxReduce::Init<T>());
  if (!p.empty) FoldReduce<MaxReduce>(ctx, in, p.groups, max);
  // An infinite or NaN max is the result itself (exp(inf - inf) is NaN).
  for (int64_t i = 0; i < n_out; ++i) {
    const double m = static_cast<double>(max[i]);
    shift[i] = std::isfinite(m) ? m : 0.0;
  }
  std::fill(sum, sum + n_out, 0.0);
  auto add = [&](int64_t i, int64_t out, int64_t len, bool folds) {
    for (int64_t j = 0; j < len; ++j) {
      const int64_t o = folds ? out : out + j;
      sum[o] += std::exp(static_cast<double>(ToCompute(in[i + j])) - shift[o]);
    }
  };
  if (!p.empty) ForEachGroupRow(p.groups, add);
  T* o = y.as<T>();
  for (int64_t i = 0; i < n_out; ++i) {
    const double m = static_cast<double>(max[i]);
    o[i] = ConvertElement<T>(std::isfinite(m) ? m + std::log(sum[i]) : m);
  }
}

// The loop of one reduction and its workspace, per dtype.
template <typename Op>
struct ReduceLoop {
  template <typename T>
  static ReduceSearchRunFn Run() {
    return &RunReduce<Op, T>;
  }
  template <typename T>
  static uint64_t Bytes(int64_t n_out) {
    return static_cast<uint64_t>(n_out) * sizeof(typename Op::template Acc<T>);
  }
};
struct LogSumExpLoop {
  template <typename T>
  static ReduceSearchRunFn Run() {
    return &RunLogSumExp<T>;
  }
  template <typename T>
  static uint64_t Bytes(int64_t n_out) {
    return LogSumExpShiftOffset<T>(n_out) + 2 * static_cast<uint64_t>(n_out) * sizeof(double);
  }
};

// The axes (attribute or input 1), the output check, the groups and the loop.
template <typename Loop, typename Types>
absl::StatusOr<ReduceSearchParams> PlanReduceSearch(const KernelContext& ctx) {
  const TensorView& x = ctx.input(0);
  absl::StatusOr<ReducePlan> plan = PlanReduce(ctx);
  if (!plan.ok()) return plan.status();
  ReduceSearchParams p;
  p.planned = true;
  p.groups = MergeReduceGroups(x.shape, plan->reduced, &p.empty);
  absl::Status chosen = Visit(Types{}, ctx, x.dtype, [&](auto tag) -> absl::Status {
    p.run = Loop::template Run<typename decltype(tag)::type>();
    return absl::OkStatus();
  });
  if (!chosen.ok()) return chosen;
  return p;
}

template <typename Loop, typename Types>
absl::StatusOr<ir::PreparedKernel> PrepareReduceSearch(const KernelContext& ctx) {
  ReduceSearchParams p;
  if (!(ctx.has_input(1) && ctx.input(1).data == nullptr && ctx.input(1).num_elements() > 0)) {
    absl::StatusOr<ReduceSearchParams> planned = PlanReduceSearch<Loop, Types>(ctx);
    if (!planned.ok()) return planned.status();
    p = *std::move(planned);
  }
  uint64_t bytes = 0;
  absl::Status sized = Visit(Types{}, ctx, ctx.input(0).dtype, [&](auto tag) -> absl::Status {
    bytes = Loop::template Bytes<typename decltype(tag)::type>(ctx.output(0).num_elements());
    return absl::OkStatus();
  });
  if (!sized.ok()) return sized;
  return backends::MakePrepared(std::move(p), bytes);
}

template <typename Loop, typename Types>
absl::Status ReduceSearchKernel(KernelContext& ctx) {
  return backends::InvokePlannedOrPerRun<ReduceSearchParams>(
      ctx, "CPU",
      [](const KernelContext& c, const ReduceSearchParams&) { return PlanReduceSearch<Loop, Types>(c); },
      [&](const ReduceSearchParams& p) { p.run(ctx, p, ctx.workspace()); });
}

// ---------------------------------------------------------------------------
// ArgMax ArgMin.
// ---------------------------------------------------------------------------

// ArgMax / ArgMin: the axis split, select_last_index and the loop of the
// input's dtype, made once at prepare; the best value so far per column
// lives in the workspace (inner values of the compute type).
struct ArgReduceParams {
  ir::AxisSplit split;
  bool last = false;
  void (*run)(const ArgReduceParams& p, const void* in, int64_t* out, void* best) = nullptr;
};

template <bool kMax, typename T>
void RunArgReduce(const ArgReduceParams& p, const void* in_data, int64_t* out, void* best_data) {
  using C = ComputeT<T>;
  const T* in = static_cast<const T*>(in_data);
  C* best = static_cast<C*>(best_data);
  const ir::AxisSplit& s = p.split;
  // Rows are read in memory order.
  for (int64_t o = 0; o < s.outer; ++o) {
    const T* block = in + o * s.n * s.inner;
    int64_t* idx = out + o * s.inner;
    for (int64_t i = 0; i < s.inner; ++i) {
      best[i] = ToCompute(block[i]);
      idx[i] = 0;
    }
    for (int64_t j = 1; j < s.n; ++j) {
      const T* row = block + j * s.inner;
      for (int64_t i = 0; i < s.inner; ++i) {
        const C v = ToCompute(row[i]);
        const bool strictly = kMax ? Greater(v, best[i]) : Less(v, best[i]);
        const bool tie = !strictly && !(kMax ? Greater(best[i], v) : Less(best[i], v));
        if (strictly || (p.last && tie)) {
          best[i] = v;
          idx[i] = j;
        }
      }
    }
  }
}

template <bool kMax>
absl::StatusOr<ir::PreparedKernel> PrepareArgReduce(const KernelContext& ctx) {
  const TensorView& x = ctx.input(0);
  absl::StatusOr<backends::ArgReduceShape> shape = backends::ResolveArgReduce(ctx);
  if (!shape.ok()) return shape.status();
  ArgReduceParams p;
  p.last = ctx.attrs().GetInt("select_last_index", 0) != 0;
  p.split = shape->split;
  if (absl::Status st = CheckOutputLike(ctx, DType::kI64, shape->out_shape); !st.ok()) return st;
  uint64_t best_bytes = 0;
  absl::Status chosen = Visit(NumericTypes{}, ctx, x.dtype, [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    p.run = &RunArgReduce<kMax, T>;
    best_bytes = static_cast<uint64_t>(p.split.inner) * sizeof(ComputeT<T>);
    return absl::OkStatus();
  });
  if (!chosen.ok()) return chosen;
  return backends::MakePrepared(std::move(p), best_bytes);
}

absl::Status ArgReduceKernel(KernelContext& ctx) {
  const ArgReduceParams* p = backends::PreparedParams<ArgReduceParams>(ctx);
  if (p == nullptr) return backends::NotPrepared(ctx, "CPU");
  p->run(*p, ctx.input(0).data, ctx.output(0).as<int64_t>(), ctx.workspace());
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------
// TopK.
// ---------------------------------------------------------------------------

// TopK: the axis split, k, largest and the loop of the dtype, made once when
// the plan knows K (input 1: a weight or folded value), per run otherwise
// (`planned` false); one column's values and its order live in the
// workspace (n values of the compute type, then n i64), declared either way.
struct TopKParams {
  bool planned = false;
  ir::AxisSplit split;
  int axis = 0;
  int64_t k = 0;
  bool largest = true;
  uint64_t order_offset = 0;  // bytes into the workspace
  void (*run)(const TopKParams& p, const void* in, void* values, int64_t* indices, void* workspace) = nullptr;
};

template <typename T>
void RunTopK(const TopKParams& p, const void* in_data, void* values_data, int64_t* indices, void* workspace) {
  using C = ComputeT<T>;
  const T* in = static_cast<const T*>(in_data);
  T* values = static_cast<T*>(values_data);
  const ir::AxisSplit& s = p.split;
  const int64_t k = p.k;
  const bool largest = p.largest;
  C* column = static_cast<C*>(workspace);
  int64_t* order = reinterpret_cast<int64_t*>(static_cast<uint8_t*>(workspace) + p.order_offset);
  // A total order (ties by index), so the result does not depend on the
  // sort's algorithm: "sorted" = 0 gets the same sorted answer. NaN sorts
  // as the greatest value, as in numpy's sort.
  auto before = [&](int64_t a, int64_t b) {
    const C va = column[a], vb = column[b];
    if (largest ? Greater(va, vb) : Greater(vb, va)) return true;
    if (largest ? Greater(vb, va) : Greater(va, vb)) return false;
    return a < b;
  };
  for (int64_t o = 0; o < s.outer; ++o) {
    for (int64_t i = 0; i < s.inner; ++i) {
      const T* src = in + o * s.n * s.inner + i;
      for (int64_t j = 0; j < s.n; ++j) column[j] = ToCompute(src[j * s.inner]);
      std::iota(order, order + s.n, int64_t{0});
      std::partial_sort(order, order + k, order + s.n, before);
      const int64_t base = o * k * s.inner + i;
      for (int64_t j = 0; j < k; ++j) {
        values[base + j * s.inner] = src[order[j] * s.inner];
        if (indices != nullptr) indices[base + j * s.inner] = order[j];
      }
    }
  }
}

// The axis and the loop (no K): what the prepare can always make, and the
// workspace they need.
absl::StatusOr<TopKParams> TopKShape(const KernelContext& ctx, uint64_t* workspace_bytes) {
  const TensorView& x = ctx.input(0);
  const TensorView& kt = ctx.input(1);
  const int rank = static_cast<int>(x.shape.size());
  if (rank == 0) return ctx.Error("input 0 (X) is a scalar; TopK needs rank >= 1");
  absl::StatusOr<int> axis = ir::NormalizeAxis(ctx.attrs().GetInt("axis", -1), rank);
  if (!axis.ok()) return ctx.Error(absl::StrCat("attribute 'axis': ", axis.status().message()));
  if (kt.dtype != DType::kI64 || kt.num_elements() != 1) {
    return ctx.Error(absl::StrCat("input 1 (K) must be one i64; got ", DTypeName(kt.dtype), " ", DimsString(kt.shape)));
  }
  TopKParams p;
  p.axis = *axis;
  p.split = ir::SplitAt(x.shape, *axis);
  p.largest = ctx.attrs().GetInt("largest", 1) != 0;
  uint64_t column_bytes = 0;
  absl::Status chosen = Visit(NumericTypes{}, ctx, x.dtype, [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    p.run = &RunTopK<T>;
    column_bytes = static_cast<uint64_t>(p.split.n) * sizeof(ComputeT<T>);
    return absl::OkStatus();
  });
  if (!chosen.ok()) return chosen;
  p.order_offset = (column_bytes + 63) / 64 * 64;
  *workspace_bytes = p.order_offset + static_cast<uint64_t>(p.split.n) * sizeof(int64_t);
  return p;
}

// K's value (read on the host) and the outputs' check.
absl::Status PlanTopK(const KernelContext& ctx, TopKParams& p) {
  const TensorView& x = ctx.input(0);
  const int axis = p.axis;
  const int64_t k = ctx.input(1).as<const int64_t>()[0];
  const ir::AxisSplit& s = p.split;
  if (k < 0 || k > s.n) {
    return ctx.Error(absl::StrCat("input 1 (K) is ", k, "; expected 0..", s.n, " (the size of axis ", axis,
                                  " of input 0 (X), ", DimsString(x.shape), ")"));
  }
  std::vector<int64_t> out_shape = x.shape;
  out_shape[axis] = k;
  if (absl::Status st = CheckOutputLike(ctx, x.dtype, out_shape, 0); !st.ok()) return st;
  if (ctx.has_output(1)) {
    if (absl::Status st = CheckOutputLike(ctx, DType::kI64, out_shape, 1); !st.ok()) return st;
  }
  p.k = k;
  p.planned = true;
  return absl::OkStatus();
}

absl::StatusOr<ir::PreparedKernel> PrepareTopK(const KernelContext& ctx) {
  uint64_t workspace_bytes = 0;
  absl::StatusOr<TopKParams> p = TopKShape(ctx, &workspace_bytes);
  if (!p.ok()) return p.status();
  if (ctx.input(1).data != nullptr) {
    if (absl::Status s = PlanTopK(ctx, *p); !s.ok()) return s;
  }
  return backends::MakePrepared(*std::move(p), workspace_bytes);
}

absl::Status TopKKernel(KernelContext& ctx) {
  return backends::InvokePlannedOrPerRun<TopKParams>(
      ctx, "CPU",
      [](const KernelContext& c, const TopKParams& prepared) -> absl::StatusOr<TopKParams> {
        TopKParams run = prepared;
        if (absl::Status s = PlanTopK(c, run); !s.ok()) return s;
        return run;
      },
      [&](const TopKParams& p) {
        p.run(p, ctx.input(0).data, ctx.output(0).data, ctx.has_output(1) ? ctx.output(1).as<int64_t>() : nullptr,
              ctx.workspace());
      });
}

// ---------------------------------------------------------------------------
// CumSum.
// ---------------------------------------------------------------------------

// CumSum: the axis split, exclusive, reverse, the output check and the loop
// of the dtype, made once when the plan knows the axis (input 1: a weight or
// folded value), per run otherwise (`planned` false); one row of running
// sums lives in the workspace, declared for the largest row either way.
struct CumSumParams {
  bool planned = false;
  ir::AxisSplit split;
  bool exclusive = false, reverse = false;
  void (*run)(const CumSumParams& p, const void* in, void* out, void* sums) = nullptr;
};

template <typename T>
void RunCumSum(const CumSumParams& p, const void* in_data, void* out_data, void* sums) {
  using A = SumAcc<T>;
  const T* in = static_cast<const T*>(in_data);
  T* out = static_cast<T*>(out_data);
  A* run = static_cast<A*>(sums);
  const ir::AxisSplit& s = p.split;
  for (int64_t o = 0; o < s.outer; ++o) {
    std::fill(run, run + s.inner, A{0});
    for (int64_t step = 0; step < s.n; ++step) {
      const int64_t j = p.reverse ? s.n - 1 - step : step;
      const int64_t off = (o * s.n + j) * s.inner;
      for (int64_t i = 0; i < s.inner; ++i) {
        const A v = static_cast<A>(ToCompute(in[off + i]));
        if (p.exclusive) {
          out[off + i] = FromSum<T>(run[i]);
          run[i] += v;
        } else {
          run[i] += v;
          out[off + i] = FromSum<T>(run[i]);
        }
      }
    }
  }
}

// The input checks (the axis' dtype and count): what the prepare can always
// make.
absl::Status CheckCumSumInputs(const KernelContext& ctx) {
  const TensorView& at = ctx.input(1);
  if (ctx.input(0).shape.empty()) return ctx.Error("input 0 (x) is a scalar; CumSum needs rank >= 1");
  if ((at.dtype != DType::kI64 && at.dtype != DType::kI32) || at.num_elements() != 1) {
    return ctx.Error(
        absl::StrCat("input 1 (axis) must be one i32 or i64; got ", DTypeName(at.dtype), " ", DimsString(at.shape)));
  }
  return absl::OkStatus();
}

// The axis' value (read on the host), the output check and the loop.
absl::StatusOr<CumSumParams> MakeCumSumParams(const KernelContext& ctx) {
  const TensorView& x = ctx.input(0);
  const TensorView& at = ctx.input(1);
  const int rank = static_cast<int>(x.shape.size());
  const int64_t axis_value = at.dtype == DType::kI64 ? at.as<const int64_t>()[0] : at.as<const int32_t>()[0];
  absl::StatusOr<int> axis = ir::NormalizeAxis(axis_value, rank);
  if (!axis.ok()) return ctx.Error(absl::StrCat("input 1 (axis): ", axis.status().message()));
  if (absl::Status st = CheckOutputLike(ctx, x.dtype, x.shape); !st.ok()) return st;
  CumSumParams p;
  p.planned = true;
  p.exclusive = ctx.attrs().GetInt("exclusive", 0) != 0;
  p.reverse = ctx.attrs().GetInt("reverse", 0) != 0;
  p.split = ir::SplitAt(x.shape, *axis);
  absl::Status chosen = Visit(ArithmeticTypes{}, ctx, x.dtype, [&](auto tag) -> absl::Status {
    p.run = &RunCumSum<typename decltype(tag)::type>;
    return absl::OkStatus();
  });
  if (!chosen.ok()) return chosen;
  return p;
}

absl::StatusOr<ir::PreparedKernel> PrepareCumSum(const KernelContext& ctx) {
  if (absl::Status s = CheckCumSumInputs(ctx); !s.ok()) return s;
  static_assert(sizeof(SumAcc<float>) == 8 && sizeof(SumAcc<int32_t>) == 8);
  if (ctx.input(1).data == nullptr) {
    // The longest row of any axis (the dims after it); 8-byte sums.
    const std::vector<int64_t>& shape = ctx.input(0).shape;
    int64_t inner = 1, longest = 1;
    for (size_t d = shape.size(); d-- > 1;) longest = std::max(longest, inner *= shape[d]);
    return backends::MakePrepared(CumSumParams{}, static_cast<uint64_t>(longest) * 8);
  }
  absl::StatusOr<CumSumParams> p = MakeCumSumParams(ctx);
  if (!p.ok()) return p.status();
  const uint64_t sums_bytes = static_cast<uint64_t>(p->split.inner) * 8;
  return backends::MakePrepared(*std::move(p), sums_bytes);
}

absl::Status CumSumKernel(KernelContext& ctx) {
  return backends::InvokePlannedOrPerRun<CumSumParams>(
      ctx, "CPU", [](const KernelContext& c, const CumSumParams&) { return MakeCumSumParams(c); },
      [&](const CumSumParams& p) { p.run(p, ctx.input(0).data, ctx.output(0).data, ctx.workspace()); });
}

// ---------------------------------------------------------------------------
// NonZero.
// ---------------------------------------------------------------------------

// The output was allocated from the shape function's count, computed with
// the same predicate (nonzero_count.h); the kernel only checks and fills.
// The prepare keeps the rank; the walk's position lives in the workspace.
struct NonZeroParams {
  int rank = 0;
  int64_t rows = 1;
};

absl::StatusOr<ir::PreparedKernel> PrepareNonZero(const KernelContext& ctx) {
  NonZeroParams p;
  p.rank = static_cast<int>(ctx.input(0).shape.size());
  p.rows = p.rank == 0 ? 1 : p.rank;
  return backends::MakePrepared(p, static_cast<uint64_t>(p.rank) * sizeof(int64_t));
}

absl::Status NonZeroKernel(KernelContext& ctx) {
  const NonZeroParams* p = backends::PreparedParams<NonZeroParams>(ctx);
  if (p == nullptr) return backends::NotPrepared(ctx, "CPU");
  const TensorView& x = ctx.input(0);
  const int rank = p->rank;
  const int64_t count = ir::CountNonZero(x);
  if (absl::Status st = CheckOutputLike(ctx, DType::kI64, {p->rows, count}); !st.ok()) return st;
  int64_t* out = ctx.output(0).as<int64_t>();
  const int64_t n = x.num_elements();
  const size_t size = DTypeSize(x.dtype);
  const auto* bytes = static_cast<const uint8_t*>(x.data);
  int64_t* index = static_cast<int64_t*>(ctx.workspace());
  std::fill(index, index + rank, int64_t{0});
  int64_t c = 0;
  for (int64_t e = 0; e < n; ++e) {
    if (ir::ElementIsNonZero(bytes + e * size, x.dtype)) {
      if (rank == 0) {
        out[c] = 0;
      } else {
        for (int d = 0; d < rank; ++d) out[d * count + c] = index[d];
      }
      ++c;
    }
    for (int d = rank - 1; d >= 0; --d) {
      if (++index[d] < x.shape[d]) break;
      index[d] = 0;
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status RegisterReduceSearchKernels(ir::OpRegistry& registry) {
  auto reduce = [&](const char* type, ir::KernelFn invoke, ir::PrepareFn prepare) {
    return registry.SetKernel(type, ir::Backend::kCpu, ir::KernelDef{invoke, prepare});
  };
  const absl::Status prepared[] = {
      reduce("ReduceMax", &ReduceSearchKernel<ReduceLoop<MaxReduce>, NumericTypes>,
             &PrepareReduceSearch<ReduceLoop<MaxReduce>, NumericTypes>),
      reduce("ReduceMin", &ReduceSearchKernel<ReduceLoop<MinReduce>, NumericTypes>,
             &PrepareReduceSearch<ReduceLoop<MinReduce>, NumericTypes>),
      reduce("ReduceProd", &ReduceSearchKernel<ReduceLoop<ProdReduce>, ArithmeticTypes>,
             &PrepareReduceSearch<ReduceLoop<ProdReduce>, ArithmeticTypes>),
      reduce("ReduceL1", &ReduceSearchKernel<ReduceLoop<L1Reduce>, ArithmeticTypes>,
             &PrepareReduceSearch<ReduceLoop<L1Reduce>, ArithmeticTypes>),
      reduce("ReduceL2", &ReduceSearchKernel<ReduceLoop<L2Reduce>, ArithmeticTypes>,
             &PrepareReduceSearch<ReduceLoop<L2Reduce>, ArithmeticTypes>),
      reduce("ReduceLogSum", &ReduceSearchKernel<ReduceLoop<LogSumReduce>, ArithmeticTypes>,
             &PrepareReduceSearch<ReduceLoop<LogSumReduce>, ArithmeticTypes>),
      reduce("ReduceSumSquare", &ReduceSearchKernel<ReduceLoop<SumSquareReduce>, ArithmeticTypes>,
             &PrepareReduceSearch<ReduceLoop<SumSquareReduce>, ArithmeticTypes>),
      reduce("ReduceLogSumExp", &ReduceSearchKernel<LogSumExpLoop, ArithmeticTypes>,
             &PrepareReduceSearch<LogSumExpLoop, ArithmeticTypes>),
      registry.SetKernel("ArgMax", ir::Backend::kCpu, ir::KernelDef{&ArgReduceKernel, &PrepareArgReduce<true>}),
      registry.SetKernel("ArgMin", ir::Backend::kCpu, ir::KernelDef{&ArgReduceKernel, &PrepareArgReduce<false>}),
      registry.SetKernel("TopK", ir::Backend::kCpu, ir::KernelDef{&TopKKernel, &PrepareTopK}),
      registry.SetKernel("CumSum", ir::Backend::kCpu, ir::KernelDef{&CumSumKernel, &PrepareCumSum}),
      registry.SetKernel("NonZero", ir::Backend::kCpu, ir::KernelDef{&NonZeroKernel, &PrepareNonZero}),
  };
  for (const absl::Status& s : prepared) {
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace grove::cpu
