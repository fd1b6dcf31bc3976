// CUDA kernels of Softmax, LogSoftmax (jit/kernels/softmax.cuh) and
// LayerNormalization, InstanceNormalization, BatchNormalization in
// inference mode (jit/kernels/norm.cuh). Rows along the normalized axis get
// a warp each when short and a block each when long; Softmax along an axis
// that is not the innermost runs a thread per column instead, so that
// neighbouring threads read neighbouring elements. The lanes per row and
// threads a block are a kernel variant (families "softmax" and "norm",
// jit/kernel_config.h) chosen when the step is prepared. Each prepare checks and
// builds the launch; the invoke fills pointers. Dtypes, attributes and
// errors follow the CPU kernels (lib/backends/cpu/norm.cc).
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/types/span.h"
#include "jit/kernels/norm_params.h"
#include "jit/kernels/softmax_params.h"
#include "lib/backends/common/kernel_checks.h"
#include "lib/backends/common/norm_checks.h"
#include "lib/backends/cuda/cuda_kernels.h"
#include "lib/backends/cuda/exec_context.h"
#include "lib/backends/cuda/launch_util.h"
#include "lib/backends/cuda/variant_launch.h"

namespace grove::cuda {
namespace {

using ir::KernelContext;
using backends::CheckChannelVector;
using backends::CheckOutput;
using backends::CheckRank;
using backends::ShapeStr;

bool IsFloat(DType d) { return d == DType::kF32 || d == DType::kF64 || d == DType::kF16 || d == DType::kBF16; }

absl::Status CheckFloat(const KernelContext& ctx, int i, absl::string_view name) {
  const DType d = ctx.input(i).dtype;
  if (IsFloat(d)) return absl::OkStatus();
  return ctx.Error(absl::StrCat("input ", i, " (", name, ") has dtype ", DTypeName(d), "; ", ctx.node().type,
                                " supports f32, f64, f16, bf16"));
}

int ParamType(DType d) {
  switch (d) {
    case DType::kF64:
      return grove_k::kNormF64;
    case DType::kF16:
      return grove_k::kNormF16;
    case DType::kBF16:
      return grove_k::kNormBF16;
    default:
      return grove_k::kNormF32;
  }
}

// ---------------------------------------------------------------------------
// Softmax, LogSoftmax
// ---------------------------------------------------------------------------

// A norm group launch without pointers (empty: nothing to launch).
template <typename Params>
struct NormLaunch {
  Params p{};
  bool empty = false;
  jit::ModuleSpec module;
  LaunchDims dims;
};

template <bool kLog>
absl::StatusOr<ir::PreparedKernel> PrepareSoftmax(const KernelContext& ctx) {
  const TensorView& x = ctx.input(0);
  const int rank = static_cast<int>(x.shape.size());
  absl::StatusOr<int> axis = ir::NormalizeAxis(ctx.attrs().GetInt("axis", -1), rank);
  if (!axis.ok()) return ctx.Error(absl::StrCat("attribute 'axis': ", axis.status().message()));
  if (rank == 0) {
    return ctx.Error(absl::StrCat("input 0 (input) is a scalar; ", ctx.node().type, " needs rank >= 1"));
  }
  if (absl::Status s = CheckFloat(ctx, 0, "input"); !s.ok()) return s;
  if (absl::Status s = CheckOutput(ctx, 0, x.dtype, x.shape); !s.ok()) return s;
  NormLaunch<grove_k::SoftmaxParams> l;
  grove_k::SoftmaxParams& p = l.p;
  p.outer = 1;
  p.inner = 1;
  for (int d = 0; d < *axis; ++d) p.outer *= x.shape[d];
  for (int d = *axis + 1; d < rank; ++d) p.inner *= x.shape[d];
  p.n = x.shape[*axis];
  l.empty = x.num_elements() == 0;
  p.log = kLog ? 1 : 0;
  const VariantLaunch v = ChooseLaunch(ctx, RowProblem("softmax", x.dtype, p.outer * p.inner, p.n, p.inner));
  p.mode = RowModeOf(v.config);
  l.module = v.module;
  l.dims = v.dims;
  return MakePrepared(std::move(l));
}

absl::Status SoftmaxKernel(KernelContext& ctx) {
  const auto* l = PreparedParams<NormLaunch<grove_k::SoftmaxParams>>(ctx);
  if (l == nullptr) return NotPrepared(ctx);
  if (l->empty) return absl::OkStatus();
  grove_k::SoftmaxParams p = l->p;
  p.x = ctx.input(0).data;
  p.y = ctx.output(0).data;
  return Exec(ctx).Launch(l->module, "softmax", l->dims, p);
}

// ---------------------------------------------------------------------------
// Normalizations
// ---------------------------------------------------------------------------

absl::StatusOr<ir::PreparedKernel> PrepareBatchNormalization(const KernelContext& ctx) {
  if (ctx.attrs().GetInt("training_mode", 0) != 0) {
    return ctx.Error("attribute 'training_mode' is not 0; the CUDA kernel normalizes with the given statistics only "
                     "(plans run training mode on the CPU)");
  }
  const TensorView& x = ctx.input(0);
  if (absl::Status s = CheckRank(ctx, 0, "X", 2); !s.ok()) return s;
  if (absl::Status s = CheckFloat(ctx, 0, "X"); !s.ok()) return s;
  const int64_t channels = x.shape[1];
  static constexpr const char* kNames[] = {"X", "scale", "B", "input_mean", "input_var"};
  for (int i = 1; i < 5; ++i) {
    if (absl::Status s = CheckChannelVector(ctx, i, kNames[i], channels); !s.ok()) return s;
    if (absl::Status s = CheckFloat(ctx, i, kNames[i]); !s.ok()) return s;
  }
  if (absl::Status s = CheckOutput(ctx, 0, x.dtype, x.shape); !s.ok()) return s;
  NormLaunch<grove_k::BatchNormParams> l;
  grove_k::BatchNormParams& p = l.p;
  p.total = x.num_elements();
  l.empty = p.total == 0;
  p.channels = channels;
  p.inner = 1;
  for (size_t d = 2; d < x.shape.size(); ++d) p.inner *= x.shape[d];
  p.epsilon = ctx.attrs().GetFloat("epsilon", 1e-5);
  p.scale_type = ParamType(ctx.input(1).dtype);
  p.bias_type = ParamType(ctx.input(2).dtype);
  p.mean_type = ParamType(ctx.input(3).dtype);
  p.var_type = ParamType(ctx.input(4).dtype);
  l.module = jit::ModuleSpec{"norm", {x.dtype}};
  l.dims = Grid1D(p.total, kRowThreads, kRowMaxBlocks);
  return MakePrepared(std::move(l));
}

absl::Status BatchNormalizationKernel(KernelContext& ctx) {
  const auto* l = PreparedParams<NormLaunch<grove_k::BatchNormParams>>(ctx);
  if (l == nullptr) return NotPrepared(ctx);
  if (l->empty) return absl::OkStatus();
  grove_k::BatchNormParams p = l->p;
  p.x = ctx.input(0).data;
  p.y = ctx.output(0).data;
  p.scale = ctx.input(1).data;
  p.bias = ctx.input(2).data;
  p.mean = ctx.input(3).data;
  p.var = ctx.input(4).data;
  return Exec(ctx).Launch(l->module, "norm_batch", l->dims, p);
}

void InitAffine(grove_k::NormRowsParams* p) {
  p->aff.rank = 0;
  for (int k = 0; k < grove_k::kMaxRank; ++k) {
    p->aff.d[k] = 1;
    p->scale_strides.s[k] = 0;
    p->bias_strides.s[k] = 0;
  }
}

absl::StatusOr<ir::PreparedKernel> PrepareInstanceNormalization(const KernelContext& ctx) {
  const TensorView& x = ctx.input(0);
  if (absl::Status s = CheckRank(ctx, 0, "input", 3); !s.ok()) return s;
  if (absl::Status s = CheckFloat(ctx, 0, "input"); !s.ok()) return s;
  const int64_t channels = x.shape[1];
  for (int i = 1; i < 3; ++i) {
    const char* name = i == 1 ? "scale" : "B";
    if (absl::Status s = CheckChannelVector(ctx, i, name, channels); !s.ok()) return s;
    if (absl::Status s = CheckFloat(ctx, i, name); !s.ok()) return s;
  }
  if (absl::Status s = CheckOutput(ctx, 0, x.dtype, x.shape); !s.ok()) return s;
  NormLaunch<grove_k::NormRowsParams> l;
  grove_k::NormRowsParams& p = l.p;
  InitAffine(&p);
  p.rows = x.shape[0] * channels;
  p.n = 1;
  for (size_t d = 2; d < x.shape.size(); ++d) p.n *= x.shape[d];
  l.empty = x.num_elements() == 0;
  p.epsilon = ctx.attrs().GetFloat("epsilon", 1e-5);
  p.scale_type = ParamType(ctx.input(1).dtype);
  p.bias_type = ParamType(ctx.input(2).dtype);
  p.channels = channels;
  const VariantLaunch v = ChooseLaunch(ctx, RowProblem("norm", x.dtype, p.rows, p.n, 1));
  p.mode = RowModeOf(v.config);
  l.module = v.module;
  l.dims = v.dims;
  return MakePrepared(std::move(l));
}

// InstanceNormalization and LayerNormalization: norm_rows.
absl::Status NormRowsKernel(KernelContext& ctx) {
  const auto* l = PreparedParams<NormLaunch<grove_k::NormRowsParams>>(ctx);
  if (l == nullptr) return NotPrepared(ctx);
  if (l->empty) return absl::OkStatus();
  grove_k::NormRowsParams p = l->p;
  p.x = ctx.input(0).data;
  p.y = ctx.output(0).data;
  p.scale = ctx.input(1).data;
  if (ctx.has_input(2)) p.bias = ctx.input(2).data;
  if (ctx.has_output(1)) p.mean_out = ctx.output(1).data;
  if (ctx.has_output(2)) p.inv_std_out = ctx.output(2).data;
  return Exec(ctx).Launch(l->module, "norm_rows", l->dims, p);
}

absl::StatusOr<ir::PreparedKernel> PrepareLayerNormalization(const KernelContext& ctx) {
  const TensorView& x = ctx.input(0);
  absl::StatusOr<int> axis = backends::LayerNormAxis(ctx);
  if (!axis.ok()) return axis.status();
  if (absl::Status s = CheckFloat(ctx, 0, "X"); !s.ok()) return s;
  const absl::Span<const int64_t> normalized = absl::Span<const int64_t>(x.shape).subspan(*axis);
  absl::StatusOr<std::vector<int64_t>> scale_strides = backends::NormalizedStrides(ctx, 1, "Scale", normalized);
  if (!scale_strides.ok()) return scale_strides.status();
  if (absl::Status s = CheckFloat(ctx, 1, "Scale"); !s.ok()) return s;
  std::vector<int64_t> bias_strides(normalized.size(), 0);
  if (ctx.has_input(2)) {
    absl::StatusOr<std::vector<int64_t>> b = backends::NormalizedStrides(ctx, 2, "B", normalized);
    if (!b.ok()) return b.status();
    if (absl::Status s = CheckFloat(ctx, 2, "B"); !s.ok()) return s;
    bias_strides = *std::move(b);
  }
  if (absl::Status s = backends::CheckLayerNormOutputs(ctx, *axis); !s.ok()) return s;

  NormLaunch<grove_k::NormRowsParams> l;
  grove_k::NormRowsParams& p = l.p;
  InitAffine(&p);
  // Normalized dims merged where both Scale and B stay contiguous across
  // them; dims of size 1 drop out.
  struct Dim {
    int64_t size, scale_stride, bias_stride;
  };
  std::vector<Dim> dims;
  for (size_t d = 0; d < normalized.size(); ++d) {
    const Dim cur{normalized[d], (*scale_strides)[d], bias_strides[d]};
    if (cur.size == 1) continue;
    if (!dims.empty() && dims.back().scale_stride == cur.scale_stride * cur.size &&
        dims.back().bias_stride == cur.bias_stride * cur.size) {
      dims.back().size *= cur.size;
      dims.back().scale_stride = cur.scale_stride;
      dims.back().bias_stride = cur.bias_stride;
      continue;
    }
    dims.push_back(cur);
  }
  if (static_cast<int>(dims.size()) > grove_k::kMaxRank) {
    return ctx.Error(absl::StrCat("input 1 (Scale) or 2 (B) broadcasts onto ", ShapeStr(normalized),
                                  " in more than ", grove_k::kMaxRank, " separate dims; the CUDA kernel supports up to that"));
  }
  p.aff.rank = static_cast<int>(dims.size());
  for (size_t k = 0; k < dims.size(); ++k) {
    p.aff.d[k] = dims[k].size;
    p.scale_strides.s[k] = dims[k].scale_stride;
    p.bias_strides.s[k] = dims[k].bias_stride;
  }
  p.rows = 1;
  p.n = 1;
  for (int d = 0; d < *axis; ++d) p.rows *= x.shape[d];
  for (int64_t d : normalized) p.n *= d;
  l.empty = p.rows == 0;
  p.epsilon = ctx.attrs().GetFloat("epsilon", 1e-5);
  p.scale_type = ParamType(ctx.input(1).dtype);
  if (ctx.has_input(2)) p.bias_type = ParamType(ctx.input(2).dtype);
  p.channels = 0;
  const VariantLaunch v = ChooseLaunch(ctx, RowProblem("norm", x.dtype, p.rows, p.n, 1));
  p.mode = RowModeOf(v.config);
  l.module = v.module;
  l.dims = v.dims;
  return MakePrepared(std::move(l));
}

}  // namespace

absl::Status RegisterCudaNormKernels(ir::OpRegistry& registry) {
  const std::pair<const char*, ir::KernelDef> kernels[] = {
      {"Softmax", {&SoftmaxKernel, &PrepareSoftmax<false>}},
      {"LogSoftmax", {&SoftmaxKernel, &PrepareSoftmax<true>}},
      {"BatchNormalization", {&BatchNormalizationKernel, &PrepareBatchNormalization}},
      {"LayerNormalization", {&NormRowsKernel, &PrepareLayerNormalization}},
      {"InstanceNormalization", {&NormRowsKernel, &PrepareInstanceNormalization}},
  };
  for (const auto& [type, kernel] : kernels) {
    if (absl::Status s = registry.SetKernel(type, ir::Backend::kCuda, kernel); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace grove::cuda
