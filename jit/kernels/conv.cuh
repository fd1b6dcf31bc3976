// Conv and ConvTranspose around the device GEMM: im2col (Conv's input
// patches as a matrix), a direct depthwise Conv (no GEMM: one input channel
// per output makes the GEMMs degenerate), col2im (ConvTranspose's scatter written as a gather,
// one thread per output element, so no atomics and a deterministic sum), and
// a strided copy that fills outputs with a broadcast bias or Gemm's C.
#ifndef GROVE_JIT_KERNELS_CONV_CUH_
#define GROVE_JIT_KERNELS_CONV_CUH_

#include "jit/kernels/conv_params.h"
#include "jit/kernels/prelude.cuh"

namespace grove_k {

template <typename T>
GROVE_DEVICE void im2col(const Im2ColParams& p) {
  const T* x = static_cast<const T*>(p.x);
  T* col = static_cast<T*>(p.col);
  const ConvWindow& w = p.w;
  const i64 total = p.images * p.channels * w.kernel_size * w.out_size;
  for (i64 i = global_thread(); i < total; i += grid_threads()) {
    i64 o = i % w.out_size;
    i64 r = i / w.out_size;
    i64 tap = r % w.kernel_size;
    const i64 plane = r / w.kernel_size;  // img * channels + c
    i64 offset = 0;
    bool inside = true;
    for (int d = w.spatial - 1; d >= 0; --d) {
      const i64 od = o % w.out[d], kd = tap % w.kernel[d];
      o /= w.out[d];
      tap /= w.kernel[d];
      const i64 pos = od * w.stride[d] - w.pad[d] + kd * w.dilation[d];
      if (pos < 0 || pos >= w.in[d]) inside = false;
    }
    if (inside) {
      o = i % w.out_size;
      tap = r % w.kernel_size;
      i64 scale = 1;
      for (int d = w.spatial - 1; d >= 0; --d) {
        const i64 od = o % w.out[d], kd = tap % w.kernel[d];
        o /= w.out[d];
        tap /= w.kernel[d];
        offset += (od * w.stride[d] - w.pad[d] + kd * w.dilation[d]) * scale;
        scale *= w.in[d];
      }
      col[i] = x[plane * w.in_size + offset];
    } else {
      col[i] = from_f32<T>(0.0f);
    }
  }
}

template <typename T>
GROVE_DEVICE void col2im(const Col2ImParams& p) {
  const T* col = static_cast<const T*>(p.col);
  const T* bias = static_cast<const T*>(p.bias);
  T* y = static_cast<T*>(p.y);
  const ConvWindow& w = p.w;
  const i64 total = p.images * p.channels * w.out_size;
  for (i64 i = global_thread(); i < total; i += grid_threads()) {
    const i64 o = i % w.out_size;
    const i64 plane = i / w.out_size;  // img * channels + m
    const i64 m = plane % p.channels;
    float acc = bias != nullptr ? to_f32(bias[m]) : 0.0f;
    const T* src = col + plane * w.kernel_size * w.in_size;
    // Output coordinates, innermost dim last.
    i64 oc[kMaxRank];
    i64 rest = o;
    for (int d = w.spatial - 1; d >= 0; --d) {
      oc[d] = rest % w.out[d];
      rest /= w.out[d];
    }
    for (i64 tap = 0; tap < w.kernel_size; ++tap) {
      i64 t = tap, in_offset = 0, scale = 1;
      bool hit = true;
      for (int d = w.spatial - 1; d >= 0; --d) {
        const i64 kd = t % w.kernel[d];
        t /= w.kernel[d];
        const i64 num = oc[d] + w.pad[d] - kd * w.dilation[d];  // = input position * stride
        if (num < 0 || num % w.stride[d] != 0 || num / w.stride[d] >= w.in[d]) {
          hit = false;
          break;
        }
        in_offset += (num / w.stride[d]) * scale;
        scale *= w.in[d];
      }
      if (hit) acc += to_f32(src[tap * w.in_size + in_offset]);
    }
    y[i] = from_f32<T>(acc);
  }
}

template <typename T>
GROVE_DEVICE void conv_depthwise(const DepthwiseConvParams& p) {
  const T* x = static_cast<const T*>(p.x);
  const T* wt = static_cast<const T*>(p.w);
  const T* bias = static_cast<const T*>(p.bias);
  T* y = static_cast<T*>(p.y);
  const ConvWindow& w = p.win;
  const i64 total = p.images * p.channels * w.out_size;
  for (i64 i = global_thread(); i < total; i += grid_threads()) {
    const i64 o = i % w.out_size;
    const i64 plane = i / w.out_size;  // img * channels + m
    const i64 m = plane % p.channels, img = plane / p.channels;
    const T* xs = x + (img * (p.channels / p.multiplier) + m / p.multiplier) * w.in_size;
    const T* ws = wt + m * w.kernel_size;
    i64 start[kMaxRank];
    i64 rest = o;
    for (int d = w.spatial - 1; d >= 0; --d) {
      start[d] = (rest % w.out[d]) * w.stride[d] - w.pad[d];
      rest /= w.out[d];
    }
    float acc = 0.0f;
    for (i64 tap = 0; tap < w.kernel_size; ++tap) {
      i64 t = tap, offset = 0, scale = 1;
      bool inside = true;
      for (int d = w.spatial - 1; d >= 0; --d) {
        const i64 pos = start[d] + (t % w.kernel[d]) * w.dilation[d];
        t /= w.kernel[d];
        if (pos < 0 || pos >= w.in[d]) {
          inside = false;
          break;
        }
        offset += pos * scale;
        scale *= w.in[d];
      }
      if (inside) acc += to_f32(ws[tap]) * to_f32(xs[offset]);
    }
    if (bias != nullptr) acc += to_f32(bias[m]);
    y[i] = from_f32<T>(acc);
  }
}

template <typename T>
GROVE_DEVICE T scaled(T v, float s) {
  return from_f32<T>(s * to_f32(v));
}
template <>
GROVE_DEVICE double scaled<double>(double v, float s) {
  return static_cast<double>(s) * v;
}

template <typename T>
GROVE_DEVICE void scaled_copy(const ScaledCopyParams& p) {
  const T* src = static_cast<const T*>(p.src);
  T* dst = static_cast<T*>(p.dst);
  for (i64 i = global_thread(); i < p.n; i += grid_threads()) {
    const T v = src[offset_of(i, p.shape, p.src_strides)];
    dst[offset_of(i, p.shape, p.dst_strides)] = p.scale == 1.0f ? v : scaled<T>(v, p.scale);
  }
}

}  // namespace grove_k

#endif  // GROVE_JIT_KERNELS_CONV_CUH_

#if defined(GROVE_T0)
GROVE_ENTRY(im2col, grove_k::Im2ColParams) { grove_k::im2col<GROVE_T0>(p); }
GROVE_ENTRY(col2im, grove_k::Col2ImParams) { grove_k::col2im<GROVE_T0>(p); }
GROVE_ENTRY(conv_depthwise, grove_k::DepthwiseConvParams) { grove_k::conv_depthwise<GROVE_T0>(p); }
GROVE_ENTRY(scaled_copy, grove_k::ScaledCopyParams) { grove_k::scaled_copy<GROVE_T0>(p); }
#endif
