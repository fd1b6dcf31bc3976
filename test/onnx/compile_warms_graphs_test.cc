// `grove compile` (grove::CompileKernels) warms what a CUDA session with
// graphs asks the kernel cache for: the exported models are compiled for
// their cases' shapes into a fresh cache folder, then run in one session on
// a recording device that captures graphs (default options: shape buckets,
// graph launches of each module's indirect form); every module that session
// asks for must already be in the folder (found, not compiled), and a
// second compile compiles nothing. The choices compile and inspect report
// are those of the bucketed plans: the CNN's convolutions take the tiled
// GEMM at their bucket's bound.
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "grove/grove.h"
#include "gtest/gtest.h"
#include "jit/kernel_cache.h"
#include "lib/backends/backends.h"
#include "lib/backends/cuda/recording_device.h"
#include "lib/runtime/session_internal.h"
#include "test/onnx/exported_models.h"

namespace grove {
namespace {

using testing::Case;
using testing::Import;
using testing::ModelsUnderTest;
using testing::ModelUnderTest;
using testing::ReadCases;

std::string FreshDir(const std::string& name) {
  const std::string dir = (std::filesystem::path(::testing::TempDir()) / absl::StrCat("compile_warms_", getpid(), "_", name)).string();
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  return dir;
}

std::vector<std::vector<int64_t>> ShapesOf(const Case& c) {
  std::vector<std::vector<int64_t>> shapes;
  for (const Tensor& t : c.inputs) shapes.push_back(t.shape());
  return shapes;
}

class CompileWarmsGraphsTest : public ::testing::TestWithParam<std::string> {};

TEST_P(CompileWarmsGraphsTest, GraphSessionAsksOnlyForCompiledModules) {
  if (jit::NvrtcVersion() == 0) GTEST_SKIP() << "no NVRTC here";
  ModelUnderTest m;
  for (const ModelUnderTest& u : ModelsUnderTest()) {
    if (u.name == GetParam()) m = u;
  }
  ASSERT_FALSE(m.name.empty()) << GetParam() << " is not among test/models";
  absl::StatusOr<std::shared_ptr<const Model>> model = Import(m.onnx, nullptr);
  ASSERT_TRUE(model.ok()) << model.status();
  absl::StatusOr<std::vector<Case>> cases = ReadCases(m.testdata);
  ASSERT_TRUE(cases.ok()) << cases.status();
  ASSERT_FALSE(cases->empty());

  KernelCompileOptions co;
  co.arch = "sm_90";
  co.cache_dir = FreshDir(m.name);
  std::vector<std::string> compiled_names;
  for (const Case& c : *cases) {
    co.input_shapes = ShapesOf(c);
    absl::StatusOr<KernelCompileReport> report = CompileKernels(**model, co);
    ASSERT_TRUE(report.ok()) << c.name << ": " << report.status();
    compiled_names.insert(compiled_names.end(), report->modules.begin(), report->modules.end());
  }
  // Graph launches use the indirect forms: the compile lists them.
  bool graph_form = false;
  for (const std::string& n : compiled_names) graph_form |= n.find(" (graph)") != std::string::npos;
  EXPECT_TRUE(graph_form) << "no module's graph form was compiled";

  // A session as on a GPU: default options, graphs captured.
  std::shared_ptr<cuda::RecordingDevice> device = cuda::NewRecordingDevice(90, /*captures_graphs=*/true);
  absl::StatusOr<std::unique_ptr<Session>> session = internal::CreateSessionOnDevice(*model, SessionOptions{}, device);
  ASSERT_TRUE(session.ok()) << session.status();
  for (int pass = 0; pass < 2; ++pass) {
    for (const Case& c : *cases) {
      std::vector<TensorView> views;
      for (const Tensor& t : c.inputs) views.push_back(t.view());
      absl::StatusOr<std::vector<TensorView>> run = (*session)->Run(views);
      ASSERT_TRUE(run.ok()) << c.name << ": " << run.status();
    }
  }
  EXPECT_GT((*session)->stats().graphs_captured, 0) << "the session captured no graph";

  jit::CacheOptions cache_options;
  cache_options.disk_dir = co.cache_dir;
  jit::KernelCache cache(cache_options);
  ASSERT_FALSE(device->modules().empty());
  for (const jit::ModuleSpec& module : device->modules()) {
    const std::string name = absl::StrCat(module.file, jit::Suffix(module), module.indirect ? " (graph)" : "");
    EXPECT_NE(std::find(compiled_names.begin(), compiled_names.end(), name), compiled_names.end())
        << name << " is asked for by the graph session but was not compiled";
    absl::StatusOr<std::shared_ptr<const jit::CachedModule>> got = cache.Get(module, 90);
    EXPECT_TRUE(got.ok()) << name << ": " << got.status();
  }
  EXPECT_EQ(cache.stats().compiles, 0u) << "the session's modules were not all in the compiled cache";

  // A second compile compiles nothing.
  for (const Case& c : *cases) {
    co.input_shapes = ShapesOf(c);
    absl::StatusOr<KernelCompileReport> again = CompileKernels(**model, co);
    ASSERT_TRUE(again.ok()) << again.status();
    EXPECT_EQ(again->compiled, 0) << c.name;
  }
  std::error_code ec;
  std::filesystem::remove_all(co.cache_dir, ec);
}

INSTANTIATE_TEST_SUITE_P(ExportedModels, CompileWarmsGraphsTest,
                         ::testing::Values("gpt_block", "transformer_encoder", "cnn", "lstm"));

// The CNN at 13x11 (bucket bound 16x16): inspect (DescribeExecution) and
// compile report its convolutions' tiled GEMM chosen for the bound's
// product (n = 16 * 16 image positions), as a graph session prepares it;
// exact plans (graphs off) would keep cuBLASLt.
TEST(BucketedChoicesTest, CnnConvolutionsTakeTheTiledGemmAtTheBound) {
  ModelUnderTest m;
  for (const ModelUnderTest& u : ModelsUnderTest()) {
    if (u.name == "cnn") m = u;
  }
  ASSERT_FALSE(m.name.empty());
  absl::StatusOr<std::shared_ptr<const Model>> model = Import(m.onnx, nullptr);
  ASSERT_TRUE(model.ok()) << model.status();
  ExecutionInfoOptions io;
  io.device = Device::kCuda;
  io.input_shapes = {{2, 3, 13, 11}};
  absl::StatusOr<ExecutionInfo> info = DescribeExecution(**model, io);
  ASSERT_TRUE(info.ok()) << info.status();
  // Image positions per convolution at the bound (16x16, then pooled to
  // 8x8); the exact shape's would be 13x11 = 143 and 6x5 = 30.
  const std::vector<std::string> bound_n = {"n=256,", "n=64,"};
  int tiled = 0;
  for (const StepInfo& step : info->paths[0].steps) {
    for (const KernelChoiceInfo& k : step.kernels) {
      if (k.config.rfind("gemm_tiled__", 0) != 0) continue;
      EXPECT_EQ(step.op, "Conv");
      EXPECT_EQ(k.config.rfind("gemm_tiled__f32__", 0), 0u) << k.config;
      if (tiled < static_cast<int>(bound_n.size())) {
        EXPECT_NE(k.problem.find(bound_n[tiled]), std::string::npos) << k.problem;
      }
      ++tiled;
    }
  }
  EXPECT_EQ(tiled, 2);
  // The variants a session with graphs runs at these shapes are those listed.
  std::vector<std::string> listed, ran;
  for (const StepInfo& step : info->paths[0].steps) {
    for (const KernelChoiceInfo& k : step.kernels) {
      if (k.config.rfind("gemm_tiled__", 0) == 0) listed.push_back(k.config);
    }
  }
  std::shared_ptr<cuda::RecordingDevice> device = cuda::NewRecordingDevice(90, /*captures_graphs=*/true);
  absl::StatusOr<std::unique_ptr<Session>> session = internal::CreateSessionOnDevice(*model, SessionOptions{}, device);
  ASSERT_TRUE(session.ok()) << session.status();
  absl::StatusOr<Tensor> image = Tensor::Create(DType::kF32, {2, 3, 13, 11});
  ASSERT_TRUE(image.ok()) << image.status();
  ASSERT_TRUE((*session)->Run({image->view()}).ok());
  for (const jit::ModuleSpec& module : device->modules()) {
    if (module.file == "gemm_tiled") ran.push_back(absl::StrCat(module.file, jit::Suffix(module)));
  }
  std::sort(listed.begin(), listed.end());
  std::sort(ran.begin(), ran.end());
  listed.erase(std::unique(listed.begin(), listed.end()), listed.end());
  EXPECT_EQ(listed, ran);

  KernelCompileOptions co;
  co.arch = "sm_90";
  co.input_shapes = io.input_shapes;
  co.cache_dir = FreshDir("cnn_choices");
  if (jit::NvrtcVersion() == 0) GTEST_SKIP() << "no NVRTC here (inspect checked)";
  absl::StatusOr<KernelCompileReport> report = CompileKernels(**model, co);
  ASSERT_TRUE(report.ok()) << report.status();
  int tiled_choices = 0, tiled_modules = 0;
  for (const KernelChoiceInfo& k : report->choices) tiled_choices += k.config.rfind("gemm_tiled__", 0) == 0;
  for (const std::string& n : report->modules) tiled_modules += n.rfind("gemm_tiled__f32__", 0) == 0;
  EXPECT_EQ(tiled_choices, tiled);
  EXPECT_GE(tiled_modules, 1) << "the tiled GEMM's module was not compiled";
  std::error_code ec;
  std::filesystem::remove_all(co.cache_dir, ec);
}

}  // namespace
}  // namespace grove
