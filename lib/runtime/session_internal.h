// Internal ways to make a Session: on a backend made elsewhere (the
// composition root lib/backends/backends.cc makes them; tests use
// lib/backends/backends.h's CreateSessionOnDevice for the emulated device).
#ifndef GROVE_LIB_RUNTIME_SESSION_INTERNAL_H_
#define GROVE_LIB_RUNTIME_SESSION_INTERNAL_H_

#include <memory>

#include "absl/status/statusor.h"
#include "grove/grove.h"
#include "lib/runtime/backend.h"

namespace grove::internal {

// A session running on `backend`; options.device is ignored.
absl::StatusOr<std::unique_ptr<Session>> CreateSessionWithBackend(std::shared_ptr<const Model> model,
                                                                   const SessionOptions& options,
                                                                   std::unique_ptr<runtime::Backend> backend);

}  // namespace grove::internal

#endif  // GROVE_LIB_RUNTIME_SESSION_INTERNAL_H_
