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

namespace grove::onnx_import {

inline constexpr int kMinOpset = 11;
inline constexpr int kMaxOpset = 22;
// Models below kMinOpset are converted to this opset before import.
inline constexpr int kUpgradeOpset = 13;

struct ImportOptions {
  // Ranges of dynamic dims by symbol name (a dim_param, or a generated name as
  // the report lists it); every other symbol gets the default range.
  std::map<std::string, std::pair<int64_t, int64_t>> dim_ranges;
  int64_t default_dim_min = 1;
  int64_t default_dim_max = 4096;
  // Ranks for graph inputs whose type carries no shape at all; their dims
  // become generated symbols. Without an entry such an input is an error.
  std::map<std::string, int> input_ranks;
  bool fold_constants = true;
  // A folded result larger than this stays an op, so folding cannot bloat
  // the model (a Tile or Expand of a small constant).
  uint64_t max_folded_bytes = uint64_t{64} << 20;
  // A model below kMinOpset is converted by ONNX's version converter in a
  // child process; one still running after this long is stopped (an error).
  double converter_timeout_seconds = 30;
};

struct ImportReport {
  int opset = 0;              // the ai.onnx opset imported (after any conversion)
  int converted_from_opset = 0;  // the model's own opset when it was converted; else 0
  std::string producer;      // producer_name and version of the ONNX file
  int onnx_nodes = 0;        // nodes in all graphs, Constant nodes included
  int nodes_imported = 0;    // grove ops written
  int constants_folded = 0;  // nodes evaluated at import and stored as weights
  int constant_nodes = 0;    // Constant nodes turned into weights
  int subgraphs = 0;         // If/Loop bodies
  int weights = 0;           // weights written
  uint64_t weight_bytes = 0;
  std::vector<SymbolInfo> symbols;  // in the model's order
};

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
