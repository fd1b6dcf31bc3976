#include "lib/backends/cpu/recurrent_lstm.h"

#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "absl/strings/string_view.h"
#include "lib/backends/cpu/cpu_features.h"

namespace grove::cpu {
namespace {

using ir::ActivationKind;
using ir::RecurrentKind;

constexpr int64_t kLanes = 8;

int64_t PadToLanes(int64_t n) { return (n + kLanes - 1) / kLanes * kLanes; }

bool EnabledByEnvironment() {
  const char* v = std::getenv("GROVE_CPU_LSTM_KERNEL");
  if (v == nullptr) return true;
  const absl::string_view s(v);
  return !(s == "0" || s == "off" || s == "OFF" || s == "false" || s == "FALSE");
}

std::atomic<LstmKernelMode>& ModeFlag() {
  static std::atomic<LstmKernelMode> mode{EnabledByEnvironment() ? LstmKernelMode::kAuto : LstmKernelMode::kOff};
  return mode;
}

std::atomic<int64_t> g_made{0};

// ---------------------------------------------------------------------------
// 8-lane math (AVX2 + FMA).

// tanh(x): an odd rational function of degree 13/6 on [-7.9053, 7.9053]
// (beyond which tanh rounds to +-1 in float), x itself below 4e-4 (the
// same coefficients as Eigen's fast tanh; a scan of [-20, 20] in steps of
// 1e-4 found it within 3e-7 of tanh, relative error below 3e-7, and the
// sigmoid below within 1.6e-7). NaN stays NaN (max/min return the NaN
// operand given second).
__attribute__((target("avx2,fma"))) inline __m256 Tanh8(__m256 x) {
  const __m256 bound = _mm256_set1_ps(7.90531110763549805f);
  const __m256 tiny = _mm256_cmp_ps(_mm256_andnot_ps(_mm256_set1_ps(-0.0f), x), _mm256_set1_ps(4e-4f), _CMP_LT_OQ);
  const __m256 t = _mm256_min_ps(bound, _mm256_max_ps(_mm256_sub_ps(_mm256_setzero_ps(), bound), x));
  const __m256 t2 = _mm256_mul_ps(t, t);
  __m256 p = _mm256_set1_ps(-2.76076847742355e-16f);
  p = _mm256_fmadd_ps(p, t2, _mm256_set1_ps(2.00018790482477e-13f));
  p = _mm256_fmadd_ps(p, t2, _mm256_set1_ps(-8.60467152213735e-11f));
  p = _mm256_fmadd_ps(p, t2, _mm256_set1_ps(5.12229709037114e-08f));
  p = _mm256_fmadd_ps(p, t2, _mm256_set1_ps(1.48572235717979e-05f));
  p = _mm256_fmadd_ps(p, t2, _mm256_set1_ps(6.37261928875436e-04f));
  p = _mm256_fmadd_ps(p, t2, _mm256_set1_ps(4.89352455891786e-03f));
  p = _mm256_mul_ps(p, t);
  __m256 q = _mm256_set1_ps(1.19825839466702e-06f);
  q = _mm256_fmadd_ps(q, t2, _mm256_set1_ps(1.18534705686654e-04f));
  q = _mm256_fmadd_ps(q, t2, _mm256_set1_ps(2.26843463243900e-03f));
  q = _mm256_fmadd_ps(q, t2, _mm256_set1_ps(4.89352518554385e-03f));
  return _mm256_blendv_ps(_mm256_div_ps(p, q), x, tiny);
}

// sigmoid(x) = 1/2 + tanh(x/2)/2.
__attribute__((target("avx2,fma"))) inline __m256 Sigmoid8(__m256 x) {
  const __m256 half = _mm256_set1_ps(0.5f);
  return _mm256_fmadd_ps(Tanh8(_mm256_mul_ps(x, half)), half, half);
}

// out[r][0, 8 kVecs) = init[r][...] (0 when null) + sum_k a[r][k] w[k][...]
// for kRows rows that share each load of w (row stride `ld`).
template <int kRows, int kVecs>
__attribute__((target("avx2,fma"))) inline void MultiplyBlock(const float* const* a, int64_t k_count,
                                                              const float* w, int64_t ld,
                                                              const float* const* init, float* const* out) {
  __m256 acc[kRows][kVecs];
#pragma GCC unroll 8
  for (int r = 0; r < kRows; ++r) {
#pragma GCC unroll 8
    for (int v = 0; v < kVecs; ++v) {
      acc[r][v] = init[r] != nullptr ? _mm256_loadu_ps(init[r] + v * kLanes) : _mm256_setzero_ps();
    }
  }
  for (int64_t k = 0; k < k_count; ++k, w += ld) {
    __m256 wv[kVecs];
#pragma GCC unroll 8
    for (int v = 0; v < kVecs; ++v) wv[v] = _mm256_loadu_ps(w + v * kLanes);
#pragma GCC unroll 8
    for (int r = 0; r < kRows; ++r) {
      const __m256 av = _mm256_broadcast_ss(a[r] + k);
#pragma GCC unroll 8
      for (int v = 0; v < kVecs; ++v) acc[r][v] = _mm256_fmadd_ps(av, wv[v], acc[r][v]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < kRows; ++r) {
#pragma GCC unroll 8
    for (int v = 0; v < kVecs; ++v) _mm256_storeu_ps(out[r] + v * kLanes, acc[r][v]);
  }
}

// out[r] = init[r] + a[r] (k_count values) times w ([k_count][cols], cols a
// multiple of 32), for one or two rows. out[r] may be init[r].
__attribute__((target("avx2,fma"))) void MultiplyRows(int rows, const float* const a[2], int64_t k_count,
                                                      const float* w, int64_t cols, const float* const init[2],
                                                      float* const out[2]) {
  if (rows == 2) {
    for (int64_t c = 0; c < cols; c += 4 * kLanes) {
      const float* in[2] = {init[0] != nullptr ? init[0] + c : nullptr, init[1] != nullptr ? init[1] + c : nullptr};
      float* o[2] = {out[0] + c, out[1] + c};
      MultiplyBlock<2, 4>(a, k_count, w + c, cols, in, o);
    }
    return;
  }
  int64_t c = 0;
  for (; c + 8 * kLanes <= cols; c += 8 * kLanes) {
    const float* in[1] = {init[0] != nullptr ? init[0] + c : nullptr};
    float* o[1] = {out[0] + c};
    MultiplyBlock<1, 8>(a, k_count, w + c, cols, in, o);
  }
  if (c < cols) {
    const float* in[1] = {init[0] != nullptr ? init[0] + c : nullptr};
    float* o[1] = {out[0] + c};
    MultiplyBlock<1, 4>(a, k_count, w + c, cols, in, o);
  }
}

// One batch entry's gates ([4 hp]: i, o, f, c pre-activations, in ONNX's
// order) into its new cell state `c` and hidden state `h` (hp each; `c` holds
// the previous cell state), with the peepholes `p` ([3 hp]: i, o, f) or none.
__attribute__((target("avx2,fma"))) void LstmGates(const float* pre, int64_t hp, const float* p, float* c,
                                                   float* h) {
  for (int64_t j = 0; j < hp; j += kLanes) {
    __m256 gi = _mm256_loadu_ps(pre + j), go = _mm256_loadu_ps(pre + hp + j);
    __m256 gf = _mm256_loadu_ps(pre + 2 * hp + j);
    const __m256 gc = _mm256_loadu_ps(pre + 3 * hp + j);
    const __m256 c_prev = _mm256_loadu_ps(c + j);
    if (p != nullptr) {
      gi = _mm256_fmadd_ps(_mm256_loadu_ps(p + j), c_prev, gi);
      gf = _mm256_fmadd_ps(_mm256_loadu_ps(p + 2 * hp + j), c_prev, gf);
    }
    const __m256 i = Sigmoid8(gi), f = Sigmoid8(gf), g = Tanh8(gc);
    const __m256 c_new = _mm256_fmadd_ps(f, c_prev, _mm256_mul_ps(i, g));
    if (p != nullptr) go = _mm256_fmadd_ps(_mm256_loadu_ps(p + hp + j), c_new, go);
    _mm256_storeu_ps(c + j, c_new);
    _mm256_storeu_ps(h + j, _mm256_mul_ps(Sigmoid8(go), Tanh8(c_new)));
  }
}

// Kernel inputs the prepare packs: W, R, B, P.
constexpr int kPackedInputs[] = {1, 2, 3, 7};

}  // namespace

LstmKernelMode GetLstmKernelMode() { return ModeFlag().load(std::memory_order_relaxed); }
void SetLstmKernelMode(LstmKernelMode mode) { ModeFlag().store(mode, std::memory_order_relaxed); }
int64_t LstmKernelsMade() { return g_made.load(std::memory_order_relaxed); }

bool LstmKernelTakes(const backends::RecurrentDims& dims) {
  return dims.hidden <= 128 && dims.batch <= 16;
}

class LstmKernel {
 public:
  backends::RecurrentDims dims;
  int64_t hp = 0;            // hidden rounded up to kLanes
  bool reverse = false;      // the forward direction runs backwards (direction=reverse)
  bool peephole = false;
  const void* packed_from[4] = {};  // kPackedInputs' bytes as the prepare read them
  // Per direction: W [I][4 hp], R [H][4 hp], bias [4 hp], P [3 hp] (when
  // peephole); gate blocks i, o, f, c of hp columns, zero past H.
  std::vector<float> packed;

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
  if (mode == LstmKernelMode::kOff || !UseAvx2Kernels() || a.kind != RecurrentKind::kLstm) return nullptr;
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
  k->hp = PadToLanes(h);
  k->reverse = a.reverse;
  k->peephole = ctx.has_input(7);
  const int64_t cols = k->Cols(), hp = k->hp;
  k->packed.assign(static_cast<size_t>(dims.dirs * k->DirectionFloats()), 0.0f);
  const float* w_all = ctx.input(1).as<const float>();
  const float* r_all = ctx.input(2).as<const float>();
  const float* b_all = ctx.has_input(3) ? ctx.input(3).as<const float>() : nullptr;
  const float* p_all = k->peephole ? ctx.input(7).as<const float>() : nullptr;
  for (int64_t d = 0; d < dims.dirs; ++d) {
    // ONNX's W [4 H, I] (gates i, o, f, c) to [I][gate * hp + j]; R likewise.
    const float* w = w_all + d * 4 * h * in;
    const float* r = r_all + d * 4 * h * h;
    float* pw = k->packed.data() + k->WOffset(d);
    float* pr = k->packed.data() + k->ROffset(d);
    for (int64_t g = 0; g < 4; ++g) {
      for (int64_t j = 0; j < h; ++j) {
        for (int64_t c = 0; c < in; ++c) pw[c * cols + g * hp + j] = w[(g * h + j) * in + c];
        for (int64_t c = 0; c < h; ++c) pr[c * cols + g * hp + j] = r[(g * h + j) * h + c];
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
  layout->Add<float>(dims.seq * dims.batch * cols);  // the gates of every step
  layout->Add<float>(dims.batch * hp);               // H
  layout->Add<float>(dims.batch * hp);               // C
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
  WorkspaceCursor ws(ctx.workspace());
  float* gates = ws.Take<float>(T * N * cols);
  float* state_h = ws.Take<float>(N * hp);
  float* state_c = ws.Take<float>(N * hp);

  for (int64_t d = 0; d < dims.dirs; ++d) {
    const bool reverse = k.reverse || d == 1;
    const float* pw = k.packed.data() + k.WOffset(d);
    const float* pr = k.packed.data() + k.ROffset(d);
    const float* bias = k.packed.data() + k.BiasOffset(d);
    const float* peephole = k.peephole ? k.packed.data() + k.PeepholeOffset(d) : nullptr;
    // The input projection of every step, biases included: gates[t][b].
    for (int64_t row = 0; row < T * N; row += 2) {
      const int rows = row + 1 < T * N ? 2 : 1;
      const float* a[2] = {};
      float* out[2] = {};
      for (int r = 0; r < rows; ++r) {
        const int64_t t = (row + r) / N, b = (row + r) % N;
        a[r] = x + dims.XRow(t, b) * I;
        out[r] = gates + (row + r) * cols;
      }
      const float* init[2] = {bias, bias};
      MultiplyRows(rows, a, I, pw, cols, init, out);
    }
    for (int64_t b = 0; b < N; ++b) {
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
      // pre[b] += H_{t-1}[b] * R, two batch entries per pass over R.
      for (int64_t b = 0; b < N; b += 2) {
        const int rows = b + 1 < N ? 2 : 1;
        const float* a[2] = {state_h + b * hp, rows == 2 ? state_h + (b + 1) * hp : nullptr};
        float* out[2] = {pre + b * cols, rows == 2 ? pre + (b + 1) * cols : nullptr};
        const float* init[2] = {out[0], out[1]};
        MultiplyRows(rows, a, H, pr, cols, init, out);
      }
      for (int64_t b = 0; b < N; ++b) {
        LstmGates(pre + b * cols, hp, peephole, state_c + b * hp, state_h + b * hp);
        if (y != nullptr) std::copy_n(state_h + b * hp, H, y + dims.YOffset(t, d, b));
      }
    }
    for (int64_t b = 0; b < N; ++b) {
      if (y_h != nullptr) std::copy_n(state_h + b * hp, H, y_h + dims.StateOffset(d, b));
      if (y_c != nullptr) std::copy_n(state_c + b * hp, H, y_c + dims.StateOffset(d, b));
    }
  }
  return true;
}

}  // namespace grove::cpu
