// Kernel modules: one file of jit/kernels/ instantiated for a list of element
// types, the unit NVRTC compiles and the kernel cache stores. An entry point
// of a module is named <kernel><suffix>, e.g. "ew_chain__f32" or
// "cast__f32_f16"; the host emulation registers the same names. A module may
// carry a kernel variant's parameters (jit/kernel_config.h): they become
// GROVE_V_<NAME> defines and a second suffix, as in
// "softmax__f32__lanes32_threads128".
#ifndef GROVE_JIT_MODULE_H_
#define GROVE_JIT_MODULE_H_

#include <string>
#include <utility>
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
  // A variant's parameters, sorted by name (GROVE_V_<NAME-upper> <value>);
  // empty for the module without a variant, whose kernels keep their
  // default geometry. Names are lower-case letters (digits inside, not at
  // the end), values >= 0.
  std::vector<std::pair<std::string, int>> params;

  bool operator==(const ModuleSpec& o) const {
    return file == o.file && types == o.types && indirect == o.indirect && params == o.params;
  }
  template <typename H>
  friend H AbslHashValue(H h, const ModuleSpec& m) {
    return H::combine(std::move(h), m.file, m.types, m.indirect, m.params);
  }
};

// "__f32", "__f32_f16"; with parameters "__f32__lanes32_threads128".
std::string Suffix(const ModuleSpec& module);
// "<kernel><suffix>".
std::string EntryName(absl::string_view kernel, const ModuleSpec& module);
// The C++ spelling of an element type inside kernels ("float", "grove_k::f16").
absl::StatusOr<std::string> KernelCType(DType dtype);

// The translation unit NVRTC compiles for a module: type defines, then
// `#include "jit/kernels/<file>.cuh"`. Fails for a file or type list that is
// not in the manifest, or parameters outside the file's family's space.
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
// True for a manifest module, and for a variant of one whose parameters are
// in the space of the kernel family built from that file
// (KernelFamily::InSpace).
bool InManifest(const ModuleSpec& module);
// "lanes32_threads128" ("" without parameters).
std::string ParamsName(absl::Span<const std::pair<std::string, int>> params);

// 64-bit FNV-1a, stable across processes and builds.
uint64_t Fingerprint64(absl::string_view bytes, uint64_t seed = 0xcbf29ce484222325ull);

}  // namespace grove::jit

#endif  // GROVE_JIT_MODULE_H_
