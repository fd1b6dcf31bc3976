// CPU reference kernels of the math ops. f16/bf16 compute in float, as the
// elementwise kernels do; integer Neg/Abs/Pow wrap (two's complement) instead
// of overflowing, and float -> integer results truncate and saturate like
// Cast. NaN propagates through Min, Max and Clip as numpy's does. Integer
// Mod by 0 gives 0 as numpy's does, BitShift past the bit width gives 0, and
// Dropout only infers (training with a ratio above 0 is Unimplemented).
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <numbers>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "lib/backends/common/elementwise_checks.h"
#include "lib/backends/common/prepared.h"
#include "lib/backends/cpu/binary_kernel.h"
#include "lib/backends/cpu/broadcast_plan.h"
#include "lib/backends/cpu/cast.h"
#include "lib/backends/cpu/cpu_kernels.h"
#include "lib/backends/cpu/parallel_for.h"
#include "lib/backends/cpu/workspace_layout.h"
#include "lib/ir/element_types.h"

namespace grove::cpu {

using ir::BFloat16;
using ir::BFloat16ToFloat;
using ir::Bool8;
using ir::ComputeT;
using ir::ConvertElement;
using ir::FloatTypes;
using ir::FromCompute;
using ir::Half;
using ir::HalfToFloat;
using ir::NumericTypes;
using ir::SaturatingTruncate;
using ir::ToCompute;
using ir::TypeList;
using ir::Visit;

namespace {

using ir::KernelContext;

using SignedTypes = TypeList<float, double, Half, BFloat16, int64_t, int32_t, int16_t, int8_t>;
using PowBaseTypes = TypeList<float, double, Half, BFloat16, int32_t, int64_t>;

template <typename C>
C WrappingNeg(C x) {
  if constexpr (std::is_integral_v<C>) {
    using U = std::make_unsigned_t<C>;
    return static_cast<C>(U{0} - static_cast<U>(x));
  } else {
    return -x;
  }
}

// ---------------------------------------------------------------------------
// Unary ops. Each is constructed from the node's attributes once, by the
// prepare.
// ---------------------------------------------------------------------------

struct SqrtOp {
  explicit SqrtOp(const ir::Attributes&) {}
  template <typename C>
  C operator()(C x) const {
    return std::sqrt(x);
  }
};
struct ExpOp {
  explicit ExpOp(const ir::Attributes&) {}
  template <typename C>
  C operator()(C x) const {
    return std::exp(x);
  }
};
struct LogOp {
  explicit LogOp(const ir::Attributes&) {}
  template <typename C>
  C operator()(C x) const {
    return std::log(x);
  }
};
struct ReciprocalOp {
  explicit ReciprocalOp(const ir::Attributes&) {}
  template <typename C>
  C operator()(C x) const {
    return C(1) / x;
  }
};
// Integer inputs (ONNX allows them) go through double and truncate.
struct ErfOp {
  explicit ErfOp(const ir::Attributes&) {}
  template <typename C>
  C operator()(C x) const {
    if constexpr (std::is_integral_v<C>) {
      return SaturatingTruncate<C>(std::erf(static_cast<double>(x)));
    } else {
      return std::erf(x);
    }
  }
};
struct FloorOp {
  static constexpr bool kCheap = true;
  explicit FloorOp(const ir::Attributes&) {}
  template <typename C>
  C operator()(C x) const {
    return std::floor(x);
  }
};
struct CeilOp {
  static constexpr bool kCheap = true;
  explicit CeilOp(const ir::Attributes&) {}
  template <typename C>
  C operator()(C x) const {
    return std::ceil(x);
  }
};
// ONNX Round: halves go to the even neighbour (nearbyint in the default
// rounding mode), as numpy.round.
struct RoundOp {
  static constexpr bool kCheap = true;
  explicit RoundOp(const ir::Attributes&) {}
  template <typename C>
  C operator()(C x) const {
    return std::nearbyint(x);
  }
};
struct NegOp {
  static constexpr bool kCheap = true;
  explicit NegOp(const ir::Attributes&) {}
  template <typename C>
  C operator()(C x) const {
    return WrappingNeg(x);
  }
};
struct AbsOp {
  static constexpr bool kCheap = true;
  explicit AbsOp(const ir::Attributes&) {}
  template <typename C>
  C operator()(C x) const {
    if constexpr (std::is_unsigned_v<C>) {
      return x;
    } else if constexpr (std::is_integral_v<C>) {
      return x < 0 ? WrappingNeg(x) : x;
    } else {
      return std::fabs(x);
    }
  }
};
// log(1 + e^x) without overflowing e^x for large x.
struct SoftplusOp {
  explicit SoftplusOp(const ir::Attributes&) {}
  template <typename C>
  C operator()(C x) const {
    return x > C(0) ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x));
  }
};
struct LeakyReluOp {
  static constexpr bool kCheap = true;
  explicit LeakyReluOp(const ir::Attributes& attrs) : alpha(attrs.GetFloat("alpha", 0.01)) {}
  template <typename C>
  C operator()(C x) const {
    return x < C(0) ? static_cast<C>(alpha) * x : x;
  }
  double alpha;
};
// expm1 keeps the precision of alpha*(e^x - 1) for x near 0.
struct EluOp {
  explicit EluOp(const ir::Attributes& attrs) : alpha(attrs.GetFloat("alpha", 1.0)) {}
  template <typename C>
  C operator()(C x) const {
    return x < C(0) ? static_cast<C>(alpha) * std::expm1(x) : x;
  }
  double alpha;
};
struct HardSigmoidOp {
  static constexpr bool kCheap = true;
  explicit HardSigmoidOp(const ir::Attributes& attrs)
      : alpha(attrs.GetFloat("alpha", 0.2)), beta(attrs.GetFloat("beta", 0.5)) {}
  template <typename C>
  C operator()(C x) const {
    const C y = static_cast<C>(alpha) * x + static_cast<C>(beta);
    return y < C(0) ? C(0) : (y > C(1) ? C(1) : y);
  }
  double alpha, beta;
};
struct HardSwishOp {
  static constexpr bool kCheap = true;
  explicit HardSwishOp(const ir::Attributes&) {}
  template <typename C>
  C operator()(C x) const {
    const C y = x / C(6) + C(0.5);
    return x * (y < C(0) ? C(0) : (y > C(1) ? C(1) : y));
  }
};
// 'approximate' was checked by the shape function; anything but "tanh" is
// the exact form. Both are written so that nothing cancels for negative x:
// 1 + erf(-t) = erfc(t), and 0.5 * (1 + tanh(z)) = 1 / (1 + e^(-2z)).
struct GeluOp {
  explicit GeluOp(const ir::Attributes& attrs) : tanh(attrs.GetString("approximate", "none") == "tanh") {}
  template <typename C>
  C operator()(C x) const {
    if (tanh) {
      const C k = static_cast<C>(0.7978845608028654);  // sqrt(2 / pi)
      const C z = k * (x + static_cast<C>(0.044715) * x * x * x);
      return x / (C(1) + std::exp(C(-2) * z));
    }
    return C(0.5) * x * std::erfc(x * static_cast<C>(-0.7071067811865476));  // -x / sqrt(2)
  }
  bool tanh;
};

template <typename Op, typename T>
void RunUnary(const KernelContext& ctx, const Op& op) {
  const TensorView& x = ctx.input(0);
  const T* in = x.as<const T>();
  T* out = ctx.output(0).as<T>();
  ParallelFor(ctx, x.num_elements(), GrainOf<Op>(), [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) out[i] = FromCompute<T>(op(ToCompute(in[i])));
  });
}

// The op made from the attributes and the loop of the input's dtype, once.
template <typename Op, typename Types>
absl::StatusOr<ir::PreparedKernel> PrepareUnary(const KernelContext& ctx) {
  const TensorView& x = ctx.input(0);
  if (absl::Status s = CheckOutputLike(ctx, x.dtype, x.shape); !s.ok()) return s;
  UnaryParams<Op> p{Op(ctx.attrs())};
  absl::Status s = Visit(Types{}, ctx, x.dtype, [&](auto tag) -> absl::Status {
    p.run = &RunUnary<Op, typename decltype(tag)::type>;
    return absl::OkStatus();
  });
  if (!s.ok()) return s;
  return backends::MakePrepared(std::move(p));
}

struct NotOp {
  explicit NotOp(const ir::Attributes&) {}
};

void RunNot(const KernelContext& ctx, const NotOp&) {
  const TensorView& x = ctx.input(0);
  const uint8_t* in = x.as<const uint8_t>();
  uint8_t* out = ctx.output(0).as<uint8_t>();
  ParallelFor(ctx, x.num_elements(), kCheapGrain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) out[i] = in[i] == 0 ? 1 : 0;
  });
}

absl::StatusOr<ir::PreparedKernel> PrepareNot(const KernelContext& ctx) {
  if (absl::Status s = backends::CheckNotInputs(ctx); !s.ok()) return s;
  return backends::MakePrepared(UnaryParams<NotOp>{NotOp(ctx.attrs()), &RunNot});
}

// ---------------------------------------------------------------------------
// Binary ops.
// ---------------------------------------------------------------------------

struct GreaterOrEqualOp {
  template <typename C>
  static bool Apply(C a, C b) {
    return a >= b;
  }
};
struct LessOrEqualOp {
  template <typename C>
  static bool Apply(C a, C b) {
    return a <= b;
  }
};

template <typename Op, typename T>
absl::Status RunCompare(const KernelContext& ctx, const BinaryParams& p) {
  RunBinary<T, T, Bool8>(ctx, p.plan, [](T x, T y) {
    return Bool8{static_cast<uint8_t>(Op::Apply(ToCompute(x), ToCompute(y)) ? 1 : 0)};
  });
  return absl::OkStatus();
}

template <typename Op>
absl::StatusOr<ir::PreparedKernel> PrepareCompare(const KernelContext& ctx) {
  if (absl::Status s = CheckSameInputDTypes(ctx, 0, 1); !s.ok()) return s;
  if (absl::Status s = CheckOutputDType(ctx, DType::kBool); !s.ok()) return s;
  absl::StatusOr<BroadcastPlan<2>> plan = MakeBinaryPlan(ctx);
  if (!plan.ok()) return plan.status();
  BinaryParams p{*std::move(plan)};
  absl::Status s = Visit(NumericTypes{}, ctx, ctx.input(0).dtype, [&](auto tag) -> absl::Status {
    p.run = &RunCompare<Op, typename decltype(tag)::type>;
    return absl::OkStatus();
  });
  if (!s.ok()) return s;
  return backends::MakePrepared(std::move(p));
}

struct AndOp {
  static bool Apply(bool a, bool b) { return a && b; }
};
struct OrOp {
  static bool Apply(bool a, bool b) { return a || b; }
};
struct XorOp {
  static bool Apply(bool a, bool b) { return a != b; }
};

template <typename Op>
absl::Status RunLogical(const KernelContext& ctx, const BinaryParams& p) {
  RunBinary<Bool8, Bool8, Bool8>(ctx, p.plan, [](Bool8 a, Bool8 b) {
    return Bool8{static_cast<uint8_t>(Op::Apply(a.bits != 0, b.bits != 0) ? 1 : 0)};
  });
  return absl::OkStatus();
}

template <typename Op>
absl::StatusOr<ir::PreparedKernel> PrepareLogical(const KernelContext& ctx) {
  if (absl::Status s = backends::CheckLogicalInputs(ctx); !s.ok()) return s;
  absl::StatusOr<BroadcastPlan<2>> plan = MakeBinaryPlan(ctx);
  if (!plan.ok()) return plan.status();
  return backends::MakePrepared(BinaryParams{*std::move(plan), &RunLogical<Op>});
}

// Integer base to an integer exponent, exactly (wrapping). A negative
// exponent gives what truncating the real result gives: 1 and -1 keep their
// magnitude, 0 saturates like 1/0, every other base gives 0.
template <typename C>
C IntegerPow(C base, int64_t exponent) {
  if (exponent < 0) return SaturatingTruncate<C>(std::pow(static_cast<double>(base), static_cast<double>(exponent)));
  using U = std::make_unsigned_t<C>;
  U result = 1;
  U b = static_cast<U>(base);
  for (uint64_t e = static_cast<uint64_t>(exponent); e != 0; e >>= 1) {
    if (e & 1) result = static_cast<U>(result * b);
    b = static_cast<U>(b * b);
  }
  return static_cast<C>(result);
}

// numpy's promotion: a float base computes in the wider of its compute type
// and a float exponent's; an integer base with a float exponent computes in
// double, then truncates to the base's dtype (ONNX's reference casts back).
template <typename B, typename E>
B PowElement(B base, E exponent) {
  using CB = ComputeT<B>;
  using CE = ComputeT<E>;
  const CB b = ToCompute(base);
  const CE e = ToCompute(exponent);
  if constexpr (std::is_floating_point_v<CB>) {
    using W = std::conditional_t<std::is_same_v<CE, double>, double, CB>;
    return FromCompute<B>(static_cast<CB>(std::pow(static_cast<W>(b), static_cast<W>(e))));
  } else if constexpr (std::is_integral_v<CE>) {
    return IntegerPow<CB>(b, static_cast<int64_t>(e));
  } else {
    return SaturatingTruncate<CB>(std::pow(static_cast<double>(b), static_cast<double>(e)));
  }
}

// True when the exponent is one element equal to `value`. For 2, x*x is
// what pow gives (both correctly rounded), without the call; for 3 (a
// tanh-approximated GELU's x^3), an f32 x cubed in double, rounded once to
// float, is too (x*x is exact in double).
template <typename E>
bool ExponentIs(const TensorView& y, double value) {
  return y.num_elements() == 1 && static_cast<double>(ToCompute(y.as<const E>()[0])) == value;
}

// (Whether the exponent is 2 or 3 is read per run: it may be an activation.)
template <typename B, typename E>
absl::Status RunPow(const KernelContext& ctx, const BinaryParams& p) {
  if constexpr (std::is_floating_point_v<ComputeT<B>>) {
    if (ExponentIs<E>(ctx.input(1), 2.0)) {
      RunBinary<B, E, B>(ctx, p.plan, [](B b, E) {
        const ComputeT<B> x = ToCompute(b);
        return FromCompute<B>(x * x);
      });
      return absl::OkStatus();
    }
  }
  if constexpr (std::is_same_v<B, float>) {
    if (ExponentIs<E>(ctx.input(1), 3.0)) {
      RunBinary<B, E, B>(ctx, p.plan, [](float b, E) {
        const double x = b;
        return static_cast<float>(x * x * x);
      });
      return absl::OkStatus();
    }
  }
  RunBinary<B, E, B>(ctx, p.plan, [](B b, E e) { return PowElement(b, e); });
  return absl::OkStatus();
}

absl::StatusOr<ir::PreparedKernel> PreparePow(const KernelContext& ctx) {
  const DType base_dtype = ctx.input(0).dtype;
  if (absl::Status s = CheckOutputDType(ctx, base_dtype); !s.ok()) return s;
  absl::StatusOr<BroadcastPlan<2>> plan = MakeBinaryPlan(ctx);
  if (!plan.ok()) return plan.status();
  BinaryParams p{*std::move(plan)};
  absl::Status s = Visit(PowBaseTypes{}, ctx, base_dtype, [&](auto base_tag) -> absl::Status {
    using B = typename decltype(base_tag)::type;
    return Visit(NumericTypes{}, ctx, ctx.input(1).dtype, [&](auto exp_tag) -> absl::Status {
      p.run = &RunPow<B, typename decltype(exp_tag)::type>;
      return absl::OkStatus();
    });
  });
  if (!s.ok()) return s;
  return backends::MakePrepared(std::move(p));
}

// ---------------------------------------------------------------------------
// Clip.
// ---------------------------------------------------------------------------

// Where each bound of Clip comes from: input 1/2 when given (opset 11+, read
// per run: it may be an activation), else the float attribute (opset 6),
// else none.
enum class ClipBound { kNone, kInput, kAttribute };

struct ClipParams {
  ClipBound lo = ClipBound::kNone, hi = ClipBound::kNone;
  double lo_attr = 0, hi_attr = 0;
  void (*run)(const KernelContext& ctx, const ClipParams& p) = nullptr;
};

absl::StatusOr<ClipBound> CheckClipBound(const KernelContext& ctx, int i, absl::string_view name, double* attr) {
  if (ctx.has_input(i)) {
    const TensorView& b = ctx.input(i);
    if (b.dtype != ctx.input(0).dtype) {
      return ctx.Error(absl::StrCat("input ", i, " (", name, ") has dtype ", DTypeName(b.dtype), "; expected ",
                                    DTypeName(ctx.input(0).dtype), " like input 0 (input)"));
    }
    if (b.num_elements() != 1) {
      return ctx.Error(
          absl::StrCat("input ", i, " (", name, ") must hold one element (a scalar); got shape ", DimsString(b.shape)));
    }
    return ClipBound::kInput;
  }
  if (ctx.attrs().Has(name)) {
    *attr = ctx.attrs().GetFloat(name, 0.0);
    return ClipBound::kAttribute;
  }
  return ClipBound::kNone;
}

template <typename T>
ComputeT<T> ClipBoundValue(const KernelContext& ctx, int i, ClipBound bound, double attr, ComputeT<T> none) {
  switch (bound) {
    case ClipBound::kInput: return ToCompute(ctx.input(i).as<const T>()[0]);
    case ClipBound::kAttribute: return ToCompute(ConvertElement<T>(attr));
    case ClipBound::kNone: break;
  }
  return none;
}

// max(x, min) then min(., max): with min > max every element becomes max,
// as ONNX specifies. NaN fails both tests and passes through.
template <typename T>
void RunClip(const KernelContext& ctx, const ClipParams& p) {
  using C = ComputeT<T>;
  const C lo = ClipBoundValue<T>(
      ctx, 1, p.lo, p.lo_attr,
      std::numeric_limits<C>::has_infinity ? -std::numeric_limits<C>::infinity() : std::numeric_limits<C>::lowest());
  const C hi = ClipBoundValue<T>(
      ctx, 2, p.hi, p.hi_attr,
      std::numeric_limits<C>::has_infinity ? std::numeric_limits<C>::infinity() : std::numeric_limits<C>::max());
  const TensorView& x = ctx.input(0);
  const T* in = x.as<const T>();
  T* out = ctx.output(0).as<T>();
  ParallelFor(ctx, x.num_elements(), kCheapGrain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      C v = ToCompute(in[i]);
      if (v < lo) v = lo;
      if (v > hi) v = hi;
      out[i] = FromCompute<T>(v);
    }
  });
}

absl::StatusOr<ir::PreparedKernel> PrepareClip(const KernelContext& ctx) {
  const TensorView& x = ctx.input(0);
  if (absl::Status s = CheckOutputLike(ctx, x.dtype, x.shape); !s.ok()) return s;
  ClipParams p;
  absl::Status s = Visit(NumericTypes{}, ctx, x.dtype, [&](auto tag) -> absl::Status {
    p.run = &RunClip<typename decltype(tag)::type>;
    return absl::OkStatus();
  });
  if (!s.ok()) return s;
  absl::StatusOr<ClipBound> lo = CheckClipBound(ctx, 1, "min", &p.lo_attr);
  if (!lo.ok()) return lo.status();
  absl::StatusOr<ClipBound> hi = CheckClipBound(ctx, 2, "max", &p.hi_attr);
  if (!hi.ok()) return hi.status();
  p.lo = *lo;
  p.hi = *hi;
  return backends::MakePrepared(std::move(p));
}

absl::Status ClipKernel(KernelContext& ctx) {
  const ClipParams* p = backends::PreparedParams<ClipParams>(ctx);
  if (p == nullptr) return backends::NotPrepared(ctx, "CPU");
  p->run(ctx, *p);
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------
// Variadic Min Max Sum Mean: the inputs are folded one at a time into an
// accumulator shaped like the output (the output itself unless f16/bf16,
// which accumulate in float).
// ---------------------------------------------------------------------------

struct MinOp {
  static constexpr bool kMean = false;
  template <typename C>
  static C Apply(C acc, C x) {
    if constexpr (std::is_floating_point_v<C>) {
      if (std::isnan(acc)) return acc;
      if (std::isnan(x)) return x;
    }
    return x < acc ? x : acc;
  }
};
struct MaxOp {
  static constexpr bool kMean = false;
  template <typename C>
  static C Apply(C acc, C x) {
    if constexpr (std::is_floating_point_v<C>) {
      if (std::isnan(acc)) return acc;
      if (std::isnan(x)) return x;
    }
    return x > acc ? x : acc;
  }
};
struct SumOp {
  static constexpr bool kMean = false;
  template <typename C>
  static C Apply(C acc, C x) {
    return acc + x;
  }
};
struct MeanOp {
  static constexpr bool kMean = true;
  template <typename C>
  static C Apply(C acc, C x) {
    return acc + x;
  }
};

// Input k folded into acc; the first input (first = true) initialises it.
template <typename Op, typename T>
void FoldInput(const KernelContext& ctx, const BroadcastPlan<2>& plan, const T* x, ComputeT<T>* acc, bool first) {
  const int64_t step = plan.row_steps()[1];
  ParallelFor(ctx, plan.num_elements(), kCheapGrain, [&](int64_t begin, int64_t end) {
    plan.ForEachRowIn(begin, end, [&](int64_t o, const std::array<int64_t, 2>& in, int64_t len) {
      ComputeT<T>* a = acc + o;
      const T* xr = x + in[1];
      if (first) {
        if (step == 1) {
          for (int64_t i = 0; i < len; ++i) a[i] = ToCompute(xr[i]);
        } else {
          const ComputeT<T> v = ToCompute(*xr);
          for (int64_t i = 0; i < len; ++i) a[i] = v;
        }
      } else if (step == 1) {
        for (int64_t i = 0; i < len; ++i) a[i] = Op::Apply(a[i], ToCompute(xr[i]));
      } else {
        const ComputeT<T> v = ToCompute(*xr);
        for (int64_t i = 0; i < len; ++i) a[i] = Op::Apply(a[i], v);
      }
    });
  });
}

// One plan per input against the output; f16/bf16 accumulate in the
// workspace.
struct VariadicParams {
  std::vector<BroadcastPlan<2>> plans;
  void (*run)(const KernelContext& ctx, const VariadicParams& p) = nullptr;
};

template <typename Op, typename T>
void RunVariadic(const KernelContext& ctx, const VariadicParams& p) {
  using C = ComputeT<T>;
  TensorView& y = ctx.output(0);
  const int n = ctx.num_inputs();
  const int64_t count = y.num_elements();
  C* acc;
  if constexpr (std::is_same_v<T, C>) {
    acc = y.as<T>();
  } else {
    acc = WorkspaceCursor(ctx.workspace()).Take<C>(count);
  }
  for (int k = 0; k < n; ++k) FoldInput<Op>(ctx, p.plans[k], ctx.input(k).as<const T>(), acc, k == 0);
  if constexpr (Op::kMean) {
    for (int64_t i = 0; i < count; ++i) acc[i] /= static_cast<C>(n);
  }
  if constexpr (!std::is_same_v<T, C>) {
    T* out = y.as<T>();
    for (int64_t i = 0; i < count; ++i) out[i] = FromCompute<T>(acc[i]);
  }
}

template <typename Op, typename Types>
absl::StatusOr<ir::PreparedKernel> PrepareVariadic(const KernelContext& ctx) {
  const TensorView& y = ctx.output(0);
  // Each pairwise plan below checks one input against the output; this
  // checks that the output is no larger than all of them together.
  if (absl::Status s = backends::CheckVariadicInputs(ctx); !s.ok()) return s;
  VariadicParams p;
  WorkspaceLayout layout;
  absl::Status s = Visit(Types{}, ctx, y.dtype, [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    using C = ComputeT<T>;
    if constexpr (!std::is_same_v<T, C>) layout.Add<C>(y.num_elements());
    p.run = &RunVariadic<Op, T>;
    return absl::OkStatus();
  });
  if (!s.ok()) return s;
  for (int k = 0; k < ctx.num_inputs(); ++k) {
    absl::StatusOr<BroadcastPlan<2>> plan = BroadcastPlan<2>::Make(y.shape, {&y.shape, &ctx.input(k).shape});
    if (!plan.ok()) return ctx.Error(plan.status().message());
    p.plans.push_back(*std::move(plan));
  }
  return backends::MakePrepared(std::move(p), layout.bytes());
}

template <typename Op>
absl::Status VariadicKernel(KernelContext& ctx) {
  const VariadicParams* p = backends::PreparedParams<VariadicParams>(ctx);
  if (p == nullptr) return backends::NotPrepared(ctx, "CPU");
  p->run(ctx, *p);
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------
// CastLike.
// ---------------------------------------------------------------------------

struct CastLikeParams {
  CastFn convert = nullptr;
};

absl::StatusOr<ir::PreparedKernel> PrepareCastLike(const KernelContext& ctx) {
  const TensorView& in = ctx.input(0);
  if (absl::Status s = CheckOutputLike(ctx, ctx.input(1).dtype, in.shape); !s.ok()) return s;
  absl::StatusOr<CastFn> convert = SelectCast(ctx, in.dtype, ctx.output(0).dtype);
  if (!convert.ok()) return convert.status();
  return backends::MakePrepared(CastLikeParams{*convert});
}

absl::Status CastLikeKernel(KernelContext& ctx) {
  const CastLikeParams* p = backends::PreparedParams<CastLikeParams>(ctx);
  if (p == nullptr) return backends::NotPrepared(ctx, "CPU");
  return p->convert(ctx, ctx.input(0), ctx.output(0));
}

// ---------------------------------------------------------------------------
// Trigonometric and hyperbolic functions, Softsign Selu Celu ThresholdedRelu
// Shrink Sign, IsNaN IsInf, PRelu, Mod, BitShift, Dropout (inference) and the
// window generators.
// ---------------------------------------------------------------------------

// BitShift's element types (ONNX opset 11: unsigned integers).
using UnsignedTypes = TypeList<uint64_t, uint32_t, uint16_t, uint8_t>;

#define GROVE_MATH_UNARY_FN(Name, fn)           \
  struct Name {                                 \
    explicit Name(const ir::Attributes&) {}     \
    template <typename C>                       \
    C operator()(C x) const {                   \
      return std::fn(x);                        \
    }                                           \
  };
GROVE_MATH_UNARY_FN(SinOp, sin)
GROVE_MATH_UNARY_FN(CosOp, cos)
GROVE_MATH_UNARY_FN(TanOp, tan)
GROVE_MATH_UNARY_FN(AsinOp, asin)
GROVE_MATH_UNARY_FN(AcosOp, acos)
GROVE_MATH_UNARY_FN(AtanOp, atan)
GROVE_MATH_UNARY_FN(SinhOp, sinh)
GROVE_MATH_UNARY_FN(CoshOp, cosh)
GROVE_MATH_UNARY_FN(AsinhOp, asinh)
GROVE_MATH_UNARY_FN(AcoshOp, acosh)
GROVE_MATH_UNARY_FN(AtanhOp, atanh)
#undef GROVE_MATH_UNARY_FN

// x / (1 + |x|), whose limit at the infinities is +-1 (the quotient itself
// would be inf / inf).
struct SoftsignOp {
  explicit SoftsignOp(const ir::Attributes&) {}
  template <typename C>
  C operator()(C x) const {
    if (std::isinf(x)) return std::copysign(C(1), x);
    return x / (C(1) + std::fabs(x));
  }
};
// ONNX's defaults are the float values of the constants in the SELU paper.
struct SeluOp {
  explicit SeluOp(const ir::Attributes& attrs)
      : alpha(attrs.GetFloat("alpha", 1.6732631921768188)), gamma(attrs.GetFloat("gamma", 1.0507010221481323)) {}
  template <typename C>
  C operator()(C x) const {
    return static_cast<C>(gamma) * (x > C(0) ? x : static_cast<C>(alpha) * std::expm1(x));
  }
  double alpha, gamma;
};
// max(0, x) + min(0, alpha * (e^(x/alpha) - 1)); the shape function refused
// alpha = 0.
struct CeluOp {
  explicit CeluOp(const ir::Attributes& attrs) : alpha(attrs.GetFloat("alpha", 1.0)) {}
  template <typename C>
  C operator()(C x) const {
    if (!(x < C(0))) return x;  // NaN passes through
    const C a = static_cast<C>(alpha);
    const C y = a * std::expm1(x / a);
    return y < C(0) ? y : C(0);
  }
  double alpha;
};
struct ThresholdedReluOp {
  static constexpr bool kCheap = true;
  explicit ThresholdedReluOp(const ir::Attributes& attrs) : alpha(attrs.GetFloat("alpha", 1.0)) {}
  template <typename C>
  C operator()(C x) const {
    return x > static_cast<C>(alpha) ? x : C(0);
  }
  double alpha;
};
// Computes in double, then converts like Cast (integers truncate and
// saturate), as ONNX's reference casts the float result back.
struct ShrinkOp {
  static constexpr bool kCheap = true;
  explicit ShrinkOp(const ir::Attributes& attrs)
      : bias(attrs.GetFloat("bias", 0.0)), lambd(attrs.GetFloat("lambd", 0.5)) {}
  template <typename C>
  C operator()(C x) const {
    const double v = static_cast<double>(x);
    const double y = v < -lambd ? v + bias : (v > lambd ? v - bias : 0.0);
    return ConvertElement<C>(y);
  }
  double bias, lambd;
};
// -1, 0 or 1; NaN stays NaN.
struct SignOp {
  static constexpr bool kCheap = true;
  explicit SignOp(const ir::Attributes&) {}
  template <typename C>
  C operator()(C x) const {
    if constexpr (std::is_floating_point_v<C>) {
      if (std::isnan(x)) return x;
    }
    if (x > C(0)) return C(1);
    if constexpr (std::is_signed_v<C>) {
      if (x < C(0)) return C(-1);
    }
    return C(0);
  }
};

struct IsNaNOp {
  static constexpr bool kCheap = true;
  explicit IsNaNOp(const ir::Attributes&) {}
  template <typename C>
  bool operator()(C x) const {
    return std::isnan(x);
  }
};
struct IsInfOp {
  static constexpr bool kCheap = true;
  explicit IsInfOp(const ir::Attributes& attrs)
      : negative(attrs.GetInt("detect_negative", 1) != 0), positive(attrs.GetInt("detect_positive", 1) != 0) {}
  template <typename C>
  bool operator()(C x) const {
    return std::isinf(x) && (x > C(0) ? positive : negative);
  }
  bool negative, positive;
};

// Float input, bool output of the same shape.
template <typename Op, typename T>
void RunFloatPredicate(const KernelContext& ctx, const Op& op) {
  const TensorView& x = ctx.input(0);
  const T* in = x.as<const T>();
  uint8_t* out = ctx.output(0).as<uint8_t>();
  ParallelFor(ctx, x.num_elements(), GrainOf<Op>(), [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) out[i] = op(ToCompute(in[i])) ? 1 : 0;
  });
}

template <typename Op>
absl::StatusOr<ir::PreparedKernel> PrepareFloatPredicate(const KernelContext& ctx) {
  const TensorView& x = ctx.input(0);
  if (absl::Status s = CheckOutputLike(ctx, DType::kBool, x.shape); !s.ok()) return s;
  UnaryParams<Op> p{Op(ctx.attrs())};
  absl::Status s = Visit(FloatTypes{}, ctx, x.dtype, [&](auto tag) -> absl::Status {
    p.run = &RunFloatPredicate<Op, typename decltype(tag)::type>;
    return absl::OkStatus();
  });
  if (!s.ok()) return s;
  return backends::MakePrepared(std::move(p));
}

template <typename T>
absl::Status RunPRelu(const KernelContext& ctx, const BinaryParams& p) {
  RunBinary<T, T, T>(ctx, p.plan, [](T a, T b) {
    const ComputeT<T> v = ToCompute(a);
    if constexpr (std::is_integral_v<ComputeT<T>>) {
      using U = std::make_unsigned_t<ComputeT<T>>;  // wraps instead of overflowing
      return v < 0 ? static_cast<T>(static_cast<U>(v) * static_cast<U>(ToCompute(b))) : a;
    } else {
      return v < 0 ? FromCompute<T>(v * ToCompute(b)) : a;
    }
  });
  return absl::OkStatus();
}

// slope broadcasts to X; the output has X's shape, which the plan checks
// slope against.
absl::StatusOr<ir::PreparedKernel> PreparePRelu(const KernelContext& ctx) {
  const TensorView& x = ctx.input(0);
  if (absl::Status s = CheckSameInputDTypes(ctx, 0, 1); !s.ok()) return s;
  if (absl::Status s = CheckOutputLike(ctx, x.dtype, x.shape); !s.ok()) return s;
  absl::StatusOr<BroadcastPlan<2>> plan = MakeBinaryPlan(ctx);
  if (!plan.ok()) return plan.status();
  BinaryParams p{*std::move(plan)};
  using PReluTypes = TypeList<float, double, Half, BFloat16, int32_t, int64_t>;
  absl::Status s = Visit(PReluTypes{}, ctx, x.dtype, [&](auto tag) -> absl::Status {
    p.run = &RunPRelu<typename decltype(tag)::type>;
    return absl::OkStatus();
  });
  if (!s.ok()) return s;
  return backends::MakePrepared(std::move(p));
}

// fmod = 1: the remainder has the dividend's sign (C fmod, truncating
// division); fmod = 0: the divisor's sign (Python and numpy mod, flooring
// division). An integer divisor of 0 gives 0, as numpy does.
template <typename C>
C ModElement(C a, C b, bool fmod) {
  if constexpr (std::is_floating_point_v<C>) {
    C r = std::fmod(a, b);
    if (fmod) return r;
    if (r != C(0)) {
      if ((r < C(0)) != (b < C(0))) r += b;
    } else {
      r = std::copysign(C(0), b);
    }
    return r;
  } else {
    if (b == 0) return 0;
    if constexpr (std::is_signed_v<C>) {
      if (b == C(-1)) return 0;  // min % -1 overflows in C++
      C r = static_cast<C>(a % b);
      if (!fmod && r != 0 && ((r < 0) != (b < 0))) r = static_cast<C>(r + b);
      return r;
    } else {
      return static_cast<C>(a % b);
    }
  }
}

template <typename T, bool kFmod>
absl::Status RunMod(const KernelContext& ctx, const BinaryParams& p) {
  RunBinary<T, T, T>(ctx, p.plan,
                     [](T a, T b) { return FromCompute<T>(ModElement(ToCompute(a), ToCompute(b), kFmod)); });
  return absl::OkStatus();
}

absl::StatusOr<ir::PreparedKernel> PrepareMod(const KernelContext& ctx) {
  if (absl::Status s = CheckSameInputDTypes(ctx, 0, 1); !s.ok()) return s;
  if (absl::Status s = CheckOutputDType(ctx, ctx.input(0).dtype); !s.ok()) return s;
  absl::StatusOr<BroadcastPlan<2>> plan = MakeBinaryPlan(ctx);
  if (!plan.ok()) return plan.status();
  const bool fmod = ctx.attrs().GetInt("fmod", 0) != 0;
  BinaryParams p{*std::move(plan)};
  absl::Status s = Visit(NumericTypes{}, ctx, ctx.input(0).dtype, [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    p.run = fmod ? &RunMod<T, true> : &RunMod<T, false>;
    return absl::OkStatus();
  });
  if (!s.ok()) return s;
  return backends::MakePrepared(std::move(p));
}

// Shifting by the bit width or more gives 0 (numpy's left_shift and
// right_shift do the same), where C++ leaves it undefined.
template <typename T, bool kLeft>
absl::Status RunBitShift(const KernelContext& ctx, const BinaryParams& p) {
  constexpr uint64_t kBits = sizeof(T) * 8;
  RunBinary<T, T, T>(ctx, p.plan, [](T x, T y) -> T {
    if (static_cast<uint64_t>(y) >= kBits) return 0;
    return kLeft ? static_cast<T>(static_cast<uint64_t>(x) << y) : static_cast<T>(x >> y);
  });
  return absl::OkStatus();
}

absl::StatusOr<ir::PreparedKernel> PrepareBitShift(const KernelContext& ctx) {
  if (absl::Status s = CheckSameInputDTypes(ctx, 0, 1); !s.ok()) return s;
  if (absl::Status s = CheckOutputDType(ctx, ctx.input(0).dtype); !s.ok()) return s;
  const std::string direction = ctx.attrs().GetString("direction", "");
  if (direction != "LEFT" && direction != "RIGHT") {
    return ctx.Error(absl::StrCat("attribute 'direction' is '", direction, "'; expected 'LEFT' or 'RIGHT'"));
  }
  const bool left = direction == "LEFT";
  absl::StatusOr<BroadcastPlan<2>> plan = MakeBinaryPlan(ctx);
  if (!plan.ok()) return plan.status();
  BinaryParams p{*std::move(plan)};
  absl::Status s = Visit(UnsignedTypes{}, ctx, ctx.input(0).dtype, [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    p.run = left ? &RunBitShift<T, true> : &RunBitShift<T, false>;
    return absl::OkStatus();
  });
  if (!s.ok()) return s;
  return backends::MakePrepared(std::move(p));
}

// One element of a float tensor as double; false when it does not hold one.
bool ReadFloatScalar(const TensorView& v, double* out) {
  if (v.num_elements() != 1) return false;
  switch (v.dtype) {
    case DType::kF32: *out = v.as<const float>()[0]; return true;
    case DType::kF64: *out = v.as<const double>()[0]; return true;
    case DType::kF16: *out = HalfToFloat(v.as<const Half>()[0]); return true;
    case DType::kBF16: *out = BFloat16ToFloat(v.as<const BFloat16>()[0]); return true;
    default: return false;
  }
}

// Inference: output = data and mask all true. training_mode true with a
// ratio of 0 is the same; with a ratio above 0 the result would be random,
// which grove, an inference runtime, does not do. The checks run once when
// the plan knows ratio and training_mode (inputs 1 and 2: weights, folded
// values, or absent), per run otherwise (`planned` false).
absl::Status CheckDropout(const KernelContext& ctx) {
  const TensorView& x = ctx.input(0);
  bool training = false;
  if (ctx.has_input(2)) {
    const TensorView& mode = ctx.input(2);
    if (mode.dtype != DType::kBool || mode.num_elements() != 1) {
      return ctx.Error(absl::StrCat("input 2 (training_mode) must be one bool; got ", DTypeName(mode.dtype), " ",
                                    DimsString(mode.shape)));
    }
    training = mode.as<const uint8_t>()[0] != 0;
  }
  if (training) {
    double ratio = 0.5;
    if (ctx.has_input(1) && !ReadFloatScalar(ctx.input(1), &ratio)) {
      return ctx.Error(absl::StrCat("input 1 (ratio) must be one float; got ", DTypeName(ctx.input(1).dtype), " ",
                                    DimsString(ctx.input(1).shape)));
    }
    if (!(ratio >= 0 && ratio < 1)) {
      return ctx.Error(absl::StrCat("input 1 (ratio) is ", ratio, "; expected a value in [0, 1)"));
    }
    if (ratio > 0) {
      return absl::UnimplementedError(
          absl::StrCat(ctx.node().Describe(), ": training_mode is true with ratio ", ratio,
                       "; grove is an inference runtime and does not drop elements at random"));
    }
  }
  if (absl::Status s = Visit(FloatTypes{}, ctx, x.dtype, [](auto) { return absl::OkStatus(); }); !s.ok()) return s;
  if (absl::Status s = CheckOutputLike(ctx, x.dtype, x.shape); !s.ok()) return s;
  if (ctx.has_output(1)) {
    if (absl::Status s = CheckOutputLike(ctx, DType::kBool, x.shape, 1); !s.ok()) return s;
  }
  return absl::OkStatus();
}

struct DropoutParams {
  bool planned = false;
};

absl::StatusOr<ir::PreparedKernel> PrepareDropout(const KernelContext& ctx) {
  for (int i : {1, 2}) {
    if (ctx.has_input(i) && ctx.input(i).data == nullptr && ctx.input(i).num_elements() > 0) {
      return backends::MakePrepared(DropoutParams{});
    }
  }
  if (absl::Status s = CheckDropout(ctx); !s.ok()) return s;
  return backends::MakePrepared(DropoutParams{true});
}

absl::Status DropoutKernel(KernelContext& ctx) {
  const DropoutParams* p = backends::PreparedParams<DropoutParams>(ctx);
  if (p == nullptr) return backends::NotPrepared(ctx, "CPU");
  if (!p->planned) {
    if (absl::Status s = CheckDropout(ctx); !s.ok()) return s;
  }
  const TensorView& x = ctx.input(0);
  TensorView& y = ctx.output(0);
  if (y.data != x.data && x.num_elements() > 0) std::memcpy(y.data, x.data, x.byte_size());
  if (ctx.has_output(1) && x.num_elements() > 0) {
    std::memset(ctx.output(1).data, 1, static_cast<size_t>(x.num_elements()));
  }
  return absl::OkStatus();
}

// The window functions of n over n in [0, size), N = size (periodic) or
// size - 1 (symmetric), computed in double as ONNX defines them (a symmetric
// window of size 1 divides 0 by 0, as ONNX's does).
struct HannWindowOp {
  static double Apply(double n, double big_n) {
    const double s = std::sin(std::numbers::pi * n / big_n);
    return s * s;
  }
};
struct HammingWindowOp {
  static double Apply(double n, double big_n) {
    constexpr double kAlpha = 25.0 / 46.0;
    return kAlpha - (1.0 - kAlpha) * std::cos(2 * std::numbers::pi * n / big_n);
  }
};
struct BlackmanWindowOp {
  static double Apply(double n, double big_n) {
    return 0.42 - 0.5 * std::cos(2 * std::numbers::pi * n / big_n) + 0.08 * std::cos(4 * std::numbers::pi * n / big_n);
  }
};

// A window's size (input 0), its output check and the loop of the output's
// dtype, made once when the plan knows the size (a weight or folded value),
// per run otherwise (`planned` false).
struct WindowParams {
  bool planned = false;
  int64_t size = 0;
  double big_n = 0;
  void (*fill)(void* out, int64_t size, double big_n) = nullptr;
};

template <typename Op, typename T>
void FillWindow(void* out_data, int64_t size, double big_n) {
  T* out = static_cast<T*>(out_data);
  for (int64_t i = 0; i < size; ++i) out[i] = ConvertElement<T>(Op::Apply(static_cast<double>(i), big_n));
}

// The size's dtype and count: what the prepare can always check.
absl::Status CheckWindowSize(const KernelContext& ctx) {
  const TensorView& size_view = ctx.input(0);
  if (size_view.num_elements() != 1) {
    return ctx.Error(absl::StrCat("input 0 (size) must hold one element (a scalar); got shape ",
                                  DimsString(size_view.shape)));
  }
  if (size_view.dtype != DType::kI64 && size_view.dtype != DType::kI32) {
    return ctx.Error(absl::StrCat("input 0 (size) has dtype ", DTypeName(size_view.dtype), "; expected i32 or i64"));
  }
  return absl::OkStatus();
}

template <typename Op>
absl::StatusOr<WindowParams> MakeWindowParams(const KernelContext& ctx) {
  const TensorView& size_view = ctx.input(0);
  const int64_t size =
      size_view.dtype == DType::kI64 ? size_view.as<const int64_t>()[0] : size_view.as<const int32_t>()[0];
  if (size < 0) return ctx.Error(absl::StrCat("input 0 (size) is ", size, "; expected >= 0"));
  const DType dtype = ctx.output(0).dtype;
  if (absl::Status s = CheckOutputLike(ctx, dtype, {size}); !s.ok()) return s;
  WindowParams p;
  p.planned = true;
  p.size = size;
  const bool periodic = ctx.attrs().GetInt("periodic", 1) != 0;
  p.big_n = static_cast<double>(periodic ? size : size - 1);
  absl::Status chosen = Visit(NumericTypes{}, ctx, dtype, [&](auto tag) -> absl::Status {
    p.fill = &FillWindow<Op, typename decltype(tag)::type>;
    return absl::OkStatus();
  });
  if (!chosen.ok()) return chosen;
  return p;
}

template <typename Op>
absl::StatusOr<ir::PreparedKernel> PrepareWindow(const KernelContext& ctx) {
  if (absl::Status s = CheckWindowSize(ctx); !s.ok()) return s;
  if (ctx.input(0).data == nullptr) return backends::MakePrepared(WindowParams{});
  absl::StatusOr<WindowParams> p = MakeWindowParams<Op>(ctx);
  if (!p.ok()) return p.status();
  return backends::MakePrepared(*p);
}

template <typename Op>
absl::Status WindowKernel(KernelContext& ctx) {
  const WindowParams* prepared = backends::PreparedParams<WindowParams>(ctx);
  if (prepared == nullptr) return backends::NotPrepared(ctx, "CPU");
  WindowParams run;
  if (!prepared->planned) {
    absl::StatusOr<WindowParams> made = MakeWindowParams<Op>(ctx);
    if (!made.ok()) return made.status();
    run = *made;
  }
  const WindowParams& p = prepared->planned ? *prepared : run;
  p.fill(ctx.output(0).data, p.size, p.big_n);
  return absl::OkStatus();
}

}  // namespace

absl::Status RegisterMathKernels(ir::OpRegistry& registry) {
  const std::pair<const char*, ir::KernelDef> kernels[] = {
      {"Sqrt", {&InvokeUnary<SqrtOp>, &PrepareUnary<SqrtOp, FloatTypes>}},
      {"Exp", {&InvokeUnary<ExpOp>, &PrepareUnary<ExpOp, FloatTypes>}},
      {"Log", {&InvokeUnary<LogOp>, &PrepareUnary<LogOp, FloatTypes>}},
      {"Reciprocal", {&InvokeUnary<ReciprocalOp>, &PrepareUnary<ReciprocalOp, FloatTypes>}},
      {"Softplus", {&InvokeUnary<SoftplusOp>, &PrepareUnary<SoftplusOp, FloatTypes>}},
      {"HardSwish", {&InvokeUnary<HardSwishOp>, &PrepareUnary<HardSwishOp, FloatTypes>}},
      {"Floor", {&InvokeUnary<FloorOp>, &PrepareUnary<FloorOp, FloatTypes>}},
      {"Ceil", {&InvokeUnary<CeilOp>, &PrepareUnary<CeilOp, FloatTypes>}},
      {"Round", {&InvokeUnary<RoundOp>, &PrepareUnary<RoundOp, FloatTypes>}},
      {"Erf", {&InvokeUnary<ErfOp>, &PrepareUnary<ErfOp, NumericTypes>}},
      {"Neg", {&InvokeUnary<NegOp>, &PrepareUnary<NegOp, SignedTypes>}},
      {"Abs", {&InvokeUnary<AbsOp>, &PrepareUnary<AbsOp, NumericTypes>}},
      {"LeakyRelu", {&InvokeUnary<LeakyReluOp>, &PrepareUnary<LeakyReluOp, FloatTypes>}},
      {"Elu", {&InvokeUnary<EluOp>, &PrepareUnary<EluOp, FloatTypes>}},
      {"HardSigmoid", {&InvokeUnary<HardSigmoidOp>, &PrepareUnary<HardSigmoidOp, FloatTypes>}},
      {"Gelu", {&InvokeUnary<GeluOp>, &PrepareUnary<GeluOp, FloatTypes>}},
      {"Pow", {&InvokeBinary, &PreparePow}},
      {"Clip", {&ClipKernel, &PrepareClip}},
      {"Min", {&VariadicKernel<MinOp>, &PrepareVariadic<MinOp, NumericTypes>}},
      {"Max", {&VariadicKernel<MaxOp>, &PrepareVariadic<MaxOp, NumericTypes>}},
      {"Sum", {&VariadicKernel<SumOp>, &PrepareVariadic<SumOp, FloatTypes>}},
      {"Mean", {&VariadicKernel<MeanOp>, &PrepareVariadic<MeanOp, FloatTypes>}},
      {"GreaterOrEqual", {&InvokeBinary, &PrepareCompare<GreaterOrEqualOp>}},
      {"LessOrEqual", {&InvokeBinary, &PrepareCompare<LessOrEqualOp>}},
      {"Not", {&InvokeUnary<NotOp>, &PrepareNot}},
      {"And", {&InvokeBinary, &PrepareLogical<AndOp>}},
      {"Or", {&InvokeBinary, &PrepareLogical<OrOp>}},
      {"Xor", {&InvokeBinary, &PrepareLogical<XorOp>}},
      {"CastLike", {&CastLikeKernel, &PrepareCastLike}},
      {"Sin", {&InvokeUnary<SinOp>, &PrepareUnary<SinOp, FloatTypes>}},
      {"Cos", {&InvokeUnary<CosOp>, &PrepareUnary<CosOp, FloatTypes>}},
      {"Tan", {&InvokeUnary<TanOp>, &PrepareUnary<TanOp, FloatTypes>}},
      {"Asin", {&InvokeUnary<AsinOp>, &PrepareUnary<AsinOp, FloatTypes>}},
      {"Acos", {&InvokeUnary<AcosOp>, &PrepareUnary<AcosOp, FloatTypes>}},
      {"Atan", {&InvokeUnary<AtanOp>, &PrepareUnary<AtanOp, FloatTypes>}},
      {"Sinh", {&InvokeUnary<SinhOp>, &PrepareUnary<SinhOp, FloatTypes>}},
      {"Cosh", {&InvokeUnary<CoshOp>, &PrepareUnary<CoshOp, FloatTypes>}},
      {"Asinh", {&InvokeUnary<AsinhOp>, &PrepareUnary<AsinhOp, FloatTypes>}},
      {"Acosh", {&InvokeUnary<AcoshOp>, &PrepareUnary<AcoshOp, FloatTypes>}},
      {"Atanh", {&InvokeUnary<AtanhOp>, &PrepareUnary<AtanhOp, FloatTypes>}},
      {"Softsign", {&InvokeUnary<SoftsignOp>, &PrepareUnary<SoftsignOp, FloatTypes>}},
      {"Selu", {&InvokeUnary<SeluOp>, &PrepareUnary<SeluOp, FloatTypes>}},
      {"Celu", {&InvokeUnary<CeluOp>, &PrepareUnary<CeluOp, FloatTypes>}},
      {"ThresholdedRelu", {&InvokeUnary<ThresholdedReluOp>, &PrepareUnary<ThresholdedReluOp, FloatTypes>}},
      {"Shrink", {&InvokeUnary<ShrinkOp>, &PrepareUnary<ShrinkOp, NumericTypes>}},
      {"Sign", {&InvokeUnary<SignOp>, &PrepareUnary<SignOp, NumericTypes>}},
      {"IsNaN", {&InvokeUnary<IsNaNOp>, &PrepareFloatPredicate<IsNaNOp>}},
      {"IsInf", {&InvokeUnary<IsInfOp>, &PrepareFloatPredicate<IsInfOp>}},
      {"PRelu", {&InvokeBinary, &PreparePRelu}},
      {"Mod", {&InvokeBinary, &PrepareMod}},
      {"BitShift", {&InvokeBinary, &PrepareBitShift}},
      {"Dropout", {&DropoutKernel, &PrepareDropout}},
      {"HannWindow", {&WindowKernel<HannWindowOp>, &PrepareWindow<HannWindowOp>}},
      {"HammingWindow", {&WindowKernel<HammingWindowOp>, &PrepareWindow<HammingWindowOp>}},
      {"BlackmanWindow", {&WindowKernel<BlackmanWindowOp>, &PrepareWindow<BlackmanWindowOp>}},
  };
  for (const auto& [type, kernel] : kernels) {
    if (absl::Status s = registry.SetKernel(type, ir::Backend::kCpu, kernel); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace grove::cpu
