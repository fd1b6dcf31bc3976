// CUDA kernels of LSTM, GRU and RNN (ONNX opset 14), following the CPU
// reference (lib/backends/cpu/recurrent.cc): per direction, one GEMM projects
// the input of every time step (X W^T); each step then runs one GEMM for
// H_{t-1} R^T over the batch and one gate kernel (jit/kernels/rnn.cuh) that
// adds the projection and biases, applies the activations, updates the state
// in place and writes Y. GRU without linear_before_reset needs r (.) H before
// its h-gate product: a first gate pass writes it, a second GEMM projects it.
//
// A plan that serves a shape bucket (ExecContext::bucket_plan) cannot launch
// per step: its graph is captured at the bucket's bound and refreshed for
// each shape of the bucket, launch for launch, so the launches must not
// depend on the sequence length (or the batch). There each direction is the
// input projection (its only varying dim is M = seq x batch, at the start of
// the workspace: a cuBLASLt GEMM may serve the bucket), R transposed into the
// workspace, and one rnn_sequence launch whose blocks loop over the batch
// entries and run every step of theirs on the device, reading the actual
// sequence length, batch and sequence_lens from the refreshed parameters.
// Nothing runs for steps the bound has and the shape has not, so the only
// padding is the bound's blocks past the actual batch, which return at once.
//
// f32 only (the GEMM's halves would round the state every step); f64, f16
// and bf16 report Unimplemented so the executor keeps the node on the CPU
// (whose kernel computes f16 and bf16 in f32).
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "jit/kernels/conv_params.h"
#include "jit/kernels/rnn_params.h"
#include "lib/backends/common/recurrent_checks.h"
#include "lib/backends/cuda/cuda_kernels.h"
#include "lib/backends/cuda/device.h"
#include "lib/backends/cuda/exec_context.h"
#include "lib/backends/cuda/kernel_choice.h"
#include "lib/backends/cuda/launch_util.h"
#include "lib/backends/cuda/strided_copy.h"
#include "lib/backends/cuda/tiled_gemm.h"
#include "lib/ir/ops/recurrent_attrs.h"

namespace grove::cuda {
namespace {

using backends::RecurrentDims;
using ir::KernelContext;
using ir::RecurrentAttrs;
using ir::RecurrentKind;

constexpr int64_t kMaxBufferElements = int64_t{1} << 31;

// Where a direction's [batch, hidden] state lies in an initial_h / Y_h
// style tensor (layout 0: [dirs, batch, hidden], layout 1: [batch, dirs,
// hidden]): element (b, j) at offset + b * b_stride + j.
struct StateSlice {
  int64_t offset, b_stride;
};
StateSlice SliceOf(const RecurrentDims& dims, int64_t d) {
  const int64_t h = dims.hidden;
  return dims.layout == 0 ? StateSlice{d * dims.batch * h, h} : StateSlice{d * h, dims.dirs * h};
}

// Copies a [batch, hidden] state between a contiguous buffer and direction
// d's slice of an initial_h / Y_h style tensor.
absl::Status CopyState(ExecContext& ec, const RecurrentDims& dims, int64_t d, const float* src, float* dst,
                       bool to_tensor) {
  grove_k::ScaledCopyParams p{};
  const int64_t h = dims.hidden;
  const StateSlice slice = SliceOf(dims, d);
  p.src = to_tensor ? src : src + slice.offset;
  p.dst = to_tensor ? dst + slice.offset : dst;
  p.shape.rank = 2;
  p.shape.d[0] = dims.batch;
  p.shape.d[1] = h;
  p.src_strides.s[0] = to_tensor ? h : slice.b_stride;
  p.src_strides.s[1] = 1;
  p.dst_strides.s[0] = to_tensor ? slice.b_stride : h;
  p.dst_strides.s[1] = 1;
  p.n = dims.batch * h;
  p.scale = 1.0f;
  return ec.Launch({"conv", {DType::kF32}}, "scaled_copy", GridFor(p.n), p);
}

grove_k::RnnAct ToAct(const ir::Activation& a) {
  return {static_cast<int>(a.kind), static_cast<float>(a.alpha), static_cast<float>(a.beta)};
}

// The workspace: xw [rows, gh] first (where a bucket's shapes all have it,
// so its GEMM's operands do not move), rt [hidden, gh] (whole-sequence
// launches only), hr [batch, gh], state_h, state_c, reset_h [batch, h] each
// (64-float aligned), in floats.
struct WorkspaceLayout {
  int64_t n_xw = 0, n_rt = 0, n_hr = 0, n_state = 0;
  int64_t floats() const { return n_xw + n_rt + n_hr + 3 * n_state; }
};
WorkspaceLayout LayoutOf(RecurrentKind kind, const RecurrentDims& dims, bool whole_sequence) {
  auto round = [](int64_t n) { return (n + 63) / 64 * 64; };
  const int64_t gh = ir::GateCount(kind) * dims.hidden;
  return {round(dims.seq * dims.batch * gh), whole_sequence ? round(dims.hidden * gh) : 0, round(dims.batch * gh),
          round(dims.batch * dims.hidden)};
}

// A direction's GEMMs without pointers (the same for both directions):
// X W^T for every step; H R^T per step (every gate, or GRU's z and r, and
// h with linear_before_reset); GRU's (r (.) H) Rh^T into the h-gate
// columns. Their cuBLASLt algorithms are chosen when the step is prepared.
struct RecurrentGemms {
  GemmDesc xw, hidden, reset;
};

RecurrentGemms GemmsOf(const RecurrentAttrs& a, const RecurrentDims& dims) {
  const int64_t h = dims.hidden;
  const int64_t gh = ir::GateCount(a.kind) * h;
  RecurrentGemms g;
  g.xw.trans_b = true;
  g.xw.m = dims.seq * dims.batch;
  g.xw.n = gh;
  g.xw.k = dims.input;
  g.xw.lda = dims.input;
  g.xw.ldb = dims.input;
  g.xw.ldc = gh;
  g.hidden.trans_b = true;
  g.hidden.m = dims.batch;
  g.hidden.n = a.kind == RecurrentKind::kGru && !a.linear_before_reset ? 2 * h : gh;
  g.hidden.k = h;
  g.hidden.lda = h;
  g.hidden.ldb = h;
  g.hidden.ldc = gh;
  g.reset = g.hidden;
  g.reset.n = h;
  return g;
}

// What the prepare makes: the attributes and dims; `lengths_check` when
// sequence_lens lives on the device only (the plan does not know it): the
// gate kernels check its lengths there (a deferred check, no read back);
// `whole_sequence` in a bucketed plan (the file comment), then `xw_tiled`
// when the input projection must read its dims when it runs (W not a weight).
struct RecurrentPrepared {
  backends::RecurrentCall call;
  RecurrentGemms gemms;
  bool nothing = false;  // batch 0: every output is empty
  DeviceCheckSite lengths_check;
  bool whole_sequence = false;
  bool xw_tiled = false;
};

// The block of an rnn_sequence launch: one thread per hidden product column
// (rounded to warps, at most 256), the same for every shape of the node.
constexpr int64_t kMaxSequenceThreads = 256;
LaunchDims SequenceLaunch(int64_t batch, int64_t columns) {
  LaunchDims dims;
  dims.grid[0] = static_cast<uint32_t>(std::clamp<int64_t>(batch, 1, 65535));
  dims.block[0] = static_cast<uint32_t>(std::clamp<int64_t>((columns + 31) / 32 * 32, 32, kMaxSequenceThreads));
  return dims;
}

absl::Status RunRecurrent(const KernelContext& ctx, const RecurrentPrepared& rp) {
  ExecContext& ec = Exec(ctx);
  Device& dev = ec.device();
  const RecurrentAttrs& a = rp.call.attrs;
  const RecurrentDims& dims = rp.call.dims;
  const RecurrentGemms& gemms = rp.gemms;
  const RecurrentKind kind = a.kind;
  const bool lstm = kind == RecurrentKind::kLstm, gru = kind == RecurrentKind::kGru;
  const int64_t h = dims.hidden, batch = dims.batch, seq = dims.seq;
  const int64_t gh = ir::GateCount(kind) * h;
  const int64_t rows = seq * batch;

  const WorkspaceLayout layout = LayoutOf(kind, dims, rp.whole_sequence);
  float* xw = static_cast<float*>(ctx.workspace());
  float* rt = xw + layout.n_xw;
  float* hr = rt + layout.n_rt;
  float* state_h = hr + layout.n_hr;
  float* state_c = state_h + layout.n_state;
  float* reset_h = state_c + layout.n_state;

  const float* x = static_cast<const float*>(ctx.input(0).data);
  const float* w_all = static_cast<const float*>(ctx.input(1).data);
  const float* r_all = static_cast<const float*>(ctx.input(2).data);
  const float* b_all = ctx.has_input(3) ? static_cast<const float*>(ctx.input(3).data) : nullptr;
  const float* h0 = ctx.has_input(5) ? static_cast<const float*>(ctx.input(5).data) : nullptr;
  const float* c0 = lstm && ctx.has_input(6) ? static_cast<const float*>(ctx.input(6).data) : nullptr;
  const float* p_all = lstm && ctx.has_input(7) ? static_cast<const float*>(ctx.input(7).data) : nullptr;
  float* y = ctx.has_output(0) ? static_cast<float*>(ctx.output(0).data) : nullptr;
  float* y_h = ctx.has_output(1) ? static_cast<float*>(ctx.output(1).data) : nullptr;
  float* y_c = lstm && ctx.has_output(2) ? static_cast<float*>(ctx.output(2).data) : nullptr;
  // Steps past an entry's length leave Y zero: a whole-sequence launch
  // writes those zeros itself (a memset's size would be baked in its graph).
  if (!rp.whole_sequence && y != nullptr && ctx.output(0).byte_size() > 0) {
    if (absl::Status s = dev.MemsetAsync(y, 0, ctx.output(0).byte_size(), ec.stream()); !s.ok()) return s;
  }

  grove_k::RnnStepParams p{};
  p.kind = kind == RecurrentKind::kRnn ? 0 : gru ? 1 : 2;
  p.linear_before_reset = a.linear_before_reset;
  p.input_forget = a.input_forget;
  p.has_clip = a.has_clip;
  p.clip = static_cast<float>(a.clip);
  p.batch = batch;
  p.hidden = h;
  p.seq = seq;
  p.dirs = dims.dirs;
  p.layout = static_cast<int>(dims.layout);
  p.hr = hr;
  p.ldhr = gh;
  p.xw = dims.input > 0 ? xw : nullptr;  // no input: the projection is 0
  p.gh = gh;
  p.seq_lens = ctx.has_input(4) ? ctx.input(4).data : nullptr;
  p.seq_lens_i64 = ctx.has_input(4) && ctx.input(4).dtype == DType::kI64;
  p.check = rp.lengths_check.check;
  p.state_h = state_h;
  p.state_c = state_c;
  p.reset_h = reset_h;
  p.y = y;
  const LaunchDims grid = GridFor(batch * h);
  const jit::ModuleSpec rnn_module{"rnn", {DType::kF32}};

  for (int64_t d = 0; d < dims.dirs; ++d) {
    const bool reverse = a.reverse || d == 1;
    const float* w = w_all + d * gh * dims.input;
    const float* r = r_all + d * gh * h;
    p.d = d;
    p.wb = b_all != nullptr ? b_all + d * 2 * gh : nullptr;
    p.rb = p.wb != nullptr ? p.wb + gh : nullptr;
    p.peephole = p_all != nullptr ? p_all + d * 3 * h : nullptr;
    p.f = ToAct(a.activation(static_cast<int>(d), 0));
    if (ir::ActivationsPerDirection(kind) > 1) p.g = ToAct(a.activation(static_cast<int>(d), 1));
    if (lstm) p.h = ToAct(a.activation(static_cast<int>(d), 2));

    // X W^T for every step (rows follow X's layout).
    if (rows > 0 && dims.input > 0) {
      GemmDesc g = gemms.xw;
      g.a = x;
      g.b = w;
      g.c = xw;
      if (absl::Status s = rp.xw_tiled ? RunTiledGemm(ec, g) : ec.Gemm(g); !s.ok()) return s;
    }
    absl::Status s;
    if (rp.whole_sequence) {
      // R^T ([hidden, gh]): R ([gh, hidden]) read with strides {1, hidden}.
      if (s = StridedCopy(ec, sizeof(float), {h, gh}, r, {1, h}, rt); !s.ok()) return s;
      grove_k::RnnSequenceParams q{};
      q.step = p;
      q.step.check_lengths = d == 0 && p.check.record != nullptr;
      q.reverse = reverse;
      static_assert(static_cast<int>(GemmDesc::Math::kTF32) == 1 && static_cast<int>(GemmDesc::Math::kF16) == 3,
                    "rnn_sequence's math codes are GemmDesc::Math's");
      q.math = static_cast<int>(ec.gemm_math());
      q.rt = rt;
      q.h0 = h0;
      q.c0 = c0;
      q.y_h = y_h;
      q.y_c = y_c;
      const StateSlice slice = SliceOf(dims, d);
      q.state_offset = slice.offset;
      q.state_b_stride = slice.b_stride;
      const LaunchDims launch = SequenceLaunch(batch, gemms.hidden.n);
      if (s = ec.Launch(rnn_module, "rnn_sequence", launch, q); !s.ok()) return s;
      continue;
    }

    const size_t state_bytes = static_cast<size_t>(batch * h) * sizeof(float);
    s = h0 != nullptr ? CopyState(ec, dims, d, h0, state_h, false)
                      : dev.MemsetAsync(state_h, 0, state_bytes, ec.stream());
    if (!s.ok()) return s;
    if (lstm) {
      s = c0 != nullptr ? CopyState(ec, dims, d, c0, state_c, false)
                        : dev.MemsetAsync(state_c, 0, state_bytes, ec.stream());
      if (!s.ok()) return s;
    }

    // H R^T: every gate, or GRU's z and r (and h with linear_before_reset).
    GemmDesc hg = gemms.hidden;
    hg.a = state_h;
    hg.b = r;
    hg.c = hr;
    // GRU's (r (.) H) Rh^T into the h-gate columns.
    GemmDesc rg = gemms.reset;
    rg.a = reset_h;
    rg.b = r + 2 * h * h;
    rg.c = hr + 2 * h;

    for (int64_t step = 0; step < seq; ++step) {
      p.t = reverse ? seq - 1 - step : step;
      p.check_lengths = d == 0 && step == 0 && p.check.record != nullptr;
      if (s = ec.Gemm(hg); !s.ok()) return s;
      if (gru && !a.linear_before_reset) {
        p.gru_phase = 0;
        if (s = ec.Launch(rnn_module, "rnn_step", grid, p); !s.ok()) return s;
        if (s = ec.Gemm(rg); !s.ok()) return s;
      }
      p.gru_phase = 1;
      if (s = ec.Launch(rnn_module, "rnn_step", grid, p); !s.ok()) return s;
    }
    if (y_h != nullptr) {
      if (s = CopyState(ec, dims, d, state_h, y_h, true); !s.ok()) return s;
    }
    if (y_c != nullptr) {
      if (s = CopyState(ec, dims, d, state_c, y_c, true); !s.ok()) return s;
    }
  }
  return absl::OkStatus();
}

template <RecurrentKind kKind>
absl::StatusOr<ir::PreparedKernel> PrepareRecurrent(const KernelContext& ctx) {
  absl::StatusOr<backends::RecurrentCall> call = backends::ReadRecurrentCall(ctx, kKind);
  if (!call.ok()) return call.status();
  const RecurrentDims& dims = call->dims;
  const TensorView& x = ctx.input(0);
  const int64_t gates = ir::GateCount(kKind);
  const int64_t h = dims.hidden;
  ExecContext& ec = Exec(ctx);
  RecurrentPrepared rp;
  if (ctx.has_input(4)) {
    const TensorView& sl = ctx.input(4);
    if (absl::Status s = backends::CheckSequenceLensShape(ctx, dims); !s.ok()) return s;
    if (sl.dtype != DType::kI32 && sl.dtype != DType::kI64) return backends::SequenceLensDTypeError(ctx);
    // The lengths are checked now when the plan knows them, else by the
    // gate kernels on the device, which read the device tensor either way.
    if (ec.ValuesOnHost(ctx, 4)) {
      absl::StatusOr<std::vector<int64_t>> lengths = ec.ReadInts(ctx, 4);
      if (!lengths.ok()) return lengths.status();
      if (absl::Status s = backends::CheckSequenceLengths(ctx, dims, *lengths); !s.ok()) return s;
    } else {
      absl::StatusOr<DeviceCheckSite> site =
          ec.CheckSite(ctx, [seq = dims.seq](const grove_k::CheckRecord& r) {
            return backends::SequenceLengthMessage(r.value, r.a, seq);
          });
      if (!site.ok()) return site.status();
      rp.lengths_check = *std::move(site);
    }
  }
  if (absl::Status s = backends::CheckRecurrentOutputs(ctx, dims); !s.ok()) return s;
  const int64_t rows = dims.seq * dims.batch;
  const int64_t gh = gates * h;
  if (rows > kMaxBufferElements / std::max<int64_t>(gh, 1) || h > kMaxBufferElements / std::max<int64_t>(gh, 1)) {
    return ctx.Error(absl::StrCat("the input projection of ", dims.seq, " steps x ", dims.batch, " batch x ", gh,
                                  " gate units is too large"));
  }
  if (x.dtype != DType::kF32) {
    return absl::UnimplementedError(ctx.Error(absl::StrCat("recurrent ops have no CUDA kernel for ",
                                                           DTypeName(x.dtype), " (f32 only)"))
                                        .message());
  }
  rp.nothing = dims.batch == 0;
  // Without steps the whole-sequence launch is the one that still copies
  // the initial state and checks device lengths.
  rp.whole_sequence = ec.bucket_plan() || dims.seq == 0;
  const uint64_t workspace =
      rp.nothing ? 0 : static_cast<uint64_t>(LayoutOf(kKind, dims, rp.whole_sequence).floats()) * sizeof(float);
  rp.call = *std::move(call);
  const RecurrentDims& d = rp.call.dims;
  rp.gemms = GemmsOf(rp.call.attrs, d);
  // W a weight: the projection's K and N are the bucket's (UseTiledGemm).
  rp.xw_tiled = rp.whole_sequence && UseTiledGemm(ec, rp.gemms.xw, ec.host_input(1) != nullptr);
  if (!rp.nothing) {
    // The per-step products first, so the input projection's choice (the
    // largest) is the one recorded for the node.
    if (!rp.whole_sequence && kKind == RecurrentKind::kGru && !rp.call.attrs.linear_before_reset && d.seq > 0) {
      rp.gemms.reset.algorithm = ChooseGemmAlgorithm(ctx, rp.gemms.reset);
    }
    if (!rp.whole_sequence && d.seq > 0) rp.gemms.hidden.algorithm = ChooseGemmAlgorithm(ctx, rp.gemms.hidden);
    if (!rp.xw_tiled && d.seq * d.batch > 0 && d.input > 0) {
      rp.gemms.xw.algorithm = ChooseGemmAlgorithm(ctx, rp.gemms.xw);
    }
  }
  return MakePrepared(std::move(rp), workspace);
}

absl::Status RecurrentKernel(KernelContext& ctx) {
  const RecurrentPrepared* rp = PreparedParams<RecurrentPrepared>(ctx);
  if (rp == nullptr) return NotPrepared(ctx);
  if (rp->nothing) return absl::OkStatus();
  return RunRecurrent(ctx, *rp);
}

}  // namespace

absl::Status RegisterCudaRecurrentKernels(ir::OpRegistry& registry) {
  // sequence_lens (input 4) is checked on the device when the plan does not
  // know it, so nothing is read back.
  const struct {
    const char* type;
    ir::KernelDef kernel;
  } kernels[] = {
      {"RNN", {&RecurrentKernel, &PrepareRecurrent<RecurrentKind::kRnn>}},
      {"GRU", {&RecurrentKernel, &PrepareRecurrent<RecurrentKind::kGru>}},
      {"LSTM", {&RecurrentKernel, &PrepareRecurrent<RecurrentKind::kLstm>}},
  };
  for (const auto& k : kernels) {
    if (absl::Status s = registry.SetKernel(k.type, ir::Backend::kCuda, k.kernel); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace grove::cuda
