// `grove bench`: a model's latency (min, median, p90) per input shape, with
// what the session did at each (plans, graphs, copies, syncs); a sweep over
// one symbol's values, random inputs where none are given.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <unistd.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "grove/grove.h"
#include "command_line.h"
#include "json_writer.h"

namespace grove::cli {
namespace {

constexpr char kUsage[] =
    "Usage: grove bench MODEL.grove [--shape NAME=D0xD1... ...] [--sweep SYMBOL=LO:HI[:STEP]] [flags]\n"
    "       grove bench MODEL.grove --case DIR [flags]\n"
    "\n"
    "Runs MODEL --warmup times, then --iterations timed times, per input shape,\n"
    "and prints the latency (min, median, p90) and what the session did at each\n"
    "shape: plans created (warmup included), and over the timed runs graphs\n"
    "captured, graph replays, launches outside graphs, host<->device bytes and\n"
    "syncs (the CUDA counters are 0 on the CPU). Inputs are random (a fixed\n"
    "seed: floats uniform in [-1,1), integers in 0..3) unless --case gives them.\n"
    "\n"
    "Flags:\n"
    "  --shape NAME=3x16       an input's shape (NAME= for a scalar; repeatable);\n"
    "                          inputs not named take their declared dims\n"
    "  --sweep SYMBOL=LO:HI[:STEP]\n"
    "                          one shape per value LO, LO+STEP, ... <= HI of the\n"
    "                          symbol (a dim name such as seq), in every input dim\n"
    "                          declared with it; a progress line goes to stderr\n"
    "  --case DIR              the inputs: DIR/NAME.npy per model input (not with\n"
    "                          --shape or --sweep)\n"
    "  --iterations N          timed runs per shape (default 10)\n"
    "  --warmup N              untimed runs before them (default 1)\n"
    "  --device cpu|cuda|auto|emulated-cuda  where to run (default auto; see grove run)\n"
    "  --graphs auto|on|off    CUDA graphs (see grove run --help)\n"
    "  --bucket SYMBOL=RULE    CUDA graphs: shape buckets (see grove run --help)\n"
    "  --threads N             CPU: intra-op threads (default 1; 0: one per core)\n"
    "  --gemm-math f32|tf32|bf16|f16, --strict-device, --kernel-table FILE: as for\n"
    "                          grove run\n"
    "  --trace FILE.json       write a trace of the last --trace-runs runs (default\n"
    "                          100; warmup included) for ui.perfetto.dev (see grove run)\n"
    "  --log LEVEL             the session's messages to stderr (see grove run)\n"
    "  --json                  print one JSON object: \"shapes\" (per shape: inputs,\n"
    "                          min_ms, median_ms, p90_ms, the counters) and \"totals\"\n";

constexpr uint64_t kSeed = 0x67726f7665;  // "grove"
// A positive (or, with allow_zero, non-negative) count flag; -1 or 2.
int ParseCount(const ParsedArgs& args, const char* name, bool allow_zero, int* out) {
  if (!args.Has(name)) return -1;
  const std::string& text = args.Values(name)[0];
  if (!absl::SimpleAtoi(text, out) || *out < (allow_zero ? 0 : 1)) {
    return UsageError(absl::StrCat("--", name, " wants a ", allow_zero ? "non-negative" : "positive", " integer, not '",
                                   text, "'"));
  }
  return -1;
}

// Random inputs of these shapes, the same for the same shapes every time.
absl::StatusOr<std::vector<Tensor>> RandomInputs(const Model& model, const std::vector<std::vector<int64_t>>& shapes) {
  std::mt19937_64 rng(kSeed);
  std::vector<Tensor> tensors;
  for (size_t i = 0; i < shapes.size(); ++i) {
    const TensorInfo& info = model.inputs()[i];
    absl::StatusOr<Tensor> wide = Tensor::Create(DType::kF64, shapes[i]);
    if (!wide.ok()) return absl::InvalidArgumentError(absl::StrCat("input '", info.name, "': ", wide.status().message()));
    const bool is_float = info.dtype == DType::kF32 || info.dtype == DType::kF64 || info.dtype == DType::kF16 ||
                          info.dtype == DType::kBF16;
    std::uniform_real_distribution<double> real(-1.0, 1.0);
    std::uniform_int_distribution<int> small(0, 3);
    double* v = wide->as<double>();
    const int64_t n = wide->view().num_elements();
    for (int64_t k = 0; k < n; ++k) v[k] = is_float ? real(rng) : small(rng);
    absl::StatusOr<Tensor> t = Tensor::CastOf(wide->view(), info.dtype);
    if (!t.ok()) return absl::InvalidArgumentError(absl::StrCat("input '", info.name, "': ", t.status().message()));
    tensors.push_back(*std::move(t));
  }
  return tensors;
}

// What one shape measured.
struct ShapeResult {
  std::vector<std::vector<int64_t>> shapes;
  double first_ms = 0;  // the first run (a warmup run unless --warmup 0)
  double min_ms = 0, median_ms = 0, p90_ms = 0;
  SessionStats timed;         // over the timed runs
  int64_t plans_created = 0;  // warmup included
  std::optional<uint64_t> arena_bytes;
};

std::string ShapesText(const Model& model, const std::vector<std::vector<int64_t>>& shapes) {
  std::vector<std::string> parts;
  for (size_t i = 0; i < shapes.size(); ++i) {
    parts.push_back(absl::StrCat(TerminalSafe(model.inputs()[i].name), "=", ShapeString(shapes[i])));
  }
  return absl::StrJoin(parts, " ");
}

double Milliseconds(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

// Runs warmup then timed runs of `inputs`; the error names the shape.
absl::StatusOr<ShapeResult> Measure(Session& session, const Model& model, const std::vector<Tensor>& inputs,
                                    int warmup, int iterations) {
  ShapeResult r;
  std::vector<TensorView> views;
  for (const Tensor& t : inputs) {
    views.push_back(t.view());
    r.shapes.push_back(t.shape());
  }
  const SessionStats start = session.stats();
  std::vector<double> times;
  SessionStats timed_start;
  for (int i = 0; i < warmup + iterations; ++i) {
    if (i == warmup) timed_start = session.stats();
    const auto t0 = std::chrono::steady_clock::now();
    absl::StatusOr<std::vector<TensorView>> out = session.Run(views);
    const double ms = Milliseconds(std::chrono::steady_clock::now() - t0);
    if (!out.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("at ", ShapesText(model, r.shapes), ": run failed: ", out.status().message()));
    }
    if (i == 0) r.first_ms = ms;
    if (i >= warmup) times.push_back(ms);
  }
  const SessionStats end = session.stats();
  r.timed = StatsSince(timed_start, end);
  r.plans_created = end.plans_created - start.plans_created;
  std::sort(times.begin(), times.end());
  const size_t n = times.size();
  r.min_ms = times.front();
  r.median_ms = n % 2 == 1 ? times[n / 2] : (times[n / 2 - 1] + times[n / 2]) / 2;
  r.p90_ms = times[(n * 9 + 9) / 10 - 1];  // nearest rank: ceil(0.9 n)
  if (absl::StatusOr<MemoryReport> report = session.Reshape(r.shapes); report.ok()) r.arena_bytes = report->arena_bytes;
  return r;
}

}  // namespace

int BenchMain(absl::Span<const std::string> argv) {
  static constexpr FlagSpec kFlags[] = {
      {"shape", kRepeatedValue}, {"sweep", kValue},         {"case", kValue},      {"iterations", kValue},
      {"warmup", kValue},        {"device", kValue},        {"graphs", kValue},    {"gemm-math", kValue},
      {"bucket", kRepeatedValue},
      {"strict-device", kSwitch}, {"json", kSwitch},         {"threads", kValue},     {"trace", kValue},
      {"trace-runs", kValue},     {"log", kValue},           {"kernel-table", kValue}};
  ParsedArgs args;
  if (int rc = ParseArgs(argv, kFlags, &args, kUsage); rc >= 0) return rc;
  if (args.positional.size() != 1) {
    return UsageError(args.positional.empty() ? "bench: missing MODEL.grove"
                                              : absl::StrCat("bench: unexpected argument '", args.positional[1], "'"));
  }
  const std::string& model_path = args.positional[0];
  if (args.Has("case") && (args.Has("shape") || args.Has("sweep"))) {
    return UsageError("bench: --case gives the inputs and their shapes; it does not go with --shape or --sweep");
  }
  if (args.Has("case") && args.Values("case")[0].empty()) return UsageError("--case wants a directory, not ''");
  int iterations = 10, warmup = 1;
  if (int rc = ParseCount(args, "iterations", false, &iterations); rc >= 0) return rc;
  if (int rc = ParseCount(args, "warmup", true, &warmup); rc >= 0) return rc;
  std::optional<Sweep> sweep;
  if (args.Has("sweep")) {
    sweep.emplace();
    if (int rc = ParseSweep(args.Values("sweep")[0], &*sweep); rc >= 0) return rc;
  }
  SessionOptions options;
  bool emulated_cuda = false;
  if (int rc = SessionOptionsFromFlags(args, &options, &emulated_cuda); rc >= 0) return rc;
  const bool json = args.Has("json");

  std::shared_ptr<const Model> model;
  std::unique_ptr<Session> session;
  if (int rc = LoadModelAndSession(model_path, options, emulated_cuda, &model, &session); rc >= 0) return rc;
  const std::vector<TensorInfo>& infos = model->inputs();
  for (const TensorInfo& info : infos) {
    if (info.kind != ValueKind::kTensor) {
      return Fail(absl::StrCat("bench takes tensor inputs; input '", info.name, "' is ", DeclaredType(info)));
    }
  }

  // The input shapes of each point: a case's, or --shape and the declared
  // dims with the swept symbol's value put in.
  std::vector<std::vector<std::vector<int64_t>>> points;
  std::vector<Tensor> case_inputs;
  if (args.Has("case")) {
    absl::StatusOr<std::vector<Tensor>> tensors = ReadCaseDir(args.Values("case")[0], *model);
    if (!tensors.ok()) return Fail(tensors.status());
    case_inputs = *std::move(tensors);
    points.emplace_back();
    for (const Tensor& t : case_inputs) points.back().push_back(t.shape());
  } else {
    if (int rc = ShapePointsFromFlags(args, *model, sweep, &points); rc >= 0) return rc;
  }

  std::vector<ShapeResult> results;
  const bool progress = points.size() > 1;
  const bool tty = isatty(fileno(stderr)) != 0;
  const SessionStats initial = session->stats();
  for (size_t p = 0; p < points.size(); ++p) {
    if (progress) {
      std::fprintf(stderr, "%sbench: shape %zu of %zu: %s%s", tty ? "\r\x1b[K" : "", p + 1, points.size(),
                   ShapesText(*model, points[p]).c_str(), tty ? "" : "\n");
      std::fflush(stderr);
    }
    std::vector<Tensor> inputs;
    if (!case_inputs.empty()) {
      inputs = case_inputs;
    } else {
      absl::StatusOr<std::vector<Tensor>> random = RandomInputs(*model, points[p]);
      if (!random.ok()) return Fail(absl::StrCat("at ", ShapesText(*model, points[p]), ": ", random.status().message()));
      inputs = *std::move(random);
    }
    absl::StatusOr<ShapeResult> r = Measure(*session, *model, inputs, warmup, iterations);
    if (!r.ok()) {
      if (progress && tty) std::fputc('\n', stderr);
      return Fail(r.status());
    }
    results.push_back(*std::move(r));
  }
  if (progress && tty) std::fputc('\n', stderr);
  const SessionStats stats = session->stats();
  if (!options.trace_path.empty()) {
    if (absl::Status s = session->WriteTrace(); !s.ok()) return Fail(absl::StrCat("--trace: ", s.message()));
  }
  const std::string device = session->device() == Device::kCuda ? "cuda" : "cpu";

  if (json) {
    JsonWriter w;
    w.BeginObject();
    w.Key("model");
    w.String(model_path);
    w.Key("device");
    w.String(device);
    w.Key("device_description");
    w.String(session->device_description());
    w.Key("iterations");
    w.Int(iterations);
    w.Key("warmup");
    w.Int(warmup);
    w.Key("case");
    if (args.Has("case")) {
      w.String(args.Values("case")[0]);
    } else {
      w.Null();
    }
    w.Key("shapes");
    w.BeginArray();
    for (const ShapeResult& r : results) {
      w.BeginObject();
      w.Key("inputs");
      w.BeginObject();
      for (size_t i = 0; i < r.shapes.size(); ++i) {
        w.Key(infos[i].name);
        w.IntArray(r.shapes[i]);
      }
      w.EndObject();
      w.Key("first_run_ms");
      w.Double(r.first_ms);
      w.Key("min_ms");
      w.Double(r.min_ms);
      w.Key("median_ms");
      w.Double(r.median_ms);
      w.Key("p90_ms");
      w.Double(r.p90_ms);
      // The counters of the timed runs; plans_created includes the warmup.
      SessionStats counters = r.timed;
      counters.plans_created = r.plans_created;
      WriteCounters(counters, &w);
      w.Key("arena_bytes");
      if (r.arena_bytes.has_value()) {
        w.Uint(*r.arena_bytes);
      } else {
        w.Null();
      }
      w.EndObject();
    }
    w.EndArray();
    w.Key("totals");
    w.BeginObject();
    w.Key("runs");
    w.Int(stats.runs - initial.runs);
    WriteCounters(StatsSince(initial, stats), &w);
    w.Key("graph_bytes");
    w.Int(stats.graph_bytes);
    w.Key("graphs_held");
    w.Int(stats.graphs_held);
    w.EndObject();
    w.EndObject();
    const std::string text = w.TakeText() + "\n";
    std::fwrite(text.data(), 1, text.size(), stdout);
    return kExitOk;
  }

  std::printf("bench: %s on %s, %d timed run%s per shape after %d warmup\n", TerminalSafe(model_path).c_str(),
              TerminalSafe(session->device_description()).c_str(), iterations, iterations == 1 ? "" : "s", warmup);
  std::vector<std::string> labels;
  size_t width = 5;
  for (const ShapeResult& r : results) {
    labels.push_back(ShapesText(*model, r.shapes));
    width = std::max(width, labels.back().size());
  }
  std::printf("%-*s %10s %10s %10s %6s %7s %8s %8s %6s %12s %12s\n", static_cast<int>(width), "shape", "min ms",
              "median ms", "p90 ms", "plans", "graphs", "replays", "outside", "syncs", "bytes h->d", "bytes d->h");
  for (size_t i = 0; i < results.size(); ++i) {
    const ShapeResult& r = results[i];
    std::printf("%-*s %10.3f %10.3f %10.3f %6lld %7lld %8lld %8lld %6lld %12lld %12lld\n", static_cast<int>(width),
                labels[i].c_str(), r.min_ms, r.median_ms, r.p90_ms, static_cast<long long>(r.plans_created),
                static_cast<long long>(r.timed.graphs_captured), static_cast<long long>(r.timed.graph_replays),
                static_cast<long long>(r.timed.launches_outside_graphs),
                static_cast<long long>(r.timed.device_synchronizations),
                static_cast<long long>(r.timed.bytes_host_to_device),
                static_cast<long long>(r.timed.bytes_device_to_host));
  }
  std::printf("(plans: made at that shape, warmup included; graphs ... bytes: over its timed runs)\n");
  if (session->device() == Device::kCuda && !stats.graph_fallback_reason.empty()) {
    std::printf("graphs: step by step: %s\n", TerminalSafe(stats.graph_fallback_reason).c_str());
  }
  return kExitOk;
}

}  // namespace grove::cli
