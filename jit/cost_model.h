// The cost model (after DietCode): ranks a kernel family's variants for a
// problem on a GPU by the family's cost terms (KernelFamily::Cost: occupancy,
// padding waste, bytes moved, flops, and their estimate in microseconds).
// The dispatcher takes its first pick for a problem the dispatch table lacks;
// `grove tune` times its top k.
//
//   std::vector<RankedVariant> r = RankVariants(*family, problem, gpu, 4);
//   KernelConfig pick = r.empty() ? family->Generic(problem) : r[0].config;
//
// Backend-free; pure functions of their arguments.
#ifndef GROVE_JIT_COST_MODEL_H_
#define GROVE_JIT_COST_MODEL_H_

#include <vector>

#include "jit/kernel_config.h"

namespace grove::jit {

struct RankedVariant {
  KernelConfig config;
  CostTerms cost;
};

// The family's variants valid for `problem` (its dtypes), cheapest first by
// CostTerms::estimate_us. A non-finite or negative estimate ranks last. At
// most `top_k` (0 or less: all). Empty when no variant is valid (the
// caller runs Generic).
//
// Equal estimates are broken by what the estimate leaves out, in order:
//   1. less padding waste (CostTerms::waste): of two variants the model
//      thinks equally fast, the one doing less wasted work has more
//      headroom when the problem's real shape or the GPU differs;
//   2. higher occupancy (CostTerms::occupancy): more resident warps hide
//      latency the estimate does not model (an estimate saturates once the
//      kernel reaches the bandwidth or the flops);
//   3. the smaller config: parameter values compared one by one in name
//      order (KernelConfig::params). Each family names its parameters so
//      that this prefers fewer registers and threads first (ew: items a
//      thread, then threads; gemm_tiled: a thread's patch rm, rn, then
//      threads, then K step and tile), then smaller tiles and splits.
// So the ranking depends on the space's values, not on the order they are
// listed in (KernelFamily::Enumerate), and is the same across runs and
// builds.
std::vector<RankedVariant> RankVariants(const KernelFamily& family, const KernelProblem& problem,
                                        const GpuTraits& gpu, int top_k = 0);

// The cost model's pick: RankVariants' first, else family.Generic(problem).
// `ranked` (optional) says whether it came from the ranking.
RankedVariant BestVariant(const KernelFamily& family, const KernelProblem& problem, const GpuTraits& gpu,
                          bool* ranked = nullptr);

}  // namespace grove::jit

#endif  // GROVE_JIT_COST_MODEL_H_
