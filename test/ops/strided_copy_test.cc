// cpu::StridedCopy (lib/backends/cpu/strided_copy.h), the loop behind
// Transpose and Slice, against the definition element by element: random
// ranks 1-5, permuted, stepped, zero (broadcast) and negative strides,
// element sizes 1, 2, 4, 8 and 12, rows of every length from 1 to past 128
// bytes (its inline short-row copy and memcpy), on one thread and split
// over a pool of three (ranges that start and end inside rows).
#include "lib/backends/cpu/strided_copy.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "lib/backends/cpu/thread_pool.h"

namespace grove::cpu {
namespace {

struct Case {
  size_t elem = 4;
  std::vector<int64_t> shape, strides;
  int64_t base = 0;  // the element of index 0, from the buffer's start
  int64_t span = 0;  // elements in the source buffer
};

Case RandomCase(std::mt19937& rng, int64_t min_elements) {
  auto pick = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  static constexpr size_t kElems[] = {1, 2, 4, 8, 12};
  Case c;
  c.elem = kElems[pick(0, 4)];
  const int rank = static_cast<int>(pick(1, 5));
  int64_t total = 1;
  for (int d = 0; d < rank; ++d) {
    c.shape.push_back(pick(1, d + 1 == rank ? 40 : 9));
    total *= c.shape.back();
  }
  // Grow the outermost dim until the copy is large enough to be split.
  while (total < min_elements) {
    total = total / c.shape[0] * (c.shape[0] * 2);
    c.shape[0] *= 2;
  }
  // A source laid out row-major over a permutation of the dims, maybe with
  // a step per dim, some dims read broadcast (stride 0) or backwards.
  std::vector<int> order(rank);
  for (int d = 0; d < rank; ++d) order[d] = d;
  std::shuffle(order.begin(), order.end(), rng);
  if (pick(0, 2) == 0) std::sort(order.begin(), order.end());  // the innermost rows contiguous
  c.strides.assign(rank, 0);
  int64_t stride = 1;
  for (int i = rank - 1; i >= 0; --i) {
    const int d = order[i];
    const int64_t step = pick(0, 3) == 0 ? pick(2, 3) : 1;
    c.strides[d] = stride * step;
    stride *= c.shape[d] * step;
  }
  c.span = stride;
  for (int d = 0; d < rank; ++d) {
    if (pick(0, 7) == 0) c.strides[d] = 0;
    if (pick(0, 5) == 0 && c.strides[d] != 0) {  // backwards: start at the far end
      c.base += c.strides[d] * (c.shape[d] - 1);
      c.strides[d] = -c.strides[d];
    }
  }
  return c;
}

std::vector<uint8_t> Expected(const Case& c, const std::vector<uint8_t>& src) {
  int64_t total = 1;
  for (int64_t d : c.shape) total *= d;
  std::vector<uint8_t> out(static_cast<size_t>(total) * c.elem);
  const int rank = static_cast<int>(c.shape.size());
  std::vector<int64_t> idx(rank, 0);
  for (int64_t i = 0; i < total; ++i) {
    int64_t at = c.base;
    for (int d = 0; d < rank; ++d) at += idx[d] * c.strides[d];
    std::memcpy(&out[static_cast<size_t>(i) * c.elem], &src[static_cast<size_t>(at) * c.elem], c.elem);
    for (int d = rank - 1; d >= 0; --d) {
      if (++idx[d] < c.shape[d]) break;
      idx[d] = 0;
    }
  }
  return out;
}

void CheckCases(ir::IntraOpThreads* threads, int64_t min_elements, int cases, uint32_t seed) {
  std::mt19937 rng(seed);
  for (int n = 0; n < cases; ++n) {
    const Case c = RandomCase(rng, min_elements);
    std::vector<uint8_t> src(static_cast<size_t>(c.span) * c.elem);
    for (uint8_t& b : src) b = static_cast<uint8_t>(rng());
    const std::vector<uint8_t> want = Expected(c, src);
    std::vector<uint8_t> got(want.size(), 0xAB);
    const void* at = src.data() + static_cast<size_t>(c.base) * c.elem;
    if (threads == nullptr) {
      StridedCopy(c.elem, c.shape, at, c.strides, got.data());
    } else {
      StridedCopy(threads, c.elem, c.shape, at, c.strides, got.data());
    }
    ASSERT_EQ(got, want) << "element " << c.elem << " bytes, shape [" << absl::StrJoin(c.shape, ",")
                         << "], strides [" << absl::StrJoin(c.strides, ",") << "]";
  }
}

TEST(StridedCopyTest, MatchesTheDefinitionOnOneThread) { CheckCases(nullptr, 1, 200, 1); }

TEST(StridedCopyTest, MatchesTheDefinitionSplitOverThreads) {
  std::unique_ptr<ThreadPool> pool = ThreadPool::Create(3).value();
  // Past ParallelFor's grain, so that ranges start and end inside rows.
  CheckCases(pool.get(), 70000, 15, 2);
}

// The Transposes around attention's heads: [L, H, d] -> [H, L, d] and back,
// rows of d floats.
TEST(StridedCopyTest, HeadTransposes) {
  for (int64_t d : {1, 3, 8, 16, 33, 64}) {
    const int64_t l = 37, h = 5;
    std::vector<float> src(static_cast<size_t>(l * h * d)), got(src.size());
    for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<float>(i);
    StridedCopy(sizeof(float), {h, l, d}, src.data(), {d, h * d, 1}, got.data());
    for (int64_t a = 0; a < h; ++a) {
      for (int64_t b = 0; b < l; ++b) {
        for (int64_t e = 0; e < d; ++e) {
          ASSERT_EQ(got[(a * l + b) * d + e], src[(b * h + a) * d + e]) << "d " << d;
        }
      }
    }
  }
}

}  // namespace
}  // namespace grove::cpu
