#include "lib/backends/common/recurrent_checks.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "lib/backends/common/kernel_checks.h"

namespace grove::backends {
namespace {

constexpr const char* kInputNames[] = {"X", "W", "R", "B", "sequence_lens", "initial_h", "initial_c", "P"};
constexpr const char* kOutputNames[] = {"Y", "Y_h", "Y_c"};

absl::Status CheckInputShape(const ir::KernelContext& ctx, int i, const std::vector<int64_t>& want) {
  if (ctx.input(i).shape == want) return absl::OkStatus();
  return ctx.Error(absl::StrCat("input ", i, " (", kInputNames[i], ") has shape ", ShapeStr(ctx.input(i).shape),
                                "; expected ", ShapeStr(want)));
}

}  // namespace

std::vector<int64_t> RecurrentDims::StateShape() const {
  return layout == 0 ? std::vector<int64_t>{dirs, batch, hidden} : std::vector<int64_t>{batch, dirs, hidden};
}

std::vector<int64_t> RecurrentDims::YShape() const {
  return layout == 0 ? std::vector<int64_t>{seq, dirs, batch, hidden} : std::vector<int64_t>{batch, seq, dirs, hidden};
}

absl::StatusOr<RecurrentCall> ReadRecurrentCall(const ir::KernelContext& ctx, ir::RecurrentKind kind) {
  absl::StatusOr<ir::RecurrentAttrs> attrs = ir::ReadRecurrentAttrs(ctx.attrs(), kind);
  if (!attrs.ok()) return ctx.Error(attrs.status().message());
  const ir::RecurrentAttrs& a = *attrs;
  const TensorView& x = ctx.input(0);
  if (x.shape.size() != 3) {
    return ctx.Error(absl::StrCat("input 0 (X) has shape ", ShapeStr(x.shape), "; expected rank 3"));
  }
  if (ctx.input(2).shape.size() != 3) {
    return ctx.Error(absl::StrCat("input 2 (R) has shape ", ShapeStr(ctx.input(2).shape), "; expected rank 3"));
  }
  RecurrentDims dims;
  dims.layout = a.layout;
  dims.seq = a.layout == 0 ? x.shape[0] : x.shape[1];
  dims.batch = a.layout == 0 ? x.shape[1] : x.shape[0];
  dims.input = x.shape[2];
  dims.hidden = a.hidden_size > 0 ? a.hidden_size : ctx.input(2).shape[2];
  dims.dirs = a.num_directions;
  const int64_t gates = ir::GateCount(a.kind);
  const int64_t h = dims.hidden, nd = dims.dirs;
  const bool lstm = a.kind == ir::RecurrentKind::kLstm;

  if (absl::Status s = CheckInputShape(ctx, 1, {nd, gates * h, dims.input}); !s.ok()) return s;
  if (absl::Status s = CheckInputShape(ctx, 2, {nd, gates * h, h}); !s.ok()) return s;
  if (ctx.has_input(3)) {
    if (absl::Status s = CheckInputShape(ctx, 3, {nd, 2 * gates * h}); !s.ok()) return s;
  }
  const std::vector<int64_t> state_shape = dims.StateShape();
  for (int i = 5; i < std::min(ctx.num_inputs(), lstm ? 7 : 6); ++i) {
    if (!ctx.has_input(i)) continue;
    if (absl::Status s = CheckInputShape(ctx, i, state_shape); !s.ok()) return s;
  }
  if (lstm && ctx.has_input(7)) {
    if (absl::Status s = CheckInputShape(ctx, 7, {nd, 3 * h}); !s.ok()) return s;
  }
  for (int i = 1; i < ctx.num_inputs(); ++i) {
    if (i == 4 || !ctx.has_input(i) || ctx.input(i).dtype == x.dtype) continue;
    return ctx.Error(absl::StrCat("input ", i, " (", kInputNames[i], ") has dtype ", DTypeName(ctx.input(i).dtype),
                                  "; expected ", DTypeName(x.dtype), " like input 0 (X)"));
  }
  return RecurrentCall{*std::move(attrs), dims};
}

absl::Status CheckSequenceLensShape(const ir::KernelContext& ctx, const RecurrentDims& dims) {
  return CheckInputShape(ctx, 4, {dims.batch});
}

absl::Status SequenceLensDTypeError(const ir::KernelContext& ctx) {
  return ctx.Error(
      absl::StrCat("input 4 (sequence_lens) has dtype ", DTypeName(ctx.input(4).dtype), "; expected i32"));
}

std::string SequenceLengthMessage(int64_t len, int64_t b, int64_t seq) {
  return absl::StrCat("input 4 (sequence_lens) gives length ", len, " for batch entry ", b, "; expected 0..", seq,
                      " (seq_length)");
}

absl::Status CheckSequenceLengths(const ir::KernelContext& ctx, const RecurrentDims& dims,
                                  absl::Span<const int64_t> lengths) {
  for (int64_t b = 0; b < dims.batch; ++b) {
    const int64_t len = lengths[b];
    if (len < 0 || len > dims.seq) return ctx.Error(SequenceLengthMessage(len, b, dims.seq));
  }
  return absl::OkStatus();
}

absl::Status CheckRecurrentOutputs(const ir::KernelContext& ctx, const RecurrentDims& dims) {
  const DType dtype = ctx.input(0).dtype;
  const std::vector<int64_t> y_shape = dims.YShape(), state_shape = dims.StateShape();
  for (int i = 0; i < ctx.num_outputs(); ++i) {
    if (!ctx.has_output(i)) continue;
    const TensorView& out = ctx.output(i);
    const std::vector<int64_t>& want = i == 0 ? y_shape : state_shape;
    if (out.dtype != dtype || out.shape != want) {
      return ctx.Error(absl::StrCat("output ", i, " (", kOutputNames[i], ") was allocated as ",
                                    DTypeName(out.dtype), " ", ShapeStr(out.shape), " but the kernel writes ",
                                    DTypeName(dtype), " ", ShapeStr(want)));
    }
  }
  return absl::OkStatus();
}

}  // namespace grove::backends
