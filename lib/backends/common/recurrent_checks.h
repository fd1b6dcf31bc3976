// Run-time checks of RNN, GRU and LSTM nodes that the CPU and CUDA kernels
// make alike (same order, same error messages), and the dims they resolve.
#ifndef GROVE_LIB_BACKENDS_COMMON_RECURRENT_CHECKS_H_
#define GROVE_LIB_BACKENDS_COMMON_RECURRENT_CHECKS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "lib/ir/op_registry.h"
#include "lib/ir/ops/recurrent_attrs.h"

namespace grove::backends {

// Dims of one call, with the offsets that depend on layout (0: X [seq,
// batch, input], Y [seq, dirs, batch, hidden], states [dirs, batch,
// hidden]; 1: batch first).
struct RecurrentDims {
  int64_t seq = 0, batch = 0, input = 0, hidden = 0, dirs = 1;
  int layout = 0;
  int64_t XRow(int64_t t, int64_t b) const { return layout == 0 ? t * batch + b : b * seq + t; }
  int64_t YOffset(int64_t t, int64_t d, int64_t b) const {
    return (layout == 0 ? (t * dirs + d) * batch + b : (b * seq + t) * dirs + d) * hidden;
  }
  int64_t StateOffset(int64_t d, int64_t b) const { return (layout == 0 ? d * batch + b : b * dirs + d) * hidden; }
  std::vector<int64_t> StateShape() const;
  std::vector<int64_t> YShape() const;
};

// A node's attributes and dims.
struct RecurrentCall {
  ir::RecurrentAttrs attrs;
  RecurrentDims dims;
};

// Reads the attributes of a `kind` node, checks the ranks, shapes and dtypes
// of every input but sequence_lens (input 4) and resolves the dims.
absl::StatusOr<RecurrentCall> ReadRecurrentCall(const ir::KernelContext& ctx, ir::RecurrentKind kind);

// Checks the shape of sequence_lens (input 4).
absl::Status CheckSequenceLensShape(const ir::KernelContext& ctx, const RecurrentDims& dims);

// The error for a sequence_lens dtype other than i32 or i64.
absl::Status SequenceLensDTypeError(const ir::KernelContext& ctx);

// Checks that every sequence length is in 0..seq; the message of a length
// `len` of batch entry `b` outside it (without the node) for device checks.
std::string SequenceLengthMessage(int64_t len, int64_t b, int64_t seq);
absl::Status CheckSequenceLengths(const ir::KernelContext& ctx, const RecurrentDims& dims,
                                  absl::Span<const int64_t> lengths);

// Checks the dtype and shape of every output present.
absl::Status CheckRecurrentOutputs(const ir::KernelContext& ctx, const RecurrentDims& dims);

}  // namespace grove::backends

#endif  // GROVE_LIB_BACKENDS_COMMON_RECURRENT_CHECKS_H_
