// CPU reference kernels of the math ops. f16/bf16 compute in float, as the
// elementwise kernels do; integer Neg/Abs/Pow wrap (two's complement) instead
// of overflowing, and float -> integer results truncate and saturate like
// Cast. NaN propagates through Min, Max and Clip as numpy's does.
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "lib/backends/common/elementwise_checks.h"
#include "lib/backends/cpu/binary_kernel.h"
#include "lib/backends/cpu/broadcast_plan.h"
#include "lib/backends/cpu/cast.h"
#include "lib/backends/cpu/cpu_kernels.h"
#include "lib/backends/cpu/element_types.h"

namespace grove::cpu {
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
// Unary ops. Each is constructed from the node's attributes once per call.
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
  explicit FloorOp(const ir::Attributes&) {}
  template <typename C>
  C operator()(C x) const {
    return std::floor(x);
  }
};
struct CeilOp {
  explicit CeilOp(const ir::Attributes&) {}
  template <typename C>
  C operator()(C x) const {
    return std::ceil(x);
  }
};
// ONNX Round: halves go to the even neighbour (nearbyint in the default
// rounding mode), as numpy.round.
struct RoundOp {
  explicit RoundOp(const ir::Attributes&) {}
  template <typename C>
  C operator()(C x) const {
    return std::nearbyint(x);
  }
};
struct NegOp {
  explicit NegOp(const ir::Attributes&) {}
  template <typename C>
  C operator()(C x) const {
    return WrappingNeg(x);
  }
};
struct AbsOp {
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

template <typename Op, typename Types>
absl::Status UnaryKernel(KernelContext& ctx) {
  const TensorView& x = ctx.input(0);
  if (absl::Status s = CheckOutputLike(ctx, x.dtype, x.shape); !s.ok()) return s;
  const Op op(ctx.attrs());
  return Visit(Types{}, ctx, x.dtype, [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    const T* in = x.as<const T>();
    T* out = ctx.output(0).as<T>();
    const int64_t n = x.num_elements();
    for (int64_t i = 0; i < n; ++i) out[i] = FromCompute<T>(op(ToCompute(in[i])));
    return absl::OkStatus();
  });
}

absl::Status NotKernel(KernelContext& ctx) {
  if (absl::Status s = backends::CheckNotInputs(ctx); !s.ok()) return s;
  const TensorView& x = ctx.input(0);
  const uint8_t* in = x.as<const uint8_t>();
  uint8_t* out = ctx.output(0).as<uint8_t>();
  const int64_t n = x.num_elements();
  for (int64_t i = 0; i < n; ++i) out[i] = in[i] == 0 ? 1 : 0;
  return absl::OkStatus();
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

template <typename Op>
absl::Status CompareKernel(KernelContext& ctx) {
  if (absl::Status s = CheckSameInputDTypes(ctx, 0, 1); !s.ok()) return s;
  if (absl::Status s = CheckOutputDType(ctx, DType::kBool); !s.ok()) return s;
  absl::StatusOr<BroadcastPlan<2>> plan = MakeBinaryPlan(ctx);
  if (!plan.ok()) return plan.status();
  return Visit(NumericTypes{}, ctx, ctx.input(0).dtype, [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    RunBinary<T, T, Bool8>(ctx, *plan, [](T x, T y) {
      return Bool8{static_cast<uint8_t>(Op::Apply(ToCompute(x), ToCompute(y)) ? 1 : 0)};
    });
    return absl::OkStatus();
  });
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
absl::Status LogicalKernel(KernelContext& ctx) {
  if (absl::Status s = backends::CheckLogicalInputs(ctx); !s.ok()) return s;
  absl::StatusOr<BroadcastPlan<2>> plan = MakeBinaryPlan(ctx);
  if (!plan.ok()) return plan.status();
  RunBinary<Bool8, Bool8, Bool8>(ctx, *plan, [](Bool8 a, Bool8 b) {
    return Bool8{static_cast<uint8_t>(Op::Apply(a.bits != 0, b.bits != 0) ? 1 : 0)};
  });
  return absl::OkStatus();
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

// True when the exponent is one element equal to 2: x*x is what pow gives
// then (both correctly rounded), without the call.
template <typename E>
bool ExponentIsTwo(const TensorView& y) {
  return y.num_elements() == 1 && static_cast<double>(ToCompute(y.as<const E>()[0])) == 2.0;
}

absl::Status PowKernel(KernelContext& ctx) {
  const DType base_dtype = ctx.input(0).dtype;
  if (absl::Status s = CheckOutputDType(ctx, base_dtype); !s.ok()) return s;
  absl::StatusOr<BroadcastPlan<2>> plan = MakeBinaryPlan(ctx);
  if (!plan.ok()) return plan.status();
  return Visit(PowBaseTypes{}, ctx, base_dtype, [&](auto base_tag) -> absl::Status {
    using B = typename decltype(base_tag)::type;
    return Visit(NumericTypes{}, ctx, ctx.input(1).dtype, [&](auto exp_tag) -> absl::Status {
      using E = typename decltype(exp_tag)::type;
      if constexpr (std::is_floating_point_v<ComputeT<B>>) {
        if (ExponentIsTwo<E>(ctx.input(1))) {
          RunBinary<B, E, B>(ctx, *plan, [](B b, E) {
            const ComputeT<B> x = ToCompute(b);
            return FromCompute<B>(x * x);
          });
          return absl::OkStatus();
        }
      }
      RunBinary<B, E, B>(ctx, *plan, [](B b, E e) { return PowElement(b, e); });
      return absl::OkStatus();
    });
  });
}

// ---------------------------------------------------------------------------
// Clip.
// ---------------------------------------------------------------------------

// One bound of Clip: input i when given (opset 11+), else the float
// attribute (opset 6), else none.
template <typename T>
absl::Status ReadClipBound(const KernelContext& ctx, int i, absl::string_view name, bool* has, ComputeT<T>* value) {
  *has = false;
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
    *has = true;
    *value = ToCompute(b.as<const T>()[0]);
  } else if (ctx.attrs().Has(name)) {
    *has = true;
    *value = ToCompute(ConvertElement<T>(ctx.attrs().GetFloat(name, 0.0)));
  }
  return absl::OkStatus();
}

// max(x, min) then min(., max): with min > max every element becomes max,
// as ONNX specifies. NaN fails both tests and passes through.
absl::Status ClipKernel(KernelContext& ctx) {
  const TensorView& x = ctx.input(0);
  if (absl::Status s = CheckOutputLike(ctx, x.dtype, x.shape); !s.ok()) return s;
  return Visit(NumericTypes{}, ctx, x.dtype, [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    using C = ComputeT<T>;
    bool has_lo = false, has_hi = false;
    C lo{}, hi{};
    if (absl::Status s = ReadClipBound<T>(ctx, 1, "min", &has_lo, &lo); !s.ok()) return s;
    if (absl::Status s = ReadClipBound<T>(ctx, 2, "max", &has_hi, &hi); !s.ok()) return s;
    if (!has_lo)
      lo =
          std::numeric_limits<C>::has_infinity ? -std::numeric_limits<C>::infinity() : std::numeric_limits<C>::lowest();
    if (!has_hi)
      hi = std::numeric_limits<C>::has_infinity ? std::numeric_limits<C>::infinity() : std::numeric_limits<C>::max();
    const T* in = x.as<const T>();
    T* out = ctx.output(0).as<T>();
    const int64_t n = x.num_elements();
    for (int64_t i = 0; i < n; ++i) {
      C v = ToCompute(in[i]);
      if (v < lo) v = lo;
      if (v > hi) v = hi;
      out[i] = FromCompute<T>(v);
    }
    return absl::OkStatus();
  });
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
void FoldInput(const BroadcastPlan<2>& plan, const T* x, ComputeT<T>* acc, bool first) {
  const int64_t step = plan.row_steps()[1];
  plan.ForEachRow([&](int64_t o, const std::array<int64_t, 2>& in, int64_t len) {
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
}

template <typename Op, typename Types>
absl::Status VariadicKernel(KernelContext& ctx) {
  TensorView& y = ctx.output(0);
  const int n = ctx.num_inputs();
  // Each pairwise plan below checks one input against the output; this
  // checks that the output is no larger than all of them together.
  if (absl::Status s = backends::CheckVariadicInputs(ctx); !s.ok()) return s;

  return Visit(Types{}, ctx, y.dtype, [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    using C = ComputeT<T>;
    const int64_t count = y.num_elements();
    std::vector<C> scratch;
    C* acc;
    if constexpr (std::is_same_v<T, C>) {
      acc = y.as<T>();
    } else {
      scratch.resize(static_cast<size_t>(count));
      acc = scratch.data();
    }
    for (int k = 0; k < n; ++k) {
      absl::StatusOr<BroadcastPlan<2>> plan = BroadcastPlan<2>::Make(y.shape, {&y.shape, &ctx.input(k).shape});
      if (!plan.ok()) return ctx.Error(plan.status().message());
      FoldInput<Op>(*plan, ctx.input(k).as<const T>(), acc, k == 0);
    }
    if constexpr (Op::kMean) {
      for (int64_t i = 0; i < count; ++i) acc[i] /= static_cast<C>(n);
    }
    if constexpr (!std::is_same_v<T, C>) {
      T* out = y.as<T>();
      for (int64_t i = 0; i < count; ++i) out[i] = FromCompute<T>(acc[i]);
    }
    return absl::OkStatus();
  });
}

// ---------------------------------------------------------------------------
// CastLike.
// ---------------------------------------------------------------------------

absl::Status CastLikeKernel(KernelContext& ctx) {
  const TensorView& in = ctx.input(0);
  if (absl::Status s = CheckOutputLike(ctx, ctx.input(1).dtype, in.shape); !s.ok()) return s;
  return CastElements(ctx, in, ctx.output(0));
}

}  // namespace

absl::Status RegisterMathKernels(ir::OpRegistry& registry) {
  const struct {
    const char* type;
    ir::KernelFn fn;
  } kernels[] = {
      {"Sqrt", &UnaryKernel<SqrtOp, FloatTypes>},
      {"Exp", &UnaryKernel<ExpOp, FloatTypes>},
      {"Log", &UnaryKernel<LogOp, FloatTypes>},
      {"Reciprocal", &UnaryKernel<ReciprocalOp, FloatTypes>},
      {"Softplus", &UnaryKernel<SoftplusOp, FloatTypes>},
      {"HardSwish", &UnaryKernel<HardSwishOp, FloatTypes>},
      {"Floor", &UnaryKernel<FloorOp, FloatTypes>},
      {"Ceil", &UnaryKernel<CeilOp, FloatTypes>},
      {"Round", &UnaryKernel<RoundOp, FloatTypes>},
      {"Erf", &UnaryKernel<ErfOp, NumericTypes>},
      {"Neg", &UnaryKernel<NegOp, SignedTypes>},
      {"Abs", &UnaryKernel<AbsOp, NumericTypes>},
      {"LeakyRelu", &UnaryKernel<LeakyReluOp, FloatTypes>},
      {"Elu", &UnaryKernel<EluOp, FloatTypes>},
      {"HardSigmoid", &UnaryKernel<HardSigmoidOp, FloatTypes>},
      {"Gelu", &UnaryKernel<GeluOp, FloatTypes>},
      {"Pow", &PowKernel},
      {"Clip", &ClipKernel},
      {"Min", &VariadicKernel<MinOp, NumericTypes>},
      {"Max", &VariadicKernel<MaxOp, NumericTypes>},
      {"Sum", &VariadicKernel<SumOp, FloatTypes>},
      {"Mean", &VariadicKernel<MeanOp, FloatTypes>},
      {"GreaterOrEqual", &CompareKernel<GreaterOrEqualOp>},
      {"LessOrEqual", &CompareKernel<LessOrEqualOp>},
      {"Not", &NotKernel},
      {"And", &LogicalKernel<AndOp>},
      {"Or", &LogicalKernel<OrOp>},
      {"Xor", &LogicalKernel<XorOp>},
      {"CastLike", &CastLikeKernel},
  };
  for (const auto& k : kernels) {
    if (absl::Status s = registry.SetKernel(k.type, ir::Backend::kCpu, k.fn); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace grove::cpu
