// The spatial part of a Conv or pooling window as the CPU and CUDA kernels
// read it: geometry from conv_geometry.h (as in the shape functions), every
// length concrete and checked again at run time.
#ifndef GROVE_LIB_BACKENDS_COMMON_WINDOW_H_
#define GROVE_LIB_BACKENDS_COMMON_WINDOW_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "lib/ir/op_registry.h"
#include "lib/ir/ops/conv_geometry.h"

namespace grove::backends {

// Kernel products (the number of taps) above this are reported as -1.
inline constexpr int64_t kMaxWindowElements = int64_t{1} << 31;

// A Conv or pooling window over `in`, every length concrete; out_size is -1
// when the output lengths overflow (the output check then fails), and
// kernel_size -1 past kMaxWindowElements.
struct Window {
  int spatial = 0;
  std::vector<int64_t> in, out, kernel, strides, dilations, pad_begin, pad_end;
  int64_t in_size = 1, out_size = 1, kernel_size = 1;
};

// The window attributes of `op` over `spatial` dims; weight_kernel is the
// spatial part of W's shape for Conv/ConvTranspose (else null).
absl::StatusOr<ir::WindowGeometry> ReadGeometry(const ir::KernelContext& ctx, ir::WindowOp op, int spatial,
                                                const std::vector<int64_t>* weight_kernel);

// Output lengths and pads of a Conv or pooling window over `in`.
absl::StatusOr<Window> MakeWindow(const ir::KernelContext& ctx, const ir::WindowGeometry& g,
                                  absl::Span<const int64_t> in);

// A 1x1 window with stride 1 and no padding reads the input as it is.
bool IsPointwise(const Window& w);

// The checks both Conv and ConvTranspose make on X, W and B.
absl::Status CheckConvInputs(const ir::KernelContext& ctx);

// Conv or ConvTranspose after every check of its inputs, attributes and
// output 0: Y is [n, m, window.out...]. For ConvTranspose the window runs
// backwards (in: X's spatial dims, out: Y's; pad_end 0s, kernel_size the
// unbounded tap count).
struct ConvShape {
  ir::WindowGeometry g;
  Window w;
  int spatial = 0;
  int64_t n = 0, c = 0, m = 0, group = 1;
  std::vector<int64_t> out_shape;
};
absl::StatusOr<ConvShape> ResolveConv(const ir::KernelContext& ctx);
absl::StatusOr<ConvShape> ResolveConvTranspose(const ir::KernelContext& ctx);

// MaxPool or AveragePool after the checks of X and the outputs (Indices,
// output 1, only when `max_pool`).
struct PoolShape {
  Window w;
  std::vector<int64_t> out_shape;
};
absl::StatusOr<PoolShape> ResolvePool(const ir::KernelContext& ctx, bool max_pool);

// GlobalMaxPool or GlobalAveragePool: Y [N, C, 1...], `size` elements a plane.
struct GlobalPoolShape {
  std::vector<int64_t> out_shape;
  int64_t size = 1;
};
absl::StatusOr<GlobalPoolShape> ResolveGlobalPool(const ir::KernelContext& ctx);

}  // namespace grove::backends

#endif  // GROVE_LIB_BACKENDS_COMMON_WINDOW_H_
