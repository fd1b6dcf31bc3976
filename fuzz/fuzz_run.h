// What every fuzz target does with a model that loaded: plan it for small
// inputs and run it on the CPU, within bounds that keep one input fast.
#ifndef GROVE_FUZZ_FUZZ_RUN_H_
#define GROVE_FUZZ_FUZZ_RUN_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/types/span.h"
#include "grove/grove.h"

namespace grove::fuzz {

// Bounds of one fuzz run: a run that would need more is skipped, not tried.
inline constexpr int64_t kMaxInputElements = int64_t{1} << 16;  // per input
inline constexpr uint64_t kMaxArenaBytes = uint64_t{64} << 20;   // the memory plan
inline constexpr int64_t kRunDeadlineMs = 2000;

// Runs `model` once on a CPU session with inputs of each symbol's smallest
// value (at most 4), filled from `fill` (cycled; zeros when empty). Errors
// are fine, a crash is the finding.
void RunSmall(const std::shared_ptr<const Model>& model, absl::Span<const uint8_t> fill);

}  // namespace grove::fuzz

#endif  // GROVE_FUZZ_FUZZ_RUN_H_
