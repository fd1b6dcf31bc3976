#include "lib/backends/cuda/recording_device.h"

#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"

namespace grove::cuda {
namespace {

class RecordingDeviceImpl final : public RecordingDevice {
 public:
  explicit RecordingDeviceImpl(int arch) : arch_(arch) {}
  ~RecordingDeviceImpl() override {
    for (auto& [p, size] : blocks_) std::free(reinterpret_cast<void*>(p));
  }
  std::string Describe() const override { return absl::StrCat("recording device (sm_", arch_, ", runs nothing)"); }
  bool emulated() const override { return true; }
  int arch() const override { return arch_; }
  absl::StatusOr<void*> Allocate(size_t bytes) override {
    void* p = std::calloc(std::max<size_t>(bytes, 1), 1);
    if (p == nullptr) return absl::ResourceExhaustedError(absl::StrCat("cannot allocate ", bytes, " bytes"));
    std::lock_guard<std::mutex> lock(mu_);
    blocks_[reinterpret_cast<uintptr_t>(p)] = bytes;
    return p;
  }
  void Free(void* ptr) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (blocks_.erase(reinterpret_cast<uintptr_t>(ptr)) > 0) std::free(ptr);
  }
  bool IsDevicePointer(const void* ptr) const override {
    std::lock_guard<std::mutex> lock(mu_);
    const uintptr_t p = reinterpret_cast<uintptr_t>(ptr);
    auto it = blocks_.upper_bound(p);
    if (it == blocks_.begin()) return false;
    --it;
    return p < it->first + std::max<size_t>(it->second, 1);
  }
  absl::Status CopyAsync(void* dst, const void* src, size_t bytes, Stream) override {
    if (bytes > 0) std::memmove(dst, src, bytes);
    return absl::OkStatus();
  }
  absl::Status MemsetAsync(void* dst, int value, size_t bytes, Stream) override {
    if (bytes > 0) std::memset(dst, value, bytes);
    return absl::OkStatus();
  }
  absl::Status Launch(const jit::ModuleSpec& module, absl::string_view, const LaunchDims&, const void*, size_t,
                      Stream) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (seen_.insert(module).second) order_.push_back(module);
    ++stats_.launches;
    return absl::OkStatus();
  }
  absl::Status Gemm(const GemmDesc&, Stream) override {
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.gemms;
    return absl::OkStatus();
  }
  absl::StatusOr<Stream> CreateStream() override { return static_cast<Stream>(nullptr); }
  void DestroyStream(Stream) override {}
  absl::Status Synchronize(Stream) override { return absl::OkStatus(); }
  DeviceStats stats() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return stats_;
  }
  std::vector<jit::ModuleSpec> modules() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return order_;
  }

 private:
  const int arch_;
  mutable std::mutex mu_;
  std::map<uintptr_t, size_t> blocks_;
  absl::flat_hash_set<jit::ModuleSpec> seen_;
  std::vector<jit::ModuleSpec> order_;
  DeviceStats stats_;
};

}  // namespace

std::shared_ptr<RecordingDevice> NewRecordingDevice(int arch) { return std::make_shared<RecordingDeviceImpl>(arch); }

}  // namespace grove::cuda
