// Run-time checks of elementwise ops that the CPU and CUDA kernels make
// alike, with the same error messages.
#ifndef GROVE_LIB_BACKENDS_COMMON_ELEMENTWISE_CHECKS_H_
#define GROVE_LIB_BACKENDS_COMMON_ELEMENTWISE_CHECKS_H_

#include "absl/status/status.h"
#include "lib/ir/op_registry.h"

namespace grove::backends {

// Variadic Min, Max, Sum, Mean: at least one input, all present and of one
// dtype, broadcasting together onto output 0.
absl::Status CheckVariadicInputs(const ir::KernelContext& ctx);

// Cast: output 0 has the dtype of attribute 'to' and input 0's shape.
absl::Status CheckCastOutput(const ir::KernelContext& ctx);

// Not: input 0 is bool, output 0 bool of its shape.
absl::Status CheckNotInputs(const ir::KernelContext& ctx);

// And, Or, Xor: inputs 0 and 1 are bool, output 0 bool.
absl::Status CheckLogicalInputs(const ir::KernelContext& ctx);

// Where: the condition is bool, X and Y share output 0's dtype.
absl::Status CheckWhereInputs(const ir::KernelContext& ctx);

}  // namespace grove::backends

#endif  // GROVE_LIB_BACKENDS_COMMON_ELEMENTWISE_CHECKS_H_
