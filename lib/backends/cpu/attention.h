// The CPU kernel of FusedAttention (attention.cc) picks its AVX2/FMA blocks
// when the CPU has them (the softmax, the scores and the output blocks in
// AVX-512 where it has that); tests
// turn them off to check the AVX2 rows and the plain loops too.
#ifndef GROVE_LIB_BACKENDS_CPU_ATTENTION_H_
#define GROVE_LIB_BACKENDS_CPU_ATTENTION_H_

namespace grove::cpu {

// Whether steps prepared from now on may use the AVX2/FMA blocks (default
// true; they still need a CPU that has both).
void SetAttentionSimdAllowed(bool allowed);

// Whether those steps may compute the row softmax and the scores and output
// blocks in AVX-512 where the CPU has it (default true); off, the AVX2 ones.
void SetAttentionAvx512Allowed(bool allowed);

}  // namespace grove::cpu

#endif  // GROVE_LIB_BACKENDS_CPU_ATTENTION_H_
