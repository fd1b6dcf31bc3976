#include "lib/runtime/registry.h"

#include <cstdio>
#include <cstdlib>

#include "lib/backends/cpu/cpu_kernels.h"
#include "lib/backends/cuda/cuda_kernels.h"
#include "lib/ir/ops/ops.h"

namespace grove::runtime {
namespace {

ir::OpRegistry* BuildRegistry() {
  auto* r = new ir::OpRegistry;
  const absl::Status results[] = {
      ir::RegisterElementwiseOps(*r),      ir::RegisterReductionOps(*r),
      ir::RegisterLinalgOps(*r),           ir::RegisterShapeOps(*r),
      ir::RegisterControlFlowOps(*r),      cpu::RegisterElementwiseKernels(*r),
      cpu::RegisterReductionKernels(*r),   cpu::RegisterLinalgKernels(*r),
      cpu::RegisterShapeKernels(*r),       cpu::RegisterControlFlowKernels(*r),
      ir::RegisterMathOps(*r),             cpu::RegisterMathKernels(*r),
      ir::RegisterNnOps(*r),               cpu::RegisterNnKernels(*r),
      ir::RegisterReduceSearchOps(*r),     cpu::RegisterReduceSearchKernels(*r),
      ir::RegisterLayoutOps(*r),           cpu::RegisterLayoutKernels(*r),
      ir::RegisterRecurrentOps(*r),        cpu::RegisterRecurrentKernels(*r),
      ir::RegisterIndexingOps(*r),         cpu::RegisterIndexingKernels(*r),
      ir::RegisterLossOps(*r),             cpu::RegisterLossKernels(*r),
      ir::RegisterVisionOps(*r),           cpu::RegisterVisionKernels(*r),
      ir::RegisterQuantizationOps(*r),     cpu::RegisterQuantizationKernels(*r),
      ir::RegisterTextOps(*r),             cpu::RegisterTextKernels(*r),
      ir::RegisterSequenceOps(*r),         cpu::RegisterSequenceKernels(*r),
      cuda::RegisterCudaControlFlowKernels(*r),
      cuda::RegisterCudaShapeKernels(*r),  cuda::RegisterCudaLayoutKernels(*r),
      cuda::RegisterCudaLinalgKernels(*r), cuda::RegisterCudaNnKernels(*r),
      cuda::RegisterCudaRecurrentKernels(*r),
      cuda::RegisterCudaReductionKernels(*r), cuda::RegisterCudaNormKernels(*r),
      cuda::RegisterCudaElementwiseKernels(*r),
  };
  for (const absl::Status& s : results) {
    if (!s.ok()) {
      // A registration conflict is a bug in the library itself, found by
      // every test run; there is no user input here.
      std::fprintf(stderr, "grove: op registry: %s\n", s.ToString().c_str());
      std::abort();
    }
  }
  return r;
}

}  // namespace

const ir::OpRegistry& GlobalOpRegistry() {
  static const ir::OpRegistry* registry = BuildRegistry();
  return *registry;
}

}  // namespace grove::runtime
