// Window steps whose X (input 0) or Y (output 0) grove stores channels-last,
// [N, spatial..., C] (post_op.h's kChannelsLastAttr, set by the CPU plan's
// layout pass AssignChannelsLast, activation_fusion.h). Such a kernel is
// registered through the two entry points below:
//
//   {"Conv", {&RunLayoutAware<&ConvBody>, &PrepareLayoutAware<&PrepareConvWith>}}
//
// The wrapped prepare and body see X and Y as their logical [N, C, ...]
// views (the same bytes). The prepare is told which of them are stored
// channels-last (ChannelsLast, onednn.h) so that oneDNN reads and writes them
// in place; it clears what it cannot honour (its reference loops read
// [N, C, ...]), and the wrapper then transposes that tensor through a copy in
// the step's workspace around the body.
#ifndef GROVE_LIB_BACKENDS_CPU_CHANNELS_LAST_H_
#define GROVE_LIB_BACKENDS_CPU_CHANNELS_LAST_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "lib/backends/cpu/onednn.h"
#include "lib/backends/cpu/post_op.h"
#include "lib/ir/op_registry.h"

namespace grove::cpu {

// `io` null: nothing is stored channels-last (the step without the attribute).
using LayoutPrepare = absl::StatusOr<ir::PreparedKernel> (*)(const ir::KernelContext&, ChannelsLast* io);
using LayoutRun = absl::Status (*)(ir::KernelContext&);

absl::StatusOr<ir::PreparedKernel> PrepareChannelsLast(const ir::KernelContext& ctx, LayoutPrepare prepare);
absl::Status RunChannelsLast(ir::KernelContext& ctx, LayoutRun run);

// A step's prepare and kernel: through the wrappers above when the step has
// kChannelsLastAttr, else kPrepare(ctx, nullptr) and kRun(ctx) as they are.
template <LayoutPrepare kPrepare>
absl::StatusOr<ir::PreparedKernel> PrepareLayoutAware(const ir::KernelContext& ctx) {
  return ctx.attrs().Has(kChannelsLastAttr) ? PrepareChannelsLast(ctx, kPrepare) : kPrepare(ctx, nullptr);
}
template <LayoutRun kRun>
absl::Status RunLayoutAware(ir::KernelContext& ctx) {
  return ctx.attrs().Has(kChannelsLastAttr) ? RunChannelsLast(ctx, kRun) : kRun(ctx);
}

}  // namespace grove::cpu

#endif  // GROVE_LIB_BACKENDS_CPU_CHANNELS_LAST_H_
