// A session on the emulated CUDA device: the CUDA backend with its kernels
// run as host C++ (jit/emulation.h), its graphs captured and replayed, for
// checking a model's CUDA path (segments, graphs, numerics) where there is
// no GPU. Slow: a kernel's threads run one block at a time on the host.
// `grove run/bench --device emulated-cuda` uses it.
//
// Defined in grove_cuda_emulation, not in the library: a program that calls
// it links that archive (the CLI and the tests do).
#ifndef GROVE_LIB_BACKENDS_EMULATED_CUDA_H_
#define GROVE_LIB_BACKENDS_EMULATED_CUDA_H_

#include <memory>

#include "absl/status/statusor.h"
#include "grove/grove.h"

namespace grove::internal {

// A session of `model` on a new emulated CUDA device; options.device is
// ignored, every other option applies as on a GPU.
absl::StatusOr<std::unique_ptr<Session>> CreateEmulatedCudaSession(std::shared_ptr<const Model> model,
                                                                    const SessionOptions& options);

// grove::TuneKernels on a new emulated CUDA device (`grove tune --device
// emulated-cuda`): host times of the kernels as host C++, a table whose
// provenance says emulated, which sessions on a GPU refuse. For tests.
absl::StatusOr<KernelTuneReport> TuneKernelsOnEmulatedDevice(const Model& model, const KernelTuneOptions& options);

}  // namespace grove::internal

#endif  // GROVE_LIB_BACKENDS_EMULATED_CUDA_H_
