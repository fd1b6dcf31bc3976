// If, Loop and Scan (ONNX semantics). Their bodies are subgraphs; output shapes
// come from inferring the bodies, and are only a prediction: the kernels
// allocate their outputs when they know what the chosen path produced.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "lib/ir/ops/ops.h"
#include "lib/ir/value_type.h"

namespace grove::ir {
namespace {

// Merges two predictions of one output: equal dims stay, others are unknown.
absl::StatusOr<SymShape> MergeShapes(const SymShape& a, const SymShape& b) {
  if (a.size() != b.size()) return absl::InvalidArgumentError("ranks differ");
  SymShape out = a;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i] != b[i]) out[i] = SymDim::Unknown();
  }
  return out;
}

// Sets output i from two predictions whose ranks may be unknown (an unknown
// dtype, from a body that waits for the run, takes the other's). Tensors of
// differing ranks are an error (`rank_error`); a sequence's items may differ.
absl::Status SetMerged(ShapeContext& ctx, int i, DType dtype, const ShapeContext::Output& a,
                       const ShapeContext::Output& b, const std::string& rank_error) {
  if (IsBoxed(dtype) && a.rank_known != b.rank_known) {
    // A list that enters empty and grows in the body: its tensors' rank is
    // predicted from the body (see Grow in sequence.cc), every dim unknown.
    ctx.SetOutput(i, dtype, SymShape((a.rank_known ? a : b).shape.size(), SymDim::Unknown()));
    return absl::OkStatus();
  }
  if (!a.rank_known || !b.rank_known) {
    ctx.SetOutputUnknownRank(i, dtype);
    return absl::OkStatus();
  }
  absl::StatusOr<SymShape> merged = MergeShapes(a.shape, b.shape);
  if (!merged.ok()) {
    if (IsBoxed(dtype)) {
      ctx.SetOutputUnknownRank(i, dtype);
      return absl::OkStatus();
    }
    return ctx.Error(rank_error);
  }
  ctx.SetOutput(i, dtype, std::move(*merged));
  return absl::OkStatus();
}

void SetPredicted(ShapeContext& ctx, int i, const ShapeContext::Output& o) {
  if (o.rank_known) {
    ctx.SetOutput(i, o.dtype, o.shape);
  } else {
    ctx.SetOutputUnknownRank(i, o.dtype);
  }
}

absl::Status SetBranchOutputs(ShapeContext& ctx, const std::vector<ShapeContext::Output>& outs,
                              absl::string_view branch) {
  if (static_cast<int>(outs.size()) != ctx.num_outputs()) {
    return ctx.Error(absl::StrCat("has ", ctx.num_outputs(), " outputs but ", branch, " gives ", outs.size()));
  }
  for (int i = 0; i < ctx.num_outputs(); ++i) SetPredicted(ctx, i, outs[i]);
  return absl::OkStatus();
}

// The prediction of an If's outputs. A condition known when planning (a test
// of a dim, folded) picks its branch, whose outputs may have any rank. With
// the condition unknown, the two branches' predictions are merged; they must
// agree in dtype and rank. When planning, a branch that cannot take these
// shapes is one the data will not choose (an If on a sample rate whose other
// path wants other lengths): the other branch predicts, and the error comes
// at run time if the data chooses it after all.
absl::Status InferIf(ShapeContext& ctx) {
  if (ctx.input_dtype(0) != DType::kBool) return ctx.Error("cond must be bool");
  if (ctx.inferrer() == nullptr) return ctx.Error("If needs its branches to infer shapes");
  const int then_sg = ctx.attrs().GetSubgraph("then_branch");
  const int else_sg = ctx.attrs().GetSubgraph("else_branch");
  if (const TensorView* cond = ctx.input_value(0); cond != nullptr && cond->num_elements() == 1) {
    const bool taken = *static_cast<const uint8_t*>(cond->data) != 0;
    auto out = ctx.inferrer()->Infer(taken ? then_sg : else_sg, {});
    if (!out.ok()) return out.status();
    return SetBranchOutputs(ctx, *out, taken ? "then_branch" : "else_branch");
  }
  auto then_out = ctx.inferrer()->Infer(then_sg, {});
  auto else_out = ctx.inferrer()->Infer(else_sg, {});
  if (!then_out.ok() || !else_out.ok()) {
    if (then_out.ok() != else_out.ok() && ctx.inferrer()->planning()) {
      return then_out.ok() ? SetBranchOutputs(ctx, *then_out, "then_branch")
                           : SetBranchOutputs(ctx, *else_out, "else_branch");
    }
    // A real error before one that only a plan can settle.
    if (!then_out.ok() && !IsDeferredShapeError(then_out.status())) return then_out.status();
    return !else_out.ok() ? else_out.status() : then_out.status();
  }
  if (static_cast<int>(then_out->size()) != ctx.num_outputs() ||
      static_cast<int>(else_out->size()) != ctx.num_outputs()) {
    return ctx.Error(absl::StrCat("has ", ctx.num_outputs(), " outputs but the branches give ", then_out->size(),
                                  " and ", else_out->size()));
  }
  for (int i = 0; i < ctx.num_outputs(); ++i) {
    const auto& t = (*then_out)[i];
    const auto& e = (*else_out)[i];
    if (t.dtype != e.dtype && t.dtype != DType::kUnknown && e.dtype != DType::kUnknown) {
      return ctx.Error(absl::StrCat("output ", i, " is ", DTypeName(t.dtype), " in then_branch but ",
                                    DTypeName(e.dtype), " in else_branch"));
    }
    const DType dtype = t.dtype != DType::kUnknown ? t.dtype : e.dtype;
    if (!t.rank_known || !e.rank_known || IsBoxed(dtype)) {
      if (absl::Status s = SetMerged(ctx, i, dtype, t, e, ""); !s.ok()) return s;
      continue;
    }
    absl::StatusOr<SymShape> merged = MergeShapes(t.shape, e.shape);
    if (!merged.ok()) {
      const std::string msg = absl::StrCat("output ", i, " has rank ", t.shape.size(), " in then_branch but ",
                                           e.shape.size(), " in else_branch");
      // Over symbolic shapes the condition may be a dim test that a plan
      // folds; with concrete shapes it depends on data, and grove needs one
      // rank to plan what follows.
      if (!ctx.inferrer()->planning()) return DeferredShapeError(ctx.Error(msg).message());
      return ctx.Error(absl::StrCat(msg, " and the condition depends on data; grove needs equal ranks"));
    }
    ctx.SetOutput(i, dtype, std::move(*merged));
  }
  return absl::OkStatus();
}

absl::Status InferLoop(ShapeContext& ctx) {
  if (ctx.inferrer() == nullptr) return ctx.Error("Loop needs its body to infer shapes");
  if (ctx.has_input(0) && (ctx.input_dtype(0) != DType::kI64 || !ctx.input_shape(0).empty())) {
    if (!(ctx.input_shape(0).size() == 1 && ctx.input_shape(0)[0] == SymDim(1)) || ctx.input_dtype(0) != DType::kI64) {
      return ctx.Error("trip count M must be an i64 scalar");
    }
  }
  if (ctx.has_input(1) && ctx.input_dtype(1) != DType::kBool) return ctx.Error("cond must be bool");
  const int body = ctx.attrs().GetSubgraph("body");
  // ONNX lets trailing optional inputs go: Loop(M) and Loop() carry nothing.
  const int n = std::max(ctx.num_inputs() - 2, 0);
  const int k = ctx.num_outputs() - n;
  if (k < 0) return ctx.Error(absl::StrCat("has ", n, " loop-carried inputs but only ", ctx.num_outputs(), " outputs"));
  const Subgraph& sg = ctx.graph().subgraphs[body];
  if (static_cast<int>(sg.inputs.size()) != n + 2) {
    return ctx.Error(absl::StrCat("body takes ", sg.inputs.size(), " inputs; it must take 2 + ", n,
                                  " (iteration, cond, loop-carried values)"));
  }
  if (static_cast<int>(sg.outputs.size()) != 1 + n + k) {
    return ctx.Error(absl::StrCat("body gives ", sg.outputs.size(), " outputs; it must give 1 + ", n, " + ", k,
                                  " (cond, loop-carried values, scan outputs)"));
  }
  std::vector<ShapeContext::Input> ins(n + 2);
  ins[0] = ShapeContext::Input{true, DType::kI64, {}, nullptr};
  ins[1] = ShapeContext::Input{true, DType::kBool, {}, nullptr};
  for (int i = 0; i < n; ++i) {
    if (!ctx.has_input(2 + i)) return ctx.Error(absl::StrCat("loop-carried input ", i, " is missing"));
    ins[2 + i] = ctx.input(2 + i);
  }
  auto outs = ctx.inferrer()->Infer(body, ins);
  if (!outs.ok()) return outs.status();
  if ((*outs)[0].dtype != DType::kBool && (*outs)[0].dtype != DType::kUnknown) {
    return ctx.Error("body's first output (cond) must be bool");
  }
  for (int i = 0; i < n; ++i) {
    const auto& o = (*outs)[1 + i];
    const auto& in = ins[2 + i];
    // An optional may enter and what it holds come back (as onnxruntime
    // and ONNX's reference allow); the Loop then gives what the body gives.
    const bool unwrapped = IsOptionalDType(in.dtype) && o.dtype == UnwrapOptional(in.dtype);
    if (o.dtype != in.dtype && o.dtype != DType::kUnknown && in.dtype != DType::kUnknown && !unwrapped) {
      return ctx.Error(absl::StrCat("loop-carried value ", i, " enters as ", DTypeName(in.dtype),
                                    " but the body returns ", DTypeName(o.dtype)));
    }
    const DType dtype = in.dtype != DType::kUnknown && !unwrapped ? in.dtype : o.dtype;
    const ShapeContext::Output entering{in.dtype, in.shape, true, in.rank_known};
    if (absl::Status s = SetMerged(ctx, i, dtype, entering, o,
                                   absl::StrCat("loop-carried value ", i, " changes rank in the body"));
        !s.ok()) {
      return s;
    }
  }
  for (int j = 0; j < k; ++j) {
    const auto& o = (*outs)[1 + n + j];
    if (!o.rank_known) {
      ctx.SetOutputUnknownRank(n + j, o.dtype);
      continue;
    }
    SymShape s{SymDim::Unknown()};
    s.insert(s.end(), o.shape.begin(), o.shape.end());
    ctx.SetOutput(n + j, o.dtype, std::move(s));
  }
  return absl::OkStatus();
}

// Scan (opset 9+): N state values and M scan inputs; the body runs once per
// position along each scan input's axis on the states and one slice of each,
// and returns the next states and K slices that are stacked into the scan
// outputs along their axes.
absl::Status InferScan(ShapeContext& ctx) {
  if (ctx.inferrer() == nullptr) return ctx.Error("Scan needs its body to infer shapes");
  const int m = static_cast<int>(ctx.attrs().GetInt("num_scan_inputs", 0));
  const int n = ctx.num_inputs() - m;
  const int k = ctx.num_outputs() - n;
  if (m < 1 || n < 0) {
    return ctx.Error(absl::StrCat("num_scan_inputs is ", m, " but the op has ", ctx.num_inputs(), " inputs"));
  }
  if (k < 0) return ctx.Error(absl::StrCat("has ", n, " state values but only ", ctx.num_outputs(), " outputs"));
  const std::vector<int64_t> in_axes = ctx.attrs().GetInts("scan_input_axes", std::vector<int64_t>(m, 0));
  const std::vector<int64_t> out_axes = ctx.attrs().GetInts("scan_output_axes", std::vector<int64_t>(k, 0));
  const std::vector<int64_t> in_dirs = ctx.attrs().GetInts("scan_input_directions", std::vector<int64_t>(m, 0));
  const std::vector<int64_t> out_dirs = ctx.attrs().GetInts("scan_output_directions", std::vector<int64_t>(k, 0));
  if (static_cast<int>(in_axes.size()) != m || static_cast<int>(in_dirs.size()) != m) {
    return ctx.Error(absl::StrCat("scan_input_axes and scan_input_directions need ", m, " values each"));
  }
  if (static_cast<int>(out_axes.size()) != k || static_cast<int>(out_dirs.size()) != k) {
    return ctx.Error(absl::StrCat("scan_output_axes and scan_output_directions need ", k, " values each"));
  }
  for (int64_t d : in_dirs) {
    if (d != 0 && d != 1) return ctx.Error("scan_input_directions must be 0 (forward) or 1 (reverse)");
  }
  for (int64_t d : out_dirs) {
    if (d != 0 && d != 1) return ctx.Error("scan_output_directions must be 0 (forward) or 1 (reverse)");
  }
  const int body = ctx.attrs().GetSubgraph("body");
  const Subgraph& sg = ctx.graph().subgraphs[body];
  if (static_cast<int>(sg.inputs.size()) != n + m || static_cast<int>(sg.outputs.size()) != n + k) {
    return ctx.Error(absl::StrCat("body takes ", sg.inputs.size(), " inputs and gives ", sg.outputs.size(),
                                  " outputs; it must take ", n + m, " and give ", n + k));
  }
  std::vector<ShapeContext::Input> ins;
  for (int i = 0; i < n; ++i) {
    if (!ctx.has_input(i)) return ctx.Error(absl::StrCat("state input ", i, " is missing"));
    ins.push_back(ctx.input(i));
  }
  SymDim length;
  for (int j = 0; j < m; ++j) {
    if (!ctx.has_input(n + j)) return ctx.Error(absl::StrCat("scan input ", j, " is missing"));
    ShapeContext::Input in = ctx.input(n + j);
    absl::StatusOr<int> axis = NormalizeAxis(in_axes[j], static_cast<int>(in.shape.size()));
    if (!axis.ok()) return ctx.Error(absl::StrCat("scan input ", j, ": ", axis.status().message()));
    if (j == 0) {
      length = in.shape[*axis];
    } else if (length.is_const() && in.shape[*axis].is_const() && length != in.shape[*axis]) {
      return ctx.Error(absl::StrCat("scan input ", j, " has ", in.shape[*axis].value(),
                                    " positions along its axis, input 0 has ", length.value()));
    }
    in.shape.erase(in.shape.begin() + *axis);
    in.value = nullptr;
    ins.push_back(std::move(in));
  }
  auto outs = ctx.inferrer()->Infer(body, ins);
  if (!outs.ok()) return outs.status();
  for (int i = 0; i < n; ++i) {
    const ShapeContext::Output entering{ins[i].dtype, ins[i].shape, true, ins[i].rank_known};
    if ((*outs)[i].dtype != ins[i].dtype && (*outs)[i].dtype != DType::kUnknown) {
      return ctx.Error(absl::StrCat("state ", i, " enters as ", DTypeName(ins[i].dtype), " but the body returns ",
                                    DTypeName((*outs)[i].dtype)));
    }
    if (absl::Status s = SetMerged(ctx, i, ins[i].dtype, entering, (*outs)[i],
                                   absl::StrCat("state ", i, " changes rank in the body"));
        !s.ok()) {
      return s;
    }
  }
  for (int j = 0; j < k; ++j) {
    const ShapeContext::Output& o = (*outs)[n + j];
    if (IsBoxed(o.dtype)) return ctx.Error(absl::StrCat("scan output ", j, " is a ", DTypeName(o.dtype)));
    if (!o.rank_known) {
      ctx.SetOutputUnknownRank(n + j, o.dtype);
      continue;
    }
    absl::StatusOr<int> axis = NormalizeAxis(out_axes[j], static_cast<int>(o.shape.size()) + 1);
    if (!axis.ok()) return ctx.Error(absl::StrCat("scan output ", j, ": ", axis.status().message()));
    SymShape shape = o.shape;
    shape.insert(shape.begin() + *axis, length);
    ctx.SetOutput(n + j, o.dtype, std::move(shape));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status RegisterControlFlowOps(OpRegistry& registry) {
  OpDef if_op;
  if_op.type = "If";
  if_op.min_inputs = 1;
  if_op.max_inputs = 1;
  if_op.min_outputs = 1;
  if_op.max_outputs = -1;
  if_op.attrs = {{"then_branch", AttrKind::kSubgraph, true}, {"else_branch", AttrKind::kSubgraph, true}};
  if_op.infer = &InferIf;
  if_op.kernel_allocates_outputs = true;
  if_op.foldable = false;
  if_op.boxed_on_every_backend = true;
  if (absl::Status s = registry.Register(std::move(if_op)); !s.ok()) return s;

  OpDef loop;
  loop.type = "Loop";
  loop.min_inputs = 0;  // M and cond are optional, and ONNX may leave them out
  loop.max_inputs = -1;
  loop.omittable_inputs = 0b11;  // M and cond, also when given as ""
  loop.min_outputs = 0;
  loop.max_outputs = -1;
  loop.attrs = {{"body", AttrKind::kSubgraph, true}};
  loop.infer = &InferLoop;
  loop.kernel_allocates_outputs = true;
  loop.foldable = false;
  loop.boxed_on_every_backend = true;
  if (absl::Status s = registry.Register(std::move(loop)); !s.ok()) return s;

  OpDef scan;
  scan.type = "Scan";
  scan.min_inputs = 1;
  scan.max_inputs = -1;
  scan.min_outputs = 1;
  scan.max_outputs = -1;
  scan.attrs = {{"body", AttrKind::kSubgraph, true},     {"num_scan_inputs", AttrKind::kInt, true},
                {"scan_input_axes", AttrKind::kInts},    {"scan_input_directions", AttrKind::kInts},
                {"scan_output_axes", AttrKind::kInts},   {"scan_output_directions", AttrKind::kInts}};
  scan.infer = &InferScan;
  scan.kernel_allocates_outputs = true;
  scan.foldable = false;
  return registry.Register(std::move(scan));
}

}  // namespace grove::ir
