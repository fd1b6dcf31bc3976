// CPU kernels of the layout group. Data movement copies elements as opaque
// bytes (one path for every dtype); only ScatterND's reductions, Range and
// OneHot's index reading do arithmetic. Each kernel derives its parameters
// from the concrete inputs with the helpers its shape function uses
// (lib/ir/ops/layout_params.h) and checks the planned outputs against them
// before writing, so a plan made from symbolic shapes cannot make it write
// out of bounds.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "lib/backends/cpu/cpu_kernels.h"
#include "lib/backends/cpu/parallel_for.h"
#include "lib/backends/cpu/scatter_reduce.h"
#include "lib/backends/cpu/resize_kernel.h"
#include "lib/backends/cpu/strided_copy.h"
#include "lib/backends/cpu/workspace_layout.h"
#include "lib/backends/common/kernel_checks.h"
#include "lib/backends/common/prepared.h"
#include "lib/backends/common/layout_params.h"
#include "lib/ir/element_types.h"
#include "lib/ir/ops/layout_params.h"

namespace grove::cpu {

using ir::BFloat16;
using ir::ConvertElement;
using ir::Half;
using ir::VisitAnyDType;
using ir::VisitDType;

namespace {

using backends::CheckPlannedOutput;
using backends::Product;
using backends::ReadHostInts;
using ir::DimsString;


// The reader of integer parameter inputs for the shared parameter helpers.
auto ReadIntReader(const ir::KernelContext& ctx) {
  return [&ctx](int i, absl::string_view name) { return ReadHostInts(ctx, i, name); };
}

// The largest element of any dtype (a string's reference).
constexpr size_t kMaxElementBytes = sizeof(StringRef);

// Writes `count` copies of one element (`value`, `es` bytes) to dst.
void Fill(void* dst, int64_t count, const void* value, size_t es) {
  if (count <= 0) return;
  auto* out = static_cast<uint8_t*>(dst);
  const auto* v = static_cast<const uint8_t*>(value);
  if (std::all_of(v, v + es, [](uint8_t b) { return b == 0; })) {
    std::memset(out, 0, static_cast<size_t>(count) * es);
    return;
  }
  std::memcpy(out, v, es);
  const size_t total = static_cast<size_t>(count) * es;
  for (size_t done = es; done < total;) {
    const size_t n = std::min(done, total - done);
    std::memcpy(out + done, out, n);
    done += n;
  }
}

// Copies element `src` of `in` to element `dst` of `out`, `es` bytes each.
inline void CopyElement(const uint8_t* in, int64_t src, uint8_t* out, int64_t dst, size_t es) {
  std::memcpy(out + dst * static_cast<int64_t>(es), in + src * static_cast<int64_t>(es), es);
}

// ---------------------------------------------------------------------------

// Whether every present input from `first` on has values the prepare can
// read (a weight, a folded value, or any value in a run outside a plan).
bool ValuesKnown(const ir::KernelContext& ctx, int first) {
  for (int i = first; i < ctx.num_inputs(); ++i) {
    if (ctx.has_input(i) && ctx.input(i).data == nullptr && ctx.input(i).num_elements() > 0) return false;
  }
  return true;
}

// Flatten, Squeeze, Unsqueeze: the bytes do not move.
struct CopyParams {};

absl::StatusOr<ir::PreparedKernel> PrepareCopy(const ir::KernelContext& ctx) {
  const TensorView& x = ctx.input(0);
  const TensorView& y = ctx.output(0);
  if (x.dtype != y.dtype || x.num_elements() != y.num_elements()) {
    return ctx.Error(absl::StrCat("the input ", DTypeName(x.dtype), " ", DimsString(x.shape),
                                  " does not fit the planned output ", DTypeName(y.dtype), " ",
                                  DimsString(y.shape)));
  }
  return backends::MakePrepared(CopyParams{});
}

absl::Status CopyKernel(ir::KernelContext& ctx) {
  if (backends::PreparedParams<CopyParams>(ctx) == nullptr) return backends::NotPrepared(ctx, "CPU");
  const TensorView& x = ctx.input(0);
  TensorView& y = ctx.output(0);
  if (y.data != x.data && x.byte_size() > 0) std::memmove(y.data, x.data, x.byte_size());
  return absl::OkStatus();
}

// Split: each output's rows of the input, as byte sizes, made once when the
// plan knows the split (input 1, a weight or folded value, or the attribute
// or an even split); per run otherwise (`planned` false).
struct SplitParams {
  bool planned = false;
  int64_t outer = 0, dim = 0;
  size_t inner = 0;  // bytes per position along the axis
  std::vector<int64_t> sizes;
};

absl::StatusOr<SplitParams> MakeSplitParams(const ir::KernelContext& ctx) {
  const TensorView& x = ctx.input(0);
  const int rank = static_cast<int>(x.shape.size());
  absl::StatusOr<int> axis = backends::SplitAxis(ctx);
  if (!axis.ok()) return axis.status();
  std::vector<int64_t> split;
  bool has_split = false;
  if (absl::Status s = backends::ReadIntArg(ctx, ReadIntReader(ctx), 1, "split", "split", &split, &has_split);
      !s.ok()) {
    return s;
  }
  absl::StatusOr<std::vector<int64_t>> sizes = backends::SplitOutputSizes(ctx, *axis, has_split ? &split : nullptr);
  if (!sizes.ok()) return sizes.status();
  SplitParams p;
  p.planned = true;
  p.outer = Product(x.shape, 0, *axis);
  p.inner = static_cast<size_t>(Product(x.shape, *axis + 1, rank)) * DTypeSize(x.dtype);
  p.dim = x.shape[*axis];
  p.sizes = *std::move(sizes);
  return p;
}

void RunSplit(const ir::KernelContext& ctx, const SplitParams& p) {
  const auto* in = static_cast<const uint8_t*>(ctx.input(0).data);
  const size_t inner = p.inner;
  int64_t offset = 0;
  for (int i = 0; i < ctx.num_outputs(); ++i) {
    const int64_t part = p.sizes[i];
    if (ctx.has_output(i) && part > 0 && inner > 0) {
      auto* out = static_cast<uint8_t*>(ctx.output(i).data);
      const size_t row = static_cast<size_t>(part) * inner;
      for (int64_t o = 0; o < p.outer; ++o) {
        std::memcpy(out + o * row, in + (static_cast<size_t>(o * p.dim + offset)) * inner, row);
      }
    }
    offset += part;
  }
}

absl::StatusOr<ir::PreparedKernel> PrepareSplit(const ir::KernelContext& ctx) {
  if (!ValuesKnown(ctx, 1)) return backends::MakePrepared(SplitParams{});
  absl::StatusOr<SplitParams> p = MakeSplitParams(ctx);
  if (!p.ok()) return p.status();
  return backends::MakePrepared(*std::move(p));
}

absl::Status SplitKernel(ir::KernelContext& ctx) {
  return backends::InvokePlannedOrPerRun<SplitParams>(
      ctx, "CPU", [](const ir::KernelContext& c, const SplitParams&) { return MakeSplitParams(c); },
      [&](const SplitParams& p) { RunSplit(ctx, p); });
}

// GatherElements: the axis, the data's strides and the walk over the
// indices, once; the indices are read (and checked) per run.
struct GatherElementsParams {
  int axis = 0;
  int64_t dim = 0;
  std::vector<int64_t> strides, idx_shape;
  size_t es = 0;
  absl::Status (*run)(const ir::KernelContext& ctx, const GatherElementsParams& p) = nullptr;
};

template <typename I>
absl::Status RunGatherElements(const ir::KernelContext& ctx, const GatherElementsParams& p) {
  const TensorView& idx = ctx.input(1);
  const I* indices = idx.as<const I>();
  const int64_t total = idx.num_elements();
  const int64_t dim = p.dim;
  for (int64_t k = 0; k < total; ++k) {
    const int64_t given = indices[k];
    const int64_t i = given < 0 ? given + dim : given;
    if (i < 0 || i >= dim) return backends::GatherElementsIndexError(ctx, given, p.axis);
  }
  if (total == 0) return absl::OkStatus();
  const int rank = static_cast<int>(p.idx_shape.size());
  const std::vector<int64_t>& strides = p.strides;
  const size_t es = p.es;
  const auto* in = static_cast<const uint8_t*>(ctx.input(0).data);
  auto* out = static_cast<uint8_t*>(ctx.output(0).data);
  // Walk the indices in order; `base` is the data offset of the current
  // position with the axis coordinate left out.
  absl::InlinedVector<int64_t, 8> pos(rank, 0);
  int64_t base = 0;
  const int64_t row = p.idx_shape[rank - 1];
  const int64_t row_step = rank - 1 == p.axis ? 0 : strides[rank - 1];
  const int64_t axis_stride = strides[p.axis];
  for (int64_t i = 0; i < total; i += row) {
    for (int64_t j = 0; j < row; ++j) {
      const int64_t given = indices[i + j];
      CopyElement(in, base + j * row_step + (given < 0 ? given + dim : given) * axis_stride, out, i + j, es);
    }
    for (int d = rank - 2; d >= 0; --d) {
      const int64_t step = d == p.axis ? 0 : strides[d];
      base += step;
      if (++pos[d] < p.idx_shape[d]) break;
      base -= step * p.idx_shape[d];
      pos[d] = 0;
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<ir::PreparedKernel> PrepareGatherElements(const ir::KernelContext& ctx) {
  const TensorView& data = ctx.input(0);
  absl::StatusOr<int> axis = backends::GatherElementsAxis(ctx);
  if (!axis.ok()) return axis.status();
  GatherElementsParams p;
  const DType index_dtype = ctx.input(1).dtype;
  if (index_dtype == DType::kI64) {
    p.run = &RunGatherElements<int64_t>;
  } else if (index_dtype == DType::kI32) {
    p.run = &RunGatherElements<int32_t>;
  } else {
    return ctx.Error(absl::StrCat("input 1 (indices) has dtype ", DTypeName(index_dtype), "; expected i32 or i64"));
  }
  p.axis = *axis;
  p.dim = data.shape[*axis];
  p.strides = ir::Strides(data.shape);
  p.idx_shape = ctx.input(1).shape;
  p.es = DTypeSize(data.dtype);
  return backends::MakePrepared(std::move(p));
}

absl::Status GatherElementsKernel(ir::KernelContext& ctx) {
  const GatherElementsParams* p = backends::PreparedParams<GatherElementsParams>(ctx);
  if (p == nullptr) return backends::NotPrepared(ctx, "CPU");
  return p->run(ctx, *p);
}

using backends::ScatterReduction;

// ScatterND: the reduction, the index depth k, the data's strides and the
// update loop of the dtype, once; the indices are read and checked per run
// (every one before the output is touched), their offsets kept in the
// workspace.
struct ScatterNDParams {
  ScatterReduction reduction = ScatterReduction::kNone;
  int64_t k = 0, count = 0, slice = 0;
  size_t es = 0;
  std::vector<int64_t> dims, strides;
  absl::Status (*offsets)(const ir::KernelContext& ctx, const ScatterNDParams& p, int64_t* out) = nullptr;
  void (*reduce)(ScatterReduction r, uint8_t* out, const uint8_t* upd, const int64_t* offsets, int64_t count,
                 int64_t slice) = nullptr;
};

template <typename I>
absl::Status ScatterNDOffsets(const ir::KernelContext& ctx, const ScatterNDParams& p, int64_t* offsets) {
  const I* indices = ctx.input(1).as<const I>();
  const int64_t k = p.k;
  for (int64_t j = 0; j < p.count; ++j) {
    int64_t offset = 0;
    for (int64_t d = 0; d < k; ++d) {
      int64_t v = indices[j * k + d];
      const int64_t given = v;
      if (v < 0) v += p.dims[d];
      if (v < 0 || v >= p.dims[d]) {
        return ctx.Error(absl::StrCat("index ", given, " (entry ", j, ", coordinate ", d,
                                      ") is out of range for dim ", d, " of the data ", DimsString(p.dims)));
      }
      offset += v * p.strides[d];
    }
    offsets[j] = offset;
  }
  return absl::OkStatus();
}

template <typename T>
void ScatterNDReduce(ScatterReduction r, uint8_t* out, const uint8_t* upd, const int64_t* offsets, int64_t count,
                     int64_t slice) {
  for (int64_t j = 0; j < count; ++j) {
    ScatterReduce<T>(r, reinterpret_cast<T*>(out) + offsets[j], reinterpret_cast<const T*>(upd) + j * slice, slice);
  }
}

absl::StatusOr<ir::PreparedKernel> PrepareScatterND(const ir::KernelContext& ctx) {
  const TensorView& data = ctx.input(0);
  absl::StatusOr<ScatterReduction> reduction = backends::ParseScatterReduction(ctx);
  if (!reduction.ok()) return reduction.status();
  absl::StatusOr<int64_t> depth = backends::ScatterNDIndexDepth(ctx);
  if (!depth.ok()) return depth.status();
  ScatterNDParams p;
  const DType index_dtype = ctx.input(1).dtype;
  if (index_dtype == DType::kI64) {
    p.offsets = &ScatterNDOffsets<int64_t>;
  } else if (index_dtype == DType::kI32) {
    p.offsets = &ScatterNDOffsets<int32_t>;
  } else {
    return ctx.Error(absl::StrCat("input 1 (indices) has dtype ", DTypeName(index_dtype), "; expected i32 or i64"));
  }
  p.reduction = *reduction;
  p.k = *depth;
  p.count = ctx.input(1).num_elements() / p.k;
  p.dims = data.shape;
  p.strides = ir::Strides(data.shape);
  p.slice = Product(data.shape, static_cast<size_t>(p.k), data.shape.size());
  p.es = DTypeSize(data.dtype);
  if (p.reduction != ScatterReduction::kNone) {
    absl::Status s = VisitAnyDType(ctx, data.dtype, [&](auto tag) {
      p.reduce = &ScatterNDReduce<typename decltype(tag)::type>;
      return absl::OkStatus();
    });
    if (!s.ok()) return s;
  }
  WorkspaceLayout layout;
  layout.Add<int64_t>(p.count);
  return backends::MakePrepared(std::move(p), layout.bytes());
}

absl::Status ScatterNDKernel(ir::KernelContext& ctx) {
  const ScatterNDParams* p = backends::PreparedParams<ScatterNDParams>(ctx);
  if (p == nullptr) return backends::NotPrepared(ctx, "CPU");
  const TensorView& data = ctx.input(0);
  int64_t* offsets = WorkspaceCursor(ctx.workspace()).Take<int64_t>(p->count);
  // Every index is checked before the output is touched.
  if (absl::Status s = p->offsets(ctx, *p, offsets); !s.ok()) return s;
  TensorView& y = ctx.output(0);
  if (y.data != data.data && data.byte_size() > 0) std::memmove(y.data, data.data, data.byte_size());
  const int64_t slice = p->slice;
  if (slice == 0) return absl::OkStatus();
  const size_t es = p->es;
  auto* out = static_cast<uint8_t*>(y.data);
  const auto* u = static_cast<const uint8_t*>(ctx.input(2).data);
  if (p->reduction == ScatterReduction::kNone) {
    for (int64_t j = 0; j < p->count; ++j) {
      std::memcpy(out + offsets[j] * static_cast<int64_t>(es), u + j * slice * static_cast<int64_t>(es),
                  static_cast<size_t>(slice) * es);
    }
    return absl::OkStatus();
  }
  p->reduce(p->reduction, out, u, offsets, p->count, slice);
  return absl::OkStatus();
}

// Expand and Tile: a strided view of the input (stride 0 along what
// repeats) copied densely. The prepare makes the view when it knows input 1
// (shape, repeats: a weight or folded value, as exported models have);
// otherwise the invoke makes it per run (`planned` false).
struct RepeatParams {
  bool planned = false;
  std::vector<int64_t> shape, strides;
};
using RepeatViewFn = absl::StatusOr<RepeatParams> (*)(const ir::KernelContext& ctx);

absl::StatusOr<RepeatParams> ExpandRepeatView(const ir::KernelContext& ctx) {
  absl::StatusOr<std::vector<int64_t>> shape = ReadHostInts(ctx, 1, "shape");
  if (!shape.ok()) return shape.status();
  absl::StatusOr<backends::ExpandView> view = backends::ExpandParams(ctx, *shape);
  if (!view.ok()) return view.status();
  return RepeatParams{true, std::move(view->shape), std::move(view->strides)};
}

absl::StatusOr<RepeatParams> TileRepeatView(const ir::KernelContext& ctx) {
  const TensorView& x = ctx.input(0);
  absl::StatusOr<std::vector<int64_t>> repeats = ReadHostInts(ctx, 1, "repeats");
  if (!repeats.ok()) return repeats.status();
  absl::StatusOr<std::vector<int64_t>> out_shape = backends::TileOutputShape(ctx, *repeats);
  if (!out_shape.ok()) return out_shape.status();
  RepeatParams p;
  p.planned = true;
  if (ir::NumElements(*out_shape) == 0) {  // nothing to copy
    p.shape = {0};
    p.strides = {0};
    return p;
  }
  const std::vector<int64_t> in_strides = ir::Strides(x.shape);
  for (size_t d = 0; d < x.shape.size(); ++d) {
    // Output index rep * dim + i reads input index i: a view of
    // [r0, d0, r1, d1, ...] with stride 0 along each repeat.
    p.shape.insert(p.shape.end(), {(*repeats)[d], x.shape[d]});
    p.strides.insert(p.strides.end(), {0, in_strides[d]});
  }
  return p;
}

template <RepeatViewFn kView>
absl::StatusOr<ir::PreparedKernel> PrepareRepeat(const ir::KernelContext& ctx) {
  if (!ValuesKnown(ctx, 1)) return backends::MakePrepared(RepeatParams{});
  absl::StatusOr<RepeatParams> p = kView(ctx);
  if (!p.ok()) return p.status();
  return backends::MakePrepared(*std::move(p));
}

void RunRepeat(const ir::KernelContext& ctx, const RepeatParams& p) {
  if (ir::NumElements(p.shape) == 0) return;  // (a scalar's empty shape is one element)
  const TensorView& x = ctx.input(0);
  StridedCopy(IntraOpThreadsOf(ctx), DTypeSize(x.dtype), p.shape, x.data, p.strides, ctx.output(0).data);
}

template <RepeatViewFn kView>
absl::Status RepeatKernel(ir::KernelContext& ctx) {
  return backends::InvokePlannedOrPerRun<RepeatParams>(
      ctx, "CPU", [](const ir::KernelContext& c, const RepeatParams&) { return kView(c); },
      [&](const RepeatParams& p) { RunRepeat(ctx, p); });
}

// Pad: the input index each output index of one dim reads, or -1 for the
// constant. Indices outside the input repeat periodically for reflect
// (period 2 * (n - 1), as numpy) and wrap (period n).
std::vector<int64_t> PadSourceIndices(int64_t in, int64_t out, int64_t begin, absl::string_view mode) {
  std::vector<int64_t> src(static_cast<size_t>(out));
  for (int64_t o = 0; o < out; ++o) {
    int64_t i = o - begin;
    if (i < 0 || i >= in) {
      if (mode == "constant") {
        i = -1;
      } else if (mode == "edge") {
        i = std::clamp<int64_t>(i, 0, in - 1);
      } else if (mode == "wrap") {
        i = ((i % in) + in) % in;
      } else if (in == 1) {
        i = 0;
      } else {
        const int64_t period = 2 * (in - 1);
        const int64_t m = ((i % period) + period) % period;
        i = m < in ? m : period - m;
      }
    }
    src[o] = i;
  }
  return src;
}

// Pad: per output dim the input index each output index reads (or -1 for
// the constant), the input strides and the constant from the attribute,
// made once when the plan knows the pads and axes (inputs 1 and 3: weights
// or folded values), per run otherwise (`planned` false). A constant_value
// input is read per run.
struct PadParams {
  bool planned = false;
  size_t es = 0;
  std::vector<int64_t> out_shape, strides;
  std::vector<std::vector<int64_t>> src;  // per dim
  alignas(StringRef) uint8_t value[kMaxElementBytes] = {};  // the attribute's, else zero bytes
};

absl::StatusOr<PadParams> MakePadParams(const ir::KernelContext& ctx) {
  const TensorView& x = ctx.input(0);
  const std::string mode = ctx.attrs().GetString("mode", "constant");
  if (mode != "constant" && mode != "reflect" && mode != "edge" && mode != "wrap") {
    return ctx.Error(absl::StrCat("attribute mode is '", mode, "'"));
  }
  absl::StatusOr<backends::PadPlan> plan = backends::PadParams(ctx, ReadIntReader(ctx), mode);
  if (!plan.ok()) return plan.status();
  const int64_t rank = static_cast<int64_t>(x.shape.size());
  PadParams p;
  p.planned = true;
  p.es = DTypeSize(x.dtype);
  // One element of any dtype; zero bytes are 0, false or the empty string
  // (ONNX's default pad value for strings).
  if (p.es == 0 || p.es > sizeof(p.value)) return ctx.Error(absl::StrCat("unsupported dtype ", DTypeName(x.dtype)));
  if (absl::Status s = backends::CheckPadValue(ctx); !s.ok()) return s;
  if (!ctx.has_input(2) && ctx.attrs().Has("value")) {
    if (x.dtype == DType::kString) {
      return ctx.Error("attribute value (a number) cannot pad string data; give constant_value as input 2");
    }
    const double v = ctx.attrs().GetFloat("value", 0.0);
    absl::Status s = VisitAnyDType(ctx, x.dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T t = ConvertElement<T>(v);
      std::memcpy(p.value, &t, sizeof(T));
      return absl::OkStatus();
    });
    if (!s.ok()) return s;
  }
  p.out_shape = std::move(plan->out_shape);
  for (int64_t d = 0; d < rank; ++d) {
    p.src.push_back(PadSourceIndices(x.shape[d], p.out_shape[d], plan->amounts.begin[d], mode));
  }
  p.strides = ir::Strides(x.shape);
  return p;
}

void RunPad(const ir::KernelContext& ctx, const PadParams& p) {
  const TensorView& x = ctx.input(0);
  const size_t es = p.es;
  const uint8_t* value = p.value;
  if (ctx.has_input(2)) value = static_cast<const uint8_t*>(ctx.input(2).data);
  const int64_t rank = static_cast<int64_t>(p.out_shape.size());
  const int64_t total = ir::NumElements(p.out_shape);
  if (total == 0) return;
  auto* out = static_cast<uint8_t*>(ctx.output(0).data);
  if (rank == 0) {
    std::memcpy(out, x.data, es);
    return;
  }
  const std::vector<int64_t>& strides = p.strides;
  const auto* in = static_cast<const uint8_t*>(x.data);
  const int64_t row = p.out_shape[rank - 1];
  const std::vector<int64_t>& last = p.src[rank - 1];
  absl::InlinedVector<int64_t, 8> pos(rank - 1, 0);
  for (int64_t start = 0; start < total; start += row) {
    // The source row, or -1 when some outer index lies in the constant pad.
    int64_t base = 0;
    for (int64_t d = 0; d + 1 < rank && base >= 0; ++d) {
      const int64_t s = p.src[d][pos[d]];
      base = s < 0 ? -1 : base + s * strides[d];
    }
    uint8_t* o = out + start * static_cast<int64_t>(es);
    if (base < 0) {
      Fill(o, row, value, es);
    } else {
      for (int64_t j = 0; j < row;) {
        if (last[j] < 0) {
          std::memcpy(o + j * static_cast<int64_t>(es), value, es);
          ++j;
          continue;
        }
        int64_t run = 1;  // consecutive source elements go in one memcpy
        while (j + run < row && last[j + run] == last[j] + run) ++run;
        std::memcpy(o + j * static_cast<int64_t>(es), in + (base + last[j]) * static_cast<int64_t>(es),
                    static_cast<size_t>(run) * es);
        j += run;
      }
    }
    for (int64_t d = rank - 2; d >= 0; --d) {
      if (++pos[d] < p.out_shape[d]) break;
      pos[d] = 0;
    }
  }
}

// (Input 2, the constant, is read per run whether or not the plan knows it.)
absl::StatusOr<ir::PreparedKernel> PreparePad(const ir::KernelContext& ctx) {
  auto known = [&ctx](int i) {
    return !ctx.has_input(i) || ctx.input(i).data != nullptr || ctx.input(i).num_elements() == 0;
  };
  if (!known(1) || !known(3)) return backends::MakePrepared(PadParams{});
  absl::StatusOr<PadParams> p = MakePadParams(ctx);
  if (!p.ok()) return p.status();
  return backends::MakePrepared(*std::move(p));
}

absl::Status PadKernel(ir::KernelContext& ctx) {
  return backends::InvokePlannedOrPerRun<PadParams>(
      ctx, "CPU", [](const ir::KernelContext& c, const PadParams&) { return MakePadParams(c); },
      [&](const PadParams& p) { RunPad(ctx, p); });
}

absl::Status SizeKernel(ir::KernelContext& ctx) {
  if (absl::Status s = CheckPlannedOutput(ctx, 0, DType::kI64, {}); !s.ok()) return s;
  *ctx.output(0).as<int64_t>() = ctx.input(0).num_elements();
  return absl::OkStatus();
}

// Whether input i's values can be read at prepare: omitted, empty, or known
// to the plan (a weight, a folded value; any value outside a plan).
bool InputKnown(const ir::KernelContext& ctx, int i) {
  return !ctx.has_input(i) || ctx.input(i).data != nullptr || ctx.input(i).num_elements() == 0;
}

// Range, ConstantOfShape, Trilu and OneHot read parameter inputs (start /
// limit / delta, shape, k, depth): their params are made once when the plan
// knows those values, per run otherwise (`planned` false), the same params
// either way.

// Range: the count and the loop of the dtype; start and delta read per run.
using RangeFillFn = void (*)(const void* start, const void* delta, int64_t count, void* out);

template <typename T>
void FillRange(const void* start, const void* delta, int64_t count, void* out_data) {
  const T s = *static_cast<const T*>(start), d = *static_cast<const T*>(delta);
  T* out = static_cast<T*>(out_data);
  for (int64_t i = 0; i < count; ++i) {
    if constexpr (std::is_integral_v<T>) {
      // Every value lies between start and limit; wrapping arithmetic gets
      // there even when i * delta alone would overflow.
      out[i] = static_cast<T>(static_cast<uint64_t>(static_cast<int64_t>(s)) +
                              static_cast<uint64_t>(i) * static_cast<uint64_t>(static_cast<int64_t>(d)));
    } else {
      out[i] = static_cast<T>(static_cast<double>(s) + static_cast<double>(i) * static_cast<double>(d));
    }
  }
}

struct RangeParams {
  bool planned = false;
  int64_t count = 0;
  RangeFillFn fill = nullptr;
};

absl::StatusOr<RangeParams> MakeRangeParams(const ir::KernelContext& ctx) {
  const TensorView& start = ctx.input(0);
  if (absl::Status s = backends::CheckRangeInputs(ctx); !s.ok()) return s;
  absl::StatusOr<int64_t> count = ir::RangeCount(start, ctx.input(1), ctx.input(2));
  if (!count.ok()) return ctx.Error(count.status().message());
  if (absl::Status s = CheckPlannedOutput(ctx, 0, start.dtype, {*count}); !s.ok()) return s;
  RangeParams p;
  p.planned = true;
  p.count = *count;
  absl::Status chosen = VisitDType<float, double, int32_t, int64_t>(ctx, start.dtype, [&](auto tag) {
    p.fill = &FillRange<typename decltype(tag)::type>;
    return absl::OkStatus();
  });
  if (!chosen.ok()) return chosen;
  return p;
}

absl::StatusOr<ir::PreparedKernel> PrepareRange(const ir::KernelContext& ctx) {
  if (!InputKnown(ctx, 0) || !InputKnown(ctx, 1) || !InputKnown(ctx, 2)) {
    return backends::MakePrepared(RangeParams{});
  }
  absl::StatusOr<RangeParams> p = MakeRangeParams(ctx);
  if (!p.ok()) return p.status();
  return backends::MakePrepared(*std::move(p));
}

absl::Status RangeKernel(ir::KernelContext& ctx) {
  return backends::InvokePlannedOrPerRun<RangeParams>(
      ctx, "CPU", [](const ir::KernelContext& c, const RangeParams&) { return MakeRangeParams(c); },
      [&](const RangeParams& p) { p.fill(ctx.input(0).data, ctx.input(2).data, p.count, ctx.output(0).data); });
}

// ConstantOfShape: the dtype and the element count; the value (input 1)
// copied per run.
struct ConstantOfShapeParams {
  bool planned = false;
  DType dtype = DType::kF32;
  int64_t count = 0;
};

absl::StatusOr<ConstantOfShapeParams> MakeConstantOfShapeParams(const ir::KernelContext& ctx) {
  absl::StatusOr<std::vector<int64_t>> shape = ReadHostInts(ctx, 0, "shape");
  if (!shape.ok()) return shape.status();
  if (absl::Status s = backends::CheckNonNegativeDims(ctx, *shape, "shape (input 0)"); !s.ok()) return s;
  absl::StatusOr<DType> value_dtype = backends::ConstantOfShapeDType(ctx);
  if (!value_dtype.ok()) return value_dtype.status();
  const DType dtype = *value_dtype;
  if (DTypeSize(dtype) > kMaxElementBytes) return ctx.Error(absl::StrCat("unsupported dtype ", DTypeName(dtype)));
  if (absl::Status s = CheckPlannedOutput(ctx, 0, dtype, *shape); !s.ok()) return s;
  return ConstantOfShapeParams{true, dtype, ir::NumElements(*shape)};
}

absl::StatusOr<ir::PreparedKernel> PrepareConstantOfShape(const ir::KernelContext& ctx) {
  if (!InputKnown(ctx, 0)) return backends::MakePrepared(ConstantOfShapeParams{});
  absl::StatusOr<ConstantOfShapeParams> p = MakeConstantOfShapeParams(ctx);
  if (!p.ok()) return p.status();
  return backends::MakePrepared(*std::move(p));
}

absl::Status ConstantOfShapeKernel(ir::KernelContext& ctx) {
  return backends::InvokePlannedOrPerRun<ConstantOfShapeParams>(
      ctx, "CPU",
      [](const ir::KernelContext& c, const ConstantOfShapeParams&) { return MakeConstantOfShapeParams(c); },
      [&](const ConstantOfShapeParams& p) {
        alignas(StringRef) uint8_t value[kMaxElementBytes] = {};
        if (ctx.has_input(1)) std::memcpy(value, ctx.input(1).data, DTypeSize(p.dtype));
        Fill(ctx.output(0).data, p.count, value, DTypeSize(p.dtype));
      });
}

// Trilu: k (clamped) and the matrix geometry.
struct TriluParams {
  bool planned = false;
  bool upper = true;
  int64_t k = 0, rows = 0, cols = 0, batch = 0;
  size_t es = 0;
};

absl::StatusOr<TriluParams> MakeTriluParams(const ir::KernelContext& ctx) {
  const TensorView& x = ctx.input(0);
  const size_t rank = x.shape.size();
  absl::StatusOr<int64_t> k_given = backends::TriluK(ctx, ReadIntReader(ctx));
  if (!k_given.ok()) return k_given.status();
  TriluParams p;
  p.planned = true;
  p.upper = ctx.attrs().GetInt("upper", 1) != 0;
  if (absl::Status s = CheckPlannedOutput(ctx, 0, x.dtype, x.shape); !s.ok()) return s;
  p.rows = x.shape[rank - 2];
  p.cols = x.shape[rank - 1];
  p.batch = Product(x.shape, 0, rank - 2);
  // Beyond +-(rows + cols) every k keeps all or nothing; clamping avoids
  // overflow in i + k.
  p.k = std::clamp<int64_t>(*k_given, -(p.rows + p.cols), p.rows + p.cols);
  p.es = DTypeSize(x.dtype);
  return p;
}

void RunTrilu(const ir::KernelContext& ctx, const TriluParams& p) {
  const int64_t rows = p.rows, cols = p.cols, k = p.k;
  if (p.batch * rows * cols == 0) return;
  const size_t es = p.es;
  const size_t row_bytes = static_cast<size_t>(cols) * es;
  const auto* in = static_cast<const uint8_t*>(ctx.input(0).data);
  auto* out = static_cast<uint8_t*>(ctx.output(0).data);
  for (int64_t r = 0; r < p.batch * rows; ++r) {
    const int64_t i = r % rows;
    const uint8_t* src = in + r * static_cast<int64_t>(row_bytes);
    uint8_t* dst = out + r * static_cast<int64_t>(row_bytes);
    // upper keeps j >= i + k; lower keeps j <= i + k.
    const int64_t keep_begin = p.upper ? std::clamp<int64_t>(i + k, 0, cols) : 0;
    const int64_t keep_end = p.upper ? cols : std::clamp<int64_t>(i + k + 1, 0, cols);
    if (dst != src) {
      if (keep_end > keep_begin) {
        std::memmove(dst + keep_begin * static_cast<int64_t>(es), src + keep_begin * static_cast<int64_t>(es),
                     static_cast<size_t>(keep_end - keep_begin) * es);
      }
    }
    std::memset(dst, 0, static_cast<size_t>(std::min(keep_begin, cols)) * es);
    if (keep_end < cols) {
      std::memset(dst + std::max<int64_t>(keep_end, 0) * static_cast<int64_t>(es), 0,
                  static_cast<size_t>(cols - std::max<int64_t>(keep_end, 0)) * es);
    }
  }
}

absl::StatusOr<ir::PreparedKernel> PrepareTrilu(const ir::KernelContext& ctx) {
  if (!InputKnown(ctx, 1)) return backends::MakePrepared(TriluParams{});
  absl::StatusOr<TriluParams> p = MakeTriluParams(ctx);
  if (!p.ok()) return p.status();
  return backends::MakePrepared(*std::move(p));
}

absl::Status TriluKernel(ir::KernelContext& ctx) {
  return backends::InvokePlannedOrPerRun<TriluParams>(
      ctx, "CPU", [](const ir::KernelContext& c, const TriluParams&) { return MakeTriluParams(c); },
      [&](const TriluParams& p) { RunTrilu(ctx, p); });
}

// OneHot: depth, the output geometry and the reader of the indices' dtype;
// each index read straight from the input per run (nothing allocated).
using IndexReadFn = int64_t (*)(const void* data, int64_t i);

template <typename T>
int64_t ReadIndexAs(const void* data, int64_t i) {
  return ConvertElement<int64_t>(static_cast<const T*>(data)[i]);
}

struct OneHotParams {
  bool planned = false;
  int64_t depth = 0, inner = 1, out_elements = 0;
  IndexReadFn read = nullptr;
};

absl::StatusOr<OneHotParams> MakeOneHotParams(const ir::KernelContext& ctx) {
  const TensorView& indices = ctx.input(0);
  if (absl::Status s = backends::CheckOneHotDepthInput(ctx); !s.ok()) return s;
  absl::StatusOr<backends::OneHotPlan> plan = backends::OneHotParams(ctx, ctx.input(1));
  if (!plan.ok()) return plan.status();
  OneHotParams p;
  p.planned = true;
  absl::Status chosen = VisitDType<float, double, Half, BFloat16, int64_t, int32_t, int8_t, uint8_t>(
      ctx, indices.dtype, [&](auto tag) {
        p.read = &ReadIndexAs<typename decltype(tag)::type>;
        return absl::OkStatus();
      });
  if (!chosen.ok()) return chosen;
  p.depth = plan->depth;
  p.inner = Product(indices.shape, static_cast<size_t>(plan->axis), indices.shape.size());
  p.out_elements = ir::NumElements(plan->out_shape);
  return p;
}

void RunOneHot(const ir::KernelContext& ctx, const OneHotParams& p) {
  const TensorView& indices = ctx.input(0);
  const TensorView& values = ctx.input(2);
  const size_t es = DTypeSize(values.dtype);
  const auto* off_on = static_cast<const uint8_t*>(values.data);
  auto* out = static_cast<uint8_t*>(ctx.output(0).data);
  Fill(out, p.out_elements, off_on, es);
  const int64_t n = indices.num_elements(), depth = p.depth, inner = p.inner;
  for (int64_t i = 0; i < n; ++i) {
    int64_t v = p.read(indices.data, i);
    if (v < 0) v += depth;
    if (v < 0 || v >= depth) continue;  // out of range: all off, as ONNX says
    const int64_t outer = i / inner, in_pos = i % inner;
    CopyElement(off_on, 1, out, (outer * depth + v) * inner + in_pos, es);
  }
}

absl::StatusOr<ir::PreparedKernel> PrepareOneHot(const ir::KernelContext& ctx) {
  if (!InputKnown(ctx, 1)) return backends::MakePrepared(OneHotParams{});
  absl::StatusOr<OneHotParams> p = MakeOneHotParams(ctx);
  if (!p.ok()) return p.status();
  return backends::MakePrepared(*std::move(p));
}

absl::Status OneHotKernel(ir::KernelContext& ctx) {
  return backends::InvokePlannedOrPerRun<OneHotParams>(
      ctx, "CPU", [](const ir::KernelContext& c, const OneHotParams&) { return MakeOneHotParams(c); },
      [&](const OneHotParams& p) { RunOneHot(ctx, p); });
}

}  // namespace

absl::Status RegisterLayoutKernels(ir::OpRegistry& registry) {
  const absl::Status results[] = {
      registry.SetKernel("Flatten", ir::Backend::kCpu, ir::KernelDef{&CopyKernel, &PrepareCopy}),
      registry.SetKernel("Squeeze", ir::Backend::kCpu, ir::KernelDef{&CopyKernel, &PrepareCopy}),
      registry.SetKernel("Unsqueeze", ir::Backend::kCpu, ir::KernelDef{&CopyKernel, &PrepareCopy}),
      registry.SetKernel("Split", ir::Backend::kCpu, ir::KernelDef{&SplitKernel, &PrepareSplit}),
      registry.SetKernel("GatherElements", ir::Backend::kCpu,
                         ir::KernelDef{&GatherElementsKernel, &PrepareGatherElements}),
      registry.SetKernel("ScatterND", ir::Backend::kCpu, ir::KernelDef{&ScatterNDKernel, &PrepareScatterND}),
      registry.SetKernel("Expand", ir::Backend::kCpu,
                         ir::KernelDef{&RepeatKernel<&ExpandRepeatView>, &PrepareRepeat<&ExpandRepeatView>}),
      registry.SetKernel("Tile", ir::Backend::kCpu,
                         ir::KernelDef{&RepeatKernel<&TileRepeatView>, &PrepareRepeat<&TileRepeatView>}),
      registry.SetKernel("Pad", ir::Backend::kCpu, ir::KernelDef{&PadKernel, &PreparePad}),
      registry.SetKernel("Size", ir::Backend::kCpu, &SizeKernel),
      registry.SetKernel("Range", ir::Backend::kCpu, ir::KernelDef{&RangeKernel, &PrepareRange}),
      registry.SetKernel("ConstantOfShape", ir::Backend::kCpu,
                         ir::KernelDef{&ConstantOfShapeKernel, &PrepareConstantOfShape}),
      registry.SetKernel("Trilu", ir::Backend::kCpu, ir::KernelDef{&TriluKernel, &PrepareTrilu}),
      registry.SetKernel("OneHot", ir::Backend::kCpu, ir::KernelDef{&OneHotKernel, &PrepareOneHot}),
      registry.SetKernel("Resize", ir::Backend::kCpu, ir::KernelDef{&ResizeKernel, &PrepareResize}),
  };
  for (const absl::Status& s : results) {
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace grove::cpu
