// PLACEHOLDER: replaced by the op group's real definitions.
#include "lib/ir/ops/ops.h"
namespace grove::ir {
absl::Status RegisterMathOps(OpRegistry& registry) { return absl::OkStatus(); }
}  // namespace grove::ir
