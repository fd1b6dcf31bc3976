#include "lib/backends/emulated_cuda.h"

#include "lib/backends/backends.h"
#include "lib/backends/cuda/emulated_device.h"

namespace grove::internal {

absl::StatusOr<std::unique_ptr<Session>> CreateEmulatedCudaSession(std::shared_ptr<const Model> model,
                                                                    const SessionOptions& options) {
  return CreateSessionOnDevice(std::move(model), options, cuda::NewEmulatedDevice());
}

absl::StatusOr<KernelTuneReport> TuneKernelsOnEmulatedDevice(const Model& model, const KernelTuneOptions& options) {
  return TuneKernelsOnDevice(model, options, cuda::NewEmulatedDevice());
}

}  // namespace grove::internal
