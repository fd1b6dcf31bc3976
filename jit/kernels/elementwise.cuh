// Elementwise ops over broadcast operands, one module per element type
// (GROVE_T0) covering every op: the op code in the params selects the
// operation (a uniform switch). Semantics follow the CPU kernels
// (lib/backends/cpu/elementwise.cc, math.cc) formula for formula, computing
// in Acc<T> (f32 for f16/bf16): integer arithmetic wraps, integer division
// truncates (MIN / -1 wraps), Min/Max propagate NaN, Pow follows numpy's
// promotion. Also the fused elementwise chain (ew_chain): an interpreted
// program of up to kEwMaxLinks links over up to kEwMaxOperands operands,
// one read per operand and one write per element.
#ifndef GROVE_JIT_KERNELS_ELEMENTWISE_CUH_
#define GROVE_JIT_KERNELS_ELEMENTWISE_CUH_

#include "jit/kernels/cast.cuh"
#include "jit/kernels/elementwise_params.h"
#include "jit/kernels/prelude.cuh"

namespace grove_k {

// Math functions by compute type.
GROVE_DEVICE float m_fabs(float x) { return fabsf(x); }
GROVE_DEVICE double m_fabs(double x) { return fabs(x); }
GROVE_DEVICE float m_exp(float x) { return expf(x); }
GROVE_DEVICE double m_exp(double x) { return exp(x); }
GROVE_DEVICE float m_log(float x) { return logf(x); }
GROVE_DEVICE double m_log(double x) { return log(x); }
GROVE_DEVICE float m_sqrt(float x) { return sqrtf(x); }
GROVE_DEVICE double m_sqrt(double x) { return sqrt(x); }
GROVE_DEVICE float m_tanh(float x) { return tanhf(x); }
GROVE_DEVICE double m_tanh(double x) { return tanh(x); }
GROVE_DEVICE float m_erf(float x) { return erff(x); }
GROVE_DEVICE double m_erf(double x) { return erf(x); }
GROVE_DEVICE float m_erfc(float x) { return erfcf(x); }
GROVE_DEVICE double m_erfc(double x) { return erfc(x); }
GROVE_DEVICE float m_expm1(float x) { return expm1f(x); }
GROVE_DEVICE double m_expm1(double x) { return expm1(x); }
GROVE_DEVICE float m_log1p(float x) { return log1pf(x); }
GROVE_DEVICE double m_log1p(double x) { return log1p(x); }
GROVE_DEVICE float m_sin(float x) { return sinf(x); }
GROVE_DEVICE double m_sin(double x) { return sin(x); }
GROVE_DEVICE float m_cos(float x) { return cosf(x); }
GROVE_DEVICE double m_cos(double x) { return cos(x); }
GROVE_DEVICE float m_tan(float x) { return tanf(x); }
GROVE_DEVICE double m_tan(double x) { return tan(x); }
GROVE_DEVICE float m_asin(float x) { return asinf(x); }
GROVE_DEVICE double m_asin(double x) { return asin(x); }
GROVE_DEVICE float m_acos(float x) { return acosf(x); }
GROVE_DEVICE double m_acos(double x) { return acos(x); }
GROVE_DEVICE float m_atan(float x) { return atanf(x); }
GROVE_DEVICE double m_atan(double x) { return atan(x); }
GROVE_DEVICE float m_sinh(float x) { return sinhf(x); }
GROVE_DEVICE double m_sinh(double x) { return sinh(x); }
GROVE_DEVICE float m_cosh(float x) { return coshf(x); }
GROVE_DEVICE double m_cosh(double x) { return cosh(x); }
GROVE_DEVICE float m_asinh(float x) { return asinhf(x); }
GROVE_DEVICE double m_asinh(double x) { return asinh(x); }
GROVE_DEVICE float m_acosh(float x) { return acoshf(x); }
GROVE_DEVICE double m_acosh(double x) { return acosh(x); }
GROVE_DEVICE float m_atanh(float x) { return atanhf(x); }
GROVE_DEVICE double m_atanh(double x) { return atanh(x); }
GROVE_DEVICE float m_pow(float x, float y) { return powf(x, y); }
GROVE_DEVICE double m_pow(double x, double y) { return pow(x, y); }

template <typename C>
GROVE_DEVICE C wrapping_neg(C x) {
  typedef typename Unsigned<C>::type U;
  return static_cast<C>(static_cast<U>(U(0) - static_cast<U>(x)));
}

// Unary ops (not Clip) of an element of type T, in its compute type.
template <typename T>
GROVE_DEVICE typename Acc<T>::type ew_unary(int op, typename Acc<T>::type x, double fa, double fb) {
  typedef typename Acc<T>::type C;
  if constexpr (Kind<T>::is_float) {
    switch (op) {
      case kEwNeg:
        return -x;
      case kEwAbs:
        return m_fabs(x);
      case kEwExp:
        return m_exp(x);
      case kEwLog:
        return m_log(x);
      case kEwSqrt:
        return m_sqrt(x);
      case kEwReciprocal:
        return C(1) / x;
      case kEwErf:
        return m_erf(x);
      case kEwTanh:
        return m_tanh(x);
      case kEwSigmoid:
        if (x >= C(0)) return C(1) / (C(1) + m_exp(-x));
        {
          const C e = m_exp(x);
          return e / (C(1) + e);
        }
      case kEwRelu:
        return x < C(0) ? C(0) : x;
      case kEwLeakyRelu:
        return x < C(0) ? static_cast<C>(fa) * x : x;
      case kEwElu:
        return x < C(0) ? static_cast<C>(fa) * m_expm1(x) : x;
      case kEwGelu:
        return C(0.5) * x * m_erfc(x * static_cast<C>(-0.7071067811865476));
      case kEwGeluTanh: {
        const C k = static_cast<C>(0.7978845608028654);
        const C z = k * (x + static_cast<C>(0.044715) * x * x * x);
        return x / (C(1) + m_exp(C(-2) * z));
      }
      case kEwHardSigmoid: {
        const C y = static_cast<C>(fa) * x + static_cast<C>(fb);
        return y < C(0) ? C(0) : (y > C(1) ? C(1) : y);
      }
      case kEwHardSwish: {
        const C y = x / C(6) + C(0.5);
        return x * (y < C(0) ? C(0) : (y > C(1) ? C(1) : y));
      }
      case kEwSoftplus:
        return x > C(0) ? x + m_log1p(m_exp(-x)) : m_log1p(m_exp(x));
      case kEwSin:
        return m_sin(x);
      case kEwCos:
        return m_cos(x);
      case kEwTan:
        return m_tan(x);
      case kEwAsin:
        return m_asin(x);
      case kEwAcos:
        return m_acos(x);
      case kEwAtan:
        return m_atan(x);
      case kEwSinh:
        return m_sinh(x);
      case kEwCosh:
        return m_cosh(x);
      case kEwAsinh:
        return m_asinh(x);
      case kEwAcosh:
        return m_acosh(x);
      case kEwAtanh:
        return m_atanh(x);
      case kEwSoftsign:
        if (x - x != C(0) && x == x) return x > C(0) ? C(1) : C(-1);  // +-inf
        return x / (C(1) + m_fabs(x));
      case kEwSelu:
        return static_cast<C>(fb) * (x > C(0) ? x : static_cast<C>(fa) * m_expm1(x));
      case kEwCelu: {
        if (!(x < C(0))) return x;  // NaN passes through
        const C a = static_cast<C>(fa);
        const C y = a * m_expm1(x / a);
        return y < C(0) ? y : C(0);
      }
      case kEwThresholdedRelu:
        return x > static_cast<C>(fa) ? x : C(0);
      default:
        return x;
    }
  } else if constexpr (Kind<T>::is_int) {
    switch (op) {
      case kEwNeg:
        return wrapping_neg(x);
      case kEwAbs:
        if constexpr (Kind<T>::is_signed) {
          return x < 0 ? wrapping_neg(x) : x;
        } else {
          return x;
        }
      case kEwErf:
        return saturating_truncate<C>(erf(static_cast<double>(x)));
      default:
        return x;
    }
  } else {
    return op == kEwNot ? !x : x;
  }
}

// Binary arithmetic and the variadic folds (Sum/Mean add; Mean divides
// afterwards). Integer divisors were checked non-zero on the host.
template <typename T>
GROVE_DEVICE typename Acc<T>::type ew_arith(int op, typename Acc<T>::type a, typename Acc<T>::type b) {
  typedef typename Acc<T>::type C;
  if constexpr (Kind<T>::is_float) {
    switch (op) {
      case kEwAdd:
      case kEwSum:
      case kEwMean:
        return a + b;
      case kEwSub:
        return a - b;
      case kEwMul:
        return a * b;
      case kEwDiv:
        return a / b;
      case kEwMin:
        if (a != a) return a;
        if (b != b) return b;
        return b < a ? b : a;
      case kEwMax:
        if (a != a) return a;
        if (b != b) return b;
        return b > a ? b : a;
      default:
        return a;
    }
  } else if constexpr (Kind<T>::is_int) {
    typedef typename Unsigned<C>::type U;
    switch (op) {
      case kEwAdd:
      case kEwSum:
      case kEwMean:
        return static_cast<C>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
      case kEwSub:
        return static_cast<C>(static_cast<U>(static_cast<U>(a) - static_cast<U>(b)));
      case kEwMul:
        return static_cast<C>(static_cast<U>(static_cast<U>(a) * static_cast<U>(b)));
      case kEwDiv:
        if constexpr (Kind<T>::is_signed) {
          if (b == C(-1)) return wrapping_neg(a);
        }
        return b == C(0) ? C(0) : static_cast<C>(a / b);
      case kEwMin:
        return b < a ? b : a;
      case kEwMax:
        return b > a ? b : a;
      default:
        return a;
    }
  } else {
    return a;
  }
}

// Integer base to an integer exponent, exactly (wrapping); a negative
// exponent truncates the real result (see IntegerPow on the CPU).
template <typename C>
GROVE_DEVICE C integer_pow(C base, i64 exponent) {
  if (exponent < 0) return saturating_truncate<C>(pow(static_cast<double>(base), static_cast<double>(exponent)));
  typedef typename Unsigned<C>::type U;
  U result = 1;
  U b = static_cast<U>(base);
  for (u64 e = static_cast<u64>(exponent); e != 0; e >>= 1) {
    if (e & 1u) result = static_cast<U>(result * b);
    b = static_cast<U>(b * b);
  }
  return static_cast<C>(result);
}

// Pow with an exponent of element type E (numpy promotion, as PowElement on
// the CPU; an exponent of 2 gives x * x as the CPU's fast path does).
template <typename T, typename E>
GROVE_DEVICE typename Acc<T>::type ew_pow_as(typename Acc<T>::type b, const void* exponent, i64 off) {
  typedef typename Acc<T>::type C;
  typedef typename Acc<E>::type CE;
  const CE e = load<E>(exponent, off);
  if constexpr (Kind<T>::is_float) {
    if (static_cast<double>(e) == 2.0) return b * b;
    if constexpr (sizeof(CE) == 8 && Kind<E>::is_float) {
      return static_cast<C>(m_pow(static_cast<double>(b), static_cast<double>(e)));
    } else {
      return m_pow(b, static_cast<C>(e));
    }
  } else if constexpr (Kind<T>::is_int && Kind<E>::is_int) {
    return integer_pow<C>(b, static_cast<i64>(e));
  } else if constexpr (Kind<T>::is_int && Kind<E>::is_float) {
    return saturating_truncate<C>(pow(static_cast<double>(b), static_cast<double>(e)));
  } else {
    return b;
  }
}

template <typename T>
GROVE_DEVICE typename Acc<T>::type ew_pow(typename Acc<T>::type b, const void* e, i64 off, int exp_dtype) {
  switch (exp_dtype) {
    case kEwF32:
      return ew_pow_as<T, float>(b, e, off);
    case kEwF64:
      return ew_pow_as<T, double>(b, e, off);
    case kEwF16:
      return ew_pow_as<T, f16>(b, e, off);
    case kEwBF16:
      return ew_pow_as<T, bf16>(b, e, off);
    case kEwI64:
      return ew_pow_as<T, i64>(b, e, off);
    case kEwI32:
      return ew_pow_as<T, i32>(b, e, off);
    case kEwI8:
      return ew_pow_as<T, i8>(b, e, off);
    case kEwU8:
      return ew_pow_as<T, u8>(b, e, off);
    default:
      return b;
  }
}

template <typename C>
GROVE_DEVICE bool ew_compare(int op, C a, C b) {
  switch (op) {
    case kEwEqual:
      return a == b;
    case kEwGreater:
      return a > b;
    case kEwLess:
      return a < b;
    case kEwGreaterOrEqual:
      return a >= b;
    case kEwLessOrEqual:
      return a <= b;
    case kEwAnd:
      return a && b;
    case kEwOr:
      return a || b;
    case kEwXor:
      return a != b;
    default:
      return false;
  }
}

GROVE_DEVICE i64 ew_offset(int mode, i64 i, const Dims& shape, const Strides& strides) {
  return mode == kEwContiguous ? i : (mode == kEwScalar ? 0 : offset_of(i, shape, strides));
}

// Vector width (a variant's GROVE_V_VEC, cast.cuh's ElemVec): taken for a
// same-typed op (ew_same_typed_op; every fused chain is) when its operands
// allow it. The conditions on the operands (both params kinds): no strided
// operand, the output and every contiguous operand aligned to the vector.
template <typename T, int VEC, typename P>
GROVE_DEVICE bool ew_vector_operands(const P& p) {
  if (!p.simple || p.n < VEC) return false;
  const int bytes = static_cast<int>(sizeof(typename Raw<T>::type));
  if (!vec_aligned<VEC>(p.out, bytes)) return false;
  for (int k = 0; k < p.num_inputs; ++k) {
    if (p.mode[k] == kEwScalar) continue;
    if (p.mode[k] != kEwContiguous || !vec_aligned<VEC>(p.in[k], bytes)) return false;
  }
  return true;
}

// Ops whose operands and result are all T with no accumulator: the unary
// ops and Clip, and arithmetic other than Pow (its exponent has a dtype of
// its own) outside a variadic op's chunks; not comparisons or Where.
GROVE_DEVICE bool ew_same_typed_op(const EwParams& p, bool is_bool) {
  if (p.op <= kEwLastUnary) return true;
  return !is_bool && p.op <= kEwLastArithmetic && p.op != kEwPow && !p.acc_in && !p.acc_out;
}

// Element value of a same-typed op from its operands' values `x`.
template <typename T>
GROVE_DEVICE typename Acc<T>::type ew_same_typed(const EwParams& p, const typename Acc<T>::type* x) {
  typedef typename Acc<T>::type C;
  const int op = p.op;
  if (op <= kEwLastUnary) {
    C v = x[0];
    if (op == kEwClip) {
      if constexpr (!Kind<T>::is_bool) {
        const C lo = Kind<T>::is_float ? static_cast<C>(p.fa) : static_cast<C>(p.ia);
        const C hi = Kind<T>::is_float ? static_cast<C>(p.fb) : static_cast<C>(p.ib);
        if (p.has_lo && v < lo) v = lo;
        if (p.has_hi && v > hi) v = hi;
      }
      return v;
    }
    return ew_unary<T>(op, v, p.fa, p.fb);
  }
  if constexpr (Kind<T>::is_bool) {
    return x[0];
  } else {
    C a = x[0];
    for (int k = 1; k < p.num_inputs; ++k) a = ew_arith<T>(op, a, x[k]);
    if (p.mean_count > 0) a = a / static_cast<C>(p.mean_count);
    return a;
  }
}

// The vector loop of a same-typed op (both params kinds) whose element
// value `value` computes from its operands' values, then its tail.
template <typename T, int VEC, typename P, typename F>
GROVE_DEVICE void ew_vector(const P& p, const F& value) {
  typedef typename Acc<T>::type C;
  typedef ElemVec<typename Raw<T>::type, VEC> V;
  const i64 step = grid_threads();
  const i64 vectors = p.n / VEC;
  for (i64 v = global_thread(); v < vectors; v += step) {
    V in[kEwMaxOperands];
    for (int k = 0; k < p.num_inputs; ++k) {
      if (p.mode[k] != kEwScalar) in[k] = static_cast<const V*>(p.in[k])[v];
    }
    V out;
    for (int u = 0; u < VEC; ++u) {
      C x[kEwMaxOperands];
      for (int k = 0; k < p.num_inputs; ++k) x[k] = p.mode[k] == kEwScalar ? load<T>(p.in[k], 0) : vec_lane<T>(in[k].v[u]);
      out.v[u] = vec_unlane<T>(value(x));
    }
    static_cast<V*>(p.out)[v] = out;
  }
  for (i64 i = vectors * VEC + global_thread(); i < p.n; i += step) {
    C x[kEwMaxOperands];
    for (int k = 0; k < p.num_inputs; ++k) x[k] = load<T>(p.in[k], p.mode[k] == kEwScalar ? 0 : i);
    store<T>(p.out, i, value(x));
  }
}

// IPT (a variant's GROVE_V_IPT, 1 without one): items a thread runs per
// trip of its grid-stride loop, i, i + step, ... i + (IPT - 1) * step; the
// same items as IPT trips of the plain loop, so the same result.
template <typename T, int IPT, int VEC>
GROVE_DEVICE void ew(const EwParams& p) {
  typedef typename Acc<T>::type C;
  if constexpr (VEC > 1) {
    if (ew_same_typed_op(p, Kind<T>::is_bool) && ew_vector_operands<T, VEC>(p)) {
      ew_vector<T, VEC>(p, [&p](const C* x) { return ew_same_typed<T>(p, x); });
      return;
    }
  }
  const i64 step = grid_threads();
  const int op = p.op;
  for (i64 base = global_thread(); base < p.n; base += step * IPT)
  for (int u = 0; u < IPT; ++u) {
    const i64 i = base + u * step;
    if (i >= p.n) break;
    i64 off[kEwMaxOperands];
    for (int k = 0; k < p.num_inputs; ++k) off[k] = p.simple ? (p.mode[k] == kEwScalar ? 0 : i) : ew_offset(p.mode[k], i, p.shape, p.strides[k]);
    if (op <= kEwLastUnary) {
      const C x = load<T>(p.in[0], off[0]);
      store<T>(p.out, i, ew_same_typed<T>(p, &x));
    } else if (op == kEwPow) {
      store<T>(p.out, i, ew_pow<T>(load<T>(p.in[0], off[0]), p.in[1], off[1], p.exp_dtype));
    } else if (op <= kEwLastArithmetic) {
      if constexpr (!Kind<T>::is_bool) {
        int k = 0;
        C a;
        if (p.acc_in) {
          a = static_cast<const C*>(p.acc)[i];
        } else {
          a = load<T>(p.in[0], off[0]);
          k = 1;
        }
        for (; k < p.num_inputs; ++k) a = ew_arith<T>(op, a, load<T>(p.in[k], off[k]));
        if (p.acc_out) {
          static_cast<C*>(p.acc)[i] = a;
        } else {
          if (p.mean_count > 0) a = a / static_cast<C>(p.mean_count);
          store<T>(p.out, i, a);
        }
      }
    } else if (op <= kEwXor) {
      store<bool>(p.out, i, ew_compare<C>(op, load<T>(p.in[0], off[0]), load<T>(p.in[1], off[1])));
    } else if (op == kEwWhere) {
      typedef typename Raw<T>::type R;
      const bool c = load<bool>(p.in[0], off[0]);
      static_cast<R*>(p.out)[i] = c ? static_cast<const R*>(p.in[1])[off[1]] : static_cast<const R*>(p.in[2])[off[2]];
    }
  }
}

// The fused chain's program on one element's operand values.
template <typename T>
GROVE_DEVICE typename Acc<T>::type ew_chain_value(const EwChainParams& p, const typename Acc<T>::type* vals) {
  typedef typename Acc<T>::type C;
  C v = C(0);
  for (int l = 0; l < p.num_links; ++l) {
    const EwLink& link = p.links[l];
    const C a = link.src[0] == kEwPrev ? v : vals[link.src[0]];
    const int op = link.op;
    if (op == kEwClip) {
      C x = a;
      if (link.src[1] != kEwNone) {
        const C lo = link.src[1] == kEwPrev ? v : vals[link.src[1]];
        if (x < lo) x = lo;
      }
      if (link.src[2] != kEwNone) {
        const C hi = link.src[2] == kEwPrev ? v : vals[link.src[2]];
        if (x > hi) x = hi;
      }
      v = x;
    } else if (op <= kEwLastUnary) {
      v = ew_unary<T>(op, a, link.fa, link.fb);
    } else {
      const C b = link.src[1] == kEwPrev ? v : vals[link.src[1]];
      if (op == kEwPow) {
        if (b == C(2)) {
          v = a * a;
        } else {
          v = m_pow(a, b);
        }
      } else if (op == kEwMean) {
        v = (a + b) / C(2);
      } else {
        v = ew_arith<T>(op, a, b);
      }
    }
  }
  return v;
}

// The fused chain, for float T: operands are read once each, the links
// compute in Acc<T> without rounding between them. VEC as for ew (every
// chain is same-typed).
template <typename T, int IPT, int VEC>
GROVE_DEVICE void ew_chain(const EwChainParams& p) {
  typedef typename Acc<T>::type C;
  if constexpr (Kind<T>::is_float) {
    const i64 step = grid_threads();
    if constexpr (VEC > 1) {
      if (ew_vector_operands<T, VEC>(p)) {
        ew_vector<T, VEC>(p, [&p](const C* x) { return ew_chain_value<T>(p, x); });
        return;
      }
    }
    for (i64 base = global_thread(); base < p.n; base += step * IPT)
    for (int u = 0; u < IPT; ++u) {
      const i64 i = base + u * step;
      if (i >= p.n) break;
      C vals[kEwMaxOperands];
      for (int k = 0; k < p.num_inputs; ++k) {
        const i64 o = p.simple ? (p.mode[k] == kEwScalar ? 0 : i) : ew_offset(p.mode[k], i, p.shape, p.strides[k]);
        vals[k] = load<T>(p.in[k], o);
      }
      store<T>(p.out, i, ew_chain_value<T>(p, vals));
    }
  }
}

}  // namespace grove_k

#endif  // GROVE_JIT_KERNELS_ELEMENTWISE_CUH_

#if defined(GROVE_T0) && !defined(GROVE_T1)
#if defined(GROVE_V_IPT)
#define GROVE_EW_IPT GROVE_V_IPT
#else
#define GROVE_EW_IPT 1
#endif
#if defined(GROVE_V_VEC)
#define GROVE_EW_VEC GROVE_V_VEC
#else
#define GROVE_EW_VEC 1
#endif
GROVE_ENTRY(ew, grove_k::EwParams) { grove_k::ew<GROVE_T0, GROVE_EW_IPT, GROVE_EW_VEC>(p); }
GROVE_ENTRY(ew_chain, grove_k::EwChainParams) { grove_k::ew_chain<GROVE_T0, GROVE_EW_IPT, GROVE_EW_VEC>(p); }
#undef GROVE_EW_IPT
#undef GROVE_EW_VEC
#endif
