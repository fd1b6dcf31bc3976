// The composition root: the one place that knows every backend. It
// registers the kernels of both backends with the op registry
// (runtime::GlobalOpRegistry), makes the backend a session asks for
// (runtime::CreateBackend, declared in lib/runtime/backend.h), and gives
// tests and tools a session on a given CUDA device object.
#ifndef GROVE_LIB_BACKENDS_BACKENDS_H_
#define GROVE_LIB_BACKENDS_BACKENDS_H_

#include <memory>

#include "absl/status/statusor.h"
#include "grove/grove.h"
#include "lib/backends/cuda/device.h"

namespace grove::internal {

// A session on `device` (the CUDA backend: a real, emulated or recording
// device), or on the CPU when it is null. options.device is ignored.
absl::StatusOr<std::unique_ptr<Session>> CreateSessionOnDevice(std::shared_ptr<const Model> model,
                                                                const SessionOptions& options,
                                                                std::shared_ptr<cuda::Device> device);

// grove::TuneKernels on a given device (lib/backends/kernel_tuner.cc); with
// options.dry_run, `device` may be null (a recording device of options.arch
// plans). The emulated device's timings are host times: tests only.
absl::StatusOr<KernelTuneReport> TuneKernelsOnDevice(const Model& model, const KernelTuneOptions& options,
                                                     std::shared_ptr<cuda::Device> device);

}  // namespace grove::internal

#endif  // GROVE_LIB_BACKENDS_BACKENDS_H_
