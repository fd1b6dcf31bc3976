// Parameters of jit/kernels/copy.cuh: data movement with elements as opaque
// bytes. Each module is instantiated for one element width (u8, f16, i32,
// i64 stand for 1, 2, 4 and 8 bytes), so one module serves every dtype.
#ifndef GROVE_JIT_KERNELS_COPY_PARAMS_H_
#define GROVE_JIT_KERNELS_COPY_PARAMS_H_

#include "jit/kernels/types.h"

namespace grove_k {

// dst[i] = src[sum_k c_k * strides[k]] over the row-major coordinates c of i
// in `shape` (dst dense). Strides are in elements and may be 0 (broadcast) or
// negative (Slice with negative steps); src points at the element whose
// coordinates are all 0. A dim with wrap[k] > 0 reads coordinate
// c_k % wrap[k] (Tile).
struct StridedCopyParams {
  const void* src;
  void* dst;
  i64 n;  // elements of dst
  Dims shape;
  Strides strides;
  Strides wrap;
};

// rows x cols elements: dst[r * dst_ld + c] = src[r * src_ld + c] (Concat,
// Split and strided copies whose inner dim is contiguous).
struct CopyRowsParams {
  const void* src;
  void* dst;
  i64 rows, cols;
  i64 src_ld, dst_ld;
};

// A batched transpose by tiles (the "transpose" kernel family): dst is
// dense [batch, rows, cols] and dst[b][r][c] = src[b * src_batch + c *
// src_ld + r], so a tile is read along r and written along c, both
// coalesced, through shared memory (the copy's variants: GROVE_V_TILE x
// GROVE_V_ROWS threads a block, tiles of TILE x TILE).
struct TransposeTileParams {
  const void* src;
  void* dst;
  i64 batch, rows, cols;
  i64 src_batch, src_ld;
};

// Pad: dst (dense, out_shape) from src (in_shape, dense with in_strides);
// begin[k] elements are added before dim k (negative: cropped). Out-of-range
// coordinates read `mode`'s source, or the constant: *value (device, one
// element) when value is not null, else the low bytes of value_bits.
enum PadMode { kPadConstant = 0, kPadEdge = 1, kPadReflect = 2, kPadWrap = 3 };
struct PadParams {
  const void* src;
  void* dst;
  i64 n;  // elements of dst
  Dims out_shape;
  Dims in_shape;
  Strides in_strides;
  Strides begin;
  int mode;
  const void* value;
  u64 value_bits;
};

}  // namespace grove_k

#endif  // GROVE_JIT_KERNELS_COPY_PARAMS_H_
