// Parameters of jit/kernels/gemm_tiled.cuh.
#ifndef GROVE_JIT_KERNELS_GEMM_TILED_PARAMS_H_
#define GROVE_JIT_KERNELS_GEMM_TILED_PARAMS_H_

#include "jit/kernels/gemv_params.h"
#include "jit/kernels/types.h"

namespace grove_k {

// The generic variant of the tiled GEMM (a module without GROVE_V_*
// parameters): kGemmTileThreads threads (8 x 8), each computing 4 x 4
// elements of a kGemmTile x kGemmTile tile of C, stepping through K
// kGemmTileK at a time. Variants spell their own (jit/kernel_config.h).
enum { kGemmTile = 32, kGemmTileK = 16, kGemmTileThreads = 64 };

// C = epilogue(alpha * op(A) op(B) + beta * C + bias), per batch: the
// product `g` as the gemv kernel takes it (GemvParams), accumulated in f32
// in order of k. math (f32 data only): 0 exact, 1 tf32, 2 bf16, 3 f16: A and
// B rounded so before the multiply (GemmDesc::Math). epilogue: 0 none, 1
// ReLU, 2 GELU (erf). Every size and stride is read when the kernel runs,
// so one launch (a CUDA graph's node) serves any problem whose buffers it
// may touch.
struct GemmTiledParams {
  GemvParams g;
  int math, epilogue;
};

}  // namespace grove_k

#endif  // GROVE_JIT_KERNELS_GEMM_TILED_PARAMS_H_
