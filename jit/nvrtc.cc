// NVRTC: compiling a kernel module's source to a cubin, and what NVRTC can
// target. Declared in jit/kernel_cache.h. NVRTC is loaded on first use
// (jit/shared_library.h).
#include <cuda_runtime_api.h>  // CUDART_VERSION: the toolkit whose NVRTC to load
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
#include "jit/shared_library.h"

namespace grove::jit {
namespace {

// The NVRTC entry points grove calls, with NVRTC's own signatures.
struct NvrtcApi {
  decltype(&nvrtcVersion) Version;
  decltype(&nvrtcGetErrorString) GetErrorString;
  decltype(&nvrtcGetNumSupportedArchs) GetNumSupportedArchs;
  decltype(&nvrtcGetSupportedArchs) GetSupportedArchs;
  decltype(&nvrtcCreateProgram) CreateProgram;
  decltype(&nvrtcDestroyProgram) DestroyProgram;
  decltype(&nvrtcCompileProgram) CompileProgram;
  decltype(&nvrtcGetProgramLogSize) GetProgramLogSize;
  decltype(&nvrtcGetProgramLog) GetProgramLog;
  decltype(&nvrtcGetCUBINSize) GetCUBINSize;
  decltype(&nvrtcGetCUBIN) GetCUBIN;
};

absl::StatusOr<const NvrtcApi*> LoadNvrtc() {
  const std::string soname = absl::StrCat("libnvrtc.so.", CUDART_VERSION / 1000);
#ifdef GROVE_NVRTC_BUILD_PATH
  const char* build_path = GROVE_NVRTC_BUILD_PATH;
#else
  const char* build_path = nullptr;
#endif
  absl::StatusOr<void*> lib = OpenSharedLibrary("NVRTC", "GROVE_NVRTC_LIBRARY", soname.c_str(), build_path);
  if (!lib.ok()) return lib.status();
  auto* api = new NvrtcApi;  // lives as long as the process, like the library
  std::string error;
  auto resolve = [&](const char* symbol, auto* fn) { return Resolve(*lib, "NVRTC", symbol, fn, &error); };
  const bool ok = resolve("nvrtcVersion", &api->Version) && resolve("nvrtcGetErrorString", &api->GetErrorString) &&
                  resolve("nvrtcGetNumSupportedArchs", &api->GetNumSupportedArchs) &&
                  resolve("nvrtcGetSupportedArchs", &api->GetSupportedArchs) &&
                  resolve("nvrtcCreateProgram", &api->CreateProgram) &&
                  resolve("nvrtcDestroyProgram", &api->DestroyProgram) &&
                  resolve("nvrtcCompileProgram", &api->CompileProgram) &&
                  resolve("nvrtcGetProgramLogSize", &api->GetProgramLogSize) &&
                  resolve("nvrtcGetProgramLog", &api->GetProgramLog) && resolve("nvrtcGetCUBINSize", &api->GetCUBINSize) &&
                  resolve("nvrtcGetCUBIN", &api->GetCUBIN);
  if (!ok) {
    delete api;
    return absl::FailedPreconditionError(absl::StrCat("cannot use NVRTC: ", error));
  }
  return api;
}

// NVRTC, loaded once per process (the error is remembered).
absl::StatusOr<const NvrtcApi*> Nvrtc() {
  static const auto* loaded = new absl::StatusOr<const NvrtcApi*>(LoadNvrtc());
  return *loaded;
}

}  // namespace

// Every NVRTC call goes through this: a failure becomes a status naming the
// call, the file and the line.
#define GROVE_NVRTC_RETURN_IF_ERROR(call)                                                            \
  do {                                                                                               \
    const nvrtcResult grove_nvrtc_result = (call);                                                   \
    if (grove_nvrtc_result != NVRTC_SUCCESS) {                                                       \
      return absl::InternalError(absl::StrCat(#call, " failed: ", nvrtc.GetErrorString(grove_nvrtc_result), \
                                              " (", __FILE__, ":", __LINE__, ")"));                  \
    }                                                                                                \
  } while (0)

int NvrtcVersion() {
  static const int version = [] {
    absl::StatusOr<const NvrtcApi*> nvrtc = Nvrtc();
    int major = 0, minor = 0;
    if (!nvrtc.ok() || (*nvrtc)->Version(&major, &minor) != NVRTC_SUCCESS) return 0;
    return major * 1000 + minor * 10;
  }();
  return version;
}

std::vector<int> NvrtcSupportedArchs() {
  absl::StatusOr<const NvrtcApi*> nvrtc = Nvrtc();
  if (!nvrtc.ok()) return {};
  int n = 0;
  if ((*nvrtc)->GetNumSupportedArchs(&n) != NVRTC_SUCCESS || n <= 0) return {};
  std::vector<int> archs(n);
  if ((*nvrtc)->GetSupportedArchs(archs.data()) != NVRTC_SUCCESS) return {};
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

absl::StatusOr<CompileResult> CompileModuleSource(absl::string_view source, int arch,
                                                  absl::Span<const std::string> extra_options) {
  if (arch <= 0) return absl::InvalidArgumentError(absl::StrCat("bad CUDA arch ", arch));
  absl::StatusOr<const NvrtcApi*> loaded = Nvrtc();
  if (!loaded.ok()) return loaded.status();
  const NvrtcApi& nvrtc = **loaded;
  const auto start = std::chrono::steady_clock::now();
  std::vector<const char*> header_texts, header_names;
  for (const EmbeddedFile& f : KernelHeaders()) {
    header_texts.push_back(f.text);
    header_names.push_back(f.name);
  }
  const std::string src(source);
  nvrtcProgram prog = nullptr;
  GROVE_NVRTC_RETURN_IF_ERROR(nvrtc.CreateProgram(&prog, src.c_str(), "grove_module.cu",
                                                 static_cast<int>(header_texts.size()),
                                                 header_texts.data(), header_names.data()));
  absl::Cleanup destroy = [&prog, &nvrtc] { nvrtc.DestroyProgram(&prog); };

  std::vector<std::string> options = NvrtcOptions(arch);
  options.insert(options.end(), extra_options.begin(), extra_options.end());
  std::vector<const char*> option_ptrs;
  for (const std::string& o : options) option_ptrs.push_back(o.c_str());
  const nvrtcResult compiled =
      nvrtc.CompileProgram(prog, static_cast<int>(option_ptrs.size()), option_ptrs.data());

  CompileResult result;
  size_t log_size = 0;
  GROVE_NVRTC_RETURN_IF_ERROR(nvrtc.GetProgramLogSize(prog, &log_size));
  if (log_size > 1) {
    result.log.resize(log_size);
    GROVE_NVRTC_RETURN_IF_ERROR(nvrtc.GetProgramLog(prog, result.log.data()));
    result.log.resize(log_size - 1);  // the terminating NUL
  }
  if (compiled != NVRTC_SUCCESS) {
    const std::string what = absl::StrCat("NVRTC (", NvrtcVersion() / 1000, ".", NvrtcVersion() % 1000 / 10,
                                          ") could not compile for sm_", arch, " (",
                                          absl::StrJoin(options, " "), "): ", nvrtc.GetErrorString(compiled),
                                          "\n", result.log);
    if (compiled == NVRTC_ERROR_COMPILATION || compiled == NVRTC_ERROR_INVALID_OPTION) {
      return absl::InvalidArgumentError(what);
    }
    return absl::InternalError(what);
  }
  size_t cubin_size = 0;
  GROVE_NVRTC_RETURN_IF_ERROR(nvrtc.GetCUBINSize(prog, &cubin_size));
  if (cubin_size == 0) return absl::InternalError("NVRTC produced an empty cubin");
  result.cubin.resize(cubin_size);
  GROVE_NVRTC_RETURN_IF_ERROR(nvrtc.GetCUBIN(prog, result.cubin.data()));
  result.compile_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return result;
}

}  // namespace grove::jit
