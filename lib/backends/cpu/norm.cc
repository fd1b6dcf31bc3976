// CPU reference kernels of the norm group: BatchNormalization (inference and
// training mode), InstanceNormalization, LayerNormalization,
// MeanVarianceNormalization, Softmax, LogSoftmax and Hardmax. The
// normalizations accumulate in double; their checks that the CUDA kernels
// make alike live in lib/backends/common/norm_checks.h.
//
// Each kernel is prepared once per plan (ir::PreparedKernel): the prepare
// checks attributes, shapes and dtypes and builds the kernel's parameters
// and the size of its scratch (per-row statistics, the affine parameters read
// into doubles); the invoke only computes, its scratch in ctx.workspace()
// (workspace_layout.h). f32 BatchNormalization in inference mode and f32
// Softmax over the last axis run as oneDNN primitives where oneDNN takes them
// (onednn.h).
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#endif

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "lib/backends/common/kernel_checks.h"
#include "lib/backends/common/norm_checks.h"
#include "lib/backends/common/prepared.h"
#include "lib/backends/cpu/channels_last.h"
#include "lib/backends/cpu/cpu_features.h"
#include "lib/backends/cpu/cpu_kernels.h"
#include "lib/backends/cpu/norm.h"
#include "lib/backends/cpu/onednn.h"
#include "lib/backends/cpu/parallel_for.h"
#include "lib/backends/cpu/workspace_layout.h"
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
using ir::PreparedKernel;
using backends::CheckChannelVector;
using backends::CheckOutput;
using backends::CheckRank;
using backends::MakePrepared;
using backends::PreparedParams;

absl::Status NotPrepared(const KernelContext& ctx) { return backends::NotPrepared(ctx, "CPU"); }

// The error VisitDType gives for a dtype outside the float types, at prepare.
absl::Status CheckFloatDType(const KernelContext& ctx, DType dtype) {
  return VisitDType<float, double, Half, BFloat16>(ctx, dtype, [](auto) { return absl::OkStatus(); });
}

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

// A float tensor of any supported dtype (checked at prepare), read into doubles.
absl::Status ReadDoubles(const KernelContext& ctx, const TensorView& t, double* out) {
  return VisitDType<float, double, Half, BFloat16>(ctx, t.dtype, [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    const T* p = t.as<const T>();
    const int64_t n = t.num_elements();
    for (int64_t i = 0; i < n; ++i) out[i] = static_cast<double>(ToCompute(p[i]));
    return absl::OkStatus();
  });
}

// y = affine(r, j, (x - mean[r]) * inv_std[r]) for element j of row r, the
// affine step being per channel (BatchNormalization, InstanceNormalization)
// or per element of the row (LayerNormalization).
template <typename T, typename Affine>
void NormalizeRows(const T* x, T* y, int64_t rows, int64_t n, const double* mean, const double* inv_std,
                   Affine&& affine) {
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
void RowMoments(const T* x, int64_t rows, int64_t n, double epsilon, double* mean, double* inv_std) {
  for (int64_t r = 0; r < rows; ++r, x += n) {
    double sum = 0;
    for (int64_t j = 0; j < n; ++j) sum += static_cast<double>(ToCompute(x[j]));
    const double m = n > 0 ? sum / static_cast<double>(n) : 0.0;
    double sq = 0;
    for (int64_t j = 0; j < n; ++j) {
      const double d = static_cast<double>(ToCompute(x[j])) - m;
      sq += d * d;
    }
    mean[r] = m;
    inv_std[r] = 1.0 / std::sqrt((n > 0 ? sq / static_cast<double>(n) : 0.0) + epsilon);
  }
}

// BatchNormalization and InstanceNormalization: X is [N, C, inner...].
struct ChannelNormParams {
  int64_t channels = 0;
  int64_t inner = 1;
  int64_t rows = 0;  // N * C
  double epsilon = 1e-5;
  double momentum = 0.9;   // BatchNormalization
  bool training = false;   // BatchNormalization
  std::shared_ptr<OneDnnStep> onednn;  // non-null: oneDNN computes it (f32 inference, onednn.h)
};

// Scratch: scale, B, input_mean, input_var as doubles, per-row mean and
// inv_std, the batch's mean and variance per channel.
void AddBatchNormScratch(const ChannelNormParams& p, WorkspaceLayout* layout) {
  for (int i = 1; i < 5; ++i) layout->Add<double>(p.channels);
  layout->Add<double>(p.rows);
  layout->Add<double>(p.rows);
  layout->Add<double>(p.channels);
  layout->Add<double>(p.channels);
}

// `io`: as for channels_last.h's LayoutPrepare.
absl::StatusOr<PreparedKernel> PrepareBatchNormalizationWith(const KernelContext& ctx, ChannelsLast* io) {
  ChannelNormParams p;
  p.training = ctx.attrs().GetInt("training_mode", 0) != 0;
  const TensorView& x = ctx.input(0);
  if (absl::Status s = CheckRank(ctx, 0, "X", 2); !s.ok()) return s;
  p.channels = x.shape[1];
  static constexpr const char* kNames[] = {"X", "scale", "B", "input_mean", "input_var"};
  for (int i = 1; i < 5; ++i) {
    if (absl::Status s = CheckChannelVector(ctx, i, kNames[i], p.channels); !s.ok()) return s;
    if (absl::Status s = CheckFloatDType(ctx, ctx.input(i).dtype); !s.ok()) return s;
  }
  if (absl::Status s = CheckOutput(ctx, 0, x.dtype, x.shape); !s.ok()) return s;
  if (absl::Status s = CheckFloatDType(ctx, x.dtype); !s.ok()) return s;
  for (int i = 1; i < 3 && p.training; ++i) {
    if (!ctx.has_output(i)) continue;
    if (absl::Status s = CheckOutput(ctx, i, ctx.input(2 + i).dtype, {p.channels}); !s.ok()) return s;
  }
  p.epsilon = ctx.attrs().GetFloat("epsilon", 1e-5);
  p.momentum = ctx.attrs().GetFloat("momentum", 0.9);
  for (size_t d = 2; d < x.shape.size(); ++d) p.inner *= x.shape[d];
  p.rows = x.shape[0] * p.channels;
  WorkspaceLayout layout;
  if (!p.training) {
    absl::StatusOr<std::shared_ptr<OneDnnStep>> onednn =
        PrepareOneDnnBatchNorm(ctx, static_cast<float>(p.epsilon), &layout, io != nullptr ? *io : ChannelsLast{});
    if (!onednn.ok()) return onednn.status();
    if (*onednn != nullptr) {
      p.onednn = *std::move(onednn);
      return MakePrepared(std::move(p), layout.bytes());
    }
  }
  if (io != nullptr) *io = ChannelsLast{};
  AddBatchNormScratch(p, &layout);
  return MakePrepared(std::move(p), layout.bytes());
}

absl::Status BatchNormalizationBody(KernelContext& ctx) {
  const ChannelNormParams* pp = PreparedParams<ChannelNormParams>(ctx);
  if (pp == nullptr) return NotPrepared(ctx);
  if (pp->onednn != nullptr) return RunOneDnnStep(*pp->onednn, ctx);
  const ChannelNormParams& prm = *pp;
  const bool training = prm.training;
  const int64_t channels = prm.channels, inner = prm.inner, rows = prm.rows;
  const TensorView& x = ctx.input(0);
  WorkspaceCursor ws(ctx.workspace());
  double* p[5] = {nullptr};
  for (int i = 1; i < 5; ++i) {
    p[i] = ws.Take<double>(channels);
    if (absl::Status s = ReadDoubles(ctx, ctx.input(i), p[i]); !s.ok()) return s;
  }
  double* mean = ws.Take<double>(rows);
  double* inv_std = ws.Take<double>(rows);
  double* batch_mean = ws.Take<double>(channels);
  double* batch_var = ws.Take<double>(channels);
  return VisitDType<float, double, Half, BFloat16>(ctx, x.dtype, [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    const T* xs = x.as<const T>();
    // Training mode: each channel's mean and (biased) variance over the batch
    // and the spatial dims, as ONNX's reference computes them.
    std::fill(batch_mean, batch_mean + channels, 0.0);
    std::fill(batch_var, batch_var + channels, 0.0);
    if (training) {
      const double count = static_cast<double>(x.shape[0] * inner);
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t j = 0; j < inner; ++j) batch_mean[r % channels] += static_cast<double>(ToCompute(xs[r * inner + j]));
      }
      for (int64_t c = 0; c < channels; ++c) batch_mean[c] = count > 0 ? batch_mean[c] / count : 0.0;
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t j = 0; j < inner; ++j) {
          const double d = static_cast<double>(ToCompute(xs[r * inner + j])) - batch_mean[r % channels];
          batch_var[r % channels] += d * d;
        }
      }
      for (int64_t c = 0; c < channels; ++c) batch_var[c] = count > 0 ? batch_var[c] / count : 0.0;
    }
    for (int64_t r = 0; r < rows; ++r) {
      mean[r] = training ? batch_mean[r % channels] : p[3][r % channels];
      inv_std[r] = 1.0 / std::sqrt((training ? batch_var[r % channels] : p[4][r % channels]) + prm.epsilon);
    }
    NormalizeRows(xs, ctx.output(0).as<T>(), rows, inner, mean, inv_std,
                  [&](int64_t r, int64_t, double v) { return v * p[1][r % channels] + p[2][r % channels]; });
    // running = input * momentum + batch * (1 - momentum).
    const double momentum = prm.momentum;
    for (int i = 1; i < 3 && training; ++i) {
      if (!ctx.has_output(i)) continue;
      const TensorView& out = ctx.output(i);
      const double* batch = i == 1 ? batch_mean : batch_var;
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

absl::StatusOr<PreparedKernel> PrepareInstanceNormalization(const KernelContext& ctx) {
  ChannelNormParams p;
  const TensorView& x = ctx.input(0);
  if (absl::Status s = CheckRank(ctx, 0, "input", 3); !s.ok()) return s;
  p.channels = x.shape[1];
  for (int i = 1; i < 3; ++i) {
    if (absl::Status s = CheckChannelVector(ctx, i, i == 1 ? "scale" : "B", p.channels); !s.ok()) return s;
    if (absl::Status s = CheckFloatDType(ctx, ctx.input(i).dtype); !s.ok()) return s;
  }
  if (absl::Status s = CheckOutput(ctx, 0, x.dtype, x.shape); !s.ok()) return s;
  if (absl::Status s = CheckFloatDType(ctx, x.dtype); !s.ok()) return s;
  p.epsilon = ctx.attrs().GetFloat("epsilon", 1e-5);
  for (size_t d = 2; d < x.shape.size(); ++d) p.inner *= x.shape[d];
  p.rows = x.shape[0] * p.channels;
  WorkspaceLayout layout;  // scale, B, mean, inv_std
  layout.Add<double>(p.channels);
  layout.Add<double>(p.channels);
  layout.Add<double>(p.rows);
  layout.Add<double>(p.rows);
  return MakePrepared(std::move(p), layout.bytes());
}

absl::Status InstanceNormalizationKernel(KernelContext& ctx) {
  const ChannelNormParams* p = PreparedParams<ChannelNormParams>(ctx);
  if (p == nullptr) return NotPrepared(ctx);
  const TensorView& x = ctx.input(0);
  const int64_t channels = p->channels;
  WorkspaceCursor ws(ctx.workspace());
  double* scale = ws.Take<double>(channels);
  double* bias = ws.Take<double>(channels);
  double* mean = ws.Take<double>(p->rows);
  double* inv_std = ws.Take<double>(p->rows);
  if (absl::Status s = ReadDoubles(ctx, ctx.input(1), scale); !s.ok()) return s;
  if (absl::Status s = ReadDoubles(ctx, ctx.input(2), bias); !s.ok()) return s;
  return VisitDType<float, double, Half, BFloat16>(ctx, x.dtype, [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    const T* in = x.as<const T>();
    T* out = ctx.output(0).as<T>();
    const int64_t n = p->inner;
    ParallelFor(ctx, p->rows, RowGrain(n, kCheapGrain), [&](int64_t begin, int64_t end) {
      RowMoments(in + begin * n, end - begin, n, p->epsilon, mean + begin, inv_std + begin);
      NormalizeRows(in + begin * n, out + begin * n, end - begin, n, mean + begin, inv_std + begin,
                    [&](int64_t r, int64_t, double v) {
                      const int64_t c = (begin + r) % channels;
                      return v * scale[c] + bias[c];
                    });
    });
    return absl::OkStatus();
  });
}

struct LayerNormParams {
  int64_t rows = 1;
  int64_t n = 1;  // elements per row (the normalized dims)
  double epsilon = 1e-5;
  bool has_bias = false;
  bool avx = false;  // f32 rows four doubles at a time (LayerNormRowsAvx), chosen at prepare
  // For element j of a row: the element of Scale (B) it reads, Scale and B
  // broadcast onto the normalized dims.
  std::vector<int64_t> scale_src, bias_src;
};

// Where each element of a row reads input i (Scale or B) once broadcast onto
// the normalized dims, after checking that it broadcasts.
absl::StatusOr<std::vector<int64_t>> RowSources(const KernelContext& ctx, int i, absl::string_view name,
                                                absl::Span<const int64_t> normalized, int64_t n) {
  absl::StatusOr<std::vector<int64_t>> strides = backends::NormalizedStrides(ctx, i, name, normalized);
  if (!strides.ok()) return strides.status();
  if (absl::Status s = CheckFloatDType(ctx, ctx.input(i).dtype); !s.ok()) return s;
  const std::vector<int64_t>& stride = *strides;
  const size_t rank = normalized.size();
  std::vector<int64_t> src(static_cast<size_t>(n));
  std::vector<int64_t> index(rank, 0);
  for (int64_t j = 0; j < n; ++j) {
    int64_t at = 0;
    for (size_t d = 0; d < rank; ++d) at += index[d] * stride[d];
    src[j] = at;
    NextIndex(index, normalized);
  }
  return src;
}

std::atomic<bool> norm_simd_allowed{true};

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define GROVE_NORM_AVX 1
// Sums the four lanes as ((l0 + l1) + (l2 + l3)).
__attribute__((target("avx"))) inline double SumLanes(__m256d v) {
  alignas(32) double l[4];
  _mm256_store_pd(l, v);
  return (l[0] + l[1]) + (l[2] + l[3]);
}

// LayerNormalization of f32 rows as RowMoments and NormalizeRows compute it
// (double arithmetic: the mean, the mean square of x - mean, then
// ((x - mean) * inv_std) * scale + bias rounded to float), four doubles per
// instruction in two independent accumulators: the scalar loops' sums are
// one chain of dependent adds, 4 cycles each. Only the order of the sums'
// terms differs (lanes, then their pairs), within a double ulp or so of
// theirs. AVX only (no FMA), so no multiply and add are contracted.
__attribute__((target("avx"))) void LayerNormRowsAvx(const float* x, float* y, int64_t rows, int64_t n,
                                                    double epsilon, const double* scale, const double* bias,
                                                    double* mean, double* inv_std) {
  for (int64_t r = 0; r < rows; ++r, x += n, y += n) {
    __m256d s0 = _mm256_setzero_pd(), s1 = s0;
    int64_t j = 0;
    for (; j + 8 <= n; j += 8) {
      s0 = _mm256_add_pd(s0, _mm256_cvtps_pd(_mm_loadu_ps(x + j)));
      s1 = _mm256_add_pd(s1, _mm256_cvtps_pd(_mm_loadu_ps(x + j + 4)));
    }
    double sum = SumLanes(_mm256_add_pd(s0, s1));
    for (; j < n; ++j) sum += static_cast<double>(x[j]);
    const double m = sum / static_cast<double>(n);
    const __m256d mv = _mm256_set1_pd(m);
    s0 = _mm256_setzero_pd();
    s1 = s0;
    for (j = 0; j + 8 <= n; j += 8) {
      const __m256d d0 = _mm256_sub_pd(_mm256_cvtps_pd(_mm_loadu_ps(x + j)), mv);
      const __m256d d1 = _mm256_sub_pd(_mm256_cvtps_pd(_mm_loadu_ps(x + j + 4)), mv);
      s0 = _mm256_add_pd(s0, _mm256_mul_pd(d0, d0));
      s1 = _mm256_add_pd(s1, _mm256_mul_pd(d1, d1));
    }
    double sq = SumLanes(_mm256_add_pd(s0, s1));
    for (; j < n; ++j) {
      const double d = static_cast<double>(x[j]) - m;
      sq += d * d;
    }
    const double inv = 1.0 / std::sqrt(sq / static_cast<double>(n) + epsilon);
    mean[r] = m;
    inv_std[r] = inv;
    const __m256d iv = _mm256_set1_pd(inv);
    for (j = 0; j + 4 <= n; j += 4) {
      const __m256d v = _mm256_mul_pd(_mm256_sub_pd(_mm256_cvtps_pd(_mm_loadu_ps(x + j)), mv), iv);
      __m256d out = _mm256_mul_pd(v, _mm256_loadu_pd(scale + j));
      out = _mm256_add_pd(out, bias != nullptr ? _mm256_loadu_pd(bias + j) : _mm256_setzero_pd());
      _mm_storeu_ps(y + j, _mm256_cvtpd_ps(out));
    }
    for (; j < n; ++j) {
      const double v = (static_cast<double>(x[j]) - m) * inv;
      y[j] = static_cast<float>(v * scale[j] + (bias != nullptr ? bias[j] : 0.0));
    }
  }
}
#endif

}  // namespace

void SetNormSimdAllowed(bool allowed) { norm_simd_allowed.store(allowed, std::memory_order_relaxed); }

namespace {

absl::StatusOr<PreparedKernel> PrepareLayerNormalization(const KernelContext& ctx) {
  const TensorView& x = ctx.input(0);
  absl::StatusOr<int> axis = backends::LayerNormAxis(ctx);
  if (!axis.ok()) return axis.status();
  const absl::Span<const int64_t> normalized = absl::Span<const int64_t>(x.shape).subspan(*axis);
  LayerNormParams p;
  for (int d = 0; d < *axis; ++d) p.rows *= x.shape[d];
  for (int64_t d : normalized) p.n *= d;
  absl::StatusOr<std::vector<int64_t>> scale = RowSources(ctx, 1, "Scale", normalized, p.n);
  if (!scale.ok()) return scale.status();
  p.scale_src = *std::move(scale);
  if (ctx.has_input(2)) {
    absl::StatusOr<std::vector<int64_t>> b = RowSources(ctx, 2, "B", normalized, p.n);
    if (!b.ok()) return b.status();
    p.bias_src = *std::move(b);
    p.has_bias = true;
  }
  if (absl::Status s = backends::CheckLayerNormOutputs(ctx, *axis); !s.ok()) return s;
  if (absl::Status s = CheckFloatDType(ctx, x.dtype); !s.ok()) return s;
  p.epsilon = ctx.attrs().GetFloat("epsilon", 1e-5);
#if defined(GROVE_NORM_AVX)
  p.avx = x.dtype == DType::kF32 && p.n > 0 && norm_simd_allowed.load(std::memory_order_relaxed) &&
          HostCpuFeatures().avx;
#endif
  WorkspaceLayout layout;  // the Scale row, the B row, mean, inv_std
  layout.Add<double>(p.n);
  layout.Add<double>(p.has_bias ? p.n : 0);
  layout.Add<double>(p.rows);
  layout.Add<double>(p.rows);
  return MakePrepared(std::move(p), layout.bytes());
}

// row[j] = input i's element src[j], as a double.
absl::Status GatherRow(const KernelContext& ctx, int i, const std::vector<int64_t>& src, double* row) {
  const TensorView& t = ctx.input(i);
  return VisitDType<float, double, Half, BFloat16>(ctx, t.dtype, [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    const T* v = t.as<const T>();
    for (size_t j = 0; j < src.size(); ++j) row[j] = static_cast<double>(ToCompute(v[src[j]]));
    return absl::OkStatus();
  });
}

absl::Status LayerNormalizationKernel(KernelContext& ctx) {
  const LayerNormParams* p = PreparedParams<LayerNormParams>(ctx);
  if (p == nullptr) return NotPrepared(ctx);
  const TensorView& x = ctx.input(0);
  const int64_t rows = p->rows, n = p->n;
  WorkspaceCursor ws(ctx.workspace());
  double* scale = ws.Take<double>(n);
  double* bias = ws.Take<double>(p->has_bias ? n : 0);
  double* mean = ws.Take<double>(rows);
  double* inv_std = ws.Take<double>(rows);
  if (absl::Status s = GatherRow(ctx, 1, p->scale_src, scale); !s.ok()) return s;
  if (p->has_bias) {
    if (absl::Status s = GatherRow(ctx, 2, p->bias_src, bias); !s.ok()) return s;
  }
  const bool has_bias = p->has_bias;
  return VisitDType<float, double, Half, BFloat16>(ctx, x.dtype, [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    const T* in = x.as<const T>();
    T* out = ctx.output(0).as<T>();
    // Whole rows per thread: each row's sums are the same at any thread count.
    ParallelFor(ctx, rows, RowGrain(n, kCheapGrain), [&](int64_t begin, int64_t end) {
#if defined(GROVE_NORM_AVX)
      if constexpr (std::is_same_v<T, float>) {
        if (p->avx) {
          LayerNormRowsAvx(in + begin * n, out + begin * n, end - begin, n, p->epsilon, scale,
                           has_bias ? bias : nullptr, mean + begin, inv_std + begin);
          return;
        }
      }
#endif
      RowMoments(in + begin * n, end - begin, n, p->epsilon, mean + begin, inv_std + begin);
      NormalizeRows(in + begin * n, out + begin * n, end - begin, n, mean + begin, inv_std + begin,
                    [&](int64_t, int64_t j, double v) { return v * scale[j] + (has_bias ? bias[j] : 0.0); });
    });
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
// [outer, n, inner]. With inner == 1 each of the `outer` rows is contiguous
// (SoftmaxRows); otherwise (SoftmaxColumns) the columns [c0, c1) of every
// outer slice keep their running max and sum in `max` and `sum` (inner
// elements each, from the workspace, indexed by column), so the input is
// still read in memory order and disjoint column ranges may run at once.
// y = softmax(x), or log(softmax(x)) = (x - max) - log(sum(exp(x - max)))
// with kLog, which stays finite where exp underflows.
template <bool kLog, typename T>
void SoftmaxRows(const T* x, T* y, int64_t rows, int64_t n) {
  using C = ComputeT<T>;
  // f16 and bf16 compute in f32 and round once on store: the exps are taken
  // again in the last pass instead of kept in y.
  constexpr bool kNarrow = !std::is_same_v<C, T>;
  for (int64_t o = 0; o < rows; ++o, x += n, y += n) {
    C m = ToCompute(x[0]);
    for (int64_t j = 1; j < n; ++j) {
      const C v = ToCompute(x[j]);
      m = v > m ? v : m;
    }
    double total = 0;
    for (int64_t j = 0; j < n; ++j) {
      const C e = std::exp(ToCompute(x[j]) - m);
      if constexpr (!kNarrow) y[j] = e;
      total += e;
    }
    if constexpr (kLog) {
      // (x - max) first: exact for nearby values, where x - (max + log sum) would round the sum to x's ulp.
      const C log_sum = static_cast<C>(std::log(total));
      for (int64_t j = 0; j < n; ++j) y[j] = FromCompute<T>((ToCompute(x[j]) - m) - log_sum);
    } else {
      const C scale = static_cast<C>(1.0 / total);
      for (int64_t j = 0; j < n; ++j) {
        if constexpr (kNarrow) {
          y[j] = FromCompute<T>(std::exp(ToCompute(x[j]) - m) * scale);
        } else {
          y[j] *= scale;
        }
      }
    }
  }
}

// `max` holds the compute type (f32 for f16 and bf16).
template <bool kLog, typename T>
void SoftmaxColumns(const T* x, T* y, int64_t outer, int64_t n, int64_t inner, int64_t c0, int64_t c1,
                    ComputeT<T>* max, double* sum) {
  using C = ComputeT<T>;
  constexpr bool kNarrow = !std::is_same_v<C, T>;
  for (int64_t o = 0; o < outer; ++o, x += n * inner, y += n * inner) {
    for (int64_t i = c0; i < c1; ++i) max[i] = ToCompute(x[i]);
    for (int64_t j = 1; j < n; ++j) {
      const T* row = x + j * inner;
      for (int64_t i = c0; i < c1; ++i) {
        const C v = ToCompute(row[i]);
        max[i] = v > max[i] ? v : max[i];
      }
    }
    std::fill(sum + c0, sum + c1, 0.0);
    for (int64_t j = 0; j < n; ++j) {
      const T* row = x + j * inner;
      T* out = y + j * inner;
      for (int64_t i = c0; i < c1; ++i) {
        const C e = std::exp(ToCompute(row[i]) - max[i]);
        if constexpr (!kNarrow) out[i] = e;
        sum[i] += e;
      }
    }
    if constexpr (kLog) {
      for (int64_t i = c0; i < c1; ++i) sum[i] = std::log(sum[i]);
      for (int64_t j = 0; j < n; ++j) {
        const T* row = x + j * inner;
        T* out = y + j * inner;
        for (int64_t i = c0; i < c1; ++i) {
          out[i] = FromCompute<T>((ToCompute(row[i]) - max[i]) - static_cast<C>(sum[i]));
        }
      }
    } else {
      for (int64_t i = c0; i < c1; ++i) sum[i] = static_cast<C>(1.0 / sum[i]);  // reused as the scale
      for (int64_t j = 0; j < n; ++j) {
        const T* row = x + j * inner;
        T* out = y + j * inner;
        for (int64_t i = c0; i < c1; ++i) {
          const C scale = static_cast<C>(sum[i]);
          if constexpr (kNarrow) {
            out[i] = FromCompute<T>(std::exp(ToCompute(row[i]) - max[i]) * scale);
          } else {
            out[i] *= scale;
          }
        }
      }
    }
  }
}

// Softmax over [outer, n, inner], split over the session's threads by whole
// rows (inner == 1) or whole columns, so every sum is taken in one order.
template <bool kLog, typename T>
void SoftmaxAlongAxis(const KernelContext& ctx, const T* x, T* y, int64_t outer, int64_t n, int64_t inner,
                      ComputeT<T>* max, double* sum) {
  if (n == 0 || inner == 0 || outer == 0) return;
  if (inner == 1) {
    ParallelFor(ctx, outer, RowGrain(n, kCostlyGrain), [&](int64_t begin, int64_t end) {
      SoftmaxRows<kLog>(x + begin * n, y + begin * n, end - begin, n);
    });
    return;
  }
  ParallelFor(ctx, inner, RowGrain(outer * n, kCostlyGrain), [&](int64_t c0, int64_t c1) {
    SoftmaxColumns<kLog>(x, y, outer, n, inner, c0, c1, max, sum);
  });
}

// Softmax, LogSoftmax and Hardmax: the input as [outer, n, inner] around the axis.
struct AxisParams {
  int64_t outer = 1, n = 0, inner = 1;
  std::shared_ptr<OneDnnStep> onednn;  // f32 Softmax over the last axis (onednn.h)
};

// The prepare of Softmax (kLog = false) and LogSoftmax (kLog = true).
template <bool kLog>
absl::StatusOr<PreparedKernel> PrepareSoftmaxFamily(const KernelContext& ctx) {
  const TensorView& x = ctx.input(0);
  const TensorView& y = ctx.output(0);
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
  if (absl::Status s = CheckFloatDType(ctx, x.dtype); !s.ok()) return s;
  AxisParams p;
  for (int d = 0; d < *axis; ++d) p.outer *= x.shape[d];
  for (int d = *axis + 1; d < rank; ++d) p.inner *= x.shape[d];
  p.n = x.shape[*axis];
  WorkspaceLayout layout;  // the running max (compute type) and sum (double) per column
  if (!kLog && p.inner == 1) {  // LogSoftmax: see PrepareOneDnnSoftmax
    absl::StatusOr<std::shared_ptr<OneDnnStep>> onednn = PrepareOneDnnSoftmax(ctx, p.outer, p.n, &layout);
    if (!onednn.ok()) return onednn.status();
    if (*onednn != nullptr) {
      p.onednn = *std::move(onednn);
      return MakePrepared(std::move(p), layout.bytes());
    }
  }
  if (p.inner > 1) {
    layout.AddBytes(static_cast<uint64_t>(p.inner) * std::max<uint64_t>(DTypeSize(x.dtype), sizeof(float)));
    layout.Add<double>(p.inner);
  }
  return MakePrepared(std::move(p), layout.bytes());
}

// Whether every value is finite: x * 0 is NaN for an infinity or a NaN, and
// the sum of the products carries it.
bool AllFinite(const float* x, int64_t n) {
  float acc = 0.0f;
  for (int64_t i = 0; i < n; ++i) acc += x[i] * 0.0f;
  return acc == 0.0f;
}

template <bool kLog>
absl::Status SoftmaxFamilyKernel(KernelContext& ctx) {
  const AxisParams* p = PreparedParams<AxisParams>(ctx);
  if (p == nullptr) return NotPrepared(ctx);
  const TensorView& x = ctx.input(0);
  // oneDNN's softmax does not give the reference's NaN for a row with an
  // infinity or a NaN (an all -inf masked row, +inf): such inputs take the
  // reference kernel, a read of the input that costs far less than the exps.
  if (p->onednn != nullptr && AllFinite(x.as<const float>(), x.num_elements())) {
    return RunOneDnnStep(*p->onednn, ctx);
  }
  TensorView& y = ctx.output(0);
  return VisitDType<float, double, Half, BFloat16>(ctx, x.dtype, [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    ComputeT<T>* max = nullptr;
    double* sum = nullptr;
    if (p->inner > 1) {
      WorkspaceCursor ws(ctx.workspace());
      max = ws.Take<ComputeT<T>>(p->inner);
      sum = ws.Take<double>(p->inner);
    }
    SoftmaxAlongAxis<kLog>(ctx, x.as<const T>(), y.as<T>(), p->outer, p->n, p->inner, max, sum);
    return absl::OkStatus();
  });
}

absl::StatusOr<PreparedKernel> PrepareHardmax(const KernelContext& ctx) {
  const TensorView& x = ctx.input(0);
  const int rank = static_cast<int>(x.shape.size());
  if (rank == 0) return ctx.Error("input 0 (input) is a scalar; Hardmax needs rank >= 1");
  absl::StatusOr<int> axis = ir::NormalizeAxis(ctx.attrs().GetInt("axis", -1), rank);
  if (!axis.ok()) return ctx.Error(absl::StrCat("attribute 'axis': ", axis.status().message()));
  if (absl::Status s = CheckOutput(ctx, 0, x.dtype, x.shape); !s.ok()) return s;
  if (absl::Status s = CheckFloatDType(ctx, x.dtype); !s.ok()) return s;
  const ir::AxisSplit split = ir::SplitAt(x.shape, *axis);
  return MakePrepared(AxisParams{split.outer, split.n, split.inner});
}

// 1 at the first maximum along the axis, 0 elsewhere. A NaN counts as the
// maximum (the first one wins), as numpy's argmax has it.
absl::Status HardmaxKernel(KernelContext& ctx) {
  const AxisParams* p = PreparedParams<AxisParams>(ctx);
  if (p == nullptr) return NotPrepared(ctx);
  const AxisParams split = *p;
  const TensorView& x = ctx.input(0);
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

struct MvnParams {
  int64_t total = 0;   // elements of X
  int64_t groups = 1;  // the kept coordinates' combinations
  double per_group = 0;
  std::vector<int64_t> group_of;  // element -> its group
};

absl::StatusOr<PreparedKernel> PrepareMeanVarianceNormalization(const KernelContext& ctx) {
  const TensorView& x = ctx.input(0);
  const int rank = static_cast<int>(x.shape.size());
  absl::StatusOr<std::vector<bool>> reduced = ir::ReducedDims(ctx.attrs().GetInts("axes", {0, 2, 3}), rank, false);
  if (!reduced.ok()) return ctx.Error(absl::StrCat("attribute 'axes': ", reduced.status().message()));
  if (absl::Status s = CheckOutput(ctx, 0, x.dtype, x.shape); !s.ok()) return s;
  MvnParams p;
  p.total = x.num_elements();
  // Element e belongs to the group of its kept coordinates; group_stride[d]
  // is what a step along dim d adds to the group index (0 for reduced dims).
  std::vector<int64_t> group_stride(static_cast<size_t>(rank), 0);
  for (int d = rank - 1; d >= 0; --d) {
    if ((*reduced)[d]) continue;
    group_stride[d] = p.groups;
    p.groups *= x.shape[d];
  }
  if (p.total == 0) return MakePrepared(std::move(p));
  if (absl::Status s = CheckFloatDType(ctx, x.dtype); !s.ok()) return s;
  p.group_of.resize(static_cast<size_t>(p.total));
  std::vector<int64_t> index(static_cast<size_t>(rank), 0);
  int64_t g = 0;
  for (int64_t e = 0; e < p.total; ++e) {
    p.group_of[e] = g;
    for (int d = rank - 1; d >= 0; --d) {
      g += group_stride[d];
      if (++index[d] < x.shape[d]) break;
      g -= group_stride[d] * x.shape[d];
      index[d] = 0;
    }
  }
  p.per_group = static_cast<double>(p.total / p.groups);
  WorkspaceLayout layout;  // mean and variance per group
  layout.Add<double>(p.groups);
  layout.Add<double>(p.groups);
  return MakePrepared(std::move(p), layout.bytes());
}

// y = (x - mean) / (sqrt(variance) + 1e-9), the statistics taken over the
// dims in `axes` (default [0, 2, 3]); the epsilon is the one of the ONNX
// function body.
absl::Status MeanVarianceNormalizationKernel(KernelContext& ctx) {
  const MvnParams* p = PreparedParams<MvnParams>(ctx);
  if (p == nullptr) return NotPrepared(ctx);
  if (p->total == 0) return absl::OkStatus();
  const TensorView& x = ctx.input(0);
  const int64_t total = p->total, groups = p->groups;
  const int64_t* group_of = p->group_of.data();
  const double per_group = p->per_group;
  WorkspaceCursor ws(ctx.workspace());
  double* mean = ws.Take<double>(groups);
  double* var = ws.Take<double>(groups);
  return VisitDType<float, double, Half, BFloat16>(ctx, x.dtype, [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    const T* xp = x.as<const T>();
    T* yp = ctx.output(0).as<T>();
    std::fill(mean, mean + groups, 0.0);
    std::fill(var, var + groups, 0.0);
    for (int64_t e = 0; e < total; ++e) mean[group_of[e]] += static_cast<double>(ToCompute(xp[e]));
    for (int64_t k = 0; k < groups; ++k) mean[k] /= per_group;
    for (int64_t e = 0; e < total; ++e) {
      const double d = static_cast<double>(ToCompute(xp[e])) - mean[group_of[e]];
      var[group_of[e]] += d * d;
    }
    for (int64_t k = 0; k < groups; ++k) var[k] = std::sqrt(var[k] / per_group) + 1e-9;  // now the divisor
    for (int64_t e = 0; e < total; ++e) {
      const double y = (static_cast<double>(ToCompute(xp[e])) - mean[group_of[e]]) / var[group_of[e]];
      yp[e] = FromCompute<T>(static_cast<ComputeT<T>>(y));
    }
    return absl::OkStatus();
  });
}

}  // namespace

absl::Status RegisterNormKernels(ir::OpRegistry& registry) {
  const std::pair<const char*, ir::KernelDef> kernels[] = {
      {"BatchNormalization",
       {&RunLayoutAware<&BatchNormalizationBody>, &PrepareLayoutAware<&PrepareBatchNormalizationWith>}},
      {"InstanceNormalization", {&InstanceNormalizationKernel, &PrepareInstanceNormalization}},
      {"LayerNormalization", {&LayerNormalizationKernel, &PrepareLayerNormalization}},
      {"MeanVarianceNormalization", {&MeanVarianceNormalizationKernel, &PrepareMeanVarianceNormalization}},
      {"Softmax", {&SoftmaxFamilyKernel<false>, &PrepareSoftmaxFamily<false>}},
      {"LogSoftmax", {&SoftmaxFamilyKernel<true>, &PrepareSoftmaxFamily<true>}},
      {"Hardmax", {&HardmaxKernel, &PrepareHardmax}},
  };
  for (const auto& [type, kernel] : kernels) {
    if (absl::Status s = registry.SetKernel(type, ir::Backend::kCpu, kernel); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace grove::cpu
