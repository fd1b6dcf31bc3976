// Parameters of jit/kernels/reduce.cuh (Reduce*, ArgMax/ArgMin, CumSum).
#ifndef GROVE_JIT_KERNELS_REDUCE_PARAMS_H_
#define GROVE_JIT_KERNELS_REDUCE_PARAMS_H_

#include "jit/kernels/types.h"

namespace grove_k {

// y[o] = reduce over r < count of x[offset_of(o, kept) + offset_of(r, red)].
// The host merges neighbouring dims that are all kept or all reduced and
// drops dims of size 1; y is contiguous in the order of the kept dims.
// Entry reduce_<op>. mode 0: a thread per output element (reads coalesce
// when the innermost dim is kept); 1: a warp per output element; 2: a block
// per output element (1 and 2 for a contiguous innermost reduced dim).
struct ReduceParams {
  const void* x;
  void* y;
  i64 n_out;
  i64 count;  // input elements per output element (0: the identity)
  Dims kept;
  Strides kept_strides;  // in x
  Dims red;
  Strides red_strides;  // in x
  int mode;
};

// ArgMax / ArgMin (entries reduce_argmax, reduce_argmin) over x seen as
// [outer, n, inner]; y (i64) is [outer, inner]. mode as ReduceParams (1 and
// 2 only for inner == 1).
struct ArgReduceParams {
  const void* x;
  void* y;
  i64 outer, n, inner;
  int select_last;
  int mode;
};

// CumSum (entry reduce_cumsum) over x seen as [outer, n, inner]: one thread
// per column.
struct CumSumParams {
  const void* x;
  void* y;
  i64 outer, n, inner;
  int exclusive;
  int reverse;
};

}  // namespace grove_k

#endif  // GROVE_JIT_KERNELS_REDUCE_PARAMS_H_
