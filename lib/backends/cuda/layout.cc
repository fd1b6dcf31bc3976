// CUDA kernels of the layout group (lib/backends/cpu/layout.cc): Flatten,
// Squeeze, Unsqueeze (device copies), Split (row copies), Expand and Tile
// (strided copies), Pad, GatherElements, ScatterND (reduction none), Size,
// Range, ConstantOfShape, Trilu and OneHot. Parameters come from the concrete
// inputs through the helpers the shape functions use
// (lib/ir/ops/layout_params.h), and the planned outputs are checked against
// them before anything is written, as on the CPU.
//
// Indices (GatherElements, ScatterND) are checked on the host when the plan
// knows them, else on the device with a flag read back after the launch (see
// shape_ops.cc). ScatterND with repeated index tuples writes one of the
// updates (CUDA gives no order); the CPU writes the last.
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

absl::Status SplitKernel(ir::KernelContext& ctx) {
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
  const size_t es = DTypeSize(x.dtype);
  const int64_t outer = Product(x.shape, 0, *axis);
  const int64_t inner = Product(x.shape, *axis + 1, rank);
  const int64_t in_row = x.shape[*axis] * inner;
  int64_t offset = 0;  // elements into an input row
  for (int i = 0; i < n; ++i) {
    const int64_t row = (*sizes)[i] * inner;
    if (ctx.has_output(i)) {
      absl::Status s = CopyRows(ec, es, outer, row, ByteOffset(x.data, offset * static_cast<int64_t>(es)), in_row,
                                ctx.output(i).data, row);
      if (!s.ok()) return NodeStatus(ctx, s);
    }
    offset += row;
  }
  return absl::OkStatus();
}

absl::Status GatherElementsKernel(ir::KernelContext& ctx) {
  ExecContext& ec = Exec(ctx);
  const TensorView& data = ctx.input(0);
  const TensorView& idx = ctx.input(1);
  const int rank = static_cast<int>(data.shape.size());
  absl::StatusOr<int> axis = backends::GatherElementsAxis(ctx);
  if (!axis.ok()) return axis.status();
  if (absl::Status s = RequireIntIndices(ctx, 1); !s.ok()) return s;
  const int64_t dim = data.shape[*axis];
  auto out_of_range = [&](int64_t given) { return backends::GatherElementsIndexError(ctx, given, *axis); };
  const bool check_on_host = HostValues(ec, ctx, 1) != nullptr;
  if (check_on_host) {
    absl::StatusOr<std::vector<int64_t>> indices = ec.ReadInts(ctx, 1);
    if (!indices.ok()) return indices.status();
    for (int64_t i : *indices) {
      if (i < -dim || i >= dim) return out_of_range(i);
    }
  }
  if (idx.num_elements() == 0) return absl::OkStatus();
  if (rank > grove_k::kMaxRank) {
    return ctx.Error(absl::StrCat("the CUDA kernel takes at most rank ", grove_k::kMaxRank, "; the data has ", rank));
  }
  absl::StatusOr<jit::ModuleSpec> module = WidthModule("gather", DTypeSize(data.dtype));
  if (!module.ok()) return NodeStatus(ctx, module.status());
  const std::vector<int64_t> strides = ir::Strides(data.shape);
  grove_k::GatherElementsParams p{};
  p.data = data.data;
  p.indices = idx.data;
  p.dst = ctx.output(0).data;
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
    absl::StatusOr<void*> flag = ArmIndexCheck(ec);
    if (!flag.ok()) return flag.status();
    p.error = *flag;
  }
  if (absl::Status s = ec.Launch(*module, "gather_elements", Grid1D(p.n), p); !s.ok()) return s;
  if (p.error != nullptr) {
    absl::StatusOr<std::optional<int64_t>> bad = ReadIndexCheck(ec, p.error);
    if (!bad.ok()) return bad.status();
    if (bad->has_value()) return out_of_range(**bad);
  }
  return absl::OkStatus();
}

absl::Status ScatterNDKernel(ir::KernelContext& ctx) {
  ExecContext& ec = Exec(ctx);
  const TensorView& data = ctx.input(0);
  const TensorView& idx = ctx.input(1);
  const TensorView& upd = ctx.input(2);
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
  auto out_of_range = [&](int64_t given, int64_t d) {
    return ctx.Error(absl::StrCat("index ", given, " is out of range for dim ", d, " of the data ",
                                  DimsString(data.shape)));
  };
  const int64_t count = idx.num_elements() / k;
  const int64_t slice = Product(data.shape, static_cast<size_t>(k), data.shape.size());
  // Known indices (or ones no launch would read) are checked here.
  const bool check_on_host = HostValues(ec, ctx, 1) != nullptr || slice == 0 || count == 0;
  if (check_on_host) {
    absl::StatusOr<std::vector<int64_t>> indices = ec.ReadInts(ctx, 1);
    if (!indices.ok()) return indices.status();
    for (int64_t j = 0; j < count; ++j) {
      for (int64_t d = 0; d < k; ++d) {
        const int64_t v = (*indices)[j * k + d];
        if (v < -data.shape[d] || v >= data.shape[d]) return out_of_range(v, d);
      }
    }
  }
  TensorView& y = ctx.output(0);
  if (y.data != data.data && data.byte_size() > 0) {
    if (absl::Status s = ec.device().CopyAsync(y.data, data.data, data.byte_size(), ec.stream()); !s.ok()) return s;
  }
  if (slice == 0 || count == 0) return absl::OkStatus();
  if (k > grove_k::kMaxRank) {
    return ctx.Error(absl::StrCat("the CUDA kernel takes index tuples of at most ", grove_k::kMaxRank,
                                  " coordinates; these have ", k));
  }
  // Slices move as the widest unit that divides them.
  const int64_t es = static_cast<int64_t>(DTypeSize(data.dtype));
  int64_t w = 8;
  while (w > es && ((slice * es) % w != 0 || reinterpret_cast<uintptr_t>(y.data) % w != 0 ||
                    reinterpret_cast<uintptr_t>(upd.data) % w != 0)) {
    w /= 2;
  }
  if (w < es) w = es;
  absl::StatusOr<jit::ModuleSpec> module = WidthModule("gather", static_cast<size_t>(w));
  if (!module.ok()) return NodeStatus(ctx, module.status());
  const std::vector<int64_t> strides = ir::Strides(data.shape);
  grove_k::ScatterNDParams p{};
  p.dst = y.data;
  p.indices = idx.data;
  p.updates = upd.data;
  p.count = count;
  p.slice = slice * es / w;
  p.dims.rank = static_cast<int>(k);
  for (int64_t d = 0; d < k; ++d) {
    p.dims.d[d] = data.shape[d];
    p.strides.s[d] = strides[d] * es / w;
  }
  p.indices_i64 = idx.dtype == DType::kI64 ? 1 : 0;
  if (!check_on_host) {
    absl::StatusOr<void*> flag = ArmIndexCheck(ec);
    if (!flag.ok()) return flag.status();
    p.error = *flag;
  }
  if (absl::Status s = ec.Launch(*module, "scatter_nd", Grid1D(count * p.slice), p); !s.ok()) return s;
  if (p.error != nullptr) {
    absl::StatusOr<std::optional<int64_t>> bad = ReadIndexCheck(ec, p.error);
    if (!bad.ok()) return bad.status();
    if (bad->has_value()) {
      return ctx.Error(absl::StrCat("index ", **bad, " is out of range for the data ", DimsString(data.shape)));
    }
  }
  return absl::OkStatus();
}

absl::Status ExpandKernel(ir::KernelContext& ctx) {
  ExecContext& ec = Exec(ctx);
  const TensorView& x = ctx.input(0);
  absl::StatusOr<std::vector<int64_t>> shape = ec.ReadInts(ctx, 1);
  if (!shape.ok()) return shape.status();
  absl::StatusOr<backends::ExpandView> view = backends::ExpandParams(ctx, *shape);
  if (!view.ok()) return view.status();
  if (ir::NumElements(view->shape) == 0) return absl::OkStatus();
  return NodeStatus(ctx,
                    StridedCopy(ec, DTypeSize(x.dtype), view->shape, x.data, view->strides, ctx.output(0).data));
}

absl::Status TileKernel(ir::KernelContext& ctx) {
  ExecContext& ec = Exec(ctx);
  const TensorView& x = ctx.input(0);
  absl::StatusOr<std::vector<int64_t>> repeats = ec.ReadInts(ctx, 1);
  if (!repeats.ok()) return repeats.status();
  absl::StatusOr<std::vector<int64_t>> out_shape = backends::TileOutputShape(ctx, *repeats);
  if (!out_shape.ok()) return out_shape.status();
  if (ir::NumElements(*out_shape) == 0) return absl::OkStatus();
  const size_t rank = x.shape.size();
  std::vector<int64_t> wrap(rank, 0);
  for (size_t d = 0; d < rank; ++d) {
    // Output index rep * dim + i reads input index i.
    if ((*repeats)[d] > 1) wrap[d] = x.shape[d];
  }
  return NodeStatus(ctx, StridedCopy(ec, DTypeSize(x.dtype), *out_shape, x.data, ir::Strides(x.shape),
                                     ctx.output(0).data, wrap));
}

absl::Status PadKernel(ir::KernelContext& ctx) {
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
  const size_t es = DTypeSize(x.dtype);
  grove_k::PadParams p{};
  if (absl::Status s = backends::CheckPadValue(ctx); !s.ok()) return s;
  if (ctx.has_input(2)) {
    p.value = ctx.input(2).data;  // read on the device
  } else if (ctx.attrs().Has("value")) {
    const double v = ctx.attrs().GetFloat("value", 0.0);
    absl::StatusOr<Tensor> t = Tensor::CastOf(TensorView(DType::kF64, {}, &v), x.dtype);
    if (!t.ok()) return ctx.Error(t.status().message());
    std::memcpy(&p.value_bits, t->data(), es);
  }
  TensorView& y = ctx.output(0);
  const int64_t total = ir::NumElements(out_shape);
  if (total == 0) return absl::OkStatus();
  if (rank == 0) return ec.device().CopyAsync(y.data, x.data, es, ec.stream());
  if (rank > grove_k::kMaxRank) {
    return ctx.Error(absl::StrCat("the CUDA kernel pads at most rank ", grove_k::kMaxRank, "; the data has ", rank));
  }
  absl::StatusOr<jit::ModuleSpec> module = WidthModule("copy", es);
  if (!module.ok()) return NodeStatus(ctx, module.status());
  const std::vector<int64_t> strides = ir::Strides(x.shape);
  p.src = x.data;
  p.dst = y.data;
  p.n = total;
  p.out_shape.rank = static_cast<int>(rank);
  p.in_shape.rank = static_cast<int>(rank);
  for (int64_t d = 0; d < rank; ++d) {
    p.out_shape.d[d] = out_shape[d];
    p.in_shape.d[d] = x.shape[d];
    p.in_strides.s[d] = strides[d];
    p.begin.s[d] = amounts->begin[d];
  }
  p.mode = mode_id;
  return ec.Launch(*module, "pad", Grid1D(total), p);
}

absl::Status SizeKernel(ir::KernelContext& ctx) {
  if (absl::Status s = CheckPlannedOutput(ctx, 0, DType::kI64, {}); !s.ok()) return s;
  const int64_t n = ctx.input(0).num_elements();
  return NodeStatus(ctx, WriteValues(Exec(ctx), ctx.output(0).data, {n}));
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

absl::Status RangeKernel(ir::KernelContext& ctx) {
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
  if (*count == 0) return absl::OkStatus();
  grove_k::RangeParams p{};
  p.dst = ctx.output(0).data;
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
  return ec.Launch({"fill_range", {start.dtype}}, "range", Grid1D(p.n), p);
}

absl::Status ConstantOfShapeKernel(ir::KernelContext& ctx) {
  ExecContext& ec = Exec(ctx);
  absl::StatusOr<std::vector<int64_t>> shape = ec.ReadInts(ctx, 0);
  if (!shape.ok()) return shape.status();
  if (absl::Status s = backends::CheckNonNegativeDims(ctx, *shape, "shape (input 0)"); !s.ok()) return s;
  absl::StatusOr<DType> value_dtype = backends::ConstantOfShapeDType(ctx);
  if (!value_dtype.ok()) return value_dtype.status();
  const DType dtype = *value_dtype;
  const void* value = nullptr;  // device
  if (ctx.has_input(1)) {
    value = ctx.input(1).data;
    // A zero known on the host is a memset.
    if (const TensorView* h = HostValues(ec, ctx, 1); h != nullptr) {
      const auto* b = static_cast<const uint8_t*>(h->data);
      if (std::all_of(b, b + DTypeSize(dtype), [](uint8_t c) { return c == 0; })) value = nullptr;
    }
  }
  if (absl::Status s = CheckPlannedOutput(ctx, 0, dtype, *shape); !s.ok()) return s;
  const int64_t n = ir::NumElements(*shape);
  if (n == 0) return absl::OkStatus();
  TensorView& y = ctx.output(0);
  if (value == nullptr) return ec.device().MemsetAsync(y.data, 0, y.byte_size(), ec.stream());
  absl::StatusOr<jit::ModuleSpec> module = WidthModule("fill", DTypeSize(dtype));
  if (!module.ok()) return NodeStatus(ctx, module.status());
  const grove_k::FillParams p{y.data, n, value, 0};
  return ec.Launch(*module, "fill", Grid1D(n), p);
}

absl::Status TriluKernel(ir::KernelContext& ctx) {
  ExecContext& ec = Exec(ctx);
  const TensorView& x = ctx.input(0);
  const size_t rank = x.shape.size();
  absl::StatusOr<int64_t> k_given = backends::TriluK(ctx, ReadIntReader(ec, ctx));
  if (!k_given.ok()) return k_given.status();
  const int64_t k = *k_given;
  const bool upper = ctx.attrs().GetInt("upper", 1) != 0;
  if (absl::Status s = CheckPlannedOutput(ctx, 0, x.dtype, x.shape); !s.ok()) return s;
  const int64_t rows = x.shape[rank - 2], cols = x.shape[rank - 1];
  const int64_t n = x.num_elements();
  if (n == 0) return absl::OkStatus();
  absl::StatusOr<jit::ModuleSpec> module = WidthModule("fill", DTypeSize(x.dtype));
  if (!module.ok()) return NodeStatus(ctx, module.status());
  // Beyond +-(rows + cols) every k keeps all or nothing.
  const grove_k::TriluParams p{x.data, ctx.output(0).data, n, rows, cols,
                               std::clamp<int64_t>(k, -(rows + cols), rows + cols), upper ? 1 : 0};
  return ec.Launch(*module, "trilu", Grid1D(n), p);
}

absl::Status OneHotKernel(ir::KernelContext& ctx) {
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
  const int64_t n = ir::NumElements(out_shape);
  if (n == 0) return absl::OkStatus();
  absl::StatusOr<jit::ModuleSpec> width = WidthModule("gather_onehot", DTypeSize(values.dtype));
  if (!width.ok()) return NodeStatus(ctx, width.status());
  const jit::ModuleSpec module{"gather_onehot", {indices.dtype, width->types[0]}};
  const grove_k::OneHotParams p{indices.data, values.data, ctx.output(0).data, n, *depth,
                                Product(indices.shape, static_cast<size_t>(axis), indices.shape.size())};
  return ec.Launch(module, "onehot", Grid1D(n), p);
}

}  // namespace

absl::Status RegisterCudaLayoutKernels(ir::OpRegistry& registry) {
  const absl::Status results[] = {
      registry.SetKernel("Flatten", ir::Backend::kCuda, &SameBytesKernel),
      registry.SetKernel("Squeeze", ir::Backend::kCuda, &SameBytesKernel),
      registry.SetKernel("Unsqueeze", ir::Backend::kCuda, &SameBytesKernel),
      registry.SetKernel("Split", ir::Backend::kCuda, &SplitKernel),
      registry.SetKernel("GatherElements", ir::Backend::kCuda, &GatherElementsKernel),
      registry.SetKernel("ScatterND", ir::Backend::kCuda, &ScatterNDKernel),
      registry.SetKernel("Expand", ir::Backend::kCuda, &ExpandKernel),
      registry.SetKernel("Tile", ir::Backend::kCuda, &TileKernel),
      registry.SetKernel("Pad", ir::Backend::kCuda, &PadKernel),
      registry.SetKernel("Size", ir::Backend::kCuda, &SizeKernel),
      registry.SetKernel("Range", ir::Backend::kCuda, &RangeKernel),
      registry.SetKernel("ConstantOfShape", ir::Backend::kCuda, &ConstantOfShapeKernel),
      registry.SetKernel("Trilu", ir::Backend::kCuda, &TriluKernel),
      registry.SetKernel("OneHot", ir::Backend::kCuda, &OneHotKernel),
  };
  for (const absl::Status& s : results) {
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace grove::cuda
