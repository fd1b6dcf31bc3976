// f16/bf16 operands staged as f32: kernels that compute in f32 (GEMMs through
// BLAS, the recurrent layers) widen their half-float inputs into the
// workspace, run the f32 code, and narrow the results back (round to nearest
// even).
#ifndef GROVE_LIB_BACKENDS_CPU_HALF_STAGING_H_
#define GROVE_LIB_BACKENDS_CPU_HALF_STAGING_H_

#include <cstdint>

#include "grove/grove.h"
#include "lib/backends/cpu/workspace_layout.h"
#include "lib/ir/element_types.h"

namespace grove::cpu {

inline bool IsHalfFloat(DType dtype) { return dtype == DType::kF16 || dtype == DType::kBF16; }

// f16/bf16 -> f32 into `out` (t.num_elements() floats); returns `out`.
inline float* Widen(const TensorView& t, float* out) {
  const int64_t n = t.num_elements();
  const uint16_t* p = t.as<const uint16_t>();
  if (t.dtype == DType::kF16) {
    for (int64_t i = 0; i < n; ++i) out[i] = ir::HalfToFloat(ir::Half{p[i]});
  } else {
    for (int64_t i = 0; i < n; ++i) out[i] = ir::BFloat16ToFloat(ir::BFloat16{p[i]});
  }
  return out;
}

// f32 -> `t`'s f16/bf16 (t.num_elements() values).
inline void Narrow(const float* v, TensorView& t) {
  uint16_t* p = t.as<uint16_t>();
  const int64_t n = t.num_elements();
  if (t.dtype == DType::kF16) {
    for (int64_t i = 0; i < n; ++i) p[i] = ir::FloatToHalf(v[i]).bits;
  } else {
    for (int64_t i = 0; i < n; ++i) p[i] = ir::FloatToBFloat16(v[i]).bits;
  }
}

// The f32 copy of `t` (none when null), in a workspace laid out by `layout`.
inline void AddWidened(const TensorView* t, WorkspaceLayout* layout) {
  if (t != nullptr) layout->Add<float>(t->num_elements());
}

}  // namespace grove::cpu

#endif  // GROVE_LIB_BACKENDS_CPU_HALF_STAGING_H_
