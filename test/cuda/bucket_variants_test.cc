// A bucket's graphs across passes on the emulated device, for the two ways
// a second pass over the same shapes used to capture again:
//  - kernel variants chosen per exact shape: a spatial mean whose reduce
//    variant (lanes) and an elementwise kernel whose threads would differ
//    across a bucket's shapes; each family's variant is chosen at the
//    bucket's bound and kept for its shapes (KernelDispatch::Kept), so the
//    bound's graph is refreshed for every shape and nothing is pinned;
//  - a host-driven Loop whose carried tokens grow each trip (a greedy
//    decoder with a hidden size of 48, not a power of two): its body is
//    bucketed with the hidden size exact (it never varies; 64 would not
//    plan), and with exact shapes its carried buffers grow in place
//    (reserved address ranges), so the body's graphs keep their addresses
//    and a second pass neither captures nor refreshes.
// Every run equals the CPU's.
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "grove/grove.h"
#include "gtest/gtest.h"
#include "lib/backends/backends.h"
#include "lib/backends/cuda/emulated_device.h"
#include "models/demo_models.h"
#include "test/cuda_op_test_util.h"
#include "test/model_test_util.h"
#include "test/op_test_util.h"

namespace grove {
namespace {

std::vector<float> Pattern(int64_t n, int seed, float scale) {
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = scale * std::sin(0.37f * static_cast<float>(i + 1) + static_cast<float>(seed));
  return v;
}

// Runs `inputs` twice over on a CUDA session with graphs (and by default
// the default buckets), each run against the CPU; the stats of each pass.
std::vector<SessionStats> TwoPasses(std::shared_ptr<const Model> model, const std::vector<std::vector<Tensor>>& inputs,
                                    const SessionOptions& options = SessionOptions()) {
  std::unique_ptr<Session> cpu = testing::CpuSession(model);
  absl::StatusOr<std::unique_ptr<Session>> gpu =
      internal::CreateSessionOnDevice(model, options, cuda::NewEmulatedDevice());
  EXPECT_TRUE(gpu.ok()) << gpu.status();
  std::vector<SessionStats> passes;
  if (!gpu.ok()) return passes;
  for (int pass = 0; pass < 2; ++pass) {
    for (size_t i = 0; i < inputs.size(); ++i) {
      const std::vector<Tensor> want = testing::RunCopies(*cpu, inputs[i]);
      const std::vector<Tensor> got = testing::RunCopies(**gpu, inputs[i]);
      EXPECT_EQ(want.size(), got.size());
      for (size_t k = 0; k < want.size() && k < got.size(); ++k) {
        EXPECT_EQ(testing::CompareTensors(want[k], got[k], 1e-5), "")
            << "pass " << pass << " case " << i << " output " << k;
      }
    }
    passes.push_back((*gpu)->stats());
  }
  return passes;
}

TEST(BucketVariantsTest, SpatialMeanKeepsTheBoundsVariantsForTheWholeBucket) {
  ModelBuilder b;
  b.AddSymbol("batch", 1, 8);
  b.AddSymbol("hw", 1, 64);
  b.AddInput("x", DType::kF32, {"batch", 3, "hw", "hw"});
  b.AddWeight("scale", DType::kF32, {3}, std::vector<float>{0.5f, -1.25f, 2.0f});
  b.AddOp("ReduceMean", {"x"}, {"mean"}, {{"axes", std::vector<int64_t>{2, 3}}, {"keepdims", int64_t{0}}});
  b.AddOp("Mul", {"mean", "scale"}, {"y"});
  b.AddOp("Sigmoid", {"x"}, {"s"});
  b.AddOutput("y");
  b.AddOutput("s");
  std::shared_ptr<const Model> model = testing::LoadOrDie(b.Finish());
  ASSERT_NE(model, nullptr);
  // Inside the default buckets hw (8, 16] and batch (2, 4]: spatial sizes
  // 81 to 256, whose best reduce and elementwise variants differ.
  std::vector<std::vector<Tensor>> inputs;
  const int64_t shapes[][2] = {{3, 9}, {4, 16}, {3, 12}, {4, 10}};
  for (const auto& [batch, hw] : shapes) {
    inputs.push_back({testing::MakeTensor<float>(DType::kF32, {batch, 3, hw, hw},
                                                 Pattern(batch * 3 * hw * hw, static_cast<int>(hw), 2.0f))});
  }
  const std::vector<SessionStats> s = TwoPasses(model, inputs);
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].bucket_fallback_reason, "");
  EXPECT_EQ(s[0].buckets_made, 1);
  EXPECT_EQ(s[0].graphs_captured, 1);
  EXPECT_EQ(s[1].graphs_captured, s[0].graphs_captured);  // the second pass captures nothing
  EXPECT_GT(s[1].graph_refreshes, s[0].graph_refreshes);
  EXPECT_EQ(s[1].launches_outside_graphs, 0);
}

// Attention over Q [1, 4, sq, 32] and K, V [1, 4, sk, 32] (demo::
// BuildAttention; a length < 1 is the symbol), which the plan pass fuses
// into one FusedAttention step (a node made anew for each plan: choices are
// kept by the node's place). Runs `lengths` (the symbol's values, one
// default bucket) twice over against the CPU and expects one graph,
// captured at the bound, to serve them all.
void ExpectOneAttentionGraph(int64_t sq, int64_t sk, const std::vector<int64_t>& lengths) {
  absl::StatusOr<std::vector<uint8_t>> bytes = demo::BuildAttention(sq, sk, 4, 32);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  std::shared_ptr<const Model> model = testing::LoadOrDie(*bytes);
  ASSERT_NE(model, nullptr);
  std::vector<std::vector<Tensor>> inputs;
  for (int64_t n : lengths) {
    const int64_t q_rows = sq < 1 ? n : sq, kv_rows = sk < 1 ? n : sk;
    inputs.push_back({testing::MakeTensor<float>(DType::kF32, {1, 4, q_rows, 32}, Pattern(128 * q_rows, 1, 1.0f)),
                      testing::MakeTensor<float>(DType::kF32, {1, 4, kv_rows, 32}, Pattern(128 * kv_rows, 2, 1.5f)),
                      testing::MakeTensor<float>(DType::kF32, {1, 4, kv_rows, 32}, Pattern(128 * kv_rows, 3, 1.0f))});
  }
  const std::vector<SessionStats> s = TwoPasses(model, inputs);
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].bucket_fallback_reason, "");
  EXPECT_EQ(s[0].buckets_made, 1);
  EXPECT_EQ(s[0].graphs_captured, 1);
  EXPECT_EQ(s[1].graphs_captured, s[0].graphs_captured);
  EXPECT_GT(s[1].graph_refreshes, s[0].graph_refreshes);
  EXPECT_EQ(s[1].launches_outside_graphs, 0);
}

// A decode step against a growing KV cache (400, 300, 480 keys: the bucket
// (256, 512]): the block-per-row kernel splits the keys among blocks as at
// the bound, 512 keys in 2 splits, for every shape (each alone would not
// split): the bound's graph, two launches, is refreshed for each.
TEST(BucketVariantsTest, DecodeAttentionKeepsTheBoundsKeySplits) { ExpectOneAttentionGraph(1, 0, {400, 300, 480}); }

// Prefill over sequences of 20, 27, 32 (the bucket (16, 32]): the tiled
// kernel chosen at the bound for every shape.
TEST(BucketVariantsTest, FusedAttentionKeepsTheBoundsTile) { ExpectOneAttentionGraph(0, 0, {20, 27, 32}); }

// A greedy decoder: tokens [batch, t] grow by one each trip, h [batch, 48].
std::shared_ptr<const Model> GreedyDecoder() {
  constexpr int64_t kHidden = 48, kVocab = 40;
  ModelBuilder b;
  b.AddSymbol("batch", 1, 8);
  b.AddSymbol("t", 1, 1024);
  b.AddInput("trips", DType::kI64, {});
  b.AddInput("start", DType::kI64, {"batch", 1});
  b.AddInput("h0", DType::kF32, {"batch", kHidden});
  b.AddWeight("wh", DType::kF32, {kHidden, kHidden}, Pattern(kHidden * kHidden, 1, 0.3f));
  b.AddWeight("emb", DType::kF32, {kVocab, kHidden}, Pattern(kVocab * kHidden, 2, 0.5f));
  b.AddWeight("wo", DType::kF32, {kHidden, kVocab}, Pattern(kHidden * kVocab, 3, 0.4f));
  const int body = b.AddSubgraph("body");
  b.AddInput("i", DType::kI64, {});
  b.AddInput("cond_in", DType::kBool, {});
  b.AddInput("tokens", DType::kI64, {"batch", "t"});
  b.AddInput("h", DType::kF32, {"batch", kHidden});
  b.AddWeight("last", DType::kI64, {1}, std::vector<int64_t>{-1});
  b.AddOp("Gather", {"tokens", "last"}, {"prev"}, {{"axis", int64_t{1}}});  // [batch, 1]
  b.AddOp("Squeeze", {"prev"}, {"prev1"}, {{"axes", std::vector<int64_t>{1}}});
  b.AddOp("Gather", {"emb", "prev1"}, {"e"}, {{"axis", int64_t{0}}});  // [batch, 48]
  b.AddOp("MatMul", {"h", "wh"}, {"hw"});
  b.AddOp("Add", {"hw", "e"}, {"pre"});
  b.AddOp("Tanh", {"pre"}, {"h_next"});
  b.AddOp("MatMul", {"h_next", "wo"}, {"logits"});
  b.AddOp("ArgMax", {"logits"}, {"tok"}, {{"axis", int64_t{1}}, {"keepdims", int64_t{1}}});
  b.AddOp("Concat", {"tokens", "tok"}, {"tokens_next"}, {{"axis", int64_t{1}}});
  b.AddOutput("cond_in");
  b.AddOutput("tokens_next");
  b.AddOutput("h_next");
  b.SetSubgraph(0);
  b.AddOp("Loop", {"trips", "", "start", "h0"}, {"out_tokens", "out_h"}, {{"body", SubgraphRef{body}}}, "decode");
  b.AddOutput("out_tokens");
  b.AddOutput("out_h");
  return testing::LoadOrDie(b.Finish());
}

TEST(BucketVariantsTest, LoopWithGrowingCarriedTokensCapturesNothingOnTheSecondPass) {
  std::shared_ptr<const Model> model = GreedyDecoder();
  ASSERT_NE(model, nullptr);
  std::vector<std::vector<Tensor>> inputs;
  const int64_t cases[][2] = {{1, 6}, {2, 3}, {4, 20}, {1, 5}, {3, 2}};  // batch, trips
  for (const auto& [batch, trips] : cases) {
    std::vector<int64_t> start;
    for (int64_t i = 0; i < batch; ++i) start.push_back((7 * i + trips) % 40);
    inputs.push_back({testing::MakeTensor<int64_t>(DType::kI64, {}, {trips}),
                      testing::MakeTensor<int64_t>(DType::kI64, {batch, 1}, start),
                      testing::MakeTensor<float>(DType::kF32, {batch, 48},
                                                 Pattern(batch * 48, static_cast<int>(trips), 0.7f))});
  }
  // Bucketed: the body's hidden size 48 stays exact (a bound of 64 would
  // not plan against the [48, 48] weight), its token count is bucketed.
  std::vector<SessionStats> s = TwoPasses(model, inputs);
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].bucket_fallback_reason, "");
  EXPECT_GT(s[0].buckets_made, 1);
  EXPECT_EQ(s[1].graphs_captured, s[0].graphs_captured);
  EXPECT_EQ(s[1].launches_outside_graphs, 0);
  // Exact shapes: a graph per body shape, at addresses that stay put when
  // a longer call grows the carried buffers, so nothing is even refreshed.
  SessionOptions exact;
  exact.shape_buckets = {{"*", "exact"}};
  s = TwoPasses(model, inputs, exact);
  ASSERT_EQ(s.size(), 2u);
  EXPECT_GT(s[0].graphs_captured, 0);
  EXPECT_EQ(s[1].graphs_captured, s[0].graphs_captured);
  EXPECT_EQ(s[1].graph_refreshes, s[0].graph_refreshes);
  EXPECT_EQ(s[1].launches_outside_graphs, 0);
}

}  // namespace
}  // namespace grove
