// CUDA kernels of If and Loop: the host picks the branch or decides to go on
// (one small read-back of the condition per decision), bodies run through
// the session on the device, and carried values, scan outputs and results
// stay in device memory. These steps end segments (they wait for the host),
// but a steady-state run allocates nothing: a Loop's buffers (carried values,
// their staging copies, scan outputs) are its node's state in the
// ExecContext, kept and grown across runs, freed with the session.
#include <algorithm>
#include <cstring>
#include <memory>

#include "absl/strings/str_cat.h"
#include "lib/backends/common/control_flow.h"
#include "lib/backends/cuda/cuda_kernels.h"
#include "lib/backends/cuda/exec_context.h"
#include "lib/ir/value_type.h"

namespace grove::cuda {
namespace {

using backends::kNoTripCount;

// Device memory that grows (keeping its first `keep` bytes), never shrinks.
// A stable one (a carried value: the body's plans and graphs see its
// address) lives in a reserved address range where the device has them,
// so growing it maps more memory behind the same start: a body's graph
// captured at a short carried shape stays valid when a later, longer call
// grows the buffer (else each run after a growth meets new addresses).
class DeviceVector {
 public:
  DeviceVector(Device& device, bool stable) : device_(device), stable_(stable) {}
  DeviceVector(const DeviceVector&) = delete;
  DeviceVector& operator=(const DeviceVector&) = delete;
  ~DeviceVector() {
    if (range_ == nullptr) device_.Free(data_);
  }
  absl::Status Reserve(size_t bytes, size_t keep, Stream stream) {
    if (bytes <= capacity_ && data_ != nullptr) return absl::OkStatus();
    const size_t cap = std::max<size_t>({bytes, capacity_ * 2, 256});
    if (stable_ && data_ == nullptr) {
      absl::StatusOr<std::unique_ptr<AddressRange>> r = device_.ReserveRange(kStableRangeBytes);
      if (r.ok()) range_ = *std::move(r);
      stable_ = range_ != nullptr;  // else plain allocations, as below
    }
    if (range_ != nullptr && cap <= range_->reserved()) {
      if (absl::Status s = range_->Grow(cap); !s.ok()) return s;
      data_ = range_->base();
      capacity_ = cap;
      return absl::OkStatus();
    }
    absl::StatusOr<void*> p = device_.Allocate(cap);
    if (!p.ok()) return p.status();
    if (keep > 0) {
      if (absl::Status s = device_.CopyAsync(*p, data_, keep, stream); !s.ok()) {
        device_.Free(*p);
        return s;
      }
      if (absl::Status s = device_.Synchronize(stream); !s.ok()) return s;
    }
    if (range_ == nullptr) device_.Free(data_);
    range_.reset();  // past its reservation: plain allocations from now on
    data_ = *p;
    capacity_ = cap;
    return absl::OkStatus();
  }
  uint8_t* data() const { return static_cast<uint8_t*>(data_); }

 private:
  // Addresses reserved per stable buffer (nothing is mapped until used).
  static constexpr uint64_t kStableRangeBytes = uint64_t{1} << 32;
  Device& device_;
  bool stable_;
  std::unique_ptr<AddressRange> range_;  // set: data_ is its base
  void* data_ = nullptr;
  size_t capacity_ = 0;
};

// A Loop node's buffers, kept across calls and runs (ExecContext::State):
// per carried value its buffer and a staging buffer (a body that swaps its
// carried values), per scan output its accumulated slices.
class LoopState : public ExecContext::KernelState {
 public:
  explicit LoopState(Device& device) : device_(device) {}
  // A carried value's buffer is a body input: stable (DeviceVector).
  DeviceVector& carried(int i) { return At(carried_, i, /*stable=*/true); }
  DeviceVector& staged(int i) { return At(staged_, i, false); }
  DeviceVector& scan(int j) { return At(scans_, j, false); }

 private:
  DeviceVector& At(std::vector<std::unique_ptr<DeviceVector>>& v, int i, bool stable) {
    while (static_cast<int>(v.size()) <= i) v.push_back(std::make_unique<DeviceVector>(device_, stable));
    return *v[i];
  }
  Device& device_;
  std::vector<std::unique_ptr<DeviceVector>> carried_, staged_, scans_;
};

absl::StatusOr<bool> ReadFlag(ExecContext& ec, const ir::KernelContext& ctx, const TensorView& v,
                              const TensorView* host, absl::string_view what) {
  if (absl::Status s = backends::CheckCondShape(ctx, v, what); !s.ok()) return s;
  uint8_t b = 0;
  if (host != nullptr && host->data != nullptr) {
    b = *static_cast<const uint8_t*>(host->data);
  } else {
    if (absl::Status s = ec.device().CopyAsync(&b, v.data, 1, ec.stream()); !s.ok()) return s;
    if (absl::Status s = ec.device().Synchronize(ec.stream()); !s.ok()) return s;
  }
  return b != 0;
}

absl::Status CopyOut(ExecContext& ec, ir::KernelContext& ctx, int i, const TensorView& from) {
  if (ir::IsBoxed(from.dtype)) return backends::SetBoxedOutput(ctx, i, from.dtype, ir::BoxedValue(from));
  absl::StatusOr<TensorView*> out = ctx.AllocateOutput(i, from.dtype, from.shape);
  if (!out.ok()) return out.status();
  return ec.device().CopyAsync((*out)->data, from.data, from.byte_size(), ec.stream());
}

absl::Status IfKernel(ir::KernelContext& ctx) {
  ExecContext& ec = Exec(ctx);
  absl::StatusOr<bool> cond = ReadFlag(ec, ctx, ctx.input(0), ec.host_input(0), "cond");
  if (!cond.ok()) return cond.status();
  absl::StatusOr<std::vector<TensorView>> outs = backends::RunIfBranch(ctx, *cond);
  if (!outs.ok()) return outs.status();
  for (int i = 0; i < ctx.num_outputs(); ++i) {
    if (!ctx.has_output(i)) continue;
    if (absl::Status s = CopyOut(ec, ctx, i, (*outs)[i]); !s.ok()) return s;
  }
  return absl::OkStatus();
}

// Bounded by the Loop policy of lib/backends/common/control_flow.h: every
// iteration goes through RunLoopBody, every scan append through CheckScanBytes.
absl::Status LoopKernel(ir::KernelContext& ctx) {
  ExecContext& ec = Exec(ctx);
  Device& dev = ec.device();
  int64_t trip_count = kNoTripCount;
  if (ctx.has_input(0)) {
    if (ctx.input(0).num_elements() != 1) return ctx.Error("trip count M must hold one element");
    absl::StatusOr<std::vector<int64_t>> m = ec.ReadInts(ctx, 0);
    if (!m.ok()) return m.status();
    trip_count = std::max<int64_t>((*m)[0], 0);
  }
  bool cond = true;
  if (ctx.has_input(1)) {
    absl::StatusOr<bool> c = ReadFlag(ec, ctx, ctx.input(1), ec.host_input(1), "cond");
    if (!c.ok()) return c.status();
    cond = *c;
  }
  const int n = std::max(ctx.num_inputs() - 2, 0);  // Loop(M) and Loop() carry nothing
  const int k = ctx.num_outputs() - n;
  const int body = ctx.attrs().GetSubgraph("body");

  // Carried values between iterations live in the node's buffers (the
  // body's outputs sit in its arena, which its next call overwrites). A
  // nested Loop runs to its end inside one call of this body, so the
  // buffers are this call's until it returns.
  LoopState& state = ec.State<LoopState>(ctx.node());
  std::vector<TensorView> carried(n);
  backends::CarriedBoxes boxes(n);  // sequences and optionals: host values
  for (int i = 0; i < n; ++i) {
    const TensorView& in = ctx.input(2 + i);
    boxes.Enter(i, in, carried[i]);
    if (ir::IsBoxed(in.dtype)) continue;
    DeviceVector& mem = state.carried(i);
    if (absl::Status s = mem.Reserve(in.byte_size(), 0, ec.stream()); !s.ok()) return s;
    if (absl::Status s = dev.CopyAsync(mem.data(), in.data, in.byte_size(), ec.stream()); !s.ok()) return s;
    carried[i] = TensorView(in.dtype, in.shape, static_cast<void*>(mem.data()));
  }
  std::vector<size_t> scan_bytes(k, 0);
  std::vector<TensorView> scan_shape(k);
  std::vector<bool> staged(n, false);
  std::vector<TensorView> staged_views(n);

  int64_t iter = 0;
  backends::LoopBodyScalars scalars;  // outlives each trip's outputs
  for (; iter < trip_count && cond; ++iter) {
    absl::StatusOr<std::vector<TensorView>> outs = backends::RunLoopBody(ctx, body, iter, carried, scalars);
    if (!outs.ok()) return outs.status();
    absl::StatusOr<bool> c = ReadFlag(ec, ctx, (*outs)[0], nullptr, "the body's cond output");
    if (!c.ok()) return c.status();
    cond = *c;
    for (int i = 0; i < n; ++i) {
      if (absl::Status s = boxes.Stage(ctx, i, carried[i], (*outs)[1 + i]); !s.ok()) return s;
    }
    boxes.Commit();
    // A body may return its carried inputs in another order (a swap): an
    // output that is another carried value is copied before any is written.
    // The staging buffers are kept: the next trip's copies into them queue
    // after this trip's reads on the stream.
    for (int i = 0; i < n; ++i) {
      const TensorView& o = (*outs)[1 + i];
      staged[i] = backends::ReadsOtherCarried(o, i, carried);
      if (!staged[i]) continue;
      DeviceVector& mem = state.staged(i);
      if (absl::Status s = mem.Reserve(o.byte_size(), 0, ec.stream()); !s.ok()) return s;
      if (absl::Status s = dev.CopyAsync(mem.data(), o.data, o.byte_size(), ec.stream()); !s.ok()) return s;
      staged_views[i] = TensorView(o.dtype, o.shape, static_cast<void*>(mem.data()));
    }
    for (int i = 0; i < n; ++i) {
      const TensorView& o = staged[i] ? staged_views[i] : (*outs)[1 + i];
      if (ir::IsBoxed(o.dtype)) continue;
      DeviceVector& mem = state.carried(i);
      if (absl::Status s = mem.Reserve(o.byte_size(), 0, ec.stream()); !s.ok()) return s;
      carried[i] = TensorView(o.dtype, o.shape, static_cast<void*>(mem.data()));
      if (absl::Status s = dev.CopyAsync(carried[i].data, o.data, o.byte_size(), ec.stream()); !s.ok()) return s;
    }
    for (int j = 0; j < k; ++j) {
      const TensorView& o = (*outs)[1 + n + j];
      if (absl::Status s = backends::CheckScanIsTensor(ctx, j, o); !s.ok()) return s;
      if (absl::Status s = backends::CheckScanShape(ctx, j, iter, o, scan_shape[j]); !s.ok()) return s;
      uint64_t held = 0;
      for (size_t b : scan_bytes) held += b;
      if (absl::Status s = backends::CheckScanBytes(ctx, iter, held, o.byte_size()); !s.ok()) return s;
      DeviceVector& mem = state.scan(j);
      if (absl::Status s = mem.Reserve(scan_bytes[j] + o.byte_size(), scan_bytes[j], ec.stream()); !s.ok()) {
        return s;
      }
      if (absl::Status s = dev.CopyAsync(mem.data() + scan_bytes[j], o.data, o.byte_size(), ec.stream()); !s.ok()) {
        return s;
      }
      scan_bytes[j] += o.byte_size();
    }
  }
  for (int i = 0; i < n; ++i) {
    if (!ctx.has_output(i)) continue;
    if (absl::Status s = CopyOut(ec, ctx, i, carried[i]); !s.ok()) return s;
  }
  for (int j = 0; j < k; ++j) {
    if (!ctx.has_output(n + j)) continue;
    std::vector<int64_t> shape{iter};
    shape.insert(shape.end(), scan_shape[j].shape.begin(), scan_shape[j].shape.end());
    absl::StatusOr<TensorView*> out = ctx.AllocateOutput(n + j, scan_shape[j].dtype, std::move(shape));
    if (!out.ok()) return out.status();
    if (scan_bytes[j] == 0) continue;
    if (absl::Status s = dev.CopyAsync((*out)->data, state.scan(j).data(), scan_bytes[j], ec.stream()); !s.ok()) {
      return s;
    }
  }
  // The body's outputs may include host scalars of this call (its iteration
  // number and condition passed through): finish the copies before they go.
  return dev.Synchronize(ec.stream());
}

}  // namespace

absl::Status RegisterCudaControlFlowKernels(ir::OpRegistry& registry) {
  // If reads its condition (input 0) on the host; Loop its trip count and
  // condition (inputs 0 and 1). Both end segments anyway.
  if (absl::Status s = registry.SetKernel("If", ir::Backend::kCuda, ir::KernelDef{&IfKernel, nullptr, 0b1});
      !s.ok()) {
    return s;
  }
  return registry.SetKernel("Loop", ir::Backend::kCuda, ir::KernelDef{&LoopKernel, nullptr, 0b11});
}

}  // namespace grove::cuda
