// Binding: a run's inputs checked against the model's declarations (dtype,
// rank, constant dims, symbol ranges, one value per symbol), caller values
// turned into the views a plan takes, and string inputs copied into the
// run's string arena.
#ifndef GROVE_LIB_RUNTIME_BINDING_H_
#define GROVE_LIB_RUNTIME_BINDING_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "grove/grove.h"
#include "lib/ir/graph.h"
#include "lib/ir/string_arena.h"

namespace grove::runtime {

// "f32[batch,3]": a declared tensor as messages show it.
std::string DescribeDeclared(const ir::TensorDecl& d, const ir::Graph& g);
// "the model takes 2 inputs (x, y), given 1".
absl::Status InputCountError(const ir::Graph& g, size_t given);

// Checks the main subgraph's inputs; `need_data`: non-empty tensors must
// have data (false for Reshape, which plans without running).
absl::Status ValidateMainInputs(const ir::Graph& g, absl::Span<const TensorView> inputs, bool need_data);
// Main input i alone: its dtype, rank, fixed dims, symbol ranges and size.
absl::Status ValidateMainInput(const ir::Graph& g, size_t i, const TensorView& in, bool need_data);

// Run, RunInto and Reshape speak tensors only: FAILED_PRECONDITION naming
// the first input or output that is a sequence or optional.
absl::Status TensorsOnly(const ir::Graph& g, absl::Span<const TensorView> outputs);

// A caller's Value as the view a plan takes, after checking it against the
// declared input `d`.
absl::StatusOr<TensorView> ViewOfValue(const Value& value, const ir::TensorDecl& d, const ir::Graph& g);

// String inputs of the current run, their bytes copied into the run's
// string arena, so that outputs referring to them outlive the caller's
// buffers.
class StringInputs {
 public:
  // `inputs`, or copies of them whose strings live in `arena`. A string
  // tensor must be in host memory: `on_device` tells device pointers.
  absl::StatusOr<absl::Span<const TensorView>> Intern(const ir::Graph& g, absl::Span<const TensorView> inputs,
                                                      ir::StringArena& arena,
                                                      const std::function<bool(const void*)>& on_device);

 private:
  std::vector<TensorView> inputs_;
  std::vector<std::vector<StringRef>> refs_;
};

}  // namespace grove::runtime

#endif  // GROVE_LIB_RUNTIME_BINDING_H_
