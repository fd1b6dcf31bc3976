// How CPU kernels split their work over the session's intra-op threads
// (SessionOptions::intra_op_threads, lib/ir/intra_op_threads.h):
//
//   ParallelFor(ctx, n, kCheapGrain, [&](int64_t begin, int64_t end) {
//     for (int64_t i = begin; i < end; ++i) out[i] = in[i] + 1;
//   });
//
// [0, n) is cut into contiguous ranges of at least `grain` items; below two
// ranges' worth (a decode step's small tensors) fn(0, n) runs on the calling
// thread with no synchronisation at all. Each item is computed by exactly one
// call, so a kernel that splits over elements or over whole rows gives the
// same bytes at every thread count.
#ifndef GROVE_LIB_BACKENDS_CPU_PARALLEL_FOR_H_
#define GROVE_LIB_BACKENDS_CPU_PARALLEL_FOR_H_

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "absl/functional/function_ref.h"
#include "lib/ir/intra_op_threads.h"
#include "lib/ir/op_registry.h"

namespace grove::cpu {

// Grains, in elements: a range should be worth tens of microseconds, well
// above the cost of waking a worker. Cheap: a copy, an add, a compare; costly:
// exp, tanh, erf, a division per element.
inline constexpr int64_t kCheapGrain = 32768;
inline constexpr int64_t kCostlyGrain = 4096;

// An elementwise op's grain: kCheapGrain when Op says `kCheap = true`.
template <typename Op>
constexpr int64_t GrainOf() {
  if constexpr (requires { Op::kCheap; }) {
    return Op::kCheap ? kCheapGrain : kCostlyGrain;
  } else {
    return kCostlyGrain;
  }
}

// Ranges per thread: a few, so a thread that starts late (a worker waking
// up, another process on the core) leaves its share to the others.
inline constexpr int64_t kRangesPerThread = 4;

inline void ParallelFor(ir::IntraOpThreads* threads, int64_t n, int64_t grain,
                        absl::FunctionRef<void(int64_t, int64_t)> fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  const int64_t most = n / grain;
  if (threads == nullptr || threads->num_threads() <= 1 || most < 2) {
    fn(0, n);
    return;
  }
  const int64_t ranges = std::min<int64_t>(most, threads->num_threads() * kRangesPerThread);
  const int64_t base = n / ranges, extra = n % ranges;
  threads->Run(ranges, [&](int64_t r) {
    const int64_t begin = r * base + std::min(r, extra);
    fn(begin, begin + base + (r < extra ? 1 : 0));
  });
}

// The threads of the session running `ctx`; nullptr: the calling thread only.
inline ir::IntraOpThreads* IntraOpThreadsOf(const ir::KernelContext& ctx) {
  return ctx.host() != nullptr ? ctx.host()->intra_op_threads() : nullptr;
}

inline void ParallelFor(const ir::KernelContext& ctx, int64_t n, int64_t grain,
                        absl::FunctionRef<void(int64_t, int64_t)> fn) {
  ParallelFor(IntraOpThreadsOf(ctx), n, grain, fn);
}

// memcpy(dst, src, bytes), split over the threads when large.
inline void CopyBytes(const ir::KernelContext& ctx, void* dst, const void* src, uint64_t bytes) {
  constexpr int64_t kGrainBytes = 4 * kCheapGrain * 4;  // a cheap grain of 4-byte elements, times 4: memcpy is fast
  ParallelFor(ctx, static_cast<int64_t>(bytes), kGrainBytes, [&](int64_t begin, int64_t end) {
    std::memcpy(static_cast<uint8_t*>(dst) + begin, static_cast<const uint8_t*>(src) + begin,
                static_cast<size_t>(end - begin));
  });
}

// The grain in rows for work of `row_items` elements per row.
inline int64_t RowGrain(int64_t row_items, int64_t grain) {
  return std::max<int64_t>(1, grain / std::max<int64_t>(row_items, 1));
}

}  // namespace grove::cpu

#endif  // GROVE_LIB_BACKENDS_CPU_PARALLEL_FOR_H_
