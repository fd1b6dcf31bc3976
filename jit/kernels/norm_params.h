// Parameters of jit/kernels/norm.cuh.
#ifndef GROVE_JIT_KERNELS_NORM_PARAMS_H_
#define GROVE_JIT_KERNELS_NORM_PARAMS_H_

#include "jit/kernels/types.h"

namespace grove_k {

// Float dtypes of the scale/bias/mean/var operands, which need not be x's.
enum NormParamType { kNormF32 = 0, kNormF64 = 1, kNormF16 = 2, kNormBF16 = 3 };

// LayerNormalization and InstanceNormalization (entry norm_rows): each of
// `rows` contiguous rows of n elements is normalized with its own mean and
// 1/sqrt(var + epsilon), then y = v * scale + bias where
//   channels > 0: scale[r % channels], bias[r % channels] (InstanceNorm);
//   channels == 0: scale/bias element offset_of(j, aff, *_strides) for
//                  element j of the row (LayerNorm, broadcast scale/B).
// bias may be null (0). mean_out / inv_std_out (f32, one per row) may be
// null. mode 1: a warp per row, 2: a block per row.
struct NormRowsParams {
  const void* x;
  void* y;
  i64 rows, n;
  double epsilon;
  const void* scale;
  const void* bias;
  int scale_type, bias_type;
  i64 channels;
  Dims aff;
  Strides scale_strides, bias_strides;
  void* mean_out;
  void* inv_std_out;
  int mode;
};

// BatchNormalization in inference mode (entry norm_batch): x is
// [N, channels, inner...]; channel c = (i / inner) % channels;
// y = (x - mean[c]) / sqrt(var[c] + epsilon) * scale[c] + bias[c].
struct BatchNormParams {
  const void* x;
  void* y;
  i64 total, channels, inner;
  double epsilon;
  const void* scale;
  const void* bias;
  const void* mean;
  const void* var;
  int scale_type, bias_type, mean_type, var_type;
};

}  // namespace grove_k

#endif  // GROVE_JIT_KERNELS_NORM_PARAMS_H_
