// CPU kernels of the linalg group. f32 MatMul and Gemm run as oneDNN's matmul
// where it takes them (onednn.h), with a fused activation (post_op.h);
// f32/f64 go through OpenBLAS; f16/bf16 are
// widened to f32 around the same call (the reference backend favours one
// exact path over a slow half-precision loop); integers use plain loops with
// wrapping arithmetic, so an overflow in a model is defined behaviour here.
// Dims that the shape function accepted symbolically are checked again now
// that they are concrete.
#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "lib/backends/common/kernel_checks.h"
#include "lib/backends/common/matmul_shapes.h"
#include "lib/backends/common/prepared.h"
#include "lib/backends/cpu/blas_gemm.h"
#include "lib/backends/cpu/cpu_kernels.h"
#include "lib/backends/cpu/half_staging.h"
#include "lib/backends/cpu/onednn.h"
#include "lib/backends/cpu/post_op.h"
#include "lib/backends/cpu/workspace_layout.h"
#include "lib/ir/element_types.h"

namespace grove::cpu {
namespace {

using backends::MakePrepared;
using backends::PreparedParams;
using backends::ShapeStr;
using ir::PreparedKernel;

absl::Status NotPrepared(const ir::KernelContext& ctx) { return backends::NotPrepared(ctx, "CPU"); }

// double -> integer without the undefined behaviour of an out-of-range cast.
template <typename T>
T SaturatingCast(double v) {
  if (std::isnan(v)) return 0;
  if (v <= static_cast<double>(std::numeric_limits<T>::min())) return std::numeric_limits<T>::min();
  if (v >= static_cast<double>(std::numeric_limits<T>::max())) return std::numeric_limits<T>::max();
  return static_cast<T>(v);
}

// The float and double overloads (BLAS) live in blas_gemm.h; the template
// below would otherwise hide them.
using ::grove::cpu::Gemm;

// Integers: exact wrapping arithmetic when alpha and beta are whole numbers
// (the common 1 and 0), else through double like the float path.
template <typename T>
void Gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha, const T* a, const T* b,
          double beta, T* c) {
  using U = std::make_unsigned_t<T>;
  const bool whole = alpha == std::trunc(alpha) && beta == std::trunc(beta) && std::fabs(alpha) < 9.2e18 &&
                     std::fabs(beta) < 9.2e18;
  const U ia = static_cast<U>(static_cast<int64_t>(whole ? alpha : 0));
  const U ib = static_cast<U>(static_cast<int64_t>(whole ? beta : 0));
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      U acc = 0;
      for (int64_t p = 0; p < k; ++p) {
        const U x = static_cast<U>(ta ? a[p * m + i] : a[i * k + p]);
        const U y = static_cast<U>(tb ? b[j * k + p] : b[p * n + j]);
        acc += x * y;
      }
      T& out = c[i * n + j];
      if (whole) {
        U r = acc * ia;
        if (beta != 0) r += static_cast<U>(out) * ib;
        out = static_cast<T>(r);
      } else {
        double r = alpha * static_cast<double>(static_cast<T>(acc));
        if (beta != 0) r += beta * static_cast<double>(out);
        out = SaturatingCast<T>(r);
      }
    }
  }
}

// ---------------------------------------------------------------------------
// MatMul
// ---------------------------------------------------------------------------

// Which A and B matrix each output matrix of a batched MatMul reads.
struct MatMulPlan {
  int64_t m = 0, n = 0, k = 0;
  std::vector<int64_t> a_index, b_index;  // one per output matrix
  int64_t a_count = 1, b_count = 1;
};

template <typename T>
void RunMatMul(const MatMulPlan& p, const T* a, const T* b, T* y) {
  const int64_t count = static_cast<int64_t>(p.a_index.size());
  // One weight matrix for a whole unbroadcast batch of A: a single tall GEMM.
  if (p.b_count == 1 && p.a_count == count && FitsBlasInt(count * p.m)) {
    Gemm(false, false, count * p.m, p.n, p.k, 1.0, a, b, 0.0, y);
    return;
  }
  for (int64_t i = 0; i < count; ++i) {
    Gemm(false, false, p.m, p.n, p.k, 1.0, a + p.a_index[i] * p.m * p.k, b + p.b_index[i] * p.k * p.n, 0.0,
         y + i * p.m * p.n);
  }
}

// MatMulPlan, or nothing to compute (an empty output), or oneDNN's matmul.
struct MatMulParams {
  bool empty = false;
  MatMulPlan plan;
  std::shared_ptr<OneDnnStep> onednn;
  PostOp post_op;     // a fused activation (f32 only)
  bool bias = false;  // a fused Add: input 2 added over Y's last dim, before post_op
};

// The fused activation of a MatMul or Gemm step (none unless the CPU plan
// pass fused one), refused on other dtypes than f32.
absl::StatusOr<PostOp> ReadLinalgPostOp(const ir::KernelContext& ctx) {
  absl::StatusOr<PostOp> op = ReadPostOp(ctx.attrs());
  if (!op.ok()) return op.status();
  if (op->kind != PostOpKind::kNone && ctx.input(0).dtype != DType::kF32) {
    return ctx.Error(absl::StrCat("a fused activation needs f32; A is ", DTypeName(ctx.input(0).dtype)));
  }
  return op;
}

absl::StatusOr<PreparedKernel> PrepareMatMul(const ir::KernelContext& ctx) {
  const TensorView& a = ctx.input(0);
  const TensorView& y = ctx.output(0);
  absl::StatusOr<backends::MatMulShape> shape = backends::ResolveMatMul(ctx);
  if (!shape.ok()) return shape.status();
  const std::vector<int64_t>&batch = shape->batch, &da = shape->a_batch, &db = shape->b_batch;
  const int nb = static_cast<int>(batch.size());
  MatMulParams params;
  MatMulPlan& p = params.plan;
  p.m = shape->m;
  p.n = shape->n;
  p.k = shape->k;
  if (y.num_elements() == 0) {
    params.empty = true;
    return MakePrepared(std::move(params));
  }
  if (!FitsBlasInt(p.m) || !FitsBlasInt(p.n) || !FitsBlasInt(p.k)) {
    return ctx.Error(absl::StrCat("MatMul dims M=", p.m, " N=", p.n, " K=", p.k, " exceed the BLAS int range"));
  }
  switch (a.dtype) {
    case DType::kF32:
    case DType::kF64:
    case DType::kI32:
    case DType::kI64:
    case DType::kF16:
    case DType::kBF16: break;
    default:
      return ctx.Error(absl::StrCat("MatMul has no CPU kernel for dtype ", DTypeName(a.dtype)));
  }
  // Broadcast batch walk: an odometer over the output batch index.
  const int64_t count = ir::NumElements(batch);
  p.a_count = ir::NumElements(da);
  p.b_count = ir::NumElements(db);
  const std::vector<int64_t> sa = ir::Strides(da), sb = ir::Strides(db);
  p.a_index.resize(count);
  p.b_index.resize(count);
  std::vector<int64_t> idx(nb, 0);
  for (int64_t i = 0; i < count; ++i) {
    int64_t ia = 0, ib = 0;
    for (int d = 0; d < nb; ++d) {
      if (da[d] != 1) ia += idx[d] * sa[d];
      if (db[d] != 1) ib += idx[d] * sb[d];
    }
    p.a_index[i] = ia;
    p.b_index[i] = ib;
    for (int d = nb - 1; d >= 0; --d) {
      if (++idx[d] < batch[d]) break;
      idx[d] = 0;
    }
  }
  absl::StatusOr<PostOp> post_op = ReadLinalgPostOp(ctx);
  if (!post_op.ok()) return post_op.status();
  params.post_op = *post_op;
  params.bias = ctx.attrs().GetInt(kPostOpBiasAttr, 0) != 0;
  if (params.bias) {
    // Input 2 as the plan pass fused it: f32, [N] or [1, ..., 1, N].
    const TensorView* bias = ctx.has_input(2) ? &ctx.input(2) : nullptr;
    bool fits = bias != nullptr && bias->dtype == DType::kF32 && a.dtype == DType::kF32 && !bias->shape.empty() &&
                !y.shape.empty() &&
                bias->shape.back() == p.n && bias->shape.size() <= y.shape.size() && y.shape.back() == p.n;
    for (size_t d = 0; fits && d + 1 < bias->shape.size(); ++d) fits = bias->shape[d] == 1;
    if (!fits) return ctx.Error("the fused Add's bias (input 2) is not an f32 [1, ..., 1, N] over the output");
  }
  WorkspaceLayout layout;  // A, B and Y widened to f32
  OneDnnMatMulShape onednn_shape;
  onednn_shape.post_op = params.post_op;
  onednn_shape.bias = params.bias;
  // B the same for every batch (its batch dims all 1) and A not broadcast:
  // the batch folds into M, one [batch * M, K] x [K, N] product over the
  // same bytes. A batch of small products (nn.MultiheadAttention's input
  // projection of a sequence-first [L, 1, E], M = 1 per batch) is otherwise
  // a GEMV per batch: measured at [256, 1, 64] x [64, 192], 186 us, where one
  // [256, 64] x [64, 192] product takes about 30.
  const bool fold_batch = !batch.empty() && da == batch &&
                          std::all_of(db.begin(), db.end(), [](int64_t d) { return d == 1; });
  const int64_t folded_m = fold_batch ? ir::NumElements(batch) * p.m : p.m;
  onednn_shape.a = fold_batch ? std::vector<int64_t>{} : da;
  onednn_shape.a.insert(onednn_shape.a.end(), {folded_m, p.k});
  onednn_shape.b = fold_batch ? std::vector<int64_t>{} : db;
  onednn_shape.b.insert(onednn_shape.b.end(), {p.k, p.n});
  onednn_shape.y = fold_batch ? std::vector<int64_t>{} : batch;
  onednn_shape.y.insert(onednn_shape.y.end(), {folded_m, p.n});
  absl::StatusOr<std::shared_ptr<OneDnnStep>> onednn = PrepareOneDnnMatMul(ctx, onednn_shape, &layout);
  if (!onednn.ok()) return onednn.status();
  if (*onednn != nullptr) {
    params.onednn = *std::move(onednn);
    return MakePrepared(std::move(params), layout.bytes());
  }
  if (IsHalfFloat(a.dtype)) {
    AddWidened(&a, &layout);
    AddWidened(&ctx.input(1), &layout);
    AddWidened(&y, &layout);
  }
  return MakePrepared(std::move(params), layout.bytes());
}

absl::Status MatMulKernel(ir::KernelContext& ctx) {
  const MatMulParams* params = PreparedParams<MatMulParams>(ctx);
  if (params == nullptr) return NotPrepared(ctx);
  if (params->empty) return absl::OkStatus();
  if (params->onednn != nullptr) return RunOneDnnStep(*params->onednn, ctx);
  const MatMulPlan& p = params->plan;
  const TensorView& a = ctx.input(0);
  const TensorView& b = ctx.input(1);
  TensorView& y = ctx.output(0);
  switch (a.dtype) {
    case DType::kF32:
      RunMatMul(p, a.as<const float>(), b.as<const float>(), y.as<float>());
      if (params->bias) {
        const float* bias = ctx.input(2).as<const float>();
        float* row = y.as<float>();
        for (int64_t r = 0, rows = y.num_elements() / p.n; r < rows; ++r, row += p.n) {
          for (int64_t j = 0; j < p.n; ++j) row[j] += bias[j];
        }
      }
      ApplyPostOp(params->post_op, y.as<float>(), y.num_elements());
      break;
    case DType::kF64: RunMatMul(p, a.as<const double>(), b.as<const double>(), y.as<double>()); break;
    case DType::kI32: RunMatMul(p, a.as<const int32_t>(), b.as<const int32_t>(), y.as<int32_t>()); break;
    case DType::kI64: RunMatMul(p, a.as<const int64_t>(), b.as<const int64_t>(), y.as<int64_t>()); break;
    case DType::kF16:
    case DType::kBF16: {
      WorkspaceCursor ws(ctx.workspace());
      const float* wa = Widen(a, ws.Take<float>(a.num_elements()));
      const float* wb = Widen(b, ws.Take<float>(b.num_elements()));
      float* wy = ws.Take<float>(y.num_elements());
      RunMatMul(p, wa, wb, wy);
      Narrow(wy, y);
      break;
    }
    default:
      return ctx.Error(absl::StrCat("MatMul has no CPU kernel for dtype ", DTypeName(a.dtype)));
  }
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------
// Gemm
// ---------------------------------------------------------------------------

// Y = broadcast of C (rank <= 2, dims 1 or equal to [m, n]).
template <typename T>
void BroadcastC(const T* c, int64_t cm, int64_t cn, int64_t m, int64_t n, T* y) {
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) y[i * n + j] = c[(cm == 1 ? 0 : i) * cn + (cn == 1 ? 0 : j)];
  }
}

template <typename T>
void RunGemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha, double beta, const T* a,
             const T* b, const T* c, int64_t cm, int64_t cn, T* y) {
  if (c != nullptr) BroadcastC(c, cm, cn, m, n, y);
  Gemm(ta, tb, m, n, k, alpha, a, b, c != nullptr ? beta : 0.0, y);
}

// Gemm after every check; `empty`: nothing to compute (M or N is 0);
// `onednn`: oneDNN's matmul computes it, after the invoke writes the
// broadcast C into Y when beta is not 0 (its sum post-op adds beta * Y).
struct GemmParams {
  bool empty = false;
  backends::GemmShape shape;
  std::shared_ptr<OneDnnStep> onednn;
  PostOp post_op;  // a fused activation (f32 only)
  bool c_bias = false;  // oneDNN adds C as a bias post-op (no BroadcastC)
};

absl::StatusOr<PreparedKernel> PrepareGemm(const ir::KernelContext& ctx) {
  const TensorView& a = ctx.input(0);
  absl::StatusOr<backends::GemmShape> shape = backends::ResolveGemm(ctx);
  if (!shape.ok()) return shape.status();
  GemmParams params;
  const int64_t m = shape->m, n = shape->n, k = shape->k;
  params.shape = *std::move(shape);
  if (m == 0 || n == 0) {
    params.empty = true;
    return MakePrepared(std::move(params));
  }
  if (!FitsBlasInt(m) || !FitsBlasInt(n) || !FitsBlasInt(k)) {
    return ctx.Error(absl::StrCat("Gemm dims M=", m, " N=", n, " K=", k, " exceed the BLAS int range"));
  }
  switch (a.dtype) {
    case DType::kF32:
    case DType::kF64:
    case DType::kI32:
    case DType::kI64:
    case DType::kF16:
    case DType::kBF16: break;
    default:
      return ctx.Error(absl::StrCat("Gemm has no CPU kernel for dtype ", DTypeName(a.dtype)));
  }
  absl::StatusOr<PostOp> post_op = ReadLinalgPostOp(ctx);
  if (!post_op.ok()) return post_op.status();
  params.post_op = *post_op;
  WorkspaceLayout layout;  // A, B, C and Y widened to f32
  const bool has_c = ctx.has_input(2);
  if (!has_c || ctx.input(2).dtype == DType::kF32) {
    OneDnnMatMulShape onednn_shape;
    onednn_shape.post_op = params.post_op;
    onednn_shape.a = {m, k};
    onednn_shape.b = {k, n};
    onednn_shape.y = {m, n};
    onednn_shape.trans_a = params.shape.trans_a;
    onednn_shape.trans_b = params.shape.trans_b;
    onednn_shape.alpha = static_cast<float>(params.shape.alpha);
    // C a bias over Y's rows ([N] or [1, N]) with beta 1, as a Linear's
    // export has it: oneDNN adds it as a post-op; otherwise C is broadcast
    // into Y before each run and summed in (beta).
    params.c_bias = has_c && params.shape.beta == 1.0 && params.shape.cm == 1 && params.shape.cn == n;
    onednn_shape.bias = params.c_bias;
    onednn_shape.accumulate = has_c && params.shape.beta != 0 && !params.c_bias;
    onednn_shape.beta = static_cast<float>(params.shape.beta);
    absl::StatusOr<std::shared_ptr<OneDnnStep>> onednn = PrepareOneDnnMatMul(ctx, onednn_shape, &layout);
    if (!onednn.ok()) return onednn.status();
    if (*onednn != nullptr) {
      params.onednn = *std::move(onednn);
      return MakePrepared(std::move(params), layout.bytes());
    }
  }
  if (IsHalfFloat(a.dtype)) {
    AddWidened(&a, &layout);
    AddWidened(&ctx.input(1), &layout);
    AddWidened(ctx.has_input(2) ? &ctx.input(2) : nullptr, &layout);
    layout.Add<float>(m * n);
  }
  return MakePrepared(std::move(params), layout.bytes());
}

absl::Status GemmKernel(ir::KernelContext& ctx) {
  const GemmParams* params = PreparedParams<GemmParams>(ctx);
  if (params == nullptr) return NotPrepared(ctx);
  if (params->empty) return absl::OkStatus();
  const TensorView& a = ctx.input(0);
  const TensorView& b = ctx.input(1);
  const TensorView* c = ctx.has_input(2) ? &ctx.input(2) : nullptr;
  TensorView& y = ctx.output(0);
  const backends::GemmShape& shape = params->shape;
  const bool ta = shape.trans_a, tb = shape.trans_b;
  const double alpha = shape.alpha, beta = shape.beta;
  const int64_t m = shape.m, n = shape.n, k = shape.k, cm = shape.cm, cn = shape.cn;
  if (params->onednn != nullptr) {
    if (c != nullptr && beta != 0 && !params->c_bias) BroadcastC(c->as<const float>(), cm, cn, m, n, y.as<float>());
    return RunOneDnnStep(*params->onednn, ctx);
  }
  switch (a.dtype) {
    case DType::kF32:
      RunGemm(ta, tb, m, n, k, alpha, beta, a.as<const float>(), b.as<const float>(),
              c ? c->as<const float>() : nullptr, cm, cn, y.as<float>());
      ApplyPostOp(params->post_op, y.as<float>(), m * n);
      break;
    case DType::kF64:
      RunGemm(ta, tb, m, n, k, alpha, beta, a.as<const double>(), b.as<const double>(),
              c ? c->as<const double>() : nullptr, cm, cn, y.as<double>());
      break;
    case DType::kI32:
      RunGemm(ta, tb, m, n, k, alpha, beta, a.as<const int32_t>(), b.as<const int32_t>(),
              c ? c->as<const int32_t>() : nullptr, cm, cn, y.as<int32_t>());
      break;
    case DType::kI64:
      RunGemm(ta, tb, m, n, k, alpha, beta, a.as<const int64_t>(), b.as<const int64_t>(),
              c ? c->as<const int64_t>() : nullptr, cm, cn, y.as<int64_t>());
      break;
    case DType::kF16:
    case DType::kBF16: {
      WorkspaceCursor ws(ctx.workspace());
      const float* wa = Widen(a, ws.Take<float>(a.num_elements()));
      const float* wb = Widen(b, ws.Take<float>(b.num_elements()));
      const float* wc = c != nullptr ? Widen(*c, ws.Take<float>(c->num_elements())) : nullptr;
      float* wy = ws.Take<float>(m * n);
      RunGemm(ta, tb, m, n, k, alpha, beta, wa, wb, wc, cm, cn, wy);
      Narrow(wy, y);
      break;
    }
    default:
      return ctx.Error(absl::StrCat("Gemm has no CPU kernel for dtype ", DTypeName(a.dtype)));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status RegisterLinalgKernels(ir::OpRegistry& registry) {
  if (absl::Status s = registry.SetKernel("MatMul", ir::Backend::kCpu, ir::KernelDef{&MatMulKernel, &PrepareMatMul});
      !s.ok()) {
    return s;
  }
  return registry.SetKernel("Gemm", ir::Backend::kCpu, ir::KernelDef{&GemmKernel, &PrepareGemm});
}

}  // namespace grove::cpu
