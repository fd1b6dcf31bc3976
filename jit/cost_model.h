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
// CostTerms::estimate_us; equal estimates keep the space's order
// (KernelFamily::Enumerate), so the ranking is stable across runs and
// builds. A non-finite or negative estimate ranks last. At most `top_k`
// (0 or less: all). Empty when no variant is valid (the caller runs
// Generic).
std::vector<RankedVariant> RankVariants(const KernelFamily& family, const KernelProblem& problem,
                                        const GpuTraits& gpu, int top_k = 0);

// The cost model's pick: RankVariants' first, else family.Generic(problem).
// `ranked` (optional) says whether it came from the ranking.
RankedVariant BestVariant(const KernelFamily& family, const KernelProblem& problem, const GpuTraits& gpu,
                          bool* ranked = nullptr);

}  // namespace grove::jit

#endif  // GROVE_JIT_COST_MODEL_H_
