// RegularFile (see regular_file.h): the one place that opens an untrusted
// path for reading.
#include "lib/format/regular_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace grove::format {
namespace {

std::string Quoted(absl::string_view what, const std::string& path) {
  return what.empty() ? absl::StrCat("'", path, "'") : absl::StrCat(what, " '", path, "'");
}

absl::Status NotRegular(absl::string_view what, const std::string& path, unsigned int mode) {
  return absl::InvalidArgumentError(
      absl::StrCat(Quoted(what, path), " is not a regular file (", FileKindName(mode), ")"));
}

absl::Status OpenError(absl::string_view what, const std::string& path, int err) {
  const std::string message = absl::StrCat("cannot open ", Quoted(what, path), ": ", std::strerror(err));
  if (err == ENOENT || err == ENOTDIR) return absl::NotFoundError(message);
  if (err == EACCES || err == EPERM) return absl::PermissionDeniedError(message);
  return absl::InvalidArgumentError(message);
}

}  // namespace

absl::string_view FileKindName(unsigned int st_mode) {
  if (S_ISREG(st_mode)) return "a regular file";
  if (S_ISFIFO(st_mode)) return "a FIFO";
  if (S_ISDIR(st_mode)) return "a directory";
  if (S_ISCHR(st_mode)) return "a character device";
  if (S_ISBLK(st_mode)) return "a block device";
  if (S_ISSOCK(st_mode)) return "a socket";
  return "not a file";
}

absl::StatusOr<RegularFile> RegularFile::Open(const std::string& path, absl::string_view what) {
  // stat first, so that a device or FIFO is not even opened (opening some
  // devices has effects); the fstat below closes the race with a swap.
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return OpenError(what, path, errno);
  if (!S_ISREG(st.st_mode)) return NotRegular(what, path, st.st_mode);
  int fd;
  do {
    fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) return OpenError(what, path, errno);
  RegularFile file(fd, 0, path);
  if (::fstat(fd, &st) != 0) return OpenError(what, path, errno);
  if (!S_ISREG(st.st_mode)) return NotRegular(what, path, st.st_mode);
  if (st.st_size < 0) return NotRegular(what, path, st.st_mode);
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0) return OpenError(what, path, errno);
  file.size_ = static_cast<uint64_t>(st.st_size);
  return file;
}

RegularFile::RegularFile(RegularFile&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)), size_(other.size_), path_(std::move(other.path_)) {}

RegularFile& RegularFile::operator=(RegularFile&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
    size_ = other.size_;
    path_ = std::move(other.path_);
  }
  return *this;
}

RegularFile::~RegularFile() {
  if (fd_ >= 0) ::close(fd_);
}

absl::Status RegularFile::ReadAt(uint64_t offset, void* out, size_t n) const {
  char* dst = static_cast<char*>(out);
  size_t done = 0;
  while (done < n) {
    const ssize_t got = ::pread(fd_, dst + done, n - done, static_cast<off_t>(offset + done));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) {
      return absl::DataLossError(absl::StrCat("cannot read '", path_, "': ", std::strerror(errno)));
    }
    if (got == 0) {
      return absl::DataLossError(absl::StrCat("cannot read '", path_, "': it ended at byte ", offset + done,
                                              ", before the ", offset + n, " expected (did it shrink?)"));
    }
    done += static_cast<size_t>(got);
  }
  return absl::OkStatus();
}

}  // namespace grove::format
