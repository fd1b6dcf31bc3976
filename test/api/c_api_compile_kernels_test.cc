// Kernel-cache warm-up through the C ABI (grove_compile_kernels, the C face
// of grove::CompileKernels and `grove compile`): NVRTC fills a fresh cache
// folder with no GPU, a second call finds everything cached, the report's
// summary and module names, and every bad argument.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "grove/grove.h"
#include "grove/grove_c.h"
#include "gtest/gtest.h"
#include "test/api/c_api_test_util.h"

namespace {

using ::testing::HasSubstr;

using grove::c_test::Ok;
using grove::c_test::Failure;

// A fresh folder per process (ctest runs tests in parallel processes).
std::string FreshDir(const std::string& name) {
  const char* dir = std::getenv("GROVE_TEST_TMP");
  std::string base = dir != nullptr ? dir : ::testing::TempDir();
  mkdir(base.c_str(), 0755);
  base += "/c_api_compile_" + std::to_string(getpid());
  mkdir(base.c_str(), 0755);
  base += "/" + name;
  std::system(("rm -rf '" + base + "'").c_str());
  return base;
}

class CApiCompileKernelsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // x[batch, 4] -> Relu(x * 2 + 1)
    grove::ModelBuilder b;
    b.AddSymbol("batch", 1, 8);
    b.AddInput("x", grove::DType::kF32, {"batch", 4});
    b.AddWeight("two", grove::DType::kF32, {1}, std::vector<float>{2});
    b.AddWeight("one", grove::DType::kF32, {1}, std::vector<float>{1});
    b.AddOp("Mul", {"x", "two"}, {"m"});
    b.AddOp("Add", {"m", "one"}, {"a"});
    b.AddOp("Relu", {"a"}, {"y"});
    b.AddOutput("y");
    absl::StatusOr<std::vector<uint8_t>> bytes = b.Finish();
    ASSERT_TRUE(bytes.ok()) << bytes.status();
    ASSERT_TRUE(Ok(grove_model_load_buffer(bytes->data(), bytes->size(), &model_)));
    shape_.rank = 2;
    shape_.dims[0] = 3;
    shape_.dims[1] = 4;
  }
  void TearDown() override { grove_model_release(model_); }

  grove_kernel_compile_options_t Options(const std::string& cache_dir) {
    grove_kernel_compile_options_t options;
    grove_kernel_compile_options_initialize(&options);
    options.arch = "sm_90";
    options.input_shapes = &shape_;
    options.n_input_shapes = 1;
    cache_dir_ = cache_dir;
    options.cache_dir = cache_dir_.c_str();
    return options;
  }

  grove_model_t* model_ = nullptr;
  grove_shape_t shape_{};
  std::string cache_dir_;
};

TEST(CApiCompileKernels, OptionsDefaults) {
  grove_kernel_compile_options_t options;
  std::memset(&options, 0x5a, sizeof(options));
  grove_kernel_compile_options_initialize(&options);
  EXPECT_EQ(options.struct_size, sizeof(options));
  EXPECT_EQ(options.arch, nullptr);
  EXPECT_EQ(options.input_shapes, nullptr);
  EXPECT_EQ(options.n_input_shapes, 0u);
  EXPECT_EQ(options.cache_dir, nullptr);
  EXPECT_EQ(options.all_kernels, 0);
  EXPECT_EQ(options.reserved, 0);
  grove_kernel_compile_options_initialize(nullptr);
  const grove_kernel_report_summary_t summary = GROVE_KERNEL_REPORT_SUMMARY_INIT;
  EXPECT_EQ(summary.struct_size, sizeof(summary));
  EXPECT_EQ(GROVE_KERNEL_COMPILE_OPTIONS_SIZE_V1, sizeof(grove_kernel_compile_options_t));
  EXPECT_EQ(GROVE_KERNEL_REPORT_SUMMARY_SIZE_V1, sizeof(grove_kernel_report_summary_t));
}

TEST_F(CApiCompileKernelsTest, FillsTheCacheThenFindsItWarm) {
  const std::string dir = FreshDir("warm");
  grove_kernel_compile_options_t options = Options(dir);
  grove_kernel_report_t* report = nullptr;
  ASSERT_TRUE(Ok(grove_compile_kernels(model_, &options, &report)));
  grove_kernel_report_summary_t summary = GROVE_KERNEL_REPORT_SUMMARY_INIT;
  ASSERT_TRUE(Ok(grove_kernel_report_summary(report, &summary)));
  EXPECT_EQ(summary.struct_size, sizeof(summary));
  EXPECT_EQ(std::string(summary.cache_dir), dir);
  EXPECT_STREQ(summary.note, "");
  EXPECT_EQ(summary.arch, 90);
  EXPECT_GT(summary.n_modules, 0);
  EXPECT_EQ(summary.compiled, summary.n_modules);
  EXPECT_EQ(summary.cached, 0);
  EXPECT_EQ(summary.corrupt, 0);
  EXPECT_EQ(summary.stale, 0);
  EXPECT_GT(summary.compile_ms, 0);
  for (int i = 0; i < summary.n_modules; ++i) {
    const char* name = nullptr;
    ASSERT_TRUE(Ok(grove_kernel_report_module(report, static_cast<size_t>(i), &name)));
    ASSERT_NE(name, nullptr);
    EXPECT_GT(std::strlen(name), 0u);
  }
  const char* name = nullptr;
  EXPECT_THAT(Failure(grove_kernel_report_module(report, summary.n_modules, &name), GROVE_STATUS_OUT_OF_RANGE),
              HasSubstr("is past the report's"));
  EXPECT_THAT(Failure(grove_kernel_report_module(report, 0, nullptr)), HasSubstr("out_name is NULL"));
  const int32_t modules = summary.n_modules;
  grove_kernel_report_release(report);
  EXPECT_THAT(Failure(grove_kernel_report_summary(report, &summary)), HasSubstr("it was released"));
  grove_kernel_report_release(report);  // twice: a no-op
  grove_kernel_report_release(nullptr);

  // Warm: nothing compiled; no report asked for.
  ASSERT_TRUE(Ok(grove_compile_kernels(model_, &options, nullptr)));
  ASSERT_TRUE(Ok(grove_compile_kernels(model_, &options, &report)));
  ASSERT_TRUE(Ok(grove_kernel_report_summary(report, &summary)));
  EXPECT_EQ(summary.compiled, 0);
  EXPECT_EQ(summary.cached, modules);
  grove_kernel_report_release(report);
}

TEST_F(CApiCompileKernelsTest, EveryBadArgumentIsAnError) {
  grove_kernel_compile_options_t options = Options(FreshDir("bad"));
  grove_kernel_report_t* report = nullptr;
  EXPECT_THAT(Failure(grove_compile_kernels(nullptr, &options, &report)),
              HasSubstr("grove_compile_kernels: model is NULL"));
  // The defaults give no shapes: the model has an input.
  EXPECT_THAT(Failure(grove_compile_kernels(model_, nullptr, &report)), HasSubstr("given 0 shapes"));

  grove_kernel_compile_options_t bad = options;
  bad.struct_size = 0;
  std::string message = Failure(grove_compile_kernels(model_, &bad, &report));
  EXPECT_THAT(message, HasSubstr("options->struct_size is 0 (not set)"));
  EXPECT_THAT(message, HasSubstr("grove_kernel_compile_options_t"));
  bad.struct_size = sizeof(size_t);
  EXPECT_THAT(Failure(grove_compile_kernels(model_, &bad, &report)), HasSubstr("below the first version's"));
  bad = options;
  bad.reserved = 1;
  EXPECT_THAT(Failure(grove_compile_kernels(model_, &bad, &report)), HasSubstr("options->reserved is not 0"));
  bad = options;
  bad.n_input_shapes = 2;
  EXPECT_THAT(Failure(grove_compile_kernels(model_, &bad, &report)),
              HasSubstr("options->n_input_shapes is 2 but the model has 1 inputs"));
  bad = options;
  bad.input_shapes = nullptr;
  EXPECT_THAT(Failure(grove_compile_kernels(model_, &bad, &report)), HasSubstr("options->input_shapes is NULL"));
  bad = options;
  grove_shape_t deep = shape_;
  deep.rank = GROVE_MAX_RANK + 1;
  bad.input_shapes = &deep;
  EXPECT_THAT(Failure(grove_compile_kernels(model_, &bad, &report)),
              HasSubstr("options->input_shapes[0] (input 0 ('x')): rank 9 is outside 0..8"));
  bad = options;
  bad.arch = "sm_banana";
  EXPECT_NE(Failure(grove_compile_kernels(model_, &bad, &report)).find("grove_compile_kernels: "), std::string::npos);
  EXPECT_EQ(report, nullptr) << "a failed call wrote out_report";

  // A shape the model refuses stops the dry run: not an error, a note.
  bad = options;
  grove_shape_t wrong = shape_;
  wrong.dims[1] = 5;  // the model wants 4 columns
  bad.input_shapes = &wrong;
  ASSERT_TRUE(Ok(grove_compile_kernels(model_, &bad, &report)));
  grove_kernel_report_summary_t noted = GROVE_KERNEL_REPORT_SUMMARY_INIT;
  ASSERT_TRUE(Ok(grove_kernel_report_summary(report, &noted)));
  EXPECT_THAT(noted.note, HasSubstr("the dry run with zero inputs stopped early"));
  grove_kernel_report_release(report);
  report = nullptr;

  // A report's summary with a bad struct_size.
  ASSERT_TRUE(Ok(grove_compile_kernels(model_, &options, &report)));
  grove_kernel_report_summary_t summary = GROVE_KERNEL_REPORT_SUMMARY_INIT;
  summary.struct_size = 0;
  EXPECT_THAT(Failure(grove_kernel_report_summary(report, &summary)),
              HasSubstr("out_summary->struct_size is 0 (not set); grove_kernel_report_summary_t versions are"));
  EXPECT_THAT(Failure(grove_kernel_report_summary(report, nullptr)), HasSubstr("out_summary is NULL"));
  EXPECT_THAT(Failure(grove_kernel_report_summary(nullptr, &summary)), HasSubstr("report is NULL"));
  grove_kernel_report_release(report);
}

}  // namespace
