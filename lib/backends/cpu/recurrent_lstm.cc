#include "lib/backends/cpu/recurrent_lstm.h"

#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <new>
#include <vector>

#include "absl/strings/string_view.h"
#include "lib/backends/cpu/cpu_features.h"
#include "lib/backends/cpu/parallel_for.h"

namespace grove::cpu {
namespace {

using ir::ActivationKind;
using ir::RecurrentKind;

bool SwitchedOff(const char* variable) {
  const char* v = std::getenv(variable);
  if (v == nullptr) return false;
  const absl::string_view s(v);
  return s == "0" || s == "off" || s == "OFF" || s == "false" || s == "FALSE";
}

// GROVE_CPU_ONEDNN=0 keeps the reference kernels everywhere, this one too.
bool EnabledByEnvironment() { return !SwitchedOff("GROVE_CPU_LSTM_KERNEL") && !SwitchedOff("GROVE_CPU_ONEDNN"); }

std::atomic<LstmKernelMode>& ModeFlag() {
  static std::atomic<LstmKernelMode> mode{EnabledByEnvironment() ? LstmKernelMode::kAuto : LstmKernelMode::kOff};
  return mode;
}

std::atomic<int64_t> g_made{0};
std::atomic<bool> g_avx512_allowed{true};

// ---------------------------------------------------------------------------
// The loops per vector ISA (recurrent_lstm_simd.inc).

// Rows (batch entries, or time steps of the input projection) one pass over
// a packed matrix multiplies at most.
constexpr int kLstmMaxRows = 4;

namespace avx2 {
#define GROVE_LSTM_TARGET __attribute__((target("avx2,fma")))
struct Simd {
  static constexpr int64_t kLanes = 8;
  using V = __m256;
  using Mask = __m256;
  GROVE_LSTM_TARGET static V Load(const float* p) { return _mm256_loadu_ps(p); }
  GROVE_LSTM_TARGET static void Store(float* p, V v) { _mm256_storeu_ps(p, v); }
  GROVE_LSTM_TARGET static V Set1(float x) { return _mm256_set1_ps(x); }
  GROVE_LSTM_TARGET static V Broadcast(const float* p) { return _mm256_broadcast_ss(p); }
  GROVE_LSTM_TARGET static V Zero() { return _mm256_setzero_ps(); }
  GROVE_LSTM_TARGET static V Mul(V a, V b) { return _mm256_mul_ps(a, b); }
  GROVE_LSTM_TARGET static V Fmadd(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
  GROVE_LSTM_TARGET static V Min(V a, V b) { return _mm256_min_ps(a, b); }
  GROVE_LSTM_TARGET static V Max(V a, V b) { return _mm256_max_ps(a, b); }
  GROVE_LSTM_TARGET static V Div(V a, V b) { return _mm256_div_ps(a, b); }
  GROVE_LSTM_TARGET static Mask AbsLess(V x, float c) {
    return _mm256_cmp_ps(_mm256_andnot_ps(_mm256_set1_ps(-0.0f), x), _mm256_set1_ps(c), _CMP_LT_OQ);
  }
  GROVE_LSTM_TARGET static V Select(Mask m, V if_true, V if_false) { return _mm256_blendv_ps(if_false, if_true, m); }
};
#include "lib/backends/cpu/recurrent_lstm_simd.inc"
#undef GROVE_LSTM_TARGET
}  // namespace avx2

namespace avx512 {
#define GROVE_LSTM_TARGET __attribute__((target("avx512f")))
struct Simd {
  static constexpr int64_t kLanes = 16;
  using V = __m512;
  using Mask = __mmask16;
  GROVE_LSTM_TARGET static V Load(const float* p) { return _mm512_loadu_ps(p); }
  GROVE_LSTM_TARGET static void Store(float* p, V v) { _mm512_storeu_ps(p, v); }
  GROVE_LSTM_TARGET static V Set1(float x) { return _mm512_set1_ps(x); }
  GROVE_LSTM_TARGET static V Broadcast(const float* p) { return _mm512_set1_ps(*p); }
  GROVE_LSTM_TARGET static V Zero() { return _mm512_setzero_ps(); }
  GROVE_LSTM_TARGET static V Mul(V a, V b) { return _mm512_mul_ps(a, b); }
  GROVE_LSTM_TARGET static V Fmadd(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
  // Masked forms with every lane set: GCC 12's _mm512_min_ps and
  // _mm512_max_ps pass an undefined source that -Wmaybe-uninitialized flags.
  GROVE_LSTM_TARGET static V Min(V a, V b) { return _mm512_mask_min_ps(a, 0xffff, a, b); }
  GROVE_LSTM_TARGET static V Max(V a, V b) { return _mm512_mask_max_ps(a, 0xffff, a, b); }
  GROVE_LSTM_TARGET static V Div(V a, V b) { return _mm512_div_ps(a, b); }
  GROVE_LSTM_TARGET static Mask AbsLess(V x, float c) {
    return _mm512_cmp_ps_mask(_mm512_abs_ps(x), _mm512_set1_ps(c), _CMP_LT_OQ);
  }
  GROVE_LSTM_TARGET static V Select(Mask m, V if_true, V if_false) { return _mm512_mask_blend_ps(m, if_false, if_true); }
};
#include "lib/backends/cpu/recurrent_lstm_simd.inc"
#undef GROVE_LSTM_TARGET
}  // namespace avx512

// The loops of one ISA.
struct LstmLoops {
  int64_t lanes;
  void (*multiply_rows)(int rows, const float* const a[kLstmMaxRows], int64_t k_count, const float* w, int64_t cols,
                        const float* const init[kLstmMaxRows], float* const out[kLstmMaxRows]);
  void (*gates)(const float* pre, int64_t hp, const float* p, float* c, float* h);
  int64_t (*packed_index)(int64_t k, int64_t col, int64_t k_count);
};

// AVX-512 where the CPU has it (16 lanes) and it is allowed, else AVX2 +
// FMA; null on neither.
const LstmLoops* HostLoops() {
  static const LstmLoops kAvx512 = {avx512::Simd::kLanes, &avx512::MultiplyRows, &avx512::LstmGates,
                                    &avx512::PackedIndex};
  static const LstmLoops kAvx2 = {avx2::Simd::kLanes, &avx2::MultiplyRows, &avx2::LstmGates, &avx2::PackedIndex};
  if (!UseAvx2Kernels()) return nullptr;
  const bool avx512 = HostCpuFeatures().avx512f && g_avx512_allowed.load(std::memory_order_relaxed);
  return avx512 ? &kAvx512 : &kAvx2;
}

// std::vector's allocator on 64-byte (cache line) boundaries: a packed
// matrix is read a whole vector at a time, and an AVX-512 load from
// malloc's 16-byte alignment straddles two lines (a time step of a
// 128-unit layer at batch 1, R from L2, took 1.5x as long: 256 against 171
// us for 64 steps in bench/recurrent_bench, depending on where the block
// landed).
template <typename T>
struct CacheLineAllocator {
  using value_type = T;
  static constexpr std::align_val_t kAlign{64};
  CacheLineAllocator() = default;
  template <typename U>
  explicit CacheLineAllocator(const CacheLineAllocator<U>&) {}
  T* allocate(size_t n) { return static_cast<T*>(::operator new(n * sizeof(T), kAlign)); }
  void deallocate(T* p, size_t) { ::operator delete(p, kAlign); }
  friend bool operator==(const CacheLineAllocator&, const CacheLineAllocator&) { return true; }
};

// Kernel inputs the prepare packs: W, R, B, P.
constexpr int kPackedInputs[] = {1, 2, 3, 7};

}  // namespace

LstmKernelMode GetLstmKernelMode() { return ModeFlag().load(std::memory_order_relaxed); }
void SetLstmKernelMode(LstmKernelMode mode) { ModeFlag().store(mode, std::memory_order_relaxed); }
int64_t LstmKernelsMade() { return g_made.load(std::memory_order_relaxed); }
bool LstmKernelAvx512Allowed() { return g_avx512_allowed.load(std::memory_order_relaxed); }
void SetLstmKernelAvx512Allowed(bool allowed) { g_avx512_allowed.store(allowed, std::memory_order_relaxed); }

const char* LstmKernelIsa() {
  const LstmLoops* loops = HostLoops();
  return loops == nullptr ? "" : loops->lanes == 16 ? "avx512" : "avx2";
}

// bench/recurrent_bench (one layer, interleaved medians, on a busy 2-core
// Xeon with AVX-512, so +-30%): with two batch rows a pass over R, oneDNN
// 2.6 took 1.8-3.3x the fused kernel's time at batch 1 (hidden 32) but
// 0.3-0.65x at batch 8-64 with hidden 32-256. With four rows a pass
// (AVX-512; 2026-12-04) it takes 2.7x at batch 1 hidden 32, 1.35-1.6x at
// batch 1-16 up to hidden 256, 1.05-1.1x at batch 8 hidden 128-256 and
// batch 64 hidden 32, 1.0x at batch 16 hidden 128; `grove bench` of a
// bidirectional layer (hidden 64, 64 steps) 0.65 vs 0.82 ms at batch 8 and
// 3.3 vs 3.9 ms at batch 32 (1 thread), and even at batch 64. So the
// kernel takes batch x hidden up to 2048.
bool LstmKernelTakes(const backends::RecurrentDims& dims) { return dims.batch * dims.hidden <= 2048; }

// A task's multiply-adds past which the layer's directions and groups of
// batch entries run on the session's threads: some 20 us of one core's
// work, well past a fork and join with a spinning worker.
constexpr double kLstmTaskMacs = 2e5;

int64_t LstmBatchGroups(int64_t batch, int64_t dirs, int64_t workers, double row_macs) {
  int64_t groups = std::max<int64_t>(1, (workers + dirs - 1) / dirs);
  groups = std::min(groups, batch);
  while (groups > 1 && row_macs * static_cast<double>(batch / groups) < kLstmTaskMacs) --groups;
  return groups;
}

class LstmKernel {
 public:
  backends::RecurrentDims dims;
  const LstmLoops* loops = nullptr;
  int64_t hp = 0;            // hidden rounded up to loops->lanes
  bool reverse = false;      // the forward direction runs backwards (direction=reverse)
  bool peephole = false;
  const void* packed_from[4] = {};  // kPackedInputs' bytes as the prepare read them
  // Per direction: W [I][4 hp] and R [H][4 hp] (in the loops' panels of 4
  // vectors' columns), bias [4 hp], P [3 hp] (when peephole); gate blocks
  // i, o, f, c of hp columns, zero past H.
  std::vector<float, CacheLineAllocator<float>> packed;  // on a cache line

  int64_t Cols() const { return 4 * hp; }
  int64_t WOffset(int64_t d) const { return d * DirectionFloats(); }
  int64_t ROffset(int64_t d) const { return WOffset(d) + dims.input * Cols(); }
  int64_t BiasOffset(int64_t d) const { return ROffset(d) + dims.hidden * Cols(); }
  int64_t PeepholeOffset(int64_t d) const { return BiasOffset(d) + Cols(); }
  int64_t DirectionFloats() const { return (dims.input + dims.hidden + 1) * Cols() + (peephole ? 3 * hp : 0); }
};

std::shared_ptr<const LstmKernel> PrepareLstmKernel(const ir::KernelContext& ctx, const ir::RecurrentAttrs& a,
                                                    const backends::RecurrentDims& dims, WorkspaceLayout* layout) {
  const LstmKernelMode mode = GetLstmKernelMode();
  const LstmLoops* loops = HostLoops();
  if (mode == LstmKernelMode::kOff || loops == nullptr || a.kind != RecurrentKind::kLstm) return nullptr;
  if (a.has_clip || a.input_forget || (mode == LstmKernelMode::kAuto && !LstmKernelTakes(dims))) return nullptr;
  if (dims.seq <= 0 || dims.batch <= 0 || dims.input <= 0 || dims.hidden <= 0) return nullptr;
  for (int i = 0; i < 8; ++i) {
    if (i != 4 && ctx.has_input(i) && ctx.input(i).dtype != DType::kF32) return nullptr;
  }
  for (int d = 0; d < dims.dirs; ++d) {
    if (a.activation(d, 0).kind != ActivationKind::kSigmoid || a.activation(d, 1).kind != ActivationKind::kTanh ||
        a.activation(d, 2).kind != ActivationKind::kTanh) {
      return nullptr;
    }
  }
  auto k = std::make_shared<LstmKernel>();
  for (int n = 0; n < 4; ++n) {
    const int i = kPackedInputs[n];
    if (!ctx.has_input(i)) continue;
    if (ctx.input(i).data == nullptr) return nullptr;  // not readable here: not packed
    k->packed_from[n] = ctx.input(i).data;
  }
  const int64_t h = dims.hidden, in = dims.input;
  k->dims = dims;
  k->loops = loops;
  k->hp = (h + loops->lanes - 1) / loops->lanes * loops->lanes;
  k->reverse = a.reverse;
  k->peephole = ctx.has_input(7);
  const int64_t cols = k->Cols(), hp = k->hp;
  k->packed.assign(static_cast<size_t>(dims.dirs * k->DirectionFloats()), 0.0f);
  const float* w_all = ctx.input(1).as<const float>();
  const float* r_all = ctx.input(2).as<const float>();
  const float* b_all = ctx.has_input(3) ? ctx.input(3).as<const float>() : nullptr;
  const float* p_all = k->peephole ? ctx.input(7).as<const float>() : nullptr;
  for (int64_t d = 0; d < dims.dirs; ++d) {
    // ONNX's W [4 H, I] (gates i, o, f, c) to [I][gate * hp + j] in the
    // loops' panels; R likewise.
    const float* w = w_all + d * 4 * h * in;
    const float* r = r_all + d * 4 * h * h;
    float* pw = k->packed.data() + k->WOffset(d);
    float* pr = k->packed.data() + k->ROffset(d);
    for (int64_t g = 0; g < 4; ++g) {
      for (int64_t j = 0; j < h; ++j) {
        const int64_t col = g * hp + j;
        for (int64_t c = 0; c < in; ++c) pw[loops->packed_index(c, col, in)] = w[(g * h + j) * in + c];
        for (int64_t c = 0; c < h; ++c) pr[loops->packed_index(c, col, h)] = r[(g * h + j) * h + c];
      }
    }
    if (b_all != nullptr) {
      const float* wb = b_all + d * 8 * h;
      float* pb = k->packed.data() + k->BiasOffset(d);
      for (int64_t g = 0; g < 4; ++g) {
        for (int64_t j = 0; j < h; ++j) pb[g * hp + j] = wb[g * h + j] + wb[(4 + g) * h + j];
      }
    }
    if (p_all != nullptr) {
      float* pp = k->packed.data() + k->PeepholeOffset(d);
      for (int64_t g = 0; g < 3; ++g) std::copy_n(p_all + (d * 3 + g) * h, h, pp + g * hp);
    }
  }
  for (int64_t d = 0; d < dims.dirs; ++d) {  // per direction (they may run side by side)
    layout->Add<float>(dims.seq * dims.batch * cols);  // the gates of every step
    layout->Add<float>(dims.batch * hp);               // H
    layout->Add<float>(dims.batch * hp);               // C
  }
  g_made.fetch_add(1, std::memory_order_relaxed);
  return k;
}

bool RunLstmKernel(const LstmKernel& k, const ir::KernelContext& ctx) {
  for (int n = 0; n < 4; ++n) {
    const int i = kPackedInputs[n];
    const void* data = ctx.has_input(i) ? ctx.input(i).data : nullptr;
    if (data != k.packed_from[n]) return false;
  }
  const backends::RecurrentDims& dims = k.dims;
  const int64_t T = dims.seq, N = dims.batch, I = dims.input, H = dims.hidden, hp = k.hp, cols = k.Cols();
  const float* x = ctx.input(0).as<const float>();
  const float* h0 = ctx.has_input(5) ? ctx.input(5).as<const float>() : nullptr;
  const float* c0 = ctx.has_input(6) ? ctx.input(6).as<const float>() : nullptr;
  float* y = ctx.has_output(0) ? ctx.output(0).as<float>() : nullptr;
  float* y_h = ctx.has_output(1) ? ctx.output(1).as<float>() : nullptr;
  float* y_c = ctx.has_output(2) ? ctx.output(2).as<float>() : nullptr;
  struct Scratch {
    float *gates, *state_h, *state_c;
  };
  Scratch scratch[2] = {};
  WorkspaceCursor ws(ctx.workspace());
  for (int64_t d = 0; d < dims.dirs; ++d) {
    scratch[d].gates = ws.Take<float>(T * N * cols);
    scratch[d].state_h = ws.Take<float>(N * hp);
    scratch[d].state_c = ws.Take<float>(N * hp);
  }

  // Direction d for the batch entries [b_begin, b_end): batch entries are
  // independent (their own rows of the gates, H, C, Y, Y_h and Y_c), so a
  // group computes the same bytes whichever thread runs it and however the
  // batch is cut (a row's sums run in the same order in a pass of one to
  // four rows).
  auto run_group = [&](int64_t d, int64_t b_begin, int64_t b_end) {
    const int64_t n = b_end - b_begin;
    float* gates = scratch[d].gates;
    float* state_h = scratch[d].state_h;
    float* state_c = scratch[d].state_c;
    const bool reverse = k.reverse || d == 1;
    const float* pw = k.packed.data() + k.WOffset(d);
    const float* pr = k.packed.data() + k.ROffset(d);
    const float* bias = k.packed.data() + k.BiasOffset(d);
    const float* peephole = k.peephole ? k.packed.data() + k.PeepholeOffset(d) : nullptr;
    // The input projection of every step, biases included: gates[t][b].
    for (int64_t row = 0; row < T * n; row += kLstmMaxRows) {
      const int rows = static_cast<int>(std::min<int64_t>(kLstmMaxRows, T * n - row));
      const float* a[kLstmMaxRows] = {};
      float* out[kLstmMaxRows] = {};
      const float* init[kLstmMaxRows] = {};
      for (int r = 0; r < rows; ++r) {
        const int64_t t = (row + r) / n, b = b_begin + (row + r) % n;
        a[r] = x + dims.XRow(t, b) * I;
        out[r] = gates + (t * N + b) * cols;
        init[r] = bias;
      }
      k.loops->multiply_rows(rows, a, I, pw, cols, init, out);
    }
    for (int64_t b = b_begin; b < b_end; ++b) {
      float* sh = state_h + b * hp;
      float* sc = state_c + b * hp;
      std::fill(sh, sh + hp, 0.0f);
      std::fill(sc, sc + hp, 0.0f);
      if (h0 != nullptr) std::copy_n(h0 + dims.StateOffset(d, b), H, sh);
      if (c0 != nullptr) std::copy_n(c0 + dims.StateOffset(d, b), H, sc);
    }
    for (int64_t step = 0; step < T; ++step) {
      const int64_t t = reverse ? T - 1 - step : step;
      float* pre = gates + t * N * cols;
      // pre[b] += H_{t-1}[b] * R, up to kLstmMaxRows batch entries per pass
      // over R.
      for (int64_t b = b_begin; b < b_end; b += kLstmMaxRows) {
        const int rows = static_cast<int>(std::min<int64_t>(kLstmMaxRows, b_end - b));
        const float* a[kLstmMaxRows] = {};
        float* out[kLstmMaxRows] = {};
        const float* init[kLstmMaxRows] = {};
        for (int r = 0; r < rows; ++r) {
          a[r] = state_h + (b + r) * hp;
          out[r] = pre + (b + r) * cols;
          init[r] = out[r];
        }
        k.loops->multiply_rows(rows, a, H, pr, cols, init, out);
      }
      for (int64_t b = b_begin; b < b_end; ++b) {
        k.loops->gates(pre + b * cols, hp, peephole, state_c + b * hp, state_h + b * hp);
        if (y != nullptr) std::copy_n(state_h + b * hp, H, y + dims.YOffset(t, d, b));
      }
    }
    for (int64_t b = b_begin; b < b_end; ++b) {
      if (y_h != nullptr) std::copy_n(state_h + b * hp, H, y_h + dims.StateOffset(d, b));
      if (y_c != nullptr) std::copy_n(state_c + b * hp, H, y_c + dims.StateOffset(d, b));
    }
  };
  // Tasks: the directions (a bidirectional layer's two are independent:
  // their own scratch, disjoint parts of Y, Y_h and Y_c; ONNX Runtime runs
  // them side by side too) times groups of batch entries, on the session's
  // threads when each task is worth a fork and join. A time step is too
  // short to split across threads (a barrier a step), a batch is not: each
  // group runs its own recurrence, reading the shared packed R.
  ir::IntraOpThreads* threads = IntraOpThreadsOf(ctx);
  const int64_t workers = threads != nullptr ? threads->num_threads() : 1;
  const double row_macs = static_cast<double>(T) * static_cast<double>(cols) * static_cast<double>(I + H);
  if (workers <= 1 || row_macs * static_cast<double>(N) < kLstmTaskMacs) {
    for (int64_t d = 0; d < dims.dirs; ++d) run_group(d, 0, N);
    return true;
  }
  const int64_t groups = LstmBatchGroups(N, dims.dirs, workers, row_macs);
  threads->Run(dims.dirs * groups, [&](int64_t task) {
    const int64_t d = task / groups, g = task % groups;
    const int64_t base = N / groups, extra = N % groups;
    const int64_t begin = g * base + std::min(g, extra);
    run_group(d, begin, begin + base + (g < extra ? 1 : 0));
  });
  return true;
}

}  // namespace grove::cpu
