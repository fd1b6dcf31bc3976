// Naive broadcasting references shared by the per-op tests: the broadcast
// shape of several inputs and, per output element, the input element it reads.
#ifndef GROVE_TEST_OPS_BROADCAST_REF_H_
#define GROVE_TEST_OPS_BROADCAST_REF_H_

#include <algorithm>
#include <cstdint>
#include <vector>

#include "test/op_test_util.h"  // Count

namespace grove::testing {

using RefShape = std::vector<int64_t>;

inline RefShape BroadcastRef(const std::vector<RefShape>& shapes) {
  size_t rank = 0;
  for (const RefShape& s : shapes) rank = std::max(rank, s.size());
  RefShape out(rank, 1);
  for (const RefShape& s : shapes) {
    for (size_t i = 0; i < s.size(); ++i) {
      int64_t& o = out[rank - s.size() + i];
      if (s[i] != 1) o = s[i];
    }
  }
  return out;
}

inline RefShape Unflatten(int64_t flat, const RefShape& shape) {
  RefShape index(shape.size());
  for (int i = static_cast<int>(shape.size()) - 1; i >= 0; --i) {
    index[i] = flat % shape[i];
    flat /= shape[i];
  }
  return index;
}

// Flat index into `shape` (right-aligned, size-1 dims broadcast) read by the
// output element at `out_index`.
inline int64_t SourceIndex(const RefShape& out_index, const RefShape& shape) {
  const size_t off = out_index.size() - shape.size();
  int64_t flat = 0;
  for (size_t i = 0; i < shape.size(); ++i) flat = flat * shape[i] + (shape[i] == 1 ? 0 : out_index[off + i]);
  return flat;
}

}  // namespace grove::testing

#endif  // GROVE_TEST_OPS_BROADCAST_REF_H_
