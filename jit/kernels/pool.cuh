// Pooling: one thread per output element. Each dim's window is clipped to
// the taps that land inside the input with arithmetic (as the CPU kernel),
// so a window far larger than the input costs only what it covers. Values
// are compared and summed in double, as the CPU reference does, so results
// match it for every element type.
#ifndef GROVE_JIT_KERNELS_POOL_CUH_
#define GROVE_JIT_KERNELS_POOL_CUH_

#include "jit/kernels/pool_params.h"
#include "jit/kernels/prelude.cuh"

namespace grove_k {

template <typename T>
GROVE_DEVICE double pool_load(T v) {
  return static_cast<double>(to_f32(v));
}
template <>
GROVE_DEVICE double pool_load<double>(double v) {
  return v;
}
template <>
GROVE_DEVICE double pool_load<i8>(i8 v) {
  return static_cast<double>(v);
}
template <>
GROVE_DEVICE double pool_load<u8>(u8 v) {
  return static_cast<double>(v);
}

// The value of an average (through the CPU's compute type: float for f32
// and the halves, double for f64).
template <typename T>
GROVE_DEVICE T pool_store(double v) {
  return from_f32<T>(static_cast<float>(v));
}
template <>
GROVE_DEVICE double pool_store<double>(double v) {
  return v;
}

// What a max over no element gives: the compute type's lowest value.
template <typename T>
GROVE_DEVICE T pool_lowest() {
  return from_f32<T>(-3.402823466e38f);
}
template <>
GROVE_DEVICE double pool_lowest<double>() {
  return -1.7976931348623157e308;
}
template <>
GROVE_DEVICE i8 pool_lowest<i8>() {
  return static_cast<i8>(-128);
}
template <>
GROVE_DEVICE u8 pool_lowest<u8>() {
  return static_cast<u8>(0);
}

// First tap k in [0, kernel] whose position start + k * dil is >= bound.
GROVE_DEVICE i64 first_tap_at(i64 start, i64 dil, i64 kernel, i64 bound) {
  if (start >= bound) return 0;
  const i64 k = (bound - start + dil - 1) / dil;
  return k < kernel ? k : kernel;
}

template <typename T, bool kMax>
GROVE_DEVICE void pool(const PoolParams& p) {
  const T* x = static_cast<const T*>(p.x);
  T* y = static_cast<T*>(p.y);
  i64* indices = static_cast<i64*>(p.indices);
  const int sp = p.spatial;
  const i64 total = p.planes * p.out_size;
  for (i64 i = global_thread(); i < total; i += grid_threads()) {
    const i64 plane = i / p.out_size;
    i64 rest = i - plane * p.out_size;
    i64 start[kMaxRank], k0[kMaxRank], k1[kMaxRank];
    bool empty = false;
    double padded = 1;
    for (int d = sp - 1; d >= 0; --d) {
      const i64 od = rest % p.out[d];
      rest /= p.out[d];
      start[d] = od * p.stride[d] - p.pad_begin[d];
      k0[d] = first_tap_at(start[d], p.dilation[d], p.kernel[d], 0);
      k1[d] = first_tap_at(start[d], p.dilation[d], p.kernel[d], p.in[d]);
      if (k1[d] <= k0[d]) empty = true;
      const i64 pc = first_tap_at(start[d], p.dilation[d], p.kernel[d], p.in[d] + p.pad_end[d]) -
                     first_tap_at(start[d], p.dilation[d], p.kernel[d], -p.pad_begin[d]);
      padded *= static_cast<double>(pc > 0 ? pc : 0);
    }
    const T* xs = x + plane * p.in_size;
    double best = 0, sum = 0, count = 0;
    i64 best_index = -1;
    i64 k[kMaxRank];
    for (int d = 0; d < sp; ++d) k[d] = k0[d];
    while (!empty) {
      i64 flat = 0;
      for (int d = 0; d < sp; ++d) flat = flat * p.in[d] + start[d] + k[d] * p.dilation[d];
      const double v = pool_load<T>(xs[flat]);
      if (kMax) {
        if (best_index < 0 || v > best) {
          best = v;
          best_index = flat;
        }
      } else {
        sum += v;
        count += 1;
      }
      int d = sp - 1;
      for (; d >= 0; --d) {
        if (++k[d] < k1[d]) break;
        k[d] = k0[d];
      }
      if (d < 0) break;
    }
    if (kMax) {
      y[i] = best_index < 0 ? pool_lowest<T>() : xs[best_index];
      if (indices != nullptr) {
        i64 index = best_index;
        if (p.column_major && best_index >= 0) {
          i64 coord[kMaxRank];
          i64 r = best_index;
          for (int d = sp - 1; d >= 0; --d) {
            coord[d] = r % p.in[d];
            r /= p.in[d];
          }
          index = 0;
          for (int d = sp - 1; d >= 0; --d) index = index * p.in[d] + coord[d];
        }
        indices[i] = index < 0 ? -1 : plane * p.in_size + index;
      }
    } else {
      if (p.count_include_pad) count = padded;
      y[i] = pool_store<T>(count == 0 ? 0.0 : sum / count);
    }
  }
}

template <typename T, bool kMax>
GROVE_DEVICE void global_pool(const GlobalPoolParams& p) {
  const T* x = static_cast<const T*>(p.x);
  T* y = static_cast<T*>(p.y);
  for (i64 i = global_thread(); i < p.planes; i += grid_threads()) {
    const T* xs = x + i * p.size;
    if (kMax) {
      if (p.size == 0) {
        y[i] = pool_lowest<T>();
        continue;
      }
      i64 best_index = 0;
      double best = pool_load<T>(xs[0]);
      for (i64 j = 1; j < p.size; ++j) {
        const double v = pool_load<T>(xs[j]);
        if (v > best) {  // std::max keeps the first of equals and NaN seen first
          best = v;
          best_index = j;
        }
      }
      y[i] = xs[best_index];
    } else {
      double sum = 0;
      for (i64 j = 0; j < p.size; ++j) sum += pool_load<T>(xs[j]);
      y[i] = pool_store<T>(p.size == 0 ? 0.0 : sum / static_cast<double>(p.size));
    }
  }
}

}  // namespace grove_k

#endif  // GROVE_JIT_KERNELS_POOL_CUH_

#if defined(GROVE_T0)
GROVE_ENTRY(max_pool, grove_k::PoolParams) { grove_k::pool<GROVE_T0, true>(p); }
GROVE_ENTRY(average_pool, grove_k::PoolParams) { grove_k::pool<GROVE_T0, false>(p); }
GROVE_ENTRY(global_max_pool, grove_k::GlobalPoolParams) { grove_k::global_pool<GROVE_T0, true>(p); }
GROVE_ENTRY(global_average_pool, grove_k::GlobalPoolParams) { grove_k::global_pool<GROVE_T0, false>(p); }
#endif
