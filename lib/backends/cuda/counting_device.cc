#include "lib/backends/cuda/counting_device.h"

#include <algorithm>
#include <utility>

namespace grove::cuda {

CountingDevice::CountingDevice(std::shared_ptr<Device> device) : ForwardingDevice(std::move(device)) {}

absl::StatusOr<void*> CountingDevice::Allocate(size_t bytes) {
  counters_.CountAllocation();
  absl::StatusOr<void*> p = device_->Allocate(bytes);
  if (p.ok()) {
    std::lock_guard<std::mutex> lock(mu_);
    sizes_[*p] = bytes;
    bytes_allocated_ += static_cast<int64_t>(bytes);
    peak_bytes_allocated_ = std::max(peak_bytes_allocated_, bytes_allocated_);
  }
  return p;
}

void CountingDevice::Free(void* ptr) {
  if (ptr == nullptr) return;
  counters_.CountFree();
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = sizes_.find(ptr);
    if (it != sizes_.end()) {
      bytes_allocated_ -= static_cast<int64_t>(it->second);
      sizes_.erase(it);
    }
  }
  device_->Free(ptr);
}

absl::StatusOr<std::unique_ptr<AddressRange>> CountingDevice::ReserveRange(uint64_t max_bytes) {
  absl::StatusOr<std::unique_ptr<AddressRange>> r = device_->ReserveRange(max_bytes);
  if (!r.ok()) return r.status();
  return std::unique_ptr<AddressRange>(new CountedRange(std::move(*r), &counters_, [this](int64_t delta) {
    std::lock_guard<std::mutex> lock(mu_);
    bytes_allocated_ += delta;
    peak_bytes_allocated_ = std::max(peak_bytes_allocated_, bytes_allocated_);
  }));
}

absl::Status CountingDevice::CopyAsync(void* dst, const void* src, size_t bytes, Stream stream) {
  if (bytes > 0 && !capturing_.load(std::memory_order_relaxed)) counters_.CountCopy(device_->IsDevicePointer(dst), device_->IsDevicePointer(src), bytes);
  return device_->CopyAsync(dst, src, bytes, stream);
}

absl::Status CountingDevice::Launch(const jit::ModuleSpec& module, absl::string_view kernel, const LaunchDims& dims,
                                    const void* params, size_t params_bytes, Stream stream) {
  absl::Status status = device_->Launch(module, kernel, dims, params, params_bytes, stream);
  if (status.ok() && !capturing_.load(std::memory_order_relaxed)) counters_.CountLaunch();
  return status;
}

absl::Status CountingDevice::Gemm(const GemmDesc& gemm, Stream stream) {
  absl::Status status = device_->Gemm(gemm, stream);
  if (status.ok() && !capturing_.load(std::memory_order_relaxed)) counters_.CountGemm();
  return status;
}

absl::Status CountingDevice::BeginCapture(Stream stream) {
  absl::Status status = device_->BeginCapture(stream);
  if (status.ok()) capturing_.store(true, std::memory_order_relaxed);
  return status;
}

absl::StatusOr<std::unique_ptr<DeviceGraph>> CountingDevice::EndCapture(Stream stream) {
  capturing_.store(false, std::memory_order_relaxed);
  return device_->EndCapture(stream);
}

absl::Status CountingDevice::LaunchGraph(const DeviceGraph& graph, Stream stream) {
  absl::Status status = device_->LaunchGraph(graph, stream);
  if (status.ok()) counters_.CountGraphLaunch();
  return status;
}

absl::Status CountingDevice::Synchronize(Stream stream) {
  counters_.CountSynchronization();
  return device_->Synchronize(stream);
}

DeviceStats CountingDevice::stats() const {
  const DeviceStats inner = device_->stats();
  DeviceStats s;
  s.modules_loaded = inner.modules_loaded;
  s.modules_rebuilt = inner.modules_rebuilt;
  counters_.Fill(&s);
  std::lock_guard<std::mutex> lock(mu_);
  s.bytes_allocated = bytes_allocated_;
  s.peak_bytes_allocated = peak_bytes_allocated_;
  return s;
}

}  // namespace grove::cuda
