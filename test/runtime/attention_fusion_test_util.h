// Helpers of the attention plan pass's tests (test/runtime/attention_fusion*_test.cc,
// test/onnx/attention_fusion_test.cc): the pass switched on or off for a
// scope, a plan's step counts, and one run's outputs on the CPU or a device.
#ifndef GROVE_TEST_RUNTIME_ATTENTION_FUSION_TEST_UTIL_H_
#define GROVE_TEST_RUNTIME_ATTENTION_FUSION_TEST_UTIL_H_

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "grove/grove.h"
#include "gtest/gtest.h"
#include "lib/backends/backends.h"
#include "lib/runtime/attention_fusion.h"

namespace grove::testing {

// Plans made inside its scope fuse attention or not.
class ScopedAttentionFusion {
 public:
  explicit ScopedAttentionFusion(bool on) : was_(runtime::AttentionFusionEnabled()) {
    runtime::SetAttentionFusionEnabled(on);
  }
  ~ScopedAttentionFusion() { runtime::SetAttentionFusionEnabled(was_); }

 private:
  bool was_;
};

struct StepCounts {
  int fused = 0, softmax = 0, matmul = 0, total = 0;
  std::string fused_name;
};

// The main graph's plan on `device` for the inputs' shapes.
inline StepCounts Steps(const Model& model, const std::vector<Tensor>& inputs, Device device) {
  ExecutionInfoOptions o;
  o.device = device;
  for (const Tensor& t : inputs) o.input_shapes.push_back(t.shape());
  absl::StatusOr<ExecutionInfo> info = DescribeExecution(model, o);
  EXPECT_TRUE(info.ok()) << info.status();
  StepCounts c;
  if (!info.ok()) return c;
  for (const StepInfo& s : info->paths[0].steps) {
    ++c.total;
    if (s.op == "FusedAttention") {
      ++c.fused;
      c.fused_name = s.node;
    }
    c.softmax += s.op == "Softmax";
    c.matmul += s.op == "MatMul";
  }
  return c;
}

// Outputs of one run, copied (on `device`, or the CPU when null).
inline std::vector<Tensor> RunModel(const std::shared_ptr<const Model>& model, const std::vector<Tensor>& inputs,
                                    std::shared_ptr<cuda::Device> device = nullptr) {
  absl::StatusOr<std::unique_ptr<Session>> session =
      internal::CreateSessionOnDevice(model, SessionOptions{}, std::move(device));
  EXPECT_TRUE(session.ok()) << session.status();
  if (!session.ok()) return {};
  std::vector<TensorView> views;
  for (const Tensor& t : inputs) views.push_back(t.view());
  absl::StatusOr<std::vector<TensorView>> out = (*session)->Run(views);
  EXPECT_TRUE(out.ok()) << out.status();
  std::vector<Tensor> copies;
  if (out.ok()) {
    for (const TensorView& v : *out) copies.push_back(Tensor::CopyOf(v).value());
  }
  return copies;
}

}  // namespace grove::testing

#endif  // GROVE_TEST_RUNTIME_ATTENTION_FUSION_TEST_UTIL_H_
