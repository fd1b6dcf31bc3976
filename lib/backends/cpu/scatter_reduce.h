// The element update of ScatterND and ScatterElements with a reduction
// (opset 16/18: add, mul, max, min), shared by both CPU kernels. Integers
// wrap on overflow (computed in the unsigned type) instead of overflowing.
#ifndef GROVE_LIB_BACKENDS_CPU_SCATTER_REDUCE_H_
#define GROVE_LIB_BACKENDS_CPU_SCATTER_REDUCE_H_

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "lib/backends/common/layout_params.h"
#include "lib/ir/element_types.h"

namespace grove::cpu {

using ir::ComputeT;
using ir::FromCompute;
using ir::ToCompute;

// out[i] = reduction(out[i], upd[i]) for i < n.
template <typename T>
void ScatterReduce(backends::ScatterReduction reduction, T* out, const T* upd, int64_t n) {
  using C = ComputeT<T>;
  using backends::ScatterReduction;
  for (int64_t i = 0; i < n; ++i) {
    const C a = ToCompute(out[i]), b = ToCompute(upd[i]);
    C r;
    switch (reduction) {
      case ScatterReduction::kAdd:
      case ScatterReduction::kMul:
        if constexpr (std::is_integral_v<C> && !std::is_same_v<C, bool>) {
          using U = std::common_type_t<std::make_unsigned_t<C>, unsigned>;
          const U ua = static_cast<U>(a), ub = static_cast<U>(b);
          r = static_cast<C>(reduction == ScatterReduction::kAdd ? ua + ub : ua * ub);
        } else {
          r = static_cast<C>(reduction == ScatterReduction::kAdd ? a + b : a * b);
        }
        break;
      case ScatterReduction::kMax:
        r = std::max(a, b);
        break;
      default:
        r = std::min(a, b);
        break;
    }
    out[i] = FromCompute<T>(r);
  }
}

}  // namespace grove::cpu

#endif  // GROVE_LIB_BACKENDS_CPU_SCATTER_REDUCE_H_
