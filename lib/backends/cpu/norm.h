// The CPU LayerNormalization (norm.cc) computes f32 rows with AVX where the
// CPU has it; tests turn that off to check the scalar loops too.
#ifndef GROVE_LIB_BACKENDS_CPU_NORM_H_
#define GROVE_LIB_BACKENDS_CPU_NORM_H_

namespace grove::cpu {

// Whether LayerNormalization steps prepared from now on may use the AVX rows
// (default true; they still need a CPU that has AVX).
void SetNormSimdAllowed(bool allowed);

}  // namespace grove::cpu

#endif  // GROVE_LIB_BACKENDS_CPU_NORM_H_
