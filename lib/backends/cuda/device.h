// The CUDA backend's view of a device: memory, copies, launches of JIT
// kernel entry points and GEMMs, on streams. Two implementations:
//   - the real device (cuda_device.cc): CUDA runtime, NVRTC through the
//     kernel cache, cuBLASLt; never libcuda directly;
//   - the emulated device (emulated_device.cc, in grove_cuda_emulation, for
//     tests): host memory, the kernel templates compiled as host C++
//     (jit/emulation.h), GEMM by the CPU BLAS.
// (The recording device of recording_device.h runs nothing; CountingDevice
// of counting_device.h wraps any of them to count one session's calls.)
// The op kernels of lib/backends/cuda/ see only this interface, so CI runs
// them end to end without a GPU.
#ifndef GROVE_LIB_BACKENDS_CUDA_DEVICE_H_
#define GROVE_LIB_BACKENDS_CUDA_DEVICE_H_

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "grove/grove.h"
#include "jit/module.h"

namespace grove::cuda {

using Stream = void*;  // cudaStream_t; nullptr is the legacy default stream

struct LaunchDims {
  std::array<uint32_t, 3> grid{1, 1, 1};
  std::array<uint32_t, 3> block{1, 1, 1};
  // The kernel gives each item to one thread, grid-stride, with no block-wide
  // cooperation (GridFor's launches): its result depends on neither the grid
  // nor the block, so a graph captured for a bucket's bound replays another
  // shape's parameters with its own block (ParamDevice::BeginRefresh).
  bool any_block = false;
};

// Row-major batched GEMM: C[b] = alpha * op(A[b]) * op(B[b]) + beta * C[b]
// (+ bias[n] on every row) (then the epilogue activation). A is m x k after
// op, B is k x n after op; ld* are row strides in elements; batch strides in
// elements, 0 broadcasts one matrix to every batch.
struct GemmDesc {
  enum class Epilogue { kNone, kRelu, kGelu };
  // How an f32 GEMM multiplies: kF32 exactly (IEEE f32 products and sums);
  // kTF32 / kBF16 / kF16 round A and B to tf32 / bf16 / f16 first and
  // accumulate in f32 (cuBLASLt's fast compute modes, tensor cores). Ignored
  // for f16 and bf16 data, which always accumulate in f32.
  enum class Math { kF32, kTF32, kBF16, kF16 };
  Math math = Math::kF32;
  DType dtype = DType::kF32;  // of A, B, C and bias (f32, f16, bf16; f32 accumulate)
  // C's dtype when it differs: kF32 under f16 or bf16 A and B (the products
  // of FusedAttention's scores, kept in f32). kUnknown: `dtype`. Only
  // Device::Gemm takes it (not the gemv or tiled kernels).
  DType c_dtype = DType::kUnknown;
  DType out_dtype() const { return c_dtype == DType::kUnknown ? dtype : c_dtype; }
  bool trans_a = false, trans_b = false;
  int64_t m = 0, n = 0, k = 0;
  const void* a = nullptr;
  int64_t lda = 0, stride_a = 0;
  const void* b = nullptr;
  int64_t ldb = 0, stride_b = 0;
  void* c = nullptr;
  int64_t ldc = 0, stride_c = 0;
  int64_t batch = 1;
  float alpha = 1.0f, beta = 0.0f;
  const void* bias = nullptr;
  Epilogue epilogue = Epilogue::kNone;
  // Which of cuBLASLt's heuristic answers runs it: -1 (the default) the
  // first; i >= 0 the i-th, measured fastest by `grove tune` for the GEMM's
  // shape bucket (a dispatch table's "gemm" entry), the first when the
  // heuristic gives fewer. Devices without cuBLASLt ignore it.
  int algorithm = -1;
};

// Calls made to a device, counted since it was made. The real device is
// shared by every session on its GPU, so its counts mix them; a
// CountingDevice (counting_device.h) counts one session's. Subtract two
// readings to learn what one run did.
struct DeviceCounts {
  int64_t launches = 0;          // kernels launched
  int64_t gemms = 0;             // GEMMs run
  int64_t allocations = 0;       // Allocate calls, failed ones included
  int64_t frees = 0;             // Free calls with a non-null pointer
  int64_t synchronizations = 0;  // Synchronize calls
  // CopyAsync calls of at least one byte from device to host memory (a read
  // the host waits for before it uses the bytes) and from host to device
  // memory. Host-to-host and device-to-device copies are not counted.
  int64_t device_to_host_copies = 0;
  int64_t device_to_host_bytes = 0;
  int64_t host_to_device_copies = 0;
  int64_t host_to_device_bytes = 0;
  // LaunchGraph calls. The work a replay runs is not in launches and gemms:
  // those count what was launched one by one, outside graphs.
  int64_t graph_launches = 0;

  friend DeviceCounts operator-(const DeviceCounts& a, const DeviceCounts& b) {
    return {a.launches - b.launches,
            a.gemms - b.gemms,
            a.allocations - b.allocations,
            a.frees - b.frees,
            a.synchronizations - b.synchronizations,
            a.device_to_host_copies - b.device_to_host_copies,
            a.device_to_host_bytes - b.device_to_host_bytes,
            a.host_to_device_copies - b.host_to_device_copies,
            a.host_to_device_bytes - b.host_to_device_bytes,
            a.graph_launches - b.graph_launches};
  }
  friend bool operator==(const DeviceCounts&, const DeviceCounts&) = default;
};

struct DeviceStats {
  int64_t launches = 0;
  int64_t gemms = 0;
  int64_t bytes_allocated = 0;  // live device bytes
  int64_t peak_bytes_allocated = 0;
  int64_t modules_loaded = 0;   // cubins loaded into this device
  int64_t modules_rebuilt = 0;  // refused by the driver (stale) and recompiled
  // As in DeviceCounts (launches and gemms above are counted the same way).
  int64_t allocations = 0;
  int64_t frees = 0;
  int64_t synchronizations = 0;
  int64_t device_to_host_copies = 0;
  int64_t device_to_host_bytes = 0;
  int64_t host_to_device_copies = 0;
  int64_t host_to_device_bytes = 0;
  int64_t graph_launches = 0;
};

// The counts of DeviceCounts as relaxed atomics: what every Device
// implementation keeps. Safe and cheap (one uncontended atomic add, no lock)
// to bump from any thread.
class DeviceCounters {
 public:
  void CountLaunch() { Add(launches_, 1); }
  void CountGemm() { Add(gemms_, 1); }
  void CountAllocation() { Add(allocations_, 1); }
  void CountFree() { Add(frees_, 1); }
  void CountSynchronization() { Add(synchronizations_, 1); }
  void CountGraphLaunch() { Add(graph_launches_, 1); }
  // A copy of `bytes` to device memory or not (dst_on_device) from device
  // memory or not (src_on_device); counted only between host and device.
  void CountCopy(bool dst_on_device, bool src_on_device, size_t bytes) {
    if (bytes == 0 || dst_on_device == src_on_device) return;
    if (src_on_device) {
      Add(device_to_host_copies_, 1);
      Add(device_to_host_bytes_, static_cast<int64_t>(bytes));
    } else {
      Add(host_to_device_copies_, 1);
      Add(host_to_device_bytes_, static_cast<int64_t>(bytes));
    }
  }

  DeviceCounts Read() const {
    return {Get(launches_),         Get(gemms_),
            Get(allocations_),      Get(frees_),
            Get(synchronizations_), Get(device_to_host_copies_),
            Get(device_to_host_bytes_), Get(host_to_device_copies_),
            Get(host_to_device_bytes_), Get(graph_launches_)};
  }
  // Writes the counts into their fields of *stats (the others stay).
  void Fill(DeviceStats* stats) const {
    const DeviceCounts c = Read();
    stats->launches = c.launches;
    stats->gemms = c.gemms;
    stats->allocations = c.allocations;
    stats->frees = c.frees;
    stats->synchronizations = c.synchronizations;
    stats->device_to_host_copies = c.device_to_host_copies;
    stats->device_to_host_bytes = c.device_to_host_bytes;
    stats->host_to_device_copies = c.host_to_device_copies;
    stats->host_to_device_bytes = c.host_to_device_bytes;
    stats->graph_launches = c.graph_launches;
  }

 private:
  static void Add(std::atomic<int64_t>& counter, int64_t n) { counter.fetch_add(n, std::memory_order_relaxed); }
  static int64_t Get(const std::atomic<int64_t>& counter) { return counter.load(std::memory_order_relaxed); }

  std::atomic<int64_t> launches_{0}, gemms_{0}, allocations_{0}, frees_{0}, synchronizations_{0};
  std::atomic<int64_t> device_to_host_copies_{0}, device_to_host_bytes_{0};
  std::atomic<int64_t> host_to_device_copies_{0}, host_to_device_bytes_{0};
  std::atomic<int64_t> graph_launches_{0};
};

// Device work captured once and replayed as a whole (a CUDA graph): made by
// Device::EndCapture, replayed by Device::LaunchGraph on the device that
// made it, destroyed with this object.
class DeviceGraph {
 public:
  virtual ~DeviceGraph() = default;
  // Kernel launches, GEMMs, copies and memsets captured.
  virtual int64_t num_nodes() const = 0;
  // Host memory the graph's record holds, as far as it is known (the
  // emulated device: its calls' parameter bytes; a GPU: the kernel
  // parameters seen while capturing). The driver's own share on a GPU is
  // not visible and not counted.
  virtual int64_t bytes() const = 0;
};

// A point in a stream's work (a CUDA event) for timing on the device:
// made by Device::CreateEvent, recorded by Device::RecordEvent (again and
// again: each record moves it), read by Device::ElapsedMicros once the
// stream has passed it; destroyed with this object.
class DeviceEvent {
 public:
  virtual ~DeviceEvent() = default;
};

// A range of device addresses reserved once, whose start never moves, with
// memory mapped into it from its start as it grows (CUDA's virtual memory
// management: cuMemAddressReserve, then cuMemCreate + cuMemMap per growth).
// The session's stable arena: graphs captured on its addresses stay valid
// when it grows. Unmapped and released with this object.
class AddressRange {
 public:
  virtual ~AddressRange() = default;
  uint8_t* base() const { return base_; }
  uint64_t reserved() const { return reserved_; }
  uint64_t mapped() const { return mapped_; }
  // Maps memory so that [base, base + bytes) is usable, keeping what is
  // mapped (and its contents) where it is. ResourceExhausted past
  // reserved() or when the device has no memory left (nothing changes).
  virtual absl::Status Grow(uint64_t bytes) = 0;

 protected:
  uint8_t* base_ = nullptr;
  uint64_t reserved_ = 0;
  uint64_t mapped_ = 0;
};

// An AddressRange that forwards to another and counts each Grow that maps
// more as one allocation on `counters`; `on_bytes` (optional) hears the
// bytes mapped (+) and, when the range goes, unmapped (-).
class CountedRange final : public AddressRange {
 public:
  CountedRange(std::unique_ptr<AddressRange> inner, DeviceCounters* counters,
               std::function<void(int64_t)> on_bytes = nullptr)
      : inner_(std::move(inner)), counters_(counters), on_bytes_(std::move(on_bytes)) {
    base_ = inner_->base();
    reserved_ = inner_->reserved();
    mapped_ = inner_->mapped();
  }
  ~CountedRange() override {
    if (on_bytes_ && mapped_ > 0) on_bytes_(-static_cast<int64_t>(mapped_));
  }
  absl::Status Grow(uint64_t bytes) override {
    if (bytes <= mapped_) return absl::OkStatus();
    counters_->CountAllocation();
    if (absl::Status s = inner_->Grow(bytes); !s.ok()) return s;
    if (on_bytes_) on_bytes_(static_cast<int64_t>(inner_->mapped() - mapped_));
    mapped_ = inner_->mapped();
    return absl::OkStatus();
  }

 private:
  std::unique_ptr<AddressRange> inner_;
  DeviceCounters* counters_;
  std::function<void(int64_t)> on_bytes_;
};

class Device {
 public:
  virtual ~Device() = default;

  // "NVIDIA H200 (sm_90, 139 GiB)" or "emulated CUDA device (host)".
  virtual std::string Describe() const = 0;
  virtual bool emulated() const = 0;
  // Compute capability as major * 10 + minor (90 for sm_90).
  virtual int arch() const = 0;
  // Streaming multiprocessors; 0 when not known (emulated, recording).
  virtual int sm_count() const { return 0; }
  // The CUDA driver's version (12040 for 12.4); 0 when there is none.
  virtual int driver_version() const { return 0; }

  // Times `work` (calls that queue on `stream`): `warmup` untimed runs, then
  // `repeats` timed ones, each one's microseconds. A GPU brackets each run
  // with CUDA events; this default uses the host clock around a synchronize.
  virtual absl::StatusOr<std::vector<double>> TimeRuns(Stream stream, const std::function<absl::Status()>& work,
                                                       int warmup, int repeats) {
    std::vector<double> times;
    for (int i = 0; i < warmup + repeats; ++i) {
      const auto start = std::chrono::steady_clock::now();
      if (absl::Status s = work(); !s.ok()) return s;
      if (absl::Status s = Synchronize(stream); !s.ok()) return s;
      const auto end = std::chrono::steady_clock::now();
      if (i >= warmup) times.push_back(std::chrono::duration<double, std::micro>(end - start).count());
    }
    return times;
  }

  // Device memory; ResourceExhausted when there is none left.
  virtual absl::StatusOr<void*> Allocate(size_t bytes) = 0;
  virtual void Free(void* ptr) = 0;
  // Reserves `max_bytes` of addresses (rounded up to the device's mapping
  // granularity; 0: the device's memory size, 16 GiB on a host stand-in)
  // with nothing mapped yet. Its mapped memory is device memory
  // (IsDevicePointer) and counts in stats' bytes; each Grow that maps more
  // is one allocation. UNIMPLEMENTED where the device cannot.
  virtual absl::StatusOr<std::unique_ptr<AddressRange>> ReserveRange(uint64_t max_bytes) {
    return absl::UnimplementedError(absl::StrCat(Describe(), " does not reserve address ranges"));
  }
  // True for memory this device (or CUDA's unified addressing) says is
  // device memory; host pointers, pinned or not, are false.
  virtual bool IsDevicePointer(const void* ptr) const = 0;

  // Copies between any two of host and device memory (unified addressing).
  virtual absl::Status CopyAsync(void* dst, const void* src, size_t bytes, Stream stream) = 0;
  virtual absl::Status MemsetAsync(void* dst, int value, size_t bytes, Stream stream) = 0;

  // Launches entry point EntryName(kernel, module) with one parameter struct.
  // The module is compiled (or found in the kernel cache) on first use.
  virtual absl::Status Launch(const jit::ModuleSpec& module, absl::string_view kernel, const LaunchDims& dims,
                              const void* params, size_t params_bytes, Stream stream) = 0;
  virtual absl::Status Gemm(const GemmDesc& gemm, Stream stream) = 0;

  // --- CUDA graphs ---------------------------------------------------------
  // BeginCapture starts recording the work this thread queues on `stream`:
  // until EndCapture, Launch, Gemm, CopyAsync and MemsetAsync on it are
  // recorded, not run. A call that waits for the device or reads it back
  // (Synchronize, a copy into host memory) fails and spoils the capture, as
  // CUDA's thread-local capture mode does. EndCapture ends the capture either
  // way and returns the graph, or why the capture failed. LaunchGraph queues
  // a replay of all of it on `stream`: the parameters recorded (pointers
  // included), on the memory's contents when the replay runs. Devices that
  // cannot capture return UNIMPLEMENTED from BeginCapture.
  virtual bool captures_graphs() const { return false; }
  virtual absl::Status BeginCapture(Stream stream) {
    return absl::UnimplementedError(absl::StrCat(Describe(), " does not capture graphs"));
  }
  virtual absl::StatusOr<std::unique_ptr<DeviceGraph>> EndCapture(Stream stream) {
    return absl::FailedPreconditionError("no capture in progress");
  }
  virtual absl::Status LaunchGraph(const DeviceGraph& graph, Stream stream) {
    return absl::UnimplementedError(absl::StrCat(Describe(), " does not launch graphs"));
  }

  // Conditional nodes (CUDA 12.4+): 0 none, 1 IF and WHILE nodes, 2 IF
  // nodes with an ELSE body too (12.8+; before, an else body is a second IF
  // node on the negated flag, so ComposeGraph takes two bodies either way).
  virtual int conditional_level() const { return 0; }
  // One graph of `pieces` in order (none may be captured or composed into
  // another graph since): a plain piece replays its graph; a conditional
  // piece decides on the device, when the replay reaches it, by the byte at
  // `flag` (device memory): kIf runs bodies[0] when it is not 0, else
  // bodies[1] if given; kWhile runs bodies[0] while it is not 0, read before
  // each trip (the body updates it). Outside a capture; UNIMPLEMENTED when
  // conditional_level() is 0.
  enum class PieceKind { kGraph, kIf, kWhile };
  struct GraphPiece {
    PieceKind kind = PieceKind::kGraph;
    std::unique_ptr<DeviceGraph> graph;               // kGraph
    const void* flag = nullptr;                       // kIf, kWhile
    std::vector<std::unique_ptr<DeviceGraph>> bodies;  // kIf: 1 or 2; kWhile: 1
  };
  virtual absl::StatusOr<std::unique_ptr<DeviceGraph>> ComposeGraph(std::vector<GraphPiece> pieces, Stream stream) {
    return absl::UnimplementedError(absl::StrCat(Describe(), " has no conditional graph nodes"));
  }

  // --- timing -------------------------------------------------------------
  // Events (DeviceEvent): a GPU's are CUDA events, timed where the stream
  // passes them; a device whose kernels run at launch (emulated, recording)
  // takes the host clock when recorded. Recording while capturing a graph
  // fails (and spoils the capture). ElapsedMicros: the microseconds from
  // `start` to `end`, both recorded on one stream and passed by it
  // (FailedPrecondition when one is not recorded or not passed yet).
  virtual absl::StatusOr<std::unique_ptr<DeviceEvent>> CreateEvent() {
    return absl::UnimplementedError(absl::StrCat(Describe(), " has no events"));
  }
  virtual absl::Status RecordEvent(DeviceEvent& event, Stream stream) {
    return absl::UnimplementedError(absl::StrCat(Describe(), " has no events"));
  }
  virtual absl::StatusOr<double> ElapsedMicros(const DeviceEvent& start, const DeviceEvent& end) {
    return absl::UnimplementedError(absl::StrCat(Describe(), " has no events"));
  }

  virtual absl::StatusOr<Stream> CreateStream() = 0;
  virtual void DestroyStream(Stream stream) = 0;
  virtual absl::Status Synchronize(Stream stream) = 0;

  // Memory, module and call counts since the device was made (see
  // DeviceCounts for what each call count counts).
  virtual DeviceStats stats() const = 0;
};

// A Device that forwards every call to another: the base of the wrappers
// (CountingDevice, ParamDevice, test devices), which override what they
// change.
class ForwardingDevice : public Device {
 public:
  // `device` must not be null.
  explicit ForwardingDevice(std::shared_ptr<Device> device) : device_(std::move(device)) {}
  // The wrapped device.
  const std::shared_ptr<Device>& device() const { return device_; }

  std::string Describe() const override { return device_->Describe(); }
  bool emulated() const override { return device_->emulated(); }
  int arch() const override { return device_->arch(); }
  int sm_count() const override { return device_->sm_count(); }
  int driver_version() const override { return device_->driver_version(); }
  absl::StatusOr<std::vector<double>> TimeRuns(Stream stream, const std::function<absl::Status()>& work, int warmup,
                                               int repeats) override {
    return device_->TimeRuns(stream, work, warmup, repeats);
  }
  absl::StatusOr<void*> Allocate(size_t bytes) override { return device_->Allocate(bytes); }
  void Free(void* ptr) override { device_->Free(ptr); }
  absl::StatusOr<std::unique_ptr<AddressRange>> ReserveRange(uint64_t max_bytes) override {
    return device_->ReserveRange(max_bytes);
  }
  bool IsDevicePointer(const void* ptr) const override { return device_->IsDevicePointer(ptr); }
  absl::Status CopyAsync(void* dst, const void* src, size_t bytes, Stream stream) override {
    return device_->CopyAsync(dst, src, bytes, stream);
  }
  absl::Status MemsetAsync(void* dst, int value, size_t bytes, Stream stream) override {
    return device_->MemsetAsync(dst, value, bytes, stream);
  }
  absl::Status Launch(const jit::ModuleSpec& module, absl::string_view kernel, const LaunchDims& dims,
                      const void* params, size_t params_bytes, Stream stream) override {
    return device_->Launch(module, kernel, dims, params, params_bytes, stream);
  }
  absl::Status Gemm(const GemmDesc& gemm, Stream stream) override { return device_->Gemm(gemm, stream); }
  bool captures_graphs() const override { return device_->captures_graphs(); }
  absl::Status BeginCapture(Stream stream) override { return device_->BeginCapture(stream); }
  absl::StatusOr<std::unique_ptr<DeviceGraph>> EndCapture(Stream stream) override {
    return device_->EndCapture(stream);
  }
  absl::Status LaunchGraph(const DeviceGraph& graph, Stream stream) override {
    return device_->LaunchGraph(graph, stream);
  }
  int conditional_level() const override { return device_->conditional_level(); }
  absl::StatusOr<std::unique_ptr<DeviceGraph>> ComposeGraph(std::vector<GraphPiece> pieces, Stream stream) override {
    return device_->ComposeGraph(std::move(pieces), stream);
  }
  absl::StatusOr<std::unique_ptr<DeviceEvent>> CreateEvent() override { return device_->CreateEvent(); }
  absl::Status RecordEvent(DeviceEvent& event, Stream stream) override { return device_->RecordEvent(event, stream); }
  absl::StatusOr<double> ElapsedMicros(const DeviceEvent& start, const DeviceEvent& end) override {
    return device_->ElapsedMicros(start, end);
  }
  absl::StatusOr<Stream> CreateStream() override { return device_->CreateStream(); }
  void DestroyStream(Stream stream) override { device_->DestroyStream(stream); }
  absl::Status Synchronize(Stream stream) override { return device_->Synchronize(stream); }
  DeviceStats stats() const override { return device_->stats(); }

 protected:
  const std::shared_ptr<Device> device_;
};

// A session's events, reused from run to run: Take hands out the next
// one (made on first need), Reset makes them all available again.
class DeviceEventPool {
 public:
  explicit DeviceEventPool(Device* device) : device_(device) {}
  absl::StatusOr<DeviceEvent*> Take() {
    if (used_ == events_.size()) {
      absl::StatusOr<std::unique_ptr<DeviceEvent>> e = device_->CreateEvent();
      if (!e.ok()) return e.status();
      events_.push_back(*std::move(e));
    }
    return events_[used_++].get();
  }
  void Reset() { used_ = 0; }
  size_t made() const { return events_.size(); }

 private:
  Device* device_;
  std::vector<std::unique_ptr<DeviceEvent>> events_;
  size_t used_ = 0;
};

// Whether a CUDA device can be used here, and why not. Never fails: a
// machine without a driver or a GPU reports count 0 with the runtime's reason.
struct CudaProbe {
  int device_count = 0;
  std::string reason;  // empty when device_count > 0
};
CudaProbe ProbeCuda();

// The real device `ordinal` (one object per ordinal per process, shared by
// every session on it). FailedPrecondition when there is none, with the reason.
absl::StatusOr<std::shared_ptr<Device>> OpenCudaDevice(int ordinal = 0);

// Launch helper: a 1-D grid of `threads_per_block` covering n work items,
// at most `max_blocks` blocks (kernels loop grid-stride over the rest).
LaunchDims Grid1D(int64_t n, int threads_per_block = 256, int64_t max_blocks = 65535);

}  // namespace grove::cuda

#endif  // GROVE_LIB_BACKENDS_CUDA_DEVICE_H_
