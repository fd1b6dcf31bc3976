#include "jit/shared_library.h"

#include <dlfcn.h>

#include <cstdlib>

#include "absl/strings/str_cat.h"

namespace grove::jit {

absl::StatusOr<void*> OpenSharedLibrary(absl::string_view what, const char* env, const char* soname,
                                        const char* build_path) {
  // RTLD_LOCAL: the library's symbols stay out of the global namespace.
  constexpr int kFlags = RTLD_NOW | RTLD_LOCAL;
  const char* given = env != nullptr ? std::getenv(env) : nullptr;
  std::string tried;
  void* lib = nullptr;
  if (given != nullptr && *given != '\0') {
    tried = absl::StrCat(given, " (", env, ")");
    lib = dlopen(given, kFlags);
  } else {
    tried = soname;
    lib = dlopen(soname, kFlags);
    if (lib == nullptr && build_path != nullptr) {
      absl::StrAppend(&tried, " or ", build_path);
      lib = dlopen(build_path, kFlags);
    }
  }
  if (lib != nullptr) return lib;
  const char* why = dlerror();
  return absl::FailedPreconditionError(absl::StrCat(
      "cannot load ", what, " (", tried, "): ", why != nullptr ? why : "not found",
      "; install the CUDA toolkit's ", what, ", add its lib directory to LD_LIBRARY_PATH",
      env != nullptr ? absl::StrCat(" or name the file in ", env) : std::string()));
}

void* FindSymbol(void* library, absl::string_view what, const char* symbol, std::string* error) {
  void* p = dlsym(library, symbol);
  if (p == nullptr) *error = absl::StrCat(what, " has no symbol ", symbol, " (an older version?)");
  return p;
}

}  // namespace grove::jit
