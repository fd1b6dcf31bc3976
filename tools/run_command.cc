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

namespace grove::cli {
namespace {

constexpr char kUsage[] =
    "Usage: grove run MODEL.grove --input NAME=FILE.npy ... [flags]\n"
    "\n"
    "Runs MODEL once per --repeat on the given inputs (one --input per model\n"
    "input) and prints each output's dtype, shape, range and first values.\n"
    "\n"
    "Flags:\n"
    "  --input NAME=FILE.npy  an input, by model input name (repeatable); a sequence\n"
    "                         input takes a comma-separated list, one file per item\n"
    "  --output-dir DIR       write each output to DIR/NAME.npy, a sequence's items\n"
    "                         to DIR/NAME_0.npy, ... (DIR is created); bf16 outputs\n"
    "                         are widened to f32, NumPy has no bf16; strings are\n"
    "                         written as unicode arrays ('<U{n}')\n"
    "  --device cpu|cuda|auto where to run (default auto: CUDA if present, else CPU)\n"
    "  --repeat N             run N times: the first run's time (plans, kernel loading)\n"
    "                         and the mean of the others (default 1)\n"
    "  --strict-device        fail instead of running ops without a CUDA kernel\n"
    "                         on the CPU\n"
    "  --gemm-math f32|tf32|bf16|f16\n"
    "                         CUDA: how f32 matrix products multiply (default f32;\n"
    "                         the others round inputs and accumulate in f32)\n"
    "  --graphs auto|on|off   CUDA: capture each straight-line segment as a CUDA\n"
    "                         graph on its first run and replay it after (default\n"
    "                         auto: where the device can; on: fail where it cannot)\n"
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

// Output names become file names: only [A-Za-z0-9_.-] is kept (anything
// else, path separators and control characters included, becomes '_'), a
// leading '.' (".", "..", hidden files) gets a '_' before it, and a name
// longer than kMaxFileNameBytes is cut, so the file stays inside the
// directory whatever the model calls its outputs.
std::string FileNameFor(const std::string& output_name) {
  constexpr size_t kMaxFileNameBytes = 200;  // of NAME_MAX's 255, with room for ".npy"
  std::string name = output_name.substr(0, kMaxFileNameBytes);
  for (char& c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
                    c == '-' || c == '.';
    if (!ok) c = '_';
  }
  if (name.empty() || name[0] == '.') name.insert(0, "_");
  return name + ".npy";
}

// The file name of each output (FileNameFor), or an error naming the first
// two outputs that map to one file, so nothing is written when any would be
// overwritten.
absl::StatusOr<std::vector<std::string>> OutputFileNames(const std::vector<std::string>& names) {
  std::vector<std::string> files;
  std::map<std::string, size_t> first;  // file name -> index in names
  for (size_t i = 0; i < names.size(); ++i) {
    files.push_back(FileNameFor(names[i]));
    auto [it, inserted] = first.emplace(files.back(), i);
    if (!inserted) {
      return absl::InvalidArgumentError(absl::StrCat("outputs '", names[it->second], "' and '", names[i],
                                                     "' both map to the file name ", files.back(),
                                                     "; nothing was written"));
    }
  }
  return files;
}

// Refuses an input file whose header does not fit the model's input, before
// its data is read or allocated: the dtype (f32 for a bf16 input: NumPy has
// no bf16), and for a tensor input the rank, each fixed dim, and each
// symbolic dim within its symbol's range and equal to what an earlier input
// bound it to (`bound`, symbol name -> value and the input that bound it).
absl::Status CheckInputHeader(const NpyHeader& h, const TensorInfo& info, const std::vector<SymbolInfo>& symbols,
                              std::map<std::string, std::pair<int64_t, std::string>>* bound) {
  const std::string holds = absl::StrCat("holds ", DTypeName(h.dtype), ShapeString(h.shape));
  const std::string wants = absl::StrCat("but the model expects ", DeclaredType(info));
  const bool widened_bf16 = info.kind == ValueKind::kTensor && info.dtype == DType::kBF16 && h.dtype == DType::kF32;
  if (h.dtype != info.dtype && !widened_bf16) {
    return absl::InvalidArgumentError(absl::StrCat(holds, " ", wants));
  }
  if (info.kind != ValueKind::kTensor) return absl::OkStatus();  // a sequence's items have no one shape
  if (h.shape.size() != info.shape.size()) {
    return absl::InvalidArgumentError(absl::StrCat(holds, " (rank ", h.shape.size(), ") ", wants, " (rank ",
                                                   info.shape.size(), ")"));
  }
  for (size_t k = 0; k < h.shape.size(); ++k) {
    const DimInfo& want = info.shape[k];
    const int64_t got = h.shape[k];
    if (!want.is_symbolic()) {
      if (got != want.value) {
        return absl::InvalidArgumentError(absl::StrCat(holds, " ", wants, ": dim ", k, " is ", got, ", wants ",
                                                       want.value));
      }
      continue;
    }
    const std::string symbol = TerminalSafe(want.symbol);
    for (const SymbolInfo& sym : symbols) {
      if (sym.name == want.symbol && (got < sym.min || got > sym.max)) {
        return absl::InvalidArgumentError(absl::StrCat(holds, " ", wants, ": dim ", k, " (", symbol, ") is ", got,
                                                       ", outside ", symbol, "'s range ", sym.min, "..", sym.max));
      }
    }
    auto [it, inserted] = bound->emplace(want.symbol, std::make_pair(got, info.name));
    if (!inserted && it->second.first != got) {
      return absl::InvalidArgumentError(absl::StrCat(holds, " ", wants, ": dim ", k, " (", symbol, ") is ", got,
                                                     " but input '", it->second.second, "' gives ", symbol, " = ",
                                                     it->second.first));
    }
  }
  return absl::OkStatus();
}


double Milliseconds(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

}  // namespace

int RunMain(absl::Span<const std::string> argv) {
  static constexpr FlagSpec kFlags[] = {
      {"input", kRepeatedValue}, {"output-dir", kValue}, {"device", kValue}, {"repeat", kValue},
      {"strict-device", kSwitch}, {"gemm-math", kValue}, {"deadline-ms", kValue}, {"graphs", kValue}};
  ParsedArgs args;
  if (int rc = ParseArgs(argv, kFlags, &args, kUsage); rc >= 0) return rc;
  if (args.positional.size() != 1) {
    return UsageError(args.positional.empty() ? "run: missing MODEL.grove"
                                              : absl::StrCat("run: unexpected argument '", args.positional[1], "'"));
  }
  const std::string& model_path = args.positional[0];

  SessionOptions options;
  if (args.Has("device")) {
    absl::StatusOr<Device> device = ParseDevice(args.Values("device")[0]);
    if (!device.ok()) return UsageError(device.status().message());
    options.device = *device;
  }
  options.strict_device = args.Has("strict-device");
  if (args.Has("gemm-math")) {
    absl::StatusOr<GemmMath> math = ParseGemmMath(args.Values("gemm-math")[0]);
    if (!math.ok()) return UsageError(math.status().message());
    options.cuda_gemm_math = *math;
  }
  if (args.Has("graphs")) {
    absl::StatusOr<GraphMode> graphs = ParseGraphMode(args.Values("graphs")[0]);
    if (!graphs.ok()) return UsageError(graphs.status().message());
    options.cuda_graphs = *graphs;
  }
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

  absl::StatusOr<std::shared_ptr<const Model>> model = Model::LoadFromFile(model_path);
  if (!model.ok()) return Fail(absl::StrCat("cannot load model ", model_path, ": ", model.status().message()));
  absl::StatusOr<std::unique_ptr<Session>> session = Session::Create(*model, options);
  if (options.device == Device::kCuda && (!session.ok() || (*session)->device() != Device::kCuda)) {
    return Fail(absl::StrCat("CUDA backend not available",
                             session.ok() ? "" : absl::StrCat(": ", session.status().message())));
  }
  if (!session.ok()) return Fail(absl::StrCat("cannot create a session: ", session.status().message()));

  if (args.Has("output-dir")) {
    // Two outputs that would share a file are refused before the run.
    std::vector<std::string> names;
    for (const TensorInfo& info : (*model)->outputs()) {
      if (info.kind == ValueKind::kTensor) names.push_back(info.name);
    }
    if (absl::StatusOr<std::vector<std::string>> files = OutputFileNames(names); !files.ok()) {
      return Fail(files.status());
    }
  }

  const std::vector<TensorInfo>& input_infos = (*model)->inputs();
  // Sequences and optionals go through RunValues; a sequence input is a
  // comma-separated list of .npy files (one per item).
  bool values_api = false;
  for (const TensorInfo& info : input_infos) values_api |= info.kind != ValueKind::kTensor;
  for (const TensorInfo& info : (*model)->outputs()) values_api |= info.kind != ValueKind::kTensor;
  std::vector<Value> value_inputs(input_infos.size());
  std::vector<Tensor> inputs(input_infos.size());
  std::vector<bool> given(input_infos.size(), false);
  std::map<std::string, std::pair<int64_t, std::string>> bound_symbols;  // symbol -> value, input
  for (const auto& [name, file] : input_files) {
    absl::StatusOr<int> index = (*session)->InputIndex(name);
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
      std::vector<Tensor> items;
      for (absl::string_view item : absl::StrSplit(file, ',', absl::SkipEmpty())) {
        absl::Status mismatch;
        absl::StatusOr<Tensor> t = ReadNpy(std::string(item), [&](const NpyHeader& h) {
          return mismatch = CheckInputHeader(h, info, (*model)->symbols(), &bound_symbols);
        });
        if (!mismatch.ok()) return Fail(absl::StrCat("input '", name, "': ", item, " ", mismatch.message()));
        if (!t.ok()) return Fail(absl::StrCat("input '", name, "': ", t.status().message()));
        items.push_back(*std::move(t));
      }
      value_inputs[*index] = Value::Sequence(info.dtype, std::move(items));
      continue;
    }
    // The header is checked against the model before any data is read: a
    // 16 GiB file of the wrong shape is refused at once.
    absl::Status mismatch;
    absl::StatusOr<Tensor> tensor = ReadNpy(file, [&](const NpyHeader& h) {
      return mismatch = CheckInputHeader(h, info, (*model)->symbols(), &bound_symbols);
    });
    if (!mismatch.ok()) return Fail(absl::StrCat("input '", name, "': ", file, " ", mismatch.message()));
    if (!tensor.ok()) return Fail(absl::StrCat("input '", name, "': ", tensor.status().message()));
    if (info.dtype == DType::kBF16 && tensor->dtype() == DType::kF32) {
      tensor = Tensor::CastOf(tensor->view(), DType::kBF16);  // NumPy has no bf16: accept f32 and round.
      if (!tensor.ok()) return Fail(absl::StrCat("input '", name, "': ", tensor.status().message()));
    }
    inputs[*index] = *std::move(tensor);
    value_inputs[*index] = Value(inputs[*index]);
  }
  std::vector<std::string> missing;
  for (size_t i = 0; i < input_infos.size(); ++i) {
    if (!given[i]) missing.push_back(absl::StrCat("'", input_infos[i].name, "' ", DeclaredType(input_infos[i])));
  }
  if (!missing.empty()) {
    return Fail(absl::StrCat("missing --input for ", absl::StrJoin(missing, ", ")));
  }

  std::vector<TensorView> views;
  for (const Tensor& t : inputs) views.push_back(t.view());
  std::vector<TensorView> result_views;
  std::vector<Value> result_values;
  double first_ms = 0, total_ms = 0;
  for (int r = 0; r < repeat; ++r) {
    const auto start = std::chrono::steady_clock::now();
    absl::Status status;
    if (values_api) {
      absl::StatusOr<std::vector<Value>> result = (*session)->RunValues(value_inputs);
      status = result.status();
      if (result.ok()) result_values = *std::move(result);
    } else {
      absl::StatusOr<std::vector<TensorView>> result = (*session)->Run(views);
      status = result.status();
      if (result.ok()) result_views = *std::move(result);
    }
    const double ms = Milliseconds(std::chrono::steady_clock::now() - start);
    if (!status.ok()) return Fail(absl::StrCat("run failed: ", status.message()));
    if (r == 0) {
      first_ms = ms;  // plan creation and kernel loading happen here
    } else {
      total_ms += ms;
    }
  }

  // One named tensor per output, or per item of a sequence output
  // ("tokens_0", "tokens_1", ...); an absent optional prints as such.
  const std::vector<TensorInfo>& output_infos = (*model)->outputs();
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
      std::printf("%s: %s\n", TerminalSafe(name).c_str(), v.DebugString().c_str());
    } else if (v.is_sequence()) {
      std::printf("%s: %s\n", TerminalSafe(name).c_str(), v.DebugString().c_str());
      for (size_t k = 0; k < v.items().size(); ++k) outputs.emplace_back(absl::StrCat(name, "_", k), v.items()[k].view());
    } else {
      outputs.emplace_back(name, v.tensor().view());
    }
  }
  for (const auto& [name, view] : outputs) std::printf("%s\n", Summarize(name, view).c_str());
  const SessionStats stats = (*session)->stats();
  if (repeat == 1) {
    std::printf("time: first run %.3f ms\n", first_ms);
  } else {
    std::printf("time: first run %.3f ms, then mean %.3f ms over %d run%s\n", first_ms, total_ms / (repeat - 1),
                repeat - 1, repeat == 2 ? "" : "s");
  }
  std::printf("session: device %s, runs %lld, plans created %lld, plan cache hits %lld, kernels run %lld\n",
              (*session)->device() == Device::kCuda ? "cuda" : "cpu", static_cast<long long>(stats.runs),
              static_cast<long long>(stats.plans_created), static_cast<long long>(stats.plan_cache_hits),
              static_cast<long long>(stats.kernels_run));
  if ((*session)->device() == Device::kCuda) {
    std::printf("cuda: %s, cpu fallback steps %lld, bytes host->device %lld, device->host %lld\n",
                (*session)->device_description().c_str(), static_cast<long long>(stats.cpu_fallback_steps),
                static_cast<long long>(stats.bytes_host_to_device), static_cast<long long>(stats.bytes_device_to_host));
    std::printf("graphs: captured %lld, replays %lld, held %lld (%lld nodes), launches outside graphs %lld%s%s\n",
                static_cast<long long>(stats.graphs_captured), static_cast<long long>(stats.graph_replays),
                static_cast<long long>(stats.graphs_held), static_cast<long long>(stats.graph_nodes),
                static_cast<long long>(stats.launches_outside_graphs),
                stats.graph_fallback_reason.empty() ? "" : "; step by step: ", stats.graph_fallback_reason.c_str());
  }

  if (args.Has("output-dir")) {
    const std::string dir = args.Values("output-dir")[0];
    // Checked again, now with the items of sequence outputs, before the
    // directory is made or anything written.
    std::vector<std::string> names;
    for (const auto& [name, view] : outputs) names.push_back(name);
    absl::StatusOr<std::vector<std::string>> files = OutputFileNames(names);
    if (!files.ok()) return Fail(files.status());
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) return Fail(absl::StrCat("cannot create --output-dir ", dir, ": ", ec.message()));
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
      if (!s.ok()) return Fail(s);
    }
  }
  return kExitOk;
}

}  // namespace grove::cli
