// Device helpers shared by the data-movement kernel files (copy.cuh,
// fill.cuh, gather.cuh, gather_onehot.cuh) and the value checks (check.cuh).
// No entry points: each file that uses them includes this header.
#ifndef GROVE_JIT_KERNELS_INDEX_COMMON_CUH_
#define GROVE_JIT_KERNELS_INDEX_COMMON_CUH_

#include "jit/kernels/check_params.h"
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

// Records a failure at `c` unless one is recorded already (the host reads
// the first; check_params.h). Callers then skip the bad element: nothing is
// read or written out of bounds.
GROVE_DEVICE void report_check(const CheckSite& c, i64 value, i64 bound, i64 a, i64 b) {
  if (c.record == 0) return;
  CheckRecord* r = c.record;
  if (atomicCAS(&r->site, static_cast<u64>(0), c.site) != static_cast<u64>(0)) return;
  r->value = value;
  r->bound = bound;
  r->a = a;
  r->b = b;
}

// Index j of an i32 or i64 index tensor.
GROVE_DEVICE i64 read_index(const void* indices, int is_i64, i64 j) {
  return is_i64 != 0 ? static_cast<const i64*>(indices)[j] : static_cast<i64>(static_cast<const i32*>(indices)[j]);
}

// The index normalised into [0, dim), or -1 (recorded at `check`, with `a`
// and `b` saying where it was).
GROVE_DEVICE i64 checked_index(i64 v, i64 dim, const CheckSite& check, i64 a, i64 b) {
  const i64 given = v;
  if (v < 0) v += dim;
  if (v >= 0 && v < dim) return v;
  report_check(check, given, dim, a, b);
  return -1;
}

}  // namespace mv
}  // namespace grove_k

#endif  // GROVE_JIT_KERNELS_INDEX_COMMON_CUH_
