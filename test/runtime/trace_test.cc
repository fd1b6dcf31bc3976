// Run traces (SessionOptions::trace_path) and the log sink on the CPU: the
// JSON writer's escaping, the ring of runs, and a traced session's events
// read back (one per step run, inside their run's; body calls; plans).
#include "lib/runtime/trace.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "examples/models/demo_models.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test/model_test_util.h"
#include "test/trace_test_util.h"

namespace grove {
namespace {

using ::testing::HasSubstr;
using testing::CompleteEvents;
using testing::Json;
using testing::JsonParser;
using testing::ReadTextFile;
using testing::TraceEventView;

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("GROVE_TEST_TMP");
  std::string base = dir != nullptr ? dir : ::testing::TempDir();
  std::filesystem::create_directories(base);
  return absl::StrCat(base, "/trace_", getpid(), "_", name);
}

// Nanoseconds of a trace time (microseconds with three decimals).
int64_t Ns(double us) { return std::llround(us * 1000); }

bool Inside(const TraceEventView& inner, const TraceEventView& outer) {
  return Ns(inner.ts) >= Ns(outer.ts) && Ns(inner.ts) + Ns(inner.dur) <= Ns(outer.ts) + Ns(outer.dur);
}

std::vector<TraceEventView> Cat(const std::vector<TraceEventView>& events, const std::string& cat) {
  std::vector<TraceEventView> out;
  for (const TraceEventView& e : events) {
    if (e.cat == cat) out.push_back(e);
  }
  return out;
}

std::vector<TraceEventView> ReadTrace(const std::string& path) {
  std::string error;
  std::vector<TraceEventView> events = CompleteEvents(ReadTextFile(path), &error);
  EXPECT_EQ(error, "") << path;
  return events;
}

TEST(TraceJsonTest, StringsAreEscapedAndParseBack) {
  const std::string raw = std::string("a\"b\\c\nd\re\tf") + '\x01' + '\x7f' + "\xc3\xa9" + '\xff' + "\xe2\x82";
  std::string out;
  runtime::AppendJsonString(out, raw);
  EXPECT_EQ(out, "\"a\\\"b\\\\c\\nd\\re\\tf\\u0001\\u007f\xc3\xa9\\ufffd\\ufffd\\ufffd\"");
  std::string error;
  std::optional<Json> parsed = JsonParser::Parse(out, &error);
  ASSERT_TRUE(parsed.has_value()) << error;
  EXPECT_EQ(parsed->string, std::string("a\"b\\c\nd\re\tf\x01\x7f\xc3\xa9") + "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd");

  // The checker itself refuses what is not JSON.
  EXPECT_FALSE(JsonParser::Parse("{\"a\":1,}", &error).has_value());
  EXPECT_FALSE(JsonParser::Parse("\"a\nb\"", &error).has_value());
  EXPECT_FALSE(JsonParser::Parse("[1] x", &error).has_value());
}

TEST(TraceJsonTest, ArgsRenderEveryKind) {
  runtime::TraceArgs args;
  args.Int("n", -3).Bool("b", true).Str("s", "x\"y").Strs("l", {"f32[2,3]", "q\n"});
  std::string error;
  std::optional<Json> parsed = JsonParser::Parse(absl::StrCat("{", args.json(), "}"), &error);
  ASSERT_TRUE(parsed.has_value()) << error;
  EXPECT_EQ((*parsed)["n"].number, -3);
  EXPECT_TRUE((*parsed)["b"].boolean);
  EXPECT_EQ((*parsed)["s"].string, "x\"y");
  ASSERT_EQ((*parsed)["l"].array.size(), 2u);
  EXPECT_EQ((*parsed)["l"].array[1].string, "q\n");
}

// Names with quotes and newlines survive; the last max_runs runs are kept,
// each with its own run event enclosing its events.
TEST(TraceJsonTest, TracerKeepsTheLastRuns) {
  const std::string path = TempPath("ring.json");
  absl::StatusOr<std::unique_ptr<runtime::Tracer>> made = runtime::Tracer::Create(path, 2, "track \"t\"");
  ASSERT_TRUE(made.ok()) << made.status();
  runtime::Tracer& tracer = **made;
  EXPECT_EQ(ReadTrace(path).size(), 0u) << "an empty trace is written when it is made";
  for (int r = 1; r <= 3; ++r) {
    const int64_t start = tracer.Now();
    tracer.BeginRun();
    tracer.Add("step", absl::StrCat("Op \"node\"\nline ", r), tracer.Now(), runtime::TraceArgs().Int("step", r));
    tracer.EndRun(absl::StrCat("run ", r), start, runtime::TraceArgs().Int("run", r));
  }
  tracer.Add("step", "outside a run", tracer.Now(), {});  // dropped
  ASSERT_TRUE(tracer.Write("").ok());
  std::vector<TraceEventView> events = ReadTrace(path);
  ASSERT_EQ(events.size(), 4u);
  EXPECT_EQ(events[0].name, "run 2");
  EXPECT_EQ(events[1].name, "Op \"node\"\nline 2");
  EXPECT_EQ(events[1].args["step"].number, 2);
  EXPECT_EQ(events[2].name, "run 3");
  EXPECT_EQ(events[2].args["events"].number, 1);
  EXPECT_TRUE(Inside(events[1], events[0]));
  EXPECT_TRUE(Inside(events[3], events[2]));
  std::remove(path.c_str());
}

TEST(TraceJsonTest, BadPathsAreClearErrors) {
  absl::StatusOr<std::unique_ptr<runtime::Tracer>> made =
      runtime::Tracer::Create("/nonexistent-grove-dir/t.json", 10, "t");
  ASSERT_FALSE(made.ok());
  EXPECT_THAT(made.status().message(), HasSubstr("trace file '/nonexistent-grove-dir/t.json' cannot be written"));

  std::shared_ptr<const Model> model = testing::LoadOrDie(demo::BuildMlp());
  SessionOptions options;
  options.device = Device::kCpu;
  options.trace_path = "/nonexistent-grove-dir/t.json";
  absl::StatusOr<std::unique_ptr<Session>> session = Session::Create(model, options);
  ASSERT_FALSE(session.ok());
  EXPECT_EQ(session.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(session.status().message(), HasSubstr("Session::Create: trace file '/nonexistent-grove-dir/t.json'"));

  options.trace_path = TempPath("bad_runs.json");
  options.trace_max_runs = 0;
  session = Session::Create(model, options);
  ASSERT_FALSE(session.ok());
  EXPECT_THAT(session.status().message(), HasSubstr("trace_max_runs must be >= 1, is 0"));

  options.trace_max_runs = 10;
  session = Session::Create(model, options);
  ASSERT_TRUE(session.ok()) << session.status();
  EXPECT_THAT((*session)->WriteTrace("/nonexistent-grove-dir/u.json").message(),
              HasSubstr("trace file '/nonexistent-grove-dir/u.json' cannot be written"));
  std::unique_ptr<Session> plain = testing::CpuSession(model);
  absl::Status s = plain->WriteTrace();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("does not trace"));
  std::remove(options.trace_path.c_str());
}

// One step event per step run, each inside its run's event, their
// durations within the run's; a plan event per new shape.
TEST(SessionTraceTest, OneEventPerStepInsideItsRun) {
  std::shared_ptr<const Model> model = testing::LoadOrDie(demo::BuildMlp());
  SessionOptions options;
  options.device = Device::kCpu;
  options.trace_path = TempPath("mlp.json");
  std::unique_ptr<Session> session = Session::Create(model, options).value();
  std::vector<int64_t> kernels_per_run;
  int64_t kernels = 0;
  for (int64_t batch : {3, 3, 5}) {
    std::vector<float> x = testing::RandomF32(batch * 16, 7);
    ASSERT_TRUE(session->Run({TensorView(DType::kF32, {batch, 16}, x.data())}).ok());
    kernels_per_run.push_back(session->stats().kernels_run - kernels);
    kernels = session->stats().kernels_run;
  }
  ASSERT_TRUE(session->WriteTrace().ok());
  std::vector<TraceEventView> events = ReadTrace(options.trace_path);
  std::vector<TraceEventView> runs = Cat(events, "run");
  std::vector<TraceEventView> steps = Cat(events, "step");
  ASSERT_EQ(runs.size(), 3u);
  EXPECT_EQ(Cat(events, "plan").size(), 2u) << "batch 3 and batch 5";
  EXPECT_EQ(runs[0].args["plan"].string, "created");
  EXPECT_EQ(runs[1].args["plan"].string, "cache hit");
  EXPECT_EQ(runs[2].args["plan"].string, "created");
  EXPECT_EQ(runs[2].args["inputs"].array[0].string, "f32[5,16]");
  int64_t steps_seen = 0;
  for (size_t r = 0; r < runs.size(); ++r) {
    int64_t in_run = 0, dur_ns = 0;
    for (const TraceEventView& s : steps) {
      if (!Inside(s, runs[r])) continue;
      ++in_run;
      dur_ns += Ns(s.dur);
      EXPECT_EQ(s.args["backend"].string, "cpu");
      EXPECT_FALSE(s.args["op"].string.empty());
      EXPECT_EQ(s.args["inputs"].kind, Json::kArray);
      EXPECT_EQ(s.args["outputs"].kind, Json::kArray);
      EXPECT_EQ(s.args["subgraph"].string, "main");
    }
    EXPECT_EQ(in_run, kernels_per_run[r]) << "run " << r;
    EXPECT_LE(dur_ns, Ns(runs[r].dur)) << "run " << r;
    steps_seen += in_run;
  }
  EXPECT_EQ(steps_seen, static_cast<int64_t>(steps.size())) << "every step event is inside a run";
  EXPECT_GT(steps_seen, 0);
  // The first MatMul's shapes as run (fused with its bias and Relu on the
  // CPU: "MatMul+Add+Relu"), and the unnamed Softmax named by its op.
  bool matmul = false, softmax = false;
  for (const TraceEventView& s : steps) {
    if (s.args["op"].string.rfind("MatMul", 0) == 0 && s.args["inputs"].array[0].string == "f32[5,16]") {
      matmul = true;
    }
    softmax |= s.name == "Softmax" && s.args["outputs"].array[0].string == "f32[5,4]";
  }
  EXPECT_TRUE(matmul);
  EXPECT_TRUE(softmax);
  session.reset();
  std::remove(options.trace_path.c_str());
}

// A Loop's body calls are events of their own, enclosing the body's steps.
TEST(SessionTraceTest, LoopBodyCallsAndTheirSteps) {
  std::shared_ptr<const Model> model = testing::LoadOrDie(demo::BuildLoop());
  SessionOptions options;
  options.device = Device::kCpu;
  options.trace_path = TempPath("loop.json");
  std::unique_ptr<Session> session = Session::Create(model, options).value();
  int64_t trips = 5;
  float limit = 1e9f;
  std::vector<float> x = {0.5f, 1.0f, -2.0f};
  ASSERT_TRUE(session->Run({TensorView(DType::kI64, {}, &trips), TensorView(DType::kF32, {3}, x.data()),
                            TensorView(DType::kF32, {}, &limit)})
                  .ok());
  const SessionStats stats = session->stats();
  session.reset();  // the trace is written when the session goes
  std::vector<TraceEventView> events = ReadTrace(options.trace_path);
  std::vector<TraceEventView> bodies = Cat(events, "subgraph");
  ASSERT_EQ(bodies.size(), 5u);
  EXPECT_EQ(bodies[0].args["plan"].string, "created");
  EXPECT_EQ(bodies[1].args["plan"].string, "cache hit");
  EXPECT_EQ(static_cast<int64_t>(Cat(events, "step").size()), stats.kernels_run);
  int64_t body_steps = 0;
  for (const TraceEventView& s : Cat(events, "step")) {
    if (s.args["subgraph"].string == "main") continue;
    ++body_steps;
    bool inside = false;
    for (const TraceEventView& b : bodies) inside |= Inside(s, b);
    EXPECT_TRUE(inside) << s.name;
  }
  EXPECT_GT(body_steps, 0);
  // The Loop step: a "control" event around its body calls, and a step
  // event of its own after them, so step events never overlap and their
  // durations add up to at most the run's.
  std::vector<TraceEventView> control = Cat(events, "control");
  ASSERT_EQ(control.size(), 1u);
  EXPECT_THAT(control[0].name, ::testing::StartsWith("Loop"));
  for (const TraceEventView& b : bodies) EXPECT_TRUE(Inside(b, control[0]));
  std::vector<TraceEventView> steps = Cat(events, "step");
  std::sort(steps.begin(), steps.end(), [](const TraceEventView& a, const TraceEventView& b) { return a.ts < b.ts; });
  int64_t sum_ns = 0;
  for (size_t i = 0; i < steps.size(); ++i) {
    sum_ns += Ns(steps[i].dur);
    if (i + 1 < steps.size()) {
      EXPECT_LE(Ns(steps[i].ts) + Ns(steps[i].dur), Ns(steps[i + 1].ts)) << steps[i].name;
    }
  }
  std::vector<TraceEventView> runs = Cat(events, "run");
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_LE(sum_ns, Ns(runs[0].dur));
  std::remove(options.trace_path.c_str());
}

TEST(SessionTraceTest, KeepsTheLastRuns) {
  std::shared_ptr<const Model> model = testing::LoadOrDie(demo::BuildMlp());
  SessionOptions options;
  options.device = Device::kCpu;
  options.trace_path = TempPath("last.json");
  options.trace_max_runs = 2;
  std::unique_ptr<Session> session = Session::Create(model, options).value();
  std::vector<float> x = testing::RandomF32(2 * 16, 3);
  for (int r = 0; r < 5; ++r) ASSERT_TRUE(session->Run({TensorView(DType::kF32, {2, 16}, x.data())}).ok());
  session.reset();
  std::vector<TraceEventView> runs = Cat(ReadTrace(options.trace_path), "run");
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0].name, "run 4");
  EXPECT_EQ(runs[1].name, "run 5");
  std::remove(options.trace_path.c_str());
}

// The log sink gets messages at its level or above: a plan dropped (info),
// a plan made (debug).
TEST(SessionLogTest, SinkGetsMessagesAtItsLevel) {
  std::shared_ptr<const Model> model = testing::LoadOrDie(demo::BuildMlp());
  std::vector<std::pair<LogLevel, std::string>> got;
  SessionOptions options;
  options.device = Device::kCpu;
  options.max_cached_plans = 1;
  options.log_sink = [&got](LogLevel level, absl::string_view message) { got.emplace_back(level, message); };
  auto run_shapes = [&](Session& s) {
    for (int64_t batch : {2, 4}) {
      std::vector<float> x = testing::RandomF32(batch * 16, 1);
      ASSERT_TRUE(s.Run({TensorView(DType::kF32, {batch, 16}, x.data())}).ok());
    }
  };
  options.log_level = LogLevel::kWarning;
  run_shapes(*Session::Create(model, options).value());
  EXPECT_TRUE(got.empty());

  options.log_level = LogLevel::kInfo;
  run_shapes(*Session::Create(model, options).value());
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].first, LogLevel::kInfo);
  EXPECT_THAT(got[0].second, HasSubstr("a plan was dropped to keep at most 1"));

  got.clear();
  options.log_level = LogLevel::kDebug;
  run_shapes(*Session::Create(model, options).value());
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[0].first, LogLevel::kDebug);
  EXPECT_THAT(got[0].second, HasSubstr("plan made for subgraph 'main' at f32[2,16]"));
  EXPECT_THAT(got[2].second, HasSubstr("plan made for subgraph 'main' at f32[4,16]"));
  EXPECT_EQ(LogLevelName(LogLevel::kWarning), "warning");
}

}  // namespace
}  // namespace grove
