// OneHot: GROVE_T0 is the index type (any number type, converted as ONNX
// Cast does: floats truncate, saturating, NaN gives 0), GROVE_T1 the element
// width of the values (u8, f16, i32, i64).
#ifndef GROVE_JIT_KERNELS_GATHER_ONEHOT_CUH_
#define GROVE_JIT_KERNELS_GATHER_ONEHOT_CUH_

#include "jit/kernels/gather_params.h"
#include "jit/kernels/index_common.cuh"
#include "jit/kernels/prelude.cuh"

namespace grove_k {
namespace mv {

GROVE_DEVICE i64 onehot_truncate(double x) {
  if (x != x) return 0;
  const double lo = -9223372036854775808.0;  // -2^63, exact
  if (x < lo) return -9223372036854775807LL - 1;
  if (x >= -lo) return 9223372036854775807LL;
  return static_cast<i64>(x);
}

template <typename I>
GROVE_DEVICE i64 onehot_index(I v) {
  return static_cast<i64>(v);
}
template <>
GROVE_DEVICE i64 onehot_index<float>(float v) {
  return onehot_truncate(static_cast<double>(v));
}
template <>
GROVE_DEVICE i64 onehot_index<double>(double v) {
  return onehot_truncate(v);
}
template <>
GROVE_DEVICE i64 onehot_index<f16>(f16 v) {
  return onehot_truncate(static_cast<double>(to_f32(v)));
}
template <>
GROVE_DEVICE i64 onehot_index<bf16>(bf16 v) {
  return onehot_truncate(static_cast<double>(to_f32(v)));
}

template <typename I, typename T>
GROVE_DEVICE void onehot(const OneHotParams& p) {
  const I* indices = static_cast<const I*>(p.indices);
  const T* values = static_cast<const T*>(p.values);
  T* dst = static_cast<T*>(p.dst);
  const i64 step = grid_threads();
  for (i64 i = global_thread(); i < p.n; i += step) {
    const OuterMidInner c = split_outer_mid_inner(i, p.depth, p.inner);
    i64 v = onehot_index<I>(indices[c.outer * p.inner + c.inner]);
    if (v < 0) v += p.depth;
    dst[i] = values[v == c.mid ? 1 : 0];
  }
}

}  // namespace mv
}  // namespace grove_k

#endif  // GROVE_JIT_KERNELS_GATHER_ONEHOT_CUH_

#if defined(GROVE_T0) && defined(GROVE_T1)
GROVE_ENTRY(onehot, grove_k::OneHotParams) { grove_k::mv::onehot<GROVE_T0, GROVE_T1>(p); }
#endif
