#include "lib/backends/cpu/cpu_backend.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "lib/backends/cpu/activation_fusion.h"
#include "lib/backends/cpu/post_op.h"
#include "lib/backends/cpu/thread_pool.h"

namespace grove::cpu {
namespace {

class CpuBackend : public runtime::Backend {
 public:
  explicit CpuBackend(std::unique_ptr<ThreadPool> pool) : pool_(std::move(pool)) {}
  ir::Backend kind() const override { return ir::Backend::kCpu; }
  std::string Describe() const override { return "cpu"; }
  bool Takes(const ir::Node& node, absl::Span<const DType>) const override {
    return node.def->kernels[static_cast<int>(ir::Backend::kCpu)] != nullptr;
  }
  // Conv / MatMul / Gemm + activation as one oneDNN step, chains of them, and
  // channels-last activations between them (activation_fusion.h).
  void RefinePlan(runtime::PlanGraph& plan) const override {
    FuseActivations(plan);
    FuseOneDnnChains(plan);
    AssignChannelsLast(plan);
  }
  std::string StepLayout(const ir::Node& node) const override {
    const int64_t bits = node.attrs.GetInt(kChannelsLastAttr, 0);
    if (bits == 3) return "channels-last X and Y";
    if (bits == 1) return "channels-last X";
    if (bits == 2) return "channels-last Y";
    return "";
  }
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
  ir::IntraOpThreads* intra_op_threads() override { return pool_.get(); }

 private:
  std::unique_ptr<ThreadPool> pool_;  // nullptr: one thread
};

}  // namespace

absl::StatusOr<std::unique_ptr<runtime::Backend>> CreateCpuBackend(int intra_op_threads) {
  if (intra_op_threads < 0) {
    return absl::InvalidArgumentError(absl::StrCat("intra_op_threads must be >= 0, is ", intra_op_threads));
  }
  const int threads = intra_op_threads == 0 ? AvailableCpus() : intra_op_threads;
  std::unique_ptr<ThreadPool> pool;
  if (threads > 1) {
    absl::StatusOr<std::unique_ptr<ThreadPool>> made = ThreadPool::Create(threads);
    if (!made.ok()) return made.status();
    pool = *std::move(made);
  }
  return std::make_unique<CpuBackend>(std::move(pool));
}

}  // namespace grove::cpu
