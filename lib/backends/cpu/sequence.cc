// CPU kernels of the sequence and optional ops (lib/ir/ops/sequence.cc).
// Sequences and optionals are host grove::Values on every backend, so these
// are also what a CUDA plan runs for them. A kernel never writes a tensor a
// value already holds: items are shared between values (and with the caller
// of Session::RunValues), and new items are new tensors.
#include <cstring>

#include "absl/strings/str_cat.h"
#include "lib/backends/common/kernel_checks.h"
#include "lib/backends/cpu/cpu_kernels.h"
#include "lib/backends/cpu/strided_copy.h"
#include "lib/ir/value_type.h"

namespace grove::cpu {
namespace {

using ir::KernelContext;

const Value& In(const KernelContext& ctx, int i) { return ir::BoxedValue(ctx.input(i)); }
Value& Out(const KernelContext& ctx, int i) { return ir::MutableBoxedValue(ctx.output(i)); }

// A position input against a sequence of `n` items: in [-n, n - 1], or in
// [-n, n] where it may also name the end (SequenceInsert); negative counts
// from the back.
absl::StatusOr<int64_t> ReadPosition(const KernelContext& ctx, int i, int64_t n, bool end_ok) {
  absl::StatusOr<std::vector<int64_t>> p = backends::ReadHostInts(ctx, i, "position");
  if (!p.ok()) return p.status();
  if (p->size() != 1) return ctx.Error(absl::StrCat("position must hold one value, has ", p->size()));
  const int64_t pos = (*p)[0];
  const int64_t hi = end_ok ? n : n - 1;
  if (pos < -n || pos > hi) {
    return ctx.Error(absl::StrCat("position ", pos, " is outside [", -n, ", ", hi, "] for a sequence of ", n,
                                  n == 1 ? " item" : " items"));
  }
  return pos < 0 ? pos + n : pos;
}

absl::StatusOr<Tensor> CopyTensor(const KernelContext& ctx, const TensorView& view) {
  absl::StatusOr<Tensor> t = Tensor::CopyOf(view);
  if (!t.ok()) return ctx.Error(t.status().message());
  return t;
}

// The strings of a tensor output copied out of a value's item: the item owns
// their bytes, and a later step may drop it (replacing the value) while the
// output is still read, so the output's strings get bytes that last the run.
absl::Status RehomeStrings(const KernelContext& ctx, const TensorView& out) {
  if (out.dtype != DType::kString) return absl::OkStatus();
  StringRef* refs = out.as<StringRef>();
  for (int64_t k = 0; k < out.num_elements(); ++k) {
    absl::StatusOr<StringRef> s = ctx.StoreString(refs[k].view());
    if (!s.ok()) return s.status();
    refs[k] = *s;
  }
  return absl::OkStatus();
}

// Copies `view` into output i, allocated with its shape.
absl::StatusOr<TensorView*> AllocateCopy(KernelContext& ctx, int i, const TensorView& view) {
  absl::StatusOr<TensorView*> out = ctx.AllocateOutput(i, view.dtype, view.shape);
  if (!out.ok()) return out.status();
  if (view.byte_size() > 0) std::memcpy((*out)->data, view.data, view.byte_size());
  return out;
}

// Copies `view`, an item of a value, into output i: its strings rehomed.
absl::Status AllocateItemCopy(KernelContext& ctx, int i, const TensorView& view) {
  absl::StatusOr<TensorView*> out = AllocateCopy(ctx, i, view);
  if (!out.ok()) return out.status();
  return RehomeStrings(ctx, **out);
}

absl::Status SequenceEmptyKernel(KernelContext& ctx) {
  Out(ctx, 0) = Value::Sequence(ir::ElemDType(ctx.output(0).dtype));
  return absl::OkStatus();
}

absl::Status SequenceConstructKernel(KernelContext& ctx) {
  std::vector<Tensor> items;
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    absl::StatusOr<Tensor> t = CopyTensor(ctx, ctx.input(i));
    if (!t.ok()) return t.status();
    items.push_back(*std::move(t));
  }
  Out(ctx, 0) = Value::Sequence(ctx.input(0).dtype, std::move(items));
  return absl::OkStatus();
}

absl::Status SequenceInsertKernel(KernelContext& ctx) {
  const Value& seq = In(ctx, 0);
  const int64_t n = static_cast<int64_t>(seq.items().size());
  int64_t pos = n;
  if (ctx.has_input(2)) {
    absl::StatusOr<int64_t> p = ReadPosition(ctx, 2, n, /*end_ok=*/true);
    if (!p.ok()) return p.status();
    pos = *p;
  }
  absl::StatusOr<Tensor> t = CopyTensor(ctx, ctx.input(1));
  if (!t.ok()) return t.status();
  std::vector<Tensor> items = seq.items();
  items.insert(items.begin() + pos, *std::move(t));
  Out(ctx, 0) = Value::Sequence(ctx.input(1).dtype, std::move(items));
  return absl::OkStatus();
}

absl::Status SequenceEraseKernel(KernelContext& ctx) {
  const Value& seq = In(ctx, 0);
  const int64_t n = static_cast<int64_t>(seq.items().size());
  if (n == 0) return ctx.Error("erases from an empty sequence");
  int64_t pos = n - 1;
  if (ctx.has_input(1)) {
    absl::StatusOr<int64_t> p = ReadPosition(ctx, 1, n, /*end_ok=*/false);
    if (!p.ok()) return p.status();
    pos = *p;
  }
  std::vector<Tensor> items = seq.items();
  items.erase(items.begin() + pos);
  Out(ctx, 0) = Value::Sequence(seq.dtype(), std::move(items));
  return absl::OkStatus();
}

absl::Status SequenceAtKernel(KernelContext& ctx) {
  const Value& seq = In(ctx, 0);
  absl::StatusOr<int64_t> pos = ReadPosition(ctx, 1, static_cast<int64_t>(seq.items().size()), false);
  if (!pos.ok()) return pos.status();
  return AllocateItemCopy(ctx, 0, seq.items()[*pos].view());
}

absl::Status SequenceLengthKernel(KernelContext& ctx) {
  *ctx.output(0).as<int64_t>() = static_cast<int64_t>(In(ctx, 0).items().size());
  return absl::OkStatus();
}

// Items joined along `axis` (new_axis: stacked along a new axis there).
absl::Status ConcatFromSequenceKernel(KernelContext& ctx) {
  const Value& seq = In(ctx, 0);
  if (seq.items().empty()) return ctx.Error("concatenates an empty sequence");
  const bool new_axis = ctx.attrs().GetInt("new_axis", 0) != 0;
  const std::vector<int64_t>& first = seq.items()[0].shape();
  const int rank = static_cast<int>(first.size()) + (new_axis ? 1 : 0);
  absl::StatusOr<int> axis = ir::NormalizeAxis(ctx.attrs().GetInt("axis", 0), rank);
  if (!axis.ok()) return ctx.Error(axis.status().message());
  // Each item seen as [outer, length, inner] around the axis.
  std::vector<int64_t> out_shape = first;
  if (new_axis) out_shape.insert(out_shape.begin() + *axis, 0);
  int64_t total = 0;
  for (size_t t = 0; t < seq.items().size(); ++t) {
    const std::vector<int64_t>& s = seq.items()[t].shape();
    bool fits = s.size() == first.size();
    for (size_t k = 0; fits && k < s.size(); ++k) {
      fits = s[k] == first[k] || (!new_axis && static_cast<int>(k) == *axis);
    }
    if (!fits) {
      return ctx.Error(absl::StrCat("item ", t, " has shape ", ir::ShapeToString(ir::FromConcrete(s)), " but item 0 has ",
                                    ir::ShapeToString(ir::FromConcrete(first)),
                                    new_axis ? "; stacked items must agree" : "; items must agree off the axis"));
    }
    total += new_axis ? 1 : s[*axis];
  }
  out_shape[*axis] = total;
  absl::StatusOr<TensorView*> out = ctx.AllocateOutput(0, seq.dtype(), out_shape);
  if (!out.ok()) return out.status();
  const AxisSplit v = SplitAtAxis(out_shape, *axis);
  int64_t at = 0;  // along the axis
  for (const Tensor& t : seq.items()) {
    const int64_t len = new_axis ? 1 : t.shape()[*axis];
    CopyAlongAxis(DTypeSize(seq.dtype()), v.outer, v.inner, t.data(), len, 0, (*out)->data, total, at, len);
    at += len;
  }
  return RehomeStrings(ctx, **out);
}

absl::Status SplitToSequenceKernel(KernelContext& ctx) {
  const TensorView& x = ctx.input(0);
  const int rank = static_cast<int>(x.shape.size());
  if (rank == 0) return ctx.Error("input is a scalar; SplitToSequence splits along a dim (rank >= 1)");
  absl::StatusOr<int> axis = ir::NormalizeAxis(ctx.attrs().GetInt("axis", 0), rank);
  if (!axis.ok()) return ctx.Error(axis.status().message());
  const int64_t dim = x.shape[*axis];
  std::vector<int64_t> lengths;
  bool squeeze = false;
  if (!ctx.has_input(1)) {
    lengths.assign(dim, 1);
    squeeze = ctx.attrs().GetInt("keepdims", 1) == 0;
  } else {
    absl::StatusOr<std::vector<int64_t>> split = backends::ReadHostInts(ctx, 1, "split");
    if (!split.ok()) return split.status();
    if (ctx.input(1).shape.empty()) {
      const int64_t each = (*split)[0];
      if (each <= 0) return ctx.Error(absl::StrCat("split ", each, " must be positive"));
      for (int64_t at = 0; at < dim; at += each) lengths.push_back(std::min(each, dim - at));
    } else {
      int64_t sum = 0;
      for (int64_t l : *split) {
        if (l < 0) return ctx.Error(absl::StrCat("split has a negative length ", l));
        if (l > dim - sum) return ctx.Error(absl::StrCat("split lengths sum to more than axis ", *axis, "'s ", dim));
        sum += l;
      }
      if (sum != dim) {
        return ctx.Error(absl::StrCat("split lengths sum to ", sum, " but axis ", *axis, " has ", dim));
      }
      lengths = *std::move(split);
    }
  }
  const AxisSplit v = SplitAtAxis(x.shape, *axis);
  std::vector<Tensor> items;
  int64_t at = 0;
  for (int64_t len : lengths) {
    std::vector<int64_t> shape = x.shape;
    shape[*axis] = len;
    if (squeeze) shape.erase(shape.begin() + *axis);
    absl::StatusOr<Tensor> t = Tensor::Create(x.dtype, shape);
    if (!t.ok()) return ctx.Error(t.status().message());
    CopyAlongAxis(DTypeSize(x.dtype), v.outer, v.inner, x.data, dim, at, t->data(), len, 0, len);
    // An item owns its strings' bytes, as the caller of RunValues gets it.
    if (x.dtype == DType::kString) t = CopyTensor(ctx, t->view());
    if (!t.ok()) return t.status();
    items.push_back(*std::move(t));
    at += len;
  }
  Out(ctx, 0) = Value::Sequence(x.dtype, std::move(items));
  return absl::OkStatus();
}

absl::Status OptionalKernel(KernelContext& ctx) {
  const DType type = ctx.output(0).dtype;
  if (!ctx.has_input(0)) {
    Out(ctx, 0) = Value::None(ir::KindOf(type), ir::ElemDType(type));
    return absl::OkStatus();
  }
  const TensorView& x = ctx.input(0);
  if (ir::IsBoxed(x.dtype)) {
    Out(ctx, 0) = Value::Some(ir::BoxedValue(x));
    return absl::OkStatus();
  }
  absl::StatusOr<Tensor> t = CopyTensor(ctx, x);
  if (!t.ok()) return t.status();
  Out(ctx, 0) = Value::Some(Value(*std::move(t)));
  return absl::OkStatus();
}

absl::Status OptionalHasElementKernel(KernelContext& ctx) {
  bool has = false;
  if (ctx.has_input(0)) {
    has = !ir::IsOptionalDType(ctx.input(0).dtype) || In(ctx, 0).has_value();
  }
  *ctx.output(0).as<uint8_t>() = has ? 1 : 0;
  return absl::OkStatus();
}

absl::Status OptionalGetElementKernel(KernelContext& ctx) {
  const TensorView& x = ctx.input(0);
  if (!ir::IsBoxed(x.dtype)) {  // a plain tensor: its strings' bytes already last the run
    return AllocateCopy(ctx, 0, x).status();
  }
  const Value& v = In(ctx, 0);
  if (!v.has_value()) return ctx.Error(absl::StrCat("the ", DTypeName(x.dtype), " input is absent"));
  if (!v.is_sequence()) return AllocateItemCopy(ctx, 0, v.tensor().view());
  absl::StatusOr<TensorView*> out = ctx.AllocateOutput(0, ir::BoxedDType(ValueKind::kSequence, v.dtype()), {});
  if (!out.ok()) return out.status();
  ir::MutableBoxedValue(**out) = Value::Sequence(v.dtype(), v.items());
  return absl::OkStatus();
}

absl::Status SequenceMapKernel(KernelContext& ctx) {
  const int64_t n = static_cast<int64_t>(In(ctx, 0).items().size());
  for (int i = 1; i < ctx.num_inputs(); ++i) {
    if (!ir::IsBoxed(ctx.input(i).dtype)) continue;
    const int64_t m = static_cast<int64_t>(In(ctx, i).items().size());
    if (m != n) {
      return ctx.Error(absl::StrCat("input sequence ", i, " has ", m, " items but input 0 has ", n));
    }
  }
  const int body = ctx.attrs().GetSubgraph("body");
  std::vector<std::vector<Tensor>> results(ctx.num_outputs());
  std::vector<DType> dtypes(ctx.num_outputs(), DType::kUnknown);
  std::vector<TensorView> args(ctx.num_inputs());
  for (int64_t k = 0; k < n; ++k) {
    for (int i = 0; i < ctx.num_inputs(); ++i) {
      args[i] = ir::IsBoxed(ctx.input(i).dtype) ? In(ctx, i).items()[k].view() : ctx.input(i);
    }
    absl::StatusOr<std::vector<TensorView>> outs = ctx.host()->RunSubgraph(body, args);
    if (!outs.ok()) return outs.status();
    for (int j = 0; j < ctx.num_outputs(); ++j) {
      const TensorView& o = (*outs)[j];
      if (ir::IsBoxed(o.dtype)) return ctx.Error(absl::StrCat("body output ", j, " is a ", DTypeName(o.dtype)));
      absl::StatusOr<Tensor> t = CopyTensor(ctx, o);
      if (!t.ok()) return t.status();
      dtypes[j] = o.dtype;
      results[j].push_back(*std::move(t));
    }
  }
  for (int j = 0; j < ctx.num_outputs(); ++j) {
    if (!ctx.has_output(j)) continue;
    // No items: the dtype the plan predicted.
    absl::StatusOr<TensorView*> out =
        ctx.AllocateOutput(j, dtypes[j] == DType::kUnknown ? DType::kUnknown
                                                            : ir::BoxedDType(ValueKind::kSequence, dtypes[j]),
                           {});
    if (!out.ok()) return out.status();
    ir::MutableBoxedValue(**out) = Value::Sequence(ir::ElemDType((*out)->dtype), std::move(results[j]));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status RegisterSequenceKernels(ir::OpRegistry& registry) {
  const std::pair<const char*, ir::KernelFn> kernels[] = {
      {"SequenceEmpty", &SequenceEmptyKernel},
      {"SequenceConstruct", &SequenceConstructKernel},
      {"SequenceInsert", &SequenceInsertKernel},
      {"SequenceErase", &SequenceEraseKernel},
      {"SequenceAt", &SequenceAtKernel},
      {"SequenceLength", &SequenceLengthKernel},
      {"ConcatFromSequence", &ConcatFromSequenceKernel},
      {"SplitToSequence", &SplitToSequenceKernel},
      {"Optional", &OptionalKernel},
      {"OptionalHasElement", &OptionalHasElementKernel},
      {"OptionalGetElement", &OptionalGetElementKernel},
      {"SequenceMap", &SequenceMapKernel},
  };
  for (const auto& [type, fn] : kernels) {
    if (absl::Status s = registry.SetKernel(type, ir::Backend::kCpu, fn); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace grove::cpu
