// The gates of RNN, GRU and LSTM for one time step (the GEMMs around them
// run on the device GEMM; see lib/backends/cuda/recurrent.cc). One thread per
// (batch entry, hidden unit) reads every gate of its unit, so it can update
// that unit's state in place. Arithmetic follows the CPU reference in f32.
#ifndef GROVE_JIT_KERNELS_RNN_CUH_
#define GROVE_JIT_KERNELS_RNN_CUH_

#include "jit/kernels/prelude.cuh"
#include "jit/kernels/rnn_params.h"

namespace grove_k {

GROVE_DEVICE float rnn_act(const RnnAct& a, float v) {
  switch (a.kind) {
    case kActRelu: return fmaxf(0.0f, v);
    case kActTanh: return tanhf(v);
    case kActSigmoid: return 1.0f / (1.0f + expf(-v));
    case kActAffine: return a.alpha * v + a.beta;
    case kActLeakyRelu: return v >= 0.0f ? v : a.alpha * v;
    case kActThresholdedRelu: return v > a.alpha ? v : 0.0f;
    case kActScaledTanh: return a.alpha * tanhf(a.beta * v);
    case kActHardSigmoid: return fminf(1.0f, fmaxf(0.0f, a.alpha * v + a.beta));
    case kActElu: return v >= 0.0f ? v : a.alpha * (expf(v) - 1.0f);
    case kActSoftsign: return v / (1.0f + fabsf(v));
    case kActSoftplus: return v > 0.0f ? v + log1pf(expf(-v)) : log1pf(expf(v));
  }
  return v;
}

// Clip (when the op has one), then the activation.
GROVE_DEVICE float rnn_gate(const RnnStepParams& p, const RnnAct& a, float v) {
  if (p.has_clip) v = fminf(p.clip, fmaxf(-p.clip, v));
  return rnn_act(a, v);
}

// Pre-activation of gate `gate` of unit (b, j) from the input projection and
// the biases (Rb left out of GRU's h gate with linear_before_reset).
GROVE_DEVICE float rnn_input(const RnnStepParams& p, i64 b, int gate, i64 j) {
  const i64 col = gate * p.hidden + j;
  float bias = 0.0f;
  if (p.wb != nullptr) {
    const bool rb_inside_reset = p.kind == 1 && p.linear_before_reset && gate == 2;
    bias = p.wb[col] + (rb_inside_reset ? 0.0f : p.rb[col]);
  }
  return p.xw[(p.xw_row0 + b * p.xw_row_stride) * p.gh + col] + bias;
}

GROVE_DEVICE void rnn_step(const RnnStepParams& p) {
  const i64 total = p.batch * p.hidden;
  for (i64 i = global_thread(); i < total; i += grid_threads()) {
    const i64 b = i / p.hidden, j = i - b * p.hidden, h = p.hidden;
    const float* hr = p.hr + b * p.ldhr;
    i64 len = p.t + 1;
    if (p.seq_lens != nullptr) {
      len = p.seq_lens_i64 ? static_cast<const i64*>(p.seq_lens)[b] : static_cast<const i32*>(p.seq_lens)[b];
    }
    const bool running = p.t < len;
    float h_new;
    if (p.kind == 0) {
      h_new = rnn_gate(p, p.f, hr[j] + rnn_input(p, b, 0, j));
    } else if (p.kind == 2) {
      const float c_prev = p.state_c[i];
      float gi = hr[j] + rnn_input(p, b, 0, j);
      float go = hr[h + j] + rnn_input(p, b, 1, j);
      float gf = hr[2 * h + j] + rnn_input(p, b, 2, j);
      float gc = hr[3 * h + j] + rnn_input(p, b, 3, j);
      if (p.peephole != nullptr) {
        gi += p.peephole[j] * c_prev;
        gf += p.peephole[2 * h + j] * c_prev;
      }
      gi = rnn_gate(p, p.f, gi);
      gf = p.input_forget ? 1.0f - gi : rnn_gate(p, p.f, gf);
      gc = rnn_gate(p, p.g, gc);
      const float c_new = gf * c_prev + gi * gc;
      if (p.peephole != nullptr) go += p.peephole[h + j] * c_new;
      go = rnn_gate(p, p.f, go);
      h_new = rnn_act(p.h, c_new) * go;
      if (running) p.state_c[i] = c_new;
    } else {
      const float r = rnn_gate(p, p.f, hr[h + j] + rnn_input(p, b, 1, j));
      if (p.gru_phase == 0) {
        p.reset_h[i] = r * p.state_h[i];
        continue;
      }
      const float z = rnn_gate(p, p.f, hr[j] + rnn_input(p, b, 0, j));
      float hidden_part = hr[2 * h + j];  // Rh applied to H (or to r * H)
      if (p.linear_before_reset) hidden_part = r * (hidden_part + (p.rb != nullptr ? p.rb[2 * h + j] : 0.0f));
      const float cand = rnn_gate(p, p.g, hidden_part + rnn_input(p, b, 2, j));
      h_new = (1.0f - z) * cand + z * p.state_h[i];
    }
    if (running) {
      p.state_h[i] = h_new;
      if (p.y != nullptr) p.y[p.y_offset0 + b * p.y_stride + j] = h_new;
    }
  }
}

}  // namespace grove_k

#endif  // GROVE_JIT_KERNELS_RNN_CUH_

#if defined(GROVE_T0)
GROVE_ENTRY(rnn_step, grove_k::RnnStepParams) { grove_k::rnn_step(p); }
#endif
