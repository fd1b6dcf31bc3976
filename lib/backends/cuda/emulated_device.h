// The emulated CUDA device (grove_cuda_emulation, a test library): device
// memory is host memory it tracks, launches run the kernel templates compiled
// as host C++ (jit/emulation.h), GEMMs are naive loops with f32 accumulation.
// Lets CI run the CUDA backend's op kernels and executor end to end.
#ifndef GROVE_LIB_BACKENDS_CUDA_EMULATED_DEVICE_H_
#define GROVE_LIB_BACKENDS_CUDA_EMULATED_DEVICE_H_

#include <memory>

#include "lib/backends/cuda/device.h"

namespace grove::cuda {

// A fresh emulated device (its own memory accounting).
std::shared_ptr<Device> NewEmulatedDevice();

}  // namespace grove::cuda

#endif  // GROVE_LIB_BACKENDS_CUDA_EMULATED_DEVICE_H_
