// ir::PlainHost, the one host of kernels run outside a plan (plan-time
// folding, Tensor::CastOf, ir::RunKernel without a host): a workspace, strings
// when asked for, and an Internal error naming the caller for anything else.
#include "lib/ir/plain_host.h"

#include <cstdint>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "grove/grove.h"
#include "lib/ir/op_registry.h"
#include "lib/runtime/registry.h"
#include "test/op_test_util.h"

namespace grove {
namespace {

TEST(PlainHostTest, AllocatingOrRunningASubgraphIsAnInternalErrorNamingTheCaller) {
  ir::PlainHost host("folded op");
  absl::StatusOr<TensorView*> out = host.AllocateOutput(1, DType::kF32, {2});
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInternal);
  EXPECT_EQ(out.status().message(), "folded op asked to allocate output 1");
  absl::StatusOr<std::vector<TensorView>> body = host.RunSubgraph(2, {});
  ASSERT_FALSE(body.ok());
  EXPECT_EQ(body.status().code(), absl::StatusCode::kInternal);
  EXPECT_EQ(body.status().message(), "folded op asked to run subgraph 2");
  EXPECT_EQ(host.backend_context(), nullptr);
  EXPECT_EQ(host.intra_op_threads(), nullptr);
}

TEST(PlainHostTest, StringsOnlyWhenAskedFor) {
  ir::PlainHost none("folded op");
  EXPECT_EQ(none.strings(), nullptr);
  ir::PlainHost with("Tensor::CastOf", /*strings=*/true);
  ASSERT_NE(with.strings(), nullptr);
  absl::StatusOr<char*> bytes = with.strings()->Allocate(5);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
}

TEST(PlainHostTest, GivesAnAlignedWorkspaceThatGrows) {
  ir::PlainHost host("a test");
  absl::StatusOr<void*> small = host.Workspace(10);
  ASSERT_TRUE(small.ok()) << small.status();
  EXPECT_EQ(reinterpret_cast<uintptr_t>(*small) % 64, 0u);
  absl::StatusOr<void*> large = host.Workspace(1 << 20);
  ASSERT_TRUE(large.ok()) << large.status();
  EXPECT_EQ(reinterpret_cast<uintptr_t>(*large) % 64, 0u);
  static_cast<uint8_t*>(*large)[(1 << 20) - 1] = 1;  // all of it is there
}

// Its users: RunKernel without a host gives a prepared kernel its workspace
// (Softmax along an inner axis keeps its row statistics there), and
// Tensor::CastOf keeps the strings it makes.
TEST(PlainHostTest, RunKernelWithoutAHostAndCastOfStrings) {
  const Tensor x = testing::MakeTensor<float>(DType::kF32, {2, 3, 2}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12});
  const ir::OpDef* def = runtime::GlobalOpRegistry().Find("Softmax");
  ASSERT_NE(def, nullptr);
  ir::Node node;
  node.type = "Softmax";
  node.def = def;
  node.inputs = {0};
  node.outputs = {1};
  node.attrs.Set("axis", int64_t{1});
  Tensor y = Tensor::Create(DType::kF32, {2, 3, 2}).value();
  TensorView vx = x.view(), vy = y.view();
  std::vector<TensorView*> ins = {&vx}, outs = {&vy};
  ir::KernelContext ctx(node, ins, outs, nullptr);
  ASSERT_TRUE(ir::RunKernel(ir::Backend::kCpu, ctx).ok());
  const float* p = y.as<float>();
  for (int o = 0; o < 2; ++o) {
    for (int i = 0; i < 2; ++i) {
      float sum = 0;
      for (int j = 0; j < 3; ++j) sum += p[(o * 3 + j) * 2 + i];
      EXPECT_NEAR(sum, 1.0f, 1e-6f);
    }
  }

  absl::StatusOr<Tensor> s = Tensor::CastOf(testing::MakeTensor<int32_t>(DType::kI32, {2}, {-7, 42}).view(),
                                            DType::kString);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_THAT(testing::Strings(*s), ::testing::ElementsAre("-7", "42"));
}

}  // namespace
}  // namespace grove
