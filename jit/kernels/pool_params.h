// Parameters of jit/kernels/pool.cuh.
#ifndef GROVE_JIT_KERNELS_POOL_PARAMS_H_
#define GROVE_JIT_KERNELS_POOL_PARAMS_H_

#include "jit/kernels/types.h"

namespace grove_k {

// MaxPool / AveragePool over `planes` (N * C) planes: output position o of
// dim d covers input positions o * stride - pad_begin + k * dilation, k <
// kernel; positions outside [0, in) are padding.
struct PoolParams {
  const void* x;
  void* y;
  void* indices;  // MaxPool's i64 output 1, or nullptr
  int spatial;
  i64 in[kMaxRank], out[kMaxRank], kernel[kMaxRank];
  i64 stride[kMaxRank], dilation[kMaxRank], pad_begin[kMaxRank], pad_end[kMaxRank];
  i64 in_size, out_size, planes;
  int count_include_pad;  // AveragePool: divide by the taps inside input + pads
  int column_major;       // MaxPool storage_order 1: indices count the first dim fastest
};

// GlobalMaxPool / GlobalAveragePool: y[p] over the `size` elements of plane p.
struct GlobalPoolParams {
  const void* x;
  void* y;
  i64 planes, size;
};

}  // namespace grove_k

#endif  // GROVE_JIT_KERNELS_POOL_PARAMS_H_
