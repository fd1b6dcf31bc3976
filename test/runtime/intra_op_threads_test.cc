// SessionOptions::intra_op_threads: the CPU backend's pool of its own
// (lib/backends/cpu/thread_pool.h), ParallelFor's split, and sessions whose
// large elementwise, reduction, norm and data-movement kernels give the same
// bytes at 1, 2 and 3 threads (oneDNN's Conv within its bounds), own exactly
// N - 1 threads each, and run side by side from two threads.
#include <dirent.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "grove/grove.h"
#include "gtest/gtest.h"
#include "lib/backends/cpu/parallel_for.h"
#include "lib/backends/cpu/thread_pool.h"
#include "test/model_test_util.h"

namespace grove {
namespace {

using ::testing::HasSubstr;
using testing::LoadOrDie;
using testing::RandomF32;
using testing::TensorF32;

// The threads of this process, as the kernel lists them.
int ProcessThreads() {
  DIR* dir = opendir("/proc/self/task");
  if (dir == nullptr) return -1;
  int n = 0;
  while (dirent* e = readdir(dir)) {
    if (e->d_name[0] != '.') ++n;
  }
  closedir(dir);
  return n;
}

// The threads of this process named `name` (/proc/self/task/*/comm).
int ThreadsNamed(const std::string& name) {
  DIR* dir = opendir("/proc/self/task");
  if (dir == nullptr) return -1;
  int n = 0;
  while (dirent* e = readdir(dir)) {
    if (e->d_name[0] == '.') continue;
    FILE* f = std::fopen((std::string("/proc/self/task/") + e->d_name + "/comm").c_str(), "r");
    if (f == nullptr) continue;
    char comm[64] = {};
    if (std::fgets(comm, sizeof(comm), f) != nullptr && std::string(comm) == name + "\n") ++n;
    std::fclose(f);
  }
  closedir(dir);
  return n;
}

// --- the pool ---------------------------------------------------------------

TEST(ThreadPool, RunsEveryTaskOnceOnItsOwnThreads) {
  absl::StatusOr<std::unique_ptr<cpu::ThreadPool>> pool = cpu::ThreadPool::Create(3);
  ASSERT_TRUE(pool.ok()) << pool.status();
  EXPECT_EQ((*pool)->num_threads(), 3);

  // Three tasks that each wait until three distinct threads hold one: the
  // caller and both workers take part.
  std::mutex mu;
  std::set<std::thread::id> arrived;
  (*pool)->Run(3, [&](int64_t) {
    {
      std::lock_guard<std::mutex> lock(mu);
      arrived.insert(std::this_thread::get_id());
    }
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    for (;;) {
      {
        std::lock_guard<std::mutex> lock(mu);
        if (arrived.size() >= 3) return;
      }
      if (std::chrono::steady_clock::now() > give_up) return;
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
  });
  EXPECT_EQ(arrived.size(), 3u);
  EXPECT_TRUE(arrived.count(std::this_thread::get_id()));

  // Many tasks: each exactly once, on at most the pool's three threads.
  for (int round = 0; round < 50; ++round) {
    std::vector<std::atomic<int>> hits(1000);
    std::set<std::thread::id> seen;
    (*pool)->Run(1000, [&](int64_t i) {
      hits[i].fetch_add(1);
      std::lock_guard<std::mutex> lock(mu);
      seen.insert(std::this_thread::get_id());
    });
    for (const std::atomic<int>& h : hits) ASSERT_EQ(h.load(), 1);
    ASSERT_LE(seen.size(), 3u);
  }
}

// A worker that takes a task and is then held off its core keeps the caller
// waiting: the pool counts a late join and runs the next jobs on the caller
// alone for a while (a sleeping task stands in for the held-off worker).
TEST(ThreadPool, LateJoinRunsTheNextJobsOnTheCaller) {
  absl::StatusOr<std::unique_ptr<cpu::ThreadPool>> pool = cpu::ThreadPool::Create(2);
  ASSERT_TRUE(pool.ok()) << pool.status();
  const std::thread::id caller = std::this_thread::get_id();
  std::atomic<bool> worker_started{false};
  (*pool)->Run(2, [&](int64_t) {
    if (std::this_thread::get_id() != caller) {
      worker_started.store(true);
      std::this_thread::sleep_for(std::chrono::milliseconds(30));
      return;
    }
    // The caller's task ends once the worker holds the other one.
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (!worker_started.load() && std::chrono::steady_clock::now() < give_up) std::this_thread::yield();
  });
  ASSERT_TRUE(worker_started.load());
  EXPECT_EQ((*pool)->late_joins(), 1);
  // The backoff (at least 5 ms) has begun: this job runs on the caller only.
  std::set<std::thread::id> seen;
  std::mutex mu;
  (*pool)->Run(64, [&](int64_t) {
    std::lock_guard<std::mutex> lock(mu);
    seen.insert(std::this_thread::get_id());
  });
  EXPECT_EQ(seen, std::set<std::thread::id>{caller});
}

TEST(ThreadPool, NestedRunRunsInline) {
  absl::StatusOr<std::unique_ptr<cpu::ThreadPool>> pool = cpu::ThreadPool::Create(2);
  ASSERT_TRUE(pool.ok());
  std::atomic<int> inner{0};
  (*pool)->Run(4, [&](int64_t) {
    const std::thread::id me = std::this_thread::get_id();
    (*pool)->Run(5, [&](int64_t) {
      EXPECT_EQ(std::this_thread::get_id(), me);
      inner.fetch_add(1);
    });
  });
  EXPECT_EQ(inner.load(), 20);
  int calls = 0;
  (*pool)->Run(0, [&](int64_t) { ++calls; });
  EXPECT_EQ(calls, 0);
}

TEST(ThreadPool, StartsExactlyItsWorkersAndStopsThem) {
  const int before = ProcessThreads();
  ASSERT_GT(before, 0);
  {
    absl::StatusOr<std::unique_ptr<cpu::ThreadPool>> pool = cpu::ThreadPool::Create(4);
    ASSERT_TRUE(pool.ok());
    EXPECT_EQ(ProcessThreads(), before + 3);
    EXPECT_EQ(ThreadsNamed("grove-intra-op"), 3);
  }
  EXPECT_EQ(ProcessThreads(), before);
  EXPECT_EQ(ThreadsNamed("grove-intra-op"), 0);
  EXPECT_FALSE(cpu::ThreadPool::Create(0).ok());
  EXPECT_GE(cpu::AvailableCpus(), 1);
}

// Counts Run calls; runs the tasks in order on the caller.
class CountingThreads : public ir::IntraOpThreads {
 public:
  explicit CountingThreads(int n) : n_(n) {}
  int num_threads() const override { return n_; }
  void Run(int64_t tasks, absl::FunctionRef<void(int64_t)> task) override {
    ++runs;
    for (int64_t i = 0; i < tasks; ++i) task(i);
  }
  int runs = 0;

 private:
  int n_;
};

TEST(ParallelFor, CoversTheRangeOnceInRangesOfAtLeastTheGrain) {
  CountingThreads threads(3);
  for (int64_t n : {int64_t{1}, int64_t{99}, int64_t{100}, int64_t{199}, int64_t{200}, int64_t{1001},
                    int64_t{123457}}) {
    SCOPED_TRACE(n);
    std::vector<int> hits(static_cast<size_t>(n), 0);
    int64_t ranges = 0, smallest = n;
    threads.runs = 0;
    cpu::ParallelFor(&threads, n, 100, [&](int64_t begin, int64_t end) {
      ++ranges;
      smallest = std::min(smallest, end - begin);
      for (int64_t i = begin; i < end; ++i) ++hits[i];
    });
    EXPECT_TRUE(std::all_of(hits.begin(), hits.end(), [](int h) { return h == 1; }));
    if (n < 200) {
      // Below two grains: one call on the caller, the pool never asked.
      EXPECT_EQ(ranges, 1);
      EXPECT_EQ(threads.runs, 0);
    } else {
      EXPECT_EQ(threads.runs, 1);
      EXPECT_GE(smallest, 100);
      EXPECT_LE(ranges, 3 * cpu::kRangesPerThread);
    }
  }
  // No pool, or a pool of one: inline.
  int calls = 0;
  cpu::ParallelFor(nullptr, 1 << 20, 1, [&](int64_t begin, int64_t end) {
    ++calls;
    EXPECT_EQ(begin, 0);
    EXPECT_EQ(end, 1 << 20);
  });
  CountingThreads one(1);
  cpu::ParallelFor(&one, 1 << 20, 1, [&](int64_t, int64_t) { ++calls; });
  EXPECT_EQ(calls, 2);
  EXPECT_EQ(one.runs, 0);
}

// --- sessions ---------------------------------------------------------------

constexpr int64_t kRows = 300, kCols = 517;  // 155,100 elements: several grains, odd sizes

// x f32[rows, cols] through the kernels that split their work: elementwise
// (broadcast, unary, compare, Where, Cast, Identity), Softmax by rows and by
// columns, LayerNormalization, reductions over the inner and the outer dim,
// Transpose, Slice, Concat along both axes, Expand, Tile, and a variadic Sum.
std::shared_ptr<const Model> KernelMixModel() {
  ModelBuilder b;
  b.AddSymbol("rows", 1, 4096);
  b.AddInput("x", DType::kF32, {"rows", kCols});
  b.AddWeight("bias", DType::kF32, {kCols}, RandomF32(kCols, 7));
  b.AddWeight("scale", DType::kF32, {kCols}, RandomF32(kCols, 8));
  b.AddWeight("zero", DType::kF32, {}, std::vector<float>{0.0f});
  b.AddWeight("axis1", DType::kI64, {1}, std::vector<int64_t>{1});
  b.AddWeight("axis0", DType::kI64, {1}, std::vector<int64_t>{0});
  b.AddWeight("starts", DType::kI64, {2}, std::vector<int64_t>{1, 3});
  b.AddWeight("ends", DType::kI64, {2}, std::vector<int64_t>{1000000, 500});
  b.AddWeight("axes", DType::kI64, {2}, std::vector<int64_t>{0, 1});
  b.AddWeight("steps", DType::kI64, {2}, std::vector<int64_t>{2, 3});
  b.AddWeight("expand_to", DType::kI64, {3}, std::vector<int64_t>{2, 1, kCols});
  b.AddWeight("repeats", DType::kI64, {2}, std::vector<int64_t>{2, 1});
  b.AddOp("Add", {"x", "bias"}, {"add"});
  b.AddOp("Mul", {"add", "x"}, {"mul"});
  b.AddOp("Div", {"x", "scale"}, {"div"});
  b.AddOp("Relu", {"mul"}, {"relu"});
  b.AddOp("Sigmoid", {"add"}, {"sigmoid"});
  b.AddOp("Tanh", {"mul"}, {"tanh"});
  b.AddOp("Exp", {"x"}, {"exp"});
  b.AddOp("Neg", {"x"}, {"neg"});
  b.AddOp("Greater", {"x", "zero"}, {"positive"});
  b.AddOp("Where", {"positive", "x", "add"}, {"where"});
  b.AddOp("Cast", {"x"}, {"as_f64"}, {{"to", int64_t{11}}});
  b.AddOp("Identity", {"x"}, {"copy"});
  b.AddOp("Softmax", {"add"}, {"softmax_rows"}, {{"axis", int64_t{-1}}});
  b.AddOp("Softmax", {"add"}, {"softmax_cols"}, {{"axis", int64_t{0}}});
  b.AddOp("LogSoftmax", {"mul"}, {"log_softmax"}, {{"axis", int64_t{1}}});
  b.AddOp("LayerNormalization", {"x", "scale", "bias"}, {"layer_norm"}, {{"axis", int64_t{-1}}});
  b.AddOp("ReduceSum", {"x", "axis1"}, {"sum_rows"}, {{"keepdims", int64_t{0}}});
  b.AddOp("ReduceSum", {"x", "axis0"}, {"sum_cols"}, {{"keepdims", int64_t{1}}});
  b.AddOp("ReduceMean", {"mul", "axis1"}, {"mean_rows"});
  b.AddOp("ReduceMax", {"x", "axis0"}, {"max_cols"});
  b.AddOp("Transpose", {"x"}, {"transposed"}, {{"perm", std::vector<int64_t>{1, 0}}});
  b.AddOp("Slice", {"x", "starts", "ends", "axes", "steps"}, {"sliced"});
  b.AddOp("Concat", {"x", "add", "relu"}, {"concat_cols"}, {{"axis", int64_t{1}}});
  b.AddOp("Concat", {"x", "add"}, {"concat_rows"}, {{"axis", int64_t{0}}});
  b.AddOp("Expand", {"x", "expand_to"}, {"expanded"});
  b.AddOp("Tile", {"x", "repeats"}, {"tiled"});
  b.AddOp("Sum", {"x", "add", "bias"}, {"sum3"});
  for (const char* out : {"add", "mul", "div", "relu", "sigmoid", "tanh", "exp", "neg", "positive", "where", "as_f64",
                          "copy", "softmax_rows", "softmax_cols", "log_softmax", "layer_norm", "sum_rows", "sum_cols",
                          "mean_rows", "max_cols", "transposed", "sliced", "concat_cols", "concat_rows", "expanded",
                          "tiled", "sum3"}) {
    b.AddOutput(out);
  }
  return LoadOrDie(b.Finish());
}

std::unique_ptr<Session> SessionWithThreads(std::shared_ptr<const Model> model, int threads) {
  SessionOptions options;
  options.device = Device::kCpu;
  options.intra_op_threads = threads;
  absl::StatusOr<std::unique_ptr<Session>> s = Session::Create(std::move(model), options);
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? *std::move(s) : nullptr;
}

// Every output's bytes.
std::vector<std::string> RunBytes(Session& session, const Tensor& x) {
  absl::StatusOr<std::vector<TensorView>> out = session.Run({x.view()});
  EXPECT_TRUE(out.ok()) << out.status();
  std::vector<std::string> bytes;
  if (!out.ok()) return bytes;
  for (const TensorView& v : *out) bytes.emplace_back(static_cast<const char*>(v.data), v.byte_size());
  return bytes;
}

TEST(IntraOpThreads, KernelsGiveTheSameBytesAtOneTwoAndThreeThreads) {
  std::shared_ptr<const Model> model = KernelMixModel();
  for (int64_t rows : {kRows, int64_t{1}, int64_t{7}}) {  // large, then decode-sized (one thread)
    SCOPED_TRACE(rows);
    const Tensor x = TensorF32({rows, kCols}, RandomF32(static_cast<size_t>(rows * kCols), 11));
    std::unique_ptr<Session> one = SessionWithThreads(model, 1);
    ASSERT_NE(one, nullptr);
    const std::vector<std::string> want = RunBytes(*one, x);
    ASSERT_EQ(want.size(), 27u);
    for (int threads : {2, 3}) {
      SCOPED_TRACE(threads);
      std::unique_ptr<Session> s = SessionWithThreads(model, threads);
      ASSERT_NE(s, nullptr);
      for (int run = 0; run < 3; ++run) {
        const std::vector<std::string> got = RunBytes(*s, x);
        ASSERT_EQ(got.size(), want.size());
        for (size_t i = 0; i < want.size(); ++i) {
          EXPECT_TRUE(got[i] == want[i]) << "output " << model->outputs()[i].name << " differs from 1 thread's";
        }
      }
    }
  }
}

// x f32[5, 7, 60, 60] (126,000 elements) through the kernels that split
// NCHW tensors: InstanceNormalization by (n, c) rows, Softmax over the
// channels (columns of [5, 7, 3600]), reductions over the middle and the
// leading dims, Clip, Pow, Not, and a variadic Max with a broadcast input.
// 35 rows of 3,600: InstanceNorm's ranges start at rows 12 and 24, inside a
// batch's channels.
std::shared_ptr<const Model> ChannelMixModel() {
  ModelBuilder b;
  b.AddInput("x", DType::kF32, {5, 7, 60, 60});
  b.AddWeight("scale", DType::kF32, {7}, RandomF32(7, 21));
  b.AddWeight("bias", DType::kF32, {7}, RandomF32(7, 22));
  b.AddWeight("lo", DType::kF32, {}, std::vector<float>{-0.5f});
  b.AddWeight("hi", DType::kF32, {}, std::vector<float>{0.25f});
  b.AddWeight("two", DType::kF32, {}, std::vector<float>{2.0f});
  b.AddWeight("zero", DType::kF32, {}, std::vector<float>{0.0f});
  b.AddWeight("row", DType::kF32, {60}, RandomF32(60, 23));
  b.AddWeight("spatial", DType::kI64, {2}, std::vector<int64_t>{2, 3});
  b.AddWeight("batch", DType::kI64, {1}, std::vector<int64_t>{0});
  b.AddOp("InstanceNormalization", {"x", "scale", "bias"}, {"instance_norm"}, {{"epsilon", 1e-3}});
  b.AddOp("Softmax", {"x"}, {"softmax_channels"}, {{"axis", int64_t{1}}});
  b.AddOp("ReduceLogSumExp", {"x", "spatial"}, {"logsumexp"});
  b.AddOp("ReduceSum", {"x", "batch"}, {"sum_batch"}, {{"keepdims", int64_t{0}}});
  b.AddOp("ReduceMin", {"x", "spatial"}, {"min_spatial"});
  b.AddOp("Clip", {"x", "lo", "hi"}, {"clipped"});
  b.AddOp("Pow", {"x", "two"}, {"squared"});
  b.AddOp("Greater", {"x", "zero"}, {"positive"});
  b.AddOp("Not", {"positive"}, {"not_positive"});
  b.AddOp("Max", {"x", "clipped", "row"}, {"max3"});
  for (const char* out : {"instance_norm", "softmax_channels", "logsumexp", "sum_batch", "min_spatial", "clipped",
                          "squared", "not_positive", "max3"}) {
    b.AddOutput(out);
  }
  return LoadOrDie(b.Finish());
}

TEST(IntraOpThreads, ChannelKernelsGiveTheSameBytesAtOneTwoAndThreeThreads) {
  std::shared_ptr<const Model> model = ChannelMixModel();
  const Tensor x = TensorF32({5, 7, 60, 60}, RandomF32(5 * 7 * 60 * 60, 24));
  std::unique_ptr<Session> one = SessionWithThreads(model, 1);
  ASSERT_NE(one, nullptr);
  const std::vector<std::string> want = RunBytes(*one, x);
  ASSERT_EQ(want.size(), 9u);
  for (int threads : {2, 3}) {
    SCOPED_TRACE(threads);
    std::unique_ptr<Session> s = SessionWithThreads(model, threads);
    ASSERT_NE(s, nullptr);
    const std::vector<std::string> got = RunBytes(*s, x);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) {
      EXPECT_TRUE(got[i] == want[i]) << "output " << model->outputs()[i].name << " differs from 1 thread's";
    }
  }
}

// A Conv big enough to split, through oneDNN (its OpenMP team is the
// session's count): equal to one thread's within float rounding.
TEST(IntraOpThreads, ConvAtSeveralThreadsAgreesWithOneThread) {
  ModelBuilder b;
  b.AddInput("x", DType::kF32, {2, 8, 48, 48});
  b.AddWeight("w", DType::kF32, {16, 8, 3, 3}, RandomF32(16 * 8 * 9, 3));
  b.AddWeight("b", DType::kF32, {16}, RandomF32(16, 4));
  b.AddOp("Conv", {"x", "w", "b"}, {"conv"}, {{"pads", std::vector<int64_t>{1, 1, 1, 1}}});
  b.AddOp("Relu", {"conv"}, {"y"});
  b.AddOutput("y");
  std::shared_ptr<const Model> model = LoadOrDie(b.Finish());
  const Tensor x = TensorF32({2, 8, 48, 48}, RandomF32(2 * 8 * 48 * 48, 5));
  std::unique_ptr<Session> one = SessionWithThreads(model, 1);
  absl::StatusOr<std::vector<TensorView>> want = one->Run({x.view()});
  ASSERT_TRUE(want.ok()) << want.status();
  const std::vector<float> ref = testing::ToVector((*want)[0]);
  for (int threads : {2, 3}) {
    SCOPED_TRACE(threads);
    std::unique_ptr<Session> s = SessionWithThreads(model, threads);
    for (int run = 0; run < 2; ++run) {
      absl::StatusOr<std::vector<TensorView>> got = s->Run({x.view()});
      ASSERT_TRUE(got.ok()) << got.status();
      const std::vector<float> y = testing::ToVector((*got)[0]);
      ASSERT_EQ(y.size(), ref.size());
      for (size_t i = 0; i < y.size(); ++i) {
        // 72 products per output of values in [-1, 1): float sums in another order.
        ASSERT_NEAR(y[i], ref[i], 1e-4f * (1.0f + std::fabs(ref[i]))) << "at " << i;
      }
    }
  }
}

// Each session owns exactly N - 1 threads, started at Create and stopped with
// it; running adds none. Counted by name: a oneDNN step of the model (its
// Softmax) starts OpenMP's own threads, which are not the session's.
TEST(IntraOpThreads, EachSessionOwnsExactlyItsWorkers) {
  std::shared_ptr<const Model> model = KernelMixModel();
  const Tensor x = TensorF32({kRows, kCols}, RandomF32(static_cast<size_t>(kRows * kCols), 12));
  auto workers = [] { return ThreadsNamed("grove-intra-op"); };
  ASSERT_GT(ProcessThreads(), 0);
  const int before = workers();
  {
    std::unique_ptr<Session> a = SessionWithThreads(model, 2);
    EXPECT_EQ(workers(), before + 1);
    std::unique_ptr<Session> b = SessionWithThreads(model, 3);
    EXPECT_EQ(workers(), before + 3);
    std::unique_ptr<Session> c = SessionWithThreads(model, 1);
    EXPECT_EQ(workers(), before + 3);
    for (Session* s : {a.get(), b.get(), c.get()}) RunBytes(*s, x);
    EXPECT_EQ(workers(), before + 3);
  }
  EXPECT_EQ(workers(), before);

  // 0: one thread per CPU this process may run on.
  {
    std::unique_ptr<Session> all = SessionWithThreads(model, 0);
    EXPECT_EQ(workers(), before + cpu::AvailableCpus() - 1);
  }
  EXPECT_EQ(workers(), before);
}

// Two sessions of two threads each, run from two threads at once: each gets
// the single-thread result every time.
TEST(IntraOpThreads, TwoSessionsRunAtOnceFromTwoThreads) {
  std::shared_ptr<const Model> model = KernelMixModel();
  const Tensor x = TensorF32({kRows, kCols}, RandomF32(static_cast<size_t>(kRows * kCols), 13));
  std::unique_ptr<Session> one = SessionWithThreads(model, 1);
  const std::vector<std::string> want = RunBytes(*one, x);
  ASSERT_FALSE(want.empty());
  std::unique_ptr<Session> sessions[2] = {SessionWithThreads(model, 2), SessionWithThreads(model, 2)};
  std::atomic<int> mismatches{0}, runs{0};
  std::vector<std::thread> callers;
  for (int t = 0; t < 2; ++t) {
    callers.emplace_back([&, t] {
      for (int i = 0; i < 15; ++i) {
        if (RunBytes(*sessions[t], x) != want) mismatches.fetch_add(1);
        runs.fetch_add(1);
      }
    });
  }
  for (std::thread& c : callers) c.join();
  EXPECT_EQ(runs.load(), 30);
  EXPECT_EQ(mismatches.load(), 0);
}

TEST(IntraOpThreads, BadCountsAreErrorsAtCreate) {
  std::shared_ptr<const Model> model = KernelMixModel();
  for (int bad : {-1, -100, kMaxIntraOpThreads + 1}) {
    SCOPED_TRACE(bad);
    SessionOptions options;
    options.device = Device::kCpu;
    options.intra_op_threads = bad;
    absl::StatusOr<std::unique_ptr<Session>> s = Session::Create(model, options);
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(s.status().message(), HasSubstr("intra_op_threads must be 1 to 256 (0: one per core), is " +
                                                std::to_string(bad)));
  }
  EXPECT_EQ(SessionOptions().intra_op_threads, 1);
}

}  // namespace
}  // namespace grove
