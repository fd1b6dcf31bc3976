// The exported models on the emulated CUDA device, run three times with the
// same inputs: the last run (a plan-cache hit) must make no device allocation
// and no synchronization or device-to-host read inside a straight-line
// segment (what a CUDA graph capture needs), and its outputs must still
// match the references. The segments it runs are those DescribeExecution
// (grove inspect --device cuda) lists for the same shapes.
//
// CUDA graphs: the first run captures every segment (the second too where
// a Loop's buffers grew meanwhile), the third captures nothing and replays
// them all (a model with no host step launches nothing outside its graph),
// and a run on new input values gives, bit for bit, what a session with
// graphs off gives.
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "grove/grove.h"
#include "gtest/gtest.h"
#include "lib/backends/backends.h"
#include "lib/backends/cuda/emulated_device.h"
#include "lib/ir/value_type.h"
#include "test/onnx/exported_models.h"

namespace grove {
namespace {

using testing::Case;
using testing::Compare;
using testing::Import;
using testing::ModelsUnderTest;
using testing::ModelUnderTest;
using testing::ReadCases;

class CaptureSafeTest : public ::testing::TestWithParam<ModelUnderTest> {};

TEST_P(CaptureSafeTest, SteadyStateRunWaitsOnlyBetweenSegments) {
  const ModelUnderTest& m = GetParam();
  absl::StatusOr<std::shared_ptr<const Model>> model = Import(m.onnx, nullptr);
  ASSERT_TRUE(model.ok()) << model.status();
  absl::StatusOr<std::vector<Case>> cases = ReadCases(m.testdata);
  ASSERT_TRUE(cases.ok()) << cases.status();
  const Case& c = cases->front();
  std::vector<TensorView> inputs;
  std::vector<std::vector<int64_t>> shapes;
  for (const Tensor& t : c.inputs) {
    inputs.push_back(t.view());
    shapes.push_back(t.shape());
  }

  SessionOptions options;
  options.max_cached_plans = 0;
  absl::StatusOr<std::unique_ptr<Session>> session =
      internal::CreateSessionOnDevice(*model, options, cuda::NewEmulatedDevice());
  ASSERT_TRUE(session.ok()) << session.status();
  Session& s = **session;

  ASSERT_TRUE(s.Run(inputs).ok());  // plans, arenas, first uploads, graphs captured
  // A Loop's carried buffers grow to their largest size during the first
  // run, so its bodies' segments meet their final addresses only in the
  // second, and are captured once more then.
  const SessionStats first = s.stats();
  ASSERT_TRUE(s.Run(inputs).ok());
  const SessionStats second = s.stats();
  std::printf("%s: graphs captured by the first run %lld, by the second %lld\n", m.name.c_str(),
              static_cast<long long>(first.graphs_captured),
              static_cast<long long>(second.graphs_captured - first.graphs_captured));
  const SessionStats before = s.stats();
  absl::StatusOr<std::vector<TensorView>> outputs = s.Run(inputs);
  ASSERT_TRUE(outputs.ok()) << outputs.status();
  const SessionStats after = s.stats();
  double worst = 0;
  for (size_t k = 0; k < c.outputs.size(); ++k) {
    EXPECT_EQ(Compare((*outputs)[k], c.outputs[k].view(), &worst), "") << "output " << k;
  }

  EXPECT_EQ(after.plans_created, before.plans_created);
  EXPECT_EQ(after.device_allocations, before.device_allocations) << "a plan-cache hit allocated device memory";
  EXPECT_EQ(after.host_waits_inside_segments, before.host_waits_inside_segments)
      << "a step inside a segment synchronized or read device memory back";
  const int64_t segments = after.segments_run - before.segments_run;
  EXPECT_GT(segments, 0);
  EXPECT_EQ(after.graphs_captured, before.graphs_captured) << "the third run captured a graph";
  EXPECT_EQ(after.graph_capture_failures, 0) << after.graph_fallback_reason;
  // Every segment replays: a body whose outer values come from another
  // arena each trip (a body plan per trip length) has its graph refreshed.
  const int64_t step_by_step = after.segments_run_eagerly - before.segments_run_eagerly;
  EXPECT_EQ(after.graph_replays - before.graph_replays, segments);
  EXPECT_EQ(step_by_step, 0) << after.graph_fallback_reason;
  std::printf("%s: %lld segments replayed, %lld of them after a refresh of their parameters\n", m.name.c_str(),
              static_cast<long long>(segments),
              static_cast<long long>(after.graph_refreshes - before.graph_refreshes));

  // New values, same shapes: the graphs read them.
  std::vector<Tensor> changed;
  std::vector<TensorView> changed_views;
  for (const Tensor& t : c.inputs) {
    Tensor u = Tensor::CopyOf(t.view()).value();
    if (u.dtype() == DType::kF32) {
      for (int64_t i = 0; i < u.view().num_elements(); ++i) u.as<float>()[i] = u.as<float>()[i] * 0.75f + 0.125f;
    }
    changed_views.push_back(u.view());
    changed.push_back(std::move(u));
  }
  SessionOptions eager_options;
  eager_options.cuda_graphs = GraphMode::kOff;
  absl::StatusOr<std::unique_ptr<Session>> eager =
      internal::CreateSessionOnDevice(*model, eager_options, cuda::NewEmulatedDevice());
  ASSERT_TRUE(eager.ok()) << eager.status();
  absl::StatusOr<std::vector<TensorView>> want = (*eager)->Run(changed_views);
  ASSERT_TRUE(want.ok()) << want.status();
  std::vector<Tensor> want_copies;
  for (const TensorView& v : *want) want_copies.push_back(Tensor::CopyOf(v).value());
  absl::StatusOr<std::vector<TensorView>> got = s.Run(changed_views);
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->size(), want_copies.size());
  for (size_t k = 0; k < got->size(); ++k) {
    const TensorView& g = (*got)[k];
    const TensorView w = want_copies[k].view();
    ASSERT_EQ(g.shape, w.shape) << "output " << k;
    ASSERT_EQ(g.dtype, w.dtype) << "output " << k;
    if (ir::IsBoxed(g.dtype)) continue;
    EXPECT_EQ(std::memcmp(g.data, w.data, g.byte_size()), 0) << "output " << k << " differs from graphs off";
  }

  ExecutionInfoOptions describe;
  describe.device = Device::kCuda;
  describe.input_shapes = shapes;
  absl::StatusOr<ExecutionInfo> info = DescribeExecution(**model, describe);
  ASSERT_TRUE(info.ok()) << info.status();
  ASSERT_FALSE(info->paths.empty());
  const PathInfo& main = info->paths.front();
  for (const HostStepInfo& h : main.host_steps) {
    std::printf("%s: step %d %s '%s' needs the host: %s\n", m.name.c_str(), h.step, h.op.c_str(), h.node.c_str(),
                h.reason.c_str());
  }
  if (info->paths.size() == 1 && main.host_steps.empty()) {
    // No data-dependent step: one segment, one wait at the end of the run
    // (outputs copied back together), nothing read back before it.
    EXPECT_EQ(main.segments.size(), 1u);
    EXPECT_EQ(segments, 1);
    EXPECT_EQ(after.device_synchronizations - before.device_synchronizations, 1);
    EXPECT_EQ(after.device_to_host_reads - before.device_to_host_reads,
              static_cast<int64_t>(c.outputs.size()));
    EXPECT_EQ(after.launches_outside_graphs - before.launches_outside_graphs, 0);
    EXPECT_EQ(after.graph_launches - before.graph_launches, 1);
  }
  std::printf("%s: %zu paths; main: %zu steps, %zu segments, %zu host steps; steady run: %lld segments, "
              "%lld syncs, %lld reads\n",
              m.name.c_str(), info->paths.size(), main.steps.size(), main.segments.size(), main.host_steps.size(),
              static_cast<long long>(segments),
              static_cast<long long>(after.device_synchronizations - before.device_synchronizations),
              static_cast<long long>(after.device_to_host_reads - before.device_to_host_reads));
}

INSTANTIATE_TEST_SUITE_P(Models, CaptureSafeTest, ::testing::ValuesIn(ModelsUnderTest()),
                         [](const ::testing::TestParamInfo<ModelUnderTest>& info) { return info.param.name; });

}  // namespace
}  // namespace grove
