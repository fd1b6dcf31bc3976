// Window steps whose X (input 0) or Y (output 0) grove stores channels-last,
// [N, spatial..., C] (post_op.h's kChannelsLastAttr, set by the CPU plan's
// layout pass AssignChannelsLast, activation_fusion.h). A kernel's own
// prepare and invoke are wrapped:
//
//   absl::StatusOr<PreparedKernel> PrepareX(const KernelContext& ctx) {
//     if (ctx.attrs().Has(kChannelsLastAttr)) return PrepareChannelsLast(ctx, &PrepareXWith);
//     return PrepareXWith(ctx, nullptr);
//   }
//   absl::Status XKernel(KernelContext& ctx) {
//     return ctx.attrs().Has(kChannelsLastAttr) ? RunChannelsLast(ctx, &XBody) : XBody(ctx);
//   }
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
#include "lib/ir/op_registry.h"

namespace grove::cpu {

// `io` null: nothing is stored channels-last (the step without the attribute).
using LayoutPrepare = absl::StatusOr<ir::PreparedKernel> (*)(const ir::KernelContext&, ChannelsLast* io);
using LayoutRun = absl::Status (*)(ir::KernelContext&);

absl::StatusOr<ir::PreparedKernel> PrepareChannelsLast(const ir::KernelContext& ctx, LayoutPrepare prepare);
absl::Status RunChannelsLast(ir::KernelContext& ctx, LayoutRun run);

}  // namespace grove::cpu

#endif  // GROVE_LIB_BACKENDS_CPU_CHANNELS_LAST_H_
