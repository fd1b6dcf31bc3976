// Deferred device checks end to end (lib/backends/cuda/exec_context.h): a
// model whose Gather, GatherElements and ScatterND take indices computed on
// the device (and one with an integer Div) runs as one segment (one CUDA
// graph) on the emulated device; a run with a bad index (a zero divisor)
// fails with the CPU's message (node, value, bound),
// read at the run's end, eagerly and when the segment replays as a graph;
// the session stays usable and equals the CPU after it.
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lib/backends/backends.h"
#include "lib/backends/cuda/emulated_device.h"
#include "lib/backends/cuda/exec_context.h"
#include "lib/backends/cuda/param_device.h"
#include "test/cuda_op_test_util.h"
#include "test/model_test_util.h"

namespace grove {
namespace {

using ::testing::HasSubstr;

// ids [n] -> Gather(table [5, 4]) -> + x -> Relu -> GatherElements(axis 1,
// gi) -> ScatterND(rows si [m, 1], updates [m, 4]) -> y [n, 4].
std::shared_ptr<const Model> IndexingModel() {
  ModelBuilder b;
  b.AddSymbol("n", 1, 64);
  b.AddSymbol("m", 0, 64);
  b.AddInput("ids", DType::kI64, {"n"});
  b.AddInput("x", DType::kF32, {"n", 4});
  b.AddInput("gi", DType::kI64, {"n", 4});
  b.AddInput("si", DType::kI64, {"m", 1});
  b.AddInput("upd", DType::kF32, {"m", 4});
  std::vector<float> table(20);
  for (int i = 0; i < 20; ++i) table[i] = 0.25f * static_cast<float>(i) - 2.0f;
  b.AddWeight("table", DType::kF32, {5, 4}, table);
  b.AddOp("Gather", {"table", "ids"}, {"e"}, {}, "embed");
  b.AddOp("Add", {"e", "x"}, {"a"}, {}, "add");
  b.AddOp("Relu", {"a"}, {"r"}, {}, "relu");
  b.AddOp("GatherElements", {"r", "gi"}, {"g"}, {{"axis", int64_t{1}}}, "pick");
  b.AddOp("ScatterND", {"g", "si", "upd"}, {"y"}, {}, "write_rows");
  b.AddOutput("y");
  return testing::LoadOrDie(b.Finish());
}

struct Inputs {
  Tensor ids, x, gi, si, upd;
  std::vector<TensorView> views() const { return {ids.view(), x.view(), gi.view(), si.view(), upd.view()}; }
};

Inputs MakeInputs(int64_t n, uint32_t seed) {
  Inputs in;
  in.ids = Tensor::Create(DType::kI64, {n}).value();
  in.x = testing::TensorF32({n, 4}, testing::RandomF32(n * 4, seed));
  in.gi = Tensor::Create(DType::kI64, {n, 4}).value();
  in.si = Tensor::Create(DType::kI64, {2, 1}).value();
  in.upd = testing::TensorF32({2, 4}, testing::RandomF32(8, seed + 1));
  for (int64_t i = 0; i < n; ++i) in.ids.as<int64_t>()[i] = static_cast<int64_t>((i * 3 + seed) % 10) - 5;
  for (int64_t i = 0; i < n * 4; ++i) in.gi.as<int64_t>()[i] = static_cast<int64_t>((i + seed) % 8) - 4;
  in.si.as<int64_t>()[0] = 0;
  in.si.as<int64_t>()[1] = -1;
  return in;
}

std::unique_ptr<Session> EmulatedSession(std::shared_ptr<const Model> model, GraphMode graphs) {
  SessionOptions options;
  options.cuda_graphs = graphs;
  absl::StatusOr<std::unique_ptr<Session>> s =
      internal::CreateSessionOnDevice(std::move(model), options, cuda::NewEmulatedDevice());
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? std::move(*s) : nullptr;
}

std::unique_ptr<Session> CpuSession(std::shared_ptr<const Model> model) {
  SessionOptions options;
  options.device = Device::kCpu;
  return Session::Create(std::move(model), options).value();
}

// Runs `s` and returns its only output (copied) or the error.
absl::StatusOr<Tensor> RunOne(Session& s, const Inputs& in) {
  absl::StatusOr<std::vector<TensorView>> out = s.Run(in.views());
  if (!out.ok()) return out.status();
  return Tensor::CopyOf(out->front());
}

void ExpectSameBits(const Tensor& want, const Tensor& got, const std::string& what) {
  ASSERT_EQ(want.shape(), got.shape()) << what;
  EXPECT_EQ(std::memcmp(want.view().data, got.view().data, want.view().byte_size()), 0) << what;
}

TEST(CudaDeviceChecksTest, IndexingStepsNoLongerCutTheSegment) {
  std::shared_ptr<const Model> model = IndexingModel();
  ExecutionInfoOptions describe;
  describe.device = Device::kCuda;
  describe.input_shapes = {{6}, {6, 4}, {6, 4}, {2, 1}, {2, 4}};
  absl::StatusOr<ExecutionInfo> info = DescribeExecution(*model, describe);
  ASSERT_TRUE(info.ok()) << info.status();
  const PathInfo& main = info->paths.front();
  for (const HostStepInfo& h : main.host_steps) ADD_FAILURE() << h.op << " '" << h.node << "': " << h.reason;
  EXPECT_EQ(main.segments.size(), 1u);

  std::unique_ptr<Session> cuda = EmulatedSession(model, GraphMode::kOn);
  ASSERT_NE(cuda, nullptr);
  std::unique_ptr<Session> cpu = CpuSession(model);
  const Inputs in = MakeInputs(6, 1);
  for (int run = 0; run < 2; ++run) ASSERT_TRUE(RunOne(*cuda, in).ok());
  const SessionStats before = cuda->stats();
  absl::StatusOr<Tensor> got = RunOne(*cuda, MakeInputs(6, 2));
  ASSERT_TRUE(got.ok()) << got.status();
  const SessionStats after = cuda->stats();
  ExpectSameBits(RunOne(*cpu, MakeInputs(6, 2)).value(), *got, "steady run");
  EXPECT_EQ(after.segments_run - before.segments_run, 1);
  EXPECT_EQ(after.graph_replays - before.graph_replays, 1);
  EXPECT_EQ(after.graphs_captured, before.graphs_captured);
  EXPECT_EQ(after.device_synchronizations - before.device_synchronizations, 1);
  // The output and the check record, read with the run's one wait.
  EXPECT_EQ(after.device_to_host_reads - before.device_to_host_reads, 2);
  EXPECT_EQ(after.host_waits_inside_segments, before.host_waits_inside_segments);
  EXPECT_EQ(after.device_allocations, before.device_allocations);
}

// Each op's bad index, graphs on (the bad run replays the graph the good
// runs captured) and off: the CPU's error, then a good run equals the CPU.
TEST(CudaDeviceChecksTest, ABadIndexFailsTheRunWithTheCpuMessage) {
  std::shared_ptr<const Model> model = IndexingModel();
  std::unique_ptr<Session> cpu = CpuSession(model);
  struct Bad {
    std::string node, text;
    void (*spoil)(Inputs&);
  };
  const std::vector<Bad> bads = {
      {"embed", "Gather index 5 is out of range for axis 0 of size 5 (data [5, 4])",
       [](Inputs& in) { in.ids.as<int64_t>()[3] = 5; }},
      {"embed", "Gather index -6 is out of range", [](Inputs& in) { in.ids.as<int64_t>()[0] = -6; }},
      {"pick", "index 4 is out of range for axis 1 of the data [6, 4] (expected -4..3)",
       [](Inputs& in) { in.gi.as<int64_t>()[9] = 4; }},
      {"write_rows", "index -7 (entry 1, coordinate 0) is out of range for dim 0 of the data [6, 4]",
       [](Inputs& in) { in.si.as<int64_t>()[1] = -7; }},
      // Two bad steps: the first in stream order is reported.
      {"embed", "Gather index 9 is out of range",
       [](Inputs& in) {
         in.si.as<int64_t>()[0] = 6;
         in.ids.as<int64_t>()[5] = 9;
       }},
  };
  for (GraphMode graphs : {GraphMode::kOn, GraphMode::kOff}) {
    std::unique_ptr<Session> cuda = EmulatedSession(model, graphs);
    ASSERT_NE(cuda, nullptr);
    for (const Bad& bad : bads) {
      SCOPED_TRACE(absl::StrCat(graphs == GraphMode::kOn ? "graphs on: " : "graphs off: ", bad.text));
      const Inputs good = MakeInputs(6, 3);
      ASSERT_TRUE(RunOne(*cuda, good).ok());
      const SessionStats before = cuda->stats();
      Inputs in = MakeInputs(6, 3);
      bad.spoil(in);
      absl::StatusOr<Tensor> want = RunOne(*cpu, in);
      ASSERT_FALSE(want.ok());
      absl::StatusOr<Tensor> got = RunOne(*cuda, in);
      ASSERT_FALSE(got.ok());
      EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument);
      EXPECT_THAT(got.status().message(), HasSubstr(absl::StrCat("'", bad.node, "')")));
      EXPECT_THAT(got.status().message(), HasSubstr(bad.text));
      EXPECT_EQ(got.status().message(), want.status().message());
      const SessionStats after = cuda->stats();
      EXPECT_EQ(after.device_synchronizations - before.device_synchronizations, 1) << "no wait of its own";
      if (graphs == GraphMode::kOn) {
        EXPECT_EQ(after.graph_replays - before.graph_replays, 1);
        EXPECT_EQ(after.graphs_captured, before.graphs_captured);
      }
      // The record is cleared: the next run is right again.
      const Inputs next = MakeInputs(6, 4);
      absl::StatusOr<Tensor> again = RunOne(*cuda, next);
      ASSERT_TRUE(again.ok()) << again.status();
      ExpectSameBits(RunOne(*cpu, next).value(), *again, "after the error");
    }
  }
}

// Run into the caller's buffers (RunInto): the same error from its wait.
TEST(CudaDeviceChecksTest, RunIntoReportsTheFailureToo) {
  std::shared_ptr<const Model> model = IndexingModel();
  std::unique_ptr<Session> cuda = EmulatedSession(model, GraphMode::kOn);
  ASSERT_NE(cuda, nullptr);
  Inputs in = MakeInputs(6, 5);
  Tensor y = Tensor::Create(DType::kF32, {6, 4}).value();
  ASSERT_TRUE(cuda->RunInto(in.views(), {y.view()}).ok());
  in.ids.as<int64_t>()[2] = 100;
  absl::Status s = cuda->RunInto(in.views(), {y.view()});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("Gather index 100 is out of range for axis 0 of size 5"));
  in.ids.as<int64_t>()[2] = 1;
  EXPECT_TRUE(cuda->RunInto(in.views(), {y.view()}).ok());
}

// Integer Div of two inputs (its divisor only on the device): checked there,
// one segment; a zero divisor fails the run with the CPU's message.
TEST(CudaDeviceChecksTest, AZeroIntegerDivisorFailsTheRunWithTheCpuMessage) {
  ModelBuilder b;
  b.AddSymbol("n", 1, 64);
  b.AddInput("a", DType::kI32, {"n"});
  b.AddInput("b", DType::kI32, {"n"});
  b.AddOp("Div", {"a", "b"}, {"q"}, {}, "ratio");
  b.AddOp("Neg", {"q"}, {"y"}, {}, "negate");
  b.AddOutput("y");
  std::shared_ptr<const Model> model = testing::LoadOrDie(b.Finish());
  ExecutionInfoOptions describe;
  describe.device = Device::kCuda;
  describe.input_shapes = {{5}, {5}};
  absl::StatusOr<ExecutionInfo> info = DescribeExecution(*model, describe);
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_TRUE(info->paths.front().host_steps.empty());
  EXPECT_EQ(info->paths.front().segments.size(), 1u);

  std::unique_ptr<Session> cpu = CpuSession(model);
  for (GraphMode graphs : {GraphMode::kOn, GraphMode::kOff}) {
    std::unique_ptr<Session> cuda = EmulatedSession(model, graphs);
    ASSERT_NE(cuda, nullptr);
    Tensor a = Tensor::Create(DType::kI32, {5}).value(), d = Tensor::Create(DType::kI32, {5}).value();
    for (int i = 0; i < 5; ++i) {
      a.as<int32_t>()[i] = 17 * i - 30;
      d.as<int32_t>()[i] = i - 7;
    }
    auto run = [&](Session& s) -> absl::StatusOr<Tensor> {
      absl::StatusOr<std::vector<TensorView>> out = s.Run({a.view(), d.view()});
      if (!out.ok()) return out.status();
      return Tensor::CopyOf(out->front());
    };
    for (int i = 0; i < 2; ++i) ExpectSameBits(run(*cpu).value(), run(*cuda).value(), "good");
    const SessionStats before = cuda->stats();
    d.as<int32_t>()[3] = 0;
    absl::StatusOr<Tensor> want = run(*cpu);
    ASSERT_FALSE(want.ok());
    absl::StatusOr<Tensor> got = run(*cuda);
    ASSERT_FALSE(got.ok());
    EXPECT_EQ(got.status().message(), want.status().message());
    EXPECT_THAT(got.status().message(),
                HasSubstr("(Div 'ratio') in subgraph 0: integer division by zero: input 1 (B) holds 0 at flat index 3"));
    EXPECT_EQ(cuda->stats().device_synchronizations - before.device_synchronizations, 1);
    d.as<int32_t>()[3] = 2;
    ExpectSameBits(run(*cpu).value(), run(*cuda).value(), "after the error");
  }
}

// The CUDA backend hooks the checks into its session's ParamDevice
// explicitly (ExecContext::ReadChecksAtWaits; the tests above see them read
// at a graph replay's wait); a device other than the context's is refused.
TEST(CudaDeviceChecksTest, ChecksAreReadAtTheWaitsOfTheContextsOwnDeviceOnly) {
  const std::shared_ptr<cuda::Device> emulated = cuda::NewEmulatedDevice();
  cuda::ParamDevice params(emulated), other(emulated);
  cuda::ExecContext exec(params, nullptr);
  const absl::Status refused = exec.ReadChecksAtWaits(other);
  EXPECT_EQ(refused.code(), absl::StatusCode::kInternal) << refused;
  EXPECT_THAT(refused.message(), HasSubstr("not the device this context was made with"));
  EXPECT_TRUE(exec.ReadChecksAtWaits(params).ok());
}

}  // namespace
}  // namespace grove
