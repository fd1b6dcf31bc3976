// Helpers for end-to-end tests: load a demo model, read its weights by name,
// make deterministic inputs, compare outputs.
#ifndef GROVE_TEST_MODEL_TEST_UTIL_H_
#define GROVE_TEST_MODEL_TEST_UTIL_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "grove/grove.h"

namespace grove::testing {

std::shared_ptr<const Model> LoadOrDie(absl::StatusOr<std::vector<uint8_t>> bytes);
// A session on the CPU; aborts with the reason when it cannot be made.
std::unique_ptr<Session> CpuSession(std::shared_ptr<const Model> model);

// The f32 weight called `name` (empty when absent).
std::vector<float> WeightF32(const Model& model, const std::string& name);

// Deterministic values in [-1, 1).
std::vector<float> RandomF32(size_t n, uint32_t seed);

// Row-major reference helpers on plain vectors.
std::vector<float> MatMulRef(const std::vector<float>& a, const std::vector<float>& b, int64_t m, int64_t k,
                             int64_t n);

std::vector<float> ToVector(const TensorView& v);

// A decoder-shaped model with a sequence carried through a Loop: input "m"
// (i64 scalar trip count) and "x" (f32[2]); each trip appends x * iter to a
// list (SequenceEmpty, then SequenceInsert in the body). Outputs: "stacked"
// f32[m, 2] (ConcatFromSequence, new_axis) and "list", the sequence itself.
absl::StatusOr<std::vector<uint8_t>> BuildSequenceLoop();
// A Loop whose body returns its two carried values swapped ("a", "b" f32[2]
// in; after m trips they are swapped m times): outputs "a_out", "b_out".
absl::StatusOr<std::vector<uint8_t>> BuildSwapLoop();
// A scalar i64 tensor.
Tensor ScalarI64(int64_t v);
// An f32 tensor of `shape` holding `values`.
Tensor TensorF32(std::vector<int64_t> shape, const std::vector<float>& values);

}  // namespace grove::testing

#endif  // GROVE_TEST_MODEL_TEST_UTIL_H_
