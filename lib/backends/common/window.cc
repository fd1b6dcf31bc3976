#include "lib/backends/common/window.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "lib/backends/common/kernel_checks.h"

namespace grove::backends {

absl::StatusOr<ir::WindowGeometry> ReadGeometry(const ir::KernelContext& ctx, ir::WindowOp op, int spatial,
                                                const std::vector<int64_t>* weight_kernel) {
  ir::SymShape w;
  if (weight_kernel != nullptr) w = ir::FromConcrete(*weight_kernel);
  absl::StatusOr<ir::WindowGeometry> g =
      ir::ReadWindowGeometry(ctx.attrs(), op, spatial, weight_kernel != nullptr ? &w : nullptr);
  if (!g.ok()) return ctx.Error(g.status().message());
  return g;
}

absl::StatusOr<Window> MakeWindow(const ir::KernelContext& ctx, const ir::WindowGeometry& g,
                                  absl::Span<const int64_t> in) {
  Window w;
  w.spatial = g.spatial;
  w.in.assign(in.begin(), in.end());
  w.kernel = g.kernel;
  w.strides = g.strides;
  w.dilations = g.dilations;
  for (int d = 0; d < g.spatial; ++d) {
    absl::StatusOr<ir::SymDim> o = ir::WindowOutputDim(g, d, ir::SymDim(in[d]));
    if (!o.ok()) return ctx.Error(absl::StrCat("input 0 (X) ", ShapeStr(in), ": ", o.status().message()));
    w.out.push_back(o->value());
    const auto [pb, pe] = ir::WindowPads(g, d, in[d], w.out[d]);
    w.pad_begin.push_back(pb);
    w.pad_end.push_back(pe);
    w.in_size *= in[d];
  }
  // The output shape is only checked against the allocation after this, so
  // a product that overflows (a huge pad) must not be computed yet.
  for (int64_t o : w.out) {
    if (__builtin_mul_overflow(w.out_size, o, &w.out_size)) w.out_size = -1;
  }
  // Pooling kernels are bounded by the padded input, not by a weight, so
  // their product may not fit; only Conv (kernel taken from W) reads it.
  w.kernel_size = BoundedProduct(g.kernel, kMaxWindowElements);
  return w;
}

bool IsPointwise(const Window& w) {
  for (int d = 0; d < w.spatial; ++d) {
    if (w.kernel[d] != 1 || w.strides[d] != 1 || w.pad_begin[d] != 0 || w.in[d] != w.out[d]) return false;
  }
  return true;
}

absl::Status CheckConvInputs(const ir::KernelContext& ctx) {
  const TensorView& x = ctx.input(0);
  const TensorView& wt = ctx.input(1);
  const TensorView* b = ctx.has_input(2) ? &ctx.input(2) : nullptr;
  if (absl::Status s = CheckRank(ctx, 0, "X", 3); !s.ok()) return s;
  if (wt.shape.size() != x.shape.size()) {
    return ctx.Error(absl::StrCat("input 1 (W) has shape ", ShapeStr(wt.shape), "; expected rank ",
                                  x.shape.size(), " like input 0 (X) ", ShapeStr(x.shape)));
  }
  if (wt.dtype != x.dtype || (b != nullptr && b->dtype != x.dtype)) {
    return ctx.Error(absl::StrCat("inputs X, W and B must share one dtype; got ", DTypeName(x.dtype), ", ",
                                  DTypeName(wt.dtype),
                                  b != nullptr ? absl::StrCat(", ", DTypeName(b->dtype)) : ""));
  }
  return absl::OkStatus();
}

absl::StatusOr<ConvShape> ResolveConv(const ir::KernelContext& ctx) {
  if (absl::Status s = CheckConvInputs(ctx); !s.ok()) return s;
  const TensorView& x = ctx.input(0);
  const TensorView& wt = ctx.input(1);
  ConvShape r;
  r.spatial = static_cast<int>(x.shape.size()) - 2;
  const std::vector<int64_t> w_kernel(wt.shape.begin() + 2, wt.shape.end());
  absl::StatusOr<ir::WindowGeometry> g = ReadGeometry(ctx, ir::WindowOp::kConv, r.spatial, &w_kernel);
  if (!g.ok()) return g.status();
  r.g = *std::move(g);
  r.group = ctx.attrs().GetInt("group", 1);
  r.n = x.shape[0];
  r.c = x.shape[1];
  r.m = wt.shape[0];
  if (r.c != wt.shape[1] * r.group || r.m % r.group != 0) {
    return ctx.Error(absl::StrCat("input 0 (X) ", ShapeStr(x.shape), " and input 1 (W) ", ShapeStr(wt.shape),
                                  " do not fit group ", r.group,
                                  ": expected X channels = W dim 1 * group and W dim 0 divisible by group"));
  }
  if (ctx.has_input(2)) {
    if (absl::Status s = CheckChannelVector(ctx, 2, "B", r.m); !s.ok()) return s;
  }
  absl::StatusOr<Window> w = MakeWindow(ctx, r.g, absl::Span<const int64_t>(x.shape).subspan(2));
  if (!w.ok()) return w.status();
  r.w = *std::move(w);
  r.out_shape = {r.n, r.m};
  r.out_shape.insert(r.out_shape.end(), r.w.out.begin(), r.w.out.end());
  if (absl::Status s = CheckOutput(ctx, 0, x.dtype, r.out_shape); !s.ok()) return s;
  return r;
}

absl::StatusOr<ConvShape> ResolveConvTranspose(const ir::KernelContext& ctx) {
  if (absl::Status s = CheckConvInputs(ctx); !s.ok()) return s;
  const TensorView& x = ctx.input(0);
  const TensorView& wt = ctx.input(1);
  ConvShape r;
  const int spatial = r.spatial = static_cast<int>(x.shape.size()) - 2;
  const std::vector<int64_t> w_kernel(wt.shape.begin() + 2, wt.shape.end());
  absl::StatusOr<ir::WindowGeometry> geometry = ReadGeometry(ctx, ir::WindowOp::kConvTranspose, spatial, &w_kernel);
  if (!geometry.ok()) return geometry.status();
  r.g = *std::move(geometry);
  const ir::WindowGeometry& g = r.g;
  r.group = ctx.attrs().GetInt("group", 1);
  r.n = x.shape[0];
  r.c = x.shape[1];
  if (r.c != wt.shape[0] || r.c % r.group != 0) {
    return ctx.Error(absl::StrCat("input 0 (X) ", ShapeStr(x.shape), " and input 1 (W) ", ShapeStr(wt.shape),
                                  " do not fit group ", r.group,
                                  ": expected X channels = W dim 0, divisible by group"));
  }
  r.m = wt.shape[1] * r.group;
  if (ctx.has_input(2)) {
    if (absl::Status s = CheckChannelVector(ctx, 2, "B", r.m); !s.ok()) return s;
  }
  Window& w = r.w;
  w.spatial = spatial;
  w.in.assign(x.shape.begin() + 2, x.shape.end());
  w.kernel = g.kernel;
  w.strides = g.strides;
  w.dilations = g.dilations;
  for (int d = 0; d < spatial; ++d) {
    absl::StatusOr<ir::SymDim> o = ir::TransposedOutputDim(g, d, ir::SymDim(w.in[d]));
    if (!o.ok()) return ctx.Error(absl::StrCat("input 0 (X) ", ShapeStr(x.shape), ": ", o.status().message()));
    w.out.push_back(o->value());
    w.pad_begin.push_back(ir::TransposedPadBegin(g, d, w.in[d], w.out[d]));
    w.pad_end.push_back(0);
    w.in_size *= w.in[d];
    w.kernel_size *= g.kernel[d];
    // Checked: output_shape may ask for more than the allocation holds.
    if (__builtin_mul_overflow(w.out_size, w.out[d], &w.out_size)) w.out_size = -1;
  }
  r.out_shape = {r.n, r.m};
  r.out_shape.insert(r.out_shape.end(), w.out.begin(), w.out.end());
  if (absl::Status s = CheckOutput(ctx, 0, x.dtype, r.out_shape); !s.ok()) return s;
  return r;
}

absl::StatusOr<PoolShape> ResolvePool(const ir::KernelContext& ctx, bool max_pool) {
  const TensorView& x = ctx.input(0);
  if (absl::Status s = CheckRank(ctx, 0, "X", 3); !s.ok()) return s;
  const int spatial = static_cast<int>(x.shape.size()) - 2;
  absl::StatusOr<ir::WindowGeometry> g = ReadGeometry(ctx, ir::WindowOp::kPool, spatial, nullptr);
  if (!g.ok()) return g.status();
  absl::StatusOr<Window> w = MakeWindow(ctx, *g, absl::Span<const int64_t>(x.shape).subspan(2));
  if (!w.ok()) return w.status();
  PoolShape r;
  r.w = *std::move(w);
  r.out_shape = {x.shape[0], x.shape[1]};
  r.out_shape.insert(r.out_shape.end(), r.w.out.begin(), r.w.out.end());
  if (absl::Status s = CheckOutput(ctx, 0, x.dtype, r.out_shape); !s.ok()) return s;
  if (max_pool && ctx.has_output(1)) {
    if (absl::Status s = CheckOutput(ctx, 1, DType::kI64, r.out_shape); !s.ok()) return s;
  }
  return r;
}

absl::StatusOr<GlobalPoolShape> ResolveGlobalPool(const ir::KernelContext& ctx) {
  const TensorView& x = ctx.input(0);
  if (absl::Status s = CheckRank(ctx, 0, "X", 3); !s.ok()) return s;
  GlobalPoolShape r;
  r.out_shape = x.shape;
  for (size_t d = 2; d < r.out_shape.size(); ++d) {
    r.size *= r.out_shape[d];
    r.out_shape[d] = 1;
  }
  if (absl::Status s = CheckOutput(ctx, 0, x.dtype, r.out_shape); !s.ok()) return s;
  return r;
}

}  // namespace grove::backends
