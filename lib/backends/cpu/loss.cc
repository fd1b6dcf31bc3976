// CPU reference kernels of the loss group: NegativeLogLikelihoodLoss and
// SoftmaxCrossEntropyLoss. Scores [N, C, d1..dk] are seen as [N, C, D] with
// D = d1 * ... * dk and class indices as [N, D]. Every class index is
// checked before anything is written; the arithmetic runs in double and
// each output element is rounded once.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "lib/backends/common/kernel_checks.h"
#include "lib/backends/cpu/cpu_kernels.h"
#include "lib/ir/element_types.h"

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

enum class Reduction { kNone, kSum, kMean };

// The multi-index of element `flat` of `shape`, as "[1, 0, 2]".
std::string IndexStr(int64_t flat, const std::vector<int64_t>& shape) {
  std::vector<int64_t> index(shape.size());
  for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {
    index[d] = shape[d] > 0 ? flat % shape[d] : 0;
    flat = shape[d] > 0 ? flat / shape[d] : 0;
  }
  return ShapeStr(index);
}

// The class index of each sample, -1 for one equal to ignore_index. An
// index outside [0, C) that is not ignore_index is an error naming where it is.
absl::StatusOr<std::vector<int64_t>> ReadClasses(const KernelContext& ctx, const char* name, int64_t classes) {
  const TensorView& t = ctx.input(1);
  const bool has_ignore = ctx.attrs().Has("ignore_index");
  const int64_t ignore = ctx.attrs().GetInt("ignore_index", 0);
  std::vector<int64_t> out(static_cast<size_t>(t.num_elements()));
  for (size_t i = 0; i < out.size(); ++i) {
    out[i] = t.dtype == DType::kI64 ? t.as<const int64_t>()[i] : t.as<const int32_t>()[i];
  }
  for (size_t i = 0; i < out.size(); ++i) {
    if (has_ignore && out[i] == ignore) {
      out[i] = -1;
      continue;
    }
    if (out[i] < 0 || out[i] >= classes) {
      return ctx.Error(absl::StrCat("input 1 (", name, ") holds ", out[i], " at ",
                                    IndexStr(static_cast<int64_t>(i), t.shape), "; expected a class index in [0, ",
                                    classes, ")",
                                    has_ignore ? absl::StrCat(" or ignore_index ", ignore) : std::string()));
    }
  }
  return out;
}

template <bool kSoftmax>
absl::Status LossKernel(KernelContext& ctx) {
  const char* scores_name = kSoftmax ? "scores" : "input";
  const char* target_name = kSoftmax ? "labels" : "target";
  const char* weight_name = kSoftmax ? "weights" : "weight";
  const std::string reduction_attr = ctx.attrs().GetString("reduction", "mean");
  Reduction reduction;
  if (reduction_attr == "none") {
    reduction = Reduction::kNone;
  } else if (reduction_attr == "sum") {
    reduction = Reduction::kSum;
  } else if (reduction_attr == "mean") {
    reduction = Reduction::kMean;
  } else {
    return ctx.Error(absl::StrCat("attribute 'reduction' is '", reduction_attr, "'; expected 'none', 'sum' or 'mean'"));
  }

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
  const int64_t n = x.shape[0], classes = x.shape[1];
  int64_t inner = 1;
  for (size_t d = 2; d < x.shape.size(); ++d) inner *= x.shape[d];
  const TensorView* weight = ctx.has_input(2) ? &ctx.input(2) : nullptr;
  if (weight != nullptr) {
    if (weight->dtype != x.dtype) {
      return ctx.Error(absl::StrCat("input 2 (", weight_name, ") has dtype ", DTypeName(weight->dtype), "; expected ",
                                    DTypeName(x.dtype), " like input 0 (", scores_name, ")"));
    }
    if (weight->shape != std::vector<int64_t>{classes}) {
      return ctx.Error(absl::StrCat("input 2 (", weight_name, ") has shape ", ShapeStr(weight->shape), "; expected [",
                                    classes, "] (one weight per class)"));
    }
  }
  const std::vector<int64_t> loss_shape = reduction == Reduction::kNone ? sample_shape : std::vector<int64_t>{};
  if (absl::Status s = CheckOutput(ctx, 0, x.dtype, loss_shape); !s.ok()) return s;
  const bool want_log_prob = kSoftmax && ctx.has_output(1);
  if (want_log_prob) {
    if (absl::Status s = CheckOutput(ctx, 1, x.dtype, x.shape); !s.ok()) return s;
  }
  absl::StatusOr<std::vector<int64_t>> target = ReadClasses(ctx, target_name, classes);
  if (!target.ok()) return target.status();

  return VisitDType<float, double, Half, BFloat16>(ctx, x.dtype, [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    const T* xp = x.as<const T>();
    // Log-probabilities along C: the scores themselves for
    // NegativeLogLikelihoodLoss, log(softmax(scores)) for SoftmaxCrossEntropyLoss.
    std::vector<double> log_prob;
    if constexpr (kSoftmax) {
      log_prob.resize(static_cast<size_t>(x.num_elements()));
      std::vector<double> max(static_cast<size_t>(inner)), sum(static_cast<size_t>(inner));
      for (int64_t b = 0; b < n; ++b) {
        const T* xb = xp + b * classes * inner;
        double* lb = log_prob.data() + b * classes * inner;
        auto score = [&](int64_t c, int64_t i) { return static_cast<double>(ToCompute(xb[c * inner + i])); };
        std::fill(max.begin(), max.end(), -std::numeric_limits<double>::infinity());
        std::fill(sum.begin(), sum.end(), 0.0);
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
      if (want_log_prob) {
        T* out = ctx.output(1).as<T>();
        for (size_t i = 0; i < log_prob.size(); ++i) out[i] = FromCompute<T>(static_cast<ComputeT<T>>(log_prob[i]));
      }
    }
    auto log_prob_at = [&](int64_t flat) -> double {
      if constexpr (kSoftmax) {
        return log_prob[flat];
      } else {
        return static_cast<double>(ToCompute(xp[flat]));
      }
    };
    const T* wp = weight != nullptr ? weight->as<const T>() : nullptr;
    T* loss = ctx.output(0).as<T>();
    double total = 0, denominator = 0;
    for (int64_t b = 0; b < n; ++b) {
      for (int64_t i = 0; i < inner; ++i) {
        const int64_t sample = b * inner + i;
        const int64_t c = (*target)[sample];
        double l = 0;
        if (c >= 0) {
          const double w = wp != nullptr ? static_cast<double>(ToCompute(wp[c])) : 1.0;
          l = -log_prob_at((b * classes + c) * inner + i) * w;
          denominator += w;
        }
        if (reduction == Reduction::kNone) {
          loss[sample] = FromCompute<T>(static_cast<ComputeT<T>>(l));
        } else {
          total += l;
        }
      }
    }
    // The mean divides by the weights of the samples counted (their number
    // without weights); with every sample ignored that is 0 / 0 = NaN, as in
    // the ONNX reference and PyTorch.
    if (reduction == Reduction::kSum) loss[0] = FromCompute<T>(static_cast<ComputeT<T>>(total));
    if (reduction == Reduction::kMean) loss[0] = FromCompute<T>(static_cast<ComputeT<T>>(total / denominator));
    return absl::OkStatus();
  });
}

}  // namespace

absl::Status RegisterLossKernels(ir::OpRegistry& registry) {
  if (absl::Status s = registry.SetKernel("NegativeLogLikelihoodLoss", ir::Backend::kCpu, &LossKernel<false>);
      !s.ok()) {
    return s;
  }
  return registry.SetKernel("SoftmaxCrossEntropyLoss", ir::Backend::kCpu, &LossKernel<true>);
}

}  // namespace grove::cpu
