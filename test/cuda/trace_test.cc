// Run traces on the CUDA path (the emulated device, or the GPU when tests
// run on one): a segment replayed as a graph is one event listing its
// steps; steps run one by one have their own events; captures and the
// output copy have theirs.
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "examples/models/demo_models.h"
#include "gtest/gtest.h"
#include "lib/backends/backends.h"
#include "test/cuda_op_test_util.h"
#include "test/model_test_util.h"
#include "test/trace_test_util.h"

namespace grove {
namespace {

using testing::CompleteEvents;
using testing::ReadTextFile;
using testing::TraceEventView;

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("GROVE_TEST_TMP");
  std::string base = dir != nullptr ? dir : ::testing::TempDir();
  std::filesystem::create_directories(base);
  return absl::StrCat(base, "/cuda_trace_", getpid(), "_", name);
}

int64_t Ns(double us) { return std::llround(us * 1000); }

bool Inside(const TraceEventView& inner, const TraceEventView& outer) {
  return Ns(inner.ts) >= Ns(outer.ts) && Ns(inner.ts) + Ns(inner.dur) <= Ns(outer.ts) + Ns(outer.dur);
}

struct RunEvents {
  TraceEventView run;
  std::vector<TraceEventView> inside;
};

// Each run's event and the events inside it.
std::vector<RunEvents> ByRun(const std::string& path) {
  std::string error;
  std::vector<TraceEventView> events = CompleteEvents(ReadTextFile(path), &error);
  EXPECT_EQ(error, "");
  std::vector<RunEvents> runs;
  for (const TraceEventView& e : events) {
    if (e.cat == "run") runs.push_back({e, {}});
  }
  for (const TraceEventView& e : events) {
    if (e.cat == "run") continue;
    bool placed = false;
    for (RunEvents& r : runs) {
      if (Inside(e, r.run)) {
        r.inside.push_back(e);
        placed = true;
        break;
      }
    }
    EXPECT_TRUE(placed) << e.name << " is inside no run";
  }
  return runs;
}

int Count(const RunEvents& r, const std::string& cat) {
  int n = 0;
  for (const TraceEventView& e : r.inside) n += e.cat == cat;
  return n;
}

std::unique_ptr<Session> TracedCudaSession(std::shared_ptr<const Model> model, SessionOptions options) {
  absl::StatusOr<std::unique_ptr<Session>> s =
      internal::CreateSessionOnDevice(std::move(model), options, testing::TestDevice());
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? std::move(*s) : nullptr;
}

// The MLP is one segment: run 1 captures it (a capture event, the graph
// launched "captured"), runs 2 and 3 replay it. The steps a graph ran are
// listed in its event and each has a step event of no host time inside it
// (timed: false): every kernel the run counted has its step event.
TEST(CudaTraceTest, GraphReplaysAreOneEventListingTheirSteps) {
  std::shared_ptr<const Model> model = testing::LoadOrDie(demo::BuildMlp());
  SessionOptions options;
  options.shape_buckets = {{"*", "exact"}};
  options.trace_path = TempPath("graphs.json");
  std::unique_ptr<Session> session = TracedCudaSession(model, options);
  ASSERT_NE(session, nullptr);
  std::vector<int64_t> kernels;
  int64_t before = 0;
  for (int r = 0; r < 3; ++r) {
    std::vector<float> x = testing::RandomF32(4 * 16, r);
    ASSERT_TRUE(session->Run({TensorView(DType::kF32, {4, 16}, x.data())}).ok());
    kernels.push_back(session->stats().kernels_run - before);
    before = session->stats().kernels_run;
  }
  ASSERT_EQ(session->stats().graph_replays, 2);
  ASSERT_TRUE(session->WriteTrace().ok());
  std::vector<RunEvents> runs = ByRun(options.trace_path);
  ASSERT_EQ(runs.size(), 3u);
  for (size_t r = 0; r < runs.size(); ++r) {
    int64_t steps = 0, listed = 0, dur_ns = 0;
    std::string how;
    std::vector<TraceEventView> graphs;
    for (const TraceEventView& e : runs[r].inside) {
      if (e.cat == "graph") {
        how = e.args["graph"].string;
        listed += static_cast<int64_t>(e.args["steps"].array.size());
        dur_ns += Ns(e.dur);
        graphs.push_back(e);
      }
    }
    for (const TraceEventView& e : runs[r].inside) {
      if (e.cat != "step") continue;
      ++steps;
      ASSERT_EQ(graphs.size(), 1u);
      EXPECT_TRUE(Inside(e, graphs[0])) << e.name;
      EXPECT_EQ(e.dur, 0) << e.name;
      EXPECT_FALSE(e.args["timed"].boolean);
      EXPECT_EQ(e.args["graph"].string, how);
      EXPECT_EQ(e.args["backend"].string, "cuda");
      EXPECT_EQ(e.args["inputs"].array.empty(), false);
    }
    // The graph's time is the device's (events around its launch).
    for (const TraceEventView& g : graphs) {
      EXPECT_EQ(g.args["clock"].string, "cuda_events");
      EXPECT_GE(g.args["device_us"].number, 0);
      EXPECT_GE(g.args["host_us"].number, 0);
      EXPECT_NEAR(g.dur, g.args["device_us"].number, 0.0015);
      EXPECT_NE(g.tid, runs[r].run.tid) << "on the device track";
    }
    EXPECT_EQ(steps, kernels[r]) << "run " << r;
    EXPECT_EQ(listed, kernels[r]) << "run " << r;
    EXPECT_LE(dur_ns, Ns(runs[r].run.dur)) << "run " << r;
    EXPECT_EQ(how, r == 0 ? "captured" : "replayed") << "run " << r;
    EXPECT_EQ(Count(runs[r], "capture"), r == 0 ? 1 : 0) << "run " << r;
    EXPECT_EQ(Count(runs[r], "plan"), r == 0 ? 1 : 0) << "run " << r;
    EXPECT_EQ(Count(runs[r], "copy"), 2) << "inputs bound, outputs copied";
    EXPECT_EQ(runs[r].run.args["device"].string, "cuda");
  }
  session.reset();
  std::remove(options.trace_path.c_str());
}

// Graphs off: every step has its event, on the CUDA backend, inside an
// eager segment's event.
TEST(CudaTraceTest, StepsRunOneByOneHaveTheirEvents) {
  std::shared_ptr<const Model> model = testing::LoadOrDie(demo::BuildMlp());
  SessionOptions options;
  options.cuda_graphs = GraphMode::kOff;
  options.trace_path = TempPath("eager.json");
  std::unique_ptr<Session> session = TracedCudaSession(model, options);
  ASSERT_NE(session, nullptr);
  std::vector<float> x = testing::RandomF32(3 * 16, 1);
  ASSERT_TRUE(session->Run({TensorView(DType::kF32, {3, 16}, x.data())}).ok());
  const int64_t kernels = session->stats().kernels_run;
  session.reset();
  std::vector<RunEvents> runs = ByRun(options.trace_path);
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(Count(runs[0], "step"), kernels);
  // Device times: every step's from CUDA events, on the device track, in
  // order without overlap, summing to within the run.
  int64_t sum_ns = 0, last_end_ns = 0;
  for (const TraceEventView& e : runs[0].inside) {
    if (e.cat != "step") continue;
    EXPECT_EQ(e.args["clock"].string, "cuda_events") << e.name;
    EXPECT_GE(e.dur, 0) << e.name;
    EXPECT_NEAR(e.dur, e.args["device_us"].number, 0.0015) << e.name;
    EXPECT_GE(e.args["host_us"].number, 0) << e.name;
    EXPECT_NE(e.tid, runs[0].run.tid) << e.name;
    EXPECT_GE(Ns(e.ts) + 1, last_end_ns) << e.name;
    last_end_ns = Ns(e.ts) + Ns(e.dur);
    sum_ns += Ns(e.dur);
  }
  EXPECT_LE(sum_ns, Ns(runs[0].run.dur));
  EXPECT_EQ(Count(runs[0], "graph"), 0);
  std::vector<TraceEventView> segments;
  for (const TraceEventView& e : runs[0].inside) {
    if (e.cat == "segment") segments.push_back(e);
  }
  ASSERT_FALSE(segments.empty());
  for (const TraceEventView& e : runs[0].inside) {
    if (e.cat != "step" || e.args["segment"].number < 0) continue;
    EXPECT_EQ(e.args["backend"].string, "cuda") << e.name;
    bool inside = false;
    for (const TraceEventView& s : segments) inside |= Inside(e, s);
    EXPECT_TRUE(inside) << e.name;
  }
  std::remove(options.trace_path.c_str());
}

// The same model traced on the CPU: host times on one track, no device
// clock anywhere.
TEST(CudaTraceTest, CpuTracesKeepTheHostClock) {
  std::shared_ptr<const Model> model = testing::LoadOrDie(demo::BuildMlp());
  SessionOptions options;
  options.device = Device::kCpu;
  options.trace_path = TempPath("cpu.json");
  absl::StatusOr<std::unique_ptr<Session>> session = Session::Create(model, options);
  ASSERT_TRUE(session.ok()) << session.status();
  std::vector<float> x = testing::RandomF32(3 * 16, 1);
  ASSERT_TRUE((*session)->Run({TensorView(DType::kF32, {3, 16}, x.data())}).ok());
  const int64_t kernels = (*session)->stats().kernels_run;
  session->reset();
  std::vector<RunEvents> runs = ByRun(options.trace_path);
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(Count(runs[0], "step"), kernels);
  for (const TraceEventView& e : runs[0].inside) {
    EXPECT_EQ(e.tid, runs[0].run.tid) << e.name;
    EXPECT_FALSE(e.args.Has("clock")) << e.name;
    EXPECT_FALSE(e.args.Has("device_us")) << e.name;
  }
  std::remove(options.trace_path.c_str());
}

}  // namespace
}  // namespace grove
