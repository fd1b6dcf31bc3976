// Launch helpers of the CUDA data-movement kernels (jit/kernels/copy.cuh and
// friends), shared by shape_ops.cc and layout.cc. Elements are opaque bytes:
// every dtype of one size uses the same module (u8, f16, i32, i64 stand for
// 1, 2, 4 and 8 bytes).
//
//   // Transpose of a [2, 3] f32 matrix: read it with strides {1, 3}.
//   cuda::StridedCopy(ec, 4, {3, 2}, in, {1, 3}, out);
#ifndef GROVE_LIB_BACKENDS_CUDA_STRIDED_COPY_H_
#define GROVE_LIB_BACKENDS_CUDA_STRIDED_COPY_H_

#include <cstddef>
#include <cstdint>
#include <optional>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "jit/kernels/copy_params.h"
#include "jit/module.h"
#include "lib/backends/cuda/exec_context.h"

namespace grove::cuda {

// The module of kernel file `file` for elements of `elem_size` bytes (1, 2,
// 4 or 8).
absl::StatusOr<jit::ModuleSpec> WidthModule(absl::string_view file, size_t elem_size);

// Writes src[sum_d i_d * src_strides[d]] densely to dst in row-major order of
// `shape` (device pointers; strides in elements, may be zero or negative;
// src at the element of index 0). A non-empty `wrap` reads coordinate
// i_d % wrap[d] where wrap[d] > 0 (Tile). Dims are merged first; a
// contiguous result is one device copy, a contiguous inner dim a row copy.
// Nothing is launched for an empty shape. InvalidArgument when more than
// grove_k::kMaxRank dims remain after merging.
absl::Status StridedCopy(ExecContext& ec, size_t elem_size, absl::Span<const int64_t> shape, const void* src,
                         absl::Span<const int64_t> src_strides, void* dst, absl::Span<const int64_t> wrap = {});

// StridedCopy in two halves: PlanStridedCopy (in a prepare: dims merged, the
// kind of copy, the launch parameters without pointers) and RunStridedCopy
// (in the invoke: pointers in, one copy or launch).
// kTranspose: after merging, dst is [batch,] rows x cols and src's rows
// are contiguous (strides [src_batch,] 1, ld): the "transpose" family's
// tiled kernel, its variant chosen for the step when `ctx` is given (the
// dispatch table, else the cost model), else its generic tiles.
struct StridedCopyPlan {
  enum Kind { kNothing, kBytes, kRows, kKernel, kTranspose } kind = kNothing;
  size_t elem_size = 0;
  size_t bytes = 0;                         // kBytes
  int64_t rows = 0, cols = 0, src_ld = 0;   // kRows (dst_ld = cols)
  grove_k::StridedCopyParams params{};      // kKernel
  grove_k::TransposeTileParams transpose{};  // kTranspose
  jit::ModuleSpec module;
  LaunchDims dims;
};
absl::StatusOr<StridedCopyPlan> PlanStridedCopy(size_t elem_size, absl::Span<const int64_t> shape,
                                                absl::Span<const int64_t> src_strides,
                                                absl::Span<const int64_t> wrap = {},
                                                const ir::KernelContext* ctx = nullptr);
absl::Status RunStridedCopy(ExecContext& ec, const StridedCopyPlan& plan, const void* src, void* dst);

// rows x cols elements: dst[r * dst_ld + c] = src[r * src_ld + c], with the
// widest element width that the sizes and the pointers' alignment allow.
absl::Status CopyRows(ExecContext& ec, size_t elem_size, int64_t rows, int64_t cols, const void* src,
                      int64_t src_ld, void* dst, int64_t dst_ld);

// Checks `count` index tuples (i32 or i64) against `dims` on the device
// (jit/kernels/check.cuh's check_indices), a failure recorded at `check`
// (a deferred check, exec_context.h): the check of a Gather or ScatterND that
// has no element to move. Nothing when count is 0.
absl::Status LaunchIndexCheck(ExecContext& ec, const void* indices, bool indices_i64, int64_t count,
                              absl::Span<const int64_t> dims, const grove_k::CheckSite& check);
// Checks that none of `n` integers of `elem_size` bytes at `values` is 0 on
// the device (check.cuh's check_nonzero), a zero's flat position recorded at
// `check`: integer Div's divisor when only the device has it.
absl::Status LaunchNonZeroCheck(ExecContext& ec, const void* values, size_t elem_size, int64_t n,
                                const grove_k::CheckSite& check);

// The host copy of input i when the plan knows its values, else nullptr.
const TensorView* HostValues(const ExecContext& ec, const ir::KernelContext& ctx, int i);

// Writes `values` as i64 to dst (device), with the values in kernel
// parameters: no host buffer has to outlive the asynchronous work.
absl::Status WriteValues(ExecContext& ec, void* dst, absl::Span<const int64_t> values);

// The kernel of ops that copy their input's bytes unchanged into the planned
// output (Reshape, Flatten, Squeeze, Unsqueeze): one device copy.
absl::StatusOr<ir::PreparedKernel> PrepareSameBytes(const ir::KernelContext& ctx);
absl::Status SameBytesKernel(ir::KernelContext& ctx);

// Byte offset helpers for device pointers (never dereferenced on the host).
inline const void* ByteOffset(const void* p, int64_t bytes) { return static_cast<const uint8_t*>(p) + bytes; }
inline void* ByteOffset(void* p, int64_t bytes) { return static_cast<uint8_t*>(p) + bytes; }

}  // namespace grove::cuda

#endif  // GROVE_LIB_BACKENDS_CUDA_STRIDED_COPY_H_
