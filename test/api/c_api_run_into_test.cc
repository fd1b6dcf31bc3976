// grove_session_run_into (Session::RunInto through the C ABI): the caller's
// host buffers on the CPU, host and device buffers on the emulated CUDA
// device, every bad argument; and the CUDA counters of grove_session_stats
// (fallback steps, bytes copied, allocations, synchronizations, segments) on
// the emulated device. The emulated sessions are made by the C++ API and
// wrapped in a C handle (lib/c/c_api_internal.h): the C ABI has no way to ask
// for the emulated device.
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

using ::testing::FloatNear;
using ::testing::HasSubstr;
using ::testing::Pointwise;

using grove::c_test::Ok;
using grove::c_test::Failure;

constexpr float kW[4 * 2] = {1, -1, 2, 0, -1, 1, 0.5f, 2};

// x[batch, 4] f32 -> h = x W [batch, 2], y = Relu(h); outputs y, h.
std::shared_ptr<const grove::Model> DenseModel() {
  grove::ModelBuilder b;
  b.AddSymbol("batch", 1, 8);
  b.AddInput("x", grove::DType::kF32, {"batch", 4});
  b.AddWeight("w", grove::DType::kF32, {4, 2}, std::vector<float>(kW, kW + 8));
  b.AddOp("MatMul", {"x", "w"}, {"h"});
  b.AddOp("Relu", {"h"}, {"y"});
  b.AddOutput("y");
  b.AddOutput("h");
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
std::vector<float> ExpectedY(const std::vector<float>& x, int batch) {
  std::vector<float> y = ExpectedH(x, batch);
  for (float& v : y) v = v > 0 ? v : 0;
  return y;
}

grove_tensor_t F32(int64_t rows, int64_t cols, void* data) {
  grove_tensor_t t{};
  t.dtype = GROVE_DTYPE_F32;
  t.rank = 2;
  t.dims[0] = rows;
  t.dims[1] = cols;
  t.data = data;
  t.byte_size = static_cast<size_t>(rows * cols) * sizeof(float);
  return t;
}

// A C handle around a session made by the C++ API.
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

class CApiRunIntoTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = DenseModel();
    grove::SessionOptions options;
    options.device = grove::Device::kCpu;
    absl::StatusOr<std::unique_ptr<grove::Session>> s = grove::Session::Create(model_, options);
    ASSERT_TRUE(s.ok()) << s.status();
    session_ = grove::c_internal::WrapSession(*std::move(s), options);
  }
  void TearDown() override { grove_session_release(session_); }

  std::shared_ptr<const grove::Model> model_;
  grove_session_t* session_ = nullptr;
};

TEST_F(CApiRunIntoTest, HostBuffersOnTheCpu) {
  for (int batch : {1, 3, 8}) {
    SCOPED_TRACE(batch);
    std::vector<float> x = Input(batch);
    grove_tensor_t in = F32(batch, 4, x.data());
    std::vector<float> y(batch * 2, -9), h(batch * 2, -9);
    const grove_tensor_t out[2] = {F32(batch, 2, y.data()), F32(batch, 2, h.data())};
    ASSERT_TRUE(Ok(grove_session_run_into(session_, &in, 1, out, 2)));
    EXPECT_THAT(y, Pointwise(FloatNear(1e-5f), ExpectedY(x, batch)));
    EXPECT_THAT(h, Pointwise(FloatNear(1e-5f), ExpectedH(x, batch)));
  }
  // A buffer larger than needed is fine.
  std::vector<float> x = Input(2);
  grove_tensor_t in = F32(2, 4, x.data());
  std::vector<float> y(64, -9), h(64, -9);
  grove_tensor_t out[2] = {F32(2, 2, y.data()), F32(2, 2, h.data())};
  out[0].byte_size = out[1].byte_size = 64 * sizeof(float);
  ASSERT_TRUE(Ok(grove_session_run_into(session_, &in, 1, out, 2)));
  EXPECT_EQ(y[4], -9) << "written past the output";
  EXPECT_THAT(std::vector<float>(h.begin(), h.begin() + 4), Pointwise(FloatNear(1e-5f), ExpectedH(x, 2)));
}

TEST_F(CApiRunIntoTest, EveryBadArgumentIsAnErrorNamingIt) {
  std::vector<float> x = Input(2);
  const grove_tensor_t in = F32(2, 4, x.data());
  std::vector<float> y(16), h(16);
  const grove_tensor_t good[2] = {F32(2, 2, y.data()), F32(2, 2, h.data())};

  EXPECT_THAT(Failure(grove_session_run_into(nullptr, &in, 1, good, 2)),
              HasSubstr("grove_session_run_into: session is NULL"));
  EXPECT_THAT(Failure(grove_session_run_into(session_, nullptr, 1, good, 2)), HasSubstr("inputs is NULL"));
  EXPECT_THAT(Failure(grove_session_run_into(session_, &in, 1, nullptr, 2)), HasSubstr("outputs is NULL"));
  EXPECT_THAT(Failure(grove_session_run_into(session_, &in, 0, good, 2)), HasSubstr("n_inputs is 0 but the model has 1"));
  EXPECT_THAT(Failure(grove_session_run_into(session_, &in, 1, good, 1)),
              HasSubstr("n_outputs is 1 but the model has 2 outputs"));
  EXPECT_THAT(Failure(grove_session_run_into(session_, &in, 1, good, 3)), HasSubstr("n_outputs is 3"));

  grove_tensor_t out[2] = {good[0], good[1]};
  out[1].data = nullptr;  // not "session-owned" here: every output needs a buffer
  EXPECT_THAT(Failure(grove_session_run_into(session_, &in, 1, out, 2)),
              HasSubstr("grove_session_run_into: output 1 ('h'): data is NULL"));
  out[1] = good[1];
  out[0].byte_size = 15;
  EXPECT_THAT(Failure(grove_session_run_into(session_, &in, 1, out, 2)),
              HasSubstr("output 0 ('y'): f32[2,2] needs 16 bytes but byte_size is 15"));
  out[0] = good[0];
  out[0].dims[0] = 3;  // the buffer says 3 rows; the result has 2
  out[0].byte_size = 3 * 2 * sizeof(float);
  EXPECT_THAT(Failure(grove_session_run_into(session_, &in, 1, out, 2)),
              HasSubstr("output 'y' is f32[2, 2] but the caller's buffer is f32[3, 2]"));
  out[0] = good[0];
  out[0].rank = 1;
  out[0].dims[0] = 4;
  EXPECT_THAT(Failure(grove_session_run_into(session_, &in, 1, out, 2)),
              HasSubstr("output 'y' is f32[2, 2] but the caller's buffer is f32[4]"));
  out[0] = good[0];
  out[0].dtype = GROVE_DTYPE_I32;
  EXPECT_THAT(Failure(grove_session_run_into(session_, &in, 1, out, 2)),
              HasSubstr("output 'y' is f32[2, 2] but the caller's buffer is i32[2, 2]"));
  out[0].dtype = 99;
  EXPECT_THAT(Failure(grove_session_run_into(session_, &in, 1, out, 2)), HasSubstr("output 0 ('y'): unknown dtype 99"));
  out[0] = good[0];
  out[0].rank = GROVE_MAX_RANK + 1;
  EXPECT_THAT(Failure(grove_session_run_into(session_, &in, 1, out, 2)), HasSubstr("output 0 ('y'): rank 9"));
  out[0] = good[0];
  out[0].dims[1] = -2;
  EXPECT_THAT(Failure(grove_session_run_into(session_, &in, 1, out, 2)), HasSubstr("output 0 ('y'): dim 1 is negative"));

  grove_tensor_t bad_in = in;
  bad_in.byte_size = 4;
  EXPECT_THAT(Failure(grove_session_run_into(session_, &bad_in, 1, good, 2)),
              HasSubstr("input 0 ('x'): f32[2,4] needs 32 bytes but byte_size is 4"));
  bad_in = in;
  bad_in.dims[0] = 9;  // past the symbol's range 1..8
  bad_in.byte_size = 9 * 4 * sizeof(float);
  std::vector<float> big(36);
  bad_in.data = big.data();
  EXPECT_EQ(Failure(grove_session_run_into(session_, &bad_in, 1, good, 2), GROVE_STATUS_INVALID_ARGUMENT).empty(), false);

  // Released session.
  grove_session_t* gone = grove::c_internal::WrapSession(grove::Session::Create(model_, {}).value(), {});
  grove_session_release(gone);
  EXPECT_THAT(Failure(grove_session_run_into(gone, &in, 1, good, 2)), HasSubstr("it was released"));

  // The session is still usable after all that.
  ASSERT_TRUE(Ok(grove_session_run_into(session_, &in, 1, good, 2)));
  EXPECT_THAT(std::vector<float>(h.begin(), h.begin() + 4), Pointwise(FloatNear(1e-5f), ExpectedH(x, 2)));
}

// On the emulated CUDA device: inputs and outputs in device memory (written
// by the kernels, no copy back), in host memory, and mixed; the results equal
// the CPU's; the CUDA counters of grove_session_stats move.
TEST(CApiRunIntoCuda, DeviceAndHostBuffersOnTheEmulatedDevice) {
  std::shared_ptr<const grove::Model> model = DenseModel();
  std::shared_ptr<grove::cuda::Device> device = grove::cuda::NewEmulatedDevice();
  grove::SessionOptions options;
  options.strict_device = true;  // MatMul and Relu have CUDA kernels
  Wrapped cuda(model, options, device);
  ASSERT_NE(cuda.session, nullptr);
  grove_device_t kind = -1;
  ASSERT_TRUE(Ok(grove_session_device(cuda.session, &kind)));
  EXPECT_EQ(kind, GROVE_DEVICE_CUDA);

  const int batch = 3;
  std::vector<float> x = Input(batch);
  const size_t in_bytes = x.size() * sizeof(float);
  const size_t out_bytes = batch * 2 * sizeof(float);
  void* dx = device->Allocate(in_bytes).value();
  void* dy = device->Allocate(out_bytes).value();
  void* dh = device->Allocate(out_bytes).value();
  std::memcpy(dx, x.data(), in_bytes);  // emulated device memory is host memory

  // Host input, host outputs.
  grove_tensor_t in = F32(batch, 4, x.data());
  std::vector<float> y(batch * 2, -9), h(batch * 2, -9);
  grove_tensor_t out[2] = {F32(batch, 2, y.data()), F32(batch, 2, h.data())};
  ASSERT_TRUE(Ok(grove_session_run_into(cuda.session, &in, 1, out, 2)));
  EXPECT_THAT(y, Pointwise(FloatNear(1e-5f), ExpectedY(x, batch)));
  EXPECT_THAT(h, Pointwise(FloatNear(1e-5f), ExpectedH(x, batch)));
  grove_session_stats_t first = GROVE_SESSION_STATS_INIT;
  ASSERT_TRUE(Ok(grove_session_stats(cuda.session, &first)));
  EXPECT_EQ(first.runs, 1);
  EXPECT_EQ(first.bytes_host_to_device, static_cast<int64_t>(in_bytes));
  EXPECT_EQ(first.bytes_device_to_host, static_cast<int64_t>(2 * out_bytes));
  EXPECT_EQ(first.cpu_fallback_steps, 0);
  EXPECT_GT(first.device_allocations, 0);
  EXPECT_GT(first.device_synchronizations, 0);
  EXPECT_GT(first.segments_run, 0);
  EXPECT_GT(first.kernels_run, 0);
  // Every segment run is a graph capture or replay, or runs eagerly.
  EXPECT_GT(first.graphs_captured + first.segments_run_eagerly, 0);
  ASSERT_NE(first.graph_fallback_reason, nullptr);

  // Device input, device outputs: nothing crosses to the host.
  const grove_tensor_t din = F32(batch, 4, dx);
  const grove_tensor_t dout[2] = {F32(batch, 2, dy), F32(batch, 2, dh)};
  ASSERT_TRUE(Ok(grove_session_run_into(cuda.session, &din, 1, dout, 2)));
  grove_session_stats_t second = GROVE_SESSION_STATS_INIT;
  ASSERT_TRUE(Ok(grove_session_stats(cuda.session, &second)));
  EXPECT_EQ(second.runs, 2);
  EXPECT_EQ(second.bytes_host_to_device, first.bytes_host_to_device) << "a device input was copied";
  EXPECT_EQ(second.bytes_device_to_host, first.bytes_device_to_host) << "device outputs were copied to the host";
  EXPECT_EQ(second.plans_created, first.plans_created);
  EXPECT_THAT(std::vector<float>(static_cast<float*>(dy), static_cast<float*>(dy) + batch * 2),
              Pointwise(FloatNear(1e-5f), ExpectedY(x, batch)));
  EXPECT_THAT(std::vector<float>(static_cast<float*>(dh), static_cast<float*>(dh) + batch * 2),
              Pointwise(FloatNear(1e-5f), ExpectedH(x, batch)));

  // Mixed: one device, one host output.
  std::fill(h.begin(), h.end(), -9.0f);
  const grove_tensor_t mixed[2] = {F32(batch, 2, dy), F32(batch, 2, h.data())};
  ASSERT_TRUE(Ok(grove_session_run_into(cuda.session, &din, 1, mixed, 2)));
  EXPECT_THAT(h, Pointwise(FloatNear(1e-5f), ExpectedH(x, batch)));

  // A device buffer too small for the result is refused before running.
  grove_tensor_t small[2] = {dout[0], dout[1]};
  small[1].byte_size = out_bytes - 1;
  EXPECT_THAT(Failure(grove_session_run_into(cuda.session, &din, 1, small, 2)),
              HasSubstr("output 1 ('h'): f32[3,2] needs 24 bytes but byte_size is 23"));
  grove_session_stats_t after = GROVE_SESSION_STATS_INIT;
  ASSERT_TRUE(Ok(grove_session_stats(cuda.session, &after)));
  EXPECT_EQ(after.runs, 3) << "a refused call ran";

  device->Free(dx);
  device->Free(dy);
  device->Free(dh);
}

// With outputs_on_device, session-owned outputs are device pointers; a mix
// of those and caller buffers (which grove_session_run would fill with a
// host copy) is refused; every output given a buffer works.
TEST(CApiRunIntoCuda, OutputsOnDeviceRefusesAMixInGroveSessionRun) {
  std::shared_ptr<const grove::Model> model = DenseModel();
  std::shared_ptr<grove::cuda::Device> device = grove::cuda::NewEmulatedDevice();
  grove::SessionOptions options;
  options.outputs_on_device = true;
  Wrapped cuda(model, options, device);
  ASSERT_NE(cuda.session, nullptr);
  std::vector<float> x = Input(2);
  grove_tensor_t in = F32(2, 4, x.data());

  grove_tensor_t owned[2] = {};
  ASSERT_TRUE(Ok(grove_session_run(cuda.session, &in, 1, owned, 2)));
  EXPECT_TRUE(device->IsDevicePointer(owned[0].data));
  EXPECT_TRUE(device->IsDevicePointer(owned[1].data));

  std::vector<float> h(4, -9);
  grove_tensor_t mixed[2] = {{}, F32(2, 2, h.data())};
  EXPECT_THAT(Failure(grove_session_run(cuda.session, &in, 1, mixed, 2), GROVE_STATUS_FAILED_PRECONDITION),
              HasSubstr("grove_session_run: with outputs_on_device, give every output a buffer"));
  EXPECT_EQ(mixed[0].data, nullptr) << "a refused run changed its outputs";

  std::vector<float> y(4, -9);
  const grove_tensor_t all[2] = {F32(2, 2, y.data()), F32(2, 2, h.data())};
  ASSERT_TRUE(Ok(grove_session_run_into(cuda.session, &in, 1, all, 2)));
  EXPECT_THAT(y, Pointwise(FloatNear(1e-5f), ExpectedY(x, 2)));
}

// An op with no CUDA kernel (NonZero) runs on the CPU with copies: the C
// stats count the fallback step and its bytes.
TEST(CApiRunIntoCuda, StatsCountCpuFallbacks) {
  grove::ModelBuilder b;
  b.AddInput("x", grove::DType::kF32, {4});
  b.AddOp("NonZero", {"x"}, {"y"});
  b.AddOutput("y");
  std::shared_ptr<const grove::Model> model = grove::Model::LoadFromBuffer(b.Finish().value()).value();
  Wrapped cuda(model, {}, grove::cuda::NewEmulatedDevice());
  ASSERT_NE(cuda.session, nullptr);
  std::vector<float> x = {0, 2, 0, 3};
  grove_tensor_t in{};
  in.dtype = GROVE_DTYPE_F32;
  in.rank = 1;
  in.dims[0] = 4;
  in.data = x.data();
  in.byte_size = sizeof(float) * 4;
  grove_tensor_t out{};
  ASSERT_TRUE(Ok(grove_session_run(cuda.session, &in, 1, &out, 1)));
  ASSERT_EQ(out.rank, 2);
  EXPECT_EQ(out.dims[1], 2);
  grove_session_stats_t stats = GROVE_SESSION_STATS_INIT;
  ASSERT_TRUE(Ok(grove_session_stats(cuda.session, &stats)));
  EXPECT_EQ(stats.cpu_fallback_steps, 1);
  EXPECT_GT(stats.bytes_host_to_device, 0);
  EXPECT_GT(stats.bytes_device_to_host, 0);
  EXPECT_GT(stats.device_to_host_reads, 0);
}

}  // namespace

namespace {

// grove_session_input_buffer: the session's own input buffer, written by the
// caller and passed to a run in place; bad arguments are errors.
TEST_F(CApiRunIntoTest, InputBufferIsUsedInPlace) {
  const int64_t dims[2] = {3, 4};
  grove_tensor_t in{};
  ASSERT_TRUE(Ok(grove_session_input_buffer(session_, "x", 2, dims, &in)));
  EXPECT_EQ(in.dtype, GROVE_DTYPE_F32);
  ASSERT_EQ(in.rank, 2);
  EXPECT_EQ(in.dims[0], 3);
  EXPECT_EQ(in.dims[1], 4);
  ASSERT_NE(in.data, nullptr);
  EXPECT_EQ(in.byte_size, 3 * 4 * sizeof(float));
  std::vector<float> x = Input(3);
  std::memcpy(in.data, x.data(), in.byte_size);
  std::vector<float> y(6, -9), h(6, -9);
  const grove_tensor_t out[2] = {F32(3, 2, y.data()), F32(3, 2, h.data())};
  ASSERT_TRUE(Ok(grove_session_run_into(session_, &in, 1, out, 2)));
  EXPECT_THAT(h, Pointwise(FloatNear(1e-5f), ExpectedH(x, 3)));

  grove_tensor_t t{};
  EXPECT_THAT(Failure(grove_session_input_buffer(nullptr, "x", 2, dims, &t)), HasSubstr("session is NULL"));
  EXPECT_THAT(Failure(grove_session_input_buffer(session_, nullptr, 2, dims, &t)), HasSubstr("name is NULL"));
  EXPECT_THAT(Failure(grove_session_input_buffer(session_, "x", 2, nullptr, &t)), HasSubstr("dims is NULL"));
  EXPECT_THAT(Failure(grove_session_input_buffer(session_, "x", 2, dims, nullptr)), HasSubstr("out_tensor is NULL"));
  EXPECT_THAT(Failure(grove_session_input_buffer(session_, "x", 9, dims, &t)), HasSubstr("rank 9 is outside 0..8"));
  grove_status_t* unknown = grove_session_input_buffer(session_, "nope", 2, dims, &t);
  EXPECT_NE(grove_status_code(unknown), GROVE_STATUS_OK);
  grove_status_release(unknown);
  EXPECT_EQ(t.data, nullptr) << "a failed call wrote out_tensor";
}

}  // namespace
