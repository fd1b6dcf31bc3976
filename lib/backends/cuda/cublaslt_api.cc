#include "lib/backends/cuda/cublaslt_api.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "jit/shared_library.h"

namespace grove::cuda {
namespace {

#define GROVE_STR2(x) #x
#define GROVE_STR(x) GROVE_STR2(x)
constexpr const char* kSoname = "libcublasLt.so." GROVE_STR(CUBLAS_VER_MAJOR);
#ifdef GROVE_CUBLASLT_BUILD_PATH
constexpr const char* kBuildPath = GROVE_CUBLASLT_BUILD_PATH;
#else
constexpr const char* kBuildPath = nullptr;
#endif

absl::StatusOr<const CublasLtApi*> Load() {
  absl::StatusOr<void*> lib = jit::OpenSharedLibrary("cuBLASLt", "GROVE_CUBLASLT_LIBRARY", kSoname, kBuildPath);
  if (!lib.ok()) return lib.status();
  auto* api = new CublasLtApi;  // lives as long as the process, like the library
  std::string error;
  auto resolve = [&](const char* symbol, auto* fn) { return jit::Resolve(*lib, "cuBLASLt", symbol, fn, &error); };
  const bool ok = resolve("cublasLtCreate", &api->Create) && resolve("cublasLtMatmul", &api->Matmul) &&
                  resolve("cublasLtMatmulAlgoGetHeuristic", &api->MatmulAlgoGetHeuristic) &&
                  resolve("cublasLtMatmulDescCreate", &api->MatmulDescCreate) &&
                  resolve("cublasLtMatmulDescDestroy", &api->MatmulDescDestroy) &&
                  resolve("cublasLtMatmulDescSetAttribute", &api->MatmulDescSetAttribute) &&
                  resolve("cublasLtMatmulPreferenceCreate", &api->MatmulPreferenceCreate) &&
                  resolve("cublasLtMatmulPreferenceDestroy", &api->MatmulPreferenceDestroy) &&
                  resolve("cublasLtMatmulPreferenceSetAttribute", &api->MatmulPreferenceSetAttribute) &&
                  resolve("cublasLtMatrixLayoutCreate", &api->MatrixLayoutCreate) &&
                  resolve("cublasLtMatrixLayoutDestroy", &api->MatrixLayoutDestroy) &&
                  resolve("cublasLtMatrixLayoutSetAttribute", &api->MatrixLayoutSetAttribute);
  if (!ok) {
    delete api;
    return absl::FailedPreconditionError(absl::StrCat("cannot use cuBLASLt: ", error));
  }
  return api;
}

}  // namespace

absl::StatusOr<const CublasLtApi*> LoadCublasLt() {
  static const auto* loaded = new absl::StatusOr<const CublasLtApi*>(Load());
  return *loaded;
}

}  // namespace grove::cuda
