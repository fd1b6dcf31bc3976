// CUDA graphs (SessionOptions::cuda_graphs): each plan segment captured on
// its first run and replayed after, on the emulated device in CI (its
// captures record each launch with its parameter bytes and replay them, so
// a kernel whose parameters go stale gives a wrong answer here) and on the
// GPU under `ctest -L gpu`. Results are compared with the CPU backend and
// with the same CUDA session with graphs off.
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "examples/models/demo_models.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "jit/kernels/selftest_params.h"
#include "lib/backends/backends.h"
#include "lib/backends/cuda/emulated_device.h"
#include "lib/backends/cuda/recording_device.h"
#include "lib/runtime/graph_cache.h"
#include "test/cuda_op_test_util.h"
#include "test/model_test_util.h"

namespace grove {
namespace {

using ::testing::HasSubstr;
using testing::CompareTensors;
using testing::TestDevice;

Tensor F32(std::vector<int64_t> shape, uint32_t seed) {
  Tensor t = Tensor::Create(DType::kF32, shape).value();
  const std::vector<float> v = testing::RandomF32(t.view().num_elements(), seed);
  std::copy(v.begin(), v.end(), t.as<float>());
  return t;
}

std::vector<Tensor> RunOrDie(Session& s, const std::vector<Tensor>& inputs) { return testing::RunCopies(s, inputs); }

std::unique_ptr<Session> CudaSession(std::shared_ptr<const Model> model, SessionOptions options = {},
                                     std::shared_ptr<cuda::Device> device = nullptr) {
  absl::StatusOr<std::unique_ptr<Session>> s =
      internal::CreateSessionOnDevice(std::move(model), options, device != nullptr ? device : TestDevice());
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? std::move(*s) : nullptr;
}

std::unique_ptr<Session> CpuSession(std::shared_ptr<const Model> model) {
  SessionOptions options;
  options.device = Device::kCpu;
  return Session::Create(std::move(model), options).value();
}

// The test device as a driver without conditional graph nodes: a Loop
// runs host-driven, its body's graphs replayed trip by trip (with them, a
// Loop whose carried shapes hold is one graph, conditional_graph_test.cc).
class NoConditionalNodes final : public cuda::ForwardingDevice {
 public:
  NoConditionalNodes() : ForwardingDevice(TestDevice()) {}
  int conditional_level() const override { return 0; }
};

void ExpectEqual(const std::vector<Tensor>& want, const std::vector<Tensor>& got, double tolerance,
                 const std::string& what) {
  ASSERT_EQ(want.size(), got.size()) << what;
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(CompareTensors(want[i], got[i], tolerance), "") << what << " output " << i;
  }
}

// The demo Loop's inputs: `trips` trips over x of n elements, no limit.
std::vector<Tensor> LoopInputs(int64_t trips, int64_t n) {
  Tensor t = Tensor::Create(DType::kI64, {}).value();
  t.as<int64_t>()[0] = trips;
  Tensor limit = Tensor::Create(DType::kF32, {}).value();
  limit.as<float>()[0] = 1e6f;
  std::vector<Tensor> in;
  in.push_back(std::move(t));
  in.push_back(F32({n}, static_cast<uint32_t>(n)));
  in.push_back(std::move(limit));
  return in;
}

// Shape buckets off: a plan, an arena and graphs per exact shape (the
// mechanics under the buckets, tested on their own).
SessionOptions ExactShapes() {
  SessionOptions options;
  options.shape_buckets = {{"*", "exact"}};
  return options;
}

// The MLP is one segment: the first run captures it, every later run of the
// same shape replays it with no launch outside the graph, and sees the new
// input values (the graph reads the input's slot, not a copy of it).
TEST(CudaGraphTest, OneSegmentIsCapturedOnceAndReplayedWithNewValues) {
  std::shared_ptr<const Model> model = testing::LoadOrDie(demo::BuildMlp());
  std::unique_ptr<Session> cpu = CpuSession(model);
  std::unique_ptr<Session> cuda = CudaSession(model, ExactShapes());
  ASSERT_NE(cuda, nullptr);

  ExpectEqual(RunOrDie(*cpu, {F32({5, 16}, 1)}), RunOrDie(*cuda, {F32({5, 16}, 1)}), 1e-5, "first run");
  SessionStats s = cuda->stats();
  EXPECT_EQ(s.graphs_captured, 1);
  EXPECT_EQ(s.graph_replays, 0);
  EXPECT_EQ(s.graph_launches, 1);
  EXPECT_EQ(s.graphs_held, 1);
  EXPECT_GT(s.graph_nodes, 0);
  EXPECT_EQ(s.launches_outside_graphs, 0);
  EXPECT_EQ(s.graph_fallback_reason, "");

  for (uint32_t seed = 2; seed < 6; ++seed) {
    ExpectEqual(RunOrDie(*cpu, {F32({5, 16}, seed)}), RunOrDie(*cuda, {F32({5, 16}, seed)}), 1e-5,
                absl::StrCat("replay with seed ", seed));
  }
  s = cuda->stats();
  EXPECT_EQ(s.graphs_captured, 1);
  EXPECT_EQ(s.graph_replays, 4);
  EXPECT_EQ(s.graph_launches, 5);
  EXPECT_EQ(s.launches_outside_graphs, 0);
  EXPECT_EQ(s.kernels_run, 5 * (s.kernels_run / 5)) << "a replay counts its steps as run";

  // A new shape is a new plan, and its segment a new graph; the old one
  // still replays.
  ExpectEqual(RunOrDie(*cpu, {F32({9, 16}, 7)}), RunOrDie(*cuda, {F32({9, 16}, 7)}), 1e-5, "batch 9");
  ExpectEqual(RunOrDie(*cpu, {F32({5, 16}, 8)}), RunOrDie(*cuda, {F32({5, 16}, 8)}), 1e-5, "batch 5 again");
  s = cuda->stats();
  EXPECT_EQ(s.graphs_captured, 2);
  EXPECT_EQ(s.graph_replays, 5);
  EXPECT_EQ(s.graphs_held, 2);
}

// Graphs off: the same results, every kernel launched one by one.
TEST(CudaGraphTest, GraphsOffLaunchesEveryKernel) {
  std::shared_ptr<const Model> model = testing::LoadOrDie(demo::BuildTransformerBlock());
  SessionOptions off;
  off.cuda_graphs = GraphMode::kOff;
  std::unique_ptr<Session> eager = CudaSession(model, off);
  std::unique_ptr<Session> graphs = CudaSession(model);
  ASSERT_NE(eager, nullptr);
  ASSERT_NE(graphs, nullptr);
  for (int round = 0; round < 3; ++round) {
    const std::vector<Tensor> in = {F32({2, 7, 32}, 10 + round)};
    // Bit for bit: a replay runs the same kernels on the same parameters.
    ExpectEqual(RunOrDie(*eager, in), RunOrDie(*graphs, in), 0.0, absl::StrCat("round ", round));
  }
  const SessionStats e = eager->stats(), g = graphs->stats();
  EXPECT_EQ(e.graphs_captured, 0);
  EXPECT_EQ(e.graph_launches, 0);
  EXPECT_GT(e.launches_outside_graphs, 0);
  EXPECT_EQ(e.graph_fallback_reason, "graphs are off (SessionOptions::cuda_graphs)");
  EXPECT_EQ(e.segments_run_eagerly, e.segments_run);
  EXPECT_EQ(g.segments_run_eagerly, 0);
  EXPECT_GT(g.graphs_captured, 0);
  EXPECT_GT(g.graph_replays, 0);
  EXPECT_EQ(e.kernels_run, g.kernels_run);
  EXPECT_EQ(e.segments_run, g.segments_run);
}

// Early exit: the If's condition is read on the host, which picks the
// branch; each branch body's segments are captured on first use, and both
// paths replay afterwards.
TEST(CudaGraphTest, BothBranchesOfAnIfReplay) {
  std::shared_ptr<const Model> model = testing::LoadOrDie(demo::BuildEarlyExit());
  std::unique_ptr<Session> cpu = CpuSession(model);
  std::unique_ptr<Session> cuda = CudaSession(model);
  ASSERT_NE(cuda, nullptr);
  auto input = [](float sign, uint32_t seed) {
    Tensor t = F32({3, 8}, seed);
    for (int64_t i = 0; i < 24; ++i) t.as<float>()[i] = sign * (std::abs(t.as<float>()[i]) + 0.1f);
    return t;
  };
  for (int round = 0; round < 3; ++round) {
    for (float sign : {1.0f, -1.0f}) {
      const std::vector<Tensor> in = {input(sign, 20 + round)};
      ExpectEqual(RunOrDie(*cpu, in), RunOrDie(*cuda, in), 1e-5, absl::StrCat("round ", round, " sign ", sign));
    }
  }
  const SessionStats s = cuda->stats();
  const int64_t captured = s.graphs_captured;
  EXPECT_GT(captured, 0);
  EXPECT_GT(s.graph_replays, captured);
  // Another pass over both paths captures nothing new.
  for (float sign : {1.0f, -1.0f}) RunOrDie(*cuda, {input(sign, 99)});
  EXPECT_EQ(cuda->stats().graphs_captured, captured);
}

// A host-driven Loop's body runs once per trip: its segment's graph replays
// per trip.
TEST(CudaGraphTest, LoopBodyReplaysPerTrip) {
  std::shared_ptr<const Model> model = testing::LoadOrDie(demo::BuildStepHistory(demo::History::kScan));
  std::unique_ptr<Session> cpu = CpuSession(model);
  std::unique_ptr<Session> cuda = CudaSession(model, {}, std::make_shared<NoConditionalNodes>());
  ASSERT_NE(cuda, nullptr);
  for (int64_t steps : {3, 5, 3}) {
    Tensor n = Tensor::Create(DType::kI64, {}).value();
    n.as<int64_t>()[0] = steps;
    const std::vector<Tensor> in = {std::move(n), F32({2, 64}, static_cast<uint32_t>(steps))};
    ExpectEqual(RunOrDie(*cpu, in), RunOrDie(*cuda, in), 1e-4, absl::StrCat(steps, " steps"));
  }
  const SessionStats s = cuda->stats();
  EXPECT_GT(s.graphs_captured, 0);
  EXPECT_GE(s.graph_replays, 3 + 5 + 3 - s.graphs_captured);
}

// Device inputs used in place: a graph replays the addresses it captured,
// so an input at a new address makes the segment be captured again when
// its graph cannot be refreshed (this one's GEMM bakes its input) (up to 4
// graphs per segment, one per set of addresses: inputs that alternate
// between two buffers replay), and one that moves every run ends up
// launched step by step, with the reason.
TEST(CudaGraphTest, DeviceInputsAtNewAddressesAreCapturedAgainThenRunStepByStep) {
  std::shared_ptr<const Model> model = testing::LoadOrDie(demo::BuildMlp());
  std::shared_ptr<cuda::Device> dev = TestDevice();
  std::unique_ptr<Session> cpu = CpuSession(model);
  std::unique_ptr<Session> cuda = CudaSession(model, ExactShapes(), dev);
  ASSERT_NE(cuda, nullptr);
  std::vector<void*> buffers;
  for (uint32_t run = 0; run < 20; ++run) {
    const Tensor host = F32({4, 16}, 30 + run);
    // Runs 0..5 alternate between two buffers; each later run has its own.
    void* d = nullptr;
    if (run >= 2 && run < 6) {
      d = buffers[run % 2];
    } else {
      d = dev->Allocate(host.view().byte_size()).value();
      buffers.push_back(d);  // all live: a new address each time
    }
    ASSERT_TRUE(dev->CopyAsync(d, host.view().data, host.view().byte_size(), nullptr).ok());
    ASSERT_TRUE(dev->Synchronize(nullptr).ok());
    absl::StatusOr<std::vector<TensorView>> got = cuda->Run({TensorView(DType::kF32, {4, 16}, d)});
    ASSERT_TRUE(got.ok()) << got.status();
    ExpectEqual(RunOrDie(*cpu, {host}), {Tensor::CopyOf((*got)[0]).value()}, 1e-5, absl::StrCat("run ", run));
  }
  for (void* d : buffers) dev->Free(d);
  const SessionStats s = cuda->stats();
  // Runs 0 and 1 capture, 2..5 replay; 6 and 7 fill the two free variants,
  // 8..15 replace one each, and 16 gives up.
  EXPECT_EQ(s.graph_replays, 4);
  EXPECT_EQ(s.graphs_captured, 2 + 2 + 8);
  EXPECT_EQ(s.graphs_held, 0);
  // Its graphs bake the first layer's GEMM, which reads the input: no refresh.
  EXPECT_EQ(s.graph_refreshes, 0);
  EXPECT_THAT(s.graph_fallback_reason, HasSubstr("its buffers met more than 12 sets of addresses"));
  EXPECT_GT(s.launches_outside_graphs, 0);
}

// A model of elementwise kernels only (no GEMM or copy, which a graph
// bakes): its graphs read their kernels' parameters from device memory, so
// a segment whose input moved has its graph refreshed (the kernels'
// pointers rewritten) instead of a new capture, for as many addresses as
// the caller brings; only a set of addresses that recurs gets a graph of
// its own. Every result is checked: a stale
// parameter would read the old buffer.
TEST(CudaGraphTest, MovedBuffersRefreshAGraphInsteadOfCapturingAgain) {
  ModelBuilder b;
  b.AddSymbol("batch", 1, 64);
  b.AddInput("x", DType::kF32, {"batch", 32});
  std::vector<float> bias(32), half = {0.5f};
  for (int i = 0; i < 32; ++i) bias[i] = 0.01f * static_cast<float>(i) - 0.1f;
  b.AddWeight("bias", DType::kF32, {32}, bias);
  b.AddWeight("half", DType::kF32, {}, half);
  b.AddOp("Relu", {"x"}, {"r"});
  b.AddOp("Add", {"r", "bias"}, {"a"});
  b.AddOp("Sigmoid", {"a"}, {"s"});
  b.AddOp("Mul", {"s", "half"}, {"y"});
  b.AddOutput("y");
  std::shared_ptr<const Model> model = testing::LoadOrDie(b.Finish());
  std::shared_ptr<cuda::Device> dev = TestDevice();
  std::unique_ptr<Session> cpu = CpuSession(model);
  std::unique_ptr<Session> cuda = CudaSession(model, ExactShapes(), dev);
  ASSERT_NE(cuda, nullptr);
  std::vector<void*> buffers;
  constexpr int kRuns = 24;
  for (uint32_t run = 0; run < kRuns; ++run) {
    const Tensor host = F32({3, 32}, 60 + run);
    void* d = dev->Allocate(host.view().byte_size()).value();
    buffers.push_back(d);  // all live: a new address each run
    ASSERT_TRUE(dev->CopyAsync(d, host.view().data, host.view().byte_size(), nullptr).ok());
    ASSERT_TRUE(dev->Synchronize(nullptr).ok());
    absl::StatusOr<std::vector<TensorView>> got = cuda->Run({TensorView(DType::kF32, {3, 32}, d)});
    ASSERT_TRUE(got.ok()) << got.status();
    ExpectEqual(RunOrDie(*cpu, {host}), {Tensor::CopyOf((*got)[0]).value()}, 1e-6, absl::StrCat("run ", run));
  }
  // Each earlier buffer again, now refreshed into one of the graphs.
  for (uint32_t run = 0; run < 6; ++run) {
    const Tensor host = F32({3, 32}, 90 + run);
    ASSERT_TRUE(dev->CopyAsync(buffers[run], host.view().data, host.view().byte_size(), nullptr).ok());
    ASSERT_TRUE(dev->Synchronize(nullptr).ok());
    absl::StatusOr<std::vector<TensorView>> got = cuda->Run({TensorView(DType::kF32, {3, 32}, buffers[run])});
    ASSERT_TRUE(got.ok()) << got.status();
    ExpectEqual(RunOrDie(*cpu, {host}), {Tensor::CopyOf((*got)[0]).value()}, 1e-6, absl::StrCat("again ", run));
  }
  SessionStats s = cuda->stats();
  // A new set of addresses refreshes the graph the segment has: one capture.
  EXPECT_EQ(s.graphs_captured, 1);
  EXPECT_EQ(s.graph_refreshes, kRuns + 6 - 1);
  EXPECT_EQ(s.graph_replays, s.graph_refreshes);
  // Two new buffers in turn: each is refreshed into the graph once; when
  // the first recurs it gets a graph of its own, and from then on both replay.
  for (int i = 0; i < 2; ++i) buffers.push_back(dev->Allocate(3 * 32 * sizeof(float)).value());
  for (uint32_t run = 0; run < 8; ++run) {
    const Tensor host = F32({3, 32}, 120 + run);
    void* d = buffers[kRuns + run % 2];
    ASSERT_TRUE(dev->CopyAsync(d, host.view().data, host.view().byte_size(), nullptr).ok());
    ASSERT_TRUE(dev->Synchronize(nullptr).ok());
    absl::StatusOr<std::vector<TensorView>> got = cuda->Run({TensorView(DType::kF32, {3, 32}, d)});
    ASSERT_TRUE(got.ok()) << got.status();
    ExpectEqual(RunOrDie(*cpu, {host}), {Tensor::CopyOf((*got)[0]).value()}, 1e-6, absl::StrCat("alternate ", run));
  }
  for (void* d : buffers) dev->Free(d);
  const SessionStats before = s;
  s = cuda->stats();
  EXPECT_EQ(s.graphs_captured - before.graphs_captured, 1);
  EXPECT_EQ(s.graph_refreshes - before.graph_refreshes, 2);
  EXPECT_EQ(s.graph_replays - before.graph_replays, 2 + 5);
  EXPECT_EQ(s.segments_run_eagerly, 0);
  EXPECT_EQ(s.launches_outside_graphs, 0);
  EXPECT_EQ(s.graph_fallback_reason, "");
}

// Session::InputBuffer: the caller writes the input into the session's own
// device buffer, so a run copies nothing in, and its address never moves
// while the shapes fit: graphs replay.
TEST(CudaGraphTest, InputBuffersAreUsedInPlaceAndReplay) {
  std::shared_ptr<const Model> model = testing::LoadOrDie(demo::BuildMlp());
  std::shared_ptr<cuda::Device> dev = TestDevice();
  std::unique_ptr<Session> cpu = CpuSession(model);
  std::unique_ptr<Session> cuda = CudaSession(model, ExactShapes(), dev);
  ASSERT_NE(cuda, nullptr);
  uint32_t seed = 40;
  for (int64_t batch : {5, 3, 3, 5, 3}) {
    absl::StatusOr<TensorView> slot = cuda->InputBuffer("x", std::vector<int64_t>{batch, 16});
    ASSERT_TRUE(slot.ok()) << slot.status();
    EXPECT_TRUE(dev->IsDevicePointer(slot->data));
    EXPECT_EQ(slot->shape, (std::vector<int64_t>{batch, 16}));
    const Tensor host = F32({batch, 16}, ++seed);
    ASSERT_TRUE(dev->CopyAsync(slot->data, host.view().data, host.view().byte_size(), nullptr).ok());
    ASSERT_TRUE(dev->Synchronize(nullptr).ok());
    const SessionStats before = cuda->stats();
    absl::StatusOr<std::vector<TensorView>> got = cuda->Run({*slot});
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(cuda->stats().bytes_host_to_device, before.bytes_host_to_device) << "the input was copied";
    ExpectEqual(RunOrDie(*cpu, {host}), {Tensor::CopyOf((*got)[0]).value()}, 1e-5, absl::StrCat("batch ", batch));
  }
  const SessionStats s = cuda->stats();
  EXPECT_EQ(s.graphs_captured, 2);  // one per shape: the buffer stayed where it was
  EXPECT_EQ(s.graph_replays, 3);

  // Errors name the input and what is wrong.
  auto error = [&](absl::string_view name, std::vector<int64_t> shape) {
    absl::StatusOr<TensorView> b = cuda->InputBuffer(name, shape);
    EXPECT_FALSE(b.ok());
    return std::string(b.status().message());
  };
  EXPECT_THAT(error("nope", {1, 16}), HasSubstr("no input 'nope'"));
  EXPECT_THAT(error("x", {16}), HasSubstr("given rank 1, wants rank 2"));
  EXPECT_THAT(error("x", {2, 15}), HasSubstr("dim 1 is 15, wants 16"));
  EXPECT_THAT(error("x", {0, 16}), HasSubstr("outside batch's range 1..1024"));
  EXPECT_THAT(error("x", {-1, 16}), HasSubstr("negative"));

  // On the CPU the buffer is host memory, used in place the same way.
  absl::StatusOr<TensorView> host_slot = cpu->InputBuffer("x", std::vector<int64_t>{2, 16});
  ASSERT_TRUE(host_slot.ok()) << host_slot.status();
  const Tensor x = F32({2, 16}, 77);
  std::memcpy(host_slot->data, x.view().data, x.view().byte_size());
  const std::vector<Tensor> want = RunOrDie(*cpu, {x});
  absl::StatusOr<std::vector<TensorView>> got = cpu->Run({*host_slot});
  ASSERT_TRUE(got.ok()) << got.status();
  ExpectEqual(want, {Tensor::CopyOf((*got)[0]).value()}, 0.0, "cpu input buffer");
}

// Past max_cached_graphs the least recently replayed graph goes, and is
// captured again when its segment runs again.
TEST(CudaGraphTest, GraphCacheIsBounded) {
  std::shared_ptr<const Model> model = testing::LoadOrDie(demo::BuildMlp());
  SessionOptions options = ExactShapes();
  options.max_cached_graphs = 2;
  std::unique_ptr<Session> cpu = CpuSession(model);
  std::unique_ptr<Session> cuda = CudaSession(model, options);
  ASSERT_NE(cuda, nullptr);
  for (int64_t batch : {1, 2, 3, 1, 2, 3}) {
    const std::vector<Tensor> in = {F32({batch, 16}, static_cast<uint32_t>(batch))};
    ExpectEqual(RunOrDie(*cpu, in), RunOrDie(*cuda, in), 1e-5, absl::StrCat("batch ", batch));
    EXPECT_LE(cuda->stats().graphs_held, 2);
  }
  const SessionStats s = cuda->stats();
  EXPECT_EQ(s.graphs_captured, 6);  // LRU over a cycle of three: every run misses
  EXPECT_EQ(s.graphs_evicted, 4);
  EXPECT_EQ(s.graphs_held, 2);
  // The plans stay: only their graphs went.
  EXPECT_EQ(s.plans_created, 3);
}

// max_graph_bytes: past it the least recently replayed graphs go (never the
// newest), and the bytes held stay within it once two are held.
TEST(CudaGraphTest, GraphBytesAreBounded) {
  std::shared_ptr<const Model> model = testing::LoadOrDie(demo::BuildMlp());
  std::unique_ptr<Session> cpu = CpuSession(model);
  std::unique_ptr<Session> probe = CudaSession(model, ExactShapes());
  ASSERT_NE(probe, nullptr);
  RunOrDie(*probe, {F32({1, 16}, 1)});
  const int64_t one = probe->stats().graph_bytes;
  ASSERT_GT(one, 0);
  SessionOptions options = ExactShapes();
  options.max_graph_bytes = 2 * one + one / 2;  // room for two
  std::unique_ptr<Session> cuda = CudaSession(model, options);
  ASSERT_NE(cuda, nullptr);
  for (int64_t batch : {1, 2, 3, 1, 2, 3}) {
    const std::vector<Tensor> in = {F32({batch, 16}, static_cast<uint32_t>(batch))};
    ExpectEqual(RunOrDie(*cpu, in), RunOrDie(*cuda, in), 1e-5, absl::StrCat("batch ", batch));
    EXPECT_LE(cuda->stats().graph_bytes, options.max_graph_bytes);
  }
  const SessionStats s = cuda->stats();
  EXPECT_EQ(s.graphs_held, 2);
  EXPECT_EQ(s.graphs_captured, 6);  // LRU over a cycle of three: every run misses
  EXPECT_EQ(s.graphs_evicted, 4);

  // A limit below one graph keeps the newest only.
  options.max_graph_bytes = 1;
  std::unique_ptr<Session> tiny = CudaSession(model, options);
  ASSERT_NE(tiny, nullptr);
  for (int64_t batch : {1, 2, 1}) {
    const std::vector<Tensor> in = {F32({batch, 16}, static_cast<uint32_t>(batch))};
    ExpectEqual(RunOrDie(*cpu, in), RunOrDie(*tiny, in), 1e-5, absl::StrCat("tiny, batch ", batch));
    EXPECT_EQ(tiny->stats().graphs_held, 1);
  }
  options.max_graph_bytes = -1;
  options.device = Device::kCpu;  // checked whatever the device
  absl::StatusOr<std::unique_ptr<Session>> bad = Session::Create(model, options);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("max_graph_bytes must be >= 0"));
}

// A device whose captures fail: the segment runs step by step, the run
// succeeds, and the reason is kept.
class FailingCaptureDevice final : public cuda::ForwardingDevice {
 public:
  explicit FailingCaptureDevice(std::shared_ptr<cuda::Device> d) : ForwardingDevice(std::move(d)) {}
  bool captures_graphs() const override { return true; }
  absl::StatusOr<std::unique_ptr<cuda::DeviceGraph>> EndCapture(cuda::Stream s) override {
    absl::StatusOr<std::unique_ptr<cuda::DeviceGraph>> g = device_->EndCapture(s);
    if (!g.ok()) return g;
    return absl::InternalError("instantiation failed (test)");
  }
};

TEST(CudaGraphTest, AFailedCaptureFallsBackToStepByStep) {
  std::shared_ptr<const Model> model = testing::LoadOrDie(demo::BuildMlp());
  std::unique_ptr<Session> cpu = CpuSession(model);
  std::unique_ptr<Session> cuda =
      CudaSession(model, {}, std::make_shared<FailingCaptureDevice>(cuda::NewEmulatedDevice()));
  ASSERT_NE(cuda, nullptr);
  for (uint32_t seed : {1u, 2u, 3u}) {
    const std::vector<Tensor> in = {F32({3, 16}, seed)};
    ExpectEqual(RunOrDie(*cpu, in), RunOrDie(*cuda, in), 1e-5, absl::StrCat("seed ", seed));
  }
  const SessionStats s = cuda->stats();
  EXPECT_EQ(s.graph_capture_failures, 1);  // once per segment, not per run
  EXPECT_EQ(s.graphs_captured, 0);
  EXPECT_EQ(s.graph_launches, 0);
  EXPECT_GT(s.launches_outside_graphs, 0);
  EXPECT_THAT(s.graph_fallback_reason, HasSubstr("its capture failed: instantiation failed (test)"));
}

TEST(CudaGraphTest, GraphsOnNeedsADeviceThatCaptures) {
  std::shared_ptr<const Model> model = testing::LoadOrDie(demo::BuildMlp());
  SessionOptions on;
  on.cuda_graphs = GraphMode::kOn;
  absl::StatusOr<std::unique_ptr<Session>> s =
      internal::CreateSessionOnDevice(model, on, cuda::NewRecordingDevice(90));
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.status().message()), HasSubstr("does not capture graphs"));
  // kAuto on the same device: no graphs, and why.
  s = internal::CreateSessionOnDevice(model, {}, cuda::NewRecordingDevice(90));
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_TRUE(RunOrDie(**s, {F32({2, 16}, 1)}).size() == 1);
  EXPECT_EQ((*s)->stats().graphs_captured, 0);
  EXPECT_THAT((*s)->stats().graph_fallback_reason, HasSubstr("does not capture graphs"));

  SessionOptions bad;
  bad.cuda_graphs = static_cast<GraphMode>(7);
  EXPECT_FALSE(Session::Create(model, bad).ok());
  bad = {};
  bad.max_cached_graphs = -1;
  EXPECT_FALSE(Session::Create(model, bad).ok());
  EXPECT_EQ(ParseGraphMode("off").value(), GraphMode::kOff);
  EXPECT_FALSE(ParseGraphMode("sometimes").ok());
}

// The emulated device's captures: calls recorded, not run; their parameter
// bytes copied when recorded; waits and reads back refused.
// Shape buckets (the default, "auto"): batches 5..8 share the bucket of
// bound 8. Its one segment is captured once, from the plan at batch 8, and
// each batch replays it after its kernels' parameters are refreshed; the
// GEMMs, whose only varying dim is M, run at M = 8 into the rows the
// bucket's arena holds. Every result is compared with the CPU's: a kernel
// that kept the bound's sizes, or a GEMM row past the actual ones read back,
// would show here.
TEST(CudaGraphTest, OneGraphServesEveryShapeOfABucket) {
  std::shared_ptr<const Model> model = testing::LoadOrDie(demo::BuildMlp());
  std::unique_ptr<Session> cpu = CpuSession(model);
  std::unique_ptr<Session> cuda = CudaSession(model);
  ASSERT_NE(cuda, nullptr);
  uint32_t seed = 100;
  for (int64_t batch : {5, 6, 7, 8, 6}) {
    const std::vector<Tensor> in = {F32({batch, 16}, ++seed)};
    ExpectEqual(RunOrDie(*cpu, in), RunOrDie(*cuda, in), 1e-5, absl::StrCat("batch ", batch));
  }
  SessionStats s = cuda->stats();
  EXPECT_EQ(s.buckets_made, 1);
  EXPECT_EQ(s.graphs_captured, 1);
  EXPECT_EQ(s.graph_refreshes, 4);  // each change of shape
  EXPECT_EQ(s.segments_run_eagerly, 0);
  EXPECT_EQ(s.launches_outside_graphs, 0);
  EXPECT_EQ(s.plans_created, 4);  // the bound's (8), then 5, 6, 7
  EXPECT_EQ(s.bucketed_runs, 5);
  EXPECT_EQ(s.bucket_input_bytes, 5 * 8 * 16 * 4);
  EXPECT_EQ(s.bucket_padding_bytes, (3 + 2 + 1 + 0 + 2) * 16 * 4);
  EXPECT_EQ(s.bucket_fallback_reason, "");
  EXPECT_EQ(s.graph_fallback_reason, "");

  // Again, in another order, and the same shape twice: nothing captured.
  for (int64_t batch : {8, 5, 5, 7, 6}) {
    const std::vector<Tensor> in = {F32({batch, 16}, ++seed)};
    ExpectEqual(RunOrDie(*cpu, in), RunOrDie(*cuda, in), 1e-5, absl::StrCat("again, batch ", batch));
  }
  s = cuda->stats();
  EXPECT_EQ(s.graphs_captured, 1);
  EXPECT_EQ(s.graph_replays, 9);
  EXPECT_EQ(s.graph_refreshes, 4 + 4);  // 5 twice: refreshed once
  EXPECT_EQ(s.plans_created, 4);

  // Batch 9 is the next bucket (bound 16): its own graph.
  const std::vector<Tensor> in = {F32({9, 16}, ++seed)};
  ExpectEqual(RunOrDie(*cpu, in), RunOrDie(*cuda, in), 1e-5, "batch 9");
  s = cuda->stats();
  EXPECT_EQ(s.buckets_made, 2);
  EXPECT_EQ(s.graphs_captured, 2);
  EXPECT_EQ(s.launches_outside_graphs, 0);
}

// Per-symbol bucket rules: a list of bounds, "exact", a step. A bound
// clamps to the symbol's declared maximum.
TEST(CudaGraphTest, BucketRulesPerSymbol) {
  std::shared_ptr<const Model> model = testing::LoadOrDie(demo::BuildMlp());
  std::unique_ptr<Session> cpu = CpuSession(model);
  struct Case {
    std::string spec;
    std::vector<int64_t> batches;
    int64_t captures;
  };
  for (const Case& c : std::vector<Case>{{"2,4,1000", {1, 2, 3, 4, 900}, 3},
                                         {"exact", {1, 2, 3}, 3},
                                         {"step:10", {1, 9, 10, 11}, 2},
                                         {"pow2", {600, 1000, 1024}, 1}}) {
    SessionOptions options;
    options.shape_buckets = {{"batch", c.spec}};
    std::unique_ptr<Session> cuda = CudaSession(model, options);
    ASSERT_NE(cuda, nullptr);
    for (int64_t batch : c.batches) {
      const std::vector<Tensor> in = {F32({batch, 16}, static_cast<uint32_t>(batch))};
      ExpectEqual(RunOrDie(*cpu, in), RunOrDie(*cuda, in), 1e-5, absl::StrCat(c.spec, ": batch ", batch));
    }
    EXPECT_EQ(cuda->stats().graphs_captured, c.captures) << c.spec;
    EXPECT_EQ(cuda->stats().launches_outside_graphs, 0) << c.spec;
  }
}

TEST(CudaGraphTest, BadBucketRulesAreRefusedAtCreate) {
  std::shared_ptr<const Model> model = testing::LoadOrDie(demo::BuildMlp());
  auto error = [&](std::vector<std::pair<std::string, std::string>> specs) {
    SessionOptions options;
    options.shape_buckets = std::move(specs);
    absl::StatusOr<std::unique_ptr<Session>> s = internal::CreateSessionOnDevice(model, options, TestDevice());
    EXPECT_FALSE(s.ok());
    return s.ok() ? std::string() : std::string(s.status().message());
  };
  EXPECT_THAT(error({{"seq", "pow2"}}), HasSubstr("no symbol 'seq' (its symbols: batch"));
  EXPECT_THAT(error({{"batch", "pow3"}}), HasSubstr("none of auto, pow2, step:N, exact"));
  EXPECT_THAT(error({{"batch", "step:0"}}), HasSubstr("not a positive integer"));
  EXPECT_THAT(error({{"batch", "8,4"}}), HasSubstr("ascending"));
  EXPECT_THAT(error({{"batch", "exact"}, {"batch", "pow2"}}), HasSubstr("given twice"));
  // The CPU checks them too (one meaning of the options everywhere).
  SessionOptions options;
  options.device = Device::kCpu;
  options.shape_buckets = {{"nope", "exact"}};
  EXPECT_FALSE(Session::Create(model, options).ok());
}

// The transformer block over sequences 5..7 (bound 8): one graph for the
// bucket, refreshed per shape, each result the CPU's.
TEST(CudaGraphTest, TheTransformerBlockReplaysOneGraphPerBucket) {
  std::shared_ptr<const Model> model = testing::LoadOrDie(demo::BuildTransformerBlock());
  std::unique_ptr<Session> cpu = CpuSession(model);
  std::unique_ptr<Session> cuda = CudaSession(model);
  ASSERT_NE(cuda, nullptr);
  uint32_t seed = 200;
  for (int round = 0; round < 2; ++round) {
    for (int64_t seq : {5, 6, 7}) {
      const std::vector<Tensor> in = {F32({2, seq, 32}, ++seed)};
      ExpectEqual(RunOrDie(*cpu, in), RunOrDie(*cuda, in), 1e-4, absl::StrCat("seq ", seq));
    }
  }
  const SessionStats s = cuda->stats();
  EXPECT_EQ(s.buckets_made, 1);
  EXPECT_EQ(s.graphs_captured, 1);
  EXPECT_EQ(s.bucket_fallback_reason, "");
  EXPECT_EQ(s.segments_run_eagerly, 0);
  EXPECT_EQ(s.launches_outside_graphs, 0);
}

// A Loop body is bucketed too (every dim by the '*' rule, auto): over x of
// 5, 6 and 7 elements (bound 8) the host-driven body's graph is captured
// for the first and refreshed for the others, where exact shapes capture
// one per length.
TEST(CudaGraphTest, LoopBodiesShareTheirBucketsGraphs) {
  std::shared_ptr<const Model> model = testing::LoadOrDie(demo::BuildLoop());
  std::unique_ptr<Session> cpu = CpuSession(model);
  std::unique_ptr<Session> bucketed = CudaSession(model, {}, std::make_shared<NoConditionalNodes>());
  std::unique_ptr<Session> exact = CudaSession(model, ExactShapes(), std::make_shared<NoConditionalNodes>());
  ASSERT_NE(bucketed, nullptr);
  ASSERT_NE(exact, nullptr);
  int64_t first = -1;
  for (int round = 0; round < 2; ++round) {
    for (int64_t n : {5, 6, 7}) {
      const std::vector<Tensor> in = LoopInputs(3, n);
      const std::vector<Tensor> want = RunOrDie(*cpu, in);
      ExpectEqual(want, RunOrDie(*bucketed, in), 1e-5, absl::StrCat("bucketed, n ", n));
      ExpectEqual(want, RunOrDie(*exact, in), 1e-5, absl::StrCat("exact, n ", n));
      if (first < 0) first = bucketed->stats().graphs_captured;
    }
  }
  const SessionStats b = bucketed->stats(), e = exact->stats();
  EXPECT_GT(first, 0);
  EXPECT_EQ(b.graphs_captured, first) << b.bucket_fallback_reason;
  EXPECT_GT(b.graph_refreshes, 0);
  EXPECT_EQ(e.graphs_captured, 3 * first);
  EXPECT_EQ(b.segments_run_eagerly, e.segments_run_eagerly);
}

// A GEMM whose N and K vary with the shape (x times its transpose, then
// that times x: attention's QK^T and PV) runs the tiled kernel in a
// bucketed plan, which reads its sizes from the graph's parameters: one
// graph serves the bucket, refreshed per shape, every result the CPU's.
// The same shapes with buckets off keep the device GEMM (a graph each).
TEST(CudaGraphTest, AGemmWhoseNAndKVaryServesItsBucket) {
  ModelBuilder b;
  b.AddSymbol("n", 1, 64);
  b.AddInput("x", DType::kF32, {"n", 16});
  b.AddOp("Transpose", {"x"}, {"xt"}, {{"perm", std::vector<int64_t>{1, 0}}});
  b.AddOp("MatMul", {"x", "xt"}, {"g"});  // N = n
  b.AddOp("Relu", {"g"}, {"r"});
  b.AddOp("MatMul", {"r", "x"}, {"y"});  // K = n
  b.AddOutput("y");
  std::shared_ptr<const Model> model = testing::LoadOrDie(b.Finish());
  std::unique_ptr<Session> cpu = CpuSession(model);
  std::unique_ptr<Session> cuda = CudaSession(model);
  std::unique_ptr<Session> exact = CudaSession(model, ExactShapes());
  ASSERT_NE(cuda, nullptr);
  ASSERT_NE(exact, nullptr);
  uint32_t seed = 400;
  for (int round = 0; round < 2; ++round) {
    for (int64_t n : {5, 6, 7, 8}) {
      const std::vector<Tensor> in = {F32({n, 16}, ++seed)};
      const std::vector<Tensor> want = RunOrDie(*cpu, in);
      ExpectEqual(want, RunOrDie(*cuda, in), 1e-4, absl::StrCat("n ", n));
      ExpectEqual(want, RunOrDie(*exact, in), 1e-4, absl::StrCat("exact, n ", n));
    }
  }
  const SessionStats s = cuda->stats();
  EXPECT_EQ(s.buckets_made, 1);
  EXPECT_EQ(s.bucket_fallback_reason, "");
  EXPECT_EQ(s.graphs_captured, 1);
  EXPECT_EQ(s.graph_replays, 7);
  EXPECT_GT(s.graph_refreshes, 0);
  EXPECT_EQ(s.segments_run_eagerly, 0);
  EXPECT_EQ(s.launches_outside_graphs, 0);
  EXPECT_EQ(exact->stats().graphs_captured, 4);
  for (int64_t n : {64, 5}) {
    ExecutionInfoOptions o;
    o.device = Device::kCuda;
    o.input_shapes = {{n, 16}};
    absl::StatusOr<ExecutionInfo> info = DescribeExecution(*model, o);
    ASSERT_TRUE(info.ok()) << info.status();
    ASSERT_EQ(info->paths[0].segments.size(), 1u);
    EXPECT_EQ(info->paths[0].segments[0].pinned, "") << "n " << n;
  }
}

// A segment whose work differs between the shapes of its bucket in what a
// graph bakes cannot run at the bucket's bound: here a MatMul whose
// broadcast batch dims do not fold into one strided GEMM ([n, 2] against
// [1, 2]) makes one GEMM per outer batch, n of them. The segment is pinned
// to exact shapes, one graph per shape, the reason kept, every result right.
TEST(CudaGraphTest, ASegmentThatCannotServeItsBucketIsPinnedToExactShapes) {
  ModelBuilder b;
  b.AddSymbol("n", 1, 64);
  b.AddInput("x", DType::kF32, {"n", 2, 3, 16});
  b.AddInput("w", DType::kF32, {1, 2, 16, 3});
  b.AddOp("MatMul", {"x", "w"}, {"g"});
  b.AddOp("Relu", {"g"}, {"y"});
  b.AddOutput("y");
  std::shared_ptr<const Model> model = testing::LoadOrDie(b.Finish());
  std::unique_ptr<Session> cpu = CpuSession(model);
  std::unique_ptr<Session> cuda = CudaSession(model);
  ASSERT_NE(cuda, nullptr);
  const Tensor w = F32({1, 2, 16, 3}, 299);
  auto inputs = [&](int64_t n, uint32_t seed) {
    std::vector<Tensor> in;
    in.push_back(F32({n, 2, 3, 16}, seed));
    in.push_back(Tensor::CopyOf(w.view()).value());
    return in;
  };
  uint32_t seed = 300;
  for (int round = 0; round < 2; ++round) {
    for (int64_t n : {5, 6, 7}) {
      const std::vector<Tensor> in = inputs(n, ++seed);
      ExpectEqual(RunOrDie(*cpu, in), RunOrDie(*cuda, in), 1e-4, absl::StrCat("n ", n));
    }
  }
  const SessionStats s = cuda->stats();
  EXPECT_EQ(s.buckets_made, 1);
  EXPECT_THAT(s.bucket_fallback_reason, HasSubstr("pinned to exact shapes"));
  EXPECT_THAT(s.bucket_fallback_reason, HasSubstr("where the capture had gemm_tiled"));
  EXPECT_EQ(s.graphs_captured, 1 + 3);  // the bound's, then one per shape
  EXPECT_EQ(s.graph_replays, 3);
  EXPECT_EQ(s.segments_run_eagerly, 0);
  EXPECT_EQ(s.launches_outside_graphs, 0);

  // A pinned segment keeps a graph per exact plan, past the four variants a
  // segment of one plan keeps: 17 shapes of the bucket of bound 64, twice.
  for (int round = 0; round < 2; ++round) {
    const SessionStats before = cuda->stats();
    for (int64_t n = 40; n <= 56; ++n) {
      const std::vector<Tensor> in = inputs(n, static_cast<uint32_t>(n));
      ExpectEqual(RunOrDie(*cpu, in), RunOrDie(*cuda, in), 1e-4, absl::StrCat("n ", n));
    }
    const SessionStats after = cuda->stats();
    EXPECT_EQ(after.graphs_captured - before.graphs_captured, round == 0 ? 1 + 17 : 0) << "round " << round;
    EXPECT_EQ(after.segments_run_eagerly, 0) << after.graph_fallback_reason;
  }

  // grove inspect --device cuda says which segment is pinned and why, at a
  // bucket's bound (64) as at a shape inside it (5); the MLP's is not.
  for (int64_t n : {64, 5}) {
    ExecutionInfoOptions o;
    o.device = Device::kCuda;
    o.input_shapes = {{n, 2, 3, 16}, {1, 2, 16, 3}};
    absl::StatusOr<ExecutionInfo> info = DescribeExecution(*model, o);
    ASSERT_TRUE(info.ok()) << info.status();
    ASSERT_EQ(info->paths[0].segments.size(), 1u);
    EXPECT_THAT(info->paths[0].segments[0].pinned, HasSubstr("where the capture had gemm_tiled")) << "n " << n;
  }
  std::shared_ptr<const Model> mlp = testing::LoadOrDie(demo::BuildMlp());
  ExecutionInfoOptions o;
  o.device = Device::kCuda;
  o.input_shapes = {{8, 16}};
  absl::StatusOr<ExecutionInfo> info = DescribeExecution(*mlp, o);
  ASSERT_TRUE(info.ok()) << info.status();
  ASSERT_EQ(info->paths[0].segments.size(), 1u);
  EXPECT_EQ(info->paths[0].segments[0].pinned, "");
}

// What a stable arena grows by: a page on the emulated device, the
// driver's recommended granularity (2 MiB) on a GPU.
uint64_t ArenaGranule() { return TestDevice()->emulated() ? 4096 : uint64_t{2} << 20; }

// The stable arena (SessionStats::arena_bytes): every bucket and exact plan
// of the main graph shares one address range that grows to the largest of
// them, at an address that never moves, so the graphs captured for small
// buckets replay unchanged after a larger bucket grew it.
TEST(StableArenaTest, EveryBucketSharesOneArenaThatGrowsInPlace) {
  std::shared_ptr<const Model> model = testing::LoadOrDie(demo::BuildMlp());
  std::unique_ptr<Session> cpu = CpuSession(model);
  std::unique_ptr<Session> cuda = CudaSession(model);
  ASSERT_NE(cuda, nullptr);
  uint32_t seed = 300;
  uint64_t largest = 0;
  for (int64_t batch : {3, 8, 30, 200, 1000, 5}) {
    const std::vector<Tensor> in = {F32({batch, 16}, ++seed)};
    ExpectEqual(RunOrDie(*cpu, in), RunOrDie(*cuda, in), 1e-5, absl::StrCat("batch ", batch));
  }
  for (int64_t bound : {4, 8, 32, 256, 1024}) {
    absl::StatusOr<MemoryReport> r = cuda->Reshape({{bound, 16}});
    ASSERT_TRUE(r.ok()) << r.status();
    largest = std::max<uint64_t>(largest, r->arena_bytes);
  }
  SessionStats s = cuda->stats();
  EXPECT_EQ(s.buckets_made, 5);  // bounds 4, 8, 32, 256, 1024
  EXPECT_EQ(s.arena_own_plans, 0);
  // One arena for all five buckets: the largest, rounded to a page.
  EXPECT_GE(static_cast<uint64_t>(s.arena_bytes), largest);
  EXPECT_LE(static_cast<uint64_t>(s.arena_bytes), largest + ArenaGranule());
  const int64_t captured = s.graphs_captured;
  EXPECT_EQ(captured, 5);

  // The small buckets again, after the arena grew, at new shapes too: their
  // graphs replay (no capture, no device allocation: the new exact plans
  // take their bucket's layout on the same arena) and give the right answers.
  const int64_t allocations = s.device_allocations;
  for (int64_t batch : {3, 7, 25, 150, 900}) {
    const std::vector<Tensor> in = {F32({batch, 16}, ++seed)};
    ExpectEqual(RunOrDie(*cpu, in), RunOrDie(*cuda, in), 1e-5, absl::StrCat("again, batch ", batch));
  }
  s = cuda->stats();
  EXPECT_EQ(s.graphs_captured, captured);
  EXPECT_EQ(s.segments_run_eagerly, 0);
  EXPECT_EQ(s.launches_outside_graphs, 0);
  EXPECT_EQ(s.device_allocations, allocations);
}

// If and Loop bodies run while their caller's plan is live: each nesting
// depth has its own range, and the session's arena bytes are the sum of
// the depths' largest plans.
TEST(StableArenaTest, BodiesHaveARangePerDepth) {
  std::shared_ptr<const Model> model = testing::LoadOrDie(demo::BuildLoop());
  std::unique_ptr<Session> cpu = CpuSession(model);
  std::unique_ptr<Session> cuda = CudaSession(model, ExactShapes());
  ASSERT_NE(cuda, nullptr);
  for (int64_t n : {5, 40, 9, 300, 5}) {
    const std::vector<Tensor> in = LoopInputs(4, n);
    ExpectEqual(RunOrDie(*cpu, in), RunOrDie(*cuda, in), 1e-5, absl::StrCat("n ", n));
  }
  const SessionStats s = cuda->stats();
  EXPECT_EQ(s.arena_own_plans, 0);
  EXPECT_GT(s.arena_bytes, 0);
  const int64_t granule = static_cast<int64_t>(ArenaGranule());
  EXPECT_EQ(s.arena_bytes % granule, 0);
  EXPECT_LE(s.arena_bytes, 2 * granule + 2 * 300 * 4 * 8) << "two depths, each no larger than its largest plan";
}

// A device that lends smaller ranges, or none: the plans that do not fit
// keep arenas of their own (counted), and every answer is still right.
class SmallRangeDevice final : public cuda::ForwardingDevice {
 public:
  SmallRangeDevice(std::shared_ptr<cuda::Device> d, uint64_t range_bytes)
      : ForwardingDevice(std::move(d)), range_bytes_(range_bytes) {}
  absl::StatusOr<std::unique_ptr<cuda::AddressRange>> ReserveRange(uint64_t) override {
    if (range_bytes_ == 0) return absl::UnimplementedError("no ranges on this device");
    return device_->ReserveRange(range_bytes_);
  }

 private:
  const uint64_t range_bytes_;
};

TEST(StableArenaTest, PlansThatDoNotFitTheRangeKeepTheirOwnArena) {
  std::shared_ptr<const Model> model = testing::LoadOrDie(demo::BuildMlp());
  std::unique_ptr<Session> cpu = CpuSession(model);
  // A GPU maps 2 MiB at a time: every plan of the MLP fits one granule, so
  // only the emulated device (4 KiB pages) can lend a range they outgrow.
  std::vector<uint64_t> ranges = {0};
  if (TestDevice()->emulated()) ranges.push_back(8192);
  for (uint64_t range_bytes : ranges) {
    std::unique_ptr<Session> cuda =
        CudaSession(model, {}, std::make_shared<SmallRangeDevice>(TestDevice(), range_bytes));
    ASSERT_NE(cuda, nullptr);
    uint32_t seed = 400;
    for (int64_t batch : {3, 500, 3, 900}) {
      const std::vector<Tensor> in = {F32({batch, 16}, ++seed)};
      ExpectEqual(RunOrDie(*cpu, in), RunOrDie(*cuda, in), 1e-5,
                  absl::StrCat("range ", range_bytes, ", batch ", batch));
    }
    const SessionStats s = cuda->stats();
    if (range_bytes == 0) {
      EXPECT_EQ(s.arena_bytes, 0);
      EXPECT_EQ(s.arena_own_plans, 3);  // the buckets of 4, 512 and 1024
    } else {
      EXPECT_GT(s.arena_bytes, 0);
      EXPECT_LE(s.arena_bytes, 8192);
      EXPECT_EQ(s.arena_own_plans, 2);  // 512 and 1024 rows do not fit 8 KiB
    }
  }
}

// Session::InputBuffer with shape buckets: the input's bucket slot, one
// address for every bucket, so the caller writes the input where every
// bucket's graph reads it and no run copies anything in.
TEST(StableArenaTest, InputBuffersAreTheBucketsSlot) {
  std::shared_ptr<const Model> model = testing::LoadOrDie(demo::BuildMlp());
  std::shared_ptr<cuda::Device> dev = TestDevice();
  std::unique_ptr<Session> cpu = CpuSession(model);
  std::unique_ptr<Session> cuda = CudaSession(model, {}, dev);
  ASSERT_NE(cuda, nullptr);
  uint32_t seed = 500;
  void* first = nullptr;
  for (int64_t batch : {5, 3, 7, 100, 5, 8, 3}) {
    absl::StatusOr<TensorView> slot = cuda->InputBuffer("x", std::vector<int64_t>{batch, 16});
    ASSERT_TRUE(slot.ok()) << slot.status();
    if (first == nullptr) first = slot->data;
    EXPECT_EQ(slot->data, first) << "batch " << batch << ": the slot moved";
    EXPECT_TRUE(dev->IsDevicePointer(slot->data));
    const Tensor host = F32({batch, 16}, ++seed);
    ASSERT_TRUE(dev->CopyAsync(slot->data, host.view().data, host.view().byte_size(), nullptr).ok());
    ASSERT_TRUE(dev->Synchronize(nullptr).ok());
    const SessionStats before = cuda->stats();
    absl::StatusOr<std::vector<TensorView>> got = cuda->Run({*slot});
    ASSERT_TRUE(got.ok()) << got.status();
    const SessionStats after = cuda->stats();
    EXPECT_EQ(after.bytes_host_to_device, before.bytes_host_to_device) << "batch " << batch << ": copied in";
    EXPECT_EQ(after.bucketed_runs, before.bucketed_runs + 1);
    ExpectEqual(RunOrDie(*cpu, {host}), {Tensor::CopyOf((*got)[0]).value()}, 1e-5, absl::StrCat("batch ", batch));
  }
  const SessionStats s = cuda->stats();
  EXPECT_EQ(s.buckets_made, 3);  // 4, 8 and 128
  EXPECT_EQ(s.graphs_captured, 3);
  EXPECT_EQ(s.launches_outside_graphs, 0);
  // A caller's own buffer still works (copied into the slot).
  const Tensor host = F32({6, 16}, 999);
  ExpectEqual(RunOrDie(*cpu, {host}), RunOrDie(*cuda, {host}), 1e-5, "host input");
}

// The host stand-in of a reserved range: its start never moves, growth
// keeps contents, its mapped part is device memory, and it ends at its size.
TEST(StableArenaTest, AnEmulatedRangeGrowsInPlace) {
  std::shared_ptr<cuda::Device> dev = cuda::NewEmulatedDevice();
  absl::StatusOr<std::unique_ptr<cuda::AddressRange>> r = dev->ReserveRange(1 << 20);
  ASSERT_TRUE(r.ok()) << r.status();
  cuda::AddressRange& range = **r;
  uint8_t* const base = range.base();
  EXPECT_EQ(range.mapped(), 0u);
  EXPECT_FALSE(dev->IsDevicePointer(base));
  ASSERT_TRUE(range.Grow(100).ok());
  EXPECT_EQ(range.base(), base);
  EXPECT_GE(range.mapped(), 100u);
  std::memset(base, 7, 100);
  EXPECT_TRUE(dev->IsDevicePointer(base + 99));
  ASSERT_TRUE(range.Grow(300000).ok());
  EXPECT_EQ(range.base(), base);
  EXPECT_EQ(base[0], 7);
  EXPECT_EQ(base[99], 7);
  base[299999] = 1;
  EXPECT_TRUE(dev->IsDevicePointer(base + 299999));
  EXPECT_EQ(dev->stats().bytes_allocated, static_cast<int64_t>(range.mapped()));
  EXPECT_EQ(range.Grow(2 << 20).code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(range.base(), base);
  EXPECT_EQ(dev->stats().allocations, 3);  // each Grow that asked for more, as Allocate counts
  r->reset();
  EXPECT_EQ(dev->stats().bytes_allocated, 0);
  EXPECT_FALSE(dev->IsDevicePointer(base));
}

TEST(EmulatedGraphTest, CaptureRecordsAndReplayRuns) {
  std::shared_ptr<cuda::Device> dev = cuda::NewEmulatedDevice();
  float* in = static_cast<float*>(dev->Allocate(32 * 4).value());
  float* sums = static_cast<float*>(dev->Allocate(4).value());
  float* total = static_cast<float*>(dev->Allocate(4).value());
  void* lanes = dev->Allocate(32 * 16).value();
  for (int i = 0; i < 32; ++i) in[i] = 1.0f;

  ASSERT_TRUE(dev->BeginCapture(nullptr).ok());
  EXPECT_FALSE(dev->BeginCapture(nullptr).ok()) << "one capture at a time per thread";
  ASSERT_TRUE(dev->MemsetAsync(total, 0, 4, nullptr).ok());
  grove_k::SelftestParams p{in, sums, total, lanes, 32};
  ASSERT_TRUE(dev->Launch({"selftest", {DType::kF32}}, "selftest", cuda::Grid1D(32, 32), &p, sizeof(p), nullptr).ok());
  p.n = 0;  // the graph keeps the bytes it was given
  *total = 123.0f;
  EXPECT_EQ(*total, 123.0f) << "a captured memset does not run";
  absl::StatusOr<std::unique_ptr<cuda::DeviceGraph>> graph = dev->EndCapture(nullptr);
  ASSERT_TRUE(graph.ok()) << graph.status();
  EXPECT_EQ((*graph)->num_nodes(), 2);
  EXPECT_EQ((*graph)->bytes(), static_cast<int64_t>(sizeof(p)));
  EXPECT_EQ(dev->stats().launches, 0);

  ASSERT_TRUE(dev->LaunchGraph(**graph, nullptr).ok());
  const float first = *total;
  EXPECT_NE(first, 123.0f);
  for (int i = 0; i < 32; ++i) in[i] = 2.0f;  // a replay reads memory as it is then
  ASSERT_TRUE(dev->LaunchGraph(**graph, nullptr).ok());
  EXPECT_EQ(*total, 2 * first);
  EXPECT_EQ(dev->stats().graph_launches, 2);
  EXPECT_EQ(dev->stats().launches, 0);

  // A wait or a read back spoils a capture; EndCapture says which.
  ASSERT_TRUE(dev->BeginCapture(nullptr).ok());
  EXPECT_FALSE(dev->Synchronize(nullptr).ok());
  EXPECT_THAT(std::string(dev->EndCapture(nullptr).status().message()), HasSubstr("Synchronize while capturing"));
  float host = 0;
  ASSERT_TRUE(dev->BeginCapture(nullptr).ok());
  EXPECT_FALSE(dev->CopyAsync(&host, total, 4, nullptr).ok());
  EXPECT_THAT(std::string(dev->EndCapture(nullptr).status().message()), HasSubstr("a copy into host memory"));
  EXPECT_FALSE(dev->EndCapture(nullptr).ok()) << "no capture in progress";
  for (void* ptr : {static_cast<void*>(in), static_cast<void*>(sums), static_cast<void*>(total), lanes}) {
    dev->Free(ptr);
  }
}

}  // namespace
}  // namespace grove
