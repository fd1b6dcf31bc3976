// The seam between the runtime and a backend: what the executor needs from
// the CPU or CUDA backend. The runtime (binding, plan cache, executor) is
// written against this interface only and includes no file of
// lib/backends/cuda/ or jit/; each backend implements it in its own room
// (lib/backends/cpu/cpu_backend.cc, lib/backends/cuda/cuda_backend.cc), and
// the composition root lib/backends/backends.cc picks one (CreateBackend).
//
// A backend owns one session's device state: its memory, its stream, the
// kernel context its kernels reach through KernelContext::Host, and the
// counters of what the session did on the device. Together with
// plan_step.h this header is the backend interface; it depends on ir only.
#ifndef GROVE_LIB_RUNTIME_BACKEND_H_
#define GROVE_LIB_RUNTIME_BACKEND_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "grove/grove.h"
#include "lib/ir/op_registry.h"
#include "lib/runtime/plan_step.h"

namespace grove::runtime {

// What a session did on its device, counted by the backend (all 0 on the CPU).
struct BackendCounters {
  int64_t allocations = 0;
  int64_t synchronizations = 0;
  int64_t device_to_host_reads = 0;
  int64_t launches = 0;        // kernel launches and GEMMs made one by one (not captured)
  int64_t graph_launches = 0;  // LaunchGraph calls
};

// A segment's device work, captured once (Backend::EndCapture) and replayed
// as a whole (Backend::LaunchGraph): a CUDA graph.
class BackendGraph {
 public:
  virtual ~BackendGraph() = default;
  virtual int64_t nodes() const = 0;
  virtual int64_t bytes() const = 0;  // what its record holds, as far as known
};

// Backend addresses reserved once, whose start never moves, with memory
// mapped from the start as Grow asks (CUDA: cuMemAddressReserve and
// cuMemMap): the session's stable arena (SessionStats::arena_bytes).
class BackendRange {
 public:
  virtual ~BackendRange() = default;
  virtual uint8_t* base() const = 0;
  virtual uint64_t mapped() const = 0;
  virtual uint64_t reserved() const = 0;
  // Maps so that [base, base + bytes) is usable; what is mapped stays where
  // it is, contents included. ResourceExhausted when it cannot.
  virtual absl::Status Grow(uint64_t bytes) = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;

  virtual ir::Backend kind() const = 0;
  // "cpu", or the device's name and arch.
  virtual std::string Describe() const = 0;

  // --- planning ------------------------------------------------------------
  // Whether this backend's kernel for `node` (registered in the op registry)
  // takes it with these input and output dtypes (kUnknown: not known yet);
  // when not, the step runs its CPU kernel with copies.
  virtual bool Takes(const ir::Node& node, absl::Span<const DType> dtypes) const = 0;
  // Plan passes that belong to this backend (CUDA: elementwise chains fused
  // into one kernel). Runs after kernels are chosen, before lifetimes and
  // memory are planned.
  virtual void RefinePlan(PlanGraph& plan) const {}
  // Whether the plans prepared from now on serve a shape bucket
  // (SessionOptions::shape_buckets): the plan at the bucket's bound, whose
  // graphs are captured once, and the plans of its smaller shapes, which
  // refresh those graphs with their own parameters. A kernel may then pick
  // a form that reads a dim from its parameters where its usual form would
  // bake it into the graph (CUDA: a GEMM whose N or K may vary runs the
  // tiled kernel of jit/kernels/gemm_tiled.cuh instead of cuBLASLt).
  // `bucket` names the bucket (the same for its bound and its shapes, the
  // bound planned first), so a kernel keeps for a bucket's shapes the
  // variant it chose at the bound (a graph refreshes only the launches it
  // captured); nullptr: plans of exact shapes.
  virtual void SetBucketPlans(const void* bucket) {}

  // --- memory ----------------------------------------------------------------
  // True when kernels read host memory (the CPU): views are used in place and
  // nothing is copied, uploaded or waited for.
  virtual bool host_memory() const = 0;
  // Backend memory (device memory on CUDA), 64-byte aligned at least.
  virtual absl::StatusOr<void*> Allocate(uint64_t bytes) = 0;
  virtual void Free(void* ptr) = 0;
  // True for memory kernels of this backend can read in place.
  virtual bool IsDevicePointer(const void* ptr) const = 0;
  // A range of backend addresses (see BackendRange) of as many bytes as
  // the device has; UNIMPLEMENTED where the backend cannot (the CPU: plans
  // then keep arenas of their own).
  virtual absl::StatusOr<std::unique_ptr<BackendRange>> ReserveRange() {
    return absl::UnimplementedError("this backend does not reserve address ranges");
  }
  // Copies between host and backend memory in either direction, in order on
  // the session's stream; Synchronize waits for all of them.
  virtual absl::Status CopyAsync(void* dst, const void* src, uint64_t bytes) = 0;
  virtual absl::Status Synchronize() = 0;
  // The model's bytes (weights point into them) in backend memory, shared by
  // every session on the same device: `key` names that device, `Upload`
  // makes the copy (freed with the returned pointer's last owner).
  virtual const void* device_key() const = 0;
  virtual absl::StatusOr<std::shared_ptr<const uint8_t>> Upload(const uint8_t* bytes, uint64_t size) = 0;

  // --- running ---------------------------------------------------------------
  // What kernels reach through KernelContext::Host::backend_context()
  // (cuda::ExecContext on CUDA), nullptr on the CPU.
  virtual void* kernel_context() = 0;
  // The threads this backend's kernels split work over
  // (KernelContext::Host::intra_op_threads): the CPU backend's own pool of
  // SessionOptions::intra_op_threads; nullptr: the calling thread only.
  virtual ir::IntraOpThreads* intra_op_threads() { return nullptr; }
  // Host copies of the next step's inputs whose values the plan knows
  // (weights, folded values), nullptr elsewhere: CUDA kernels read them
  // instead of the device (cuda::ExecContext::host_input).
  virtual void SetStepHostInputs(absl::Span<const TensorView* const> host_inputs) {}

  // --- graphs ----------------------------------------------------------------
  // Whether BeginCapture can work (CUDA on a GPU or the emulated device).
  virtual bool captures_graphs() const { return false; }
  // Between BeginCapture and EndCapture the kernels' work on the session's
  // stream is recorded, not run; a kernel that waits for the device or reads
  // it back fails, and so does EndCapture, which ends the capture either way.
  // LaunchGraph queues a replay of what was captured: the same kernels with
  // the same parameters and pointers, on the memory's contents of then.
  virtual absl::Status BeginCapture() { return absl::UnimplementedError("this backend does not capture graphs"); }
  virtual absl::StatusOr<std::unique_ptr<BackendGraph>> EndCapture() {
    return absl::FailedPreconditionError("no capture in progress");
  }
  virtual absl::Status LaunchGraph(const BackendGraph& graph) {
    return absl::UnimplementedError("this backend does not launch graphs");
  }
  // A refresh of `graph` for buffers that moved: between BeginRefresh and
  // EndRefresh the kernels' calls run nothing and are checked against what
  // the graph captured, their new parameters (pointers included) replacing
  // its own. EndRefresh: OK when the graph now replays this work, else why
  // not (the graph is unchanged). Only graphs Refreshable says so.
  // `bucket`: the graph was captured for a larger shape of the same bucket
  // (SessionOptions::shape_buckets) whose buffers are these, each large
  // enough for that shape: a kernel may keep its captured grid (kernels loop
  // over their work grid-stride), and a GEMM, copy or memset may keep
  // captured sizes at least the new ones (rows past the actual ones are the
  // bound's, never read as results).
  virtual bool Refreshable(const BackendGraph& graph) const { return false; }
  virtual void BeginRefresh(BackendGraph& graph, bool bucket) {}
  virtual absl::Status EndRefresh() { return absl::UnimplementedError("this backend does not refresh graphs"); }

  // Conditional graphs (CUDA 12.4+ conditional nodes, the emulated device):
  // ComposeGraph makes one graph of `pieces` in order, each a graph
  // captured before (kGraph) or a node that picks its body on the device
  // when the replay reaches it, by the byte at `flag` (backend memory):
  // kIf runs bodies[0] when it is not 0, else bodies[1] if given; kWhile
  // runs bodies[0] while it is not 0. The result replays with LaunchGraph
  // and cannot be refreshed. UNIMPLEMENTED where conditional_graphs() is
  // false (If and Loop then read their decisions back on the host).
  virtual bool conditional_graphs() const { return false; }
  enum class PieceKind { kGraph, kIf, kWhile };
  struct GraphPiece {
    PieceKind kind = PieceKind::kGraph;
    std::unique_ptr<BackendGraph> graph;
    const void* flag = nullptr;
    std::vector<std::unique_ptr<BackendGraph>> bodies;
  };
  virtual absl::StatusOr<std::unique_ptr<BackendGraph>> ComposeGraph(std::vector<GraphPiece> pieces) {
    return absl::UnimplementedError("this backend has no conditional graphs");
  }
  // One step of a Loop's trip counter for a WHILE piece, queued on the
  // session's stream (recorded when capturing): init sets *iter = 0 and
  // *flag = (trips > 0 && cond); otherwise *iter += 1 and *flag = (*iter <
  // trips && cond && *iter < cap). trips is *trips when not null, else
  // trips_value; cond likewise (cond then is the body's condition output).
  // A loop the cap stops fails the run at its next wait with `loop`'s
  // message (SessionOptions::max_body_runs).
  struct LoopStep {
    int64_t* iter = nullptr;
    uint8_t* flag = nullptr;
    const int64_t* trips = nullptr;
    int64_t trips_value = 0;
    const uint8_t* cond = nullptr;
    bool cond_value = true;
    int64_t cap = 0;
    bool init = false;
  };
  virtual absl::Status QueueLoopStep(const ir::Node& loop, const LoopStep& step) {
    return absl::UnimplementedError("this backend has no conditional graphs");
  }
  // A Loop's scan output inside a WHILE piece's body, queued on the
  // session's stream (recorded when capturing): the trip's slice of `bytes`
  // at `src` copied to dst + *iter * bytes, the trip LoopStep's counter
  // holds (nothing when *iter >= limit, the trips dst holds).
  struct ScanWrite {
    void* dst = nullptr;
    const void* src = nullptr;
    uint64_t bytes = 0;
    const int64_t* iter = nullptr;
    int64_t limit = 0;
  };
  virtual absl::Status QueueScanWrite(const ScanWrite& write) {
    return absl::UnimplementedError("this backend has no conditional graphs");
  }

  // --- timing (traces) --------------------------------------------------------
  // Marks on the session's stream, for traces timed by the device: MarkStream
  // records one now (CUDA: an event of the session's pool, reused run after
  // run) and returns its number in this run; MarkedMicros is the time from
  // mark `from` to mark `to` once the stream has passed both (after the
  // run's wait); ResetMarks starts a run's numbering again. The CPU has none
  // (its traces use the host clock).
  virtual bool marks_stream() const { return false; }
  virtual void ResetMarks() {}
  virtual absl::StatusOr<int> MarkStream() { return absl::UnimplementedError("this backend does not mark a stream"); }
  virtual absl::StatusOr<double> MarkedMicros(int from, int to) {
    return absl::UnimplementedError("this backend does not mark a stream");
  }

  virtual BackendCounters counters() const { return {}; }

  // The kernel variants the last prepare of `node`'s step chose (CUDA:
  // table, cost model or generic; see lib/backends/cuda/kernel_choice.h),
  // for grove inspect and compile. Empty where nothing was chosen.
  virtual std::vector<KernelChoiceInfo> KernelChoices(const ir::Node& node) const { return {}; }
  // How `node`'s step (as this backend's RefinePlan left it) lays out its
  // activations where not as the model says (StepInfo::layout); "" as the
  // model says.
  virtual std::string StepLayout(const ir::Node& node) const { return ""; }
};

// The backend `options` ask for: the CPU, or a CUDA device (Device::kAuto
// takes CUDA when a device exists). Defined by the composition root
// (lib/backends/backends.cc), which links both backends.
absl::StatusOr<std::unique_ptr<Backend>> CreateBackend(const SessionOptions& options);

}  // namespace grove::runtime

#endif  // GROVE_LIB_RUNTIME_BACKEND_H_
