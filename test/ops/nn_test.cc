// The nn group against naive references written here from the ONNX text:
// Conv and ConvTranspose as direct loops over output (or input) positions and
// kernel taps, pooling as direct window walks, LRN from the ONNX operator
// text (the normalizations are norm_test.cc's). Covers 1-D, 2-D and 3-D
// windows, groups, dilations, strides, every auto_pad mode, ceil_mode,
// count_include_pad, MaxPool indices in both storage orders, symbolic shapes,
// and every error the shape functions and kernels return.
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
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

// Deterministic values in [-1, 1], different per seed.
std::vector<float> Pattern(int64_t n, int seed) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[i] = static_cast<float>(((i * 37 + seed * 11 + 5) % 41) - 20) / 20.0f;
  return v;
}

Shape Unravel(int64_t flat, const Shape& dims) {
  Shape idx(dims.size());
  for (int d = static_cast<int>(dims.size()) - 1; d >= 0; --d) {
    idx[d] = flat % dims[d];
    flat /= dims[d];
  }
  return idx;
}

int64_t Ravel(const Shape& idx, const Shape& dims) {
  int64_t flat = 0;
  for (size_t d = 0; d < dims.size(); ++d) flat = flat * dims[d] + idx[d];
  return flat;
}

template <typename T>
void ExpectNear(const std::vector<T>& got, const std::vector<double>& want, double rtol = 1e-4,
                double atol = 1e-5) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_NEAR(static_cast<double>(got[i]), want[i], atol + rtol * std::abs(want[i])) << "at " << i;
  }
}

std::string Describe(const Shape& s) { return absl::StrCat("[", absl::StrJoin(s, ","), "]"); }

// ---------------------------------------------------------------------------
// Window arithmetic from the ONNX operator text, for the references.
// ---------------------------------------------------------------------------

struct WindowSpec {
  Shape kernel;
  Shape strides;         // empty: 1
  Shape dilations;       // empty: 1
  Shape pads;            // empty: 0; begins then ends
  std::string auto_pad;  // empty: attribute absent
  bool ceil_mode = false;
};

int64_t At(const Shape& v, size_t i, int64_t def) { return v.empty() ? def : v[i]; }

// Output lengths and begin/end pads of a Conv or pooling window.
void ForwardWindow(const WindowSpec& s, const Shape& in, Shape* out, Shape* pb, Shape* pe) {
  const size_t sp = in.size();
  out->assign(sp, 0);
  pb->assign(sp, 0);
  pe->assign(sp, 0);
  for (size_t d = 0; d < sp; ++d) {
    const int64_t st = At(s.strides, d, 1), ek = (s.kernel[d] - 1) * At(s.dilations, d, 1) + 1;
    if (s.auto_pad == "SAME_UPPER" || s.auto_pad == "SAME_LOWER") {
      (*out)[d] = (in[d] + st - 1) / st;
      const int64_t total = std::max<int64_t>(0, ((*out)[d] - 1) * st + ek - in[d]);
      (*pb)[d] = s.auto_pad == "SAME_UPPER" ? total / 2 : (total + 1) / 2;
      (*pe)[d] = total - (*pb)[d];
      continue;
    }
    if (s.auto_pad != "VALID") {
      (*pb)[d] = At(s.pads, d, 0);
      (*pe)[d] = At(s.pads, sp + d, 0);
    }
    const int64_t span = in[d] + (*pb)[d] + (*pe)[d] - ek;
    (*out)[d] = (s.ceil_mode ? (span + st - 1) / st : span / st) + 1;
    if (s.ceil_mode && ((*out)[d] - 1) * st >= in[d] + (*pb)[d]) --(*out)[d];
  }
}

Attrs WindowAttrs(const WindowSpec& s) {
  Attrs a = {{"kernel_shape", s.kernel}};
  if (!s.strides.empty()) a.push_back({"strides", s.strides});
  if (!s.dilations.empty()) a.push_back({"dilations", s.dilations});
  if (!s.pads.empty()) a.push_back({"pads", s.pads});
  if (!s.auto_pad.empty()) a.push_back({"auto_pad", s.auto_pad});
  if (s.ceil_mode) a.push_back({"ceil_mode", int64_t{1}});
  return a;
}

// ---------------------------------------------------------------------------
// Conv
// ---------------------------------------------------------------------------

std::vector<double> RefConv(const std::vector<float>& x, const Shape& xs, const std::vector<float>& w,
                            const Shape& ws, const std::vector<float>* b, int64_t group, const WindowSpec& s,
                            Shape* out_shape) {
  const Shape in(xs.begin() + 2, xs.end());
  Shape out, pb, pe;
  ForwardWindow(s, in, &out, &pb, &pe);
  const int64_t n = xs[0], c = xs[1], m = ws[0], cg = c / group, mg = m / group;
  const Shape kernel(ws.begin() + 2, ws.end());
  *out_shape = {n, m};
  out_shape->insert(out_shape->end(), out.begin(), out.end());
  std::vector<double> y(static_cast<size_t>(Count(*out_shape)));
  for (int64_t flat = 0; flat < Count(*out_shape); ++flat) {
    const Shape idx = Unravel(flat, *out_shape);
    const int64_t img = idx[0], oc = idx[1], g = oc / mg;
    double sum = b != nullptr ? (*b)[oc] : 0.0;
    for (int64_t cc = 0; cc < cg; ++cc) {
      for (int64_t k = 0; k < Count(kernel); ++k) {
        const Shape tap = Unravel(k, kernel);
        Shape pos = {img, g * cg + cc};
        bool inside = true;
        for (size_t d = 0; d < in.size(); ++d) {
          const int64_t i = idx[2 + d] * At(s.strides, d, 1) - pb[d] + tap[d] * At(s.dilations, d, 1);
          inside = inside && i >= 0 && i < in[d];
          pos.push_back(i);
        }
        if (!inside) continue;
        Shape widx = {oc, cc};
        widx.insert(widx.end(), tap.begin(), tap.end());
        sum += static_cast<double>(x[Ravel(pos, xs)]) * w[Ravel(widx, ws)];
      }
    }
    y[flat] = sum;
  }
  return y;
}

void ExpectConv(const Shape& xs, const Shape& ws, int64_t group, const WindowSpec& s, bool bias,
                bool kernel_shape_attr = true) {
  SCOPED_TRACE(absl::StrCat("Conv x ", Describe(xs), " w ", Describe(ws), " group ", group, " strides ",
                            Describe(s.strides), " dilations ", Describe(s.dilations), " pads ", Describe(s.pads),
                            " auto_pad '", s.auto_pad, "' bias ", bias));
  const std::vector<float> x = Pattern(Count(xs), 1), w = Pattern(Count(ws), 2), b = Pattern(ws[0], 3);
  Shape want_shape;
  const std::vector<double> want = RefConv(x, xs, w, ws, bias ? &b : nullptr, group, s, &want_shape);
  Tensor xt = MakeTensor<float>(DType::kF32, xs, x), wt = MakeTensor<float>(DType::kF32, ws, w);
  Tensor bt = MakeTensor<float>(DType::kF32, {ws[0]}, b);
  Attrs attrs = WindowAttrs(s);
  if (!kernel_shape_attr) attrs.erase(attrs.begin());
  if (group != 1) attrs.push_back({"group", group});
  auto out = bias ? RunOp("Conv", {&xt, &wt, &bt}, attrs) : RunOp("Conv", {&xt, &wt}, attrs);
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ((*out)[0].shape(), want_shape);
  ExpectNear(Values<float>((*out)[0]), want);
}

TEST(ConvTest, OnnxBasicExample) {
  // test_basic_conv_with_padding / without_padding.
  std::vector<float> x(25);
  for (int i = 0; i < 25; ++i) x[i] = static_cast<float>(i);
  Tensor xt = MakeTensor<float>(DType::kF32, {1, 1, 5, 5}, x);
  Tensor wt = MakeTensor<float>(DType::kF32, {1, 1, 3, 3}, std::vector<float>(9, 1.0f));
  auto padded = RunOp("Conv", {&xt, &wt}, {{"kernel_shape", Shape{3, 3}}, {"pads", Shape{1, 1, 1, 1}}});
  ASSERT_TRUE(padded.ok()) << padded.status();
  EXPECT_EQ(Values<float>((*padded)[0]),
            (std::vector<float>{12,  21, 27, 33,  24,  33,  54,  63, 72,  51,  63,  99, 108,
                                117, 81, 93, 144, 153, 162, 111, 72, 111, 117, 123, 84}));
  auto valid = RunOp("Conv", {&xt, &wt}, {{"kernel_shape", Shape{3, 3}}, {"pads", Shape{0, 0, 0, 0}}});
  ASSERT_TRUE(valid.ok()) << valid.status();
  EXPECT_EQ(Values<float>((*valid)[0]), (std::vector<float>{54, 63, 72, 99, 108, 117, 144, 153, 162}));
}

TEST(ConvTest, OneD) {
  ExpectConv({2, 3, 11}, {4, 3, 3}, 1, {{3}}, false);
  ExpectConv({2, 3, 11}, {4, 3, 3}, 1, {{3}}, true, false);
  ExpectConv({1, 2, 13}, {3, 2, 4}, 1, {{4}, {2}, {}, {1, 2}}, true);
  ExpectConv({1, 2, 13}, {3, 2, 3}, 1, {{3}, {3}, {2}, {2, 0}}, true);
  ExpectConv({1, 4, 9}, {6, 2, 2}, 2, {{2}, {1}, {3}, {}}, true);
}

TEST(ConvTest, TwoDStridesDilationsPads) {
  ExpectConv({1, 1, 7, 5}, {1, 1, 3, 3}, 1, {{3, 3}, {2, 2}, {}, {1, 0, 1, 0}}, false);  // asymmetric
  ExpectConv({1, 1, 7, 5}, {1, 1, 3, 3}, 1, {{3, 3}, {2, 2}, {}, {1, 1, 1, 1}}, false);
  ExpectConv({2, 3, 8, 9}, {5, 3, 3, 2}, 1, {{3, 2}, {1, 2}, {2, 1}, {0, 1, 2, 0}}, true);
  ExpectConv({1, 2, 10, 10}, {2, 2, 3, 3}, 1, {{3, 3}, {3, 3}, {2, 2}, {2, 2, 2, 2}}, true);
}

TEST(ConvTest, Groups) {
  ExpectConv({2, 4, 6, 6}, {6, 2, 3, 3}, 2, {{3, 3}, {}, {}, {1, 1, 1, 1}}, true);
  // Depthwise: one group per channel.
  ExpectConv({1, 3, 5, 7}, {3, 1, 3, 3}, 3, {{3, 3}, {2, 1}, {}, {1, 1, 1, 1}}, true);
  ExpectConv({1, 6, 5, 5}, {12, 2, 1, 1}, 3, {{1, 1}}, true);  // pointwise with groups
}

TEST(ConvTest, EveryAutoPad) {
  for (const char* mode : {"NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"}) {
    for (int64_t stride : {1, 2, 3}) {
      for (int64_t k : {1, 2, 3, 4}) {
        for (int64_t dil : {1, 2}) {
          WindowSpec s{{k, k}, {stride, stride}, {dil, dil}, {}, mode};
          ExpectConv({1, 2, 9, 8}, {3, 2, k, k}, 1, s, true);
        }
      }
    }
  }
  // test_conv_with_autopad_same: SAME_LOWER, stride 2 on 5x5.
  ExpectConv({1, 1, 5, 5}, {1, 1, 3, 3}, 1, {{3, 3}, {2, 2}, {}, {}, "SAME_LOWER"}, false);
}

TEST(ConvTest, PointwiseAndThreeD) {
  ExpectConv({2, 5, 4, 3}, {7, 5, 1, 1}, 1, {{1, 1}}, true);
  ExpectConv({1, 2, 5, 4, 6}, {3, 2, 3, 2, 3}, 1, {{3, 2, 3}, {1, 2, 1}, {1, 1, 2}, {1, 0, 1, 1, 1, 0}}, true);
  ExpectConv({1, 2, 4, 4, 4}, {2, 1, 2, 2, 2}, 2, {{2, 2, 2}, {}, {}, {}, "SAME_UPPER"}, false);
}

TEST(ConvTest, Float64) {
  const Shape xs = {1, 2, 5, 5}, ws = {3, 2, 3, 3};
  std::vector<double> x(Count(xs)), w(Count(ws));
  for (size_t i = 0; i < x.size(); ++i) x[i] = 0.25 * static_cast<double>(i % 7) - 0.5;
  for (size_t i = 0; i < w.size(); ++i) w[i] = 0.125 * static_cast<double>(i % 5) - 0.25;
  std::vector<float> xf(x.begin(), x.end()), wf(w.begin(), w.end());
  Shape want_shape;
  const std::vector<double> want =
      RefConv(xf, xs, wf, ws, nullptr, 1, {{3, 3}, {}, {}, {1, 1, 1, 1}}, &want_shape);
  Tensor xt = MakeTensor<double>(DType::kF64, xs, x), wt = MakeTensor<double>(DType::kF64, ws, w);
  auto out = RunOp("Conv", {&xt, &wt}, {{"pads", Shape{1, 1, 1, 1}}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].dtype(), DType::kF64);
  ExpectNear(Values<double>((*out)[0]), want, 1e-12, 1e-12);
}

TEST(ConvTest, Errors) {
  Tensor x = MakeTensor<float>(DType::kF32, {1, 4, 5, 5}, {});
  Tensor w = MakeTensor<float>(DType::kF32, {2, 4, 3, 3}, {});
  Tensor w_rank = MakeTensor<float>(DType::kF32, {2, 4, 3}, {});
  Tensor w_big = MakeTensor<float>(DType::kF32, {2, 4, 7, 7}, {});
  Tensor b_bad = MakeTensor<float>(DType::kF32, {3}, {});
  Tensor w64 = MakeTensor<double>(DType::kF64, {2, 4, 3, 3}, {});
  Tensor xi = MakeTensor<int32_t>(DType::kI32, {1, 4, 5, 5}, {});
  Tensor x2 = MakeTensor<float>(DType::kF32, {4, 5}, {});
  EXPECT_TRUE(ErrorContains(RunOp("Conv", {&x, &w}, {{"group", int64_t{2}}}).status(),
                            "input 0 (X) has 4 channels but input 1 (W) [2, 4, 3, 3] with group 2 takes 8"));
  EXPECT_TRUE(ErrorContains(RunOp("Conv", {&x, &w}, {{"group", int64_t{0}}}).status(), "attribute 'group'"));
  EXPECT_TRUE(
      ErrorContains(RunOp("Conv", {&x, &w_rank}).status(), "input 1 (W) has shape [2, 4, 3]; expected rank 4"));
  EXPECT_TRUE(ErrorContains(RunOp("Conv", {&x, &w}, {{"kernel_shape", Shape{3, 2}}}).status(),
                            "attribute 'kernel_shape' is [3, 2] but input 1 (W) has spatial dims [3, 3]"));
  EXPECT_TRUE(ErrorContains(RunOp("Conv", {&x, &w}, {{"auto_pad", std::string("SAME")}}).status(),
                            "attribute 'auto_pad' is 'SAME'"));
  EXPECT_TRUE(ErrorContains(
      RunOp("Conv", {&x, &w}, {{"auto_pad", std::string("VALID")}, {"pads", Shape{1, 1, 1, 1}}}).status(),
      "cannot be used with auto_pad"));
  EXPECT_TRUE(ErrorContains(RunOp("Conv", {&x, &w}, {{"strides", Shape{0, 1}}}).status(), "attribute 'strides'"));
  EXPECT_TRUE(ErrorContains(RunOp("Conv", {&x, &w}, {{"strides", Shape{1}}}).status(),
                            "attribute 'strides' has 1 values"));
  EXPECT_TRUE(ErrorContains(RunOp("Conv", {&x, &w}, {{"dilations", Shape{1, -1}}}).status(), "'dilations'"));
  EXPECT_TRUE(ErrorContains(RunOp("Conv", {&x, &w}, {{"pads", Shape{1, 1}}}).status(), "attribute 'pads' has 2"));
  EXPECT_TRUE(ErrorContains(RunOp("Conv", {&x, &w}, {{"pads", Shape{-1, 0, 0, 0}}}).status(), "attribute 'pads'"));
  EXPECT_TRUE(ErrorContains(RunOp("Conv", {&x, &w, &b_bad}).status(), "input 2 (B) has shape [3]; expected [2]"));
  EXPECT_TRUE(ErrorContains(RunOp("Conv", {&x, &w64}).status(), "must have the same dtype"));
  EXPECT_TRUE(ErrorContains(RunOp("Conv", {&xi, &w}).status(), "input 0 (X) has dtype i32"));
  Tensor x8 = MakeTensor<int8_t>(DType::kI8, {1, 4, 5, 5}, {});
  EXPECT_TRUE(ErrorContains(RunOp("Conv", {&x8, &w}).status(), "input 0 (X) has dtype i8"));
  EXPECT_TRUE(ErrorContains(RunOp("Conv", {&x2, &w}).status(), "expected rank >= 3"));
  EXPECT_TRUE(ErrorContains(RunOp("Conv", {&x, &w_big}).status(), "shorter than the window"));
  EXPECT_TRUE(ErrorContains(RunOp("Conv", {&x, &w}, {{"kernel_shape", Shape{1ll << 30, 3}}}).status(),
                            "expected values in 1.."));
}

TEST(ConvTest, SymbolicShapes) {
  const SymDim n = SymDim::Symbol(0), h = SymDim::Symbol(1), w = SymDim::Symbol(2);
  Tensor wt = MakeTensor<float>(DType::kF32, {8, 3, 3, 3}, {});
  const SymInput weight{DType::kF32, {8, 3, 3, 3}, &wt};
  auto same = InferSymbolic("Conv", {{DType::kF32, {n, 3, h, w}}, weight}, {{"pads", Shape{1, 1, 1, 1}}});
  ASSERT_TRUE(same.ok()) << same.status();
  EXPECT_EQ(same->shape, (SymShape{n, 8, h, w}));
  auto upper =
      InferSymbolic("Conv", {{DType::kF32, {n, 3, h, w}}, weight}, {{"auto_pad", std::string("SAME_UPPER")}});
  ASSERT_TRUE(upper.ok()) << upper.status();
  EXPECT_EQ(upper->shape, (SymShape{n, 8, h, w}));
  auto valid = InferSymbolic("Conv", {{DType::kF32, {n, 3, h, w}}, weight});
  ASSERT_TRUE(valid.ok()) << valid.status();
  EXPECT_EQ(valid->shape, (SymShape{n, 8, h - SymDim(2), w - SymDim(2)}));
  auto strided = InferSymbolic("Conv", {{DType::kF32, {n, 3, h, SymDim(2) * w}}, weight},
                               {{"strides", Shape{2, 2}}, {"pads", Shape{1, 1, 1, 1}}});
  ASSERT_TRUE(strided.ok()) << strided.status();
  EXPECT_TRUE(strided->shape[2].is_unknown());  // (h - 1) / 2 + 1
  EXPECT_TRUE(strided->shape[3].is_unknown());  // (2w - 1) / 2 + 1 is not exact either
  auto exact = InferSymbolic("Conv", {{DType::kF32, {n, 3, h, SymDim(2) * w}}, weight},
                             {{"strides", Shape{1, 2}}, {"pads", Shape{1, 1, 1, 2}}});
  ASSERT_TRUE(exact.ok()) << exact.status();
  EXPECT_EQ(exact->shape[2], h);
  EXPECT_EQ(exact->shape[3], w + SymDim(1));  // (2w + 3 - 3) / 2 + 1
  // A weight with a symbolic spatial dim and no kernel_shape gives unknown dims.
  auto unknown_k = InferSymbolic("Conv", {{DType::kF32, {n, 3, h, w}}, {DType::kF32, {8, 3, h, 3}}});
  ASSERT_TRUE(unknown_k.ok()) << unknown_k.status();
  EXPECT_TRUE(unknown_k->shape[2].is_unknown());
  EXPECT_EQ(unknown_k->shape[3], w - SymDim(2));
  // Channels checked when constant only.
  auto sym_c = InferSymbolic("Conv", {{DType::kF32, {n, h, 5, 5}}, weight});
  ASSERT_TRUE(sym_c.ok()) << sym_c.status();
}

TEST(ConvTest, KernelChecksPlannedShape) {
  Tensor x = MakeTensor<float>(DType::kF32, {1, 1, 5, 5}, {});
  Tensor w = MakeTensor<float>(DType::kF32, {1, 1, 3, 3}, {});
  auto out = RunKernelPlanned("Conv", {&x, &w}, DType::kF32, {1, 1, 5, 5});
  EXPECT_TRUE(ErrorContains(out.status(),
                            "output 0 was allocated as f32 [1, 1, 5, 5] but the kernel writes f32 [1, 1, 3, 3]"));
  Tensor x3 = MakeTensor<float>(DType::kF32, {1, 2, 5, 5}, {});
  EXPECT_TRUE(
      ErrorContains(RunKernelPlanned("Conv", {&x3, &w}, DType::kF32, {1, 1, 3, 3}).status(), "do not fit group"));
}

// ---------------------------------------------------------------------------
// ConvTranspose
// ---------------------------------------------------------------------------

struct TransposeSpec {
  WindowSpec window;
  Shape output_padding;
  Shape output_shape;
};

std::vector<double> RefConvTranspose(const std::vector<float>& x, const Shape& xs, const std::vector<float>& w,
                                     const Shape& ws, const std::vector<float>* b, int64_t group,
                                     const TransposeSpec& t, Shape* out_shape) {
  const WindowSpec& s = t.window;
  const size_t sp = xs.size() - 2;
  const Shape kernel(ws.begin() + 2, ws.end());
  Shape out(sp), pb(sp);
  for (size_t d = 0; d < sp; ++d) {
    const int64_t st = At(s.strides, d, 1), ek = (kernel[d] - 1) * At(s.dilations, d, 1) + 1;
    const int64_t op = At(t.output_padding, d, 0);
    const bool same = s.auto_pad == "SAME_UPPER" || s.auto_pad == "SAME_LOWER";
    if (!t.output_shape.empty() || same) {
      out[d] = !t.output_shape.empty() ? t.output_shape[d] : xs[2 + d] * st;
      const int64_t total = std::max<int64_t>(0, st * (xs[2 + d] - 1) + op + ek - out[d]);
      pb[d] = s.auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
    } else {
      pb[d] = At(s.pads, d, 0);
      out[d] = st * (xs[2 + d] - 1) + op + ek - pb[d] - At(s.pads, sp + d, 0);
    }
  }
  const int64_t n = xs[0], c = xs[1], cg = c / group, mg = ws[1], m = mg * group;
  *out_shape = {n, m};
  out_shape->insert(out_shape->end(), out.begin(), out.end());
  std::vector<double> y(static_cast<size_t>(Count(*out_shape)), 0.0);
  if (b != nullptr) {
    for (int64_t i = 0; i < Count(*out_shape); ++i) y[i] = (*b)[Unravel(i, *out_shape)[1]];
  }
  for (int64_t flat = 0; flat < Count(xs); ++flat) {
    const Shape idx = Unravel(flat, xs);
    const int64_t g = idx[1] / cg;
    for (int64_t mm = 0; mm < mg; ++mm) {
      for (int64_t k = 0; k < Count(kernel); ++k) {
        const Shape tap = Unravel(k, kernel);
        Shape pos = {idx[0], g * mg + mm};
        bool inside = true;
        for (size_t d = 0; d < sp; ++d) {
          const int64_t o = idx[2 + d] * At(s.strides, d, 1) - pb[d] + tap[d] * At(s.dilations, d, 1);
          inside = inside && o >= 0 && o < out[d];
          pos.push_back(o);
        }
        if (!inside) continue;
        Shape widx = {idx[1], mm};
        widx.insert(widx.end(), tap.begin(), tap.end());
        y[Ravel(pos, *out_shape)] += static_cast<double>(x[flat]) * w[Ravel(widx, ws)];
      }
    }
  }
  return y;
}

void ExpectConvTranspose(const Shape& xs, const Shape& ws, int64_t group, const TransposeSpec& t, bool bias) {
  SCOPED_TRACE(absl::StrCat("ConvTranspose x ", Describe(xs), " w ", Describe(ws), " group ", group, " strides ",
                            Describe(t.window.strides), " dilations ", Describe(t.window.dilations), " pads ",
                            Describe(t.window.pads), " auto_pad '", t.window.auto_pad, "' output_padding ",
                            Describe(t.output_padding), " output_shape ", Describe(t.output_shape)));
  const std::vector<float> x = Pattern(Count(xs), 4), w = Pattern(Count(ws), 5), b = Pattern(ws[1] * group, 6);
  Shape want_shape;
  const std::vector<double> want = RefConvTranspose(x, xs, w, ws, bias ? &b : nullptr, group, t, &want_shape);
  Tensor xt = MakeTensor<float>(DType::kF32, xs, x), wt = MakeTensor<float>(DType::kF32, ws, w);
  Tensor bt = MakeTensor<float>(DType::kF32, {ws[1] * group}, b);
  Attrs attrs = WindowAttrs(t.window);
  attrs.erase(attrs.begin());  // kernel_shape comes from W
  if (group != 1) attrs.push_back({"group", group});
  if (!t.output_padding.empty()) attrs.push_back({"output_padding", t.output_padding});
  if (!t.output_shape.empty()) attrs.push_back({"output_shape", t.output_shape});
  auto out = bias ? RunOp("ConvTranspose", {&xt, &wt, &bt}, attrs) : RunOp("ConvTranspose", {&xt, &wt}, attrs);
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ((*out)[0].shape(), want_shape);
  ExpectNear(Values<float>((*out)[0]), want);
}

// f16 and bf16 compute in f32 and round Y once: within an ulp of the dtype
// of the double reference (on the same, rounded, inputs) rounded to it.
TEST(ConvTest, HalfTypesRoundOnce) {
  const Shape xs = {2, 4, 7, 6}, ws = {6, 2, 3, 3}, tws = {4, 3, 2, 2};
  const WindowSpec window = {{3, 3}, {2, 1}, {}, {1, 1, 0, 1}};
  const TransposeSpec transposed = {{{2, 2}, {2, 2}, {}, {}}};
  for (DType dtype : {DType::kF16, DType::kBF16}) {
    SCOPED_TRACE(DTypeName(dtype));
    auto rounded = [&](const Shape& shape, int seed) {
      const Tensor t = MakeTensor<float>(DType::kF32, shape, Pattern(Count(shape), seed));
      return Values<float>(Tensor::CastOf(Tensor::CastOf(t.view(), dtype).value().view(), DType::kF32).value());
    };
    auto narrow = [&](const Shape& shape, const std::vector<float>& v) {
      return Tensor::CastOf(MakeTensor<float>(DType::kF32, shape, v).view(), dtype).value();
    };
    const std::vector<float> x = rounded(xs, 1), w = rounded(ws, 2), b = rounded({6}, 3), tw = rounded(tws, 4);
    const Tensor xt = narrow(xs, x), wt = narrow(ws, w), bt = narrow({6}, b), twt = narrow(tws, tw);
    const double ulp = dtype == DType::kF16 ? 1.0 / 1024 : 1.0 / 128;
    for (bool transpose : {false, true}) {
      SCOPED_TRACE(transpose ? "ConvTranspose" : "Conv");
      Shape want_shape;
      const std::vector<double> want =
          transpose ? RefConvTranspose(x, xs, tw, tws, &b, 2, transposed, &want_shape)
                    : RefConv(x, xs, w, ws, &b, 2, window, &want_shape);
      const Tensor want_t = Tensor::CastOf(MakeTensor<double>(DType::kF64, want_shape, want).view(), dtype).value();
      const std::vector<float> rounded_want = Values<float>(Tensor::CastOf(want_t.view(), DType::kF32).value());
      auto out = transpose ? RunOp("ConvTranspose", {&xt, &twt, &bt},
                                   {{"group", int64_t{2}}, {"strides", Shape{2, 2}}})
                           : RunOp("Conv", {&xt, &wt, &bt}, {{"group", int64_t{2}}, {"strides", Shape{2, 1}},
                                                              {"pads", Shape{1, 1, 0, 1}}});
      ASSERT_TRUE(out.ok()) << out.status();
      ASSERT_EQ((*out)[0].dtype(), dtype);
      ASSERT_EQ((*out)[0].shape(), want_shape);
      const std::vector<float> got = Values<float>(Tensor::CastOf((*out)[0].view(), DType::kF32).value());
      for (size_t i = 0; i < got.size(); ++i) {
        EXPECT_NEAR(got[i], rounded_want[i], ulp * std::abs(rounded_want[i]) + 1e-6) << "at " << i;
      }
    }
  }
}

TEST(ConvTransposeTest, OnnxExample) {
  std::vector<float> x(9);
  for (int i = 0; i < 9; ++i) x[i] = static_cast<float>(i);
  Tensor xt = MakeTensor<float>(DType::kF32, {1, 1, 3, 3}, x);
  Tensor wt = MakeTensor<float>(DType::kF32, {1, 2, 3, 3}, std::vector<float>(18, 1.0f));
  auto out = RunOp("ConvTranspose", {&xt, &wt});
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ((*out)[0].shape(), (Shape{1, 2, 5, 5}));
  const std::vector<float> plane = {0,  1,  3, 3,  2,  3,  8,  15, 12, 7,  9,  21, 36,
                                    27, 15, 9, 20, 33, 24, 13, 6,  13, 21, 15, 8};
  std::vector<float> want = plane;
  want.insert(want.end(), plane.begin(), plane.end());
  EXPECT_EQ(Values<float>((*out)[0]), want);
}

TEST(ConvTransposeTest, OneTwoThreeD) {
  ExpectConvTranspose({1, 1, 3}, {1, 2, 3}, 1, {}, false);
  ExpectConvTranspose({2, 3, 5}, {3, 2, 4}, 1, {{{}, {3}, {2}, {1, 2}}}, true);
  ExpectConvTranspose({1, 1, 3, 3}, {1, 2, 3, 3}, 1, {{{}, {3, 2}, {}, {1, 2, 1, 2}}},
                      false);                                                     // test_convtranspose_pads
  ExpectConvTranspose({1, 1, 3, 3}, {1, 1, 2, 2}, 1, {{{}, {}, {2, 2}}}, false);  // dilations
  ExpectConvTranspose({1, 1, 3, 4, 5}, {1, 2, 3, 3, 3}, 1, {}, true);
  ExpectConvTranspose({2, 2, 3, 2, 3}, {2, 1, 2, 3, 2}, 2, {{{}, {2, 1, 2}, {1, 2, 1}, {0, 1, 1, 1, 0, 0}}}, true);
}

TEST(ConvTransposeTest, OutputPaddingAndShape) {
  ExpectConvTranspose({1, 1, 3, 3}, {1, 2, 3, 3}, 1, {{{}, {3, 2}}, {1, 1}, {}}, false);      // _pad
  ExpectConvTranspose({1, 1, 3, 3}, {1, 2, 3, 3}, 1, {{{}, {3, 2}}, {}, {10, 8}}, false);     // _output_shape
  ExpectConvTranspose({1, 1, 3, 3}, {1, 2, 3, 3}, 1, {{{}, {3, 2}}, {1, 1}, {10, 8}}, true);  // _kernel_shape
  ExpectConvTranspose({1, 2, 4, 3}, {2, 3, 3, 3}, 1, {{{}, {2, 2}}, {}, {6, 5}}, true);       // pads derived
  ExpectConvTranspose({1, 2, 4, 3}, {2, 3, 3, 3}, 1, {{{}, {2, 2}, {}, {}, "SAME_UPPER"}, {}, {7, 6}}, false);
  // Full [N, C, spatial] output_shape as some exporters write it.
  Tensor x = MakeTensor<float>(DType::kF32, {1, 1, 3, 3}, Pattern(9, 1));
  Tensor w = MakeTensor<float>(DType::kF32, {1, 2, 3, 3}, Pattern(18, 2));
  auto full = RunOp("ConvTranspose", {&x, &w}, {{"strides", Shape{3, 2}}, {"output_shape", Shape{1, 2, 10, 8}}});
  ASSERT_TRUE(full.ok()) << full.status();
  EXPECT_EQ((*full)[0].shape(), (Shape{1, 2, 10, 8}));
}

TEST(ConvTransposeTest, AutoPadAndGroups) {
  for (const char* mode : {"SAME_UPPER", "SAME_LOWER", "VALID", "NOTSET"}) {
    for (int64_t stride : {1, 2, 3}) {
      for (int64_t k : {1, 2, 3}) {
        ExpectConvTranspose({1, 2, 3, 4}, {2, 2, k, k}, 1, {{{}, {stride, stride}, {}, {}, mode}}, true);
      }
    }
  }
  ExpectConvTranspose({2, 4, 3, 3}, {4, 3, 2, 2}, 2, {{{}, {2, 2}}}, true);
  ExpectConvTranspose({1, 3, 4, 4}, {3, 1, 3, 3}, 3, {{{}, {2, 2}, {}, {1, 1, 1, 1}}, {1, 1}, {}}, true);
}

TEST(ConvTransposeTest, Errors) {
  Tensor x = MakeTensor<float>(DType::kF32, {1, 2, 3, 3}, {});
  Tensor w = MakeTensor<float>(DType::kF32, {2, 1, 3, 3}, {});
  Tensor w_bad = MakeTensor<float>(DType::kF32, {3, 1, 3, 3}, {});
  Tensor b_bad = MakeTensor<float>(DType::kF32, {2, 1}, {});
  EXPECT_TRUE(ErrorContains(RunOp("ConvTranspose", {&x, &w_bad}).status(),
                            "input 0 (X) has 2 channels but input 1 (W) [3, 1, 3, 3] takes 3"));
  EXPECT_TRUE(ErrorContains(RunOp("ConvTranspose", {&x, &w, &b_bad}).status(),
                            "input 2 (B) has shape [2, 1]; expected [1]"));
  EXPECT_TRUE(ErrorContains(RunOp("ConvTranspose", {&x, &w}, {{"output_padding", Shape{1, 1}}}).status(),
                            "must be less than its stride"));
  EXPECT_TRUE(ErrorContains(RunOp("ConvTranspose", {&x, &w}, {{"output_shape", Shape{5, 5, 5}}}).status(),
                            "attribute 'output_shape' has 3 values"));
  EXPECT_TRUE(ErrorContains(RunOp("ConvTranspose", {&x, &w}, {{"output_shape", Shape{0, 5}}}).status(),
                            "expected positive dims"));
  EXPECT_TRUE(ErrorContains(RunOp("ConvTranspose", {&x, &w}, {{"pads", Shape{3, 3, 3, 3}}}).status(),
                            "negative output length"));
  EXPECT_TRUE(ErrorContains(RunOp("ConvTranspose", {&x, &w}, {{"group", int64_t{4}}}).status(), "not a multiple"));
}

TEST(ConvTransposeTest, SymbolicShapes) {
  const SymDim n = SymDim::Symbol(0), h = SymDim::Symbol(1);
  auto out = InferSymbolic("ConvTranspose", {{DType::kF32, {n, 2, h, 4}}, {DType::kF32, {2, 3, 3, 3}}},
                           {{"strides", Shape{2, 2}}, {"group", int64_t{2}}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->shape, (SymShape{n, 6, SymDim(2) * h + SymDim(1), 9}));
  auto same = InferSymbolic("ConvTranspose", {{DType::kF32, {n, 2, h, 4}}, {DType::kF32, {2, 3, 3, 3}}},
                            {{"strides", Shape{2, 2}}, {"auto_pad", std::string("SAME_LOWER")}});
  ASSERT_TRUE(same.ok()) << same.status();
  EXPECT_EQ(same->shape, (SymShape{n, 3, SymDim(2) * h, 8}));
}

// ---------------------------------------------------------------------------
// Pooling
// ---------------------------------------------------------------------------

struct PoolResult {
  Shape shape;
  std::vector<double> values;
  std::vector<int64_t> indices;
};

PoolResult RefPool(const std::vector<float>& x, const Shape& xs, const WindowSpec& s, bool max,
                   bool count_include_pad, bool column_major) {
  const Shape in(xs.begin() + 2, xs.end());
  Shape out, pb, pe;
  ForwardWindow(s, in, &out, &pb, &pe);
  PoolResult r;
  r.shape = {xs[0], xs[1]};
  r.shape.insert(r.shape.end(), out.begin(), out.end());
  const int64_t in_size = Count(in);
  for (int64_t flat = 0; flat < Count(r.shape); ++flat) {
    const Shape idx = Unravel(flat, r.shape);
    const int64_t plane = idx[0] * xs[1] + idx[1];
    double best = -std::numeric_limits<double>::infinity(), sum = 0;
    int64_t best_index = -1, valid = 0, padded = 0;
    for (int64_t k = 0; k < Count(s.kernel); ++k) {
      const Shape tap = Unravel(k, s.kernel);
      Shape pos;
      bool inside = true, in_padded = true;
      for (size_t d = 0; d < in.size(); ++d) {
        const int64_t p = idx[2 + d] * At(s.strides, d, 1) - pb[d] + tap[d] * At(s.dilations, d, 1);
        inside = inside && p >= 0 && p < in[d];
        in_padded = in_padded && p >= -pb[d] && p < in[d] + pe[d];
        pos.push_back(p);
      }
      padded += in_padded;
      if (!inside) continue;
      ++valid;
      const double v = x[plane * in_size + Ravel(pos, in)];
      sum += v;
      if (v > best) {
        best = v;
        int64_t spatial = 0;
        if (column_major) {
          for (int d = static_cast<int>(in.size()) - 1; d >= 0; --d) spatial = spatial * in[d] + pos[d];
        } else {
          spatial = Ravel(pos, in);
        }
        best_index = plane * in_size + spatial;
      }
    }
    r.values.push_back(max ? best : sum / static_cast<double>(count_include_pad ? padded : valid));
    r.indices.push_back(best_index);
  }
  return r;
}

void ExpectPool(const std::string& op, const Shape& xs, const WindowSpec& s, bool count_include_pad = false,
                int64_t storage_order = -1) {
  SCOPED_TRACE(absl::StrCat(op, " x ", Describe(xs), " kernel ", Describe(s.kernel), " strides ",
                            Describe(s.strides), " dilations ", Describe(s.dilations), " pads ", Describe(s.pads),
                            " auto_pad '", s.auto_pad, "' ceil ", s.ceil_mode, " count_include_pad ",
                            count_include_pad, " storage_order ", storage_order));
  const bool max = op == "MaxPool";
  const std::vector<float> x = Pattern(Count(xs), 7);
  const PoolResult want = RefPool(x, xs, s, max, count_include_pad, storage_order == 1);
  Tensor xt = MakeTensor<float>(DType::kF32, xs, x);
  Attrs attrs = WindowAttrs(s);
  if (count_include_pad) attrs.push_back({"count_include_pad", int64_t{1}});
  if (storage_order >= 0) attrs.push_back({"storage_order", storage_order});
  auto out = RunOp(op, {&xt}, attrs, storage_order >= 0 ? 2 : 1);
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ((*out)[0].shape(), want.shape);
  ExpectNear(Values<float>((*out)[0]), want.values, 1e-6, 1e-6);
  if (storage_order >= 0) {
    ASSERT_EQ((*out)[1].dtype(), DType::kI64);
    EXPECT_EQ(Values<int64_t>((*out)[1]), want.indices);
  }
}

TEST(PoolTest, OnnxCeilExamples) {
  std::vector<float> x(16);
  for (int i = 0; i < 16; ++i) x[i] = static_cast<float>(i + 1);
  Tensor xt = MakeTensor<float>(DType::kF32, {1, 1, 4, 4}, x);
  const Attrs attrs = {{"kernel_shape", Shape{3, 3}}, {"strides", Shape{2, 2}}, {"ceil_mode", int64_t{1}}};
  auto mx = RunOp("MaxPool", {&xt}, attrs);
  ASSERT_TRUE(mx.ok()) << mx.status();
  EXPECT_EQ(Values<float>((*mx)[0]), (std::vector<float>{11, 12, 15, 16}));
  auto avg = RunOp("AveragePool", {&xt}, attrs);
  ASSERT_TRUE(avg.ok()) << avg.status();
  EXPECT_EQ(Values<float>((*avg)[0]), (std::vector<float>{6, 7.5, 12, 13.5}));
}

TEST(PoolTest, MaxPoolShapesAndModes) {
  ExpectPool("MaxPool", {1, 3, 32}, {{2}});
  ExpectPool("MaxPool", {1, 3, 12, 12}, {{2, 2}});
  ExpectPool("MaxPool", {2, 2, 9, 9}, {{3, 3}, {}, {}, {2, 2, 2, 2}});
  ExpectPool("MaxPool", {1, 1, 5, 5}, {{5, 5}, {}, {}, {2, 2, 2, 2}});
  ExpectPool("MaxPool", {1, 3, 13, 12}, {{5, 5}, {3, 3}});
  ExpectPool("MaxPool", {1, 1, 4, 4}, {{2, 2}, {1, 1}, {2, 2}});
  ExpectPool("MaxPool", {1, 2, 7, 8}, {{3, 2}, {2, 3}, {2, 1}, {1, 0, 2, 1}});
  ExpectPool("MaxPool", {1, 2, 6, 5, 7}, {{2, 2, 3}, {1, 2, 2}});
  for (const char* mode : {"SAME_UPPER", "SAME_LOWER", "VALID"}) {
    for (int64_t stride : {1, 2, 3}) {
      ExpectPool("MaxPool", {1, 2, 8, 7}, {{3, 2}, {stride, stride}, {}, {}, mode});
    }
  }
}

TEST(PoolTest, CeilMode) {
  for (int64_t in : {4, 5, 6, 7}) {
    for (int64_t stride : {2, 3}) {
      for (int64_t pad : {0, 1}) {
        const WindowSpec s{{2, 3}, {stride, stride}, {}, {pad, 0, pad, pad}, "", true};
        ExpectPool("MaxPool", {1, 1, in, in + 1}, s);
        ExpectPool("AveragePool", {1, 1, in, in + 1}, s);
        ExpectPool("AveragePool", {1, 1, in, in + 1}, s, true);
      }
    }
  }
  // The last window would start in the end padding: it is dropped.
  Tensor x = MakeTensor<float>(DType::kF32, {1, 1, 5}, Pattern(5, 1));
  auto out =
      RunOp("MaxPool", {&x},
            {{"kernel_shape", Shape{2}}, {"strides", Shape{2}}, {"pads", Shape{1, 1}}, {"ceil_mode", int64_t{1}}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].shape(), (Shape{1, 1, 3}));
}

TEST(PoolTest, MaxPoolIndices) {
  ExpectPool("MaxPool", {1, 1, 5, 5}, {{5, 5}, {}, {}, {2, 2, 2, 2}}, false, 0);
  ExpectPool("MaxPool", {1, 1, 5, 5}, {{2, 2}, {2, 2}}, false, 1);
  ExpectPool("MaxPool", {2, 3, 6, 7}, {{3, 2}, {2, 1}, {}, {1, 0, 1, 1}}, false, 0);
  ExpectPool("MaxPool", {2, 3, 6, 7}, {{3, 2}, {2, 1}, {}, {1, 0, 1, 1}}, false, 1);
  ExpectPool("MaxPool", {1, 2, 4, 3, 5}, {{2, 2, 2}, {1, 1, 2}}, false, 1);
  // test_maxpool_with_argmax_2d_precomputed_strides.
  std::vector<float> x(25);
  for (int i = 0; i < 25; ++i) x[i] = static_cast<float>(i + 1);
  Tensor xt = MakeTensor<float>(DType::kF32, {1, 1, 5, 5}, x);
  auto out = RunOp("MaxPool", {&xt},
                   {{"kernel_shape", Shape{2, 2}}, {"strides", Shape{2, 2}}, {"storage_order", int64_t{1}}}, 2);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Values<float>((*out)[0]), (std::vector<float>{7, 9, 17, 19}));
  EXPECT_EQ(Values<int64_t>((*out)[1]), (std::vector<int64_t>{6, 16, 8, 18}));
}

TEST(PoolTest, MaxPoolIntegerAndHalf) {
  std::vector<uint8_t> x(25);
  for (int i = 0; i < 25; ++i) x[i] = static_cast<uint8_t>(i + 1);
  Tensor xt = MakeTensor<uint8_t>(DType::kU8, {1, 1, 5, 5}, x);
  auto out = RunOp("MaxPool", {&xt}, {{"kernel_shape", Shape{5, 5}}, {"pads", Shape{2, 2, 2, 2}}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Values<uint8_t>((*out)[0]), (std::vector<uint8_t>{13, 14, 15, 15, 15, 18, 19, 20, 20, 20, 23, 24, 25,
                                                              25, 25, 23, 24, 25, 25, 25, 23, 24, 25, 25, 25}));
  Tensor xi = MakeTensor<int8_t>(DType::kI8, {1, 1, 4}, {-5, -7, -1, -9});
  auto outi = RunOp("MaxPool", {&xi}, {{"kernel_shape", Shape{2}}});
  ASSERT_TRUE(outi.ok()) << outi.status();
  EXPECT_EQ(Values<int8_t>((*outi)[0]), (std::vector<int8_t>{-5, -1, -1}));
  // f16 1.0, 2.0, -1.0, 0.5 -> max of pairs.
  Tensor xh = MakeTensor<uint16_t>(DType::kF16, {1, 1, 4}, {0x3c00, 0x4000, 0xbc00, 0x3800});
  auto outh = RunOp("MaxPool", {&xh}, {{"kernel_shape", Shape{2}}, {"strides", Shape{2}}});
  ASSERT_TRUE(outh.ok()) << outh.status();
  EXPECT_EQ(Values<uint16_t>((*outh)[0]), (std::vector<uint16_t>{0x4000, 0x3800}));
}

TEST(PoolTest, AveragePoolPadsAndModes) {
  ExpectPool("AveragePool", {1, 3, 32}, {{2}});
  ExpectPool("AveragePool", {1, 3, 12, 12}, {{2, 2}});
  ExpectPool("AveragePool", {1, 3, 10, 10}, {{3, 3}, {}, {}, {2, 2, 2, 2}});
  ExpectPool("AveragePool", {1, 3, 10, 10}, {{3, 3}, {}, {}, {2, 2, 2, 2}}, true);
  ExpectPool("AveragePool", {1, 1, 5, 5}, {{5, 5}, {}, {}, {2, 2, 2, 2}}, true);
  ExpectPool("AveragePool", {1, 3, 13, 12}, {{5, 5}, {3, 3}});
  ExpectPool("AveragePool", {1, 2, 5, 6, 7}, {{2, 3, 2}, {2, 1, 3}, {}, {1, 1, 0, 0, 2, 1}}, true);
  ExpectPool("AveragePool", {1, 1, 6, 6}, {{2, 2}, {1, 1}, {2, 2}, {1, 1, 1, 1}});
  for (const char* mode : {"SAME_UPPER", "SAME_LOWER", "VALID"}) {
    for (int64_t stride : {1, 2}) {
      for (bool include : {false, true}) {
        ExpectPool("AveragePool", {1, 2, 7, 6}, {{3, 2}, {stride, stride}, {}, {}, mode}, include);
      }
    }
  }
}

TEST(PoolTest, Errors) {
  Tensor x = MakeTensor<float>(DType::kF32, {1, 1, 4, 4}, {});
  Tensor x2 = MakeTensor<float>(DType::kF32, {4, 4}, {});
  Tensor xi = MakeTensor<int32_t>(DType::kI32, {1, 1, 4, 4}, {});
  Tensor xu = MakeTensor<uint8_t>(DType::kU8, {1, 1, 4, 4}, {});
  const Attrs k2 = {{"kernel_shape", Shape{2, 2}}};
  EXPECT_TRUE(ErrorContains(RunOp("MaxPool", {&x}).status(), "attribute 'kernel_shape' is required"));
  EXPECT_TRUE(ErrorContains(RunOp("MaxPool", {&x}, {{"kernel_shape", Shape{2}}}).status(),
                            "attribute 'kernel_shape' has 1 values"));
  EXPECT_TRUE(ErrorContains(RunOp("MaxPool", {&x}, {{"kernel_shape", Shape{0, 2}}}).status(), "'kernel_shape'"));
  EXPECT_TRUE(
      ErrorContains(RunOp("MaxPool", {&x}, {{"kernel_shape", Shape{5, 5}}}).status(), "shorter than the window"));
  Attrs a = k2;
  a.push_back({"ceil_mode", int64_t{2}});
  EXPECT_TRUE(ErrorContains(RunOp("AveragePool", {&x}, a).status(), "attribute 'ceil_mode' is 2"));
  a = k2;
  a.push_back({"storage_order", int64_t{3}});
  EXPECT_TRUE(ErrorContains(RunOp("MaxPool", {&x}, a).status(), "attribute 'storage_order' is 3"));
  a = k2;
  a.push_back({"count_include_pad", int64_t{-1}});
  EXPECT_TRUE(ErrorContains(RunOp("AveragePool", {&x}, a).status(), "attribute 'count_include_pad' is -1"));
  EXPECT_TRUE(ErrorContains(RunOp("MaxPool", {&x2}, k2).status(), "expected rank >= 3"));
  EXPECT_TRUE(ErrorContains(RunOp("MaxPool", {&xi}, k2).status(), "input 0 (X) has dtype i32"));
  EXPECT_TRUE(ErrorContains(RunOp("AveragePool", {&xu}, k2).status(), "input 0 (X) has dtype u8"));
  EXPECT_TRUE(ErrorContains(RunOp("GlobalAveragePool", {&x2}).status(), "expected rank >= 3"));
  EXPECT_TRUE(ErrorContains(RunKernelPlanned("MaxPool", {&x}, DType::kF32, {1, 1, 2, 2}, k2).status(),
                            "output 0 was allocated as f32 [1, 1, 2, 2] but the kernel writes f32 [1, 1, 3, 3]"));
}

TEST(PoolTest, SymbolicShapes) {
  const SymDim n = SymDim::Symbol(0), h = SymDim::Symbol(1), w = SymDim::Symbol(2);
  auto same = InferSymbolic("MaxPool", {{DType::kF32, {n, 3, h, w}}},
                            {{"kernel_shape", Shape{3, 3}}, {"pads", Shape{1, 1, 1, 1}}});
  ASSERT_TRUE(same.ok()) << same.status();
  EXPECT_EQ(same->shape, (SymShape{n, 3, h, w}));
  auto upper = InferSymbolic("AveragePool", {{DType::kF32, {n, 3, h, w}}},
                             {{"kernel_shape", Shape{2, 2}}, {"auto_pad", std::string("SAME_UPPER")}});
  ASSERT_TRUE(upper.ok()) << upper.status();
  EXPECT_EQ(upper->shape, (SymShape{n, 3, h, w}));
  auto halved = InferSymbolic("MaxPool", {{DType::kF32, {n, 3, SymDim(2) * h, w}}},
                              {{"kernel_shape", Shape{2, 2}}, {"strides", Shape{2, 2}}});
  ASSERT_TRUE(halved.ok()) << halved.status();
  EXPECT_EQ(halved->shape[2], h);  // (2h - 2) / 2 + 1
  EXPECT_TRUE(halved->shape[3].is_unknown());
  auto ceil = InferSymbolic("MaxPool", {{DType::kF32, {n, 3, SymDim(2) * h, w}}},
                            {{"kernel_shape", Shape{3, 3}}, {"strides", Shape{2, 1}}, {"ceil_mode", int64_t{1}}});
  ASSERT_TRUE(ceil.ok()) << ceil.status();
  EXPECT_EQ(ceil->shape[2], h);  // ceil((2h - 3) / 2) + 1, exact
  EXPECT_EQ(ceil->shape[3], w - SymDim(2));
  auto ceil_odd =
      InferSymbolic("MaxPool", {{DType::kF32, {n, 3, h, w}}},
                    {{"kernel_shape", Shape{3, 3}}, {"strides", Shape{2, 2}}, {"ceil_mode", int64_t{1}}});
  ASSERT_TRUE(ceil_odd.ok()) << ceil_odd.status();
  EXPECT_TRUE(ceil_odd->shape[2].is_unknown());
  auto global = InferSymbolic("GlobalMaxPool", {{DType::kF32, {n, 3, h, w}}});
  ASSERT_TRUE(global.ok()) << global.status();
  EXPECT_EQ(global->shape, (SymShape{n, 3, 1, 1}));
}

TEST(PoolTest, GlobalPools) {
  for (const Shape& xs : {Shape{1, 3, 5, 5}, Shape{2, 2, 7}, Shape{1, 2, 3, 4, 2}}) {
    SCOPED_TRACE(Describe(xs));
    const std::vector<float> x = Pattern(Count(xs), 3);
    Tensor xt = MakeTensor<float>(DType::kF32, xs, x);
    const int64_t planes = xs[0] * xs[1], size = Count(xs) / planes;
    std::vector<double> want_avg, want_max;
    for (int64_t p = 0; p < planes; ++p) {
      double sum = 0, best = -1e30;
      for (int64_t i = 0; i < size; ++i) {
        sum += x[p * size + i];
        best = std::max<double>(best, x[p * size + i]);
      }
      want_avg.push_back(sum / static_cast<double>(size));
      want_max.push_back(best);
    }
    Shape want_shape = xs;
    for (size_t d = 2; d < want_shape.size(); ++d) want_shape[d] = 1;
    auto avg = RunOp("GlobalAveragePool", {&xt});
    ASSERT_TRUE(avg.ok()) << avg.status();
    EXPECT_EQ((*avg)[0].shape(), want_shape);
    ExpectNear(Values<float>((*avg)[0]), want_avg);
    auto mx = RunOp("GlobalMaxPool", {&xt});
    ASSERT_TRUE(mx.ok()) << mx.status();
    EXPECT_EQ((*mx)[0].shape(), want_shape);
    ExpectNear(Values<float>((*mx)[0]), want_max);
  }
}

// ---------------------------------------------------------------------------
// LRN
// ---------------------------------------------------------------------------

std::vector<double> RefLrn(const std::vector<float>& x, const Shape& xs, int64_t size, double alpha, double beta,
                           double bias) {
  std::vector<double> y(x.size());
  for (int64_t i = 0; i < Count(xs); ++i) {
    Shape idx = Unravel(i, xs);
    const int64_t c = idx[1];
    const int64_t lo = std::max<int64_t>(0, c - (size - 1) / 2);
    const int64_t hi = std::min<int64_t>(xs[1] - 1, c + (size - 1 + 1) / 2);  // c + ceil((size - 1) / 2)
    double sq = 0;
    for (int64_t k = lo; k <= hi; ++k) {
      idx[1] = k;
      sq += static_cast<double>(x[Ravel(idx, xs)]) * x[Ravel(idx, xs)];
    }
    y[i] = x[i] / std::pow(bias + alpha / static_cast<double>(size) * sq, beta);
  }
  return y;
}

TEST(LrnTest, SizesAndAttributes) {
  for (const Shape& xs : {Shape{2, 5, 3, 3}, Shape{3, 4}, Shape{1, 6, 2, 1, 2}}) {
    for (int64_t size : {1, 2, 3, 4, 5, 9}) {
      const std::vector<float> x = Pattern(Count(xs), static_cast<int>(size));
      Tensor xt = MakeTensor<float>(DType::kF32, xs, x);
      {
        SCOPED_TRACE(absl::StrCat(Describe(xs), " size ", size, " defaults"));
        auto out = RunOp("LRN", {&xt}, {{"size", size}});
        ASSERT_TRUE(out.ok()) << out.status();
        EXPECT_EQ((*out)[0].shape(), xs);
        ExpectNear(Values<float>((*out)[0]), RefLrn(x, xs, size, 1e-4, 0.75, 1.0));
      }
      SCOPED_TRACE(absl::StrCat(Describe(xs), " size ", size, " alpha 0.5 beta 0.3 bias 2"));
      auto out = RunOp("LRN", {&xt}, {{"size", size}, {"alpha", 0.5}, {"beta", 0.3}, {"bias", 2.0}});
      ASSERT_TRUE(out.ok()) << out.status();
      ExpectNear(Values<float>((*out)[0]), RefLrn(x, xs, size, 0.5, 0.3, 2.0));
    }
  }
}

TEST(LrnTest, DTypes) {
  const Shape xs = {1, 3, 2};
  const std::vector<float> x = Pattern(6, 2);
  const std::vector<double> want = RefLrn(x, xs, 3, 0.2, 0.75, 1.0);
  Tensor x32 = MakeTensor<float>(DType::kF32, xs, x);
  for (DType dtype : {DType::kF64, DType::kF16, DType::kBF16}) {
    SCOPED_TRACE(DTypeName(dtype));
    Tensor xt = Tensor::CastOf(x32.view(), dtype).value();
    auto out = RunOp("LRN", {&xt}, {{"size", int64_t{3}}, {"alpha", 0.2}});
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ((*out)[0].dtype(), dtype);
    const double tol = dtype == DType::kF64 ? 1e-6 : 1e-2;
    ExpectNear(Values<float>(Tensor::CastOf((*out)[0].view(), DType::kF32).value()), want, tol, tol);
  }
}

TEST(LrnTest, Errors) {
  Tensor x = MakeTensor<float>(DType::kF32, {1, 3, 2}, {});
  Tensor x1 = MakeTensor<float>(DType::kF32, {3}, {});
  Tensor xi = MakeTensor<int32_t>(DType::kI32, {1, 3}, {});
  EXPECT_TRUE(ErrorContains(RunOp("LRN", {&x}).status(), "attribute 'size' is required"));
  EXPECT_TRUE(
      ErrorContains(RunOp("LRN", {&x}, {{"size", int64_t{0}}}).status(), "attribute 'size' is 0; expected >= 1"));
  EXPECT_TRUE(ErrorContains(RunOp("LRN", {&x1}, {{"size", int64_t{3}}}).status(), "expected rank >= 2"));
  EXPECT_TRUE(ErrorContains(RunOp("LRN", {&xi}, {{"size", int64_t{3}}}).status(), "input 0 (X) has dtype i32"));
  EXPECT_TRUE(ErrorContains(RunKernelPlanned("LRN", {&x}, DType::kF32, {1, 3, 2}, {{"size", int64_t{-2}}}).status(),
                            "attribute 'size' is -2; expected >= 1"));
  EXPECT_TRUE(ErrorContains(RunKernelPlanned("LRN", {&x1}, DType::kF32, {3}, {{"size", int64_t{1}}}).status(),
                            "expected rank >= 2"));
  EXPECT_TRUE(ErrorContains(RunKernelPlanned("LRN", {&x}, DType::kF32, {1, 3}, {{"size", int64_t{1}}}).status(),
                            "output 0 was allocated as f32 [1, 3]"));
}

}  // namespace
}  // namespace grove::testing
