// Device helpers shared by the data-movement kernel files (copy.cuh,
// fill.cuh, gather.cuh, gather_onehot.cuh). No entry points: each file that
// uses them includes this header.
#ifndef GROVE_JIT_KERNELS_INDEX_COMMON_CUH_
#define GROVE_JIT_KERNELS_INDEX_COMMON_CUH_

#include "jit/kernels/prelude.cuh"

namespace grove_k {
namespace mv {

// The element whose bits are the low sizeof(T) bytes of `bits` (0: a zero
// element of any type).
template <typename T>
GROVE_DEVICE T elem_from_bits(u64 bits) {
  union {
    u64 u;
    T t;
  } x;
  x.u = bits;
  return x.t;
}

// Element i of an output viewed as [outer, mid, inner]: its three coordinates.
struct OuterMidInner {
  i64 outer, mid, inner;
};
GROVE_DEVICE OuterMidInner split_outer_mid_inner(i64 i, i64 mid, i64 inner) {
  const i64 t = i / inner;
  const i64 o = t / mid;
  return OuterMidInner{o, t - o * mid, i - t * inner};
}

}  // namespace mv
}  // namespace grove_k

#endif  // GROVE_JIT_KERNELS_INDEX_COMMON_CUH_
