// The attention plan pass (lib/runtime/attention_fusion.h) on patterns real
// exporters emit that test/runtime/attention_fusion_test.cc's chains do not:
// torch.onnx.export of scaled_dot_product_attention with a boolean mask
// (the mask turned into 0 / -inf by a Where, Q and Kᵀ each times
// sqrt(scale), and Where(IsNaN(p), 0, p) after the Softmax, so that a row
// whose keys are all masked gives zeros), and near misses that must stay
// unfused. Fused against unfused on the CPU and the emulated CUDA device.
#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "lib/backends/cpu/attention.h"
#include "lib/backends/cuda/emulated_device.h"
#include "lib/runtime/attention_fusion.h"
#include "test/attention_test_util.h"
#include "test/runtime/attention_fusion_test_util.h"

namespace grove::testing {
namespace {

// How the probabilities' NaNs are treated after the Softmax.
enum class NanFix {
  kZero,          // Where(IsNaN(p), 0, p): PyTorch's export
  kNone,          // no IsNaN at all (a float mask's export)
  kHalf,          // Where(IsNaN(p), 0.5, p): not zeros, not fused
  kSwapped,       // Where(IsNaN(p), p, 0): zeros where p is a number, not fused
  kCondOutput,    // IsNaN(p) is also a model output, not fused
  kOtherIsNan,    // Where(IsNaN(scores), 0, p): another tensor's NaNs, not fused
};

// q, k, v [2, 2, s, 8]; key_keep [2, 1, 1, s] bool (true: attend), as
// torch.onnx.export (opset 14..18, either exporter) writes
// F.scaled_dot_product_attention(q, k, v, attn_mask=key_keep).
absl::StatusOr<std::shared_ptr<const Model>> SdpaBoolMaskModel(NanFix fix) {
  ModelBuilder b;
  b.AddSymbol("s", 1, 512);
  b.AddInput("q", DType::kF32, {2, 2, "s", 8});
  b.AddInput("k", DType::kF32, {2, 2, "s", 8});
  b.AddInput("v", DType::kF32, {2, 2, "s", 8});
  b.AddInput("key_keep", DType::kBool, {2, 1, 1, "s"});
  auto scalar = [&](const std::string& name, float v) { b.AddWeight(name, DType::kF32, {}, std::vector<float>{v}); };
  scalar("zero", 0.0f);
  scalar("half", 0.5f);
  scalar("ninf", -std::numeric_limits<float>::infinity());
  scalar("root_scale", 0.59460356f);  // sqrt(1 / sqrt(8))
  b.AddOp("Where", {"key_keep", "zero", "ninf"}, {"mask"}, {}, "mask_to_float");
  b.AddOp("Mul", {"q", "root_scale"}, {"q_s"}, {}, "q_scaled");
  b.AddOp("Transpose", {"k"}, {"kt"}, {{"perm", std::vector<int64_t>{0, 1, 3, 2}}}, "k_t");
  b.AddOp("Mul", {"kt", "root_scale"}, {"kt_s"}, {}, "k_scaled");
  b.AddOp("MatMul", {"q_s", "kt_s"}, {"scores"}, {}, "qk");
  b.AddOp("Add", {"scores", "mask"}, {"masked"}, {}, "mask");
  b.AddOp("Softmax", {"masked"}, {"probs"}, {{"axis", int64_t{-1}}}, "softmax");
  std::string p = "probs";
  if (fix != NanFix::kNone) {
    b.AddOp("IsNaN", {fix == NanFix::kOtherIsNan ? "masked" : "probs"}, {"nan"}, {}, "isnan");
    if (fix == NanFix::kSwapped) {
      b.AddOp("Where", {"nan", "probs", "zero"}, {"fixed"}, {}, "nan_to_zero");
    } else {
      b.AddOp("Where", {"nan", fix == NanFix::kHalf ? "half" : "zero", "probs"}, {"fixed"}, {}, "nan_to_zero");
    }
    p = "fixed";
  }
  b.AddOp("MatMul", {p, "v"}, {"y"}, {}, "pv");
  b.AddOutput("y");
  if (fix == NanFix::kCondOutput) b.AddOutput("nan");
  absl::StatusOr<std::vector<uint8_t>> bytes = b.Finish();
  if (!bytes.ok()) return bytes.status();
  return Model::LoadFromBuffer(*bytes);
}

// Batch 1 keeps no key at all (its rows are NaN before the fix, zeros
// after); batch 0 keeps all but the last. With `inf_in_v`, V holds +inf at
// batch 1's key 0, column 3: 0 * inf makes that column NaN, fused or not.
std::vector<Tensor> SdpaInputs(int64_t s, bool inf_in_v = false) {
  std::vector<Tensor> in = {AttnData({2, 2, s, 8}, 21), AttnData({2, 2, s, 8}, 22), AttnData({2, 2, s, 8}, 23)};
  if (inf_in_v) in[2].as<float>()[2 * s * 8 + 3] = std::numeric_limits<float>::infinity();
  Tensor keep = Tensor::Create(DType::kBool, {2, 1, 1, s}).value();
  for (int64_t j = 0; j < s; ++j) {
    keep.as<uint8_t>()[j] = j + 1 < s || s == 1 ? 1 : 0;
    keep.as<uint8_t>()[s + j] = 0;
  }
  in.push_back(std::move(keep));
  return in;
}

// FusedAttention steps in the plan on `device` (*softmax: its Softmax steps).
int FusedSteps(const Model& model, const std::vector<Tensor>& inputs, Device device, int* softmax = nullptr) {
  const StepCounts c = Steps(model, inputs, device);
  if (softmax != nullptr) *softmax = c.softmax;
  return c.fused;
}

// Fused (on the CPU with and without its AVX2 blocks, and on the emulated
// device) against the unfused CPU plan: NaN exactly where it is NaN, else
// within 1e-5.
void ExpectSameAsUnfused(const std::shared_ptr<const Model>& model, const std::vector<Tensor>& in) {
  std::vector<Tensor> unfused;
  {
    ScopedAttentionFusion off(false);
    unfused = RunModel(model, in, nullptr);
  }
  ScopedAttentionFusion on(true);
  for (int run = 0; run < 3; ++run) {
    SCOPED_TRACE(run == 0 ? "cpu" : run == 1 ? "cpu, plain loops" : "emulated cuda");
    cpu::SetAttentionSimdAllowed(run != 1);
    const std::vector<Tensor> fused = RunModel(model, in, run == 2 ? cuda::NewEmulatedDevice() : nullptr);
    cpu::SetAttentionSimdAllowed(true);
    ASSERT_EQ(fused.size(), unfused.size());
    for (size_t o = 0; o < fused.size(); ++o) {
      if (fused[o].dtype() != DType::kF32) continue;
      EXPECT_EQ(CompareAttention(unfused[o], fused[o], 1e-5), "") << "output " << o;
    }
  }
}

TEST(AttentionFusionPatternsTest, SdpaBoolMaskFusesWithItsNanFixOnBothBackends) {
  absl::StatusOr<std::shared_ptr<const Model>> model = SdpaBoolMaskModel(NanFix::kZero);
  ASSERT_TRUE(model.ok()) << model.status();
  for (int64_t s : {1, 5, 37}) {
    SCOPED_TRACE(absl::StrCat("seq ", s));
    const std::vector<Tensor> in = SdpaInputs(s);
    for (Device device : {Device::kCpu, Device::kCuda}) {
      int softmax = -1;
      EXPECT_EQ(FusedSteps(**model, in, device, &softmax), 1);
      EXPECT_EQ(softmax, 0);
    }
    ExpectSameAsUnfused(*model, in);
  }
}

TEST(AttentionFusionPatternsTest, AFullyMaskedRowGivesZerosOrNaNWhereVIsInfinite) {
  absl::StatusOr<std::shared_ptr<const Model>> model = SdpaBoolMaskModel(NanFix::kZero);
  ASSERT_TRUE(model.ok()) << model.status();
  const int64_t s = 6;
  const std::vector<Tensor> in = SdpaInputs(s, /*inf_in_v=*/true);
  ScopedAttentionFusion on(true);
  for (bool emulated : {false, true}) {
    SCOPED_TRACE(emulated ? "emulated cuda" : "cpu");
    const std::vector<Tensor> out = RunModel(*model, in, emulated ? cuda::NewEmulatedDevice() : nullptr);
    ASSERT_EQ(out.size(), 1u);
    const float* y = out[0].as<const float>();
    // Batch 1, head 0 (V's +inf is there): column 3 NaN, the others 0.
    for (int64_t i = 0; i < s; ++i) {
      for (int64_t c = 0; c < 8; ++c) {
        const float got = y[((1 * 2 + 0) * s + i) * 8 + c];
        if (c == 3) {
          EXPECT_TRUE(std::isnan(got)) << i << "," << c;
        } else {
          EXPECT_EQ(got, 0.0f) << i << "," << c;
        }
      }
    }
    // Batch 1, head 1: zeros.
    for (int64_t e = 0; e < s * 8; ++e) EXPECT_EQ(y[(1 * 2 + 1) * s * 8 + e], 0.0f) << e;
  }
  ExpectSameAsUnfused(*model, in);
}

TEST(AttentionFusionPatternsTest, NearMissesOfTheNanFixStayAsTheyAre) {
  const std::pair<const char*, NanFix> cases[] = {
      {"fill 0.5, not 0", NanFix::kHalf},
      {"zeros where p is a number", NanFix::kSwapped},
      {"the IsNaN is also an output", NanFix::kCondOutput},
      {"the IsNaN of the scores", NanFix::kOtherIsNan},
  };
  for (const auto& [name, fix] : cases) {
    SCOPED_TRACE(name);
    absl::StatusOr<std::shared_ptr<const Model>> model = SdpaBoolMaskModel(fix);
    ASSERT_TRUE(model.ok()) << model.status();
    const std::vector<Tensor> in = SdpaInputs(5);
    for (Device device : {Device::kCpu, Device::kCuda}) {
      int softmax = -1;
      EXPECT_EQ(FusedSteps(**model, in, device, &softmax), 0);
      EXPECT_EQ(softmax, 1);
    }
    ExpectSameAsUnfused(*model, in);
  }
}

TEST(AttentionFusionPatternsTest, WithoutTheNanFixAFullyMaskedRowStaysNaN) {
  absl::StatusOr<std::shared_ptr<const Model>> model = SdpaBoolMaskModel(NanFix::kNone);
  ASSERT_TRUE(model.ok()) << model.status();
  const std::vector<Tensor> in = SdpaInputs(4);
  for (Device device : {Device::kCpu, Device::kCuda}) EXPECT_EQ(FusedSteps(**model, in, device), 1);
  ScopedAttentionFusion on(true);
  const std::vector<Tensor> out = RunModel(*model, in, nullptr);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_TRUE(std::isnan(out[0].as<const float>()[2 * 4 * 8])) << "batch 1 keeps no key";
  ExpectSameAsUnfused(*model, in);
}

// How K and V reach the product in grouped-query attention.
enum class Repeat {
  kRepeatKv,          // Unsqueeze(2), Expand, Reshape: Hugging Face's repeat_kv
  kReshapeFirst,      // a Reshape to [1, n, 1, s, 8] in place of the Unsqueeze
  kTile,              // a Tile in place of the Expand (repeat_interleave, TorchScript exporter)
  kMqa,               // repeat_kv of one key-value head
  kTiled,             // Unsqueeze(1): the heads repeated as a block (head h reads h % n)
  kOnlyK,             // K repeated, V holding every head already
  kRepeatedIsOutput,  // the repeated K also a model output
};

// q [1, 4, s, 8]; k, v [1, n, s, 8] (n = 2, 1 for kMqa; V [1, 4, s, 8] for
// kOnlyK); m [1, 1, s, s] added to the scores q kᵀ / sqrt(8).
absl::StatusOr<std::shared_ptr<const Model>> GroupedQueryModel(Repeat r) {
  const int64_t n = r == Repeat::kMqa ? 1 : 2, g = 4 / n;
  ModelBuilder b;
  b.AddSymbol("s", 1, 512);
  b.AddInput("q", DType::kF32, {1, 4, "s", 8});
  b.AddInput("k", DType::kF32, {1, n, "s", 8});
  b.AddInput("v", DType::kF32, {1, r == Repeat::kOnlyK ? 4 : n, "s", 8});
  b.AddInput("m", DType::kF32, {1, 1, "s", "s"});
  b.AddWeight("root8", DType::kF32, {}, std::vector<float>{std::sqrt(8.0f)});
  b.AddWeight("axis", DType::kI64, {1}, std::vector<int64_t>{r == Repeat::kTiled ? 1 : 2});
  b.AddWeight("grow", DType::kI64, {5},
              r == Repeat::kTiled ? std::vector<int64_t>{1, g, 1, 1, 1} : std::vector<int64_t>{1, 1, g, 1, 1});
  b.AddWeight("split", DType::kI64, {5}, std::vector<int64_t>{0, n, 1, -1, 8});
  b.AddWeight("merge", DType::kI64, {4}, std::vector<int64_t>{0, 4, -1, 8});
  auto repeat = [&](const std::string& x) {
    if (r == Repeat::kReshapeFirst) {
      b.AddOp("Reshape", {x, "split"}, {x + "_1"}, {}, x + "_split");
    } else {
      b.AddOp("Unsqueeze", {x, "axis"}, {x + "_1"}, {}, x + "_unsqueeze");
    }
    if (r == Repeat::kTile) {
      b.AddOp("Tile", {x + "_1", "grow"}, {x + "_g"}, {}, x + "_expand_by_tile");
    } else {
      b.AddOp("Expand", {x + "_1", "grow"}, {x + "_g"}, {}, x + "_expand");
    }
    b.AddOp("Reshape", {x + "_g", "merge"}, {x + "_rep"}, {}, x + "_merge");
    return x + "_rep";
  };
  const std::string k = repeat("k");
  const std::string v = r == Repeat::kOnlyK ? "v" : repeat("v");
  b.AddOp("Transpose", {k}, {"kt"}, {{"perm", std::vector<int64_t>{0, 1, 3, 2}}}, "k_t");
  b.AddOp("MatMul", {"q", "kt"}, {"scores"}, {}, "qk");
  b.AddOp("Div", {"scores", "root8"}, {"scaled"}, {}, "scale");
  b.AddOp("Add", {"scaled", "m"}, {"masked"}, {}, "mask");
  b.AddOp("Softmax", {"masked"}, {"probs"}, {{"axis", int64_t{-1}}}, "softmax");
  b.AddOp("MatMul", {"probs", v}, {"y"}, {}, "pv");
  b.AddOutput("y");
  if (r == Repeat::kRepeatedIsOutput) b.AddOutput(k);
  absl::StatusOr<std::vector<uint8_t>> bytes = b.Finish();
  if (!bytes.ok()) return bytes.status();
  return Model::LoadFromBuffer(*bytes);
}

std::vector<Tensor> GroupedQueryInputs(Repeat r, int64_t s) {
  const int64_t n = r == Repeat::kMqa ? 1 : 2;
  return {AttnData({1, 4, s, 8}, 31), AttnData({1, n, s, 8}, 32),
          AttnData({1, r == Repeat::kOnlyK ? 4 : n, s, 8}, 33), AttnData({1, 1, s, s}, 34)};
}

// repeat_kv's steps are absorbed (the fused kernel reads K's and V's heads
// in place, kv_group = heads / n) where they repeat each head in place;
// otherwise the repeated K and V are the fused step's inputs. Either way
// the fused plans compute what the unfused one does.
TEST(AttentionFusionPatternsTest, GroupedQueryHeadsAreReadInPlace) {
  const std::tuple<const char*, Repeat, bool> cases[] = {
      {"repeat_kv", Repeat::kRepeatKv, true},
      {"a Reshape first", Repeat::kReshapeFirst, true},
      {"a Tile", Repeat::kTile, true},
      {"one key-value head", Repeat::kMqa, true},
      {"heads tiled, not repeated in place", Repeat::kTiled, false},
      {"V not repeated", Repeat::kOnlyK, false},
      {"the repeated K is an output", Repeat::kRepeatedIsOutput, false},
  };
  for (const auto& [name, r, absorbed] : cases) {
    SCOPED_TRACE(name);
    absl::StatusOr<std::shared_ptr<const Model>> model = GroupedQueryModel(r);
    ASSERT_TRUE(model.ok()) << model.status();
    for (int64_t s : {1, 6, 19}) {
      SCOPED_TRACE(absl::StrCat("seq ", s));
      const std::vector<Tensor> in = GroupedQueryInputs(r, s);
      for (Device device : {Device::kCpu, Device::kCuda}) {
        ScopedAttentionFusion on(true);
        const StepCounts c = Steps(**model, in, device);
        EXPECT_EQ(c.fused, 1);
        EXPECT_EQ(c.softmax, 0);
        EXPECT_EQ(c.fused_name.find("k_expand") != std::string::npos, absorbed) << c.fused_name;
        EXPECT_EQ(c.fused_name.find("v_expand") != std::string::npos, absorbed) << c.fused_name;
        if (absorbed) EXPECT_EQ(c.total, 1) << c.fused_name;
      }
      ExpectSameAsUnfused(*model, in);
    }
  }
}

// Kᵀ as the dynamo exporter's scaled_dot_product_attention writes it: k
// [2, 3, s, 8] reshaped to [6, s, 8], Transpose(0, 2, 1), reshaped to
// [2, 3, 8, s], times sqrt(scale) (as Q is). With `reordered` the last
// Reshape gives [3, 2, 8, s]: no longer k's last two axes swapped, so the
// three steps stay and their output is the fused step's Kᵀ.
absl::StatusOr<std::shared_ptr<const Model>> DynamoSdpaModel(bool reordered) {
  ModelBuilder b;
  b.AddSymbol("s", 1, 512);
  b.AddInput("q", DType::kF32, {reordered ? 3 : 2, reordered ? 2 : 3, "s", 8});
  b.AddInput("k", DType::kF32, {2, 3, "s", 8});
  b.AddInput("v", DType::kF32, {reordered ? 3 : 2, reordered ? 2 : 3, "s", 8});
  b.AddWeight("root_scale", DType::kF32, {}, std::vector<float>{0.59460356f});
  b.AddWeight("merged", DType::kI64, {3}, std::vector<int64_t>{6, -1, 8});
  b.AddWeight("split", DType::kI64, {4}, std::vector<int64_t>{reordered ? 3 : 2, reordered ? 2 : 3, 8, -1});
  b.AddOp("Reshape", {"k", "merged"}, {"k3"}, {}, "k_merge");
  b.AddOp("Transpose", {"k3"}, {"kt3"}, {{"perm", std::vector<int64_t>{0, 2, 1}}}, "k_swap");
  b.AddOp("Reshape", {"kt3", "split"}, {"kt"}, {}, "k_split");
  b.AddOp("Mul", {"q", "root_scale"}, {"q_s"}, {}, "q_scaled");
  b.AddOp("Mul", {"kt", "root_scale"}, {"kt_s"}, {}, "k_scaled");
  b.AddOp("MatMul", {"q_s", "kt_s"}, {"scores"}, {}, "qk");
  b.AddOp("Softmax", {"scores"}, {"probs"}, {{"axis", int64_t{-1}}}, "softmax");
  b.AddOp("MatMul", {"probs", "v"}, {"y"}, {}, "pv");
  b.AddOutput("y");
  absl::StatusOr<std::vector<uint8_t>> bytes = b.Finish();
  if (!bytes.ok()) return bytes.status();
  return Model::LoadFromBuffer(*bytes);
}

TEST(AttentionFusionPatternsTest, KTransposedThroughRank3IsReadInPlace) {
  for (bool reordered : {false, true}) {
    SCOPED_TRACE(reordered ? "leading dims reordered" : "dynamo's Kᵀ");
    absl::StatusOr<std::shared_ptr<const Model>> model = DynamoSdpaModel(reordered);
    ASSERT_TRUE(model.ok()) << model.status();
    for (int64_t s : {1, 7, 20}) {
      SCOPED_TRACE(absl::StrCat("seq ", s));
      const std::vector<int64_t> qv = {reordered ? 3 : 2, reordered ? 2 : 3, s, 8};
      const std::vector<Tensor> in = {AttnData(qv, 41), AttnData({2, 3, s, 8}, 42), AttnData(qv, 43)};
      for (Device device : {Device::kCpu, Device::kCuda}) {
        ScopedAttentionFusion on(true);
        const StepCounts c = Steps(**model, in, device);
        EXPECT_EQ(c.fused, 1);
        EXPECT_EQ(c.fused_name.find("k_swap") != std::string::npos, !reordered) << c.fused_name;
        EXPECT_EQ(c.total, reordered ? 4 : 1) << c.fused_name;
      }
      ExpectSameAsUnfused(*model, in);
    }
  }
}

// An added mask made by Where(cond, fill, 0), fill -inf or at most -2^100,
// as the dynamo exporter builds scaled_dot_product_attention(is_causal=True)'s
// (Expand, Trilu, Equal, Where with float32's lowest, then Add to the
// scores): the fused step reads cond as a Where mask filling `fill` (the CPU
// kernel then skips the keys a causal mask drops),
// taking the Where with it when only the Add reads its output. q, k, v
// [1, 2, s, 8], cond [s, s] (true: masked with `ninf_first`, else kept).
// With `shared`, a second attention (k and q swapped) adds the same mask:
// both read cond and the Where stays for neither. A fill of -1e9 is no such
// mask (x + -1e9 is not -1e9): the Where stays, its output added.
absl::StatusOr<std::shared_ptr<const Model>> AddedWhereMaskModel(bool ninf_first, bool shared, float fill) {
  ModelBuilder b;
  b.AddSymbol("s", 1, 512);
  for (const char* name : {"q", "k", "v"}) b.AddInput(name, DType::kF32, {1, 2, "s", 8});
  b.AddInput("cond", DType::kBool, {"s", "s"});
  b.AddWeight("zero", DType::kF32, {}, std::vector<float>{0.0f});
  b.AddWeight("fill", DType::kF32, {}, std::vector<float>{fill});
  b.AddWeight("scale", DType::kF32, {}, std::vector<float>{0.35355339f});
  b.AddOp("Where", {"cond", ninf_first ? "fill" : "zero", ninf_first ? "zero" : "fill"}, {"mask"}, {}, "mask_where");
  auto attention = [&](const std::string& q, const std::string& k, const std::string& tag) {
    b.AddOp("Transpose", {k}, {"kt" + tag}, {{"perm", std::vector<int64_t>{0, 1, 3, 2}}}, "k_t" + tag);
    b.AddOp("MatMul", {q, "kt" + tag}, {"scores" + tag}, {}, "qk" + tag);
    b.AddOp("Mul", {"scores" + tag, "scale"}, {"scaled" + tag}, {}, "scale" + tag);
    b.AddOp("Add", {"scaled" + tag, "mask"}, {"masked" + tag}, {}, "add_mask" + tag);
    b.AddOp("Softmax", {"masked" + tag}, {"probs" + tag}, {{"axis", int64_t{-1}}}, "softmax" + tag);
    b.AddOp("MatMul", {"probs" + tag, "v"}, {"y" + tag}, {}, "pv" + tag);
    b.AddOutput("y" + tag);
  };
  attention("q", "k", "");
  if (shared) attention("k", "q", "2");
  absl::StatusOr<std::vector<uint8_t>> bytes = b.Finish();
  if (!bytes.ok()) return bytes.status();
  return Model::LoadFromBuffer(*bytes);
}

TEST(AttentionFusionPatternsTest, AnAddedMinusInfinityWhereIsACausalWhereMask) {
  const float ninf = -std::numeric_limits<float>::infinity();
  struct Case {
    std::string what;
    bool ninf_first, shared;
    float fill;
    int total;          // steps in the fused plan
    bool where_inside;  // the Where is one of the fused step's
  };
  const std::vector<Case> cases = {
      {"Where(cond, -inf, 0)", true, false, ninf, 1, true},
      {"Where(cond, 0, -inf)", false, false, ninf, 1, true},
      {"a mask two attentions add", true, true, ninf, 3, false},
      {"Where(cond, float min, 0): dynamo's", true, false, std::numeric_limits<float>::lowest(), 1, true},
      {"Where(cond, 0, -2^100)", false, false, -0x1p100f, 1, true},
      {"a fill of -1e9: added as it is", true, false, -1e9f, 2, false},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    absl::StatusOr<std::shared_ptr<const Model>> model = AddedWhereMaskModel(c.ninf_first, c.shared, c.fill);
    ASSERT_TRUE(model.ok()) << model.status();
    for (int64_t s : {1, 7, 40}) {
      SCOPED_TRACE(absl::StrCat("seq ", s));
      std::vector<Tensor> in = {AttnData({1, 2, s, 8}, 51), AttnData({1, 2, s, 8}, 52), AttnData({1, 2, s, 8}, 53)};
      for (int pattern = 0; pattern < 3; ++pattern) {
        SCOPED_TRACE(pattern == 0 ? "causal" : pattern == 1 ? "causal, row 0 masked whole" : "random");
        Tensor cond = Tensor::Create(DType::kBool, {s, s}).value();
        for (int64_t i = 0; i < s; ++i) {
          for (int64_t j = 0; j < s; ++j) {
            const bool masked = pattern == 2 ? (i * 7 + j * 3) % 5 == 0 : j > i || (pattern == 1 && i == 0);
            cond.as<uint8_t>()[i * s + j] = masked == c.ninf_first ? 1 : 0;
          }
        }
        std::vector<Tensor> inputs = {Tensor::CopyOf(in[0].view()).value(), Tensor::CopyOf(in[1].view()).value(),
                                      Tensor::CopyOf(in[2].view()).value(), std::move(cond)};
        for (Device device : {Device::kCpu, Device::kCuda}) {
          ScopedAttentionFusion on(true);
          const StepCounts counts = Steps(**model, inputs, device);
          EXPECT_EQ(counts.fused, c.shared ? 2 : 1);
          EXPECT_EQ(counts.total, c.total) << counts.fused_name;
          EXPECT_EQ(counts.fused_name.find("mask_where") != std::string::npos, c.where_inside) << counts.fused_name;
        }
        ExpectSameAsUnfused(*model, inputs);
      }
    }
  }
}

// The op itself: zero_nan_probs is 0 or 1, and with 1 a row whose keys are
// all masked (Where filling -inf) gives 0 where it gives NaN without.
TEST(AttentionFusionPatternsTest, ZeroNanProbsAttribute) {
  const Tensor q = AttnData({1, 1, 2, 4}, 1), k = AttnData({1, 1, 3, 4}, 2), v = AttnData({1, 1, 3, 5}, 3);
  Tensor cond = Tensor::Create(DType::kBool, {1, 1, 2, 3}).value();
  for (int j = 0; j < 3; ++j) {
    cond.as<uint8_t>()[j] = 1;          // row 0: every key masked
    cond.as<uint8_t>()[3 + j] = j == 2;  // row 1: key 2 masked
  }
  const std::vector<std::pair<std::string, AttrValue>> where = {
      {"mask", int64_t{2}}, {"mask_fill", -std::numeric_limits<double>::infinity()}, {"fill_if_true", int64_t{1}}};
  auto with = [&](int64_t zero_nan) {
    std::vector<std::pair<std::string, AttrValue>> attrs = where;
    attrs.push_back({"zero_nan_probs", zero_nan});
    return RunOp("FusedAttention", {&q, &k, &v, &cond}, attrs);
  };
  absl::StatusOr<std::vector<Tensor>> bad = with(2);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("zero_nan_probs"), std::string::npos) << bad.status();
  absl::StatusOr<std::vector<Tensor>> plain = with(0), zeroed = with(1);
  ASSERT_TRUE(plain.ok()) << plain.status();
  ASSERT_TRUE(zeroed.ok()) << zeroed.status();
  const float* p = (*plain)[0].as<const float>();
  const float* z = (*zeroed)[0].as<const float>();
  for (int c = 0; c < 5; ++c) {
    EXPECT_TRUE(std::isnan(p[c])) << c;
    EXPECT_EQ(z[c], 0.0f) << c;
    EXPECT_EQ(p[5 + c], z[5 + c]) << c;  // row 1 keeps two keys: the same either way
    EXPECT_FALSE(std::isnan(z[5 + c])) << c;
  }
}

}  // namespace
}  // namespace grove::testing
