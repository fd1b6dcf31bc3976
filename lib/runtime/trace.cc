#include "lib/runtime/trace.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "lib/ir/value_type.h"

namespace grove::runtime {
namespace {

// Length of the valid UTF-8 sequence at s[i], or 0 when it is not one.
size_t Utf8Length(absl::string_view s, size_t i) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = b(i);
  size_t n = 0;
  uint32_t min = 0;
  if (c >= 0xc0 && c < 0xe0) {
    n = 2;
    min = 0x80;
  } else if (c >= 0xe0 && c < 0xf0) {
    n = 3;
    min = 0x800;
  } else if (c >= 0xf0 && c < 0xf5) {
    n = 4;
    min = 0x10000;
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  uint32_t cp = c & (0x7f >> n);
  for (size_t k = 1; k < n; ++k) {
    if ((b(i + k) & 0xc0) != 0x80) return 0;
    cp = (cp << 6) | (b(i + k) & 0x3f);
  }
  if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
  return n;
}

// Microseconds with three decimals (nanosecond resolution), as Perfetto
// reads `ts` and `dur`.
void AppendMicros(std::string& out, int64_t ns) {
  if (ns < 0) {
    out.push_back('-');
    ns = -ns;
  }
  char frac[8];
  std::snprintf(frac, sizeof(frac), "%03d", static_cast<int>(ns % 1000));
  absl::StrAppend(&out, ns / 1000, ".", frac);
}

int64_t NextTrackId() {
  static std::atomic<int64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace

void AppendJsonString(std::string& out, absl::string_view s) {
  out.push_back('"');
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0x80) {
      const size_t n = Utf8Length(s, i);
      if (n == 0) {
        out += "\\ufffd";
        ++i;
      } else {
        out.append(s.data() + i, n);
        i += n;
      }
      continue;
    }
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20 || c == 0x7f) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          out += buf;
        } else {
          out.push_back(static_cast<char>(c));
        }
    }
    ++i;
  }
  out.push_back('"');
}

std::string ShapeText(const TensorView& view) {
  std::string text(DTypeName(view.dtype));
  if (ir::IsBoxed(view.dtype)) return text;
  text.push_back('[');
  for (size_t i = 0; i < view.shape.size(); ++i) absl::StrAppend(&text, i == 0 ? "" : ",", view.shape[i]);
  text.push_back(']');
  return text;
}

void TraceArgs::Key(absl::string_view key) {
  if (!json_.empty()) json_.push_back(',');
  AppendJsonString(json_, key);
  json_.push_back(':');
}

TraceArgs& TraceArgs::Int(absl::string_view key, int64_t value) {
  Key(key);
  absl::StrAppend(&json_, value);
  return *this;
}

TraceArgs& TraceArgs::Bool(absl::string_view key, bool value) {
  Key(key);
  json_ += value ? "true" : "false";
  return *this;
}

TraceArgs& TraceArgs::Str(absl::string_view key, absl::string_view value) {
  Key(key);
  AppendJsonString(json_, value);
  return *this;
}

TraceArgs& TraceArgs::Strs(absl::string_view key, absl::Span<const std::string> values) {
  Key(key);
  json_.push_back('[');
  for (size_t i = 0; i < values.size(); ++i) {
    if (i > 0) json_.push_back(',');
    AppendJsonString(json_, values[i]);
  }
  json_.push_back(']');
  return *this;
}

Tracer::Tracer(std::string path, int max_runs, std::string track)
    : path_(std::move(path)), max_runs_(static_cast<size_t>(max_runs)), track_(std::move(track)),
      start_(std::chrono::steady_clock::now()), pid_(static_cast<int64_t>(getpid())), tid_(NextTrackId()),
      device_tid_(NextTrackId()) {}

absl::StatusOr<std::unique_ptr<Tracer>> Tracer::Create(std::string path, int max_runs, std::string track) {
  if (path.empty()) return absl::InvalidArgumentError("trace_path is empty");
  if (max_runs < 1) {
    return absl::InvalidArgumentError(absl::StrCat("trace_max_runs must be >= 1, is ", max_runs));
  }
  std::unique_ptr<Tracer> tracer(new Tracer(std::move(path), max_runs, std::move(track)));
  if (absl::Status s = tracer->Write(""); !s.ok()) return s;
  return tracer;
}

void Tracer::BeginRun() {
  if (runs_.size() >= max_runs_) runs_.pop_front();
  runs_.emplace_back();
  open_ = true;
  unwritten_ = true;
}

void Tracer::EndRun(absl::string_view name, int64_t start_ns, const TraceArgs& args) {
  if (!open_) return;
  Run& run = runs_.back();
  TraceArgs all = args;
  all.Int("events", static_cast<int64_t>(run.events.size()));
  if (run.dropped > 0) all.Int("dropped_events", run.dropped);
  // The run's event goes first: a viewer meets the enclosing one first.
  run.events.insert(run.events.begin(), Event{"run", std::string(name), start_ns, Now() - start_ns, all.json()});
  open_ = false;
}

void Tracer::AddSpan(const char* cat, std::string name, int64_t start_ns, int64_t end_ns, const TraceArgs& args) {
  if (!open_) return;
  Run& run = runs_.back();
  if (static_cast<int64_t>(run.events.size()) >= kMaxEventsPerRun) {
    ++run.dropped;
    return;
  }
  run.events.push_back(Event{cat, std::move(name), start_ns, end_ns - start_ns, args.json()});
}

void Tracer::SetDeviceBase(int base, int64_t at_ns) {
  if (!open_) return;
  runs_.back().base_mark = base;
  runs_.back().base_ns = at_ns;
}

void Tracer::AddMarked(const char* cat, std::string name, int64_t start_ns, int64_t end_ns, const TraceArgs& args,
                       int from, int to) {
  AddSpan(cat, std::move(name), start_ns, end_ns, args);
  if (!open_ || runs_.back().events.empty() || runs_.back().dropped > 0) return;
  Event& e = runs_.back().events.back();
  e.from = from;
  e.to = to;
}

void Tracer::ResolveMarks(const std::function<absl::StatusOr<double>(int, int)>& elapsed) {
  if (!open_) return;
  Run& run = runs_.back();
  for (Event& e : run.events) {
    if (e.from < 0 || e.to < 0) continue;
    absl::StatusOr<double> offset_us = run.base_mark >= 0 ? elapsed(run.base_mark, e.from)
                                                          : absl::StatusOr<double>(absl::FailedPreconditionError(""));
    absl::StatusOr<double> device_us = offset_us.ok() ? elapsed(e.from, e.to) : offset_us;
    if (!device_us.ok()) {
      e.args += e.args.empty() ? "\"clock\":\"host\"" : ",\"clock\":\"host\"";
      continue;
    }
    const int64_t host_ns = e.dur_ns;
    e.ts_ns = run.base_ns + std::llround(std::max(0.0, *offset_us) * 1000);
    e.dur_ns = std::llround(std::max(0.0, *device_us) * 1000);
    e.device = true;
    if (!e.args.empty()) e.args.push_back(',');
    if (e.from != e.to) {
      e.args += absl::StrFormat("\"device_us\":%.3f,\"host_us\":%.3f,", *device_us, host_ns / 1000.0);
    }
    e.args += "\"clock\":\"cuda_events\"";
  }
}

std::string Tracer::Json() const {
  std::string out = "{\"traceEvents\":[\n";
  absl::StrAppend(&out, "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":", pid_,
                  ",\"tid\":0,\"args\":{\"name\":\"grove\"}},\n");
  absl::StrAppend(&out, "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":", pid_, ",\"tid\":", tid_,
                  ",\"args\":{\"name\":");
  AppendJsonString(out, track_);
  out += "}}";
  bool device_track = false;
  for (const Run& run : runs_) {
    for (const Event& e : run.events) device_track |= e.device;
  }
  if (device_track) {
    absl::StrAppend(&out, ",\n{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":", pid_, ",\"tid\":", device_tid_,
                    ",\"args\":{\"name\":");
    AppendJsonString(out, absl::StrCat(track_, " device (cuda events)"));
    out += "}}";
  }
  for (const Run& run : runs_) {
    for (const Event& e : run.events) {
      out += ",\n{\"ph\":\"X\",\"cat\":";
      AppendJsonString(out, e.cat);
      out += ",\"name\":";
      AppendJsonString(out, e.name);
      absl::StrAppend(&out, ",\"pid\":", pid_, ",\"tid\":", e.device ? device_tid_ : tid_, ",\"ts\":");
      AppendMicros(out, e.ts_ns);
      out += ",\"dur\":";
      AppendMicros(out, e.dur_ns);
      absl::StrAppend(&out, ",\"args\":{", e.args, "}}");
    }
  }
  out += "\n],\"displayTimeUnit\":\"ns\"}\n";
  return out;
}

absl::Status Tracer::Write(const std::string& path) const {
  const std::string& to = path.empty() ? path_ : path;
  const std::string json = Json();
  std::FILE* f = std::fopen(to.c_str(), "wb");
  if (f == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("trace file '", to, "' cannot be written: ", std::strerror(errno)));
  }
  const bool wrote = std::fwrite(json.data(), 1, json.size(), f) == json.size();
  const int write_errno = errno;
  const bool closed = std::fclose(f) == 0;
  if (!wrote || !closed) {
    return absl::InternalError(absl::StrCat("trace file '", to, "': write failed: ",
                                            std::strerror(wrote ? errno : write_errno)));
  }
  if (to == path_) unwritten_ = false;  // a copy elsewhere leaves trace_path to be written
  return absl::OkStatus();
}

}  // namespace grove::runtime
