// What a CUDA op kernel sees besides its KernelContext: the device, the
// session's stream, host copies of inputs whose values the plan knows
// (weights, folded shape arithmetic), and scratch device memory.
//
//   absl::Status MyKernel(ir::KernelContext& ctx) {
//     cuda::ExecContext& ec = cuda::Exec(ctx);
//     MyParams p = ...;  // from ctx.input(i) / ctx.output(i) (device views)
//     return ec.Launch({"my_file", {DType::kF32}}, "my_kernel", cuda::Grid1D(n), p);
//   }
#ifndef GROVE_LIB_BACKENDS_CUDA_EXEC_CONTEXT_H_
#define GROVE_LIB_BACKENDS_CUDA_EXEC_CONTEXT_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "lib/backends/cuda/device.h"
#include "lib/ir/op_registry.h"

namespace grove::cuda {

class ExecContext {
 public:
  ExecContext(Device& device, Stream stream) : device_(device), stream_(stream) {}

  Device& device() const { return device_; }
  Stream stream() const { return stream_; }

  // Host views of this step's inputs whose values are known on the host
  // (weights, folded values), nullptr elsewhere. Set by the executor per step.
  void SetHostInputs(absl::Span<const TensorView* const> host_inputs) { host_inputs_ = host_inputs; }
  const TensorView* host_input(int i) const {
    return i < static_cast<int>(host_inputs_.size()) ? host_inputs_[i] : nullptr;
  }

  // The values of integer input `i` (i32/i64, e.g. Slice's starts): from the
  // host copy when there is one, else copied from the device (synchronises).
  absl::StatusOr<std::vector<int64_t>> ReadInts(const ir::KernelContext& ctx, int i);
  // Any input's bytes on the host (synchronises when not known on the host).
  absl::StatusOr<std::vector<uint8_t>> ReadBytes(const ir::KernelContext& ctx, int i);

  // Device memory that lives until the next Scratch call (one step's
  // temporaries); grows, never shrinks.
  absl::StatusOr<void*> Scratch(size_t bytes);

  // Runs a GEMM on this step's stream with the session's math mode.
  absl::Status Gemm(GemmDesc gemm) {
    gemm.math = gemm_math_;
    return device_.Gemm(gemm, stream_);
  }
  void set_gemm_math(GemmDesc::Math math) { gemm_math_ = math; }
  GemmDesc::Math gemm_math() const { return gemm_math_; }

  template <typename Params>
  absl::Status Launch(const jit::ModuleSpec& module, absl::string_view kernel, const LaunchDims& dims,
                      const Params& params) {
    return device_.Launch(module, kernel, dims, &params, sizeof(Params), stream_);
  }

  ~ExecContext();

 private:
  Device& device_;
  Stream stream_;
  absl::Span<const TensorView* const> host_inputs_;
  GemmDesc::Math gemm_math_ = GemmDesc::Math::kF32;
  void* scratch_ = nullptr;
  size_t scratch_bytes_ = 0;
};

// The ExecContext of a kernel running on the CUDA backend (from
// KernelContext::Host::backend_context()); the backend guarantees it.
ExecContext& Exec(const ir::KernelContext& ctx);

}  // namespace grove::cuda

#endif  // GROVE_LIB_BACKENDS_CUDA_EXEC_CONTEXT_H_
