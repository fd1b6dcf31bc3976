// Shape checks of [N, C, spatial...] inputs and per-channel vectors, shared
// by the nn group (Conv's bias) and the norm group (BatchNormalization's and
// InstanceNormalization's scale and bias).
#ifndef GROVE_LIB_IR_OPS_CHANNEL_CHECKS_H_
#define GROVE_LIB_IR_OPS_CHANNEL_CHECKS_H_

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "lib/ir/ops/input_checks.h"

namespace grove::ir {

// True when both dims are constants and differ (symbolic dims are checked by
// the kernels once concrete).
inline bool ConstMismatch(const SymDim& a, const SymDim& b) {
  return a.is_const() && b.is_const() && a.value() != b.value();
}

// An [N, C, spatial...] input: rank >= min_rank.
inline absl::Status CheckImageRank(const ShapeContext& ctx, int i, absl::string_view name, int min_rank) {
  if (ctx.input_rank(i) >= min_rank) return absl::OkStatus();
  return ctx.Error(absl::StrCat(InputName(i, name), " has shape ", ShapeString(ctx, ctx.input_shape(i)),
                                "; expected rank >= ", min_rank, " (N, C, spatial dims...)"));
}

// A per-channel vector: rank 1 with `count` elements.
inline absl::Status CheckChannelVector(const ShapeContext& ctx, int i, absl::string_view name, const SymDim& count) {
  const SymShape& s = ctx.input_shape(i);
  if (s.size() != 1 || ConstMismatch(s[0], count)) {
    return ctx.Error(absl::StrCat(InputName(i, name), " has shape ", ShapeString(ctx, s), "; expected [",
                                  count.ToString(ctx.graph().symbol_names()), "]"));
  }
  return absl::OkStatus();
}

}  // namespace grove::ir

#endif  // GROVE_LIB_IR_OPS_CHANNEL_CHECKS_H_
