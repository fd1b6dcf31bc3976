#include "lib/backends/cpu/cpu_backend.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "lib/backends/cpu/activation_fusion.h"

namespace grove::cpu {
namespace {

class CpuBackend : public runtime::Backend {
 public:
  ir::Backend kind() const override { return ir::Backend::kCpu; }
  std::string Describe() const override { return "cpu"; }
  bool Takes(const ir::Node& node, absl::Span<const DType>) const override {
    return node.def->kernels[static_cast<int>(ir::Backend::kCpu)] != nullptr;
  }
  // Conv / MatMul / Gemm + activation as one oneDNN step (activation_fusion.h).
  void RefinePlan(runtime::PlanGraph& plan) const override { FuseActivations(plan); }
  bool host_memory() const override { return true; }
  absl::StatusOr<void*> Allocate(uint64_t bytes) override {
    const uint64_t cap = (std::max<uint64_t>(bytes, 64) + 63) / 64 * 64;
    void* p = std::aligned_alloc(64, cap);
    if (p == nullptr) return absl::ResourceExhaustedError(absl::StrCat("cannot allocate ", bytes, " bytes"));
    return p;
  }
  void Free(void* ptr) override { std::free(ptr); }
  bool IsDevicePointer(const void*) const override { return true; }
  absl::Status CopyAsync(void* dst, const void* src, uint64_t bytes) override {
    if (bytes > 0) std::memmove(dst, src, bytes);
    return absl::OkStatus();
  }
  absl::Status Synchronize() override { return absl::OkStatus(); }
  const void* device_key() const override { return nullptr; }
  absl::StatusOr<std::shared_ptr<const uint8_t>> Upload(const uint8_t* bytes, uint64_t) override {
    // Host memory already: the model's own mapping, not owned here.
    return std::shared_ptr<const uint8_t>(bytes, [](const uint8_t*) {});
  }
  void* kernel_context() override { return nullptr; }
};

}  // namespace

std::unique_ptr<runtime::Backend> CreateCpuBackend() { return std::make_unique<CpuBackend>(); }

}  // namespace grove::cpu
