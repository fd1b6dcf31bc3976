// The kernel cache (jit/kernel_cache.h): one compile per key in memory, also
// under concurrent first requests; disk entries that survive a new cache
// object; truncated, corrupt and stale entries detected, counted, removed and
// rebuilt; a disk that cannot be written; compile errors with NVRTC's log;
// and the ELF reader on hostile bytes. NVRTC needs no GPU.
#include "jit/kernel_cache.h"

#include <stdlib.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <latch>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "gtest/gtest.h"
#include "jit/module.h"

namespace grove::jit {
namespace {

const ModuleSpec kSelftest{"selftest", {DType::kF32}};
constexpr int kArch = 90;

std::string NewTempDir() {
  const char* base = std::getenv("GROVE_TEST_TMP");
  std::string root = base != nullptr && base[0] != '\0' ? base : "/tmp";
  std::filesystem::create_directories(root);
  std::string templ = root + "/kernel_cache_XXXXXX";
  const char* made = mkdtemp(templ.data());
  EXPECT_NE(made, nullptr) << templ;
  return templ;
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void WriteAll(const std::string& path, const std::string& data) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << data;
}

uint64_t GetU64(const std::string& b, size_t at) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(b[at + i]);
  return v;
}
void SetU64(std::string* b, size_t at, uint64_t v) {
  for (int i = 0; i < 8; ++i) (*b)[at + i] = static_cast<char>((v >> (8 * i)) & 0xff);
}

class KernelCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    unsetenv("GROVE_CACHE_DIR");
    dir_ = NewTempDir();
  }
  void TearDown() override {
    std::error_code ec;
    std::filesystem::permissions(dir_, std::filesystem::perms::owner_all, ec);
    std::filesystem::remove_all(dir_, ec);
  }
  CacheOptions Options() const { return {.disk_dir = dir_}; }

  // A cache on dir_ with the selftest module already compiled into it.
  std::string WarmEntry() {
    KernelCache cache(Options());
    auto m = cache.Get(kSelftest, kArch);
    EXPECT_TRUE(m.ok()) << m.status();
    return m.ok() ? (*m)->cubin : "";
  }

  std::string dir_;
};

TEST_F(KernelCacheTest, ColdCompileThenMemoryHitThenDiskHit) {
  KernelCache cache(Options());
  EXPECT_EQ(cache.disk_dir(), dir_);
  CacheSource source = CacheSource::kMemory;
  auto first = cache.Get(kSelftest, kArch, &source);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(source, CacheSource::kCompiled);
  EXPECT_EQ((*first)->source, CacheSource::kCompiled);
  EXPECT_EQ((*first)->arch, kArch);
  EXPECT_EQ((*first)->module, kSelftest);
  EXPECT_EQ((*first)->key, cache.Key(kSelftest, kArch).value());
  EXPECT_EQ((*first)->cubin.substr(0, 4), "\x7f" "ELF");

  auto second = cache.Get(kSelftest, kArch, &source);
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(source, CacheSource::kMemory);
  EXPECT_EQ(second->get(), first->get());
  CacheStats s = cache.stats();
  EXPECT_EQ(s.compiles, 1);
  EXPECT_EQ(s.memory_hits, 1);
  EXPECT_EQ(s.disk_hits, 0);
  EXPECT_EQ(s.disk_writes, 1);
  EXPECT_GT(s.compile_ms, 0);

  const std::string path = cache.EntryPath(kSelftest, kArch).value();
  EXPECT_EQ(path, absl::StrFormat("%s/%016x.cubin", dir_, (*first)->key));
  EXPECT_TRUE(std::filesystem::exists(path));
  // No temporary files are left behind.
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir_), {}), 1);

  KernelCache other(Options());
  auto from_disk = other.Get(kSelftest, kArch, &source);
  ASSERT_TRUE(from_disk.ok()) << from_disk.status();
  EXPECT_EQ(source, CacheSource::kDisk);
  EXPECT_EQ((*from_disk)->source, CacheSource::kDisk);
  EXPECT_EQ((*from_disk)->cubin, (*first)->cubin);
  EXPECT_EQ(other.stats().disk_hits, 1);
  EXPECT_EQ(other.stats().compiles, 0);

  // ClearMemory sends the next Get to the disk again.
  other.ClearMemory();
  ASSERT_TRUE(other.Get(kSelftest, kArch, &source).ok());
  EXPECT_EQ(source, CacheSource::kDisk);
  EXPECT_EQ(other.stats().disk_hits, 2);
}

TEST_F(KernelCacheTest, KeysDependOnModuleAndArch) {
  KernelCache cache(Options());
  const uint64_t k90 = cache.Key(kSelftest, 90).value();
  EXPECT_NE(k90, cache.Key(kSelftest, 80).value());
  EXPECT_NE(k90, cache.Key({"selftest", {DType::kF16}}, 90).value());
  EXPECT_EQ(k90, KernelCache(Options()).Key(kSelftest, 90).value());
  const std::string material = cache.KeyMaterial(kSelftest, 90).value();
  EXPECT_NE(material.find(absl::StrCat("nvrtc=", NvrtcVersion())), std::string::npos) << material;
  EXPECT_NE(material.find("arch=sm_90"), std::string::npos) << material;
  EXPECT_NE(material.find("file=selftest"), std::string::npos) << material;
  EXPECT_NE(material.find("types=f32"), std::string::npos) << material;
  EXPECT_NE(material.find("--gpu-architecture=sm_90"), std::string::npos) << material;

  auto missing = cache.Get({"no_such_file", {DType::kF32}}, 90);
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound) << missing.status();
  EXPECT_EQ(cache.stats().compiles, 0);
}

// A damaged entry: counted as corrupt, removed, compiled again, and the file
// written afterwards is good (a third cache gets a disk hit).
struct Damage {
  const char* name;
  std::function<void(std::string*)> apply;
};

class CorruptEntryTest : public KernelCacheTest, public ::testing::WithParamInterface<Damage> {};

TEST_P(CorruptEntryTest, DetectedAndRebuilt) {
  const std::string cubin = WarmEntry();
  const std::string path = KernelCache(Options()).EntryPath(kSelftest, kArch).value();
  std::string bytes = ReadAll(path);
  ASSERT_GT(bytes.size(), cubin.size());
  GetParam().apply(&bytes);
  WriteAll(path, bytes);

  KernelCache cache(Options());
  CacheSource source;
  auto m = cache.Get(kSelftest, kArch, &source);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(source, CacheSource::kCompiled);
  EXPECT_EQ((*m)->cubin, cubin);
  CacheStats s = cache.stats();
  EXPECT_EQ(s.disk_corrupt, 1);
  EXPECT_EQ(s.disk_stale, 0);
  EXPECT_EQ(s.compiles, 1);
  EXPECT_EQ(s.disk_writes, 1);

  KernelCache after(Options());
  ASSERT_TRUE(after.Get(kSelftest, kArch, &source).ok());
  EXPECT_EQ(source, CacheSource::kDisk);
  EXPECT_EQ(after.stats().disk_corrupt, 0);
}

INSTANTIATE_TEST_SUITE_P(
    Damages, CorruptEntryTest,
    ::testing::Values(
        Damage{"Empty", [](std::string* b) { b->clear(); }},
        Damage{"ShortHeader", [](std::string* b) { b->resize(20); }},
        Damage{"TruncatedPayload", [](std::string* b) { b->resize(b->size() / 2); }},
        Damage{"LastByteMissing", [](std::string* b) { b->pop_back(); }},
        Damage{"ExtraByte", [](std::string* b) { b->push_back('x'); }},
        Damage{"PayloadByteFlipped", [](std::string* b) { (*b)[b->size() - 100] ^= 0x20; }},
        Damage{"MagicByteFlipped", [](std::string* b) { (*b)[0] ^= 0x01; }},
        Damage{"KeyMaterialByteFlipped", [](std::string* b) { (*b)[kCacheFixedHeaderSize + 3] ^= 0x01; }},
        Damage{"PayloadSizeChanged", [](std::string* b) { (*b)[16] ^= 0x01; }},
        Damage{"HeaderChecksumFlipped",
               [](std::string* b) {
                 const size_t k = static_cast<unsigned char>((*b)[12]) | static_cast<unsigned char>((*b)[13]) << 8;
                 (*b)[kCacheFixedHeaderSize + k] ^= 0x01;
               }},
        // Another format version, with a header checksum that matches it.
        Damage{"WrongVersion",
               [](std::string* b) {
                 (*b)[8] = 7;
                 const size_t k = static_cast<unsigned char>((*b)[12]) | static_cast<unsigned char>((*b)[13]) << 8;
                 const size_t end = kCacheFixedHeaderSize + k;
                 SetU64(b, end, Fingerprint64(absl::string_view(*b).substr(0, end)));
               }}),
    [](const ::testing::TestParamInfo<Damage>& info) { return std::string(info.param.name); });

// A well-formed entry under our file name but for other key material (another
// NVRTC, another arch, a hash collision): stale, replaced.
TEST_F(KernelCacheTest, EntryForOtherKeyMaterialIsStale) {
  const std::string cubin = WarmEntry();
  KernelCache probe(Options());
  const std::string path = probe.EntryPath(kSelftest, kArch).value();
  const std::string material = probe.KeyMaterial(kSelftest, kArch).value();
  const std::vector<std::string> others = {
      absl::StrReplaceAll(material, {{absl::StrCat("nvrtc=", NvrtcVersion()), "nvrtc=99990"}}),
      absl::StrReplaceAll(material, {{"arch=sm_90", "arch=sm_80"}}),
  };
  for (const std::string& other : others) {
    ASSERT_NE(other, material);
    WriteAll(path, EncodeCacheEntry(other, cubin));
    std::string payload;
    EXPECT_EQ(DecodeCacheEntry(ReadAll(path), material, &payload), CacheEntryCheck::kStale);

    KernelCache cache(Options());
    CacheSource source;
    ASSERT_TRUE(cache.Get(kSelftest, kArch, &source).ok());
    EXPECT_EQ(source, CacheSource::kCompiled);
    EXPECT_EQ(cache.stats().disk_stale, 1);
    EXPECT_EQ(cache.stats().disk_corrupt, 0);
    EXPECT_EQ(cache.stats().compiles, 1);
    EXPECT_EQ(DecodeCacheEntry(ReadAll(path), material, &payload), CacheEntryCheck::kOk);
    EXPECT_EQ(payload, cubin);
  }
}

// The cache folder is untrusted: an entry that is a FIFO (whose read would
// block), a directory or an oversized file is treated as corrupt, compiled
// again, and replaced by a regular file.
TEST_F(KernelCacheTest, EntriesThatAreNotRegularFilesAreCorruptNotBlocking) {
  const std::string cubin = WarmEntry();
  KernelCache probe(Options());
  const std::string path = probe.EntryPath(kSelftest, kArch).value();
  const std::string material = probe.KeyMaterial(kSelftest, kArch).value();
  ::unlink(path.c_str());
  ASSERT_EQ(::mkfifo(path.c_str(), 0644), 0);
  KernelCache cache(Options());
  auto get = std::async(std::launch::async, [&] {
    CacheSource source;
    absl::Status s = cache.Get(kSelftest, kArch, &source).status();
    EXPECT_EQ(source, CacheSource::kCompiled);
    return s;
  });
  if (get.wait_for(std::chrono::seconds(30)) == std::future_status::timeout) {
    ADD_FAILURE() << "reading a FIFO cache entry blocked";
    const int fd = ::open(path.c_str(), O_RDWR | O_NONBLOCK);  // releases the reader
    get.wait();
    if (fd >= 0) ::close(fd);
  }
  EXPECT_TRUE(get.get().ok());
  EXPECT_EQ(cache.stats().disk_corrupt, 1);
  EXPECT_EQ(cache.stats().compiles, 1);
  struct stat st;
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));
  std::string payload;
  EXPECT_EQ(DecodeCacheEntry(ReadAll(path), material, &payload), CacheEntryCheck::kOk);
  EXPECT_EQ(payload, cubin);
}

TEST_F(KernelCacheTest, EncodeDecodeRoundTrip) {
  std::string payload;
  const std::string entry = EncodeCacheEntry("key material", "payload bytes");
  EXPECT_EQ(entry.substr(0, 8), "GRVKCACH");
  EXPECT_EQ(entry.size(), kCacheFixedHeaderSize + 12 + 8 + 13);
  EXPECT_EQ(GetU64(entry, 24), Fingerprint64("payload bytes"));
  EXPECT_EQ(DecodeCacheEntry(entry, "key material", &payload), CacheEntryCheck::kOk);
  EXPECT_EQ(payload, "payload bytes");
  EXPECT_EQ(DecodeCacheEntry(entry, "other material", &payload), CacheEntryCheck::kStale);
  const std::string empty = EncodeCacheEntry("", "");
  EXPECT_EQ(DecodeCacheEntry(empty, "", &payload), CacheEntryCheck::kOk);
  EXPECT_EQ(payload, "");
  // Every truncation of a good entry is corrupt, never a crash or a hit.
  for (size_t n = 0; n < entry.size(); ++n) {
    EXPECT_EQ(DecodeCacheEntry(entry.substr(0, n), "key material", &payload), CacheEntryCheck::kCorrupt) << n;
  }
}

TEST_F(KernelCacheTest, RebuildCountsStaleAndCompilesAgain) {
  KernelCache cache(Options());
  auto first = cache.Get(kSelftest, kArch);
  ASSERT_TRUE(first.ok()) << first.status();
  auto rebuilt = cache.Rebuild(kSelftest, kArch);
  ASSERT_TRUE(rebuilt.ok()) << rebuilt.status();
  EXPECT_NE(rebuilt->get(), first->get());
  EXPECT_EQ((*rebuilt)->source, CacheSource::kCompiled);
  EXPECT_EQ((*rebuilt)->cubin, (*first)->cubin);
  CacheStats s = cache.stats();
  EXPECT_EQ(s.compiles, 2);
  EXPECT_EQ(s.disk_stale, 1);
  EXPECT_EQ(s.disk_hits, 0);
  // The next Get is the rebuilt module, and the disk holds it.
  auto again = cache.Get(kSelftest, kArch);
  EXPECT_EQ(again->get(), rebuilt->get());
  CacheSource source;
  ASSERT_TRUE(KernelCache(Options()).Get(kSelftest, kArch, &source).ok());
  EXPECT_EQ(source, CacheSource::kDisk);
}

// A folder that cannot be written: the cache works from memory and NVRTC,
// and counts the failed writes.
TEST_F(KernelCacheTest, UnwritableDiskStillWorks) {
  // Below a regular file: no folder can be created (holds for root too).
  WriteAll(dir_ + "/file", "x");
  std::vector<std::string> dirs = {dir_ + "/file/kernels"};
  if (geteuid() != 0) {  // root writes through permissions
    const std::string ro = dir_ + "/read_only";
    std::filesystem::create_directories(ro);
    chmod(ro.c_str(), 0555);
    dirs.push_back(ro);
  }
  for (const std::string& d : dirs) {
    KernelCache cache({.disk_dir = d});
    CacheSource source;
    auto m = cache.Get(kSelftest, kArch, &source);
    ASSERT_TRUE(m.ok()) << d << ": " << m.status();
    EXPECT_EQ(source, CacheSource::kCompiled);
    ASSERT_TRUE(cache.Get(kSelftest, kArch, &source).ok());
    EXPECT_EQ(source, CacheSource::kMemory);
    CacheStats s = cache.stats();
    EXPECT_EQ(s.compiles, 1) << d;
    EXPECT_EQ(s.disk_write_errors, 1) << d;
    EXPECT_EQ(s.disk_writes, 0) << d;
  }
}

TEST_F(KernelCacheTest, ConcurrentFirstRequestsCompileOnce) {
  KernelCache cache(Options());
  constexpr int kThreads = 8;
  std::latch start(kThreads);
  std::vector<std::shared_ptr<const CachedModule>> got(kThreads);
  std::vector<CacheSource> sources(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      start.arrive_and_wait();
      auto m = cache.Get(kSelftest, kArch, &sources[t]);
      ASSERT_TRUE(m.ok()) << m.status();
      got[t] = *m;
    });
  }
  for (std::thread& th : threads) th.join();
  CacheStats s = cache.stats();
  EXPECT_EQ(s.compiles, 1);
  EXPECT_EQ(s.memory_hits, kThreads - 1);
  EXPECT_EQ(s.disk_writes, 1);
  int compiled = 0;
  for (int t = 0; t < kThreads; ++t) {
    ASSERT_NE(got[t], nullptr);
    EXPECT_EQ(got[t].get(), got[0].get());
    compiled += sources[t] == CacheSource::kCompiled;
  }
  EXPECT_EQ(compiled, 1);
}

// Gets racing ClearMemory: every Get succeeds with the same bytes, from
// memory or disk, and nothing compiles after the first.
TEST_F(KernelCacheTest, GetsRacingClearMemory) {
  const std::string cubin = WarmEntry();
  KernelCache cache(Options());
  std::atomic<bool> stop{false};
  std::thread clearer([&] {
    while (!stop) cache.ClearMemory();
  });
  std::vector<std::thread> threads;
  std::atomic<int> bad{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 200; ++i) {
        auto m = cache.Get(kSelftest, kArch);
        if (!m.ok() || (*m)->cubin != cubin) ++bad;
      }
    });
  }
  for (std::thread& th : threads) th.join();
  stop = true;
  clearer.join();
  EXPECT_EQ(bad, 0);
  CacheStats s = cache.stats();
  EXPECT_EQ(s.compiles, 0);
  EXPECT_EQ(s.memory_hits + s.disk_hits, 800);
  EXPECT_GE(s.disk_hits, 1);
}

TEST_F(KernelCacheTest, CompileErrorCarriesNvrtcLog) {
  auto r = CompileModuleSource("this is not C++", 90);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  // NVRTC's own diagnostic: "<program>(1): error: ..."
  EXPECT_NE(r.status().message().find("grove_module.cu(1): error"), std::string::npos) << r.status();
  EXPECT_NE(r.status().message().find("sm_90"), std::string::npos) << r.status();
}

TEST_F(KernelCacheTest, FailedCompileIsNotCached) {
  // An arch NVRTC cannot target fails every waiter, is not cached, and the
  // next Get tries again.
  KernelCache cache(Options());
  constexpr int kThreads = 4;
  std::latch start(kThreads);
  std::vector<absl::Status> errors(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      start.arrive_and_wait();
      errors[t] = cache.Get(kSelftest, 11).status();
    });
  }
  for (std::thread& th : threads) th.join();
  for (const absl::Status& e : errors) {
    EXPECT_EQ(e.code(), absl::StatusCode::kInvalidArgument) << e;
    EXPECT_NE(e.message().find("selftest__f32"), std::string::npos) << e;
  }
  const int64_t compiles = cache.stats().compiles;
  EXPECT_GE(compiles, 1);
  EXPECT_FALSE(cache.Get(kSelftest, 11).ok());
  EXPECT_EQ(cache.stats().compiles, compiles + 1);
  EXPECT_EQ(cache.stats().disk_writes, 0);
  EXPECT_EQ(cache.stats().memory_hits, 0);
}

TEST_F(KernelCacheTest, EnvironmentOverridesTheDefaultFolder) {
  const std::string env_dir = dir_ + "/from_env/nested";
  setenv("GROVE_CACHE_DIR", env_dir.c_str(), 1);
  // An explicit folder (grove compile --cache-dir) beats the environment.
  EXPECT_EQ(KernelCache(Options()).disk_dir(), dir_);
  {
    KernelCache cache;
    EXPECT_EQ(cache.disk_dir(), env_dir);
    EXPECT_TRUE(std::filesystem::is_directory(env_dir));
    ASSERT_TRUE(cache.Get(kSelftest, kArch).ok());
    EXPECT_TRUE(std::filesystem::exists(cache.EntryPath(kSelftest, kArch).value()));
    EXPECT_EQ(cache.stats().disk_writes, 1);
    KernelCache memory_only({.disk_dir = dir_, .use_disk = false});
    EXPECT_EQ(memory_only.disk_dir(), "");
  }
  setenv("GROVE_CACHE_DIR", "off", 1);
  {
    KernelCache cache;
    EXPECT_EQ(cache.disk_dir(), "");
    EXPECT_EQ(cache.EntryPath(kSelftest, kArch).value(), "");
    CacheSource source;
    ASSERT_TRUE(cache.Get(kSelftest, kArch, &source).ok());
    EXPECT_EQ(source, CacheSource::kCompiled);
    EXPECT_EQ(cache.stats().disk_writes + cache.stats().disk_write_errors, 0);
  }
  unsetenv("GROVE_CACHE_DIR");
  // The defaults: XDG_CACHE_HOME, then HOME.
  const std::string xdg = dir_ + "/xdg";
  setenv("XDG_CACHE_HOME", xdg.c_str(), 1);
  EXPECT_EQ(KernelCache().disk_dir(), xdg + "/grove/kernels");
  unsetenv("XDG_CACHE_HOME");
  const char* old_home = std::getenv("HOME");
  const std::string saved_home = old_home != nullptr ? old_home : "";
  const std::string home = dir_ + "/home";
  setenv("HOME", home.c_str(), 1);
  EXPECT_EQ(KernelCache().disk_dir(), home + "/.cache/grove/kernels");
  EXPECT_TRUE(std::filesystem::is_directory(home + "/.cache/grove/kernels"));
  EXPECT_EQ(KernelCache({.use_disk = false}).disk_dir(), "");
  if (old_home != nullptr) {
    setenv("HOME", saved_home.c_str(), 1);
  } else {
    unsetenv("HOME");
  }
}

TEST(NvrtcTest, VersionArchsAndParse) {
  EXPECT_GE(NvrtcVersion(), 11000);
  const std::vector<int> archs = NvrtcSupportedArchs();
  EXPECT_NE(std::find(archs.begin(), archs.end(), 80), archs.end());
  EXPECT_NE(std::find(archs.begin(), archs.end(), 90), archs.end());
  EXPECT_TRUE(std::is_sorted(archs.begin(), archs.end()));
  EXPECT_EQ(ParseArch("sm_90").value(), 90);
  EXPECT_EQ(ParseArch("90").value(), 90);
  EXPECT_EQ(ParseArch("9.0").value(), 90);
  EXPECT_EQ(ParseArch("8.6").value(), 86);
  EXPECT_EQ(ParseArch(" sm_120 ").value(), 120);
  EXPECT_EQ(ParseArch("compute_80").value(), 80);
  for (const char* bad : {"", "sm_", "sm_9x", "x90", "9.", ".9", "9.10", "-90", "sm_-1", "0", "9.0.1"}) {
    EXPECT_FALSE(ParseArch(bad).ok()) << bad;
  }
}

TEST(CubinEntryPointsTest, ListsTheKernels) {
  auto compiled = CompileModuleSource(ModuleSource(kSelftest).value(), 90);
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  auto entries = CubinEntryPoints(compiled->cubin);
  ASSERT_TRUE(entries.ok()) << entries.status();
  EXPECT_EQ(*entries, std::vector<std::string>{"selftest__f32"});

  // Hostile bytes: every prefix, and every byte of the headers flipped, give
  // an error or a list, never a crash (ASan builds check the reads).
  const std::string& cubin = compiled->cubin;
  for (size_t n = 0; n < cubin.size(); n += (n < 256 ? 1 : 61)) {
    auto r = CubinEntryPoints(cubin.substr(0, n));
    if (n < 64) EXPECT_FALSE(r.ok()) << n;
  }
  for (size_t i = 0; i < cubin.size(); i += (i < 128 ? 1 : 7)) {
    for (unsigned char x : {0x01, 0x80, 0xff}) {
      std::string bad = cubin;
      bad[i] = static_cast<char>(bad[i] ^ x);
      (void)CubinEntryPoints(bad);
    }
  }
  for (const std::string& garbage : {std::string(), std::string("this is not an ELF file"),
                                     std::string(64, '\0'), std::string("\x7f" "ELF", 4),
                                     std::string(4096, '\xff')}) {
    auto r = CubinEntryPoints(garbage);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
  }
}

}  // namespace
}  // namespace grove::jit
