// Op definitions of the nn group (ONNX opset 11-17): Conv, ConvTranspose,
// MaxPool, AveragePool, GlobalAveragePool, GlobalMaxPool and LRN. The
// normalizations and the softmax family are the norm group (norm.cc).
// Window arithmetic lives in conv_geometry.h, shared with the kernels. Dims
// that must agree but are symbolic here (channels against W) are checked by
// the kernels once concrete.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "lib/ir/ops/channel_checks.h"
#include "lib/ir/ops/conv_geometry.h"
#include "lib/ir/ops/input_checks.h"
#include "lib/ir/ops/ops.h"

namespace grove::ir {
namespace {

constexpr DType kConvDTypes[] = {DType::kF32, DType::kF64, DType::kF16, DType::kBF16};
constexpr DType kMaxPoolDTypes[] = {DType::kF32, DType::kF64, DType::kF16, DType::kBF16, DType::kI8, DType::kU8};

absl::Status ReadFlag(const ShapeContext& ctx, absl::string_view name, int64_t def) {
  const int64_t v = ctx.attrs().GetInt(name, def);
  if (v != 0 && v != 1) return ctx.Error(absl::StrCat("attribute '", name, "' is ", v, "; expected 0 or 1"));
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------
// Conv, ConvTranspose
// ---------------------------------------------------------------------------

absl::Status InferConvFamily(ShapeContext& ctx, bool transposed) {
  if (absl::Status s = CheckInputDType(ctx, 0, "X", kConvDTypes); !s.ok()) return s;
  if (absl::Status s = CheckInputDType(ctx, 1, "W", kConvDTypes); !s.ok()) return s;
  if (absl::Status s = CheckSameDType(ctx, 0, "X", 1, "W"); !s.ok()) return s;
  if (absl::Status s = CheckImageRank(ctx, 0, "X", 3); !s.ok()) return s;
  const SymShape& x = ctx.input_shape(0);
  const SymShape& w = ctx.input_shape(1);
  if (w.size() != x.size()) {
    return ctx.Error(absl::StrCat("input 1 (W) has shape ", ShapeString(ctx, w), "; expected rank ", x.size(),
                                  " like input 0 (X) ", ShapeString(ctx, x)));
  }
  const int spatial = ctx.input_rank(0) - 2;
  const SymShape w_kernel(w.begin() + 2, w.end());
  absl::StatusOr<WindowGeometry> g =
      ReadWindowGeometry(ctx.attrs(), transposed ? WindowOp::kConvTranspose : WindowOp::kConv, spatial, &w_kernel);
  if (!g.ok()) return ctx.Error(g.status().message());
  const int64_t group = ctx.attrs().GetInt("group", 1);

  SymDim out_channels;
  if (!transposed) {
    // W is [M, C / group, k...].
    if (x[1].is_const() && w[1].is_const() && x[1].value() != w[1].value() * group) {
      return ctx.Error(absl::StrCat("input 0 (X) has ", x[1].value(), " channels but input 1 (W) ",
                                    ShapeString(ctx, w), " with group ", group, " takes ", w[1].value() * group));
    }
    if (w[0].is_const() && w[0].value() % group != 0) {
      return ctx.Error(absl::StrCat("input 1 (W) has ", w[0].value(),
                                    " output channels (dim 0), not a multiple of group ", group));
    }
    out_channels = w[0];
  } else {
    // W is [C, M / group, k...].
    if (ConstMismatch(x[1], w[0])) {
      return ctx.Error(absl::StrCat("input 0 (X) has ", x[1].value(), " channels but input 1 (W) ",
                                    ShapeString(ctx, w), " takes ", w[0].value(), " (dim 0)"));
    }
    if (w[0].is_const() && w[0].value() % group != 0) {
      return ctx.Error(absl::StrCat("input 1 (W) has ", w[0].value(),
                                    " input channels (dim 0), not a multiple of group ", group));
    }
    out_channels = w[1] * SymDim(group);
  }
  if (ctx.has_input(2)) {
    if (absl::Status s = CheckInputDType(ctx, 2, "B", {ctx.input_dtype(0)}); !s.ok()) return s;
    if (absl::Status s = CheckChannelVector(ctx, 2, "B", out_channels); !s.ok()) return s;
  }

  SymShape out = {x[0], out_channels};
  for (int d = 0; d < spatial; ++d) {
    absl::StatusOr<SymDim> o =
        transposed ? TransposedOutputDim(*g, d, x[2 + d]) : WindowOutputDim(*g, d, x[2 + d]);
    if (!o.ok()) return ctx.Error(absl::StrCat("input 0 (X) ", ShapeString(ctx, x), ": ", o.status().message()));
    out.push_back(*o);
  }
  ctx.SetOutput(0, ctx.input_dtype(0), std::move(out));
  return absl::OkStatus();
}

absl::Status InferConv(ShapeContext& ctx) { return InferConvFamily(ctx, false); }
absl::Status InferConvTranspose(ShapeContext& ctx) { return InferConvFamily(ctx, true); }

// ---------------------------------------------------------------------------
// Pooling
// ---------------------------------------------------------------------------

absl::Status InferPool(ShapeContext& ctx, absl::Span<const DType> dtypes) {
  if (absl::Status s = CheckInputDType(ctx, 0, "X", dtypes); !s.ok()) return s;
  if (absl::Status s = CheckImageRank(ctx, 0, "X", 3); !s.ok()) return s;
  const SymShape& x = ctx.input_shape(0);
  const int spatial = ctx.input_rank(0) - 2;
  absl::StatusOr<WindowGeometry> g = ReadWindowGeometry(ctx.attrs(), WindowOp::kPool, spatial, nullptr);
  if (!g.ok()) return ctx.Error(g.status().message());
  SymShape out = {x[0], x[1]};
  for (int d = 0; d < spatial; ++d) {
    absl::StatusOr<SymDim> o = WindowOutputDim(*g, d, x[2 + d]);
    if (!o.ok()) return ctx.Error(absl::StrCat("input 0 (X) ", ShapeString(ctx, x), ": ", o.status().message()));
    out.push_back(*o);
  }
  ctx.SetOutput(0, ctx.input_dtype(0), out);
  if (ctx.num_outputs() > 1) ctx.SetOutput(1, DType::kI64, std::move(out));
  return absl::OkStatus();
}

absl::Status InferMaxPool(ShapeContext& ctx) {
  if (absl::Status s = ReadFlag(ctx, "storage_order", 0); !s.ok()) return s;
  return InferPool(ctx, kMaxPoolDTypes);
}

absl::Status InferAveragePool(ShapeContext& ctx) {
  if (absl::Status s = ReadFlag(ctx, "count_include_pad", 0); !s.ok()) return s;
  return InferPool(ctx, kFloatDTypes);
}

absl::Status InferGlobalPool(ShapeContext& ctx) {
  if (absl::Status s = CheckInputDType(ctx, 0, "X", kFloatDTypes); !s.ok()) return s;
  if (absl::Status s = CheckImageRank(ctx, 0, "X", 3); !s.ok()) return s;
  SymShape out = ctx.input_shape(0);
  for (size_t d = 2; d < out.size(); ++d) out[d] = SymDim(1);
  ctx.SetOutput(0, ctx.input_dtype(0), std::move(out));
  return absl::OkStatus();
}

absl::Status InferLrn(ShapeContext& ctx) {
  if (absl::Status s = CheckInputDType(ctx, 0, "X", kFloatDTypes); !s.ok()) return s;
  if (absl::Status s = CheckImageRank(ctx, 0, "X", 2); !s.ok()) return s;
  if (!ctx.attrs().Has("size")) return ctx.Error("attribute 'size' is required");
  const int64_t size = ctx.attrs().GetInt("size", 0);
  if (size < 1) return ctx.Error(absl::StrCat("attribute 'size' is ", size, "; expected >= 1"));
  ctx.SetOutput(0, ctx.input_dtype(0), ctx.input_shape(0));
  return absl::OkStatus();
}

OpDef Def(std::string type, int min_inputs, int max_inputs, int max_outputs, std::vector<AttrSpec> attrs,
          ShapeFn infer) {
  OpDef def;
  def.type = std::move(type);
  def.min_inputs = min_inputs;
  def.max_inputs = max_inputs;
  def.max_outputs = max_outputs;
  def.attrs = std::move(attrs);
  def.infer = infer;
  return def;
}

}  // namespace

absl::Status RegisterNnOps(OpRegistry& registry) {
  const std::vector<AttrSpec> conv_attrs = {{"auto_pad", AttrKind::kString}, {"dilations", AttrKind::kInts},
                                            {"group", AttrKind::kInt},       {"kernel_shape", AttrKind::kInts},
                                            {"pads", AttrKind::kInts},       {"strides", AttrKind::kInts}};
  std::vector<AttrSpec> conv_transpose_attrs = conv_attrs;
  conv_transpose_attrs.push_back({"output_padding", AttrKind::kInts});
  conv_transpose_attrs.push_back({"output_shape", AttrKind::kInts});
  const std::vector<AttrSpec> pool_attrs = {
      {"auto_pad", AttrKind::kString},         {"ceil_mode", AttrKind::kInt}, {"dilations", AttrKind::kInts},
      {"kernel_shape", AttrKind::kInts, true}, {"pads", AttrKind::kInts},     {"strides", AttrKind::kInts}};
  std::vector<AttrSpec> max_pool_attrs = pool_attrs;
  max_pool_attrs.push_back({"storage_order", AttrKind::kInt});
  std::vector<AttrSpec> average_pool_attrs = pool_attrs;
  average_pool_attrs.push_back({"count_include_pad", AttrKind::kInt});

  OpDef defs[] = {
      Def("Conv", 2, 3, 1, conv_attrs, &InferConv),
      Def("ConvTranspose", 2, 3, 1, conv_transpose_attrs, &InferConvTranspose),
      Def("MaxPool", 1, 1, 2, max_pool_attrs, &InferMaxPool),
      Def("AveragePool", 1, 1, 1, average_pool_attrs, &InferAveragePool),
      Def("GlobalAveragePool", 1, 1, 1, {}, &InferGlobalPool),
      Def("GlobalMaxPool", 1, 1, 1, {}, &InferGlobalPool),
      Def("LRN", 1, 1, 1,
          {{"alpha", AttrKind::kFloat},
           {"beta", AttrKind::kFloat},
           {"bias", AttrKind::kFloat},
           {"size", AttrKind::kInt, true}},
          &InferLrn),
  };
  for (OpDef& def : defs) {
    if (absl::Status s = registry.Register(std::move(def)); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace grove::ir
