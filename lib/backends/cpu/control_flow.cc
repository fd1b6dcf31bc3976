// CPU kernels of If, Loop and Scan. Bodies run through the session (plan cache,
// arenas); results are copied out because a body's arena is reused by its
// next call.
#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "lib/backends/common/control_flow.h"
#include "lib/backends/cpu/cpu_kernels.h"
#include "lib/backends/cpu/strided_copy.h"
#include "lib/ir/value_type.h"

namespace grove::cpu {
namespace {

using backends::kNoTripCount;

absl::StatusOr<bool> ReadCond(const ir::KernelContext& ctx, const TensorView& v, absl::string_view what) {
  if (absl::Status s = backends::CheckCondShape(ctx, v, what); !s.ok()) return s;
  return *static_cast<const uint8_t*>(v.data) != 0;
}

// A copy of a tensor's elements that a kernel keeps between body calls. For
// strings these are references: their bytes live as long as the run (the
// session's string arena, the model, the run's inputs), so copying the
// references is enough, and a deep copy (Tensor::CopyOf) would be wrong: its
// bytes die with the kernel's local tensor while the outputs still point at
// them.
absl::StatusOr<Tensor> CopyElements(const TensorView& from) {
  absl::StatusOr<Tensor> t = Tensor::Create(from.dtype, from.shape);
  if (!t.ok()) return t.status();
  if (from.byte_size() > 0) std::memcpy(t->data(), from.data, from.byte_size());
  return t;
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

// Bounded by the Loop policy of lib/backends/common/control_flow.h: every
// iteration goes through RunLoopBody, every scan append through CheckScanBytes.
absl::Status LoopKernel(ir::KernelContext& ctx) {
  int64_t trip_count = kNoTripCount;
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
  const int n = std::max(ctx.num_inputs() - 2, 0);  // Loop(M) and Loop() carry nothing
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
    absl::StatusOr<Tensor> t = CopyElements(ctx.input(2 + i));
    if (!t.ok()) return t.status();
    carried[i] = std::move(*t);
  }
  std::vector<std::vector<uint8_t>> scans(k);
  std::vector<TensorView> scan_shape(k);  // per-iteration shape and dtype
  uint64_t scan_bytes = 0;                // all scan outputs together
  int64_t iter = 0;
  backends::LoopBodyScalars scalars;  // outlives each trip's outputs
  bool cond_value = cond;
  for (; iter < trip_count && cond_value; ++iter) {
    for (int i = 0; i < n; ++i) {
      if (!ir::IsBoxed(carried_views[i].dtype)) carried_views[i] = carried[i].view();
    }
    absl::StatusOr<std::vector<TensorView>> outs = backends::RunLoopBody(ctx, body, iter, carried_views, scalars);
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
        absl::StatusOr<Tensor> t = CopyElements(o);
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
      if (absl::Status s = backends::CheckScanBytes(ctx, iter, scan_bytes, o.byte_size()); !s.ok()) return s;
      scan_bytes += o.byte_size();
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

absl::Status ScanKernel(ir::KernelContext& ctx) {
  const int m = static_cast<int>(ctx.attrs().GetInt("num_scan_inputs", 0));
  const int n = ctx.num_inputs() - m;
  const int k = ctx.num_outputs() - n;
  const std::vector<int64_t> in_axes = ctx.attrs().GetInts("scan_input_axes", std::vector<int64_t>(m, 0));
  const std::vector<int64_t> in_dirs = ctx.attrs().GetInts("scan_input_directions", std::vector<int64_t>(m, 0));
  const std::vector<int64_t> out_axes = ctx.attrs().GetInts("scan_output_axes", std::vector<int64_t>(k, 0));
  const std::vector<int64_t> out_dirs = ctx.attrs().GetInts("scan_output_directions", std::vector<int64_t>(k, 0));
  const int body = ctx.attrs().GetSubgraph("body");

  // The scan inputs: each read one slice per trip along its axis.
  std::vector<int> axes(m);
  int64_t length = -1;
  for (int j = 0; j < m; ++j) {
    const TensorView& x = ctx.input(n + j);
    absl::StatusOr<int> axis = ir::NormalizeAxis(in_axes[j], static_cast<int>(x.shape.size()));
    if (!axis.ok()) return ctx.Error(absl::StrCat("scan input ", j, ": ", axis.status().message()));
    axes[j] = *axis;
    if (length >= 0 && x.shape[*axis] != length) {
      return ctx.Error(absl::StrCat("scan input ", j, " has ", x.shape[*axis], " positions along its axis, input 0 has ",
                                    length));
    }
    length = x.shape[*axis];
  }
  std::vector<Tensor> states(n), slices(m);
  std::vector<TensorView> args(n + m);
  for (int i = 0; i < n; ++i) {
    absl::StatusOr<Tensor> t = CopyElements(ctx.input(i));
    if (!t.ok()) return t.status();
    states[i] = *std::move(t);
  }
  for (int j = 0; j < m; ++j) {
    std::vector<int64_t> shape = ctx.input(n + j).shape;
    shape.erase(shape.begin() + axes[j]);
    absl::StatusOr<Tensor> t = Tensor::Create(ctx.input(n + j).dtype, std::move(shape));
    if (!t.ok()) return t.status();
    slices[j] = *std::move(t);
  }
  std::vector<std::vector<Tensor>> scanned(k);
  for (int64_t t = 0; t < length; ++t) {
    for (int j = 0; j < m; ++j) {
      const TensorView& x = ctx.input(n + j);
      const AxisSplit v = SplitAtAxis(x.shape, axes[j]);
      const int64_t at = in_dirs[j] != 0 ? length - 1 - t : t;
      CopyAlongAxis(DTypeSize(x.dtype), v.outer, v.inner, x.data, v.dim, at, slices[j].data(), 1, 0, 1);
    }
    for (int i = 0; i < n; ++i) args[i] = states[i].view();
    for (int j = 0; j < m; ++j) args[n + j] = slices[j].view();
    absl::StatusOr<std::vector<TensorView>> outs = ctx.host()->RunSubgraph(body, args);
    if (!outs.ok()) return outs.status();
    if (static_cast<int>(outs->size()) != n + k) {
      return ctx.Error(absl::StrCat("body gave ", outs->size(), " outputs, wants ", n + k));
    }
    // Copies first: a body may pass a state or slice straight through.
    std::vector<Tensor> next(n);
    for (int i = 0; i < n + k; ++i) {
      const TensorView& o = (*outs)[i];
      if (ir::IsBoxed(o.dtype)) {
        return ctx.Error(absl::StrCat("body output ", i, " is a ", DTypeName(o.dtype), "; Scan carries tensors"));
      }
      absl::StatusOr<Tensor> c = CopyElements(o);
      if (!c.ok()) return c.status();
      if (i < n) {
        next[i] = *std::move(c);
      } else {
        if (!scanned[i - n].empty() && (c->shape() != scanned[i - n][0].shape() || c->dtype() != scanned[i - n][0].dtype())) {
          return ctx.Error(absl::StrCat("scan output ", i - n, " changes shape between iterations"));
        }
        scanned[i - n].push_back(*std::move(c));
      }
    }
    for (int i = 0; i < n; ++i) states[i] = std::move(next[i]);
  }
  for (int i = 0; i < n; ++i) {
    if (!ctx.has_output(i)) continue;
    if (absl::Status s = CopyOut(ctx, i, states[i].view()); !s.ok()) return s;
  }
  for (int j = 0; j < k; ++j) {
    if (!ctx.has_output(n + j)) continue;
    if (scanned[j].empty()) return ctx.Error("scans zero positions; its scan outputs would have no shape");
    const Tensor& first = scanned[j][0];
    absl::StatusOr<int> axis = ir::NormalizeAxis(out_axes[j], static_cast<int>(first.shape().size()) + 1);
    if (!axis.ok()) return ctx.Error(absl::StrCat("scan output ", j, ": ", axis.status().message()));
    std::vector<int64_t> shape = first.shape();
    shape.insert(shape.begin() + *axis, length);
    absl::StatusOr<TensorView*> out = ctx.AllocateOutput(n + j, first.dtype(), shape);
    if (!out.ok()) return out.status();
    const AxisSplit v = SplitAtAxis(shape, *axis);
    for (int64_t t = 0; t < length; ++t) {
      const int64_t at = out_dirs[j] != 0 ? length - 1 - t : t;
      CopyAlongAxis(DTypeSize(first.dtype()), v.outer, v.inner, scanned[j][t].data(), 1, 0, (*out)->data, v.dim, at, 1);
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status RegisterControlFlowKernels(ir::OpRegistry& registry) {
  if (absl::Status s = registry.SetKernel("If", ir::Backend::kCpu, &IfKernel); !s.ok()) return s;
  if (absl::Status s = registry.SetKernel("Scan", ir::Backend::kCpu, &ScanKernel); !s.ok()) return s;
  return registry.SetKernel("Loop", ir::Backend::kCpu, &LoopKernel);
}

}  // namespace grove::cpu
