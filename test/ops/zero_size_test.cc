// Zero-size dims and sizes past the limit, across every op.
//
// The sweep gives each registered op (but control flow and sequences) inputs
// with a zero dim in each position, at ranks 1 to 4, with its other inputs
// the same tensor, a full tensor of that rank or small i64 values. Every run
// must end in a result or an error naming the op: a kernel that loops over a
// dim it thinks is non-zero, or divides by one, crashes here (and under
// ASan in CI). Where an op succeeds, its outputs hold what their shapes say.
#include <cstdint>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lib/ir/graph.h"
#include "lib/ir/op_registry.h"
#include "lib/runtime/registry.h"
#include "test/op_test_util.h"

namespace grove::testing {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using Attrs = std::vector<std::pair<std::string, AttrValue>>;

bool IsControlFlowOrSequenceOp(const std::string& op) {
  static const std::set<std::string>* ops = new std::set<std::string>{
      "If", "Loop", "Scan", "SequenceEmpty", "SequenceConstruct", "SequenceInsert", "SequenceErase", "SequenceAt",
      "SequenceLength", "ConcatFromSequence", "SplitToSequence", "SequenceMap", "Optional", "OptionalHasElement",
      "OptionalGetElement"};
  return ops->count(op) > 0;
}

// The attributes an op needs before it looks at its inputs, for rank `rank`.
Attrs RequiredAttrs(const std::string& op, int rank) {
  const std::vector<int64_t> window(static_cast<size_t>(std::max(rank - 2, 1)), 1);
  if (op == "BitShift") return {{"direction", std::string("LEFT")}};
  if (op == "Einsum") return {{"equation", std::string("...,...->...")}};
  if (op == "MaxPool" || op == "AveragePool" || op == "LpPool" || op == "MaxUnpool" || op == "MaxRoiPool") {
    return {{"kernel_shape", window}, {"pooled_shape", window}};
  }
  if (op == "DepthToSpace" || op == "SpaceToDepth") return {{"blocksize", int64_t{1}}};
  if (op == "Cast") return {{"to", int64_t{1}}};
  if (op == "Split") return {{"num_outputs", int64_t{2}}};
  return {};
}

Tensor F32WithShape(std::vector<int64_t> shape) {
  Tensor t = Tensor::Create(DType::kF32, shape).value();
  float* p = t.as<float>();
  for (int64_t i = 0; i < t.view().num_elements(); ++i) p[i] = 0.25f * static_cast<float>(i % 7) + 0.5f;
  return t;
}

TEST(ZeroSizeTest, EveryOpTakesAZeroDimInEachPosition) {
  const ir::OpRegistry& registry = runtime::GlobalOpRegistry();
  const std::vector<int64_t> full = {2, 3, 4, 5};
  const Tensor ones = MakeTensor<int64_t>(DType::kI64, {1}, {1});
  int swept = 0, succeeded = 0;
  for (const std::string& op : registry.Types()) {
    if (IsControlFlowOrSequenceOp(op)) continue;
    const ir::OpDef* def = registry.Find(op);
    const int lo = std::max(def->min_inputs, 1);
    const int hi = def->max_inputs < 0 ? lo + 2 : std::min(def->max_inputs, 6);
    const int num_outputs = def->max_outputs < 0 ? 1 : def->min_outputs;
    for (int rank = 1; rank <= 4; ++rank) {
      const std::vector<int64_t> base(full.begin(), full.begin() + rank);
      const Tensor whole = F32WithShape(base);
      for (int zero = 0; zero < rank; ++zero) {
        std::vector<int64_t> shape = base;
        shape[zero] = 0;
        const Tensor empty = F32WithShape(shape);
        for (int n = lo; n <= hi; ++n) {
          for (const Tensor* rest : {&empty, &whole, &ones}) {
            SCOPED_TRACE(absl::StrCat(op, " with ", n, " inputs, input 0 [", absl::StrJoin(shape, ","),
                                      "], the rest [", absl::StrJoin(rest->shape(), ","), "]"));
            std::vector<const Tensor*> inputs(n, rest);
            inputs[0] = &empty;
            absl::StatusOr<std::vector<Tensor>> out = RunOp(op, inputs, RequiredAttrs(op, rank), num_outputs);
            if (!out.ok()) {
              // Refused: by a check, never an internal error or a size that wrapped.
              EXPECT_NE(out.status().code(), absl::StatusCode::kInternal) << out.status();
              continue;
            }
            ++succeeded;
            for (const Tensor& t : *out) {
              const absl::StatusOr<uint64_t> bytes = ir::CheckedByteSize(t.dtype(), t.shape(), "output");
              ASSERT_TRUE(bytes.ok()) << bytes.status();
              EXPECT_EQ(*bytes, t.view().byte_size());
            }
          }
        }
      }
    }
    ++swept;
  }
  EXPECT_GT(swept, 150);
  EXPECT_GT(succeeded, 1000);  // most ops take most of these
}

// Ops whose answer on empty inputs is not empty: the reduction identities and
// an inner dim of 0 in a product.
TEST(ZeroSizeTest, EmptyReductionsAndProductsGiveTheirIdentities) {
  const Tensor a = F32WithShape({2, 0});
  const Tensor b = F32WithShape({0, 3});
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
  const Tensor x5 = F32WithShape({1, 1, 1, 1, 1});
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

  const Tensor w = F32WithShape({1, 1, 1, 1, 1});
  absl::StatusOr<std::vector<Tensor>> convt =
      RunOp("ConvTranspose", {&x5, &w}, {{"output_shape", std::vector<int64_t>{big, big, big}}});
  ASSERT_FALSE(convt.ok());
  EXPECT_THAT(convt.status().message(), AllOf(HasSubstr("ConvTranspose"), HasSubstr("256 TiB")));

  const Tensor one = F32WithShape({1});
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
