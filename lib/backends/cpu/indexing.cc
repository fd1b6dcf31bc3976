// CPU kernels of the indexing group: ScatterElements/Scatter, GatherND,
// DepthToSpace, SpaceToDepth, EyeLike, Compress, ReverseSequence, Unique,
// Det and Einsum. Data movement copies elements as opaque bytes (one path
// for every dtype). Every index read from a tensor is checked against its
// dim before anything is written, and the planned outputs are checked
// against the shapes these inputs give (Compress and Unique allocate theirs).
// Every kernel has a prepare that parses, checks and plans once per plan
// (per run for Compress and Unique, whose output sizes are the data's); the
// invokes take their scratch from the declared workspace.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "lib/backends/common/kernel_checks.h"
#include "lib/backends/common/layout_params.h"
#include "lib/backends/common/prepared.h"
#include "lib/backends/cpu/cpu_kernels.h"
#include "lib/backends/cpu/scatter_reduce.h"
#include "lib/backends/cpu/stable_sort.h"
#include "lib/backends/cpu/strided_copy.h"
#include "lib/ir/element_types.h"
#include "lib/ir/ops/einsum_equation.h"
#include "lib/ir/ops/layout_params.h"

namespace grove::cpu {

using ir::BFloat16;
using ir::Bool8;
using ir::ComputeT;
using ir::ConvertElement;
using ir::Half;
using ir::ToCompute;
using ir::VisitAnyDType;
using ir::VisitDType;

namespace {

using backends::CheckPlannedOutput;
using backends::Product;
using backends::ReadHostInts;
using backends::ScatterReduction;
using ir::DimsString;


// An index along a dim of size `dim`, negative counting from the end;
// false when outside -dim..dim-1.
inline bool WrapIndex(int64_t* i, int64_t dim) {
  if (*i < 0) *i += dim;
  return *i >= 0 && *i < dim;
}

inline void CopyElements(const uint8_t* in, int64_t src, uint8_t* out, int64_t dst, size_t es, int64_t n = 1) {
  std::memcpy(out + dst * static_cast<int64_t>(es), in + src * static_cast<int64_t>(es),
              static_cast<size_t>(n) * es);
}

// Whether the node has output i (an omitted optional output is -1), for
// kernels that allocate their outputs.
bool WantsOutput(const ir::KernelContext& ctx, int i) {
  return i < static_cast<int>(ctx.node().outputs.size()) && ctx.node().outputs[i] >= 0;
}

template <typename Fn>
absl::Status VisitNumeric(const ir::KernelContext& ctx, DType dtype, Fn&& fn) {
  return VisitDType<float, double, Half, BFloat16, int64_t, int32_t, int8_t, uint8_t>(ctx, dtype,
                                                                                      static_cast<Fn&&>(fn));
}

// ---------------------------------------------------------------------------
// ScatterElements, Scatter.
// ---------------------------------------------------------------------------

// The checks, the output check and the reduction's loop of the dtype, made
// once; every update's data offset (and the walk's position) lives in the
// workspace, all checked before the output is touched.
using ScatterElementsReduceFn = void (*)(ScatterReduction r, uint8_t* out, const uint8_t* upd,
                                         const int64_t* offsets, int64_t count);

template <typename T>
void ReduceScatterElements(ScatterReduction r, uint8_t* out, const uint8_t* upd, const int64_t* offsets,
                           int64_t count) {
  T* o = reinterpret_cast<T*>(out);
  const T* v = reinterpret_cast<const T*>(upd);
  for (int64_t e = 0; e < count; ++e) ScatterReduce<T>(r, o + offsets[e], &v[e], 1);
}

struct ScatterElementsParams {
  int axis = 0;
  ScatterReduction reduction = ScatterReduction::kNone;
  ScatterElementsReduceFn reduce = nullptr;  // reductions other than none
  size_t es = 0;
  uint64_t pos_offset = 0;  // bytes into the workspace: rank i64 after count offsets
  std::vector<int64_t> strides, idx_shape;
};

absl::StatusOr<ir::PreparedKernel> PrepareScatterElements(const ir::KernelContext& ctx) {
  const TensorView& data = ctx.input(0);
  const TensorView& idx = ctx.input(1);
  const TensorView& upd = ctx.input(2);
  absl::StatusOr<int> axis = backends::ElementsAxis(ctx);
  if (!axis.ok()) return axis.status();
  if (upd.shape != idx.shape || upd.dtype != data.dtype) {
    return ctx.Error(absl::StrCat("updates is ", DTypeName(upd.dtype), " ", DimsString(upd.shape), "; expected ",
                                  DTypeName(data.dtype), " ", DimsString(idx.shape), " (the indices' shape)"));
  }
  absl::StatusOr<ScatterReduction> reduction = backends::ParseScatterReduction(ctx);
  if (!reduction.ok()) return reduction.status();
  if (absl::Status s = CheckPlannedOutput(ctx, 0, data.dtype, data.shape); !s.ok()) return s;
  if (idx.dtype != DType::kI64 && idx.dtype != DType::kI32) {
    return ctx.Error(absl::StrCat("input 1 (indices) has dtype ", DTypeName(idx.dtype), "; expected i32 or i64"));
  }
  ScatterElementsParams p;
  p.axis = *axis;
  p.reduction = *reduction;
  p.es = DTypeSize(data.dtype);
  p.strides = ir::Strides(data.shape);
  p.idx_shape = idx.shape;
  const int64_t count = idx.num_elements();
  if (p.reduction != ScatterReduction::kNone && count > 0) {
    absl::Status chosen = VisitAnyDType(ctx, data.dtype, [&](auto tag) {
      p.reduce = &ReduceScatterElements<typename decltype(tag)::type>;
      return absl::OkStatus();
    });
    if (!chosen.ok()) return chosen;
  }
  p.pos_offset = (static_cast<uint64_t>(count) * sizeof(int64_t) + 63) / 64 * 64;
  const uint64_t workspace = p.pos_offset + data.shape.size() * sizeof(int64_t);
  return backends::MakePrepared(std::move(p), workspace);
}

absl::Status ScatterElementsKernel(ir::KernelContext& ctx) {
  const ScatterElementsParams* p = backends::PreparedParams<ScatterElementsParams>(ctx);
  if (p == nullptr) return backends::NotPrepared(ctx, "CPU");
  const TensorView& data = ctx.input(0);
  const TensorView& idx = ctx.input(1);
  const int rank = static_cast<int>(data.shape.size());
  const int axis = p->axis;
  const bool i64 = idx.dtype == DType::kI64;
  auto index = [&](int64_t e) -> int64_t {
    return i64 ? static_cast<const int64_t*>(idx.data)[e] : static_cast<const int32_t*>(idx.data)[e];
  };
  // The data offset of every update, all checked before the output is touched.
  const std::vector<int64_t>& strides = p->strides;
  const int64_t dim = data.shape[axis];
  const int64_t count = idx.num_elements();
  auto* workspace = static_cast<uint8_t*>(ctx.workspace());
  int64_t* offsets = reinterpret_cast<int64_t*>(workspace);
  int64_t* pos = reinterpret_cast<int64_t*>(workspace + p->pos_offset);
  std::fill(pos, pos + rank, int64_t{0});
  int64_t base = 0;  // offset of `pos` with the axis coordinate left out
  for (int64_t e = 0; e < count; ++e) {
    int64_t i = index(e);
    if (!WrapIndex(&i, dim)) {
      return ctx.Error(absl::StrCat("indices element ", e, " is ", index(e), "; out of range for axis ", axis,
                                    " of the data ", DimsString(data.shape), " (expected ", -dim, "..", dim - 1,
                                    ")"));
    }
    offsets[e] = base + i * strides[axis];
    for (int d = rank - 1; d >= 0; --d) {
      const int64_t step = d == axis ? 0 : strides[d];
      base += step;
      if (++pos[d] < p->idx_shape[d]) break;
      base -= step * p->idx_shape[d];
      pos[d] = 0;
    }
  }
  TensorView& y = ctx.output(0);
  if (y.data != data.data && data.byte_size() > 0) std::memmove(y.data, data.data, data.byte_size());
  if (count == 0) return absl::OkStatus();
  auto* out = static_cast<uint8_t*>(y.data);
  const auto* u = static_cast<const uint8_t*>(ctx.input(2).data);
  if (p->reduction == ScatterReduction::kNone) {
    for (int64_t e = 0; e < count; ++e) CopyElements(u, e, out, offsets[e], p->es);
    return absl::OkStatus();
  }
  p->reduce(p->reduction, out, u, offsets, count);
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------
// GatherND.
// ---------------------------------------------------------------------------

// GatherND: the shape checks, the output check and the walk (batches,
// tuples, strides, slice), made once; the indices are read straight from
// the input per run, checked all before anything is copied.
struct GatherNDParams {
  int64_t b = 0, k = 0, batches = 0, per_batch = 0, batch_stride = 0, slice = 0;
  size_t es = 0;
  bool indices_i64 = true;
  std::vector<int64_t> dims, strides;  // the data's
};

absl::StatusOr<ir::PreparedKernel> PrepareGatherND(const ir::KernelContext& ctx) {
  const TensorView& data = ctx.input(0);
  const TensorView& idx = ctx.input(1);
  const int64_t r = static_cast<int64_t>(data.shape.size()), q = static_cast<int64_t>(idx.shape.size());
  const int64_t b = ctx.attrs().GetInt("batch_dims", 0);
  if (r == 0 || q == 0 || b < 0 || b >= std::min(r, q)) {
    return ctx.Error(absl::StrCat("data ", DimsString(data.shape), " and indices ", DimsString(idx.shape),
                                  " need rank >= 1 and more dims than batch_dims ", b));
  }
  for (int64_t d = 0; d < b; ++d) {
    if (data.shape[d] != idx.shape[d]) {
      return ctx.Error(absl::StrCat("the first ", b, " (batch_dims) dims of data ", DimsString(data.shape),
                                    " and indices ", DimsString(idx.shape), " must be equal"));
    }
  }
  const int64_t k = idx.shape.back();
  if (k < 1 || k > r - b) {
    return ctx.Error(absl::StrCat("indices ", DimsString(idx.shape), " must end in a dim of 1..", r - b,
                                  " (the data's rank less batch_dims)"));
  }
  std::vector<int64_t> out_shape(idx.shape.begin(), idx.shape.end() - 1);
  out_shape.insert(out_shape.end(), data.shape.begin() + b + k, data.shape.end());
  if (absl::Status s = CheckPlannedOutput(ctx, 0, data.dtype, out_shape); !s.ok()) return s;
  if (idx.dtype != DType::kI64 && idx.dtype != DType::kI32) {
    return ctx.Error(absl::StrCat("input 1 (indices) has dtype ", DTypeName(idx.dtype), "; expected i32 or i64"));
  }
  GatherNDParams p;
  p.b = b;
  p.k = k;
  p.batches = Product(data.shape, 0, b);
  p.per_batch = Product(idx.shape, b, q - 1);
  p.batch_stride = Product(data.shape, b, r);
  p.slice = Product(data.shape, b + k, r);
  p.es = DTypeSize(data.dtype);
  p.indices_i64 = idx.dtype == DType::kI64;
  p.dims = data.shape;
  p.strides = ir::Strides(data.shape);
  return backends::MakePrepared(std::move(p));
}

absl::Status GatherNDKernel(ir::KernelContext& ctx) {
  const GatherNDParams* p = backends::PreparedParams<GatherNDParams>(ctx);
  if (p == nullptr) return backends::NotPrepared(ctx, "CPU");
  const void* raw = ctx.input(1).data;
  auto index = [&](int64_t j) -> int64_t {
    return p->indices_i64 ? static_cast<const int64_t*>(raw)[j] : static_cast<const int32_t*>(raw)[j];
  };
  const int64_t tuples = p->batches * p->per_batch, k = p->k, b = p->b;
  // The offset of tuple t's slice in the data, or the first bad index's error.
  auto offset_of = [&](int64_t t, int64_t* off) -> absl::Status {
    *off = (t / std::max<int64_t>(p->per_batch, 1)) * p->batch_stride;
    for (int64_t d = 0; d < k; ++d) {
      int64_t i = index(t * k + d);
      const int64_t dim = p->dims[b + d];
      if (!WrapIndex(&i, dim)) {
        return ctx.Error(absl::StrCat("index ", index(t * k + d), " (tuple ", t, ", coordinate ", d,
                                      ") is out of range for dim ", b + d, " of the data ", DimsString(p->dims),
                                      " (expected ", -dim, "..", dim - 1, ")"));
      }
      *off += i * p->strides[b + d];
    }
    return absl::OkStatus();
  };
  int64_t off = 0;
  for (int64_t t = 0; t < tuples; ++t) {
    if (absl::Status s = offset_of(t, &off); !s.ok()) return s;
  }
  if (p->slice == 0) return absl::OkStatus();
  const auto* in = static_cast<const uint8_t*>(ctx.input(0).data);
  auto* out = static_cast<uint8_t*>(ctx.output(0).data);
  for (int64_t t = 0; t < tuples; ++t) {
    (void)offset_of(t, &off);  // checked above
    CopyElements(in, off, out, t * p->slice, p->es, p->slice);
  }
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------
// DepthToSpace, SpaceToDepth: one strided copy each.
// ---------------------------------------------------------------------------

absl::StatusOr<int64_t> BlockSize(const ir::KernelContext& ctx) {
  const TensorView& x = ctx.input(0);
  const int64_t b = ctx.attrs().GetInt("blocksize", 0);
  if (b < 1 || b > (int64_t{1} << 20)) return ctx.Error(absl::StrCat("attribute blocksize is ", b, "; expected >= 1"));
  if (x.shape.size() != 4) return ctx.Error(absl::StrCat("input ", DimsString(x.shape), " must be [N, C, H, W]"));
  return b;
}

// DepthToSpace, SpaceToDepth: the blocksize, mode and output checks and the
// copy's dims and strides, made once; the invoke is the strided copy.
struct SpaceDepthParams {
  bool empty = false;
  size_t es = 0;
  std::array<int64_t, 6> dims{}, strides{};
};

absl::StatusOr<ir::PreparedKernel> PrepareDepthToSpace(const ir::KernelContext& ctx) {
  const TensorView& x = ctx.input(0);
  absl::StatusOr<int64_t> block = BlockSize(ctx);
  if (!block.ok()) return block.status();
  const int64_t b = *block;
  const std::string mode = ctx.attrs().GetString("mode", "DCR");
  if (mode != "DCR" && mode != "CRD") return ctx.Error(absl::StrCat("attribute mode is '", mode, "'"));
  const int64_t n = x.shape[0], c = x.shape[1], h = x.shape[2], w = x.shape[3];
  if (c % (b * b) != 0) {
    return ctx.Error(absl::StrCat("input ", DimsString(x.shape), ": channels must divide by ", b * b,
                                  " (blocksize squared)"));
  }
  const int64_t oc = c / (b * b);
  if (absl::Status s = CheckPlannedOutput(ctx, 0, x.dtype, {n, oc, h * b, w * b}); !s.ok()) return s;
  SpaceDepthParams p;
  p.empty = x.num_elements() == 0;
  p.es = DTypeSize(x.dtype);
  const int64_t hw = h * w;
  // Output y[n, c', h*b + i, w*b + j] walked as [n, c', h, i, w, j].
  p.dims = {n, oc, h, b, w, b};
  if (mode == "DCR") {
    p.strides = {c * hw, hw, w, b * oc * hw, 1, oc * hw};  // x[n, i*b*C' + j*C' + c', h, w]
  } else {
    p.strides = {c * hw, b * b * hw, w, b * hw, 1, hw};  // x[n, c'*b*b + i*b + j, h, w]
  }
  return backends::MakePrepared(p);
}

absl::StatusOr<ir::PreparedKernel> PrepareSpaceToDepth(const ir::KernelContext& ctx) {
  const TensorView& x = ctx.input(0);
  absl::StatusOr<int64_t> block = BlockSize(ctx);
  if (!block.ok()) return block.status();
  const int64_t b = *block;
  const int64_t n = x.shape[0], c = x.shape[1], h = x.shape[2], w = x.shape[3];
  if (h % b != 0 || w % b != 0) {
    return ctx.Error(absl::StrCat("input ", DimsString(x.shape), ": height and width must divide by the blocksize ",
                                  b));
  }
  if (absl::Status s = CheckPlannedOutput(ctx, 0, x.dtype, {n, c * b * b, h / b, w / b}); !s.ok()) return s;
  SpaceDepthParams p;
  p.empty = x.num_elements() == 0;
  p.es = DTypeSize(x.dtype);
  // Output y[n, (i*b + j)*C + c, h', w'] = x[n, c, h'*b + i, w'*b + j].
  p.dims = {n, b, b, c, h / b, w / b};
  p.strides = {c * h * w, w, 1, h * w, b * w, b};
  return backends::MakePrepared(p);
}

absl::Status SpaceDepthKernel(ir::KernelContext& ctx) {
  const SpaceDepthParams* p = backends::PreparedParams<SpaceDepthParams>(ctx);
  if (p == nullptr) return backends::NotPrepared(ctx, "CPU");
  if (!p->empty) StridedCopy(p->es, p->dims, ctx.input(0).data, p->strides, ctx.output(0).data);
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------
// EyeLike.
// ---------------------------------------------------------------------------

// EyeLike: the dtype, the output check, k and the loop of the dtype, made
// once; the invoke zeroes the output and writes the diagonal.
template <typename T>
void WriteDiagonal(void* data, int64_t rows, int64_t cols, int64_t k) {
  const T one = ConvertElement<T>(1.0);
  T* out = static_cast<T*>(data);
  for (int64_t r = std::max<int64_t>(0, -k); r < rows && r + k < cols; ++r) out[r * cols + r + k] = one;
}

struct EyeLikeParams {
  int64_t rows = 0, cols = 0, k = 0;
  void (*diagonal)(void* data, int64_t rows, int64_t cols, int64_t k) = nullptr;  // null: no diagonal
};

absl::StatusOr<ir::PreparedKernel> PrepareEyeLike(const ir::KernelContext& ctx) {
  const TensorView& x = ctx.input(0);
  if (x.shape.size() != 2) return ctx.Error(absl::StrCat("input ", DimsString(x.shape), " must be 2-D"));
  const DType dtype =
      ctx.attrs().Has("dtype") ? static_cast<DType>(ctx.attrs().GetInt("dtype", 0)) : x.dtype;
  if (DTypeSize(dtype) == 0) return ctx.Error("attribute dtype is not a grove dtype");
  if (absl::Status s = CheckPlannedOutput(ctx, 0, dtype, x.shape); !s.ok()) return s;
  EyeLikeParams p;
  p.rows = x.shape[0];
  p.cols = x.shape[1];
  p.k = ctx.attrs().GetInt("k", 0);
  if (p.k < p.cols && p.k > -p.rows) {
    absl::Status chosen = VisitAnyDType(ctx, dtype, [&](auto tag) {
      p.diagonal = &WriteDiagonal<typename decltype(tag)::type>;
      return absl::OkStatus();
    });
    if (!chosen.ok()) return chosen;
  }
  return backends::MakePrepared(p);
}

absl::Status EyeLikeKernel(ir::KernelContext& ctx) {
  const EyeLikeParams* p = backends::PreparedParams<EyeLikeParams>(ctx);
  if (p == nullptr) return backends::NotPrepared(ctx, "CPU");
  TensorView& y = ctx.output(0);
  if (y.byte_size() > 0) std::memset(y.data, 0, y.byte_size());
  if (p->diagonal != nullptr) p->diagonal(y.data, p->rows, p->cols, p->k);
  return absl::OkStatus();
}

// x viewed as [outer, dim, inner] around the optional `axis` attribute;
// without it every element is a slice (axis -1, dim = all elements).
struct AxisSlices {
  int axis = -1;
  int64_t outer = 1, dim = 0, inner = 1;
};
absl::StatusOr<AxisSlices> SlicesAlongAxis(const ir::KernelContext& ctx, const TensorView& x,
                                           absl::string_view name) {
  AxisSlices v;
  v.dim = x.num_elements();
  if (!ctx.attrs().Has("axis")) return v;
  const int rank = static_cast<int>(x.shape.size());
  if (rank == 0) return ctx.Error(absl::StrCat(name, " is a scalar; attribute axis needs rank >= 1"));
  absl::StatusOr<int> a = ir::NormalizeAxis(ctx.attrs().GetInt("axis", 0), rank);
  if (!a.ok()) return ctx.Error(absl::StrCat("attribute axis: ", a.status().message()));
  v.axis = *a;
  v.outer = Product(x.shape, 0, v.axis);
  v.dim = x.shape[v.axis];
  v.inner = Product(x.shape, v.axis + 1, rank);
  return v;
}

// ---------------------------------------------------------------------------
// Compress.
// ---------------------------------------------------------------------------

// Compress: the condition's and the axis' checks and the [outer, dim,
// inner] walk, made once; the kept positions (at most min(condition, dim))
// live in the workspace. The invoke reads the condition, checks every kept
// position and allocates the output (its size is the data's), passing it
// its shape.
struct CompressParams {
  int axis = -1;
  int64_t outer = 1, dim = 0, inner = 1, len = 0;
  size_t es = 0;
};

absl::StatusOr<ir::PreparedKernel> PrepareCompress(const ir::KernelContext& ctx) {
  const TensorView& x = ctx.input(0);
  const TensorView& cond = ctx.input(1);
  if (cond.dtype != DType::kBool || cond.shape.size() != 1) {
    return ctx.Error(absl::StrCat("condition is ", DTypeName(cond.dtype), " ", DimsString(cond.shape),
                                  "; expected a 1-D bool tensor"));
  }
  absl::StatusOr<AxisSlices> slices = SlicesAlongAxis(ctx, x, "input");
  if (!slices.ok()) return slices.status();
  CompressParams p;
  p.axis = slices->axis;
  p.outer = slices->outer;
  p.dim = slices->dim;
  p.inner = slices->inner;
  p.len = cond.shape[0];
  p.es = DTypeSize(x.dtype);
  const uint64_t kept_bytes = static_cast<uint64_t>(std::min(p.len, p.dim)) * sizeof(int64_t);
  return backends::MakePrepared(p, kept_bytes);
}

absl::Status CompressKernel(ir::KernelContext& ctx) {
  const CompressParams* p = backends::PreparedParams<CompressParams>(ctx);
  if (p == nullptr) return backends::NotPrepared(ctx, "CPU");
  const TensorView& x = ctx.input(0);
  const int axis = p->axis;
  const int64_t outer = p->outer, dim = p->dim, inner = p->inner;
  const auto* c = static_cast<const uint8_t*>(ctx.input(1).data);
  int64_t* kept = static_cast<int64_t*>(ctx.workspace());
  int64_t m = 0;
  for (int64_t j = 0; j < p->len; ++j) {
    if (c[j] == 0) continue;
    if (j >= dim) {
      return ctx.Error(absl::StrCat("condition ", DimsString(ctx.input(1).shape), " selects entry ", j,
                                    " but the input has only ", dim,
                                    axis < 0 ? " elements" : absl::StrCat(" along axis ", axis)));
    }
    kept[m++] = j;
  }
  std::vector<int64_t> out_shape = axis >= 0 ? x.shape : std::vector<int64_t>{dim};
  out_shape[axis < 0 ? 0 : axis] = m;
  absl::StatusOr<TensorView*> y = ctx.AllocateOutput(0, x.dtype, std::move(out_shape));
  if (!y.ok()) return y.status();
  if (inner == 0 || m == 0) return absl::OkStatus();
  const size_t es = p->es;
  const auto* in = static_cast<const uint8_t*>(x.data);
  auto* out = static_cast<uint8_t*>((*y)->data);
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t j = 0; j < m; ++j) CopyElements(in, (o * dim + kept[j]) * inner, out, (o * m + j) * inner, es, inner);
  }
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------
// ReverseSequence.
// ---------------------------------------------------------------------------

// ReverseSequence: the axes, sequence_lens' dtype and shape, the output
// check and the strides, made once; the invoke reads every length straight
// from the input and checks them all before it copies.
struct ReverseSequenceParams {
  int64_t batch_axis = 1, time_axis = 0, batch = 0, time = 0, inner = 0, bs = 0, ts = 0;
  size_t es = 0;
  bool lens_i64 = true, empty = false;
};

absl::StatusOr<ir::PreparedKernel> PrepareReverseSequence(const ir::KernelContext& ctx) {
  const TensorView& x = ctx.input(0);
  const TensorView& lens = ctx.input(1);
  const int rank = static_cast<int>(x.shape.size());
  ReverseSequenceParams p;
  p.batch_axis = ctx.attrs().GetInt("batch_axis", 1);
  p.time_axis = ctx.attrs().GetInt("time_axis", 0);
  if (rank < 2 || (p.batch_axis != 0 && p.batch_axis != 1) || (p.time_axis != 0 && p.time_axis != 1) ||
      p.batch_axis == p.time_axis) {
    return ctx.Error(absl::StrCat("input ", DimsString(x.shape), " with batch_axis ", p.batch_axis, " and time_axis ",
                                  p.time_axis, ": expected rank >= 2 and axes 0 and 1 in either order"));
  }
  p.batch = x.shape[p.batch_axis];
  p.time = x.shape[p.time_axis];
  if (lens.dtype != DType::kI64 && lens.dtype != DType::kI32) {
    return ctx.Error(
        absl::StrCat("input 1 (sequence_lens) has dtype ", DTypeName(lens.dtype), "; expected i32 or i64"));
  }
  p.lens_i64 = lens.dtype == DType::kI64;
  if (lens.shape != std::vector<int64_t>{p.batch}) {
    return ctx.Error(absl::StrCat("sequence_lens is ", DimsString(lens.shape), "; expected [", p.batch,
                                  "] (the input's batch dim ", p.batch_axis, ")"));
  }
  if (absl::Status s = CheckPlannedOutput(ctx, 0, x.dtype, x.shape); !s.ok()) return s;
  p.inner = Product(x.shape, 2, rank);
  p.empty = p.inner == 0 || x.num_elements() == 0;
  const std::vector<int64_t> strides = ir::Strides(x.shape);
  p.bs = strides[p.batch_axis];
  p.ts = strides[p.time_axis];
  p.es = DTypeSize(x.dtype);
  return backends::MakePrepared(p);
}

absl::Status ReverseSequenceKernel(ir::KernelContext& ctx) {
  const ReverseSequenceParams* p = backends::PreparedParams<ReverseSequenceParams>(ctx);
  if (p == nullptr) return backends::NotPrepared(ctx, "CPU");
  const void* raw = ctx.input(1).data;
  auto len_of = [&](int64_t b) -> int64_t {
    return p->lens_i64 ? static_cast<const int64_t*>(raw)[b] : static_cast<const int32_t*>(raw)[b];
  };
  const int64_t batch = p->batch, time = p->time;
  for (int64_t i = 0; i < batch; ++i) {
    if (len_of(i) < 0 || len_of(i) > time) {
      return ctx.Error(absl::StrCat("sequence_lens[", i, "] is ", len_of(i), "; expected 0..", time,
                                    " (the input's time dim ", p->time_axis, ")"));
    }
  }
  if (p->empty) return absl::OkStatus();
  const auto* in = static_cast<const uint8_t*>(ctx.input(0).data);
  auto* out = static_cast<uint8_t*>(ctx.output(0).data);
  if (out == in) {
    return ctx.Error("the output shares the input's buffer; ReverseSequence cannot run in place");
  }
  const int64_t bs = p->bs, ts = p->ts;
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t len = len_of(b);
    for (int64_t t = 0; t < time; ++t) {
      const int64_t src = t < len ? len - 1 - t : t;
      CopyElements(in, b * bs + src * ts, out, b * bs + t * ts, p->es, p->inner);
    }
  }
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------
// Unique.
// ---------------------------------------------------------------------------

// a < b with NaN after every number and equal to NaN (numpy's order).
template <typename C>
inline int Compare(C a, C b) {
  if constexpr (std::is_floating_point_v<C>) {
    const bool an = std::isnan(a), bn = std::isnan(b);
    if (an || bn) return an == bn ? 0 : (an ? 1 : -1);
  }
  return a < b ? -1 : (b < a ? 1 : 0);
}
// Strings by their bytes, as unsigned chars (numpy's order of UTF-8 text).
inline int Compare(const StringRef& a, const StringRef& b) {
  const int c = a.view().compare(b.view());
  return c < 0 ? -1 : (c > 0 ? 1 : 0);
}

// Unique: the attributes, the [outer, dim, inner] view and the comparison
// of the dtype, made once; the sort and the lists live in the workspace
// (8 * dim i64). The invoke allocates the outputs (their size is the data's),
// passing each its shape.
struct UniqueWorkspace {
  int64_t *order, *buffer, *group, *firsts, *position, *first, *counts, *inverse;
};

struct UniqueParams {
  int axis = -1;
  int64_t outer = 1, dim = 0, inner = 1;
  bool sorted = true;
  size_t es = 0;
  // Sorts the slices into w.order, sets w.group and w.firsts; the count of
  // groups.
  int64_t (*group)(const UniqueParams& p, const void* x, const UniqueWorkspace& w) = nullptr;
};

template <typename T>
int64_t GroupSlices(const UniqueParams& p, const void* x, const UniqueWorkspace& w) {
  const T* data = static_cast<const T*>(x);
  const int64_t outer = p.outer, dim = p.dim, inner = p.inner;
  // cmp(a, b): slices a and b compared element by element (o, then i).
  auto cmp = [&](int64_t a, int64_t b) {
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t i = 0; i < inner; ++i) {
        const int c = Compare(ToCompute(data[(o * dim + a) * inner + i]), ToCompute(data[(o * dim + b) * inner + i]));
        if (c != 0) return c;
      }
    }
    return 0;
  };
  std::iota(w.order, w.order + dim, int64_t{0});
  StableSortIndices(w.order, w.buffer, dim, [&](int64_t a, int64_t b) { return cmp(a, b) < 0; });
  int64_t n = 0;
  for (int64_t j = 0; j < dim; ++j) {
    if (j == 0 || cmp(w.order[j - 1], w.order[j]) != 0) w.firsts[n++] = w.order[j];
    w.group[w.order[j]] = n - 1;
  }
  return n;
}

absl::StatusOr<ir::PreparedKernel> PrepareUnique(const ir::KernelContext& ctx) {
  const TensorView& x = ctx.input(0);
  const int64_t sorted = ctx.attrs().GetInt("sorted", 1);
  if (sorted != 0 && sorted != 1) return ctx.Error(absl::StrCat("attribute sorted is ", sorted, "; expected 0 or 1"));
  absl::StatusOr<AxisSlices> slices = SlicesAlongAxis(ctx, x, "X");
  if (!slices.ok()) return slices.status();
  UniqueParams p;
  p.axis = slices->axis;
  p.outer = slices->outer;
  p.dim = slices->dim;
  p.inner = slices->inner;
  p.sorted = sorted == 1;
  p.es = DTypeSize(x.dtype);
  absl::Status chosen = VisitDType<float, double, Half, BFloat16, int64_t, int32_t, int16_t, int8_t, uint64_t, uint32_t,
                                   uint16_t, uint8_t, Bool8, StringRef>(ctx, x.dtype, [&](auto tag) {
    p.group = &GroupSlices<typename decltype(tag)::type>;
    return absl::OkStatus();
  });
  if (!chosen.ok()) return chosen;
  return backends::MakePrepared(p, 8 * static_cast<uint64_t>(p.dim) * sizeof(int64_t));
}

absl::Status UniqueKernel(ir::KernelContext& ctx) {
  const UniqueParams* p = backends::PreparedParams<UniqueParams>(ctx);
  if (p == nullptr) return backends::NotPrepared(ctx, "CPU");
  const TensorView& x = ctx.input(0);
  const int64_t outer = p->outer, dim = p->dim, inner = p->inner;
  int64_t* ws = static_cast<int64_t*>(ctx.workspace());
  const UniqueWorkspace w{ws, ws + dim, ws + 2 * dim, ws + 3 * dim, ws + 4 * dim, ws + 5 * dim, ws + 6 * dim,
                          ws + 7 * dim};
  const int64_t n = p->group(*p, x.data, w);
  // Output position of each group: sorted order, or order of first occurrence.
  std::iota(w.position, w.position + n, int64_t{0});
  if (!p->sorted) {
    int64_t* by_first = w.buffer;
    std::iota(by_first, by_first + n, int64_t{0});
    std::sort(by_first, by_first + n, [&](int64_t a, int64_t b) { return w.firsts[a] < w.firsts[b]; });
    for (int64_t j = 0; j < n; ++j) w.position[by_first[j]] = j;
  }
  std::fill(w.counts, w.counts + n, int64_t{0});
  for (int64_t g = 0; g < n; ++g) w.first[w.position[g]] = w.firsts[g];
  for (int64_t j = 0; j < dim; ++j) {
    w.inverse[j] = w.position[w.group[j]];
    ++w.counts[w.inverse[j]];
  }
  if (WantsOutput(ctx, 0)) {
    std::vector<int64_t> y_shape = p->axis >= 0 ? x.shape : std::vector<int64_t>{n};
    if (p->axis >= 0) y_shape[p->axis] = n;
    absl::StatusOr<TensorView*> y = ctx.AllocateOutput(0, x.dtype, std::move(y_shape));
    if (!y.ok()) return y.status();
    const size_t es = p->es;
    const auto* in = static_cast<const uint8_t*>(x.data);
    auto* out = static_cast<uint8_t*>((*y)->data);
    for (int64_t o = 0; o < outer && inner > 0; ++o) {
      for (int64_t j = 0; j < n; ++j) {
        CopyElements(in, (o * dim + w.first[j]) * inner, out, (o * n + j) * inner, es, inner);
      }
    }
  }
  const std::pair<const int64_t*, int64_t> lists[] = {{w.first, n}, {w.inverse, dim}, {w.counts, n}};
  for (int i = 1; i < 4; ++i) {
    if (!WantsOutput(ctx, i)) continue;
    const auto [v, size] = lists[i - 1];
    absl::StatusOr<TensorView*> t = ctx.AllocateOutput(i, DType::kI64, {size});
    if (!t.ok()) return t.status();
    if (size > 0) std::memcpy((*t)->data, v, static_cast<size_t>(size) * sizeof(int64_t));
  }
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------
// Det: LU with partial pivoting in double, one matrix at a time.
// ---------------------------------------------------------------------------

double Determinant(double* a, int64_t m) {
  double det = 1;
  for (int64_t c = 0; c < m; ++c) {
    int64_t pivot = c;
    for (int64_t r = c + 1; r < m; ++r) {
      if (std::fabs(a[r * m + c]) > std::fabs(a[pivot * m + c])) pivot = r;
    }
    if (a[pivot * m + c] == 0) return 0;
    if (pivot != c) {
      for (int64_t j = 0; j < m; ++j) std::swap(a[c * m + j], a[pivot * m + j]);
      det = -det;
    }
    const double d = a[c * m + c];
    det *= d;
    for (int64_t r = c + 1; r < m; ++r) {
      const double f = a[r * m + c] / d;
      if (f == 0) continue;
      for (int64_t j = c + 1; j < m; ++j) a[r * m + j] -= f * a[c * m + j];
    }
  }
  return det;
}

// Det: the shape and output checks and the loop of the dtype, made once;
// one matrix at a time in the workspace (m * m doubles).
struct DetParams {
  int64_t m = 0, count = 0;
  void (*run)(const void* in, void* out, int64_t m, int64_t count, double* a) = nullptr;
};

template <typename T>
void RunDet(const void* in_data, void* out_data, int64_t m, int64_t count, double* a) {
  const T* in = static_cast<const T*>(in_data);
  T* out = static_cast<T*>(out_data);
  for (int64_t b = 0; b < count; ++b) {
    for (int64_t e = 0; e < m * m; ++e) a[e] = static_cast<double>(ToCompute(in[b * m * m + e]));
    out[b] = ConvertElement<T>(Determinant(a, m));
  }
}

absl::StatusOr<ir::PreparedKernel> PrepareDet(const ir::KernelContext& ctx) {
  const TensorView& x = ctx.input(0);
  const size_t rank = x.shape.size();
  if (rank < 2 || x.shape[rank - 1] != x.shape[rank - 2]) {
    return ctx.Error(absl::StrCat("X ", DimsString(x.shape), " must be [..., M, M] (square matrices)"));
  }
  const std::vector<int64_t> out_shape(x.shape.begin(), x.shape.end() - 2);
  if (absl::Status s = CheckPlannedOutput(ctx, 0, x.dtype, out_shape); !s.ok()) return s;
  DetParams p;
  p.m = x.shape[rank - 1];
  p.count = ir::NumElements(out_shape);
  absl::Status chosen = VisitDType<float, double, Half, BFloat16>(ctx, x.dtype, [&](auto tag) {
    p.run = &RunDet<typename decltype(tag)::type>;
    return absl::OkStatus();
  });
  if (!chosen.ok()) return chosen;
  return backends::MakePrepared(p, static_cast<uint64_t>(p.m * p.m) * sizeof(double));
}

absl::Status DetKernel(ir::KernelContext& ctx) {
  const DetParams* p = backends::PreparedParams<DetParams>(ctx);
  if (p == nullptr) return backends::NotPrepared(ctx, "CPU");
  p->run(ctx.input(0).data, ctx.output(0).data, p->m, p->count, static_cast<double*>(ctx.workspace()));
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------
// Einsum: a naive loop over every label, output labels outside, summed
// labels inside; each input's offset moves by the sum of its strides along
// the dims of a label (so a repeated label walks the diagonal).
// ---------------------------------------------------------------------------

// What the prepare makes of the equation and the shapes: the loop labels'
// extents and every input's stride per loop label; the walk's position and
// offsets (and the inputs' pointers) live in the workspace.
struct EinsumParams {
  int n = 0;
  size_t num_out = 0, num_loop = 0;
  int64_t total_out = 0, total_sum = 1;
  std::vector<int64_t> extent;
  std::vector<int64_t> stride;  // [n][num_loop]: how far input i's offset moves when loop label j steps
  uint64_t off_offset = 0, in_offset = 0;  // bytes into the workspace: off (n i64), in (n pointers)
  void (*run)(const ir::KernelContext& ctx, const EinsumParams& p) = nullptr;
};

template <typename T>
void RunEinsum(const ir::KernelContext& ctx, const EinsumParams& p) {
  using C = ComputeT<T>;
  // Floats sum in double; integers wrap in 64 bits.
  using Acc = std::conditional_t<std::is_floating_point_v<C>, double, uint64_t>;
  const int n = p.n;
  const size_t num_out = p.num_out, num_loop = p.num_loop;
  auto* workspace = static_cast<uint8_t*>(ctx.workspace());
  int64_t* pos = reinterpret_cast<int64_t*>(workspace);
  int64_t* off = reinterpret_cast<int64_t*>(workspace + p.off_offset);
  const T** in = reinterpret_cast<const T**>(workspace + p.in_offset);
  std::fill(pos, pos + num_loop, int64_t{0});
  std::fill(off, off + n, int64_t{0});
  const int64_t* extent = p.extent.data();
  auto stride = [&](int i, size_t j) { return p.stride[static_cast<size_t>(i) * num_loop + j]; };
  auto advance = [&](size_t lo, size_t hi) {
    for (size_t j = hi; j-- > lo;) {
      for (int i = 0; i < n; ++i) off[i] += stride(i, j);
      if (++pos[j] < extent[j]) return;
      for (int i = 0; i < n; ++i) off[i] -= stride(i, j) * extent[j];
      pos[j] = 0;
    }
  };
  for (int i = 0; i < n; ++i) in[i] = static_cast<const T*>(ctx.input(i).data);
  T* out = static_cast<T*>(ctx.output(0).data);
  for (int64_t e = 0; e < p.total_out; ++e) {
    Acc acc = 0;
    for (int64_t s = 0; s < p.total_sum; ++s) {
      Acc prod = 1;
      for (int i = 0; i < n; ++i) prod *= static_cast<Acc>(ToCompute(in[i][off[i]]));
      acc += prod;
      advance(num_out, num_loop);
    }
    if constexpr (std::is_floating_point_v<C>) {
      out[e] = ConvertElement<T>(acc);
    } else {
      out[e] = static_cast<T>(acc);
    }
    advance(0, num_out);
  }
}

absl::StatusOr<ir::PreparedKernel> PrepareEinsum(const ir::KernelContext& ctx) {
  const int n = ctx.num_inputs();
  std::vector<int> ranks;
  std::vector<std::vector<int64_t>> shapes;
  for (int i = 0; i < n; ++i) {
    if (!ctx.has_input(i)) return ctx.Error(absl::StrCat("input ", i, " is missing"));
    if (ctx.input(i).dtype != ctx.input(0).dtype) {
      return ctx.Error(absl::StrCat("input ", i, " is ", DTypeName(ctx.input(i).dtype), " but input 0 is ",
                                    DTypeName(ctx.input(0).dtype)));
    }
    ranks.push_back(static_cast<int>(ctx.input(i).shape.size()));
    shapes.push_back(ctx.input(i).shape);
  }
  absl::StatusOr<ir::EinsumTerms> terms = ir::ParseEinsum(ctx.attrs().GetString("equation", ""), ranks);
  if (!terms.ok()) return ctx.Error(terms.status().message());
  absl::StatusOr<std::vector<int64_t>> size = ir::EinsumLabelSizes(*terms, shapes);
  if (!size.ok()) return ctx.Error(size.status().message());
  std::vector<int64_t> out_shape;
  for (int l : terms->output) out_shape.push_back((*size)[l]);
  const DType dtype = ctx.input(0).dtype;
  if (absl::Status s = CheckPlannedOutput(ctx, 0, dtype, out_shape); !s.ok()) return s;
  // Loop labels: the output's, then the summed ones.
  std::vector<int> loop = terms->output;
  std::vector<bool> in_output(static_cast<size_t>(terms->num_labels()), false);
  for (int l : terms->output) in_output[l] = true;
  for (int l = 0; l < terms->num_labels(); ++l) {
    if (!in_output[l] && (*size)[l] >= 0) loop.push_back(l);
  }
  EinsumParams p;
  p.n = n;
  p.num_out = terms->output.size();
  p.num_loop = loop.size();
  p.extent.resize(p.num_loop);
  for (size_t j = 0; j < p.num_loop; ++j) p.extent[j] = (*size)[loop[j]];
  p.stride.assign(static_cast<size_t>(n) * p.num_loop, 0);
  for (int i = 0; i < n; ++i) {
    const std::vector<int64_t> s = ir::Strides(shapes[i]);
    for (size_t d = 0; d < shapes[i].size(); ++d) {
      const int l = terms->inputs[i][d];
      if (shapes[i][d] == 1 && (*size)[l] != 1) continue;  // a broadcast ellipsis dim
      const size_t j = static_cast<size_t>(std::find(loop.begin(), loop.end(), l) - loop.begin());
      p.stride[static_cast<size_t>(i) * p.num_loop + j] += s[d];
    }
  }
  p.total_out = ir::NumElements(out_shape);
  for (size_t j = p.num_out; j < p.num_loop; ++j) {
    if (__builtin_mul_overflow(p.total_sum, p.extent[j], &p.total_sum)) {
      return ctx.Error("the summed subscripts' sizes multiply past int64; too large for the CPU loop");
    }
  }
  if (p.total_out > 0) {  // (an empty output takes any dtype, as before)
    absl::Status chosen = VisitNumeric(ctx, dtype, [&](auto tag) {
      p.run = &RunEinsum<typename decltype(tag)::type>;
      return absl::OkStatus();
    });
    if (!chosen.ok()) return chosen;
  }
  p.off_offset = p.num_loop * sizeof(int64_t);
  p.in_offset = p.off_offset + static_cast<uint64_t>(n) * sizeof(int64_t);
  const uint64_t workspace = p.in_offset + static_cast<uint64_t>(n) * sizeof(const void*);
  return backends::MakePrepared(std::move(p), workspace);
}

absl::Status EinsumKernel(ir::KernelContext& ctx) {
  const EinsumParams* p = backends::PreparedParams<EinsumParams>(ctx);
  if (p == nullptr) return backends::NotPrepared(ctx, "CPU");
  if (p->total_out > 0) p->run(ctx, *p);
  return absl::OkStatus();
}

}  // namespace

absl::Status RegisterIndexingKernels(ir::OpRegistry& registry) {
  const absl::Status prepared[] = {
      registry.SetKernel("GatherND", ir::Backend::kCpu, ir::KernelDef{&GatherNDKernel, &PrepareGatherND}),
      registry.SetKernel("DepthToSpace", ir::Backend::kCpu, ir::KernelDef{&SpaceDepthKernel, &PrepareDepthToSpace}),
      registry.SetKernel("SpaceToDepth", ir::Backend::kCpu, ir::KernelDef{&SpaceDepthKernel, &PrepareSpaceToDepth}),
      registry.SetKernel("EyeLike", ir::Backend::kCpu, ir::KernelDef{&EyeLikeKernel, &PrepareEyeLike}),
      registry.SetKernel("ReverseSequence", ir::Backend::kCpu,
                         ir::KernelDef{&ReverseSequenceKernel, &PrepareReverseSequence}),
      registry.SetKernel("Det", ir::Backend::kCpu, ir::KernelDef{&DetKernel, &PrepareDet}),
      registry.SetKernel("Einsum", ir::Backend::kCpu, ir::KernelDef{&EinsumKernel, &PrepareEinsum}),
      registry.SetKernel("Unique", ir::Backend::kCpu, ir::KernelDef{&UniqueKernel, &PrepareUnique}),
      registry.SetKernel("Compress", ir::Backend::kCpu, ir::KernelDef{&CompressKernel, &PrepareCompress}),
      registry.SetKernel("ScatterElements", ir::Backend::kCpu,
                         ir::KernelDef{&ScatterElementsKernel, &PrepareScatterElements}),
      registry.SetKernel("Scatter", ir::Backend::kCpu, ir::KernelDef{&ScatterElementsKernel, &PrepareScatterElements}),
  };
  for (const absl::Status& s : prepared) {
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace grove::cpu
