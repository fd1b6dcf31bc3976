// CPU reference kernels of the loss group: NegativeLogLikelihoodLoss and
// SoftmaxCrossEntropyLoss. Scores [N, C, d1..dk] are seen as [N, C, D] with
// D = d1 * ... * dk and class indices as [N, D]. Every class index is
// checked before anything is written; the arithmetic runs in double and
// each output element is rounded once. The attributes, shapes and the loop
// of the dtype are prepared once; the class indices are read per run.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "lib/backends/common/kernel_checks.h"
#include "lib/backends/common/prepared.h"
#include "lib/backends/cpu/cpu_kernels.h"
#include "lib/backends/cpu/workspace_layout.h"
#include "lib/ir/element_types.h"
#include "lib/ir/ops/loss_params.h"

namespace grove::cpu {

using ir::BFloat16;
using ir::ComputeT;
using ir::FromCompute;
using ir::Half;
using ir::ToCompute;
using ir::VisitDType;

namespace {

using backends::CheckOutput;
using backends::ShapeStr;
using ir::KernelContext;

using Reduction = ir::LossReduction;

// The multi-index of element `flat` of `shape`, as "[1, 0, 2]".
std::string IndexStr(int64_t flat, const std::vector<int64_t>& shape) {
  std::vector<int64_t> index(shape.size());
  for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {
    index[d] = shape[d] > 0 ? flat % shape[d] : 0;
    flat = shape[d] > 0 ? flat / shape[d] : 0;
  }
  return ShapeStr(index);
}

// What the prepare makes: the reduction, the [N, C, D] view, ignore_index,
// which optional inputs and outputs there are, and the loop of the scores'
// dtype. SoftmaxCrossEntropyLoss's log-probabilities (N * C * D doubles) and
// its per-position max and sum (D doubles each) live in the workspace.
struct LossParams {
  Reduction reduction = Reduction::kMean;
  int64_t n = 0, classes = 0, inner = 1;
  bool has_ignore = false, has_weight = false, want_log_prob = false;
  int64_t ignore = 0;
  const char* target_name = "";
  absl::Status (*run)(const LossParams& p, KernelContext& ctx) = nullptr;
};

// The class index of sample i (i32 or i64).
int64_t ClassAt(const TensorView& t, int64_t i) {
  return t.dtype == DType::kI64 ? t.as<const int64_t>()[i] : t.as<const int32_t>()[i];
}

// Every class index in [0, C) or ignore_index, checked before anything is
// written: an error names the first that is not, and where it is.
absl::Status CheckClasses(const LossParams& p, const KernelContext& ctx) {
  const TensorView& t = ctx.input(1);
  const int64_t count = t.num_elements();
  for (int64_t i = 0; i < count; ++i) {
    const int64_t c = ClassAt(t, i);
    if (p.has_ignore && c == p.ignore) continue;
    if (c < 0 || c >= p.classes) {
      return ctx.Error(absl::StrCat("input 1 (", p.target_name, ") holds ", c, " at ", IndexStr(i, t.shape),
                                    "; expected a class index in [0, ", p.classes, ")",
                                    p.has_ignore ? absl::StrCat(" or ignore_index ", p.ignore) : std::string()));
    }
  }
  return absl::OkStatus();
}

template <typename T, bool kSoftmax>
absl::Status RunLoss(const LossParams& p, KernelContext& ctx) {
  if (absl::Status s = CheckClasses(p, ctx); !s.ok()) return s;
  const TensorView& t = ctx.input(1);
  const int64_t n = p.n, classes = p.classes, inner = p.inner;
  const T* xp = ctx.input(0).as<const T>();
  // Log-probabilities along C: the scores themselves for
  // NegativeLogLikelihoodLoss, log(softmax(scores)) for SoftmaxCrossEntropyLoss.
  double* log_prob = nullptr;
  if constexpr (kSoftmax) {
    WorkspaceCursor ws(ctx.workspace());
    log_prob = ws.Take<double>(n * classes * inner);
    double* max = ws.Take<double>(inner);
    double* sum = ws.Take<double>(inner);
    for (int64_t b = 0; b < n; ++b) {
      const T* xb = xp + b * classes * inner;
      double* lb = log_prob + b * classes * inner;
      auto score = [&](int64_t c, int64_t i) { return static_cast<double>(ToCompute(xb[c * inner + i])); };
      std::fill(max, max + inner, -std::numeric_limits<double>::infinity());
      std::fill(sum, sum + inner, 0.0);
      for (int64_t c = 0; c < classes; ++c) {
        for (int64_t i = 0; i < inner; ++i) max[i] = std::max(max[i], score(c, i));
      }
      for (int64_t c = 0; c < classes; ++c) {
        for (int64_t i = 0; i < inner; ++i) sum[i] += std::exp(score(c, i) - max[i]);
      }
      for (int64_t i = 0; i < inner; ++i) sum[i] = max[i] + std::log(sum[i]);  // log-sum-exp
      for (int64_t c = 0; c < classes; ++c) {
        for (int64_t i = 0; i < inner; ++i) lb[c * inner + i] = score(c, i) - sum[i];
      }
    }
    if (p.want_log_prob) {
      T* out = ctx.output(1).as<T>();
      const int64_t count = n * classes * inner;
      for (int64_t i = 0; i < count; ++i) out[i] = FromCompute<T>(static_cast<ComputeT<T>>(log_prob[i]));
    }
  }
  auto log_prob_at = [&](int64_t flat) -> double {
    if constexpr (kSoftmax) {
      return log_prob[flat];
    } else {
      return static_cast<double>(ToCompute(xp[flat]));
    }
  };
  const T* wp = p.has_weight ? ctx.input(2).as<const T>() : nullptr;
  T* loss = ctx.output(0).as<T>();
  double total = 0, denominator = 0;
  for (int64_t b = 0; b < n; ++b) {
    for (int64_t i = 0; i < inner; ++i) {
      const int64_t sample = b * inner + i;
      const int64_t c = ClassAt(t, sample);
      double l = 0;
      if (!(p.has_ignore && c == p.ignore)) {
        const double w = wp != nullptr ? static_cast<double>(ToCompute(wp[c])) : 1.0;
        l = -log_prob_at((b * classes + c) * inner + i) * w;
        denominator += w;
      }
      if (p.reduction == Reduction::kNone) {
        loss[sample] = FromCompute<T>(static_cast<ComputeT<T>>(l));
      } else {
        total += l;
      }
    }
  }
  // The mean divides by the weights of the samples counted (their number
  // without weights); with every sample ignored that is 0 / 0 = NaN, as in
  // the ONNX reference and PyTorch.
  if (p.reduction == Reduction::kSum) loss[0] = FromCompute<T>(static_cast<ComputeT<T>>(total));
  if (p.reduction == Reduction::kMean) loss[0] = FromCompute<T>(static_cast<ComputeT<T>>(total / denominator));
  return absl::OkStatus();
}

template <bool kSoftmax>
absl::StatusOr<ir::PreparedKernel> PrepareLoss(const KernelContext& ctx) {
  const char* scores_name = kSoftmax ? "scores" : "input";
  const char* target_name = kSoftmax ? "labels" : "target";
  const char* weight_name = kSoftmax ? "weights" : "weight";
  LossParams p;
  p.target_name = target_name;
  absl::StatusOr<Reduction> reduction = ir::ReadLossReduction(ctx.attrs());
  if (!reduction.ok()) return ctx.Error(reduction.status().message());
  p.reduction = *reduction;

  const TensorView& x = ctx.input(0);
  const TensorView& t = ctx.input(1);
  if (x.shape.size() < 2) {
    return ctx.Error(absl::StrCat("input 0 (", scores_name, ") has shape ", ShapeStr(x.shape),
                                  "; expected rank >= 2 (N, C, d1...)"));
  }
  std::vector<int64_t> sample_shape = x.shape;
  sample_shape.erase(sample_shape.begin() + 1);
  if (t.shape != sample_shape) {
    return ctx.Error(absl::StrCat("input 1 (", target_name, ") has shape ", ShapeStr(t.shape), "; expected ",
                                  ShapeStr(sample_shape), " (input 0 (", scores_name, ") ", ShapeStr(x.shape),
                                  " without dim 1)"));
  }
  if (t.dtype != DType::kI64 && t.dtype != DType::kI32) {
    return ctx.Error(
        absl::StrCat("input 1 (", target_name, ") has dtype ", DTypeName(t.dtype), "; expected one of i64, i32"));
  }
  p.n = x.shape[0];
  p.classes = x.shape[1];
  for (size_t d = 2; d < x.shape.size(); ++d) p.inner *= x.shape[d];
  p.has_weight = ctx.has_input(2);
  if (p.has_weight) {
    const TensorView& weight = ctx.input(2);
    if (weight.dtype != x.dtype) {
      return ctx.Error(absl::StrCat("input 2 (", weight_name, ") has dtype ", DTypeName(weight.dtype), "; expected ",
                                    DTypeName(x.dtype), " like input 0 (", scores_name, ")"));
    }
    if (weight.shape != std::vector<int64_t>{p.classes}) {
      return ctx.Error(absl::StrCat("input 2 (", weight_name, ") has shape ", ShapeStr(weight.shape), "; expected [",
                                    p.classes, "] (one weight per class)"));
    }
  }
  const std::vector<int64_t> loss_shape = p.reduction == Reduction::kNone ? sample_shape : std::vector<int64_t>{};
  if (absl::Status s = CheckOutput(ctx, 0, x.dtype, loss_shape); !s.ok()) return s;
  p.want_log_prob = kSoftmax && ctx.has_output(1);
  if (p.want_log_prob) {
    if (absl::Status s = CheckOutput(ctx, 1, x.dtype, x.shape); !s.ok()) return s;
  }
  p.has_ignore = ctx.attrs().Has("ignore_index");
  p.ignore = ctx.attrs().GetInt("ignore_index", 0);
  absl::Status chosen = VisitDType<float, double, Half, BFloat16>(ctx, x.dtype, [&](auto tag) {
    p.run = &RunLoss<typename decltype(tag)::type, kSoftmax>;
    return absl::OkStatus();
  });
  if (!chosen.ok()) return chosen;
  WorkspaceLayout layout;
  if (kSoftmax) {
    layout.Add<double>(x.num_elements());  // log-probabilities
    layout.Add<double>(p.inner);           // max
    layout.Add<double>(p.inner);           // sum
  }
  return backends::MakePrepared(p, layout.bytes());
}

absl::Status InvokeLoss(KernelContext& ctx) {
  const LossParams* p = backends::PreparedParams<LossParams>(ctx);
  if (p == nullptr) return backends::NotPrepared(ctx, "CPU");
  return p->run(*p, ctx);
}

}  // namespace

absl::Status RegisterLossKernels(ir::OpRegistry& registry) {
  if (absl::Status s = registry.SetKernel("NegativeLogLikelihoodLoss", ir::Backend::kCpu,
                                          ir::KernelDef{&InvokeLoss, &PrepareLoss<false>});
      !s.ok()) {
    return s;
  }
  return registry.SetKernel("SoftmaxCrossEntropyLoss", ir::Backend::kCpu,
                            ir::KernelDef{&InvokeLoss, &PrepareLoss<true>});
}

}  // namespace grove::cpu
