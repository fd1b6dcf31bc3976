#include "lib/backends/cuda/variant_launch.h"

#include "lib/backends/cuda/exec_context.h"
#include "lib/backends/cuda/kernel_choice.h"

namespace grove::cuda {

VariantLaunch LaunchOf(const jit::KernelConfig& config, const jit::KernelProblem& problem) {
  VariantLaunch v;
  v.config = config;
  v.module = jit::ConfigModule(config);
  const jit::KernelFamily* family = jit::FindKernelFamily(config.family);
  const jit::LaunchShape shape = family != nullptr ? family->Launch(config, problem) : jit::LaunchShape{};
  v.dims.grid = {static_cast<uint32_t>(shape.blocks), 1, 1};
  v.dims.block = {static_cast<uint32_t>(shape.threads), 1, 1};
  return v;
}

VariantLaunch ChooseLaunch(const ir::KernelContext& ctx, const jit::KernelProblem& problem) {
  const jit::KernelFamily* family = jit::FindKernelFamily(problem.family);
  jit::KernelConfig config = ChooseVariant(ctx, problem);
  if (family != nullptr && !family->Valid(config, problem)) config = family->Generic(problem);
  // The emulated device runs a block's threads as host threads: a pick of
  // more than kEmulatedMaxThreads a block runs the generic variant there
  // (same result, a fraction of the threads). kernel_variants_test runs
  // every variant, big blocks too, on the emulated device directly.
  if (family != nullptr && Exec(ctx).device().emulated() && config.Get("threads", 0) > kEmulatedMaxThreads) {
    config = family->Generic(problem);
  }
  return LaunchOf(config, problem);
}

}  // namespace grove::cuda
