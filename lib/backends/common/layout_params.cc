#include "lib/backends/common/layout_params.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "lib/ir/ops/slice_bounds.h"

namespace grove::backends {

using ir::DimsString;

absl::Status CheckPlannedOutput(const ir::KernelContext& ctx, int i, DType dtype, const std::vector<int64_t>& shape) {
  if (!ctx.has_output(i)) return absl::OkStatus();
  const TensorView& y = ctx.output(i);
  if (y.dtype != dtype || y.shape != shape) {
    return ctx.Error(absl::StrCat("output ", i, " is ", DTypeName(dtype), " ", DimsString(shape),
                                  " for these inputs but was planned as ", DTypeName(y.dtype), " ",
                                  DimsString(y.shape)));
  }
  return absl::OkStatus();
}

absl::Status CheckPlanned(const ir::KernelContext& ctx, absl::string_view op, const std::vector<int64_t>& expected) {
  const TensorView& y = ctx.output(0);
  if (y.shape != expected) {
    return ctx.Error(absl::StrCat(op, " gives ", DimsString(expected), " for these inputs but the planned output is ",
                                  DimsString(y.shape)));
  }
  return absl::OkStatus();
}

int64_t Product(absl::Span<const int64_t> dims, size_t begin, size_t end) {
  int64_t p = 1;
  for (size_t i = begin; i < end; ++i) p *= dims[i];
  return p;
}

absl::Status ReadIntArg(const ir::KernelContext& ctx, IntReader read, int i, absl::string_view name,
                        absl::string_view attr, std::vector<int64_t>* out, bool* given) {
  *given = true;
  if (ctx.has_input(i)) {
    absl::StatusOr<std::vector<int64_t>> v = read(i, name);
    if (!v.ok()) return v.status();
    *out = *std::move(v);
  } else if (ctx.attrs().Has(attr)) {
    *out = ctx.attrs().GetInts(attr);
  } else {
    *given = false;
  }
  return absl::OkStatus();
}

absl::Status CheckNonNegativeDims(const ir::KernelContext& ctx, const std::vector<int64_t>& shape,
                                  absl::string_view what) {
  for (int64_t v : shape) {
    if (v < 0) return ctx.Error(absl::StrCat(what, " ", DimsString(shape), " has a negative dim"));
  }
  return absl::OkStatus();
}

absl::StatusOr<int> SplitAxis(const ir::KernelContext& ctx) {
  const int rank = static_cast<int>(ctx.input(0).shape.size());
  if (rank == 0) return ctx.Error("input (input 0) is a scalar; Split needs rank >= 1");
  absl::StatusOr<int> axis = ir::NormalizeAxis(ctx.attrs().GetInt("axis", 0), rank);
  if (!axis.ok()) return ctx.Error(absl::StrCat("attribute axis: ", axis.status().message()));
  return *axis;
}

absl::StatusOr<std::vector<int64_t>> SplitOutputSizes(const ir::KernelContext& ctx, int axis,
                                                      const std::vector<int64_t>* split) {
  const TensorView& x = ctx.input(0);
  const int n = ctx.num_outputs();
  absl::StatusOr<std::vector<int64_t>> sizes =
      ir::SplitSizes(x.shape[axis], n, split, ctx.attrs().GetInt("num_outputs", -1));
  if (!sizes.ok()) return ctx.Error(sizes.status().message());
  for (int i = 0; i < n; ++i) {
    std::vector<int64_t> shape = x.shape;
    shape[axis] = (*sizes)[i];
    if (absl::Status s = CheckPlannedOutput(ctx, i, x.dtype, shape); !s.ok()) return s;
  }
  return sizes;
}

absl::StatusOr<int> ElementsAxis(const ir::KernelContext& ctx) {
  const TensorView& data = ctx.input(0);
  const TensorView& idx = ctx.input(1);
  const int rank = static_cast<int>(data.shape.size());
  if (rank == 0 || static_cast<int>(idx.shape.size()) != rank) {
    return ctx.Error(absl::StrCat("data ", DimsString(data.shape), " and indices ", DimsString(idx.shape),
                                  " must have the same rank >= 1"));
  }
  absl::StatusOr<int> axis = ir::NormalizeAxis(ctx.attrs().GetInt("axis", 0), rank);
  if (!axis.ok()) return ctx.Error(absl::StrCat("attribute axis: ", axis.status().message()));
  for (int d = 0; d < rank; ++d) {
    if (d != *axis && idx.shape[d] > data.shape[d]) {
      return ctx.Error(absl::StrCat("indices ", DimsString(idx.shape), " dim ", d, " exceeds the data's ",
                                    DimsString(data.shape)));
    }
  }
  return *axis;
}

absl::StatusOr<int> GatherElementsAxis(const ir::KernelContext& ctx) {
  absl::StatusOr<int> axis = ElementsAxis(ctx);
  if (!axis.ok()) return axis;
  if (absl::Status s = CheckPlannedOutput(ctx, 0, ctx.input(0).dtype, ctx.input(1).shape); !s.ok()) return s;
  return axis;
}

std::string GatherElementsIndexMessage(int64_t given, int axis, const std::vector<int64_t>& data_shape) {
  const int64_t dim = data_shape[axis];
  return absl::StrCat("index ", given, " is out of range for axis ", axis, " of the data ", DimsString(data_shape),
                      " (expected ", -dim, "..", dim - 1, ")");
}

absl::Status GatherElementsIndexError(const ir::KernelContext& ctx, int64_t given, int axis) {
  return ctx.Error(GatherElementsIndexMessage(given, axis, ctx.input(0).shape));
}

absl::StatusOr<ScatterReduction> ParseScatterReduction(const ir::KernelContext& ctx) {
  const std::string r = ctx.attrs().GetString("reduction", "none");
  if (r == "none") return ScatterReduction::kNone;
  if (ctx.input(0).dtype == DType::kString) {
    return ctx.Error(absl::StrCat("attribute reduction is '", r,
                                  "' but data (input 0) is string; strings can only be replaced (reduction 'none')"));
  }
  if (r == "add") return ScatterReduction::kAdd;
  if (r == "mul") return ScatterReduction::kMul;
  if (r == "max") return ScatterReduction::kMax;
  if (r == "min") return ScatterReduction::kMin;
  return ctx.Error(
      absl::StrCat("attribute reduction is '", r, "'; expected 'none', 'add', 'mul', 'max' or 'min'"));
}

absl::StatusOr<int64_t> ScatterNDIndexDepth(const ir::KernelContext& ctx) {
  const TensorView& data = ctx.input(0);
  const TensorView& idx = ctx.input(1);
  const TensorView& upd = ctx.input(2);
  const int64_t rank = static_cast<int64_t>(data.shape.size());
  const int64_t k = idx.shape.empty() ? -1 : idx.shape.back();
  if (k < 1 || k > rank) {
    return ctx.Error(
        absl::StrCat("indices ", DimsString(idx.shape), " must end in a dim of 1..", rank, " (the data's rank)"));
  }
  std::vector<int64_t> want(idx.shape.begin(), idx.shape.end() - 1);
  want.insert(want.end(), data.shape.begin() + k, data.shape.end());
  if (upd.shape != want || upd.dtype != data.dtype) {
    return ctx.Error(absl::StrCat("updates is ", DTypeName(upd.dtype), " ", DimsString(upd.shape), "; expected ",
                                  DTypeName(data.dtype), " ", DimsString(want)));
  }
  if (absl::Status s = CheckPlannedOutput(ctx, 0, data.dtype, data.shape); !s.ok()) return s;
  return k;
}

absl::StatusOr<ExpandView> ExpandParams(const ir::KernelContext& ctx, const std::vector<int64_t>& shape) {
  const TensorView& x = ctx.input(0);
  if (absl::Status s = CheckNonNegativeDims(ctx, shape, "shape (input 1)"); !s.ok()) return s;
  absl::StatusOr<std::vector<int64_t>> out_shape = ir::ExpandShape(x.shape, shape);
  if (!out_shape.ok()) return ctx.Error(out_shape.status().message());
  if (absl::Status s = CheckPlannedOutput(ctx, 0, x.dtype, *out_shape); !s.ok()) return s;
  ExpandView v;
  const std::vector<int64_t> in_strides = ir::Strides(x.shape);
  const size_t rank = out_shape->size(), lead = rank - x.shape.size();
  v.strides.assign(rank, 0);
  for (size_t i = lead; i < rank; ++i) v.strides[i] = x.shape[i - lead] == 1 ? 0 : in_strides[i - lead];
  v.shape = *std::move(out_shape);
  return v;
}

absl::StatusOr<std::vector<int64_t>> TileOutputShape(const ir::KernelContext& ctx,
                                                     const std::vector<int64_t>& repeats) {
  const TensorView& x = ctx.input(0);
  const size_t rank = x.shape.size();
  if (repeats.size() != rank) {
    return ctx.Error(absl::StrCat("repeats (input 1) has ", repeats.size(), " entries; expected ", rank));
  }
  std::vector<int64_t> out_shape(rank);
  for (size_t d = 0; d < rank; ++d) {
    const int64_t r = repeats[d];
    if (r < 0) return ctx.Error(absl::StrCat("repeats (input 1) ", DimsString(repeats), " has a negative entry"));
    if (__builtin_mul_overflow(x.shape[d], r, &out_shape[d])) return ctx.Error("repeats overflow int64");
  }
  if (absl::Status s = CheckPlannedOutput(ctx, 0, x.dtype, out_shape); !s.ok()) return s;
  return out_shape;
}

absl::StatusOr<PadPlan> PadParams(const ir::KernelContext& ctx, IntReader read, absl::string_view mode) {
  const TensorView& x = ctx.input(0);
  std::vector<int64_t> pads, axes;
  bool has_pads = false;
  if (absl::Status s = ReadIntArg(ctx, read, 1, "pads", "pads", &pads, &has_pads); !s.ok()) return s;
  if (!has_pads) return ctx.Error("needs pads, as input 1 or as attribute pads");
  if (ctx.has_input(3)) {
    absl::StatusOr<std::vector<int64_t>> a = read(3, "axes");
    if (!a.ok()) return a.status();
    axes = *std::move(a);
  }
  const int64_t rank = static_cast<int64_t>(x.shape.size());
  absl::StatusOr<ir::PadAmounts> amounts = ir::PadAmountsFor(rank, pads, ctx.has_input(3) ? &axes : nullptr);
  if (!amounts.ok()) return ctx.Error(amounts.status().message());
  std::vector<int64_t> out_shape(rank);
  for (int64_t d = 0; d < rank; ++d) {
    const int64_t o = x.shape[d] + amounts->begin[d] + amounts->end[d];
    if (o < 0) return ctx.Error(absl::StrCat("pads ", DimsString(pads), " make dim ", d, " negative (", o, ")"));
    if (mode != "constant" && x.shape[d] == 0 && (amounts->begin[d] > 0 || amounts->end[d] > 0)) {
      return ctx.Error(absl::StrCat("mode '", mode, "' cannot pad dim ", d, " of the data ", DimsString(x.shape),
                                    ", which is empty"));
    }
    out_shape[d] = o;
  }
  if (absl::Status s = CheckPlannedOutput(ctx, 0, x.dtype, out_shape); !s.ok()) return s;
  return PadPlan{*std::move(amounts), std::move(out_shape)};
}

absl::Status CheckPadValue(const ir::KernelContext& ctx) {
  if (!ctx.has_input(2)) return absl::OkStatus();
  const TensorView& x = ctx.input(0);
  const TensorView& v = ctx.input(2);
  if (v.dtype != x.dtype || v.num_elements() != 1) {
    return ctx.Error(absl::StrCat("constant_value (input 2) is ", DTypeName(v.dtype), " ", DimsString(v.shape),
                                  "; expected one ", DTypeName(x.dtype), " element"));
  }
  return absl::OkStatus();
}

absl::Status CheckRangeInputs(const ir::KernelContext& ctx) {
  const TensorView& start = ctx.input(0);
  for (int i = 0; i < 3; ++i) {
    const TensorView& v = ctx.input(i);
    if (v.dtype != start.dtype || v.num_elements() != 1) {
      return ctx.Error(absl::StrCat("start, limit and delta must be single elements of one dtype; input ", i,
                                    " is ", DTypeName(v.dtype), " ", DimsString(v.shape)));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<DType> ConstantOfShapeDType(const ir::KernelContext& ctx) {
  if (!ctx.has_input(1)) return DType::kF32;
  const TensorView& v = ctx.input(1);
  if (v.num_elements() != 1 || DTypeSize(v.dtype) == 0) {
    return ctx.Error(absl::StrCat("value (input 1) is ", DTypeName(v.dtype), " ", DimsString(v.shape),
                                  "; expected one element"));
  }
  // ONNX's ConstantOfShape makes numbers and bools only.
  if (v.dtype == DType::kString) return ctx.Error("value (input 1) is a string; expected a number or a bool");
  return v.dtype;
}

absl::StatusOr<int64_t> TriluK(const ir::KernelContext& ctx, IntReader read) {
  const TensorView& x = ctx.input(0);
  if (x.shape.size() < 2) return ctx.Error(absl::StrCat("input ", DimsString(x.shape), " has rank < 2"));
  if (!ctx.has_input(1)) return int64_t{0};
  absl::StatusOr<std::vector<int64_t>> kv = read(1, "k");
  if (!kv.ok()) return kv.status();
  if (kv->size() != 1) return ctx.Error(absl::StrCat("k (input 1) has ", kv->size(), " elements; expected 1"));
  return (*kv)[0];
}

absl::Status CheckOneHotDepthInput(const ir::KernelContext& ctx) {
  if (ctx.input(1).num_elements() != 1 || DTypeSize(ctx.input(1).dtype) == 0) {
    return ctx.Error(
        absl::StrCat("depth (input 1) is ", DimsString(ctx.input(1).shape), "; expected one element"));
  }
  return absl::OkStatus();
}

absl::StatusOr<OneHotPlan> OneHotParams(const ir::KernelContext& ctx, const TensorView& depth_on_host) {
  const TensorView& indices = ctx.input(0);
  const TensorView& values = ctx.input(2);
  absl::StatusOr<int64_t> depth = ir::NumberAsInt(ir::ReadNumber(depth_on_host, 0), "depth (input 1)");
  if (!depth.ok()) return ctx.Error(depth.status().message());
  if (*depth < 0) return ctx.Error(absl::StrCat("depth (input 1) is ", *depth, "; expected >= 0"));
  if (values.num_elements() != 2) {
    return ctx.Error(absl::StrCat("values (input 2) is ", DimsString(values.shape), "; expected [2] (off, on)"));
  }
  const int64_t out_rank = static_cast<int64_t>(indices.shape.size()) + 1;
  const int64_t given = ctx.attrs().GetInt("axis", -1);
  const int64_t axis = given < 0 ? given + out_rank : given;
  if (axis < 0 || axis >= out_rank) return ctx.Error(absl::StrCat("attribute axis ", given, " is out of range"));
  OneHotPlan p;
  p.depth = *depth;
  p.axis = axis;
  p.out_shape.assign(indices.shape.begin(), indices.shape.begin() + axis);
  p.out_shape.push_back(*depth);
  p.out_shape.insert(p.out_shape.end(), indices.shape.begin() + axis, indices.shape.end());
  if (absl::Status s = CheckPlannedOutput(ctx, 0, values.dtype, p.out_shape); !s.ok()) return s;
  return p;
}

absl::StatusOr<ExpandView> TransposeParams(const ir::KernelContext& ctx) {
  const TensorView& x = ctx.input(0);
  const int rank = static_cast<int>(x.shape.size());
  const std::vector<int64_t> perm = ir::TransposePerm(ctx.attrs(), rank);
  if (static_cast<int>(perm.size()) != rank) {
    return ctx.Error(absl::StrCat("Transpose perm has ", perm.size(), " entries for rank ", rank));
  }
  const std::vector<int64_t> in_strides = ir::Strides(x.shape);
  ExpandView v;
  v.shape.resize(rank);
  v.strides.resize(rank);
  std::vector<bool> seen(rank, false);
  for (int i = 0; i < rank; ++i) {
    if (perm[i] < 0 || perm[i] >= rank || seen[perm[i]]) {
      return ctx.Error(absl::StrCat("Transpose perm [", absl::StrJoin(perm, ","), "] is not a permutation"));
    }
    seen[perm[i]] = true;
    v.shape[i] = x.shape[perm[i]];
    v.strides[i] = in_strides[perm[i]];
  }
  if (absl::Status s = CheckPlanned(ctx, "Transpose", v.shape); !s.ok()) return s;
  return v;
}

absl::StatusOr<ConcatPlan> ConcatParams(const ir::KernelContext& ctx) {
  const int n = ctx.num_inputs();
  const TensorView& y = ctx.output(0);
  const int rank = static_cast<int>(y.shape.size());
  absl::StatusOr<int> axis = ir::NormalizeAxis(ctx.attrs().GetInt("axis", 0), rank);
  if (!axis.ok() || rank == 0) return ctx.Error("Concat axis is out of range for the output");
  int64_t axis_total = 0;
  for (int i = 0; i < n; ++i) {
    if (!ctx.has_input(i)) return ctx.Error(absl::StrCat("Concat input ", i, " is missing"));
    const TensorView& x = ctx.input(i);
    bool ok = x.dtype == y.dtype && static_cast<int>(x.shape.size()) == rank;
    for (int d = 0; ok && d < rank; ++d) ok = d == *axis || x.shape[d] == y.shape[d];
    if (!ok) {
      return ctx.Error(absl::StrCat("Concat input ", i, " has shape ", DimsString(x.shape), " (",
                                    DTypeName(x.dtype), "), which does not match the output ", DimsString(y.shape),
                                    " (", DTypeName(y.dtype), ") outside axis ", *axis, " at run time"));
    }
    axis_total += x.shape[*axis];
  }
  if (axis_total != y.shape[*axis]) {
    return ctx.Error(absl::StrCat("Concat inputs sum to ", axis_total, " along axis ", *axis,
                                  " but the planned output is ", DimsString(y.shape)));
  }
  ConcatPlan p;
  p.axis = *axis;
  p.outer = Product(y.shape, 0, static_cast<size_t>(*axis));
  p.inner = Product(y.shape, static_cast<size_t>(*axis) + 1, static_cast<size_t>(rank));
  return p;
}

absl::StatusOr<int> GatherAxis(const ir::KernelContext& ctx) {
  const int rank = static_cast<int>(ctx.input(0).shape.size());
  if (rank == 0) return ctx.Error("Gather data (input 0) is a scalar (rank 0); expected rank >= 1");
  absl::StatusOr<int> axis = ir::NormalizeAxis(ctx.attrs().GetInt("axis", 0), rank);
  if (!axis.ok()) return ctx.Error(absl::StrCat("Gather: ", axis.status().message()));
  return *axis;
}

std::string GatherIndexMessage(int64_t given, int axis, const std::vector<int64_t>& data_shape) {
  return absl::StrCat("Gather index ", given, " is out of range for axis ", axis, " of size ", data_shape[axis],
                      " (data ", DimsString(data_shape), ")");
}

absl::Status GatherIndexError(const ir::KernelContext& ctx, int64_t given, int axis) {
  return ctx.Error(GatherIndexMessage(given, axis, ctx.input(0).shape));
}

std::string ScatterNDIndexMessage(int64_t given, int64_t entry, int64_t coordinate,
                                  const std::vector<int64_t>& data_shape) {
  return absl::StrCat("index ", given, " (entry ", entry, ", coordinate ", coordinate, ") is out of range for dim ",
                      coordinate, " of the data ", DimsString(data_shape));
}

std::vector<int64_t> GatherOutputShape(const ir::KernelContext& ctx, int axis) {
  const TensorView& data = ctx.input(0);
  const TensorView& idx = ctx.input(1);
  std::vector<int64_t> expected(data.shape.begin(), data.shape.begin() + axis);
  expected.insert(expected.end(), idx.shape.begin(), idx.shape.end());
  expected.insert(expected.end(), data.shape.begin() + axis + 1, data.shape.end());
  return expected;
}

absl::StatusOr<SliceView> SliceParams(const ir::KernelContext& ctx, IntReader read) {
  const TensorView& x = ctx.input(0);
  const int rank = static_cast<int>(x.shape.size());
  if (rank == 0) return ctx.Error("Slice data (input 0) is a scalar (rank 0); expected rank >= 1");
  absl::StatusOr<std::vector<int64_t>> starts = read(1, "Slice starts");
  if (!starts.ok()) return starts.status();
  absl::StatusOr<std::vector<int64_t>> ends = read(2, "Slice ends");
  if (!ends.ok()) return ends.status();
  const size_t n = starts->size();
  std::vector<int64_t> axes, steps(n, 1);
  if (ctx.has_input(3)) {
    absl::StatusOr<std::vector<int64_t>> a = read(3, "Slice axes");
    if (!a.ok()) return a.status();
    axes = *std::move(a);
  } else {
    for (size_t i = 0; i < n; ++i) axes.push_back(static_cast<int64_t>(i));
  }
  if (ctx.has_input(4)) {
    absl::StatusOr<std::vector<int64_t>> s = read(4, "Slice steps");
    if (!s.ok()) return s.status();
    steps = *std::move(s);
  }
  if (ends->size() != n || axes.size() != n || steps.size() != n) {
    return ctx.Error(absl::StrCat("Slice starts, ends, axes and steps have different lengths (", n, ", ",
                                  ends->size(), ", ", axes.size(), ", ", steps.size(), ")"));
  }
  const std::vector<int64_t> in_strides = ir::Strides(x.shape);
  SliceView v{x.shape, in_strides, 0};
  std::vector<bool> seen(rank, false);
  for (size_t i = 0; i < n; ++i) {
    absl::StatusOr<int> axis = ir::NormalizeAxis(axes[i], rank);
    if (!axis.ok()) return ctx.Error(absl::StrCat("Slice axes: ", axis.status().message()));
    if (seen[*axis]) return ctx.Error(absl::StrCat("Slice axes repeat axis ", *axis));
    seen[*axis] = true;
    if (steps[i] == 0) return ctx.Error("Slice steps contain 0; a step must be non-zero");
    const ir::SliceRange r = ir::ClampSlice(x.shape[*axis], (*starts)[i], (*ends)[i], steps[i]);
    v.shape[*axis] = r.length;
    // A huge step visits at most one element; don't let it overflow the stride.
    v.strides[*axis] = in_strides[*axis] * (r.length > 1 ? steps[i] : 1);
    v.offset += r.start * in_strides[*axis];
  }
  if (absl::Status s = CheckPlanned(ctx, "Slice", v.shape); !s.ok()) return s;
  return v;
}

absl::StatusOr<std::pair<int64_t, int64_t>> ShapeRange(const ir::KernelContext& ctx) {
  const int64_t rank = static_cast<int64_t>(ctx.input(0).shape.size());
  auto clamp = [rank](int64_t v) {
    if (v < 0) v += rank;
    return std::max<int64_t>(0, std::min(v, rank));
  };
  const int64_t start = clamp(ctx.attrs().GetInt("start", 0));
  const int64_t end = std::max(start, clamp(ctx.attrs().GetInt("end", rank)));
  if (absl::Status s = CheckPlanned(ctx, "Shape", {end - start}); !s.ok()) return s;
  if (ctx.output(0).dtype != DType::kI64) return ctx.Error("Shape output must be i64");
  return std::make_pair(start, end);
}

}  // namespace grove::backends
