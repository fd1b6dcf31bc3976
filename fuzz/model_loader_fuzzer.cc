// Fuzzes the .grove loader (FlatBuffer verifier, semantic checks, symbolic
// shape inference) with bytes as they would come from a file, then plans and
// runs whatever loads. Seeds: fuzz/corpus/model_loader/ (the demo models).
#include <cstddef>
#include <cstdint>

#include "fuzz/fuzz_run.h"
#include "grove/grove.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  absl::StatusOr<std::shared_ptr<const grove::Model>> model =
      grove::Model::LoadFromBuffer(absl::Span<const uint8_t>(data, size));
  if (!model.ok()) return 0;
  grove::fuzz::RunSmall(*model, absl::Span<const uint8_t>(data, size > 64 ? 64 : size));
  return 0;
}
