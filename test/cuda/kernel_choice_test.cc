// The dispatcher (lib/backends/cuda/kernel_choice.h): table hits, misses
// (cost model), arch mismatch, entries that do not fit the actual problem,
// unknown families, corrupt tables (refused with a message), cuBLASLt's
// table entries, and the choices reported by grove inspect's API.
#include "lib/backends/cuda/kernel_choice.h"

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "grove/grove.h"
#include "grove/kernel_ranking.h"
#include "gtest/gtest.h"
#include "jit/cost_model.h"
#include "lib/backends/cuda/emulated_device.h"
#include "lib/backends/emulated_cuda.h"
#include "test/cuda/test_kernel_families.h"
#include "test/model_test_util.h"

namespace grove::testing {
namespace {

using ::testing::HasSubstr;

std::string TmpDir(const std::string& name) {
  const char* dir = std::getenv("GROVE_TEST_TMP");
  const std::string d = absl::StrCat(dir != nullptr ? dir : "/tmp", "/kernel_choice_test_", name);
  std::error_code ec;
  std::filesystem::remove_all(d, ec);
  std::filesystem::create_directories(d, ec);
  return d;
}

void WriteBytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

jit::DispatchEntry GemmEntry(int arch, DType t, int64_t m, int64_t n, int64_t k, int algo, double us = 7) {
  jit::DispatchEntry e;
  e.arch = arch;
  e.problem = jit::KernelProblem{"gemm", {t}, {{"batch", 1}, {"k", k}, {"m", m}, {"n", n}}};
  e.bucket = jit::ShapeBucket(e.problem);
  e.config = jit::KernelConfig{"gemm", {t}, {{"algo", algo}}};
  e.measured_us = us;
  return e;
}

class KernelDispatchTest : public ::testing::Test {
 protected:
  std::shared_ptr<const jit::DispatchTable> Table() {
    auto t = std::make_shared<jit::DispatchTable>();
    t->set_provenance(TestProvenance());
    EXPECT_TRUE(t->Add(RowEntry(90, 512, 64, 128, 4, 3.25), lookup_).ok());
    EXPECT_TRUE(t->Add(RowEntry(80, 512, 64, 256, 1, 4.5), lookup_).ok());
    EXPECT_TRUE(t->Add(GemmEntry(90, DType::kF16, 12, 768, 768, 3), lookup_).ok());
    return t;
  }
  cuda::KernelDispatch Dispatch(int arch) { return cuda::KernelDispatch(jit::GpuTraits::FromArch(arch), {Table()}, lookup_); }

  RowTestFamily family_;
  jit::FamilyLookup lookup_ = Families({&family_});
};

TEST_F(KernelDispatchTest, TableHit) {
  cuda::KernelChoice c = Dispatch(90).Choose(RowProblem(300, 40));
  EXPECT_EQ(c.source, cuda::ChoiceSource::kTable);
  EXPECT_EQ(c.config.Name(), "rowtest__f32__threads128_vec4");
  EXPECT_EQ(c.bucket.ToString(), "n=512,rows=64");
  EXPECT_EQ(c.problem.ToString(), "n=300,rows=40");
  EXPECT_EQ(c.measured_us, 3.25);
  EXPECT_NEAR(c.estimate_us, 0.228, 1e-12);  // 1 pass + 128 threads
  // sm_80's entry for the same bucket.
  cuda::KernelChoice c80 = Dispatch(80).Choose(RowProblem(300, 40));
  EXPECT_EQ(c80.source, cuda::ChoiceSource::kTable);
  EXPECT_EQ(c80.config.Name(), "rowtest__f32__threads256_vec1");
}

// n = 2000 (bucket 2048, no entry), every vec valid: (256,4) 2 passes
// .456 < (128,4) 4 passes .528 < (256,2) .656 < (64,4) .864.
TEST_F(KernelDispatchTest, MissTakesTheCostModelsPick) {
  cuda::KernelChoice c = Dispatch(90).Choose(RowProblem(2000, 8));
  EXPECT_EQ(c.source, cuda::ChoiceSource::kCostModel);
  EXPECT_EQ(c.config.Name(), "rowtest__f32__threads256_vec4");
  EXPECT_NEAR(c.estimate_us, 0.456, 1e-12);
  EXPECT_EQ(c.measured_us, 0);
  // Another dtype is another key.
  EXPECT_EQ(Dispatch(90).Choose(RowProblem(300, 40, DType::kF16)).source, cuda::ChoiceSource::kCostModel);
}

TEST_F(KernelDispatchTest, ArchMismatchTakesTheCostModelsPick) {
  // sm_86 has no entry for the bucket that sm_90 and sm_80 have.
  cuda::KernelChoice c = Dispatch(86).Choose(RowProblem(300, 40));
  EXPECT_EQ(c.source, cuda::ChoiceSource::kCostModel);
  EXPECT_EQ(c.config.Name(), "rowtest__f32__threads128_vec4");  // 1 pass .228 beats (64,4)'s 2 passes .264
  EXPECT_EQ(c.measured_us, 0);
}

// n = 302 is in the bucket of the sm_90 entry (threads128_vec4), but 4 does
// not divide it: the cost model's valid pick, (128,2) 2 passes .328, runs.
TEST_F(KernelDispatchTest, AnEntryThatDoesNotFitTheActualProblemTakesTheCostModelsPick) {
  cuda::KernelChoice c = Dispatch(90).Choose(RowProblem(302, 40));
  EXPECT_EQ(c.source, cuda::ChoiceSource::kCostModel);
  EXPECT_EQ(c.config.Name(), "rowtest__f32__threads128_vec2");
  EXPECT_NEAR(c.estimate_us, 0.328, 1e-12);
}

TEST_F(KernelDispatchTest, UnknownFamilyOrNoValidVariantRunsTheGenericOne) {
  cuda::KernelChoice c = Dispatch(90).Choose(jit::KernelProblem{"mystery", {DType::kF32}, {{"n", 5}}});
  EXPECT_EQ(c.source, cuda::ChoiceSource::kGeneric);
  EXPECT_EQ(c.config.Name(), "mystery__f32");
  RowTestFamily empty(std::vector<int>{});
  cuda::KernelDispatch d(jit::GpuTraits::FromArch(90), {}, Families({&empty}));
  cuda::KernelChoice g = d.Choose(RowProblem(300, 40));
  EXPECT_EQ(g.source, cuda::ChoiceSource::kGeneric);
  EXPECT_EQ(g.config.Name(), "rowtest__f32__threads256_vec1");
}

TEST_F(KernelDispatchTest, ATuningRunForcesAVariantPerBucketWhenItFits) {
  cuda::KernelDispatch d = Dispatch(90);
  d.Force(RowProblem(400, 33), RowConfig(64, 4));
  EXPECT_EQ(d.Choose(RowProblem(300, 40)).source, cuda::ChoiceSource::kTuning);
  EXPECT_EQ(d.Choose(RowProblem(300, 40)).config.Name(), "rowtest__f32__threads64_vec4");
  EXPECT_EQ(d.Choose(RowProblem(302, 40)).source, cuda::ChoiceSource::kCostModel);  // vec4 does not fit 302
  d.ClearForced();
  EXPECT_EQ(d.Choose(RowProblem(300, 40)).source, cuda::ChoiceSource::kTable);
}

TEST_F(KernelDispatchTest, GemmEntriesGiveCublasLtsAlgorithm) {
  cuda::KernelDispatch d = Dispatch(90);
  cuda::GemmDesc g;
  g.dtype = DType::kF16;
  g.m = 9, g.n = 1000, g.k = 700;
  cuda::KernelChoice hit = d.ChooseGemm(cuda::GemmProblem(g));
  EXPECT_EQ(hit.source, cuda::ChoiceSource::kTable);
  EXPECT_EQ(hit.config.Get("algo", -1), 3);
  EXPECT_EQ(hit.bucket.ToString(), "batch=1,k=1024,m=16,n=1024");
  g.m = 7;  // up to 8 each M is its own bucket: no entry
  cuda::KernelChoice miss = d.ChooseGemm(cuda::GemmProblem(g));
  EXPECT_EQ(miss.source, cuda::ChoiceSource::kGeneric);
  EXPECT_EQ(miss.config.Get("algo", -1), -1);
  EXPECT_EQ(miss.config.Name(), "gemm__f16");
}

TEST_F(KernelDispatchTest, RecordsChoicesPerNodeForTheReports) {
  cuda::KernelDispatch d = Dispatch(90);
  ir::Node a, b;
  a.type = "Softmax";
  a.name = "sm";
  d.Record(a, d.Choose(RowProblem(300, 40)));
  d.Record(a, d.Choose(RowProblem(2000, 8)));  // the same family again: the last one stays
  d.Record(b, d.Choose(RowProblem(302, 40)));
  std::vector<KernelChoiceInfo> got = d.Choices(a);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].config, "rowtest__f32__threads256_vec4");
  EXPECT_EQ(got[0].source, "cost model");
  EXPECT_EQ(got[0].problem, "n=2000,rows=8");
  EXPECT_EQ(got[0].bucket, "n=2048,rows=8");
  EXPECT_EQ(got[0].op, "Softmax");
  EXPECT_EQ(got[0].node, "sm");
  EXPECT_EQ(d.Choices(b).size(), 1u);
  EXPECT_TRUE(d.Choices(ir::Node()).empty());
  // Every problem met, first-met order, no repeats.
  d.Record(b, d.Choose(RowProblem(300, 40)));
  std::vector<jit::KernelProblem> problems = d.problems();
  ASSERT_EQ(problems.size(), 3u);
  EXPECT_EQ(problems[0].ToString(), "n=300,rows=40");
  EXPECT_EQ(problems[1].ToString(), "n=2000,rows=8");
  EXPECT_EQ(problems[2].ToString(), "n=302,rows=40");
}

// --- a session's tables ------------------------------------------------------

// A device that says it is a GPU (emulated underneath) with 100 SMs.
class FakeGpu : public cuda::ForwardingDevice {
 public:
  FakeGpu() : ForwardingDevice(cuda::NewEmulatedDevice()) {}
  bool emulated() const override { return false; }
  int sm_count() const override { return 100; }
};

// A table only of "gemm" entries (a session's lookup is the real families').
std::vector<uint8_t> GemmTable(bool emulated = false) {
  jit::DispatchTable t;
  jit::TableProvenance p = TestProvenance();
  p.emulated = emulated;
  t.set_provenance(p);
  EXPECT_TRUE(t.Add(GemmEntry(90, DType::kF32, 12, 32, 64, 2)).ok());
  return t.Serialize();
}

TEST(SessionDispatchTest, DeviceTraitsTakeTheDevicesSmCount) {
  FakeGpu gpu;
  EXPECT_EQ(cuda::DeviceTraits(gpu).sms, 100);
  EXPECT_EQ(cuda::DeviceTraits(gpu).arch, 90);
  std::shared_ptr<cuda::Device> emu = cuda::NewEmulatedDevice();
  EXPECT_EQ(cuda::DeviceTraits(*emu).sms, jit::GpuTraits::FromArch(90).sms);
}

TEST(SessionDispatchTest, AUsersTableIsLoadedOrRefusedWithAMessage) {
  const std::string dir = TmpDir("user");
  std::shared_ptr<cuda::Device> emu = cuda::NewEmulatedDevice();
  SessionOptions o;
  o.kernel_table = dir + "/good.bin";
  WriteBytes(o.kernel_table, GemmTable());
  absl::StatusOr<std::unique_ptr<cuda::KernelDispatch>> d = cuda::MakeSessionDispatch(*emu, o);
  ASSERT_TRUE(d.ok()) << d.status();
  ASSERT_GE((*d)->tables().size(), 1u);
  cuda::GemmDesc g;
  g.m = 10, g.n = 32, g.k = 64;
  EXPECT_EQ((*d)->ChooseGemm(cuda::GemmProblem(g)).config.Get("algo", -1), 2);

  // Truncated: refused, naming the file.
  std::vector<uint8_t> bytes = GemmTable();
  bytes.resize(bytes.size() / 2);
  o.kernel_table = dir + "/truncated.bin";
  WriteBytes(o.kernel_table, bytes);
  d = cuda::MakeSessionDispatch(*emu, o);
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(d.status().message()), HasSubstr(o.kernel_table));
  EXPECT_THAT(std::string(d.status().message()), HasSubstr("not a valid kernel table"));

  o.kernel_table = dir + "/missing.bin";
  d = cuda::MakeSessionDispatch(*emu, o);
  ASSERT_FALSE(d.ok());
  EXPECT_THAT(std::string(d.status().message()), HasSubstr("cannot be read"));

  // An emulated device's timings are for tests: refused on a GPU.
  o.kernel_table = dir + "/emulated.bin";
  WriteBytes(o.kernel_table, GemmTable(true));
  FakeGpu gpu;
  d = cuda::MakeSessionDispatch(gpu, o);
  ASSERT_FALSE(d.ok());
  EXPECT_THAT(std::string(d.status().message()), HasSubstr("emulated"));
  EXPECT_TRUE(cuda::MakeSessionDispatch(*emu, o).ok());
}

TEST(SessionDispatchTest, ACorruptShippedTableIsSkippedWithAWarningAndTheOthersServe) {
  const std::string dir = TmpDir("shipped");
  std::vector<uint8_t> bad = GemmTable();
  bad[bad.size() / 2] ^= 0xFF;
  bad.resize(bad.size() - 3);
  WriteBytes(dir + "/a_corrupt.bin", bad);
  WriteBytes(dir + "/b_good.bin", GemmTable());
  WriteBytes(dir + "/notes.txt", {'h', 'i'});
  ASSERT_EQ(setenv("GROVE_KERNEL_TABLES", dir.c_str(), 1), 0);
  std::vector<std::string> warnings;
  SessionOptions o;
  o.log_sink = [&](LogLevel level, absl::string_view msg) {
    if (level == LogLevel::kWarning) warnings.emplace_back(msg);
  };
  std::shared_ptr<cuda::Device> emu = cuda::NewEmulatedDevice();
  absl::StatusOr<std::unique_ptr<cuda::KernelDispatch>> d = cuda::MakeSessionDispatch(*emu, o);
  unsetenv("GROVE_KERNEL_TABLES");
  ASSERT_TRUE(d.ok()) << d.status();
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_THAT(warnings[0], HasSubstr(dir + "/a_corrupt.bin"));
  EXPECT_THAT(warnings[0], HasSubstr("cost model"));
  ASSERT_EQ((*d)->tables().size(), 1u);
  cuda::GemmDesc g;
  g.m = 10, g.n = 32, g.k = 64;
  EXPECT_EQ((*d)->ChooseGemm(cuda::GemmProblem(g)).source, cuda::ChoiceSource::kTable);
}

// --- end to end: grove inspect's API and a session ---------------------------

// DescribeExecution's options for the CUDA device at these input shapes.
ExecutionInfoOptions CudaInfoOptions(std::vector<std::vector<int64_t>> input_shapes) {
  ExecutionInfoOptions o;
  o.device = Device::kCuda;
  o.input_shapes = std::move(input_shapes);
  return o;
}

std::shared_ptr<const Model> MatMulModel() {
  ModelBuilder b;
  b.AddSymbol("batch", 1, 64);
  b.AddInput("x", DType::kF32, {"batch", 64});
  std::vector<float> w(64 * 32);
  for (size_t i = 0; i < w.size(); ++i) w[i] = 0.01f * static_cast<float>(i % 17) - 0.05f;
  b.AddWeight("w", DType::kF32, {64, 32}, w);
  b.AddOp("MatMul", {"x", "w"}, {"y"}, {}, "proj");
  b.AddOutput("y");
  return LoadOrDie(b.Finish());
}

TEST(KernelChoiceReportTest, InspectShowsEachStepsChoiceAndItsSource) {
  const std::string dir = TmpDir("inspect");
  std::shared_ptr<const Model> model = MatMulModel();
  ExecutionInfoOptions o = CudaInfoOptions({{10, 64}});
  absl::StatusOr<ExecutionInfo> info = DescribeExecution(*model, o);
  ASSERT_TRUE(info.ok()) << info.status();
  // The MatMul step's cuBLASLt choice (the step may also choose a variant
  // of another family, e.g. gemv for few rows).
  auto matmul_kernels = [](const ExecutionInfo& i) {
    std::vector<KernelChoiceInfo> out;
    for (const StepInfo& s : i.paths.at(0).steps) {
      if (s.op != "MatMul") continue;
      for (const KernelChoiceInfo& k : s.kernels) {
        if (k.config.rfind("gemm__", 0) == 0) out.push_back(k);
      }
    }
    return out;
  };
  std::vector<KernelChoiceInfo> k = matmul_kernels(*info);
  ASSERT_EQ(k.size(), 1u);
  EXPECT_EQ(k[0].config, "gemm__f32");
  EXPECT_EQ(k[0].source, "generic");
  EXPECT_EQ(k[0].problem, "batch=1,k=64,m=10,n=32");
  EXPECT_EQ(k[0].bucket, "batch=1,k=64,m=16,n=32");
  EXPECT_EQ(k[0].node, "proj");

  // With a table for that bucket on sm_90: the table's algorithm; sm_80 has none.
  o.kernel_table = dir + "/t.bin";
  WriteBytes(o.kernel_table, GemmTable());
  info = DescribeExecution(*model, o);
  ASSERT_TRUE(info.ok()) << info.status();
  k = matmul_kernels(*info);
  ASSERT_EQ(k.size(), 1u);
  EXPECT_EQ(k[0].config, "gemm__f32__algo2");
  EXPECT_EQ(k[0].source, "table");
  EXPECT_EQ(k[0].measured_us, 7);
  o.arch = "sm_80";
  info = DescribeExecution(*model, o);
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(matmul_kernels(*info).at(0).source, "generic");

  o.kernel_table = dir + "/none.bin";
  EXPECT_FALSE(DescribeExecution(*model, o).ok());
}

TEST(KernelChoiceReportTest, ASessionRefusesACorruptTableAtCreateAndRunsWithAGoodOne) {
  const std::string dir = TmpDir("session");
  std::shared_ptr<const Model> model = MatMulModel();
  SessionOptions o;
  o.kernel_table = dir + "/bad.bin";
  WriteBytes(o.kernel_table, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16});
  absl::StatusOr<std::unique_ptr<Session>> s = internal::CreateEmulatedCudaSession(model, o);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.status().message()), HasSubstr(o.kernel_table));

  o.kernel_table = dir + "/good.bin";
  WriteBytes(o.kernel_table, GemmTable());
  s = internal::CreateEmulatedCudaSession(model, o);
  ASSERT_TRUE(s.ok()) << s.status();
  std::unique_ptr<Session> cpu = CpuSession(model);
  Tensor x = TensorF32({3, 64}, RandomF32(3 * 64, 7));
  absl::StatusOr<std::vector<TensorView>> got = (*s)->Run({x.view()});
  ASSERT_TRUE(got.ok()) << got.status();
  absl::StatusOr<std::vector<TensorView>> want = cpu->Run({x.view()});
  ASSERT_TRUE(want.ok());
  EXPECT_EQ(ToVector((*got)[0]).size(), 96u);
  std::vector<float> a = ToVector((*got)[0]), b = ToVector((*want)[0]);
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-5) << i;
}


// Conv, ConvTranspose and LSTM choose their GEMMs' cuBLASLt algorithms when
// the step is prepared, as MatMul does: a plan made without running a kernel
// shows each step's choice, from a table where it has the GEMM's bucket; a
// session with that table runs them and equals the CPU.
std::shared_ptr<const Model> ConvAndLstmModel() {
  ModelBuilder b;
  b.AddInput("x", DType::kF32, {2, 3, 8, 8});
  b.AddInput("s", DType::kF32, {5, 2, 6});
  auto weights = [](size_t n, int salt) {
    std::vector<float> w(n);
    for (size_t i = 0; i < n; ++i) w[i] = 0.02f * static_cast<float>((i * 7 + salt) % 23) - 0.2f;
    return w;
  };
  b.AddWeight("wc", DType::kF32, {4, 3, 3, 3}, weights(4 * 3 * 9, 1));
  b.AddWeight("wt", DType::kF32, {4, 2, 3, 3}, weights(4 * 2 * 9, 2));
  b.AddWeight("wl", DType::kF32, {1, 28, 6}, weights(28 * 6, 3));
  b.AddWeight("rl", DType::kF32, {1, 28, 7}, weights(28 * 7, 4));
  b.AddOp("Conv", {"x", "wc"}, {"c"}, {}, "conv");
  b.AddOp("ConvTranspose", {"c", "wt"}, {"t"}, {}, "deconv");
  b.AddOp("LSTM", {"s", "wl", "rl"}, {"y"}, {{"hidden_size", int64_t{7}}}, "lstm");
  b.AddOutput("t");
  b.AddOutput("y");
  return LoadOrDie(b.Finish());
}

jit::DispatchEntry GemmBatchEntry(int64_t m, int64_t n, int64_t k, int64_t batch, int algo) {
  jit::DispatchEntry e = GemmEntry(90, DType::kF32, m, n, k, algo);
  e.problem.dims[0].second = batch;  // "batch" sorts first
  e.bucket = jit::ShapeBucket(e.problem);
  return e;
}

TEST(KernelChoiceReportTest, ConvConvTransposeAndLstmChooseTheirGemmsWhenPrepared) {
  const std::string dir = TmpDir("conv_lstm");
  std::shared_ptr<const Model> model = ConvAndLstmModel();
  ExecutionInfoOptions o = CudaInfoOptions({{2, 3, 8, 8}, {5, 2, 6}});
  auto gemm_of = [](const ExecutionInfo& info, const std::string& node) {
    for (const StepInfo& s : info.paths.at(0).steps) {
      if (s.node != node) continue;
      for (const KernelChoiceInfo& k : s.kernels) {
        if (k.config.rfind("gemm__", 0) == 0) return k;
      }
    }
    return KernelChoiceInfo{};
  };
  absl::StatusOr<ExecutionInfo> info = DescribeExecution(*model, o);
  ASSERT_TRUE(info.ok()) << info.status();
  // Conv: Y_g[4, 36] = W[4, 27] col[27, 36] for both images in one batch;
  // ConvTranspose: col[18, 36] = W^T[18, 4] X[4, 36]; LSTM: the input
  // projection of 5 steps x 2 rows by 28 gate units (recorded last).
  EXPECT_EQ(gemm_of(*info, "conv").problem, "batch=2,k=27,m=4,n=36");
  EXPECT_EQ(gemm_of(*info, "deconv").problem, "batch=2,k=4,m=18,n=36");
  EXPECT_EQ(gemm_of(*info, "lstm").problem, "batch=1,k=6,m=10,n=28");
  for (const char* node : {"conv", "deconv", "lstm"}) {
    EXPECT_EQ(gemm_of(*info, node).config, "gemm__f32") << node;
    EXPECT_EQ(gemm_of(*info, node).source, "generic") << node;
  }

  jit::DispatchTable t;
  t.set_provenance(TestProvenance());
  ASSERT_TRUE(t.Add(GemmBatchEntry(4, 36, 27, 2, 3)).ok());
  ASSERT_TRUE(t.Add(GemmBatchEntry(18, 36, 4, 2, 1)).ok());
  ASSERT_TRUE(t.Add(GemmBatchEntry(10, 28, 6, 1, 4)).ok());
  o.kernel_table = dir + "/t.bin";
  WriteBytes(o.kernel_table, t.Serialize());
  info = DescribeExecution(*model, o);
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(gemm_of(*info, "conv").config, "gemm__f32__algo3");
  EXPECT_EQ(gemm_of(*info, "conv").source, "table");
  EXPECT_EQ(gemm_of(*info, "deconv").config, "gemm__f32__algo1");
  EXPECT_EQ(gemm_of(*info, "lstm").config, "gemm__f32__algo4");
  EXPECT_EQ(gemm_of(*info, "lstm").source, "table");

  SessionOptions so;
  so.kernel_table = o.kernel_table;
  absl::StatusOr<std::unique_ptr<Session>> s = internal::CreateEmulatedCudaSession(model, so);
  ASSERT_TRUE(s.ok()) << s.status();
  std::unique_ptr<Session> cpu = CpuSession(model);
  Tensor x = TensorF32({2, 3, 8, 8}, RandomF32(2 * 3 * 64, 5));
  Tensor seq = TensorF32({5, 2, 6}, RandomF32(5 * 2 * 6, 6));
  absl::StatusOr<std::vector<TensorView>> got = (*s)->Run({x.view(), seq.view()});
  ASSERT_TRUE(got.ok()) << got.status();
  absl::StatusOr<std::vector<TensorView>> want = cpu->Run({x.view(), seq.view()});
  ASSERT_TRUE(want.ok()) << want.status();
  for (size_t o_i = 0; o_i < 2; ++o_i) {
    std::vector<float> a = ToVector((*got)[o_i]), w = ToVector((*want)[o_i]);
    ASSERT_EQ(a.size(), w.size());
    for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], w[i], 1e-4) << o_i << " at " << i;
  }
}


// A Cast and fused elementwise chains choose their variants when prepared:
// a chain whose operands are contiguous (or one element) has a vec extent
// of 4, so the cost model may pick a vector width; one with an operand
// broadcast along the rows only scalar variants (vec 1); a Cast's problem
// is its dtype pair and element count, and a large one takes a vector. A
// session on the emulated device launches the chosen variants' geometry
// and equals the CPU.
std::shared_ptr<const Model> CastAndChainsModel() {
  ModelBuilder b;
  b.AddSymbol("batch", 1, 65536);
  b.AddInput("x", DType::kF32, {"batch", 256});
  b.AddWeight("half", DType::kF32, {}, std::vector<float>{0.5f});
  std::vector<float> w(256);
  for (size_t i = 0; i < w.size(); ++i) w[i] = 0.01f * static_cast<float>(i % 13) - 0.06f;
  b.AddWeight("w", DType::kF32, {256}, w);
  b.AddOp("Mul", {"x", "half"}, {"xh"}, {}, "contiguous_mul");
  b.AddOp("Add", {"xh", "x"}, {"xs"}, {}, "contiguous_add");
  b.AddOp("Relu", {"xs"}, {"a"}, {}, "contiguous_relu");
  b.AddOp("Mul", {"x", "w"}, {"xw"}, {}, "rows_mul");
  b.AddOp("Sigmoid", {"xw"}, {"r"}, {}, "rows_sigmoid");
  b.AddOp("Cast", {"a"}, {"h"}, {{"to", static_cast<int64_t>(DType::kF16)}}, "cast");
  b.AddOutput("r");
  b.AddOutput("h");
  return LoadOrDie(b.Finish());
}

TEST(KernelChoiceReportTest, CastsAndFusedChainsChooseAVectorWidthWhenPrepared) {
  std::shared_ptr<const Model> model = CastAndChainsModel();
  ExecutionInfoOptions o = CudaInfoOptions({{65536, 256}});
  absl::StatusOr<ExecutionInfo> info = DescribeExecution(*model, o);
  ASSERT_TRUE(info.ok()) << info.status();
  // The choice of `family` for the step whose node name starts with
  // `prefix` (a fused step's is "fused(" and its nodes).
  auto choice_of = [&](const std::string& prefix, const std::string& family) {
    for (const StepInfo& s : info->paths.at(0).steps) {
      for (const KernelChoiceInfo& k : s.kernels) {
        if (k.node.rfind(prefix, 0) == 0 && k.config.rfind(family + "__", 0) == 0) return k;
      }
    }
    std::string all;
    for (const StepInfo& s : info->paths.at(0).steps) {
      for (const KernelChoiceInfo& k : s.kernels) all += s.op + " " + k.node + " " + k.config + " " + k.problem + " " + k.source + "\n";
    }
    ADD_FAILURE() << "no " << family << " choice for " << prefix << "; the choices:\n" << all;
    return KernelChoiceInfo{};
  };
  auto vec_of = [](const KernelChoiceInfo& k) {
    absl::StatusOr<jit::KernelConfig> c = jit::KernelConfig::Parse(k.config);
    EXPECT_TRUE(c.ok()) << k.config;
    return c.ok() ? c->Get("vec", 0) : 0;
  };
  const KernelChoiceInfo contiguous = choice_of("fused(contiguous", "ew");
  EXPECT_EQ(contiguous.op, "FusedElementwise");
  EXPECT_EQ(contiguous.problem, "inputs=2,n=16777216,ops=3,vec=4");
  EXPECT_EQ(contiguous.source, "cost model");
  EXPECT_GT(vec_of(contiguous), 1) << contiguous.config;
  const KernelChoiceInfo rows = choice_of("fused(rows", "ew");
  EXPECT_EQ(rows.op, "FusedElementwise");
  EXPECT_EQ(rows.problem, "inputs=2,n=16777216,ops=2,vec=1");
  EXPECT_EQ(vec_of(rows), 1) << rows.config;
  const KernelChoiceInfo cast = choice_of("cast", "cast");
  EXPECT_EQ(cast.problem, "n=16777216");
  EXPECT_EQ(cast.source, "cost model");
  EXPECT_EQ(cast.config.rfind("cast__f32_f16__", 0), 0u) << cast.config;
  EXPECT_GT(vec_of(cast), 1) << cast.config;

  absl::StatusOr<std::unique_ptr<Session>> s = internal::CreateEmulatedCudaSession(model, SessionOptions{});
  ASSERT_TRUE(s.ok()) << s.status();
  std::unique_ptr<Session> cpu = CpuSession(model);
  for (int64_t batch : {1, 5, 64}) {
    Tensor x = TensorF32({batch, 256}, RandomF32(batch * 256, 11));
    absl::StatusOr<std::vector<TensorView>> got = (*s)->Run({x.view()});
    ASSERT_TRUE(got.ok()) << got.status();
    absl::StatusOr<std::vector<TensorView>> want = cpu->Run({x.view()});
    ASSERT_TRUE(want.ok()) << want.status();
    std::vector<float> a = ToVector((*got)[0]), w = ToVector((*want)[0]);
    ASSERT_EQ(a.size(), w.size());
    for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], w[i], 1e-6) << "batch " << batch << " at " << i;
    ASSERT_EQ((*got)[1].dtype, DType::kF16);
    ASSERT_EQ((*got)[1].byte_size(), (*want)[1].byte_size());
    EXPECT_EQ(std::memcmp((*got)[1].data, (*want)[1].data, (*want)[1].byte_size()), 0) << "batch " << batch;
  }
}

// grove::RankKernelVariants re-ranks a recorded choice: the cost model's
// order, the pick's rank and terms; GEMMs are not modeled; bad fields are
// errors naming them.
TEST(KernelChoiceReportTest, RankKernelVariantsReranksAChoice) {
  KernelChoiceInfo c;
  c.config = "softmax__f32__lanes32_threads64";
  c.problem = "inner=1,n=100,rows=64";
  c.op = "Softmax";
  c.node = "sm";
  absl::StatusOr<KernelRanking> r = RankKernelVariants(c, "sm_90", 3);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->modeled);
  EXPECT_EQ(r->valid_variants, 15);
  ASSERT_EQ(r->ranked.size(), 3u);
  const jit::KernelProblem problem{"softmax", {DType::kF32}, {{"inner", 1}, {"n", 100}, {"rows", 64}}};
  const std::vector<jit::RankedVariant> want =
      jit::RankVariants(*jit::FindKernelFamily("softmax"), problem, jit::GpuTraits::FromArch(90));
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(r->ranked[i].config, want[i].config.Name());
    EXPECT_DOUBLE_EQ(r->ranked[i].estimate_us, want[i].cost.estimate_us);
    EXPECT_DOUBLE_EQ(r->ranked[i].waste, want[i].cost.waste);
  }
  int rank = -1;
  for (size_t i = 0; i < want.size(); ++i) {
    if (want[i].config.Name() == c.config) rank = static_cast<int>(i);
  }
  EXPECT_EQ(r->pick_rank, rank);
  EXPECT_EQ(r->pick.config, c.config);
  EXPECT_DOUBLE_EQ(r->pick.estimate_us, want[rank].cost.estimate_us);
  EXPECT_EQ(RankKernelVariants(c, "sm_90", 0)->ranked.size(), 15u);

  KernelChoiceInfo g;
  g.config = "gemm__f32__algo2";
  g.problem = "batch=1,k=64,m=10,n=32";
  r = RankKernelVariants(g, "90");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->modeled);
  EXPECT_TRUE(r->ranked.empty());

  EXPECT_THAT(std::string(RankKernelVariants(c, "banana").status().message()), HasSubstr("banana"));
  KernelChoiceInfo bad = c;
  bad.problem = "rows=64,n=100";  // not sorted
  EXPECT_THAT(std::string(RankKernelVariants(bad, "sm_90").status().message()), HasSubstr("'rows=64,n=100'"));
  bad.problem = "n=x";
  EXPECT_FALSE(RankKernelVariants(bad, "sm_90").ok());
  bad = c;
  bad.config = "softmax__f32__lanes32_threads65";  // not in the space
  EXPECT_THAT(std::string(RankKernelVariants(bad, "sm_90").status().message()), HasSubstr("Softmax 'sm'"));
  bad.config = "softmax";
  EXPECT_FALSE(RankKernelVariants(bad, "sm_90").ok());
}

}  // namespace
}  // namespace grove::testing
