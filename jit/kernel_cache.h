// NVRTC compilation and the kernel cache (memory + disk).
//
// A module's key is a hash of its source (ModuleSource + every embedded
// kernel header), the NVRTC options, the target arch and the NVRTC version;
// the entry on disk also stores that key material in full, so a hash
// collision or an entry from another NVRTC reads as stale, never as a hit.
//
// Memory: one cache per process (KernelCache::Global()), shared by every
// session and device; each key compiles once, also when several threads ask
// for it first at the same time (the others wait for the one compile).
// Disk: options.disk_dir when set, else $GROVE_CACHE_DIR ("off": no disk), else
// $XDG_CACHE_HOME/grove/kernels, else $HOME/.cache/grove/kernels. An entry is
// one file <key-hex>.cubin with a header (magic, format version, key
// material, payload size, checksum), written to a temporary file in the same
// folder and renamed into place (atomic). A truncated, corrupt or stale entry
// is counted in the stats, removed and compiled again.
//
// Example (what the CUDA device does):
//   absl::StatusOr<std::shared_ptr<const CachedModule>> m =
//       KernelCache::Global().Get({"selftest", {DType::kF32}}, device.arch());
//   ... cudaLibraryLoadData(&lib, (*m)->cubin.data(), ...) ...
//   if the driver refuses it: m = KernelCache::Global().Rebuild(module, arch);
//
// Thread safety: every function here may be called from any thread.
#ifndef GROVE_JIT_KERNEL_CACHE_H_
#define GROVE_JIT_KERNEL_CACHE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "jit/module.h"

namespace grove::jit {

// NVRTC's version as major * 1000 + minor * 10 (12080, 13000), or 0 when
// NVRTC cannot be loaded.
int NvrtcVersion();
// Archs NVRTC can target ("sm_80" -> 80), ascending; empty without NVRTC.
std::vector<int> NvrtcSupportedArchs();
// Parses "sm_90" / "90" / "9.0" (also "compute_90") to 90.
absl::StatusOr<int> ParseArch(absl::string_view text);

struct CompileResult {
  std::string cubin;  // ELF, loadable with cudaLibraryLoadData
  std::string log;    // NVRTC's log (warnings), may be empty
  double compile_ms = 0;
};
// The NVRTC options of every module compile for sm_<arch>, e.g.
// "--gpu-architecture=sm_90 -std=c++17" (IEEE math, no fast-math); part of
// the cache key.
std::vector<std::string> NvrtcOptions(int arch);
// Compiles `source` (with KernelHeaders() as its headers, included by their
// names, "jit/kernels/prelude.cuh") to a cubin for sm_<arch>. A failure is an
// InvalidArgument status (compile error, unsupported arch) or Internal (NVRTC
// itself failed) carrying NVRTC's full log. Needs no GPU. Thread-safe.
// `extra_options` follow NvrtcOptions(arch) (tests: "--ptxas-options=-v"
// puts ptxas's register and spill report in the log).
absl::StatusOr<CompileResult> CompileModuleSource(absl::string_view source, int arch,
                                                  absl::Span<const std::string> extra_options = {});
// The names of the kernels (entry points) defined in a cubin, from its ELF
// symbol table (STT_FUNC symbols marked as CUDA entries), sorted; for tests
// and `grove compile`. The bytes are untrusted: anything that is not a
// well-formed ELF64 symbol table is an InvalidArgument error.
absl::StatusOr<std::vector<std::string>> CubinEntryPoints(absl::string_view cubin);

struct CacheOptions {
  std::string disk_dir;  // "" = $GROVE_CACHE_DIR or the default above
  // false: memory only, whatever GROVE_CACHE_DIR says. GROVE_CACHE_DIR=off
  // also turns the disk cache off.
  bool use_disk = true;
};

struct CacheStats {
  int64_t compiles = 0;       // NVRTC runs
  int64_t memory_hits = 0;
  int64_t disk_hits = 0;
  int64_t disk_corrupt = 0;   // truncated, bad checksum or bad header
  int64_t disk_stale = 0;     // other key material, or refused by the driver
  int64_t disk_writes = 0;
  int64_t disk_write_errors = 0;  // the cache still works without its disk
  double compile_ms = 0;      // total NVRTC time
};

// How a Get was served.
enum class CacheSource { kMemory, kDisk, kCompiled };

struct CachedModule {
  ModuleSpec module;
  int arch = 0;
  uint64_t key = 0;
  std::string cubin;
  CacheSource source = CacheSource::kCompiled;  // of the first Get
};

class KernelCache {
 public:
  explicit KernelCache(CacheOptions options = {});
  ~KernelCache();
  KernelCache(const KernelCache&) = delete;
  KernelCache& operator=(const KernelCache&) = delete;

  // The process-wide cache (default options, environment applied).
  static KernelCache& Global();

  // The compiled module for sm_<arch>: memory, then disk, then NVRTC.
  // `source_out`, when given, tells where it came from on this call.
  absl::StatusOr<std::shared_ptr<const CachedModule>> Get(const ModuleSpec& module, int arch,
                                                          CacheSource* source_out = nullptr);
  // The driver refused a cubin this cache handed out: counts it stale, drops
  // it from memory and disk, and compiles the module again (skipping the
  // disk). A Rebuild that finds the module already loading (another Rebuild)
  // waits for that one instead of compiling twice.
  absl::StatusOr<std::shared_ptr<const CachedModule>> Rebuild(const ModuleSpec& module, int arch);

  // The cache key of a module (what names its file); no compile.
  absl::StatusOr<uint64_t> Key(const ModuleSpec& module, int arch) const;
  // The folder in use, "" when the disk cache is off.
  const std::string& disk_dir() const;
  CacheStats stats() const;
  // Drops the in-memory entries (tests, benchmarks of the disk path).
  void ClearMemory();

  // The full key material of a module (what its disk entry stores and its
  // key hashes, with the module's source); for tests and tools.
  absl::StatusOr<std::string> KeyMaterial(const ModuleSpec& module, int arch) const;
  // The path of a module's disk entry, "" when the disk cache is off.
  absl::StatusOr<std::string> EntryPath(const ModuleSpec& module, int arch) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// --- The disk entry format (exposed for tests and tools) --------------------
// All integers little-endian; K = key material size, N = payload size.
//   [0, 8)          magic "GRVKCACH"
//   [8, 12)         u32 format version (kCacheFormatVersion)
//   [12, 16)        u32 K
//   [16, 24)        u64 N
//   [24, 32)        u64 Fingerprint64 of the payload
//   [32, 32+K)      key material
//   [32+K, 40+K)    u64 Fingerprint64 of bytes [0, 32+K) (the header)
//   [40+K, 40+K+N)  payload (the cubin)
inline constexpr char kCacheMagic[] = "GRVKCACH";
inline constexpr uint32_t kCacheFormatVersion = 1;
inline constexpr size_t kCacheFixedHeaderSize = 32;

std::string EncodeCacheEntry(absl::string_view key_material, absl::string_view payload);
enum class CacheEntryCheck { kOk, kCorrupt, kStale };
// kCorrupt: short, bad magic/version/sizes or a checksum mismatch; kStale: a
// well-formed entry for other key material. On kOk, `payload` is the cubin.
CacheEntryCheck DecodeCacheEntry(absl::string_view file, absl::string_view key_material,
                                 std::string* payload);

}  // namespace grove::jit

#endif  // GROVE_JIT_KERNEL_CACHE_H_
