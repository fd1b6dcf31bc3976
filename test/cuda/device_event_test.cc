// Device events (Device::CreateEvent / RecordEvent / ElapsedMicros) on the
// emulated device, whose kernels run at launch: the host clock when an
// event is recorded. On a GPU the same calls are CUDA events.
#include <memory>

#include "gtest/gtest.h"
#include "jit/kernels/selftest_params.h"
#include "lib/backends/cuda/counting_device.h"
#include "lib/backends/cuda/device.h"
#include "lib/backends/cuda/emulated_device.h"

namespace grove::cuda {
namespace {

// Events around a kernel, through a forwarding wrapper: the elapsed time
// is positive and grows with each later event.
TEST(DeviceEventTest, ElapsedAroundAKernelIsPositiveAndMonotone) {
  auto dev = std::make_shared<CountingDevice>(NewEmulatedDevice());
  void* in = dev->Allocate(256 * 4).value();
  void* sums = dev->Allocate(8 * 4).value();
  void* total = dev->Allocate(4).value();
  void* lanes = dev->Allocate(256 * 16).value();
  ASSERT_TRUE(dev->MemsetAsync(in, 0, 256 * 4, nullptr).ok());
  ASSERT_TRUE(dev->MemsetAsync(total, 0, 4, nullptr).ok());
  DeviceEventPool pool(dev.get());
  DeviceEvent* marks[3];
  for (DeviceEvent*& m : marks) m = pool.Take().value();
  grove_k::SelftestParams p{in, sums, total, lanes, 256};
  ASSERT_TRUE(dev->RecordEvent(*marks[0], nullptr).ok());
  ASSERT_TRUE(dev->Launch({"selftest", {DType::kF32}}, "selftest", Grid1D(256, 32), &p, sizeof(p), nullptr).ok());
  ASSERT_TRUE(dev->RecordEvent(*marks[1], nullptr).ok());
  ASSERT_TRUE(dev->Launch({"selftest", {DType::kF32}}, "selftest", Grid1D(256, 32), &p, sizeof(p), nullptr).ok());
  ASSERT_TRUE(dev->RecordEvent(*marks[2], nullptr).ok());
  ASSERT_TRUE(dev->Synchronize(nullptr).ok());
  const double first = dev->ElapsedMicros(*marks[0], *marks[1]).value();
  const double both = dev->ElapsedMicros(*marks[0], *marks[2]).value();
  const double second = dev->ElapsedMicros(*marks[1], *marks[2]).value();
  EXPECT_GT(first, 0);
  EXPECT_GT(second, 0);
  EXPECT_GE(both, first);
  EXPECT_NEAR(both, first + second, 1e-3 * both + 1e-3);
  EXPECT_LT(dev->ElapsedMicros(*marks[2], *marks[0]).value(), 0);
  // Reset hands the same events out again (no new ones made).
  pool.Reset();
  for (DeviceEvent* m : marks) EXPECT_EQ(pool.Take().value(), m);
  EXPECT_EQ(pool.made(), 3u);
  EXPECT_NE(pool.Take().value(), nullptr);
  EXPECT_EQ(pool.made(), 4u);
  for (void* ptr : {in, sums, total, lanes}) dev->Free(ptr);
}

TEST(DeviceEventTest, AnEventNotRecordedOrRecordedInACaptureIsAnError) {
  std::shared_ptr<Device> dev = NewEmulatedDevice();
  std::unique_ptr<DeviceEvent> a = dev->CreateEvent().value();
  std::unique_ptr<DeviceEvent> b = dev->CreateEvent().value();
  ASSERT_TRUE(dev->RecordEvent(*a, nullptr).ok());
  EXPECT_EQ(dev->ElapsedMicros(*a, *b).status().code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(dev->BeginCapture(nullptr).ok());
  EXPECT_EQ(dev->RecordEvent(*b, nullptr).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_FALSE(dev->EndCapture(nullptr).ok());  // the capture is spoiled
  ASSERT_TRUE(dev->RecordEvent(*b, nullptr).ok());
  EXPECT_GE(dev->ElapsedMicros(*a, *b).value(), 0);
}

}  // namespace
}  // namespace grove::cuda
