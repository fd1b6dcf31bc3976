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
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "jit/kernels/conv_params.h"
#include "jit/kernels/gemm_tiled_params.h"
#include "jit/kernels/prelude.cuh"
#include "lib/backends/cuda/device.h"
#include "lib/backends/cuda/emulated_device.h"
#include "lib/backends/cuda/exec_context.h"
#include "lib/backends/cuda/launch_util.h"
#include "lib/backends/cuda/param_device.h"
#include "lib/backends/cuda/tiled_gemm.h"

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
void ExpectTiledMatches(cuda::Device& dev, const Problem& p) {
  SCOPED_TRACE(Describe(p));
  Operands ops(dev, p, static_cast<uint32_t>(p.m * 1000 + p.n * 10 + p.k));
  cuda::ExecContext ec(dev, nullptr);
  ec.set_gemm_math(p.math);
  const GemmDesc tiled = ops.Upload();
  ASSERT_TRUE(cuda::RunTiledGemm(ec, tiled).ok());
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

}  // namespace
}  // namespace grove
