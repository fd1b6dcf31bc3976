// Fuzzes the ONNX importer: serialized ModelProto bytes in, `grove import`'s
// path through parsing, opset conversion, checks and constant folding; a
// model that imports is loaded and run. External data is refused (no model
// directory). Seeds: fuzz/corpus/onnx_import/ (test/models/*/model.onnx).
#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/strings/string_view.h"
#include "fuzz/fuzz_run.h"
#include "grove/grove.h"
#include "tools/onnx/onnx_importer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace grove::onnx_import;
  absl::StatusOr<::onnx::ModelProto> proto =
      ParseOnnxModel(absl::string_view(reinterpret_cast<const char*>(data), size), "fuzz input");
  if (!proto.ok()) return 0;
  ImportOptions options;
  options.default_dim_max = 64;
  options.max_folded_bytes = 1 << 20;
  absl::StatusOr<std::vector<uint8_t>> bytes = ImportOnnxModel(*proto, "", options, nullptr);
  if (!bytes.ok()) return 0;
  absl::StatusOr<std::shared_ptr<const grove::Model>> model = grove::Model::LoadFromBuffer(*bytes);
  if (!model.ok()) return 0;
  grove::fuzz::RunSmall(*model, {});
  return 0;
}
