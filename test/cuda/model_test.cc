// Whole models on the CUDA backend against the CPU backend: the demo models
// (control flow both ways, data-dependent shapes) and every exported model of
// test/models plus Silero VAD, case by case, in one session per model. On
// the emulated device in CI (the first cases of each, to keep it fast); on
// the GPU under `ctest -L gpu`, every case.
#include <cstdlib>
#include <map>
#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "examples/models/demo_models.h"
#include "grove/npy.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lib/backends/backends.h"
#include "test/cuda_op_test_util.h"
#include "test/model_test_util.h"
#include "tools/onnx/onnx_importer.h"

namespace grove {
namespace {

namespace fs = std::filesystem;
using testing::CompareTensors;
using testing::TestDevice;

constexpr double kTolerance = 1e-4;

struct Sessions {
  std::unique_ptr<Session> cpu, cuda;
};

Sessions MakeSessions(std::shared_ptr<const Model> model) {
  Sessions s;
  SessionOptions cpu_options;
  cpu_options.device = Device::kCpu;
  s.cpu = Session::Create(model, cpu_options).value();
  absl::StatusOr<std::unique_ptr<Session>> cuda = internal::CreateSessionOnDevice(model, {}, TestDevice());
  EXPECT_TRUE(cuda.ok()) << cuda.status();
  if (cuda.ok()) s.cuda = std::move(*cuda);
  return s;
}

// Runs both sessions on `inputs`; expects equal outputs.
void ExpectSame(Sessions& s, const std::vector<Tensor>& inputs, const std::string& what) {
  std::vector<TensorView> views;
  for (const Tensor& t : inputs) views.push_back(t.view());
  absl::StatusOr<std::vector<TensorView>> want = s.cpu->Run(views);
  ASSERT_TRUE(want.ok()) << what << ": " << want.status();
  absl::StatusOr<std::vector<TensorView>> got = s.cuda->Run(views);
  ASSERT_TRUE(got.ok()) << what << " on " << s.cuda->device_description() << ": " << got.status();
  ASSERT_EQ(want->size(), got->size());
  for (size_t i = 0; i < want->size(); ++i) {
    Tensor w = Tensor::CopyOf((*want)[i]).value();
    Tensor g = Tensor::CopyOf((*got)[i]).value();
    EXPECT_EQ(CompareTensors(w, g, kTolerance), "") << what << " output " << i;
  }
}

Tensor F32(std::vector<int64_t> shape, uint32_t seed) {
  Tensor t = Tensor::Create(DType::kF32, shape).value();
  const std::vector<float> v = testing::RandomF32(t.view().num_elements(), seed);
  std::copy(v.begin(), v.end(), t.as<float>());
  return t;
}

TEST(CudaModelTest, MlpAtSeveralBatches) {
  Sessions s = MakeSessions(testing::LoadOrDie(demo::BuildMlp()));
  for (int64_t batch : {1, 7, 64, 7}) ExpectSame(s, {F32({batch, 16}, batch)}, absl::StrCat("mlp batch ", batch));
  EXPECT_GT(s.cuda->stats().plan_cache_hits, 0);
}

TEST(CudaModelTest, TransformerBlock) {
  Sessions s = MakeSessions(testing::LoadOrDie(demo::BuildTransformerBlock()));
  for (auto [b, q] : {std::pair<int64_t, int64_t>{1, 5}, {2, 17}}) {
    ExpectSame(s, {F32({b, q, 32}, static_cast<uint32_t>(b * 100 + q))}, absl::StrCat("transformer ", b, "x", q));
  }
}

TEST(CudaModelTest, EarlyExitTakesBothBranches) {
  Sessions s = MakeSessions(testing::LoadOrDie(demo::BuildEarlyExit()));
  Tensor pos = F32({3, 8}, 1), neg = F32({3, 8}, 2);
  for (int64_t i = 0; i < 24; ++i) {
    pos.as<float>()[i] = std::abs(pos.as<float>()[i]) + 0.1f;
    neg.as<float>()[i] = -std::abs(neg.as<float>()[i]) - 0.1f;
  }
  ExpectSame(s, {pos}, "deep branch");
  ExpectSame(s, {neg}, "shallow branch");
}

TEST(CudaModelTest, LoopWithDataDependentTrips) {
  Sessions s = MakeSessions(testing::LoadOrDie(demo::BuildLoop()));
  for (int64_t trips : {0, 1, 5}) {
    Tensor m = Tensor::Create(DType::kI64, {}).value();
    *m.as<int64_t>() = trips;
    Tensor limit = Tensor::Create(DType::kF32, {}).value();
    *limit.as<float>() = 50.0f;
    ExpectSame(s, {m, F32({4}, 9), limit}, absl::StrCat("loop, trip count ", trips));
  }
}

// A list carried through a Loop (SequenceEmpty, SequenceInsert in the body,
// ConcatFromSequence after): the Loop and its body's Mul run on the device,
// the sequence ops on the host, and the list's tensors stay host tensors.
TEST(CudaModelTest, LoopCarryingASequence) {
  Sessions s = MakeSessions(testing::LoadOrDie(testing::BuildSequenceLoop()));
  for (int64_t trips : {3, 1, 3}) {
    SCOPED_TRACE(trips);
    const std::vector<Value> inputs = {Value(testing::ScalarI64(trips)), Value(F32({2}, 4))};
    absl::StatusOr<std::vector<Value>> want = s.cpu->RunValues(inputs);
    ASSERT_TRUE(want.ok()) << want.status();
    absl::StatusOr<std::vector<Value>> got = s.cuda->RunValues(inputs);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(CompareTensors((*want)[0].tensor(), (*got)[0].tensor(), kTolerance), "");
    ASSERT_EQ((*got)[1].items().size(), static_cast<size_t>(trips));
    for (int64_t i = 0; i < trips; ++i) {
      EXPECT_EQ(CompareTensors((*want)[1].items()[i], (*got)[1].items()[i], kTolerance), "") << "item " << i;
    }
  }
  // The sequence ops ran on the host; the Loop itself did not fall back.
  EXPECT_GT(s.cuda->stats().cpu_fallback_steps, 0);
  SessionOptions strict;
  strict.strict_device = true;
  std::unique_ptr<Session> strict_session =
      internal::CreateSessionOnDevice(testing::LoadOrDie(testing::BuildSequenceLoop()), strict, TestDevice()).value();
  absl::StatusOr<std::vector<Value>> refused =
      strict_session->RunValues({Value(testing::ScalarI64(2)), Value(F32({2}, 4))});
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(std::string(refused.status().message()), ::testing::HasSubstr("SequenceEmpty"));
  EXPECT_THAT(std::string(refused.status().message()), ::testing::Not(::testing::HasSubstr("(Loop")));
}

TEST(CudaModelTest, LoopBodySwapsItsCarriedValues) {
  Sessions s = MakeSessions(testing::LoadOrDie(testing::BuildSwapLoop()));
  for (int64_t trips : {0, 1, 2, 3}) {
    ExpectSame(s, {testing::ScalarI64(trips), F32({2}, 5), F32({2}, 6)}, absl::StrCat("swap, ", trips, " trips"));
  }
}

// BatchNormalization in training mode has no CUDA kernel: the plan runs its
// CPU kernel with copies, beside CUDA steps, and gives the CPU's results.
TEST(CudaModelTest, BatchNormTrainingModeFallsBackToTheCpu) {
  ModelBuilder b;
  b.AddInput("x", DType::kF32, {2, 3, 4});
  b.AddWeight("scale", DType::kF32, {3}, std::vector<float>{1, 2, 0.5f});
  b.AddWeight("bias", DType::kF32, {3}, std::vector<float>{0, 1, -1});
  b.AddWeight("mean", DType::kF32, {3}, std::vector<float>{0.1f, 0.2f, 0.3f});
  b.AddWeight("var", DType::kF32, {3}, std::vector<float>{1, 2, 3});
  b.AddOp("Relu", {"x"}, {"r"});
  b.AddOp("BatchNormalization", {"r", "scale", "bias", "mean", "var"}, {"y", "run_mean", "run_var"},
          {{"training_mode", int64_t{1}}, {"momentum", 0.8}});
  b.AddOutput("y");
  b.AddOutput("run_mean");
  b.AddOutput("run_var");
  Sessions s = MakeSessions(testing::LoadOrDie(b.Finish()));
  ExpectSame(s, {F32({2, 3, 4}, 7)}, "batch norm, training mode");
  EXPECT_EQ(s.cuda->stats().cpu_fallback_steps, 1);
}

// Scan has no CUDA kernel: its CPU kernel runs in the CUDA plan, the body on
// the device through the session.
TEST(CudaModelTest, ScanRunsItsCpuKernelWithADeviceBody) {
  ModelBuilder b;
  b.AddSymbol("t", 1, 64);
  b.AddInput("s0", DType::kF32, {3});
  b.AddInput("x", DType::kF32, {"t", 3});
  const int body = b.AddSubgraph("step");
  b.AddInput("s", DType::kF32, {});
  b.AddInput("row", DType::kF32, {});
  b.AddOp("Add", {"s", "row"}, {"s_next"});
  b.AddOp("Tanh", {"s_next"}, {"y"});
  b.AddOutput("s_next");
  b.AddOutput("y");
  b.SetSubgraph(0);
  b.AddOp("Scan", {"s0", "x"}, {"total", "ys"},
          {{"body", SubgraphRef{body}}, {"num_scan_inputs", int64_t{1}},
           {"scan_input_directions", std::vector<int64_t>{1}}});
  b.AddOutput("total");
  b.AddOutput("ys");
  Sessions s = MakeSessions(testing::LoadOrDie(b.Finish()));
  for (int64_t t : {1, 5, 5}) ExpectSame(s, {F32({3}, 11), F32({t, 3}, 12)}, absl::StrCat("scan over ", t));
  EXPECT_GT(s.cuda->stats().cpu_fallback_steps, 0);
}

TEST(CudaModelTest, ChainOfTwoHundredOps) {
  Sessions s = MakeSessions(testing::LoadOrDie(demo::BuildChain(200)));
  ExpectSame(s, {F32({3, 64}, 5)}, "chain");
  // Runs of elementwise ops between the MatMuls are fused into one kernel
  // each: fewer kernels than the chain's 200 ops in its one run (the CPU
  // fuses too now, an activation into the oneDNN MatMul before it).
  EXPECT_LT(s.cuda->stats().kernels_run, 200);
}

TEST(CudaModelTest, ElementwiseChainsRunAsOneKernel) {
  // y = sigmoid(relu(x) * w + b) - x: five elementwise ops with broadcast
  // weights; the intermediates never leave the fused kernel.
  ModelBuilder b;
  b.AddSymbol("n", 1, 64);
  b.AddInput("x", DType::kF32, {"n", 8});
  b.AddWeight("w", DType::kF32, {8}, testing::RandomF32(8, 1));
  b.AddWeight("b", DType::kF32, {1}, std::vector<float>{0.25f});
  b.AddOp("Relu", {"x"}, {"r"});
  b.AddOp("Mul", {"r", "w"}, {"m"});
  b.AddOp("Add", {"m", "b"}, {"a"});
  b.AddOp("Sigmoid", {"a"}, {"s"});
  b.AddOp("Sub", {"s", "x"}, {"y"});
  b.AddOutput("y");
  Sessions s = MakeSessions(testing::LoadOrDie(b.Finish()));
  for (int64_t n : {1, 5, 33}) ExpectSame(s, {F32({n, 8}, static_cast<uint32_t>(n))}, absl::StrCat("n ", n));
  EXPECT_EQ(s.cpu->stats().kernels_run, 15);
  EXPECT_EQ(s.cuda->stats().kernels_run, 3) << "one fused kernel per run";
  // A value read twice is not fused away: x feeds Relu and Sub, still one kernel.
}

TEST(CudaModelTest, DeviceInputsAndOutputsNeedNoCopies) {
  std::shared_ptr<const Model> model = testing::LoadOrDie(demo::BuildMlp());
  std::shared_ptr<cuda::Device> device = TestDevice();
  SessionOptions options;
  options.outputs_on_device = true;
  options.strict_device = true;  // every op of the MLP has a CUDA kernel
  std::unique_ptr<Session> s = internal::CreateSessionOnDevice(model, options, device).value();
  Tensor x = F32({5, 16}, 3);
  void* dx = device->Allocate(x.view().byte_size()).value();
  ASSERT_TRUE(device->CopyAsync(dx, x.data(), x.view().byte_size(), nullptr).ok());
  ASSERT_TRUE(device->Synchronize(nullptr).ok());
  const std::vector<TensorView> in = {TensorView(DType::kF32, {5, 16}, dx)};
  ASSERT_TRUE(s->Run(in).ok());  // plans, uploads the plan's folded values
  const SessionStats before = s->stats();
  absl::StatusOr<std::vector<TensorView>> out = s->Run(in);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(device->IsDevicePointer((*out)[0].data));
  const SessionStats after = s->stats();
  EXPECT_EQ(after.bytes_device_to_host, before.bytes_device_to_host) << "device outputs were copied to the host";
  EXPECT_EQ(after.bytes_host_to_device, before.bytes_host_to_device) << "a device input was copied";
  EXPECT_EQ(after.cpu_fallback_steps, 0);
  // RunInto a device buffer, then compare with the CPU.
  void* dy = device->Allocate(5 * 4 * 4).value();
  const cuda::DeviceStats launches_before = device->stats();
  ASSERT_TRUE(s->RunInto(in, {TensorView(DType::kF32, {5, 4}, dy)}).ok());
  // The last kernel wrote the caller's buffer itself: no device-to-device copy.
  EXPECT_EQ(s->stats().bytes_device_to_host, after.bytes_device_to_host);
  // Kernels ran: one by one, or as a graph captured for the new output address.
  EXPECT_GT(device->stats().launches + device->stats().graph_launches,
            launches_before.launches + launches_before.graph_launches);
  std::vector<float> y(20);
  ASSERT_TRUE(device->CopyAsync(y.data(), dy, 80, nullptr).ok());
  ASSERT_TRUE(device->Synchronize(nullptr).ok());
  SessionOptions cpu_options;
  cpu_options.device = Device::kCpu;
  std::unique_ptr<Session> cpu = Session::Create(model, cpu_options).value();
  std::vector<TensorView> want = cpu->Run({x.view()}).value();
  for (int i = 0; i < 20; ++i) EXPECT_NEAR(y[i], want[0].as<float>()[i], 1e-5);
  device->Free(dx);
  device->Free(dy);
}

TEST(CudaModelTest, StrictDeviceRefusesCpuFallback) {
  // NonZero has no CUDA kernel: a model with it runs with a fallback, or is
  // refused under strict_device.
  ModelBuilder b;
  b.AddInput("x", DType::kF32, {4});
  b.AddOp("NonZero", {"x"}, {"y"});
  b.AddOutput("y");
  std::shared_ptr<const Model> model = testing::LoadOrDie(b.Finish());
  SessionOptions strict;
  strict.strict_device = true;
  std::unique_ptr<Session> s = internal::CreateSessionOnDevice(model, strict, TestDevice()).value();
  Tensor in = F32({4}, 1);
  absl::StatusOr<std::vector<TensorView>> r = s->Run({in.view()});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(r.status().message().find("NonZero"), std::string::npos) << r.status();
  Sessions lax = MakeSessions(model);
  ExpectSame(lax, {in}, "NonZero with fallback");
  EXPECT_GT(lax.cuda->stats().cpu_fallback_steps, 0);
}

// A CUDA kernel whose prepare declines the step (Unimplemented: the
// recurrent layers are f32 only on CUDA) leaves it to its CPU kernel with
// copies, like an op with no CUDA kernel; strict_device refuses the plan.
// Before, the f64 and f16 layers failed the run on a CUDA session.
TEST(CudaModelTest, StepsADeviceKernelDeclinesRunOnTheCpu) {
  for (const DType dtype : {DType::kF64, DType::kF16, DType::kBF16}) {
    SCOPED_TRACE(DTypeName(dtype));
    auto cast = [&](const Tensor& t) { return Tensor::CastOf(t.view(), dtype).value(); };
    const Tensor w = cast(F32({1, 9, 5}, 2)), r = cast(F32({1, 9, 3}, 3));
    ModelBuilder b;
    b.AddSymbol("seq", 1, 16);
    b.AddInput("x", dtype, {"seq", 2, 5});
    auto bytes = [](const Tensor& t) {
      return absl::Span<const uint8_t>(static_cast<const uint8_t*>(t.view().data), t.view().byte_size());
    };
    b.AddWeight("w", dtype, {1, 9, 5}, bytes(w));
    b.AddWeight("r", dtype, {1, 9, 3}, bytes(r));
    b.AddOp("GRU", {"x", "w", "r"}, {"y", "y_h"}, {{"hidden_size", int64_t{3}}});
    b.AddOp("Neg", {"y_h"}, {"z"});  // on the device again
    b.AddOutput("y");
    b.AddOutput("z");
    std::shared_ptr<const Model> model = testing::LoadOrDie(b.Finish());
    Sessions s = MakeSessions(model);
    for (int64_t seq : {1, 4, 7}) ExpectSame(s, {cast(F32({seq, 2, 5}, 9))}, absl::StrCat("GRU over ", seq));
    EXPECT_GT(s.cuda->stats().cpu_fallback_steps, 0);
    SessionOptions strict;
    strict.strict_device = true;
    std::unique_ptr<Session> st = internal::CreateSessionOnDevice(model, strict, TestDevice()).value();
    const Tensor x = cast(F32({3, 2, 5}, 9));
    absl::StatusOr<std::vector<TensorView>> refused = st->Run({x.view()});
    ASSERT_FALSE(refused.ok());
    EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition) << refused.status();
    EXPECT_NE(refused.status().message().find("GRU"), std::string::npos) << refused.status();
  }
}

TEST(CudaModelTest, DTypesWithoutCudaKernelsRunOnTheCpu) {
  // The CUDA kernels cover f32 f64 f16 bf16 i64 i32 i8 u8 bool: Add on u32
  // (an op with a CUDA kernel) runs the CPU kernel with copies, Cast back to
  // f32 too (its input is u32), and the f32 Mul after them on the device.
  ModelBuilder b;
  b.AddInput("x", DType::kU32, {5});
  b.AddInput("y", DType::kU32, {5});
  b.AddOp("Add", {"x", "y"}, {"s"});
  b.AddOp("Cast", {"s"}, {"f"}, {{"to", static_cast<int64_t>(DType::kF32)}});
  b.AddOp("Mul", {"f", "f"}, {"z"});
  b.AddOutput("z");
  std::shared_ptr<const Model> model = testing::LoadOrDie(b.Finish());
  Tensor x = Tensor::Create(DType::kU32, {5}).value();
  Tensor y = Tensor::Create(DType::kU32, {5}).value();
  const uint32_t xs[] = {0, 1, 2, 4294967295u, 1000};
  const uint32_t ys[] = {1, 2, 3, 2, 24};
  for (int i = 0; i < 5; ++i) {
    x.as<uint32_t>()[i] = xs[i];
    y.as<uint32_t>()[i] = ys[i];
  }
  Sessions s = MakeSessions(model);
  ExpectSame(s, {x, y}, "u32 Add, Cast, f32 Mul");
  EXPECT_EQ(s.cuda->stats().cpu_fallback_steps, 2);

  SessionOptions strict;
  strict.strict_device = true;
  std::unique_ptr<Session> refusing = internal::CreateSessionOnDevice(model, strict, TestDevice()).value();
  absl::StatusOr<std::vector<TensorView>> r = refusing->Run({x.view(), y.view()});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition) << r.status();
}

// A device that refuses allocations past a budget (forwarding the rest).
class LimitedDevice : public cuda::Device {
 public:
  LimitedDevice(std::shared_ptr<cuda::Device> inner, int64_t budget) : inner_(std::move(inner)), budget_(budget) {}
  std::string Describe() const override { return "limited " + inner_->Describe(); }
  bool emulated() const override { return inner_->emulated(); }
  int arch() const override { return inner_->arch(); }
  absl::StatusOr<void*> Allocate(size_t bytes) override {
    if (used_ + static_cast<int64_t>(bytes) > budget_) {
      return absl::ResourceExhaustedError(absl::StrCat("test budget: ", bytes, " bytes more than left"));
    }
    absl::StatusOr<void*> p = inner_->Allocate(bytes);
    if (p.ok()) {
      used_ += static_cast<int64_t>(bytes);
      sizes_[*p] = bytes;
    }
    return p;
  }
  void Free(void* ptr) override {
    auto it = sizes_.find(ptr);
    if (it != sizes_.end()) {
      used_ -= static_cast<int64_t>(it->second);
      sizes_.erase(it);
    }
    inner_->Free(ptr);
  }
  bool IsDevicePointer(const void* ptr) const override { return inner_->IsDevicePointer(ptr); }
  absl::Status CopyAsync(void* d, const void* s, size_t n, cuda::Stream st) override { return inner_->CopyAsync(d, s, n, st); }
  absl::Status MemsetAsync(void* d, int v, size_t n, cuda::Stream st) override { return inner_->MemsetAsync(d, v, n, st); }
  absl::Status Launch(const jit::ModuleSpec& m, absl::string_view k, const cuda::LaunchDims& dims, const void* p,
                      size_t n, cuda::Stream st) override {
    return inner_->Launch(m, k, dims, p, n, st);
  }
  absl::Status Gemm(const cuda::GemmDesc& g, cuda::Stream st) override { return inner_->Gemm(g, st); }
  absl::StatusOr<cuda::Stream> CreateStream() override { return inner_->CreateStream(); }
  void DestroyStream(cuda::Stream st) override { inner_->DestroyStream(st); }
  absl::Status Synchronize(cuda::Stream st) override { return inner_->Synchronize(st); }
  cuda::DeviceStats stats() const override { return inner_->stats(); }

 private:
  std::shared_ptr<cuda::Device> inner_;
  int64_t budget_, used_ = 0;
  std::map<void*, size_t> sizes_;
};

// Device memory running out is ResourceExhausted, and the session stays
// usable for shapes that fit.
TEST(CudaModelTest, OutOfDeviceMemoryIsAnErrorAndTheSessionStaysUsable) {
  std::shared_ptr<const Model> model = testing::LoadOrDie(demo::BuildMlp());
  auto device = std::make_shared<LimitedDevice>(TestDevice(), 64 << 10);
  std::unique_ptr<Session> s = internal::CreateSessionOnDevice(model, {}, device).value();
  Tensor big = F32({1024, 16}, 1), small = F32({4, 16}, 2);
  absl::StatusOr<std::vector<TensorView>> r = s->Run({big.view()});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted) << r.status();
  SessionOptions cpu_options;
  cpu_options.device = Device::kCpu;
  Sessions both{Session::Create(model, cpu_options).value(), std::move(s)};
  ExpectSame(both, {small}, "after running out of memory");
}

// Reduced-precision GEMMs (SessionOptions::cuda_gemm_math): within the
// documented bounds of the f32 run, and not equal to it (the mode is used).
TEST(CudaModelTest, ReducedPrecisionGemmsStayWithinTheirBounds) {
  std::shared_ptr<const Model> model = testing::LoadOrDie(demo::BuildTransformerBlock());
  SessionOptions cpu_options;
  cpu_options.device = Device::kCpu;
  std::unique_ptr<Session> cpu = Session::Create(model, cpu_options).value();
  Tensor x = F32({2, 9, 32}, 77);
  const Tensor want = Tensor::CopyOf(cpu->Run({x.view()}).value()[0]).value();
  for (auto [math, bound] : {std::pair<GemmMath, double>{GemmMath::kBF16, 2e-2}, {GemmMath::kF16, 4e-3},
                             {GemmMath::kTF32, 4e-3}}) {
    SessionOptions options;
    options.cuda_gemm_math = math;
    std::unique_ptr<Session> s = internal::CreateSessionOnDevice(model, options, TestDevice()).value();
    absl::StatusOr<std::vector<TensorView>> got = s->Run({x.view()});
    ASSERT_TRUE(got.ok()) << got.status();
    double worst = 0;
    for (int64_t i = 0; i < want.view().num_elements(); ++i) {
      const double w = want.as<float>()[i], g = (*got)[0].as<float>()[i];
      worst = std::max(worst, std::abs(g - w) / (1.0 + std::abs(w)));
    }
    EXPECT_LE(worst, bound) << "math " << static_cast<int>(math);
    EXPECT_GT(worst, 0.0) << "math " << static_cast<int>(math) << " gave the f32 result: the mode was not used";
    std::printf("transformer block, GEMM math %d: largest error %.3g (bound %.0e)\n", static_cast<int>(math), worst,
                bound);
  }
  SessionOptions bad;
  bad.cuda_gemm_math = static_cast<GemmMath>(9);
  EXPECT_FALSE(Session::Create(model, bad).ok());
  EXPECT_EQ(ParseGemmMath("bf16").value(), GemmMath::kBF16);
  EXPECT_FALSE(ParseGemmMath("fp8").ok());
}

// --- exported models ---------------------------------------------------------

struct Exported {
  std::string name;
  fs::path onnx, testdata;
};

std::vector<Exported> ExportedModels() {
  std::vector<Exported> out;
  // The source tree: where the test was built, unless GROVE_SOURCE_DIR says
  // otherwise (bench/gpu/check.sh on another machine).
  const char* env = std::getenv("GROVE_SOURCE_DIR");
  const fs::path root = fs::path(env != nullptr ? env : GROVE_SOURCE_DIR);
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(root / "test" / "models", ec)) {
    if (fs::exists(e.path() / "model.onnx")) out.push_back({e.path().filename().string(), e.path() / "model.onnx", e.path()});
  }
  std::sort(out.begin(), out.end(), [](const Exported& a, const Exported& b) { return a.name < b.name; });
  out.push_back({"silero_vad", root / "models" / "silero_vad" / "silero_vad.onnx",
                 root / "models" / "silero_vad" / "testdata"});
  return out;
}

void PrintTo(const Exported& m, std::ostream* os) { *os << m.name; }

class CudaExportedModelTest : public ::testing::TestWithParam<Exported> {};

TEST_P(CudaExportedModelTest, MatchesCpu) {
  const Exported& m = GetParam();
  absl::StatusOr<std::vector<uint8_t>> bytes = onnx_import::ImportOnnxFile(m.onnx.string(), {}, nullptr);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  Sessions s = MakeSessions(testing::LoadOrDie(std::move(bytes)));
  std::ifstream file(m.testdata / "cases.txt");
  ASSERT_TRUE(file) << m.testdata;
  const int max_cases = testing::TestDeviceIsGpu() ? 1 << 30 : 2;
  int ran = 0;
  std::string line;
  while (std::getline(file, line) && ran < max_cases) {
    line = std::string(absl::StripAsciiWhitespace(line));
    if (line.empty() || line[0] == '#') continue;
    std::vector<std::string> fields = absl::StrSplit(line, ' ', absl::SkipEmpty());
    ASSERT_EQ(fields.size(), 3u) << line;
    std::vector<Tensor> inputs;
    for (absl::string_view f : absl::StrSplit(fields[1], ',')) {
      absl::StatusOr<Tensor> t = ReadNpy((m.testdata / std::string(f)).string());
      ASSERT_TRUE(t.ok()) << t.status();
      inputs.push_back(std::move(*t));
    }
    ExpectSame(s, inputs, absl::StrCat(m.name, "/", fields[0]));
    ++ran;
  }
  EXPECT_GT(ran, 0);
  const SessionStats st = s.cuda->stats();
  std::printf("%s on %s: %d cases, %lld kernels, %lld cpu fallback steps\n", m.name.c_str(),
              s.cuda->device_description().c_str(), ran, static_cast<long long>(st.kernels_run),
              static_cast<long long>(st.cpu_fallback_steps));
}

INSTANTIATE_TEST_SUITE_P(Models, CudaExportedModelTest, ::testing::ValuesIn(ExportedModels()),
                         [](const ::testing::TestParamInfo<Exported>& info) { return info.param.name; });

}  // namespace
}  // namespace grove
