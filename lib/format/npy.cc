// NumPy .npy reading and writing (see include/grove/npy.h). The header is a
// Python dict literal; it is parsed by a small strict parser rather than
// evaluated, and every length in it is checked against the bytes present.
#include "grove/npy.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "lib/format/regular_file.h"
#include "lib/ir/graph.h"
#include "lib/ir/utf8.h"

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

// NumPy's fixed-width text: '<U{n}' holds n UCS-4 code points per element,
// '|S{n}' n bytes; trailing NULs pad shorter elements. A width above this is
// refused before any size is computed from it.
constexpr uint64_t kMaxTextItemChars = uint64_t{1} << 30;

absl::Status Malformed(absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("malformed .npy file: ", what));
}

// What a descr says: the dtype, and for text its kind ('U' or 'S') and width.
struct NpyType {
  DType dtype = DType::kUnknown;
  char text = 0;
  uint64_t chars = 0;
  // Bytes of one element in the file.
  uint64_t item_bytes() const { return text == 'U' ? 4 * chars : text == 'S' ? chars : DTypeSize(dtype); }
};

// '<U7' or '|S3' ('S' takes any byte-order mark: bytes have no order);
// nullopt when `descr` is not a text dtype at all.
std::optional<absl::StatusOr<NpyType>> TextTypeFromDescr(const std::string& descr) {
  if (descr.size() < 2 || (descr[1] != 'U' && descr[1] != 'S')) return std::nullopt;
  const char order = descr[0], kind = descr[1];
  if (order != '<' && order != '>' && order != '|' && order != '=') return std::nullopt;
  const std::string digits = descr.substr(2);
  uint64_t chars = 0;
  if (digits.empty() || digits.size() > 12 || digits.find_first_not_of("0123456789") != std::string::npos ||
      !absl::SimpleAtoi(digits, &chars)) {
    return absl::InvalidArgumentError(
        absl::StrCat(".npy dtype '", descr, "' has no readable element width (numpy writes e.g. '<U5' or '|S5')"));
  }
  if (chars == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(".npy dtype '", descr, "' has zero-width elements (numpy writes a width of at least 1)"));
  }
  if (chars > kMaxTextItemChars) {
    return absl::InvalidArgumentError(absl::StrCat(".npy dtype '", descr, "': an element width of ", chars,
                                                   " is above the limit of ", kMaxTextItemChars));
  }
  if (kind == 'U' && order == '>') {
    return absl::InvalidArgumentError(
        absl::StrCat(".npy dtype '", descr, "' is big-endian; only little-endian data is supported"));
  }
  if (kind == 'U' && order != '<') {
    return absl::InvalidArgumentError(
        absl::StrCat("unsupported .npy dtype '", descr, "' (unicode arrays are '<U{n}', as numpy writes them)"));
  }
  NpyType t;
  t.dtype = DType::kString;
  t.text = kind;
  t.chars = chars;
  return t;
}

absl::StatusOr<NpyType> TypeFromDescr(const std::string& descr) {
  if (std::optional<absl::StatusOr<NpyType>> text = TextTypeFromDescr(descr); text.has_value()) return *text;
  if (descr.size() >= 2 && descr[1] == 'O') {
    return absl::InvalidArgumentError(absl::StrCat(
        ".npy dtype '", descr, "' is an object array, stored as a Python pickle, which grove does not read; save "
        "text with dtype=str (numpy.save(path, numpy.asarray(values, dtype=str)))"));
  }
  NpyType t;
  if (descr.size() == 3) {
    const char order = descr[0];
    const std::string kind = descr.substr(1);
    for (const NpyDType& d : kNpyDTypes) {
      if (kind != d.descr + 1) continue;
      t.dtype = d.dtype;
      if (DTypeSize(d.dtype) == 1 && (order == '|' || order == '<' || order == '>')) return t;
      if (order == '<') return t;
      if (order == '>') {
        return absl::InvalidArgumentError(
            absl::StrCat(".npy dtype '", descr, "' is big-endian; only little-endian data is supported"));
      }
    }
  }
  std::vector<std::string> supported;
  for (const NpyDType& d : kNpyDTypes) supported.push_back(d.descr);
  supported.push_back("<U{n}");
  supported.push_back("|S{n}");
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
  NpyType type;
  std::string descr;
  std::vector<int64_t> shape;
  uint64_t data_bytes = 0;  // in the file
  DType dtype() const { return type.dtype; }
};

absl::StatusOr<ParsedHeader> ParseHeader(absl::string_view text) {
  absl::StatusOr<HeaderParser::Header> h = HeaderParser(text).Parse();
  if (!h.ok()) return h.status();
  absl::StatusOr<NpyType> type = TypeFromDescr(h->descr);
  if (!type.ok()) return type.status();
  if (h->fortran_order) {
    return absl::InvalidArgumentError(
        "Fortran-order .npy arrays are not supported; save a C-order array (numpy.ascontiguousarray)");
  }
  // The tensor's own size (for text, its references) must be in bounds too.
  absl::StatusOr<uint64_t> bytes = ir::CheckedByteSize(type->dtype, h->shape, ".npy shape");
  if (!bytes.ok()) return bytes.status();
  uint64_t data_bytes = *bytes;
  if (type->text != 0) {
    const uint64_t count = *bytes / DTypeSize(DType::kString);
    if (__builtin_mul_overflow(count, type->item_bytes(), &data_bytes) || data_bytes > (uint64_t{1} << 48)) {
      return absl::InvalidArgumentError(absl::StrCat(".npy shape: ", count, " elements of '", h->descr,
                                                     "' overflow the 256 TiB limit"));
    }
  }
  return ParsedHeader{*type, std::move(h->descr), std::move(h->shape), data_bytes};
}

absl::Status CheckDataSize(const ParsedHeader& h, uint64_t available) {
  if (available < h.data_bytes) {
    const std::string what = h.type.text != 0 ? absl::StrCat("'", h.descr, "'") : std::string(DTypeName(h.dtype()));
    return Malformed(absl::StrCat("truncated data: the header promises ", h.data_bytes, " bytes of ", what,
                                  " but the file holds ", available));
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

uint32_t LoadU32(const uint8_t* p) { return LoadLittleEndian(p, 4); }

// The text elements of `h` from its `data` (h.data_bytes bytes) as a kString
// tensor of UTF-8: '<U' code points are encoded, '|S' bytes must already be
// UTF-8. Trailing NULs are padding, as numpy reads them.
absl::StatusOr<Tensor> DecodeText(const ParsedHeader& h, const uint8_t* data) {
  const uint64_t item = h.type.item_bytes();
  const uint64_t count = item == 0 ? 0 : h.data_bytes / item;
  if (count == 0) return Tensor::Create(DType::kString, h.shape);
  // UTF-8 takes at most 4 bytes per code point: never more than the file.
  std::string text;
  text.reserve(h.data_bytes);
  std::vector<uint64_t> ends(count);
  std::vector<char32_t> scratch;
  for (uint64_t i = 0; i < count; ++i) {
    const uint8_t* e = data + i * item;
    if (h.type.text == 'S') {
      uint64_t len = item;
      while (len > 0 && e[len - 1] == 0) --len;
      const absl::string_view bytes(reinterpret_cast<const char*>(e), len);
      scratch.clear();
      size_t bad = 0;
      if (!ir::DecodeUtf8(bytes, &scratch, &bad)) {
        return absl::InvalidArgumentError(absl::StrCat("element ", i, " of the '", h.descr,
                                                       "' array is not valid UTF-8 (at byte ", bad,
                                                       "); grove's strings are UTF-8"));
      }
      text.append(bytes.data(), bytes.size());
    } else {
      uint64_t chars = h.type.chars;
      while (chars > 0 && LoadU32(e + 4 * (chars - 1)) == 0) --chars;
      for (uint64_t k = 0; k < chars; ++k) {
        const uint32_t c = LoadU32(e + 4 * k);
        if (!ir::IsScalarValue(c)) {
          return absl::InvalidArgumentError(absl::StrFormat(
              "element %d of the '%s' array holds 0x%X at code point %d, which is not a Unicode character (%s)", i,
              h.descr, c, k, c > 0x10FFFF ? "above U+10FFFF" : "a UTF-16 surrogate"));
        }
        ir::AppendUtf8(static_cast<char32_t>(c), &text);
      }
    }
    ends[i] = text.size();
  }
  std::vector<StringRef> refs(count);
  uint64_t begin = 0;
  for (uint64_t i = 0; i < count; ++i) {
    refs[i] = StringRef(absl::string_view(text.data() + begin, ends[i] - begin));
    begin = ends[i];
  }
  return Tensor::CopyOf(TensorView(DType::kString, h.shape, refs.data()));
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
  if (h->type.text != 0) return DecodeText(*h, bytes.data() + data_offset);
  absl::StatusOr<Tensor> t = Tensor::Create(h->dtype(), h->shape);
  if (!t.ok()) return t.status();
  if (h->data_bytes > 0) std::memcpy(t->data(), bytes.data() + data_offset, h->data_bytes);
  if (absl::Status s = CheckBools(*t); !s.ok()) return s;
  return t;
}

namespace {

// An open .npy file whose header has been read and checked; nothing of its
// data has been read yet.
struct OpenNpy {
  format::RegularFile file;
  ParsedHeader header;
  uint64_t data_offset = 0;

  NpyHeader Public() const { return NpyHeader{header.dtype(), header.shape, data_offset, header.data_bytes}; }
};

absl::Status WithPath(const std::string& path, const absl::Status& s) {
  return absl::Status(s.code(), absl::StrCat(path, ": ", s.message()));
}

// Opens `path` (a regular file only) and reads and checks its header; the
// declared data must be exactly what the file holds, so nothing is allocated
// from a header that lies about the size.
absl::StatusOr<OpenNpy> OpenAndReadHeader(const std::string& path) {
  absl::StatusOr<format::RegularFile> file = format::RegularFile::Open(path);
  if (!file.ok()) return file.status();
  const uint64_t file_size = file->size();
  uint8_t preamble[12];
  const size_t got = static_cast<size_t>(std::min<uint64_t>(file_size, sizeof(preamble)));
  if (absl::Status s = file->ReadAt(0, preamble, got); !s.ok()) return s;
  absl::StatusOr<Preamble> pre = ParsePreamble(absl::MakeConstSpan(preamble, got));
  if (!pre.ok()) return WithPath(path, pre.status());
  if (file_size - pre->header_offset < pre->header_size) return WithPath(path, Malformed("truncated header"));
  std::string text(pre->header_size, '\0');
  if (absl::Status s = file->ReadAt(pre->header_offset, text.data(), text.size()); !s.ok()) return s;
  absl::StatusOr<ParsedHeader> h = ParseHeader(text);
  if (!h.ok()) return WithPath(path, h.status());
  const uint64_t data_offset = pre->header_offset + pre->header_size;
  if (absl::Status s = CheckDataSize(*h, file_size - data_offset); !s.ok()) return WithPath(path, s);
  return OpenNpy{*std::move(file), *std::move(h), data_offset};
}

}  // namespace

absl::StatusOr<NpyHeader> ReadNpyHeader(const std::string& path) {
  absl::StatusOr<OpenNpy> npy = OpenAndReadHeader(path);
  if (!npy.ok()) return npy.status();
  return npy->Public();
}

absl::StatusOr<Tensor> ReadNpy(const std::string& path) {
  return ReadNpy(path, [](const NpyHeader&) { return absl::OkStatus(); });
}

absl::StatusOr<Tensor> ReadNpy(const std::string& path, absl::FunctionRef<absl::Status(const NpyHeader&)> check) {
  absl::StatusOr<OpenNpy> npy = OpenAndReadHeader(path);
  if (!npy.ok()) return npy.status();
  if (absl::Status s = check(npy->Public()); !s.ok()) return WithPath(path, s);
  const ParsedHeader& h = npy->header;
  if (h.type.text != 0) {
    std::vector<uint8_t> data(h.data_bytes);
    if (absl::Status s = npy->file.ReadAt(npy->data_offset, data.data(), data.size()); !s.ok()) return s;
    absl::StatusOr<Tensor> t = DecodeText(h, data.data());
    if (!t.ok()) return WithPath(path, t.status());
    return t;
  }
  absl::StatusOr<Tensor> t = Tensor::Create(h.dtype(), h.shape);
  if (!t.ok()) return WithPath(path, t.status());
  if (absl::Status s = npy->file.ReadAt(npy->data_offset, t->data(), h.data_bytes); !s.ok()) return s;
  if (absl::Status s = CheckBools(*t); !s.ok()) return WithPath(path, s);
  return t;
}

namespace {

// A kString tensor as '<U{n}' data, n the most code points of any element
// (at least 1, as numpy writes).
absl::Status EncodeText(const TensorView& tensor, std::string* out_descr, std::string* out_data) {
  const int64_t count = tensor.num_elements();
  const StringRef* refs = tensor.as<const StringRef>();
  // Every element's code points, decoded once: element i is points[ends[i - 1], ends[i]).
  std::vector<char32_t> points;
  std::vector<size_t> ends(static_cast<size_t>(count));
  uint64_t chars = 1;
  for (int64_t i = 0; i < count; ++i) {
    if (refs[i].size > 0 && refs[i].data == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("WriteNpy: string element ", i, " has ", refs[i].size, " bytes but no data"));
    }
    const size_t begin = points.size();
    size_t bad = 0;
    if (!ir::DecodeUtf8(refs[i].view(), &points, &bad)) {
      return absl::InvalidArgumentError(
          absl::StrCat("WriteNpy: string element ", i, " is not valid UTF-8 (at byte ", bad, ")"));
    }
    ends[i] = points.size();
    chars = std::max<uint64_t>(chars, points.size() - begin);
  }
  uint64_t bytes = 0;
  if (__builtin_mul_overflow(static_cast<uint64_t>(count), 4 * chars, &bytes) || bytes > (uint64_t{1} << 48)) {
    return absl::InvalidArgumentError(absl::StrCat("WriteNpy: ", count, " strings padded to ", chars,
                                                   " code points overflow the 256 TiB limit"));
  }
  *out_descr = absl::StrCat("<U", chars);
  out_data->assign(bytes, '\0');
  size_t begin = 0;
  for (int64_t i = 0; i < count; ++i) {
    char* e = out_data->data() + static_cast<uint64_t>(i) * 4 * chars;
    for (size_t k = 0; begin + k < ends[i]; ++k) {
      const uint32_t c = static_cast<uint32_t>(points[begin + k]);
      for (int b = 0; b < 4; ++b) e[4 * k + b] = static_cast<char>((c >> (8 * b)) & 0xff);
    }
    begin = ends[i];
  }
  return absl::OkStatus();
}

// The preamble and padded header dict: everything before the data. For
// kString, `*out_text` receives the encoded data; other tensors are written
// from their own bytes (`*out_data_bytes` of them).
absl::StatusOr<std::string> EncodeHeader(const TensorView& tensor, uint64_t* out_data_bytes, std::string* out_text) {
  absl::StatusOr<uint64_t> bytes = ir::CheckedByteSize(tensor.dtype, tensor.shape, "WriteNpy");
  if (!bytes.ok()) return bytes.status();
  if (*bytes > 0 && tensor.data == nullptr) return absl::InvalidArgumentError("WriteNpy: tensor data is null");
  std::string descr;
  if (tensor.dtype == DType::kString) {
    if (absl::Status s = EncodeText(tensor, &descr, out_text); !s.ok()) return s;
    *out_data_bytes = out_text->size();
  } else {
    absl::StatusOr<const char*> d = DescrFromDType(tensor.dtype);
    if (!d.ok()) return d.status();
    descr = *d;
    *out_data_bytes = *bytes;
  }

  const std::string shape = tensor.shape.size() == 1
                                ? absl::StrCat("(", tensor.shape[0], ",)")
                                : absl::StrCat("(", absl::StrJoin(tensor.shape, ", "), ")");
  std::string dict =
      absl::StrCat("{'descr': '", descr, "', 'fortran_order': False, 'shape': ", shape, ", }");
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
  std::string text;
  absl::StatusOr<std::string> out = EncodeHeader(tensor, &data_bytes, &text);
  if (!out.ok()) return out.status();
  if (tensor.dtype == DType::kString) {
    out->append(text);
  } else if (data_bytes > 0) {
    out->append(static_cast<const char*>(tensor.data), data_bytes);
  }
  return out;
}

absl::Status WriteNpy(const std::string& path, const TensorView& tensor) {
  uint64_t data_bytes = 0;
  std::string text;
  absl::StatusOr<std::string> header = EncodeHeader(tensor, &data_bytes, &text);
  if (!header.ok()) {
    return absl::Status(header.status().code(), absl::StrCat(path, ": ", header.status().message()));
  }
  // O_NONBLOCK: a FIFO with no reader fails at once instead of blocking the
  // open forever; a device such as /dev/null is still written.
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NONBLOCK | O_CLOEXEC | O_NOCTTY, 0666);
  if (fd < 0) {
    return absl::PermissionDeniedError(absl::StrCat("cannot create ", path, ": ", std::strerror(errno)));
  }
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags >= 0) ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  std::unique_ptr<FILE, FileCloser> f(::fdopen(fd, "wb"));
  if (f == nullptr) {
    const int err = errno;
    ::close(fd);
    return absl::PermissionDeniedError(absl::StrCat("cannot create ", path, ": ", std::strerror(err)));
  }
  const bool written =
      std::fwrite(header->data(), 1, header->size(), f.get()) == header->size() &&
      (data_bytes == 0 ||
       std::fwrite(tensor.dtype == DType::kString ? text.data() : tensor.data, 1, data_bytes, f.get()) == data_bytes);
  if (!written || std::fclose(f.release()) != 0) {
    return absl::DataLossError(absl::StrCat("cannot write ", path, ": ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

}  // namespace grove
