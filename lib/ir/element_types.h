// Element types of the kernels of both backends: storage structs for f16,
// bf16 and bool with bit-exact conversions (round to nearest even), the
// DType <-> C++ type map, and VisitDType, which runs a generic lambda for the
// one type a tensor holds out of a list the kernel supports. The CUDA kernel
// templates (jit/kernels/cast.cuh) convert exactly as these do.
//
//   return VisitDType<float, double, int32_t>(ctx, view.dtype, [&](auto tag) {
//     using T = typename decltype(tag)::type;
//     ...
//   });
#ifndef GROVE_LIB_IR_ELEMENT_TYPES_H_
#define GROVE_LIB_IR_ELEMENT_TYPES_H_

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "grove/grove.h"
#include "lib/ir/op_registry.h"

namespace grove::ir {

struct Half {
  uint16_t bits;
};
struct BFloat16 {
  uint16_t bits;
};
// A bool tensor holds one byte per element and may come from a caller's
// buffer with any byte in it; reading it as uint8_t (non-zero = true) avoids
// loading a C++ bool from a byte that is not 0 or 1.
struct Bool8 {
  uint8_t bits;
};

inline float HalfToFloat(Half h) {
  const uint32_t sign = static_cast<uint32_t>(h.bits & 0x8000u) << 16;
  const uint32_t exp = (h.bits >> 10) & 0x1fu;
  const uint32_t mant = h.bits & 0x3ffu;
  if (exp == 0x1f) return std::bit_cast<float>(sign | 0x7f800000u | (mant << 13));
  if (exp == 0) {
    const float v = std::ldexp(static_cast<float>(mant), -24);
    return sign != 0 ? -v : v;
  }
  return std::bit_cast<float>(sign | ((exp + 112) << 23) | (mant << 13));
}

// After F. Giesen's float_to_half_fast3_rtne: the subnormal range relies on
// the FPU's own round-to-nearest-even addition, the normal range on a
// rounding bias that ties to the even mantissa.
inline Half FloatToHalf(float f) {
  uint32_t u = std::bit_cast<uint32_t>(f);
  const uint32_t sign = u & 0x80000000u;
  u ^= sign;
  uint32_t out;
  if (u >= (127u + 16u) << 23) {
    out = u > 0x7f800000u ? 0x7e00u : 0x7c00u;  // NaN stays NaN (quiet), else inf
  } else if (u < 113u << 23) {
    constexpr uint32_t kDenormMagic = ((127u - 15u) + (23u - 10u) + 1u) << 23;
    const float g = std::bit_cast<float>(u) + std::bit_cast<float>(kDenormMagic);
    out = std::bit_cast<uint32_t>(g) - kDenormMagic;
  } else {
    const uint32_t mant_odd = (u >> 13) & 1u;
    u += (static_cast<uint32_t>(15 - 127) << 23) + 0xfffu;
    u += mant_odd;
    out = u >> 13;
  }
  return Half{static_cast<uint16_t>(out | (sign >> 16))};
}

inline float BFloat16ToFloat(BFloat16 b) { return std::bit_cast<float>(static_cast<uint32_t>(b.bits) << 16); }

inline BFloat16 FloatToBFloat16(float f) {
  const uint32_t u = std::bit_cast<uint32_t>(f);
  // Truncating a NaN could leave an all-zero mantissa (inf); keep it quiet NaN.
  if ((u & 0x7fffffffu) > 0x7f800000u) return BFloat16{static_cast<uint16_t>((u >> 16) | 0x40u)};
  const uint32_t rounded = u + 0x7fffu + ((u >> 16) & 1u);
  return BFloat16{static_cast<uint16_t>(rounded >> 16)};
}

// double -> float rounded to odd. Rounding that result again to a format with
// at least two fewer mantissa bits (f16, bf16) gives the same value as one
// correct rounding of the double, which double -> float -> f16 would not.
inline float DoubleToFloatRoundToOdd(double d) {
  float f = static_cast<float>(d);
  if (std::isnan(d) || static_cast<double>(f) == d) return f;
  if (std::fabs(static_cast<double>(f)) > std::fabs(d)) f = std::nextafter(f, 0.0f);
  return std::bit_cast<float>(std::bit_cast<uint32_t>(f) | 1u);
}

inline Half DoubleToHalf(double d) { return FloatToHalf(DoubleToFloatRoundToOdd(d)); }
inline BFloat16 DoubleToBFloat16(double d) { return FloatToBFloat16(DoubleToFloatRoundToOdd(d)); }

// The type arithmetic happens in: f16 and bf16 compute in float.
template <typename T>
struct ComputeType {
  using type = T;
};
template <>
struct ComputeType<Half> {
  using type = float;
};
template <>
struct ComputeType<BFloat16> {
  using type = float;
};
template <>
struct ComputeType<Bool8> {
  using type = bool;
};
template <typename T>
using ComputeT = typename ComputeType<T>::type;

template <typename T>
inline ComputeT<T> ToCompute(T v) {
  if constexpr (std::is_same_v<T, Half>) {
    return HalfToFloat(v);
  } else if constexpr (std::is_same_v<T, BFloat16>) {
    return BFloat16ToFloat(v);
  } else if constexpr (std::is_same_v<T, Bool8>) {
    return v.bits != 0;
  } else {
    return v;
  }
}

template <typename T>
inline T FromCompute(ComputeT<T> v) {
  if constexpr (std::is_same_v<T, Half>) {
    return FloatToHalf(v);
  } else if constexpr (std::is_same_v<T, BFloat16>) {
    return FloatToBFloat16(v);
  } else if constexpr (std::is_same_v<T, Bool8>) {
    return Bool8{static_cast<uint8_t>(v ? 1 : 0)};
  } else {
    return v;
  }
}

// Float -> integer truncates toward zero. Out-of-range values and NaN are
// undefined behaviour for static_cast (and ONNX leaves them unspecified), so
// they saturate here, NaN giving 0.
template <typename I, typename F>
inline I SaturatingTruncate(F x) {
  if (std::isnan(x)) return 0;
  // Both bounds are powers of two, exact in any float type.
  constexpr F lo = static_cast<F>(std::numeric_limits<I>::min());
  constexpr F hi = std::is_signed_v<I> ? -lo : static_cast<F>(std::numeric_limits<I>::max()) + F(1);
  if (x < lo) return std::numeric_limits<I>::min();
  if (x >= hi) return std::numeric_limits<I>::max();
  return static_cast<I>(x);
}

// One element converted with ONNX Cast semantics: to bool is != 0, float to
// integer truncates, integer to integer wraps (two's complement), everything
// to f16/bf16 rounds to nearest even.
template <typename Dst, typename Src>
inline Dst ConvertElement(Src v) {
  if constexpr (std::is_same_v<Dst, Src>) {
    return v;
  } else {
    const auto x = ToCompute(v);
    using X = std::remove_const_t<decltype(x)>;
    if constexpr (std::is_same_v<Dst, Bool8>) {
      return Bool8{static_cast<uint8_t>(x != 0 ? 1 : 0)};
    } else if constexpr (std::is_same_v<Dst, Half> || std::is_same_v<Dst, BFloat16>) {
      if constexpr (std::is_same_v<X, float>) {
        return FromCompute<Dst>(x);
      } else if constexpr (std::is_same_v<Dst, Half>) {
        return DoubleToHalf(static_cast<double>(x));
      } else {
        return DoubleToBFloat16(static_cast<double>(x));
      }
    } else if constexpr (std::is_floating_point_v<Dst>) {
      return static_cast<Dst>(x);
    } else if constexpr (std::is_floating_point_v<X>) {
      return SaturatingTruncate<Dst>(x);
    } else {
      return static_cast<Dst>(x);
    }
  }
}

template <typename T>
struct DTypeOf;
template <>
struct DTypeOf<float> {
  static constexpr DType value = DType::kF32;
};
template <>
struct DTypeOf<double> {
  static constexpr DType value = DType::kF64;
};
template <>
struct DTypeOf<Half> {
  static constexpr DType value = DType::kF16;
};
template <>
struct DTypeOf<BFloat16> {
  static constexpr DType value = DType::kBF16;
};
template <>
struct DTypeOf<int64_t> {
  static constexpr DType value = DType::kI64;
};
template <>
struct DTypeOf<int32_t> {
  static constexpr DType value = DType::kI32;
};
template <>
struct DTypeOf<int8_t> {
  static constexpr DType value = DType::kI8;
};
template <>
struct DTypeOf<uint8_t> {
  static constexpr DType value = DType::kU8;
};
template <>
struct DTypeOf<int16_t> {
  static constexpr DType value = DType::kI16;
};
template <>
struct DTypeOf<uint16_t> {
  static constexpr DType value = DType::kU16;
};
template <>
struct DTypeOf<uint32_t> {
  static constexpr DType value = DType::kU32;
};
template <>
struct DTypeOf<uint64_t> {
  static constexpr DType value = DType::kU64;
};
template <>
struct DTypeOf<Bool8> {
  static constexpr DType value = DType::kBool;
};
// Strings are only ever moved or compared, never converted: no visitor list
// below includes StringRef, so a kernel takes strings by naming it.
template <>
struct DTypeOf<StringRef> {
  static constexpr DType value = DType::kString;
};

template <typename T>
struct TypeTag {
  using type = T;
};

// Calls fn(TypeTag<T>{}) for the T in Ts whose DType is `dtype`; an error
// naming the op when the kernel has no variant for it (the shape function
// should have refused it first).
template <typename... Ts, typename Fn>
absl::Status VisitDType(const ir::KernelContext& ctx, DType dtype, Fn&& fn) {
  absl::Status status;
  const bool found = ((DTypeOf<Ts>::value == dtype ? (status = fn(TypeTag<Ts>{}), true) : false) || ...);
  if (!found) return ctx.Error(absl::StrCat("the kernel does not support dtype ", DTypeName(dtype)));
  return status;
}

// Lists of element types for Visit, as the shape functions' dtype lists
// (lib/ir/ops/input_checks.h) name them.
template <typename... Ts>
struct TypeList {};
using FloatTypes = TypeList<float, double, Half, BFloat16>;
using NumericTypes =
    TypeList<float, double, Half, BFloat16, int64_t, int32_t, int16_t, int8_t, uint64_t, uint32_t, uint16_t, uint8_t>;

template <typename... Ts, typename Fn>
absl::Status Visit(TypeList<Ts...>, const ir::KernelContext& ctx, DType dtype, Fn&& fn) {
  return VisitDType<Ts...>(ctx, dtype, static_cast<Fn&&>(fn));
}

// The thirteen numeric and bool element types (not strings).
template <typename Fn>
absl::Status VisitAnyDType(const ir::KernelContext& ctx, DType dtype, Fn&& fn) {
  return VisitDType<float, double, Half, BFloat16, int64_t, int32_t, int16_t, int8_t, uint64_t, uint32_t, uint16_t,
                    uint8_t, Bool8>(ctx, dtype, static_cast<Fn&&>(fn));
}

}  // namespace grove::ir

#endif  // GROVE_LIB_IR_ELEMENT_TYPES_H_
