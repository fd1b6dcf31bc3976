// The demo models, built in code with grove::ModelBuilder. The examples, the
// tests and the benchmarks all use these. Weights are deterministic.
#ifndef GROVE_EXAMPLES_MODELS_DEMO_MODELS_H_
#define GROVE_EXAMPLES_MODELS_DEMO_MODELS_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "grove/grove.h"

namespace grove::demo {

// x[batch, 16] f32 -> y[batch, 4] f32: Softmax(Relu(x W1 + b1) W2 + b2),
// batch in 1..1024.
absl::StatusOr<std::vector<uint8_t>> BuildMlp();

// One pre-norm-free transformer encoder block with a single head:
// x[batch, seq, 32] f32 -> y[batch, seq, 32] f32, batch 1..64, seq 1..512.
// Exercises MatMul, Transpose, Softmax, ReduceMean, Shape/Gather/Concat/Reshape.
absl::StatusOr<std::vector<uint8_t>> BuildTransformerBlock();

// Early exit: x[batch, 8] f32 -> y. If ReduceMean(x) > 0 the "deep" branch
// (two layers) runs, else the "shallow" one (one layer, a different output
// width: 8 vs 3), so the output shape depends on the data.
absl::StatusOr<std::vector<uint8_t>> BuildEarlyExit();

// A Loop with ONNX semantics: inputs trip_count (i64 scalar), x[n] f32.
// Each iteration doubles the carried value and adds the iteration number, and
// stops early when its sum exceeds limit (f32 scalar input). Outputs: the
// final carried value [n] and the scan of carried sums [iterations].
absl::StatusOr<std::vector<uint8_t>> BuildLoop();

// How a decoder keeps the state of every step (see BuildStepHistory).
enum class History {
  kScan,      // a Loop scan output (ONNX's own way)
  kList,      // a sequence carried through the Loop (PyTorch's list.append)
  kConcat,    // a tensor carried through the Loop, one row longer per step
};

// A recurrent decoder loop: inputs steps (i64 scalar), h0 f32[batch, 64];
// each step h = tanh(h W + b), and the model returns every step's h as
// f32[steps, batch, 64] ("history"), kept the way `history` says.
absl::StatusOr<std::vector<uint8_t>> BuildStepHistory(History history);

// A straight chain of `num_ops` elementwise and MatMul ops on x[batch, 64],
// for planner and per-op overhead benchmarks.
absl::StatusOr<std::vector<uint8_t>> BuildChain(int num_ops);

// Scaled dot-product attention as PyTorch exports it: Q [1, heads, sq,
// head_dim], K and V [1, heads, sk, head_dim] -> y = Softmax(Q Kᵀ /
// sqrt(head_dim)) V (Transpose, MatMul, Div, Softmax, MatMul), which the
// plan pass fuses into one FusedAttention step; all of `dtype` (f32, f16 or
// bf16). A length < 1 is the symbol "s" (1..4096), shared by sq and sk when
// both are. `causal`: the scaled scores pass through Where(keep, scores,
// -inf) first, keep [sq, sk] a bool weight true for key j <= i + sk - sq
// (as PyTorch's is_causal aligns it), both lengths fixed.
absl::StatusOr<std::vector<uint8_t>> BuildAttention(int64_t sq, int64_t sk, int64_t heads, int64_t head_dim,
                                                    DType dtype = DType::kF32, bool causal = false);

}  // namespace grove::demo

#endif  // GROVE_EXAMPLES_MODELS_DEMO_MODELS_H_
