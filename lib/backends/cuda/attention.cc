// The CUDA kernel of FusedAttention, in one of two forms chosen when the
// step is prepared:
//
//  - the kernel form (jit/kernels/attention.cuh): one launch, no workspace.
//    Heads of at most 128 with 16 query rows or more run the tiled kernel
//    (the "attention" kernel family, jit/kernel_config.cc; for f16 and bf16
//    on sm_80 and later its tensor-core form, "attention_mma"), others the
//    block-per-row kernel, its keys split among blocks (a second launch
//    merging the parts from the workspace) when the rows are too few to
//    fill the GPU (KeySplits). sq and sk live in the parameters, so a
//    bucketed plan's graph, refreshed, serves every sequence length of its
//    bucket.
//  - the GEMM form: cuBLASLt's batched QKᵀ (the scales folded into its
//    alpha) into f32 scores in the step's workspace, the attention_probs
//    kernel (masks, Softmax, NaN as 0 where asked) writing the probabilities
//    as the inputs' dtype (over the scores for f32), and cuBLASLt's batched
//    PV into the output. On an H200 the kernel form took 2.7-3.8x the time
//    of cuBLASLt and the Softmax kernel at [1, 8, S, 64], S = 256..2048, and
//    up to 14x on a decode row against 8192 keys (README, "Fused
//    attention"), so kAuto takes this form wherever the products fold into
//    one batched GEMM each, sq >= 16 or sk >= 256, and the scores fit
//    kMaxScoresBytes; but not in a bucketed plan, whose graph bakes
//    cuBLASLt's sizes (tiled_gemm.h): there sk varies under the products.
//
// Both forms are capture-safe: nothing allocated, synchronised or read back.
// The emulated device takes the same forms and splits (the SM count of the
// arch it reports), so CI runs them.
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>

#include "jit/kernels/attention_params.h"
#include "lib/backends/common/attention_checks.h"
#include "lib/backends/cuda/cuda_kernels.h"
#include "lib/backends/cuda/exec_context.h"
#include "lib/backends/cuda/kernel_choice.h"
#include "lib/backends/cuda/variant_launch.h"

namespace grove::cuda {
namespace {

// Query rows a head below which (decode) the warp-per-row kernel runs: the
// tiled one would compute a whole tile of rows for a few.
constexpr int64_t kTiledMinRows = 16;
// The GEMM form's scores (f32) and probabilities at most: past this the
// kernel form runs, which keeps no [sq, sk] matrix.
constexpr uint64_t kMaxScoresBytes = uint64_t{1} << 30;

std::atomic<bool>& TensorCoreSwitch() {
  static std::atomic<bool> on{[] {
    const char* env = std::getenv("GROVE_CUDA_ATTENTION_TC");
    return env == nullptr || std::string(env) != "0";
  }()};
  return on;
}

std::atomic<AttentionForm>& FormSwitch() {
  static std::atomic<AttentionForm> form{[] {
    const char* env = std::getenv("GROVE_CUDA_ATTENTION");
    const std::string v = env == nullptr ? "" : env;
    if (v == "kernel") return AttentionForm::kKernel;
    if (v == "gemm") return AttentionForm::kGemm;
    return AttentionForm::kAuto;
  }()};
  return form;
}

// One batch dim of the GEMM form's products: its count and each operand's
// element stride (Q, K, V, the scores, the output).
struct BatchDim {
  int64_t n = 1;
  int64_t q = 0, k = 0, v = 0, s = 0, o = 0;
};

// The two batch dims as one (a single strided batch), or false when their
// strides do not chain for every operand.
bool FoldBatch(const BatchDim& outer, const BatchDim& inner, BatchDim* out) {
  if (outer.n == 1) {
    *out = inner;
    return true;
  }
  if (inner.n == 1) {
    *out = outer;
    return true;
  }
  const int64_t n = inner.n;
  if (outer.q != inner.q * n || outer.k != inner.k * n || outer.v != inner.v * n || outer.s != inner.s * n ||
      outer.o != inner.o * n) {
    return false;
  }
  *out = inner;
  out->n = outer.n * n;
  return true;
}

// The factor a scale op puts on the product.
float ScaleFactor(const ir::AttentionScale& s) {
  if (s.op == ir::AttentionScaleOp::kMul) return static_cast<float>(s.value);
  if (s.op == ir::AttentionScaleOp::kDiv) return static_cast<float>(1.0 / s.value);
  return 1.0f;
}

struct GemmForm {
  GemmDesc qk, pv;  // without pointers
  grove_k::AttentionProbsParams probs{};  // its mode; a, the pointers: filled by the invoke
  LaunchDims probs_dims;
  uint64_t probs_offset = 0;  // in the workspace: 0 (over the scores, f32) or past them
  uint64_t workspace = 0;
};

// The GEMM form of `l`, or false where it does not apply (see the file
// comment; `forced`: whatever the sizes).
bool PlanGemmForm(const ExecContext& ec, const backends::AttentionLayout& l, bool forced, GemmForm* f) {
  if (l.empty() || l.sk == 0 || l.d == 0 || ec.bucket_plan()) return false;  // cuBLASLt wants k >= 1
  if (!forced && l.sq < 16 && l.sk < 256) return false;
  // Batch dims [b0, b1]; with kv_group g, query heads in groups of g that
  // read one key-value head: a group's rows are one matrix of g * sq rows
  // when its heads' rows lie back to back.
  const int64_t g = l.kv_group;
  if (g > 1 && l.b1 > 1 && l.q_b1 != l.sq * l.d) return false;
  const int64_t rows = g * l.sq;
  BatchDim outer{l.b0, l.q_b0, l.k_b0, l.v_b0, l.b1 * l.sq * l.sk, l.b1 * l.sq * l.dv};
  BatchDim inner{l.b1 / g, l.q_b1 * g, l.k_b1, l.v_b1, rows * l.sk, rows * l.dv};
  BatchDim b;
  if (!FoldBatch(outer, inner, &b)) return false;
  const uint64_t elems = static_cast<uint64_t>(l.b0 * l.b1) * static_cast<uint64_t>(l.sq) *
                         static_cast<uint64_t>(l.sk);
  const uint64_t scores = elems * 4;
  f->probs_offset = l.dtype == DType::kF32 ? 0 : (scores + 255) / 256 * 256;
  f->workspace = f->probs_offset == 0 ? scores : f->probs_offset + elems * DTypeSize(l.dtype);
  if (f->workspace > kMaxScoresBytes) return false;

  GemmDesc& qk = f->qk;
  qk.dtype = l.dtype;
  qk.c_dtype = DType::kF32;
  qk.m = rows;
  qk.n = l.sk;
  qk.k = l.d;
  qk.lda = l.d;
  qk.stride_a = b.q;
  // K [sk, d] is Bᵀ; Kᵀ [d, sk] is B.
  qk.trans_b = l.k_ds == 1;
  qk.ldb = qk.trans_b ? l.k_js : l.k_ds;
  qk.stride_b = b.k;
  qk.ldc = l.sk;
  qk.stride_c = b.s;
  qk.batch = b.n;
  qk.alpha = ScaleFactor(l.attrs.q_scale) * ScaleFactor(l.attrs.k_scale) * ScaleFactor(l.attrs.scale);

  GemmDesc& pv = f->pv;
  pv.dtype = l.dtype;
  pv.m = rows;
  pv.n = l.dv;
  pv.k = l.sk;
  pv.lda = l.sk;
  pv.stride_a = b.s;
  pv.ldb = l.dv;
  pv.stride_b = b.v;
  pv.ldc = l.dv;
  pv.stride_c = b.o;
  pv.batch = b.n;

  // A warp a row for short rows, else a block; on the emulated device,
  // whose threads are host threads, at most 2 blocks.
  f->probs.mode = l.sk <= 256 ? 1 : 2;
  const int64_t prob_rows = l.b0 * l.b1 * l.sq;
  const int64_t cap = ec.device().emulated() ? 2 : 65535;
  f->probs_dims = Grid1D(prob_rows * (f->probs.mode == 1 ? 32 : 128), 128, cap);
  return true;
}

// Keys a split of the block-per-row kernel takes at least, and splits at
// most (AttentionParams::splits).
constexpr int64_t kSplitMinKeys = 256;
constexpr int64_t kMaxSplits = 64;

// The block-per-row kernel's key splits for `rows` rows of `sk` keys: none
// when the rows alone give every SM a block, else enough for about two
// blocks an SM, each split at least kSplitMinKeys keys. On an H200 a decode
// step's 8 rows against 8192 keys took 801 us as 8 blocks, where cuBLASLt
// and the Softmax kernel took 58 us (README, "Fused attention"). In a
// bucketed plan, the bound's splits for every shape of the bucket (a split
// launch is two kernels, and the shapes replay the bound's graph).
int64_t KeySplits(const ir::KernelContext& ctx, int64_t rows, int64_t sk) {
  ExecContext& ec = Exec(ctx);
  constexpr absl::string_view kWhat = "attention key splits";
  if (const int64_t* kept = ec.BucketKept<int64_t>(ctx.node(), kWhat); kept != nullptr) return *kept;
  const int64_t sms = std::max(1, DeviceTraits(ec.device()).sms);
  int64_t splits = 1;
  if (rows > 0 && rows < sms && sk >= 2 * kSplitMinKeys) {
    splits = std::min({(2 * sms + rows - 1) / rows, sk / kSplitMinKeys, kMaxSplits});
  }
  ec.BucketKeep(ctx.node(), kWhat, splits);
  return splits;
}

struct AttentionLaunch {
  grove_k::AttentionParams p;
  LaunchDims dims;
  LaunchDims combine_dims;  // with p.splits > 1: attention_combine's
  jit::ModuleSpec module;
  const char* entry = "attention";  // the kernel form's: "attention_mma" on tensor cores
  bool empty = false;
  bool gemm = false;  // the GEMM form (gemm_form), else the kernel form
  GemmForm gemm_form;
};

absl::StatusOr<ir::PreparedKernel> PrepareAttention(const ir::KernelContext& ctx) {
  absl::StatusOr<backends::AttentionLayout> l = backends::PlanAttention(ctx);
  if (!l.ok()) return l.status();
  AttentionLaunch a;
  std::memset(&a.p, 0, sizeof(a.p));
  a.empty = l->empty();
  grove_k::AttentionParams& p = a.p;
  p.b0 = l->b0;
  p.b1 = l->b1;
  p.sq = l->sq;
  p.sk = l->sk;
  p.d = l->d;
  p.dv = l->dv;
  p.q_b0 = l->q_b0;
  p.q_b1 = l->q_b1;
  p.k_b0 = l->k_b0;
  p.k_b1 = l->k_b1;
  p.k_js = l->k_js;
  p.k_ds = l->k_ds;
  p.v_b0 = l->v_b0;
  p.v_b1 = l->v_b1;
  p.kv_group = l->kv_group;
  const ir::AttentionAttrs& at = l->attrs;
  p.q_scale = static_cast<float>(at.q_scale.value);
  p.k_scale = static_cast<float>(at.k_scale.value);
  p.scale = static_cast<float>(at.scale.value);
  p.q_scale_op = static_cast<int>(at.q_scale.op);
  p.k_scale_op = static_cast<int>(at.k_scale.op);
  p.scale_op = static_cast<int>(at.scale.op);
  p.zero_nan_probs = at.zero_nan_probs ? 1 : 0;
  for (int m = 0; m < 2; ++m) {
    grove_k::AttnMaskParams& mk = p.masks[m];
    mk.b0 = l->masks[m].b0;
    mk.b1 = l->masks[m].b1;
    mk.i = l->masks[m].i;
    mk.j = l->masks[m].j;
    mk.fill = static_cast<float>(at.masks[m].fill);
    mk.kind = static_cast<int>(at.masks[m].kind);
    mk.fill_if_true = at.masks[m].fill_if_true ? 1 : 0;
  }
  // One mask, a Where filling -inf or a trimmable fill: a tile of query rows
  // may stop at the last key its rows keep (the CPU kernel's trim, the same
  // rule without its AVX2 condition).
  p.trim = l->has_mask(0) && !l->has_mask(1) && at.masks[0].kind == ir::AttentionMaskKind::kWhere &&
                   ir::IsTrimmableFill(at.masks[0].fill)
               ? 1
               : 0;
  ExecContext& ec = Exec(ctx);
  const bool emulated = ec.device().emulated();
  const AttentionForm form = GetAttentionForm();
  if (form != AttentionForm::kKernel && PlanGemmForm(ec, *l, form == AttentionForm::kGemm, &a.gemm_form)) {
    a.gemm = true;
    a.module = jit::ModuleSpec{"attention", {l->dtype}};
    // The table's cuBLASLt algorithms for the two products, recorded for
    // the node as a MatMul's are.
    a.gemm_form.qk.algorithm = ChooseGemmAlgorithm(ctx, a.gemm_form.qk);
    a.gemm_form.pv.algorithm = ChooseGemmAlgorithm(ctx, a.gemm_form.pv);
    const uint64_t workspace = a.gemm_form.workspace;
    return MakePrepared(std::move(a), workspace);
  }
  if (!a.empty && l->sq >= kTiledMinRows && l->d <= 128 && l->dv <= 128) {
    // The tiled kernel, its tile chosen as other variants are (table, cost
    // model, generic); a block per tile of query rows, grid-stride, so a
    // graph captured at the bucket's bound serves shorter sequences. f16
    // and bf16 on sm_80 and later: its tensor-core form (attention_mma).
    const bool tensor_cores = AttentionTensorCores() && ec.device().arch() >= 80 &&
                              (l->dtype == DType::kF16 || l->dtype == DType::kBF16);
    const char* family_name = tensor_cores ? "attention_mma" : "attention";
    const jit::KernelProblem problem{
        family_name,
        {l->dtype},
        {{"d", l->d}, {"dv", l->dv}, {"heads", l->b0 * l->b1}, {"sk", l->sk}, {"sq", l->sq}}};
    KernelChoice choice = ChooseAndRecord(ctx, problem);
    const jit::KernelFamily* family = jit::FindKernelFamily(family_name);
    if (family != nullptr && !family->Valid(choice.config, problem)) choice.config = family->Generic(problem);
    if (tensor_cores) a.entry = "attention_mma";
    VariantLaunch v = LaunchOf(choice.config, problem);
    // The emulated device's threads are host threads: at most 2 blocks.
    if (emulated) v.dims.grid[0] = std::min<uint32_t>(v.dims.grid[0], 2);
    a.dims = v.dims;
    a.module = v.module;
    return MakePrepared(std::move(a));
  }
  // A block per query row, kAttnRowWarps warps splitting its keys, and the
  // keys split among blocks where the rows are too few to fill the GPU
  // (then the parts go through the workspace to attention_combine); on the
  // emulated device, whose threads are host threads, 2 warps and at most 2
  // blocks.
  const int64_t rows = a.empty ? 0 : l->b0 * l->b1 * l->sq;
  const int warps = emulated ? 2 : grove_k::kAttnRowWarps;
  const int64_t splits = a.empty ? 1 : KeySplits(ctx, rows, l->sk);
  const int64_t cap = emulated ? 2 : 65535;
  a.p.splits = splits;
  a.dims = Grid1D(rows * warps * 32, warps * 32, cap);
  a.dims.grid[1] = static_cast<uint32_t>(splits);  // splits along y
  a.module = jit::ModuleSpec{"attention", {l->dtype}};
  uint64_t workspace = 0;
  if (splits > 1) {
    workspace = static_cast<uint64_t>(rows * splits * (l->dv + 2)) * sizeof(float);
    a.combine_dims = Grid1D(rows * 128, 128, cap);  // a block per row
  }
  return MakePrepared(std::move(a), workspace);
}

// p (prepared without pointers) with this run's inputs and output.
void FillPointers(const ir::KernelContext& ctx, grove_k::AttentionParams& p) {
  p.q = ctx.input(0).data;
  p.k = ctx.input(1).data;
  p.v = ctx.input(2).data;
  for (int m = 0; m < 2; ++m) p.masks[m].data = ctx.has_input(3 + m) ? ctx.input(3 + m).data : nullptr;
  p.out = ctx.output(0).data;
}

absl::Status AttentionKernel(ir::KernelContext& ctx) {
  const auto* a = PreparedParams<AttentionLaunch>(ctx);
  if (a == nullptr) return NotPrepared(ctx);
  if (a->empty) return absl::OkStatus();
  ExecContext& ec = Exec(ctx);
  if (a->gemm) {
    const GemmForm& f = a->gemm_form;
    char* ws = static_cast<char*>(ctx.workspace());
    if (ws == nullptr) return absl::InternalError(ctx.Error("FusedAttention's GEMM form has no workspace").message());
    float* scores = reinterpret_cast<float*>(ws);
    void* probs = ws + f.probs_offset;
    GemmDesc qk = f.qk;
    qk.a = ctx.input(0).data;
    qk.b = ctx.input(1).data;
    qk.c = scores;
    if (absl::Status s = ec.Gemm(qk); !s.ok()) return s;
    grove_k::AttentionProbsParams pp = f.probs;
    pp.a = a->p;
    FillPointers(ctx, pp.a);
    pp.scores = scores;
    pp.probs = probs;
    if (absl::Status s = ec.Launch(a->module, "attention_probs", f.probs_dims, pp); !s.ok()) return s;
    GemmDesc pv = f.pv;
    pv.a = probs;
    pv.b = ctx.input(2).data;
    pv.c = ctx.output(0).data;
    return ec.Gemm(pv);
  }
  grove_k::AttentionParams p = a->p;
  FillPointers(ctx, p);
  if (p.splits <= 1) return ec.Launch(a->module, a->entry, a->dims, p);
  p.partial = static_cast<float*>(ctx.workspace());
  if (p.partial == nullptr) return absl::InternalError(ctx.Error("FusedAttention's key splits have no workspace").message());
  if (absl::Status s = ec.Launch(a->module, "attention", a->dims, p); !s.ok()) return s;
  return ec.Launch(a->module, "attention_combine", a->combine_dims, p);
}

}  // namespace

void SetAttentionForm(AttentionForm form) { FormSwitch().store(form); }
AttentionForm GetAttentionForm() { return FormSwitch().load(); }
void SetAttentionTensorCores(bool on) { TensorCoreSwitch().store(on); }
bool AttentionTensorCores() { return TensorCoreSwitch().load(); }

absl::Status RegisterCudaAttentionKernels(ir::OpRegistry& registry) {
  return registry.SetKernel(ir::kFusedAttentionOp, ir::Backend::kCuda,
                            ir::KernelDef{&AttentionKernel, &PrepareAttention});
}

}  // namespace grove::cuda
