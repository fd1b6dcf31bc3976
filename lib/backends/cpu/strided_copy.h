// Dense copy out of a strided view: the one loop behind Transpose and Slice
// (and any other data-movement kernel that permutes or steps through axes).
//
//   // Transpose of a [2, 3] f32 matrix: read it with strides {1, 3}.
//   StridedCopy(4, {3, 2}, in, {1, 3}, out);
#ifndef GROVE_LIB_BACKENDS_CPU_STRIDED_COPY_H_
#define GROVE_LIB_BACKENDS_CPU_STRIDED_COPY_H_

#include <cstddef>
#include <cstdint>

#include "absl/types/span.h"
#include "lib/ir/intra_op_threads.h"

namespace grove::cpu {

// Writes the elements src[sum_d i_d * src_strides[d]] in row-major order of
// `shape` densely to `dst`. Strides are in elements and may be zero or
// negative; `src` points at the element of index 0. Elements are opaque
// bytes of `elem_size`, so one copy serves every dtype.
void StridedCopy(size_t elem_size, absl::Span<const int64_t> shape, const void* src,
                 absl::Span<const int64_t> src_strides, void* dst);
// The same copy split over `threads` (a session's intra-op threads, nullptr:
// the calling thread) when it is large.
void StridedCopy(ir::IntraOpThreads* threads, size_t elem_size, absl::Span<const int64_t> shape, const void* src,
                 absl::Span<const int64_t> src_strides, void* dst);

// A shape seen as [outer, dim, inner] around `axis`.
struct AxisSplit {
  int64_t outer = 1, dim = 1, inner = 1;
};
AxisSplit SplitAtAxis(absl::Span<const int64_t> shape, int axis);

// Copies `len` positions along the middle dim between two [outer, *, inner]
// tensors: positions [src_at, src_at + len) of `src` (middle dim `src_dim`)
// to [dst_at, dst_at + len) of `dst` (middle dim `dst_dim`). Concatenating,
// splitting, slicing and stacking along an axis are this copy.
void CopyAlongAxis(size_t elem_size, int64_t outer, int64_t inner, const void* src, int64_t src_dim, int64_t src_at,
                   void* dst, int64_t dst_dim, int64_t dst_at, int64_t len);

}  // namespace grove::cpu

#endif  // GROVE_LIB_BACKENDS_CPU_STRIDED_COPY_H_
