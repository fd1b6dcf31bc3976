// Writes of known values, by element width (GROVE_T0 is u8, f16, i32 or i64
// for 1, 2, 4 and 8 bytes): ConstantOfShape's fill, Shape and Size's values,
// and Trilu (a copy that zeroes a triangle).
#ifndef GROVE_JIT_KERNELS_FILL_CUH_
#define GROVE_JIT_KERNELS_FILL_CUH_

#include "jit/kernels/fill_params.h"
#include "jit/kernels/index_common.cuh"
#include "jit/kernels/prelude.cuh"

namespace grove_k {
namespace mv {

template <typename T>
GROVE_DEVICE void fill(const FillParams& p) {
  T* dst = static_cast<T*>(p.dst);
  const T v = p.value != 0 ? *static_cast<const T*>(p.value) : elem_from_bits<T>(p.value_bits);
  const i64 step = grid_threads();
  for (i64 i = global_thread(); i < p.n; i += step) dst[i] = v;
}

template <typename T>
GROVE_DEVICE void set_values(const SetValuesParams& p) {
  T* dst = static_cast<T*>(p.dst);
  const i64 i = global_thread();
  if (i < p.n && i < kMaxSetValues) dst[i] = elem_from_bits<T>(p.values[i]);
}

template <typename T>
GROVE_DEVICE void trilu(const TriluParams& p) {
  const T* src = static_cast<const T*>(p.src);
  T* dst = static_cast<T*>(p.dst);
  const i64 step = grid_threads();
  for (i64 i = global_thread(); i < p.n; i += step) {
    const i64 q = i / p.cols;
    const i64 col = i - q * p.cols;
    const i64 row = q % p.rows;
    const bool keep = p.upper != 0 ? col >= row + p.k : col <= row + p.k;
    dst[i] = keep ? src[i] : elem_from_bits<T>(0);
  }
}

}  // namespace mv
}  // namespace grove_k

#endif  // GROVE_JIT_KERNELS_FILL_CUH_

#if defined(GROVE_T0)
GROVE_ENTRY(fill, grove_k::FillParams) { grove_k::mv::fill<GROVE_T0>(p); }
GROVE_ENTRY(set_values, grove_k::SetValuesParams) { grove_k::mv::set_values<GROVE_T0>(p); }
GROVE_ENTRY(trilu, grove_k::TriluParams) { grove_k::mv::trilu<GROVE_T0>(p); }
#endif
