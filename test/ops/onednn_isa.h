// oneDNN's JIT ISA on this machine, for tests whose expectations hold from
// AVX2 up (ONEDNN_MAX_CPU_ISA lowers it: `ONEDNN_MAX_CPU_ISA=SSE41
// grove_op_tests` checks an older CPU's paths). Below AVX2 oneDNN offers only
// its reference implementation for some primitives (BatchNormalization of a
// plain layout, a dilated Conv), which grove declines and runs its own
// kernels for, and picks other Conv implementations per layout, whose sums
// may round differently in the last bit.
#ifndef GROVE_TEST_OPS_ONEDNN_ISA_H_
#define GROVE_TEST_OPS_ONEDNN_ISA_H_

#include "oneapi/dnnl/dnnl.h"

namespace grove::testing {

inline bool OneDnnHasAvx2() {
  const dnnl_cpu_isa_t isa = dnnl_get_effective_cpu_isa();
  return (isa & dnnl_cpu_isa_avx2) == dnnl_cpu_isa_avx2;
}

}  // namespace grove::testing

#endif  // GROVE_TEST_OPS_ONEDNN_ISA_H_
