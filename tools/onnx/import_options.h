// What `grove import` gives the ONNX importer and gets back (onnx_importer.h),
// apart from ONNX's own types: the command line includes this, and loads the
// importer itself only when it imports (import_plugin.h).
#ifndef GROVE_TOOLS_ONNX_IMPORT_OPTIONS_H_
#define GROVE_TOOLS_ONNX_IMPORT_OPTIONS_H_

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "grove/grove.h"

namespace grove::onnx_import {

inline constexpr int kMinOpset = 11;
inline constexpr int kMaxOpset = 22;
// Models below kMinOpset are converted to this opset before import.
inline constexpr int kUpgradeOpset = 13;

struct ImportOptions {
  // Ranges of dynamic dims by symbol name (a dim_param, or a generated name as
  // the report lists it); every other symbol gets the default range.
  std::map<std::string, std::pair<int64_t, int64_t>> dim_ranges;
  int64_t default_dim_min = 0;
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

}  // namespace grove::onnx_import

#endif  // GROVE_TOOLS_ONNX_IMPORT_OPTIONS_H_
