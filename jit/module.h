// Kernel modules: one file of jit/kernels/ instantiated for a list of element
// types, the unit NVRTC compiles and the kernel cache stores. An entry point
// of a module is named <kernel><suffix>, e.g. "ew_chain__f32" or
// "cast__f32_f16"; the host emulation registers the same names.
#ifndef GROVE_JIT_MODULE_H_
#define GROVE_JIT_MODULE_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "grove/grove.h"

namespace grove::jit {

struct ModuleSpec {
  std::string file;          // "elementwise" for jit/kernels/elementwise.cuh
  std::vector<DType> types;  // GROVE_T0, GROVE_T1
  // The module's entry points take a device pointer to their parameter
  // struct instead of the struct (GROVE_INDIRECT_PARAMS, see prelude.cuh):
  // a CUDA graph whose parameters live in device memory the host refills.
  bool indirect = false;

  bool operator==(const ModuleSpec& o) const {
    return file == o.file && types == o.types && indirect == o.indirect;
  }
  template <typename H>
  friend H AbslHashValue(H h, const ModuleSpec& m) {
    return H::combine(std::move(h), m.file, m.types, m.indirect);
  }
};

// "__f32", "__f32_f16".
std::string Suffix(const ModuleSpec& module);
// "<kernel><suffix>".
std::string EntryName(absl::string_view kernel, const ModuleSpec& module);
// The C++ spelling of an element type inside kernels ("float", "grove_k::f16").
absl::StatusOr<std::string> KernelCType(DType dtype);

// The translation unit NVRTC compiles for a module: type defines, then
// `#include "jit/kernels/<file>.cuh"`. Fails for a file or type list that is
// not in the manifest.
absl::StatusOr<std::string> ModuleSource(const ModuleSpec& module);

struct EmbeddedFile {
  const char* name;  // "jit/kernels/prelude.cuh"
  const char* text;
};
// Every file of jit/kernels/, embedded at build time: NVRTC's headers.
absl::Span<const EmbeddedFile> KernelHeaders();
// A fingerprint of all of KernelHeaders() (part of every cache key).
uint64_t KernelHeadersFingerprint();
// Every module of jit/kernels/kernels.cmake (what `grove compile --all`
// and the NVRTC test build).
absl::Span<const ModuleSpec> KernelManifest();
bool InManifest(const ModuleSpec& module);

// 64-bit FNV-1a, stable across processes and builds.
uint64_t Fingerprint64(absl::string_view bytes, uint64_t seed = 0xcbf29ce484222325ull);

}  // namespace grove::jit

#endif  // GROVE_JIT_MODULE_H_
