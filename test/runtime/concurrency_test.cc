// Concurrent misuse: a Session entered from a second thread while a call is in
// progress refuses with FAILED_PRECONDITION instead of corrupting memory.
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <thread>

#include "gmock/gmock.h"
#include "grove/grove.h"
#include "gtest/gtest.h"
#include "test/model_test_util.h"

namespace grove {
namespace {

using ::testing::HasSubstr;
using testing::LoadOrDie;

constexpr char kBusy[] = "session is already running on another thread";

// x f32[batch, 8] -> y = Tanh(x W) with batch in 1..64.
std::shared_ptr<const Model> DenseModel() {
  ModelBuilder b;
  b.AddSymbol("batch", 1, 64);
  b.AddInput("x", DType::kF32, {"batch", 8});
  std::vector<float> w(8 * 8);
  for (size_t i = 0; i < w.size(); ++i) w[i] = std::sin(0.3f * static_cast<float>(i));
  b.AddWeight("w", DType::kF32, {8, 8}, w);
  b.AddOp("MatMul", {"x", "w"}, {"xw"});
  b.AddOp("Tanh", {"xw"}, {"y"});
  b.AddOutput("y");
  return LoadOrDie(b.Finish());
}

// Inputs "m" (i64) and "x" (f32[4]); a Loop of m trips adds 1 to x.
std::shared_ptr<const Model> LoopModel() {
  ModelBuilder b;
  b.AddInput("m", DType::kI64, {});
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
  b.SetSubgraph(0);
  b.AddOp("Loop", {"m", "", "x"}, {"y"}, {{"body", SubgraphRef{body}}});
  b.AddOutput("y");
  return LoadOrDie(b.Finish());
}

std::unique_ptr<Session> CpuSession(std::shared_ptr<const Model> model, SessionOptions options = {}) {
  options.device = Device::kCpu;
  absl::StatusOr<std::unique_ptr<Session>> s = Session::Create(std::move(model), options);
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? *std::move(s) : nullptr;
}

std::vector<float> Input(int batch, int seed) {
  std::vector<float> x(static_cast<size_t>(batch) * 8);
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::cos(0.1f * static_cast<float>(i) + static_cast<float>(seed));
  return x;
}

// Deterministic: while one thread is inside a long run, every entry point
// that mutates the session refuses from another thread, and the run is not
// disturbed; afterwards the session works from either thread.
TEST(ConcurrencyTest, SecondThreadIsRefusedWhileARunIsInProgress) {
  auto token = std::make_shared<CancellationToken>();
  SessionOptions options;
  options.cancellation = token;
  options.max_body_runs = 0;  // the long run ends only by the token
  auto session = CpuSession(LoopModel(), options);
  ASSERT_NE(session, nullptr);
  absl::Status long_run;
  std::thread runner([&] {
    int64_t m = int64_t{1} << 62;
    float x[4] = {0, 0, 0, 0};
    do {  // refused only while the main thread's short run is inside
      long_run = session->Run({TensorView(DType::kI64, {}, &m), TensorView(DType::kF32, {4}, x)}).status();
    } while (long_run.code() == absl::StatusCode::kFailedPrecondition);
  });
  int64_t m = 2;
  float x[4] = {1, 1, 1, 1};
  const std::vector<TensorView> inputs = {TensorView(DType::kI64, {}, &m), TensorView(DType::kF32, {4}, x)};
  // Wait until the runner is inside (bounded: the runner never ends by itself).
  absl::Status refused;
  const auto start = std::chrono::steady_clock::now();
  while (std::chrono::steady_clock::now() - start < std::chrono::seconds(30)) {
    refused = session->Run(inputs).status();
    if (refused.code() == absl::StatusCode::kFailedPrecondition) break;
  }
  EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition) << refused;
  EXPECT_THAT(refused.message(), HasSubstr(kBusy));
  EXPECT_THAT(refused.message(), HasSubstr("a Session is used by one thread at a time"));
  float y[4];
  EXPECT_EQ(session->RunInto(inputs, {TensorView(DType::kF32, {4}, y)}).code(), absl::StatusCode::kFailedPrecondition);
  std::vector<Value> values = {Value(testing::ScalarI64(2)), Value(testing::TensorF32({4}, {1, 1, 1, 1}))};
  EXPECT_EQ(session->RunValues(values).status().code(), absl::StatusCode::kFailedPrecondition);
  std::vector<std::vector<int64_t>> shapes = {{}, {4}};
  EXPECT_EQ(session->Reshape(shapes).status().code(), absl::StatusCode::kFailedPrecondition);
  token->Cancel();
  runner.join();
  EXPECT_EQ(long_run.code(), absl::StatusCode::kCancelled) << long_run;
  token->Reset();

  auto out = session->Run(inputs);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(testing::ToVector((*out)[0]), (std::vector<float>{3, 3, 3, 3}));
}

// Two threads hammer one session: every call either returns the right
// result or the busy error, never a wrong result or a crash.
TEST(ConcurrencyTest, TwoThreadsHammeringOneSessionGetRightResultsOrTheBusyError) {
  auto model = DenseModel();
  auto session = CpuSession(model);
  ASSERT_NE(session, nullptr);
  // References from a session of its own.
  auto reference = CpuSession(model);
  struct Case {
    int batch;
    std::vector<float> x;
    std::vector<float> want;
  };
  std::vector<Case> cases;
  for (int k = 0; k < 4; ++k) {
    const int batch = 1 + 13 * k;
    Case c{batch, Input(batch, k), {}};
    auto r = reference->Run({TensorView(DType::kF32, {batch, 8}, c.x.data())});
    ASSERT_TRUE(r.ok()) << r.status();
    c.want = testing::ToVector((*r)[0]);
    cases.push_back(std::move(c));
  }

  constexpr int kCalls = 2000;
  std::atomic<int> ok{0}, busy{0}, wrong{0}, other{0};
  auto hammer = [&](int thread) {
    for (int i = 0; i < kCalls; ++i) {
      const Case& c = cases[(i + thread) % cases.size()];
      const TensorView in(DType::kF32, {c.batch, 8}, c.x.data());
      std::vector<float> got;
      absl::Status status;
      if ((i + thread) % 2 == 0) {
        // Results copied inside the call: they cannot change afterwards.
        got.resize(c.want.size());
        status = session->RunInto({in}, {TensorView(DType::kF32, {c.batch, 8}, got.data())});
      } else {
        std::vector<Value> values = {Value(*Tensor::CopyOf(in))};
        absl::StatusOr<std::vector<Value>> out = session->RunValues(values);
        status = out.status();
        if (out.ok()) got = testing::ToVector((*out)[0].tensor().view());
      }
      if (status.ok()) {
        if (got == c.want) {
          ++ok;
        } else {
          ++wrong;
        }
      } else if (status.code() == absl::StatusCode::kFailedPrecondition &&
                 status.message().find(kBusy) != std::string::npos) {
        ++busy;
      } else {
        ++other;
        ADD_FAILURE() << status;
      }
    }
  };
  std::thread a(hammer, 0), b(hammer, 1);
  a.join();
  b.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(other.load(), 0);
  EXPECT_EQ(ok.load() + busy.load(), 2 * kCalls);
  EXPECT_GT(ok.load(), 0);
  // Overlap is likely but not certain on a loaded machine; the deterministic
  // test above proves the refusal.
  std::printf("two threads, %d calls: %d succeeded, %d refused as busy\n", 2 * kCalls, ok.load(), busy.load());
  // The session is fine afterwards.
  std::vector<float> got(cases[0].want.size());
  ASSERT_TRUE(session->RunInto({TensorView(DType::kF32, {cases[0].batch, 8}, cases[0].x.data())},
                               {TensorView(DType::kF32, {cases[0].batch, 8}, got.data())})
                  .ok());
  EXPECT_EQ(got, cases[0].want);
}

}  // namespace
}  // namespace grove
