// LayerNormalization, InstanceNormalization and BatchNormalization
// (inference), as the CPU kernels of lib/backends/cpu/nn.cc: two passes
// (mean, then the mean squared deviation), computed in f32 for f32/f16/bf16
// and in f64 for f64.
#ifndef GROVE_JIT_KERNELS_NORM_CUH_
#define GROVE_JIT_KERNELS_NORM_CUH_

#include "jit/kernels/norm_params.h"
#include "jit/kernels/prelude.cuh"
#include "jit/kernels/reduce_common.cuh"

namespace grove_k {
namespace rdx {

template <typename A>
GROVE_DEVICE A g_inv_sqrt(A v) {
  return A(1) / g_sqrt(v);
}

template <typename T>
GROVE_DEVICE void norm_rows(const NormRowsParams& p, int mode) {
  typedef typename Acc<T>::type A;
  const T* x = static_cast<const T*>(p.x);
  T* y = static_cast<T*>(p.y);
  const Group g = make_group(mode);
  const AddOp<A> add;
  for (i64 r = g.first; r < p.rows; r += g.step) {
    const T* xr = x + r * p.n;
    T* yr = y + r * p.n;
    A s = A(0);
    for (i64 j = g.lane; j < p.n; j += g.width) s += to_acc<T>(xr[j]);
    s = group_all(add, s, g.mode);
    const A mean = p.n > 0 ? s / static_cast<A>(p.n) : A(0);
    A q = A(0);
    for (i64 j = g.lane; j < p.n; j += g.width) {
      const A d = to_acc<T>(xr[j]) - mean;
      q += d * d;
    }
    q = group_all(add, q, g.mode);
    const A var = p.n > 0 ? q / static_cast<A>(p.n) : A(0);
    const A inv_std = g_inv_sqrt(var + static_cast<A>(p.epsilon));
    if (p.channels > 0) {
      const i64 c = r % p.channels;
      const A sc = load_any<A>(p.scale, p.scale_type, c);
      const A b = p.bias != 0 ? load_any<A>(p.bias, p.bias_type, c) : A(0);
      for (i64 j = g.lane; j < p.n; j += g.width) {
        yr[j] = from_acc<T, A>((to_acc<T>(xr[j]) - mean) * inv_std * sc + b);
      }
    } else {
      for (i64 j = g.lane; j < p.n; j += g.width) {
        const A sc = load_any<A>(p.scale, p.scale_type, offset_of(j, p.aff, p.scale_strides));
        const A b = p.bias != 0 ? load_any<A>(p.bias, p.bias_type, offset_of(j, p.aff, p.bias_strides)) : A(0);
        yr[j] = from_acc<T, A>((to_acc<T>(xr[j]) - mean) * inv_std * sc + b);
      }
    }
    if (g.lane == 0) {
      if (p.mean_out != 0) static_cast<float*>(p.mean_out)[r] = static_cast<float>(mean);
      if (p.inv_std_out != 0) static_cast<float*>(p.inv_std_out)[r] = static_cast<float>(inv_std);
    }
  }
}

template <typename T>
GROVE_DEVICE void batch_norm(const BatchNormParams& p) {
  typedef typename Acc<T>::type A;
  const T* x = static_cast<const T*>(p.x);
  T* y = static_cast<T*>(p.y);
  for (i64 i = global_thread(); i < p.total; i += grid_threads()) {
    const i64 c = (i / p.inner) % p.channels;
    const A mean = load_any<A>(p.mean, p.mean_type, c);
    const A inv_std = g_inv_sqrt(load_any<A>(p.var, p.var_type, c) + static_cast<A>(p.epsilon));
    const A sc = load_any<A>(p.scale, p.scale_type, c);
    const A b = load_any<A>(p.bias, p.bias_type, c);
    y[i] = from_acc<T, A>((to_acc<T>(x[i]) - mean) * inv_std * sc + b);
  }
}

}  // namespace rdx
}  // namespace grove_k

#endif  // GROVE_JIT_KERNELS_NORM_CUH_

#if defined(GROVE_T0)
#if defined(GROVE_V_LANES)
#define GROVE_ROW_LANES GROVE_V_LANES
#else
#define GROVE_ROW_LANES 0
#endif
GROVE_ENTRY(norm_rows, grove_k::NormRowsParams) {
  grove_k::rdx::norm_rows<GROVE_T0>(p, grove_k::rdx::variant_mode(p.mode, GROVE_ROW_LANES));
}
#undef GROVE_ROW_LANES
GROVE_ENTRY(norm_batch, grove_k::BatchNormParams) { grove_k::rdx::batch_norm<GROVE_T0>(p); }
#endif
