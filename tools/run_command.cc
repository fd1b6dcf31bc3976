// `grove run`: runs a model on .npy inputs, prints a line per output and the
// session's counters, and optionally saves the outputs as .npy files.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <memory>
#include <set>
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
    "                         the others round inputs and accumulate in f32)\n";

constexpr int kValuesShown = 6;

bool IsFloat(DType dtype) {
  return dtype == DType::kF32 || dtype == DType::kF64 || dtype == DType::kF16 || dtype == DType::kBF16;
}

std::string FormatValue(DType dtype, double v) {
  if (!IsFloat(dtype)) return absl::StrCat(static_cast<int64_t>(v));
  return absl::StrFormat("%.6g", v);
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
  std::string line = absl::StrCat(name, ": ", DTypeName(t.dtype), ShapeString(t.shape));
  const int64_t n = t.num_elements();
  if (n == 0) return absl::StrCat(line, " (empty)");
  if (t.dtype == DType::kString) {
    std::vector<std::string> shown;
    for (int64_t i = 0; i < n && i < kValuesShown; ++i) shown.push_back(QuotedString(t.as<const StringRef>()[i]));
    return absl::StrCat(line, " values=[", absl::StrJoin(shown, ", "), n > kValuesShown ? ", ...]" : "]");
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
    absl::StrAppend(&line, " min=", FormatValue(t.dtype, lo), " max=", FormatValue(t.dtype, hi),
                    absl::StrFormat(" mean=%.6g", sum / static_cast<double>(finite)));
  }
  if (finite < n) absl::StrAppend(&line, " non-finite=", n - finite);
  std::vector<std::string> shown;
  for (int64_t i = 0; i < n && i < kValuesShown; ++i) shown.push_back(FormatValue(t.dtype, v[i]));
  absl::StrAppend(&line, " values=[", absl::StrJoin(shown, ", "), n > kValuesShown ? ", ...]" : "]");
  return line;
}

// Output names become file names; keep them inside the directory.
std::string FileNameFor(const std::string& output_name) {
  std::string name = output_name;
  for (char& c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
                    c == '-' || c == '.';
    if (!ok) c = '_';
  }
  if (name.empty() || name[0] == '.') name.insert(0, "_");
  return name + ".npy";
}


double Milliseconds(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

}  // namespace

int RunMain(absl::Span<const std::string> argv) {
  static constexpr FlagSpec kFlags[] = {
      {"input", kRepeatedValue}, {"output-dir", kValue}, {"device", kValue}, {"repeat", kValue},
      {"strict-device", kSwitch}, {"gemm-math", kValue}};
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

  const std::vector<TensorInfo>& input_infos = (*model)->inputs();
  // Sequences and optionals go through RunValues; a sequence input is a
  // comma-separated list of .npy files (one per item).
  bool values_api = false;
  for (const TensorInfo& info : input_infos) values_api |= info.kind != ValueKind::kTensor;
  for (const TensorInfo& info : (*model)->outputs()) values_api |= info.kind != ValueKind::kTensor;
  std::vector<Value> value_inputs(input_infos.size());
  std::vector<Tensor> inputs(input_infos.size());
  std::vector<bool> given(input_infos.size(), false);
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
        absl::StatusOr<Tensor> t = ReadNpy(std::string(item));
        if (!t.ok()) return Fail(absl::StrCat("input '", name, "': ", t.status().message()));
        items.push_back(*std::move(t));
      }
      value_inputs[*index] = Value::Sequence(info.dtype, std::move(items));
      continue;
    }
    absl::StatusOr<Tensor> tensor = ReadNpy(file);
    if (!tensor.ok()) return Fail(absl::StrCat("input '", name, "': ", tensor.status().message()));
    const DType want = input_infos[*index].dtype;
    if (want == DType::kBF16 && tensor->dtype() == DType::kF32) {
      tensor = Tensor::CastOf(tensor->view(), DType::kBF16);  // NumPy has no bf16: accept f32 and round.
      if (!tensor.ok()) return Fail(absl::StrCat("input '", name, "': ", tensor.status().message()));
    }
    if (tensor->dtype() != want) {
      return Fail(absl::StrCat("input '", name, "': ", file, " holds ", DTypeName(tensor->dtype()),
                               ShapeString(tensor->shape()), " but the model expects ",
                               DeclaredType(input_infos[*index])));
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
      std::printf("%s: %s\n", name.c_str(), v.DebugString().c_str());
    } else if (v.is_sequence()) {
      std::printf("%s: %s\n", name.c_str(), v.DebugString().c_str());
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
  }

  if (args.Has("output-dir")) {
    const std::string dir = args.Values("output-dir")[0];
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) return Fail(absl::StrCat("cannot create --output-dir ", dir, ": ", ec.message()));
    std::set<std::string> written;
    for (const auto& [name, view] : outputs) {
      const std::string file = FileNameFor(name);
      if (!written.insert(file).second) return Fail(absl::StrCat("two outputs map to the file name ", file));
      const std::string path = absl::StrCat(dir, "/", file);
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
