// Parameters of jit/kernels/rnn.cuh: the gate step of RNN, GRU and LSTM
// (ONNX opset 14) after the GEMMs of one time step.
#ifndef GROVE_JIT_KERNELS_RNN_PARAMS_H_
#define GROVE_JIT_KERNELS_RNN_PARAMS_H_

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

// One time step t of one direction for `batch` entries of `hidden` units;
// one thread per (b, j). Gate pre-activations are
//   hr[b * ldhr + gate * hidden + j]                (H_{t-1} R^T, from the GEMM)
// + xw[xw_row(b) * gh + gate * hidden + j]          (X W^T, all steps up front)
// + wb[gate * hidden + j] + rb[gate * hidden + j]   (biases, when given)
// with xw_row(b) = xw_row0 + b * xw_row_stride. A batch entry whose length
// (seq_lens, i32 or i64, nullptr: all run) is <= t keeps its state; the
// others update state_h (and state_c) and write h to
// y[y_offset0 + b * y_stride] (when y is given).
struct RnnStepParams {
  int kind;  // 0 RNN, 1 GRU, 2 LSTM
  int gru_phase;  // GRU without linear_before_reset: 0 writes reset * H to reset_h; 1 updates
  int linear_before_reset;
  int input_forget;
  int has_clip;
  float clip;
  RnnAct f, g, h;
  i64 batch, hidden, t;
  const float* hr;
  i64 ldhr;
  const float* xw;
  i64 xw_row0, xw_row_stride, gh;
  const float* wb;  // nullptr when there is no B
  const float* rb;
  const float* peephole;  // LSTM P of this direction ([3 * hidden]: i, o, f) or nullptr
  const void* seq_lens;
  int seq_lens_i64;
  float* state_h;
  float* state_c;
  float* reset_h;  // GRU phase 0 output, [batch, hidden]
  float* y;
  i64 y_offset0, y_stride;
};

}  // namespace grove_k

#endif  // GROVE_JIT_KERNELS_RNN_PARAMS_H_
