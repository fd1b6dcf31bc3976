// oneDNN steps: primitives and reorders made by a prepare (C++ API, whose
// errors are exceptions, caught here), run by the invoke through the C API on
// preallocated argument arrays.
#include "lib/backends/cpu/onednn.h"

#include <oneapi/dnnl/dnnl.h>
#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "lib/backends/cpu/parallel_for.h"

#if DNNL_CPU_THREADING_RUNTIME == DNNL_RUNTIME_OMP
// The OpenMP runtime oneDNN was built on (libgomp on Debian). Declared here
// rather than from <omp.h>, which clang finds only with libomp installed.
extern "C" int omp_get_max_threads(void);
extern "C" void omp_set_num_threads(int num_threads);
#endif

namespace grove::cpu {
namespace {

using dnnl::memory;

bool EnabledByEnvironment() {
  const char* v = std::getenv("GROVE_CPU_ONEDNN");
  if (v == nullptr) return true;
  const absl::string_view s(v);
  return !(s == "0" || s == "off" || s == "OFF" || s == "false" || s == "FALSE");
}

std::atomic<int64_t> g_steps_made{0};

std::atomic<bool>& EnabledFlag() {
  static std::atomic<bool> enabled{EnabledByEnvironment()};
  return enabled;
}

// The CPU engine, made on first use; engines are thread-safe.
const dnnl::engine& CpuEngine() {
  static const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

// oneDNN on `threads` threads for the scope: its OpenMP runtime would
// otherwise start a thread per core inside every call of every session. The
// count is the calling thread's (OpenMP keeps it per thread, and gives each
// calling thread its own team), restored after, so an application's own
// OpenMP use is left as it was.
class OmpThreadScope {
 public:
#if DNNL_CPU_THREADING_RUNTIME == DNNL_RUNTIME_OMP
  explicit OmpThreadScope(int threads) : before_(omp_get_max_threads()), threads_(threads) {
    if (before_ != threads_) omp_set_num_threads(threads_);
  }
  ~OmpThreadScope() {
    if (before_ != threads_) omp_set_num_threads(before_);
  }

 private:
  int before_;
  int threads_;
#else
  explicit OmpThreadScope(int) {}
#endif
};

// The session's intra-op threads (SessionOptions::intra_op_threads): oneDNN
// runs its OpenMP team of that many on the calling thread.
int SessionThreads(const ir::KernelContext& ctx) {
  ir::IntraOpThreads* threads = IntraOpThreadsOf(ctx);
  return threads == nullptr ? 1 : threads->num_threads();
}

// oneDNN splits a step over the session's threads only when it is worth an
// OpenMP fork and join (microseconds; far more when a worker must be woken or
// the cores are busy): at least this many multiply-adds, some 50 us of one
// core's work. Smaller steps (a decode token's projections) stay on the
// calling thread.
constexpr double kParallelMacs = 1 << 21;
int StepThreads(const ir::KernelContext& ctx, double macs) { return macs < kParallelMacs ? 1 : SessionThreads(ctx); }

// A memory-bound or exp-heavy element (pooling, BatchNorm, Softmax) costs
// about as much as this many multiply-adds, for StepThreads.
constexpr double kElementMacs = 16;

double Product(const std::vector<int64_t>& dims) {
  double p = 1;
  for (int64_t d : dims) p *= static_cast<double>(d);
  return p;
}

// The OpenMP count a primitive is made under: oneDNN sizes a primitive's
// scratchpad and splits its work by it, so a step never runs on more.
int CurrentOmpThreads() {
#if DNNL_CPU_THREADING_RUNTIME == DNNL_RUNTIME_OMP
  return omp_get_max_threads();
#else
  return 1;
#endif
}

memory::desc PlainDesc(const memory::dims& dims) {
  memory::dims strides(dims.size(), 1);
  for (int d = static_cast<int>(dims.size()) - 2; d >= 0; --d) strides[d] = strides[d + 1] * dims[d + 1];
  return memory::desc(dims, memory::data_type::f32, strides);
}

memory::desc AnyDesc(const memory::dims& dims) {
  return memory::desc(dims, memory::data_type::f32, memory::format_tag::any);
}

absl::Status DnnlError(absl::string_view what, dnnl_status_t status) {
  return absl::InternalError(absl::StrCat("oneDNN ", what, " failed (dnnl_status_t ", static_cast<int>(status), ")"));
}

}  // namespace

// One argument of the primitive: a step input or output in grove's plain
// layout, reordered into (out of) oneDNN's layout in the workspace when the
// primitive wants another, or taken from `packed` when it is the weight the
// prepare reordered and the invoke sees the same bytes.
struct OneDnnOperand {
  int arg = 0;          // DNNL_ARG_*
  bool output = false;  // ctx.output(index), else ctx.input(index)
  int index = 0;
  memory user;          // the plain layout; handle bound per run
  bool reordered = false;
  memory inner;         // oneDNN's layout at `offset` in the workspace
  uint64_t offset = 0;
  dnnl::reorder reorder;  // user -> inner (inputs), inner -> user (outputs)
  const void* packed_from = nullptr;
  memory packed;
  // The inner array is written by the step before (an input) or read by the
  // step after (an output), LinkOneDnnSteps: no user memory, no reorder.
  bool linked = false;
};

class OneDnnStep {
 public:
  dnnl::stream stream;
  dnnl::primitive primitive;
  std::string impl;
  std::vector<OneDnnOperand> operands;
  bool has_scratchpad = false;
  memory scratchpad;
  uint64_t scratchpad_offset = 0;
  std::vector<dnnl_exec_arg_t> args;  // filled per run, never resized
  int threads = 1;                     // the OpenMP count it was made under (CurrentOmpThreads)
  // A fused activation the primitive did not take: applied to output 0
  // (plain f32, `post_op_elements` of them) after it.
  PostOp post_op_after;
  int64_t post_op_elements = 0;
};

bool OneDnnEnabled() { return EnabledFlag().load(std::memory_order_relaxed); }
void SetOneDnnEnabled(bool enabled) { EnabledFlag().store(enabled, std::memory_order_relaxed); }

namespace {

// The workspace offset of a new array of `bytes` in `layout`.
uint64_t Reserve(WorkspaceLayout* layout, uint64_t bytes) {
  const uint64_t offset = AlignWorkspace(layout->bytes());
  layout->AddBytes(bytes);
  return offset;
}

// Adds the operand for `arg` of the primitive; `want` is the layout the
// primitive chose. A weight whose bytes the prepare sees is reordered now,
// once. Returns false when a reorder would need a scratchpad of its own (then
// the caller gives the step up).
bool AddOperand(const ir::KernelContext& ctx, OneDnnStep& step, int arg, bool output, int index,
                const memory::desc& plain, const memory::desc& want, bool pack, WorkspaceLayout* layout) {
  const dnnl::engine& engine = CpuEngine();
  OneDnnOperand op;
  op.arg = arg;
  op.output = output;
  op.index = index;
  op.user = memory(plain, engine, DNNL_MEMORY_NONE);
  if (want != plain) {
    op.reordered = true;
    op.inner = memory(want, engine, DNNL_MEMORY_NONE);
    op.offset = Reserve(layout, want.get_size());
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    const dnnl::reorder::primitive_desc pd = output ? dnnl::reorder::primitive_desc(engine, want, engine, plain, attr)
                                                    : dnnl::reorder::primitive_desc(engine, plain, engine, want, attr);
    if (pd.scratchpad_desc().get_size() != 0) return false;
    op.reorder = dnnl::reorder(pd);
    const void* bytes = output ? nullptr : ctx.input(index).data;
    if (pack && bytes != nullptr) {
      op.packed = memory(want, engine);
      memory source(plain, engine, const_cast<void*>(bytes));
      op.reorder.execute(step.stream, source, op.packed);
      step.stream.wait();
      op.packed_from = bytes;
    }
  }
  step.operands.push_back(std::move(op));
  return true;
}

// The scratchpad (in the workspace) and the argument array, once every
// operand is added.
void Finish(OneDnnStep& step, const memory::desc& scratch, WorkspaceLayout* layout) {
  if (scratch.get_size() > 0) {
    step.has_scratchpad = true;
    step.scratchpad = memory(scratch, CpuEngine(), DNNL_MEMORY_NONE);
    step.scratchpad_offset = Reserve(layout, scratch.get_size());
  }
  step.args.resize(step.operands.size() + (step.has_scratchpad ? 1 : 0));
  step.threads = CurrentOmpThreads();
  g_steps_made.fetch_add(1, std::memory_order_relaxed);
}

// The oneDNN eltwise algorithm of a fused activation and its alpha, beta
// (dnnl_eltwise_desc_t's meaning); false for kNone.
bool EltwiseOf(const PostOp& op, dnnl::algorithm* alg, float* alpha, float* beta) {
  *alpha = 0.0f;
  *beta = 0.0f;
  switch (op.kind) {
    case PostOpKind::kNone:
      return false;
    case PostOpKind::kRelu:
      *alg = dnnl::algorithm::eltwise_relu;
      return true;
    case PostOpKind::kLeakyRelu:
      *alg = dnnl::algorithm::eltwise_relu;
      *alpha = op.alpha;
      return true;
    case PostOpKind::kClip:
      *alg = dnnl::algorithm::eltwise_clip_v2;
      *alpha = op.alpha;
      *beta = op.beta;
      return true;
    case PostOpKind::kSigmoid:
      *alg = dnnl::algorithm::eltwise_logistic;
      return true;
    case PostOpKind::kTanh:
      *alg = dnnl::algorithm::eltwise_tanh;
      return true;
    case PostOpKind::kGelu:
      *alg = dnnl::algorithm::eltwise_gelu_erf;
      return true;
    case PostOpKind::kGeluTanh:
      *alg = dnnl::algorithm::eltwise_gelu_tanh;
      return true;
    case PostOpKind::kElu:
      *alg = dnnl::algorithm::eltwise_elu;
      *alpha = op.alpha;
      return true;
    case PostOpKind::kHardSwish:
      *alg = dnnl::algorithm::eltwise_hardswish;
      return true;
    case PostOpKind::kSoftplus:
      *alg = dnnl::algorithm::eltwise_soft_relu;
      return true;
  }
  return false;
}

// The attributes of a primitive: the user scratchpad, alpha as output
// scales, then post-ops: a sum (beta), an added `bias` (binary add of a
// tensor broadcast to dst) and the fused activation `post_op`, in that order.
dnnl::primitive_attr MakeAttr(float alpha, std::optional<float> sum, const PostOp* post_op,
                              const memory::desc* bias = nullptr) {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  if (alpha != 1.0f) attr.set_output_scales(0, {alpha});
  dnnl::post_ops ops;
  if (sum.has_value()) ops.append_sum(*sum);
  if (bias != nullptr) ops.append_binary(dnnl::algorithm::binary_add, *bias);
  dnnl::algorithm alg;
  float a, b;
  if (post_op != nullptr && EltwiseOf(*post_op, &alg, &a, &b)) ops.append_eltwise(1.0f, alg, a, b);
  if (ops.len() > 0) attr.set_post_ops(ops);
  return attr;
}

bool IsReferenceImpl(absl::string_view impl) { return impl.substr(0, 4) == "ref:"; }

// Makes the primitive descriptor of `desc` with the fused activation as a
// post-op, or, when no implementation better than oneDNN's reference takes
// the post-op, without it (then the invoke applies it after: `*after`).
// nullopt when neither form has one. `bias`: see MakeAttr.
template <typename PrimitiveDesc, typename Desc>
std::optional<PrimitiveDesc> MakeWithPostOp(const Desc& desc, float alpha, std::optional<float> sum,
                                            const PostOp& post_op, bool* after,
                                            const memory::desc* bias = nullptr) {
  *after = false;
  const dnnl::engine& engine = CpuEngine();
  const bool has_post_op = post_op.kind != PostOpKind::kNone;
  if (has_post_op) {
    try {
      PrimitiveDesc pd(desc, MakeAttr(alpha, sum, &post_op, bias), engine, /*allow_empty=*/true);
      if (pd && !IsReferenceImpl(pd.impl_info_str())) return pd;
    } catch (const dnnl::error&) {
      // Retried without the post-op below.
    }
  }
  PrimitiveDesc pd(desc, MakeAttr(alpha, sum, nullptr, bias), engine, /*allow_empty=*/true);
  if (!pd || IsReferenceImpl(pd.impl_info_str())) return std::nullopt;
  *after = has_post_op;
  return pd;
}

// A row-major [..., rows, cols] matrix stored transposed ([..., cols, rows])
// when `transposed`.
memory::desc MatrixDesc(const memory::dims& dims, bool transposed) {
  memory::desc plain = PlainDesc(dims);
  if (!transposed) return plain;
  const int r = static_cast<int>(dims.size());
  memory::dims strides(dims.size(), 1);
  const int64_t rows = dims[r - 2], cols = dims[r - 1];
  strides[r - 2] = 1;
  strides[r - 1] = rows;
  int64_t step = rows * cols;
  for (int d = r - 3; d >= 0; --d) {
    strides[d] = step;
    step *= dims[d];
  }
  return memory::desc(dims, memory::data_type::f32, strides);
}

}  // namespace

absl::StatusOr<std::shared_ptr<OneDnnStep>> PrepareOneDnnMatMul(const ir::KernelContext& ctx,
                                                                const OneDnnMatMulShape& shape,
                                                                WorkspaceLayout* layout) {
  if (!OneDnnEnabled()) return nullptr;
  if (ctx.input(0).dtype != DType::kF32 || ctx.input(1).dtype != DType::kF32) return nullptr;
  const size_t rank = shape.y.size();
  if (rank < 2 || rank > 12 || shape.a.size() != rank || shape.b.size() != rank) return nullptr;
  for (const memory::dims* dims : {&shape.a, &shape.b, &shape.y}) {
    for (int64_t d : *dims) {
      if (d <= 0) return nullptr;  // empty products and k == 0: the reference kernel
    }
  }
  // Y's elements times K, which is A's last two dims over M.
  const double k = static_cast<double>(shape.a[rank - 1]) * static_cast<double>(shape.a[rank - 2]) /
                   static_cast<double>(shape.y[rank - 2]);
  OmpThreadScope threads(StepThreads(ctx, Product(shape.y) * k));
  try {
    const dnnl::engine& engine = CpuEngine();
    const memory::desc a = MatrixDesc(shape.a, shape.trans_a);
    const memory::desc b = MatrixDesc(shape.b, shape.trans_b);
    const memory::desc y = PlainDesc(shape.y);
    // Weights the prepare sees (a model's) may be packed into oneDNN's layout.
    const bool constant_b = ctx.input(1).data != nullptr;
    const dnnl::matmul::desc desc(a, constant_b ? AnyDesc(shape.b) : b, y);
    // The bias as oneDNN's binary post-op reads it: [1, ..., 1, N].
    memory::dims bias_dims(rank, 1);
    bias_dims.back() = shape.y.back();
    const memory::desc bias = PlainDesc(bias_dims);
    if (shape.bias && (!ctx.has_input(2) || ctx.input(2).dtype != DType::kF32 ||
                       ctx.input(2).num_elements() != shape.y.back())) {
      return nullptr;
    }
    bool after = false;
    const std::optional<dnnl::matmul::primitive_desc> made = MakeWithPostOp<dnnl::matmul::primitive_desc>(
        desc, shape.alpha, shape.accumulate ? std::optional<float>(shape.beta) : std::nullopt, shape.post_op,
        &after, shape.bias ? &bias : nullptr);
    if (!made.has_value()) return nullptr;
    const dnnl::matmul::primitive_desc& pd = *made;
    auto step = std::make_shared<OneDnnStep>();
    step->impl = pd.impl_info_str();
    // Y must be oneDNN's dst as it is: the sum post-op reads what it holds.
    if (pd.dst_desc() != y || pd.src_desc() != a) return nullptr;
    if (after) {
      step->post_op_after = shape.post_op;
      step->post_op_elements = static_cast<int64_t>(pd.dst_desc().get_size() / sizeof(float));
    }
    step->stream = dnnl::stream(engine);
    step->primitive = dnnl::matmul(pd);
    if (!AddOperand(ctx, *step, DNNL_ARG_SRC, false, 0, a, pd.src_desc(), false, layout) ||
        !AddOperand(ctx, *step, DNNL_ARG_WEIGHTS, false, 1, b, pd.weights_desc(), true, layout) ||
        !AddOperand(ctx, *step, DNNL_ARG_DST, true, 0, y, pd.dst_desc(), false, layout)) {
      return nullptr;
    }
    const int bias_post_op = shape.accumulate ? 1 : 0;  // its index among the post-ops
    if (shape.bias && !AddOperand(ctx, *step, DNNL_ARG_ATTR_MULTIPLE_POST_OP(bias_post_op) | DNNL_ARG_SRC_1, false,
                                  2, bias, bias, false, layout)) {
      return nullptr;
    }
    Finish(*step, pd.scratchpad_desc(), layout);
    return step;
  } catch (const dnnl::error& e) {
    return nullptr;
  }
}

absl::StatusOr<std::shared_ptr<OneDnnStep>> PrepareOneDnnConv(const ir::KernelContext& ctx,
                                                              const backends::ConvShape& conv,
                                                              WorkspaceLayout* layout, const PostOp& post_op) {
  if (!OneDnnEnabled()) return nullptr;
  const TensorView& x = ctx.input(0);
  const bool has_bias = ctx.has_input(2);
  if (x.dtype != DType::kF32 || ctx.input(1).dtype != DType::kF32 ||
      (has_bias && ctx.input(2).dtype != DType::kF32)) {
    return nullptr;
  }
  const backends::Window& w = conv.w;
  if (conv.spatial < 1 || conv.spatial > 3) return nullptr;
  // Empty tensors stay with the reference kernel, which writes Y = B when C
  // is 0 and nothing when Y is empty.
  if (conv.n == 0 || conv.c == 0 || conv.m == 0 || w.in_size == 0 || w.out_size <= 0) return nullptr;
  const int64_t group = conv.group, cg = conv.c / group, mg = conv.m / group;
  memory::dims src = {conv.n, conv.c}, dst = {conv.n, conv.m}, weights;
  if (group > 1) {
    weights = {group, mg, cg};
  } else {
    weights = {conv.m, conv.c};
  }
  memory::dims strides, dilates, pad_l, pad_r;
  for (int d = 0; d < w.spatial; ++d) {
    src.push_back(w.in[d]);
    dst.push_back(w.out[d]);
    weights.push_back(w.kernel[d]);
    strides.push_back(w.strides[d]);
    dilates.push_back(w.dilations[d] - 1);  // oneDNN counts the taps skipped
    pad_l.push_back(w.pad_begin[d]);
    pad_r.push_back(w.pad_end[d]);
  }
  const memory::dims bias = {conv.m};
  double taps = 1;  // multiply-adds per output element: C / group times the kernel's taps
  for (int d = 0; d < w.spatial; ++d) taps *= static_cast<double>(w.kernel[d]);
  OmpThreadScope threads(StepThreads(ctx, Product(dst) * static_cast<double>(cg) * taps));
  try {
    const dnnl::engine& engine = CpuEngine();
    const auto kind = dnnl::prop_kind::forward_inference;
    const auto alg = dnnl::algorithm::convolution_direct;
    const dnnl::convolution_forward::desc desc =
        has_bias ? dnnl::convolution_forward::desc(kind, alg, AnyDesc(src), AnyDesc(weights), PlainDesc(bias),
                                                   AnyDesc(dst), strides, dilates, pad_l, pad_r)
                 : dnnl::convolution_forward::desc(kind, alg, AnyDesc(src), AnyDesc(weights), AnyDesc(dst), strides,
                                                   dilates, pad_l, pad_r);
    // oneDNN's reference convolution is a loop nest slower than im2col + GEMM:
    // MakeWithPostOp refuses it.
    bool after = false;
    const std::optional<dnnl::convolution_forward::primitive_desc> made =
        MakeWithPostOp<dnnl::convolution_forward::primitive_desc>(desc, 1.0f, std::nullopt, post_op, &after);
    if (!made.has_value()) return nullptr;
    const dnnl::convolution_forward::primitive_desc& pd = *made;
    auto step = std::make_shared<OneDnnStep>();
    step->impl = pd.impl_info_str();
    if (after) {
      step->post_op_after = post_op;
      step->post_op_elements = conv.n * conv.m * w.out_size;
    }
    step->stream = dnnl::stream(engine);
    step->primitive = dnnl::convolution_forward(pd);
    if (!AddOperand(ctx, *step, DNNL_ARG_SRC, false, 0, PlainDesc(src), pd.src_desc(), false, layout) ||
        !AddOperand(ctx, *step, DNNL_ARG_WEIGHTS, false, 1, PlainDesc(weights), pd.weights_desc(), true,
                    layout) ||
        (has_bias &&
         !AddOperand(ctx, *step, DNNL_ARG_BIAS, false, 2, PlainDesc(bias), pd.bias_desc(), false, layout)) ||
        !AddOperand(ctx, *step, DNNL_ARG_DST, true, 0, PlainDesc(dst), pd.dst_desc(), false, layout)) {
      return nullptr;
    }
    Finish(*step, pd.scratchpad_desc(), layout);
    return step;
  } catch (const dnnl::error& e) {
    // Whatever oneDNN cannot make, the reference kernel computes.
    return nullptr;
  }
}

absl::StatusOr<std::shared_ptr<OneDnnStep>> PrepareOneDnnPool(const ir::KernelContext& ctx,
                                                              const backends::Window& w, bool max,
                                                              bool include_padding, WorkspaceLayout* layout) {
  if (!OneDnnEnabled()) return nullptr;
  const TensorView& x = ctx.input(0);
  if (x.dtype != DType::kF32 || x.shape.size() < 3 || w.spatial < 1 || w.spatial > 3) return nullptr;
  const int64_t n = x.shape[0], c = x.shape[1];
  if (n == 0 || c == 0 || w.in_size == 0 || w.out_size <= 0 || w.kernel_size <= 0) return nullptr;
  memory::dims src = {n, c}, dst = {n, c}, kernel, strides, dilation, pad_l, pad_r;
  for (int d = 0; d < w.spatial; ++d) {
    const int64_t in = w.in[d], k = w.kernel[d], s = w.strides[d], dil = w.dilations[d];
    const int64_t begin = w.pad_begin[d], out = w.out[d];
    // Every window holds an input element: the first tap at or past 0 of
    // each window must fall before the input's end.
    for (int64_t o = 0; o < out; ++o) {
      const int64_t start = o * s - begin;
      const int64_t first = start >= 0 ? 0 : (-start + dil - 1) / dil;
      if (first >= k || start + first * dil >= in) return nullptr;
    }
    // The end padding oneDNN needs for `out` windows (ceil_mode may pass
    // pad_end); with count_include_pad it must be pad_end itself.
    const int64_t needed = (out - 1) * s + (k - 1) * dil + 1 - in - begin;
    if (include_padding && needed > w.pad_end[d]) return nullptr;
    src.push_back(in);
    dst.push_back(out);
    kernel.push_back(k);
    strides.push_back(s);
    dilation.push_back(dil - 1);
    pad_l.push_back(begin);
    pad_r.push_back(std::max(needed, w.pad_end[d]));
  }
  const auto alg = max ? dnnl::algorithm::pooling_max
                       : (include_padding ? dnnl::algorithm::pooling_avg_include_padding
                                          : dnnl::algorithm::pooling_avg_exclude_padding);
  OmpThreadScope threads(StepThreads(ctx, Product(src) * kElementMacs));
  try {
    const dnnl::engine& engine = CpuEngine();
    const memory::desc src_desc = PlainDesc(src), dst_desc = PlainDesc(dst);
    // oneDNN's JIT pooling reads channel-blocked (16c with AVX-512, 8c with
    // AVX2) or channels-last layouts; on grove's NC... layout it has only a
    // scalar loop. The first layout a JIT implementation takes is used, with
    // reorders into and out of it in the workspace.
    using tag = memory::format_tag;
    const std::vector<tag> layouts = w.spatial == 1   ? std::vector<tag>{tag::nCw16c, tag::nCw8c, tag::nwc}
                                     : w.spatial == 2 ? std::vector<tag>{tag::nChw16c, tag::nChw8c, tag::nhwc}
                                                      : std::vector<tag>{tag::nCdhw16c, tag::nCdhw8c, tag::ndhwc};
    std::optional<dnnl::pooling_v2_forward::primitive_desc> made;
    for (tag layout : layouts) {
      const memory::desc inner_src(src, memory::data_type::f32, layout);
      const memory::desc inner_dst(dst, memory::data_type::f32, layout);
      const dnnl::pooling_v2_forward::desc desc(dnnl::prop_kind::forward_inference, alg, inner_src, inner_dst,
                                                strides, kernel, dilation, pad_l, pad_r);
      dnnl::pooling_v2_forward::primitive_desc pd(desc, MakeAttr(1.0f, std::nullopt, nullptr), engine,
                                                  /*allow_empty=*/true);
      if (pd && absl::string_view(pd.impl_info_str()).substr(0, 3) == "jit") {
        made = std::move(pd);
        break;
      }
    }
    if (!made.has_value()) return nullptr;
    const dnnl::pooling_v2_forward::primitive_desc& pd = *made;
    auto step = std::make_shared<OneDnnStep>();
    step->impl = pd.impl_info_str();
    step->stream = dnnl::stream(engine);
    step->primitive = dnnl::pooling_v2_forward(pd);
    if (!AddOperand(ctx, *step, DNNL_ARG_SRC, false, 0, src_desc, pd.src_desc(), false, layout) ||
        !AddOperand(ctx, *step, DNNL_ARG_DST, true, 0, dst_desc, pd.dst_desc(), false, layout)) {
      return nullptr;
    }
    Finish(*step, pd.scratchpad_desc(), layout);
    return step;
  } catch (const dnnl::error& e) {
    return nullptr;
  }
}

absl::StatusOr<std::shared_ptr<OneDnnStep>> PrepareOneDnnBatchNorm(const ir::KernelContext& ctx, float epsilon,
                                                                   WorkspaceLayout* layout) {
  if (!OneDnnEnabled()) return nullptr;
  const TensorView& x = ctx.input(0);
  if (x.shape.size() < 2 || x.shape.size() > 5) return nullptr;
  for (int i = 0; i < 5; ++i) {
    if (!ctx.has_input(i) || ctx.input(i).dtype != DType::kF32) return nullptr;
  }
  if (x.num_elements() == 0) return nullptr;
  memory::dims dims(x.shape.begin(), x.shape.end());
  // [N, C] and [N, C, W] as [N, C, 1, 1] and [N, C, W, 1], the same bytes:
  // oneDNN's JIT code has no blocked layout of rank 2 or 3.
  while (dims.size() < 4) dims.push_back(1);
  const memory::dims channels = {x.shape[1]};
  OmpThreadScope threads(StepThreads(ctx, Product(dims) * kElementMacs));
  try {
    const dnnl::engine& engine = CpuEngine();
    const memory::desc data = PlainDesc(dims), vector = PlainDesc(channels);
    const auto flags = dnnl::normalization_flags::use_global_stats | dnnl::normalization_flags::use_scale |
                       dnnl::normalization_flags::use_shift;
    // As for pooling: oneDNN's JIT batch normalization reads channel-blocked
    // or channels-last layouts (on NC... it has a plain C++ loop).
    using tag = memory::format_tag;
    std::vector<tag> layouts;
    if (dims.size() == 4) {
      layouts = {tag::nChw16c, tag::nChw8c, tag::nhwc};
    } else {
      layouts = {tag::nCdhw16c, tag::nCdhw8c, tag::ndhwc};
    }
    std::optional<dnnl::batch_normalization_forward::primitive_desc> made;
    for (tag layout : layouts) {
      const memory::desc inner(dims, memory::data_type::f32, layout);
      const dnnl::batch_normalization_forward::desc desc(dnnl::prop_kind::forward_inference, inner, epsilon, flags);
      dnnl::batch_normalization_forward::primitive_desc pd(desc, MakeAttr(1.0f, std::nullopt, nullptr), engine,
                                                           /*allow_empty=*/true);
      // "bnorm_jit:avx2", "bnorm_jit:avx512_core", ...
      if (pd && absl::StrContains(pd.impl_info_str(), "jit")) {
        made = std::move(pd);
        break;
      }
    }
    if (!made.has_value()) return nullptr;
    const dnnl::batch_normalization_forward::primitive_desc& pd = *made;
    auto step = std::make_shared<OneDnnStep>();
    step->impl = pd.impl_info_str();
    step->stream = dnnl::stream(engine);
    step->primitive = dnnl::batch_normalization_forward(pd);
    const std::pair<int, int> vectors[] = {
        {DNNL_ARG_SCALE, 1}, {DNNL_ARG_SHIFT, 2}, {DNNL_ARG_MEAN, 3}, {DNNL_ARG_VARIANCE, 4}};
    if (!AddOperand(ctx, *step, DNNL_ARG_SRC, false, 0, data, pd.src_desc(), false, layout)) return nullptr;
    for (const auto& [arg, index] : vectors) {
      if (!AddOperand(ctx, *step, arg, false, index, vector, vector, false, layout)) return nullptr;
    }
    if (!AddOperand(ctx, *step, DNNL_ARG_DST, true, 0, data, pd.dst_desc(), false, layout)) return nullptr;
    Finish(*step, pd.scratchpad_desc(), layout);
    return step;
  } catch (const dnnl::error& e) {
    return nullptr;
  }
}

absl::StatusOr<std::shared_ptr<OneDnnStep>> PrepareOneDnnSoftmax(const ir::KernelContext& ctx, int64_t rows,
                                                                 int64_t n, WorkspaceLayout* layout) {
  if (!OneDnnEnabled()) return nullptr;
  if (ctx.input(0).dtype != DType::kF32 || rows <= 0 || n <= 0) return nullptr;
  OmpThreadScope threads(StepThreads(ctx, static_cast<double>(rows) * static_cast<double>(n) * kElementMacs));
  try {
    const dnnl::engine& engine = CpuEngine();
    const memory::desc data = PlainDesc({rows, n});
    const dnnl::softmax_v2_forward::desc desc(dnnl::prop_kind::forward_inference, dnnl::algorithm::softmax_accurate,
                                              data, data, /*softmax_axis=*/1);
    const dnnl::softmax_v2_forward::primitive_desc pd(desc, MakeAttr(1.0f, std::nullopt, nullptr), engine,
                                                      /*allow_empty=*/true);
    if (!pd || IsReferenceImpl(pd.impl_info_str())) return nullptr;
    auto step = std::make_shared<OneDnnStep>();
    step->impl = pd.impl_info_str();
    step->stream = dnnl::stream(engine);
    step->primitive = dnnl::softmax_v2_forward(pd);
    if (!AddOperand(ctx, *step, DNNL_ARG_SRC, false, 0, data, pd.src_desc(), false, layout) ||
        !AddOperand(ctx, *step, DNNL_ARG_DST, true, 0, data, pd.dst_desc(), false, layout)) {
      return nullptr;
    }
    Finish(*step, pd.scratchpad_desc(), layout);
    return step;
  } catch (const dnnl::error& e) {
    return nullptr;
  }
}

absl::Status RunOneDnnStep(OneDnnStep& step, ir::KernelContext& ctx) {
  OmpThreadScope threads(std::min(SessionThreads(ctx), step.threads));
  uint8_t* workspace = static_cast<uint8_t*>(ctx.workspace());
  dnnl_stream_t stream = step.stream.get();
  auto bind = [&](const memory& m, void* data) { return dnnl_memory_set_data_handle_v2(m.get(), data, stream); };
  auto reorder = [&](const OneDnnOperand& op, const memory& from, const memory& to) {
    const dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, from.get()}, {DNNL_ARG_TO, to.get()}};
    return dnnl_primitive_execute(op.reorder.get(), stream, 2, args);
  };
  for (size_t i = 0; i < step.operands.size(); ++i) {
    OneDnnOperand& op = step.operands[i];
    if (op.linked) {
      if (workspace == nullptr) return ctx.Error("the oneDNN step has no workspace");
      if (dnnl_status_t s = bind(op.inner, workspace + op.offset); s != dnnl_success) {
        return DnnlError("binding a workspace array", s);
      }
      step.args[i] = {op.arg, op.inner.get()};
      continue;
    }
    void* data = op.output ? ctx.output(op.index).data : ctx.input(op.index).data;
    dnnl_memory_t arg = op.user.get();
    if (op.packed_from != nullptr && data == op.packed_from) {
      arg = op.packed.get();
    } else {
      if (dnnl_status_t s = bind(op.user, data); s != dnnl_success) return DnnlError("binding an argument", s);
      if (op.reordered) {
        if (workspace == nullptr) return ctx.Error("the oneDNN step has no workspace");
        if (dnnl_status_t s = bind(op.inner, workspace + op.offset); s != dnnl_success) {
          return DnnlError("binding a workspace array", s);
        }
        if (!op.output) {
          if (dnnl_status_t s = reorder(op, op.user, op.inner); s != dnnl_success) return DnnlError("a reorder", s);
        }
        arg = op.inner.get();
      }
    }
    step.args[i] = {op.arg, arg};
  }
  if (step.has_scratchpad) {
    if (workspace == nullptr) return ctx.Error("the oneDNN step has no workspace");
    if (dnnl_status_t s = bind(step.scratchpad, workspace + step.scratchpad_offset); s != dnnl_success) {
      return DnnlError("binding the scratchpad", s);
    }
    step.args.back() = {DNNL_ARG_SCRATCHPAD, step.scratchpad.get()};
  }
  if (dnnl_status_t s = dnnl_primitive_execute(step.primitive.get(), stream, static_cast<int>(step.args.size()),
                                               step.args.data());
      s != dnnl_success) {
    return DnnlError(absl::StrCat("executing ", step.impl), s);
  }
  for (const OneDnnOperand& op : step.operands) {
    if (!op.output || !op.reordered || op.linked) continue;
    if (dnnl_status_t s = reorder(op, op.inner, op.user); s != dnnl_success) return DnnlError("a reorder", s);
  }
  if (dnnl_status_t s = dnnl_stream_wait(stream); s != dnnl_success) return DnnlError("waiting", s);
  if (step.post_op_after.kind != PostOpKind::kNone) {
    ApplyPostOp(step.post_op_after, static_cast<float*>(ctx.output(0).data), step.post_op_elements);
  }
  return absl::OkStatus();
}

namespace {

// The operand of `arg` on input or output 0, or nullptr (Step: const or not).
template <typename Step>
auto FindOperand(Step& step, int arg, bool output) -> decltype(&step.operands[0]) {
  for (auto& op : step.operands) {
    if (op.arg == arg && op.output == output && op.index == 0) return &op;
  }
  return nullptr;
}

}  // namespace

bool CanLinkOneDnnSteps(const OneDnnStep& first, const OneDnnStep& second) {
  if (first.post_op_after.kind != PostOpKind::kNone) return false;
  const OneDnnOperand* out = FindOperand(first, DNNL_ARG_DST, true);
  const OneDnnOperand* in = FindOperand(second, DNNL_ARG_SRC, false);
  return out != nullptr && in != nullptr && out->reordered && in->reordered && !out->linked && !in->linked &&
         in->packed_from == nullptr && out->inner.get_desc() == in->inner.get_desc();
}

void LinkOneDnnSteps(OneDnnStep& first, OneDnnStep& second, uint64_t second_workspace) {
  OneDnnOperand* out = FindOperand(first, DNNL_ARG_DST, true);
  OneDnnOperand* in = FindOperand(second, DNNL_ARG_SRC, false);
  out->offset = second_workspace + in->offset;
  out->linked = true;
  in->linked = true;
}

int64_t OneDnnStepsMade() { return g_steps_made.load(std::memory_order_relaxed); }

std::string OneDnnStepImpl(const OneDnnStep& step) { return step.impl; }

}  // namespace grove::cpu
