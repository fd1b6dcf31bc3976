// The host emulation of CUDA built-ins (jit/emulation.h) and the emulated
// device: the selftest kernel's shared memory, barriers, shuffles and atomics
// give what CUDA specifies, and the f16/bf16 conversions round as the GPU.
#include <cmath>
#include <cstring>
#include <vector>

#include "gtest/gtest.h"
#include "jit/emulation_launch.h"
#include "jit/kernels/prelude.cuh"
#include "jit/kernels/selftest_params.h"
#include "jit/module.h"
#include "lib/backends/cuda/emulated_device.h"
#include "test/cuda_op_test_util.h"

namespace grove {
namespace {

struct SelftestResult {
  std::vector<float> block_sums, lanes;
  float total = 0;
};

SelftestResult RunSelftest(cuda::Device& dev, const std::vector<float>& x, int threads) {
  const int64_t n = static_cast<int64_t>(x.size());
  const cuda::LaunchDims dims = cuda::Grid1D(n, threads);
  const int blocks = static_cast<int>(dims.grid[0]);
  void* in = dev.Allocate(n * 4).value();
  void* sums = dev.Allocate(blocks * 4).value();
  void* total = dev.Allocate(4).value();
  void* lanes = dev.Allocate(n * 16).value();
  EXPECT_TRUE(dev.CopyAsync(in, x.data(), n * 4, nullptr).ok());
  EXPECT_TRUE(dev.MemsetAsync(total, 0, 4, nullptr).ok());
  grove_k::SelftestParams p{in, sums, total, lanes, n};
  absl::Status s = dev.Launch({"selftest", {DType::kF32}}, "selftest", dims, &p, sizeof(p), nullptr);
  EXPECT_TRUE(s.ok()) << s;
  SelftestResult r;
  r.block_sums.resize(blocks);
  r.lanes.resize(n * 4);
  EXPECT_TRUE(dev.CopyAsync(r.block_sums.data(), sums, blocks * 4, nullptr).ok());
  EXPECT_TRUE(dev.CopyAsync(r.lanes.data(), lanes, n * 16, nullptr).ok());
  EXPECT_TRUE(dev.CopyAsync(&r.total, total, 4, nullptr).ok());
  EXPECT_TRUE(dev.Synchronize(nullptr).ok());
  for (void* ptr : {in, sums, total, lanes}) dev.Free(ptr);
  return r;
}

// On the emulated device in CI; on the GPU under `ctest -L gpu`, which holds
// the emulation and the hardware to the same answers.
TEST(EmulationTest, SelftestKernelMatchesCudaSemantics) {
  auto dev = testing::TestDevice();
  for (int threads : {32, 64, 96, 256}) {
    for (int64_t n : {1, 31, 33, 300}) {
      std::vector<float> x(n);
      for (int64_t i = 0; i < n; ++i) x[i] = static_cast<float>(i % 7) - 2.5f;
      SelftestResult r = RunSelftest(*dev, x, threads);
      double want_total = 0;
      for (float v : x) want_total += v;
      EXPECT_NEAR(r.total, want_total, 1e-3) << "threads " << threads << " n " << n;
      for (size_t b = 0; b < r.block_sums.size(); ++b) {
        double want = 0;
        for (int64_t i = b * threads; i < std::min<int64_t>(n, (b + 1) * threads); ++i) want += x[i];
        EXPECT_NEAR(r.block_sums[b], want, 1e-3);
      }
      // Shuffles, lane by lane (lanes past n read 0, as the kernel pads).
      auto at = [&](int64_t i) { return i >= 0 && i < n ? x[i] : 0.0f; };
      for (int64_t i = 0; i < n; ++i) {
        const int lane = static_cast<int>(i % threads % 32);
        const int64_t warp_base = i - lane;
        const int64_t warp_end = std::min<int64_t>(warp_base + 32, (i / threads + 1) * threads);
        EXPECT_EQ(r.lanes[4 * i + 0], warp_base + lane + 1 < warp_end ? at(i + 1) : x[i]) << i;
        EXPECT_EQ(r.lanes[4 * i + 1], lane >= 1 ? at(i - 1) : x[i]) << i;
        EXPECT_EQ(r.lanes[4 * i + 2], at(warp_base)) << i;
        EXPECT_EQ(r.lanes[4 * i + 3], at(i ^ 1)) << i;
      }
    }
  }
}

TEST(EmulationTest, RefusesBadLaunches) {
  auto dev = cuda::NewEmulatedDevice();
  grove_k::SelftestParams p{};
  cuda::LaunchDims too_big;
  too_big.block = {2048, 1, 1};
  EXPECT_FALSE(dev->Launch({"selftest", {DType::kF32}}, "selftest", too_big, &p, sizeof(p), nullptr).ok());
  EXPECT_EQ(dev->Launch({"selftest", {DType::kI64}}, "selftest", {}, &p, sizeof(p), nullptr).code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(dev->Launch({"selftest", {DType::kF32}}, "no_such_kernel", {}, &p, sizeof(p), nullptr).code(),
            absl::StatusCode::kNotFound);
}

TEST(EmulationTest, EveryManifestModuleHasEntryPoints) {
  const std::vector<std::string> names = emu::EntryNames();
  for (const jit::ModuleSpec& m : jit::KernelManifest()) {
    const std::string suffix = jit::Suffix(m);
    bool found = false;
    for (const std::string& n : names) {
      if (n.size() > suffix.size() && n.compare(n.size() - suffix.size(), suffix.size(), suffix) == 0) found = true;
    }
    EXPECT_TRUE(found) << m.file << suffix;
  }
}

TEST(EmulationTest, DeviceMemoryIsTracked) {
  auto dev = cuda::NewEmulatedDevice();
  void* p = dev->Allocate(100).value();
  int host = 0;
  EXPECT_TRUE(dev->IsDevicePointer(p));
  EXPECT_TRUE(dev->IsDevicePointer(static_cast<char*>(p) + 99));
  EXPECT_FALSE(dev->IsDevicePointer(&host));
  EXPECT_GE(dev->stats().bytes_allocated, 100);
  dev->Free(p);
  EXPECT_EQ(dev->stats().bytes_allocated, 0);
}

float F16RoundTrip(float f) { return grove_k::f16_to_f32(grove_k::f32_to_f16(f)); }

TEST(EmulationTest, HalfConversionsRoundToNearestEven) {
  EXPECT_EQ(F16RoundTrip(1.0f), 1.0f);
  EXPECT_EQ(F16RoundTrip(65504.0f), 65504.0f);
  EXPECT_TRUE(std::isinf(F16RoundTrip(65520.0f)));
  EXPECT_EQ(F16RoundTrip(65519.0f), 65504.0f);
  EXPECT_EQ(F16RoundTrip(std::ldexp(1.0f, -24)), std::ldexp(1.0f, -24));  // smallest subnormal
  EXPECT_EQ(F16RoundTrip(std::ldexp(1.0f, -25)), 0.0f);                     // tie to even (0)
  EXPECT_EQ(F16RoundTrip(std::ldexp(1.5f, -25)), std::ldexp(1.0f, -24));
  EXPECT_EQ(F16RoundTrip(1.0f + std::ldexp(1.0f, -11)), 1.0f);  // tie to even
  EXPECT_EQ(F16RoundTrip(1.0f + std::ldexp(3.0f, -11)), 1.0f + std::ldexp(1.0f, -9));
  EXPECT_EQ(F16RoundTrip(-2.0f), -2.0f);
  EXPECT_TRUE(std::isnan(F16RoundTrip(NAN)));
  // Every f16 bit pattern survives f16 -> f32 -> f16.
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = grove_k::f16_to_f32(static_cast<uint16_t>(h));
    if (std::isnan(f)) continue;
    ASSERT_EQ(grove_k::f32_to_f16(f), h) << std::hex << h;
  }
  EXPECT_EQ(grove_k::bf16_to_f32(grove_k::f32_to_bf16(1.0f + std::ldexp(1.0f, -8))), 1.0f);
  EXPECT_EQ(grove_k::bf16_to_f32(grove_k::f32_to_bf16(3.0f)), 3.0f);
}

}  // namespace
}  // namespace grove
