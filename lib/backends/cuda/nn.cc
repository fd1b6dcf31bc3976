// CUDA kernels of Conv, ConvTranspose and pooling. Conv is im2col into
// the step's workspace plus strided batched Device::Gemm calls over (image, group)
// pairs, batched over whichever is longer (a pointwise Conv reads X
// directly; a depthwise Conv, one input channel per group, is a direct
// kernel instead);
// ConvTranspose is the same GEMMs plus col2im written as a gather. In a
// plan that serves a shape bucket the GEMMs run the tiled kernel, which
// reads its sizes from its parameters (their N is the image size;
// tiled_gemm.h). A bias is broadcast into Y first
// and the GEMM adds onto it (beta 1). The workspace is bounded: images are
// taken in chunks that fit kMaxWorkspaceBytes. Pooling kernels are direct, one
// thread per output element. Window geometry comes from conv_geometry.h as
// in the shape functions and the CPU kernels, and every dim is checked
// again when the step is prepared (the invoke only launches). Conv and ConvTranspose run f32, f16 and bf16 (f64 reports
// Unimplemented so the executor keeps it on the CPU); pooling runs every
// dtype the CPU kernels accept.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "jit/kernels/conv_params.h"
#include "jit/kernels/pool_params.h"
#include "lib/backends/common/kernel_checks.h"
#include "lib/backends/common/window.h"
#include "lib/backends/cuda/cuda_kernels.h"
#include "lib/backends/cuda/device.h"
#include "lib/backends/cuda/exec_context.h"
#include "lib/backends/cuda/kernel_choice.h"
#include "lib/backends/cuda/launch_util.h"
#include "lib/backends/cuda/tiled_gemm.h"
#include "lib/ir/ops/conv_geometry.h"

namespace grove::cuda {
namespace {

using ir::KernelContext;
using ir::WindowGeometry;
using backends::IsPointwise;
using backends::Window;

// The im2col / col2im workspace: a chunk of images (at least one image's worth).
constexpr int64_t kMaxWorkspaceBytes = int64_t{256} << 20;
// Larger matrices are refused rather than attempted.
constexpr int64_t kMaxMatrixElements = int64_t{1} << 31;

// Product of dims, or -1 past kMaxMatrixElements.
int64_t BoundedProduct(absl::Span<const int64_t> dims) { return backends::BoundedProduct(dims, kMaxMatrixElements); }

absl::Status Unimplemented(const KernelContext& ctx, absl::string_view msg) {
  return absl::UnimplementedError(ctx.Error(msg).message());
}

grove_k::ConvWindow ToConvWindow(const Window& w) {
  grove_k::ConvWindow c{};
  c.spatial = w.spatial;
  c.in_size = w.in_size;
  c.out_size = w.out_size;
  c.kernel_size = 1;
  for (int d = 0; d < w.spatial; ++d) {
    c.in[d] = w.in[d];
    c.out[d] = w.out[d];
    c.kernel[d] = w.kernel[d];
    c.stride[d] = w.strides[d];
    c.dilation[d] = w.dilations[d];
    c.pad[d] = w.pad_begin[d];
    c.kernel_size *= w.kernel[d];
  }
  return c;
}

// y[img][ch][o] = bias[ch] for `images` x `channels` planes of `size`.
absl::Status FillChannelBias(ExecContext& ec, DType dtype, const void* bias, int64_t images, int64_t channels,
                             int64_t size, void* y) {
  grove_k::ScaledCopyParams p{};
  p.src = bias;
  p.dst = y;
  p.shape.rank = 3;
  p.shape.d[0] = images;
  p.shape.d[1] = channels;
  p.shape.d[2] = size;
  p.src_strides.s[1] = 1;
  p.dst_strides.s[0] = channels * size;
  p.dst_strides.s[1] = size;
  p.dst_strides.s[2] = 1;
  p.n = images * channels * size;
  p.scale = 1.0f;
  return ec.Launch({"conv", {dtype}}, "scaled_copy", GridFor(p.n), p);
}

// Images per chunk when one image needs `per_image` workspace bytes.
int64_t ChunkImages(int64_t images, int64_t per_image) {
  if (per_image <= 0) return images;
  return std::max<int64_t>(1, std::min<int64_t>(images, kMaxWorkspaceBytes / per_image));
}

// ---------------------------------------------------------------------------
// Conv
// ---------------------------------------------------------------------------

// What Conv's and ConvTranspose's prepares make (the workspace holds one
// chunk of the im2col / col2im matrix).
struct ConvPrepared {
  enum class Path { kNothing, kDepthwise, kGemm } path = Path::kNothing;
  backends::ConvShape conv;
  DType dtype = DType::kF32;
  jit::ModuleSpec module;
  bool has_bias = false;
  bool pointwise = false;  // Conv reads X directly, no im2col
  int64_t cg = 0, mg = 0, rows = 0, col_image = 0, chunk = 0;
  grove_k::DepthwiseConvParams depthwise{};  // without pointers
  grove_k::ConvWindow cw{};
  // cuBLASLt's algorithm (GemmDesc::algorithm, from the dispatch table) for
  // the GEMMs of a chunk of `chunk` images and of the last, shorter chunk.
  int algo_full = -1, algo_tail = -1;
  // The GEMMs run the tiled kernel (a bucketed plan: B, the image's
  // columns, is computed, and its N follows the image size), its variant.
  TiledGemm tiled;
};

// The strides of A, B and C from one GEMM of a chunk's batch to the next.
struct ChunkStrides {
  int64_t a = 0, b = 0, c = 0;
};

// A chunk's GEMMs of `images` images and the conv's groups, without
// pointers: C[m, n] = op(A) B[k, n] (A stored [m, k], or [k, m] when
// `trans_a`; rows packed) for every (image, group), batched over the longer
// of the two (the kernel loops over the other) with its strides.
GemmDesc ChunkGemm(const ConvPrepared& cp, int64_t images, bool trans_a, int64_t m, int64_t n, int64_t k,
                   ChunkStrides per_image, ChunkStrides per_group) {
  GemmDesc gd;
  gd.dtype = cp.dtype;
  gd.trans_a = trans_a;
  gd.m = m;
  gd.n = n;
  gd.k = k;
  gd.lda = trans_a ? m : k;
  gd.ldb = n;
  gd.ldc = n;
  const bool by_image = images >= cp.conv.group;
  const ChunkStrides& s = by_image ? per_image : per_group;
  gd.batch = by_image ? images : cp.conv.group;
  gd.stride_a = s.a;
  gd.stride_b = s.b;
  gd.stride_c = s.c;
  return gd;
}

// Conv's: Y_g[mg, O] = W_g[mg, rows] col_g[rows, O].
GemmDesc ConvChunkGemm(const ConvPrepared& cp, int64_t images) {
  const int64_t out_size = cp.conv.w.out_size;
  const int64_t b_image = cp.pointwise ? cp.conv.c * cp.conv.w.in_size : cp.col_image;
  GemmDesc gd = ChunkGemm(cp, images, false, cp.mg, out_size, cp.rows, {0, b_image, cp.conv.m * out_size},
                          {cp.mg * cp.rows, cp.rows * out_size, cp.mg * out_size});
  gd.beta = cp.has_bias ? 1.0f : 0.0f;
  return gd;
}

// ConvTranspose's: col[img][g][mg * K][I] = W_g^T X_g with W_g stored as
// [cg, mg * K].
GemmDesc ConvTransposeChunkGemm(const ConvPrepared& cp, int64_t images) {
  const int64_t in_size = cp.conv.w.in_size;
  return ChunkGemm(cp, images, true, cp.rows, in_size, cp.cg, {0, cp.conv.c * in_size, cp.col_image},
                   {cp.cg * cp.rows, cp.cg * in_size, cp.rows * in_size});
}

// The chunks' algorithms, chosen when the step is prepared (as MatMul's):
// the shorter last chunk's first, so the full chunks' choice is the one
// recorded for the node.
void ChooseChunkAlgorithms(const KernelContext& ctx, ConvPrepared& cp, GemmDesc (*gemm)(const ConvPrepared&, int64_t)) {
  cp.tiled = PrepareTiledGemm(ctx, gemm(cp, std::min(cp.conv.n, cp.chunk)), /*b_is_weight=*/false);
  if (cp.tiled.use) return;
  const int64_t n = cp.conv.n;
  if (n <= 0 || cp.chunk <= 0) return;
  if (n % cp.chunk != 0 && n > cp.chunk) cp.algo_tail = ChooseGemmAlgorithm(ctx, gemm(cp, n % cp.chunk));
  cp.algo_full = ChooseGemmAlgorithm(ctx, gemm(cp, std::min(n, cp.chunk)));
}

absl::StatusOr<ir::PreparedKernel> PrepareConv(const KernelContext& ctx) {
  absl::StatusOr<backends::ConvShape> conv = backends::ResolveConv(ctx);
  if (!conv.ok()) return conv.status();
  const TensorView& x = ctx.input(0);
  const int spatial = conv->spatial;
  const WindowGeometry* g = &conv->g;
  const Window* w = &conv->w;
  const int64_t group = conv->group, n = conv->n, m = conv->m;
  if (!GemmDType(x.dtype)) {
    return Unimplemented(ctx, absl::StrCat("Conv has no CUDA kernel for dtype ", DTypeName(x.dtype),
                                           " (f32, f16 and bf16 only)"));
  }
  if (spatial > grove_k::kMaxRank) {
    return Unimplemented(ctx, absl::StrCat("Conv with ", spatial, " spatial dims; the CUDA kernel takes up to ",
                                           grove_k::kMaxRank));
  }
  ConvPrepared cp;
  cp.cg = conv->c / group;
  cp.mg = m / group;
  const int64_t kernel_size = BoundedProduct(g->kernel);
  cp.rows = kernel_size < 0 ? -1 : BoundedProduct({cp.cg, kernel_size});
  cp.col_image = cp.rows < 0 ? -1 : BoundedProduct({group, cp.rows, w->out_size});
  if (cp.rows < 0 || cp.col_image < 0) {
    return ctx.Error(absl::StrCat("the im2col matrix of ", cp.cg, " channels x ", kernel_size, " taps x ",
                                  w->out_size, " output positions is too large"));
  }
  cp.dtype = x.dtype;
  cp.module = jit::ModuleSpec{"conv", {x.dtype}};
  cp.has_bias = ctx.has_input(2);
  cp.cw = ToConvWindow(*w);
  uint64_t workspace = 0;
  if (ctx.output(0).num_elements() == 0) {
    cp.path = ConvPrepared::Path::kNothing;
  } else if (cp.cg == 1 && group > 1) {  // depthwise: direct, without im2col or GEMMs
    cp.path = ConvPrepared::Path::kDepthwise;
    cp.depthwise.images = n;
    cp.depthwise.channels = m;
    cp.depthwise.multiplier = cp.mg;
    cp.depthwise.win = cp.cw;
  } else {
    cp.path = ConvPrepared::Path::kGemm;
    cp.pointwise = IsPointwise(*w);
    const int64_t elem = static_cast<int64_t>(DTypeSize(x.dtype));
    cp.chunk = cp.pointwise ? n : ChunkImages(n, cp.col_image * elem);
    if (!cp.pointwise && cp.rows > 0) workspace = static_cast<uint64_t>(cp.chunk * cp.col_image * elem);
  }
  cp.conv = *std::move(conv);
  if (cp.path == ConvPrepared::Path::kGemm && cp.rows > 0) ChooseChunkAlgorithms(ctx, cp, &ConvChunkGemm);
  return MakePrepared(std::move(cp), workspace);
}

absl::Status ConvKernel(KernelContext& ctx) {
  const ConvPrepared* cp = PreparedParams<ConvPrepared>(ctx);
  if (cp == nullptr) return NotPrepared(ctx);
  if (cp->path == ConvPrepared::Path::kNothing) return absl::OkStatus();
  const TensorView& x = ctx.input(0);
  const TensorView& wt = ctx.input(1);
  const TensorView* b = cp->has_bias ? &ctx.input(2) : nullptr;
  TensorView& y = ctx.output(0);
  ExecContext& ec = Exec(ctx);
  if (cp->path == ConvPrepared::Path::kDepthwise) {
    grove_k::DepthwiseConvParams p = cp->depthwise;
    p.x = x.data;
    p.w = wt.data;
    p.bias = b != nullptr ? b->data : nullptr;
    p.y = y.data;
    return ec.Launch(cp->module, "conv_depthwise", GridFor(y.num_elements()), p);
  }
  const Window* w = &cp->conv.w;
  const int64_t group = cp->conv.group, n = cp->conv.n, c = cp->conv.c, m = cp->conv.m;
  const int64_t mg = cp->mg, rows = cp->rows, col_image = cp->col_image, chunk = cp->chunk;
  const DType dt = cp->dtype;
  const size_t elem = DTypeSize(dt);
  const int64_t out_size = w->out_size;
  if (b != nullptr) {
    if (absl::Status s = FillChannelBias(ec, dt, b->data, n, m, out_size, y.data); !s.ok()) return s;
  } else if (rows == 0) {
    return ec.device().MemsetAsync(y.data, 0, y.byte_size(), ec.stream());
  }
  if (rows == 0) return absl::OkStatus();  // Y is the bias alone

  const bool pointwise = cp->pointwise;
  void* col = pointwise ? nullptr : ctx.workspace();
  for (int64_t img0 = 0; img0 < n; img0 += chunk) {
    const int64_t images = std::min(chunk, n - img0);
    const char* xs = static_cast<const char*>(x.data) + img0 * c * w->in_size * elem;
    const char* bsrc = xs;  // [image][c * K][O]
    int64_t b_image = c * w->in_size;
    if (!pointwise) {
      grove_k::Im2ColParams p{};
      p.x = xs;
      p.col = col;
      p.images = images;
      p.channels = c;
      p.w = cp->cw;
      if (absl::Status s = ec.Launch(cp->module, "im2col", GridFor(images * col_image), p); !s.ok()) return s;
      bsrc = static_cast<const char*>(col);
      b_image = col_image;
    }
    // Y_g[mg, O] = W_g[mg, rows] col_g[rows, O] for every (image, group):
    // batched over the longer of the two, looping over the other.
    GemmDesc gd = ConvChunkGemm(*cp, images);
    gd.algorithm = images == chunk ? cp->algo_full : cp->algo_tail;
    const char* w_base = static_cast<const char*>(wt.data);
    char* y_base = static_cast<char*>(y.data) + img0 * m * out_size * elem;
    const bool by_image = images >= group;
    for (int64_t i = 0; i < (by_image ? group : images); ++i) {
      const int64_t gi = by_image ? i : 0, img = by_image ? 0 : i;
      gd.a = w_base + gi * mg * rows * elem;
      gd.b = bsrc + (img * b_image + gi * rows * out_size) * elem;
      gd.c = y_base + (img * m + gi * mg) * out_size * elem;
      if (absl::Status s = cp->tiled.use ? RunTiledGemm(ec, gd, cp->tiled.config) : ec.Gemm(gd); !s.ok()) return s;
    }
  }
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------
// ConvTranspose
// ---------------------------------------------------------------------------

absl::StatusOr<ir::PreparedKernel> PrepareConvTranspose(const KernelContext& ctx) {
  absl::StatusOr<backends::ConvShape> conv = backends::ResolveConvTranspose(ctx);
  if (!conv.ok()) return conv.status();
  const TensorView& x = ctx.input(0);
  const int spatial = conv->spatial;
  const Window& w = conv->w;
  const int64_t group = conv->group, n = conv->n, c = conv->c, m = conv->m;
  ConvPrepared cp;
  cp.cg = c / group;
  cp.mg = m / group;
  const int64_t kernel_size = w.kernel_size;
  if (!GemmDType(x.dtype)) {
    return Unimplemented(ctx, absl::StrCat("ConvTranspose has no CUDA kernel for dtype ", DTypeName(x.dtype),
                                           " (f32, f16 and bf16 only)"));
  }
  if (spatial > grove_k::kMaxRank) {
    return Unimplemented(ctx, absl::StrCat("ConvTranspose with ", spatial,
                                           " spatial dims; the CUDA kernel takes up to ", grove_k::kMaxRank));
  }
  cp.rows = BoundedProduct({cp.mg, kernel_size});
  cp.col_image = cp.rows < 0 ? -1 : BoundedProduct({group, cp.rows, w.in_size});
  if (cp.rows < 0 || cp.col_image < 0) {
    return ctx.Error(absl::StrCat("the col2im matrix of ", cp.mg, " channels x ", kernel_size, " taps x ",
                                  w.in_size, " input positions is too large"));
  }
  cp.dtype = x.dtype;
  cp.module = jit::ModuleSpec{"conv", {x.dtype}};
  cp.has_bias = ctx.has_input(2);
  cp.cw = ToConvWindow(w);
  uint64_t workspace = 0;
  if (ctx.output(0).num_elements() == 0) {
    cp.path = ConvPrepared::Path::kNothing;
  } else {
    cp.path = ConvPrepared::Path::kGemm;
    if (cp.cg != 0 && w.in_size != 0) {
      const int64_t elem = static_cast<int64_t>(DTypeSize(x.dtype));
      cp.chunk = ChunkImages(n, cp.col_image * elem);
      workspace = static_cast<uint64_t>(cp.chunk * cp.col_image * elem);
    }
  }
  cp.conv = *std::move(conv);
  if (cp.path == ConvPrepared::Path::kGemm && cp.cg != 0 && cp.conv.w.in_size != 0) {
    ChooseChunkAlgorithms(ctx, cp, &ConvTransposeChunkGemm);
  }
  return MakePrepared(std::move(cp), workspace);
}

absl::Status ConvTransposeKernel(KernelContext& ctx) {
  const ConvPrepared* cp = PreparedParams<ConvPrepared>(ctx);
  if (cp == nullptr) return NotPrepared(ctx);
  if (cp->path == ConvPrepared::Path::kNothing) return absl::OkStatus();
  const TensorView& x = ctx.input(0);
  const TensorView& wt = ctx.input(1);
  const TensorView* b = cp->has_bias ? &ctx.input(2) : nullptr;
  const Window& w = cp->conv.w;
  const int64_t group = cp->conv.group, n = cp->conv.n, c = cp->conv.c, m = cp->conv.m;
  const int64_t cg = cp->cg, rows = cp->rows, col_image = cp->col_image, chunk = cp->chunk;
  TensorView& y = ctx.output(0);
  ExecContext& ec = Exec(ctx);
  const DType dt = cp->dtype;
  const size_t elem = DTypeSize(dt);
  if (cg == 0 || w.in_size == 0) {  // nothing lands on the output: Y is the bias
    if (b == nullptr) return ec.device().MemsetAsync(y.data, 0, y.byte_size(), ec.stream());
    return FillChannelBias(ec, dt, b->data, n, m, w.out_size, y.data);
  }
  char* col = static_cast<char*>(ctx.workspace());
  grove_k::Col2ImParams col2im{};
  col2im.col = col;
  col2im.bias = b != nullptr ? b->data : nullptr;
  col2im.channels = m;
  col2im.w = cp->cw;
  for (int64_t img0 = 0; img0 < n; img0 += chunk) {
    const int64_t images = std::min(chunk, n - img0);
    // col[img][g][mg * K][I] = W_g^T X_g with W_g stored as [cg, mg * K], for
    // every (image, group): batched over the longer of the two.
    GemmDesc gd = ConvTransposeChunkGemm(*cp, images);
    gd.algorithm = images == chunk ? cp->algo_full : cp->algo_tail;
    const char* w_base = static_cast<const char*>(wt.data);
    const char* x_base = static_cast<const char*>(x.data) + img0 * c * w.in_size * elem;
    const bool by_image = images >= group;
    for (int64_t i = 0; i < (by_image ? group : images); ++i) {
      const int64_t gi = by_image ? i : 0, img = by_image ? 0 : i;
      gd.a = w_base + gi * cg * rows * elem;
      gd.b = x_base + (img * c + gi * cg) * w.in_size * elem;
      gd.c = col + (img * col_image + gi * rows * w.in_size) * elem;
      if (absl::Status s = cp->tiled.use ? RunTiledGemm(ec, gd, cp->tiled.config) : ec.Gemm(gd); !s.ok()) return s;
    }
    col2im.images = images;
    col2im.y = static_cast<char*>(y.data) + img0 * m * w.out_size * elem;
    if (absl::Status s = ec.Launch(cp->module, "col2im", GridFor(images * m * w.out_size), col2im); !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------
// Pooling
// ---------------------------------------------------------------------------

enum class PoolKind { kMax, kAverage };

bool PoolDType(PoolKind kind, DType t) {
  if (t == DType::kF32 || t == DType::kF64 || t == DType::kF16 || t == DType::kBF16) return true;
  return kind == PoolKind::kMax && (t == DType::kI8 || t == DType::kU8);
}

// What the pooling prepares make: the params without pointers (total 0:
// nothing to launch).
struct PoolPrepared {
  grove_k::PoolParams p{};
  grove_k::GlobalPoolParams global{};
  int64_t total = 0;
  jit::ModuleSpec module;
  const char* entry = "";
  LaunchDims dims;
  bool indices = false;
};

template <PoolKind kKind>
absl::StatusOr<ir::PreparedKernel> PreparePool(const KernelContext& ctx) {
  constexpr PoolKind kind = kKind;
  absl::StatusOr<backends::PoolShape> pool = backends::ResolvePool(ctx, kind == PoolKind::kMax);
  if (!pool.ok()) return pool.status();
  const TensorView& x = ctx.input(0);
  const int spatial = static_cast<int>(x.shape.size()) - 2;
  const Window* w = &pool->w;
  if (!PoolDType(kind, x.dtype)) {
    return ctx.Error(absl::StrCat(kind == PoolKind::kMax ? "MaxPool" : "AveragePool", " has no kernel for dtype ",
                                  DTypeName(x.dtype)));
  }
  if (spatial > grove_k::kMaxRank) {
    return Unimplemented(ctx, absl::StrCat("pooling over ", spatial, " spatial dims; the CUDA kernel takes up to ",
                                           grove_k::kMaxRank));
  }
  PoolPrepared pp;
  grove_k::PoolParams& p = pp.p;
  pp.indices = kind == PoolKind::kMax && ctx.has_output(1);
  p.spatial = spatial;
  for (int d = 0; d < spatial; ++d) {
    p.in[d] = w->in[d];
    p.out[d] = w->out[d];
    p.kernel[d] = w->kernel[d];
    p.stride[d] = w->strides[d];
    p.dilation[d] = w->dilations[d];
    p.pad_begin[d] = w->pad_begin[d];
    p.pad_end[d] = w->pad_end[d];
  }
  p.in_size = w->in_size;
  p.out_size = w->out_size;
  p.planes = x.shape[0] * x.shape[1];
  p.count_include_pad = ctx.attrs().GetInt("count_include_pad", 0) == 1;
  p.column_major = ctx.attrs().GetInt("storage_order", 0) == 1;
  pp.total = p.planes * p.out_size;
  pp.module = jit::ModuleSpec{"pool", {x.dtype}};
  pp.entry = kind == PoolKind::kMax ? "max_pool" : "average_pool";
  pp.dims = GridFor(pp.total);
  return MakePrepared(std::move(pp));
}

absl::Status PoolKernel(KernelContext& ctx) {
  const PoolPrepared* pp = PreparedParams<PoolPrepared>(ctx);
  if (pp == nullptr) return NotPrepared(ctx);
  if (pp->total == 0) return absl::OkStatus();
  grove_k::PoolParams p = pp->p;
  p.x = ctx.input(0).data;
  p.y = ctx.output(0).data;
  p.indices = pp->indices ? ctx.output(1).data : nullptr;
  return Exec(ctx).Launch(pp->module, pp->entry, pp->dims, p);
}

template <PoolKind kKind>
absl::StatusOr<ir::PreparedKernel> PrepareGlobalPool(const KernelContext& ctx) {
  absl::StatusOr<backends::GlobalPoolShape> pool = backends::ResolveGlobalPool(ctx);
  if (!pool.ok()) return pool.status();
  const TensorView& x = ctx.input(0);
  if (!PoolDType(PoolKind::kAverage, x.dtype)) {
    return ctx.Error(absl::StrCat(kKind == PoolKind::kMax ? "GlobalMaxPool" : "GlobalAveragePool",
                                  " has no kernel for dtype ", DTypeName(x.dtype)));
  }
  PoolPrepared pp;
  pp.global = grove_k::GlobalPoolParams{nullptr, nullptr, x.shape[0] * x.shape[1], pool->size};
  pp.total = pp.global.planes;
  pp.module = jit::ModuleSpec{"pool", {x.dtype}};
  pp.entry = kKind == PoolKind::kMax ? "global_max_pool" : "global_average_pool";
  pp.dims = GridFor(pp.global.planes);
  return MakePrepared(std::move(pp));
}

absl::Status GlobalPoolKernel(KernelContext& ctx) {
  const PoolPrepared* pp = PreparedParams<PoolPrepared>(ctx);
  if (pp == nullptr) return NotPrepared(ctx);
  if (pp->total == 0) return absl::OkStatus();
  grove_k::GlobalPoolParams p = pp->global;
  p.x = ctx.input(0).data;
  p.y = ctx.output(0).data;
  return Exec(ctx).Launch(pp->module, pp->entry, pp->dims, p);
}

}  // namespace

absl::Status RegisterCudaNnKernels(ir::OpRegistry& registry) {
  const struct {
    const char* type;
    ir::KernelDef kernel;
  } kernels[] = {
      {"Conv", {&ConvKernel, &PrepareConv}},
      {"ConvTranspose", {&ConvTransposeKernel, &PrepareConvTranspose}},
      {"MaxPool", {&PoolKernel, &PreparePool<PoolKind::kMax>}},
      {"AveragePool", {&PoolKernel, &PreparePool<PoolKind::kAverage>}},
      {"GlobalAveragePool", {&GlobalPoolKernel, &PrepareGlobalPool<PoolKind::kAverage>}},
      {"GlobalMaxPool", {&GlobalPoolKernel, &PrepareGlobalPool<PoolKind::kMax>}},
  };
  for (const auto& k : kernels) {
    if (absl::Status s = registry.SetKernel(k.type, ir::Backend::kCuda, k.kernel); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace grove::cuda
