// Data movement with elements as opaque bytes (GROVE_T0 is u8, f16, i32 or
// i64 by width): the strided copy behind Transpose, Slice, Expand and Tile,
// the row copy behind Concat and Split, Pad, and the tiled transpose behind
// strided copies that swap a contiguous dim inward (the "transpose" family).
#ifndef GROVE_JIT_KERNELS_COPY_CUH_
#define GROVE_JIT_KERNELS_COPY_CUH_

#include "jit/kernels/copy_params.h"
#include "jit/kernels/index_common.cuh"
#include "jit/kernels/prelude.cuh"

namespace grove_k {
namespace mv {

template <typename T>
GROVE_DEVICE void strided_copy(const StridedCopyParams& p) {
  const T* src = static_cast<const T*>(p.src);
  T* dst = static_cast<T*>(p.dst);
  const i64 step = grid_threads();
  for (i64 i = global_thread(); i < p.n; i += step) {
    i64 rem = i, off = 0;
    for (int k = p.shape.rank - 1; k >= 0; --k) {
      const i64 q = rem / p.shape.d[k];
      i64 c = rem - q * p.shape.d[k];
      if (p.wrap.s[k] > 0) c %= p.wrap.s[k];
      off += c * p.strides.s[k];
      rem = q;
    }
    dst[i] = src[off];
  }
}

template <typename T>
GROVE_DEVICE void copy_rows(const CopyRowsParams& p) {
  const T* src = static_cast<const T*>(p.src);
  T* dst = static_cast<T*>(p.dst);
  const i64 n = p.rows * p.cols;
  const i64 step = grid_threads();
  for (i64 i = global_thread(); i < n; i += step) {
    const i64 r = i / p.cols, c = i - r * p.cols;
    dst[r * p.dst_ld + c] = src[r * p.src_ld + c];
  }
}

// The source index of output coordinate o along a dim of n input elements
// with `begin` added before; -1 for the constant.
GROVE_DEVICE i64 pad_source(i64 o, i64 begin, i64 n, int mode) {
  i64 s = o - begin;
  if (s >= 0 && s < n) return s;
  if (mode == kPadConstant || n <= 0) return -1;
  if (mode == kPadEdge) return s < 0 ? 0 : n - 1;
  if (mode == kPadWrap) return ((s % n) + n) % n;
  if (n == 1) return 0;
  const i64 period = 2 * (n - 1);  // reflect, as numpy
  const i64 m = ((s % period) + period) % period;
  return m < n ? m : period - m;
}

template <typename T>
GROVE_DEVICE void pad(const PadParams& p) {
  const T* src = static_cast<const T*>(p.src);
  T* dst = static_cast<T*>(p.dst);
  const T constant = p.value != 0 ? *static_cast<const T*>(p.value) : elem_from_bits<T>(p.value_bits);
  const i64 step = grid_threads();
  for (i64 i = global_thread(); i < p.n; i += step) {
    i64 rem = i, off = 0;
    bool fill = false;
    for (int k = p.out_shape.rank - 1; k >= 0 && !fill; --k) {
      const i64 q = rem / p.out_shape.d[k];
      const i64 s = pad_source(rem - q * p.out_shape.d[k], p.begin.s[k], p.in_shape.d[k], p.mode);
      if (s < 0) fill = true;
      off += s * p.in_strides.s[k];
      rem = q;
    }
    dst[i] = fill ? constant : src[off];
  }
}

// A tile of TILE x TILE elements a trip per block (grid-stride over
// batch x row tiles x column tiles): thread (tx, ty) of TILE x ROWS reads
// column c0 + ty + k * ROWS of the tile at row r0 + tx (consecutive in src),
// then writes row r0 + ty + k * ROWS at column c0 + tx (consecutive in
// dst). Threads past the edges skip; every thread reaches both barriers.
template <typename T, int TILE, int ROWS>
GROVE_DEVICE void transpose_tile(const TransposeTileParams& p) {
  __shared__ T tile[TILE][TILE + 1];
  const T* src = static_cast<const T*>(p.src);
  T* dst = static_cast<T*>(p.dst);
  const int tx = static_cast<int>(threadIdx.x) % TILE, ty = static_cast<int>(threadIdx.x) / TILE;
  const i64 row_tiles = (p.rows + TILE - 1) / TILE, col_tiles = (p.cols + TILE - 1) / TILE;
  const i64 tiles = p.batch * row_tiles * col_tiles;
  for (i64 t = blockIdx.x; t < tiles; t += gridDim.x) {
    const i64 b = t / (row_tiles * col_tiles), rem = t - b * row_tiles * col_tiles;
    const i64 r0 = rem / col_tiles * TILE, c0 = rem % col_tiles * TILE;
    if (ty < ROWS) {
      for (int j = ty; j < TILE; j += ROWS) {
        const i64 r = r0 + tx, c = c0 + j;
        if (r < p.rows && c < p.cols) tile[j][tx] = src[b * p.src_batch + c * p.src_ld + r];
      }
    }
    __syncthreads();
    if (ty < ROWS) {
      for (int j = ty; j < TILE; j += ROWS) {
        const i64 r = r0 + j, c = c0 + tx;
        if (r < p.rows && c < p.cols) dst[(b * p.rows + r) * p.cols + c] = tile[tx][j];
      }
    }
    __syncthreads();  // the tile is written again on the next trip
  }
}

}  // namespace mv
}  // namespace grove_k

#endif  // GROVE_JIT_KERNELS_COPY_CUH_

#if defined(GROVE_T0)
GROVE_ENTRY(strided_copy, grove_k::StridedCopyParams) { grove_k::mv::strided_copy<GROVE_T0>(p); }
GROVE_ENTRY(copy_rows, grove_k::CopyRowsParams) { grove_k::mv::copy_rows<GROVE_T0>(p); }
GROVE_ENTRY(pad, grove_k::PadParams) { grove_k::mv::pad<GROVE_T0>(p); }
// The module without a variant transposes with the family's generic tiles.
#if defined(GROVE_V_TILE)
#define GROVE_TRANSPOSE_TILE GROVE_V_TILE
#else
#define GROVE_TRANSPOSE_TILE 32
#endif
#if defined(GROVE_V_ROWS)
#define GROVE_TRANSPOSE_ROWS GROVE_V_ROWS
#else
#define GROVE_TRANSPOSE_ROWS 8
#endif
GROVE_ENTRY(transpose_tile, grove_k::TransposeTileParams) {
  grove_k::mv::transpose_tile<GROVE_T0, GROVE_TRANSPOSE_TILE, GROVE_TRANSPOSE_ROWS>(p);
}
#undef GROVE_TRANSPOSE_TILE
#undef GROVE_TRANSPOSE_ROWS
#endif
