// The gates of RNN, GRU and LSTM (the GEMMs around them run on the device
// GEMM; see lib/backends/cuda/recurrent.cc). One thread per (batch entry,
// hidden unit) reads every gate of its unit, so it can update that unit's
// state in place. Arithmetic follows the CPU reference in f32. rnn_step is
// one time step; rnn_sequence runs a whole direction in one launch, its
// products summed as the device GEMM sums them, so both give the same bits
// on the emulated device.
#ifndef GROVE_JIT_KERNELS_RNN_CUH_
#define GROVE_JIT_KERNELS_RNN_CUH_

#include "jit/kernels/gemm_math.cuh"
#include "jit/kernels/index_common.cuh"
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

// The length of batch entry b's sequence (0 for one outside 0..seq);
// `report`: a bad one goes to p.check.
GROVE_DEVICE i64 rnn_length(const RnnStepParams& p, i64 b, bool report = false) {
  if (p.seq_lens == nullptr) return p.seq;
  const i64 len =
      p.seq_lens_i64 ? static_cast<const i64*>(p.seq_lens)[b] : static_cast<i64>(static_cast<const i32*>(p.seq_lens)[b]);
  if (len >= 0 && len <= p.seq) return len;
  if (report) mv::report_check(p.check, len, p.seq, b, 0);
  return 0;
}

// Pre-activation of gate `gate` of unit (b, j) at step p.t from the input
// projection and the biases (Rb left out of GRU's h gate with
// linear_before_reset).
GROVE_DEVICE float rnn_input(const RnnStepParams& p, i64 b, int gate, i64 j) {
  const i64 col = gate * p.hidden + j;
  float bias = 0.0f;
  if (p.wb != nullptr) {
    const bool rb_inside_reset = p.kind == 1 && p.linear_before_reset && gate == 2;
    bias = p.wb[col] + (rb_inside_reset ? 0.0f : p.rb[col]);
  }
  const i64 row = p.layout == 0 ? p.t * p.batch + b : b * p.seq + p.t;
  return (p.xw != nullptr ? p.xw[row * p.gh + col] : 0.0f) + bias;
}

// Y's element (t, d, b, j): [seq, dirs, batch, hidden] or [batch, seq, dirs, hidden].
GROVE_DEVICE i64 rnn_y_index(const RnnStepParams& p, i64 b, i64 j) {
  return (p.layout == 0 ? (p.t * p.dirs + p.d) * p.batch + b : (b * p.seq + p.t) * p.dirs + p.d) * p.hidden + j;
}

// Unit (b, j) at step p.t.
GROVE_DEVICE void rnn_unit(const RnnStepParams& p, i64 b, i64 j) {
  const i64 h = p.hidden, i = b * h + j;
  const float* hr = p.hr + b * p.ldhr;
  const bool running = p.t < rnn_length(p, b, p.check_lengths != 0 && j == 0);
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
      return;
    }
    const float z = rnn_gate(p, p.f, hr[j] + rnn_input(p, b, 0, j));
    float hidden_part = hr[2 * h + j];  // Rh applied to H (or to r * H)
    if (p.linear_before_reset) hidden_part = r * (hidden_part + (p.rb != nullptr ? p.rb[2 * h + j] : 0.0f));
    const float cand = rnn_gate(p, p.g, hidden_part + rnn_input(p, b, 2, j));
    h_new = (1.0f - z) * cand + z * p.state_h[i];
  }
  if (running) {
    p.state_h[i] = h_new;
    if (p.y != nullptr) p.y[rnn_y_index(p, b, j)] = h_new;
  }
}

GROVE_DEVICE void rnn_step(const RnnStepParams& p) {
  const i64 total = p.batch * p.hidden;
  for (i64 i = global_thread(); i < total; i += grid_threads()) rnn_unit(p, i / p.hidden, i % p.hidden);
}

// out[col0 + c] = sum over k of in[k] * R^T[k][col0 + c] for c < n, by the
// block's threads: the device GEMM's sum (rounded per q.math, in order of k).
GROVE_DEVICE void rnn_hidden_product(const RnnSequenceParams& q, const float* in, float* out, i64 col0, i64 n) {
  const i64 h = q.step.hidden, gh = q.step.gh;
  for (i64 c = threadIdx.x; c < n; c += blockDim.x) {
    float acc = 0.0f;
    for (i64 k = 0; k < h; ++k) {
      acc += gemm_input_rounded(in[k], q.math) * gemm_input_rounded(q.rt[k * gh + col0 + c], q.math);
    }
    out[col0 + c] = acc;
  }
}

GROVE_DEVICE void rnn_sequence(const RnnSequenceParams& q) {
  RnnStepParams p = q.step;
  const i64 h = p.hidden, seq = p.seq;
  const bool reset_product = p.kind == 1 && !p.linear_before_reset;  // GRU's (r (.) H) Rh^T
  const i64 cols = reset_product ? 2 * h : p.gh;
  const bool check_lengths = p.check_lengths != 0;  // each entry's length reported here, not per unit
  p.check_lengths = 0;
  for (i64 b = blockIdx.x; b < p.batch; b += gridDim.x) {  // block-uniform, as is every branch below
    float* sh = p.state_h + b * h;
    float* sc = p.state_c + b * h;
    float* hr = const_cast<float*>(p.hr) + b * p.ldhr;  // the step params read it as const
    const i64 state = q.state_offset + b * q.state_b_stride;
    for (i64 j = threadIdx.x; j < h; j += blockDim.x) {
      sh[j] = q.h0 != nullptr ? q.h0[state + j] : 0.0f;
      if (p.kind == 2) sc[j] = q.c0 != nullptr ? q.c0[state + j] : 0.0f;
    }
    const i64 len = rnn_length(p, b, threadIdx.x == 0 && check_lengths);
    for (i64 step = 0; step < seq; ++step) {
      p.t = q.reverse ? seq - 1 - step : step;
      if (p.t >= len) {  // past the entry's length: Y is zero there, the state stays
        for (i64 j = threadIdx.x; j < h && p.y != nullptr; j += blockDim.x) p.y[rnn_y_index(p, b, j)] = 0.0f;
        continue;
      }
      __syncthreads();  // the state is complete (the initial one, or the last step's)
      rnn_hidden_product(q, sh, hr, 0, cols);
      __syncthreads();
      if (reset_product) {
        p.gru_phase = 0;
        for (i64 j = threadIdx.x; j < h; j += blockDim.x) rnn_unit(p, b, j);
        __syncthreads();
        rnn_hidden_product(q, p.reset_h + b * h, hr, 2 * h, h);
        __syncthreads();
      }
      p.gru_phase = 1;
      for (i64 j = threadIdx.x; j < h; j += blockDim.x) rnn_unit(p, b, j);
    }
    // Each thread reads back only the units it wrote.
    for (i64 j = threadIdx.x; j < h; j += blockDim.x) {
      if (q.y_h != nullptr) q.y_h[state + j] = sh[j];
      if (q.y_c != nullptr) q.y_c[state + j] = sc[j];
    }
  }
}

}  // namespace grove_k

#endif  // GROVE_JIT_KERNELS_RNN_CUH_

#if defined(GROVE_T0)
GROVE_ENTRY(rnn_step, grove_k::RnnStepParams) { grove_k::rnn_step(p); }
GROVE_ENTRY(rnn_sequence, grove_k::RnnSequenceParams) { grove_k::rnn_sequence(p); }
#endif
