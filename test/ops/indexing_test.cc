// The indexing group (ScatterElements/Scatter GatherND DepthToSpace
// SpaceToDepth EyeLike Compress ReverseSequence Unique Det Einsum) against
// naive references written here, the errors the shape functions and kernels
// return, and shape inference on symbolic inputs.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lib/ir/element_types.h"
#include "lib/ir/op_registry.h"
#include "test/op_test_util.h"
#include "test/ops/symbolic_shape_util.h"

namespace grove::testing {
namespace {

using ir::SymDim;
using ir::SymShape;
using ::testing::ElementsAre;
using Shape = std::vector<int64_t>;
using Attrs = std::vector<std::pair<std::string, AttrValue>>;
using Ints = std::vector<int64_t>;
using Floats = std::vector<float>;

Tensor I64(const Shape& shape, const Ints& v) { return MakeTensor<int64_t>(DType::kI64, shape, v); }
Tensor I32(const Shape& shape, const std::vector<int32_t>& v) { return MakeTensor<int32_t>(DType::kI32, shape, v); }
Tensor F32(const Shape& shape, const Floats& v) { return MakeTensor<float>(DType::kF32, shape, v); }
Tensor F64(const Shape& shape, const std::vector<double>& v) { return MakeTensor<double>(DType::kF64, shape, v); }
Tensor Bools(const Shape& shape, const std::vector<uint8_t>& v) { return MakeTensor<uint8_t>(DType::kBool, shape, v); }

Shape Unravel(int64_t i, const Shape& s) {
  Shape idx(s.size());
  for (int d = static_cast<int>(s.size()) - 1; d >= 0; --d) {
    idx[d] = i % s[d];
    i /= s[d];
  }
  return idx;
}

int64_t Ravel(const Shape& idx, const Shape& s) {
  int64_t i = 0;
  for (size_t d = 0; d < s.size(); ++d) i = i * s[d] + idx[d];
  return i;
}

Floats Seq(int64_t n, float start = 0, float step = 1) {
  Floats v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[i] = start + step * static_cast<float>(i);
  return v;
}

// Deterministic values in [-1, 1).
Floats Random(int64_t n, uint32_t seed) {
  Floats v(static_cast<size_t>(n));
  uint32_t s = seed * 2654435761u + 1;
  for (auto& x : v) {
    s = s * 1664525u + 1013904223u;
    x = static_cast<float>(s >> 8) / static_cast<float>(1 << 23) - 1.0f;
  }
  return v;
}

void ExpectNear(const Floats& got, const Floats& want, float tol = 1e-5f) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], tol) << "element " << i;
}

// ---------------------------------------------------------------------------
// ScatterElements, Scatter
// ---------------------------------------------------------------------------

// The reference: out = data; out[idx with axis replaced] op= updates.
Floats ScatterRef(const Floats& data, const Shape& dshape, const Ints& idx, const Shape& ishape, const Floats& upd,
                  int axis, const std::string& reduction) {
  Floats out = data;
  for (int64_t e = 0; e < Count(ishape); ++e) {
    Shape pos = Unravel(e, ishape);
    int64_t i = idx[e];
    if (i < 0) i += dshape[axis];
    pos[axis] = i;
    float& o = out[Ravel(pos, dshape)];
    const float u = upd[e];
    if (reduction == "none") o = u;
    if (reduction == "add") o += u;
    if (reduction == "mul") o *= u;
    if (reduction == "max") o = std::max(o, u);
    if (reduction == "min") o = std::min(o, u);
  }
  return out;
}

TEST(ScatterElementsTest, AxesReductionsAndNegativeIndices) {
  const Shape dshape = {3, 4, 2};
  const Floats data = Random(24, 1);
  for (int axis : {0, 1, 2, -1, -3}) {
    const int a = axis < 0 ? axis + 3 : axis;
    Shape ishape = {2, 3, 2};
    ishape[a] = 3;
    const int64_t n = Count(ishape);
    Ints idx(static_cast<size_t>(n));
    for (int64_t e = 0; e < n; ++e) idx[e] = (e * 7 % dshape[a]) - (e % 2 == 0 ? dshape[a] : 0);  // some negative
    const Floats upd = Random(n, 2);
    const Tensor d = F32(dshape, data), i = I64(ishape, idx), u = F32(ishape, upd);
    for (std::string reduction : {"none", "add", "mul", "max", "min"}) {
      Attrs attrs = {{"axis", int64_t{axis}}};
      if (reduction != "none" || axis == 0) attrs.push_back({"reduction", reduction});
      auto out = RunOp("ScatterElements", {&d, &i, &u}, attrs);
      ASSERT_TRUE(out.ok()) << out.status();
      ExpectNear(Values<float>((*out)[0]), ScatterRef(data, dshape, idx, ishape, upd, a, reduction));
    }
  }
}

TEST(ScatterElementsTest, DefaultAxisInt32IndicesAndDTypes) {
  // ONNX's example: axis 0, 3x3 data.
  const Tensor d = F32({3, 3}, Floats(9, 0.0f));
  const Tensor i = I32({2, 3}, {1, 0, 2, 0, 2, 1});
  const Tensor u = F32({2, 3}, {1.0f, 1.1f, 1.2f, 2.0f, 2.1f, 2.2f});
  auto out = RunOp("ScatterElements", {&d, &i, &u});
  ASSERT_TRUE(out.ok()) << out.status();
  ExpectNear(Values<float>((*out)[0]), {2.0f, 1.1f, 0.0f, 1.0f, 0.0f, 2.2f, 0.0f, 2.1f, 1.2f});
  // The opset-9 name gives the same.
  auto old = RunOp("Scatter", {&d, &i, &u});
  ASSERT_TRUE(old.ok()) << old.status();
  ExpectNear(Values<float>((*old)[0]), Values<float>((*out)[0]));
  // Integer data with add, and duplicates accumulating.
  const Tensor di = I64({1, 5}, {1, 2, 3, 4, 5});
  const Tensor ii = I64({1, 3}, {1, 1, -1});
  const Tensor ui = I64({1, 3}, {10, 20, 30});
  out = RunOp("ScatterElements", {&di, &ii, &ui}, {{"axis", int64_t{1}}, {"reduction", std::string("add")}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(Values<int64_t>((*out)[0]), ElementsAre(1, 32, 3, 4, 35));
  // f16 with max.
  using ir::FloatToHalf;
  using ir::Half;
  using ir::HalfToFloat;
  const std::vector<Half> hd = {FloatToHalf(1), FloatToHalf(5), FloatToHalf(3)};
  const std::vector<Half> hu = {FloatToHalf(4), FloatToHalf(4)};
  const Tensor dh = MakeTensor<Half>(DType::kF16, {3}, hd), ih = I64({2}, {0, 1}), uh = MakeTensor<Half>(DType::kF16, {2}, hu);
  out = RunOp("ScatterElements", {&dh, &ih, &uh}, {{"reduction", std::string("max")}});
  ASSERT_TRUE(out.ok()) << out.status();
  const std::vector<Half> got = Values<Half>((*out)[0]);
  EXPECT_EQ(HalfToFloat(got[0]), 4.0f);
  EXPECT_EQ(HalfToFloat(got[1]), 5.0f);
  EXPECT_EQ(HalfToFloat(got[2]), 3.0f);
  // Bool data without reduction moves bytes.
  const Tensor db = Bools({3}, {0, 0, 0}), ub = Bools({1}, {1}), ib = I64({1}, {2});
  out = RunOp("ScatterElements", {&db, &ib, &ub});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(Values<uint8_t>((*out)[0]), ElementsAre(0, 0, 1));
}

TEST(ScatterElementsTest, EmptyIndicesCopyTheData) {
  const Tensor d = F32({2, 2}, {1, 2, 3, 4}), i = I64({0, 2}, {}), u = F32({0, 2}, {});
  auto out = RunOp("ScatterElements", {&d, &i, &u});
  ASSERT_TRUE(out.ok()) << out.status();
  ExpectNear(Values<float>((*out)[0]), {1, 2, 3, 4});
}

TEST(ScatterElementsTest, Errors) {
  const Tensor d = F32({2, 3}, Seq(6));
  const Tensor u = F32({1, 2}, {9, 9});
  const Tensor big = I64({1, 2}, {0, 3});
  EXPECT_TRUE(ErrorContains(RunOp("ScatterElements", {&d, &big, &u}, {{"axis", int64_t{1}}}).status(),
                            "out of range for axis 1"));
  const Tensor low = I64({1, 2}, {-4, 0});
  EXPECT_TRUE(ErrorContains(RunOp("ScatterElements", {&d, &low, &u}, {{"axis", int64_t{1}}}).status(),
                            "is -4; out of range"));
  const Tensor ok = I64({1, 2}, {0, 1});
  EXPECT_TRUE(ErrorContains(RunOp("ScatterElements", {&d, &ok, &u}, {{"axis", int64_t{2}}}).status(), "axis"));
  EXPECT_TRUE(ErrorContains(
      RunOp("ScatterElements", {&d, &ok, &u}, {{"reduction", std::string("sub")}}).status(), "reduction is 'sub'"));
  const Tensor u3 = F32({1, 3}, {9, 9, 9});
  EXPECT_TRUE(ErrorContains(RunOp("ScatterElements", {&d, &ok, &u3}).status(), "updates (input 2) has shape"));
  const Tensor r1 = I64({2}, {0, 1});
  EXPECT_TRUE(ErrorContains(RunOp("ScatterElements", {&d, &r1, &u}).status(), "same rank"));
  const Tensor wide = I64({1, 4}, {0, 0, 0, 0});
  const Tensor uw = F32({1, 4}, {1, 1, 1, 1});
  EXPECT_TRUE(ErrorContains(RunOp("ScatterElements", {&d, &wide, &uw}).status(), "exceeds the data's"));
  const Tensor ud = I64({1, 2}, {1, 1});
  EXPECT_TRUE(ErrorContains(RunOp("ScatterElements", {&d, &ok, &ud}).status(), "same dtype"));
  const Tensor fi = F32({1, 2}, {0, 1});
  EXPECT_TRUE(ErrorContains(RunOp("ScatterElements", {&d, &fi, &u}).status(), "indices"));
  const Tensor db = Bools({2}, {0, 0}), ib = I64({1}, {0}), ub = Bools({1}, {1});
  auto bool_or = RunOp("ScatterElements", {&db, &ib, &ub}, {{"reduction", std::string("add")}});
  ASSERT_TRUE(bool_or.ok()) << bool_or.status();  // add on bool is "or", as in ScatterND
  EXPECT_EQ(Values<uint8_t>((*bool_or)[0]), (std::vector<uint8_t>{1, 0}));
  const Tensor s = F32({}, {1});
  const Tensor si = I64({}, {0});
  EXPECT_TRUE(ErrorContains(RunOp("ScatterElements", {&s, &si, &s}).status(), "scalar"));
  // The kernel's own check (a plan made from symbolic shapes).
  EXPECT_TRUE(ErrorContains(RunKernelPlanned("ScatterElements", {&d, &big, &u}, DType::kF32, {2, 3},
                                             {{"axis", int64_t{1}}})
                                .status(),
                            "out of range"));
  EXPECT_TRUE(ErrorContains(RunKernelPlanned("ScatterElements", {&d, &ok, &u}, DType::kF32, {3, 2}).status(),
                            "planned"));
}

// ---------------------------------------------------------------------------
// GatherND
// ---------------------------------------------------------------------------

TEST(GatherNDTest, OnnxExamples) {
  const Tensor d2 = I32({2, 2}, {0, 1, 2, 3});
  const Tensor i1 = I64({2, 2}, {0, 0, 1, 1});
  auto out = RunOp("GatherND", {&d2, &i1});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(Values<int32_t>((*out)[0]), ElementsAre(0, 3));
  const Tensor i2 = I64({2, 1}, {1, 0});
  out = RunOp("GatherND", {&d2, &i2});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].shape(), (Shape{2, 2}));
  EXPECT_THAT(Values<int32_t>((*out)[0]), ElementsAre(2, 3, 0, 1));
  const Tensor d3 = I32({2, 2, 2}, {0, 1, 2, 3, 4, 5, 6, 7});
  const Tensor i3 = I64({2, 1, 2}, {0, 1, 1, 0});
  out = RunOp("GatherND", {&d3, &i3});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].shape(), (Shape{2, 1, 2}));
  EXPECT_THAT(Values<int32_t>((*out)[0]), ElementsAre(2, 3, 4, 5));
  // batch_dims 1.
  const Tensor i4 = I64({2, 1}, {1, 0});
  out = RunOp("GatherND", {&d3, &i4}, {{"batch_dims", int64_t{1}}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].shape(), (Shape{2, 2}));
  EXPECT_THAT(Values<int32_t>((*out)[0]), ElementsAre(2, 3, 4, 5));
  // Negative indices count from the end; i32 indices.
  const Tensor i5 = I32({2, 2}, {-1, -2, 0, -1});
  out = RunOp("GatherND", {&d2, &i5});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(Values<int32_t>((*out)[0]), ElementsAre(2, 1));
}

TEST(GatherNDTest, AgainstReferenceWithBatchDims) {
  const Shape dshape = {2, 3, 4, 5};
  const Floats data = Random(Count(dshape), 3);
  const Tensor d = F32(dshape, data);
  for (int64_t b : {0, 1, 2}) {
    for (int64_t k = 1; k <= 4 - b; ++k) {
      Shape ishape(dshape.begin(), dshape.begin() + b);
      ishape.push_back(3);
      ishape.push_back(k);
      const int64_t tuples = Count(ishape) / k;
      Ints idx;
      for (int64_t t = 0; t < tuples; ++t) {
        for (int64_t c = 0; c < k; ++c) idx.push_back((t * 5 + c * 3) % dshape[b + c]);
      }
      const Tensor i = I64(ishape, idx);
      auto out = RunOp("GatherND", {&d, &i}, {{"batch_dims", b}});
      ASSERT_TRUE(out.ok()) << out.status();
      Shape want_shape(ishape.begin(), ishape.end() - 1);
      want_shape.insert(want_shape.end(), dshape.begin() + b + k, dshape.end());
      ASSERT_EQ((*out)[0].shape(), want_shape);
      const int64_t slice = Count(Shape(dshape.begin() + b + k, dshape.end()));
      Floats want;
      for (int64_t t = 0; t < tuples; ++t) {
        const int64_t batch = b == 0 ? 0 : t / 3;  // 3 tuples per batch
        Shape pos = b == 0 ? Shape{} : Unravel(batch, Shape(dshape.begin(), dshape.begin() + b));
        for (int64_t c = 0; c < k; ++c) pos.push_back(idx[t * k + c]);
        while (pos.size() < dshape.size()) pos.push_back(0);
        const int64_t start = Ravel(pos, dshape);
        for (int64_t s = 0; s < slice; ++s) want.push_back(data[start + s]);
      }
      ExpectNear(Values<float>((*out)[0]), want);
    }
  }
}

TEST(GatherNDTest, EmptyAndErrors) {
  const Tensor d = F32({2, 3}, Seq(6));
  const Tensor none = I64({0, 2}, {});
  auto out = RunOp("GatherND", {&d, &none});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].shape(), (Shape{0}));
  const Tensor far = I64({1, 2}, {1, 3});
  EXPECT_TRUE(ErrorContains(RunOp("GatherND", {&d, &far}).status(), "out of range for dim 1"));
  const Tensor neg = I64({1, 2}, {-3, 0});
  EXPECT_TRUE(ErrorContains(RunOp("GatherND", {&d, &neg}).status(), "index -3"));
  const Tensor deep = I64({1, 3}, {0, 0, 0});
  EXPECT_TRUE(ErrorContains(RunOp("GatherND", {&d, &deep}).status(), "last dim must be 1..2"));
  const Tensor ok = I64({2, 1}, {0, 1});
  EXPECT_TRUE(ErrorContains(RunOp("GatherND", {&d, &ok}, {{"batch_dims", int64_t{2}}}).status(), "batch_dims is 2"));
  const Tensor mismatch = I64({3, 1}, {0, 1, 2});
  EXPECT_TRUE(ErrorContains(RunOp("GatherND", {&d, &mismatch}, {{"batch_dims", int64_t{1}}}).status(),
                            "must be equal"));
  const Tensor scalar = I64({}, {0});
  EXPECT_TRUE(ErrorContains(RunOp("GatherND", {&d, &scalar}).status(), "scalar"));
  EXPECT_TRUE(ErrorContains(RunKernelPlanned("GatherND", {&d, &far}, DType::kF32, {1}).status(), "out of range"));
  EXPECT_TRUE(ErrorContains(RunKernelPlanned("GatherND", {&d, &ok}, DType::kF32, {2, 2}).status(), "planned"));
}

// ---------------------------------------------------------------------------
// DepthToSpace, SpaceToDepth
// ---------------------------------------------------------------------------

TEST(DepthToSpaceTest, ModesAgainstReference) {
  const int64_t n = 2, c = 8, h = 2, w = 3, b = 2;
  const Floats x = Seq(n * c * h * w);
  const Tensor t = F32({n, c, h, w}, x);
  for (std::string mode : {"DCR", "CRD"}) {
    Attrs attrs = {{"blocksize", b}};
    if (mode == "CRD") attrs.push_back({"mode", mode});
    auto out = RunOp("DepthToSpace", {&t}, attrs);
    ASSERT_TRUE(out.ok()) << out.status();
    const int64_t oc = c / (b * b);
    ASSERT_EQ((*out)[0].shape(), (Shape{n, oc, h * b, w * b}));
    Floats want;
    for (int64_t in = 0; in < n; ++in)
      for (int64_t co = 0; co < oc; ++co)
        for (int64_t y = 0; y < h * b; ++y)
          for (int64_t z = 0; z < w * b; ++z) {
            const int64_t i = y % b, j = z % b;
            const int64_t ch = mode == "DCR" ? (i * b + j) * oc + co : co * b * b + i * b + j;
            want.push_back(x[Ravel({in, ch, y / b, z / b}, {n, c, h, w})]);
          }
    ExpectNear(Values<float>((*out)[0]), want);
  }
}

TEST(SpaceToDepthTest, ReferenceAndRoundTrip) {
  const int64_t n = 2, c = 3, h = 4, w = 6, b = 2;
  const Floats x = Seq(n * c * h * w);
  const Tensor t = F32({n, c, h, w}, x);
  auto out = RunOp("SpaceToDepth", {&t}, {{"blocksize", b}});
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ((*out)[0].shape(), (Shape{n, c * b * b, h / b, w / b}));
  Floats want;
  for (int64_t in = 0; in < n; ++in)
    for (int64_t ch = 0; ch < c * b * b; ++ch)
      for (int64_t y = 0; y < h / b; ++y)
        for (int64_t z = 0; z < w / b; ++z) {
          const int64_t blk = ch / c, cc = ch % c;
          want.push_back(x[Ravel({in, cc, y * b + blk / b, z * b + blk % b}, {n, c, h, w})]);
        }
  ExpectNear(Values<float>((*out)[0]), want);
  // DepthToSpace in DCR mode undoes it.
  auto back = RunOp("DepthToSpace", {&(*out)[0]}, {{"blocksize", b}});
  ASSERT_TRUE(back.ok()) << back.status();
  ExpectNear(Values<float>((*back)[0]), x);
}

TEST(DepthToSpaceTest, ZeroSizeAndErrors) {
  const Tensor empty = F32({0, 4, 2, 2}, {});
  auto out = RunOp("DepthToSpace", {&empty}, {{"blocksize", int64_t{2}}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].shape(), (Shape{0, 1, 4, 4}));
  out = RunOp("SpaceToDepth", {&empty}, {{"blocksize", int64_t{2}}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].shape(), (Shape{0, 16, 1, 1}));
  const Tensor t = F32({1, 6, 2, 3}, Seq(36));
  EXPECT_TRUE(ErrorContains(RunOp("DepthToSpace", {&t}, {{"blocksize", int64_t{2}}}).status(), "divide by 4"));
  EXPECT_TRUE(ErrorContains(RunOp("SpaceToDepth", {&t}, {{"blocksize", int64_t{2}}}).status(), "dim 3"));
  EXPECT_TRUE(ErrorContains(RunOp("DepthToSpace", {&t}, {{"blocksize", int64_t{0}}}).status(), "blocksize is 0"));
  EXPECT_TRUE(ErrorContains(RunOp("DepthToSpace", {&t}).status(), "blocksize is required"));
  EXPECT_TRUE(ErrorContains(
      RunOp("DepthToSpace", {&t}, {{"blocksize", int64_t{1}}, {"mode", std::string("XYZ")}}).status(), "mode"));
  const Tensor r3 = F32({4, 2, 2}, Seq(16));
  EXPECT_TRUE(ErrorContains(RunOp("SpaceToDepth", {&r3}, {{"blocksize", int64_t{1}}}).status(), "[N, C, H, W]"));
  EXPECT_TRUE(ErrorContains(
      RunKernelPlanned("DepthToSpace", {&t}, DType::kF32, {1, 6, 2, 2}, {{"blocksize", int64_t{1}}}).status(),
      "planned"));
}

// ---------------------------------------------------------------------------
// EyeLike
// ---------------------------------------------------------------------------

TEST(EyeLikeTest, DiagonalsAndDTypes) {
  const Tensor x = I32({3, 4}, std::vector<int32_t>(12, 7));
  for (int64_t k : {-4, -3, -2, -1, 0, 1, 2, 3, 4, 9}) {
    auto out = RunOp("EyeLike", {&x}, {{"k", k}});
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ((*out)[0].dtype(), DType::kI32);
    const std::vector<int32_t> got = Values<int32_t>((*out)[0]);
    for (int64_t r = 0; r < 3; ++r)
      for (int64_t c = 0; c < 4; ++c) EXPECT_EQ(got[r * 4 + c], c - r == k ? 1 : 0) << k << " " << r << " " << c;
  }
  auto out = RunOp("EyeLike", {&x}, {{"dtype", static_cast<int64_t>(DType::kF64)}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].dtype(), DType::kF64);
  EXPECT_THAT(Values<double>((*out)[0]), ElementsAre(1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0));
  out = RunOp("EyeLike", {&x}, {{"dtype", static_cast<int64_t>(DType::kBool)}, {"k", int64_t{-1}}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(Values<uint8_t>((*out)[0]), ElementsAre(0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0));
  out = RunOp("EyeLike", {&x}, {{"dtype", static_cast<int64_t>(DType::kF16)}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(ir::HalfToFloat(Values<ir::Half>((*out)[0])[5]), 1.0f);
  const Tensor empty = F32({0, 3}, {});
  out = RunOp("EyeLike", {&empty});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].shape(), (Shape{0, 3}));
  const Tensor v = F32({3}, {1, 2, 3});
  EXPECT_TRUE(ErrorContains(RunOp("EyeLike", {&v}).status(), "2-D"));
  EXPECT_TRUE(ErrorContains(RunOp("EyeLike", {&x}, {{"dtype", int64_t{42}}}).status(), "dtype is 42"));
}

// ---------------------------------------------------------------------------
// Compress
// ---------------------------------------------------------------------------

TEST(CompressTest, AxesAndFlattened) {
  const Tensor x = F32({3, 2}, {1, 2, 3, 4, 5, 6});
  const Tensor c3 = Bools({3}, {0, 1, 1});
  auto out = RunOp("Compress", {&x, &c3}, {{"axis", int64_t{0}}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].shape(), (Shape{2, 2}));
  ExpectNear(Values<float>((*out)[0]), {3, 4, 5, 6});
  const Tensor c2 = Bools({2}, {0, 1});
  for (int64_t axis : {1, -1}) {
    out = RunOp("Compress", {&x, &c2}, {{"axis", axis}});
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ((*out)[0].shape(), (Shape{3, 1}));
    ExpectNear(Values<float>((*out)[0]), {2, 4, 6});
  }
  // No axis: the flattened input; a shorter condition drops the rest.
  const Tensor c5 = Bools({5}, {0, 1, 0, 0, 1});
  out = RunOp("Compress", {&x, &c5});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].shape(), (Shape{2}));
  ExpectNear(Values<float>((*out)[0]), {2, 5});
  // A longer condition is fine while its extra entries are false.
  const Tensor c4 = Bools({4}, {1, 0, 1, 0});
  out = RunOp("Compress", {&x, &c4}, {{"axis", int64_t{0}}});
  ASSERT_TRUE(out.ok()) << out.status();
  ExpectNear(Values<float>((*out)[0]), {1, 2, 5, 6});
  // Nothing selected, and an empty input.
  const Tensor none = Bools({3}, {0, 0, 0});
  out = RunOp("Compress", {&x, &none}, {{"axis", int64_t{0}}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].shape(), (Shape{0, 2}));
  const Tensor empty = I64({0, 2}, {});
  const Tensor c0 = Bools({0}, {});
  out = RunOp("Compress", {&empty, &c0}, {{"axis", int64_t{0}}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].shape(), (Shape{0, 2}));
}

TEST(CompressTest, Errors) {
  const Tensor x = F32({3, 2}, Seq(6));
  const Tensor c4 = Bools({4}, {0, 0, 0, 1});
  EXPECT_TRUE(ErrorContains(RunOp("Compress", {&x, &c4}, {{"axis", int64_t{0}}}).status(), "selects entry 3"));
  const Tensor c = Bools({2}, {1, 1});
  EXPECT_TRUE(ErrorContains(RunOp("Compress", {&x, &c}, {{"axis", int64_t{2}}}).status(), "axis"));
  const Tensor ci = I64({2}, {1, 1});
  EXPECT_TRUE(ErrorContains(RunOp("Compress", {&x, &ci}).status(), "1-D bool"));
  const Tensor c2d = Bools({1, 2}, {1, 1});
  EXPECT_TRUE(ErrorContains(RunOp("Compress", {&x, &c2d}).status(), "1-D bool"));
  const Tensor s = F32({}, {1});
  EXPECT_TRUE(ErrorContains(RunOp("Compress", {&s, &c}, {{"axis", int64_t{0}}}).status(), "scalar"));
  // The shape function: the compressed dim is unknown; its checks.
  auto shape = InferSymbolic("Compress", {{DType::kF32, {3, 2}}, {DType::kBool, {3}}}, {{"axis", int64_t{0}}});
  ASSERT_TRUE(shape.ok()) << shape.status();
  ASSERT_EQ(shape->shape.size(), 2u);
  EXPECT_TRUE(shape->shape[0].is_unknown());
  EXPECT_EQ(shape->shape[1], SymDim(2));
  shape = InferSymbolic("Compress", {{DType::kF32, {3, 2}}, {DType::kBool, {3}}});
  ASSERT_TRUE(shape.ok()) << shape.status();
  EXPECT_EQ(shape->shape.size(), 1u);
  EXPECT_TRUE(ErrorContains(InferSymbolic("Compress", {{DType::kF32, {3, 2}}, {DType::kI64, {3}}}).status(),
                            "condition"));
  EXPECT_TRUE(ErrorContains(InferSymbolic("Compress", {{DType::kF32, {3, 2}}, {DType::kBool, {3, 1}}}).status(),
                            "1-D"));
  EXPECT_TRUE(ErrorContains(
      InferSymbolic("Compress", {{DType::kF32, {3, 2}}, {DType::kBool, {3}}}, {{"axis", int64_t{-3}}}).status(),
      "axis"));
}

// ---------------------------------------------------------------------------
// ReverseSequence
// ---------------------------------------------------------------------------

TEST(ReverseSequenceTest, BothLayoutsAgainstReference) {
  const Shape shape = {4, 3, 2};
  const Floats x = Seq(Count(shape));
  const Tensor t = F32(shape, x);
  for (int64_t batch_axis : {0, 1}) {
    const int64_t time_axis = 1 - batch_axis;
    const int64_t batch = shape[batch_axis], time = shape[time_axis];
    Ints lens;
    for (int64_t b = 0; b < batch; ++b) lens.push_back((b * 3) % (time + 1));
    const Tensor l = I64({batch}, lens);
    auto out = RunOp("ReverseSequence", {&t, &l}, {{"batch_axis", batch_axis}, {"time_axis", time_axis}});
    ASSERT_TRUE(out.ok()) << out.status();
    Floats want(x.size());
    for (int64_t e = 0; e < Count(shape); ++e) {
      Shape pos = Unravel(e, shape);
      const int64_t b = pos[batch_axis], tt = pos[time_axis];
      Shape src = pos;
      src[time_axis] = tt < lens[b] ? lens[b] - 1 - tt : tt;
      want[e] = x[Ravel(src, shape)];
    }
    ExpectNear(Values<float>((*out)[0]), want);
  }
  // Defaults: batch_axis 1, time_axis 0; i32 lengths.
  const Tensor x2 = F32({2, 2}, {1, 2, 3, 4});
  const Tensor l2 = I32({2}, {2, 1});
  auto out = RunOp("ReverseSequence", {&x2, &l2});
  ASSERT_TRUE(out.ok()) << out.status();
  ExpectNear(Values<float>((*out)[0]), {3, 2, 1, 4});
}

TEST(ReverseSequenceTest, Errors) {
  const Tensor x = F32({2, 3}, Seq(6));
  const Tensor long_len = I64({3}, {1, 4, 1});
  EXPECT_TRUE(ErrorContains(RunOp("ReverseSequence", {&x, &long_len}).status(), "sequence_lens[1] is 4"));
  const Tensor neg = I64({3}, {1, -1, 1});
  EXPECT_TRUE(ErrorContains(RunOp("ReverseSequence", {&x, &neg}).status(), "sequence_lens[1] is -1"));
  const Tensor wrong = I64({2}, {1, 1});
  EXPECT_TRUE(ErrorContains(RunOp("ReverseSequence", {&x, &wrong}).status(), "sequence_lens (input 1) has shape"));
  const Tensor ok = I64({3}, {1, 1, 1});
  EXPECT_TRUE(ErrorContains(
      RunOp("ReverseSequence", {&x, &ok}, {{"batch_axis", int64_t{0}}, {"time_axis", int64_t{0}}}).status(),
      "either order"));
  const Tensor v = F32({3}, {1, 2, 3});
  EXPECT_TRUE(ErrorContains(RunOp("ReverseSequence", {&v, &ok}).status(), "rank >= 2"));
  const Tensor fl = F32({3}, {1, 1, 1});
  EXPECT_TRUE(ErrorContains(RunOp("ReverseSequence", {&x, &fl}).status(), "sequence_lens"));
  EXPECT_TRUE(
      ErrorContains(RunKernelPlanned("ReverseSequence", {&x, &long_len}, DType::kF32, {2, 3}).status(), "is 4"));
}

// ---------------------------------------------------------------------------
// Unique
// ---------------------------------------------------------------------------

TEST(UniqueTest, FlattenedSortedAndUnsorted) {
  const Tensor x = F32({6}, {2, 1, 1, 3, 4, 3});
  auto out = RunOp("Unique", {&x}, {{"sorted", int64_t{0}}}, 4);
  ASSERT_TRUE(out.ok()) << out.status();
  ExpectNear(Values<float>((*out)[0]), {2, 1, 3, 4});
  EXPECT_THAT(Values<int64_t>((*out)[1]), ElementsAre(0, 1, 3, 4));
  EXPECT_THAT(Values<int64_t>((*out)[2]), ElementsAre(0, 1, 1, 2, 3, 2));
  EXPECT_THAT(Values<int64_t>((*out)[3]), ElementsAre(1, 2, 2, 1));
  out = RunOp("Unique", {&x}, {}, 4);
  ASSERT_TRUE(out.ok()) << out.status();
  ExpectNear(Values<float>((*out)[0]), {1, 2, 3, 4});
  EXPECT_THAT(Values<int64_t>((*out)[1]), ElementsAre(1, 0, 3, 4));
  EXPECT_THAT(Values<int64_t>((*out)[2]), ElementsAre(1, 0, 0, 2, 3, 2));
  EXPECT_THAT(Values<int64_t>((*out)[3]), ElementsAre(2, 1, 2, 1));
  // A 2-D input without an axis is flattened; only Y asked for.
  const Tensor m = I64({2, 3}, {5, -1, 5, 7, -1, 0});
  out = RunOp("Unique", {&m}, {}, 1);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(Values<int64_t>((*out)[0]), ElementsAre(-1, 0, 5, 7));
}

TEST(UniqueTest, AlongAnAxis) {
  // ONNX's example: rows of a 3x3.
  const Tensor x = F32({3, 3}, {1, 0, 0, 1, 0, 0, 2, 3, 4});
  auto out = RunOp("Unique", {&x}, {{"axis", int64_t{0}}}, 4);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].shape(), (Shape{2, 3}));
  ExpectNear(Values<float>((*out)[0]), {1, 0, 0, 2, 3, 4});
  EXPECT_THAT(Values<int64_t>((*out)[1]), ElementsAre(0, 2));
  EXPECT_THAT(Values<int64_t>((*out)[2]), ElementsAre(0, 0, 1));
  EXPECT_THAT(Values<int64_t>((*out)[3]), ElementsAre(2, 1));
  // Columns (axis -1): [1,1,2], [0,0,3], [0,0,4] sort as columns 1, 2, 0.
  out = RunOp("Unique", {&x}, {{"axis", int64_t{-1}}}, 4);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].shape(), (Shape{3, 3}));
  ExpectNear(Values<float>((*out)[0]), {0, 0, 1, 0, 0, 1, 3, 4, 2});
  EXPECT_THAT(Values<int64_t>((*out)[1]), ElementsAre(1, 2, 0));
  EXPECT_THAT(Values<int64_t>((*out)[2]), ElementsAre(2, 0, 1));
  EXPECT_THAT(Values<int64_t>((*out)[3]), ElementsAre(1, 1, 1));
  // The middle axis of a 3-D input, unsorted.
  const Tensor y = I32({2, 3, 1}, {1, 2, 1, 3, 4, 3});
  out = RunOp("Unique", {&y}, {{"axis", int64_t{1}}, {"sorted", int64_t{0}}}, 4);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].shape(), (Shape{2, 2, 1}));
  EXPECT_THAT(Values<int32_t>((*out)[0]), ElementsAre(1, 2, 3, 4));
  EXPECT_THAT(Values<int64_t>((*out)[2]), ElementsAre(0, 1, 0));
}

TEST(UniqueTest, EmptyNanAndErrors) {
  const Tensor empty = F32({0}, {});
  auto out = RunOp("Unique", {&empty}, {}, 4);
  ASSERT_TRUE(out.ok()) << out.status();
  for (int i = 0; i < 4; ++i) EXPECT_EQ((*out)[i].shape(), (Shape{0}));
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const Tensor x = F32({4}, {nan, 1, nan, 0});
  out = RunOp("Unique", {&x}, {}, 4);
  ASSERT_TRUE(out.ok()) << out.status();
  const Floats y = Values<float>((*out)[0]);
  ASSERT_EQ(y.size(), 3u);
  EXPECT_EQ(y[0], 0);
  EXPECT_EQ(y[1], 1);
  EXPECT_TRUE(std::isnan(y[2]));
  EXPECT_THAT(Values<int64_t>((*out)[3]), ElementsAre(1, 1, 2));
  const Tensor s = F32({}, {3});
  out = RunOp("Unique", {&s}, {}, 4);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(Values<int64_t>((*out)[2]), ElementsAre(0));
  EXPECT_TRUE(ErrorContains(RunOp("Unique", {&s}, {{"axis", int64_t{0}}}, 4).status(), "scalar"));
  EXPECT_TRUE(ErrorContains(RunOp("Unique", {&x}, {{"axis", int64_t{1}}}, 4).status(), "axis"));
  EXPECT_TRUE(ErrorContains(RunOp("Unique", {&x}, {{"sorted", int64_t{2}}}, 4).status(), "sorted is 2"));
  // Shape function: data-dependent dims are unknown and shared.
  const ir::OpDef* def = runtime::GlobalOpRegistry().Find("Unique");
  ASSERT_NE(def, nullptr);
  EXPECT_TRUE(def->kernel_allocates_outputs);
  auto shape = InferSymbolic("Unique", {{DType::kF32, {SymDim::Symbol(0), 3}}}, {{"axis", int64_t{1}}});
  ASSERT_TRUE(shape.ok()) << shape.status();
  ASSERT_EQ(shape->shape.size(), 2u);
  EXPECT_EQ(shape->shape[0], SymDim::Symbol(0));
  EXPECT_TRUE(shape->shape[1].is_unknown());
  EXPECT_TRUE(ErrorContains(
      InferSymbolic("Unique", {{DType::kF32, {3}}}, {{"sorted", int64_t{5}}}).status(), "sorted"));
}

// ---------------------------------------------------------------------------
// Det
// ---------------------------------------------------------------------------

// Cofactor expansion, for small matrices.
double DetRef(const std::vector<double>& a, int64_t m) {
  if (m == 0) return 1;
  if (m == 1) return a[0];
  double det = 0;
  for (int64_t c = 0; c < m; ++c) {
    std::vector<double> minor;
    for (int64_t r = 1; r < m; ++r)
      for (int64_t j = 0; j < m; ++j)
        if (j != c) minor.push_back(a[r * m + j]);
    det += (c % 2 == 0 ? 1 : -1) * a[c] * DetRef(minor, m - 1);
  }
  return det;
}

TEST(DetTest, BatchedAgainstCofactors) {
  for (int64_t m : {1, 2, 3, 4, 5}) {
    const Floats v = Random(3 * 2 * m * m, static_cast<uint32_t>(m));
    const Tensor x = F32({3, 2, m, m}, v);
    auto out = RunOp("Det", {&x});
    ASSERT_TRUE(out.ok()) << out.status();
    ASSERT_EQ((*out)[0].shape(), (Shape{3, 2}));
    const Floats got = Values<float>((*out)[0]);
    for (int64_t b = 0; b < 6; ++b) {
      std::vector<double> a(v.begin() + b * m * m, v.begin() + (b + 1) * m * m);
      EXPECT_NEAR(got[b], DetRef(a, m), 1e-5) << "m " << m << " batch " << b;
    }
  }
  const Tensor d = F64({2, 2}, {1, 2, 3, 4});
  auto out = RunOp("Det", {&d});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].shape(), Shape{});
  EXPECT_NEAR(Values<double>((*out)[0])[0], -2.0, 1e-12);
  const Tensor singular = F32({3, 3}, {1, 2, 3, 2, 4, 6, 1, 1, 1});
  out = RunOp("Det", {&singular});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Values<float>((*out)[0])[0], 0.0f);
  const Tensor empty = F32({2, 0, 0}, {});
  out = RunOp("Det", {&empty});
  ASSERT_TRUE(out.ok()) << out.status();
  ExpectNear(Values<float>((*out)[0]), {1, 1});
  const Tensor none = F32({0, 2, 2}, {});
  out = RunOp("Det", {&none});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].shape(), (Shape{0}));
  const Tensor rect = F32({2, 3}, Seq(6));
  EXPECT_TRUE(ErrorContains(RunOp("Det", {&rect}).status(), "square"));
  const Tensor v = F32({3}, Seq(3));
  EXPECT_TRUE(ErrorContains(RunOp("Det", {&v}).status(), "square"));
  const Tensor i = I64({2, 2}, {1, 2, 3, 4});
  EXPECT_TRUE(ErrorContains(RunOp("Det", {&i}).status(), "dtype"));
}

// ---------------------------------------------------------------------------
// Einsum
// ---------------------------------------------------------------------------

TEST(EinsumTest, MatMulTransposeTraceAndSums) {
  const Floats a = Random(6, 1), b = Random(12, 2);
  const Tensor ta = F32({2, 3}, a), tb = F32({3, 4}, b);
  Floats mm(8, 0);
  for (int i = 0; i < 2; ++i)
    for (int k = 0; k < 4; ++k)
      for (int j = 0; j < 3; ++j) mm[i * 4 + k] += a[i * 3 + j] * b[j * 4 + k];
  for (std::string eq : {"ij,jk->ik", "ij,jk", " i j , j k -> i k "}) {
    auto out = RunOp("Einsum", {&ta, &tb}, {{"equation", eq}});
    ASSERT_TRUE(out.ok()) << eq << ": " << out.status();
    EXPECT_EQ((*out)[0].shape(), (Shape{2, 4}));
    ExpectNear(Values<float>((*out)[0]), mm);
  }
  // Implicit output: the letters used once, sorted ("ji,kj" gives "ik", (a b)^T).
  auto out = RunOp("Einsum", {&tb, &ta}, {{"equation", std::string("ji,kj")}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].shape(), (Shape{4, 2}));
  for (int i = 0; i < 4; ++i)
    for (int k = 0; k < 2; ++k) EXPECT_NEAR(Values<float>((*out)[0])[i * 2 + k], mm[k * 4 + i], 1e-5);
  out = RunOp("Einsum", {&ta}, {{"equation", std::string("ij->ji")}});
  ASSERT_TRUE(out.ok()) << out.status();
  ExpectNear(Values<float>((*out)[0]), {a[0], a[3], a[1], a[4], a[2], a[5]});
  out = RunOp("Einsum", {&ta}, {{"equation", std::string("ij->i")}});
  ASSERT_TRUE(out.ok()) << out.status();
  ExpectNear(Values<float>((*out)[0]), {a[0] + a[1] + a[2], a[3] + a[4] + a[5]});
  out = RunOp("Einsum", {&ta}, {{"equation", std::string("ij->")}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].shape(), Shape{});
  ExpectNear(Values<float>((*out)[0]), {a[0] + a[1] + a[2] + a[3] + a[4] + a[5]});
  // Upper-case letters sort before lower-case in the implicit output.
  out = RunOp("Einsum", {&ta}, {{"equation", std::string("iA")}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].shape(), (Shape{3, 2}));
  // Outer product and inner product.
  const Tensor u = F32({3}, {1, 2, 3}), v = F32({2}, {4, 5});
  out = RunOp("Einsum", {&u, &v}, {{"equation", std::string("i,j->ij")}});
  ASSERT_TRUE(out.ok()) << out.status();
  ExpectNear(Values<float>((*out)[0]), {4, 5, 8, 10, 12, 15});
  out = RunOp("Einsum", {&u, &u}, {{"equation", std::string("i,i")}});
  ASSERT_TRUE(out.ok()) << out.status();
  ExpectNear(Values<float>((*out)[0]), {14});
}

TEST(EinsumTest, DiagonalsEllipsisAndBroadcast) {
  const Floats s = Seq(2 * 3 * 3);
  const Tensor x = F32({2, 3, 3}, s);
  auto out = RunOp("Einsum", {&x}, {{"equation", std::string("...ii->...i")}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].shape(), (Shape{2, 3}));
  ExpectNear(Values<float>((*out)[0]), {0, 4, 8, 9, 13, 17});
  out = RunOp("Einsum", {&x}, {{"equation", std::string("bii->b")}});
  ASSERT_TRUE(out.ok()) << out.status();
  ExpectNear(Values<float>((*out)[0]), {12, 39});
  // Implicit: a repeated letter is summed (the trace of each matrix), the
  // ellipsis leads.
  out = RunOp("Einsum", {&x}, {{"equation", std::string("...jj")}});
  ASSERT_TRUE(out.ok()) << out.status();
  ExpectNear(Values<float>((*out)[0]), {12, 39});
  // Batched matmul with the batch broadcast from 1.
  const Floats a = Random(1 * 2 * 3, 4), b = Random(4 * 3 * 2, 5);
  const Tensor ta = F32({1, 2, 3}, a), tb = F32({4, 3, 2}, b);
  out = RunOp("Einsum", {&ta, &tb}, {{"equation", std::string("...ij,...jk->...ik")}});
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ((*out)[0].shape(), (Shape{4, 2, 2}));
  Floats want(16, 0);
  for (int n = 0; n < 4; ++n)
    for (int i = 0; i < 2; ++i)
      for (int k = 0; k < 2; ++k)
        for (int j = 0; j < 3; ++j) want[n * 4 + i * 2 + k] += a[i * 3 + j] * b[n * 6 + j * 2 + k];
  ExpectNear(Values<float>((*out)[0]), want);
  // An ellipsis of different lengths aligns right.
  const Tensor m = F32({2, 3}, Seq(6)), w = F32({3}, {1, 10, 100});
  out = RunOp("Einsum", {&m, &w}, {{"equation", std::string("...,...->...")}});
  ASSERT_TRUE(out.ok()) << out.status();
  ExpectNear(Values<float>((*out)[0]), {0, 10, 200, 3, 40, 500});
  // Three operands.
  out = RunOp("Einsum", {&w, &m, &w}, {{"equation", std::string("j,ij,j->i")}});
  ASSERT_TRUE(out.ok()) << out.status();
  ExpectNear(Values<float>((*out)[0]), {0 + 100 * 1 + 10000 * 2, 3 + 100 * 4 + 10000 * 5});
}

TEST(EinsumTest, IntegerDTypesAndZeroSize) {
  const Tensor a = I64({2, 2}, {1, 2, 3, 4}), b = I64({2, 2}, {5, 6, 7, 8});
  auto out = RunOp("Einsum", {&a, &b}, {{"equation", std::string("ij,jk->ik")}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(Values<int64_t>((*out)[0]), ElementsAre(19, 22, 43, 50));
  const Tensor c = I32({3}, {1, -2, 3});
  out = RunOp("Einsum", {&c, &c}, {{"equation", std::string("i,i->")}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(Values<int32_t>((*out)[0]), ElementsAre(14));
  const Tensor e = F32({2, 0}, {}), f = F32({0, 3}, {});
  out = RunOp("Einsum", {&e, &f}, {{"equation", std::string("ij,jk->ik")}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].shape(), (Shape{2, 3}));
  ExpectNear(Values<float>((*out)[0]), Floats(6, 0.0f));
  const Tensor g = F32({0, 3}, {});
  out = RunOp("Einsum", {&g}, {{"equation", std::string("ij->j")}});
  ASSERT_TRUE(out.ok()) << out.status();
  ExpectNear(Values<float>((*out)[0]), Floats(3, 0.0f));
}

TEST(EinsumTest, MalformedEquations) {
  const Tensor a = F32({2, 3}, Seq(6)), b = F32({3, 4}, Seq(12));
  auto err = [&](std::vector<const Tensor*> ins, const std::string& eq) {
    return RunOp("Einsum", ins, {{"equation", eq}}).status();
  };
  EXPECT_TRUE(ErrorContains(err({&a, &b}, "ij,jk,kl->il"), "3 input terms but the node has 2 inputs"));
  EXPECT_TRUE(ErrorContains(err({&a}, "ijk->i"), "names 3 dims but input 0 has rank 2"));
  EXPECT_TRUE(ErrorContains(err({&a}, "i->i"), "has rank 2"));
  EXPECT_TRUE(ErrorContains(err({&a}, "i1"), "the character '1'"));
  EXPECT_TRUE(ErrorContains(err({&a}, "i..j"), "not part of '...'"));
  EXPECT_TRUE(ErrorContains(err({&a}, "...i...->i"), "more than one '...'"));
  EXPECT_TRUE(ErrorContains(err({&a}, "ij->k"), "no input term has"));
  EXPECT_TRUE(ErrorContains(err({&a}, "ij->ii"), "more than once"));
  EXPECT_TRUE(ErrorContains(err({&a}, "ij->i->j"), "more than one '->'"));
  EXPECT_TRUE(ErrorContains(err({&a}, "ij->i,j"), "','"));
  EXPECT_TRUE(ErrorContains(err({&a}, "...j->j"), "has no '...'"));
  EXPECT_TRUE(ErrorContains(err({&a, &a}, "ij,jk->ik"), "size"));
  EXPECT_TRUE(ErrorContains(err({&a}, "ii->i"), "size"));
  EXPECT_TRUE(ErrorContains(RunOp("Einsum", {&a}).status(), "equation"));
  const Tensor i = I64({2, 3}, {1, 2, 3, 4, 5, 6});
  EXPECT_TRUE(ErrorContains(err({&a, &i}, "ij,ij->ij"), "same dtype"));
  const Tensor bl = Bools({2}, {1, 0});
  EXPECT_TRUE(ErrorContains(err({&bl}, "i->i"), "dtype"));
  // The kernel's own checks.
  EXPECT_TRUE(ErrorContains(
      RunKernelPlanned("Einsum", {&a, &a}, DType::kF32, {2, 3}, {{"equation", std::string("ij,jk->ik")}}).status(),
      "size"));
  EXPECT_TRUE(ErrorContains(
      RunKernelPlanned("Einsum", {&a, &b}, DType::kF32, {2, 5}, {{"equation", std::string("ij,jk->ik")}}).status(),
      "planned"));
}

TEST(EinsumTest, SymbolicShapes) {
  const SymDim batch = SymDim::Symbol(0), seq = SymDim::Symbol(1);
  auto out = InferSymbolic("Einsum", {{DType::kF32, {batch, seq, 8}}, {DType::kF32, {batch, 8, 4}}},
                           {{"equation", std::string("bij,bjk->bik")}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->shape, (SymShape{batch, seq, 4}));
  out = InferSymbolic("Einsum", {{DType::kF32, {1, seq, 8}}, {DType::kF32, {batch, 8, 4}}},
                      {{"equation", std::string("...ij,...jk->...ik")}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->shape, (SymShape{batch, seq, 4}));
  EXPECT_TRUE(ErrorContains(InferSymbolic("Einsum", {{DType::kF32, {batch, 3}}, {DType::kF32, {4, 2}}},
                                          {{"equation", std::string("ij,jk->ik")}})
                                .status(),
                            "is 4 but the same subscript elsewhere has size 3"));
}

// ---------------------------------------------------------------------------
// Symbolic shapes of the others
// ---------------------------------------------------------------------------

TEST(IndexingShapeTest, SymbolicInputs) {
  const SymDim n = SymDim::Symbol(0), h = SymDim::Symbol(1);
  auto out = InferSymbolic("DepthToSpace", {{DType::kF32, {n, 8, h, 3}}}, {{"blocksize", int64_t{2}}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->shape, (SymShape{n, 2, h * SymDim(2), 6}));
  out = InferSymbolic("SpaceToDepth", {{DType::kF32, {n, 3, h * SymDim(2), 4}}}, {{"blocksize", int64_t{2}}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->shape, (SymShape{n, 12, h, 2}));
  out = InferSymbolic("GatherND", {{DType::kF32, {n, 5, 6}}, {DType::kI64, {n, h, 1}}}, {{"batch_dims", int64_t{1}}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->shape, (SymShape{n, h, 6}));
  EXPECT_TRUE(ErrorContains(InferSymbolic("GatherND", {{DType::kF32, {n, 5}}, {DType::kI64, {3, h}}}).status(),
                            "must be known"));
  out = InferSymbolic("ScatterElements", {{DType::kF32, {n, 5}}, {DType::kI64, {h, 2}}, {DType::kF32, {h, 2}}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->shape, (SymShape{n, 5}));
  out = InferSymbolic("EyeLike", {{DType::kF32, {n, h}}}, {{"dtype", static_cast<int64_t>(DType::kI64)}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->dtype, DType::kI64);
  EXPECT_EQ(out->shape, (SymShape{n, h}));
  out = InferSymbolic("ReverseSequence", {{DType::kF32, {h, n, 3}}, {DType::kI64, {n}}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->shape, (SymShape{h, n, 3}));
  out = InferSymbolic("Det", {{DType::kF32, {n, h, h}}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->shape, (SymShape{n}));
  EXPECT_TRUE(ErrorContains(InferSymbolic("Det", {{DType::kF32, {n, 2, 3}}}).status(), "square"));
}

}  // namespace
}  // namespace grove::testing
