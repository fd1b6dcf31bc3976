// `grove compile`: compiles the CUDA kernels a model needs into the kernel
// disk cache for one GPU arch, on a machine with or without a GPU.
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "grove/grove.h"
#include "command_line.h"

namespace grove::cli {
namespace {

constexpr char kUsage[] =
    "Usage: grove compile MODEL.grove --arch sm_90 [--shape NAME=D0xD1... ...] [flags]\n"
    "\n"
    "Compiles (NVRTC, no GPU needed) every CUDA kernel MODEL launches at those\n"
    "input shapes into the kernel disk cache, so the first run on a GPU of that\n"
    "arch compiles nothing. The kernels are found by a dry run with zero-valued\n"
    "inputs; for models that branch on data, --all compiles every kernel grove has.\n"
    "A second identical run compiles nothing.\n"
    "\n"
    "Flags:\n"
    "  --arch sm_XY        target GPU architecture (sm_80, sm_86, sm_89, sm_90, ...)\n"
    "  --shape NAME=3x16   an input's shape (needed for inputs with symbolic dims)\n"
    "  --cache-dir DIR     the cache folder (default: $GROVE_CACHE_DIR, else\n"
    "                      $XDG_CACHE_HOME/grove/kernels or ~/.cache/grove/kernels)\n"
    "  --all               every kernel module, not only this model's\n"
    "  --kernel-table FILE a kernel dispatch table (grove tune) the variants are\n"
    "                      chosen from before the cost model, as a session would\n";

}  // namespace

int CompileMain(absl::Span<const std::string> argv) {
  static constexpr FlagSpec kFlags[] = {
      {"arch", kValue}, {"shape", kRepeatedValue}, {"cache-dir", kValue}, {"all", kSwitch}, {"kernel-table", kValue}};
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

  const std::string& path = args.positional[0];
  absl::StatusOr<std::shared_ptr<const Model>> model = Model::LoadFromFile(path);
  if (!model.ok()) return Fail(absl::StrCat("cannot load model ", path, ": ", model.status().message()));
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
