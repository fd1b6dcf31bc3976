// Helpers of the CPU fusion pass's tests (activation_fusion_test.cc,
// activation_fusion_silu_test.cc): random inputs, the planned steps, one run
// with oneDNN on or off, and an element-wise comparison with a bound.
#ifndef GROVE_TEST_OPS_ACTIVATION_FUSION_TEST_UTIL_H_
#define GROVE_TEST_OPS_ACTIVATION_FUSION_TEST_UTIL_H_

#include <cmath>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "grove/grove.h"
#include "lib/backends/cpu/onednn.h"
#include "gtest/gtest.h"

namespace grove::testing {

using Shape = std::vector<int64_t>;

inline std::vector<float> RandomValues(int64_t n, uint32_t seed,
                                       float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-scale, scale);
  std::vector<float> v(static_cast<size_t>(n));
  for (float &x : v)
    x = dist(rng);
  return v;
}

// The ops of the main path's steps as planned with oneDNN on or off.
inline std::vector<std::string>
PlannedOps(const Model &model, const std::vector<Shape> &shapes, bool onednn,
           std::vector<std::string> *nodes = nullptr) {
  cpu::ScopedOneDnn scope(onednn);
  ExecutionInfoOptions options;
  options.device = Device::kCpu;
  options.input_shapes = shapes;
  absl::StatusOr<ExecutionInfo> info = DescribeExecution(model, options);
  EXPECT_TRUE(info.ok()) << info.status();
  std::vector<std::string> ops;
  if (!info.ok() || info->paths.empty())
    return ops;
  for (const StepInfo &s : info->paths[0].steps) {
    ops.push_back(s.op);
    if (nodes != nullptr)
      nodes->push_back(s.node);
  }
  return ops;
}

// Output 0 of one run of a session planned with oneDNN on or off.
inline Tensor RunOnce(const std::shared_ptr<const Model> &model,
                      const Tensor &x, bool onednn, int64_t *made = nullptr) {
  cpu::ScopedOneDnn scope(onednn);
  SessionOptions options;
  options.device = Device::kCpu;
  std::unique_ptr<Session> session = Session::Create(model, options).value();
  const int64_t before = cpu::OneDnnStepsMade();
  absl::StatusOr<std::vector<TensorView>> out = session->Run({x.view()});
  if (made != nullptr)
    *made = cpu::OneDnnStepsMade() - before;
  EXPECT_TRUE(out.ok()) << out.status();
  if (!out.ok())
    return Tensor();
  return Tensor::CopyOf((*out)[0]).value();
}

inline void ExpectNear(const Tensor &got, const Tensor &want, double abs_tol,
                       double rel_tol, const std::string &what) {
  ASSERT_EQ(got.shape(), want.shape()) << what;
  const float *g = got.as<float>();
  const float *w = want.as<float>();
  int reported = 0;
  for (int64_t i = 0; i < got.view().num_elements(); ++i) {
    const double bound = abs_tol + rel_tol * std::fabs(w[i]);
    if (!(std::fabs(static_cast<double>(g[i]) - w[i]) <= bound) &&
        reported++ < 5) {
      ADD_FAILURE() << what << ": element " << i << " is " << g[i]
                    << ", expected " << w[i] << " (bound " << bound << ")";
    }
  }
}

} // namespace grove::testing

#endif // GROVE_TEST_OPS_ACTIVATION_FUSION_TEST_UTIL_H_
