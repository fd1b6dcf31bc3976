#include "lib/backends/cuda/strided_copy.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "jit/kernel_config.h"
#include "jit/kernels/copy_params.h"
#include "jit/kernels/fill_params.h"
#include "jit/kernels/check_params.h"
#include "lib/backends/cuda/variant_launch.h"

namespace grove::cuda {

absl::StatusOr<jit::ModuleSpec> WidthModule(absl::string_view file, size_t elem_size) {
  DType t;
  switch (elem_size) {
    case 1: t = DType::kU8; break;
    case 2: t = DType::kF16; break;
    case 4: t = DType::kI32; break;
    case 8: t = DType::kI64; break;
    default: return absl::InvalidArgumentError(absl::StrCat("no CUDA copy for elements of ", elem_size, " bytes"));
  }
  return jit::ModuleSpec{std::string(file), {t}};
}

absl::Status LaunchIndexCheck(ExecContext& ec, const void* indices, bool indices_i64, int64_t count,
                              absl::Span<const int64_t> dims, const grove_k::CheckSite& check) {
  if (count == 0 || dims.empty()) return absl::OkStatus();
  if (dims.size() > static_cast<size_t>(grove_k::kMaxRank)) {
    return absl::InvalidArgumentError(
        absl::StrCat("index tuples of ", dims.size(), " coordinates; the CUDA check takes ", grove_k::kMaxRank));
  }
  grove_k::IndexCheckParams p{};
  p.indices = indices;
  p.count = count;
  p.dims.rank = static_cast<int>(dims.size());
  for (size_t d = 0; d < dims.size(); ++d) p.dims.d[d] = dims[d];
  p.indices_i64 = indices_i64 ? 1 : 0;
  p.check = check;
  const jit::ModuleSpec module{"check", {DType::kI64}};
  return ec.Launch(module, "check_indices", Grid1D(count * p.dims.rank), p);
}

absl::Status LaunchNonZeroCheck(ExecContext& ec, const void* values, size_t elem_size, int64_t n,
                                const grove_k::CheckSite& check) {
  if (n == 0) return absl::OkStatus();
  absl::StatusOr<jit::ModuleSpec> module = WidthModule("check", elem_size);
  if (!module.ok()) return module.status();
  grove_k::NonZeroCheckParams p{};
  p.values = values;
  p.n = n;
  p.check = check;
  return ec.Launch(*module, "check_nonzero", Grid1D(n), p);
}

const TensorView* HostValues(const ExecContext& ec, const ir::KernelContext& ctx, int i) {
  if (!ctx.has_input(i)) return nullptr;
  const TensorView* host = ec.host_input(i);
  if (host == nullptr || (host->data == nullptr && host->byte_size() > 0)) return nullptr;
  return host;
}

absl::Status CopyRows(ExecContext& ec, size_t elem_size, int64_t rows, int64_t cols, const void* src,
                      int64_t src_ld, void* dst, int64_t dst_ld) {
  if (rows <= 0 || cols <= 0) return absl::OkStatus();
  const int64_t es = static_cast<int64_t>(elem_size);
  if (rows == 1 || (src_ld == cols && dst_ld == cols)) {
    return ec.device().CopyAsync(dst, src, static_cast<size_t>(rows * cols * es), ec.stream());
  }
  // Move the widest unit that divides every size and both addresses.
  const auto src_addr = reinterpret_cast<uintptr_t>(src), dst_addr = reinterpret_cast<uintptr_t>(dst);
  int64_t w = 8;
  while (w > es && ((cols * es) % w != 0 || (src_ld * es) % w != 0 || (dst_ld * es) % w != 0 ||
                    src_addr % w != 0 || dst_addr % w != 0)) {
    w /= 2;
  }
  if (w < es) w = es;
  absl::StatusOr<jit::ModuleSpec> module = WidthModule("copy", static_cast<size_t>(w));
  if (!module.ok()) return module.status();
  const grove_k::CopyRowsParams p{src, dst, rows, cols * es / w, src_ld * es / w, dst_ld * es / w};
  return ec.Launch(*module, "copy_rows", Grid1D(rows * p.cols), p);
}

absl::StatusOr<StridedCopyPlan> PlanStridedCopy(size_t elem_size, absl::Span<const int64_t> shape,
                                                absl::Span<const int64_t> src_strides,
                                                absl::Span<const int64_t> wrap, const ir::KernelContext* ctx) {
  StridedCopyPlan plan;
  plan.elem_size = elem_size;
  std::vector<int64_t> dims, strides, wraps;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == 0) return plan;  // nothing to copy
    if (shape[i] == 1) continue;
    int64_t w = i < wrap.size() && wrap[i] > 0 && wrap[i] < shape[i] ? wrap[i] : 0;
    int64_t stride = src_strides[i];
    if (w == 1) w = stride = 0;  // every coordinate reads index 0: a broadcast
    if (!dims.empty() && w == 0 && wraps.back() == 0 && strides.back() == stride * shape[i]) {
      dims.back() *= shape[i];
      strides.back() = stride;
      continue;
    }
    dims.push_back(shape[i]);
    strides.push_back(stride);
    wraps.push_back(w);
  }
  const int rank = static_cast<int>(dims.size());
  const int64_t es = static_cast<int64_t>(elem_size);
  if (rank == 0) {
    plan.kind = StridedCopyPlan::kBytes;
    plan.bytes = elem_size;
    return plan;
  }
  if (wraps.back() == 0 && strides.back() == 1) {
    if (rank == 1) {
      plan.kind = StridedCopyPlan::kBytes;
      plan.bytes = static_cast<size_t>(dims[0] * es);
      return plan;
    }
    if (rank == 2 && wraps[0] == 0) {
      plan.kind = StridedCopyPlan::kRows;
      plan.rows = dims[0];
      plan.cols = dims[1];
      plan.src_ld = strides[0];
      return plan;
    }
  }
  if (rank > grove_k::kMaxRank) {
    return absl::InvalidArgumentError(absl::StrCat("a strided copy with ", rank, " dims after merging; the CUDA ",
                                                   "kernels take at most ", grove_k::kMaxRank));
  }
  absl::StatusOr<jit::ModuleSpec> module = WidthModule("copy", elem_size);
  if (!module.ok()) return module.status();
  // [batch,] rows x cols with src strides [sb,] 1, ld: a transpose by tiles.
  const bool no_wrap = std::all_of(wraps.begin(), wraps.end(), [](int64_t w) { return w == 0; });
  if (no_wrap && (rank == 2 || rank == 3) && strides[rank - 2] == 1 && strides[rank - 1] != 0 &&
      strides[rank - 1] != 1) {
    grove_k::TransposeTileParams& t = plan.transpose;
    t = grove_k::TransposeTileParams{};
    t.batch = rank == 3 ? dims[0] : 1;
    t.src_batch = rank == 3 ? strides[0] : 0;
    t.rows = dims[rank - 2];
    t.cols = dims[rank - 1];
    t.src_ld = strides[rank - 1];
    const jit::KernelProblem problem{"transpose", module->types, {{"batch", t.batch}, {"cols", t.cols}, {"rows", t.rows}}};
    VariantLaunch v;
    if (ctx != nullptr) {
      v = ChooseLaunch(*ctx, problem);
    } else {
      const jit::KernelFamily* family = jit::FindKernelFamily("transpose");
      if (family == nullptr) return absl::InternalError("the transpose kernel family is not registered");
      v = LaunchOf(family->Generic(problem), problem);
    }
    plan.kind = StridedCopyPlan::kTranspose;
    plan.module = v.module;
    plan.dims = v.dims;
    return plan;
  }
  plan.kind = StridedCopyPlan::kKernel;
  plan.module = *std::move(module);
  grove_k::StridedCopyParams& p = plan.params;
  p = grove_k::StridedCopyParams{};
  p.n = 1;
  p.shape.rank = rank;
  for (int k = 0; k < rank; ++k) {
    p.shape.d[k] = dims[k];
    p.strides.s[k] = strides[k];
    p.wrap.s[k] = wraps[k];
    p.n *= dims[k];
  }
  plan.dims = Grid1D(p.n);
  return plan;
}

absl::Status RunStridedCopy(ExecContext& ec, const StridedCopyPlan& plan, const void* src, void* dst) {
  switch (plan.kind) {
    case StridedCopyPlan::kNothing:
      return absl::OkStatus();
    case StridedCopyPlan::kBytes:
      return ec.device().CopyAsync(dst, src, plan.bytes, ec.stream());
    case StridedCopyPlan::kRows:
      return CopyRows(ec, plan.elem_size, plan.rows, plan.cols, src, plan.src_ld, dst, plan.cols);
    case StridedCopyPlan::kKernel: {
      grove_k::StridedCopyParams p = plan.params;
      p.src = src;
      p.dst = dst;
      return ec.Launch(plan.module, "strided_copy", plan.dims, p);
    }
    case StridedCopyPlan::kTranspose: {
      grove_k::TransposeTileParams p = plan.transpose;
      p.src = src;
      p.dst = dst;
      return ec.Launch(plan.module, "transpose_tile", plan.dims, p);
    }
  }
  return absl::InternalError("a strided copy of no kind");
}

absl::Status StridedCopy(ExecContext& ec, size_t elem_size, absl::Span<const int64_t> shape, const void* src,
                         absl::Span<const int64_t> src_strides, void* dst, absl::Span<const int64_t> wrap) {
  absl::StatusOr<StridedCopyPlan> plan = PlanStridedCopy(elem_size, shape, src_strides, wrap);
  if (!plan.ok()) return plan.status();
  return RunStridedCopy(ec, *plan, src, dst);
}

absl::Status WriteValues(ExecContext& ec, void* dst, absl::Span<const int64_t> values) {
  for (size_t done = 0; done < values.size(); done += grove_k::kMaxSetValues) {
    grove_k::SetValuesParams p{};
    p.dst = ByteOffset(dst, static_cast<int64_t>(done * sizeof(int64_t)));
    p.n = static_cast<int64_t>(std::min<size_t>(grove_k::kMaxSetValues, values.size() - done));
    for (int64_t k = 0; k < p.n; ++k) p.values[k] = static_cast<uint64_t>(values[done + k]);
    if (absl::Status s = ec.Launch({"fill", {DType::kI64}}, "set_values", Grid1D(p.n, 32), p); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace grove::cuda
