// ONNX Slice bounds of one axis, shared by Slice's shape function and its
// kernels so that plan and run clamp identically.
#ifndef GROVE_LIB_IR_OPS_SLICE_BOUNDS_H_
#define GROVE_LIB_IR_OPS_SLICE_BOUNDS_H_

#include <algorithm>
#include <cstdint>

namespace grove::ir {

struct SliceRange {
  int64_t start = 0;   // first index read
  int64_t step = 1;
  int64_t length = 0;  // elements in the result
};

// Clamps as ONNX does (negative starts/ends count from the end; INT64_MAX and
// INT64_MIN mean "to the end" in either direction). `step` must not be 0.
// Written so that no intermediate overflows for any int64 input.
inline SliceRange ClampSlice(int64_t dim, int64_t start, int64_t end, int64_t step) {
  SliceRange r;
  r.step = step;
  if (dim <= 0) return r;
  if (start < 0) start += dim;
  if (end < 0) end += dim;
  if (step > 0) {
    start = std::max<int64_t>(0, std::min(start, dim));
    end = std::max<int64_t>(0, std::min(end, dim));
    if (end > start) r.length = (end - start - 1) / step + 1;
  } else {
    start = std::max<int64_t>(0, std::min(start, dim - 1));
    end = std::max<int64_t>(-1, std::min(end, dim - 1));
    if (start > end) {
      const uint64_t neg_step = uint64_t{0} - static_cast<uint64_t>(step);
      r.length = static_cast<int64_t>(static_cast<uint64_t>(start - end - 1) / neg_step + 1);
    }
  }
  r.start = start;
  return r;
}

}  // namespace grove::ir

#endif  // GROVE_LIB_IR_OPS_SLICE_BOUNDS_H_
