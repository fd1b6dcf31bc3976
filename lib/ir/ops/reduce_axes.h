// Which dims a Reduce* op reduces and the output shape it plans, shared by
// every Reduce* op's shape function and CPU kernel so that the planned output
// shape and the computed one cannot differ.
#ifndef GROVE_LIB_IR_OPS_REDUCE_AXES_H_
#define GROVE_LIB_IR_OPS_REDUCE_AXES_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "lib/ir/op_registry.h"
#include "lib/ir/ops/input_checks.h"

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

// The shape function of a Reduce* op whose output has the input's dtype:
// input 0 (data) of a dtype in `allowed`, axes from the `axes` attribute
// (opset <= 17) or from the optional input 1 (ReduceSum 13, all of them in
// opset 18), keepdims and noop_with_empty_axes.
inline absl::Status InferReduceShape(ShapeContext& ctx, absl::Span<const DType> allowed) {
  if (absl::Status s = CheckInputDType(ctx, 0, "data", allowed); !s.ok()) return s;
  bool keepdims = true;
  bool noop = false;
  if (absl::Status s = ReadBoolAttr(ctx, "keepdims", 1, &keepdims); !s.ok()) return s;
  if (absl::Status s = ReadBoolAttr(ctx, "noop_with_empty_axes", 0, &noop); !s.ok()) return s;
  const SymShape& in = ctx.input_shape(0);
  const int rank = ctx.input_rank(0);

  std::vector<int64_t> axes = ctx.attrs().GetInts("axes");
  if (ctx.has_input(1)) {
    if (ctx.attrs().Has("axes")) {
      return ctx.Error("axes are given both as the 'axes' attribute and as input 1 (axes); give one");
    }
    if (absl::Status s = CheckInputDType(ctx, 1, "axes", {DType::kI64, DType::kI32}); !s.ok()) return s;
    if (ctx.input_rank(1) != 1) {
      return ctx.Error(
          absl::StrCat("input 1 (axes) must be 1-D; got shape ", ShapeString(ctx, ctx.input_shape(1))));
    }
    const SymDim& count = ctx.input_shape(1)[0];
    const bool known_empty = count.is_const() && count.value() == 0;
    if (!known_empty && !ctx.InputInts(1, &axes)) {
      if (!keepdims) {
        // The output loses one dim per axis (an axis given twice is an
        // error), so its rank follows from the length of axes even when
        // their values are known only at run time; its dims are then
        // inferred again when the op runs.
        if (!count.is_const()) {
          return ctx.Error(absl::StrCat(
              "input 1 (axes) has a dynamic length (shape ", ShapeString(ctx, ctx.input_shape(1)),
              ") and keepdims=0, so the output rank is not known at plan time; give axes a fixed length"));
        }
        if (count.value() > rank) {
          return ctx.Error(absl::StrCat("input 1 (axes) names ", count.value(), " axes; input 0 (data) has rank ",
                                        rank, ", and no axis may be given twice"));
        }
        ctx.SetOutput(0, ctx.input_dtype(0), SymShape(rank - count.value(), SymDim::Unknown()));
        return absl::OkStatus();
      }
      // Each dim is either kept or reduced to 1; which, only the run knows.
      SymShape out(in.size());
      for (int d = 0; d < rank; ++d) {
        out[d] = in[d].is_const() && in[d].value() == 1 ? SymDim(1) : SymDim::Unknown();
      }
      ctx.SetOutput(0, ctx.input_dtype(0), std::move(out));
      return absl::OkStatus();
    }
  }

  absl::StatusOr<std::vector<bool>> reduced = ReducedDims(axes, rank, noop);
  if (!reduced.ok()) return ctx.Error(reduced.status().message());
  SymShape out;
  for (int d = 0; d < rank; ++d) {
    if (!(*reduced)[d]) {
      out.push_back(in[d]);
    } else if (keepdims) {
      out.push_back(SymDim(1));
    }
  }
  ctx.SetOutput(0, ctx.input_dtype(0), std::move(out));
  return absl::OkStatus();
}

// `shape` split around `axis` as [outer, n, inner] (ArgMax, TopK, CumSum
// kernels).
struct AxisSplit {
  int64_t outer = 1, n = 1, inner = 1;
};
inline AxisSplit SplitAt(absl::Span<const int64_t> shape, int axis) {
  AxisSplit s;
  for (int d = 0; d < axis; ++d) s.outer *= shape[d];
  s.n = shape[axis];
  for (size_t d = axis + 1; d < shape.size(); ++d) s.inner *= shape[d];
  return s;
}

// The OpDef of a Reduce* op: data plus the optional axes input, and the
// attributes of every opset from 11 to 18.
inline OpDef ReduceOpDef(std::string type, ShapeFn infer) {
  OpDef def;
  def.type = std::move(type);
  def.min_inputs = 1;
  def.max_inputs = 2;
  def.attrs = {{"keepdims", AttrKind::kInt}, {"axes", AttrKind::kInts}, {"noop_with_empty_axes", AttrKind::kInt}};
  def.infer = infer;
  return def;
}

}  // namespace grove::ir

#endif  // GROVE_LIB_IR_OPS_REDUCE_AXES_H_
