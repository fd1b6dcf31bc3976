// The kernel cache's three paths for one module (selftest__f32, sm_90), in
// the same run:
//  - BM_NvrtcColdCompile: a fresh cache on an empty folder each iteration:
//    NVRTC plus the disk write, what a first launch pays.
//  - BM_DiskCacheHit: the memory cache cleared each iteration, the entry read
//    and checked from a warm folder: a new process's first launch.
//  - BM_MemoryCacheHit: the module already in memory: every later launch.
// The summary line after the table gives disk hit / cold compile (goal
// <= 0.01x) and the memory hit (goal < 1 us). Needs no GPU.
#include <stdlib.h>

#include <cstdio>
#include <filesystem>
#include <map>
#include <string>

#include "benchmark/benchmark.h"
#include "jit/kernel_cache.h"
#include "jit/module.h"

namespace grove::jit {
namespace {

const ModuleSpec kModule{"selftest", {DType::kF32}};
constexpr int kArch = 90;

std::string& BenchRoot() {
  static std::string root = [] {
    std::string templ = std::filesystem::temp_directory_path().string() + "/grove_jit_bench_XXXXXX";
    if (mkdtemp(templ.data()) == nullptr) std::abort();
    return templ;
  }();
  return root;
}

std::string FreshDir() {
  static int n = 0;
  return BenchRoot() + "/cold" + std::to_string(n++);
}

const std::string& WarmDir() {
  static const std::string dir = [] {
    std::string d = BenchRoot() + "/warm";
    KernelCache cache({.disk_dir = d});
    if (!cache.Get(kModule, kArch).ok()) std::abort();
    return d;
  }();
  return dir;
}

void BM_NvrtcColdCompile(benchmark::State& state) {
  for (auto _ : state) {
    state.PauseTiming();
    const std::string dir = FreshDir();
    state.ResumeTiming();
    KernelCache cache({.disk_dir = dir});
    auto m = cache.Get(kModule, kArch);
    if (!m.ok()) state.SkipWithError(std::string(m.status().message()).c_str());
    benchmark::DoNotOptimize(m);
    state.PauseTiming();
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
    state.ResumeTiming();
  }
}
BENCHMARK(BM_NvrtcColdCompile)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_DiskCacheHit(benchmark::State& state) {
  KernelCache cache({.disk_dir = WarmDir()});
  size_t bytes = 0;
  for (auto _ : state) {
    cache.ClearMemory();
    CacheSource source;
    auto m = cache.Get(kModule, kArch, &source);
    if (!m.ok() || source != CacheSource::kDisk) state.SkipWithError("not a disk hit");
    bytes = (*m)->cubin.size();
    benchmark::DoNotOptimize(m);
  }
  state.counters["cubin_bytes"] = static_cast<double>(bytes);
}
BENCHMARK(BM_DiskCacheHit)->Unit(benchmark::kMicrosecond)->UseRealTime();

void BM_MemoryCacheHit(benchmark::State& state) {
  KernelCache cache({.disk_dir = WarmDir()});
  if (!cache.Get(kModule, kArch).ok()) state.SkipWithError("warm-up failed");
  for (auto _ : state) {
    auto m = cache.Get(kModule, kArch);
    benchmark::DoNotOptimize(m);
  }
}
BENCHMARK(BM_MemoryCacheHit)->Unit(benchmark::kNanosecond);

// The console table, plus each benchmark's real time per iteration in
// seconds for the summary.
class SummaryReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const Run& run : runs) {
      if (run.run_type != Run::RT_Iteration || run.error_occurred) continue;
      const double unit = benchmark::GetTimeUnitMultiplier(run.time_unit);
      seconds_[run.run_name.function_name] = run.GetAdjustedRealTime() / unit;
      cpu_seconds_[run.run_name.function_name] = run.GetAdjustedCPUTime() / unit;
    }
  }
  double Seconds(const std::string& name) const { return Find(seconds_, name); }
  double CpuSeconds(const std::string& name) const { return Find(cpu_seconds_, name); }

 private:
  static double Find(const std::map<std::string, double>& m, const std::string& name) {
    auto it = m.find(name);
    return it == m.end() ? 0 : it->second;
  }
  std::map<std::string, double> seconds_, cpu_seconds_;
};

}  // namespace
}  // namespace grove::jit

int main(int argc, char** argv) {
  using grove::jit::NvrtcVersion;
  unsetenv("GROVE_CACHE_DIR");  // the benchmark chooses its folders
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  grove::jit::SummaryReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();
  const double cold = reporter.Seconds("BM_NvrtcColdCompile");
  const double disk = reporter.Seconds("BM_DiskCacheHit");
  const double memory = reporter.Seconds("BM_MemoryCacheHit");
  std::printf("jit_bench summary (NVRTC %d.%d, selftest__f32 sm_90):", NvrtcVersion() / 1000,
              NvrtcVersion() % 1000 / 10);
  if (cold > 0) std::printf(" cold compile %.1f ms;", cold * 1e3);
  if (disk > 0) std::printf(" disk hit %.1f us;", disk * 1e6);
  if (cold > 0 && disk > 0) {
    std::printf(" disk/cold %.4fx (goal <= 0.01x: %s);", disk / cold, disk / cold <= 0.01 ? "met" : "MISSED");
  }
  if (memory > 0) {
    // Real time on a loaded machine includes waiting for a core; CPU time is
    // the cost of the lookup itself.
    std::printf(" memory hit %.0f ns real, %.0f ns CPU (goal < 1000 ns: %s)", memory * 1e9,
                reporter.CpuSeconds("BM_MemoryCacheHit") * 1e9, memory < 1e-6 ? "met" : "MISSED");
  }
  std::printf("\n");
  std::error_code ec;
  std::filesystem::remove_all(grove::jit::BenchRoot(), ec);
  return 0;
}
