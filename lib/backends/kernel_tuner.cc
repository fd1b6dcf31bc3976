// grove::TuneKernels: finds the kernel problems a model's steps pose at
// given shapes (their plans' prepares, through the dispatcher), and times the
// cost model's top-k variants of each (family, dtypes, shape bucket) plus the
// family's generic one on a device, keeping the fastest in a dispatch table.
//
// Timing: each candidate runs in a session of its own whose dispatcher forces
// it for its bucket; a wrapper of the device catches the candidate's first
// launch of each run (its module and launch geometry) or GEMM (its extents)
// and times it with Device::TimeRuns (CUDA events on a GPU): warm-up runs,
// then the median of the repeats. CUDA graphs are off in these sessions so
// each launch runs when it is queued.
//
// The problems are found as a GPU session with graphs plans (shape buckets
// with the default rules: a bucket's bound planned first), so a problem may
// be the bound's: where the shapes' own timing run does not pose it, it is
// timed at the bound's shapes. The tiled GEMM, which only bucketed plans
// run, is timed alone (TimeTiledGemm).
#include <algorithm>
#include <chrono>
#include <ctime>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "jit/cost_model.h"
#include "jit/dispatch_table.h"
#include "jit/kernel_cache.h"
#include "jit/kernel_config.h"
#include "lib/backends/backends.h"
#include "lib/backends/cuda/cuda_backend.h"
#include "lib/backends/cuda/kernel_choice.h"
#include "lib/backends/cuda/exec_context.h"
#include "lib/backends/cuda/recording_device.h"
#include "lib/backends/cuda/tiled_gemm.h"
#include "lib/runtime/model_impl.h"
#include "lib/runtime/plan_report.h"
#include "lib/runtime/session_internal.h"

namespace grove::internal {
namespace {

constexpr int kMaxTopK = 64;
constexpr char kTiledGemmFamily[] = "gemm_tiled";
constexpr int kMaxRepeats = 10000;

// What is timed: a kernel variant's launch, or a GEMM of the problem's extents.
struct Target {
  bool gemm = false;
  jit::ModuleSpec module;
  cuda::LaunchDims dims;
  jit::KernelProblem problem;
};

// The median of timed runs (not empty).
double Median(std::vector<double> t) {
  std::sort(t.begin(), t.end());
  return t.size() % 2 == 1 ? t[t.size() / 2] : 0.5 * (t[t.size() / 2 - 1] + t[t.size() / 2]);
}

bool SameGemm(const cuda::GemmDesc& g, const jit::KernelProblem& p) {
  return p.dtypes.size() == 1 && g.dtype == p.dtypes[0] && g.m == p.Dim("m") && g.n == p.Dim("n") &&
         g.k == p.Dim("k") && g.batch == p.Dim("batch");
}

// Times the launches (or GEMMs) of a run that match the target: its module
// (file, types, parameters) and, when the family's launch geometry is what
// the op launched, its grid and block. The time kept is the first launch of
// the target's geometry, else the first of its module (a step that launches
// the variant with a geometry of its own). One per tune: the sessions of
// every candidate run on it, so the model's weights are uploaded once (they
// are cached per device).
class TimingDevice final : public cuda::ForwardingDevice {
 public:
  TimingDevice(std::shared_ptr<cuda::Device> device, int warmup, int repeats)
      : ForwardingDevice(std::move(device)), warmup_(warmup), repeats_(repeats) {}

  // Times `target` from now on, forgetting what was timed before.
  void Arm(Target target) {
    target_ = std::move(target);
    timed_launches_ = 0;
    exact_ = false;
    median_us_ = 0;
  }

  absl::Status Launch(const jit::ModuleSpec& module, absl::string_view kernel, const cuda::LaunchDims& dims,
                      const void* params, size_t params_bytes, cuda::Stream stream) override {
    // The module's file, types and parameters (not `indirect`: a graph's).
    const bool same_module = !target_.gemm && module.file == target_.module.file &&
                             module.types == target_.module.types && module.params == target_.module.params;
    if (!same_module || exact_ || timed_launches_ >= kMaxTimedLaunches) {
      return device_->Launch(module, kernel, dims, params, params_bytes, stream);
    }
    const bool exact = dims.grid == target_.dims.grid && dims.block == target_.dims.block;
    return Time(stream, exact, [&] { return device_->Launch(module, kernel, dims, params, params_bytes, stream); });
  }
  absl::Status Gemm(const cuda::GemmDesc& gemm, cuda::Stream stream) override {
    if (exact_ || !target_.gemm || !SameGemm(gemm, target_.problem)) return device_->Gemm(gemm, stream);
    return Time(stream, true, [&] { return device_->Gemm(gemm, stream); });
  }

  bool timed() const { return timed_launches_ > 0; }
  double median_us() const { return median_us_; }

 private:
  static constexpr int kMaxTimedLaunches = 8;

  absl::Status Time(cuda::Stream stream, bool exact, const std::function<absl::Status()>& work) {
    ++timed_launches_;
    absl::StatusOr<std::vector<double>> times = device_->TimeRuns(stream, work, warmup_, repeats_);
    if (!times.ok()) return times.status();
    if (times->empty()) return absl::InternalError("no timed runs");
    const double median = Median(*std::move(times));
    if (exact || timed_launches_ == 1) median_us_ = median;
    exact_ = exact_ || exact;
    return absl::OkStatus();
  }

  Target target_;
  const int warmup_, repeats_;
  int timed_launches_ = 0;
  bool exact_ = false;  // a launch of the target's geometry was timed
  double median_us_ = 0;
};

std::string ProblemKey(const jit::KernelProblem& p) {
  return absl::StrCat(p.family, "|", jit::DTypesName(p.dtypes), "|", p.ToString());
}

std::string UtcNow() {
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

absl::Status CheckOptions(const Model& model, const KernelTuneOptions& o) {
  if (o.shape_sets.empty()) return absl::InvalidArgumentError("tune: no shapes given");
  for (const auto& set : o.shape_sets) {
    if (set.size() != model.inputs().size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("tune: the model takes ", model.inputs().size(), " inputs, a shape set gives ", set.size()));
    }
  }
  if (o.top_k < 1 || o.top_k > kMaxTopK) {
    return absl::InvalidArgumentError(absl::StrCat("tune: top_k must be 1..", kMaxTopK, ", not ", o.top_k));
  }
  if (o.warmup < 0 || o.warmup > kMaxRepeats || o.repeats < 1 || o.repeats > kMaxRepeats) {
    return absl::InvalidArgumentError(absl::StrCat("tune: warmup must be 0..", kMaxRepeats, " and repeats 1..",
                                                   kMaxRepeats, " (given ", o.warmup, ", ", o.repeats, ")"));
  }
  return absl::OkStatus();
}

SessionOptions TuneSessionOptions() {
  SessionOptions so;
  so.cuda_graphs = GraphMode::kOff;  // each launch runs when queued: timed as it runs
  return so;
}

// The problems the model's steps pose at each shape set, one per (family,
// dtypes, bucket), first met first, with the shape set that poses it, by
// planning on `device` (nothing runs).
// Planned as a GPU session with graphs plans (`buckets`: its default rules),
// so the problems of bucketed plans (their tiled GEMMs) are found at their
// bucket's bound.
absl::StatusOr<std::vector<std::pair<jit::KernelProblem, size_t>>> FindProblems(
    const Model& model, const KernelTuneOptions& o, const std::optional<runtime::BucketPolicy>& buckets,
    std::shared_ptr<cuda::Device> device) {
  std::vector<std::pair<jit::KernelProblem, size_t>> out;
  absl::flat_hash_map<std::string, int> seen;
  for (size_t set = 0; set < o.shape_sets.size(); ++set) {
    absl::StatusOr<std::unique_ptr<runtime::Backend>> b = cuda::CreateCudaBackend(device, TuneSessionOptions());
    if (!b.ok()) return b.status();
    cuda::KernelDispatch* dispatch = cuda::DispatchOf(**b);
    absl::StatusOr<ExecutionInfo> info =
        runtime::DescribePlans(model.impl(), **b, o.shape_sets[set], buckets.has_value() ? &*buckets : nullptr);
    if (!info.ok()) return info.status();
    for (const jit::KernelProblem& p : dispatch->problems()) {
      if (seen.emplace(ProblemKey(jit::ShapeBucket(p)), 0).second) out.emplace_back(p, set);
    }
  }
  return out;
}

// `shapes` at their bucket's bound; themselves where no bucket serves them.
std::vector<std::vector<int64_t>> BoundShapes(const Model& model, const std::optional<runtime::BucketPolicy>& buckets,
                                              const std::vector<std::vector<int64_t>>& shapes) {
  if (!buckets.has_value()) return shapes;
  std::vector<TensorView> views;
  for (size_t i = 0; i < shapes.size(); ++i) {
    views.emplace_back(model.inputs()[i].dtype, shapes[i], static_cast<void*>(nullptr));
  }
  std::vector<std::vector<int64_t>> bound;
  std::string why;
  if (!buckets->BoundShapes(model.impl().graph(), views, &bound, &why)) return shapes;
  return bound;
}

struct Candidate {
  jit::KernelConfig config;
  double estimate_us = 0;
  bool generic = false;
};

std::vector<Candidate> Candidates(const jit::KernelProblem& p, const jit::GpuTraits& gpu, int top_k) {
  std::vector<Candidate> out;
  if (p.family == jit::kGemmFamily) {
    // cuBLASLt's heuristic answers by index; the first is what runs untuned.
    for (int i = 0; i < std::min(top_k, jit::kMaxGemmAlgorithms); ++i) {
      out.push_back({jit::KernelConfig{p.family, p.dtypes, {{std::string(jit::kGemmAlgoParam), i}}}, 0, i == 0});
    }
    return out;
  }
  const jit::KernelFamily* family = jit::FindKernelFamily(p.family);
  if (family == nullptr) return out;
  const jit::KernelConfig generic = family->Generic(p);
  for (jit::RankedVariant& r : jit::RankVariants(*family, p, gpu, top_k)) {
    out.push_back({std::move(r.config), r.cost.estimate_us, false});
  }
  bool has_generic = false;
  for (Candidate& c : out) {
    if (c.config == generic) c.generic = has_generic = true;
  }
  if (!has_generic && family->Valid(generic, p)) {
    out.push_back({generic, family->Cost(generic, p, gpu).estimate_us, true});
  }
  return out;
}

absl::StatusOr<Target> TargetOf(const Candidate& c, const jit::KernelProblem& p) {
  Target t;
  t.problem = p;
  if (p.family == jit::kGemmFamily) {
    t.gemm = true;
    return t;
  }
  const jit::KernelFamily* family = jit::FindKernelFamily(p.family);
  if (family == nullptr) return absl::InternalError(absl::StrCat("unknown family ", p.family));
  t.module = jit::ConfigModule(c.config);
  const jit::LaunchShape shape = family->Launch(c.config, p);
  t.dims.grid = {static_cast<uint32_t>(std::clamp<int64_t>(shape.blocks, 1, 65535)), 1, 1};
  t.dims.block = {static_cast<uint32_t>(std::max(shape.threads, 1)), 1, 1};
  return t;
}

// Runs the model once at `shapes` with `candidate` forced for its bucket and
// the matching launch timed: its median in microseconds, or why not.
absl::StatusOr<double> TimeCandidate(const Model& model, const std::vector<std::vector<int64_t>>& shapes,
                                     const jit::KernelProblem& problem, const Candidate& candidate,
                                     const std::shared_ptr<TimingDevice>& timing) {
  absl::StatusOr<Target> target = TargetOf(candidate, problem);
  if (!target.ok()) return target.status();
  timing->Arm(*target);
  const SessionOptions so = TuneSessionOptions();
  absl::StatusOr<std::unique_ptr<runtime::Backend>> b = cuda::CreateCudaBackend(timing, so);
  if (!b.ok()) return b.status();
  cuda::DispatchOf(**b)->Force(problem, candidate.config);
  std::shared_ptr<const Model> handle(&model, [](const Model*) {});
  absl::StatusOr<std::unique_ptr<Session>> session = CreateSessionWithBackend(handle, so, *std::move(b));
  if (!session.ok()) return session.status();
  std::vector<Tensor> tensors;
  std::vector<TensorView> views;
  for (size_t i = 0; i < shapes.size(); ++i) {
    absl::StatusOr<Tensor> t = Tensor::Create(model.inputs()[i].dtype, shapes[i]);
    if (!t.ok()) return t.status();
    tensors.push_back(*std::move(t));
  }
  for (const Tensor& t : tensors) views.push_back(t.view());
  absl::StatusOr<std::vector<TensorView>> run = (*session)->Run(views);
  if (!run.ok() && !timing->timed()) return run.status();
  if (!timing->timed()) return absl::NotFoundError("the variant's launch was not seen in the run");
  return timing->median_us();
}

// The tiled GEMM runs only in bucketed plans (graphs on), which a timing
// session (graphs off) does not make: its variant is timed alone, a product
// of the problem's extents on zeroed device buffers, launched as a step
// launches it (RunTiledGemm: the family's grid, f32 math).
absl::StatusOr<double> TimeTiledGemm(cuda::Device& device, const jit::KernelProblem& p, const Candidate& candidate,
                                     int warmup, int repeats) {
  cuda::GemmDesc g;
  if (p.dtypes.size() != 1) return absl::InvalidArgumentError(absl::StrCat("tiled GEMM problem ", p.ToString()));
  g.dtype = p.dtypes[0];
  g.m = p.Dim("m"), g.n = p.Dim("n"), g.k = p.Dim("k"), g.batch = p.Dim("batch");
  g.trans_a = p.Dim("transa") != 0, g.trans_b = p.Dim("transb") != 0;
  constexpr int64_t kMaxElements = int64_t{1} << 28;  // per operand: extents from a model, checked
  const int64_t dims[] = {g.m, g.n, g.k, g.batch};
  for (int64_t d : dims) {
    if (d < 1 || d > kMaxElements) return absl::InvalidArgumentError(absl::StrCat("tiled GEMM problem ", p.ToString()));
  }
  if (g.m * g.k > kMaxElements / g.batch || g.k * g.n > kMaxElements / g.batch || g.m * g.n > kMaxElements / g.batch) {
    return absl::InvalidArgumentError(absl::StrCat("tiled GEMM problem ", p.ToString(), " is too large to time"));
  }
  g.lda = g.trans_a ? g.m : g.k, g.ldb = g.trans_b ? g.k : g.n, g.ldc = g.n;
  g.stride_a = g.m * g.k, g.stride_b = g.k * g.n, g.stride_c = g.m * g.n;
  const size_t elem = DTypeSize(g.dtype);
  std::vector<void*> buffers;
  absl::StatusOr<cuda::Stream> stream = device.CreateStream();
  if (!stream.ok()) return stream.status();
  auto release = [&] {
    for (void* b : buffers) device.Free(b);
    device.DestroyStream(*stream);
  };
  for (int64_t n : {g.stride_a, g.stride_b, g.stride_c}) {
    const size_t bytes = static_cast<size_t>(n * g.batch) * elem;
    absl::StatusOr<void*> b = device.Allocate(bytes);
    if (!b.ok()) return release(), b.status();
    buffers.push_back(*b);
    if (absl::Status s = device.MemsetAsync(*b, 0, bytes, *stream); !s.ok()) return release(), s;
  }
  g.a = buffers[0], g.b = buffers[1], g.c = buffers[2];
  absl::StatusOr<std::vector<double>> times = absl::InternalError("not run");
  absl::Status synced;
  {
    cuda::ExecContext ec(device, *stream);
    times = device.TimeRuns(*stream, [&] { return cuda::RunTiledGemm(ec, g, candidate.config); }, warmup, repeats);
    synced = device.Synchronize(*stream);
  }
  release();
  if (!times.ok()) return times.status();
  if (!synced.ok()) return synced;
  if (times->empty()) return absl::InternalError("no timed runs");
  return Median(*std::move(times));
}

}  // namespace

absl::StatusOr<KernelTuneReport> TuneKernelsOnDevice(const Model& model, const KernelTuneOptions& options,
                                                     std::shared_ptr<cuda::Device> device) {
  if (absl::Status s = CheckOptions(model, options); !s.ok()) return s;
  KernelTuneReport report;
  std::shared_ptr<cuda::Device> planner = device;
  if (options.dry_run) {
    absl::StatusOr<int> arch = jit::ParseArch(options.arch);
    if (!arch.ok()) return arch.status();
    planner = cuda::NewRecordingDevice(*arch);
    report.device = absl::StrCat("sm_", *arch, " (dry run)");
  } else if (device == nullptr) {
    return absl::InvalidArgumentError("tune: no device");
  } else {
    report.device = device->Describe();
  }
  report.arch = planner->arch();
  const jit::GpuTraits gpu = cuda::DeviceTraits(*planner);

  absl::StatusOr<std::optional<runtime::BucketPolicy>> buckets =
      runtime::GraphSessionBuckets(model.impl().graph(), SessionOptions{});
  if (!buckets.ok()) return buckets.status();
  absl::StatusOr<std::vector<std::pair<jit::KernelProblem, size_t>>> problems =
      FindProblems(model, options, *buckets, planner);
  if (!problems.ok()) return problems.status();

  std::shared_ptr<TimingDevice> timing;
  if (!options.dry_run) timing = std::make_shared<TimingDevice>(device, options.warmup, options.repeats);
  jit::DispatchTable table;
  int index = 0;
  for (size_t i = 0; i < problems->size(); ++i) {
    const jit::KernelProblem& p = (*problems)[i].first;
    const size_t shape_set = (*problems)[i].second;
    std::vector<Candidate> candidates = Candidates(p, gpu, options.top_k);
    if (candidates.empty()) continue;
    ++index;
    KernelTuneBucket bucket;
    bucket.family = p.family;
    bucket.dtypes = jit::DTypesName(p.dtypes);
    bucket.bucket = jit::ShapeBucket(p).ToString();
    bucket.problem = p.ToString();
    double best_us = -1, generic_us = 0;
    const Candidate* best = nullptr;
    std::string failures;  // the first variant that could not be timed, and why
    int failed = 0;
    for (const Candidate& c : candidates) {
      KernelTuneCandidate out{c.config.Name(), c.estimate_us, 0, c.generic};
      if (!options.dry_run) {
        const std::vector<std::vector<int64_t>>& shapes = options.shape_sets[shape_set];
        absl::StatusOr<double> us = p.family == kTiledGemmFamily
                                        ? TimeTiledGemm(*device, p, c, options.warmup, options.repeats)
                                        : TimeCandidate(model, shapes, p, c, timing);
        // A problem of a bucket's bound (planned before the shapes): the
        // timing session (graphs off, exact plans) poses it at the bound.
        if (std::vector<std::vector<int64_t>> bound = BoundShapes(model, *buckets, shapes);
            absl::IsNotFound(us.status()) && bound != shapes) {
          us = TimeCandidate(model, bound, p, c, timing);
        }
        if (us.ok()) {
          out.measured_us = *us;
          if (best == nullptr || *us < best_us) best = &c, best_us = *us;
          if (c.generic) generic_us = *us;
        } else {
          ++failed;
          if (failures.empty()) failures = absl::StrCat(out.config, ": ", us.status().message());
        }
      }
      bucket.candidates.push_back(std::move(out));
      ++report.candidates;
    }
    std::string line = absl::StrFormat("[%d] %s %s %s (problem %s): %d variants", index, bucket.family, bucket.dtypes,
                                       bucket.bucket, bucket.problem, static_cast<int>(candidates.size()));
    if (best != nullptr) {
      bucket.best = best->config.Name();
      jit::DispatchEntry e;
      e.arch = report.arch;
      e.config = best->config;
      e.bucket = jit::ShapeBucket(p);
      e.problem = p;
      e.measured_us = best_us;
      e.generic_us = generic_us;
      if (absl::Status s = table.Add(std::move(e)); !s.ok()) return s;
      absl::StrAppend(&line, absl::StrFormat(", best %s %.2f us", bucket.best, best_us));
      if (generic_us > 0) absl::StrAppend(&line, absl::StrFormat(", generic %.2f us (%.2fx)", generic_us, generic_us / best_us));
    } else if (!options.dry_run) {
      absl::StrAppend(&line, ", none timed");
    }
    if (failed > 0) {
      absl::StrAppend(&line, " (", failed, failed == 1 ? " variant" : " variants", " not timed; ", failures, ")");
    }
    if (options.progress && !options.dry_run) options.progress(line);
    report.buckets.push_back(std::move(bucket));
  }
  if (!options.dry_run) {
    jit::TableProvenance prov;
    prov.gpu = device->Describe();
    prov.arch = report.arch;
    prov.driver_version = device->driver_version();
    prov.nvrtc_version = jit::NvrtcVersion();
    prov.date = UtcNow();
    prov.grove_version = std::string(Version());
    prov.emulated = device->emulated();
    table.set_provenance(std::move(prov));
    report.table = table.Serialize();
  }
  return report;
}

}  // namespace grove::internal

namespace grove {

absl::StatusOr<KernelTuneReport> TuneKernels(const Model& model, const KernelTuneOptions& options) {
  if (options.dry_run) return internal::TuneKernelsOnDevice(model, options, nullptr);
  const cuda::CudaProbe probe = cuda::ProbeCuda();
  if (probe.device_count == 0) {
    return absl::FailedPreconditionError(absl::StrCat("no CUDA GPU here (", probe.reason,
                                                      "): grove tune times kernels on a GPU; --dry-run lists the "
                                                      "search space anywhere"));
  }
  absl::StatusOr<std::shared_ptr<cuda::Device>> device = cuda::OpenCudaDevice(options.cuda_device);
  if (!device.ok()) return device.status();
  return internal::TuneKernelsOnDevice(model, options, *std::move(device));
}

}  // namespace grove
