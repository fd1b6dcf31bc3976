// ONNX Cast between any two element types (GROVE_T0 -> GROVE_T1), converting
// exactly as the CPU backend (lib/ir/element_types.h,
// ConvertElement): to bool is != 0; float to integer truncates toward zero,
// NaN giving 0 and out-of-range values saturating; integer to integer wraps;
// to f16/bf16 rounds to nearest even, from f64 and integers through a
// round-to-odd float so that the result is one correct rounding.
//
// Variants (family "cast", jit/kernel_config.h): threads a block and vec,
// the elements a thread converts per vector access (ElemVec).
//
// Also the element helpers the elementwise kernels share (type kinds, loads
// and stores in the compute type, saturating truncation, vectors of
// elements): elementwise.cuh includes this file (its modules define no
// GROVE_T1, so no cast entry).
#ifndef GROVE_JIT_KERNELS_CAST_CUH_
#define GROVE_JIT_KERNELS_CAST_CUH_

#include "jit/kernels/cast_params.h"
#include "jit/kernels/prelude.cuh"

namespace grove_k {

// What kind of element a storage type is.
template <typename T>
struct Kind {
  static constexpr bool is_float = false, is_int = false, is_signed = false, is_bool = false;
};
template <>
struct Kind<float> {
  static constexpr bool is_float = true, is_int = false, is_signed = true, is_bool = false;
};
template <>
struct Kind<double> {
  static constexpr bool is_float = true, is_int = false, is_signed = true, is_bool = false;
};
template <>
struct Kind<f16> {
  static constexpr bool is_float = true, is_int = false, is_signed = true, is_bool = false;
};
template <>
struct Kind<bf16> {
  static constexpr bool is_float = true, is_int = false, is_signed = true, is_bool = false;
};
template <>
struct Kind<i64> {
  static constexpr bool is_float = false, is_int = true, is_signed = true, is_bool = false;
};
template <>
struct Kind<i32> {
  static constexpr bool is_float = false, is_int = true, is_signed = true, is_bool = false;
};
template <>
struct Kind<i8> {
  static constexpr bool is_float = false, is_int = true, is_signed = true, is_bool = false;
};
template <>
struct Kind<u8> {
  static constexpr bool is_float = false, is_int = true, is_signed = false, is_bool = false;
};
template <>
struct Kind<bool> {
  static constexpr bool is_float = false, is_int = false, is_signed = false, is_bool = true;
};

template <typename T>
struct Unsigned {
  typedef T type;
};
template <>
struct Unsigned<i64> {
  typedef u64 type;
};
template <>
struct Unsigned<i32> {
  typedef u32 type;
};
template <>
struct Unsigned<i8> {
  typedef u8 type;
};

// Integer ranges; lo and hi (exclusive) are powers of two, exact in any
// float type.
template <typename I>
struct IntRange;
template <>
struct IntRange<i64> {
  static constexpr double lo = -9223372036854775808.0, hi = 9223372036854775808.0;
  static constexpr i64 min = -0x7fffffffffffffffLL - 1, max = 0x7fffffffffffffffLL;
};
template <>
struct IntRange<i32> {
  static constexpr double lo = -2147483648.0, hi = 2147483648.0;
  static constexpr i32 min = -0x7fffffff - 1, max = 0x7fffffff;
};
template <>
struct IntRange<i8> {
  static constexpr double lo = -128.0, hi = 128.0;
  static constexpr i8 min = -128, max = 127;
};
template <>
struct IntRange<u8> {
  static constexpr double lo = 0.0, hi = 256.0;
  static constexpr u8 min = 0, max = 255;
};

// Float -> integer: truncates toward zero; NaN gives 0, out of range
// saturates (as the CPU's SaturatingTruncate).
template <typename I, typename F>
GROVE_DEVICE I saturating_truncate(F x) {
  if (x != x) return 0;
  const F lo = static_cast<F>(IntRange<I>::lo);
  const F hi = static_cast<F>(IntRange<I>::hi);
  if (x < lo) return IntRange<I>::min;
  if (x >= hi) return IntRange<I>::max;
  return static_cast<I>(x);
}

// double -> float rounded to odd (see DoubleToFloatRoundToOdd on the CPU).
GROVE_DEVICE float double_to_float_round_to_odd(double d) {
  const float f = static_cast<float>(d);
  if (d != d || static_cast<double>(f) == d) return f;
  u32 bits = static_cast<u32>(__float_as_int(f));
  if (fabs(static_cast<double>(f)) > fabs(d)) bits -= 1u;  // one step toward zero
  return __int_as_float(static_cast<int>(bits | 1u));
}

// Element loads and stores in the compute type. A bool element is a byte
// that may hold anything: non-zero is true.
template <typename T>
GROVE_DEVICE typename Acc<T>::type load(const void* p, i64 i) {
  return to_acc<T>(static_cast<const T*>(p)[i]);
}
template <>
GROVE_DEVICE bool load<bool>(const void* p, i64 i) {
  return static_cast<const u8*>(p)[i] != 0;
}
template <typename T>
GROVE_DEVICE void store(void* p, i64 i, typename Acc<T>::type v) {
  static_cast<T*>(p)[i] = from_acc<T, typename Acc<T>::type>(v);
}
template <>
GROVE_DEVICE void store<bool>(void* p, i64 i, bool v) {
  static_cast<u8*>(p)[i] = v ? 1 : 0;
}

template <typename T>
struct IsF32Acc {
  static constexpr bool value = false;
};
template <>
struct IsF32Acc<float> {
  static constexpr bool value = true;
};
template <>
struct IsF32Acc<f16> {
  static constexpr bool value = true;
};
template <>
struct IsF32Acc<bf16> {
  static constexpr bool value = true;
};

// One value of compute type Acc<S> converted to Acc<D> (then stored as D).
template <typename D, typename S>
GROVE_DEVICE typename Acc<D>::type convert(typename Acc<S>::type x) {
  typedef typename Acc<D>::type CD;
  if constexpr (Kind<D>::is_bool) {
    return x != 0;
  } else if constexpr (IsF32Acc<D>::value && sizeof(D) == 2) {
    // f16, bf16: f32 sources round once; f64 and integers through round-to-odd.
    if constexpr (IsF32Acc<S>::value) {
      return static_cast<float>(x);
    } else {
      return double_to_float_round_to_odd(static_cast<double>(x));
    }
  } else if constexpr (Kind<D>::is_float) {
    return static_cast<CD>(x);
  } else if constexpr (Kind<S>::is_float) {
    return saturating_truncate<D>(x);
  } else {
    return static_cast<CD>(x);
  }
}

// Where moves elements without converting them (bool as its byte).
template <typename T>
struct Raw {
  typedef T type;
};
template <>
struct Raw<bool> {
  typedef u8 type;
};

// Vector width (a variant's GROVE_V_VEC, 1 without one): a thread moves VEC
// consecutive elements of an operand with one aligned access, a struct of
// VEC elements aligned to its size (NVRTC loads and stores it with one
// ld/st.global.v2 or .v4 up to 16 bytes). The kernels take it where it
// gives the scalar loop's result element for element and every pointer it
// reads or writes is aligned to its vector, else they run the scalar loop
// on the same grid; elements past the last whole vector (the tail) run one
// by one.
template <typename R, int VEC>
struct alignas(sizeof(R) * VEC) ElemVec {
  R v[VEC];
};

// An element of a vector in the compute type, and back (load and store's
// conversions on the raw element).
template <typename T>
GROVE_DEVICE typename Acc<T>::type vec_lane(typename Raw<T>::type r) {
  if constexpr (Kind<T>::is_bool) {
    return r != 0;
  } else {
    return to_acc<T>(r);
  }
}
template <typename T>
GROVE_DEVICE typename Raw<T>::type vec_unlane(typename Acc<T>::type v) {
  if constexpr (Kind<T>::is_bool) {
    return v ? 1 : 0;
  } else {
    return from_acc<T, typename Acc<T>::type>(v);
  }
}

template <int VEC>
GROVE_DEVICE bool vec_aligned(const void* p, int elem_bytes) {
  return reinterpret_cast<u64>(p) % static_cast<u64>(elem_bytes * VEC) == 0;
}

// Elements [first + the thread's index, n), grid-stride.
template <typename S, typename D>
GROVE_DEVICE void cast_elements(const CastParams& p, i64 first) {
  const i64 step = grid_threads();
  for (i64 i = first + global_thread(); i < p.n; i += step) store<D>(p.out, i, convert<D, S>(load<S>(p.in, i)));
}

// The vector loop: VEC elements of S read as one vector, converted one by
// one, written as one vector of D; then the tail. False (nothing done)
// below one vector or where the input or the output is not aligned to its
// vector.
template <typename S, typename D, int VEC>
GROVE_DEVICE bool cast_vector(const CastParams& p) {
  typedef ElemVec<typename Raw<S>::type, VEC> VS;
  typedef ElemVec<typename Raw<D>::type, VEC> VD;
  if (p.n < VEC || !vec_aligned<VEC>(p.in, static_cast<int>(sizeof(typename Raw<S>::type))) ||
      !vec_aligned<VEC>(p.out, static_cast<int>(sizeof(typename Raw<D>::type)))) {
    return false;
  }
  const i64 step = grid_threads();
  const i64 vectors = p.n / VEC;
  for (i64 v = global_thread(); v < vectors; v += step) {
    const VS in = static_cast<const VS*>(p.in)[v];
    VD out;
    for (int u = 0; u < VEC; ++u) out.v[u] = vec_unlane<D>(convert<D, S>(vec_lane<S>(in.v[u])));
    static_cast<VD*>(p.out)[v] = out;
  }
  cast_elements<S, D>(p, vectors * VEC);
  return true;
}

template <typename S, typename D, int VEC>
GROVE_DEVICE void cast_kernel(const CastParams& p) {
  if constexpr (VEC > 1) {
    if (cast_vector<S, D, VEC>(p)) return;
  }
  cast_elements<S, D>(p, 0);
}

}  // namespace grove_k

#endif  // GROVE_JIT_KERNELS_CAST_CUH_

#if defined(GROVE_T0) && defined(GROVE_T1)
#if defined(GROVE_V_VEC)
#define GROVE_CAST_VEC GROVE_V_VEC
#else
#define GROVE_CAST_VEC 1
#endif
GROVE_ENTRY(cast, grove_k::CastParams) { grove_k::cast_kernel<GROVE_T0, GROVE_T1, GROVE_CAST_VEC>(p); }
#undef GROVE_CAST_VEC
#endif
