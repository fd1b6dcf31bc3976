// Chains of elementwise ops fused into one CUDA kernel (jit/kernels/
// elementwise.cuh, entry ew_chain): the plan pass finds the chains, this
// builds the node that runs one. Also the operand layout shared by the
// elementwise kernels (lib/backends/cuda/elementwise.cc) and the fused one.
#ifndef GROVE_LIB_BACKENDS_CUDA_FUSION_H_
#define GROVE_LIB_BACKENDS_CUDA_FUSION_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "jit/kernel_config.h"
#include "jit/kernels/elementwise_params.h"
#include "lib/backends/cuda/device.h"
#include "lib/ir/graph.h"
#include "lib/ir/op_registry.h"

namespace grove::cuda {

// Whether `node` can be a link of a fused elementwise chain on the CUDA
// backend: a float unary op (Neg Abs Exp Log Sqrt Reciprocal Erf Tanh
// Sigmoid Relu LeakyRelu Elu Gelu HardSigmoid HardSwish Softplus, the
// trigonometric and hyperbolic functions, Softsign Selu Celu
// ThresholdedRelu, Clip with
// its bounds as inputs, not the opset-6 attributes), Add Sub Mul Div Pow, or
// Min Max Sum Mean of one or two inputs; one output. The node alone does not
// tell dtypes: the plan pass must also check that every input and output of
// every link has the chain's dtype, one of f32, f16, bf16, f64 (the fused
// kernel refuses anything else when it runs).
bool IsFusableElementwise(const ir::Node& node);

// Builds one node that computes the chain: chain[i+1] consumes chain[i]'s
// output 0 (exactly one of chain[i+1]'s inputs is that tensor id); every
// other input of every link is an external input. `external_inputs` receives
// those tensor ids in order of first use (the fused node's inputs; a tensor
// read by several links appears once); the fused node's output is
// chain.back()'s output 0. The node's def points to a static OpDef (not in
// the registry, not foldable, no CPU kernel) whose kernels[kCuda] runs the
// fused kernel; its program (op codes, which operand each link reads, scalar
// attributes like alpha) is stored in the node's attrs ("ew_ops",
// "ew_srcs", "ew_fa", "ew_fb"). At most grove_k::kEwMaxLinks links and
// grove_k::kEwMaxOperands external inputs.
absl::StatusOr<ir::Node> MakeFusedElementwiseNode(absl::Span<const ir::Node* const> chain,
                                                  std::vector<int>* external_inputs);

// A unary op's scalar attributes as the kernel reads them (fa, fb of
// EwParams / the chain's links, with ONNX's defaults), and its op code, which
// an attribute may change (Gelu approximate="tanh" -> kEwGeluTanh). Used by
// the elementwise kernels and the fused chains alike.
int EwUnaryAttributes(int op, const ir::Attributes& attrs, double* fa, double* fb);

// The fused nodes' OpDef (type "FusedElementwise").
const ir::OpDef& FusedElementwiseOpDef();

// Operands broadcast (numpy rules) to `out_shape`, laid out for the
// elementwise kernels: output dims of size 1 dropped, neighbouring dims
// merged where every operand is contiguous across them, per-operand element
// strides (0 along broadcast dims) and a mode (contiguous, scalar, strided).
// A nullptr shape is a scalar operand outside the broadcast (Clip bounds).
struct EwLayout {
  grove_k::Dims shape{};
  grove_k::Strides strides[grove_k::kEwMaxOperands]{};
  int mode[grove_k::kEwMaxOperands]{};
  bool simple = true;  // no strided operand
  int64_t num_elements = 0;
};
// InvalidArgument (the message names the shapes) when the shapes do not
// broadcast or broadcast to another shape than `out_shape`; Unimplemented
// past kEwMaxOperands operands or kMaxRank merged dims.
absl::StatusOr<EwLayout> PlanEwLayout(absl::Span<const int64_t> out_shape,
                                      absl::Span<const std::vector<int64_t>* const> in_shapes);

// The "ew" kernel family's problem (jit/kernel_config.h): n elements,
// `inputs` operands, `ops` operations per element, and its vec extent: 4
// where the kernel's vector path can take the launch (`vector`: no strided
// operand, a same-typed op), else 1, so that only scalar variants are
// valid for it.
jit::KernelProblem EwProblem(DType dtype, int64_t n, int inputs, int ops, bool vector);
// The "cast" family's problem: n contiguous elements from one dtype to
// another.
jit::KernelProblem CastProblem(DType from, DType to, int64_t n);

}  // namespace grove::cuda

#endif  // GROVE_LIB_BACKENDS_CUDA_FUSION_H_
