// A kernel that exercises every CUDA built-in the emulation provides:
// __shared__ memory, __syncthreads, the warp shuffles and atomics. Its
// result is checked on the emulated device in CI and on a real GPU by the
// gpu tests, so the emulation and the hardware are held to the same answer.
#ifndef GROVE_JIT_KERNELS_SELFTEST_CUH_
#define GROVE_JIT_KERNELS_SELFTEST_CUH_

#include "jit/kernels/prelude.cuh"
#include "jit/kernels/selftest_params.h"

namespace grove_k {

template <typename T>
GROVE_DEVICE void selftest(const SelftestParams& p) {
  __shared__ float warp_partials[32];
  const T* in = static_cast<const T*>(p.in);
  const i64 i = global_thread();
  float v = i < p.n ? to_f32(in[i]) : 0.0f;

  // Lane bookkeeping through every shuffle flavour.
  const int lane = threadIdx.x % 32;
  float* lane_out = static_cast<float*>(p.lane_out) + 4 * i;
  const float down = __shfl_down_sync(0xffffffffu, v, 1);
  const float up = __shfl_up_sync(0xffffffffu, v, 1);
  const float bcast = __shfl_sync(0xffffffffu, v, 0);
  const float xr = __shfl_xor_sync(0xffffffffu, v, 1);
  if (i < p.n) {
    lane_out[0] = down;
    lane_out[1] = up;
    lane_out[2] = bcast;
    lane_out[3] = xr;
  }

  // Block sum: warps, then the first warp over the warp partials.
  float s = warp_sum(v);
  if (lane == 0) warp_partials[threadIdx.x / 32] = s;
  __syncthreads();
  const int warps = (blockDim.x + 31) / 32;
  if (threadIdx.x < 32) {
    float t = threadIdx.x < warps ? warp_partials[threadIdx.x] : 0.0f;
    t = warp_sum(t);
    if (threadIdx.x == 0) {
      static_cast<float*>(p.block_sums)[blockIdx.x] = t;
      atomicAdd(static_cast<float*>(p.total), t);
    }
  }
}

}  // namespace grove_k

#endif  // GROVE_JIT_KERNELS_SELFTEST_CUH_

#if defined(GROVE_T0)
GROVE_ENTRY(selftest, grove_k::SelftestParams) { grove_k::selftest<GROVE_T0>(p); }
#endif
