// Tests of grove/npy.h: round trips of every dtype and shape kind, the exact
// bytes numpy expects, and malformed files that must fail cleanly.
#include "grove/npy.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <future>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test/special_file_util.h"

namespace grove {
namespace {

using testing::WithinTenSeconds;

using ::testing::HasSubstr;

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("GROVE_TEST_TMP");
  std::string base = dir != nullptr ? dir : ::testing::TempDir();
  mkdir(base.c_str(), 0755);
  // Per process: ctest runs these tests in parallel processes.
  return absl::StrCat(base, "/npy_test_", getpid(), "_", name);
}

// string_view matchers print char by char; strings read better in failures.
std::string Msg(const absl::Status& s) { return std::string(s.message()); }

absl::Span<const uint8_t> Bytes(const std::string& s) {
  return absl::MakeConstSpan(reinterpret_cast<const uint8_t*>(s.data()), s.size());
}

// A .npy file with the given version and header dict, unpadded.
std::string MakeNpy(int major, const std::string& dict, const std::string& data) {
  std::string out("\x93NUMPY", 6);
  out.push_back(static_cast<char>(major));
  out.push_back('\0');
  const std::string header = dict + "\n";
  const size_t n = header.size();
  out.push_back(static_cast<char>(n & 0xff));
  out.push_back(static_cast<char>((n >> 8) & 0xff));
  if (major >= 2) {
    out.push_back(static_cast<char>((n >> 16) & 0xff));
    out.push_back(static_cast<char>((n >> 24) & 0xff));
  }
  return out + header + data;
}

std::string FloatBytes(std::vector<float> v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
}

// Deterministic, distinct bytes; bools must stay 0/1.
Tensor Filled(DType dtype, std::vector<int64_t> shape) {
  Tensor t = Tensor::Create(dtype, std::move(shape)).value();
  uint8_t* p = t.as<uint8_t>();
  for (size_t i = 0; i < t.view().byte_size(); ++i) {
    p[i] = dtype == DType::kBool ? static_cast<uint8_t>(i % 3 == 0) : static_cast<uint8_t>(i * 37 + 11);
  }
  return t;
}

void ExpectSameTensor(const Tensor& a, const Tensor& b) {
  EXPECT_EQ(a.dtype(), b.dtype());
  EXPECT_EQ(a.shape(), b.shape());
  ASSERT_EQ(a.view().byte_size(), b.view().byte_size());
  if (a.view().byte_size() > 0) {
    EXPECT_EQ(std::memcmp(a.data(), b.data(), a.view().byte_size()), 0);
  }
}

class NpyRoundTrip : public ::testing::TestWithParam<DType> {};

TEST_P(NpyRoundTrip, EveryShapeKindThroughFileAndBuffer) {
  const std::vector<std::vector<int64_t>> shapes = {{}, {1}, {5}, {2, 3}, {0}, {0, 3}, {2, 0, 4}, {2, 1, 3, 2}};
  for (const std::vector<int64_t>& shape : shapes) {
    SCOPED_TRACE(absl::StrCat(DTypeName(GetParam()), " rank ", shape.size()));
    Tensor t = Filled(GetParam(), shape);

    const std::string path = TempPath(absl::StrCat(DTypeName(GetParam()), "_", shape.size(), ".npy"));
    ASSERT_TRUE(WriteNpy(path, t.view()).ok());
    absl::StatusOr<Tensor> from_file = ReadNpy(path);
    ASSERT_TRUE(from_file.ok()) << from_file.status();
    ExpectSameTensor(t, *from_file);

    absl::StatusOr<std::string> encoded = EncodeNpy(t.view());
    ASSERT_TRUE(encoded.ok()) << encoded.status();
    absl::StatusOr<Tensor> from_buffer = ReadNpyFromBuffer(Bytes(*encoded));
    ASSERT_TRUE(from_buffer.ok()) << from_buffer.status();
    ExpectSameTensor(t, *from_buffer);
  }
}

INSTANTIATE_TEST_SUITE_P(AllNumpyDTypes, NpyRoundTrip,
                         ::testing::Values(DType::kF32, DType::kF64, DType::kF16, DType::kI64, DType::kI32,
                                           DType::kI8, DType::kU8, DType::kBool, DType::kI16, DType::kU16,
                                           DType::kU32, DType::kU64),
                         [](const auto& info) { return std::string(DTypeName(info.param)); });

TEST(NpyWrite, HeaderIsWhatNumpyWrites) {
  const float values[] = {1, 2, 3, 4, 5, 6};
  absl::StatusOr<std::string> bytes = EncodeNpy(TensorView(DType::kF32, {2, 3}, values));
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  ASSERT_GE(bytes->size(), 10u);
  EXPECT_EQ(bytes->substr(0, 8), std::string("\x93NUMPY\x01\x00", 8));
  const size_t header_len = static_cast<uint8_t>((*bytes)[8]) | static_cast<uint8_t>((*bytes)[9]) << 8;
  const size_t data_offset = 10 + header_len;
  EXPECT_EQ(data_offset % 64, 0u);
  EXPECT_EQ((*bytes)[data_offset - 1], '\n');
  EXPECT_THAT(bytes->substr(10, header_len), HasSubstr("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }"));
  EXPECT_EQ(bytes->size(), data_offset + sizeof(values));
  EXPECT_EQ(std::memcmp(bytes->data() + data_offset, values, sizeof(values)), 0);
}

TEST(NpyWrite, ShapesUsePythonTupleSyntax) {
  const uint8_t v[4] = {1, 2, 3, 4};
  EXPECT_THAT(EncodeNpy(TensorView(DType::kU8, {4}, v)).value(), HasSubstr("'shape': (4,), }"));
  EXPECT_THAT(EncodeNpy(TensorView(DType::kU8, {}, v)).value(), HasSubstr("'shape': (), }"));
  EXPECT_THAT(EncodeNpy(TensorView(DType::kBool, {1, 4}, v)).value(), HasSubstr("'descr': '|b1'"));
  EXPECT_THAT(EncodeNpy(TensorView(DType::kI8, {1, 4}, v)).value(), HasSubstr("'descr': '|i1'"));
}

TEST(NpyWrite, RefusesBf16WithAHint) {
  const uint16_t v[2] = {0x3f80, 0x4000};
  absl::Status s = WriteNpy(TempPath("bf16.npy"), TensorView(DType::kBF16, {2}, v));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Msg(s), HasSubstr("bf16 has no NumPy dtype"));
  EXPECT_THAT(Msg(s), HasSubstr("f32"));
}

TEST(NpyWrite, RefusesBadViews) {
  EXPECT_FALSE(EncodeNpy(TensorView(DType::kF32, {2}, static_cast<void*>(nullptr))).ok());
  EXPECT_FALSE(EncodeNpy(TensorView(DType::kUnknown, {2}, static_cast<void*>(nullptr))).ok());
  const float v[1] = {0};
  EXPECT_FALSE(EncodeNpy(TensorView(DType::kF32, {-1}, v)).ok());
  // An empty tensor needs no data.
  EXPECT_TRUE(EncodeNpy(TensorView(DType::kF32, {0, 2}, static_cast<void*>(nullptr))).ok());
}

TEST(NpyWrite, UnwritablePathIsAnError) {
  const float v[1] = {0};
  absl::Status s = WriteNpy("/nonexistent-dir/x.npy", TensorView(DType::kF32, {1}, v));
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(Msg(s), HasSubstr("/nonexistent-dir/x.npy"));
}

TEST(NpyRead, AcceptsVersions2And3AndOldSpellings) {
  const std::string data = FloatBytes({1.5f, -2.0f});
  for (int major : {1, 2, 3}) {
    absl::StatusOr<Tensor> t =
        ReadNpyFromBuffer(Bytes(MakeNpy(major, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", data)));
    ASSERT_TRUE(t.ok()) << major << ": " << t.status();
    EXPECT_EQ(t->shape(), std::vector<int64_t>({2}));
    EXPECT_EQ(t->as<float>()[1], -2.0f);
  }
  // Double quotes, key order, no trailing comma, Python 2 longs, '<' on a byte type.
  absl::StatusOr<Tensor> t = ReadNpyFromBuffer(
      Bytes(MakeNpy(1, "{\"shape\": (2L,1L), \"fortran_order\": False, \"descr\": \"<u1\"}", "\x07\x09")));
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->dtype(), DType::kU8);
  EXPECT_EQ(t->shape(), std::vector<int64_t>({2, 1}));
  EXPECT_EQ(t->as<uint8_t>()[1], 9);
}

TEST(NpyRead, ScalarAndEmpty) {
  absl::StatusOr<Tensor> scalar = ReadNpyFromBuffer(
      Bytes(MakeNpy(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (), }", FloatBytes({3.25f}))));
  ASSERT_TRUE(scalar.ok()) << scalar.status();
  EXPECT_TRUE(scalar->shape().empty());
  EXPECT_EQ(scalar->as<float>()[0], 3.25f);

  absl::StatusOr<Tensor> empty =
      ReadNpyFromBuffer(Bytes(MakeNpy(1, "{'descr': '<i8', 'fortran_order': False, 'shape': (3, 0), }", "")));
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_EQ(empty->shape(), std::vector<int64_t>({3, 0}));
}

struct MalformedCase {
  const char* name;
  std::string bytes;
  const char* message;
};

std::vector<MalformedCase> MalformedCases() {
  const std::string f4 = "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }";
  const std::string two_floats = FloatBytes({1, 2});
  auto with_dict = [&](const std::string& dict, const std::string& data = "") { return MakeNpy(1, dict, data); };
  std::string huge_header("\x93NUMPY\x02\x00\xff\xff\xff\xff", 12);
  return {
      {"empty", "", "magic"},
      {"not_npy", "PK\x03\x04 this is a zip file", "magic"},
      {"magic_only", std::string("\x93NUMPY", 6), "truncated"},
      {"no_header_len", std::string("\x93NUMPY\x01\x00", 8), "truncated"},
      {"version_4", MakeNpy(4, f4, two_floats), "version 4.0"},
      {"version_1_1", [&] { std::string s = MakeNpy(1, f4, two_floats); s[7] = 1; return s; }(), "version 1.1"},
      {"huge_header_length", huge_header, "limit"},
      {"truncated_header", MakeNpy(1, f4, two_floats).substr(0, 30), "truncated header"},
      {"truncated_data", MakeNpy(1, f4, two_floats).substr(0, 10 + f4.size() + 1 + 5), "truncated data"},
      {"trailing_bytes", MakeNpy(1, f4, two_floats + "xyz"), "3 unexpected bytes"},
      {"fortran", with_dict("{'descr': '<f4', 'fortran_order': True, 'shape': (2,), }", two_floats), "Fortran"},
      {"big_endian", with_dict("{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }", two_floats),
       "big-endian"},
      {"c8", with_dict("{'descr': '<c8', 'fortran_order': False, 'shape': (2,), }", std::string(16, 'a')),
       "unsupported .npy dtype '<c8'"},
      {"complex", with_dict("{'descr': '<c8', 'fortran_order': False, 'shape': (1,), }", "abcdefgh"), "<c8"},
      {"object", with_dict("{'descr': '|O', 'fortran_order': False, 'shape': (1,), }", "abcdefgh"), "'|O'"},
      {"structured", with_dict("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,), }", "abcd"),
       "structured"},
      {"negative_dim", with_dict("{'descr': '<f4', 'fortran_order': False, 'shape': (-1,), }"), "non-negative"},
      {"dim_overflow", with_dict("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }"),
       "overflows"},
      {"size_overflow",
       with_dict("{'descr': '<f8', 'fortran_order': False, 'shape': (4294967296, 4294967296, 16), }"), "overflow"},
      {"lying_shape", with_dict("{'descr': '<f4', 'fortran_order': False, 'shape': (1099511627776,), }", two_floats),
       "truncated data"},
      {"too_many_dims",
       with_dict(absl::StrCat("{'descr': '<f4', 'fortran_order': False, 'shape': (",
                              [] { std::string s; for (int i = 0; i < 65; ++i) s += "1,"; return s; }(), "), }"),
                 FloatBytes({1})),
       "more than 64 dims"},
      {"missing_key", with_dict("{'descr': '<f4', 'shape': (2,), }", two_floats), "lacks"},
      {"extra_key", with_dict("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 1}", two_floats),
       "unexpected header key 'x'"},
      {"duplicate_key", with_dict("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2,)}"),
       "duplicate"},
      {"shape_not_tuple", with_dict("{'descr': '<f4', 'fortran_order': False, 'shape': [2], }", two_floats),
       "not a tuple"},
      {"fortran_not_bool", with_dict("{'descr': '<f4', 'fortran_order': 0, 'shape': (2,), }", two_floats),
       "True or False"},
      {"unterminated_string", with_dict("{'descr': '<f4, 'fortran_order': False, 'shape': (2,)", two_floats),
       "malformed"},
      {"garbage_after_dict", with_dict(f4 + " junk", two_floats), "after the header dict"},
      {"not_a_dict", with_dict("['descr', '<f4']", two_floats), "'{'"},
      {"unclosed_dict", with_dict("{'descr': '<f4', 'fortran_order': False, 'shape': (2,)", two_floats),
       "expected ',' or '}'"},
      {"bool_byte_2", with_dict("{'descr': '|b1', 'fortran_order': False, 'shape': (3,), }", std::string("\x01\x02\x00", 3)),
       "byte value 2"},
  };
}

TEST(NpyRead, MalformedFilesAreClearErrors) {
  for (const MalformedCase& c : MalformedCases()) {
    SCOPED_TRACE(c.name);
    absl::StatusOr<Tensor> t = ReadNpyFromBuffer(Bytes(c.bytes));
    ASSERT_FALSE(t.ok());
    EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument) << t.status();
    EXPECT_THAT(Msg(t.status()), HasSubstr(c.message));

    // The file path gives the same verdict, prefixed with the path.
    const std::string path = TempPath(absl::StrCat("malformed_", c.name, ".npy"));
    std::ofstream(path, std::ios::binary) << c.bytes;
    absl::StatusOr<Tensor> from_file = ReadNpy(path);
    ASSERT_FALSE(from_file.ok());
    EXPECT_THAT(Msg(from_file.status()), HasSubstr(path));
    EXPECT_THAT(Msg(from_file.status()), HasSubstr(c.message));
  }
}

TEST(NpyRead, EveryTruncationAndByteFlipFailsCleanly) {
  Tensor t = Filled(DType::kI32, {3, 5});
  const std::string good = EncodeNpy(t.view()).value();
  for (size_t len = 0; len < good.size(); ++len) {
    EXPECT_FALSE(ReadNpyFromBuffer(Bytes(good.substr(0, len))).ok()) << "length " << len;
  }
  // A flipped header byte may or may not be fatal, but must not crash; data
  // bytes are free-form, so flips there must still load.
  const size_t data_offset = good.size() - t.view().byte_size();
  for (size_t i = 0; i < good.size(); ++i) {
    for (uint8_t mask : {0x01, 0x80, 0xff}) {
      std::string bad = good;
      bad[i] = static_cast<char>(bad[i] ^ mask);
      absl::StatusOr<Tensor> r = ReadNpyFromBuffer(Bytes(bad));
      if (i >= data_offset) EXPECT_TRUE(r.ok()) << "byte " << i << ": " << r.status();
    }
  }
}

TEST(NpyRead, MissingFileAndDirectory) {
  absl::StatusOr<Tensor> t = ReadNpy(TempPath("does_not_exist.npy"));
  EXPECT_EQ(t.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(Msg(t.status()), HasSubstr("does_not_exist.npy"));

  const std::string dir = TempPath("a_directory");
  mkdir(dir.c_str(), 0755);
  absl::StatusOr<Tensor> d = ReadNpy(dir);
  EXPECT_FALSE(d.ok());
  EXPECT_THAT(Msg(d.status()), HasSubstr("not a regular file"));
}

TEST(NpyRead, SpecialFilesAreRefusedByNameWithoutBlocking) {
  const std::string fifo = TempPath("fifo.npy");
  ::unlink(fifo.c_str());
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0) << std::strerror(errno);
  absl::StatusOr<Tensor> t = WithinTenSeconds(fifo, [&] { return ReadNpy(fifo); });
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Msg(t.status()), HasSubstr("'" + fifo + "' is not a regular file (a FIFO)"));
  absl::StatusOr<NpyHeader> h = WithinTenSeconds(fifo, [&] { return ReadNpyHeader(fifo); });
  EXPECT_THAT(Msg(h.status()), HasSubstr("is not a regular file (a FIFO)"));
  ::unlink(fifo.c_str());

  t = ReadNpy("/dev/zero");
  EXPECT_THAT(Msg(t.status()), HasSubstr("'/dev/zero' is not a regular file (a character device)"));
}

TEST(NpyWrite, FifoWithoutAReaderFailsInsteadOfBlocking) {
  const std::string fifo = TempPath("out_fifo.npy");
  ::unlink(fifo.c_str());
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0) << std::strerror(errno);
  const float v = 1;
  absl::Status s = WithinTenSeconds(fifo, [&] { return WriteNpy(fifo, TensorView(DType::kF32, {1}, &v)); });
  EXPECT_FALSE(s.ok());
  ::unlink(fifo.c_str());
}

// --- the header alone, and checks before the data ---------------------------

TEST(NpyHeaderTest, ReadsTheHeaderAndWhereTheDataIs) {
  const std::string path = TempPath("header.npy");
  Tensor t = Filled(DType::kI32, {2, 3});
  ASSERT_TRUE(WriteNpy(path, t.view()).ok());
  absl::StatusOr<NpyHeader> h = ReadNpyHeader(path);
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(h->dtype, DType::kI32);
  EXPECT_EQ(h->shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(h->data_offset % 64, 0u);
  EXPECT_EQ(h->data_bytes, 24u);

  // Text: the bytes as stored (3 elements of '<U2' = 24 bytes).
  const std::string text = MakeNpy(1, "{'descr': '<U2', 'fortran_order': False, 'shape': (3,), }",
                                   std::string(24, '\0'));
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
  h = ReadNpyHeader(path);
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(h->dtype, DType::kString);
  EXPECT_EQ(h->data_bytes, 24u);
  EXPECT_EQ(h->data_offset + h->data_bytes, text.size());
}

TEST(NpyHeaderTest, AHugeDeclaredShapeInASmallFileIsRefusedBeforeReading) {
  // (1 << 40,) f32 = 4 TiB, within the 256 TiB limit, in a file of 16 data
  // bytes: refused from the header and the file size, nothing allocated.
  const std::string path = TempPath("huge_declared.npy");
  std::ofstream(path, std::ios::binary | std::ios::trunc)
      << MakeNpy(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1099511627776,), }", std::string(16, '\0'));
  absl::StatusOr<NpyHeader> h = ReadNpyHeader(path);
  ASSERT_FALSE(h.ok());
  EXPECT_EQ(h.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Msg(h.status()), HasSubstr("the header promises 4398046511104 bytes of f32 but the file holds 16"));
  bool checked = false;
  absl::StatusOr<Tensor> t = ReadNpy(path, [&](const NpyHeader&) {
    checked = true;
    return absl::OkStatus();
  });
  ASSERT_FALSE(t.ok());
  EXPECT_THAT(Msg(t.status()), HasSubstr("the header promises 4398046511104 bytes"));
  EXPECT_FALSE(checked);

  // Past the 256 TiB limit: refused by the size check itself.
  std::ofstream(path, std::ios::binary | std::ios::trunc)
      << MakeNpy(1, "{'descr': '<f8', 'fortran_order': False, 'shape': (1099511627776, 1048576), }", "");
  h = ReadNpyHeader(path);
  ASSERT_FALSE(h.ok());
  EXPECT_EQ(h.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(NpyHeaderTest, TheCheckRunsBeforeTheDataIsRead) {
  // The data is bad (a bool byte of 2): only a full read notices.
  const std::string path = TempPath("check_first.npy");
  std::ofstream(path, std::ios::binary | std::ios::trunc)
      << MakeNpy(1, "{'descr': '|b1', 'fortran_order': False, 'shape': (3,), }", std::string("\x01\x02\x00", 3));
  EXPECT_THAT(Msg(ReadNpy(path).status()), HasSubstr("byte value 2"));
  int calls = 0;
  absl::StatusOr<Tensor> t = ReadNpy(path, [&](const NpyHeader& h) {
    ++calls;
    EXPECT_EQ(h.dtype, DType::kBool);
    EXPECT_EQ(h.shape, std::vector<int64_t>{3});
    return absl::FailedPreconditionError("wants f32[4]");
  });
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(t.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(Msg(t.status()), path + ": wants f32[4]");

  // A check that passes gives the same tensor as ReadNpy.
  Tensor good = Filled(DType::kF32, {4, 2});
  ASSERT_TRUE(WriteNpy(path, good.view()).ok());
  absl::StatusOr<Tensor> read = ReadNpy(path, [](const NpyHeader&) { return absl::OkStatus(); });
  ASSERT_TRUE(read.ok()) << read.status();
  ExpectSameTensor(*read, good);
}

// --- strings ---------------------------------------------------------------------

Tensor StringTensor(std::vector<int64_t> shape, const std::vector<std::string>& values) {
  std::vector<StringRef> refs(values.begin(), values.end());
  return Tensor::CopyOf(TensorView(DType::kString, std::move(shape), refs.data())).value();
}

std::vector<std::string> StringsOf(const Tensor& t) {
  std::vector<std::string> out;
  for (int64_t i = 0; i < t.view().num_elements(); ++i) out.emplace_back(t.as<StringRef>()[i].view());
  return out;
}

// UCS-4 little-endian bytes of `code_points`, as '<U' data.
std::string Ucs4(std::vector<uint32_t> code_points) {
  std::string out;
  for (uint32_t c : code_points) {
    for (int b = 0; b < 4; ++b) out.push_back(static_cast<char>((c >> (8 * b)) & 0xff));
  }
  return out;
}

const std::string kMuller = "M\xc3\xbcller";               // 6 code points, 7 bytes
const std::string kNihon = "\xe6\x97\xa5\xe6\x9c\xac";      // 2 code points
const std::string kGrin = "\xf0\x9f\x98\x80";               // U+1F600, 1 code point
const std::string kMixed = "mixed \xf0\x9f\x98\x80 \xc3\xbc";  // 9 code points

TEST(NpyStrings, RoundTripThroughFileAndBuffer) {
  const std::vector<std::string> six = {"", "a", kMuller, kNihon, kGrin, kMixed};
  const std::vector<std::pair<std::vector<int64_t>, std::vector<std::string>>> cases = {
      {{6}, six}, {{2, 3}, six}, {{}, {kMuller}}, {{0}, {}}, {{0, 3}, {}}, {{3}, {"", "", ""}}};
  for (const auto& [shape, values] : cases) {
    SCOPED_TRACE(absl::StrCat("rank ", shape.size(), ", ", values.size(), " strings"));
    Tensor t = StringTensor(shape, values);
    const std::string path = TempPath(absl::StrCat("strings_", shape.size(), "_", values.size(), ".npy"));
    ASSERT_TRUE(WriteNpy(path, t.view()).ok());
    absl::StatusOr<Tensor> from_file = ReadNpy(path);
    ASSERT_TRUE(from_file.ok()) << from_file.status();
    EXPECT_EQ(from_file->dtype(), DType::kString);
    EXPECT_EQ(from_file->shape(), shape);
    EXPECT_EQ(StringsOf(*from_file), values);

    absl::StatusOr<std::string> encoded = EncodeNpy(t.view());
    ASSERT_TRUE(encoded.ok()) << encoded.status();
    absl::StatusOr<Tensor> from_buffer = ReadNpyFromBuffer(Bytes(*encoded));
    ASSERT_TRUE(from_buffer.ok()) << from_buffer.status();
    EXPECT_EQ(from_buffer->shape(), shape);
    EXPECT_EQ(StringsOf(*from_buffer), values);
  }
}

TEST(NpyStrings, WritesUnicodeAsWideAsTheLongestElement) {
  absl::StatusOr<std::string> bytes = EncodeNpy(StringTensor({2}, {kMixed, "ab"}).view());
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  EXPECT_THAT(*bytes, HasSubstr("{'descr': '<U9', 'fortran_order': False, 'shape': (2,), }"));
  const size_t data_offset = bytes->size() - 2 * 9 * 4;
  EXPECT_EQ(data_offset % 64, 0u);
  EXPECT_EQ(bytes->substr(data_offset),
            Ucs4({'m', 'i', 'x', 'e', 'd', ' ', 0x1F600, ' ', 0xFC, 'a', 'b', 0, 0, 0, 0, 0, 0, 0}));
  // Empty strings still take one code point each, as numpy writes them.
  EXPECT_THAT(EncodeNpy(StringTensor({2}, {"", ""}).view()).value(), HasSubstr("'descr': '<U1'"));
  EXPECT_THAT(EncodeNpy(StringTensor({0}, {}).view()).value(), HasSubstr("'descr': '<U1'"));
}

TEST(NpyStrings, WriteRefusesInvalidUtf8NamingTheElement) {
  for (const std::string& bad : {std::string("\xff"), std::string("ok\xc3"), std::string("\xed\xa0\x80"),
                                 std::string("\xc0\xaf"), std::string("\xf4\x90\x80\x80")}) {
    SCOPED_TRACE(absl::CHexEscape(bad));
    Tensor t = StringTensor({3}, {"fine", bad, "fine"});
    absl::StatusOr<std::string> bytes = EncodeNpy(t.view());
    ASSERT_FALSE(bytes.ok());
    EXPECT_EQ(bytes.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(Msg(bytes.status()), HasSubstr("string element 1 is not valid UTF-8"));
    const std::string path = TempPath("bad_utf8.npy");
    absl::Status s = WriteNpy(path, t.view());
    EXPECT_THAT(Msg(s), HasSubstr(path));
    EXPECT_THAT(Msg(s), HasSubstr("string element 1 is not valid UTF-8"));
  }
  // A reference with a size but no bytes is a broken view, not an empty string.
  const StringRef broken[1] = {StringRef()};
  StringRef dangling;
  dangling.size = 3;
  const StringRef views[2] = {broken[0], dangling};
  EXPECT_THAT(Msg(EncodeNpy(TensorView(DType::kString, {2}, views)).status()),
              HasSubstr("string element 1 has 3 bytes but no data"));
}

// Files numpy 2.4 wrote: numpy.save of
//   numpy.array([['', 'Müller'], ['日本', '😀']]), numpy.array([b'ab', b'', b'xyz']), numpy.array('x').
const char kNumpyUnicode[] =
    "\x93NUMPY\x01\x00v\x00{'descr': '<U6', 'fortran_order': False, 'shape': (2, 2), }                   "
    "                                       \x0a\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00"
    "\x00\x00\x00\x00\x00\x00\x00\x00\x00M\x00\x00\x00\xfc\x00\x00\x00l\x00\x00\x00l\x00\x00\x00""e\x00\x00"
    "\x00r\x00\x00\x00\xe5""e\x00\x00,g\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00"
    "\x00\x00\xf6\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00";
const char kNumpyBytes[] =
    "\x93NUMPY\x01\x00v\x00{'descr': '|S3', 'fortran_order': False, 'shape': (3,), }                     "
    "                                       \x0a""ab\x00\x00\x00\x00xyz";
const char kNumpyScalar[] =
    "\x93NUMPY\x01\x00v\x00{'descr': '<U1', 'fortran_order': False, 'shape': (), }                       "
    "                                       \x0ax\x00\x00\x00";

template <size_t N>
std::string Fixture(const char (&bytes)[N]) {
  return std::string(bytes, N - 1);
}

TEST(NpyStrings, ReadsWhatNumpyWrites) {
  ASSERT_EQ(Fixture(kNumpyUnicode).size(), 224u);
  absl::StatusOr<Tensor> u = ReadNpyFromBuffer(Bytes(Fixture(kNumpyUnicode)));
  ASSERT_TRUE(u.ok()) << u.status();
  EXPECT_EQ(u->dtype(), DType::kString);
  EXPECT_EQ(u->shape(), (std::vector<int64_t>{2, 2}));
  EXPECT_THAT(StringsOf(*u), ::testing::ElementsAre("", kMuller, kNihon, kGrin));

  const std::string path = TempPath("numpy_bytes.npy");
  std::ofstream(path, std::ios::binary) << Fixture(kNumpyBytes);
  absl::StatusOr<Tensor> s = ReadNpy(path);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->dtype(), DType::kString);
  EXPECT_THAT(StringsOf(*s), ::testing::ElementsAre("ab", "", "xyz"));

  absl::StatusOr<Tensor> scalar = ReadNpyFromBuffer(Bytes(Fixture(kNumpyScalar)));
  ASSERT_TRUE(scalar.ok()) << scalar.status();
  EXPECT_TRUE(scalar->shape().empty());
  EXPECT_THAT(StringsOf(*scalar), ::testing::ElementsAre("x"));

  // What grove writes is byte for byte what numpy writes.
  EXPECT_EQ(EncodeNpy(u->view()).value(), Fixture(kNumpyUnicode));
}

TEST(NpyStrings, OnlyTrailingNulsArePadding) {
  const std::string dict = "{'descr': '<U3', 'fortran_order': False, 'shape': (3,), }";
  absl::StatusOr<Tensor> t =
      ReadNpyFromBuffer(Bytes(MakeNpy(1, dict, Ucs4({'a', 0, 'b', 'a', 'b', 0, 0, 0, 0}))));
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_THAT(StringsOf(*t), ::testing::ElementsAre(std::string("a\0b", 3), "ab", ""));
  absl::StatusOr<Tensor> b = ReadNpyFromBuffer(Bytes(MakeNpy(
      1, "{'descr': '|S4', 'fortran_order': False, 'shape': (2,), }", std::string("\0x\0\0y\0\0z", 8))));
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_THAT(StringsOf(*b), ::testing::ElementsAre(std::string("\0x", 2), std::string("y\0\0z", 4)));
}

TEST(NpyStrings, MalformedTextFilesAreClearErrors) {
  auto npy = [](const std::string& descr, const std::string& shape, const std::string& data) {
    return MakeNpy(1, absl::StrCat("{'descr': '", descr, "', 'fortran_order': False, 'shape': ", shape, ", }"), data);
  };
  const std::vector<MalformedCase> cases = {
      {"above_max", npy("<U1", "(2,)", Ucs4({'a', 0x110000})), "element 1 of the '<U1' array holds 0x110000"},
      {"above_max_message", npy("<U1", "(1,)", Ucs4({0xFFFFFFFF})), "above U+10FFFF"},
      {"surrogate", npy("<U2", "(1,)", Ucs4({'a', 0xD800})), "at code point 1, which is not a Unicode character (a "
                                                                "UTF-16 surrogate)"},
      {"bytes_not_utf8", npy("|S2", "(2,)", std::string("ok\xff\x00", 4)), "element 1 of the '|S2' array is not valid UTF-8"},
      {"short_unicode", npy("<U2", "(3,)", Ucs4({'a', 'b', 'c', 'd', 'e'})), "truncated data: the header promises 24 "
                                                                            "bytes of '<U2' but the file holds 20"},
      {"long_unicode", npy("<U1", "(2,)", Ucs4({'a', 'b', 'c'})), "4 unexpected bytes"},
      {"short_bytes", npy("|S3", "(2,)", "abcde"), "truncated data"},
      {"lying_shape", npy("<U4", "(1099511627776,)", Ucs4({'a'})), "truncated data"},
      {"size_overflow", npy("<U1073741824", "(4294967296, 4294967296)", ""), "overflow"},
      {"zero_width", npy("<U0", "(2,)", ""), "zero-width elements"},
      {"no_width", npy("<U", "(2,)", ""), "'<U' has no readable element width"},
      {"bad_width", npy("|S3x", "(2,)", ""), "'|S3x' has no readable element width"},
      {"huge_width", npy("<U99999999999", "(1,)", ""), "above the limit"},
      {"big_endian", npy(">U2", "(1,)", std::string(8, '\0')), "big-endian"},
      {"no_order_unicode", npy("|U2", "(1,)", std::string(8, '\0')), "unicode arrays are '<U{n}'"},
      {"object", npy("|O", "(2,)", std::string(16, '\0')), "dtype=str"},
      {"unknown", npy("<V4", "(1,)", "abcd"), "(supported: "},
  };
  for (const MalformedCase& c : cases) {
    SCOPED_TRACE(c.name);
    absl::StatusOr<Tensor> t = ReadNpyFromBuffer(Bytes(c.bytes));
    ASSERT_FALSE(t.ok());
    EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument) << t.status();
    EXPECT_THAT(Msg(t.status()), HasSubstr(c.message));
    const std::string path = TempPath(absl::StrCat("malformed_text_", c.name, ".npy"));
    std::ofstream(path, std::ios::binary) << c.bytes;
    absl::StatusOr<Tensor> from_file = ReadNpy(path);
    ASSERT_FALSE(from_file.ok());
    EXPECT_THAT(Msg(from_file.status()), HasSubstr(path));
    EXPECT_THAT(Msg(from_file.status()), HasSubstr(c.message));
  }
}

TEST(NpyStrings, EveryTruncationAndByteFlipFailsCleanly) {
  const std::string good = EncodeNpy(StringTensor({2, 2}, {"", kMuller, kNihon, kGrin}).view()).value();
  for (size_t len = 0; len < good.size(); ++len) {
    EXPECT_FALSE(ReadNpyFromBuffer(Bytes(good.substr(0, len))).ok()) << "length " << len;
  }
  // A flip may make a code point invalid (an error) but never crashes; a
  // flipped low byte of a code point stays a character.
  for (size_t i = 0; i < good.size(); ++i) {
    for (uint8_t mask : {0x01, 0x80, 0xff}) {
      std::string bad = good;
      bad[i] = static_cast<char>(bad[i] ^ mask);
      absl::StatusOr<Tensor> r = ReadNpyFromBuffer(Bytes(bad));
      if (r.ok()) {
        EXPECT_EQ(r->dtype(), DType::kString);
      }
    }
  }
}

}  // namespace
}  // namespace grove
