// Plain types shared by kernel templates (jit/kernels/*.cuh) and the host
// code that launches them (lib/backends/cuda): no CUDA built-ins here, so a
// host translation unit can include this and the *_params.h files.
#ifndef GROVE_JIT_KERNELS_TYPES_H_
#define GROVE_JIT_KERNELS_TYPES_H_

namespace grove_k {

typedef long long i64;
typedef unsigned long long u64;
typedef int i32;
typedef unsigned int u32;
typedef unsigned short u16;
typedef signed char i8;
typedef unsigned char u8;

// Tensors of up to kMaxRank dims; the host side (lib/backends/cuda) merges
// dims before launching, so real ranks stay small.
constexpr int kMaxRank = 8;

// Half and bfloat16 travel as their bits; kernels compute in f32.
struct f16 {
  u16 bits;
};
struct bf16 {
  u16 bits;
};

// A shape and per-operand strides in elements (0 for broadcast dims).
struct Dims {
  int rank;
  i64 d[kMaxRank];
};
struct Strides {
  i64 s[kMaxRank];
};

}  // namespace grove_k

#endif  // GROVE_JIT_KERNELS_TYPES_H_
