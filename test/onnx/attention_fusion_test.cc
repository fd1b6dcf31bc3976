// The exported transformers (test/models/gpt_block: causal mask through
// Where; test/models/transformer_encoder: Q and Kᵀ each scaled, rank 4 heads)
// and the attention fixtures (test/onnx/attention_models: SDPA with a bool
// key padding mask and its Where(IsNaN(p), 0, p), a row with no key kept;
// grouped-query heads repeated by Expand, read in place; a KV-cache step with a causal mask)
// get their attention fused by the plan pass on the CPU and CUDA plans, and
// give the same outputs fused and unfused, on the CPU and the emulated CUDA
// device.
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "gtest/gtest.h"
#include "lib/backends/backends.h"
#include "lib/backends/cuda/emulated_device.h"
#include "lib/runtime/attention_fusion.h"
#include "test/onnx/exported_models.h"
#include "test/runtime/attention_fusion_test_util.h"

namespace grove::testing {
namespace {

struct AttentionModel {
  std::string name;
  int attention_layers;
  // Under test/onnx/attention_models (scripts/export_attention_fixtures.py,
  // onnxruntime's outputs) rather than test/models (PyTorch's).
  bool fixture = false;
  // K and V repeated along their heads (grouped-query attention): the fused
  // step reads them in place, its name listing the Expand steps it absorbed.
  bool grouped = false;
};

void PrintTo(const AttentionModel& m, std::ostream* os) { *os << m.name; }

// Outputs of every case, in one session (on `device`, or the CPU when null).
std::vector<std::vector<Tensor>> RunCases(const std::shared_ptr<const Model>& model, const std::vector<Case>& cases,
                                          std::shared_ptr<cuda::Device> device) {
  absl::StatusOr<std::unique_ptr<Session>> session =
      internal::CreateSessionOnDevice(model, SessionOptions{}, std::move(device));
  EXPECT_TRUE(session.ok()) << session.status();
  std::vector<std::vector<Tensor>> all;
  if (!session.ok()) return all;
  for (const Case& c : cases) {
    std::vector<TensorView> in;
    for (const Tensor& t : c.inputs) in.push_back(t.view());
    absl::StatusOr<std::vector<TensorView>> out = (*session)->Run(in);
    EXPECT_TRUE(out.ok()) << c.name << ": " << out.status();
    std::vector<Tensor> copies;
    if (out.ok()) {
      for (const TensorView& v : *out) copies.push_back(Tensor::CopyOf(v).value());
    }
    all.push_back(std::move(copies));
  }
  return all;
}

class ExportedAttentionTest : public ::testing::TestWithParam<AttentionModel> {
 protected:
  void SetUp() override {
    const fs::path dir = GetParam().fixture ? SourceDir() / "test" / "onnx" / "attention_models" / GetParam().name
                                            : SourceDir() / "test" / "models" / GetParam().name;
    absl::StatusOr<std::shared_ptr<const Model>> model = Import(dir / "model.onnx", nullptr);
    ASSERT_TRUE(model.ok()) << model.status();
    model_ = *model;
    absl::StatusOr<std::vector<Case>> cases = ReadCases(dir);
    ASSERT_TRUE(cases.ok()) << cases.status();
    cases_ = *std::move(cases);
  }

  // FusedAttention and Softmax steps of the main graph's plan for case 0
  // (*expands: the fused steps' absorbed Expand steps).
  std::pair<int, int> Count(Device device, int* expands = nullptr) const {
    ExecutionInfoOptions o;
    o.device = device;
    for (const Tensor& t : cases_[0].inputs) o.input_shapes.push_back(t.shape());
    absl::StatusOr<ExecutionInfo> info = DescribeExecution(*model_, o);
    EXPECT_TRUE(info.ok()) << info.status();
    int fused = 0, softmax = 0;
    if (info.ok()) {
      for (const StepInfo& s : info->paths[0].steps) {
        fused += s.op == "FusedAttention";
        softmax += s.op == "Softmax";
        // Exporters name them "/Expand_1" (TorchScript) or "node_expand_1" (dynamo).
        const std::string name = absl::AsciiStrToLower(s.node);
        for (size_t at = name.find("expand"); s.op == "FusedAttention" && at != std::string::npos;
             at = name.find("expand", at + 1)) {
          if (expands != nullptr) ++*expands;
        }
      }
    }
    return {fused, softmax};
  }

  void ExpectFusedEqualsUnfused(const std::vector<Case>& cases, const std::shared_ptr<cuda::Device>& fused_dev,
                                const std::shared_ptr<cuda::Device>& unfused_dev) {
    std::vector<std::vector<Tensor>> fused, unfused;
    {
      ScopedAttentionFusion on(true);
      fused = RunCases(model_, cases, fused_dev);
    }
    {
      ScopedAttentionFusion off(false);
      unfused = RunCases(model_, cases, unfused_dev);
    }
    ASSERT_EQ(fused.size(), cases.size());
    ASSERT_EQ(unfused.size(), cases.size());
    for (size_t c = 0; c < cases.size(); ++c) {
      ASSERT_EQ(fused[c].size(), unfused[c].size());
      for (size_t k = 0; k < fused[c].size(); ++k) {
        double worst = 0;
        // Fused against unfused: the same arithmetic but the products' order of sums.
        const TensorView f = fused[c][k].view(), u = unfused[c][k].view();
        ASSERT_EQ(f.shape, u.shape);
        for (int64_t i = 0; i < f.num_elements(); ++i) {
          const double a = u.as<const float>()[i], b = f.as<const float>()[i];
          worst = std::max(worst, std::abs(a - b) / (1 + std::abs(a)));
        }
        EXPECT_LE(worst, 1e-5) << cases[c].name << " output " << k;
        // And both against the reference (PyTorch's, or onnxruntime's for a fixture).
        EXPECT_EQ(Compare(f, cases[c].outputs[k].view(), &worst), "") << cases[c].name;
      }
    }
  }

  std::shared_ptr<const Model> model_;
  std::vector<Case> cases_;
};

TEST_P(ExportedAttentionTest, PlansFuseEveryAttention) {
  for (Device device : {Device::kCpu, Device::kCuda}) {
    SCOPED_TRACE(device == Device::kCpu ? "cpu" : "cuda");
    int expands = 0;
    EXPECT_EQ(Count(device, &expands), std::make_pair(GetParam().attention_layers, 0));
    EXPECT_EQ(expands, GetParam().grouped ? 2 * GetParam().attention_layers : 0);
    ScopedAttentionFusion off(false);
    EXPECT_EQ(Count(device), std::make_pair(0, GetParam().attention_layers));
  }
}

TEST_P(ExportedAttentionTest, SameOutputsFusedAndUnfusedOnTheCpu) { ExpectFusedEqualsUnfused(cases_, nullptr, nullptr); }

TEST_P(ExportedAttentionTest, SameOutputsFusedAndUnfusedOnTheEmulatedDevice) {
  // The first two cases (the smallest): the emulated device runs each thread on the host.
  std::vector<Case> small;
  for (Case& c : cases_) {
    if (small.size() < 2) small.push_back(std::move(c));
  }
  ExpectFusedEqualsUnfused(small, cuda::NewEmulatedDevice(), cuda::NewEmulatedDevice());
}

INSTANTIATE_TEST_SUITE_P(Models, ExportedAttentionTest,
                         ::testing::Values(AttentionModel{"gpt_block", 1}, AttentionModel{"transformer_encoder", 2},
                                           AttentionModel{"sdpa_key_padding", 1, true},
                                           AttentionModel{"gqa_expand", 1, true, true},
                                           AttentionModel{"kv_cache_causal", 1, true}),
                         [](const ::testing::TestParamInfo<AttentionModel>& info) { return info.param.name; });

}  // namespace
}  // namespace grove::testing
