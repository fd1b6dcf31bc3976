// The dispatch table's load, checks and write. The only code that touches
// schemas/kernels_generated.h.
#include "jit/dispatch_table.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "flatbuffers/flatbuffers.h"
#include "schemas/kernels_generated.h"

namespace grove::jit {
namespace {

namespace fbk = ::grove::fb::kernels;

// Sizes that keep a table's checks and lookups cheap whatever the file says.
constexpr size_t kMaxEntries = 1 << 20;
constexpr size_t kMaxExtents = 16;
constexpr size_t kMaxParams = 16;
constexpr size_t kMaxDTypes = 4;
constexpr size_t kMaxTableBytes = size_t{1} << 30;

int64_t BucketExtent(int64_t v) {
  if (v <= kExactBucketExtent) return v;
  int64_t p = 1;
  while (p < v && p <= (int64_t{1} << 61)) p <<= 1;
  return p;
}

// What ShapeBucket makes of some extent.
bool IsBucketExtent(int64_t v) { return v >= 0 && (v <= kExactBucketExtent || (v & (v - 1)) == 0); }

bool KnownDType(int v) {
  return v >= static_cast<int>(DType::kF32) && v <= static_cast<int>(DType::kU64) && v != 14;
}

std::string BucketName(const KernelProblem& p) {
  return absl::StrCat(p.family, " ", DTypesName(p.dtypes), " ", p.ToString());
}

// The name of a config without KernelConfig::Name's parse-back rules (an
// entry being checked may not spell a valid name).
std::string Describe(const KernelConfig& c) {
  std::vector<std::string> params;
  for (const auto& [name, value] : c.params) params.push_back(absl::StrCat(name, value));
  return absl::StrCat(c.family, "__", DTypesName(c.dtypes), params.empty() ? "" : "__", absl::StrJoin(params, "_"));
}

const KernelFamily* Lookup(const FamilyLookup& families, absl::string_view name) {
  return families ? families(name) : FindKernelFamily(name);
}

absl::Status CheckEntry(const DispatchEntry& e, const FamilyLookup& families) {
  const KernelProblem& b = e.bucket;
  if (e.arch < 10 || e.arch > 1000) return absl::InvalidArgumentError(absl::StrCat("arch ", e.arch, " is not sm_XY"));
  if (b.family.empty()) return absl::InvalidArgumentError("no family");
  if (e.config.family != b.family) {
    return absl::InvalidArgumentError(absl::StrCat("config family '", e.config.family, "' is not the entry's"));
  }
  if (b.dtypes.empty() || b.dtypes.size() > kMaxDTypes || e.config.dtypes != b.dtypes) {
    return absl::InvalidArgumentError("dtypes missing, too many, or not the config's");
  }
  for (DType t : b.dtypes) {
    if (!KnownDType(static_cast<int>(t))) {
      return absl::InvalidArgumentError(absl::StrCat("unknown dtype ", static_cast<int>(t)));
    }
  }
  if (b.dims.empty() || b.dims.size() > kMaxExtents) return absl::InvalidArgumentError("no extents, or too many");
  for (size_t i = 0; i < b.dims.size(); ++i) {
    const auto& [name, value] = b.dims[i];
    if (name.empty()) return absl::InvalidArgumentError("an extent without a name");
    if (i > 0 && !(b.dims[i - 1].first < name)) {
      return absl::InvalidArgumentError(absl::StrCat("extents not sorted by name or repeated ('", name, "')"));
    }
    if (!IsBucketExtent(value)) {
      return absl::InvalidArgumentError(
          absl::StrCat("extent ", name, "=", value, " is not a shape bucket (0..", kExactBucketExtent, " or a power of two)"));
    }
  }
  if (e.config.params.size() > kMaxParams) return absl::InvalidArgumentError("too many parameters");
  for (size_t i = 1; i < e.config.params.size(); ++i) {
    if (!(e.config.params[i - 1].first < e.config.params[i].first)) {
      return absl::InvalidArgumentError("parameters not sorted by name or repeated");
    }
  }
  if (!std::isfinite(e.measured_us) || e.measured_us < 0 || !std::isfinite(e.generic_us) || e.generic_us < 0) {
    return absl::InvalidArgumentError("a measured time that is negative or not finite");
  }
  if (b.family == kGemmFamily) {
    if (e.config.params.size() != 1 || e.config.params[0].first != kGemmAlgoParam ||
        e.config.params[0].second < 0 || e.config.params[0].second >= kMaxGemmAlgorithms) {
      return absl::InvalidArgumentError(absl::StrCat("a gemm entry's config is {", kGemmAlgoParam, ": 0..",
                                                     kMaxGemmAlgorithms - 1, "}, not ", Describe(e.config)));
    }
    return absl::OkStatus();
  }
  const KernelFamily* family = Lookup(families, b.family);
  if (family == nullptr) return absl::InvalidArgumentError(absl::StrCat("unknown kernel family '", b.family, "'"));
  bool built = false;
  for (const std::vector<DType>& list : family->dtype_lists()) built |= list == b.dtypes;
  if (!built) {
    return absl::InvalidArgumentError(
        absl::StrCat("family '", b.family, "' is not built for dtypes ", DTypesName(b.dtypes)));
  }
  const std::vector<KernelConfig> space = family->Enumerate(b.dtypes);
  if (std::find(space.begin(), space.end(), e.config) == space.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat("config ", Describe(e.config), " is not in family '", b.family, "''s variant space"));
  }
  return absl::OkStatus();
}

template <typename Vec>
std::vector<std::pair<std::string, int64_t>> ReadExtents(const Vec* v) {
  std::vector<std::pair<std::string, int64_t>> out;
  if (v == nullptr) return out;
  for (const fbk::Extent* x : *v) {
    if (x == nullptr) continue;
    out.emplace_back(x->name() != nullptr ? x->name()->str() : "", x->value());
  }
  return out;
}

}  // namespace

KernelProblem ShapeBucket(const KernelProblem& problem) {
  KernelProblem b = problem;
  for (auto& [name, value] : b.dims) value = BucketExtent(value);
  return b;
}

std::string DTypesName(absl::Span<const DType> dtypes) {
  std::vector<std::string> names;
  for (DType t : dtypes) names.emplace_back(DTypeName(t));
  return absl::StrJoin(names, ",");
}

std::string DispatchTable::Key(int arch, const KernelProblem& bucket) {
  std::string key = absl::StrCat(arch, "|", bucket.family, "|");
  for (DType t : bucket.dtypes) absl::StrAppend(&key, static_cast<int>(t), ",");
  absl::StrAppend(&key, "|");
  for (const auto& [name, value] : bucket.dims) absl::StrAppend(&key, name, "=", value, ",");
  return key;
}

absl::Status DispatchTable::Add(DispatchEntry entry, const FamilyLookup& families) {
  const std::string where = absl::StrCat("entry ", entries_.size(), " (sm_", entry.arch, " ",
                                         BucketName(entry.bucket), ")");
  if (absl::Status s = CheckEntry(entry, families); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": ", s.message()));
  }
  if (entries_.size() >= kMaxEntries) return absl::InvalidArgumentError(absl::StrCat(where, ": too many entries"));
  std::string key = Key(entry.arch, entry.bucket);
  auto [it, inserted] = index_.emplace(std::move(key), entries_.size());
  if (!inserted) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": the same key as entry ", it->second, " (one config per arch, family, dtypes and bucket)"));
  }
  entries_.push_back(std::move(entry));
  return absl::OkStatus();
}

const DispatchEntry* DispatchTable::Find(int arch, const KernelProblem& bucket) const {
  auto it = index_.find(Key(arch, bucket));
  return it == index_.end() ? nullptr : &entries_[it->second];
}

absl::StatusOr<DispatchTable> DispatchTable::Load(absl::Span<const uint8_t> bytes, const FamilyLookup& families) {
  auto bad = [](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat("not a valid kernel table: ", why));
  };
  if (bytes.size() < sizeof(flatbuffers::uoffset_t) + 8) return bad("truncated (too short)");
  if (bytes.size() > kMaxTableBytes) return bad("larger than 1 GiB");
  if (!fbk::KernelTableBufferHasIdentifier(bytes.data() + sizeof(flatbuffers::uoffset_t))) {
    return bad("no kernel table identifier (GKTB)");
  }
  flatbuffers::Verifier::Options vo;
  vo.max_tables = 16 * kMaxEntries;
  flatbuffers::Verifier verifier(bytes.data(), bytes.size(), vo);
  if (!fbk::VerifySizePrefixedKernelTableBuffer(verifier)) return bad("truncated or corrupt (FlatBuffers verifier)");
  const fbk::KernelTable* t = fbk::GetSizePrefixedKernelTable(bytes.data());
  if (t->table_version() > kDispatchTableVersion || t->table_version() < 1) {
    return bad(absl::StrCat("table version ", t->table_version(), " (this grove reads up to ",
                            kDispatchTableVersion, ")"));
  }
  DispatchTable table;
  if (const fbk::Provenance* p = t->provenance(); p != nullptr) {
    TableProvenance& q = table.provenance_;
    if (p->gpu() != nullptr) q.gpu = p->gpu()->str();
    q.arch = p->arch();
    q.driver_version = p->driver_version();
    q.nvrtc_version = p->nvrtc_version();
    if (p->date() != nullptr) q.date = p->date()->str();
    if (p->grove_version() != nullptr) q.grove_version = p->grove_version()->str();
    q.emulated = p->emulated();
    if (p->command() != nullptr) q.command = p->command()->str();
  }
  if (table.provenance_.gpu.empty() || table.provenance_.date.empty() || table.provenance_.grove_version.empty()) {
    return bad("its provenance (GPU, date, grove version) is missing");
  }
  if (t->entries() != nullptr) {
    if (t->entries()->size() > kMaxEntries) return bad("too many entries");
    for (const fbk::Entry* e : *t->entries()) {
      DispatchEntry d;
      if (e == nullptr) return bad(absl::StrCat("entry ", table.entries_.size(), " is empty"));
      d.arch = e->arch();
      const std::string family = e->family() != nullptr ? e->family()->str() : "";
      std::vector<DType> dtypes;
      if (e->dtypes() != nullptr) {
        if (e->dtypes()->size() > kMaxDTypes) return bad(absl::StrCat("entry ", table.entries_.size(), ": too many dtypes"));
        for (int v : *e->dtypes()) dtypes.push_back(static_cast<DType>(v));
      }
      d.bucket = KernelProblem{family, dtypes, ReadExtents(e->bucket())};
      d.problem = KernelProblem{family, dtypes, ReadExtents(e->problem())};
      d.config.family = family;
      d.config.dtypes = dtypes;
      if (e->params() != nullptr) {
        for (const fbk::Param* p : *e->params()) {
          if (p == nullptr) continue;
          d.config.params.emplace_back(p->name() != nullptr ? p->name()->str() : "", p->value());
        }
      }
      d.measured_us = e->measured_us();
      d.generic_us = e->generic_us();
      if (absl::Status s = table.Add(std::move(d), families); !s.ok()) return bad(s.message());
    }
  }
  return table;
}

absl::StatusOr<DispatchTable> DispatchTable::LoadFile(const std::string& path, const FamilyLookup& families) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::InvalidArgumentError(absl::StrCat("kernel table ", path, ": cannot be read"));
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  if (size < 0 || static_cast<uint64_t>(size) > kMaxTableBytes) {
    return absl::InvalidArgumentError(absl::StrCat("kernel table ", path, ": not a regular file of at most 1 GiB"));
  }
  in.seekg(0, std::ios::beg);
  std::vector<uint8_t> bytes(static_cast<size_t>(size));
  if (size > 0 && !in.read(reinterpret_cast<char*>(bytes.data()), size)) {
    return absl::InvalidArgumentError(absl::StrCat("kernel table ", path, ": read failed"));
  }
  absl::StatusOr<DispatchTable> t = Load(bytes, families);
  if (!t.ok()) return absl::InvalidArgumentError(absl::StrCat("kernel table ", path, ": ", t.status().message()));
  return t;
}

std::vector<uint8_t> DispatchTable::Serialize() const {
  flatbuffers::FlatBufferBuilder fbb;
  auto extents = [&](const KernelProblem& p) {
    std::vector<flatbuffers::Offset<fbk::Extent>> out;
    for (const auto& [name, value] : p.dims) out.push_back(fbk::CreateExtentDirect(fbb, name.c_str(), value));
    return fbb.CreateVector(out);
  };
  std::vector<size_t> order(entries_.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return Key(entries_[a].arch, entries_[a].bucket) < Key(entries_[b].arch, entries_[b].bucket);
  });
  std::vector<flatbuffers::Offset<fbk::Entry>> entries;
  for (size_t i : order) {
    const DispatchEntry& e = entries_[i];
    std::vector<int> dtypes;
    for (DType t : e.bucket.dtypes) dtypes.push_back(static_cast<int>(t));
    std::vector<flatbuffers::Offset<fbk::Param>> params;
    for (const auto& [name, value] : e.config.params) params.push_back(fbk::CreateParamDirect(fbb, name.c_str(), value));
    auto family = fbb.CreateString(e.bucket.family);
    auto dt = fbb.CreateVector(dtypes);
    auto bucket = extents(e.bucket);
    auto ps = fbb.CreateVector(params);
    auto problem = extents(e.problem);
    entries.push_back(fbk::CreateEntry(fbb, e.arch, family, dt, bucket, ps, e.measured_us, e.generic_us, problem));
  }
  const TableProvenance& p = provenance_;
  auto prov = fbk::CreateProvenanceDirect(fbb, p.gpu.c_str(), p.arch, p.driver_version, p.nvrtc_version, p.date.c_str(),
                                          p.grove_version.c_str(), p.emulated, p.command.c_str());
  auto list = fbb.CreateVector(entries);
  fbb.FinishSizePrefixed(fbk::CreateKernelTable(fbb, kDispatchTableVersion, prov, list), fbk::KernelTableIdentifier());
  return std::vector<uint8_t>(fbb.GetBufferPointer(), fbb.GetBufferPointer() + fbb.GetSize());
}

absl::Status DispatchTable::WriteFile(const std::string& path) const {
  const std::vector<uint8_t> bytes = Serialize();
  const std::string tmp = absl::StrCat(path, ".tmp");
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) return absl::InvalidArgumentError(absl::StrCat("kernel table ", path, ": cannot be written"));
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    if (!out.flush()) return absl::InvalidArgumentError(absl::StrCat("kernel table ", path, ": write failed"));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    return absl::InvalidArgumentError(absl::StrCat("kernel table ", path, ": cannot be written"));
  }
  return absl::OkStatus();
}

std::string ShippedTablesDir() {
  if (const char* env = std::getenv("GROVE_KERNEL_TABLES"); env != nullptr && env[0] != '\0') return env;
  std::error_code ec;
#ifdef GROVE_TABLES_INSTALL_DIR
  if (std::filesystem::is_directory(GROVE_TABLES_INSTALL_DIR, ec)) return GROVE_TABLES_INSTALL_DIR;
#endif
#ifdef GROVE_TABLES_SOURCE_DIR
  return GROVE_TABLES_SOURCE_DIR;
#else
  return "";
#endif
}

std::vector<std::string> TableFiles(const std::string& dir) {
  std::vector<std::string> files;
  if (dir.empty()) return files;
  std::error_code ec;
  for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code fe;
    if (it->path().extension() == ".bin" && it->is_regular_file(fe)) files.push_back(it->path().string());
  }
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace grove::jit
