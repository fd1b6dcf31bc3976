// Reshape, Transpose, Concat, Gather, Slice and Shape against naive
// references. Data-movement results are checked byte for byte through an
// element map (output element i comes from input element src[i]), so one
// reference serves all nine dtypes. Also every error the shape functions and
// kernels return, and the shape functions on symbolic dims.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

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

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
constexpr int64_t kMin = std::numeric_limits<int64_t>::min();

const DType kAllTypes[] = {DType::kF32, DType::kF64, DType::kF16, DType::kBF16, DType::kI64,
                           DType::kI32, DType::kI8,  DType::kU8,  DType::kBool};

int64_t Count(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

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

// Each element's bytes spell its index (and a tag per input), so a misplaced
// element shows up in every dtype.
Tensor Pattern(DType t, const Shape& shape, int tag = 0) {
  Tensor out = Tensor::Create(t, shape).value();
  const size_t es = DTypeSize(t);
  auto* p = static_cast<uint8_t*>(out.data());
  for (int64_t i = 0; i < Count(shape); ++i) {
    const uint64_t v = static_cast<uint64_t>(i) * 0x9e3779b1u + static_cast<uint64_t>(tag) * 0x85ebca6bu + 1;
    std::memcpy(p + i * es, &v, es);
  }
  return out;
}

Tensor I64(const Shape& shape, const std::vector<int64_t>& v) { return MakeTensor<int64_t>(DType::kI64, shape, v); }
Tensor I64(const std::vector<int64_t>& v) { return I64({static_cast<int64_t>(v.size())}, v); }
Tensor I32(const std::vector<int32_t>& v) {
  return MakeTensor<int32_t>(DType::kI32, {static_cast<int64_t>(v.size())}, v);
}

// out[i] == inputs[src[i].first] element src[i].second, byte for byte.
void ExpectMoved(const std::vector<const Tensor*>& inputs, const Tensor& out,
                 const std::vector<std::pair<int, int64_t>>& src) {
  ASSERT_EQ(out.view().num_elements(), static_cast<int64_t>(src.size()));
  const size_t es = DTypeSize(out.dtype());
  for (size_t i = 0; i < src.size(); ++i) {
    const auto* in = static_cast<const uint8_t*>(inputs[src[i].first]->data()) + src[i].second * es;
    const auto* o = static_cast<const uint8_t*>(out.data()) + i * es;
    ASSERT_EQ(std::memcmp(in, o, es), 0) << "element " << i << " of " << DTypeName(out.dtype());
  }
}

void ExpectMoved(const Tensor& in, const Tensor& out, const std::vector<int64_t>& src) {
  std::vector<std::pair<int, int64_t>> s;
  for (int64_t i : src) s.push_back({0, i});
  ExpectMoved({&in}, out, s);
}

// ---------------------------------------------------------------------------
// Reshape
// ---------------------------------------------------------------------------

void CheckReshape(DType t, const Shape& in_shape, const std::vector<int64_t>& dims, const Shape& want,
                  int64_t allowzero = 0) {
  SCOPED_TRACE(::testing::Message() << DTypeName(t) << " " << ::testing::PrintToString(in_shape) << " -> "
                                    << ::testing::PrintToString(dims));
  const Tensor x = Pattern(t, in_shape);
  const Tensor s = I64(dims);
  auto out = RunOp("Reshape", {&x, &s}, {{"allowzero", allowzero}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].shape(), want);
  EXPECT_EQ((*out)[0].dtype(), t);
  std::vector<int64_t> identity(static_cast<size_t>(Count(want)));
  for (size_t i = 0; i < identity.size(); ++i) identity[i] = static_cast<int64_t>(i);
  ExpectMoved(x, (*out)[0], identity);
}

TEST(ReshapeTest, AllDTypes) {
  for (DType t : kAllTypes) {
    CheckReshape(t, {2, 3, 4}, {4, -1}, {4, 6});
    CheckReshape(t, {2, 3, 4}, {0, -1}, {2, 12});
    CheckReshape(t, {2, 3, 4}, {0, 0, 2, 2}, {2, 3, 2, 2});
    CheckReshape(t, {24}, {2, 3, 4}, {2, 3, 4});
  }
}

TEST(ReshapeTest, EdgeShapes) {
  CheckReshape(DType::kF32, {1}, {}, {});                 // to a scalar
  CheckReshape(DType::kF32, {}, {1, 1}, {1, 1});          // from a scalar
  CheckReshape(DType::kF32, {}, {-1}, {1});
  CheckReshape(DType::kF32, {0, 3}, {-1, 3}, {0, 3});     // -1 over zero elements
  CheckReshape(DType::kF32, {0, 3}, {0, 3}, {0, 3});      // 0 copies the zero dim
  CheckReshape(DType::kF32, {0, 3}, {3, 0}, {3, 0}, 1);   // allowzero: a literal 0
  CheckReshape(DType::kF32, {2, 0}, {0, 7}, {0, 7}, 1);
  CheckReshape(DType::kF32, {2, 3}, {3, 2}, {3, 2}, 1);
}

TEST(ReshapeTest, Errors) {
  const Tensor x = Pattern(DType::kF32, {2, 3, 4});
  auto err = [&](const std::vector<int64_t>& dims, int64_t allowzero = 0) {
    const Tensor s = I64(dims);
    return RunOp("Reshape", {&x, &s}, {{"allowzero", allowzero}}).status();
  };
  EXPECT_TRUE(ErrorContains(err({-1, -1}), "more than one -1"));
  EXPECT_TRUE(ErrorContains(err({-2, 12}), "dims must be >= -1"));
  EXPECT_TRUE(ErrorContains(err({5, 5}), "(24 elements) into [5, 5] (25 elements)"));
  EXPECT_TRUE(ErrorContains(err({5, -1}), "24 is not a multiple of 5"));
  EXPECT_TRUE(ErrorContains(err({2, 3, 4, 0}), "dim 3 is 0 (copy the input dim) but the input [2, 3, 4] has rank 3"));
  EXPECT_TRUE(ErrorContains(err({0, -1}, 1), "both 0 and -1"));
  EXPECT_TRUE(ErrorContains(err({2, 3, 4}, 2), "allowzero is 2"));
  EXPECT_TRUE(ErrorContains(err({kMax, kMax}), "overflows"));
  const Tensor zero = Pattern(DType::kF32, {3, 0});
  const Tensor s0 = I64({-1, 0});
  EXPECT_TRUE(ErrorContains(RunOp("Reshape", {&zero, &s0}).status(), "the other dims multiply to 0"));
  const Tensor s32 = I32({4, 6});
  EXPECT_TRUE(ErrorContains(RunOp("Reshape", {&x, &s32}).status(), "shape (input 1) has dtype i32; expected i64"));
  const Tensor s2d = I64({2, 1}, {4, 6});
  EXPECT_TRUE(ErrorContains(RunOp("Reshape", {&x, &s2d}).status(), "must be a 1-D tensor"));
}

TEST(ReshapeTest, SymbolicShapes) {
  const SymDim b = SymDim::Symbol(0), s = SymDim::Symbol(1);
  const Tensor keep = I64({0, 0, -1});
  auto out = InferSymbolic("Reshape", {{DType::kF32, {b, s, 4, 8}}, {DType::kI64, {3}, &keep}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->shape, (SymShape{b, s, 32}));

  const Tensor flat = I64({-1, 32});
  out = InferSymbolic("Reshape", {{DType::kF32, {b, s, 4, 8}}, {DType::kI64, {2}, &flat}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->shape, (SymShape{b * s, 32}));

  const Tensor heads = I64({0, 0, 4, -1});
  out = InferSymbolic("Reshape", {{DType::kF32, {b, s, 32}}, {DType::kI64, {4}, &heads}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->shape, (SymShape{b, s, 4, 8}));

  // -1 that the symbolic division cannot express: an unknown dim.
  const Tensor odd = I64({3, -1});
  out = InferSymbolic("Reshape", {{DType::kF32, {b, 4}}, {DType::kI64, {2}, &odd}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->shape[0], SymDim(3));
  EXPECT_TRUE(out->shape[1].is_unknown());

  // Different symbolic counts: accepted now, the kernel checks them.
  const Tensor five = I64({0, 5});
  EXPECT_TRUE(InferSymbolic("Reshape", {{DType::kF32, {b, 4}}, {DType::kI64, {2}, &five}}).ok());
  const Tensor x = Pattern(DType::kF32, {2, 4});
  EXPECT_TRUE(ErrorContains(RunKernelPlanned("Reshape", {&x, &five}, DType::kF32, {2, 5}).status(),
                            "Reshape of [2, 4] (8 elements) into [2, 5] (10 elements) at run time"));

  // Unknown shape value: the rank comes from the shape tensor's length.
  out = InferSymbolic("Reshape", {{DType::kF32, {b, s}}, {DType::kI64, {3}}});
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->shape.size(), 3u);
  for (const SymDim& d : out->shape) EXPECT_TRUE(d.is_unknown());
  EXPECT_TRUE(ErrorContains(InferSymbolic("Reshape", {{DType::kF32, {b, s}}, {DType::kI64, {s}}}).status(),
                            "must be a 1-D tensor with a known length"));
}

// ---------------------------------------------------------------------------
// Transpose
// ---------------------------------------------------------------------------

void CheckTranspose(DType t, const Shape& in_shape, const std::vector<int64_t>& perm) {
  SCOPED_TRACE(::testing::Message() << DTypeName(t) << " " << ::testing::PrintToString(in_shape) << " perm "
                                    << ::testing::PrintToString(perm));
  const Tensor x = Pattern(t, in_shape);
  Attrs attrs;
  std::vector<int64_t> p = perm;
  if (!perm.empty() || in_shape.empty()) {
    attrs.push_back({"perm", perm});
  } else {
    for (int i = static_cast<int>(in_shape.size()) - 1; i >= 0; --i) p.push_back(i);
  }
  auto out = RunOp("Transpose", {&x}, attrs);
  ASSERT_TRUE(out.ok()) << out.status();
  Shape want(in_shape.size());
  for (size_t i = 0; i < p.size(); ++i) want[i] = in_shape[p[i]];
  EXPECT_EQ((*out)[0].shape(), want);
  std::vector<int64_t> src;
  for (int64_t i = 0; i < Count(want); ++i) {
    const Shape o = Unravel(i, want);
    Shape in_idx(in_shape.size());
    for (size_t d = 0; d < p.size(); ++d) in_idx[p[d]] = o[d];
    src.push_back(Ravel(in_idx, in_shape));
  }
  ExpectMoved(x, (*out)[0], src);
}

TEST(TransposeTest, AllDTypes) {
  for (DType t : kAllTypes) {
    CheckTranspose(t, {2, 3, 4}, {});  // default: reversed
    CheckTranspose(t, {2, 3, 4}, {1, 0, 2});
    CheckTranspose(t, {2, 3, 4}, {2, 0, 1});
    CheckTranspose(t, {3, 5}, {1, 0});
  }
}

TEST(TransposeTest, EdgeShapes) {
  CheckTranspose(DType::kF32, {}, {});  // scalar
  CheckTranspose(DType::kF32, {7}, {0});
  CheckTranspose(DType::kF32, {0, 3}, {1, 0});
  CheckTranspose(DType::kF32, {1, 3, 1, 4}, {3, 1, 0, 2});
  CheckTranspose(DType::kF64, {2, 3, 1, 4, 5}, {4, 2, 0, 3, 1});
  CheckTranspose(DType::kI8, {3, 4, 5, 2}, {0, 1, 3, 2});
}

TEST(TransposeTest, Errors) {
  const Tensor x = Pattern(DType::kF32, {2, 3, 4});
  auto err = [&](std::vector<int64_t> perm) { return RunOp("Transpose", {&x}, {{"perm", perm}}).status(); };
  EXPECT_TRUE(ErrorContains(err({1, 0}), "has 2 entries but the input [2, 3, 4] has rank 3"));
  EXPECT_TRUE(ErrorContains(err({0, 1, 1}), "is not a permutation of 0..2"));
  EXPECT_TRUE(ErrorContains(err({0, 1, 3}), "is not a permutation"));
  EXPECT_TRUE(ErrorContains(err({-1, 0, 1}), "is not a permutation"));
  EXPECT_TRUE(ErrorContains(RunKernelPlanned("Transpose", {&x}, DType::kF32, {3, 2, 4}).status(),
                            "planned output is [3, 2, 4]"));
}

TEST(TransposeTest, SymbolicShapes) {
  const SymDim b = SymDim::Symbol(0), s = SymDim::Symbol(1);
  auto out = InferSymbolic("Transpose", {{DType::kF16, {b, s, 4, 8}}}, {{"perm", std::vector<int64_t>{0, 2, 1, 3}}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->shape, (SymShape{b, 4, s, 8}));
  EXPECT_EQ(out->dtype, DType::kF16);
}

// ---------------------------------------------------------------------------
// Concat
// ---------------------------------------------------------------------------

void CheckConcat(DType t, const std::vector<Shape>& shapes, int64_t axis) {
  SCOPED_TRACE(::testing::Message() << DTypeName(t) << " axis " << axis);
  std::vector<Tensor> xs;
  for (size_t i = 0; i < shapes.size(); ++i) xs.push_back(Pattern(t, shapes[i], static_cast<int>(i) + 1));
  std::vector<const Tensor*> ins;
  for (const Tensor& x : xs) ins.push_back(&x);
  auto out = RunOp("Concat", ins, {{"axis", axis}});
  ASSERT_TRUE(out.ok()) << out.status();
  const int64_t a = axis < 0 ? axis + static_cast<int64_t>(shapes[0].size()) : axis;
  Shape want = shapes[0];
  want[a] = 0;
  for (const Shape& s : shapes) want[a] += s[a];
  EXPECT_EQ((*out)[0].shape(), want);
  std::vector<std::pair<int, int64_t>> src;
  for (int64_t i = 0; i < Count(want); ++i) {
    Shape idx = Unravel(i, want);
    int k = 0;
    while (idx[a] >= shapes[k][a]) idx[a] -= shapes[k++][a];
    src.push_back({k, Ravel(idx, shapes[k])});
  }
  ExpectMoved(ins, (*out)[0], src);
}

TEST(ConcatTest, AllDTypes) {
  for (DType t : kAllTypes) {
    CheckConcat(t, {{2, 1, 3}, {2, 2, 3}, {2, 0, 3}}, 1);
    CheckConcat(t, {{2, 3}, {4, 3}}, 0);
    CheckConcat(t, {{2, 3}, {2, 1}}, -1);
  }
}

TEST(ConcatTest, EdgeShapes) {
  CheckConcat(DType::kF32, {{3, 2}}, 0);            // one input
  CheckConcat(DType::kF32, {{0, 2}, {0, 2}}, 0);    // all empty
  CheckConcat(DType::kF32, {{0, 2}, {0, 3}}, 1);    // empty outer
  CheckConcat(DType::kF32, {{5}, {0}, {2}}, 0);     // rank 1, an empty middle
  CheckConcat(DType::kU8, {{2, 2, 2}, {2, 2, 1}, {2, 2, 3}}, -1);
}

TEST(ConcatTest, Errors) {
  const Tensor a = Pattern(DType::kF32, {2, 3});
  const Tensor b = Pattern(DType::kF32, {3, 3});
  const Tensor c = Pattern(DType::kF64, {2, 3});
  const Tensor d = Pattern(DType::kF32, {2, 3, 1});
  const Tensor s = Pattern(DType::kF32, {});
  EXPECT_TRUE(ErrorContains(RunOp("Concat", {&a, &b}).status(), "needs the attribute axis"));
  EXPECT_TRUE(ErrorContains(RunOp("Concat", {&a, &b}, {{"axis", int64_t{1}}}).status(),
                            "input 1 has shape [3, 3]; dim 0 must equal 2"));
  EXPECT_TRUE(ErrorContains(RunOp("Concat", {&a, &c}, {{"axis", int64_t{0}}}).status(),
                            "input 1 has dtype f64 but input 0 has f32"));
  EXPECT_TRUE(ErrorContains(RunOp("Concat", {&a, &d}, {{"axis", int64_t{0}}}).status(), "(rank 3) but input 0 has rank 2"));
  EXPECT_TRUE(ErrorContains(RunOp("Concat", {&s, &s}, {{"axis", int64_t{0}}}).status(), "scalar"));
  EXPECT_TRUE(ErrorContains(RunOp("Concat", {&a, &a}, {{"axis", int64_t{2}}}).status(), "axis 2 is out of range"));
  EXPECT_TRUE(ErrorContains(RunOp("Concat", {&a, nullptr}, {{"axis", int64_t{0}}}).status(), "input 1 is missing"));
  EXPECT_TRUE(ErrorContains(RunKernelPlanned("Concat", {&a, &b}, DType::kF32, {2, 6}, {{"axis", int64_t{1}}}).status(),
                            "Concat input 1 has shape [3, 3] (f32), which does not match the output [2, 6]"));
  EXPECT_TRUE(ErrorContains(RunKernelPlanned("Concat", {&a, &a}, DType::kF32, {2, 7}, {{"axis", int64_t{1}}}).status(),
                            "sum to 6 along axis 1"));
}

TEST(ConcatTest, SymbolicShapes) {
  const SymDim b = SymDim::Symbol(0), s = SymDim::Symbol(1);
  auto out = InferSymbolic("Concat", {{DType::kF32, {b, 3}}, {DType::kF32, {b, 5}}}, {{"axis", int64_t{1}}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->shape, (SymShape{b, 8}));
  // The KV-cache pattern: past + new along a symbolic axis.
  out = InferSymbolic("Concat", {{DType::kF32, {b, s, 3}}, {DType::kF32, {b, 1, 3}}}, {{"axis", int64_t{-2}}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->shape, (SymShape{b, s + 1, 3}));
  // A symbolic dim next to a constant one: the constant wins, checked at run time.
  out = InferSymbolic("Concat", {{DType::kF32, {b, 3}}, {DType::kF32, {2, 5}}}, {{"axis", int64_t{1}}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->shape, (SymShape{2, 8}));
}

// ---------------------------------------------------------------------------
// Gather
// ---------------------------------------------------------------------------

template <typename I>
void CheckGather(DType t, const Shape& data_shape, DType it, const Shape& idx_shape, const std::vector<I>& idx,
                 int64_t axis) {
  SCOPED_TRACE(::testing::Message() << DTypeName(t) << " data " << ::testing::PrintToString(data_shape)
                                    << " axis " << axis);
  const Tensor x = Pattern(t, data_shape);
  const Tensor ind = MakeTensor<I>(it, idx_shape, idx);
  Attrs attrs;
  if (axis != 0) attrs.push_back({"axis", axis});
  auto out = RunOp("Gather", {&x, &ind}, attrs);
  ASSERT_TRUE(out.ok()) << out.status();
  const int64_t a = axis < 0 ? axis + static_cast<int64_t>(data_shape.size()) : axis;
  Shape want(data_shape.begin(), data_shape.begin() + a);
  want.insert(want.end(), idx_shape.begin(), idx_shape.end());
  want.insert(want.end(), data_shape.begin() + a + 1, data_shape.end());
  EXPECT_EQ((*out)[0].shape(), want);
  std::vector<int64_t> src;
  const size_t q = idx_shape.size();
  for (int64_t i = 0; i < Count(want); ++i) {
    const Shape o = Unravel(i, want);
    Shape in_idx(o.begin(), o.begin() + a);
    int64_t k = static_cast<int64_t>(idx[Ravel(Shape(o.begin() + a, o.begin() + a + q), idx_shape)]);
    if (k < 0) k += data_shape[a];
    in_idx.push_back(k);
    in_idx.insert(in_idx.end(), o.begin() + a + q, o.end());
    src.push_back(Ravel(in_idx, data_shape));
  }
  ExpectMoved(x, (*out)[0], src);
}

TEST(GatherTest, AllDTypes) {
  for (DType t : kAllTypes) {
    CheckGather<int64_t>(t, {3, 4}, DType::kI64, {3}, {2, 0, -1}, 0);
    CheckGather<int32_t>(t, {3, 4}, DType::kI32, {2, 2}, {0, 3, -3, 1}, 1);
    CheckGather<int64_t>(t, {3, 4}, DType::kI64, {}, {1}, 0);  // scalar index drops the axis
  }
}

TEST(GatherTest, EdgeShapes) {
  CheckGather<int64_t>(DType::kF32, {2, 3, 4}, DType::kI64, {2, 1}, {3, -4}, -1);
  CheckGather<int64_t>(DType::kF32, {2, 3, 4}, DType::kI64, {}, {-2}, 1);
  CheckGather<int64_t>(DType::kF32, {3, 4}, DType::kI64, {0}, {}, 0);      // no indices
  CheckGather<int64_t>(DType::kF32, {0, 4}, DType::kI64, {2}, {1, 0}, 1);  // empty outer
  CheckGather<int32_t>(DType::kF32, {5}, DType::kI32, {2, 3}, {4, 3, 2, 1, 0, -5}, 0);
}

TEST(GatherTest, Errors) {
  const Tensor x = Pattern(DType::kF32, {3, 4});
  auto err = [&](std::vector<int64_t> idx, int64_t axis = 0) {
    const Tensor ind = I64(idx);
    return RunOp("Gather", {&x, &ind}, {{"axis", axis}}).status();
  };
  EXPECT_TRUE(ErrorContains(err({0, 3}), "index 3 is out of range for axis 0 of size 3"));
  EXPECT_TRUE(ErrorContains(err({-4}), "index -4 is out of range"));
  EXPECT_TRUE(ErrorContains(err({4}, 1), "index 4 is out of range for axis 1 of size 4"));
  EXPECT_TRUE(ErrorContains(err({0}, 2), "axis 2 is out of range for rank 2"));
  EXPECT_TRUE(ErrorContains(err({0}, -3), "axis -3 is out of range"));
  const Tensor f = MakeTensor<float>(DType::kF32, {1}, {0});
  EXPECT_TRUE(ErrorContains(RunOp("Gather", {&x, &f}).status(), "indices (input 1) has dtype f32; expected i32 or i64"));
  const Tensor s = Pattern(DType::kF32, {});
  const Tensor i0 = I64({0});
  EXPECT_TRUE(ErrorContains(RunOp("Gather", {&s, &i0}).status(), "scalar"));
  const Tensor empty = Pattern(DType::kF32, {0, 2});
  EXPECT_TRUE(ErrorContains(RunOp("Gather", {&empty, &i0}).status(), "out of range for axis 0 of size 0"));
}

TEST(GatherTest, SymbolicShapes) {
  const SymDim b = SymDim::Symbol(0), s = SymDim::Symbol(1);
  // Embedding lookup.
  auto out = InferSymbolic("Gather", {{DType::kF32, {1000, 16}}, {DType::kI64, {b, s}}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->shape, (SymShape{b, s, 16}));
  out = InferSymbolic("Gather", {{DType::kF32, {b, s, 16}}, {DType::kI64, {}}}, {{"axis", int64_t{1}}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->shape, (SymShape{b, 16}));
}

// ---------------------------------------------------------------------------
// Slice
// ---------------------------------------------------------------------------

// The indices one axis visits, by walking as the ONNX spec describes
// (bounds clamped, then start, start+step, ... while before end).
std::vector<int64_t> RefSliceAxis(int64_t dim, int64_t start, int64_t end, int64_t step) {
  if (start < 0) start += dim;
  if (end < 0) end += dim;
  std::vector<int64_t> out;
  if (step > 0) {
    start = std::min(std::max<int64_t>(start, 0), dim);
    end = std::min(std::max<int64_t>(end, 0), dim);
    for (int64_t i = start; i < end; i += step) {
      out.push_back(i);
      if (end - i <= step) break;
    }
  } else {
    start = std::min(std::max<int64_t>(start, 0), dim - 1);
    end = std::min(std::max<int64_t>(end, -1), dim - 1);
    const uint64_t back = uint64_t{0} - static_cast<uint64_t>(step);
    for (int64_t i = start; i > end;) {
      out.push_back(i);
      if (static_cast<uint64_t>(i - end) <= back) break;
      i -= static_cast<int64_t>(back);
    }
  }
  return out;
}

struct SliceSpec {
  std::vector<int64_t> starts, ends, axes, steps;  // empty axes/steps: omitted
};

void CheckSlice(DType t, const Shape& shape, const SliceSpec& sp) {
  SCOPED_TRACE(::testing::Message() << DTypeName(t) << " " << ::testing::PrintToString(shape) << " starts "
                                    << ::testing::PrintToString(sp.starts) << " ends "
                                    << ::testing::PrintToString(sp.ends) << " axes "
                                    << ::testing::PrintToString(sp.axes) << " steps "
                                    << ::testing::PrintToString(sp.steps));
  const Tensor x = Pattern(t, shape);
  const Tensor st = I64(sp.starts), en = I64(sp.ends), ax = I64(sp.axes), sx = I64(sp.steps);
  auto out = RunOp("Slice", {&x, &st, &en, sp.axes.empty() ? nullptr : &ax, sp.steps.empty() ? nullptr : &sx});
  ASSERT_TRUE(out.ok()) << out.status();
  std::vector<std::vector<int64_t>> visit(shape.size());
  for (size_t d = 0; d < shape.size(); ++d)
    for (int64_t i = 0; i < shape[d]; ++i) visit[d].push_back(i);
  for (size_t i = 0; i < sp.starts.size(); ++i) {
    int64_t a = sp.axes.empty() ? static_cast<int64_t>(i) : sp.axes[i];
    if (a < 0) a += static_cast<int64_t>(shape.size());
    visit[a] = RefSliceAxis(shape[a], sp.starts[i], sp.ends[i], sp.steps.empty() ? 1 : sp.steps[i]);
  }
  Shape want;
  for (const auto& v : visit) want.push_back(static_cast<int64_t>(v.size()));
  ASSERT_EQ((*out)[0].shape(), want);
  std::vector<int64_t> src;
  for (int64_t i = 0; i < Count(want); ++i) {
    Shape o = Unravel(i, want);
    for (size_t d = 0; d < o.size(); ++d) o[d] = visit[d][o[d]];
    src.push_back(Ravel(o, shape));
  }
  ExpectMoved(x, (*out)[0], src);
}

TEST(SliceTest, AllDTypes) {
  for (DType t : kAllTypes) {
    CheckSlice(t, {4, 5}, {{1, 0}, {3, 5}, {}, {}});
    CheckSlice(t, {4, 5}, {{-1}, {kMin}, {1}, {-2}});
    CheckSlice(t, {2, 3, 4}, {{1}, {kMax}, {-2}, {}});
  }
}

TEST(SliceTest, ClampingAgainstWalkReference) {
  const int64_t bounds[] = {kMin, -7, -5, -4, -1, 0, 1, 3, 4, 5, 7, kMax};
  const int64_t steps[] = {1, 2, 3, 7, kMax, -1, -2, -3, kMin};
  for (int64_t s : bounds)
    for (int64_t e : bounds)
      for (int64_t st : steps) {
        CheckSlice(DType::kF32, {5, 4}, {{s}, {e}, {0}, {st}});
        CheckSlice(DType::kI8, {5, 4}, {{s}, {e}, {-1}, {st}});
      }
}

TEST(SliceTest, EdgeShapes) {
  CheckSlice(DType::kF32, {0, 3}, {{0}, {kMax}, {0}, {}});        // empty axis
  CheckSlice(DType::kF32, {0, 3}, {{-1}, {kMin}, {0}, {-1}});     // empty axis, backwards
  CheckSlice(DType::kF32, {3, 4}, {{5}, {10}, {1}, {}});          // start past the end
  CheckSlice(DType::kF32, {3, 4, 2}, {{}, {}, {}, {}});           // no axes at all
  CheckSlice(DType::kF32, {2, 3, 4}, {{0, 1, 0}, {2, 3, 4}, {}, {2, 1, 3}});
  CheckSlice(DType::kF64, {2, 3, 4}, {{3, 2}, {kMin, 0}, {2, 1}, {-1, -2}});
}

TEST(SliceTest, OptionalInputsAndI32) {
  const Tensor x = Pattern(DType::kF32, {4, 5});
  const Tensor st = I32({1}), en = I32({5}), ax = I32({1}), sx = I32({2});
  // Steps without axes: axes default to 0..n-1.
  auto out = RunOp("Slice", {&x, &st, &en, nullptr, &sx});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].shape(), (Shape{2, 5}));
  ExpectMoved(x, (*out)[0], {5, 6, 7, 8, 9, 15, 16, 17, 18, 19});
  out = RunOp("Slice", {&x, &st, &en, &ax, &sx});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].shape(), (Shape{4, 2}));
  ExpectMoved(x, (*out)[0], {1, 3, 6, 8, 11, 13, 16, 18});
}

TEST(SliceTest, Errors) {
  const Tensor x = Pattern(DType::kF32, {4, 5});
  auto err = [&](std::vector<int64_t> s, std::vector<int64_t> e, std::vector<int64_t> a, std::vector<int64_t> st) {
    const Tensor ts = I64(s), te = I64(e), ta = I64(a), tst = I64(st);
    return RunOp("Slice", {&x, &ts, &te, &ta, &tst}).status();
  };
  EXPECT_TRUE(ErrorContains(err({0}, {1}, {0}, {0}), "step must be non-zero"));
  EXPECT_TRUE(ErrorContains(err({0, 0}, {1, 1}, {1, -1}, {1, 1}), "repeat axis 1"));
  EXPECT_TRUE(ErrorContains(err({0}, {1}, {2}, {1}), "axis 2 is out of range for rank 2"));
  EXPECT_TRUE(ErrorContains(err({0, 0}, {1}, {0}, {1}), "ends (input 2) has 1 entries but starts has 2"));
  const Tensor s = Pattern(DType::kF32, {});
  const Tensor z = I64({0});
  EXPECT_TRUE(ErrorContains(RunOp("Slice", {&s, &z, &z}).status(), "scalar"));
  const Tensor f = MakeTensor<float>(DType::kF32, {1}, {0});
  EXPECT_TRUE(ErrorContains(RunOp("Slice", {&x, &f, &z}).status(), "starts (input 1) has dtype f32"));
  const Tensor i32 = I32({1});
  EXPECT_TRUE(ErrorContains(RunOp("Slice", {&x, &z, &i32}).status(), "ends (input 2) has dtype i32 but starts has i64"));
  const Tensor two_d = I64({1, 1}, {0});
  EXPECT_TRUE(ErrorContains(RunOp("Slice", {&x, &two_d, &two_d}).status(), "expected a 1-D tensor"));
  const Tensor three = I64({0, 0, 0});
  EXPECT_TRUE(ErrorContains(RunOp("Slice", {&x, &three, &three}).status(), "has 3 starts but the data [4, 5] has rank 2"));
  // Kernel-side checks, reached when the values were unknown at plan time.
  const Tensor one = I64({1}), zero_step = I64({0}), ax = I64({0});
  EXPECT_TRUE(ErrorContains(RunKernelPlanned("Slice", {&x, &z, &one, &ax, &zero_step}, DType::kF32, {1, 5}).status(),
                            "step must be non-zero"));
  EXPECT_TRUE(ErrorContains(RunKernelPlanned("Slice", {&x, &z, &one}, DType::kF32, {2, 5}).status(),
                            "planned output is [2, 5]"));
  const Tensor two = I64({0, 1});
  EXPECT_TRUE(ErrorContains(RunKernelPlanned("Slice", {&x, &two, &one}, DType::kF32, {1, 5}).status(),
                            "different lengths"));
}

TEST(SliceTest, SymbolicShapes) {
  const SymDim b = SymDim::Symbol(0), s = SymDim::Symbol(1);
  const Tensor one = I64({1}), big = I64({kMax}), ax1 = I64({1}), zero = I64({0}), four = I64({4}), ax2 = I64({2});
  const Tensor minus1 = I64({-1});
  // x[:, 1:] on a dynamic axis.
  auto out = InferSymbolic("Slice", {{DType::kF32, {b, s, 8}}, {DType::kI64, {1}, &one}, {DType::kI64, {1}, &big},
                                     {DType::kI64, {1}, &ax1}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->shape, (SymShape{b, s - 1, 8}));
  // A constant axis stays exact.
  out = InferSymbolic("Slice", {{DType::kF32, {b, s, 8}}, {DType::kI64, {1}, &zero}, {DType::kI64, {1}, &four},
                                {DType::kI64, {1}, &ax2}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->shape, (SymShape{b, s, 4}));
  // x[:, -1:] on a dynamic axis: not expressible, unknown.
  out = InferSymbolic("Slice", {{DType::kF32, {b, s, 8}}, {DType::kI64, {1}, &minus1}, {DType::kI64, {1}, &big},
                                {DType::kI64, {1}, &ax1}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->shape[0], b);
  EXPECT_TRUE(out->shape[1].is_unknown());
  // Unknown bounds, known axes: only that axis is unknown.
  out = InferSymbolic("Slice", {{DType::kF32, {b, s, 8}}, {DType::kI64, {1}}, {DType::kI64, {1}},
                                {DType::kI64, {1}, &ax2}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->shape[0], b);
  EXPECT_EQ(out->shape[1], s);
  EXPECT_TRUE(out->shape[2].is_unknown());
  // Unknown axes: every axis unknown, rank kept.
  out = InferSymbolic("Slice", {{DType::kF32, {b, s, 8}}, {DType::kI64, {1}, &zero}, {DType::kI64, {1}, &one},
                                {DType::kI64, {1}}});
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->shape.size(), 3u);
  for (const SymDim& d : out->shape) EXPECT_TRUE(d.is_unknown());
  // No axes input, unknown bounds of length 2: the first two axes.
  out = InferSymbolic("Slice", {{DType::kF32, {b, s, 8}}, {DType::kI64, {2}}, {DType::kI64, {2}}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(out->shape[0].is_unknown());
  EXPECT_TRUE(out->shape[1].is_unknown());
  EXPECT_EQ(out->shape[2], SymDim(8));
}

// ---------------------------------------------------------------------------
// Shape
// ---------------------------------------------------------------------------

TEST(ShapeTest, StartEndAndDTypes) {
  struct Case {
    Attrs attrs;
    std::vector<int64_t> want;
  };
  const Case cases[] = {
      {{}, {2, 3, 4}},
      {{{"start", int64_t{1}}}, {3, 4}},
      {{{"end", int64_t{-1}}}, {2, 3}},
      {{{"start", int64_t{-2}}, {"end", int64_t{10}}}, {3, 4}},
      {{{"start", int64_t{-10}}, {"end", int64_t{1}}}, {2}},
      {{{"start", int64_t{3}}, {"end", int64_t{1}}}, {}},
  };
  for (DType t : kAllTypes) {
    const Tensor x = Pattern(t, {2, 3, 4});
    for (const Case& c : cases) {
      auto out = RunOp("Shape", {&x}, c.attrs);
      ASSERT_TRUE(out.ok()) << out.status();
      EXPECT_EQ((*out)[0].dtype(), DType::kI64);
      EXPECT_EQ((*out)[0].shape(), (Shape{static_cast<int64_t>(c.want.size())}));
      EXPECT_EQ(Values<int64_t>((*out)[0]), c.want);
    }
  }
  const Tensor scalar = Pattern(DType::kF32, {});
  auto out = RunOp("Shape", {&scalar});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].shape(), (Shape{0}));
  const Tensor empty = Pattern(DType::kBool, {0, 5});
  out = RunOp("Shape", {&empty});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Values<int64_t>((*out)[0]), (std::vector<int64_t>{0, 5}));
}

TEST(ShapeTest, ReadsOnlyShapesAndIsSymbolicSafe) {
  const ir::OpDef* def = runtime::GlobalOpRegistry().Find("Shape");
  ASSERT_NE(def, nullptr);
  EXPECT_FALSE(def->reads_input_values);
  const SymDim b = SymDim::Symbol(0), s = SymDim::Symbol(1);
  auto out = InferSymbolic("Shape", {{DType::kF32, {b, s, 8}}}, {{"start", int64_t{1}}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->shape, (SymShape{2}));
  EXPECT_EQ(out->dtype, DType::kI64);
  const Tensor x = Pattern(DType::kF32, {2, 3});
  EXPECT_TRUE(ErrorContains(RunKernelPlanned("Shape", {&x}, DType::kI64, {3}).status(), "planned output is [3]"));
}

TEST(ShapeOpsTest, AllRegisteredWithCpuKernels) {
  for (const char* op : {"Reshape", "Transpose", "Concat", "Gather", "Slice", "Shape", "MatMul", "Gemm"}) {
    EXPECT_TRUE(runtime::GlobalOpRegistry().Supports(op, ir::Backend::kCpu)) << op;
  }
}

}  // namespace
}  // namespace grove::testing
