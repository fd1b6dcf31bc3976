// Op definitions of the indexing group: ScatterElements (and its opset-9
// name Scatter), GatherND, DepthToSpace, SpaceToDepth, EyeLike, Compress,
// ReverseSequence, Unique, Det and Einsum, with ONNX semantics for opsets
// 9-18. Compress and Unique give outputs whose size depends on the input's
// values: their kernels allocate them, and the shape functions give unknown
// dims of the right rank.
#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "lib/ir/ops/einsum_equation.h"
#include "lib/ir/ops/input_checks.h"
#include "lib/ir/ops/ops.h"

namespace grove::ir {
namespace {

constexpr DType kIndexDTypes[] = {DType::kI64, DType::kI32};

bool IsConst(const SymDim& d, int64_t v) { return d.is_const() && d.value() == v; }

// Both dims constant and different.
bool KnownDifferent(const SymDim& a, const SymDim& b) { return a.is_const() && b.is_const() && a != b; }

// ---------------------------------------------------------------------------

// ScatterElements (opset 11+) and Scatter (opset 9-10, no reduction).
absl::Status InferScatterElements(ShapeContext& ctx) {
  if (absl::Status s = CheckScatterInputs(ctx); !s.ok()) return s;
  if (absl::StatusOr<int> axis = CheckElementsIndices(ctx); !axis.ok()) return axis.status();
  const SymShape& idx = ctx.input_shape(1);
  const SymShape& upd = ctx.input_shape(2);
  bool same = ctx.input_rank(2) == ctx.input_rank(1);
  for (int d = 0; same && d < ctx.input_rank(1); ++d) same = !KnownDifferent(idx[d], upd[d]);
  if (!same) {
    return ctx.Error(absl::StrCat("updates (input 2) has shape ", ShapeString(ctx, upd),
                                  "; expected the shape of indices ", ShapeString(ctx, idx)));
  }
  ctx.SetOutput(0, ctx.input_dtype(0), ctx.input_shape(0));
  return absl::OkStatus();
}

// out shape = indices.shape[:-1] + data.shape[batch_dims + k:].
absl::Status InferGatherND(ShapeContext& ctx) {
  if (absl::Status s = CheckInputPresent(ctx, 0, "data"); !s.ok()) return s;
  if (absl::Status s = CheckInputDType(ctx, 1, "indices", kIndexDTypes); !s.ok()) return s;
  const SymShape& data = ctx.input_shape(0);
  const SymShape& idx = ctx.input_shape(1);
  const int r = ctx.input_rank(0), q = ctx.input_rank(1);
  if (r == 0) return ctx.Error("data (input 0) is a scalar; expected rank >= 1");
  if (q == 0) return ctx.Error("indices (input 1) is a scalar; expected rank >= 1");
  const int64_t b = ctx.attrs().GetInt("batch_dims", 0);
  if (b < 0 || b >= q || b >= r) {
    return ctx.Error(absl::StrCat("attribute batch_dims is ", b, "; expected 0..", std::min(q, r) - 1,
                                  " (less than the ranks of data ", ShapeString(ctx, data), " and indices ",
                                  ShapeString(ctx, idx), ")"));
  }
  for (int64_t d = 0; d < b; ++d) {
    if (KnownDifferent(data[d], idx[d])) {
      return ctx.Error(absl::StrCat("the first ", b, " (batch_dims) dims of data ", ShapeString(ctx, data),
                                    " and indices ", ShapeString(ctx, idx), " must be equal"));
    }
  }
  if (!idx.back().is_const()) {
    return ctx.Error(absl::StrCat("indices (input 1) has shape ", ShapeString(ctx, idx),
                                  "; its last dim (the index depth) must be known"));
  }
  const int64_t k = idx.back().value();
  if (k < 1 || k > r - b) {
    return ctx.Error(absl::StrCat("indices (input 1) has shape ", ShapeString(ctx, idx), "; its last dim must be 1..",
                                  r - b, " (the data's rank ", r, " less batch_dims ", b, ")"));
  }
  SymShape out(idx.begin(), idx.end() - 1);
  out.insert(out.end(), data.begin() + b + k, data.end());
  ctx.SetOutput(0, ctx.input_dtype(0), std::move(out));
  return absl::OkStatus();
}

absl::StatusOr<int64_t> ReadBlockSize(const ShapeContext& ctx) {
  if (!ctx.attrs().Has("blocksize")) return ctx.Error("attribute blocksize is required");
  const int64_t b = ctx.attrs().GetInt("blocksize", 0);
  if (b < 1 || b > (int64_t{1} << 20)) return ctx.Error(absl::StrCat("attribute blocksize is ", b, "; expected >= 1"));
  return b;
}

absl::Status InferDepthToSpace(ShapeContext& ctx) {
  if (absl::Status s = CheckInputDType(ctx, 0, "input", kAllDTypesAndString); !s.ok()) return s;
  const std::string mode = ctx.attrs().GetString("mode", "DCR");
  if (mode != "DCR" && mode != "CRD") {
    return ctx.Error(absl::StrCat("attribute mode is '", mode, "'; expected 'DCR' or 'CRD'"));
  }
  absl::StatusOr<int64_t> b = ReadBlockSize(ctx);
  if (!b.ok()) return b.status();
  const SymShape& in = ctx.input_shape(0);
  if (in.size() != 4) {
    return ctx.Error(absl::StrCat("input (input 0) has shape ", ShapeString(ctx, in), "; expected [N, C, H, W]"));
  }
  const int64_t bb = *b * *b;
  if (in[1].is_const() && in[1].value() % bb != 0) {
    return ctx.Error(absl::StrCat("input (input 0) has shape ", ShapeString(ctx, in), "; its channels must divide by ",
                                  bb, " (blocksize squared)"));
  }
  ctx.SetOutput(0, ctx.input_dtype(0), {in[0], in[1] / SymDim(bb), in[2] * SymDim(*b), in[3] * SymDim(*b)});
  return absl::OkStatus();
}

absl::Status InferSpaceToDepth(ShapeContext& ctx) {
  if (absl::Status s = CheckInputDType(ctx, 0, "input", kAllDTypesAndString); !s.ok()) return s;
  absl::StatusOr<int64_t> b = ReadBlockSize(ctx);
  if (!b.ok()) return b.status();
  const SymShape& in = ctx.input_shape(0);
  if (in.size() != 4) {
    return ctx.Error(absl::StrCat("input (input 0) has shape ", ShapeString(ctx, in), "; expected [N, C, H, W]"));
  }
  for (int d : {2, 3}) {
    if (in[d].is_const() && in[d].value() % *b != 0) {
      return ctx.Error(absl::StrCat("input (input 0) has shape ", ShapeString(ctx, in), "; dim ", d,
                                    " must divide by the blocksize ", *b));
    }
  }
  ctx.SetOutput(0, ctx.input_dtype(0), {in[0], in[1] * SymDim(*b * *b), in[2] / SymDim(*b), in[3] / SymDim(*b)});
  return absl::OkStatus();
}

absl::Status InferEyeLike(ShapeContext& ctx) {
  if (absl::Status s = CheckInputDType(ctx, 0, "input", kAllDTypes); !s.ok()) return s;
  if (ctx.input_rank(0) != 2) {
    return ctx.Error(absl::StrCat("input (input 0) has shape ", ShapeString(ctx, ctx.input_shape(0)),
                                  "; EyeLike needs a 2-D tensor"));
  }
  DType dtype = ctx.input_dtype(0);
  if (ctx.attrs().Has("dtype")) {
    const int64_t d = ctx.attrs().GetInt("dtype", 0);
    if (d < static_cast<int64_t>(DType::kF32) || d > static_cast<int64_t>(DType::kU64)) {
      return ctx.Error(absl::StrCat("attribute dtype is ", d, "; expected a numeric or bool grove dtype 1..13"));
    }
    dtype = static_cast<DType>(d);
  }
  ctx.SetOutput(0, dtype, ctx.input_shape(0));
  return absl::OkStatus();
}

absl::Status InferCompress(ShapeContext& ctx) {
  if (absl::Status s = CheckInputPresent(ctx, 0, "input"); !s.ok()) return s;
  if (absl::Status s = CheckInputDType(ctx, 1, "condition", {DType::kBool}); !s.ok()) return s;
  if (ctx.input_rank(1) != 1) {
    return ctx.Error(absl::StrCat("condition (input 1) has shape ", ShapeString(ctx, ctx.input_shape(1)),
                                  "; expected a 1-D tensor"));
  }
  const SymShape& in = ctx.input_shape(0);
  if (!ctx.attrs().Has("axis")) {
    ctx.SetOutput(0, ctx.input_dtype(0), {SymDim::Unknown()});
    return absl::OkStatus();
  }
  const int rank = ctx.input_rank(0);
  if (rank == 0) return ctx.Error("input (input 0) is a scalar; attribute axis needs rank >= 1");
  absl::StatusOr<int> axis = NormalizeAxis(ctx.attrs().GetInt("axis", 0), rank);
  if (!axis.ok()) return ctx.Error(absl::StrCat("attribute axis: ", axis.status().message()));
  SymShape out = in;
  out[*axis] = SymDim::Unknown();
  ctx.SetOutput(0, ctx.input_dtype(0), std::move(out));
  return absl::OkStatus();
}

absl::Status InferReverseSequence(ShapeContext& ctx) {
  if (absl::Status s = CheckInputPresent(ctx, 0, "input"); !s.ok()) return s;
  if (absl::Status s = CheckInputDType(ctx, 1, "sequence_lens", kIndexDTypes); !s.ok()) return s;
  const SymShape& in = ctx.input_shape(0);
  if (in.size() < 2) {
    return ctx.Error(absl::StrCat("input (input 0) has shape ", ShapeString(ctx, in), "; expected rank >= 2"));
  }
  const int64_t batch_axis = ctx.attrs().GetInt("batch_axis", 1);
  const int64_t time_axis = ctx.attrs().GetInt("time_axis", 0);
  if ((batch_axis != 0 && batch_axis != 1) || (time_axis != 0 && time_axis != 1) || batch_axis == time_axis) {
    return ctx.Error(absl::StrCat("attributes batch_axis ", batch_axis, " and time_axis ", time_axis,
                                  "; expected 0 and 1 in either order"));
  }
  const SymShape& lens = ctx.input_shape(1);
  if (lens.size() != 1 || KnownDifferent(lens[0], in[batch_axis])) {
    return ctx.Error(absl::StrCat("sequence_lens (input 1) has shape ", ShapeString(ctx, lens), "; expected [",
                                  in[batch_axis].ToString(ctx.graph().symbol_names()),
                                  "] (the input's batch dim ", batch_axis, ")"));
  }
  ctx.SetOutput(0, ctx.input_dtype(0), in);
  return absl::OkStatus();
}

absl::Status InferUnique(ShapeContext& ctx) {
  // Strings compare by their bytes (UTF-8 byte order is code point order).
  if (absl::Status s = CheckInputDType(ctx, 0, "X", kAllDTypesAndString); !s.ok()) return s;
  bool sorted;
  if (absl::Status s = ReadBoolAttr(ctx, "sorted", 1, &sorted); !s.ok()) return s;
  const SymShape& in = ctx.input_shape(0);
  const SymDim unique = SymDim::Unknown();
  SymDim along = SymDim(1);
  SymShape y;
  if (ctx.attrs().Has("axis")) {
    const int rank = ctx.input_rank(0);
    if (rank == 0) return ctx.Error("X (input 0) is a scalar; attribute axis needs rank >= 1");
    absl::StatusOr<int> axis = NormalizeAxis(ctx.attrs().GetInt("axis", 0), rank);
    if (!axis.ok()) return ctx.Error(absl::StrCat("attribute axis: ", axis.status().message()));
    along = in[*axis];
    y = in;
    y[*axis] = unique;
  } else {
    for (const SymDim& d : in) along = along * d;
    y = {unique};
  }
  ctx.SetOutput(0, ctx.input_dtype(0), std::move(y));
  if (ctx.num_outputs() > 1) ctx.SetOutput(1, DType::kI64, {unique});
  if (ctx.num_outputs() > 2) ctx.SetOutput(2, DType::kI64, {along});
  if (ctx.num_outputs() > 3) ctx.SetOutput(3, DType::kI64, {unique});
  return absl::OkStatus();
}

absl::Status InferDet(ShapeContext& ctx) {
  if (absl::Status s = CheckInputDType(ctx, 0, "X", kFloatDTypes); !s.ok()) return s;
  const SymShape& in = ctx.input_shape(0);
  if (in.size() < 2 || KnownDifferent(in[in.size() - 2], in.back())) {
    return ctx.Error(absl::StrCat("X (input 0) has shape ", ShapeString(ctx, in),
                                  "; expected [..., M, M] (square matrices)"));
  }
  ctx.SetOutput(0, ctx.input_dtype(0), SymShape(in.begin(), in.end() - 2));
  return absl::OkStatus();
}

absl::Status InferEinsum(ShapeContext& ctx) {
  static constexpr DType kEinsumDTypes[] = {DType::kF32, DType::kF64, DType::kF16, DType::kBF16,
                                            DType::kI64, DType::kI32, DType::kI8,  DType::kU8};
  if (!ctx.attrs().Has("equation")) return ctx.Error("attribute equation is required");
  const int n = ctx.num_inputs();
  if (n == 0) return ctx.Error("needs at least one input");
  std::vector<int> ranks;
  for (int i = 0; i < n; ++i) {
    if (absl::Status s = CheckInputDType(ctx, i, absl::StrCat("Inputs[", i, "]"), kEinsumDTypes); !s.ok()) return s;
    if (i > 0) {
      if (absl::Status s = CheckSameDType(ctx, 0, "Inputs[0]", i, absl::StrCat("Inputs[", i, "]")); !s.ok()) return s;
    }
    ranks.push_back(ctx.input_rank(i));
  }
  absl::StatusOr<EinsumTerms> terms = ParseEinsum(ctx.attrs().GetString("equation", ""), ranks);
  if (!terms.ok()) return ctx.Error(terms.status().message());
  // Each label's size: a constant one wins over a symbolic one; two
  // different constants are an error (a 1 broadcasts in the ellipsis dims).
  std::vector<SymDim> size(static_cast<size_t>(terms->num_labels()), SymDim::Unknown());
  std::vector<bool> set(size.size(), false);
  for (int i = 0; i < n; ++i) {
    const SymShape& s = ctx.input_shape(i);
    for (size_t d = 0; d < s.size(); ++d) {
      const int l = terms->inputs[i][d];
      const bool ellipsis = l >= kEinsumLetterLabels;
      if (set[l] && ellipsis && IsConst(s[d], 1)) continue;  // a 1 broadcasts
      if (!set[l] || (ellipsis && IsConst(size[l], 1)) || (!size[l].is_const() && s[d].is_const())) {
        size[l] = s[d];
        set[l] = true;
      } else if (KnownDifferent(size[l], s[d])) {
        return ctx.Error(absl::StrCat("dim ", d, " of input ", i, " ", ShapeString(ctx, s), " is ", s[d].value(),
                                      " but the same subscript elsewhere has size ", size[l].value()));
      }
    }
  }
  SymShape out;
  for (int l : terms->output) out.push_back(set[l] ? size[l] : SymDim(1));
  ctx.SetOutput(0, ctx.input_dtype(0), std::move(out));
  return absl::OkStatus();
}

}  // namespace

absl::Status RegisterIndexingOps(OpRegistry& registry) {
  using K = AttrKind;
  std::vector<OpDef> defs;
  defs.push_back(
      MakeOpDef("ScatterElements", 3, 3, {{"axis", K::kInt}, {"reduction", K::kString}}, &InferScatterElements));
  defs.push_back(MakeOpDef("Scatter", 3, 3, {{"axis", K::kInt}}, &InferScatterElements));
  defs.push_back(MakeOpDef("GatherND", 2, 2, {{"batch_dims", K::kInt}}, &InferGatherND));
  defs.push_back(
      MakeOpDef("DepthToSpace", 1, 1, {{"blocksize", K::kInt, true}, {"mode", K::kString}}, &InferDepthToSpace));
  defs.push_back(MakeOpDef("SpaceToDepth", 1, 1, {{"blocksize", K::kInt, true}}, &InferSpaceToDepth));
  OpDef eye = MakeOpDef("EyeLike", 1, 1, {{"dtype", K::kInt}, {"k", K::kInt}}, &InferEyeLike);
  eye.reads_input_values = false;
  defs.push_back(std::move(eye));
  OpDef compress = MakeOpDef("Compress", 2, 2, {{"axis", K::kInt}}, &InferCompress);
  compress.kernel_allocates_outputs = true;
  defs.push_back(std::move(compress));
  defs.push_back(
      MakeOpDef("ReverseSequence", 2, 2, {{"batch_axis", K::kInt}, {"time_axis", K::kInt}}, &InferReverseSequence));
  OpDef unique = MakeOpDef("Unique", 1, 1, {{"axis", K::kInt}, {"sorted", K::kInt}}, &InferUnique);
  unique.max_outputs = 4;
  unique.kernel_allocates_outputs = true;
  defs.push_back(std::move(unique));
  defs.push_back(MakeOpDef("Det", 1, 1, {}, &InferDet));
  defs.push_back(MakeOpDef("Einsum", 1, -1, {{"equation", K::kString, true}}, &InferEinsum));
  for (OpDef& def : defs) {
    if (absl::Status s = registry.Register(std::move(def)); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace grove::ir
