#include "lib/backends/common/attention_checks.h"

#include <limits>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "lib/backends/common/kernel_checks.h"

namespace grove::backends {
namespace {

constexpr const char* kNames[] = {"Q", "K", "V", "mask", "mask2"};

// Input i's stride along output batch dim `axis` (of 2, right-aligned), 0
// where it broadcasts; an error when its dim is neither the output's nor 1.
absl::StatusOr<int64_t> BatchStride(const ir::KernelContext& ctx, int i, int rank_of_rows, int axis,
                                    int64_t out_dim, int64_t* stride) {
  const std::vector<int64_t>& s = ctx.input(i).shape;
  const int batch_rank = static_cast<int>(s.size()) - rank_of_rows;
  const int pos = batch_rank - 2 + axis;  // right-aligned against [b0, b1]
  if (pos < 0) return int64_t{0};
  const int64_t dim = s[pos];
  if (dim != out_dim && dim != 1) {
    return ctx.Error(absl::StrCat("input ", i, " (", kNames[i], ") ", ShapeStr(s), " has batch dim ", dim,
                                  " where the output has ", out_dim));
  }
  return dim == 1 ? 0 : stride[pos];
}

}  // namespace

absl::StatusOr<AttentionLayout> PlanAttention(const ir::KernelContext& ctx) {
  absl::StatusOr<ir::AttentionAttrs> attrs = ir::ReadAttentionAttrs(ctx.attrs());
  if (!attrs.ok()) return ctx.Error(attrs.status().message());
  AttentionLayout l;
  l.attrs = *attrs;
  for (int i = 0; i < 3; ++i) {
    if (!ctx.has_input(i)) return ctx.Error(absl::StrCat("input ", i, " (", kNames[i], ") is missing"));
  }
  l.dtype = ctx.input(0).dtype;
  for (int i = 0; i < 3; ++i) {
    const DType t = ctx.input(i).dtype;
    if ((t != DType::kF32 && t != DType::kF16 && t != DType::kBF16) || t != l.dtype) {
      return ctx.Error(absl::StrCat("input ", i, " (", kNames[i], ") has dtype ", DTypeName(t),
                                    "; Q, K and V must share one of f32, f16, bf16"));
    }
  }
  for (int m = 0; m < 2; ++m) {
    const bool given = ctx.has_input(3 + m);
    if (given != l.has_mask(m)) {
      const char* attr = m == 0 ? "mask" : "mask2";
      return ctx.Error(given ? absl::StrCat("input ", 3 + m, " (", kNames[3 + m], ") is given but attribute '", attr,
                                            "' is 0")
                             : absl::StrCat("attribute '", attr, "' asks for input ", 3 + m, " (", kNames[3 + m],
                                            "), which is missing"));
    }
  }
  const std::vector<int64_t>& q = ctx.input(0).shape;
  const std::vector<int64_t>& k = ctx.input(1).shape;
  const std::vector<int64_t>& v = ctx.input(2).shape;
  const int rank = static_cast<int>(q.size());
  if (rank != 3 && rank != 4) return ctx.Error(absl::StrCat("input 0 (Q) has rank ", rank, "; expected 3 or 4"));
  for (int i = 1; i < 3; ++i) {
    if (static_cast<int>(ctx.input(i).shape.size()) != rank) {
      return ctx.Error(absl::StrCat("input ", i, " (", kNames[i], ") ", ShapeStr(ctx.input(i).shape),
                                    " has another rank than Q ", ShapeStr(q)));
    }
  }
  l.sq = q[rank - 2];
  l.d = q[rank - 1];
  l.sk = l.attrs.k_transposed ? k[rank - 1] : k[rank - 2];
  const int64_t kd = l.attrs.k_transposed ? k[rank - 2] : k[rank - 1];
  if (kd != l.d) {
    return ctx.Error(absl::StrCat("Q ", ShapeStr(q), " has head dim ", l.d, " but K", l.attrs.k_transposed ? "ᵀ " : " ",
                                  ShapeStr(k), " has ", kd));
  }
  if (v[rank - 2] != l.sk) {
    return ctx.Error(absl::StrCat("K ", ShapeStr(k), " has ", l.sk, " keys but V ", ShapeStr(v), " has ",
                                  v[rank - 2]));
  }
  l.dv = v[rank - 1];
  // Output batch dims: the broadcast of Q's, K's and V's, K's and V's last
  // (their key-value heads) counted as the kv_group times as many query
  // heads they serve.
  const int64_t g = l.kv_group = l.attrs.kv_group;
  std::vector<int64_t> out_batch(2, 1);
  for (int i = 0; i < 3; ++i) {
    const std::vector<int64_t>& s = ctx.input(i).shape;
    for (int a = 0; a < rank - 2; ++a) {
      int64_t& o = out_batch[2 - (rank - 2) + a];
      const bool grouped = i > 0 && g > 1 && a == rank - 3;
      if (grouped && s[a] > std::numeric_limits<int64_t>::max() / g) {
        return ctx.Error(absl::StrCat("input ", i, " (", kNames[i], ") ", ShapeStr(s), " has ", s[a],
                                      " key-value heads, too many for kv_group ", g));
      }
      const int64_t dim = grouped ? s[a] * g : s[a];
      if (dim == o || dim == 1) continue;
      if (o != 1) {
        return ctx.Error(absl::StrCat("batch dims of Q ", ShapeStr(q), ", K ", ShapeStr(k), " and V ", ShapeStr(v),
                                      " do not broadcast"));
      }
      o = dim;
    }
  }
  l.b0 = out_batch[0];
  l.b1 = out_batch[1];
  std::vector<int64_t> out_shape(out_batch.begin() + (4 - rank), out_batch.end());
  out_shape.push_back(l.sq);
  out_shape.push_back(l.dv);
  if (absl::Status s = CheckOutput(ctx, 0, l.dtype, out_shape); !s.ok()) return s;

  int64_t* const b_strides[3][2] = {{&l.q_b0, &l.q_b1}, {&l.k_b0, &l.k_b1}, {&l.v_b0, &l.v_b1}};
  for (int i = 0; i < 3; ++i) {
    std::vector<int64_t> strides = ir::Strides(ctx.input(i).shape);
    for (int a = 0; a < 2; ++a) {
      // K's and V's heads: head b1 / g of out_batch[1] / g.
      const bool grouped = i > 0 && g > 1 && a == 1;
      if (grouped && out_batch[1] % g != 0) {
        return ctx.Error(absl::StrCat("Q ", ShapeStr(q), " has ", out_batch[1], " heads, not a multiple of kv_group ",
                                      g));
      }
      absl::StatusOr<int64_t> st =
          BatchStride(ctx, i, 2, a, grouped ? out_batch[1] / g : out_batch[a], strides.data());
      if (!st.ok()) return st.status();
      *b_strides[i][a] = *st;
    }
  }
  l.k_js = l.attrs.k_transposed ? 1 : l.d;
  l.k_ds = l.attrs.k_transposed ? l.sk : 1;
  for (int mi = 0; mi < 2; ++mi) {
    if (!l.has_mask(mi)) continue;
    const int in = 3 + mi;
    const std::string name = absl::StrCat("input ", in, " (", kNames[in], ")");
    const TensorView& m = ctx.input(in);
    const DType want = l.attrs.masks[mi].kind == ir::AttentionMaskKind::kAdd ? l.dtype : DType::kBool;
    if (m.dtype != want) {
      return ctx.Error(absl::StrCat(name, " has dtype ", DTypeName(m.dtype), "; expected ", DTypeName(want)));
    }
    const int mr = static_cast<int>(m.shape.size());
    if (mr > rank) return ctx.Error(absl::StrCat(name, " ", ShapeStr(m.shape), " has rank above ", rank));
    // The mask right-aligned against the scores [b0, b1, sq, sk].
    const int64_t scores[4] = {l.b0, l.b1, l.sq, l.sk};
    AttentionLayout::MaskStrides& ms = l.masks[mi];
    int64_t* const m_strides[4] = {&ms.b0, &ms.b1, &ms.i, &ms.j};
    const std::vector<int64_t> strides = ir::Strides(m.shape);
    const int lead = 4 - mr;
    for (int a = 0; a < 4; ++a) {
      const int pos = a - lead;
      if (pos < 0) continue;
      const int64_t dim = m.shape[pos];
      if (dim != scores[a] && dim != 1) {
        return ctx.Error(absl::StrCat(name, " ", ShapeStr(m.shape), " does not broadcast to the scores [",
                                      rank == 4 ? absl::StrCat(l.b0, ", ") : "", l.b1, ", ", l.sq, ", ", l.sk, "]"));
      }
      *m_strides[a] = dim == 1 ? 0 : strides[pos];
    }
  }
  return l;
}

}  // namespace grove::backends
