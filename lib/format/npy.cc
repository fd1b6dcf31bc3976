// NumPy .npy reading and writing (see include/grove/npy.h). The header is a
// Python dict literal; it is parsed by a small strict parser rather than
// evaluated, and every length in it is checked against the bytes present.
#include "grove/npy.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "lib/ir/graph.h"

namespace grove {
namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicSize = 6;
// numpy writes headers of a few hundred bytes; anything near this is hostile.
constexpr size_t kMaxHeaderBytes = 64 * 1024;
// NPY_MAXDIMS in NumPy 2.
constexpr size_t kMaxRank = 64;
constexpr size_t kWriteAlignment = 64;

struct NpyDType {
  const char* descr;
  DType dtype;
};
// The descr written for each dtype; 1-byte types take any byte-order mark.
constexpr NpyDType kNpyDTypes[] = {
    {"<f4", DType::kF32}, {"<f8", DType::kF64}, {"<f2", DType::kF16}, {"<i8", DType::kI64},
    {"<i4", DType::kI32}, {"|i1", DType::kI8},  {"|u1", DType::kU8},  {"|b1", DType::kBool},
    {"<i2", DType::kI16}, {"<u2", DType::kU16}, {"<u4", DType::kU32}, {"<u8", DType::kU64},
};

absl::Status Malformed(absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("malformed .npy file: ", what));
}

absl::StatusOr<DType> DTypeFromDescr(const std::string& descr) {
  if (descr.size() == 3) {
    const char order = descr[0];
    const std::string kind = descr.substr(1);
    for (const NpyDType& d : kNpyDTypes) {
      if (kind != d.descr + 1) continue;
      if (DTypeSize(d.dtype) == 1 && (order == '|' || order == '<' || order == '>')) return d.dtype;
      if (order == '<') return d.dtype;
      if (order == '>') {
        return absl::InvalidArgumentError(
            absl::StrCat(".npy dtype '", descr, "' is big-endian; only little-endian data is supported"));
      }
    }
  }
  std::vector<std::string> supported;
  for (const NpyDType& d : kNpyDTypes) supported.push_back(d.descr);
  return absl::InvalidArgumentError(absl::StrCat("unsupported .npy dtype '", descr, "' (supported: ",
                                                 absl::StrJoin(supported, " "), ")"));
}

absl::StatusOr<const char*> DescrFromDType(DType dtype) {
  for (const NpyDType& d : kNpyDTypes) {
    if (d.dtype == dtype) return d.descr;
  }
  if (dtype == DType::kBF16) {
    return absl::InvalidArgumentError("bf16 has no NumPy dtype; convert the tensor to f32 to write it as .npy");
  }
  return absl::InvalidArgumentError(absl::StrCat("cannot write dtype ", DTypeName(dtype), " as .npy"));
}

// A strict parser for the header dict, e.g.
//   {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }
class HeaderParser {
 public:
  explicit HeaderParser(absl::string_view text) : text_(text) {}

  struct Header {
    std::string descr;
    bool fortran_order = false;
    std::vector<int64_t> shape;
  };

  absl::StatusOr<Header> Parse() {
    Header h;
    bool seen_descr = false, seen_order = false, seen_shape = false;
    SkipSpace();
    if (!Consume('{')) return Malformed("header does not start with '{'");
    while (true) {
      SkipSpace();
      if (Consume('}')) break;
      absl::StatusOr<std::string> key = ParseString();
      if (!key.ok()) return key.status();
      SkipSpace();
      if (!Consume(':')) return Malformed(absl::StrCat("expected ':' after key '", *key, "'"));
      SkipSpace();
      if (*key == "descr") {
        if (seen_descr) return Malformed("duplicate key 'descr'");
        seen_descr = true;
        if (Peek() == '[') return absl::InvalidArgumentError("structured .npy dtypes are not supported");
        absl::StatusOr<std::string> descr = ParseString();
        if (!descr.ok()) return descr.status();
        h.descr = *std::move(descr);
      } else if (*key == "fortran_order") {
        if (seen_order) return Malformed("duplicate key 'fortran_order'");
        seen_order = true;
        if (ConsumeWord("True")) {
          h.fortran_order = true;
        } else if (ConsumeWord("False")) {
          h.fortran_order = false;
        } else {
          return Malformed("'fortran_order' is not True or False");
        }
      } else if (*key == "shape") {
        if (seen_shape) return Malformed("duplicate key 'shape'");
        seen_shape = true;
        absl::StatusOr<std::vector<int64_t>> shape = ParseShape();
        if (!shape.ok()) return shape.status();
        h.shape = *std::move(shape);
      } else {
        return Malformed(absl::StrCat("unexpected header key '", *key, "'"));
      }
      SkipSpace();
      if (Consume(',')) continue;
      SkipSpace();
      if (Consume('}')) break;
      return Malformed("expected ',' or '}' in header");
    }
    SkipSpace();
    if (pos_ != text_.size()) return Malformed("unexpected bytes after the header dict");
    if (!seen_descr || !seen_order || !seen_shape) {
      return Malformed("header lacks one of 'descr', 'fortran_order', 'shape'");
    }
    return h;
  }

 private:
  char Peek() const { return pos_ < text_.size() ? text_[pos_] : '\0'; }
  bool Consume(char c) {
    if (Peek() != c) return false;
    ++pos_;
    return true;
  }
  bool ConsumeWord(absl::string_view word) {
    if (text_.substr(pos_, word.size()) != word) return false;
    pos_ += word.size();
    return true;
  }
  void SkipSpace() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\n' || text_[pos_] == '\t' ||
                                   text_[pos_] == '\r')) {
      ++pos_;
    }
  }

  // A quoted string without escapes: numpy never writes any in these fields.
  absl::StatusOr<std::string> ParseString() {
    const char quote = Peek();
    if (quote != '\'' && quote != '"') return Malformed("expected a quoted string in header");
    ++pos_;
    const size_t end = text_.find(quote, pos_);
    if (end == absl::string_view::npos) return Malformed("unterminated string in header");
    std::string s(text_.substr(pos_, end - pos_));
    if (s.find('\\') != std::string::npos) return Malformed("escapes in header strings are not supported");
    pos_ = end + 1;
    return s;
  }

  absl::StatusOr<std::vector<int64_t>> ParseShape() {
    if (!Consume('(')) return Malformed("'shape' is not a tuple");
    std::vector<int64_t> shape;
    while (true) {
      SkipSpace();
      if (Consume(')')) break;
      if (Peek() < '0' || Peek() > '9') return Malformed("'shape' holds something other than non-negative integers");
      int64_t v = 0;
      while (Peek() >= '0' && Peek() <= '9') {
        const int digit = Peek() - '0';
        if (v > (std::numeric_limits<int64_t>::max() - digit) / 10) return Malformed("a dim in 'shape' overflows int64");
        v = v * 10 + digit;
        ++pos_;
      }
      Consume('L');  // Python 2 long literals, as old numpy wrote them.
      if (shape.size() == kMaxRank) return Malformed(absl::StrCat("'shape' has more than ", kMaxRank, " dims"));
      shape.push_back(v);
      SkipSpace();
      if (Consume(',')) continue;
      SkipSpace();
      if (Consume(')')) break;
      return Malformed("expected ',' or ')' in 'shape'");
    }
    return shape;
  }

  absl::string_view text_;
  size_t pos_ = 0;
};

// What the fixed-size preamble says: where the header is and how to read it.
struct Preamble {
  size_t header_offset = 0;
  size_t header_size = 0;
};

uint32_t LoadLittleEndian(const uint8_t* p, int n) {
  uint32_t v = 0;
  for (int i = n - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

// Needs the first 12 bytes (or fewer when the file is shorter).
absl::StatusOr<Preamble> ParsePreamble(absl::Span<const uint8_t> bytes) {
  if (bytes.size() < kMagicSize || std::memcmp(bytes.data(), kMagic, kMagicSize) != 0) {
    return absl::InvalidArgumentError("not a .npy file (missing the \\x93NUMPY magic)");
  }
  if (bytes.size() < 8) return Malformed("truncated before the version");
  const uint8_t major = bytes[6], minor = bytes[7];
  if (major < 1 || major > 3 || minor != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("unsupported .npy format version ", major, ".", minor, " (1.0, 2.0 and 3.0 are)"));
  }
  const int len_bytes = major == 1 ? 2 : 4;
  if (bytes.size() < static_cast<size_t>(8 + len_bytes)) return Malformed("truncated before the header length");
  Preamble p;
  p.header_offset = 8 + len_bytes;
  p.header_size = LoadLittleEndian(bytes.data() + 8, len_bytes);
  if (p.header_size > kMaxHeaderBytes) {
    return Malformed(absl::StrCat("header length ", p.header_size, " exceeds the ", kMaxHeaderBytes, " byte limit"));
  }
  return p;
}

struct ParsedHeader {
  DType dtype = DType::kUnknown;
  std::vector<int64_t> shape;
  uint64_t data_bytes = 0;
};

absl::StatusOr<ParsedHeader> ParseHeader(absl::string_view text) {
  absl::StatusOr<HeaderParser::Header> h = HeaderParser(text).Parse();
  if (!h.ok()) return h.status();
  absl::StatusOr<DType> dtype = DTypeFromDescr(h->descr);
  if (!dtype.ok()) return dtype.status();
  if (h->fortran_order) {
    return absl::InvalidArgumentError(
        "Fortran-order .npy arrays are not supported; save a C-order array (numpy.ascontiguousarray)");
  }
  absl::StatusOr<uint64_t> bytes = ir::CheckedByteSize(*dtype, h->shape, ".npy shape");
  if (!bytes.ok()) return bytes.status();
  return ParsedHeader{*dtype, std::move(h->shape), *bytes};
}

absl::Status CheckDataSize(const ParsedHeader& h, uint64_t available) {
  if (available < h.data_bytes) {
    return Malformed(absl::StrCat("truncated data: the header promises ", h.data_bytes, " bytes of ",
                                  DTypeName(h.dtype), " but the file holds ", available));
  }
  if (available > h.data_bytes) {
    return Malformed(absl::StrCat(available - h.data_bytes, " unexpected bytes after the data"));
  }
  return absl::OkStatus();
}

// Bool kernels assume 0/1 bytes; anything else came from a broken writer.
absl::Status CheckBools(const Tensor& t) {
  if (t.dtype() != DType::kBool) return absl::OkStatus();
  const uint8_t* p = t.as<uint8_t>();
  const int64_t n = t.view().num_elements();
  for (int64_t i = 0; i < n; ++i) {
    if (p[i] > 1) {
      return Malformed(absl::StrCat("bool element ", i, " has byte value ", p[i], " (expected 0 or 1)"));
    }
  }
  return absl::OkStatus();
}

struct FileCloser {
  void operator()(FILE* f) const { std::fclose(f); }
};

}  // namespace

absl::StatusOr<Tensor> ReadNpyFromBuffer(absl::Span<const uint8_t> bytes) {
  absl::StatusOr<Preamble> pre = ParsePreamble(bytes);
  if (!pre.ok()) return pre.status();
  if (bytes.size() - pre->header_offset < pre->header_size) return Malformed("truncated header");
  absl::StatusOr<ParsedHeader> h = ParseHeader(absl::string_view(
      reinterpret_cast<const char*>(bytes.data()) + pre->header_offset, pre->header_size));
  if (!h.ok()) return h.status();
  const size_t data_offset = pre->header_offset + pre->header_size;
  if (absl::Status s = CheckDataSize(*h, bytes.size() - data_offset); !s.ok()) return s;
  absl::StatusOr<Tensor> t = Tensor::Create(h->dtype, h->shape);
  if (!t.ok()) return t.status();
  if (h->data_bytes > 0) std::memcpy(t->data(), bytes.data() + data_offset, h->data_bytes);
  if (absl::Status s = CheckBools(*t); !s.ok()) return s;
  return t;
}

absl::StatusOr<Tensor> ReadNpy(const std::string& path) {
  auto with_path = [&](const absl::Status& s) {
    return absl::Status(s.code(), absl::StrCat(path, ": ", s.message()));
  };
  std::unique_ptr<FILE, FileCloser> f(std::fopen(path.c_str(), "rb"));
  if (f == nullptr) {
    return absl::NotFoundError(absl::StrCat("cannot open ", path, ": ", std::strerror(errno)));
  }
  // The size first, so a lying header is caught before anything is allocated.
  struct stat st;
  if (fstat(fileno(f.get()), &st) != 0 || !S_ISREG(st.st_mode)) {
    return with_path(absl::InvalidArgumentError("not a regular file"));
  }
  const uint64_t file_size = static_cast<uint64_t>(st.st_size);
  uint8_t preamble[12];
  const size_t got = std::fread(preamble, 1, sizeof(preamble), f.get());
  absl::StatusOr<Preamble> pre = ParsePreamble(absl::MakeConstSpan(preamble, got));
  if (!pre.ok()) return with_path(pre.status());
  if (file_size - pre->header_offset < pre->header_size) {
    return with_path(Malformed("truncated header"));
  }
  std::string header(pre->header_size, '\0');
  if (std::fseek(f.get(), static_cast<long>(pre->header_offset), SEEK_SET) != 0 ||
      std::fread(header.data(), 1, header.size(), f.get()) != header.size()) {
    return with_path(Malformed("cannot read the header"));
  }
  absl::StatusOr<ParsedHeader> h = ParseHeader(header);
  if (!h.ok()) return with_path(h.status());
  const uint64_t data_offset = pre->header_offset + pre->header_size;
  if (absl::Status s = CheckDataSize(*h, file_size - data_offset); !s.ok()) {
    return with_path(s);
  }
  absl::StatusOr<Tensor> t = Tensor::Create(h->dtype, h->shape);
  if (!t.ok()) return with_path(t.status());
  if (h->data_bytes > 0 && std::fread(t->data(), 1, h->data_bytes, f.get()) != h->data_bytes) {
    return with_path(Malformed("cannot read the data"));
  }
  if (absl::Status s = CheckBools(*t); !s.ok()) return with_path(s);
  return t;
}

namespace {

// The preamble and padded header dict: everything before the data.
absl::StatusOr<std::string> EncodeHeader(const TensorView& tensor, uint64_t* out_data_bytes) {
  absl::StatusOr<const char*> descr = DescrFromDType(tensor.dtype);
  if (!descr.ok()) return descr.status();
  absl::StatusOr<uint64_t> bytes = ir::CheckedByteSize(tensor.dtype, tensor.shape, "WriteNpy");
  if (!bytes.ok()) return bytes.status();
  if (*bytes > 0 && tensor.data == nullptr) return absl::InvalidArgumentError("WriteNpy: tensor data is null");
  *out_data_bytes = *bytes;

  const std::string shape = tensor.shape.size() == 1
                                ? absl::StrCat("(", tensor.shape[0], ",)")
                                : absl::StrCat("(", absl::StrJoin(tensor.shape, ", "), ")");
  std::string dict =
      absl::StrCat("{'descr': '", *descr, "', 'fortran_order': False, 'shape': ", shape, ", }");
  // Pad with spaces and end with '\n' so the data starts aligned, as numpy does.
  const size_t preamble = kMagicSize + 2 + 2;
  const size_t unpadded = preamble + dict.size() + 1;
  dict.append((kWriteAlignment - unpadded % kWriteAlignment) % kWriteAlignment, ' ');
  dict.push_back('\n');
  if (dict.size() > 0xffff) return absl::InvalidArgumentError("WriteNpy: header too long for format 1.0");

  std::string out(kMagic, kMagicSize);
  out.push_back('\x01');
  out.push_back('\x00');
  out.push_back(static_cast<char>(dict.size() & 0xff));
  out.push_back(static_cast<char>(dict.size() >> 8));
  out += dict;
  return out;
}

}  // namespace

absl::StatusOr<std::string> EncodeNpy(const TensorView& tensor) {
  uint64_t data_bytes = 0;
  absl::StatusOr<std::string> out = EncodeHeader(tensor, &data_bytes);
  if (!out.ok()) return out.status();
  out->append(static_cast<const char*>(tensor.data), data_bytes);
  return out;
}

absl::Status WriteNpy(const std::string& path, const TensorView& tensor) {
  uint64_t data_bytes = 0;
  absl::StatusOr<std::string> header = EncodeHeader(tensor, &data_bytes);
  if (!header.ok()) {
    return absl::Status(header.status().code(), absl::StrCat(path, ": ", header.status().message()));
  }
  std::unique_ptr<FILE, FileCloser> f(std::fopen(path.c_str(), "wb"));
  if (f == nullptr) {
    return absl::PermissionDeniedError(absl::StrCat("cannot create ", path, ": ", std::strerror(errno)));
  }
  const bool written =
      std::fwrite(header->data(), 1, header->size(), f.get()) == header->size() &&
      (data_bytes == 0 || std::fwrite(tensor.data, 1, data_bytes, f.get()) == data_bytes);
  if (!written || std::fclose(f.release()) != 0) {
    return absl::DataLossError(absl::StrCat("cannot write ", path, ": ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

}  // namespace grove
