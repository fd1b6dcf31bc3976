// Zero-size dims and sizes past the limit, across every op.
//
// The sweep (test/zero_size_sweep.h) gives each registered op but control
// flow and sequences inputs with a zero dim in each position. Every run must
// end in a result or a refusal that is not an internal error: a kernel that
// loops over a dim it thinks is non-zero, or divides by one, crashes here
// (and under ASan in CI). Where an op succeeds, its outputs hold what their
// shapes say. test/cuda/zero_size_test.cc runs the CUDA kernels the same way.
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lib/ir/graph.h"
#include "lib/ir/op_registry.h"
#include "lib/runtime/registry.h"
#include "test/op_test_util.h"
#include "test/zero_size_sweep.h"

namespace grove::testing {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

TEST(ZeroSizeTest, EveryOpTakesAZeroDimInEachPosition) {
  int runs = 0, succeeded = 0;
  const int swept = ForEachZeroSizeCase([](const std::string&) { return true; }, [&](const ZeroSizeCase& c) {
    SCOPED_TRACE(c.Describe());
    ++runs;
    absl::StatusOr<std::vector<Tensor>> out = RunOp(c.op, c.inputs, c.attrs, c.num_outputs);
    if (!out.ok()) {
      // Refused: by a check, never an internal error or a size that wrapped.
      EXPECT_NE(out.status().code(), absl::StatusCode::kInternal) << out.status();
      return;
    }
    ++succeeded;
    for (const Tensor& t : *out) {
      const absl::StatusOr<uint64_t> bytes = ir::CheckedByteSize(t.dtype(), t.shape(), "output");
      ASSERT_TRUE(bytes.ok()) << bytes.status();
      EXPECT_EQ(*bytes, t.view().byte_size());
    }
  });
  EXPECT_GT(swept, 150);
  EXPECT_GT(runs, 6000);
  EXPECT_GT(succeeded, 1000);  // most ops take many of these
}

// Ops whose answer on empty inputs is not empty: the reduction identities and
// an inner dim of 0 in a product.
TEST(ZeroSizeTest, EmptyReductionsAndProductsGiveTheirIdentities) {
  const Tensor a = SweepF32({2, 0});
  const Tensor b = SweepF32({0, 3});
  absl::StatusOr<std::vector<Tensor>> mm = RunOp("MatMul", {&a, &b});
  ASSERT_TRUE(mm.ok()) << mm.status();
  EXPECT_EQ((*mm)[0].shape(), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(Values<float>((*mm)[0]), std::vector<float>(6, 0.0f));

  const Tensor axes = MakeTensor<int64_t>(DType::kI64, {1}, {1});
  absl::StatusOr<std::vector<Tensor>> sum = RunOp("ReduceSum", {&a, &axes});
  ASSERT_TRUE(sum.ok()) << sum.status();
  EXPECT_EQ((*sum)[0].shape(), (std::vector<int64_t>{2, 1}));
  EXPECT_EQ(Values<float>((*sum)[0]), std::vector<float>(2, 0.0f));
  absl::StatusOr<std::vector<Tensor>> prod = RunOp("ReduceProd", {&a, &axes});
  ASSERT_TRUE(prod.ok()) << prod.status();
  EXPECT_EQ(Values<float>((*prod)[0]), std::vector<float>(2, 1.0f));
}

// A shape function may compute any dims from its attributes and input
// values; the product of the dims is checked in one place (ir::InferShapes),
// so a pooling window with huge pads, a ConvTranspose output_shape or an
// Expand whose dims are each in range but whose product is not is refused by
// name, with the true size.
TEST(ZeroSizeTest, OutputSizesPastTheLimitAreRefusedWithTheTrueSize) {
  const int64_t big = int64_t{1} << 23;  // within each attribute's own bound
  const Tensor x5 = SweepF32({1, 1, 1, 1, 1});
  absl::StatusOr<std::vector<Tensor>> pool = RunOp("MaxPool", {&x5},
               {{"kernel_shape", std::vector<int64_t>{1, 1, 1}},
                {"pads", std::vector<int64_t>{big, big, big, big, big, big}}});
  ASSERT_FALSE(pool.ok());
  EXPECT_THAT(pool.status().message(), HasSubstr("MaxPool"));
  // (2^24 + 1)^3 elements of 4 bytes.
  const __int128 side = 2 * big + 1;
  const __int128 want = side * side * side * 4;
  std::string digits;
  for (__int128 v = want; v > 0; v /= 10) digits.insert(digits.begin(), static_cast<char>('0' + v % 10));
  EXPECT_THAT(pool.status().message(), HasSubstr(absl::StrCat(digits, " bytes")));
  EXPECT_THAT(pool.status().message(), HasSubstr("larger than the 256 TiB limit"));

  const Tensor w = SweepF32({1, 1, 1, 1, 1});
  absl::StatusOr<std::vector<Tensor>> convt =
      RunOp("ConvTranspose", {&x5, &w}, {{"output_shape", std::vector<int64_t>{big, big, big}}});
  ASSERT_FALSE(convt.ok());
  EXPECT_THAT(convt.status().message(), AllOf(HasSubstr("ConvTranspose"), HasSubstr("256 TiB")));

  const Tensor one = SweepF32({1});
  const Tensor shape = MakeTensor<int64_t>(DType::kI64, {3}, {int64_t{1} << 40, int64_t{1} << 40, 0});
  // Empty, but its other dims hold 2^80 elements: refused as well, since
  // kernels loop over them.
  absl::StatusOr<std::vector<Tensor>> expand = RunOp("Expand", {&one, &shape});
  ASSERT_FALSE(expand.ok());
  EXPECT_THAT(expand.status().message(), HasSubstr("counting the non-zero dims of an empty tensor"));
}

TEST(ZeroSizeTest, CheckedByteSizeCountsTheNonZeroDimsAndGivesTheTrueSize) {
  EXPECT_EQ(ir::CheckedByteSize(DType::kF32, {2, 3}, "t").value(), 24u);
  EXPECT_EQ(ir::CheckedByteSize(DType::kF32, {0, int64_t{1} << 40}, "t").value(), 0u);
  EXPECT_EQ(ir::CheckedByteSize(DType::kU8, {int64_t{1} << 48}, "t").value(), uint64_t{1} << 48);
  absl::StatusOr<uint64_t> over = ir::CheckedByteSize(DType::kU8, {(int64_t{1} << 48) + 1}, "t");
  ASSERT_FALSE(over.ok());
  EXPECT_THAT(over.status().message(), HasSubstr("t: 281474976710657 bytes"));
  absl::StatusOr<uint64_t> wraps = ir::CheckedByteSize(DType::kF32, {int64_t{1} << 62, 4}, "t");
  ASSERT_FALSE(wraps.ok());
  // 2^64 elements of 4 bytes: 2^66 bytes, which a 64-bit product wraps to 0.
  EXPECT_THAT(wraps.status().message(), HasSubstr("size overflows: 73786976294838206464 bytes"));
  absl::StatusOr<uint64_t> empty = ir::CheckedByteSize(DType::kF32, {0, int64_t{1} << 62}, "t");
  ASSERT_FALSE(empty.ok());
  EXPECT_THAT(empty.status().message(), HasSubstr("counting the non-zero dims of an empty tensor"));
  const int64_t max = std::numeric_limits<int64_t>::max();
  absl::StatusOr<uint64_t> huge = ir::CheckedByteSize(DType::kF64, {max, max, max, max, max}, "t");
  ASSERT_FALSE(huge.ok());
  EXPECT_THAT(huge.status().message(), HasSubstr("more than 2^127 bytes"));
  EXPECT_THAT(ir::CheckedByteSize(DType::kF32, {3, -1}, "t").status().message(), HasSubstr("dim 1 is negative"));
}

}  // namespace
}  // namespace grove::testing
