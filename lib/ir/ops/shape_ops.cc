// Op definitions of the shape and data-movement group (Reshape, Transpose,
// Concat, Gather, Slice, Shape). Reshape and Slice need the values of their
// small integer inputs; when those are not known at plan time the result keeps
// its rank with unknown dims, so later shape functions still see a rank.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "lib/ir/ops/layout_params.h"
#include "lib/ir/ops/ops.h"
#include "lib/ir/ops/slice_bounds.h"

namespace grove::ir {
namespace {

std::string DimStr(const ShapeContext& ctx, const SymDim& d) { return d.ToString(ctx.graph().symbol_names()); }

std::string ShapeStr(const ShapeContext& ctx, const SymShape& s) {
  return ShapeToString(s, ctx.graph().symbol_names());
}

bool ConstMismatch(const SymDim& a, const SymDim& b) {
  return a.is_const() && b.is_const() && a.value() != b.value();
}

absl::Status CheckKnownDType(const ShapeContext& ctx, int i, absl::string_view what) {
  if (DTypeSize(ctx.input_dtype(i)) == 0) {
    return ctx.Error(absl::StrCat(what, " (input ", i, ") has an unknown dtype"));
  }
  return absl::OkStatus();
}

absl::Status CheckIndexTensor(const ShapeContext& ctx, int i, absl::string_view what, bool one_d) {
  const DType t = ctx.input_dtype(i);
  if (t != DType::kI32 && t != DType::kI64) {
    return ctx.Error(absl::StrCat(what, " (input ", i, ") has dtype ", DTypeName(t), "; expected i32 or i64"));
  }
  if (one_d && ctx.input_rank(i) != 1) {
    return ctx.Error(absl::StrCat(what, " (input ", i, ") has shape ", ShapeStr(ctx, ctx.input_shape(i)),
                                  "; expected a 1-D tensor"));
  }
  return absl::OkStatus();
}

SymDim Product(const SymShape& s) {
  SymDim p(1);
  for (const SymDim& d : s) p = p * d;
  return p;
}

// ---------------------------------------------------------------------------

absl::Status InferReshape(ShapeContext& ctx) {
  if (absl::Status s = CheckKnownDType(ctx, 0, "Reshape data"); !s.ok()) return s;
  if (ctx.input_dtype(1) != DType::kI64) {
    return ctx.Error(absl::StrCat("Reshape shape (input 1) has dtype ", DTypeName(ctx.input_dtype(1)),
                                  "; expected i64"));
  }
  const int64_t allowzero = ctx.attrs().GetInt("allowzero", 0);
  if (allowzero != 0 && allowzero != 1) {
    return ctx.Error(absl::StrCat("Reshape attribute allowzero is ", allowzero, "; expected 0 or 1"));
  }
  const SymShape& data = ctx.input_shape(0);
  const SymShape& shape_shape = ctx.input_shape(1);
  std::vector<int64_t> dims;
  const bool known_value = ctx.InputInts(1, &dims);
  if (shape_shape.size() != 1 || (!known_value && !shape_shape[0].is_const())) {
    return ctx.Error(absl::StrCat("Reshape shape (input 1) must be a 1-D tensor with a known length; its shape is ",
                                  ShapeStr(ctx, shape_shape)));
  }
  if (!known_value) {
    SymShape out;
    for (int64_t i = 0; i < shape_shape[0].value(); ++i) out.push_back(SymDim::Unknown());
    ctx.SetOutput(0, ctx.input_dtype(0), std::move(out));
    return absl::OkStatus();
  }
  SymShape out(dims.size());
  int infer_at = -1;
  bool has_zero = false;
  SymDim known(1);
  int64_t literal = 1;  // product of the literal dims, checked for overflow
  for (size_t i = 0; i < dims.size(); ++i) {
    const int64_t v = dims[i];
    if (v == -1) {
      if (infer_at >= 0) {
        return ctx.Error(absl::StrCat("Reshape shape ", absl::StrJoin(dims, ","), " has more than one -1"));
      }
      infer_at = static_cast<int>(i);
      continue;
    }
    if (v < -1) {
      return ctx.Error(absl::StrCat("Reshape shape ", absl::StrJoin(dims, ","), " has dim ", i, " = ", v,
                                    "; dims must be >= -1"));
    }
    if (v == 0 && allowzero == 0) {
      if (i >= data.size()) {
        return ctx.Error(absl::StrCat("Reshape shape dim ", i, " is 0 (copy the input dim) but the input ",
                                      ShapeStr(ctx, data), " has rank ", data.size()));
      }
      out[i] = data[i];
    } else {
      has_zero |= v == 0;
      if (__builtin_mul_overflow(literal, v, &literal)) {
        return ctx.Error(absl::StrCat("Reshape shape ", absl::StrJoin(dims, ","), " overflows int64 elements"));
      }
      out[i] = SymDim(v);
    }
    known = known * out[i];
  }
  if (has_zero && infer_at >= 0) {
    return ctx.Error("Reshape shape has both 0 and -1 while allowzero=1; the -1 cannot be inferred");
  }
  const SymDim total = Product(data);
  if (infer_at >= 0) {
    if (known.is_const() && known.value() == 0) {
      return ctx.Error(absl::StrCat("Reshape shape ", absl::StrJoin(dims, ","),
                                    " has a -1 but the other dims multiply to 0; it cannot be inferred"));
    }
    if (known.is_const() && total.is_const() && total.value() % known.value() != 0) {
      return ctx.Error(absl::StrCat("Reshape cannot reshape ", ShapeStr(ctx, data), " (", total.value(),
                                    " elements) into ", absl::StrJoin(dims, ","), ": ", total.value(),
                                    " is not a multiple of ", known.value()));
    }
    out[infer_at] = total / known;
  } else if (ConstMismatch(total, known)) {
    return ctx.Error(absl::StrCat("Reshape cannot reshape ", ShapeStr(ctx, data), " (", total.value(),
                                  " elements) into ", ShapeStr(ctx, out), " (", known.value(), " elements)"));
  }
  ctx.SetOutput(0, ctx.input_dtype(0), std::move(out));
  return absl::OkStatus();
}

absl::Status InferTranspose(ShapeContext& ctx) {
  if (absl::Status s = CheckKnownDType(ctx, 0, "Transpose data"); !s.ok()) return s;
  const SymShape& in = ctx.input_shape(0);
  const int rank = ctx.input_rank(0);
  const std::vector<int64_t> perm = ir::TransposePerm(ctx.attrs(), rank);
  if (static_cast<int>(perm.size()) != rank) {
    return ctx.Error(absl::StrCat("Transpose perm [", absl::StrJoin(perm, ","), "] has ", perm.size(),
                                  " entries but the input ", ShapeStr(ctx, in), " has rank ", rank));
  }
  std::vector<bool> seen(rank, false);
  SymShape out(rank);
  for (int i = 0; i < rank; ++i) {
    const int64_t p = perm[i];
    if (p < 0 || p >= rank || seen[p]) {
      return ctx.Error(absl::StrCat("Transpose perm [", absl::StrJoin(perm, ","),
                                    "] is not a permutation of 0..", rank - 1));
    }
    seen[p] = true;
    out[i] = in[p];
  }
  ctx.SetOutput(0, ctx.input_dtype(0), std::move(out));
  return absl::OkStatus();
}

absl::Status InferConcat(ShapeContext& ctx) {
  if (!ctx.attrs().Has("axis")) return ctx.Error("Concat needs the attribute axis");
  const int n = ctx.num_inputs();
  for (int i = 0; i < n; ++i) {
    if (!ctx.has_input(i)) return ctx.Error(absl::StrCat("Concat input ", i, " is missing"));
  }
  if (absl::Status s = CheckKnownDType(ctx, 0, "Concat input"); !s.ok()) return s;
  const int rank = ctx.input_rank(0);
  if (rank == 0) return ctx.Error("Concat input 0 is a scalar (rank 0); expected rank >= 1");
  absl::StatusOr<int> axis = NormalizeAxis(ctx.attrs().GetInt("axis", 0), rank);
  if (!axis.ok()) return ctx.Error(absl::StrCat("Concat: ", axis.status().message()));
  SymShape out = ctx.input_shape(0);
  out[*axis] = SymDim(0);
  for (int i = 0; i < n; ++i) {
    const SymShape& s = ctx.input_shape(i);
    if (ctx.input_dtype(i) != ctx.input_dtype(0)) {
      return ctx.Error(absl::StrCat("Concat input ", i, " has dtype ", DTypeName(ctx.input_dtype(i)),
                                    " but input 0 has ", DTypeName(ctx.input_dtype(0))));
    }
    if (static_cast<int>(s.size()) != rank) {
      return ctx.Error(absl::StrCat("Concat input ", i, " has shape ", ShapeStr(ctx, s), " (rank ", s.size(),
                                    ") but input 0 has rank ", rank));
    }
    for (int d = 0; d < rank; ++d) {
      if (d == *axis) {
        out[d] = out[d] + s[d];
      } else if (ConstMismatch(out[d], s[d])) {
        return ctx.Error(absl::StrCat("Concat input ", i, " has shape ", ShapeStr(ctx, s), "; dim ", d,
                                      " must equal ", DimStr(ctx, out[d]), " as in the other inputs"));
      } else if (!out[d].is_const() && s[d].is_const()) {
        out[d] = s[d];
      }
    }
  }
  ctx.SetOutput(0, ctx.input_dtype(0), std::move(out));
  return absl::OkStatus();
}

absl::Status InferGather(ShapeContext& ctx) {
  if (absl::Status s = CheckKnownDType(ctx, 0, "Gather data"); !s.ok()) return s;
  if (absl::Status s = CheckIndexTensor(ctx, 1, "Gather indices", false); !s.ok()) return s;
  const SymShape& data = ctx.input_shape(0);
  if (data.empty()) return ctx.Error("Gather data (input 0) is a scalar (rank 0); expected rank >= 1");
  absl::StatusOr<int> axis = NormalizeAxis(ctx.attrs().GetInt("axis", 0), ctx.input_rank(0));
  if (!axis.ok()) return ctx.Error(absl::StrCat("Gather: ", axis.status().message()));
  SymShape out(data.begin(), data.begin() + *axis);
  const SymShape& idx = ctx.input_shape(1);
  out.insert(out.end(), idx.begin(), idx.end());
  out.insert(out.end(), data.begin() + *axis + 1, data.end());
  ctx.SetOutput(0, ctx.input_dtype(0), std::move(out));
  return absl::OkStatus();
}

absl::Status InferSlice(ShapeContext& ctx) {
  if (absl::Status s = CheckKnownDType(ctx, 0, "Slice data"); !s.ok()) return s;
  static constexpr const char* kNames[] = {"", "Slice starts", "Slice ends", "Slice axes", "Slice steps"};
  for (int i = 1; i <= 4; ++i) {
    if (i >= 3 && !ctx.has_input(i)) continue;
    if (absl::Status s = CheckIndexTensor(ctx, i, kNames[i], true); !s.ok()) return s;
    if (ctx.input_dtype(i) != ctx.input_dtype(1)) {
      return ctx.Error(absl::StrCat(kNames[i], " (input ", i, ") has dtype ", DTypeName(ctx.input_dtype(i)),
                                    " but starts has ", DTypeName(ctx.input_dtype(1))));
    }
    if (ConstMismatch(ctx.input_shape(i)[0], ctx.input_shape(1)[0])) {
      return ctx.Error(absl::StrCat(kNames[i], " (input ", i, ") has ", DimStr(ctx, ctx.input_shape(i)[0]),
                                    " entries but starts has ", DimStr(ctx, ctx.input_shape(1)[0])));
    }
  }
  const SymShape& data = ctx.input_shape(0);
  const int rank = ctx.input_rank(0);
  if (rank == 0) return ctx.Error("Slice data (input 0) is a scalar (rank 0); expected rank >= 1");
  SymShape out = data;
  std::vector<int64_t> starts, ends, axes, steps;
  const bool have_axes = !ctx.has_input(3) || ctx.InputInts(3, &axes);
  const bool have_steps = !ctx.has_input(4) || ctx.InputInts(4, &steps);
  const bool have_bounds = ctx.InputInts(1, &starts) && ctx.InputInts(2, &ends);

  // Which axes are sliced, when that is known without the bounds.
  int64_t n = -1;
  if (ctx.input_shape(1)[0].is_const()) n = ctx.input_shape(1)[0].value();
  if (ctx.has_input(3) && have_axes) n = static_cast<int64_t>(axes.size());
  if (!ctx.has_input(3) && n >= 0) {
    if (n > rank) {
      return ctx.Error(absl::StrCat("Slice has ", n, " starts but the data ", ShapeStr(ctx, data), " has rank ", rank));
    }
    for (int64_t i = 0; i < n; ++i) axes.push_back(i);
  }
  const bool axes_known = ctx.has_input(3) ? have_axes : n >= 0;
  std::vector<bool> seen(rank, false);
  if (axes_known) {
    for (int64_t& a : axes) {
      absl::StatusOr<int> norm = NormalizeAxis(a, rank);
      if (!norm.ok()) return ctx.Error(absl::StrCat("Slice axes: ", norm.status().message()));
      if (seen[*norm]) return ctx.Error(absl::StrCat("Slice axes repeat axis ", *norm));
      seen[*norm] = true;
      a = *norm;
    }
  }
  if (have_steps && ctx.has_input(4)) {
    for (int64_t s : steps) {
      if (s == 0) return ctx.Error("Slice steps contain 0; a step must be non-zero");
    }
  }
  if (!axes_known || !have_bounds || !have_steps) {
    for (int d = 0; d < rank; ++d) {
      if (!axes_known || seen[d]) out[d] = SymDim::Unknown();
    }
    ctx.SetOutput(0, ctx.input_dtype(0), std::move(out));
    return absl::OkStatus();
  }
  if (!ctx.has_input(4)) steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size()) {
    return ctx.Error(absl::StrCat("Slice starts, ends, axes and steps have different lengths (", starts.size(),
                                  ", ", ends.size(), ", ", axes.size(), ", ", steps.size(), ")"));
  }
  for (size_t i = 0; i < starts.size(); ++i) {
    const SymDim& d = data[axes[i]];
    if (d.is_const()) {
      out[axes[i]] = SymDim(ClampSlice(d.value(), starts[i], ends[i], steps[i]).length);
    } else if (steps[i] == 1 && starts[i] >= 0 && ends[i] >= std::numeric_limits<int32_t>::max()) {
      // x[start:] on a dynamic axis, the usual exporter idiom.
      out[axes[i]] = d - SymDim(starts[i]);
    } else {
      out[axes[i]] = SymDim::Unknown();
    }
  }
  ctx.SetOutput(0, ctx.input_dtype(0), std::move(out));
  return absl::OkStatus();
}

absl::Status InferShape(ShapeContext& ctx) {
  const int64_t rank = ctx.input_rank(0);
  auto clamp = [rank](int64_t v) {
    if (v < 0) v += rank;
    return std::max<int64_t>(0, std::min(v, rank));
  };
  const int64_t start = clamp(ctx.attrs().GetInt("start", 0));
  const int64_t end = clamp(ctx.attrs().GetInt("end", rank));
  ctx.SetOutput(0, DType::kI64, {SymDim(std::max<int64_t>(0, end - start))});
  return absl::OkStatus();
}

absl::Status Register(OpRegistry& registry, std::string type, int min_in, int max_in,
                      std::vector<AttrSpec> attrs, ShapeFn infer, bool reads_values = true) {
  OpDef def;
  def.type = std::move(type);
  def.min_inputs = min_in;
  def.max_inputs = max_in;
  def.attrs = std::move(attrs);
  def.infer = infer;
  def.reads_input_values = reads_values;
  return registry.Register(std::move(def));
}

}  // namespace

absl::Status RegisterShapeOps(OpRegistry& registry) {
  const absl::Status results[] = {
      Register(registry, "Reshape", 2, 2, {{"allowzero", AttrKind::kInt}}, &InferReshape),
      Register(registry, "Transpose", 1, 1, {{"perm", AttrKind::kInts}}, &InferTranspose),
      Register(registry, "Concat", 1, -1, {{"axis", AttrKind::kInt, /*required=*/true}}, &InferConcat),
      Register(registry, "Gather", 2, 2, {{"axis", AttrKind::kInt}}, &InferGather),
      Register(registry, "Slice", 3, 5, {}, &InferSlice),
      Register(registry, "Shape", 1, 1, {{"start", AttrKind::kInt}, {"end", AttrKind::kInt}}, &InferShape,
               /*reads_values=*/false),
  };
  for (const absl::Status& s : results) {
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace grove::ir
