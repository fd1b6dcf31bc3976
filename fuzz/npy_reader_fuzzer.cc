// Fuzzes the .npy reader (header parse, dtype and shape checks, text
// decoding); what reads is written back and must read back the same.
// Seeds: fuzz/corpus/npy_reader/ (test inputs of every dtype).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "grove/grove.h"
#include "grove/npy.h"

namespace {

void Mismatch(const char* what) {
  std::fprintf(stderr, "npy_reader_fuzzer: the written copy reads back with another %s\n", what);
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  absl::StatusOr<grove::Tensor> t = grove::ReadNpyFromBuffer(absl::Span<const uint8_t>(data, size));
  if (!t.ok()) return 0;
  absl::StatusOr<std::string> encoded = grove::EncodeNpy(t->view());
  if (!encoded.ok()) return 0;  // bf16 has no NumPy dtype
  absl::StatusOr<grove::Tensor> again = grove::ReadNpyFromBuffer(
      absl::Span<const uint8_t>(reinterpret_cast<const uint8_t*>(encoded->data()), encoded->size()));
  if (!again.ok()) Mismatch("status (it fails)");
  if (again->dtype() != t->dtype()) Mismatch("dtype");
  if (again->shape() != t->shape()) Mismatch("shape");
  if (t->dtype() == grove::DType::kString) {
    const auto* a = t->as<grove::StringRef>();
    const auto* b = again->as<grove::StringRef>();
    for (int64_t i = 0; i < t->view().num_elements(); ++i) {
      if (a[i].view() != b[i].view()) Mismatch("string");
    }
  } else if (t->view().byte_size() > 0 && std::memcmp(t->data(), again->data(), t->view().byte_size()) != 0) {
    Mismatch("content");
  }
  return 0;
}
