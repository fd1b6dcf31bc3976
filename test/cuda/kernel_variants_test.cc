// Kernel variants as values (jit/kernel_config.h, issue 13 items 1, 5, 7):
// configs spell and parse their names, modules carry their parameters into
// names, sources and cache keys, every family's generic variant is today's
// geometry, the cost terms on hand-worked cases, and every variant of every
// family runs on the emulated device against a naive reference and
// compiles with NVRTC for sm_80 and sm_90.
//
// The default suite runs a sample across each space (every few configs, one
// or two dtypes); KernelVariantsFull.* runs every config of every dtype and
// skips unless GROVE_VARIANTS_FULL=1:
//   cd build && GROVE_VARIANTS_FULL=1 ctest -L variants_full
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "jit/emulation_launch.h"
#include "jit/kernel_cache.h"
#include "jit/cost_model.h"
#include "jit/kernel_config.h"
#include "jit/kernels/attention_params.h"
#include "jit/kernels/cast_params.h"
#include "jit/kernels/copy_params.h"
#include "jit/kernels/elementwise_params.h"
#include "jit/kernels/gemv_params.h"
#include "jit/kernels/norm_params.h"
#include "jit/kernels/prelude.cuh"
#include "jit/kernels/reduce_params.h"
#include "jit/kernels/softmax_params.h"
#include "jit/module.h"
#include "lib/backends/cuda/emulated_device.h"
#include "lib/backends/cuda/launch_util.h"
#include "lib/backends/cuda/strided_copy.h"
#include "lib/backends/cuda/variant_launch.h"
#include "lib/ir/element_types.h"

namespace grove {
namespace {

using jit::KernelConfig;
using jit::KernelFamily;
using jit::KernelProblem;

bool FullRun() {
  const char* v = std::getenv("GROVE_VARIANTS_FULL");
  return v != nullptr && std::string(v) == "1";
}

// Every `stride`-th config of the space (and the last), or all of them.
std::vector<KernelConfig> Sample(const std::vector<KernelConfig>& all, size_t stride) {
  std::vector<KernelConfig> out;
  for (size_t i = 0; i < all.size(); i += stride) out.push_back(all[i]);
  if (!all.empty() && (all.size() - 1) % stride != 0) out.push_back(all.back());
  return out;
}

// ---------------------------------------------------------------------------
// Names and modules
// ---------------------------------------------------------------------------

TEST(KernelConfigTest, NameParseRoundTripsEveryConfigOfEveryFamily) {
  int n = 0;
  for (const KernelFamily* f : jit::KernelFamilies()) {
    for (const std::vector<DType>& dtypes : f->dtype_lists()) {
      for (const KernelConfig& c : f->Enumerate(dtypes)) {
        absl::StatusOr<KernelConfig> back = KernelConfig::Parse(c.Name());
        ASSERT_TRUE(back.ok()) << c.Name() << ": " << back.status();
        EXPECT_EQ(*back, c) << c.Name();
        ++n;
      }
    }
  }
  EXPECT_GT(n, 500);
  const KernelConfig c{"softmax", {DType::kF32}, {{"lanes", 32}, {"threads", 128}}};
  EXPECT_EQ(c.Name(), "softmax__f32__lanes32_threads128");
  EXPECT_EQ(c.Get("threads", 0), 128);
  EXPECT_EQ(c.Get("vec", 7), 7);
}

TEST(KernelConfigTest, ParseRefusesBadNamesWithAReason) {
  const std::pair<const char*, const char*> bad[] = {
      {"", "parts"},
      {"softmax", "parts"},
      {"softmax__f32__lanes1_threads64__x", "parts"},
      {"nosuch__f32", "unknown family"},
      {"softmax__f99__lanes1_threads64", "unknown dtype"},
      {"softmax____lanes1_threads64", "no dtypes"},
      {"softmax__f32__", "empty parameter"},
      {"softmax__f32__threads", "no value"},
      {"softmax__f32__64", "bad parameter"},
      {"softmax__f32__Lanes1_threads64", "bad parameter"},
      {"softmax__f32__threads64_lanes1", "not sorted"},
      {"softmax__f32__lanes1_lanes1", "not sorted"},
      {"softmax__f32__lanes1_threads100", "not in the variant space"},
      {"softmax__f32__lanes64_threads128", "not in the variant space"},  // neither thread, warp nor block
      {"softmax__i32__lanes1_threads64", "not in the variant space"},    // not a softmax dtype
      {"softmax__f32__lanes1", "not in the variant space"},              // threads missing
      {"softmax__f32__lanes1_threads99999999999", "no value"},
  };
  for (const auto& [name, why] : bad) {
    absl::StatusOr<KernelConfig> c = KernelConfig::Parse(name);
    ASSERT_FALSE(c.ok()) << name;
    EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument) << name;
    EXPECT_TRUE(absl::StrContains(c.status().message(), why)) << name << ": " << c.status();
  }
}

TEST(KernelConfigTest, ModulesSpellTheirParametersAndKeepTodaysNamesWithout) {
  const jit::ModuleSpec plain{"softmax", {DType::kF32}};
  EXPECT_EQ(jit::Suffix(plain), "__f32");
  EXPECT_EQ(jit::EntryName("softmax", plain), "softmax__f32");
  const KernelConfig c{"softmax", {DType::kF32}, {{"lanes", 32}, {"threads", 128}}};
  const jit::ModuleSpec m = jit::ConfigModule(c);
  EXPECT_EQ(m.file, "softmax");
  EXPECT_EQ(jit::EntryName("softmax", m), "softmax__f32__lanes32_threads128");
  EXPECT_FALSE(m == plain);
  EXPECT_NE(absl::HashOf(m), absl::HashOf(plain));
  absl::StatusOr<std::string> src = jit::ModuleSource(m);
  ASSERT_TRUE(src.ok()) << src.status();
  EXPECT_TRUE(absl::StrContains(*src, "#define GROVE_V_LANES 32\n")) << *src;
  EXPECT_TRUE(absl::StrContains(*src, "#define GROVE_V_THREADS 128\n")) << *src;
  EXPECT_TRUE(absl::StrContains(*src, "#define GROVE_SUFFIX __f32__lanes32_threads128\n")) << *src;
  absl::StatusOr<std::string> plain_src = jit::ModuleSource(plain);
  ASSERT_TRUE(plain_src.ok());
  EXPECT_FALSE(absl::StrContains(*plain_src, "GROVE_V_"));
  // The elementwise family's file is not its name.
  EXPECT_EQ(jit::ConfigModule(KernelConfig{"ew", {DType::kF16}, {{"ipt", 2}, {"threads", 256}}}).file, "elementwise");

  EXPECT_TRUE(jit::InManifest(m));
  EXPECT_TRUE(jit::InManifest(plain));
  jit::ModuleSpec off = m;
  off.params = {{"lanes", 32}, {"threads", 100}};
  EXPECT_FALSE(jit::InManifest(off));
  EXPECT_FALSE(jit::ModuleSource(off).ok());
  off.params = {{"vec", 4}};
  EXPECT_FALSE(jit::InManifest(off));
  jit::ModuleSpec wrong_type = m;
  wrong_type.types = {DType::kI32};  // softmax is f32/f64 only
  EXPECT_FALSE(jit::InManifest(wrong_type));

  // The cache key: a module without parameters keeps its material; a
  // variant's names them.
  jit::CacheOptions options;
  options.disk_dir = ::testing::TempDir() + "/kernel_variants_cache";
  jit::KernelCache cache(options);
  absl::StatusOr<std::string> km = cache.KeyMaterial(m, 90), kp = cache.KeyMaterial(plain, 90);
  ASSERT_TRUE(km.ok() && kp.ok());
  EXPECT_TRUE(absl::StrContains(*km, "params=lanes32_threads128\n")) << *km;
  EXPECT_FALSE(absl::StrContains(*kp, "params=")) << *kp;
  EXPECT_NE(cache.Key(m, 90).value(), cache.Key(plain, 90).value());
}

// kernels.cmake's variant lists equal the families' spaces: every config
// has its file's entries in the emulated library, and every variant entry
// there is a config in its family's space.
TEST(KernelConfigTest, EmulatedLibraryHasExactlyEveryVariant) {
  std::set<std::string> names;
  for (const std::string& n : emu::EntryNames()) names.insert(n);
  for (const KernelFamily* f : jit::KernelFamilies()) {
    for (const std::vector<DType>& dtypes : f->dtype_lists()) {
      const jit::ModuleSpec base{std::string(f->file()), dtypes};
      int base_entries = 0;
      for (const std::string& n : names) base_entries += absl::EndsWith(n, jit::Suffix(base)) && emu::EntryFile(n) == base.file;
      ASSERT_GT(base_entries, 0) << f->name();
      for (const KernelConfig& c : f->Enumerate(dtypes)) {
        const std::string suffix = jit::Suffix(jit::ConfigModule(c));
        int entries = 0;
        for (const std::string& n : names) entries += absl::EndsWith(n, suffix) && emu::EntryFile(n) == base.file;
        EXPECT_EQ(entries, base_entries) << c.Name();
      }
    }
  }
  for (const std::string& n : names) {
    // "reduce_sum__f32__lanes1_threads64": the part after the second "__".
    const size_t first = n.find("__");
    const size_t second = first == std::string::npos ? first : n.find("__", first + 2);
    if (second == std::string::npos) continue;
    const std::string file = emu::EntryFile(n);
    const KernelFamily* family = nullptr;
    for (const KernelFamily* f : jit::KernelFamilies()) {
      if (f->file() == file) family = f;
    }
    ASSERT_NE(family, nullptr) << n;
    const std::string spelled = absl::StrCat(family->name(), n.substr(first));
    absl::StatusOr<KernelConfig> c = KernelConfig::Parse(spelled);
    EXPECT_TRUE(c.ok()) << n << ": " << c.status();
  }
}

// ---------------------------------------------------------------------------
// Generic == today's geometry
// ---------------------------------------------------------------------------

TEST(KernelConfigTest, GenericVariantsAreTodaysGeometry) {
  for (const char* name : {"softmax", "norm", "reduce"}) {
    const KernelFamily* f = jit::FindKernelFamily(name);
    ASSERT_NE(f, nullptr);
    for (int64_t n : {0, 1, 7, 8, 9, 31, 32, 100, 511, 512, 513, 4096, 100000}) {
      for (int64_t rows : {1, 5, 8, 255, 256, 257, 70000, 100000000}) {
        for (int64_t inner : {1, 3}) {
          const KernelProblem p = cuda::RowProblem(name, DType::kF32, rows, n, inner);
          const KernelConfig g = f->Generic(p);
          EXPECT_TRUE(f->Valid(g, p)) << g.Name();
          const int mode = inner == 1 ? cuda::RowMode(n) : 0;
          EXPECT_EQ(cuda::RowModeOf(g), mode) << name << " n " << n;
          const cuda::LaunchDims want = cuda::RowGeometry(rows, mode);
          const cuda::LaunchDims got = cuda::LaunchOf(g, p).dims;
          EXPECT_EQ(got.grid, want.grid) << name << " n " << n << " rows " << rows;
          EXPECT_EQ(got.block, want.block) << name << " n " << n << " rows " << rows;
        }
      }
    }
  }
  const KernelFamily* ew = jit::FindKernelFamily("ew");
  ASSERT_NE(ew, nullptr);
  for (int64_t n : std::vector<int64_t>{1, 31, 256, 257, 1 << 20, int64_t{1} << 40}) {
    const KernelProblem p{"ew", {DType::kF16}, {{"inputs", 2}, {"n", n}, {"ops", 1}}};
    const cuda::LaunchDims want = cuda::Grid1D(n, 256);
    const cuda::LaunchDims got = cuda::LaunchOf(ew->Generic(p), p).dims;
    EXPECT_EQ(got.grid, want.grid) << n;
    EXPECT_EQ(got.block, want.block) << n;
    const KernelProblem cp{"cast", {DType::kF32, DType::kI8}, {{"n", n}}};
    const cuda::LaunchDims cast = cuda::LaunchOf(jit::FindKernelFamily("cast")->Generic(cp), cp).dims;
    EXPECT_EQ(cast.grid, want.grid) << n;
    EXPECT_EQ(cast.block, want.block) << n;
  }
}

// ---------------------------------------------------------------------------
// Cost terms, by hand
// ---------------------------------------------------------------------------

TEST(KernelConfigTest, GpuTraitsByArch) {
  EXPECT_EQ(jit::GpuTraits::FromArch(90).sms, 132);
  EXPECT_EQ(jit::GpuTraits::FromArch(80).sms, 108);
  EXPECT_EQ(jit::GpuTraits::FromArch(86).max_threads_per_sm, 1536);
  EXPECT_EQ(jit::GpuTraits::FromArch(89).sms, 142);
  // Unknown archs take the nearest lower known one's numbers.
  EXPECT_EQ(jit::GpuTraits::FromArch(87).sms, 72);
  EXPECT_EQ(jit::GpuTraits::FromArch(87).arch, 87);
  EXPECT_EQ(jit::GpuTraits::FromArch(100).sms, 132);
  EXPECT_EQ(jit::GpuTraits::FromArch(75).sms, 108);
}

TEST(KernelConfigTest, RowCostTermsByHand) {
  const jit::GpuTraits h100 = jit::GpuTraits::FromArch(90);  // 132 SMs x 2048 threads
  const KernelFamily* f = jit::FindKernelFamily("softmax");
  const KernelProblem one_row = cuda::RowProblem("softmax", DType::kF32, 1, 100, 1);
  // One row of 100 on a 1024-thread block: 1024 lane slots, 100 used.
  const KernelConfig block{"softmax", {DType::kF32}, {{"lanes", 1024}, {"threads", 1024}}};
  jit::CostTerms t = f->Cost(block, one_row, h100);
  EXPECT_DOUBLE_EQ(t.waste, 1 - 100.0 / 1024);
  EXPECT_DOUBLE_EQ(t.occupancy, 1024.0 / (132 * 2048));
  EXPECT_DOUBLE_EQ(t.bytes, 4 * 100 * 3);  // read twice... max and sum passes, then once more and write
  EXPECT_DOUBLE_EQ(t.flops, 500);
  // 2.5 us launch + (1200 B / 4800 GB/s) / (2 * occupancy * (1 - waste))
  //             = 2.5 + 0.00025 * 132 * 2048 / 200 = 2.83792
  EXPECT_NEAR(t.estimate_us, 2.83792, 1e-9);
  // A warp on the same row: 4 trips of 32 lanes (128 slots of 100) in a
  // block of 256 threads with 7 idle warps: 1024 slots again.
  const KernelConfig warp{"softmax", {DType::kF32}, {{"lanes", 32}, {"threads", 256}}};
  t = f->Cost(warp, one_row, h100);
  EXPECT_DOUBLE_EQ(t.waste, 1 - 100.0 / 1024);
  // 64 rows of 100, a warp each, 64-thread blocks: 32 blocks; each warp
  // runs 4 trips of 32 lanes: waste 1 - 100/128.
  const KernelConfig warp64{"softmax", {DType::kF32}, {{"lanes", 32}, {"threads", 64}}};
  const KernelProblem rows64 = cuda::RowProblem("softmax", DType::kF32, 64, 100, 1);
  t = f->Cost(warp64, rows64, h100);
  EXPECT_DOUBLE_EQ(t.waste, 1 - 100.0 / 128);
  EXPECT_EQ(f->Launch(warp64, rows64).blocks, 32);
  // Strided rows (inner 3) take a thread per column only.
  const KernelProblem strided = cuda::RowProblem("softmax", DType::kF32, 64, 100, 3);
  EXPECT_FALSE(f->Valid(warp64, strided));
  EXPECT_TRUE(f->Valid(KernelConfig{"softmax", {DType::kF32}, {{"lanes", 1}, {"threads", 64}}}, strided));
  EXPECT_FALSE(f->Valid(KernelConfig{"softmax", {DType::kF64}, {{"lanes", 1}, {"threads", 64}}}, strided));
}

TEST(KernelConfigTest, AttentionCostTermsByHand) {
  const jit::GpuTraits h100 = jit::GpuTraits::FromArch(90);
  const KernelFamily* f = jit::FindKernelFamily("attention");
  ASSERT_NE(f, nullptr);
  const KernelProblem p{"attention", {DType::kF32}, {{"d", 64}, {"dv", 64}, {"heads", 8}, {"sk", 256}, {"sq", 256}}};
  const KernelConfig big{"attention", {DType::kF32}, {{"bk", 64}, {"bq", 64}, {"hd", 64}, {"threads", 128}}};
  const KernelConfig small{"attention", {DType::kF32}, {{"bk", 64}, {"bq", 16}, {"hd", 64}, {"threads", 128}}};
  EXPECT_EQ(f->Generic(p), big);
  // 8 heads x 4 tiles of 64 rows; no padding (256 = 4 x 64 both ways).
  EXPECT_EQ(f->Launch(big, p).blocks, 32);
  EXPECT_EQ(f->Launch(big, p).threads, 128);
  jit::CostTerms t = f->Cost(big, p, h100);
  EXPECT_DOUBLE_EQ(t.waste, 0);
  // Q and O once, K and V once per query tile: 4 x 8 x (256 x 128 + 4 x 256 x 128).
  EXPECT_DOUBLE_EQ(t.bytes, 4.0 * 8 * (256.0 * 128 + 4.0 * 256 * 128));
  EXPECT_DOUBLE_EQ(t.flops, 2.0 * 8 * 256 * 256 * 128);
  // 168 registers x 128 threads: 3 blocks an SM (shared: 4 x (64 x 65 + 64 x 65)
  // bytes, 6 would fit); all 32 resident, of 132 x 2048 thread slots.
  EXPECT_DOUBLE_EQ(t.occupancy, 32.0 * 128 / (132 * 2048));
  // 16-row tiles: 4x the blocks, 4x the occupancy, K and V read 4x as often.
  const jit::CostTerms s16 = f->Cost(small, p, h100);
  EXPECT_EQ(f->Launch(small, p).blocks, 128);
  EXPECT_DOUBLE_EQ(s16.occupancy, 4 * t.occupancy);
  EXPECT_DOUBLE_EQ(s16.bytes, 4.0 * 8 * (256.0 * 128 + 16.0 * 256 * 128));
  // A head of 100: only hd 128 holds it, and it is the generic pick.
  const KernelProblem wide{"attention", {DType::kF32}, {{"d", 100}, {"dv", 100}, {"heads", 2}, {"sk", 40}, {"sq", 40}}};
  EXPECT_FALSE(f->Valid(big, wide));
  const KernelConfig g = f->Generic(wide);
  EXPECT_EQ(g.Get("hd", 0), 128);
  EXPECT_TRUE(f->Valid(g, wide));
  // 40 rows in 32-row tiles, 40 keys in 32-key tiles, V's 100 of 128 columns:
  // 1 - 40 x 40 x 200 / (64 x 64 x 228).
  EXPECT_DOUBLE_EQ(f->Cost(g, wide, h100).waste, 1 - 40.0 * 40 * 200 / (64.0 * 64 * 228));
  // Another dtype's config is not valid for an f32 problem.
  EXPECT_FALSE(f->Valid(KernelConfig{"attention", {DType::kF16}, big.params}, p));
}

TEST(KernelConfigTest, AttentionMmaCostTermsByHand) {
  const jit::GpuTraits h100 = jit::GpuTraits::FromArch(90), t4 = jit::GpuTraits::FromArch(75);
  const KernelFamily* f = jit::FindKernelFamily("attention_mma");
  const KernelFamily* cuda_cores = jit::FindKernelFamily("attention");
  ASSERT_NE(f, nullptr);
  ASSERT_NE(cuda_cores, nullptr);
  const KernelProblem p{"attention_mma", {DType::kF16}, {{"d", 64}, {"dv", 64}, {"heads", 8}, {"sk", 1024}, {"sq", 1024}}};
  const KernelConfig g = f->Generic(p);
  EXPECT_EQ(g, (KernelConfig{"attention_mma", {DType::kF16}, {{"bk", 64}, {"bq", 64}, {"hd", 64}, {"threads", 128}}}));
  // 8 heads x 16 tiles of 64 rows, 128 threads each.
  EXPECT_EQ(f->Launch(g, p).blocks, 128);
  EXPECT_EQ(f->Launch(g, p).threads, 128);
  const jit::CostTerms t = f->Cost(g, p, h100);
  EXPECT_DOUBLE_EQ(t.waste, 0);
  EXPECT_DOUBLE_EQ(t.flops, 2.0 * 8 * 1024 * 1024 * 128);
  // Q and O once, K and V once per query tile, 2 bytes each.
  EXPECT_DOUBLE_EQ(t.bytes, 2.0 * 8 * (1024.0 * 128 + 16.0 * 1024 * 128));
  // Partial tiles: 70 rows and 77 keys in 128 x 128, the k steps over all of hd.
  const KernelProblem odd{"attention_mma", {DType::kF16}, {{"d", 64}, {"dv", 40}, {"heads", 3}, {"sk", 77}, {"sq", 70}}};
  EXPECT_DOUBLE_EQ(f->Cost(g, odd, h100).waste, 1 - 70.0 * 77 * 104 / (128.0 * 128 * 128));
  // A head of 100 needs hd 128; over 128 none.
  const KernelProblem wide{"attention_mma", {DType::kBF16}, {{"d", 100}, {"dv", 64}, {"heads", 2}, {"sk", 40}, {"sq", 40}}};
  EXPECT_EQ(f->Generic(wide).Get("hd", 0), 128);
  EXPECT_TRUE(f->Valid(f->Generic(wide), wide));
  EXPECT_FALSE(f->Valid(g, wide));
  const KernelProblem huge{"attention_mma", {DType::kF16}, {{"d", 130}, {"dv", 64}, {"heads", 2}, {"sk", 40}, {"sq", 40}}};
  for (const KernelConfig& c : f->Enumerate({DType::kF16})) EXPECT_FALSE(f->Valid(c, huge)) << c.Name();
  // Against the CUDA-core tiled kernel's best variant for the same problem:
  // ahead on sm_90, never picked below sm_80 (no m16n8k16 there).
  const KernelProblem same{"attention", {DType::kF16}, p.dims};
  double best = 1e300;
  for (const KernelConfig& c : cuda_cores->Enumerate({DType::kF16})) {
    if (cuda_cores->Valid(c, same)) best = std::min(best, cuda_cores->Cost(c, same, h100).estimate_us);
  }
  EXPECT_LT(t.estimate_us, best);
  double best_t4 = 1e300;
  for (const KernelConfig& c : cuda_cores->Enumerate({DType::kF16})) {
    if (cuda_cores->Valid(c, same)) best_t4 = std::min(best_t4, cuda_cores->Cost(c, same, t4).estimate_us);
  }
  EXPECT_GT(f->Cost(g, p, t4).estimate_us, best_t4);
}

TEST(KernelConfigTest, GemvCostTermsByHandAndTheChoiceAgainstTheVendorGemm) {
  const jit::GpuTraits h100 = jit::GpuTraits::FromArch(90);
  const KernelFamily* f = jit::FindKernelFamily("gemv");
  ASSERT_NE(f, nullptr);
  const KernelProblem p{"gemv", {DType::kF32}, {{"batch", 1}, {"k", 4096}, {"m", 1}, {"n", 4096}, {"transb", 0}}};
  // 8 columns of 32 K-slices a block: 512 blocks, no padding; a warp reads
  // 8 neighbouring columns (32 bytes: coalesced); 7 blocks of 256 fit an
  // SM's registers (34 each): 512 of 924 resident.
  const KernelConfig c{"gemv", {DType::kF32}, {{"ksplit", 32}, {"mtile", 1}, {"threads", 256}}};
  const jit::CostTerms t = f->Cost(c, p, h100);
  EXPECT_DOUBLE_EQ(t.waste, 0);
  EXPECT_EQ(f->Launch(c, p).blocks, 512);
  EXPECT_DOUBLE_EQ(t.occupancy, 512.0 * 256 / (132 * 2048));
  EXPECT_DOUBLE_EQ(t.bytes, 4.0 * (4096.0 * 4096 + 4096 + 4096));
  EXPECT_DOUBLE_EQ(t.flops, 2.0 * 4096 * 4096);
  // The vendor GEMM pads M to 64: 2 * 64 * 4096^2 flops at 67 TFLOPS.
  const double vendor = jit::GemmLibraryEstimateUs(p, h100);
  EXPECT_NEAR(vendor, 2.5 + 2.0 * 64 * 4096 * 4096 / 67e6, 1e-9);
  EXPECT_LT(t.estimate_us, vendor);
  // M = 64 re-reads B 8 times with the largest tile: the vendor GEMM wins.
  KernelProblem big = p;
  big.dims[2].second = 64;
  double best = 1e300;
  for (const KernelConfig& v : f->Enumerate({DType::kF32})) best = std::min(best, f->Cost(v, big, h100).estimate_us);
  EXPECT_GT(best, jit::GemmLibraryEstimateUs(big, h100));
  // 1 row, 4 columns, 256 threads with ksplit 1: 252 of 256 columns idle.
  const KernelProblem tiny{"gemv", {DType::kF32}, {{"batch", 1}, {"k", 8}, {"m", 1}, {"n", 4}, {"transb", 1}}};
  const KernelConfig wide{"gemv", {DType::kF32}, {{"ksplit", 1}, {"mtile", 1}, {"threads", 256}}};
  EXPECT_DOUBLE_EQ(f->Cost(wide, tiny, h100).waste, 1 - 4.0 / 256);
  EXPECT_FALSE(f->Valid(wide, KernelProblem{"gemv", {DType::kF32}, {{"k", 8}, {"m", 65}, {"n", 4}}}));
}

TEST(KernelConfigTest, EwCostTermsByHand) {
  const jit::GpuTraits a100 = jit::GpuTraits::FromArch(80);
  const KernelFamily* f = jit::FindKernelFamily("ew");
  const KernelProblem p{"ew", {DType::kF32}, {{"inputs", 2}, {"n", 1000}, {"ops", 1}}};
  // 1000 items, 256 threads x 4 items: one block, 1024 slots.
  const KernelConfig c{"ew", {DType::kF32}, {{"ipt", 4}, {"threads", 256}}};
  const jit::CostTerms t = f->Cost(c, p, a100);
  EXPECT_EQ(f->Launch(c, p).blocks, 1);
  EXPECT_DOUBLE_EQ(t.waste, 1 - 1000.0 / 1024);
  EXPECT_DOUBLE_EQ(t.bytes, 4.0 * 1000 * 3);
  EXPECT_DOUBLE_EQ(t.flops, 1000);
  // Vectors: 1000 items, 128 threads x 4 elements: 2 blocks, 1024 slots;
  // valid only where the problem allows a vector that wide.
  const KernelConfig v4{"ew", {DType::kF32}, {{"ipt", 1}, {"threads", 128}, {"vec", 4}}};
  const KernelProblem pv{"ew", {DType::kF32}, {{"inputs", 2}, {"n", 1000}, {"ops", 1}, {"vec", 4}}};
  EXPECT_EQ(f->Launch(v4, pv).blocks, 2);
  EXPECT_DOUBLE_EQ(f->Cost(v4, pv, a100).waste, 1 - 1000.0 / 1024);
  EXPECT_TRUE(f->Valid(v4, pv));
  EXPECT_FALSE(f->Valid(v4, p));  // no vec extent: a strided operand or a mixed-type op
  EXPECT_FALSE(f->Valid(v4, KernelProblem{"ew", {DType::kF32}, {{"inputs", 2}, {"n", 1000}, {"ops", 1}, {"vec", 2}}}));
  EXPECT_FALSE(f->InSpace(KernelConfig{"ew", {DType::kF32}, {{"ipt", 2}, {"threads", 128}, {"vec", 4}}}));
  // A large contiguous problem: the model prefers a vector variant.
  const KernelProblem big{"ew", {DType::kF32}, {{"inputs", 2}, {"n", 1 << 24}, {"ops", 1}, {"vec", 4}}};
  bool ranked = false;
  EXPECT_GT(jit::BestVariant(*f, big, a100, &ranked).config.Get("vec", 1), 1);
  EXPECT_TRUE(ranked);
}

TEST(KernelConfigTest, CastCostTermsByHand) {
  const jit::GpuTraits a100 = jit::GpuTraits::FromArch(80);
  const KernelFamily* f = jit::FindKernelFamily("cast");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->file(), "cast");
  EXPECT_EQ(f->dtype_lists().size(), 81u);  // every (from, to) pair of the nine dtypes
  const KernelProblem p{"cast", {DType::kF32, DType::kF16}, {{"n", 1000}}};
  // 1000 elements, 128 threads x 4 elements: 2 blocks, 1024 slots; reads 4
  // bytes and writes 2 an element.
  const KernelConfig v4{"cast", {DType::kF32, DType::kF16}, {{"threads", 128}, {"vec", 4}}};
  const jit::CostTerms t = f->Cost(v4, p, a100);
  EXPECT_EQ(f->Launch(v4, p).blocks, 2);
  EXPECT_EQ(f->Launch(v4, p).threads, 128);
  EXPECT_DOUBLE_EQ(t.waste, 1 - 1000.0 / 1024);
  EXPECT_DOUBLE_EQ(t.bytes, 6.0 * 1000);
  EXPECT_DOUBLE_EQ(t.flops, 1000);
  // A vector counts 4 * 1.25 items in flight against one: sqrt(5) the
  // occupancy of the scalar variant on the same grid, capped at 1.
  const KernelConfig v1{"cast", {DType::kF32, DType::kF16}, {{"threads", 128}, {"vec", 1}}};
  const KernelProblem small{"cast", {DType::kF32, DType::kF16}, {{"n", 128}}};
  EXPECT_NEAR(f->Cost(v4, small, a100).occupancy, f->Cost(v1, small, a100).occupancy * std::sqrt(5.0), 1e-12);
  EXPECT_TRUE(f->Valid(v4, p));
  EXPECT_FALSE(f->Valid(v4, KernelProblem{"cast", {DType::kF16, DType::kF32}, {{"n", 1000}}}));  // other dtypes
  EXPECT_FALSE(f->InSpace(KernelConfig{"cast", {DType::kF32, DType::kF16}, {{"threads", 128}, {"vec", 8}}}));
  EXPECT_FALSE(f->InSpace(KernelConfig{"cast", {DType::kF32}, {{"threads", 128}, {"vec", 4}}}));
  // A large cast: the model prefers a vector variant.
  const KernelProblem big{"cast", {DType::kF32, DType::kF16}, {{"n", 1 << 24}}};
  bool ranked = false;
  EXPECT_GT(jit::BestVariant(*f, big, a100, &ranked).config.Get("vec", 1), 1);
  EXPECT_TRUE(ranked);
}

// ---------------------------------------------------------------------------
// Every variant on the emulated device against a naive reference
// ---------------------------------------------------------------------------

class Buffers {
 public:
  explicit Buffers(cuda::Device& dev) : dev_(dev) {}
  ~Buffers() {
    for (void* p : ptrs_) dev_.Free(p);
  }
  template <typename T>
  void* Upload(const std::vector<T>& v) {
    void* p = dev_.Allocate(std::max<size_t>(1, v.size() * sizeof(T))).value();
    EXPECT_TRUE(dev_.CopyAsync(p, v.data(), v.size() * sizeof(T), nullptr).ok());
    ptrs_.push_back(p);
    return p;
  }
  template <typename T>
  std::vector<T> Download(const void* p, size_t n) {
    std::vector<T> out(n);
    EXPECT_TRUE(dev_.CopyAsync(out.data(), p, n * sizeof(T), nullptr).ok());
    EXPECT_TRUE(dev_.Synchronize(nullptr).ok());
    return out;
  }

 private:
  cuda::Device& dev_;
  std::vector<void*> ptrs_;
};

std::vector<float> Random(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-2, 2);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

template <typename P>
void LaunchVariant(cuda::Device& dev, const KernelConfig& c, const KernelProblem& problem, const char* kernel,
                   const P& p) {
  const cuda::VariantLaunch v = cuda::LaunchOf(c, problem);
  absl::Status s = dev.Launch(v.module, kernel, v.dims, &p, sizeof(p), nullptr);
  ASSERT_TRUE(s.ok()) << c.Name() << ": " << s;
  ASSERT_TRUE(dev.Synchronize(nullptr).ok());
}

// Softmax over [outer, n, inner] in f32, f64, f16 or bf16, against a double
// reference of the (rounded) inputs; a half's output is rounded once more.
void CheckSoftmax(cuda::Device& dev, const KernelConfig& c, int64_t outer, int64_t n, int64_t inner) {
  const KernelProblem problem = cuda::RowProblem("softmax", c.dtypes[0], outer * inner, n, inner);
  if (!jit::FindKernelFamily("softmax")->Valid(c, problem)) return;
  const DType t = c.dtypes[0];
  const bool f64 = t == DType::kF64, half = t == DType::kF16 || t == DType::kBF16;
  std::vector<float> xf = Random(outer * n * inner, 1);
  std::vector<uint16_t> xh(half ? xf.size() : 0);
  for (size_t i = 0; i < xh.size(); ++i) {
    xh[i] = t == DType::kF16 ? grove_k::f32_to_f16(xf[i]) : grove_k::f32_to_bf16(xf[i]);
    xf[i] = t == DType::kF16 ? grove_k::f16_to_f32(xh[i]) : grove_k::bf16_to_f32(xh[i]);
  }
  Buffers b(dev);
  grove_k::SoftmaxParams p{};
  std::vector<double> xd(xf.begin(), xf.end());
  if (half) {
    p.x = b.Upload(xh);
    p.y = b.Upload(std::vector<uint16_t>(xf.size()));
  } else {
    p.x = f64 ? b.Upload(xd) : b.Upload(xf);
    p.y = f64 ? b.Upload(std::vector<double>(xf.size())) : b.Upload(std::vector<float>(xf.size()));
  }
  p.outer = outer;
  p.n = n;
  p.inner = inner;
  p.mode = cuda::RowModeOf(c);
  LaunchVariant(dev, c, problem, "softmax", p);
  std::vector<double> y(xf.size());
  if (f64) {
    y = b.Download<double>(p.y, xf.size());
  } else if (half) {
    const std::vector<uint16_t> yh = b.Download<uint16_t>(p.y, xf.size());
    for (size_t i = 0; i < y.size(); ++i) {
      y[i] = t == DType::kF16 ? grove_k::f16_to_f32(yh[i]) : grove_k::bf16_to_f32(yh[i]);
    }
  } else {
    const std::vector<float> yf = b.Download<float>(p.y, xf.size());
    y.assign(yf.begin(), yf.end());
  }
  // One rounding of a probability (at most 1) to 11 (f16) or 8 (bf16) bits.
  const double tol = t == DType::kF16 ? 1e-3 : t == DType::kBF16 ? 8e-3 : 1e-6;
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      double m = -INFINITY, s = 0;
      for (int64_t j = 0; j < n; ++j) m = std::max(m, xd[(o * n + j) * inner + i]);
      for (int64_t j = 0; j < n; ++j) s += std::exp(xd[(o * n + j) * inner + i] - m);
      for (int64_t j = 0; j < n; ++j) {
        const int64_t at = (o * n + j) * inner + i;
        ASSERT_NEAR(y[at], std::exp(xd[at] - m) / s, tol) << c.Name() << " outer " << outer << " n " << n;
      }
    }
  }
}

void CheckNorm(cuda::Device& dev, const KernelConfig& c, int64_t rows, int64_t n) {
  const KernelProblem problem = cuda::RowProblem("norm", c.dtypes[0], rows, n, 1);
  if (!jit::FindKernelFamily("norm")->Valid(c, problem)) return;
  const bool half = c.dtypes[0] == DType::kF16;
  if (c.dtypes[0] != DType::kF32 && !half) return;  // f64/bf16: the full run's other families cover the code
  std::vector<float> x = Random(rows * n, 2), scale = Random(n, 3), bias = Random(n, 4);
  Buffers b(dev);
  grove_k::NormRowsParams p{};
  if (half) {
    std::vector<uint16_t> xh(x.size());
    for (size_t i = 0; i < x.size(); ++i) {
      xh[i] = grove_k::f32_to_f16(x[i]);
      x[i] = grove_k::f16_to_f32(xh[i]);
    }
    p.x = b.Upload(xh);
    p.y = b.Upload(std::vector<uint16_t>(x.size()));
  } else {
    p.x = b.Upload(x);
    p.y = b.Upload(std::vector<float>(x.size()));
  }
  p.rows = rows;
  p.n = n;
  p.epsilon = 1e-5;
  p.scale = b.Upload(scale);
  p.bias = b.Upload(bias);
  p.scale_type = grove_k::kNormF32;
  p.bias_type = grove_k::kNormF32;
  p.channels = 0;
  p.aff.rank = 1;
  p.aff.d[0] = n;
  p.scale_strides.s[0] = 1;
  p.bias_strides.s[0] = 1;
  p.mean_out = b.Upload(std::vector<float>(rows));
  p.mode = cuda::RowModeOf(c);
  LaunchVariant(dev, c, problem, "norm_rows", p);
  std::vector<float> y(x.size());
  if (half) {
    const std::vector<uint16_t> yh = b.Download<uint16_t>(p.y, x.size());
    for (size_t i = 0; i < y.size(); ++i) y[i] = grove_k::f16_to_f32(yh[i]);
  } else {
    y = b.Download<float>(p.y, x.size());
  }
  const std::vector<float> mean_out = b.Download<float>(p.mean_out, rows);
  for (int64_t r = 0; r < rows; ++r) {
    double mean = 0, var = 0;
    for (int64_t j = 0; j < n; ++j) mean += x[r * n + j];
    mean /= n;
    for (int64_t j = 0; j < n; ++j) var += (x[r * n + j] - mean) * (x[r * n + j] - mean);
    var /= n;
    ASSERT_NEAR(mean_out[r], mean, 1e-5) << c.Name();
    for (int64_t j = 0; j < n; ++j) {
      const double want = (x[r * n + j] - mean) / std::sqrt(var + 1e-5) * scale[j] + bias[j];
      ASSERT_NEAR(y[r * n + j], want, half ? 2e-2 + 2e-3 * std::fabs(want) : 1e-4) << c.Name() << " row " << r;
    }
  }
}

// Row sums (contiguous, reduce_sum) and ArgMax over the middle axis.
void CheckReduce(cuda::Device& dev, const KernelConfig& c, int64_t rows, int64_t n, int64_t inner) {
  const KernelProblem problem = cuda::RowProblem("reduce", c.dtypes[0], rows * inner, n, inner);
  if (!jit::FindKernelFamily("reduce")->Valid(c, problem)) return;
  if (c.dtypes[0] != DType::kF32 && c.dtypes[0] != DType::kI32) return;
  const bool i32 = c.dtypes[0] == DType::kI32;
  std::vector<float> x = Random(rows * n * inner, 5);
  std::vector<int32_t> xi(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    xi[i] = static_cast<int32_t>(std::lround(x[i] * 50));
    if (i32) x[i] = static_cast<float>(xi[i]);
  }
  Buffers b(dev);
  const void* xd = i32 ? b.Upload(xi) : b.Upload(x);
  if (inner == 1) {  // reduce_sum over rows
    grove_k::ReduceParams p{};
    p.x = xd;
    p.y = i32 ? b.Upload(std::vector<int32_t>(rows)) : b.Upload(std::vector<float>(rows));
    p.n_out = rows;
    p.count = n;
    p.kept.rank = 1;
    p.kept.d[0] = rows;
    p.kept_strides.s[0] = n;
    p.red.rank = 1;
    p.red.d[0] = n;
    p.red_strides.s[0] = 1;
    p.mode = cuda::RowModeOf(c);
    LaunchVariant(dev, c, problem, "reduce_sum", p);
    std::vector<double> y(rows);
    if (i32) {
      const std::vector<int32_t> yi = b.Download<int32_t>(p.y, rows);
      y.assign(yi.begin(), yi.end());
    } else {
      const std::vector<float> yf = b.Download<float>(p.y, rows);
      y.assign(yf.begin(), yf.end());
    }
    for (int64_t r = 0; r < rows; ++r) {
      double want = 0;
      for (int64_t j = 0; j < n; ++j) want += x[r * n + j];
      ASSERT_NEAR(y[r], want, i32 ? 0 : 1e-3) << c.Name() << " row " << r;
    }
  }
  grove_k::ArgReduceParams a{};
  a.x = xd;
  a.y = b.Upload(std::vector<int64_t>(rows * inner));
  a.outer = rows;
  a.n = n;
  a.inner = inner;
  a.mode = cuda::RowModeOf(c);
  LaunchVariant(dev, c, problem, "reduce_argmax", a);
  const std::vector<int64_t> got = b.Download<int64_t>(a.y, rows * inner);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t i = 0; i < inner; ++i) {
      int64_t best = 0;
      for (int64_t j = 1; j < n; ++j) {
        if (x[(r * n + j) * inner + i] > x[(r * n + best) * inner + i]) best = j;
      }
      ASSERT_EQ(got[r * inner + i], best) << c.Name() << " row " << r;
    }
  }
}

// a + b, contiguous, in f32 (or i32).
void CheckEw(cuda::Device& dev, const KernelConfig& c, int64_t n) {
  if (c.dtypes[0] != DType::kF32 && c.dtypes[0] != DType::kI32) return;
  const KernelProblem problem{"ew", c.dtypes, {{"inputs", 2}, {"n", n}, {"ops", 1}}};
  const std::vector<float> xa = Random(n, 6), xb = Random(n, 7);
  std::vector<int32_t> ia(n), ib(n);
  for (int64_t i = 0; i < n; ++i) {
    ia[i] = static_cast<int32_t>(xa[i] * 1000);
    ib[i] = static_cast<int32_t>(xb[i] * 1000);
  }
  const bool i32 = c.dtypes[0] == DType::kI32;
  Buffers b(dev);
  grove_k::EwParams p;
  std::memset(&p, 0, sizeof(p));
  p.out = i32 ? b.Upload(std::vector<int32_t>(n)) : b.Upload(std::vector<float>(n));
  p.n = n;
  p.shape.rank = 1;
  p.shape.d[0] = n;
  p.in[0] = i32 ? b.Upload(ia) : b.Upload(xa);
  p.in[1] = i32 ? b.Upload(ib) : b.Upload(xb);
  for (int k = 0; k < 2; ++k) {
    p.strides[k].s[0] = 1;
    p.mode[k] = grove_k::kEwContiguous;
  }
  p.num_inputs = 2;
  p.op = grove_k::kEwAdd;
  p.simple = 1;
  LaunchVariant(dev, c, problem, "ew", p);
  if (i32) {
    const std::vector<int32_t> y = b.Download<int32_t>(p.out, n);
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(y[i], ia[i] + ib[i]) << c.Name() << " at " << i;
  } else {
    const std::vector<float> y = b.Download<float>(p.out, n);
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(y[i], xa[i] + xb[i]) << c.Name() << " at " << i;
  }
}

// C = alpha A B (+ beta C) (+ bias), batched, B plain or transposed.
// Values as a dtype of f32, f16 or bf16 holds them (rounded), uploaded in
// it, and downloaded back to f32.
std::vector<float> RoundTo(DType t, std::vector<float> v) {
  for (float& x : v) {
    if (t == DType::kF16) x = grove_k::f16_to_f32(grove_k::f32_to_f16(x));
    if (t == DType::kBF16) x = grove_k::bf16_to_f32(grove_k::f32_to_bf16(x));
  }
  return v;
}
void* UploadAs(Buffers& bufs, DType t, const std::vector<float>& v) {
  if (t == DType::kF32) return bufs.Upload(v);
  std::vector<uint16_t> h(v.size());
  for (size_t i = 0; i < v.size(); ++i) h[i] = t == DType::kF16 ? grove_k::f32_to_f16(v[i]) : grove_k::f32_to_bf16(v[i]);
  return bufs.Upload(h);
}
std::vector<float> DownloadAs(Buffers& bufs, DType t, const void* p, size_t n) {
  if (t == DType::kF32) return bufs.Download<float>(p, n);
  const std::vector<uint16_t> h = bufs.Download<uint16_t>(p, n);
  std::vector<float> y(n);
  for (size_t i = 0; i < n; ++i) y[i] = t == DType::kF16 ? grove_k::f16_to_f32(h[i]) : grove_k::bf16_to_f32(h[i]);
  return y;
}

void CheckGemv(cuda::Device& dev, const KernelConfig& c, int64_t m, int64_t n, int64_t k, int64_t batch,
               bool trans_b, bool trans_a) {
  const DType t = c.dtypes[0];
  const KernelProblem problem{
      "gemv", c.dtypes, {{"batch", batch}, {"k", k}, {"m", m}, {"n", n}, {"transb", trans_b ? 1 : 0}}};
  if (!jit::FindKernelFamily("gemv")->Valid(c, problem)) return;
  const std::vector<float> a = RoundTo(t, Random(batch * m * k, 8)), bm = RoundTo(t, Random(batch * k * n, 9)),
                           c0 = RoundTo(t, Random(batch * m * n, 10)), bias = RoundTo(t, Random(n, 11));
  Buffers bufs(dev);
  grove_k::GemvParams p{};
  p.a = UploadAs(bufs, t, a);
  p.b = UploadAs(bufs, t, bm);
  p.c = UploadAs(bufs, t, c0);
  p.bias = UploadAs(bufs, t, bias);
  p.m = m;
  p.n = n;
  p.k = k;
  p.lda = trans_a ? m : k;
  p.ldb = trans_b ? k : n;
  p.ldc = n;
  p.batch = batch;
  p.stride_a = m * k;
  p.stride_b = k * n;
  p.stride_c = m * n;
  p.alpha = 0.5f;
  p.beta = 2.0f;
  p.trans_a = trans_a;
  p.trans_b = trans_b;
  LaunchVariant(dev, c, problem, "gemv", p);
  const std::vector<float> y = DownloadAs(bufs, t, p.c, c0.size());
  const double tol = t == DType::kF32 ? 1e-4 : (t == DType::kF16 ? 1e-2 : 8e-2);
  for (int64_t bi = 0; bi < batch; ++bi) {
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        double acc = 0;
        for (int64_t q = 0; q < k; ++q) {
          const double av = a[bi * m * k + (trans_a ? q * m + i : i * k + q)];
          const double bv = bm[bi * k * n + (trans_b ? j * k + q : q * n + j)];
          acc += av * bv;
        }
        const double want = 0.5 * acc + 2.0 * c0[bi * m * n + i * n + j] + bias[j];
        ASSERT_NEAR(y[bi * m * n + i * n + j], want, tol * (1 + std::fabs(want)))
            << c.Name() << " m " << m << " n " << n << " k " << k << " at " << bi << "," << i << "," << j;
      }
    }
  }
}

// dst [batch, rows, cols] = src[b * src_batch + c * ld + r] (ld >= rows),
// elements of the config's width as random bytes, against a naive copy.
void CheckTranspose(cuda::Device& dev, const KernelConfig& c, int64_t batch, int64_t rows, int64_t cols, int64_t ld) {
  const size_t el = DTypeSize(c.dtypes[0]);
  const int64_t src_batch = cols * ld + 3;  // batches apart, not packed
  std::vector<uint8_t> src(static_cast<size_t>(batch * src_batch) * el);
  std::mt19937 rng(static_cast<uint32_t>(batch * 131 + rows * 7 + cols));
  for (uint8_t& b : src) b = static_cast<uint8_t>(rng());
  Buffers b(dev);
  grove_k::TransposeTileParams p{};
  p.src = b.Upload(src);
  p.dst = b.Upload(std::vector<uint8_t>(static_cast<size_t>(batch * rows * cols + 1) * el, 0xCD));
  p.batch = batch;
  p.rows = rows;
  p.cols = cols;
  p.src_batch = src_batch;
  p.src_ld = ld;
  const KernelProblem problem{"transpose", c.dtypes, {{"batch", batch}, {"cols", cols}, {"rows", rows}}};
  LaunchVariant(dev, c, problem, "transpose_tile", p);
  const std::vector<uint8_t> got = b.Download<uint8_t>(p.dst, static_cast<size_t>(batch * rows * cols + 1) * el);
  for (int64_t bi = 0; bi < batch; ++bi) {
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t col = 0; col < cols; ++col) {
        const size_t at = static_cast<size_t>((bi * rows + r) * cols + col) * el;
        const size_t from = static_cast<size_t>(bi * src_batch + col * ld + r) * el;
        ASSERT_EQ(std::memcmp(&got[at], &src[from], el), 0)
            << c.Name() << " batch " << bi << " row " << r << " col " << col << " of " << batch << "x" << rows << "x" << cols;
      }
    }
  }
  for (size_t q = 0; q < el; ++q) ASSERT_EQ(got[static_cast<size_t>(batch * rows * cols) * el + q], 0xCD) << c.Name();
}

// Casts by vector width: every (from, to) pair of the cast kernels, each
// variant on odd sizes, an exact multiple and a size below one vector, with
// the output or the input one element off the vector's alignment (the
// scalar loop then) and aligned (the vector loop and its tail): byte for
// byte the generic (scalar) variant's result on the same data, and the
// CPU's conversion (lib/ir/element_types.h; a cast to the same dtype keeps
// the value, a bool as 0 or 1), NaN for NaN.
template <typename Fn>
void WithElementType(DType t, Fn&& fn) {
  switch (t) {
    case DType::kF32: return fn(ir::TypeTag<float>{});
    case DType::kF64: return fn(ir::TypeTag<double>{});
    case DType::kF16: return fn(ir::TypeTag<ir::Half>{});
    case DType::kBF16: return fn(ir::TypeTag<ir::BFloat16>{});
    case DType::kI64: return fn(ir::TypeTag<int64_t>{});
    case DType::kI32: return fn(ir::TypeTag<int32_t>{});
    case DType::kI8: return fn(ir::TypeTag<int8_t>{});
    case DType::kU8: return fn(ir::TypeTag<uint8_t>{});
    case DType::kBool: return fn(ir::TypeTag<ir::Bool8>{});
    default: FAIL() << "no element type for " << DTypeName(t);
  }
}

bool IsNaNAt(DType t, const uint8_t* at) {
  if (t == DType::kF32) { float f; std::memcpy(&f, at, 4); return std::isnan(f); }
  if (t == DType::kF64) { double d; std::memcpy(&d, at, 8); return std::isnan(d); }
  uint16_t h;
  std::memcpy(&h, at, 2);
  if (t == DType::kF16) return std::isnan(grove_k::f16_to_f32(h));
  if (t == DType::kBF16) return std::isnan(grove_k::bf16_to_f32(h));
  return false;
}

// n elements of `t`: NaN, infinities, values past every integer range, -0,
// fractions, f16/bf16 halfway cases; bools as any byte.
std::vector<uint8_t> CastSource(DType t, int64_t n) {
  const double values[] = {0.0,  -0.0,     0.5,       -1.5,  2.5,    127.9,   -128.9, 255.5,          256.0,
                           1e10, -3e9,     NAN,       INFINITY, -INFINITY, 65520.0, 1e-8, 1.00048828125, 16777217.0,
                           1e19, -9.3e18,  -7.0,      100.0, 3.0000001};
  const size_t count = sizeof(values) / sizeof(values[0]);
  std::vector<uint8_t> out(static_cast<size_t>(n) * DTypeSize(t));
  for (int64_t i = 0; i < n; ++i) {
    uint8_t* at = out.data() + i * DTypeSize(t);
    if (t == DType::kBool) {
      *at = static_cast<uint8_t>((i * 37) % 5 == 0 ? 0 : (i * 37) % 256);
      continue;
    }
    WithElementType(t, [&](auto tag) {
      using S = typename decltype(tag)::type;
      const S v = ir::ConvertElement<S>(values[(i * 7) % count]);
      std::memcpy(at, &v, sizeof(S));
    });
  }
  return out;
}

// The CPU's cast of `src` (n elements of `from`) to `to`.
std::vector<uint8_t> CpuCast(DType from, DType to, const std::vector<uint8_t>& src, int64_t n) {
  std::vector<uint8_t> out(static_cast<size_t>(n) * DTypeSize(to));
  WithElementType(from, [&](auto from_tag) {
    using S = typename decltype(from_tag)::type;
    WithElementType(to, [&](auto to_tag) {
      using D = typename decltype(to_tag)::type;
      for (int64_t i = 0; i < n; ++i) {
        S v;
        std::memcpy(&v, src.data() + i * sizeof(S), sizeof(S));
        D d = ir::ConvertElement<D>(v);
        if constexpr (std::is_same_v<D, ir::Bool8>) d.bits = d.bits != 0 ? 1 : 0;
        std::memcpy(out.data() + i * sizeof(D), &d, sizeof(D));
      }
    });
  });
  return out;
}

// Runs config `c` over `src` (n elements); `shift` starts the output (1)
// or the input (2) one element in. The output's bytes, and whether the
// launch wrote nothing outside them.
std::vector<uint8_t> RunCast(cuda::Device& dev, const KernelConfig& c, const std::vector<uint8_t>& src, int64_t n,
                             int shift, bool* wrote_outside) {
  const size_t in_el = DTypeSize(c.dtypes[0]), out_el = DTypeSize(c.dtypes[1]);
  Buffers b(dev);
  std::vector<uint8_t> in_bytes(in_el, 0);
  if (shift != 2) in_bytes.clear();
  in_bytes.insert(in_bytes.end(), src.begin(), src.end());
  grove_k::CastParams p{};
  p.in = static_cast<uint8_t*>(b.Upload(in_bytes)) + (shift == 2 ? in_el : 0);
  void* out_base = b.Upload(std::vector<uint8_t>((n + 1) * out_el, 0xAB));
  p.out = static_cast<uint8_t*>(out_base) + (shift == 1 ? out_el : 0);
  p.n = n;
  LaunchVariant(dev, c, KernelProblem{"cast", c.dtypes, {{"n", n}}}, "cast", p);
  const std::vector<uint8_t> all = b.Download<uint8_t>(out_base, (n + 1) * out_el);
  const size_t first = shift == 1 ? out_el : 0, outside = shift == 1 ? 0 : n * out_el;
  *wrote_outside = false;
  for (size_t q = 0; q < out_el; ++q) *wrote_outside |= all[outside + q] != 0xAB;
  return std::vector<uint8_t>(all.begin() + first, all.begin() + first + n * out_el);
}

void CheckCast(cuda::Device& dev, const KernelConfig& c, int64_t n, int shift) {
  const DType from = c.dtypes[0], to = c.dtypes[1];
  const size_t el = DTypeSize(to);
  const std::vector<uint8_t> src = CastSource(from, n);
  const std::vector<uint8_t> want = CpuCast(from, to, src, n);
  bool outside = false;
  const std::vector<uint8_t> got = RunCast(dev, c, src, n, shift, &outside);
  ASSERT_FALSE(outside) << c.Name() << " n " << n << " shift " << shift << ": wrote past the output";
  const KernelConfig scalar = jit::FindKernelFamily("cast")->Generic(KernelProblem{"cast", c.dtypes, {{"n", n}}});
  const std::vector<uint8_t> scalar_got = RunCast(dev, scalar, src, n, 0, &outside);
  ASSERT_EQ(got, scalar_got) << c.Name() << " n " << n << " shift " << shift << ": not the scalar variant's bytes";
  for (int64_t i = 0; i < n; ++i) {
    const uint8_t* g = got.data() + i * el;
    const uint8_t* w = want.data() + i * el;
    if (IsNaNAt(to, g) && IsNaNAt(to, w)) continue;
    ASSERT_EQ(std::memcmp(g, w, el), 0) << c.Name() << " n " << n << " shift " << shift << " at " << i;
  }
}


// Attention over contiguous [heads, sq, d] queries, [heads, sk, d] keys and
// [heads, sk, dv] values, scaled by 1/scale, against a double reference
// (the tiled kernel's partial tiles: sq, sk not multiples of the tiles).
void CheckAttention(cuda::Device& dev, const KernelConfig& c, int64_t heads, int64_t sq, int64_t sk, int64_t d,
                    int64_t dv) {
  const DType t = c.dtypes[0];
  // "attention" or its tensor-core form "attention_mma" (entry of that name).
  const KernelProblem problem{c.family, c.dtypes, {{"d", d}, {"dv", dv}, {"heads", heads}, {"sk", sk}, {"sq", sq}}};
  if (!jit::FindKernelFamily(c.family)->Valid(c, problem)) return;
  const std::vector<float> q = RoundTo(t, Random(heads * sq * d, 12)), k = RoundTo(t, Random(heads * sk * d, 13)),
                           v = RoundTo(t, Random(heads * sk * dv, 14));
  Buffers bufs(dev);
  grove_k::AttentionParams p{};
  p.q = UploadAs(bufs, t, q);
  p.k = UploadAs(bufs, t, k);
  p.v = UploadAs(bufs, t, v);
  p.out = bufs.Upload(std::vector<float>(heads * sq * dv, 0.0f));  // room for f32; halves use half of it
  p.b0 = 1;
  p.b1 = heads;
  p.sq = sq;
  p.sk = sk;
  p.d = d;
  p.dv = dv;
  p.q_b1 = sq * d;
  p.k_b1 = sk * d;
  p.k_js = d;
  p.k_ds = 1;
  p.v_b1 = sk * dv;
  p.kv_group = 1;
  p.q_scale = p.k_scale = 1.0f;
  p.scale = 4.0f;
  p.scale_op = grove_k::kAttnScaleDiv;
  LaunchVariant(dev, c, problem, c.family.c_str(), p);
  const std::vector<float> y = DownloadAs(bufs, t, p.out, heads * sq * dv);
  const double tol = t == DType::kF32 ? 1e-5 : (t == DType::kF16 ? 2e-3 : 1e-2);
  for (int64_t h = 0; h < heads; ++h) {
    for (int64_t i = 0; i < sq; ++i) {
      std::vector<double> w(sk);
      double mx = -1e300, sum = 0;
      for (int64_t j = 0; j < sk; ++j) {
        double dot = 0;
        for (int64_t x = 0; x < d; ++x) dot += double{q[(h * sq + i) * d + x]} * k[(h * sk + j) * d + x];
        w[j] = dot / 4.0;
        mx = std::max(mx, w[j]);
      }
      for (double& e : w) sum += (e = std::exp(e - mx));
      for (int64_t x = 0; x < dv; ++x) {
        double want = 0;
        for (int64_t j = 0; j < sk; ++j) want += w[j] / sum * v[(h * sk + j) * dv + x];
        ASSERT_NEAR(y[(h * sq + i) * dv + x], want, tol * (1 + std::fabs(want))) << "head " << h << " row " << i << " col " << x;
      }
    }
  }
}

void RunFamily(const std::string& family, size_t stride, bool all_dtypes) {
  auto dev = cuda::NewEmulatedDevice();
  const KernelFamily* f = jit::FindKernelFamily(family);
  ASSERT_NE(f, nullptr);
  std::vector<std::vector<DType>> lists = f->dtype_lists();
  if (!all_dtypes) lists.resize(1);
  if (!all_dtypes && family == "norm") lists.push_back({DType::kF16});
  if (!all_dtypes && family == "reduce") lists.push_back({DType::kI32});
  if (!all_dtypes && family == "gemv") lists.push_back({DType::kBF16});
  if (!all_dtypes && family == "attention") lists.push_back({DType::kF16});
  if (!all_dtypes && family == "transpose") lists.push_back({DType::kI64});
  if (!all_dtypes && family == "cast") lists = {{DType::kF32, DType::kF16}, {DType::kBool, DType::kI64}};
  for (const std::vector<DType>& dtypes : lists) {
    const std::vector<KernelConfig> sample = Sample(f->Enumerate(dtypes), stride);
    for (const KernelConfig& c : sample) {
      // The sample's big blocks (1024 host threads each on the emulated
      // device) only at its end; the full run has them all.
      if (!all_dtypes && c.Get("threads", 0) > 256 && c != sample.back()) continue;
      SCOPED_TRACE(c.Name());
      if (family == "softmax") {
        CheckSoftmax(*dev, c, 3, 37, 1);
        CheckSoftmax(*dev, c, 2, 600, 1);
        CheckSoftmax(*dev, c, 2, 5, 3);
      } else if (family == "norm") {
        CheckNorm(*dev, c, 3, 45);
        CheckNorm(*dev, c, 1, 700);
      } else if (family == "reduce") {
        CheckReduce(*dev, c, 3, 77, 1);
        CheckReduce(*dev, c, 2, 9, 4);
      } else if (family == "ew") {
        CheckEw(*dev, c, 1);
        CheckEw(*dev, c, 3000);
      } else if (family == "cast") {
        CheckCast(*dev, c, 1, 0);
        CheckCast(*dev, c, 3000, 0);
      } else if (family == "transpose") {
        CheckTranspose(*dev, c, 1, 37, 45, 37);  // partial tiles on both edges
        CheckTranspose(*dev, c, 3, 5, 70, 9);    // fewer rows than a tile, padded rows
        CheckTranspose(*dev, c, 2, 64, 32, 64);  // whole tiles
      } else if (family == "gemv") {
        CheckGemv(*dev, c, 3, 45, 70, 2, false, false);
        CheckGemv(*dev, c, 9, 33, 40, 1, true, false);
        CheckGemv(*dev, c, 1, 7, 300, 1, true, true);
      } else if (family == "attention" || family == "attention_mma") {
        CheckAttention(*dev, c, 3, 70, 77, 64, 40);  // partial tiles, V narrower than the head
        CheckAttention(*dev, c, 2, 17, 33, 100, 128);
        CheckAttention(*dev, c, 1, 5, 130, 8, 8);
      }
      if (::testing::Test::HasFatalFailure()) return;
    }
  }
}

// Samples across each space: every few configs in Enumerate's order, and
// the last.
TEST(KernelVariantsTest, SoftmaxSampleOnTheEmulatedDevice) { RunFamily("softmax", 2, false); }
TEST(KernelVariantsTest, NormSampleOnTheEmulatedDevice) { RunFamily("norm", 3, false); }
TEST(KernelVariantsTest, ReduceSampleOnTheEmulatedDevice) { RunFamily("reduce", 3, false); }
TEST(KernelVariantsTest, EwSampleOnTheEmulatedDevice) { RunFamily("ew", 3, false); }
TEST(KernelVariantsTest, GemvSampleOnTheEmulatedDevice) { RunFamily("gemv", 11, false); }
TEST(KernelVariantsTest, TransposeSampleOnTheEmulatedDevice) { RunFamily("transpose", 1, false); }
TEST(KernelVariantsTest, CastSampleOnTheEmulatedDevice) { RunFamily("cast", 2, false); }
TEST(KernelVariantsTest, AttentionSampleOnTheEmulatedDevice) { RunFamily("attention", 1, false); }
// Both dtypes: the f16 and bf16 forms of mma.sync (its fragments emulated by shuffles).
TEST(KernelVariantsTest, AttentionMmaOnTheEmulatedDevice) { RunFamily("attention_mma", 1, true); }

// A strided copy that moves a contiguous dim inward plans the tiled
// transpose ([batch,] rows x cols after merging), with the generic tiles
// without a step's context; other copies keep their kinds.
TEST(KernelVariantsTest, StridedCopiesThatTransposePlanTheTiledKernel) {
  // [2, 5, 7] -> [2, 7, 5] (perm 0, 2, 1) of f32: dst [2, 7, 5] reads src strides {35, 1, 7}.
  absl::StatusOr<cuda::StridedCopyPlan> t = cuda::PlanStridedCopy(4, {2, 7, 5}, {35, 1, 7});
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->kind, cuda::StridedCopyPlan::kTranspose);
  EXPECT_EQ(t->transpose.batch, 2);
  EXPECT_EQ(t->transpose.rows, 7);
  EXPECT_EQ(t->transpose.cols, 5);
  EXPECT_EQ(t->transpose.src_ld, 7);
  EXPECT_EQ(t->transpose.src_batch, 35);
  EXPECT_EQ(jit::Suffix(t->module), "__i32__rows8_tile32");
  EXPECT_EQ(t->dims.block[0], 256u);
  // NCHW -> NHWC of f16: H and W merge into one dim of rows.
  t = cuda::PlanStridedCopy(2, {2, 4, 6, 3}, {72, 6, 1, 24});
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->kind, cuda::StridedCopyPlan::kTranspose);
  EXPECT_EQ(t->transpose.rows, 24);
  EXPECT_EQ(t->transpose.cols, 3);
  // A plain 2-D transpose; a broadcast (stride 0) and a reversed copy are not transposes.
  EXPECT_EQ(cuda::PlanStridedCopy(8, {9, 4}, {1, 9})->kind, cuda::StridedCopyPlan::kTranspose);
  EXPECT_EQ(cuda::PlanStridedCopy(4, {3, 4}, {1, 0})->kind, cuda::StridedCopyPlan::kKernel);
  EXPECT_EQ(cuda::PlanStridedCopy(4, {3, 4}, {4, -1})->kind, cuda::StridedCopyPlan::kKernel);
  EXPECT_EQ(cuda::PlanStridedCopy(4, {3, 4}, {8, 1})->kind, cuda::StridedCopyPlan::kRows);
}

// Vector widths (ew's vec): every vector variant (the sample's 64-thread
// blocks; the full run all) of f32, f16, f64, i8 and bool on odd sizes,
// exact multiples and a size below one vector, with the output or an input
// one element off the vector's alignment (the scalar loop then) and aligned
// (the vector loop and its tail); unary, Clip, binary with a scalar operand,
// variadic Sum and Mean, and ops the vector path leaves to the scalar loop
// (a comparison, Where, Pow), and the fused chain, against naive references.
double EwRef(int op, const std::vector<double>& x) {
  switch (op) {
    case grove_k::kEwNeg: return -x[0];
    case grove_k::kEwRelu: return x[0] < 0 ? 0 : x[0];
    case grove_k::kEwClip: return std::min(std::max(x[0], -0.5), 0.75);
    case grove_k::kEwNot: return x[0] == 0;
    case grove_k::kEwAdd: return x[0] + x[1];
    case grove_k::kEwMul: return x[0] * x[1];
    case grove_k::kEwPow: return std::pow(x[0], x[1]);
    case grove_k::kEwSum: return x[0] + x[1] + x[2];
    case grove_k::kEwMean: return (x[0] + x[1] + x[2]) / 3;
    case grove_k::kEwLess: return x[0] < x[1];
    case grove_k::kEwWhere: return x[0] != 0 ? x[1] : x[2];
    default: return NAN;
  }
}

// Element values of dtype t as bytes, and back as doubles.
std::vector<uint8_t> EncodeAs(DType t, const std::vector<double>& v) {
  std::vector<uint8_t> out(v.size() * DTypeSize(t));
  for (size_t i = 0; i < v.size(); ++i) {
    uint8_t* at = out.data() + i * DTypeSize(t);
    if (t == DType::kF32) { const float f = static_cast<float>(v[i]); std::memcpy(at, &f, 4); }
    if (t == DType::kF64) std::memcpy(at, &v[i], 8);
    if (t == DType::kF16) { const uint16_t h = grove_k::f32_to_f16(static_cast<float>(v[i])); std::memcpy(at, &h, 2); }
    if (t == DType::kI8) *at = static_cast<uint8_t>(static_cast<int8_t>(v[i]));
    if (t == DType::kBool) *at = v[i] != 0 ? 1 : 0;
  }
  return out;
}
double DecodeAt(DType t, const uint8_t* at) {
  if (t == DType::kF32) { float f; std::memcpy(&f, at, 4); return f; }
  if (t == DType::kF64) { double d; std::memcpy(&d, at, 8); return d; }
  if (t == DType::kF16) { uint16_t h; std::memcpy(&h, at, 2); return grove_k::f16_to_f32(h); }
  if (t == DType::kI8) return static_cast<int8_t>(*at);
  return *at != 0;
}

struct EwVecCase {
  int op;
  int inputs;
  bool scalar_second;  // operand 1 is one element (kEwScalar)
  bool chain;          // run as a fused chain (Mul then Add) instead
};

// The operands of a launch of either params kind over n elements: `in`
// contiguous, but operand 1 one element (kEwScalar) when `scalar_second`.
template <typename P>
void SetEwOperands(P& p, void* out, int64_t n, const std::vector<void*>& in, bool scalar_second) {
  std::memset(&p, 0, sizeof(p));
  p.out = out;
  p.n = n;
  p.shape.rank = 1;
  p.shape.d[0] = n;
  p.num_inputs = static_cast<int>(in.size());
  p.simple = 1;
  for (size_t i = 0; i < in.size(); ++i) {
    p.in[i] = in[i];
    p.mode[i] = (i == 1 && scalar_second) ? grove_k::kEwScalar : grove_k::kEwContiguous;
    p.strides[i].s[0] = p.mode[i] == grove_k::kEwScalar ? 0 : 1;
  }
}

// One case at n elements; `shift` moves the output (1) or operand 0 (2) one
// element off its vector alignment.
void CheckEwVector(cuda::Device& dev, const KernelConfig& c, const EwVecCase& k, int64_t n, int shift) {
  const DType t = c.dtypes[0];
  const bool compare = k.op == grove_k::kEwLess, where = k.op == grove_k::kEwWhere;
  const DType out_t = compare ? DType::kBool : t;
  const size_t el = DTypeSize(t);
  std::mt19937 rng(static_cast<uint32_t>(n * 7 + shift));
  std::uniform_int_distribution<int> d(-8, 8);
  std::vector<std::vector<double>> x(k.inputs);
  for (int i = 0; i < k.inputs; ++i) {
    const int64_t len = (i == 1 && k.scalar_second) ? 1 : n;
    const DType ti = (where && i == 0) ? DType::kBool : t;
    for (int64_t j = 0; j < len; ++j) {
      double v = d(rng) / 4.0;
      if (ti == DType::kI8 || ti == DType::kBool) v = d(rng);
      if (ti == DType::kBool) v = v > 0;
      if (k.op == grove_k::kEwPow && i == 0) v = std::fabs(v) + 0.25;
      x[i].push_back(v);
    }
  }
  Buffers b(dev);
  // Each buffer holds one spare element up front so that `shift` can start
  // it one element in.
  std::vector<void*> in(k.inputs);
  for (int i = 0; i < k.inputs; ++i) {
    const DType ti = (where && i == 0) ? DType::kBool : t;
    std::vector<uint8_t> bytes(DTypeSize(ti), 0);
    const std::vector<uint8_t> data = EncodeAs(ti, x[i]);
    bytes.insert(bytes.end(), data.begin(), data.end());
    void* base = b.Upload(bytes);
    in[i] = static_cast<uint8_t*>(base) + (shift == 2 && i == 0 ? DTypeSize(ti) : 0);
    if (!(shift == 2 && i == 0)) {  // aligned: the data from the start
      EXPECT_TRUE(dev.CopyAsync(base, data.data(), data.size(), nullptr).ok());
    }
  }
  void* out_base = b.Upload(std::vector<uint8_t>((n + 1) * DTypeSize(out_t), 0xAB));
  void* out = static_cast<uint8_t*>(out_base) + (shift == 1 ? DTypeSize(out_t) : 0);
  const KernelProblem problem{"ew", c.dtypes, {{"inputs", k.inputs}, {"n", n}, {"ops", 1}, {"vec", 4}}};
  if (k.chain) {
    grove_k::EwChainParams p;
    SetEwOperands(p, out, n, in, k.scalar_second);
    p.num_links = 2;  // (x0 * x1) + x2
    p.links[0] = grove_k::EwLink{grove_k::kEwMul, {0, 1, grove_k::kEwNone}, 0, 0};
    p.links[1] = grove_k::EwLink{grove_k::kEwAdd, {grove_k::kEwPrev, 2, grove_k::kEwNone}, 0, 0};
    LaunchVariant(dev, c, problem, "ew_chain", p);
  } else {
    grove_k::EwParams p;
    SetEwOperands(p, out, n, in, k.scalar_second);
    p.op = k.op;
    if (k.op == grove_k::kEwClip) {
      p.fa = -0.5;
      p.fb = 0.75;
      p.has_lo = p.has_hi = 1;
    }
    if (k.op == grove_k::kEwMean) p.mean_count = 3;
    if (k.op == grove_k::kEwPow) p.exp_dtype = t == DType::kF64 ? grove_k::kEwF64 : (t == DType::kF16 ? grove_k::kEwF16 : grove_k::kEwF32);
    LaunchVariant(dev, c, problem, "ew", p);
  }
  const std::vector<uint8_t> got = b.Download<uint8_t>(out_base, (n + 1) * DTypeSize(out_t));
  const size_t first = shift == 1 ? 1 : 0;
  // Nothing written outside the output.
  const size_t outside = shift == 1 ? 0 : static_cast<size_t>(n);
  for (size_t q = 0; q < DTypeSize(out_t); ++q) ASSERT_EQ(got[outside * DTypeSize(out_t) + q], 0xAB) << c.Name() << " n " << n;
  for (int64_t j = 0; j < n; ++j) {
    std::vector<double> xs;
    for (int i = 0; i < k.inputs; ++i) xs.push_back(x[i][(i == 1 && k.scalar_second) ? 0 : j]);
    double want = k.chain ? xs[0] * xs[1] + xs[2] : EwRef(k.op, xs);
    if (out_t == DType::kF32) want = static_cast<float>(want);
    if (out_t == DType::kF16) want = grove_k::f16_to_f32(grove_k::f32_to_f16(static_cast<float>(want)));
    if (out_t == DType::kI8) want = static_cast<int8_t>(static_cast<int64_t>(want));
    const double have = DecodeAt(out_t, got.data() + (first + j) * DTypeSize(out_t));
    ASSERT_NEAR(have, want, t == DType::kF16 ? 2e-3 * (1 + std::fabs(want)) : 1e-6 * (1 + std::fabs(want)))
        << c.Name() << " op " << k.op << (k.chain ? " chain" : "") << " n " << n << " shift " << shift << " at " << j;
  }
  (void)el;
}

void RunEwVectors(bool full) {
  auto dev = cuda::NewEmulatedDevice();
  const KernelFamily* f = jit::FindKernelFamily("ew");
  ASSERT_NE(f, nullptr);
  const std::vector<EwVecCase> float_cases = {
      {grove_k::kEwNeg, 1, false, false}, {grove_k::kEwClip, 1, false, false}, {grove_k::kEwAdd, 2, false, false},
      {grove_k::kEwMul, 2, true, false},  {grove_k::kEwSum, 3, false, false},  {grove_k::kEwMean, 3, true, false},
      {grove_k::kEwPow, 2, false, false}, {grove_k::kEwLess, 2, true, false},  {grove_k::kEwWhere, 3, false, false},
      {grove_k::kEwMul, 3, true, true}};
  for (DType t : {DType::kF32, DType::kF16, DType::kF64, DType::kI8, DType::kBool}) {
    std::vector<EwVecCase> cases;
    if (t == DType::kBool) {
      cases = {{grove_k::kEwNot, 1, false, false}, {grove_k::kEwWhere, 3, false, false}};
    } else if (t == DType::kI8) {
      cases = {{grove_k::kEwNeg, 1, false, false}, {grove_k::kEwAdd, 2, true, false}, {grove_k::kEwLess, 2, false, false}};
    } else {
      cases = float_cases;
      if (!full && t != DType::kF32) cases = {float_cases[1], float_cases[3]};
    }
    for (const KernelConfig& c : f->Enumerate({t})) {
      if (c.Get("vec", 1) == 1 || (!full && c.Get("threads", 0) > 64)) continue;
      SCOPED_TRACE(c.Name());
      for (const EwVecCase& k : cases) {
        // Below one vector, an exact multiple, and an odd size aligned (the
        // vector loop and a tail) and with the output or operand 0 off.
        for (const auto& [n, shift] : std::vector<std::pair<int64_t, int>>{{3, 0}, {8, 0}, {1027, 0}, {1027, 1}, {1027, 2}}) {
          CheckEwVector(*dev, c, k, n, shift);
          if (::testing::Test::HasFatalFailure()) return;
        }
      }
    }
  }
}

TEST(KernelVariantsTest, EwVectorWidthsOnTheEmulatedDevice) { RunEwVectors(false); }

TEST(KernelVariantsFull, EveryEwVectorWidthOnTheEmulatedDevice) {
  if (!FullRun()) GTEST_SKIP() << "the full variant space runs with GROVE_VARIANTS_FULL=1 (ctest -L variants_full)";
  RunEwVectors(true);
}

// Every vector variant of every pair (the sample's 64-thread blocks; the
// full run all) through CheckCast.
void RunCastVectors(bool full) {
  auto dev = cuda::NewEmulatedDevice();
  const KernelFamily* f = jit::FindKernelFamily("cast");
  ASSERT_NE(f, nullptr);
  for (const std::vector<DType>& dtypes : f->dtype_lists()) {
    for (const KernelConfig& c : f->Enumerate(dtypes)) {
      if (c.Get("vec", 1) == 1 || (!full && c.Get("threads", 0) > 64)) continue;
      SCOPED_TRACE(c.Name());
      // Below one vector, an exact multiple, and an odd size aligned (the
      // vector loop and a tail) and with the output or the input off.
      for (const auto& [n, shift] : std::vector<std::pair<int64_t, int>>{{1, 0}, {3, 0}, {8, 0}, {1027, 0}, {1027, 1}, {1027, 2}}) {
        CheckCast(*dev, c, n, shift);
        if (::testing::Test::HasFatalFailure()) return;
      }
    }
  }
}

TEST(KernelVariantsTest, CastVectorWidthsOnTheEmulatedDevice) { RunCastVectors(false); }

TEST(KernelVariantsFull, EveryCastVectorWidthOnTheEmulatedDevice) {
  if (!FullRun()) GTEST_SKIP() << "the full variant space runs with GROVE_VARIANTS_FULL=1 (ctest -L variants_full)";
  RunCastVectors(true);
}

TEST(KernelVariantsFull, EveryVariantOfEveryFamilyOnTheEmulatedDevice) {
  if (!FullRun()) GTEST_SKIP() << "the full variant space runs with GROVE_VARIANTS_FULL=1 (ctest -L variants_full)";
  for (const KernelFamily* f : jit::KernelFamilies()) {
    RunFamily(std::string(f->name()), 1, true);
    if (HasFatalFailure()) return;
  }
}

// ---------------------------------------------------------------------------
// NVRTC: the variants compile for sm_80 and sm_90 with the same entries as
// the module without a variant.
// ---------------------------------------------------------------------------

void CompileConfigs(const std::vector<std::pair<KernelConfig, int>>& configs) {
  if (jit::NvrtcVersion() <= 0) GTEST_SKIP() << "NVRTC is not available";
  struct Job {
    jit::ModuleSpec module;
    int arch;
    std::string error;
    size_t entries = 0;
  };
  std::vector<Job> jobs;
  for (const auto& [c, arch] : configs) jobs.push_back({jit::ConfigModule(c), arch});
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t i = next++; i < jobs.size(); i = next++) {
      Job& job = jobs[i];
      absl::StatusOr<std::string> source = jit::ModuleSource(job.module);
      if (!source.ok()) {
        job.error = std::string(source.status().message());
        continue;
      }
      absl::StatusOr<jit::CompileResult> compiled = jit::CompileModuleSource(*source, job.arch);
      if (!compiled.ok()) {
        job.error = std::string(compiled.status().message());
        continue;
      }
      absl::StatusOr<std::vector<std::string>> entries = jit::CubinEntryPoints(compiled->cubin);
      if (!entries.ok()) {
        job.error = std::string(entries.status().message());
        continue;
      }
      const std::string suffix = jit::Suffix(job.module);
      for (const std::string& e : *entries) {
        if (!absl::EndsWith(e, suffix)) job.error = absl::StrCat("entry ", e, " lacks the suffix ", suffix);
      }
      job.entries = entries->size();
    }
  };
  std::thread helper(worker);
  worker();
  helper.join();
  for (const Job& job : jobs) {
    EXPECT_TRUE(job.error.empty()) << job.module.file << jit::Suffix(job.module) << " sm_" << job.arch << ": "
                                   << job.error;
    EXPECT_GT(job.entries, 0u) << job.module.file << jit::Suffix(job.module);
  }
}

// One variant per family (the space's last: the largest tiles and blocks;
// ew's widest vector),
// families taking turns at sm_80 and sm_90; NvrtcCompileTest compiles each
// family's file without a variant for both.
TEST(KernelVariantsTest, NvrtcCompilesAVariantOfEveryFamily) {
  std::vector<std::pair<KernelConfig, int>> jobs;
  int i = 0;
  for (const KernelFamily* f : jit::KernelFamilies()) {
    KernelConfig c = f->Enumerate(f->dtype_lists().back()).back();
    // ew's last is a scalar variant: take its widest vector instead (the
    // full run compiles every width of every dtype).
    if (f->name() == "ew") c = KernelConfig{"ew", c.dtypes, {{"ipt", 1}, {"threads", 1024}, {"vec", 4}}};
    ASSERT_TRUE(f->InSpace(c)) << c.Name();
    jobs.emplace_back(c, i++ % 2 == 0 ? 80 : 90);
  }
  CompileConfigs(jobs);
}

// Casts' vectors: every dtype as a source and as a destination at vec 4
// (sm_90) and vec 2 (sm_80), pairs of different dtypes; and ew's vectors
// of float types, whose modules hold the fused chain's vector loop too.
TEST(KernelVariantsTest, NvrtcCompilesCastAndFusedChainVectors) {
  const std::vector<DType> types = {DType::kF32, DType::kF64, DType::kF16, DType::kBF16, DType::kI64,
                                    DType::kI32, DType::kI8,  DType::kU8,  DType::kBool};
  std::vector<std::pair<KernelConfig, int>> jobs;
  for (size_t i = 0; i < types.size(); ++i) {
    jobs.emplace_back(KernelConfig{"cast", {types[i], types[(i + 1) % types.size()]}, {{"threads", 256}, {"vec", 4}}}, 90);
    jobs.emplace_back(KernelConfig{"cast", {types[i], types[(i + 4) % types.size()]}, {{"threads", 64}, {"vec", 2}}}, 80);
  }
  jobs.emplace_back(KernelConfig{"ew", {DType::kF32}, {{"ipt", 1}, {"threads", 256}, {"vec", 4}}}, 90);
  jobs.emplace_back(KernelConfig{"ew", {DType::kF16}, {{"ipt", 1}, {"threads", 128}, {"vec", 2}}}, 80);
  for (const auto& [c, arch] : jobs) ASSERT_TRUE(jit::FindKernelFamily(c.family)->InSpace(c)) << c.Name();
  CompileConfigs(jobs);
}

TEST(KernelVariantsFull, NvrtcCompilesEveryVariantForSm80AndSm90) {
  if (!FullRun()) GTEST_SKIP() << "the full variant space runs with GROVE_VARIANTS_FULL=1 (ctest -L variants_full)";
  std::vector<std::pair<KernelConfig, int>> configs;
  for (const KernelFamily* f : jit::KernelFamilies()) {
    for (const std::vector<DType>& dtypes : f->dtype_lists()) {
      for (const KernelConfig& c : f->Enumerate(dtypes)) {
        configs.emplace_back(c, 80);
        configs.emplace_back(c, 90);
      }
    }
  }
  CompileConfigs(configs);
}

}  // namespace
}  // namespace grove
