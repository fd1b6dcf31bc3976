// Partitioned oneDNN steps (onednn_internal.h): a step cut along one dim
// into parts, each its own single-threaded primitive over a slice of the
// step's arrays, run side by side on the session's intra-op threads.
#include <algorithm>
#include <atomic>
#include <optional>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "lib/backends/cpu/onednn_internal.h"
#include "lib/backends/cpu/parallel_for.h"

namespace grove::cpu {
namespace {

using tag = memory::format_tag;

std::atomic<int64_t> g_steps_partitioned{0};

// The format tag `d` is (one of those a primitive of grove's picks for an
// activation, a matrix or a weight), or nullopt.
std::optional<tag> TagOf(const memory::desc& d) {
  static const std::vector<tag>* const kTags = new std::vector<tag>[7]{
      {},
      {tag::a},
      {tag::ab, tag::ba},
      {tag::abc, tag::acb, tag::bac, tag::aBc8b, tag::aBc16b},
      {tag::abcd, tag::abdc, tag::acdb, tag::aBcd8b, tag::aBcd16b},
      {tag::abcde, tag::abced, tag::acdeb, tag::aBcde8b, tag::aBcde16b},
      {tag::abcdef},
  };
  const int rank = d.data.ndims;
  if (rank < 1 || rank > 6 || d.data.data_type != dnnl_f32) return std::nullopt;
  for (tag t : kTags[rank]) {
    if (memory::desc(d.dims(), memory::data_type::f32, t) == d) return t;
  }
  return std::nullopt;
}

}  // namespace

int64_t InnerBlock(const memory::desc& d, int dim) {
  int64_t block = 1;
  if (d.data.format_kind != dnnl_blocked) return block;
  const dnnl_blocking_desc_t& blocking = d.data.format_desc.blocking;
  for (int i = 0; i < blocking.inner_nblks; ++i) {
    if (blocking.inner_idxs[i] == dim) block *= blocking.inner_blks[i];
  }
  return block;
}

namespace {

// The layout of the slice [r.begin, r.end) along `dim` of an array laid out
// as `whole`, as an array of its own: the same format over the slice's dims,
// whose elements lie where they lie in the whole array, `*offset` bytes past
// its start (every dim of the slice with more than one element keeps the
// whole's stride). nullopt when the slice is no such block: it cuts through
// blocks of `dim` (channels 0-7 of nChw16c) or an outer dim has other
// elements between the slice's (rows of a channel-major tensor with several
// channels).
std::optional<memory::desc> SliceDesc(const memory::desc& whole, int dim, SliceRange r, int64_t* offset) {
  if (whole.data.format_kind != dnnl_blocked || whole.data.offset0 != 0) return std::nullopt;
  if (dim < 0 || dim >= whole.data.ndims || whole.data.padded_dims[dim] != whole.data.dims[dim]) return std::nullopt;
  const dnnl_blocking_desc_t& blocking = whole.data.format_desc.blocking;
  const int64_t block = InnerBlock(whole, dim);  // a cut through a block is no slice
  if (r.begin % block != 0 || (r.end - r.begin) % block != 0) return std::nullopt;
  const std::optional<tag> t = TagOf(whole);
  if (!t.has_value() || r.begin < 0 || r.end > whole.data.dims[dim] || r.end <= r.begin) return std::nullopt;
  memory::dims dims = whole.dims();
  dims[dim] = r.end - r.begin;
  memory::desc slice(dims, memory::data_type::f32, *t);
  for (int d = 0; d < whole.data.ndims; ++d) {
    if (slice.data.padded_dims[d] > 1 && slice.data.format_desc.blocking.strides[d] != blocking.strides[d]) {
      return std::nullopt;
    }
  }
  *offset = r.begin / block * blocking.strides[dim] * static_cast<int64_t>(sizeof(float));
  return slice;
}

// The slice [r.begin, r.end) along `dim` of grove's tensor laid out as
// `whole` (plain strides, no blocks), as a strided view for a reorder.
std::optional<memory::desc> StridedSlice(const memory::desc& whole, int dim, SliceRange r, int64_t* offset) {
  if (whole.data.format_kind != dnnl_blocked || whole.data.offset0 != 0 ||
      whole.data.format_desc.blocking.inner_nblks != 0 || dim < 0 || dim >= whole.data.ndims) {
    return std::nullopt;
  }
  memory::dims dims = whole.dims(), strides(dims.size());
  dims[dim] = r.end - r.begin;
  for (int d = 0; d < whole.data.ndims; ++d) strides[d] = whole.data.format_desc.blocking.strides[d];
  *offset = r.begin * strides[dim] * static_cast<int64_t>(sizeof(float));
  return memory::desc(dims, memory::data_type::f32, strides);
}

// The bytes of grove's tensor behind operand `op`.
void* TensorOf(const OneDnnOperand& op, ir::KernelContext& ctx) {
  return op.output ? ctx.output(op.index).data : ctx.input(op.index).data;
}

// Runs fn(0) ... fn(n - 1) over the session's threads, each on an OpenMP
// team of one; the first error any returned.
absl::Status ForEachTask(ir::KernelContext& ctx, int64_t n, absl::FunctionRef<absl::Status(int64_t)> fn) {
  if (n == 0) return absl::OkStatus();
  absl::Mutex mu;
  absl::Status first;
  auto task = [&](int64_t i) {
    OmpThreadScope one(1);
    absl::Status s = fn(i);
    if (!s.ok()) {
      absl::MutexLock lock(&mu);
      if (first.ok()) first = std::move(s);
    }
  };
  ir::IntraOpThreads* threads = IntraOpThreadsOf(ctx);
  if (threads == nullptr) {
    for (int64_t i = 0; i < n; ++i) task(i);
  } else {
    threads->Run(n, task);
  }
  return first;
}

// Reorders one slice (or a whole operand), unless nothing is to move: the
// operand is linked, or it is the weight the prepare packed.
absl::Status RunSliceReorder(OneDnnStep& step, OneDnnSliceReorder& r, ir::KernelContext& ctx) {
  const OneDnnOperand& op = step.operands[r.operand];
  if (op.linked) return absl::OkStatus();
  uint8_t* data = static_cast<uint8_t*>(TensorOf(op, ctx));
  if (!op.output && op.packed_from != nullptr && data == op.packed_from) return absl::OkStatus();
  dnnl_stream_t stream = r.stream.get();
  if (dnnl_status_t s = dnnl_memory_set_data_handle_v2(r.user.get(), data + r.user_offset, stream); s != dnnl_success) {
    return DnnlError("binding an argument", s);
  }
  if (dnnl_status_t s = dnnl_memory_set_data_handle_v2(r.inner.get(), step.arrays[r.operand] + r.inner_offset, stream);
      s != dnnl_success) {
    return DnnlError("binding a workspace array", s);
  }
  const dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, op.output ? r.inner.get() : r.user.get()},
                                   {DNNL_ARG_TO, op.output ? r.user.get() : r.inner.get()}};
  if (dnnl_status_t s = dnnl_primitive_execute(r.reorder.get(), stream, 2, args); s != dnnl_success) {
    return DnnlError("a reorder", s);
  }
  if (dnnl_status_t s = dnnl_stream_wait(stream); s != dnnl_success) return DnnlError("waiting", s);
  return absl::OkStatus();
}

absl::Status RunPart(OneDnnStep& step, OneDnnPart& part, ir::KernelContext& ctx, uint8_t* workspace) {
  for (OneDnnSliceReorder& r : part.before) {
    if (absl::Status s = RunSliceReorder(step, r, ctx); !s.ok()) return s;
  }
  dnnl_stream_t stream = part.stream.get();
  for (size_t k = 0; k < part.views.size(); ++k) {
    if (dnnl_status_t s = dnnl_memory_set_data_handle_v2(part.views[k].get(), step.arrays[k] + part.offsets[k], stream);
        s != dnnl_success) {
      return DnnlError("binding an argument", s);
    }
  }
  if (part.has_scratchpad) {
    if (dnnl_status_t s =
            dnnl_memory_set_data_handle_v2(part.scratchpad.get(), workspace + part.scratchpad_offset, stream);
        s != dnnl_success) {
      return DnnlError("binding the scratchpad", s);
    }
  }
  if (dnnl_status_t s = dnnl_primitive_execute(part.primitive.get(), stream, static_cast<int>(part.args.size()),
                                               part.args.data());
      s != dnnl_success) {
    return DnnlError(absl::StrCat("executing ", part.impl), s);
  }
  if (dnnl_status_t s = dnnl_stream_wait(stream); s != dnnl_success) return DnnlError("waiting", s);
  for (OneDnnSliceReorder& r : part.after) {
    if (absl::Status s = RunSliceReorder(step, r, ctx); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace

int64_t OneDnnStepsPartitioned() { return g_steps_partitioned.load(std::memory_order_relaxed); }

std::vector<SliceRange> EvenRanges(int64_t n, int parts) {
  std::vector<SliceRange> ranges;
  const int64_t count = std::min<int64_t>(std::max(parts, 1), n);
  if (count <= 0) return ranges;
  const int64_t base = n / count, extra = n % count;
  int64_t begin = 0;
  for (int64_t i = 0; i < count; ++i) {
    const int64_t end = begin + base + (i < extra ? 1 : 0);
    ranges.push_back({begin, end});
    begin = end;
  }
  return ranges;
}

WindowSlice InputRowsOf(SliceRange out, int64_t in, int64_t k, int64_t s, int64_t dil, int64_t pad_begin) {
  const int64_t lo = out.begin * s - pad_begin;
  const int64_t hi = (out.end - 1) * s - pad_begin + (k - 1) * dil + 1;
  WindowSlice w;
  w.input = {std::clamp<int64_t>(lo, 0, in), std::clamp<int64_t>(hi, 0, in)};
  w.pad_begin = w.input.begin - lo;
  w.pad_end = hi - w.input.end;
  return w;
}

bool PartitionOneDnnStep(OneDnnStep& step, const PartitionSpec& spec, MakePart make, WorkspaceLayout* layout) {
  const size_t operands = step.operands.size();
  const size_t count = spec.output.size();
  if (count < 2 || spec.input.size() != count || spec.kinds.size() != operands ||
      (!spec.dims.empty() && spec.dims.size() != operands)) {
    return false;
  }
  const dnnl::engine& engine = CpuEngine();
  // The array each operand's primitive argument lives in.
  std::vector<memory::desc> arrays(operands);
  for (size_t k = 0; k < operands; ++k) {
    const OneDnnOperand& op = step.operands[k];
    arrays[k] = op.reordered ? op.inner.get_desc() : op.user.get_desc();
  }
  OmpThreadScope one(1);
  std::vector<OneDnnPart> parts(count);
  std::vector<OneDnnSliceReorder> inputs;
  try {
    for (size_t i = 0; i < count; ++i) {
      OneDnnPart& part = parts[i];
      std::vector<memory::desc> descs(operands);
      part.offsets.assign(operands, 0);
      for (size_t k = 0; k < operands; ++k) {
        if (spec.kinds[k] == SliceKind::kWhole) {
          descs[k] = arrays[k];
          continue;
        }
        const SliceRange r = spec.kinds[k] == SliceKind::kInput ? spec.input[i] : spec.output[i];
        std::optional<memory::desc> slice = SliceDesc(arrays[k], spec.DimOf(k), r, &part.offsets[k]);
        if (!slice.has_value()) return false;
        descs[k] = *slice;
      }
      std::optional<MadePart> made = make(static_cast<int>(i), descs);
      if (!made.has_value() || made->used.size() != operands) return false;
      for (size_t k = 0; k < operands; ++k) {
        if (made->used[k] != descs[k]) return false;
      }
      part.stream = dnnl::stream(engine);
      part.primitive = std::move(made->primitive);
      part.impl = std::move(made->impl);
      for (size_t k = 0; k < operands; ++k) part.views.push_back(memory(descs[k], engine, DNNL_MEMORY_NONE));
      for (size_t k = 0; k < operands; ++k) part.args.push_back({step.operands[k].arg, part.views[k].get()});
      for (const auto& [arg, mem] : step.constants) part.args.push_back({arg, mem.get()});
      if (made->scratchpad.get_size() > 0) {
        part.has_scratchpad = true;
        part.scratchpad = memory(made->scratchpad, engine, DNNL_MEMORY_NONE);
        part.scratchpad_offset = ReserveWorkspace(layout, made->scratchpad.get_size());
        part.args.push_back({DNNL_ARG_SCRATCHPAD, part.scratchpad.get()});
      }
    }
    // The reorders between grove's tensors and the inner arrays. A cut
    // operand's slice belongs to the part that reads or writes it, which
    // reorders it in its own task (before its primitive, or after), unless
    // the parts' input slices overlap (a window's halo): then the input is
    // reordered in slices of its own that do not, before any part runs. An
    // operand every part reads whole is reordered in one piece before.
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    bool halo = false;
    for (size_t i = 0; i < count; ++i) {
      halo = halo || spec.input[i].begin != spec.output[i].begin || spec.input[i].end != spec.output[i].end;
    }
    // A reorder of `range` along `dim` of operand k.
    auto slice_reorder = [&](size_t k, int dim, SliceRange range) -> std::optional<OneDnnSliceReorder> {
      const OneDnnOperand& op = step.operands[k];
      OneDnnSliceReorder r;
      r.operand = static_cast<int>(k);
      std::optional<memory::desc> inner = SliceDesc(arrays[k], dim, range, &r.inner_offset);
      std::optional<memory::desc> user = StridedSlice(op.user.get_desc(), dim, range, &r.user_offset);
      if (!inner.has_value() || !user.has_value()) return std::nullopt;
      const dnnl::reorder::primitive_desc pd = op.output
                                                   ? dnnl::reorder::primitive_desc(engine, *inner, engine, *user, attr)
                                                   : dnnl::reorder::primitive_desc(engine, *user, engine, *inner, attr);
      if (pd.scratchpad_desc().get_size() != 0) return std::nullopt;
      r.stream = dnnl::stream(engine);
      r.reorder = dnnl::reorder(pd);
      r.user = memory(*user, engine, DNNL_MEMORY_NONE);
      r.inner = memory(*inner, engine, DNNL_MEMORY_NONE);
      return r;
    };
    for (size_t k = 0; k < operands; ++k) {
      const OneDnnOperand& op = step.operands[k];
      if (!op.reordered) continue;
      if (spec.kinds[k] == SliceKind::kWhole) {
        if (op.output) return false;
        OneDnnSliceReorder r;
        r.operand = static_cast<int>(k);
        r.stream = dnnl::stream(engine);
        r.reorder = op.reorder;
        r.user = memory(op.user.get_desc(), engine, DNNL_MEMORY_NONE);
        r.inner = memory(op.inner.get_desc(), engine, DNNL_MEMORY_NONE);
        inputs.push_back(std::move(r));
        continue;
      }
      const int dim = spec.DimOf(k);
      if (op.output || !halo) {
        for (size_t i = 0; i < count; ++i) {
          std::optional<OneDnnSliceReorder> r =
              slice_reorder(k, dim, spec.kinds[k] == SliceKind::kInput ? spec.input[i] : spec.output[i]);
          if (!r.has_value()) return false;
          (op.output ? parts[i].after : parts[i].before).push_back(*std::move(r));
        }
        continue;
      }
      // Slices of whole blocks when the inner layout blocks the dim cut.
      const int64_t block = InnerBlock(arrays[k], dim);
      for (SliceRange range : EvenRanges(arrays[k].dims()[dim] / block, static_cast<int>(count))) {
        std::optional<OneDnnSliceReorder> r = slice_reorder(k, dim, {range.begin * block, range.end * block});
        if (!r.has_value()) return false;
        inputs.push_back(*std::move(r));
      }
    }
  } catch (const dnnl::error&) {
    return false;
  }
  step.parts = std::move(parts);
  step.input_reorders = std::move(inputs);
  step.arrays.assign(operands, nullptr);
  g_steps_partitioned.fetch_add(1, std::memory_order_relaxed);
  return true;
}

absl::Status RunPartitionedOneDnnStep(OneDnnStep& step, ir::KernelContext& ctx) {
  uint8_t* workspace = static_cast<uint8_t*>(ctx.workspace());
  for (size_t k = 0; k < step.operands.size(); ++k) {
    const OneDnnOperand& op = step.operands[k];
    uint8_t* data = static_cast<uint8_t*>(TensorOf(op, ctx));
    if (!op.output && op.packed_from != nullptr && data == op.packed_from) {
      step.arrays[k] = static_cast<uint8_t*>(op.packed.get_data_handle());
    } else if (op.reordered || op.linked) {
      if (workspace == nullptr) return ctx.Error("the oneDNN step has no workspace");
      step.arrays[k] = workspace + op.offset;
    } else {
      step.arrays[k] = data;
    }
  }
  if (absl::Status s = ForEachTask(ctx, static_cast<int64_t>(step.input_reorders.size()),
                                   [&](int64_t i) { return RunSliceReorder(step, step.input_reorders[i], ctx); });
      !s.ok()) {
    return s;
  }
  if (absl::Status s = ForEachTask(ctx, static_cast<int64_t>(step.parts.size()),
                                   [&](int64_t i) { return RunPart(step, step.parts[i], ctx, workspace); });
      !s.ok()) {
    return s;
  }
  ApplyAfter(step, ctx);
  return absl::OkStatus();
}

}  // namespace grove::cpu
