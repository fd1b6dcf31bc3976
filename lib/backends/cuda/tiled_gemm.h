// The GEMMs of plans that serve a shape bucket (ExecContext::bucket_plan).
//
// A bucket's CUDA graph is captured once at the bucket's bound and then
// refreshed with each smaller shape's kernel parameters (param_device.h).
// A cuBLASLt GEMM is baked into the graph with its sizes, so it may serve
// the bucket only where the sizes that vary are the outer ones: fewer rows
// M of a single row-major matrix (no transposed A), whose C rows past the
// actual ones lie in the bound's arena and are never read as results; and
// then only when B is a weight, so that K and N are the weight's. Every
// other product of a bucketed plan (attention's QK^T and PV, a Conv's
// im2col product whose N is the image size, a batched product whose rows
// vary under fixed batch strides) runs the tiled kernel of
// jit/kernels/gemm_tiled.cuh, which reads M, N, K, its leading dims and
// batch strides from its parameters: the graph's node serves every shape.
// Plans of exact shapes keep cuBLASLt (and the gemv family).
//
// The tiled kernel is a kernel family ("gemm_tiled", jit/kernel_config.h):
// its variant is chosen when the step is prepared, by the dispatcher
// (kernel_choice.h: a table's entry, else the cost model) for the product's
// extents in the plan of the bucket's bound (ExecContext::bucket; the
// executor plans a bound before its shapes), and kept for that node in the
// plans of the bucket's shapes: a bucket's graph is refreshed only with
// launches of the module it captured (any variant runs any M, N, K).
#ifndef GROVE_LIB_BACKENDS_CUDA_TILED_GEMM_H_
#define GROVE_LIB_BACKENDS_CUDA_TILED_GEMM_H_

#include "absl/status/status.h"
#include "jit/kernel_config.h"
#include "jit/kernels/gemv_params.h"
#include "lib/backends/cuda/device.h"
#include "lib/backends/cuda/exec_context.h"
#include "lib/ir/op_registry.h"

namespace grove::cuda {

// Whether the step being prepared runs `g` as the tiled kernel: in a
// bucketed plan, unless g is one matrix (batch 1), A not transposed and
// `b_is_weight` (B's values known when the plan is made: a weight or a
// folded value, so its K and N do not vary).
bool UseTiledGemm(const ExecContext& ec, const GemmDesc& g, bool b_is_weight);

// A prepared GEMM step's tiled kernel: whether it runs, and its variant.
struct TiledGemm {
  bool use = false;
  jit::KernelConfig config;
};

// UseTiledGemm for the step of `ctx`, and when it holds, the variant (see
// the file comment; recorded for ctx.node() as the dispatcher's choices are).
TiledGemm PrepareTiledGemm(const ir::KernelContext& ctx, const GemmDesc& g, bool b_is_weight);

// The "gemm_tiled" problem of `g`: batch, k, m, n and the transposes.
jit::KernelProblem TiledGemmProblem(const GemmDesc& g);

// `g` (pointers filled) as the gemv and tiled kernels take it.
grove_k::GemvParams ProductParams(const GemmDesc& g);

// Runs `g` (pointers filled) as the tiled kernel's variant `config` (a
// "gemm_tiled" config for g's dtype; INVALID_ARGUMENT otherwise) on the
// step's stream, with the session's math mode for f32 data
// (ExecContext::gemm_math). Without `config`: the generic variant.
absl::Status RunTiledGemm(ExecContext& ec, const GemmDesc& g, const jit::KernelConfig& config);
absl::Status RunTiledGemm(ExecContext& ec, const GemmDesc& g);

}  // namespace grove::cuda

#endif  // GROVE_LIB_BACKENDS_CUDA_TILED_GEMM_H_
