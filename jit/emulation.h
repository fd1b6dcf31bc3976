// Host emulation of the CUDA built-ins that grove's kernel templates use, so
// the same jit/kernels/*.cuh text compiles as host C++ and runs in CI on
// machines without a GPU (jit/emulation_launch.h runs a launch).
//
// Model: blocks run one after another on the launching host thread; the
// threads of a block are fibers (each its own stack) that run one at a time
// and switch at each barrier, so __syncthreads is a real barrier and
// __shared__ (a function-local static here) is shared by exactly one block at
// a time. Warp shuffles exchange through a per-thread slot array between two
// warp-wide barriers, so every lane of a warp must reach each shuffle (the
// kernels use full-mask shuffles in uniform control flow, as CUDA requires).
// Kernels must not return before a __syncthreads that other threads reach.
#ifndef GROVE_JIT_EMULATION_H_
#define GROVE_JIT_EMULATION_H_

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

struct uint3 {
  unsigned int x = 0, y = 0, z = 0;
};
struct dim3 {
  unsigned int x = 1, y = 1, z = 1;
  constexpr dim3() = default;
  constexpr dim3(unsigned int x_, unsigned int y_ = 1, unsigned int z_ = 1) : x(x_), y(y_), z(z_) {}
};

extern thread_local uint3 threadIdx;
extern thread_local uint3 blockIdx;
extern thread_local dim3 blockDim;
extern thread_local dim3 gridDim;

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static
#define GROVE_EMU_CAT2(a, b) a##b
#define GROVE_EMU_CAT(a, b) GROVE_EMU_CAT2(a, b)
#define GROVE_EMU_STR2(a) #a
#define GROVE_EMU_STR(a) GROVE_EMU_STR2(a)

namespace grove::emu {

using EntryFn = void (*)(const void* params);
// Adds an entry point under its name (e.g. "ew_chain__f32"), defined in
// kernel file `file` (__FILE__ of the .cuh); called by the GROVE_ENTRY
// registrars of the emulated kernel library.
bool RegisterEntry(const char* name, const char* file, EntryFn fn);

void SyncThreads();
// Exchanges one 8-byte slot per lane of the calling warp; returns what lane
// `src` wrote (its own value when `src` is outside the warp).
uint64_t WarpExchange(uint64_t mine, int src);
int LaneId();

template <typename T>
T Shuffle(T v, int src) {
  static_assert(sizeof(T) <= 8 && std::is_trivially_copyable_v<T>);
  uint64_t bits = 0;
  std::memcpy(&bits, &v, sizeof(T));
  const uint64_t got = WarpExchange(bits, src);
  T out;
  std::memcpy(&out, &got, sizeof(T));
  return out;
}

}  // namespace grove::emu

// Registers an entry point as a host function taking its parameter struct.
#define GROVE_ENTRY(name, Params)                                                                   \
  static void GROVE_EMU_CAT(name, GROVE_SUFFIX)(const Params p);                                     \
  [[maybe_unused]] static const bool GROVE_EMU_CAT(grove_registered_, GROVE_EMU_CAT(name, GROVE_SUFFIX)) = \
      ::grove::emu::RegisterEntry(GROVE_EMU_STR(GROVE_EMU_CAT(name, GROVE_SUFFIX)), __FILE__,      \
                                  [](const void* raw) {                                              \
        GROVE_EMU_CAT(name, GROVE_SUFFIX)(*static_cast<const Params*>(raw));                         \
      });                                                                                            \
  static void GROVE_EMU_CAT(name, GROVE_SUFFIX)(const Params p)

inline void __syncthreads() { grove::emu::SyncThreads(); }
// Conditional graph nodes: on the emulated device a handle is the address
// of the unsigned value its node reads when the graph replays
// (lib/backends/cuda/host_memory.h, HostMemoryDevice::ComposeGraph).
inline void cudaGraphSetConditional(unsigned long long handle, unsigned int value) {
  *reinterpret_cast<unsigned int*>(static_cast<uintptr_t>(handle)) = value;
}

template <typename T>
T __shfl_xor_sync(unsigned /*mask*/, T v, int lane_mask, int width = 32) {
  return grove::emu::Shuffle(v, grove::emu::LaneId() ^ lane_mask);
}
template <typename T>
T __shfl_down_sync(unsigned /*mask*/, T v, unsigned delta, int width = 32) {
  const int lane = grove::emu::LaneId();
  const int src = lane + static_cast<int>(delta);
  return grove::emu::Shuffle(v, (lane % width) + static_cast<int>(delta) < width ? src : lane);
}
template <typename T>
T __shfl_up_sync(unsigned /*mask*/, T v, unsigned delta, int width = 32) {
  const int lane = grove::emu::LaneId();
  return grove::emu::Shuffle(v, (lane % width) >= static_cast<int>(delta) ? lane - static_cast<int>(delta) : lane);
}
template <typename T>
T __shfl_sync(unsigned /*mask*/, T v, int src, int width = 32) {
  const int lane = grove::emu::LaneId();
  return grove::emu::Shuffle(v, lane - lane % width + src % width);
}

template <typename T>
T atomicAdd(T* address, T v) {
  return std::atomic_ref<T>(*address).fetch_add(v);
}
template <typename T>
T atomicMax(T* address, T v) {
  std::atomic_ref<T> a(*address);
  T old = a.load();
  while (old < v && !a.compare_exchange_weak(old, v)) {
  }
  return old;
}
template <typename T>
T atomicMin(T* address, T v) {
  std::atomic_ref<T> a(*address);
  T old = a.load();
  while (old > v && !a.compare_exchange_weak(old, v)) {
  }
  return old;
}
template <typename T>
T atomicCAS(T* address, T compare, T v) {
  std::atomic_ref<T>(*address).compare_exchange_strong(compare, v);
  return compare;
}
template <typename T>
T atomicExch(T* address, T v) {
  return std::atomic_ref<T>(*address).exchange(v);
}

inline float __expf(float x) { return std::exp(x); }
inline float __logf(float x) { return std::log(x); }
inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }
inline double rsqrt(double x) { return 1.0 / std::sqrt(x); }
inline float __fdividef(float a, float b) { return a / b; }
template <typename T>
T __ldg(const T* p) {
  return *p;
}
inline float __int_as_float(int v) {
  float f;
  std::memcpy(&f, &v, 4);
  return f;
}
inline int __float_as_int(float v) {
  int i;
  std::memcpy(&i, &v, 4);
  return i;
}

#endif  // GROVE_JIT_EMULATION_H_
