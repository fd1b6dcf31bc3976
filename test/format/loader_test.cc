// The loader against valid, malformed and hostile files: every bad file must
// give a clear error that says what is wrong and where, never a crash.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <functional>
#include <future>
#include <random>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "grove/grove.h"
#include "gtest/gtest.h"
#include "lib/format/file_layout.h"
#include "lib/format/regular_file.h"
#include "lib/runtime/model_impl.h"
#include "models/demo_models.h"
#include "schemas/grove_generated.h"
#include "test/special_file_util.h"

namespace grove {
namespace {

using testing::WithinTenSeconds;

using ::testing::HasSubstr;
using ::testing::Not;

// A small valid model: y = Relu(x + w), x[batch, 4].
std::vector<uint8_t> SmallModel() {
  ModelBuilder b;
  b.AddSymbol("batch", 1, 8);
  b.AddInput("x", DType::kF32, {"batch", 4});
  b.AddWeight("w", DType::kF32, {4}, std::vector<float>{1, 2, 3, 4});
  b.AddOp("Add", {"x", "w"}, {"s"});
  b.AddOp("Relu", {"s"}, {"y"});
  b.AddOutput("y");
  return b.Finish().value();
}

// The file split into its FlatBuffer (unpacked, editable) and data region.
struct Parts {
  std::unique_ptr<fb::ModelT> model;
  std::vector<uint8_t> data;
};

Parts Split(const std::vector<uint8_t>& file) {
  Parts p;
  p.model.reset(fb::GetSizePrefixedModel(file.data())->UnPack());
  uint32_t fb_size;
  std::memcpy(&fb_size, file.data(), 4);
  const uint64_t start = AlignUp(fb_size + 4, kWeightAlignment);
  p.data.assign(file.begin() + static_cast<long>(start), file.end());
  return p;
}

std::vector<uint8_t> Join(const Parts& p) {
  flatbuffers::FlatBufferBuilder fbb;
  fb::FinishSizePrefixedModelBuffer(fbb, fb::Model::Pack(fbb, p.model.get()));
  std::vector<uint8_t> out(AlignUp(fbb.GetSize(), kWeightAlignment), 0);
  std::memcpy(out.data(), fbb.GetBufferPointer(), fbb.GetSize());
  out.insert(out.end(), p.data.begin(), p.data.end());
  return out;
}

absl::Status Load(const std::vector<uint8_t>& bytes) {
  return Model::LoadFromBuffer(bytes).status();
}

// Applies `edit` to the small model and expects a load error containing `want`.
void ExpectRejected(const std::function<void(Parts&)>& edit, const std::string& want) {
  Parts p = Split(SmallModel());
  edit(p);
  absl::Status s = Load(Join(p));
  EXPECT_FALSE(s.ok()) << "wanted an error containing: " << want;
  EXPECT_THAT(std::string(s.message()), HasSubstr(want));
}

TEST(LoaderTest, ValidModelLoadsAndDescribesItself) {
  auto model = Model::LoadFromBuffer(SmallModel());
  ASSERT_TRUE(model.ok()) << model.status();
  ASSERT_EQ((*model)->inputs().size(), 1u);
  EXPECT_EQ((*model)->inputs()[0].name, "x");
  EXPECT_EQ((*model)->inputs()[0].shape[0].symbol, "batch");
  EXPECT_EQ((*model)->inputs()[0].shape[1].value, 4);
  ASSERT_EQ((*model)->outputs().size(), 1u);
  EXPECT_EQ((*model)->outputs()[0].dtype, DType::kF32);
  EXPECT_EQ((*model)->outputs()[0].shape[0].symbol, "batch");
  EXPECT_EQ((*model)->symbols()[0].max, 8);
  ModelSummary s = (*model)->Summary();
  EXPECT_EQ(s.num_operators, 2);
  EXPECT_EQ(s.weight_bytes, 16u);
}

TEST(LoaderTest, WeightsAreUsedInPlaceFromTheModelBytes) {
  const std::string path = absl::StrCat(::testing::TempDir(), "/inplace.grove");
  ModelBuilder b;
  b.AddInput("x", DType::kF32, {4});
  b.AddWeight("w", DType::kF32, {4}, std::vector<float>{1, 2, 3, 4});
  b.AddOp("Add", {"x", "w"}, {"y"});
  b.AddOutput("y");
  ASSERT_TRUE(b.Save(path).ok());
  auto model = Model::LoadFromFile(path);
  ASSERT_TRUE(model.ok()) << model.status();
  for (const ir::TensorDecl& t : (*model)->impl().graph().tensors) {
    if (!t.is_weight) continue;
    EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data) % 64, 0u);
    EXPECT_EQ(reinterpret_cast<const float*>(t.data)[2], 3.0f);
  }
}

// Whether a file named `path`'s base name is mapped into this process
// (/proc/self/maps names files by their canonical path).
bool IsMapped(std::string path) {
  path = path.substr(path.rfind('/'));
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    if (line.size() >= path.size() && line.compare(line.size() - path.size(), path.size(), path) == 0) return true;
  }
  return false;
}

// A file of at most ModelBytes::kReadBelow bytes is read into aligned memory;
// a larger one is mapped. Either way the weights are aligned and intact.
TEST(LoaderTest, SmallFilesAreReadLargeOnesMapped) {
  for (const int64_t n : {int64_t{4}, static_cast<int64_t>(format::ModelBytes::kReadBelow / sizeof(float)) + 16}) {
    SCOPED_TRACE(n);
    const std::string path = absl::StrCat(::testing::TempDir(), "/read_or_map_", n, ".grove");
    std::vector<float> w(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) w[static_cast<size_t>(i)] = static_cast<float>(i % 1000) * 0.5f;
    ModelBuilder b;
    b.AddInput("x", DType::kF32, {n});
    b.AddWeight("w", DType::kF32, {n}, w);
    b.AddOp("Add", {"x", "w"}, {"y"});
    b.AddOutput("y");
    ASSERT_TRUE(b.Save(path).ok());
    auto model = Model::LoadFromFile(path);
    ASSERT_TRUE(model.ok()) << model.status();
    const bool large = (*model)->impl().host_byte_size() > format::ModelBytes::kReadBelow;
    EXPECT_EQ(large, n > 4);
    EXPECT_EQ(IsMapped(path), large);
    for (const ir::TensorDecl& t : (*model)->impl().graph().tensors) {
      if (!t.is_weight) continue;
      EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data) % 64, 0u);
      EXPECT_EQ(std::memcmp(t.data, w.data(), w.size() * sizeof(float)), 0);
    }
    model->reset();
    EXPECT_FALSE(IsMapped(path));
  }
}

// y = Identity(w), w a string weight ["", "Müller", "ab"].
std::vector<uint8_t> StringWeightModel() {
  ModelBuilder b;
  b.AddStringWeight("w", {3}, std::vector<std::string>{"", "Müller", "ab"});
  b.AddOp("Identity", {"w"}, {"y"});
  b.AddOutput("y");
  return b.Finish().value();
}

TEST(LoaderTest, StringWeightsReferToTheFileInPlace) {
  const std::string path = absl::StrCat(::testing::TempDir(), "/strings.grove");
  {
    std::ofstream f(path, std::ios::binary);
    const std::vector<uint8_t> bytes = StringWeightModel();
    f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  }
  auto model = Model::LoadFromFile(path);
  ASSERT_TRUE(model.ok()) << model.status();
  const internal::ModelImpl& impl = (*model)->impl();
  int weights = 0;
  for (const ir::TensorDecl& t : impl.graph().tensors) {
    if (!t.is_weight) continue;
    ++weights;
    EXPECT_EQ(t.dtype, DType::kString);
    EXPECT_EQ(t.bytes, 3 * sizeof(StringRef));
    const auto* refs = reinterpret_cast<const StringRef*>(t.data);
    EXPECT_EQ(refs[0].view(), "");
    EXPECT_EQ(refs[1].view(), "Müller");
    EXPECT_EQ(refs[2].view(), "ab");
    // The bytes are the model's own, not a copy.
    const auto* text = reinterpret_cast<const uint8_t*>(refs[1].data);
    EXPECT_TRUE(text >= impl.host_bytes() && text < impl.host_bytes() + impl.host_byte_size());
  }
  EXPECT_EQ(weights, 1);
  // As stored: an 8-byte end offset per string, then 0 + 7 + 2 bytes of text.
  EXPECT_EQ((*model)->Summary().weight_bytes, 3 * 8 + 9u);
}

TEST(LoaderTest, MalformedStringWeightsAreNamed) {
  auto rejected = [](const std::function<void(Parts&)>& edit, const std::string& want) {
    Parts p = Split(StringWeightModel());
    edit(p);
    absl::Status s = Load(Join(p));
    EXPECT_FALSE(s.ok()) << "wanted an error containing: " << want;
    EXPECT_THAT(std::string(s.message()), HasSubstr(want));
  };
  auto set_end = [](Parts& p, int i, uint64_t end) {
    std::memcpy(p.data.data() + p.model->buffers[0]->offset + 8 * i, &end, 8);
  };
  rejected([&](Parts& p) { set_end(p, 1, 99); }, "string 1 ends at byte 99, outside 0..9");
  rejected([&](Parts& p) { set_end(p, 0, 8); }, "string 1 ends at byte 7, outside 8..9");
  rejected([&](Parts& p) { set_end(p, 2, 8); }, "1 bytes after its last string");
  rejected([](Parts& p) { p.model->buffers[0]->size = 16; }, "too few for the offsets of 3 strings");
  rejected([](Parts& p) { p.model->tensors[0]->dtype = static_cast<fb::DType>(15); }, "dtype 15 is unknown");
}

TEST(LoaderTest, BuilderRefusesStringBytesAndMiscountedStrings) {
  ModelBuilder b;
  b.AddWeight("w", DType::kString, {1}, std::vector<uint8_t>(16));
  EXPECT_THAT(std::string(b.Finish().status().message()), HasSubstr("use AddStringWeight"));
  ModelBuilder c;
  c.AddStringWeight("w", {2}, std::vector<std::string>{"a"});
  EXPECT_THAT(std::string(c.Finish().status().message()), HasSubstr("has 2 elements but 1 strings were given"));
}

TEST(LoaderTest, MissingFileIsNotFound) {
  auto model = Model::LoadFromFile("/nonexistent/model.grove");
  EXPECT_EQ(model.status().code(), absl::StatusCode::kNotFound);
}

TEST(LoaderTest, SpecialFilesAreRefusedByNameWithoutBlocking) {
  const std::string dir = absl::StrCat(::testing::TempDir(), "/special_", getpid());
  ::mkdir(dir.c_str(), 0755);
  const std::string fifo = dir + "/model.grove";
  ::unlink(fifo.c_str());
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0) << std::strerror(errno);
  auto model = WithinTenSeconds(fifo, [&] { return Model::LoadFromFile(fifo); });
  EXPECT_EQ(model.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(model.status().message()), HasSubstr("'" + fifo + "' is not a regular file (a FIFO)"));

  // Through a symlink, the target is what counts.
  const std::string link = dir + "/link.grove";
  ::unlink(link.c_str());
  ASSERT_EQ(::symlink(fifo.c_str(), link.c_str()), 0);
  model = WithinTenSeconds(fifo, [&] { return Model::LoadFromFile(link); });
  EXPECT_THAT(std::string(model.status().message()), HasSubstr("is not a regular file (a FIFO)"));

  model = Model::LoadFromFile(dir);
  EXPECT_THAT(std::string(model.status().message()), HasSubstr("is not a regular file (a directory)"));
  model = Model::LoadFromFile("/dev/null");
  EXPECT_THAT(std::string(model.status().message()), HasSubstr("is not a regular file (a character device)"));
  ::unlink(link.c_str());
  ::unlink(fifo.c_str());
  ::rmdir(dir.c_str());
}

TEST(RegularFileTest, OpensReadsAndReportsShortReads) {
  const std::string path = absl::StrCat(::testing::TempDir(), "/regular_", getpid(), ".bin");
  std::ofstream(path, std::ios::binary) << "0123456789";
  absl::StatusOr<format::RegularFile> f = format::RegularFile::Open(path, "test file");
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->size(), 10u);
  // O_NONBLOCK was only for the open.
  EXPECT_EQ(::fcntl(f->fd(), F_GETFL) & O_NONBLOCK, 0);
  char buf[4] = {};
  ASSERT_TRUE(f->ReadAt(3, buf, 4).ok());
  EXPECT_EQ(std::string(buf, 4), "3456");
  const absl::Status past_end = f->ReadAt(8, buf, 4);
  EXPECT_EQ(past_end.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(past_end.message()), HasSubstr(path));

  format::RegularFile moved = *std::move(f);
  EXPECT_TRUE(moved.ReadAt(0, buf, 1).ok());
  ::unlink(path.c_str());

  absl::StatusOr<format::RegularFile> missing = format::RegularFile::Open(path, "test file");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(missing.status().message()), HasSubstr("cannot open test file '" + path + "'"));
}

TEST(LoaderTest, TinyAndTruncatedFilesAreRejected) {
  const std::vector<uint8_t> good = SmallModel();
  for (size_t n = 0; n < good.size(); n += (n < 64 ? 1 : 7)) {
    std::vector<uint8_t> cut(good.begin(), good.begin() + static_cast<long>(n));
    EXPECT_FALSE(Load(cut).ok()) << "truncated to " << n;
  }
  EXPECT_THAT(std::string(Load({1, 2, 3}).message()), HasSubstr("too small"));
  // A grove model cut after its identifier is still named truncated.
  std::vector<uint8_t> head(good.begin(), good.begin() + 64);
  EXPECT_THAT(std::string(Load(head).message()), HasSubstr("is truncated"));
}

TEST(LoaderTest, AnotherKindOfFileIsNamed) {
  // The first bytes of an ONNX ModelProto (ir_version 8, producer "pytorch"):
  // read as a size prefix they claim ~118 MB, which must not be the message.
  const std::vector<uint8_t> onnx = {0x08, 0x08, 0x12, 0x07, 'p', 'y', 't', 'o', 'r', 'c', 'h', 0x1a, 0x06, '2', '.'};
  const std::string m(Load(onnx).message());
  EXPECT_THAT(m, HasSubstr("not a grove model (missing the 'GROV' file identifier)"));
  EXPECT_THAT(m, HasSubstr("convert it first: grove import MODEL.onnx -o MODEL.grove"));
  EXPECT_THAT(m, Not(HasSubstr("truncated")));
  const std::string text(Load({'h', 'e', 'l', 'l', 'o', ' ', 'w', 'o', 'r', 'l', 'd', '!', '\n'}).message());
  EXPECT_THAT(text, HasSubstr("missing the 'GROV' file identifier"));
  EXPECT_THAT(text, Not(HasSubstr("grove import")));
}

TEST(LoaderTest, RandomByteFlipsNeverCrash) {
  const std::vector<uint8_t> good = demo::BuildEarlyExit().value();
  std::mt19937 rng(1234);
  int rejected = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    std::vector<uint8_t> bad = good;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int f = 0; f < flips; ++f) bad[rng() % bad.size()] ^= static_cast<uint8_t>(1 + rng() % 255);
    if (!Load(bad).ok()) ++rejected;
  }
  EXPECT_GT(rejected, 0);
}

TEST(LoaderTest, WrongIdentifierAndVersion) {
  std::vector<uint8_t> bad = SmallModel();
  std::memcpy(bad.data() + 8, "NOPE", 4);
  EXPECT_THAT(std::string(Load(bad).message()), HasSubstr("identifier"));
  ExpectRejected([](Parts& p) { p.model->format_version = 99; }, "format version 99");
  ExpectRejected([](Parts& p) { p.model->format_version = 0; }, "format version 0");
}

TEST(LoaderTest, BadIndicesAreNamed) {
  ExpectRejected([](Parts& p) { p.model->subgraphs[0]->operators[0]->inputs[0] = 77; },
                 "input 0 tensor index 77 is out of range");
  ExpectRejected([](Parts& p) { p.model->subgraphs[0]->operators[1]->outputs[0] = -5; },
                 "output 0 tensor index -5");
  ExpectRejected([](Parts& p) { p.model->subgraphs[0]->inputs[0] = 1000; }, "input tensor index 1000");
  ExpectRejected([](Parts& p) { p.model->subgraphs[0]->outputs[0] = -1; }, "output tensor index -1");
  ExpectRejected([](Parts& p) { p.model->tensors[0]->shape[0]->symbol = 3; }, "uses symbol 3");
  ExpectRejected([](Parts& p) { p.model->tensors[1]->buffer = 9; }, "buffer index 9 is out of range");
}

// A repeated name is reported at the first table that repeats one (not at
// the one it repeats), after any earlier table's own error.
TEST(LoaderTest, RepeatedNamesAreNamedWhereTheyRepeat) {
  auto add_symbol = [](Parts& p, const std::string& name) {
    auto sym = std::make_unique<fb::SymbolT>(*p.model->symbols[0]);
    sym->name = name;
    p.model->symbols.push_back(std::move(sym));
  };
  ExpectRejected([&](Parts& p) { add_symbol(p, "batch"); }, "symbol 1: name 'batch' is used twice");
  ExpectRejected([&](Parts& p) {
    add_symbol(p, "seq");
    add_symbol(p, "seq");
    add_symbol(p, "batch");
  }, "symbol 2: name 'seq' is used twice");
  ExpectRejected([&](Parts& p) {
    add_symbol(p, "");
    add_symbol(p, "batch");
  }, "symbol 1: has no name");
  const int n = static_cast<int>(Split(SmallModel()).model->tensors.size());
  ASSERT_GE(n, 4);
  ExpectRejected([&](Parts& p) { p.model->tensors[n - 1]->name = p.model->tensors[0]->name; },
                 absl::StrCat("tensor ", n - 1, " ('", Split(SmallModel()).model->tensors[0]->name,
                              "'): name is used by another tensor"));
  ExpectRejected([&](Parts& p) {
    p.model->tensors[3]->name = p.model->tensors[1]->name;
    p.model->tensors[2]->name = p.model->tensors[0]->name;
  }, "tensor 2 (");
  ExpectRejected([&](Parts& p) {
    p.model->tensors[3]->name = p.model->tensors[0]->name;
    p.model->tensors[1]->dtype = static_cast<fb::DType>(99);
  }, "tensor 1 (");
}

// Past 64 names the loader's table of names is on the heap: the same answers.
TEST(LoaderTest, RepeatedNamesAmongManyAreFound) {
  auto add_tensors = [](Parts& p, int count) {
    for (int i = 0; i < count; ++i) {
      auto t = std::make_unique<fb::TensorT>(*p.model->tensors[0]);
      t->name = absl::StrCat("extra_", i);
      t->buffer = -1;
      p.model->tensors.push_back(std::move(t));
    }
  };
  Parts unique = Split(SmallModel());
  add_tensors(unique, 300);
  ASSERT_TRUE(Model::LoadFromBuffer(Join(unique)).ok()) << Model::LoadFromBuffer(Join(unique)).status();
  const int n = static_cast<int>(Split(SmallModel()).model->tensors.size());
  ExpectRejected([&](Parts& p) {
    add_tensors(p, 300);
    p.model->tensors.back()->name = "extra_7";
  }, absl::StrCat("tensor ", n + 299, " ('extra_7'): name is used by another tensor"));
  ExpectRejected([&](Parts& p) {
    add_tensors(p, 300);
    p.model->tensors[n + 250]->name = p.model->tensors[0]->name;
    p.model->tensors[n + 200]->name = "extra_3";
  }, absl::StrCat("tensor ", n + 200, " ('extra_3'): name is used by another tensor"));
}

TEST(LoaderTest, ValueKindsAreChecked) {
  // Tensor 1 is the weight w, tensor 0 the input x.
  ExpectRejected([](Parts& p) { p.model->tensors[0]->kind = static_cast<fb::ValueKind>(9); }, "value kind 9 is unknown");
  ExpectRejected([](Parts& p) { p.model->tensors[1]->kind = fb::ValueKind::SEQUENCE; }, "a weight must be a tensor");
  // A sequence input that reaches Add (which takes tensors): symbolic shape
  // inference stops there and says why; the model loads (see the README).
  // The inference runs when the outputs are first described, not at load.
  {
    Parts p = Split(SmallModel());
    p.model->tensors[0]->kind = fb::ValueKind::SEQUENCE;
    absl::StatusOr<std::shared_ptr<const Model>> model = Model::LoadFromBuffer(Join(p));
    ASSERT_TRUE(model.ok()) << model.status();
    EXPECT_FALSE((*model)->impl().outputs_described());
    EXPECT_THAT((*model)->Summary().shape_inference_note, HasSubstr("has dtype seq(f32)"));
    EXPECT_TRUE((*model)->impl().outputs_described());
    // Where inference stopped, the outputs are as declared (no dtype here).
    ASSERT_EQ((*model)->outputs().size(), 1u);
    EXPECT_EQ((*model)->outputs()[0].name, p.model->tensors[p.model->subgraphs[0]->outputs[0]]->name);
    EXPECT_EQ((*model)->outputs()[0].dtype, DType::kUnknown);
  }
  // A sequence input may leave its tensors' shape undeclared; a tensor may not.
  ExpectRejected([](Parts& p) { p.model->tensors[0]->has_shape = false; }, "needs a dtype and a declared shape");
  Parts p = Split(SmallModel());
  p.model->tensors[0]->kind = fb::ValueKind::SEQUENCE;
  p.model->tensors[0]->has_shape = false;
  p.model->subgraphs[0]->operators.clear();
  p.model->subgraphs[0]->outputs[0] = 0;  // the sequence itself
  absl::StatusOr<std::shared_ptr<const Model>> model = Model::LoadFromBuffer(Join(p));
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ((*model)->inputs()[0].kind, ValueKind::kSequence);
  EXPECT_EQ((*model)->outputs()[0].kind, ValueKind::kSequence);
}

TEST(LoaderTest, OversizedDimsAndBadSymbolRanges) {
  ExpectRejected([](Parts& p) { p.model->tensors[0]->shape[1]->value = int64_t{1} << 50; }, "outside 0..2^40");
  ExpectRejected([](Parts& p) { p.model->tensors[0]->shape[1]->value = -3; }, "dim 1 is -3");
  ExpectRejected([](Parts& p) { p.model->symbols[0]->min = 9; }, "range 9..8");
  ExpectRejected([](Parts& p) { p.model->symbols[0]->max = int64_t{1} << 45; }, "range 1..");
  ExpectRejected(
      [](Parts& p) {
        // A weight whose element count overflows.
        auto& w = p.model->tensors[1];
        w->shape.clear();
        for (int i = 0; i < 4; ++i) {
          auto d = std::make_unique<fb::DimT>();
          d->value = int64_t{1} << 39;
          w->shape.push_back(std::move(d));
        }
      },
      "overflows");
}

TEST(LoaderTest, BuffersMustMatchTheirTensorsAndStayInTheFile) {
  ExpectRejected([](Parts& p) { p.model->buffers[0]->size = 12; }, "holds 12 bytes but f32[4] needs 16");
  ExpectRejected([](Parts& p) { p.model->buffers[0]->offset = 8; }, "not a multiple of 64");
  ExpectRejected([](Parts& p) { p.model->buffers[0]->offset = 1 << 20; }, "run past the end");
  ExpectRejected([](Parts& p) { p.model->buffers[0]->size = ~uint64_t{0}; }, "run past the end");
  ExpectRejected([](Parts& p) { p.data.resize(4); }, "run past the end");
}

TEST(LoaderTest, UnknownOpsArityAndAttributes) {
  ExpectRejected([](Parts& p) { p.model->subgraphs[0]->operators[0]->type = "FancyOp"; },
                 "op type 'FancyOp' is not supported");
  ExpectRejected([](Parts& p) { p.model->subgraphs[0]->operators[1]->inputs.push_back(0); }, "has 2 inputs");
  ExpectRejected(
      [](Parts& p) {
        auto a = std::make_unique<fb::AttributeT>();
        a->name = "bogus";
        p.model->subgraphs[0]->operators[1]->attributes.push_back(std::move(a));
      },
      "unknown attribute 'bogus' for Relu");
}

// The FlatBuffers verifier checks a vector's length field for 4-byte alignment
// only; an int64 vector moved to an odd multiple of 4 passed it and was read
// with misaligned 8-byte loads (found by the model_loader fuzzer under UBSan).
// The file here is made that way by pointing the attribute's `ints` field 4
// bytes further on: the vector's length is then read from perm[0]'s low half
// (1), and its one element sits 4 bytes past an 8-byte boundary.
TEST(LoaderTest, MisalignedEightByteVectorsAreRefused) {
  ModelBuilder b;
  b.AddInput("x", DType::kF32, {2, 3});
  b.AddOp("Transpose", {"x"}, {"y"}, {{"perm", AttrValue(std::vector<int64_t>{1, 0})}});
  b.AddOutput("y");
  std::vector<uint8_t> bytes = b.Finish().value();
  ASSERT_TRUE(Load(bytes).ok());

  const fb::Model* m = fb::GetSizePrefixedModel(bytes.data());
  const fb::Attribute* perm = m->subgraphs()->Get(0)->operators()->Get(0)->attributes()->Get(0);
  ASSERT_EQ(perm->name()->str(), "perm");
  const uint32_t vector_at = static_cast<uint32_t>(reinterpret_cast<const uint8_t*>(perm->ints()) - bytes.data());
  ASSERT_EQ((vector_at + 4) % 8, 0u) << "the builder aligns int64 elements";
  uint32_t fb_size;
  std::memcpy(&fb_size, bytes.data(), 4);
  // The attribute table's slots (its fields follow its start) whose uoffset
  // leads to the vector.
  const uint32_t table_at = static_cast<uint32_t>(reinterpret_cast<const uint8_t*>(perm) - bytes.data());
  std::vector<uint32_t> fields;
  for (uint32_t at = table_at + 4; at < table_at + 32 && at + 4 <= fb_size + 4; at += 4) {
    uint32_t v;
    std::memcpy(&v, bytes.data() + at, 4);
    if (at + v == vector_at) fields.push_back(at);
  }
  ASSERT_EQ(fields.size(), 1u);
  uint32_t v;
  std::memcpy(&v, bytes.data() + fields[0], 4);
  v += 4;
  std::memcpy(bytes.data() + fields[0], &v, 4);

  absl::Status s = Load(bytes);
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.message()), HasSubstr("attribute 'perm' has a vector whose 8-byte elements are not aligned"));
}

TEST(LoaderTest, DataflowMustBeOrderedAndSingleAssignment) {
  ExpectRejected([](Parts& p) { std::swap(p.model->subgraphs[0]->operators[0], p.model->subgraphs[0]->operators[1]); },
                 "before it is defined");
  ExpectRejected([](Parts& p) { p.model->subgraphs[0]->operators[1]->outputs[0] = 2; },  // 's' again
                 "defined more than once");
  ExpectRejected([](Parts& p) { p.model->subgraphs[0]->operators[0]->outputs[0] = 1; },  // the weight
                 "writes weight");
}

TEST(LoaderTest, MainInputsNeedShapes) {
  ExpectRejected([](Parts& p) { p.model->tensors[0]->has_shape = false; }, "needs a dtype and a declared shape");
  ExpectRejected([](Parts& p) { p.model->subgraphs.clear(); }, "has no subgraphs");
}

TEST(LoaderTest, StaticShapeErrorsAreFoundAtLoad) {
  ModelBuilder b;
  b.AddInput("x", DType::kF32, {2, 3});
  b.AddWeight("w", DType::kF32, {4}, std::vector<float>{1, 2, 3, 4});
  b.AddOp("Add", {"x", "w"}, {"y"});
  b.AddOutput("y");
  absl::Status s = Load(b.Finish().value());
  EXPECT_THAT(std::string(s.message()), HasSubstr("shape inference failed"));
}

// Subgraph references: range, reuse, recursion, depth, unused bodies.
std::vector<uint8_t> NestedIfs(int depth) {
  ModelBuilder b;
  b.AddInput("c", DType::kBool, {});
  b.AddInput("x", DType::kF32, {2});
  std::string cur_out = "y0";
  std::vector<int> subs;
  int parent = 0;
  for (int d = 0; d < depth; ++d) {
    const int then_sg = b.AddSubgraph(absl::StrCat("then", d));
    const int else_sg = b.AddSubgraph(absl::StrCat("else", d));
    b.SetSubgraph(else_sg);
    b.AddOp("Identity", {"x"}, {absl::StrCat("e", d)});
    b.AddOutput(absl::StrCat("e", d));
    b.SetSubgraph(parent);
    b.AddOp("If", {"c"}, {absl::StrCat("y", d)},
            {{"then_branch", SubgraphRef{then_sg}}, {"else_branch", SubgraphRef{else_sg}}});
    b.AddOutput(absl::StrCat("y", d));
    parent = then_sg;
  }
  b.SetSubgraph(parent);
  b.AddOp("Identity", {"x"}, {"leaf"});
  b.AddOutput("leaf");
  return b.Finish().value();
}

TEST(LoaderTest, NestingIsBounded) {
  EXPECT_TRUE(Load(NestedIfs(3)).ok()) << Load(NestedIfs(3));
  EXPECT_THAT(std::string(Load(NestedIfs(kMaxSubgraphDepth + 2)).message()), HasSubstr("nest deeper"));
}

TEST(LoaderTest, SubgraphReferencesAreChecked) {
  const std::vector<uint8_t> good = NestedIfs(1);
  auto edit = [&](const std::function<void(Parts&)>& f) {
    Parts p = Split(good);
    f(p);
    return Load(Join(p));
  };
  auto attr = [](Parts& p) -> fb::AttributeT& { return *p.model->subgraphs[0]->operators[0]->attributes[0]; };
  EXPECT_THAT(std::string(edit([&](Parts& p) { attr(p).subgraph = 0; }).message()), HasSubstr("not a body subgraph"));
  EXPECT_THAT(std::string(edit([&](Parts& p) { attr(p).subgraph = 40; }).message()), HasSubstr("not a body subgraph"));
  EXPECT_THAT(std::string(edit([&](Parts& p) {
                p.model->subgraphs[0]->operators[0]->attributes[1]->subgraph = attr(p).subgraph;
              }).message()),
              HasSubstr("more than one op"));
  EXPECT_THAT(std::string(edit([&](Parts& p) { attr(p).type = fb::AttrType::INT; }).message()),
              HasSubstr("must be subgraph"));
  EXPECT_THAT(std::string(edit([&](Parts& p) { p.model->subgraphs[0]->operators[0]->attributes.pop_back(); })
                              .message()),
              HasSubstr("required attribute"));
  EXPECT_THAT(std::string(edit([&](Parts& p) {
                auto extra = std::make_unique<fb::SubgraphT>();
                extra->name = "orphan";
                p.model->subgraphs.push_back(std::move(extra));
              }).message()),
              HasSubstr("not used by any op"));
}

TEST(LoaderTest, BodiesMayReadOuterScopeButNotLaterValues) {
  // The else branch reads 'late', defined after the If in main.
  ModelBuilder b;
  b.AddInput("c", DType::kBool, {});
  b.AddInput("x", DType::kF32, {2});
  const int t = b.AddSubgraph("then");
  b.AddOp("Identity", {"x"}, {"a"});
  b.AddOutput("a");
  const int e = b.AddSubgraph("else");
  b.AddOp("Identity", {"late"}, {"bb"});
  b.AddOutput("bb");
  b.SetSubgraph(0);
  b.AddOp("If", {"c"}, {"y"}, {{"then_branch", SubgraphRef{t}}, {"else_branch", SubgraphRef{e}}});
  b.AddOp("Identity", {"x"}, {"late"});
  b.AddOutput("y");
  EXPECT_THAT(std::string(Load(b.Finish().value()).message()), HasSubstr("before it is defined"));
}

}  // namespace
}  // namespace grove
