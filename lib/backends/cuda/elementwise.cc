// CUDA kernels of the elementwise ops, Cast and CastLike: every op is one
// launch of jit/kernels/elementwise.cuh's `ew` entry (module per dtype, op
// code in the params) or of cast.cuh's `cast` (module per dtype pair). The
// checks mirror the CPU kernels (lib/backends/cpu/elementwise.cc, math.cc),
// so a node fails on this backend exactly when it fails on the CPU.
#include <algorithm>
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
#include "lib/backends/cuda/strided_copy.h"
#include "lib/backends/cuda/variant_launch.h"
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

jit::KernelProblem EwProblem(DType dtype, int64_t n, int inputs, int ops, bool vector) {
  return jit::KernelProblem{"ew", {dtype}, {{"inputs", inputs}, {"n", n}, {"ops", ops}, {"vec", vector ? 4 : 1}}};
}

jit::KernelProblem CastProblem(DType from, DType to, int64_t n) {
  return jit::KernelProblem{"cast", {from, to}, {{"n", n}}};
}

namespace {

grove_k::EwParams BaseParams(int op) {
  grove_k::EwParams p;
  std::memset(&p, 0, sizeof(p));
  p.op = op;
  return p;
}

// The "ew" problem of one launch: the kernel's vector path can take it
// where no operand is strided and the op's operands and result are all the
// dtype with no accumulator (elementwise.cuh: the unary ops and Clip,
// arithmetic but Pow outside a variadic op's chunks).
jit::KernelProblem EwStepProblem(DType dtype, const grove_k::EwParams& p, int count) {
  const bool same_typed =
      p.op <= grove_k::kEwLastUnary || (dtype != DType::kBool && p.op <= grove_k::kEwLastArithmetic &&
                                        p.op != grove_k::kEwPow && p.acc_in == 0 && p.acc_out == 0);
  return EwProblem(dtype, p.n, count, 1, p.simple != 0 && same_typed);
}

// One launch of `ew`: its params without pointers, and which inputs are its
// operands (inputs [first, first + count)).
struct EwLaunch {
  grove_k::EwParams p;
  jit::ModuleSpec module;  // the chosen "ew" variant's
  LaunchDims dims;
  int first = 0, count = 0;
};

// What an elementwise op's prepare makes. No launch: an empty output.
struct EwPrepared {
  DType dtype = DType::kF32;
  std::vector<EwLaunch> launches;
  bool uses_acc = false;  // the variadic accumulator lives in the workspace
  // Read when the step runs (the plan does not know the values on the host):
  // Clip's bounds (inputs 1 and 2).
  bool clip_bounds_at_run = false;
  // Integer Div's divisor when only the device has it: checked there beside
  // the launch, a zero reported at the run's end (deferred checks).
  DeviceCheckSite divisor_check;
};

// Lays inputs [first, first + count) out against output 0 and adds the
// launch of `p` (nothing for an empty output).
absl::Status AddLaunch(const KernelContext& ctx, EwPrepared& e, const grove_k::EwParams& p, int first, int count) {
  const TensorView& out = ctx.output(0);
  std::vector<const std::vector<int64_t>*> shapes;
  for (int k = first; k < first + count; ++k) shapes.push_back(&ctx.input(k).shape);
  absl::StatusOr<EwLayout> layout = PlanEwLayout(out.shape, shapes);
  if (!layout.ok()) return ctx.Error(layout.status().message());
  if (layout->num_elements == 0) return absl::OkStatus();
  EwLaunch l;
  l.p = p;
  l.p.n = layout->num_elements;
  l.p.shape = layout->shape;
  l.p.num_inputs = count;
  l.p.simple = layout->simple ? 1 : 0;
  for (int k = 0; k < count; ++k) {
    l.p.strides[k] = layout->strides[k];
    l.p.mode[k] = layout->mode[k];
  }
  // The step launches its variant's own geometry (the family's Launch, as
  // the table and the cost model saw it), on the emulated device too.
  const VariantLaunch v = ChooseLaunch(ctx, EwStepProblem(e.dtype, l.p, count));
  l.dims = v.dims;
  l.module = v.module;
  l.first = first;
  l.count = count;
  e.launches.push_back(l);
  return absl::OkStatus();
}

// A prepare of one launch over inputs [0, count) in the module of `dtype`.
absl::StatusOr<ir::PreparedKernel> PrepareOne(const KernelContext& ctx, DType dtype, const grove_k::EwParams& p,
                                              int count) {
  EwPrepared e;
  e.dtype = dtype;
  if (absl::Status s = AddLaunch(ctx, e, p, 0, count); !s.ok()) return s;
  return MakePrepared(std::move(e));
}

// ---------------------------------------------------------------------------
// Unary ops.
// ---------------------------------------------------------------------------

template <int kOp, uint32_t kTypes>
absl::StatusOr<ir::PreparedKernel> PrepareUnary(const KernelContext& ctx) {
  const TensorView& x = ctx.input(0);
  if (absl::Status s = CheckOutputLike(ctx, x.dtype, x.shape); !s.ok()) return s;
  if (absl::Status s = CheckDType(ctx, x.dtype, kTypes); !s.ok()) return s;
  grove_k::EwParams p = BaseParams(kOp);
  p.op = EwUnaryAttributes(kOp, ctx.attrs(), &p.fa, &p.fb);
  return PrepareOne(ctx, x.dtype, p, 1);
}

absl::StatusOr<ir::PreparedKernel> PrepareNot(const KernelContext& ctx) {
  if (absl::Status s = backends::CheckNotInputs(ctx); !s.ok()) return s;
  return PrepareOne(ctx, ctx.input(0).dtype, BaseParams(grove_k::kEwNot), 1);
}

// One bound of Clip: input i when given (opset 11+), else the float
// attribute (opset 6), else none; as the CPU's ReadClipBound. With
// `read_values` false (a prepare, the input's values not known on the
// host), a bound input is only checked.
absl::Status ReadClipBound(const KernelContext& ctx, int i, absl::string_view name, grove_k::EwParams& p,
                           bool read_values = true) {
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
    if (!read_values) return absl::OkStatus();
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

absl::StatusOr<ir::PreparedKernel> PrepareClip(const KernelContext& ctx) {
  const TensorView& x = ctx.input(0);
  if (absl::Status s = CheckOutputLike(ctx, x.dtype, x.shape); !s.ok()) return s;
  if (absl::Status s = CheckDType(ctx, x.dtype, kNumeric); !s.ok()) return s;
  ExecContext& ec = Exec(ctx);
  // Bounds the plan knows go into the params; others are read when run.
  const bool known = ec.ValuesOnHost(ctx, 1) && ec.ValuesOnHost(ctx, 2);
  grove_k::EwParams p = BaseParams(grove_k::kEwClip);
  if (absl::Status s = ReadClipBound(ctx, 1, "min", p, known); !s.ok()) return s;
  if (absl::Status s = ReadClipBound(ctx, 2, "max", p, known); !s.ok()) return s;
  absl::StatusOr<ir::PreparedKernel> k = PrepareOne(ctx, x.dtype, p, 1);
  if (!k.ok() || known) return k;
  EwPrepared e = *static_cast<const EwPrepared*>(k->params.get());
  e.clip_bounds_at_run = true;
  return MakePrepared(std::move(e));
}

// ---------------------------------------------------------------------------
// Binary ops.
// ---------------------------------------------------------------------------

// Integer Div: the CPU refuses a zero divisor; so does this (reading B's
// host copy when the plan knows it; else on the device, see EwPrepared).
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
absl::StatusOr<ir::PreparedKernel> PrepareArithmetic(const KernelContext& ctx) {
  const DType dtype = ctx.input(0).dtype;
  if (absl::Status s = CheckSameInputDTypes(ctx, 0, 1); !s.ok()) return s;
  if (absl::Status s = CheckOutputDType(ctx, dtype); !s.ok()) return s;
  if (absl::Status s = CheckDType(ctx, dtype, kNumeric); !s.ok()) return s;
  DeviceCheckSite divisor_check;
  if (kOp == grove_k::kEwDiv && IsIntegral(dtype) && ctx.output(0).num_elements() > 0) {
    // Check the broadcast first: a bad shape is the error the CPU reports.
    std::vector<const std::vector<int64_t>*> shapes{&ctx.input(0).shape, &ctx.input(1).shape};
    absl::StatusOr<EwLayout> layout = PlanEwLayout(ctx.output(0).shape, shapes);
    if (!layout.ok()) return ctx.Error(layout.status().message());
    // A divisor the plan knows is checked now; one computed on the device
    // is checked there when the step runs, without a wait.
    if (Exec(ctx).ValuesOnHost(ctx, 1)) {
      if (absl::Status s = CheckNoZeroDivisor(ctx); !s.ok()) return s;
    } else {
      absl::StatusOr<DeviceCheckSite> site = Exec(ctx).CheckSite(ctx, [](const grove_k::CheckRecord& r) {
        return absl::StrCat("integer division by zero: input 1 (B) holds 0 at flat index ", r.value);
      });
      if (!site.ok()) return site.status();
      divisor_check = *std::move(site);
    }
  }
  absl::StatusOr<ir::PreparedKernel> k = PrepareOne(ctx, dtype, BaseParams(kOp), 2);
  if (!k.ok() || divisor_check.check.record == nullptr) return k;
  EwPrepared e = *static_cast<const EwPrepared*>(k->params.get());
  e.divisor_check = std::move(divisor_check);
  return MakePrepared(std::move(e));
}

template <int kOp, uint32_t kTypes>
absl::StatusOr<ir::PreparedKernel> PrepareCompare(const KernelContext& ctx) {
  const DType dtype = ctx.input(0).dtype;
  if (absl::Status s = CheckSameInputDTypes(ctx, 0, 1); !s.ok()) return s;
  if (absl::Status s = CheckOutputDType(ctx, DType::kBool); !s.ok()) return s;
  if (absl::Status s = CheckDType(ctx, dtype, kTypes); !s.ok()) return s;
  return PrepareOne(ctx, dtype, BaseParams(kOp), 2);
}

template <int kOp>
absl::StatusOr<ir::PreparedKernel> PrepareLogical(const KernelContext& ctx) {
  if (absl::Status s = backends::CheckLogicalInputs(ctx); !s.ok()) return s;
  return PrepareOne(ctx, DType::kBool, BaseParams(kOp), 2);
}

absl::StatusOr<ir::PreparedKernel> PreparePow(const KernelContext& ctx) {
  const DType base = ctx.input(0).dtype, exponent = ctx.input(1).dtype;
  if (absl::Status s = CheckOutputDType(ctx, base); !s.ok()) return s;
  if (absl::Status s = CheckDType(ctx, base, kPowBase); !s.ok()) return s;
  if (absl::Status s = CheckDType(ctx, exponent, kNumeric); !s.ok()) return s;
  grove_k::EwParams p = BaseParams(grove_k::kEwPow);
  p.exp_dtype = static_cast<int>(exponent);
  return PrepareOne(ctx, base, p, 2);
}

absl::StatusOr<ir::PreparedKernel> PrepareWhere(const KernelContext& ctx) {
  if (absl::Status s = backends::CheckWhereInputs(ctx); !s.ok()) return s;
  const DType dtype = ctx.input(1).dtype;
  if (absl::Status s = CheckDType(ctx, dtype, kAny); !s.ok()) return s;
  return PrepareOne(ctx, dtype, BaseParams(grove_k::kEwWhere), 3);
}

// ---------------------------------------------------------------------------
// Variadic Min Max Sum Mean: one launch folds up to kEwMaxOperands inputs;
// more go through an accumulator of the compute type in the workspace, so
// f16/bf16 round once at the end as on the CPU.
// ---------------------------------------------------------------------------

template <int kOp, uint32_t kTypes>
absl::StatusOr<ir::PreparedKernel> PrepareVariadic(const KernelContext& ctx) {
  const int n = ctx.num_inputs();
  if (absl::Status s = backends::CheckVariadicInputs(ctx); !s.ok()) return s;
  const DType dtype = ctx.input(0).dtype;
  if (absl::Status s = CheckDType(ctx, dtype, kTypes); !s.ok()) return s;
  EwPrepared e;
  e.dtype = dtype;
  const int64_t count = ctx.output(0).num_elements();
  if (count == 0) return MakePrepared(std::move(e));

  constexpr int kChunk = grove_k::kEwMaxOperands;
  e.uses_acc = n > kChunk;
  const uint64_t acc_bytes = e.uses_acc ? static_cast<uint64_t>(count) * AccSize(dtype) : 0;
  for (int first = 0; first < n;) {
    // The first launch reads kChunk inputs; later ones the accumulator and
    // kChunk of them.
    const int take = std::min(kChunk, n - first);
    grove_k::EwParams p = BaseParams(n == 1 ? grove_k::kEwCopy : kOp);
    if (n == 1 && kOp == grove_k::kEwMean) p.op = grove_k::kEwMean;  // x / 1, as the CPU
    p.acc_in = first > 0 ? 1 : 0;
    p.acc_out = first + take < n ? 1 : 0;
    if (kOp == grove_k::kEwMean && !p.acc_out) p.mean_count = n;
    if (absl::Status s = AddLaunch(ctx, e, p, first, take); !s.ok()) return s;
    first += take;
  }
  return MakePrepared(std::move(e), acc_bytes);
}

// The invoke of every op above: pointers in, then the prepared launches.
absl::Status EwKernel(KernelContext& ctx) {
  const EwPrepared* e = PreparedParams<EwPrepared>(ctx);
  if (e == nullptr) return NotPrepared(ctx);
  ExecContext& ec = Exec(ctx);
  if (e->divisor_check.check.record != nullptr) {
    const TensorView& b = ctx.input(1);
    if (absl::Status s = LaunchNonZeroCheck(ec, b.data, DTypeSize(b.dtype), b.num_elements(), e->divisor_check.check);
        !s.ok()) {
      return s;
    }
  }
  for (const EwLaunch& l : e->launches) {
    grove_k::EwParams p = l.p;
    if (e->clip_bounds_at_run) {
      if (absl::Status s = ReadClipBound(ctx, 1, "min", p); !s.ok()) return s;
      if (absl::Status s = ReadClipBound(ctx, 2, "max", p); !s.ok()) return s;
    }
    p.out = ctx.output(0).data;
    for (int k = 0; k < l.count; ++k) p.in[k] = ctx.input(l.first + k).data;
    if (e->uses_acc) p.acc = ctx.workspace();
    if (absl::Status s = ec.Launch(l.module, "ew", l.dims, p); !s.ok()) return s;
  }
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------
// Cast, CastLike.
// ---------------------------------------------------------------------------

struct CastPrepared {
  int64_t n = 0;      // 0: nothing to do
  bool copy = false;  // same dtype: a device copy of `bytes` (none in place)
  uint64_t bytes = 0;
  jit::ModuleSpec module;
  LaunchDims dims;
};

absl::StatusOr<ir::PreparedKernel> PrepareCastElements(const KernelContext& ctx, const TensorView& in,
                                                       const TensorView& out) {
  CastPrepared c;
  c.n = in.num_elements();
  if (c.n == 0) return MakePrepared(std::move(c));
  if (in.dtype == out.dtype) {
    c.copy = true;
    c.bytes = in.byte_size();
    return MakePrepared(std::move(c));
  }
  if (absl::Status s = CheckDType(ctx, in.dtype, kAny); !s.ok()) return s;
  if (absl::Status s = CheckDType(ctx, out.dtype, kAny); !s.ok()) return s;
  // The "cast" variant the dispatcher picks, launched with its geometry.
  const VariantLaunch v = ChooseLaunch(ctx, CastProblem(in.dtype, out.dtype, c.n));
  c.module = v.module;
  c.dims = v.dims;
  return MakePrepared(std::move(c));
}

absl::StatusOr<ir::PreparedKernel> PrepareCast(const KernelContext& ctx) {
  if (absl::Status s = backends::CheckCastOutput(ctx); !s.ok()) return s;
  return PrepareCastElements(ctx, ctx.input(0), ctx.output(0));
}

absl::StatusOr<ir::PreparedKernel> PrepareCastLike(const KernelContext& ctx) {
  const TensorView& in = ctx.input(0);
  if (absl::Status s = CheckOutputLike(ctx, ctx.input(1).dtype, in.shape); !s.ok()) return s;
  return PrepareCastElements(ctx, in, ctx.output(0));
}

absl::Status CastKernel(KernelContext& ctx) {
  const CastPrepared* c = PreparedParams<CastPrepared>(ctx);
  if (c == nullptr) return NotPrepared(ctx);
  if (c->n == 0) return absl::OkStatus();
  const TensorView& in = ctx.input(0);
  TensorView& out = ctx.output(0);
  ExecContext& ec = Exec(ctx);
  if (c->copy) {
    if (in.data == out.data) return absl::OkStatus();
    return ec.device().CopyAsync(out.data, in.data, c->bytes, ec.stream());
  }
  grove_k::CastParams p{in.data, out.data, c->n};
  return ec.Launch(c->module, "cast", c->dims, p);
}

}  // namespace

absl::Status RegisterCudaElementwiseKernels(ir::OpRegistry& registry) {
  using namespace grove_k;  // NOLINT: the op codes
  const struct {
    const char* type;
    ir::PrepareFn prepare;
    ir::KernelFn invoke = &EwKernel;
    uint64_t host_inputs = 0;
  } kernels[] = {
      {"Neg", &PrepareUnary<kEwNeg, kSigned>},
      {"Abs", &PrepareUnary<kEwAbs, kNumeric>},
      {"Exp", &PrepareUnary<kEwExp, kFloat>},
      {"Log", &PrepareUnary<kEwLog, kFloat>},
      {"Sqrt", &PrepareUnary<kEwSqrt, kFloat>},
      {"Reciprocal", &PrepareUnary<kEwReciprocal, kFloat>},
      {"Erf", &PrepareUnary<kEwErf, kNumeric>},
      {"Tanh", &PrepareUnary<kEwTanh, kFloat>},
      {"Sigmoid", &PrepareUnary<kEwSigmoid, kFloat>},
      {"Relu", &PrepareUnary<kEwRelu, kFloat>},
      {"LeakyRelu", &PrepareUnary<kEwLeakyRelu, kFloat>},
      {"Elu", &PrepareUnary<kEwElu, kFloat>},
      {"Gelu", &PrepareUnary<kEwGelu, kFloat>},
      {"HardSigmoid", &PrepareUnary<kEwHardSigmoid, kFloat>},
      {"HardSwish", &PrepareUnary<kEwHardSwish, kFloat>},
      {"Softplus", &PrepareUnary<kEwSoftplus, kFloat>},
      {"Sin", &PrepareUnary<kEwSin, kFloat>},
      {"Cos", &PrepareUnary<kEwCos, kFloat>},
      {"Tan", &PrepareUnary<kEwTan, kFloat>},
      {"Asin", &PrepareUnary<kEwAsin, kFloat>},
      {"Acos", &PrepareUnary<kEwAcos, kFloat>},
      {"Atan", &PrepareUnary<kEwAtan, kFloat>},
      {"Sinh", &PrepareUnary<kEwSinh, kFloat>},
      {"Cosh", &PrepareUnary<kEwCosh, kFloat>},
      {"Asinh", &PrepareUnary<kEwAsinh, kFloat>},
      {"Acosh", &PrepareUnary<kEwAcosh, kFloat>},
      {"Atanh", &PrepareUnary<kEwAtanh, kFloat>},
      {"Softsign", &PrepareUnary<kEwSoftsign, kFloat>},
      {"Selu", &PrepareUnary<kEwSelu, kFloat>},
      {"Celu", &PrepareUnary<kEwCelu, kFloat>},
      {"ThresholdedRelu", &PrepareUnary<kEwThresholdedRelu, kFloat>},
      {"Clip", &PrepareClip, &EwKernel, 0b110},  // min, max
      {"Not", &PrepareNot},
      {"Add", &PrepareArithmetic<kEwAdd>},
      {"Sub", &PrepareArithmetic<kEwSub>},
      {"Mul", &PrepareArithmetic<kEwMul>},
      {"Div", &PrepareArithmetic<kEwDiv>},
      {"Pow", &PreparePow},
      {"Min", &PrepareVariadic<kEwMin, kNumeric>},
      {"Max", &PrepareVariadic<kEwMax, kNumeric>},
      {"Sum", &PrepareVariadic<kEwSum, kFloat>},
      {"Mean", &PrepareVariadic<kEwMean, kFloat>},
      {"Equal", &PrepareCompare<kEwEqual, kAny>},
      {"Greater", &PrepareCompare<kEwGreater, kAny>},
      {"Less", &PrepareCompare<kEwLess, kAny>},
      {"GreaterOrEqual", &PrepareCompare<kEwGreaterOrEqual, kNumeric>},
      {"LessOrEqual", &PrepareCompare<kEwLessOrEqual, kNumeric>},
      {"And", &PrepareLogical<kEwAnd>},
      {"Or", &PrepareLogical<kEwOr>},
      {"Xor", &PrepareLogical<kEwXor>},
      {"Where", &PrepareWhere},
      {"Cast", &PrepareCast, &CastKernel},
      {"CastLike", &PrepareCastLike, &CastKernel},
  };
  for (const auto& k : kernels) {
    if (absl::Status s =
            registry.SetKernel(k.type, ir::Backend::kCuda, ir::KernelDef{k.invoke, k.prepare, k.host_inputs});
        !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

}  // namespace grove::cuda
