// Device side of the deferred checks of check_params.h. No entry points:
// kernel files that check values include this header.
#ifndef GROVE_JIT_KERNELS_CHECK_CUH_
#define GROVE_JIT_KERNELS_CHECK_CUH_

#include "jit/kernels/check_params.h"
#include "jit/kernels/prelude.cuh"

namespace grove_k {

// Records a failure at `c` unless one is recorded already (the host reads
// the first). Callers then skip the bad element: nothing out of bounds.
GROVE_DEVICE void report_check(const CheckSite& c, i64 value, i64 bound, i64 a, i64 b) {
  if (c.record == 0) return;
  CheckRecord* r = c.record;
  if (atomicCAS(&r->site, static_cast<u64>(0), c.site) != static_cast<u64>(0)) return;
  r->value = value;
  r->bound = bound;
  r->a = a;
  r->b = b;
}

}  // namespace grove_k

#endif  // GROVE_JIT_KERNELS_CHECK_CUH_
