#include "lib/backends/cuda/recording_device.h"

#include <mutex>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "lib/backends/cuda/host_memory.h"

namespace grove::cuda {
namespace {

class RecordingDeviceImpl final : public HostMemoryDevice<RecordingDevice> {
 public:
  explicit RecordingDeviceImpl(int arch) : HostMemoryDevice({.zero_fill = true}), arch_(arch) {}
  std::string Describe() const override { return absl::StrCat("recording device (sm_", arch_, ", runs nothing)"); }
  bool emulated() const override { return true; }
  int arch() const override { return arch_; }
  absl::Status Launch(const jit::ModuleSpec& module, absl::string_view, const LaunchDims&, const void*, size_t,
                      Stream) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (seen_.insert(module).second) order_.push_back(module);
    counters_.CountLaunch();
    return absl::OkStatus();
  }
  absl::Status Gemm(const GemmDesc&, Stream) override {
    counters_.CountGemm();
    return absl::OkStatus();
  }
  // It runs nothing, so there is nothing to replay: every segment is
  // launched one by one, and every module it uses is recorded.
  bool captures_graphs() const override { return false; }
  absl::Status BeginCapture(Stream) override {
    return absl::UnimplementedError("the recording device does not capture graphs");
  }
  DeviceStats stats() const override {
    DeviceStats s;
    counters_.Fill(&s);
    s.bytes_allocated = memory_.bytes_allocated();
    s.peak_bytes_allocated = memory_.peak_bytes_allocated();
    return s;
  }
  std::vector<jit::ModuleSpec> modules() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return order_;
  }

 private:
  const int arch_;
  mutable std::mutex mu_;
  absl::flat_hash_set<jit::ModuleSpec> seen_;
  std::vector<jit::ModuleSpec> order_;
};

}  // namespace

std::shared_ptr<RecordingDevice> NewRecordingDevice(int arch) { return std::make_shared<RecordingDeviceImpl>(arch); }

}  // namespace grove::cuda
