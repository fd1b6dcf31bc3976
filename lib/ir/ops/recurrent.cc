// Op definitions of LSTM, GRU and RNN (ONNX opset 14): inputs X, W, R and
// the optional B, sequence_lens, initial_h (and initial_c, P for LSTM);
// outputs Y, Y_h (and Y_c), each of which may be omitted. With layout 1 the
// batch dim comes first in X, Y, the initial states and Y_h/Y_c.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "lib/ir/ops/input_checks.h"
#include "lib/ir/ops/ops.h"
#include "lib/ir/ops/recurrent_attrs.h"

namespace grove::ir {
namespace {

constexpr DType kRecurrentDTypes[] = {DType::kF32, DType::kF64, DType::kF16, DType::kBF16};
constexpr const char* kInputNames[] = {"X", "W", "R", "B", "sequence_lens", "initial_h", "initial_c", "P"};

// Checks input i against `want` dim by dim where both are constants.
absl::Status CheckShape(const ShapeContext& ctx, int i, const SymShape& want) {
  const SymShape& got = ctx.input_shape(i);
  bool ok = got.size() == want.size();
  for (size_t d = 0; ok && d < got.size(); ++d) {
    if (got[d].is_const() && want[d].is_const() && got[d].value() != want[d].value()) ok = false;
  }
  if (ok) return absl::OkStatus();
  return ctx.Error(absl::StrCat(InputName(i, kInputNames[i]), " has shape ", ShapeString(ctx, got), "; expected ",
                                ShapeString(ctx, want)));
}

absl::Status InferRecurrent(ShapeContext& ctx, RecurrentKind kind) {
  absl::StatusOr<RecurrentAttrs> a = ReadRecurrentAttrs(ctx.attrs(), kind);
  if (!a.ok()) return ctx.Error(a.status().message());
  if (absl::Status s = CheckInputDType(ctx, 0, "X", kRecurrentDTypes); !s.ok()) return s;
  const DType dtype = ctx.input_dtype(0);
  for (int i = 1; i < ctx.num_inputs(); ++i) {
    if (!ctx.has_input(i)) continue;
    if (i == 4) {
      if (absl::Status s = CheckInputDType(ctx, 4, "sequence_lens", {DType::kI32, DType::kI64}); !s.ok()) return s;
    } else if (absl::Status s = CheckInputDType(ctx, i, kInputNames[i], {dtype}); !s.ok()) {
      return s;
    }
  }
  if (ctx.input_rank(0) != 3) {
    return ctx.Error(absl::StrCat(
        "input 0 (X) has shape ", ShapeString(ctx, ctx.input_shape(0)), "; expected ",
        a->layout == 0 ? "[seq_length, batch_size, input_size]" : "[batch_size, seq_length, input_size]"));
  }
  const SymShape& x = ctx.input_shape(0);
  const SymDim seq = a->layout == 0 ? x[0] : x[1];
  const SymDim batch = a->layout == 0 ? x[1] : x[0];
  const SymDim& input_size = x[2];
  const SymDim dirs(a->num_directions);
  const int gates = GateCount(kind);
  if (ctx.input_rank(2) != 3) {
    return ctx.Error(absl::StrCat("input 2 (R) has shape ", ShapeString(ctx, ctx.input_shape(2)),
                                  "; expected [num_directions, ", gates, "*hidden_size, hidden_size]"));
  }
  const SymDim hidden = a->hidden_size > 0 ? SymDim(a->hidden_size) : ctx.input_shape(2)[2];
  const SymDim gate_rows = SymDim(gates) * hidden;
  if (absl::Status s = CheckShape(ctx, 1, {dirs, gate_rows, input_size}); !s.ok()) return s;
  if (absl::Status s = CheckShape(ctx, 2, {dirs, gate_rows, hidden}); !s.ok()) return s;
  if (ctx.has_input(3)) {
    if (absl::Status s = CheckShape(ctx, 3, {dirs, SymDim(2 * gates) * hidden}); !s.ok()) return s;
  }
  if (ctx.has_input(4)) {
    if (absl::Status s = CheckShape(ctx, 4, {batch}); !s.ok()) return s;
  }
  const SymShape state = a->layout == 0 ? SymShape{dirs, batch, hidden} : SymShape{batch, dirs, hidden};
  for (int i = 5; i <= 6; ++i) {
    if (!ctx.has_input(i)) continue;
    if (absl::Status s = CheckShape(ctx, i, state); !s.ok()) return s;
  }
  if (ctx.has_input(7)) {
    if (absl::Status s = CheckShape(ctx, 7, {dirs, SymDim(3) * hidden}); !s.ok()) return s;
  }

  ctx.SetOutput(0, dtype,
                a->layout == 0 ? SymShape{seq, dirs, batch, hidden} : SymShape{batch, seq, dirs, hidden});
  for (int i = 1; i < ctx.num_outputs(); ++i) ctx.SetOutput(i, dtype, state);
  return absl::OkStatus();
}

absl::Status InferRnn(ShapeContext& ctx) { return InferRecurrent(ctx, RecurrentKind::kRnn); }
absl::Status InferGru(ShapeContext& ctx) { return InferRecurrent(ctx, RecurrentKind::kGru); }
absl::Status InferLstm(ShapeContext& ctx) { return InferRecurrent(ctx, RecurrentKind::kLstm); }

OpDef RecurrentDef(std::string type, RecurrentKind kind, ShapeFn infer) {
  OpDef def;
  def.type = std::move(type);
  def.min_inputs = 3;
  def.max_inputs = kind == RecurrentKind::kLstm ? 8 : 6;
  // Every output is optional; an op may even give none.
  def.min_outputs = 0;
  def.max_outputs = kind == RecurrentKind::kLstm ? 3 : 2;
  def.attrs = {{"activation_alpha", AttrKind::kFloats},
               {"activation_beta", AttrKind::kFloats},
               {"activations", AttrKind::kStrings},
               {"clip", AttrKind::kFloat},
               {"direction", AttrKind::kString},
               {"hidden_size", AttrKind::kInt},
               {"layout", AttrKind::kInt}};
  if (kind == RecurrentKind::kLstm) def.attrs.push_back({"input_forget", AttrKind::kInt});
  if (kind == RecurrentKind::kGru) def.attrs.push_back({"linear_before_reset", AttrKind::kInt});
  def.infer = infer;
  return def;
}

}  // namespace

absl::Status RegisterRecurrentOps(OpRegistry& registry) {
  if (absl::Status s = registry.Register(RecurrentDef("RNN", RecurrentKind::kRnn, &InferRnn)); !s.ok()) return s;
  if (absl::Status s = registry.Register(RecurrentDef("GRU", RecurrentKind::kGru, &InferGru)); !s.ok()) return s;
  return registry.Register(RecurrentDef("LSTM", RecurrentKind::kLstm, &InferLstm));
}

}  // namespace grove::ir
