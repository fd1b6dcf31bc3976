// The attention plan pass (lib/runtime/attention_fusion.h): which chains
// become one FusedAttention step on the CPU and CUDA plans (DescribeExecution
// plans for CUDA on a recording device, no GPU needed), which stay as they
// are, and that a fused plan computes what the unfused one does.
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "examples/models/demo_models.h"
#include "gtest/gtest.h"
#include "lib/backends/cuda/emulated_device.h"
#include "lib/runtime/attention_fusion.h"
#include "test/attention_test_util.h"
#include "test/model_test_util.h"
#include "test/runtime/attention_fusion_test_util.h"

namespace grove::testing {
namespace {

// Fused and unfused plans give the same outputs at these sequence lengths.
void ExpectSameOutputs(const AttentionChainSpec& spec, std::vector<int64_t> seqs) {
  absl::StatusOr<std::shared_ptr<const Model>> model = BuildAttentionChain(spec);
  ASSERT_TRUE(model.ok()) << model.status();
  for (int64_t s : seqs) {
    SCOPED_TRACE(absl::StrCat("seq ", s));
    const std::vector<Tensor> in = AttentionChainInputs(spec, s);
    std::vector<Tensor> fused, unfused;
    {
      ScopedAttentionFusion on(true);
      fused = RunModel(*model, in);
    }
    {
      ScopedAttentionFusion off(false);
      unfused = RunModel(*model, in);
    }
    ASSERT_EQ(fused.size(), unfused.size());
    for (size_t i = 0; i < fused.size(); ++i) EXPECT_EQ(CompareAttention(unfused[i], fused[i], 1e-5), "") << i;
  }
}

class FusesTest : public ::testing::TestWithParam<std::pair<std::string, AttentionChainSpec>> {};

TEST_P(FusesTest, OneStepOnBothBackendsAndTheSameOutputs) {
  const AttentionChainSpec& spec = GetParam().second;
  absl::StatusOr<std::shared_ptr<const Model>> model = BuildAttentionChain(spec);
  ASSERT_TRUE(model.ok()) << model.status();
  const std::vector<Tensor> in = AttentionChainInputs(spec, 5);
  for (Device device : {Device::kCpu, Device::kCuda}) {
    SCOPED_TRACE(device == Device::kCpu ? "cpu" : "cuda");
    const StepCounts fused = Steps(**model, in, device);
    EXPECT_EQ(fused.fused, 1);
    EXPECT_EQ(fused.softmax, 0);
    EXPECT_EQ(fused.matmul, 0);
    EXPECT_NE(fused.fused_name.find("softmax"), std::string::npos) << fused.fused_name;
    ScopedAttentionFusion off(false);
    const StepCounts unfused = Steps(**model, in, device);
    EXPECT_EQ(unfused.fused, 0);
    EXPECT_EQ(unfused.softmax, 1);
    EXPECT_EQ(unfused.matmul, 2);
    EXPECT_LT(fused.total, unfused.total);
  }
  ExpectSameOutputs(spec, {1, 5, 33});
}

INSTANTIATE_TEST_SUITE_P(
    Chains, FusesTest,
    ::testing::Values(
        std::make_pair("gpt_div_causal_trilu_where", AttentionChainSpec{.mask = 2}),
        std::make_pair("kt_given_mul_left_additive", AttentionChainSpec{.transpose_k = false, .scale = 1, .mask = 1}),
        std::make_pair("encoder_prescaled_rank3", AttentionChainSpec{.rank = 3, .transpose_k = false, .scale = 0,
                                                                     .prescale_qk = true}),
        std::make_pair("no_scale_no_mask", AttentionChainSpec{.scale = 0}),
        std::make_pair("rank3_transpose_div_additive", AttentionChainSpec{.rank = 3, .mask = 1}),
        std::make_pair("cast_identity_dropout_around_softmax", AttentionChainSpec{.mask = 2, .pass_throughs = true}),
        std::make_pair("gpt2_causal_where_then_added_mask", AttentionChainSpec{.mask = 3})),
    [](const auto& info) { return info.param.first; });

// f16 and bf16 chains fuse on CUDA (the kernel computes in f32 and rounds
// the output once, where the chain rounds every step's output) and stay
// unfused on the CPU, whose fused kernel is f32 only. The scale, the
// prescales and the -inf fill are weights of the chain's dtype. The fused
// output is within the dtype's rounding of the unfused one and of the f32
// chain run on the same (rounded) inputs.
TEST(AttentionFusionTest, HalfTypesFuseOnCudaOnly) {
  for (DType dtype : {DType::kF16, DType::kBF16}) {
    for (AttentionChainSpec spec : {AttentionChainSpec{.mask = 3}, AttentionChainSpec{.rank = 3, .transpose_k = false,
                                                                                       .scale = 0, .prescale_qk = true},
                                    AttentionChainSpec{.scale = 1, .mask = 2, .pass_throughs = true}}) {
      SCOPED_TRACE(absl::StrCat(DTypeName(dtype), " mask ", spec.mask, " scale ", spec.scale));
      AttentionChainSpec narrow = spec;
      narrow.dtype = dtype;
      absl::StatusOr<std::shared_ptr<const Model>> model = BuildAttentionChain(narrow);
      absl::StatusOr<std::shared_ptr<const Model>> model32 = BuildAttentionChain(spec);
      ASSERT_TRUE(model.ok()) << model.status();
      ASSERT_TRUE(model32.ok()) << model32.status();
      const std::vector<Tensor> in = AttentionChainInputs(narrow, 9);
      const StepCounts cuda = Steps(**model, in, Device::kCuda);
      EXPECT_EQ(cuda.fused, 1);
      EXPECT_EQ(cuda.softmax, 0);
      const StepCounts cpu = Steps(**model, in, Device::kCpu);
      EXPECT_EQ(cpu.fused, 0);
      EXPECT_EQ(cpu.softmax, 1);
      const std::vector<Tensor> fused = RunModel(*model, in, cuda::NewEmulatedDevice());
      std::vector<Tensor> unfused, in32;
      {
        ScopedAttentionFusion off(false);
        unfused = RunModel(*model, in, cuda::NewEmulatedDevice());
      }
      for (const Tensor& x : in) in32.push_back(Tensor::CastOf(x.view(), DType::kF32).value());
      const std::vector<Tensor> want = RunModel(*model32, in32);
      ASSERT_EQ(fused.size(), 1u);
      ASSERT_EQ(unfused.size(), 1u);
      ASSERT_EQ(want.size(), 1u);
      EXPECT_EQ(fused[0].dtype(), dtype);
      const Tensor got = Tensor::CastOf(fused[0].view(), DType::kF32).value();
      const Tensor chain = Tensor::CastOf(unfused[0].view(), DType::kF32).value();
      // One rounding of the output (fused) against the chain's roundings at
      // every step (the scores reach |s| ~ 3, their rounding moves p by ~s ulp).
      const double tol = dtype == DType::kF16 ? 4e-3 : 3e-2;
      EXPECT_EQ(CompareAttention(want[0], got, dtype == DType::kF16 ? 1e-3 : 8e-3), "");
      EXPECT_EQ(CompareAttention(chain, got, tol), "");
    }
  }
}

// The benchmarks' causal attention (demo::BuildAttention with a Where
// keeping key j <= i + sk - sq, filling -inf) fuses on both backends, its
// mask absorbed, and the f16 one on the emulated device agrees with the f32
// one on the CPU within the output's rounding.
TEST(AttentionFusionTest, TheDemoCausalAttentionFuses) {
  const int64_t sq = 70, sk = 90;
  std::shared_ptr<const Model> m32 = LoadOrDie(demo::BuildAttention(sq, sk, 2, 64, DType::kF32, true));
  std::shared_ptr<const Model> m16 = LoadOrDie(demo::BuildAttention(sq, sk, 2, 64, DType::kF16, true));
  ASSERT_NE(m32, nullptr);
  ASSERT_NE(m16, nullptr);
  const std::vector<Tensor> in32 = {AttnData({1, 2, sq, 64}, 1), AttnData({1, 2, sk, 64}, 2), AttnData({1, 2, sk, 64}, 3)};
  std::vector<Tensor> in16, rounded;
  for (const Tensor& x : in32) {
    in16.push_back(Tensor::CastOf(x.view(), DType::kF16).value());
    rounded.push_back(Tensor::CastOf(in16.back().view(), DType::kF32).value());
  }
  for (Device device : {Device::kCpu, Device::kCuda}) {
    const StepCounts c = Steps(*m32, in32, device);
    EXPECT_EQ(c.fused, 1);
    EXPECT_EQ(c.total, 1) << "the mask's Where is absorbed";
  }
  EXPECT_EQ(Steps(*m16, in16, Device::kCuda).fused, 1);
  const std::vector<Tensor> want = RunModel(m32, rounded);
  const std::vector<Tensor> got = RunModel(m16, in16, cuda::NewEmulatedDevice());
  ASSERT_EQ(want.size(), 1u);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(CompareAttention(want[0], Tensor::CastOf(got[0].view(), DType::kF32).value(), 2e-3), "");
  EXPECT_FALSE(demo::BuildAttention(0, 90, 2, 64, DType::kF32, true).ok());  // a causal mask needs fixed lengths
}

TEST(AttentionFusionTest, NotWhenAnIntermediateIsUsedElsewhereOrShapesDoNotFit) {
  const std::pair<std::string, AttentionChainSpec> cases[] = {
      {"scores are an output", AttentionChainSpec{.mask = 1, .leak_scores = true}},
      {"probabilities are an output", AttentionChainSpec{.leak_probs = true}},
      {"softmax over another axis", AttentionChainSpec{.softmax_axis = 2}},
      {"V broadcast from rank 2", AttentionChainSpec{.v_rank2 = true}},
      {"probabilities are an output past a Dropout", AttentionChainSpec{.leak_probs = true, .pass_throughs = true}},
  };
  for (const auto& [name, spec] : cases) {
    SCOPED_TRACE(name);
    absl::StatusOr<std::shared_ptr<const Model>> model = BuildAttentionChain(spec);
    ASSERT_TRUE(model.ok()) << model.status();
    const std::vector<Tensor> in = AttentionChainInputs(spec, 6);
    for (Device device : {Device::kCpu, Device::kCuda}) {
      const StepCounts c = Steps(**model, in, device);
      EXPECT_EQ(c.fused, 0);
      EXPECT_EQ(c.softmax, 1);
    }
    ExpectSameOutputs(spec, {6});
  }
}

// The CPU kernel splits the row blocks of all 6 heads over the session's
// intra-op threads in one Run, a head's blocks shared by two tasks where a
// range ends inside it (300 rows a head; 100 rows with a causal Where, whose
// AVX2 blocks skip masked keys): the same bytes at 1, 2 and 3 threads.
class SameBytesTest : public ::testing::TestWithParam<std::pair<int, int64_t>> {};

TEST_P(SameBytesTest, AtOneTwoAndThreeThreads) {
  const AttentionChainSpec spec{.mask = GetParam().first};
  absl::StatusOr<std::shared_ptr<const Model>> model = BuildAttentionChain(spec);
  ASSERT_TRUE(model.ok()) << model.status();
  const std::vector<Tensor> in = AttentionChainInputs(spec, GetParam().second);
  std::vector<TensorView> views;
  for (const Tensor& t : in) views.push_back(t.view());
  std::vector<float> first;
  for (int threads : {1, 2, 3}) {
    SCOPED_TRACE(absl::StrCat(threads, " threads"));
    SessionOptions options;
    options.intra_op_threads = threads;
    absl::StatusOr<std::unique_ptr<Session>> session = Session::Create(*model, options);
    ASSERT_TRUE(session.ok()) << session.status();
    absl::StatusOr<std::vector<TensorView>> out = (*session)->Run(views);
    ASSERT_TRUE(out.ok()) << out.status();
    const float* y = (*out)[0].as<const float>();
    std::vector<float> got(y, y + (*out)[0].num_elements());
    if (threads == 1) {
      first = got;
    } else {
      EXPECT_EQ(std::memcmp(got.data(), first.data(), got.size() * sizeof(float)), 0);
    }
  }
  EXPECT_EQ(Steps(**model, in, Device::kCpu).fused, 1);
}

INSTANTIATE_TEST_SUITE_P(AttentionFusionTest, SameBytesTest,
                         ::testing::Values(std::make_pair(3, int64_t{300}), std::make_pair(2, int64_t{100})));

TEST(AttentionFusionTest, TheSwitchTurnsItOff) {
  const AttentionChainSpec spec{.mask = 2};
  absl::StatusOr<std::shared_ptr<const Model>> model = BuildAttentionChain(spec);
  ASSERT_TRUE(model.ok()) << model.status();
  const std::vector<Tensor> in = AttentionChainInputs(spec, 4);
  ScopedAttentionFusion off(false);
  EXPECT_FALSE(runtime::AttentionFusionEnabled());
  EXPECT_EQ(Steps(**model, in, Device::kCpu).fused, 0);
  runtime::SetAttentionFusionEnabled(true);
  EXPECT_EQ(Steps(**model, in, Device::kCpu).fused, 1);
}

}  // namespace
}  // namespace grove::testing
