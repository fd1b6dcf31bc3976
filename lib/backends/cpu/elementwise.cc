// CPU reference kernels of the elementwise ops. Binary ops walk a
// BroadcastPlan whose rows are contiguous or scalar-broadcast, so same-shape
// and scalar cases run as one tight loop. f16/bf16 compute in float; integer
// arithmetic wraps (two's complement) instead of overflowing.
#include <cmath>
#include <cstring>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "lib/backends/common/elementwise_checks.h"
#include "lib/backends/common/prepared.h"
#include "lib/backends/cpu/binary_kernel.h"
#include "lib/backends/cpu/cast.h"
#include "lib/backends/cpu/cpu_features.h"
#include "lib/backends/cpu/parallel_for.h"
#include "lib/backends/cpu/simd_exp.h"
#include "lib/backends/cpu/string_cast.h"
#include "lib/backends/cpu/cpu_kernels.h"
#include "lib/ir/element_types.h"
#include "lib/ir/value_type.h"

namespace grove::cpu {

using ir::BFloat16;
using ir::Bool8;
using ir::ComputeT;
using ir::ConvertElement;
using ir::FromCompute;
using ir::Half;
using ir::NumericTypes;
using ir::ToCompute;
using ir::Visit;
using ir::VisitAnyDType;
using ir::VisitDType;

namespace {

using ir::KernelContext;

// Integer arithmetic in an unsigned type: wraps like two's complement
// instead of signed overflow (undefined behaviour). At least `unsigned` wide,
// since 8- and 16-bit operands would promote to (signed) int.
template <typename C, typename Fn>
inline C Wrapping(C a, C b, Fn fn) {
  using U = std::common_type_t<std::make_unsigned_t<C>, unsigned>;
  return static_cast<C>(fn(static_cast<U>(a), static_cast<U>(b)));
}

struct AddOp {
  static constexpr bool kDivides = false;
  template <typename C>
  static C Apply(C a, C b) {
    if constexpr (std::is_integral_v<C>) {
      return Wrapping(a, b, [](auto x, auto y) { return x + y; });
    } else {
      return a + b;
    }
  }
};

struct SubOp {
  static constexpr bool kDivides = false;
  template <typename C>
  static C Apply(C a, C b) {
    if constexpr (std::is_integral_v<C>) {
      return Wrapping(a, b, [](auto x, auto y) { return x - y; });
    } else {
      return a - b;
    }
  }
};

struct MulOp {
  static constexpr bool kDivides = false;
  template <typename C>
  static C Apply(C a, C b) {
    if constexpr (std::is_integral_v<C>) {
      return Wrapping(a, b, [](auto x, auto y) { return x * y; });
    } else {
      return a * b;
    }
  }
};

// Integers truncate toward zero (C semantics); divisors are checked non-zero
// before the loop. MIN / -1 overflows, so it wraps to MIN.
struct DivOp {
  static constexpr bool kDivides = true;
  template <typename C>
  static C Apply(C a, C b) {
    if constexpr (std::is_integral_v<C>) {
      if constexpr (std::is_signed_v<C>) {
        if (b == -1) return Wrapping(C{0}, a, [](auto x, auto y) { return x - y; });
      }
      return static_cast<C>(a / b);
    } else {
      return a / b;
    }
  }
};

template <typename T>
absl::Status CheckNoZeroDivisor(const KernelContext& ctx) {
  const TensorView& b = ctx.input(1);
  const T* p = b.as<const T>();
  const int64_t n = b.num_elements();
  for (int64_t i = 0; i < n; ++i) {
    if (p[i] == 0) {
      return ctx.Error(absl::StrCat("integer division by zero: input 1 (B) holds 0 at flat index ", i));
    }
  }
  return absl::OkStatus();
}

template <typename Op, typename T>
absl::Status RunArithmetic(const KernelContext& ctx, const BinaryParams& p) {
  using C = ComputeT<T>;
  if constexpr (Op::kDivides && std::is_integral_v<T>) {
    // With a non-empty output every element of B is used at least once.
    if (p.plan.num_elements() > 0) {
      if (absl::Status s = CheckNoZeroDivisor<T>(ctx); !s.ok()) return s;
    }
  }
  RunBinary<T, T, T>(ctx, p.plan,
                     [](T x, T y) { return FromCompute<T>(Op::template Apply<C>(ToCompute(x), ToCompute(y))); });
  return absl::OkStatus();
}

template <typename Op>
absl::StatusOr<ir::PreparedKernel> PrepareArithmetic(const KernelContext& ctx) {
  const DType dtype = ctx.input(0).dtype;
  if (absl::Status s = CheckSameInputDTypes(ctx, 0, 1); !s.ok()) return s;
  if (absl::Status s = CheckOutputDType(ctx, dtype); !s.ok()) return s;
  absl::StatusOr<BroadcastPlan<2>> plan = MakeBinaryPlan(ctx);
  if (!plan.ok()) return plan.status();
  BinaryParams p{*std::move(plan)};
  absl::Status s = Visit(NumericTypes{}, ctx, dtype, [&](auto tag) -> absl::Status {
    p.run = &RunArithmetic<Op, typename decltype(tag)::type>;
    return absl::OkStatus();
  });
  if (!s.ok()) return s;
  return backends::MakePrepared(std::move(p));
}

struct GreaterOp {
  template <typename C>
  static bool Apply(C a, C b) {
    return a > b;
  }
};
struct LessOp {
  template <typename C>
  static bool Apply(C a, C b) {
    return a < b;
  }
};
struct EqualOp {
  template <typename C>
  static bool Apply(C a, C b) {
    return a == b;
  }
};

template <typename Op, typename T>
absl::Status RunCompare(const KernelContext& ctx, const BinaryParams& p) {
  using C = ComputeT<T>;
  RunBinary<T, T, Bool8>(ctx, p.plan, [](T x, T y) {
    return Bool8{static_cast<uint8_t>(Op::template Apply<C>(ToCompute(x), ToCompute(y)) ? 1 : 0)};
  });
  return absl::OkStatus();
}

// Equal also takes strings (opset 19): two strings are equal when their bytes
// are, wherever those bytes live.
absl::Status RunEqualStrings(const KernelContext& ctx, const BinaryParams& p) {
  RunBinary<StringRef, StringRef, Bool8>(ctx, p.plan, [](const StringRef& x, const StringRef& y) {
    return Bool8{static_cast<uint8_t>(x.view() == y.view() ? 1 : 0)};
  });
  return absl::OkStatus();
}

template <typename Op>
absl::StatusOr<ir::PreparedKernel> PrepareCompare(const KernelContext& ctx) {
  const DType dtype = ctx.input(0).dtype;
  if (absl::Status s = CheckSameInputDTypes(ctx, 0, 1); !s.ok()) return s;
  if (absl::Status s = CheckOutputDType(ctx, DType::kBool); !s.ok()) return s;
  absl::StatusOr<BroadcastPlan<2>> plan = MakeBinaryPlan(ctx);
  if (!plan.ok()) return plan.status();
  BinaryParams p{*std::move(plan)};
  if (std::is_same_v<Op, EqualOp> && dtype == DType::kString) {
    p.run = &RunEqualStrings;
  } else {
    absl::Status s = VisitAnyDType(ctx, dtype, [&](auto tag) -> absl::Status {
      p.run = &RunCompare<Op, typename decltype(tag)::type>;
      return absl::OkStatus();
    });
    if (!s.ok()) return s;
  }
  return backends::MakePrepared(std::move(p));
}

// NaN passes through rather than becoming 0.
struct ReluOp {
  static constexpr bool kCheap = true;
  template <typename C>
  static C Apply(C x) {
    return x < C(0) ? C(0) : x;
  }
};
struct SigmoidOp {
  // exp of a negative argument only, so large |x| neither overflows nor
  // loses the result to inf/inf.
  template <typename C>
  static C Apply(C x) {
    if (x >= C(0)) return C(1) / (C(1) + std::exp(-x));
    const C e = std::exp(x);
    return e / (C(1) + e);
  }
};
struct TanhOp {
  template <typename C>
  static C Apply(C x) {
    return std::tanh(x);
  }
};

template <typename Op, typename T>
void RunFloatUnary(const KernelContext& ctx, const Op&) {
  const TensorView& x = ctx.input(0);
  const T* in = x.as<const T>();
  T* out = ctx.output(0).as<T>();
#if defined(GROVE_SIMD_EXP)
  // f32 Sigmoid: libm's expf per element was most of a SiLU's time (a
  // quarter of a small CNN's run); the vectorised one is ~15x faster.
  // Tanh likewise (a tanh-approximated GELU's, 22% of an encoder's run).
  if constexpr ((std::is_same_v<Op, SigmoidOp> || std::is_same_v<Op, TanhOp>) && std::is_same_v<T, float>) {
    if (UseAvx2Kernels()) {
      const bool avx512 = HostCpuFeatures().avx512f;
      void (*vectorised)(const float*, float*, int64_t) =
          std::is_same_v<Op, SigmoidOp> ? (avx512 ? &SigmoidAvx512 : &SigmoidAvx2) : (avx512 ? &TanhAvx512 : &TanhAvx2);
      ParallelFor(ctx, x.num_elements(), kCheapGrain,
                  [&](int64_t begin, int64_t end) { vectorised(in + begin, out + begin, end - begin); });
      return;
    }
  }
#endif
  ParallelFor(ctx, x.num_elements(), GrainOf<Op>(), [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) out[i] = FromCompute<T>(Op::Apply(ToCompute(in[i])));
  });
}

template <typename Op>
absl::StatusOr<ir::PreparedKernel> PrepareFloatUnary(const KernelContext& ctx) {
  const TensorView& x = ctx.input(0);
  if (absl::Status s = CheckOutputLike(ctx, x.dtype, x.shape); !s.ok()) return s;
  UnaryParams<Op> p;
  absl::Status s = VisitDType<float, double, Half, BFloat16>(ctx, x.dtype, [&](auto tag) -> absl::Status {
    p.run = &RunFloatUnary<Op, typename decltype(tag)::type>;
    return absl::OkStatus();
  });
  if (!s.ok()) return s;
  return backends::MakePrepared(std::move(p));
}

// Where moves elements without looking at them, so it dispatches on size.
struct WhereParams {
  BroadcastPlan<3> plan;
  void (*run)(const KernelContext& ctx, const BroadcastPlan<3>& plan) = nullptr;
};

template <typename T>
void RunWhere(const KernelContext& ctx, const BroadcastPlan<3>& plan) {
  const uint8_t* c = ctx.input(0).as<const uint8_t>();
  const T* x = ctx.input(1).as<const T>();
  const T* y = ctx.input(2).as<const T>();
  T* out = ctx.output(0).as<T>();
  const std::array<int64_t, 3> steps = plan.row_steps();  // no structured binding: clang 14 cannot capture one
  const int64_t sc = steps[0], sx = steps[1], sy = steps[2];
  ParallelFor(ctx, plan.num_elements(), kCheapGrain, [&](int64_t begin, int64_t end) {
    plan.ForEachRowIn(begin, end, [&](int64_t o, const std::array<int64_t, 3>& in, int64_t len) {
      const uint8_t* cr = c + in[0];
      const T* xr = x + in[1];
      const T* yr = y + in[2];
      T* orow = out + o;
      // The common steps as loops of their own, which the compiler
      // vectorises (a causal mask: a condition row and two scalars).
      if (sc == 1 && sx == 0 && sy == 0) {
        const T a = *xr, b = *yr;
        for (int64_t i = 0; i < len; ++i) orow[i] = cr[i] != 0 ? a : b;
      } else if (sc == 1 && sx == 1 && sy == 1) {
        for (int64_t i = 0; i < len; ++i) orow[i] = cr[i] != 0 ? xr[i] : yr[i];
      } else if (sc == 1 && sx == 1 && sy == 0) {
        const T b = *yr;
        for (int64_t i = 0; i < len; ++i) orow[i] = cr[i] != 0 ? xr[i] : b;
      } else if (sc == 1 && sx == 0 && sy == 1) {
        const T a = *xr;
        for (int64_t i = 0; i < len; ++i) orow[i] = cr[i] != 0 ? a : yr[i];
      } else {
        for (int64_t i = 0; i < len; ++i) orow[i] = cr[i * sc] != 0 ? xr[i * sx] : yr[i * sy];
      }
    });
  });
}

absl::StatusOr<ir::PreparedKernel> PrepareWhere(const KernelContext& ctx) {
  if (absl::Status s = backends::CheckWhereInputs(ctx); !s.ok()) return s;
  const DType dtype = ctx.input(1).dtype;
  absl::StatusOr<BroadcastPlan<3>> plan =
      BroadcastPlan<3>::Make(ctx.output(0).shape, {&ctx.input(0).shape, &ctx.input(1).shape, &ctx.input(2).shape});
  if (!plan.ok()) return ctx.Error(plan.status().message());
  WhereParams p{*std::move(plan)};
  switch (DTypeSize(dtype)) {
    case 1:
      p.run = &RunWhere<uint8_t>;
      break;
    case 2:
      p.run = &RunWhere<uint16_t>;
      break;
    case 4:
      p.run = &RunWhere<uint32_t>;
      break;
    case 8:
      p.run = &RunWhere<uint64_t>;
      break;
    case sizeof(StringRef):  // strings: their references move
      p.run = &RunWhere<StringRef>;
      break;
    default:
      return ctx.Error(absl::StrCat("unsupported dtype ", DTypeName(dtype)));
  }
  return backends::MakePrepared(std::move(p));
}

absl::Status WhereKernel(KernelContext& ctx) {
  const WhereParams* p = backends::PreparedParams<WhereParams>(ctx);
  if (p == nullptr) return backends::NotPrepared(ctx, "CPU");
  p->run(ctx, p->plan);
  return absl::OkStatus();
}

struct CastParams {
  CastFn convert = nullptr;
};

absl::StatusOr<ir::PreparedKernel> PrepareCast(const KernelContext& ctx) {
  if (absl::Status s = backends::CheckCastOutput(ctx); !s.ok()) return s;
  absl::StatusOr<CastFn> convert = SelectCast(ctx, ctx.input(0).dtype, ctx.output(0).dtype);
  if (!convert.ok()) return convert.status();
  return backends::MakePrepared(CastParams{*convert});
}

absl::Status CastKernel(KernelContext& ctx) {
  const CastParams* p = backends::PreparedParams<CastParams>(ctx);
  if (p == nullptr) return backends::NotPrepared(ctx, "CPU");
  return p->convert(ctx, ctx.input(0), ctx.output(0));
}

// Whether the input is a sequence or optional (moved as a value) or a tensor
// (copied).
struct IdentityParams {
  bool boxed = false;
};

absl::StatusOr<ir::PreparedKernel> PrepareIdentity(const KernelContext& ctx) {
  const TensorView& in = ctx.input(0);
  if (ir::IsBoxed(in.dtype)) return backends::MakePrepared(IdentityParams{true});
  if (absl::Status s = CheckOutputLike(ctx, in.dtype, in.shape); !s.ok()) return s;
  return backends::MakePrepared(IdentityParams{false});
}

absl::Status IdentityKernel(KernelContext& ctx) {
  const IdentityParams* p = backends::PreparedParams<IdentityParams>(ctx);
  if (p == nullptr) return backends::NotPrepared(ctx, "CPU");
  const TensorView& in = ctx.input(0);
  if (p->boxed) {  // a sequence or optional: the value, its tensors shared
    ir::MutableBoxedValue(ctx.output(0)) = ir::BoxedValue(in);
    return absl::OkStatus();
  }
  if (in.num_elements() > 0 && in.data != ctx.output(0).data) {
    CopyBytes(ctx, ctx.output(0).data, in.data, in.byte_size());
  }
  return absl::OkStatus();
}

absl::Status CopySameDType(const ir::KernelContext& ctx, const TensorView& in, TensorView& out) {
  if (in.num_elements() > 0 && in.data != out.data) CopyBytes(ctx, out.data, in.data, in.byte_size());
  return absl::OkStatus();
}

template <typename Src, typename Dst>
absl::Status ConvertAll(const ir::KernelContext& ctx, const TensorView& in, TensorView& out) {
  const Src* src = in.as<const Src>();
  Dst* dst = out.as<Dst>();
  ParallelFor(ctx, in.num_elements(), kCheapGrain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) dst[i] = ConvertElement<Dst>(src[i]);
  });
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<CastFn> SelectCast(const ir::KernelContext& ctx, DType from, DType to) {
  if (from == to) return &CopySameDType;
  if (to == DType::kString) return &CastToStrings;
  if (from == DType::kString) return &CastFromStrings;
  CastFn fn = nullptr;
  absl::Status s = VisitAnyDType(ctx, from, [&](auto src_tag) -> absl::Status {
    using Src = typename decltype(src_tag)::type;
    return VisitAnyDType(ctx, to, [&](auto dst_tag) -> absl::Status {
      fn = &ConvertAll<Src, typename decltype(dst_tag)::type>;
      return absl::OkStatus();
    });
  });
  if (!s.ok()) return s;
  return fn;
}

absl::Status CastElements(const ir::KernelContext& ctx, const TensorView& in, TensorView& out) {
  absl::StatusOr<CastFn> convert = SelectCast(ctx, in.dtype, out.dtype);
  if (!convert.ok()) return convert.status();
  return (*convert)(ctx, in, out);
}

absl::Status RegisterElementwiseKernels(ir::OpRegistry& registry) {
  const std::pair<const char*, ir::KernelDef> kernels[] = {
      {"Add", {&InvokeBinary, &PrepareArithmetic<AddOp>}},
      {"Sub", {&InvokeBinary, &PrepareArithmetic<SubOp>}},
      {"Mul", {&InvokeBinary, &PrepareArithmetic<MulOp>}},
      {"Div", {&InvokeBinary, &PrepareArithmetic<DivOp>}},
      {"Relu", {&InvokeUnary<ReluOp>, &PrepareFloatUnary<ReluOp>}},
      {"Sigmoid", {&InvokeUnary<SigmoidOp>, &PrepareFloatUnary<SigmoidOp>}},
      {"Tanh", {&InvokeUnary<TanhOp>, &PrepareFloatUnary<TanhOp>}},
      {"Greater", {&InvokeBinary, &PrepareCompare<GreaterOp>}},
      {"Less", {&InvokeBinary, &PrepareCompare<LessOp>}},
      {"Equal", {&InvokeBinary, &PrepareCompare<EqualOp>}},
      {"Where", {&WhereKernel, &PrepareWhere}},
      {"Cast", {&CastKernel, &PrepareCast}},
      {"Identity", {&IdentityKernel, &PrepareIdentity}},
  };
  for (const auto& [type, kernel] : kernels) {
    if (absl::Status s = registry.SetKernel(type, ir::Backend::kCpu, kernel); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace grove::cpu
