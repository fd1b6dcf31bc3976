// Run-time checks of LayerNormalization that the CPU and CUDA kernels make
// alike, with the same error messages.
#ifndef GROVE_LIB_BACKENDS_COMMON_NORM_CHECKS_H_
#define GROVE_LIB_BACKENDS_COMMON_NORM_CHECKS_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "lib/ir/op_registry.h"

namespace grove::backends {

// The normalized axis of LayerNormalization (attribute 'axis', default -1)
// over input 0, made non-negative.
absl::StatusOr<int> LayerNormAxis(const ir::KernelContext& ctx);

// Per-dim strides of input i (Scale or B) right-aligned onto the normalized
// dims, 0 along broadcast dims, after checking that it broadcasts.
absl::StatusOr<std::vector<int64_t>> NormalizedStrides(const ir::KernelContext& ctx, int i, absl::string_view name,
                                                       absl::Span<const int64_t> normalized);

// Checks output 0 (like X) and the optional Mean and InvStdDev outputs (f32,
// X's dims before `axis` and 1s after).
absl::Status CheckLayerNormOutputs(const ir::KernelContext& ctx, int axis);

}  // namespace grove::backends

#endif  // GROVE_LIB_BACKENDS_COMMON_NORM_CHECKS_H_
