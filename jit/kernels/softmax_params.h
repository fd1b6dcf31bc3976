// Parameters of jit/kernels/softmax.cuh.
#ifndef GROVE_JIT_KERNELS_SOFTMAX_PARAMS_H_
#define GROVE_JIT_KERNELS_SOFTMAX_PARAMS_H_

#include "jit/kernels/types.h"

namespace grove_k {

// Softmax (log = 0) or LogSoftmax (log = 1) along the middle axis of x seen
// as [outer, n, inner]. mode 0: a thread per (outer, inner) column; 1: a
// warp per row and 2: a block per row (inner == 1).
struct SoftmaxParams {
  const void* x;
  void* y;
  i64 outer, n, inner;
  int log;
  int mode;
};

}  // namespace grove_k

#endif  // GROVE_JIT_KERNELS_SOFTMAX_PARAMS_H_
