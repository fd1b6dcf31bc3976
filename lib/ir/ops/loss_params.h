// The attribute check of the loss ops (NegativeLogLikelihoodLoss,
// SoftmaxCrossEntropyLoss) that the shape function (lib/ir/ops/loss.cc) and
// the CPU kernels (lib/backends/cpu/loss.cc) both make: the reduction. It
// returns an error message without the op's name, which the caller adds.
#ifndef GROVE_LIB_IR_OPS_LOSS_PARAMS_H_
#define GROVE_LIB_IR_OPS_LOSS_PARAMS_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "lib/ir/graph.h"

namespace grove::ir {

enum class LossReduction { kNone, kSum, kMean };

// The reduction attribute: 'none', 'sum' or 'mean' (the default).
inline absl::StatusOr<LossReduction> ReadLossReduction(const Attributes& attrs) {
  const std::string reduction = attrs.GetString("reduction", "mean");
  if (reduction == "none") return LossReduction::kNone;
  if (reduction == "sum") return LossReduction::kSum;
  if (reduction == "mean") return LossReduction::kMean;
  return absl::InvalidArgumentError(
      absl::StrCat("attribute 'reduction' is '", reduction, "'; expected 'none', 'sum' or 'mean'"));
}

}  // namespace grove::ir

#endif  // GROVE_LIB_IR_OPS_LOSS_PARAMS_H_
