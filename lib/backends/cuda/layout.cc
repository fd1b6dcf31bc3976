// CUDA kernels of the layout group (lib/backends/cpu/layout.cc): Flatten,
// Squeeze, Unsqueeze (device copies), Split (row copies), Expand and Tile
// (strided copies), Pad, GatherElements, ScatterND (reduction none), Size,
// Range, ConstantOfShape, Trilu and OneHot. Parameters come from the concrete
// inputs through the helpers the shape functions use
// (lib/ir/ops/layout_params.h), and the planned outputs are checked against
// them before anything is written, as on the CPU.
//
// Each prepare parses the attributes, reads the parameter inputs the plan
// knows on the host (shape, repeats, pads, k, depth...) and builds the
// launch; the invoke fills pointers and launches. Parameter inputs computed
// on the device are read back when the step runs (HostValuesKernel; declared
// in host_inputs). Indices (GatherElements, ScatterND) are checked at prepare
// when the plan knows them, else on the device, a failure read at the run's
// end (deferred checks; see shape_ops.cc). ScatterND with repeated index
// tuples writes one of the updates (CUDA gives no order); the CPU writes the
// last.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "jit/kernels/copy_params.h"
#include "jit/kernels/fill_params.h"
#include "jit/kernels/gather_params.h"
#include "lib/backends/cuda/cuda_kernels.h"
#include "lib/backends/cuda/exec_context.h"
#include "lib/backends/cuda/strided_copy.h"
#include "lib/backends/common/layout_params.h"
#include "lib/ir/ops/layout_params.h"

namespace grove::cuda {
namespace {

using backends::CheckPlannedOutput;
using backends::Product;
using ir::DimsString;

// A launch helper's failure as this node's error.
absl::Status NodeStatus(const ir::KernelContext& ctx, absl::Status s) {
  return s.ok() || s.code() != absl::StatusCode::kInvalidArgument ? s : ctx.Error(s.message());
}

// The reader of integer parameter inputs for the shared parameter helpers.
auto ReadIntReader(ExecContext& ec, const ir::KernelContext& ctx) {
  return [&ec, &ctx](int i, absl::string_view) { return ec.ReadInts(ctx, i); };
}

absl::Status RequireIntIndices(const ir::KernelContext& ctx, int i) {
  const DType t = ctx.input(i).dtype;
  if (t == DType::kI64 || t == DType::kI32) return absl::OkStatus();
  return ctx.Error(absl::StrCat("input ", i, " (indices) has dtype ", DTypeName(t), "; expected i32 or i64"));
}

// ---------------------------------------------------------------------------

// Split: a row copy per output; `split` (input 1) read on the host.
struct SplitPlan {
  size_t es = 0;
  int64_t outer = 0, in_row = 0;
  std::vector<int64_t> rows, offsets;  // per output, in elements
};

absl::StatusOr<SplitPlan> PlanSplit(const ir::KernelContext& ctx) {
  ExecContext& ec = Exec(ctx);
  const TensorView& x = ctx.input(0);
  const int rank = static_cast<int>(x.shape.size());
  absl::StatusOr<int> axis = backends::SplitAxis(ctx);
  if (!axis.ok()) return axis.status();
  std::vector<int64_t> split;
  bool has_split = false;
  if (absl::Status s = backends::ReadIntArg(ctx, ReadIntReader(ec, ctx), 1, "split", "split", &split, &has_split);
      !s.ok()) {
    return s;
  }
  const int n = ctx.num_outputs();
  absl::StatusOr<std::vector<int64_t>> sizes = backends::SplitOutputSizes(ctx, *axis, has_split ? &split : nullptr);
  if (!sizes.ok()) return sizes.status();
  SplitPlan plan;
  plan.es = DTypeSize(x.dtype);
  plan.outer = Product(x.shape, 0, *axis);
  const int64_t inner = Product(x.shape, *axis + 1, rank);
  plan.in_row = x.shape[*axis] * inner;
  int64_t offset = 0;  // elements into an input row
  for (int i = 0; i < n; ++i) {
    const int64_t row = (*sizes)[i] * inner;
    plan.rows.push_back(row);
    plan.offsets.push_back(offset);
    offset += row;
  }
  return plan;
}

absl::Status RunSplit(ir::KernelContext& ctx, const SplitPlan& plan) {
  ExecContext& ec = Exec(ctx);
  const void* x = ctx.input(0).data;
  const int64_t es = static_cast<int64_t>(plan.es);
  for (size_t i = 0; i < plan.rows.size(); ++i) {
    if (!ctx.has_output(static_cast<int>(i))) continue;
    const int64_t row = plan.rows[i];
    absl::Status s = CopyRows(ec, plan.es, plan.outer, row, ByteOffset(x, plan.offsets[i] * es), plan.in_row,
                              ctx.output(static_cast<int>(i)).data, row);
    if (!s.ok()) return NodeStatus(ctx, s);
  }
  return absl::OkStatus();
}

// GatherElements and ScatterND: indices the plan knows are checked at
// prepare; others by the kernel on the device, a failure read at the run's
// end (deferred checks, exec_context.h), so the step needs no wait.
struct GatherElementsPrepared {
  bool empty = false;
  int axis = 0;
  grove_k::GatherElementsParams p{};  // without pointers
  jit::ModuleSpec module;
  DeviceCheckSite check;  // no record: the indices were checked at prepare
};

absl::StatusOr<ir::PreparedKernel> PrepareGatherElements(const ir::KernelContext& ctx) {
  ExecContext& ec = Exec(ctx);
  const TensorView& data = ctx.input(0);
  const TensorView& idx = ctx.input(1);
  const int rank = static_cast<int>(data.shape.size());
  absl::StatusOr<int> axis = backends::GatherElementsAxis(ctx);
  if (!axis.ok()) return axis.status();
  if (absl::Status s = RequireIntIndices(ctx, 1); !s.ok()) return s;
  const int64_t dim = data.shape[*axis];
  GatherElementsPrepared gp;
  gp.axis = *axis;
  const bool check_on_host = HostValues(ec, ctx, 1) != nullptr;
  if (check_on_host) {
    absl::StatusOr<std::vector<int64_t>> indices = ec.ReadInts(ctx, 1);
    if (!indices.ok()) return indices.status();
    for (int64_t i : *indices) {
      if (i < -dim || i >= dim) return backends::GatherElementsIndexError(ctx, i, *axis);
    }
  }
  if (idx.num_elements() == 0) {
    gp.empty = true;
    return MakePrepared(std::move(gp));
  }
  if (rank > grove_k::kMaxRank) {
    return ctx.Error(absl::StrCat("the CUDA kernel takes at most rank ", grove_k::kMaxRank, "; the data has ", rank));
  }
  absl::StatusOr<jit::ModuleSpec> module = WidthModule("gather", DTypeSize(data.dtype));
  if (!module.ok()) return NodeStatus(ctx, module.status());
  gp.module = *std::move(module);
  const std::vector<int64_t> strides = ir::Strides(data.shape);
  grove_k::GatherElementsParams& p = gp.p;
  p.n = idx.num_elements();
  p.idx_shape.rank = rank;
  for (int d = 0; d < rank; ++d) {
    p.idx_shape.d[d] = idx.shape[d];
    p.data_strides.s[d] = strides[d];
  }
  p.axis = *axis;
  p.dim = dim;
  p.indices_i64 = idx.dtype == DType::kI64 ? 1 : 0;
  if (!check_on_host) {
    absl::StatusOr<DeviceCheckSite> site =
        ec.CheckSite(ctx, [axis = *axis, shape = data.shape](const grove_k::CheckRecord& r) {
          return backends::GatherElementsIndexMessage(r.value, axis, shape);
        });
    if (!site.ok()) return site.status();
    gp.check = *std::move(site);
  }
  return MakePrepared(std::move(gp));
}

absl::Status GatherElementsKernel(ir::KernelContext& ctx) {
  const GatherElementsPrepared* gp = PreparedParams<GatherElementsPrepared>(ctx);
  if (gp == nullptr) return NotPrepared(ctx);
  if (gp->empty) return absl::OkStatus();
  grove_k::GatherElementsParams p = gp->p;
  p.data = ctx.input(0).data;
  p.indices = ctx.input(1).data;
  p.dst = ctx.output(0).data;
  p.check = gp->check.check;
  return Exec(ctx).Launch(gp->module, "gather_elements", Grid1D(p.n), p);
}

struct ScatterNDPrepared {
  uint64_t data_bytes = 0;
  bool launch = false;  // false: the copy of the data alone (and the check)
  int64_t es = 0, slice = 0, count = 0, k = 0;
  std::vector<int64_t> dims, strides;  // the data's first k dims and their strides
  bool indices_i64 = false;
  DeviceCheckSite check;  // no record: the indices were checked at prepare
};

absl::StatusOr<ir::PreparedKernel> PrepareScatterND(const ir::KernelContext& ctx) {
  ExecContext& ec = Exec(ctx);
  const TensorView& data = ctx.input(0);
  const TensorView& idx = ctx.input(1);
  absl::StatusOr<backends::ScatterReduction> reduction = backends::ParseScatterReduction(ctx);
  if (!reduction.ok()) return reduction.status();
  if (*reduction != backends::ScatterReduction::kNone) {
    return absl::UnimplementedError(absl::StrCat("ScatterND with reduction '",
                                                 ctx.attrs().GetString("reduction", "none"),
                                                 "' has no CUDA kernel yet (reduction none only)"));
  }
  absl::StatusOr<int64_t> depth = backends::ScatterNDIndexDepth(ctx);
  if (!depth.ok()) return depth.status();
  const int64_t k = *depth;
  if (absl::Status s = RequireIntIndices(ctx, 1); !s.ok()) return s;
  const int64_t count = idx.num_elements() / k;
  const int64_t slice = Product(data.shape, static_cast<size_t>(k), data.shape.size());
  // Known indices are checked here; the others on the device, even where
  // nothing is scattered (as the CPU checks them).
  const bool known = ec.ValuesOnHost(ctx, 1);
  ScatterNDPrepared sp;
  if (known) {
    absl::StatusOr<std::vector<int64_t>> indices = ec.ReadInts(ctx, 1);
    if (!indices.ok()) return indices.status();
    for (int64_t j = 0; j < count; ++j) {
      for (int64_t d = 0; d < k; ++d) {
        const int64_t v = (*indices)[j * k + d];
        if (v < -data.shape[d] || v >= data.shape[d]) {
          return ctx.Error(backends::ScatterNDIndexMessage(v, j, d, data.shape));
        }
      }
    }
  }
  sp.launch = slice > 0 && count > 0;
  const bool check_on_device = !known && count > 0;
  if ((sp.launch || check_on_device) && k > grove_k::kMaxRank) {
    return ctx.Error(absl::StrCat("the CUDA kernel takes index tuples of at most ", grove_k::kMaxRank,
                                  " coordinates; these have ", k));
  }
  sp.data_bytes = data.byte_size();
  sp.count = count;
  sp.k = k;
  const std::vector<int64_t> strides = ir::Strides(data.shape);
  for (int64_t d = 0; d < k; ++d) {
    sp.dims.push_back(data.shape[d]);
    sp.strides.push_back(strides[d]);
  }
  sp.indices_i64 = idx.dtype == DType::kI64;
  if (check_on_device) {
    absl::StatusOr<DeviceCheckSite> site =
        ec.CheckSite(ctx, [shape = data.shape](const grove_k::CheckRecord& r) {
          return backends::ScatterNDIndexMessage(r.value, r.a, r.b, shape);
        });
    if (!site.ok()) return site.status();
    sp.check = *std::move(site);
  }
  sp.es = static_cast<int64_t>(DTypeSize(data.dtype));
  sp.slice = slice;
  return MakePrepared(std::move(sp));
}

absl::Status ScatterNDKernel(ir::KernelContext& ctx) {
  const ScatterNDPrepared* sp = PreparedParams<ScatterNDPrepared>(ctx);
  if (sp == nullptr) return NotPrepared(ctx);
  ExecContext& ec = Exec(ctx);
  const TensorView& data = ctx.input(0);
  TensorView& y = ctx.output(0);
  if (y.data != data.data && sp->data_bytes > 0) {
    if (absl::Status s = ec.device().CopyAsync(y.data, data.data, sp->data_bytes, ec.stream()); !s.ok()) return s;
  }
  if (!sp->launch) {  // nothing to scatter; unknown indices still checked
    if (sp->check.check.record == nullptr) return absl::OkStatus();
    return NodeStatus(ctx, LaunchIndexCheck(ec, ctx.input(1).data, sp->indices_i64, sp->count, sp->dims,
                                            sp->check.check));
  }
  const TensorView& upd = ctx.input(2);
  // Slices move as the widest unit that divides them.
  const int64_t es = sp->es, slice = sp->slice;
  int64_t w = 8;
  while (w > es && ((slice * es) % w != 0 || reinterpret_cast<uintptr_t>(y.data) % w != 0 ||
                    reinterpret_cast<uintptr_t>(upd.data) % w != 0)) {
    w /= 2;
  }
  if (w < es) w = es;
  absl::StatusOr<jit::ModuleSpec> module = WidthModule("gather", static_cast<size_t>(w));
  if (!module.ok()) return NodeStatus(ctx, module.status());
  grove_k::ScatterNDParams p{};
  p.dst = y.data;
  p.indices = ctx.input(1).data;
  p.updates = upd.data;
  p.count = sp->count;
  p.slice = slice * es / w;
  p.dims.rank = static_cast<int>(sp->k);
  for (int64_t d = 0; d < sp->k; ++d) {
    p.dims.d[d] = sp->dims[d];
    p.strides.s[d] = sp->strides[d] * es / w;
  }
  p.indices_i64 = sp->indices_i64 ? 1 : 0;
  p.check = sp->check.check;
  return ec.Launch(*module, "scatter_nd", Grid1D(p.count * p.slice), p);
}

// Expand and Tile: a strided copy; the shape / repeats (input 1) read on the
// host.
absl::StatusOr<StridedCopyPlan> PlanExpand(const ir::KernelContext& ctx) {
  ExecContext& ec = Exec(ctx);
  const TensorView& x = ctx.input(0);
  absl::StatusOr<std::vector<int64_t>> shape = ec.ReadInts(ctx, 1);
  if (!shape.ok()) return shape.status();
  absl::StatusOr<backends::ExpandView> view = backends::ExpandParams(ctx, *shape);
  if (!view.ok()) return view.status();
  if (ir::NumElements(view->shape) == 0) return StridedCopyPlan{};
  absl::StatusOr<StridedCopyPlan> plan = PlanStridedCopy(DTypeSize(x.dtype), view->shape, view->strides);
  if (!plan.ok()) return NodeStatus(ctx, plan.status());
  return plan;
}

absl::Status RunCopyPlan(ir::KernelContext& ctx, const StridedCopyPlan& plan) {
  return NodeStatus(ctx, RunStridedCopy(Exec(ctx), plan, ctx.input(0).data, ctx.output(0).data));
}

absl::StatusOr<StridedCopyPlan> PlanTile(const ir::KernelContext& ctx) {
  ExecContext& ec = Exec(ctx);
  const TensorView& x = ctx.input(0);
  absl::StatusOr<std::vector<int64_t>> repeats = ec.ReadInts(ctx, 1);
  if (!repeats.ok()) return repeats.status();
  absl::StatusOr<std::vector<int64_t>> out_shape = backends::TileOutputShape(ctx, *repeats);
  if (!out_shape.ok()) return out_shape.status();
  if (ir::NumElements(*out_shape) == 0) return StridedCopyPlan{};
  const size_t rank = x.shape.size();
  std::vector<int64_t> wrap(rank, 0);
  for (size_t d = 0; d < rank; ++d) {
    // Output index rep * dim + i reads input index i.
    if ((*repeats)[d] > 1) wrap[d] = x.shape[d];
  }
  absl::StatusOr<StridedCopyPlan> plan = PlanStridedCopy(DTypeSize(x.dtype), *out_shape, ir::Strides(x.shape), wrap);
  if (!plan.ok()) return NodeStatus(ctx, plan.status());
  return plan;
}

// Pad: pads (input 1) and axes (input 3) read on the host; the constant
// value (input 2) is read on the device.
struct PadPlan {
  int64_t total = 0;  // 0: nothing to do
  size_t es = 0;
  bool copy_scalar = false;  // rank 0: one element copied
  bool value_input = false;
  grove_k::PadParams p{};  // without pointers
  jit::ModuleSpec module;
};

absl::StatusOr<PadPlan> PlanPad(const ir::KernelContext& ctx) {
  ExecContext& ec = Exec(ctx);
  const TensorView& x = ctx.input(0);
  const std::string mode = ctx.attrs().GetString("mode", "constant");
  int mode_id;
  if (mode == "constant") {
    mode_id = grove_k::kPadConstant;
  } else if (mode == "reflect") {
    mode_id = grove_k::kPadReflect;
  } else if (mode == "edge") {
    mode_id = grove_k::kPadEdge;
  } else if (mode == "wrap") {
    mode_id = grove_k::kPadWrap;
  } else {
    return ctx.Error(absl::StrCat("attribute mode is '", mode, "'"));
  }
  absl::StatusOr<backends::PadPlan> plan = backends::PadParams(ctx, ReadIntReader(ec, ctx), mode);
  if (!plan.ok()) return plan.status();
  const int64_t rank = static_cast<int64_t>(x.shape.size());
  const std::vector<int64_t>& out_shape = plan->out_shape;
  const ir::PadAmounts* amounts = &plan->amounts;
  PadPlan pp;
  pp.es = DTypeSize(x.dtype);
  grove_k::PadParams& p = pp.p;
  if (absl::Status s = backends::CheckPadValue(ctx); !s.ok()) return s;
  if (ctx.has_input(2)) {
    pp.value_input = true;  // read on the device
  } else if (ctx.attrs().Has("value")) {
    const double v = ctx.attrs().GetFloat("value", 0.0);
    absl::StatusOr<Tensor> t = Tensor::CastOf(TensorView(DType::kF64, {}, &v), x.dtype);
    if (!t.ok()) return ctx.Error(t.status().message());
    std::memcpy(&p.value_bits, t->data(), pp.es);
  }
  pp.total = ir::NumElements(out_shape);
  if (pp.total == 0) return pp;
  if (rank == 0) {
    pp.copy_scalar = true;
    return pp;
  }
  if (rank > grove_k::kMaxRank) {
    return ctx.Error(absl::StrCat("the CUDA kernel pads at most rank ", grove_k::kMaxRank, "; the data has ", rank));
  }
  absl::StatusOr<jit::ModuleSpec> module = WidthModule("copy", pp.es);
  if (!module.ok()) return NodeStatus(ctx, module.status());
  pp.module = *std::move(module);
  const std::vector<int64_t> strides = ir::Strides(x.shape);
  p.n = pp.total;
  p.out_shape.rank = static_cast<int>(rank);
  p.in_shape.rank = static_cast<int>(rank);
  for (int64_t d = 0; d < rank; ++d) {
    p.out_shape.d[d] = out_shape[d];
    p.in_shape.d[d] = x.shape[d];
    p.in_strides.s[d] = strides[d];
    p.begin.s[d] = amounts->begin[d];
  }
  p.mode = mode_id;
  return pp;
}

absl::Status RunPad(ir::KernelContext& ctx, const PadPlan& pp) {
  if (pp.total == 0) return absl::OkStatus();
  ExecContext& ec = Exec(ctx);
  const TensorView& x = ctx.input(0);
  TensorView& y = ctx.output(0);
  if (pp.copy_scalar) return ec.device().CopyAsync(y.data, x.data, pp.es, ec.stream());
  grove_k::PadParams p = pp.p;
  if (pp.value_input) p.value = ctx.input(2).data;
  p.src = x.data;
  p.dst = y.data;
  return ec.Launch(pp.module, "pad", Grid1D(pp.total), p);
}

// Size: the element count, known at prepare.
struct SizePrepared {
  int64_t n = 0;
};

absl::StatusOr<ir::PreparedKernel> PrepareSize(const ir::KernelContext& ctx) {
  if (absl::Status s = CheckPlannedOutput(ctx, 0, DType::kI64, {}); !s.ok()) return s;
  return MakePrepared(SizePrepared{ctx.input(0).num_elements()});
}

absl::Status SizeKernel(ir::KernelContext& ctx) {
  const SizePrepared* sp = PreparedParams<SizePrepared>(ctx);
  if (sp == nullptr) return NotPrepared(ctx);
  return NodeStatus(ctx, WriteValues(Exec(ctx), ctx.output(0).data, {sp->n}));
}

// A one-element input's value on the host, as a view over `storage`.
absl::StatusOr<TensorView> ScalarOnHost(ExecContext& ec, const ir::KernelContext& ctx, int i,
                                        std::vector<uint8_t>* storage) {
  absl::StatusOr<std::vector<uint8_t>> bytes = ec.ReadBytes(ctx, i);
  if (!bytes.ok()) return bytes.status();
  *storage = *std::move(bytes);
  const TensorView& v = ctx.input(i);
  return TensorView(v.dtype, v.shape, static_cast<const void*>(storage->data()));
}

// Range: start, limit and delta (inputs 0-2) read on the host.
struct RangePlan {
  grove_k::RangeParams p{};  // without dst; n 0: nothing to do
  DType dtype = DType::kF32;
};

absl::StatusOr<RangePlan> PlanRange(const ir::KernelContext& ctx) {
  ExecContext& ec = Exec(ctx);
  const TensorView& start = ctx.input(0);
  if (absl::Status s = backends::CheckRangeInputs(ctx); !s.ok()) return s;
  if (start.dtype != DType::kF32 && start.dtype != DType::kF64 && start.dtype != DType::kI32 &&
      start.dtype != DType::kI64) {
    return ctx.Error(absl::StrCat("Range of ", DTypeName(start.dtype), "; expected f32, f64, i32 or i64"));
  }
  std::vector<uint8_t> bytes[3];
  TensorView host[3];
  for (int i = 0; i < 3; ++i) {
    absl::StatusOr<TensorView> v = ScalarOnHost(ec, ctx, i, &bytes[i]);
    if (!v.ok()) return v.status();
    host[i] = *std::move(v);
  }
  absl::StatusOr<int64_t> count = ir::RangeCount(host[0], host[1], host[2]);
  if (!count.ok()) return ctx.Error(count.status().message());
  if (absl::Status s = CheckPlannedOutput(ctx, 0, start.dtype, {*count}); !s.ok()) return s;
  RangePlan plan;
  plan.dtype = start.dtype;
  if (*count == 0) return plan;
  grove_k::RangeParams& p = plan.p;
  p.n = *count;
  std::vector<int64_t> ints;
  if (ir::ReadIntegers(host[0], &ints)) {
    p.start_i = ints[0];
    ir::ReadIntegers(host[2], &ints);
    p.delta_i = ints[0];
  } else {
    // The inputs' own values (a float widens to double exactly).
    p.start_f = ir::ReadNumber(host[0], 0);
    p.delta_f = ir::ReadNumber(host[2], 0);
  }
  return plan;
}

absl::Status RunRange(ir::KernelContext& ctx, const RangePlan& plan) {
  if (plan.p.n == 0) return absl::OkStatus();
  grove_k::RangeParams p = plan.p;
  p.dst = ctx.output(0).data;
  return Exec(ctx).Launch({"fill_range", {plan.dtype}}, "range", Grid1D(p.n), p);
}

// ConstantOfShape: the shape (input 0) read on the host; the value (input 1)
// read on the device, or a memset when the plan knows it is zero.
struct ConstantOfShapePlan {
  int64_t n = 0;  // 0: nothing to do
  bool memset = false;
  jit::ModuleSpec module;
};

absl::StatusOr<ConstantOfShapePlan> PlanConstantOfShape(const ir::KernelContext& ctx) {
  ExecContext& ec = Exec(ctx);
  absl::StatusOr<std::vector<int64_t>> shape = ec.ReadInts(ctx, 0);
  if (!shape.ok()) return shape.status();
  if (absl::Status s = backends::CheckNonNegativeDims(ctx, *shape, "shape (input 0)"); !s.ok()) return s;
  absl::StatusOr<DType> value_dtype = backends::ConstantOfShapeDType(ctx);
  if (!value_dtype.ok()) return value_dtype.status();
  const DType dtype = *value_dtype;
  ConstantOfShapePlan plan;
  plan.memset = true;  // no value: zeros
  if (ctx.has_input(1)) {
    plan.memset = false;
    // A zero known on the host is a memset.
    if (const TensorView* h = HostValues(ec, ctx, 1); h != nullptr) {
      const auto* b = static_cast<const uint8_t*>(h->data);
      if (std::all_of(b, b + DTypeSize(dtype), [](uint8_t c) { return c == 0; })) plan.memset = true;
    }
  }
  if (absl::Status s = CheckPlannedOutput(ctx, 0, dtype, *shape); !s.ok()) return s;
  plan.n = ir::NumElements(*shape);
  if (plan.n == 0 || plan.memset) return plan;
  absl::StatusOr<jit::ModuleSpec> module = WidthModule("fill", DTypeSize(dtype));
  if (!module.ok()) return NodeStatus(ctx, module.status());
  plan.module = *std::move(module);
  return plan;
}

absl::Status RunConstantOfShape(ir::KernelContext& ctx, const ConstantOfShapePlan& plan) {
  if (plan.n == 0) return absl::OkStatus();
  ExecContext& ec = Exec(ctx);
  TensorView& y = ctx.output(0);
  if (plan.memset) return ec.device().MemsetAsync(y.data, 0, y.byte_size(), ec.stream());
  const grove_k::FillParams p{y.data, plan.n, ctx.input(1).data, 0};
  return ec.Launch(plan.module, "fill", Grid1D(plan.n), p);
}

// Trilu: k (input 1) read on the host.
struct TriluPlan {
  grove_k::TriluParams p{};  // without pointers; n 0: nothing to do
  jit::ModuleSpec module;
};

absl::StatusOr<TriluPlan> PlanTrilu(const ir::KernelContext& ctx) {
  ExecContext& ec = Exec(ctx);
  const TensorView& x = ctx.input(0);
  const size_t rank = x.shape.size();
  absl::StatusOr<int64_t> k_given = backends::TriluK(ctx, ReadIntReader(ec, ctx));
  if (!k_given.ok()) return k_given.status();
  const int64_t k = *k_given;
  const bool upper = ctx.attrs().GetInt("upper", 1) != 0;
  if (absl::Status s = CheckPlannedOutput(ctx, 0, x.dtype, x.shape); !s.ok()) return s;
  TriluPlan plan;
  const int64_t rows = x.shape[rank - 2], cols = x.shape[rank - 1];
  const int64_t n = x.num_elements();
  if (n == 0) return plan;
  absl::StatusOr<jit::ModuleSpec> module = WidthModule("fill", DTypeSize(x.dtype));
  if (!module.ok()) return NodeStatus(ctx, module.status());
  plan.module = *std::move(module);
  // Beyond +-(rows + cols) every k keeps all or nothing.
  plan.p = grove_k::TriluParams{nullptr, nullptr, n, rows, cols,
                                std::clamp<int64_t>(k, -(rows + cols), rows + cols), upper ? 1 : 0};
  return plan;
}

absl::Status RunTrilu(ir::KernelContext& ctx, const TriluPlan& plan) {
  if (plan.p.n == 0) return absl::OkStatus();
  grove_k::TriluParams p = plan.p;
  p.src = ctx.input(0).data;
  p.dst = ctx.output(0).data;
  return Exec(ctx).Launch(plan.module, "trilu", Grid1D(p.n), p);
}

// OneHot: depth (input 1) read on the host.
struct OneHotPlan {
  grove_k::OneHotParams p{};  // without pointers; n 0: nothing to do
  jit::ModuleSpec module;
};

absl::StatusOr<OneHotPlan> PlanOneHot(const ir::KernelContext& ctx) {
  ExecContext& ec = Exec(ctx);
  const TensorView& indices = ctx.input(0);
  const TensorView& values = ctx.input(2);
  if (absl::Status s = backends::CheckOneHotDepthInput(ctx); !s.ok()) return s;
  std::vector<uint8_t> depth_bytes;
  absl::StatusOr<TensorView> depth_view = ScalarOnHost(ec, ctx, 1, &depth_bytes);
  if (!depth_view.ok()) return depth_view.status();
  absl::StatusOr<backends::OneHotPlan> plan = backends::OneHotParams(ctx, *depth_view);
  if (!plan.ok()) return plan.status();
  const int64_t* depth = &plan->depth;
  const int64_t axis = plan->axis;
  const std::vector<int64_t>& out_shape = plan->out_shape;
  if (indices.dtype == DType::kBool || indices.dtype == DType::kUnknown) {
    return ctx.Error(absl::StrCat("indices (input 0) has dtype ", DTypeName(indices.dtype), "; expected a number"));
  }
  OneHotPlan oh;
  const int64_t n = ir::NumElements(out_shape);
  if (n == 0) return oh;
  absl::StatusOr<jit::ModuleSpec> width = WidthModule("gather_onehot", DTypeSize(values.dtype));
  if (!width.ok()) return NodeStatus(ctx, width.status());
  oh.module = jit::ModuleSpec{"gather_onehot", {indices.dtype, width->types[0]}};
  oh.p = grove_k::OneHotParams{nullptr, nullptr, nullptr, n, *depth,
                               Product(indices.shape, static_cast<size_t>(axis), indices.shape.size())};
  return oh;
}

absl::Status RunOneHot(ir::KernelContext& ctx, const OneHotPlan& plan) {
  if (plan.p.n == 0) return absl::OkStatus();
  grove_k::OneHotParams p = plan.p;
  p.indices = ctx.input(0).data;
  p.values = ctx.input(2).data;
  p.dst = ctx.output(0).data;
  return Exec(ctx).Launch(plan.module, "onehot", Grid1D(p.n), p);
}

}  // namespace

absl::Status RegisterCudaLayoutKernels(ir::OpRegistry& registry) {
  // Inputs whose values are read on the host (KernelDef::host_inputs).
  constexpr uint64_t kInput0 = 1u << 0, kInput1 = 1u << 1, kInput2 = 1u << 2, kInput3 = 1u << 3;
  const ir::KernelDef same_bytes{&SameBytesKernel, &PrepareSameBytes};
  const absl::Status results[] = {
      registry.SetKernel("Flatten", ir::Backend::kCuda, same_bytes),
      registry.SetKernel("Squeeze", ir::Backend::kCuda, same_bytes),
      registry.SetKernel("Unsqueeze", ir::Backend::kCuda, same_bytes),
      registry.SetKernel("Split", ir::Backend::kCuda,
                         HostValuesKernel<SplitPlan, &PlanSplit, &RunSplit, kInput1>::Def()),
      registry.SetKernel("GatherElements", ir::Backend::kCuda,
                         ir::KernelDef{&GatherElementsKernel, &PrepareGatherElements}),
      registry.SetKernel("ScatterND", ir::Backend::kCuda, ir::KernelDef{&ScatterNDKernel, &PrepareScatterND}),
      registry.SetKernel("Expand", ir::Backend::kCuda,
                         HostValuesKernel<StridedCopyPlan, &PlanExpand, &RunCopyPlan, kInput1>::Def()),
      registry.SetKernel("Tile", ir::Backend::kCuda,
                         HostValuesKernel<StridedCopyPlan, &PlanTile, &RunCopyPlan, kInput1>::Def()),
      registry.SetKernel("Pad", ir::Backend::kCuda,
                         HostValuesKernel<PadPlan, &PlanPad, &RunPad, kInput1 | kInput3>::Def()),
      registry.SetKernel("Size", ir::Backend::kCuda, ir::KernelDef{&SizeKernel, &PrepareSize}),
      registry.SetKernel("Range", ir::Backend::kCuda,
                         HostValuesKernel<RangePlan, &PlanRange, &RunRange, kInput0 | kInput1 | kInput2>::Def()),
      registry.SetKernel(
          "ConstantOfShape", ir::Backend::kCuda,
          HostValuesKernel<ConstantOfShapePlan, &PlanConstantOfShape, &RunConstantOfShape, kInput0>::Def()),
      registry.SetKernel("Trilu", ir::Backend::kCuda,
                         HostValuesKernel<TriluPlan, &PlanTrilu, &RunTrilu, kInput1>::Def()),
      registry.SetKernel("OneHot", ir::Backend::kCuda,
                         HostValuesKernel<OneHotPlan, &PlanOneHot, &RunOneHot, kInput1>::Def()),
  };
  for (const absl::Status& s : results) {
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace grove::cuda
