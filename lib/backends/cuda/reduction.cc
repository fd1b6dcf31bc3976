// CUDA kernels of the Reduce* ops, ArgMax/ArgMin and CumSum (kernel
// templates in jit/kernels/reduce.cuh). The host merges neighbouring dims
// that are all kept or all reduced, drops dims of size 1, and picks how
// threads share the work:
//   - the innermost dim reduced (rows contiguous in memory): a warp per
//     output element for short rows, a block for long ones;
//   - the innermost dim kept: a thread per output element, so neighbouring
//     threads read neighbouring elements.
// Each prepare parses the attributes and builds the launch (the axes and
// CumSum's axis, read on the host, from the plan's copies when it knows
// them); the invoke fills pointers and launches. Dtypes, attributes and
// errors follow the CPU kernels (lib/backends/cpu/reduction.cc,
// reduce_search.cc). TopK has no CUDA kernel
// (it runs on the CPU).
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/types/span.h"
#include "jit/kernels/reduce_params.h"
#include "lib/backends/common/kernel_checks.h"
#include "lib/backends/common/reduce_checks.h"
#include "lib/backends/cuda/cuda_kernels.h"
#include "lib/backends/cuda/exec_context.h"
#include "lib/backends/cuda/launch_util.h"
#include "lib/backends/cuda/variant_launch.h"
#include "lib/ir/ops/reduce_axes.h"

namespace grove::cuda {
namespace {

using ir::KernelContext;
using backends::CheckOutput;
using backends::ShapeStr;

std::string DTypeList(absl::Span<const DType> types) {
  std::vector<std::string> names;
  for (DType d : types) names.push_back(std::string(DTypeName(d)));
  return absl::StrJoin(names, ", ");
}

absl::Status CheckDType(const KernelContext& ctx, int i, absl::string_view name, absl::Span<const DType> allowed) {
  const DType d = ctx.input(i).dtype;
  if (std::find(allowed.begin(), allowed.end(), d) != allowed.end()) return absl::OkStatus();
  return ctx.Error(absl::StrCat("input ", i, " (", name, ") has dtype ", DTypeName(d), "; ", ctx.node().type,
                                " supports ", DTypeList(allowed)));
}

constexpr DType kSumTypes[] = {DType::kF32, DType::kF64, DType::kF16, DType::kBF16, DType::kI32, DType::kI64};
constexpr DType kMeanTypes[] = {DType::kF32, DType::kF64, DType::kF16, DType::kBF16};
constexpr DType kNumericTypes[] = {DType::kF32, DType::kF64, DType::kF16, DType::kBF16,
                                   DType::kI64, DType::kI32, DType::kI8,  DType::kU8};
constexpr DType kArithmeticTypes[] = {DType::kF32, DType::kF64, DType::kF16, DType::kBF16, DType::kI32, DType::kI64};

enum class Reduce { kSum, kMean, kMax, kMin, kProd, kL1, kL2, kSumSquare, kLogSum, kLogSumExp };

struct ReduceInfo {
  const char* entry;
  absl::Span<const DType> types;
};

ReduceInfo InfoOf(Reduce r) {
  switch (r) {
    case Reduce::kSum:
      return {"reduce_sum", kSumTypes};
    case Reduce::kMean:
      return {"reduce_mean", kMeanTypes};
    case Reduce::kMax:
      return {"reduce_max", kNumericTypes};
    case Reduce::kMin:
      return {"reduce_min", kNumericTypes};
    case Reduce::kProd:
      return {"reduce_prod", kArithmeticTypes};
    case Reduce::kL1:
      return {"reduce_l1", kArithmeticTypes};
    case Reduce::kL2:
      return {"reduce_l2", kArithmeticTypes};
    case Reduce::kSumSquare:
      return {"reduce_sum_square", kArithmeticTypes};
    case Reduce::kLogSum:
      return {"reduce_log_sum", kArithmeticTypes};
    case Reduce::kLogSumExp:
      return {"reduce_log_sum_exp", kArithmeticTypes};
  }
  return {"", {}};
}

// A run of neighbouring dims that are all kept or all reduced, merged.
struct DimGroup {
  int64_t size;
  int64_t stride;  // in elements of the input
  bool reduced;
};

absl::Status FillDims(const KernelContext& ctx, const std::vector<DimGroup>& groups, bool reduced,
                      grove_k::Dims* dims, grove_k::Strides* strides) {
  dims->rank = 0;
  for (const DimGroup& g : groups) {
    if (g.reduced != reduced) continue;
    if (dims->rank == grove_k::kMaxRank) {
      return ctx.Error(absl::StrCat("input 0 (data) ", ShapeStr(ctx.input(0).shape), " alternates kept and reduced dims ",
                                    "more than ", grove_k::kMaxRank, " times; the CUDA kernel supports up to that"));
    }
    dims->d[dims->rank] = g.size;
    strides->s[dims->rank] = g.stride;
    ++dims->rank;
  }
  for (int k = dims->rank; k < grove_k::kMaxRank; ++k) {
    dims->d[k] = 1;
    strides->s[k] = 0;
  }
  return absl::OkStatus();
}

// A reduction's launch without pointers (n 0: nothing to launch).
template <typename Params>
struct ReduceLaunch {
  Params p{};
  int64_t n = 0;
  jit::ModuleSpec module;
  const char* entry = "";
  LaunchDims dims;
};

template <typename Params>
absl::Status RunReduce(KernelContext& ctx, const ReduceLaunch<Params>& l) {
  if (l.n == 0) return absl::OkStatus();
  Params p = l.p;
  p.x = ctx.input(0).data;
  p.y = ctx.output(0).data;
  return Exec(ctx).Launch(l.module, l.entry, l.dims, p);
}

// Reduce*: the axes (input 1, opset 18; else the attribute) read on the host.
template <Reduce kOp>
absl::StatusOr<ReduceLaunch<grove_k::ReduceParams>> PlanReduce(const KernelContext& ctx) {
  const ReduceInfo info = InfoOf(kOp);
  ExecContext& ec = Exec(ctx);
  const TensorView& x = ctx.input(0);
  const TensorView& y = ctx.output(0);
  if (absl::Status s = CheckDType(ctx, 0, "data", info.types); !s.ok()) return s;
  const int rank = static_cast<int>(x.shape.size());
  std::vector<int64_t> axes = ctx.attrs().GetInts("axes");
  if (ctx.has_input(1)) {
    const DType at = ctx.input(1).dtype;
    if (at != DType::kI64 && at != DType::kI32) {
      return ctx.Error(absl::StrCat("input 1 (axes) has dtype ", DTypeName(at), "; expected i64"));
    }
    absl::StatusOr<std::vector<int64_t>> a = ec.ReadInts(ctx, 1);
    if (!a.ok()) return a.status();
    axes = *std::move(a);
  }
  const bool keepdims = ctx.attrs().GetInt("keepdims", 1) != 0;
  const bool noop = ctx.attrs().GetInt("noop_with_empty_axes", 0) != 0;
  absl::StatusOr<std::vector<bool>> reduced = ir::ReducedDims(axes, rank, noop);
  if (!reduced.ok()) return ctx.Error(reduced.status().message());

  std::vector<int64_t> out_shape;
  int64_t count = 1;
  for (int d = 0; d < rank; ++d) {
    if ((*reduced)[d]) {
      count *= x.shape[d];
      if (keepdims) out_shape.push_back(1);
    } else {
      out_shape.push_back(x.shape[d]);
    }
  }
  if (absl::Status s = CheckOutput(ctx, 0, x.dtype, out_shape); !s.ok()) return s;
  ReduceLaunch<grove_k::ReduceParams> l;
  const int64_t n_out = y.num_elements();
  if (n_out == 0) return l;

  // Merge dims (x is contiguous); dims of size 1 drop out.
  std::vector<DimGroup> groups;
  int64_t stride = 1;
  for (int d = rank - 1; d >= 0; --d) {
    const int64_t size = x.shape[d];
    if (size != 1) {
      if (!groups.empty() && groups.back().reduced == (*reduced)[d]) {
        groups.back().size *= size;  // the stride stays the inner dim's
      } else {
        groups.push_back({size, stride, static_cast<bool>((*reduced)[d])});
      }
    }
    stride *= size;
  }
  std::reverse(groups.begin(), groups.end());

  grove_k::ReduceParams& p = l.p;
  p.n_out = n_out;
  p.count = count;
  if (absl::Status s = FillDims(ctx, groups, false, &p.kept, &p.kept_strides); !s.ok()) return s;
  if (absl::Status s = FillDims(ctx, groups, true, &p.red, &p.red_strides); !s.ok()) return s;
  const bool rows = !groups.empty() && groups.back().reduced;
  // Strided inputs (the innermost dim kept) run a thread per output: the
  // family's problem says so by an inner stride other than 1.
  const VariantLaunch v = ChooseLaunch(ctx, RowProblem("reduce", x.dtype, n_out, count, rows ? 1 : 2));
  p.mode = RowModeOf(v.config);
  l.n = n_out;
  l.module = v.module;
  l.entry = info.entry;
  l.dims = v.dims;
  return l;
}

template <bool kMax>
absl::StatusOr<ir::PreparedKernel> PrepareArgReduce(const KernelContext& ctx) {
  const TensorView& x = ctx.input(0);
  if (absl::Status s = CheckDType(ctx, 0, "data", kNumericTypes); !s.ok()) return s;
  absl::StatusOr<backends::ArgReduceShape> shape = backends::ResolveArgReduce(ctx);
  if (!shape.ok()) return shape.status();
  if (absl::Status s = CheckOutput(ctx, 0, DType::kI64, shape->out_shape); !s.ok()) return s;
  ReduceLaunch<grove_k::ArgReduceParams> l;
  grove_k::ArgReduceParams& p = l.p;
  p.outer = shape->split.outer;
  p.n = shape->split.n;
  p.inner = shape->split.inner;
  const int64_t n_out = p.outer * p.inner;
  if (n_out == 0) return MakePrepared(std::move(l));
  p.select_last = ctx.attrs().GetInt("select_last_index", 0) != 0;
  const VariantLaunch v = ChooseLaunch(ctx, RowProblem("reduce", x.dtype, n_out, p.n, p.inner));
  p.mode = RowModeOf(v.config);
  l.n = n_out;
  l.module = v.module;
  l.entry = kMax ? "reduce_argmax" : "reduce_argmin";
  l.dims = v.dims;
  return MakePrepared(std::move(l));
}

absl::Status ArgReduceKernel(KernelContext& ctx) {
  const auto* l = PreparedParams<ReduceLaunch<grove_k::ArgReduceParams>>(ctx);
  if (l == nullptr) return NotPrepared(ctx);
  return RunReduce(ctx, *l);
}

// CumSum: the axis (input 1) read on the host.
absl::StatusOr<ReduceLaunch<grove_k::CumSumParams>> PlanCumSum(const KernelContext& ctx) {
  ExecContext& ec = Exec(ctx);
  const TensorView& x = ctx.input(0);
  const TensorView& at = ctx.input(1);
  const int rank = static_cast<int>(x.shape.size());
  if (absl::Status s = CheckDType(ctx, 0, "x", kArithmeticTypes); !s.ok()) return s;
  if (rank == 0) return ctx.Error("input 0 (x) is a scalar; CumSum needs rank >= 1");
  if ((at.dtype != DType::kI64 && at.dtype != DType::kI32) || at.num_elements() != 1) {
    return ctx.Error(
        absl::StrCat("input 1 (axis) must be one i32 or i64; got ", DTypeName(at.dtype), " ", ShapeStr(at.shape)));
  }
  absl::StatusOr<std::vector<int64_t>> axis_value = ec.ReadInts(ctx, 1);
  if (!axis_value.ok()) return axis_value.status();
  absl::StatusOr<int> axis = ir::NormalizeAxis((*axis_value)[0], rank);
  if (!axis.ok()) return ctx.Error(absl::StrCat("input 1 (axis): ", axis.status().message()));
  if (absl::Status s = CheckOutput(ctx, 0, x.dtype, x.shape); !s.ok()) return s;
  ReduceLaunch<grove_k::CumSumParams> l;
  grove_k::CumSumParams& p = l.p;
  const ir::AxisSplit split = ir::SplitAt(x.shape, *axis);
  p.outer = split.outer;
  p.n = split.n;
  p.inner = split.inner;
  if (x.num_elements() == 0) return l;
  p.exclusive = ctx.attrs().GetInt("exclusive", 0) != 0;
  p.reverse = ctx.attrs().GetInt("reverse", 0) != 0;
  l.n = x.num_elements();
  l.module = jit::ModuleSpec{"reduce", {x.dtype}};
  l.entry = "reduce_cumsum";
  l.dims = RowGeometry(p.outer * p.inner, 0);
  return l;
}

constexpr uint64_t kInput1 = uint64_t{1} << 1;

template <Reduce kOp>
ir::KernelDef ReduceDef() {
  return HostValuesKernel<ReduceLaunch<grove_k::ReduceParams>, &PlanReduce<kOp>,
                          &RunReduce<grove_k::ReduceParams>, kInput1>::Def();
}

}  // namespace

absl::Status RegisterCudaReductionKernels(ir::OpRegistry& registry) {
  const std::pair<const char*, ir::KernelDef> kernels[] = {
      {"ReduceSum", ReduceDef<Reduce::kSum>()},
      {"ReduceMean", ReduceDef<Reduce::kMean>()},
      {"ReduceMax", ReduceDef<Reduce::kMax>()},
      {"ReduceMin", ReduceDef<Reduce::kMin>()},
      {"ReduceProd", ReduceDef<Reduce::kProd>()},
      {"ReduceL1", ReduceDef<Reduce::kL1>()},
      {"ReduceL2", ReduceDef<Reduce::kL2>()},
      {"ReduceSumSquare", ReduceDef<Reduce::kSumSquare>()},
      {"ReduceLogSum", ReduceDef<Reduce::kLogSum>()},
      {"ReduceLogSumExp", ReduceDef<Reduce::kLogSumExp>()},
      {"ArgMax", {&ArgReduceKernel, &PrepareArgReduce<true>}},
      {"ArgMin", {&ArgReduceKernel, &PrepareArgReduce<false>}},
      // The axis (input 1) is read on the host.
      {"CumSum", HostValuesKernel<ReduceLaunch<grove_k::CumSumParams>, &PlanCumSum,
                                  &RunReduce<grove_k::CumSumParams>, kInput1>::Def()},
  };
  for (const auto& [type, kernel] : kernels) {
    if (absl::Status s = registry.SetKernel(type, ir::Backend::kCuda, kernel); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace grove::cuda
