// Memory that grows only: a backend's (device memory on CUDA) or, without
// one, host memory (64-byte aligned). Contents are not kept across a growth.
#ifndef GROVE_LIB_RUNTIME_BUFFER_H_
#define GROVE_LIB_RUNTIME_BUFFER_H_

#include <algorithm>
#include <cstdint>
#include <cstdlib>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "lib/runtime/backend.h"

namespace grove::runtime {

class Buffer {
 public:
  explicit Buffer(Backend* backend = nullptr) : backend_(backend) {}
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer() { Release(); }

  absl::Status Reserve(uint64_t bytes) {
    if (bytes <= capacity_ && data_ != nullptr) return absl::OkStatus();
    const uint64_t cap = (std::max<uint64_t>(bytes, 64) + 63) / 64 * 64;
    Release();
    if (backend_ != nullptr) {
      absl::StatusOr<void*> p = backend_->Allocate(cap);
      if (!p.ok()) return p.status();
      data_ = *p;
    } else {
      data_ = std::aligned_alloc(64, cap);
      if (data_ == nullptr) {
        return absl::ResourceExhaustedError(absl::StrCat("cannot allocate ", bytes, " bytes of activations"));
      }
    }
    capacity_ = cap;
    return absl::OkStatus();
  }
  uint8_t* data() const { return static_cast<uint8_t*>(data_); }

 private:
  void Release() {
    if (data_ == nullptr) return;
    if (backend_ != nullptr) {
      backend_->Free(data_);
    } else {
      std::free(data_);
    }
    data_ = nullptr;
    capacity_ = 0;
  }
  Backend* backend_;
  void* data_ = nullptr;
  uint64_t capacity_ = 0;
};

}  // namespace grove::runtime

#endif  // GROVE_LIB_RUNTIME_BUFFER_H_
