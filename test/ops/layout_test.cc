// The layout group (Flatten Squeeze Unsqueeze Split GatherElements ScatterND
// Expand Tile Pad Size Range ConstantOfShape Trilu OneHot) against naive
// references. Data movement is checked byte for byte through an element map
// (output element i comes from input element src[i]), so one reference
// serves all nine dtypes. Also the errors the shape functions and kernels
// return, symbolic shapes, and whole models whose shape inputs are known only
// when they run. Resize lives in resize_test.cc.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lib/ir/op_registry.h"
#include "lib/runtime/registry.h"
#include "test/model_test_util.h"
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

Tensor I64(const Shape& shape, const Ints& v) { return MakeTensor<int64_t>(DType::kI64, shape, v); }
Tensor I64(const Ints& v) { return I64({static_cast<int64_t>(v.size())}, v); }
Tensor I64Scalar(int64_t v) { return I64({}, {v}); }
Tensor I32(const std::vector<int32_t>& v) {
  return MakeTensor<int32_t>(DType::kI32, {static_cast<int64_t>(v.size())}, v);
}
Tensor F32(const Shape& shape, const std::vector<float>& v) { return MakeTensor<float>(DType::kF32, shape, v); }

// out[i] == in element src[i] byte for byte; src -1 means `fill` (bytes).
void ExpectMoved(const Tensor& in, const Tensor& out, const Ints& src, const void* fill = nullptr) {
  ASSERT_EQ(out.view().num_elements(), static_cast<int64_t>(src.size()));
  ASSERT_EQ(out.dtype(), in.dtype());
  const size_t es = DTypeSize(out.dtype());
  for (size_t i = 0; i < src.size(); ++i) {
    const auto* want = src[i] < 0 ? static_cast<const uint8_t*>(fill)
                                  : static_cast<const uint8_t*>(in.data()) + src[i] * static_cast<int64_t>(es);
    const auto* got = static_cast<const uint8_t*>(out.data()) + i * es;
    ASSERT_EQ(std::memcmp(want, got, es), 0) << "element " << i << " of " << DTypeName(out.dtype());
  }
}

Ints Iota(int64_t n) {
  Ints v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[i] = i;
  return v;
}

// The outputs of a shape function on symbolic inputs, all of them.
absl::StatusOr<std::vector<ir::ShapeContext::Output>> InferAll(const std::string& type,
                                                               const std::vector<SymInput>& inputs, Attrs attrs,
                                                               int num_outputs) {
  const ir::OpDef* def = runtime::GlobalOpRegistry().Find(type);
  if (def == nullptr) return absl::NotFoundError(type);
  ir::Graph graph;
  ir::Node node;
  node.type = type;
  node.def = def;
  std::vector<ir::ShapeContext::Input> ins(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    node.inputs.push_back(inputs[i].present ? static_cast<int>(i) : -1);
    ins[i] = {inputs[i].present, inputs[i].dtype, inputs[i].shape,
              inputs[i].value ? &inputs[i].value->view() : nullptr};
  }
  for (int i = 0; i < num_outputs; ++i) node.outputs.push_back(static_cast<int>(inputs.size()) + i);
  for (auto& [name, value] : attrs) node.attrs.Set(name, value);
  ir::ShapeContext ctx(node, graph, std::move(ins), nullptr);
  if (absl::Status s = ir::InferShapes(ctx); !s.ok()) return s;
  return ctx.outputs();
}

bool AllUnknown(const SymShape& s) {
  return std::all_of(s.begin(), s.end(), [](const SymDim& d) { return d.is_unknown(); });
}

std::unique_ptr<Session> NewSession(absl::StatusOr<std::vector<uint8_t>> bytes) {
  auto s = Session::Create(LoadOrDie(std::move(bytes)), {Device::kCpu});
  EXPECT_TRUE(s.ok()) << s.status();
  return std::move(*s);
}

// ---------------------------------------------------------------------------
// Flatten, Squeeze, Unsqueeze
// ---------------------------------------------------------------------------

TEST(FlattenTest, AxesAndDTypes) {
  for (DType t : kAllTypes) {
    const Tensor x = Pattern(t, {2, 3, 4});
    for (int64_t axis : {0, 1, 2, 3, -1, -2, -3}) {
      auto out = RunOp("Flatten", {&x}, {{"axis", axis}});
      ASSERT_TRUE(out.ok()) << out.status();
      const int64_t a = axis < 0 ? axis + 3 : axis;
      const int64_t rows = a == 0 ? 1 : (a == 1 ? 2 : (a == 2 ? 6 : 24));
      EXPECT_EQ((*out)[0].shape(), (Shape{rows, 24 / rows}));
      ExpectMoved(x, (*out)[0], Iota(24));
    }
  }
  const Tensor x = Pattern(DType::kF32, {2, 3, 4});
  auto def = RunOp("Flatten", {&x});  // default axis 1
  ASSERT_TRUE(def.ok());
  EXPECT_EQ((*def)[0].shape(), (Shape{2, 12}));
}

TEST(FlattenTest, EdgeShapes) {
  const Tensor s = Pattern(DType::kF32, {});
  auto out = RunOp("Flatten", {&s}, {{"axis", int64_t{0}}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].shape(), (Shape{1, 1}));
  const Tensor z = Pattern(DType::kF32, {2, 0, 3});
  out = RunOp("Flatten", {&z}, {{"axis", int64_t{2}}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].shape(), (Shape{0, 3}));
}

TEST(FlattenTest, ErrorsAndSymbolic) {
  const Tensor x = Pattern(DType::kF32, {2, 3});
  EXPECT_TRUE(ErrorContains(RunOp("Flatten", {&x}, {{"axis", int64_t{3}}}).status(),
                            "attribute axis is 3; expected -2..2"));
  EXPECT_TRUE(ErrorContains(RunOp("Flatten", {&x}, {{"axis", int64_t{-3}}}).status(), "axis is -3"));
  EXPECT_TRUE(ErrorContains(RunKernelPlanned("Flatten", {&x}, DType::kF32, {1, 5}).status(), "does not fit"));
  const SymDim b = SymDim::Symbol(0), s = SymDim::Symbol(1);
  auto out = InferSymbolic("Flatten", {{DType::kF32, {b, s, 4}}}, {{"axis", int64_t{2}}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->shape, (SymShape{b * s, 4}));
}

TEST(SqueezeTest, InputAndAttributeForms) {
  for (DType t : kAllTypes) {
    const Tensor x = Pattern(t, {1, 3, 1, 2});
    const Tensor axes = I64({0, -2});
    auto in_form = RunOp("Squeeze", {&x, &axes});
    ASSERT_TRUE(in_form.ok()) << in_form.status();
    EXPECT_EQ((*in_form)[0].shape(), (Shape{3, 2}));
    ExpectMoved(x, (*in_form)[0], Iota(6));
    auto attr_form = RunOp("Squeeze", {&x}, {{"axes", Ints{2}}});
    ASSERT_TRUE(attr_form.ok()) << attr_form.status();
    EXPECT_EQ((*attr_form)[0].shape(), (Shape{1, 3, 2}));
    auto all = RunOp("Squeeze", {&x});
    ASSERT_TRUE(all.ok()) << all.status();
    EXPECT_EQ((*all)[0].shape(), (Shape{3, 2}));
  }
  const Tensor x = Pattern(DType::kF32, {1, 0, 1});
  const Tensor a32 = I32({2});
  auto out = RunOp("Squeeze", {&x, &a32});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].shape(), (Shape{1, 0}));
  const Tensor one = Pattern(DType::kF32, {1, 1});
  out = RunOp("Squeeze", {&one});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].shape(), Shape{});  // to a scalar
  const Tensor scalar = Pattern(DType::kF32, {});
  out = RunOp("Squeeze", {&scalar});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].shape(), Shape{});
  const Tensor empty_axes = I64({});
  out = RunOp("Squeeze", {&one, &empty_axes});  // empty axes: every 1
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].shape(), Shape{});
}

TEST(SqueezeTest, Errors) {
  const Tensor x = Pattern(DType::kF32, {1, 3});
  const Tensor bad = I64({1}), out_of_range = I64({2}), twice = I64({0, -2});
  EXPECT_TRUE(
      ErrorContains(RunOp("Squeeze", {&x, &bad}).status(), "squeezes dim 1 of the data [1, 3], which is not 1"));
  EXPECT_TRUE(ErrorContains(RunOp("Squeeze", {&x, &out_of_range}).status(), "has axis 2; expected -2..1"));
  EXPECT_TRUE(ErrorContains(RunOp("Squeeze", {&x, &twice}).status(), "names dim 0 twice"));
  EXPECT_TRUE(ErrorContains(RunOp("Squeeze", {&x, &bad}, {{"axes", Ints{0}}}).status(),
                            "given both as input 1 (axes) and as attribute axes"));
  const Tensor f = F32({1}, {0});
  EXPECT_TRUE(ErrorContains(RunOp("Squeeze", {&x, &f}).status(),
                            "input 1 (axes) has dtype f32; expected one of i64, i32"));
  const Tensor two_d = I64({1, 1}, {0});
  EXPECT_TRUE(ErrorContains(RunOp("Squeeze", {&x, &two_d}).status(), "expected a 1-D tensor"));
}

TEST(SqueezeTest, Symbolic) {
  const SymDim b = SymDim::Symbol(0);
  const Tensor axes = I64({1});
  auto out = InferSymbolic("Squeeze", {{DType::kF32, {b, 1, 4}}, {DType::kI64, {1}, &axes}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->shape, (SymShape{b, 4}));
  out = InferSymbolic("Squeeze", {{DType::kF32, {b, 1, 1}}});  // a symbolic dim stays
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->shape, (SymShape{b}));
  out = InferSymbolic("Squeeze", {{DType::kF32, {b, 1, 4}}, {DType::kI64, {1}}});  // value unknown
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->shape.size(), 2u);
  EXPECT_TRUE(AllUnknown(out->shape));
  EXPECT_TRUE(ErrorContains(InferSymbolic("Squeeze", {{DType::kF32, {b, 1}}, {DType::kI64, {b}}}).status(),
                            "must have a known length"));
}

TEST(UnsqueezeTest, InputAndAttributeForms) {
  for (DType t : kAllTypes) {
    const Tensor x = Pattern(t, {3, 2});
    const Tensor axes = I64({0, -1});
    auto out = RunOp("Unsqueeze", {&x, &axes});
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ((*out)[0].shape(), (Shape{1, 3, 2, 1}));
    ExpectMoved(x, (*out)[0], Iota(6));
    out = RunOp("Unsqueeze", {&x}, {{"axes", Ints{3, 1}}});  // unsorted
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ((*out)[0].shape(), (Shape{3, 1, 2, 1}));
  }
  const Tensor scalar = Pattern(DType::kI64, {});
  const Tensor axes = I64({0});
  auto out = RunOp("Unsqueeze", {&scalar, &axes});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].shape(), Shape{1});
  const Tensor zero = Pattern(DType::kF32, {0});
  const Tensor three = I64({0, 2, 3});
  out = RunOp("Unsqueeze", {&zero, &three});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].shape(), (Shape{1, 0, 1, 1}));
}

TEST(UnsqueezeTest, ErrorsAndSymbolic) {
  const Tensor x = Pattern(DType::kF32, {3});
  const Tensor far = I64({2}), twice = I64({0, 0});
  EXPECT_TRUE(ErrorContains(RunOp("Unsqueeze", {&x}).status(), "needs axes"));
  EXPECT_TRUE(ErrorContains(RunOp("Unsqueeze", {&x, &far}).status(), "has axis 2; expected -2..1"));
  EXPECT_TRUE(ErrorContains(RunOp("Unsqueeze", {&x, &twice}).status(), "names dim 0 twice"));
  const SymDim b = SymDim::Symbol(0);
  const Tensor axes = I64({1});
  auto out = InferSymbolic("Unsqueeze", {{DType::kF32, {b, 4}}, {DType::kI64, {1}, &axes}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->shape, (SymShape{b, 1, 4}));
  out = InferSymbolic("Unsqueeze", {{DType::kF32, {b, 4}}, {DType::kI64, {2}}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->shape.size(), 4u);
  EXPECT_TRUE(ErrorContains(InferSymbolic("Unsqueeze", {{DType::kF32, {b}}, {DType::kI64, {b}}}).status(),
                            "must have a known length"));
}

// ---------------------------------------------------------------------------
// Split
// ---------------------------------------------------------------------------

// Output k, element i of a split of `shape` along `axis` into `sizes`.
Ints SplitSource(const Shape& shape, int axis, const Ints& sizes, int k) {
  int64_t offset = 0;
  for (int j = 0; j < k; ++j) offset += sizes[j];
  Shape part = shape;
  part[axis] = sizes[k];
  Ints src;
  for (int64_t i = 0; i < Count(part); ++i) {
    Shape idx = Unravel(i, part);
    idx[axis] += offset;
    src.push_back(Ravel(idx, shape));
  }
  return src;
}

void CheckSplit(DType t, const Shape& shape, int64_t axis, const Ints& sizes, const Tensor* split, Attrs attrs) {
  SCOPED_TRACE(::testing::Message() << DTypeName(t) << " " << ::testing::PrintToString(shape) << " axis " << axis);
  const Tensor x = Pattern(t, shape);
  attrs.push_back({"axis", axis});
  std::vector<const Tensor*> inputs = {&x};
  if (split != nullptr) inputs.push_back(split);
  auto out = RunOp("Split", inputs, attrs, static_cast<int>(sizes.size()));
  ASSERT_TRUE(out.ok()) << out.status();
  const int a = static_cast<int>(axis < 0 ? axis + static_cast<int64_t>(shape.size()) : axis);
  for (size_t k = 0; k < sizes.size(); ++k) {
    Shape want = shape;
    want[a] = sizes[k];
    EXPECT_EQ((*out)[k].shape(), want);
    ExpectMoved(x, (*out)[k], SplitSource(shape, a, sizes, static_cast<int>(k)));
  }
}

TEST(SplitTest, FormsAndDTypes) {
  for (DType t : kAllTypes) {
    CheckSplit(t, {2, 6}, 1, {2, 2, 2}, nullptr, {});  // equal parts
    const Tensor split = I64({1, 3, 2});
    CheckSplit(t, {2, 6, 3}, -2, {1, 3, 2}, &split, {});                          // opset 13 input
    CheckSplit(t, {5, 2}, 0, {4, 1}, nullptr, {{"split", Ints{4, 1}}});           // opset 11 attribute
    CheckSplit(t, {7, 2}, 0, {3, 3, 1}, nullptr, {{"num_outputs", int64_t{3}}});  // opset 18
  }
  const Tensor zeros = I64({0, 0, 0});
  CheckSplit(DType::kF32, {0}, 0, {0, 0, 0}, &zeros, {});  // test_split_zero_size_splits
  const Tensor some_zero = I64({0, 3});
  CheckSplit(DType::kF32, {2, 3}, 1, {0, 3}, &some_zero, {});
  CheckSplit(DType::kF32, {3}, 0, {3}, nullptr, {});  // one output
  const Tensor s32 = I32({1, 2});
  CheckSplit(DType::kF32, {3}, 0, {1, 2}, &s32, {});
}

TEST(SplitTest, Errors) {
  const Tensor x = Pattern(DType::kF32, {2, 5});
  auto err = [&](Attrs attrs, int outputs, const Tensor* split = nullptr) {
    std::vector<const Tensor*> in = {&x};
    if (split) in.push_back(split);
    return RunOp("Split", in, attrs, outputs).status();
  };
  EXPECT_TRUE(ErrorContains(err({{"axis", int64_t{1}}}, 2), "does not split into 2 equal parts"));
  const Tensor sum_wrong = I64({2, 2}), count_wrong = I64({1, 4}), negative = I64({6, -1});
  EXPECT_TRUE(ErrorContains(err({{"axis", int64_t{1}}}, 2, &sum_wrong), "sums to 4 but the axis has 5 elements"));
  EXPECT_TRUE(
      ErrorContains(err({{"axis", int64_t{1}}}, 3, &count_wrong), "has 2 entries but the node has 3 outputs"));
  EXPECT_TRUE(ErrorContains(err({{"axis", int64_t{1}}}, 2, &negative), "has a negative size"));
  EXPECT_TRUE(ErrorContains(err({{"axis", int64_t{2}}}, 1), "axis 2 is out of range for rank 2"));
  EXPECT_TRUE(ErrorContains(err({{"num_outputs", int64_t{3}}, {"axis", int64_t{1}}}, 2),
                            "num_outputs is 3 but the node has 2 outputs"));
  EXPECT_TRUE(ErrorContains(err({{"num_outputs", int64_t{0}}}, 2), "num_outputs is 0; expected >= 1"));
  EXPECT_TRUE(ErrorContains(err({{"num_outputs", int64_t{2}}, {"split", Ints{1, 1}}}, 2), "both given"));
  EXPECT_TRUE(ErrorContains(err({{"split", Ints{1, 1}}}, 2, &sum_wrong), "given both as input 1"));
  const Tensor four = Pattern(DType::kF32, {5});
  EXPECT_TRUE(ErrorContains(RunOp("Split", {&four}, {{"num_outputs", int64_t{4}}}, 4).status(),
                            "cannot be split into 4 parts of 2"));
  const Tensor scalar = Pattern(DType::kF32, {});
  EXPECT_TRUE(ErrorContains(RunOp("Split", {&scalar}, {}, 1).status(), "is a scalar"));
}

TEST(SplitTest, Symbolic) {
  const SymDim b = SymDim::Symbol(0);
  auto out = InferAll("Split", {{DType::kF32, {b, SymDim(2) * b}}}, {{"axis", int64_t{1}}}, 2);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].shape, (SymShape{b, b}));
  EXPECT_EQ((*out)[1].shape, (SymShape{b, b}));
  const Tensor split = I64({1, 3});
  out = InferAll("Split", {{DType::kF32, {b, 4}}, {DType::kI64, {2}, &split}}, {{"axis", int64_t{0}}}, 2);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].shape, (SymShape{1, 4}));
  EXPECT_EQ((*out)[1].shape, (SymShape{3, 4}));
  out = InferAll("Split", {{DType::kF32, {6, 4}}, {DType::kI64, {2}}}, {}, 2);  // sizes unknown
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE((*out)[0].shape[0].is_unknown());
  EXPECT_EQ((*out)[1].shape[1], SymDim(4));
  EXPECT_TRUE(ErrorContains(InferAll("Split", {{DType::kF32, {6, 4}}, {DType::kI64, {3}}}, {}, 2).status(),
                            "has 3 entries but the node has 2 outputs"));
}

TEST(SplitTest, PlannedShapeIsChecked) {
  const Tensor x = Pattern(DType::kI32, {6});
  auto out = RunKernelPlanned("Split", {&x}, DType::kI32, {3}, {});  // one output planned as half
  EXPECT_TRUE(ErrorContains(out.status(), "output 0 is i32 [6] for these inputs but was planned as i32 [3]"));
}

TEST(SplitTest, OmittedOutputInAModel) {
  ModelBuilder b;
  b.AddInput("x", DType::kF32, {6});
  b.AddOp("Split", {"x"}, {"a", "", "c"});
  b.AddOutput("a");
  b.AddOutput("c");
  auto session = NewSession(b.Finish());
  std::vector<float> x = {1, 2, 3, 4, 5, 6};
  auto out = session->Run({TensorView(DType::kF32, {6}, x.data())});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(Values<float>(Tensor::CopyOf((*out)[0]).value()), ElementsAre(1, 2));
  EXPECT_THAT(Values<float>(Tensor::CopyOf((*out)[1]).value()), ElementsAre(5, 6));
}

// ---------------------------------------------------------------------------
// GatherElements, ScatterND
// ---------------------------------------------------------------------------

TEST(GatherElementsTest, MatchesReference) {
  const Shape data_shape = {3, 4, 2};
  for (DType t : kAllTypes) {
    const Tensor data = Pattern(t, data_shape);
    for (int64_t axis : {0, 1, 2, -1}) {
      const int a = static_cast<int>(axis < 0 ? axis + 3 : axis);
      Shape idx_shape = {2, 3, 2};
      idx_shape[a] = 5;  // longer than the data along the axis is fine
      Ints idx;
      for (int64_t i = 0; i < Count(idx_shape); ++i) {
        const int64_t dim = data_shape[a];
        idx.push_back((i * 7 + 3) % (2 * dim) - dim);  // negative ones too
      }
      const Tensor indices = I64(idx_shape, idx);
      auto out = RunOp("GatherElements", {&data, &indices}, {{"axis", axis}});
      ASSERT_TRUE(out.ok()) << out.status();
      EXPECT_EQ((*out)[0].shape(), idx_shape);
      Ints src;
      for (int64_t i = 0; i < Count(idx_shape); ++i) {
        Shape pos = Unravel(i, idx_shape);
        pos[a] = idx[i] < 0 ? idx[i] + data_shape[a] : idx[i];
        src.push_back(Ravel(pos, data_shape));
      }
      ExpectMoved(data, (*out)[0], src);
    }
  }
}

TEST(GatherElementsTest, OnnxExamplesAndEdges) {
  // test_gather_elements_0 and _negative_indices.
  const Tensor data = F32({2, 2}, {1, 2, 3, 4});
  const Tensor idx = MakeTensor<int32_t>(DType::kI32, {2, 2}, {0, 0, 1, 0});
  auto out = RunOp("GatherElements", {&data, &idx}, {{"axis", int64_t{1}}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(Values<float>((*out)[0]), ElementsAre(1, 1, 4, 3));
  const Tensor d3 = F32({3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  const Tensor neg = I64({2, 3}, {-1, -2, 0, -2, 0, 0});
  out = RunOp("GatherElements", {&d3, &neg}, {{"axis", int64_t{0}}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(Values<float>((*out)[0]), ElementsAre(7, 5, 3, 4, 2, 3));
  const Tensor empty = I64({0, 2}, {});
  out = RunOp("GatherElements", {&d3, &empty});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].shape(), (Shape{0, 2}));
}

TEST(GatherElementsTest, Errors) {
  const Tensor data = F32({2, 2}, {1, 2, 3, 4});
  const Tensor far = I64({2, 2}, {0, 2, 0, 0}), wide = I64({2, 3}, {0, 0, 0, 0, 0, 0}), flat = I64({0});
  EXPECT_TRUE(ErrorContains(RunOp("GatherElements", {&data, &far}, {{"axis", int64_t{1}}}).status(),
                            "index 2 is out of range for axis 1"));
  EXPECT_TRUE(ErrorContains(RunOp("GatherElements", {&data, &wide}).status(), "dim 1 exceeds the data's [2, 2]"));
  EXPECT_TRUE(ErrorContains(RunOp("GatherElements", {&data, &flat}).status(), "must have the same rank"));
  EXPECT_TRUE(ErrorContains(RunOp("GatherElements", {&data, &far}, {{"axis", int64_t{2}}}).status(),
                            "axis 2 is out of range"));
  const Tensor fidx = F32({2, 2}, {0, 0, 0, 0});
  EXPECT_TRUE(ErrorContains(RunOp("GatherElements", {&data, &fidx}).status(), "input 1 (indices) has dtype f32"));
  const Tensor scalar = F32({}, {1});
  const Tensor sidx = I64({}, {0});
  EXPECT_TRUE(ErrorContains(RunOp("GatherElements", {&scalar, &sidx}).status(), "is a scalar"));
}

TEST(ScatterNDTest, OnnxExamples) {
  // test_scatternd, test_scatternd_add, test_scatternd_multiply.
  std::vector<float> d;
  const std::vector<float> block = {1, 2, 3, 4, 5, 6, 7, 8, 8, 7, 6, 5, 4, 3, 2, 1};
  for (int r = 0; r < 4; ++r) d.insert(d.end(), block.begin(), block.end());
  const Tensor data = F32({4, 4, 4}, d);
  const Tensor idx = I64({2, 1}, {0, 2});
  std::vector<float> u(16, 5);
  u.insert(u.end(), 16, 1);
  for (int i = 0; i < 16; ++i) u[16 + i] = 1 + i / 4;
  const Tensor upd = F32({2, 4, 4}, u);
  auto none = RunOp("ScatterND", {&data, &idx, &upd});
  ASSERT_TRUE(none.ok()) << none.status();
  std::vector<float> want = d;
  for (int i = 0; i < 16; ++i) want[i] = u[i], want[32 + i] = u[16 + i];
  EXPECT_EQ(Values<float>((*none)[0]), want);

  const Tensor dup = I64({2, 1}, {0, 0});
  auto add = RunOp("ScatterND", {&data, &dup, &upd}, {{"reduction", std::string("add")}});
  ASSERT_TRUE(add.ok()) << add.status();
  want = d;
  for (int i = 0; i < 16; ++i) want[i] += u[i] + u[16 + i];
  EXPECT_EQ(Values<float>((*add)[0]), want);
  auto mul = RunOp("ScatterND", {&data, &dup, &upd}, {{"reduction", std::string("mul")}});
  ASSERT_TRUE(mul.ok()) << mul.status();
  want = d;
  for (int i = 0; i < 16; ++i) want[i] *= u[i] * u[16 + i];
  EXPECT_EQ(Values<float>((*mul)[0]), want);
}

TEST(ScatterNDTest, ElementIndicesDTypesAndReductions) {
  for (DType t : kAllTypes) {
    const Tensor data = Pattern(t, {3, 2});
    const Tensor idx = I64({2, 2}, {2, 1, -3, 0});  // negative index counts from the end
    const Tensor upd = Pattern(t, {2}, 1);
    auto out = RunOp("ScatterND", {&data, &idx, &upd});
    ASSERT_TRUE(out.ok()) << out.status();
    const size_t es = DTypeSize(t);
    const auto* o = static_cast<const uint8_t*>((*out)[0].data());
    const auto* u = static_cast<const uint8_t*>(upd.data());
    const auto* dd = static_cast<const uint8_t*>(data.data());
    EXPECT_EQ(std::memcmp(o + 5 * es, u, es), 0);
    EXPECT_EQ(std::memcmp(o + 0 * es, u + es, es), 0);
    for (int i : {1, 2, 3, 4}) EXPECT_EQ(std::memcmp(o + i * es, dd + i * es, es), 0);
  }
  const Tensor data = MakeTensor<int32_t>(DType::kI32, {4}, {5, 1, 7, 2});
  const Tensor idx = I64({3, 1}, {0, 3, 0});
  const Tensor upd = MakeTensor<int32_t>(DType::kI32, {3}, {3, 9, 4});
  auto run = [&](const std::string& r) {
    auto out = RunOp("ScatterND", {&data, &idx, &upd}, {{"reduction", r}});
    EXPECT_TRUE(out.ok()) << out.status();
    return out.ok() ? Values<int32_t>((*out)[0]) : std::vector<int32_t>{};
  };
  EXPECT_THAT(run("add"), ElementsAre(12, 1, 7, 11));
  EXPECT_THAT(run("mul"), ElementsAre(60, 1, 7, 18));
  EXPECT_THAT(run("max"), ElementsAre(5, 1, 7, 9));
  EXPECT_THAT(run("min"), ElementsAre(3, 1, 7, 2));
  const Tensor hdata = MakeTensor<uint16_t>(DType::kF16, {1}, {0x3c00});  // 1.0
  const Tensor hidx = I64({1, 1}, {0});
  const Tensor hupd = MakeTensor<uint16_t>(DType::kF16, {1}, {0x4000});  // 2.0
  auto h = RunOp("ScatterND", {&hdata, &hidx, &hupd}, {{"reduction", std::string("add")}});
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(Values<uint16_t>((*h)[0])[0], 0x4200);  // 3.0
  const Tensor bdata = MakeTensor<uint8_t>(DType::kBool, {2}, {1, 0});
  const Tensor bupd = MakeTensor<uint8_t>(DType::kBool, {1}, {0});
  auto b = RunOp("ScatterND", {&bdata, &hidx, &bupd}, {{"reduction", std::string("mul")}});
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_THAT(Values<uint8_t>((*b)[0]), ElementsAre(0, 0));
}

TEST(ScatterNDTest, Errors) {
  const Tensor data = F32({2, 2}, {1, 2, 3, 4});
  const Tensor idx = I64({1, 2}, {0, 2});
  const Tensor upd = F32({1}, {9});
  EXPECT_TRUE(ErrorContains(RunOp("ScatterND", {&data, &idx, &upd}).status(),
                            "index 2 (entry 0, coordinate 1) is out of range for dim 1"));
  const Tensor deep = I64({1, 3}, {0, 0, 0});
  EXPECT_TRUE(ErrorContains(RunOp("ScatterND", {&data, &deep, &upd}).status(), "its last dim must be 1..2"));
  const Tensor row_idx = I64({1, 1}, {0});
  EXPECT_TRUE(ErrorContains(RunOp("ScatterND", {&data, &row_idx, &upd}).status(),
                            "updates (input 2) has shape [1]; expected [1, 2]"));
  const Tensor i32_upd = MakeTensor<int32_t>(DType::kI32, {1}, {9});
  EXPECT_TRUE(ErrorContains(RunOp("ScatterND", {&data, &idx, &i32_upd}).status(), "must have the same dtype"));
  EXPECT_TRUE(
      ErrorContains(RunOp("ScatterND", {&data, &row_idx, &upd}, {{"reduction", std::string("sub")}}).status(),
                    "attribute reduction is 'sub'"));
  const Tensor sidx = I64({}, {0});
  EXPECT_TRUE(ErrorContains(RunOp("ScatterND", {&data, &sidx, &upd}).status(), "indices (input 1) is a scalar"));
  // The data is left alone when an index is bad.
  const Tensor good_then_bad = I64({2, 2}, {0, 0, 5, 0});
  const Tensor two = F32({2}, {7, 7});
  EXPECT_FALSE(RunOp("ScatterND", {&data, &good_then_bad, &two}).ok());
}

// ---------------------------------------------------------------------------
// Expand, Tile
// ---------------------------------------------------------------------------

// Numpy broadcast of `in` to `out`: the source element of each output.
Ints BroadcastSource(const Shape& in, const Shape& out) {
  Ints src;
  for (int64_t i = 0; i < Count(out); ++i) {
    const Shape pos = Unravel(i, out);
    Shape ip(in.size());
    for (size_t d = 0; d < in.size(); ++d) ip[d] = in[d] == 1 ? 0 : pos[pos.size() - in.size() + d];
    src.push_back(Ravel(ip, in));
  }
  return src;
}

TEST(ExpandTest, BidirectionalBroadcast) {
  struct Case {
    Shape in;
    Ints shape;
    Shape out;
  };
  const Case cases[] = {
      {{3, 1}, {2, 1, 6}, {2, 3, 6}},  // test_expand_dim_changed
      {{3, 1}, {3, 4}, {3, 4}},        // test_expand_dim_unchanged
      {{2, 3}, {1, 1}, {2, 3}},        // a smaller target keeps the input's dims
      {{2, 3}, {}, {2, 3}},           {{}, {2, 2}, {2, 2}}, {{1, 4}, {0, 1}, {0, 4}}, {{1}, {3}, {3}},
  };
  for (DType t : kAllTypes) {
    for (const Case& c : cases) {
      SCOPED_TRACE(::testing::PrintToString(c.in) + " to " + ::testing::PrintToString(c.shape));
      const Tensor x = Pattern(t, c.in);
      const Tensor s = I64(c.shape);
      auto out = RunOp("Expand", {&x, &s});
      ASSERT_TRUE(out.ok()) << out.status();
      EXPECT_EQ((*out)[0].shape(), c.out);
      ExpectMoved(x, (*out)[0], BroadcastSource(c.in, c.out));
    }
  }
}

TEST(ExpandTest, ErrorsAndSymbolic) {
  const Tensor x = Pattern(DType::kF32, {3, 2});
  const Tensor bad = I64({3, 3}), neg = I64({-1, 2});
  EXPECT_TRUE(ErrorContains(RunOp("Expand", {&x, &bad}).status(), "cannot expand [3, 2] to [3, 3]"));
  EXPECT_TRUE(ErrorContains(RunOp("Expand", {&x, &neg}).status(), "has a negative dim"));
  EXPECT_TRUE(
      ErrorContains(RunKernelPlanned("Expand", {&x, &bad}, DType::kF32, {3, 3}).status(), "dim 1 is 2 against 3"));
  const SymDim b = SymDim::Symbol(0);
  const Tensor s = I64({1, 1, 5});
  auto out = InferSymbolic("Expand", {{DType::kF32, {b, 1}}, {DType::kI64, {3}, &s}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->shape, (SymShape{1, b, 5}));
  out = InferSymbolic("Expand", {{DType::kF32, {b, 4}}, {DType::kI64, {3}}});  // value unknown
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->shape.size(), 3u);
  EXPECT_TRUE(out->shape[0].is_unknown() && out->shape[1].is_unknown());
  EXPECT_EQ(out->shape[2], SymDim(4));
  EXPECT_TRUE(ErrorContains(InferSymbolic("Expand", {{DType::kF32, {b}}, {DType::kI64, {b}}}).status(),
                            "must have a known length"));
}

TEST(TileTest, MatchesReference) {
  for (DType t : kAllTypes) {
    for (const auto& [in, reps] : std::vector<std::pair<Shape, Ints>>{
             {{2, 3}, {2, 2}}, {{2, 3, 1}, {1, 2, 4}}, {{4}, {3}}, {{}, {}}, {{2, 0}, {3, 2}}, {{2, 3}, {0, 1}}}) {
      SCOPED_TRACE(::testing::PrintToString(in) + " x " + ::testing::PrintToString(reps));
      const Tensor x = Pattern(t, in);
      const Tensor r = I64(reps);
      auto out = RunOp("Tile", {&x, &r});
      ASSERT_TRUE(out.ok()) << out.status();
      Shape want(in.size());
      for (size_t d = 0; d < in.size(); ++d) want[d] = in[d] * reps[d];
      EXPECT_EQ((*out)[0].shape(), want);
      Ints src;
      for (int64_t i = 0; i < Count(want); ++i) {
        Shape pos = Unravel(i, want);
        for (size_t d = 0; d < in.size(); ++d) pos[d] %= in[d];
        src.push_back(Ravel(pos, in));
      }
      ExpectMoved(x, (*out)[0], src);
    }
  }
}

TEST(TileTest, ErrorsAndSymbolic) {
  const Tensor x = Pattern(DType::kF32, {2, 3});
  const Tensor short_r = I64({2}), neg = I64({1, -1});
  EXPECT_TRUE(
      ErrorContains(RunOp("Tile", {&x, &short_r}).status(), "repeats (input 1) has 1 entries; expected 2"));
  EXPECT_TRUE(ErrorContains(RunOp("Tile", {&x, &neg}).status(), "has a negative entry"));
  const SymDim b = SymDim::Symbol(0);
  const Tensor r = I64({3, 1});
  auto out = InferSymbolic("Tile", {{DType::kF32, {b, 4}}, {DType::kI64, {2}, &r}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->shape, (SymShape{SymDim(3) * b, 4}));
  out = InferSymbolic("Tile", {{DType::kF32, {b, 4}}, {DType::kI64, {2}}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->shape.size(), 2u);
  EXPECT_TRUE(AllUnknown(out->shape));
}

// ---------------------------------------------------------------------------
// Pad
// ---------------------------------------------------------------------------

// The source index of output index o along a dim of `n` padded by `begin`,
// by repeated mirroring or stepping (an independent formulation of the
// kernel's periodic one); -1 for the constant.
int64_t PadRef(int64_t o, int64_t n, int64_t begin, const std::string& mode) {
  int64_t i = o - begin;
  if (i >= 0 && i < n) return i;
  if (mode == "constant") return -1;
  if (mode == "edge") return std::clamp<int64_t>(i, 0, n - 1);
  if (n == 1) return 0;
  while (i < 0 || i >= n) {
    if (mode == "wrap") {
      i += i < 0 ? n : -n;
    } else {
      i = i < 0 ? -i : 2 * (n - 1) - i;
    }
  }
  return i;
}

void CheckPad(DType t, const Shape& in, const Ints& pads, const std::string& mode, const Ints* axes = nullptr) {
  SCOPED_TRACE(::testing::Message() << DTypeName(t) << " " << ::testing::PrintToString(in) << " pads "
                                    << ::testing::PrintToString(pads) << " " << mode);
  const Tensor x = Pattern(t, in);
  const Tensor p = I64(pads);
  const Tensor value = Pattern(t, {}, 7);
  std::vector<const Tensor*> inputs = {&x, &p, mode == "constant" ? &value : nullptr};
  Tensor a;
  if (axes != nullptr) {
    a = I64(*axes);
    inputs.push_back(&a);
  }
  auto out = RunOp("Pad", inputs, {{"mode", mode}});
  ASSERT_TRUE(out.ok()) << out.status();
  const int64_t rank = static_cast<int64_t>(in.size());
  Ints begin(rank, 0), end(rank, 0);
  const int64_t n = axes ? static_cast<int64_t>(axes->size()) : rank;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t d = axes ? ((*axes)[i] + rank) % rank : i;
    begin[d] = pads[i];
    end[d] = pads[i + n];
  }
  Shape want(rank);
  for (int64_t d = 0; d < rank; ++d) want[d] = in[d] + begin[d] + end[d];
  ASSERT_EQ((*out)[0].shape(), want);
  Ints src;
  for (int64_t i = 0; i < Count(want); ++i) {
    Shape pos = Unravel(i, want);
    bool constant = false;
    for (int64_t d = 0; d < rank; ++d) {
      pos[d] = PadRef(pos[d], in[d], begin[d], mode);
      constant |= pos[d] < 0;
    }
    src.push_back(constant ? -1 : Ravel(pos, in));
  }
  ExpectMoved(x, (*out)[0], src, value.data());
}

TEST(PadTest, ModesAndDTypes) {
  for (DType t : kAllTypes) {
    for (const std::string mode : {"constant", "reflect", "edge", "wrap"}) {
      CheckPad(t, {3, 4}, {1, 2, 2, 1}, mode);
      CheckPad(t, {2, 3, 2}, {0, 2, 1, 1, 0, 3}, mode);
    }
  }
  for (const std::string mode : {"constant", "reflect", "edge", "wrap"}) {
    CheckPad(DType::kF32, {3}, {7, 8}, mode);             // wider than the input: repeated mirroring
    CheckPad(DType::kF32, {1, 2}, {2, 0, 3, 5}, mode);    // a dim of 1
    CheckPad(DType::kF32, {4, 5}, {-1, 2, 0, -2}, mode);  // negative pads crop
    CheckPad(DType::kF32, {}, {}, mode);
    const Ints axes = {-1};
    CheckPad(DType::kF32, {2, 3}, {2, 1}, mode, &axes);  // opset 18 axes
    const Ints both = {1, 0};
    CheckPad(DType::kF32, {2, 3}, {1, 0, 2, 1}, mode, &both);
  }
  CheckPad(DType::kF32, {0, 3}, {1, 0, 1, 0}, "constant");
  CheckPad(DType::kF32, {0, 3}, {0, 1, 0, 1}, "edge");  // only the non-empty dim is padded
  CheckPad(DType::kF32, {3, 2}, {-3, 0, 0, 0}, "constant");
}

TEST(PadTest, OnnxConstantPad) {
  // test_constant_pad: pads [0, 0, 1, 3, 0, 0, 2, 4] of a [1, 3, 4, 5] input with 1.2.
  const Tensor x = Pattern(DType::kF32, {1, 3, 4, 5});
  const Tensor pads = I64({0, 0, 1, 3, 0, 0, 2, 4});
  const Tensor value = F32({}, {1.2f});
  auto out = RunOp("Pad", {&x, &pads, &value});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].shape(), (Shape{1, 3, 7, 12}));
  EXPECT_EQ(Values<float>((*out)[0])[0], 1.2f);
}

TEST(PadTest, Opset2AttributesAndDefaults) {
  const Tensor x = F32({2}, {1, 2});
  auto out = RunOp("Pad", {&x}, {{"pads", Ints{1, 2}}, {"value", 2.5}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(Values<float>((*out)[0]), ElementsAre(2.5f, 1, 2, 2.5f, 2.5f));
  const Tensor xi = MakeTensor<int32_t>(DType::kI32, {1}, {4});
  out = RunOp("Pad", {&xi}, {{"pads", Ints{1, 1}}, {"value", -3.0}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(Values<int32_t>((*out)[0]), ElementsAre(-3, 4, -3));
  const Tensor pads = I64({1, 0});
  out = RunOp("Pad", {&x, &pads});  // no value: zero
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(Values<float>((*out)[0]), ElementsAre(0, 1, 2));
  const Tensor h = MakeTensor<uint16_t>(DType::kF16, {1}, {0x3c00});
  out = RunOp("Pad", {&h}, {{"pads", Ints{0, 1}}, {"value", 0.5}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(Values<uint16_t>((*out)[0]), ElementsAre(0x3c00, 0x3800));
}

TEST(PadTest, Errors) {
  const Tensor x = F32({2, 3}, {1, 2, 3, 4, 5, 6});
  const Tensor short_pads = I64({1, 1}), crop = I64({-2, 0, -1, 0}), ok = I64({1, 1, 1, 1});
  EXPECT_TRUE(ErrorContains(RunOp("Pad", {&x, &short_pads}).status(),
                            "pads [1, 1] has 2 entries; expected 4 (begin and end for 2 dims of the input)"));
  EXPECT_TRUE(ErrorContains(RunOp("Pad", {&x, &crop}).status(), "make dim 0 of the data [2, 3] negative (-1)"));
  EXPECT_TRUE(ErrorContains(RunOp("Pad", {&x, &ok}, {{"mode", std::string("mirror")}}).status(),
                            "attribute mode is 'mirror'"));
  EXPECT_TRUE(ErrorContains(RunOp("Pad", {&x}).status(), "needs pads"));
  EXPECT_TRUE(
      ErrorContains(RunOp("Pad", {&x, &ok}, {{"pads", Ints{1, 1, 1, 1}}}).status(), "given both as input 1"));
  const Tensor i_value = MakeTensor<int32_t>(DType::kI32, {}, {1});
  EXPECT_TRUE(ErrorContains(RunOp("Pad", {&x, &ok, &i_value}).status(), "must have the same dtype"));
  const Tensor two_values = F32({2}, {1, 2});
  EXPECT_TRUE(ErrorContains(RunOp("Pad", {&x, &ok, &two_values}).status(), "expected a scalar (one element)"));
  const Tensor f_value = F32({}, {1});
  EXPECT_TRUE(
      ErrorContains(RunOp("Pad", {&x, &ok, &f_value}, {{"value", 1.0}}).status(), "given both as input 2"));
  const Tensor axes = I64({2}), twice = I64({0, 0});
  const Tensor two = I64({1, 1});
  EXPECT_TRUE(ErrorContains(RunOp("Pad", {&x, &two, nullptr, &axes}).status(), "has axis 2; expected -2..1"));
  EXPECT_TRUE(ErrorContains(RunOp("Pad", {&x, &ok, nullptr, &twice}).status(), "names dim 0 twice"));
  const Tensor empty = F32({0, 2}, {});
  EXPECT_TRUE(ErrorContains(RunOp("Pad", {&empty, &ok}, {{"mode", std::string("reflect")}}).status(),
                            "mode 'reflect' cannot pad dim 0 of the data [0, 2], which is empty"));
  EXPECT_TRUE(ErrorContains(
      RunKernelPlanned("Pad", {&empty, &ok}, DType::kF32, {2, 4}, {{"mode", std::string("edge")}}).status(),
      "mode 'edge' cannot pad dim 0"));
  EXPECT_TRUE(ErrorContains(RunKernelPlanned("Pad", {&x, &ok}, DType::kF32, {4, 4}).status(),
                            "output 0 is f32 [4, 5] for these inputs but was planned as f32 [4, 4]"));
}

TEST(PadTest, Symbolic) {
  const SymDim b = SymDim::Symbol(0);
  const Tensor pads = I64({0, 1, 0, 2});
  auto out = InferSymbolic("Pad", {{DType::kF32, {b, 4}}, {DType::kI64, {4}, &pads}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->shape, (SymShape{b, 7}));
  out = InferSymbolic("Pad", {{DType::kF32, {b, 4}}, {DType::kI64, {4}}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(AllUnknown(out->shape));
  const Tensor axes = I64({-1});
  out = InferSymbolic("Pad", {{DType::kF32, {b, 4}}, {DType::kI64, {2}}, Absent(), {DType::kI64, {1}, &axes}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->shape[0], b);
  EXPECT_TRUE(out->shape[1].is_unknown());
}

// ---------------------------------------------------------------------------
// Size, Range, ConstantOfShape
// ---------------------------------------------------------------------------

TEST(SizeTest, CountsElements) {
  for (const Shape& s : {Shape{3, 4, 5}, Shape{}, Shape{2, 0}}) {
    const Tensor x = Pattern(DType::kBF16, s);
    auto out = RunOp("Size", {&x});
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ((*out)[0].dtype(), DType::kI64);
    EXPECT_EQ((*out)[0].shape(), Shape{});
    EXPECT_EQ(Values<int64_t>((*out)[0])[0], Count(s));
  }
  const ir::OpDef* def = runtime::GlobalOpRegistry().Find("Size");
  ASSERT_NE(def, nullptr);
  EXPECT_FALSE(def->reads_input_values);
}

TEST(RangeTest, DTypesAndDirections) {
  auto run = [](DType t, double s, double l, double d) -> absl::StatusOr<Tensor> {
    auto scalar = [t](double v) {
      Tensor x = Tensor::Create(t, {}).value();
      switch (t) {
        case DType::kF32:
          *x.as<float>() = static_cast<float>(v);
          break;
        case DType::kF64:
          *x.as<double>() = v;
          break;
        case DType::kI32:
          *x.as<int32_t>() = static_cast<int32_t>(v);
          break;
        default:
          *x.as<int64_t>() = static_cast<int64_t>(v);
          break;
      }
      return x;
    };
    const Tensor a = scalar(s), b = scalar(l), c = scalar(d);
    auto out = RunOp("Range", {&a, &b, &c});
    if (!out.ok()) return out.status();
    return (*out)[0];
  };
  auto f32 = run(DType::kF32, 1, 5, 2);  // test_range_float_type_positive_delta
  ASSERT_TRUE(f32.ok()) << f32.status();
  EXPECT_THAT(Values<float>(*f32), ElementsAre(1, 3));
  auto i32 = run(DType::kI32, 10, 6, -3);  // test_range_int32_type_negative_delta
  ASSERT_TRUE(i32.ok()) << i32.status();
  EXPECT_THAT(Values<int32_t>(*i32), ElementsAre(10, 7));
  auto f64 = run(DType::kF64, 0, 1, 0.25);
  ASSERT_TRUE(f64.ok()) << f64.status();
  EXPECT_THAT(Values<double>(*f64), ElementsAre(0, 0.25, 0.5, 0.75));
  auto i64 = run(DType::kI64, -2, 5, 3);
  ASSERT_TRUE(i64.ok()) << i64.status();
  EXPECT_THAT(Values<int64_t>(*i64), ElementsAre(-2, 1, 4));
  auto empty = run(DType::kI64, 5, 1, 1);
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_EQ(empty->shape(), Shape{0});
  auto frac = run(DType::kF32, 0, 1, 0.3);  // ceil(1 / 0.3) = 4
  ASSERT_TRUE(frac.ok()) << frac.status();
  EXPECT_EQ(frac->shape(), Shape{4});
  EXPECT_TRUE(ErrorContains(run(DType::kI32, 0, 5, 0).status(), "delta is 0"));
  EXPECT_TRUE(ErrorContains(run(DType::kF32, 0, INFINITY, 1).status(), "are not all finite"));
  EXPECT_TRUE(ErrorContains(run(DType::kI64, 0, 1e18, 1).status(), "elements; at most"));

  // Extremes of int64: no overflow in the count or the values.
  const Tensor lo = I64Scalar(std::numeric_limits<int64_t>::min()),
               hi = I64Scalar(std::numeric_limits<int64_t>::max());
  const Tensor big = I64Scalar(std::numeric_limits<int64_t>::max() / 2);
  auto ends = RunOp("Range", {&lo, &hi, &big});
  ASSERT_TRUE(ends.ok()) << ends.status();
  EXPECT_EQ((*ends)[0].shape(), Shape{5});
  EXPECT_EQ(Values<int64_t>((*ends)[0])[4],
            std::numeric_limits<int64_t>::max() - 3);  // min + 4 * (max / 2), without overflowing
}

TEST(RangeTest, ErrorsAndSymbolic) {
  const Tensor a = I64Scalar(0), b = MakeTensor<int32_t>(DType::kI32, {}, {4}), v = I64({0, 1});
  EXPECT_TRUE(ErrorContains(RunOp("Range", {&a, &b, &a}).status(), "must have the same dtype"));
  EXPECT_TRUE(
      ErrorContains(RunOp("Range", {&a, &v, &a}).status(), "input 1 (limit) has shape [2]; expected a scalar"));
  const Tensor h = MakeTensor<uint16_t>(DType::kF16, {}, {0});
  EXPECT_TRUE(ErrorContains(RunOp("Range", {&h, &h, &h}).status(), "input 0 (start) has dtype f16"));
  auto out = InferSymbolic("Range", {{DType::kF32, {}}, {DType::kF32, {}}, {DType::kF32, {}}});
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->shape.size(), 1u);
  EXPECT_TRUE(out->shape[0].is_unknown());
  EXPECT_EQ(out->dtype, DType::kF32);
}

TEST(ConstantOfShapeTest, ValuesAndDTypes) {
  const Tensor shape = I64({2, 3});
  auto out = RunOp("ConstantOfShape", {&shape});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].dtype(), DType::kF32);
  EXPECT_EQ(Values<float>((*out)[0]), std::vector<float>(6, 0.0f));
  for (DType t : kAllTypes) {
    const Tensor value = Pattern(t, {1}, 3);
    out = RunOp("ConstantOfShape", {&shape, &value});
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ((*out)[0].shape(), (Shape{2, 3}));
    ExpectMoved(value, (*out)[0], Ints(6, 0));
  }
  const Tensor ones = F32({1}, {1});
  const Tensor s3 = I64({4, 3, 2});
  out = RunOp("ConstantOfShape", {&s3, &ones});  // test_constantofshape_float_ones
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Values<float>((*out)[0]), std::vector<float>(24, 1.0f));
  const Tensor zero_dim = I64({0});
  const Tensor i32v = MakeTensor<int32_t>(DType::kI32, {1}, {0});
  out = RunOp("ConstantOfShape", {&zero_dim, &i32v});  // test_constantofshape_int_shape_zero
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].shape(), Shape{0});
  EXPECT_EQ((*out)[0].dtype(), DType::kI32);
  const Tensor scalar_shape = I64({});
  const Tensor scalar_value = MakeTensor<int64_t>(DType::kI64, {}, {9});
  out = RunOp("ConstantOfShape", {&scalar_shape, &scalar_value});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].shape(), Shape{});
  EXPECT_EQ(Values<int64_t>((*out)[0])[0], 9);
}

TEST(ConstantOfShapeTest, ErrorsAndSymbolic) {
  const Tensor neg = I64({2, -1}), ok = I64({2});
  EXPECT_TRUE(ErrorContains(RunOp("ConstantOfShape", {&neg}).status(), "has a negative dim"));
  const Tensor two = F32({2}, {1, 2});
  EXPECT_TRUE(ErrorContains(RunOp("ConstantOfShape", {&ok, &two}).status(),
                            "value (input 1) has shape [2]; expected one element"));
  const Tensor f = F32({1}, {2});
  EXPECT_TRUE(ErrorContains(RunOp("ConstantOfShape", {&f}).status(), "input 0 (shape) has dtype f32"));
  const Tensor huge = I64({std::numeric_limits<int64_t>::max(), 4});
  EXPECT_TRUE(ErrorContains(RunOp("ConstantOfShape", {&huge}).status(), "overflow"));
  auto out = InferSymbolic("ConstantOfShape", {{DType::kI64, {3}}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->shape.size(), 3u);
  EXPECT_TRUE(AllUnknown(out->shape));
  EXPECT_TRUE(ErrorContains(InferSymbolic("ConstantOfShape", {{DType::kI64, {SymDim::Symbol(0)}}}).status(),
                            "must have a known length"));
}

// ---------------------------------------------------------------------------
// Trilu, OneHot
// ---------------------------------------------------------------------------

void CheckTrilu(DType t, const Shape& shape, bool upper, const int64_t* k) {
  SCOPED_TRACE(::testing::Message() << DTypeName(t) << " " << ::testing::PrintToString(shape) << " upper " << upper
                                    << " k " << (k ? *k : 0));
  const Tensor x = Pattern(t, shape);
  Tensor kt;
  std::vector<const Tensor*> inputs = {&x};
  if (k != nullptr) {
    kt = I64Scalar(*k);
    inputs.push_back(&kt);
  }
  auto out = RunOp("Trilu", inputs, {{"upper", int64_t{upper ? 1 : 0}}});
  ASSERT_TRUE(out.ok()) << out.status();
  const int64_t kk = k ? *k : 0;
  const int64_t rows = shape[shape.size() - 2], cols = shape.back();
  Ints src;
  for (int64_t i = 0; i < Count(shape); ++i) {
    const int64_t r = (i / cols) % rows, c = i % cols;
    src.push_back((upper ? c - r >= kk : c - r <= kk) ? i : -1);
  }
  const uint64_t zero = 0;
  ExpectMoved(x, (*out)[0], src, &zero);
}

TEST(TriluTest, MatchesReference) {
  for (DType t : kAllTypes) {
    for (bool upper : {true, false}) {
      CheckTrilu(t, {4, 5}, upper, nullptr);
      for (int64_t k : {-7, -2, -1, 0, 1, 3, 6}) {
        CheckTrilu(t, {2, 3, 4}, upper, &k);  // batched
        CheckTrilu(t, {5, 3}, upper, &k);
      }
    }
  }
  for (int64_t k : {std::numeric_limits<int64_t>::max(), std::numeric_limits<int64_t>::min()}) {
    CheckTrilu(DType::kF32, {3, 3}, true, &k);
    CheckTrilu(DType::kF32, {3, 3}, false, &k);
  }
  CheckTrilu(DType::kF32, {0, 5}, true, nullptr);  // test_triu_zero-like
  CheckTrilu(DType::kF32, {3, 1, 5}, false, nullptr);
}

TEST(TriluTest, Errors) {
  const Tensor v = F32({3}, {1, 2, 3});
  EXPECT_TRUE(ErrorContains(RunOp("Trilu", {&v}).status(), "Trilu needs rank >= 2"));
  const Tensor m = F32({2, 2}, {1, 2, 3, 4});
  const Tensor ks = I64({1, 2});
  EXPECT_TRUE(ErrorContains(RunOp("Trilu", {&m, &ks}).status(), "input 1 (k) has shape [2]; expected a scalar"));
  EXPECT_TRUE(ErrorContains(RunOp("Trilu", {&m}, {{"upper", int64_t{2}}}).status(), "attribute upper is 2"));
}

TEST(OneHotTest, OnnxExamples) {
  // test_onehot_without_axis: indices [0, 7, 8], depth 12, values [2, 5].
  const Tensor idx = I64({3}, {0, 7, 8});
  const Tensor depth = MakeTensor<float>(DType::kF32, {}, {12});
  const Tensor values = MakeTensor<int32_t>(DType::kI32, {2}, {2, 5});
  auto out = RunOp("OneHot", {&idx, &depth, &values});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].shape(), (Shape{3, 12}));
  std::vector<int32_t> want(36, 2);
  want[0] = want[12 + 7] = want[24 + 8] = 5;
  EXPECT_EQ(Values<int32_t>((*out)[0]), want);

  // test_onehot_with_axis / negative indices: float indices, axis 1.
  const Tensor fidx = F32({2, 2}, {1, 9, -7, 2});  // -7 + 10 = 3
  const Tensor d10 = MakeTensor<float>(DType::kF32, {1}, {10});
  const Tensor fv = F32({2}, {0, 1});
  for (int64_t axis : {1, -2}) {
    out = RunOp("OneHot", {&fidx, &d10, &fv}, {{"axis", axis}});
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ((*out)[0].shape(), (Shape{2, 10, 2}));
    const std::vector<float> got = Values<float>((*out)[0]);
    for (int64_t i = 0; i < 2; ++i) {
      for (int64_t c = 0; c < 10; ++c) {
        for (int64_t j = 0; j < 2; ++j) {
          const float v = fidx.as<float>()[i * 2 + j];
          const int64_t want_c = v < 0 ? static_cast<int64_t>(v) + 10 : static_cast<int64_t>(v);
          EXPECT_EQ(got[(i * 10 + c) * 2 + j], c == want_c ? 1.0f : 0.0f);
        }
      }
    }
  }
}

TEST(OneHotTest, DTypesAndEdges) {
  for (DType t : kAllTypes) {
    const Tensor idx = MakeTensor<int8_t>(DType::kI8, {2}, {1, -1});
    const Tensor depth = I64Scalar(3);
    const Tensor values = Pattern(t, {2}, 5);
    auto out = RunOp("OneHot", {&idx, &depth, &values}, {{"axis", int64_t{0}}});
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ((*out)[0].shape(), (Shape{3, 2}));
    ExpectMoved(values, (*out)[0], {0, 0, 1, 0, 0, 1});
  }
  const Tensor far = I64({2}, {5, -9});                                  // out of range: all off
  const Tensor depth = MakeTensor<uint16_t>(DType::kF16, {}, {0x4200});  // 3.0
  const Tensor values = F32({2}, {0, 1});
  auto out = RunOp("OneHot", {&far, &depth, &values});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Values<float>((*out)[0]), std::vector<float>(6, 0.0f));
  const Tensor scalar = I64Scalar(1);
  out = RunOp("OneHot", {&scalar, &depth, &values});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(Values<float>((*out)[0]), ElementsAre(0, 1, 0));
  const Tensor zero_depth = I64Scalar(0);
  out = RunOp("OneHot", {&far, &zero_depth, &values});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].shape(), (Shape{2, 0}));
}

TEST(OneHotTest, ErrorsAndSymbolic) {
  const Tensor idx = I64({2}, {0, 1});
  const Tensor depth = I64Scalar(3), neg = I64Scalar(-1), values = F32({2}, {0, 1}), three = F32({3}, {0, 1, 2});
  EXPECT_TRUE(
      ErrorContains(RunOp("OneHot", {&idx, &neg, &values}).status(), "depth (input 1) is -1; expected >= 0"));
  EXPECT_TRUE(ErrorContains(RunOp("OneHot", {&idx, &depth, &three}).status(), "values (input 2) has shape [3]"));
  EXPECT_TRUE(ErrorContains(RunOp("OneHot", {&idx, &depth, &values}, {{"axis", int64_t{2}}}).status(),
                            "attribute axis is 2; expected -2..1"));
  const Tensor bidx = MakeTensor<uint8_t>(DType::kBool, {1}, {1});
  EXPECT_TRUE(
      ErrorContains(RunOp("OneHot", {&bidx, &depth, &values}).status(), "input 0 (indices) has dtype bool"));
  const Tensor nan_depth = F32({}, {NAN});
  EXPECT_TRUE(ErrorContains(RunOp("OneHot", {&idx, &nan_depth, &values}).status(), "not an integer count"));
  const SymDim b = SymDim::Symbol(0);
  auto out = InferSymbolic("OneHot", {{DType::kI64, {b}}, {DType::kI64, {}}, {DType::kF32, {2}}});
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->shape.size(), 2u);
  EXPECT_EQ(out->shape[0], b);
  EXPECT_TRUE(out->shape[1].is_unknown());
  out = InferSymbolic("OneHot", {{DType::kI64, {b}}, {DType::kI64, {}, &depth}, {DType::kF32, {2}}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->shape, (SymShape{b, 3}));
}

// ---------------------------------------------------------------------------
// Sizes from values are checked before anything is planned.
// ---------------------------------------------------------------------------

TEST(LayoutLimitsTest, HugeValuesAreErrorsNotOverflows) {
  constexpr int64_t kBig = std::numeric_limits<int64_t>::max() / 2;
  const Tensor x = Pattern(DType::kF32, {3, 2});
  const Tensor reps = I64({kBig, 1});
  EXPECT_TRUE(ErrorContains(RunOp("Tile", {&x, &reps}).status(), "overflow dim 0"));
  const Tensor reps_size = I64({int64_t{1} << 46, 1});
  EXPECT_TRUE(ErrorContains(RunOp("Tile", {&x, &reps_size}).status(), "larger than the 256 TiB limit"));
  const Tensor pads = I64({kBig, 0, kBig, 0});
  EXPECT_TRUE(ErrorContains(RunOp("Pad", {&x, &pads}).status(), "overflow dim 0"));
  const Tensor big_shape = I64({int64_t{1} << 30, int64_t{1} << 30, 2});
  const Tensor one = Pattern(DType::kF32, {1});
  EXPECT_TRUE(ErrorContains(RunOp("Expand", {&one, &big_shape}).status(), "output 0: size overflows"));
  const Tensor depth = I64Scalar(int64_t{1} << 50);
  const Tensor idx = I64({4}, {0, 1, 2, 3});
  const Tensor values = F32({2}, {0, 1});
  EXPECT_TRUE(ErrorContains(RunOp("OneHot", {&idx, &depth, &values}).status(), "output 0"));
  const Tensor long_axes = I64(Iota(70));
  EXPECT_TRUE(ErrorContains(RunOp("Unsqueeze", {&x, &long_axes}).status(), "rank 72; at most 64"));
  const Tensor long_shape = I64(Ints(65, 1));
  EXPECT_TRUE(ErrorContains(RunOp("ConstantOfShape", {&long_shape}).status(), "rank 65; at most 64"));
  EXPECT_TRUE(ErrorContains(RunOp("Expand", {&one, &long_shape}).status(), "rank 65; at most 64"));
  const SymDim b = SymDim::Symbol(0);
  auto out = InferSymbolic("Unsqueeze", {{DType::kF32, {b}}, {DType::kI64, {int64_t{1} << 40}}});
  EXPECT_TRUE(ErrorContains(out.status(), "at most 64"));
  // Symbolic dims with huge constants are left to run time.
  const Tensor far_pads = I64({kBig, 0});
  out = InferSymbolic("Pad", {{DType::kF32, {b}}, {DType::kI64, {2}, &far_pads}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(out->shape[0].is_unknown());
}

// ---------------------------------------------------------------------------
// Whole models: shape inputs known only when the op runs.
// ---------------------------------------------------------------------------

TEST(LayoutModelTest, PadWithRuntimePads) {
  ModelBuilder b;
  b.AddSymbol("n", 1, 8);
  b.AddInput("x", DType::kF32, {"n", 2});
  b.AddInput("pads", DType::kI64, {4});
  b.AddOp("Pad", {"x", "pads"}, {"y"}, {{"mode", std::string("edge")}});
  b.AddOutput("y");
  auto session = NewSession(b.Finish());
  std::vector<float> x = {1, 2, 3, 4};
  for (const Ints& pads : {Ints{0, 1, 0, 0}, Ints{1, 0, 2, 1}}) {
    auto out =
        session->Run({TensorView(DType::kF32, {2, 2}, x.data()), TensorView(DType::kI64, {4}, pads.data())});
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ((*out)[0].shape, (Shape{2 + pads[0] + pads[2], 2 + pads[1] + pads[3]}));
  }
  Ints bad = {-5, 0, 0, 0};
  auto out = session->Run({TensorView(DType::kF32, {2, 2}, x.data()), TensorView(DType::kI64, {4}, bad.data())});
  EXPECT_TRUE(ErrorContains(out.status(), "negative"));
}

TEST(LayoutModelTest, RangeSplitAndConstantOfShapeFromRuntimeValues) {
  ModelBuilder b;
  b.AddInput("limit", DType::kI64, {});
  b.AddInput("sizes", DType::kI64, {2});
  b.AddWeight("start", DType::kI64, {}, Ints{0});
  b.AddWeight("delta", DType::kI64, {}, Ints{1});
  b.AddOp("Range", {"start", "limit", "delta"}, {"r"});
  b.AddOp("Split", {"r", "sizes"}, {"a", "b"});
  b.AddOp("Shape", {"a"}, {"shape_a"});
  b.AddWeight("seven", DType::kI32, {1}, std::vector<int32_t>{7});
  b.AddOp("ConstantOfShape", {"shape_a", "seven"}, {"c"});
  b.AddOp("Size", {"b"}, {"size_b"});
  b.AddOutput("a");
  b.AddOutput("b");
  b.AddOutput("c");
  b.AddOutput("size_b");
  auto session = NewSession(b.Finish());
  const int64_t limit = 5;
  const Ints sizes = {2, 3};
  auto out = session->Run({TensorView(DType::kI64, {}, &limit), TensorView(DType::kI64, {2}, sizes.data())});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(Values<int64_t>(Tensor::CopyOf((*out)[0]).value()), ElementsAre(0, 1));
  EXPECT_THAT(Values<int64_t>(Tensor::CopyOf((*out)[1]).value()), ElementsAre(2, 3, 4));
  EXPECT_THAT(Values<int32_t>(Tensor::CopyOf((*out)[2]).value()), ElementsAre(7, 7));
  EXPECT_EQ(*(*out)[3].as<int64_t>(), 3);
}

TEST(LayoutModelTest, SymbolicLoadThenConcreteRun) {
  ModelBuilder b;
  b.AddSymbol("batch", 1, 16);
  b.AddSymbol("seq", 1, 64);
  b.AddInput("x", DType::kF32, {"batch", "seq"});
  b.AddWeight("axes", DType::kI64, {1}, Ints{1});
  b.AddOp("Unsqueeze", {"x", "axes"}, {"u"});
  b.AddOp("Shape", {"x"}, {"shape"});
  b.AddWeight("one", DType::kI64, {1}, Ints{1});
  b.AddOp("Concat", {"one", "shape"}, {"target"}, {{"axis", int64_t{0}}});
  b.AddOp("Expand", {"u", "target"}, {"e"});  // [batch, 1, seq] against [1, batch, seq]
  b.AddOp("Squeeze", {"e"}, {"s"});
  b.AddOp("Flatten", {"s"}, {"f"}, {{"axis", int64_t{0}}});
  b.AddOutput("f");
  auto session = NewSession(b.Finish());
  std::vector<float> x = {1, 2, 3, 4, 5, 6};
  auto out = session->Run({TensorView(DType::kF32, {2, 3}, x.data())});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].shape, (Shape{1, 12}));
  EXPECT_THAT(Values<float>(Tensor::CopyOf((*out)[0]).value()), ElementsAre(1, 2, 3, 1, 2, 3, 4, 5, 6, 4, 5, 6));
}

}  // namespace
}  // namespace grove::testing
