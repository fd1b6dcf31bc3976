// The CPU kernel of FusedAttention (lib/ir/ops/attention_attrs.h), f32.
// Per (batch, head): K, scaled as the chain scaled it, is packed once as Kᵀ
// [d, sk] in the workspace; then blocks of kRows query rows get their scores
// [kRows, sk] (for each head dim c, a row of Kᵀ times q[c], so the inner loop
// runs along keys and vectorizes), the scale and mask, and the row softmax
// exactly as the Softmax kernel computes it (lib/backends/cpu/norm.cc: the
// max, exp(x - max) in f32, their sum in double, times f32(1 / sum)); the
// output rows are sum_j p[j] * V[j], accumulated along V's rows.
// The scores never leave the workspace: no [sq, sk] tensor is written.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "lib/backends/common/attention_checks.h"
#include "lib/backends/common/prepared.h"
#include "lib/backends/cpu/cpu_kernels.h"
#include "lib/backends/cpu/workspace_layout.h"

namespace grove::cpu {
namespace {

using backends::AttentionLayout;
using ir::AttentionMaskKind;
using ir::AttentionScaleOp;

// Query rows that share one pass over Kᵀ and V.
constexpr int64_t kRows = 4;

inline float Scaled(float x, AttentionScaleOp op, float s) {
  switch (op) {
    case AttentionScaleOp::kMul: return x * s;
    case AttentionScaleOp::kDiv: return x / s;
    default: return x;
  }
}

struct CpuAttention {
  AttentionLayout l;
  bool pack_k = true;  // false: K is given as Kᵀ, unscaled, and is read in place
};

absl::StatusOr<ir::PreparedKernel> PrepareAttention(const ir::KernelContext& ctx) {
  absl::StatusOr<AttentionLayout> l = backends::PlanAttention(ctx);
  if (!l.ok()) return l.status();
  if (l->dtype != DType::kF32) {
    return ctx.Error(absl::StrCat("Q has dtype ", DTypeName(l->dtype), "; the CPU kernel computes in f32 only"));
  }
  CpuAttention a;
  a.l = *l;
  a.pack_k = !(l->attrs.k_transposed && l->attrs.k_scale.op == AttentionScaleOp::kNone);
  WorkspaceLayout ws;
  if (a.pack_k) ws.Add<float>(l->d * l->sk);
  ws.Add<float>(kRows * l->sk);  // scores, then probabilities
  ws.Add<float>(kRows * l->d);   // scaled query rows
  return backends::MakePrepared(std::move(a), ws.bytes());
}

absl::Status AttentionKernel(ir::KernelContext& ctx) {
  const CpuAttention* a = backends::PreparedParams<CpuAttention>(ctx);
  if (a == nullptr) return backends::NotPrepared(ctx, "CPU");
  const AttentionLayout& l = a->l;
  if (l.empty()) return absl::OkStatus();
  float* out = ctx.output(0).as<float>();
  if (l.sk == 0) {  // an empty softmax times an empty V: zeros, as MatMul with K = 0 gives
    std::fill(out, out + l.b0 * l.b1 * l.sq * l.dv, 0.0f);
    return absl::OkStatus();
  }
  const float* q = ctx.input(0).as<const float>();
  const float* k = ctx.input(1).as<const float>();
  const float* v = ctx.input(2).as<const float>();
  const float* mask_f = l.attrs.mask == AttentionMaskKind::kAdd ? ctx.input(3).as<const float>() : nullptr;
  const uint8_t* mask_b =
      l.attrs.mask == AttentionMaskKind::kWhere ? static_cast<const uint8_t*>(ctx.input(3).data) : nullptr;
  const ir::AttentionAttrs& at = l.attrs;
  const float q_s = static_cast<float>(at.q_scale.value), k_s = static_cast<float>(at.k_scale.value);
  const float s_s = static_cast<float>(at.scale.value), fill = static_cast<float>(at.mask_fill);
  const int64_t sq = l.sq, sk = l.sk, d = l.d, dv = l.dv;

  WorkspaceCursor ws(ctx.workspace());
  float* kt_buf = a->pack_k ? ws.Take<float>(d * sk) : nullptr;
  float* scores = ws.Take<float>(kRows * sk);
  float* qbuf = ws.Take<float>(kRows * d);

  for (int64_t b0 = 0; b0 < l.b0; ++b0) {
    for (int64_t b1 = 0; b1 < l.b1; ++b1) {
      const float* qh = q + b0 * l.q_b0 + b1 * l.q_b1;
      const float* kh = k + b0 * l.k_b0 + b1 * l.k_b1;
      const float* vh = v + b0 * l.v_b0 + b1 * l.v_b1;
      const int64_t m_base = b0 * l.m_b0 + b1 * l.m_b1;
      float* oh = out + (b0 * l.b1 + b1) * sq * dv;
      const float* kt = kh;  // Kᵀ [d, sk]
      if (a->pack_k) {
        for (int64_t c = 0; c < d; ++c) {
          float* row = kt_buf + c * sk;
          for (int64_t j = 0; j < sk; ++j) row[j] = Scaled(kh[j * l.k_js + c * l.k_ds], at.k_scale.op, k_s);
        }
        kt = kt_buf;
      }
      for (int64_t i0 = 0; i0 < sq; i0 += kRows) {
        const int64_t rows = std::min(kRows, sq - i0);
        for (int64_t r = 0; r < rows; ++r) {
          const float* qr = qh + (i0 + r) * d;
          for (int64_t c = 0; c < d; ++c) qbuf[r * d + c] = Scaled(qr[c], at.q_scale.op, q_s);
          std::fill(scores + r * sk, scores + (r + 1) * sk, 0.0f);
        }
        for (int64_t c = 0; c < d; ++c) {
          const float* kc = kt + c * sk;
          for (int64_t r = 0; r < rows; ++r) {
            const float qv = qbuf[r * d + c];
            float* sr = scores + r * sk;
            for (int64_t j = 0; j < sk; ++j) sr[j] += qv * kc[j];
          }
        }
        for (int64_t r = 0; r < rows; ++r) {
          float* sr = scores + r * sk;
          if (at.scale.op == AttentionScaleOp::kMul) {
            for (int64_t j = 0; j < sk; ++j) sr[j] *= s_s;
          } else if (at.scale.op == AttentionScaleOp::kDiv) {
            for (int64_t j = 0; j < sk; ++j) sr[j] /= s_s;
          }
          const int64_t m_row = m_base + (i0 + r) * l.m_i;
          if (mask_f != nullptr) {
            for (int64_t j = 0; j < sk; ++j) sr[j] += mask_f[m_row + j * l.m_j];
          } else if (mask_b != nullptr) {
            for (int64_t j = 0; j < sk; ++j) {
              if ((mask_b[m_row + j * l.m_j] != 0) == at.fill_if_true) sr[j] = fill;
            }
          }
          // The Softmax kernel's arithmetic (an all -inf row gives NaN, as there).
          float m = sr[0];
          for (int64_t j = 1; j < sk; ++j) m = sr[j] > m ? sr[j] : m;
          double total = 0;
          for (int64_t j = 0; j < sk; ++j) {
            sr[j] = std::exp(sr[j] - m);
            total += sr[j];
          }
          const float inv = static_cast<float>(1.0 / total);
          for (int64_t j = 0; j < sk; ++j) sr[j] *= inv;
          std::fill(oh + (i0 + r) * dv, oh + (i0 + r + 1) * dv, 0.0f);
        }
        for (int64_t j = 0; j < sk; ++j) {
          const float* vj = vh + j * dv;
          for (int64_t r = 0; r < rows; ++r) {
            const float p = scores[r * sk + j];
            float* o = oh + (i0 + r) * dv;
            for (int64_t c = 0; c < dv; ++c) o[c] += p * vj[c];
          }
        }
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status RegisterAttentionKernels(ir::OpRegistry& registry) {
  return registry.SetKernel(ir::kFusedAttentionOp, ir::Backend::kCpu,
                            ir::KernelDef{&AttentionKernel, &PrepareAttention});
}

}  // namespace grove::cpu
