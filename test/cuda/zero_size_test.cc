// The zero-size sweep (test/zero_size_sweep.h) on the CUDA kernels, on the
// emulated device in CI: every op with a CUDA kernel, given a zero dim in
// each position, with its parameter inputs on the host and only on the
// device, gives a result or a refusal that is not an internal error, and
// where the CPU kernel succeeds too, the same shapes.
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "lib/ir/op_registry.h"
#include "lib/runtime/registry.h"
#include "test/cuda/cuda_test_helpers.h"
#include "test/zero_size_sweep.h"

namespace grove::testing {
namespace {

TEST(CudaZeroSizeTest, EveryOpTakesAZeroDimInEachPosition) {
  std::shared_ptr<cuda::Device> dev = TestDevice();
  const ir::OpRegistry& registry = runtime::GlobalOpRegistry();
  int runs = 0, succeeded = 0;
  const int swept = ForEachZeroSizeCase(
      [&](const std::string& op) { return registry.Supports(op, ir::Backend::kCuda); },
      [&](const ZeroSizeCase& c) {
        const absl::StatusOr<std::vector<Tensor>> cpu = RunOp(c.op, c.inputs, c.attrs, c.num_outputs);
        for (bool host : {true, false}) {
          SCOPED_TRACE(absl::StrCat(c.Describe(), host ? ", values on the host" : ", values on the device"));
          ++runs;
          absl::StatusOr<std::vector<Tensor>> out =
              RunOpCuda(*dev, c.op, c.inputs, c.attrs, c.num_outputs, {.host_values = host});
          if (!out.ok()) {
            EXPECT_NE(out.status().code(), absl::StatusCode::kInternal) << out.status();
            continue;
          }
          ++succeeded;
          if (!cpu.ok()) continue;
          ASSERT_EQ(out->size(), cpu->size());
          for (size_t i = 0; i < out->size(); ++i) EXPECT_EQ((*out)[i].shape(), (*cpu)[i].shape()) << "output " << i;
        }
      });
  EXPECT_GT(swept, 100);
  EXPECT_GT(runs, 5000);
  EXPECT_GT(succeeded, 500);
}

}  // namespace
}  // namespace grove::testing
