// ReduceSum and ReduceMean against naive references written here: every axis
// subset (positive and negative), keepdims 0/1, axes as attribute and as
// input, empty axes, zero-size dims, rank 0, symbolic shapes, errors.
// Softmax is the norm group's (norm_test.cc).
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lib/ir/op_registry.h"
#include "lib/runtime/registry.h"
#include "test/op_test_util.h"

namespace grove {
namespace {

using ::grove::testing::Count;
using ::grove::testing::MakeTensor;
using ::grove::testing::RunOp;
using ::grove::testing::Values;
using ::testing::HasSubstr;
using Shape = std::vector<int64_t>;
using Attrs = std::vector<std::pair<std::string, AttrValue>>;

template <typename T>
std::vector<T> Pattern(int64_t n) {
  std::vector<T> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    v[i] = static_cast<T>((i * 29 + 7) % 23 - 11) / static_cast<T>(std::is_floating_point_v<T> ? 4 : 1);
  return v;
}

// Sums (or averages) x over the dims marked in `reduced`, in double.
std::vector<double> ReduceRef(const Shape& shape, const std::vector<double>& x, const std::vector<bool>& reduced,
                              bool keepdims, bool mean, Shape* out_shape) {
  out_shape->clear();
  Shape kept;
  int64_t count = 1;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (reduced[d]) {
      count *= shape[d];
      if (keepdims) out_shape->push_back(1);
    } else {
      kept.push_back(shape[d]);
      out_shape->push_back(shape[d]);
    }
  }
  std::vector<double> acc(static_cast<size_t>(Count(kept)), 0.0);
  for (int64_t i = 0; i < Count(shape); ++i) {
    int64_t rest = i, o = 0, scale = 1;
    for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {
      const int64_t idx = rest % shape[d];
      rest /= shape[d];
      if (!reduced[d]) {
        o += idx * scale;
        scale *= shape[d];
      }
    }
    acc[o] += x[i];
  }
  if (mean) {
    for (double& v : acc) v /= static_cast<double>(count);
  }
  return acc;
}

template <typename T>
void ExpectReduce(const std::string& op, DType dtype, const Shape& shape, const std::vector<int64_t>& axes,
                  bool keepdims, bool axes_as_input = false) {
  SCOPED_TRACE(absl::StrCat(op, " ", DTypeName(dtype), " [", absl::StrJoin(shape, ","), "] axes {",
                            absl::StrJoin(axes, ","), "} keepdims ", keepdims, axes_as_input ? " (input)" : ""));
  const std::vector<T> x = Pattern<T>(Count(shape));
  std::vector<bool> reduced(shape.size(), axes.empty());
  for (int64_t a : axes) reduced[a < 0 ? a + static_cast<int64_t>(shape.size()) : a] = true;
  Shape want_shape;
  const std::vector<double> want = ReduceRef(shape, std::vector<double>(x.begin(), x.end()), reduced, keepdims,
                                             op == "ReduceMean", &want_shape);

  Tensor t = MakeTensor<T>(dtype, shape, x);
  Tensor axes_tensor = MakeTensor<int64_t>(DType::kI64, {static_cast<int64_t>(axes.size())}, axes);
  Attrs attrs = {{"keepdims", int64_t{keepdims}}};
  if (!axes_as_input && !axes.empty()) attrs.push_back({"axes", axes});
  auto out = axes_as_input ? RunOp(op, {&t, &axes_tensor}, attrs) : RunOp(op, {&t}, attrs);
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ((*out)[0].shape(), want_shape);
  ASSERT_EQ((*out)[0].dtype(), dtype);
  const std::vector<T> got = Values<T>((*out)[0]);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    if constexpr (std::is_floating_point_v<T>) {
      EXPECT_NEAR(got[i], want[i], 1e-5 * (1 + std::abs(want[i]))) << "at " << i;
    } else {
      EXPECT_EQ(got[i], static_cast<T>(want[i])) << "at " << i;
    }
  }
}

// Every subset of the dims, each axis written positive or negative in turn.
std::vector<std::vector<int64_t>> AxisSubsets(int rank) {
  std::vector<std::vector<int64_t>> subsets;
  for (int mask = 0; mask < (1 << rank); ++mask) {
    std::vector<int64_t> axes;
    for (int d = 0; d < rank; ++d) {
      if (mask & (1 << d)) axes.push_back((mask + d) % 2 ? d - rank : d);
    }
    subsets.push_back(axes);
  }
  return subsets;
}

template <typename T>
void ExpectAllSubsets(const std::string& op, DType dtype, const Shape& shape) {
  for (const std::vector<int64_t>& axes : AxisSubsets(static_cast<int>(shape.size()))) {
    for (bool keepdims : {false, true}) {
      ExpectReduce<T>(op, dtype, shape, axes, keepdims);
      if (op == "ReduceSum") ExpectReduce<T>(op, dtype, shape, axes, keepdims, /*axes_as_input=*/true);
    }
  }
}

TEST(ReduceTest, SumF32) {
  ExpectAllSubsets<float>("ReduceSum", DType::kF32, {2, 3, 4});
  ExpectAllSubsets<float>("ReduceSum", DType::kF32, {5, 1, 40, 3});
}
TEST(ReduceTest, SumF64) { ExpectAllSubsets<double>("ReduceSum", DType::kF64, {3, 37, 5}); }
TEST(ReduceTest, SumI32) { ExpectAllSubsets<int32_t>("ReduceSum", DType::kI32, {2, 3, 4}); }
TEST(ReduceTest, SumI64) { ExpectAllSubsets<int64_t>("ReduceSum", DType::kI64, {4, 1, 3, 2}); }
TEST(ReduceTest, MeanF32) {
  ExpectAllSubsets<float>("ReduceMean", DType::kF32, {2, 3, 4});
  ExpectAllSubsets<float>("ReduceMean", DType::kF32, {1, 7, 1, 9});
}
TEST(ReduceTest, MeanF64) { ExpectAllSubsets<double>("ReduceMean", DType::kF64, {3, 37, 5}); }

// f16 and bf16 sum in double and round once: the result is the double
// reference rounded to the dtype, bit for bit (the inputs, quarters in
// [-2.75, 2.75], are exact in both).
TEST(ReduceTest, SumAndMeanHalfTypes) {
  const Shape shape = {3, 37, 5};
  const std::vector<float> x = Pattern<float>(Count(shape));
  const Tensor x32 = MakeTensor<float>(DType::kF32, shape, x);
  for (DType dtype : {DType::kF16, DType::kBF16}) {
    const Tensor xt = Tensor::CastOf(x32.view(), dtype).value();
    for (const char* op : {"ReduceSum", "ReduceMean"}) {
      for (const std::vector<int64_t>& axes : AxisSubsets(static_cast<int>(shape.size()))) {
        SCOPED_TRACE(absl::StrCat(op, " ", DTypeName(dtype), " axes {", absl::StrJoin(axes, ","), "}"));
        std::vector<bool> reduced(shape.size(), axes.empty());
        for (int64_t a : axes) reduced[a < 0 ? a + static_cast<int64_t>(shape.size()) : a] = true;
        Shape want_shape;
        const std::vector<double> want =
            ReduceRef(shape, std::vector<double>(x.begin(), x.end()), reduced, true, op == std::string("ReduceMean"),
                      &want_shape);
        const Tensor want64 = MakeTensor<double>(DType::kF64, want_shape, want);
        const Tensor want_t = Tensor::CastOf(want64.view(), dtype).value();
        Attrs attrs;
        if (!axes.empty()) attrs.push_back({"axes", axes});
        auto out = RunOp(op, {&xt}, attrs);
        ASSERT_TRUE(out.ok()) << out.status();
        ASSERT_EQ((*out)[0].dtype(), dtype);
        ASSERT_EQ((*out)[0].shape(), want_shape);
        EXPECT_EQ(Values<uint16_t>((*out)[0]), Values<uint16_t>(want_t));
      }
    }
  }
}

TEST(ReduceTest, DefaultsReduceEverythingAndKeepDims) {
  Tensor t = MakeTensor<float>(DType::kF32, {2, 3}, {1, 2, 3, 4, 5, 6});
  auto sum = RunOp("ReduceSum", {&t});
  ASSERT_TRUE(sum.ok()) << sum.status();
  EXPECT_EQ((*sum)[0].shape(), (Shape{1, 1}));
  EXPECT_EQ(Values<float>((*sum)[0]), std::vector<float>{21});
  auto mean = RunOp("ReduceMean", {&t}, {{"keepdims", int64_t{0}}});
  ASSERT_TRUE(mean.ok()) << mean.status();
  EXPECT_TRUE((*mean)[0].shape().empty());
  EXPECT_EQ(Values<float>((*mean)[0]), std::vector<float>{3.5});
}

TEST(ReduceTest, NoopWithEmptyAxes) {
  Tensor t = MakeTensor<float>(DType::kF32, {2, 3}, {1, 2, 3, 4, 5, 6});
  auto noop = RunOp("ReduceSum", {&t}, {{"noop_with_empty_axes", int64_t{1}}});
  ASSERT_TRUE(noop.ok()) << noop.status();
  EXPECT_EQ((*noop)[0].shape(), (Shape{2, 3}));
  EXPECT_EQ(Values<float>((*noop)[0]), (std::vector<float>{1, 2, 3, 4, 5, 6}));
  // An empty axes input is empty axes too.
  Tensor no_axes = MakeTensor<int64_t>(DType::kI64, {0}, {});
  auto noop_input =
      RunOp("ReduceSum", {&t, &no_axes}, {{"noop_with_empty_axes", int64_t{1}}, {"keepdims", int64_t{0}}});
  ASSERT_TRUE(noop_input.ok()) << noop_input.status();
  EXPECT_EQ((*noop_input)[0].shape(), (Shape{2, 3}));
  auto all = RunOp("ReduceSum", {&t, &no_axes}, {{"keepdims", int64_t{0}}});
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_TRUE((*all)[0].shape().empty());
  EXPECT_EQ(Values<float>((*all)[0]), std::vector<float>{21});
  auto mean_noop = RunOp("ReduceMean", {&t}, {{"noop_with_empty_axes", int64_t{1}}});
  ASSERT_TRUE(mean_noop.ok()) << mean_noop.status();
  EXPECT_EQ(Values<float>((*mean_noop)[0]), (std::vector<float>{1, 2, 3, 4, 5, 6}));
}

TEST(ReduceTest, AxesInputMayBeI32AndReduceMeanTakesItToo) {
  Tensor t = MakeTensor<double>(DType::kF64, {2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor axes = MakeTensor<int32_t>(DType::kI32, {1}, {-1});
  auto sum = RunOp("ReduceSum", {&t, &axes}, {{"keepdims", int64_t{0}}});
  ASSERT_TRUE(sum.ok()) << sum.status();
  EXPECT_EQ(Values<double>((*sum)[0]), (std::vector<double>{6, 15}));
  Tensor axes0 = MakeTensor<int64_t>(DType::kI64, {1}, {0});
  auto mean = RunOp("ReduceMean", {&t, &axes0});
  ASSERT_TRUE(mean.ok()) << mean.status();
  EXPECT_EQ((*mean)[0].shape(), (Shape{1, 3}));
  EXPECT_EQ(Values<double>((*mean)[0]), (std::vector<double>{2.5, 3.5, 4.5}));
}

TEST(ReduceTest, ZeroSizeDims) {
  Tensor t = MakeTensor<float>(DType::kF32, {0, 3}, {});
  auto sum = RunOp("ReduceSum", {&t}, {{"axes", std::vector<int64_t>{0}}, {"keepdims", int64_t{0}}});
  ASSERT_TRUE(sum.ok()) << sum.status();
  EXPECT_EQ((*sum)[0].shape(), (Shape{3}));
  EXPECT_EQ(Values<float>((*sum)[0]), (std::vector<float>{0, 0, 0}));
  auto mean = RunOp("ReduceMean", {&t}, {{"axes", std::vector<int64_t>{0}}});
  ASSERT_TRUE(mean.ok()) << mean.status();
  EXPECT_EQ((*mean)[0].shape(), (Shape{1, 3}));
  for (float v : Values<float>((*mean)[0])) EXPECT_TRUE(std::isnan(v));
  auto kept_empty = RunOp("ReduceMean", {&t}, {{"axes", std::vector<int64_t>{1}}});
  ASSERT_TRUE(kept_empty.ok()) << kept_empty.status();
  EXPECT_EQ((*kept_empty)[0].shape(), (Shape{0, 1}));
  auto all = RunOp("ReduceMean", {&t}, {{"keepdims", int64_t{0}}});
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_TRUE(std::isnan(Values<float>((*all)[0])[0]));
  Tensor ti = MakeTensor<int64_t>(DType::kI64, {2, 0}, {});
  auto isum = RunOp("ReduceSum", {&ti}, {{"axes", std::vector<int64_t>{-1}}, {"keepdims", int64_t{0}}});
  ASSERT_TRUE(isum.ok()) << isum.status();
  EXPECT_EQ(Values<int64_t>((*isum)[0]), (std::vector<int64_t>{0, 0}));
}

TEST(ReduceTest, RankZero) {
  Tensor t = MakeTensor<float>(DType::kF32, {}, {5});
  for (const char* op : {"ReduceSum", "ReduceMean"}) {
    auto out = RunOp(op, {&t});
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_TRUE((*out)[0].shape().empty());
    EXPECT_EQ(Values<float>((*out)[0]), std::vector<float>{5});
    auto bad = RunOp(op, {&t}, {{"axes", std::vector<int64_t>{0}}});
    ASSERT_FALSE(bad.ok());
    EXPECT_THAT(bad.status().message(), HasSubstr("rank-0"));
  }
}

TEST(ReduceTest, IntegerSumWraps) {
  Tensor t = MakeTensor<int32_t>(DType::kI32, {2}, {std::numeric_limits<int32_t>::max(), 1});
  auto out = RunOp("ReduceSum", {&t}, {{"keepdims", int64_t{0}}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Values<int32_t>((*out)[0]), std::vector<int32_t>{std::numeric_limits<int32_t>::min()});
}

TEST(ReduceTest, Errors) {
  Tensor t = MakeTensor<float>(DType::kF32, {2, 3, 4}, {});
  auto expect_error = [](const absl::StatusOr<std::vector<Tensor>>& out, const std::string& part) {
    ASSERT_FALSE(out.ok()) << part;
    EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(out.status().message(), HasSubstr(part));
  };
  expect_error(RunOp("ReduceSum", {&t}, {{"axes", std::vector<int64_t>{3}}}), "axis 3 is out of range for rank 3");
  expect_error(RunOp("ReduceMean", {&t}, {{"axes", std::vector<int64_t>{-4}}}), "axis -4 is out of range");
  expect_error(RunOp("ReduceSum", {&t}, {{"axes", std::vector<int64_t>{1, -2}}}), "twice");
  expect_error(RunOp("ReduceSum", {&t}, {{"keepdims", int64_t{2}}}), "attribute 'keepdims' is 2");
  expect_error(RunOp("ReduceMean", {&t}, {{"noop_with_empty_axes", int64_t{-1}}}), "'noop_with_empty_axes'");
  Tensor axes = MakeTensor<int64_t>(DType::kI64, {1}, {0});
  expect_error(RunOp("ReduceSum", {&t, &axes}, {{"axes", std::vector<int64_t>{0}}}), "both");
  Tensor axes2d = MakeTensor<int64_t>(DType::kI64, {1, 1}, {0});
  expect_error(RunOp("ReduceSum", {&t, &axes2d}), "input 1 (axes) must be 1-D");
  Tensor axes_f = MakeTensor<float>(DType::kF32, {1}, {0});
  expect_error(RunOp("ReduceSum", {&t, &axes_f}), "input 1 (axes) has dtype f32");
  Tensor ti = MakeTensor<int32_t>(DType::kI32, {2}, {1, 2});
  expect_error(RunOp("ReduceMean", {&ti}), "input 0 (data) has dtype i32");
  Tensor tb = MakeTensor<uint8_t>(DType::kBool, {2}, {1, 0});
  expect_error(RunOp("ReduceSum", {&tb}), "input 0 (data) has dtype bool");
  Tensor tu = MakeTensor<uint8_t>(DType::kU8, {2}, {1, 0});
  expect_error(RunOp("ReduceMean", {&tu}), "input 0 (data) has dtype u8");
}

// --- registry and symbolic shapes -------------------------------------------

TEST(ReductionRegistryTest, EveryOpHasACpuKernelAndItsAttributes) {
  const ir::OpRegistry& registry = runtime::GlobalOpRegistry();
  for (const char* op : {"ReduceSum", "ReduceMean"}) {
    ASSERT_TRUE(registry.Supports(op, ir::Backend::kCpu)) << op;
    const ir::OpDef* def = registry.Find(op);
    for (const char* attr : {"keepdims", "axes", "noop_with_empty_axes"})
      EXPECT_NE(def->FindAttr(attr), nullptr) << attr;
    EXPECT_EQ(def->max_inputs, 2);
  }
}

struct SymbolicResult {
  absl::Status status;
  std::vector<ir::ShapeContext::Output> outputs;
};

// Inputs without values, as when a model is inspected without shapes.
SymbolicResult InferSymbolic(const std::string& type, std::vector<std::pair<DType, ir::SymShape>> inputs,
                             Attrs attrs = {}) {
  ir::Graph graph;
  graph.symbols = {{"batch", 1, 64}, {"seq", 1, 512}};
  ir::Node node;
  node.type = type;
  node.def = runtime::GlobalOpRegistry().Find(type);
  node.outputs = {static_cast<int>(inputs.size())};
  for (auto& [name, value] : attrs) node.attrs.Set(name, value);
  std::vector<ir::ShapeContext::Input> in;
  for (auto& [dtype, shape] : inputs) {
    node.inputs.push_back(static_cast<int>(in.size()));
    in.push_back({true, dtype, shape, nullptr});
  }
  ir::ShapeContext ctx(node, graph, std::move(in), nullptr);
  SymbolicResult r;
  r.status = ir::InferShapes(ctx);
  r.outputs = ctx.outputs();
  return r;
}

TEST(ReductionShapeTest, SymbolicShapes) {
  const ir::SymDim batch = ir::SymDim::Symbol(0), seq = ir::SymDim::Symbol(1);
  SymbolicResult r = InferSymbolic("ReduceMean", {{DType::kF32, {batch, seq, 8}}},
                                   {{"axes", std::vector<int64_t>{1}}, {"keepdims", int64_t{0}}});
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_EQ(r.outputs[0].shape, (ir::SymShape{batch, 8}));
}

TEST(ReductionShapeTest, AxesInputUnknownAtPlanTime) {
  const ir::SymDim batch = ir::SymDim::Symbol(0);
  SymbolicResult r = InferSymbolic("ReduceSum", {{DType::kF32, {batch, 1, 8}}, {DType::kI64, {2}}});
  ASSERT_TRUE(r.status.ok()) << r.status;
  ASSERT_EQ(r.outputs[0].shape.size(), 3u);
  EXPECT_TRUE(r.outputs[0].shape[0].is_unknown());
  EXPECT_EQ(r.outputs[0].shape[1], ir::SymDim(1));  // 1 whether reduced or not
  EXPECT_TRUE(r.outputs[0].shape[2].is_unknown());

  // keepdims = 0: two axes leave rank 1, its dim known only at run time.
  r = InferSymbolic("ReduceSum", {{DType::kF32, {batch, 1, 8}}, {DType::kI64, {2}}}, {{"keepdims", int64_t{0}}});
  ASSERT_TRUE(r.status.ok()) << r.status;
  ASSERT_EQ(r.outputs[0].shape.size(), 1u);
  EXPECT_TRUE(r.outputs[0].shape[0].is_unknown());

  // ... unless the number of axes is not known either, or exceeds the rank.
  r = InferSymbolic("ReduceSum", {{DType::kF32, {batch, 1, 8}}, {DType::kI64, {batch}}}, {{"keepdims", int64_t{0}}});
  ASSERT_FALSE(r.status.ok());
  EXPECT_THAT(r.status.message(), HasSubstr("input 1 (axes) has a dynamic length"));
  EXPECT_THAT(r.status.message(), HasSubstr("ReduceSum"));
  r = InferSymbolic("ReduceSum", {{DType::kF32, {batch, 8}}, {DType::kI64, {3}}}, {{"keepdims", int64_t{0}}});
  ASSERT_FALSE(r.status.ok());
  EXPECT_THAT(r.status.message(), HasSubstr("names 3 axes; input 0 (data) has rank 2"));

  // An axes input known to be empty needs no value.
  r = InferSymbolic("ReduceSum", {{DType::kF32, {batch, 8}}, {DType::kI64, {0}}}, {{"keepdims", int64_t{0}}});
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_TRUE(r.outputs[0].shape.empty());
}

}  // namespace
}  // namespace grove
