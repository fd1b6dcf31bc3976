#include "lib/backends/common/matmul_shapes.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "lib/backends/common/kernel_checks.h"

namespace grove::backends {

absl::StatusOr<MatMulShape> ResolveMatMul(const ir::KernelContext& ctx) {
  const TensorView& a = ctx.input(0);
  const TensorView& b = ctx.input(1);
  const TensorView& y = ctx.output(0);
  if (a.dtype != b.dtype || y.dtype != a.dtype) {
    return ctx.Error(absl::StrCat("MatMul dtypes differ: ", DTypeName(a.dtype), " x ", DTypeName(b.dtype),
                                  " -> ", DTypeName(y.dtype)));
  }
  const int ra = static_cast<int>(a.shape.size());
  const int rb = static_cast<int>(b.shape.size());
  if (ra == 0 || rb == 0) return ctx.Error("MatMul input is a scalar (rank 0); expected rank >= 1");
  MatMulShape p;
  p.m = ra == 1 ? 1 : a.shape[ra - 2];
  p.k = a.shape[ra - 1];
  const int64_t kb = rb == 1 ? b.shape[0] : b.shape[rb - 2];
  p.n = rb == 1 ? 1 : b.shape[rb - 1];
  if (p.k != kb) {
    return ctx.Error(absl::StrCat("MatMul inner dims differ at run time: input 0 ", ShapeStr(a.shape),
                                  " has K=", p.k, ", input 1 ", ShapeStr(b.shape), " has K=", kb));
  }
  const int bra = std::max(ra - 2, 0), brb = std::max(rb - 2, 0);
  const int nb = std::max(bra, brb);
  std::vector<int64_t>&batch = p.batch, &da = p.a_batch, &db = p.b_batch;
  batch.resize(nb);
  da.resize(nb);
  db.resize(nb);
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
  if (ra != 1) expected.push_back(p.m);
  if (rb != 1) expected.push_back(p.n);
  if (expected != y.shape) {
    return ctx.Error(absl::StrCat("MatMul of ", ShapeStr(a.shape), " and ", ShapeStr(b.shape), " gives ",
                                  ShapeStr(expected), " but the planned output is ", ShapeStr(y.shape)));
  }
  return p;
}

absl::StatusOr<GemmShape> ResolveGemm(const ir::KernelContext& ctx) {
  const TensorView& a = ctx.input(0);
  const TensorView& b = ctx.input(1);
  const TensorView* c = ctx.has_input(2) ? &ctx.input(2) : nullptr;
  const TensorView& y = ctx.output(0);
  if (a.dtype != b.dtype || y.dtype != a.dtype || (c != nullptr && c->dtype != a.dtype)) {
    return ctx.Error("Gemm inputs and output must share one dtype");
  }
  if (a.shape.size() != 2 || b.shape.size() != 2 || (c != nullptr && c->shape.size() > 2)) {
    return ctx.Error(absl::StrCat("Gemm expects A and B of rank 2 and C of rank <= 2; got A ", ShapeStr(a.shape),
                                  ", B ", ShapeStr(b.shape)));
  }
  GemmShape g;
  g.trans_a = ctx.attrs().GetInt("transA", 0) != 0;
  g.trans_b = ctx.attrs().GetInt("transB", 0) != 0;
  g.alpha = ctx.attrs().GetFloat("alpha", 1.0);
  g.beta = ctx.attrs().GetFloat("beta", 1.0);
  g.m = g.trans_a ? a.shape[1] : a.shape[0];
  g.k = g.trans_a ? a.shape[0] : a.shape[1];
  const int64_t kb = g.trans_b ? b.shape[1] : b.shape[0];
  g.n = g.trans_b ? b.shape[0] : b.shape[1];
  if (g.k != kb) {
    return ctx.Error(absl::StrCat("Gemm inner dims differ at run time: A ", ShapeStr(a.shape), " has K=", g.k,
                                  ", B ", ShapeStr(b.shape), " has K=", kb));
  }
  if (c != nullptr) {
    const size_t rc = c->shape.size();
    if (rc >= 1) g.cn = c->shape[rc - 1];
    if (rc == 2) g.cm = c->shape[0];
    if ((g.cm != 1 && g.cm != g.m) || (g.cn != 1 && g.cn != g.n)) {
      return ctx.Error(absl::StrCat("Gemm input 2 (C) has shape ", ShapeStr(c->shape),
                                    ", which does not broadcast to [", g.m, ", ", g.n, "] at run time"));
    }
  }
  if (y.shape != std::vector<int64_t>{g.m, g.n}) {
    return ctx.Error(
        absl::StrCat("Gemm gives [", g.m, ", ", g.n, "] but the planned output is ", ShapeStr(y.shape)));
  }
  return g;
}

}  // namespace grove::backends
