// The tiled GEMM of bucketed plans (jit/kernels/gemm_tiled.cuh, run through
// lib/backends/cuda/tiled_gemm.h) on the emulated device: against a naive
// double-precision reference and, bit for bit, against the device's own
// GEMM (what the plan would run outside a bucket) for every transpose,
// leading dims wider than the matrices, broadcast and strided batches, alpha,
// beta, bias, the epilogues, the f32 math modes and halves; any grid gives
// the same result; and the property buckets need: a graph captured for the
// bound's product, refreshed for a smaller N and K, replays the smaller
// product, where a captured Device::Gemm cannot be refreshed so. And a
// launch of one thread per item (GridFor) refreshed in a bucket with
// another block keeps its captured one; a copy between device buffers is
// captured as a kernel, so a refresh moves it (a host copy stays baked).
#include <cmath>
#include <cstdlib>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "jit/cost_model.h"
#include "jit/dispatch_table.h"
#include "jit/kernel_cache.h"
#include "jit/kernel_config.h"
#include "jit/module.h"
#include "jit/kernels/conv_params.h"
#include "jit/kernels/gemm_tiled_params.h"
#include "jit/kernels/prelude.cuh"
#include "lib/backends/cuda/device.h"
#include "lib/backends/cuda/emulated_device.h"
#include "lib/backends/cuda/exec_context.h"
#include "lib/backends/cuda/launch_util.h"
#include "lib/backends/cuda/param_device.h"
#include "lib/backends/cuda/cuda_backend.h"
#include "lib/backends/cuda/kernel_choice.h"
#include "lib/backends/cuda/tiled_gemm.h"
#include "lib/backends/cuda/variant_launch.h"
#include "lib/runtime/session_internal.h"
#include "test/cuda/test_kernel_families.h"
#include "test/cuda_op_test_util.h"
#include "test/model_test_util.h"

namespace grove {
namespace {

using cuda::GemmDesc;

struct Problem {
  int64_t m = 1, n = 1, k = 1, batch = 1;
  bool trans_a = false, trans_b = false;
  int64_t pad = 0;           // extra elements per row (lda, ldb, ldc wider than the matrix)
  bool broadcast_b = false;  // stride_b 0: one B for every batch
  float alpha = 1.0f, beta = 0.0f;
  bool bias = false;
  GemmDesc::Epilogue epilogue = GemmDesc::Epilogue::kNone;
  GemmDesc::Math math = GemmDesc::Math::kF32;
  DType dtype = DType::kF32;
};

std::string Describe(const Problem& p) {
  return ::testing::PrintToString(std::vector<int64_t>{p.m, p.n, p.k, p.batch}) +
         (p.trans_a ? " At" : "") + (p.trans_b ? " Bt" : "") + " pad " + std::to_string(p.pad) +
         (p.broadcast_b ? " B shared" : "") + " alpha " + std::to_string(p.alpha) + " beta " +
         std::to_string(p.beta) + (p.bias ? " bias" : "") + " epilogue " +
         std::to_string(static_cast<int>(p.epilogue)) + " math " + std::to_string(static_cast<int>(p.math)) + " " +
         std::string(DTypeName(p.dtype));
}

float RoundTo(DType t, float x) {
  if (t == DType::kF16) return grove_k::f16_to_f32(grove_k::f32_to_f16(x));
  if (t == DType::kBF16) return grove_k::bf16_to_f32(grove_k::f32_to_bf16(x));
  return x;
}

// Host matrices of a problem, device copies and GemmDescs over them.
class Operands {
 public:
  Operands(cuda::Device& dev, const Problem& p, uint32_t seed) : dev_(dev), p_(p) {
    const int64_t rows_a = p.trans_a ? p.k : p.m, cols_a = p.trans_a ? p.m : p.k;
    const int64_t rows_b = p.trans_b ? p.n : p.k, cols_b = p.trans_b ? p.k : p.n;
    lda_ = cols_a + p.pad;
    ldb_ = cols_b + p.pad;
    ldc_ = p.n + p.pad;
    sa_ = rows_a * lda_;
    sb_ = p.broadcast_b ? 0 : rows_b * ldb_;
    sc_ = p.m * ldc_;
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> d(-2, 2);
    auto fill = [&](int64_t count) {
      std::vector<float> v(static_cast<size_t>(std::max<int64_t>(count, 1)));
      for (float& x : v) x = RoundTo(p.dtype, d(rng));
      return v;
    };
    a_ = fill(sa_ * p.batch);
    b_ = fill(p.broadcast_b ? rows_b * ldb_ : sb_ * p.batch);
    c_ = fill(sc_ * p.batch);
    bias_ = fill(p.n);
  }
  ~Operands() {
    for (void* q : ptrs_) dev_.Free(q);
  }

  // Fresh device copies of A, B, C (C's initial values) and the bias.
  GemmDesc Upload() {
    GemmDesc g;
    g.dtype = p_.dtype;
    g.math = p_.math;
    g.trans_a = p_.trans_a;
    g.trans_b = p_.trans_b;
    g.m = p_.m;
    g.n = p_.n;
    g.k = p_.k;
    g.a = Put(a_);
    g.b = Put(b_);
    g.c = Put(c_);
    g.lda = lda_;
    g.ldb = ldb_;
    g.ldc = ldc_;
    g.stride_a = sa_;
    g.stride_b = sb_;
    g.stride_c = sc_;
    g.batch = p_.batch;
    g.alpha = p_.alpha;
    g.beta = p_.beta;
    g.bias = p_.bias ? Put(bias_) : nullptr;
    g.epilogue = p_.epilogue;
    return g;
  }

  // C as f32.
  std::vector<float> Download(const GemmDesc& g) {
    const size_t n = c_.size();
    std::vector<float> out(n);
    if (p_.dtype == DType::kF32) {
      EXPECT_TRUE(dev_.CopyAsync(out.data(), g.c, n * 4, nullptr).ok());
    } else {
      std::vector<uint16_t> h(n);
      EXPECT_TRUE(dev_.CopyAsync(h.data(), g.c, n * 2, nullptr).ok());
      for (size_t i = 0; i < n; ++i) {
        out[i] = p_.dtype == DType::kF16 ? grove_k::f16_to_f32(h[i]) : grove_k::bf16_to_f32(h[i]);
      }
    }
    EXPECT_TRUE(dev_.Synchronize(nullptr).ok());
    return out;
  }

  // C by a double-precision loop (the math mode's input rounding aside).
  std::vector<double> Reference() const {
    std::vector<double> out(c_.begin(), c_.end());
    for (int64_t bi = 0; bi < p_.batch; ++bi) {
      for (int64_t i = 0; i < p_.m; ++i) {
        for (int64_t j = 0; j < p_.n; ++j) {
          double acc = 0;
          for (int64_t q = 0; q < p_.k; ++q) {
            const double av = a_[bi * sa_ + (p_.trans_a ? q * lda_ + i : i * lda_ + q)];
            const double bv = b_[bi * sb_ + (p_.trans_b ? j * ldb_ + q : q * ldb_ + j)];
            acc += av * bv;
          }
          double v = p_.alpha * acc;
          const int64_t at = bi * sc_ + i * ldc_ + j;
          if (p_.beta != 0) v += p_.beta * c_[at];
          if (p_.bias) v += bias_[j];
          if (p_.epilogue == GemmDesc::Epilogue::kRelu) v = v > 0 ? v : 0;
          if (p_.epilogue == GemmDesc::Epilogue::kGelu) v = 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0)));
          out[at] = v;
        }
      }
    }
    return out;
  }

 private:
  void* Put(const std::vector<float>& v) {
    const size_t item = p_.dtype == DType::kF32 ? 4 : 2;
    void* q = dev_.Allocate(v.size() * item).value();
    ptrs_.push_back(q);
    if (p_.dtype == DType::kF32) {
      EXPECT_TRUE(dev_.CopyAsync(q, v.data(), v.size() * 4, nullptr).ok());
    } else {
      std::vector<uint16_t> h(v.size());
      for (size_t i = 0; i < v.size(); ++i) {
        h[i] = p_.dtype == DType::kF16 ? grove_k::f32_to_f16(v[i]) : grove_k::f32_to_bf16(v[i]);
      }
      EXPECT_TRUE(dev_.CopyAsync(q, h.data(), h.size() * 2, nullptr).ok());
    }
    return q;
  }

  cuda::Device& dev_;
  Problem p_;
  int64_t lda_ = 0, ldb_ = 0, ldc_ = 0, sa_ = 0, sb_ = 0, sc_ = 0;
  std::vector<float> a_, b_, c_, bias_;
  std::vector<void*> ptrs_;
};

// The tiled kernel's C equals the device GEMM's bit for bit (the emulated
// device's reference GEMM sums in the same order) and the double reference
// within the dtype's tolerance.
void ExpectTiledMatches(cuda::Device& dev, const Problem& p, const jit::KernelConfig* config = nullptr) {
  SCOPED_TRACE(Describe(p) + (config != nullptr ? " " + config->Name() : std::string(" generic")));
  Operands ops(dev, p, static_cast<uint32_t>(p.m * 1000 + p.n * 10 + p.k));
  cuda::ExecContext ec(dev, nullptr);
  ec.set_gemm_math(p.math);
  const GemmDesc tiled = ops.Upload();
  const absl::Status run =
      config != nullptr ? cuda::RunTiledGemm(ec, tiled, *config) : cuda::RunTiledGemm(ec, tiled);
  ASSERT_TRUE(run.ok()) << run;
  const GemmDesc vendor = ops.Upload();
  ASSERT_TRUE(ec.Gemm(vendor).ok());
  const std::vector<float> got = ops.Download(tiled), want = ops.Download(vendor);
  ASSERT_EQ(got.size(), want.size());
  EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0) << "differs from Device::Gemm";
  if (p.math != GemmDesc::Math::kF32) return;  // rounded inputs: the bit comparison covers it
  const std::vector<double> ref = ops.Reference();
  const double tol = p.dtype == DType::kF32 ? 1e-4 : (p.dtype == DType::kF16 ? 1e-2 : 8e-2);
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_NEAR(got[i], ref[i], tol * (1 + std::fabs(ref[i])) + 2e-5 * p.k) << "at " << i;
  }
}

class TiledGemmTest : public ::testing::Test {
 protected:
  std::shared_ptr<cuda::Device> dev_ = cuda::NewEmulatedDevice();
};

TEST_F(TiledGemmTest, EveryTransposeAndOddSizes) {
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      for (const auto& mnk : std::vector<std::vector<int64_t>>{
               {1, 1, 1}, {3, 5, 7}, {32, 32, 16}, {33, 31, 17}, {40, 70, 50}, {1, 64, 33}, {65, 3, 1}}) {
        Problem p;
        p.m = mnk[0];
        p.n = mnk[1];
        p.k = mnk[2];
        p.trans_a = ta;
        p.trans_b = tb;
        ExpectTiledMatches(*dev_, p);
      }
    }
  }
}

TEST_F(TiledGemmTest, BatchesLeadingDimsAndEpilogues) {
  Problem p;
  p.m = 19;
  p.n = 37;
  p.k = 21;
  p.batch = 3;
  p.pad = 5;
  ExpectTiledMatches(*dev_, p);
  p.broadcast_b = true;
  p.trans_b = true;
  ExpectTiledMatches(*dev_, p);
  p.alpha = 0.75f;
  p.beta = 0.5f;
  p.bias = true;
  ExpectTiledMatches(*dev_, p);
  for (GemmDesc::Epilogue e : {GemmDesc::Epilogue::kRelu, GemmDesc::Epilogue::kGelu}) {
    p.epilogue = e;
    ExpectTiledMatches(*dev_, p);
  }
}

TEST_F(TiledGemmTest, MathModesAndHalves) {
  Problem p;
  p.m = 9;
  p.n = 34;
  p.k = 40;
  p.batch = 2;
  p.bias = true;
  p.beta = 1.0f;
  for (GemmDesc::Math math : {GemmDesc::Math::kTF32, GemmDesc::Math::kBF16, GemmDesc::Math::kF16}) {
    p.math = math;
    ExpectTiledMatches(*dev_, p);
  }
  p.math = GemmDesc::Math::kF32;
  for (DType t : {DType::kF16, DType::kBF16}) {
    p.dtype = t;
    ExpectTiledMatches(*dev_, p);
    p.trans_a = true;
    ExpectTiledMatches(*dev_, p);
    p.trans_a = false;
  }
}

// Any grid computes the whole product (blocks loop grid-stride), so the
// grid of a bucket's bound serves its smaller shapes.
TEST_F(TiledGemmTest, AnyGridGivesTheSameResult) {
  Problem p;
  p.m = 45;
  p.n = 70;
  p.k = 19;
  p.batch = 2;
  Operands ops(*dev_, p, 5);
  cuda::ExecContext ec(*dev_, nullptr);
  const GemmDesc want = ops.Upload();
  ASSERT_TRUE(ec.Gemm(want).ok());
  const std::vector<float> ref = ops.Download(want);
  for (uint32_t blocks : {1u, 2u, 7u, 1000u}) {
    const GemmDesc g = ops.Upload();
    grove_k::GemmTiledParams q{};
    q.g = cuda::ProductParams(g);
    cuda::LaunchDims dims;
    dims.grid = {blocks, 1, 1};
    dims.block = {grove_k::kGemmTileThreads, 1, 1};
    ASSERT_TRUE(ec.Launch(jit::ModuleSpec{"gemm_tiled", {DType::kF32}}, "gemm_tiled", dims, q).ok());
    const std::vector<float> got = ops.Download(g);
    EXPECT_EQ(std::memcmp(got.data(), ref.data(), got.size() * sizeof(float)), 0) << blocks << " blocks";
  }
}

// What a bucket's graph needs: captured for the bound's product (N 48, K
// 40), refreshed with a smaller product over the same buffers (N 29, K 23:
// another shape of the bucket), the replay computes the smaller product.
// A Device::Gemm captured the same way refuses the refresh (the graph bakes
// its sizes): that is what pinned such segments to exact shapes.
TEST_F(TiledGemmTest, GraphOfTheBoundRefreshesForSmallerNAndK) {
  auto param = std::make_shared<cuda::ParamDevice>(cuda::NewEmulatedDevice());
  Problem bound;
  bound.m = 12;
  bound.n = 48;
  bound.k = 40;
  bound.batch = 2;
  bound.trans_b = true;
  Operands ops(*param, bound, 7);
  const GemmDesc g_bound = ops.Upload();
  cuda::ExecContext ec(*param, nullptr);
  // The smaller shape's product, in the bound's buffers: fewer columns and
  // a shorter K, the same leading dims and batch strides.
  GemmDesc small = g_bound;
  small.n = 29;
  small.k = 23;
  for (bool tiled : {true, false}) {
    SCOPED_TRACE(tiled ? "tiled" : "Device::Gemm");
    ASSERT_TRUE(param->BeginCapture(nullptr).ok());
    ASSERT_TRUE((tiled ? cuda::RunTiledGemm(ec, g_bound) : ec.Gemm(g_bound)).ok());
    absl::StatusOr<std::unique_ptr<cuda::DeviceGraph>> graph = param->EndCapture(nullptr);
    ASSERT_TRUE(graph.ok()) << graph.status();
    param->BeginRefresh(**graph, /*bucket=*/true);
    const absl::Status queued = tiled ? cuda::RunTiledGemm(ec, small) : ec.Gemm(small);
    const absl::Status refreshed = param->EndRefresh();
    EXPECT_EQ(queued.ok(), tiled) << queued;
    if (!tiled) {
      EXPECT_FALSE(refreshed.ok()) << "a baked GEMM took other sizes";
      continue;
    }
    ASSERT_TRUE(refreshed.ok()) << refreshed;
    // C (ldc 48) zeroed, the graph replayed: the small product's columns,
    // zeros past them.
    std::vector<float> zeros(static_cast<size_t>(g_bound.batch * g_bound.m * g_bound.ldc), 0.0f);
    ASSERT_TRUE(param->CopyAsync(g_bound.c, zeros.data(), zeros.size() * 4, nullptr).ok());
    ASSERT_TRUE(param->LaunchGraph(**graph, nullptr).ok());
    const std::vector<float> got = ops.Download(g_bound);
    // The same product run directly.
    ASSERT_TRUE(param->CopyAsync(g_bound.c, zeros.data(), zeros.size() * 4, nullptr).ok());
    ASSERT_TRUE(ec.Gemm(small).ok());
    const std::vector<float> want = ops.Download(g_bound);
    EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0);
    int64_t nonzero_past = 0;
    for (int64_t bi = 0; bi < g_bound.batch; ++bi) {
      for (int64_t i = 0; i < g_bound.m; ++i) {
        for (int64_t j = small.n; j < g_bound.ldc; ++j) nonzero_past += got[(bi * g_bound.m + i) * g_bound.ldc + j] != 0;
      }
    }
    EXPECT_EQ(nonzero_past, 0) << "the replay wrote the bound's columns";
  }
}

// GridFor shrinks a small launch's block to the warps it fills: in a
// bucket, the bound's launch (256 threads a block) refreshed for 100 items
// (128 threads) keeps its block and copies just those, since such a kernel
// gives each item to one thread. A launch that does not say so must keep
// its block.
TEST(BucketRefreshTest, AThreadPerItemLaunchKeepsItsCapturedBlock) {
  auto param = std::make_shared<cuda::ParamDevice>(cuda::NewEmulatedDevice());
  cuda::ExecContext ec(*param, nullptr);
  const int64_t bound = 300, small = 100;
  std::vector<float> src(bound), zeros(bound, 0.0f);
  for (int64_t i = 0; i < bound; ++i) src[i] = static_cast<float>(i + 1);
  void* s = param->Allocate(bound * 4).value();
  void* d = param->Allocate(bound * 4).value();
  ASSERT_TRUE(param->CopyAsync(s, src.data(), bound * 4, nullptr).ok());
  auto params = [&](int64_t n) {
    grove_k::ScaledCopyParams p{};
    p.src = s;
    p.dst = d;
    p.shape.rank = 1;
    p.shape.d[0] = n;
    p.src_strides.s[0] = 1;
    p.dst_strides.s[0] = 1;
    p.n = n;
    p.scale = 2.0f;
    return p;
  };
  const jit::ModuleSpec module{"conv", {DType::kF32}};
  for (bool any_block : {true, false}) {
    SCOPED_TRACE(any_block ? "GridFor" : "a fixed block");
    cuda::LaunchDims big = cuda::GridFor(bound), little = cuda::GridFor(small);
    ASSERT_NE(big.block, little.block);
    big.any_block = little.any_block = any_block;
    ASSERT_TRUE(param->BeginCapture(nullptr).ok());
    ASSERT_TRUE(ec.Launch(module, "scaled_copy", big, params(bound)).ok());
    absl::StatusOr<std::unique_ptr<cuda::DeviceGraph>> graph = param->EndCapture(nullptr);
    ASSERT_TRUE(graph.ok()) << graph.status();
    param->BeginRefresh(**graph, /*bucket=*/true);
    (void)ec.Launch(module, "scaled_copy", little, params(small));
    const absl::Status refreshed = param->EndRefresh();
    if (!any_block) {
      EXPECT_FALSE(refreshed.ok());
      continue;
    }
    ASSERT_TRUE(refreshed.ok()) << refreshed;
    ASSERT_TRUE(param->CopyAsync(d, zeros.data(), bound * 4, nullptr).ok());
    ASSERT_TRUE(param->LaunchGraph(**graph, nullptr).ok());
    std::vector<float> got(bound);
    ASSERT_TRUE(param->CopyAsync(got.data(), d, bound * 4, nullptr).ok());
    ASSERT_TRUE(param->Synchronize(nullptr).ok());
    for (int64_t i = 0; i < bound; ++i) ASSERT_EQ(got[i], i < small ? 2.0f * src[i] : 0.0f) << "at " << i;
  }
  param->Free(s);
  param->Free(d);
}

// A device-to-device copy in a graph is a kernel (copy_bytes) whose
// pointers and size are parameters: refreshed to another offset, and in a
// bucket to fewer bytes, the replay copies there. A copy from host memory
// is baked: a refresh with another source is refused.
TEST(BucketRefreshTest, DeviceCopiesMoveWithARefreshHostCopiesDoNot) {
  auto param = std::make_shared<cuda::ParamDevice>(cuda::NewEmulatedDevice());
  constexpr int64_t kBytes = 1000;
  std::vector<uint8_t> src(kBytes);
  for (int64_t i = 0; i < kBytes; ++i) src[i] = static_cast<uint8_t>(i * 7 + 1);
  uint8_t* s = static_cast<uint8_t*>(param->Allocate(kBytes).value());
  uint8_t* d = static_cast<uint8_t*>(param->Allocate(kBytes).value());
  ASSERT_TRUE(param->CopyAsync(s, src.data(), kBytes, nullptr).ok());
  const std::vector<uint8_t> zeros(kBytes, 0);
  struct Move {
    int64_t from, to, bytes;
    bool bucket;
  };
  for (const Move& m : {Move{24, 40, 600, false}, Move{3, 5, 333, true}}) {
    SCOPED_TRACE(m.bucket ? "bucket: fewer bytes, odd offsets" : "moved buffers");
    ASSERT_TRUE(param->BeginCapture(nullptr).ok());
    ASSERT_TRUE(param->CopyAsync(d, s, 600, nullptr).ok());
    absl::StatusOr<std::unique_ptr<cuda::DeviceGraph>> graph = param->EndCapture(nullptr);
    ASSERT_TRUE(graph.ok()) << graph.status();
    param->BeginRefresh(**graph, m.bucket);
    ASSERT_TRUE(param->CopyAsync(d + m.to, s + m.from, m.bytes, nullptr).ok());
    ASSERT_TRUE(param->EndRefresh().ok());
    ASSERT_TRUE(param->CopyAsync(d, zeros.data(), kBytes, nullptr).ok());
    ASSERT_TRUE(param->LaunchGraph(**graph, nullptr).ok());
    std::vector<uint8_t> got(kBytes);
    ASSERT_TRUE(param->CopyAsync(got.data(), d, kBytes, nullptr).ok());
    ASSERT_TRUE(param->Synchronize(nullptr).ok());
    for (int64_t i = 0; i < kBytes; ++i) {
      const bool in = i >= m.to && i < m.to + m.bytes;
      ASSERT_EQ(got[i], in ? src[i - m.to + m.from] : 0) << "at " << i;
    }
  }
  std::vector<uint8_t> other(src);
  ASSERT_TRUE(param->BeginCapture(nullptr).ok());
  ASSERT_TRUE(param->CopyAsync(d, src.data(), 100, nullptr).ok());
  absl::StatusOr<std::unique_ptr<cuda::DeviceGraph>> graph = param->EndCapture(nullptr);
  ASSERT_TRUE(graph.ok()) << graph.status();
  param->BeginRefresh(**graph, /*bucket=*/true);
  EXPECT_FALSE(param->CopyAsync(d, other.data(), 100, nullptr).ok());
  EXPECT_FALSE(param->EndRefresh().ok());
  param->Free(s);
  param->Free(d);
}

// Only plans that serve a bucket take the tiled kernel, and there only for
// products whose N or K may vary.
TEST(TiledGemmChoiceTest, OnlyBucketedProductsWhoseNOrKMayVary) {
  std::shared_ptr<cuda::Device> dev = cuda::NewEmulatedDevice();
  cuda::ExecContext ec(*dev, nullptr);
  GemmDesc g;
  g.m = 8;
  g.n = 4;
  g.k = 4;
  EXPECT_FALSE(cuda::UseTiledGemm(ec, g, /*b_is_weight=*/false)) << "an exact plan keeps the device GEMM";
  ec.set_bucket_plan(true);
  EXPECT_FALSE(cuda::UseTiledGemm(ec, g, /*b_is_weight=*/true)) << "only M varies: the bound's GEMM serves";
  EXPECT_TRUE(cuda::UseTiledGemm(ec, g, /*b_is_weight=*/false)) << "B computed: its K or N may vary";
  g.trans_a = true;
  EXPECT_TRUE(cuda::UseTiledGemm(ec, g, /*b_is_weight=*/true)) << "A transposed: its rows are not C's";
  g.trans_a = false;
  g.batch = 3;
  EXPECT_TRUE(cuda::UseTiledGemm(ec, g, /*b_is_weight=*/true)) << "batches: the strides follow the rows";
}


// ---------------------------------------------------------------------------
// The "gemm_tiled" family (jit/kernel_config.h): its variants, cost terms
// and the dispatcher's choice.
// ---------------------------------------------------------------------------

const jit::KernelFamily& TiledFamily() {
  const jit::KernelFamily* f = jit::FindKernelFamily("gemm_tiled");
  EXPECT_NE(f, nullptr);
  return *f;
}

jit::KernelConfig Tiled(int rm, int rn, int tk, int tm, int tn, DType t = DType::kF32) {
  return jit::KernelConfig{
      "gemm_tiled",
      {t},
      {{"rm", rm}, {"rn", rn}, {"threads", (tm / rm) * (tn / rn)}, {"tk", tk}, {"tm", tm}, {"tn", tn}}};
}

// A product of one matrix, neither operand transposed.
jit::KernelProblem Product(int64_t m, int64_t n, int64_t k, DType t = DType::kF32) {
  GemmDesc g;
  g.dtype = t;
  g.m = m;
  g.n = n;
  g.k = k;
  return cuda::TiledGemmProblem(g);
}

bool FullRun() {
  const char* v = std::getenv("GROVE_VARIANTS_FULL");
  return v != nullptr && std::string(v) == "1";
}

// Odd sizes (1, 7, 33, 65: below, inside and one past the tiles) in every
// transpose, then a batch with wide leading dims, a shared B, alpha, beta,
// bias and each epilogue, and (f32) the fast math modes.
void RunVariant(cuda::Device& dev, const jit::KernelConfig& c, bool every_size) {
  std::vector<std::vector<int64_t>> sizes = {{1, 1, 1}, {7, 33, 65}, {65, 7, 33}, {33, 65, 7}};
  if (every_size) {
    for (int64_t m : {1, 7, 33, 65}) {
      for (int64_t n : {1, 7, 33, 65}) {
        for (int64_t k : {1, 7, 33, 65}) sizes.push_back({m, n, k});
      }
    }
  }
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      for (const std::vector<int64_t>& mnk : sizes) {
        Problem p;
        p.dtype = c.dtypes[0];
        p.m = mnk[0];
        p.n = mnk[1];
        p.k = mnk[2];
        p.trans_a = ta;
        p.trans_b = tb;
        ExpectTiledMatches(dev, p, &c);
        if (::testing::Test::HasFatalFailure()) return;
      }
    }
  }
  Problem p;
  p.dtype = c.dtypes[0];
  p.m = 33;
  p.n = 7;
  p.k = 65;
  p.batch = 3;
  p.pad = 3;
  p.broadcast_b = true;
  p.alpha = 0.75f;
  p.beta = 0.5f;
  p.bias = true;
  for (GemmDesc::Epilogue e : {GemmDesc::Epilogue::kNone, GemmDesc::Epilogue::kRelu, GemmDesc::Epilogue::kGelu}) {
    p.epilogue = e;
    ExpectTiledMatches(dev, p, &c);
  }
  if (p.dtype != DType::kF32) return;
  p.epilogue = GemmDesc::Epilogue::kNone;
  for (GemmDesc::Math math : {GemmDesc::Math::kTF32, GemmDesc::Math::kBF16, GemmDesc::Math::kF16}) {
    p.math = math;
    ExpectTiledMatches(dev, p, &c);
  }
}

// Every variant is the device GEMM bit for bit and the double loop within
// tolerance (ExpectTiledMatches). The default suite: every third f32
// variant and the last, and a few of each half type.
TEST(TiledGemmVariantsTest, SampleOfTheSpaceOnTheEmulatedDevice) {
  std::shared_ptr<cuda::Device> dev = cuda::NewEmulatedDevice();
  const jit::KernelFamily& f = TiledFamily();
  for (DType t : {DType::kF32, DType::kF16, DType::kBF16}) {
    const std::vector<jit::KernelConfig> all = f.Enumerate({t});
    ASSERT_GT(all.size(), 40u);
    const size_t stride = t == DType::kF32 ? 3 : 17;
    for (size_t i = 0; i < all.size(); i += stride) {
      RunVariant(*dev, all[i], false);
      if (HasFatalFailure()) return;
    }
    RunVariant(*dev, all.back(), false);
  }
}

TEST(KernelVariantsFull, EveryTiledGemmVariantOnTheEmulatedDevice) {
  if (!FullRun()) GTEST_SKIP() << "the full variant space runs with GROVE_VARIANTS_FULL=1 (ctest -L variants_full)";
  std::shared_ptr<cuda::Device> dev = cuda::NewEmulatedDevice();
  const jit::KernelFamily& f = TiledFamily();
  for (const std::vector<DType>& dtypes : f.dtype_lists()) {
    for (const jit::KernelConfig& c : f.Enumerate(dtypes)) {
      RunVariant(*dev, c, true);
      if (HasFatalFailure()) return;
    }
  }
}

// The space: threads = (tm / rm) * (tn / rn), 64 to 256; the generic
// variant is the kernel before variants (32 x 32, K 16, 4 x 4, 64 threads);
// a config that is not the family's or not of the product's dtype is
// refused with a message.
TEST(TiledGemmVariantsTest, SpaceGenericAndRefusals) {
  const jit::KernelFamily& f = TiledFamily();
  for (const jit::KernelConfig& c : f.Enumerate({DType::kF32})) {
    const int threads = (c.Get("tm", 0) / c.Get("rm", 1)) * (c.Get("tn", 0) / c.Get("rn", 1));
    EXPECT_EQ(c.Get("threads", 0), threads) << c.Name();
    EXPECT_GE(threads, 64);
    EXPECT_LE(threads, 256);
  }
  EXPECT_EQ(f.Enumerate({DType::kF32}).size(), 52u);
  const jit::KernelProblem p = Product(3, 4, 5, DType::kF16);
  EXPECT_EQ(f.Generic(p).Name(), "gemm_tiled__f16__rm4_rn4_threads64_tk16_tm32_tn32");
  EXPECT_EQ(cuda::LaunchOf(f.Generic(p), p).dims.block[0], static_cast<uint32_t>(grove_k::kGemmTileThreads));
  jit::KernelConfig wrong_threads = Tiled(4, 4, 16, 32, 32);
  wrong_threads.params[2].second = 128;
  EXPECT_FALSE(f.InSpace(wrong_threads));
  EXPECT_FALSE(jit::KernelConfig::Parse("gemm_tiled__f32__rm4_rn4_threads16_tk16_tm16_tn16").ok());
  std::shared_ptr<cuda::Device> dev = cuda::NewEmulatedDevice();
  Problem q;
  Operands ops(*dev, q, 1);
  cuda::ExecContext ec(*dev, nullptr);
  const absl::Status wrong = cuda::RunTiledGemm(ec, ops.Upload(), Tiled(4, 4, 16, 32, 32, DType::kF16));
  EXPECT_EQ(wrong.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(wrong.message()).find("not a gemm_tiled variant for a f32 product"), std::string::npos)
      << wrong.message();
}

// The cost terms by hand on an H100 (132 SMs, 2048 threads, 64K registers
// and 228 KiB shared memory an SM, 4800 GB/s, 67 f32 TFLOPS, 2.5 us a
// launch). M 33, N 70, K 20 on the generic 32 x 32 tiles, K steps of 16:
// 2 x 3 tiles of 64 x 96 x 32 padded.
TEST(TiledGemmCostTest, TermsByHand) {
  const jit::GpuTraits h100 = jit::GpuTraits::FromArch(90);
  const jit::KernelFamily& f = TiledFamily();
  const jit::KernelProblem p = Product(33, 70, 20);
  const jit::KernelConfig g = Tiled(4, 4, 16, 32, 32);
  const jit::CostTerms t = f.Cost(g, p, h100);
  EXPECT_DOUBLE_EQ(t.waste, 1 - 33.0 * 70 * 20 / (64.0 * 96 * 32));
  EXPECT_EQ(f.Launch(g, p).blocks, 6);
  // 6 blocks of 64 threads resident (48 registers a thread allow 21 a SM).
  EXPECT_DOUBLE_EQ(t.occupancy, 6.0 * 64 / (132 * 2048));
  // A read once per column of tiles (3), B once per row of tiles (2), C written.
  EXPECT_DOUBLE_EQ(t.bytes, 4.0 * (33 * 20 * 3 + 20 * 70 * 2 + 33 * 70));
  EXPECT_DOUBLE_EQ(t.flops, 2.0 * 33 * 70 * 20);
  // Memory-bound: 28360 B at 4800 GB/s over 2 * occupancy * (1 - waste).
  const double eff = 2 * t.occupancy * (33.0 * 70 * 20 / (64.0 * 96 * 32));
  EXPECT_NEAR(t.estimate_us, 2.5 + 28360 / 4.8e6 / eff, 1e-9);
  // Multiply-adds issue at rm rn / (rm rn + rm + rn) of a thread's
  // instructions. A 4096^3 product is compute-bound: on 64 x 64 tiles with
  // 4 x 4 patches (16 of 24), 4096 blocks of 256 threads, 5 resident an SM
  // (48 registers a thread): occupancy 0.625, efficiency 1; on 32 x 32 tiles
  // with 2 x 2 patches (4 of 8; 32 registers, 8 blocks an SM) 4/3 the time,
  // though they read A and B twice as often (3593 us of memory, under
  // their 4103 us of arithmetic).
  const jit::KernelProblem big = Product(4096, 4096, 4096);
  const jit::CostTerms four = f.Cost(Tiled(4, 4, 16, 64, 64), big, h100);
  const jit::CostTerms two = f.Cost(Tiled(2, 2, 16, 32, 32), big, h100);
  EXPECT_DOUBLE_EQ(four.waste, 0);
  EXPECT_DOUBLE_EQ(four.occupancy, 0.625);
  EXPECT_DOUBLE_EQ(two.occupancy, 1);
  EXPECT_DOUBLE_EQ(two.bytes, 4.0 * 4096 * 4096 * 257);
  EXPECT_NEAR(four.estimate_us, 2.5 + 2.0 * 4096 * 4096 * 4096 * 1.5 / 67e6, 1e-6);
  EXPECT_NEAR(two.estimate_us - 2.5, (four.estimate_us - 2.5) * 4 / 3, 1e-6);
}

// The cost model's picks: a 1 x 1 x 1 product takes the smallest tile and
// K step (least padding) with the most threads that tile allows (64: 2 x 2
// patches), eff = 2 * threads / (132 * 2048) / (tm tn tk); a large product
// the biggest tiles with 4 x 4 patches (most multiply-adds an instruction,
// fewest re-reads) once it has enough tiles to fill the GPU.
TEST(TiledGemmCostTest, PicksByHand) {
  const jit::GpuTraits h100 = jit::GpuTraits::FromArch(90);
  const jit::KernelFamily& f = TiledFamily();
  const jit::KernelProblem one = Product(1, 1, 1);
  EXPECT_EQ(jit::BestVariant(f, one, h100).config.Name(),
            "gemm_tiled__f32__rm2_rn2_threads64_tk8_tm16_tn16");
  // 4096^3 (TermsByHand): compute-bound at efficiency 1 with 4 x 4 patches
  // on 64 x 64 tiles (256 threads) and on 32 x 64 tiles (128 threads, 10
  // blocks an SM: occupancy 0.625 too, 2699 us of memory under 3077 of
  // arithmetic), with K steps of 8 or 16: equal estimates, waste and
  // occupancy, so the smaller config (fewer threads, then K step 8) wins.
  const jit::KernelProblem big = Product(4096, 4096, 4096);
  EXPECT_EQ(jit::BestVariant(f, big, h100).config.Name(),
            "gemm_tiled__f32__rm4_rn4_threads128_tk8_tm32_tn64");
}

// The dispatcher: a table entry for the product's bucket (sm_90) wins; a
// product of another bucket, or the same on sm_80, gets the cost model's
// first.
TEST(TiledGemmChoiceTest, TheTablesEntryOnAHitTheCostModelsOnAMiss) {
  GemmDesc g;
  g.m = 33;
  g.n = 70;
  g.k = 20;
  const jit::KernelProblem p = cuda::TiledGemmProblem(g);
  EXPECT_EQ(p.ToString(), "batch=1,k=20,m=33,n=70,transa=0,transb=0");
  auto table = std::make_shared<jit::DispatchTable>();
  jit::DispatchEntry e;
  e.arch = 90;
  e.config = Tiled(2, 4, 8, 16, 64);
  e.bucket = jit::ShapeBucket(p);
  e.problem = p;
  e.measured_us = 3.25;
  ASSERT_TRUE(table->Add(e).ok());
  table->set_provenance(testing::TestProvenance());
  const cuda::KernelDispatch sm90(jit::GpuTraits::FromArch(90), {table});
  const cuda::KernelChoice hit = sm90.Choose(p);
  EXPECT_EQ(hit.source, cuda::ChoiceSource::kTable);
  EXPECT_EQ(hit.config, e.config);
  EXPECT_EQ(hit.measured_us, 3.25);
  GemmDesc other = g;
  other.m = 200;  // bucket m=256
  const jit::KernelProblem q = cuda::TiledGemmProblem(other);
  const cuda::KernelChoice miss = sm90.Choose(q);
  EXPECT_EQ(miss.source, cuda::ChoiceSource::kCostModel);
  EXPECT_EQ(miss.config, jit::RankVariants(TiledFamily(), q, jit::GpuTraits::FromArch(90), 1).at(0).config);
  const cuda::KernelDispatch sm80(jit::GpuTraits::FromArch(80), {table});
  const cuda::KernelChoice arch = sm80.Choose(p);
  EXPECT_EQ(arch.source, cuda::ChoiceSource::kCostModel);
  EXPECT_EQ(arch.config, jit::BestVariant(TiledFamily(), p, jit::GpuTraits::FromArch(80)).config);
}

// Through a session (default buckets: powers of two to 256): x [n, 16]
// times its transpose (N = n), then that times x (K = n). Each bucket's
// bound chooses its variants (the problems recorded are the bounds': n 8
// and n 32, never 5, 6 or 20) and its shapes keep them, so one graph
// serves each bucket; every result is the CPU's.
TEST(TiledGemmChoiceTest, EachBucketsBoundChoosesAndItsShapesKeepTheChoice) {
  ModelBuilder b;
  b.AddSymbol("n", 1, 64);
  b.AddInput("x", DType::kF32, {"n", 16});
  b.AddOp("Transpose", {"x"}, {"xt"}, {{"perm", std::vector<int64_t>{1, 0}}});
  b.AddOp("MatMul", {"x", "xt"}, {"g"});
  b.AddOp("Relu", {"g"}, {"r"});
  b.AddOp("MatMul", {"r", "x"}, {"y"});
  b.AddOutput("y");
  std::shared_ptr<const Model> model = testing::LoadOrDie(b.Finish());
  SessionOptions cpu_options;
  cpu_options.device = Device::kCpu;
  std::unique_ptr<Session> cpu = Session::Create(model, cpu_options).value();
  absl::StatusOr<std::unique_ptr<runtime::Backend>> backend =
      cuda::CreateCudaBackend(testing::TestDevice(), {});
  ASSERT_TRUE(backend.ok()) << backend.status();
  cuda::KernelDispatch* dispatch = cuda::DispatchOf(**backend);
  ASSERT_NE(dispatch, nullptr);
  absl::StatusOr<std::unique_ptr<Session>> cuda = internal::CreateSessionWithBackend(model, {}, *std::move(backend));
  ASSERT_TRUE(cuda.ok()) << cuda.status();
  uint32_t seed = 70;
  for (int64_t n : {5, 6, 20, 7, 32, 17}) {
    Tensor x = Tensor::Create(DType::kF32, {n, 16}).value();
    const std::vector<float> v = testing::RandomF32(static_cast<size_t>(n * 16), ++seed);
    std::copy(v.begin(), v.end(), x.as<float>());
    const std::vector<TensorView> in = {x.view()};
    absl::StatusOr<std::vector<TensorView>> want = cpu->Run(in);
    ASSERT_TRUE(want.ok()) << want.status();
    const Tensor w = Tensor::CopyOf((*want)[0]).value();
    absl::StatusOr<std::vector<TensorView>> got = (*cuda)->Run(in);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(testing::CompareTensors(w, Tensor::CopyOf((*got)[0]).value(), 1e-4), "") << "n " << n;
  }
  std::vector<std::string> tiled;
  for (const jit::KernelProblem& p : dispatch->problems()) {
    if (p.family == "gemm_tiled") tiled.push_back(p.ToString());
  }
  EXPECT_EQ(tiled, (std::vector<std::string>{"batch=1,k=16,m=8,n=8,transa=0,transb=0",
                                             "batch=1,k=8,m=8,n=16,transa=0,transb=0",
                                             "batch=1,k=16,m=32,n=32,transa=0,transb=0",
                                             "batch=1,k=32,m=32,n=16,transa=0,transb=0"}));
  const SessionStats s = (*cuda)->stats();
  EXPECT_EQ(s.buckets_made, 2);
  EXPECT_EQ(s.bucket_fallback_reason, "");
  EXPECT_EQ(s.graphs_captured, 2);
}

// Equal estimates (jit/cost_model.h's tie-breaks) on the family: a product
// whose every variant is launch-bound ties nowhere exactly, but two
// variants whose terms are all equal rank by their parameters.
TEST(TiledGemmCostTest, TwoVariantsWithEqualTermsRankByTheSmallerConfig) {
  // M = N: the transposed tile (tm <-> tn, rm <-> rn) has the same waste,
  // occupancy, bytes and estimate.
  const jit::GpuTraits h100 = jit::GpuTraits::FromArch(90);
  const jit::KernelFamily& f = TiledFamily();
  const jit::KernelProblem p = Product(48, 48, 64);
  const jit::KernelConfig a = Tiled(2, 4, 16, 16, 64), b = Tiled(4, 2, 16, 64, 16);
  EXPECT_DOUBLE_EQ(f.Cost(a, p, h100).estimate_us, f.Cost(b, p, h100).estimate_us);
  std::vector<std::string> order;
  for (const jit::RankedVariant& r : jit::RankVariants(f, p, h100)) {
    if (r.config == a || r.config == b) order.push_back(r.config.Name());
  }
  EXPECT_EQ(order, (std::vector<std::string>{a.Name(), b.Name()}));  // rm 2 before rm 4
}


// NVRTC (no GPU needed) compiles the family's corners for sm_90: the
// smallest and largest tiles, the generic one, asymmetric patches, each
// dtype; each cubin defines the variant's entry. The full run compiles
// every variant for sm_80 and sm_90 (kernel_variants_test.cc).
TEST(TiledGemmVariantsTest, NvrtcCompilesVariantsForSm90) {
  if (jit::NvrtcVersion() <= 0) GTEST_SKIP() << "NVRTC is not available";
  const std::vector<jit::KernelConfig> configs = {
      Tiled(2, 2, 8, 16, 16), Tiled(4, 4, 16, 64, 64), Tiled(4, 4, 16, 32, 32, DType::kF16),
      Tiled(2, 4, 16, 32, 64, DType::kBF16), Tiled(4, 2, 8, 64, 16)};
  for (const jit::KernelConfig& c : configs) {
    SCOPED_TRACE(c.Name());
    ASSERT_TRUE(TiledFamily().InSpace(c));
    const jit::ModuleSpec m = jit::ConfigModule(c);
    absl::StatusOr<std::string> source = jit::ModuleSource(m);
    ASSERT_TRUE(source.ok()) << source.status();
    absl::StatusOr<jit::CompileResult> compiled = jit::CompileModuleSource(*source, 90);
    ASSERT_TRUE(compiled.ok()) << compiled.status();
    absl::StatusOr<std::vector<std::string>> entries = jit::CubinEntryPoints(compiled->cubin);
    ASSERT_TRUE(entries.ok()) << entries.status();
    EXPECT_EQ(*entries, std::vector<std::string>{jit::EntryName("gemm_tiled", m)});
  }
}

}  // namespace
}  // namespace grove
