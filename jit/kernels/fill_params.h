// Parameters of jit/kernels/fill.cuh (by element width: u8, f16, i32, i64)
// and jit/kernels/fill_range.cuh (typed: f32, f64, i32, i64).
#ifndef GROVE_JIT_KERNELS_FILL_PARAMS_H_
#define GROVE_JIT_KERNELS_FILL_PARAMS_H_

#include "jit/kernels/types.h"

namespace grove_k {

// n copies of one element: *value (device, one element) when value is not
// null, else the low bytes of value_bits.
struct FillParams {
  void* dst;
  i64 n;
  const void* value;
  u64 value_bits;
};

// dst[i] = the low bytes of values[i], i < n <= kMaxSetValues (Shape, Size:
// values the host knows, passed by value so no host buffer must outlive an
// asynchronous copy).
constexpr int kMaxSetValues = 8;
struct SetValuesParams {
  void* dst;
  i64 n;
  u64 values[kMaxSetValues];
};

// Trilu over a batch of rows x cols matrices (dense): keeps j >= i + k
// (upper) or j <= i + k (lower), zero elsewhere.
struct TriluParams {
  const void* src;
  void* dst;
  i64 n;  // elements
  i64 rows, cols;
  i64 k;  // clamped to +-(rows + cols)
  int upper;
};

// Range: dst[i] = start + i * delta, computed as the CPU does: in double for
// f32/f64 (start_f, delta_f), wrapping in 64 bits for i32/i64 (start_i,
// delta_i).
struct RangeParams {
  void* dst;
  i64 n;
  double start_f, delta_f;
  i64 start_i, delta_i;
};

}  // namespace grove_k

#endif  // GROVE_JIT_KERNELS_FILL_PARAMS_H_
