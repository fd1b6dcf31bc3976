// Kernels of conditional graph nodes (jit/kernels/graph_cond_params.h): the
// one that sets a node's handle from a flag in device memory, and a Loop's
// trip counter, one thread each; and a Loop's scan output written at the
// trip its counter says (grid-stride over the slice's bytes). On the emulated device a handle is the
// address of the value its conditional node reads (jit/emulation.h).
#ifndef GROVE_JIT_KERNELS_GRAPH_COND_CUH_
#define GROVE_JIT_KERNELS_GRAPH_COND_CUH_

#include "jit/kernels/graph_cond_params.h"
#include "jit/kernels/index_common.cuh"
#include "jit/kernels/prelude.cuh"

#if defined(__CUDACC_RTC__) || defined(__CUDACC__)
// The device runtime's own declaration (cuda_device_runtime_api.h), which
// NVRTC does not include: resolved by the driver when the module loads.
extern "C" __device__ __cudart_builtin__ void cudaGraphSetConditional(unsigned long long handle, unsigned int value);
#endif

namespace grove_k {
namespace gc {

GROVE_DEVICE void set_conditional(const SetConditionalParams& p) {
  if (global_thread() != 0) return;
  const unsigned int v = *p.flag != 0 ? 1u : 0u;
  cudaGraphSetConditional(p.handle, v);
  if (p.negated != 0) cudaGraphSetConditional(p.negated, 1u - v);
}

GROVE_DEVICE void loop_step(const LoopStepParams& p) {
  if (global_thread() != 0) return;
  const i64 trips = p.trips_ptr != 0 ? *p.trips_ptr : p.trips_value;
  const i64 iter = p.init != 0 ? 0 : *p.iter + 1;
  const bool cond = p.cond_ptr != 0 ? *p.cond_ptr != 0 : p.cond_value != 0;
  const bool more = iter < trips && cond;
  const bool go = more && iter < p.cap;
  *p.iter = iter;
  *p.flag = go ? 1 : 0;
  if (more && !go && p.check.record != 0) mv::report_check(p.check, iter, p.cap, 0, 0);
}

// 8 bytes a thread where both pointers allow, the rest one by one.
GROVE_DEVICE void copy_bytes(const CopyBytesParams& p) {
  const i64 stride = static_cast<i64>(gridDim.x) * blockDim.x;
  i64 done = 0;
  if (((reinterpret_cast<u64>(p.dst) | reinterpret_cast<u64>(p.src)) & 7u) == 0) {
    const i64 words = p.bytes / 8;
    u64* d = reinterpret_cast<u64*>(p.dst);
    const u64* s = reinterpret_cast<const u64*>(p.src);
    for (i64 i = global_thread(); i < words; i += stride) d[i] = s[i];
    done = words * 8;
  }
  for (i64 i = done + global_thread(); i < p.bytes; i += stride) p.dst[i] = p.src[i];
}

GROVE_DEVICE void scan_write(const ScanWriteParams& p) {
  const i64 iter = *p.iter;
  if (iter < 0 || iter >= p.limit) return;
  u8* dst = p.dst + iter * p.bytes;
  const i64 stride = static_cast<i64>(gridDim.x) * blockDim.x;
  for (i64 i = global_thread(); i < p.bytes; i += stride) dst[i] = p.src[i];
}

}  // namespace gc
}  // namespace grove_k

#endif  // GROVE_JIT_KERNELS_GRAPH_COND_CUH_

#if defined(GROVE_T0)
GROVE_ENTRY(set_conditional, grove_k::SetConditionalParams) { grove_k::gc::set_conditional(p); }
GROVE_ENTRY(loop_step, grove_k::LoopStepParams) { grove_k::gc::loop_step(p); }
GROVE_ENTRY(scan_write, grove_k::ScanWriteParams) { grove_k::gc::scan_write(p); }
GROVE_ENTRY(copy_bytes, grove_k::CopyBytesParams) { grove_k::gc::copy_bytes(p); }
#endif
