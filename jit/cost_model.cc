#include "jit/cost_model.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

namespace grove::jit {
namespace {

// Non-finite or negative estimates sort after every real one.
double SortKey(double estimate_us) {
  return std::isfinite(estimate_us) && estimate_us >= 0 ? estimate_us : std::numeric_limits<double>::infinity();
}

}  // namespace

std::vector<RankedVariant> RankVariants(const KernelFamily& family, const KernelProblem& problem,
                                        const GpuTraits& gpu, int top_k) {
  struct Candidate {
    double key;
    size_t order;
    RankedVariant variant;
  };
  std::vector<Candidate> candidates;
  const std::vector<KernelConfig> space = family.Enumerate(problem.dtypes);
  for (size_t i = 0; i < space.size(); ++i) {
    if (!family.Valid(space[i], problem)) continue;
    CostTerms cost = family.Cost(space[i], problem, gpu);
    candidates.push_back({SortKey(cost.estimate_us), i, {space[i], cost}});
  }
  std::stable_sort(candidates.begin(), candidates.end(), [](const Candidate& a, const Candidate& b) {
    return a.key != b.key ? a.key < b.key : a.order < b.order;
  });
  if (top_k > 0 && candidates.size() > static_cast<size_t>(top_k)) candidates.resize(top_k);
  std::vector<RankedVariant> out;
  out.reserve(candidates.size());
  for (Candidate& c : candidates) out.push_back(std::move(c.variant));
  return out;
}

RankedVariant BestVariant(const KernelFamily& family, const KernelProblem& problem, const GpuTraits& gpu,
                          bool* ranked) {
  std::vector<RankedVariant> best = RankVariants(family, problem, gpu, 1);
  if (ranked != nullptr) *ranked = !best.empty();
  if (!best.empty()) return std::move(best[0]);
  KernelConfig generic = family.Generic(problem);
  CostTerms cost = family.Cost(generic, problem, gpu);
  return {std::move(generic), cost};
}

}  // namespace grove::jit
