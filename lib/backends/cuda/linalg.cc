// CUDA kernels of MatMul and Gemm: every product is a Device::Gemm (cuBLASLt
// on a GPU), or, for at most 64 rows (decode shapes), the "gemv" kernel
// family (jit/kernels/gemv.cuh) when its chosen variant's cost estimate
// beats the vendor GEMM's; in a plan that serves a shape bucket, a product
// whose N or K may vary runs the tiled kernel instead (tiled_gemm.h). MatMul's broadcast batch dims fold into as few strided batched
// GEMMs as their strides allow (one when the batches agree or one side is
// shared); Gemm's C is either the GEMM's bias epilogue (a row vector with
// beta 1) or broadcast into Y first and read back with beta. f32, f16 and
// bf16 only: other dtypes report Unimplemented, so the executor keeps those
// nodes on the CPU. The prepares resolve shapes and build the GemmDescs
// without pointers; the invokes fill them in and run.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "jit/cost_model.h"
#include "jit/kernel_config.h"
#include "jit/kernels/conv_params.h"
#include "jit/kernels/gemv_params.h"
#include "lib/backends/common/kernel_checks.h"
#include "lib/backends/common/matmul_shapes.h"
#include "lib/backends/cuda/cuda_kernels.h"
#include "lib/backends/cuda/device.h"
#include "lib/backends/cuda/exec_context.h"
#include "lib/backends/cuda/kernel_choice.h"
#include "lib/backends/cuda/launch_util.h"
#include "lib/backends/cuda/tiled_gemm.h"
#include "lib/backends/cuda/variant_launch.h"

namespace grove::cuda {
namespace {

using backends::ShapeStr;

absl::Status NoCudaDType(const ir::KernelContext& ctx, absl::string_view op, DType t) {
  return absl::UnimplementedError(
      ctx.Error(absl::StrCat(op, " has no CUDA kernel for dtype ", DTypeName(t), " (f32, f16 and bf16 only)"))
          .message());
}

// dst (contiguous [m, n]) = scale * src broadcast from [cm, cn].
absl::Status BroadcastMatrix(ExecContext& ec, DType dtype, const void* src, int64_t cm, int64_t cn, int64_t m,
                             int64_t n, float scale, void* dst) {
  grove_k::ScaledCopyParams p{};
  p.src = src;
  p.dst = dst;
  p.shape.rank = 2;
  p.shape.d[0] = m;
  p.shape.d[1] = n;
  p.src_strides.s[0] = cm == 1 ? 0 : cn;
  p.src_strides.s[1] = cn == 1 ? 0 : 1;
  p.dst_strides.s[0] = n;
  p.dst_strides.s[1] = 1;
  p.n = m * n;
  p.scale = scale;
  return ec.Launch({"conv", {dtype}}, "scaled_copy", GridFor(p.n), p);
}

// A GEMM run by the gemv family instead of Device::Gemm (use false: the
// Device::Gemm), or by the tiled kernel (tiled: a bucketed plan's product
// whose N or K may vary, tiled_gemm.h).
struct GemvRun {
  TiledGemm tiled;
  bool use = false;
  jit::ModuleSpec module;
  LaunchDims dims;
};

// The tiled kernel for `g` in a bucketed plan where its N or K may vary
// (UseTiledGemm; B is input 1); else the gemv family when M <= kGemvMaxM,
// no epilogue activation, and the chosen variant's estimate is below the
// vendor GEMM's (same GpuTraits).
GemvRun ChooseGemv(const ir::KernelContext& ctx, const GemmDesc& g) {
  GemvRun r;
  r.tiled = PrepareTiledGemm(ctx, g, Exec(ctx).host_input(1) != nullptr);
  if (r.tiled.use) return r;
  if (g.m < 1 || g.m > jit::kGemvMaxM || g.n < 1 || g.k < 1 || g.epilogue != GemmDesc::Epilogue::kNone) return r;
  const jit::KernelProblem problem{
      "gemv", {g.dtype}, {{"batch", g.batch}, {"k", g.k}, {"m", g.m}, {"n", g.n}, {"transb", g.trans_b ? 1 : 0}}};
  const jit::KernelFamily* family = jit::FindKernelFamily("gemv");
  if (family == nullptr) return r;
  // The cost model's best gemv variant must beat the vendor GEMM before the
  // dispatcher is asked (so a step that keeps cuBLASLt records no gemv).
  const jit::GpuTraits gpu = DeviceTraits(Exec(ctx).device());
  const double vendor_us = jit::GemmLibraryEstimateUs(problem, gpu);
  const jit::KernelConfig best = jit::BestVariant(*family, problem, gpu).config;
  if (!family->Valid(best, problem) || family->Cost(best, problem, gpu).estimate_us >= vendor_us) return r;
  const VariantLaunch v = ChooseLaunch(ctx, problem);
  if (!family->Valid(v.config, problem)) return r;
  r.use = true;
  r.module = v.module;
  r.dims = v.dims;
  return r;
}

// Runs `g` (pointers filled) as prepared: a gemv launch or Device::Gemm.
absl::Status RunGemm(ExecContext& ec, const GemmDesc& g, const GemvRun& gemv) {
  if (gemv.tiled.use) return RunTiledGemm(ec, g, gemv.tiled.config);
  if (!gemv.use) return ec.Gemm(g);
  return ec.Launch(gemv.module, "gemv", gemv.dims, ProductParams(g));
}

// MatMul: the batched GEMM (pointers offset per outer batch index), prepared.
struct MatMulPrepared {
  enum class Path { kNothing, kZero, kGemm } path = Path::kNothing;
  GemmDesc g;  // without pointers
  GemvRun gemv;
  size_t elem = 0;
  int inner_begin = 0;  // dims [0, inner_begin) loop on the host
  std::vector<int64_t> dims, ta, tb, ty;
  int64_t outer = 1;
};

absl::StatusOr<ir::PreparedKernel> PrepareMatMul(const ir::KernelContext& ctx) {
  const TensorView& a = ctx.input(0);
  const TensorView& y = ctx.output(0);
  absl::StatusOr<backends::MatMulShape> shape = backends::ResolveMatMul(ctx);
  if (!shape.ok()) return shape.status();
  const std::vector<int64_t>&batch = shape->batch, &da = shape->a_batch, &db = shape->b_batch;
  const int nb = static_cast<int>(batch.size());
  const int64_t m = shape->m, n = shape->n, k = shape->k;
  if (!GemmDType(a.dtype)) return NoCudaDType(ctx, "MatMul", a.dtype);
  MatMulPrepared mp;
  if (y.num_elements() == 0) return MakePrepared(std::move(mp));
  if (k == 0) {
    mp.path = MatMulPrepared::Path::kZero;
    return MakePrepared(std::move(mp));
  }
  mp.path = MatMulPrepared::Path::kGemm;

  // Element strides of each batch dim in A, B and Y (0 where broadcast).
  const int64_t mat_a = m * k, mat_b = k * n, mat_y = m * n;
  std::vector<int64_t> sa(nb), sb(nb), sy(nb);
  int64_t acc_a = mat_a, acc_b = mat_b, acc_y = mat_y;
  for (int d = nb - 1; d >= 0; --d) {
    sa[d] = da[d] == 1 ? 0 : acc_a;
    sb[d] = db[d] == 1 ? 0 : acc_b;
    sy[d] = acc_y;
    acc_a *= da[d];
    acc_b *= db[d];
    acc_y *= batch[d];
  }
  // Dims of length 1 take no part; then the innermost run of dims whose
  // strides chain (stride[d] == stride[d+1] * len[d+1] for A, B and Y alike)
  // is one batched GEMM with one stride per operand.
  std::vector<int64_t>&dims = mp.dims, &ta = mp.ta, &tb = mp.tb, &ty = mp.ty;
  for (int d = 0; d < nb; ++d) {
    if (batch[d] == 1) continue;
    dims.push_back(batch[d]);
    ta.push_back(sa[d]);
    tb.push_back(sb[d]);
    ty.push_back(sy[d]);
  }
  const int nd = static_cast<int>(dims.size());
  int inner_begin = nd;
  int64_t inner = 1;
  if (nd > 0) {
    inner_begin = nd - 1;
    inner = dims[nd - 1];
    while (inner_begin > 0) {
      const int d = inner_begin - 1, e = inner_begin;
      if (ta[d] != ta[e] * dims[e] || tb[d] != tb[e] * dims[e] || ty[d] != ty[e] * dims[e]) break;
      inner *= dims[d];
      inner_begin = d;
    }
  }
  GemmDesc& g = mp.g;
  g.dtype = a.dtype;
  g.m = m;
  g.n = n;
  g.k = k;
  g.lda = k;
  g.ldb = n;
  g.ldc = n;
  g.batch = inner;
  g.stride_a = inner_begin < nd ? ta[nd - 1] : 0;
  g.stride_b = inner_begin < nd ? tb[nd - 1] : 0;
  g.stride_c = mat_y;
  // A shared B under a batch of A matrices laid out back to back: one tall GEMM.
  if (g.stride_b == 0 && g.stride_a == mat_a && inner > 1) {
    g.m = m * inner;
    g.batch = 1;
    g.stride_a = g.stride_c = 0;
  }
  mp.gemv = ChooseGemv(ctx, g);
  // cuBLASLt's algorithm only for a GEMM it runs (a table's "gemm" entry).
  if (!mp.gemv.use && !mp.gemv.tiled.use) g.algorithm = ChooseGemmAlgorithm(ctx, g);
  mp.outer = nd == 0 ? 1 : y.num_elements() / (mat_y * inner);
  mp.elem = DTypeSize(a.dtype);
  mp.inner_begin = inner_begin;
  return MakePrepared(std::move(mp));
}

absl::Status MatMulKernel(ir::KernelContext& ctx) {
  const MatMulPrepared* mp = PreparedParams<MatMulPrepared>(ctx);
  if (mp == nullptr) return NotPrepared(ctx);
  if (mp->path == MatMulPrepared::Path::kNothing) return absl::OkStatus();
  ExecContext& ec = Exec(ctx);
  TensorView& y = ctx.output(0);
  if (mp->path == MatMulPrepared::Path::kZero) return ec.device().MemsetAsync(y.data, 0, y.byte_size(), ec.stream());
  const char* a = static_cast<const char*>(ctx.input(0).data);
  const char* b = static_cast<const char*>(ctx.input(1).data);
  char* c = static_cast<char*>(y.data);
  GemmDesc g = mp->g;
  const int inner_begin = mp->inner_begin;
  const size_t elem = mp->elem;
  if (inner_begin == 0) {  // one batched GEMM
    g.a = a;
    g.b = b;
    g.c = c;
    return RunGemm(ec, g, mp->gemv);
  }
  const std::vector<int64_t>&dims = mp->dims, &ta = mp->ta, &tb = mp->tb, &ty = mp->ty;
  int64_t idx[grove_k::kMaxRank + 8] = {};
  std::vector<int64_t> idx_heap;
  int64_t* index = idx;
  if (inner_begin > static_cast<int>(sizeof(idx) / sizeof(idx[0]))) {
    idx_heap.assign(static_cast<size_t>(inner_begin), 0);
    index = idx_heap.data();
  }
  for (int64_t o = 0; o < mp->outer; ++o) {
    int64_t oa = 0, ob = 0, oy = 0;
    for (int d = 0; d < inner_begin; ++d) {
      oa += index[d] * ta[d];
      ob += index[d] * tb[d];
      oy += index[d] * ty[d];
    }
    g.a = a + oa * elem;
    g.b = b + ob * elem;
    g.c = c + oy * elem;
    if (absl::Status s = RunGemm(ec, g, mp->gemv); !s.ok()) return s;
    for (int d = inner_begin - 1; d >= 0; --d) {
      if (++index[d] < dims[d]) break;
      index[d] = 0;
    }
  }
  return absl::OkStatus();
}

// Gemm: one GEMM, after C broadcast into Y or as the bias epilogue.
struct GemmPrepared {
  enum class Path { kNothing, kZero, kScaledC, kGemm } path = Path::kNothing;
  GemmDesc g;  // without pointers
  GemvRun gemv;
  DType dtype = DType::kF32;
  int64_t cm = 0, cn = 0, m = 0, n = 0;
  float beta = 0.0f;
  bool c_bias = false;       // C is the GEMM's bias epilogue
  bool c_broadcast = false;  // C broadcast into Y first (beta in the GEMM)
};

absl::StatusOr<ir::PreparedKernel> PrepareGemm(const ir::KernelContext& ctx) {
  const TensorView& a = ctx.input(0);
  const TensorView& b = ctx.input(1);
  const bool has_c = ctx.has_input(2);
  absl::StatusOr<backends::GemmShape> shape = backends::ResolveGemm(ctx);
  if (!shape.ok()) return shape.status();
  const float alpha = static_cast<float>(shape->alpha);
  const float beta = static_cast<float>(shape->beta);
  const int64_t m = shape->m, n = shape->n, k = shape->k, cm = shape->cm, cn = shape->cn;
  if (!GemmDType(a.dtype)) return NoCudaDType(ctx, "Gemm", a.dtype);
  GemmPrepared gp;
  gp.dtype = a.dtype;
  gp.cm = cm;
  gp.cn = cn;
  gp.m = m;
  gp.n = n;
  gp.beta = beta;
  if (m == 0 || n == 0) return MakePrepared(std::move(gp));
  const bool use_c = has_c && beta != 0.0f;
  if (k == 0) {  // Y = beta * C, without a GEMM over an empty inner dim
    gp.path = use_c ? GemmPrepared::Path::kScaledC : GemmPrepared::Path::kZero;
    return MakePrepared(std::move(gp));
  }
  gp.path = GemmPrepared::Path::kGemm;
  GemmDesc& g = gp.g;
  g.dtype = a.dtype;
  g.trans_a = shape->trans_a;
  g.trans_b = shape->trans_b;
  g.m = m;
  g.n = n;
  g.k = k;
  g.lda = a.shape[1];
  g.ldb = b.shape[1];
  g.ldc = n;
  g.alpha = alpha;
  if (use_c) {
    if (cm == 1 && cn == n && beta == 1.0f) {
      gp.c_bias = true;  // a row vector added to every row: the GEMM's epilogue
    } else {
      gp.c_broadcast = true;
      g.beta = beta;
    }
  }
  gp.gemv = ChooseGemv(ctx, g);
  if (!gp.gemv.use && !gp.gemv.tiled.use) g.algorithm = ChooseGemmAlgorithm(ctx, g);
  return MakePrepared(std::move(gp));
}

absl::Status GemmKernel(ir::KernelContext& ctx) {
  const GemmPrepared* gp = PreparedParams<GemmPrepared>(ctx);
  if (gp == nullptr) return NotPrepared(ctx);
  ExecContext& ec = Exec(ctx);
  TensorView& y = ctx.output(0);
  switch (gp->path) {
    case GemmPrepared::Path::kNothing:
      return absl::OkStatus();
    case GemmPrepared::Path::kZero:
      return ec.device().MemsetAsync(y.data, 0, y.byte_size(), ec.stream());
    case GemmPrepared::Path::kScaledC:
      return BroadcastMatrix(ec, gp->dtype, ctx.input(2).data, gp->cm, gp->cn, gp->m, gp->n, gp->beta, y.data);
    case GemmPrepared::Path::kGemm:
      break;
  }
  GemmDesc g = gp->g;
  g.a = ctx.input(0).data;
  g.b = ctx.input(1).data;
  g.c = y.data;
  if (gp->c_bias) g.bias = ctx.input(2).data;
  if (gp->c_broadcast) {
    if (absl::Status s = BroadcastMatrix(ec, gp->dtype, ctx.input(2).data, gp->cm, gp->cn, gp->m, gp->n, 1.0f,
                                         y.data);
        !s.ok()) {
      return s;
    }
  }
  return RunGemm(ec, g, gp->gemv);
}

}  // namespace

absl::Status RegisterCudaLinalgKernels(ir::OpRegistry& registry) {
  if (absl::Status s = registry.SetKernel("MatMul", ir::Backend::kCuda, ir::KernelDef{&MatMulKernel, &PrepareMatMul});
      !s.ok()) {
    return s;
  }
  return registry.SetKernel("Gemm", ir::Backend::kCuda, ir::KernelDef{&GemmKernel, &PrepareGemm});
}

}  // namespace grove::cuda
