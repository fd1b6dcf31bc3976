// Registration of the op definitions (arity, attributes, shape functions),
// one function per op group. lib/runtime/registry.cc calls them all.
#ifndef GROVE_LIB_IR_OPS_OPS_H_
#define GROVE_LIB_IR_OPS_OPS_H_

#include "absl/status/status.h"
#include "lib/ir/op_registry.h"

namespace grove::ir {

// Add Sub Mul Div Relu Sigmoid Tanh Greater Less Equal Where Cast Identity.
absl::Status RegisterElementwiseOps(OpRegistry& registry);
// ReduceMean ReduceSum Softmax.
absl::Status RegisterReductionOps(OpRegistry& registry);
// MatMul Gemm.
absl::Status RegisterLinalgOps(OpRegistry& registry);
// Reshape Transpose Concat Gather Slice Shape.
absl::Status RegisterShapeOps(OpRegistry& registry);
// If Loop.
absl::Status RegisterControlFlowOps(OpRegistry& registry);

}  // namespace grove::ir

#endif  // GROVE_LIB_IR_OPS_OPS_H_
