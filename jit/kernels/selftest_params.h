// Parameters of jit/kernels/selftest.cuh.
#ifndef GROVE_JIT_KERNELS_SELFTEST_PARAMS_H_
#define GROVE_JIT_KERNELS_SELFTEST_PARAMS_H_

#include "jit/kernels/types.h"

namespace grove_k {

struct SelftestParams {
  const void* in;
  void* block_sums;  // one per block
  void* total;       // atomically accumulated
  void* lane_out;    // per thread: the shuffled values (see the kernel)
  i64 n;
};

}  // namespace grove_k

#endif  // GROVE_JIT_KERNELS_SELFTEST_PARAMS_H_
