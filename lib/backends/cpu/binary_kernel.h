// Pieces shared by the elementwise CPU kernels: checks that the output was
// allocated as the kernel will write it (a wrong dtype or shape would write
// past the buffer), and the broadcast loop of binary ops, whose rows step each
// input by 0 or 1 so that same-shape and scalar cases run as one tight loop.
//
//   absl::StatusOr<BroadcastPlan<2>> plan = MakeBinaryPlan(ctx);
//   RunBinary<float, float, Bool8>(ctx, *plan, [](float a, float b) { ... });
//
// A prepared binary op keeps its plan and the loop of its dtype in
// BinaryParams (made once by its prepare); InvokeBinary runs it.
#ifndef GROVE_LIB_BACKENDS_CPU_BINARY_KERNEL_H_
#define GROVE_LIB_BACKENDS_CPU_BINARY_KERNEL_H_

#include <array>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/types/span.h"
#include "grove/grove.h"
#include "lib/backends/common/kernel_checks.h"
#include "lib/backends/common/prepared.h"
#include "lib/backends/cpu/broadcast_plan.h"
#include "lib/backends/cpu/parallel_for.h"
#include "lib/ir/op_registry.h"

namespace grove::cpu {

// "[2, 3]".
inline std::string DimsString(absl::Span<const int64_t> shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

using backends::CheckOutputDType;
using backends::CheckOutputLike;
using backends::CheckSameInputDTypes;

// Inputs 0 and 1 broadcast to output 0.
inline absl::StatusOr<BroadcastPlan<2>> MakeBinaryPlan(const ir::KernelContext& ctx) {
  absl::StatusOr<BroadcastPlan<2>> plan =
      BroadcastPlan<2>::Make(ctx.output(0).shape, {&ctx.input(0).shape, &ctx.input(1).shape});
  if (!plan.ok()) return ctx.Error(plan.status().message());
  return plan;
}

// One row with each input stepping by 0 or 1; the branches let the compiler
// vectorise the common cases.
template <typename A, typename B, typename Out, typename Fn>
inline void BinaryRow(Out* o, const A* a, int64_t sa, const B* b, int64_t sb, int64_t n, Fn fn) {
  if (sa == 1 && sb == 1) {
    for (int64_t i = 0; i < n; ++i) o[i] = fn(a[i], b[i]);
  } else if (sa == 0 && sb == 1) {
    const A x = *a;
    for (int64_t i = 0; i < n; ++i) o[i] = fn(x, b[i]);
  } else if (sa == 1 && sb == 0) {
    const B y = *b;
    for (int64_t i = 0; i < n; ++i) o[i] = fn(a[i], y);
  } else {
    const Out v = fn(*a, *b);
    for (int64_t i = 0; i < n; ++i) o[i] = v;
  }
}

// out = fn(input 0, input 1) over the broadcast, inputs of element types A
// and B, output of Out; large outputs split over the session's threads.
template <typename A, typename B, typename Out, typename Fn>
void RunBinary(const ir::KernelContext& ctx, const BroadcastPlan<2>& plan, Fn fn) {
  const A* a = ctx.input(0).as<const A>();
  const B* b = ctx.input(1).as<const B>();
  Out* out = ctx.output(0).as<Out>();
  const int64_t sa = plan.row_steps()[0], sb = plan.row_steps()[1];  // not a structured binding: the lambda captures them (clang 14 cannot)
  ParallelFor(ctx, plan.num_elements(), kCheapGrain, [&](int64_t begin, int64_t end) {
    plan.ForEachRowIn(begin, end, [&](int64_t o, const std::array<int64_t, 2>& in, int64_t len) {
      BinaryRow(out + o, a + in[0], sa, b + in[1], sb, len, fn);
    });
  });
}

// What a binary op's prepare made: the broadcast plan and the loop of its
// dtype (a RunBinary instantiation), so the invoke neither checks nor
// dispatches.
struct BinaryParams {
  BroadcastPlan<2> plan;
  absl::Status (*run)(const ir::KernelContext& ctx, const BinaryParams& p) = nullptr;
};

// The invoke of every prepared binary op.
inline absl::Status InvokeBinary(ir::KernelContext& ctx) {
  const BinaryParams* p = backends::PreparedParams<BinaryParams>(ctx);
  if (p == nullptr) return backends::NotPrepared(ctx, "CPU");
  return p->run(ctx, *p);
}

// A prepared op over one input and one output of the same element count
// (the unary elementwise ops): `op` made from the attributes once and the
// loop of its dtype.
template <typename Op>
struct UnaryParams {
  Op op;
  void (*run)(const ir::KernelContext& ctx, const Op& op) = nullptr;
};

template <typename Op>
absl::Status InvokeUnary(ir::KernelContext& ctx) {
  const UnaryParams<Op>* p = backends::PreparedParams<UnaryParams<Op>>(ctx);
  if (p == nullptr) return backends::NotPrepared(ctx, "CPU");
  p->run(ctx, p->op);
  return absl::OkStatus();
}

}  // namespace grove::cpu

#endif  // GROVE_LIB_BACKENDS_CPU_BINARY_KERNEL_H_
