// grove::DescribeExecution's runtime half: the plans of every control-flow
// path a model takes for given input shapes, on a backend, described step by
// step and segment by segment. Nothing runs; bodies are planned for the
// shapes of their first run where the outer plan knows them.
#ifndef GROVE_LIB_RUNTIME_PLAN_REPORT_H_
#define GROVE_LIB_RUNTIME_PLAN_REPORT_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "grove/grove.h"
#include "lib/runtime/backend.h"
#include "lib/runtime/model_impl.h"

namespace grove::runtime {

absl::StatusOr<ExecutionInfo> DescribePlans(const internal::ModelImpl& model, Backend& backend,
                                            const std::vector<std::vector<int64_t>>& input_shapes);

}  // namespace grove::runtime

#endif  // GROVE_LIB_RUNTIME_PLAN_REPORT_H_
