// NVRTC: compiling a kernel module's source to a cubin, and what NVRTC can
// target. Declared in jit/kernel_cache.h.
#include <nvrtc.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "jit/kernel_cache.h"

// Every NVRTC call goes through this: a failure becomes a status naming the
// call, the file and the line.
#define GROVE_NVRTC_RETURN_IF_ERROR(call)                                                          \
  do {                                                                                             \
    const nvrtcResult grove_nvrtc_result = (call);                                                 \
    if (grove_nvrtc_result != NVRTC_SUCCESS) {                                                     \
      return absl::InternalError(absl::StrCat(#call, " failed: ", nvrtcGetErrorString(grove_nvrtc_result), \
                                              " (", __FILE__, ":", __LINE__, ")"));                \
    }                                                                                              \
  } while (0)

namespace grove::jit {

int NvrtcVersion() {
  static const int version = [] {
    int major = 0, minor = 0;
    if (nvrtcVersion(&major, &minor) != NVRTC_SUCCESS) return 0;
    return major * 1000 + minor * 10;
  }();
  return version;
}

std::vector<int> NvrtcSupportedArchs() {
  int n = 0;
  if (nvrtcGetNumSupportedArchs(&n) != NVRTC_SUCCESS || n <= 0) return {};
  std::vector<int> archs(n);
  if (nvrtcGetSupportedArchs(archs.data()) != NVRTC_SUCCESS) return {};
  std::sort(archs.begin(), archs.end());
  return archs;
}

absl::StatusOr<int> ParseArch(absl::string_view text) {
  absl::string_view t = absl::StripAsciiWhitespace(text);
  const absl::string_view original = t;
  if (!absl::ConsumePrefix(&t, "sm_")) absl::ConsumePrefix(&t, "compute_");
  int arch = 0;
  bool ok = false;
  if (absl::StrContains(t, '.')) {
    std::vector<absl::string_view> parts = absl::StrSplit(t, '.');
    int major = 0, minor = 0;
    ok = parts.size() == 2 && !parts[0].empty() && parts[1].size() == 1 &&
         absl::SimpleAtoi(parts[0], &major) && absl::SimpleAtoi(parts[1], &minor) && major > 0 &&
         major < 100 && minor >= 0;
    arch = major * 10 + minor;
  } else {
    ok = !t.empty() && absl::ascii_isdigit(t[0]) && absl::SimpleAtoi(t, &arch) && arch >= 10 &&
         arch < 1000;
  }
  if (!ok) {
    return absl::InvalidArgumentError(
        absl::StrCat("bad CUDA arch \"", original, "\": expected sm_90, 90 or 9.0"));
  }
  return arch;
}

std::vector<std::string> NvrtcOptions(int arch) {
  // No --use_fast_math (kernels keep IEEE results, as the CPU reference), no
  // -default-device (kernels mark __global__/__device__ themselves).
  return {absl::StrCat("--gpu-architecture=sm_", arch), "-std=c++17"};
}

absl::StatusOr<CompileResult> CompileModuleSource(absl::string_view source, int arch) {
  if (arch <= 0) return absl::InvalidArgumentError(absl::StrCat("bad CUDA arch ", arch));
  const auto start = std::chrono::steady_clock::now();
  std::vector<const char*> header_texts, header_names;
  for (const EmbeddedFile& f : KernelHeaders()) {
    header_texts.push_back(f.text);
    header_names.push_back(f.name);
  }
  const std::string src(source);
  nvrtcProgram prog = nullptr;
  GROVE_NVRTC_RETURN_IF_ERROR(nvrtcCreateProgram(&prog, src.c_str(), "grove_module.cu",
                                                 static_cast<int>(header_texts.size()),
                                                 header_texts.data(), header_names.data()));
  absl::Cleanup destroy = [&prog] { nvrtcDestroyProgram(&prog); };

  const std::vector<std::string> options = NvrtcOptions(arch);
  std::vector<const char*> option_ptrs;
  for (const std::string& o : options) option_ptrs.push_back(o.c_str());
  const nvrtcResult compiled =
      nvrtcCompileProgram(prog, static_cast<int>(option_ptrs.size()), option_ptrs.data());

  CompileResult result;
  size_t log_size = 0;
  GROVE_NVRTC_RETURN_IF_ERROR(nvrtcGetProgramLogSize(prog, &log_size));
  if (log_size > 1) {
    result.log.resize(log_size);
    GROVE_NVRTC_RETURN_IF_ERROR(nvrtcGetProgramLog(prog, result.log.data()));
    result.log.resize(log_size - 1);  // the terminating NUL
  }
  if (compiled != NVRTC_SUCCESS) {
    const std::string what = absl::StrCat("NVRTC (", NvrtcVersion() / 1000, ".", NvrtcVersion() % 1000 / 10,
                                          ") could not compile for sm_", arch, " (",
                                          absl::StrJoin(options, " "), "): ", nvrtcGetErrorString(compiled),
                                          "\n", result.log);
    if (compiled == NVRTC_ERROR_COMPILATION || compiled == NVRTC_ERROR_INVALID_OPTION) {
      return absl::InvalidArgumentError(what);
    }
    return absl::InternalError(what);
  }
  size_t cubin_size = 0;
  GROVE_NVRTC_RETURN_IF_ERROR(nvrtcGetCUBINSize(prog, &cubin_size));
  if (cubin_size == 0) return absl::InternalError("NVRTC produced an empty cubin");
  result.cubin.resize(cubin_size);
  GROVE_NVRTC_RETURN_IF_ERROR(nvrtcGetCUBIN(prog, result.cubin.data()));
  result.compile_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return result;
}

}  // namespace grove::jit
