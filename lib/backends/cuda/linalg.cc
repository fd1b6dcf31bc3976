// CUDA kernels of MatMul and Gemm: every product is a Device::Gemm (cuBLASLt
// on a GPU). MatMul's broadcast batch dims fold into as few strided batched
// GEMMs as their strides allow (one when the batches agree or one side is
// shared); Gemm's C is either the GEMM's bias epilogue (a row vector with
// beta 1) or broadcast into Y first and read back with beta. f32, f16 and
// bf16 only: other dtypes report Unimplemented, so the executor keeps those
// nodes on the CPU.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "jit/kernels/conv_params.h"
#include "lib/backends/cuda/cuda_kernels.h"
#include "lib/backends/cuda/device.h"
#include "lib/backends/cuda/exec_context.h"

namespace grove::cuda {
namespace {

// A 1-D grid over n items; blocks shrink to the warps that n fills, so a
// small launch (one RNN step, a short bias) does not idle a 256-thread block.
LaunchDims GridFor(int64_t n) {
  const int64_t warps = std::min<int64_t>(8, std::max<int64_t>(1, (n + 31) / 32));
  return Grid1D(n, static_cast<int>(warps * 32));
}

std::string ShapeStr(absl::Span<const int64_t> s) { return absl::StrCat("[", absl::StrJoin(s, ", "), "]"); }

bool GemmDType(DType t) { return t == DType::kF32 || t == DType::kF16 || t == DType::kBF16; }

absl::Status NoCudaDType(const ir::KernelContext& ctx, absl::string_view op, DType t) {
  return absl::UnimplementedError(
      ctx.Error(absl::StrCat(op, " has no CUDA kernel for dtype ", DTypeName(t), " (f32, f16 and bf16 only)"))
          .message());
}

// dst (contiguous [m, n]) = scale * src broadcast from [cm, cn].
absl::Status BroadcastMatrix(ExecContext& ec, DType dtype, const void* src, int64_t cm, int64_t cn, int64_t m,
                             int64_t n, float scale, void* dst) {
  grove_k::ScaledCopyParams p{};
  p.src = src;
  p.dst = dst;
  p.shape.rank = 2;
  p.shape.d[0] = m;
  p.shape.d[1] = n;
  p.src_strides.s[0] = cm == 1 ? 0 : cn;
  p.src_strides.s[1] = cn == 1 ? 0 : 1;
  p.dst_strides.s[0] = n;
  p.dst_strides.s[1] = 1;
  p.n = m * n;
  p.scale = scale;
  return ec.Launch({"conv", {dtype}}, "scaled_copy", GridFor(p.n), p);
}

absl::Status MatMulKernel(ir::KernelContext& ctx) {
  const TensorView& a = ctx.input(0);
  const TensorView& b = ctx.input(1);
  TensorView& y = ctx.output(0);
  if (a.dtype != b.dtype || y.dtype != a.dtype) {
    return ctx.Error(absl::StrCat("MatMul dtypes differ: ", DTypeName(a.dtype), " x ", DTypeName(b.dtype),
                                  " -> ", DTypeName(y.dtype)));
  }
  const int ra = static_cast<int>(a.shape.size());
  const int rb = static_cast<int>(b.shape.size());
  if (ra == 0 || rb == 0) return ctx.Error("MatMul input is a scalar (rank 0); expected rank >= 1");
  const int64_t m = ra == 1 ? 1 : a.shape[ra - 2];
  const int64_t k = a.shape[ra - 1];
  const int64_t kb = rb == 1 ? b.shape[0] : b.shape[rb - 2];
  const int64_t n = rb == 1 ? 1 : b.shape[rb - 1];
  if (k != kb) {
    return ctx.Error(absl::StrCat("MatMul inner dims differ at run time: input 0 ", ShapeStr(a.shape),
                                  " has K=", k, ", input 1 ", ShapeStr(b.shape), " has K=", kb));
  }
  const int bra = std::max(ra - 2, 0), brb = std::max(rb - 2, 0);
  const int nb = std::max(bra, brb);
  std::vector<int64_t> batch(nb), da(nb), db(nb);
  for (int i = 0; i < nb; ++i) {
    da[i] = i >= nb - bra ? a.shape[i - (nb - bra)] : 1;
    db[i] = i >= nb - brb ? b.shape[i - (nb - brb)] : 1;
    if (da[i] != db[i] && da[i] != 1 && db[i] != 1) {
      return ctx.Error(absl::StrCat("MatMul batch dims of ", ShapeStr(a.shape), " and ", ShapeStr(b.shape),
                                    " do not broadcast at run time"));
    }
    batch[i] = da[i] == 1 ? db[i] : da[i];
  }
  std::vector<int64_t> expected = batch;
  if (ra != 1) expected.push_back(m);
  if (rb != 1) expected.push_back(n);
  if (expected != y.shape) {
    return ctx.Error(absl::StrCat("MatMul of ", ShapeStr(a.shape), " and ", ShapeStr(b.shape), " gives ",
                                  ShapeStr(expected), " but the planned output is ", ShapeStr(y.shape)));
  }
  if (!GemmDType(a.dtype)) return NoCudaDType(ctx, "MatMul", a.dtype);
  if (y.num_elements() == 0) return absl::OkStatus();
  ExecContext& ec = Exec(ctx);
  if (k == 0) return ec.device().MemsetAsync(y.data, 0, y.byte_size(), ec.stream());

  // Element strides of each batch dim in A, B and Y (0 where broadcast).
  const int64_t mat_a = m * k, mat_b = k * n, mat_y = m * n;
  std::vector<int64_t> sa(nb), sb(nb), sy(nb);
  int64_t acc_a = mat_a, acc_b = mat_b, acc_y = mat_y;
  for (int d = nb - 1; d >= 0; --d) {
    sa[d] = da[d] == 1 ? 0 : acc_a;
    sb[d] = db[d] == 1 ? 0 : acc_b;
    sy[d] = acc_y;
    acc_a *= da[d];
    acc_b *= db[d];
    acc_y *= batch[d];
  }
  // Dims of length 1 take no part; then the innermost run of dims whose
  // strides chain (stride[d] == stride[d+1] * len[d+1] for A, B and Y alike)
  // is one batched GEMM with one stride per operand.
  std::vector<int64_t> dims, ta, tb, ty;
  for (int d = 0; d < nb; ++d) {
    if (batch[d] == 1) continue;
    dims.push_back(batch[d]);
    ta.push_back(sa[d]);
    tb.push_back(sb[d]);
    ty.push_back(sy[d]);
  }
  const int nd = static_cast<int>(dims.size());
  int inner_begin = nd;
  int64_t inner = 1;
  if (nd > 0) {
    inner_begin = nd - 1;
    inner = dims[nd - 1];
    while (inner_begin > 0) {
      const int d = inner_begin - 1, e = inner_begin;
      if (ta[d] != ta[e] * dims[e] || tb[d] != tb[e] * dims[e] || ty[d] != ty[e] * dims[e]) break;
      inner *= dims[d];
      inner_begin = d;
    }
  }
  GemmDesc g;
  g.dtype = a.dtype;
  g.m = m;
  g.n = n;
  g.k = k;
  g.lda = k;
  g.ldb = n;
  g.ldc = n;
  g.batch = inner;
  g.stride_a = inner_begin < nd ? ta[nd - 1] : 0;
  g.stride_b = inner_begin < nd ? tb[nd - 1] : 0;
  g.stride_c = mat_y;
  // A shared B under a batch of A matrices laid out back to back: one tall GEMM.
  if (g.stride_b == 0 && g.stride_a == mat_a && inner > 1) {
    g.m = m * inner;
    g.batch = 1;
    g.stride_a = g.stride_c = 0;
  }
  const int64_t outer = nd == 0 ? 1 : y.num_elements() / (mat_y * inner);
  const size_t elem = DTypeSize(a.dtype);
  std::vector<int64_t> idx(static_cast<size_t>(inner_begin), 0);
  for (int64_t o = 0; o < outer; ++o) {
    int64_t oa = 0, ob = 0, oy = 0;
    for (int d = 0; d < inner_begin; ++d) {
      oa += idx[d] * ta[d];
      ob += idx[d] * tb[d];
      oy += idx[d] * ty[d];
    }
    g.a = static_cast<const char*>(a.data) + oa * elem;
    g.b = static_cast<const char*>(b.data) + ob * elem;
    g.c = static_cast<char*>(y.data) + oy * elem;
    if (absl::Status s = ec.Gemm(g); !s.ok()) return s;
    for (int d = inner_begin - 1; d >= 0; --d) {
      if (++idx[d] < dims[d]) break;
      idx[d] = 0;
    }
  }
  return absl::OkStatus();
}

absl::Status GemmKernel(ir::KernelContext& ctx) {
  const TensorView& a = ctx.input(0);
  const TensorView& b = ctx.input(1);
  const TensorView* c = ctx.has_input(2) ? &ctx.input(2) : nullptr;
  TensorView& y = ctx.output(0);
  if (a.dtype != b.dtype || y.dtype != a.dtype || (c != nullptr && c->dtype != a.dtype)) {
    return ctx.Error("Gemm inputs and output must share one dtype");
  }
  if (a.shape.size() != 2 || b.shape.size() != 2 || (c != nullptr && c->shape.size() > 2)) {
    return ctx.Error(absl::StrCat("Gemm expects A and B of rank 2 and C of rank <= 2; got A ", ShapeStr(a.shape),
                                  ", B ", ShapeStr(b.shape)));
  }
  const bool trans_a = ctx.attrs().GetInt("transA", 0) != 0;
  const bool trans_b = ctx.attrs().GetInt("transB", 0) != 0;
  const float alpha = static_cast<float>(ctx.attrs().GetFloat("alpha", 1.0));
  const float beta = static_cast<float>(ctx.attrs().GetFloat("beta", 1.0));
  const int64_t m = trans_a ? a.shape[1] : a.shape[0];
  const int64_t k = trans_a ? a.shape[0] : a.shape[1];
  const int64_t kb = trans_b ? b.shape[1] : b.shape[0];
  const int64_t n = trans_b ? b.shape[0] : b.shape[1];
  if (k != kb) {
    return ctx.Error(absl::StrCat("Gemm inner dims differ at run time: A ", ShapeStr(a.shape), " has K=", k,
                                  ", B ", ShapeStr(b.shape), " has K=", kb));
  }
  int64_t cm = 1, cn = 1;
  if (c != nullptr) {
    const size_t rc = c->shape.size();
    if (rc >= 1) cn = c->shape[rc - 1];
    if (rc == 2) cm = c->shape[0];
    if ((cm != 1 && cm != m) || (cn != 1 && cn != n)) {
      return ctx.Error(absl::StrCat("Gemm input 2 (C) has shape ", ShapeStr(c->shape),
                                    ", which does not broadcast to [", m, ", ", n, "] at run time"));
    }
  }
  if (y.shape != std::vector<int64_t>{m, n}) {
    return ctx.Error(absl::StrCat("Gemm gives [", m, ", ", n, "] but the planned output is ", ShapeStr(y.shape)));
  }
  if (!GemmDType(a.dtype)) return NoCudaDType(ctx, "Gemm", a.dtype);
  if (m == 0 || n == 0) return absl::OkStatus();
  ExecContext& ec = Exec(ctx);
  const bool use_c = c != nullptr && beta != 0.0f;
  if (k == 0) {  // Y = beta * C, without a GEMM over an empty inner dim
    if (!use_c) return ec.device().MemsetAsync(y.data, 0, y.byte_size(), ec.stream());
    return BroadcastMatrix(ec, a.dtype, c->data, cm, cn, m, n, beta, y.data);
  }
  GemmDesc g;
  g.dtype = a.dtype;
  g.trans_a = trans_a;
  g.trans_b = trans_b;
  g.m = m;
  g.n = n;
  g.k = k;
  g.a = a.data;
  g.lda = a.shape[1];
  g.b = b.data;
  g.ldb = b.shape[1];
  g.c = y.data;
  g.ldc = n;
  g.alpha = alpha;
  if (use_c) {
    if (cm == 1 && cn == n && beta == 1.0f) {
      g.bias = c->data;  // a row vector added to every row: the GEMM's epilogue
    } else {
      if (absl::Status s = BroadcastMatrix(ec, a.dtype, c->data, cm, cn, m, n, 1.0f, y.data); !s.ok()) return s;
      g.beta = beta;
    }
  }
  return ec.Gemm(g);
}

}  // namespace

absl::Status RegisterCudaLinalgKernels(ir::OpRegistry& registry) {
  if (absl::Status s = registry.SetKernel("MatMul", ir::Backend::kCuda, &MatMulKernel); !s.ok()) return s;
  return registry.SetKernel("Gemm", ir::Backend::kCuda, &GemmKernel);
}

}  // namespace grove::cuda
