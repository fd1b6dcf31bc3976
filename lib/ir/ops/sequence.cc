// Sequence and optional ops (ONNX semantics): SequenceEmpty SequenceConstruct
// SequenceInsert SequenceErase SequenceAt SequenceLength ConcatFromSequence
// SplitToSequence SequenceMap Optional OptionalHasElement OptionalGetElement.
// Their values are host grove::Values (lib/ir/value_type.h); a shape here is
// the shape the tensors of a sequence share, and may have no known rank.
// None of them folds: a sequence is never plan-time shape arithmetic.
#include "absl/strings/str_cat.h"
#include "lib/ir/ops/input_checks.h"
#include "lib/ir/ops/ops.h"
#include "lib/ir/value_type.h"

namespace grove::ir {
namespace {

// The tensors' shape of a sequence or optional input, or of a tensor input.
struct ItemShape {
  bool rank_known = false;
  SymShape shape;
};

ItemShape ItemOf(const ShapeContext& ctx, int i) { return ItemShape{ctx.input(i).rank_known, ctx.input_shape(i)}; }

// What two tensors' shapes have in common: equal dims stay, others are
// unknown; differing ranks leave the rank unknown.
ItemShape Merge(const ItemShape& a, const ItemShape& b) {
  if (!a.rank_known || !b.rank_known || a.shape.size() != b.shape.size()) return ItemShape{};
  ItemShape out = a;
  for (size_t k = 0; k < a.shape.size(); ++k) {
    if (a.shape[k] != b.shape[k]) out.shape[k] = SymDim::Unknown();
  }
  return out;
}

// A sequence of unknown rank (an empty list, most often) with `t` inserted is
// predicted to hold tensors of t's rank: what a list built in a loop holds.
// The prediction only shapes the plan (every dim unknown); kernels allocate
// what the items really are.
ItemShape Grow(const ItemShape& seq, const ItemShape& t) {
  if (seq.rank_known || !t.rank_known) return Merge(seq, t);
  return ItemShape{true, SymShape(t.shape.size(), SymDim::Unknown())};
}

void SetItemOutput(ShapeContext& ctx, int i, DType dtype, const ItemShape& item) {
  if (item.rank_known) {
    ctx.SetOutput(i, dtype, item.shape);
  } else {
    ctx.SetOutputUnknownRank(i, dtype);
  }
}

absl::Status CheckKind(const ShapeContext& ctx, int i, absl::string_view name, bool sequence) {
  if (absl::Status s = CheckInputPresent(ctx, i, name); !s.ok()) return s;
  const DType d = ctx.input_dtype(i);
  const bool ok = sequence ? KindOf(d) == ValueKind::kSequence : !IsBoxed(d);
  if (ok) return absl::OkStatus();
  return ctx.Error(absl::StrCat(InputName(i, name), " is ", DTypeName(d), "; expected a ",
                                sequence ? "sequence" : "tensor"));
}

// An optional position input: an i32 or i64 scalar (or one-element) tensor.
absl::Status CheckPosition(const ShapeContext& ctx, int i) {
  if (!ctx.has_input(i)) return absl::OkStatus();
  if (absl::Status s = CheckInputDType(ctx, i, "position", {DType::kI32, DType::kI64}); !s.ok()) return s;
  if (ctx.input_rank(i) > 1 || (ctx.input_rank(i) == 1 && ctx.input_shape(i)[0] != SymDim(1))) {
    return ctx.Error(absl::StrCat("position must be a scalar, has shape ", ShapeString(ctx, ctx.input_shape(i))));
  }
  return absl::OkStatus();
}

absl::Status InferSequenceEmpty(ShapeContext& ctx) {
  const int64_t dtype = ctx.attrs().GetInt("dtype", static_cast<int64_t>(DType::kF32));
  if (dtype <= 0 || dtype >= kBoxedStride || DTypeName(static_cast<DType>(dtype)) == "unknown") {
    return ctx.Error(absl::StrCat("dtype ", dtype, " is not a tensor dtype"));
  }
  ctx.SetOutputUnknownRank(0, BoxedDType(ValueKind::kSequence, static_cast<DType>(dtype)));
  return absl::OkStatus();
}

absl::Status InferSequenceConstruct(ShapeContext& ctx) {
  ItemShape item;
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    if (absl::Status s = CheckKind(ctx, i, "inputs", false); !s.ok()) return s;
    if (i > 0) {
      if (absl::Status s = CheckSameDType(ctx, 0, "inputs", i, "inputs"); !s.ok()) return s;
    }
    item = i == 0 ? ItemOf(ctx, 0) : Merge(item, ItemOf(ctx, i));
  }
  SetItemOutput(ctx, 0, BoxedDType(ValueKind::kSequence, ctx.input_dtype(0)), item);
  return absl::OkStatus();
}

absl::Status InferSequenceInsert(ShapeContext& ctx) {
  if (absl::Status s = CheckKind(ctx, 0, "input_sequence", true); !s.ok()) return s;
  if (absl::Status s = CheckKind(ctx, 1, "tensor", false); !s.ok()) return s;
  const DType elem = ElemDType(ctx.input_dtype(0));
  if (elem != DType::kUnknown && elem != ctx.input_dtype(1)) {
    return ctx.Error(absl::StrCat("inserts a ", DTypeName(ctx.input_dtype(1)), " tensor into a ",
                                  DTypeName(ctx.input_dtype(0))));
  }
  if (absl::Status s = CheckPosition(ctx, 2); !s.ok()) return s;
  SetItemOutput(ctx, 0, BoxedDType(ValueKind::kSequence, ctx.input_dtype(1)), Grow(ItemOf(ctx, 0), ItemOf(ctx, 1)));
  return absl::OkStatus();
}

absl::Status InferSequenceErase(ShapeContext& ctx) {
  if (absl::Status s = CheckKind(ctx, 0, "input_sequence", true); !s.ok()) return s;
  if (absl::Status s = CheckPosition(ctx, 1); !s.ok()) return s;
  SetItemOutput(ctx, 0, ctx.input_dtype(0), ItemOf(ctx, 0));
  return absl::OkStatus();
}

absl::Status InferSequenceAt(ShapeContext& ctx) {
  if (absl::Status s = CheckKind(ctx, 0, "input_sequence", true); !s.ok()) return s;
  if (!ctx.has_input(1)) return ctx.Error("input 1 (position) is required but missing");
  if (absl::Status s = CheckPosition(ctx, 1); !s.ok()) return s;
  // Items may differ in shape: the dims they share are a prediction.
  SetItemOutput(ctx, 0, ElemDType(ctx.input_dtype(0)), ItemOf(ctx, 0));
  return absl::OkStatus();
}

absl::Status InferSequenceLength(ShapeContext& ctx) {
  if (absl::Status s = CheckKind(ctx, 0, "input_sequence", true); !s.ok()) return s;
  ctx.SetOutput(0, DType::kI64, {});
  return absl::OkStatus();
}

absl::Status InferConcatFromSequence(ShapeContext& ctx) {
  if (absl::Status s = CheckKind(ctx, 0, "input_sequence", true); !s.ok()) return s;
  bool new_axis = false;
  if (absl::Status s = ReadBoolAttr(ctx, "new_axis", 0, &new_axis); !s.ok()) return s;
  const DType elem = ElemDType(ctx.input_dtype(0));
  const ItemShape item = ItemOf(ctx, 0);
  if (!item.rank_known) {
    ctx.SetOutputUnknownRank(0, elem);
    return absl::OkStatus();
  }
  const int rank = static_cast<int>(item.shape.size()) + (new_axis ? 1 : 0);
  absl::StatusOr<int> axis = NormalizeAxis(ctx.attrs().GetInt("axis", 0), rank);
  if (!axis.ok()) return ctx.Error(axis.status().message());
  SymShape out;
  for (int k = 0, j = 0; k < rank; ++k) {
    if (k == *axis) {
      out.push_back(SymDim::Unknown());  // the sum over the items, or their count
      if (!new_axis) ++j;
      continue;
    }
    out.push_back(item.shape[j++]);
  }
  ctx.SetOutput(0, elem, std::move(out));
  return absl::OkStatus();
}

absl::Status InferSplitToSequence(ShapeContext& ctx) {
  if (absl::Status s = CheckKind(ctx, 0, "input", false); !s.ok()) return s;
  if (ctx.has_input(1)) {
    if (absl::Status s = CheckInputDType(ctx, 1, "split", {DType::kI32, DType::kI64}); !s.ok()) return s;
    if (ctx.input_rank(1) > 1) return ctx.Error("split must be a scalar or a 1-D tensor");
  }
  if (!ctx.input(0).rank_known) {  // the kernel checks the rank when run
    ctx.SetOutputUnknownRank(0, BoxedDType(ValueKind::kSequence, ctx.input_dtype(0)));
    return absl::OkStatus();
  }
  // NormalizeAxis takes axis 0 of a scalar (as ops that treat it as [1] do); a split needs a dim.
  if (ctx.input_rank(0) == 0) return ctx.Error("input is a scalar; SplitToSequence splits along a dim (rank >= 1)");
  bool keepdims = true;
  if (absl::Status s = ReadBoolAttr(ctx, "keepdims", 1, &keepdims); !s.ok()) return s;
  absl::StatusOr<int> axis = NormalizeAxis(ctx.attrs().GetInt("axis", 0), ctx.input_rank(0));
  if (!axis.ok()) return ctx.Error(axis.status().message());
  SymShape item = ctx.input_shape(0);
  if (!ctx.has_input(1) && !keepdims) {
    item.erase(item.begin() + *axis);
  } else {
    item[*axis] = ctx.has_input(1) ? SymDim::Unknown() : SymDim(1);
  }
  ctx.SetOutput(0, BoxedDType(ValueKind::kSequence, ctx.input_dtype(0)), std::move(item));
  return absl::OkStatus();
}

absl::Status InferOptional(ShapeContext& ctx) {
  if (ctx.has_input(0)) {
    const DType d = ctx.input_dtype(0);
    if (IsOptionalDType(d)) return ctx.Error(absl::StrCat("input 0 is ", DTypeName(d), "; optionals do not nest"));
    const ValueKind kind = KindOf(d) == ValueKind::kSequence ? ValueKind::kOptionalSequence : ValueKind::kOptionalTensor;
    SetItemOutput(ctx, 0, BoxedDType(kind, ElemDType(d)), ItemOf(ctx, 0));
    return absl::OkStatus();
  }
  if (!ctx.attrs().Has("type")) return ctx.Error("an Optional without input needs the 'type' attribute");
  absl::StatusOr<DType> type = ParseDType(ctx.attrs().GetString("type", ""));
  const std::string name = ctx.attrs().GetString("type", "");
  DType elem = DType::kUnknown;
  ValueKind kind = ValueKind::kOptionalTensor;
  if (type.ok()) {
    elem = *type;
  } else if (name.size() > 5 && name.rfind("seq(", 0) == 0 && name.back() == ')') {
    absl::StatusOr<DType> inner = ParseDType(name.substr(4, name.size() - 5));
    if (!inner.ok()) return ctx.Error(absl::StrCat("type '", name, "' is not a tensor or sequence type"));
    elem = *inner;
    kind = ValueKind::kOptionalSequence;
  } else {
    return ctx.Error(absl::StrCat("type '", name, "' is not a tensor or sequence type (\"f32\", \"seq(f32)\")"));
  }
  ctx.SetOutputUnknownRank(0, BoxedDType(kind, elem));
  return absl::OkStatus();
}

absl::Status InferOptionalHasElement(ShapeContext& ctx) {
  ctx.SetOutput(0, DType::kBool, {});
  return absl::OkStatus();
}

absl::Status InferOptionalGetElement(ShapeContext& ctx) {
  if (absl::Status s = CheckInputPresent(ctx, 0, "input"); !s.ok()) return s;
  const DType d = ctx.input_dtype(0);
  // An optional gives what it holds; a tensor or sequence (opset 18) itself.
  DType out = d;
  if (KindOf(d) == ValueKind::kOptionalTensor) out = ElemDType(d);
  if (KindOf(d) == ValueKind::kOptionalSequence) out = BoxedDType(ValueKind::kSequence, ElemDType(d));
  SetItemOutput(ctx, 0, out, ItemOf(ctx, 0));
  return absl::OkStatus();
}

// The body runs once per item: its inputs are the i-th item of each sequence
// input and the tensor inputs as they are; its outputs are collected into
// one sequence each.
absl::Status InferSequenceMap(ShapeContext& ctx) {
  if (absl::Status s = CheckKind(ctx, 0, "input_sequence", true); !s.ok()) return s;
  const int body = ctx.attrs().GetSubgraph("body");
  const Subgraph& sg = ctx.graph().subgraphs[body];
  if (static_cast<int>(sg.inputs.size()) != ctx.num_inputs()) {
    return ctx.Error(absl::StrCat("body takes ", sg.inputs.size(), " inputs; the op has ", ctx.num_inputs()));
  }
  if (static_cast<int>(sg.outputs.size()) != ctx.num_outputs()) {
    return ctx.Error(absl::StrCat("body gives ", sg.outputs.size(), " outputs; the op has ", ctx.num_outputs()));
  }
  std::vector<ShapeContext::Input> ins;
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    if (absl::Status s = CheckInputPresent(ctx, i, "input"); !s.ok()) return s;
    ShapeContext::Input in = ctx.input(i);
    if (IsOptionalDType(in.dtype)) return ctx.Error(absl::StrCat("input ", i, " is an optional"));
    if (IsBoxed(in.dtype)) in.dtype = ElemDType(in.dtype);
    in.value = nullptr;
    ins.push_back(std::move(in));
  }
  if (ctx.inferrer() == nullptr) return ctx.Error("SequenceMap needs its body to infer shapes");
  absl::StatusOr<std::vector<ShapeContext::Output>> outs = ctx.inferrer()->Infer(body, ins);
  if (!outs.ok()) return outs.status();
  for (int j = 0; j < ctx.num_outputs(); ++j) {
    const ShapeContext::Output& o = (*outs)[j];
    if (IsBoxed(o.dtype)) return ctx.Error(absl::StrCat("body output ", j, " is a ", DTypeName(o.dtype)));
    SetItemOutput(ctx, j, BoxedDType(ValueKind::kSequence, o.dtype), ItemShape{o.rank_known, o.shape});
  }
  return absl::OkStatus();
}

OpDef SeqDef(std::string type, int min_in, int max_in, ShapeFn infer, std::vector<AttrSpec> attrs = {}) {
  OpDef def = MakeOpDef(std::move(type), min_in, max_in, std::move(attrs), infer);
  def.foldable = false;
  return def;
}

}  // namespace

absl::Status RegisterSequenceOps(OpRegistry& registry) {
  std::vector<OpDef> defs;
  defs.push_back(SeqDef("SequenceEmpty", 0, 0, &InferSequenceEmpty, {{"dtype", AttrKind::kInt}}));
  defs.push_back(SeqDef("SequenceConstruct", 1, -1, &InferSequenceConstruct));
  defs.push_back(SeqDef("SequenceInsert", 2, 3, &InferSequenceInsert));
  defs.push_back(SeqDef("SequenceErase", 1, 2, &InferSequenceErase));
  defs.push_back(SeqDef("SequenceAt", 2, 2, &InferSequenceAt));
  defs.back().kernel_allocates_outputs = true;  // items differ in shape
  defs.push_back(SeqDef("SequenceLength", 1, 1, &InferSequenceLength));
  defs.push_back(SeqDef("ConcatFromSequence", 1, 1, &InferConcatFromSequence,
                        {{"axis", AttrKind::kInt, true}, {"new_axis", AttrKind::kInt}}));
  defs.back().kernel_allocates_outputs = true;
  defs.push_back(SeqDef("SplitToSequence", 1, 2, &InferSplitToSequence,
                        {{"axis", AttrKind::kInt}, {"keepdims", AttrKind::kInt}}));
  defs.push_back(SeqDef("Optional", 0, 1, &InferOptional, {{"type", AttrKind::kString}}));
  defs.push_back(SeqDef("OptionalHasElement", 0, 1, &InferOptionalHasElement));
  defs.push_back(SeqDef("OptionalGetElement", 1, 1, &InferOptionalGetElement));
  defs.back().kernel_allocates_outputs = true;  // absent: an error only the run finds
  defs.push_back(SeqDef("SequenceMap", 1, -1, &InferSequenceMap, {{"body", AttrKind::kSubgraph, true}}));
  defs.back().max_outputs = -1;
  defs.back().kernel_allocates_outputs = true;
  for (OpDef& def : defs) {
    if (absl::Status s = registry.Register(std::move(def)); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace grove::ir
