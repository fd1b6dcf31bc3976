// A device that runs nothing: memory is zero-filled host memory, launches and
// GEMMs are recorded, not run. `grove compile` runs a model on it (a dry run
// with zero inputs) to learn which kernel modules that model needs, with no
// GPU present.
#ifndef GROVE_LIB_BACKENDS_CUDA_RECORDING_DEVICE_H_
#define GROVE_LIB_BACKENDS_CUDA_RECORDING_DEVICE_H_

#include <memory>
#include <vector>

#include "lib/backends/cuda/device.h"

namespace grove::cuda {

class RecordingDevice : public Device {
 public:
  virtual std::vector<jit::ModuleSpec> modules() const = 0;  // in first-use order
};

// `captures_graphs`: graphs are captured (of nodes that run nothing) and
// refreshed as on a GPU, so a dry run makes the session's graph decisions.
std::shared_ptr<RecordingDevice> NewRecordingDevice(int arch, bool captures_graphs = false);

}  // namespace grove::cuda

#endif  // GROVE_LIB_BACKENDS_CUDA_RECORDING_DEVICE_H_
