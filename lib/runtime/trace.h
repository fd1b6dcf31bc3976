// Run traces (SessionOptions::trace_path) in the Chrome trace event format,
// which Perfetto (ui.perfetto.dev) and chrome://tracing open, and the
// session's log sink (SessionOptions::log_sink).
//
//   auto tracer = Tracer::Create("run.json", /*max_runs=*/100, "cpu");
//   const int64_t t0 = (*tracer)->Now();
//   (*tracer)->BeginRun();
//   ... (*tracer)->Add("step", "MatMul mm", t0_step, TraceArgs().Int("step", 3));
//   (*tracer)->EndRun("run 1", t0, TraceArgs().Int("run", 1));
//   absl::Status s = (*tracer)->Write("");  // to run.json
//
// Each event is a complete event ("ph":"X", `ts` and `dur` in microseconds
// from the tracer's start); events of one run nest by time on one track.
// Memory is bounded: the events of the last `max_runs` runs are kept, at
// most kMaxEventsPerRun each.
#ifndef GROVE_LIB_RUNTIME_TRACE_H_
#define GROVE_LIB_RUNTIME_TRACE_H_

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "grove/grove.h"

namespace grove::runtime {

// Appends `s` to `out` as a JSON string literal: quoted, with quotes,
// backslashes and control characters escaped (bytes that are not valid
// UTF-8 become U+FFFD, so the file always parses).
void AppendJsonString(std::string& out, absl::string_view s);

// "f32[2,3]"; "seq(f32)" style names for boxed values come from DTypeName.
std::string ShapeText(const TensorView& view);

// The members of an event's "args" object, rendered as they are added.
class TraceArgs {
 public:
  TraceArgs& Int(absl::string_view key, int64_t value);
  TraceArgs& Bool(absl::string_view key, bool value);
  TraceArgs& Str(absl::string_view key, absl::string_view value);
  TraceArgs& Strs(absl::string_view key, absl::Span<const std::string> values);
  const std::string& json() const { return json_; }  // "\"k\":1,\"s\":\"x\"" (no braces)

 private:
  void Key(absl::string_view key);
  std::string json_;
};

class Tracer {
 public:
  static constexpr int64_t kMaxEventsPerRun = 1'000'000;

  // Checks that `path` can be written (an empty trace is written there now),
  // so a bad path is an error when the session is made, not lost later.
  // `track` names the session's track ("session 1 (cpu)").
  static absl::StatusOr<std::unique_ptr<Tracer>> Create(std::string path, int max_runs, std::string track);

  // Nanoseconds since the tracer was made.
  int64_t Now() const {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start_).count();
  }
  // A run starts: its events are kept together, and the oldest run's go
  // when more than max_runs are kept. Events added outside a run are dropped.
  void BeginRun();
  // The run's own event, from `start_ns` to now; closes the run.
  void EndRun(absl::string_view name, int64_t start_ns, const TraceArgs& args);
  // A complete event of category `cat`, from `start_ns` to now.
  void Add(const char* cat, std::string name, int64_t start_ns, const TraceArgs& args) {
    AddSpan(cat, std::move(name), start_ns, Now(), args);
  }
  void AddSpan(const char* cat, std::string name, int64_t start_ns, int64_t end_ns, const TraceArgs& args);
  bool in_run() const { return open_; }

  // Device timing (a backend that marks its stream, Backend::MarkStream):
  // the run's marked events take the device's times when the run ends.
  // SetDeviceBase: mark `base` was recorded just after `at_ns`. AddMarked:
  // an event whose device span runs from mark `from` to mark `to` (both -1:
  // an ordinary event). ResolveMarks (after the run's wait, before EndRun):
  // each marked event moves to the session's device track, at base's time
  // plus elapsed(base, from), lasting elapsed(from, to), with args
  // "device_us", "host_us" (its host span) and "clock": "cuda_events"; one
  // the device cannot time keeps its host span and gets "clock": "host".
  void SetDeviceBase(int base, int64_t at_ns);
  void AddMarked(const char* cat, std::string name, int64_t start_ns, int64_t end_ns, const TraceArgs& args, int from,
                 int to);
  void ResolveMarks(const std::function<absl::StatusOr<double>(int, int)>& elapsed);

  // The trace as JSON: {"traceEvents":[...],"displayTimeUnit":"ns"}.
  std::string Json() const;
  // Writes Json() to `path` ("" = the path given at creation).
  absl::Status Write(const std::string& path) const;
  // Runs were traced since the last Write to the creation path.
  bool unwritten() const { return unwritten_; }
  const std::string& path() const { return path_; }

 private:
  struct Event {
    const char* cat;
    std::string name;
    int64_t ts_ns;
    int64_t dur_ns;
    std::string args;
    int from = -1, to = -1;  // device marks (AddMarked)
    bool device = false;     // on the device track
  };
  struct Run {
    std::vector<Event> events;
    int64_t dropped = 0;
    int base_mark = -1;
    int64_t base_ns = 0;
  };
  Tracer(std::string path, int max_runs, std::string track);

  const std::string path_;
  const size_t max_runs_;
  const std::string track_;
  const std::chrono::steady_clock::time_point start_;
  const int64_t pid_;
  const int64_t tid_;
  const int64_t device_tid_;  // the device track (ResolveMarks)
  std::deque<Run> runs_;
  bool open_ = false;
  mutable bool unwritten_ = false;
};

// Calls options.log_sink with `message` when it is set and `level` is at
// or above options.log_level.
inline bool Logs(const SessionOptions& options, LogLevel level) {
  return options.log_sink != nullptr && level >= options.log_level;
}
inline void Log(const SessionOptions& options, LogLevel level, absl::string_view message) {
  if (Logs(options, level)) options.log_sink(level, message);
}

}  // namespace grove::runtime

#endif  // GROVE_LIB_RUNTIME_TRACE_H_
