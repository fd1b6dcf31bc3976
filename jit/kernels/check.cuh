// Value checks on the device (check_params.h), by element width (GROVE_T0 is
// u8, f16, i32 or i64): index tuples against their dims, and integers that
// must not be 0. They write nothing but the session's check record.
#ifndef GROVE_JIT_KERNELS_CHECK_CUH_
#define GROVE_JIT_KERNELS_CHECK_CUH_

#include "jit/kernels/check_params.h"
#include "jit/kernels/index_common.cuh"
#include "jit/kernels/prelude.cuh"

namespace grove_k {
namespace mv {

GROVE_DEVICE void check_indices(const IndexCheckParams& p) {
  const i64 n = p.count * p.dims.rank;
  const i64 step = grid_threads();
  for (i64 i = global_thread(); i < n; i += step) {
    const i64 j = i / p.dims.rank;
    const int d = static_cast<int>(i - j * p.dims.rank);
    checked_index(read_index(p.indices, p.indices_i64, i), p.dims.d[d], p.check, j, d);
  }
}

// The unsigned integer of sizeof(T) bytes (f16 stands for 2 bytes).
template <int kBytes>
struct WidthBits;
template <>
struct WidthBits<1> {
  typedef u8 type;
};
template <>
struct WidthBits<2> {
  typedef u16 type;
};
template <>
struct WidthBits<4> {
  typedef u32 type;
};
template <>
struct WidthBits<8> {
  typedef u64 type;
};

// Zero bits are a zero of every integer type.
template <typename T>
GROVE_DEVICE void check_nonzero(const NonZeroCheckParams& p) {
  typedef typename WidthBits<static_cast<int>(sizeof(T))>::type R;
  const R* v = static_cast<const R*>(p.values);
  const i64 step = grid_threads();
  for (i64 i = global_thread(); i < p.n; i += step) {
    if (v[i] == static_cast<R>(0)) report_check(p.check, i, p.n, 0, 0);
  }
}

}  // namespace mv
}  // namespace grove_k

#endif  // GROVE_JIT_KERNELS_CHECK_CUH_

#if defined(GROVE_T0)
GROVE_ENTRY(check_indices, grove_k::IndexCheckParams) { grove_k::mv::check_indices(p); }
GROVE_ENTRY(check_nonzero, grove_k::NonZeroCheckParams) { grove_k::mv::check_nonzero<GROVE_T0>(p); }
#endif
