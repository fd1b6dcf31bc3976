// The prepare/invoke helpers every backend's kernels share (see
// ir::PreparedKernel): a prepare returns MakePrepared(params, workspace);
// its invoke reads them back with PreparedParams<T>(ctx) and, when they are
// missing (a caller that bypassed ir::RunKernel or the executor), returns
// NotPrepared(ctx, "CPU").
//
//   struct PoolParams { Window w; ... };
//   absl::StatusOr<ir::PreparedKernel> PreparePool(const ir::KernelContext& ctx) {
//     PoolParams p{...};  // from ctx.input(i).shape, ctx.attrs(); checks here
//     return backends::MakePrepared(std::move(p), scratch_bytes);
//   }
//   absl::Status InvokePool(ir::KernelContext& ctx) {
//     const auto* p = backends::PreparedParams<PoolParams>(ctx);
//     if (p == nullptr) return backends::NotPrepared(ctx, "CPU");
//     ...  // pointers from ctx.input/output, scratch from ctx.workspace()
//   }
#ifndef GROVE_LIB_BACKENDS_COMMON_PREPARED_H_
#define GROVE_LIB_BACKENDS_COMMON_PREPARED_H_

#include <cstdint>
#include <memory>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "lib/ir/op_registry.h"

namespace grove::backends {

// What a prepare returns: `params` kept for the invoke, which reads them
// back with PreparedParams<T>(ctx).
template <typename T>
ir::PreparedKernel MakePrepared(T params, uint64_t workspace_bytes = 0, bool needs_host = false) {
  ir::PreparedKernel k;
  k.params = std::make_shared<const T>(std::move(params));
  k.workspace_bytes = workspace_bytes;
  k.needs_host = needs_host;
  return k;
}

// The parameters this step's prepare made (T is the type it stored), or
// nullptr when the kernel was invoked without them: the invoke then returns
// NotPrepared(ctx, backend).
template <typename T>
const T* PreparedParams(const ir::KernelContext& ctx) {
  const ir::PreparedKernel* k = ctx.prepared();
  return k == nullptr || k->params == nullptr ? nullptr : static_cast<const T*>(k->params.get());
}

// The error of an invoke called without its prepare: a bug of the caller, so
// Internal. `backend` names the backend in the message ("CPU", "CUDA").
inline absl::Status NotPrepared(const ir::KernelContext& ctx, absl::string_view backend) {
  return absl::InternalError(
      ctx.Error(absl::StrCat("the ", backend, " kernel was invoked without its prepare (call ir::RunKernel)"))
          .message());
}

// The invoke of a step whose params are made once per plan when the plan
// knows the inputs they read (`planned` true: weights or folded values) and
// per run otherwise, by the same `make(ctx, prepared)` (an
// absl::StatusOr<P>; its error is the invoke's): calls run(params) with the
// one or the other.
//
//   absl::Status PadKernel(ir::KernelContext& ctx) {
//     return backends::InvokePlannedOrPerRun<PadParams>(
//         ctx, "CPU", [](const ir::KernelContext& c, const PadParams&) { return MakePadParams(c); },
//         [&](const PadParams& p) { RunPad(ctx, p); });
//   }
template <typename P, typename Make, typename Run>
absl::Status InvokePlannedOrPerRun(const ir::KernelContext& ctx, absl::string_view backend, Make&& make, Run&& run) {
  const P* prepared = PreparedParams<P>(ctx);
  if (prepared == nullptr) return NotPrepared(ctx, backend);
  if (prepared->planned) {
    run(*prepared);
    return absl::OkStatus();
  }
  absl::StatusOr<P> made = make(ctx, *prepared);
  if (!made.ok()) return made.status();
  run(*made);
  return absl::OkStatus();
}

}  // namespace grove::backends

#endif  // GROVE_LIB_BACKENDS_COMMON_PREPARED_H_
