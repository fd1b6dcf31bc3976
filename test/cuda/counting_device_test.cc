// The devices' call counters (cuda::DeviceCounts): the emulated and the
// recording device count allocations, frees, synchronizations and copies
// each way, and a CountingDevice counts the calls made through it alone,
// whatever else uses the device it wraps.
#include "lib/backends/cuda/counting_device.h"

#include <cstdint>
#include <memory>
#include <vector>

#include "gtest/gtest.h"
#include "jit/kernels/selftest_params.h"
#include "lib/backends/cuda/device.h"
#include "lib/backends/cuda/emulated_device.h"
#include "lib/backends/cuda/recording_device.h"

namespace grove::cuda {
namespace {

// Two allocations, a copy each way, a device-to-device copy, a memset, a
// synchronization and two frees (and a Free(nullptr), which is no call).
void Exercise(Device& dev) {
  std::vector<float> host(16, 1.5f), back(16, 0.0f);
  void* a = dev.Allocate(64).value();
  void* b = dev.Allocate(100).value();
  ASSERT_TRUE(dev.CopyAsync(a, host.data(), 64, nullptr).ok());   // host to device
  ASSERT_TRUE(dev.CopyAsync(b, a, 64, nullptr).ok());             // device to device
  ASSERT_TRUE(dev.MemsetAsync(a, 0, 64, nullptr).ok());
  ASSERT_TRUE(dev.CopyAsync(back.data(), b, 32, nullptr).ok());   // device to host
  ASSERT_TRUE(dev.CopyAsync(back.data(), host.data(), 8, nullptr).ok());  // host to host
  ASSERT_TRUE(dev.CopyAsync(a, host.data(), 0, nullptr).ok());    // no bytes: not counted
  ASSERT_TRUE(dev.Synchronize(nullptr).ok());
  dev.Free(a);
  dev.Free(b);
  dev.Free(nullptr);
}

void ExpectExerciseCounts(const DeviceCounts& c) {
  EXPECT_EQ(c.allocations, 2);
  EXPECT_EQ(c.frees, 2);
  EXPECT_EQ(c.synchronizations, 1);
  EXPECT_EQ(c.host_to_device_copies, 1);
  EXPECT_EQ(c.host_to_device_bytes, 64);
  EXPECT_EQ(c.device_to_host_copies, 1);
  EXPECT_EQ(c.device_to_host_bytes, 32);
  EXPECT_EQ(c.launches, 0);
  EXPECT_EQ(c.gemms, 0);
}

DeviceCounts CountsOf(const DeviceStats& s) {
  return {s.launches,
          s.gemms,
          s.allocations,
          s.frees,
          s.synchronizations,
          s.device_to_host_copies,
          s.device_to_host_bytes,
          s.host_to_device_copies,
          s.host_to_device_bytes};
}

// A 2 x 3 by 3 x 2 f32 GEMM, its operands in device memory.
void RunGemm(Device& dev) {
  void* a = dev.Allocate(6 * 4).value();
  void* b = dev.Allocate(6 * 4).value();
  void* c = dev.Allocate(4 * 4).value();
  ASSERT_TRUE(dev.MemsetAsync(a, 0, 24, nullptr).ok());
  ASSERT_TRUE(dev.MemsetAsync(b, 0, 24, nullptr).ok());
  GemmDesc g;
  g.m = 2, g.n = 2, g.k = 3;
  g.a = a, g.lda = 3;
  g.b = b, g.ldb = 2;
  g.c = c, g.ldc = 2;
  ASSERT_TRUE(dev.Gemm(g, nullptr).ok());
  for (void* p : {a, b, c}) dev.Free(p);
}

TEST(DeviceCountersTest, EmulatedDeviceCountsEachKindOfCall) {
  std::shared_ptr<Device> dev = NewEmulatedDevice();
  EXPECT_EQ(CountsOf(dev->stats()), DeviceCounts{});
  Exercise(*dev);
  ExpectExerciseCounts(CountsOf(dev->stats()));
  const DeviceStats s = dev->stats();
  EXPECT_EQ(s.bytes_allocated, 0);
  EXPECT_GE(s.peak_bytes_allocated, 164);

  // A failed allocation is still an Allocate call.
  EXPECT_FALSE(dev->Allocate(SIZE_MAX / 2).ok());
  EXPECT_EQ(dev->stats().allocations, 3);
}

TEST(DeviceCountersTest, EmulatedDeviceCountsLaunchesAndGemms) {
  std::shared_ptr<Device> dev = NewEmulatedDevice();
  RunGemm(*dev);
  void* in = dev->Allocate(32 * 4).value();
  void* sums = dev->Allocate(4).value();
  void* total = dev->Allocate(4).value();
  void* lanes = dev->Allocate(32 * 16).value();
  ASSERT_TRUE(dev->MemsetAsync(in, 0, 32 * 4, nullptr).ok());
  ASSERT_TRUE(dev->MemsetAsync(total, 0, 4, nullptr).ok());
  grove_k::SelftestParams p{in, sums, total, lanes, 32};
  ASSERT_TRUE(dev->Launch({"selftest", {DType::kF32}}, "selftest", Grid1D(32, 32), &p, sizeof(p), nullptr).ok());
  // A kernel that does not exist is no launch.
  EXPECT_FALSE(dev->Launch({"selftest", {DType::kF32}}, "no_such_kernel", {}, &p, sizeof(p), nullptr).ok());
  for (void* ptr : {in, sums, total, lanes}) dev->Free(ptr);
  const DeviceStats s = dev->stats();
  EXPECT_EQ(s.launches, 1);
  EXPECT_EQ(s.gemms, 1);
  EXPECT_EQ(s.allocations, 7);
  EXPECT_EQ(s.frees, 7);
  EXPECT_EQ(s.device_to_host_copies + s.host_to_device_copies + s.synchronizations, 0);
}

TEST(DeviceCountersTest, RecordingDeviceCountsEachKindOfCall) {
  std::shared_ptr<RecordingDevice> dev = NewRecordingDevice(90);
  Exercise(*dev);
  ExpectExerciseCounts(CountsOf(dev->stats()));
  RunGemm(*dev);
  ASSERT_TRUE(dev->Launch({"anything", {DType::kF32}}, "k", {}, nullptr, 0, nullptr).ok());
  const DeviceStats s = dev->stats();
  EXPECT_EQ(s.launches, 1);
  EXPECT_EQ(s.gemms, 1);
  EXPECT_EQ(s.allocations, 5);
  EXPECT_EQ(s.frees, 5);
  EXPECT_EQ(s.bytes_allocated, 0);
}

TEST(CountingDeviceTest, CountsOnlyTheCallsMadeThroughIt) {
  std::shared_ptr<Device> dev = NewEmulatedDevice();
  CountingDevice mine(dev), other(dev);
  EXPECT_EQ(mine.device(), dev);
  EXPECT_EQ(mine.counts(), DeviceCounts{});

  Exercise(mine);
  ExpectExerciseCounts(mine.counts());
  ExpectExerciseCounts(CountsOf(mine.stats()));
  // The wrapped device saw the calls too; the other wrapper saw none.
  ExpectExerciseCounts(CountsOf(dev->stats()));
  EXPECT_EQ(other.counts(), DeviceCounts{});

  // Calls through the other wrapper, or to the device itself, are not mine.
  const DeviceCounts before = mine.counts();
  Exercise(other);
  Exercise(*dev);
  EXPECT_EQ(mine.counts(), before);
  ExpectExerciseCounts(other.counts());
  EXPECT_EQ(dev->stats().allocations, 6);

  // One run's counts: the difference of two readings.
  RunGemm(mine);
  const DeviceCounts run = mine.counts() - before;
  EXPECT_EQ(run.gemms, 1);
  EXPECT_EQ(run.allocations, 3);
  EXPECT_EQ(run.frees, 3);
  EXPECT_EQ(run.synchronizations, 0);
  EXPECT_EQ(run.device_to_host_copies, 0);
}

TEST(CountingDeviceTest, ForwardsAndTracksItsOwnBytes) {
  std::shared_ptr<Device> dev = NewEmulatedDevice();
  CountingDevice counting(dev);
  EXPECT_EQ(counting.Describe(), dev->Describe());
  EXPECT_EQ(counting.emulated(), dev->emulated());
  EXPECT_EQ(counting.arch(), dev->arch());
  EXPECT_TRUE(counting.CreateStream().ok());

  void* outside = dev->Allocate(1000).value();
  void* a = counting.Allocate(100).value();
  void* b = counting.Allocate(28).value();
  EXPECT_TRUE(counting.IsDevicePointer(a));
  EXPECT_TRUE(counting.IsDevicePointer(outside));
  int on_host = 0;
  EXPECT_FALSE(counting.IsDevicePointer(&on_host));

  // A copy from memory the wrapper did not allocate is still a device read.
  std::vector<char> host(1000);
  ASSERT_TRUE(counting.CopyAsync(host.data(), outside, 1000, nullptr).ok());
  EXPECT_EQ(counting.counts().device_to_host_bytes, 1000);

  DeviceStats s = counting.stats();
  EXPECT_EQ(s.bytes_allocated, 128);
  EXPECT_EQ(s.peak_bytes_allocated, 128);
  counting.Free(a);
  s = counting.stats();
  EXPECT_EQ(s.bytes_allocated, 28);
  EXPECT_EQ(s.peak_bytes_allocated, 128);
  // Freeing memory it did not allocate is forwarded and counted.
  counting.Free(outside);
  counting.Free(b);
  s = counting.stats();
  EXPECT_EQ(s.bytes_allocated, 0);
  EXPECT_EQ(s.frees, 3);
  EXPECT_EQ(dev->stats().bytes_allocated, 0);

  // Failures are forwarded; a failed allocation is counted, a failed launch is not.
  EXPECT_FALSE(counting.Allocate(SIZE_MAX / 2).ok());
  EXPECT_EQ(counting.counts().allocations, 3);
  EXPECT_EQ(counting.stats().bytes_allocated, 0);
  EXPECT_FALSE(counting.Launch({"selftest", {DType::kF32}}, "no_such_kernel", {}, nullptr, 0, nullptr).ok());
  EXPECT_EQ(counting.counts().launches, 0);
}

}  // namespace
}  // namespace grove::cuda
