// The cost model's ranking behind a CUDA kernel variant choice: for a
// KernelChoiceInfo (grove::CompileKernels' report, DescribeExecution's
// steps), the variants of its family valid for its problem, cheapest first,
// with the terms the estimate is made of (after DietCode: occupancy, padding
// waste, bytes moved, flops). `grove compile --json` and
// `grove inspect --device cuda --json` print it per step.
//
//   for (const grove::KernelChoiceInfo& c : report.choices) {
//     absl::StatusOr<grove::KernelRanking> r = grove::RankKernelVariants(c, "sm_90", 5);
//     if (r.ok() && !r->ranked.empty()) std::cout << c.config << " rank " << r->pick_rank << "\n";
//   }
//
// A pure function of its arguments (no device, no GPU), thread-safe.
#ifndef GROVE_KERNEL_RANKING_H_
#define GROVE_KERNEL_RANKING_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "grove/grove.h"

namespace grove {

// One variant's cost terms on a problem.
struct KernelVariantEstimate {
  std::string config;     // "ew__f32__ipt2_threads256"
  double occupancy = 0;   // resident threads / the GPU's thread slots, (0, 1]
  double waste = 0;       // share of launched work that is padding, [0, 1)
  double bytes = 0;       // DRAM bytes moved
  double flops = 0;       // arithmetic
  double estimate_us = 0;  // what the model ranks by
};

struct KernelRanking {
  // True when the family has a cost model (softmax, norm, reduce, ew, gemv);
  // false for cuBLASLt's GEMMs ("gemm": the table or the heuristic decides)
  // and families this build does not know: the rest is then empty.
  bool modeled = false;
  int valid_variants = 0;                     // variants valid for the problem
  std::vector<KernelVariantEstimate> ranked;  // cheapest first, at most top_k
  // The chosen config's own terms, and its place in the full ranking (0 is
  // the model's first pick; -1 when it is not a valid variant there, e.g.
  // the generic variant the emulated device falls back to).
  KernelVariantEstimate pick;
  int pick_rank = -1;
};

// Ranks `choice`'s family for its problem (choice.problem, the dtypes of
// choice.config) on `arch` ("sm_90", "90", "9.0") with that arch's typical
// GPU (the traits a plan without a GPU uses). top_k <= 0: every valid
// variant. INVALID_ARGUMENT naming the field for an unreadable arch, config
// or problem.
absl::StatusOr<KernelRanking> RankKernelVariants(const KernelChoiceInfo& choice, absl::string_view arch,
                                                 int top_k = 0);

}  // namespace grove

#endif  // GROVE_KERNEL_RANKING_H_
