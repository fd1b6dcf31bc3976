// Parameters of jit/kernels/rnn.cuh: the gate step of RNN, GRU and LSTM
// (ONNX opset 14) after the GEMMs of one time step.
#ifndef GROVE_JIT_KERNELS_RNN_PARAMS_H_
#define GROVE_JIT_KERNELS_RNN_PARAMS_H_

#include "jit/kernels/check_params.h"
#include "jit/kernels/types.h"

namespace grove_k {

// ir::ActivationKind, in its order.
enum RnnActKind {
  kActRelu,
  kActTanh,
  kActSigmoid,
  kActAffine,
  kActLeakyRelu,
  kActThresholdedRelu,
  kActScaledTanh,
  kActHardSigmoid,
  kActElu,
  kActSoftsign,
  kActSoftplus,
};

struct RnnAct {
  int kind;
  float alpha, beta;
};

// One time step t of direction d (of dirs) for `batch` entries of `hidden`
// units over a sequence of `seq` steps in `layout` (0: [seq, batch, ...],
// 1: [batch, seq, ...]); one thread per (b, j). Gate pre-activations are
//   hr[b * ldhr + gate * hidden + j]                (H_{t-1} R^T, from the GEMM)
// + xw[row(t, b) * gh + gate * hidden + j]          (X W^T, all steps up front;
//                                                    xw nullptr: no input, 0)
// + wb[gate * hidden + j] + rb[gate * hidden + j]   (biases, when given)
// with row(t, b) X's row of (t, b) in the layout. A batch entry whose length
// (seq_lens, i32 or i64, nullptr: all run) is <= t keeps its state; the
// others update state_h (and state_c) and write h to Y's element (t, d, b, j)
// (when y is given). A length outside 0..seq, which only a device tensor can
// hold (the host checks the others), counts as 0 and is reported to `check`
// (value: the length, bound: seq, a: the entry) by the launch whose
// check_lengths is set.
struct RnnStepParams {
  int kind;  // 0 RNN, 1 GRU, 2 LSTM
  int gru_phase;  // GRU without linear_before_reset: 0 writes reset * H to reset_h; 1 updates
  int linear_before_reset;
  int input_forget;
  int has_clip;
  float clip;
  RnnAct f, g, h;
  i64 batch, hidden, t;
  i64 seq, dirs, d;
  int layout;
  const float* hr;
  i64 ldhr;
  const float* xw;
  i64 gh;
  const float* wb;  // nullptr when there is no B
  const float* rb;
  const float* peephole;  // LSTM P of this direction ([3 * hidden]: i, o, f) or nullptr
  const void* seq_lens;
  int seq_lens_i64;
  int check_lengths;
  CheckSite check;
  float* state_h;
  float* state_c;
  float* reset_h;  // GRU phase 0 output, [batch, hidden]
  float* y;
};

// A whole direction in one launch, for plans that serve a shape bucket: the
// launches then do not depend on the sequence length or the batch, so one
// CUDA graph captured at the bucket's bound serves every shape of it with
// these parameters refreshed (cuda::ParamDevice). Blocks loop over batch
// entries (b = blockIdx.x, += gridDim.x: block-uniform, so every thread
// reaches the barriers); a block runs its entry's `step.seq` steps in order,
// each H_{t-1} R^T into its row of step.hr (rt: R of this direction
// transposed, [hidden, gh], so neighbouring threads read neighbouring
// columns; summed in order of k in f32 after rounding per `math`, as the
// device GEMM does: 0 exact, 1 tf32, 2 bf16, 3 f16), then the gates of
// RnnStepParams at that t. Steps at or past the entry's length write zeros
// to Y and leave the state; a bad length is reported (step.check_lengths). The state starts from h0 / c0 (nullptr: zeros)
// and ends in y_h / y_c (when given), element (b, j) of this direction at
// state_offset + b * state_b_stride + j.
struct RnnSequenceParams {
  RnnStepParams step;
  int reverse;
  int math;
  const float* rt;
  const float* h0;
  const float* c0;
  float* y_h;
  float* y_c;
  i64 state_offset, state_b_stride;
};

}  // namespace grove_k

#endif  // GROVE_JIT_KERNELS_RNN_PARAMS_H_
