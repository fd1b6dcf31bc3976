// Op definitions of the quantization group (ONNX opsets 10..18):
// QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear, MatMulInteger,
// ConvInteger, QLinearMatMul and QLinearConv.
//
// A scale and its zero point are either per tensor (one element, shape [] or
// [1]) or per slice: per `axis` for Q/DQ, per row of A and per column of B
// for the matmuls ([M] or [..., M, 1], [N] or [..., 1, N]), per output
// channel of W for the convs ([M]). The shape functions check what the
// shapes settle; dims that are symbolic here are checked by the kernels.
// The integer convs take their window geometry from conv_geometry.h, as Conv
// does, so that their planned output shapes follow Conv's.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "lib/ir/ops/conv_geometry.h"
#include "lib/ir/ops/input_checks.h"
#include "lib/ir/ops/ops.h"

namespace grove::ir {
namespace {

constexpr DType kQuantizeInputDTypes[] = {DType::kF32, DType::kF16, DType::kBF16, DType::kI32};
constexpr DType kScaleDTypes[] = {DType::kF32, DType::kF16, DType::kBF16};
constexpr DType kQuantizedDTypes[] = {DType::kU8, DType::kI8, DType::kU16, DType::kI16};
constexpr DType kDequantizeInputDTypes[] = {DType::kU8, DType::kI8, DType::kU16, DType::kI16, DType::kI32};
constexpr DType kInt8DTypes[] = {DType::kU8, DType::kI8};

bool ConstMismatch(const SymDim& a, const SymDim& b) { return a.is_const() && b.is_const() && a.value() != b.value(); }

std::string DimString(const ShapeContext& ctx, const SymDim& d) { return d.ToString(ctx.graph().symbol_names()); }

// One element for certain: rank 0, or every dim the constant 1.
bool IsSingleElement(const SymShape& s) {
  for (const SymDim& d : s) {
    if (!d.is_const() || d.value() != 1) return false;
  }
  return true;
}

// Scale input `si` and zero point `zi` (when given) have the same shape.
absl::Status CheckPairShapes(const ShapeContext& ctx, int si, absl::string_view scale, int zi,
                             absl::string_view zero_point) {
  if (!ctx.has_input(zi)) return absl::OkStatus();
  const SymShape& s = ctx.input_shape(si);
  const SymShape& z = ctx.input_shape(zi);
  if (IsSingleElement(s) && IsSingleElement(z)) return absl::OkStatus();
  bool same = s.size() == z.size();
  for (size_t d = 0; same && d < s.size(); ++d) same = !ConstMismatch(s[d], z[d]);
  if (same) return absl::OkStatus();
  return ctx.Error(absl::StrCat(InputName(si, scale), " has shape ", ShapeString(ctx, s), " but ",
                                InputName(zi, zero_point), " has shape ", ShapeString(ctx, z),
                                "; expected the same shape"));
}

// A per-tensor value ([] or [1]), or a vector of `count` elements when
// `count` is given (per axis, per output channel).
absl::Status CheckScalarOrVector(const ShapeContext& ctx, int i, absl::string_view name, const SymDim* count,
                                 absl::string_view what) {
  const SymShape& s = ctx.input_shape(i);
  if (IsSingleElement(s) && s.size() <= 1) return absl::OkStatus();
  if (count != nullptr && s.size() == 1 && !ConstMismatch(s[0], *count)) return absl::OkStatus();
  return ctx.Error(absl::StrCat(InputName(i, name), " has shape ", ShapeString(ctx, s), "; expected [] or [1]",
                                count != nullptr ? absl::StrCat(" or [", DimString(ctx, *count), "] (", what, ")")
                                                 : std::string(" (per tensor)")));
}

// ---------------------------------------------------------------------------
// QuantizeLinear, DequantizeLinear
// ---------------------------------------------------------------------------

// The scale of x (input 1) over the axis attribute: per tensor, or a vector
// of x.shape[axis] elements.
absl::Status CheckAxisScale(const ShapeContext& ctx, absl::string_view scale_name) {
  const SymShape& x = ctx.input_shape(0);
  const SymShape& s = ctx.input_shape(1);
  if (IsSingleElement(s) && s.size() <= 1) return absl::OkStatus();
  const int64_t axis_attr = ctx.attrs().GetInt("axis", 1);
  absl::StatusOr<int> axis = NormalizeAxis(axis_attr, static_cast<int>(x.size()));
  if (!axis.ok() || x.empty()) {  // NormalizeAxis takes axis 0 of a scalar; a per-axis scale has no axis there
    return ctx.Error(absl::StrCat("attribute 'axis' is ", axis_attr, " but input 0 (x) has shape ", ShapeString(ctx, x),
                                  "; a per-axis ", InputName(1, scale_name), " ", ShapeString(ctx, s),
                                  " needs an axis in [", -static_cast<int>(x.size()), ", ", x.size(), ")"));
  }
  if (s.size() != 1 || ConstMismatch(s[0], x[*axis])) {
    return ctx.Error(absl::StrCat(InputName(1, scale_name), " has shape ", ShapeString(ctx, s),
                                  "; expected [] or [1] (per tensor) or [", DimString(ctx, x[*axis]), "] (input 0 (x) ",
                                  ShapeString(ctx, x), " along axis ", axis_attr, ")"));
  }
  return absl::OkStatus();
}

absl::Status InferQuantizeLinear(ShapeContext& ctx) {
  if (absl::Status s = CheckInputDType(ctx, 0, "x", kQuantizeInputDTypes); !s.ok()) return s;
  if (absl::Status s = CheckInputDType(ctx, 1, "y_scale", kScaleDTypes); !s.ok()) return s;
  DType out = DType::kU8;
  if (ctx.has_input(2)) {
    if (absl::Status s = CheckInputDType(ctx, 2, "y_zero_point", kQuantizedDTypes); !s.ok()) return s;
    out = ctx.input_dtype(2);
  }
  if (absl::Status s = CheckAxisScale(ctx, "y_scale"); !s.ok()) return s;
  if (absl::Status s = CheckPairShapes(ctx, 1, "y_scale", 2, "y_zero_point"); !s.ok()) return s;
  ctx.SetOutput(0, out, ctx.input_shape(0));
  return absl::OkStatus();
}

absl::Status InferDequantizeLinear(ShapeContext& ctx) {
  if (absl::Status s = CheckInputDType(ctx, 0, "x", kDequantizeInputDTypes); !s.ok()) return s;
  if (absl::Status s = CheckInputDType(ctx, 1, "x_scale", kScaleDTypes); !s.ok()) return s;
  if (ctx.has_input(2)) {
    if (absl::Status s = CheckInputDType(ctx, 2, "x_zero_point", {ctx.input_dtype(0)}); !s.ok()) return s;
  }
  if (absl::Status s = CheckAxisScale(ctx, "x_scale"); !s.ok()) return s;
  if (absl::Status s = CheckPairShapes(ctx, 1, "x_scale", 2, "x_zero_point"); !s.ok()) return s;
  ctx.SetOutput(0, ctx.input_dtype(1), ctx.input_shape(0));
  return absl::OkStatus();
}

absl::Status InferDynamicQuantizeLinear(ShapeContext& ctx) {
  if (absl::Status s = CheckInputDType(ctx, 0, "x", {DType::kF32}); !s.ok()) return s;
  ctx.SetOutput(0, DType::kU8, ctx.input_shape(0));
  if (ctx.num_outputs() > 1) ctx.SetOutput(1, DType::kF32, {});
  if (ctx.num_outputs() > 2) ctx.SetOutput(2, DType::kU8, {});
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------
// MatMulInteger, QLinearMatMul
// ---------------------------------------------------------------------------

// The parameter (scale or zero point) `pi` of matmul operand `oi`: per
// tensor, per row of A ([M] or [..., M, 1]) or per column of B ([N] or
// [..., 1, N]), its leading dims 1 or the operand's.
absl::Status CheckMatMulParam(const ShapeContext& ctx, int pi, absl::string_view name, int oi, bool is_a) {
  const SymShape& p = ctx.input_shape(pi);
  const SymShape& o = ctx.input_shape(oi);
  if (IsSingleElement(p)) return absl::OkStatus();
  const char* const kind = is_a ? "per row of A" : "per column of B";
  const auto fail = [&]() {
    const std::string expected = o.size() < 2 ? std::string("[] or [1] (the operand has rank 1)")
                                 : is_a ? absl::StrCat("[] or [1], [", DimString(ctx, o[o.size() - 2]), "] or [..., ",
                                                       DimString(ctx, o[o.size() - 2]), ", 1] (", kind, ")")
                                        : absl::StrCat("[] or [1], [", DimString(ctx, o.back()), "] or [..., 1, ",
                                                       DimString(ctx, o.back()), "] (", kind, ")");
    return ctx.Error(absl::StrCat(InputName(pi, name), " has shape ", ShapeString(ctx, p), " for input ", oi, " ",
                                  ShapeString(ctx, o), "; expected ", expected));
  };
  if (o.size() < 2) return fail();
  // The vector form, then the operand-rank form.
  if (p.size() == 1) return ConstMismatch(p[0], is_a ? o[o.size() - 2] : o.back()) ? fail() : absl::OkStatus();
  if (p.size() > o.size()) return fail();
  const size_t lead = o.size() - p.size();
  for (size_t d = 0; d < p.size(); ++d) {
    const SymDim& od = o[lead + d];
    const bool last = d + 1 == p.size(), second_last = d + 2 == p.size();
    if ((is_a && last) || (!is_a && second_last)) {
      if (ConstMismatch(p[d], SymDim(1))) return fail();
    } else if (!(p[d].is_const() && p[d].value() == 1) && ConstMismatch(p[d], od)) {
      return fail();
    }
  }
  return absl::OkStatus();
}

absl::Status InferMatMulShape(ShapeContext& ctx, int ai, int bi, SymShape* out) {
  const SymShape& a = ctx.input_shape(ai);
  const SymShape& b = ctx.input_shape(bi);
  if (a.empty() || b.empty()) {
    return ctx.Error(absl::StrCat("input ", a.empty() ? ai : bi, " is a scalar (rank 0); expected rank >= 1"));
  }
  const size_t ra = a.size(), rb = b.size();
  const SymDim& ka = a[ra - 1];
  const SymDim& kb = rb == 1 ? b[0] : b[rb - 2];
  if (ConstMismatch(ka, kb)) {
    return ctx.Error(absl::StrCat("inner dims differ: input ", ai, " ", ShapeString(ctx, a),
                                  " has K=", DimString(ctx, ka), ", input ", bi, " ", ShapeString(ctx, b),
                                  " has K=", DimString(ctx, kb)));
  }
  const SymShape batch_a(a.begin(), a.end() - (ra >= 2 ? 2 : 1));
  const SymShape batch_b(b.begin(), b.end() - (rb >= 2 ? 2 : 1));
  absl::StatusOr<SymShape> batch = BroadcastShapes({batch_a, batch_b});
  if (!batch.ok()) {
    return ctx.Error(absl::StrCat("batch dims of input ", ai, " ", ShapeString(ctx, a), " and input ", bi, " ",
                                  ShapeString(ctx, b), " do not broadcast: ", batch.status().message()));
  }
  *out = *std::move(batch);
  if (ra != 1) out->push_back(a[ra - 2]);
  if (rb != 1) out->push_back(b[rb - 1]);
  return absl::OkStatus();
}

absl::Status InferMatMulInteger(ShapeContext& ctx) {
  if (absl::Status s = CheckInputDType(ctx, 0, "A", kInt8DTypes); !s.ok()) return s;
  if (absl::Status s = CheckInputDType(ctx, 1, "B", kInt8DTypes); !s.ok()) return s;
  if (ctx.has_input(2)) {
    if (absl::Status s = CheckInputDType(ctx, 2, "a_zero_point", {ctx.input_dtype(0)}); !s.ok()) return s;
  }
  if (ctx.has_input(3)) {
    if (absl::Status s = CheckInputDType(ctx, 3, "b_zero_point", {ctx.input_dtype(1)}); !s.ok()) return s;
  }
  SymShape out;
  if (absl::Status s = InferMatMulShape(ctx, 0, 1, &out); !s.ok()) return s;
  if (ctx.has_input(2)) {
    if (absl::Status s = CheckMatMulParam(ctx, 2, "a_zero_point", 0, true); !s.ok()) return s;
  }
  if (ctx.has_input(3)) {
    if (absl::Status s = CheckMatMulParam(ctx, 3, "b_zero_point", 1, false); !s.ok()) return s;
  }
  ctx.SetOutput(0, DType::kI32, std::move(out));
  return absl::OkStatus();
}

absl::Status InferQLinearMatMul(ShapeContext& ctx) {
  if (absl::Status s = CheckInputDType(ctx, 0, "a", kInt8DTypes); !s.ok()) return s;
  if (absl::Status s = CheckInputDType(ctx, 1, "a_scale", {DType::kF32}); !s.ok()) return s;
  if (absl::Status s = CheckInputDType(ctx, 2, "a_zero_point", {ctx.input_dtype(0)}); !s.ok()) return s;
  if (absl::Status s = CheckInputDType(ctx, 3, "b", kInt8DTypes); !s.ok()) return s;
  if (absl::Status s = CheckInputDType(ctx, 4, "b_scale", {DType::kF32}); !s.ok()) return s;
  if (absl::Status s = CheckInputDType(ctx, 5, "b_zero_point", {ctx.input_dtype(3)}); !s.ok()) return s;
  if (absl::Status s = CheckInputDType(ctx, 6, "y_scale", {DType::kF32}); !s.ok()) return s;
  if (absl::Status s = CheckInputDType(ctx, 7, "y_zero_point", kInt8DTypes); !s.ok()) return s;
  SymShape out;
  if (absl::Status s = InferMatMulShape(ctx, 0, 3, &out); !s.ok()) return s;
  if (absl::Status s = CheckMatMulParam(ctx, 1, "a_scale", 0, true); !s.ok()) return s;
  if (absl::Status s = CheckPairShapes(ctx, 1, "a_scale", 2, "a_zero_point"); !s.ok()) return s;
  if (absl::Status s = CheckMatMulParam(ctx, 4, "b_scale", 3, false); !s.ok()) return s;
  if (absl::Status s = CheckPairShapes(ctx, 4, "b_scale", 5, "b_zero_point"); !s.ok()) return s;
  if (absl::Status s = CheckScalarOrVector(ctx, 6, "y_scale", nullptr, ""); !s.ok()) return s;
  if (absl::Status s = CheckScalarOrVector(ctx, 7, "y_zero_point", nullptr, ""); !s.ok()) return s;
  ctx.SetOutput(0, ctx.input_dtype(7), std::move(out));
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------
// ConvInteger, QLinearConv
// ---------------------------------------------------------------------------

// X [N, C, spatial...] and W [M, C / group, k...] at inputs xi and wi: the
// output shape [N, M, out...] by Conv's geometry.
absl::Status InferIntegerConvShape(ShapeContext& ctx, int xi, int wi, SymShape* out) {
  const SymShape& x = ctx.input_shape(xi);
  const SymShape& w = ctx.input_shape(wi);
  if (x.size() < 3) {
    return ctx.Error(absl::StrCat(InputName(xi, "x"), " has shape ", ShapeString(ctx, x),
                                  "; expected rank >= 3 (N, C, spatial dims...)"));
  }
  if (w.size() != x.size()) {
    return ctx.Error(absl::StrCat(InputName(wi, "w"), " has shape ", ShapeString(ctx, w), "; expected rank ", x.size(),
                                  " like ", InputName(xi, "x"), " ", ShapeString(ctx, x)));
  }
  const int spatial = static_cast<int>(x.size()) - 2;
  const SymShape w_kernel(w.begin() + 2, w.end());
  absl::StatusOr<WindowGeometry> g = ReadWindowGeometry(ctx.attrs(), WindowOp::kConv, spatial, &w_kernel);
  if (!g.ok()) return ctx.Error(g.status().message());
  const int64_t group = ctx.attrs().GetInt("group", 1);
  if (x[1].is_const() && w[1].is_const() && x[1].value() != w[1].value() * group) {
    return ctx.Error(absl::StrCat(InputName(xi, "x"), " has ", x[1].value(), " channels but ", InputName(wi, "w"), " ",
                                  ShapeString(ctx, w), " with group ", group, " takes ", w[1].value() * group));
  }
  if (w[0].is_const() && w[0].value() % group != 0) {
    return ctx.Error(absl::StrCat(InputName(wi, "w"), " has ", w[0].value(),
                                  " output channels (dim 0), not a multiple of group ", group));
  }
  *out = {x[0], w[0]};
  for (int d = 0; d < spatial; ++d) {
    absl::StatusOr<SymDim> o = WindowOutputDim(*g, d, x[2 + d]);
    if (!o.ok()) {
      return ctx.Error(absl::StrCat(InputName(xi, "x"), " ", ShapeString(ctx, x), ": ", o.status().message()));
    }
    out->push_back(*o);
  }
  return absl::OkStatus();
}

absl::Status InferConvInteger(ShapeContext& ctx) {
  if (absl::Status s = CheckInputDType(ctx, 0, "x", kInt8DTypes); !s.ok()) return s;
  if (absl::Status s = CheckInputDType(ctx, 1, "w", kInt8DTypes); !s.ok()) return s;
  SymShape out;
  if (absl::Status s = InferIntegerConvShape(ctx, 0, 1, &out); !s.ok()) return s;
  if (ctx.has_input(2)) {
    if (absl::Status s = CheckInputDType(ctx, 2, "x_zero_point", {ctx.input_dtype(0)}); !s.ok()) return s;
    if (absl::Status s = CheckScalarOrVector(ctx, 2, "x_zero_point", nullptr, ""); !s.ok()) return s;
  }
  if (ctx.has_input(3)) {
    if (absl::Status s = CheckInputDType(ctx, 3, "w_zero_point", {ctx.input_dtype(1)}); !s.ok()) return s;
    if (absl::Status s = CheckScalarOrVector(ctx, 3, "w_zero_point", &out[1], "per output channel"); !s.ok()) {
      return s;
    }
  }
  ctx.SetOutput(0, DType::kI32, std::move(out));
  return absl::OkStatus();
}

absl::Status InferQLinearConv(ShapeContext& ctx) {
  if (absl::Status s = CheckInputDType(ctx, 0, "x", kInt8DTypes); !s.ok()) return s;
  if (absl::Status s = CheckInputDType(ctx, 1, "x_scale", {DType::kF32}); !s.ok()) return s;
  if (absl::Status s = CheckInputDType(ctx, 2, "x_zero_point", {ctx.input_dtype(0)}); !s.ok()) return s;
  if (absl::Status s = CheckInputDType(ctx, 3, "w", kInt8DTypes); !s.ok()) return s;
  if (absl::Status s = CheckInputDType(ctx, 4, "w_scale", {DType::kF32}); !s.ok()) return s;
  if (absl::Status s = CheckInputDType(ctx, 5, "w_zero_point", {ctx.input_dtype(3)}); !s.ok()) return s;
  if (absl::Status s = CheckInputDType(ctx, 6, "y_scale", {DType::kF32}); !s.ok()) return s;
  if (absl::Status s = CheckInputDType(ctx, 7, "y_zero_point", kInt8DTypes); !s.ok()) return s;
  SymShape out;
  if (absl::Status s = InferIntegerConvShape(ctx, 0, 3, &out); !s.ok()) return s;
  if (absl::Status s = CheckScalarOrVector(ctx, 1, "x_scale", nullptr, ""); !s.ok()) return s;
  if (absl::Status s = CheckScalarOrVector(ctx, 2, "x_zero_point", nullptr, ""); !s.ok()) return s;
  if (absl::Status s = CheckScalarOrVector(ctx, 4, "w_scale", &out[1], "per output channel"); !s.ok()) return s;
  if (absl::Status s = CheckPairShapes(ctx, 4, "w_scale", 5, "w_zero_point"); !s.ok()) return s;
  if (absl::Status s = CheckScalarOrVector(ctx, 6, "y_scale", nullptr, ""); !s.ok()) return s;
  if (absl::Status s = CheckScalarOrVector(ctx, 7, "y_zero_point", nullptr, ""); !s.ok()) return s;
  if (ctx.has_input(8)) {
    if (absl::Status s = CheckInputDType(ctx, 8, "B", {DType::kI32}); !s.ok()) return s;
    const SymShape& b = ctx.input_shape(8);
    if (b.size() != 1 || ConstMismatch(b[0], out[1])) {
      return ctx.Error(absl::StrCat(InputName(8, "B"), " has shape ", ShapeString(ctx, b), "; expected [",
                                    DimString(ctx, out[1]), "] (one bias per output channel)"));
    }
  }
  ctx.SetOutput(0, ctx.input_dtype(7), std::move(out));
  return absl::OkStatus();
}

OpDef Def(std::string type, int min_inputs, int max_inputs, int outputs, std::vector<AttrSpec> attrs, ShapeFn infer) {
  OpDef def;
  def.type = std::move(type);
  def.min_inputs = min_inputs;
  def.max_inputs = max_inputs;
  def.min_outputs = outputs;
  def.max_outputs = outputs;
  def.attrs = std::move(attrs);
  def.infer = infer;
  return def;
}

}  // namespace

absl::Status RegisterQuantizationOps(OpRegistry& registry) {
  const std::vector<AttrSpec> conv_attrs = {{"auto_pad", AttrKind::kString}, {"dilations", AttrKind::kInts},
                                            {"group", AttrKind::kInt},       {"kernel_shape", AttrKind::kInts},
                                            {"pads", AttrKind::kInts},       {"strides", AttrKind::kInts}};
  OpDef defs[] = {
      Def("QuantizeLinear", 2, 3, 1, {{"axis", AttrKind::kInt}}, &InferQuantizeLinear),
      Def("DequantizeLinear", 2, 3, 1, {{"axis", AttrKind::kInt}}, &InferDequantizeLinear),
      Def("DynamicQuantizeLinear", 1, 1, 3, {}, &InferDynamicQuantizeLinear),
      Def("MatMulInteger", 2, 4, 1, {}, &InferMatMulInteger),
      Def("QLinearMatMul", 8, 8, 1, {}, &InferQLinearMatMul),
      Def("ConvInteger", 2, 4, 1, conv_attrs, &InferConvInteger),
      Def("QLinearConv", 8, 9, 1, conv_attrs, &InferQLinearConv),
  };
  for (OpDef& def : defs) {
    if (absl::Status s = registry.Register(std::move(def)); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace grove::ir
