#include "lib/ir/op_registry.h"

#include <algorithm>
#include <cstdlib>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "lib/ir/broadcast.h"
#include "lib/ir/plain_host.h"
#include "lib/ir/string_arena.h"
#include "lib/ir/value_type.h"

namespace grove::ir {

absl::string_view AttrKindName(AttrKind kind) {
  switch (kind) {
    case AttrKind::kInt: return "int";
    case AttrKind::kFloat: return "float";
    case AttrKind::kString: return "string";
    case AttrKind::kInts: return "ints";
    case AttrKind::kFloats: return "floats";
    case AttrKind::kStrings: return "strings";
    case AttrKind::kSubgraph: return "subgraph";
  }
  return "?";
}

ShapeContext::ShapeContext(const Node& node, const Graph& graph, std::vector<Input> inputs,
                           SubgraphInferrer* inferrer)
    : node_(node), graph_(graph), inputs_(std::move(inputs)), outputs_(node.outputs.size()),
      inferrer_(inferrer) {}

bool ShapeContext::InputInts(int i, std::vector<int64_t>* out) const {
  const TensorView* v = input_value(i);
  if (v == nullptr) return false;
  const int64_t n = v->num_elements();
  out->resize(static_cast<size_t>(n));
  if (v->dtype == DType::kI64) {
    std::copy_n(v->as<const int64_t>(), n, out->begin());
  } else if (v->dtype == DType::kI32) {
    std::copy_n(v->as<const int32_t>(), n, out->begin());
  } else {
    return false;
  }
  return true;
}

void ShapeContext::SetOutput(int i, DType dtype, SymShape shape) {
  if (i < 0 || i >= num_outputs()) return;
  outputs_[i] = Output{dtype, std::move(shape), true};
}

absl::Status InferShapes(ShapeContext& ctx) {
  const OpDef* def = ctx.node().def;
  if (def == nullptr || def->infer == nullptr) {
    return absl::InternalError(absl::StrCat(ctx.node().Describe(), ": no shape function"));
  }
  if (absl::Status s = def->infer(ctx); !s.ok()) return s;
  for (int i = 0; i < ctx.num_outputs(); ++i) {
    const ShapeContext::Output& o = ctx.outputs()[i];
    if (!o.set || !o.rank_known || IsBoxed(o.dtype)) continue;
    for (size_t d = 0; d < o.shape.size(); ++d) {
      if (o.shape[d].is_const() && o.shape[d].value() < 0) {
        return ctx.Error(absl::StrCat("output ", i, ": dim ", d, " is negative (", o.shape[d].value(), ")"));
      }
    }
    if (o.dtype == DType::kUnknown || !IsConcrete(o.shape)) continue;
    absl::StatusOr<uint64_t> bytes = CheckedByteSize(o.dtype, ToConcrete(o.shape), absl::StrCat("output ", i));
    if (!bytes.ok()) return ctx.Error(bytes.status().message());
  }
  return absl::OkStatus();
}

void ShapeContext::SetOutputUnknownRank(int i, DType dtype) {
  if (i < 0 || i >= num_outputs()) return;
  outputs_[i] = Output{dtype, {}, true, /*rank_known=*/false};
}

bool RanksKnownOnlyWhenRun(absl::Span<const ShapeContext::Input> inputs) {
  for (const ShapeContext::Input& in : inputs) {
    if (in.present && !in.rank_known && !IsBoxed(in.dtype)) return true;
  }
  return false;
}

SymShape FromPartlyConcrete(absl::Span<const int64_t> dims) {
  SymShape shape;
  shape.reserve(dims.size());
  for (int64_t d : dims) shape.push_back(d < 0 ? SymDim::Unknown() : SymDim(d));
  return shape;
}

absl::Status ShapeContext::Error(absl::string_view msg) const {
  return absl::InvalidArgumentError(absl::StrCat(node_.Describe(), ": ", msg));
}

absl::StatusOr<StringRef> KernelContext::StoreString(absl::string_view s) const {
  StringArena* arena = host_ == nullptr ? nullptr : host_->strings();
  if (arena == nullptr) {
    return absl::InternalError(absl::StrCat(node_.Describe(), ": makes strings where none may be made"));
  }
  return arena->Store(s);
}

absl::Status KernelContext::Error(absl::string_view msg) const {
  return absl::InvalidArgumentError(absl::StrCat(node_.Describe(), ": ", msg));
}

const AttrSpec* OpDef::FindAttr(absl::string_view name) const {
  for (const AttrSpec& a : attrs) {
    if (a.name == name) return &a;
  }
  return nullptr;
}

absl::Status OpRegistry::Register(OpDef def) {
  auto [it, inserted] = ops_.try_emplace(def.type);  // one lookup
  if (!inserted) return absl::AlreadyExistsError(absl::StrCat("op ", def.type, " is registered twice"));
  it->second = std::make_unique<OpDef>(std::move(def));
  return absl::OkStatus();
}

absl::Status OpRegistry::SetKernel(absl::string_view type, Backend backend, KernelFn fn) {
  auto it = ops_.find(type);
  if (it == ops_.end()) {
    return absl::NotFoundError(absl::StrCat("kernel for unregistered op ", type));
  }
  it->second->kernels[static_cast<int>(backend)] = fn;
  return absl::OkStatus();
}

absl::Status OpRegistry::SetKernel(absl::string_view type, Backend backend, const KernelDef& kernel) {
  if (absl::Status s = SetKernel(type, backend, kernel.invoke); !s.ok()) return s;
  OpDef& def = *ops_.find(type)->second;
  def.prepares[static_cast<int>(backend)] = kernel.prepare;
  def.host_inputs[static_cast<int>(backend)] = kernel.host_inputs;
  return absl::OkStatus();
}

absl::StatusOr<void*> KernelContext::Host::Workspace(uint64_t bytes) {
  if (bytes <= workspace_bytes_ && workspace_ != nullptr) return workspace_.get();
  const uint64_t cap = (std::max<uint64_t>(bytes, 64) + 63) / 64 * 64;
  void* p = cap > kMaxTensorBytes ? nullptr : std::aligned_alloc(64, cap);
  if (p == nullptr) return absl::ResourceExhaustedError(absl::StrCat("cannot allocate a workspace of ", bytes, " bytes"));
  workspace_ = std::unique_ptr<uint8_t[], void (*)(void*)>(static_cast<uint8_t*>(p), &std::free);
  workspace_bytes_ = cap;
  return p;
}

absl::Status RunKernel(Backend backend, KernelContext& ctx) {
  const OpDef& def = *ctx.node().def;
  const KernelFn invoke = def.kernels[static_cast<int>(backend)];
  if (invoke == nullptr) return ctx.Error("no kernel for this backend");
  const PrepareFn prepare = def.prepares[static_cast<int>(backend)];
  if (prepare == nullptr) return invoke(ctx);
  absl::StatusOr<PreparedKernel> prepared = prepare(ctx);
  if (!prepared.ok()) return prepared.status();
  void* workspace = nullptr;
  PlainHost fallback_host("ir::RunKernel");  // a workspace of host memory, when the caller gave no host
  if (prepared->workspace_bytes > 0) {
    KernelContext::Host* host = ctx.host() != nullptr ? ctx.host() : &fallback_host;
    absl::StatusOr<void*> w = host->Workspace(prepared->workspace_bytes);
    if (!w.ok()) return w.status();
    workspace = *w;
  }
  const PreparedKernel* before = ctx.prepared();
  void* before_ws = ctx.workspace();
  ctx.SetPrepared(&*prepared, workspace);
  absl::Status s = invoke(ctx);
  ctx.SetPrepared(before, before_ws);
  return s;
}

const OpDef* OpRegistry::Find(absl::string_view type) const {
  auto it = ops_.find(type);
  return it == ops_.end() ? nullptr : it->second.get();
}

bool OpRegistry::Supports(absl::string_view type, Backend backend) const {
  const OpDef* def = Find(type);
  return def != nullptr && def->kernels[static_cast<int>(backend)] != nullptr;
}

std::vector<std::string> OpRegistry::Types() const {
  std::vector<std::string> types;
  for (const auto& [name, def] : ops_) types.push_back(name);
  std::sort(types.begin(), types.end());
  return types;
}

namespace {
constexpr absl::string_view kDeferredShapePayload = "grove.ir/deferred-shape";
}  // namespace

absl::Status DeferredShapeError(absl::string_view msg) {
  absl::Status status = absl::InvalidArgumentError(msg);
  status.SetPayload(kDeferredShapePayload, absl::Cord("1"));
  return status;
}

bool IsDeferredShapeError(const absl::Status& status) {
  return !status.ok() && status.GetPayload(kDeferredShapePayload).has_value();
}

absl::StatusOr<int> NormalizeAxis(int64_t axis, int rank) {
  const int64_t a = axis < 0 ? axis + rank : axis;
  if (a < 0 || a >= std::max(rank, 1) || (rank == 0 && a != 0)) {
    return absl::InvalidArgumentError(absl::StrCat("axis ", axis, " is out of range for rank ", rank));
  }
  return static_cast<int>(a);
}

absl::StatusOr<SymShape> BroadcastShapes(absl::Span<const SymShape> shapes) {
  std::vector<const SymShape*> ptrs;
  ptrs.reserve(shapes.size());
  for (const SymShape& s : shapes) ptrs.push_back(&s);
  return BroadcastShapePtrs(ptrs);
}

std::vector<int64_t> Strides(absl::Span<const int64_t> shape) {
  std::vector<int64_t> s(shape.size(), 1);
  for (int i = static_cast<int>(shape.size()) - 2; i >= 0; --i) s[i] = s[i + 1] * shape[i + 1];
  return s;
}

int64_t NumElements(absl::Span<const int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

}  // namespace grove::ir
