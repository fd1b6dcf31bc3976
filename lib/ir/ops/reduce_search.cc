// Reductions other than sum and mean, and searches (ONNX opset 11-18):
// ReduceMax ReduceMin ReduceProd ReduceL1 ReduceL2 ReduceLogSum
// ReduceLogSumExp ReduceSumSquare (the conventions of ReduceSum, through
// reduce_axes.h), ArgMax ArgMin, TopK, CumSum and NonZero. TopK's output
// shape depends on K's value and NonZero's on the input's: when the value is
// not known at plan time the dim is SymDim::Unknown() and the runtime infers
// it again when the op runs, with the value.
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "lib/ir/ops/input_checks.h"
#include "lib/ir/ops/nonzero_count.h"
#include "lib/ir/ops/ops.h"
#include "lib/ir/ops/reduce_axes.h"

namespace grove::ir {
namespace {

constexpr DType kArithmeticDTypes[] = {DType::kF32, DType::kF64, DType::kF16, DType::kBF16, DType::kI32, DType::kI64};

absl::Status InferReduceOrdered(ShapeContext& ctx) { return InferReduceShape(ctx, kNumericDTypes); }
absl::Status InferReduceArithmetic(ShapeContext& ctx) { return InferReduceShape(ctx, kArithmeticDTypes); }

// Attribute 'axis' normalised against input 0's rank (which must be >= 1).
absl::Status ReadAxis(const ShapeContext& ctx, absl::string_view input_name, int64_t def, int* axis) {
  if (ctx.input_rank(0) == 0) {
    return ctx.Error(absl::StrCat(InputName(0, input_name), " is a scalar; ", ctx.node().type, " needs rank >= 1"));
  }
  absl::StatusOr<int> a = NormalizeAxis(ctx.attrs().GetInt("axis", def), ctx.input_rank(0));
  if (!a.ok()) return ctx.Error(absl::StrCat("attribute 'axis': ", a.status().message()));
  *axis = *a;
  return absl::OkStatus();
}

absl::Status InferArgReduce(ShapeContext& ctx) {
  if (absl::Status s = CheckInputDType(ctx, 0, "data", kNumericDTypes); !s.ok()) return s;
  int axis = 0;
  if (absl::Status s = ReadAxis(ctx, "data", 0, &axis); !s.ok()) return s;
  bool keepdims = true, last = false;
  if (absl::Status s = ReadBoolAttr(ctx, "keepdims", 1, &keepdims); !s.ok()) return s;
  if (absl::Status s = ReadBoolAttr(ctx, "select_last_index", 0, &last); !s.ok()) return s;
  const SymDim& n = ctx.input_shape(0)[axis];
  if (n.is_const() && n.value() == 0) {
    return ctx.Error(absl::StrCat("input 0 (data) has no elements along axis ", axis, " (shape ",
                                  ShapeString(ctx, ctx.input_shape(0)), "), so there is no index to give"));
  }
  SymShape out = ctx.input_shape(0);
  if (keepdims) {
    out[axis] = SymDim(1);
  } else {
    out.erase(out.begin() + axis);
  }
  ctx.SetOutput(0, DType::kI64, std::move(out));
  return absl::OkStatus();
}

absl::Status InferTopK(ShapeContext& ctx) {
  if (absl::Status s = CheckInputDType(ctx, 0, "X", kNumericDTypes); !s.ok()) return s;
  if (absl::Status s = CheckInputDType(ctx, 1, "K", {DType::kI64}); !s.ok()) return s;
  int axis = 0;
  if (absl::Status s = ReadAxis(ctx, "X", -1, &axis); !s.ok()) return s;
  bool largest = true, sorted = true;
  if (absl::Status s = ReadBoolAttr(ctx, "largest", 1, &largest); !s.ok()) return s;
  if (absl::Status s = ReadBoolAttr(ctx, "sorted", 1, &sorted); !s.ok()) return s;
  const SymShape& k_shape = ctx.input_shape(1);
  if (k_shape.size() > 1 || (k_shape.size() == 1 && k_shape[0].is_const() && k_shape[0].value() != 1)) {
    return ctx.Error(
        absl::StrCat("input 1 (K) must be a 1-D tensor of one element; got shape ", ShapeString(ctx, k_shape)));
  }
  SymShape out = ctx.input_shape(0);
  std::vector<int64_t> k;
  if (ctx.InputInts(1, &k) && k.size() == 1) {
    const SymDim& n = out[axis];
    if (k[0] < 0) return ctx.Error(absl::StrCat("input 1 (K) is ", k[0], "; expected >= 0"));
    if (n.is_const() && k[0] > n.value()) {
      return ctx.Error(absl::StrCat("input 1 (K) is ", k[0], "; expected 0..", n.value(), " (the size of axis ", axis,
                                    " of input 0 (X), ", ShapeString(ctx, ctx.input_shape(0)), ")"));
    }
    out[axis] = SymDim(k[0]);
  } else {
    out[axis] = SymDim::Unknown();
  }
  ctx.SetOutput(0, ctx.input_dtype(0), out);
  ctx.SetOutput(1, DType::kI64, std::move(out));
  return absl::OkStatus();
}

absl::Status InferCumSum(ShapeContext& ctx) {
  if (absl::Status s = CheckInputDType(ctx, 0, "x", kArithmeticDTypes); !s.ok()) return s;
  if (absl::Status s = CheckInputDType(ctx, 1, "axis", {DType::kI64, DType::kI32}); !s.ok()) return s;
  bool exclusive = false, reverse = false;
  if (absl::Status s = ReadBoolAttr(ctx, "exclusive", 0, &exclusive); !s.ok()) return s;
  if (absl::Status s = ReadBoolAttr(ctx, "reverse", 0, &reverse); !s.ok()) return s;
  const SymShape& axis_shape = ctx.input_shape(1);
  if (axis_shape.size() > 1 || (axis_shape.size() == 1 && axis_shape[0].is_const() && axis_shape[0].value() != 1)) {
    return ctx.Error(absl::StrCat("input 1 (axis) must be a scalar or a 1-D tensor of one element; got shape ",
                                  ShapeString(ctx, axis_shape)));
  }
  if (ctx.input_rank(0) == 0) return ctx.Error("input 0 (x) is a scalar; CumSum needs rank >= 1");
  std::vector<int64_t> axis;
  if (ctx.InputInts(1, &axis) && axis.size() == 1) {
    if (absl::StatusOr<int> a = NormalizeAxis(axis[0], ctx.input_rank(0)); !a.ok()) {
      return ctx.Error(absl::StrCat("input 1 (axis): ", a.status().message()));
    }
  }
  ctx.SetOutput(0, ctx.input_dtype(0), ctx.input_shape(0));
  return absl::OkStatus();
}

// numpy (and so ONNX's reference) treats a scalar as a 1-D tensor of one
// element: the output then has one row.
absl::Status InferNonZero(ShapeContext& ctx) {
  if (absl::Status s = CheckInputDType(ctx, 0, "X", kAllDTypesAndString); !s.ok()) return s;
  const int rows = ctx.input_rank(0) == 0 ? 1 : ctx.input_rank(0);
  SymDim count = SymDim::Unknown();
  bool empty = false;
  for (const SymDim& d : ctx.input_shape(0)) empty |= d.is_const() && d.value() == 0;
  if (empty) {
    count = SymDim(0);
  } else if (const TensorView* v = ctx.input_value(0); v != nullptr) {
    count = SymDim(CountNonZero(*v));
  }
  ctx.SetOutput(0, DType::kI64, {SymDim(rows), count});
  return absl::OkStatus();
}

}  // namespace

absl::Status RegisterReduceSearchOps(OpRegistry& registry) {
  std::vector<OpDef> defs;
  for (const char* type : {"ReduceMax", "ReduceMin"}) defs.push_back(ReduceOpDef(type, &InferReduceOrdered));
  for (const char* type :
       {"ReduceProd", "ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare"}) {
    defs.push_back(ReduceOpDef(type, &InferReduceArithmetic));
  }
  for (const char* type : {"ArgMax", "ArgMin"}) {
    OpDef def;
    def.type = type;
    def.min_inputs = def.max_inputs = 1;
    def.attrs = {{"axis", AttrKind::kInt}, {"keepdims", AttrKind::kInt}, {"select_last_index", AttrKind::kInt}};
    def.infer = &InferArgReduce;
    defs.push_back(std::move(def));
  }
  OpDef topk;
  topk.type = "TopK";
  topk.min_inputs = topk.max_inputs = 2;
  topk.min_outputs = 1;
  topk.max_outputs = 2;
  topk.attrs = {{"axis", AttrKind::kInt}, {"largest", AttrKind::kInt}, {"sorted", AttrKind::kInt}};
  topk.infer = &InferTopK;
  defs.push_back(std::move(topk));
  OpDef cumsum;
  cumsum.type = "CumSum";
  cumsum.min_inputs = cumsum.max_inputs = 2;
  cumsum.attrs = {{"exclusive", AttrKind::kInt}, {"reverse", AttrKind::kInt}};
  cumsum.infer = &InferCumSum;
  defs.push_back(std::move(cumsum));
  OpDef nonzero;
  nonzero.type = "NonZero";
  nonzero.min_inputs = nonzero.max_inputs = 1;
  nonzero.infer = &InferNonZero;
  defs.push_back(std::move(nonzero));
  for (OpDef& def : defs) {
    if (absl::Status s = registry.Register(std::move(def)); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace grove::ir
