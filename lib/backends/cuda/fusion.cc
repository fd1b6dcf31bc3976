#include "lib/backends/cuda/fusion.h"
#include "lib/backends/cuda/variant_launch.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "lib/backends/cuda/exec_context.h"

namespace grove::cuda {
namespace {

std::string ShapeString(absl::Span<const int64_t> s) { return absl::StrCat("[", absl::StrJoin(s, ", "), "]"); }

// The op code of a fusable node, -1 when it is not one.
int FusedOpCode(const ir::Node& node) {
  static const struct {
    const char* type;
    int op;
  } kOps[] = {
      {"Neg", grove_k::kEwNeg},
      {"Abs", grove_k::kEwAbs},
      {"Exp", grove_k::kEwExp},
      {"Log", grove_k::kEwLog},
      {"Sqrt", grove_k::kEwSqrt},
      {"Reciprocal", grove_k::kEwReciprocal},
      {"Erf", grove_k::kEwErf},
      {"Tanh", grove_k::kEwTanh},
      {"Sigmoid", grove_k::kEwSigmoid},
      {"Relu", grove_k::kEwRelu},
      {"LeakyRelu", grove_k::kEwLeakyRelu},
      {"Elu", grove_k::kEwElu},
      {"Gelu", grove_k::kEwGelu},
      {"HardSigmoid", grove_k::kEwHardSigmoid},
      {"HardSwish", grove_k::kEwHardSwish},
      {"Softplus", grove_k::kEwSoftplus},
      {"Sin", grove_k::kEwSin},
      {"Cos", grove_k::kEwCos},
      {"Tan", grove_k::kEwTan},
      {"Asin", grove_k::kEwAsin},
      {"Acos", grove_k::kEwAcos},
      {"Atan", grove_k::kEwAtan},
      {"Sinh", grove_k::kEwSinh},
      {"Cosh", grove_k::kEwCosh},
      {"Asinh", grove_k::kEwAsinh},
      {"Acosh", grove_k::kEwAcosh},
      {"Atanh", grove_k::kEwAtanh},
      {"Softsign", grove_k::kEwSoftsign},
      {"Selu", grove_k::kEwSelu},
      {"Celu", grove_k::kEwCelu},
      {"ThresholdedRelu", grove_k::kEwThresholdedRelu},
      {"Clip", grove_k::kEwClip},
      {"Add", grove_k::kEwAdd},
      {"Sub", grove_k::kEwSub},
      {"Mul", grove_k::kEwMul},
      {"Div", grove_k::kEwDiv},
      {"Pow", grove_k::kEwPow},
      {"Min", grove_k::kEwMin},
      {"Max", grove_k::kEwMax},
      {"Sum", grove_k::kEwSum},
      {"Mean", grove_k::kEwMean},
  };
  for (const auto& o : kOps) {
    if (node.type == o.type) return o.op;
  }
  return -1;
}

}  // namespace

int EwUnaryAttributes(int op, const ir::Attributes& attrs, double* fa, double* fb) {
  switch (op) {
    case grove_k::kEwLeakyRelu:
      *fa = attrs.GetFloat("alpha", 0.01);
      break;
    case grove_k::kEwElu:
    case grove_k::kEwCelu:
    case grove_k::kEwThresholdedRelu:
      *fa = attrs.GetFloat("alpha", 1.0);
      break;
    case grove_k::kEwHardSigmoid:
      *fa = attrs.GetFloat("alpha", 0.2);
      *fb = attrs.GetFloat("beta", 0.5);
      break;
    case grove_k::kEwSelu:
      // ONNX's defaults: the float values of the SELU paper's constants.
      *fa = attrs.GetFloat("alpha", 1.6732631921768188);
      *fb = attrs.GetFloat("gamma", 1.0507010221481323);
      break;
    case grove_k::kEwGelu:
      if (attrs.GetString("approximate", "none") == "tanh") return grove_k::kEwGeluTanh;
      break;
    default:
      break;
  }
  return op;
}

namespace {

bool IsVariadic(int op) {
  return op == grove_k::kEwMin || op == grove_k::kEwMax || op == grove_k::kEwSum || op == grove_k::kEwMean;
}

// The fused node's program, from its attrs.
struct Program {
  std::vector<grove_k::EwLink> links;
  // Operands read only as Clip bounds: one element each, outside the
  // broadcast of the data operands.
  std::vector<bool> bound_only;
};

absl::StatusOr<Program> ReadProgram(const ir::Attributes& attrs, int num_inputs) {
  const std::vector<int64_t> ops = attrs.GetInts("ew_ops");
  const std::vector<int64_t> srcs = attrs.GetInts("ew_srcs");
  const std::vector<double> fa = attrs.GetFloats("ew_fa");
  const std::vector<double> fb = attrs.GetFloats("ew_fb");
  if (ops.empty() || ops.size() > grove_k::kEwMaxLinks || srcs.size() != 3 * ops.size() || fa.size() != ops.size() ||
      fb.size() != ops.size()) {
    return absl::InvalidArgumentError("malformed fused elementwise program (attributes ew_ops/ew_srcs/ew_fa/ew_fb)");
  }
  if (num_inputs > grove_k::kEwMaxOperands) {
    return absl::InvalidArgumentError(
        absl::StrCat("a fused elementwise node reads at most ", grove_k::kEwMaxOperands, " inputs; got ", num_inputs));
  }
  Program prog;
  std::vector<bool> data(num_inputs, false), bound(num_inputs, false);
  for (size_t l = 0; l < ops.size(); ++l) {
    grove_k::EwLink link{};
    link.op = static_cast<int>(ops[l]);
    if (link.op < 0 || link.op > grove_k::kEwLastArithmetic) {
      return absl::InvalidArgumentError(absl::StrCat("fused elementwise link ", l, " has op code ", ops[l]));
    }
    for (int j = 0; j < 3; ++j) {
      const int64_t s = srcs[3 * l + j];
      const bool ok = s == grove_k::kEwNone || (s == grove_k::kEwPrev && l > 0) || (s >= 0 && s < num_inputs);
      if (!ok) return absl::InvalidArgumentError(absl::StrCat("fused elementwise link ", l, " reads source ", s));
      link.src[j] = static_cast<int>(s);
      if (s >= 0) (link.op == grove_k::kEwClip && j > 0 ? bound : data)[s] = true;
    }
    if (link.src[0] == grove_k::kEwNone) {
      return absl::InvalidArgumentError(absl::StrCat("fused elementwise link ", l, " has no input"));
    }
    link.fa = fa[l];
    link.fb = fb[l];
    prog.links.push_back(link);
  }
  for (int k = 0; k < num_inputs; ++k) prog.bound_only.push_back(bound[k] && !data[k]);
  return prog;
}

absl::Status InferFused(ir::ShapeContext& ctx) {
  absl::StatusOr<Program> prog = ReadProgram(ctx.attrs(), ctx.num_inputs());
  if (!prog.ok()) return ctx.Error(prog.status().message());
  std::vector<ir::SymShape> shapes;
  for (int k = 0; k < ctx.num_inputs(); ++k) {
    if (!ctx.has_input(k)) return ctx.Error(absl::StrCat("input ", k, " is missing"));
    if (ctx.input_dtype(k) != ctx.input_dtype(0)) {
      return ctx.Error(absl::StrCat("inputs 0 and ", k, " have dtypes ", DTypeName(ctx.input_dtype(0)), " and ",
                                    DTypeName(ctx.input_dtype(k)), "; a fused chain computes in one dtype"));
    }
    if (!prog->bound_only[k]) shapes.push_back(ctx.input_shape(k));
  }
  absl::StatusOr<ir::SymShape> joint = ir::BroadcastShapes(shapes);
  if (!joint.ok()) return ctx.Error(joint.status().message());
  ctx.SetOutput(0, ctx.input_dtype(0), *joint);
  return absl::OkStatus();
}

// What the fused kernel's prepare makes: the launch parameters without
// pointers (empty: nothing to launch).
struct FusedPrepared {
  grove_k::EwChainParams p;
  LaunchDims dims;
  jit::ModuleSpec module;
  bool empty = false;
};

absl::StatusOr<ir::PreparedKernel> PrepareFused(const ir::KernelContext& ctx) {
  absl::StatusOr<Program> prog = ReadProgram(ctx.attrs(), ctx.num_inputs());
  if (!prog.ok()) return ctx.Error(prog.status().message());
  const TensorView& out = ctx.output(0);
  const DType dtype = out.dtype;
  if (dtype != DType::kF32 && dtype != DType::kF16 && dtype != DType::kBF16 && dtype != DType::kF64) {
    return ctx.Error(absl::StrCat("a fused elementwise chain computes in f32, f16, bf16 or f64; the output is ",
                                  DTypeName(dtype)));
  }
  std::vector<const std::vector<int64_t>*> shapes;
  for (int k = 0; k < ctx.num_inputs(); ++k) {
    if (!ctx.has_input(k)) return ctx.Error(absl::StrCat("input ", k, " is missing"));
    const TensorView& in = ctx.input(k);
    if (in.dtype != dtype) {
      return ctx.Error(absl::StrCat("input ", k, " has dtype ", DTypeName(in.dtype), "; the chain computes in ",
                                    DTypeName(dtype)));
    }
    if (prog->bound_only[k]) {
      if (in.num_elements() != 1) {
        return ctx.Error(absl::StrCat("input ", k, " (a Clip bound) must hold one element; got shape ",
                                      ShapeString(in.shape)));
      }
      shapes.push_back(nullptr);
    } else {
      shapes.push_back(&in.shape);
    }
  }
  absl::StatusOr<EwLayout> layout = PlanEwLayout(out.shape, shapes);
  if (!layout.ok()) return ctx.Error(layout.status().message());
  FusedPrepared f;
  std::memset(&f.p, 0, sizeof(f.p));
  if (layout->num_elements == 0) {
    f.empty = true;
    return MakePrepared(std::move(f));
  }
  grove_k::EwChainParams& p = f.p;
  p.n = layout->num_elements;
  p.shape = layout->shape;
  p.num_inputs = ctx.num_inputs();
  p.simple = layout->simple ? 1 : 0;
  for (int k = 0; k < ctx.num_inputs(); ++k) {
    p.strides[k] = layout->strides[k];
    p.mode[k] = layout->mode[k];
  }
  p.num_links = static_cast<int>(prog->links.size());
  for (size_t l = 0; l < prog->links.size(); ++l) p.links[l] = prog->links[l];
  // The chain is an "ew" variant (every chain is same-typed: a vector where
  // no operand is strided), launched with its geometry as an elementwise
  // step is, on the emulated device too.
  const VariantLaunch v = ChooseLaunch(ctx, EwProblem(dtype, p.n, p.num_inputs, p.num_links, p.simple != 0));
  f.dims = v.dims;
  f.module = v.module;
  return MakePrepared(std::move(f));
}

absl::Status FusedKernel(ir::KernelContext& ctx) {
  const FusedPrepared* f = PreparedParams<FusedPrepared>(ctx);
  if (f == nullptr) return NotPrepared(ctx);
  if (f->empty) return absl::OkStatus();
  grove_k::EwChainParams p = f->p;
  p.out = ctx.output(0).data;
  for (int k = 0; k < p.num_inputs; ++k) p.in[k] = ctx.input(k).data;
  return Exec(ctx).Launch(f->module, "ew_chain", f->dims, p);
}

}  // namespace

const ir::OpDef& FusedElementwiseOpDef() {
  static const ir::OpDef* def = [] {
    auto* d = new ir::OpDef;
    d->type = "FusedElementwise";
    d->min_inputs = 1;
    d->max_inputs = grove_k::kEwMaxOperands;
    d->attrs = {{"ew_ops", ir::AttrKind::kInts, true},
                {"ew_srcs", ir::AttrKind::kInts, true},
                {"ew_fa", ir::AttrKind::kFloats, true},
                {"ew_fb", ir::AttrKind::kFloats, true}};
    d->infer = &InferFused;
    d->kernels[static_cast<int>(ir::Backend::kCuda)] = &FusedKernel;
    d->prepares[static_cast<int>(ir::Backend::kCuda)] = &PrepareFused;
    d->foldable = false;
    return d;
  }();
  return *def;
}

bool IsFusableElementwise(const ir::Node& node) {
  const int op = FusedOpCode(node);
  if (op < 0 || node.outputs.empty() || node.outputs[0] < 0) return false;
  for (size_t i = 1; i < node.outputs.size(); ++i) {
    if (node.outputs[i] >= 0) return false;
  }
  const int n = static_cast<int>(node.inputs.size());
  if (n == 0 || node.inputs[0] < 0) return false;
  if (op == grove_k::kEwClip) {
    // Bounds as inputs (opset 11+) only.
    return n <= 3 && !node.attrs.Has("min") && !node.attrs.Has("max");
  }
  for (int i = 0; i < n; ++i) {
    if (node.inputs[i] < 0) return false;
  }
  if (IsVariadic(op)) return n <= 2;
  if (op <= grove_k::kEwLastUnary) {
    if (op == grove_k::kEwGelu) {
      const std::string approx = node.attrs.GetString("approximate", "none");
      if (approx != "none" && approx != "tanh") return false;
    }
    return n == 1;
  }
  return n == 2;
}

absl::StatusOr<ir::Node> MakeFusedElementwiseNode(absl::Span<const ir::Node* const> chain,
                                                  std::vector<int>* external_inputs) {
  if (chain.empty()) return absl::InvalidArgumentError("an empty elementwise chain");
  if (chain.size() > grove_k::kEwMaxLinks) {
    return absl::InvalidArgumentError(
        absl::StrCat("a fused elementwise chain has at most ", grove_k::kEwMaxLinks, " links; got ", chain.size()));
  }
  std::vector<int> externals;
  std::vector<int64_t> ops, srcs;
  std::vector<double> fa, fb;
  std::vector<std::string> names;
  auto operand = [&](int tensor) -> int {
    for (size_t k = 0; k < externals.size(); ++k) {
      if (externals[k] == tensor) return static_cast<int>(k);
    }
    externals.push_back(tensor);
    return static_cast<int>(externals.size()) - 1;
  };
  for (size_t l = 0; l < chain.size(); ++l) {
    const ir::Node& node = *chain[l];
    if (!IsFusableElementwise(node)) {
      return absl::InvalidArgumentError(
          absl::StrCat(node.Describe(), " cannot be a link of a fused elementwise chain"));
    }
    names.push_back(node.name.empty() ? node.type : node.name);
    int op = FusedOpCode(node);
    const int n = static_cast<int>(node.inputs.size());
    // The previous link's output: exactly one input.
    int prev_pos = -1;
    if (l > 0) {
      const int prev = chain[l - 1]->outputs[0];
      int count = 0;
      for (int i = 0; i < n; ++i) {
        if (node.inputs[i] == prev) {
          prev_pos = i;
          ++count;
        }
      }
      if (count != 1) {
        return absl::InvalidArgumentError(absl::StrCat(node.Describe(), " reads the previous link's output ", count,
                                                       " times; a chain link reads it exactly once"));
      }
    }
    int src[3] = {grove_k::kEwNone, grove_k::kEwNone, grove_k::kEwNone};
    for (int i = 0; i < n && i < 3; ++i) {
      if (node.inputs[i] < 0) continue;  // an omitted Clip bound
      src[i] = i == prev_pos ? grove_k::kEwPrev : operand(node.inputs[i]);
    }
    double a = 0, b = 0;
    op = EwUnaryAttributes(op, node.attrs, &a, &b);
    if (IsVariadic(op) && n == 1) op = grove_k::kEwCopy;  // Min/Max/Sum/Mean of one input
    ops.push_back(op);
    srcs.insert(srcs.end(), src, src + 3);
    fa.push_back(a);
    fb.push_back(b);
  }
  if (externals.size() > grove_k::kEwMaxOperands) {
    return absl::InvalidArgumentError(absl::StrCat("a fused elementwise chain reads at most ",
                                                   grove_k::kEwMaxOperands, " external inputs; this one reads ",
                                                   externals.size()));
  }
  ir::Node fused;
  fused.type = FusedElementwiseOpDef().type;
  fused.name = absl::StrCat("fused(", absl::StrJoin(names, "+"), ")");
  fused.def = &FusedElementwiseOpDef();
  fused.inputs = externals;
  fused.outputs = {chain.back()->outputs[0]};
  fused.attrs.Set("ew_ops", ops);
  fused.attrs.Set("ew_srcs", srcs);
  fused.attrs.Set("ew_fa", fa);
  fused.attrs.Set("ew_fb", fb);
  fused.subgraph = chain.back()->subgraph;
  fused.index = chain.back()->index;
  *external_inputs = std::move(externals);
  return fused;
}

absl::StatusOr<EwLayout> PlanEwLayout(absl::Span<const int64_t> out_shape,
                                      absl::Span<const std::vector<int64_t>* const> in_shapes) {
  const int num = static_cast<int>(in_shapes.size());
  if (num > grove_k::kEwMaxOperands) {
    return absl::UnimplementedError(
        absl::StrCat("the elementwise kernels read at most ", grove_k::kEwMaxOperands, " operands; got ", num));
  }
  auto describe = [&] {
    std::vector<std::string> parts;
    for (const std::vector<int64_t>* s : in_shapes) {
      if (s != nullptr) parts.push_back(ShapeString(*s));
    }
    return absl::StrJoin(parts, ", ");
  };
  size_t rank = 0;
  for (const std::vector<int64_t>* s : in_shapes) {
    if (s != nullptr) rank = std::max(rank, s->size());
  }
  std::vector<int64_t> joint(rank, 1);
  for (int k = 0; k < num; ++k) {
    if (in_shapes[k] == nullptr) continue;
    const std::vector<int64_t>& s = *in_shapes[k];
    const size_t off = rank - s.size();
    for (size_t i = 0; i < s.size(); ++i) {
      int64_t& o = joint[off + i];
      if (s[i] == 1 || s[i] == o) continue;
      if (o != 1) {
        return absl::InvalidArgumentError(absl::StrCat("input shapes ", describe(), " do not broadcast: dim ", off + i,
                                                       " is ", o, " in one input and ", s[i], " in input ", k));
      }
      o = s[i];
    }
  }
  if (absl::Span<const int64_t>(joint) != out_shape) {
    return absl::InvalidArgumentError(absl::StrCat("input shapes ", describe(), " broadcast to ", ShapeString(joint),
                                                   " but the output was planned as ", ShapeString(out_shape)));
  }
  EwLayout layout;
  layout.num_elements = 1;
  for (int64_t d : out_shape) layout.num_elements *= d;
  for (int k = 0; k < num; ++k) layout.mode[k] = grove_k::kEwScalar;
  if (layout.num_elements == 0) return layout;

  // Per-operand strides in the output's index space, size-1 output dims
  // dropped, contiguous neighbours merged.
  std::vector<std::vector<int64_t>> full(num, std::vector<int64_t>(rank, 0));
  int64_t in_elements[grove_k::kEwMaxOperands];
  for (int k = 0; k < num; ++k) {
    in_elements[k] = 1;
    if (in_shapes[k] == nullptr) continue;
    const std::vector<int64_t>& s = *in_shapes[k];
    int64_t stride = 1;
    for (int i = static_cast<int>(s.size()) - 1; i >= 0; --i) {
      full[k][rank - s.size() + i] = s[i] == 1 ? 0 : stride;
      stride *= s[i];
    }
    in_elements[k] = stride;
  }
  std::vector<int64_t> dims;
  std::vector<std::vector<int64_t>> strides(num);
  for (size_t i = 0; i < rank; ++i) {
    if (out_shape[i] == 1) continue;
    if (!dims.empty()) {
      bool contiguous = true;
      for (int k = 0; k < num; ++k) contiguous &= strides[k].back() == full[k][i] * out_shape[i];
      if (contiguous) {
        dims.back() *= out_shape[i];
        for (int k = 0; k < num; ++k) strides[k].back() = full[k][i];
        continue;
      }
    }
    dims.push_back(out_shape[i]);
    for (int k = 0; k < num; ++k) strides[k].push_back(full[k][i]);
  }
  if (dims.empty()) {
    dims.push_back(1);
    for (int k = 0; k < num; ++k) strides[k].push_back(0);
  }
  if (dims.size() > static_cast<size_t>(grove_k::kMaxRank)) {
    return absl::UnimplementedError(absl::StrCat("input shapes ", describe(), " need ", dims.size(),
                                                 " dims after merging; the elementwise kernels take ",
                                                 grove_k::kMaxRank));
  }
  layout.shape.rank = static_cast<int>(dims.size());
  for (size_t i = 0; i < dims.size(); ++i) layout.shape.d[i] = dims[i];
  for (int k = 0; k < num; ++k) {
    for (size_t i = 0; i < dims.size(); ++i) layout.strides[k].s[i] = strides[k][i];
    if (in_elements[k] == 1) {
      layout.mode[k] = grove_k::kEwScalar;
    } else if (in_elements[k] == layout.num_elements) {
      layout.mode[k] = grove_k::kEwContiguous;
    } else {
      layout.mode[k] = grove_k::kEwStrided;
      layout.simple = false;
    }
  }
  return layout;
}

}  // namespace grove::cuda
