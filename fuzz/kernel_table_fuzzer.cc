// Fuzzes the kernel dispatch table loader (jit/dispatch_table.h: the
// FlatBuffers verifier, then each entry's checks); a table that loads is
// written back and must load back with the same entries.
// Seeds: fuzz/corpus/kernel_table/ (tables written by grove tune on the
// emulated device).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "jit/dispatch_table.h"

namespace {

void Mismatch(const char* what) {
  std::fprintf(stderr, "kernel_table_fuzzer: the written copy loads back with another %s\n", what);
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  absl::StatusOr<grove::jit::DispatchTable> t = grove::jit::DispatchTable::Load(absl::Span<const uint8_t>(data, size));
  if (!t.ok()) return 0;
  absl::StatusOr<grove::jit::DispatchTable> again = grove::jit::DispatchTable::Load(t->Serialize());
  if (!again.ok()) Mismatch("status (it fails)");
  if (again->entries().size() != t->entries().size()) Mismatch("entry count");
  for (const grove::jit::DispatchEntry& e : t->entries()) {
    const grove::jit::DispatchEntry* f = again->Find(e.arch, e.bucket);
    if (f == nullptr || !(f->config == e.config) || f->measured_us != e.measured_us) Mismatch("entry");
  }
  if (again->provenance().gpu != t->provenance().gpu) Mismatch("provenance");
  return 0;
}
