// ReduceMax ReduceMin ReduceProd ReduceL1 ReduceL2 ReduceLogSum
// ReduceLogSumExp ReduceSumSquare, ArgMax ArgMin, TopK, CumSum and NonZero
// against naive references written here: every axis subset (positive and
// negative), keepdims, axes as attribute and as input, ties, NaN, empty
// reductions, zero-size dims, rank 0, symbolic shapes, data-dependent shapes
// through a session, and every error returned.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <numeric>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lib/ir/element_types.h"
#include "lib/ir/op_registry.h"
#include "lib/runtime/registry.h"
#include "test/model_test_util.h"
#include "test/op_test_util.h"
#include "test/ops/symbolic_shape_util.h"

namespace grove {
namespace {

using ::grove::testing::Count;
using ::grove::testing::ErrorContains;
using ::grove::testing::InferSymbolic;
using ::grove::testing::MakeTensor;
using ::grove::testing::RunKernelPlanned;
using ::grove::testing::RunOp;
using ::grove::testing::SymInput;
using ::grove::testing::Values;
using Shape = std::vector<int64_t>;
using Attrs = std::vector<std::pair<std::string, AttrValue>>;

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr float kNaNf = std::numeric_limits<float>::quiet_NaN();

::testing::AssertionResult Close(double got, double want, double rtol, double atol = 1e-7) {
  if (std::isnan(want)) {
    if (std::isnan(got)) return ::testing::AssertionSuccess();
  } else if (std::isinf(want)) {
    if (got == want) return ::testing::AssertionSuccess();
  } else if (std::abs(got - want) <= atol + rtol * std::abs(want)) {
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure() << "got " << got << ", want " << want;
}

std::vector<uint16_t> ToHalf(const std::vector<float>& v) {
  std::vector<uint16_t> out;
  for (float f : v) out.push_back(ir::FloatToHalf(f).bits);
  return out;
}
std::vector<uint16_t> ToBF16(const std::vector<float>& v) {
  std::vector<uint16_t> out;
  for (float f : v) out.push_back(ir::FloatToBFloat16(f).bits);
  return out;
}

// --- Reduce* ------------------------------------------------------------------

// The values an op reduces: each output element's inputs, in memory order.
std::vector<std::vector<double>> GroupsRef(const Shape& shape, const std::vector<double>& x,
                                           const std::vector<bool>& reduced, bool keepdims, Shape* out_shape) {
  out_shape->clear();
  Shape kept;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (reduced[d]) {
      if (keepdims) out_shape->push_back(1);
    } else {
      kept.push_back(shape[d]);
      out_shape->push_back(shape[d]);
    }
  }
  std::vector<std::vector<double>> groups(static_cast<size_t>(Count(kept)));
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
    groups[o].push_back(x[i]);
  }
  return groups;
}

double ReduceRef(const std::string& op, const std::vector<double>& v) {
  double acc;
  if (op == "ReduceMax") {
    acc = -kInf;
    for (double x : v) acc = std::max(acc, x);
  } else if (op == "ReduceMin") {
    acc = kInf;
    for (double x : v) acc = std::min(acc, x);
  } else if (op == "ReduceProd") {
    acc = 1;
    for (double x : v) acc *= x;
  } else if (op == "ReduceL1") {
    acc = 0;
    for (double x : v) acc += std::fabs(x);
  } else if (op == "ReduceL2") {
    acc = 0;
    for (double x : v) acc += x * x;
    acc = std::sqrt(acc);
  } else if (op == "ReduceSumSquare") {
    acc = 0;
    for (double x : v) acc += x * x;
  } else if (op == "ReduceLogSum") {
    acc = 0;
    for (double x : v) acc += x;
    acc = std::log(acc);
  } else {  // ReduceLogSumExp, stable like the kernel so integer truncation agrees
    double m = -kInf;
    for (double x : v) m = std::max(m, x);
    double sum = 0;
    for (double x : v) sum += std::exp(x - m);
    acc = std::isfinite(m) ? m + std::log(sum) : m;
  }
  return acc;
}

// Values that keep every op finite and exact enough: products of 24 of
// them fit in i32, sums for ReduceLogSum are positive.
template <typename T>
std::vector<T> ReducePattern(const std::string& op, int64_t n) {
  std::vector<T> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    int64_t x = (i * 29 + 7) % 23 - 11;
    if (op == "ReduceProd") x = std::vector<int64_t>{-2, -1, 1, 2}[i % 4] * ((i % 7 == 3) ? -1 : 1);
    if (op == "ReduceLogSum" || std::is_unsigned_v<T>) x = (i * 29 + 7) % 23 + 1;
    v[i] = static_cast<T>(x) / static_cast<T>(std::is_floating_point_v<T> ? 4 : 1);
  }
  return v;
}

template <typename T>
void ExpectReduce(const std::string& op, DType dtype, const Shape& shape, const std::vector<int64_t>& axes,
                  bool keepdims, bool axes_as_input) {
  SCOPED_TRACE(absl::StrCat(op, " ", DTypeName(dtype), " [", absl::StrJoin(shape, ","), "] axes {",
                            absl::StrJoin(axes, ","), "} keepdims ", keepdims, axes_as_input ? " (input)" : ""));
  const std::vector<T> x = ReducePattern<T>(op, Count(shape));
  std::vector<bool> reduced(shape.size(), axes.empty());
  for (int64_t a : axes) reduced[a < 0 ? a + static_cast<int64_t>(shape.size()) : a] = true;
  Shape want_shape;
  const auto groups = GroupsRef(shape, std::vector<double>(x.begin(), x.end()), reduced, keepdims, &want_shape);

  Tensor t = MakeTensor<T>(dtype, shape, x);
  Tensor axes_tensor = MakeTensor<int64_t>(DType::kI64, {static_cast<int64_t>(axes.size())}, axes);
  Attrs attrs = {{"keepdims", int64_t{keepdims}}};
  if (!axes_as_input && !axes.empty()) attrs.push_back({"axes", axes});
  auto out = axes_as_input ? RunOp(op, {&t, &axes_tensor}, attrs) : RunOp(op, {&t}, attrs);
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ((*out)[0].shape(), want_shape);
  ASSERT_EQ((*out)[0].dtype(), dtype);
  const std::vector<T> got = Values<T>((*out)[0]);
  ASSERT_EQ(got.size(), groups.size());
  for (size_t i = 0; i < got.size(); ++i) {
    const double want = ReduceRef(op, groups[i]);
    if constexpr (std::is_floating_point_v<T>) {
      EXPECT_TRUE(Close(got[i], static_cast<double>(static_cast<T>(want)), 1e-6)) << "at " << i;
    } else {
      EXPECT_EQ(got[i], static_cast<T>(want)) << "at " << i;
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

const std::vector<std::string>& AllReduceOps() {
  static const auto* ops =
      new std::vector<std::string>{"ReduceMax", "ReduceMin",    "ReduceProd",      "ReduceL1",
                                   "ReduceL2",  "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare"};
  return *ops;
}

template <typename T>
void ExpectAllSubsets(const std::vector<std::string>& ops, DType dtype, const Shape& shape) {
  for (const std::string& op : ops) {
    for (const std::vector<int64_t>& axes : AxisSubsets(static_cast<int>(shape.size()))) {
      for (bool keepdims : {false, true}) {
        ExpectReduce<T>(op, dtype, shape, axes, keepdims, /*axes_as_input=*/false);
        ExpectReduce<T>(op, dtype, shape, axes, keepdims, /*axes_as_input=*/true);
      }
    }
  }
}

TEST(ReduceSearchReduceTest, F32) {
  ExpectAllSubsets<float>(AllReduceOps(), DType::kF32, {2, 3, 4});
  ExpectAllSubsets<float>(AllReduceOps(), DType::kF32, {3, 1, 5});
}
TEST(ReduceSearchReduceTest, F64) { ExpectAllSubsets<double>(AllReduceOps(), DType::kF64, {4, 1, 3, 2}); }
TEST(ReduceSearchReduceTest, I32) { ExpectAllSubsets<int32_t>(AllReduceOps(), DType::kI32, {2, 3, 4}); }
TEST(ReduceSearchReduceTest, I64) { ExpectAllSubsets<int64_t>(AllReduceOps(), DType::kI64, {3, 1, 5}); }
TEST(ReduceSearchReduceTest, MaxAndMinOfI8AndU8) {
  ExpectAllSubsets<int8_t>({"ReduceMax", "ReduceMin"}, DType::kI8, {2, 3, 4});
  ExpectAllSubsets<uint8_t>({"ReduceMax", "ReduceMin"}, DType::kU8, {2, 3, 4});
}

TEST(ReduceSearchReduceTest, HalfAndBFloat16) {
  const std::vector<float> x = {1.5, -2, 0.25, 3, -0.5, 2};
  Tensor h = MakeTensor<uint16_t>(DType::kF16, {2, 3}, ToHalf(x));
  Tensor b = MakeTensor<uint16_t>(DType::kBF16, {2, 3}, ToBF16(x));
  const Attrs axis1 = {{"axes", std::vector<int64_t>{1}}, {"keepdims", int64_t{0}}};
  auto max = RunOp("ReduceMax", {&h}, axis1);
  ASSERT_TRUE(max.ok()) << max.status();
  EXPECT_EQ(Values<uint16_t>((*max)[0]), ToHalf({1.5, 3}));
  auto prod = RunOp("ReduceProd", {&b}, axis1);
  ASSERT_TRUE(prod.ok()) << prod.status();
  EXPECT_EQ(Values<uint16_t>((*prod)[0]), ToBF16({-0.75, -3}));
  auto l2 = RunOp("ReduceL2", {&h}, axis1);
  ASSERT_TRUE(l2.ok()) << l2.status();
  EXPECT_EQ(Values<uint16_t>((*l2)[0]),
            ToHalf({static_cast<float>(std::sqrt(6.3125)), static_cast<float>(std::sqrt(13.25))}));
  auto lse = RunOp("ReduceLogSumExp", {&b}, axis1);
  ASSERT_TRUE(lse.ok()) << lse.status();
  EXPECT_EQ(Values<uint16_t>((*lse)[0]),
            ToBF16({static_cast<float>(std::log(std::exp(1.5) + std::exp(-2) + std::exp(0.25))),
                    static_cast<float>(std::log(std::exp(3) + std::exp(-0.5) + std::exp(2)))}));
}

TEST(ReduceSearchReduceTest, EmptyReductionsGiveTheIdentity) {
  Tensor f = MakeTensor<float>(DType::kF32, {2, 0}, {});
  const Attrs axis1 = {{"axes", std::vector<int64_t>{1}}, {"keepdims", int64_t{0}}};
  const std::vector<std::pair<std::string, float>> want = {{"ReduceMax", -INFINITY},
                                                           {"ReduceMin", INFINITY},
                                                           {"ReduceProd", 1},
                                                           {"ReduceL1", 0},
                                                           {"ReduceL2", 0},
                                                           {"ReduceLogSum", -INFINITY},
                                                           {"ReduceLogSumExp", -INFINITY},
                                                           {"ReduceSumSquare", 0}};
  for (const auto& [op, value] : want) {
    auto out = RunOp(op, {&f}, axis1);
    ASSERT_TRUE(out.ok()) << op << ": " << out.status();
    EXPECT_EQ((*out)[0].shape(), (Shape{2})) << op;
    EXPECT_EQ(Values<float>((*out)[0]), (std::vector<float>{value, value})) << op;
  }
  Tensor i = MakeTensor<int32_t>(DType::kI32, {0, 3}, {});
  auto max = RunOp("ReduceMax", {&i}, {{"axes", std::vector<int64_t>{0}}});
  ASSERT_TRUE(max.ok()) << max.status();
  EXPECT_EQ((*max)[0].shape(), (Shape{1, 3}));
  EXPECT_EQ(Values<int32_t>((*max)[0]), std::vector<int32_t>(3, std::numeric_limits<int32_t>::min()));
  auto min = RunOp("ReduceMin", {&i}, {{"axes", std::vector<int64_t>{0}}});
  ASSERT_TRUE(min.ok()) << min.status();
  EXPECT_EQ(Values<int32_t>((*min)[0]), std::vector<int32_t>(3, std::numeric_limits<int32_t>::max()));
  // Reducing the other axis of a zero-size tensor gives an empty output.
  auto kept = RunOp("ReduceMax", {&i}, {{"axes", std::vector<int64_t>{1}}});
  ASSERT_TRUE(kept.ok()) << kept.status();
  EXPECT_EQ((*kept)[0].shape(), (Shape{0, 1}));
}

TEST(ReduceSearchReduceTest, RankZeroDefaultsAndNoop) {
  Tensor s = MakeTensor<float>(DType::kF32, {}, {-3});
  for (const std::string& op : AllReduceOps()) {
    if (op == "ReduceLogSum") continue;  // log(-3)
    auto out = RunOp(op, {&s});
    ASSERT_TRUE(out.ok()) << op << ": " << out.status();
    EXPECT_TRUE((*out)[0].shape().empty()) << op;
    EXPECT_TRUE(Close(Values<float>((*out)[0])[0], ReduceRef(op, {-3}), 1e-6)) << op;
  }
  // Defaults: every axis, keepdims = 1.
  Tensor t = MakeTensor<float>(DType::kF32, {2, 3}, {1, 5, 3, 4, 2, 6});
  auto max = RunOp("ReduceMax", {&t});
  ASSERT_TRUE(max.ok()) << max.status();
  EXPECT_EQ((*max)[0].shape(), (Shape{1, 1}));
  EXPECT_EQ(Values<float>((*max)[0]), std::vector<float>{6});
  // noop_with_empty_axes with no axes reduces each element on its own:
  // ReduceSumSquare squares, as ONNX's reference does.
  auto noop = RunOp("ReduceSumSquare", {&t}, {{"noop_with_empty_axes", int64_t{1}}});
  ASSERT_TRUE(noop.ok()) << noop.status();
  EXPECT_EQ((*noop)[0].shape(), (Shape{2, 3}));
  EXPECT_EQ(Values<float>((*noop)[0]), (std::vector<float>{1, 25, 9, 16, 4, 36}));
  auto max_noop = RunOp("ReduceMax", {&t}, {{"noop_with_empty_axes", int64_t{1}}});
  ASSERT_TRUE(max_noop.ok()) << max_noop.status();
  EXPECT_EQ(Values<float>((*max_noop)[0]), (std::vector<float>{1, 5, 3, 4, 2, 6}));
}

TEST(ReduceSearchReduceTest, NaNWinsMaxAndMin) {
  Tensor t = MakeTensor<float>(DType::kF32, {2, 3}, {1, kNaNf, 3, 4, 5, 6});
  for (const char* op : {"ReduceMax", "ReduceMin"}) {
    auto out = RunOp(op, {&t}, {{"axes", std::vector<int64_t>{1}}, {"keepdims", int64_t{0}}});
    ASSERT_TRUE(out.ok()) << out.status();
    const std::vector<float> got = Values<float>((*out)[0]);
    EXPECT_TRUE(std::isnan(got[0])) << op;
    EXPECT_EQ(got[1], std::string(op) == "ReduceMax" ? 6 : 4) << op;
  }
}

TEST(ReduceSearchReduceTest, LogSumExpDoesNotOverflow) {
  Tensor t = MakeTensor<float>(DType::kF32, {2, 2}, {1000, 1000, -INFINITY, -INFINITY});
  auto out = RunOp("ReduceLogSumExp", {&t}, {{"axes", std::vector<int64_t>{1}}, {"keepdims", int64_t{0}}});
  ASSERT_TRUE(out.ok()) << out.status();
  const std::vector<float> got = Values<float>((*out)[0]);
  EXPECT_NEAR(got[0], 1000 + std::log(2.0), 1e-3);
  EXPECT_EQ(got[1], -INFINITY);
}

TEST(ReduceSearchReduceTest, IntegerProductWraps) {
  Tensor t = MakeTensor<int32_t>(DType::kI32, {3}, {65536, 65536, 3});
  auto out = RunOp("ReduceProd", {&t}, {{"keepdims", int64_t{0}}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Values<int32_t>((*out)[0]), std::vector<int32_t>{0});
}

TEST(ReduceSearchReduceTest, Errors) {
  Tensor t = MakeTensor<float>(DType::kF32, {2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor b = MakeTensor<uint8_t>(DType::kBool, {2}, {1, 0});
  Tensor i8 = MakeTensor<int8_t>(DType::kI8, {2}, {1, 0});
  Tensor axes = MakeTensor<int64_t>(DType::kI64, {1}, {0});
  EXPECT_TRUE(ErrorContains(RunOp("ReduceMax", {&t}, {{"axes", std::vector<int64_t>{2}}}).status(),
                            "axis 2 is out of range for rank 2 (expected -2..1)"));
  EXPECT_TRUE(ErrorContains(RunOp("ReduceMin", {&t}, {{"axes", std::vector<int64_t>{1, -1}}}).status(),
                            "axes name dim 1 twice"));
  EXPECT_TRUE(ErrorContains(RunOp("ReduceMax", {&b}).status(), "input 0 (data) has dtype bool"));
  EXPECT_TRUE(ErrorContains(RunOp("ReduceProd", {&i8}).status(), "input 0 (data) has dtype i8"));
  EXPECT_TRUE(ErrorContains(RunOp("ReduceL2", {&t, &axes}, {{"axes", std::vector<int64_t>{0}}}).status(), "give one"));
  EXPECT_TRUE(ErrorContains(RunOp("ReduceL1", {&t}, {{"keepdims", int64_t{2}}}).status(),
                            "attribute 'keepdims' is 2; expected 0 or 1"));
  EXPECT_TRUE(ErrorContains(RunKernelPlanned("ReduceLogSumExp", {&t}, DType::kF32, {1, 3}).status(),
                            "output 0 was allocated as f32 [1, 3] but the kernel writes f32 [1, 1]"));
}

TEST(ReduceSearchReduceTest, SymbolicShapes) {
  const ir::SymDim batch = ir::SymDim::Symbol(0), seq = ir::SymDim::Symbol(1);
  auto out = InferSymbolic("ReduceMax", {SymInput{DType::kF32, {batch, seq, 4}}},
                           {{"axes", std::vector<int64_t>{-1}}, {"keepdims", int64_t{0}}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->shape, (ir::SymShape{batch, seq}));
  // Axes as an input whose value the plan does not know: kept dims or 1,
  // decided at run time. With keepdims = 0 the rank follows from the length
  // of axes, unless that is symbolic too.
  out = InferSymbolic("ReduceL2", {SymInput{DType::kF32, {batch, 1, 4}}, SymInput{DType::kI64, {1}}});
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->shape.size(), 3u);
  EXPECT_TRUE(out->shape[0].is_unknown());
  EXPECT_EQ(out->shape[1], ir::SymDim(1));
  EXPECT_TRUE(out->shape[2].is_unknown());
  out = InferSymbolic("ReduceL2", {SymInput{DType::kF32, {batch, 4}}, SymInput{DType::kI64, {1}}},
                      {{"keepdims", int64_t{0}}});
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->shape.size(), 1u);
  EXPECT_TRUE(out->shape[0].is_unknown());
  EXPECT_TRUE(ErrorContains(InferSymbolic("ReduceL2", {SymInput{DType::kF32, {batch, 4}}, SymInput{DType::kI64, {seq}}},
                                          {{"keepdims", int64_t{0}}})
                                .status(),
                            "has a dynamic length"));
}

// --- ArgMax ArgMin --------------------------------------------------------------

template <typename T>
void ExpectArg(bool max, DType dtype, const Shape& shape, int64_t axis, bool keepdims, bool last,
               const std::vector<T>& x) {
  const std::string op = max ? "ArgMax" : "ArgMin";
  SCOPED_TRACE(absl::StrCat(op, " ", DTypeName(dtype), " [", absl::StrJoin(shape, ","), "] axis ", axis, " keepdims ",
                            keepdims, " last ", last));
  const int rank = static_cast<int>(shape.size());
  const int a = static_cast<int>(axis < 0 ? axis + rank : axis);
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < a; ++d) outer *= shape[d];
  for (int d = a + 1; d < rank; ++d) inner *= shape[d];
  const int64_t n = shape[a];
  Shape want_shape = shape;
  if (keepdims) {
    want_shape[a] = 1;
  } else {
    want_shape.erase(want_shape.begin() + a);
  }
  std::vector<int64_t> want;
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      int64_t best = 0;
      for (int64_t j = 1; j < n; ++j) {
        const double v = static_cast<double>(x[(o * n + j) * inner + i]);
        const double b = static_cast<double>(x[(o * n + best) * inner + i]);
        if (max ? (v > b || (last && v == b)) : (v < b || (last && v == b))) best = j;
      }
      want.push_back(best);
    }
  }
  Tensor t = MakeTensor<T>(dtype, shape, x);
  auto out = RunOp(op, {&t}, {{"axis", axis}, {"keepdims", int64_t{keepdims}}, {"select_last_index", int64_t{last}}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].dtype(), DType::kI64);
  EXPECT_EQ((*out)[0].shape(), want_shape);
  EXPECT_EQ(Values<int64_t>((*out)[0]), want);
}

template <typename T>
void ExpectArgAll(DType dtype) {
  for (const Shape& shape : {Shape{2, 3, 4}, Shape{5}, Shape{3, 1, 2}}) {
    // Few distinct values, so every slice has ties.
    std::vector<T> x(static_cast<size_t>(Count(shape)));
    for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<T>((i * 7 + 3) % 4);
    const int rank = static_cast<int>(shape.size());
    for (int64_t axis = -rank; axis < rank; ++axis) {
      for (bool max : {true, false}) {
        for (bool keepdims : {false, true}) {
          for (bool last : {false, true}) ExpectArg<T>(max, dtype, shape, axis, keepdims, last, x);
        }
      }
    }
  }
}

TEST(ArgReduceTest, F32) { ExpectArgAll<float>(DType::kF32); }
TEST(ArgReduceTest, F64) { ExpectArgAll<double>(DType::kF64); }
TEST(ArgReduceTest, I32) { ExpectArgAll<int32_t>(DType::kI32); }
TEST(ArgReduceTest, I64) { ExpectArgAll<int64_t>(DType::kI64); }
TEST(ArgReduceTest, I8) { ExpectArgAll<int8_t>(DType::kI8); }
TEST(ArgReduceTest, U8) { ExpectArgAll<uint8_t>(DType::kU8); }

TEST(ArgReduceTest, DefaultsHalfAndNaN) {
  // As ONNX's test_argmax_default_axis_example: axis 0, keepdims 1.
  Tensor t = MakeTensor<float>(DType::kF32, {2, 2}, {2, 1, 3, 10});
  auto out = RunOp("ArgMax", {&t});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].shape(), (Shape{1, 2}));
  EXPECT_EQ(Values<int64_t>((*out)[0]), (std::vector<int64_t>{1, 1}));
  Tensor h = MakeTensor<uint16_t>(DType::kF16, {4}, ToHalf({1, -3, 7, -3}));
  auto amin = RunOp("ArgMin", {&h}, {{"select_last_index", int64_t{1}}});
  ASSERT_TRUE(amin.ok()) << amin.status();
  EXPECT_EQ(Values<int64_t>((*amin)[0]), std::vector<int64_t>{3});
  // NaN wins both, the first one unless select_last_index.
  Tensor n = MakeTensor<float>(DType::kF32, {4}, {1, kNaNf, 3, kNaNf});
  for (const char* op : {"ArgMax", "ArgMin"}) {
    auto first = RunOp(op, {&n}, {{"keepdims", int64_t{0}}});
    ASSERT_TRUE(first.ok()) << first.status();
    EXPECT_TRUE((*first)[0].shape().empty());
    EXPECT_EQ(Values<int64_t>((*first)[0]), std::vector<int64_t>{1}) << op;
    auto last = RunOp(op, {&n}, {{"select_last_index", int64_t{1}}});
    ASSERT_TRUE(last.ok()) << last.status();
    EXPECT_EQ(Values<int64_t>((*last)[0]), std::vector<int64_t>{3}) << op;
  }
  // Zero-size dims other than the axis give an empty output.
  Tensor e = MakeTensor<float>(DType::kF32, {0, 3}, {});
  auto empty = RunOp("ArgMax", {&e}, {{"axis", int64_t{1}}});
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_EQ((*empty)[0].shape(), (Shape{0, 1}));
}

TEST(ArgReduceTest, Errors) {
  Tensor s = MakeTensor<float>(DType::kF32, {}, {1});
  Tensor t = MakeTensor<float>(DType::kF32, {2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor e = MakeTensor<float>(DType::kF32, {2, 0}, {});
  Tensor b = MakeTensor<uint8_t>(DType::kBool, {2}, {1, 0});
  EXPECT_TRUE(ErrorContains(RunOp("ArgMax", {&s}).status(), "input 0 (data) is a scalar; ArgMax needs rank >= 1"));
  EXPECT_TRUE(ErrorContains(RunOp("ArgMin", {&t}, {{"axis", int64_t{2}}}).status(), "attribute 'axis'"));
  EXPECT_TRUE(ErrorContains(RunOp("ArgMax", {&e}, {{"axis", int64_t{1}}}).status(),
                            "input 0 (data) has no elements along axis 1"));
  EXPECT_TRUE(ErrorContains(RunOp("ArgMax", {&b}).status(), "input 0 (data) has dtype bool"));
  EXPECT_TRUE(ErrorContains(RunOp("ArgMax", {&t}, {{"select_last_index", int64_t{5}}}).status(),
                            "attribute 'select_last_index' is 5"));
  EXPECT_TRUE(ErrorContains(RunKernelPlanned("ArgMax", {&e}, DType::kI64, {2, 1}, {{"axis", int64_t{1}}}).status(),
                            "input 0 (data) has no elements along axis 1"));
  EXPECT_TRUE(ErrorContains(RunKernelPlanned("ArgMin", {&t}, DType::kI64, {2, 3}).status(),
                            "output 0 was allocated with shape [2, 3] but the kernel writes [1, 3]"));
}

// --- TopK ---------------------------------------------------------------------

template <typename T>
void ExpectTopK(DType dtype, const Shape& shape, int64_t axis, int64_t k, bool largest, bool sorted,
                const std::vector<T>& x) {
  SCOPED_TRACE(absl::StrCat("TopK ", DTypeName(dtype), " [", absl::StrJoin(shape, ","), "] axis ", axis, " k ", k,
                            " largest ", largest, " sorted ", sorted));
  const int rank = static_cast<int>(shape.size());
  const int a = static_cast<int>(axis < 0 ? axis + rank : axis);
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < a; ++d) outer *= shape[d];
  for (int d = a + 1; d < rank; ++d) inner *= shape[d];
  const int64_t n = shape[a];
  Shape want_shape = shape;
  want_shape[a] = k;
  std::vector<T> want_values(static_cast<size_t>(outer * k * inner));
  std::vector<int64_t> want_indices(want_values.size());
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      std::vector<int64_t> idx(static_cast<size_t>(n));
      std::iota(idx.begin(), idx.end(), 0);
      auto at = [&](int64_t j) { return static_cast<double>(x[(o * n + j) * inner + i]); };
      std::stable_sort(idx.begin(), idx.end(),
                       [&](int64_t p, int64_t q) { return largest ? at(p) > at(q) : at(p) < at(q); });
      for (int64_t j = 0; j < k; ++j) {
        want_values[(o * k + j) * inner + i] = x[(o * n + idx[j]) * inner + i];
        want_indices[(o * k + j) * inner + i] = idx[j];
      }
    }
  }
  Tensor t = MakeTensor<T>(dtype, shape, x);
  Tensor kt = MakeTensor<int64_t>(DType::kI64, {1}, {k});
  auto out = RunOp("TopK", {&t, &kt}, {{"axis", axis}, {"largest", int64_t{largest}}, {"sorted", int64_t{sorted}}}, 2);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].dtype(), dtype);
  EXPECT_EQ((*out)[0].shape(), want_shape);
  EXPECT_EQ((*out)[1].dtype(), DType::kI64);
  EXPECT_EQ((*out)[1].shape(), want_shape);
  EXPECT_EQ(Values<T>((*out)[0]), want_values);
  EXPECT_EQ(Values<int64_t>((*out)[1]), want_indices);
}

template <typename T>
void ExpectTopKAll(DType dtype) {
  for (const Shape& shape : {Shape{3, 5}, Shape{2, 4, 3}, Shape{7}}) {
    std::vector<T> x(static_cast<size_t>(Count(shape)));
    for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<T>((i * 11 + 5) % 6);  // ties
    const int rank = static_cast<int>(shape.size());
    for (int64_t axis = -rank; axis < rank; ++axis) {
      const int64_t n = shape[axis < 0 ? axis + rank : axis];
      for (int64_t k : {int64_t{0}, int64_t{1}, n / 2, n}) {
        for (bool largest : {true, false}) ExpectTopK<T>(dtype, shape, axis, k, largest, true, x);
      }
    }
  }
}

TEST(TopKTest, F32) { ExpectTopKAll<float>(DType::kF32); }
TEST(TopKTest, F64) { ExpectTopKAll<double>(DType::kF64); }
TEST(TopKTest, I64) { ExpectTopKAll<int64_t>(DType::kI64); }
TEST(TopKTest, I32) { ExpectTopKAll<int32_t>(DType::kI32); }
TEST(TopKTest, U8) { ExpectTopKAll<uint8_t>(DType::kU8); }

TEST(TopKTest, OnnxExamplesUnsortedHalfAndNaN) {
  // test_top_k: axis 1, k 3.
  const std::vector<float> x = {0, 1, 2, 3, 4, 5, 6, 7, 11, 10, 9, 8};
  ExpectTopK<float>(DType::kF32, {3, 4}, 1, 3, true, true, x);
  ExpectTopK<float>(DType::kF32, {3, 4}, -1, 3, false, true, x);  // test_top_k_smallest
  ExpectTopK<float>(DType::kF32, {3, 4}, 1, 2, true, false, x);   // unsorted gives the sorted answer
  Tensor h = MakeTensor<uint16_t>(DType::kF16, {4}, ToHalf({0.5, -1, 2, 0.5}));
  Tensor k2 = MakeTensor<int64_t>(DType::kI64, {1}, {2});
  auto out = RunOp("TopK", {&h, &k2}, {}, 2);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Values<uint16_t>((*out)[0]), ToHalf({2, 0.5}));
  EXPECT_EQ(Values<int64_t>((*out)[1]), (std::vector<int64_t>{2, 0}));
  // NaN sorts as the greatest value.
  Tensor n = MakeTensor<float>(DType::kF32, {3}, {1, kNaNf, 3});
  auto big = RunOp("TopK", {&n, &k2}, {}, 2);
  ASSERT_TRUE(big.ok()) << big.status();
  EXPECT_TRUE(std::isnan(Values<float>((*big)[0])[0]));
  EXPECT_EQ(Values<int64_t>((*big)[1]), (std::vector<int64_t>{1, 2}));
  auto small = RunOp("TopK", {&n, &k2}, {{"largest", int64_t{0}}}, 2);
  ASSERT_TRUE(small.ok()) << small.status();
  EXPECT_EQ(Values<float>((*small)[0]), (std::vector<float>{1, 3}));
  EXPECT_EQ(Values<int64_t>((*small)[1]), (std::vector<int64_t>{0, 2}));
}

TEST(TopKTest, IndicesOutputMayBeOmittedAndDimsMayBeEmpty) {
  Tensor t = MakeTensor<float>(DType::kF32, {2, 3}, {3, 1, 2, 6, 5, 4});
  Tensor k1 = MakeTensor<int64_t>(DType::kI64, {1}, {1});
  auto values = RunOp("TopK", {&t, &k1}, {}, 1);
  ASSERT_TRUE(values.ok()) << values.status();
  EXPECT_EQ(Values<float>((*values)[0]), (std::vector<float>{3, 6}));
  Tensor e = MakeTensor<float>(DType::kF32, {0, 3}, {});
  auto empty = RunOp("TopK", {&e, &k1}, {}, 2);
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_EQ((*empty)[0].shape(), (Shape{0, 1}));
  Tensor k0 = MakeTensor<int64_t>(DType::kI64, {1}, {0});
  Tensor z = MakeTensor<float>(DType::kF32, {2, 0}, {});
  auto none = RunOp("TopK", {&z, &k0}, {}, 2);
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_EQ((*none)[1].shape(), (Shape{2, 0}));
}

TEST(TopKTest, UnknownKGivesAnUnknownDim) {
  const ir::SymDim batch = ir::SymDim::Symbol(0);
  auto out = InferSymbolic("TopK", {SymInput{DType::kF32, {batch, 8}}, SymInput{DType::kI64, {1}}});
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->shape.size(), 2u);
  EXPECT_EQ(out->shape[0], batch);
  EXPECT_TRUE(out->shape[1].is_unknown());
  Tensor k = MakeTensor<int64_t>(DType::kI64, {1}, {3});
  out = InferSymbolic("TopK", {SymInput{DType::kF32, {4, batch}}, SymInput{DType::kI64, {1}, &k}},
                      {{"axis", int64_t{0}}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->shape, (ir::SymShape{3, batch}));
}

TEST(TopKTest, Errors) {
  Tensor t = MakeTensor<float>(DType::kF32, {2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor s = MakeTensor<float>(DType::kF32, {}, {1});
  Tensor b = MakeTensor<uint8_t>(DType::kBool, {3}, {1, 0, 1});
  Tensor k4 = MakeTensor<int64_t>(DType::kI64, {1}, {4});
  Tensor kneg = MakeTensor<int64_t>(DType::kI64, {1}, {-1});
  Tensor k32 = MakeTensor<int32_t>(DType::kI32, {1}, {1});
  Tensor k2 = MakeTensor<int64_t>(DType::kI64, {2}, {1, 1});
  Tensor k1 = MakeTensor<int64_t>(DType::kI64, {1}, {1});
  EXPECT_TRUE(ErrorContains(RunOp("TopK", {&t, &k4}, {}, 2).status(),
                            "input 1 (K) is 4; expected 0..3 (the size of axis 1 of input 0 (X), [2, 3])"));
  EXPECT_TRUE(ErrorContains(RunOp("TopK", {&t, &kneg}, {}, 2).status(), "input 1 (K) is -1"));
  EXPECT_TRUE(ErrorContains(RunOp("TopK", {&t, &k32}, {}, 2).status(), "input 1 (K) has dtype i32; expected i64"));
  EXPECT_TRUE(ErrorContains(RunOp("TopK", {&t, &k2}, {}, 2).status(),
                            "input 1 (K) must be a 1-D tensor of one element; got shape [2]"));
  EXPECT_TRUE(ErrorContains(RunOp("TopK", {&s, &k1}, {}, 2).status(), "input 0 (X) is a scalar"));
  EXPECT_TRUE(ErrorContains(RunOp("TopK", {&t, &k1}, {{"axis", int64_t{-3}}}, 2).status(), "attribute 'axis'"));
  EXPECT_TRUE(ErrorContains(RunOp("TopK", {&b, &k1}, {}, 2).status(), "input 0 (X) has dtype bool"));
  EXPECT_TRUE(
      ErrorContains(RunOp("TopK", {&t, &k1}, {{"largest", int64_t{-1}}}, 2).status(), "attribute 'largest' is -1"));
  // What only the run can know.
  EXPECT_TRUE(ErrorContains(RunKernelPlanned("TopK", {&t, &k4}, DType::kF32, {2, 4}).status(),
                            "input 1 (K) is 4; expected 0..3"));
  EXPECT_TRUE(ErrorContains(RunKernelPlanned("TopK", {&t, &k1}, DType::kF32, {2, 2}).status(),
                            "output 0 was allocated with shape [2, 2] but the kernel writes [2, 1]"));
}

// --- CumSum -------------------------------------------------------------------

template <typename T>
void ExpectCumSum(DType dtype, const Shape& shape, int64_t axis, bool exclusive, bool reverse) {
  SCOPED_TRACE(absl::StrCat("CumSum ", DTypeName(dtype), " [", absl::StrJoin(shape, ","), "] axis ", axis,
                            " exclusive ", exclusive, " reverse ", reverse));
  std::vector<T> x(static_cast<size_t>(Count(shape)));
  for (size_t i = 0; i < x.size(); ++i) {
    x[i] = static_cast<T>((static_cast<int64_t>(i) * 13 + 5) % 11 - 5) /
           static_cast<T>(std::is_floating_point_v<T> ? 2 : 1);
  }
  const int rank = static_cast<int>(shape.size());
  const int a = static_cast<int>(axis < 0 ? axis + rank : axis);
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < a; ++d) outer *= shape[d];
  for (int d = a + 1; d < rank; ++d) inner *= shape[d];
  const int64_t n = shape[a];
  std::vector<T> want(x.size());
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        double sum = 0;
        for (int64_t m = 0; m < n; ++m) {
          const bool take = reverse ? (exclusive ? m > j : m >= j) : (exclusive ? m < j : m <= j);
          if (take) sum += static_cast<double>(x[(o * n + m) * inner + i]);
        }
        want[(o * n + j) * inner + i] = static_cast<T>(sum);
      }
    }
  }
  Tensor t = MakeTensor<T>(dtype, shape, x);
  // The axis as an i32 scalar and as an i64 [1], in turn.
  Tensor a32 = MakeTensor<int32_t>(DType::kI32, {}, {static_cast<int32_t>(axis)});
  Tensor a64 = MakeTensor<int64_t>(DType::kI64, {1}, {axis});
  for (const Tensor* at : {&a32, &a64}) {
    auto out = RunOp("CumSum", {&t, at}, {{"exclusive", int64_t{exclusive}}, {"reverse", int64_t{reverse}}});
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ((*out)[0].shape(), shape);
    EXPECT_EQ((*out)[0].dtype(), dtype);
    EXPECT_EQ(Values<T>((*out)[0]), want);
  }
}

template <typename T>
void ExpectCumSumAll(DType dtype) {
  for (const Shape& shape : {Shape{5}, Shape{2, 3, 4}, Shape{3, 0}}) {
    const int rank = static_cast<int>(shape.size());
    for (int64_t axis = -rank; axis < rank; ++axis) {
      for (bool exclusive : {false, true}) {
        for (bool reverse : {false, true}) ExpectCumSum<T>(dtype, shape, axis, exclusive, reverse);
      }
    }
  }
}

TEST(CumSumTest, F32) { ExpectCumSumAll<float>(DType::kF32); }
TEST(CumSumTest, F64) { ExpectCumSumAll<double>(DType::kF64); }
TEST(CumSumTest, I32) { ExpectCumSumAll<int32_t>(DType::kI32); }
TEST(CumSumTest, I64) { ExpectCumSumAll<int64_t>(DType::kI64); }

TEST(CumSumTest, OnnxExamplesAndHalf) {
  Tensor x = MakeTensor<double>(DType::kF64, {5}, {1, 2, 3, 4, 5});
  Tensor axis = MakeTensor<int32_t>(DType::kI32, {}, {0});
  const std::vector<std::pair<Attrs, std::vector<double>>> cases = {
      {{}, {1, 3, 6, 10, 15}},
      {{{"exclusive", int64_t{1}}}, {0, 1, 3, 6, 10}},
      {{{"reverse", int64_t{1}}}, {15, 14, 12, 9, 5}},
      {{{"exclusive", int64_t{1}}, {"reverse", int64_t{1}}}, {14, 12, 9, 5, 0}},
  };
  for (const auto& [attrs, want] : cases) {
    auto out = RunOp("CumSum", {&x, &axis}, attrs);
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ(Values<double>((*out)[0]), want);
  }
  Tensor h = MakeTensor<uint16_t>(DType::kF16, {3}, ToHalf({2048, 1, 1}));
  auto out = RunOp("CumSum", {&h, &axis});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Values<uint16_t>((*out)[0]), ToHalf({2048, 2048, 2050}));  // running sum kept wider than f16
}

TEST(CumSumTest, Errors) {
  Tensor t = MakeTensor<float>(DType::kF32, {2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor s = MakeTensor<float>(DType::kF32, {}, {1});
  Tensor u8 = MakeTensor<uint8_t>(DType::kU8, {2}, {1, 2});
  Tensor a0 = MakeTensor<int64_t>(DType::kI64, {}, {0});
  Tensor a2 = MakeTensor<int64_t>(DType::kI64, {1}, {2});
  Tensor aa = MakeTensor<int64_t>(DType::kI64, {2}, {0, 1});
  Tensor af = MakeTensor<float>(DType::kF32, {}, {0});
  EXPECT_TRUE(ErrorContains(RunOp("CumSum", {&t, &a2}).status(), "input 1 (axis): axis 2"));
  EXPECT_TRUE(ErrorContains(RunOp("CumSum", {&t, &aa}).status(),
                            "input 1 (axis) must be a scalar or a 1-D tensor of one element; got shape [2]"));
  EXPECT_TRUE(ErrorContains(RunOp("CumSum", {&t, &af}).status(), "input 1 (axis) has dtype f32"));
  EXPECT_TRUE(ErrorContains(RunOp("CumSum", {&s, &a0}).status(), "input 0 (x) is a scalar"));
  EXPECT_TRUE(ErrorContains(RunOp("CumSum", {&u8, &a0}).status(), "input 0 (x) has dtype u8"));
  EXPECT_TRUE(
      ErrorContains(RunOp("CumSum", {&t, &a0}, {{"reverse", int64_t{3}}}).status(), "attribute 'reverse' is 3"));
  // The axis value is read again when the op runs.
  EXPECT_TRUE(
      ErrorContains(RunKernelPlanned("CumSum", {&t, &a2}, DType::kF32, {2, 3}).status(), "input 1 (axis): axis 2"));
  EXPECT_TRUE(ErrorContains(RunKernelPlanned("CumSum", {&t, &aa}, DType::kF32, {2, 3}).status(),
                            "input 1 (axis) must be one i32 or i64; got i64 [2]"));
}

// --- NonZero ------------------------------------------------------------------

TEST(NonZeroTest, OnnxExampleAndRank3) {
  Tensor t = MakeTensor<uint8_t>(DType::kBool, {2, 2}, {1, 0, 1, 1});
  auto out = RunOp("NonZero", {&t});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].dtype(), DType::kI64);
  EXPECT_EQ((*out)[0].shape(), (Shape{2, 3}));
  EXPECT_EQ(Values<int64_t>((*out)[0]), (std::vector<int64_t>{0, 1, 1, 0, 0, 1}));

  Shape shape = {2, 3, 4};
  std::vector<int32_t> x(24);
  for (size_t i = 0; i < x.size(); ++i) x[i] = (i * 5) % 3 == 0 ? 0 : static_cast<int32_t>(i);
  std::vector<int64_t> want[3];
  for (int64_t i = 0; i < 24; ++i) {
    if (x[i] == 0) continue;
    want[0].push_back(i / 12);
    want[1].push_back(i / 4 % 3);
    want[2].push_back(i % 4);
  }
  Tensor r3 = MakeTensor<int32_t>(DType::kI32, shape, x);
  auto out3 = RunOp("NonZero", {&r3});
  ASSERT_TRUE(out3.ok()) << out3.status();
  const int64_t count = static_cast<int64_t>(want[0].size());
  EXPECT_EQ((*out3)[0].shape(), (Shape{3, count}));
  std::vector<int64_t> flat;
  for (const auto& row : want) flat.insert(flat.end(), row.begin(), row.end());
  EXPECT_EQ(Values<int64_t>((*out3)[0]), flat);
}

TEST(NonZeroTest, WhatCountsAsZero) {
  // -0.0 is zero, NaN is not; bool bytes other than 1 are true.
  Tensor f = MakeTensor<float>(DType::kF32, {4}, {-0.0f, kNaNf, 0.0f, 1e-45f});
  auto out = RunOp("NonZero", {&f});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Values<int64_t>((*out)[0]), (std::vector<int64_t>{1, 3}));
  Tensor h = MakeTensor<uint16_t>(DType::kF16, {3}, {0x8000, 0x0001, 0x0000});
  auto outh = RunOp("NonZero", {&h});
  ASSERT_TRUE(outh.ok()) << outh.status();
  EXPECT_EQ(Values<int64_t>((*outh)[0]), std::vector<int64_t>{1});
  Tensor b = MakeTensor<uint8_t>(DType::kBool, {3}, {7, 0, 1});
  auto outb = RunOp("NonZero", {&b});
  ASSERT_TRUE(outb.ok()) << outb.status();
  EXPECT_EQ(Values<int64_t>((*outb)[0]), (std::vector<int64_t>{0, 2}));
  Tensor i64 = MakeTensor<int64_t>(DType::kI64, {2}, {int64_t{1} << 40, 0});
  auto outi = RunOp("NonZero", {&i64});
  ASSERT_TRUE(outi.ok()) << outi.status();
  EXPECT_EQ(Values<int64_t>((*outi)[0]), std::vector<int64_t>{0});
}

TEST(NonZeroTest, RankZeroAndEmpty) {
  // A scalar is read as one element of a 1-D tensor (numpy).
  Tensor five = MakeTensor<float>(DType::kF32, {}, {5});
  auto one = RunOp("NonZero", {&five});
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_EQ((*one)[0].shape(), (Shape{1, 1}));
  EXPECT_EQ(Values<int64_t>((*one)[0]), std::vector<int64_t>{0});
  Tensor zero = MakeTensor<float>(DType::kF32, {}, {0});
  auto none = RunOp("NonZero", {&zero});
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_EQ((*none)[0].shape(), (Shape{1, 0}));
  Tensor e = MakeTensor<float>(DType::kF32, {2, 0}, {});
  auto empty = RunOp("NonZero", {&e});
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_EQ((*empty)[0].shape(), (Shape{2, 0}));
}

TEST(NonZeroTest, ShapeFunctionNeedsTheValueForTheCount) {
  const ir::SymDim batch = ir::SymDim::Symbol(0);
  auto out = InferSymbolic("NonZero", {SymInput{DType::kF32, {batch, 3}}});
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->shape.size(), 2u);
  EXPECT_EQ(out->shape[0], ir::SymDim(2));
  EXPECT_TRUE(out->shape[1].is_unknown());
  out = InferSymbolic("NonZero", {SymInput{DType::kF32, {batch, 0}}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->shape, (ir::SymShape{2, 0}));
  Tensor v = MakeTensor<int64_t>(DType::kI64, {3}, {0, 4, 9});
  out = InferSymbolic("NonZero", {SymInput{DType::kI64, {3}, &v}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->shape, (ir::SymShape{1, 2}));
  EXPECT_EQ(out->dtype, DType::kI64);
  EXPECT_TRUE(ErrorContains(RunKernelPlanned("NonZero", {&v}, DType::kI64, {1, 3}).status(),
                            "output 0 was allocated with shape [1, 3] but the kernel writes [1, 2]"));
}

// --- through a session: shapes known only when the op runs -------------------

std::unique_ptr<Session> NewSession(std::shared_ptr<const Model> model) {
  auto session = Session::Create(std::move(model), SessionOptions{});
  EXPECT_TRUE(session.ok()) << session.status();
  return session.ok() ? *std::move(session) : nullptr;
}

TEST(DataDependentShapeTest, NonZeroThenTopKWithARunTimeK) {
  ModelBuilder b;
  b.AddSymbol("n", 0, 16);
  b.AddInput("x", DType::kF32, {"n"});
  b.AddInput("k", DType::kI64, {1});
  b.AddOp("NonZero", {"x"}, {"nz"});
  b.AddOp("TopK", {"x", "k"}, {"values", "indices"});
  b.AddOp("ReduceMax", {"values"}, {"top"}, {{"keepdims", int64_t{0}}});
  b.AddOutput("nz");
  b.AddOutput("values");
  b.AddOutput("indices");
  b.AddOutput("top");
  auto session = NewSession(testing::LoadOrDie(b.Finish()));
  ASSERT_NE(session, nullptr);
  for (const auto& [x, k] : std::vector<std::pair<std::vector<float>, int64_t>>{
           {{0, 3, 0, 5, 1}, 2}, {{4, 0, 0, 0, 2, 2, 9}, 3}, {{1}, 1}}) {
    std::vector<float> xs = x;
    int64_t kv = k;
    auto out = session->Run(
        {TensorView(DType::kF32, {static_cast<int64_t>(xs.size())}, xs.data()), TensorView(DType::kI64, {1}, &kv)});
    ASSERT_TRUE(out.ok()) << out.status();
    std::vector<int64_t> want_nz;
    for (size_t i = 0; i < xs.size(); ++i) {
      if (xs[i] != 0) want_nz.push_back(static_cast<int64_t>(i));
    }
    const TensorView& nz = (*out)[0];
    ASSERT_EQ(nz.shape, (Shape{1, static_cast<int64_t>(want_nz.size())}));
    EXPECT_EQ(std::vector<int64_t>(nz.as<const int64_t>(), nz.as<const int64_t>() + want_nz.size()), want_nz);
    std::vector<float> sorted = xs;
    std::sort(sorted.begin(), sorted.end(), std::greater<float>());
    const TensorView& values = (*out)[1];
    ASSERT_EQ(values.shape, (Shape{k}));
    EXPECT_EQ(std::vector<float>(values.as<const float>(), values.as<const float>() + k),
              std::vector<float>(sorted.begin(), sorted.begin() + k));
    EXPECT_EQ((*out)[2].shape, (Shape{k}));
    EXPECT_EQ(*(*out)[3].as<const float>(), sorted[0]);
  }
}

// Axes as a graph input with keepdims=0: the output rank follows from the
// length of axes; which dims go, only the run knows.
TEST(DataDependentShapeTest, ReduceWithRunTimeAxesAndNoKeepDims) {
  for (const char* op : {"ReduceSum", "ReduceMax", "ReduceProd"}) {
    SCOPED_TRACE(op);
    ModelBuilder b;
    b.AddInput("x", DType::kF32, {2, 3, 4});
    b.AddInput("axes", DType::kI64, {2});
    b.AddOp(op, {"x", "axes"}, {"y"}, {{"keepdims", int64_t{0}}});
    b.AddOutput("y");
    auto session = NewSession(testing::LoadOrDie(b.Finish()));
    ASSERT_NE(session, nullptr);
    std::vector<float> x(24);
    for (int i = 0; i < 24; ++i) x[i] = static_cast<float>(i % 5) + 1.0f;
    for (const auto& [axes, kept] : std::vector<std::pair<std::vector<int64_t>, int>>{{{0, 2}, 1}, {{-1, 1}, 0}, {{1, 0}, 2}}) {
      std::vector<int64_t> a = axes;
      auto out = session->Run({TensorView(DType::kF32, {2, 3, 4}, x.data()), TensorView(DType::kI64, {2}, a.data())});
      ASSERT_TRUE(out.ok()) << out.status();
      const int64_t dims[] = {2, 3, 4};
      ASSERT_EQ((*out)[0].shape, (Shape{dims[kept]}));
      for (int64_t k = 0; k < dims[kept]; ++k) {
        double want = std::string(op) == "ReduceSum" ? 0 : std::string(op) == "ReduceProd" ? 1 : -1e30;
        for (int i = 0; i < 24; ++i) {
          const int64_t idx[] = {i / 12, (i / 4) % 3, i % 4};
          if (idx[kept] != k) continue;
          if (std::string(op) == "ReduceSum") want += x[i];
          else if (std::string(op) == "ReduceProd") want *= x[i];
          else want = std::max<double>(want, x[i]);
        }
        EXPECT_NEAR((*out)[0].as<const float>()[k], want, 1e-3 * std::abs(want)) << k;
      }
    }
    std::vector<int64_t> twice = {1, -2};
    EXPECT_FALSE(session->Run({TensorView(DType::kF32, {2, 3, 4}, x.data()), TensorView(DType::kI64, {2}, twice.data())}).ok());
  }
}

TEST(DataDependentShapeTest, ReduceWithMoreRunTimeAxesThanDimsIsAnError) {
  ModelBuilder b;
  b.AddInput("x", DType::kF32, {2, 3});
  b.AddInput("axes", DType::kI64, {3});
  b.AddOp("ReduceSum", {"x", "axes"}, {"y"}, {{"keepdims", int64_t{0}}});
  b.AddOutput("y");
  auto bytes = b.Finish();
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  auto model = Model::LoadFromBuffer(*bytes);
  ASSERT_FALSE(model.ok());
  EXPECT_THAT(std::string(model.status().message()), ::testing::HasSubstr("names 3 axes"));
}

// --- registry -----------------------------------------------------------------

TEST(ReduceSearchRegistryTest, EveryOpHasAShapeFunctionAndACpuKernel) {
  const ir::OpRegistry& registry = runtime::GlobalOpRegistry();
  for (const char* op : {"ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2", "ReduceLogSum",
                         "ReduceLogSumExp", "ReduceSumSquare", "ArgMax", "ArgMin", "TopK", "CumSum", "NonZero"}) {
    ASSERT_NE(registry.Find(op), nullptr) << op;
    EXPECT_NE(registry.Find(op)->infer, nullptr) << op;
    EXPECT_TRUE(registry.Supports(op, ir::Backend::kCpu)) << op;
  }
  EXPECT_EQ(registry.Find("TopK")->max_outputs, 2);
  EXPECT_NE(registry.Find("ArgMax")->FindAttr("select_last_index"), nullptr);
  EXPECT_NE(registry.Find("ReduceMax")->FindAttr("noop_with_empty_axes"), nullptr);
  EXPECT_EQ(registry.Find("ReduceProd")->max_inputs, 2);
}

}  // namespace
}  // namespace grove
