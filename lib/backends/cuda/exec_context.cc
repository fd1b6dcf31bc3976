#include "lib/backends/cuda/exec_context.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace grove::cuda {

ExecContext& Exec(const ir::KernelContext& ctx) {
  return *static_cast<ExecContext*>(ctx.host()->backend_context());
}

absl::Status NotPrepared(const ir::KernelContext& ctx) {
  return absl::InternalError(
      ctx.Error("the CUDA kernel was invoked without its prepare (call ir::RunKernel)").message());
}

bool ExecContext::ValuesOnHost(const ir::KernelContext& ctx, int i) const {
  if (!ctx.has_input(i) || ctx.input(i).byte_size() == 0) return true;
  const TensorView* host = host_input(i);
  return host != nullptr && host->data != nullptr;
}

absl::StatusOr<std::vector<uint8_t>> ExecContext::ReadBytes(const ir::KernelContext& ctx, int i) {
  if (!ctx.has_input(i)) return ctx.Error(absl::StrCat("input ", i, " is omitted"));
  const TensorView& in = ctx.input(i);
  std::vector<uint8_t> bytes(in.byte_size());
  if (bytes.empty()) return bytes;
  if (const TensorView* host = host_input(i); host != nullptr && host->data != nullptr) {
    std::memcpy(bytes.data(), host->data, bytes.size());
    return bytes;
  }
  if (absl::Status s = device_.CopyAsync(bytes.data(), in.data, bytes.size(), stream_); !s.ok()) return s;
  if (absl::Status s = device_.Synchronize(stream_); !s.ok()) return s;
  return bytes;
}

absl::StatusOr<std::vector<int64_t>> ExecContext::ReadInts(const ir::KernelContext& ctx, int i) {
  if (!ctx.has_input(i)) return std::vector<int64_t>{};
  const TensorView& in = ctx.input(i);
  if (in.dtype != DType::kI64 && in.dtype != DType::kI32) {
    return ctx.Error(absl::StrCat("input ", i, " must be i32 or i64, is ", DTypeName(in.dtype)));
  }
  absl::StatusOr<std::vector<uint8_t>> bytes = ReadBytes(ctx, i);
  if (!bytes.ok()) return bytes.status();
  const int64_t n = in.num_elements();
  std::vector<int64_t> out(n);
  for (int64_t k = 0; k < n; ++k) {
    if (in.dtype == DType::kI64) {
      std::memcpy(&out[k], bytes->data() + 8 * k, 8);
    } else {
      int32_t v;
      std::memcpy(&v, bytes->data() + 4 * k, 4);
      out[k] = v;
    }
  }
  return out;
}

LaunchDims Grid1D(int64_t n, int threads_per_block, int64_t max_blocks) {
  LaunchDims d;
  int64_t blocks = (n + threads_per_block - 1) / threads_per_block;
  if (blocks < 1) blocks = 1;
  if (blocks > max_blocks) blocks = max_blocks;
  d.grid = {static_cast<uint32_t>(blocks), 1, 1};
  d.block = {static_cast<uint32_t>(threads_per_block), 1, 1};
  return d;
}

}  // namespace grove::cuda
