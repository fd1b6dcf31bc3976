// Opening an untrusted path for reading. Every file grove reads (a model, an
// .npy input, an ONNX file or its external data) goes through here, so a
// FIFO, a device, a socket or a directory is refused by name before any call
// that could block on it:
//
//   absl::StatusOr<format::RegularFile> f = format::RegularFile::Open(path, "model");
//   if (!f.ok()) return f.status();   // "model 'x' is not a regular file (a FIFO)"
//   if (absl::Status s = f->ReadAt(0, buf, n); !s.ok()) return s;
#ifndef GROVE_LIB_FORMAT_REGULAR_FILE_H_
#define GROVE_LIB_FORMAT_REGULAR_FILE_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace grove::format {

// A regular file open read-only; closed when destroyed. Move-only.
class RegularFile {
 public:
  // Opens `path` with O_NONBLOCK (opening a FIFO or a tty must not wait),
  // refuses anything fstat does not call a regular file, then clears
  // O_NONBLOCK. `what` ("model", ".npy file", "external data") starts the
  // error messages; empty, they start with the quoted path. NotFound when the
  // path does not exist, PermissionDenied when it cannot be read,
  // InvalidArgument when it is not a regular file.
  static absl::StatusOr<RegularFile> Open(const std::string& path, absl::string_view what = "");

  RegularFile(RegularFile&& other) noexcept;
  RegularFile& operator=(RegularFile&& other) noexcept;
  RegularFile(const RegularFile&) = delete;
  RegularFile& operator=(const RegularFile&) = delete;
  ~RegularFile();

  int fd() const { return fd_; }
  // The size fstat reported when the file was opened.
  uint64_t size() const { return size_; }
  const std::string& path() const { return path_; }

  // Reads exactly `n` bytes at `offset` into `out`; a short read (the file
  // shrank) is DataLoss naming the path.
  absl::Status ReadAt(uint64_t offset, void* out, size_t n) const;

 private:
  RegularFile(int fd, uint64_t size, std::string path) : fd_(fd), size_(size), path_(std::move(path)) {}
  int fd_ = -1;
  uint64_t size_ = 0;
  std::string path_;
};

// "a FIFO", "a directory", "a character device", ... for a stat st_mode.
absl::string_view FileKindName(unsigned int st_mode);

}  // namespace grove::format

#endif  // GROVE_LIB_FORMAT_REGULAR_FILE_H_
