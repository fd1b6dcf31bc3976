// The process-wide op registry with every op group and backend registered.
#ifndef GROVE_LIB_RUNTIME_REGISTRY_H_
#define GROVE_LIB_RUNTIME_REGISTRY_H_

#include "lib/ir/op_registry.h"

namespace grove::runtime {

// Built once, on first use; immutable afterwards and safe to share.
const ir::OpRegistry& GlobalOpRegistry();

}  // namespace grove::runtime

#endif  // GROVE_LIB_RUNTIME_REGISTRY_H_
