// The pre-tuned dispatch table (schemas/kernels.fbs): per (GPU arch, kernel
// family, dtypes, shape bucket) the kernel variant `grove tune` measured
// fastest, and where the numbers come from. The dispatcher
// (lib/backends/cuda/kernel_choice.h) looks a step's problem up here when the
// step is prepared; a miss goes to the cost model (jit/cost_model.h).
//
//   absl::StatusOr<DispatchTable> t = DispatchTable::LoadFile("sm90.bin");
//   const DispatchEntry* e = t->Find(90, ShapeBucket(problem));
//   if (e != nullptr && family->Valid(e->config, problem)) ... e->config ...
//
// Shape buckets (ShapeBucket): each extent of a problem up to
// kExactBucketExtent kept as it is, larger ones rounded up to a power of
// two. The bucket is a function of the problem alone, so one table serves
// every model and every session's shape_buckets option. Powers of two cover
// 1..2048 in 12 buckets per extent, the granularity at which a variant's best
// tile changes (occupancy and padding move by factors, not steps); small
// extents stay exact because there the best tile changes with each value
// (decode's M = 1..8 rows) and because some extents are counts or flags, not
// sizes (a fused chain's operand count, a transpose flag), which rounding
// would merge. A kernel reads its actual extents at run time. A variant found for a
// bucket may not fit a member of it (a vector width that does not divide an
// odd row): the dispatcher checks Valid on the actual problem.
//
// Family "gemm" is cuBLASLt's: its entries have the one parameter "algo",
// the index among cuBLASLt's heuristic answers for the GEMM (extents m, n, k,
// batch) measured fastest.
//
// Loading verifies the FlatBuffer and checks every entry: a known family
// (FindKernelFamily, or "gemm"), dtypes the family is built for, a config in
// its space, extents >= 0 and powers of two, no two entries with one key.
// An error names the entry. Backend-free; thread-safe once loaded (const).
#ifndef GROVE_JIT_DISPATCH_TABLE_H_
#define GROVE_JIT_DISPATCH_TABLE_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "jit/kernel_config.h"

namespace grove::jit {

// cuBLASLt's pseudo-family in tables, and its one parameter.
inline constexpr absl::string_view kGemmFamily = "gemm";
inline constexpr absl::string_view kGemmAlgoParam = "algo";
// Most cuBLASLt heuristic answers a table may pick from (the index < this).
inline constexpr int kMaxGemmAlgorithms = 16;
// The newest table_version this build reads.
inline constexpr int kDispatchTableVersion = 1;

// Extents up to this are their own bucket.
inline constexpr int64_t kExactBucketExtent = 8;
// `problem` with each extent above kExactBucketExtent rounded up to a power
// of two.
KernelProblem ShapeBucket(const KernelProblem& problem);
// "f32" / "f16,f32".
std::string DTypesName(absl::Span<const DType> dtypes);

struct TableProvenance {
  std::string gpu;
  int arch = 0;
  int driver_version = 0;
  int nvrtc_version = 0;
  std::string date;
  std::string grove_version;
  bool emulated = false;
  std::string command;
};

struct DispatchEntry {
  int arch = 0;
  KernelConfig config;  // family, dtypes and parameters
  KernelProblem bucket; // family, dtypes, extents as ShapeBucket makes them
  double measured_us = 0;
  double generic_us = 0;
  KernelProblem problem;  // the member of the bucket that was timed
};

// How a table finds a family; FindKernelFamily by default (tests pass
// their own families).
using FamilyLookup = std::function<const KernelFamily*(absl::string_view)>;

class DispatchTable {
 public:
  DispatchTable() = default;

  // From a table's bytes (a size-prefixed FlatBuffer). INVALID_ARGUMENT
  // naming what is wrong: not a table, truncated, a newer version, or an
  // entry (by index, family and bucket) that fails a check.
  static absl::StatusOr<DispatchTable> Load(absl::Span<const uint8_t> bytes, const FamilyLookup& families = {});
  // From a file; the error also names the path.
  static absl::StatusOr<DispatchTable> LoadFile(const std::string& path, const FamilyLookup& families = {});

  // Adds an entry after the same checks as Load; an entry whose key is taken
  // is refused.
  absl::Status Add(DispatchEntry entry, const FamilyLookup& families = {});
  // The entry for (arch, bucket's family, dtypes and extents); nullptr when
  // there is none. `bucket` must be ShapeBucket's of a problem.
  const DispatchEntry* Find(int arch, const KernelProblem& bucket) const;

  // The table as bytes (a size-prefixed FlatBuffer), entries in a stable order.
  std::vector<uint8_t> Serialize() const;
  absl::Status WriteFile(const std::string& path) const;

  const TableProvenance& provenance() const { return provenance_; }
  void set_provenance(TableProvenance p) { provenance_ = std::move(p); }
  const std::vector<DispatchEntry>& entries() const { return entries_; }
  bool empty() const { return entries_.empty(); }

 private:
  static std::string Key(int arch, const KernelProblem& bucket);

  TableProvenance provenance_;
  std::vector<DispatchEntry> entries_;
  absl::flat_hash_map<std::string, size_t> index_;  // Key -> entries_ index
};

// The folder of the kernel tables shipped with grove: $GROVE_KERNEL_TABLES
// when set, else the installed share/grove/tables when it exists, else the
// source tree's tables/ (a build that is not installed).
std::string ShippedTablesDir();
// The *.bin files of `dir`, sorted by name; none when it does not exist.
std::vector<std::string> TableFiles(const std::string& dir);

}  // namespace grove::jit

#endif  // GROVE_JIT_DISPATCH_TABLE_H_
