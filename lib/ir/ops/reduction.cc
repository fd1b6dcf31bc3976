// Reduction op definitions (ONNX opset 13-18): ReduceSum, ReduceMean and
// Softmax. The axes of a Reduce* op come from the `axes` attribute (opset 13
// ReduceMean and earlier) or from the optional second input (opset 13
// ReduceSum, opset 18 ReduceMean), which must then be known at plan time.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "lib/ir/ops/input_checks.h"
#include "lib/ir/ops/ops.h"
#include "lib/ir/ops/reduce_axes.h"
#include "lib/ir/ops/softmax_shape.h"

namespace grove::ir {
namespace {

absl::Status ReadBoolAttr(const ShapeContext& ctx, absl::string_view name, int64_t def, bool* out) {
  const int64_t v = ctx.attrs().GetInt(name, def);
  if (v != 0 && v != 1) return ctx.Error(absl::StrCat("attribute '", name, "' is ", v, "; expected 0 or 1"));
  *out = v == 1;
  return absl::OkStatus();
}

absl::Status InferReduce(ShapeContext& ctx, absl::Span<const DType> allowed) {
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
        return ctx.Error(
            "input 1 (axes) must be a constant (known at plan time) when keepdims=0, since the output rank "
            "depends on it");
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

absl::Status InferReduceSum(ShapeContext& ctx) {
  return InferReduce(ctx, {DType::kF32, DType::kF64, DType::kI32, DType::kI64});
}

absl::Status InferReduceMean(ShapeContext& ctx) { return InferReduce(ctx, {DType::kF32, DType::kF64}); }

OpDef ReduceDef(std::string type, ShapeFn infer) {
  OpDef def;
  def.type = std::move(type);
  def.min_inputs = 1;
  def.max_inputs = 2;
  def.attrs = {{"keepdims", AttrKind::kInt}, {"axes", AttrKind::kInts}, {"noop_with_empty_axes", AttrKind::kInt}};
  def.infer = infer;
  return def;
}

}  // namespace

absl::Status RegisterReductionOps(OpRegistry& registry) {
  if (absl::Status s = registry.Register(ReduceDef("ReduceSum", &InferReduceSum)); !s.ok()) return s;
  if (absl::Status s = registry.Register(ReduceDef("ReduceMean", &InferReduceMean)); !s.ok()) return s;
  OpDef softmax;
  softmax.type = "Softmax";
  softmax.min_inputs = 1;
  softmax.max_inputs = 1;
  softmax.attrs = {{"axis", AttrKind::kInt}};
  softmax.infer = &InferSoftmaxFamily;
  return registry.Register(std::move(softmax));
}

}  // namespace grove::ir
