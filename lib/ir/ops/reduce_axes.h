// Which dims a Reduce* op reduces, shared by the shape function and the CPU
// kernel so that the planned output shape and the computed one cannot differ.
#ifndef GROVE_LIB_IR_OPS_REDUCE_AXES_H_
#define GROVE_LIB_IR_OPS_REDUCE_AXES_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"

namespace grove::ir {

// reduced[d] is true when dim d is reduced. Empty axes reduce every dim, or
// none with noop_with_empty_axes. Axes may be negative (ONNX: [-rank, rank-1]);
// an axis out of range or given twice is an error.
inline absl::StatusOr<std::vector<bool>> ReducedDims(absl::Span<const int64_t> axes, int rank,
                                                     bool noop_with_empty_axes) {
  if (axes.empty()) return std::vector<bool>(rank, !noop_with_empty_axes);
  std::vector<bool> reduced(rank, false);
  for (int64_t axis : axes) {
    const int64_t a = axis < 0 ? axis + rank : axis;
    if (a < 0 || a >= rank) {
      return absl::InvalidArgumentError(rank == 0 ? absl::StrCat("axis ", axis, " given for a rank-0 input")
                                                  : absl::StrCat("axis ", axis, " is out of range for rank ", rank,
                                                                 " (expected ", -rank, "..", rank - 1, ")"));
    }
    if (reduced[a]) return absl::InvalidArgumentError(absl::StrCat("axes name dim ", a, " twice"));
    reduced[a] = true;
  }
  return reduced;
}

}  // namespace grove::ir

#endif  // GROVE_LIB_IR_OPS_REDUCE_AXES_H_
