// grove::RankKernelVariants (include/grove/kernel_ranking.h): the cost model
// (jit/cost_model.h) re-run for a recorded choice, as the dispatcher ran it
// for a plan made without a GPU (GpuTraits::FromArch).
#include "grove/kernel_ranking.h"

#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "jit/cost_model.h"
#include "jit/kernel_cache.h"
#include "jit/kernel_config.h"

namespace grove {
namespace {

KernelVariantEstimate EstimateOf(const jit::KernelConfig& config, const jit::CostTerms& t) {
  KernelVariantEstimate e;
  e.config = config.Name();
  e.occupancy = t.occupancy;
  e.waste = t.waste;
  e.bytes = t.bytes;
  e.flops = t.flops;
  e.estimate_us = t.estimate_us;
  return e;
}

absl::Status Bad(const KernelChoiceInfo& choice, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("RankKernelVariants: kernel choice '", choice.config, "' (",
                                                 choice.op, choice.node.empty() ? "" : " '", choice.node,
                                                 choice.node.empty() ? "" : "'", "): ", what));
}

}  // namespace

absl::StatusOr<KernelRanking> RankKernelVariants(const KernelChoiceInfo& choice, absl::string_view arch,
                                                 int top_k) {
  absl::StatusOr<int> sm = jit::ParseArch(arch);
  if (!sm.ok()) return absl::InvalidArgumentError(absl::StrCat("RankKernelVariants: ", sm.status().message()));
  KernelRanking out;
  // FAMILY__DTYPES[__PARAMS]: a family without a cost model (cuBLASLt's
  // "gemm", one this build does not know) is not ranked.
  const std::vector<absl::string_view> parts = absl::StrSplit(choice.config, "__");
  if (parts.size() < 2) return Bad(choice, "not a kernel config name (FAMILY__DTYPES[__PARAMS])");
  const jit::KernelFamily* family = jit::FindKernelFamily(parts[0]);
  if (family == nullptr) return out;
  absl::StatusOr<jit::KernelConfig> config = jit::KernelConfig::Parse(choice.config);
  if (!config.ok()) return Bad(choice, config.status().message());

  jit::KernelProblem problem;
  problem.family = config->family;
  problem.dtypes = config->dtypes;
  if (!choice.problem.empty()) {
    for (absl::string_view item : absl::StrSplit(choice.problem, ',')) {
      std::pair<absl::string_view, absl::string_view> kv = absl::StrSplit(item, absl::MaxSplits('=', 1));
      int64_t v = 0;
      if (kv.first.empty() || !absl::SimpleAtoi(kv.second, &v) ||
          (!problem.dims.empty() && problem.dims.back().first >= kv.first)) {
        return Bad(choice, absl::StrCat("problem '", choice.problem,
                                        "' is not NAME=VALUE,... sorted by name (at '", item, "')"));
      }
      problem.dims.emplace_back(std::string(kv.first), v);
    }
  }

  const jit::GpuTraits gpu = jit::GpuTraits::FromArch(*sm);
  out.modeled = true;
  out.pick = EstimateOf(*config, family->Cost(*config, problem, gpu));
  const std::vector<jit::RankedVariant> all = jit::RankVariants(*family, problem, gpu);
  out.valid_variants = static_cast<int>(all.size());
  for (size_t i = 0; i < all.size(); ++i) {
    if (all[i].config == *config && out.pick_rank < 0) out.pick_rank = static_cast<int>(i);
    if (top_k <= 0 || static_cast<int>(i) < top_k) out.ranked.push_back(EstimateOf(all[i].config, all[i].cost));
  }
  return out;
}

}  // namespace grove
