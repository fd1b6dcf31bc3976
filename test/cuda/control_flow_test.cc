// The CUDA Loop kernel keeps its buffers across runs: a second run of the
// same Loop (same ExecContext, as a session's) allocates no device memory and
// gives the same results. The body is played by the test's host: it swaps
// the two carried values (so the kernel stages them) and scans the first.
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "lib/backends/cuda/exec_context.h"
#include "lib/ir/op_registry.h"
#include "lib/runtime/registry.h"
#include "test/cuda_op_test_util.h"
#include "test/op_test_util.h"

namespace grove::testing {
namespace {

// Device memory the test owns, freed at the end.
class Buffers {
 public:
  explicit Buffers(cuda::Device& d) : device_(d) {}
  ~Buffers() {
    for (void* p : ptrs_) device_.Free(p);
  }
  void* Get(size_t bytes) {
    void* p = device_.Allocate(bytes).value();
    ptrs_.push_back(p);
    return p;
  }

 private:
  cuda::Device& device_;
  std::vector<void*> ptrs_;
};

// The Loop's host: outputs in buffers made once (the session's dynamic
// buffers grow the same way), and a body that returns (cond = true, b, a,
// scan = a copy of a).
class LoopHost : public ir::KernelContext::Host {
 public:
  LoopHost(cuda::Device& device, cuda::ExecContext& exec, Buffers& buffers)
      : device_(device), exec_(exec), buffers_(buffers) {
    cond_ = buffers.Get(1);
    const uint8_t one = 1;
    EXPECT_TRUE(device.CopyAsync(cond_, &one, 1, nullptr).ok());
    scan_ = buffers.Get(64);
    for (int i = 0; i < 3; ++i) {
      outputs_[i] = buffers.Get(1024);
      out_ptrs_[i] = &views_[i];  // wanted outputs, made by AllocateOutput
    }
    EXPECT_TRUE(device.Synchronize(nullptr).ok());
  }

  absl::StatusOr<TensorView*> AllocateOutput(int i, DType dtype, std::vector<int64_t> shape) override {
    views_[i] = TensorView(dtype, std::move(shape), outputs_[i]);
    if (views_[i].byte_size() > 1024) return absl::InternalError("output too large for the test");
    return &views_[i];
  }
  absl::StatusOr<std::vector<TensorView>> RunSubgraph(int subgraph, absl::Span<const TensorView> inputs) override {
    if (subgraph != 1 || inputs.size() != 4) return absl::InternalError("unexpected body call");
    ++body_runs_;
    const TensorView& a = inputs[2];
    const TensorView& b = inputs[3];
    if (absl::Status s = device_.CopyAsync(scan_, a.data, a.byte_size(), exec_.stream()); !s.ok()) return s;
    return std::vector<TensorView>{TensorView(DType::kBool, {}, cond_), b, a, TensorView(a.dtype, a.shape, scan_)};
  }
  void* backend_context() override { return &exec_; }

  std::vector<TensorView*>& out_ptrs() { return out_ptrs_; }
  int body_runs() const { return body_runs_; }

 private:
  cuda::Device& device_;
  cuda::ExecContext& exec_;
  Buffers& buffers_;
  void* cond_ = nullptr;
  void* scan_ = nullptr;
  void* outputs_[3] = {};
  TensorView views_[3];
  std::vector<TensorView*> out_ptrs_ = std::vector<TensorView*>(3, nullptr);
  int body_runs_ = 0;
};

std::vector<float> Download(cuda::Device& device, const TensorView& v) {
  std::vector<float> out(static_cast<size_t>(v.num_elements()));
  EXPECT_TRUE(device.CopyAsync(out.data(), v.data, v.byte_size(), nullptr).ok());
  EXPECT_TRUE(device.Synchronize(nullptr).ok());
  return out;
}

cuda::DeviceCounts CountsOf(const cuda::DeviceStats& s) {
  return {s.launches,         s.gemms,
          s.allocations,      s.frees,
          s.synchronizations, s.device_to_host_copies,
          s.device_to_host_bytes, s.host_to_device_copies,
          s.host_to_device_bytes};
}

TEST(CudaControlFlowTest, LoopReusesItsBuffersAcrossRuns) {
  std::shared_ptr<cuda::Device> device = TestDevice();
  Buffers buffers(*device);
  absl::StatusOr<cuda::Stream> stream = device->CreateStream();
  ASSERT_TRUE(stream.ok());
  cuda::ExecContext exec(*device, *stream);

  ir::Node node;
  node.type = "Loop";
  node.def = runtime::GlobalOpRegistry().Find("Loop");
  ASSERT_NE(node.def, nullptr);
  node.inputs = {0, 1, 2, 3};
  node.outputs = {4, 5, 6};
  node.attrs.Set("body", SubgraphRef{1});

  // M = 5 trips, cond = true, carried a = [1, 2, 3], b = [10, 20, 30].
  const int64_t trips = 5;
  const uint8_t cond = 1;
  const std::vector<float> a = {1, 2, 3}, b = {10, 20, 30};
  void* dm = buffers.Get(8);
  void* dc = buffers.Get(1);
  void* da = buffers.Get(12);
  void* db = buffers.Get(12);
  ASSERT_TRUE(device->CopyAsync(dm, &trips, 8, nullptr).ok());
  ASSERT_TRUE(device->CopyAsync(dc, &cond, 1, nullptr).ok());
  ASSERT_TRUE(device->Synchronize(nullptr).ok());
  TensorView in[4] = {TensorView(DType::kI64, {}, dm), TensorView(DType::kBool, {}, dc),
                      TensorView(DType::kF32, {3}, da), TensorView(DType::kF32, {3}, db)};
  std::vector<TensorView*> in_ptrs = {&in[0], &in[1], &in[2], &in[3]};

  LoopHost host(*device, exec, buffers);
  std::vector<std::vector<float>> first;
  for (int run = 0; run < 3; ++run) {
    SCOPED_TRACE(run);
    // The carried inputs are written again before each run (the Loop must
    // not depend on what a previous run left in its buffers).
    ASSERT_TRUE(device->CopyAsync(da, a.data(), 12, nullptr).ok());
    ASSERT_TRUE(device->CopyAsync(db, b.data(), 12, nullptr).ok());
    ASSERT_TRUE(device->Synchronize(nullptr).ok());
    const cuda::DeviceCounts before = CountsOf(device->stats());
    ir::KernelContext ctx(node, in_ptrs, host.out_ptrs(), &host);
    ASSERT_TRUE(ir::RunKernel(ir::Backend::kCuda, ctx).ok());
    const cuda::DeviceCounts used = CountsOf(device->stats()) - before;
    if (run == 0) {
      EXPECT_GT(used.allocations, 0) << "the first run makes the Loop's buffers";
    } else {
      EXPECT_EQ(used.allocations, 0) << "a later run reuses them";
      EXPECT_EQ(used.frees, 0);
    }
    // Five swaps: a and b traded places; the scan holds a, b, a, b, a.
    std::vector<std::vector<float>> got;
    for (int i = 0; i < 3; ++i) got.push_back(Download(*device, *host.out_ptrs()[i]));
    EXPECT_EQ(got[0], b);
    EXPECT_EQ(got[1], a);
    EXPECT_EQ(host.out_ptrs()[2]->shape, (std::vector<int64_t>{trips, 3}));
    std::vector<float> scan;
    for (int t = 0; t < trips; ++t) scan.insert(scan.end(), (t % 2 == 0 ? a : b).begin(), (t % 2 == 0 ? a : b).end());
    EXPECT_EQ(got[2], scan);
    if (run == 0) first = got;
    EXPECT_EQ(got, first) << "bit-identical across runs";
  }
  EXPECT_EQ(host.body_runs(), 3 * trips);
  device->DestroyStream(*stream);
}

}  // namespace
}  // namespace grove::testing
