#include "lib/backends/cuda/cublaslt_api.h"

#include <dlfcn.h>

#include <string>

#include "absl/strings/str_cat.h"

namespace grove::cuda {
namespace {

#define GROVE_STR2(x) #x
#define GROVE_STR(x) GROVE_STR2(x)
constexpr const char* kSoname = "libcublasLt.so." GROVE_STR(CUBLAS_VER_MAJOR);

// Resolves one entry point into *fn; false (and *error set) when missing.
template <typename Fn>
bool Resolve(void* lib, const char* name, Fn* fn, std::string* error) {
  *fn = reinterpret_cast<Fn>(dlsym(lib, name));
  if (*fn == nullptr) *error = absl::StrCat(kSoname, " has no symbol ", name);
  return *fn != nullptr;
}

absl::StatusOr<const CublasLtApi*> Load() {
  std::string tried = kSoname;
  // RTLD_LOCAL: cuBLASLt's symbols stay out of the global namespace.
  void* lib = dlopen(kSoname, RTLD_NOW | RTLD_LOCAL);
#ifdef GROVE_CUBLASLT_LIBRARY
  if (lib == nullptr) {
    lib = dlopen(GROVE_CUBLASLT_LIBRARY, RTLD_NOW | RTLD_LOCAL);
    absl::StrAppend(&tried, " or ", GROVE_CUBLASLT_LIBRARY);
  }
#endif
  if (lib == nullptr) {
    const char* why = dlerror();
    return absl::FailedPreconditionError(
        absl::StrCat("cannot load cuBLASLt (", tried, "): ", why != nullptr ? why : "not found",
                     "; install the CUDA toolkit's cuBLAS or add its lib directory to LD_LIBRARY_PATH"));
  }
  auto* api = new CublasLtApi;  // lives as long as the process, like the library
  std::string error;
  const bool ok = Resolve(lib, "cublasLtCreate", &api->Create, &error) &&
                  Resolve(lib, "cublasLtMatmul", &api->Matmul, &error) &&
                  Resolve(lib, "cublasLtMatmulAlgoGetHeuristic", &api->MatmulAlgoGetHeuristic, &error) &&
                  Resolve(lib, "cublasLtMatmulDescCreate", &api->MatmulDescCreate, &error) &&
                  Resolve(lib, "cublasLtMatmulDescDestroy", &api->MatmulDescDestroy, &error) &&
                  Resolve(lib, "cublasLtMatmulDescSetAttribute", &api->MatmulDescSetAttribute, &error) &&
                  Resolve(lib, "cublasLtMatmulPreferenceCreate", &api->MatmulPreferenceCreate, &error) &&
                  Resolve(lib, "cublasLtMatmulPreferenceDestroy", &api->MatmulPreferenceDestroy, &error) &&
                  Resolve(lib, "cublasLtMatmulPreferenceSetAttribute", &api->MatmulPreferenceSetAttribute, &error) &&
                  Resolve(lib, "cublasLtMatrixLayoutCreate", &api->MatrixLayoutCreate, &error) &&
                  Resolve(lib, "cublasLtMatrixLayoutDestroy", &api->MatrixLayoutDestroy, &error) &&
                  Resolve(lib, "cublasLtMatrixLayoutSetAttribute", &api->MatrixLayoutSetAttribute, &error);
  if (!ok) {
    delete api;
    dlclose(lib);
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
