// Input and output checks that the CPU and CUDA kernels make alike, with
// the same error messages on both backends.
#ifndef GROVE_LIB_BACKENDS_COMMON_KERNEL_CHECKS_H_
#define GROVE_LIB_BACKENDS_COMMON_KERNEL_CHECKS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "lib/ir/op_registry.h"

namespace grove::backends {

// "[2, 3, 4]".
std::string ShapeStr(absl::Span<const int64_t> s);

// A wrong output dtype or shape would make the kernel write past the buffer,
// so both are checked even though the shape function set them.
absl::Status CheckOutput(const ir::KernelContext& ctx, int i, DType dtype, absl::Span<const int64_t> shape);

// Output i was allocated with dtype `expected`.
absl::Status CheckOutputDType(const ir::KernelContext& ctx, DType expected, int i = 0);

// Output i was allocated with this dtype and shape (the elementwise kernels'
// wording of CheckOutput).
absl::Status CheckOutputLike(const ir::KernelContext& ctx, DType dtype, absl::Span<const int64_t> shape,
                             int i = 0);

// Inputs i and j share one dtype.
absl::Status CheckSameInputDTypes(const ir::KernelContext& ctx, int i, int j);

// Input i of an (N, C, spatial dims...) op has rank >= min_rank.
absl::Status CheckRank(const ir::KernelContext& ctx, int i, absl::string_view name, int min_rank);

// Input i is a vector of `count` elements (one per channel).
absl::Status CheckChannelVector(const ir::KernelContext& ctx, int i, absl::string_view name, int64_t count);

// The values of input i, an i32 or i64 tensor in host memory (CPU kernels),
// as int64; else "input i (name) has dtype ...; expected i32 or i64".
absl::StatusOr<std::vector<int64_t>> ReadHostInts(const ir::KernelContext& ctx, int i, absl::string_view name);

// Product of dims, or -1 past `limit`.
int64_t BoundedProduct(absl::Span<const int64_t> dims, int64_t limit);

}  // namespace grove::backends

#endif  // GROVE_LIB_BACKENDS_COMMON_KERNEL_CHECKS_H_
