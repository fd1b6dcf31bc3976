#include "lib/backends/cuda/recording_device.h"

#include <mutex>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "lib/backends/cuda/host_memory.h"

namespace grove::cuda {
namespace {

class RecordingDeviceImpl final : public HostMemoryDevice<RecordingDevice> {
 public:
  RecordingDeviceImpl(int arch, bool captures)
      : HostMemoryDevice({.zero_fill = true}), arch_(arch), captures_(captures) {}
  std::string Describe() const override { return absl::StrCat("recording device (sm_", arch_, ", runs nothing)"); }
  bool emulated() const override { return true; }
  int arch() const override { return arch_; }
  absl::Status Launch(const jit::ModuleSpec& module, absl::string_view, const LaunchDims&, const void*, size_t,
                      Stream) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (seen_.insert(module).second) order_.push_back(module);
    if (HostGraph* g = capturing()) {
      g->Add([] { return absl::OkStatus(); }, 0);  // a node that runs nothing
      return absl::OkStatus();
    }
    counters_.CountLaunch();
    return absl::OkStatus();
  }
  absl::Status Gemm(const GemmDesc&, Stream) override {
    if (HostGraph* g = capturing()) {
      g->Add([] { return absl::OkStatus(); }, 0);
      return absl::OkStatus();
    }
    counters_.CountGemm();
    return absl::OkStatus();
  }
  // By default it runs nothing, so there is nothing to replay: every
  // segment is launched one by one, and every module it uses is recorded.
  // A capturing one records graphs of nodes that run nothing, so that the
  // session's graph and bucket decisions (captures, refreshes, pinned
  // segments) are made as on a GPU.
  bool captures_graphs() const override { return captures_; }
  absl::Status BeginCapture(Stream stream) override {
    if (captures_) return HostMemoryDevice::BeginCapture(stream);
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
  const bool captures_;
  mutable std::mutex mu_;
  absl::flat_hash_set<jit::ModuleSpec> seen_;
  std::vector<jit::ModuleSpec> order_;
};

}  // namespace

std::shared_ptr<RecordingDevice> NewRecordingDevice(int arch, bool captures_graphs) {
  return std::make_shared<RecordingDeviceImpl>(arch, captures_graphs);
}

}  // namespace grove::cuda
