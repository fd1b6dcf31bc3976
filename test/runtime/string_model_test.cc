// String tensors through the public API: a model with a string input and
// string weights (Gather, Concat, Reshape, Where, Equal) run twice in one
// session, Loops carrying strings (a growing tensor, a list, strings taken
// out of lists), an If returning strings, a Scan with a string state,
// sequences and optionals of strings through RunValues, RunInto with caller
// buffers of StringRefs, and Tensor::CopyOf owning its bytes. Outputs
// are checked against the naive references of test/string_test_models.h,
// and the strings a run returns must stay readable until the next run, even
// after the caller's inputs are gone.
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "grove/grove.h"
#include "gtest/gtest.h"
#include "test/model_test_util.h"
#include "test/op_test_util.h"
#include "test/string_test_models.h"

namespace grove {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;
using testing::CpuSession;
using testing::LoadOrDie;
using testing::MakeStrings;
using testing::ScalarI64;
using testing::Strings;
using testing::Strs;
using testing::StringsOf;

Tensor I64s(const std::vector<int64_t>& v) {
  Tensor t = Tensor::Create(DType::kI64, {static_cast<int64_t>(v.size())}).value();
  if (!v.empty()) std::memcpy(t.data(), v.data(), v.size() * sizeof(int64_t));
  return t;
}

Tensor Bool(bool v) {
  Tensor t = Tensor::Create(DType::kBool, {}).value();
  *t.as<uint8_t>() = v ? 1 : 0;
  return t;
}

std::vector<uint8_t> Bytes(const TensorView& v) {
  const uint8_t* p = v.as<const uint8_t>();
  return std::vector<uint8_t>(p, p + v.num_elements());
}

void ExpectLookup(const std::vector<TensorView>& outs, const testing::LookupResult& want) {
  ASSERT_EQ(outs.size(), 4u);
  const int64_t n = static_cast<int64_t>(want.joined.size());
  EXPECT_EQ(outs[0].dtype, DType::kString);
  EXPECT_EQ(outs[0].shape, (std::vector<int64_t>{static_cast<int64_t>(want.picked.size())}));
  EXPECT_EQ(StringsOf(outs[0]), want.picked);
  EXPECT_EQ(outs[1].shape, (std::vector<int64_t>{n}));
  EXPECT_EQ(StringsOf(outs[1]), want.joined);
  EXPECT_EQ(outs[2].dtype, DType::kBool);
  EXPECT_EQ(Bytes(outs[2]), want.hit);
  EXPECT_EQ(outs[3].shape, (std::vector<int64_t>{n, 1}));
  EXPECT_EQ(StringsOf(outs[3]), want.column);
}

TEST(StringModelTest, ModelInfoReportsStrings) {
  std::shared_ptr<const Model> model = LoadOrDie(testing::BuildStringLookup());
  ASSERT_EQ(model->inputs().size(), 2u);
  EXPECT_EQ(model->inputs()[0].dtype, DType::kString);
  EXPECT_EQ(model->outputs()[0].dtype, DType::kString);
  EXPECT_EQ(model->outputs()[2].dtype, DType::kBool);
  EXPECT_EQ(model->outputs()[3].dtype, DType::kString);
}

// The first run's outputs are read before the second run (they are the
// session's until then), and copies of them still read right after it; the
// caller's input tensors are gone before any output is read.
TEST(StringModelTest, LookupRunsTwiceInOneSession) {
  std::unique_ptr<Session> s = CpuSession(LoadOrDie(testing::BuildStringLookup()));
  const Strs words1 = {"a", "日本", "", "ü🙂"};
  const std::vector<int64_t> ids1 = {2, 0, -3, 3};
  std::vector<TensorView> first;
  {
    Tensor words = MakeStrings({4}, words1);
    Tensor ids = I64s(ids1);
    absl::StatusOr<std::vector<TensorView>> outs = s->Run({words.view(), ids.view()});
    ASSERT_TRUE(outs.ok()) << outs.status();
    first = *outs;
    // Scribble over the caller's bytes before they are freed: outputs must
    // not have kept pointing at them.
    StringRef* refs = words.as<StringRef>();
    for (int64_t i = 0; i < 4; ++i) {
      if (refs[i].size > 0) std::memset(const_cast<char*>(refs[i].data), '#', refs[i].size);
    }
  }
  const testing::LookupResult want1 = testing::LookupReference(words1, ids1);
  EXPECT_THAT(want1.column, ElementsAre("a", "★", "", "ü🙂", "★", "<unk>", "héllo", ""));
  ExpectLookup(first, want1);
  std::vector<Tensor> kept;
  for (const TensorView& v : first) kept.push_back(Tensor::CopyOf(v).value());

  const Strs words2 = {"日本", "naïve"};
  const std::vector<int64_t> ids2 = {1};
  Tensor words = MakeStrings({2}, words2);
  Tensor ids = I64s(ids2);
  absl::StatusOr<std::vector<TensorView>> second = s->Run({words.view(), ids.view()});
  ASSERT_TRUE(second.ok()) << second.status();
  ExpectLookup(*second, testing::LookupReference(words2, ids2));
  std::vector<TensorView> kept_views;
  for (const Tensor& t : kept) kept_views.push_back(t.view());
  ExpectLookup(kept_views, want1);
}

TEST(StringModelTest, LookupRefusesABadStringInput) {
  std::unique_ptr<Session> s = CpuSession(LoadOrDie(testing::BuildStringLookup()));
  std::vector<StringRef> refs = {StringRef("ok"), StringRef()};
  refs[1].size = 3;  // three bytes at no address
  Tensor ids = I64s({0});
  absl::StatusOr<std::vector<TensorView>> outs =
      s->Run({TensorView(DType::kString, {2}, refs.data()), ids.view()});
  ASSERT_FALSE(outs.ok());
  EXPECT_THAT(outs.status().message(), HasSubstr("element 1"));
  // Numbers where strings are declared: the dtype is named.
  Tensor numbers = I64s({1, 2});
  outs = s->Run({numbers.view(), ids.view()});
  ASSERT_FALSE(outs.ok());
  EXPECT_THAT(outs.status().message(), HasSubstr("string"));
  // The session stays usable.
  Tensor words = MakeStrings({1}, {"日本"});
  outs = s->Run({words.view(), ids.view()});
  ASSERT_TRUE(outs.ok()) << outs.status();
  ExpectLookup(*outs, testing::LookupReference({"日本"}, {0}));
}

// The caller's buffers receive StringRefs that point at the session's copies
// of the strings, valid until the next run.
TEST(StringModelTest, RunIntoCallerBuffersOfStringRefs) {
  std::unique_ptr<Session> s = CpuSession(LoadOrDie(testing::BuildStringLookup()));
  const Strs words1 = {"x", "日本"};
  const std::vector<int64_t> ids1 = {1, 2, 3};
  const testing::LookupResult want = testing::LookupReference(words1, ids1);
  std::vector<StringRef> picked(3), joined(5), column(5);
  std::vector<uint8_t> hit(5, 7);
  const std::vector<TensorView> into = {TensorView(DType::kString, {3}, picked.data()),
                                        TensorView(DType::kString, {5}, joined.data()),
                                        TensorView(DType::kBool, {5}, hit.data()),
                                        TensorView(DType::kString, {5, 1}, column.data())};
  {
    Tensor words = MakeStrings({2}, words1);
    Tensor ids = I64s(ids1);
    ASSERT_TRUE(s->RunInto({words.view(), ids.view()}, into).ok());
  }
  ExpectLookup(into, want);
  // A buffer of the wrong shape is an error naming the output.
  Tensor words = MakeStrings({2}, words1);
  Tensor ids = I64s(ids1);
  std::vector<StringRef> short_buffer(2);
  std::vector<TensorView> bad = into;
  bad[1] = TensorView(DType::kString, {2}, short_buffer.data());
  absl::Status st = s->RunInto({words.view(), ids.view()}, bad);
  ASSERT_FALSE(st.ok());
  EXPECT_THAT(st.message(), HasSubstr("joined"));
}

TEST(StringModelTest, LoopCarriesAGrowingStringTensorAndAList) {
  std::shared_ptr<const Model> model = LoadOrDie(testing::BuildStringLoop());
  std::unique_ptr<Session> s = CpuSession(model);
  const Strs seed_values = {"начало", ""};
  for (int64_t m : {3, 1, 10, 3}) {
    SCOPED_TRACE(m);
    Tensor seed = MakeStrings({2}, seed_values);
    absl::StatusOr<std::vector<TensorView>> outs = s->Run({ScalarI64(m).view(), seed.view()});
    ASSERT_TRUE(outs.ok()) << outs.status();
    ASSERT_EQ(outs->size(), 5u);
    const Strs digits(testing::LoopDigits().begin(), testing::LoopDigits().begin() + m);
    Strs grown = seed_values;
    grown.insert(grown.end(), digits.begin(), digits.end());
    EXPECT_EQ((*outs)[0].shape, (std::vector<int64_t>{2 + m}));
    EXPECT_EQ(StringsOf((*outs)[0]), grown);
    EXPECT_EQ((*outs)[1].shape, (std::vector<int64_t>{m}));
    EXPECT_EQ(StringsOf((*outs)[1]), digits);
    EXPECT_EQ((*outs)[2].shape, (std::vector<int64_t>{m, 1}));
    EXPECT_EQ(StringsOf((*outs)[2]), digits);
    EXPECT_EQ(StringsOf((*outs)[3]), Strs{m >= 2 ? digits[m - 2] : "—"});
    EXPECT_EQ(StringsOf((*outs)[4]), Strs{digits[m - 1]});
  }
}

TEST(StringModelTest, IfReturnsStringsFromEitherBranch) {
  std::unique_ptr<Session> s = CpuSession(LoadOrDie(testing::BuildStringIf()));
  const Strs words = {"début", "", "中"};
  for (bool flag : {true, false, true}) {
    SCOPED_TRACE(flag);
    Tensor w = MakeStrings({3}, words);
    absl::StatusOr<std::vector<TensorView>> outs = s->Run({Bool(flag).view(), w.view()});
    ASSERT_TRUE(outs.ok()) << outs.status();
    ASSERT_EQ(outs->size(), 1u);
    EXPECT_EQ((*outs)[0].dtype, DType::kString);
    EXPECT_EQ(StringsOf((*outs)[0]), testing::IfReference(flag, words));
  }
}

TEST(StringModelTest, ScanCarriesAStringState) {
  std::unique_ptr<Session> s = CpuSession(LoadOrDie(testing::BuildStringScan()));
  for (const Strs& xs : {Strs{"α", "", "🙂", "ζ"}, Strs{"one"}}) {
    SCOPED_TRACE(xs.size());
    const int64_t t = static_cast<int64_t>(xs.size());
    Tensor s0 = MakeStrings({1}, {"start"});
    Tensor x = MakeStrings({t}, xs);
    absl::StatusOr<std::vector<TensorView>> outs = s->Run({s0.view(), x.view()});
    ASSERT_TRUE(outs.ok()) << outs.status();
    ASSERT_EQ(outs->size(), 2u);
    EXPECT_EQ(StringsOf((*outs)[0]), Strs{xs.back()});
    EXPECT_EQ((*outs)[1].shape, (std::vector<int64_t>{t, 2}));
    EXPECT_EQ(StringsOf((*outs)[1]), testing::ScanPairsReference("start", xs));
  }
}

// RunValues returns values that own their strings: they outlive the inputs
// and the next run.
TEST(StringModelTest, SequencesOfStringsThroughRunValues) {
  std::unique_ptr<Session> s = CpuSession(LoadOrDie(testing::BuildStringSequence()));
  const Strs a = {"α", "β"}, b = {"", "🙂", "γ"}, words = {"w0", "ш"};
  std::vector<Value> first;
  {
    Value parts = Value::Sequence(DType::kString, {MakeStrings({2}, a), MakeStrings({3}, b)});
    absl::StatusOr<std::vector<Value>> outs = s->RunValues({parts, Value(MakeStrings({2}, words))});
    ASSERT_TRUE(outs.ok()) << outs.status();
    first = *std::move(outs);
  }
  ASSERT_EQ(first.size(), 4u);
  const Strs cat = {"w0", "ш", "α", "β", "", "🙂", "γ"};
  EXPECT_EQ(Strings(first[0].tensor()), cat);
  EXPECT_EQ(Strings(first[1].tensor()), b);
  ASSERT_EQ(first[2].kind(), ValueKind::kSequence);
  EXPECT_EQ(first[2].dtype(), DType::kString);
  ASSERT_EQ(first[2].items().size(), 3u);
  EXPECT_EQ(Strings(first[2].items()[0]), words);
  EXPECT_EQ(Strings(first[2].items()[2]), b);
  ASSERT_EQ(first[3].items().size(), cat.size());

  // Another run, with an empty list: the first run's values still read.
  absl::StatusOr<std::vector<Value>> second =
      s->RunValues({Value::Sequence(DType::kString), Value(MakeStrings({1}, {"solo"}))});
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_THAT(Strings((*second)[0].tensor()), ElementsAre("solo"));
  EXPECT_THAT(Strings((*second)[1].tensor()), ElementsAre("solo"));
  ASSERT_EQ((*second)[3].items().size(), 1u);
  EXPECT_EQ((*second)[3].items()[0].shape(), std::vector<int64_t>{});

  EXPECT_EQ(Strings(first[0].tensor()), cat);
  for (size_t i = 0; i < cat.size(); ++i) {
    EXPECT_EQ(first[3].items()[i].shape(), std::vector<int64_t>{});
    EXPECT_THAT(Strings(first[3].items()[i]), ElementsAre(cat[i]));
  }
  EXPECT_EQ(Strings(first[2].items()[1]), a);
}

// An optional string tensor given by the caller and one made in the model
// (Optional), each unwrapped: the strings read after the caller's are gone.
TEST(StringModelTest, OptionalStringTensors) {
  ModelBuilder b;
  b.AddSymbol("n", 1, 8);
  b.AddInput("maybe", ValueKind::kOptionalTensor, DType::kString);
  b.AddInput("words", DType::kString, {"n"});
  b.AddOp("OptionalHasElement", {"maybe"}, {"has"});
  b.AddOp("OptionalGetElement", {"maybe"}, {"given"});
  b.AddOp("Optional", {"words"}, {"wrapped"});
  b.AddOp("OptionalGetElement", {"wrapped"}, {"unwrapped"});
  for (const char* out : {"has", "given", "unwrapped"}) b.AddOutput(out);
  std::unique_ptr<Session> s = CpuSession(LoadOrDie(b.Finish()));
  std::vector<Value> outs;
  {
    Value maybe = Value::Some(Value(MakeStrings({2}, {"là", ""})));
    absl::StatusOr<std::vector<Value>> got = s->RunValues({maybe, Value(MakeStrings({1}, {"ß"}))});
    ASSERT_TRUE(got.ok()) << got.status();
    outs = *std::move(got);
  }
  ASSERT_EQ(outs.size(), 3u);
  EXPECT_EQ(*outs[0].tensor().as<uint8_t>(), 1);
  EXPECT_THAT(Strings(outs[1].tensor()), ElementsAre("là", ""));
  EXPECT_THAT(Strings(outs[2].tensor()), ElementsAre("ß"));
  absl::StatusOr<std::vector<Value>> absent = s->RunValues(
      {Value::None(ValueKind::kOptionalTensor, DType::kString), Value(MakeStrings({1}, {"x"}))});
  ASSERT_FALSE(absent.ok());
  EXPECT_THAT(absent.status().message(), HasSubstr("absent"));
}

// Tensor::CopyOf of a string view copies the bytes: the copy reads the same
// after the source's bytes are overwritten and freed.
TEST(StringModelTest, CopyOfOwnsTheStringsBytes) {
  auto text = std::make_unique<std::string>("héllo wörld");
  auto other = std::make_unique<std::string>("日本語");
  std::vector<StringRef> refs = {StringRef(*text), StringRef(), StringRef(*other),
                                 StringRef(absl::string_view(text->data() + 7, 6))};  // "wörld"
  absl::StatusOr<Tensor> copy = Tensor::CopyOf(TensorView(DType::kString, {2, 2}, refs.data()));
  ASSERT_TRUE(copy.ok()) << copy.status();
  const StringRef* c = copy->as<StringRef>();
  for (int i = 0; i < 4; ++i) {
    if (refs[i].size > 0) EXPECT_NE(c[i].data, refs[i].data);
  }
  std::fill(text->begin(), text->end(), 'x');
  text.reset();
  other.reset();
  refs.assign(4, StringRef("gone"));
  EXPECT_EQ(copy->shape(), (std::vector<int64_t>{2, 2}));
  EXPECT_THAT(Strings(*copy), ElementsAre("héllo wörld", "", "日本語", "wörld"));
  // A copy of the copy is independent of it too.
  Tensor again = Tensor::CopyOf(copy->view()).value();
  copy = Tensor();
  EXPECT_THAT(Strings(again), ElementsAre("héllo wörld", "", "日本語", "wörld"));

  std::vector<StringRef> bad = {StringRef()};
  bad[0].size = 1;
  absl::StatusOr<Tensor> refused = Tensor::CopyOf(TensorView(DType::kString, {1}, bad.data()));
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.status().message(), HasSubstr("element 0"));
}

}  // namespace
}  // namespace grove
