// CPU reference kernels of the quantization group: QuantizeLinear,
// DequantizeLinear, DynamicQuantizeLinear, MatMulInteger, ConvInteger,
// QLinearMatMul and QLinearConv.
//
// Quantizing rounds half to even (std::nearbyint in the default rounding
// mode) and saturates to the output type; a NaN quantizes as 0 would, to the
// zero point. Integer products are exact and accumulate in int64, wrapped to
// int32 at the end, which is what an int32 accumulator that may overflow
// gives. The requantizing ops scale the int32 accumulator by the float32
// product scale_a * scale_b / scale_y in double, as the ONNX reference does.
// The attributes, every shape and dtype check, the strides and the loops of
// the dtypes are prepared once per plan; scales and zero points are small
// and read when the step runs (they may be activations) into the declared
// workspace, every shape that indexes them checked by the prepare.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "lib/backends/common/kernel_checks.h"
#include "lib/backends/common/prepared.h"
#include "lib/backends/common/window.h"
#include "lib/backends/cpu/cpu_kernels.h"
#include "lib/backends/cpu/workspace_layout.h"
#include "lib/ir/element_types.h"

namespace grove::cpu {

using ir::BFloat16;
using ir::FromCompute;
using ir::Half;
using ir::ToCompute;
using ir::VisitDType;

namespace {

using backends::CheckOutput;
using backends::ShapeStr;
using ir::KernelContext;

std::string InputStr(int i, absl::string_view name) { return absl::StrCat("input ", i, " (", name, ")"); }

// v rounded half to even, plus `zero`, saturated to Q; NaN counts as 0.
template <typename Q>
Q Requantize(double v, int64_t zero) {
  const double r = (std::isnan(v) ? 0.0 : std::nearbyint(v)) + static_cast<double>(zero);
  constexpr double lo = std::numeric_limits<Q>::min();
  constexpr double hi = std::numeric_limits<Q>::max();
  return static_cast<Q>(std::clamp(r, lo, hi));
}

// Scales and zero points are read when the step runs (their values may be
// activations), into the workspace; the prepare checks their dtypes.
bool IsIntParam(DType d) {
  return d == DType::kU8 || d == DType::kI8 || d == DType::kU16 || d == DType::kI16 || d == DType::kI32;
}
bool IsFloatParam(DType d) { return d == DType::kF32 || d == DType::kF16 || d == DType::kBF16; }

absl::Status CheckIntParam(const KernelContext& ctx, int i, absl::string_view name) {
  const DType d = ctx.input(i).dtype;
  if (IsIntParam(d)) return absl::OkStatus();
  return ctx.Error(absl::StrCat(InputStr(i, name), " has dtype ", DTypeName(d), "; expected an integer"));
}

absl::Status CheckFloatParam(const KernelContext& ctx, int i, absl::string_view name) {
  const DType d = ctx.input(i).dtype;
  if (IsFloatParam(d)) return absl::OkStatus();
  return ctx.Error(absl::StrCat(InputStr(i, name), " has dtype ", DTypeName(d), "; expected f32, f16 or bf16"));
}

template <typename T, typename R>
void Convert(const TensorView& t, R* out) {
  const T* p = t.as<const T>();
  const int64_t n = t.num_elements();
  for (int64_t k = 0; k < n; ++k) out[k] = static_cast<R>(ToCompute(p[k]));
}

// The elements of a small integer tensor (zero points) as int32 (its dtype
// passed CheckIntParam).
void ReadInts(const TensorView& t, int32_t* out) {
  switch (t.dtype) {
    case DType::kU8:
      return Convert<uint8_t>(t, out);
    case DType::kI8:
      return Convert<int8_t>(t, out);
    case DType::kU16:
      return Convert<uint16_t>(t, out);
    case DType::kI16:
      return Convert<int16_t>(t, out);
    default:
      return Convert<int32_t>(t, out);
  }
}

// The elements of a small float tensor (scales) in float (its dtype passed
// CheckFloatParam).
void ReadFloats(const TensorView& t, float* out) {
  switch (t.dtype) {
    case DType::kF16:
      return Convert<Half>(t, out);
    case DType::kBF16:
      return Convert<BFloat16>(t, out);
    default:
      return Convert<float>(t, out);
  }
}

bool IsPerTensor(const TensorView& t) { return t.num_elements() == 1 && t.shape.size() <= 1; }

// Input i is per tensor ([] or [1]) or, when count >= 0, a vector of
// `count` elements.
absl::Status CheckScalarOrVector(const KernelContext& ctx, int i, absl::string_view name, int64_t count) {
  const TensorView& t = ctx.input(i);
  if (IsPerTensor(t)) return absl::OkStatus();
  if (count >= 0 && t.shape.size() == 1 && t.shape[0] == count) return absl::OkStatus();
  return ctx.Error(
      absl::StrCat(InputStr(i, name), " has shape ", ShapeStr(t.shape), "; expected [] or [1]",
                   count >= 0 ? absl::StrCat(" or [", count, "] (per output channel)") : std::string(" (per tensor)")));
}

// A zero point (input i, optional: absent is one 0) of an operand of
// `operand_dtype`: its dtype checked, its element count.
absl::StatusOr<int64_t> CheckZeroPoint(const KernelContext& ctx, int i, absl::string_view name, DType operand_dtype) {
  if (!ctx.has_input(i)) return 1;
  if (ctx.input(i).dtype != operand_dtype) {
    return ctx.Error(absl::StrCat(InputStr(i, name), " has dtype ", DTypeName(ctx.input(i).dtype), "; expected ",
                                  DTypeName(operand_dtype), " like its operand"));
  }
  if (absl::Status s = CheckIntParam(ctx, i, name); !s.ok()) return s;
  return ctx.input(i).num_elements();
}

// Reads zero point i (absent: one 0) into `out`.
void ReadZeroPoint(const KernelContext& ctx, int i, int32_t* out) {
  if (ctx.has_input(i)) {
    ReadInts(ctx.input(i), out);
  } else {
    out[0] = 0;
  }
}

// ---------------------------------------------------------------------------
// QuantizeLinear, DequantizeLinear
// ---------------------------------------------------------------------------

// Scale (input 1) and zero point (input 2, default 0) of x (input 0), per
// tensor or along the axis attribute: element e of x uses entry
// (e / inner) % channels. `count` scales and as many zero points are read
// per run into the workspace.
struct AxisParams {
  int64_t channels = 1, inner = 1, outer = 0, count = 1;
  void (*run)(const AxisParams& p, const void* in, void* out, const float* scale, const int32_t* zero) = nullptr;
};

absl::StatusOr<AxisParams> ResolveAxisParams(const KernelContext& ctx, absl::string_view scale_name,
                                             absl::string_view zero_name) {
  const TensorView& x = ctx.input(0);
  const TensorView& s = ctx.input(1);
  AxisParams p;
  if (!IsPerTensor(s)) {
    const int64_t axis_attr = ctx.attrs().GetInt("axis", 1);
    absl::StatusOr<int> axis = ir::NormalizeAxis(axis_attr, static_cast<int>(x.shape.size()));
    if (!axis.ok()) {
      return ctx.Error(absl::StrCat("attribute 'axis' is ", axis_attr, " but input 0 (x) has shape ", ShapeStr(x.shape),
                                    "; a per-axis ", InputStr(1, scale_name), " ", ShapeStr(s.shape),
                                    " needs an axis in [", -static_cast<int>(x.shape.size()), ", ", x.shape.size(),
                                    ")"));
    }
    if (s.shape.size() != 1 || s.shape[0] != x.shape[*axis]) {
      return ctx.Error(absl::StrCat(InputStr(1, scale_name), " has shape ", ShapeStr(s.shape),
                                    "; expected [] or [1] (per tensor) or [", x.shape[*axis], "] (input 0 (x) ",
                                    ShapeStr(x.shape), " along axis ", axis_attr, ")"));
    }
    p.channels = x.shape[*axis];
    for (size_t d = static_cast<size_t>(*axis) + 1; d < x.shape.size(); ++d) p.inner *= x.shape[d];
  }
  const int64_t block = p.channels * p.inner;
  p.outer = block == 0 ? 0 : x.num_elements() / block;
  if (absl::Status st = CheckFloatParam(ctx, 1, scale_name); !st.ok()) return st;
  p.count = s.num_elements();
  if (ctx.has_input(2)) {
    const TensorView& z = ctx.input(2);
    if (!(IsPerTensor(z) && IsPerTensor(s)) && z.shape != s.shape) {
      return ctx.Error(absl::StrCat(InputStr(2, zero_name), " has shape ", ShapeStr(z.shape), " but ",
                                    InputStr(1, scale_name), " has shape ", ShapeStr(s.shape),
                                    "; expected the same shape"));
    }
    if (absl::Status st = CheckIntParam(ctx, 2, zero_name); !st.ok()) return st;
  }
  return p;
}

// The workspace of an AxisParams: its scales, then its zero points.
uint64_t AxisWorkspace(const AxisParams& p) {
  WorkspaceLayout layout;
  layout.Add<float>(p.count);
  layout.Add<int32_t>(p.count);
  return layout.bytes();
}

// Reads the scales and zero points into the workspace and runs the loop.
absl::Status InvokeAxis(KernelContext& ctx) {
  const AxisParams* p = backends::PreparedParams<AxisParams>(ctx);
  if (p == nullptr) return backends::NotPrepared(ctx, "CPU");
  WorkspaceCursor ws(ctx.workspace());
  float* scale = ws.Take<float>(p->count);
  int32_t* zero = ws.Take<int32_t>(p->count);
  ReadFloats(ctx.input(1), scale);
  if (ctx.has_input(2)) {
    ReadInts(ctx.input(2), zero);
  } else {
    std::fill(zero, zero + p->count, 0);
  }
  p->run(*p, ctx.input(0).data, ctx.output(0).data, scale, zero);
  return absl::OkStatus();
}

// Runs fn(element, channel) over x in order.
template <typename Fn>
void ForEachAxisElement(const AxisParams& p, Fn&& fn) {
  int64_t e = 0;
  for (int64_t o = 0; o < p.outer; ++o) {
    for (int64_t c = 0; c < p.channels; ++c) {
      for (int64_t i = 0; i < p.inner; ++i) fn(e++, c);
    }
  }
}

template <typename X, typename Q>
void RunQuantize(const AxisParams& p, const void* in_data, void* out_data, const float* scale, const int32_t* zero) {
  const X* in = static_cast<const X*>(in_data);
  Q* out = static_cast<Q*>(out_data);
  ForEachAxisElement(p, [&](int64_t e, int64_t c) {
    // The division in the input's precision: float, or double for i32.
    double q;
    if constexpr (std::is_same_v<X, int32_t>) {
      q = static_cast<double>(in[e]) / static_cast<double>(scale[c]);
    } else {
      q = ToCompute(in[e]) / scale[c];
    }
    out[e] = Requantize<Q>(q, zero[c]);
  });
}

absl::StatusOr<ir::PreparedKernel> PrepareQuantizeLinear(const KernelContext& ctx) {
  const TensorView& x = ctx.input(0);
  const DType out_dtype = ctx.has_input(2) ? ctx.input(2).dtype : DType::kU8;
  if (absl::Status s = CheckOutput(ctx, 0, out_dtype, x.shape); !s.ok()) return s;
  absl::StatusOr<AxisParams> p = ResolveAxisParams(ctx, "y_scale", "y_zero_point");
  if (!p.ok()) return p.status();
  absl::Status chosen = VisitDType<float, Half, BFloat16, int32_t>(ctx, x.dtype, [&](auto xtag) {
    using X = typename decltype(xtag)::type;
    return VisitDType<uint8_t, int8_t, uint16_t, int16_t>(ctx, out_dtype, [&](auto qtag) {
      p->run = &RunQuantize<X, typename decltype(qtag)::type>;
      return absl::OkStatus();
    });
  });
  if (!chosen.ok()) return chosen;
  const uint64_t bytes = AxisWorkspace(*p);
  return backends::MakePrepared(*std::move(p), bytes);
}

template <typename X, typename Y>
void RunDequantize(const AxisParams& p, const void* in_data, void* out_data, const float* scale,
                   const int32_t* zero) {
  const X* in = static_cast<const X*>(in_data);
  Y* out = static_cast<Y*>(out_data);
  ForEachAxisElement(p, [&](int64_t e, int64_t c) {
    const float diff = static_cast<float>(static_cast<int64_t>(in[e]) - zero[c]);
    out[e] = FromCompute<Y>(diff * scale[c]);
  });
}

absl::StatusOr<ir::PreparedKernel> PrepareDequantizeLinear(const KernelContext& ctx) {
  const TensorView& x = ctx.input(0);
  if (ctx.has_input(2) && ctx.input(2).dtype != x.dtype) {
    return ctx.Error(absl::StrCat("input 2 (x_zero_point) has dtype ", DTypeName(ctx.input(2).dtype), "; expected ",
                                  DTypeName(x.dtype), " like input 0 (x)"));
  }
  const DType out_dtype = ctx.input(1).dtype;
  if (absl::Status s = CheckOutput(ctx, 0, out_dtype, x.shape); !s.ok()) return s;
  absl::StatusOr<AxisParams> p = ResolveAxisParams(ctx, "x_scale", "x_zero_point");
  if (!p.ok()) return p.status();
  absl::Status chosen = VisitDType<uint8_t, int8_t, uint16_t, int16_t, int32_t>(ctx, x.dtype, [&](auto xtag) {
    using X = typename decltype(xtag)::type;
    return VisitDType<float, Half, BFloat16>(ctx, out_dtype, [&](auto ytag) {
      p->run = &RunDequantize<X, typename decltype(ytag)::type>;
      return absl::OkStatus();
    });
  });
  if (!chosen.ok()) return chosen;
  const uint64_t bytes = AxisWorkspace(*p);
  return backends::MakePrepared(*std::move(p), bytes);
}

// DynamicQuantizeLinear: its dtype and output checks once (it has no
// parameters); the range is the data's, found per run.
struct DynamicQuantizeParams {};

absl::StatusOr<ir::PreparedKernel> PrepareDynamicQuantizeLinear(const KernelContext& ctx) {
  const TensorView& x = ctx.input(0);
  if (x.dtype != DType::kF32) {
    return ctx.Error(absl::StrCat("input 0 (x) has dtype ", DTypeName(x.dtype), "; expected f32"));
  }
  if (absl::Status s = CheckOutput(ctx, 0, DType::kU8, x.shape); !s.ok()) return s;
  for (int i = 1; i < 3; ++i) {
    if (!ctx.has_output(i)) continue;
    if (absl::Status s = CheckOutput(ctx, i, i == 1 ? DType::kF32 : DType::kU8, {}); !s.ok()) return s;
  }
  return backends::MakePrepared(DynamicQuantizeParams{});
}

// The ONNX formula for uint8: the range [min(x), max(x)] widened to hold 0
// (NaNs skipped; an empty or all-zero x gives the range [0, 0], scale 1/255).
absl::Status DynamicQuantizeLinearKernel(KernelContext& ctx) {
  if (backends::PreparedParams<DynamicQuantizeParams>(ctx) == nullptr) return backends::NotPrepared(ctx, "CPU");
  const TensorView& x = ctx.input(0);
  const float* in = x.as<const float>();
  const int64_t n = x.num_elements();
  float lo = 0.0f, hi = 0.0f;
  for (int64_t i = 0; i < n; ++i) {
    if (std::isnan(in[i])) continue;
    lo = std::min(lo, in[i]);
    hi = std::max(hi, in[i]);
  }
  const float scale = (hi == lo ? 1.0f : hi - lo) / 255.0f;
  const float initial_zero = 0.0f - lo / scale;
  const uint8_t zero = Requantize<uint8_t>(std::isnan(initial_zero) ? 0.0f : std::clamp(initial_zero, 0.0f, 255.0f), 0);
  uint8_t* out = ctx.output(0).as<uint8_t>();
  for (int64_t i = 0; i < n; ++i) out[i] = Requantize<uint8_t>(in[i] / scale, zero);
  if (ctx.has_output(1)) *ctx.output(1).as<float>() = scale;
  if (ctx.has_output(2)) *ctx.output(2).as<uint8_t>() = zero;
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------
// MatMulInteger, QLinearMatMul
// ---------------------------------------------------------------------------

// A [..., M, K] times B [..., K, N] (rank-1 operands as in numpy), with the
// batch dims padded with 1s to `batch`'s rank and the element strides of A
// and B along them (0 where broadcast).
struct IntMatMul {
  int64_t m = 1, n = 1, k = 0;
  std::vector<int64_t> batch, a_strides, b_strides;
  std::vector<int64_t> out_shape;
  int64_t batch_count = 1;
};

// Strides over the last `rank` of `padded_dims` dims of a contiguous tensor
// whose trailing dims hold `inner` elements; 0 along dims of size 1.
std::vector<int64_t> BroadcastStrides(const std::vector<int64_t>& padded_dims, int64_t inner) {
  std::vector<int64_t> strides(padded_dims.size(), 0);
  int64_t s = inner;
  for (int i = static_cast<int>(padded_dims.size()) - 1; i >= 0; --i) {
    strides[i] = padded_dims[i] == 1 ? 0 : s;
    s *= padded_dims[i];
  }
  return strides;
}

absl::StatusOr<IntMatMul> ResolveIntMatMul(const KernelContext& ctx, int ai, int bi, DType out_dtype) {
  const TensorView& a = ctx.input(ai);
  const TensorView& b = ctx.input(bi);
  const int ra = static_cast<int>(a.shape.size());
  const int rb = static_cast<int>(b.shape.size());
  if (ra == 0 || rb == 0) {
    return ctx.Error(absl::StrCat("input ", ra == 0 ? ai : bi, " is a scalar (rank 0); expected rank >= 1"));
  }
  IntMatMul p;
  p.m = ra == 1 ? 1 : a.shape[ra - 2];
  p.k = a.shape[ra - 1];
  const int64_t kb = rb == 1 ? b.shape[0] : b.shape[rb - 2];
  p.n = rb == 1 ? 1 : b.shape[rb - 1];
  if (p.k != kb) {
    return ctx.Error(absl::StrCat("inner dims differ: input ", ai, " ", ShapeStr(a.shape), " has K=", p.k, ", input ",
                                  bi, " ", ShapeStr(b.shape), " has K=", kb));
  }
  const int bra = std::max(ra - 2, 0), brb = std::max(rb - 2, 0);
  const int nb = std::max(bra, brb);
  std::vector<int64_t> da(nb), db(nb);
  p.batch.resize(nb);
  for (int i = 0; i < nb; ++i) {
    da[i] = i >= nb - bra ? a.shape[i - (nb - bra)] : 1;
    db[i] = i >= nb - brb ? b.shape[i - (nb - brb)] : 1;
    if (da[i] != db[i] && da[i] != 1 && db[i] != 1) {
      return ctx.Error(absl::StrCat("batch dims of input ", ai, " ", ShapeStr(a.shape), " and input ", bi, " ",
                                    ShapeStr(b.shape), " do not broadcast"));
    }
    p.batch[i] = da[i] == 1 ? db[i] : da[i];
    p.batch_count *= p.batch[i];
  }
  p.a_strides = BroadcastStrides(da, p.m * p.k);
  p.b_strides = BroadcastStrides(db, p.k * p.n);
  p.out_shape = p.batch;
  if (ra != 1) p.out_shape.push_back(p.m);
  if (rb != 1) p.out_shape.push_back(p.n);
  if (absl::Status s = CheckOutput(ctx, 0, out_dtype, p.out_shape); !s.ok()) return s;
  return p;
}

// A scale or zero point laid over its operand: per tensor, per row of A
// ([M] or [..., M, 1]) or per column of B ([N] or [..., 1, N]). Entry for
// batch index b and row (A) or column (B) r: sum b_i * batch_strides[i] +
// r * line_stride.
struct MatParam {
  std::vector<int64_t> batch_strides;
  int64_t line_stride = 0;
};

absl::StatusOr<MatParam> ResolveMatParam(const KernelContext& ctx, int pi, absl::string_view name, int oi, bool is_a,
                                         const IntMatMul& mm) {
  const TensorView& p = ctx.input(pi);
  const TensorView& o = ctx.input(oi);
  const int nb = static_cast<int>(mm.batch.size());
  MatParam r;
  r.batch_strides.assign(nb, 0);
  if (p.num_elements() == 1) return r;
  const int ro = static_cast<int>(o.shape.size());
  const auto fail = [&]() {
    const std::string expected =
        ro < 2 ? std::string("[] or [1] (the operand has rank 1)")
        : is_a ? absl::StrCat("[] or [1], [", mm.m, "] or [..., ", mm.m, ", 1] (per row of A)")
               : absl::StrCat("[] or [1], [", mm.n, "] or [..., 1, ", mm.n, "] (per column of B)");
    return ctx.Error(absl::StrCat(InputStr(pi, name), " has shape ", ShapeStr(p.shape), " for input ", oi, " ",
                                  ShapeStr(o.shape), "; expected ", expected));
  };
  if (ro < 2) return fail();
  // p's shape at the operand's rank.
  std::vector<int64_t> dims(ro, 1);
  if (p.shape.size() == 1) {
    if (p.shape[0] != (is_a ? mm.m : mm.n)) return fail();
    dims[is_a ? ro - 2 : ro - 1] = p.shape[0];
  } else {
    if (static_cast<int>(p.shape.size()) > ro) return fail();
    std::copy(p.shape.begin(), p.shape.end(), dims.end() - p.shape.size());
  }
  for (int d = 0; d < ro; ++d) {
    const bool across = is_a ? d == ro - 1 : d == ro - 2;  // the dim a parameter must not vary along
    if (across ? dims[d] != 1 : dims[d] != 1 && dims[d] != o.shape[d]) return fail();
  }
  const std::vector<int64_t> strides = BroadcastStrides(dims, 1);
  r.line_stride = is_a ? strides[ro - 2] : strides[ro - 1];
  for (int d = 0; d < ro - 2; ++d) r.batch_strides[nb - (ro - 2) + d] = strides[d];
  return r;
}

// fn(out_index, a_param_index, b_param_index, acc) for each output element,
// acc the int32 (wrapped) sum over k of (a - za) * (b - zb); za holds
// za_count zero points (one: per tensor), zb zb_count.
template <typename TA, typename TB, typename Fn>
void IntMatMulLoop(const IntMatMul& mm, const TA* a, const TB* b, const int32_t* za, int64_t za_count,
                   const MatParam& pa, const int32_t* zb, int64_t zb_count, const MatParam& pb, Fn&& fn) {
  const int nb = static_cast<int>(mm.batch.size());
  int64_t out = 0;
  for (int64_t bi = 0; bi < mm.batch_count; ++bi) {
    int64_t a_off = 0, b_off = 0, pa_off = 0, pb_off = 0;
    for (int64_t rem = bi, d = nb - 1; d >= 0; --d) {
      const int64_t idx = rem % mm.batch[d];
      rem /= mm.batch[d];
      a_off += idx * mm.a_strides[d];
      b_off += idx * mm.b_strides[d];
      pa_off += idx * pa.batch_strides[d];
      pb_off += idx * pb.batch_strides[d];
    }
    for (int64_t i = 0; i < mm.m; ++i) {
      const int64_t ia = pa_off + i * pa.line_stride;
      const int64_t zai = za_count == 1 ? za[0] : za[ia];
      const TA* arow = a + a_off + i * mm.k;
      for (int64_t j = 0; j < mm.n; ++j) {
        const int64_t ib = pb_off + j * pb.line_stride;
        const int64_t zbj = zb_count == 1 ? zb[0] : zb[ib];
        const TB* bcol = b + b_off + j;
        int64_t acc = 0;
        for (int64_t t = 0; t < mm.k; ++t) {
          acc += (static_cast<int64_t>(arow[t]) - zai) * (static_cast<int64_t>(bcol[t * mm.n]) - zbj);
        }
        fn(out++, ia, ib, static_cast<int32_t>(acc));
      }
    }
  }
}

// MatMulInteger and QLinearMatMul: the product's shapes and strides, each
// parameter's layout over its operand, the element counts of the scales
// and zero points (read per run into the workspace) and the loop of the
// dtypes, made once.
struct IntMatMulParams {
  IntMatMul mm;
  MatParam pa, pb;
  int64_t za_count = 1, zb_count = 1, sa_count = 1, sb_count = 1;
  void (*run)(const IntMatMulParams& p, KernelContext& ctx) = nullptr;
};

// The workspace of an IntMatMulParams: a's and b's zero points, then (for
// QLinearMatMul) their scales.
uint64_t IntMatMulWorkspace(const IntMatMulParams& p, bool scales) {
  WorkspaceLayout layout;
  layout.Add<int32_t>(p.za_count);
  layout.Add<int32_t>(p.zb_count);
  if (scales) {
    layout.Add<float>(p.sa_count);
    layout.Add<float>(p.sb_count);
  }
  return layout.bytes();
}

template <typename TA, typename TB>
void RunMatMulInteger(const IntMatMulParams& p, KernelContext& ctx) {
  WorkspaceCursor ws(ctx.workspace());
  int32_t* za = ws.Take<int32_t>(p.za_count);
  int32_t* zb = ws.Take<int32_t>(p.zb_count);
  ReadZeroPoint(ctx, 2, za);
  ReadZeroPoint(ctx, 3, zb);
  int32_t* y = ctx.output(0).as<int32_t>();
  IntMatMulLoop(p.mm, ctx.input(0).as<const TA>(), ctx.input(1).as<const TB>(), za, p.za_count, p.pa, zb, p.zb_count,
                p.pb, [&](int64_t o, int64_t, int64_t, int32_t acc) { y[o] = acc; });
}

absl::StatusOr<ir::PreparedKernel> PrepareMatMulInteger(const KernelContext& ctx) {
  IntMatMulParams p;
  absl::StatusOr<IntMatMul> mm = ResolveIntMatMul(ctx, 0, 1, DType::kI32);
  if (!mm.ok()) return mm.status();
  p.mm = *std::move(mm);
  absl::StatusOr<int64_t> za = CheckZeroPoint(ctx, 2, "a_zero_point", ctx.input(0).dtype);
  if (!za.ok()) return za.status();
  absl::StatusOr<int64_t> zb = CheckZeroPoint(ctx, 3, "b_zero_point", ctx.input(1).dtype);
  if (!zb.ok()) return zb.status();
  p.za_count = *za;
  p.zb_count = *zb;
  p.pa.batch_strides.assign(p.mm.batch.size(), 0);
  p.pb.batch_strides.assign(p.mm.batch.size(), 0);
  if (ctx.has_input(2)) {
    absl::StatusOr<MatParam> r = ResolveMatParam(ctx, 2, "a_zero_point", 0, true, p.mm);
    if (!r.ok()) return r.status();
    p.pa = *std::move(r);
  }
  if (ctx.has_input(3)) {
    absl::StatusOr<MatParam> r = ResolveMatParam(ctx, 3, "b_zero_point", 1, false, p.mm);
    if (!r.ok()) return r.status();
    p.pb = *std::move(r);
  }
  absl::Status chosen = VisitDType<uint8_t, int8_t>(ctx, ctx.input(0).dtype, [&](auto atag) {
    using TA = typename decltype(atag)::type;
    return VisitDType<uint8_t, int8_t>(ctx, ctx.input(1).dtype, [&](auto btag) {
      p.run = &RunMatMulInteger<TA, typename decltype(btag)::type>;
      return absl::OkStatus();
    });
  });
  if (!chosen.ok()) return chosen;
  const uint64_t bytes = IntMatMulWorkspace(p, false);
  return backends::MakePrepared(std::move(p), bytes);
}

// The float32 multiplier of an accumulator: scale_a * scale_b / scale_y.
float Multiplier(float sa, float sb, float sy) { return sa * sb / sy; }

// The one float of a per-tensor scale, the one int of a per-tensor zero
// point (input i).
float ScalarScale(const KernelContext& ctx, int i) {
  float v = 0;
  ReadFloats(ctx.input(i), &v);
  return v;
}
int32_t ScalarZero(const KernelContext& ctx, int i) {
  int32_t v = 0;
  ReadInts(ctx.input(i), &v);
  return v;
}

template <typename TA, typename TB, typename TY>
void RunQLinearMatMul(const IntMatMulParams& p, KernelContext& ctx) {
  WorkspaceCursor ws(ctx.workspace());
  int32_t* za = ws.Take<int32_t>(p.za_count);
  int32_t* zb = ws.Take<int32_t>(p.zb_count);
  float* sa = ws.Take<float>(p.sa_count);
  float* sb = ws.Take<float>(p.sb_count);
  ReadZeroPoint(ctx, 2, za);
  ReadZeroPoint(ctx, 5, zb);
  ReadFloats(ctx.input(1), sa);
  ReadFloats(ctx.input(4), sb);
  const float ys = ScalarScale(ctx, 6);
  const int32_t yz = ScalarZero(ctx, 7);
  TY* y = ctx.output(0).as<TY>();
  IntMatMulLoop(p.mm, ctx.input(0).as<const TA>(), ctx.input(3).as<const TB>(), za, p.za_count, p.pa, zb, p.zb_count,
                p.pb, [&](int64_t o, int64_t ia, int64_t ib, int32_t acc) {
                  const float mult = Multiplier(p.sa_count == 1 ? sa[0] : sa[ia], p.sb_count == 1 ? sb[0] : sb[ib], ys);
                  y[o] = Requantize<TY>(static_cast<double>(acc) * static_cast<double>(mult), yz);
                });
}

absl::StatusOr<ir::PreparedKernel> PrepareQLinearMatMul(const KernelContext& ctx) {
  const DType out_dtype = ctx.input(7).dtype;
  IntMatMulParams p;
  absl::StatusOr<IntMatMul> mm = ResolveIntMatMul(ctx, 0, 3, out_dtype);
  if (!mm.ok()) return mm.status();
  p.mm = *std::move(mm);
  struct Side {
    int scale, zero, operand;
    const char *scale_name, *zero_name;
    bool is_a;
    MatParam* param;
    int64_t *scale_count, *zero_count;
  };
  const Side sides[2] = {{1, 2, 0, "a_scale", "a_zero_point", true, &p.pa, &p.sa_count, &p.za_count},
                         {4, 5, 3, "b_scale", "b_zero_point", false, &p.pb, &p.sb_count, &p.zb_count}};
  for (const Side& side : sides) {
    const TensorView& sc = ctx.input(side.scale);
    const TensorView& z = ctx.input(side.zero);
    if (!(sc.num_elements() == 1 && z.num_elements() == 1) && sc.shape != z.shape) {
      return ctx.Error(absl::StrCat(InputStr(side.zero, side.zero_name), " has shape ", ShapeStr(z.shape), " but ",
                                    InputStr(side.scale, side.scale_name), " has shape ", ShapeStr(sc.shape),
                                    "; expected the same shape"));
    }
    absl::StatusOr<MatParam> r = ResolveMatParam(ctx, side.scale, side.scale_name, side.operand, side.is_a, p.mm);
    if (!r.ok()) return r.status();
    *side.param = *std::move(r);
    if (absl::Status s = CheckFloatParam(ctx, side.scale, side.scale_name); !s.ok()) return s;
    *side.scale_count = sc.num_elements();
    absl::StatusOr<int64_t> zc = CheckZeroPoint(ctx, side.zero, side.zero_name, ctx.input(side.operand).dtype);
    if (!zc.ok()) return zc.status();
    *side.zero_count = *zc;
  }
  if (absl::Status s = CheckScalarOrVector(ctx, 6, "y_scale", -1); !s.ok()) return s;
  if (absl::Status s = CheckScalarOrVector(ctx, 7, "y_zero_point", -1); !s.ok()) return s;
  if (absl::Status s = CheckFloatParam(ctx, 6, "y_scale"); !s.ok()) return s;
  if (absl::Status s = CheckIntParam(ctx, 7, "y_zero_point"); !s.ok()) return s;
  absl::Status chosen = VisitDType<uint8_t, int8_t>(ctx, ctx.input(0).dtype, [&](auto atag) {
    using TA = typename decltype(atag)::type;
    return VisitDType<uint8_t, int8_t>(ctx, ctx.input(3).dtype, [&](auto btag) {
      using TB = typename decltype(btag)::type;
      return VisitDType<uint8_t, int8_t>(ctx, out_dtype, [&](auto ytag) {
        p.run = &RunQLinearMatMul<TA, TB, typename decltype(ytag)::type>;
        return absl::OkStatus();
      });
    });
  });
  if (!chosen.ok()) return chosen;
  const uint64_t bytes = IntMatMulWorkspace(p, true);
  return backends::MakePrepared(std::move(p), bytes);
}

absl::Status InvokeIntMatMul(KernelContext& ctx) {
  const IntMatMulParams* p = backends::PreparedParams<IntMatMulParams>(ctx);
  if (p == nullptr) return backends::NotPrepared(ctx, "CPU");
  p->run(*p, ctx);
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------
// ConvInteger, QLinearConv
// ---------------------------------------------------------------------------

// x [N, C, spatial...] (input xi) and w [M, C / group, k...] (input wi) by
// Conv's geometry; output 0 checked as [N, M, out...] of `out_dtype`.
struct IntConv {
  backends::Window w;
  int64_t n = 0, c = 0, m = 0, group = 1;
};

absl::StatusOr<IntConv> ResolveIntConv(const KernelContext& ctx, int xi, int wi, DType out_dtype) {
  const TensorView& x = ctx.input(xi);
  const TensorView& wt = ctx.input(wi);
  if (absl::Status s = backends::CheckRank(ctx, xi, "x", 3); !s.ok()) return s;
  if (wt.shape.size() != x.shape.size()) {
    return ctx.Error(absl::StrCat(InputStr(wi, "w"), " has shape ", ShapeStr(wt.shape), "; expected rank ",
                                  x.shape.size(), " like ", InputStr(xi, "x"), " ", ShapeStr(x.shape)));
  }
  const int spatial = static_cast<int>(x.shape.size()) - 2;
  const std::vector<int64_t> w_kernel(wt.shape.begin() + 2, wt.shape.end());
  absl::StatusOr<ir::WindowGeometry> g = backends::ReadGeometry(ctx, ir::WindowOp::kConv, spatial, &w_kernel);
  if (!g.ok()) return g.status();
  IntConv r;
  r.group = ctx.attrs().GetInt("group", 1);
  r.n = x.shape[0];
  r.c = x.shape[1];
  r.m = wt.shape[0];
  if (r.c != wt.shape[1] * r.group || r.m % r.group != 0) {
    return ctx.Error(absl::StrCat(InputStr(xi, "x"), " ", ShapeStr(x.shape), " and ", InputStr(wi, "w"), " ",
                                  ShapeStr(wt.shape), " do not fit group ", r.group,
                                  ": expected x channels = w dim 1 * group and w dim 0 divisible by group"));
  }
  absl::StatusOr<backends::Window> w = backends::MakeWindow(ctx, *g, absl::Span<const int64_t>(x.shape).subspan(2));
  if (!w.ok()) return w.status();
  r.w = *std::move(w);
  if (r.w.kernel_size < 0) {
    return ctx.Error(absl::StrCat(InputStr(wi, "w"), " ", ShapeStr(wt.shape), " has too many kernel taps"));
  }
  std::vector<int64_t> out_shape = {r.n, r.m};
  out_shape.insert(out_shape.end(), r.w.out.begin(), r.w.out.end());
  if (absl::Status s = CheckOutput(ctx, 0, out_dtype, out_shape); !s.ok()) return s;
  return r;
}

// fn(out_index, output_channel, acc) for each output element, acc the int32
// (wrapped) sum of bias[m] and (x - xz) * (w - wz[m]) over the window
// (wz holds wz_count zero points: one, per tensor, or one per output
// channel); padding contributes 0, as x == xz would. base and tap hold
// win.spatial positions each (workspace).
template <typename TX, typename TW, typename Fn>
void IntConvLoop(const IntConv& cv, const TX* x, int32_t xz, const TW* w, const int32_t* wz, int64_t wz_count,
                 const int32_t* bias, int64_t* base, int64_t* tap, Fn&& fn) {
  const backends::Window& win = cv.w;
  const int sp = win.spatial;
  const int64_t cg = cv.c / cv.group, mg = cv.m / cv.group;
  for (int64_t n = 0; n < cv.n; ++n) {
    for (int64_t m = 0; m < cv.m; ++m) {
      const int64_t g = m / mg;
      const int64_t wzm = wz_count == 1 ? wz[0] : wz[m];
      const TW* wm = w + m * cg * win.kernel_size;
      for (int64_t o = 0; o < win.out_size; ++o) {
        for (int64_t rem = o, d = sp - 1; d >= 0; --d) {
          base[d] = (rem % win.out[d]) * win.strides[d] - win.pad_begin[d];
          rem /= win.out[d];
        }
        int64_t acc = bias != nullptr ? bias[m] : 0;
        for (int64_t ci = 0; ci < cg; ++ci) {
          const TX* xc = x + (n * cv.c + g * cg + ci) * win.in_size;
          const TW* wc = wm + ci * win.kernel_size;
          std::fill(tap, tap + sp, 0);
          for (int64_t t = 0; t < win.kernel_size; ++t) {
            int64_t off = 0;
            bool inside = true;
            for (int d = 0; d < sp && inside; ++d) {
              const int64_t pos = base[d] + tap[d] * win.dilations[d];
              inside = pos >= 0 && pos < win.in[d];
              off = off * win.in[d] + pos;
            }
            if (inside) acc += (static_cast<int64_t>(xc[off]) - xz) * (static_cast<int64_t>(wc[t]) - wzm);
            for (int d = sp - 1; d >= 0; --d) {
              if (++tap[d] < win.kernel[d]) break;
              tap[d] = 0;
            }
          }
        }
        fn((n * cv.m + m) * win.out_size + o, m, static_cast<int32_t>(acc));
      }
    }
  }
}

// ConvInteger and QLinearConv: the geometry, the checks of every input,
// the element count of w's zero points (and scales) and the loop of the
// dtypes, made once. Per run the workspace holds the window walk's
// positions, w's zero points and, for QLinearConv, w's scales and the
// multiplier of each output channel.
struct IntConvParams {
  IntConv cv;
  int64_t wz_count = 1, ws_count = 1;
  void (*run)(const IntConvParams& p, KernelContext& ctx) = nullptr;
};

struct IntConvScratch {
  int64_t *base, *tap;
  int32_t* wz;
  float *ws, *mult;
};

// The workspace's arrays, in this order (`scales`: QLinearConv's).
void AddIntConvScratch(const IntConvParams& p, bool scales, WorkspaceLayout& layout) {
  layout.Add<int64_t>(p.cv.w.spatial);
  layout.Add<int64_t>(p.cv.w.spatial);
  layout.Add<int32_t>(p.wz_count);
  if (scales) {
    layout.Add<float>(p.ws_count);
    layout.Add<float>(p.cv.m);
  }
}

IntConvScratch TakeIntConvScratch(const IntConvParams& p, bool scales, void* workspace) {
  WorkspaceCursor cursor(workspace);
  IntConvScratch s{};
  s.base = cursor.Take<int64_t>(p.cv.w.spatial);
  s.tap = cursor.Take<int64_t>(p.cv.w.spatial);
  s.wz = cursor.Take<int32_t>(p.wz_count);
  if (scales) {
    s.ws = cursor.Take<float>(p.ws_count);
    s.mult = cursor.Take<float>(p.cv.m);
  }
  return s;
}

template <typename TX, typename TW>
void RunConvInteger(const IntConvParams& p, KernelContext& ctx) {
  const IntConvScratch s = TakeIntConvScratch(p, false, ctx.workspace());
  const int32_t xz = ctx.has_input(2) ? ScalarZero(ctx, 2) : 0;
  ReadZeroPoint(ctx, 3, s.wz);
  int32_t* y = ctx.output(0).as<int32_t>();
  IntConvLoop(p.cv, ctx.input(0).as<const TX>(), xz, ctx.input(1).as<const TW>(), s.wz, p.wz_count, nullptr, s.base,
              s.tap, [&](int64_t o, int64_t, int32_t acc) { y[o] = acc; });
}

absl::StatusOr<ir::PreparedKernel> PrepareConvInteger(const KernelContext& ctx) {
  IntConvParams p;
  absl::StatusOr<IntConv> cv = ResolveIntConv(ctx, 0, 1, DType::kI32);
  if (!cv.ok()) return cv.status();
  p.cv = *std::move(cv);
  if (ctx.has_input(2)) {
    if (absl::Status s = CheckScalarOrVector(ctx, 2, "x_zero_point", -1); !s.ok()) return s;
  }
  if (ctx.has_input(3)) {
    if (absl::Status s = CheckScalarOrVector(ctx, 3, "w_zero_point", p.cv.m); !s.ok()) return s;
  }
  absl::StatusOr<int64_t> xz = CheckZeroPoint(ctx, 2, "x_zero_point", ctx.input(0).dtype);
  if (!xz.ok()) return xz.status();
  absl::StatusOr<int64_t> wz = CheckZeroPoint(ctx, 3, "w_zero_point", ctx.input(1).dtype);
  if (!wz.ok()) return wz.status();
  p.wz_count = *wz;
  absl::Status chosen = VisitDType<uint8_t, int8_t>(ctx, ctx.input(0).dtype, [&](auto xtag) {
    using TX = typename decltype(xtag)::type;
    return VisitDType<uint8_t, int8_t>(ctx, ctx.input(1).dtype, [&](auto wtag) {
      p.run = &RunConvInteger<TX, typename decltype(wtag)::type>;
      return absl::OkStatus();
    });
  });
  if (!chosen.ok()) return chosen;
  WorkspaceLayout layout;
  AddIntConvScratch(p, false, layout);
  const uint64_t bytes = layout.bytes();
  return backends::MakePrepared(std::move(p), bytes);
}

template <typename TX, typename TW, typename TY>
void RunQLinearConv(const IntConvParams& p, KernelContext& ctx) {
  const IntConvScratch s = TakeIntConvScratch(p, true, ctx.workspace());
  const float xs = ScalarScale(ctx, 1), ys = ScalarScale(ctx, 6);
  ReadFloats(ctx.input(4), s.ws);
  const int32_t xz = ScalarZero(ctx, 2), yz = ScalarZero(ctx, 7);
  ReadZeroPoint(ctx, 5, s.wz);
  const int64_t m = p.cv.m;
  for (int64_t i = 0; i < m; ++i) s.mult[i] = Multiplier(xs, p.ws_count == 1 ? s.ws[0] : s.ws[i], ys);
  const int32_t* bias = ctx.has_input(8) ? ctx.input(8).as<const int32_t>() : nullptr;
  const float* mult = s.mult;
  TY* y = ctx.output(0).as<TY>();
  IntConvLoop(p.cv, ctx.input(0).as<const TX>(), xz, ctx.input(3).as<const TW>(), s.wz, p.wz_count, bias, s.base,
              s.tap, [&](int64_t o, int64_t oc, int32_t acc) {
                y[o] = Requantize<TY>(static_cast<double>(acc) * static_cast<double>(mult[oc]), yz);
              });
}

absl::StatusOr<ir::PreparedKernel> PrepareQLinearConv(const KernelContext& ctx) {
  const DType out_dtype = ctx.input(7).dtype;
  IntConvParams p;
  absl::StatusOr<IntConv> cv = ResolveIntConv(ctx, 0, 3, out_dtype);
  if (!cv.ok()) return cv.status();
  p.cv = *std::move(cv);
  const int64_t m = p.cv.m;
  const std::pair<int, const char*> per_tensor[] = {
      {1, "x_scale"}, {2, "x_zero_point"}, {6, "y_scale"}, {7, "y_zero_point"}};
  for (const auto& [i, name] : per_tensor) {
    if (absl::Status s = CheckScalarOrVector(ctx, i, name, -1); !s.ok()) return s;
  }
  if (absl::Status s = CheckScalarOrVector(ctx, 4, "w_scale", m); !s.ok()) return s;
  if (absl::Status s = CheckScalarOrVector(ctx, 5, "w_zero_point", m); !s.ok()) return s;
  if (ctx.has_input(8)) {
    if (ctx.input(8).dtype != DType::kI32) {
      return ctx.Error(absl::StrCat("input 8 (B) has dtype ", DTypeName(ctx.input(8).dtype), "; expected i32"));
    }
    if (absl::Status s = backends::CheckChannelVector(ctx, 8, "B", m); !s.ok()) return s;
  }
  const std::pair<int, const char*> scales[] = {{1, "x_scale"}, {4, "w_scale"}, {6, "y_scale"}};
  for (const auto& [i, name] : scales) {
    if (absl::Status s = CheckFloatParam(ctx, i, name); !s.ok()) return s;
  }
  p.ws_count = ctx.input(4).num_elements();
  absl::StatusOr<int64_t> xz = CheckZeroPoint(ctx, 2, "x_zero_point", ctx.input(0).dtype);
  if (!xz.ok()) return xz.status();
  absl::StatusOr<int64_t> wz = CheckZeroPoint(ctx, 5, "w_zero_point", ctx.input(3).dtype);
  if (!wz.ok()) return wz.status();
  p.wz_count = *wz;
  if (absl::Status s = CheckIntParam(ctx, 7, "y_zero_point"); !s.ok()) return s;
  absl::Status chosen = VisitDType<uint8_t, int8_t>(ctx, ctx.input(0).dtype, [&](auto xtag) {
    using TX = typename decltype(xtag)::type;
    return VisitDType<uint8_t, int8_t>(ctx, ctx.input(3).dtype, [&](auto wtag) {
      using TW = typename decltype(wtag)::type;
      return VisitDType<uint8_t, int8_t>(ctx, out_dtype, [&](auto ytag) {
        p.run = &RunQLinearConv<TX, TW, typename decltype(ytag)::type>;
        return absl::OkStatus();
      });
    });
  });
  if (!chosen.ok()) return chosen;
  WorkspaceLayout layout;
  AddIntConvScratch(p, true, layout);
  const uint64_t bytes = layout.bytes();
  return backends::MakePrepared(std::move(p), bytes);
}

absl::Status InvokeIntConv(KernelContext& ctx) {
  const IntConvParams* p = backends::PreparedParams<IntConvParams>(ctx);
  if (p == nullptr) return backends::NotPrepared(ctx, "CPU");
  p->run(*p, ctx);
  return absl::OkStatus();
}

}  // namespace

absl::Status RegisterQuantizationKernels(ir::OpRegistry& registry) {
  const std::pair<const char*, ir::KernelDef> kernels[] = {
      {"QuantizeLinear", {&InvokeAxis, &PrepareQuantizeLinear}},
      {"DequantizeLinear", {&InvokeAxis, &PrepareDequantizeLinear}},
      {"DynamicQuantizeLinear", {&DynamicQuantizeLinearKernel, &PrepareDynamicQuantizeLinear}},
      {"MatMulInteger", {&InvokeIntMatMul, &PrepareMatMulInteger}},
      {"QLinearMatMul", {&InvokeIntMatMul, &PrepareQLinearMatMul}},
      {"ConvInteger", {&InvokeIntConv, &PrepareConvInteger}},
      {"QLinearConv", {&InvokeIntConv, &PrepareQLinearConv}},
  };
  for (const auto& [type, kernel] : kernels) {
    if (absl::Status s = registry.SetKernel(type, ir::Backend::kCpu, kernel); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace grove::cpu
