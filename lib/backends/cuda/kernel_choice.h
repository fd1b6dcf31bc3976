// The dispatcher: which kernel variant runs a step, chosen when the step is
// prepared (after DietCode's shape-to-micro-kernel dispatcher). For a
// problem (family, dtypes, extents) it takes, in order:
//   1. "table": the entry of a dispatch table (jit/dispatch_table.h) for the
//      device's arch and the problem's shape bucket, if its config is valid
//      for the actual problem. The session's own table
//      (SessionOptions::kernel_table) is searched before the shipped ones;
//   2. "cost model": the cheapest valid variant by the family's cost terms
//      (jit/cost_model.h) for the device's GpuTraits;
//   3. "generic": the family's generic variant (no valid variant, or a
//      family this build does not know).
// Each choice is recorded per node for `grove inspect --device cuda --json`
// and `grove compile`.
//
//   // in a CUDA prepare:
//   jit::KernelProblem problem{"softmax", {DType::kF32}, {{"n", n}, {"rows", rows}}};
//   jit::KernelConfig config = ChooseVariant(ctx, problem);
//   ... jit::ConfigModule(config), config.Get("threads", 256) ...
//
//   // a GEMM prepare (cuBLASLt's algorithm from the table's "gemm" entry):
//   g.algorithm = ChooseGemmAlgorithm(ctx, g);
#ifndef GROVE_LIB_BACKENDS_CUDA_KERNEL_CHOICE_H_
#define GROVE_LIB_BACKENDS_CUDA_KERNEL_CHOICE_H_

#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "grove/grove.h"
#include "jit/dispatch_table.h"
#include "jit/kernel_config.h"
#include "lib/backends/cuda/device.h"
#include "lib/ir/op_registry.h"

namespace grove::cuda {

enum class ChoiceSource { kTable, kCostModel, kGeneric, kTuning };
// "table", "cost model", "generic", "tuning" (a variant forced by grove tune).
absl::string_view ChoiceSourceName(ChoiceSource source);

struct KernelChoice {
  jit::KernelConfig config;
  ChoiceSource source = ChoiceSource::kGeneric;
  jit::KernelProblem problem;
  jit::KernelProblem bucket;  // jit::ShapeBucket(problem)
  double estimate_us = 0;     // the cost model's for config (0 for a family it does not know)
  double measured_us = 0;     // a table hit: what grove tune measured
};

// What the cost model assumes of `device`: GpuTraits::FromArch of its arch,
// with its SM count when it knows it.
jit::GpuTraits DeviceTraits(const Device& device);

// One session's dispatcher: its tables, the device's traits and the choices
// its prepares made. Thread-safe.
class KernelDispatch {
 public:
  // `tables` are searched in order. `families`: FindKernelFamily unless set
  // (tests).
  KernelDispatch(jit::GpuTraits gpu, std::vector<std::shared_ptr<const jit::DispatchTable>> tables,
                 jit::FamilyLookup families = {});

  const jit::GpuTraits& gpu() const { return gpu_; }
  const std::vector<std::shared_ptr<const jit::DispatchTable>>& tables() const { return tables_; }

  // The choice for `problem` (see the file comment); records nothing.
  KernelChoice Choose(const jit::KernelProblem& problem) const;
  // A GEMM (problem family "gemm", extents m, n, k, batch): the table's
  // cuBLASLt algorithm index as config param "algo", else "generic" (-1:
  // cuBLASLt's first heuristic answer).
  KernelChoice ChooseGemm(const jit::KernelProblem& problem) const;

  // Records `choice` for `node` (the last choice per family of a node stays).
  void Record(const ir::Node& node, const KernelChoice& choice);
  // The choices recorded for `node`, in the order first made.
  std::vector<KernelChoiceInfo> Choices(const ir::Node& node) const;
  // Every problem chosen for since this dispatcher was made, in the order
  // first met, without repeats (grove tune's search space).
  std::vector<jit::KernelProblem> problems() const;

  // A bucketed plan's choice (ExecContext::bucket): the one kept for
  // `node`'s problems of this family, dtypes and extent names in `bucket`,
  // when there is one and it is valid for `problem`; else nullopt. Keep
  // stores one (the first, made in the plan of the bucket's bound, which the
  // executor plans before its shapes). Nothing is kept while a variant is
  // forced (grove tune times each).
  std::optional<KernelChoice> Kept(const ir::Node& node, const void* bucket, const jit::KernelProblem& problem) const;
  void Keep(const ir::Node& node, const void* bucket, const KernelChoice& choice);

  // grove tune: `config` runs every problem of its family, dtypes and
  // `bucket` (when valid for the problem) until cleared.
  void Force(const jit::KernelProblem& bucket, const jit::KernelConfig& config);
  void ClearForced();

 private:
  const jit::KernelFamily* Family(absl::string_view name) const;
  const jit::DispatchEntry* FindEntry(const jit::KernelProblem& bucket) const;

  const jit::GpuTraits gpu_;
  const std::vector<std::shared_ptr<const jit::DispatchTable>> tables_;
  const jit::FamilyLookup families_;

  mutable absl::Mutex mu_;
  struct NodeChoices {
    std::vector<KernelChoice> choices;
  };
  absl::flat_hash_map<const ir::Node*, NodeChoices> records_ ABSL_GUARDED_BY(mu_);
  std::vector<jit::KernelProblem> problems_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, size_t> problem_index_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, jit::KernelConfig> forced_ ABSL_GUARDED_BY(mu_);
  // Kept choices by (the node's subgraph and index, bucket, KeptKey of the
  // problem): a node's place, which a fused node made anew for each plan
  // keeps (ExecContext::BucketKept).
  absl::flat_hash_map<std::tuple<int, int, const void*, std::string>, KernelChoice> kept_ ABSL_GUARDED_BY(mu_);
};

// The tables shipped with grove for `arch`: every *.bin of the tables folder
// ($GROVE_KERNEL_TABLES when set, else the installed share/grove/tables,
// else the source tree's tables/), loaded once per process. A file that
// fails to load is skipped; its error is in `warnings` (each call).
std::vector<std::shared_ptr<const jit::DispatchTable>> ShippedTables(std::vector<std::string>* warnings);

// A session's dispatcher on `device`: options.kernel_table (INVALID_ARGUMENT
// naming the file when it cannot be read or is not a valid table), then the
// shipped tables (a shipped table that fails to load is skipped with a
// warning to options.log_sink).
absl::StatusOr<std::unique_ptr<KernelDispatch>> MakeSessionDispatch(const Device& device,
                                                                    const SessionOptions& options);

// The variant for `problem` in a CUDA prepare: the session's dispatcher
// (ExecContext::dispatch) chooses and records it for ctx.node(); without one,
// the cost model for the device's traits decides. In a bucketed plan
// (ExecContext::bucket) every family's variant is chosen at the bucket's
// bound and kept for the node in every shape of the bucket
// (KernelDispatch::Kept), so a bucket's graph is refreshed with launches of
// the modules it captured; a choice not valid for the family's problem is
// its generic variant.
jit::KernelConfig ChooseVariant(const ir::KernelContext& ctx, const jit::KernelProblem& problem);
// ChooseVariant's choice in full (its source and estimate), recorded alike.
KernelChoice ChooseAndRecord(const ir::KernelContext& ctx, const jit::KernelProblem& problem);

// The cuBLASLt algorithm index for GemmDesc::algorithm of `gemm` (its dtype,
// m, n, k, batch): a table's "gemm" entry, else -1 (the heuristic's first).
// Recorded like ChooseVariant's.
int ChooseGemmAlgorithm(const ir::KernelContext& ctx, const GemmDesc& gemm);
// The "gemm" problem of a GemmDesc.
jit::KernelProblem GemmProblem(const GemmDesc& gemm);

}  // namespace grove::cuda

#endif  // GROVE_LIB_BACKENDS_CUDA_KERNEL_CHOICE_H_
