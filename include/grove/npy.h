// Reading and writing NumPy .npy files, the tensor exchange format of the
// `grove` tool and of test fixtures.
//
//   absl::StatusOr<grove::Tensor> x = grove::ReadNpy("x.npy");
//   if (!x.ok()) return x.status();
//   absl::Status s = grove::WriteNpy("y.npy", outputs[0]);
//
// Supported: format versions 1.0, 2.0 and 3.0; C order only; little-endian
// '<f4' '<f8' '<f2' '<i8' '<i4' '<i2' '|i1' '<u8' '<u4' '<u2' '|u1' '|b1';
// any rank up to 64, including 0-d arrays (shape `()`) and arrays with zero
// elements. Files are treated as untrusted: the header length is bounded,
// every size is checked, and a truncated or malformed file is an
// InvalidArgument error. Only regular files are read: a FIFO, a device or a
// directory is refused (InvalidArgument) before anything could block on it.
//
// A caller that knows what it wants (a model input's dtype and shape) checks
// the header before any data is read or allocated:
//
//   absl::StatusOr<grove::Tensor> x = grove::ReadNpy("x.npy", [](const grove::NpyHeader& h) {
//     return h.dtype == grove::DType::kF32 ? absl::OkStatus() : absl::InvalidArgumentError("want f32");
//   });
//
// Text: NumPy's unicode arrays '<U{n}' (n UCS-4 code points per element) and
// byte strings '|S{n}' (n bytes, which must be UTF-8) read as kString tensors
// of UTF-8; trailing NULs are padding, as NumPy reads them, so an element's
// own trailing U+0000 characters do not survive a round trip. A code point
// that is a surrogate or above U+10FFFF is an InvalidArgument error. Object
// arrays ('|O') are Python pickles and are refused: save text with dtype=str.
// WriteNpy writes kString as '<U{n}', n the most code points of any element
// (at least 1); an element that is not valid UTF-8 is an InvalidArgument
// error naming it.
//
// bf16 has no NumPy dtype, so WriteNpy refuses it (InvalidArgument) rather
// than write bytes that NumPy would read as a different type; convert to f32
// first. WriteNpy writes version 1.0 with the data 64-byte aligned, as
// numpy.save does.
#ifndef GROVE_NPY_H_
#define GROVE_NPY_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "grove/grove.h"

namespace grove {

// What a .npy file's header declares, checked as ReadNpy checks it: the
// dtype is supported, the shape's bytes are within the 256 TiB limit, and the
// file holds exactly the data the header promises.
struct NpyHeader {
  DType dtype = DType::kUnknown;
  std::vector<int64_t> shape;
  // The data's place in the file: for text, the fixed-width elements as
  // stored, not the UTF-8 the tensor will hold.
  uint64_t data_offset = 0;
  uint64_t data_bytes = 0;
};

// Reads the .npy file at `path` into a new tensor.
absl::StatusOr<Tensor> ReadNpy(const std::string& path);

// As above, but calls `check` with the header before any data is read or
// allocated; its error is returned (prefixed with the path) and nothing more
// is read.
absl::StatusOr<Tensor> ReadNpy(const std::string& path, absl::FunctionRef<absl::Status(const NpyHeader&)> check);

// Reads and checks only the header (never more than its 64 KiB limit).
absl::StatusOr<NpyHeader> ReadNpyHeader(const std::string& path);

// Parses a whole .npy file held in memory.
absl::StatusOr<Tensor> ReadNpyFromBuffer(absl::Span<const uint8_t> bytes);

// Writes `tensor` to `path`, replacing any file there.
absl::Status WriteNpy(const std::string& path, const TensorView& tensor);

// Serialises `tensor` as the bytes of a .npy file.
absl::StatusOr<std::string> EncodeNpy(const TensorView& tensor);

}  // namespace grove

#endif  // GROVE_NPY_H_
