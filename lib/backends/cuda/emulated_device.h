// The emulated CUDA device (grove_cuda_emulation, a test library): device
// memory is host memory it tracks, launches run the kernel templates compiled
// as host C++ (jit/emulation.h), GEMMs are naive loops with f32 accumulation.
// Lets CI run the CUDA backend's op kernels and executor end to end.
#ifndef GROVE_LIB_BACKENDS_CUDA_EMULATED_DEVICE_H_
#define GROVE_LIB_BACKENDS_CUDA_EMULATED_DEVICE_H_

#include <memory>

#include "lib/backends/cuda/device.h"

namespace grove::cuda {

// A fresh emulated device (its own memory accounting). `conditional_level`:
// the conditional graph nodes it has (Device::conditional_level): 2 as a
// driver from 12.8, 1 as 12.4 to 12.7 (an else body is a second IF node), 0
// as one without (If and Loop then run host-driven).
std::shared_ptr<Device> NewEmulatedDevice(int conditional_level = 2);

}  // namespace grove::cuda

#endif  // GROVE_LIB_BACKENDS_CUDA_EMULATED_DEVICE_H_
