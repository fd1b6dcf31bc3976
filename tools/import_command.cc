// `grove import`: converts an ONNX model into a .grove model and prints what
// became of it (ops kept, constants folded, dynamic dims and their ranges).
#include <dlfcn.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "command_line.h"
#include "grove/grove.h"
#include "tools/onnx/import_plugin.h"

namespace grove::cli {
namespace {

constexpr char kUsage[] =
    "Usage: grove import MODEL.onnx -o OUT.grove [flags]\n"
    "\n"
    "Converts an ONNX model (ai.onnx opsets 11..22) into a .grove model. Nodes\n"
    "whose inputs are all constants are evaluated now and stored as weights;\n"
    "ONNX dim_params become grove symbols, and unnamed dynamic dims get\n"
    "generated names (listed in the summary).\n"
    "\n"
    "Flags:\n"
    "  -o, --output OUT.grove   where to write the model (required)\n"
    "  --dim NAME=MIN:MAX       range of the dynamic dim NAME (repeatable;\n"
    "                           default 0:4096)\n"
    "  --input-rank NAME=R      rank of an input whose ONNX type has no shape;\n"
    "                           its dims become symbols (repeatable)\n"
    "  --no-fold                keep constant subgraphs as ops\n";

bool ParseRange(const std::string& text, int64_t* min, int64_t* max) {
  const size_t colon = text.find(':');
  if (colon == std::string::npos) return false;
  return absl::SimpleAtoi(text.substr(0, colon), min) && absl::SimpleAtoi(text.substr(colon + 1), max) &&
         *min >= 0 && *min <= *max;
}

}  // namespace
}  // namespace grove::cli

namespace grove::onnx_import {
namespace {

// The folder of the running binary ("" when /proc does not say).
std::string BinaryDir() {
  char path[4096];
  const ssize_t n = readlink("/proc/self/exe", path, sizeof(path) - 1);
  if (n <= 0) return "";
  const std::string exe(path, static_cast<size_t>(n));
  const size_t slash = exe.rfind('/');
  return slash == std::string::npos ? "" : exe.substr(0, slash);
}

}  // namespace

absl::StatusOr<ImportOnnxFileFn> LoadOnnxImporter() {
  static const absl::StatusOr<ImportOnnxFileFn> loaded = []() -> absl::StatusOr<ImportOnnxFileFn> {
    const std::string dir = BinaryDir();
    // Beside the binary (a build tree), then the installed layout's
    // <libdir>/grove relative to <bindir> (GROVE_IMPORT_MODULE_DIR).
    std::vector<std::string> paths = {absl::StrCat(dir, "/", kImportModuleName),
                                      absl::StrCat(dir, "/", GROVE_IMPORT_MODULE_DIR, "/", kImportModuleName)};
    std::vector<std::string> reasons;
    for (const std::string& path : paths) {
      if (access(path.c_str(), F_OK) != 0) {
        reasons.push_back(absl::StrCat(path, ": not found"));
        continue;
      }
      void* module = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (module == nullptr) {
        const char* why = dlerror();
        reasons.push_back(why != nullptr ? why : absl::StrCat(path, ": dlopen failed"));
        continue;
      }
      void* symbol = dlsym(module, kImportOnnxFileSymbol);
      if (symbol == nullptr) {
        reasons.push_back(absl::StrCat(path, ": no symbol ", kImportOnnxFileSymbol));
        dlclose(module);
        continue;
      }
      return reinterpret_cast<ImportOnnxFileFn>(symbol);
    }
    return absl::FailedPreconditionError(absl::StrCat("the ONNX importer (", kImportModuleName,
                                                      ", installed with grove) cannot be loaded: ",
                                                      absl::StrJoin(reasons, "; ")));
  }();
  return loaded;
}

}  // namespace grove::onnx_import

namespace grove::cli {

int ImportMain(absl::Span<const std::string> argv) {
  // The shared parser knows only long flags; -o is the one short flag here.
  std::vector<std::string> args;
  for (const std::string& a : argv) args.push_back(a == "-o" ? "--output" : a);
  static constexpr FlagSpec kFlags[] = {
      {"output", kValue}, {"dim", kRepeatedValue}, {"input-rank", kRepeatedValue}, {"no-fold", kSwitch}};
  ParsedArgs parsed;
  if (int rc = ParseArgs(args, kFlags, &parsed, kUsage); rc >= 0) return rc;
  if (parsed.positional.size() != 1) {
    return UsageError(parsed.positional.empty()
                          ? "import: missing MODEL.onnx"
                          : absl::StrCat("import: unexpected argument '", parsed.positional[1], "'"));
  }
  if (!parsed.Has("output") || parsed.Values("output")[0].empty()) {
    return UsageError("import: missing -o OUT.grove");
  }
  const std::string& in_path = parsed.positional[0];
  const std::string& out_path = parsed.Values("output")[0];

  onnx_import::ImportOptions options;
  for (const std::string& spec : parsed.Values("dim")) {
    std::string name, range;
    int64_t min = 0, max = 0;
    if (!SplitAssignment(spec, &name, &range) || !ParseRange(range, &min, &max)) {
      return UsageError(absl::StrCat("--dim wants NAME=MIN:MAX with 0 <= MIN <= MAX, not '", spec, "'"));
    }
    if (options.dim_ranges.count(name)) return UsageError(absl::StrCat("--dim ", name, " given more than once"));
    options.dim_ranges[name] = {min, max};
  }
  for (const std::string& spec : parsed.Values("input-rank")) {
    std::string name, value;
    int rank = 0;
    if (!SplitAssignment(spec, &name, &value) || !absl::SimpleAtoi(value, &rank) || rank < 0 || rank > 16) {
      return UsageError(absl::StrCat("--input-rank wants NAME=R with 0 <= R <= 16, not '", spec, "'"));
    }
    options.input_ranks[name] = rank;
  }
  options.fold_constants = !parsed.Has("no-fold");

  absl::StatusOr<onnx_import::ImportOnnxFileFn> import_file = onnx_import::LoadOnnxImporter();
  if (!import_file.ok()) return Fail(absl::StrCat("cannot import ", in_path, ": ", import_file.status().message()));
  onnx_import::ImportReport report;
  absl::StatusOr<std::vector<uint8_t>> bytes;
  (*import_file)(in_path, options, &report, &bytes);
  if (!bytes.ok()) return Fail(absl::StrCat("cannot import ", in_path, ": ", bytes.status().message()));
  {
    std::ofstream f(out_path, std::ios::binary | std::ios::trunc);
    if (!f) return Fail(absl::StrCat("cannot write '", out_path, "'"));
    f.write(reinterpret_cast<const char*>(bytes->data()), static_cast<std::streamsize>(bytes->size()));
    if (!f) return Fail(absl::StrCat("writing '", out_path, "' failed"));
  }

  std::printf("imported %s (opset %d%s%s)\n", TerminalSafe(in_path).c_str(), report.opset,
              report.producer.empty() ? "" : ", producer ", TerminalSafe(report.producer).c_str());
  if (report.converted_from_opset > 0) {
    std::printf("note: the model's opset %d is below %d, the oldest grove imports; it was converted to opset %d "
                "with ONNX's version converter first\n",
                report.converted_from_opset, onnx_import::kMinOpset, report.opset);
  }
  std::printf(
      "nodes: %d imported as grove ops, %d constants folded, %d Constant nodes (of %d ONNX nodes); "
      "%d subgraph%s\n",
      report.nodes_imported, report.constants_folded, report.constant_nodes, report.onnx_nodes, report.subgraphs,
      report.subgraphs == 1 ? "" : "s");
  std::vector<std::string> symbols;
  for (const SymbolInfo& s : report.symbols) symbols.push_back(absl::StrCat(TerminalSafe(s.name), " ", s.min, "..", s.max));
  std::printf("symbols: %s\n",
              symbols.empty() ? "none (all dims constant)" : absl::StrJoin(symbols, ", ").c_str());
  std::printf("weights: %d, %s\n", report.weights, HumanBytes(report.weight_bytes).c_str());
  std::printf("wrote %s: %s\n", TerminalSafe(out_path).c_str(), HumanBytes(bytes->size()).c_str());
  return kExitOk;
}

}  // namespace grove::cli
