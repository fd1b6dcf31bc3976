// String tensors through the C ABI: GROVE_DTYPE_STRING and grove_string_t,
// string inputs through grove_session_run (16 bytes per element in the
// byte_size checks), outputs whose grove_string_t point at bytes the session
// keeps until its next run (not at the caller's input), caller buffers of
// grove_string_t, and a sequence of string tensors through
// grove_session_run_values.
#include <cstring>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "grove/grove.h"
#include "grove/grove_c.h"
#include "gtest/gtest.h"
#include "test/string_test_models.h"
#include "test/api/c_api_test_util.h"

namespace {

using grove::testing::Strs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

using grove::c_test::Ok;

// The message of a failed call (and the call's status released).
std::string Failure(grove_status_t* status) {
  EXPECT_NE(grove_status_code(status), GROVE_STATUS_OK);
  std::string message = grove_status_message(status);
  grove_status_release(status);
  return message;
}

// grove_string_t elements viewing `values` (which must outlive them).
std::vector<grove_string_t> Refs(const Strs& values) {
  std::vector<grove_string_t> refs;
  for (const std::string& v : values) refs.push_back({v.empty() ? nullptr : v.data(), v.size()});
  return refs;
}

grove_tensor_t StringTensor(std::vector<grove_string_t>& refs) {
  grove_tensor_t t{};
  t.dtype = GROVE_DTYPE_STRING;
  t.rank = 1;
  t.dims[0] = static_cast<int64_t>(refs.size());
  t.data = refs.data();
  t.byte_size = refs.size() * sizeof(grove_string_t);
  return t;
}

grove_tensor_t I64Tensor(std::vector<int64_t>& v) {
  grove_tensor_t t{};
  t.dtype = GROVE_DTYPE_I64;
  t.rank = 1;
  t.dims[0] = static_cast<int64_t>(v.size());
  t.data = v.data();
  t.byte_size = v.size() * sizeof(int64_t);
  return t;
}

Strs Texts(const grove_tensor_t& t) {
  EXPECT_EQ(t.dtype, GROVE_DTYPE_STRING);
  int64_t n = 1;
  for (int32_t d = 0; d < t.rank; ++d) n *= t.dims[d];
  EXPECT_EQ(t.byte_size, static_cast<size_t>(n) * sizeof(grove_string_t));
  const auto* p = static_cast<const grove_string_t*>(t.data);
  Strs out;
  for (int64_t i = 0; i < n; ++i) out.emplace_back(p[i].data == nullptr ? "" : std::string(p[i].data, p[i].size));
  return out;
}

class CApiStringTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::vector<uint8_t>> bytes = grove::testing::BuildStringLookup();
    ASSERT_TRUE(bytes.ok()) << bytes.status();
    ASSERT_TRUE(Ok(grove_model_load_buffer(bytes->data(), bytes->size(), &model_)));
    grove_session_options_t options;
    grove_session_options_initialize(&options);
    options.device = GROVE_DEVICE_CPU;
    ASSERT_TRUE(Ok(grove_session_create(model_, &options, &session_)));
  }
  void TearDown() override {
    grove_session_release(session_);
    grove_model_release(model_);
  }
  grove_model_t* model_ = nullptr;
  grove_session_t* session_ = nullptr;
};

TEST(CApiStringBasics, DTypeSizeAndName) {
  EXPECT_EQ(grove_dtype_size(GROVE_DTYPE_STRING), sizeof(grove_string_t));
  EXPECT_EQ(sizeof(grove_string_t), 16u);
  EXPECT_EQ(grove_dtype_size(GROVE_DTYPE_STRING), grove::DTypeSize(grove::DType::kString));
  EXPECT_STREQ(grove_dtype_name(GROVE_DTYPE_STRING), "string");
  EXPECT_EQ(grove_dtype_size(GROVE_DTYPE_STRING + 1), 0u);
  EXPECT_STREQ(grove_dtype_name(GROVE_DTYPE_STRING + 1), "unknown");
}

TEST_F(CApiStringTest, InfoReportsStringTensors) {
  grove_tensor_info_t info;
  ASSERT_TRUE(Ok(grove_model_input_info(model_, 0, &info)));
  EXPECT_STREQ(info.name, "words");
  EXPECT_EQ(info.dtype, GROVE_DTYPE_STRING);
  ASSERT_TRUE(Ok(grove_model_output_info(model_, 3, &info)));
  EXPECT_EQ(info.dtype, GROVE_DTYPE_STRING);
  EXPECT_EQ(info.rank, 2);
}

// Outputs the session owns: valid after the caller's input bytes are
// overwritten, until the next run.
TEST_F(CApiStringTest, RunWithSessionOwnedOutputs) {
  Strs words = {"a", "日本", "", "ü🙂"};
  std::vector<int64_t> ids = {2, 0, -3};
  const grove::testing::LookupResult want = grove::testing::LookupReference(words, ids);
  std::vector<grove_string_t> refs = Refs(words);
  grove_tensor_t inputs[2] = {StringTensor(refs), I64Tensor(ids)};
  grove_tensor_t outputs[4] = {};
  ASSERT_TRUE(Ok(grove_session_run(session_, inputs, 2, outputs, 4)));
  for (std::string& w : words) std::fill(w.begin(), w.end(), '#');
  refs.assign(refs.size(), grove_string_t{"gone", 4});
  EXPECT_EQ(outputs[0].rank, 1);
  EXPECT_EQ(Texts(outputs[0]), want.picked);
  EXPECT_EQ(Texts(outputs[1]), want.joined);
  ASSERT_EQ(outputs[2].dtype, GROVE_DTYPE_BOOL);
  const auto* hit = static_cast<const uint8_t*>(outputs[2].data);
  EXPECT_EQ(std::vector<uint8_t>(hit, hit + outputs[2].byte_size), want.hit);
  EXPECT_EQ(outputs[3].rank, 2);
  EXPECT_EQ(outputs[3].dims[0], 7);
  EXPECT_EQ(outputs[3].dims[1], 1);
  EXPECT_EQ(Texts(outputs[3]), want.column);
  EXPECT_THAT(Texts(outputs[3]), ElementsAre("a", "★", "", "ü🙂", "★", "<unk>", "héllo"));
}

TEST_F(CApiStringTest, RunIntoCallerBuffersOfGroveStrings) {
  const Strs words = {"x"};
  std::vector<int64_t> ids = {1, 2};
  std::vector<grove_string_t> refs = Refs(words);
  grove_tensor_t inputs[2] = {StringTensor(refs), I64Tensor(ids)};
  std::vector<grove_string_t> picked(2), joined(3), column(3);
  std::vector<uint8_t> hit(3);
  grove_tensor_t outputs[4] = {StringTensor(picked), StringTensor(joined), {}, StringTensor(column)};
  outputs[2].dtype = GROVE_DTYPE_BOOL;
  outputs[2].rank = 1;
  outputs[2].dims[0] = 3;
  outputs[2].data = hit.data();
  outputs[2].byte_size = hit.size();
  outputs[3].rank = 2;
  outputs[3].dims[1] = 1;
  ASSERT_TRUE(Ok(grove_session_run(session_, inputs, 2, outputs, 4)));
  const grove::testing::LookupResult want = grove::testing::LookupReference(words, ids);
  EXPECT_EQ(Texts(outputs[0]), want.picked);
  EXPECT_EQ(Texts(outputs[1]), want.joined);
  EXPECT_EQ(hit, want.hit);
  EXPECT_EQ(Texts(outputs[3]), want.column);
  // The caller's buffers point at the session's bytes, not at the input's.
  for (const grove_string_t& s : joined) {
    if (s.size > 0) EXPECT_NE(s.data, words[0].data());
  }
}

TEST_F(CApiStringTest, ByteSizeCountsSixteenBytesPerString) {
  const Strs words = {"a", "b"};
  std::vector<int64_t> ids = {0};
  std::vector<grove_string_t> refs = Refs(words);
  grove_tensor_t inputs[2] = {StringTensor(refs), I64Tensor(ids)};
  inputs[0].byte_size = 2 * 8;  // as if each element were a pointer
  grove_tensor_t outputs[4] = {};
  EXPECT_THAT(Failure(grove_session_run(session_, inputs, 2, outputs, 4)),
              HasSubstr("string[2] needs 32 bytes but byte_size is 16"));
  // A string with bytes but no address.
  inputs[0].byte_size = 32;
  refs[1] = grove_string_t{nullptr, 3};
  EXPECT_THAT(Failure(grove_session_run(session_, inputs, 2, outputs, 4)), HasSubstr("element 1"));
  // Numbers where strings are declared.
  std::vector<int64_t> numbers = {1, 2};
  inputs[0] = I64Tensor(numbers);
  EXPECT_THAT(Failure(grove_session_run(session_, inputs, 2, outputs, 4)), HasSubstr("string"));
  // The session still runs.
  refs = Refs(words);
  inputs[0] = StringTensor(refs);
  ASSERT_TRUE(Ok(grove_session_run(session_, inputs, 2, outputs, 4)));
  EXPECT_THAT(Texts(outputs[1]), ElementsAre("a", "b", "<unk>"));
}

TEST(CApiStringValues, SequenceOfStringTensors) {
  absl::StatusOr<std::vector<uint8_t>> bytes = grove::testing::BuildStringSequence();
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  grove_model_t* model = nullptr;
  ASSERT_TRUE(Ok(grove_model_load_buffer(bytes->data(), bytes->size(), &model)));
  grove_session_options_t options;
  grove_session_options_initialize(&options);
  options.device = GROVE_DEVICE_CPU;
  grove_session_t* session = nullptr;
  ASSERT_TRUE(Ok(grove_session_create(model, &options, &session)));

  Strs a = {"α", "β"}, b = {"", "🙂", "γ"}, words = {"w0", "ш"};
  std::vector<grove_string_t> ra = Refs(a), rb = Refs(b), rw = Refs(words);
  grove_tensor_t items[2] = {StringTensor(ra), StringTensor(rb)};
  grove_tensor_t word_tensor = StringTensor(rw);
  grove_value_t inputs[2] = {{GROVE_VALUE_SEQUENCE, GROVE_DTYPE_STRING, 1, 2, items},
                             {GROVE_VALUE_TENSOR, GROVE_DTYPE_STRING, 1, 1, &word_tensor}};
  grove_value_t outputs[4] = {};
  ASSERT_TRUE(Ok(grove_session_run_values(session, inputs, 2, outputs, 4)));
  // The inputs were copied: the caller may reuse its bytes at once.
  for (Strs* v : {&a, &b, &words}) {
    for (std::string& s : *v) std::fill(s.begin(), s.end(), '#');
  }
  ASSERT_EQ(outputs[0].n_tensors, 1u);
  EXPECT_THAT(Texts(outputs[0].tensors[0]), ElementsAre("w0", "ш", "α", "β", "", "🙂", "γ"));
  EXPECT_THAT(Texts(outputs[1].tensors[0]), ElementsAre("", "🙂", "γ"));
  EXPECT_EQ(outputs[2].kind, GROVE_VALUE_SEQUENCE);
  EXPECT_EQ(outputs[2].dtype, GROVE_DTYPE_STRING);
  ASSERT_EQ(outputs[2].n_tensors, 3u);
  EXPECT_THAT(Texts(outputs[2].tensors[0]), ElementsAre("w0", "ш"));
  EXPECT_THAT(Texts(outputs[2].tensors[1]), ElementsAre("α", "β"));
  ASSERT_EQ(outputs[3].n_tensors, 7u);
  EXPECT_EQ(outputs[3].tensors[5].rank, 0);
  EXPECT_THAT(Texts(outputs[3].tensors[5]), ElementsAre("🙂"));
  grove_session_release(session);
  grove_model_release(model);
}

}  // namespace
