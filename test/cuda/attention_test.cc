// FusedAttention's CUDA kernel (jit/kernels/attention.cuh) on the test
// device (emulated without a GPU): the edge cases against the unfused chain
// on the CPU and against the CPU's fused kernel, f16/bf16 against the f32
// chain of the same rounded inputs, and an invoke that only launches.
#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "lib/backends/cuda/cuda_kernels.h"
#include "test/attention_test_util.h"
#include "test/cuda_op_test_util.h"

namespace grove::testing {
namespace {

// Sets the step's form for a scope (cuda_kernels.h), then back to kAuto.
class ScopedAttentionForm {
 public:
  explicit ScopedAttentionForm(cuda::AttentionForm form) { cuda::SetAttentionForm(form); }
  ~ScopedAttentionForm() { cuda::SetAttentionForm(cuda::AttentionForm::kAuto); }
};

const char* FormName(cuda::AttentionForm f) {
  return f == cuda::AttentionForm::kKernel ? "kernel form" : f == cuda::AttentionForm::kGemm ? "gemm form" : "auto";
}

// Every case runs in both forms: the fused kernel, and cuBLASLt's products
// around the probabilities kernel (where its products fold; the kernel
// otherwise).
constexpr cuda::AttentionForm kForms[] = {cuda::AttentionForm::kKernel, cuda::AttentionForm::kGemm};

class CudaAttentionTest : public ::testing::TestWithParam<AttentionCase> {
 protected:
  void SetUp() override { dev_ = TestDevice(); }
  std::shared_ptr<cuda::Device> dev_;
};

TEST_P(CudaAttentionTest, MatchesTheUnfusedChain) {
  const AttentionCase& c = GetParam();
  const AttentionInputs in = MakeAttentionInputs(c);
  absl::StatusOr<Tensor> want = UnfusedAttention(c, in);
  ASSERT_TRUE(want.ok()) << want.status();
  for (cuda::AttentionForm form : kForms) {
    ScopedAttentionForm scoped(form);
    for (bool host : {true, false}) {
      SCOPED_TRACE(absl::StrCat(FormName(form), host ? ", host values" : ", device values"));
      absl::StatusOr<std::vector<Tensor>> got =
          RunOpCuda(*dev_, "FusedAttention", AttentionOperands(in), AttentionAttrsOf(c), 1, {.host_values = host});
      ASSERT_TRUE(got.ok()) << got.status();
      EXPECT_EQ(CompareAttention(*want, (*got)[0], 1e-5), "");
    }
  }
}

// Halves run the kernel form on tensor cores (attention_mma, the emulated
// device being an sm_90) and without (the CUDA-core tiled kernel).
struct HalfRun {
  DType dtype;
  cuda::AttentionForm form;
  bool tensor_cores;
};

TEST_P(CudaAttentionTest, HalvesMatchTheF32ChainOfTheirValues) {
  const AttentionCase& c = GetParam();
  for (const HalfRun& run : {HalfRun{DType::kF16, kForms[0], true}, HalfRun{DType::kF16, kForms[0], false},
                             HalfRun{DType::kF16, kForms[1], true}, HalfRun{DType::kBF16, kForms[0], true},
                             HalfRun{DType::kBF16, kForms[0], false}, HalfRun{DType::kBF16, kForms[1], true}}) {
    const DType t = run.dtype;
    ScopedAttentionForm scoped(run.form);
    cuda::SetAttentionTensorCores(run.tensor_cores);
    SCOPED_TRACE(absl::StrCat(DTypeName(t), ", ", FormName(run.form), run.tensor_cores ? "" : ", no tensor cores"));
    AttentionInputs in = MakeAttentionInputs(c);
    AttentionInputs low{Tensor::CastOf(in.q.view(), t).value(), Tensor::CastOf(in.k.view(), t).value(),
                        Tensor::CastOf(in.v.view(), t).value(), std::nullopt, std::nullopt};
    // The reference sees the rounded values (and f32 additive masks of them).
    AttentionInputs rounded{Tensor::CastOf(low.q.view(), DType::kF32).value(),
                            Tensor::CastOf(low.k.view(), DType::kF32).value(),
                            Tensor::CastOf(low.v.view(), DType::kF32).value(), std::nullopt, std::nullopt};
    auto lower = [&](const std::optional<Tensor>& m, bool added, std::optional<Tensor>* l, std::optional<Tensor>* r) {
      if (!m.has_value()) return;
      *l = Tensor::CastOf(m->view(), added ? t : DType::kBool).value();
      *r = Tensor::CastOf((*l)->view(), added ? DType::kF32 : DType::kBool).value();
    };
    lower(in.mask, c.mask == 1, &low.mask, &rounded.mask);
    lower(in.mask2, c.mask2 == 1, &low.mask2, &rounded.mask2);
    absl::StatusOr<Tensor> want = UnfusedAttention(c, rounded);
    ASSERT_TRUE(want.ok()) << want.status();
    absl::StatusOr<std::vector<Tensor>> got =
        RunOpCuda(*dev_, "FusedAttention", AttentionOperands(low), AttentionAttrsOf(c));
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ((*got)[0].dtype(), t);
    // One rounding of the output to 8 (bf16) or 11 (f16) bits.
    EXPECT_EQ(CompareAttention(*want, (*got)[0], t == DType::kBF16 ? 1e-2 : 2e-3), "");
    cuda::SetAttentionTensorCores(true);
  }
}

INSTANTIATE_TEST_SUITE_P(EdgeShapes, CudaAttentionTest, ::testing::ValuesIn(AttentionEdgeCases()),
                         [](const ::testing::TestParamInfo<AttentionCase>& info) { return info.param.name; });

// Shapes of the tiled kernel (16 query rows or more, heads of at most 128):
// partial query and key tiles, both head sizes, Kᵀ given, both masks, GQA,
// fully masked rows; and of the warp-per-row kernel: a decode step against
// many keys, a head over 128.
std::vector<AttentionCase> TiledCases() {
  const double ninf = -std::numeric_limits<double>::infinity();
  std::vector<AttentionCase> cs;
  cs.push_back({.name = "tiled_partial_tiles_causal", .q = {2, 3, 70, 64}, .k = {2, 3, 77, 64}, .v = {2, 3, 77, 64},
                .scale_op = 2, .scale = 8.0, .mask = 2, .mask_shape = {70, 77}, .mask_fill = ninf, .causal = true});
  cs.push_back({.name = "tiled_hd128_kt_added", .q = {1, 2, 33, 100}, .k = {1, 2, 100, 45}, .v = {1, 2, 45, 128},
                .k_transposed = true, .scale_op = 1, .scale = 0.1, .mask = 1, .mask_shape = {33, 45}});
  // PyTorch's scaled_dot_product_attention as the dynamo exporter writes it:
  // Q and K each multiplied by sqrt(scale) (contiguous rows: the tensor-core
  // kernel stages them 8 values an access, scaling each), a causal mask.
  cs.push_back({.name = "tiled_split_scale_causal", .q = {1, 2, 70, 64}, .k = {1, 2, 130, 64}, .v = {1, 2, 130, 64},
                .q_scale_op = 1, .k_scale_op = 1, .q_scale = 1 / std::sqrt(8.0), .k_scale = 1 / std::sqrt(8.0),
                .mask = 2, .mask_shape = {70, 130}, .mask_fill = ninf, .causal = true});
  // Causal masks over many keys: a tile of query rows stops at the last key
  // its rows keep (the tensor-core kernel's trim skips 3 of the first tile's
  // 4 key tiles here); with a finite fill a row that keeps no key needs
  // every key (the fills share it evenly), so its tile reads them all; a
  // padding mask (one row for every query row) and one broadcast along the
  // keys.
  cs.push_back({.name = "tiled_causal_trimmed", .q = {1, 2, 200, 64}, .k = {1, 2, 200, 64}, .v = {1, 2, 200, 64},
                .scale_op = 2, .scale = 8.0, .mask = 2, .mask_shape = {200, 200}, .mask_fill = ninf, .causal = true});
  cs.push_back({.name = "tiled_causal_finite_fill_masked_row", .q = {1, 2, 150, 64}, .k = {1, 2, 150, 64},
                .v = {1, 2, 150, 64}, .mask = 2, .mask_shape = {150, 150}, .mask_fill = -3.4028234663852886e38,
                .causal = true, .mask_all_of_row0 = true});
  cs.push_back({.name = "tiled_padding_mask", .q = {2, 2, 80, 64}, .k = {2, 2, 140, 64}, .v = {2, 2, 140, 64},
                .mask = 2, .mask_shape = {2, 1, 1, 140}, .mask_fill = ninf});
  cs.push_back({.name = "tiled_key_broadcast_mask", .q = {2, 2, 80, 64}, .k = {2, 2, 140, 64}, .v = {2, 2, 140, 64},
                .mask = 2, .mask_shape = {2, 1, 80, 1}, .mask_fill = ninf});
  cs.push_back({.name = "tiled_gqa_where_then_add", .q = {1, 4, 20, 32}, .k = {1, 2, 130, 32}, .v = {1, 2, 130, 48},
                .scale_op = 2, .scale = std::sqrt(32.0), .mask = 2, .mask_shape = {1, 1, 20, 130},
                .fill_if_true = false, .mask_fill = -3.4028234663852886e38, .causal = true, .mask2 = 1,
                .mask2_shape = {1, 1, 1, 130}, .kv_group = 2});
  cs.push_back({.name = "tiled_masked_rows_nan", .q = {1, 2, 17, 8}, .k = {1, 2, 70, 8}, .v = {1, 2, 70, 8},
                .mask = 2, .mask_shape = {17, 70}, .mask_fill = ninf, .mask_all_of_row0 = true});
  // A decode step's rows against many keys: the warp-per-row kernel's warps
  // split the key tiles and are combined (a masked tail in one of them).
  cs.push_back({.name = "decode_long_keys_causal", .q = {1, 2, 3, 16}, .k = {1, 2, 150, 16}, .v = {1, 2, 150, 20},
                .scale_op = 2, .scale = 4.0, .mask = 2, .mask_shape = {3, 150}, .mask_fill = ninf, .causal = true});
  cs.push_back({.name = "head_over_128_per_row", .q = {1, 1, 20, 130}, .k = {1, 1, 20, 130}, .v = {1, 1, 20, 8},
                .scale_op = 1, .scale = 0.05});
  // Decode rows against 512 keys or more: the block-per-row kernel splits
  // each row's keys among blocks and merges their parts (a row whose keys
  // are all masked, in every split; grouped-query heads; a second mask).
  cs.push_back({.name = "decode_split_keys", .q = {1, 2, 1, 16}, .k = {1, 2, 600, 16}, .v = {1, 2, 600, 20},
                .scale_op = 2, .scale = 4.0, .mask = 2, .mask_shape = {1, 600}, .mask_fill = ninf, .causal = true});
  cs.push_back({.name = "decode_split_masked_row", .q = {1, 2, 2, 8}, .k = {1, 2, 530, 8}, .v = {1, 2, 530, 8},
                .mask = 2, .mask_shape = {2, 530}, .mask_fill = ninf, .mask_all_of_row0 = true});
  cs.push_back({.name = "decode_split_gqa", .q = {1, 4, 1, 32}, .k = {1, 2, 777, 32}, .v = {1, 2, 777, 48},
                .scale_op = 2, .scale = std::sqrt(32.0), .mask = 1, .mask_shape = {1, 1, 1, 777}, .kv_group = 2});
  return cs;
}

INSTANTIATE_TEST_SUITE_P(TiledShapes, CudaAttentionTest, ::testing::ValuesIn(TiledCases()),
                         [](const ::testing::TestParamInfo<AttentionCase>& info) { return info.param.name; });

// The tiled kernels (on tensor cores and not) stop a tile of query rows at
// the last key its rows keep (trimmed_keys, a causal mask's tile skipping
// the key tiles past its diagonal): an inf in V at key 150 leaves the rows of
// the tiles that end before it (rows 0..127, for tiles of 16, 32 or 64 rows
// and 32 or 64 keys) finite, where reading every key gives NaN (its
// probability 0 times inf), as it does for rows 128..149, whose tile reads
// key 150's key tile, and rows 150.. keep it.
TEST(CudaAttentionKernelTest, TiledKernelsStopAtTheLastKeptKey) {
  std::shared_ptr<cuda::Device> dev = TestDevice();
  std::vector<AttentionCase> cases = TiledCases();
  const AttentionCase& c =
      *std::find_if(cases.begin(), cases.end(), [](const AttentionCase& x) { return x.name == "tiled_causal_trimmed"; });
  AttentionInputs in = MakeAttentionInputs(c);
  const int64_t heads = c.v[1], sk = c.v[2], dv = c.v[3], sq = c.q[2];
  for (int64_t h = 0; h < heads; ++h) {
    for (int64_t col = 0; col < dv; ++col) in.v.as<float>()[(h * sk + 150) * dv + col] = INFINITY;
  }
  ScopedAttentionForm scoped(cuda::AttentionForm::kKernel);
  for (const auto& [dtype, tensor_cores] : {std::pair{DType::kF16, true}, {DType::kF16, false}, {DType::kF32, false}}) {
    SCOPED_TRACE(absl::StrCat(DTypeName(dtype), tensor_cores ? ", tensor cores" : ""));
    cuda::SetAttentionTensorCores(tensor_cores);
    AttentionInputs low{Tensor::CastOf(in.q.view(), dtype).value(), Tensor::CastOf(in.k.view(), dtype).value(),
                        Tensor::CastOf(in.v.view(), dtype).value(), Tensor::CastOf(in.mask->view(), DType::kBool).value(),
                        std::nullopt};
    absl::StatusOr<std::vector<Tensor>> got =
        RunOpCuda(*dev, "FusedAttention", AttentionOperands(low), AttentionAttrsOf(c));
    ASSERT_TRUE(got.ok()) << got.status();
    const Tensor out = Tensor::CastOf((*got)[0].view(), DType::kF32).value();
    for (int64_t h = 0; h < heads; ++h) {
      for (int64_t i = 0; i < sq; ++i) {
        bool finite = true;
        for (int64_t col = 0; col < dv; ++col) finite = finite && std::isfinite(out.as<float>()[(h * sq + i) * dv + col]);
        EXPECT_EQ(finite, i < 128) << "head " << h << " row " << i;
      }
    }
  }
  cuda::SetAttentionTensorCores(true);
}

TEST(CudaAttentionKernelTest, SameAsTheCpuKernelAndRefusesTheSame) {
  std::shared_ptr<cuda::Device> dev = TestDevice();
  const AttentionCase c = AttentionEdgeCases()[3];  // additive mask
  const AttentionInputs in = MakeAttentionInputs(c);
  ExpectCudaMatchesCpu(*dev, "FusedAttention", AttentionOperands(in), AttentionAttrsOf(c), 1, 1e-5);
  const Tensor k_bad = AttnData({2, 2, 11, 7}, 2);
  ExpectCudaMatchesCpu(*dev, "FusedAttention", {&in.q, &k_bad, &in.v, &*in.mask}, AttentionAttrsOf(c), 1, 1e-5);
}

// Either form's invoke allocates, synchronises and copies nothing: the
// kernel form is one launch without workspace; the GEMM form two cuBLASLt
// products around one launch, its f32 scores in the step's workspace (the
// probabilities written over them).
TEST(CudaAttentionKernelTest, InvokeOnlyLaunches) {
  std::shared_ptr<cuda::Device> dev = TestDevice();
  struct Want {
    AttentionCase c;
    cuda::AttentionForm form;
    uint64_t workspace;
    int64_t gemms, launches;
  };
  const std::vector<AttentionCase> tiled = TiledCases();
  auto named = [&](const std::string& name) {
    return *std::find_if(tiled.begin(), tiled.end(), [&](const AttentionCase& c) { return c.name == name; });
  };
  const std::vector<Want> wants = {
      {AttentionEdgeCases()[0], cuda::AttentionForm::kKernel, 0, 0, 1},
      {AttentionEdgeCases()[6], cuda::AttentionForm::kKernel, 0, 0, 1},
      {tiled[0], cuda::AttentionForm::kGemm, uint64_t{2} * 3 * 70 * 77 * 4, 2, 1},  // scores [2, 3, 70, 77]
      // 2 rows of 600 keys in 2 splits: [2 rows][2 splits][max, sum, 20 columns].
      {named("decode_split_keys"), cuda::AttentionForm::kKernel, uint64_t{2} * 2 * 22 * 4, 0, 2},
  };
  for (const Want& w : wants) {
    SCOPED_TRACE(absl::StrCat(w.c.name, ", ", FormName(w.form)));
    ScopedAttentionForm scoped(w.form);
    const AttentionInputs in = MakeAttentionInputs(w.c);
    absl::StatusOr<InvokeCounts> counts = CountCudaInvoke(*dev, "FusedAttention", AttentionOperands(in),
                                                          AttentionAttrsOf(w.c), 1, {.host_values = false});
    ASSERT_TRUE(counts.ok()) << counts.status();
    EXPECT_TRUE(counts->prepared);
    EXPECT_FALSE(counts->needs_host);
    EXPECT_EQ(counts->workspace_bytes, w.workspace);
    EXPECT_EQ(counts->counts.allocations, 0);
    EXPECT_EQ(counts->counts.synchronizations, 0);
    EXPECT_EQ(counts->counts.device_to_host_copies, 0);
    EXPECT_EQ(counts->counts.host_to_device_copies, 0);
    EXPECT_EQ(counts->counts.launches, w.launches);
    EXPECT_EQ(counts->counts.gemms, w.gemms);
  }
}

// Forced, the GEMM form runs every case but those it cannot: nothing to
// multiply (no keys, queries or head dims: cuBLASLt wants k >= 1) and batch
// dims that broadcast under another batch dim (one stride per product).
TEST(CudaAttentionKernelTest, GemmFormTakesEveryCaseWhoseProductsFold) {
  std::shared_ptr<cuda::Device> dev = TestDevice();
  ScopedAttentionForm scoped(cuda::AttentionForm::kGemm);
  const std::set<std::string> kernel_only = {"no_keys", "no_queries", "head_dim_zero", "kv_batch_broadcast",
                                             "gqa_batch_broadcast"};
  std::vector<AttentionCase> cases = AttentionEdgeCases();
  for (const AttentionCase& c : TiledCases()) cases.push_back(c);
  int gemm_form = 0;
  for (const AttentionCase& c : cases) {
    SCOPED_TRACE(c.name);
    const AttentionInputs in = MakeAttentionInputs(c);
    absl::StatusOr<InvokeCounts> counts = CountCudaInvoke(*dev, "FusedAttention", AttentionOperands(in),
                                                          AttentionAttrsOf(c), 1, {.host_values = false});
    ASSERT_TRUE(counts.ok()) << counts.status();
    EXPECT_EQ(counts->counts.gemms, kernel_only.count(c.name) != 0 ? 0 : 2);
    gemm_form += counts->counts.gemms > 0 ? 1 : 0;
  }
  EXPECT_EQ(gemm_form, static_cast<int>(cases.size() - kernel_only.size()));
}

// kAuto: the GEMM form from 16 query rows or 256 keys (where cuBLASLt and a
// Softmax beat the fused kernel on an H200), the kernel for a decode step
// against few keys and where the products do not fold into one batched
// GEMM each (K shared by the heads of different batches).
TEST(CudaAttentionKernelTest, AutoPicksTheGemmFormWhereItPays) {
  std::shared_ptr<cuda::Device> dev = TestDevice();
  ScopedAttentionForm scoped(cuda::AttentionForm::kAuto);
  struct Want {
    AttentionCase c;
    int64_t gemms;
  };
  const std::vector<Want> wants = {
      {{.name = "prefill", .q = {1, 2, 16, 8}, .k = {1, 2, 16, 8}, .v = {1, 2, 16, 8}}, 2},
      {{.name = "decode_few_keys", .q = {1, 2, 1, 8}, .k = {1, 2, 100, 8}, .v = {1, 2, 100, 8}}, 0},
      {{.name = "decode_many_keys", .q = {1, 2, 1, 8}, .k = {1, 2, 256, 8}, .v = {1, 2, 256, 8}}, 2},
      {{.name = "k_shared_by_batches", .q = {2, 2, 16, 8}, .k = {1, 2, 16, 8}, .v = {2, 2, 16, 8}}, 0},
  };
  for (const Want& w : wants) {
    SCOPED_TRACE(w.c.name);
    const AttentionInputs in = MakeAttentionInputs(w.c);
    absl::StatusOr<InvokeCounts> counts = CountCudaInvoke(*dev, "FusedAttention", AttentionOperands(in),
                                                          AttentionAttrsOf(w.c), 1, {.host_values = false});
    ASSERT_TRUE(counts.ok()) << counts.status();
    EXPECT_EQ(counts->counts.gemms, w.gemms);
    EXPECT_EQ(counts->counts.launches, 1);
    EXPECT_EQ(counts->workspace_bytes > 0, w.gemms > 0);
    absl::StatusOr<Tensor> want = UnfusedAttention(w.c, in);
    ASSERT_TRUE(want.ok()) << want.status();
    absl::StatusOr<std::vector<Tensor>> got =
        RunOpCuda(*dev, "FusedAttention", AttentionOperands(in), AttentionAttrsOf(w.c), 1, {.host_values = false});
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(CompareAttention(*want, (*got)[0], 1e-5), "");
  }
}

}  // namespace
}  // namespace grove::testing
