// What the reduction-shaped kernels share (reduce.cuh, softmax.cuh,
// norm.cuh): per element type the types a reduction computes in, the
// conversions back, and combines across a warp or a block. No entry points.
//
// Accumulators: f32, f16 and bf16 compute in f32, f64 in f64; integer sums
// and products wrap in 64 bits (u64), integer max/min compare in i64, and
// what needs a real number (square roots, logarithms) is f64 for integers.
#ifndef GROVE_JIT_KERNELS_REDUCE_COMMON_CUH_
#define GROVE_JIT_KERNELS_REDUCE_COMMON_CUH_

#include "jit/kernels/prelude.cuh"

namespace grove_k {
namespace rdx {

GROVE_DEVICE float inf_f32() { return __int_as_float(0x7f800000); }

struct FloatTraits {
  typedef float C;     // compare / compute type
  typedef float Sum;   // sums and products
  typedef float Real;  // sqrt, log, exp
  enum { kInt = 0, kSigned = 1 };
  static GROVE_DEVICE C lowest() { return -inf_f32(); }
  static GROVE_DEVICE C highest() { return inf_f32(); }
};
struct DoubleTraits {
  typedef double C;
  typedef double Sum;
  typedef double Real;
  enum { kInt = 0, kSigned = 1 };
  static GROVE_DEVICE C lowest() { return -static_cast<double>(inf_f32()); }
  static GROVE_DEVICE C highest() { return static_cast<double>(inf_f32()); }
};
template <long long kLo, long long kHi>
struct IntTraits {
  typedef i64 C;
  typedef u64 Sum;
  typedef double Real;
  enum { kInt = 1, kSigned = kLo < 0 ? 1 : 0 };
  static GROVE_DEVICE C lowest() { return kLo; }
  static GROVE_DEVICE C highest() { return kHi; }
};

template <typename T>
struct Tr;
template <>
struct Tr<float> : FloatTraits {};
template <>
struct Tr<f16> : FloatTraits {};
template <>
struct Tr<bf16> : FloatTraits {};
template <>
struct Tr<double> : DoubleTraits {};
template <>
struct Tr<i64> : IntTraits<-0x7fffffffffffffffLL - 1, 0x7fffffffffffffffLL> {};
template <>
struct Tr<int> : IntTraits<-2147483647LL - 1, 2147483647LL> {};
template <>
struct Tr<signed char> : IntTraits<-128, 127> {};
template <>
struct Tr<unsigned char> : IntTraits<0, 255> {};
template <>
struct Tr<bool> : IntTraits<0, 1> {};

template <typename T>
GROVE_DEVICE typename Tr<T>::C to_c(T v) {
  return static_cast<typename Tr<T>::C>(to_acc<T>(v));
}

template <typename A>
GROVE_DEVICE bool is_nan(A v) {
  return v != v;
}
// False for inf and NaN (and never for integers).
template <typename A>
GROVE_DEVICE bool is_finite(A v) {
  return v - v == A(0);
}

GROVE_DEVICE float g_sqrt(float v) { return sqrtf(v); }
GROVE_DEVICE double g_sqrt(double v) { return sqrt(v); }
GROVE_DEVICE float g_log(float v) { return logf(v); }
GROVE_DEVICE double g_log(double v) { return log(v); }
GROVE_DEVICE float g_exp(float v) { return expf(v); }
GROVE_DEVICE double g_exp(double v) { return exp(v); }

// A real result to T: floats round, integers truncate toward zero and
// saturate (NaN gives 0), as the CPU kernels' ConvertElement.
template <typename T, int kInt = Tr<T>::kInt>
struct RealOut {
  static GROVE_DEVICE T go(typename Tr<T>::Real v) { return from_acc<T, typename Tr<T>::Real>(v); }
};
template <typename T>
struct RealOut<T, 1> {
  static GROVE_DEVICE T go(double v) {
    if (v != v) return T(0);
    const double lo = static_cast<double>(Tr<T>::lowest());
    const double hi = Tr<T>::kSigned ? -lo : static_cast<double>(Tr<T>::highest()) + 1.0;
    if (v < lo) return static_cast<T>(Tr<T>::lowest());
    if (v >= hi) return static_cast<T>(Tr<T>::highest());
    return static_cast<T>(v);
  }
};
template <typename T>
GROVE_DEVICE T from_real(typename Tr<T>::Real v) {
  return RealOut<T>::go(v);
}

// Additive combine for group_all.
template <typename A>
struct AddOp {
  GROVE_DEVICE A combine(A a, A b) const { return a + b; }
};

// Combines v over the 32 lanes of a warp; every lane gets the result.
template <typename Op, typename A>
GROVE_DEVICE A warp_all(const Op& op, A v) {
  for (int o = 16; o > 0; o >>= 1) v = op.combine(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Combines v over each aligned group of `lanes` lanes (a power of two up to
// 32: the lanes that share a row of a tile); every lane of the group gets
// the result. Every lane of the warp must call it.
template <typename Op, typename A>
GROVE_DEVICE A lanes_all(const Op& op, A v, int lanes) {
  for (int o = 1; o < lanes; o <<= 1) v = op.combine(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Combines v over the block (blockDim.x a multiple of 32); every thread
// gets the result. Every thread of the block must call it.
template <typename Op, typename A>
GROVE_DEVICE A block_all(const Op& op, A v) {
  __shared__ A partials[32];
  v = warp_all(op, v);
  if (threadIdx.x % 32 == 0) partials[threadIdx.x / 32] = v;
  __syncthreads();
  const int warps = static_cast<int>((blockDim.x + 31) / 32);
  A r = partials[0];
  for (int w = 1; w < warps; ++w) r = op.combine(r, partials[w]);
  __syncthreads();  // partials may be written again
  return r;
}

// mode 0: one thread holds everything; 1: a warp; 2: the block.
template <typename Op, typename A>
GROVE_DEVICE A group_all(const Op& op, A v, int mode) {
  if (mode == 1) return warp_all(op, v);
  if (mode == 2) return block_all(op, v);
  return v;
}

// The row mode a kernel variant fixes (GROVE_V_LANES: 1 a thread per work
// item, 32 a warp, more the whole block), or the launch's own `mode` in a
// module without a variant (lanes 0): the entry passes a constant, so a
// variant's module compiles one mode only.
GROVE_DEVICE int variant_mode(int mode, int lanes) {
  return lanes == 0 ? mode : (lanes == 1 ? 0 : (lanes == 32 ? 1 : 2));
}

// The work items (rows, output elements) of a thread's group: a grid-stride
// loop `for (i64 w = g.first; w < n; w += g.step)` is uniform in the group,
// and lanes split one work item as `for (j = g.lane; j < len; j += g.width)`.
struct Group {
  i64 first, step;
  int lane, width, mode;
};
// mode 0: a thread per work item; 1: a warp; 2: a block.
GROVE_DEVICE Group make_group(int mode) {
  Group g;
  g.mode = mode;
  if (mode == 1) {
    g.first = global_thread() / 32;
    g.step = grid_threads() / 32;
    g.lane = static_cast<int>(threadIdx.x % 32);
    g.width = 32;
  } else if (mode == 2) {
    g.first = blockIdx.x;
    g.step = gridDim.x;
    g.lane = static_cast<int>(threadIdx.x);
    g.width = static_cast<int>(blockDim.x);
  } else {
    g.first = global_thread();
    g.step = grid_threads();
    g.lane = 0;
    g.width = 1;
  }
  return g;
}

// Reads element i of a float tensor of any float dtype (0 f32, 1 f64,
// 2 f16, 3 bf16) as A.
template <typename A>
GROVE_DEVICE A load_any(const void* p, int code, i64 i) {
  if (code == 1) return static_cast<A>(static_cast<const double*>(p)[i]);
  if (code == 2) return static_cast<A>(f16_to_f32(static_cast<const u16*>(p)[i]));
  if (code == 3) return static_cast<A>(bf16_to_f32(static_cast<const u16*>(p)[i]));
  return static_cast<A>(static_cast<const float*>(p)[i]);
}

}  // namespace rdx
}  // namespace grove_k

#endif  // GROVE_JIT_KERNELS_REDUCE_COMMON_CUH_
