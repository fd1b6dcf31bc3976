// Flag parsing and error reporting shared by the `grove` subcommands.
#include "command_line.h"

#include <cstdio>
#include <filesystem>
#include <map>
#include <optional>
#include <system_error>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "lib/backends/emulated_cuda.h"
#include "json_writer.h"

namespace grove::cli {

const std::vector<std::string>& ParsedArgs::Values(const std::string& name) const {
  static const std::vector<std::string> kNone;
  auto it = flags.find(name);
  return it == flags.end() ? kNone : it->second;
}

int ParseArgs(absl::Span<const std::string> args, absl::Span<const FlagSpec> specs, ParsedArgs* out,
              absl::string_view usage) {
  bool flags_done = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (flags_done || arg.size() < 2 || arg[0] != '-') {
      out->positional.push_back(arg);
      continue;
    }
    if (arg == "--") {
      flags_done = true;
      continue;
    }
    if (arg == "-h" || arg == "--help") {
      std::fputs(std::string(usage).c_str(), stdout);
      return kExitOk;
    }
    if (arg[1] != '-') return UsageError(absl::StrCat("unknown flag '", arg, "'"));
    const size_t eq = arg.find('=');
    const std::string name = arg.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
    const FlagSpec* spec = nullptr;
    for (const FlagSpec& s : specs) {
      if (name == s.name) spec = &s;
    }
    if (spec == nullptr) return UsageError(absl::StrCat("unknown flag '--", name, "'"));
    if (spec->kind != kRepeatedValue && out->Has(name)) {
      return UsageError(absl::StrCat("--", name, " given more than once"));
    }
    std::string value;
    if (spec->kind == kSwitch) {
      if (eq != std::string::npos) return UsageError(absl::StrCat("--", name, " takes no value"));
    } else if (eq != std::string::npos) {
      value = arg.substr(eq + 1);
    } else if (i + 1 < args.size()) {
      value = args[++i];
    } else {
      return UsageError(absl::StrCat("--", name, " needs a value"));
    }
    out->flags[name].push_back(std::move(value));
  }
  return -1;
}

namespace {

// The code point of the UTF-8 sequence at s[i] and its length; false when
// the bytes there are not valid UTF-8 (overlong, surrogate, past U+10FFFF,
// truncated).
bool DecodeUtf8At(absl::string_view s, size_t i, char32_t* out_cp, size_t* out_len) {
  const unsigned char c = static_cast<unsigned char>(s[i]);
  if (c < 0x80) {
    *out_cp = c;
    *out_len = 1;
    return true;
  }
  const size_t len = c >= 0xf5 ? 0 : c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 ? 2 : 0;
  if (len == 0 || i + len > s.size()) return false;
  char32_t cp = c & (0x7f >> len);
  for (size_t k = 1; k < len; ++k) {
    const unsigned char b = static_cast<unsigned char>(s[i + k]);
    if ((b & 0xc0) != 0x80) return false;
    cp = (cp << 6) | (b & 0x3f);
  }
  const char32_t min = len == 2 ? 0x80 : len == 3 ? 0x800 : 0x10000;
  if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return false;
  *out_cp = cp;
  *out_len = len;
  return true;
}

// Characters a terminal acts on or that hide or reorder text.
bool NeedsEscape(char32_t cp) {
  return cp < 0x20 || cp == 0x7f || (cp >= 0x80 && cp <= 0x9f) ||  // C0, DEL, C1 (0x9b is CSI)
         cp == 0xad ||                                             // soft hyphen
         (cp >= 0x200b && cp <= 0x200f) ||                         // zero-width, LRM, RLM
         (cp >= 0x2028 && cp <= 0x202e) ||                         // separators, bidi embeddings
         (cp >= 0x2060 && cp <= 0x206f) ||                         // word joiner, bidi isolates
         cp == 0xfeff || (cp >= 0xfff9 && cp <= 0xfffb);           // BOM, interlinear annotations
}

}  // namespace

std::string TerminalSafe(absl::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    char32_t cp = 0;
    size_t len = 0;
    if (!DecodeUtf8At(text, i, &cp, &len)) {
      absl::StrAppend(&out, absl::StrFormat("\\x%02x", static_cast<unsigned char>(text[i])));
      ++i;
      continue;
    }
    if (!NeedsEscape(cp)) {
      out.append(text.data() + i, len);
    } else if (cp == '\n') {
      out.append("\\n");
    } else if (cp == '\t') {
      out.append("\\t");
    } else if (cp == '\r') {
      out.append("\\r");
    } else if (cp < 0x80) {
      absl::StrAppend(&out, absl::StrFormat("\\x%02x", static_cast<unsigned>(cp)));
    } else {
      absl::StrAppend(&out, absl::StrFormat("\\u{%04x}", static_cast<unsigned>(cp)));
    }
    i += len;
  }
  return out;
}

int Fail(absl::string_view message) {
  std::fprintf(stderr, "grove: error: %s\n", TerminalSafe(message).c_str());
  return kExitFailure;
}

int Fail(const absl::Status& status) { return Fail(status.message()); }

int UsageError(absl::string_view message) {
  std::fprintf(stderr, "grove: error: %s\nRun 'grove --help' for usage.\n", TerminalSafe(message).c_str());
  return kExitUsage;
}

std::string ShapeString(absl::Span<const int64_t> dims) { return absl::StrCat("[", absl::StrJoin(dims, ","), "]"); }

std::string DeclaredType(const TensorInfo& info) {
  std::vector<std::string> dims;
  for (const DimInfo& d : info.shape) dims.push_back(d.is_symbolic() ? TerminalSafe(d.symbol) : absl::StrCat(d.value));
  const std::string tensor = absl::StrCat(DTypeName(info.dtype), "[", absl::StrJoin(dims, ","), "]");
  switch (info.kind) {
    case ValueKind::kTensor: return tensor;
    case ValueKind::kSequence: return absl::StrCat("seq(", tensor, ")");
    case ValueKind::kOptionalTensor: return absl::StrCat("optional(", tensor, ")");
    case ValueKind::kOptionalSequence: return absl::StrCat("optional(seq(", tensor, "))");
  }
  return tensor;
}

bool ParseDims(absl::string_view text, std::vector<int64_t>* out) {
  out->clear();
  if (text.empty()) return true;
  for (absl::string_view part : absl::StrSplit(text, 'x')) {
    int64_t d = 0;
    if (part.empty() || part[0] == '-' || part[0] == '+' || !absl::SimpleAtoi(part, &d)) return false;
    out->push_back(d);
  }
  return true;
}

bool SplitAssignment(absl::string_view text, std::string* name, std::string* value) {
  const size_t eq = text.find('=');
  if (eq == absl::string_view::npos || eq == 0) return false;
  *name = std::string(text.substr(0, eq));
  *value = std::string(text.substr(eq + 1));
  return true;
}

std::string HumanBytes(uint64_t bytes) {
  if (bytes < 1024) return absl::StrCat(bytes, bytes == 1 ? " byte" : " bytes");
  const char* units[] = {"KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = -1;
  while (v >= 1024 && u < 3) {
    v /= 1024;
    ++u;
  }
  return absl::StrFormat("%.1f %s (%d bytes)", v, units[u], bytes);
}

int InputShapesFromFlags(const ParsedArgs& args, const Model& model, std::vector<std::vector<int64_t>>* shapes,
                         std::vector<std::string>* unknown) {
  std::map<std::string, std::vector<int64_t>> given;
  for (const std::string& spec : args.Values("shape")) {
    std::string name, dims_text;
    std::vector<int64_t> dims;
    if (!SplitAssignment(spec, &name, &dims_text) || !ParseDims(dims_text, &dims)) {
      return UsageError(absl::StrCat("--shape wants NAME=D0xD1... (NAME= for a scalar), not '", spec, "'"));
    }
    if (!given.emplace(name, std::move(dims)).second) return UsageError(absl::StrCat("--shape ", name, " given twice"));
  }
  const std::vector<TensorInfo>& inputs = model.inputs();
  shapes->clear();
  for (const TensorInfo& info : inputs) {
    auto it = given.find(info.name);
    if (it != given.end()) {
      shapes->push_back(it->second);
      given.erase(it);
      continue;
    }
    std::vector<int64_t> dims;
    bool is_static = true;
    for (const DimInfo& d : info.shape) {
      dims.push_back(d.is_symbolic() ? -1 : d.value);
      is_static = is_static && !d.is_symbolic();
    }
    if (!is_static) unknown->push_back(absl::StrCat("'", info.name, "' ", DeclaredType(info)));
    shapes->push_back(std::move(dims));
  }
  if (!given.empty()) {
    std::vector<std::string> names;
    for (const TensorInfo& info : inputs) names.push_back(absl::StrCat("'", info.name, "'"));
    return Fail(absl::StrCat("--shape names '", given.begin()->first, "', which is not a model input (its inputs: ",
                             absl::StrJoin(names, ", "), ")"));
  }
  return -1;
}

int SessionOptionsFromFlags(const ParsedArgs& args, SessionOptions* options, bool* emulated_cuda) {
  *emulated_cuda = false;
  if (args.Has("device") && args.Values("device")[0] == "emulated-cuda") {
    *emulated_cuda = true;
    options->device = Device::kCuda;
  } else if (args.Has("device")) {
    absl::StatusOr<Device> device = ParseDevice(args.Values("device")[0]);
    if (!device.ok()) {
      return UsageError(absl::StrCat("unknown device '", args.Values("device")[0], "' (cpu, cuda, auto or emulated-cuda)"));
    }
    options->device = *device;
  }
  options->strict_device = args.Has("strict-device");
  if (args.Has("gemm-math")) {
    absl::StatusOr<GemmMath> math = ParseGemmMath(args.Values("gemm-math")[0]);
    if (!math.ok()) return UsageError(math.status().message());
    options->cuda_gemm_math = *math;
  }
  if (args.Has("graphs")) {
    absl::StatusOr<GraphMode> graphs = ParseGraphMode(args.Values("graphs")[0]);
    if (!graphs.ok()) return UsageError(graphs.status().message());
    options->cuda_graphs = *graphs;
  }
  for (const std::string& b : args.Values("bucket")) {
    const size_t eq = b.find('=');
    if (eq == std::string::npos || eq == 0) {
      return UsageError(absl::StrCat("--bucket wants SYMBOL=RULE (e.g. seq=pow2), not '", b, "'"));
    }
    options->shape_buckets.emplace_back(b.substr(0, eq), b.substr(eq + 1));
  }
  if (args.Has("kernel-table")) {
    options->kernel_table = args.Values("kernel-table")[0];
    if (options->kernel_table.empty()) return UsageError("--kernel-table wants a file (TABLE.bin), not ''");
  }
  if (args.Has("trace")) {
    options->trace_path = args.Values("trace")[0];
    if (options->trace_path.empty()) return UsageError("--trace wants a file name (FILE.json), not ''");
  }
  if (args.Has("log")) {
    const std::string& v = args.Values("log")[0];
    bool known = false;
    for (LogLevel level : {LogLevel::kDebug, LogLevel::kInfo, LogLevel::kWarning, LogLevel::kError}) {
      if (v == LogLevelName(level)) {
        options->log_level = level;
        known = true;
      }
    }
    if (!known) return UsageError(absl::StrCat("--log wants debug, info, warning or error, not '", v, "'"));
    options->log_sink = [](LogLevel level, absl::string_view message) {
      std::fprintf(stderr, "grove: %s: %s\n", std::string(LogLevelName(level)).c_str(),
                   TerminalSafe(message).c_str());
    };
  }
  if (args.Has("trace-runs")) {
    const std::string& v = args.Values("trace-runs")[0];
    if (!absl::SimpleAtoi(v, &options->trace_max_runs) || options->trace_max_runs < 1) {
      return UsageError(absl::StrCat("--trace-runs wants a positive number of runs, not '", v, "'"));
    }
  }
  if (args.Has("threads")) {
    const std::string& v = args.Values("threads")[0];
    int threads = -1;
    if (!absl::SimpleAtoi(v, &threads) || threads < 0 || threads > kMaxIntraOpThreads) {
      return UsageError(absl::StrCat("--threads wants 1 to ", kMaxIntraOpThreads, ", or 0 for one per core, not '", v,
                                     "'"));
    }
    options->intra_op_threads = threads;
  }
  return -1;
}

int LoadModelAndSession(const std::string& model_path, const SessionOptions& options, bool emulated_cuda,
                        std::shared_ptr<const Model>* out_model, std::unique_ptr<Session>* out_session) {
  absl::StatusOr<std::shared_ptr<const Model>> model = Model::LoadFromFile(model_path);
  if (!model.ok()) return Fail(absl::StrCat("cannot load model ", model_path, ": ", model.status().message()));
  absl::StatusOr<std::unique_ptr<Session>> session =
      emulated_cuda ? internal::CreateEmulatedCudaSession(*model, options) : Session::Create(*model, options);
  if (!session.ok() && absl::IsInvalidArgument(session.status())) {
    return Fail(absl::StrCat("cannot create a session: ", session.status().message()));  // a bad option
  }
  if (options.device == Device::kCuda && (!session.ok() || (*session)->device() != Device::kCuda)) {
    return Fail(absl::StrCat("CUDA backend not available",
                             session.ok() ? "" : absl::StrCat(": ", session.status().message())));
  }
  if (!session.ok()) return Fail(absl::StrCat("cannot create a session: ", session.status().message()));
  *out_model = *std::move(model);
  *out_session = *std::move(session);
  return -1;
}

std::string NpyFileName(const std::string& name) {
  constexpr size_t kMaxFileNameBytes = 200;  // of NAME_MAX's 255, with room for ".npy"
  std::string file = name.substr(0, kMaxFileNameBytes);
  for (char& c : file) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
                    c == '-' || c == '.';
    if (!ok) c = '_';
  }
  if (file.empty() || file[0] == '.') file.insert(0, "_");
  return file + ".npy";
}

absl::Status CheckInputHeader(const NpyHeader& h, const TensorInfo& info, const std::vector<SymbolInfo>& symbols,
                              BoundSymbols* bound) {
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

absl::StatusOr<Tensor> ReadInputNpy(const std::string& file, const TensorInfo& info, const Model& model,
                                    BoundSymbols* bound) {
  // The header is checked against the model before any data is read: a
  // 16 GiB file of the wrong shape is refused at once.
  absl::Status mismatch;
  absl::StatusOr<Tensor> tensor = ReadNpy(file, [&](const NpyHeader& h) {
    return mismatch = CheckInputHeader(h, info, model.symbols(), bound);
  });
  if (!mismatch.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("input '", info.name, "': ", file, " ", mismatch.message()));
  }
  if (!tensor.ok()) return absl::InvalidArgumentError(absl::StrCat("input '", info.name, "': ", tensor.status().message()));
  if (info.dtype == DType::kBF16 && tensor->dtype() == DType::kF32) {
    tensor = Tensor::CastOf(tensor->view(), DType::kBF16);  // NumPy has no bf16: accept f32 and round.
    if (!tensor.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("input '", info.name, "': ", tensor.status().message()));
    }
  }
  return tensor;
}

absl::StatusOr<std::vector<Tensor>> ReadCaseDir(const std::string& dir, const Model& model) {
  auto error = [&dir](absl::string_view message) {
    return absl::InvalidArgumentError(absl::StrCat("case ", dir, ": ", message));
  };
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) return error("not a directory");
  // Every .npy file in the directory must be some input's.
  std::map<std::string, bool> npy_files;  // file name -> taken by an input
  for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.size() > 4 && name.compare(name.size() - 4, 4, ".npy") == 0) npy_files[name] = false;
  }
  if (ec) return error(absl::StrCat("cannot list it: ", ec.message()));
  const std::vector<TensorInfo>& infos = model.inputs();
  std::vector<std::string> missing;
  std::map<std::string, std::string> file_owner;  // file name -> input
  for (const TensorInfo& info : infos) {
    const std::string file = NpyFileName(info.name);
    if (info.kind != ValueKind::kTensor) {
      return error(absl::StrCat("input '", info.name, "' is a ", DeclaredType(info),
                                "; a case directory holds tensors only (give a sequence with --input NAME=A.npy,B.npy)"));
    }
    if (auto [it, inserted] = file_owner.emplace(file, info.name); !inserted) {
      return error(absl::StrCat("inputs '", it->second, "' and '", info.name, "' both read ", file));
    }
    auto it = npy_files.find(file);
    if (it == npy_files.end()) {
      missing.push_back(absl::StrCat(file, " (input '", info.name, "' ", DeclaredType(info), ")"));
    } else {
      it->second = true;
    }
  }
  if (!missing.empty()) return error(absl::StrCat("missing ", absl::StrJoin(missing, ", ")));
  for (const auto& [file, taken] : npy_files) {
    if (taken) continue;
    std::vector<std::string> names;
    for (const TensorInfo& info : infos) names.push_back(absl::StrCat("'", info.name, "'"));
    return error(absl::StrCat(file, " is no model input (its inputs: ", absl::StrJoin(names, ", "), ")"));
  }
  std::vector<Tensor> tensors;
  BoundSymbols bound;
  for (const TensorInfo& info : infos) {
    absl::StatusOr<Tensor> t = ReadInputNpy(absl::StrCat(dir, "/", NpyFileName(info.name)), info, model, &bound);
    if (!t.ok()) return error(t.status().message());
    tensors.push_back(*std::move(t));
  }
  return tensors;
}

SessionStats StatsSince(const SessionStats& before, const SessionStats& after) {
  SessionStats d = after;
  d.runs -= before.runs;
  d.plans_created -= before.plans_created;
  d.plan_cache_hits -= before.plan_cache_hits;
  d.plans_evicted -= before.plans_evicted;
  d.kernels_run -= before.kernels_run;
  d.cpu_fallback_steps -= before.cpu_fallback_steps;
  d.bytes_host_to_device -= before.bytes_host_to_device;
  d.bytes_device_to_host -= before.bytes_device_to_host;
  d.device_allocations -= before.device_allocations;
  d.device_synchronizations -= before.device_synchronizations;
  d.device_to_host_reads -= before.device_to_host_reads;
  d.segments_run -= before.segments_run;
  d.host_waits_inside_segments -= before.host_waits_inside_segments;
  d.graphs_captured -= before.graphs_captured;
  d.graph_replays -= before.graph_replays;
  d.graph_refreshes -= before.graph_refreshes;
  d.segments_run_eagerly -= before.segments_run_eagerly;
  d.graph_capture_failures -= before.graph_capture_failures;
  d.graphs_evicted -= before.graphs_evicted;
  d.graph_launches -= before.graph_launches;
  d.launches_outside_graphs -= before.launches_outside_graphs;
  d.buckets_made -= before.buckets_made;
  d.bucketed_runs -= before.bucketed_runs;
  d.bucket_input_bytes -= before.bucket_input_bytes;
  d.bucket_padding_bytes -= before.bucket_padding_bytes;
  d.control_flow_in_graphs -= before.control_flow_in_graphs;
  d.control_flow_host_driven -= before.control_flow_host_driven;
  return d;
}

void WriteCounters(const SessionStats& s, JsonWriter* w) {
  w->Key("graphs_captured");
  w->Int(s.graphs_captured);
  w->Key("graph_replays");
  w->Int(s.graph_replays);
  w->Key("graph_refreshes");
  w->Int(s.graph_refreshes);
  w->Key("launches_outside_graphs");
  w->Int(s.launches_outside_graphs);
  // The stats count device-to-host copies and the bytes each way (host to
  // device copies are not counted one by one).
  w->Key("copies");
  w->BeginObject();
  w->Key("device_to_host_reads");
  w->Int(s.device_to_host_reads);
  w->Key("bytes_host_to_device");
  w->Int(s.bytes_host_to_device);
  w->Key("bytes_device_to_host");
  w->Int(s.bytes_device_to_host);
  w->EndObject();
  w->Key("syncs");
  w->Int(s.device_synchronizations);
  w->Key("plans_created");
  w->Int(s.plans_created);
  w->Key("kernels_run");
  w->Int(s.kernels_run);
  w->Key("segments_run");
  w->Int(s.segments_run);
  w->Key("cpu_fallback_steps");
  w->Int(s.cpu_fallback_steps);
  // Shape buckets: those made, and the padding of the inputs' slots.
  w->Key("buckets_made");
  w->Int(s.buckets_made);
  w->Key("bucket_input_bytes");
  w->Int(s.bucket_input_bytes);
  w->Key("bucket_padding_bytes");
  w->Int(s.bucket_padding_bytes);
  // If and Loop steps as conditional graph nodes, and host-driven.
  w->Key("control_flow_in_graphs");
  w->Int(s.control_flow_in_graphs);
  w->Key("control_flow_host_driven");
  w->Int(s.control_flow_host_driven);
}

int ParseSweep(const std::string& spec, Sweep* out) {
  const std::string wants = absl::StrCat("--sweep wants SYMBOL=LO:HI[:STEP] (0 <= LO <= HI, STEP >= 1), not '", spec, "'");
  std::string range;
  if (!SplitAssignment(spec, &out->symbol, &range)) return UsageError(wants);
  std::vector<std::string> parts = absl::StrSplit(range, ':');
  if (parts.size() < 2 || parts.size() > 3) return UsageError(wants);
  int64_t lo = 0, hi = 0, step = 1;
  auto number = [](const std::string& s, int64_t* v) {
    return !s.empty() && s[0] != '-' && s[0] != '+' && absl::SimpleAtoi(s, v);
  };
  if (!number(parts[0], &lo) || !number(parts[1], &hi) || (parts.size() == 3 && !number(parts[2], &step)) ||
      lo > hi || step < 1) {
    return UsageError(wants);
  }
  if ((hi - lo) / step + 1 > kMaxSweepPoints) {
    return UsageError(absl::StrCat("--sweep ", spec, " has more than ", kMaxSweepPoints, " values; use a larger STEP"));
  }
  out->values.clear();
  for (int64_t v = lo; v <= hi; v += step) out->values.push_back(v);
  return -1;
}

int ShapePointsFromFlags(const ParsedArgs& args, const Model& model, const std::optional<Sweep>& sweep,
                         std::vector<std::vector<std::vector<int64_t>>>* out_points) {
  const std::vector<TensorInfo>& infos = model.inputs();
  std::vector<std::vector<std::vector<int64_t>>>* points = out_points;
  std::vector<std::vector<int64_t>> base;
  std::vector<std::string> unknown;
  if (int rc = InputShapesFromFlags(args, model, &base, &unknown); rc >= 0) return rc;
  if (sweep.has_value()) {
    const SymbolInfo* symbol = nullptr;
    for (const SymbolInfo& s : model.symbols()) {
      if (s.name == sweep->symbol) symbol = &s;
    }
    if (symbol == nullptr) {
      std::vector<std::string> names;
      for (const SymbolInfo& s : model.symbols()) names.push_back(absl::StrCat("'", s.name, "'"));
      return Fail(absl::StrCat("--sweep names '", sweep->symbol, "', which is no symbol of the model (its symbols: ",
                               names.empty() ? std::string("none") : absl::StrJoin(names, ", "), ")"));
    }
    for (int64_t v : sweep->values) {
      if (v < symbol->min || v > symbol->max) {
        return Fail(absl::StrCat("--sweep ", sweep->symbol, " reaches ", v, ", outside ", sweep->symbol, "'s range ",
                                 symbol->min, "..", symbol->max));
      }
    }
  }
  bool swept = false;
  for (const int64_t value : sweep.has_value() ? sweep->values : std::vector<int64_t>{-1}) {
    std::vector<std::vector<int64_t>> shapes = base;
    for (size_t i = 0; i < infos.size(); ++i) {
      if (shapes[i].size() != infos[i].shape.size()) continue;  // a bad --shape: Run names it
      for (size_t k = 0; k < shapes[i].size(); ++k) {
        const DimInfo& d = infos[i].shape[k];
        if (sweep.has_value() && d.is_symbolic() && d.symbol == sweep->symbol) {
          shapes[i][k] = value;
          swept = true;
        } else if (shapes[i][k] < 0) {
          return Fail(absl::StrCat("input '", infos[i].name, "' dim ", k, " is the symbol '", d.symbol,
                                   "', which has no value: give --shape ", infos[i].name, "=... or --sweep ",
                                   d.symbol, "=LO:HI"));
        }
      }
    }
    points->push_back(std::move(shapes));
  }
  if (sweep.has_value() && !swept) {
    return Fail(absl::StrCat("--sweep ", sweep->symbol, ": no input dim is declared with that symbol"));
  }
  return -1;
}

}  // namespace grove::cli
