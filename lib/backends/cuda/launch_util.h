// Launch geometry and dtype helpers that several CUDA kernel groups share.
#ifndef GROVE_LIB_BACKENDS_CUDA_LAUNCH_UTIL_H_
#define GROVE_LIB_BACKENDS_CUDA_LAUNCH_UTIL_H_

#include <algorithm>
#include <cstdint>

#include "jit/kernel_config.h"
#include "lib/backends/cuda/device.h"

namespace grove::cuda {

// A 1-D grid over n items, a thread each (LaunchDims::any_block: only for
// kernels without block-wide cooperation); blocks shrink to the warps that n
// fills, so a small launch (one RNN step, a short bias) does not idle a
// 256-thread block.
inline LaunchDims GridFor(int64_t n) {
  const int64_t warps = std::min<int64_t>(8, std::max<int64_t>(1, (n + 31) / 32));
  LaunchDims dims = Grid1D(n, static_cast<int>(warps * 32));
  dims.any_block = true;
  return dims;
}

// The dtypes Device::Gemm takes.
inline bool GemmDType(DType t) { return t == DType::kF32 || t == DType::kF16 || t == DType::kBF16; }

// Row kernels (reductions, softmax, normalizations): rows longer than
// kWarpRowLimit get a block each, shorter ones a warp, and rows of at most
// kThreadRowLimit elements a thread.
inline constexpr int64_t kWarpRowLimit = 512;
inline constexpr int64_t kThreadRowLimit = 8;
inline constexpr int kRowThreads = 256;
inline constexpr int64_t kRowMaxBlocks = 65535;

// Launch geometry for `items` work items shared as `mode` says (0: a
// thread per item, 1: a warp, 2: a block).
inline LaunchDims RowGeometry(int64_t items, int mode) {
  if (mode == 0) return Grid1D(items, kRowThreads, kRowMaxBlocks);
  if (mode == 1) return Grid1D(items * 32, kRowThreads, kRowMaxBlocks);
  return Grid1D(items * kRowThreads, kRowThreads, kRowMaxBlocks);
}

// Rows of a few elements get a thread each (a warp would idle most lanes).
inline int RowMode(int64_t row_length) {
  if (row_length <= kThreadRowLimit) return 0;
  return row_length > kWarpRowLimit ? 2 : 1;
}

// The problem of a row family ("softmax", "norm", "reduce"): `rows` work
// items of `n` elements, `inner` apart (1: contiguous rows). Extents past
// int64 stay as given; the families clamp what they use.
inline jit::KernelProblem RowProblem(const char* family, DType dtype, int64_t rows, int64_t n, int64_t inner) {
  return jit::KernelProblem{family, {dtype}, {{"inner", inner}, {"n", n}, {"rows", rows}}};
}

// The row mode (RowGeometry's) of a row family's variant: its lanes per row.
inline int RowModeOf(const jit::KernelConfig& config) {
  const int lanes = config.Get("lanes", 1);
  return lanes == 1 ? 0 : (lanes == 32 ? 1 : 2);
}

}  // namespace grove::cuda

#endif  // GROVE_LIB_BACKENDS_CUDA_LAUNCH_UTIL_H_
