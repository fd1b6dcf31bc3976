// Index-driven data movement by element width (GROVE_T0 is u8, f16, i32 or
// i64): Gather, GatherElements, ScatterND. See gather_params.h for how
// out-of-range indices are reported.
#ifndef GROVE_JIT_KERNELS_GATHER_CUH_
#define GROVE_JIT_KERNELS_GATHER_CUH_

#include "jit/kernels/gather_params.h"
#include "jit/kernels/index_common.cuh"
#include "jit/kernels/prelude.cuh"

namespace grove_k {
namespace mv {

template <typename T>
GROVE_DEVICE void gather(const GatherParams& p) {
  const T* data = static_cast<const T*>(p.data);
  T* dst = static_cast<T*>(p.dst);
  const i64 step = grid_threads();
  for (i64 i = global_thread(); i < p.n; i += step) {
    const OuterMidInner c = split_outer_mid_inner(i, p.num_indices, p.inner);
    const i64 idx = checked_index(read_index(p.indices, p.indices_i64, c.mid), p.dim, p.check, c.mid, 0);
    dst[i] = idx < 0 ? elem_from_bits<T>(0) : data[(c.outer * p.dim + idx) * p.inner + c.inner];
  }
}

template <typename T>
GROVE_DEVICE void gather_elements(const GatherElementsParams& p) {
  const T* data = static_cast<const T*>(p.data);
  T* dst = static_cast<T*>(p.dst);
  const i64 step = grid_threads();
  for (i64 i = global_thread(); i < p.n; i += step) {
    const i64 idx = checked_index(read_index(p.indices, p.indices_i64, i), p.dim, p.check, i, 0);
    if (idx < 0) {
      dst[i] = elem_from_bits<T>(0);
      continue;
    }
    i64 rem = i, off = 0;
    for (int k = p.idx_shape.rank - 1; k >= 0; --k) {
      const i64 q = rem / p.idx_shape.d[k];
      const i64 c = k == p.axis ? idx : rem - q * p.idx_shape.d[k];
      off += c * p.data_strides.s[k];
      rem = q;
    }
    dst[i] = data[off];
  }
}

template <typename T>
GROVE_DEVICE void scatter_nd(const ScatterNDParams& p) {
  T* dst = static_cast<T*>(p.dst);
  const T* upd = static_cast<const T*>(p.updates);
  const i64 n = p.count * p.slice;
  const i64 step = grid_threads();
  for (i64 i = global_thread(); i < n; i += step) {
    const i64 j = i / p.slice;
    const i64 e = i - j * p.slice;
    i64 off = 0;
    bool ok = true;
    for (int d = 0; d < p.dims.rank; ++d) {
      const i64 v = checked_index(read_index(p.indices, p.indices_i64, j * p.dims.rank + d), p.dims.d[d], p.check, j, d);
      if (v < 0) ok = false;
      off += v * p.strides.s[d];
    }
    if (ok) dst[off + e] = upd[i];
  }
}

}  // namespace mv
}  // namespace grove_k

#endif  // GROVE_JIT_KERNELS_GATHER_CUH_

#if defined(GROVE_T0)
GROVE_ENTRY(gather, grove_k::GatherParams) { grove_k::mv::gather<GROVE_T0>(p); }
GROVE_ENTRY(gather_elements, grove_k::GatherElementsParams) { grove_k::mv::gather_elements<GROVE_T0>(p); }
GROVE_ENTRY(scatter_nd, grove_k::ScatterNDParams) { grove_k::mv::scatter_nd<GROVE_T0>(p); }
#endif
