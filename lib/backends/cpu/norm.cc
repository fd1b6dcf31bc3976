// CPU reference kernels of the norm group: BatchNormalization (inference and
// training mode), InstanceNormalization, LayerNormalization,
// MeanVarianceNormalization, Softmax, LogSoftmax and Hardmax. The
// normalizations accumulate in double; their checks that the CUDA kernels
// make alike live in lib/backends/common/norm_checks.h.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "lib/backends/common/kernel_checks.h"
#include "lib/backends/common/norm_checks.h"
#include "lib/backends/cpu/cpu_kernels.h"
#include "lib/ir/element_types.h"
#include "lib/ir/ops/reduce_axes.h"

namespace grove::cpu {

using ir::BFloat16;
using ir::ComputeT;
using ir::FromCompute;
using ir::Half;
using ir::ToCompute;
using ir::VisitDType;

namespace {

using ir::KernelContext;
using backends::CheckChannelVector;
using backends::CheckOutput;
using backends::CheckRank;

// Advances a multi-index over `dims`; false after the last one.
bool NextIndex(std::vector<int64_t>& index, absl::Span<const int64_t> dims) {
  for (int d = static_cast<int>(dims.size()) - 1; d >= 0; --d) {
    if (++index[d] < dims[d]) return true;
    index[d] = 0;
  }
  return false;
}

// ---------------------------------------------------------------------------
// BatchNormalization, InstanceNormalization, LayerNormalization
// ---------------------------------------------------------------------------

// A float tensor of any supported dtype, read into doubles.
absl::StatusOr<std::vector<double>> ReadDoubles(const KernelContext& ctx, const TensorView& t) {
  std::vector<double> out(static_cast<size_t>(t.num_elements()));
  absl::Status s = VisitDType<float, double, Half, BFloat16>(ctx, t.dtype, [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    const T* p = t.as<const T>();
    for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<double>(ToCompute(p[i]));
    return absl::OkStatus();
  });
  if (!s.ok()) return s;
  return out;
}

// y = affine(r, j, (x - mean[r]) * inv_std[r]) for element j of row r, the
// affine step being per channel (BatchNormalization, InstanceNormalization)
// or per element of the row (LayerNormalization).
template <typename T, typename Affine>
void NormalizeRows(const T* x, T* y, int64_t rows, int64_t n, const std::vector<double>& mean,
                   const std::vector<double>& inv_std, Affine&& affine) {
  for (int64_t r = 0; r < rows; ++r, x += n, y += n) {
    for (int64_t j = 0; j < n; ++j) {
      const double v = (static_cast<double>(ToCompute(x[j])) - mean[r]) * inv_std[r];
      y[j] = FromCompute<T>(static_cast<ComputeT<T>>(affine(r, j, v)));
    }
  }
}

// Mean and 1/sqrt(var + epsilon) of each of `rows` rows of n elements (two
// passes, as the ONNX reference computes them).
template <typename T>
void RowMoments(const T* x, int64_t rows, int64_t n, double epsilon, std::vector<double>* mean,
                std::vector<double>* inv_std) {
  mean->assign(static_cast<size_t>(rows), 0.0);
  inv_std->assign(static_cast<size_t>(rows), 0.0);
  for (int64_t r = 0; r < rows; ++r, x += n) {
    double sum = 0;
    for (int64_t j = 0; j < n; ++j) sum += static_cast<double>(ToCompute(x[j]));
    const double m = n > 0 ? sum / static_cast<double>(n) : 0.0;
    double sq = 0;
    for (int64_t j = 0; j < n; ++j) {
      const double d = static_cast<double>(ToCompute(x[j])) - m;
      sq += d * d;
    }
    (*mean)[r] = m;
    (*inv_std)[r] = 1.0 / std::sqrt((n > 0 ? sq / static_cast<double>(n) : 0.0) + epsilon);
  }
}

absl::Status BatchNormalizationKernel(KernelContext& ctx) {
  const bool training = ctx.attrs().GetInt("training_mode", 0) != 0;
  const TensorView& x = ctx.input(0);
  if (absl::Status s = CheckRank(ctx, 0, "X", 2); !s.ok()) return s;
  const int64_t channels = x.shape[1];
  static constexpr const char* kNames[] = {"X", "scale", "B", "input_mean", "input_var"};
  std::vector<double> p[5];
  for (int i = 1; i < 5; ++i) {
    if (absl::Status s = CheckChannelVector(ctx, i, kNames[i], channels); !s.ok()) return s;
    absl::StatusOr<std::vector<double>> v = ReadDoubles(ctx, ctx.input(i));
    if (!v.ok()) return v.status();
    p[i] = *std::move(v);
  }
  if (absl::Status s = CheckOutput(ctx, 0, x.dtype, x.shape); !s.ok()) return s;
  const double epsilon = ctx.attrs().GetFloat("epsilon", 1e-5);
  int64_t inner = 1;
  for (size_t d = 2; d < x.shape.size(); ++d) inner *= x.shape[d];
  const int64_t rows = x.shape[0] * channels;
  std::vector<double> mean(static_cast<size_t>(rows)), inv_std(static_cast<size_t>(rows));
  return VisitDType<float, double, Half, BFloat16>(ctx, x.dtype, [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    const T* xs = x.as<const T>();
    // Training mode: each channel's mean and (biased) variance over the batch
    // and the spatial dims, as ONNX's reference computes them.
    std::vector<double> batch_mean(channels, 0.0), batch_var(channels, 0.0);
    if (training) {
      const double count = static_cast<double>(x.shape[0] * inner);
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t j = 0; j < inner; ++j) batch_mean[r % channels] += static_cast<double>(ToCompute(xs[r * inner + j]));
      }
      for (double& m : batch_mean) m = count > 0 ? m / count : 0.0;
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t j = 0; j < inner; ++j) {
          const double d = static_cast<double>(ToCompute(xs[r * inner + j])) - batch_mean[r % channels];
          batch_var[r % channels] += d * d;
        }
      }
      for (double& v : batch_var) v = count > 0 ? v / count : 0.0;
    }
    for (int64_t r = 0; r < rows; ++r) {
      mean[r] = training ? batch_mean[r % channels] : p[3][r % channels];
      inv_std[r] = 1.0 / std::sqrt((training ? batch_var[r % channels] : p[4][r % channels]) + epsilon);
    }
    NormalizeRows(xs, ctx.output(0).as<T>(), rows, inner, mean, inv_std,
                  [&](int64_t r, int64_t, double v) { return v * p[1][r % channels] + p[2][r % channels]; });
    // running = input * momentum + batch * (1 - momentum).
    const double momentum = ctx.attrs().GetFloat("momentum", 0.9);
    for (int i = 1; i < 3 && training; ++i) {
      if (!ctx.has_output(i)) continue;
      const TensorView& out = ctx.output(i);
      if (absl::Status s = CheckOutput(ctx, i, ctx.input(2 + i).dtype, {channels}); !s.ok()) return s;
      const std::vector<double>& batch = i == 1 ? batch_mean : batch_var;
      absl::Status st = VisitDType<float, double, Half, BFloat16>(ctx, out.dtype, [&](auto otag) -> absl::Status {
        using O = typename decltype(otag)::type;
        for (int64_t c = 0; c < channels; ++c) {
          out.as<O>()[c] = FromCompute<O>(static_cast<ComputeT<O>>(p[2 + i][c] * momentum + batch[c] * (1 - momentum)));
        }
        return absl::OkStatus();
      });
      if (!st.ok()) return st;
    }
    return absl::OkStatus();
  });
}

absl::Status InstanceNormalizationKernel(KernelContext& ctx) {
  const TensorView& x = ctx.input(0);
  if (absl::Status s = CheckRank(ctx, 0, "input", 3); !s.ok()) return s;
  const int64_t channels = x.shape[1];
  std::vector<double> scale, bias;
  for (int i = 1; i < 3; ++i) {
    if (absl::Status s = CheckChannelVector(ctx, i, i == 1 ? "scale" : "B", channels); !s.ok()) return s;
    absl::StatusOr<std::vector<double>> v = ReadDoubles(ctx, ctx.input(i));
    if (!v.ok()) return v.status();
    (i == 1 ? scale : bias) = *std::move(v);
  }
  if (absl::Status s = CheckOutput(ctx, 0, x.dtype, x.shape); !s.ok()) return s;
  const double epsilon = ctx.attrs().GetFloat("epsilon", 1e-5);
  int64_t inner = 1;
  for (size_t d = 2; d < x.shape.size(); ++d) inner *= x.shape[d];
  const int64_t rows = x.shape[0] * channels;
  return VisitDType<float, double, Half, BFloat16>(ctx, x.dtype, [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    std::vector<double> mean, inv_std;
    RowMoments(x.as<const T>(), rows, inner, epsilon, &mean, &inv_std);
    NormalizeRows(x.as<const T>(), ctx.output(0).as<T>(), rows, inner, mean, inv_std,
                  [&](int64_t r, int64_t, double v) { return v * scale[r % channels] + bias[r % channels]; });
    return absl::OkStatus();
  });
}

// Scale or B of LayerNormalization broadcast onto the normalized dims, one
// value per element of a row.
absl::StatusOr<std::vector<double>> ExpandToRow(const KernelContext& ctx, int i, absl::string_view name,
                                                absl::Span<const int64_t> normalized) {
  const TensorView& t = ctx.input(i);
  const size_t rank = normalized.size();
  absl::StatusOr<std::vector<int64_t>> strides = backends::NormalizedStrides(ctx, i, name, normalized);
  if (!strides.ok()) return strides.status();
  const std::vector<int64_t>& stride = *strides;
  absl::StatusOr<std::vector<double>> v = ReadDoubles(ctx, t);
  if (!v.ok()) return v.status();
  int64_t n = 1;
  for (int64_t d : normalized) n *= d;
  std::vector<double> row(static_cast<size_t>(n));
  std::vector<int64_t> index(rank, 0);
  for (int64_t j = 0; j < n; ++j) {
    int64_t src = 0;
    for (size_t d = 0; d < rank; ++d) src += index[d] * stride[d];
    row[j] = (*v)[src];
    NextIndex(index, normalized);
  }
  return row;
}

absl::Status LayerNormalizationKernel(KernelContext& ctx) {
  const TensorView& x = ctx.input(0);
  absl::StatusOr<int> axis = backends::LayerNormAxis(ctx);
  if (!axis.ok()) return axis.status();
  const absl::Span<const int64_t> normalized = absl::Span<const int64_t>(x.shape).subspan(*axis);
  absl::StatusOr<std::vector<double>> scale = ExpandToRow(ctx, 1, "Scale", normalized);
  if (!scale.ok()) return scale.status();
  std::vector<double> bias;
  if (ctx.has_input(2)) {
    absl::StatusOr<std::vector<double>> b = ExpandToRow(ctx, 2, "B", normalized);
    if (!b.ok()) return b.status();
    bias = *std::move(b);
  }
  if (absl::Status s = backends::CheckLayerNormOutputs(ctx, *axis); !s.ok()) return s;
  int64_t rows = 1, n = 1;
  for (int d = 0; d < *axis; ++d) rows *= x.shape[d];
  for (int64_t d : normalized) n *= d;
  const double epsilon = ctx.attrs().GetFloat("epsilon", 1e-5);
  return VisitDType<float, double, Half, BFloat16>(ctx, x.dtype, [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    std::vector<double> mean, inv_std;
    RowMoments(x.as<const T>(), rows, n, epsilon, &mean, &inv_std);
    NormalizeRows(x.as<const T>(), ctx.output(0).as<T>(), rows, n, mean, inv_std,
                  [&](int64_t, int64_t j, double v) { return v * (*scale)[j] + (bias.empty() ? 0.0 : bias[j]); });
    if (ctx.has_output(1)) {
      float* out = ctx.output(1).as<float>();
      for (int64_t r = 0; r < rows; ++r) out[r] = static_cast<float>(mean[r]);
    }
    if (ctx.has_output(2)) {
      float* out = ctx.output(2).as<float>();
      for (int64_t r = 0; r < rows; ++r) out[r] = static_cast<float>(inv_std[r]);
    }
    return absl::OkStatus();
  });
}

// ---------------------------------------------------------------------------
// Softmax, LogSoftmax, Hardmax
// ---------------------------------------------------------------------------

// Softmax and LogSoftmax over one axis (ONNX opset 13). The input is seen as
// [outer, n, inner]; with inner > 1 the running max and sum are kept per
// column so the input is still read in memory order.
// y = softmax(x), or log(softmax(x)) = (x - max) - log(sum(exp(x - max)))
// with kLog, which stays finite where exp underflows.
template <bool kLog, typename T>
void SoftmaxAlongAxis(const T* x, T* y, int64_t outer, int64_t n, int64_t inner) {
  if (n == 0 || inner == 0) return;
  if (inner == 1) {
    for (int64_t o = 0; o < outer; ++o, x += n, y += n) {
      T m = x[0];
      for (int64_t j = 1; j < n; ++j) m = x[j] > m ? x[j] : m;
      double sum = 0;
      for (int64_t j = 0; j < n; ++j) {
        y[j] = std::exp(x[j] - m);
        sum += y[j];
      }
      if constexpr (kLog) {
        // (x - max) first: exact for nearby values, where x - (max + log sum) would round the sum to x's ulp.
        const T log_sum = static_cast<T>(std::log(sum));
        for (int64_t j = 0; j < n; ++j) y[j] = (x[j] - m) - log_sum;
      } else {
        const T scale = static_cast<T>(1.0 / sum);
        for (int64_t j = 0; j < n; ++j) y[j] *= scale;
      }
    }
    return;
  }
  std::vector<T> max(static_cast<size_t>(inner));
  std::vector<double> sum(static_cast<size_t>(inner));
  for (int64_t o = 0; o < outer; ++o, x += n * inner, y += n * inner) {
    std::memcpy(max.data(), x, static_cast<size_t>(inner) * sizeof(T));
    for (int64_t j = 1; j < n; ++j) {
      const T* row = x + j * inner;
      for (int64_t i = 0; i < inner; ++i) max[i] = row[i] > max[i] ? row[i] : max[i];
    }
    std::fill(sum.begin(), sum.end(), 0.0);
    for (int64_t j = 0; j < n; ++j) {
      const T* row = x + j * inner;
      T* out = y + j * inner;
      for (int64_t i = 0; i < inner; ++i) {
        out[i] = std::exp(row[i] - max[i]);
        sum[i] += out[i];
      }
    }
    if constexpr (kLog) {
      for (int64_t i = 0; i < inner; ++i) sum[i] = std::log(sum[i]);
      for (int64_t j = 0; j < n; ++j) {
        const T* row = x + j * inner;
        T* out = y + j * inner;
        for (int64_t i = 0; i < inner; ++i) out[i] = (row[i] - max[i]) - static_cast<T>(sum[i]);
      }
    } else {
      for (int64_t i = 0; i < inner; ++i) max[i] = static_cast<T>(1.0 / sum[i]);  // reused as the scale
      for (int64_t j = 0; j < n; ++j) {
        T* out = y + j * inner;
        for (int64_t i = 0; i < inner; ++i) out[i] *= max[i];
      }
    }
  }
}

// The CPU kernel of Softmax (kLog = false) and LogSoftmax (kLog = true).
template <bool kLog>
absl::Status SoftmaxFamilyKernel(ir::KernelContext& ctx) {
  const TensorView& x = ctx.input(0);
  TensorView& y = ctx.output(0);
  const int rank = static_cast<int>(x.shape.size());
  absl::StatusOr<int> axis = ir::NormalizeAxis(ctx.attrs().GetInt("axis", -1), rank);
  if (!axis.ok()) return ctx.Error(absl::StrCat("attribute 'axis': ", axis.status().message()));
  if (rank == 0)
    return ctx.Error(absl::StrCat("input 0 (input) is a scalar; ", ctx.node().type, " needs rank >= 1"));
  if (y.dtype != x.dtype || y.shape != x.shape) {
    return ctx.Error(absl::StrCat("output 0 was allocated as ", DTypeName(y.dtype), " [",
                                  absl::StrJoin(y.shape, ", "), "] but the kernel writes ", DTypeName(x.dtype),
                                  " [", absl::StrJoin(x.shape, ", "), "]"));
  }
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < *axis; ++d) outer *= x.shape[d];
  for (int d = *axis + 1; d < rank; ++d) inner *= x.shape[d];
  const int64_t n = x.shape[*axis];
  return VisitDType<float, double>(ctx, x.dtype, [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    SoftmaxAlongAxis<kLog>(x.as<const T>(), y.as<T>(), outer, n, inner);
    return absl::OkStatus();
  });
}


// 1 at the first maximum along the axis, 0 elsewhere. A NaN counts as the
// maximum (the first one wins), as numpy's argmax has it.
absl::Status HardmaxKernel(KernelContext& ctx) {
  const TensorView& x = ctx.input(0);
  const int rank = static_cast<int>(x.shape.size());
  if (rank == 0) return ctx.Error("input 0 (input) is a scalar; Hardmax needs rank >= 1");
  absl::StatusOr<int> axis = ir::NormalizeAxis(ctx.attrs().GetInt("axis", -1), rank);
  if (!axis.ok()) return ctx.Error(absl::StrCat("attribute 'axis': ", axis.status().message()));
  if (absl::Status s = CheckOutput(ctx, 0, x.dtype, x.shape); !s.ok()) return s;
  const ir::AxisSplit split = ir::SplitAt(x.shape, *axis);
  return VisitDType<float, double, Half, BFloat16>(ctx, x.dtype, [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    using C = ComputeT<T>;
    const T* xp = x.as<const T>();
    T* yp = ctx.output(0).as<T>();
    const T zero = FromCompute<T>(C(0)), one = FromCompute<T>(C(1));
    std::fill(yp, yp + x.num_elements(), zero);
    if (split.n == 0) return absl::OkStatus();
    for (int64_t o = 0; o < split.outer; ++o) {
      const int64_t base = o * split.n * split.inner;
      for (int64_t i = 0; i < split.inner; ++i) {
        int64_t best = 0;
        C best_v = ToCompute(xp[base + i]);
        for (int64_t j = 1; j < split.n && !std::isnan(best_v); ++j) {
          const C v = ToCompute(xp[base + j * split.inner + i]);
          if (std::isnan(v) || v > best_v) {
            best = j;
            best_v = v;
          }
        }
        yp[base + best * split.inner + i] = one;
      }
    }
    return absl::OkStatus();
  });
}

// ---------------------------------------------------------------------------
// MeanVarianceNormalization
// ---------------------------------------------------------------------------

// y = (x - mean) / (sqrt(variance) + 1e-9), the statistics taken over the
// dims in `axes` (default [0, 2, 3]); the epsilon is the one of the ONNX
// function body.
absl::Status MeanVarianceNormalizationKernel(KernelContext& ctx) {
  const TensorView& x = ctx.input(0);
  const int rank = static_cast<int>(x.shape.size());
  absl::StatusOr<std::vector<bool>> reduced = ir::ReducedDims(ctx.attrs().GetInts("axes", {0, 2, 3}), rank, false);
  if (!reduced.ok()) return ctx.Error(absl::StrCat("attribute 'axes': ", reduced.status().message()));
  if (absl::Status s = CheckOutput(ctx, 0, x.dtype, x.shape); !s.ok()) return s;
  const int64_t total = x.num_elements();
  // Element e belongs to the group of its kept coordinates; group_stride[d]
  // is what a step along dim d adds to the group index (0 for reduced dims).
  std::vector<int64_t> group_stride(static_cast<size_t>(rank), 0);
  int64_t groups = 1;
  for (int d = rank - 1; d >= 0; --d) {
    if ((*reduced)[d]) continue;
    group_stride[d] = groups;
    groups *= x.shape[d];
  }
  if (total == 0) return absl::OkStatus();
  std::vector<int64_t> group_of(static_cast<size_t>(total));
  {
    std::vector<int64_t> index(static_cast<size_t>(rank), 0);
    int64_t g = 0;
    for (int64_t e = 0; e < total; ++e) {
      group_of[e] = g;
      for (int d = rank - 1; d >= 0; --d) {
        g += group_stride[d];
        if (++index[d] < x.shape[d]) break;
        g -= group_stride[d] * x.shape[d];
        index[d] = 0;
      }
    }
  }
  const double per_group = static_cast<double>(total / groups);
  return VisitDType<float, double, Half, BFloat16>(ctx, x.dtype, [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    const T* xp = x.as<const T>();
    T* yp = ctx.output(0).as<T>();
    std::vector<double> mean(static_cast<size_t>(groups), 0.0), var(static_cast<size_t>(groups), 0.0);
    for (int64_t e = 0; e < total; ++e) mean[group_of[e]] += static_cast<double>(ToCompute(xp[e]));
    for (double& m : mean) m /= per_group;
    for (int64_t e = 0; e < total; ++e) {
      const double d = static_cast<double>(ToCompute(xp[e])) - mean[group_of[e]];
      var[group_of[e]] += d * d;
    }
    for (double& v : var) v = std::sqrt(v / per_group) + 1e-9;  // now the divisor
    for (int64_t e = 0; e < total; ++e) {
      const double y = (static_cast<double>(ToCompute(xp[e])) - mean[group_of[e]]) / var[group_of[e]];
      yp[e] = FromCompute<T>(static_cast<ComputeT<T>>(y));
    }
    return absl::OkStatus();
  });
}

}  // namespace

absl::Status RegisterNormKernels(ir::OpRegistry& registry) {
  const std::pair<const char*, ir::KernelFn> kernels[] = {
      {"BatchNormalization", &BatchNormalizationKernel},
      {"InstanceNormalization", &InstanceNormalizationKernel},
      {"LayerNormalization", &LayerNormalizationKernel},
      {"MeanVarianceNormalization", &MeanVarianceNormalizationKernel},
      {"Softmax", &SoftmaxFamilyKernel<false>},
      {"LogSoftmax", &SoftmaxFamilyKernel<true>},
      {"Hardmax", &HardmaxKernel},
  };
  for (const auto& [type, fn] : kernels) {
    if (absl::Status s = registry.SetKernel(type, ir::Backend::kCpu, fn); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace grove::cpu
