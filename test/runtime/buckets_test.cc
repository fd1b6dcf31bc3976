// Shape buckets (lib/runtime/buckets.h): the rules' bounds, the policy's
// checks of SessionOptions::shape_buckets, and the bound shapes of inputs.
#include "lib/runtime/buckets.h"

#include <string>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace grove::runtime {
namespace {

using ::testing::HasSubstr;

std::vector<int64_t> Bounds(const std::string& spec, std::vector<int64_t> values) {
  absl::StatusOr<BucketRule> rule = BucketRule::Parse(spec);
  EXPECT_TRUE(rule.ok()) << rule.status();
  std::vector<int64_t> out;
  for (int64_t v : values) out.push_back(rule.ok() ? rule->Bound(v) : -1);
  return out;
}

TEST(BucketRuleTest, BoundsPerKind) {
  using V = std::vector<int64_t>;
  EXPECT_EQ(Bounds("auto", {1, 2, 3, 5, 129, 256, 257, 511, 512, 513, 1000}),
            (V{1, 2, 4, 8, 256, 256, 512, 512, 512, 768, 1024}));
  EXPECT_EQ(Bounds("pow2", {1, 3, 257, 1025}), (V{1, 4, 512, 2048}));
  EXPECT_EQ(Bounds("step:10", {1, 10, 11, 20, 21}), (V{10, 10, 20, 20, 30}));
  EXPECT_EQ(Bounds("2,8,100", {1, 2, 3, 8, 9, 100, 101}), (V{2, 2, 8, 8, 100, 100, 101}));
  EXPECT_EQ(Bounds("exact", {1, 7, 1000}), (V{1, 7, 1000}));
  // An empty dim stays empty; the largest values do not overflow.
  EXPECT_EQ(Bounds("pow2", {0}), (V{0}));
  const int64_t big = (int64_t{1} << 62) + 1;
  EXPECT_EQ(Bounds("pow2", {big}), (V{big}));
  EXPECT_EQ(Bounds("step:3", {INT64_MAX - 1}), (V{INT64_MAX - 1}));
}

TEST(BucketRuleTest, BadSpecsSayWhatIsWrong) {
  auto error = [](const std::string& spec) {
    absl::StatusOr<BucketRule> r = BucketRule::Parse(spec);
    EXPECT_FALSE(r.ok()) << spec;
    return r.ok() ? std::string() : std::string(r.status().message());
  };
  EXPECT_THAT(error("pow3"), HasSubstr("none of auto, pow2, step:N, exact"));
  EXPECT_THAT(error(""), HasSubstr("none of auto"));
  EXPECT_THAT(error("step:"), HasSubstr("not a positive integer"));
  EXPECT_THAT(error("step:-4"), HasSubstr("not a positive integer"));
  EXPECT_THAT(error("4,4"), HasSubstr("ascending"));
  EXPECT_THAT(error("1,x"), HasSubstr("'x' is not a bound"));
  for (const char* ok : {"auto", "pow2", "exact", "step:7", "1,2,3"}) {
    absl::StatusOr<BucketRule> r = BucketRule::Parse(ok);
    ASSERT_TRUE(r.ok()) << ok;
    EXPECT_EQ(r->ToString(), ok);
  }
}

// batch in 1..1000, seq in 1..100; x[batch, seq, 8], n[seq+1].
ir::Graph TwoSymbols() {
  ir::Graph g;
  g.symbols = {{"batch", 1, 1000}, {"seq", 1, 100}};
  const ir::SymDim batch = ir::SymDim::Symbol(0), seq = ir::SymDim::Symbol(1);
  ir::TensorDecl x{"x", DType::kF32, true, {batch, seq, ir::SymDim(8)}};
  ir::TensorDecl n{"n", DType::kI64, true, {seq + ir::SymDim(1)}};
  g.tensors = {x, n};
  g.subgraphs.resize(1);
  g.subgraphs[0].inputs = {0};
  return g;
}

TEST(BucketPolicyTest, BoundsClampToTheSymbolsMaximum) {
  const ir::Graph g = TwoSymbols();
  absl::StatusOr<BucketPolicy> p = BucketPolicy::Make(g, {{"seq", "pow2"}});
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_FALSE(p->all_exact());
  EXPECT_EQ(p->Bound(1, 60), 64);
  EXPECT_EQ(p->Bound(1, 65), 100);  // 128 is past seq's maximum
  EXPECT_EQ(p->Bound(0, 300), 512);  // batch: auto
  EXPECT_EQ(p->Bound(0, 999), 1000);

  std::vector<std::vector<int64_t>> bound;
  std::string why;
  const TensorView x(DType::kF32, {3, 50, 8}, static_cast<void*>(nullptr));
  ASSERT_TRUE(p->BoundShapes(g, {x}, &bound, &why)) << why;
  EXPECT_EQ(bound, (std::vector<std::vector<int64_t>>{{4, 64, 8}}));
}

TEST(BucketPolicyTest, StarNamesEverySymbolNotNamed) {
  const ir::Graph g = TwoSymbols();
  absl::StatusOr<BucketPolicy> p = BucketPolicy::Make(g, {{"*", "exact"}, {"seq", "step:16"}});
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->Bound(0, 300), 300);
  EXPECT_EQ(p->Bound(1, 17), 32);
  absl::StatusOr<BucketPolicy> exact = BucketPolicy::Make(g, {{"*", "exact"}});
  ASSERT_TRUE(exact.ok());
  EXPECT_TRUE(exact->all_exact());
}

TEST(BucketPolicyTest, BadOptionsAreRefused) {
  const ir::Graph g = TwoSymbols();
  auto error = [&](std::vector<std::pair<std::string, std::string>> specs) {
    absl::StatusOr<BucketPolicy> p = BucketPolicy::Make(g, specs);
    EXPECT_FALSE(p.ok());
    return p.ok() ? std::string() : std::string(p.status().message());
  };
  EXPECT_THAT(error({{"len", "pow2"}}), HasSubstr("no symbol 'len' (its symbols: batch, seq;"));
  EXPECT_THAT(error({{"seq", "pow2"}, {"seq", "exact"}}), HasSubstr("symbol 'seq' given twice"));
  EXPECT_THAT(error({{"*", "pow2"}, {"*", "exact"}}), HasSubstr("'*' given twice"));
  EXPECT_THAT(error({{"batch", "step:0"}}), HasSubstr("shape_buckets['batch']: bucket step"));
}

TEST(BucketPolicyTest, ExpressionDimsAreNotBucketed) {
  ir::Graph g = TwoSymbols();
  g.subgraphs[0].inputs = {0, 1};
  absl::StatusOr<BucketPolicy> p = BucketPolicy::Make(g, {});
  ASSERT_TRUE(p.ok());
  std::vector<std::vector<int64_t>> bound;
  std::string why;
  const TensorView x(DType::kF32, {3, 5, 8}, static_cast<void*>(nullptr));
  const TensorView n(DType::kI64, {6}, static_cast<void*>(nullptr));
  EXPECT_FALSE(p->BoundShapes(g, {x, n}, &bound, &why));
  EXPECT_THAT(why, HasSubstr("input 'n' dim 0 is 1+seq, not one symbol"));
}

// A body's dims are bucketed where they have varied between its calls
// (BodyDims): a fixed hidden size of 48 stays 48, a growing token count is
// bounded; with no mask every dim is.
TEST(BucketPolicyTest, BodyDimsThatNeverVariedStayExact) {
  const ir::Graph g = TwoSymbols();
  absl::StatusOr<BucketPolicy> p = BucketPolicy::Make(g, {});
  ASSERT_TRUE(p.ok()) << p.status();
  BodyDims dims;
  auto view = [](std::vector<int64_t> shape) { return TensorView(DType::kF32, std::move(shape), static_cast<void*>(nullptr)); };
  std::vector<std::vector<int64_t>> in, cap;
  std::string why;
  const std::vector<TensorView> first = {view({3, 5}), view({3, 48})};
  absl::Span<const std::vector<bool>> varied = dims.Note(first, std::vector<TensorView>{view({48})});
  ASSERT_TRUE(p->BoundBodyShapes(first, std::vector<TensorView>{view({48})}, &in, &cap, &why, varied)) << why;
  EXPECT_EQ(in, (std::vector<std::vector<int64_t>>{{3, 5}, {3, 48}}));  // nothing varied yet
  EXPECT_EQ(cap, (std::vector<std::vector<int64_t>>{{48}}));
  const std::vector<TensorView> later = {view({3, 6}), view({3, 48})};
  varied = dims.Note(later, std::vector<TensorView>{view({48})});
  ASSERT_TRUE(p->BoundBodyShapes(later, std::vector<TensorView>{view({48})}, &in, &cap, &why, varied)) << why;
  EXPECT_EQ(in, (std::vector<std::vector<int64_t>>{{3, 8}, {3, 48}}));
  EXPECT_EQ(cap, (std::vector<std::vector<int64_t>>{{48}}));
  ASSERT_TRUE(p->BoundBodyShapes(later, std::vector<TensorView>{view({48})}, &in, &cap, &why)) << why;
  EXPECT_EQ(in, (std::vector<std::vector<int64_t>>{{4, 8}, {4, 64}}));
  EXPECT_EQ(cap, (std::vector<std::vector<int64_t>>{{64}}));
}

}  // namespace
}  // namespace grove::runtime
