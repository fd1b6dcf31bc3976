// Internal ways to make a Session, for tests and tools: on a given CUDA
// device object (the emulated device in CI), bypassing device discovery.
#ifndef GROVE_LIB_RUNTIME_SESSION_INTERNAL_H_
#define GROVE_LIB_RUNTIME_SESSION_INTERNAL_H_

#include <memory>

#include "absl/status/statusor.h"
#include "grove/grove.h"
#include "lib/backends/cuda/device.h"

namespace grove::internal {

// A session on `device` (CUDA backend), or on the CPU when it is null.
// options.device is ignored.
absl::StatusOr<std::unique_ptr<Session>> CreateSessionOnDevice(std::shared_ptr<const Model> model,
                                                                const SessionOptions& options,
                                                                std::shared_ptr<cuda::Device> device);

}  // namespace grove::internal

#endif  // GROVE_LIB_RUNTIME_SESSION_INTERNAL_H_
