// Registration of the op definitions (arity, attributes, shape functions),
// one function per op group. lib/runtime/registry.cc calls them all and adds
// the backends' kernels; OpDefinitions() is the definitions alone, for code
// that reads or writes models without running them (tools/onnx).
#ifndef GROVE_LIB_IR_OPS_OPS_H_
#define GROVE_LIB_IR_OPS_OPS_H_

#include <cstddef>

#include "absl/status/status.h"
#include "lib/ir/op_registry.h"

namespace grove::ir {

// Add Sub Mul Div Relu Sigmoid Tanh Greater Less Equal Where Cast Identity.
absl::Status RegisterElementwiseOps(OpRegistry& registry);
// ReduceMean ReduceSum.
absl::Status RegisterReductionOps(OpRegistry& registry);
// MatMul Gemm.
absl::Status RegisterLinalgOps(OpRegistry& registry);
// Reshape Transpose Concat Gather Slice Shape.
absl::Status RegisterShapeOps(OpRegistry& registry);
// If Loop Scan.
absl::Status RegisterControlFlowOps(OpRegistry& registry);
// Pow Sqrt Exp Log Neg Abs Reciprocal Erf LeakyRelu Elu Gelu HardSigmoid
// HardSwish Softplus Clip Min Max Sum Mean GreaterOrEqual LessOrEqual Not And
// Or Xor CastLike.
absl::Status RegisterMathOps(OpRegistry& registry);
// Conv ConvTranspose MaxPool AveragePool GlobalAveragePool GlobalMaxPool LRN.
absl::Status RegisterNnOps(OpRegistry& registry);
// BatchNormalization InstanceNormalization LayerNormalization
// MeanVarianceNormalization Softmax LogSoftmax Hardmax.
absl::Status RegisterNormOps(OpRegistry& registry);
// ReduceMax ReduceMin ReduceProd ReduceL1 ReduceL2 ReduceLogSum ReduceLogSumExp
// ReduceSumSquare ArgMax ArgMin TopK CumSum NonZero.
absl::Status RegisterReduceSearchOps(OpRegistry& registry);
// Flatten Squeeze Unsqueeze Split GatherElements ScatterND Expand Tile Pad
// Size Range ConstantOfShape Trilu OneHot Resize.
absl::Status RegisterLayoutOps(OpRegistry& registry);
// LSTM GRU RNN.
absl::Status RegisterRecurrentOps(OpRegistry& registry);
// ScatterElements Scatter GatherND DepthToSpace SpaceToDepth EyeLike Compress
// ReverseSequence Unique Det Einsum.
absl::Status RegisterIndexingOps(OpRegistry& registry);
// NegativeLogLikelihoodLoss SoftmaxCrossEntropyLoss.
absl::Status RegisterLossOps(OpRegistry& registry);
// NonMaxSuppression GridSample RoiAlign MaxUnpool DFT STFT MelWeightMatrix.
absl::Status RegisterVisionOps(OpRegistry& registry);
// QuantizeLinear DequantizeLinear DynamicQuantizeLinear MatMulInteger
// QLinearMatMul ConvInteger QLinearConv.
absl::Status RegisterQuantizationOps(OpRegistry& registry);
// TfIdfVectorizer.
absl::Status RegisterTextOps(OpRegistry& registry);
// SequenceEmpty SequenceConstruct SequenceInsert SequenceErase SequenceAt
// SequenceLength ConcatFromSequence SplitToSequence SequenceMap Optional
// OptionalHasElement OptionalGetElement.
absl::Status RegisterSequenceOps(OpRegistry& registry);
// FusedAttention (grove's own; made by a plan pass, lib/ir/ops/attention_attrs.h).
absl::Status RegisterAttentionOps(OpRegistry& registry);

// Every group above, in this order; the first error stops it.
absl::Status RegisterAllOps(OpRegistry& registry);

// Room for every op grove defines (168 today): a registry reserves it before
// the groups register, so building one (a process's first model open) does
// not rehash. op_definitions_test holds the count below it.
inline constexpr size_t kOpCountHint = 256;

// The definitions of every op, no kernels: built once, on first use;
// immutable afterwards and safe to share.
const OpRegistry& OpDefinitions();

}  // namespace grove::ir

#endif  // GROVE_LIB_IR_OPS_OPS_H_
