// The CUDA kernel of FusedAttention (jit/kernels/attention.cuh): the prepare
// checks shapes and attributes (lib/backends/common/attention_checks.h) and
// builds the launch without pointers; the invoke fills the pointers and
// launches once. No workspace, no synchronisation, nothing read back: the
// step is capture-safe, and sq/sk live in the parameters, so a graph's
// refresh serves another sequence length with the same kernel. Heads of at
// most 128 with 16 query rows or more run the tiled kernel (the "attention"
// kernel family, jit/kernel_config.cc), others the warp-per-row kernel.
#include <algorithm>
#include <cstring>

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

struct AttentionLaunch {
  grove_k::AttentionParams p;
  LaunchDims dims;
  jit::ModuleSpec module;
  bool empty = false;
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
  const bool emulated = Exec(ctx).device().emulated();
  if (!a.empty && l->sq >= kTiledMinRows && l->d <= 128 && l->dv <= 128) {
    // The tiled kernel, its tile chosen as other variants are (table, cost
    // model, generic); a block per tile of query rows, grid-stride, so a
    // graph captured at the bucket's bound serves shorter sequences.
    const jit::KernelProblem problem{
        "attention",
        {l->dtype},
        {{"d", l->d}, {"dv", l->dv}, {"heads", l->b0 * l->b1}, {"sk", l->sk}, {"sq", l->sq}}};
    KernelChoice choice = ChooseAndRecord(ctx, problem);
    const jit::KernelFamily* family = jit::FindKernelFamily("attention");
    if (family != nullptr && !family->Valid(choice.config, problem)) choice.config = family->Generic(problem);
    VariantLaunch v = LaunchOf(choice.config, problem);
    // The emulated device's threads are host threads: at most 2 blocks.
    if (emulated) v.dims.grid[0] = std::min<uint32_t>(v.dims.grid[0], 2);
    a.dims = v.dims;
    a.module = v.module;
    return MakePrepared(std::move(a));
  }
  // A block per query row, kAttnRowWarps warps splitting its keys; on the
  // emulated device, whose threads are host threads, 2 warps and at most 2
  // blocks.
  const int64_t rows = a.empty ? 0 : l->b0 * l->b1 * l->sq;
  const int warps = emulated ? 2 : grove_k::kAttnRowWarps;
  a.dims = Grid1D(rows * warps * 32, warps * 32, emulated ? 2 : 65535);
  a.module = jit::ModuleSpec{"attention", {l->dtype}};
  return MakePrepared(std::move(a));
}

absl::Status AttentionKernel(ir::KernelContext& ctx) {
  const auto* a = PreparedParams<AttentionLaunch>(ctx);
  if (a == nullptr) return NotPrepared(ctx);
  if (a->empty) return absl::OkStatus();
  grove_k::AttentionParams p = a->p;
  p.q = ctx.input(0).data;
  p.k = ctx.input(1).data;
  p.v = ctx.input(2).data;
  for (int m = 0; m < 2; ++m) p.masks[m].data = ctx.has_input(3 + m) ? ctx.input(3 + m).data : nullptr;
  p.out = ctx.output(0).data;
  return Exec(ctx).Launch(a->module, "attention", a->dims, p);
}

}  // namespace

absl::Status RegisterCudaAttentionKernels(ir::OpRegistry& registry) {
  return registry.SetKernel(ir::kFusedAttentionOp, ir::Backend::kCuda,
                            ir::KernelDef{&AttentionKernel, &PrepareAttention});
}

}  // namespace grove::cuda
