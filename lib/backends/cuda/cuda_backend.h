// The CUDA backend behind the runtime's seam (lib/runtime/backend.h): one
// session's stream and kernel context on a real, emulated or recording
// device, its copies and waits counted, and the CUDA plan passes.
#ifndef GROVE_LIB_BACKENDS_CUDA_CUDA_BACKEND_H_
#define GROVE_LIB_BACKENDS_CUDA_CUDA_BACKEND_H_

#include <memory>

#include "absl/status/statusor.h"
#include "grove/grove.h"
#include "lib/backends/cuda/device.h"
#include "lib/runtime/backend.h"

namespace grove::cuda {

// A backend on `device` for one session: options.cuda_stream (or a stream
// it creates and destroys), options.cuda_gemm_math.
absl::StatusOr<std::unique_ptr<runtime::Backend>> CreateCudaBackend(std::shared_ptr<Device> device,
                                                                    const SessionOptions& options);

class KernelDispatch;  // kernel_choice.h
// The dispatcher of a backend made by CreateCudaBackend (grove tune forces
// variants through it); nullptr for any other backend.
KernelDispatch* DispatchOf(runtime::Backend& backend);

// The CUDA plan pass: chains of single-use elementwise steps become one
// fused step (lib/backends/cuda/fusion.h).
void FuseElementwiseChains(runtime::PlanGraph& plan);

}  // namespace grove::cuda

#endif  // GROVE_LIB_BACKENDS_CUDA_CUDA_BACKEND_H_
