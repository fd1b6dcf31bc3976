// Softmax and LogSoftmax over one axis (ONNX opset 13), as the CPU kernel
// (lib/backends/cpu/softmax.h): the max, then the sum of exp(x - max), then
//   softmax    = exp(x - max) * (1 / sum)
//   logsoftmax = (x - max) - log(sum)
// A NaN anywhere in a row makes the whole row NaN, as on the CPU.
#ifndef GROVE_JIT_KERNELS_SOFTMAX_CUH_
#define GROVE_JIT_KERNELS_SOFTMAX_CUH_

#include "jit/kernels/prelude.cuh"
#include "jit/kernels/reduce_common.cuh"
#include "jit/kernels/softmax_params.h"

namespace grove_k {
namespace rdx {

template <typename A>
struct SoftmaxMax {
  GROVE_DEVICE A combine(A a, A b) const { return b > a ? b : a; }
};

template <typename T>
GROVE_DEVICE void softmax(const SoftmaxParams& p, int mode) {
  typedef typename Acc<T>::type A;
  const T* x = static_cast<const T*>(p.x);
  T* y = static_cast<T*>(p.y);
  const Group g = make_group(mode);
  const i64 n_items = p.outer * p.inner;
  const SoftmaxMax<A> max_op;
  const AddOp<A> add_op;
  for (i64 w = g.first; w < n_items; w += g.step) {
    const i64 oo = w / p.inner, in = w - oo * p.inner;
    const i64 base = oo * p.n * p.inner + in;
    A m = static_cast<A>(-inf_f32());
    for (i64 j = g.lane; j < p.n; j += g.width) m = max_op.combine(m, to_acc<T>(x[base + j * p.inner]));
    m = group_all(max_op, m, g.mode);
    A s = A(0);
    for (i64 j = g.lane; j < p.n; j += g.width) s += g_exp(to_acc<T>(x[base + j * p.inner]) - m);
    s = group_all(add_op, s, g.mode);
    if (p.log) {
      const A log_sum = g_log(s);
      for (i64 j = g.lane; j < p.n; j += g.width) {
        const i64 off = base + j * p.inner;
        y[off] = from_acc<T, A>((to_acc<T>(x[off]) - m) - log_sum);
      }
    } else {
      const A scale = A(1) / s;
      for (i64 j = g.lane; j < p.n; j += g.width) {
        const i64 off = base + j * p.inner;
        y[off] = from_acc<T, A>(g_exp(to_acc<T>(x[off]) - m) * scale);
      }
    }
  }
}

}  // namespace rdx
}  // namespace grove_k

#endif  // GROVE_JIT_KERNELS_SOFTMAX_CUH_

#if defined(GROVE_T0)
#if defined(GROVE_V_LANES)
#define GROVE_ROW_LANES GROVE_V_LANES
#else
#define GROVE_ROW_LANES 0
#endif
GROVE_ENTRY(softmax, grove_k::SoftmaxParams) {
  grove_k::rdx::softmax<GROVE_T0>(p, grove_k::rdx::variant_mode(p.mode, GROVE_ROW_LANES));
}
#undef GROVE_ROW_LANES
#endif
