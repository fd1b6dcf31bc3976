// Reduce* (sum, mean, max, min, prod, L1, L2, sum of squares, log-sum,
// log-sum-exp), ArgMax/ArgMin and CumSum. Semantics follow the CPU kernels
// (lib/backends/cpu/reduction.cc, reduce_search.cc): an empty reduction gives
// the identity (0, 1, -inf/lowest for max, +inf/highest for min, NaN for a
// mean, -inf for the logs); NaN wins max, min, ArgMax and ArgMin; integer
// sums and products wrap in 64 bits before the cast back.
#ifndef GROVE_JIT_KERNELS_REDUCE_CUH_
#define GROVE_JIT_KERNELS_REDUCE_CUH_

#include "jit/kernels/prelude.cuh"
#include "jit/kernels/reduce_common.cuh"
#include "jit/kernels/reduce_params.h"

namespace grove_k {
namespace rdx {

// Each reduction: accumulator type A, init, fold of one element, combine of
// two partial accumulators, and the output element.
template <typename T>
struct SumR {
  typedef typename Tr<T>::Sum A;
  GROVE_DEVICE A init() const { return A(0); }
  GROVE_DEVICE A fold(A a, T x) const { return a + static_cast<A>(to_c(x)); }
  GROVE_DEVICE A combine(A a, A b) const { return a + b; }
  GROVE_DEVICE T finish(A a, i64) const { return from_acc<T, A>(a); }
};
template <typename T>
struct MeanR : SumR<T> {
  typedef typename Tr<T>::Sum A;
  // 0/0 is NaN for an empty reduction (floats only: the host refuses ints).
  GROVE_DEVICE T finish(A a, i64 count) const { return from_acc<T, A>(a / static_cast<A>(count)); }
};
template <typename T>
struct MaxR {
  typedef typename Tr<T>::C A;
  GROVE_DEVICE A init() const { return Tr<T>::lowest(); }
  GROVE_DEVICE A combine(A a, A b) const {
    if (is_nan(a)) return a;
    if (is_nan(b)) return b;
    return b > a ? b : a;
  }
  GROVE_DEVICE A fold(A a, T x) const { return combine(a, to_c(x)); }
  GROVE_DEVICE T finish(A a, i64) const { return from_acc<T, A>(a); }
};
template <typename T>
struct MinR {
  typedef typename Tr<T>::C A;
  GROVE_DEVICE A init() const { return Tr<T>::highest(); }
  GROVE_DEVICE A combine(A a, A b) const {
    if (is_nan(a)) return a;
    if (is_nan(b)) return b;
    return b < a ? b : a;
  }
  GROVE_DEVICE A fold(A a, T x) const { return combine(a, to_c(x)); }
  GROVE_DEVICE T finish(A a, i64) const { return from_acc<T, A>(a); }
};
template <typename T>
struct ProdR {
  typedef typename Tr<T>::Sum A;
  GROVE_DEVICE A init() const { return A(1); }
  GROVE_DEVICE A fold(A a, T x) const { return a * static_cast<A>(to_c(x)); }
  GROVE_DEVICE A combine(A a, A b) const { return a * b; }
  GROVE_DEVICE T finish(A a, i64) const { return from_acc<T, A>(a); }
};
template <typename T>
struct L1R : SumR<T> {
  typedef typename Tr<T>::Sum A;
  // |x|; for integers |MIN| wraps to MIN, as Abs gives.
  GROVE_DEVICE A fold(A a, T x) const {
    const typename Tr<T>::C c = to_c(x);
    const A v = static_cast<A>(c);
    return a + (c < 0 ? A(0) - v : v);
  }
};
template <typename T>
struct SumSquareR : SumR<T> {
  typedef typename Tr<T>::Sum A;
  GROVE_DEVICE A fold(A a, T x) const {
    const A v = static_cast<A>(to_c(x));
    return a + v * v;
  }
};
template <typename T>
struct L2R {
  typedef typename Tr<T>::Real A;
  GROVE_DEVICE A init() const { return A(0); }
  GROVE_DEVICE A fold(A a, T x) const {
    const A v = static_cast<A>(to_c(x));
    return a + v * v;
  }
  GROVE_DEVICE A combine(A a, A b) const { return a + b; }
  GROVE_DEVICE T finish(A a, i64) const { return from_real<T>(g_sqrt(a)); }
};
template <typename T>
struct LogSumR {
  typedef typename Tr<T>::Real A;
  GROVE_DEVICE A init() const { return A(0); }
  GROVE_DEVICE A fold(A a, T x) const { return a + static_cast<A>(to_c(x)); }
  GROVE_DEVICE A combine(A a, A b) const { return a + b; }
  GROVE_DEVICE T finish(A a, i64) const { return from_real<T>(g_log(a)); }
};
// Sum of exp(x - shift), the second pass of log-sum-exp.
template <typename T>
struct ExpSumR {
  typedef typename Tr<T>::Real A;
  A shift;
  GROVE_DEVICE A init() const { return A(0); }
  GROVE_DEVICE A fold(A a, T x) const { return a + g_exp(static_cast<A>(to_c(x)) - shift); }
  GROVE_DEVICE A combine(A a, A b) const { return a + b; }
};
// Marker: log(sum(exp(x))) as max + log(sum(exp(x - max))).
template <typename T>
struct LogSumExpR {};

GROVE_DEVICE i64 red_offset(const ReduceParams& p, i64 r) {
  return p.red.rank == 1 ? r * p.red_strides.s[0] : offset_of(r, p.red, p.red_strides);
}

// Folds this lane's share of one output element's inputs.
template <typename T, typename Op>
GROVE_DEVICE typename Op::A fold_part(const Op& op, const ReduceParams& p, const T* x, i64 base, const Group& g) {
  typename Op::A a = op.init();
  for (i64 r = g.lane; r < p.count; r += g.width) a = op.fold(a, x[base + red_offset(p, r)]);
  return a;
}

// One output element, from every lane of the group.
template <typename T, typename Op>
struct OneOutput {
  static GROVE_DEVICE T run(const ReduceParams& p, const T* x, i64 base, const Group& g) {
    Op op;
    const typename Op::A a = group_all(op, fold_part(op, p, x, base, g), g.mode);
    return op.finish(a, p.count);
  }
};
template <typename T>
struct OneOutput<T, LogSumExpR<T> > {
  static GROVE_DEVICE T run(const ReduceParams& p, const T* x, i64 base, const Group& g) {
    typedef typename Tr<T>::Real R;
    MaxR<T> mop;
    const R m = static_cast<R>(group_all(mop, fold_part(mop, p, x, base, g), g.mode));
    // An infinite or NaN max is the result itself (exp(inf - inf) is NaN).
    ExpSumR<T> eop;
    eop.shift = is_finite(m) ? m : R(0);
    const R s = group_all(eop, fold_part(eop, p, x, base, g), g.mode);
    return from_real<T>(is_finite(m) ? m + g_log(s) : m);
  }
};

template <typename T, typename Op>
GROVE_DEVICE void reduce(const ReduceParams& p, int mode) {
  const T* x = static_cast<const T*>(p.x);
  T* y = static_cast<T*>(p.y);
  const Group g = make_group(mode);
  for (i64 o = g.first; o < p.n_out; o += g.step) {
    const i64 base = offset_of(o, p.kept, p.kept_strides);
    const T v = OneOutput<T, Op>::run(p, x, base, g);
    if (g.lane == 0) y[o] = v;
  }
}

// ---------------------------------------------------------------------------
// ArgMax / ArgMin
// ---------------------------------------------------------------------------

// a ranks above b for kMax (NaN above everything), below b for a minimum
// (NaN below everything).
template <int kMax, typename C>
GROVE_DEVICE bool ranks_before(C a, C b) {
  if (is_nan(a)) return !is_nan(b);
  if (is_nan(b)) return false;
  return kMax ? a > b : a < b;
}

// Whether candidate (bv, bi) replaces the best (av, ai); index -1 is "none".
// Ties go to the smaller index, or the larger with select_last_index.
template <int kMax, typename C>
GROVE_DEVICE bool arg_takes(C av, i64 ai, C bv, i64 bi, int last) {
  if (bi < 0) return false;
  if (ai < 0) return true;
  if (ranks_before<kMax>(bv, av)) return true;
  if (ranks_before<kMax>(av, bv)) return false;
  return last ? bi > ai : bi < ai;
}

template <typename T, int kMax>
GROVE_DEVICE void arg_reduce(const ArgReduceParams& p, int mode) {
  typedef typename Tr<T>::C C;
  __shared__ C best_v[32];
  __shared__ i64 best_i[32];
  const T* x = static_cast<const T*>(p.x);
  i64* y = static_cast<i64*>(p.y);
  const Group g = make_group(mode);
  const i64 n_out = p.outer * p.inner;
  for (i64 o = g.first; o < n_out; o += g.step) {
    const i64 oo = o / p.inner, in = o - oo * p.inner;
    const T* col = x + oo * p.n * p.inner + in;
    C bv = Tr<T>::lowest();
    i64 bi = -1;
    for (i64 j = g.lane; j < p.n; j += g.width) {
      const C v = to_c(col[j * p.inner]);
      if (arg_takes<kMax>(bv, bi, v, j, p.select_last)) {
        bv = v;
        bi = j;
      }
    }
    if (g.mode != 0) {
      for (int s = 16; s > 0; s >>= 1) {
        const C ov = __shfl_xor_sync(0xffffffffu, bv, s);
        const i64 oi = __shfl_xor_sync(0xffffffffu, bi, s);
        if (arg_takes<kMax>(bv, bi, ov, oi, p.select_last)) {
          bv = ov;
          bi = oi;
        }
      }
    }
    if (g.mode == 2) {
      if (threadIdx.x % 32 == 0) {
        best_v[threadIdx.x / 32] = bv;
        best_i[threadIdx.x / 32] = bi;
      }
      __syncthreads();
      const int warps = static_cast<int>((blockDim.x + 31) / 32);
      bv = best_v[0];
      bi = best_i[0];
      for (int w = 1; w < warps; ++w) {
        if (arg_takes<kMax>(bv, bi, best_v[w], best_i[w], p.select_last)) {
          bv = best_v[w];
          bi = best_i[w];
        }
      }
      __syncthreads();
    }
    if (g.lane == 0) y[o] = bi;
  }
}

// ---------------------------------------------------------------------------
// CumSum
// ---------------------------------------------------------------------------

template <typename T>
GROVE_DEVICE void cumsum(const CumSumParams& p) {
  typedef typename Tr<T>::Sum A;
  const T* x = static_cast<const T*>(p.x);
  T* y = static_cast<T*>(p.y);
  const i64 cols = p.outer * p.inner;
  for (i64 c = global_thread(); c < cols; c += grid_threads()) {
    const i64 oo = c / p.inner, in = c - oo * p.inner;
    const i64 base = oo * p.n * p.inner + in;
    A run = A(0);
    for (i64 step = 0; step < p.n; ++step) {
      const i64 j = p.reverse ? p.n - 1 - step : step;
      const i64 off = base + j * p.inner;
      const A v = static_cast<A>(to_c(x[off]));
      if (p.exclusive) {
        y[off] = from_acc<T, A>(run);
        run += v;
      } else {
        run += v;
        y[off] = from_acc<T, A>(run);
      }
    }
  }
}

}  // namespace rdx
}  // namespace grove_k

#define GROVE_REDUCE_ENTRY(name, Op)                                                              \
  GROVE_ENTRY(reduce_##name, grove_k::ReduceParams) {                                              \
    grove_k::rdx::reduce<GROVE_T0, grove_k::rdx::Op<GROVE_T0> >(                                  \
        p, grove_k::rdx::variant_mode(p.mode, GROVE_ROW_LANES));                                   \
  }

#endif  // GROVE_JIT_KERNELS_REDUCE_CUH_

#if defined(GROVE_T0)
#if defined(GROVE_V_LANES)
#define GROVE_ROW_LANES GROVE_V_LANES
#else
#define GROVE_ROW_LANES 0
#endif
GROVE_REDUCE_ENTRY(sum, SumR)
GROVE_REDUCE_ENTRY(mean, MeanR)
GROVE_REDUCE_ENTRY(max, MaxR)
GROVE_REDUCE_ENTRY(min, MinR)
GROVE_REDUCE_ENTRY(prod, ProdR)
GROVE_REDUCE_ENTRY(l1, L1R)
GROVE_REDUCE_ENTRY(l2, L2R)
GROVE_REDUCE_ENTRY(sum_square, SumSquareR)
GROVE_REDUCE_ENTRY(log_sum, LogSumR)
GROVE_REDUCE_ENTRY(log_sum_exp, LogSumExpR)
GROVE_ENTRY(reduce_argmax, grove_k::ArgReduceParams) {
  grove_k::rdx::arg_reduce<GROVE_T0, 1>(p, grove_k::rdx::variant_mode(p.mode, GROVE_ROW_LANES));
}
GROVE_ENTRY(reduce_argmin, grove_k::ArgReduceParams) {
  grove_k::rdx::arg_reduce<GROVE_T0, 0>(p, grove_k::rdx::variant_mode(p.mode, GROVE_ROW_LANES));
}
GROVE_ENTRY(reduce_cumsum, grove_k::CumSumParams) { grove_k::rdx::cumsum<GROVE_T0>(p); }
#undef GROVE_ROW_LANES
#endif
