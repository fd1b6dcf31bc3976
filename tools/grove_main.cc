// The `grove` command line: dispatches to a subcommand. Exit status 0 on
// success, 1 when the operation fails, 2 for a malformed command line.
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "grove/grove.h"
#include "command_line.h"
#include "lib/backends/cpu/cpu_features.h"

namespace grove::cli {
namespace {

struct Command {
  const char* name;
  CommandMain main;
  const char* summary;
};

constexpr Command kCommands[] = {
    {"import", ImportMain, "convert an ONNX model (opsets 11..22) into a .grove model"},
    {"run", RunMain, "run a model on .npy inputs and summarise (or save) its outputs"},
    {"inspect", InspectMain, "show a model's signature, content and memory plan"},
    {"compile", CompileMain, "compile a model's CUDA kernels into the kernel cache (no GPU needed)"},
    {"bench", BenchMain, "measure a model's latency per input shape (min, median, p90) and its counters"},
    {"tune", TuneMain, "time kernel variants on a GPU and write a kernel dispatch table"},
};

void PrintUsage(FILE* to) {
  std::fputs(
      "Usage: grove <command> [args]\n"
      "\n"
      "grove runs dynamic neural networks saved as .grove models (import ONNX models\n"
      "with 'grove import').\n"
      "\n"
      "Commands:\n",
      to);
  for (const Command& c : kCommands) std::fprintf(to, "  %-9s %s\n", c.name, c.summary);
  std::fputs(
      "  version   print the library version (--verbose: the CPU's features and the\n"
      "            CPU backend's paths on it: oneDNN's ISA, the BLAS core, AVX2 kernels)\n"
      "\n"
      "Run 'grove <command> --help' for a command's flags.\n",
      to);
}

int Main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty()) {
    PrintUsage(stderr);
    return kExitUsage;
  }
  const std::string& command = args[0];
  if (command == "--help" || command == "-h" || command == "help") {
    PrintUsage(stdout);
    return kExitOk;
  }
  if (command == "version" || command == "--version") {
    const bool verbose = args.size() == 2 && (args[1] == "--verbose" || args[1] == "-v");
    if (args.size() > 1 && !verbose) return UsageError("'version' takes only --verbose");
    std::printf("grove %s (model format %u)\n", std::string(Version()).c_str(), kFormatVersion);
    if (verbose) {
      // What the CPU offers and which paths the CPU backend takes on it.
      for (const auto& [what, value] : cpu::DescribeCpuBackend()) {
        std::printf("%-19s %s\n", (what + ":").c_str(), value.c_str());
      }
    }
    return kExitOk;
  }
  for (const Command& c : kCommands) {
    if (command == c.name) return c.main(absl::MakeConstSpan(args).subspan(1));
  }
  if (!command.empty() && command[0] == '-') return UsageError(absl::StrCat("unknown flag '", command, "'"));
  return UsageError(absl::StrCat("unknown command '", command, "'"));
}

}  // namespace
}  // namespace grove::cli

int main(int argc, char** argv) {
  // The library reports errors as values; an exception here is a bug, but it
  // still deserves a message and a normal exit rather than an abort.
  try {
    return grove::cli::Main(argc, argv);
  } catch (const std::exception& e) {
    return grove::cli::Fail(absl::StrCat("internal error (please report): ", e.what()));
  }
}
