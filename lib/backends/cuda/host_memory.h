// Host memory standing in for device memory, for the devices that run
// without a GPU (the emulated device of the tests, the recording device of
// `grove compile`): the block bookkeeping behind Allocate, Free and
// IsDevicePointer, and HostMemoryDevice, the Device methods such a device
// shares (copies and memsets run at once on the host, one synchronous
// stream) and its call counters (DeviceCounters), and graphs: a capture
// records each call as a closure that a replay runs again (HostGraph).
#ifndef GROVE_LIB_BACKENDS_CUDA_HOST_MEMORY_H_
#define GROVE_LIB_BACKENDS_CUDA_HOST_MEMORY_H_

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include <sys/mman.h>
#include <unistd.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "jit/kernels/graph_cond_params.h"
#include "lib/backends/cuda/device.h"

namespace grove::cuda {

class HostMemory {
 public:
  struct Options {
    size_t alignment = 1;  // blocks are rounded up to a multiple of this too
    bool zero_fill = false;
    std::string error_prefix;  // put before "cannot allocate N bytes"
  };
  explicit HostMemory(Options options) : options_(std::move(options)) {}
  HostMemory(const HostMemory&) = delete;
  HostMemory& operator=(const HostMemory&) = delete;
  ~HostMemory() {
    for (auto& [p, size] : blocks_) std::free(reinterpret_cast<void*>(p));
  }

  absl::StatusOr<void*> Allocate(size_t bytes) {
    const size_t a = options_.alignment;
    const size_t cap = (std::max<size_t>(bytes, 1) + a - 1) / a * a;
    void* p = a > 1 ? std::aligned_alloc(a, cap) : std::malloc(cap);
    if (p == nullptr) {
      return absl::ResourceExhaustedError(absl::StrCat(options_.error_prefix, "cannot allocate ", bytes, " bytes"));
    }
    if (options_.zero_fill) std::memset(p, 0, cap);
    std::lock_guard<std::mutex> lock(mu_);
    blocks_[reinterpret_cast<uintptr_t>(p)] = cap;
    bytes_allocated_ += static_cast<int64_t>(cap);
    peak_bytes_allocated_ = std::max(peak_bytes_allocated_, bytes_allocated_);
    return p;
  }
  // Pointers this did not allocate (nullptr included) are ignored.
  void Free(void* ptr) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = blocks_.find(reinterpret_cast<uintptr_t>(ptr));
    if (it == blocks_.end()) return;
    bytes_allocated_ -= static_cast<int64_t>(it->second);
    blocks_.erase(it);
    std::free(ptr);
  }
  // A range of addresses (mmap PROT_NONE, nothing behind them) whose Grow
  // makes its start read-write, a page at a time: the host's stand-in for
  // CUDA's reserved virtual addresses. Its mapped part is a block here
  // (Contains, bytes_allocated). The range must not outlive this.
  absl::StatusOr<std::unique_ptr<AddressRange>> ReserveRange(uint64_t max_bytes) {
    const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
    if (max_bytes == 0) max_bytes = uint64_t{16} << 30;
    const uint64_t size = (max_bytes + page - 1) / page * page;
    void* p = mmap(nullptr, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) {
      return absl::ResourceExhaustedError(
          absl::StrCat(options_.error_prefix, "cannot reserve ", max_bytes, " bytes of addresses"));
    }
    return std::unique_ptr<AddressRange>(new Range(this, static_cast<uint8_t*>(p), size, page));
  }
  // Whether ptr points into a live block.
  bool Contains(const void* ptr) const {
    std::lock_guard<std::mutex> lock(mu_);
    const uintptr_t p = reinterpret_cast<uintptr_t>(ptr);
    auto it = blocks_.upper_bound(p);
    if (it == blocks_.begin()) return false;
    --it;
    return p < it->first + it->second;
  }
  int64_t bytes_allocated() const {
    std::lock_guard<std::mutex> lock(mu_);
    return bytes_allocated_;
  }
  int64_t peak_bytes_allocated() const {
    std::lock_guard<std::mutex> lock(mu_);
    return peak_bytes_allocated_;
  }

 private:
  class Range final : public AddressRange {
   public:
    Range(HostMemory* memory, uint8_t* base, uint64_t size, uint64_t page) : memory_(memory), page_(page) {
      base_ = base;
      reserved_ = size;
    }
    ~Range() override {
      if (mapped_ > 0) {
        std::lock_guard<std::mutex> lock(memory_->mu_);
        memory_->blocks_.erase(reinterpret_cast<uintptr_t>(base_));
        memory_->bytes_allocated_ -= static_cast<int64_t>(mapped_);
      }
      munmap(base_, reserved_);
    }
    absl::Status Grow(uint64_t bytes) override {
      if (bytes <= mapped_) return absl::OkStatus();
      const uint64_t want = (bytes + page_ - 1) / page_ * page_;
      if (want > reserved_) {
        return absl::ResourceExhaustedError(absl::StrCat(memory_->options_.error_prefix, "cannot map ", bytes,
                                                         " bytes in an address range of ", reserved_));
      }
      if (mprotect(base_ + mapped_, want - mapped_, PROT_READ | PROT_WRITE) != 0) {
        return absl::ResourceExhaustedError(
            absl::StrCat(memory_->options_.error_prefix, "cannot map ", want - mapped_, " more bytes"));
      }
      std::lock_guard<std::mutex> lock(memory_->mu_);
      memory_->blocks_[reinterpret_cast<uintptr_t>(base_)] = want;
      memory_->bytes_allocated_ += static_cast<int64_t>(want - mapped_);
      memory_->peak_bytes_allocated_ = std::max(memory_->peak_bytes_allocated_, memory_->bytes_allocated_);
      mapped_ = want;
      return absl::OkStatus();
    }

   private:
    HostMemory* const memory_;
    const uint64_t page_;
  };

  const Options options_;
  mutable std::mutex mu_;
  std::map<uintptr_t, size_t> blocks_;  // start -> size
  int64_t bytes_allocated_ = 0, peak_bytes_allocated_ = 0;
};

// A graph of a device without a GPU: the calls captured, in order, each as
// a closure that runs it again with the parameters it was given then.
class HostGraph final : public DeviceGraph {
 public:
  void Add(std::function<absl::Status()> node, size_t bytes) {
    nodes_.push_back(std::move(node));
    bytes_ += static_cast<int64_t>(bytes);
  }
  absl::Status Run() const {
    for (const auto& node : nodes_) {
      if (absl::Status s = node(); !s.ok()) return s;
    }
    return absl::OkStatus();
  }
  int64_t num_nodes() const override { return static_cast<int64_t>(nodes_.size()) + nested_nodes_; }
  int64_t bytes() const override { return bytes_; }
  // A node that runs graphs of its own (a conditional node's bodies): their
  // nodes and bytes count in this graph's.
  void AddNested(std::function<absl::Status()> node, int64_t nodes, int64_t bytes) {
    nodes_.push_back(std::move(node));
    nested_nodes_ += nodes;
    bytes_ += bytes;
  }

 private:
  std::vector<std::function<absl::Status()>> nodes_;
  int64_t nested_nodes_ = 0;
  int64_t bytes_ = 0;
};

// An event of a device without a GPU: the host clock when recorded.
struct HostEvent final : DeviceEvent {
  std::chrono::steady_clock::time_point at;
  bool recorded = false;
};

// The memory and stream methods of a Device (or of an interface derived
// from it) whose memory is HostMemory.
template <typename Base = Device>
class HostMemoryDevice : public Base {
 public:
  explicit HostMemoryDevice(HostMemory::Options options) : memory_(std::move(options)) {}

  absl::StatusOr<void*> Allocate(size_t bytes) override {
    counters_.CountAllocation();
    return memory_.Allocate(bytes);
  }
  void Free(void* ptr) override {
    if (ptr == nullptr) return;
    counters_.CountFree();
    memory_.Free(ptr);
  }
  // Each Grow that maps more counts as an allocation of this device.
  absl::StatusOr<std::unique_ptr<AddressRange>> ReserveRange(uint64_t max_bytes) override {
    absl::StatusOr<std::unique_ptr<AddressRange>> r = memory_.ReserveRange(max_bytes);
    if (!r.ok()) return r.status();
    return std::unique_ptr<AddressRange>(new CountedRange(std::move(*r), &counters_));
  }
  bool IsDevicePointer(const void* ptr) const override { return memory_.Contains(ptr); }
  // "Device" memory is this device's blocks; any other pointer is host memory.
  absl::Status CopyAsync(void* dst, const void* src, size_t bytes, Stream) override {
    if (bytes == 0) return absl::OkStatus();
    if (HostGraph* g = capturing()) {
      if (!memory_.Contains(dst)) return Spoil("a copy into host memory (the host would read it before it is made)");
      g->Add([dst, src, bytes] {
        std::memmove(dst, src, bytes);
        return absl::OkStatus();
      }, 0);
      return absl::OkStatus();
    }
    counters_.CountCopy(memory_.Contains(dst), memory_.Contains(src), bytes);
    std::memmove(dst, src, bytes);
    return absl::OkStatus();
  }
  absl::Status MemsetAsync(void* dst, int value, size_t bytes, Stream) override {
    if (bytes == 0) return absl::OkStatus();
    if (HostGraph* g = capturing()) {
      g->Add([dst, value, bytes] {
        std::memset(dst, value, bytes);
        return absl::OkStatus();
      }, 0);
      return absl::OkStatus();
    }
    std::memset(dst, value, bytes);
    return absl::OkStatus();
  }
  absl::StatusOr<Stream> CreateStream() override { return static_cast<Stream>(nullptr); }
  void DestroyStream(Stream) override {}
  absl::Status Synchronize(Stream) override {
    if (capturing() != nullptr) return Spoil("Synchronize");
    counters_.CountSynchronization();
    return absl::OkStatus();
  }

  // Events on the host clock: the work before a record has run by then.
  absl::StatusOr<std::unique_ptr<DeviceEvent>> CreateEvent() override {
    return std::unique_ptr<DeviceEvent>(new HostEvent());
  }
  absl::Status RecordEvent(DeviceEvent& event, Stream) override {
    if (capturing() != nullptr) return Spoil("RecordEvent");
    auto& e = static_cast<HostEvent&>(event);
    e.at = std::chrono::steady_clock::now();
    e.recorded = true;
    return absl::OkStatus();
  }
  absl::StatusOr<double> ElapsedMicros(const DeviceEvent& start, const DeviceEvent& end) override {
    const auto& a = static_cast<const HostEvent&>(start);
    const auto& b = static_cast<const HostEvent&>(end);
    if (!a.recorded || !b.recorded) return absl::FailedPreconditionError("ElapsedMicros: an event was not recorded");
    return std::chrono::duration<double, std::micro>(b.at - a.at).count();
  }

  // Graphs: one capture at a time per thread (the session's), whatever the
  // stream (a host device has one).
  bool captures_graphs() const override { return true; }
  absl::Status BeginCapture(Stream) override {
    Capture& c = ThreadCapture();
    if (c.device != nullptr) return absl::FailedPreconditionError("a graph capture is already in progress on this thread");
    c.device = this;
    c.graph = std::make_unique<HostGraph>();
    c.error = absl::OkStatus();
    return absl::OkStatus();
  }
  absl::StatusOr<std::unique_ptr<DeviceGraph>> EndCapture(Stream) override {
    Capture& c = ThreadCapture();
    if (c.device != this) return absl::FailedPreconditionError("no graph capture in progress on this thread");
    c.device = nullptr;
    std::unique_ptr<HostGraph> graph = std::move(c.graph);
    if (!c.error.ok()) return std::exchange(c.error, absl::OkStatus());
    return std::unique_ptr<DeviceGraph>(std::move(graph));
  }
  absl::Status LaunchGraph(const DeviceGraph& graph, Stream) override {
    if (capturing() != nullptr) return Spoil("LaunchGraph");
    counters_.CountGraphLaunch();
    return static_cast<const HostGraph&>(graph).Run();
  }

  // Conditional nodes as a GPU builds them: before each node, the
  // set_conditional kernel of jit/kernels/graph_cond.cuh (captured and
  // replayed like any launch) sets the node's handle, here the address of
  // the value the node reads, from the flag; level 1 makes an else body a
  // second IF node on the negated flag, as drivers before 12.8 need.
  int conditional_level() const override { return conditional_level_; }
  absl::StatusOr<std::unique_ptr<DeviceGraph>> ComposeGraph(std::vector<typename Base::GraphPiece> pieces,
                                                            Stream stream) override {
    using Kind = typename Base::PieceKind;
    if (conditional_level_ == 0) return Base::ComposeGraph(std::move(pieces), stream);
    if (capturing() != nullptr) return Spoil("ComposeGraph");
    auto out = std::make_unique<HostGraph>();
    for (typename Base::GraphPiece& piece : pieces) {
      if (piece.kind == Kind::kGraph) {
        if (piece.graph == nullptr) return absl::InvalidArgumentError("ComposeGraph: a graph piece without a graph");
        std::shared_ptr<const DeviceGraph> g(std::move(piece.graph));
        const auto* hg = dynamic_cast<const HostGraph*>(g.get());
        if (hg == nullptr) return absl::InvalidArgumentError("ComposeGraph: a graph of another device");
        out->AddNested([g, hg] { return hg->Run(); }, g->num_nodes(), g->bytes());
        continue;
      }
      const bool is_if = piece.kind == Kind::kIf;
      const size_t want_max = is_if ? 2 : 1;
      if (piece.bodies.empty() || piece.bodies.size() > want_max) {
        return absl::InvalidArgumentError(absl::StrCat("ComposeGraph: ", piece.bodies.size(), " bodies for a ",
                                                       is_if ? "IF" : "WHILE", " node"));
      }
      if (!memory_.Contains(piece.flag)) return absl::InvalidArgumentError("ComposeGraph: the flag is not device memory");
      auto bodies = std::make_shared<std::vector<std::shared_ptr<const HostGraph>>>();
      int64_t nodes = 0, bytes = 0;
      for (std::unique_ptr<DeviceGraph>& b : piece.bodies) {
        std::shared_ptr<const DeviceGraph> g(std::move(b));
        auto hg = std::dynamic_pointer_cast<const HostGraph>(g);
        if (hg == nullptr) return absl::InvalidArgumentError("ComposeGraph: a body of another device");
        nodes += hg->num_nodes();
        bytes += hg->bytes();
        bodies->push_back(std::move(hg));
      }
      // handles[0]: the node's (IF, WHILE); handles[1]: the else body's IF
      // node on level 1.
      auto handles = std::make_shared<std::array<unsigned int, 2>>();
      const bool else_node = is_if && bodies->size() == 2 && conditional_level_ < 2;
      absl::StatusOr<std::shared_ptr<const HostGraph>> set =
          CaptureSetConditional(&(*handles)[0], else_node ? &(*handles)[1] : nullptr, piece.flag, stream);
      if (!set.ok()) return set.status();
      out->AddNested([set = *set] { return set->Run(); }, 1, (*set)->bytes());
      if (is_if && !else_node) {
        out->AddNested([handles, bodies] {
          const size_t i = (*handles)[0] != 0 ? 0 : 1;
          return i < bodies->size() ? (*bodies)[i]->Run() : absl::OkStatus();
        }, nodes + 1, bytes);
      } else if (is_if) {
        out->AddNested([handles, bodies] { return (*handles)[0] != 0 ? (*bodies)[0]->Run() : absl::OkStatus(); },
                       (*bodies)[0]->num_nodes() + 1, (*bodies)[0]->bytes());
        out->AddNested([handles, bodies] { return (*handles)[1] != 0 ? (*bodies)[1]->Run() : absl::OkStatus(); },
                       (*bodies)[1]->num_nodes() + 1, (*bodies)[1]->bytes());
      } else {
        // The body ends with the set kernel again, as on a GPU.
        out->AddNested([handles, bodies, set = *set] {
          while ((*handles)[0] != 0) {
            if (absl::Status s = (*bodies)[0]->Run(); !s.ok()) return s;
            if (absl::Status s = set->Run(); !s.ok()) return s;
          }
          return absl::OkStatus();
        }, nodes + 2, bytes);
      }
    }
    return std::unique_ptr<DeviceGraph>(std::move(out));
  }

 protected:
  // The graph this thread is capturing on this device, or nullptr.
  HostGraph* capturing() const {
    const Capture& c = ThreadCapture();
    return c.device == this ? c.graph.get() : nullptr;
  }
  // A call the capture cannot take: the capture fails (EndCapture says why)
  // and so does the call.
  absl::Status Spoil(absl::string_view call) {
    absl::Status error = absl::FailedPreconditionError(
        absl::StrCat(call, " while capturing a graph: a graph cannot wait for the device or read it back"));
    Capture& c = ThreadCapture();
    if (c.error.ok()) c.error = error;
    return error;
  }

  // The set_conditional launch (jit/kernels/graph_cond.cuh) for handles at
  // `handle` (and `negated`, if not null) from `flag`, as a graph of its own.
  absl::StatusOr<std::shared_ptr<const HostGraph>> CaptureSetConditional(unsigned int* handle, unsigned int* negated,
                                                                         const void* flag, Stream stream) {
    grove_k::SetConditionalParams params{};
    params.handle = static_cast<grove_k::u64>(reinterpret_cast<uintptr_t>(handle));
    params.negated = static_cast<grove_k::u64>(reinterpret_cast<uintptr_t>(negated));
    params.flag = static_cast<const grove_k::u8*>(flag);
    if (absl::Status s = this->BeginCapture(stream); !s.ok()) return s;
    absl::Status launched = this->Launch(jit::ModuleSpec{"graph_cond", {DType::kU8}}, "set_conditional",
                                         LaunchDims{{1, 1, 1}, {1, 1, 1}}, &params, sizeof(params), stream);
    absl::StatusOr<std::unique_ptr<DeviceGraph>> g = this->EndCapture(stream);
    if (!launched.ok()) return launched;
    if (!g.ok()) return g.status();
    return std::shared_ptr<const HostGraph>(static_cast<HostGraph*>(g->release()));
  }

  HostMemory memory_;
  DeviceCounters counters_;  // the derived device counts launches and GEMMs here too
  int conditional_level_ = 0;  // set by a device that has conditional nodes (the emulated one)

 private:
  struct Capture {
    const void* device = nullptr;  // the device capturing on this thread, if any
    std::unique_ptr<HostGraph> graph;
    absl::Status error;  // the first call that spoiled it
  };
  static Capture& ThreadCapture() {
    thread_local Capture capture;
    return capture;
  }
};

}  // namespace grove::cuda

#endif  // GROVE_LIB_BACKENDS_CUDA_HOST_MEMORY_H_
