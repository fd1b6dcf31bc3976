// FusedAttention on tensor cores (family "attention_mma", jit/kernel_config.cc)
// for f16 and bf16: the tiled kernel of attention.cuh with its two products
// as mma.sync.m16n8k16 (FlashAttention-2's shape). A block of 4 warps takes a
// tile of 64 query rows of one head (16 rows a warp) and walks the keys in
// tiles of bk: Q' (scaled, then rounded to T as the unfused chain's Mul
// rounds) is staged in shared memory once per tile; per key tile K' is
// staged, each warp computes its 16 x bk scores with f32 accumulators, takes
// scale and masks per element (the same masked() as the other kernels), the
// online softmax on the fragments (a row's four lanes exchange max and sum by
// shuffles), V's tile replaces K's, and the probabilities, rounded to T,
// multiply V straight from the score fragments (the accumulator layout of two
// n8 tiles is the A layout of one k16 step). finish() gives the rows as the
// other kernels do (NaN for a row whose scores are all -inf, zero_nan_probs,
// no keys). sq and sk are read at run time (a bucket's graph serves every
// length of its bucket).
//
// The tiles are staged 16 bytes a copy by cp.async where their rows allow
// it (AsyncTile; V's copy overlapping QKᵀ and the next K's PV where K and V
// have tiles of their own), and the fragments
// come out of shared memory by ldmatrix_x4. mma_16816, ldmatrix_x4 and
// cp_async16 are the instructions on sm_80 and later; elsewhere (the
// emulated device, an older arch) the same products and loads by shuffles of
// the same fragments and row addresses, and plain copies, so CI runs the
// fragment layouts and the addressing this kernel relies on. (Not its
// barriers: the emulated block runs in lockstep between them;
// bench/gpu/check.sh runs compute-sanitizer's racecheck on a GPU.)
#ifndef GROVE_MAX_THREADS
#define GROVE_MAX_THREADS 128
#endif
// attention.cuh's helpers, without its entry points.
#define GROVE_ATTENTION_HELPERS_ONLY
#include "jit/kernels/attention.cuh"
#undef GROVE_ATTENTION_HELPERS_ONLY

#ifndef GROVE_JIT_KERNELS_ATTENTION_MMA_CUH_
#define GROVE_JIT_KERNELS_ATTENTION_MMA_CUH_

namespace grove_k {
namespace attn {

template <typename T>
struct IsBf16 {
  static constexpr bool value = false;
};
template <>
struct IsBf16<bf16> {
  static constexpr bool value = true;
};

// Two 16-bit values as one 32-bit register, `lo` in the low half (the lower
// column of a fragment's pair).
GROVE_DEVICE u32 pack_u16(u16 lo, u16 hi) { return static_cast<u32>(lo) | (static_cast<u32>(hi) << 16); }

// The pair at p (p even within an array aligned to 16 bytes).
GROVE_DEVICE u32 load_pair(const u16* p) {
#if defined(__CUDACC_RTC__)
  return *reinterpret_cast<const u32*>(p);
#else
  return pack_u16(p[0], p[1]);
#endif
}

// Four 8 x 8 matrices of 16-bit values from shared memory, as
// ldmatrix.sync.aligned.m8n8.x4 loads them: lane L gives the address of row
// L % 8 of matrix L / 8 (`row`, in elements past `base`, each row 16 bytes
// and 16-byte aligned); r[m] of lane (g = lane / 4, c = lane % 4) holds row g,
// columns 2c and 2c+1 of matrix m, or with `Trans` (.trans) rows 2c and 2c+1
// of column g. On sm_80 and later the instruction (with mma_16816); elsewhere
// the same words by shuffling the lanes' row addresses, so CI runs the
// addressing this kernel gives it.
template <bool Trans>
GROVE_DEVICE void ldmatrix_x4(u32 (&r)[4], const u16* base, u32 row) {
#if defined(__CUDACC_RTC__) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const u32 addr = static_cast<u32>(__cvta_generic_to_shared(base + row));
  if constexpr (Trans) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
  } else {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
  }
#else
  const int lane = static_cast<int>(threadIdx.x & 31u);
  const int g = lane >> 2, c = lane & 3;
  GROVE_UNROLL
  for (int m = 0; m < 4; ++m) {
    if constexpr (Trans) {
      const u32 r0 = __shfl_sync(0xffffffffu, row, 8 * m + 2 * c), r1 = __shfl_sync(0xffffffffu, row, 8 * m + 2 * c + 1);
      r[m] = pack_u16(base[r0 + g], base[r1 + g]);
    } else {
      r[m] = load_pair(base + __shfl_sync(0xffffffffu, row, 8 * m + g) + 2 * c);
    }
  }
#endif
}

// Eight 16-bit values, one 16-byte access.
struct alignas(16) U16x8 {
  u16 v[8];
};

// 16 bytes from global to shared memory without a register: cp.async on
// sm_80 and later (completed by cp_async_wait_all), elsewhere a plain copy.
GROVE_DEVICE void cp_async16(u16* dst, const void* src) {
#if defined(__CUDACC_RTC__) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const u32 addr = static_cast<u32>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(addr), "l"(src));
#else
  *reinterpret_cast<U16x8*>(dst) = *reinterpret_cast<const U16x8*>(src);
#endif
}

// Waits for all of this thread's cp_async16 copies (then a __syncthreads
// shows them to the block).
GROVE_DEVICE void cp_async_wait_all() {
#if defined(__CUDACC_RTC__) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;\ncp.async.wait_group 0;\n" ::: "memory");
#endif
}

// A tile of ROWS x HD 16-bit values of T staged in shared memory (rows kLd
// apart): element (r, col) is src[r * rs + col * cs] for r < rows and
// col < cols, scaled by (op, s) (none: copied) and rounded to T as the
// unfused chain's Mul rounds, else 0. begin() starts the copies, end() waits
// for this thread's and scales the chunks it copied; the block's
// __syncthreads after end() shows the tile. Rows whose columns are
// contiguous, a multiple of 8 and 16-byte aligned move 16 bytes a copy
// (cp_async16, so other work runs between begin and end); otherwise begin()
// stages the tile one value at a time, at once.
template <typename T, int ROWS, int HD, int kLd, int kThreads>
struct AsyncTile {
  enum { C8 = HD / 8 };
  u16* dst;
  i64 rows, cols;
  int op;
  float s;
  bool vec;

  GROVE_DEVICE static u16 scale(u16 bits, int op, float s) {
    T h;
    h.bits = bits;
    return from_f32<T>(scaled(to_f32(h), op, s)).bits;
  }

  GROVE_DEVICE void begin(u16* to, const T* src, i64 n_rows, i64 rs, i64 cs, i64 n_cols, int scale_op, float sc) {
    dst = to;
    rows = n_rows;
    cols = n_cols;
    op = scale_op;
    s = sc;
    vec = cs == 1 && cols % 8 == 0 && rs % 8 == 0 && reinterpret_cast<u64>(src) % 16 == 0;
    const int t = static_cast<int>(threadIdx.x);
    if (!vec) {
      for (int e = t; e < ROWS * HD; e += kThreads) {
        const int r = e / HD, col = e % HD;
        u16 x = 0;
        if (r < rows && col < cols) {
          x = src[r * rs + col * cs].bits;
          if (op != kAttnScaleNone) x = scale(x, op, s);
        }
        dst[r * kLd + col] = x;
      }
      return;
    }
    for (int e = t; e < ROWS * C8; e += kThreads) {
      const int r = e / C8, col = e % C8 * 8;
      if (r < rows && col < cols) {
        cp_async16(dst + r * kLd + col, src + r * rs + col);
      } else {
        *reinterpret_cast<U16x8*>(dst + r * kLd + col) = U16x8{};
      }
    }
  }

  GROVE_DEVICE void end() const {
    cp_async_wait_all();
    if (!vec || op == kAttnScaleNone) return;
    for (int e = static_cast<int>(threadIdx.x); e < ROWS * C8; e += kThreads) {
      const int r = e / C8, col = e % C8 * 8;
      if (r >= rows || col >= cols) continue;
      U16x8& x = *reinterpret_cast<U16x8*>(dst + r * kLd + col);
      GROVE_UNROLL
      for (int u = 0; u < 8; ++u) x.v[u] = scale(x.v[u], op, s);
    }
  }
};

template <typename T>
GROVE_DEVICE float half_bits_f32(u32 bits) {
  T h;
  h.bits = static_cast<u16>(bits);
  return to_f32(h);
}

// d += A * B for one warp: A 16 x 16 (row-major), B 16 x 8 (column-major), d
// 16 x 8 in f32, fragments as mma.sync.m16n8k16 holds them. With g = lane / 4
// and c = lane % 4: a[0] = A[g][2c, 2c+1], a[1] = A[g+8][2c, 2c+1],
// a[2] = A[g][2c+8, 2c+9], a[3] = A[g+8][2c+8, 2c+9]; b[0] = B[2c, 2c+1][g],
// b[1] = B[2c+8, 2c+9][g]; d[0], d[1] = D[g][2c, 2c+1], d[2], d[3] =
// D[g+8][2c, 2c+1]. Every lane of the warp calls it together.
template <typename T>
GROVE_DEVICE void mma_16816(float (&d)[4], const u32 (&a)[4], const u32 (&b)[2]) {
#if defined(__CUDACC_RTC__) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  if constexpr (IsBf16<T>::value) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  }
#else
  // Lane (g, c) needs rows g and g+8 of A (held by the four lanes of its
  // quad) and columns 2c and 2c+1 of B (held by lanes 8c..8c+3 and
  // 8c+4..8c+7): quad lane s holds k = 2s, 2s+1 (a[0], a[1], b[0]) and
  // 2s+8, 2s+9 (a[2], a[3], b[1]).
  const int lane = static_cast<int>(threadIdx.x & 31u);
  const int c = lane & 3;
  for (int s = 0; s < 4; ++s) {
    const int quad = (lane & ~3) | s;
    const u32 a0 = __shfl_sync(0xffffffffu, a[0], quad), a1 = __shfl_sync(0xffffffffu, a[1], quad);
    const u32 a2 = __shfl_sync(0xffffffffu, a[2], quad), a3 = __shfl_sync(0xffffffffu, a[3], quad);
    const u32 b00 = __shfl_sync(0xffffffffu, b[0], 8 * c + s), b01 = __shfl_sync(0xffffffffu, b[1], 8 * c + s);
    const u32 b10 = __shfl_sync(0xffffffffu, b[0], 8 * c + 4 + s), b11 = __shfl_sync(0xffffffffu, b[1], 8 * c + 4 + s);
    auto dot = [](u32 x0, u32 y0, u32 x1, u32 y1) {
      return half_bits_f32<T>(x0) * half_bits_f32<T>(y0) + half_bits_f32<T>(x0 >> 16) * half_bits_f32<T>(y0 >> 16) +
             half_bits_f32<T>(x1) * half_bits_f32<T>(y1) + half_bits_f32<T>(x1 >> 16) * half_bits_f32<T>(y1 >> 16);
    };
    d[0] += dot(a0, b00, a2, b01);
    d[1] += dot(a0, b10, a2, b11);
    d[2] += dot(a1, b00, a3, b01);
    d[3] += dot(a1, b10, a3, b11);
  }
#endif
}

// The kernel (see the top of the file): BK keys a tile, d and dv <= HD.
template <typename T, int BK, int HD>
GROVE_DEVICE void attention_mma(const AttentionParams& p) {
  enum { BQ = 64, kThreads = 128, kLd = HD + 8, NT = BK / 8, DT = HD / 8, KC = HD / 16, PC = BK / 16 };
  static_assert(BK % 16 == 0 && HD % 16 == 0, "whole k16 steps (and pairs of n8 tiles for ldmatrix_x4)");
  // Rows of 16-bit values, padded by 8 (16 bytes) against bank conflicts;
  // 16-byte aligned, so an even index starts a 32-bit pair.
  struct alignas(16) QTile {
    u16 v[BQ * kLd];
  };
  // K and V in tiles of their own where the three fit in 48 KB of static
  // shared memory (hd 64): V's copies then run during QKᵀ and the softmax,
  // the next K's during PV. Otherwise (hd 128) V's tile is K's, each copy
  // starting once the other is read.
  enum { kSplitKV = AttnMmaKvTiles<BQ, BK, HD>::value == 2 };
  struct alignas(16) KvTiles {
    u16 v[(kSplitKV ? 2 : 1) * BK * kLd];
  };
  __shared__ QTile q_tile;
  __shared__ KvTiles kv_tiles;
  u16* const qs = q_tile.v;
  u16* const ks = kv_tiles.v;
  u16* const vs = kv_tiles.v + (kSplitKV ? BK * kLd : 0);
  AsyncTile<T, BQ, HD, kLd, kThreads> q_copy;
  AsyncTile<T, BK, HD, kLd, kThreads> k_copy, v_copy;
  T* O = static_cast<T*>(p.out);
  const int t = static_cast<int>(threadIdx.x);
  const int lane = t & 31, r0 = (t >> 5) * 16, g = lane >> 2, c = lane & 3;
  const int mi = lane >> 3, rr = lane & 7;  // the matrix and row a lane addresses for ldmatrix_x4
  const float neg_inf = -inf_f32();
  const i64 qtiles = (p.sq + BQ - 1) / BQ;
  for (i64 item = blockIdx.x; item < p.b0 * p.b1 * qtiles; item += gridDim.x) {  // block-uniform
    const HeadTile<T> h = head_tile<T>(p, item, qtiles, BQ);
    const i64 b0 = h.b0, b1 = h.b1, i0 = h.i0;
    const T *q = h.q, *k = h.k, *v = h.v;
    __syncthreads();  // the previous item's tiles are no longer read
    // Q's copies and K's first tile's together; Q' is scaled (end) and
    // every tile shown (the loop's first __syncthreads) before QKᵀ.
    q_copy.begin(qs, q + i0 * p.d, p.sq - i0, p.d, 1, p.d, p.q_scale_op, p.q_scale);
    float o[DT][4], m[2] = {neg_inf, neg_inf}, l[2] = {0.0f, 0.0f};
    GROVE_UNROLL
    for (int dt = 0; dt < DT; ++dt) {
      GROVE_UNROLL
      for (int x = 0; x < 4; ++x) o[dt][x] = 0.0f;
    }
    // The keys this tile reads: all, or with p.trim up to the last one its
    // rows keep (a causal mask's tile skips the key tiles past its diagonal).
    const i64 n_keys = p.trim != 0 ? trimmed_keys(p, b0, b1, i0, p.sq - i0 < BQ ? p.sq - i0 : BQ) : p.sk;
    if (n_keys > 0) k_copy.begin(ks, k, p.sk, p.k_js, p.k_ds, p.d, p.k_scale_op, p.k_scale);
    q_copy.end();
    for (i64 j0 = 0; j0 < n_keys; j0 += BK) {
      k_copy.end();
      __syncthreads();  // K's tile is in; (split) every warp is past the previous PV
      if (kSplitKV) v_copy.begin(vs, v + j0 * p.dv, p.sk - j0, p.dv, 1, p.dv, kAttnScaleNone, 1.0f);
      // The warp's 16 x BK scores: NT tiles of 16 x 8.
      float s[NT][4];
      GROVE_UNROLL
      for (int nt = 0; nt < NT; ++nt) {
        GROVE_UNROLL
        for (int x = 0; x < 4; ++x) s[nt][x] = 0.0f;
      }
      // Fragments by ldmatrix: lane (mi = lane / 8, rr = lane % 8) names row
      // rr of matrix mi. Q's: rows r0 + rr (+8 for odd mi), columns kc * 16
      // (+8 for mi >= 2) = a[0..3]; K's for tiles nt, nt + 1: rows
      // (nt + mi / 2) * 8 + rr, columns kc * 16 (+8 for odd mi) = b of nt,
      // then of nt + 1.
      GROVE_UNROLL
      for (int kc = 0; kc < KC; ++kc) {
        u32 a[4];
        ldmatrix_x4<false>(a, qs, (r0 + rr + 8 * (mi & 1)) * kLd + kc * 16 + 8 * (mi >> 1));
        GROVE_UNROLL
        for (int nt = 0; nt < NT; nt += 2) {
          u32 b4[4];
          ldmatrix_x4<false>(b4, ks, ((nt + (mi >> 1)) * 8 + rr) * kLd + kc * 16 + 8 * (mi & 1));
          const u32 lo[2] = {b4[0], b4[1]}, hi[2] = {b4[2], b4[3]};
          mma_16816<T>(s[nt], a, lo);
          mma_16816<T>(s[nt + 1], a, hi);
        }
      }
      // Scale, masks and the online softmax; h = 0: row g, h = 1: row g + 8.
      GROVE_UNROLL
      for (int h = 0; h < 2; ++h) {
        const i64 i = i0 + r0 + g + 8 * h;
        float tmax = neg_inf;
        GROVE_UNROLL
        for (int nt = 0; nt < NT; ++nt) {
          GROVE_UNROLL
          for (int x = 0; x < 2; ++x) {
            const i64 j = j0 + nt * 8 + 2 * c + x;
            float sc = neg_inf;
            if (i < p.sq && j < p.sk) sc = masked<T>(p, b0, b1, i, j, scaled(s[nt][2 * h + x], p.scale_op, p.scale));
            s[nt][2 * h + x] = sc;
            tmax = sc > tmax ? sc : tmax;  // NaN does not raise the max (as Softmax's)
          }
        }
        tmax = rdx::lanes_all(MaxOp<float>(), tmax, 4);
        const float m_new = tmax > m[h] ? tmax : m[h];
        float corr = 1.0f, sum = 0.0f;
        GROVE_UNROLL
        for (int nt = 0; nt < NT; ++nt) {
          GROVE_UNROLL
          for (int x = 0; x < 2; ++x) {
            // Every score so far -inf: nothing to add yet (the row's lanes agree).
            const float ex = m_new == neg_inf ? 0.0f : g_exp(s[nt][2 * h + x] - m_new);
            s[nt][2 * h + x] = ex;
            sum += ex;
          }
        }
        if (m_new != neg_inf) corr = g_exp(m[h] - m_new);
        sum = rdx::lanes_all(rdx::AddOp<float>(), sum, 4);
        l[h] = l[h] * corr + sum;
        GROVE_UNROLL
        for (int dt = 0; dt < DT; ++dt) {
          o[dt][2 * h] *= corr;
          o[dt][2 * h + 1] *= corr;
        }
        m[h] = m_new;
      }
      if (!kSplitKV) {
        __syncthreads();  // K's tile is read: V's takes its place
        v_copy.begin(vs, v + j0 * p.dv, p.sk - j0, p.dv, 1, p.dv, kAttnScaleNone, 1.0f);
      }
      v_copy.end();
      __syncthreads();  // V's tile is in; every warp is past QKᵀ
      if (kSplitKV && j0 + BK < n_keys) {
        k_copy.begin(ks, k + (j0 + BK) * p.k_js, p.sk - j0 - BK, p.k_js, p.k_ds, p.d, p.k_scale_op, p.k_scale);
      }
      // O += P V, P (rounded to T) from the score fragments: tiles 2 pc and
      // 2 pc + 1 are the A fragment of keys 16 pc .. 16 pc + 15.
      GROVE_UNROLL
      for (int pc = 0; pc < PC; ++pc) {
        const u32 a[4] = {pack_u16(from_f32<T>(s[2 * pc][0]).bits, from_f32<T>(s[2 * pc][1]).bits),
                          pack_u16(from_f32<T>(s[2 * pc][2]).bits, from_f32<T>(s[2 * pc][3]).bits),
                          pack_u16(from_f32<T>(s[2 * pc + 1][0]).bits, from_f32<T>(s[2 * pc + 1][1]).bits),
                          pack_u16(from_f32<T>(s[2 * pc + 1][2]).bits, from_f32<T>(s[2 * pc + 1][3]).bits)};
        // V's B fragments for dt, dt + 1 transposed by ldmatrix: rows
        // pc * 16 + rr (+8 for odd mi), columns (dt + mi / 2) * 8.
        GROVE_UNROLL
        for (int dt = 0; dt < DT; dt += 2) {
          u32 b4[4];
          ldmatrix_x4<true>(b4, vs, (pc * 16 + rr + 8 * (mi & 1)) * kLd + (dt + (mi >> 1)) * 8);
          const u32 lo[2] = {b4[0], b4[1]}, hi[2] = {b4[2], b4[3]};
          mma_16816<T>(o[dt], a, lo);
          mma_16816<T>(o[dt + 1], a, hi);
        }
      }
      if (!kSplitKV && j0 + BK < n_keys) {
        __syncthreads();  // V's tile is read: the next K's takes its place
        k_copy.begin(ks, k + (j0 + BK) * p.k_js, p.sk - j0 - BK, p.k_js, p.k_ds, p.d, p.k_scale_op, p.k_scale);
      }
    }
    GROVE_UNROLL
    for (int h = 0; h < 2; ++h) {
      const i64 i = i0 + r0 + g + 8 * h;
      if (i >= p.sq) continue;
      T* orow = O + ((b0 * p.b1 + b1) * p.sq + i) * p.dv;
      GROVE_UNROLL
      for (int dt = 0; dt < DT; ++dt) {
        GROVE_UNROLL
        for (int x = 0; x < 2; ++x) {
          const i64 col = dt * 8 + 2 * c + x;
          if (col < p.dv) orow[col] = from_f32<T>(finish(p, v, col, o[dt][2 * h + x], m[h], l[h]));
        }
      }
    }
  }
}

}  // namespace attn
}  // namespace grove_k

#endif  // GROVE_JIT_KERNELS_ATTENTION_MMA_CUH_

#if defined(GROVE_T0)
#if defined(GROVE_V_HD)
GROVE_ENTRY_BOUNDED(attention_mma, grove_k::AttentionParams, 2) {
  grove_k::attn::attention_mma<GROVE_T0, GROVE_V_BK, GROVE_V_HD>(p);
}
#else
// The module without parameters: the generic variant (keys by 64, heads up to 128).
GROVE_ENTRY_BOUNDED(attention_mma, grove_k::AttentionParams, 2) { grove_k::attn::attention_mma<GROVE_T0, 64, 128>(p); }
#endif
#endif
