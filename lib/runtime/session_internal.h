// Internal ways to make a Session: on a backend made elsewhere (the
// composition root lib/backends/backends.cc makes them; tests use
// lib/backends/backends.h's CreateSessionOnDevice for the emulated device).
#ifndef GROVE_LIB_RUNTIME_SESSION_INTERNAL_H_
#define GROVE_LIB_RUNTIME_SESSION_INTERNAL_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "grove/grove.h"
#include "lib/runtime/backend.h"

namespace grove::internal {

// A session running on `backend`; options.device is ignored.
absl::StatusOr<std::unique_ptr<Session>> CreateSessionWithBackend(std::shared_ptr<const Model> model,
                                                                   const SessionOptions& options,
                                                                   std::unique_ptr<runtime::Backend> backend);

// After a run of `session` with these main inputs: per segment of the main
// plan of their bucket, why the segment keeps a graph per exact shape
// ("" when its bucket's graph serves it; empty when the shapes are not
// bucketed or the bucket has not run).
std::vector<std::string> PinnedSegments(Session& session, absl::Span<const TensorView> inputs);

}  // namespace grove::internal

#endif  // GROVE_LIB_RUNTIME_SESSION_INTERNAL_H_
