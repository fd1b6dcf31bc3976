// Strided copy: dims are simplified first (size-1 dims dropped, contiguous
// runs merged) so that the common cases end in one memcpy per row.
#include "lib/backends/cpu/strided_copy.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "lib/backends/cpu/parallel_for.h"

namespace grove::cpu {
namespace {

template <typename T>
void CopyRow(const uint8_t* src, int64_t n, int64_t stride, uint8_t* dst) {
  const T* s = reinterpret_cast<const T*>(src);
  T* d = reinterpret_cast<T*>(dst);
  for (int64_t i = 0; i < n; ++i) std::memcpy(d + i, s + i * stride, sizeof(T));
}

// A row of `bytes` contiguous bytes: short rows (a head's 8 or 16 floats
// when a Transpose moves the heads of attention) inline, in 16-byte moves,
// instead of a call to memcpy each (measured: a [256, 8, 8] -> [8, 256, 8]
// transpose spent 20 of its 21 us in calls).
inline void CopyContiguous(uint8_t* out, const uint8_t* in, size_t bytes) {
  if (bytes > 128) {
    std::memcpy(out, in, bytes);
    return;
  }
  for (; bytes >= 16; bytes -= 16, in += 16, out += 16) std::memcpy(out, in, 16);
  if (bytes >= 8) {
    std::memcpy(out, in, 8);
    bytes -= 8, in += 8, out += 8;
  }
  if (bytes >= 4) {
    std::memcpy(out, in, 4);
    bytes -= 4, in += 4, out += 4;
  }
  for (; bytes > 0; --bytes) *out++ = *in++;
}

// The copy's dims after dropping size-1 dims and merging contiguous runs;
// CopyRange writes the output elements [begin, end).
class StridedCopier {
 public:
  StridedCopier(size_t elem_size, absl::Span<const int64_t> shape, const void* src,
                absl::Span<const int64_t> src_strides, void* dst)
      : es_(static_cast<int64_t>(elem_size)), in_(static_cast<const uint8_t*>(src)), out_(static_cast<uint8_t*>(dst)) {
    total_ = 1;
    for (size_t i = 0; i < shape.size(); ++i) {
      total_ *= shape[i];
      if (shape[i] == 0) return;
      if (shape[i] == 1) continue;
      if (!dims_.empty() && strides_.back() == src_strides[i] * shape[i]) {
        dims_.back() *= shape[i];
        strides_.back() = src_strides[i];
        continue;
      }
      dims_.push_back(shape[i]);
      strides_.push_back(src_strides[i]);
    }
    if (dims_.empty()) {  // one element
      dims_.push_back(1);
      strides_.push_back(0);
    }
  }

  int64_t total() const { return total_; }

  void CopyRange(int64_t begin, int64_t end) const {
    if (begin >= end) return;
    const int rank = static_cast<int>(dims_.size());
    const int64_t row = dims_[rank - 1];
    const int64_t row_stride = strides_[rank - 1];
    absl::InlinedVector<int64_t, 8> idx(rank - 1, 0);
    int64_t offset = 0;  // in elements, into src: the start of the current row
    int64_t rest = begin / row;
    for (int d = rank - 2; d >= 0; --d) {
      idx[d] = rest % dims_[d];
      rest /= dims_[d];
      offset += idx[d] * strides_[d];
    }
    int64_t col = begin % row;
    uint8_t* out = out_ + begin * es_;
    for (int64_t at = begin; at < end;) {
      // Whole contiguous rows along the next dim out, without the odometer
      // per row: short rows (a head of attention moved by a Transpose) cost
      // little more than their bytes.
      if (col == 0 && row_stride == 1 && rank >= 2) {
        const int r = rank - 2;
        const int64_t rows = std::min(dims_[r] - idx[r], (end - at) / row);
        if (rows > 0) {
          const size_t row_bytes = static_cast<size_t>(row * es_);
          const int64_t step = strides_[r] * es_;
          const uint8_t* s = in_ + offset * es_;
          for (int64_t i = 0; i < rows; ++i, s += step, out += row_bytes) CopyContiguous(out, s, row_bytes);
          at += rows * row;
          idx[r] += rows;
          offset += rows * strides_[r];
          if (idx[r] < dims_[r]) continue;
          // Carry into the dims further out.
          offset -= strides_[r] * dims_[r];
          idx[r] = 0;
          for (int d = r - 1; d >= 0; --d) {
            offset += strides_[d];
            if (++idx[d] < dims_[d]) break;
            offset -= strides_[d] * dims_[d];
            idx[d] = 0;
          }
          continue;
        }
      }
      const int64_t n = std::min(row - col, end - at);
      const uint8_t* s = in_ + (offset + col * row_stride) * es_;
      if (row_stride == 1) {
        CopyContiguous(out, s, static_cast<size_t>(n * es_));
      } else {
        switch (es_) {
          case 1: CopyRow<uint8_t>(s, n, row_stride, out); break;
          case 2: CopyRow<uint16_t>(s, n, row_stride, out); break;
          case 4: CopyRow<uint32_t>(s, n, row_stride, out); break;
          case 8: CopyRow<uint64_t>(s, n, row_stride, out); break;
          default:
            for (int64_t i = 0; i < n; ++i) {
              std::memcpy(out + i * es_, s + i * row_stride * es_, static_cast<size_t>(es_));
            }
        }
      }
      out += n * es_;
      at += n;
      col = 0;
      for (int d = rank - 2; d >= 0; --d) {
        offset += strides_[d];
        if (++idx[d] < dims_[d]) break;
        offset -= strides_[d] * dims_[d];
        idx[d] = 0;
      }
    }
  }

 private:
  int64_t es_;
  const uint8_t* in_;
  uint8_t* out_;
  int64_t total_ = 0;
  absl::InlinedVector<int64_t, 8> dims_, strides_;
};

}  // namespace

void StridedCopy(size_t elem_size, absl::Span<const int64_t> shape, const void* src,
                 absl::Span<const int64_t> src_strides, void* dst) {
  const StridedCopier copier(elem_size, shape, src, src_strides, dst);
  copier.CopyRange(0, copier.total());
}

void StridedCopy(ir::IntraOpThreads* threads, size_t elem_size, absl::Span<const int64_t> shape, const void* src,
                 absl::Span<const int64_t> src_strides, void* dst) {
  const StridedCopier copier(elem_size, shape, src, src_strides, dst);
  ParallelFor(threads, copier.total(), kCheapGrain, [&](int64_t begin, int64_t end) { copier.CopyRange(begin, end); });
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
