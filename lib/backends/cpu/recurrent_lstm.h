// grove's own f32 LSTM for the small layers oneDNN's RNN primitive is slow
// on (a time step of a 32-unit layer costs oneDNN 2.6 about 1 us, most of it
// fixed overhead): per direction, W, R, both biases and the peepholes are
// packed once by the prepare into gate-major rows ([I][4 Hp], [H][4 Hp],
// Hp = H rounded up to the vector's lanes, stored in panels of 4 vectors'
// columns), so that the input projection of every step is one pass of FMAs
// over the packed W, and each time step is one GEMV of H_{t-1} with the
// packed R (the four gates fused, four batch rows per pass; two on AVX2) followed by the
// gates' sigmoid and tanh a vector at a time (rational tanh, sigmoid(x) =
// 1/2 + tanh(x/2)/2, within 3e-7 of libm's). AVX-512 (16 lanes) where the
// CPU has it, else AVX2 + FMA (8 lanes). Every sequence runs to the end: a
// run whose sequence_lens has a shorter one takes the reference kernel (as
// with oneDNN, so that such a run gives the reference kernel's bytes). A
// time step is not split across threads: it is a few hundred nanoseconds to
// a few microseconds, near a fork-join of the intra-op threads (ONNX Runtime
// does not split a step either), but the batch is cut into groups that each run their own
// recurrence, and a bidirectional layer's two directions run side by side,
// on the session's threads when each task is some 20 us of work or more.
//
// Taken for f32 LSTMs with the default activations (Sigmoid, Tanh, Tanh), no
// clip, no input_forget, weights the prepare can read, on a CPU with AVX2 and
// FMA, when the layer is small enough that the fused loop beats oneDNN
// (LstmKernelTakes).
//
//   WorkspaceLayout layout;                                               // prepare
//   std::shared_ptr<const LstmKernel> k = PrepareLstmKernel(ctx, attrs, dims, &layout);
//   ...
//   if (k != nullptr && full_lengths && RunLstmKernel(*k, ctx)) return absl::OkStatus();  // invoke
#ifndef GROVE_LIB_BACKENDS_CPU_RECURRENT_LSTM_H_
#define GROVE_LIB_BACKENDS_CPU_RECURRENT_LSTM_H_

#include <cstdint>
#include <memory>

#include "lib/backends/common/recurrent_checks.h"
#include "lib/backends/cpu/workspace_layout.h"
#include "lib/ir/op_registry.h"
#include "lib/ir/ops/recurrent_attrs.h"

namespace grove::cpu {

// Which LSTMs kernels prepared from now on give the fused kernel: kAuto
// (the default) those LstmKernelTakes picks, kAlways every one it can run
// (benchmarks find the crossover with it), kOff none (GROVE_CPU_LSTM_KERNEL=0
// or GROVE_CPU_ONEDNN=0 in the environment, read once; tests and benchmarks
// compare the paths in one process with SetLstmKernelMode).
enum class LstmKernelMode { kOff, kAuto, kAlways };
LstmKernelMode GetLstmKernelMode();
void SetLstmKernelMode(LstmKernelMode mode);

// Whether the kernels prepared from now on may use AVX-512 where the CPU has
// it (true; false: AVX2 + FMA, so that tests run both on such a CPU).
bool LstmKernelAvx512Allowed();
void SetLstmKernelAvx512Allowed(bool allowed);

class ScopedLstmKernel {
 public:
  explicit ScopedLstmKernel(LstmKernelMode mode, bool avx512 = true)
      : before_(GetLstmKernelMode()), avx512_before_(LstmKernelAvx512Allowed()) {
    SetLstmKernelMode(mode);
    SetLstmKernelAvx512Allowed(avx512);
  }
  ~ScopedLstmKernel() {
    SetLstmKernelMode(before_);
    SetLstmKernelAvx512Allowed(avx512_before_);
  }
  ScopedLstmKernel(const ScopedLstmKernel&) = delete;
  ScopedLstmKernel& operator=(const ScopedLstmKernel&) = delete;

 private:
  LstmKernelMode before_;
  bool avx512_before_;
};

// The vector ISA the kernels prepared now use: "avx512", "avx2" or "" (none).
const char* LstmKernelIsa();

// Whether the fused loop is the faster choice for these dims: batch x
// hidden at most 2048 (batch 8 up to hidden 256, batch 64 up to 32, ...;
// measured against oneDNN 2.6 on a Xeon with AVX-512, see the .cc).
bool LstmKernelTakes(const backends::RecurrentDims& dims);

// How many groups of batch entries each direction's `batch` rows are cut
// into on `workers` threads, each group running its own recurrence as one
// task, when one row costs `row_macs` multiply-adds (seq x 4 hp x (input +
// hidden)): enough that directions x groups covers the threads, no more
// than the batch, each worth a fork and join (some 20 us).
int64_t LstmBatchGroups(int64_t batch, int64_t dirs, int64_t workers, double row_macs);

class LstmKernel;

// The packed weights of an LSTM node, or nullptr when the kernel does not
// take it (see above). Adds the run's scratch to `layout`.
std::shared_ptr<const LstmKernel> PrepareLstmKernel(const ir::KernelContext& ctx, const ir::RecurrentAttrs& attrs,
                                                    const backends::RecurrentDims& dims, WorkspaceLayout* layout);

// Runs the node on ctx's inputs, outputs and workspace, every sequence to
// the end. False, with nothing written, when a weight is not the one the
// prepare packed.
bool RunLstmKernel(const LstmKernel& kernel, const ir::KernelContext& ctx);

// How many LstmKernels prepares have made in this process (tests check which
// path a node took with it).
int64_t LstmKernelsMade();

}  // namespace grove::cpu

#endif  // GROVE_LIB_BACKENDS_CPU_RECURRENT_LSTM_H_
