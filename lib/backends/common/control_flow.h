// The parts of the If and Loop kernels that do not depend on where tensors
// live, shared by the CPU and CUDA backends (same checks, same messages).
#ifndef GROVE_LIB_BACKENDS_COMMON_CONTROL_FLOW_H_
#define GROVE_LIB_BACKENDS_COMMON_CONTROL_FLOW_H_

#include <cstdint>
#include <limits>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "lib/ir/op_registry.h"

namespace grove::backends {

// The Loop policy: one set of bounds for every form of Loop (a trip count M
// only, a condition only, both, or neither: "forever"), on every backend.
//
// - Iterations: a Loop runs at most kMaxLoopIterations body iterations. Its
//   trip count M and its condition stop it earlier; a Loop that would begin
//   iteration number kMaxLoopIterations (M past the limit, or a condition
//   that stays true) fails with RESOURCE_EXHAUSTED instead, never stopping
//   silently as if it had finished. RunLoopBody enforces it, so each kernel
//   passes every iteration through it and takes no other limit.
// - Per run: the session counts every subgraph run (If branch, Loop or Scan
//   iteration, nested ones included) against SessionOptions::max_body_runs
//   (default 10,000,000), so without a deadline a Loop of 2^62 trips, or
//   loops nested three deep, still end in seconds.
// - Memory: the scan outputs one Loop accumulates hold at most
//   kMaxLoopScanBytes in total (all its scan outputs together); the iteration
//   that would pass it fails with RESOURCE_EXHAUSTED (CheckScanBytes).
// - Time: every body call (Loop, Scan, If) goes through the session's
//   KernelContext::Host::RunSubgraph, which checks the run's deadline and
//   cancellation token first (SessionOptions::run_deadline_ms,
//   ::cancellation), so loops that would run for hours, nested ones
//   included, end with DEADLINE_EXCEEDED or CANCELLED.
// Scan's iterations are bounded by its inputs' lengths.
inline constexpr int64_t kMaxLoopIterations = 100'000'000;
inline constexpr uint64_t kMaxLoopScanBytes = uint64_t{4} << 30;  // 4 GiB

// The trip count of a Loop without M: only its condition or the policy
// above stops it.
inline constexpr int64_t kNoTripCount = std::numeric_limits<int64_t>::max();

// A condition (If's cond, Loop's cond input or body output) holds one element.
absl::Status CheckCondShape(const ir::KernelContext& ctx, const TensorView& v, absl::string_view what);

// Runs If's then_branch or else_branch and checks its output count.
absl::StatusOr<std::vector<TensorView>> RunIfBranch(ir::KernelContext& ctx, bool cond);

// The body's first two inputs, the iteration number and the incoming
// condition. They live in the caller, as long as it reads the body's outputs:
// a body may return them as outputs (its cond input as its cond output).
struct LoopBodyScalars {
  int64_t iter = 0;
  uint8_t cond = 1;
};

// Runs iteration `iter` of Loop's body on the carried values (RESOURCE_EXHAUSTED
// at iteration kMaxLoopIterations); `scalars` holds the body's first two inputs.
absl::StatusOr<std::vector<TensorView>> RunLoopBody(ir::KernelContext& ctx, int body, int64_t iter,
                                                    absl::Span<const TensorView> carried, LoopBodyScalars& scalars);

// Fails (RESOURCE_EXHAUSTED) when the scan outputs a Loop has accumulated,
// `held_bytes`, and iteration `iter`'s `adding_bytes` pass kMaxLoopScanBytes.
absl::Status CheckScanBytes(const ir::KernelContext& ctx, int64_t iter, uint64_t held_bytes, uint64_t adding_bytes);

// Records scan output j's shape and dtype on the first iteration (a view
// without data in `scan_shape`) and checks later ones against it.
absl::Status CheckScanShape(const ir::KernelContext& ctx, int j, int64_t iter, const TensorView& o,
                            TensorView& scan_shape);

// An If or Loop output that is a sequence or optional (a host grove::Value
// on every backend): a copy of `from`, sharing its tensors.
absl::Status SetBoxedOutput(ir::KernelContext& ctx, int i, DType dtype, const Value& from);

// Loop-carried sequences and optionals, kept on the host between
// iterations; tensors are the backend's business.
class CarriedBoxes {
 public:
  explicit CarriedBoxes(int n) : values_(n), next_(n) {}
  // Takes carried input i when it is boxed; `view` then points at the kept value.
  void Enter(int i, const TensorView& in, TensorView& view);
  // Takes the body's output for carried value i (after all have been read:
  // a body may pass its inputs on in another order); false when the body
  // changed a tensor into a sequence or back.
  // `carried` takes the output's dtype: an optional may come back as what it holds.
  absl::Status Stage(const ir::KernelContext& ctx, int i, TensorView& carried, const TensorView& out);
  void Commit();
  const Value& value(int i) const { return values_[i]; }

 private:
  std::vector<Value> values_, next_;
};

// Whether body output `o` (for carried value i) is the buffer of another
// carried value j != i (the body passed input j through as output i).
bool ReadsOtherCarried(const TensorView& o, int i, absl::Span<const TensorView> carried);

// Scan outputs are tensors.
absl::Status CheckScanIsTensor(const ir::KernelContext& ctx, int j, const TensorView& o);

}  // namespace grove::backends

#endif  // GROVE_LIB_BACKENDS_COMMON_CONTROL_FLOW_H_
