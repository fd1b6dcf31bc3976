#include "lib/backends/common/kernel_checks.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "lib/ir/ops/layout_params.h"

namespace grove::backends {

std::string ShapeStr(absl::Span<const int64_t> s) { return absl::StrCat("[", absl::StrJoin(s, ", "), "]"); }

absl::Status CheckOutput(const ir::KernelContext& ctx, int i, DType dtype, absl::Span<const int64_t> shape) {
  const TensorView& y = ctx.output(i);
  if (y.dtype == dtype && absl::Span<const int64_t>(y.shape) == shape) return absl::OkStatus();
  return ctx.Error(absl::StrCat("output ", i, " was allocated as ", DTypeName(y.dtype), " ", ShapeStr(y.shape),
                                " but the kernel writes ", DTypeName(dtype), " ", ShapeStr(shape)));
}

absl::Status CheckOutputDType(const ir::KernelContext& ctx, DType expected, int i) {
  const DType got = ctx.output(i).dtype;
  if (got == expected) return absl::OkStatus();
  return ctx.Error(
      absl::StrCat("output ", i, " was allocated as ", DTypeName(got), " but the kernel writes ", DTypeName(expected)));
}

absl::Status CheckOutputLike(const ir::KernelContext& ctx, DType dtype, absl::Span<const int64_t> shape, int i) {
  if (absl::Status s = CheckOutputDType(ctx, dtype, i); !s.ok()) return s;
  if (absl::Span<const int64_t>(ctx.output(i).shape) == shape) return absl::OkStatus();
  return ctx.Error(absl::StrCat("output ", i, " was allocated with shape ", ShapeStr(ctx.output(i).shape),
                                " but the kernel writes ", ShapeStr(shape)));
}

absl::Status CheckSameInputDTypes(const ir::KernelContext& ctx, int i, int j) {
  if (ctx.input(i).dtype == ctx.input(j).dtype) return absl::OkStatus();
  return ctx.Error(absl::StrCat("inputs ", i, " and ", j, " have dtypes ", DTypeName(ctx.input(i).dtype), " and ",
                                DTypeName(ctx.input(j).dtype), "; expected the same"));
}

absl::Status CheckRank(const ir::KernelContext& ctx, int i, absl::string_view name, int min_rank) {
  if (static_cast<int>(ctx.input(i).shape.size()) >= min_rank) return absl::OkStatus();
  return ctx.Error(absl::StrCat("input ", i, " (", name, ") has shape ", ShapeStr(ctx.input(i).shape),
                                "; expected rank >= ", min_rank, " (N, C, spatial dims...)"));
}

absl::Status CheckChannelVector(const ir::KernelContext& ctx, int i, absl::string_view name, int64_t count) {
  const std::vector<int64_t>& s = ctx.input(i).shape;
  if (s.size() == 1 && s[0] == count) return absl::OkStatus();
  return ctx.Error(absl::StrCat("input ", i, " (", name, ") has shape ", ShapeStr(s), "; expected [", count, "]"));
}

int64_t BoundedProduct(absl::Span<const int64_t> dims, int64_t limit) {
  int64_t n = 1;
  for (int64_t d : dims) {
    if (d != 0 && n > limit / d) return -1;
    n *= d;
  }
  return n;
}

absl::StatusOr<std::vector<int64_t>> ReadHostInts(const ir::KernelContext& ctx, int i, absl::string_view name) {
  std::vector<int64_t> out;
  if (!ir::ReadIntegers(ctx.input(i), &out)) {
    return ctx.Error(absl::StrCat("input ", i, " (", name, ") has dtype ", DTypeName(ctx.input(i).dtype),
                                  "; expected i32 or i64"));
  }
  return out;
}

}  // namespace grove::backends
