// The zero-size sweep shared by test/ops/zero_size_test.cc (CPU kernels) and
// test/cuda/zero_size_test.cc (CUDA kernels on the emulated device): each
// registered op but control flow and sequences, given input 0 with a zero
// dim in each position at ranks 1 to 4 and its other inputs the same tensor,
// a full tensor of that rank or a small i64 value.
#ifndef GROVE_TEST_ZERO_SIZE_SWEEP_H_
#define GROVE_TEST_ZERO_SIZE_SWEEP_H_

#include <algorithm>
#include <cstdint>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "grove/grove.h"
#include "lib/ir/op_registry.h"
#include "lib/runtime/registry.h"
#include "test/op_test_util.h"

namespace grove::testing {

struct ZeroSizeCase {
  std::string op;
  std::vector<const Tensor*> inputs;
  std::vector<std::pair<std::string, AttrValue>> attrs;
  int num_outputs = 1;
  std::string Describe() const {
    std::vector<std::string> shapes;
    for (const Tensor* t : inputs) shapes.push_back(absl::StrCat("[", absl::StrJoin(t->shape(), ","), "]"));
    return absl::StrCat(op, "(", absl::StrJoin(shapes, ", "), ")");
  }
};

inline bool IsControlFlowOrSequenceOp(const std::string& op) {
  static const std::set<std::string>* ops = new std::set<std::string>{
      "If", "Loop", "Scan", "SequenceEmpty", "SequenceConstruct", "SequenceInsert", "SequenceErase", "SequenceAt",
      "SequenceLength", "ConcatFromSequence", "SplitToSequence", "SequenceMap", "Optional", "OptionalHasElement",
      "OptionalGetElement"};
  return ops->count(op) > 0;
}

// The attributes an op needs before it looks at its inputs, at `rank`.
inline std::vector<std::pair<std::string, AttrValue>> ZeroSizeRequiredAttrs(const std::string& op, int rank) {
  const std::vector<int64_t> window(static_cast<size_t>(std::max(rank - 2, 1)), 1);
  if (op == "BitShift") return {{"direction", std::string("LEFT")}};
  if (op == "Einsum") return {{"equation", std::string("...,...->...")}};
  if (op == "MaxPool" || op == "AveragePool" || op == "LpPool" || op == "MaxUnpool" || op == "MaxRoiPool") {
    return {{"kernel_shape", window}, {"pooled_shape", window}};
  }
  if (op == "DepthToSpace" || op == "SpaceToDepth") return {{"blocksize", int64_t{1}}};
  if (op == "Cast") return {{"to", int64_t{1}}};
  if (op == "Split") return {{"num_outputs", int64_t{2}}};
  return {};
}

inline Tensor SweepF32(const std::vector<int64_t>& shape) {
  Tensor t = Tensor::Create(DType::kF32, shape).value();
  float* p = t.as<float>();
  for (int64_t i = 0; i < t.view().num_elements(); ++i) p[i] = 0.25f * static_cast<float>(i % 7) + 0.5f;
  return t;
}

// Calls visit(const ZeroSizeCase&) for every case of every op `want(op)` takes.
template <typename Want, typename Visit>
int ForEachZeroSizeCase(Want&& want, Visit&& visit) {
  const ir::OpRegistry& registry = runtime::GlobalOpRegistry();
  const std::vector<int64_t> full = {2, 3, 4, 5};
  const Tensor ones = MakeTensor<int64_t>(DType::kI64, {1}, {1});
  int swept = 0;
  for (const std::string& op : registry.Types()) {
    if (IsControlFlowOrSequenceOp(op) || !want(op)) continue;
    const ir::OpDef* def = registry.Find(op);
    const int lo = std::max(def->min_inputs, 1);
    const int hi = def->max_inputs < 0 ? lo + 2 : std::min(def->max_inputs, 6);
    for (int rank = 1; rank <= 4; ++rank) {
      const std::vector<int64_t> base(full.begin(), full.begin() + rank);
      const Tensor whole = SweepF32(base);
      for (int zero = 0; zero < rank; ++zero) {
        std::vector<int64_t> shape = base;
        shape[zero] = 0;
        const Tensor empty = SweepF32(shape);
        for (int n = lo; n <= hi; ++n) {
          for (const Tensor* rest : {&empty, &whole, &ones}) {
            ZeroSizeCase c{op, std::vector<const Tensor*>(n, rest), ZeroSizeRequiredAttrs(op, rank),
                           def->max_outputs < 0 ? 1 : def->min_outputs};
            c.inputs[0] = &empty;
            visit(c);
          }
        }
      }
    }
    ++swept;
  }
  return swept;
}

}  // namespace grove::testing

#endif  // GROVE_TEST_ZERO_SIZE_SWEEP_H_
