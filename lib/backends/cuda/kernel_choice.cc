#include "lib/backends/cuda/kernel_choice.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "jit/cost_model.h"
#include "lib/backends/cuda/exec_context.h"

namespace grove::cuda {
namespace {

// A problem's or bucket's identity: family, dtypes and extents.
std::string ProblemKey(const jit::KernelProblem& p) {
  return absl::StrCat(p.family, "|", jit::DTypesName(p.dtypes), "|", p.ToString());
}

KernelChoiceInfo Info(const ir::Node& node, const KernelChoice& c) {
  KernelChoiceInfo info;
  info.config = c.config.Name();
  info.source = std::string(ChoiceSourceName(c.source));
  info.problem = c.problem.ToString();
  info.bucket = c.bucket.ToString();
  info.estimate_us = c.estimate_us;
  info.measured_us = c.measured_us;
  info.op = node.type;
  info.node = node.name;
  return info;
}

struct Shipped {
  std::vector<std::shared_ptr<const jit::DispatchTable>> tables;
  std::vector<std::string> errors;
};

// The tables of a folder, loaded once per process (per folder: tests point
// $GROVE_KERNEL_TABLES at folders of their own).
std::shared_ptr<const Shipped> LoadShipped(const std::string& dir) {
  static absl::Mutex mu(absl::kConstInit);
  static auto* cache = new absl::flat_hash_map<std::string, std::shared_ptr<const Shipped>>;
  absl::MutexLock lock(&mu);
  std::shared_ptr<const Shipped>& slot = (*cache)[dir];
  if (slot != nullptr) return slot;
  auto s = std::make_shared<Shipped>();
  for (const std::string& path : jit::TableFiles(dir)) {
    absl::StatusOr<jit::DispatchTable> t = jit::DispatchTable::LoadFile(path);
    if (!t.ok()) {
      s->errors.push_back(absl::StrCat("shipped ", t.status().message(), "; skipped (the cost model decides instead)"));
      continue;
    }
    if (t->provenance().emulated) {
      s->errors.push_back(absl::StrCat("shipped kernel table ", path,
                                       " was timed on the emulated device (for tests); skipped"));
      continue;
    }
    s->tables.push_back(std::make_shared<const jit::DispatchTable>(*std::move(t)));
  }
  slot = std::move(s);
  return slot;
}

}  // namespace

absl::string_view ChoiceSourceName(ChoiceSource source) {
  switch (source) {
    case ChoiceSource::kTable: return "table";
    case ChoiceSource::kCostModel: return "cost model";
    case ChoiceSource::kGeneric: return "generic";
    case ChoiceSource::kTuning: return "tuning";
  }
  return "generic";
}

jit::GpuTraits DeviceTraits(const Device& device) {
  jit::GpuTraits gpu = jit::GpuTraits::FromArch(device.arch());
  if (device.sm_count() > 0) gpu.sms = device.sm_count();
  return gpu;
}

KernelDispatch::KernelDispatch(jit::GpuTraits gpu, std::vector<std::shared_ptr<const jit::DispatchTable>> tables,
                               jit::FamilyLookup families)
    : gpu_(gpu), tables_(std::move(tables)), families_(std::move(families)) {}

const jit::KernelFamily* KernelDispatch::Family(absl::string_view name) const {
  return families_ ? families_(name) : jit::FindKernelFamily(name);
}

const jit::DispatchEntry* KernelDispatch::FindEntry(const jit::KernelProblem& bucket) const {
  for (const auto& table : tables_) {
    if (table == nullptr) continue;
    if (const jit::DispatchEntry* e = table->Find(gpu_.arch, bucket); e != nullptr) return e;
  }
  return nullptr;
}

KernelChoice KernelDispatch::Choose(const jit::KernelProblem& problem) const {
  KernelChoice c;
  c.problem = problem;
  c.bucket = jit::ShapeBucket(problem);
  const jit::KernelFamily* family = Family(problem.family);
  if (family == nullptr) {
    // A family this build does not know: its kernels' default geometry.
    c.config = jit::KernelConfig{problem.family, problem.dtypes, {}};
    c.source = ChoiceSource::kGeneric;
    return c;
  }
  auto take = [&](const jit::KernelConfig& config, ChoiceSource source) {
    c.config = config;
    c.source = source;
    c.estimate_us = family->Cost(config, problem, gpu_).estimate_us;
  };
  {
    absl::MutexLock lock(&mu_);
    auto it = forced_.find(ProblemKey(c.bucket));
    if (it != forced_.end() && family->Valid(it->second, problem)) {
      take(it->second, ChoiceSource::kTuning);
      return c;
    }
  }
  if (const jit::DispatchEntry* e = FindEntry(c.bucket); e != nullptr && family->Valid(e->config, problem)) {
    take(e->config, ChoiceSource::kTable);
    c.measured_us = e->measured_us;
    return c;
  }
  bool ranked = false;
  jit::RankedVariant best = jit::BestVariant(*family, problem, gpu_, &ranked);
  c.config = std::move(best.config);
  c.source = ranked ? ChoiceSource::kCostModel : ChoiceSource::kGeneric;
  c.estimate_us = best.cost.estimate_us;
  return c;
}

KernelChoice KernelDispatch::ChooseGemm(const jit::KernelProblem& problem) const {
  KernelChoice c;
  c.problem = problem;
  c.bucket = jit::ShapeBucket(problem);
  c.config = jit::KernelConfig{problem.family, problem.dtypes, {}};
  c.source = ChoiceSource::kGeneric;
  {
    absl::MutexLock lock(&mu_);
    auto it = forced_.find(ProblemKey(c.bucket));
    if (it != forced_.end()) {
      c.config = it->second;
      c.source = ChoiceSource::kTuning;
      return c;
    }
  }
  if (const jit::DispatchEntry* e = FindEntry(c.bucket); e != nullptr) {
    c.config = e->config;
    c.source = ChoiceSource::kTable;
    c.measured_us = e->measured_us;
  }
  return c;
}

void KernelDispatch::Record(const ir::Node& node, const KernelChoice& choice) {
  absl::MutexLock lock(&mu_);
  std::vector<KernelChoice>& list = records_[&node].choices;
  auto same = std::find_if(list.begin(), list.end(),
                           [&](const KernelChoice& c) { return c.config.family == choice.config.family; });
  if (same != list.end()) {
    *same = choice;
  } else {
    list.push_back(choice);
  }
  if (problem_index_.emplace(ProblemKey(choice.problem), problems_.size()).second) {
    problems_.push_back(choice.problem);
  }
}

std::vector<KernelChoiceInfo> KernelDispatch::Choices(const ir::Node& node) const {
  absl::MutexLock lock(&mu_);
  std::vector<KernelChoiceInfo> out;
  auto it = records_.find(&node);
  if (it == records_.end()) return out;
  for (const KernelChoice& c : it->second.choices) out.push_back(Info(node, c));
  return out;
}

std::vector<jit::KernelProblem> KernelDispatch::problems() const {
  absl::MutexLock lock(&mu_);
  return problems_;
}

namespace {

// A problem's family, dtypes and extent names (not their values): what a
// bucket's shapes of one node's launch have in common.
std::string KeptKey(const jit::KernelProblem& p) {
  std::string key = absl::StrCat(p.family, "|", jit::DTypesName(p.dtypes), "|");
  for (const auto& [name, value] : p.dims) absl::StrAppend(&key, name, ",");
  return key;
}

}  // namespace

std::optional<KernelChoice> KernelDispatch::Kept(const ir::Node& node, const void* bucket,
                                                 const jit::KernelProblem& problem) const {
  const jit::KernelFamily* family = Family(problem.family);
  absl::MutexLock lock(&mu_);
  if (!forced_.empty()) return std::nullopt;
  auto it = kept_.find(std::make_tuple(node.subgraph, node.index, bucket, KeptKey(problem)));
  if (it == kept_.end()) return std::nullopt;
  if (family != nullptr && !family->Valid(it->second.config, problem)) return std::nullopt;
  KernelChoice c = it->second;
  c.problem = problem;  // what this plan runs; the config is the bound's
  return c;
}

void KernelDispatch::Keep(const ir::Node& node, const void* bucket, const KernelChoice& choice) {
  absl::MutexLock lock(&mu_);
  if (!forced_.empty()) return;
  kept_.emplace(std::make_tuple(node.subgraph, node.index, bucket, KeptKey(choice.problem)), choice);
}

void KernelDispatch::Force(const jit::KernelProblem& bucket, const jit::KernelConfig& config) {
  absl::MutexLock lock(&mu_);
  forced_[ProblemKey(jit::ShapeBucket(bucket))] = config;
}

void KernelDispatch::ClearForced() {
  absl::MutexLock lock(&mu_);
  forced_.clear();
}

std::vector<std::shared_ptr<const jit::DispatchTable>> ShippedTables(std::vector<std::string>* warnings) {
  std::shared_ptr<const Shipped> s = LoadShipped(jit::ShippedTablesDir());
  if (warnings != nullptr) warnings->insert(warnings->end(), s->errors.begin(), s->errors.end());
  return s->tables;
}

absl::StatusOr<std::unique_ptr<KernelDispatch>> MakeSessionDispatch(const Device& device,
                                                                    const SessionOptions& options) {
  std::vector<std::shared_ptr<const jit::DispatchTable>> tables;
  if (!options.kernel_table.empty()) {
    absl::StatusOr<jit::DispatchTable> t = jit::DispatchTable::LoadFile(options.kernel_table);
    if (!t.ok()) return absl::InvalidArgumentError(absl::StrCat("SessionOptions::kernel_table: ", t.status().message()));
    if (t->provenance().emulated && !device.emulated()) {
      return absl::InvalidArgumentError(absl::StrCat("SessionOptions::kernel_table: kernel table ", options.kernel_table,
                                                     " was timed on the emulated device (for tests), not a GPU"));
    }
    tables.push_back(std::make_shared<const jit::DispatchTable>(*std::move(t)));
  }
  std::vector<std::string> warnings;
  for (auto& t : ShippedTables(&warnings)) tables.push_back(std::move(t));
  if (options.log_sink && options.log_level <= LogLevel::kWarning) {
    for (const std::string& w : warnings) options.log_sink(LogLevel::kWarning, w);
  }
  return std::make_unique<KernelDispatch>(DeviceTraits(device), std::move(tables));
}

KernelChoice ChooseAndRecord(const ir::KernelContext& ctx, const jit::KernelProblem& problem) {
  ExecContext& ec = Exec(ctx);
  if (KernelDispatch* dispatch = ec.dispatch(); dispatch != nullptr) {
    const void* bucket = ec.bucket();
    if (bucket != nullptr) {
      if (std::optional<KernelChoice> kept = dispatch->Kept(ctx.node(), bucket, problem); kept.has_value()) {
        dispatch->Record(ctx.node(), *kept);  // this plan runs it too
        return *std::move(kept);
      }
    }
    KernelChoice choice = dispatch->Choose(problem);
    const jit::KernelFamily* family = jit::FindKernelFamily(problem.family);
    if (family != nullptr && !family->Valid(choice.config, problem)) {
      choice.config = family->Generic(problem);
      choice.source = ChoiceSource::kGeneric;
    }
    if (bucket != nullptr) dispatch->Keep(ctx.node(), bucket, choice);
    dispatch->Record(ctx.node(), choice);
    return choice;
  }
  KernelChoice c;
  c.problem = problem;
  c.bucket = jit::ShapeBucket(problem);
  const jit::KernelFamily* family = jit::FindKernelFamily(problem.family);
  if (family == nullptr) {
    c.config = jit::KernelConfig{problem.family, problem.dtypes, {}};
    return c;
  }
  bool ranked = false;
  jit::RankedVariant best = jit::BestVariant(*family, problem, DeviceTraits(ec.device()), &ranked);
  c.config = std::move(best.config);
  c.source = ranked ? ChoiceSource::kCostModel : ChoiceSource::kGeneric;
  c.estimate_us = best.cost.estimate_us;
  return c;
}

jit::KernelConfig ChooseVariant(const ir::KernelContext& ctx, const jit::KernelProblem& problem) {
  return ChooseAndRecord(ctx, problem).config;
}

jit::KernelProblem GemmProblem(const GemmDesc& gemm) {
  // Extents sorted by name, as KernelProblem wants.
  return jit::KernelProblem{std::string(jit::kGemmFamily),
                            {gemm.dtype},
                            {{"batch", gemm.batch}, {"k", gemm.k}, {"m", gemm.m}, {"n", gemm.n}}};
}

int ChooseGemmAlgorithm(const ir::KernelContext& ctx, const GemmDesc& gemm) {
  ExecContext& ec = Exec(ctx);
  KernelDispatch* dispatch = ec.dispatch();
  if (dispatch == nullptr) return -1;
  KernelChoice choice = dispatch->ChooseGemm(GemmProblem(gemm));
  // Tables are tuned with exact f32 math; an f32 GEMM in a fast math mode
  // takes the heuristic's first answer.
  if (gemm.dtype == DType::kF32 && ec.gemm_math() != GemmDesc::Math::kF32 &&
      choice.source == ChoiceSource::kTable) {
    choice.config.params.clear();
    choice.source = ChoiceSource::kGeneric;
    choice.measured_us = 0;
  }
  dispatch->Record(ctx.node(), choice);
  return choice.config.Get(jit::kGemmAlgoParam, -1);
}

}  // namespace grove::cuda
