// `grove import`'s ONNX importer as a module the command line loads on first
// use (dlopen), so that no other command loads libonnx and libprotobuf: they
// were some 4 ms of the 10 ms that `grove version` took. The module
// (libgrove_onnx_import.so, tools/onnx/plugin/import_plugin.cc) carries the
// importer and the grove library it folds constants with, and exports one C
// symbol; the command line finds it beside its own binary (a build tree) or
// in <prefix>/<libdir>/grove (an installed one).
//
//   absl::StatusOr<ImportOnnxFileFn> import = LoadOnnxImporter();
//   if (!import.ok()) return Fail(import.status());
//   absl::StatusOr<std::vector<uint8_t>> bytes;
//   (*import)(path, options, &report, &bytes);
#ifndef GROVE_TOOLS_ONNX_IMPORT_PLUGIN_H_
#define GROVE_TOOLS_ONNX_IMPORT_PLUGIN_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "tools/onnx/import_options.h"

namespace grove::onnx_import {

// onnx_importer.h's ImportOnnxFile through the module's C symbol: the same
// compiler and standard library build both sides, so C++ types cross it.
using ImportOnnxFileFn = void (*)(const std::string& path, const ImportOptions& options, ImportReport* report,
                                  absl::StatusOr<std::vector<uint8_t>>* out);
inline constexpr char kImportOnnxFileSymbol[] = "grove_onnx_import_file";
inline constexpr char kImportModuleName[] = "libgrove_onnx_import.so";

// Loads the module once per process (later calls return the same function),
// or a FailedPrecondition error that names the paths tried and dlerror's
// reason.
absl::StatusOr<ImportOnnxFileFn> LoadOnnxImporter();

}  // namespace grove::onnx_import

#endif  // GROVE_TOOLS_ONNX_IMPORT_PLUGIN_H_
