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
    double waste;
    double occupancy;
    RankedVariant variant;
  };
  std::vector<Candidate> candidates;
  for (KernelConfig& config : family.Enumerate(problem.dtypes)) {
    if (!family.Valid(config, problem)) continue;
    CostTerms cost = family.Cost(config, problem, gpu);
    const double waste = std::isfinite(cost.waste) ? cost.waste : 1;
    const double occupancy = std::isfinite(cost.occupancy) ? cost.occupancy : 0;
    candidates.push_back({SortKey(cost.estimate_us), waste, occupancy, {std::move(config), cost}});
  }
  // A total order (configs of one family and dtypes differ in some
  // parameter's value): the tie-breaks of the header.
  std::sort(candidates.begin(), candidates.end(), [](const Candidate& a, const Candidate& b) {
    if (a.key != b.key) return a.key < b.key;
    if (a.waste != b.waste) return a.waste < b.waste;
    if (a.occupancy != b.occupancy) return a.occupancy > b.occupancy;
    return a.variant.config.params < b.variant.config.params;
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
