// The kernel cache: one compile per key in memory, cubins on disk between
// processes. See jit/kernel_cache.h for the key, the folder and the format.
#include "jit/kernel_cache.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <atomic>
#include <filesystem>
#include <optional>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/hash/hash.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"

namespace grove::jit {
namespace {

void PutU32(std::string* out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
void PutU64(std::string* out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
uint32_t GetU32(absl::string_view b, size_t at) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(b[at + i]);
  return v;
}
uint64_t GetU64(absl::string_view b, size_t at) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(b[at + i]);
  return v;
}

const char* Env(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && v[0] != '\0' ? v : nullptr;
}

std::string ResolveDiskDir(const CacheOptions& options) {
  if (!options.use_disk) return "";
  if (!options.disk_dir.empty()) return options.disk_dir;  // asked for explicitly (--cache-dir)
  if (const char* env = Env("GROVE_CACHE_DIR")) return std::string(env) == "off" ? "" : env;
  if (const char* xdg = Env("XDG_CACHE_HOME")) return absl::StrCat(xdg, "/grove/kernels");
  if (const char* home = Env("HOME")) return absl::StrCat(home, "/.cache/grove/kernels");
  return "";
}

// Above this a cache entry is not read (cubins are a few MiB at most).
constexpr uint64_t kMaxCacheEntryBytes = uint64_t{1} << 30;

// The whole file, or nullopt when it cannot be opened (no entry). The cache
// folder is untrusted like any input: an entry that is not a regular file (a
// FIFO would block the read), is larger than kMaxCacheEntryBytes or changes
// size while read comes back empty, which DecodeCacheEntry calls corrupt (and
// the rewrite replaces it). The same checks as lib/format/regular_file.h,
// which jit/ does not depend on.
std::optional<std::string> ReadFile(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return std::nullopt;
  if (!S_ISREG(st.st_mode)) return std::string();
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) return std::nullopt;
  std::string data;
  const int flags = ::fcntl(fd, F_GETFL);
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size < 0 ||
      static_cast<uint64_t>(st.st_size) > kMaxCacheEntryBytes || flags < 0 ||
      ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0) {
    ::close(fd);
    return data;
  }
  const size_t size = static_cast<size_t>(st.st_size);
  data.resize(size);
  size_t done = 0;
  while (done < size) {
    const ssize_t n = ::read(fd, data.data() + done, size - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
  char extra;
  const bool grew = done == size && ::read(fd, &extra, 1) > 0;
  ::close(fd);
  if (done != size || grew) data.clear();
  return data;
}

// Writes `data` to a temporary file next to `path`, then renames it into
// place, so a reader sees the old entry, the new one, or none.
absl::Status WriteFileAtomic(const std::string& dir, const std::string& path, absl::string_view data) {
  std::string tmp = absl::StrCat(path, ".tmp.XXXXXX");
  const int fd = ::mkstemp(tmp.data());
  if (fd < 0) return absl::UnavailableError(absl::StrCat("cannot create a file in ", dir, ": ", std::strerror(errno)));
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      return absl::UnavailableError(absl::StrCat("cannot write ", tmp, ": ", std::strerror(err)));
    }
    done += static_cast<size_t>(n);
  }
  ::fchmod(fd, 0644);
  if (::close(fd) != 0 || ::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    return absl::UnavailableError(absl::StrCat("cannot write ", path, ": ", std::strerror(err)));
  }
  return absl::OkStatus();
}

}  // namespace

std::string EncodeCacheEntry(absl::string_view key_material, absl::string_view payload) {
  std::string out;
  out.reserve(kCacheFixedHeaderSize + key_material.size() + 8 + payload.size());
  out.append(kCacheMagic, 8);
  PutU32(&out, kCacheFormatVersion);
  PutU32(&out, static_cast<uint32_t>(key_material.size()));
  PutU64(&out, payload.size());
  PutU64(&out, Fingerprint64(payload));
  out.append(key_material.data(), key_material.size());
  PutU64(&out, Fingerprint64(out));
  out.append(payload.data(), payload.size());
  return out;
}

CacheEntryCheck DecodeCacheEntry(absl::string_view file, absl::string_view key_material,
                                 std::string* payload) {
  if (file.size() < kCacheFixedHeaderSize + 8) return CacheEntryCheck::kCorrupt;
  if (file.substr(0, 8) != absl::string_view(kCacheMagic, 8)) return CacheEntryCheck::kCorrupt;
  if (GetU32(file, 8) != kCacheFormatVersion) return CacheEntryCheck::kCorrupt;
  const uint64_t k = GetU32(file, 12);
  const uint64_t n = GetU64(file, 16);
  const uint64_t header_end = kCacheFixedHeaderSize + k;  // k < 2^32: no overflow
  if (header_end + 8 > file.size()) return CacheEntryCheck::kCorrupt;
  if (n != file.size() - header_end - 8) return CacheEntryCheck::kCorrupt;
  if (GetU64(file, header_end) != Fingerprint64(file.substr(0, header_end))) {
    return CacheEntryCheck::kCorrupt;
  }
  const absl::string_view body = file.substr(header_end + 8);
  if (GetU64(file, 24) != Fingerprint64(body)) return CacheEntryCheck::kCorrupt;
  if (file.substr(kCacheFixedHeaderSize, k) != key_material) return CacheEntryCheck::kStale;
  payload->assign(body.data(), body.size());
  return CacheEntryCheck::kOk;
}

namespace {

// The memory cache's key, and a view of it for lookups that allocate nothing
// (the memory hit is the hot path of every launch).
struct MemoryKey {
  std::string file;
  std::vector<DType> types;
  bool indirect = false;
  int arch = 0;
  std::vector<std::pair<std::string, int>> params;
};
struct MemoryKeyView {
  absl::string_view file;
  absl::Span<const DType> types;
  bool indirect = false;
  int arch = 0;
  absl::Span<const std::pair<std::string, int>> params;
};
MemoryKeyView View(const MemoryKey& k) { return {k.file, k.types, k.indirect, k.arch, k.params}; }
MemoryKeyView View(const MemoryKeyView& k) { return k; }
struct MemoryKeyHash {
  using is_transparent = void;
  template <typename K>
  size_t operator()(const K& k) const {
    const MemoryKeyView v = View(k);
    return absl::HashOf(v.file, v.types, v.indirect, v.arch, v.params);
  }
};
struct MemoryKeyEq {
  using is_transparent = void;
  template <typename A, typename B>
  bool operator()(const A& a, const B& b) const {
    const MemoryKeyView x = View(a), y = View(b);
    return x.arch == y.arch && x.indirect == y.indirect && x.file == y.file && x.types == y.types &&
           x.params == y.params;
  }
};

}  // namespace

struct KernelCache::Impl {
  // One module for one arch; filled once by the thread that created it.
  struct Entry {
    absl::Notification done;
    absl::StatusOr<std::shared_ptr<const CachedModule>> result = absl::UnknownError("pending");
  };

  std::string disk_dir;
  // Writers: inserting, finishing and dropping entries, the stats. Memory
  // hits take it shared.
  mutable absl::Mutex mu;
  absl::flat_hash_map<MemoryKey, std::shared_ptr<Entry>, MemoryKeyHash, MemoryKeyEq> entries
      ABSL_GUARDED_BY(mu);
  CacheStats stats ABSL_GUARDED_BY(mu);  // all but memory_hits
  std::atomic<int64_t> memory_hits{0};

  void Count(int64_t CacheStats::*field) {
    absl::MutexLock lock(&mu);
    ++(stats.*field);
  }

  // Disk, then NVRTC (only NVRTC when `skip_disk`); runs without the lock.
  absl::StatusOr<std::shared_ptr<const CachedModule>> Load(const KernelCache& cache,
                                                           const ModuleSpec& module, int arch,
                                                           bool skip_disk);
  absl::StatusOr<std::shared_ptr<const CachedModule>> GetOrLoad(const KernelCache& cache,
                                                                const ModuleSpec& module, int arch,
                                                                bool rebuild, CacheSource* source_out);
};

KernelCache::KernelCache(CacheOptions options) : impl_(std::make_unique<Impl>()) {
  impl_->disk_dir = ResolveDiskDir(options);
  if (!impl_->disk_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(impl_->disk_dir, ec);  // failures show as write errors
  }
}

KernelCache::~KernelCache() = default;

KernelCache& KernelCache::Global() {
  static KernelCache* const cache = new KernelCache();  // never destroyed: used until exit
  return *cache;
}

const std::string& KernelCache::disk_dir() const { return impl_->disk_dir; }

CacheStats KernelCache::stats() const {
  absl::MutexLock lock(&impl_->mu);
  CacheStats s = impl_->stats;
  s.memory_hits = impl_->memory_hits.load(std::memory_order_relaxed);
  return s;
}

void KernelCache::ClearMemory() {
  absl::MutexLock lock(&impl_->mu);
  // In-flight entries stay: their waiters and their loader still need them.
  absl::erase_if(impl_->entries, [](const auto& kv) { return kv.second->done.HasBeenNotified(); });
}

absl::StatusOr<std::string> KernelCache::KeyMaterial(const ModuleSpec& module, int arch) const {
  absl::StatusOr<std::string> source = ModuleSource(module);
  if (!source.ok()) return source.status();
  std::vector<std::string> types;
  for (DType t : module.types) types.emplace_back(DTypeName(t));
  // A variant's parameters add a line; a module without them keeps the
  // material (and so the key) it had before variants existed.
  const std::string params = module.params.empty() ? "" : absl::StrCat("params=", ParamsName(module.params), "\n");
  return absl::StrFormat(
      "grove kernel module\nfile=%s\ntypes=%s\n%sindirect=%d\narch=sm_%d\nnvrtc=%d\nheaders=%016x\nsource=%016x\noptions=%s\n",
      module.file, absl::StrJoin(types, ","), params, module.indirect ? 1 : 0, arch, NvrtcVersion(),
      KernelHeadersFingerprint(), Fingerprint64(*source), absl::StrJoin(NvrtcOptions(arch), " "));
}

absl::StatusOr<uint64_t> KernelCache::Key(const ModuleSpec& module, int arch) const {
  absl::StatusOr<std::string> source = ModuleSource(module);
  if (!source.ok()) return source.status();
  absl::StatusOr<std::string> material = KeyMaterial(module, arch);
  if (!material.ok()) return material.status();
  return Fingerprint64(*material, Fingerprint64(*source));
}

absl::StatusOr<std::string> KernelCache::EntryPath(const ModuleSpec& module, int arch) const {
  if (impl_->disk_dir.empty()) return std::string();
  absl::StatusOr<uint64_t> key = Key(module, arch);
  if (!key.ok()) return key.status();
  return absl::StrFormat("%s/%016x.cubin", impl_->disk_dir, *key);
}

absl::StatusOr<std::shared_ptr<const CachedModule>> KernelCache::Impl::Load(const KernelCache& cache,
                                                                            const ModuleSpec& module,
                                                                            int arch, bool skip_disk) {
  if (arch <= 0) return absl::InvalidArgumentError(absl::StrCat("bad CUDA arch ", arch));
  absl::StatusOr<std::string> source = ModuleSource(module);
  if (!source.ok()) return source.status();
  absl::StatusOr<std::string> material = cache.KeyMaterial(module, arch);
  if (!material.ok()) return material.status();
  auto out = std::make_shared<CachedModule>();
  out->module = module;
  out->arch = arch;
  out->key = Fingerprint64(*material, Fingerprint64(*source));
  const std::string path =
      disk_dir.empty() ? std::string() : absl::StrFormat("%s/%016x.cubin", disk_dir, out->key);

  if (!path.empty()) {
    if (skip_disk) {
      ::unlink(path.c_str());
    } else if (std::optional<std::string> file = ReadFile(path)) {
      switch (DecodeCacheEntry(*file, *material, &out->cubin)) {
        case CacheEntryCheck::kOk:
          out->source = CacheSource::kDisk;
          Count(&CacheStats::disk_hits);
          return out;
        case CacheEntryCheck::kCorrupt:
          Count(&CacheStats::disk_corrupt);
          break;
        case CacheEntryCheck::kStale:
          Count(&CacheStats::disk_stale);
          break;
      }
      ::unlink(path.c_str());
    }
  }

  absl::StatusOr<CompileResult> compiled = CompileModuleSource(*source, arch);
  {
    absl::MutexLock lock(&mu);
    ++stats.compiles;
    if (compiled.ok()) stats.compile_ms += compiled->compile_ms;
  }
  if (!compiled.ok()) {
    return absl::Status(compiled.status().code(),
                        absl::StrCat("kernel module ", module.file, Suffix(module), ": ",
                                     compiled.status().message()));
  }
  out->cubin = std::move(compiled->cubin);
  out->source = CacheSource::kCompiled;
  if (!path.empty()) {
    const bool written = WriteFileAtomic(disk_dir, path, EncodeCacheEntry(*material, out->cubin)).ok();
    Count(written ? &CacheStats::disk_writes : &CacheStats::disk_write_errors);
  }
  return out;
}

absl::StatusOr<std::shared_ptr<const CachedModule>> KernelCache::Impl::GetOrLoad(
    const KernelCache& cache, const ModuleSpec& module, int arch, bool rebuild,
    CacheSource* source_out) {
  const MemoryKeyView key{module.file, module.types, module.indirect, arch, module.params};
  if (!rebuild) {  // the hot path: a finished entry (finished entries are good ones)
    absl::ReaderMutexLock lock(&mu);
    auto it = entries.find(key);
    if (it != entries.end() && it->second->done.HasBeenNotified()) {
      memory_hits.fetch_add(1, std::memory_order_relaxed);
      if (source_out != nullptr) *source_out = CacheSource::kMemory;
      return it->second->result;
    }
  }
  std::shared_ptr<Entry> entry;
  bool mine = false;
  {
    absl::MutexLock lock(&mu);
    auto it = entries.find(key);
    if (rebuild) ++stats.disk_stale;  // the driver refused what we handed out
    if (it != entries.end() && rebuild && it->second->done.HasBeenNotified()) {
      // Rebuild of a finished entry: drop it; one in flight is joined instead.
      entries.erase(it);
      it = entries.end();
    }
    if (it != entries.end()) {
      entry = it->second;
      if (entry->done.HasBeenNotified()) {  // finished since the shared look
        memory_hits.fetch_add(1, std::memory_order_relaxed);
        if (source_out != nullptr) *source_out = CacheSource::kMemory;
        return entry->result;
      }
    } else {
      entry = std::make_shared<Entry>();
      entries.emplace(MemoryKey{module.file, module.types, module.indirect, arch, module.params}, entry);
      mine = true;
    }
  }
  if (!mine) {  // another thread is loading this module: wait for its result
    entry->done.WaitForNotification();
    if (entry->result.ok()) {
      memory_hits.fetch_add(1, std::memory_order_relaxed);
      if (source_out != nullptr) *source_out = CacheSource::kMemory;
    }
    return entry->result;
  }
  absl::StatusOr<std::shared_ptr<const CachedModule>> result = Load(cache, module, arch, rebuild);
  {
    absl::MutexLock lock(&mu);
    entry->result = result;
    if (!result.ok()) {  // not cached: a later Get tries again
      auto it = entries.find(key);
      if (it != entries.end() && it->second == entry) entries.erase(it);
    }
    entry->done.Notify();
  }
  if (source_out != nullptr && result.ok()) *source_out = (*result)->source;
  return result;
}

absl::StatusOr<std::shared_ptr<const CachedModule>> KernelCache::Get(const ModuleSpec& module, int arch,
                                                                     CacheSource* source_out) {
  return impl_->GetOrLoad(*this, module, arch, /*rebuild=*/false, source_out);
}

absl::StatusOr<std::shared_ptr<const CachedModule>> KernelCache::Rebuild(const ModuleSpec& module, int arch) {
  return impl_->GetOrLoad(*this, module, arch, /*rebuild=*/true, nullptr);
}

}  // namespace grove::jit
