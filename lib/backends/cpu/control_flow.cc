// CPU kernels of If and Loop. Bodies run through the session (plan cache,
// arenas); results are copied out because a body's arena is reused by its
// next call.
#include <cstring>

#include "absl/strings/str_cat.h"
#include "lib/backends/common/control_flow.h"
#include "lib/backends/cpu/cpu_kernels.h"
#include "lib/ir/value_type.h"

namespace grove::cpu {
namespace {

using backends::kMaxLoopIterations;

absl::StatusOr<bool> ReadCond(const ir::KernelContext& ctx, const TensorView& v, absl::string_view what) {
  if (absl::Status s = backends::CheckCondShape(ctx, v, what); !s.ok()) return s;
  return *static_cast<const uint8_t*>(v.data) != 0;
}

absl::Status CopyOut(ir::KernelContext& ctx, int i, const TensorView& from) {
  if (ir::IsBoxed(from.dtype)) return backends::SetBoxedOutput(ctx, i, from.dtype, ir::BoxedValue(from));
  absl::StatusOr<TensorView*> out = ctx.AllocateOutput(i, from.dtype, from.shape);
  if (!out.ok()) return out.status();
  if (from.byte_size() > 0) std::memcpy((*out)->data, from.data, from.byte_size());
  return absl::OkStatus();
}

absl::Status IfKernel(ir::KernelContext& ctx) {
  absl::StatusOr<bool> cond = ReadCond(ctx, ctx.input(0), "cond");
  if (!cond.ok()) return cond.status();
  absl::StatusOr<std::vector<TensorView>> outs = backends::RunIfBranch(ctx, *cond);
  if (!outs.ok()) return outs.status();
  for (int i = 0; i < ctx.num_outputs(); ++i) {
    if (!ctx.has_output(i)) continue;
    if (absl::Status s = CopyOut(ctx, i, (*outs)[i]); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status LoopKernel(ir::KernelContext& ctx) {
  int64_t trip_count = kMaxLoopIterations;
  if (ctx.has_input(0)) {
    const TensorView& m = ctx.input(0);
    if (m.num_elements() != 1) return ctx.Error("trip count M must hold one element");
    trip_count = *m.as<const int64_t>();
    if (trip_count < 0) trip_count = 0;
  }
  bool cond = true;
  if (ctx.has_input(1)) {
    absl::StatusOr<bool> c = ReadCond(ctx, ctx.input(1), "cond");
    if (!c.ok()) return c.status();
    cond = *c;
  }
  const int n = ctx.num_inputs() - 2;
  const int k = ctx.num_outputs() - n;
  const int body = ctx.attrs().GetSubgraph("body");

  // The carried values live here between iterations: the body's outputs sit
  // in its arena, which its next call overwrites.
  // Sequences and optionals are kept as values (their tensors shared).
  std::vector<Tensor> carried(n);
  std::vector<TensorView> carried_views(n);
  backends::CarriedBoxes boxes(n);
  for (int i = 0; i < n; ++i) {
    boxes.Enter(i, ctx.input(2 + i), carried_views[i]);
    if (ir::IsBoxed(ctx.input(2 + i).dtype)) continue;
    absl::StatusOr<Tensor> t = Tensor::CopyOf(ctx.input(2 + i));
    if (!t.ok()) return t.status();
    carried[i] = std::move(*t);
  }
  std::vector<std::vector<uint8_t>> scans(k);
  std::vector<TensorView> scan_shape(k);  // per-iteration shape and dtype
  int64_t iter = 0;
  bool cond_value = cond;
  for (; iter < trip_count && cond_value; ++iter) {
    for (int i = 0; i < n; ++i) {
      if (!ir::IsBoxed(carried_views[i].dtype)) carried_views[i] = carried[i].view();
    }
    absl::StatusOr<std::vector<TensorView>> outs = backends::RunLoopBody(ctx, body, iter, carried_views);
    if (!outs.ok()) return outs.status();
    absl::StatusOr<bool> c = ReadCond(ctx, (*outs)[0], "the body's cond output");
    if (!c.ok()) return c.status();
    cond_value = *c;
    for (int i = 0; i < n; ++i) {
      if (absl::Status s = boxes.Stage(ctx, i, carried_views[i], (*outs)[1 + i]); !s.ok()) return s;
    }
    boxes.Commit();
    // A body may return its carried inputs in another order (a swap): an
    // output that is another carried value is copied before any is written.
    std::vector<Tensor> staged(n);
    for (int i = 0; i < n; ++i) {
      const TensorView& o = (*outs)[1 + i];
      if (backends::ReadsOtherCarried(o, i, carried_views)) {
        absl::StatusOr<Tensor> t = Tensor::CopyOf(o);
        if (!t.ok()) return t.status();
        staged[i] = *std::move(t);
      }
    }
    for (int i = 0; i < n; ++i) {
      const TensorView& o = staged[i].data() != nullptr ? staged[i].view() : (*outs)[1 + i];
      if (ir::IsBoxed(o.dtype)) continue;
      if (o.dtype != carried[i].dtype() || o.shape != carried[i].shape()) {
        absl::StatusOr<Tensor> t = Tensor::Create(o.dtype, o.shape);
        if (!t.ok()) return t.status();
        carried[i] = std::move(*t);
      }
      if (o.byte_size() > 0) std::memcpy(carried[i].data(), o.data, o.byte_size());
    }
    for (int j = 0; j < k; ++j) {
      const TensorView& o = (*outs)[1 + n + j];
      if (absl::Status s = backends::CheckScanIsTensor(ctx, j, o); !s.ok()) return s;
      if (absl::Status s = backends::CheckScanShape(ctx, j, iter, o, scan_shape[j]); !s.ok()) return s;
      const uint8_t* p = static_cast<const uint8_t*>(o.data);
      scans[j].insert(scans[j].end(), p, p + o.byte_size());
    }
  }
  for (int i = 0; i < n; ++i) {
    if (!ctx.has_output(i)) continue;
    const TensorView from = ir::IsBoxed(carried_views[i].dtype) ? carried_views[i] : carried[i].view();
    if (absl::Status s = CopyOut(ctx, i, from); !s.ok()) return s;
  }
  for (int j = 0; j < k; ++j) {
    if (!ctx.has_output(n + j)) continue;
    std::vector<int64_t> shape{iter};
    shape.insert(shape.end(), scan_shape[j].shape.begin(), scan_shape[j].shape.end());
    // With no iteration the element type comes from the plan.
    absl::StatusOr<TensorView*> out = ctx.AllocateOutput(n + j, scan_shape[j].dtype, std::move(shape));
    if (!out.ok()) return out.status();
    if (!scans[j].empty()) std::memcpy((*out)->data, scans[j].data(), scans[j].size());
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status RegisterControlFlowKernels(ir::OpRegistry& registry) {
  if (absl::Status s = registry.SetKernel("If", ir::Backend::kCpu, &IfKernel); !s.ok()) return s;
  return registry.SetKernel("Loop", ir::Backend::kCpu, &LoopKernel);
}

}  // namespace grove::cpu
