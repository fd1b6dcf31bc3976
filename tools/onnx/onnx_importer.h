// The ONNX importer behind `grove import`: turns an ONNX model (opsets 11..22)
// into a .grove model through grove::ModelBuilder. A model below opset 11 is
// first converted to opset 13 with ONNX's version converter, in a child
// process with a time limit (ImportReport::converted_from_opset says so).
//
//   grove::onnx_import::ImportOptions options;
//   options.dim_ranges["seq"] = {1, 512};
//   grove::onnx_import::ImportReport report;
//   auto bytes = grove::onnx_import::ImportOnnxFile("bert.onnx", options, &report);
//
// Ops pass through by name: whatever grove's op registry has is imported, and
// anything it lacks (op, attribute, dtype) is an error naming the ONNX node.
// Nodes whose inputs are all constants are folded into weights by running them
// through grove itself.
#ifndef GROVE_TOOLS_ONNX_ONNX_IMPORTER_H_
#define GROVE_TOOLS_ONNX_ONNX_IMPORTER_H_

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "grove/grove.h"
#include "onnx/onnx_pb.h"
#include "tools/onnx/import_options.h"

namespace grove::onnx_import {

// Reads and imports the ONNX file at `path`; external data is resolved in
// the file's directory. `report` may be null.
absl::StatusOr<std::vector<uint8_t>> ImportOnnxFile(const std::string& path, const ImportOptions& options,
                                                    ImportReport* report);

// Imports a parsed model; `model_dir` resolves external data (empty: refuse it).
absl::StatusOr<std::vector<uint8_t>> ImportOnnxModel(const ::onnx::ModelProto& model, absl::string_view model_dir,
                                                     const ImportOptions& options, ImportReport* report);

// Parses a serialized ModelProto; a malformed one is an InvalidArgument error.
absl::StatusOr<::onnx::ModelProto> ParseOnnxModel(absl::string_view bytes, absl::string_view what);

}  // namespace grove::onnx_import

#endif  // GROVE_TOOLS_ONNX_ONNX_IMPORTER_H_
