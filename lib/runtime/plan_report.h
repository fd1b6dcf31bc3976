// grove::DescribeExecution's runtime half: the plans of every control-flow
// path a model takes for given input shapes, on a backend, described step by
// step and segment by segment. Nothing runs; bodies are planned for the
// shapes of their first run where the outer plan knows them. With
// `buckets`, each path is planned as a session that buckets shapes plans it
// (a CUDA session with graphs): its bucket's bound first, then its shapes,
// both under the bucket, so choices made per bucket are the bound's.
#ifndef GROVE_LIB_RUNTIME_PLAN_REPORT_H_
#define GROVE_LIB_RUNTIME_PLAN_REPORT_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "grove/grove.h"
#include "lib/runtime/backend.h"
#include "lib/runtime/buckets.h"
#include "lib/runtime/model_impl.h"

namespace grove::runtime {

absl::StatusOr<ExecutionInfo> DescribePlans(const internal::ModelImpl& model, Backend& backend,
                                            const std::vector<std::vector<int64_t>>& input_shapes,
                                            const BucketPolicy* buckets = nullptr);

// The buckets a CUDA session that captures graphs keeps with `options`
// (SessionOptions::shape_buckets, cuda_graphs): none (nullopt) where its
// plans are exact (graphs off, every rule exact, or no symbols), as the
// executor decides; a bad rule is its error.
absl::StatusOr<std::optional<BucketPolicy>> GraphSessionBuckets(const ir::Graph& graph, const SessionOptions& options);

}  // namespace grove::runtime

#endif  // GROVE_LIB_RUNTIME_PLAN_REPORT_H_
