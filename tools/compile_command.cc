// `grove compile`: compiles the CUDA kernels a model needs into the kernel
// disk cache for one GPU arch, on a machine with or without a GPU; with
// --sweep, the kernel variants (jit/kernel_config.h) the model picks at
// every shape of a symbol's range.
#include <cstdio>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "grove/grove.h"
#include "command_line.h"
#include "json_writer.h"
#include "kernel_json.h"

namespace grove::cli {
namespace {

constexpr char kUsage[] =
    "Usage: grove compile MODEL.grove --arch sm_90 [--shape NAME=D0xD1... ...] [--sweep SYMBOL=LO:HI[:STEP]]\n"
    "                     [--json [--top-k K]] [flags]\n"
    "\n"
    "Compiles (NVRTC, no GPU needed) every CUDA kernel MODEL launches at those\n"
    "input shapes into the kernel disk cache, so the first run on a GPU of that\n"
    "arch compiles nothing. The kernels are found by a dry run with zero-valued\n"
    "inputs; for models that branch on data, --all compiles every kernel grove has.\n"
    "The dry run is a session as on a GPU (CUDA graphs captured, shapes bucketed\n"
    "with the default rules), so the modules are those such a session asks for:\n"
    "'NAME (graph)' is a module's form for graph launches.\n"
    "With --sweep, the dry run is repeated at every value of one symbol and the\n"
    "union of the kernel variants chosen (per step and shape, by the dispatch\n"
    "table or the cost model) is compiled; the modules per kernel family are\n"
    "printed. A second identical run compiles nothing.\n"
    "\n"
    "Flags:\n"
    "  --arch sm_XY        target GPU architecture (sm_80, sm_86, sm_89, sm_90, ...)\n"
    "  --shape NAME=3x16   an input's shape (needed for inputs with symbolic dims)\n"
    "  --sweep SYMBOL=LO:HI[:STEP]\n"
    "                      every value of one symbol (the other dims from --shape\n"
    "                      or the declared shapes)\n"
    "  --cache-dir DIR     the cache folder (default: $GROVE_CACHE_DIR, else\n"
    "                      $XDG_CACHE_HOME/grove/kernels or ~/.cache/grove/kernels)\n"
    "  --all               every kernel module, not only this model's\n"
    "  --kernel-table FILE a kernel dispatch table (grove tune) the variants are\n"
    "                      chosen from before the cost model, as a session would\n"
    "  --json              print one JSON object: the counts and modules, and per\n"
    "                      shape compiled (each point of a sweep) the steps' kernel\n"
    "                      choices, each with the variants its family's cost model\n"
    "                      ranked (occupancy, waste, bytes, flops, estimate_us;\n"
    "                      cheapest first) and the pick's own terms and rank\n"
    "  --top-k K           ranked variants listed per choice in --json (default 5;\n"
    "                      0: all)\n";

// What --json adds to a compile: the shapes compiled and their choices.
struct JsonOptions {
  bool on = false;
  int top_k = kDefaultRankedShown;
};

struct CompiledPoint {
  std::vector<std::vector<int64_t>> input_shapes;
  std::optional<int64_t> value;  // the swept symbol's
  std::vector<KernelChoiceInfo> choices;
};

void WriteCounts(JsonWriter& w, const KernelCompileReport& r) {
  w.Key("arch");
  w.Int(r.arch);
  w.Key("cache_dir");
  w.String(r.cache_dir);
  w.Key("compiled");
  w.Int(r.compiled);
  w.Key("cached");
  w.Int(r.cached);
  w.Key("corrupt");
  w.Int(r.corrupt);
  w.Key("stale");
  w.Int(r.stale);
  w.Key("compile_ms");
  w.Double(r.compile_ms);
}

void WritePoints(JsonWriter& w, const std::vector<CompiledPoint>& points, int arch, int top_k) {
  const std::string arch_name = absl::StrCat("sm_", arch);
  w.Key("shapes");
  w.BeginArray();
  for (const CompiledPoint& p : points) {
    w.BeginObject();
    if (p.value.has_value()) {
      w.Key("value");
      w.Int(*p.value);
    }
    w.Key("input_shapes");
    w.BeginArray();
    for (const std::vector<int64_t>& s : p.input_shapes) w.IntArray(s);
    w.EndArray();
    w.Key("steps");
    WriteKernelSteps(w, p.choices, arch_name, top_k);
    w.EndObject();
  }
  w.EndArray();
}

void PrintJson(JsonWriter& w) {
  std::string text = w.TakeText();
  text.push_back('\n');
  std::fwrite(text.data(), 1, text.size(), stdout);
}

// "softmax__f32__lanes32_threads256" -> "softmax"; "" for a module without
// a variant ("softmax__f32").
std::string VariantFile(const std::string& module) {
  const size_t first = module.find("__");
  if (first == std::string::npos || module.find("__", first + 2) == std::string::npos) return "";
  return module.substr(0, first);
}

// --sweep: one dry run and compile per point; the union of the modules.
int CompileSweep(const Model& model, KernelCompileOptions options, const Sweep& sweep, const ParsedArgs& args,
                 const JsonOptions& json) {
  std::vector<std::vector<std::vector<int64_t>>> points;
  if (int rc = ShapePointsFromFlags(args, model, sweep, &points); rc >= 0) return rc;
  std::fprintf(stderr, "compiling kernels for %s over %s = %lld..%lld (%zu shapes)...\n", options.arch.c_str(),
               sweep.symbol.c_str(), static_cast<long long>(sweep.values.front()),
               static_cast<long long>(sweep.values.back()), points.size());
  std::set<std::string> modules;
  KernelCompileReport total;
  std::vector<std::string> notes;  // the first of each kind; how many points had one
  int noted = 0;
  std::vector<CompiledPoint> compiled_points;
  for (size_t i = 0; i < points.size(); ++i) {
    options.input_shapes = points[i];
    absl::StatusOr<KernelCompileReport> report = CompileKernels(model, options);
    if (!report.ok()) {
      return Fail(absl::StrCat("compile failed at ", sweep.symbol, "=", sweep.values[i], ": ", report.status().message()));
    }
    // A module found again at a later point is a cache hit there: count
    // each module once, as compiled or as found.
    for (const std::string& m : report->modules) modules.insert(m);
    if (json.on) compiled_points.push_back(CompiledPoint{points[i], sweep.values[i], std::move(report->choices)});
    total.arch = report->arch;
    total.cache_dir = report->cache_dir;
    total.compiled += report->compiled;
    total.corrupt += report->corrupt;
    total.stale += report->stale;
    total.compile_ms += report->compile_ms;
    if (!report->note.empty()) {
      if (noted++ == 0) notes.push_back(absl::StrCat("at ", sweep.symbol, "=", sweep.values[i], ": ", report->note));
    }
  }
  total.cached = static_cast<int>(modules.size()) - total.compiled;
  std::map<std::string, int> per_family;
  for (const std::string& m : modules) {
    const std::string family = VariantFile(m);
    if (!family.empty()) ++per_family[family];
  }
  if (json.on) {
    JsonWriter w;
    w.BeginObject();
    WriteCounts(w, total);
    w.Key("sweep");
    w.BeginObject();
    w.Key("symbol");
    w.String(sweep.symbol);
    w.Key("values");
    w.IntArray(sweep.values);
    w.EndObject();
    w.Key("modules");
    w.BeginArray();
    for (const std::string& m : modules) w.String(m);
    w.EndArray();
    w.Key("variant_modules_per_file");
    w.BeginObject();
    for (const auto& [family, n] : per_family) {
      w.Key(family);
      w.Int(n);
    }
    w.EndObject();
    w.Key("notes");
    w.BeginArray();
    for (const std::string& note : notes) w.String(note);
    w.EndArray();
    w.Key("points_with_a_note");
    w.Int(noted);
    WritePoints(w, compiled_points, total.arch, json.top_k);
    w.EndObject();
    PrintJson(w);
    return kExitOk;
  }
  std::printf("kernel modules for sm_%d over %s=%lld..%lld (%zu shapes): %zu (%s)\n", total.arch,
              sweep.symbol.c_str(), static_cast<long long>(sweep.values.front()),
              static_cast<long long>(sweep.values.back()), points.size(), modules.size(),
              absl::StrJoin(modules, ", ").c_str());
  std::vector<std::string> counts;
  for (const auto& [family, n] : per_family) counts.push_back(absl::StrCat(family, " ", n));
  std::printf("variant modules per kernel file: %s\n", counts.empty() ? "none" : absl::StrJoin(counts, ", ").c_str());
  std::printf("compiled %d, found in cache %d, found corrupt %d, stale %d; NVRTC time %.1f ms\n", total.compiled,
              total.cached, total.corrupt, total.stale, total.compile_ms);
  std::printf("cache: %s\n", total.cache_dir.c_str());
  for (const std::string& note : notes) std::printf("note: %s\n", note.c_str());
  if (noted > 1) std::printf("note: %d of the %zu dry runs had a note like it\n", noted, points.size());
  return kExitOk;
}

}  // namespace

int CompileMain(absl::Span<const std::string> argv) {
  static constexpr FlagSpec kFlags[] = {
      {"arch", kValue},   {"shape", kRepeatedValue}, {"sweep", kValue},
      {"cache-dir", kValue}, {"all", kSwitch},         {"kernel-table", kValue},
      {"json", kSwitch},     {"top-k", kValue}};
  ParsedArgs args;
  if (int rc = ParseArgs(argv, kFlags, &args, kUsage); rc >= 0) return rc;
  if (args.positional.size() != 1) {
    return UsageError(args.positional.empty()
                          ? "compile: missing MODEL.grove"
                          : absl::StrCat("compile: unexpected argument '", args.positional[1], "'"));
  }
  if (!args.Has("arch")) return UsageError("compile: --arch is required (e.g. --arch sm_90)");
  KernelCompileOptions options;
  options.arch = args.Values("arch")[0];
  options.all_kernels = args.Has("all");
  if (args.Has("cache-dir")) options.cache_dir = args.Values("cache-dir")[0];
  if (args.Has("kernel-table")) options.kernel_table = args.Values("kernel-table")[0];

  JsonOptions json;
  json.on = args.Has("json");
  if (args.Has("top-k")) {
    if (!json.on) return UsageError("compile: --top-k goes with --json");
    if (int rc = ParseTopK(args.Values("top-k")[0], "compile", &json.top_k); rc >= 0) return rc;
  }
  std::optional<Sweep> sweep;
  if (args.Has("sweep")) {
    if (options.all_kernels) return UsageError("compile: --sweep finds a model's kernels; it does not go with --all");
    sweep.emplace();
    if (int rc = ParseSweep(args.Values("sweep")[0], &*sweep); rc >= 0) return rc;
  }

  const std::string& path = args.positional[0];
  absl::StatusOr<std::shared_ptr<const Model>> model = Model::LoadFromFile(path);
  if (!model.ok()) return Fail(absl::StrCat("cannot load model ", path, ": ", model.status().message()));
  if (sweep.has_value()) return CompileSweep(**model, options, *sweep, args, json);
  std::vector<std::string> unknown;
  if (int rc = InputShapesFromFlags(args, **model, &options.input_shapes, &unknown); rc >= 0) return rc;
  if (!unknown.empty() && !options.all_kernels) {
    return Fail(absl::StrCat("missing --shape for ", absl::StrJoin(unknown, ", ")));
  }
  if (options.all_kernels) options.input_shapes.clear();

  std::fprintf(stderr, "compiling kernels for %s%s...\n", options.arch.c_str(),
               options.all_kernels ? " (all modules)" : "");
  absl::StatusOr<KernelCompileReport> report = CompileKernels(**model, options);
  if (!report.ok()) return Fail(absl::StrCat("compile failed: ", report.status().message()));
  if (json.on) {
    JsonWriter w;
    w.BeginObject();
    WriteCounts(w, *report);
    w.Key("modules");
    w.BeginArray();
    for (const std::string& m : report->modules) w.String(m);
    w.EndArray();
    w.Key("notes");
    w.BeginArray();
    if (!report->note.empty()) w.String(report->note);
    w.EndArray();
    std::vector<CompiledPoint> points;
    if (!options.all_kernels) points.push_back(CompiledPoint{options.input_shapes, std::nullopt, report->choices});
    WritePoints(w, points, report->arch, json.top_k);
    w.EndObject();
    PrintJson(w);
    return kExitOk;
  }
  std::printf("kernel modules for sm_%d: %zu (%s)\n", report->arch, report->modules.size(),
              absl::StrJoin(report->modules, ", ").c_str());
  std::printf("compiled %d, found in cache %d, found corrupt %d, stale %d; NVRTC time %.1f ms\n", report->compiled,
              report->cached, report->corrupt, report->stale, report->compile_ms);
  std::printf("cache: %s\n", report->cache_dir.c_str());
  if (!report->choices.empty()) {
    int table = 0, model = 0;
    for (const KernelChoiceInfo& c : report->choices) {
      table += c.source == "table";
      model += c.source == "cost model";
    }
    std::printf("kernel variants chosen: %zu (table %d, cost model %d, generic %zu)\n", report->choices.size(), table,
                model, report->choices.size() - table - model);
    for (const KernelChoiceInfo& c : report->choices) {
      std::printf("  %s%s%s: %s (%s, %s)\n", TerminalSafe(c.op).c_str(), c.node.empty() ? "" : " ",
                  c.node.empty() ? "" : absl::StrCat("'", TerminalSafe(c.node), "'").c_str(),
                  TerminalSafe(c.config).c_str(), c.source.c_str(), TerminalSafe(c.problem).c_str());
    }
  }
  if (!report->note.empty()) std::printf("note: %s\n", report->note.c_str());
  return kExitOk;
}

}  // namespace grove::cli
