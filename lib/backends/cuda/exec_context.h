// What a CUDA op kernel sees besides its KernelContext: the device, the
// session's stream and host copies of inputs whose values the plan knows
// (weights, folded shape arithmetic).
//
// A kernel is prepared once per plan and invoked every run (see
// ir::PreparedKernel): its prepare parses attributes, checks shapes and
// builds the launch parameters without pointers; its invoke fills the
// pointers and launches. An invoke is capture-safe: it allocates nothing,
// never synchronises and reads nothing back, unless its prepare said
// needs_host or it reads an input declared in KernelDef::host_inputs whose
// values the plan does not know. Temporaries live in ctx.workspace() (the
// PreparedKernel's workspace_bytes, planned by the executor).
//
//   struct MyPrepared { MyParams p; LaunchDims dims; };
//   absl::StatusOr<ir::PreparedKernel> PrepareMy(const ir::KernelContext& ctx) {
//     MyPrepared m{...};  // from ctx.input(i).shape, ctx.attrs()
//     return cuda::MakePrepared(std::move(m));
//   }
//   absl::Status InvokeMy(ir::KernelContext& ctx) {
//     const auto* m = cuda::PreparedParams<MyPrepared>(ctx);
//     if (m == nullptr) return cuda::NotPrepared(ctx);
//     MyParams p = m->p;
//     p.x = ctx.input(0).data;  // device views
//     return cuda::Exec(ctx).Launch({"my_file", {DType::kF32}}, "my_kernel", m->dims, p);
//   }
#ifndef GROVE_LIB_BACKENDS_CUDA_EXEC_CONTEXT_H_
#define GROVE_LIB_BACKENDS_CUDA_EXEC_CONTEXT_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "jit/kernels/check_params.h"
#include "lib/backends/common/prepared.h"
#include "lib/backends/cuda/device.h"
#include "lib/ir/op_registry.h"

namespace grove::cuda {

class KernelDispatch;  // lib/backends/cuda/kernel_choice.h
class ParamDevice;     // lib/backends/cuda/param_device.h

// A step's site of deferred device checks (see the file comment), kept in
// its prepared params: `check` goes into the kernel's params. Copies share
// the site, which lives as long as one of them.
struct DeviceCheckSite {
  grove_k::CheckSite check{};
  std::shared_ptr<const void> registration;
};

class ExecContext {
 public:
  // The deferred checks are read at Synchronize, or at each wait of the
  // device once ReadChecksAtWaits hooked them there.
  ExecContext(Device& device, Stream stream);
  ~ExecContext();
  ExecContext(const ExecContext&) = delete;
  ExecContext& operator=(const ExecContext&) = delete;

  Device& device() const { return device_; }

  // `device` is the device this context was made with, a ParamDevice (the
  // CUDA backend makes its session's so): the deferred checks are read at
  // each of its waits, whoever waits (a graph replay's, a copy's), until
  // this context ends. Internal error for another device.
  absl::Status ReadChecksAtWaits(ParamDevice& device);
  Stream stream() const { return stream_; }

  // Host views of this step's inputs whose values are known on the host
  // (weights, folded values), nullptr elsewhere. Set by the executor per step.
  void SetHostInputs(absl::Span<const TensorView* const> host_inputs) { host_inputs_ = host_inputs; }
  const TensorView* host_input(int i) const {
    return i < static_cast<int>(host_inputs_.size()) ? host_inputs_[i] : nullptr;
  }

  // True when reading input i's values needs no device read: the input is
  // omitted or empty, or the plan knows its values (host_input(i)). A prepare
  // reads such inputs with ReadInts/ReadBytes; the others wait for the run.
  bool ValuesOnHost(const ir::KernelContext& ctx, int i) const;

  // The values of integer input `i` (i32/i64, e.g. Slice's starts): from the
  // host copy when there is one, else copied from the device (synchronises:
  // the kernel declares input i in KernelDef::host_inputs).
  absl::StatusOr<std::vector<int64_t>> ReadInts(const ir::KernelContext& ctx, int i);
  // Any input's bytes on the host (synchronises when not known on the host).
  absl::StatusOr<std::vector<uint8_t>> ReadBytes(const ir::KernelContext& ctx, int i);

  // A deferred-check site for `ctx`'s step (called by its prepare): the
  // session's check record (allocated and zeroed on first use) and the
  // message of a failure, node.Describe() + ": " + message(record).
  absl::StatusOr<DeviceCheckSite> CheckSite(const ir::KernelContext& ctx,
                                            std::function<std::string(const grove_k::CheckRecord&)> message);
  // Waits for the stream, then returns the first deferred check that failed
  // since the last wait as its step's error (InvalidArgument) and clears the
  // record. The record's copy is queued before the wait: a run whose kernels
  // check on the device waits no more often than one whose kernels do not.
  absl::Status Synchronize();

  // Runs a GEMM on this step's stream with the session's math mode.
  absl::Status Gemm(GemmDesc gemm) {
    gemm.math = gemm_math_;
    return device_.Gemm(gemm, stream_);
  }
  void set_gemm_math(GemmDesc::Math math) { gemm_math_ = math; }
  GemmDesc::Math gemm_math() const { return gemm_math_; }

  // Whether the step being prepared is in a plan that serves a shape
  // bucket (runtime::Backend::SetBucketPlans): its graphs are captured at
  // the bucket's bound and refreshed for each smaller shape, so what a
  // graph bakes (a cuBLASLt GEMM's sizes) must not vary (tiled_gemm.h).
  void set_bucket_plan(bool bucketed) { bucket_plan_ = bucketed; }
  bool bucket_plan() const { return bucket_plan_; }
  // The bucket's identity (Backend::SetBucketPlans), set with bucket_plan;
  // nullptr for exact shapes, or a bucketed plan of no named bucket (tests).
  void set_bucket(const void* bucket) {
    bucket_ = bucket;
    bucket_plan_ = bucket != nullptr;
  }
  const void* bucket() const { return bucket_; }

  // What a step's prepare chose at its bucket's bound (which the executor
  // plans before the bucket's shapes) and keeps for the bucket's shapes,
  // whose graph replays the bound's launches: per bucket, node and `what`.
  // The node counts by its place (subgraph, index), which holds across
  // plans where the node itself may not (a fused node is made anew for each
  // plan and keeps the place of one node it absorbed). nullptr outside a
  // bucketed plan or before BucketKeep; T must be the type kept.
  template <typename T>
  const T* BucketKept(const ir::Node& node, absl::string_view what) const {
    if (!bucket_plan_) return nullptr;
    auto it = bucket_kept_.find(BucketKeptKey{bucket_, node.subgraph, node.index, std::string(what)});
    return it == bucket_kept_.end() || it->second.tag != Tag<T>() ? nullptr
                                                                  : static_cast<const T*>(it->second.value.get());
  }
  // Keeps `value` (the first kept stays); nothing outside a bucketed plan.
  template <typename T>
  void BucketKeep(const ir::Node& node, absl::string_view what, T value) {
    if (!bucket_plan_) return;
    bucket_kept_.try_emplace(BucketKeptKey{bucket_, node.subgraph, node.index, std::string(what)},
                             KeptValue{Tag<T>(), std::make_shared<T>(std::move(value))});
  }

  // The session's kernel dispatcher (tables, cost model, the choices made):
  // what ChooseVariant (kernel_choice.h) asks; nullptr outside a session
  // (then the cost model for the device's arch decides).
  void set_dispatch(KernelDispatch* dispatch) { dispatch_ = dispatch; }
  KernelDispatch* dispatch() const { return dispatch_; }

  template <typename Params>
  absl::Status Launch(const jit::ModuleSpec& module, absl::string_view kernel, const LaunchDims& dims,
                      const Params& params) {
    return device_.Launch(module, kernel, dims, &params, sizeof(Params), stream_);
  }

  // What a kernel keeps across runs, one per node: grow-only device buffers
  // (a Loop's carried values and scan outputs), so that a steady-state run
  // allocates nothing. Freed with this context, i.e. with the session.
  class KernelState {
   public:
    virtual ~KernelState() = default;
  };
  // The state of `node`, a T made as T(device()) on first use (T derives
  // from KernelState). A kernel whose node may run nested in itself must
  // not hold it across RunSubgraph; If and Loop never nest in themselves.
  template <typename T>
  T& State(const ir::Node& node) {
    StateEntry& e = states_[&node];
    if (e.tag != Tag<T>() || e.state == nullptr) {
      e.state = std::make_unique<T>(device_);
      e.tag = Tag<T>();
    }
    return *static_cast<T*>(e.state.get());
  }

 private:
  Device& device_;
  Stream stream_;
  template <typename T>
  static const void* Tag() {
    static const char tag = 0;
    return &tag;
  }
  struct StateEntry {
    const void* tag = nullptr;
    std::unique_ptr<KernelState> state;
  };

  // The deferred checks: the record (device memory) and its host copy, the
  // live sites' messages (shared with the sites, which may outlive this).
  struct CheckSites;
  class WaitHook;
  absl::Status BeforeWait(Stream stream);
  absl::Status AfterWait();
  std::shared_ptr<CheckSites> sites_;
  grove_k::CheckRecord* record_ = nullptr;
  grove_k::CheckRecord host_record_{};
  bool record_queued_ = false;
  std::unique_ptr<WaitHook> wait_hook_;
  ParamDevice* hooked_ = nullptr;  // the device whose waits read the record

  absl::Span<const TensorView* const> host_inputs_;
  GemmDesc::Math gemm_math_ = GemmDesc::Math::kF32;
  bool bucket_plan_ = false;
  const void* bucket_ = nullptr;
  KernelDispatch* dispatch_ = nullptr;
  absl::flat_hash_map<const ir::Node*, StateEntry> states_;
  using BucketKeptKey = std::tuple<const void*, int, int, std::string>;
  struct KeptValue {
    const void* tag = nullptr;
    std::shared_ptr<const void> value;
  };
  absl::flat_hash_map<BucketKeptKey, KeptValue> bucket_kept_;
};

// The ExecContext of a kernel running on the CUDA backend (from
// KernelContext::Host::backend_context()); the backend guarantees it.
ExecContext& Exec(const ir::KernelContext& ctx);

// MakePrepared and PreparedParams<T> are the backends' shared helpers
// (lib/backends/common/prepared.h); NotPrepared(ctx) is
// backends::NotPrepared(ctx, "CUDA").
using backends::MakePrepared;
using backends::PreparedParams;
absl::Status NotPrepared(const ir::KernelContext& ctx);

// A kernel whose launch parameters depend on the values of some inputs
// (kHostInputs: the bits of KernelDef::host_inputs, e.g. Expand's shape):
// kPlan reads them with ExecContext::ReadInts/ReadBytes, checks and builds P;
// kRun fills pointers and launches. The prepare plans when the plan knows
// every such input on the host (weights, folded values), so the invoke reads
// nothing; otherwise the invoke plans first, reading the values back (the
// executor ends a segment at such a step).
template <typename P, absl::StatusOr<P> (*kPlan)(const ir::KernelContext&),
          absl::Status (*kRun)(ir::KernelContext&, const P&), uint64_t kHostInputs>
struct HostValuesKernel {
  struct Prepared {
    bool at_run = false;
    P params{};
  };
  static absl::StatusOr<ir::PreparedKernel> Prepare(const ir::KernelContext& ctx) {
    const ExecContext& ec = Exec(ctx);
    Prepared p;
    for (int i = 0; i < ctx.num_inputs() && i < 64; ++i) {
      if ((kHostInputs >> i) & 1u) p.at_run |= !ec.ValuesOnHost(ctx, i);
    }
    if (!p.at_run) {
      absl::StatusOr<P> made = kPlan(ctx);
      if (!made.ok()) return made.status();
      p.params = *std::move(made);
    }
    return MakePrepared(std::move(p));
  }
  static absl::Status Invoke(ir::KernelContext& ctx) {
    const Prepared* p = PreparedParams<Prepared>(ctx);
    if (p == nullptr) return NotPrepared(ctx);
    if (!p->at_run) return kRun(ctx, p->params);
    absl::StatusOr<P> made = kPlan(ctx);
    if (!made.ok()) return made.status();
    return kRun(ctx, *made);
  }
  static ir::KernelDef Def() { return ir::KernelDef{&Invoke, &Prepare, kHostInputs}; }
};

}  // namespace grove::cuda

#endif  // GROVE_LIB_BACKENDS_CUDA_EXEC_CONTEXT_H_
