// The parts of the If and Loop kernels that do not depend on where tensors
// live, shared by the CPU and CUDA backends (same checks, same messages).
#ifndef GROVE_LIB_BACKENDS_COMMON_CONTROL_FLOW_H_
#define GROVE_LIB_BACKENDS_COMMON_CONTROL_FLOW_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "lib/ir/op_registry.h"

namespace grove::backends {

// Loops that never stop are a hang, not an answer.
inline constexpr int64_t kMaxLoopIterations = 100'000'000;

// A condition (If's cond, Loop's cond input or body output) holds one element.
absl::Status CheckCondShape(const ir::KernelContext& ctx, const TensorView& v, absl::string_view what);

// Runs If's then_branch or else_branch and checks its output count.
absl::StatusOr<std::vector<TensorView>> RunIfBranch(ir::KernelContext& ctx, bool cond);

// Runs iteration `iter` of Loop's body on the carried values (fails past
// kMaxLoopIterations).
absl::StatusOr<std::vector<TensorView>> RunLoopBody(ir::KernelContext& ctx, int body, int64_t iter,
                                                    absl::Span<const TensorView> carried);

// Records scan output j's shape and dtype on the first iteration (a view
// without data in `scan_shape`) and checks later ones against it.
absl::Status CheckScanShape(const ir::KernelContext& ctx, int j, int64_t iter, const TensorView& o,
                            TensorView& scan_shape);

}  // namespace grove::backends

#endif  // GROVE_LIB_BACKENDS_COMMON_CONTROL_FLOW_H_
