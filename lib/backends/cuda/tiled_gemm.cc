#include "lib/backends/cuda/tiled_gemm.h"

#include <cstdint>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "jit/kernels/gemm_tiled_params.h"
#include "lib/backends/cuda/kernel_choice.h"
#include "lib/backends/cuda/variant_launch.h"

namespace grove::cuda {
namespace {

constexpr absl::string_view kFamily = "gemm_tiled";

}  // namespace

bool UseTiledGemm(const ExecContext& ec, const GemmDesc& g, bool b_is_weight) {
  if (!ec.bucket_plan()) return false;
  return g.batch != 1 || g.trans_a || !b_is_weight;
}

jit::KernelProblem TiledGemmProblem(const GemmDesc& g) {
  // Extents sorted by name, as KernelProblem wants.
  return jit::KernelProblem{std::string(kFamily),
                            {g.dtype},
                            {{"batch", g.batch},
                             {"k", g.k},
                             {"m", g.m},
                             {"n", g.n},
                             {"transa", g.trans_a ? 1 : 0},
                             {"transb", g.trans_b ? 1 : 0}}};
}

TiledGemm PrepareTiledGemm(const ir::KernelContext& ctx, const GemmDesc& g, bool b_is_weight) {
  TiledGemm t;
  ExecContext& ec = Exec(ctx);
  t.use = UseTiledGemm(ec, g, b_is_weight);
  if (!t.use) return t;
  const jit::KernelProblem problem = TiledGemmProblem(g);
  const jit::KernelFamily* family = jit::FindKernelFamily(kFamily);
  // The node's variant per bucket, chosen at the bucket's bound and kept
  // for its shapes (ExecContext::BucketKept).
  const std::string what = absl::StrCat(kFamily, "|", jit::DTypesName(problem.dtypes));
  if (const KernelChoice* kept = ec.BucketKept<KernelChoice>(ctx.node(), what); kept != nullptr) {
    if (KernelDispatch* dispatch = ec.dispatch(); dispatch != nullptr) dispatch->Record(ctx.node(), *kept);
    t.config = kept->config;
    return t;
  }
  KernelChoice choice = ChooseAndRecord(ctx, problem);
  if (family != nullptr && !family->Valid(choice.config, problem)) {
    choice.config = family->Generic(problem);
    choice.source = ChoiceSource::kGeneric;
  }
  t.config = choice.config;
  ec.BucketKeep(ctx.node(), what, std::move(choice));
  return t;
}

grove_k::GemvParams ProductParams(const GemmDesc& g) {
  grove_k::GemvParams p{};
  p.a = g.a;
  p.b = g.b;
  p.c = g.c;
  p.bias = g.bias;
  p.m = g.m;
  p.n = g.n;
  p.k = g.k;
  p.lda = g.lda;
  p.ldb = g.ldb;
  p.ldc = g.ldc;
  p.batch = g.batch;
  p.stride_a = g.stride_a;
  p.stride_b = g.stride_b;
  p.stride_c = g.stride_c;
  p.alpha = g.alpha;
  p.beta = g.beta;
  p.trans_a = g.trans_a ? 1 : 0;
  p.trans_b = g.trans_b ? 1 : 0;
  return p;
}

absl::Status RunTiledGemm(ExecContext& ec, const GemmDesc& g, const jit::KernelConfig& config) {
  const jit::KernelProblem problem = TiledGemmProblem(g);
  const jit::KernelFamily* family = jit::FindKernelFamily(kFamily);
  if (family == nullptr || !family->Valid(config, problem)) {
    return absl::InvalidArgumentError(absl::StrCat("tiled GEMM: ", config.Name(), " is not a ", kFamily,
                                                   " variant for a ", DTypeName(g.dtype), " product"));
  }
  if (g.out_dtype() != g.dtype) {
    return absl::InvalidArgumentError(absl::StrCat("tiled GEMM: C must be ", DTypeName(g.dtype), " as A and B are"));
  }
  grove_k::GemmTiledParams p{};
  p.g = ProductParams(g);
  p.math = 0;
  if (g.dtype == DType::kF32) {
    switch (ec.gemm_math()) {
      case GemmDesc::Math::kF32: p.math = 0; break;
      case GemmDesc::Math::kTF32: p.math = 1; break;
      case GemmDesc::Math::kBF16: p.math = 2; break;
      case GemmDesc::Math::kF16: p.math = 3; break;
    }
  }
  p.epilogue = g.epilogue == GemmDesc::Epilogue::kRelu ? 1 : g.epilogue == GemmDesc::Epilogue::kGelu ? 2 : 0;
  // A block per output tile (the family's Launch); the kernel loops
  // grid-stride over the rest.
  const VariantLaunch v = LaunchOf(config, problem);
  return ec.Launch(v.module, "gemm_tiled", v.dims, p);
}

absl::Status RunTiledGemm(ExecContext& ec, const GemmDesc& g) {
  const jit::KernelFamily* family = jit::FindKernelFamily(kFamily);
  if (family == nullptr) return absl::InternalError("tiled GEMM: the gemm_tiled family is not registered");
  return RunTiledGemm(ec, g, family->Generic(TiledGemmProblem(g)));
}

}  // namespace grove::cuda
