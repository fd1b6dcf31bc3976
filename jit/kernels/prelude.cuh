// The prelude of every grove kernel module. Kernel templates under
// jit/kernels/ compile two ways from the same text:
//   - as CUDA C++ by NVRTC (__CUDACC_RTC__ defined): no system headers are
//     needed, so a module compiles in tens of milliseconds;
//   - as host C++ through jit/emulation.h, which runs one block's threads on
//     host threads, so CI checks every kernel without a GPU.
//
// A module is one kernel file instantiated for one list of element types:
// the source generator (jit/module.cc) defines GROVE_T0 (and GROVE_T1 for
// two-type files), GROVE_SUFFIX (e.g. __f32 or __f32_f16) and then includes
// the file. Each file keeps its templates inside an include guard and its
// entry points (GROVE_ENTRY) outside it, so the emulation can include a file
// once per type list. Every entry takes one parameter struct by value, or,
// in a module compiled with GROVE_INDIRECT_PARAMS (ModuleSpec::indirect), a
// device pointer to it; the emulated device reads such a pointer itself.
#ifndef GROVE_JIT_KERNELS_PRELUDE_CUH_
#define GROVE_JIT_KERNELS_PRELUDE_CUH_

#include "jit/kernels/types.h"

// A variant module (ModuleSpec::params) with GROVE_V_THREADS launches at
// most that many threads a block: its entries are compiled for it. A kernel
// file whose blocks have a fixed size may define GROVE_MAX_THREADS before
// including this header.
#if defined(GROVE_MAX_THREADS)
#elif defined(GROVE_V_THREADS)
#define GROVE_MAX_THREADS GROVE_V_THREADS
#else
#define GROVE_MAX_THREADS 1024
#endif

#if defined(__CUDACC_RTC__)
#define GROVE_DEVICE __device__ __forceinline__
// Unrolls the loop that follows (register arrays indexed by its counter).
#define GROVE_UNROLL _Pragma("unroll")
// Keeps the loop that follows rolled (a rare path's loop, which unrolled
// took registers, and a stack frame, from the kernel around it).
#define GROVE_NO_UNROLL _Pragma("unroll 1")
#define GROVE_CAT2(a, b) a##b
#define GROVE_CAT(a, b) GROVE_CAT2(a, b)
#if defined(GROVE_INDIRECT_PARAMS)
// The entry takes a device pointer to its parameters (a CUDA graph's
// parameter block, refilled by the host between replays); the body reads
// them through a reference, so it is the same text either way.
#define GROVE_ENTRY_WITH_BOUNDS(name, Params, bounds)                                              \
  GROVE_DEVICE void GROVE_CAT(GROVE_CAT(name, GROVE_SUFFIX), _body)(const Params& p);             \
  extern "C" __global__ void __launch_bounds__ bounds GROVE_CAT(name, GROVE_SUFFIX)(const Params* __restrict__ pp) { \
    GROVE_CAT(GROVE_CAT(name, GROVE_SUFFIX), _body)(*pp);                                          \
  }                                                                                                \
  GROVE_DEVICE void GROVE_CAT(GROVE_CAT(name, GROVE_SUFFIX), _body)(const Params& p)
#else
#define GROVE_ENTRY_WITH_BOUNDS(name, Params, bounds) \
  extern "C" __global__ void __launch_bounds__ bounds GROVE_CAT(name, GROVE_SUFFIX)(const Params p)
#endif
#define GROVE_ENTRY(name, Params) GROVE_ENTRY_WITH_BOUNDS(name, Params, (GROVE_MAX_THREADS))
// An entry whose blocks an SM must hold min_blocks of at once
// (__launch_bounds__'s second argument, which caps a thread's registers).
#define GROVE_ENTRY_BOUNDED(name, Params, min_blocks) \
  GROVE_ENTRY_WITH_BOUNDS(name, Params, (GROVE_MAX_THREADS, min_blocks))
#else
#include "jit/emulation.h"
#define GROVE_ENTRY_BOUNDED(name, Params, min_blocks) GROVE_ENTRY(name, Params)
#define GROVE_DEVICE inline
#define GROVE_UNROLL
#define GROVE_NO_UNROLL
#endif

namespace grove_k {

GROVE_DEVICE float f16_to_f32(u16 h) {
#if defined(__CUDACC_RTC__)
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
  return f;
#else
  const u32 sign = (h & 0x8000u) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ffu;
  u32 bits;
  if (exp == 0) {
    if (man == 0) {
      bits = sign;
    } else {  // subnormal: normalise
      int e = -1;
      u32 m = man;
      do {
        ++e;
        m <<= 1;
      } while ((m & 0x400u) == 0);
      bits = sign | ((127 - 15 - e) << 23) | ((m & 0x3ffu) << 13);
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | (man << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (man << 13);
  }
  float f;
  __builtin_memcpy(&f, &bits, 4);
  return f;
#endif
}

GROVE_DEVICE u16 f32_to_f16(float f) {
#if defined(__CUDACC_RTC__)
  u16 h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return h;
#else
  u32 x;
  __builtin_memcpy(&x, &f, 4);
  const u32 sign = (x >> 16) & 0x8000u;
  const u32 absx = x & 0x7fffffffu;
  if (absx >= 0x7f800000u) return static_cast<u16>(sign | 0x7c00u | (absx > 0x7f800000u ? 0x200u : 0));
  if (absx >= 0x477ff000u) return static_cast<u16>(sign | 0x7c00u);  // rounds to inf
  if (absx < 0x38800000u) {  // subnormal or zero in f16
    if (absx < 0x33000000u) return static_cast<u16>(sign);
    const u32 e = absx >> 23, m = (absx & 0x7fffffu) | 0x800000u;
    // value = m * 2^(e-150); f16 subnormal unit = 2^-24 -> q = m * 2^(e-126)
    const u32 s = 126 - e;  // right shift of m to get units of 2^-24
    u32 q = m >> s;
    const u32 rem = m & ((1u << s) - 1), half = 1u << (s - 1);
    if (rem > half || (rem == half && (q & 1u))) ++q;
    return static_cast<u16>(sign | q);
  }
  u32 r = absx + 0xc8000fffu + ((absx >> 13) & 1u);  // rebias 127->15, round to nearest even
  return static_cast<u16>(sign | (r >> 13));
#endif
}

GROVE_DEVICE float bf16_to_f32(u16 b) {
  const u32 bits = static_cast<u32>(b) << 16;
  float f;
#if defined(__CUDACC_RTC__)
  f = __int_as_float(static_cast<int>(bits));
#else
  __builtin_memcpy(&f, &bits, 4);
#endif
  return f;
}

GROVE_DEVICE u16 f32_to_bf16(float f) {
  u32 x;
#if defined(__CUDACC_RTC__)
  x = static_cast<u32>(__float_as_int(f));
#else
  __builtin_memcpy(&x, &f, 4);
#endif
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<u16>((x >> 16) | 0x40u);  // quiet NaN
  x += 0x7fffu + ((x >> 16) & 1u);  // round to nearest even
  return static_cast<u16>(x >> 16);
}

// Acc<T>: the type a kernel computes in. Halves widen to f32.
template <typename T>
struct Acc {
  typedef T type;
};
template <>
struct Acc<f16> {
  typedef float type;
};
template <>
struct Acc<bf16> {
  typedef float type;
};
template <>
struct Acc<bool> {
  typedef bool type;
};

template <typename T>
GROVE_DEVICE typename Acc<T>::type to_acc(T v) {
  return v;
}
template <>
GROVE_DEVICE float to_acc<f16>(f16 v) {
  return f16_to_f32(v.bits);
}
template <>
GROVE_DEVICE float to_acc<bf16>(bf16 v) {
  return bf16_to_f32(v.bits);
}

template <typename T, typename A>
GROVE_DEVICE T from_acc(A v) {
  return static_cast<T>(v);
}
template <>
GROVE_DEVICE f16 from_acc<f16, float>(float v) {
  f16 r;
  r.bits = f32_to_f16(v);
  return r;
}
template <>
GROVE_DEVICE bf16 from_acc<bf16, float>(float v) {
  bf16 r;
  r.bits = f32_to_bf16(v);
  return r;
}

// Any value to f32 and back, for kernels that always compute in f32.
template <typename T>
GROVE_DEVICE float to_f32(T v) {
  return static_cast<float>(to_acc<T>(v));
}
template <typename T>
GROVE_DEVICE T from_f32(float v) {
  return from_acc<T, typename Acc<T>::type>(static_cast<typename Acc<T>::type>(v));
}

template <typename T>
GROVE_DEVICE T gmax(T a, T b) {
  return a > b ? a : b;
}
template <typename T>
GROVE_DEVICE T gmin(T a, T b) {
  return a < b ? a : b;
}

// Offset of linear index `i` of `shape` in an operand with `strides`.
GROVE_DEVICE i64 offset_of(i64 i, const Dims& shape, const Strides& strides) {
  i64 off = 0;
  for (int k = shape.rank - 1; k >= 0; --k) {
    const i64 q = i / shape.d[k];
    off += (i - q * shape.d[k]) * strides.s[k];
    i = q;
  }
  return off;
}

// Every entry loops over its work grid-stride (global_thread(), then
// += grid_threads(); or blockIdx.x, then += gridDim.x), so its result does
// not depend on the grid it is launched with: a CUDA graph captured for a
// shape bucket's bound replays its grid for every shape of the bucket, with
// the actual sizes in the refreshed parameters (cuda::ParamDevice). A
// kernel variant (GROVE_V_* defines, jit/kernel_config.h) changes only how
// work is shared (lanes per row, items per trip, tiles), never this: any
// variant gives the same result for any grid, and threads past the actual
// sizes loop zero times.
GROVE_DEVICE i64 global_thread() { return static_cast<i64>(blockIdx.x) * blockDim.x + threadIdx.x; }
GROVE_DEVICE i64 grid_threads() { return static_cast<i64>(blockDim.x) * gridDim.x; }

GROVE_DEVICE float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
GROVE_DEVICE float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
GROVE_DEVICE float warp_min(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fminf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

}  // namespace grove_k

#endif  // GROVE_JIT_KERNELS_PRELUDE_CUH_
