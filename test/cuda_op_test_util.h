// Runs one op on the CUDA backend's kernels over a cuda::Device (the
// emulated one in CI, the real one under `ctest -L gpu`) and compares with
// the CPU backend.
//
//   auto dev = cuda::NewEmulatedDevice();
//   Tensor a = MakeTensor<float>(DType::kF32, {2, 3}, {...});
//   ExpectCudaMatchesCpu(*dev, "Add", {&a, &b});
#ifndef GROVE_TEST_CUDA_OP_TEST_UTIL_H_
#define GROVE_TEST_CUDA_OP_TEST_UTIL_H_

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "grove/grove.h"
#include "lib/backends/cuda/device.h"

namespace grove::testing {

// The device the CUDA tests run on: the emulated device (CI, no GPU), or
// with GROVE_TEST_DEVICE=cuda the real GPU (the `gpu` ctest label). Asked
// for a GPU where there is none, it prints why and exits with 77, which
// ctest reports as skipped.
std::shared_ptr<cuda::Device> TestDevice();
bool TestDeviceIsGpu();

struct CudaRunOptions {
  // When true (as for weights and folded values in a plan), the kernel sees
  // host copies of the inputs; when false it must read them from the device.
  bool host_values = true;
  // When true, the kernel is prepared as in a plan that serves a shape
  // bucket (ExecContext::bucket_plan): the launches a bucket's graph needs.
  bool bucket_plan = false;
};

// Like RunOp, with the op's CUDA kernel: inputs are copied to `device`, the
// kernel runs there, outputs are copied back. Unimplemented when the op has
// no CUDA kernel.
absl::StatusOr<std::vector<Tensor>> RunOpCuda(cuda::Device& device, const std::string& type,
                                              std::vector<const Tensor*> inputs,
                                              std::vector<std::pair<std::string, AttrValue>> attrs = {},
                                              int num_outputs = 1, CudaRunOptions options = {});

// What one invoke of an op's CUDA kernel did on the device, apart from its
// prepare and the test's own buffers: the device's counts across the invoke
// alone (allocations, synchronisations, device-to-host reads...), and what
// the prepare declared.
struct InvokeCounts {
  cuda::DeviceCounts counts;
  bool needs_host = false;
  uint64_t workspace_bytes = 0;
  bool prepared = false;  // the kernel has a prepare
};

// Like RunOpCuda, counting the invoke (see InvokeCounts); the outputs are
// not copied back.
absl::StatusOr<InvokeCounts> CountCudaInvoke(cuda::Device& device, const std::string& type,
                                             std::vector<const Tensor*> inputs,
                                             std::vector<std::pair<std::string, AttrValue>> attrs = {},
                                             int num_outputs = 1, CudaRunOptions options = {});

// Runs the op on the CPU and on `device`; expects the same dtypes, shapes and
// values (floats within `tol` absolute + relative, everything else exactly).
// Also checks the CUDA run fails exactly when the CPU run fails.
void ExpectCudaMatchesCpu(cuda::Device& device, const std::string& type, std::vector<const Tensor*> inputs,
                          std::vector<std::pair<std::string, AttrValue>> attrs = {}, int num_outputs = 1,
                          double tol = 1e-5, CudaRunOptions options = {});

// Elementwise comparison used above: "" when equal within tolerance, else a
// description of the first mismatch.
// Deterministic values in [-1, 1) of any float dtype.
Tensor Ramp(DType dtype, std::vector<int64_t> shape, int seed = 0);

std::string CompareTensors(const Tensor& want, const Tensor& got, double tol);

// Runs `inputs` on `s` and copies its outputs; a failed run is a test
// failure (and no outputs).
std::vector<Tensor> RunCopies(Session& s, const std::vector<Tensor>& inputs);

}  // namespace grove::testing

#endif  // GROVE_TEST_CUDA_OP_TEST_UTIL_H_
