// Tests of the C ABI (grove/grove_c.h): every entry point, its NULL checks and
// messages, and both ways of receiving outputs.
#include "grove/grove_c.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <ostream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "grove/grove.h"
#include "gtest/gtest.h"
#include "lib/backends/cuda/device.h"
#include "lib/c/c_api_internal.h"
#include "lib/runtime/model_impl.h"
#include "test/model_test_util.h"

namespace {

// A status taken out of the ABI, so tests never leak one.
struct Outcome {
  grove_status_code_t code;
  std::string message;
};

Outcome Take(grove_status_t* status) {
  Outcome o{grove_status_code(status), grove_status_message(status)};
  grove_status_release(status);
  return o;
}

::testing::AssertionResult Ok(grove_status_t* status) {
  const Outcome o = Take(status);
  if (o.code == GROVE_STATUS_OK) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << grove_status_code_name(o.code) << ": " << o.message;
}

::testing::AssertionResult Fails(const Outcome& o, grove_status_code_t code, const std::string& substring) {
  if (o.code == code && o.message.find(substring) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "got " << grove_status_code_name(o.code) << ": \"" << o.message
                                       << "\"; expected " << grove_status_code_name(code) << " containing \""
                                       << substring << "\"";
}
::testing::AssertionResult Fails(grove_status_t* status, grove_status_code_t code, const std::string& substring) {
  return Fails(Take(status), code, substring);
}

// One folder per process: ctest runs the tests of this file in parallel
// processes, and one test's model file must not be rewritten under another.
std::string TempDir() {
  const char* dir = std::getenv("GROVE_TEST_TMP");
  std::string base = dir != nullptr ? dir : ::testing::TempDir();
  mkdir(base.c_str(), 0755);
  base += "/c_api_test_" + std::to_string(getpid());
  mkdir(base.c_str(), 0755);
  return base;
}

// x[batch, 4] f32 -> h = x W + b [batch, 3], y = Relu(h); batch in 1..8.
// Outputs in order: y, h.
constexpr float kW[4 * 3] = {1, 0, -1, 0.5f, 2, 0, -1, 1, 1, 0, -0.5f, 2};
constexpr float kB[3] = {0.25f, -1, 0};

std::vector<uint8_t> BuildDenseModel() {
  grove::ModelBuilder b;
  b.AddSymbol("batch", 1, 8);
  b.AddInput("x", grove::DType::kF32, {"batch", 4});
  b.AddWeight("w", grove::DType::kF32, {4, 3}, std::vector<float>(kW, kW + 12));
  b.AddWeight("b", grove::DType::kF32, {3}, std::vector<float>(kB, kB + 3));
  b.AddOp("MatMul", {"x", "w"}, {"xw"});
  b.AddOp("Add", {"xw", "b"}, {"h"});
  b.AddOp("Relu", {"h"}, {"y"});
  b.AddOutput("y");
  b.AddOutput("h");
  absl::StatusOr<std::vector<uint8_t>> bytes = b.Finish();
  EXPECT_TRUE(bytes.ok()) << bytes.status();
  return bytes.ok() ? *bytes : std::vector<uint8_t>();
}

// The reference: h then y for `x` of `batch` rows.
std::vector<float> ExpectedH(const std::vector<float>& x, int batch) {
  std::vector<float> h(batch * 3);
  for (int r = 0; r < batch; ++r) {
    for (int c = 0; c < 3; ++c) {
      float acc = kB[c];
      for (int k = 0; k < 4; ++k) acc += x[r * 4 + k] * kW[k * 3 + c];
      h[r * 3 + c] = acc;
    }
  }
  return h;
}
std::vector<float> ExpectedY(const std::vector<float>& x, int batch) {
  std::vector<float> y = ExpectedH(x, batch);
  for (float& v : y) v = v > 0 ? v : 0;
  return y;
}

std::vector<float> Input(int batch) {
  std::vector<float> x(batch * 4);
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.7f * static_cast<float>(i)) * 2;
  return x;
}

grove_tensor_t F32Tensor(std::vector<int64_t> dims, float* data) {
  grove_tensor_t t{};
  t.dtype = GROVE_DTYPE_F32;
  t.rank = static_cast<int32_t>(dims.size());
  size_t n = 1;
  for (size_t i = 0; i < dims.size(); ++i) {
    t.dims[i] = dims[i];
    n *= static_cast<size_t>(dims[i]);
  }
  t.data = data;
  t.byte_size = n * sizeof(float);
  return t;
}

std::vector<float> Floats(const grove_tensor_t& t) {
  const float* p = static_cast<const float*>(t.data);
  return std::vector<float>(p, p + t.byte_size / sizeof(float));
}

class CApiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    bytes_ = BuildDenseModel();
    ASSERT_FALSE(bytes_.empty());
    path_ = TempDir() + "/c_api_dense.grove";
    std::ofstream(path_, std::ios::binary).write(reinterpret_cast<const char*>(bytes_.data()), bytes_.size());
    ASSERT_TRUE(Ok(grove_model_load_file(path_.c_str(), &model_)));
    ASSERT_TRUE(Ok(grove_session_create(model_, nullptr, &session_)));
  }
  void TearDown() override {
    grove_session_release(session_);
    grove_model_release(model_);
  }

  std::vector<uint8_t> bytes_;
  std::string path_;
  grove_model_t* model_ = nullptr;
  grove_session_t* session_ = nullptr;
};

TEST(CApiBasics, VersionMatchesTheHeaderAndTheCppLibrary) {
  EXPECT_STREQ(grove_version(), absl::StrCat(GROVE_VERSION_MAJOR, ".", GROVE_VERSION_MINOR, ".",
                                             GROVE_VERSION_PATCH).c_str());
  EXPECT_EQ(std::string(grove_version()), std::string(grove::Version()));
}

TEST(CApiBasics, NullStatusIsOk) {
  EXPECT_EQ(grove_status_code(nullptr), GROVE_STATUS_OK);
  EXPECT_STREQ(grove_status_message(nullptr), "");
  grove_status_release(nullptr);
}

TEST(CApiBasics, StatusCodeNames) {
  EXPECT_STREQ(grove_status_code_name(GROVE_STATUS_OK), "OK");
  EXPECT_STREQ(grove_status_code_name(GROVE_STATUS_INVALID_ARGUMENT), "INVALID_ARGUMENT");
  EXPECT_STREQ(grove_status_code_name(GROVE_STATUS_UNAUTHENTICATED), "UNAUTHENTICATED");
  EXPECT_STREQ(grove_status_code_name(static_cast<grove_status_code_t>(77)), "UNKNOWN");
}

TEST(CApiBasics, DTypes) {
  EXPECT_EQ(grove_dtype_size(GROVE_DTYPE_F32), 4u);
  EXPECT_EQ(grove_dtype_size(GROVE_DTYPE_F64), 8u);
  EXPECT_EQ(grove_dtype_size(GROVE_DTYPE_BF16), 2u);
  EXPECT_EQ(grove_dtype_size(GROVE_DTYPE_BOOL), 1u);
  EXPECT_EQ(grove_dtype_size(GROVE_DTYPE_UNKNOWN), 0u);
  EXPECT_EQ(grove_dtype_size(-3), 0u);
  EXPECT_EQ(grove_dtype_size(1000), 0u);
  EXPECT_STREQ(grove_dtype_name(GROVE_DTYPE_I64), "i64");
  EXPECT_STREQ(grove_dtype_name(GROVE_DTYPE_BOOL), "bool");
  EXPECT_STREQ(grove_dtype_name(1000), "unknown");
  for (int d = GROVE_DTYPE_F32; d <= GROVE_DTYPE_BOOL; ++d) {
    EXPECT_EQ(grove_dtype_size(d), grove::DTypeSize(static_cast<grove::DType>(d)));
  }
}

TEST(CApiBasics, ReleaseNullIsANoOp) {
  grove_model_release(nullptr);
  grove_session_release(nullptr);
  grove_status_release(nullptr);
}

TEST(CApiBasics, OptionsDefaults) {
  grove_session_options_t options;
  std::memset(&options, 0x5a, sizeof(options));
  grove_session_options_initialize(&options);
  EXPECT_EQ(options.device, GROVE_DEVICE_AUTO);
  EXPECT_EQ(options.max_cached_plans, grove::SessionOptions().max_cached_plans);
  EXPECT_EQ(options.cuda_device, 0);
  EXPECT_EQ(options.cuda_stream, nullptr);
  EXPECT_EQ(options.strict_device, 0);
  EXPECT_EQ(options.outputs_on_device, 0);
  EXPECT_EQ(options.gemm_math, GROVE_GEMM_MATH_F32);
  EXPECT_EQ(options.run_deadline_ms, 0);
  EXPECT_EQ(options.cancel_token, nullptr);
  EXPECT_EQ(options.max_body_runs, grove::SessionOptions().max_body_runs);
  EXPECT_EQ(options.cuda_graphs, GROVE_GRAPH_MODE_AUTO);
  EXPECT_EQ(options.max_cached_graphs, grove::SessionOptions().max_cached_graphs);
  EXPECT_EQ(options.struct_size, sizeof(options));
  grove_session_options_initialize(nullptr);
}

TEST(CApiModel, LoadFileArguments) {
  grove_model_t* model = nullptr;
  EXPECT_TRUE(Fails(grove_model_load_file(nullptr, &model), GROVE_STATUS_INVALID_ARGUMENT, "grove_model_load_file: path is NULL"));
  EXPECT_TRUE(Fails(grove_model_load_file("x.grove", nullptr), GROVE_STATUS_INVALID_ARGUMENT, "grove_model_load_file: out_model is NULL"));
  EXPECT_EQ(model, nullptr);
}

TEST(CApiModel, LoadFileErrors) {
  grove_model_t* model = nullptr;
  const std::string missing = TempDir() + "/no_such_model.grove";
  Outcome o = Take(grove_model_load_file(missing.c_str(), &model));
  EXPECT_NE(o.code, GROVE_STATUS_OK);
  EXPECT_THAT(o.message, ::testing::HasSubstr("grove_model_load_file: "));
  EXPECT_EQ(model, nullptr);

  const std::string garbage = TempDir() + "/c_api_garbage.grove";
  std::ofstream(garbage, std::ios::binary) << "this is not a model, not even close to one........";
  o = Take(grove_model_load_file(garbage.c_str(), &model));
  EXPECT_NE(o.code, GROVE_STATUS_OK);
  EXPECT_NE(o.code, GROVE_STATUS_INTERNAL) << o.message;
  EXPECT_EQ(model, nullptr);
}

TEST_F(CApiTest, LoadBuffer) {
  grove_model_t* model = nullptr;
  EXPECT_TRUE(Fails(grove_model_load_buffer(nullptr, 10, &model), GROVE_STATUS_INVALID_ARGUMENT, "grove_model_load_buffer: data is NULL"));
  EXPECT_TRUE(Fails(grove_model_load_buffer(bytes_.data(), bytes_.size(), nullptr), GROVE_STATUS_INVALID_ARGUMENT, "grove_model_load_buffer: out_model is NULL"));
  EXPECT_NE(Take(grove_model_load_buffer(bytes_.data(), bytes_.size() / 3, &model)).code, GROVE_STATUS_OK);
  EXPECT_EQ(model, nullptr);

  // The model copies the bytes: scribbling over them afterwards is harmless.
  std::vector<uint8_t> copy = bytes_;
  ASSERT_TRUE(Ok(grove_model_load_buffer(copy.data(), copy.size(), &model)));
  std::fill(copy.begin(), copy.end(), 0xee);
  size_t n = 0;
  EXPECT_TRUE(Ok(grove_model_input_count(model, &n)));
  EXPECT_EQ(n, 1u);
  grove_model_release(model);
}

TEST_F(CApiTest, Counts) {
  size_t n = 99;
  EXPECT_TRUE(Ok(grove_model_input_count(model_, &n)));
  EXPECT_EQ(n, 1u);
  EXPECT_TRUE(Ok(grove_model_output_count(model_, &n)));
  EXPECT_EQ(n, 2u);
  EXPECT_TRUE(Ok(grove_model_symbol_count(model_, &n)));
  EXPECT_EQ(n, 1u);

  EXPECT_TRUE(Fails(grove_model_input_count(nullptr, &n), GROVE_STATUS_INVALID_ARGUMENT, "grove_model_input_count: model is NULL"));
  EXPECT_TRUE(Fails(grove_model_input_count(model_, nullptr), GROVE_STATUS_INVALID_ARGUMENT, "grove_model_input_count: out_count is NULL"));
  EXPECT_TRUE(Fails(grove_model_output_count(nullptr, &n), GROVE_STATUS_INVALID_ARGUMENT, "grove_model_output_count: model is NULL"));
  EXPECT_TRUE(Fails(grove_model_output_count(model_, nullptr), GROVE_STATUS_INVALID_ARGUMENT, "grove_model_output_count: out_count is NULL"));
  EXPECT_TRUE(Fails(grove_model_symbol_count(nullptr, &n), GROVE_STATUS_INVALID_ARGUMENT, "grove_model_symbol_count: model is NULL"));
  EXPECT_TRUE(Fails(grove_model_symbol_count(model_, nullptr), GROVE_STATUS_INVALID_ARGUMENT, "grove_model_symbol_count: out_count is NULL"));
}

TEST_F(CApiTest, InputInfoReportsSymbolsAsMinusOne) {
  grove_tensor_info_t info;
  ASSERT_TRUE(Ok(grove_model_input_info(model_, 0, &info)));
  EXPECT_STREQ(info.name, "x");
  EXPECT_EQ(info.dtype, GROVE_DTYPE_F32);
  ASSERT_EQ(info.rank, 2);
  EXPECT_EQ(info.dims[0], -1);
  EXPECT_STREQ(info.dim_symbols[0], "batch");
  EXPECT_EQ(info.dims[1], 4);
  EXPECT_EQ(info.dim_symbols[1], nullptr);

  EXPECT_TRUE(Fails(grove_model_input_info(model_, 1, &info), GROVE_STATUS_OUT_OF_RANGE, "grove_model_input_info: input index 1 is past the model's 1 inputs"));
  EXPECT_TRUE(Fails(grove_model_input_info(nullptr, 0, &info), GROVE_STATUS_INVALID_ARGUMENT, "grove_model_input_info: model is NULL"));
  EXPECT_TRUE(Fails(grove_model_input_info(model_, 0, nullptr), GROVE_STATUS_INVALID_ARGUMENT, "grove_model_input_info: out_info is NULL"));
}

TEST_F(CApiTest, OutputInfo) {
  grove_tensor_info_t info;
  ASSERT_TRUE(Ok(grove_model_output_info(model_, 1, &info)));
  EXPECT_STREQ(info.name, "h");
  EXPECT_EQ(info.dtype, GROVE_DTYPE_F32);
  EXPECT_EQ(info.rank, 2);
  ASSERT_TRUE(Ok(grove_model_output_info(model_, 0, &info)));
  EXPECT_STREQ(info.name, "y");

  EXPECT_TRUE(Fails(grove_model_output_info(model_, 2, &info), GROVE_STATUS_OUT_OF_RANGE, "output index 2 is past the model's 2 outputs"));
  EXPECT_TRUE(Fails(grove_model_output_info(nullptr, 0, &info), GROVE_STATUS_INVALID_ARGUMENT, "grove_model_output_info: model is NULL"));
  EXPECT_TRUE(Fails(grove_model_output_info(model_, 0, nullptr), GROVE_STATUS_INVALID_ARGUMENT, "grove_model_output_info: out_info is NULL"));
}

TEST_F(CApiTest, OutputName) {
  const char* name = nullptr;
  ASSERT_TRUE(Ok(grove_model_output_name(model_, 1, &name)));
  EXPECT_STREQ(name, "h");
  ASSERT_TRUE(Ok(grove_model_output_name(model_, 0, &name)));
  EXPECT_STREQ(name, "y");

  EXPECT_TRUE(Fails(grove_model_output_name(model_, 2, &name), GROVE_STATUS_OUT_OF_RANGE, "grove_model_output_name: output index 2 is past the model's 2 outputs"));
  EXPECT_TRUE(Fails(grove_model_output_name(nullptr, 0, &name), GROVE_STATUS_INVALID_ARGUMENT, "grove_model_output_name: model is NULL"));
  EXPECT_TRUE(Fails(grove_model_output_name(model_, 0, nullptr), GROVE_STATUS_INVALID_ARGUMENT, "grove_model_output_name: out_name is NULL"));
  EXPECT_STREQ(name, "y");  // a failed call writes nothing
}

// The outputs are described (symbolic shape inference of their shapes) on
// the first grove_model_output_info or _kind call, once per model: the
// session, its runs and the outputs' count, names and indices do without.
TEST_F(CApiTest, SessionsAndRunsLeaveTheOutputsUndescribed) {
  const grove::internal::ModelImpl& impl = session_->session->model().impl();
  EXPECT_FALSE(impl.outputs_described());
  size_t count = 0, index = 0;
  const char* name = nullptr;
  ASSERT_TRUE(Ok(grove_model_output_count(model_, &count)));
  ASSERT_TRUE(Ok(grove_model_output_name(model_, 1, &name)));
  ASSERT_TRUE(Ok(grove_model_output_index(model_, "h", &index)));
  EXPECT_EQ(count, 2u);
  EXPECT_EQ(index, 1u);

  std::vector<float> x = Input(2);
  grove_tensor_t in = F32Tensor({2, 4}, x.data());
  grove_tensor_t owned[2] = {};
  ASSERT_TRUE(Ok(grove_session_run(session_, &in, 1, owned, 2)));
  std::vector<float> y(6), h(6), wrong(4);
  grove_tensor_t buffers[2] = {F32Tensor({2, 3}, y.data()), F32Tensor({2, 3}, h.data())};
  ASSERT_TRUE(Ok(grove_session_run(session_, &in, 1, buffers, 2)));
  ASSERT_TRUE(Ok(grove_session_run_into(session_, &in, 1, buffers, 2)));
  buffers[1] = F32Tensor({2, 2}, wrong.data());
  EXPECT_TRUE(Fails(grove_session_run_into(session_, &in, 1, buffers, 2), GROVE_STATUS_INVALID_ARGUMENT, "output 'h' is f32"));
  EXPECT_TRUE(Fails(grove_session_run(session_, &in, 1, buffers, 1), GROVE_STATUS_INVALID_ARGUMENT, "n_outputs is 1 but the model has 2 outputs"));
  EXPECT_FALSE(impl.outputs_described());

  grove_tensor_info_t info;
  ASSERT_TRUE(Ok(grove_model_output_info(model_, 0, &info)));
  EXPECT_TRUE(impl.outputs_described());
  EXPECT_STREQ(info.name, "y");
  ASSERT_EQ(info.rank, 2);
  EXPECT_EQ(info.dims[0], -1);
  EXPECT_STREQ(info.dim_symbols[0], "batch");
  EXPECT_EQ(info.dims[1], 3);
}

TEST_F(CApiTest, SymbolInfo) {
  grove_symbol_info_t info;
  ASSERT_TRUE(Ok(grove_model_symbol_info(model_, 0, &info)));
  EXPECT_STREQ(info.name, "batch");
  EXPECT_EQ(info.min, 1);
  EXPECT_EQ(info.max, 8);
  EXPECT_TRUE(Fails(grove_model_symbol_info(model_, 5, &info), GROVE_STATUS_OUT_OF_RANGE, "symbol index 5"));
  EXPECT_TRUE(Fails(grove_model_symbol_info(nullptr, 0, &info), GROVE_STATUS_INVALID_ARGUMENT, "grove_model_symbol_info: model is NULL"));
  EXPECT_TRUE(Fails(grove_model_symbol_info(model_, 0, nullptr), GROVE_STATUS_INVALID_ARGUMENT, "grove_model_symbol_info: out_info is NULL"));
}

TEST_F(CApiTest, IndexByName) {
  size_t index = 99;
  ASSERT_TRUE(Ok(grove_model_input_index(model_, "x", &index)));
  EXPECT_EQ(index, 0u);
  ASSERT_TRUE(Ok(grove_model_output_index(model_, "h", &index)));
  EXPECT_EQ(index, 1u);
  EXPECT_TRUE(Fails(grove_model_input_index(model_, "y", &index), GROVE_STATUS_NOT_FOUND, "the model has no input named 'y' (it has 'x')"));
  EXPECT_TRUE(Fails(grove_model_output_index(model_, "x", &index), GROVE_STATUS_NOT_FOUND, "no output named 'x' (it has 'y', 'h')"));
  EXPECT_TRUE(Fails(grove_model_input_index(nullptr, "x", &index), GROVE_STATUS_INVALID_ARGUMENT, "grove_model_input_index: model is NULL"));
  EXPECT_TRUE(Fails(grove_model_input_index(model_, nullptr, &index), GROVE_STATUS_INVALID_ARGUMENT, "grove_model_input_index: name is NULL"));
  EXPECT_TRUE(Fails(grove_model_input_index(model_, "x", nullptr), GROVE_STATUS_INVALID_ARGUMENT, "grove_model_input_index: out_index is NULL"));
  EXPECT_TRUE(Fails(grove_model_output_index(nullptr, "y", &index), GROVE_STATUS_INVALID_ARGUMENT, "grove_model_output_index: model is NULL"));
  EXPECT_TRUE(Fails(grove_model_output_index(model_, nullptr, &index), GROVE_STATUS_INVALID_ARGUMENT, "grove_model_output_index: name is NULL"));
  EXPECT_TRUE(Fails(grove_model_output_index(model_, "y", nullptr), GROVE_STATUS_INVALID_ARGUMENT, "grove_model_output_index: out_index is NULL"));
}

TEST_F(CApiTest, SessionCreateArguments) {
  grove_session_t* session = nullptr;
  EXPECT_TRUE(Fails(grove_session_create(nullptr, nullptr, &session), GROVE_STATUS_INVALID_ARGUMENT, "grove_session_create: model is NULL"));
  EXPECT_TRUE(Fails(grove_session_create(model_, nullptr, nullptr), GROVE_STATUS_INVALID_ARGUMENT, "grove_session_create: out_session is NULL"));

  grove_session_options_t options;
  grove_session_options_initialize(&options);
  options.device = 7;
  EXPECT_TRUE(Fails(grove_session_create(model_, &options, &session), GROVE_STATUS_INVALID_ARGUMENT, "options->device is 7"));
  grove_session_options_initialize(&options);
  options.max_cached_plans = -1;
  EXPECT_TRUE(Fails(grove_session_create(model_, &options, &session), GROVE_STATUS_INVALID_ARGUMENT, "options->max_cached_plans is negative"));
  grove_session_options_initialize(&options);
  options.gemm_math = 9;
  EXPECT_TRUE(Fails(grove_session_create(model_, &options, &session), GROVE_STATUS_INVALID_ARGUMENT, "options->gemm_math is 9"));
  grove_session_options_initialize(&options);
  options.cuda_device = -2;
  EXPECT_TRUE(Fails(grove_session_create(model_, &options, &session), GROVE_STATUS_INVALID_ARGUMENT, "options->cuda_device is negative"));
  grove_session_options_initialize(&options);
  options.cuda_graphs = 3;
  EXPECT_TRUE(Fails(grove_session_create(model_, &options, &session), GROVE_STATUS_INVALID_ARGUMENT, "options->cuda_graphs is 3 (GROVE_GRAPH_MODE_AUTO, _ON or _OFF expected)"));
  grove_session_options_initialize(&options);
  options.max_cached_graphs = -1;
  EXPECT_TRUE(Fails(grove_session_create(model_, &options, &session), GROVE_STATUS_INVALID_ARGUMENT, "options->max_cached_graphs is negative (-1)"));
  EXPECT_EQ(session, nullptr);
  if (grove::cuda::ProbeCuda().device_count == 0) {
    // No GPU or driver here: asking for CUDA is an error that says why.
    grove_session_options_initialize(&options);
    options.device = GROVE_DEVICE_CUDA;
    EXPECT_TRUE(Fails(grove_session_create(model_, &options, &session), GROVE_STATUS_FAILED_PRECONDITION,
                      "device 'cuda' requested: no CUDA device"));
    EXPECT_EQ(session, nullptr);
  }

  grove_session_options_initialize(&options);
  options.device = GROVE_DEVICE_CPU;
  ASSERT_TRUE(Ok(grove_session_create(model_, &options, &session)));
  grove_device_t device = -1;
  EXPECT_TRUE(Ok(grove_session_device(session, &device)));
  EXPECT_EQ(device, GROVE_DEVICE_CPU);
  EXPECT_TRUE(Fails(grove_session_device(nullptr, &device), GROVE_STATUS_INVALID_ARGUMENT, "grove_session_device: session is NULL"));
  EXPECT_TRUE(Fails(grove_session_device(session, nullptr), GROVE_STATUS_INVALID_ARGUMENT, "grove_session_device: out_device is NULL"));
  grove_session_release(session);
}

TEST_F(CApiTest, AutoDeviceResolves) {
  grove_device_t device = -1;
  ASSERT_TRUE(Ok(grove_session_device(session_, &device)));
  EXPECT_NE(device, GROVE_DEVICE_AUTO);
}

TEST_F(CApiTest, RunWithSessionOwnedOutputs) {
  for (int batch : {1, 3, 8}) {
    SCOPED_TRACE(batch);
    std::vector<float> x = Input(batch);
    grove_tensor_t in = F32Tensor({batch, 4}, x.data());
    grove_tensor_t out[2] = {};
    ASSERT_TRUE(Ok(grove_session_run(session_, &in, 1, out, 2)));
    for (const grove_tensor_t& o : out) {
      EXPECT_EQ(o.dtype, GROVE_DTYPE_F32);
      ASSERT_EQ(o.rank, 2);
      EXPECT_EQ(o.dims[0], batch);
      EXPECT_EQ(o.dims[1], 3);
      EXPECT_NE(o.data, nullptr);
      EXPECT_EQ(o.byte_size, static_cast<size_t>(batch) * 3 * sizeof(float));
    }
    EXPECT_THAT(Floats(out[0]), ::testing::Pointwise(::testing::FloatNear(1e-5f), ExpectedY(x, batch)));
    EXPECT_THAT(Floats(out[1]), ::testing::Pointwise(::testing::FloatNear(1e-5f), ExpectedH(x, batch)));
  }
}

TEST_F(CApiTest, RunIntoCallerBuffers) {
  std::vector<float> x = Input(2);
  grove_tensor_t in = F32Tensor({2, 4}, x.data());
  std::vector<float> y(6, -7), h(6, -7);
  grove_tensor_t out[2] = {F32Tensor({2, 3}, y.data()), F32Tensor({2, 3}, h.data())};
  ASSERT_TRUE(Ok(grove_session_run(session_, &in, 1, out, 2)));
  EXPECT_EQ(out[0].data, y.data());
  EXPECT_EQ(out[1].data, h.data());
  EXPECT_THAT(y, ::testing::Pointwise(::testing::FloatNear(1e-5f), ExpectedY(x, 2)));
  EXPECT_THAT(h, ::testing::Pointwise(::testing::FloatNear(1e-5f), ExpectedH(x, 2)));
}

TEST_F(CApiTest, RunMixesCallerAndSessionOutputs) {
  std::vector<float> x = Input(3);
  grove_tensor_t in = F32Tensor({3, 4}, x.data());
  std::vector<float> h(9, -7);
  grove_tensor_t out[2] = {{}, F32Tensor({3, 3}, h.data())};
  ASSERT_TRUE(Ok(grove_session_run(session_, &in, 1, out, 2)));
  EXPECT_EQ(out[1].data, h.data());
  EXPECT_NE(out[0].data, nullptr);
  EXPECT_THAT(Floats(out[0]), ::testing::Pointwise(::testing::FloatNear(1e-5f), ExpectedY(x, 3)));
  EXPECT_THAT(h, ::testing::Pointwise(::testing::FloatNear(1e-5f), ExpectedH(x, 3)));
}

TEST_F(CApiTest, CallerBufferMismatchIsAnErrorNamingTheOutput) {
  std::vector<float> x = Input(2);
  grove_tensor_t in = F32Tensor({2, 4}, x.data());
  std::vector<float> buf(64);

  // Wrong shape, with the other output session-owned.
  grove_tensor_t out[2] = {{}, F32Tensor({3, 3}, buf.data())};
  const grove_tensor_t before[2] = {out[0], out[1]};
  Outcome o = Take(grove_session_run(session_, &in, 1, out, 2));
  EXPECT_TRUE(Fails(o, GROVE_STATUS_INVALID_ARGUMENT, "output 1 ('h')"));
  EXPECT_THAT(o.message, ::testing::HasSubstr("f32[2,3]"));
  EXPECT_EQ(std::memcmp(out, before, sizeof(out)), 0) << "a failed run changed its outputs";

  // Wrong dtype, every output caller-provided.
  grove_tensor_t all[2] = {F32Tensor({2, 3}, buf.data()), F32Tensor({2, 3}, buf.data() + 8)};
  all[1].dtype = GROVE_DTYPE_I32;
  EXPECT_NE(Take(grove_session_run(session_, &in, 1, all, 2)).code, GROVE_STATUS_OK);

  // Too small a buffer is caught before running.
  grove_tensor_t small[2] = {F32Tensor({2, 3}, buf.data()), F32Tensor({2, 3}, buf.data() + 8)};
  small[0].byte_size = 5;
  EXPECT_TRUE(Fails(grove_session_run(session_, &in, 1, small, 2), GROVE_STATUS_INVALID_ARGUMENT, "output 0 ('y'): f32[2,3] needs 24 bytes but byte_size is 5"));
}

TEST_F(CApiTest, RunArgumentChecks) {
  std::vector<float> x = Input(2);
  grove_tensor_t in = F32Tensor({2, 4}, x.data());
  grove_tensor_t out[2] = {};

  EXPECT_TRUE(Fails(grove_session_run(nullptr, &in, 1, out, 2), GROVE_STATUS_INVALID_ARGUMENT, "grove_session_run: session is NULL"));
  EXPECT_TRUE(Fails(grove_session_run(session_, nullptr, 1, out, 2), GROVE_STATUS_INVALID_ARGUMENT, "grove_session_run: inputs is NULL"));
  EXPECT_TRUE(Fails(grove_session_run(session_, &in, 1, nullptr, 2), GROVE_STATUS_INVALID_ARGUMENT, "grove_session_run: outputs is NULL"));
  EXPECT_TRUE(Fails(grove_session_run(session_, &in, 2, out, 2), GROVE_STATUS_INVALID_ARGUMENT, "n_inputs is 2 but the model has 1 inputs"));
  EXPECT_TRUE(Fails(grove_session_run(session_, nullptr, 0, out, 2), GROVE_STATUS_INVALID_ARGUMENT, "n_inputs is 0 but the model has 1 inputs"));
  EXPECT_TRUE(Fails(grove_session_run(session_, &in, 1, out, 1), GROVE_STATUS_INVALID_ARGUMENT, "n_outputs is 1 but the model has 2 outputs"));

  grove_tensor_t bad = in;
  bad.dtype = 42;
  EXPECT_TRUE(Fails(grove_session_run(session_, &bad, 1, out, 2), GROVE_STATUS_INVALID_ARGUMENT, "input 0 ('x'): unknown dtype 42"));
  bad = in;
  bad.rank = GROVE_MAX_RANK + 1;
  EXPECT_TRUE(Fails(grove_session_run(session_, &bad, 1, out, 2), GROVE_STATUS_INVALID_ARGUMENT, "input 0 ('x'): rank 9 is outside 0..8"));
  bad = in;
  bad.rank = -1;
  EXPECT_TRUE(Fails(grove_session_run(session_, &bad, 1, out, 2), GROVE_STATUS_INVALID_ARGUMENT, "rank -1"));
  bad = in;
  bad.dims[1] = -4;
  EXPECT_TRUE(Fails(grove_session_run(session_, &bad, 1, out, 2), GROVE_STATUS_INVALID_ARGUMENT, "input 0 ('x'): dim 1 is negative (-4)"));
  bad = in;
  bad.dims[0] = int64_t{1} << 40;
  bad.dims[1] = int64_t{1} << 40;
  EXPECT_TRUE(Fails(grove_session_run(session_, &bad, 1, out, 2), GROVE_STATUS_INVALID_ARGUMENT, "overflows"));
  bad = in;
  bad.byte_size -= 1;
  EXPECT_TRUE(Fails(grove_session_run(session_, &bad, 1, out, 2), GROVE_STATUS_INVALID_ARGUMENT, "needs 32 bytes but byte_size is 31"));
  bad = in;
  bad.data = nullptr;
  EXPECT_TRUE(Fails(grove_session_run(session_, &bad, 1, out, 2), GROVE_STATUS_INVALID_ARGUMENT, "input 0 ('x'): data is NULL"));

  // Well-formed, but wrong for the model: the session's own checks speak.
  std::vector<int32_t> xi(8);
  grove_tensor_t wrong_dtype = in;
  wrong_dtype.dtype = GROVE_DTYPE_I32;
  wrong_dtype.data = xi.data();
  EXPECT_TRUE(Fails(grove_session_run(session_, &wrong_dtype, 1, out, 2), GROVE_STATUS_INVALID_ARGUMENT, "grove_session_run: "));
  std::vector<float> wide(2 * 5);
  grove_tensor_t wrong_dim = F32Tensor({2, 5}, wide.data());
  EXPECT_TRUE(Fails(grove_session_run(session_, &wrong_dim, 1, out, 2), GROVE_STATUS_INVALID_ARGUMENT, "grove_session_run: "));
  std::vector<float> tall(9 * 4);
  grove_tensor_t out_of_range = F32Tensor({9, 4}, tall.data());
  EXPECT_NE(Take(grove_session_run(session_, &out_of_range, 1, out, 2)).code, GROVE_STATUS_OK);

  for (const grove_tensor_t& o : out) EXPECT_EQ(o.data, nullptr) << "a failed run changed its outputs";

  // The session is still usable after all that.
  EXPECT_TRUE(Ok(grove_session_run(session_, &in, 1, out, 2)));
}

TEST_F(CApiTest, Stats) {
  std::vector<float> x = Input(2);
  grove_tensor_t in = F32Tensor({2, 4}, x.data());
  grove_tensor_t out[2] = {};
  grove_session_stats_t stats = GROVE_SESSION_STATS_INIT;
  ASSERT_TRUE(Ok(grove_session_stats(session_, &stats)));
  EXPECT_EQ(stats.struct_size, sizeof(stats)) << "struct_size is left as the caller set it";
  EXPECT_EQ(stats.runs, 0);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(Ok(grove_session_run(session_, &in, 1, out, 2)));
  ASSERT_TRUE(Ok(grove_session_stats(session_, &stats)));
  EXPECT_EQ(stats.runs, 3);
  EXPECT_EQ(stats.plans_created, 1);
  EXPECT_EQ(stats.plan_cache_hits, 2);
  EXPECT_GT(stats.kernels_run, 0);

  EXPECT_TRUE(Fails(grove_session_stats(nullptr, &stats), GROVE_STATUS_INVALID_ARGUMENT, "grove_session_stats: session is NULL"));
  EXPECT_TRUE(Fails(grove_session_stats(session_, nullptr), GROVE_STATUS_INVALID_ARGUMENT, "grove_session_stats: out_stats is NULL"));
}

// The device counters of grove_session_stats_t exist and are 0 on a CPU
// session; the call fills every field (none keeps the caller's bytes).
TEST_F(CApiTest, StatsDeviceCountersAreZeroOnTheCpu) {
  grove_session_options_t options;
  grove_session_options_initialize(&options);
  options.device = GROVE_DEVICE_CPU;
  grove_session_t* session = nullptr;
  ASSERT_TRUE(Ok(grove_session_create(model_, &options, &session)));
  std::vector<float> x = Input(2);
  grove_tensor_t in = F32Tensor({2, 4}, x.data());
  grove_tensor_t out[2] = {};
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(Ok(grove_session_run(session, &in, 1, out, 2)));
  grove_session_stats_t stats;
  std::memset(&stats, 0x5a, sizeof(stats));
  stats.struct_size = sizeof(stats);
  ASSERT_TRUE(Ok(grove_session_stats(session, &stats)));
  constexpr int64_t kGarbage = 0x5a5a5a5a5a5a5a5a;
  EXPECT_EQ(stats.runs, 2);
  EXPECT_EQ(stats.device_allocations, 0);
  EXPECT_EQ(stats.device_synchronizations, 0);
  EXPECT_EQ(stats.device_to_host_reads, 0);
  EXPECT_EQ(stats.host_waits_inside_segments, 0);
  EXPECT_GE(stats.segments_run, 0);
  EXPECT_NE(stats.segments_run, kGarbage) << "segments_run was not written";
  EXPECT_EQ(stats.cpu_fallback_steps, 0);
  EXPECT_EQ(stats.bytes_host_to_device, 0);
  EXPECT_EQ(stats.bytes_device_to_host, 0);
  EXPECT_EQ(stats.graphs_captured, 0);
  EXPECT_EQ(stats.graph_replays, 0);
  EXPECT_EQ(stats.segments_run_eagerly, stats.segments_run) << "on the CPU every segment runs step by step";
  EXPECT_EQ(stats.graph_capture_failures, 0);
  EXPECT_EQ(stats.graphs_evicted, 0);
  EXPECT_EQ(stats.graphs_held, 0);
  EXPECT_EQ(stats.graph_nodes, 0);
  EXPECT_EQ(stats.graph_bytes, 0);
  EXPECT_EQ(stats.graph_launches, 0);
  EXPECT_EQ(stats.launches_outside_graphs, 0);
  ASSERT_NE(stats.graph_fallback_reason, nullptr);
  EXPECT_STREQ(stats.graph_fallback_reason, "");
  EXPECT_EQ(stats.graph_refreshes, 0);
  EXPECT_EQ(stats.buckets_made, 0);
  EXPECT_EQ(stats.bucketed_runs, 0);
  EXPECT_EQ(stats.bucket_input_bytes, 0);
  EXPECT_EQ(stats.bucket_padding_bytes, 0);
  ASSERT_NE(stats.bucket_fallback_reason, nullptr);
  EXPECT_STREQ(stats.bucket_fallback_reason, "");
  EXPECT_EQ(stats.arena_bytes, 0) << "the CPU has no stable arena";
  EXPECT_EQ(stats.arena_own_plans, 0);
  EXPECT_EQ(stats.control_flow_in_graphs, 0) << "the CPU has no conditional graph nodes";
  EXPECT_EQ(stats.control_flow_host_driven, 0);
  ASSERT_NE(stats.control_flow_fallback_reason, nullptr);
  EXPECT_STREQ(stats.control_flow_fallback_reason, "");
  grove_session_release(session);
  static_assert(sizeof(grove_session_stats_t) == sizeof(size_t) + 32 * sizeof(int64_t) + 3 * sizeof(const char*),
                "a field without a test");
}

TEST_F(CApiTest, SessionKeepsTheModelAlive) {
  grove_session_t* session = nullptr;
  ASSERT_TRUE(Ok(grove_session_create(model_, nullptr, &session)));
  grove_model_release(model_);
  model_ = nullptr;
  std::vector<float> x = Input(1);
  grove_tensor_t in = F32Tensor({1, 4}, x.data());
  grove_tensor_t out[2] = {};
  EXPECT_TRUE(Ok(grove_session_run(session, &in, 1, out, 2)));
  EXPECT_THAT(Floats(out[0]), ::testing::Pointwise(::testing::FloatNear(1e-5f), ExpectedY(x, 1)));
  grove_session_release(session);
}

// Sequences through the C ABI: the kinds of inputs and outputs, a sequence
// output filled by the session, a sequence input, and malformed values.
TEST(CApiValues, SequenceLoopModel) {
  absl::StatusOr<std::vector<uint8_t>> bytes = grove::testing::BuildSequenceLoop();
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  grove_model_t* model = nullptr;
  ASSERT_TRUE(Ok(grove_model_load_buffer(bytes->data(), bytes->size(), &model)));
  grove_value_kind_t kind = -1;
  ASSERT_TRUE(Ok(grove_model_input_kind(model, 0, &kind)));
  EXPECT_EQ(kind, GROVE_VALUE_TENSOR);
  ASSERT_TRUE(Ok(grove_model_output_kind(model, 1, &kind)));
  EXPECT_EQ(kind, GROVE_VALUE_SEQUENCE);
  grove_status_t* past = grove_model_output_kind(model, 2, &kind);
  EXPECT_EQ(grove_status_code(past), GROVE_STATUS_OUT_OF_RANGE);
  grove_status_release(past);

  grove_session_options_t options;
  grove_session_options_initialize(&options);
  options.device = GROVE_DEVICE_CPU;
  grove_session_t* session = nullptr;
  ASSERT_TRUE(Ok(grove_session_create(model, &options, &session)));
  int64_t m = 3;
  float x[2] = {1, -2};
  grove_tensor_t tensors[2] = {};
  tensors[0].dtype = GROVE_DTYPE_I64;
  tensors[0].data = &m;
  tensors[0].byte_size = sizeof(m);
  tensors[1] = F32Tensor({2}, x);
  grove_value_t inputs[2] = {{GROVE_VALUE_TENSOR, GROVE_DTYPE_I64, 1, 1, &tensors[0]},
                             {GROVE_VALUE_TENSOR, GROVE_DTYPE_F32, 1, 1, &tensors[1]}};
  grove_value_t outputs[2] = {};
  ASSERT_TRUE(Ok(grove_session_run_values(session, inputs, 2, outputs, 2)));
  EXPECT_EQ(outputs[0].kind, GROVE_VALUE_TENSOR);
  ASSERT_EQ(outputs[0].n_tensors, 1u);
  EXPECT_EQ(outputs[0].tensors[0].rank, 2);
  EXPECT_THAT(Floats(outputs[0].tensors[0]), ::testing::ElementsAre(0, 0, 1, -2, 2, -4));
  EXPECT_EQ(outputs[1].kind, GROVE_VALUE_SEQUENCE);
  EXPECT_EQ(outputs[1].dtype, GROVE_DTYPE_F32);
  ASSERT_EQ(outputs[1].n_tensors, 3u);
  EXPECT_THAT(Floats(outputs[1].tensors[2]), ::testing::ElementsAre(2, -4));

  // A tensor value with two tensors is refused before anything runs.
  grove_value_t bad = inputs[1];
  bad.n_tensors = 2;
  grove_value_t bad_inputs[2] = {inputs[0], bad};
  grove_status_t* st = grove_session_run_values(session, bad_inputs, 2, outputs, 2);
  EXPECT_EQ(grove_status_code(st), GROVE_STATUS_INVALID_ARGUMENT);
  EXPECT_THAT(grove_status_message(st), ::testing::HasSubstr("a tensor value needs n_tensors == 1, has 2"));
  grove_status_release(st);
  // grove_session_run speaks tensors only and says what to call instead.
  grove_tensor_t outs[2] = {};
  st = grove_session_run(session, tensors, 2, outs, 2);
  EXPECT_THAT(grove_status_message(st), ::testing::HasSubstr("use Session::RunValues"));
  grove_status_release(st);
  grove_session_release(session);
  grove_model_release(model);
}

TEST(CApiValues, SequenceInput) {
  grove::ModelBuilder b;
  b.AddInput("parts", grove::ValueKind::kSequence, grove::DType::kF32);
  b.AddOp("ConcatFromSequence", {"parts"}, {"joined"}, {{"axis", int64_t{0}}});
  b.AddOutput("joined");
  absl::StatusOr<std::vector<uint8_t>> bytes = b.Finish();
  ASSERT_TRUE(bytes.ok());
  grove_model_t* model = nullptr;
  ASSERT_TRUE(Ok(grove_model_load_buffer(bytes->data(), bytes->size(), &model)));
  grove_session_t* session = nullptr;
  ASSERT_TRUE(Ok(grove_session_create(model, nullptr, &session)));
  float a[2] = {1, 2}, c[4] = {3, 4, 5, 6};
  grove_tensor_t items[2] = {F32Tensor({1, 2}, a), F32Tensor({2, 2}, c)};
  grove_value_t in = {GROVE_VALUE_SEQUENCE, GROVE_DTYPE_F32, 1, 2, items};
  grove_value_t out = {};
  ASSERT_TRUE(Ok(grove_session_run_values(session, &in, 1, &out, 1)));
  ASSERT_EQ(out.n_tensors, 1u);
  EXPECT_THAT(Floats(out.tensors[0]), ::testing::ElementsAre(1, 2, 3, 4, 5, 6));
  // An empty sequence runs into ConcatFromSequence's error.
  grove_value_t empty = {GROVE_VALUE_SEQUENCE, GROVE_DTYPE_F32, 1, 0, nullptr};
  grove_status_t* st = grove_session_run_values(session, &empty, 1, &out, 1);
  EXPECT_THAT(grove_status_message(st), ::testing::HasSubstr("concatenates an empty sequence"));
  grove_status_release(st);
  grove_session_release(session);
  grove_model_release(model);
}

}  // namespace

namespace {

// Inputs "m" (i64 scalar) and "x" (f32[4]); a Loop of m trips adds 1 to x.
std::vector<uint8_t> BuildCountingLoop() {
  grove::ModelBuilder b;
  b.AddInput("m", grove::DType::kI64, {});
  b.AddInput("x", grove::DType::kF32, {4});
  b.AddWeight("one", grove::DType::kF32, {1}, std::vector<float>{1.0f});
  const int body = b.AddSubgraph("body");
  b.AddInput("i", grove::DType::kI64, {});
  b.AddInput("ci", grove::DType::kBool, {});
  b.AddInput("v", grove::DType::kF32, {4});
  b.AddOp("Identity", {"ci"}, {"co"});
  b.AddOp("Add", {"v", "one"}, {"v_next"});
  b.AddOutput("co");
  b.AddOutput("v_next");
  b.SetSubgraph(0);
  b.AddOp("Loop", {"m", "", "x"}, {"y"}, {{"body", grove::SubgraphRef{body}}});
  b.AddOutput("y");
  absl::StatusOr<std::vector<uint8_t>> bytes = b.Finish();
  EXPECT_TRUE(bytes.ok()) << bytes.status();
  return bytes.ok() ? *bytes : std::vector<uint8_t>();
}

struct LoopCall {
  explicit LoopCall(int64_t trips) : m(trips) {
    in[0].dtype = GROVE_DTYPE_I64;
    in[0].data = &m;
    in[0].byte_size = sizeof(m);
    in[1] = F32Tensor({4}, x);
    out[0] = F32Tensor({4}, y);
  }
  grove_status_t* Run(grove_session_t* session) { return grove_session_run(session, in, 2, out, 1); }
  int64_t m;
  float x[4] = {0, 1, 2, 3};
  float y[4] = {};
  grove_tensor_t in[2] = {};
  grove_tensor_t out[1] = {};
};

}  // namespace

// A released handle passed back is refused by its tag, a second release does
// nothing, and a handle of another kind is refused (within the quarantine
// window the memory is still allocated, so this is sound under ASan).
TEST_F(CApiTest, ReleasedHandlesAreRefused) {
  grove_session_t* session = nullptr;
  ASSERT_TRUE(Ok(grove_session_create(model_, nullptr, &session)));
  grove_session_release(session);
  grove_session_release(session);  // double release: a no-op
  std::vector<float> x = Input(2);
  grove_tensor_t in = F32Tensor({2, 4}, x.data());
  grove_tensor_t outs[2] = {};
  EXPECT_TRUE(Fails(grove_session_run(session, &in, 1, outs, 2), GROVE_STATUS_INVALID_ARGUMENT,
                    "session is not a live grove_session_t (it was released)"));
  grove_session_stats_t stats = GROVE_SESSION_STATS_INIT;
  EXPECT_TRUE(Fails(grove_session_stats(session, &stats), GROVE_STATUS_INVALID_ARGUMENT, "released"));

  grove_model_t* model = nullptr;
  ASSERT_TRUE(Ok(grove_model_load_buffer(bytes_.data(), bytes_.size(), &model)));
  grove_model_release(model);
  grove_model_release(model);
  size_t count = 0;
  EXPECT_TRUE(Fails(grove_model_input_count(model, &count), GROVE_STATUS_INVALID_ARGUMENT,
                    "model is not a live grove_model_t (it was released)"));
  grove_session_t* from_dead = nullptr;
  EXPECT_TRUE(Fails(grove_session_create(model, nullptr, &from_dead), GROVE_STATUS_INVALID_ARGUMENT, "released"));
  EXPECT_EQ(from_dead, nullptr);

  // A status released twice; a released status reads as such.
  grove_status_t* st = grove_model_input_count(nullptr, &count);
  ASSERT_NE(st, nullptr);
  grove_status_release(st);
  EXPECT_EQ(grove_status_code(st), GROVE_STATUS_INVALID_ARGUMENT);
  EXPECT_THAT(grove_status_message(st), ::testing::HasSubstr("not live"));
  grove_status_release(st);

  // Handles of the wrong kind.
  EXPECT_TRUE(Fails(grove_model_input_count(reinterpret_cast<const grove_model_t*>(session_), &count),
                    GROVE_STATUS_INVALID_ARGUMENT, "model is not a live grove_model_t"));
  EXPECT_TRUE(Fails(grove_session_stats(reinterpret_cast<const grove_session_t*>(model_), &stats),
                    GROVE_STATUS_INVALID_ARGUMENT, "session is not a live grove_session_t"));
  // The fixture's live handles still work.
  EXPECT_TRUE(Ok(grove_session_stats(session_, &stats)));
}

TEST(CApiBounded, DeadlineAndCancellation) {
  const std::vector<uint8_t> bytes = BuildCountingLoop();
  ASSERT_FALSE(bytes.empty());
  grove_model_t* model = nullptr;
  ASSERT_TRUE(Ok(grove_model_load_buffer(bytes.data(), bytes.size(), &model)));
  grove_cancel_token_t* token = nullptr;
  EXPECT_TRUE(Fails(grove_cancel_token_create(nullptr), GROVE_STATUS_INVALID_ARGUMENT, "out_token is NULL"));
  ASSERT_TRUE(Ok(grove_cancel_token_create(&token)));
  grove_session_options_t options;
  grove_session_options_initialize(&options);
  options.device = GROVE_DEVICE_CPU;
  options.run_deadline_ms = -5;
  grove_session_t* session = nullptr;
  EXPECT_TRUE(Fails(grove_session_create(model, &options, &session), GROVE_STATUS_INVALID_ARGUMENT,
                    "run_deadline_ms is negative"));
  options.run_deadline_ms = 100;
  options.max_body_runs = -1;
  EXPECT_TRUE(Fails(grove_session_create(model, &options, &session), GROVE_STATUS_INVALID_ARGUMENT,
                    "max_body_runs is negative"));
  options.max_body_runs = 0;  // no budget: the loops below end by the deadline or the token
  options.cancel_token = token;
  ASSERT_TRUE(Ok(grove_session_create(model, &options, &session)));
  grove_cancel_token_release(token);  // the session keeps its own reference
  token = nullptr;
  ASSERT_TRUE(Ok(grove_cancel_token_create(&token)));

  // Past the deadline, then a normal run.
  LoopCall forever(int64_t{1} << 62);
  EXPECT_TRUE(Fails(forever.Run(session), GROVE_STATUS_DEADLINE_EXCEEDED, "deadline of 100 ms"));
  LoopCall three(3);
  ASSERT_TRUE(Ok(three.Run(session)));
  EXPECT_THAT(three.y, ::testing::ElementsAre(3, 4, 5, 6));
  grove_session_release(session);

  // Cancelled from another thread; a second thread's run meanwhile is busy.
  options.run_deadline_ms = 0;
  options.cancel_token = token;
  ASSERT_TRUE(Ok(grove_session_create(model, &options, &session)));
  Outcome long_run{};
  std::thread runner([&] {
    do {  // refused only while the main thread's short run is inside
      long_run = Take(forever.Run(session));
    } while (long_run.code == GROVE_STATUS_FAILED_PRECONDITION);
  });
  Outcome refused{};
  for (int i = 0; i < 300000; ++i) {
    refused = Take(three.Run(session));
    if (refused.code == GROVE_STATUS_FAILED_PRECONDITION) break;
  }
  EXPECT_TRUE(Fails(refused, GROVE_STATUS_FAILED_PRECONDITION, "already running on another thread"));
  ASSERT_TRUE(Ok(grove_cancel_token_cancel(token)));
  runner.join();
  EXPECT_TRUE(Fails(long_run, GROVE_STATUS_CANCELLED, "cancelled"));
  int32_t cancelled = 0;
  ASSERT_TRUE(Ok(grove_cancel_token_is_cancelled(token, &cancelled)));
  EXPECT_EQ(cancelled, 1);
  EXPECT_TRUE(Fails(three.Run(session), GROVE_STATUS_CANCELLED, "cancelled"));
  ASSERT_TRUE(Ok(grove_cancel_token_reset(token)));
  ASSERT_TRUE(Ok(three.Run(session)));
  EXPECT_THAT(three.y, ::testing::ElementsAre(3, 4, 5, 6));

  // The token's handle may go before the session; a released token is refused.
  grove_cancel_token_release(token);
  EXPECT_TRUE(Fails(grove_cancel_token_cancel(token), GROVE_STATUS_INVALID_ARGUMENT,
                    "token is not a live grove_cancel_token_t (it was released)"));
  grove_cancel_token_release(token);
  ASSERT_TRUE(Ok(three.Run(session)));
  grove_session_release(session);
  grove_model_release(model);
}
