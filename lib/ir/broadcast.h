// Numpy/ONNX broadcasting of symbolic shapes given by pointer, so a shape
// function broadcasts its inputs' shapes where they are, without copying
// them (binary ops are most of a model, and their shapes are inferred at
// every load). BroadcastShapes (op_registry.h) is this over a span.
#ifndef GROVE_LIB_IR_BROADCAST_H_
#define GROVE_LIB_IR_BROADCAST_H_

#include <algorithm>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "lib/ir/sym_dim.h"

namespace grove::ir {

// As BroadcastShapes: a symbolic dim against a constant (not 1) takes the
// constant; two different symbolic dims take the first.
inline absl::StatusOr<SymShape> BroadcastShapePtrs(absl::Span<const SymShape* const> shapes) {
  size_t rank = 0;
  for (const SymShape* s : shapes) rank = std::max(rank, s->size());
  SymShape out(rank, SymDim(1));
  for (const SymShape* s : shapes) {
    const size_t off = rank - s->size();
    for (size_t i = 0; i < s->size(); ++i) {
      SymDim& o = out[off + i];
      const SymDim& d = (*s)[i];
      if (d.is_const() && d.value() == 1) continue;
      if (o.is_const() && o.value() == 1) {
        o = d;
        continue;
      }
      if (o == d) continue;
      if (o.is_const() && d.is_const()) {  // both constant, neither 1
        return absl::InvalidArgumentError(absl::StrCat("shapes do not broadcast: dim ", off + i, " is ",
                                                       o.value(), " in one input and ", d.value(),
                                                       " in another"));
      }
      // Symbolic against something else: equal at run time (or 1 on the
      // symbolic side), or the kernel reports it then. A constant wins.
      if (d.is_const()) o = d;
    }
  }
  return out;
}

}  // namespace grove::ir

#endif  // GROVE_LIB_IR_BROADCAST_H_
