// The launch of a kernel variant (jit/kernel_config.h) in a CUDA prepare:
// the dispatcher's choice for the step's problem (kernel_choice.h), its
// module and the geometry its family derives from it.
//
//   jit::KernelProblem problem{"softmax", {DType::kF32}, {{"inner", 1}, {"n", n}, {"rows", rows}}};
//   VariantLaunch v = ChooseLaunch(ctx, problem);
//   ... Exec(ctx).Launch(v.module, "softmax", v.dims, p) ...
#ifndef GROVE_LIB_BACKENDS_CUDA_VARIANT_LAUNCH_H_
#define GROVE_LIB_BACKENDS_CUDA_VARIANT_LAUNCH_H_

#include "jit/kernel_config.h"
#include "jit/module.h"
#include "lib/backends/cuda/device.h"
#include "lib/ir/op_registry.h"

namespace grove::cuda {

struct VariantLaunch {
  jit::KernelConfig config;
  jit::ModuleSpec module;  // jit::ConfigModule(config)
  LaunchDims dims;         // the family's Launch(config, problem)
};

// The most threads a block of a variant chosen on the emulated device.
inline constexpr int kEmulatedMaxThreads = 256;

// The chosen variant for `problem` (a registered family's): the
// dispatcher's pick when valid for the problem, else the family's generic
// variant; on the emulated device, the generic variant also when the pick
// has more than kEmulatedMaxThreads threads a block.
VariantLaunch ChooseLaunch(const ir::KernelContext& ctx, const jit::KernelProblem& problem);
// The launch of a given config (tests, grove tune).
VariantLaunch LaunchOf(const jit::KernelConfig& config, const jit::KernelProblem& problem);

}  // namespace grove::cuda

#endif  // GROVE_LIB_BACKENDS_CUDA_VARIANT_LAUNCH_H_
