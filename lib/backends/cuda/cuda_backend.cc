#include "lib/backends/cuda/cuda_backend.h"

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "jit/kernels/graph_cond_params.h"
#include "lib/backends/cuda/counting_device.h"
#include "lib/backends/cuda/cuda_kernels.h"
#include "lib/backends/cuda/exec_context.h"
#include "lib/backends/cuda/kernel_choice.h"
#include "lib/backends/cuda/launch_util.h"
#include "lib/backends/cuda/param_device.h"
#include "lib/ir/value_type.h"

namespace grove::cuda {
namespace {

class CudaBackend : public runtime::Backend {
 public:
  struct Graph final : runtime::BackendGraph {
    explicit Graph(std::unique_ptr<DeviceGraph> g) : graph(std::move(g)) {}
    int64_t nodes() const override { return graph->num_nodes(); }
    int64_t bytes() const override { return graph->bytes(); }
    std::unique_ptr<DeviceGraph> graph;
  };

  // Every call of the session, its kernels' included, goes through a
  // counting wrapper (the device object is shared by every session on it),
  // under the wrapper that gives graphs refreshable parameters.
  explicit CudaBackend(std::shared_ptr<Device> device)
      : counting_(std::make_shared<CountingDevice>(std::move(device))),
        params_(std::make_shared<ParamDevice>(counting_)),
        device_(params_) {}
  ~CudaBackend() override {
    exec_.reset();
    if (own_stream_) device_->DestroyStream(stream_);
  }

  absl::Status Init(const SessionOptions& options) {
    if (options.cuda_stream != nullptr) {
      stream_ = options.cuda_stream;
    } else {
      absl::StatusOr<Stream> s = device_->CreateStream();
      if (!s.ok()) return s.status();
      stream_ = *s;
      own_stream_ = true;
    }
    exec_ = std::make_unique<ExecContext>(*device_, stream_);
    // device_ is params_: its waits read the session's deferred checks.
    if (absl::Status s = exec_->ReadChecksAtWaits(*params_); !s.ok()) return s;
    exec_->set_gemm_math(static_cast<GemmDesc::Math>(options.cuda_gemm_math));
    absl::StatusOr<std::unique_ptr<KernelDispatch>> dispatch = MakeSessionDispatch(*device_, options);
    if (!dispatch.ok()) return dispatch.status();
    dispatch_ = *std::move(dispatch);
    exec_->set_dispatch(dispatch_.get());
    return absl::OkStatus();
  }

  ir::Backend kind() const override { return ir::Backend::kCuda; }
  std::string Describe() const override { return device_->Describe(); }

  bool Takes(const ir::Node& node, absl::Span<const DType> dtypes) const override {
    if (node.def->kernels[static_cast<int>(ir::Backend::kCuda)] == nullptr) return false;
    for (DType dtype : dtypes) {
      if (dtype == DType::kUnknown) continue;
      if (!((node.def->boxed_on_every_backend && ir::IsBoxed(dtype)) || CudaKernelsCoverDType(dtype))) return false;
    }
    return node.def->backend_takes == nullptr || node.def->backend_takes(ir::Backend::kCuda, node);
  }
  void RefinePlan(runtime::PlanGraph& plan) const override { FuseElementwiseChains(plan); }

  bool host_memory() const override { return false; }
  absl::StatusOr<void*> Allocate(uint64_t bytes) override { return device_->Allocate(bytes); }
  void Free(void* ptr) override { device_->Free(ptr); }
  bool IsDevicePointer(const void* ptr) const override { return device_->IsDevicePointer(ptr); }
  absl::StatusOr<std::unique_ptr<runtime::BackendRange>> ReserveRange() override {
    struct Range final : runtime::BackendRange {
      explicit Range(std::unique_ptr<AddressRange> r) : range(std::move(r)) {}
      uint8_t* base() const override { return range->base(); }
      uint64_t mapped() const override { return range->mapped(); }
      uint64_t reserved() const override { return range->reserved(); }
      absl::Status Grow(uint64_t bytes) override { return range->Grow(bytes); }
      std::unique_ptr<AddressRange> range;
    };
    absl::StatusOr<std::unique_ptr<AddressRange>> r = device_->ReserveRange(0);
    if (!r.ok()) return r.status();
    return std::unique_ptr<runtime::BackendRange>(new Range(*std::move(r)));
  }
  absl::Status CopyAsync(void* dst, const void* src, uint64_t bytes) override {
    return device_->CopyAsync(dst, src, bytes, stream_);
  }
  absl::Status Synchronize() override { return device_->Synchronize(stream_); }
  const void* device_key() const override { return counting_->device().get(); }
  // On the shared device itself (not counted: the upload is the model's,
  // made once for every session on the device).
  absl::StatusOr<std::shared_ptr<const uint8_t>> Upload(const uint8_t* bytes, uint64_t size) override {
    const std::shared_ptr<Device>& shared = counting_->device();
    absl::StatusOr<void*> p = shared->Allocate(size);
    if (!p.ok()) return p.status();
    absl::Status s = shared->CopyAsync(*p, bytes, size, nullptr);
    if (s.ok()) s = shared->Synchronize(nullptr);
    if (!s.ok()) {
      shared->Free(*p);
      return s;
    }
    return std::shared_ptr<const uint8_t>(static_cast<const uint8_t*>(*p),
                                          [shared](const uint8_t* q) { shared->Free(const_cast<uint8_t*>(q)); });
  }

  void* kernel_context() override { return exec_.get(); }
  void SetBucketPlans(const void* bucket) override { exec_->set_bucket(bucket); }
  void SetStepHostInputs(absl::Span<const TensorView* const> host_inputs) override {
    exec_->SetHostInputs(host_inputs);
  }
  bool captures_graphs() const override { return device_->captures_graphs(); }
  absl::Status BeginCapture() override { return device_->BeginCapture(stream_); }
  absl::StatusOr<std::unique_ptr<runtime::BackendGraph>> EndCapture() override {
    absl::StatusOr<std::unique_ptr<DeviceGraph>> graph = device_->EndCapture(stream_);
    if (!graph.ok()) return graph.status();
    return std::unique_ptr<runtime::BackendGraph>(new Graph(*std::move(graph)));
  }
  absl::Status LaunchGraph(const runtime::BackendGraph& graph) override {
    return device_->LaunchGraph(*static_cast<const Graph&>(graph).graph, stream_);
  }
  bool Refreshable(const runtime::BackendGraph& graph) const override {
    return ParamDevice::Refreshable(*static_cast<const Graph&>(graph).graph);
  }
  void BeginRefresh(runtime::BackendGraph& graph, bool bucket) override {
    params_->BeginRefresh(*static_cast<Graph&>(graph).graph, bucket);
  }
  absl::Status EndRefresh() override { return params_->EndRefresh(); }
  bool conditional_graphs() const override { return device_->conditional_level() > 0; }
  absl::Status QueueLoopStep(const ir::Node& loop, const LoopStep& step) override {
    // The Loop's deferred-check site, made once and kept with the session
    // (its graphs hold its id).
    auto it = loop_sites_.find(&loop);
    if (it == loop_sites_.end()) {
      ir::KernelContext ctx(loop, {}, {}, nullptr);
      absl::StatusOr<DeviceCheckSite> site = exec_->CheckSite(ctx, [](const grove_k::CheckRecord& r) {
        return absl::StrCat("ran ", r.value, " trips inside its CUDA graph without stopping, the limit of ",
                            "SessionOptions::max_body_runs");
      });
      if (!site.ok()) return site.status();
      it = loop_sites_.emplace(&loop, *std::move(site)).first;
    }
    grove_k::LoopStepParams p{};
    p.iter = reinterpret_cast<grove_k::i64*>(step.iter);
    p.flag = step.flag;
    p.trips_ptr = reinterpret_cast<const grove_k::i64*>(step.trips);
    p.trips_value = step.trips_value;
    p.cond_ptr = step.cond;
    p.cond_value = step.cond_value ? 1 : 0;
    p.cap = step.cap;
    p.check = it->second.check;
    p.init = step.init ? 1 : 0;
    return exec_->Launch(jit::ModuleSpec{"graph_cond", {DType::kU8}}, "loop_step", LaunchDims{}, p);
  }
  absl::Status QueueScanWrite(const ScanWrite& write) override {
    grove_k::ScanWriteParams p{};
    p.dst = static_cast<grove_k::u8*>(write.dst);
    p.src = static_cast<const grove_k::u8*>(write.src);
    p.bytes = static_cast<grove_k::i64>(write.bytes);
    p.iter = reinterpret_cast<const grove_k::i64*>(write.iter);
    p.limit = write.limit;
    return exec_->Launch(jit::ModuleSpec{"graph_cond", {DType::kU8}}, "scan_write", GridFor(p.bytes), p);
  }
  absl::StatusOr<std::unique_ptr<runtime::BackendGraph>> ComposeGraph(std::vector<GraphPiece> pieces) override {
    std::vector<Device::GraphPiece> device_pieces;
    device_pieces.reserve(pieces.size());
    auto unwrap = [](std::unique_ptr<runtime::BackendGraph>& g) {
      return g == nullptr ? nullptr : std::move(static_cast<Graph&>(*g).graph);
    };
    for (GraphPiece& p : pieces) {
      Device::GraphPiece d;
      d.kind = p.kind == PieceKind::kIf      ? Device::PieceKind::kIf
               : p.kind == PieceKind::kWhile ? Device::PieceKind::kWhile
                                             : Device::PieceKind::kGraph;
      d.graph = unwrap(p.graph);
      d.flag = p.flag;
      for (std::unique_ptr<runtime::BackendGraph>& b : p.bodies) d.bodies.push_back(unwrap(b));
      device_pieces.push_back(std::move(d));
    }
    absl::StatusOr<std::unique_ptr<DeviceGraph>> graph = device_->ComposeGraph(std::move(device_pieces), stream_);
    if (!graph.ok()) return graph.status();
    return std::unique_ptr<runtime::BackendGraph>(new Graph(*std::move(graph)));
  }

  std::vector<KernelChoiceInfo> KernelChoices(const ir::Node& node) const override {
    return dispatch_->Choices(node);
  }
  // The session's dispatcher (grove tune forces variants through it).
  KernelDispatch& dispatch() { return *dispatch_; }

  // Marks are events of the session's pool, recorded on its stream.
  bool marks_stream() const override { return true; }
  void ResetMarks() override {
    marks_pool_.Reset();
    marks_.clear();
  }
  absl::StatusOr<int> MarkStream() override {
    absl::StatusOr<DeviceEvent*> e = marks_pool_.Take();
    if (!e.ok()) return e.status();
    if (absl::Status s = device_->RecordEvent(**e, stream_); !s.ok()) return s;
    marks_.push_back(*e);
    return static_cast<int>(marks_.size()) - 1;
  }
  absl::StatusOr<double> MarkedMicros(int from, int to) override {
    const int n = static_cast<int>(marks_.size());
    if (from < 0 || to < 0 || from >= n || to >= n) {
      return absl::OutOfRangeError(absl::StrCat("MarkedMicros: marks ", from, " and ", to, " of ", n));
    }
    return device_->ElapsedMicros(*marks_[from], *marks_[to]);
  }

  runtime::BackendCounters counters() const override {
    const DeviceCounts c = counting_->counts();
    return runtime::BackendCounters{c.allocations, c.synchronizations, c.device_to_host_copies,
                                    c.launches + c.gemms, c.graph_launches};
  }

 private:
  std::shared_ptr<CountingDevice> counting_;
  std::shared_ptr<ParamDevice> params_;  // over counting_
  std::shared_ptr<Device> device_;       // params_
  // Trace marks: the pool's events and this run's, by number (MarkStream).
  DeviceEventPool marks_pool_{device_.get()};
  std::vector<DeviceEvent*> marks_;
  Stream stream_ = nullptr;
  bool own_stream_ = false;
  std::unique_ptr<KernelDispatch> dispatch_;
  std::unique_ptr<ExecContext> exec_;
  // Per Loop run as a WHILE node: its deferred-check site (QueueLoopStep).
  absl::flat_hash_map<const ir::Node*, DeviceCheckSite> loop_sites_;
};

}  // namespace

KernelDispatch* DispatchOf(runtime::Backend& backend) {
  auto* cuda = dynamic_cast<CudaBackend*>(&backend);
  return cuda != nullptr ? &cuda->dispatch() : nullptr;
}

absl::StatusOr<std::unique_ptr<runtime::Backend>> CreateCudaBackend(std::shared_ptr<Device> device,
                                                                    const SessionOptions& options) {
  if (device == nullptr) return absl::InvalidArgumentError("CreateCudaBackend: device is null");
  auto backend = std::make_unique<CudaBackend>(std::move(device));
  if (absl::Status s = backend->Init(options); !s.ok()) return s;
  return backend;
}

}  // namespace grove::cuda
