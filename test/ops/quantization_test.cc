// The quantization group against naive references written here from the
// ONNX text: QuantizeLinear and DequantizeLinear per tensor and per axis
// (default, negative and leading axes) on every quantized dtype, ties
// rounding to even, saturation, NaN; DynamicQuantizeLinear's scale and zero
// point; MatMulInteger and QLinearMatMul with broadcast batches, rank-1
// operands and zero points / scales per tensor, per row and per column;
// ConvInteger and QLinearConv in 1 to 3 spatial dims with pads, strides,
// dilations, groups, auto_pad, per-channel weight parameters and bias
// (the reference pads explicitly, then slides the window); symbolic shapes;
// and every error the shape functions and kernels return.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "lib/ir/op_registry.h"
#include "test/op_test_util.h"
#include "test/ops/symbolic_shape_util.h"

namespace grove::testing {
namespace {

using ir::SymDim;
using ir::SymShape;
using Shape = std::vector<int64_t>;
using Attrs = std::vector<std::pair<std::string, AttrValue>>;

std::string Describe(const Shape& s) { return absl::StrCat("[", absl::StrJoin(s, ","), "]"); }

// Deterministic integers covering the range of T, different per seed.
template <typename T>
std::vector<T> IntPattern(int64_t n, int seed) {
  std::vector<T> v(static_cast<size_t>(n));
  const int64_t lo = std::numeric_limits<T>::min(), span = int64_t{std::numeric_limits<T>::max()} - lo + 1;
  for (int64_t i = 0; i < n; ++i) v[i] = static_cast<T>(lo + (i * 97 + seed * 31 + 7) % span);
  return v;
}

template <typename T>
DType DTypeFor() {
  if constexpr (std::is_same_v<T, uint8_t>) return DType::kU8;
  if constexpr (std::is_same_v<T, int8_t>) return DType::kI8;
  if constexpr (std::is_same_v<T, uint16_t>) return DType::kU16;
  if constexpr (std::is_same_v<T, int16_t>) return DType::kI16;
  if constexpr (std::is_same_v<T, int32_t>) return DType::kI32;
  return DType::kUnknown;
}

// Round half to even, written out.
double RoundHalfEven(double v) {
  const double f = std::floor(v);
  const double diff = v - f;
  if (diff < 0.5) return f;
  if (diff > 0.5) return f + 1;
  return std::fmod(f, 2.0) == 0 ? f : f + 1;
}

template <typename Q>
Q Saturate(double v) {
  if (std::isnan(v)) v = 0;
  v = std::max<double>(v, std::numeric_limits<Q>::min());
  v = std::min<double>(v, std::numeric_limits<Q>::max());
  return static_cast<Q>(v);
}

Shape Unravel(int64_t flat, const Shape& dims) {
  Shape idx(dims.size());
  for (int d = static_cast<int>(dims.size()) - 1; d >= 0; --d) {
    idx[d] = flat % dims[d];
    flat /= dims[d];
  }
  return idx;
}

// ---------------------------------------------------------------------------
// QuantizeLinear
// ---------------------------------------------------------------------------

// Channel of each element of `shape` along `axis` (-1: per tensor, all 0).
int64_t ChannelOf(int64_t flat, const Shape& shape, int axis) { return axis < 0 ? 0 : Unravel(flat, shape)[axis]; }

template <typename Q>
void ExpectQuantize(const Shape& xs, int axis_attr, bool per_axis, bool with_zero) {
  SCOPED_TRACE(absl::StrCat("QuantizeLinear ", Describe(xs), " -> ", DTypeName(DTypeFor<Q>()), " axis ", axis_attr,
                            per_axis ? " per axis" : " per tensor", with_zero ? " with zero point" : ""));
  const int axis = per_axis ? (axis_attr < 0 ? axis_attr + static_cast<int>(xs.size()) : axis_attr) : -1;
  const int64_t channels = per_axis ? xs[axis] : 1;
  std::vector<float> x(static_cast<size_t>(Count(xs)));
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((static_cast<int64_t>(i * 37) % 301) - 150) * 0.75f;
  std::vector<float> scale(static_cast<size_t>(channels));
  std::vector<Q> zero(static_cast<size_t>(channels));
  for (int64_t c = 0; c < channels; ++c) {
    scale[c] = 0.5f + 0.25f * static_cast<float>(c);
    zero[c] = static_cast<Q>(std::is_signed_v<Q> ? c * 3 - 4 : c * 5 + 3);
  }
  std::vector<Q> want(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const int64_t c = ChannelOf(static_cast<int64_t>(i), xs, axis);
    want[i] = Saturate<Q>(RoundHalfEven(x[i] / scale[c]) + (with_zero ? zero[c] : 0));
  }
  const Shape ps = per_axis ? Shape{channels} : Shape{};
  Tensor xt = MakeTensor<float>(DType::kF32, xs, x);
  Tensor st = MakeTensor<float>(DType::kF32, ps, scale);
  Tensor zt = MakeTensor<Q>(DTypeFor<Q>(), ps, zero);
  Attrs attrs;
  if (axis_attr != 1) attrs.push_back({"axis", int64_t{axis_attr}});
  // Without a zero point the output is u8.
  if (!with_zero && !std::is_same_v<Q, uint8_t>) return;
  auto out = with_zero ? RunOp("QuantizeLinear", {&xt, &st, &zt}, attrs) : RunOp("QuantizeLinear", {&xt, &st}, attrs);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].dtype(), DTypeFor<Q>());
  EXPECT_EQ((*out)[0].shape(), xs);
  EXPECT_EQ(Values<Q>((*out)[0]), want);
}

TEST(QuantizationTest, QuantizeLinearPerTensorAndPerAxis) {
  for (bool with_zero : {false, true}) {
    ExpectQuantize<uint8_t>({6}, 1, false, with_zero);
    ExpectQuantize<uint8_t>({2, 3, 4}, 1, true, with_zero);
    ExpectQuantize<uint8_t>({}, 1, false, with_zero);
  }
  ExpectQuantize<int8_t>({2, 3, 4}, 1, false, true);
  ExpectQuantize<int8_t>({2, 3, 4}, -1, true, true);
  ExpectQuantize<int8_t>({5, 3}, 0, true, true);
  ExpectQuantize<uint16_t>({2, 5}, 1, true, true);
  ExpectQuantize<int16_t>({1, 3, 3, 2}, 1, true, true);
  ExpectQuantize<int16_t>({0, 3}, 1, true, true);
}

TEST(QuantizationTest, QuantizeLinearRoundsHalfToEvenAndSaturates) {
  Tensor x = MakeTensor<float>(DType::kF32, {10},
                               {0.5f, 1.5f, 2.5f, -0.5f, -1.5f, -2.5f, 1000.f, -1000.f, std::nanf(""), 3.49f});
  Tensor s = MakeTensor<float>(DType::kF32, {}, {1.0f});
  Tensor zu = MakeTensor<uint8_t>(DType::kU8, {1}, {10});
  auto u = RunOp("QuantizeLinear", {&x, &s, &zu});
  ASSERT_TRUE(u.ok()) << u.status();
  EXPECT_EQ(Values<uint8_t>((*u)[0]), (std::vector<uint8_t>{10, 12, 12, 10, 8, 8, 255, 0, 10, 13}));
  Tensor zi = MakeTensor<int8_t>(DType::kI8, {}, {-1});
  auto i = RunOp("QuantizeLinear", {&x, &s, &zi});
  ASSERT_TRUE(i.ok()) << i.status();
  EXPECT_EQ(Values<int8_t>((*i)[0]), (std::vector<int8_t>{-1, 1, 1, -1, -3, -3, 127, -128, -1, 2}));
  // A zero scale saturates; 0 / 0 gives the zero point.
  Tensor x2 = MakeTensor<float>(DType::kF32, {3}, {1.0f, -1.0f, 0.0f});
  Tensor zero_scale = MakeTensor<float>(DType::kF32, {}, {0.0f});
  auto z = RunOp("QuantizeLinear", {&x2, &zero_scale, &zi});
  ASSERT_TRUE(z.ok()) << z.status();
  EXPECT_EQ(Values<int8_t>((*z)[0]), (std::vector<int8_t>{127, -128, -1}));
}

TEST(QuantizationTest, QuantizeLinearFromInt32AndHalf) {
  Tensor x = MakeTensor<int32_t>(DType::kI32, {5}, {-300, -3, 5, 7, 1 << 30});
  Tensor s = MakeTensor<float>(DType::kF32, {}, {2.0f});
  Tensor z = MakeTensor<int16_t>(DType::kI16, {}, {100});
  auto out = RunOp("QuantizeLinear", {&x, &s, &z});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Values<int16_t>((*out)[0]), (std::vector<int16_t>{-50, 98, 102, 104, 32767}));

  // f16 x (0x3e00 = 1.5, 0xc100 = -2.5) and an f16 scale (0x3c00 = 1).
  Tensor xh = MakeTensor<uint16_t>(DType::kF16, {2}, {0x3e00, 0xc100});
  Tensor sh = MakeTensor<uint16_t>(DType::kF16, {}, {0x3c00});
  auto h = RunOp("QuantizeLinear", {&xh, &sh, &z});
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(Values<int16_t>((*h)[0]), (std::vector<int16_t>{102, 98}));
}

// ---------------------------------------------------------------------------
// DequantizeLinear
// ---------------------------------------------------------------------------

template <typename Q>
void ExpectDequantize(const Shape& xs, int axis_attr, bool per_axis, bool with_zero) {
  SCOPED_TRACE(absl::StrCat("DequantizeLinear ", DTypeName(DTypeFor<Q>()), " ", Describe(xs), " axis ", axis_attr,
                            per_axis ? " per axis" : " per tensor", with_zero ? " with zero point" : ""));
  const int axis = per_axis ? (axis_attr < 0 ? axis_attr + static_cast<int>(xs.size()) : axis_attr) : -1;
  const int64_t channels = per_axis ? xs[axis] : 1;
  const std::vector<Q> x = IntPattern<Q>(Count(xs), 3);
  std::vector<float> scale(static_cast<size_t>(channels));
  std::vector<Q> zero(static_cast<size_t>(channels));
  for (int64_t c = 0; c < channels; ++c) {
    scale[c] = 0.125f * static_cast<float>(c + 1);
    zero[c] = static_cast<Q>(c * 7 + 1);
  }
  std::vector<float> want(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const int64_t c = ChannelOf(static_cast<int64_t>(i), xs, axis);
    want[i] = static_cast<float>(static_cast<double>(x[i]) - (with_zero ? zero[c] : 0)) * scale[c];
  }
  const Shape ps = per_axis ? Shape{channels} : Shape{1};
  Tensor xt = MakeTensor<Q>(DTypeFor<Q>(), xs, x);
  Tensor st = MakeTensor<float>(DType::kF32, ps, scale);
  Tensor zt = MakeTensor<Q>(DTypeFor<Q>(), ps, zero);
  Attrs attrs;
  if (axis_attr != 1) attrs.push_back({"axis", int64_t{axis_attr}});
  auto out =
      with_zero ? RunOp("DequantizeLinear", {&xt, &st, &zt}, attrs) : RunOp("DequantizeLinear", {&xt, &st}, attrs);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].dtype(), DType::kF32);
  EXPECT_EQ((*out)[0].shape(), xs);
  EXPECT_EQ(Values<float>((*out)[0]), want);
}

TEST(QuantizationTest, DequantizeLinearPerTensorAndPerAxis) {
  for (bool with_zero : {false, true}) {
    ExpectDequantize<uint8_t>({7}, 1, false, with_zero);
    ExpectDequantize<int8_t>({2, 3, 4}, 1, true, with_zero);
    ExpectDequantize<uint16_t>({4, 2}, -2, true, with_zero);
    ExpectDequantize<int16_t>({3, 2, 5}, 2, true, with_zero);
    ExpectDequantize<int32_t>({2, 3}, 1, false, with_zero);
  }
  ExpectDequantize<int32_t>({}, 1, false, false);
  ExpectDequantize<uint8_t>({2, 0, 3}, 2, true, true);
}

TEST(QuantizationTest, DequantizeLinearToHalfFollowsTheScale) {
  Tensor x = MakeTensor<int8_t>(DType::kI8, {3}, {-2, 0, 4});
  Tensor s = MakeTensor<uint16_t>(DType::kF16, {}, {0x3800});  // 0.5
  Tensor z = MakeTensor<int8_t>(DType::kI8, {}, {2});
  auto out = RunOp("DequantizeLinear", {&x, &s, &z});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].dtype(), DType::kF16);
  // -2, -1, 1.
  EXPECT_EQ(Values<uint16_t>((*out)[0]), (std::vector<uint16_t>{0xc000, 0xbc00, 0x3c00}));
}

TEST(QuantizationTest, QuantizeDequantizeErrors) {
  Tensor x = MakeTensor<float>(DType::kF32, {2, 3}, {});
  Tensor s3 = MakeTensor<float>(DType::kF32, {3}, {1, 1, 1});
  Tensor s2 = MakeTensor<float>(DType::kF32, {2}, {1, 1});
  Tensor s22 = MakeTensor<float>(DType::kF32, {2, 2}, {1, 1, 1, 1});
  Tensor s1 = MakeTensor<float>(DType::kF32, {}, {1});
  Tensor z2 = MakeTensor<uint8_t>(DType::kU8, {2}, {0, 0});
  Tensor zf = MakeTensor<float>(DType::kF32, {}, {0});
  Tensor z32 = MakeTensor<int32_t>(DType::kI32, {}, {0});
  Tensor xi8 = MakeTensor<int8_t>(DType::kI8, {2, 3}, {});
  Tensor zu8 = MakeTensor<uint8_t>(DType::kU8, {}, {0});
  Tensor si = MakeTensor<int32_t>(DType::kI32, {}, {1});
  EXPECT_TRUE(ErrorContains(RunOp("QuantizeLinear", {&x, &s2}).status(), "expected [] or [1] (per tensor) or [3]"));
  EXPECT_TRUE(
      ErrorContains(RunOp("QuantizeLinear", {&x, &s3}, {{"axis", int64_t{2}}}).status(), "attribute 'axis' is 2"));
  EXPECT_TRUE(
      ErrorContains(RunOp("QuantizeLinear", {&x, &s3}, {{"axis", int64_t{-3}}}).status(), "attribute 'axis' is -3"));
  EXPECT_TRUE(ErrorContains(RunOp("QuantizeLinear", {&x, &s22}).status(), "input 1 (y_scale) has shape [2, 2]"));
  EXPECT_TRUE(ErrorContains(RunOp("QuantizeLinear", {&x, &s3, &z2}).status(),
                            "input 1 (y_scale) has shape [3] but input 2 (y_zero_point) has shape [2]"));
  EXPECT_TRUE(ErrorContains(RunOp("QuantizeLinear", {&x, &s1, &zf}).status(), "input 2 (y_zero_point) has dtype f32"));
  EXPECT_TRUE(ErrorContains(RunOp("QuantizeLinear", {&x, &s1, &z32}).status(), "input 2 (y_zero_point) has dtype i32"));
  EXPECT_TRUE(ErrorContains(RunOp("QuantizeLinear", {&xi8, &s1}).status(), "input 0 (x) has dtype i8"));
  EXPECT_TRUE(ErrorContains(RunOp("QuantizeLinear", {&x, &si}).status(), "input 1 (y_scale) has dtype i32"));
  EXPECT_TRUE(ErrorContains(RunOp("DequantizeLinear", {&xi8, &s1, &zu8}).status(),
                            "input 2 (x_zero_point) has dtype u8; expected i8"));
  EXPECT_TRUE(ErrorContains(RunOp("DequantizeLinear", {&x, &s1}).status(), "input 0 (x) has dtype f32"));
  EXPECT_TRUE(ErrorContains(RunOp("DequantizeLinear", {&xi8, &s2}).status(), "expected [] or [1] (per tensor) or [3]"));
  EXPECT_TRUE(ErrorContains(RunOp("DequantizeLinear", {&xi8, &s22}).status(), "input 1 (x_scale) has shape [2, 2]"));
  Tensor scalar_x = MakeTensor<int8_t>(DType::kI8, {}, {1});
  EXPECT_TRUE(ErrorContains(RunOp("DequantizeLinear", {&scalar_x, &s3}).status(), "needs an axis in [0, 0)"));
  // axis 0 of a scalar X (found by fuzz_op_run: read past an empty shape).
  EXPECT_TRUE(ErrorContains(RunOp("DequantizeLinear", {&scalar_x, &s3}, {{"axis", int64_t{0}}}).status(),
                            "needs an axis in [0, 0)"));
  Tensor scalar_f = MakeTensor<float>(DType::kF32, {}, {1.0f});
  EXPECT_TRUE(ErrorContains(RunOp("QuantizeLinear", {&scalar_f, &s3}, {{"axis", int64_t{0}}}).status(),
                            "needs an axis in [0, 0)"));

  // The kernels' own checks, reached with a planned output.
  EXPECT_TRUE(ErrorContains(RunKernelPlanned("QuantizeLinear", {&x, &s2}, DType::kU8, {2, 3}).status(),
                            "expected [] or [1] (per tensor) or [3]"));
  EXPECT_TRUE(ErrorContains(RunKernelPlanned("QuantizeLinear", {&x, &s3, &z2}, DType::kU8, {2, 3}).status(),
                            "expected the same shape"));
  EXPECT_TRUE(ErrorContains(RunKernelPlanned("QuantizeLinear", {&x, &s1}, DType::kU8, {3, 2}).status(),
                            "output 0 was allocated as u8 [3, 2]"));
  EXPECT_TRUE(ErrorContains(RunKernelPlanned("QuantizeLinear", {&x, &si}, DType::kU8, {2, 3}).status(),
                            "input 1 (y_scale) has dtype i32; expected f32, f16 or bf16"));
  EXPECT_TRUE(ErrorContains(RunKernelPlanned("QuantizeLinear", {&x, &s1, &zf}, DType::kF32, {2, 3}).status(),
                            "input 2 (y_zero_point) has dtype f32; expected an integer"));
  EXPECT_TRUE(ErrorContains(RunKernelPlanned("DequantizeLinear", {&xi8, &s1, &zu8}, DType::kF32, {2, 3}).status(),
                            "input 2 (x_zero_point) has dtype u8; expected i8"));
  EXPECT_TRUE(ErrorContains(
      RunKernelPlanned("DequantizeLinear", {&xi8, &s3}, DType::kF32, {2, 3}, {{"axis", int64_t{5}}}).status(),
      "attribute 'axis' is 5"));
}

// ---------------------------------------------------------------------------
// DynamicQuantizeLinear
// ---------------------------------------------------------------------------

void ExpectDynamicQuantize(const Shape& xs, const std::vector<float>& x) {
  SCOPED_TRACE(absl::StrCat("DynamicQuantizeLinear ", Describe(xs), " [", absl::StrJoin(x, ", "), "]"));
  float lo = 0, hi = 0;
  for (float v : x) {
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  const float scale = (hi == lo ? 1.0f : hi - lo) / 255.0f;
  const double zero = RoundHalfEven(std::clamp(0.0f - lo / scale, 0.0f, 255.0f));
  std::vector<uint8_t> want(x.size());
  for (size_t i = 0; i < x.size(); ++i) want[i] = Saturate<uint8_t>(RoundHalfEven(x[i] / scale) + zero);
  Tensor xt = MakeTensor<float>(DType::kF32, xs, x);
  auto out = RunOp("DynamicQuantizeLinear", {&xt}, {}, 3);
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->size(), 3u);
  EXPECT_EQ((*out)[0].dtype(), DType::kU8);
  EXPECT_EQ((*out)[0].shape(), xs);
  EXPECT_EQ(Values<uint8_t>((*out)[0]), want);
  EXPECT_EQ((*out)[1].shape(), Shape{});
  EXPECT_EQ(Values<float>((*out)[1]), std::vector<float>{scale});
  EXPECT_EQ((*out)[2].dtype(), DType::kU8);
  EXPECT_EQ(Values<uint8_t>((*out)[2]), std::vector<uint8_t>{static_cast<uint8_t>(zero)});
}

TEST(QuantizationTest, DynamicQuantizeLinear) {
  ExpectDynamicQuantize({6}, {0, 2, -3, -2.5f, 1.34f, 0.5f});
  ExpectDynamicQuantize({6}, {-1.0f, -2.1f, -1.3f, -2.5f, -3.34f, -4.0f});  // max adjusted to 0
  ExpectDynamicQuantize({2, 3}, {1, 2.1f, 1.3f, 2.5f, 3.34f, 4.0f});        // min adjusted to 0
  ExpectDynamicQuantize({2, 2}, {0, 0, 0, 0});                              // scale 1/255
  ExpectDynamicQuantize({0, 3}, {});
  ExpectDynamicQuantize({}, {-7.5f});
  // The worked example of the operator text.
  Tensor xt = MakeTensor<float>(DType::kF32, {6}, {0, 2, -3, -2.5f, 1.34f, 0.5f});
  auto out = RunOp("DynamicQuantizeLinear", {&xt}, {}, 3);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Values<uint8_t>((*out)[0]), (std::vector<uint8_t>{153, 255, 0, 26, 221, 179}));
  EXPECT_EQ(Values<uint8_t>((*out)[2]), std::vector<uint8_t>{153});

  Tensor bad = MakeTensor<double>(DType::kF64, {2}, {1, 2});
  EXPECT_TRUE(ErrorContains(RunOp("DynamicQuantizeLinear", {&bad}, {}, 3).status(), "input 0 (x) has dtype f64"));
  EXPECT_TRUE(ErrorContains(RunKernelPlanned("DynamicQuantizeLinear", {&bad}, DType::kU8, {2}).status(),
                            "input 0 (x) has dtype f64; expected f32"));
  Tensor x2 = MakeTensor<float>(DType::kF32, {2}, {1, 2});
  EXPECT_TRUE(ErrorContains(RunKernelPlanned("DynamicQuantizeLinear", {&x2}, DType::kI8, {2}).status(),
                            "output 0 was allocated as i8"));
}

// ---------------------------------------------------------------------------
// MatMulInteger, QLinearMatMul
// ---------------------------------------------------------------------------

// Numpy matmul of A and B with parameters per tensor, per row of A and per
// column of B, each given as a function of (batch index of Y, row or col).
struct MatMulRef {
  Shape out_shape;
  std::vector<int64_t> acc;       // exact sums
  std::vector<int64_t> row, col;  // Y element -> (A row flat index, B column flat index) as "a_param_index(b, m)"
};

// Y[b, m, n] = sum_k (A[b, m, k] - za(b_a, m)) * (B[b, k, n] - zb(b_b, n)).
// za / zb: flat parameter vectors over A's/B's shape with the reduced dim 1
// ([..., M, 1] and [..., 1, N], at the operand's rank, broadcast where 1).
template <typename TA, typename TB>
MatMulRef RefMatMul(const Shape& as, const std::vector<TA>& a, const Shape& bs, const std::vector<TB>& b,
                    const Shape& zas, const std::vector<int32_t>& za, const Shape& zbs,
                    const std::vector<int32_t>& zb) {
  // Promote rank-1 operands as numpy does.
  Shape a2 = as.size() == 1 ? Shape{1, as[0]} : as;
  Shape b2 = bs.size() == 1 ? Shape{bs[0], 1} : bs;
  const size_t nb = std::max(a2.size(), b2.size()) - 2;
  while (a2.size() < nb + 2) a2.insert(a2.begin(), 1);
  while (b2.size() < nb + 2) b2.insert(b2.begin(), 1);
  // Parameter shapes at the padded rank.
  auto pad = [&](Shape s) {
    while (s.size() < nb + 2) s.insert(s.begin(), 1);
    return s;
  };
  const Shape za2 = pad(zas), zb2 = pad(zbs);
  const int64_t m = a2[nb], k = a2[nb + 1], n = b2[nb + 1];
  Shape batch(nb);
  for (size_t i = 0; i < nb; ++i) batch[i] = std::max(a2[i], b2[i]);
  MatMulRef r;
  r.out_shape = batch;
  if (as.size() != 1) r.out_shape.push_back(m);
  if (bs.size() != 1) r.out_shape.push_back(n);
  auto flat = [](const Shape& dims, const Shape& idx) {
    int64_t f = 0;
    for (size_t d = 0; d < dims.size(); ++d) f = f * dims[d] + (dims[d] == 1 ? 0 : idx[d]);
    return f;
  };
  for (int64_t bi = 0; bi < Count(batch); ++bi) {
    const Shape bidx = Unravel(bi, batch);
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        Shape ai = bidx, bj = bidx;
        ai.push_back(i);
        ai.push_back(0);
        bj.push_back(0);
        bj.push_back(j);
        const int64_t zai = flat(za2, ai), zbj = flat(zb2, bj);
        int64_t acc = 0;
        for (int64_t t = 0; t < k; ++t) {
          Shape aidx = bidx, bidx2 = bidx;
          aidx.push_back(i);
          aidx.push_back(t);
          bidx2.push_back(t);
          bidx2.push_back(j);
          acc += (int64_t{a[flat(a2, aidx)]} - za[zai]) * (int64_t{b[flat(b2, bidx2)]} - zb[zbj]);
        }
        r.acc.push_back(acc);
        r.row.push_back(zai);
        r.col.push_back(zbj);
      }
    }
  }
  return r;
}

struct MatMulCase {
  Shape as, bs;
  Shape zas, zbs;  // empty vector with `a_zero`/`b_zero` false: omitted
  bool a_zero = true, b_zero = true;
};

template <typename TA, typename TB>
void ExpectMatMulInteger(const MatMulCase& c) {
  SCOPED_TRACE(absl::StrCat("MatMulInteger ", DTypeName(DTypeFor<TA>()), " ", Describe(c.as), " x ",
                            DTypeName(DTypeFor<TB>()), " ", Describe(c.bs), " zero points ",
                            c.a_zero ? Describe(c.zas) : "none", " ", c.b_zero ? Describe(c.zbs) : "none"));
  const std::vector<TA> a = IntPattern<TA>(Count(c.as), 1);
  const std::vector<TB> b = IntPattern<TB>(Count(c.bs), 2);
  const std::vector<TA> za = IntPattern<TA>(c.a_zero ? Count(c.zas) : 0, 3);
  const std::vector<TB> zb = IntPattern<TB>(c.b_zero ? Count(c.zbs) : 0, 4);
  const std::vector<int32_t> za32 = c.a_zero ? std::vector<int32_t>(za.begin(), za.end()) : std::vector<int32_t>{0};
  const std::vector<int32_t> zb32 = c.b_zero ? std::vector<int32_t>(zb.begin(), zb.end()) : std::vector<int32_t>{0};
  // The vector forms are per row ([M] -> [M, 1]) and per column ([N]).
  Shape zas = c.a_zero ? c.zas : Shape{};
  if (zas.size() == 1 && c.as.size() >= 2 && Count(zas) != 1) zas = {zas[0], 1};
  const MatMulRef want = RefMatMul(c.as, a, c.bs, b, zas, za32, c.b_zero ? c.zbs : Shape{}, zb32);
  Tensor at = MakeTensor<TA>(DTypeFor<TA>(), c.as, a);
  Tensor bt = MakeTensor<TB>(DTypeFor<TB>(), c.bs, b);
  Tensor zat = MakeTensor<TA>(DTypeFor<TA>(), c.zas, za);
  Tensor zbt = MakeTensor<TB>(DTypeFor<TB>(), c.zbs, zb);
  auto out = RunOp("MatMulInteger", {&at, &bt, c.a_zero ? &zat : nullptr, c.b_zero ? &zbt : nullptr});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].dtype(), DType::kI32);
  EXPECT_EQ((*out)[0].shape(), want.out_shape);
  std::vector<int32_t> want32(want.acc.begin(), want.acc.end());
  EXPECT_EQ(Values<int32_t>((*out)[0]), want32);
}

const MatMulCase kMatMulCases[] = {
    {{4, 3}, {3, 2}, {}, {}},
    {{4, 3}, {3, 2}, {}, {}, false, false},
    {{4, 3}, {3, 2}, {1}, {1}, true, false},
    {{4, 3}, {3, 2}, {4}, {2}},  // per row, per column
    {{2, 1, 3, 5}, {3, 5, 4}, {2, 1, 3, 1}, {3, 1, 4}},
    {{2, 1, 3, 5}, {3, 5, 4}, {1, 3, 1}, {1, 1, 4}},
    {{5}, {5, 3}, {1}, {3}},  // rank-1 A
    {{2, 4}, {4}, {2}, {}},   // rank-1 B
    {{5}, {5}, {}, {}},
    {{0, 3}, {3, 2}, {0}, {2}},
    {{2, 0}, {0, 3}, {}, {}},
};

TEST(QuantizationTest, MatMulInteger) {
  for (const MatMulCase& c : kMatMulCases) {
    ExpectMatMulInteger<uint8_t, uint8_t>(c);
    ExpectMatMulInteger<uint8_t, int8_t>(c);
    ExpectMatMulInteger<int8_t, uint8_t>(c);
    ExpectMatMulInteger<int8_t, int8_t>(c);
  }
  // The ONNX example.
  Tensor a = MakeTensor<uint8_t>(DType::kU8, {4, 3}, {11, 7, 3, 10, 6, 2, 9, 5, 1, 8, 4, 0});
  Tensor b = MakeTensor<uint8_t>(DType::kU8, {3, 2}, {1, 4, 2, 5, 3, 6});
  Tensor za = MakeTensor<uint8_t>(DType::kU8, {}, {12});
  Tensor zb = MakeTensor<uint8_t>(DType::kU8, {}, {0});
  auto out = RunOp("MatMulInteger", {&a, &b, &za, &zb});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Values<int32_t>((*out)[0]), (std::vector<int32_t>{-38, -83, -44, -98, -50, -113, -56, -128}));
}

TEST(QuantizationTest, MatMulIntegerErrors) {
  Tensor a = MakeTensor<uint8_t>(DType::kU8, {4, 3}, {});
  Tensor b = MakeTensor<uint8_t>(DType::kU8, {3, 2}, {});
  Tensor b_k = MakeTensor<uint8_t>(DType::kU8, {4, 2}, {});
  Tensor scalar = MakeTensor<uint8_t>(DType::kU8, {}, {0});
  Tensor z3 = MakeTensor<uint8_t>(DType::kU8, {3}, {});
  Tensor z43 = MakeTensor<uint8_t>(DType::kU8, {4, 3}, {});
  Tensor zi8 = MakeTensor<int8_t>(DType::kI8, {}, {0});
  Tensor f = MakeTensor<float>(DType::kF32, {4, 3}, {});
  Tensor batch_a = MakeTensor<uint8_t>(DType::kU8, {2, 4, 3}, {});
  Tensor batch_b = MakeTensor<uint8_t>(DType::kU8, {3, 3, 2}, {});
  EXPECT_TRUE(ErrorContains(RunOp("MatMulInteger", {&a, &b_k}).status(), "inner dims differ"));
  EXPECT_TRUE(ErrorContains(RunOp("MatMulInteger", {&scalar, &b}).status(), "is a scalar (rank 0)"));
  EXPECT_TRUE(ErrorContains(RunOp("MatMulInteger", {&batch_a, &batch_b}).status(), "do not broadcast"));
  EXPECT_TRUE(ErrorContains(RunOp("MatMulInteger", {&f, &b}).status(), "input 0 (A) has dtype f32"));
  EXPECT_TRUE(ErrorContains(RunOp("MatMulInteger", {&a, &b, &zi8}).status(),
                            "input 2 (a_zero_point) has dtype i8; expected u8"));
  EXPECT_TRUE(ErrorContains(RunOp("MatMulInteger", {&a, &b, &z3}).status(),
                            "input 2 (a_zero_point) has shape [3] for input 0 [4, 3]; expected [] or [1], [4]"));
  EXPECT_TRUE(ErrorContains(RunOp("MatMulInteger", {&a, &b, &z43}).status(), "(per row of A)"));
  EXPECT_TRUE(ErrorContains(RunOp("MatMulInteger", {&a, &b, nullptr, &z3}).status(), "(per column of B)"));
  // The kernel's own checks.
  EXPECT_TRUE(
      ErrorContains(RunKernelPlanned("MatMulInteger", {&a, &b_k}, DType::kI32, {4, 2}).status(), "inner dims differ"));
  EXPECT_TRUE(
      ErrorContains(RunKernelPlanned("MatMulInteger", {&a, &b, &z3}, DType::kI32, {4, 2}).status(), "(per row of A)"));
  EXPECT_TRUE(ErrorContains(RunKernelPlanned("MatMulInteger", {&a, &b, &zi8}, DType::kI32, {4, 2}).status(),
                            "expected u8 like its operand"));
  EXPECT_TRUE(ErrorContains(RunKernelPlanned("MatMulInteger", {&a, &b}, DType::kI32, {4, 3}).status(),
                            "output 0 was allocated as i32 [4, 3]"));
  EXPECT_TRUE(ErrorContains(RunKernelPlanned("MatMulInteger", {&batch_a, &batch_b}, DType::kI32, {3, 4, 2}).status(),
                            "do not broadcast"));
  EXPECT_TRUE(ErrorContains(RunKernelPlanned("MatMulInteger", {&f, &b}, DType::kI32, {4, 2}).status(),
                            "does not support dtype f32"));
}

template <typename TA, typename TB, typename TY>
void ExpectQLinearMatMul(const MatMulCase& c) {
  SCOPED_TRACE(absl::StrCat("QLinearMatMul ", DTypeName(DTypeFor<TA>()), " ", Describe(c.as), " x ",
                            DTypeName(DTypeFor<TB>()), " ", Describe(c.bs), " -> ", DTypeName(DTypeFor<TY>()),
                            " params ", Describe(c.zas), " ", Describe(c.zbs)));
  const std::vector<TA> a = IntPattern<TA>(Count(c.as), 5);
  const std::vector<TB> b = IntPattern<TB>(Count(c.bs), 6);
  const std::vector<TA> za = IntPattern<TA>(Count(c.zas), 7);
  const std::vector<TB> zb = IntPattern<TB>(Count(c.zbs), 8);
  std::vector<float> sa(static_cast<size_t>(Count(c.zas))), sb(static_cast<size_t>(Count(c.zbs)));
  for (size_t i = 0; i < sa.size(); ++i) sa[i] = 0.01f * static_cast<float>(i + 1);
  for (size_t i = 0; i < sb.size(); ++i) sb[i] = 0.02f / static_cast<float>(i + 1);
  const float sy = 0.37f;
  const TY zy = static_cast<TY>(std::is_signed_v<TY> ? -3 : 120);
  Shape zas = c.zas;
  if (zas.size() == 1 && c.as.size() >= 2 && Count(zas) != 1) zas = {zas[0], 1};
  const MatMulRef ref = RefMatMul(c.as, a, c.bs, b, zas, std::vector<int32_t>(za.begin(), za.end()), c.zbs,
                                  std::vector<int32_t>(zb.begin(), zb.end()));
  std::vector<TY> want(ref.acc.size());
  for (size_t i = 0; i < want.size(); ++i) {
    const float mult = sa[ref.row[i]] * sb[ref.col[i]] / sy;
    want[i] = Saturate<TY>(RoundHalfEven(static_cast<double>(static_cast<int32_t>(ref.acc[i])) * mult) + zy);
  }
  Tensor at = MakeTensor<TA>(DTypeFor<TA>(), c.as, a);
  Tensor bt = MakeTensor<TB>(DTypeFor<TB>(), c.bs, b);
  Tensor zat = MakeTensor<TA>(DTypeFor<TA>(), c.zas, za);
  Tensor zbt = MakeTensor<TB>(DTypeFor<TB>(), c.zbs, zb);
  Tensor sat = MakeTensor<float>(DType::kF32, c.zas, sa);
  Tensor sbt = MakeTensor<float>(DType::kF32, c.zbs, sb);
  Tensor syt = MakeTensor<float>(DType::kF32, {}, {sy});
  Tensor zyt = MakeTensor<TY>(DTypeFor<TY>(), {1}, {zy});
  auto out = RunOp("QLinearMatMul", {&at, &sat, &zat, &bt, &sbt, &zbt, &syt, &zyt});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].dtype(), DTypeFor<TY>());
  EXPECT_EQ((*out)[0].shape(), ref.out_shape);
  EXPECT_EQ(Values<TY>((*out)[0]), want);
}

TEST(QuantizationTest, QLinearMatMul) {
  const MatMulCase cases[] = {
      {{2, 4}, {4, 3}, {}, {1}},
      {{2, 4}, {4, 3}, {2}, {3}},
      {{2, 2, 4}, {2, 4, 3}, {2, 2, 1}, {1, 1, 3}},
      {{3, 1, 2, 4}, {2, 4, 3}, {1}, {2, 1, 3}},
      {{4}, {4, 3}, {}, {3}},
      {{2, 4}, {4}, {2}, {1}},
  };
  for (const MatMulCase& c : cases) {
    ExpectQLinearMatMul<uint8_t, uint8_t, uint8_t>(c);
    ExpectQLinearMatMul<int8_t, uint8_t, int8_t>(c);
    ExpectQLinearMatMul<uint8_t, int8_t, int8_t>(c);
    ExpectQLinearMatMul<int8_t, int8_t, uint8_t>(c);
  }
  // The ONNX example (test_qlinearmatmul_2D).
  Tensor a = MakeTensor<uint8_t>(DType::kU8, {2, 4}, {208, 236, 0, 238, 3, 214, 255, 29});
  Tensor sa = MakeTensor<float>(DType::kF32, {1}, {0.0066f});
  Tensor za = MakeTensor<uint8_t>(DType::kU8, {1}, {113});
  Tensor b = MakeTensor<uint8_t>(DType::kU8, {4, 3}, {152, 51, 244, 60, 26, 255, 0, 127, 246, 127, 254, 247});
  Tensor sb = MakeTensor<float>(DType::kF32, {1}, {0.00705f});
  Tensor zb = MakeTensor<uint8_t>(DType::kU8, {1}, {114});
  Tensor sy = MakeTensor<float>(DType::kF32, {1}, {0.0107f});
  Tensor zy = MakeTensor<uint8_t>(DType::kU8, {1}, {118});
  auto out = RunOp("QLinearMatMul", {&a, &sa, &za, &b, &sb, &zb, &sy, &zy});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Values<uint8_t>((*out)[0]), (std::vector<uint8_t>{168, 115, 255, 1, 66, 151}));
}

TEST(QuantizationTest, QLinearMatMulErrors) {
  Tensor a = MakeTensor<uint8_t>(DType::kU8, {2, 4}, {});
  Tensor b = MakeTensor<uint8_t>(DType::kU8, {4, 3}, {});
  Tensor s = MakeTensor<float>(DType::kF32, {}, {1});
  Tensor s2 = MakeTensor<float>(DType::kF32, {2}, {1, 1});
  Tensor s3 = MakeTensor<float>(DType::kF32, {3}, {1, 1, 1});
  Tensor z = MakeTensor<uint8_t>(DType::kU8, {}, {0});
  Tensor z3 = MakeTensor<uint8_t>(DType::kU8, {3}, {});
  Tensor zi = MakeTensor<int8_t>(DType::kI8, {}, {0});
  Tensor zf = MakeTensor<float>(DType::kF32, {}, {0});
  Tensor si = MakeTensor<int32_t>(DType::kI32, {}, {1});
  EXPECT_TRUE(ErrorContains(RunOp("QLinearMatMul", {&a, &s3, &z, &b, &s, &z, &s, &z}).status(),
                            "input 1 (a_scale) has shape [3] for input 0 [2, 4]"));
  EXPECT_TRUE(ErrorContains(RunOp("QLinearMatMul", {&a, &s2, &z, &b, &s, &z, &s, &z}).status(),
                            "input 1 (a_scale) has shape [2] but input 2 (a_zero_point) has shape []"));
  EXPECT_TRUE(ErrorContains(RunOp("QLinearMatMul", {&a, &s, &z, &b, &s, &z, &s3, &z}).status(),
                            "input 6 (y_scale) has shape [3]"));
  EXPECT_TRUE(ErrorContains(RunOp("QLinearMatMul", {&a, &s, &z, &b, &s, &z, &s, &z3}).status(),
                            "input 7 (y_zero_point) has shape [3]"));
  EXPECT_TRUE(ErrorContains(RunOp("QLinearMatMul", {&a, &s, &zi, &b, &s, &z, &s, &z}).status(),
                            "input 2 (a_zero_point) has dtype i8"));
  EXPECT_TRUE(ErrorContains(RunOp("QLinearMatMul", {&a, &s, &z, &b, &s, &z, &s, &zf}).status(),
                            "input 7 (y_zero_point) has dtype f32"));
  EXPECT_TRUE(ErrorContains(RunOp("QLinearMatMul", {&a, &si, &z, &b, &s, &z, &s, &z}).status(),
                            "input 1 (a_scale) has dtype i32"));
  EXPECT_TRUE(ErrorContains(RunOp("QLinearMatMul", {&a, &s, &z, &a, &s, &z, &s, &z}).status(), "inner dims differ"));
  // The kernel's own checks.
  EXPECT_TRUE(
      ErrorContains(RunKernelPlanned("QLinearMatMul", {&a, &s2, &z, &b, &s, &z, &s, &z}, DType::kU8, {2, 3}).status(),
                    "expected the same shape"));
  // Per-column parameters of B are fine.
  EXPECT_TRUE(RunKernelPlanned("QLinearMatMul", {&a, &s, &z, &b, &s3, &z3, &s, &z}, DType::kU8, {2, 3}).ok());
  EXPECT_TRUE(
      ErrorContains(RunKernelPlanned("QLinearMatMul", {&a, &s, &z, &b, &s, &z, &s3, &z}, DType::kU8, {2, 3}).status(),
                    "input 6 (y_scale) has shape [3]"));
  EXPECT_TRUE(
      ErrorContains(RunKernelPlanned("QLinearMatMul", {&a, &s, &z, &b, &s, &z, &s, &z}, DType::kI8, {2, 3}).status(),
                    "output 0 was allocated as i8"));
  EXPECT_TRUE(
      ErrorContains(RunKernelPlanned("QLinearMatMul", {&a, &s, &zi, &b, &s, &z, &s, &z}, DType::kU8, {2, 3}).status(),
                    "input 2 (a_zero_point) has dtype i8; expected u8 like its operand"));
  EXPECT_TRUE(
      ErrorContains(RunKernelPlanned("QLinearMatMul", {&a, &si, &z, &b, &s, &z, &s, &z}, DType::kU8, {2, 3}).status(),
                    "input 1 (a_scale) has dtype i32; expected f32, f16 or bf16"));
}

// ---------------------------------------------------------------------------
// ConvInteger, QLinearConv
// ---------------------------------------------------------------------------

struct ConvCase {
  Shape xs, ws;  // [N, C, spatial...], [M, C / group, k...]
  int64_t group = 1;
  Shape pads, strides, dilations;  // empty: attribute absent
  std::string auto_pad;            // empty: absent
  bool per_channel = false;        // w parameters per output channel
};

// The exact sums of a Conv over x - xz and w - wz[m] (+ bias[m]): the input
// padded explicitly with zeros, then every window read in full.
std::vector<int64_t> RefConv(const ConvCase& c, const std::vector<int32_t>& x, int32_t xz,
                             const std::vector<int32_t>& w, const std::vector<int32_t>& wz,
                             const std::vector<int32_t>& bias, Shape* out_shape) {
  const int sp = static_cast<int>(c.xs.size()) - 2;
  const int64_t n = c.xs[0], ch = c.xs[1], m = c.ws[0], cg = ch / c.group, mg = m / c.group;
  Shape strides = c.strides.empty() ? Shape(sp, 1) : c.strides;
  Shape dil = c.dilations.empty() ? Shape(sp, 1) : c.dilations;
  Shape pb(sp, 0), pe(sp, 0), out(sp);
  for (int d = 0; d < sp; ++d) {
    const int64_t in = c.xs[2 + d], ek = (c.ws[2 + d] - 1) * dil[d] + 1;
    if (c.auto_pad == "SAME_UPPER" || c.auto_pad == "SAME_LOWER") {
      out[d] = (in + strides[d] - 1) / strides[d];
      const int64_t total = std::max<int64_t>(0, (out[d] - 1) * strides[d] + ek - in);
      pb[d] = c.auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      pe[d] = total - pb[d];
    } else {
      if (!c.pads.empty()) {
        pb[d] = c.pads[d];
        pe[d] = c.pads[sp + d];
      }
      out[d] = (in + pb[d] + pe[d] - ek) / strides[d] + 1;
    }
  }
  // Padded input, zero point removed.
  Shape ps = {n, ch};
  for (int d = 0; d < sp; ++d) ps.push_back(c.xs[2 + d] + pb[d] + pe[d]);
  std::vector<int64_t> padded(static_cast<size_t>(Count(ps)), 0);
  for (int64_t i = 0; i < Count(c.xs); ++i) {
    Shape idx = Unravel(i, c.xs);
    for (int d = 0; d < sp; ++d) idx[2 + d] += pb[d];
    int64_t f = 0;
    for (size_t d = 0; d < ps.size(); ++d) f = f * ps[d] + idx[d];
    padded[f] = int64_t{x[i]} - xz;
  }
  *out_shape = {n, m};
  out_shape->insert(out_shape->end(), out.begin(), out.end());
  const Shape kernel(c.ws.begin() + 2, c.ws.end());
  std::vector<int64_t> y;
  for (int64_t o = 0; o < Count(*out_shape); ++o) {
    const Shape oi = Unravel(o, *out_shape);
    const int64_t oc = oi[1], g = oc / mg;
    int64_t acc = bias.empty() ? 0 : bias[oc];
    for (int64_t ci = 0; ci < cg; ++ci) {
      for (int64_t t = 0; t < Count(kernel); ++t) {
        const Shape ti = Unravel(t, kernel);
        Shape xi = {oi[0], g * cg + ci};
        for (int d = 0; d < sp; ++d) xi.push_back(oi[2 + d] * strides[d] + ti[d] * dil[d]);
        int64_t f = 0;
        for (size_t d = 0; d < ps.size(); ++d) f = f * ps[d] + xi[d];
        const int64_t wf = (oc * cg + ci) * Count(kernel) + t;
        acc += padded[f] * (int64_t{w[wf]} - wz[wz.size() == 1 ? 0 : oc]);
      }
    }
    y.push_back(acc);
  }
  return y;
}

Attrs ConvAttrs(const ConvCase& c) {
  Attrs a;
  if (c.group != 1) a.push_back({"group", c.group});
  if (!c.pads.empty()) a.push_back({"pads", c.pads});
  if (!c.strides.empty()) a.push_back({"strides", c.strides});
  if (!c.dilations.empty()) a.push_back({"dilations", c.dilations});
  if (!c.auto_pad.empty()) a.push_back({"auto_pad", c.auto_pad});
  return a;
}

std::string DescribeConv(const ConvCase& c) {
  return absl::StrCat("x ", Describe(c.xs), " w ", Describe(c.ws), " group ", c.group, " pads ", Describe(c.pads),
                      " strides ", Describe(c.strides), " dilations ", Describe(c.dilations), " auto_pad '", c.auto_pad,
                      "'", c.per_channel ? " per channel" : "");
}

const ConvCase kConvCases[] = {
    {{1, 1, 3, 3}, {1, 1, 2, 2}},
    {{1, 1, 3, 3}, {1, 1, 2, 2}, 1, {1, 1, 1, 1}},
    {{2, 3, 5, 4}, {4, 3, 3, 2}, 1, {1, 0, 2, 1}, {2, 1}, {}, "", true},
    {{1, 4, 6, 6}, {6, 2, 3, 3}, 2, {}, {1, 2}, {2, 1}, "", true},
    {{1, 2, 5, 5}, {2, 2, 3, 3}, 1, {}, {2, 2}, {}, "SAME_UPPER"},
    {{1, 2, 6}, {3, 2, 2}, 1, {}, {}, {}, "SAME_LOWER", true},
    {{2, 2, 7}, {2, 1, 3}, 2, {2, 1}, {3}, {2}},
    {{1, 2, 3, 4, 3}, {2, 2, 2, 2, 2}, 1, {1, 0, 1, 0, 1, 0}, {}, {}, "", true},
    {{1, 1, 4, 4}, {1, 1, 2, 2}, 1, {}, {}, {}, "VALID"},
    {{0, 2, 3, 3}, {1, 2, 2, 2}},
};

template <typename TX, typename TW>
void ExpectConvInteger(const ConvCase& c, bool zero_points) {
  SCOPED_TRACE(absl::StrCat("ConvInteger ", DTypeName(DTypeFor<TX>()), " x ", DTypeName(DTypeFor<TW>()), " ",
                            DescribeConv(c), zero_points ? " with zero points" : ""));
  const std::vector<TX> x = IntPattern<TX>(Count(c.xs), 1);
  const std::vector<TW> w = IntPattern<TW>(Count(c.ws), 2);
  const int64_t m = c.ws[0];
  const TX xz = zero_points ? IntPattern<TX>(1, 3)[0] : TX{0};
  const std::vector<TW> wz = zero_points ? IntPattern<TW>(c.per_channel ? m : 1, 4) : std::vector<TW>{0};
  Shape out_shape;
  const std::vector<int64_t> want =
      RefConv(c, std::vector<int32_t>(x.begin(), x.end()), xz, std::vector<int32_t>(w.begin(), w.end()),
              std::vector<int32_t>(wz.begin(), wz.end()), {}, &out_shape);
  Tensor xt = MakeTensor<TX>(DTypeFor<TX>(), c.xs, x);
  Tensor wt = MakeTensor<TW>(DTypeFor<TW>(), c.ws, w);
  Tensor xzt = MakeTensor<TX>(DTypeFor<TX>(), {}, {xz});
  Tensor wzt = MakeTensor<TW>(DTypeFor<TW>(), c.per_channel ? Shape{m} : Shape{1}, wz);
  auto out = zero_points ? RunOp("ConvInteger", {&xt, &wt, &xzt, &wzt}, ConvAttrs(c))
                         : RunOp("ConvInteger", {&xt, &wt}, ConvAttrs(c));
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].dtype(), DType::kI32);
  EXPECT_EQ((*out)[0].shape(), out_shape);
  EXPECT_EQ(Values<int32_t>((*out)[0]), std::vector<int32_t>(want.begin(), want.end()));
}

TEST(QuantizationTest, ConvInteger) {
  for (const ConvCase& c : kConvCases) {
    for (bool zp : {false, true}) {
      ExpectConvInteger<uint8_t, uint8_t>(c, zp);
      ExpectConvInteger<uint8_t, int8_t>(c, zp);
      ExpectConvInteger<int8_t, int8_t>(c, zp);
    }
  }
  // test_basic_convinteger: x 2..10, w all 1, x_zero_point 1.
  Tensor x = MakeTensor<uint8_t>(DType::kU8, {1, 1, 3, 3}, {2, 3, 4, 5, 6, 7, 8, 9, 10});
  Tensor w = MakeTensor<uint8_t>(DType::kU8, {1, 1, 2, 2}, {1, 1, 1, 1});
  Tensor xz = MakeTensor<uint8_t>(DType::kU8, {}, {1});
  auto out = RunOp("ConvInteger", {&x, &w, &xz});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Values<int32_t>((*out)[0]), (std::vector<int32_t>{12, 16, 24, 28}));
  // Padding counts as the zero point.
  auto padded = RunOp("ConvInteger", {&x, &w, &xz}, {{"pads", Shape{1, 1, 1, 1}}});
  ASSERT_TRUE(padded.ok()) << padded.status();
  EXPECT_EQ(Values<int32_t>((*padded)[0]),
            (std::vector<int32_t>{1, 3, 5, 3, 5, 12, 16, 9, 11, 24, 28, 15, 7, 15, 17, 9}));
}

TEST(QuantizationTest, ConvIntegerErrors) {
  Tensor x = MakeTensor<uint8_t>(DType::kU8, {1, 2, 4, 4}, {});
  Tensor w = MakeTensor<uint8_t>(DType::kU8, {3, 2, 2, 2}, {});
  Tensor w_bad = MakeTensor<uint8_t>(DType::kU8, {3, 3, 2, 2}, {});
  Tensor w_rank = MakeTensor<uint8_t>(DType::kU8, {3, 2, 2}, {});
  Tensor x_rank = MakeTensor<uint8_t>(DType::kU8, {2, 4}, {});
  Tensor xz2 = MakeTensor<uint8_t>(DType::kU8, {2}, {});
  Tensor wz2 = MakeTensor<uint8_t>(DType::kU8, {2}, {});
  Tensor zi8 = MakeTensor<int8_t>(DType::kI8, {}, {0});
  Tensor f = MakeTensor<float>(DType::kF32, {1, 2, 4, 4}, {});
  EXPECT_TRUE(ErrorContains(RunOp("ConvInteger", {&x, &w_bad}).status(), "has 2 channels but input 1 (w)"));
  EXPECT_TRUE(ErrorContains(RunOp("ConvInteger", {&x, &w_rank}).status(), "expected rank 4"));
  EXPECT_TRUE(ErrorContains(RunOp("ConvInteger", {&x_rank, &w}).status(), "expected rank >= 3"));
  EXPECT_TRUE(ErrorContains(RunOp("ConvInteger", {&x, &w, &xz2}).status(), "input 2 (x_zero_point) has shape [2]"));
  EXPECT_TRUE(ErrorContains(RunOp("ConvInteger", {&x, &w, nullptr, &wz2}).status(),
                            "input 3 (w_zero_point) has shape [2]; expected [] or [1] or [3] (per output channel)"));
  EXPECT_TRUE(ErrorContains(RunOp("ConvInteger", {&x, &w, &zi8}).status(), "input 2 (x_zero_point) has dtype i8"));
  EXPECT_TRUE(ErrorContains(RunOp("ConvInteger", {&f, &w}).status(), "input 0 (x) has dtype f32"));
  EXPECT_TRUE(ErrorContains(RunOp("ConvInteger", {&x, &w}, {{"group", int64_t{2}}}).status(), "with group 2"));
  EXPECT_TRUE(ErrorContains(RunOp("ConvInteger", {&x, &w}, {{"strides", Shape{1}}}).status(),
                            "attribute 'strides' has 1 values"));
  EXPECT_TRUE(ErrorContains(RunOp("ConvInteger", {&x, &w}, {{"kernel_shape", Shape{3, 3}}}).status(),
                            "attribute 'kernel_shape' is [3, 3]"));
  EXPECT_TRUE(
      ErrorContains(RunOp("ConvInteger", {&x, &w}, {{"dilations", Shape{5, 5}}}).status(), "shorter than the window"));
  // The kernel's own checks.
  EXPECT_TRUE(ErrorContains(RunKernelPlanned("ConvInteger", {&x, &w_bad}, DType::kI32, {1, 3, 3, 3}).status(),
                            "do not fit group 1"));
  EXPECT_TRUE(ErrorContains(RunKernelPlanned("ConvInteger", {&x, &w_rank}, DType::kI32, {1, 3, 3, 3}).status(),
                            "expected rank 4"));
  EXPECT_TRUE(ErrorContains(RunKernelPlanned("ConvInteger", {&x_rank, &w}, DType::kI32, {1, 3, 3, 3}).status(),
                            "expected rank >= 3"));
  EXPECT_TRUE(ErrorContains(RunKernelPlanned("ConvInteger", {&x, &w, &xz2}, DType::kI32, {1, 3, 3, 3}).status(),
                            "input 2 (x_zero_point) has shape [2]"));
  EXPECT_TRUE(
      ErrorContains(RunKernelPlanned("ConvInteger", {&x, &w, nullptr, &wz2}, DType::kI32, {1, 3, 3, 3}).status(),
                    "or [3] (per output channel)"));
  EXPECT_TRUE(ErrorContains(RunKernelPlanned("ConvInteger", {&x, &w, &zi8}, DType::kI32, {1, 3, 3, 3}).status(),
                            "expected u8 like its operand"));
  EXPECT_TRUE(ErrorContains(RunKernelPlanned("ConvInteger", {&x, &w}, DType::kI32, {1, 3, 4, 4}).status(),
                            "output 0 was allocated as i32 [1, 3, 4, 4]"));
  EXPECT_TRUE(ErrorContains(RunKernelPlanned("ConvInteger", {&f, &w}, DType::kI32, {1, 3, 3, 3}).status(),
                            "does not support dtype f32"));
}

template <typename TX, typename TW, typename TY>
void ExpectQLinearConv(const ConvCase& c, bool bias) {
  SCOPED_TRACE(absl::StrCat("QLinearConv ", DTypeName(DTypeFor<TX>()), " x ", DTypeName(DTypeFor<TW>()), " -> ",
                            DTypeName(DTypeFor<TY>()), " ", DescribeConv(c), bias ? " with bias" : ""));
  const std::vector<TX> x = IntPattern<TX>(Count(c.xs), 11);
  const std::vector<TW> w = IntPattern<TW>(Count(c.ws), 12);
  const int64_t m = c.ws[0];
  const int64_t np = c.per_channel ? m : 1;
  const TX xz = IntPattern<TX>(1, 13)[0];
  const std::vector<TW> wz = IntPattern<TW>(np, 14);
  std::vector<float> ws(static_cast<size_t>(np));
  for (int64_t i = 0; i < np; ++i) ws[i] = 0.003f * static_cast<float>(i + 1);
  const float xs = 0.05f, ys = 0.9f;
  const TY yz = static_cast<TY>(std::is_signed_v<TY> ? 5 : 100);
  std::vector<int32_t> b;
  if (bias) {
    for (int64_t i = 0; i < m; ++i) b.push_back(static_cast<int32_t>(i * 1000 - 1500));
  }
  Shape out_shape;
  const std::vector<int64_t> acc =
      RefConv(c, std::vector<int32_t>(x.begin(), x.end()), xz, std::vector<int32_t>(w.begin(), w.end()),
              std::vector<int32_t>(wz.begin(), wz.end()), b, &out_shape);
  std::vector<TY> want(acc.size());
  for (size_t i = 0; i < acc.size(); ++i) {
    const int64_t oc = Unravel(static_cast<int64_t>(i), out_shape)[1];
    const float mult = xs * ws[c.per_channel ? oc : 0] / ys;
    want[i] = Saturate<TY>(RoundHalfEven(static_cast<double>(acc[i]) * mult) + yz);
  }
  Tensor xt = MakeTensor<TX>(DTypeFor<TX>(), c.xs, x);
  Tensor wt = MakeTensor<TW>(DTypeFor<TW>(), c.ws, w);
  Tensor xst = MakeTensor<float>(DType::kF32, {}, {xs});
  Tensor xzt = MakeTensor<TX>(DTypeFor<TX>(), {}, {xz});
  Tensor wst = MakeTensor<float>(DType::kF32, {np}, ws);
  Tensor wzt = MakeTensor<TW>(DTypeFor<TW>(), {np}, wz);
  Tensor yst = MakeTensor<float>(DType::kF32, {}, {ys});
  Tensor yzt = MakeTensor<TY>(DTypeFor<TY>(), {}, {yz});
  Tensor bt = MakeTensor<int32_t>(DType::kI32, {m}, b);
  std::vector<const Tensor*> inputs = {&xt, &xst, &xzt, &wt, &wst, &wzt, &yst, &yzt};
  if (bias) inputs.push_back(&bt);
  auto out = RunOp("QLinearConv", inputs, ConvAttrs(c));
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].dtype(), DTypeFor<TY>());
  EXPECT_EQ((*out)[0].shape(), out_shape);
  EXPECT_EQ(Values<TY>((*out)[0]), want);
}

TEST(QuantizationTest, QLinearConv) {
  for (const ConvCase& c : kConvCases) {
    for (bool bias : {false, true}) {
      ExpectQLinearConv<uint8_t, uint8_t, uint8_t>(c, bias);
      ExpectQLinearConv<int8_t, int8_t, int8_t>(c, bias);
      ExpectQLinearConv<uint8_t, int8_t, uint8_t>(c, bias);
    }
  }
}

TEST(QuantizationTest, QLinearConvErrors) {
  Tensor x = MakeTensor<uint8_t>(DType::kU8, {1, 2, 4, 4}, {});
  Tensor w = MakeTensor<int8_t>(DType::kI8, {3, 2, 2, 2}, {});
  Tensor s = MakeTensor<float>(DType::kF32, {}, {1});
  Tensor s2 = MakeTensor<float>(DType::kF32, {2}, {1, 1});
  Tensor s3 = MakeTensor<float>(DType::kF32, {3}, {1, 1, 1});
  Tensor xz = MakeTensor<uint8_t>(DType::kU8, {}, {0});
  Tensor wz = MakeTensor<int8_t>(DType::kI8, {}, {0});
  Tensor wz3 = MakeTensor<int8_t>(DType::kI8, {3}, {});
  Tensor yz = MakeTensor<uint8_t>(DType::kU8, {}, {0});
  Tensor b3 = MakeTensor<int32_t>(DType::kI32, {3}, {});
  Tensor b2 = MakeTensor<int32_t>(DType::kI32, {2}, {});
  Tensor bf = MakeTensor<float>(DType::kF32, {3}, {});
  EXPECT_TRUE(ErrorContains(RunOp("QLinearConv", {&x, &s2, &xz, &w, &s, &wz, &s, &yz}).status(),
                            "input 1 (x_scale) has shape [2]"));
  EXPECT_TRUE(ErrorContains(RunOp("QLinearConv", {&x, &s, &xz, &w, &s2, &wz, &s, &yz}).status(),
                            "input 4 (w_scale) has shape [2]; expected [] or [1] or [3] (per output channel)"));
  EXPECT_TRUE(ErrorContains(RunOp("QLinearConv", {&x, &s, &xz, &w, &s3, &wz, &s, &yz}).status(),
                            "input 4 (w_scale) has shape [3] but input 5 (w_zero_point) has shape []"));
  EXPECT_TRUE(ErrorContains(RunOp("QLinearConv", {&x, &s, &xz, &w, &s, &wz, &s, &yz, &b2}).status(),
                            "input 8 (B) has shape [2]; expected [3]"));
  EXPECT_TRUE(ErrorContains(RunOp("QLinearConv", {&x, &s, &xz, &w, &s, &wz, &s, &yz, &bf}).status(),
                            "input 8 (B) has dtype f32"));
  EXPECT_TRUE(ErrorContains(RunOp("QLinearConv", {&x, &s, &wz, &w, &s, &wz, &s, &yz}).status(),
                            "input 2 (x_zero_point) has dtype i8; expected u8"));
  EXPECT_TRUE(ErrorContains(RunOp("QLinearConv", {&x, &s, &xz, &w, &s, &wz, &s3, &yz}).status(),
                            "input 6 (y_scale) has shape [3]"));
  // The kernel's own checks.
  const Shape ys = {1, 3, 3, 3};
  EXPECT_TRUE(
      ErrorContains(RunKernelPlanned("QLinearConv", {&x, &s2, &xz, &w, &s, &wz, &s, &yz}, DType::kU8, ys).status(),
                    "input 1 (x_scale) has shape [2]"));
  // The kernel reads a per-channel zero point with a per-tensor scale.
  EXPECT_TRUE(RunKernelPlanned("QLinearConv", {&x, &s, &xz, &w, &s, &wz3, &s, &yz}, DType::kU8, ys).ok());
  EXPECT_TRUE(
      ErrorContains(RunKernelPlanned("QLinearConv", {&x, &s, &xz, &w, &s2, &wz, &s, &yz}, DType::kU8, ys).status(),
                    "or [3] (per output channel)"));
  EXPECT_TRUE(
      ErrorContains(RunKernelPlanned("QLinearConv", {&x, &s, &xz, &w, &s, &wz, &s, &yz, &b2}, DType::kU8, ys).status(),
                    "input 8 (B) has shape [2]; expected [3]"));
  EXPECT_TRUE(
      ErrorContains(RunKernelPlanned("QLinearConv", {&x, &s, &xz, &w, &s, &wz, &s, &yz, &bf}, DType::kU8, ys).status(),
                    "input 8 (B) has dtype f32; expected i32"));
  EXPECT_TRUE(
      ErrorContains(RunKernelPlanned("QLinearConv", {&x, &s, &xz, &w, &s, &wz, &s, &yz}, DType::kI8, ys).status(),
                    "output 0 was allocated as i8"));
  EXPECT_TRUE(
      ErrorContains(RunKernelPlanned("QLinearConv", {&x, &s, &yz, &w, &s, &xz, &s, &yz}, DType::kU8, ys).status(),
                    "input 5 (w_zero_point) has dtype u8; expected i8 like its operand"));
}

// ---------------------------------------------------------------------------
// Symbolic shapes
// ---------------------------------------------------------------------------

TEST(QuantizationTest, SymbolicShapes) {
  const SymDim n = SymDim::Symbol(0), h = SymDim::Symbol(1);
  auto q = InferSymbolic("QuantizeLinear", {{DType::kF32, {n, 3, h}}, {DType::kF32, {3}}, {DType::kI8, {3}}});
  ASSERT_TRUE(q.ok()) << q.status();
  EXPECT_EQ(q->dtype, DType::kI8);
  EXPECT_EQ(q->shape, (SymShape{n, 3, h}));
  auto dq = InferSymbolic("DequantizeLinear", {{DType::kU8, {n, h}}, {DType::kF32, {h}}}, {{"axis", int64_t{-1}}});
  ASSERT_TRUE(dq.ok()) << dq.status();
  EXPECT_EQ(dq->dtype, DType::kF32);
  EXPECT_EQ(dq->shape, (SymShape{n, h}));
  auto dyn = InferSymbolic("DynamicQuantizeLinear", {{DType::kF32, {n, h}}});
  ASSERT_TRUE(dyn.ok()) << dyn.status();
  EXPECT_EQ(dyn->dtype, DType::kU8);
  auto mm =
      InferSymbolic("MatMulInteger", {{DType::kU8, {n, h, 8}}, {DType::kI8, {8, 4}}, Absent(), {DType::kI8, {4}}});
  ASSERT_TRUE(mm.ok()) << mm.status();
  EXPECT_EQ(mm->dtype, DType::kI32);
  EXPECT_EQ(mm->shape, (SymShape{n, h, 4}));
  auto qmm = InferSymbolic("QLinearMatMul", {{DType::kI8, {n, 2, 8}},
                                             {DType::kF32, {n, 2, 1}},
                                             {DType::kI8, {n, 2, 1}},
                                             {DType::kU8, {8, 4}},
                                             {DType::kF32, {}},
                                             {DType::kU8, {}},
                                             {DType::kF32, {}},
                                             {DType::kI8, {}}});
  ASSERT_TRUE(qmm.ok()) << qmm.status();
  EXPECT_EQ(qmm->dtype, DType::kI8);
  EXPECT_EQ(qmm->shape, (SymShape{n, 2, 4}));
  auto conv = InferSymbolic("ConvInteger", {{DType::kU8, {n, 3, h, 9}}, {DType::kU8, {8, 3, 1, 3}}},
                            {{"strides", Shape{1, 2}}});
  ASSERT_TRUE(conv.ok()) << conv.status();
  EXPECT_EQ(conv->dtype, DType::kI32);
  EXPECT_EQ(conv->shape, (SymShape{n, 8, h, 4}));
  auto qconv = InferSymbolic("QLinearConv",
                             {{DType::kU8, {n, 3, 5}},
                              {DType::kF32, {}},
                              {DType::kU8, {}},
                              {DType::kI8, {6, 3, 3}},
                              {DType::kF32, {6}},
                              {DType::kI8, {6}},
                              {DType::kF32, {}},
                              {DType::kU8, {}},
                              {DType::kI32, {6}}},
                             {{"pads", Shape{1, 1}}});
  ASSERT_TRUE(qconv.ok()) << qconv.status();
  EXPECT_EQ(qconv->dtype, DType::kU8);
  EXPECT_EQ(qconv->shape, (SymShape{n, 6, 5}));
  // Dims that cannot be checked yet are accepted; constants that differ are not.
  EXPECT_TRUE(InferSymbolic("QuantizeLinear", {{DType::kF32, {n, h}}, {DType::kF32, {n}}}).ok());
  EXPECT_TRUE(
      ErrorContains(InferSymbolic("QuantizeLinear", {{DType::kF32, {n, 3}}, {DType::kF32, {4}}}).status(), "or [3]"));
}

}  // namespace
}  // namespace grove::testing
