#include "lib/backends/cuda/tiled_gemm.h"

#include <algorithm>
#include <cstdint>

#include "jit/kernels/gemm_tiled_params.h"

namespace grove::cuda {

bool UseTiledGemm(const ExecContext& ec, const GemmDesc& g, bool b_is_weight) {
  if (!ec.bucket_plan()) return false;
  return g.batch != 1 || g.trans_a || !b_is_weight;
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

absl::Status RunTiledGemm(ExecContext& ec, const GemmDesc& g) {
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
  // A block per output tile; the kernel loops grid-stride over the rest.
  const int64_t tiles = ((g.m + grove_k::kGemmTile - 1) / grove_k::kGemmTile) *
                        ((g.n + grove_k::kGemmTile - 1) / grove_k::kGemmTile) * std::max<int64_t>(g.batch, 1);
  LaunchDims dims;
  dims.grid = {static_cast<uint32_t>(std::clamp<int64_t>(tiles, 1, 65535)), 1, 1};
  dims.block = {static_cast<uint32_t>(grove_k::kGemmTileThreads), 1, 1};
  return ec.Launch(jit::ModuleSpec{"gemm_tiled", {g.dtype}}, "gemm_tiled", dims, p);
}

}  // namespace grove::cuda
