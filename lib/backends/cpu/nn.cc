// CPU reference kernels of the nn group. Conv is im2col plus one GEMM per
// (image, group); ConvTranspose is one GEMM per (image, group) plus col2im;
// both handle any number of spatial dims. Pooling walks each window through
// per-dim lists of the input positions it covers. LRN accumulates in double.
// f32 Conv (with a fused activation, post_op.h) and pooling run as oneDNN
// primitives where oneDNN takes them (onednn.h).
// Window geometry comes from conv_geometry.h, as in the shape functions, and
// every dim the shape function may have seen symbolically is checked again
// here. The normalizations are the norm group (norm.cc).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "lib/backends/common/kernel_checks.h"
#include "lib/backends/common/prepared.h"
#include "lib/backends/common/window.h"
#include "lib/backends/cpu/blas_gemm.h"
#include "lib/backends/cpu/channels_last.h"
#include "lib/backends/cpu/cpu_kernels.h"
#include "lib/backends/cpu/onednn.h"
#include "lib/backends/cpu/post_op.h"
#include "lib/backends/cpu/workspace_layout.h"
#include "lib/ir/element_types.h"
#include "lib/ir/ops/conv_geometry.h"

namespace grove::cpu {

using ir::BFloat16;
using ir::ComputeT;
using ir::FromCompute;
using ir::Half;
using ir::ToCompute;
using ir::Visit;
using ir::VisitDType;

namespace {

using ir::KernelContext;
using ir::PreparedKernel;
using backends::CheckOutput;
using backends::CheckRank;
using backends::IsPointwise;
using backends::MakePrepared;
using backends::PreparedParams;
using backends::Window;

absl::Status NotPrepared(const KernelContext& ctx) { return backends::NotPrepared(ctx, "CPU"); }

// The error VisitDType gives for a dtype outside Ts..., at prepare.
template <typename... Ts>
absl::Status CheckDType(const KernelContext& ctx, DType dtype) {
  return VisitDType<Ts...>(ctx, dtype, [](auto) { return absl::OkStatus(); });
}

// Scratch buffers (im2col) above this many elements are refused instead of
// attempted: 2^31 floats is 8 GiB.
constexpr int64_t kMaxScratchElements = int64_t{1} << 31;

// Product of dims, or -1 past kMaxScratchElements.
int64_t BoundedProduct(absl::Span<const int64_t> dims) { return backends::BoundedProduct(dims, kMaxScratchElements); }

// Walks one kernel tap over a grid of positions: calls fn(p, t) for each
// position p of `pos` (flattened, in order) with t the flattened index in
// `target` of coordinate p * stride - pad + tap * dilation per dim, or -1
// when that falls outside `target`. Conv maps output positions to input
// (im2col); ConvTranspose maps input positions to output (col2im). `p`
// (w.spatial entries, from the workspace) holds the position's index.
template <typename Fn>
void ForEachTapPosition(const Window& w, absl::Span<const int64_t> tap, absl::Span<const int64_t> pos,
                        absl::Span<const int64_t> target, absl::Span<int64_t> p, Fn&& fn) {
  const int last = w.spatial - 1;
  int64_t rows = 1;
  for (int d = 0; d < last; ++d) rows *= pos[d];
  if (rows == 0 || pos[last] == 0) return;
  std::fill(p.begin(), p.end(), 0);
  const int64_t base_last = tap[last] * w.dilations[last] - w.pad_begin[last];
  int64_t flat = 0;
  for (int64_t r = 0; r < rows; ++r) {
    int64_t offset = 0;
    bool inside = true;
    for (int d = 0; d < last; ++d) {
      const int64_t t = p[d] * w.strides[d] - w.pad_begin[d] + tap[d] * w.dilations[d];
      if (t < 0 || t >= target[d]) {
        inside = false;
        break;
      }
      offset = offset * target[d] + t;
    }
    offset *= target[last];
    for (int64_t q = 0; q < pos[last]; ++q, ++flat) {
      const int64_t t = q * w.strides[last] + base_last;
      fn(flat, inside && t >= 0 && t < target[last] ? offset + t : -1);
    }
    for (int d = last - 1; d >= 0; --d) {
      if (++p[d] < pos[d]) break;
      p[d] = 0;
    }
  }
}

// ConvTranspose's col2im for one kernel tap: plane[o] += src[i] for each
// input position i (flattened, in order) and the output position o that i
// reaches through `tap` (ForEachTapPosition's mapping from w.in to w.out),
// skipping those outside. Per row of the last dim, the inputs that land
// inside form one range [q0, q1), added with a stride and no per-element
// test. `p` (w.spatial entries, from the workspace) holds the row's index.
template <typename T>
void Col2ImTap(const Window& w, absl::Span<const int64_t> tap, const T* src, T* plane, absl::Span<int64_t> p) {
  const int last = w.spatial - 1;
  int64_t rows = 1;
  for (int d = 0; d < last; ++d) rows *= w.in[d];
  const int64_t in_last = w.in[last], out_last = w.out[last], stride = w.strides[last];
  if (rows == 0 || in_last == 0) return;
  // o = q * stride + base in [0, out_last): q in [q0, q1).
  const int64_t base = tap[last] * w.dilations[last] - w.pad_begin[last];
  const int64_t q0 = base >= 0 ? 0 : (-base + stride - 1) / stride;
  const int64_t q1 = out_last - 1 - base < 0 ? 0 : std::min(in_last, (out_last - 1 - base) / stride + 1);
  std::fill(p.begin(), p.end(), 0);
  for (int64_t r = 0; r < rows; ++r, src += in_last) {
    int64_t offset = 0;
    bool inside = true;
    for (int d = 0; d < last; ++d) {
      const int64_t t = p[d] * w.strides[d] - w.pad_begin[d] + tap[d] * w.dilations[d];
      if (t < 0 || t >= w.out[d]) {
        inside = false;
        break;
      }
      offset = offset * w.out[d] + t;
    }
    if (inside && q0 < q1) {
      T* out = plane + offset * out_last + base;
      if (stride == 1) {
        for (int64_t q = q0; q < q1; ++q) out[q] += src[q];
      } else {
        for (int64_t q = q0; q < q1; ++q) out[q * stride] += src[q];
      }
    }
    for (int d = last - 1; d >= 0; --d) {
      if (++p[d] < w.in[d]) break;
      p[d] = 0;
    }
  }
}

// Advances a multi-index over `dims`; false after the last one.
template <typename Index>
bool NextIndex(Index& index, absl::Span<const int64_t> dims) {
  for (int d = static_cast<int>(dims.size()) - 1; d >= 0; --d) {
    if (++index[d] < dims[d]) return true;
    index[d] = 0;
  }
  return false;
}

// ---------------------------------------------------------------------------
// Conv
// ---------------------------------------------------------------------------

// col[(c * K + tap) * O + o] = x[c] at the input position that output
// position o reads through kernel tap `tap` (0 in the padding).
template <typename T>
void Im2Col(const T* x, int64_t channels, const Window& w, T* col, absl::Span<int64_t> tap, absl::Span<int64_t> p) {
  for (int64_t c = 0; c < channels; ++c, x += w.in_size) {
    std::fill(tap.begin(), tap.end(), 0);
    do {
      ForEachTapPosition(w, tap, w.out, w.in, p, [&](int64_t o, int64_t i) { col[o] = i >= 0 ? x[i] : T(0); });
      col += w.out_size;
    } while (NextIndex(tap, w.kernel));
  }
}

// f16 and bf16 Conv and ConvTranspose run the f32 loops on f32 copies of X,
// W and B, kept in the workspace after the loops' own scratch with Y's f32
// result, which is rounded once on store.
bool IsNarrowFloat(DType d) { return d == DType::kF16 || d == DType::kBF16; }

void AddWidenedCopies(const KernelContext& ctx, WorkspaceLayout* layout) {
  for (int i = 0; i < 3; ++i) layout->Add<float>(ctx.has_input(i) ? ctx.input(i).num_elements() : 0);
  layout->Add<float>(ctx.output(0).num_elements());
}

// The operands the loops read and write, in the compute type C: the
// tensors themselves, or (f16, bf16) widened copies taken from `ws`.
template <typename T>
struct ConvOperands {
  using C = ComputeT<T>;
  const C* x = nullptr;
  const C* w = nullptr;
  const C* b = nullptr;  // null: no bias
  C* y = nullptr;

  ConvOperands(const KernelContext& ctx, WorkspaceCursor& ws) {
    const TensorView* in[3] = {&ctx.input(0), &ctx.input(1), ctx.has_input(2) ? &ctx.input(2) : nullptr};
    const C** out[3] = {&x, &w, &b};
    for (int i = 0; i < 3; ++i) {
      if (in[i] == nullptr) {
        if constexpr (!std::is_same_v<C, T>) ws.Take<float>(0);
        continue;
      }
      if constexpr (std::is_same_v<C, T>) {
        *out[i] = in[i]->as<const T>();
      } else {
        const int64_t n = in[i]->num_elements();
        float* copy = ws.Take<float>(n);
        const T* src = in[i]->as<const T>();
        for (int64_t k = 0; k < n; ++k) copy[k] = ToCompute(src[k]);
        *out[i] = copy;
      }
    }
    if constexpr (std::is_same_v<C, T>) {
      y = ctx.output(0).as<T>();
    } else {
      y = ws.Take<float>(ctx.output(0).num_elements());
    }
  }
  // Stores Y in T (f16, bf16: one rounding).
  void Finish(const KernelContext& ctx) const {
    if constexpr (!std::is_same_v<C, T>) {
      T* dst = ctx.output(0).as<T>();
      const int64_t n = ctx.output(0).num_elements();
      for (int64_t k = 0; k < n; ++k) dst[k] = FromCompute<T>(y[k]);
    }
  }
};

struct ConvPoolChain;
struct OneDnnChain;

// Conv and ConvTranspose after every check: the shapes, the GEMM dims per
// (image, group) and the im2col (col2im) matrix, which lives in the workspace;
// or, for an f32 Conv that oneDNN takes, its primitive (onednn.h).
struct ConvParams {
  backends::ConvShape conv;
  int64_t cg = 0, mg = 0;  // channels per group in X and Y
  int64_t rows = 0;        // the GEMM's K (Conv) or M (ConvTranspose)
  int64_t col_size = 0;    // elements of the im2col / col2im matrix
  bool pointwise = false;  // Conv reads X as it is: no im2col
  std::shared_ptr<OneDnnStep> onednn;  // non-null: oneDNN computes the step
  PostOp post_op;                      // a fused activation (f32 Conv only)
  ChannelAffine affine;                // a fused BatchNormalization (f32 Conv only)
  bool residual = false;               // a fused residual Add: input kResidualInput (f32 Conv only)
  std::shared_ptr<ConvPoolChain> chain;  // non-null: Conv then a pool (PrepareConv)
  std::shared_ptr<OneDnnChain> links;    // non-null: a chain of steps (PrepareOneDnnChain)
};

// The Conv itself (with its fused activation), writing ctx's output 0.
// `io` (may be null): which of X and Y grove stores channels-last; cleared
// where the step cannot read or write that layout (the reference kernel).
absl::StatusOr<PreparedKernel> PrepareConvStage(const KernelContext& ctx, ChannelsLast* io = nullptr) {
  absl::StatusOr<backends::ConvShape> conv = backends::ResolveConv(ctx);
  if (!conv.ok()) return conv.status();
  ConvParams p;
  const Window* w = &conv->w;
  p.cg = conv->c / conv->group;
  p.mg = conv->m / conv->group;
  p.rows = BoundedProduct({p.cg, w->kernel_size});
  p.col_size = BoundedProduct({p.cg, w->kernel_size, w->out_size});
  if (p.rows < 0 || p.col_size < 0 || !FitsBlasInt(p.mg) || !FitsBlasInt(w->out_size) || !FitsBlasInt(p.rows)) {
    return ctx.Error(absl::StrCat("the im2col matrix of ", p.cg, " channels x ", w->kernel_size, " taps x ",
                                  w->out_size, " output positions is too large"));
  }
  const DType dtype = ctx.input(0).dtype;
  if (absl::Status s = CheckDType<float, double, Half, BFloat16>(ctx, dtype); !s.ok()) return s;
  p.pointwise = IsPointwise(*w);
  p.conv = *std::move(conv);
  absl::StatusOr<PostOp> post_op = ReadPostOp(ctx.attrs());
  if (!post_op.ok()) return post_op.status();
  p.post_op = *post_op;
  absl::StatusOr<ChannelAffine> affine = ReadChannelAffine(ctx.attrs(), p.conv.m);
  if (!affine.ok()) return ctx.Error(affine.status().message());
  p.affine = *std::move(affine);
  p.residual = ctx.attrs().GetInt(kResidualAttr, 0) != 0;
  if ((p.post_op.kind != PostOpKind::kNone || !p.affine.empty() || p.residual) && dtype != DType::kF32) {
    return ctx.Error(absl::StrCat("a fused activation needs f32; X is ", DTypeName(dtype)));
  }
  if (p.residual) {
    if (ctx.num_inputs() <= kResidualInput || !ctx.has_input(kResidualInput) ||
        ctx.input(kResidualInput).dtype != DType::kF32 || ctx.input(kResidualInput).shape != p.conv.out_shape) {
      return ctx.Error(absl::StrCat("a Conv fused with a residual Add needs input ", kResidualInput,
                                    " of Y's shape ", backends::ShapeStr(p.conv.out_shape), " in f32"));
    }
  }
  WorkspaceLayout layout;  // the im2col matrix, the tap's and the position's index
  absl::StatusOr<std::shared_ptr<OneDnnStep>> onednn = PrepareOneDnnConv(
      ctx, p.conv, &layout, p.post_op, p.affine, io != nullptr ? *io : ChannelsLast{}, p.residual);
  if (!onednn.ok()) return onednn.status();
  if (*onednn != nullptr) {
    p.onednn = *std::move(onednn);
    return MakePrepared(std::move(p), layout.bytes());
  }
  if (io != nullptr) *io = ChannelsLast{};
  if (!p.pointwise) {
    layout.AddBytes(static_cast<uint64_t>(p.col_size) * (IsNarrowFloat(dtype) ? sizeof(float) : DTypeSize(dtype)));
    layout.Add<int64_t>(p.conv.w.spatial);
    layout.Add<int64_t>(p.conv.w.spatial);
  }
  if (IsNarrowFloat(dtype)) AddWidenedCopies(ctx, &layout);
  return MakePrepared(std::move(p), layout.bytes());
}

absl::Status ConvStageKernel(KernelContext& ctx) {
  const ConvParams* p = PreparedParams<ConvParams>(ctx);
  if (p == nullptr) return NotPrepared(ctx);
  if (p->onednn != nullptr) return RunOneDnnStep(*p->onednn, ctx);
  const TensorView& x = ctx.input(0);
  const Window* w = &p->conv.w;
  const int64_t group = p->conv.group, n = p->conv.n, c = p->conv.c, m = p->conv.m;
  const int64_t cg = p->cg, mg = p->mg, rows = p->rows;
  const bool pointwise = p->pointwise;
  return VisitDType<float, double, Half, BFloat16>(ctx, x.dtype, [&](auto tag) -> absl::Status {
    using T = ComputeT<typename decltype(tag)::type>;
    T* col = nullptr;
    absl::Span<int64_t> tap, position;
    WorkspaceCursor ws(ctx.workspace());
    if (!pointwise) {
      col = ws.Take<T>(p->col_size);
      tap = absl::Span<int64_t>(ws.Take<int64_t>(w->spatial), static_cast<size_t>(w->spatial));
      position = absl::Span<int64_t>(ws.Take<int64_t>(w->spatial), static_cast<size_t>(w->spatial));
    }
    const ConvOperands<typename decltype(tag)::type> ops(ctx, ws);
    const T* xp = ops.x;
    const T* wp = ops.w;
    T* yp = ops.y;
    for (int64_t img = 0; img < n; ++img) {
      for (int64_t gi = 0; gi < group; ++gi) {
        const T* xg = xp + (img * c + gi * cg) * w->in_size;
        const T* a = xg;
        if (!pointwise) {
          Im2Col(xg, cg, *w, col, tap, position);
          a = col;
        }
        T* yg = yp + (img * m + gi * mg) * w->out_size;
        Gemm(false, false, mg, w->out_size, rows, 1.0, wp + gi * mg * rows, a, 0.0, yg);
        if (ops.b != nullptr) {
          const T* bg = ops.b + gi * mg;
          for (int64_t k = 0; k < mg; ++k) {
            T* row = yg + k * w->out_size;
            for (int64_t o = 0; o < w->out_size; ++o) row[o] += bg[k];
          }
        }
      }
    }
    if constexpr (std::is_same_v<T, float>) {
      if (p->affine.before_post_op) ApplyChannelAffine(p->affine, yp, n, m, w->out_size);
      if (p->residual) {  // after the BatchNormalization folded before it, before the activation
        const float* r = ctx.input(kResidualInput).as<const float>();
        const int64_t count = n * m * w->out_size;
        for (int64_t k = 0; k < count; ++k) yp[k] += r[k];
      }
      ApplyPostOp(p->post_op, yp, n * m * w->out_size);
      if (!p->affine.before_post_op) ApplyChannelAffine(p->affine, yp, n, m, w->out_size);
    }
    ops.Finish(ctx);
    return absl::OkStatus();
  });
}

// ---------------------------------------------------------------------------
// ConvTranspose
// ---------------------------------------------------------------------------

absl::StatusOr<PreparedKernel> PrepareConvTranspose(const KernelContext& ctx) {
  absl::StatusOr<backends::ConvShape> conv = backends::ResolveConvTranspose(ctx);
  if (!conv.ok()) return conv.status();
  ConvParams p;
  const Window& w = conv->w;
  p.cg = conv->c / conv->group;
  p.mg = conv->m / conv->group;
  p.rows = BoundedProduct({p.mg, w.kernel_size});
  p.col_size = BoundedProduct({p.mg, w.kernel_size, w.in_size});
  if (p.rows < 0 || p.col_size < 0 || !FitsBlasInt(p.rows) || !FitsBlasInt(w.in_size) || !FitsBlasInt(p.cg)) {
    return ctx.Error(absl::StrCat("the col2im matrix of ", p.mg, " channels x ", w.kernel_size, " taps x ",
                                  w.in_size, " input positions is too large"));
  }
  const DType dtype = ctx.input(0).dtype;
  if (absl::Status s = CheckDType<float, double, Half, BFloat16>(ctx, dtype); !s.ok()) return s;
  p.conv = *std::move(conv);
  WorkspaceLayout layout;  // the col2im matrix, the tap's and the position's index
  absl::StatusOr<std::shared_ptr<OneDnnStep>> onednn = PrepareOneDnnConvTranspose(ctx, p.conv, &layout);
  if (!onednn.ok()) return onednn.status();
  if (*onednn != nullptr) {
    p.onednn = *std::move(onednn);
    return MakePrepared(std::move(p), layout.bytes());
  }
  layout.AddBytes(static_cast<uint64_t>(p.col_size) * (IsNarrowFloat(dtype) ? sizeof(float) : DTypeSize(dtype)));
  layout.Add<int64_t>(p.conv.spatial);
  layout.Add<int64_t>(p.conv.spatial);
  if (IsNarrowFloat(dtype)) AddWidenedCopies(ctx, &layout);
  return MakePrepared(std::move(p), layout.bytes());
}

absl::Status ConvTransposeKernel(KernelContext& ctx) {
  const ConvParams* p = PreparedParams<ConvParams>(ctx);
  if (p == nullptr) return NotPrepared(ctx);
  if (p->onednn != nullptr) return RunOneDnnStep(*p->onednn, ctx);
  const TensorView& x = ctx.input(0);
  const int spatial = p->conv.spatial;
  const Window& w = p->conv.w;
  const int64_t group = p->conv.group, n = p->conv.n, c = p->conv.c, m = p->conv.m;
  const int64_t cg = p->cg, mg = p->mg, rows = p->rows;
  return VisitDType<float, double, Half, BFloat16>(ctx, x.dtype, [&](auto tag) -> absl::Status {
    using T = ComputeT<typename decltype(tag)::type>;
    WorkspaceCursor ws(ctx.workspace());
    T* col = ws.Take<T>(p->col_size);
    const absl::Span<int64_t> tap(ws.Take<int64_t>(spatial), static_cast<size_t>(spatial));
    const absl::Span<int64_t> position(ws.Take<int64_t>(spatial), static_cast<size_t>(spatial));
    const ConvOperands<typename decltype(tag)::type> ops(ctx, ws);
    const T* xp = ops.x;
    const T* wp = ops.w;
    T* yp = ops.y;
    for (int64_t img = 0; img < n; ++img) {
      for (int64_t gi = 0; gi < group; ++gi) {
        // col[mg * K, I] = W_g^T * X_g, with W_g stored as [cg, mg * K].
        Gemm(true, false, rows, w.in_size, cg, 1.0, wp + gi * cg * rows, xp + (img * c + gi * cg) * w.in_size, 0.0,
             col);
        T* yg = yp + (img * m + gi * mg) * w.out_size;
        const T* src = col;
        for (int64_t k = 0; k < mg; ++k) {
          T* plane = yg + k * w.out_size;
          const T bias = ops.b != nullptr ? ops.b[gi * mg + k] : T(0);
          std::fill(plane, plane + w.out_size, bias);
          std::fill(tap.begin(), tap.end(), 0);
          do {
            Col2ImTap(w, tap, src, plane, position);
            src += w.in_size;
          } while (NextIndex(tap, w.kernel));
        }
      }
    }
    ops.Finish(ctx);
    return absl::OkStatus();
  });
}

// ---------------------------------------------------------------------------
// Pooling
// ---------------------------------------------------------------------------

// For each spatial dim and output position: the input positions its window
// covers, and how many window taps fall inside the input plus its padding
// (the divisor of AveragePool with count_include_pad).
struct PoolTaps {
  std::vector<std::vector<std::vector<int64_t>>> inside;  // [dim][out pos] -> input positions
  std::vector<std::vector<int64_t>> padded_count;         // [dim][out pos]
};

// The taps are counted with arithmetic rather than walked, so a window far
// larger than the input (a kernel of 2^24 over a padded length-1 dim) costs
// no more than the input positions it covers.
PoolTaps MakePoolTaps(const Window& w) {
  PoolTaps t;
  t.inside.resize(w.spatial);
  t.padded_count.resize(w.spatial);
  for (int d = 0; d < w.spatial; ++d) {
    t.inside[d].resize(w.out[d]);
    t.padded_count[d].resize(w.out[d]);
    const int64_t k_count = w.kernel[d], dil = w.dilations[d];
    for (int64_t o = 0; o < w.out[d]; ++o) {
      const int64_t start = o * w.strides[d] - w.pad_begin[d];
      // The first tap k in [0, k_count] whose position start + k * dil is >= `bound`.
      auto first_tap_at = [&](int64_t bound) {
        return start >= bound ? 0 : std::min(k_count, (bound - start + dil - 1) / dil);
      };
      const int64_t k_in = first_tap_at(0), k_out = first_tap_at(w.in[d]);
      for (int64_t k = k_in; k < k_out; ++k) t.inside[d][o].push_back(start + k * dil);
      t.padded_count[d][o] =
          std::max<int64_t>(0, first_tap_at(w.in[d] + w.pad_end[d]) - first_tap_at(-w.pad_begin[d]));
    }
  }
  return t;
}

enum class PoolKind { kMax, kAverage };

// The indices a pooled plane is walked with, w.spatial entries each, from
// the workspace: the output position `o`, the window's lists of input
// positions, the tap `k` within them, its input coordinates and MaxPool's
// best coordinates so far.
using WindowLists = absl::Span<const std::vector<int64_t>*>;
struct PoolIndices {
  absl::Span<int64_t> o, k, coord, best_coord;
  WindowLists window;
};

void AddPoolIndices(int spatial, WorkspaceLayout* layout) {
  for (int i = 0; i < 4; ++i) layout->Add<int64_t>(spatial);
  layout->Add<const std::vector<int64_t>*>(spatial);
}

PoolIndices TakePoolIndices(void* workspace, int spatial) {
  WorkspaceCursor ws(workspace);
  const size_t n = static_cast<size_t>(spatial);
  PoolIndices idx;
  idx.o = absl::Span<int64_t>(ws.Take<int64_t>(spatial), n);
  idx.k = absl::Span<int64_t>(ws.Take<int64_t>(spatial), n);
  idx.coord = absl::Span<int64_t>(ws.Take<int64_t>(spatial), n);
  idx.best_coord = absl::Span<int64_t>(ws.Take<int64_t>(spatial), n);
  idx.window = WindowLists(ws.Take<const std::vector<int64_t>*>(spatial), n);
  return idx;
}

// Runs fn(out_flat, out_coords, window) for each output position of one
// plane, where window[d] lists the input positions covered along dim d.
template <typename Fn>
void ForEachPoolWindow(const Window& w, const PoolTaps& taps, const PoolIndices& idx, Fn&& fn) {
  if (w.out_size == 0) return;
  absl::Span<int64_t> o = idx.o;
  std::fill(o.begin(), o.end(), 0);
  int64_t flat = 0;
  do {
    for (int d = 0; d < w.spatial; ++d) idx.window[d] = &taps.inside[d][o[d]];
    fn(flat++, absl::Span<const int64_t>(o), idx.window);
  } while (NextIndex(o, w.out));
}

// Calls visit(input_flat, spatial_coords) for every input element of the window.
template <typename Visit>
void ForEachWindowElement(const Window& w, WindowLists window, const PoolIndices& idx, Visit&& visit) {
  const int sp = w.spatial;
  for (int d = 0; d < sp; ++d) {
    if (window[d]->empty()) return;
  }
  absl::Span<int64_t> k = idx.k, coord = idx.coord;
  std::fill(k.begin(), k.end(), 0);
  while (true) {
    int64_t flat = 0;
    for (int d = 0; d < sp; ++d) {
      coord[d] = (*window[d])[k[d]];
      flat = flat * w.in[d] + coord[d];
    }
    visit(flat, absl::Span<const int64_t>(coord));
    int d = sp - 1;
    for (; d >= 0; --d) {
      if (++k[d] < static_cast<int64_t>(window[d]->size())) break;
      k[d] = 0;
    }
    if (d < 0) return;
  }
}

// MaxPool and AveragePool after every check: the window and the input
// positions each output position's window covers.
struct PoolParams {
  backends::PoolShape pool;
  PoolTaps taps;
  int64_t planes = 0;  // N * C
  bool column_major = false;  // MaxPool's storage_order
  bool count_pad = false;     // AveragePool's count_include_pad
  std::shared_ptr<OneDnnStep> onednn;  // non-null: oneDNN computes the step
};

// `source`: the oneDNN step that writes X, when a chain hands it over
// (PrepareOneDnnPool).
template <PoolKind kKind>
absl::StatusOr<PreparedKernel> PreparePoolAfter(const KernelContext& ctx, const OneDnnStep* source,
                                                ChannelsLast* io = nullptr) {
  absl::StatusOr<backends::PoolShape> pool = backends::ResolvePool(ctx, kKind == PoolKind::kMax);
  if (!pool.ok()) return pool.status();
  const TensorView& x = ctx.input(0);
  absl::Status dtype_ok = kKind == PoolKind::kMax
                              ? CheckDType<float, double, Half, BFloat16, int8_t, uint8_t>(ctx, x.dtype)
                              : CheckDType<float, double, Half, BFloat16>(ctx, x.dtype);
  if (!dtype_ok.ok()) return dtype_ok;
  PoolParams p;
  p.column_major = ctx.attrs().GetInt("storage_order", 0) == 1;
  p.count_pad = ctx.attrs().GetInt("count_include_pad", 0) == 1;
  p.planes = x.shape[0] * x.shape[1];
  p.pool = *std::move(pool);
  WorkspaceLayout layout;  // the indices of the walk (PoolIndices)
  if (!(kKind == PoolKind::kMax && ctx.has_output(1))) {  // MaxPool's Indices: the reference kernel
    absl::StatusOr<std::shared_ptr<OneDnnStep>> onednn =
        PrepareOneDnnPool(ctx, p.pool.w, kKind == PoolKind::kMax, p.count_pad, &layout, source,
                          io != nullptr ? *io : ChannelsLast{});
    if (!onednn.ok()) return onednn.status();
    if (*onednn != nullptr) {
      p.onednn = *std::move(onednn);
      return MakePrepared(std::move(p), layout.bytes());
    }
  }
  if (io != nullptr) *io = ChannelsLast{};
  p.taps = MakePoolTaps(p.pool.w);
  AddPoolIndices(p.pool.w.spatial, &layout);
  return MakePrepared(std::move(p), layout.bytes());
}

template <PoolKind kKind>
absl::StatusOr<PreparedKernel> PreparePoolWith(const KernelContext& ctx, ChannelsLast* io) {
  return PreparePoolAfter<kKind>(ctx, nullptr, io);
}

absl::Status PoolKernel(KernelContext& ctx, PoolKind kind) {
  const PoolParams* pp = PreparedParams<PoolParams>(ctx);
  if (pp == nullptr) return NotPrepared(ctx);
  if (pp->onednn != nullptr) return RunOneDnnStep(*pp->onednn, ctx);
  const TensorView& x = ctx.input(0);
  const int spatial = static_cast<int>(x.shape.size()) - 2;
  const Window* w = &pp->pool.w;
  TensorView* indices = kind == PoolKind::kMax && ctx.has_output(1) ? &ctx.output(1) : nullptr;
  const bool column_major = pp->column_major;
  const bool count_pad = pp->count_pad;
  const PoolTaps& taps = pp->taps;
  const int64_t planes = pp->planes;
  const PoolIndices idx = TakePoolIndices(ctx.workspace(), w->spatial);

  auto run = [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    using C = ComputeT<T>;
    const T* xp = x.as<const T>();
    T* yp = ctx.output(0).as<T>();
    int64_t* ip = indices != nullptr ? indices->as<int64_t>() : nullptr;
    for (int64_t plane = 0; plane < planes; ++plane) {
      const T* xs = xp + plane * w->in_size;
      T* ys = yp + plane * w->out_size;
      int64_t* is = ip != nullptr ? ip + plane * w->out_size : nullptr;
      ForEachPoolWindow(*w, taps, idx, [&](int64_t o, absl::Span<const int64_t> pos, WindowLists window) {
        if (kind == PoolKind::kMax) {
          // A window wholly in the padding has no element; it gives the
          // lowest value, as onnxruntime does.
          C best = std::numeric_limits<C>::lowest();
          int64_t best_index = -1;
          const absl::Span<int64_t> best_coord = idx.best_coord;
          ForEachWindowElement(*w, window, idx, [&](int64_t i, absl::Span<const int64_t> coord) {
            const C v = ToCompute(xs[i]);
            if (best_index < 0 || v > best) {
              best = v;
              best_index = i;
              if (column_major) std::copy(coord.begin(), coord.end(), best_coord.begin());
            }
          });
          ys[o] = FromCompute<T>(best);
          if (is != nullptr) {
            int64_t spatial_index = best_index;
            if (column_major && best_index >= 0) {
              spatial_index = 0;
              for (int d = spatial - 1; d >= 0; --d) spatial_index = spatial_index * w->in[d] + best_coord[d];
            }
            is[o] = spatial_index < 0 ? -1 : plane * w->in_size + spatial_index;
          }
        } else {
          double sum = 0;
          double count = 0;  // a product of padded window lengths may pass int64
          ForEachWindowElement(*w, window, idx, [&](int64_t i, absl::Span<const int64_t>) {
            sum += static_cast<double>(ToCompute(xs[i]));
            ++count;
          });
          if (count_pad) {
            count = 1;
            for (int d = 0; d < spatial; ++d) count *= static_cast<double>(taps.padded_count[d][pos[d]]);
          }
          // A window wholly in the padding averages nothing; it gives 0.
          ys[o] = FromCompute<T>(static_cast<C>(count == 0 ? 0.0 : sum / count));
        }
      });
    }
    return absl::OkStatus();
  };
  if (kind == PoolKind::kMax) return VisitDType<float, double, Half, BFloat16, int8_t, uint8_t>(ctx, x.dtype, run);
  return VisitDType<float, double, Half, BFloat16>(ctx, x.dtype, run);
}

absl::Status MaxPoolBody(KernelContext& ctx) { return PoolKernel(ctx, PoolKind::kMax); }
absl::Status AveragePoolBody(KernelContext& ctx) { return PoolKernel(ctx, PoolKind::kAverage); }

// GlobalMaxPool and GlobalAveragePool: `planes` planes of `size` elements;
// or oneDNN's pooling over a window of the whole plane.
struct GlobalPoolParams {
  int64_t planes = 0, size = 1;
  std::shared_ptr<OneDnnStep> onednn;
};

template <PoolKind kKind>
absl::StatusOr<PreparedKernel> PrepareGlobalPoolAfter(const KernelContext& ctx, const OneDnnStep* source,
                                                      ChannelsLast* io = nullptr) {
  absl::StatusOr<backends::GlobalPoolShape> pool = backends::ResolveGlobalPool(ctx);
  if (!pool.ok()) return pool.status();
  const TensorView& x = ctx.input(0);
  if (absl::Status s = CheckDType<float, double, Half, BFloat16>(ctx, x.dtype); !s.ok()) return s;
  GlobalPoolParams p{x.shape[0] * x.shape[1], pool->size, nullptr};
  Window w;
  w.spatial = static_cast<int>(x.shape.size()) - 2;
  w.in.assign(x.shape.begin() + 2, x.shape.end());
  w.kernel = w.in;
  w.out.assign(w.spatial, 1);
  w.strides.assign(w.spatial, 1);
  w.dilations.assign(w.spatial, 1);
  w.pad_begin.assign(w.spatial, 0);
  w.pad_end.assign(w.spatial, 0);
  w.in_size = w.kernel_size = pool->size;
  WorkspaceLayout layout;
  absl::StatusOr<std::shared_ptr<OneDnnStep>> onednn =
      PrepareOneDnnPool(ctx, w, kKind == PoolKind::kMax, /*include_padding=*/false, &layout, source,
                        io != nullptr ? *io : ChannelsLast{});
  if (!onednn.ok()) return onednn.status();
  p.onednn = *std::move(onednn);
  if (p.onednn == nullptr && io != nullptr) *io = ChannelsLast{};
  return MakePrepared(std::move(p), layout.bytes());
}

template <PoolKind kKind>
absl::StatusOr<PreparedKernel> PrepareGlobalPoolWith(const KernelContext& ctx, ChannelsLast* io) {
  return PrepareGlobalPoolAfter<kKind>(ctx, nullptr, io);
}

template <PoolKind kKind>
absl::Status GlobalPoolKernel(KernelContext& ctx) {
  const GlobalPoolParams* gp = PreparedParams<GlobalPoolParams>(ctx);
  if (gp == nullptr) return NotPrepared(ctx);
  if (gp->onednn != nullptr) return RunOneDnnStep(*gp->onednn, ctx);
  const TensorView& x = ctx.input(0);
  const int64_t size = gp->size;
  const int64_t planes = gp->planes;
  return VisitDType<float, double, Half, BFloat16>(ctx, x.dtype, [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    using C = ComputeT<T>;
    const T* xp = x.as<const T>();
    T* yp = ctx.output(0).as<T>();
    for (int64_t p = 0; p < planes; ++p, xp += size) {
      if constexpr (kKind == PoolKind::kMax) {
        C best = size > 0 ? ToCompute(xp[0]) : std::numeric_limits<C>::lowest();
        for (int64_t i = 1; i < size; ++i) best = std::max(best, ToCompute(xp[i]));
        yp[p] = FromCompute<T>(best);
      } else {
        double sum = 0;
        for (int64_t i = 0; i < size; ++i) sum += static_cast<double>(ToCompute(xp[i]));
        yp[p] = FromCompute<T>(static_cast<C>(size == 0 ? 0.0 : sum / static_cast<double>(size)));
      }
    }
    return absl::OkStatus();
  });
}

// ---------------------------------------------------------------------------
// Conv (+ activation) + MaxPool / AveragePool: one step of the CPU plan pass
// (activation_fusion.h)
// ---------------------------------------------------------------------------

// Both stages as they were prepared, on one workspace: the Conv's at 0, its
// output (`mid`) at mid_offset unless `linked`, the pool's at pool_offset.
// Linked: both are oneDNN steps and the Conv writes its output in oneDNN's
// layout straight into the pool's input array (LinkOneDnnSteps), never in
// grove's. The invoke binds `mid`'s data, one run at a time like the steps'
// own memory handles.
struct ConvPoolChain {
  ir::Node pool_node;  // the pool's type and attributes, for its stage's context
  bool max = true;
  PreparedKernel conv, pool;
  uint64_t mid_offset = 0, pool_offset = 0;
  bool linked = false;
  mutable TensorView mid;
};

// ctx's inputs as a KernelContext takes them (Conv has at most 3).
int ConvInputs(const KernelContext& ctx, TensorView* (&inputs)[3]) {
  const int n = std::min(ctx.num_inputs(), 3);
  for (int i = 0; i < n; ++i) inputs[i] = ctx.has_input(i) ? const_cast<TensorView*>(&ctx.input(i)) : nullptr;
  return n;
}

absl::StatusOr<PreparedKernel> PrepareOneDnnChain(const KernelContext& ctx, ChannelsLast* io);
absl::Status OneDnnChainKernel(KernelContext& ctx);

// Conv, maybe fused with a pool or the head of a chain; `io` as for
// PrepareConvStage.
absl::StatusOr<PreparedKernel> PrepareConvWith(const KernelContext& ctx, ChannelsLast* io) {
  if (ctx.attrs().Has(kChainLinksAttr)) return PrepareOneDnnChain(ctx, io);
  if (!ctx.attrs().Has(kFusedPoolAttr)) return PrepareConvStage(ctx, io);
  auto chain = std::make_shared<ConvPoolChain>();
  const std::string pool_type = ctx.attrs().GetString(kFusedPoolAttr, "");
  if (pool_type != "MaxPool" && pool_type != "AveragePool") {
    return ctx.Error(absl::StrCat("the fused pool is '", pool_type, "'; expected MaxPool or AveragePool"));
  }
  const std::vector<int64_t> mid_shape = ctx.attrs().GetInts(kFusedPoolInputAttr);
  if (ctx.input(0).dtype != DType::kF32 || mid_shape.size() != ctx.input(0).shape.size()) {
    return ctx.Error("a Conv fused with a pool needs f32 and the pool's input shape");
  }
  chain->max = pool_type == "MaxPool";
  ir::Node& pool_node = chain->pool_node;
  pool_node.type = pool_type;
  pool_node.name = ctx.node().name;
  pool_node.def = ctx.node().def;
  pool_node.subgraph = ctx.node().subgraph;
  pool_node.index = ctx.node().index;
  for (const auto& [name, value] : ctx.attrs().all()) {
    if (absl::StartsWith(name, kFusedPoolAttrPrefix)) pool_node.attrs.Set(name.substr(kFusedPoolAttrPrefix.size()), value);
  }
  chain->mid = TensorView(DType::kF32, mid_shape, static_cast<void*>(nullptr));
  TensorView* inputs[3] = {nullptr, nullptr, nullptr};
  const int num_inputs = ConvInputs(ctx, inputs);
  TensorView* conv_outputs[1] = {&chain->mid};
  const KernelContext conv_ctx(ctx.node(), absl::MakeSpan(inputs, num_inputs), conv_outputs, ctx.host());
  // X is the Conv's, Y the pool's.
  ChannelsLast conv_io{io != nullptr && io->src, false}, pool_io{false, io != nullptr && io->dst};
  absl::StatusOr<PreparedKernel> conv = PrepareConvStage(conv_ctx, &conv_io);
  if (!conv.ok()) return conv.status();
  TensorView out = ctx.output(0);
  TensorView* pool_inputs[1] = {&chain->mid};
  TensorView* pool_outputs[1] = {&out};
  const KernelContext pool_ctx(pool_node, pool_inputs, pool_outputs, ctx.host());
  const OneDnnStep* conv_step = static_cast<const ConvParams*>(conv->params.get())->onednn.get();
  absl::StatusOr<PreparedKernel> pool = chain->max
                                             ? PreparePoolAfter<PoolKind::kMax>(pool_ctx, conv_step, &pool_io)
                                             : PreparePoolAfter<PoolKind::kAverage>(pool_ctx, conv_step, &pool_io);
  if (!pool.ok()) return pool.status();
  if (io != nullptr) *io = ChannelsLast{conv_io.src, pool_io.dst};
  const auto* conv_params = static_cast<const ConvParams*>(conv->params.get());
  const auto* pool_params = static_cast<const PoolParams*>(pool->params.get());
  chain->linked = conv_params->onednn != nullptr && pool_params->onednn != nullptr &&
                  CanLinkOneDnnSteps(*conv_params->onednn, *pool_params->onednn);
  WorkspaceLayout layout;
  layout.AddBytes(conv->workspace_bytes);
  if (!chain->linked) {
    chain->mid_offset = AlignWorkspace(layout.bytes());
    layout.AddBytes(static_cast<uint64_t>(chain->mid.num_elements()) * sizeof(float));
  }
  chain->pool_offset = AlignWorkspace(layout.bytes());
  layout.AddBytes(pool->workspace_bytes);
  if (chain->linked) {
    LinkOneDnnSteps(*conv_params->onednn, *pool_params->onednn, static_cast<int64_t>(chain->pool_offset));
  }
  chain->conv = *std::move(conv);
  chain->pool = *std::move(pool);
  ConvParams p;
  p.chain = std::move(chain);
  return MakePrepared(std::move(p), layout.bytes());
}

absl::Status ConvBody(KernelContext& ctx) {
  const ConvParams* p = PreparedParams<ConvParams>(ctx);
  if (p == nullptr) return NotPrepared(ctx);
  if (p->links != nullptr) return OneDnnChainKernel(ctx);
  if (p->chain == nullptr) return ConvStageKernel(ctx);
  const ConvPoolChain& chain = *p->chain;
  uint8_t* workspace = static_cast<uint8_t*>(ctx.workspace());
  if (workspace == nullptr) return ctx.Error("the fused Conv and pool have no workspace");
  chain.mid.data = chain.linked ? nullptr : workspace + chain.mid_offset;
  TensorView* inputs[3] = {nullptr, nullptr, nullptr};
  const int num_inputs = ConvInputs(ctx, inputs);
  TensorView* conv_outputs[1] = {&chain.mid};
  KernelContext conv_ctx(ctx.node(), absl::MakeSpan(inputs, num_inputs), conv_outputs, ctx.host());
  conv_ctx.SetPrepared(&chain.conv, workspace);
  if (absl::Status s = ConvStageKernel(conv_ctx); !s.ok()) return s;
  TensorView* pool_inputs[1] = {&chain.mid};
  TensorView* pool_outputs[1] = {&ctx.output(0)};
  KernelContext pool_ctx(chain.pool_node, pool_inputs, pool_outputs, ctx.host());
  pool_ctx.SetPrepared(&chain.pool, workspace + chain.pool_offset);
  return PoolKernel(pool_ctx, chain.max ? PoolKind::kMax : PoolKind::kAverage);
}

// ---------------------------------------------------------------------------
// A chain of oneDNN steps: Conv (maybe fused) then Conv, pooling and global
// pooling steps, each reading the one before (FuseOneDnnChains, post_op.h's
// kChainLinksAttr), run as one step so that each link hands its output to
// the next in oneDNN's blocked layout: reorders only at the chain's ends.
// ---------------------------------------------------------------------------

enum class LinkKind { kConv, kMaxPool, kAveragePool, kGlobalMaxPool, kGlobalAveragePool };

struct ChainLink {
  ir::Node node;  // the link's type and attributes, for its context
  LinkKind kind = LinkKind::kConv;
  int first_input = 0;  // the chain node's inputs the link takes after the value handed to it
  int num_inputs = 0;
  PreparedKernel prepared;
  uint64_t offset = 0;  // its workspace in the chain's
  // Its output unless it is the last link: in the workspace at out_offset
  // unless `linked` (then the link writes it straight into the next link's
  // blocked array and grove's layout of it is never written). The invoke
  // binds its data, one run at a time like the steps' own memory handles.
  mutable TensorView out;
  uint64_t out_offset = 0;
  bool linked = false;
};

struct OneDnnChain {
  std::vector<ChainLink> links;
};

// The oneDNN step a link starts with (reads its input) and the one it ends
// with (writes its output), each with its workspace's offset in the link's;
// nullptr where the link runs a reference kernel.
struct LinkEnds {
  OneDnnStep* entry = nullptr;
  uint64_t entry_offset = 0;
  OneDnnStep* exit = nullptr;
  uint64_t exit_offset = 0;
};

LinkEnds EndsOf(const ChainLink& link) {
  LinkEnds e;
  const void* params = link.prepared.params.get();
  switch (link.kind) {
    case LinkKind::kConv: {
      const auto* p = static_cast<const ConvParams*>(params);
      if (p->chain != nullptr) {  // Conv + pool: the Conv's stage, then the pool's at pool_offset
        e.entry = static_cast<const ConvParams*>(p->chain->conv.params.get())->onednn.get();
        e.exit = static_cast<const PoolParams*>(p->chain->pool.params.get())->onednn.get();
        e.exit_offset = p->chain->pool_offset;
      } else {
        e.entry = e.exit = p->onednn.get();
      }
      break;
    }
    case LinkKind::kMaxPool:
    case LinkKind::kAveragePool:
      e.entry = e.exit = static_cast<const PoolParams*>(params)->onednn.get();
      break;
    case LinkKind::kGlobalMaxPool:
    case LinkKind::kGlobalAveragePool:
      e.entry = e.exit = static_cast<const GlobalPoolParams*>(params)->onednn.get();
      break;
  }
  return e;
}

absl::StatusOr<LinkKind> LinkKindOf(const KernelContext& ctx, const std::string& type) {
  if (type == "Conv" || absl::StartsWith(type, "Conv+")) return LinkKind::kConv;  // maybe fused
  if (type == "MaxPool") return LinkKind::kMaxPool;
  if (type == "AveragePool") return LinkKind::kAveragePool;
  if (type == "GlobalMaxPool") return LinkKind::kGlobalMaxPool;
  if (type == "GlobalAveragePool") return LinkKind::kGlobalAveragePool;
  return ctx.Error(absl::StrCat("a oneDNN chain link is '", type, "'; expected Conv or a pool"));
}

// `source`: the oneDNN step the link before ends with (its output's
// writer), or null; a pool reads the layout it hands over.
// `io`: as for PrepareConvStage (the chain's X for its first link, Y for
// its last).
absl::StatusOr<PreparedKernel> PrepareLink(const ChainLink& link, const KernelContext& ctx,
                                           const OneDnnStep* source, ChannelsLast* io) {
  switch (link.kind) {
    case LinkKind::kConv:
      return PrepareConvWith(ctx, io);
    case LinkKind::kMaxPool:
      return PreparePoolAfter<PoolKind::kMax>(ctx, source, io);
    case LinkKind::kAveragePool:
      return PreparePoolAfter<PoolKind::kAverage>(ctx, source, io);
    case LinkKind::kGlobalMaxPool:
      return PrepareGlobalPoolAfter<PoolKind::kMax>(ctx, source, io);
    case LinkKind::kGlobalAveragePool:
      return PrepareGlobalPoolAfter<PoolKind::kAverage>(ctx, source, io);
  }
  return ctx.Error("unknown chain link");
}

absl::Status RunLink(const ChainLink& link, KernelContext& ctx) {
  switch (link.kind) {
    case LinkKind::kConv:
      return ConvBody(ctx);
    case LinkKind::kMaxPool:
      return PoolKernel(ctx, PoolKind::kMax);
    case LinkKind::kAveragePool:
      return PoolKernel(ctx, PoolKind::kAverage);
    case LinkKind::kGlobalMaxPool:
      return GlobalPoolKernel<PoolKind::kMax>(ctx);
    case LinkKind::kGlobalAveragePool:
      return GlobalPoolKernel<PoolKind::kAverage>(ctx);
  }
  return ctx.Error("unknown chain link");
}

// At most this many inputs per link: the value handed over, a Conv's W and B.
constexpr int kMaxLinkInputs = 3;

// Link i's inputs: the chain node's first inputs (link 0), or the link
// before's output and its own inputs.
int LinkInputs(const OneDnnChain& chain, size_t i, const KernelContext& ctx, TensorView* (&inputs)[kMaxLinkInputs]) {
  const ChainLink& link = chain.links[i];
  int n = 0;
  if (i > 0) inputs[n++] = &chain.links[i - 1].out;
  for (int j = 0; j < link.num_inputs; ++j) {
    const int at = link.first_input + j;
    inputs[n++] = ctx.has_input(at) ? const_cast<TensorView*>(&ctx.input(at)) : nullptr;
  }
  return n;
}

absl::StatusOr<PreparedKernel> PrepareOneDnnChain(const KernelContext& ctx, ChannelsLast* io) {
  const int64_t more = ctx.attrs().GetInt(kChainLinksAttr, 0);
  const std::vector<int64_t> counts = ctx.attrs().GetInts(kChainInputsAttr);
  if (more < 1 || more > 4096 || static_cast<int64_t>(counts.size()) != more + 1) {
    return ctx.Error("a oneDNN chain needs its links and their input counts");
  }
  auto chain = std::make_shared<OneDnnChain>();
  chain->links.resize(static_cast<size_t>(more + 1));
  int next_input = 0;
  for (int64_t i = 0; i <= more; ++i) {
    ChainLink& link = chain->links[i];
    const std::string prefix = ChainAttrPrefix(static_cast<int>(i));
    link.node.name = ctx.node().name;
    link.node.def = ctx.node().def;
    link.node.subgraph = ctx.node().subgraph;
    link.node.index = ctx.node().index;
    if (i == 0) {
      link.node.type = "Conv";  // the node's own attributes, but the chain's
      for (const auto& [name, value] : ctx.attrs().all()) {
        if (!absl::StartsWith(name, "grove_chain") && name != kChannelsLastAttr) link.node.attrs.Set(name, value);
      }
    } else {
      link.node.type = ctx.attrs().GetString(ChainTypeAttr(static_cast<int>(i)), "");
      for (const auto& [name, value] : ctx.attrs().all()) {
        if (absl::StartsWith(name, prefix)) link.node.attrs.Set(name.substr(prefix.size()), value);
      }
    }
    absl::StatusOr<LinkKind> kind = LinkKindOf(ctx, link.node.type);
    if (!kind.ok()) return kind.status();
    link.kind = *kind;
    link.first_input = next_input;
    link.num_inputs = static_cast<int>(counts[i]);
    next_input += link.num_inputs;
    if (counts[i] < 0 || counts[i] + (i > 0 ? 1 : 0) > kMaxLinkInputs || next_input > ctx.num_inputs()) {
      return ctx.Error(absl::StrCat("oneDNN chain link ", i, " takes ", counts[i], " inputs; the node has ",
                                    ctx.num_inputs()));
    }
    if (i > 0) {
      const std::vector<int64_t> shape = ctx.attrs().GetInts(ChainShapeAttr(static_cast<int>(i)));
      if (shape.empty()) return ctx.Error(absl::StrCat("oneDNN chain link ", i, " has no input shape"));
      chain->links[i - 1].out = TensorView(DType::kF32, shape, static_cast<void*>(nullptr));
    }
  }
  if (next_input != ctx.num_inputs() || ctx.input(0).dtype != DType::kF32) {
    return ctx.Error("a oneDNN chain's links must take every input of the node, f32");
  }
  // Each link prepared as its own step would be, on its own context.
  for (size_t i = 0; i < chain->links.size(); ++i) {
    ChainLink& link = chain->links[i];
    TensorView* inputs[kMaxLinkInputs] = {nullptr, nullptr, nullptr};
    const int n = LinkInputs(*chain, i, ctx, inputs);
    TensorView out = ctx.output(0);
    TensorView* outputs[1] = {i + 1 < chain->links.size() ? &link.out : &out};
    const KernelContext link_ctx(link.node, absl::MakeSpan(inputs, n), outputs, ctx.host());
    const OneDnnStep* source = i > 0 ? EndsOf(chain->links[i - 1]).exit : nullptr;
    const bool last = i + 1 == chain->links.size();
    ChannelsLast link_io{i == 0 && io != nullptr && io->src, last && io != nullptr && io->dst};
    absl::StatusOr<PreparedKernel> prepared = PrepareLink(link, link_ctx, source, &link_io);
    if (!prepared.ok()) return prepared.status();
    link.prepared = *std::move(prepared);
    if (io != nullptr && i == 0) io->src = link_io.src;
    if (io != nullptr && last) io->dst = link_io.dst;
  }
  // The workspace: even links' workspaces share one region and odd links'
  // another (link i + 1 writes into link i + 2's array while link i + 1 reads
  // its own), and the outputs kept in grove's layout two more, alternating the
  // same way.
  uint64_t region[2] = {0, 0}, mid_bytes = 0;
  for (size_t i = 0; i < chain->links.size(); ++i) {
    ChainLink& link = chain->links[i];
    region[i % 2] = std::max(region[i % 2], link.prepared.workspace_bytes);
    if (i + 1 == chain->links.size()) continue;
    const LinkEnds from = EndsOf(link), to = EndsOf(chain->links[i + 1]);
    link.linked = from.exit != nullptr && to.entry != nullptr && CanLinkOneDnnSteps(*from.exit, *to.entry);
    if (!link.linked) mid_bytes = std::max(mid_bytes, static_cast<uint64_t>(link.out.num_elements()) * sizeof(float));
  }
  const uint64_t region_offset[2] = {0, AlignWorkspace(region[0])};
  const uint64_t mid_offset[2] = {AlignWorkspace(region_offset[1] + region[1]),
                                  AlignWorkspace(AlignWorkspace(region_offset[1] + region[1]) + mid_bytes)};
  const uint64_t total = mid_offset[1] + mid_bytes;
  for (size_t i = 0; i < chain->links.size(); ++i) {
    ChainLink& link = chain->links[i];
    link.offset = region_offset[i % 2];
    link.out_offset = mid_offset[i % 2];
  }
  for (size_t i = 0; i + 1 < chain->links.size(); ++i) {
    const ChainLink& link = chain->links[i];
    if (!link.linked) continue;
    const ChainLink& next = chain->links[i + 1];
    const LinkEnds from = EndsOf(link), to = EndsOf(next);
    const int64_t delta = static_cast<int64_t>(next.offset + to.entry_offset) -
                          static_cast<int64_t>(link.offset + from.exit_offset);
    LinkOneDnnSteps(*from.exit, *to.entry, delta);
  }
  ConvParams p;
  p.links = std::move(chain);
  return MakePrepared(std::move(p), total);
}

absl::Status OneDnnChainKernel(KernelContext& ctx) {
  const OneDnnChain& chain = *PreparedParams<ConvParams>(ctx)->links;
  uint8_t* workspace = static_cast<uint8_t*>(ctx.workspace());
  if (workspace == nullptr) return ctx.Error("the oneDNN chain has no workspace");
  for (size_t i = 0; i < chain.links.size(); ++i) {
    const ChainLink& link = chain.links[i];
    const bool last = i + 1 == chain.links.size();
    if (!last) link.out.data = link.linked ? nullptr : workspace + link.out_offset;
    TensorView* inputs[kMaxLinkInputs] = {nullptr, nullptr, nullptr};
    const int n = LinkInputs(chain, i, ctx, inputs);
    TensorView* outputs[1] = {last ? &ctx.output(0) : &link.out};
    KernelContext link_ctx(link.node, absl::MakeSpan(inputs, n), outputs, ctx.host());
    link_ctx.SetPrepared(&link.prepared, workspace + link.offset);
    if (absl::Status s = RunLink(link, link_ctx); !s.ok()) return s;
  }
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------
// LRN
// ---------------------------------------------------------------------------

// y = x / (bias + alpha / size * sum of x^2 over the channels
// [c - floor((size - 1) / 2), c + ceil((size - 1) / 2)] clipped to [0, C))^beta.
// LRN: the attributes, the geometry and the loop of the dtype, made once;
// the squares of one batch item live in the workspace (channels * inner
// doubles).
struct LrnParams {
  int64_t size = 1, n = 0, channels = 0, inner = 1, before = 0, after = 0;
  double alpha = 1e-4, beta = 0.75, bias = 1.0;
  void (*run)(const LrnParams& p, const void* x, void* y, double* sq) = nullptr;
};

template <typename T>
void RunLrn(const LrnParams& p, const void* x_data, void* y_data, double* sq) {
  const T* xp = static_cast<const T*>(x_data);
  T* yp = static_cast<T*>(y_data);
  const int64_t channels = p.channels, inner = p.inner;
  for (int64_t b = 0; b < p.n; ++b) {
    const int64_t base = b * channels * inner;
    for (int64_t k = 0; k < channels * inner; ++k) {
      const double v = static_cast<double>(ToCompute(xp[base + k]));
      sq[k] = v * v;
    }
    for (int64_t c = 0; c < channels; ++c) {
      const int64_t lo = std::max<int64_t>(0, c - p.before), hi = std::min(channels - 1, c + p.after);
      for (int64_t i = 0; i < inner; ++i) {
        double sum = 0;
        for (int64_t k = lo; k <= hi; ++k) sum += sq[k * inner + i];
        const int64_t at = base + c * inner + i;
        const double v = static_cast<double>(ToCompute(xp[at]));
        yp[at] = FromCompute<T>(
            static_cast<ComputeT<T>>(v / std::pow(p.bias + p.alpha / static_cast<double>(p.size) * sum, p.beta)));
      }
    }
  }
}

absl::StatusOr<ir::PreparedKernel> PrepareLrn(const KernelContext& ctx) {
  const TensorView& x = ctx.input(0);
  if (absl::Status s = CheckRank(ctx, 0, "X", 2); !s.ok()) return s;
  LrnParams p;
  p.size = ctx.attrs().GetInt("size", 0);
  if (p.size < 1) return ctx.Error(absl::StrCat("attribute 'size' is ", p.size, "; expected >= 1"));
  if (absl::Status s = CheckOutput(ctx, 0, x.dtype, x.shape); !s.ok()) return s;
  p.alpha = ctx.attrs().GetFloat("alpha", 1e-4);
  p.beta = ctx.attrs().GetFloat("beta", 0.75);
  p.bias = ctx.attrs().GetFloat("bias", 1.0);
  p.n = x.shape[0];
  p.channels = x.shape[1];
  for (size_t d = 2; d < x.shape.size(); ++d) p.inner *= x.shape[d];
  p.before = (p.size - 1) / 2;
  p.after = p.size - 1 - p.before;
  absl::Status chosen = VisitDType<float, double, Half, BFloat16>(ctx, x.dtype, [&](auto tag) -> absl::Status {
    p.run = &RunLrn<typename decltype(tag)::type>;
    return absl::OkStatus();
  });
  if (!chosen.ok()) return chosen;
  const uint64_t sq_bytes = static_cast<uint64_t>(p.channels * p.inner) * sizeof(double);
  return MakePrepared(std::move(p), sq_bytes);
}

absl::Status LrnKernel(KernelContext& ctx) {
  const LrnParams* p = backends::PreparedParams<LrnParams>(ctx);
  if (p == nullptr) return backends::NotPrepared(ctx, "CPU");
  p->run(*p, ctx.input(0).data, ctx.output(0).data, static_cast<double*>(ctx.workspace()));
  return absl::OkStatus();
}

}  // namespace

absl::Status RegisterNnKernels(ir::OpRegistry& registry) {
  const std::pair<const char*, ir::KernelDef> kernels[] = {
      {"Conv", {&RunLayoutAware<&ConvBody>, &PrepareLayoutAware<&PrepareConvWith>}},
      {"ConvTranspose", {&ConvTransposeKernel, &PrepareConvTranspose}},
      {"MaxPool", {&RunLayoutAware<&MaxPoolBody>, &PrepareLayoutAware<&PreparePoolWith<PoolKind::kMax>>}},
      {"AveragePool",
       {&RunLayoutAware<&AveragePoolBody>, &PrepareLayoutAware<&PreparePoolWith<PoolKind::kAverage>>}},
      {"GlobalAveragePool",
       {&RunLayoutAware<&GlobalPoolKernel<PoolKind::kAverage>>,
        &PrepareLayoutAware<&PrepareGlobalPoolWith<PoolKind::kAverage>>}},
      {"GlobalMaxPool",
       {&RunLayoutAware<&GlobalPoolKernel<PoolKind::kMax>>, &PrepareLayoutAware<&PrepareGlobalPoolWith<PoolKind::kMax>>}},
      {"LRN", {&LrnKernel, &PrepareLrn}},
  };
  for (const auto& [type, kernel] : kernels) {
    if (absl::Status s = registry.SetKernel(type, ir::Backend::kCpu, kernel); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace grove::cpu
