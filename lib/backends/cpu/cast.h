// ONNX Cast of a whole tensor on the CPU, shared by Cast and CastLike so that
// both convert every dtype pair the same way (see ConvertElement).
#ifndef GROVE_LIB_BACKENDS_CPU_CAST_H_
#define GROVE_LIB_BACKENDS_CPU_CAST_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "grove/grove.h"
#include "lib/ir/op_registry.h"

namespace grove::cpu {

// Converts `in` into `out` (out.dtype, same element count, already checked
// by the caller); the same dtype is a copy. Errors name ctx's node.
absl::Status CastElements(const ir::KernelContext& ctx, const TensorView& in, TensorView& out);

// The conversion of `from` to `to` that CastElements runs, chosen once (a
// prepare keeps it); an error naming ctx's node when the pair has none.
using CastFn = absl::Status (*)(const ir::KernelContext& ctx, const TensorView& in, TensorView& out);
absl::StatusOr<CastFn> SelectCast(const ir::KernelContext& ctx, DType from, DType to);

}  // namespace grove::cpu

#endif  // GROVE_LIB_BACKENDS_CPU_CAST_H_
