// The scratch arrays of a prepared CPU kernel, laid out in its workspace
// (ir::PreparedKernel::workspace_bytes, planned in the arena): the prepare
// adds each array to a WorkspaceLayout and declares layout.bytes(); the
// invoke takes the same arrays, in the same order, from a WorkspaceCursor
// over ctx.workspace(). Each array starts 64-byte aligned.
//
//   WorkspaceLayout layout;                        // prepare
//   layout.Add<double>(rows);                      //   mean
//   layout.Add<double>(rows);                      //   inv_std
//   return backends::MakePrepared(p, layout.bytes());
//
//   WorkspaceCursor ws(ctx.workspace());           // invoke
//   double* mean = ws.Take<double>(p.rows);
//   double* inv_std = ws.Take<double>(p.rows);
#ifndef GROVE_LIB_BACKENDS_CPU_WORKSPACE_LAYOUT_H_
#define GROVE_LIB_BACKENDS_CPU_WORKSPACE_LAYOUT_H_

#include <cstdint>

namespace grove::cpu {

inline constexpr uint64_t kWorkspaceAlignment = 64;

inline uint64_t AlignWorkspace(uint64_t bytes) {
  return (bytes + kWorkspaceAlignment - 1) / kWorkspaceAlignment * kWorkspaceAlignment;
}

// Sizes: the counts come from shapes that passed ir::InferShapes' byte-size
// checks (or a bounded product), so the sum of a few of them cannot wrap.
class WorkspaceLayout {
 public:
  void AddBytes(uint64_t bytes) { bytes_ = AlignWorkspace(bytes_) + bytes; }
  template <typename T>
  void Add(int64_t count) {
    AddBytes(static_cast<uint64_t>(count) * sizeof(T));
  }
  uint64_t bytes() const { return bytes_; }

 private:
  uint64_t bytes_ = 0;
};

class WorkspaceCursor {
 public:
  explicit WorkspaceCursor(void* base) : base_(static_cast<uint8_t*>(base)) {}
  template <typename T>
  T* Take(int64_t count) {
    offset_ = AlignWorkspace(offset_);
    T* p = reinterpret_cast<T*>(base_ + offset_);
    offset_ += static_cast<uint64_t>(count) * sizeof(T);
    return p;
  }

 private:
  uint8_t* base_;
  uint64_t offset_ = 0;
};

}  // namespace grove::cpu

#endif  // GROVE_LIB_BACKENDS_CPU_WORKSPACE_LAYOUT_H_
