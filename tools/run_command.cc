// `grove run`: runs a model on .npy inputs, prints a line per output and the
// session's counters, and optionally saves the outputs as .npy files.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <system_error>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "grove/grove.h"
#include "grove/npy.h"
#include "command_line.h"
#include "json_writer.h"

namespace grove::cli {
namespace {

constexpr char kUsage[] =
    "Usage: grove run MODEL.grove --input NAME=FILE.npy ... [flags]\n"
    "       grove run MODEL.grove --case DIR [--case DIR ...] [flags]\n"
    "\n"
    "Runs MODEL once per --repeat on the given inputs (one --input per model\n"
    "input) and prints each output's dtype, shape, range and first values.\n"
    "With --case, runs each case directory's inputs in turn in one session.\n"
    "\n"
    "Flags:\n"
    "  --input NAME=FILE.npy  an input, by model input name (repeatable); a sequence\n"
    "                         input takes a comma-separated list, one file per item\n"
    "  --case DIR             a set of inputs: DIR/NAME.npy for each model input\n"
    "                         (tensor inputs only; no other .npy files); repeatable,\n"
    "                         run in order; not with --input\n"
    "  --output-dir DIR       write each output to DIR/NAME.npy, a sequence's items\n"
    "                         to DIR/NAME_0.npy, ... (DIR is created); with --case,\n"
    "                         to DIR/BASENAME/NAME.npy (BASENAME: the case directory's\n"
    "                         name, which must differ between cases); bf16 outputs\n"
    "                         are widened to f32, NumPy has no bf16; strings are\n"
    "                         written as unicode arrays ('<U{n}')\n"
    "  --json                 print one JSON object instead: \"runs\" (per run: case,\n"
    "                         time_ms, graphs_captured, graph_replays,\n"
    "                         launches_outside_graphs, copies, syncs, plans_created,\n"
    "                         ..., outputs) and \"totals\" (the same over the session,\n"
    "                         arena_bytes, graph_bytes)\n"
    "  --device cpu|cuda|auto|emulated-cuda\n"
    "                         where to run (default auto: CUDA if present, else\n"
    "                         CPU); emulated-cuda: the CUDA path, graphs included,\n"
    "                         with its kernels run as host C++ (slow; no GPU needed)\n"
    "  --threads N            CPU: split each large kernel's work over N threads,\n"
    "                         this one included (default 1; 0: one per core)\n"
    "  --repeat N             run N times (each case): the first run's time (plans,\n"
    "                         kernel loading) and the mean of the others (default 1)\n"
    "  --trace FILE.json      write a trace of the runs (Chrome trace event JSON:\n"
    "                         open it in ui.perfetto.dev or chrome://tracing): one\n"
    "                         event per run, per step run (op, node, shapes,\n"
    "                         backend), per segment, body call, plan and copy\n"
    "  --trace-runs N         the trace keeps the last N runs (default 100)\n"
    "  --log LEVEL            print the session's messages at LEVEL or above to\n"
    "                         stderr: debug (plans made, graphs captured), info\n"
    "                         (plans dropped), warning (CPU fallbacks, segments\n"
    "                         without a graph, pinned buckets), error\n"
    "  --strict-device        fail instead of running ops without a CUDA kernel\n"
    "                         on the CPU\n"
    "  --gemm-math f32|tf32|bf16|f16\n"
    "                         CUDA: how f32 matrix products multiply (default f32;\n"
    "                         the others round inputs and accumulate in f32)\n"
    "  --kernel-table FILE    CUDA: a kernel dispatch table written by grove tune,\n"
    "                         looked up before the shipped tables (a bad file\n"
    "                         is an error)\n"
    "  --graphs auto|on|off   CUDA: capture each straight-line segment as a CUDA\n"
    "                         graph on its first run and replay it after (default\n"
    "                         auto: where the device can; on: fail where it cannot)\n"
    "  --bucket SYMBOL=RULE   CUDA graphs: how SYMBOL's values group into shape\n"
    "                         buckets, whose shapes share one arena and one graph\n"
    "                         per segment: auto (powers of two up to 256, then\n"
    "                         multiples of 256; the default), pow2, step:N, a list\n"
    "                         of bounds A,B,C, or exact; SYMBOL * for all others\n"
    "  --deadline-ms N        each run must end within N milliseconds, else it\n"
    "                         stops with DEADLINE_EXCEEDED (checked between steps\n"
    "                         and loop iterations; default: no deadline)\n";

constexpr int kValuesShown = 6;

bool IsFloat(DType dtype) {
  return dtype == DType::kF32 || dtype == DType::kF64 || dtype == DType::kF16 || dtype == DType::kBF16;
}

std::string FormatValue(double v) { return absl::StrFormat("%.6g", v); }

// Integers are summarized exactly, never through a double: i64's largest
// value rounds to 2^63 as a double, which no i64 holds (converting it back
// printed INT64_MIN).
template <typename I>
void AppendIntegerSummary(const I* v, int64_t n, std::string* line) {
  I lo = v[0], hi = v[0];
  long double sum = 0;
  for (int64_t i = 0; i < n; ++i) {
    lo = std::min(lo, v[i]);
    hi = std::max(hi, v[i]);
    sum += static_cast<long double>(v[i]);
  }
  absl::StrAppend(line, " min=", lo, " max=", hi,
                  absl::StrFormat(" mean=%.6g", static_cast<double>(sum / static_cast<long double>(n))));
  std::vector<std::string> shown;
  for (int64_t i = 0; i < n && i < kValuesShown; ++i) shown.push_back(absl::StrCat(v[i]));
  absl::StrAppend(line, " values=[", absl::StrJoin(shown, ", "), n > kValuesShown ? ", ...]" : "]");
}

// A string as the summary shows it: quoted, control characters and quotes
// escaped (UTF-8 kept), cut after kStringBytesShown bytes at a character
// boundary.
std::string QuotedString(absl::string_view s) {
  constexpr size_t kStringBytesShown = 40;
  bool cut = false;
  if (s.size() > kStringBytesShown) {
    size_t end = kStringBytesShown;
    while (end > 0 && (static_cast<unsigned char>(s[end]) & 0xC0) == 0x80) --end;
    s = s.substr(0, end);
    cut = true;
  }
  return absl::StrCat("\"", absl::Utf8SafeCHexEscape(s), cut ? "\"..." : "\"");
}

// "y: f32[3,4] min=0.01 max=0.9 mean=0.25 values=[0.1, 0.2, ...]";
// strings: "y: string[3] values=["a", "b\n", ...]".
std::string Summarize(const std::string& name, const TensorView& t) {
  std::string line = absl::StrCat(TerminalSafe(name), ": ", DTypeName(t.dtype), ShapeString(t.shape));
  const int64_t n = t.num_elements();
  if (n == 0) return absl::StrCat(line, " (empty)");
  if (t.dtype == DType::kString) {
    std::vector<std::string> shown;
    for (int64_t i = 0; i < n && i < kValuesShown; ++i) shown.push_back(QuotedString(t.as<const StringRef>()[i]));
    return absl::StrCat(line, " values=[", absl::StrJoin(shown, ", "), n > kValuesShown ? ", ...]" : "]");
  }
  if (!IsFloat(t.dtype)) {
    // Every integer dtype (and bool) widens exactly to i64, but u64 only to itself.
    const DType exact = t.dtype == DType::kU64 ? DType::kU64 : DType::kI64;
    absl::StatusOr<Tensor> wide = Tensor::CastOf(t, exact);
    if (!wide.ok()) return absl::StrCat(line, " (", wide.status().message(), ")");
    if (exact == DType::kU64) {
      AppendIntegerSummary(wide->as<uint64_t>(), n, &line);
    } else {
      AppendIntegerSummary(wide->as<int64_t>(), n, &line);
    }
    return line;
  }
  absl::StatusOr<Tensor> wide = Tensor::CastOf(t, DType::kF64);
  if (!wide.ok()) return absl::StrCat(line, " (", wide.status().message(), ")");
  const double* v = wide->as<double>();
  double lo = std::numeric_limits<double>::infinity(), hi = -lo, sum = 0;
  int64_t finite = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (!std::isfinite(v[i])) continue;
    lo = std::min(lo, v[i]);
    hi = std::max(hi, v[i]);
    sum += v[i];
    ++finite;
  }
  if (finite > 0) {
    absl::StrAppend(&line, " min=", FormatValue(lo), " max=", FormatValue(hi),
                    absl::StrFormat(" mean=%.6g", sum / static_cast<double>(finite)));
  }
  if (finite < n) absl::StrAppend(&line, " non-finite=", n - finite);
  std::vector<std::string> shown;
  for (int64_t i = 0; i < n && i < kValuesShown; ++i) shown.push_back(FormatValue(v[i]));
  absl::StrAppend(&line, " values=[", absl::StrJoin(shown, ", "), n > kValuesShown ? ", ...]" : "]");
  return line;
}

// The file name of each output (NpyFileName), or an error naming the first
// two outputs that map to one file, so nothing is written when any would be
// overwritten.
absl::StatusOr<std::vector<std::string>> OutputFileNames(const std::vector<std::string>& names) {
  std::vector<std::string> files;
  std::map<std::string, size_t> first;  // file name -> index in names
  for (size_t i = 0; i < names.size(); ++i) {
    files.push_back(NpyFileName(names[i]));
    auto [it, inserted] = first.emplace(files.back(), i);
    if (!inserted) {
      return absl::InvalidArgumentError(absl::StrCat("outputs '", names[it->second], "' and '", names[i],
                                                     "' both map to the file name ", files.back(),
                                                     "; nothing was written"));
    }
  }
  return files;
}

double Milliseconds(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

// A run's outputs: one named tensor per output, or per item of a sequence
// output ("tokens_0", "tokens_1", ...); `notes` gets a line for each
// sequence (its DebugString) and each absent optional.
std::vector<std::pair<std::string, TensorView>> CollectOutputs(const Model& model, bool values_api,
                                                               const std::vector<TensorView>& result_views,
                                                               const std::vector<Value>& result_values,
                                                               std::vector<std::string>* notes) {
  const std::vector<TensorInfo>& output_infos = model.outputs();
  std::vector<std::pair<std::string, TensorView>> outputs;
  const size_t num_outputs = values_api ? result_values.size() : result_views.size();
  for (size_t i = 0; i < num_outputs; ++i) {
    const std::string name = i < output_infos.size() ? output_infos[i].name : absl::StrCat("output", i);
    if (!values_api) {
      outputs.emplace_back(name, result_views[i]);
      continue;
    }
    const Value& v = result_values[i];
    if (!v.has_value()) {
      notes->push_back(absl::StrCat(TerminalSafe(name), ": ", v.DebugString()));
    } else if (v.is_sequence()) {
      notes->push_back(absl::StrCat(TerminalSafe(name), ": ", v.DebugString()));
      for (size_t k = 0; k < v.items().size(); ++k) outputs.emplace_back(absl::StrCat(name, "_", k), v.items()[k].view());
    } else {
      outputs.emplace_back(name, v.tensor().view());
    }
  }
  return outputs;
}

// Writes each output to DIR/NAME.npy (DIR is created); refuses two outputs
// that map to one file before anything is written.
absl::Status WriteOutputs(const std::string& dir, const std::vector<std::pair<std::string, TensorView>>& outputs) {
  std::vector<std::string> names;
  for (const auto& [name, view] : outputs) names.push_back(name);
  absl::StatusOr<std::vector<std::string>> files = OutputFileNames(names);
  if (!files.ok()) return files.status();
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return absl::InvalidArgumentError(absl::StrCat("cannot create --output-dir ", dir, ": ", ec.message()));
  for (size_t i = 0; i < outputs.size(); ++i) {
    const TensorView& view = outputs[i].second;
    const std::string path = absl::StrCat(dir, "/", (*files)[i]);
    absl::Status s;
    if (view.dtype == DType::kBF16) {
      absl::StatusOr<Tensor> wide = Tensor::CastOf(view, DType::kF32);
      s = wide.ok() ? WriteNpy(path, wide->view()) : wide.status();
    } else {
      s = WriteNpy(path, view);
    }
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

// A case directory's base name: "a/b/" and "a/b" give "b", "." the current
// directory's name.
// `dir` made absolute and normal ("a/./b/" and "a/b/" alike).
std::filesystem::path NormalPath(const std::string& dir) {
  std::error_code ec;
  std::filesystem::path p = std::filesystem::absolute(dir, ec);
  if (ec) p = dir;
  return p.lexically_normal();
}

std::string CaseBaseName(const std::string& dir) {
  std::filesystem::path p = NormalPath(dir);
  if (!p.has_filename()) p = p.parent_path();
  return p.filename().string();
}

// Whether two --case arguments name one directory (a second pass over it).
bool SameDirectory(const std::string& a, const std::string& b) {
  std::error_code ec;
  if (std::filesystem::equivalent(a, b, ec)) return true;
  // Not there (the run then fails on reading it): compare the paths.
  return NormalPath(a) == NormalPath(b);
}

// One set of inputs: a case directory's, or the --input files'.
struct InputSet {
  std::string case_dir;  // "" for --input
  std::vector<Tensor> tensors;
  std::vector<Value> values;
};

// The --input files, read and checked against the model; -1 or an exit code.
int ReadInputFlags(const std::vector<std::pair<std::string, std::string>>& input_files, const Model& model,
                   const Session& session, InputSet* set) {
  const std::vector<TensorInfo>& input_infos = model.inputs();
  set->values.assign(input_infos.size(), Value());
  set->tensors.assign(input_infos.size(), Tensor());
  std::vector<bool> given(input_infos.size(), false);
  BoundSymbols bound_symbols;
  for (const auto& [name, file] : input_files) {
    absl::StatusOr<int> index = session.InputIndex(name);
    if (!index.ok()) {
      std::vector<std::string> names;
      for (const TensorInfo& info : input_infos) names.push_back(absl::StrCat("'", info.name, "'"));
      return Fail(absl::StrCat("the model has no input '", name, "' (its inputs: ", absl::StrJoin(names, ", "), ")"));
    }
    if (given[*index]) return Fail(absl::StrCat("input '", name, "' given more than once"));
    given[*index] = true;
    const TensorInfo& info = input_infos[*index];
    if (info.kind != ValueKind::kTensor) {
      if (info.kind != ValueKind::kSequence) {
        return Fail(absl::StrCat("input '", name, "' is an ", ValueKindName(info.kind),
                                 "; grove run takes tensors and sequences (use Session::RunValues)"));
      }
      // A sequence input is a comma-separated list of .npy files, one per item.
      std::vector<Tensor> items;
      for (absl::string_view item : absl::StrSplit(file, ',', absl::SkipEmpty())) {
        absl::Status mismatch;
        absl::StatusOr<Tensor> t = ReadNpy(std::string(item), [&](const NpyHeader& h) {
          return mismatch = CheckInputHeader(h, info, model.symbols(), &bound_symbols);
        });
        if (!mismatch.ok()) return Fail(absl::StrCat("input '", name, "': ", item, " ", mismatch.message()));
        if (!t.ok()) return Fail(absl::StrCat("input '", name, "': ", t.status().message()));
        items.push_back(*std::move(t));
      }
      set->values[*index] = Value::Sequence(info.dtype, std::move(items));
      continue;
    }
    absl::StatusOr<Tensor> tensor = ReadInputNpy(file, info, model, &bound_symbols);
    if (!tensor.ok()) return Fail(tensor.status());
    set->tensors[*index] = *std::move(tensor);
    set->values[*index] = Value(set->tensors[*index]);
  }
  std::vector<std::string> missing;
  for (size_t i = 0; i < input_infos.size(); ++i) {
    if (!given[i]) missing.push_back(absl::StrCat("'", input_infos[i].name, "' ", DeclaredType(input_infos[i])));
  }
  if (!missing.empty()) return Fail(absl::StrCat("missing --input for ", absl::StrJoin(missing, ", ")));
  return -1;
}

void WriteOutputsJson(const std::vector<std::pair<std::string, TensorView>>& outputs, JsonWriter* w) {
  w->BeginArray();
  for (const auto& [name, view] : outputs) {
    w->BeginObject();
    w->Key("name");
    w->String(name);
    w->Key("dtype");
    w->String(DTypeName(view.dtype));
    w->Key("shape");
    w->IntArray(view.shape);
    w->EndObject();
  }
  w->EndArray();
}

}  // namespace

int RunMain(absl::Span<const std::string> argv) {
  static constexpr FlagSpec kFlags[] = {
      {"input", kRepeatedValue}, {"case", kRepeatedValue},  {"output-dir", kValue},  {"device", kValue},
      {"repeat", kValue},        {"strict-device", kSwitch}, {"gemm-math", kValue},  {"deadline-ms", kValue},
      {"graphs", kValue},        {"bucket", kRepeatedValue}, {"json", kSwitch},          {"threads", kValue},
      {"trace", kValue},         {"trace-runs", kValue},     {"log", kValue},        {"kernel-table", kValue}};
  ParsedArgs args;
  if (int rc = ParseArgs(argv, kFlags, &args, kUsage); rc >= 0) return rc;
  if (args.positional.size() != 1) {
    return UsageError(args.positional.empty() ? "run: missing MODEL.grove"
                                              : absl::StrCat("run: unexpected argument '", args.positional[1], "'"));
  }
  const std::string& model_path = args.positional[0];
  if (args.Has("case") && args.Has("input")) {
    return UsageError("run: --case and --input do not go together (a case directory holds every input)");
  }

  SessionOptions options;
  bool emulated_cuda = false;
  if (int rc = SessionOptionsFromFlags(args, &options, &emulated_cuda); rc >= 0) return rc;
  if (args.Has("deadline-ms") &&
      (!absl::SimpleAtoi(args.Values("deadline-ms")[0], &options.run_deadline_ms) || options.run_deadline_ms < 1)) {
    return UsageError(
        absl::StrCat("--deadline-ms wants a positive number of milliseconds, not '", args.Values("deadline-ms")[0], "'"));
  }
  int repeat = 1;
  if (args.Has("repeat") && (!absl::SimpleAtoi(args.Values("repeat")[0], &repeat) || repeat < 1)) {
    return UsageError(absl::StrCat("--repeat wants a positive integer, not '", args.Values("repeat")[0], "'"));
  }
  std::vector<std::pair<std::string, std::string>> input_files;
  for (const std::string& spec : args.Values("input")) {
    std::string name, file;
    if (!SplitAssignment(spec, &name, &file) || file.empty()) {
      return UsageError(absl::StrCat("--input wants NAME=FILE.npy, not '", spec, "'"));
    }
    input_files.emplace_back(name, file);
  }
  const std::vector<std::string>& case_dirs = args.Values("case");
  for (const std::string& dir : case_dirs) {
    if (dir.empty()) return UsageError("--case wants a directory, not ''");
  }
  const bool json = args.Has("json");
  const std::string output_dir = args.Has("output-dir") ? args.Values("output-dir")[0] : std::string();
  if (args.Has("output-dir")) {
    // Each case writes OUTDIR/BASENAME/: two directories with one base name
    // would overwrite each other. One directory given again (a second pass
    // over the same inputs) writes its subdirectory again, the last run's
    // outputs winning.
    std::map<std::string, std::string> seen;  // base name -> case dir
    for (const std::string& dir : case_dirs) {
      auto [it, inserted] = seen.emplace(CaseBaseName(dir), dir);
      if (!inserted && !SameDirectory(it->second, dir)) {
        return UsageError(absl::StrCat("--case ", it->second, " and --case ", dir, " have the same base name '",
                                       it->first, "' and would write the same --output-dir subdirectory"));
      }
    }
  }

  std::shared_ptr<const Model> model;
  std::unique_ptr<Session> session;
  if (int rc = LoadModelAndSession(model_path, options, emulated_cuda, &model, &session); rc >= 0) return rc;

  if (args.Has("output-dir")) {
    // Two outputs that would share a file are refused before the run.
    std::vector<std::string> names;
    for (const TensorInfo& info : model->outputs()) {
      if (info.kind == ValueKind::kTensor) names.push_back(info.name);
    }
    if (absl::StatusOr<std::vector<std::string>> files = OutputFileNames(names); !files.ok()) {
      return Fail(files.status());
    }
  }

  // Sequences and optionals go through RunValues.
  bool values_api = false;
  for (const TensorInfo& info : model->inputs()) values_api |= info.kind != ValueKind::kTensor;
  for (const TensorInfo& info : model->outputs()) values_api |= info.kind != ValueKind::kTensor;
  // Every input set is read and checked before anything runs.
  std::vector<InputSet> sets;
  if (case_dirs.empty()) {
    sets.emplace_back();
    if (int rc = ReadInputFlags(input_files, *model, *session, &sets.back()); rc >= 0) return rc;
  } else {
    for (const std::string& dir : case_dirs) {
      absl::StatusOr<std::vector<Tensor>> tensors = ReadCaseDir(dir, *model);
      if (!tensors.ok()) return Fail(tensors.status());
      InputSet set;
      set.case_dir = dir;
      set.tensors = *std::move(tensors);
      for (const Tensor& t : set.tensors) set.values.emplace_back(t);
      sets.push_back(std::move(set));
    }
  }

  JsonWriter w;
  w.BeginObject();
  w.Key("model");
  w.String(model_path);
  w.Key("device");
  w.String(session->device() == Device::kCuda ? "cuda" : "cpu");
  w.Key("device_description");
  w.String(session->device_description());
  w.Key("runs");
  w.BeginArray();
  const SessionStats initial = session->stats();
  double all_ms = 0;
  std::vector<std::vector<std::vector<int64_t>>> signatures;  // distinct input shapes, for the arena bytes
  for (const InputSet& set : sets) {
    std::vector<TensorView> views;
    std::vector<std::vector<int64_t>> signature;
    for (const Tensor& t : set.tensors) {
      views.push_back(t.view());
      signature.push_back(t.shape());
    }
    if (std::find(signatures.begin(), signatures.end(), signature) == signatures.end()) signatures.push_back(signature);
    std::vector<TensorView> result_views;
    std::vector<Value> result_values;
    double first_ms = 0, total_ms = 0;
    for (int r = 0; r < repeat; ++r) {
      const SessionStats before = session->stats();
      const auto start = std::chrono::steady_clock::now();
      absl::Status status;
      if (values_api) {
        absl::StatusOr<std::vector<Value>> result = session->RunValues(set.values);
        status = result.status();
        if (result.ok()) result_values = *std::move(result);
      } else {
        absl::StatusOr<std::vector<TensorView>> result = session->Run(views);
        status = result.status();
        if (result.ok()) result_views = *std::move(result);
      }
      const double ms = Milliseconds(std::chrono::steady_clock::now() - start);
      if (!status.ok()) {
        return Fail(absl::StrCat(set.case_dir.empty() ? "" : absl::StrCat("case ", set.case_dir, ": "),
                                 "run failed: ", status.message()));
      }
      all_ms += ms;
      if (r == 0) {
        first_ms = ms;  // plan creation and kernel loading happen here
      } else {
        total_ms += ms;
      }
      if (json) {
        std::vector<std::string> notes;
        w.BeginObject();
        w.Key("case");
        if (set.case_dir.empty()) {
          w.Null();
        } else {
          w.String(set.case_dir);
        }
        w.Key("time_ms");
        w.Double(ms);
        WriteCounters(StatsSince(before, session->stats()), &w);
        w.Key("outputs");
        WriteOutputsJson(CollectOutputs(*model, values_api, result_views, result_values, &notes), &w);
        w.EndObject();
      }
    }

    std::vector<std::string> notes;
    const std::vector<std::pair<std::string, TensorView>> outputs =
        CollectOutputs(*model, values_api, result_views, result_values, &notes);
    if (!json) {
      const char* indent = set.case_dir.empty() ? "" : "  ";
      if (!set.case_dir.empty()) std::printf("case %s:\n", TerminalSafe(set.case_dir).c_str());
      for (const std::string& note : notes) std::printf("%s%s\n", indent, note.c_str());
      for (const auto& [name, view] : outputs) std::printf("%s%s\n", indent, Summarize(name, view).c_str());
      if (repeat == 1) {
        std::printf("%stime: first run %.3f ms\n", indent, first_ms);
      } else {
        std::printf("%stime: first run %.3f ms, then mean %.3f ms over %d run%s\n", indent, first_ms,
                    total_ms / (repeat - 1), repeat - 1, repeat == 2 ? "" : "s");
      }
    }
    if (args.Has("output-dir")) {
      const std::string dir = set.case_dir.empty() ? output_dir : absl::StrCat(output_dir, "/", CaseBaseName(set.case_dir));
      if (absl::Status s = WriteOutputs(dir, outputs); !s.ok()) {
        return Fail(set.case_dir.empty() ? std::string(s.message())
                                         : absl::StrCat("case ", set.case_dir, ": ", s.message()));
      }
    }
  }
  const SessionStats stats = session->stats();
  if (!options.trace_path.empty()) {
    if (absl::Status s = session->WriteTrace(); !s.ok()) return Fail(absl::StrCat("--trace: ", s.message()));
  }

  if (json) {
    w.EndArray();
    w.Key("totals");
    w.BeginObject();
    w.Key("runs");
    w.Int(stats.runs - initial.runs);
    w.Key("time_ms");
    w.Double(all_ms);
    WriteCounters(StatsSince(initial, stats), &w);
    // CUDA: the session's stable arena, shared by every plan (the device
    // memory mapped for it). Elsewhere each plan has its own arena: the sum
    // over the distinct input signatures run (Reshape finds their cached
    // plans; models with sequence or optional inputs have no Reshape, so
    // null).
    w.Key("arena_bytes");
    uint64_t arena_bytes = 0;
    bool arena_known = true;
    const bool stable_arena = stats.arena_bytes > 0 && stats.arena_own_plans == 0;
    if (stable_arena) arena_bytes = static_cast<uint64_t>(stats.arena_bytes);
    for (const auto& signature : signatures) {
      if (stable_arena) break;
      absl::StatusOr<MemoryReport> report = values_api ? absl::UnimplementedError("") : session->Reshape(signature);
      if (!report.ok()) {
        arena_known = false;
        break;
      }
      arena_bytes += report->arena_bytes;
    }
    if (arena_known) {
      w.Uint(arena_bytes);
    } else {
      w.Null();
    }
    w.Key("graph_bytes");
    w.Int(stats.graph_bytes);
    w.Key("graphs_held");
    w.Int(stats.graphs_held);
    w.Key("graph_fallback_reason");
    w.String(stats.graph_fallback_reason);
    w.Key("bucket_fallback_reason");
    w.String(stats.bucket_fallback_reason);
    w.Key("control_flow_fallback_reason");
    w.String(stats.control_flow_fallback_reason);
    w.EndObject();
    w.EndObject();
    const std::string text = w.TakeText() + "\n";
    std::fwrite(text.data(), 1, text.size(), stdout);
    return kExitOk;
  }
  if (!options.trace_path.empty()) std::printf("trace: %s\n", TerminalSafe(options.trace_path).c_str());
  std::printf("session: device %s, runs %lld, plans created %lld, plan cache hits %lld, kernels run %lld\n",
              session->device() == Device::kCuda ? "cuda" : "cpu", static_cast<long long>(stats.runs),
              static_cast<long long>(stats.plans_created), static_cast<long long>(stats.plan_cache_hits),
              static_cast<long long>(stats.kernels_run));
  if (session->device() == Device::kCuda) {
    std::printf("cuda: %s, cpu fallback steps %lld, bytes host->device %lld, device->host %lld\n",
                session->device_description().c_str(), static_cast<long long>(stats.cpu_fallback_steps),
                static_cast<long long>(stats.bytes_host_to_device), static_cast<long long>(stats.bytes_device_to_host));
    std::printf("graphs: captured %lld, replays %lld, held %lld (%lld nodes), launches outside graphs %lld%s%s\n",
                static_cast<long long>(stats.graphs_captured), static_cast<long long>(stats.graph_replays),
                static_cast<long long>(stats.graphs_held), static_cast<long long>(stats.graph_nodes),
                static_cast<long long>(stats.launches_outside_graphs),
                stats.graph_fallback_reason.empty() ? "" : "; step by step: ", stats.graph_fallback_reason.c_str());
    if (stats.arena_bytes > 0 || stats.arena_own_plans > 0) {
      std::printf("arena: %lld bytes mapped for every plan and graph (stable addresses)%s\n",
                  static_cast<long long>(stats.arena_bytes),
                  stats.arena_own_plans > 0
                      ? absl::StrCat(", ", stats.arena_own_plans, " plan(s) with an arena of their own").c_str()
                      : "");
    }
    if (stats.control_flow_in_graphs > 0 || stats.control_flow_host_driven > 0) {
      std::printf("control flow: %lld If/Loop step runs as conditional graph nodes, %lld host-driven%s%s\n",
                  static_cast<long long>(stats.control_flow_in_graphs),
                  static_cast<long long>(stats.control_flow_host_driven),
                  stats.control_flow_fallback_reason.empty() ? "" : "; host-driven: ",
                  TerminalSafe(stats.control_flow_fallback_reason).c_str());
    }
    if (stats.buckets_made > 0 || !stats.bucket_fallback_reason.empty()) {
      std::printf("buckets: %lld made, %lld runs in them, padding %lld of %lld input bytes%s%s\n",
                  static_cast<long long>(stats.buckets_made), static_cast<long long>(stats.bucketed_runs),
                  static_cast<long long>(stats.bucket_padding_bytes), static_cast<long long>(stats.bucket_input_bytes),
                  stats.bucket_fallback_reason.empty() ? "" : "; exact shapes: ", stats.bucket_fallback_reason.c_str());
    }
  }
  return kExitOk;
}

}  // namespace grove::cli
