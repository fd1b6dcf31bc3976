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
#include "lib/backends/common/kernel_checks.h"
#include "lib/backends/common/matmul_shapes.h"
#include "lib/backends/cuda/cuda_kernels.h"
#include "lib/backends/cuda/device.h"
#include "lib/backends/cuda/exec_context.h"
#include "lib/backends/cuda/launch_util.h"

namespace grove::cuda {
namespace {

using backends::ShapeStr;

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
  absl::StatusOr<backends::MatMulShape> shape = backends::ResolveMatMul(ctx);
  if (!shape.ok()) return shape.status();
  const std::vector<int64_t>&batch = shape->batch, &da = shape->a_batch, &db = shape->b_batch;
  const int nb = static_cast<int>(batch.size());
  const int64_t m = shape->m, n = shape->n, k = shape->k;
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
  absl::StatusOr<backends::GemmShape> shape = backends::ResolveGemm(ctx);
  if (!shape.ok()) return shape.status();
  const bool trans_a = shape->trans_a, trans_b = shape->trans_b;
  const float alpha = static_cast<float>(shape->alpha);
  const float beta = static_cast<float>(shape->beta);
  const int64_t m = shape->m, n = shape->n, k = shape->k, cm = shape->cm, cn = shape->cn;
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
