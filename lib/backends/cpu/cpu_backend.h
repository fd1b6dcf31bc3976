// The CPU backend behind the runtime's seam (lib/runtime/backend.h): host
// memory, kernels run in place, nothing to copy or wait for.
#ifndef GROVE_LIB_BACKENDS_CPU_CPU_BACKEND_H_
#define GROVE_LIB_BACKENDS_CPU_CPU_BACKEND_H_

#include <memory>

#include "absl/status/statusor.h"
#include "lib/runtime/backend.h"

namespace grove::cpu {

// A CPU backend whose kernels split their work over `intra_op_threads`
// threads (SessionOptions::intra_op_threads: 0 is one per available CPU),
// the calling thread and a pool of its own (lib/backends/cpu/thread_pool.h).
absl::StatusOr<std::unique_ptr<runtime::Backend>> CreateCpuBackend(int intra_op_threads = 1);

}  // namespace grove::cpu

#endif  // GROVE_LIB_BACKENDS_CPU_CPU_BACKEND_H_
