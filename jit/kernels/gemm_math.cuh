// How a product's f32 inputs are rounded before the multiply in a fast math
// mode (GemmDesc::Math), as the device GEMM and the emulated device's
// reference GEMM do, for kernels that sum products themselves and must give
// the GEMM's result (rnn.cuh's whole-sequence kernel).
#ifndef GROVE_JIT_KERNELS_GEMM_MATH_CUH_
#define GROVE_JIT_KERNELS_GEMM_MATH_CUH_

#include "jit/kernels/prelude.cuh"

namespace grove_k {

// `v` as math mode `math` rounds it: 0 exact, 1 tf32 (10 mantissa bits,
// round to nearest even), 2 bf16, 3 f16.
GROVE_DEVICE float gemm_input_rounded(float v, int math) {
  if (math == 1) {
    u32 x = static_cast<u32>(__float_as_int(v));
    if ((x & 0x7f800000u) != 0x7f800000u) x = (x + 0xfffu + ((x >> 13) & 1u)) & ~0x1fffu;
    return __int_as_float(static_cast<int>(x));
  }
  if (math == 2) return bf16_to_f32(f32_to_bf16(v));
  if (math == 3) return f16_to_f32(f32_to_f16(v));
  return v;
}

}  // namespace grove_k

#endif  // GROVE_JIT_KERNELS_GEMM_MATH_CUH_
