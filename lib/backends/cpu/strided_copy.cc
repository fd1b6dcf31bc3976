// Strided copy: dims are simplified first (size-1 dims dropped, contiguous
// runs merged) so that the common cases end in one memcpy per row.
#include "lib/backends/cpu/strided_copy.h"

#include <cstring>
#include <vector>

namespace grove::cpu {
namespace {

template <typename T>
void CopyRow(const uint8_t* src, int64_t n, int64_t stride, uint8_t* dst) {
  const T* s = reinterpret_cast<const T*>(src);
  T* d = reinterpret_cast<T*>(dst);
  for (int64_t i = 0; i < n; ++i) std::memcpy(d + i, s + i * stride, sizeof(T));
}

}  // namespace

void StridedCopy(size_t elem_size, absl::Span<const int64_t> shape, const void* src,
                 absl::Span<const int64_t> src_strides, void* dst) {
  std::vector<int64_t> dims, strides;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == 0) return;
    if (shape[i] == 1) continue;
    if (!dims.empty() && strides.back() == src_strides[i] * shape[i]) {
      dims.back() *= shape[i];
      strides.back() = src_strides[i];
      continue;
    }
    dims.push_back(shape[i]);
    strides.push_back(src_strides[i]);
  }
  const auto* in = static_cast<const uint8_t*>(src);
  auto* out = static_cast<uint8_t*>(dst);
  const int64_t es = static_cast<int64_t>(elem_size);
  if (dims.empty()) {
    std::memcpy(out, in, elem_size);
    return;
  }
  const int rank = static_cast<int>(dims.size());
  const int64_t row = dims[rank - 1];
  const int64_t row_stride = strides[rank - 1];
  std::vector<int64_t> idx(rank - 1, 0);
  int64_t offset = 0;  // in elements, into src
  for (;;) {
    const uint8_t* s = in + offset * es;
    if (row_stride == 1) {
      std::memcpy(out, s, static_cast<size_t>(row * es));
    } else {
      switch (elem_size) {
        case 1: CopyRow<uint8_t>(s, row, row_stride, out); break;
        case 2: CopyRow<uint16_t>(s, row, row_stride, out); break;
        case 4: CopyRow<uint32_t>(s, row, row_stride, out); break;
        case 8: CopyRow<uint64_t>(s, row, row_stride, out); break;
        default:
          for (int64_t i = 0; i < row; ++i) std::memcpy(out + i * es, s + i * row_stride * es, elem_size);
      }
    }
    out += row * es;
    int d = rank - 2;
    for (; d >= 0; --d) {
      offset += strides[d];
      if (++idx[d] < dims[d]) break;
      offset -= strides[d] * dims[d];
      idx[d] = 0;
    }
    if (d < 0) return;
  }
}

AxisSplit SplitAtAxis(absl::Span<const int64_t> shape, int axis) {
  AxisSplit s;
  s.dim = shape[axis];
  for (int d = 0; d < axis; ++d) s.outer *= shape[d];
  for (size_t d = axis + 1; d < shape.size(); ++d) s.inner *= shape[d];
  return s;
}

void CopyAlongAxis(size_t elem_size, int64_t outer, int64_t inner, const void* src, int64_t src_dim, int64_t src_at,
                   void* dst, int64_t dst_dim, int64_t dst_at, int64_t len) {
  const size_t row = static_cast<size_t>(inner) * elem_size;
  const size_t block = static_cast<size_t>(len) * row;
  if (block == 0) return;
  const uint8_t* s = static_cast<const uint8_t*>(src) + static_cast<size_t>(src_at) * row;
  uint8_t* d = static_cast<uint8_t*>(dst) + static_cast<size_t>(dst_at) * row;
  for (int64_t o = 0; o < outer; ++o) {
    std::memcpy(d + static_cast<size_t>(o * dst_dim) * row, s + static_cast<size_t>(o * src_dim) * row, block);
  }
}

}  // namespace grove::cpu
