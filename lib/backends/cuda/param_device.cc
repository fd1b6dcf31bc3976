#include "lib/backends/cuda/param_device.h"

#include <algorithm>
#include <cstring>
#include <optional>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "jit/kernels/graph_cond_params.h"

namespace grove::cuda {

// One call a capture queued.
struct ParamDevice::Call {
  enum class Kind { kLaunch, kGemm, kCopy, kMemset };
  Kind kind = Kind::kLaunch;
  jit::ModuleSpec module;  // kLaunch: the direct form
  std::string kernel;
  LaunchDims dims;
  size_t chunk = 0, offset = 0, size = 0;  // kLaunch: where its parameters are
  GemmDesc gemm;                           // kGemm
  void* dst = nullptr;                     // kCopy, kMemset
  const void* src = nullptr;               // kCopy
  size_t bytes = 0;                        // kCopy, kMemset
  int value = 0;                           // kMemset
};

// What one capture queued, in order, and its kernels' parameters: device
// chunks the kernels read, with their host copies.
class ParamDevice::Block {
 public:
  using Call = ParamDevice::Call;
  using Kind = Call::Kind;
  struct Chunk {
    void* device = nullptr;
    std::vector<uint8_t> host;  // capacity bytes; the first `used` are parameters
    size_t used = 0;
  };
  static constexpr size_t kChunkBytes = 64 << 10;
  static constexpr size_t kAlign = 16;

  explicit Block(std::shared_ptr<Device> device) : device_(std::move(device)) {}
  ~Block() {
    for (Chunk& c : chunks) device_->Free(c.device);
  }

  // Room for `bytes` of parameters: a chunk and an offset in it.
  absl::Status Place(size_t bytes, size_t* chunk, size_t* offset) {
    if (chunks.empty() || chunks.back().used + bytes > chunks.back().host.size()) {
      const size_t capacity = std::max(kChunkBytes, bytes);
      absl::StatusOr<void*> p = device_->Allocate(capacity);
      if (!p.ok()) return p.status();
      chunks.push_back(Chunk{*p, std::vector<uint8_t>(capacity), 0});
    }
    Chunk& c = chunks.back();
    *chunk = chunks.size() - 1;
    *offset = c.used;
    c.used = (c.used + bytes + kAlign - 1) / kAlign * kAlign;
    return absl::OkStatus();
  }
  int64_t bytes() const {
    int64_t n = 0;
    for (const Chunk& c : chunks) n += static_cast<int64_t>(c.host.size());
    return n;
  }

  std::vector<Chunk> chunks;
  std::vector<Call> calls;
  bool dirty = true;  // the host copies differ from the device chunks

 private:
  const std::shared_ptr<Device> device_;  // frees the chunks, so it outlives them
};

namespace {

class ParamGraph final : public DeviceGraph {
 public:
  ParamGraph(std::unique_ptr<DeviceGraph> inner, std::unique_ptr<ParamDevice::Block> block)
      : inner(std::move(inner)), block(std::move(block)) {}
  int64_t num_nodes() const override { return inner->num_nodes(); }
  // The parameters held twice (device and host) on top of the graph's record.
  int64_t bytes() const override { return inner->bytes() + 2 * block->bytes(); }

  std::unique_ptr<DeviceGraph> inner;
  std::unique_ptr<ParamDevice::Block> block;
};

// A graph of pieces (ParamDevice::ComposeGraph): the inner device's, and
// the parameter blocks of the pieces that were captured here.
class ComposedGraph final : public DeviceGraph {
 public:
  int64_t num_nodes() const override { return inner->num_nodes(); }
  int64_t bytes() const override {
    int64_t n = inner->bytes();
    for (const auto& b : blocks) n += 2 * b->bytes();
    return n;
  }

  std::unique_ptr<DeviceGraph> inner;
  std::vector<std::unique_ptr<ParamDevice::Block>> blocks;
};

// Whether `now` is the `captured` GEMM, or (bucket) the same one on fewer
// rows of row-major A and C or fewer batches: the captured one computes
// those rows and batches as `now` would, and more past them.
bool SameGemm(const GemmDesc& captured, const GemmDesc& now, bool bucket) {
  auto fields = [](const GemmDesc& g) {
    return std::tie(g.math, g.dtype, g.c_dtype, g.trans_a, g.trans_b, g.n, g.k, g.a, g.lda, g.b, g.ldb, g.c, g.ldc, g.alpha,
                    g.beta, g.bias, g.epilogue);
  };
  if (fields(captured) != fields(now)) return false;
  auto strides = [](const GemmDesc& g) { return std::tie(g.stride_a, g.stride_b, g.stride_c); };
  if (!bucket || captured.trans_a) {
    return captured.m == now.m && captured.batch == now.batch && strides(captured) == strides(now);
  }
  if (now.m > captured.m || now.batch > captured.batch) return false;
  // One matrix: its batch strides are never used. Several: M is fixed.
  if (captured.batch == 1) return true;
  return captured.m == now.m && strides(captured) == strides(now);
}

}  // namespace

ParamDevice::ParamDevice(std::shared_ptr<Device> device) : ForwardingDevice(std::move(device)) {}
ParamDevice::~ParamDevice() = default;

bool ParamDevice::Refreshable(const DeviceGraph& graph) { return dynamic_cast<const ParamGraph*>(&graph) != nullptr; }

void ParamDevice::BeginRefresh(DeviceGraph& graph, bool bucket) {
  bucket_ = bucket;
  refreshing_ = static_cast<ParamGraph&>(graph).block.get();
  fresh_.clear();
  for (const Block::Chunk& c : refreshing_->chunks) fresh_.push_back(c.host);
  next_ = 0;
  mismatch_.clear();
  mode_ = Mode::kRefresh;
}

absl::Status ParamDevice::EndRefresh() {
  mode_ = Mode::kForward;
  Block& block = *refreshing_;
  refreshing_ = nullptr;
  if (mismatch_.empty() && next_ != block.calls.size()) {
    mismatch_ = absl::StrCat("it queued ", next_, " of the ", block.calls.size(), " calls its graph captured");
  }
  if (!mismatch_.empty()) return absl::FailedPreconditionError(mismatch_);
  for (size_t i = 0; i < block.chunks.size(); ++i) block.chunks[i].host.swap(fresh_[i]);
  block.dirty = true;
  return absl::OkStatus();
}

absl::Status ParamDevice::Mismatch(std::string why) {
  if (mismatch_.empty()) mismatch_ = absl::StrCat("call ", next_, " of the capture: ", why);
  return absl::FailedPreconditionError(mismatch_);
}

absl::Status ParamDevice::Launch(const jit::ModuleSpec& module, absl::string_view kernel, const LaunchDims& dims,
                                 const void* params, size_t params_bytes, Stream stream) {
  switch (mode_) {
    case Mode::kForward:
      return device_->Launch(module, kernel, dims, params, params_bytes, stream);
    case Mode::kCapture: {
      Block& block = *capturing_;
      Block::Call call{Block::Kind::kLaunch, module, std::string(kernel), dims};
      call.size = params_bytes;
      if (absl::Status s = block.Place(params_bytes, &call.chunk, &call.offset); !s.ok()) return s;
      Block::Chunk& chunk = block.chunks[call.chunk];
      std::memcpy(chunk.host.data() + call.offset, params, params_bytes);
      const void* device_params = static_cast<const uint8_t*>(chunk.device) + call.offset;
      block.calls.push_back(std::move(call));
      jit::ModuleSpec indirect = module;
      indirect.indirect = true;
      return device_->Launch(indirect, kernel, dims, &device_params, sizeof(device_params), stream);
    }
    case Mode::kRefresh: {
      if (next_ >= refreshing_->calls.size()) return Mismatch("more work than the capture queued");
      const Block::Call& c = refreshing_->calls[next_];
      if (c.kind != Block::Kind::kLaunch || c.kernel != kernel || !(c.module == module)) {
        return Mismatch(absl::StrCat("launch of ", jit::EntryName(kernel, module), " where the capture had ",
                                     c.kind == Block::Kind::kLaunch ? jit::EntryName(c.kernel, c.module)
                                                                    : std::string("a GEMM, copy or memset")));
      }
      // In a bucket the captured grid stays (kernels loop grid-stride), and
      // the captured block too where the kernel's result does not depend on it.
      const bool any_block = bucket_ && c.dims.any_block && dims.any_block;
      if ((!bucket_ && c.dims.grid != dims.grid) || (c.dims.block != dims.block && !any_block) ||
          c.size != params_bytes) {
        return Mismatch(absl::StrCat(jit::EntryName(kernel, module), " with another grid, block or parameter size"));
      }
      std::memcpy(fresh_[c.chunk].data() + c.offset, params, params_bytes);
      ++next_;
      return absl::OkStatus();
    }
  }
  return absl::InternalError("ParamDevice: bad mode");
}

absl::Status ParamDevice::Gemm(const GemmDesc& gemm, Stream stream) {
  Block::Call call{Block::Kind::kGemm};
  call.gemm = gemm;
  if (std::optional<absl::Status> s = Baked(call, "a GEMM with other operands or sizes"); s.has_value()) return *s;
  return device_->Gemm(gemm, stream);
}

absl::Status ParamDevice::CopyAsync(void* dst, const void* src, size_t bytes, Stream stream) {
  if (mode_ != Mode::kForward && bytes > 0 && device_->IsDevicePointer(dst) && device_->IsDevicePointer(src)) {
    // Between device buffers: a kernel with its pointers and size in the
    // block, so that a refresh can move it (a graph's memcpy node is baked).
    // Its grid follows the size (in a bucket the captured one stays) and it
    // gives each 8 bytes to one thread (any_block).
    grove_k::CopyBytesParams p{static_cast<grove_k::u8*>(dst), static_cast<const grove_k::u8*>(src),
                               static_cast<grove_k::i64>(bytes)};
    LaunchDims dims;
    dims.grid = {static_cast<uint32_t>(std::min<size_t>((bytes + 2047) / 2048, 1024)), 1, 1};
    dims.block = {256, 1, 1};
    dims.any_block = true;
    return Launch(jit::ModuleSpec{"graph_cond", {DType::kU8}}, "copy_bytes", dims, &p, sizeof(p), stream);
  }
  Block::Call call{Block::Kind::kCopy};
  call.dst = dst;
  call.src = src;
  call.bytes = bytes;
  if (std::optional<absl::Status> s = Baked(call, "a copy between other buffers"); s.has_value()) return *s;
  return device_->CopyAsync(dst, src, bytes, stream);
}

absl::Status ParamDevice::MemsetAsync(void* dst, int value, size_t bytes, Stream stream) {
  Block::Call call{Block::Kind::kMemset};
  call.dst = dst;
  call.value = value;
  call.bytes = bytes;
  if (std::optional<absl::Status> s = Baked(call, "a memset of another buffer"); s.has_value()) return *s;
  return device_->MemsetAsync(dst, value, bytes, stream);
}

std::optional<absl::Status> ParamDevice::Baked(Block::Call call, absl::string_view differs) {
  if (mode_ == Mode::kCapture) capturing_->calls.push_back(std::move(call));
  if (mode_ != Mode::kRefresh) return std::nullopt;  // forwarded
  if (next_ >= refreshing_->calls.size()) return Mismatch("more work than the capture queued");
  const Block::Call& c = refreshing_->calls[next_];
  const bool same = c.kind == call.kind && (c.kind == Block::Kind::kGemm
                                                ? SameGemm(c.gemm, call.gemm, bucket_)
                                                : c.dst == call.dst && c.src == call.src && c.value == call.value &&
                                                      (bucket_ ? call.bytes <= c.bytes : call.bytes == c.bytes));
  if (!same) {
    std::string detail;
    if (c.kind == Block::Kind::kGemm && call.kind == Block::Kind::kGemm) {
      auto dims = [](const GemmDesc& g) {
        return absl::StrCat(g.batch, "x[", g.m, "x", g.k, "]*[", g.k, "x", g.n, "]", g.trans_a ? " A transposed" : "",
                            g.trans_b ? " B transposed" : "");
      };
      detail = absl::StrCat(": ", dims(call.gemm), " where the capture had ", dims(c.gemm));
    }
    return Mismatch(absl::StrCat(differs, detail, " (a graph bakes its GEMMs, host copies and memsets)"));
  }
  ++next_;
  return absl::OkStatus();
}

absl::Status ParamDevice::Synchronize(Stream stream) {
  if (mode_ == Mode::kRefresh) return Mismatch("a wait for the device");
  WaitHook* hook = mode_ == Mode::kForward ? wait_hook_ : nullptr;
  if (hook != nullptr) {
    if (absl::Status s = hook->BeforeWait(stream); !s.ok()) return s;
  }
  if (absl::Status s = device_->Synchronize(stream); !s.ok()) return s;
  return hook != nullptr ? hook->AfterWait() : absl::OkStatus();
}

absl::Status ParamDevice::BeginCapture(Stream stream) {
  if (absl::Status s = device_->BeginCapture(stream); !s.ok()) return s;
  mode_ = Mode::kCapture;
  capturing_ = std::make_unique<Block>(device_);
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<DeviceGraph>> ParamDevice::EndCapture(Stream stream) {
  mode_ = Mode::kForward;
  std::unique_ptr<Block> block = std::move(capturing_);
  absl::StatusOr<std::unique_ptr<DeviceGraph>> graph = device_->EndCapture(stream);
  if (!graph.ok()) return graph.status();
  return std::unique_ptr<DeviceGraph>(new ParamGraph(*std::move(graph), std::move(block)));
}

absl::Status ParamDevice::LaunchGraph(const DeviceGraph& graph, Stream stream) {
  // One copy per chunk (64 KiB of parameters each) of a block the host
  // changed, stream-ordered before the replay; from pageable memory, so the
  // host may refill it at once.
  auto send = [&](Block& block) -> absl::Status {
    if (!block.dirty) return absl::OkStatus();
    for (const Block::Chunk& c : block.chunks) {
      if (absl::Status s = device_->CopyAsync(c.device, c.host.data(), c.used, stream); !s.ok()) return s;
    }
    block.dirty = false;
    return absl::OkStatus();
  };
  if (const auto* cg = dynamic_cast<const ComposedGraph*>(&graph); cg != nullptr) {
    for (const auto& b : cg->blocks) {
      if (absl::Status s = send(*b); !s.ok()) return s;
    }
    return device_->LaunchGraph(*cg->inner, stream);
  }
  const auto* pg = dynamic_cast<const ParamGraph*>(&graph);
  if (pg == nullptr) return device_->LaunchGraph(graph, stream);
  if (absl::Status s = send(*pg->block); !s.ok()) return s;
  return device_->LaunchGraph(*pg->inner, stream);
}

absl::StatusOr<std::unique_ptr<DeviceGraph>> ParamDevice::ComposeGraph(std::vector<GraphPiece> pieces,
                                                                       Stream stream) {
  if (mode_ != Mode::kForward) return absl::FailedPreconditionError("ComposeGraph while capturing or refreshing");
  auto out = std::make_unique<ComposedGraph>();
  // A graph captured here goes in as its inner graph; its block stays with
  // the result.
  auto unwrap = [&](std::unique_ptr<DeviceGraph>& g) {
    if (auto* pg = dynamic_cast<ParamGraph*>(g.get()); pg != nullptr) {
      std::unique_ptr<DeviceGraph> inner = std::move(pg->inner);
      out->blocks.push_back(std::move(pg->block));
      g = std::move(inner);
    } else if (auto* cg = dynamic_cast<ComposedGraph*>(g.get()); cg != nullptr) {
      std::unique_ptr<DeviceGraph> inner = std::move(cg->inner);
      for (auto& b : cg->blocks) out->blocks.push_back(std::move(b));
      g = std::move(inner);
    }
  };
  for (GraphPiece& piece : pieces) {
    if (piece.graph != nullptr) unwrap(piece.graph);
    for (std::unique_ptr<DeviceGraph>& b : piece.bodies) {
      if (b != nullptr) unwrap(b);
    }
  }
  absl::StatusOr<std::unique_ptr<DeviceGraph>> inner = device_->ComposeGraph(std::move(pieces), stream);
  if (!inner.ok()) return inner.status();
  out->inner = *std::move(inner);
  return std::unique_ptr<DeviceGraph>(std::move(out));
}

}  // namespace grove::cuda
