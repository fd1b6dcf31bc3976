#include "lib/backends/common/norm_checks.h"

#include "absl/strings/str_cat.h"
#include "lib/backends/common/kernel_checks.h"

namespace grove::backends {

absl::StatusOr<int> LayerNormAxis(const ir::KernelContext& ctx) {
  const TensorView& x = ctx.input(0);
  const int rank = static_cast<int>(x.shape.size());
  absl::StatusOr<int> axis = ir::NormalizeAxis(ctx.attrs().GetInt("axis", -1), rank);
  if (!axis.ok() || rank == 0) {
    return ctx.Error(absl::StrCat("attribute 'axis' is ", ctx.attrs().GetInt("axis", -1),
                                  "; out of range for input 0 (X) ", ShapeStr(x.shape)));
  }
  return axis;
}

absl::StatusOr<std::vector<int64_t>> NormalizedStrides(const ir::KernelContext& ctx, int i, absl::string_view name,
                                                       absl::Span<const int64_t> normalized) {
  const std::vector<int64_t>& shape = ctx.input(i).shape;
  const size_t rank = normalized.size();
  bool ok = shape.size() <= rank;
  for (size_t k = 0; ok && k < shape.size(); ++k) {
    const int64_t d = shape[k];
    if (d != 1 && d != normalized[rank - shape.size() + k]) ok = false;
  }
  if (!ok) {
    return ctx.Error(absl::StrCat("input ", i, " (", name, ") has shape ", ShapeStr(shape),
                                  ", which does not broadcast to the normalized dims ", ShapeStr(normalized)));
  }
  std::vector<int64_t> stride(rank, 0);
  int64_t s = 1;
  for (size_t k = shape.size(); k-- > 0;) {
    const size_t d = rank - shape.size() + k;
    stride[d] = shape[k] == 1 ? 0 : s;
    s *= shape[k];
  }
  return stride;
}

absl::Status CheckLayerNormOutputs(const ir::KernelContext& ctx, int axis) {
  const TensorView& x = ctx.input(0);
  if (absl::Status s = CheckOutput(ctx, 0, x.dtype, x.shape); !s.ok()) return s;
  std::vector<int64_t> stat_shape(x.shape.begin(), x.shape.begin() + axis);
  stat_shape.resize(x.shape.size(), 1);
  for (int i = 1; i < 3; ++i) {
    if (!ctx.has_output(i)) continue;
    if (absl::Status s = CheckOutput(ctx, i, DType::kF32, stat_shape); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace grove::backends
