// The CPU backend behind the runtime's seam (lib/runtime/backend.h): host
// memory, kernels run in place, nothing to copy or wait for.
#ifndef GROVE_LIB_BACKENDS_CPU_CPU_BACKEND_H_
#define GROVE_LIB_BACKENDS_CPU_CPU_BACKEND_H_

#include <memory>

#include "lib/runtime/backend.h"

namespace grove::cpu {

std::unique_ptr<runtime::Backend> CreateCpuBackend();

}  // namespace grove::cpu

#endif  // GROVE_LIB_BACKENDS_CPU_CPU_BACKEND_H_
