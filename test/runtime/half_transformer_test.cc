// f16 and bf16 transformer blocks end to end through Model and Session: a
// GPT block (pre-norm LayerNormalization, causal Where mask from Trilu, Erf
// GELU) and an encoder block (padding mask added to the scores, post-norm
// written with ReduceMean, Sub, Pow, Sqrt, Div as older exports write it,
// ReLU), run on the CPU and the emulated CUDA device. The reference is the
// same model in f32 with the same weights and inputs (rounded to the dtype),
// run on the CPU; the tolerance is the dtype's rounding over a block's steps.
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "lib/backends/cuda/emulated_device.h"
#include "test/attention_test_util.h"
#include "test/runtime/attention_fusion_test_util.h"

namespace grove::testing {
namespace {

constexpr int64_t kDim = 32, kHeads = 4, kHeadDim = 8, kHidden = 64;

// Deterministic values in [-scale, scale), rounded to `dtype` and kept as
// f32, so the f32 model sees exactly the narrow model's numbers.
Tensor Values32(const std::vector<int64_t>& shape, uint32_t seed, float scale, DType dtype) {
  Tensor t = AttnData(shape, seed);
  for (int64_t i = 0; i < t.view().num_elements(); ++i) t.as<float>()[i] *= scale;
  return Tensor::CastOf(Tensor::CastOf(t.view(), dtype).value().view(), DType::kF32).value();
}

class BlockBuilder {
 public:
  BlockBuilder(DType dtype, DType round_to) : dtype_(dtype), round_to_(round_to) {}

  // A float weight of the model's dtype.
  std::string Weight(const std::string& name, const std::vector<int64_t>& shape, float scale) {
    const Tensor w = Tensor::CastOf(Values32(shape, ++seed_, scale, round_to_).view(), dtype_).value();
    b_.AddWeight(name, dtype_, shape,
                 absl::Span<const uint8_t>(static_cast<const uint8_t*>(w.data()), w.view().byte_size()));
    return name;
  }
  std::string Scalar(const std::string& name, float v) {
    const Tensor w = Tensor::CastOf(TensorView{DType::kF32, {}, &v}, dtype_).value();
    b_.AddWeight(name, dtype_, {}, absl::Span<const uint8_t>(static_cast<const uint8_t*>(w.data()), DTypeSize(dtype_)));
    return name;
  }
  std::string Ints(const std::string& name, std::vector<int64_t> v) {
    b_.AddWeight(name, DType::kI64, {static_cast<int64_t>(v.size())}, v);
    return name;
  }
  std::string Op(const std::string& type, std::vector<std::string> in, std::vector<std::pair<std::string, AttrValue>> attrs = {}) {
    const std::string out = absl::StrCat(type, "_", ++ops_);
    b_.AddOp(type, std::move(in), {out}, std::move(attrs));
    return out;
  }
  // x [2, s, in] times W [in, out] plus b.
  std::string Linear(const std::string& x, int64_t in, int64_t out) {
    const std::string w = Weight(absl::StrCat("w", seed_ + 1), {in, out}, 1.0f / std::sqrt(static_cast<float>(in)));
    const std::string bias = Weight(absl::StrCat("b", seed_ + 1), {out}, 0.1f);
    return Op("Add", {Op("MatMul", {x, w}), bias});
  }
  // [2, s, D] -> [2, H, s, hd] (perm {0, 2, 1, 3}) or Kᵀ [2, H, hd, s].
  std::string Heads(const std::string& x, bool transposed) {
    const std::string r = Op("Reshape", {x, Ints(absl::StrCat("heads", ops_), {0, 0, kHeads, kHeadDim})});
    return Op("Transpose", {r}, {{"perm", std::vector<int64_t>{0, 2, transposed ? 3 : 1, transposed ? 1 : 3}}});
  }
  // LayerNormalization as opset 17 has it, or as ReduceMean & co. write it.
  std::string Norm(const std::string& x, bool reduce_mean) {
    const std::string g = Weight(absl::StrCat("g", seed_ + 1), {kDim}, 0.2f);
    const std::string g1 = Op("Add", {g, Scalar(absl::StrCat("one", ops_), 1.0f)});
    const std::string beta = Weight(absl::StrCat("beta", seed_ + 1), {kDim}, 0.1f);
    if (!reduce_mean) return Op("LayerNormalization", {x, g1, beta}, {{"axis", int64_t{-1}}});
    const std::vector<int64_t> last = {-1};
    const std::string d = Op("Sub", {x, Op("ReduceMean", {x}, {{"axes", last}})});
    const std::string var = Op("ReduceMean", {Op("Pow", {d, Scalar(absl::StrCat("two", ops_), 2.0f)})}, {{"axes", last}});
    const std::string sd = Op("Sqrt", {Op("Add", {var, Scalar(absl::StrCat("eps", ops_), 1e-5f)})});
    return Op("Add", {Op("Mul", {Op("Div", {d, sd}), g1}), beta});
  }

  // The GPT block (causal) or the encoder block (padding mask input "m").
  absl::StatusOr<std::shared_ptr<const Model>> Build(bool gpt) {
    b_.AddSymbol("s", 1, 64);
    b_.AddInput("x", dtype_, {2, "s", kDim});
    if (!gpt) b_.AddInput("m", dtype_, {2, 1, 1, "s"});
    const std::string h = gpt ? Norm("x", false) : std::string("x");
    const std::string q = Heads(Linear(h, kDim, kDim), false);
    const std::string kt = Heads(Linear(h, kDim, kDim), true);
    const std::string v = Heads(Linear(h, kDim, kDim), false);
    std::string scores = Op("Div", {Op("MatMul", {q, kt}), Scalar("sqrt_hd", std::sqrt(static_cast<float>(kHeadDim)))});
    if (gpt) {
      const std::string rows = Op("Slice", {Op("Shape", {scores}), Ints("i2", {2}), Ints("i3", {3})});
      const std::string ones = Op("Expand", {Scalar("one", 1.0f), Op("Concat", {rows, rows}, {{"axis", int64_t{0}}})});
      const std::string above = Op("Equal", {Op("Trilu", {ones}, {{"upper", int64_t{0}}}), Scalar("zero", 0.0f)});
      scores = Op("Where", {above, Scalar("ninf", -std::numeric_limits<float>::infinity()), scores});
    } else {
      scores = Op("Add", {scores, "m"});
    }
    const std::string att = Op("MatMul", {Op("Softmax", {scores}, {{"axis", int64_t{-1}}}), v});
    const std::string merged =
        Op("Reshape", {Op("Transpose", {att}, {{"perm", std::vector<int64_t>{0, 2, 1, 3}}}), Ints("merge", {0, 0, kDim})});
    std::string x1 = Op("Add", {"x", Linear(merged, kDim, kDim)});
    if (!gpt) x1 = Norm(x1, true);
    std::string up = Linear(gpt ? Norm(x1, false) : x1, kDim, kHidden);
    if (gpt) {  // 0.5 x (1 + erf(x / sqrt 2))
      const std::string e = Op("Erf", {Op("Div", {up, Scalar("sqrt2", std::sqrt(2.0f))})});
      up = Op("Mul", {Op("Mul", {up, Scalar("half", 0.5f)}), Op("Add", {e, Scalar("one_g", 1.0f)})});
    } else {
      up = Op("Relu", {up});
    }
    std::string y = Op("Add", {x1, Linear(up, kHidden, kDim)});
    if (!gpt) y = Norm(y, true);
    b_.AddOp("Identity", {y}, {"y"});
    b_.AddOutput("y");
    absl::StatusOr<std::vector<uint8_t>> bytes = b_.Finish();
    if (!bytes.ok()) return bytes.status();
    return Model::LoadFromBuffer(*bytes);
  }

 private:
  ModelBuilder b_;
  DType dtype_, round_to_;
  uint32_t seed_ = 100;
  int ops_ = 0;
};

std::vector<Tensor> Inputs(bool gpt, int64_t s, DType dtype) {
  std::vector<Tensor> in = {Values32({2, s, kDim}, 7, 1.5f, dtype)};
  if (!gpt) {  // the second sequence's last 3 keys are padding
    Tensor m = Tensor::Create(DType::kF32, {2, 1, 1, s}).value();
    for (int64_t j = 0; j < 2 * s; ++j) m.as<float>()[j] = j >= s && j >= 2 * s - 3 ? -1e4f : 0.0f;
    in.push_back(std::move(m));
  }
  return in;
}

class HalfTransformerTest : public ::testing::TestWithParam<bool> {};

TEST_P(HalfTransformerTest, MatchesTheF32ModelOnCpuAndEmulatedCuda) {
  const bool gpt = GetParam();
  for (DType dtype : {DType::kF16, DType::kBF16}) {
    SCOPED_TRACE(DTypeName(dtype));
    absl::StatusOr<std::shared_ptr<const Model>> narrow = BlockBuilder(dtype, dtype).Build(gpt);
    ASSERT_TRUE(narrow.ok()) << narrow.status();
    absl::StatusOr<std::shared_ptr<const Model>> wide = BlockBuilder(DType::kF32, dtype).Build(gpt);
    ASSERT_TRUE(wide.ok()) << wide.status();
    // bf16 keeps 8 bits: its roundings over the block's ~20 steps reach a few 1e-2.
    const double tol = dtype == DType::kF16 ? 1e-2 : 8e-2;
    for (int64_t s : {1, 7, 19}) {
      SCOPED_TRACE(absl::StrCat("seq ", s));
      const std::vector<Tensor> in32 = Inputs(gpt, s, dtype);
      std::vector<Tensor> in;
      for (const Tensor& t : in32) in.push_back(Tensor::CastOf(t.view(), dtype).value());
      const std::vector<Tensor> want = RunModel(*wide, in32);
      const std::vector<Tensor> cpu = RunModel(*narrow, in);
      const std::vector<Tensor> emulated = RunModel(*narrow, in, cuda::NewEmulatedDevice());
      ASSERT_EQ(want.size(), 1u);
      ASSERT_EQ(cpu.size(), 1u);
      ASSERT_EQ(emulated.size(), 1u);
      EXPECT_EQ(cpu[0].dtype(), dtype);
      EXPECT_EQ(emulated[0].dtype(), dtype);
      EXPECT_EQ(CompareAttention(want[0], cpu[0], tol), "") << "cpu";
      EXPECT_EQ(CompareAttention(want[0], emulated[0], tol), "") << "emulated cuda";
    }
    // The attention chain fuses on CUDA only (the CPU's fused kernel is f32).
    const std::vector<Tensor> in = Inputs(gpt, 7, DType::kF32);
    std::vector<Tensor> narrow_in;
    for (const Tensor& t : in) narrow_in.push_back(Tensor::CastOf(t.view(), dtype).value());
    EXPECT_EQ(Steps(**narrow, narrow_in, Device::kCuda).fused, 1);
    EXPECT_EQ(Steps(**narrow, narrow_in, Device::kCpu).fused, 0);
  }
}

INSTANTIATE_TEST_SUITE_P(Blocks, HalfTransformerTest, ::testing::Values(true, false),
                         [](const auto& info) { return info.param ? "gpt" : "encoder"; });

TEST(HalfTypesTest, RangeStillRefusesF16) {
  // ONNX's Range takes f32, f64, i16, i32, i64: an f16 Range is refused at load.
  ModelBuilder b;
  for (const char* name : {"start", "limit", "delta"}) b.AddInput(name, DType::kF16, {});
  b.AddOp("Range", {"start", "limit", "delta"}, {"r"});
  b.AddOutput("r");
  absl::StatusOr<std::vector<uint8_t>> bytes = b.Finish();
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  absl::StatusOr<std::shared_ptr<const Model>> model = Model::LoadFromBuffer(*bytes);
  ASSERT_FALSE(model.ok());
  EXPECT_NE(model.status().message().find("has dtype f16"), std::string::npos) << model.status();
}

}  // namespace
}  // namespace grove::testing
