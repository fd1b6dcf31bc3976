// Bounded work: run deadlines, cancellation from another thread, and the one
// Loop policy (lib/backends/common/control_flow.h) for every Loop form.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <thread>

#include "gmock/gmock.h"
#include "grove/grove.h"
#include "gtest/gtest.h"
#include "lib/backends/common/control_flow.h"
#include "lib/backends/cuda/emulated_device.h"
#include "lib/ir/graph.h"
#include "lib/ir/op_registry.h"
#include "lib/backends/backends.h"
#include "test/model_test_util.h"

namespace grove {
namespace {

using ::testing::HasSubstr;
using testing::LoadOrDie;
using testing::ToVector;

constexpr int64_t kHuge = int64_t{1} << 62;

// Which of Loop's M and cond inputs the model wires up.
enum class LoopForm { kTripCount, kCond, kBoth, kNeither };

// Inputs "m" (i64 scalar), "c" (bool scalar), "x" (f32[4]); one Loop of the
// given form carries x and adds 1 per trip; its body passes its cond input
// on, so only M (or nothing) stops it. Output "y", and with `scan` also "s",
// every trip's carried value stacked.
std::shared_ptr<const Model> LoopModel(LoopForm form, bool scan = false) {
  ModelBuilder b;
  b.AddInput("m", DType::kI64, {});
  b.AddInput("c", DType::kBool, {});
  b.AddInput("x", DType::kF32, {4});
  b.AddWeight("one", DType::kF32, {1}, std::vector<float>{1.0f});
  const int body = b.AddSubgraph("body");
  b.AddInput("i", DType::kI64, {});
  b.AddInput("ci", DType::kBool, {});
  b.AddInput("v", DType::kF32, {4});
  b.AddOp("Identity", {"ci"}, {"co"});
  b.AddOp("Add", {"v", "one"}, {"v_next"});
  b.AddOutput("co");
  b.AddOutput("v_next");
  if (scan) {
    b.AddOp("Identity", {"v"}, {"v_scan"});
    b.AddOutput("v_scan");
  }
  b.SetSubgraph(0);
  const bool m = form == LoopForm::kTripCount || form == LoopForm::kBoth;
  const bool c = form == LoopForm::kCond || form == LoopForm::kBoth;
  std::vector<std::string> outs = {"y"};
  if (scan) outs.push_back("s");
  b.AddOp("Loop", {m ? "m" : "", c ? "c" : "", "x"}, outs, {{"body", SubgraphRef{body}}});
  b.AddOutput("y");
  if (scan) b.AddOutput("s");
  return LoadOrDie(b.Finish());
}

// Inputs "m" and "x" (f32[4]): an outer Loop of m trips whose body runs an
// inner Loop of m trips (m captured), each adding 1: y = x + m*m.
std::shared_ptr<const Model> NestedLoopModel() {
  ModelBuilder b;
  b.AddInput("m", DType::kI64, {});
  b.AddInput("x", DType::kF32, {4});
  b.AddWeight("one", DType::kF32, {1}, std::vector<float>{1.0f});
  const int inner = b.AddSubgraph("inner");
  b.AddInput("j", DType::kI64, {});
  b.AddInput("cj", DType::kBool, {});
  b.AddInput("w", DType::kF32, {4});
  b.AddOp("Identity", {"cj"}, {"cj_out"});
  b.AddOp("Add", {"w", "one"}, {"w_next"});
  b.AddOutput("cj_out");
  b.AddOutput("w_next");
  const int outer = b.AddSubgraph("outer");
  b.AddInput("i", DType::kI64, {});
  b.AddInput("ci", DType::kBool, {});
  b.AddInput("v", DType::kF32, {4});
  b.AddOp("Identity", {"ci"}, {"ci_out"});
  b.AddOp("Loop", {"m", "", "v"}, {"v_next"}, {{"body", SubgraphRef{inner}}});
  b.AddOutput("ci_out");
  b.AddOutput("v_next");
  b.SetSubgraph(0);
  b.AddOp("Loop", {"m", "", "x"}, {"y"}, {{"body", SubgraphRef{outer}}});
  b.AddOutput("y");
  return LoadOrDie(b.Finish());
}

std::unique_ptr<Session> CpuSession(std::shared_ptr<const Model> model, SessionOptions options) {
  options.device = Device::kCpu;
  absl::StatusOr<std::unique_ptr<Session>> s = Session::Create(std::move(model), options);
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? *std::move(s) : nullptr;
}

struct LoopInputs {
  explicit LoopInputs(int64_t m, bool c = true) : m(m), c(c ? 1 : 0) {}
  std::vector<TensorView> views() {
    return {TensorView(DType::kI64, {}, &m), TensorView(DType::kBool, {}, &c), TensorView(DType::kF32, {4}, x)};
  }
  int64_t m;
  uint8_t c;
  float x[4] = {1, 2, 3, 4};
};

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Every Loop form that would run "forever" ends at the deadline, and the
// session runs the next (short) loop correctly.
TEST(DeadlineTest, EveryLoopFormStopsAtTheDeadlineAndTheSessionStaysUsable) {
  for (LoopForm form : {LoopForm::kTripCount, LoopForm::kCond, LoopForm::kBoth, LoopForm::kNeither}) {
    SCOPED_TRACE(static_cast<int>(form));
    SessionOptions options;
    options.run_deadline_ms = 100;
    auto session = CpuSession(LoopModel(form), options);
    ASSERT_NE(session, nullptr);
    LoopInputs forever(kHuge);
    const auto start = std::chrono::steady_clock::now();
    auto out = session->Run(forever.views());
    EXPECT_LT(SecondsSince(start), 10.0);
    ASSERT_EQ(out.status().code(), absl::StatusCode::kDeadlineExceeded) << out.status();
    EXPECT_THAT(out.status().message(), HasSubstr("deadline of 100 ms"));
    if (form == LoopForm::kTripCount || form == LoopForm::kBoth) {
      LoopInputs three(3);
      auto again = session->Run(three.views());
      ASSERT_TRUE(again.ok()) << again.status();
      EXPECT_EQ(ToVector((*again)[0]), (std::vector<float>{4, 5, 6, 7}));
    }
  }
}

TEST(DeadlineTest, ScanOutputsOfALongLoopStopAtTheDeadline) {
  SessionOptions options;
  options.run_deadline_ms = 100;
  auto session = CpuSession(LoopModel(LoopForm::kTripCount, /*scan=*/true), options);
  LoopInputs forever(kHuge);
  auto out = session->Run(forever.views());
  ASSERT_EQ(out.status().code(), absl::StatusCode::kDeadlineExceeded) << out.status();
  LoopInputs two(2);
  auto again = session->Run(two.views());
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(ToVector((*again)[1]), (std::vector<float>{1, 2, 3, 4, 2, 3, 4, 5}));
}

TEST(DeadlineTest, NestedLoopsStopAtTheDeadline) {
  SessionOptions options;
  options.run_deadline_ms = 100;
  auto session = CpuSession(NestedLoopModel(), options);
  int64_t m = int64_t{1} << 40;
  float x[4] = {0, 0, 0, 0};
  const auto start = std::chrono::steady_clock::now();
  auto out = session->Run({TensorView(DType::kI64, {}, &m), TensorView(DType::kF32, {4}, x)});
  EXPECT_LT(SecondsSince(start), 10.0);
  ASSERT_EQ(out.status().code(), absl::StatusCode::kDeadlineExceeded) << out.status();
  m = 3;
  out = session->Run({TensorView(DType::kI64, {}, &m), TensorView(DType::kF32, {4}, x)});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(ToVector((*out)[0]), (std::vector<float>{9, 9, 9, 9}));
}

TEST(DeadlineTest, ADeadlineLongEnoughChangesNothing) {
  SessionOptions options;
  options.run_deadline_ms = 60'000;
  auto session = CpuSession(LoopModel(LoopForm::kBoth, /*scan=*/true), options);
  LoopInputs five(5);
  auto out = session->Run(five.views());
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(ToVector((*out)[0]), (std::vector<float>{6, 7, 8, 9}));
  EXPECT_EQ((*out)[1].shape, (std::vector<int64_t>{5, 4}));
}

// Without a deadline, the per-run budget of subgraph runs ends every Loop
// form, nested loops included (they count every inner iteration), with
// RESOURCE_EXHAUSTED; the budget starts afresh with each run.
TEST(BodyRunsTest, EveryLoopFormAndNestedLoopsEndAtTheBudget) {
  SessionOptions options;
  options.max_body_runs = 5000;
  for (LoopForm form : {LoopForm::kTripCount, LoopForm::kCond, LoopForm::kBoth, LoopForm::kNeither}) {
    SCOPED_TRACE(static_cast<int>(form));
    auto session = CpuSession(LoopModel(form, /*scan=*/true), options);
    ASSERT_NE(session, nullptr);
    LoopInputs forever(kHuge);
    auto out = session->Run(forever.views());
    ASSERT_EQ(out.status().code(), absl::StatusCode::kResourceExhausted) << out.status();
    EXPECT_THAT(out.status().message(), HasSubstr("5000 subgraph runs"));
    if (form == LoopForm::kTripCount || form == LoopForm::kBoth) {
      for (int run = 0; run < 3; ++run) {  // 4000 trips each: within a fresh budget every time
        LoopInputs many(4000);
        auto again = session->Run(many.views());
        ASSERT_TRUE(again.ok()) << again.status();
        EXPECT_EQ(ToVector((*again)[0]), (std::vector<float>{4001, 4002, 4003, 4004}));
      }
    }
  }
  auto nested = CpuSession(NestedLoopModel(), options);
  int64_t m = 100;  // 100 outer + 10,000 inner trips
  float x[4] = {0, 0, 0, 0};
  auto out = nested->Run({TensorView(DType::kI64, {}, &m), TensorView(DType::kF32, {4}, x)});
  ASSERT_EQ(out.status().code(), absl::StatusCode::kResourceExhausted) << out.status();
  m = 50;  // 50 + 2500
  out = nested->Run({TensorView(DType::kI64, {}, &m), TensorView(DType::kF32, {4}, x)});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(ToVector((*out)[0]), (std::vector<float>{2500, 2500, 2500, 2500}));
}

TEST(BodyRunsTest, DefaultAndRefusedValues) {
  EXPECT_EQ(SessionOptions().max_body_runs, 10'000'000);
  SessionOptions options;
  options.device = Device::kCpu;
  options.max_body_runs = -1;
  auto s = Session::Create(LoopModel(LoopForm::kBoth), options);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.status().message(), HasSubstr("max_body_runs must be >= 0"));
}

TEST(DeadlineTest, NegativeDeadlineIsRefused) {
  SessionOptions options;
  options.device = Device::kCpu;
  options.run_deadline_ms = -1;
  auto s = Session::Create(LoopModel(LoopForm::kTripCount), options);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(CancellationTest, CancelFromAnotherThreadStopsTheRunAndResetLetsRunsGoOn) {
  auto token = std::make_shared<CancellationToken>();
  SessionOptions options;
  options.cancellation = token;
  auto session = CpuSession(LoopModel(LoopForm::kNeither), options);
  std::thread canceller([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    token->Cancel();
  });
  LoopInputs forever(kHuge);
  const auto start = std::chrono::steady_clock::now();
  auto out = session->Run(forever.views());
  canceller.join();
  EXPECT_LT(SecondsSince(start), 10.0);
  ASSERT_EQ(out.status().code(), absl::StatusCode::kCancelled) << out.status();
  EXPECT_THAT(out.status().message(), HasSubstr("cancelled"));

  // Still cancelled: the next run stops at once.
  auto cancelled = session->Run(forever.views());
  EXPECT_EQ(cancelled.status().code(), absl::StatusCode::kCancelled);

  token->Reset();
  auto session2 = CpuSession(LoopModel(LoopForm::kTripCount), options);
  LoopInputs three(3);
  auto again = session2->Run(three.views());
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(ToVector((*again)[0]), (std::vector<float>{4, 5, 6, 7}));
}

TEST(CancellationTest, OneTokenStopsSeveralSessions) {
  auto token = std::make_shared<CancellationToken>();
  SessionOptions options;
  options.cancellation = token;
  auto model = LoopModel(LoopForm::kTripCount);
  auto a = CpuSession(model, options);
  auto b = CpuSession(model, options);
  absl::Status sa, sb;
  std::thread ta([&] {
    LoopInputs in(kHuge);
    sa = a->Run(in.views()).status();
  });
  std::thread tb([&] {
    LoopInputs in(kHuge);
    sb = b->Run(in.views()).status();
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  token->Cancel();
  ta.join();
  tb.join();
  EXPECT_EQ(sa.code(), absl::StatusCode::kCancelled) << sa;
  EXPECT_EQ(sb.code(), absl::StatusCode::kCancelled) << sb;
}

// RunInto and RunValues are bounded the same way.
TEST(CancellationTest, RunIntoAndRunValuesStopToo) {
  SessionOptions options;
  options.run_deadline_ms = 50;
  auto session = CpuSession(LoopModel(LoopForm::kTripCount), options);
  LoopInputs forever(kHuge);
  float y[4];
  absl::Status into = session->RunInto(forever.views(), {TensorView(DType::kF32, {4}, y)});
  EXPECT_EQ(into.code(), absl::StatusCode::kDeadlineExceeded) << into;
  std::vector<Value> values = {Value(testing::ScalarI64(kHuge)), Value(*Tensor::Create(DType::kBool, {})),
                               Value(testing::TensorF32({4}, {1, 2, 3, 4}))};
  values[1].tensor().view().as<uint8_t>()[0] = 1;
  auto out = session->RunValues(values);
  EXPECT_EQ(out.status().code(), absl::StatusCode::kDeadlineExceeded) << out.status();
}

// The CUDA Loop (on the emulated device) stops the same way, carried values
// only and with scan outputs: a session that can be stopped keeps its loops
// host-driven (a WHILE node's trips run without the host's per-trip check),
// and runs on afterwards. A cancellation token stops it too.
TEST(DeadlineTest, CudaLoopStopsAtTheDeadline) {
  for (bool scan : {false, true}) {
    SCOPED_TRACE(scan ? "with scan outputs" : "carried values only");
    SessionOptions options;
    options.run_deadline_ms = 100;
    auto session =
        internal::CreateSessionOnDevice(LoopModel(LoopForm::kTripCount, scan), options, cuda::NewEmulatedDevice());
    ASSERT_TRUE(session.ok()) << session.status();
    LoopInputs forever(kHuge);
    const auto start = std::chrono::steady_clock::now();
    auto out = (*session)->Run(forever.views());
    EXPECT_LT(SecondsSince(start), 10.0);
    ASSERT_EQ(out.status().code(), absl::StatusCode::kDeadlineExceeded) << out.status();
    LoopInputs two(2);
    auto again = (*session)->Run(two.views());
    ASSERT_TRUE(again.ok()) << again.status();
    EXPECT_EQ(ToVector((*again)[0]), (std::vector<float>{3, 4, 5, 6}));
    if (scan) EXPECT_EQ(ToVector((*again)[1]), (std::vector<float>{1, 2, 3, 4, 2, 3, 4, 5}));
    EXPECT_EQ((*session)->stats().control_flow_in_graphs, 0);
    EXPECT_GT((*session)->stats().control_flow_host_driven, 0);
  }
}

TEST(CancellationTest, CudaLoopStopsWhenCancelled) {
  auto token = std::make_shared<CancellationToken>();
  SessionOptions options;
  options.cancellation = token;
  auto session = internal::CreateSessionOnDevice(LoopModel(LoopForm::kTripCount), options, cuda::NewEmulatedDevice());
  ASSERT_TRUE(session.ok()) << session.status();
  absl::Status status;
  std::thread t([&] {
    LoopInputs forever(kHuge);
    status = (*session)->Run(forever.views()).status();
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  token->Cancel();
  t.join();
  EXPECT_EQ(status.code(), absl::StatusCode::kCancelled) << status;
}

// A Loop with no carried values (ONNX's Loop(M, "") that only scans) is
// valid, also with its trailing optional inputs left out (Loop(M), Loop()).
std::shared_ptr<const Model> ScanOnlyLoop(std::vector<std::string> loop_inputs) {
  ModelBuilder b;
  b.AddInput("m", DType::kI64, {});
  const int body = b.AddSubgraph("body");
  b.AddInput("i", DType::kI64, {});
  b.AddInput("ci", DType::kBool, {});
  b.AddOp("Identity", {"ci"}, {"co"});
  b.AddOp("Identity", {"i"}, {"i_scan"});
  b.AddOutput("co");
  b.AddOutput("i_scan");
  b.SetSubgraph(0);
  b.AddOp("Loop", std::move(loop_inputs), {"s"}, {{"body", SubgraphRef{body}}});
  b.AddOutput("s");
  return LoadOrDie(b.Finish());
}

TEST(LoopPolicyTest, LoopWithoutCarriedValuesRuns) {
  for (const std::vector<std::string>& loop_inputs : {std::vector<std::string>{"m", ""}, std::vector<std::string>{"m"}}) {
    SCOPED_TRACE(loop_inputs.size());
    auto session = CpuSession(ScanOnlyLoop(loop_inputs), {});
    ASSERT_NE(session, nullptr);
    int64_t m = 4;
    auto out = session->Run({TensorView(DType::kI64, {}, &m)});
    ASSERT_TRUE(out.ok()) << out.status();
    ASSERT_EQ((*out)[0].shape, (std::vector<int64_t>{4}));
    const int64_t* s = (*out)[0].as<const int64_t>();
    EXPECT_EQ(std::vector<int64_t>(s, s + 4), (std::vector<int64_t>{0, 1, 2, 3}));
  }
  // Loop() runs until the policy stops it; here the deadline does.
  SessionOptions options;
  options.run_deadline_ms = 50;
  auto session = CpuSession(ScanOnlyLoop({}), options);
  ASSERT_NE(session, nullptr);
  int64_t m = 4;
  auto out = session->Run({TensorView(DType::kI64, {}, &m)});
  EXPECT_EQ(out.status().code(), absl::StatusCode::kDeadlineExceeded) << out.status();
}

// The iteration and scan-memory bounds, checked where every Loop kernel
// passes (running 10^8 iterations or filling 4 GiB is too slow for a test).
class LoopBoundsTest : public ::testing::Test {
 protected:
  LoopBoundsTest() {
    node_.type = "Loop";
    node_.name = "forever";
  }
  ir::Node node_;
};

// A host that must not be reached: the policy refuses before it.
class NoHost : public ir::KernelContext::Host {
 public:
  absl::StatusOr<TensorView*> AllocateOutput(int, DType, std::vector<int64_t>) override {
    return absl::InternalError("unexpected");
  }
  absl::StatusOr<std::vector<TensorView>> RunSubgraph(int, absl::Span<const TensorView>) override {
    ++calls;
    return std::vector<TensorView>{};
  }
  int calls = 0;
};

TEST_F(LoopBoundsTest, IterationLimitIsResourceExhausted) {
  NoHost host;
  ir::KernelContext ctx(node_, {}, {}, &host);
  backends::LoopBodyScalars scalars;
  EXPECT_TRUE(backends::RunLoopBody(ctx, 1, backends::kMaxLoopIterations - 1, {}, scalars).ok());
  auto past = backends::RunLoopBody(ctx, 1, backends::kMaxLoopIterations, {}, scalars);
  EXPECT_EQ(past.status().code(), absl::StatusCode::kResourceExhausted) << past.status();
  EXPECT_THAT(past.status().message(), HasSubstr("forever"));
  EXPECT_EQ(host.calls, 1);
}

TEST_F(LoopBoundsTest, ScanBytesLimitIsResourceExhausted) {
  ir::KernelContext ctx(node_, {}, {}, nullptr);
  const uint64_t limit = backends::kMaxLoopScanBytes;
  EXPECT_TRUE(backends::CheckScanBytes(ctx, 0, 0, limit).ok());
  EXPECT_TRUE(backends::CheckScanBytes(ctx, 7, limit - 16, 16).ok());
  absl::Status over = backends::CheckScanBytes(ctx, 8, limit - 16, 17);
  EXPECT_EQ(over.code(), absl::StatusCode::kResourceExhausted) << over;
  EXPECT_THAT(over.message(), HasSubstr("scan outputs"));
  // No wrap-around for sizes near 2^64.
  EXPECT_FALSE(backends::CheckScanBytes(ctx, 1, limit, UINT64_MAX).ok());
  EXPECT_FALSE(backends::CheckScanBytes(ctx, 1, UINT64_MAX, 1).ok());
}

// Not a check: the cost of the per-step deadline and token checks. Run with
// --gtest_also_run_disabled_tests --gtest_filter='*MeasureCheckOverhead*'.
TEST(DeadlineTest, DISABLED_MeasureCheckOverhead) {
  // A chain of 1000 Adds on one element, and a Loop of 10^5 one-step trips.
  ModelBuilder b;
  b.AddInput("x", DType::kF32, {1});
  std::string prev = "x";
  for (int i = 0; i < 1000; ++i) {
    const std::string next = "a" + std::to_string(i);
    b.AddOp("Add", {prev, "x"}, {next});
    prev = next;
  }
  b.AddOutput(prev);
  auto chain = LoadOrDie(b.Finish());
  auto loop = LoopModel(LoopForm::kTripCount);
  auto token = std::make_shared<CancellationToken>();
  for (int variant = 0; variant < 3; ++variant) {
    SessionOptions options;
    if (variant >= 1) options.run_deadline_ms = 3'600'000;
    if (variant >= 2) options.cancellation = token;
    auto s = CpuSession(chain, options);
    auto l = CpuSession(loop, options);
    float x = 1;
    (void)s->Run({TensorView(DType::kF32, {1}, &x)});
    auto start = std::chrono::steady_clock::now();
    for (int r = 0; r < 200; ++r) ASSERT_TRUE(s->Run({TensorView(DType::kF32, {1}, &x)}).ok());
    const double step_ns = SecondsSince(start) * 1e9 / (200 * 1000);
    LoopInputs in(100'000);
    (void)l->Run(in.views());
    start = std::chrono::steady_clock::now();
    ASSERT_TRUE(l->Run(in.views()).ok());
    const double trip_ns = SecondsSince(start) * 1e9 / 100'000;
    std::printf("%-22s %7.1f ns per step, %8.1f ns per loop trip\n",
                variant == 0 ? "no deadline, no token" : variant == 1 ? "deadline" : "deadline and token",
                step_ns, trip_ns);
  }
}

}  // namespace
}  // namespace grove
