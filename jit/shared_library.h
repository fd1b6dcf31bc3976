// CUDA's libraries (NVRTC, cuBLASLt) are loaded with dlopen on first use,
// not linked: a linked libcublasLt or libnvrtc costs every process that
// loads grove its relocations at start-up (~175 ms together), also the ones
// that never touch a GPU, and a machine without the CUDA toolkit could not
// start grove at all. The code that uses one asks for its entry points
// here when it first needs them; a missing library is an error naming it.
#ifndef GROVE_JIT_SHARED_LIBRARY_H_
#define GROVE_JIT_SHARED_LIBRARY_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace grove::jit {

// Opens `what`'s library (never closed): the file named by the environment
// variable `env` when it is set (only that), else `soname` through the
// loader's search path, else `build_path` (where the build found it; may be
// null). FAILED_PRECONDITION naming what was tried and how to fix it.
absl::StatusOr<void*> OpenSharedLibrary(absl::string_view what, const char* env, const char* soname,
                                        const char* build_path);

// The address of `symbol` in `library`, or nullptr with *error saying which.
void* FindSymbol(void* library, absl::string_view what, const char* symbol, std::string* error);

// Resolves one entry point into *fn: false (and *error set) when missing.
template <typename Fn>
bool Resolve(void* library, absl::string_view what, const char* symbol, Fn* fn, std::string* error) {
  *fn = reinterpret_cast<Fn>(FindSymbol(library, what, symbol, error));
  return *fn != nullptr;
}

}  // namespace grove::jit

#endif  // GROVE_JIT_SHARED_LIBRARY_H_
