#include "lib/backends/backends.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <optional>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "jit/kernel_cache.h"
#include "lib/backends/cpu/cpu_backend.h"
#include "lib/backends/cpu/cpu_kernels.h"
#include "lib/backends/cuda/cuda_backend.h"
#include "lib/backends/cuda/cuda_kernels.h"
#include "lib/backends/cuda/recording_device.h"
#include "lib/ir/ops/ops.h"
#include "lib/runtime/backend.h"
#include "lib/runtime/buckets.h"
#include "lib/runtime/model_impl.h"
#include "lib/runtime/plan_report.h"
#include "lib/runtime/registry.h"
#include "lib/runtime/session_internal.h"

namespace grove {
namespace runtime {
namespace {

ir::OpRegistry* BuildRegistry() {
  auto* r = new ir::OpRegistry;
  r->Reserve(ir::kOpCountHint);
  const absl::Status results[] = {
      ir::RegisterElementwiseOps(*r),      ir::RegisterReductionOps(*r),
      ir::RegisterLinalgOps(*r),           ir::RegisterShapeOps(*r),
      ir::RegisterControlFlowOps(*r),      cpu::RegisterElementwiseKernels(*r),
      cpu::RegisterReductionKernels(*r),   cpu::RegisterLinalgKernels(*r),
      cpu::RegisterShapeKernels(*r),       cpu::RegisterControlFlowKernels(*r),
      ir::RegisterMathOps(*r),             cpu::RegisterMathKernels(*r),
      ir::RegisterNnOps(*r),               cpu::RegisterNnKernels(*r),
      ir::RegisterNormOps(*r),             cpu::RegisterNormKernels(*r),
      ir::RegisterReduceSearchOps(*r),     cpu::RegisterReduceSearchKernels(*r),
      ir::RegisterLayoutOps(*r),           cpu::RegisterLayoutKernels(*r),
      ir::RegisterRecurrentOps(*r),        cpu::RegisterRecurrentKernels(*r),
      ir::RegisterIndexingOps(*r),         cpu::RegisterIndexingKernels(*r),
      ir::RegisterLossOps(*r),             cpu::RegisterLossKernels(*r),
      ir::RegisterVisionOps(*r),           cpu::RegisterVisionKernels(*r),
      ir::RegisterQuantizationOps(*r),     cpu::RegisterQuantizationKernels(*r),
      ir::RegisterTextOps(*r),             cpu::RegisterTextKernels(*r),
      ir::RegisterSequenceOps(*r),         cpu::RegisterSequenceKernels(*r),
      cuda::RegisterCudaControlFlowKernels(*r),
      cuda::RegisterCudaShapeKernels(*r),  cuda::RegisterCudaLayoutKernels(*r),
      cuda::RegisterCudaLinalgKernels(*r), cuda::RegisterCudaNnKernels(*r),
      cuda::RegisterCudaRecurrentKernels(*r),
      cuda::RegisterCudaReductionKernels(*r), cuda::RegisterCudaNormKernels(*r),
      cuda::RegisterCudaElementwiseKernels(*r),
      ir::RegisterAttentionOps(*r),        cpu::RegisterAttentionKernels(*r),
      cuda::RegisterCudaAttentionKernels(*r),
  };
  for (const absl::Status& s : results) {
    if (!s.ok()) {
      // A registration conflict is a bug in the library itself, found by
      // every test run; there is no user input here.
      std::fprintf(stderr, "grove: op registry: %s\n", s.ToString().c_str());
      std::abort();
    }
  }
  return r;
}

}  // namespace

const ir::OpRegistry& GlobalOpRegistry() {
  static const ir::OpRegistry* registry = BuildRegistry();
  return *registry;
}

absl::StatusOr<std::unique_ptr<Backend>> CreateBackend(const SessionOptions& options) {
  std::shared_ptr<cuda::Device> cuda_device;
  switch (options.device) {
    case Device::kCpu: break;
    case Device::kAuto:
      // CUDA when a device exists; a machine without driver or GPU runs on the CPU.
      if (cuda::ProbeCuda().device_count > 0) {
        absl::StatusOr<std::shared_ptr<cuda::Device>> d = cuda::OpenCudaDevice(options.cuda_device);
        if (d.ok()) cuda_device = std::move(*d);
      }
      break;
    case Device::kCuda: {
      absl::StatusOr<std::shared_ptr<cuda::Device>> d = cuda::OpenCudaDevice(options.cuda_device);
      if (!d.ok()) {
        return absl::Status(d.status().code(), absl::StrCat("device 'cuda' requested: ", d.status().message(),
                                                            "; use --device cpu or auto"));
      }
      cuda_device = std::move(*d);
      break;
    }
    default:
      return absl::InvalidArgumentError(absl::StrCat("unknown device ", static_cast<int>(options.device)));
  }
  if (cuda_device == nullptr) return cpu::CreateCpuBackend(options.intra_op_threads);
  return cuda::CreateCudaBackend(std::move(cuda_device), options);
}

}  // namespace runtime

namespace internal {

absl::StatusOr<std::unique_ptr<Session>> CreateSessionOnDevice(std::shared_ptr<const Model> model,
                                                                const SessionOptions& options,
                                                                std::shared_ptr<cuda::Device> device) {
  if (model == nullptr) return absl::InvalidArgumentError("Session::Create: model is null");
  std::unique_ptr<runtime::Backend> backend;
  if (device == nullptr) {
    absl::StatusOr<std::unique_ptr<runtime::Backend>> b = cpu::CreateCpuBackend(options.intra_op_threads);
    if (!b.ok()) return b.status();
    backend = *std::move(b);
  } else {
    absl::StatusOr<std::unique_ptr<runtime::Backend>> b = cuda::CreateCudaBackend(std::move(device), options);
    if (!b.ok()) return b.status();
    backend = *std::move(b);
  }
  return CreateSessionWithBackend(std::move(model), options, std::move(backend));
}

}  // namespace internal

namespace {

// SegmentInfo::pinned of the main path: a dry run (zero inputs, a recording
// device: nothing runs, graphs are captured and refreshed as on a GPU) at
// the shapes, then at another shape of their bucket (each symbol one
// smaller or larger where its bucket allows), so that the bucket's graph is
// refreshed for a second shape even when these shapes are its bound. Best effort: a model whose dry run fails
// (zero inputs it refuses) keeps "".
void FillPinned(const Model& model, const ExecutionInfoOptions& options, int arch, ExecutionInfo* info) {
  if (info->paths.empty() || options.input_shapes.size() != model.inputs().size()) return;
  std::shared_ptr<const Model> handle(&model, [](const Model*) {});  // lives only in this call
  SessionOptions so;
  so.kernel_table = options.kernel_table;
  absl::StatusOr<std::unique_ptr<Session>> session =
      internal::CreateSessionOnDevice(handle, so, cuda::NewRecordingDevice(arch, /*captures_graphs=*/true));
  if (!session.ok()) return;
  const ir::Graph& graph = model.impl().graph();
  absl::StatusOr<runtime::BucketPolicy> policy = runtime::BucketPolicy::Make(graph, so.shape_buckets);
  if (!policy.ok()) return;
  // Each symbol at another value of its bucket: one below, else one above
  // (a bucket of one value keeps it).
  std::vector<std::vector<int64_t>> other = options.input_shapes;
  absl::flat_hash_map<std::string, int64_t> value_of;
  for (size_t i = 0; i < other.size(); ++i) {
    const std::vector<DimInfo>& decl = model.inputs()[i].shape;
    for (size_t k = 0; k < other[i].size() && k < decl.size(); ++k) {
      if (!decl[k].is_symbolic()) continue;
      auto it = value_of.find(decl[k].symbol);
      if (it == value_of.end()) {
        const int64_t v = other[i][k];
        int64_t to = v;
        for (size_t sym = 0; sym < graph.symbols.size(); ++sym) {
          if (graph.symbols[sym].name != decl[k].symbol) continue;
          const int s = static_cast<int>(sym);
          const int64_t bound = policy->Bound(s, v);
          if (v - 1 >= std::max<int64_t>(graph.symbols[sym].min, 1) && policy->Bound(s, v - 1) == bound) {
            to = v - 1;
          } else if (v + 1 <= bound && policy->Bound(s, v + 1) == bound) {
            to = v + 1;
          }
        }
        it = value_of.emplace(decl[k].symbol, to).first;
      }
      other[i][k] = it->second;
    }
  }
  if (other == options.input_shapes) return;  // a bucket of one shape: one graph serves it
  std::vector<Tensor> given;
  const std::vector<std::vector<int64_t>>* runs[] = {&options.input_shapes, &other};
  for (const std::vector<std::vector<int64_t>>* shapes : runs) {
    std::vector<Tensor> tensors;
    std::vector<TensorView> views;
    for (size_t i = 0; i < shapes->size(); ++i) {
      absl::StatusOr<Tensor> t = Tensor::Create(model.inputs()[i].dtype, (*shapes)[i]);
      if (!t.ok()) return;
      tensors.push_back(*std::move(t));
    }
    for (const Tensor& t : tensors) views.push_back(t.view());
    if (!(*session)->Run(views).ok()) return;
    if (given.empty()) given = std::move(tensors);
  }
  std::vector<TensorView> views;
  for (const Tensor& t : given) views.push_back(t.view());
  const std::vector<std::string> pinned = internal::PinnedSegments(**session, views);
  std::vector<SegmentInfo>& segments = info->paths[0].segments;
  for (size_t k = 0; k < segments.size() && k < pinned.size(); ++k) segments[k].pinned = pinned[k];
}

}  // namespace

absl::StatusOr<ExecutionInfo> DescribeExecution(const Model& model, const ExecutionInfoOptions& options) {
  std::unique_ptr<runtime::Backend> backend;
  std::string device = "cpu";
  switch (options.device) {
    case Device::kCpu: {
      absl::StatusOr<std::unique_ptr<runtime::Backend>> b = cpu::CreateCpuBackend();
      if (!b.ok()) return b.status();
      backend = *std::move(b);
      break;
    }
    case Device::kCuda: {
      absl::StatusOr<int> arch = jit::ParseArch(options.arch);
      if (!arch.ok()) return arch.status();
      // Plans only: a device that records is all planning needs.
      SessionOptions so;
      so.kernel_table = options.kernel_table;
      absl::StatusOr<std::unique_ptr<runtime::Backend>> b = cuda::CreateCudaBackend(cuda::NewRecordingDevice(*arch), so);
      if (!b.ok()) return b.status();
      backend = *std::move(b);
      device = absl::StrCat("cuda sm_", *arch, " (planned without a GPU)");
      break;
    }
    default:
      return absl::InvalidArgumentError("DescribeExecution: device must be cpu or cuda");
  }
  // A CUDA session captures graphs on a GPU, so it buckets shapes with its
  // default rules: plan as it does.
  std::optional<runtime::BucketPolicy> buckets;
  if (options.device == Device::kCuda) {
    absl::StatusOr<std::optional<runtime::BucketPolicy>> b = runtime::GraphSessionBuckets(model.impl().graph(), {});
    if (!b.ok()) return b.status();
    buckets = *std::move(b);
  }
  absl::StatusOr<ExecutionInfo> info = runtime::DescribePlans(model.impl(), *backend, options.input_shapes,
                                                              buckets.has_value() ? &*buckets : nullptr);
  if (info.ok()) info->device = device;
  if (info.ok() && options.device == Device::kCuda) {
    FillPinned(model, options, *jit::ParseArch(options.arch), &*info);
  }
  return info;
}

// grove::CompileKernels: which kernel modules a model needs (a dry run on the
// recording device) compiled into the disk cache for one arch, no GPU needed.
absl::StatusOr<KernelCompileReport> CompileKernels(const Model& model, const KernelCompileOptions& options) {
  absl::StatusOr<int> arch = jit::ParseArch(options.arch);
  if (!arch.ok()) return arch.status();
  KernelCompileReport report;
  report.arch = *arch;

  std::vector<jit::ModuleSpec> modules;
  if (options.all_kernels) {
    const auto all = jit::KernelManifest();
    modules.assign(all.begin(), all.end());
  } else {
    const std::vector<TensorInfo>& inputs = model.inputs();
    if (options.input_shapes.size() != inputs.size()) {
      return absl::InvalidArgumentError(absl::StrCat("the model takes ", inputs.size(), " inputs, given ",
                                                     options.input_shapes.size(), " shapes"));
    }
    // The dry run is a session as on a GPU: it captures graphs (whose
    // launches use each module's indirect form) and buckets shapes with the
    // default rules, so it asks for the modules a real session asks for.
    std::shared_ptr<cuda::RecordingDevice> device = cuda::NewRecordingDevice(*arch, /*captures_graphs=*/true);
    // A non-owning handle: the session lives only in this call.
    std::shared_ptr<const Model> handle(&model, [](const Model*) {});
    SessionOptions so;
    so.kernel_table = options.kernel_table;
    absl::StatusOr<std::unique_ptr<Session>> session = internal::CreateSessionOnDevice(handle, so, device);
    if (!session.ok()) return session.status();
    // The variants each step chose (the plans' prepares, as the run makes them).
    {
      absl::StatusOr<std::unique_ptr<runtime::Backend>> b = cuda::CreateCudaBackend(cuda::NewRecordingDevice(*arch), so);
      if (!b.ok()) return b.status();
      absl::StatusOr<std::optional<runtime::BucketPolicy>> buckets =
          runtime::GraphSessionBuckets(model.impl().graph(), so);
      if (!buckets.ok()) return buckets.status();
      absl::StatusOr<ExecutionInfo> info = runtime::DescribePlans(model.impl(), **b, options.input_shapes,
                                                                  buckets->has_value() ? &**buckets : nullptr);
      if (info.ok()) {
        for (const PathInfo& path : info->paths) {
          for (const StepInfo& step : path.steps) {
            report.choices.insert(report.choices.end(), step.kernels.begin(), step.kernels.end());
          }
        }
      }
    }
    std::vector<Tensor> tensors;
    std::vector<TensorView> views;
    for (size_t i = 0; i < inputs.size(); ++i) {
      absl::StatusOr<Tensor> t = Tensor::Create(inputs[i].dtype, options.input_shapes[i]);
      if (!t.ok()) return absl::InvalidArgumentError(absl::StrCat("input '", inputs[i].name, "': ", t.status().message()));
      tensors.push_back(std::move(*t));
    }
    for (const Tensor& t : tensors) views.push_back(t.view());
    absl::StatusOr<std::vector<TensorView>> run = (*session)->Run(views);
    if (!run.ok()) {
      // Zero-valued inputs are not every model's idea of valid data (a
      // Range with step 0...): keep what the run reached and say so.
      report.note = absl::StrCat("the dry run with zero inputs stopped early (", run.status().message(),
                                 "); kernels after that point were not found; use --all to compile every kernel");
    } else {
      bool control_flow = false;
      for (const auto& [op, count] : model.Summary().op_counts) control_flow |= op == "If" || op == "Loop";
      if (control_flow) {
        report.note = "the model branches on data: the dry run (zero inputs) took one path; "
                      "use --all to compile every kernel";
      }
    }
    modules = device->modules();
  }

  jit::CacheOptions cache_options;
  cache_options.disk_dir = options.cache_dir;
  jit::KernelCache cache(cache_options);
  report.cache_dir = cache.disk_dir();
  if (report.cache_dir.empty()) {
    return absl::FailedPreconditionError("the kernel disk cache is off (GROVE_CACHE_DIR=off): nothing to fill");
  }
  for (const jit::ModuleSpec& m : modules) {
    // A graph's launches use a module's indirect form, compiled apart.
    report.modules.push_back(absl::StrCat(m.file, jit::Suffix(m), m.indirect ? " (graph)" : ""));
    jit::CacheSource source;
    absl::StatusOr<std::shared_ptr<const jit::CachedModule>> got = cache.Get(m, *arch, &source);
    if (!got.ok()) {
      return absl::Status(got.status().code(), absl::StrCat("kernel module ", m.file, jit::Suffix(m), ": ",
                                                            got.status().message()));
    }
  }
  const jit::CacheStats stats = cache.stats();
  report.compiled = static_cast<int>(stats.compiles);
  report.cached = static_cast<int>(stats.disk_hits + stats.memory_hits);
  report.corrupt = static_cast<int>(stats.disk_corrupt);
  report.stale = static_cast<int>(stats.disk_stale);
  report.compile_ms = stats.compile_ms;
  return report;
}

}  // namespace grove
