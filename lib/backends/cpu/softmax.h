// Softmax and LogSoftmax over one axis (ONNX opset 13), shared by the
// reduction group (Softmax) and the nn group (LogSoftmax). The input is seen
// as [outer, n, inner]; with inner > 1 the running max and sum are kept per
// column so the input is still read in memory order.
#ifndef GROVE_LIB_BACKENDS_CPU_SOFTMAX_H_
#define GROVE_LIB_BACKENDS_CPU_SOFTMAX_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "lib/ir/element_types.h"
#include "lib/ir/op_registry.h"

namespace grove::cpu {

using ir::VisitDType;

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

}  // namespace grove::cpu

#endif  // GROVE_LIB_BACKENDS_CPU_SOFTMAX_H_
