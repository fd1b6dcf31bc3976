// oneDNN steps: primitives and reorders made by a prepare (C++ API, whose
// errors are exceptions, caught here), run by the invoke through the C API on
// preallocated argument arrays.
#include "lib/backends/cpu/onednn.h"

#include "lib/backends/cpu/onednn_internal.h"

#include <oneapi/dnnl/dnnl.h>
#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <utility>
#include <vector>

#include "absl/hash/hash.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "lib/backends/cpu/onednn_tactics.h"
#include "lib/backends/cpu/parallel_for.h"

#if DNNL_CPU_THREADING_RUNTIME == DNNL_RUNTIME_OMP
// The OpenMP runtime oneDNN was built on (libgomp on Debian). Declared here
// rather than from <omp.h>, which clang finds only with libomp installed.
extern "C" int omp_get_max_threads(void);
extern "C" void omp_set_num_threads(int num_threads);
#endif

namespace grove::cpu {
namespace {

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

}  // namespace

// The CPU engine, made on first use; engines are thread-safe.
const dnnl::engine& CpuEngine() {
  static const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

#if DNNL_CPU_THREADING_RUNTIME == DNNL_RUNTIME_OMP
OmpThreadScope::OmpThreadScope(int threads) : before_(omp_get_max_threads()), threads_(threads) {
  if (before_ != threads_) omp_set_num_threads(threads_);
}
OmpThreadScope::~OmpThreadScope() {
  if (before_ != threads_) omp_set_num_threads(before_);
}
#else
OmpThreadScope::OmpThreadScope(int threads) : threads_(threads) {}
OmpThreadScope::~OmpThreadScope() = default;
#endif

absl::Status DnnlError(absl::string_view what, dnnl_status_t status) {
  return absl::InternalError(absl::StrCat("oneDNN ", what, " failed (dnnl_status_t ", static_cast<int>(status), ")"));
}

// The workspace offset of a new array of `bytes` in `layout`.
uint64_t ReserveWorkspace(WorkspaceLayout* layout, uint64_t bytes) {
  const uint64_t offset = AlignWorkspace(layout->bytes());
  layout->AddBytes(bytes);
  return offset;
}

namespace {

// The session's intra-op threads (SessionOptions::intra_op_threads): oneDNN
// cuts a large step into parts for them.
int SessionThreads(const ir::KernelContext& ctx) {
  ir::IntraOpThreads* threads = IntraOpThreadsOf(ctx);
  return threads == nullptr ? 1 : threads->num_threads();
}

// A step is cut into parts for the session's threads only when it is worth
// handing work to the pool (microseconds; more when a worker must be woken
// or the cores are busy): at least this many multiply-adds, some 10 us of
// one core's work. Smaller steps (a decode token's projections) stay on the
// calling thread. 2^21 before: on 2 threads, with the workers spinning
// between steps (thread_pool.h), 2^19 took a MobileNet-like CNN at 2x3x48x40
// from 0.080 to 0.059 ms, a GPT block at 2x64 from 0.19 to 0.16 ms, an
// encoder (d 64, FFN 2048) at 2x32 from 0.283 to 0.240 ms (grove bench,
// minimums of alternated runs), and left one-token steps as they were.
constexpr double kParallelMacs = 1 << 19;
int StepThreads(const ir::KernelContext& ctx, double macs) { return macs < kParallelMacs ? 1 : SessionThreads(ctx); }

// A step split over the session's threads is cut into this many parts per
// thread (onednn_internal.h), so that a thread that starts late (a worker
// waking up, another process on its core) leaves some of its share to the
// others, as ParallelFor's ranges do; one part per thread when each of them
// would be less than kTwoPartsMacs. A part costs some microseconds of its
// own (its primitive's call, its slices' reorders) and reads the whole
// weight: on 2 threads, a ResNet-like CNN at 1x3x64x64 (a 7x7 stem of 4.8M
// multiply-adds, basic blocks of 3.5M at 16x16 to 4x4) ran its Convs 10-20%
// faster in one part per thread than in two (0.194 -> 0.184 ms a run, per
// step 48 -> 42 us for the stem; grove bench --trace), and the same at
// 1x3x160x128, whose steps are 6-24M.
constexpr int kPartsPerThread = 2;
constexpr double kTwoPartsMacs = 1 << 21;

// How many parts a step of `macs` multiply-adds that runs on the session's
// threads is cut into.
int StepParts(const ir::KernelContext& ctx, double macs) {
  const int threads = SessionThreads(ctx);
  return macs >= static_cast<double>(threads * kPartsPerThread) * kTwoPartsMacs ? threads * kPartsPerThread
                                                                                   : threads;
}

// The kinds of a step's operands when its source is cut by the parts' input
// ranges and its destination by their output ranges; every other operand
// (weights, bias, statistics) is read whole by every part.
std::vector<SliceKind> SourceDestKinds(const OneDnnStep& step) {
  std::vector<SliceKind> kinds;
  for (const OneDnnOperand& op : step.operands) {
    kinds.push_back(op.arg == DNNL_ARG_SRC   ? SliceKind::kInput
                    : op.arg == DNNL_ARG_DST ? SliceKind::kOutput
                                             : SliceKind::kWhole);
  }
  return kinds;
}

// A window op (Conv, pooling) cut along the batch when it has more than one
// image, else along the output rows of its first spatial dim, each part
// reading the input rows its windows cover (`rows`, with the padding each
// part's primitive is given).
PartitionSpec WindowSpec(const OneDnnStep& step, int parts, int64_t n, const backends::Window& w,
                         std::vector<WindowSlice>* rows) {
  PartitionSpec spec;
  spec.kinds = SourceDestKinds(step);
  if (n >= 2) {
    spec.dim = 0;
    spec.output = EvenRanges(n, parts);
    spec.input = spec.output;
    return spec;
  }
  spec.dim = 2;
  spec.output = EvenRanges(w.out[0], parts);
  for (const SliceRange& out : spec.output) {
    rows->push_back(InputRowsOf(out, w.in[0], w.kernel[0], w.strides[0], w.dilations[0], w.pad_begin[0]));
    if (rows->back().input.end <= rows->back().input.begin) return PartitionSpec{};  // a part wholly in the padding
    spec.input.push_back(rows->back().input);
  }
  return spec;
}

// A per-channel op (pooling, BatchNormalization) of one image cut along its
// channels, in whole blocks of its source's layout (16 of nChw16c); no parts
// when the channels are not whole blocks.
PartitionSpec ChannelBlockSpec(const OneDnnStep& step, int parts, int64_t channels) {
  PartitionSpec spec;
  const OneDnnOperand* src = nullptr;
  for (const OneDnnOperand& op : step.operands) {
    if (op.arg == DNNL_ARG_SRC) src = &op;
  }
  if (src == nullptr) return spec;
  const int64_t block = InnerBlock(src->reordered ? src->inner.get_desc() : src->user.get_desc(), 1);
  if (channels % block != 0 || channels / block < 2) return spec;
  spec.dim = 1;
  spec.kinds = SourceDestKinds(step);
  for (const SliceRange& r : EvenRanges(channels / block, parts)) spec.output.push_back({r.begin * block, r.end * block});
  spec.input = spec.output;
  return spec;
}

// A memory-bound or exp-heavy element (pooling, BatchNorm, Softmax) costs
// about as much as this many multiply-adds, for StepThreads.
constexpr double kElementMacs = 16;

double Product(const std::vector<int64_t>& dims) {
  double p = 1;
  for (int64_t d : dims) p *= static_cast<double>(d);
  return p;
}


memory::desc PlainDesc(const memory::dims& dims) {
  memory::dims strides(dims.size(), 1);
  for (int d = static_cast<int>(dims.size()) - 2; d >= 0; --d) strides[d] = strides[d + 1] * dims[d + 1];
  return memory::desc(dims, memory::data_type::f32, strides);
}

// The channels-last tag of an activation with `spatial` spatial dims (1..3).
memory::format_tag ChannelsLastTag(int spatial) {
  return spatial == 1 ? memory::format_tag::nwc : spatial == 2 ? memory::format_tag::nhwc : memory::format_tag::ndhwc;
}

// An activation's layout in grove's memory: channels-last or plain.
memory::desc UserDesc(const memory::dims& dims, bool channels_last) {
  if (!channels_last || dims.size() < 3 || dims.size() > 5) return PlainDesc(dims);
  return memory::desc(dims, memory::data_type::f32, ChannelsLastTag(static_cast<int>(dims.size()) - 2));
}

memory::desc AnyDesc(const memory::dims& dims) {
  return memory::desc(dims, memory::data_type::f32, memory::format_tag::any);
}

}  // namespace

// A weight in the layout a primitive chose, reordered once and shared by
// every step (every plan, every session) that packs the same bytes into the
// same layout: a model's weights are reordered once per model, not once per
// plan. Found by the address of the bytes the prepare read (a model weight or
// a plan's folded value), a hash of them and both layouts; an entry lives
// while a step holds it, and a step holds the plan that holds the model (or
// the folded value), so while it lives nothing else owns those bytes at that
// address (the hash covers a folded value freed, and its address reused by
// another session's plan, before the step that holds its entry is).
struct PackedWeights {
  memory mem;
};

namespace {

struct PackedEntry {
  const void* bytes;
  size_t hash;  // of the bytes
  memory::desc plain, want;
  std::weak_ptr<const PackedWeights> weights;
};

std::atomic<int64_t> g_weights_packed{0};

// The shared packed copy of `bytes` (in `plain`) in `want`, made here when no
// live step holds one.
std::shared_ptr<const PackedWeights> PackedWeightsOf(const void* bytes, const memory::desc& plain,
                                                     const memory::desc& want, const dnnl::reorder& reorder,
                                                     dnnl::stream& stream) {
  static absl::Mutex mu(absl::kConstInit);
  static std::vector<PackedEntry>* entries = new std::vector<PackedEntry>();
  const size_t hash = absl::HashOf(absl::string_view(static_cast<const char*>(bytes), plain.get_size()));
  absl::MutexLock lock(&mu);
  for (const PackedEntry& e : *entries) {
    if (e.bytes != bytes || e.hash != hash || e.plain != plain || e.want != want) continue;
    if (std::shared_ptr<const PackedWeights> live = e.weights.lock()) return live;
  }
  auto weights = std::make_shared<PackedWeights>();
  weights->mem = memory(want, CpuEngine());
  memory source(plain, CpuEngine(), const_cast<void*>(bytes));
  reorder.execute(stream, source, weights->mem);
  stream.wait();
  g_weights_packed.fetch_add(1, std::memory_order_relaxed);
  entries->erase(std::remove_if(entries->begin(), entries->end(),
                                [](const PackedEntry& e) { return e.weights.expired(); }),
                 entries->end());
  entries->push_back({bytes, hash, plain, want, weights});
  return weights;
}

}  // namespace

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

bool OneDnnEnabled() { return EnabledFlag().load(std::memory_order_relaxed); }
void SetOneDnnEnabled(bool enabled) { EnabledFlag().store(enabled, std::memory_order_relaxed); }

namespace {


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
    op.offset = static_cast<int64_t>(ReserveWorkspace(layout, want.get_size()));
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    const dnnl::reorder::primitive_desc pd = output ? dnnl::reorder::primitive_desc(engine, want, engine, plain, attr)
                                                    : dnnl::reorder::primitive_desc(engine, plain, engine, want, attr);
    if (pd.scratchpad_desc().get_size() != 0) return false;
    op.reorder = dnnl::reorder(pd);
    const void* bytes = output ? nullptr : ctx.input(index).data;
    if (pack && bytes != nullptr) {
      op.packed_owner = PackedWeightsOf(bytes, plain, want, op.reorder, step.stream);
      op.packed = op.packed_owner->mem;
      op.packed_from = bytes;
    }
  }
  step.operands.push_back(std::move(op));
  return true;
}

// The scratchpad (in the workspace) and the argument array, once every
// operand is added.
void Finish(OneDnnStep& step, const memory::desc& scratch, WorkspaceLayout* layout) {
  // A partitioned step runs its parts, each with a scratchpad of its own.
  if (step.parts.empty() && scratch.get_size() > 0) {
    step.has_scratchpad = true;
    step.scratchpad = memory(scratch, CpuEngine(), DNNL_MEMORY_NONE);
    step.scratchpad_offset = ReserveWorkspace(layout, scratch.get_size());
  }
  step.args.resize(step.operands.size() + step.constants.size() + (step.has_scratchpad ? 1 : 0));
  for (size_t i = 0; i < step.constants.size(); ++i) {
    step.args[step.operands.size() + i] = {step.constants[i].first, step.constants[i].second.get()};
  }
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
    case PostOpKind::kSilu:
      *alg = dnnl::algorithm::eltwise_swish;
      *alpha = 1.0f;  // x * sigmoid(alpha * x)
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
  const double step_macs = Product(shape.y) * k;
  const int step_threads = StepThreads(ctx, step_macs), step_parts = StepParts(ctx, step_macs);
  OmpThreadScope threads(1);  // a primitive runs on one thread; several run as parts
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
    if (step_threads > 1) {
      // Cut along the first of Y's dims before N with more than one row (a
      // batch dim, else M): a slice of A (or all of A, broadcast) and of B
      // (all of B when the cut is M's, or B broadcast) per part.
      PartitionSpec spec;
      for (size_t d = 0; d + 1 < rank && spec.output.empty(); ++d) {
        if (shape.y[d] < 2) continue;
        spec.dim = static_cast<int>(d);
        spec.output = EvenRanges(shape.y[d], step_parts);
        spec.input = spec.output;
        for (const OneDnnOperand& op : step->operands) {
          const bool cut = op.arg == DNNL_ARG_DST || (op.arg == DNNL_ARG_SRC && shape.a[d] == shape.y[d]) ||
                           (op.arg == DNNL_ARG_WEIGHTS && d + 2 < rank && shape.b[d] == shape.y[d]);
          spec.kinds.push_back(!cut ? SliceKind::kWhole
                                    : (op.arg == DNNL_ARG_DST ? SliceKind::kOutput : SliceKind::kInput));
        }
      }
      auto make_part = [&](int, const std::vector<memory::desc>& d) -> std::optional<MadePart> {
        bool part_after = false;
        const std::optional<dnnl::matmul::primitive_desc> part = MakeWithPostOp<dnnl::matmul::primitive_desc>(
            dnnl::matmul::desc(d[0], d[1], d[2]), shape.alpha,
            shape.accumulate ? std::optional<float>(shape.beta) : std::nullopt, shape.post_op, &part_after,
            shape.bias ? &bias : nullptr);
        if (!part.has_value() || part_after != after) return std::nullopt;
        MadePart made{dnnl::matmul(*part), part->impl_info_str(), part->scratchpad_desc(),
                      {part->src_desc(), part->weights_desc(), part->dst_desc()}};
        if (shape.bias) made.used.push_back(d[3]);
        return made;
      };
      if (!spec.output.empty()) PartitionOneDnnStep(*step, spec, make_part, layout);
    }
    Finish(*step, pd.scratchpad_desc(), layout);
    return step;
  } catch (const dnnl::error& e) {
    return nullptr;
  }
}

absl::StatusOr<std::shared_ptr<OneDnnStep>> PrepareOneDnnConv(const ir::KernelContext& ctx,
                                                              const backends::ConvShape& conv,
                                                              WorkspaceLayout* layout, const PostOp& post_op,
                                                              const ChannelAffine& affine, ChannelsLast io,
                                                              bool residual) {
  if (!OneDnnEnabled()) return nullptr;
  const TensorView& x = ctx.input(0);
  const bool has_bias = ctx.has_input(2);
  if (x.dtype != DType::kF32 || ctx.input(1).dtype != DType::kF32 ||
      (has_bias && ctx.input(2).dtype != DType::kF32) ||
      (residual && (!ctx.has_input(kResidualInput) || ctx.input(kResidualInput).dtype != DType::kF32))) {
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
  // Its multiply-adds, and its source and destination elements at a
  // memory-bound element's cost: a Conv with few input channels per group
  // (an RGB stem: 3, a depthwise one: 1) fills oneDNN's vectors poorly and
  // moves more bytes per multiply-add. Measured on one thread at 4x16x32x32:
  // the 3 -> 16 stem (1.8M multiply-adds) 75 us, the depthwise 3x3 and a
  // 1x1 Conv after it (1.6M) 75 us, where 16 -> 32 -> 32 3x3 Convs do 28M
  // in 281 us. Output channels count in whole vectors of 16 (AVX-512's
  // block; 8 output channels leave half of each empty): a 3 -> 8 Conv with
  // a MaxPool at 4x3x32x32 (0.9M multiply-adds) took 49 us.
  const double vector_channels = static_cast<double>((conv.m + 15) / 16 * 16);
  const double step_macs =
      Product(dst) / static_cast<double>(conv.m) * vector_channels * static_cast<double>(cg) * taps +
      kElementMacs * (Product(src) + Product(dst));
  const int step_threads = StepThreads(ctx, step_macs), step_parts = StepParts(ctx, step_macs);
  OmpThreadScope threads(1);  // a primitive runs on one thread; several run as parts
  try {
    const dnnl::engine& engine = CpuEngine();
    const auto kind = dnnl::prop_kind::forward_inference;
    const auto alg = dnnl::algorithm::convolution_direct;
    // src and dst in `io` (format_tag::any: oneDNN's pick).
    auto conv_desc = [&](memory::format_tag io) {
      const memory::desc s(src, memory::data_type::f32, io), d(dst, memory::data_type::f32, io);
      return has_bias ? dnnl::convolution_forward::desc(kind, alg, s, AnyDesc(weights), PlainDesc(bias), d, strides,
                                                        dilates, pad_l, pad_r)
                      : dnnl::convolution_forward::desc(kind, alg, s, AnyDesc(weights), d, strides, dilates, pad_l,
                                                        pad_r);
    };
    // A fused BatchNormalization: multiply and add of [1, M, 1...] in its
    // place among the post-ops, all taken by the primitive or no step.
    memory::dims channel_dims(src.size(), 1);
    channel_dims[1] = conv.m;
    const memory::desc channel = PlainDesc(channel_dims);
    if (!affine.empty() &&
        (static_cast<int64_t>(affine.scale.size()) != conv.m || static_cast<int64_t>(affine.shift.size()) != conv.m)) {
      return nullptr;
    }
    // A residual Add's tensor, in the layout grove stores Y in (the whole
    // of it, or a part's slice: make_part sets it).
    memory::desc residual_md = UserDesc(dst, io.dst);
    // oneDNN's reference convolution is a loop nest slower than im2col + GEMM:
    // both forms refuse it.
    bool after = false;
    auto make = [&](const dnnl::convolution_forward::desc& desc)
        -> std::optional<dnnl::convolution_forward::primitive_desc> {
      if (affine.empty() && !residual) {
        auto pd = MakeWithPostOp<dnnl::convolution_forward::primitive_desc>(desc, 1.0f, std::nullopt, post_op, &after);
        // oneDNN 2.6's im2col + GEMM convolution computes a logistic or swish
        // post-op per element with libm's expf: measured 2x slower on a
        // grouped Conv + SiLU than the Conv, then the vectorised Sigmoid
        // (ApplyPostOp) after it. A grouped Conv whose groups' output
        // channels do not fill 16 lanes computes it on part-empty vectors:
        // after it too (measured no slower, within noise).
        const bool exp_based = post_op.kind == PostOpKind::kSilu || post_op.kind == PostOpKind::kSigmoid;
        if (pd.has_value() && !after && exp_based &&
            (absl::StrContains(pd->impl_info_str(), "gemm") || (group > 1 && mg % 16 != 0))) {
          pd = MakeWithPostOp<dnnl::convolution_forward::primitive_desc>(desc, 1.0f, std::nullopt, PostOp{}, &after);
          after = pd.has_value();
        }
        return pd;
      }
      dnnl::primitive_attr attr;
      attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
      dnnl::post_ops ops;
      dnnl::algorithm alg;
      float a, b;
      const bool eltwise = EltwiseOf(post_op, &alg, &a, &b);
      if (post_op.kind != PostOpKind::kNone && !eltwise) return std::nullopt;
      // The activation first only for a BatchNormalization after it (never
      // with a residual Add: FuseActivations).
      const bool eltwise_first = eltwise && !affine.empty() && !affine.before_post_op;
      if (eltwise_first) ops.append_eltwise(1.0f, alg, a, b);
      if (!affine.empty()) {
        ops.append_binary(dnnl::algorithm::binary_mul, channel);
        ops.append_binary(dnnl::algorithm::binary_add, channel);
      }
      if (residual) ops.append_binary(dnnl::algorithm::binary_add, residual_md);
      if (eltwise && !eltwise_first) ops.append_eltwise(1.0f, alg, a, b);
      attr.set_post_ops(ops);
      dnnl::convolution_forward::primitive_desc pd(desc, attr, engine, /*allow_empty=*/true);
      if (!pd || IsReferenceImpl(pd.impl_info_str())) return std::nullopt;
      return pd;
    };
    std::optional<dnnl::convolution_forward::primitive_desc> made = make(conv_desc(memory::format_tag::any));
    // Channels-last instead, when oneDNN takes it with other than im2col + GEMM.
    auto prefer_channels_last = [&] {
      const bool other_after = after;
      std::optional<dnnl::convolution_forward::primitive_desc> nhwc = make(conv_desc(ChannelsLastTag(w.spatial)));
      if (nhwc.has_value() && !absl::StrContains(nhwc->impl_info_str(), "gemm")) {
        made = std::move(nhwc);
      } else {
        after = other_after;
      }
    };
    // A grouped Conv whose groups do not fill oneDNN's channel blocks (6
    // channels per group) gets only im2col + GEMM in the plain layout
    // (x64:gemm:jit); channels-last, brgconv may take it: measured faster.
    if (made.has_value() && group > 1 && cg > 1 && absl::StrContains(made->impl_info_str(), "gemm")) {
      prefer_channels_last();
    }
    // One image on several threads: its parts are slabs of output rows,
    // which a channel-blocked layout (nChw8c, AVX2's pick) does not keep
    // together. Channels-last does, when a JIT kernel takes it (on AVX2
    // `jit:avx2`, measured 1.2-1.3x slower than the blocked layout on one
    // thread; cut in two, still 1.6x faster than one thread).
    if (made.has_value() && step_threads > 1 && conv.n == 1 && w.out[0] >= 2 &&
        InnerBlock(made->dst_desc(), 1) > 1) {
      prefer_channels_last();
    }
    // Activations grove keeps channels-last: computed in that layout where
    // oneDNN has a JIT kernel for it, so neither side is reordered.
    if (made.has_value() && (io.src || io.dst) &&
        (made->src_desc() != UserDesc(src, true) || made->dst_desc() != UserDesc(dst, true))) {
      prefer_channels_last();
    }
    if (!made.has_value()) return nullptr;
    // What the descriptors do not say, for the implementation timing's key.
    auto problem = [&](const memory::dims& l, const memory::dims& r) {
      return absl::StrCat("conv s", absl::StrJoin(strides, ","), " d", absl::StrJoin(dilates, ","), " p",
                          absl::StrJoin(l, ","), "/", absl::StrJoin(r, ","));
    };
    const double macs_per_output = static_cast<double>(cg) * taps;
    // Timed whole even when parts will run it: the parts take the whole
    // step's weight layout, which only implementations of its kind read.
    ChooseFastestImpl(*made, Product(dst) * macs_per_output, problem(pad_l, pad_r));
    const dnnl::convolution_forward::primitive_desc& pd = *made;
    auto step = std::make_shared<OneDnnStep>();
    if (!affine.empty()) {
      // The binary post-ops' indices: after the eltwise one when it comes first.
      const int first = post_op.kind != PostOpKind::kNone && !affine.before_post_op ? 1 : 0;
      step->constant_data = {affine.scale, affine.shift};
      for (int i = 0; i < 2; ++i) {
        step->constants.emplace_back(DNNL_ARG_ATTR_MULTIPLE_POST_OP(first + i) | DNNL_ARG_SRC_1,
                                     memory(channel, engine, step->constant_data[i].data()));
      }
    }
    step->impl = pd.impl_info_str();
    if (after) {
      step->post_op_after = post_op;
      step->post_op_elements = conv.n * conv.m * w.out_size;
    }
    step->stream = dnnl::stream(engine);
    step->primitive = dnnl::convolution_forward(pd);
    if (!AddOperand(ctx, *step, DNNL_ARG_SRC, false, 0, UserDesc(src, io.src), pd.src_desc(), false, layout) ||
        !AddOperand(ctx, *step, DNNL_ARG_WEIGHTS, false, 1, PlainDesc(weights), pd.weights_desc(), true,
                    layout) ||
        (has_bias &&
         !AddOperand(ctx, *step, DNNL_ARG_BIAS, false, 2, PlainDesc(bias), pd.bias_desc(), false, layout)) ||
        !AddOperand(ctx, *step, DNNL_ARG_DST, true, 0, UserDesc(dst, io.dst), pd.dst_desc(), false, layout)) {
      return nullptr;
    }
    // Operands: SRC, WEIGHTS, BIAS (when there is one), DST, the residual
    // (when there is one: read in grove's layout, as the post-op was made).
    const size_t dst_k = has_bias ? 3 : 2, residual_k = dst_k + 1;
    if (residual) {
      const int index = affine.empty() ? 0 : 2;  // after the affine's two binary post-ops
      if (!AddOperand(ctx, *step, DNNL_ARG_ATTR_MULTIPLE_POST_OP(index) | DNNL_ARG_SRC_1, false, kResidualInput,
                      residual_md, residual_md, false, layout)) {
        return nullptr;
      }
    }
    if (step_threads > 1) {
      std::vector<WindowSlice> rows;
      PartitionSpec spec = WindowSpec(*step, step_parts, conv.n, w, &rows);
      // The residual is cut as Y is.
      if (residual && !spec.output.empty()) spec.kinds[residual_k] = SliceKind::kOutput;
      const bool whole_after = after;
      const memory::desc whole_residual = residual_md;
      auto make_part = [&](int i, const std::vector<memory::desc>& d) -> std::optional<MadePart> {
        memory::dims part_l = pad_l, part_r = pad_r;
        if (spec.dim == 2) {
          part_l[0] = rows[i].pad_begin;
          part_r[0] = rows[i].pad_end;
        }
        if (residual) residual_md = d[residual_k];
        std::optional<dnnl::convolution_forward::primitive_desc> part =
            make(has_bias ? dnnl::convolution_forward::desc(kind, alg, d[0], d[1], d[2], d[dst_k], strides, dilates,
                                                            part_l, part_r)
                          : dnnl::convolution_forward::desc(kind, alg, d[0], d[1], d[dst_k], strides, dilates,
                                                            part_l, part_r));
        residual_md = whole_residual;
        const bool part_after = after;
        after = whole_after;
        if (!part.has_value() || part_after != whole_after) return std::nullopt;
        ChooseFastestImpl(*part, Product(d[dst_k].dims()) * macs_per_output, problem(part_l, part_r));
        MadePart made{dnnl::convolution_forward(*part), part->impl_info_str(), part->scratchpad_desc(),
                      {part->src_desc(), part->weights_desc()}};
        if (has_bias) made.used.push_back(part->bias_desc());
        made.used.push_back(part->dst_desc());
        if (residual) made.used.push_back(d[residual_k]);
        return made;
      };
      if (!spec.output.empty()) PartitionOneDnnStep(*step, spec, make_part, layout);
    }
    Finish(*step, pd.scratchpad_desc(), layout);
    return step;
  } catch (const dnnl::error& e) {
    // Whatever oneDNN cannot make, the reference kernel computes.
    return nullptr;
  }
}

absl::StatusOr<std::shared_ptr<OneDnnStep>> PrepareOneDnnConvTranspose(const ir::KernelContext& ctx,
                                                                       const backends::ConvShape& conv,
                                                                       WorkspaceLayout* layout) {
  if (!OneDnnEnabled()) return nullptr;
  const bool has_bias = ctx.has_input(2);
  if (ctx.input(0).dtype != DType::kF32 || ctx.input(1).dtype != DType::kF32 ||
      (has_bias && ctx.input(2).dtype != DType::kF32)) {
    return nullptr;
  }
  const backends::Window& w = conv.w;
  if (conv.spatial < 1 || conv.spatial > 3) return nullptr;
  if (conv.n == 0 || conv.c == 0 || conv.m == 0 || w.in_size == 0 || w.out_size <= 0) return nullptr;
  const int64_t group = conv.group, cg = conv.c / group, mg = conv.m / group;
  memory::dims src = {conv.n, conv.c}, dst = {conv.n, conv.m}, weights, strides, dilates, pad_l, pad_r;
  double taps = 1;
  for (int d = 0; d < w.spatial; ++d) {
    src.push_back(w.in[d]);
    dst.push_back(w.out[d]);
    strides.push_back(w.strides[d]);
    dilates.push_back(w.dilations[d] - 1);  // oneDNN counts the taps skipped
    pad_l.push_back(w.pad_begin[d]);
    // out = (in - 1) * stride + (kernel - 1) * dilation + 1 - pad_l - pad_r:
    // output_padding and output_shape make pad_r smaller, maybe negative.
    pad_r.push_back((w.in[d] - 1) * w.strides[d] + (w.kernel[d] - 1) * w.dilations[d] + 1 - w.pad_begin[d] -
                    w.out[d]);
    taps *= static_cast<double>(w.kernel[d]);
  }
  // ONNX's W is [C, M / group, kernel...]: oneDNN's dims [M, C, kernel...]
  // ([group, M / group, C / group, kernel...]) with strides over that order.
  int64_t kernel_size = 1;
  for (int d = 0; d < w.spatial; ++d) kernel_size *= w.kernel[d];
  memory::dims weight_strides;
  if (group > 1) {
    weights = {group, mg, cg};
    weight_strides = {cg * mg * kernel_size, kernel_size, mg * kernel_size};
  } else {
    weights = {conv.m, conv.c};
    weight_strides = {kernel_size, conv.m * kernel_size};
  }
  int64_t inner = kernel_size;
  for (int d = 0; d < w.spatial; ++d) {
    weights.push_back(w.kernel[d]);
    inner /= w.kernel[d];
    weight_strides.push_back(inner);
  }
  const memory::desc user_weights(weights, memory::data_type::f32, weight_strides);
  // Its multiply-adds (each input element meets M / group output channels
  // at every tap), and its elements at a memory-bound element's cost.
  const double macs = Product(src) * static_cast<double>(mg) * taps + kElementMacs * (Product(src) + Product(dst));
  const int step_threads = StepThreads(ctx, macs), step_parts = StepParts(ctx, macs);
  OmpThreadScope threads(1);  // a primitive runs on one thread; several run as parts
  try {
    const dnnl::engine& engine = CpuEngine();
    const auto kind = dnnl::prop_kind::forward_inference;
    const auto alg = dnnl::algorithm::deconvolution_direct;
    // Without the bias: oneDNN 2.6 adds a deconvolution's bias in a loop
    // that took ~8x the deconvolution (a 32 -> 16 2x2/2 one over 32x48: 380
    // against 46 us; as a binary post-op, 7.4 ms); the invoke adds it after.
    auto make = [&](const memory::desc& s, const memory::desc& d)
        -> std::optional<dnnl::deconvolution_forward::primitive_desc> {
      const dnnl::deconvolution_forward::desc desc(kind, alg, s, AnyDesc(weights), d, strides, dilates, pad_l,
                                                   pad_r);
      dnnl::primitive_attr attr;
      attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
      dnnl::deconvolution_forward::primitive_desc pd(desc, attr, engine, /*allow_empty=*/true);
      if (!pd || IsReferenceImpl(pd.impl_info_str())) return std::nullopt;
      return pd;
    };
    // X and Y in oneDNN's pick of layout, reordered from and to grove's.
    std::optional<dnnl::deconvolution_forward::primitive_desc> made = make(AnyDesc(src), AnyDesc(dst));
    if (!made.has_value()) return nullptr;
    const dnnl::deconvolution_forward::primitive_desc& pd = *made;
    auto step = std::make_shared<OneDnnStep>();
    step->impl = pd.impl_info_str();
    step->stream = dnnl::stream(engine);
    step->primitive = dnnl::deconvolution_forward(pd);
    if (!AddOperand(ctx, *step, DNNL_ARG_SRC, false, 0, PlainDesc(src), pd.src_desc(), false, layout) ||
        !AddOperand(ctx, *step, DNNL_ARG_WEIGHTS, false, 1, user_weights, pd.weights_desc(), true, layout) ||
        !AddOperand(ctx, *step, DNNL_ARG_DST, true, 0, PlainDesc(dst), pd.dst_desc(), false, layout)) {
      return nullptr;
    }
    if (has_bias) {
      step->bias_after_input = 2;
      step->bias_after_images = conv.n;
      step->bias_after_channels = conv.m;
      step->bias_after_inner = w.out_size;
    }
    // Several images: parts of the batch, each a primitive of its own.
    if (step_threads > 1 && conv.n >= 2) {
      PartitionSpec spec;
      spec.kinds = SourceDestKinds(*step);
      spec.dim = 0;
      spec.output = EvenRanges(conv.n, step_parts);
      spec.input = spec.output;
      auto make_part = [&](int, const std::vector<memory::desc>& d) -> std::optional<MadePart> {
        std::optional<dnnl::deconvolution_forward::primitive_desc> part = make(d[0], d[2]);
        if (!part.has_value() || part->weights_desc() != pd.weights_desc()) return std::nullopt;
        return MadePart{dnnl::deconvolution_forward(*part), part->impl_info_str(), part->scratchpad_desc(),
                        {part->src_desc(), part->weights_desc(), part->dst_desc()}};
      };
      if (spec.output.size() >= 2) PartitionOneDnnStep(*step, spec, make_part, layout);
    }
    Finish(*step, pd.scratchpad_desc(), layout);
    return step;
  } catch (const dnnl::error& e) {
    return nullptr;
  }
}

namespace {

// How a pooling implementation is preferred, lower first; -1: not taken
// (oneDNN's reference loops). oneDNN 2.6's AVX and AVX2 pooling kernels
// reload a constant with a legacy-SSE movq in VEX code once per block of
// output columns, and a CPU that charges an SSE/AVX transition for it pays
// on every block: on this project's Xeon (AVX-512) they ran 5-12x slower than
// the SSE4.1 kernel on the same layout (MaxPool 2x2 of [8, 8, 64, 64] in
// nChw8c: 330-400 us against 33), and the AVX-512 kernel, whose zmm blocks
// do more work per transition, 1-4x slower where the channels do not fill
// its 16 lanes. So: AVX-512 first where the channels are a multiple of 16,
// else SSE4.1 first; AVX and AVX2 last.
int PoolImplRank(absl::string_view impl, int64_t channels) {
  if (impl.substr(0, 3) != "jit") return -1;
  const bool avx512 = absl::StrContains(impl, "avx512"), sse41 = absl::StrContains(impl, "sse41");
  if (channels % 16 == 0) return avx512 ? 0 : (sse41 ? 1 : 2);
  return sse41 ? 0 : (avx512 ? 1 : 2);
}

struct RankedPool {
  int rank = 0;
  dnnl::pooling_v2_forward::primitive_desc pd;
};

// The best-ranked implementation (PoolImplRank) oneDNN has for `desc`, or
// nullopt when it has only its reference loops.
std::optional<RankedPool> BestPoolImpl(const dnnl::pooling_v2_forward::desc& desc, int64_t channels) {
  const dnnl::primitive_attr attr = MakeAttr(1.0f, std::nullopt, nullptr);
  dnnl::pooling_v2_forward::primitive_desc pd(desc, attr, CpuEngine(), /*allow_empty=*/true);
  if (!pd) return std::nullopt;
  int best = -1, best_rank = 0;
  for (int i = 0;; ++i) {
    const int rank = PoolImplRank(pd.impl_info_str(), channels);
    if (rank >= 0 && (best < 0 || rank < best_rank)) {
      best = i;
      best_rank = rank;
    }
    if (!pd.next_impl()) break;
  }
  if (best < 0) return std::nullopt;
  RankedPool chosen{best_rank, dnnl::pooling_v2_forward::primitive_desc(desc, attr, CpuEngine())};
  for (int i = 0; i < best; ++i) chosen.pd.next_impl();
  return chosen;
}

}  // namespace

absl::StatusOr<std::shared_ptr<OneDnnStep>> PrepareOneDnnPool(const ir::KernelContext& ctx,
                                                              const backends::Window& w, bool max,
                                                              bool include_padding, WorkspaceLayout* layout,
                                                              const OneDnnStep* source, ChannelsLast io) {
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
  const double step_macs = Product(src) * kElementMacs;
  const int step_threads = StepThreads(ctx, step_macs), step_parts = StepParts(ctx, step_macs);
  OmpThreadScope threads(1);  // a primitive runs on one thread; several run as parts
  try {
    const dnnl::engine& engine = CpuEngine();
    const memory::desc src_desc = UserDesc(src, io.src), dst_desc = UserDesc(dst, io.dst);
    auto pool_desc = [&](const memory::desc& inner_src, const memory::desc& inner_dst) {
      return dnnl::pooling_v2_forward::desc(dnnl::prop_kind::forward_inference, alg, inner_src, inner_dst, strides,
                                            kernel, dilation, pad_l, pad_r);
    };
    std::optional<RankedPool> made;
    // The layout the step before hands over (a chain's link), when oneDNN
    // has a JIT kernel for it: no reorder on either side of the pool.
    if (source != nullptr) {
      const OneDnnOperand* handed = FindOperand(*source, DNNL_ARG_DST, true);
      if (handed != nullptr && handed->reordered && handed->inner.get_desc().dims() == src) {
        made = BestPoolImpl(pool_desc(handed->inner.get_desc(), AnyDesc(dst)), c);
      }
    }
    // oneDNN's JIT pooling reads channel-blocked (16c with AVX-512, 8c) or
    // channels-last layouts; on grove's NC... layout it has only a scalar
    // loop. The best-ranked implementation over these layouts (the first
    // layout of those ranked alike) is used, with reorders into and out of
    // it in the workspace.
    // An input grove keeps channels-last tries that layout first, so that
    // of those ranked alike it is the one chosen: no reorder.
    using tag = memory::format_tag;
    std::vector<tag> layouts = w.spatial == 1   ? std::vector<tag>{tag::nCw16c, tag::nCw8c, tag::nwc}
                               : w.spatial == 2 ? std::vector<tag>{tag::nChw16c, tag::nChw8c, tag::nhwc}
                                                : std::vector<tag>{tag::nCdhw16c, tag::nCdhw8c, tag::ndhwc};
    if (io.src) std::rotate(layouts.begin(), layouts.end() - 1, layouts.end());
    if (!made.has_value()) {
      for (tag layout : layouts) {
        std::optional<RankedPool> candidate =
            BestPoolImpl(pool_desc(memory::desc(src, memory::data_type::f32, layout),
                                   memory::desc(dst, memory::data_type::f32, layout)),
                         c);
        if (candidate.has_value() && (!made.has_value() || candidate->rank < made->rank)) made = std::move(candidate);
      }
    }
    if (!made.has_value()) return nullptr;
    const dnnl::pooling_v2_forward::primitive_desc& pd = made->pd;
    auto step = std::make_shared<OneDnnStep>();
    step->impl = pd.impl_info_str();
    step->stream = dnnl::stream(engine);
    step->primitive = dnnl::pooling_v2_forward(pd);
    if (!AddOperand(ctx, *step, DNNL_ARG_SRC, false, 0, src_desc, pd.src_desc(), false, layout) ||
        !AddOperand(ctx, *step, DNNL_ARG_DST, true, 0, dst_desc, pd.dst_desc(), false, layout)) {
      return nullptr;
    }
    if (step_threads > 1) {
      std::vector<WindowSlice> rows;
      const PartitionSpec spec = WindowSpec(*step, step_parts, n, w, &rows);
      // The whole step's implementation, over each part's slices.
      auto make_part = [&](int i, const std::vector<memory::desc>& d) -> std::optional<MadePart> {
        memory::dims part_l = pad_l, part_r = pad_r;
        if (i >= 0 && spec.dim == 2) {  // i < 0: a part of whole rows
          part_l[0] = rows[i].pad_begin;
          part_r[0] = rows[i].pad_end;
        }
        // The iterator over implementations reads the op desc and the
        // attributes where they are: both outlive it here.
        const dnnl::pooling_v2_forward::desc desc(dnnl::prop_kind::forward_inference, alg, d[0], d[1], strides,
                                                  kernel, dilation, part_l, part_r);
        const dnnl::primitive_attr attr = MakeAttr(1.0f, std::nullopt, nullptr);
        dnnl::pooling_v2_forward::primitive_desc part(desc, attr, engine, /*allow_empty=*/true);
        if (!part) return std::nullopt;
        while (part.impl_info_str() != step->impl) {
          if (!part.next_impl()) return std::nullopt;
        }
        return MadePart{dnnl::pooling_v2_forward(part), part.impl_info_str(), part.scratchpad_desc(),
                        {part.src_desc(), part.dst_desc()}};
      };
      if ((spec.output.empty() || !PartitionOneDnnStep(*step, spec, make_part, layout)) && n == 1) {
        // Rows of a channel-blocked layout are no slice: whole blocks of
        // channels are (pooling is per channel).
        const PartitionSpec channels = ChannelBlockSpec(*step, step_parts, c);
        if (!channels.output.empty()) {
          auto make_channels = [&](int, const std::vector<memory::desc>& d) { return make_part(-1, d); };
          PartitionOneDnnStep(*step, channels, make_channels, layout);
        }
      }
    }
    Finish(*step, pd.scratchpad_desc(), layout);
    return step;
  } catch (const dnnl::error& e) {
    return nullptr;
  }
}

absl::StatusOr<std::shared_ptr<OneDnnStep>> PrepareOneDnnBatchNorm(const ir::KernelContext& ctx, float epsilon,
                                                                   WorkspaceLayout* layout, ChannelsLast io) {
  if (!OneDnnEnabled()) return nullptr;
  const TensorView& x = ctx.input(0);
  if (x.shape.size() < 2 || x.shape.size() > 5) return nullptr;
  for (int i = 0; i < 5; ++i) {
    if (!ctx.has_input(i) || ctx.input(i).dtype != DType::kF32) return nullptr;
  }
  if (x.num_elements() == 0) return nullptr;
  memory::dims dims(x.shape.begin(), x.shape.end());
  // [N, C] and [N, C, W] as [N, C, 1, 1] and [N, C, W, 1], the same bytes
  // (also channels-last: [N, W, C] is [N, C, W, 1] in nhwc): oneDNN's JIT
  // code has no blocked layout of rank 2 or 3.
  if (x.shape.size() < 3) io = ChannelsLast{};
  while (dims.size() < 4) dims.push_back(1);
  const memory::dims channels = {x.shape[1]};
  const double step_macs = Product(dims) * kElementMacs;
  const int step_threads = StepThreads(ctx, step_macs), step_parts = StepParts(ctx, step_macs);
  OmpThreadScope threads(1);  // a primitive runs on one thread; several run as parts
  try {
    const dnnl::engine& engine = CpuEngine();
    const memory::desc src_data = UserDesc(dims, io.src), dst_data = UserDesc(dims, io.dst);
    const memory::desc vector = PlainDesc(channels);
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
    if (io.src) std::rotate(layouts.begin(), layouts.end() - 1, layouts.end());  // its own layout first
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
    if (!AddOperand(ctx, *step, DNNL_ARG_SRC, false, 0, src_data, pd.src_desc(), false, layout)) return nullptr;
    for (const auto& [arg, index] : vectors) {
      if (!AddOperand(ctx, *step, arg, false, index, vector, vector, false, layout)) return nullptr;
    }
    if (!AddOperand(ctx, *step, DNNL_ARG_DST, true, 0, dst_data, pd.dst_desc(), false, layout)) return nullptr;
    if (step_threads > 1) {
      // Cut along the batch, else along the rows (channels-last layouts).
      PartitionSpec spec;
      spec.kinds = SourceDestKinds(*step);
      spec.dim = dims[0] >= 2 ? 0 : 2;
      spec.output = EvenRanges(dims[spec.dim], step_parts);
      spec.input = spec.output;
      auto make_part = [&](int, const std::vector<memory::desc>& d) -> std::optional<MadePart> {
        dnnl::batch_normalization_forward::primitive_desc part(
            dnnl::batch_normalization_forward::desc(dnnl::prop_kind::forward_inference, d[0], epsilon, flags),
            MakeAttr(1.0f, std::nullopt, nullptr), engine, /*allow_empty=*/true);
        if (!part || part.impl_info_str() != step->impl) return std::nullopt;
        MadePart made{dnnl::batch_normalization_forward(part), part.impl_info_str(), part.scratchpad_desc(), d};
        made.used.front() = part.src_desc();
        made.used.back() = part.dst_desc();
        return made;
      };
      if ((spec.output.size() < 2 || !PartitionOneDnnStep(*step, spec, make_part, layout)) && dims[0] == 1) {
        PartitionSpec channels = ChannelBlockSpec(*step, step_parts, dims[1]);
        if (!channels.output.empty()) {
          // The per-channel vectors are cut with the channels (their dim 0).
          for (size_t k = 0; k < step->operands.size(); ++k) {
            const bool data = step->operands[k].arg == DNNL_ARG_SRC || step->operands[k].arg == DNNL_ARG_DST;
            channels.dims.push_back(data ? 1 : 0);
            if (!data) channels.kinds[k] = SliceKind::kInput;
          }
          PartitionOneDnnStep(*step, channels, make_part, layout);
        }
      }
    }
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
  const double step_macs = static_cast<double>(rows) * static_cast<double>(n) * kElementMacs;
  const int step_threads = StepThreads(ctx, step_macs), step_parts = StepParts(ctx, step_macs);
  OmpThreadScope threads(1);  // a primitive runs on one thread; several run as parts
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
    if (step_threads > 1) {
      PartitionSpec spec;
      spec.kinds = SourceDestKinds(*step);
      spec.output = EvenRanges(rows, step_parts);
      spec.input = spec.output;
      auto make_part = [&](int, const std::vector<memory::desc>& d) -> std::optional<MadePart> {
        dnnl::softmax_v2_forward::primitive_desc part(
            dnnl::softmax_v2_forward::desc(dnnl::prop_kind::forward_inference, dnnl::algorithm::softmax_accurate, d[0],
                                           d[1], /*softmax_axis=*/1),
            MakeAttr(1.0f, std::nullopt, nullptr), engine, /*allow_empty=*/true);
        if (!part || IsReferenceImpl(part.impl_info_str())) return std::nullopt;
        return MadePart{dnnl::softmax_v2_forward(part), part.impl_info_str(), part.scratchpad_desc(),
                        {part.src_desc(), part.dst_desc()}};
      };
      if (spec.output.size() >= 2) PartitionOneDnnStep(*step, spec, make_part, layout);
    }
    Finish(*step, pd.scratchpad_desc(), layout);
    return step;
  } catch (const dnnl::error& e) {
    return nullptr;
  }
}

absl::Status RunOneDnnStep(OneDnnStep& step, ir::KernelContext& ctx) {
  if (!step.parts.empty()) return RunPartitionedOneDnnStep(step, ctx);
  OmpThreadScope threads(1);  // as it was made: see onednn_internal.h
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
  ApplyAfter(step, ctx);
  return absl::OkStatus();
}

void ApplyAfter(const OneDnnStep& step, ir::KernelContext& ctx) {
  if (step.bias_after_input >= 0) {
    const float* bias = ctx.input(step.bias_after_input).as<const float>();
    float* y = ctx.output(0).as<float>();
    const int64_t inner = step.bias_after_inner;
    for (int64_t n = 0; n < step.bias_after_images; ++n) {
      for (int64_t c = 0; c < step.bias_after_channels; ++c, y += inner) {
        const float b = bias[c];
        for (int64_t i = 0; i < inner; ++i) y[i] += b;
      }
    }
  }
  if (step.post_op_after.kind != PostOpKind::kNone) {
    ApplyPostOp(step.post_op_after, static_cast<float*>(ctx.output(0).data), step.post_op_elements);
  }
}

bool CanLinkOneDnnSteps(const OneDnnStep& first, const OneDnnStep& second) {
  if (first.post_op_after.kind != PostOpKind::kNone || first.bias_after_input >= 0) return false;
  const OneDnnOperand* out = FindOperand(first, DNNL_ARG_DST, true);
  const OneDnnOperand* in = FindOperand(second, DNNL_ARG_SRC, false);
  return out != nullptr && in != nullptr && out->reordered && in->reordered && !out->linked && !in->linked &&
         in->packed_from == nullptr && out->inner.get_desc() == in->inner.get_desc();
}

namespace {
std::atomic<int64_t> g_steps_linked{0};
}  // namespace

void LinkOneDnnSteps(OneDnnStep& first, OneDnnStep& second, int64_t second_workspace) {
  OneDnnOperand* out = FindOperand(first, DNNL_ARG_DST, true);
  OneDnnOperand* in = FindOperand(second, DNNL_ARG_SRC, false);
  out->offset = second_workspace + in->offset;
  out->linked = true;
  in->linked = true;
  g_steps_linked.fetch_add(1, std::memory_order_relaxed);
}

int64_t OneDnnStepsLinked() { return g_steps_linked.load(std::memory_order_relaxed); }

// ---------------------------------------------------------------------------
// LSTM, GRU and RNN.

namespace {

using ir::RecurrentKind;

// One argument of a recurrent primitive that is rebound per run: a step
// input or output (at an element offset: a direction's slice, which the
// memory's strides then walk), or an array in the workspace (an output the
// node does not have, or a zero initial state beside a given one).
struct RecurrentArg {
  enum class Source { kInput, kOutput, kWorkspace };
  Source source = Source::kInput;
  int index = 0;
  int64_t element_offset = 0;
  uint64_t workspace_offset = 0;
  uint64_t zero_bytes = 0;  // workspace bytes set to 0 before the run
  memory mem;
};

struct RecurrentDirection {
  dnnl::primitive primitive;
  std::vector<RecurrentArg> bound;
  std::vector<memory> packed;          // weights, bias, peepholes in oneDNN's layout, owned
  std::vector<dnnl_exec_arg_t> args;   // made once: handles are rebound, never replaced
  bool has_scratchpad = false;
  memory scratchpad;
  uint64_t scratchpad_offset = 0;
};

// The inputs packed by the prepare: W, R, B and (LSTM) P.
constexpr int kRecurrentWeightInputs[] = {1, 2, 3, 7};

// ONNX's gate block of oneDNN's gate g: oneDNN's LSTM orders them i, f, c, o
// (ONNX: i, o, f, c); GRU (z/u, r, h/o) and RNN agree.
int64_t OnnxGate(RecurrentKind kind, int64_t g) {
  static constexpr int64_t kLstm[4] = {0, 2, 3, 1};
  return kind == RecurrentKind::kLstm ? kLstm[g] : g;
}

// One direction's W [gates * h, cols] as oneDNN's ldigo [1, 1, cols, gates, h].
std::vector<float> PackLdigo(const float* w, RecurrentKind kind, int64_t gates, int64_t h, int64_t cols) {
  std::vector<float> out(static_cast<size_t>(cols * gates * h));
  for (int64_t g = 0; g < gates; ++g) {
    const float* block = w + OnnxGate(kind, g) * h * cols;
    for (int64_t j = 0; j < h; ++j) {
      for (int64_t k = 0; k < cols; ++k) out[(k * gates + g) * h + j] = block[j * cols + k];
    }
  }
  return out;
}

// A [1, 1, rows, cols] slice of a [D, N, H]-like state or [T, D, N, H]-like
// output, as strides over grove's tensor.
memory::desc StridedDesc(const memory::dims& dims, const memory::dims& strides) {
  return memory::desc(dims, memory::data_type::f32, strides);
}

// oneDNN's eltwise algorithm for a vanilla RNN's activation; false for one it lacks.
bool RnnActivation(const ir::Activation& act, dnnl::algorithm* alg, float* alpha) {
  *alpha = 0.0f;
  switch (act.kind) {
    case ir::ActivationKind::kTanh:
      *alg = dnnl::algorithm::eltwise_tanh;
      return true;
    case ir::ActivationKind::kSigmoid:
      *alg = dnnl::algorithm::eltwise_logistic;
      return true;
    case ir::ActivationKind::kRelu:
      *alg = dnnl::algorithm::eltwise_relu;
      return true;
    case ir::ActivationKind::kLeakyRelu:
      *alg = dnnl::algorithm::eltwise_relu;
      *alpha = static_cast<float>(act.alpha);
      return true;
    default:
      return false;
  }
}

bool IsActivation(const ir::Activation& act, ir::ActivationKind kind) { return act.kind == kind; }

}  // namespace

class OneDnnRecurrentStep {
 public:
  dnnl::stream stream;
  std::string impl;
  std::vector<RecurrentDirection> directions;
  const void* packed_from[4] = {};  // kRecurrentWeightInputs' bytes as the prepare read them
};

absl::StatusOr<std::shared_ptr<OneDnnRecurrentStep>> PrepareOneDnnRecurrent(const ir::KernelContext& ctx,
                                                                            const ir::RecurrentAttrs& a,
                                                                            const backends::RecurrentDims& dims,
                                                                            WorkspaceLayout* layout) {
  if (!OneDnnEnabled()) return nullptr;
  const RecurrentKind kind = a.kind;
  const bool lstm = kind == RecurrentKind::kLstm, gru = kind == RecurrentKind::kGru;
  const int max_input = lstm ? 8 : 6;
  for (int i = 0; i < max_input; ++i) {
    if (i != 4 && ctx.has_input(i) && ctx.input(i).dtype != DType::kF32) return nullptr;
  }
  if (a.has_clip || a.input_forget) return nullptr;
  const int64_t T = dims.seq, N = dims.batch, I = dims.input, H = dims.hidden, D = dims.dirs;
  if (T <= 0 || N <= 0 || I <= 0 || H <= 0) return nullptr;
  // Every weight is packed here, so the prepare must see its bytes.
  OneDnnRecurrentStep probe;
  for (int k = 0; k < 4; ++k) {
    const int i = kRecurrentWeightInputs[k];
    if (i == 7 && !lstm) break;
    if (!ctx.has_input(i)) continue;
    if (ctx.input(i).data == nullptr) return nullptr;
    probe.packed_from[k] = ctx.input(i).data;
  }
  for (int d = 0; d < D; ++d) {
    if (lstm) {
      if (!IsActivation(a.activation(d, 0), ir::ActivationKind::kSigmoid) ||
          !IsActivation(a.activation(d, 1), ir::ActivationKind::kTanh) ||
          !IsActivation(a.activation(d, 2), ir::ActivationKind::kTanh)) {
        return nullptr;
      }
    } else if (gru) {
      if (!IsActivation(a.activation(d, 0), ir::ActivationKind::kSigmoid) ||
          !IsActivation(a.activation(d, 1), ir::ActivationKind::kTanh)) {
        return nullptr;
      }
    } else {
      dnnl::algorithm alg = dnnl::algorithm::eltwise_tanh;
      float alpha = 0.0f;
      if (!RnnActivation(a.activation(d, 0), &alg, &alpha)) return nullptr;
    }
  }
  const int64_t gates = ir::GateCount(kind);
  const bool lbr = gru && a.linear_before_reset;
  const int64_t bias_gates = lbr ? gates + 1 : gates;
  // One thread: OpenMP's team would wait at a barrier per time step, where a
  // descheduled teammate holds the layer (onednn_internal.h).
  OmpThreadScope threads(1);
  const float* w_all = ctx.input(1).as<const float>();
  const float* r_all = ctx.input(2).as<const float>();
  const float* b_all = ctx.has_input(3) ? ctx.input(3).as<const float>() : nullptr;
  const float* p_all = lstm && ctx.has_input(7) ? ctx.input(7).as<const float>() : nullptr;
  const bool has_h0 = ctx.has_input(5), has_c0 = lstm && ctx.has_input(6);
  const bool has_y = ctx.has_output(0), has_yh = ctx.has_output(1), has_yc = lstm && ctx.has_output(2);
  try {
    const dnnl::engine& engine = CpuEngine();
    auto step = std::make_shared<OneDnnRecurrentStep>();
    std::copy(std::begin(probe.packed_from), std::end(probe.packed_from), std::begin(step->packed_from));
    step->stream = dnnl::stream(engine);
    const memory::dims state_dims = {1, 1, N, H};
    // A direction's slice of a state tensor: [D, N, H] (layout 0) or [N, D, H].
    const memory::dims state_strides = dims.layout == 0 ? memory::dims{D * N * H, N * H, H, 1}
                                                        : memory::dims{N * D * H, N * D * H, D * H, 1};
    for (int64_t d = 0; d < D; ++d) {
      const bool reverse = a.reverse || d == 1;
      const auto direction = reverse ? dnnl::rnn_direction::unidirectional_right2left
                                     : dnnl::rnn_direction::unidirectional_left2right;
      const int64_t state_offset = dims.layout == 0 ? d * N * H : d * H;
      RecurrentDirection dir;
      std::vector<std::pair<int, RecurrentArg>> bound;  // (DNNL_ARG_*, where)
      auto tensor_arg = [&](int arg, RecurrentArg::Source source, int index, int64_t offset,
                            const memory::desc& desc) {
        RecurrentArg r;
        r.source = source;
        r.index = index;
        r.element_offset = offset;
        r.mem = memory(desc, engine, DNNL_MEMORY_NONE);
        bound.emplace_back(arg, std::move(r));
        return desc;
      };
      auto workspace_arg = [&](int arg, const memory::desc& desc, bool zero) {
        RecurrentArg r;
        r.source = RecurrentArg::Source::kWorkspace;
        r.workspace_offset = ReserveWorkspace(layout, desc.get_size());
        r.zero_bytes = zero ? desc.get_size() : 0;
        r.mem = memory(desc, engine, DNNL_MEMORY_NONE);
        bound.emplace_back(arg, std::move(r));
        return desc;
      };
      // X: [T, N, I] or [N, T, I], the same for both directions.
      const memory::desc src_layer = tensor_arg(
          DNNL_ARG_SRC_LAYER, RecurrentArg::Source::kInput, 0, 0,
          StridedDesc({T, N, I}, dims.layout == 0 ? memory::dims{N * I, I, 1} : memory::dims{I, T * I, 1}));
      // Initial states: given, zeros beside a given one (LSTM), or none.
      memory::desc src_iter, src_iter_c;
      const bool any_state = has_h0 || has_c0;
      if (has_h0) {
        src_iter = tensor_arg(DNNL_ARG_SRC_ITER, RecurrentArg::Source::kInput, 5, state_offset,
                              StridedDesc(state_dims, state_strides));
      } else if (any_state) {
        src_iter = workspace_arg(DNNL_ARG_SRC_ITER, PlainDesc(state_dims), true);
      }
      if (lstm) {
        if (has_c0) {
          src_iter_c = tensor_arg(DNNL_ARG_SRC_ITER_C, RecurrentArg::Source::kInput, 6, state_offset,
                                  StridedDesc(state_dims, state_strides));
        } else if (any_state) {
          src_iter_c = workspace_arg(DNNL_ARG_SRC_ITER_C, PlainDesc(state_dims), true);
        }
      }
      // Y: [T, D, N, H] or [N, T, D, H], this direction's slice; the
      // workspace when the node has no Y.
      const memory::desc dst_layer =
          has_y ? tensor_arg(DNNL_ARG_DST_LAYER, RecurrentArg::Source::kOutput, 0,
                             dims.layout == 0 ? d * N * H : d * H,
                             StridedDesc({T, N, H}, dims.layout == 0 ? memory::dims{D * N * H, H, 1}
                                                                     : memory::dims{D * H, T * D * H, 1}))
                : workspace_arg(DNNL_ARG_DST_LAYER, PlainDesc({T, N, H}), false);
      memory::desc dst_iter, dst_iter_c;
      const bool any_final = has_yh || has_yc;
      if (has_yh) {
        dst_iter = tensor_arg(DNNL_ARG_DST_ITER, RecurrentArg::Source::kOutput, 1, state_offset,
                              StridedDesc(state_dims, state_strides));
      } else if (lstm && any_final) {
        dst_iter = workspace_arg(DNNL_ARG_DST_ITER, PlainDesc(state_dims), false);
      }
      if (lstm) {
        if (has_yc) {
          dst_iter_c = tensor_arg(DNNL_ARG_DST_ITER_C, RecurrentArg::Source::kOutput, 2, state_offset,
                                  StridedDesc(state_dims, state_strides));
        } else if (any_final) {
          dst_iter_c = workspace_arg(DNNL_ARG_DST_ITER_C, PlainDesc(state_dims), false);
        }
      }
      const memory::desc weights_layer(memory::dims{1, 1, I, gates, H}, memory::data_type::f32,
                                       memory::format_tag::any);
      const memory::desc weights_iter(memory::dims{1, 1, H, gates, H}, memory::data_type::f32,
                                      memory::format_tag::any);
      const memory::desc bias = PlainDesc({1, 1, bias_gates, H});
      const memory::desc peephole = p_all != nullptr ? PlainDesc({1, 1, 3, H}) : memory::desc();
      dnnl::primitive_attr attr;
      attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
      const auto prop = dnnl::prop_kind::forward_inference;
      dnnl::primitive_desc_base* pd_base = nullptr;
      std::optional<dnnl::lstm_forward::primitive_desc> lstm_pd;
      std::optional<dnnl::gru_forward::primitive_desc> gru_pd;
      std::optional<dnnl::lbr_gru_forward::primitive_desc> lbr_pd;
      std::optional<dnnl::vanilla_rnn_forward::primitive_desc> rnn_pd;
      if (lstm) {
        const dnnl::lstm_forward::desc desc(prop, direction, src_layer, src_iter, src_iter_c, weights_layer,
                                            weights_iter, peephole, memory::desc(), bias, dst_layer, dst_iter,
                                            dst_iter_c);
        lstm_pd.emplace(desc, attr, engine);
        dir.primitive = dnnl::lstm_forward(*lstm_pd);
        pd_base = &*lstm_pd;
      } else if (lbr) {
        const dnnl::lbr_gru_forward::desc desc(prop, direction, src_layer, src_iter, weights_layer, weights_iter,
                                               bias, dst_layer, dst_iter);
        lbr_pd.emplace(desc, attr, engine);
        dir.primitive = dnnl::lbr_gru_forward(*lbr_pd);
        pd_base = &*lbr_pd;
      } else if (gru) {
        const dnnl::gru_forward::desc desc(prop, direction, src_layer, src_iter, weights_layer, weights_iter, bias,
                                           dst_layer, dst_iter);
        gru_pd.emplace(desc, attr, engine);
        dir.primitive = dnnl::gru_forward(*gru_pd);
        pd_base = &*gru_pd;
      } else {
        dnnl::algorithm alg = dnnl::algorithm::eltwise_tanh;
        float alpha = 0.0f;
        RnnActivation(a.activation(static_cast<int>(d), 0), &alg, &alpha);
        const dnnl::vanilla_rnn_forward::desc desc(prop, alg, direction, src_layer, src_iter, weights_layer,
                                                   weights_iter, bias, dst_layer, dst_iter,
                                                   dnnl::rnn_flags::undef, alpha);
        rnn_pd.emplace(desc, attr, engine);
        dir.primitive = dnnl::vanilla_rnn_forward(*rnn_pd);
        pd_base = &*rnn_pd;
      }
      if (d == 0) step->impl = pd_base->impl_info_str();
      // The workspace oneDNN keeps for training is not made in inference.
      if (pd_base->workspace_desc().get_size() != 0) return nullptr;

      // Weights, bias and peepholes, reordered once into what the primitive chose.
      auto pack = [&](int arg, const memory::desc& plain, std::vector<float> values) {
        const memory::desc want = pd_base->query_md(dnnl::query::exec_arg_md, arg);
        memory packed(want, engine);
        memory source(plain, engine, values.data());
        dnnl::reorder(source, packed).execute(step->stream, source, packed);
        step->stream.wait();
        dir.packed.push_back(packed);
        dir.args.push_back({arg, packed.get()});
      };
      const memory::desc ldigo_layer(memory::dims{1, 1, I, gates, H}, memory::data_type::f32,
                                     memory::format_tag::ldigo);
      const memory::desc ldigo_iter(memory::dims{1, 1, H, gates, H}, memory::data_type::f32,
                                    memory::format_tag::ldigo);
      pack(DNNL_ARG_WEIGHTS_LAYER, ldigo_layer, PackLdigo(w_all + d * gates * H * I, kind, gates, H, I));
      pack(DNNL_ARG_WEIGHTS_ITER, ldigo_iter, PackLdigo(r_all + d * gates * H * H, kind, gates, H, H));
      std::vector<float> b(static_cast<size_t>(bias_gates * H), 0.0f);
      if (b_all != nullptr) {
        const float* wb = b_all + d * 2 * gates * H;
        const float* rb = wb + gates * H;
        for (int64_t g = 0; g < gates; ++g) {
          const int64_t from = OnnxGate(kind, g);
          for (int64_t j = 0; j < H; ++j) {
            // lbr GRU: h's Rb stays apart (oneDNN's fourth bias gate), inside the reset product.
            const float r = lbr && g == 2 ? 0.0f : rb[from * H + j];
            b[g * H + j] = wb[from * H + j] + r;
          }
        }
        if (lbr) {
          for (int64_t j = 0; j < H; ++j) b[3 * H + j] = rb[2 * H + j];
        }
      }
      pack(DNNL_ARG_BIAS, bias, std::move(b));
      if (p_all != nullptr) {
        // ONNX P: i, o, f; oneDNN: i, f, o.
        const float* p = p_all + d * 3 * H;
        std::vector<float> peep(static_cast<size_t>(3 * H));
        for (int64_t j = 0; j < H; ++j) {
          peep[j] = p[j];
          peep[H + j] = p[2 * H + j];
          peep[2 * H + j] = p[H + j];
        }
        pack(DNNL_ARG_WEIGHTS_PEEPHOLE, peephole, std::move(peep));
      }
      // Every rebound argument must be in the layout given (oneDNN may not
      // take a strided one as it is).
      for (auto& [arg, r] : bound) {
        if (pd_base->query_md(dnnl::query::exec_arg_md, arg) != r.mem.get_desc()) return nullptr;
        dir.args.push_back({arg, r.mem.get()});
        dir.bound.push_back(std::move(r));
      }
      const memory::desc scratch = pd_base->scratchpad_desc();
      if (scratch.get_size() > 0) {
        dir.has_scratchpad = true;
        dir.scratchpad = memory(scratch, engine, DNNL_MEMORY_NONE);
        dir.scratchpad_offset = ReserveWorkspace(layout, scratch.get_size());
        dir.args.push_back({DNNL_ARG_SCRATCHPAD, dir.scratchpad.get()});
      }
      step->directions.push_back(std::move(dir));
    }
    g_steps_made.fetch_add(1, std::memory_order_relaxed);
    return step;
  } catch (const dnnl::error& e) {
    return nullptr;
  }
}

absl::StatusOr<bool> RunOneDnnRecurrent(OneDnnRecurrentStep& step, ir::KernelContext& ctx) {
  for (int k = 0; k < 4; ++k) {
    const int i = kRecurrentWeightInputs[k];
    const void* data = ctx.has_input(i) ? ctx.input(i).data : nullptr;
    if (data != step.packed_from[k]) return false;
  }
  OmpThreadScope threads(1);  // as it was made: see onednn_internal.h
  uint8_t* workspace = static_cast<uint8_t*>(ctx.workspace());
  dnnl_stream_t stream = step.stream.get();
  for (RecurrentDirection& dir : step.directions) {
    for (RecurrentArg& r : dir.bound) {
      void* data = nullptr;
      if (r.source == RecurrentArg::Source::kWorkspace) {
        if (workspace == nullptr) return ctx.Error("the oneDNN step has no workspace");
        data = workspace + r.workspace_offset;
        if (r.zero_bytes > 0) std::memset(data, 0, r.zero_bytes);
      } else {
        const TensorView& t = r.source == RecurrentArg::Source::kInput ? ctx.input(r.index) : ctx.output(r.index);
        data = static_cast<float*>(t.data) + r.element_offset;
      }
      if (dnnl_status_t s = dnnl_memory_set_data_handle_v2(r.mem.get(), data, stream); s != dnnl_success) {
        return DnnlError("binding an argument", s);
      }
    }
    if (dir.has_scratchpad) {
      if (workspace == nullptr) return ctx.Error("the oneDNN step has no workspace");
      if (dnnl_status_t s =
              dnnl_memory_set_data_handle_v2(dir.scratchpad.get(), workspace + dir.scratchpad_offset, stream);
          s != dnnl_success) {
        return DnnlError("binding the scratchpad", s);
      }
    }
    if (dnnl_status_t s = dnnl_primitive_execute(dir.primitive.get(), stream, static_cast<int>(dir.args.size()),
                                                 dir.args.data());
        s != dnnl_success) {
      return DnnlError(absl::StrCat("executing ", step.impl), s);
    }
  }
  if (dnnl_status_t s = dnnl_stream_wait(stream); s != dnnl_success) return DnnlError("waiting", s);
  return true;
}

std::string OneDnnRecurrentImpl(const OneDnnRecurrentStep& step) { return step.impl; }

int64_t OneDnnWeightsPacked() { return g_weights_packed.load(std::memory_order_relaxed); }

int64_t OneDnnStepsMade() { return g_steps_made.load(std::memory_order_relaxed); }

std::string OneDnnStepImpl(const OneDnnStep& step) { return step.impl; }

}  // namespace grove::cpu
