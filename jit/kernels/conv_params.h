// Parameters of jit/kernels/conv.cuh: the window of a Conv or ConvTranspose
// (spatial dims only, every length concrete) and the strided copy that fills
// outputs with a broadcast bias or GEMM C operand.
#ifndef GROVE_JIT_KERNELS_CONV_PARAMS_H_
#define GROVE_JIT_KERNELS_CONV_PARAMS_H_

#include "jit/kernels/types.h"

namespace grove_k {

// Input position of output position o through tap k along dim d:
// o * stride[d] - pad[d] + k * dilation[d].
struct ConvWindow {
  int spatial;
  i64 in[kMaxRank], out[kMaxRank], kernel[kMaxRank];
  i64 stride[kMaxRank], dilation[kMaxRank], pad[kMaxRank];
  i64 in_size, out_size, kernel_size;  // products of in, out, kernel
};

// col[img][c * K + tap][o] = x[img][c][input position of (o, tap)], 0 in the
// padding, for `images` images of `channels` channels.
struct Im2ColParams {
  const void* x;
  void* col;
  i64 images, channels;
  ConvWindow w;  // in: X's spatial dims; out: Y's
};

// y[img][m][o] = bias[m] (or 0) + sum over taps k and input positions i that
// land on o (i * stride - pad + k * dilation == o per dim) of
// col[img][m * K + k][i]. One thread per output element, no atomics.
struct Col2ImParams {
  const void* col;
  const void* bias;  // [channels] or nullptr
  void* y;
  i64 images, channels;
  ConvWindow w;  // in: X's spatial dims; out: Y's
};

// Depthwise Conv (one input channel per group): y[img][m][o] = bias[m] (or
// 0) + sum over taps k of w[m][k] * x[img][m / multiplier][input position
// of (o, k)], one thread per output element.
struct DepthwiseConvParams {
  const void* x;
  const void* w;     // [channels, 1, kernel...]
  const void* bias;  // [channels] or nullptr
  void* y;
  i64 images, channels, multiplier;  // channels = input channels * multiplier
  ConvWindow win;
};

// dst[offset_of(i, shape, dst_strides)] = scale * src[offset_of(i, shape,
// src_strides)] for every i < n (scale 1 copies the bits).
struct ScaledCopyParams {
  const void* src;
  void* dst;
  Dims shape;
  Strides src_strides, dst_strides;
  i64 n;
  float scale;
};

}  // namespace grove_k

#endif  // GROVE_JIT_KERNELS_CONV_PARAMS_H_
