// `grove tune`: times the cost model's top-k kernel variants of each (family,
// dtypes, shape bucket) a model meets over given shapes on a GPU, and writes
// the fastest as a kernel dispatch table (schemas/kernels.fbs).
#include <cstdio>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "grove/grove.h"
#include "command_line.h"
#include "lib/backends/emulated_cuda.h"

namespace grove::cli {
namespace {

constexpr char kUsage[] =
    "Usage: grove tune MODEL.grove [--shape NAME=D0xD1... ...] [--sweep SYMBOL=LO:HI[:STEP]] -o TABLE.bin [flags]\n"
    "\n"
    "On a GPU: finds the kernel problems MODEL's steps pose at those shapes (each\n"
    "kernel family, dtypes and shape bucket: every extent rounded up to a power of\n"
    "two), times the cost model's top-k variants of each and the family's generic\n"
    "one (CUDA events: warm-up runs, then the median of the repeats; GEMMs: the\n"
    "first k of cuBLASLt's heuristic answers), prints a line per bucket and writes\n"
    "the fastest of each as a kernel dispatch table. Sessions read it with\n"
    "--kernel-table (run, bench, compile, inspect) or SessionOptions::kernel_table.\n"
    "Without a GPU it says so and exits 1; --dry-run lists the search space anywhere.\n"
    "\n"
    "Flags:\n"
    "  --shape NAME=3x16    an input's shape (needed for inputs with symbolic dims)\n"
    "  --sweep SYMBOL=LO:HI[:STEP]\n"
    "                       every value of SYMBOL in LO..HI (other dims from --shape);\n"
    "                       each bucket is tuned once, at the first shape in it\n"
    "  -o, --output FILE    the table to write (not with --dry-run)\n"
    "  --top-k K            variants timed per bucket besides the generic one (default 4)\n"
    "  --warmup N           untimed runs of each variant first (default 3)\n"
    "  --repeats N          timed runs of each variant; the median is kept (default 15)\n"
    "  --dry-run            list the problems, buckets and candidates with the cost\n"
    "                       model's estimates; time nothing (no GPU needed)\n"
    "  --arch sm_XY         the arch a dry run plans for (default sm_90)\n"
    "  --cuda-device N      the GPU to tune on (default 0)\n"
    "  --device emulated-cuda\n"
    "                       time on the emulated device (host times; the table's\n"
    "                       provenance says emulated and GPU sessions refuse it: tests)\n";

int Count(const ParsedArgs& args, const char* name, int lo, int hi, int* out) {
  if (!args.Has(name)) return -1;
  const std::string& v = args.Values(name)[0];
  if (!absl::SimpleAtoi(v, out) || *out < lo || *out > hi) {
    return UsageError(absl::StrCat("--", name, " wants ", lo, " to ", hi, ", not '", v, "'"));
  }
  return -1;
}

}  // namespace

int TuneMain(absl::Span<const std::string> argv) {
  static constexpr FlagSpec kFlags[] = {
      {"shape", kRepeatedValue}, {"sweep", kValue},   {"output", kValue},
      {"top-k", kValue},         {"warmup", kValue},  {"repeats", kValue}, {"dry-run", kSwitch},
      {"arch", kValue},          {"cuda-device", kValue}, {"device", kValue}};
  // The shared parser knows only long flags; -o is the one short flag here.
  std::vector<std::string> long_args;
  for (const std::string& a : argv) long_args.push_back(a == "-o" ? "--output" : a);
  ParsedArgs args;
  if (int rc = ParseArgs(long_args, kFlags, &args, kUsage); rc >= 0) return rc;
  if (args.positional.size() != 1) {
    return UsageError(args.positional.empty() ? "tune: missing MODEL.grove"
                                              : absl::StrCat("tune: unexpected argument '", args.positional[1], "'"));
  }
  KernelTuneOptions options;
  options.dry_run = args.Has("dry-run");
  std::string output;
  if (args.Has("output")) output = args.Values("output")[0];
  if (args.Has("output") && output.empty()) return UsageError("tune: -o wants a file (TABLE.bin), not ''");
  if (options.dry_run && !output.empty()) return UsageError("tune: --dry-run writes no table; drop -o");
  if (!options.dry_run && output.empty()) return UsageError("tune: -o TABLE.bin is required (or --dry-run)");
  if (args.Has("arch") && !options.dry_run) return UsageError("tune: --arch goes with --dry-run (a GPU has its own)");
  if (args.Has("arch")) options.arch = args.Values("arch")[0];
  bool emulated = false;
  if (args.Has("device")) {
    if (args.Values("device")[0] != "emulated-cuda") {
      return UsageError(absl::StrCat("tune: --device takes emulated-cuda (a GPU is the default), not '",
                                     args.Values("device")[0], "'"));
    }
    emulated = true;
  }
  if (int rc = Count(args, "top-k", 1, 64, &options.top_k); rc >= 0) return rc;
  if (int rc = Count(args, "warmup", 0, 10000, &options.warmup); rc >= 0) return rc;
  if (int rc = Count(args, "repeats", 1, 10000, &options.repeats); rc >= 0) return rc;
  if (int rc = Count(args, "cuda-device", 0, 1024, &options.cuda_device); rc >= 0) return rc;
  std::optional<Sweep> sweep;
  if (args.Has("sweep")) {
    sweep.emplace();
    if (int rc = ParseSweep(args.Values("sweep")[0], &*sweep); rc >= 0) return rc;
  }

  const std::string& path = args.positional[0];
  absl::StatusOr<std::shared_ptr<const Model>> model = Model::LoadFromFile(path);
  if (!model.ok()) return Fail(absl::StrCat("cannot load model ", path, ": ", model.status().message()));
  for (const TensorInfo& info : (*model)->inputs()) {
    if (info.kind != ValueKind::kTensor) {
      return Fail(absl::StrCat("tune takes tensor inputs; input '", info.name, "' is ", DeclaredType(info)));
    }
  }
  if (int rc = ShapePointsFromFlags(args, **model, sweep, &options.shape_sets); rc >= 0) return rc;
  options.progress = [](const std::string& line) {
    std::fprintf(stderr, "tune: %s\n", TerminalSafe(line).c_str());
    std::fflush(stderr);
  };

  absl::StatusOr<KernelTuneReport> report =
      emulated ? internal::TuneKernelsOnEmulatedDevice(**model, options) : TuneKernels(**model, options);
  if (!report.ok()) return Fail(absl::StrCat("tune: ", report.status().message()));

  if (options.dry_run) {
    std::printf("search space on %s: %zu buckets, %d variants (top-k %d)\n", TerminalSafe(report->device).c_str(),
                report->buckets.size(), report->candidates, options.top_k);
    for (const KernelTuneBucket& b : report->buckets) {
      std::printf("%s %s %s (problem %s):", TerminalSafe(b.family).c_str(), b.dtypes.c_str(),
                  TerminalSafe(b.bucket).c_str(), TerminalSafe(b.problem).c_str());
      for (const KernelTuneCandidate& c : b.candidates) {
        std::printf(" %s", TerminalSafe(c.config).c_str());
        if (c.estimate_us > 0) std::printf(" (%.3g us)", c.estimate_us);
        if (c.generic) std::printf(" [generic]");
      }
      std::printf("\n");
    }
    return kExitOk;
  }
  std::ofstream out(output, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(report->table.data()), static_cast<std::streamsize>(report->table.size()));
  if (!out.flush()) return Fail(absl::StrCat("tune: cannot write ", output));
  int tuned = 0;
  for (const KernelTuneBucket& b : report->buckets) tuned += b.best.empty() ? 0 : 1;
  std::printf("tuned %d of %zu buckets on %s (%d variants timed); table: %s\n", tuned, report->buckets.size(),
              TerminalSafe(report->device).c_str(), report->candidates, TerminalSafe(output).c_str());
  return kExitOk;
}

}  // namespace grove::cli
