// Op definitions of the linalg group (MatMul, Gemm): arity, attributes and
// shape functions over symbolic dims. Two symbolic dims that must agree but
// differ (K of [b,s,k1] x [k2,n]) are accepted here; the kernel checks them
// once they are concrete.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "lib/ir/ops/ops.h"

namespace grove::ir {
namespace {

bool IsMatMulDType(DType t) {
  return t == DType::kF32 || t == DType::kF64 || t == DType::kF16 || t == DType::kBF16 ||
         t == DType::kI32 || t == DType::kI64;
}

// Two dims that must be equal: an error only when both are constants.
bool ConstMismatch(const SymDim& a, const SymDim& b) {
  return a.is_const() && b.is_const() && a.value() != b.value();
}

std::string DimStr(const ShapeContext& ctx, const SymDim& d) {
  return d.ToString(ctx.graph().symbol_names());
}

std::string ShapeStr(const ShapeContext& ctx, const SymShape& s) {
  return ShapeToString(s, ctx.graph().symbol_names());
}

absl::Status CheckFloatOrIntOperands(ShapeContext& ctx, absl::string_view op, int n) {
  for (int i = 0; i < n; ++i) {
    if (!IsMatMulDType(ctx.input_dtype(i))) {
      return ctx.Error(absl::StrCat(op, " input ", i, " has dtype ", DTypeName(ctx.input_dtype(i)),
                                    "; expected f32, f64, f16, bf16, i32 or i64"));
    }
    if (ctx.input_dtype(i) != ctx.input_dtype(0)) {
      return ctx.Error(absl::StrCat(op, " input ", i, " has dtype ", DTypeName(ctx.input_dtype(i)),
                                    " but input 0 has ", DTypeName(ctx.input_dtype(0))));
    }
  }
  return absl::OkStatus();
}

absl::Status InferMatMul(ShapeContext& ctx) {
  if (absl::Status s = CheckFloatOrIntOperands(ctx, "MatMul", 2); !s.ok()) return s;
  const SymShape& a = ctx.input_shape(0);
  const SymShape& b = ctx.input_shape(1);
  if (a.empty() || b.empty()) {
    return ctx.Error(absl::StrCat("MatMul input ", a.empty() ? 0 : 1,
                                  " is a scalar (rank 0); expected rank >= 1"));
  }
  const size_t ra = a.size(), rb = b.size();
  const SymDim m = ra == 1 ? SymDim(1) : a[ra - 2];
  const SymDim& ka = a[ra - 1];
  const SymDim& kb = rb == 1 ? b[0] : b[rb - 2];
  const SymDim n = rb == 1 ? SymDim(1) : b[rb - 1];
  if (ConstMismatch(ka, kb)) {
    return ctx.Error(absl::StrCat("MatMul inner dims differ: input 0 ", ShapeStr(ctx, a), " has K=",
                                  DimStr(ctx, ka), ", input 1 ", ShapeStr(ctx, b), " has K=", DimStr(ctx, kb)));
  }
  const SymShape batch_a(a.begin(), a.end() - (ra >= 2 ? 2 : 1));
  const SymShape batch_b(b.begin(), b.end() - (rb >= 2 ? 2 : 1));
  absl::StatusOr<SymShape> batch = BroadcastShapes({batch_a, batch_b});
  if (!batch.ok()) {
    return ctx.Error(absl::StrCat("MatMul batch dims of ", ShapeStr(ctx, a), " and ", ShapeStr(ctx, b),
                                  " do not broadcast: ", batch.status().message()));
  }
  SymShape out = *std::move(batch);
  if (ra != 1) out.push_back(m);
  if (rb != 1) out.push_back(n);
  ctx.SetOutput(0, ctx.input_dtype(0), std::move(out));
  return absl::OkStatus();
}

absl::Status InferGemm(ShapeContext& ctx) {
  const int n_in = ctx.has_input(2) ? 3 : 2;
  if (absl::Status s = CheckFloatOrIntOperands(ctx, "Gemm", n_in); !s.ok()) return s;
  for (const char* name : {"transA", "transB"}) {
    const int64_t t = ctx.attrs().GetInt(name, 0);
    if (t != 0 && t != 1) return ctx.Error(absl::StrCat("Gemm attribute ", name, " is ", t, "; expected 0 or 1"));
  }
  const SymShape& a = ctx.input_shape(0);
  const SymShape& b = ctx.input_shape(1);
  for (int i = 0; i < 2; ++i) {
    if (ctx.input_rank(i) != 2) {
      return ctx.Error(absl::StrCat("Gemm input ", i, " has shape ", ShapeStr(ctx, ctx.input_shape(i)),
                                    "; expected rank 2"));
    }
  }
  const bool ta = ctx.attrs().GetInt("transA", 0) != 0;
  const bool tb = ctx.attrs().GetInt("transB", 0) != 0;
  const SymDim& m = ta ? a[1] : a[0];
  const SymDim& ka = ta ? a[0] : a[1];
  const SymDim& kb = tb ? b[1] : b[0];
  const SymDim& n = tb ? b[0] : b[1];
  if (ConstMismatch(ka, kb)) {
    return ctx.Error(absl::StrCat("Gemm inner dims differ: A ", ShapeStr(ctx, a), " (transA=", ta ? 1 : 0, ") has K=",
                                  DimStr(ctx, ka), ", B ", ShapeStr(ctx, b), " (transB=", tb ? 1 : 0, ") has K=",
                                  DimStr(ctx, kb)));
  }
  if (n_in == 3) {
    const SymShape& c = ctx.input_shape(2);
    if (c.size() > 2) {
      return ctx.Error(absl::StrCat("Gemm input 2 (C) has shape ", ShapeStr(ctx, c),
                                    "; expected rank <= 2, broadcastable to [M, N]"));
    }
    const SymDim target[2] = {m, n};
    for (size_t i = 0; i < c.size(); ++i) {
      const SymDim& want = target[2 - c.size() + i];
      const SymDim& d = c[i];
      if (d.is_const() && d.value() == 1) continue;
      if (ConstMismatch(d, want)) {
        return ctx.Error(absl::StrCat("Gemm input 2 (C) has shape ", ShapeStr(ctx, c),
                                      ", which does not broadcast to [M, N] = [", DimStr(ctx, m), ", ",
                                      DimStr(ctx, n), "]"));
      }
    }
  }
  ctx.SetOutput(0, ctx.input_dtype(0), {m, n});
  return absl::OkStatus();
}

}  // namespace

absl::Status RegisterLinalgOps(OpRegistry& registry) {
  {
    OpDef def;
    def.type = "MatMul";
    def.min_inputs = 2;
    def.max_inputs = 2;
    def.infer = &InferMatMul;
    if (absl::Status s = registry.Register(std::move(def)); !s.ok()) return s;
  }
  {
    OpDef def;
    def.type = "Gemm";
    def.min_inputs = 2;
    def.max_inputs = 3;
    def.attrs = {{"alpha", AttrKind::kFloat}, {"beta", AttrKind::kFloat},
                 {"transA", AttrKind::kInt}, {"transB", AttrKind::kInt}};
    def.infer = &InferGemm;
    if (absl::Status s = registry.Register(std::move(def)); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace grove::ir
