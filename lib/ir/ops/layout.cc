// Op definitions of the layout group: Flatten Squeeze Unsqueeze Split
// GatherElements ScatterND Expand Tile Pad Size Range ConstantOfShape Trilu
// OneHot Resize, with ONNX semantics for opsets 11-18. Ops whose shape
// depends on a small input's value (axes, pads, repeats, sizes) read it when
// it is known at plan time; otherwise they give unknown dims of the right
// rank and the runtime infers again when the op runs. Both the opset-11
// attribute forms and the opset-13 input forms are accepted.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "lib/ir/ops/input_checks.h"
#include "lib/ir/ops/layout_params.h"
#include "lib/ir/ops/ops.h"
#include "lib/ir/ops/resize_params.h"

namespace grove::ir {
namespace {

constexpr DType kIndexDTypes[] = {DType::kI64, DType::kI32};

absl::Status Fail(const ShapeContext& ctx, const absl::Status& s) { return ctx.Error(s.message()); }

SymShape Unknowns(int64_t n) {
  SymShape s;
  for (int64_t i = 0; i < n; ++i) s.push_back(SymDim::Unknown());
  return s;
}

SymDim ProductOf(const SymShape& s, size_t begin, size_t end) {
  SymDim p(1);
  for (size_t i = begin; i < end; ++i) p = p * s[i];
  return p;
}

bool IsConst(const SymDim& d, int64_t v) { return d.is_const() && d.value() == v; }

// The element count of input i when its shape is constant, else -1.
int64_t ConstCount(const ShapeContext& ctx, int i) {
  const SymShape& s = ctx.input_shape(i);
  return IsConcrete(s) ? NumElements(ToConcrete(s)) : -1;
}

// A 1-D integer input (axes, pads, repeats, split, shape): dtype and rank
// checked; `known` says whether its values are, `length` is its length when
// that is constant (-1 otherwise).
struct IntList {
  bool known = false;
  std::vector<int64_t> values;
  int64_t length = -1;
};

// `scalar_ok`: a scalar is a list of one (Squeeze's and Unsqueeze's axes, as
// onnxruntime takes them: a loop counter unsqueezed in a body).
absl::StatusOr<IntList> ReadIntList(const ShapeContext& ctx, int i, absl::string_view name, bool scalar_ok = false) {
  if (absl::Status s = CheckInputDType(ctx, i, name, kIndexDTypes); !s.ok()) return s;
  if (scalar_ok && ctx.input_rank(i) == 0) {
    IntList list;
    list.known = ctx.InputInts(i, &list.values);
    list.length = 1;
    return list;
  }
  if (ctx.input_rank(i) != 1) {
    return ctx.Error(absl::StrCat(InputName(i, name), " has shape ", ShapeString(ctx, ctx.input_shape(i)),
                                  "; expected a 1-D tensor"));
  }
  IntList list;
  list.known = ctx.InputInts(i, &list.values);
  if (list.known) {
    list.length = static_cast<int64_t>(list.values.size());
  } else if (ctx.input_shape(i)[0].is_const()) {
    list.length = ctx.input_shape(i)[0].value();
  }
  return list;
}

// An integer list given either as the opset-13 input `i` or the opset-11
// attribute `attr`; `given` is false when neither is.
struct IntArg {
  bool given = false;
  IntList list;
};

absl::StatusOr<IntArg> ReadIntArg(const ShapeContext& ctx, int i, absl::string_view name, absl::string_view attr,
                                  bool scalar_ok = false) {
  IntArg arg;
  const bool has_attr = ctx.attrs().Has(attr);
  if (ctx.has_input(i)) {
    if (has_attr) {
      return ctx.Error(
          absl::StrCat(name, " is given both as ", InputName(i, name), " and as attribute ", attr, "; give one"));
    }
    absl::StatusOr<IntList> list = ReadIntList(ctx, i, name, scalar_ok);
    if (!list.ok()) return list.status();
    arg.given = true;
    arg.list = *std::move(list);
  } else if (has_attr) {
    arg.given = true;
    arg.list.known = true;
    arg.list.values = ctx.attrs().GetInts(attr);
    arg.list.length = static_cast<int64_t>(arg.list.values.size());
  }
  return arg;
}

// SymDim arithmetic does not check for overflow; constants from values only
// enter it below this bound, larger ones leave the dim to run time.
constexpr int64_t kSymbolicConstantLimit = int64_t{1} << 32;

// Output ranks that come from a value's length are capped, so a bad model
// cannot make a shape function allocate without bound.
constexpr int64_t kMaxRank = 64;

absl::Status CheckRank(const ShapeContext& ctx, int64_t rank, absl::string_view what) {
  if (rank > kMaxRank)
    return ctx.Error(absl::StrCat(what, " gives an output of rank ", rank, "; at most ", kMaxRank));
  return absl::OkStatus();
}

// A scalar input (rank 0, or one element as exporters often give).
absl::Status CheckScalar(const ShapeContext& ctx, int i, absl::string_view name) {
  const SymShape& s = ctx.input_shape(i);
  const int64_t count = ConstCount(ctx, i);
  if (s.size() > 1 || (count >= 0 && count != 1)) {
    return ctx.Error(
        absl::StrCat(InputName(i, name), " has shape ", ShapeString(ctx, s), "; expected a scalar (one element)"));
  }
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------

absl::Status InferFlatten(ShapeContext& ctx) {
  if (absl::Status s = CheckInputPresent(ctx, 0, "input"); !s.ok()) return s;
  const SymShape& in = ctx.input_shape(0);
  const int64_t rank = ctx.input_rank(0);
  const int64_t given = ctx.attrs().GetInt("axis", 1);
  const int64_t axis = given < 0 ? given + rank : given;
  if (axis < 0 || axis > rank) {
    return ctx.Error(absl::StrCat("attribute axis is ", given, "; expected ", -rank, "..", rank, " for the input ",
                                  ShapeString(ctx, in)));
  }
  ctx.SetOutput(0, ctx.input_dtype(0), {ProductOf(in, 0, axis), ProductOf(in, axis, in.size())});
  return absl::OkStatus();
}

absl::Status InferSqueeze(ShapeContext& ctx) {
  if (absl::Status s = CheckInputPresent(ctx, 0, "data"); !s.ok()) return s;
  const SymShape& in = ctx.input_shape(0);
  const int64_t rank = ctx.input_rank(0);
  absl::StatusOr<IntArg> axes = ReadIntArg(ctx, 1, "axes", "axes", /*scalar_ok=*/true);
  if (!axes.ok()) return axes.status();
  SymShape out;
  if (!axes->given || (axes->list.known && axes->list.values.empty())) {
    // Only dims known to be 1 go; a symbolic dim is assumed not to be 1 (a
    // plan sees the concrete dims and decides exactly).
    for (const SymDim& d : in) {
      if (!IsConst(d, 1)) out.push_back(d);
    }
  } else if (!axes->list.known) {
    if (axes->list.length < 0 || axes->list.length > rank) {
      return ctx.Error(absl::StrCat("axes (input 1) must have a known length of at most ", rank,
                                    " when its values are not known; its shape is ",
                                    ShapeString(ctx, ctx.input_shape(1))));
    }
    out = Unknowns(rank - axes->list.length);
  } else {
    absl::StatusOr<std::vector<bool>> mask = AxesMask(axes->list.values, rank, "axes");
    if (!mask.ok()) return Fail(ctx, mask.status());
    for (int64_t d = 0; d < rank; ++d) {
      if (!(*mask)[d]) {
        out.push_back(in[d]);
      } else if (in[d].is_const() && in[d].value() != 1) {
        return ctx.Error(absl::StrCat("axes ", DimsString(axes->list.values), " squeezes dim ", d, " of the data ",
                                      ShapeString(ctx, in), ", which is not 1"));
      }
    }
  }
  ctx.SetOutput(0, ctx.input_dtype(0), std::move(out));
  return absl::OkStatus();
}

absl::Status InferUnsqueeze(ShapeContext& ctx) {
  if (absl::Status s = CheckInputPresent(ctx, 0, "data"); !s.ok()) return s;
  const SymShape& in = ctx.input_shape(0);
  const int64_t rank = ctx.input_rank(0);
  absl::StatusOr<IntArg> axes = ReadIntArg(ctx, 1, "axes", "axes", /*scalar_ok=*/true);
  if (!axes.ok()) return axes.status();
  if (!axes->given) return ctx.Error("needs axes, as input 1 (opset 13) or as attribute axes (opset 11)");
  if (!axes->list.known) {
    if (axes->list.length < 0) {
      return ctx.Error(
          absl::StrCat("axes (input 1) must have a known length when its values are not known; its shape is ",
                       ShapeString(ctx, ctx.input_shape(1))));
    }
    if (absl::Status s = CheckRank(ctx, rank + axes->list.length, "axes"); !s.ok()) return s;
    ctx.SetOutput(0, ctx.input_dtype(0), Unknowns(rank + axes->list.length));
    return absl::OkStatus();
  }
  const int64_t out_rank = rank + static_cast<int64_t>(axes->list.values.size());
  if (absl::Status s = CheckRank(ctx, out_rank, "axes"); !s.ok()) return s;
  absl::StatusOr<std::vector<bool>> mask = AxesMask(axes->list.values, out_rank, "axes");
  if (!mask.ok()) return Fail(ctx, mask.status());
  SymShape out;
  size_t next = 0;
  for (int64_t d = 0; d < out_rank; ++d) out.push_back((*mask)[d] ? SymDim(1) : in[next++]);
  ctx.SetOutput(0, ctx.input_dtype(0), std::move(out));
  return absl::OkStatus();
}

absl::Status InferSplit(ShapeContext& ctx) {
  if (absl::Status s = CheckInputPresent(ctx, 0, "input"); !s.ok()) return s;
  const SymShape& in = ctx.input_shape(0);
  const int rank = ctx.input_rank(0);
  if (rank == 0) return ctx.Error("input (input 0) is a scalar; Split needs rank >= 1");
  absl::StatusOr<int> axis = NormalizeAxis(ctx.attrs().GetInt("axis", 0), rank);
  if (!axis.ok()) return ctx.Error(absl::StrCat("attribute axis: ", axis.status().message()));
  absl::StatusOr<IntArg> split = ReadIntArg(ctx, 1, "split", "split");
  if (!split.ok()) return split.status();
  const int n = ctx.num_outputs();
  const int64_t num_outputs_attr = ctx.attrs().GetInt("num_outputs", -1);
  if (ctx.attrs().Has("num_outputs") && split->given) {
    return ctx.Error("split sizes and attribute num_outputs are both given; give one");
  }
  if (ctx.attrs().Has("num_outputs") && num_outputs_attr < 1) {
    return ctx.Error(absl::StrCat("attribute num_outputs is ", num_outputs_attr, "; expected >= 1"));
  }
  const SymDim& dim = in[*axis];
  std::vector<SymDim> parts;
  if (split->given && !split->list.known) {
    if (split->list.length >= 0 && split->list.length != n) {
      return ctx.Error(
          absl::StrCat("split (input 1) has ", split->list.length, " entries but the node has ", n, " outputs"));
    }
    parts.assign(n, SymDim());
    for (SymDim& p : parts) p = SymDim::Unknown();
  } else if (split->given || dim.is_const()) {
    // Sizes from the list do not depend on the dim; check the sum only when
    // the dim is known.
    const int64_t d = dim.is_const() ? dim.value() : [&] {
      int64_t sum = 0;  // saturates; SplitSizes then reports the overflow
      for (int64_t v : split->list.values) {
        if (__builtin_add_overflow(sum, v, &sum)) return std::numeric_limits<int64_t>::max();
      }
      return sum;
    }();
    absl::StatusOr<std::vector<int64_t>> sizes =
        SplitSizes(d, n, split->given ? &split->list.values : nullptr, num_outputs_attr);
    if (!sizes.ok()) {
      return ctx.Error(
          absl::StrCat(sizes.status().message(), " (input ", ShapeString(ctx, in), ", axis ", *axis, ")"));
    }
    for (int64_t s : *sizes) parts.push_back(SymDim(s));
  } else {
    if (num_outputs_attr >= 0 && num_outputs_attr != n) {
      return ctx.Error(
          absl::StrCat("attribute num_outputs is ", num_outputs_attr, " but the node has ", n, " outputs"));
    }
    for (int i = 0; i < n; ++i) parts.push_back(dim / SymDim(n));
  }
  for (int i = 0; i < n; ++i) {
    SymShape out = in;
    out[*axis] = parts[i];
    ctx.SetOutput(i, ctx.input_dtype(0), std::move(out));
  }
  return absl::OkStatus();
}

absl::Status InferGatherElements(ShapeContext& ctx) {
  if (absl::Status s = CheckInputPresent(ctx, 0, "data"); !s.ok()) return s;
  if (absl::Status s = CheckInputDType(ctx, 1, "indices", kIndexDTypes); !s.ok()) return s;
  if (absl::StatusOr<int> axis = CheckElementsIndices(ctx); !axis.ok()) return axis.status();
  ctx.SetOutput(0, ctx.input_dtype(0), ctx.input_shape(1));
  return absl::OkStatus();
}

absl::Status InferScatterND(ShapeContext& ctx) {
  if (absl::Status s = CheckScatterInputs(ctx); !s.ok()) return s;
  const SymShape& data = ctx.input_shape(0);
  const SymShape& idx = ctx.input_shape(1);
  const SymShape& upd = ctx.input_shape(2);
  if (idx.empty()) return ctx.Error("indices (input 1) is a scalar; expected rank >= 1");
  if (idx.back().is_const()) {
    const int64_t k = idx.back().value();
    if (k < 1 || k > static_cast<int64_t>(data.size())) {
      return ctx.Error(absl::StrCat("indices (input 1) has shape ", ShapeString(ctx, idx),
                                    "; its last dim must be 1..", data.size(), " (the data's rank)"));
    }
    SymShape want(idx.begin(), idx.end() - 1);
    want.insert(want.end(), data.begin() + k, data.end());
    bool ok = want.size() == upd.size();
    for (size_t d = 0; ok && d < want.size(); ++d)
      ok = !(want[d].is_const() && upd[d].is_const() && want[d] != upd[d]);
    if (!ok) {
      return ctx.Error(absl::StrCat("updates (input 2) has shape ", ShapeString(ctx, upd), "; expected ",
                                    ShapeString(ctx, want), " (indices ", ShapeString(ctx, idx),
                                    " without the last dim, then data ", ShapeString(ctx, data),
                                    " after the first ", k, " dims)"));
    }
  }
  ctx.SetOutput(0, ctx.input_dtype(0), data);
  return absl::OkStatus();
}

absl::Status InferExpand(ShapeContext& ctx) {
  if (absl::Status s = CheckInputPresent(ctx, 0, "input"); !s.ok()) return s;
  absl::StatusOr<IntList> shape = ReadIntList(ctx, 1, "shape");
  if (!shape.ok()) return shape.status();
  const SymShape& in = ctx.input_shape(0);
  if (!shape->known) {
    if (shape->length < 0) {
      return ctx.Error(
          absl::StrCat("shape (input 1) must have a known length when its values are not known; its shape is ",
                       ShapeString(ctx, ctx.input_shape(1))));
    }
    if (absl::Status s = CheckRank(ctx, shape->length, "shape (input 1)"); !s.ok()) return s;
    // A constant input dim other than 1 survives any valid target dim.
    const size_t rank = std::max(in.size(), static_cast<size_t>(shape->length));
    SymShape out = Unknowns(static_cast<int64_t>(rank));
    for (size_t i = 0; i < in.size(); ++i) {
      const SymDim& d = in[in.size() - 1 - i];
      if (d.is_const() && d.value() != 1) out[rank - 1 - i] = d;
    }
    ctx.SetOutput(0, ctx.input_dtype(0), std::move(out));
    return absl::OkStatus();
  }
  if (absl::Status s = CheckRank(ctx, shape->length, "shape (input 1)"); !s.ok()) return s;
  for (int64_t v : shape->values) {
    if (v < 0)
      return ctx.Error(absl::StrCat("shape (input 1) ", DimsString(shape->values), " has a negative dim"));
  }
  absl::StatusOr<SymShape> out = BroadcastShapes({in, FromConcrete(shape->values)});
  if (!out.ok()) {
    return ctx.Error(absl::StrCat("cannot expand ", ShapeString(ctx, in), " to ", DimsString(shape->values), ": ",
                                  out.status().message()));
  }
  ctx.SetOutput(0, ctx.input_dtype(0), *std::move(out));
  return absl::OkStatus();
}

absl::Status InferTile(ShapeContext& ctx) {
  if (absl::Status s = CheckInputPresent(ctx, 0, "input"); !s.ok()) return s;
  absl::StatusOr<IntList> repeats = ReadIntList(ctx, 1, "repeats");
  if (!repeats.ok()) return repeats.status();
  const SymShape& in = ctx.input_shape(0);
  const int64_t rank = ctx.input_rank(0);
  if (repeats->length >= 0 && repeats->length != rank) {
    return ctx.Error(absl::StrCat("repeats (input 1) has ", repeats->length, " entries; expected ", rank,
                                  " (one per dim of the input ", ShapeString(ctx, in), ")"));
  }
  if (!repeats->known) {
    ctx.SetOutput(0, ctx.input_dtype(0), Unknowns(rank));
    return absl::OkStatus();
  }
  SymShape out;
  for (int64_t d = 0; d < rank; ++d) {
    const int64_t r = repeats->values[d];
    if (r < 0)
      return ctx.Error(absl::StrCat("repeats (input 1) ", DimsString(repeats->values), " has a negative entry"));
    int64_t n;
    if (in[d].is_const()) {
      if (__builtin_mul_overflow(in[d].value(), r, &n)) {
        return ctx.Error(absl::StrCat("repeats (input 1) ", DimsString(repeats->values), " overflow dim ", d,
                                      " of the input ", ShapeString(ctx, in)));
      }
      out.push_back(SymDim(n));
    } else {
      out.push_back(r <= kSymbolicConstantLimit ? in[d] * SymDim(r) : SymDim::Unknown());
    }
  }
  ctx.SetOutput(0, ctx.input_dtype(0), std::move(out));
  return absl::OkStatus();
}

absl::Status InferPad(ShapeContext& ctx) {
  if (absl::Status s = CheckInputPresent(ctx, 0, "data"); !s.ok()) return s;
  const SymShape& in = ctx.input_shape(0);
  const int64_t rank = ctx.input_rank(0);
  const std::string mode = ctx.attrs().GetString("mode", "constant");
  if (mode != "constant" && mode != "reflect" && mode != "edge" && mode != "wrap") {
    return ctx.Error(
        absl::StrCat("attribute mode is '", mode, "'; expected 'constant', 'reflect', 'edge' or 'wrap'"));
  }
  absl::StatusOr<IntArg> pads = ReadIntArg(ctx, 1, "pads", "pads");
  if (!pads.ok()) return pads.status();
  if (!pads->given) return ctx.Error("needs pads, as input 1 (opset 11) or as attribute pads (opset 2)");
  if (ctx.input_dtype(0) == DType::kString && ctx.attrs().Has("value")) {
    return ctx.Error("data (input 0) is string but the pad value is attribute value (a number, opset 2); "
                     "give constant_value as input 2 (a string), or omit it to pad with empty strings");
  }
  if (ctx.has_input(2)) {
    if (ctx.attrs().Has("value")) {
      return ctx.Error("the pad value is given both as input 2 (constant_value) and as attribute value; give one");
    }
    if (absl::Status s = CheckSameDType(ctx, 0, "data", 2, "constant_value"); !s.ok()) return s;
    if (absl::Status s = CheckScalar(ctx, 2, "constant_value"); !s.ok()) return s;
  }
  IntList axes;
  if (ctx.has_input(3)) {
    absl::StatusOr<IntList> list = ReadIntList(ctx, 3, "axes");
    if (!list.ok()) return list.status();
    axes = *std::move(list);
  }
  if (!pads->list.known || (ctx.has_input(3) && !axes.known)) {
    SymShape out = in;
    if (ctx.has_input(3) && axes.known) {
      for (int64_t a : axes.values) {
        if (a >= -rank && a < rank) out[a < 0 ? a + rank : a] = SymDim::Unknown();
      }
    } else {
      out = Unknowns(rank);
    }
    ctx.SetOutput(0, ctx.input_dtype(0), std::move(out));
    return absl::OkStatus();
  }
  absl::StatusOr<PadAmounts> amounts =
      PadAmountsFor(rank, pads->list.values, ctx.has_input(3) ? &axes.values : nullptr);
  if (!amounts.ok()) return Fail(ctx, amounts.status());
  SymShape out;
  for (int64_t d = 0; d < rank; ++d) {
    int64_t added;
    if (__builtin_add_overflow(amounts->begin[d], amounts->end[d], &added))
      added = std::numeric_limits<int64_t>::max();
    SymDim o = SymDim::Unknown();
    if (in[d].is_const()) {
      int64_t v;
      if (__builtin_add_overflow(in[d].value(), added, &v)) {
        return ctx.Error(absl::StrCat("pads ", DimsString(pads->list.values), " overflow dim ", d));
      }
      o = SymDim(v);
    } else if (added > -kSymbolicConstantLimit && added < kSymbolicConstantLimit) {
      o = in[d] + SymDim(added);
    }
    if (o.is_const() && o.value() < 0) {
      return ctx.Error(absl::StrCat("pads ", DimsString(pads->list.values), " make dim ", d, " of the data ",
                                    ShapeString(ctx, in), " negative (", o.value(), ")"));
    }
    const bool padded = amounts->begin[d] > 0 || amounts->end[d] > 0;
    if (mode != "constant" && padded && IsConst(in[d], 0)) {
      return ctx.Error(absl::StrCat("mode '", mode, "' cannot pad dim ", d, " of the data ", ShapeString(ctx, in),
                                    ", which is empty"));
    }
    out.push_back(o);
  }
  ctx.SetOutput(0, ctx.input_dtype(0), std::move(out));
  return absl::OkStatus();
}

absl::Status InferSize(ShapeContext& ctx) {
  if (absl::Status s = CheckInputPresent(ctx, 0, "data"); !s.ok()) return s;
  ctx.SetOutput(0, DType::kI64, {});
  return absl::OkStatus();
}

absl::Status InferRange(ShapeContext& ctx) {
  static constexpr DType kRangeDTypes[] = {DType::kF32, DType::kF64, DType::kI32, DType::kI64};
  static constexpr const char* kNames[] = {"start", "limit", "delta"};
  for (int i = 0; i < 3; ++i) {
    if (absl::Status s = CheckInputDType(ctx, i, kNames[i], kRangeDTypes); !s.ok()) return s;
    if (absl::Status s = CheckScalar(ctx, i, kNames[i]); !s.ok()) return s;
  }
  if (absl::Status s = CheckSameDType(ctx, 0, "start", 1, "limit"); !s.ok()) return s;
  if (absl::Status s = CheckSameDType(ctx, 0, "start", 2, "delta"); !s.ok()) return s;
  SymDim n = SymDim::Unknown();
  if (ctx.input_value(0) != nullptr && ctx.input_value(1) != nullptr && ctx.input_value(2) != nullptr) {
    absl::StatusOr<int64_t> count = RangeCount(*ctx.input_value(0), *ctx.input_value(1), *ctx.input_value(2));
    if (!count.ok()) return Fail(ctx, count.status());
    n = SymDim(*count);
  }
  ctx.SetOutput(0, ctx.input_dtype(0), {n});
  return absl::OkStatus();
}

absl::Status InferConstantOfShape(ShapeContext& ctx) {
  absl::StatusOr<IntList> shape = ReadIntList(ctx, 0, "shape");
  if (!shape.ok()) return shape.status();
  DType dtype = DType::kF32;
  if (ctx.has_input(1)) {
    if (absl::Status s = CheckInputDType(ctx, 1, "value", kAllDTypes); !s.ok()) return s;
    const int64_t count = ConstCount(ctx, 1);
    if (ctx.input_rank(1) > 1 || count != 1) {
      return ctx.Error(absl::StrCat("value (input 1) has shape ", ShapeString(ctx, ctx.input_shape(1)),
                                    "; expected one element"));
    }
    dtype = ctx.input_dtype(1);
  }
  if (!shape->known) {
    if (shape->length < 0) {
      return ctx.Error(
          absl::StrCat("shape (input 0) must have a known length when its values are not known; its shape is ",
                       ShapeString(ctx, ctx.input_shape(0))));
    }
    if (absl::Status s = CheckRank(ctx, shape->length, "shape (input 0)"); !s.ok()) return s;
    ctx.SetOutput(0, dtype, Unknowns(shape->length));
    return absl::OkStatus();
  }
  if (absl::Status s = CheckRank(ctx, shape->length, "shape (input 0)"); !s.ok()) return s;
  for (int64_t v : shape->values) {
    if (v < 0)
      return ctx.Error(absl::StrCat("shape (input 0) ", DimsString(shape->values), " has a negative dim"));
  }
  if (absl::StatusOr<uint64_t> b = CheckedByteSize(dtype, shape->values, "ConstantOfShape output"); !b.ok()) {
    return Fail(ctx, b.status());
  }
  ctx.SetOutput(0, dtype, FromConcrete(shape->values));
  return absl::OkStatus();
}

absl::Status InferTrilu(ShapeContext& ctx) {
  if (absl::Status s = CheckInputPresent(ctx, 0, "input"); !s.ok()) return s;
  if (ctx.input_rank(0) < 2) {
    return ctx.Error(absl::StrCat("input (input 0) has shape ", ShapeString(ctx, ctx.input_shape(0)),
                                  "; Trilu needs rank >= 2"));
  }
  const int64_t upper = ctx.attrs().GetInt("upper", 1);
  if (upper != 0 && upper != 1) return ctx.Error(absl::StrCat("attribute upper is ", upper, "; expected 0 or 1"));
  if (ctx.has_input(1)) {
    if (absl::Status s = CheckInputDType(ctx, 1, "k", kIndexDTypes); !s.ok()) return s;
    if (absl::Status s = CheckScalar(ctx, 1, "k"); !s.ok()) return s;
  }
  ctx.SetOutput(0, ctx.input_dtype(0), ctx.input_shape(0));
  return absl::OkStatus();
}

absl::Status InferOneHot(ShapeContext& ctx) {
  static constexpr DType kNumeric[] = {DType::kF32, DType::kF64, DType::kF16, DType::kBF16,
                                       DType::kI64, DType::kI32, DType::kI8,  DType::kU8};
  if (absl::Status s = CheckInputDType(ctx, 0, "indices", kNumeric); !s.ok()) return s;
  if (absl::Status s = CheckInputDType(ctx, 1, "depth", kNumeric); !s.ok()) return s;
  if (absl::Status s = CheckScalar(ctx, 1, "depth"); !s.ok()) return s;
  if (absl::Status s = CheckInputPresent(ctx, 2, "values"); !s.ok()) return s;
  const int64_t values = ConstCount(ctx, 2);
  if (ctx.input_rank(2) != 1 || (values >= 0 && values != 2)) {
    return ctx.Error(absl::StrCat("values (input 2) has shape ", ShapeString(ctx, ctx.input_shape(2)),
                                  "; expected [2] (off value, on value)"));
  }
  const SymShape& in = ctx.input_shape(0);
  const int64_t out_rank = ctx.input_rank(0) + 1;
  const int64_t given = ctx.attrs().GetInt("axis", -1);
  const int64_t axis = given < 0 ? given + out_rank : given;
  if (axis < 0 || axis >= out_rank) {
    return ctx.Error(absl::StrCat("attribute axis is ", given, "; expected ", -out_rank, "..", out_rank - 1,
                                  " for indices of rank ", out_rank - 1));
  }
  SymDim depth = SymDim::Unknown();
  if (const TensorView* v = ctx.input_value(1)) {
    absl::StatusOr<int64_t> d = NumberAsInt(ReadNumber(*v, 0), "depth (input 1)");
    if (!d.ok()) return Fail(ctx, d.status());
    if (*d < 0) return ctx.Error(absl::StrCat("depth (input 1) is ", *d, "; expected >= 0"));
    depth = SymDim(*d);
  }
  SymShape out(in.begin(), in.begin() + axis);
  out.push_back(depth);
  out.insert(out.end(), in.begin() + axis, in.end());
  ctx.SetOutput(0, ctx.input_dtype(2), std::move(out));
  return absl::OkStatus();
}

absl::Status InferResize(ShapeContext& ctx) {
  if (absl::Status s = CheckInputPresent(ctx, 0, "X"); !s.ok()) return s;
  absl::StatusOr<ResizeAttrs> attrs = ParseResizeAttrs(ctx.attrs());
  if (!attrs.ok()) return Fail(ctx, attrs.status());
  const DType dtype = ctx.input_dtype(0);
  if (attrs->mode != ResizeMode::kNearest && (dtype == DType::kBool || dtype == DType::kString)) {
    return ctx.Error(absl::StrCat("X (input 0) is ", DTypeName(dtype),
                                  "; linear and cubic modes need a numeric type (nearest takes any)"));
  }
  const SymShape& in = ctx.input_shape(0);
  const int64_t rank = ctx.input_rank(0);
  if (rank == 0) return ctx.Error("X (input 0) is a scalar; Resize needs rank >= 1");
  absl::StatusOr<std::vector<int64_t>> axes = ResizeAxes(*attrs, rank);
  if (!axes.ok()) return Fail(ctx, axes.status());
  static constexpr DType kFloats[] = {DType::kF32, DType::kF64, DType::kF16, DType::kBF16};
  if (ctx.has_input(1)) {
    if (absl::Status s = CheckInputDType(ctx, 1, "roi", kFloats); !s.ok()) return s;
  }
  // An input whose length is known to be 0 counts as omitted.
  auto given = [&](int i) { return ctx.has_input(i) && !(ConstCount(ctx, i) == 0); };
  const bool has_scales = given(2), has_sizes = given(3);
  if (has_scales) {
    if (absl::Status s = CheckInputDType(ctx, 2, "scales", kFloats); !s.ok()) return s;
  }
  if (has_sizes) {
    if (absl::Status s = CheckInputDType(ctx, 3, "sizes", kIndexDTypes); !s.ok()) return s;
  }
  if (has_scales && has_sizes)
    return ctx.Error("scales (input 2) and sizes (input 3) are both given; give only one");
  if (!has_scales && !has_sizes)
    return ctx.Error("needs scales (input 2) or sizes (input 3); both are missing or empty");
  const int given_input = has_scales ? 2 : 3;
  const TensorView* value = ctx.input_value(given_input);
  // The roi does not change the output shape; the kernel checks it.
  if (value != nullptr && IsConcrete(in)) {
    absl::StatusOr<ResizeGeometry> g = ResizeGeometryFor(
        ToConcrete(in), *attrs, ctx.input_value(1), has_scales ? value : nullptr, has_sizes ? value : nullptr);
    if (!g.ok()) return Fail(ctx, g.status());
    ctx.SetOutput(0, dtype, FromConcrete(g->out_dims));
    return absl::OkStatus();
  }
  SymShape out = in;
  for (int64_t d : *axes) out[d] = SymDim::Unknown();
  if (value != nullptr && value->num_elements() == static_cast<int64_t>(axes->size())) {
    // Symbolic input dims: keep what the value determines exactly.
    std::vector<int64_t> sizes;
    const bool stretch_sizes =
        has_sizes && attrs->policy == ResizeAspectPolicy::kStretch && ReadIntegers(*value, &sizes);
    for (size_t i = 0; i < axes->size(); ++i) {
      const int64_t d = (*axes)[i];
      if (stretch_sizes) {
        if (sizes[i] >= 0) out[d] = SymDim(sizes[i]);
      } else if (has_scales) {
        const double s = ReadNumber(*value, static_cast<int64_t>(i));
        if (s >= 1 && s <= 1 << 20 && s == std::floor(s)) {
          out[d] = in[d] * SymDim(static_cast<int64_t>(s));
        }
      }
    }
  }
  ctx.SetOutput(0, dtype, std::move(out));
  return absl::OkStatus();
}

absl::Status Register(OpRegistry& registry, std::string type, int min_in, int max_in, std::vector<AttrSpec> attrs,
                      ShapeFn infer, int min_out = 1, int max_out = 1, uint64_t omittable = 0,
                      bool reads_values = true) {
  OpDef def;
  def.type = std::move(type);
  def.min_inputs = min_in;
  def.max_inputs = max_in;
  def.min_outputs = min_out;
  def.max_outputs = max_out;
  def.omittable_inputs = omittable;
  def.attrs = std::move(attrs);
  def.infer = infer;
  def.reads_input_values = reads_values;
  return registry.Register(std::move(def));
}

}  // namespace

absl::Status RegisterLayoutOps(OpRegistry& registry) {
  using K = AttrKind;
  const absl::Status results[] = {
      Register(registry, "Flatten", 1, 1, {{"axis", K::kInt}}, &InferFlatten),
      Register(registry, "Squeeze", 1, 2, {{"axes", K::kInts}}, &InferSqueeze),
      Register(registry, "Unsqueeze", 1, 2, {{"axes", K::kInts}}, &InferUnsqueeze),
      Register(registry, "Split", 1, 2, {{"axis", K::kInt}, {"split", K::kInts}, {"num_outputs", K::kInt}},
               &InferSplit, /*min_out=*/1, /*max_out=*/-1),
      Register(registry, "GatherElements", 2, 2, {{"axis", K::kInt}}, &InferGatherElements),
      Register(registry, "ScatterND", 3, 3, {{"reduction", K::kString}}, &InferScatterND),
      Register(registry, "Expand", 2, 2, {}, &InferExpand),
      Register(registry, "Tile", 2, 2, {}, &InferTile),
      Register(registry, "Pad", 1, 4, {{"mode", K::kString}, {"pads", K::kInts}, {"value", K::kFloat}}, &InferPad),
      Register(registry, "Size", 1, 1, {}, &InferSize, 1, 1, 0, /*reads_values=*/false),
      Register(registry, "Range", 3, 3, {}, &InferRange),
      Register(registry, "ConstantOfShape", 1, 2, {}, &InferConstantOfShape),
      Register(registry, "Trilu", 1, 2, {{"upper", K::kInt}}, &InferTrilu),
      Register(registry, "OneHot", 3, 3, {{"axis", K::kInt}}, &InferOneHot),
      Register(registry, "Resize", 1, 4,
               {{"mode", K::kString},
                {"coordinate_transformation_mode", K::kString},
                {"nearest_mode", K::kString},
                {"cubic_coeff_a", K::kFloat},
                {"exclude_outside", K::kInt},
                {"extrapolation_value", K::kFloat},
                {"antialias", K::kInt},
                {"axes", K::kInts},
                {"keep_aspect_ratio_policy", K::kString}},
               &InferResize),
  };
  for (const absl::Status& s : results) {
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace grove::ir
