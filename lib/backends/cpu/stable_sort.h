// A stable sort of indices with no memory of its own, for kernels whose
// scratch lives in their workspace (Unique, NonMaxSuppression):
// std::stable_sort takes a heap buffer.
#ifndef GROVE_LIB_BACKENDS_CPU_STABLE_SORT_H_
#define GROVE_LIB_BACKENDS_CPU_STABLE_SORT_H_

#include <algorithm>
#include <cstdint>
#include <utility>

namespace grove::cpu {

// Sorts v[0, count) stably by `less` (a strict weak order), merging runs of
// 1, 2, 4, ... through `buffer` (count elements): the order std::stable_sort
// gives, with no memory of its own.
template <typename Less>
void StableSortIndices(int64_t* v, int64_t* buffer, int64_t count, Less less) {
  int64_t* src = v;
  int64_t* dst = buffer;
  for (int64_t width = 1; width < count; width *= 2) {
    for (int64_t lo = 0; lo < count; lo += 2 * width) {
      const int64_t mid = std::min(lo + width, count), hi = std::min(lo + 2 * width, count);
      int64_t i = lo, j = mid, k = lo;
      while (i < mid && j < hi) dst[k++] = less(src[j], src[i]) ? src[j++] : src[i++];
      while (i < mid) dst[k++] = src[i++];
      while (j < hi) dst[k++] = src[j++];
    }
    std::swap(src, dst);
  }
  if (src != v) std::copy(src, src + count, v);
}

}  // namespace grove::cpu

#endif  // GROVE_LIB_BACKENDS_CPU_STABLE_SORT_H_
