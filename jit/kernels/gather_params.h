// Parameters of jit/kernels/gather.cuh (by element width: u8, f16, i32, i64)
// and jit/kernels/gather_onehot.cuh (index type x element width).
//
// Index checks: indices may live only on the device. A kernel whose `check`
// has a record checks every index it reads; an out-of-range one is recorded
// there (check_params.h: value = the index, bound = the dim it indexes) and
// the element is skipped (gathers write 0), so nothing is read or written out
// of bounds. The host reads the record at its next wait for the device. A
// null record: the host has checked every index already.
#ifndef GROVE_JIT_KERNELS_GATHER_PARAMS_H_
#define GROVE_JIT_KERNELS_GATHER_PARAMS_H_

#include "jit/kernels/check_params.h"
#include "jit/kernels/types.h"

namespace grove_k {

// Gather along one axis, data viewed as [outer, dim, inner] and the output
// as [outer, num_indices, inner]; negative indices count from the end.
struct GatherParams {
  const void* data;
  const void* indices;  // i32 or i64 (indices_i64)
  void* dst;
  i64 n;  // elements of dst
  i64 dim, num_indices, inner;
  int indices_i64;
  CheckSite check;  // a = the index's position in `indices`
};

// GatherElements: dst (and indices) have shape idx_shape; element c reads
// data at c with coordinate `axis` replaced by indices[c].
struct GatherElementsParams {
  const void* data;
  const void* indices;
  void* dst;
  i64 n;
  Dims idx_shape;
  Strides data_strides;
  int axis;
  i64 dim;
  int indices_i64;
  CheckSite check;  // a = the index's position in `indices`
};

// ScatterND (reduction none) into dst, which already holds the data: entry j
// of `count` index tuples (k coordinates each, over dims[0..k)) receives
// updates[j * slice .. (j + 1) * slice).
struct ScatterNDParams {
  void* dst;
  const void* indices;
  const void* updates;
  i64 count, slice;
  Dims dims;  // rank k: the first k dims of the data
  Strides strides;  // their strides in dst, in elements
  int indices_i64;
  CheckSite check;  // a = the tuple, b = the coordinate
};

// OneHot: dst viewed as [outer, depth, inner] from indices [outer, inner];
// values = {off, on} on the device.
struct OneHotParams {
  const void* indices;
  const void* values;
  void* dst;
  i64 n;
  i64 depth, inner;
};

}  // namespace grove_k

#endif  // GROVE_JIT_KERNELS_GATHER_PARAMS_H_
