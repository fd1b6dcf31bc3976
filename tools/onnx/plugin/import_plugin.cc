// The one symbol of libgrove_onnx_import.so (import_plugin.h): ImportOnnxFile
// for `grove import`, which loads this module only when it imports.
#include "tools/onnx/import_plugin.h"
#include "tools/onnx/onnx_importer.h"

extern "C" __attribute__((visibility("default"))) void grove_onnx_import_file(
    const std::string& path, const grove::onnx_import::ImportOptions& options,
    grove::onnx_import::ImportReport* report, absl::StatusOr<std::vector<uint8_t>>* out) {
  *out = grove::onnx_import::ImportOnnxFile(path, options, report);
}

// The type the command line calls it through.
static_assert(std::is_same_v<decltype(&grove_onnx_import_file), grove::onnx_import::ImportOnnxFileFn>);
