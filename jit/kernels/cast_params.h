// Parameters of jit/kernels/cast.cuh.
#ifndef GROVE_JIT_KERNELS_CAST_PARAMS_H_
#define GROVE_JIT_KERNELS_CAST_PARAMS_H_

#include "jit/kernels/types.h"

namespace grove_k {

struct CastParams {
  const void* in;  // n elements of GROVE_T0
  void* out;       // n elements of GROVE_T1
  i64 n;
};

}  // namespace grove_k

#endif  // GROVE_JIT_KERNELS_CAST_PARAMS_H_
