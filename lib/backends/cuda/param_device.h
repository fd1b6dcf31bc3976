// A Device that forwards to another and gives the CUDA graphs it captures
// refreshable kernel parameters.
//
// A graph replays its kernels with the parameters they were captured with:
// pointers and shapes baked into each node. Here a capture launches each
// kernel from its module's indirect form (ModuleSpec::indirect): the kernel
// reads its parameter struct from a device block this wrapper owns, whose
// host copy is sent with one CopyAsync before a replay that changed it.
// A refresh runs the segment's host code again with this wrapper refusing
// to launch anything: each launch must match the captured one (the same
// kernel, module, grid and block, parameter size), and its new parameters
// replace the old ones in the block; GEMMs, host copies and memsets, which
// the graph bakes, must be exactly the captured ones (a copy between device
// buffers is captured as a kernel, graph_cond.cuh's copy_bytes, so it
// refreshes like one). So a segment whose buffers
// moved (a caller's device buffers, a Loop body fed from another arena)
// replays its graph after a refresh instead of a new capture.
#ifndef GROVE_LIB_BACKENDS_CUDA_PARAM_DEVICE_H_
#define GROVE_LIB_BACKENDS_CUDA_PARAM_DEVICE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "lib/backends/cuda/device.h"

namespace grove::cuda {

class ParamDevice final : public ForwardingDevice {
 public:
  // `device` must not be null.
  explicit ParamDevice(std::shared_ptr<Device> device);
  ~ParamDevice() override;

  // Refresh of `graph` (one this wrapper captured): until EndRefresh, calls
  // are checked against the capture and run nothing. EndRefresh returns OK
  // when the same work was queued in full (the block then holds the new
  // parameters, sent before the next LaunchGraph), else why not (the graph
  // keeps its old parameters). `bucket`: the graph was captured for a larger
  // shape over the same buffers (runtime::Backend::BeginRefresh): a launch
  // may come with another grid (the captured one stays: grove's kernels loop
  // grid-stride over their work, jit/kernels/prelude.cuh), and another block
  // where both launches say any_block (LaunchDims); a GEMM may have
  // fewer rows M (row-major C, no transposed A) or fewer batches, a copy or
  // memset fewer bytes, all else equal (the captured, larger one stays).
  void BeginRefresh(DeviceGraph& graph, bool bucket = false);
  absl::Status EndRefresh();
  // Whether `graph` has its parameters in a block (it was captured here).
  static bool Refreshable(const DeviceGraph& graph);

  // Work around each wait made through this wrapper outside a capture or a
  // refresh: a session's deferred device checks (ExecContext, whose waits
  // and the backend's all come here). BeforeWait queues work on the stream
  // waited for; AfterWait runs once the wait is over, its status the wait's.
  class WaitHook {
   public:
    virtual ~WaitHook() = default;
    virtual absl::Status BeforeWait(Stream stream) = 0;
    virtual absl::Status AfterWait() = 0;
  };
  // One hook at a time; nullptr removes it.
  void set_wait_hook(WaitHook* hook) { wait_hook_ = hook; }

  // Checked or recorded as the mode says; the rest is forwarded.
  absl::Status CopyAsync(void* dst, const void* src, size_t bytes, Stream stream) override;
  absl::Status MemsetAsync(void* dst, int value, size_t bytes, Stream stream) override;
  absl::Status Launch(const jit::ModuleSpec& module, absl::string_view kernel, const LaunchDims& dims,
                      const void* params, size_t params_bytes, Stream stream) override;
  absl::Status Gemm(const GemmDesc& gemm, Stream stream) override;
  absl::Status BeginCapture(Stream stream) override;
  absl::StatusOr<std::unique_ptr<DeviceGraph>> EndCapture(Stream stream) override;
  absl::Status LaunchGraph(const DeviceGraph& graph, Stream stream) override;
  // The pieces' graphs captured here keep their parameter blocks, sent
  // before a replay as a captured graph's are; the result cannot be
  // refreshed (Refreshable is false).
  absl::StatusOr<std::unique_ptr<DeviceGraph>> ComposeGraph(std::vector<GraphPiece> pieces, Stream stream) override;
  absl::Status Synchronize(Stream stream) override;

  class Block;  // a graph's parameters and what it captured (param_device.cc)

 private:
  enum class Mode { kForward, kCapture, kRefresh };
  // The refresh found different work: refuses the call (and remembers why).
  absl::Status Mismatch(std::string why);
  // A GEMM, copy or memset (work a graph bakes): recorded when capturing;
  // when refreshing, checked against the next captured call (the status:
  // OK to run nothing, or the mismatch); nullopt when it is to be forwarded.
  struct Call;
  std::optional<absl::Status> Baked(Call call, absl::string_view differs);

  Mode mode_ = Mode::kForward;
  bool bucket_ = false;               // kRefresh: captured for a larger shape
  std::unique_ptr<Block> capturing_;  // kCapture: the block being filled
  Block* refreshing_ = nullptr;       // kRefresh: the captured block
  size_t next_ = 0;                   // kRefresh: the next captured call to match
  std::vector<std::vector<uint8_t>> fresh_;  // kRefresh: the new parameter bytes, by chunk
  std::string mismatch_;
  WaitHook* wait_hook_ = nullptr;
};

}  // namespace grove::cuda

#endif  // GROVE_LIB_BACKENDS_CUDA_PARAM_DEVICE_H_
