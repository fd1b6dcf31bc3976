// Range (GROVE_T0 is f32, f64, i32 or i64), element for element what the CPU
// kernel computes: start + i * delta in double for floats (rounded as two
// separate operations, never fused), wrapping 64-bit arithmetic for integers.
#ifndef GROVE_JIT_KERNELS_FILL_RANGE_CUH_
#define GROVE_JIT_KERNELS_FILL_RANGE_CUH_

#include "jit/kernels/fill_params.h"
#include "jit/kernels/prelude.cuh"

namespace grove_k {
namespace mv {

GROVE_DEVICE double range_double(const RangeParams& p, i64 i) {
#if defined(__CUDACC_RTC__)
  return __dadd_rn(p.start_f, __dmul_rn(static_cast<double>(i), p.delta_f));
#else
  return p.start_f + static_cast<double>(i) * p.delta_f;
#endif
}
GROVE_DEVICE u64 range_wrapping(const RangeParams& p, i64 i) {
  return static_cast<u64>(p.start_i) + static_cast<u64>(i) * static_cast<u64>(p.delta_i);
}

GROVE_DEVICE void range_at(float* dst, i64 i, const RangeParams& p) {
  dst[i] = static_cast<float>(range_double(p, i));
}
GROVE_DEVICE void range_at(double* dst, i64 i, const RangeParams& p) { dst[i] = range_double(p, i); }
GROVE_DEVICE void range_at(int* dst, i64 i, const RangeParams& p) {
  dst[i] = static_cast<int>(static_cast<u32>(range_wrapping(p, i)));
}
GROVE_DEVICE void range_at(long long* dst, i64 i, const RangeParams& p) {
  dst[i] = static_cast<long long>(range_wrapping(p, i));
}

template <typename T>
GROVE_DEVICE void range(const RangeParams& p) {
  T* dst = static_cast<T*>(p.dst);
  const i64 step = grid_threads();
  for (i64 i = global_thread(); i < p.n; i += step) range_at(dst, i, p);
}

}  // namespace mv
}  // namespace grove_k

#endif  // GROVE_JIT_KERNELS_FILL_RANGE_CUH_

#if defined(GROVE_T0)
GROVE_ENTRY(range, grove_k::RangeParams) { grove_k::mv::range<GROVE_T0>(p); }
#endif
