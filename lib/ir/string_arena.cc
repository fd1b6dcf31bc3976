#include "lib/ir/string_arena.h"

#include <algorithm>
#include <cstring>
#include <new>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace grove::ir {
namespace {

constexpr size_t kFirstBlockBytes = 64 * 1024;

}  // namespace

absl::StatusOr<char*> StringArena::Allocate(size_t size) {
  if (size > kMaxBytes - used_) {
    return absl::ResourceExhaustedError(
        absl::StrCat("strings made in one run would take more than ", kMaxBytes >> 30, " GiB"));
  }
  if (blocks_.empty() || blocks_.back().size - offset_ < size) {
    // Blocks double, so a run that makes many strings allocates O(log n) times.
    const size_t last = blocks_.empty() ? kFirstBlockBytes / 2 : blocks_.back().size;
    const size_t want = std::max(size, std::min(last * 2, kMaxBytes));
    Block b;
    b.data.reset(new (std::nothrow) char[want]);
    if (b.data == nullptr) {
      return absl::ResourceExhaustedError(absl::StrCat("cannot allocate ", want, " bytes for strings"));
    }
    b.size = want;
    blocks_.push_back(std::move(b));
    offset_ = 0;
  }
  char* p = blocks_.back().data.get() + offset_;
  offset_ += size;
  used_ += size;
  return p;
}

absl::StatusOr<StringRef> StringArena::Store(absl::string_view s) {
  if (s.empty()) return StringRef();
  absl::StatusOr<char*> p = Allocate(s.size());
  if (!p.ok()) return p.status();
  std::memcpy(*p, s.data(), s.size());
  return StringRef(absl::string_view(*p, s.size()));
}

void StringArena::Reset() {
  if (blocks_.size() > 1) {
    // Keep the largest block: the next run likely needs as much.
    std::swap(blocks_.front(), blocks_.back());
    blocks_.resize(1);
  }
  offset_ = 0;
  used_ = 0;
}

}  // namespace grove::ir
