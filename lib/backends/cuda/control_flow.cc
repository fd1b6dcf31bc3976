// CUDA kernels of If and Loop: the host picks the branch or decides to go on
// (one small read-back of the condition per decision), bodies run through
// the session on the device, and carried values, scan outputs and results
// stay in device memory.
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

// Device memory owned for the length of one kernel call; grows keeping its
// first `keep` bytes.
class DeviceVector {
 public:
  explicit DeviceVector(Device& device) : device_(device) {}
  DeviceVector(const DeviceVector&) = delete;
  DeviceVector& operator=(const DeviceVector&) = delete;
  ~DeviceVector() { device_.Free(data_); }
  absl::Status Reserve(size_t bytes, size_t keep, Stream stream) {
    if (bytes <= capacity_ && data_ != nullptr) return absl::OkStatus();
    const size_t cap = std::max<size_t>({bytes, capacity_ * 2, 256});
    absl::StatusOr<void*> p = device_.Allocate(cap);
    if (!p.ok()) return p.status();
    if (keep > 0) {
      if (absl::Status s = device_.CopyAsync(*p, data_, keep, stream); !s.ok()) {
        device_.Free(*p);
        return s;
      }
      if (absl::Status s = device_.Synchronize(stream); !s.ok()) return s;
    }
    device_.Free(data_);
    data_ = *p;
    capacity_ = cap;
    return absl::OkStatus();
  }
  uint8_t* data() const { return static_cast<uint8_t*>(data_); }

 private:
  Device& device_;
  void* data_ = nullptr;
  size_t capacity_ = 0;
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

  // Carried values between iterations live here (the body's outputs sit in
  // its arena, which its next call overwrites).
  std::vector<std::unique_ptr<DeviceVector>> carried_mem;
  std::vector<TensorView> carried(n);
  backends::CarriedBoxes boxes(n);  // sequences and optionals: host values
  for (int i = 0; i < n; ++i) {
    const TensorView& in = ctx.input(2 + i);
    carried_mem.push_back(std::make_unique<DeviceVector>(dev));
    boxes.Enter(i, in, carried[i]);
    if (ir::IsBoxed(in.dtype)) continue;
    if (absl::Status s = carried_mem[i]->Reserve(in.byte_size(), 0, ec.stream()); !s.ok()) return s;
    if (absl::Status s = dev.CopyAsync(carried_mem[i]->data(), in.data, in.byte_size(), ec.stream()); !s.ok()) return s;
    carried[i] = TensorView(in.dtype, in.shape, static_cast<void*>(carried_mem[i]->data()));
  }
  std::vector<std::unique_ptr<DeviceVector>> scans;
  std::vector<size_t> scan_bytes(k, 0);
  std::vector<TensorView> scan_shape(k);
  for (int j = 0; j < k; ++j) scans.push_back(std::make_unique<DeviceVector>(dev));

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
    std::vector<std::unique_ptr<DeviceVector>> staged(n);
    std::vector<TensorView> staged_views(n);
    for (int i = 0; i < n; ++i) {
      const TensorView& o = (*outs)[1 + i];
      if (!backends::ReadsOtherCarried(o, i, carried)) continue;
      staged[i] = std::make_unique<DeviceVector>(dev);
      if (absl::Status s = staged[i]->Reserve(o.byte_size(), 0, ec.stream()); !s.ok()) return s;
      if (absl::Status s = dev.CopyAsync(staged[i]->data(), o.data, o.byte_size(), ec.stream()); !s.ok()) return s;
      staged_views[i] = TensorView(o.dtype, o.shape, static_cast<void*>(staged[i]->data()));
    }
    for (int i = 0; i < n; ++i) {
      const TensorView& o = staged[i] != nullptr ? staged_views[i] : (*outs)[1 + i];
      if (ir::IsBoxed(o.dtype)) continue;
      if (absl::Status s = carried_mem[i]->Reserve(o.byte_size(), 0, ec.stream()); !s.ok()) return s;
      carried[i] = TensorView(o.dtype, o.shape, static_cast<void*>(carried_mem[i]->data()));
      if (absl::Status s = dev.CopyAsync(carried[i].data, o.data, o.byte_size(), ec.stream()); !s.ok()) return s;
    }
    // The staging buffers go when this trip ends: finish reading them.
    if (std::any_of(staged.begin(), staged.end(), [](const auto& p) { return p != nullptr; })) {
      if (absl::Status s = dev.Synchronize(ec.stream()); !s.ok()) return s;
    }
    for (int j = 0; j < k; ++j) {
      const TensorView& o = (*outs)[1 + n + j];
      if (absl::Status s = backends::CheckScanIsTensor(ctx, j, o); !s.ok()) return s;
      if (absl::Status s = backends::CheckScanShape(ctx, j, iter, o, scan_shape[j]); !s.ok()) return s;
      uint64_t held = 0;
      for (size_t b : scan_bytes) held += b;
      if (absl::Status s = backends::CheckScanBytes(ctx, iter, held, o.byte_size()); !s.ok()) return s;
      if (absl::Status s = scans[j]->Reserve(scan_bytes[j] + o.byte_size(), scan_bytes[j], ec.stream()); !s.ok()) {
        return s;
      }
      if (absl::Status s = dev.CopyAsync(scans[j]->data() + scan_bytes[j], o.data, o.byte_size(), ec.stream());
          !s.ok()) {
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
    if (absl::Status s = dev.CopyAsync((*out)->data, scans[j]->data(), scan_bytes[j], ec.stream()); !s.ok()) return s;
  }
  // The carried and scan buffers are freed on return: finish reading them.
  return dev.Synchronize(ec.stream());
}

}  // namespace

absl::Status RegisterCudaControlFlowKernels(ir::OpRegistry& registry) {
  if (absl::Status s = registry.SetKernel("If", ir::Backend::kCuda, &IfKernel); !s.ok()) return s;
  return registry.SetKernel("Loop", ir::Backend::kCuda, &LoopKernel);
}

}  // namespace grove::cuda
