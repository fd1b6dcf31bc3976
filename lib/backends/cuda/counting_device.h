// A Device that forwards every call to another and counts the calls made
// through it. The real device is one object per GPU, shared by every session
// on it, so its own counts (Device::stats) mix the sessions; a session wraps
// the shared device in its own CountingDevice to learn what its runs did:
// device allocations, synchronizations, copies each way, launches, GEMMs.
//
// Thread-safe: the counts are relaxed atomics (one uncontended add per
// call) and the live-bytes bookkeeping of Allocate and Free takes a lock, so
// it is cheap enough for every call of a run, and correct even if two
// threads used one wrapper (a session uses it from one thread at a time).
#ifndef GROVE_LIB_BACKENDS_CUDA_COUNTING_DEVICE_H_
#define GROVE_LIB_BACKENDS_CUDA_COUNTING_DEVICE_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "lib/backends/cuda/device.h"

namespace grove::cuda {

class CountingDevice final : public ForwardingDevice {
 public:
  // `device` must not be null.
  explicit CountingDevice(std::shared_ptr<Device> device);

  // The calls made through this wrapper since it was made; subtract the
  // counts read before a run from those after it for that run's.
  DeviceCounts counts() const { return counters_.Read(); }

  // Forwarded and counted (as DeviceCounts says); the rest is forwarded.
  absl::StatusOr<void*> Allocate(size_t bytes) override;
  void Free(void* ptr) override;
  // Each Grow of the range that maps more counts as an allocation, its bytes
  // in this wrapper's bytes_allocated.
  absl::StatusOr<std::unique_ptr<AddressRange>> ReserveRange(uint64_t max_bytes) override;
  absl::Status CopyAsync(void* dst, const void* src, size_t bytes, Stream stream) override;
  absl::Status Launch(const jit::ModuleSpec& module, absl::string_view kernel, const LaunchDims& dims,
                      const void* params, size_t params_bytes, Stream stream) override;
  absl::Status Gemm(const GemmDesc& gemm, Stream stream) override;
  // Forwarded; while this wrapper captures, the launches and GEMMs it
  // forwards are recorded, not run, and not counted; a replay counts as one
  // graph launch.
  absl::Status BeginCapture(Stream stream) override;
  absl::StatusOr<std::unique_ptr<DeviceGraph>> EndCapture(Stream stream) override;
  absl::Status LaunchGraph(const DeviceGraph& graph, Stream stream) override;
  absl::Status Synchronize(Stream stream) override;

  // This wrapper's own counts: the call counts of counts(), and
  // bytes_allocated / peak_bytes_allocated over the bytes asked for through
  // it and not yet freed through it. modules_loaded and modules_rebuilt are
  // the wrapped device's (a module is loaded once per device, by whichever
  // user first needs it).
  DeviceStats stats() const override;

 private:
  DeviceCounters counters_;
  std::atomic<bool> capturing_{false};
  mutable std::mutex mu_;
  absl::flat_hash_map<void*, size_t> sizes_;  // live allocations made through this wrapper
  int64_t bytes_allocated_ = 0, peak_bytes_allocated_ = 0;
};

}  // namespace grove::cuda

#endif  // GROVE_LIB_BACKENDS_CUDA_COUNTING_DEVICE_H_
