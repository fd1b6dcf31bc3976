// Storage for the bytes of strings that kernels make (Cast to string,
// StringNormalizer). A kString tensor holds StringRefs, so the ops that move
// elements (Reshape, Gather, Concat, a Loop's carried values...) copy
// references and never own bytes; the bytes live here, append-only, until
// the owner resets the arena: a session at the start of each run (outputs of
// a run stay valid until the next), a tool or test for as long as it needs.
//
//   ir::StringArena arena;
//   absl::StatusOr<StringRef> s = arena.Store("monday");
#ifndef GROVE_LIB_IR_STRING_ARENA_H_
#define GROVE_LIB_IR_STRING_ARENA_H_

#include <cstddef>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "grove/grove.h"

namespace grove::ir {

class StringArena {
 public:
  StringArena() = default;
  StringArena(const StringArena&) = delete;
  StringArena& operator=(const StringArena&) = delete;

  // `size` bytes that stay put until Reset; ResourceExhausted past the limit.
  absl::StatusOr<char*> Allocate(size_t size);
  // A copy of `s` in the arena.
  absl::StatusOr<StringRef> Store(absl::string_view s);
  // Forgets every string; keeps the first block for the next use.
  void Reset();
  size_t bytes_used() const { return used_; }

  // Bytes one arena may hold (a run that makes more strings than this is
  // refused rather than exhaust the host).
  static constexpr size_t kMaxBytes = size_t{16} << 30;

 private:
  struct Block {
    std::unique_ptr<char[]> data;
    size_t size = 0;
  };
  std::vector<Block> blocks_;
  size_t offset_ = 0;  // in blocks_.back()
  size_t used_ = 0;
};

}  // namespace grove::ir

#endif  // GROVE_LIB_IR_STRING_ARENA_H_
