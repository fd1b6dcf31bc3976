// Parameters of jit/kernels/elementwise.cuh: the op codes shared with the
// host code (lib/backends/cuda/elementwise.cc, fusion.cc), one launch of an
// elementwise op over up to kEwMaxOperands broadcast operands, and the
// interpreted program of a fused elementwise chain.
#ifndef GROVE_JIT_KERNELS_ELEMENTWISE_PARAMS_H_
#define GROVE_JIT_KERNELS_ELEMENTWISE_PARAMS_H_

#include "jit/kernels/types.h"

namespace grove_k {

// Op codes. Unary ops read operand 0; Clip reads its bounds from the
// params (ew) or from operands (chain); binary ops read operands 0 and 1;
// variadic ops fold every operand; Where reads (bool condition, x, y).
enum EwOp : int {
  // Unary.
  kEwNeg = 0,
  kEwAbs,
  kEwExp,
  kEwLog,
  kEwSqrt,
  kEwReciprocal,
  kEwErf,
  kEwTanh,
  kEwSigmoid,
  kEwRelu,
  kEwLeakyRelu,   // fa = alpha
  kEwElu,         // fa = alpha
  kEwGelu,        // exact (erf) form
  kEwGeluTanh,    // approximate = "tanh"
  kEwHardSigmoid, // fa = alpha, fb = beta
  kEwHardSwish,
  kEwSoftplus,
  kEwSin,
  kEwCos,
  kEwTan,
  kEwAsin,
  kEwAcos,
  kEwAtan,
  kEwSinh,
  kEwCosh,
  kEwAsinh,
  kEwAcosh,
  kEwAtanh,
  kEwSoftsign,
  kEwSelu,             // fa = alpha, fb = gamma
  kEwCelu,             // fa = alpha
  kEwThresholdedRelu,  // fa = alpha
  kEwClip,        // bounds: see EwParams / EwLink
  kEwNot,         // bool
  kEwCopy,        // identity (variadic ops of one input, chain links)
  kEwLastUnary = kEwCopy,
  // Binary arithmetic (same dtype; Pow's exponent may differ, see exp_dtype).
  kEwAdd,
  kEwSub,
  kEwMul,
  kEwDiv,
  kEwPow,
  kEwMin,  // NaN-propagating, also the variadic fold
  kEwMax,
  kEwSum,  // variadic fold (Add)
  kEwMean, // variadic fold (Add), then / mean_count
  kEwLastArithmetic = kEwMean,
  // Comparisons: T x T -> bool.
  kEwEqual,
  kEwGreater,
  kEwLess,
  kEwGreaterOrEqual,
  kEwLessOrEqual,
  // Logical: bool x bool -> bool.
  kEwAnd,
  kEwOr,
  kEwXor,
  // bool x T x T -> T.
  kEwWhere,
  kEwNumOps,
};

// Element type codes for operands whose type is not the module's (Pow's
// exponent); the values are grove's DType values.
enum EwDType : int {
  kEwF32 = 1,
  kEwF64 = 2,
  kEwF16 = 3,
  kEwBF16 = 4,
  kEwI64 = 5,
  kEwI32 = 6,
  kEwI8 = 7,
  kEwU8 = 8,
  kEwBool = 9,
};

constexpr int kEwMaxOperands = 8;

// How an operand is addressed for output element i.
enum EwMode : int {
  kEwStrided = 0,     // offset_of(i, shape, strides)
  kEwContiguous = 1,  // i (the operand has the output's shape)
  kEwScalar = 2,      // 0 (one element)
};

struct EwParams {
  void* out;
  i64 n;       // output elements (> 0)
  Dims shape;  // the output's shape with dims merged
  const void* in[kEwMaxOperands];
  Strides strides[kEwMaxOperands];  // in elements, 0 along broadcast dims
  int mode[kEwMaxOperands];         // EwMode
  int num_inputs;
  int op;         // EwOp
  int simple;     // 1 when no operand is kEwStrided
  int exp_dtype;  // Pow: EwDType of operand 1
  // Float attributes (alpha, beta) and Clip bounds of float types.
  double fa, fb;
  // Clip bounds of integer types.
  i64 ia, ib;
  int has_lo, has_hi;  // Clip
  // Variadic ops over more than kEwMaxOperands inputs run in several
  // launches through an accumulator of the compute type (contiguous, n
  // elements): acc_in starts from it, acc_out writes it instead of out.
  void* acc;
  int acc_in, acc_out;
  int mean_count;  // Mean: the divisor (all inputs); 0 = do not divide
};

// A fused chain: links run in order on one value per output element.
constexpr int kEwMaxLinks = 16;
// A link's source: kEwPrev (the previous link's value), an operand index,
// or kEwNone (no such input: Clip without a bound).
constexpr int kEwPrev = -1;
constexpr int kEwNone = -2;

struct EwLink {
  int op;      // a unary or arithmetic EwOp (not variadic folds past 2)
  int src[3];  // operand 0, 1 (binary), Clip's min / max as src[1], src[2]
  float fa, fb;
};

struct EwChainParams {
  void* out;
  i64 n;
  Dims shape;
  const void* in[kEwMaxOperands];
  Strides strides[kEwMaxOperands];
  int mode[kEwMaxOperands];
  int num_inputs;
  int simple;
  int num_links;
  EwLink links[kEwMaxLinks];
};

}  // namespace grove_k

#endif  // GROVE_JIT_KERNELS_ELEMENTWISE_PARAMS_H_
