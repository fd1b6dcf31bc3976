// Every op group's definitions in one registry, without kernels.
#include <cstdio>
#include <cstdlib>

#include "lib/ir/ops/ops.h"

namespace grove::ir {

absl::Status RegisterAllOps(OpRegistry& registry) {
  absl::Status (*const groups[])(OpRegistry&) = {
      &RegisterElementwiseOps, &RegisterReductionOps,    &RegisterLinalgOps,   &RegisterShapeOps,
      &RegisterControlFlowOps, &RegisterMathOps,         &RegisterNnOps,       &RegisterNormOps,
      &RegisterReduceSearchOps,
      &RegisterLayoutOps,      &RegisterRecurrentOps,    &RegisterIndexingOps, &RegisterLossOps,
      &RegisterVisionOps,      &RegisterQuantizationOps, &RegisterTextOps,     &RegisterSequenceOps,
      &RegisterAttentionOps,
  };
  for (auto* group : groups) {
    if (absl::Status s = group(registry); !s.ok()) return s;
  }
  return absl::OkStatus();
}

const OpRegistry& OpDefinitions() {
  static const OpRegistry* const registry = [] {
    auto* r = new OpRegistry;
    r->Reserve(kOpCountHint);
    if (absl::Status s = RegisterAllOps(*r); !s.ok()) {
      // A registration conflict is a bug in the library itself, found by
      // every test run; there is no user input here.
      std::fprintf(stderr, "grove: op definitions: %s\n", s.ToString().c_str());
      std::abort();
    }
    return r;
  }();
  return *registry;
}

}  // namespace grove::ir
