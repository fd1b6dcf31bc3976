// CUDA kernels of the elementwise ops, Cast and CastLike: every op is one
// launch of jit/kernels/elementwise.cuh's `ew` entry (module per dtype, op
// code in the params) or of cast.cuh's `cast` (module per dtype pair). The
// checks mirror the CPU kernels (lib/backends/cpu/elementwise.cc, math.cc),
// so a node fails on this backend exactly when it fails on the CPU.
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "jit/kernels/cast_params.h"
#include "jit/kernels/elementwise_params.h"
#include "lib/backends/common/elementwise_checks.h"
#include "lib/backends/common/kernel_checks.h"
#include "lib/backends/cuda/cuda_kernels.h"
#include "lib/backends/cuda/exec_context.h"
#include "lib/backends/cuda/fusion.h"
#include "lib/ir/element_types.h"

namespace grove::cuda {
namespace {

using backends::CheckOutputDType;
using backends::CheckOutputLike;
using backends::CheckSameInputDTypes;
using ir::KernelContext;

// Dtype sets of the CPU kernels.
enum TypeSet : uint32_t {
  kFloat = (1u << static_cast<int>(DType::kF32)) | (1u << static_cast<int>(DType::kF64)) |
           (1u << static_cast<int>(DType::kF16)) | (1u << static_cast<int>(DType::kBF16)),
  kSigned = kFloat | (1u << static_cast<int>(DType::kI64)) | (1u << static_cast<int>(DType::kI32)) |
            (1u << static_cast<int>(DType::kI8)),
  kNumeric = kSigned | (1u << static_cast<int>(DType::kU8)),
  kAny = kNumeric | (1u << static_cast<int>(DType::kBool)),
  kPowBase = kFloat | (1u << static_cast<int>(DType::kI64)) | (1u << static_cast<int>(DType::kI32)),
};

absl::Status CheckDType(const KernelContext& ctx, DType dtype, uint32_t set) {
  if ((set >> static_cast<int>(dtype)) & 1u) return absl::OkStatus();
  return ctx.Error(absl::StrCat("the CUDA kernel does not support dtype ", DTypeName(dtype)));
}

bool IsIntegral(DType d) { return d == DType::kI64 || d == DType::kI32 || d == DType::kI8 || d == DType::kU8; }

// Bytes per element of the compute type (variadic accumulators).
size_t AccSize(DType d) {
  switch (d) {
    case DType::kF16:
    case DType::kBF16:
      return 4;
    default:
      return DTypeSize(d);
  }
}

}  // namespace

// Launch shape of the elementwise kernels (grid-stride loops, any size). The
// emulated device runs a block's threads as host threads, so it gets few
// small blocks; the kernels loop over the rest either way.
LaunchDims EwGrid(const Device& device, int64_t n) {
  return device.emulated() ? Grid1D(n, 32, 2) : Grid1D(n, 256);
}

namespace {

grove_k::EwParams BaseParams(int op) {
  grove_k::EwParams p;
  std::memset(&p, 0, sizeof(p));
  p.op = op;
  return p;
}

// Lays the inputs out against output 0, fills p and launches `ew` in the
// module of `dtype` (nothing for an empty output).
absl::Status LaunchEw(const KernelContext& ctx, DType dtype, grove_k::EwParams& p,
                      const std::vector<const TensorView*>& ins) {
  const TensorView& out = ctx.output(0);
  std::vector<const std::vector<int64_t>*> shapes;
  for (const TensorView* v : ins) shapes.push_back(&v->shape);
  absl::StatusOr<EwLayout> layout = PlanEwLayout(out.shape, shapes);
  if (!layout.ok()) return ctx.Error(layout.status().message());
  if (layout->num_elements == 0) return absl::OkStatus();
  p.out = out.data;
  p.n = layout->num_elements;
  p.shape = layout->shape;
  p.num_inputs = static_cast<int>(ins.size());
  p.simple = layout->simple ? 1 : 0;
  for (size_t k = 0; k < ins.size(); ++k) {
    p.in[k] = ins[k]->data;
    p.strides[k] = layout->strides[k];
    p.mode[k] = layout->mode[k];
  }
  ExecContext& ec = Exec(ctx);
  return ec.Launch(jit::ModuleSpec{"elementwise", {dtype}}, "ew", EwGrid(ec.device(), p.n), p);
}

// ---------------------------------------------------------------------------
// Unary ops.
// ---------------------------------------------------------------------------

template <int kOp, uint32_t kTypes>
absl::Status UnaryKernel(KernelContext& ctx) {
  const TensorView& x = ctx.input(0);
  if (absl::Status s = CheckOutputLike(ctx, x.dtype, x.shape); !s.ok()) return s;
  if (absl::Status s = CheckDType(ctx, x.dtype, kTypes); !s.ok()) return s;
  grove_k::EwParams p = BaseParams(kOp);
  p.op = EwUnaryAttributes(kOp, ctx.attrs(), &p.fa, &p.fb);
  return LaunchEw(ctx, x.dtype, p, {&x});
}

absl::Status NotKernel(KernelContext& ctx) {
  if (absl::Status s = backends::CheckNotInputs(ctx); !s.ok()) return s;
  const TensorView& x = ctx.input(0);
  grove_k::EwParams p = BaseParams(grove_k::kEwNot);
  return LaunchEw(ctx, x.dtype, p, {&x});
}

// One bound of Clip: input i when given (opset 11+), else the float
// attribute (opset 6), else none; as the CPU's ReadClipBound.
absl::Status ReadClipBound(const KernelContext& ctx, int i, absl::string_view name, grove_k::EwParams& p) {
  const DType dtype = ctx.input(0).dtype;
  bool has = false;
  double f = 0;
  int64_t n = 0;
  auto take = [&](auto tag, const void* bytes) {
    using T = typename decltype(tag)::type;
    T v;
    std::memcpy(&v, bytes, sizeof(T));
    const auto c = ir::ToCompute(v);
    if constexpr (std::is_floating_point_v<std::remove_const_t<decltype(c)>>) {
      f = static_cast<double>(c);
    } else {
      n = static_cast<int64_t>(c);
    }
    return absl::OkStatus();
  };
  if (ctx.has_input(i)) {
    const TensorView& b = ctx.input(i);
    if (b.dtype != dtype) {
      return ctx.Error(absl::StrCat("input ", i, " (", name, ") has dtype ", DTypeName(b.dtype), "; expected ",
                                    DTypeName(dtype), " like input 0 (input)"));
    }
    if (b.num_elements() != 1) {
      return ctx.Error(absl::StrCat("input ", i, " (", name, ") must hold one element (a scalar); got shape ",
                                    backends::ShapeStr(b.shape)));
    }
    absl::StatusOr<std::vector<uint8_t>> bytes = Exec(ctx).ReadBytes(ctx, i);
    if (!bytes.ok()) return bytes.status();
    has = true;
    if (absl::Status s = ir::VisitDType<float, double, ir::Half, ir::BFloat16, int64_t, int32_t, int8_t, uint8_t>(
            ctx, dtype, [&](auto tag) { return take(tag, bytes->data()); });
        !s.ok()) {
      return s;
    }
  } else if (ctx.attrs().Has(name)) {
    has = true;
    const double attr = ctx.attrs().GetFloat(name, 0.0);
    if (absl::Status s = ir::VisitDType<float, double, ir::Half, ir::BFloat16, int64_t, int32_t, int8_t, uint8_t>(
            ctx, dtype,
            [&](auto tag) {
              using T = typename decltype(tag)::type;
              const T v = ir::ConvertElement<T>(attr);
              return take(tag, &v);
            });
        !s.ok()) {
      return s;
    }
  }
  if (i == 1) {
    p.has_lo = has ? 1 : 0;
    p.fa = f;
    p.ia = n;
  } else {
    p.has_hi = has ? 1 : 0;
    p.fb = f;
    p.ib = n;
  }
  return absl::OkStatus();
}

absl::Status ClipKernel(KernelContext& ctx) {
  const TensorView& x = ctx.input(0);
  if (absl::Status s = CheckOutputLike(ctx, x.dtype, x.shape); !s.ok()) return s;
  if (absl::Status s = CheckDType(ctx, x.dtype, kNumeric); !s.ok()) return s;
  grove_k::EwParams p = BaseParams(grove_k::kEwClip);
  if (absl::Status s = ReadClipBound(ctx, 1, "min", p); !s.ok()) return s;
  if (absl::Status s = ReadClipBound(ctx, 2, "max", p); !s.ok()) return s;
  return LaunchEw(ctx, x.dtype, p, {&x});
}

// ---------------------------------------------------------------------------
// Binary ops.
// ---------------------------------------------------------------------------

// Integer Div: the CPU refuses a zero divisor; so does this (reading B on
// the host, from its host copy when the plan knows it).
absl::Status CheckNoZeroDivisor(const KernelContext& ctx) {
  const TensorView& b = ctx.input(1);
  absl::StatusOr<std::vector<uint8_t>> bytes = Exec(ctx).ReadBytes(ctx, 1);
  if (!bytes.ok()) return bytes.status();
  const size_t size = DTypeSize(b.dtype);
  const int64_t n = b.num_elements();
  for (int64_t i = 0; i < n; ++i) {
    bool zero = true;
    for (size_t j = 0; j < size; ++j) zero &= (*bytes)[i * size + j] == 0;
    if (zero) return ctx.Error(absl::StrCat("integer division by zero: input 1 (B) holds 0 at flat index ", i));
  }
  return absl::OkStatus();
}

template <int kOp>
absl::Status ArithmeticKernel(KernelContext& ctx) {
  const DType dtype = ctx.input(0).dtype;
  if (absl::Status s = CheckSameInputDTypes(ctx, 0, 1); !s.ok()) return s;
  if (absl::Status s = CheckOutputDType(ctx, dtype); !s.ok()) return s;
  if (absl::Status s = CheckDType(ctx, dtype, kNumeric); !s.ok()) return s;
  if (kOp == grove_k::kEwDiv && IsIntegral(dtype) && ctx.output(0).num_elements() > 0) {
    // Check the broadcast first: a bad shape is the error the CPU reports.
    std::vector<const std::vector<int64_t>*> shapes{&ctx.input(0).shape, &ctx.input(1).shape};
    absl::StatusOr<EwLayout> layout = PlanEwLayout(ctx.output(0).shape, shapes);
    if (!layout.ok()) return ctx.Error(layout.status().message());
    if (absl::Status s = CheckNoZeroDivisor(ctx); !s.ok()) return s;
  }
  grove_k::EwParams p = BaseParams(kOp);
  return LaunchEw(ctx, dtype, p, {&ctx.input(0), &ctx.input(1)});
}

template <int kOp, uint32_t kTypes>
absl::Status CompareKernel(KernelContext& ctx) {
  const DType dtype = ctx.input(0).dtype;
  if (absl::Status s = CheckSameInputDTypes(ctx, 0, 1); !s.ok()) return s;
  if (absl::Status s = CheckOutputDType(ctx, DType::kBool); !s.ok()) return s;
  if (absl::Status s = CheckDType(ctx, dtype, kTypes); !s.ok()) return s;
  grove_k::EwParams p = BaseParams(kOp);
  return LaunchEw(ctx, dtype, p, {&ctx.input(0), &ctx.input(1)});
}

template <int kOp>
absl::Status LogicalKernel(KernelContext& ctx) {
  if (absl::Status s = backends::CheckLogicalInputs(ctx); !s.ok()) return s;
  grove_k::EwParams p = BaseParams(kOp);
  return LaunchEw(ctx, DType::kBool, p, {&ctx.input(0), &ctx.input(1)});
}

absl::Status PowKernel(KernelContext& ctx) {
  const DType base = ctx.input(0).dtype, exponent = ctx.input(1).dtype;
  if (absl::Status s = CheckOutputDType(ctx, base); !s.ok()) return s;
  if (absl::Status s = CheckDType(ctx, base, kPowBase); !s.ok()) return s;
  if (absl::Status s = CheckDType(ctx, exponent, kNumeric); !s.ok()) return s;
  grove_k::EwParams p = BaseParams(grove_k::kEwPow);
  p.exp_dtype = static_cast<int>(exponent);
  return LaunchEw(ctx, base, p, {&ctx.input(0), &ctx.input(1)});
}

absl::Status WhereKernel(KernelContext& ctx) {
  if (absl::Status s = backends::CheckWhereInputs(ctx); !s.ok()) return s;
  const DType dtype = ctx.input(1).dtype;
  if (absl::Status s = CheckDType(ctx, dtype, kAny); !s.ok()) return s;
  grove_k::EwParams p = BaseParams(grove_k::kEwWhere);
  return LaunchEw(ctx, dtype, p, {&ctx.input(0), &ctx.input(1), &ctx.input(2)});
}

// ---------------------------------------------------------------------------
// Variadic Min Max Sum Mean: one launch folds up to kEwMaxOperands inputs;
// more go through an accumulator of the compute type in scratch memory, so
// f16/bf16 round once at the end as on the CPU.
// ---------------------------------------------------------------------------

template <int kOp, uint32_t kTypes>
absl::Status VariadicKernel(KernelContext& ctx) {
  const int n = ctx.num_inputs();
  if (absl::Status s = backends::CheckVariadicInputs(ctx); !s.ok()) return s;
  const DType dtype = ctx.input(0).dtype;
  if (absl::Status s = CheckDType(ctx, dtype, kTypes); !s.ok()) return s;
  const int64_t count = ctx.output(0).num_elements();
  if (count == 0) return absl::OkStatus();

  constexpr int kChunk = grove_k::kEwMaxOperands;
  void* acc = nullptr;
  if (n > kChunk) {
    absl::StatusOr<void*> scratch = Exec(ctx).Scratch(static_cast<size_t>(count) * AccSize(dtype));
    if (!scratch.ok()) return scratch.status();
    acc = *scratch;
  }
  for (int first = 0; first < n;) {
    // The first launch reads kChunk inputs; later ones the accumulator and
    // kChunk of them.
    const int take = std::min(kChunk, n - first);
    grove_k::EwParams p = BaseParams(n == 1 ? grove_k::kEwCopy : kOp);
    if (n == 1 && kOp == grove_k::kEwMean) p.op = grove_k::kEwMean;  // x / 1, as the CPU
    p.acc = acc;
    p.acc_in = first > 0 ? 1 : 0;
    p.acc_out = first + take < n ? 1 : 0;
    if (kOp == grove_k::kEwMean && !p.acc_out) p.mean_count = n;
    std::vector<const TensorView*> ins;
    for (int k = first; k < first + take; ++k) ins.push_back(&ctx.input(k));
    if (absl::Status s = LaunchEw(ctx, dtype, p, ins); !s.ok()) return s;
    first += take;
  }
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------
// Cast, CastLike.
// ---------------------------------------------------------------------------

absl::Status CastElements(const KernelContext& ctx, const TensorView& in, TensorView& out) {
  const int64_t n = in.num_elements();
  if (n == 0) return absl::OkStatus();
  ExecContext& ec = Exec(ctx);
  if (in.dtype == out.dtype) {
    if (in.data == out.data) return absl::OkStatus();
    return ec.device().CopyAsync(out.data, in.data, in.byte_size(), ec.stream());
  }
  if (absl::Status s = CheckDType(ctx, in.dtype, kAny); !s.ok()) return s;
  if (absl::Status s = CheckDType(ctx, out.dtype, kAny); !s.ok()) return s;
  grove_k::CastParams p{in.data, out.data, n};
  return ec.Launch(jit::ModuleSpec{"cast", {in.dtype, out.dtype}}, "cast", EwGrid(ec.device(), n), p);
}

absl::Status CastKernel(KernelContext& ctx) {
  const TensorView& in = ctx.input(0);
  TensorView& out = ctx.output(0);
  if (absl::Status s = backends::CheckCastOutput(ctx); !s.ok()) return s;
  return CastElements(ctx, in, out);
}

absl::Status CastLikeKernel(KernelContext& ctx) {
  const TensorView& in = ctx.input(0);
  if (absl::Status s = CheckOutputLike(ctx, ctx.input(1).dtype, in.shape); !s.ok()) return s;
  return CastElements(ctx, in, ctx.output(0));
}

}  // namespace

absl::Status RegisterCudaElementwiseKernels(ir::OpRegistry& registry) {
  using namespace grove_k;  // NOLINT: the op codes
  const struct {
    const char* type;
    ir::KernelFn fn;
  } kernels[] = {
      {"Neg", &UnaryKernel<kEwNeg, kSigned>},
      {"Abs", &UnaryKernel<kEwAbs, kNumeric>},
      {"Exp", &UnaryKernel<kEwExp, kFloat>},
      {"Log", &UnaryKernel<kEwLog, kFloat>},
      {"Sqrt", &UnaryKernel<kEwSqrt, kFloat>},
      {"Reciprocal", &UnaryKernel<kEwReciprocal, kFloat>},
      {"Erf", &UnaryKernel<kEwErf, kNumeric>},
      {"Tanh", &UnaryKernel<kEwTanh, kFloat>},
      {"Sigmoid", &UnaryKernel<kEwSigmoid, kFloat>},
      {"Relu", &UnaryKernel<kEwRelu, kFloat>},
      {"LeakyRelu", &UnaryKernel<kEwLeakyRelu, kFloat>},
      {"Elu", &UnaryKernel<kEwElu, kFloat>},
      {"Gelu", &UnaryKernel<kEwGelu, kFloat>},
      {"HardSigmoid", &UnaryKernel<kEwHardSigmoid, kFloat>},
      {"HardSwish", &UnaryKernel<kEwHardSwish, kFloat>},
      {"Softplus", &UnaryKernel<kEwSoftplus, kFloat>},
      {"Sin", &UnaryKernel<kEwSin, kFloat>},
      {"Cos", &UnaryKernel<kEwCos, kFloat>},
      {"Tan", &UnaryKernel<kEwTan, kFloat>},
      {"Asin", &UnaryKernel<kEwAsin, kFloat>},
      {"Acos", &UnaryKernel<kEwAcos, kFloat>},
      {"Atan", &UnaryKernel<kEwAtan, kFloat>},
      {"Sinh", &UnaryKernel<kEwSinh, kFloat>},
      {"Cosh", &UnaryKernel<kEwCosh, kFloat>},
      {"Asinh", &UnaryKernel<kEwAsinh, kFloat>},
      {"Acosh", &UnaryKernel<kEwAcosh, kFloat>},
      {"Atanh", &UnaryKernel<kEwAtanh, kFloat>},
      {"Softsign", &UnaryKernel<kEwSoftsign, kFloat>},
      {"Selu", &UnaryKernel<kEwSelu, kFloat>},
      {"Celu", &UnaryKernel<kEwCelu, kFloat>},
      {"ThresholdedRelu", &UnaryKernel<kEwThresholdedRelu, kFloat>},
      {"Clip", &ClipKernel},
      {"Not", &NotKernel},
      {"Add", &ArithmeticKernel<kEwAdd>},
      {"Sub", &ArithmeticKernel<kEwSub>},
      {"Mul", &ArithmeticKernel<kEwMul>},
      {"Div", &ArithmeticKernel<kEwDiv>},
      {"Pow", &PowKernel},
      {"Min", &VariadicKernel<kEwMin, kNumeric>},
      {"Max", &VariadicKernel<kEwMax, kNumeric>},
      {"Sum", &VariadicKernel<kEwSum, kFloat>},
      {"Mean", &VariadicKernel<kEwMean, kFloat>},
      {"Equal", &CompareKernel<kEwEqual, kAny>},
      {"Greater", &CompareKernel<kEwGreater, kAny>},
      {"Less", &CompareKernel<kEwLess, kAny>},
      {"GreaterOrEqual", &CompareKernel<kEwGreaterOrEqual, kNumeric>},
      {"LessOrEqual", &CompareKernel<kEwLessOrEqual, kNumeric>},
      {"And", &LogicalKernel<kEwAnd>},
      {"Or", &LogicalKernel<kEwOr>},
      {"Xor", &LogicalKernel<kEwXor>},
      {"Where", &WhereKernel},
      {"Cast", &CastKernel},
      {"CastLike", &CastLikeKernel},
  };
  for (const auto& k : kernels) {
    if (absl::Status s = registry.SetKernel(k.type, ir::Backend::kCuda, k.fn); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace grove::cuda
