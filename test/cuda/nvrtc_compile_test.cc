// NVRTC compiles every kernel module of jit/kernels/kernels.cmake for sm_90
// (and, in the variants_full run, sm_80; no GPU needed), and each cubin
// defines exactly the entry points the host emulation registers for that
// module.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "jit/emulation_launch.h"
#include "jit/kernel_cache.h"
#include "jit/module.h"

namespace grove::jit {
namespace {

std::string Name(const ModuleSpec& m) { return m.file + Suffix(m); }

// The emulated entries of module `m`: registered from its file, named with
// its suffix.
std::set<std::string> EmulatedEntries(const ModuleSpec& m) {
  std::set<std::string> out;
  const std::string suffix = Suffix(m);
  for (const std::string& name : emu::EntryNames()) {
    if (absl::EndsWith(name, suffix) && emu::EntryFile(name) == m.file) out.insert(name);
  }
  return out;
}

// Compiles every manifest module for each of `arches`, two at a time.
void CompileEveryManifestModule(const std::vector<int>& arches) {
  struct Job {
    ModuleSpec module;
    int arch;
    std::string error;
    std::vector<std::string> entries;
    double ms = 0;
  };
  std::vector<Job> jobs;
  for (const ModuleSpec& m : KernelManifest()) {
    for (int arch : arches) jobs.push_back({m, arch});
  }
  ASSERT_FALSE(jobs.empty());

  const auto start = std::chrono::steady_clock::now();
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t i = next++; i < jobs.size(); i = next++) {
      Job& job = jobs[i];
      absl::StatusOr<std::string> source = ModuleSource(job.module);
      if (!source.ok()) {
        job.error = std::string(source.status().message());
        continue;
      }
      absl::StatusOr<CompileResult> compiled = CompileModuleSource(*source, job.arch);
      if (!compiled.ok()) {
        job.error = std::string(compiled.status().message());
        continue;
      }
      job.ms = compiled->compile_ms;
      absl::StatusOr<std::vector<std::string>> entries = CubinEntryPoints(compiled->cubin);
      if (!entries.ok()) {
        job.error = std::string(entries.status().message());
        continue;
      }
      job.entries = *entries;
    }
  };
  std::thread helper(worker);  // two compiles at a time keep CI time down
  worker();
  helper.join();
  const double wall_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();

  double cpu_ms = 0;
  for (const Job& job : jobs) {
    SCOPED_TRACE(Name(job.module) + " sm_" + std::to_string(job.arch));
    cpu_ms += job.ms;
    ASSERT_TRUE(job.error.empty()) << job.error;
    const std::string suffix = Suffix(job.module);
    EXPECT_TRUE(std::any_of(job.entries.begin(), job.entries.end(),
                            [&](const std::string& e) { return absl::EndsWith(e, suffix); }))
        << absl::StrJoin(job.entries, ", ");
    const std::set<std::string> nvrtc(job.entries.begin(), job.entries.end());
    EXPECT_EQ(nvrtc, EmulatedEntries(job.module))
        << "NVRTC: " << absl::StrJoin(nvrtc, ", ")
        << "\nemulation: " << absl::StrJoin(EmulatedEntries(job.module), ", ");
  }
  std::printf("NVRTC %d: %zu module compiles (%zu modules x %zu archs) in %.0f ms wall, %.0f ms summed\n",
              NvrtcVersion(), jobs.size(), jobs.size() / arches.size(), arches.size(), wall_ms, cpu_ms);
}

TEST(NvrtcCompileTest, EveryManifestModuleForSm90) { CompileEveryManifestModule({90}); }

// sm_80 too: another minute of CI on 2 cores for what sm_90 mostly covers
// (the kernels use no sm_90-only feature), so it runs with the variants:
//   cd build && GROVE_VARIANTS_FULL=1 ctest -L variants_full
TEST(NvrtcCompileFull, EveryManifestModuleForSm80) {
  const char* full = std::getenv("GROVE_VARIANTS_FULL");
  if (full == nullptr || std::string(full) != "1") {
    GTEST_SKIP() << "sm_80 compiles of every module run with GROVE_VARIANTS_FULL=1 (ctest -L variants_full)";
  }
  CompileEveryManifestModule({80});
}

// The indirect form of each kernel file (its entries take a device pointer
// to their parameters: CUDA graphs whose parameters are refreshed) compiles
// and defines the same entry points as the direct form. One type list per
// file, sm_90 only: the body text is shared, the entry macro is what differs.
TEST(NvrtcCompileTest, IndirectFormOfEveryKernelFile) {
  std::set<std::string> files;
  int compiled_files = 0;
  for (const ModuleSpec& m : KernelManifest()) {
    if (!files.insert(m.file).second) continue;
    ModuleSpec indirect = m;
    indirect.indirect = true;
    SCOPED_TRACE(Name(indirect));
    absl::StatusOr<std::string> source = ModuleSource(indirect);
    ASSERT_TRUE(source.ok()) << source.status();
    EXPECT_TRUE(absl::StrContains(*source, "#define GROVE_INDIRECT_PARAMS 1"));
    absl::StatusOr<CompileResult> compiled = CompileModuleSource(*source, 90);
    ASSERT_TRUE(compiled.ok()) << compiled.status();
    absl::StatusOr<std::vector<std::string>> entries = CubinEntryPoints(compiled->cubin);
    ASSERT_TRUE(entries.ok()) << entries.status();
    EXPECT_EQ(std::set<std::string>(entries->begin(), entries->end()), EmulatedEntries(m));
    ++compiled_files;
  }
  EXPECT_GT(compiled_files, 10);
}

// The kernels that keep a patch of accumulators per thread (the tiled
// attention variants, the generic and the largest tiled GEMM, the warp-per-
// row attention) keep it in registers: ptxas reports no stack frame and no
// spills for them at sm_90 in the graph form. A loop over a patch that is
// not unrolled puts the patch in local memory (the first tiled attention
// ran 5-15x slower on an H200 for it).
TEST(NvrtcCompileTest, AccumulatorPatchesStayInRegisters) {
  if (NvrtcVersion() <= 0) GTEST_SKIP() << "NVRTC is not available";
  const std::vector<ModuleSpec> modules = {
      {"attention", {DType::kF32}, true},
      {"attention", {DType::kF32}, true, {{"bk", 64}, {"bq", 64}, {"hd", 64}, {"threads", 128}}},
      {"attention", {DType::kBF16}, true, {{"bk", 64}, {"bq", 32}, {"hd", 64}, {"threads", 128}}},
      {"attention", {DType::kF16}, true, {{"bk", 32}, {"bq", 32}, {"hd", 128}, {"threads", 128}}},
      {"attention_mma", {DType::kF16}, true, {{"bk", 64}, {"bq", 64}, {"hd", 64}, {"threads", 128}}},
      {"attention_mma", {DType::kBF16}, true, {{"bk", 64}, {"bq", 64}, {"hd", 128}, {"threads", 128}}},
      {"gemm_tiled", {DType::kF32}, true},
      {"gemm_tiled", {DType::kF32}, true, {{"rm", 4}, {"rn", 4}, {"threads", 256}, {"tk", 16}, {"tm", 64}, {"tn", 64}}},
  };
  const std::vector<std::string> verbose = {"--ptxas-options=-v"};
  for (const ModuleSpec& m : modules) {
    SCOPED_TRACE(Name(m));
    absl::StatusOr<std::string> source = ModuleSource(m);
    ASSERT_TRUE(source.ok()) << source.status();
    absl::StatusOr<CompileResult> compiled = CompileModuleSource(*source, 90, verbose);
    ASSERT_TRUE(compiled.ok()) << compiled.status();
    int functions = 0;
    for (absl::string_view line : absl::StrSplit(compiled->log, '\n')) {
      if (!absl::StrContains(line, "stack frame")) continue;
      ++functions;
      EXPECT_TRUE(absl::StrContains(line, " 0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads")) << line;
    }
    EXPECT_GT(functions, 0) << "no ptxas report in the log:\n" << compiled->log;
  }
}

// Every emulated entry belongs to some manifest module, so the comparison
// above covers all of them. Kernel variants' entries ("softmax__f32__
// lanes32_threads256": a second suffix) are kernel_variants_test's.
TEST(NvrtcCompileTest, EveryEmulatedEntryIsInAManifestModule) {
  std::set<std::string> covered;
  for (const ModuleSpec& m : KernelManifest()) {
    for (const std::string& e : EmulatedEntries(m)) covered.insert(e);
  }
  int variants = 0;
  for (const std::string& name : emu::EntryNames()) {
    const size_t first = name.find("__");
    if (first != std::string::npos && name.find("__", first + 2) != std::string::npos) {
      ++variants;
      continue;
    }
    EXPECT_TRUE(covered.count(name)) << name << " (file " << emu::EntryFile(name) << ")";
  }
  EXPECT_GT(variants, 0);
}

}  // namespace
}  // namespace grove::jit
