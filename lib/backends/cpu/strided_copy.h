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

namespace grove::cpu {

// Writes the elements src[sum_d i_d * src_strides[d]] in row-major order of
// `shape` densely to `dst`. Strides are in elements and may be zero or
// negative; `src` points at the element of index 0. Elements are opaque
// bytes of `elem_size`, so one copy serves every dtype.
void StridedCopy(size_t elem_size, absl::Span<const int64_t> shape, const void* src,
                 absl::Span<const int64_t> src_strides, void* dst);

}  // namespace grove::cpu

#endif  // GROVE_LIB_BACKENDS_CPU_STRIDED_COPY_H_
