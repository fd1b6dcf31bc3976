// DLPack in the C ABI (grove_dlpack_view, grove_session_run_dlpack): inputs
// read in place (NULL, compact and size-1-dim strides, byte offsets), every
// DLPack element type grove maps, outputs that own their copy and outlive
// the session; each refused tensor (device, dtype, lanes, strides, byte
// offset, rank, dims, data) with its message; the inputs' deleters called
// exactly once on every path, errors included; kDLCUDA inputs on the
// emulated CUDA device.
#include <dlpack/dlpack.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "grove/grove.h"
#include "grove/grove_c.h"
#include "gtest/gtest.h"
#include "lib/backends/backends.h"
#include "lib/backends/cuda/emulated_device.h"
#include "lib/c/c_api_internal.h"
#include "test/api/c_api_test_util.h"

namespace {

using ::testing::ElementsAre;
using ::testing::FloatNear;
using ::testing::HasSubstr;
using ::testing::Pointwise;

using grove::c_test::Ok;
using grove::c_test::Failure;

constexpr float kW[4 * 2] = {1, -1, 2, 0, -1, 1, 0.5f, 2};

// x[batch, 4] f32 -> h = x W [batch, 2], y = Relu(h), positive = h > 0
// (bool); outputs y, h, positive.
std::shared_ptr<const grove::Model> DenseModel() {
  grove::ModelBuilder b;
  b.AddSymbol("batch", 1, 8);
  b.AddInput("x", grove::DType::kF32, {"batch", 4});
  b.AddWeight("w", grove::DType::kF32, {4, 2}, std::vector<float>(kW, kW + 8));
  b.AddWeight("zero", grove::DType::kF32, {}, std::vector<float>{0.0f});
  b.AddOp("MatMul", {"x", "w"}, {"h"});
  b.AddOp("Relu", {"h"}, {"y"});
  b.AddOp("Greater", {"h", "zero"}, {"positive"});
  b.AddOutput("y");
  b.AddOutput("h");
  b.AddOutput("positive");
  absl::StatusOr<std::vector<uint8_t>> bytes = b.Finish();
  EXPECT_TRUE(bytes.ok()) << bytes.status();
  absl::StatusOr<std::shared_ptr<const grove::Model>> model = grove::Model::LoadFromBuffer(*bytes);
  EXPECT_TRUE(model.ok()) << model.status();
  return *model;
}

std::vector<float> Input(int batch) {
  std::vector<float> x(batch * 4);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 7) - 3.0f;
  return x;
}
std::vector<float> ExpectedH(const std::vector<float>& x, int batch) {
  std::vector<float> h(batch * 2, 0);
  for (int r = 0; r < batch; ++r) {
    for (int c = 0; c < 2; ++c) {
      for (int k = 0; k < 4; ++k) h[r * 2 + c] += x[r * 4 + k] * kW[k * 2 + c];
    }
  }
  return h;
}

// A producer's tensor whose deleter counts its calls (and frees nothing, so
// a second call is counted, not a double free).
struct TestTensor {
  DLManagedTensor managed{};
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;
  int deleted = 0;

  TestTensor(void* data, std::vector<int64_t> dims, DLDataType dtype = {kDLFloat, 32, 1},
             DLDevice device = {kDLCPU, 0})
      : shape(std::move(dims)) {
    managed.dl_tensor.data = data;
    managed.dl_tensor.device = device;
    managed.dl_tensor.ndim = static_cast<int>(shape.size());
    managed.dl_tensor.dtype = dtype;
    managed.dl_tensor.shape = shape.data();
    managed.dl_tensor.strides = nullptr;
    managed.dl_tensor.byte_offset = 0;
    managed.manager_ctx = this;
    managed.deleter = [](DLManagedTensor* self) { ++static_cast<TestTensor*>(self->manager_ctx)->deleted; };
  }
  void SetStrides(std::vector<int64_t> s) {
    strides = std::move(s);
    managed.dl_tensor.strides = strides.data();
  }
  DLManagedTensor* get() { return &managed; }
};

std::vector<float> FloatsOf(const DLManagedTensor* t) {
  int64_t n = 1;
  for (int i = 0; i < t->dl_tensor.ndim; ++i) n *= t->dl_tensor.shape[i];
  const auto* p = reinterpret_cast<const float*>(static_cast<const char*>(t->dl_tensor.data) +
                                                 t->dl_tensor.byte_offset);
  return std::vector<float>(p, p + n);
}

std::vector<int64_t> ShapeOf(const DLManagedTensor* t) {
  return std::vector<int64_t>(t->dl_tensor.shape, t->dl_tensor.shape + t->dl_tensor.ndim);
}

class DlpackTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model_bytes_ = DenseModel();
    grove::SessionOptions options;
    options.device = grove::Device::kCpu;
    absl::StatusOr<std::unique_ptr<grove::Session>> s = grove::Session::Create(model_bytes_, options);
    ASSERT_TRUE(s.ok()) << s.status();
    session_ = grove::c_internal::WrapSession(*std::move(s), options);
  }
  void TearDown() override { grove_session_release(session_); }

  // The message of a run of `in` that must fail; `in`'s deleter must have
  // been called once and out_outputs left alone.
  std::string RunFails(TestTensor& in, grove_status_code_t code = GROVE_STATUS_INVALID_ARGUMENT) {
    DLManagedTensor* inputs[1] = {in.get()};
    DLManagedTensor* outs[3] = {nullptr, nullptr, nullptr};
    std::string message = Failure(grove_session_run_dlpack(session_, inputs, 1, outs, 3), code);
    EXPECT_EQ(in.deleted, 1) << message;
    EXPECT_THAT(outs, ElementsAre(nullptr, nullptr, nullptr));
    return message;
  }
  // The message of grove_dlpack_view refusing `in` (nothing released).
  std::string ViewFails(TestTensor& in) {
    grove_tensor_t t{};
    std::string message = Failure(grove_dlpack_view(session_, in.get(), &t));
    EXPECT_EQ(in.deleted, 0);
    return message;
  }

  std::shared_ptr<const grove::Model> model_bytes_;
  grove_session_t* session_ = nullptr;
};

TEST_F(DlpackTest, RunTakesInputsInPlaceAndHandsOutOwnedOutputs) {
  for (int batch : {1, 3, 8}) {
    SCOPED_TRACE(batch);
    std::vector<float> x = Input(batch);
    TestTensor in(x.data(), {batch, 4});
    DLManagedTensor* inputs[1] = {in.get()};
    DLManagedTensor* outs[3] = {};
    ASSERT_TRUE(Ok(grove_session_run_dlpack(session_, inputs, 1, outs, 3)));
    EXPECT_EQ(in.deleted, 1);
    const std::vector<float> h = ExpectedH(x, batch);
    std::vector<float> y = h;
    for (float& v : y) v = v > 0 ? v : 0;
    for (DLManagedTensor* out : outs) {
      ASSERT_NE(out, nullptr);
      EXPECT_EQ(out->dl_tensor.device.device_type, kDLCPU);
      EXPECT_EQ(out->dl_tensor.device.device_id, 0);
      EXPECT_EQ(out->dl_tensor.byte_offset, 0u);
      EXPECT_THAT(ShapeOf(out), ElementsAre(batch, 2));
      ASSERT_NE(out->dl_tensor.strides, nullptr);
      EXPECT_EQ(out->dl_tensor.strides[0], 2);
      EXPECT_EQ(out->dl_tensor.strides[1], 1);
      ASSERT_NE(out->deleter, nullptr);
    }
    EXPECT_EQ(outs[0]->dl_tensor.dtype.code, kDLFloat);
    EXPECT_EQ(outs[0]->dl_tensor.dtype.bits, 32);
    EXPECT_EQ(outs[0]->dl_tensor.dtype.lanes, 1);
    EXPECT_EQ(outs[2]->dl_tensor.dtype.code, 6) << "kDLBool";
    EXPECT_EQ(outs[2]->dl_tensor.dtype.bits, 8);
    EXPECT_THAT(FloatsOf(outs[0]), Pointwise(FloatNear(1e-5f), y));
    EXPECT_THAT(FloatsOf(outs[1]), Pointwise(FloatNear(1e-5f), h));
    const auto* positive = static_cast<const uint8_t*>(outs[2]->dl_tensor.data);
    for (size_t i = 0; i < h.size(); ++i) EXPECT_EQ(positive[i], h[i] > 0 ? 1 : 0) << i;
    // The outputs are copies: a second run does not touch them.
    std::vector<float> x2(batch * 4, 1.0f);
    TestTensor in2(x2.data(), {batch, 4});
    DLManagedTensor* inputs2[1] = {in2.get()};
    DLManagedTensor* outs2[3] = {};
    ASSERT_TRUE(Ok(grove_session_run_dlpack(session_, inputs2, 1, outs2, 3)));
    EXPECT_THAT(FloatsOf(outs[1]), Pointwise(FloatNear(1e-5f), h));
    for (DLManagedTensor* out : outs) out->deleter(out);
    for (DLManagedTensor* out : outs2) out->deleter(out);
  }
}

TEST_F(DlpackTest, OutputsOutliveTheSession) {
  std::vector<float> x = Input(2);
  TestTensor in(x.data(), {2, 4});
  DLManagedTensor* inputs[1] = {in.get()};
  DLManagedTensor* outs[3] = {};
  ASSERT_TRUE(Ok(grove_session_run_dlpack(session_, inputs, 1, outs, 3)));
  grove_session_release(session_);
  session_ = nullptr;
  EXPECT_THAT(FloatsOf(outs[1]), Pointwise(FloatNear(1e-5f), ExpectedH(x, 2)));
  for (DLManagedTensor* out : outs) out->deleter(out);
}

TEST_F(DlpackTest, ViewPointsAtTheDataAndMixesWithGroveTensors) {
  // An 8-byte offset into a buffer: the view points at data + byte_offset.
  std::vector<float> buffer(2 + 3 * 4);
  std::vector<float> x = Input(3);
  std::copy(x.begin(), x.end(), buffer.begin() + 2);
  TestTensor in(buffer.data(), {3, 4});
  in.managed.dl_tensor.byte_offset = 2 * sizeof(float);
  grove_tensor_t view{};
  ASSERT_TRUE(Ok(grove_dlpack_view(session_, in.get(), &view)));
  EXPECT_EQ(in.deleted, 0) << "a view borrows";
  EXPECT_EQ(view.data, buffer.data() + 2);
  EXPECT_EQ(view.dtype, GROVE_DTYPE_F32);
  EXPECT_EQ(view.rank, 2);
  EXPECT_EQ(view.dims[0], 3);
  EXPECT_EQ(view.dims[1], 4);
  EXPECT_EQ(view.byte_size, 3 * 4 * sizeof(float));
  grove_tensor_t outs[3] = {};
  ASSERT_TRUE(Ok(grove_session_run(session_, &view, 1, outs, 3)));
  const auto* h = static_cast<const float*>(outs[1].data);
  EXPECT_THAT(std::vector<float>(h, h + 6), Pointwise(FloatNear(1e-5f), ExpectedH(x, 3)));

  // The same through the run: byte_offset honoured, no copy needed.
  DLManagedTensor* inputs[1] = {in.get()};
  DLManagedTensor* dl_outs[3] = {};
  ASSERT_TRUE(Ok(grove_session_run_dlpack(session_, inputs, 1, dl_outs, 3)));
  EXPECT_EQ(in.deleted, 1);
  EXPECT_THAT(FloatsOf(dl_outs[1]), Pointwise(FloatNear(1e-5f), ExpectedH(x, 3)));
  for (DLManagedTensor* out : dl_outs) out->deleter(out);
}

TEST_F(DlpackTest, CompactStridesAreTakenStridedOnesRefused) {
  std::vector<float> x = Input(2);
  {
    TestTensor in(x.data(), {2, 4});
    in.SetStrides({4, 1});
    grove_tensor_t view{};
    EXPECT_TRUE(Ok(grove_dlpack_view(session_, in.get(), &view)));
    EXPECT_EQ(view.data, x.data());
  }
  {
    // A dim of extent 1 is never stepped: any stride (PyTorch writes such).
    TestTensor in(x.data(), {1, 4});
    in.SetStrides({12345, 1});
    grove_tensor_t view{};
    EXPECT_TRUE(Ok(grove_dlpack_view(session_, in.get(), &view)));
  }
  {
    // A transposed view (column-major).
    TestTensor in(x.data(), {2, 4});
    in.SetStrides({1, 2});
    EXPECT_THAT(RunFails(in), HasSubstr("input 0 ('x'): strides [1,2] (elements) of shape [2,4] are not compact "
                                        "row-major (dim 1 has stride 2, expected 1)"));
  }
  {
    // Every other row (a slice with a step).
    TestTensor in(x.data(), {1, 2});
    in.SetStrides({8, 2});
    EXPECT_THAT(ViewFails(in), HasSubstr("tensor: strides [8,2] (elements) of shape [1,2] are not compact"));
  }
  {
    // Broadcast (stride 0).
    TestTensor in(x.data(), {3, 4});
    in.SetStrides({0, 1});
    EXPECT_THAT(ViewFails(in), HasSubstr("dim 0 has stride 0, expected 4"));
  }
}

TEST_F(DlpackTest, ElementTypesMapToGroveDtypes) {
  struct Case {
    DLDataType dl;
    grove_dtype_t grove;
  };
  const Case cases[] = {
      {{kDLFloat, 16, 1}, GROVE_DTYPE_F16}, {{kDLFloat, 32, 1}, GROVE_DTYPE_F32}, {{kDLFloat, 64, 1}, GROVE_DTYPE_F64},
      {{kDLBfloat, 16, 1}, GROVE_DTYPE_BF16}, {{kDLInt, 8, 1}, GROVE_DTYPE_I8},   {{kDLInt, 16, 1}, GROVE_DTYPE_I16},
      {{kDLInt, 32, 1}, GROVE_DTYPE_I32},    {{kDLInt, 64, 1}, GROVE_DTYPE_I64},  {{kDLUInt, 8, 1}, GROVE_DTYPE_U8},
      {{kDLUInt, 16, 1}, GROVE_DTYPE_U16},   {{kDLUInt, 32, 1}, GROVE_DTYPE_U32}, {{kDLUInt, 64, 1}, GROVE_DTYPE_U64},
      {{6, 8, 1}, GROVE_DTYPE_BOOL},
  };
  alignas(8) uint8_t data[64] = {};
  for (const Case& c : cases) {
    SCOPED_TRACE(grove_dtype_name(c.grove));
    TestTensor in(data, {2, 3}, c.dl);
    grove_tensor_t view{};
    ASSERT_TRUE(Ok(grove_dlpack_view(session_, in.get(), &view)));
    EXPECT_EQ(view.dtype, c.grove);
    EXPECT_EQ(view.byte_size, 6 * grove_dtype_size(c.grove));
  }
}

TEST_F(DlpackTest, RefusedElementTypes) {
  alignas(16) float data[16] = {};
  {
    TestTensor in(data, {2, 4}, {kDLFloat, 32, 4});
    EXPECT_THAT(RunFails(in), HasSubstr("input 0 ('x'): dtype (code 2, bits 32, lanes 4) has 4 lanes; grove takes "
                                        "scalar elements (lanes 1) only"));
  }
  {
    TestTensor in(data, {2, 4}, {kDLComplex, 64, 1});
    EXPECT_THAT(RunFails(in), HasSubstr("input 0 ('x'): dtype (code 5, bits 64, lanes 1) has no grove dtype"));
  }
  for (DLDataType dl : {DLDataType{kDLFloat, 8, 1}, DLDataType{kDLBfloat, 32, 1}, DLDataType{kDLInt, 128, 1},
                        DLDataType{kDLOpaqueHandle, 64, 1}, DLDataType{6, 32, 1}, DLDataType{99, 32, 1},
                        DLDataType{kDLFloat, 32, 0}}) {
    TestTensor in(data, {2, 4}, dl);
    EXPECT_THAT(ViewFails(in), HasSubstr("tensor: dtype (code "));
  }
  {
    // A grove dtype, but not the model's: the run names it.
    TestTensor in(data, {2, 4}, {kDLInt, 32, 1});
    EXPECT_THAT(RunFails(in), HasSubstr("i32"));
  }
}

TEST_F(DlpackTest, RefusedDevices) {
  float data[8] = {};
  {
    TestTensor in(data, {2, 4}, {kDLFloat, 32, 1}, {kDLCUDA, 0});
    EXPECT_THAT(RunFails(in), HasSubstr("input 0 ('x'): is on kDLCUDA device 0 but the session runs on the CPU"));
  }
  for (DLDeviceType type : {kDLOpenCL, kDLVulkan, kDLMetal, kDLROCM, kDLCUDAManaged}) {
    TestTensor in(data, {2, 4}, {kDLFloat, 32, 1}, {type, 0});
    EXPECT_THAT(ViewFails(in), HasSubstr("; grove takes kDLCPU and kDLCUDAHost (host memory), and kDLCUDA on a "
                                         "CUDA session"));
  }
  TestTensor odd(data, {2, 4}, {kDLFloat, 32, 1}, {static_cast<DLDeviceType>(77), 0});
  EXPECT_THAT(ViewFails(odd), HasSubstr("tensor: is on device type 77"));
  // Pinned host memory is host memory.
  TestTensor pinned(data, {2, 4}, {kDLFloat, 32, 1}, {kDLCUDAHost, 0});
  grove_tensor_t view{};
  EXPECT_TRUE(Ok(grove_dlpack_view(session_, pinned.get(), &view)));
}

TEST_F(DlpackTest, RefusedLayouts) {
  alignas(16) float data[16] = {};
  {
    TestTensor in(data, {2, 4});
    in.managed.dl_tensor.byte_offset = 2;
    EXPECT_THAT(RunFails(in), HasSubstr("input 0 ('x'): data + byte_offset (2) is not aligned to its f32 elements "
                                        "(4 bytes)"));
  }
  {
    TestTensor in(reinterpret_cast<char*>(data) + 1, {2, 4});
    EXPECT_THAT(ViewFails(in), HasSubstr("data + byte_offset (0) is not aligned"));
  }
  {
    TestTensor in(data, {2, 4});
    in.managed.dl_tensor.byte_offset = UINT64_MAX - 2;
    EXPECT_THAT(ViewFails(in), HasSubstr("overflows"));
  }
  {
    TestTensor in(data, {1, 1, 1, 1, 1, 1, 1, 1, 2});
    EXPECT_THAT(RunFails(in), HasSubstr("input 0 ('x'): ndim 9 is outside 0..8"));
  }
  {
    TestTensor in(data, {2, 4});
    in.managed.dl_tensor.ndim = -1;
    EXPECT_THAT(ViewFails(in), HasSubstr("ndim -1 is outside 0..8"));
  }
  {
    TestTensor in(data, {2, 4});
    in.managed.dl_tensor.shape = nullptr;
    EXPECT_THAT(RunFails(in), HasSubstr("input 0 ('x'): shape is NULL"));
  }
  {
    TestTensor in(data, {2, -4});
    EXPECT_THAT(RunFails(in), HasSubstr("input 0 ('x'): dim 1 is negative (-4)"));
  }
  {
    TestTensor in(data, {INT64_MAX / 2, 4});
    EXPECT_THAT(ViewFails(in), HasSubstr("shape [4611686018427387903,4] overflows"));
  }
  {
    TestTensor in(nullptr, {2, 4});
    EXPECT_THAT(RunFails(in), HasSubstr("input 0 ('x'): data is NULL"));
  }
  {
    // No elements: data may be NULL, strides and offsets are not read.
    TestTensor in(nullptr, {0, 4});
    in.SetStrides({7, 9});
    grove_tensor_t view{};
    EXPECT_TRUE(Ok(grove_dlpack_view(session_, in.get(), &view)));
    EXPECT_EQ(view.byte_size, 0u);
  }
}

TEST_F(DlpackTest, ViewArguments) {
  float data[8] = {};
  TestTensor in(data, {2, 4});
  grove_tensor_t view{};
  EXPECT_THAT(Failure(grove_dlpack_view(nullptr, in.get(), &view)), HasSubstr("grove_dlpack_view: session is NULL"));
  EXPECT_THAT(Failure(grove_dlpack_view(session_, nullptr, &view)), HasSubstr("grove_dlpack_view: tensor is NULL"));
  EXPECT_THAT(Failure(grove_dlpack_view(session_, in.get(), nullptr)),
              HasSubstr("grove_dlpack_view: out_tensor is NULL"));
  EXPECT_EQ(in.deleted, 0);
}

// Every way a run can fail still calls each input's deleter exactly once.
TEST_F(DlpackTest, DeletersAreCalledOnceOnEveryErrorPath) {
  std::vector<float> x = Input(2);
  DLManagedTensor* outs[3] = {};
  {
    TestTensor in(x.data(), {2, 4});
    DLManagedTensor* inputs[1] = {in.get()};
    EXPECT_THAT(Failure(grove_session_run_dlpack(nullptr, inputs, 1, outs, 3)), HasSubstr("session is NULL"));
    EXPECT_EQ(in.deleted, 1);
  }
  {
    grove_session_t* gone =
        grove::c_internal::WrapSession(grove::Session::Create(model_bytes_, {}).value(), {});
    grove_session_release(gone);
    TestTensor in(x.data(), {2, 4});
    DLManagedTensor* inputs[1] = {in.get()};
    EXPECT_THAT(Failure(grove_session_run_dlpack(gone, inputs, 1, outs, 3)), HasSubstr("(it was released)"));
    EXPECT_EQ(in.deleted, 1);
  }
  {
    TestTensor a(x.data(), {2, 4}), b(x.data(), {2, 4});
    DLManagedTensor* inputs[2] = {a.get(), b.get()};
    EXPECT_THAT(Failure(grove_session_run_dlpack(session_, inputs, 2, outs, 3)),
                HasSubstr("n_inputs is 2 but the model has 1 inputs"));
    EXPECT_EQ(a.deleted, 1);
    EXPECT_EQ(b.deleted, 1);
  }
  {
    TestTensor in(x.data(), {2, 4});
    DLManagedTensor* inputs[1] = {in.get()};
    EXPECT_THAT(Failure(grove_session_run_dlpack(session_, inputs, 1, outs, 2)),
                HasSubstr("n_outputs is 2 but the model has 3 outputs"));
    EXPECT_EQ(in.deleted, 1);
  }
  {
    TestTensor in(x.data(), {2, 4});
    DLManagedTensor* inputs[1] = {in.get()};
    EXPECT_THAT(Failure(grove_session_run_dlpack(session_, inputs, 1, nullptr, 3)),
                HasSubstr("out_outputs is NULL"));
    EXPECT_EQ(in.deleted, 1);
  }
  EXPECT_THAT(Failure(grove_session_run_dlpack(session_, nullptr, 1, outs, 3)), HasSubstr("inputs is NULL"));
  {
    DLManagedTensor* inputs[1] = {nullptr};
    EXPECT_THAT(Failure(grove_session_run_dlpack(session_, inputs, 1, outs, 3)),
                HasSubstr("input 0 ('x') is NULL"));
  }
  {
    // One tensor given twice is released once.
    TestTensor in(x.data(), {2, 4});
    DLManagedTensor* inputs[3] = {in.get(), nullptr, in.get()};
    EXPECT_THAT(Failure(grove_session_run_dlpack(session_, inputs, 3, outs, 3)), HasSubstr("n_inputs is 3"));
    EXPECT_EQ(in.deleted, 1);
  }
  {
    // The run itself fails: batch 9 is past the symbol's range.
    std::vector<float> big(9 * 4, 1.0f);
    TestTensor in(big.data(), {9, 4});
    EXPECT_THAT(RunFails(in), HasSubstr("batch"));
  }
  {
    // A tensor without a deleter (DLPack allows NULL) is fine.
    TestTensor in(x.data(), {2, 4});
    in.managed.deleter = nullptr;
    DLManagedTensor* inputs[1] = {in.get()};
    ASSERT_TRUE(Ok(grove_session_run_dlpack(session_, inputs, 1, outs, 3)));
    for (DLManagedTensor* out : outs) out->deleter(out);
  }
  // The session is usable after all that.
  TestTensor in(x.data(), {2, 4});
  DLManagedTensor* inputs[1] = {in.get()};
  ASSERT_TRUE(Ok(grove_session_run_dlpack(session_, inputs, 1, outs, 3)));
  EXPECT_EQ(in.deleted, 1);
  EXPECT_THAT(FloatsOf(outs[1]), Pointwise(FloatNear(1e-5f), ExpectedH(x, 2)));
  for (DLManagedTensor* out : outs) out->deleter(out);
}

TEST(DlpackStrings, StringOutputsAreRefused) {
  grove::ModelBuilder b;
  b.AddInput("x", grove::DType::kF32, {2});
  const std::string words[] = {"a", "b"};
  b.AddStringWeight("words", {2}, words);
  b.AddOp("Relu", {"x"}, {"y"});
  b.AddOp("Identity", {"words"}, {"s"});
  b.AddOutput("y");
  b.AddOutput("s");
  std::shared_ptr<const grove::Model> model = grove::Model::LoadFromBuffer(b.Finish().value()).value();
  grove::SessionOptions options;
  options.device = grove::Device::kCpu;
  grove_session_t* session = grove::c_internal::WrapSession(grove::Session::Create(model, options).value(), options);
  float x[2] = {1, -1};
  TestTensor in(x, {2});
  DLManagedTensor* inputs[1] = {in.get()};
  DLManagedTensor* outs[2] = {};
  EXPECT_THAT(Failure(grove_session_run_dlpack(session, inputs, 1, outs, 2)),
              HasSubstr("output 1 ('s') is a string tensor, which DLPack cannot carry; use grove_session_run"));
  EXPECT_EQ(in.deleted, 1);
  grove_session_release(session);
}

// A C handle around a session on the emulated CUDA device.
struct Wrapped {
  Wrapped(std::shared_ptr<const grove::Model> model, const grove::SessionOptions& options,
          std::shared_ptr<grove::cuda::Device> device) {
    absl::StatusOr<std::unique_ptr<grove::Session>> s = grove::internal::CreateSessionOnDevice(model, options, device);
    EXPECT_TRUE(s.ok()) << s.status();
    if (s.ok()) session = grove::c_internal::WrapSession(*std::move(s), options);
  }
  ~Wrapped() { grove_session_release(session); }
  grove_session_t* session = nullptr;
};

TEST(DlpackCuda, DeviceTensorsOnTheEmulatedDevice) {
  std::shared_ptr<const grove::Model> model = DenseModel();
  std::shared_ptr<grove::cuda::Device> device = grove::cuda::NewEmulatedDevice();
  grove::SessionOptions options;
  options.cuda_device = 1;  // the ordinal a kDLCUDA tensor must name
  Wrapped cuda(model, options, device);
  ASSERT_NE(cuda.session, nullptr);

  const int batch = 3;
  std::vector<float> x = Input(batch);
  const size_t bytes = x.size() * sizeof(float);
  void* dx = device->Allocate(bytes).value();
  std::memcpy(dx, x.data(), bytes);  // emulated device memory is host memory

  // A kDLCUDA input is used in place: nothing copied to the device.
  TestTensor din(dx, {batch, 4}, {kDLFloat, 32, 1}, {kDLCUDA, 1});
  DLManagedTensor* inputs[1] = {din.get()};
  DLManagedTensor* outs[3] = {};
  ASSERT_TRUE(Ok(grove_session_run_dlpack(cuda.session, inputs, 1, outs, 3)));
  EXPECT_EQ(din.deleted, 1);
  grove_session_stats_t stats = GROVE_SESSION_STATS_INIT;
  ASSERT_TRUE(Ok(grove_session_stats(cuda.session, &stats)));
  EXPECT_EQ(stats.bytes_host_to_device, 0) << "a kDLCUDA input was copied";
  EXPECT_EQ(outs[1]->dl_tensor.device.device_type, kDLCPU);
  EXPECT_THAT(FloatsOf(outs[1]), Pointwise(FloatNear(1e-5f), ExpectedH(x, batch)));
  for (DLManagedTensor* out : outs) out->deleter(out);

  // A host input is copied in.
  TestTensor host(x.data(), {batch, 4});
  DLManagedTensor* host_inputs[1] = {host.get()};
  ASSERT_TRUE(Ok(grove_session_run_dlpack(cuda.session, host_inputs, 1, outs, 3)));
  ASSERT_TRUE(Ok(grove_session_stats(cuda.session, &stats)));
  EXPECT_EQ(stats.bytes_host_to_device, static_cast<int64_t>(bytes));
  EXPECT_THAT(FloatsOf(outs[1]), Pointwise(FloatNear(1e-5f), ExpectedH(x, batch)));
  for (DLManagedTensor* out : outs) out->deleter(out);

  // Another CUDA device's tensor is refused.
  TestTensor other(dx, {batch, 4}, {kDLFloat, 32, 1}, {kDLCUDA, 0});
  DLManagedTensor* other_inputs[1] = {other.get()};
  EXPECT_THAT(Failure(grove_session_run_dlpack(cuda.session, other_inputs, 1, outs, 3)),
              HasSubstr("input 0 ('x'): is on kDLCUDA device 0 but the session runs on CUDA device 1"));
  EXPECT_EQ(other.deleted, 1);
  grove_tensor_t view{};
  TestTensor viewed(dx, {batch, 4}, {kDLFloat, 32, 1}, {kDLCUDA, 1});
  ASSERT_TRUE(Ok(grove_dlpack_view(cuda.session, viewed.get(), &view)));
  EXPECT_EQ(view.data, dx);
  device->Free(dx);
}

TEST(DlpackCuda, OutputsOnDeviceAreRefused) {
  std::shared_ptr<const grove::Model> model = DenseModel();
  grove::SessionOptions options;
  options.outputs_on_device = true;
  Wrapped cuda(model, options, grove::cuda::NewEmulatedDevice());
  ASSERT_NE(cuda.session, nullptr);
  std::vector<float> x = Input(2);
  TestTensor in(x.data(), {2, 4});
  DLManagedTensor* inputs[1] = {in.get()};
  DLManagedTensor* outs[3] = {};
  EXPECT_THAT(Failure(grove_session_run_dlpack(cuda.session, inputs, 1, outs, 3), GROVE_STATUS_FAILED_PRECONDITION),
              HasSubstr("use grove_session_run_into with device buffers"));
  EXPECT_EQ(in.deleted, 1);
}

}  // namespace
