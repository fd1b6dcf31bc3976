// Channels-last window steps (channels_last.h).
#include "lib/backends/cpu/channels_last.h"

#include <atomic>
#include <cstdint>
#include <utility>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "lib/backends/common/prepared.h"
#include "lib/backends/cpu/activation_fusion.h"
#include "lib/backends/cpu/parallel_for.h"
#include "lib/backends/cpu/post_op.h"
#include "lib/backends/cpu/strided_copy.h"
#include "lib/backends/cpu/workspace_layout.h"

namespace grove::cpu {
namespace {

using backends::MakePrepared;
using backends::PreparedParams;
using ir::KernelContext;
using ir::PreparedKernel;

// [N, C, S...] of a tensor stored [N, S..., C].
std::vector<int64_t> ChannelsFirstShape(const std::vector<int64_t>& stored) {
  std::vector<int64_t> shape = {stored.front(), stored.back()};
  shape.insert(shape.end(), stored.begin() + 1, stored.end() - 1);
  return shape;
}

// Element strides of a channels-last array read in [N, C, S...] order, or of
// a channels-first array read in [N, S..., C] order (`to_channels_last`).
std::vector<int64_t> TransposeStrides(const std::vector<int64_t>& logical, bool to_channels_last) {
  const size_t rank = logical.size();
  std::vector<int64_t> strides(rank);
  if (!to_channels_last) {  // source [N, S..., C]: C's stride 1, S's after it
    int64_t at = logical[1];
    strides[1] = 1;
    for (size_t d = rank; d-- > 2;) {
      strides[d] = at;
      at *= logical[d];
    }
    strides[0] = at;
    return strides;
  }
  // source [N, C, S...] read as [N, S..., C]
  int64_t spatial = 1;
  for (size_t d = 2; d < rank; ++d) spatial *= logical[d];
  strides[0] = logical[1] * spatial;
  strides[rank - 1] = spatial;
  int64_t at = 1;
  for (size_t d = rank; d-- > 2;) {
    strides[d - 1] = at;
    at *= logical[d];
  }
  return strides;
}

std::atomic<bool> g_channels_last_copies_only{false};  // tests: the transposed copies' path
std::atomic<int64_t> g_channels_last_prepared{0}, g_channels_last_copied{0};

struct ChannelsLastParams {
  PreparedKernel inner;
  ChannelsLast stored;  // what the attribute says
  ChannelsLast copied;  // of those, what the inner kernel reads / writes channels-first
  uint64_t x_offset = 0, y_offset = 0, r_offset = 0;  // the copies, after the inner kernel's workspace
  // X and Y as [N, C, ...], their shapes made by the prepare; the invoke
  // binds their data, one run at a time like the steps' own memory handles.
  mutable TensorView x, y;
  // A fused residual Add's tensor (post_op.h's kResidualAttr), stored as Y
  // is: viewed and copied with it.
  bool residual = false;
  mutable TensorView r;
};

// `t` as [N, C, ...] when it is stored channels-last.
TensorView LogicalView(const TensorView& t, bool channels_last) {
  TensorView v = t;
  if (channels_last) v.shape = ChannelsFirstShape(t.shape);
  return v;
}

// ctx's inputs and outputs with X and Y replaced by `x` and `y`, and the
// residual input by `r` when not null.
using ViewList = absl::InlinedVector<TensorView*, 8>;
void ReplaceXY(const KernelContext& ctx, TensorView* x, TensorView* y, TensorView* r, ViewList* inputs,
               ViewList* outputs) {
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    inputs->push_back(ctx.has_input(i) ? &const_cast<TensorView&>(ctx.input(i)) : nullptr);
  }
  for (int i = 0; i < ctx.num_outputs(); ++i) outputs->push_back(ctx.has_output(i) ? &ctx.output(i) : nullptr);
  (*inputs)[0] = x;
  (*outputs)[0] = y;
  if (r != nullptr) (*inputs)[kResidualInput] = r;
}

// Whether ctx's step reads a fused residual Add's tensor stored as Y is.
bool HasResidual(const KernelContext& ctx) {
  return ctx.attrs().Has(kResidualAttr) && ctx.num_inputs() > kResidualInput && ctx.has_input(kResidualInput);
}

ChannelsLast StoredLayout(const KernelContext& ctx) {
  const int64_t bits = ctx.attrs().GetInt(kChannelsLastAttr, 0);
  return ChannelsLast{(bits & 1) != 0, (bits & 2) != 0};
}

}  // namespace

absl::StatusOr<PreparedKernel> PrepareChannelsLast(const KernelContext& ctx, LayoutPrepare prepare) {
  const ChannelsLast stored = StoredLayout(ctx);
  auto rank_ok = [](const TensorView& t) { return t.shape.size() >= 3 && t.shape.size() <= 5; };
  if ((!stored.src && !stored.dst) || ctx.num_inputs() < 1 || !ctx.has_input(0) || !ctx.has_output(0) ||
      (stored.src && !rank_ok(ctx.input(0))) || (stored.dst && !rank_ok(ctx.output(0)))) {
    return ctx.Error("a channels-last step needs X and Y of rank 3-5 and the layout's bits (1: X, 2: Y)");
  }
  TensorView x = LogicalView(ctx.input(0), stored.src), y = LogicalView(ctx.output(0), stored.dst);
  const bool residual = HasResidual(ctx);
  if (residual && (ctx.input(kResidualInput).shape != ctx.output(0).shape)) {
    return ctx.Error("a channels-last step's residual input must be stored as Y is, of its shape");
  }
  TensorView r = residual ? LogicalView(ctx.input(kResidualInput), stored.dst) : TensorView();
  ViewList inputs, outputs;
  ReplaceXY(ctx, &x, &y, residual ? &r : nullptr, &inputs, &outputs);
  const KernelContext logical(ctx.node(), inputs, outputs, ctx.host());
  const bool copies_only = g_channels_last_copies_only.load(std::memory_order_relaxed);
  ChannelsLast honored = copies_only ? ChannelsLast{} : stored;
  absl::StatusOr<PreparedKernel> inner = prepare(logical, copies_only ? nullptr : &honored);
  if (!inner.ok()) return inner.status();
  ChannelsLastParams p;
  p.stored = stored;
  p.copied = ChannelsLast{stored.src && !honored.src, stored.dst && !honored.dst};
  g_channels_last_prepared.fetch_add(1, std::memory_order_relaxed);
  if (p.copied.src || p.copied.dst) g_channels_last_copied.fetch_add(1, std::memory_order_relaxed);
  WorkspaceLayout layout;
  layout.AddBytes(inner->workspace_bytes);
  if (p.copied.src) {
    p.x_offset = AlignWorkspace(layout.bytes());
    layout.AddBytes(x.byte_size());
  }
  if (p.copied.dst) {
    p.y_offset = AlignWorkspace(layout.bytes());
    layout.AddBytes(y.byte_size());
    if (residual) {
      p.r_offset = AlignWorkspace(layout.bytes());
      layout.AddBytes(r.byte_size());
    }
  }
  p.inner = *std::move(inner);
  p.x = std::move(x);
  p.y = std::move(y);
  p.residual = residual;
  p.r = std::move(r);
  const uint64_t bytes = layout.bytes();
  return MakePrepared(std::move(p), bytes);
}

absl::Status RunChannelsLast(KernelContext& ctx, LayoutRun run) {
  const ChannelsLastParams* p = PreparedParams<ChannelsLastParams>(ctx);
  if (p == nullptr) return backends::NotPrepared(ctx, "CPU");
  uint8_t* workspace = static_cast<uint8_t*>(ctx.workspace());
  if ((p->copied.src || p->copied.dst) && workspace == nullptr) {
    return ctx.Error("the channels-last step has no workspace");
  }
  ir::IntraOpThreads* threads = IntraOpThreadsOf(ctx);
  TensorView& x = p->x;
  TensorView& y = p->y;
  x.data = ctx.input(0).data;
  y.data = p->copied.dst ? workspace + p->y_offset : ctx.output(0).data;
  if (p->copied.src) {
    void* copy = workspace + p->x_offset;
    StridedCopy(threads, DTypeSize(x.dtype), x.shape, x.data, TransposeStrides(x.shape, false), copy);
    x.data = copy;
  }
  TensorView& r = p->r;
  if (p->residual) {
    r.data = ctx.input(kResidualInput).data;
    if (p->copied.dst) {  // the inner kernel reads it channels-first, as it writes Y
      void* copy = workspace + p->r_offset;
      StridedCopy(threads, DTypeSize(r.dtype), r.shape, r.data, TransposeStrides(r.shape, false), copy);
      r.data = copy;
    }
  }
  ViewList inputs, outputs;
  ReplaceXY(ctx, &x, &y, p->residual ? &r : nullptr, &inputs, &outputs);
  KernelContext logical(ctx.node(), inputs, outputs, ctx.host());
  logical.SetPrepared(&p->inner, workspace);
  if (absl::Status s = run(logical); !s.ok()) return s;
  if (p->copied.dst) {
    const TensorView& stored = ctx.output(0);
    StridedCopy(threads, DTypeSize(y.dtype), stored.shape, y.data, TransposeStrides(y.shape, true), stored.data);
  }
  return absl::OkStatus();
}

void SetChannelsLastCopiesOnly(bool copies) { g_channels_last_copies_only.store(copies, std::memory_order_relaxed); }

ChannelsLastCounts ChannelsLastStepsPrepared() {
  return ChannelsLastCounts{g_channels_last_prepared.load(std::memory_order_relaxed),
                            g_channels_last_copied.load(std::memory_order_relaxed)};
}

}  // namespace grove::cpu
