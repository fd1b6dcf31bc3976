// CPU reference kernels of LSTM, GRU and RNN (ONNX opset 14). Per direction,
// the input projection of every time step is one GEMM (X * W^T plus both
// biases) before the recurrence; each step then adds H_{t-1} * R^T (one GEMM
// over the batch) and applies the gates. A batch entry whose sequence has
// ended keeps its state and writes zeros to Y, so Y_h holds the state after
// its last step (ONNX sequence_lens). f16 and bf16 layers compute in f32:
// their operands are widened into the workspace and the outputs narrowed
// back, so the state is rounded only where the outputs are.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "lib/backends/common/prepared.h"
#include "lib/backends/common/recurrent_checks.h"
#include "lib/backends/cpu/blas_gemm.h"
#include "lib/backends/cpu/cpu_kernels.h"
#include "lib/backends/cpu/half_staging.h"
#include "lib/backends/cpu/onednn.h"
#include "lib/backends/cpu/recurrent_lstm.h"
#include "lib/ir/element_types.h"
#include "lib/ir/ops/recurrent_attrs.h"

namespace grove::cpu {

using ir::VisitDType;

namespace {

using backends::RecurrentDims;
using ir::Activation;
using ir::ActivationKind;
using ir::KernelContext;
using ir::RecurrentAttrs;
using ir::RecurrentKind;

// The input that is not a float (the lengths), and stays as given when an
// f16/bf16 layer's operands are widened.
constexpr int kSequenceLens = 4;

// Buffers above this many elements are refused instead of attempted.
constexpr int64_t kMaxBufferElements = int64_t{1} << 31;

// Clips to [-clip, clip] (when the op has a clip) and applies `act`, in place.
template <typename T>
void Activate(const Activation& act, bool has_clip, double clip, T* v, int64_t n) {
  if (has_clip) {
    const T c = static_cast<T>(clip);
    for (int64_t i = 0; i < n; ++i) v[i] = std::min(c, std::max(-c, v[i]));
  }
  const T alpha = static_cast<T>(act.alpha), beta = static_cast<T>(act.beta);
  switch (act.kind) {
    case ActivationKind::kRelu:
      for (int64_t i = 0; i < n; ++i) v[i] = std::max(T(0), v[i]);
      break;
    case ActivationKind::kTanh:
      for (int64_t i = 0; i < n; ++i) v[i] = std::tanh(v[i]);
      break;
    case ActivationKind::kSigmoid:
      for (int64_t i = 0; i < n; ++i) v[i] = T(1) / (T(1) + std::exp(-v[i]));
      break;
    case ActivationKind::kAffine:
      for (int64_t i = 0; i < n; ++i) v[i] = alpha * v[i] + beta;
      break;
    case ActivationKind::kLeakyRelu:
      for (int64_t i = 0; i < n; ++i) v[i] = v[i] >= T(0) ? v[i] : alpha * v[i];
      break;
    case ActivationKind::kThresholdedRelu:
      for (int64_t i = 0; i < n; ++i) v[i] = v[i] > alpha ? v[i] : T(0);
      break;
    case ActivationKind::kScaledTanh:
      for (int64_t i = 0; i < n; ++i) v[i] = alpha * std::tanh(beta * v[i]);
      break;
    case ActivationKind::kHardSigmoid:
      for (int64_t i = 0; i < n; ++i) v[i] = std::min(T(1), std::max(T(0), alpha * v[i] + beta));
      break;
    case ActivationKind::kElu:
      for (int64_t i = 0; i < n; ++i) v[i] = v[i] >= T(0) ? v[i] : alpha * (std::exp(v[i]) - T(1));
      break;
    case ActivationKind::kSoftsign:
      for (int64_t i = 0; i < n; ++i) v[i] = v[i] / (T(1) + std::fabs(v[i]));
      break;
    case ActivationKind::kSoftplus:
      // log(1 + e^x) without overflow for large x.
      for (int64_t i = 0; i < n; ++i) {
        v[i] = v[i] > T(0) ? v[i] + std::log1p(std::exp(-v[i])) : std::log1p(std::exp(v[i]));
      }
      break;
  }
}

template <typename T>
absl::Status RunRecurrent(const KernelContext& ctx, const RecurrentAttrs& a, const RecurrentDims& dims,
                          absl::Span<const int64_t> lengths) {
  const RecurrentKind kind = a.kind;
  const int64_t gates = ir::GateCount(kind);
  const int64_t h = dims.hidden, batch = dims.batch, seq = dims.seq;
  const int64_t gh = gates * h;
  const int64_t rows = seq * batch;
  const bool lstm = kind == RecurrentKind::kLstm, gru = kind == RecurrentKind::kGru;

  const T* x = ctx.input(0).as<const T>();
  const T* w_all = ctx.input(1).as<const T>();
  const T* r_all = ctx.input(2).as<const T>();
  const T* b_all = ctx.has_input(3) ? ctx.input(3).as<const T>() : nullptr;
  const T* h0 = ctx.has_input(5) ? ctx.input(5).as<const T>() : nullptr;
  const T* c0 = lstm && ctx.has_input(6) ? ctx.input(6).as<const T>() : nullptr;
  const T* p_all = lstm && ctx.has_input(7) ? ctx.input(7).as<const T>() : nullptr;
  T* y = ctx.has_output(0) ? ctx.output(0).as<T>() : nullptr;
  T* y_h = ctx.has_output(1) ? ctx.output(1).as<T>() : nullptr;
  T* y_c = lstm && ctx.has_output(2) ? ctx.output(2).as<T>() : nullptr;
  if (y != nullptr) std::fill(y, y + ctx.output(0).num_elements(), T(0));

  std::vector<T> xw(static_cast<size_t>(rows * gh));
  std::vector<T> hr(static_cast<size_t>(batch * gh));
  std::vector<T> state_h(static_cast<size_t>(batch * h)), state_c(static_cast<size_t>(lstm ? batch * h : 0));
  std::vector<T> next_h(static_cast<size_t>(batch * h)), next_c(state_c.size());
  std::vector<T> gru_hidden(static_cast<size_t>(gru ? batch * h : 0));  // r (.) H, then its projection

  for (int64_t d = 0; d < dims.dirs; ++d) {
    const bool reverse = a.reverse || d == 1;
    const T* w = w_all + d * gh * dims.input;
    const T* r = r_all + d * gh * h;
    const T* wb = b_all != nullptr ? b_all + d * 2 * gh : nullptr;
    const T* rb = wb != nullptr ? wb + gh : nullptr;
    const T* p = p_all != nullptr ? p_all + d * 3 * h : nullptr;
    const Activation& f = a.activation(static_cast<int>(d), 0);
    const Activation* g = ir::ActivationsPerDirection(kind) > 1 ? &a.activation(static_cast<int>(d), 1) : nullptr;
    const Activation* hact = lstm ? &a.activation(static_cast<int>(d), 2) : nullptr;

    // Input projection of all steps, with Wb + Rb folded in (except GRU's
    // Rbh with linear_before_reset, which goes inside the reset product).
    Gemm(false, true, rows, gh, dims.input, 1.0, x, w, 0.0, xw.data());
    if (wb != nullptr) {
      for (int64_t row = 0; row < rows; ++row) {
        T* out = xw.data() + row * gh;
        for (int64_t j = 0; j < gh; ++j) {
          const bool rb_inside_reset = gru && a.linear_before_reset && j >= 2 * h;
          out[j] += wb[j] + (rb_inside_reset ? T(0) : rb[j]);
        }
      }
    }
    for (int64_t b = 0; b < batch; ++b) {
      for (int64_t j = 0; j < h; ++j) {
        state_h[b * h + j] = h0 != nullptr ? h0[dims.StateOffset(d, b) + j] : T(0);
        if (lstm) state_c[b * h + j] = c0 != nullptr ? c0[dims.StateOffset(d, b) + j] : T(0);
      }
    }

    for (int64_t step = 0; step < seq; ++step) {
      const int64_t t = reverse ? seq - 1 - step : step;
      // Gates that R reads in one product: all of them, or GRU's z and r.
      const int64_t fused = gru ? 2 * h : gh;
      Gemm(false, true, batch, fused, h, 1.0, state_h.data(), r, 0.0, hr.data());
      for (int64_t b = 0; b < batch; ++b) {
        const T* in = xw.data() + dims.XRow(t, b) * gh;
        T* pre = hr.data() + b * fused;
        for (int64_t j = 0; j < fused; ++j) pre[j] += in[j];
      }
      if (kind == RecurrentKind::kRnn) {
        Activate(f, a.has_clip, a.clip, hr.data(), batch * h);
        std::copy(hr.begin(), hr.begin() + batch * h, next_h.begin());
      } else if (lstm) {
        for (int64_t b = 0; b < batch; ++b) {
          T* gi = hr.data() + b * gh;  // i, o, f, c
          T* go = gi + h;
          T* gf = gi + 2 * h;
          T* gc = gi + 3 * h;
          const T* c_prev = state_c.data() + b * h;
          if (p != nullptr) {
            for (int64_t j = 0; j < h; ++j) {
              gi[j] += p[j] * c_prev[j];
              gf[j] += p[2 * h + j] * c_prev[j];
            }
          }
          Activate(f, a.has_clip, a.clip, gi, h);
          if (a.input_forget) {
            for (int64_t j = 0; j < h; ++j) gf[j] = T(1) - gi[j];
          } else {
            Activate(f, a.has_clip, a.clip, gf, h);
          }
          Activate(*g, a.has_clip, a.clip, gc, h);
          T* c_new = next_c.data() + b * h;
          for (int64_t j = 0; j < h; ++j) c_new[j] = gf[j] * c_prev[j] + gi[j] * gc[j];
          if (p != nullptr) {
            for (int64_t j = 0; j < h; ++j) go[j] += p[h + j] * c_new[j];
          }
          Activate(f, a.has_clip, a.clip, go, h);
          T* h_new = next_h.data() + b * h;
          std::copy(c_new, c_new + h, h_new);
          Activate(*hact, false, 0.0, h_new, h);
          for (int64_t j = 0; j < h; ++j) h_new[j] *= go[j];
        }
      } else {  // GRU
        for (int64_t b = 0; b < batch; ++b) Activate(f, a.has_clip, a.clip, hr.data() + b * 2 * h, 2 * h);
        const T* rh = r + 2 * h * h;  // Rh, [h, h]
        if (a.linear_before_reset) {
          Gemm(false, true, batch, h, h, 1.0, state_h.data(), rh, 0.0, gru_hidden.data());
          for (int64_t b = 0; b < batch; ++b) {
            const T* reset = hr.data() + b * 2 * h + h;
            T* v = gru_hidden.data() + b * h;
            for (int64_t j = 0; j < h; ++j) v[j] = reset[j] * (v[j] + (rb != nullptr ? rb[2 * h + j] : T(0)));
          }
        } else {
          for (int64_t b = 0; b < batch; ++b) {
            const T* reset = hr.data() + b * 2 * h + h;
            for (int64_t j = 0; j < h; ++j) next_h[b * h + j] = reset[j] * state_h[b * h + j];
          }
          Gemm(false, true, batch, h, h, 1.0, next_h.data(), rh, 0.0, gru_hidden.data());
        }
        for (int64_t b = 0; b < batch; ++b) {
          const T* in = xw.data() + dims.XRow(t, b) * gh + 2 * h;
          T* cand = gru_hidden.data() + b * h;
          for (int64_t j = 0; j < h; ++j) cand[j] += in[j];
          Activate(*g, a.has_clip, a.clip, cand, h);
          const T* z = hr.data() + b * 2 * h;
          for (int64_t j = 0; j < h; ++j) {
            next_h[b * h + j] = (T(1) - z[j]) * cand[j] + z[j] * state_h[b * h + j];
          }
        }
      }
      // Commit the step for the sequences that are still running.
      for (int64_t b = 0; b < batch; ++b) {
        if (t >= lengths[b]) continue;
        std::copy_n(next_h.begin() + b * h, h, state_h.begin() + b * h);
        if (lstm) std::copy_n(next_c.begin() + b * h, h, state_c.begin() + b * h);
        if (y != nullptr) std::copy_n(next_h.begin() + b * h, h, y + dims.YOffset(t, d, b));
      }
    }
    for (int64_t b = 0; b < batch; ++b) {
      if (y_h != nullptr) std::copy_n(state_h.begin() + b * h, h, y_h + dims.StateOffset(d, b));
      if (y_c != nullptr) std::copy_n(state_c.begin() + b * h, h, y_c + dims.StateOffset(d, b));
    }
  }
  return absl::OkStatus();
}

// What the prepare made: the node's attributes and dims, and grove's fused
// LSTM when it takes the node, else the oneDNN step when oneDNN takes it (a
// run either leaves, a shorter sequence_lens or a W, R, B or P that is not
// the one packed, runs the reference kernel).
struct RecurrentParams {
  backends::RecurrentCall call;
  std::shared_ptr<const LstmKernel> lstm;
  std::shared_ptr<OneDnnRecurrentStep> onednn;
};

template <RecurrentKind kKind>
absl::StatusOr<ir::PreparedKernel> PrepareRecurrent(const KernelContext& ctx) {
  absl::StatusOr<backends::RecurrentCall> call = backends::ReadRecurrentCall(ctx, kKind);
  if (!call.ok()) return call.status();
  RecurrentParams p;
  p.call = *std::move(call);
  WorkspaceLayout layout;
  if (IsHalfFloat(ctx.input(0).dtype)) {
    // The f32 copies of every float input (not sequence_lens) and output.
    for (int i = 0; i < ctx.num_inputs(); ++i) {
      if (i != kSequenceLens) AddWidened(ctx.has_input(i) ? &ctx.input(i) : nullptr, &layout);
    }
    for (int i = 0; i < ctx.num_outputs(); ++i) AddWidened(ctx.has_output(i) ? &ctx.output(i) : nullptr, &layout);
  }
  if (ctx.input(0).dtype == DType::kF32) {
    // The fused LSTM packs its weights in microseconds; oneDNN's primitive
    // takes milliseconds to make, for every plan (every sequence length).
    p.lstm = PrepareLstmKernel(ctx, p.call.attrs, p.call.dims, &layout);
    if (p.lstm == nullptr) {
      absl::StatusOr<std::shared_ptr<OneDnnRecurrentStep>> step =
          PrepareOneDnnRecurrent(ctx, p.call.attrs, p.call.dims, &layout);
      if (!step.ok()) return step.status();
      p.onednn = *std::move(step);
    }
  }
  return backends::MakePrepared(std::move(p), layout.bytes());
}

// An f16 or bf16 layer: its float inputs widened into the workspace (laid
// out by the prepare in the same order), the f32 kernel run on them, and its
// outputs narrowed back.
absl::Status RunHalfRecurrent(KernelContext& ctx, const RecurrentAttrs& a, const RecurrentDims& dims,
                              absl::Span<const int64_t> lengths) {
  constexpr int kMaxOperands = 8;  // ONNX's LSTM has 8 inputs and 3 outputs
  if (ctx.num_inputs() > kMaxOperands || ctx.num_outputs() > kMaxOperands) {
    return ctx.Error(absl::StrCat(ctx.num_inputs(), " inputs and ", ctx.num_outputs(), " outputs; at most ",
                                  kMaxOperands, " each"));
  }
  // The workspace the prepare sized (null only when every operand is empty).
  WorkspaceCursor cursor(ctx.workspace());
  TensorView ins[kMaxOperands], outs[kMaxOperands];
  TensorView* in_ptrs[kMaxOperands] = {};
  TensorView* out_ptrs[kMaxOperands] = {};
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    if (!ctx.has_input(i)) continue;
    const TensorView& t = ctx.input(i);
    ins[i] = t;
    if (i != kSequenceLens) {
      ins[i].dtype = DType::kF32;
      ins[i].data = Widen(t, cursor.Take<float>(t.num_elements()));
    }
    in_ptrs[i] = &ins[i];
  }
  for (int i = 0; i < ctx.num_outputs(); ++i) {
    if (!ctx.has_output(i)) continue;
    outs[i] = ctx.output(i);
    outs[i].dtype = DType::kF32;
    outs[i].data = cursor.Take<float>(outs[i].num_elements());
    out_ptrs[i] = &outs[i];
  }
  const KernelContext wide(ctx.node(), absl::MakeSpan(in_ptrs, ctx.num_inputs()),
                           absl::MakeSpan(out_ptrs, ctx.num_outputs()), ctx.host());
  if (absl::Status s = RunRecurrent<float>(wide, a, dims, lengths); !s.ok()) return s;
  for (int i = 0; i < ctx.num_outputs(); ++i) {
    if (ctx.has_output(i)) Narrow(static_cast<const float*>(outs[i].data), ctx.output(i));
  }
  return absl::OkStatus();
}

template <RecurrentKind kKind>
absl::Status RecurrentKernel(KernelContext& ctx) {
  const RecurrentParams* p = backends::PreparedParams<RecurrentParams>(ctx);
  if (p == nullptr) return backends::NotPrepared(ctx, "CPU");
  const RecurrentAttrs* a = &p->call.attrs;
  const RecurrentDims& dims = p->call.dims;
  const TensorView& x = ctx.input(0);
  const int64_t gates = ir::GateCount(kKind);
  const int64_t h = dims.hidden;

  absl::InlinedVector<int64_t, 16> lengths(static_cast<size_t>(dims.batch), dims.seq);
  bool full_lengths = true;  // every sequence runs to the end
  if (ctx.has_input(kSequenceLens)) {
    const TensorView& sl = ctx.input(kSequenceLens);
    if (absl::Status s = backends::CheckSequenceLensShape(ctx, dims); !s.ok()) return s;
    for (int64_t b = 0; b < dims.batch; ++b) {
      if (sl.dtype == DType::kI32) {
        lengths[b] = sl.as<const int32_t>()[b];
      } else if (sl.dtype == DType::kI64) {
        lengths[b] = sl.as<const int64_t>()[b];
      } else {
        return backends::SequenceLensDTypeError(ctx);
      }
      full_lengths = full_lengths && lengths[b] == dims.seq;
    }
    if (absl::Status s = backends::CheckSequenceLengths(ctx, dims, lengths); !s.ok()) return s;
  }

  if (absl::Status s = backends::CheckRecurrentOutputs(ctx, dims); !s.ok()) return s;

  if (p->lstm != nullptr && full_lengths && RunLstmKernel(*p->lstm, ctx)) return absl::OkStatus();
  if (p->onednn != nullptr && full_lengths) {
    absl::StatusOr<bool> ran = RunOneDnnRecurrent(*p->onednn, ctx);
    if (!ran.ok()) return ran.status();
    if (*ran) return absl::OkStatus();
  }

  const int64_t rows = dims.seq * dims.batch;
  const int64_t gh = gates * h;
  if (rows > kMaxBufferElements / std::max<int64_t>(gh, 1) || !FitsBlasInt(rows) || !FitsBlasInt(gh) ||
      !FitsBlasInt(dims.input)) {
    return ctx.Error(absl::StrCat("the input projection of ", dims.seq, " steps x ", dims.batch, " batch x ", gh,
                                  " gate units is too large"));
  }
  if (IsHalfFloat(x.dtype)) return RunHalfRecurrent(ctx, *a, dims, lengths);
  return VisitDType<float, double>(ctx, x.dtype, [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    return RunRecurrent<T>(ctx, *a, dims, lengths);
  });
}

}  // namespace

absl::Status RegisterRecurrentKernels(ir::OpRegistry& registry) {
  // sequence_lens is read on the host, where a CPU kernel's inputs are.
  constexpr uint64_t kHostInputs = 0;
  if (absl::Status s = registry.SetKernel(
          "RNN", ir::Backend::kCpu,
          ir::KernelDef{&RecurrentKernel<RecurrentKind::kRnn>, &PrepareRecurrent<RecurrentKind::kRnn>, kHostInputs});
      !s.ok()) {
    return s;
  }
  if (absl::Status s = registry.SetKernel(
          "GRU", ir::Backend::kCpu,
          ir::KernelDef{&RecurrentKernel<RecurrentKind::kGru>, &PrepareRecurrent<RecurrentKind::kGru>, kHostInputs});
      !s.ok()) {
    return s;
  }
  return registry.SetKernel(
      "LSTM", ir::Backend::kCpu,
      ir::KernelDef{&RecurrentKernel<RecurrentKind::kLstm>, &PrepareRecurrent<RecurrentKind::kLstm>, kHostInputs});
}

}  // namespace grove::cpu
