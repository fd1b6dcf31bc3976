// String tensors through every op whose ONNX type constraints allow them,
// each against a naive reference written here (index arithmetic on plain
// std::string vectors), with non-ASCII and empty strings among the values;
// the ops that compare (Equal, Unique, NonZero) compare bytes, not the
// references; and the ops that must not take strings refuse them with an
// error naming the op and the dtype, never reading a reference as a number.
#include <algorithm>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lib/ir/op_registry.h"
#include "lib/runtime/registry.h"
#include "test/op_test_util.h"

namespace grove::testing {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;
using Shape = std::vector<int64_t>;
using Ints = std::vector<int64_t>;
using Strs = std::vector<std::string>;

// Distinct values: ASCII, accented Latin, CJK, an emoji (4-byte UTF-8), the
// empty string, and one with an embedded NUL (strings are not NUL-terminated).
const Strs& Words() {
  static const Strs* words =
      new Strs{"alpha", "", "héllo", "日本語", "🙂", "naïve", "z", std::string("a\0b", 3), "Ω", "beta", "", "ß"};
  return *words;
}

// The first Count(shape) words, cycling.
Tensor Text(const Shape& shape, int offset = 0) {
  Strs v;
  for (int64_t i = 0; i < Count(shape); ++i) v.push_back(Words()[(i + offset) % Words().size()]);
  return MakeStrings(shape, v);
}

Tensor I64(const Shape& shape, const Ints& v) { return MakeTensor<int64_t>(DType::kI64, shape, v); }
Tensor I64(const Ints& v) { return I64({static_cast<int64_t>(v.size())}, v); }
Tensor Bools(const Shape& shape, const std::vector<uint8_t>& v) { return MakeTensor<uint8_t>(DType::kBool, shape, v); }

// Runs `op`; expects success and returns its `outputs` outputs.
std::vector<Tensor> Ok(const std::string& op, std::vector<const Tensor*> in,
                        std::vector<std::pair<std::string, AttrValue>> attrs = {}, int outputs = 1) {
  absl::StatusOr<std::vector<Tensor>> out = RunOp(op, std::move(in), std::move(attrs), outputs);
  EXPECT_TRUE(out.ok()) << op << ": " << out.status();
  if (!out.ok()) return std::vector<Tensor>(outputs);
  return *std::move(out);
}

// Expects a string output of `shape` holding `values`.
void ExpectStrings(const Tensor& t, const Shape& shape, const Strs& values) {
  ASSERT_EQ(t.dtype(), DType::kString);
  EXPECT_EQ(t.shape(), shape);
  EXPECT_EQ(Strings(t), values);
}

// Row-major element i of a tensor of `shape` as coordinates.
Ints Coords(int64_t i, const Shape& shape) {
  Ints c(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    c[d] = i % shape[d];
    i /= shape[d];
  }
  return c;
}
int64_t Flat(const Ints& c, const Shape& shape) {
  int64_t i = 0;
  for (size_t d = 0; d < shape.size(); ++d) i = i * shape[d] + c[d];
  return i;
}

// out[i] = in[map(coords of i in out_shape)], the naive reference of every
// data-movement op below.
template <typename Map>
Strs Reference(const Strs& in, const Shape& in_shape, const Shape& out_shape, Map map) {
  Strs out;
  for (int64_t i = 0; i < Count(out_shape); ++i) out.push_back(in[Flat(map(Coords(i, out_shape)), in_shape)]);
  return out;
}

// ---------------------------------------------------------------------------
// Ops that keep the elements in order.
// ---------------------------------------------------------------------------

TEST(StringOpsTest, IdentityReshapeFlattenSqueezeUnsqueezeKeepTheElements) {
  const Tensor x = Text({2, 1, 3});
  const Strs v = Strings(x);
  ExpectStrings(Ok("Identity", {&x})[0], {2, 1, 3}, v);
  const Tensor shape = I64({3, -1});
  ExpectStrings(Ok("Reshape", {&x, &shape})[0], {3, 2}, v);
  ExpectStrings(Ok("Flatten", {&x}, {{"axis", int64_t{2}}})[0], {2, 3}, v);
  const Tensor axes1 = I64({1});
  ExpectStrings(Ok("Squeeze", {&x, &axes1})[0], {2, 3}, v);
  const Tensor axes0 = I64({0, 4});
  ExpectStrings(Ok("Unsqueeze", {&x, &axes0})[0], {1, 2, 1, 3, 1}, v);
}

TEST(StringOpsTest, ShapeAndSizeOfStrings) {
  const Tensor x = Text({2, 5});
  std::vector<Tensor> shape = Ok("Shape", {&x});
  ASSERT_EQ(shape[0].dtype(), DType::kI64);
  EXPECT_THAT(Values<int64_t>(shape[0]), ElementsAre(2, 5));
  std::vector<Tensor> size = Ok("Size", {&x});
  ASSERT_EQ(size[0].dtype(), DType::kI64);
  EXPECT_EQ(Values<int64_t>(size[0]), Ints{10});
}

// ---------------------------------------------------------------------------
// Ops that move elements.
// ---------------------------------------------------------------------------

TEST(StringOpsTest, TransposeMatchesReference) {
  const Shape in_shape = {2, 3, 4};
  const Tensor x = Text(in_shape);
  const Ints perm = {2, 0, 1};
  const Shape out_shape = {4, 2, 3};
  const Strs want = Reference(Strings(x), in_shape, out_shape, [&](const Ints& c) {
    Ints src(3);
    for (int d = 0; d < 3; ++d) src[perm[d]] = c[d];
    return src;
  });
  ExpectStrings(Ok("Transpose", {&x}, {{"perm", perm}})[0], out_shape, want);
}

TEST(StringOpsTest, ConcatAlongEachAxis) {
  const Tensor a = Text({2, 1}), b = Text({2, 2}, 5);
  const Strs av = Strings(a), bv = Strings(b);
  ExpectStrings(Ok("Concat", {&a, &b}, {{"axis", int64_t{1}}})[0], {2, 3},
                {av[0], bv[0], bv[1], av[1], bv[2], bv[3]});
  const Tensor c = Text({1, 2}, 7);
  const Strs cv = Strings(c);
  ExpectStrings(Ok("Concat", {&b, &c}, {{"axis", int64_t{-2}}})[0], {3, 2}, {bv[0], bv[1], bv[2], bv[3], cv[0], cv[1]});
}

TEST(StringOpsTest, SplitIntoParts) {
  const Tensor x = Text({2, 3});
  const Strs v = Strings(x);
  const Tensor split = I64({1, 2});
  std::vector<Tensor> out = Ok("Split", {&x, &split}, {{"axis", int64_t{1}}}, 2);
  ExpectStrings(out[0], {2, 1}, {v[0], v[3]});
  ExpectStrings(out[1], {2, 2}, {v[1], v[2], v[4], v[5]});
}

TEST(StringOpsTest, SliceWithStepsAndNegativeSteps) {
  const Shape in_shape = {3, 5};
  const Tensor x = Text(in_shape);
  const Tensor starts = I64({0, 1}), ends = I64({3, 5}), axes = I64({0, 1}), steps = I64({2, 2});
  ExpectStrings(Ok("Slice", {&x, &starts, &ends, &axes, &steps})[0], {2, 2},
                Reference(Strings(x), in_shape, {2, 2}, [](const Ints& c) { return Ints{2 * c[0], 1 + 2 * c[1]}; }));
  const Tensor rstarts = I64({-1}), rends = I64({-100}), raxes = I64({1}), rsteps = I64({-1});
  ExpectStrings(Ok("Slice", {&x, &rstarts, &rends, &raxes, &rsteps})[0], in_shape,
                Reference(Strings(x), in_shape, in_shape, [](const Ints& c) { return Ints{c[0], 4 - c[1]}; }));
}

TEST(StringOpsTest, GatherOnBothAxesWithNegativeIndices) {
  const Shape in_shape = {3, 2};
  const Tensor x = Text(in_shape);
  const Ints idx = {2, -1, 0, 1};
  const Tensor indices = I64({2, 2}, idx);
  auto wrap = [](int64_t i, int64_t n) { return i < 0 ? i + n : i; };
  ExpectStrings(Ok("Gather", {&x, &indices})[0], {2, 2, 2},
                Reference(Strings(x), in_shape, {2, 2, 2},
                          [&](const Ints& c) { return Ints{wrap(idx[c[0] * 2 + c[1]], 3), c[2]}; }));
  const Tensor col = I64({}, {-1});
  ExpectStrings(Ok("Gather", {&x, &col}, {{"axis", int64_t{1}}})[0], {3},
                Reference(Strings(x), in_shape, {3}, [](const Ints& c) { return Ints{c[0], 1}; }));
}

TEST(StringOpsTest, GatherElementsAndGatherND) {
  const Shape in_shape = {2, 3};
  const Tensor x = Text(in_shape);
  const Ints idx = {2, 0, 1, 1, -3, 2};
  const Tensor indices = I64({2, 3}, idx);
  ExpectStrings(Ok("GatherElements", {&x, &indices}, {{"axis", int64_t{1}}})[0], {2, 3},
                Reference(Strings(x), in_shape, {2, 3}, [&](const Ints& c) {
                  const int64_t i = idx[c[0] * 3 + c[1]];
                  return Ints{c[0], i < 0 ? i + 3 : i};
                }));
  // GatherND: whole rows (depth 1) and single elements (depth 2).
  const Strs v = Strings(x);
  const Tensor rows = I64({2, 1}, {1, 0});
  ExpectStrings(Ok("GatherND", {&x, &rows})[0], {2, 3}, {v[3], v[4], v[5], v[0], v[1], v[2]});
  const Tensor points = I64({3, 2}, {0, 2, 1, 0, 1, -1});
  ExpectStrings(Ok("GatherND", {&x, &points})[0], {3}, {v[2], v[3], v[5]});
}

TEST(StringOpsTest, ScatterNDScatterElementsAndScatterReplace) {
  const Tensor x = Text({3, 2});
  const Strs v = Strings(x);
  const Tensor rows = I64({1, 1}, {-1});
  const Tensor row = MakeStrings({1, 2}, {"新", ""});
  ExpectStrings(Ok("ScatterND", {&x, &rows, &row})[0], {3, 2}, {v[0], v[1], v[2], v[3], "新", ""});
  const Tensor idx = I64({1, 2}, {2, 0});
  const Tensor upd = MakeStrings({1, 2}, {"ü", "last"});
  // Axis 0: out[idx[0][j]][j] = upd[0][j].
  ExpectStrings(Ok("ScatterElements", {&x, &idx, &upd}, {{"axis", int64_t{0}}})[0], {3, 2},
                {v[0], "last", v[2], v[3], "ü", v[5]});
  // Axis 1: out[0][idx[0][j]] = upd[0][j].
  const Tensor idx1 = I64({1, 2}, {1, 0});
  ExpectStrings(Ok("Scatter", {&x, &idx1, &upd}, {{"axis", int64_t{1}}})[0], {3, 2},
                {"last", "ü", v[2], v[3], v[4], v[5]});
}

TEST(StringOpsTest, ExpandAndTileRepeatReferences) {
  const Tensor x = Text({2, 1});
  const Strs v = Strings(x);
  const Tensor shape = I64({2, 2, 3});
  ExpectStrings(Ok("Expand", {&x, &shape})[0], {2, 2, 3},
                {v[0], v[0], v[0], v[1], v[1], v[1], v[0], v[0], v[0], v[1], v[1], v[1]});
  const Tensor y = Text({2, 2}, 2);
  const Strs w = Strings(y);
  const Tensor repeats = I64({2, 3});
  ExpectStrings(Ok("Tile", {&y, &repeats})[0], {4, 6},
                Reference(w, {2, 2}, {4, 6}, [](const Ints& c) { return Ints{c[0] % 2, c[1] % 2}; }));
}

TEST(StringOpsTest, WhereBroadcastsStrings) {
  const Tensor cond = Bools({2, 1}, {1, 0});
  const Tensor x = MakeStrings({1, 3}, {"x0", "ξ1", ""});
  const Tensor y = MakeStrings({}, {"γ"});
  ExpectStrings(Ok("Where", {&cond, &x, &y})[0], {2, 3}, {"x0", "ξ1", "", "γ", "γ", "γ"});
}

TEST(StringOpsTest, CompressWithAndWithoutAxis) {
  const Tensor x = Text({3, 2});
  const Strs v = Strings(x);
  const Tensor cond = Bools({3}, {1, 0, 1});
  ExpectStrings(Ok("Compress", {&x, &cond}, {{"axis", int64_t{0}}})[0], {2, 2}, {v[0], v[1], v[4], v[5]});
  const Tensor flat = Bools({5}, {0, 1, 1, 0, 1});
  ExpectStrings(Ok("Compress", {&x, &flat})[0], {3}, {v[1], v[2], v[4]});
}

TEST(StringOpsTest, ReverseSequenceReversesEachBatch) {
  const Shape shape = {4, 2};  // [time, batch]
  const Tensor x = Text(shape);
  const Ints lens = {3, 1};
  const Tensor seq_lens = I64(lens);
  ExpectStrings(Ok("ReverseSequence", {&x, &seq_lens}, {{"batch_axis", int64_t{1}}, {"time_axis", int64_t{0}}})[0],
                shape, Reference(Strings(x), shape, shape, [&](const Ints& c) {
                  const int64_t len = lens[c[1]];
                  return Ints{c[0] < len ? len - 1 - c[0] : c[0], c[1]};
                }));
}

TEST(StringOpsTest, DepthToSpaceAndSpaceToDepthInvertEachOther) {
  const Shape shape = {1, 4, 2, 3};
  const Tensor x = Text(shape);
  const int64_t b = 2;
  // DCR: y[n, c, h*b + i, w*b + j] = x[n, (i*b + j)*C' + c, h, w], C' = C / b^2.
  const Shape out_shape = {1, 1, 4, 6};
  const Strs want = Reference(Strings(x), shape, out_shape, [&](const Ints& c) {
    const int64_t i = c[2] % b, j = c[3] % b;
    return Ints{c[0], (i * b + j) * 1 + c[1], c[2] / b, c[3] / b};
  });
  std::vector<Tensor> y = Ok("DepthToSpace", {&x}, {{"blocksize", b}});
  ExpectStrings(y[0], out_shape, want);
  ExpectStrings(Ok("SpaceToDepth", {&y[0]}, {{"blocksize", b}})[0], shape, Strings(x));
}

TEST(StringOpsTest, TriluClearsToEmptyStrings) {
  const Tensor x = Text({3, 3}, 2);
  const Strs v = Strings(x);
  Strs want;
  for (int64_t r = 0; r < 3; ++r) {
    for (int64_t c = 0; c < 3; ++c) want.push_back(c >= r + 1 ? v[r * 3 + c] : "");
  }
  const Tensor k = I64({}, {1});
  ExpectStrings(Ok("Trilu", {&x, &k})[0], {3, 3}, want);
}

TEST(StringOpsTest, OneHotWithStringValues) {
  const Tensor indices = I64({3}, {0, 2, -1});
  const Tensor depth = I64({}, {3});
  const Tensor values = MakeStrings({2}, {"", "ön"});
  ExpectStrings(Ok("OneHot", {&indices, &depth, &values})[0], {3, 3},
                {"ön", "", "", "", "", "ön", "", "", "ön"});
}

TEST(StringOpsTest, ResizeNearestMovesStringsAndLinearRefuses) {
  const Tensor x = MakeStrings({1, 2}, {"左", "right"});
  const Tensor sizes = I64({2}, {2, 4});
  ExpectStrings(Ok("Resize", {&x, nullptr, nullptr, &sizes}, {{"mode", std::string("nearest")}})[0], {2, 4},
                {"左", "左", "right", "right", "左", "左", "right", "right"});
  absl::StatusOr<std::vector<Tensor>> linear = RunOp("Resize", {&x, nullptr, nullptr, &sizes},
                                                     {{"mode", std::string("linear")}});
  ASSERT_FALSE(linear.ok());
  EXPECT_THAT(linear.status().message(), AllOf(HasSubstr("Resize"), HasSubstr("string"), HasSubstr("nearest")));
}

// ---------------------------------------------------------------------------
// Pad: empty strings by default, a string constant, and the other modes.
// ---------------------------------------------------------------------------

TEST(StringOpsTest, PadConstantDefaultsToEmptyStrings) {
  const Tensor x = MakeStrings({2, 2}, {"a", "б", "日", "🙂"});
  const Tensor pads = I64({0, 1, 1, 0});  // begin: rows 0, cols 1; end: rows 1, cols 0
  ExpectStrings(Ok("Pad", {&x, &pads})[0], {3, 3}, {"", "a", "б", "", "日", "🙂", "", "", ""});
  const Tensor fill = MakeStrings({}, {"∅"});
  ExpectStrings(Ok("Pad", {&x, &pads, &fill})[0], {3, 3}, {"∅", "a", "б", "∅", "日", "🙂", "∅", "∅", "∅"});
}

TEST(StringOpsTest, PadReflectEdgeWrapMatchNumpy) {
  const Tensor x = MakeStrings({3}, {"p", "ą", "r"});
  const Tensor pads = I64({2, 2});
  ExpectStrings(Ok("Pad", {&x, &pads}, {{"mode", std::string("reflect")}})[0], {7},
                {"r", "ą", "p", "ą", "r", "ą", "p"});
  ExpectStrings(Ok("Pad", {&x, &pads}, {{"mode", std::string("edge")}})[0], {7}, {"p", "p", "p", "ą", "r", "r", "r"});
  ExpectStrings(Ok("Pad", {&x, &pads}, {{"mode", std::string("wrap")}})[0], {7}, {"ą", "r", "p", "ą", "r", "p", "ą"});
}

TEST(StringOpsTest, PadRefusesANumericValueAttributeForStrings) {
  const Tensor x = MakeStrings({2}, {"a", "b"});
  absl::StatusOr<std::vector<Tensor>> out = RunOp("Pad", {&x}, {{"pads", Ints{1, 1}}, {"value", 1.5}});
  ASSERT_FALSE(out.ok());
  EXPECT_THAT(out.status().message(), AllOf(HasSubstr("Pad"), HasSubstr("string"), HasSubstr("constant_value")));
  const Tensor pads = I64({1, 1});
  const Tensor number = MakeTensor<float>(DType::kF32, {}, {0.0f});
  out = RunOp("Pad", {&x, &pads, &number});
  ASSERT_FALSE(out.ok());
  EXPECT_THAT(out.status().message(), AllOf(HasSubstr("string"), HasSubstr("f32")));
}

// ---------------------------------------------------------------------------
// Ops that compare strings: by their bytes.
// ---------------------------------------------------------------------------

// Copies of the same text at other addresses: a comparison of references
// would tell them apart.
TEST(StringOpsTest, EqualComparesBytesNotReferences) {
  const Tensor a = MakeStrings({2, 3}, {"héllo", "", "a", "日本", "x", std::string("a\0", 2)});
  const Tensor b = MakeStrings({3}, {"héllo", "", "a"});
  ASSERT_NE(a.as<StringRef>()[0].data, b.as<StringRef>()[0].data);
  std::vector<Tensor> out = Ok("Equal", {&a, &b});
  ASSERT_EQ(out[0].dtype(), DType::kBool);
  EXPECT_EQ(out[0].shape(), (Shape{2, 3}));
  // "héllo" == "héllo", "" == "", "a" == "a"; "a\0" != "a" (not NUL-terminated).
  EXPECT_THAT(Values<uint8_t>(out[0]), ElementsAre(1, 1, 1, 0, 0, 0));
  const Tensor one = MakeStrings({}, {"x"});
  EXPECT_THAT(Values<uint8_t>(Ok("Equal", {&one, &a})[0]), ElementsAre(0, 0, 0, 0, 1, 0));
}

TEST(StringOpsTest, EqualRefusesMixedDTypes) {
  const Tensor a = MakeStrings({2}, {"1", "2"});
  const Tensor b = I64({1, 2});
  absl::StatusOr<std::vector<Tensor>> out = RunOp("Equal", {&a, &b});
  ASSERT_FALSE(out.ok());
  EXPECT_THAT(out.status().message(), AllOf(HasSubstr("Equal"), HasSubstr("string"), HasSubstr("i64")));
}

// numpy.unique's results computed naively: the distinct values in byte
// order or in order of first occurrence, each one's first index, every
// element's group, and the counts.
struct UniqueRef {
  Strs y;
  Ints first, inverse, counts;
};
UniqueRef NaiveUnique(const Strs& x, bool sorted) {
  UniqueRef r;
  for (size_t i = 0; i < x.size(); ++i) {
    if (std::find(r.y.begin(), r.y.end(), x[i]) == r.y.end()) {
      r.y.push_back(x[i]);
      r.first.push_back(static_cast<int64_t>(i));
    }
  }
  if (sorted) {
    std::vector<size_t> order(r.y.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    // std::string compares as unsigned chars: UTF-8 byte order.
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return r.y[a] < r.y[b]; });
    UniqueRef s;
    for (size_t i : order) {
      s.y.push_back(r.y[i]);
      s.first.push_back(r.first[i]);
    }
    r.y = s.y;
    r.first = s.first;
  }
  for (const std::string& v : x) {
    r.inverse.push_back(std::find(r.y.begin(), r.y.end(), v) - r.y.begin());
  }
  r.counts.assign(r.y.size(), 0);
  for (int64_t g : r.inverse) ++r.counts[g];
  return r;
}

TEST(StringOpsTest, UniqueSortedAndUnsortedMatchNumpy) {
  // Repeats at other addresses, a prefix ("ab" < "abc"), bytes above 0x7f
  // ("é" after "z"), the empty string first in byte order.
  const Strs x = {"z", "abc", "é", "", "ab", "abc", "z", "日本", "", "é", "Z"};
  const Tensor t = MakeStrings({static_cast<int64_t>(x.size())}, x);
  for (int64_t sorted : {1, 0}) {
    SCOPED_TRACE(sorted);
    const UniqueRef want = NaiveUnique(x, sorted == 1);
    std::vector<Tensor> out = Ok("Unique", {&t}, {{"sorted", sorted}}, 4);
    ExpectStrings(out[0], {static_cast<int64_t>(want.y.size())}, want.y);
    EXPECT_EQ(Values<int64_t>(out[1]), want.first);
    EXPECT_EQ(Values<int64_t>(out[2]), want.inverse);
    EXPECT_EQ(Values<int64_t>(out[3]), want.counts);
  }
  // Sorted is byte order: "" < "Z" < "ab" < "abc" < "z" < "é" < "日本".
  EXPECT_THAT(NaiveUnique(x, true).y, ElementsAre("", "Z", "ab", "abc", "z", "é", "日本"));
}

TEST(StringOpsTest, UniqueAlongAnAxisComparesWholeRows) {
  const Tensor x = MakeStrings({3, 2}, {"b", "ä", "a", "ä", "b", "ä"});
  std::vector<Tensor> out = Ok("Unique", {&x}, {{"axis", int64_t{0}}}, 4);
  ExpectStrings(out[0], {2, 2}, {"a", "ä", "b", "ä"});
  EXPECT_THAT(Values<int64_t>(out[1]), ElementsAre(1, 0));
  EXPECT_THAT(Values<int64_t>(out[2]), ElementsAre(1, 0, 1));
  EXPECT_THAT(Values<int64_t>(out[3]), ElementsAre(1, 2));
}

TEST(StringOpsTest, NonZeroCountsNonEmptyStrings) {
  // An empty string whose reference has data (a view of "" at an address)
  // is still empty.
  std::vector<StringRef> refs = {StringRef(""), StringRef("x"), StringRef(), StringRef("日本"),
                                 StringRef(absl::string_view("abc", 0))};
  ASSERT_NE(refs[0].data, nullptr);
  const Tensor x = Tensor::CopyOf(TensorView(DType::kString, {5}, refs.data())).value();
  std::vector<Tensor> out = Ok("NonZero", {&x});
  EXPECT_EQ(out[0].shape(), (Shape{1, 2}));
  EXPECT_THAT(Values<int64_t>(out[0]), ElementsAre(1, 3));
  const Tensor m = MakeStrings({2, 2}, {"", "a", "b", ""});
  out = Ok("NonZero", {&m});
  EXPECT_EQ(out[0].shape(), (Shape{2, 2}));
  EXPECT_THAT(Values<int64_t>(out[0]), ElementsAre(0, 1, 1, 0));
}

// ---------------------------------------------------------------------------
// Ops that must not take strings.
// ---------------------------------------------------------------------------

TEST(StringOpsTest, NumericOpsRefuseStringsNamingTheOpAndTheDType) {
  const Tensor s = Text({2, 2});
  const Tensor k = I64({1}, {1});
  const Tensor axes = I64({1}, {0});
  const struct {
    const char* op;
    std::vector<const Tensor*> inputs;
  } cases[] = {
      {"Add", {&s, &s}},        {"Mul", {&s, &s}},   {"Greater", {&s, &s}}, {"Less", {&s, &s}},
      {"Relu", {&s}},           {"Abs", {&s}},       {"Neg", {&s}},         {"Not", {&s}},
      {"ReduceSum", {&s}},      {"ReduceMax", {&s, &axes}}, {"ArgMax", {&s}}, {"TopK", {&s, &k}},
      {"CumSum", {&s, &k}},     {"MatMul", {&s, &s}}, {"Softmax", {&s}},    {"Max", {&s, &s}},
      {"Clip", {&s}},           {"Sign", {&s}},      {"IsNaN", {&s}},       {"EyeLike", {&s}},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.op);
    absl::StatusOr<std::vector<Tensor>> out = RunOp(c.op, c.inputs);
    ASSERT_FALSE(out.ok());
    EXPECT_THAT(out.status().message(), AllOf(HasSubstr(c.op), HasSubstr("string")));
  }
}

TEST(StringOpsTest, ScatterReductionsRefuseStrings) {
  const Tensor x = Text({3});
  const Tensor idx = I64({1, 1}, {0});
  const Tensor upd = MakeStrings({1}, {"u"});
  for (const char* r : {"add", "mul", "max", "min"}) {
    SCOPED_TRACE(r);
    absl::StatusOr<std::vector<Tensor>> out = RunOp("ScatterND", {&x, &idx, &upd}, {{"reduction", std::string(r)}});
    ASSERT_FALSE(out.ok());
    EXPECT_THAT(out.status().message(), AllOf(HasSubstr("ScatterND"), HasSubstr("string"), HasSubstr(r)));
  }
  const Tensor idx1 = I64({1}, {2});
  absl::StatusOr<std::vector<Tensor>> out =
      RunOp("ScatterElements", {&x, &idx1, &upd}, {{"reduction", std::string("add")}});
  ASSERT_FALSE(out.ok());
  EXPECT_THAT(out.status().message(), AllOf(HasSubstr("ScatterElements"), HasSubstr("string")));
}

TEST(StringOpsTest, ConstantOfShapeRefusesAStringValue) {
  const Tensor shape = I64({2});
  const Tensor value = MakeStrings({1}, {"v"});
  absl::StatusOr<std::vector<Tensor>> out = RunOp("ConstantOfShape", {&shape, &value});
  ASSERT_FALSE(out.ok());
  EXPECT_THAT(out.status().message(), AllOf(HasSubstr("ConstantOfShape"), HasSubstr("string")));
}

// The ops ONNX lets take strings (and grove runs on them), the ops of the
// text group, whose string inputs are their own business, and those whose
// inputs are sequences, optionals or subgraphs.
bool TakesStringsOrIsNotATensorOp(const std::string& op) {
  static const std::set<std::string>* ops = new std::set<std::string>{
      "Identity", "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Transpose", "Concat", "Split", "Slice", "Gather",
      "GatherElements", "GatherND", "ScatterND", "ScatterElements", "Scatter", "Expand", "Tile", "Where",
      "Compress", "Shape", "Size", "Pad", "ReverseSequence", "Unique", "Equal", "NonZero", "Trilu", "OneHot",
      "DepthToSpace", "SpaceToDepth", "Resize", "Cast", "CastLike", "TfIdfVectorizer", "StringNormalizer",
      "If", "Loop", "Scan", "SequenceEmpty", "SequenceConstruct", "SequenceInsert", "SequenceErase",
      "SequenceAt", "SequenceLength", "ConcatFromSequence", "SplitToSequence", "SequenceMap", "Optional",
      "OptionalHasElement", "OptionalGetElement"};
  return ops->count(op) > 0;
}

// Every other registered op, given a string tensor as input 0 and strings,
// i64 or f32 tensors for the rest, fails with an error that says so (and
// does not crash): a kernel that read a reference as a number would succeed
// or fault here.
TEST(StringOpsTest, EveryOtherOpRefusesStrings) {
  // The attributes an op needs before it looks at its inputs.
  const std::map<std::string, std::vector<std::pair<std::string, AttrValue>>> required = {
      {"BitShift", {{"direction", std::string("LEFT")}}}, {"Einsum", {{"equation", std::string("ij,ij->ij")}}}};
  const ir::OpRegistry& registry = runtime::GlobalOpRegistry();
  const Tensor s = Text({2, 2});
  const Tensor ints = I64({2}, {1, 1});
  const Tensor floats = MakeTensor<float>(DType::kF32, {2, 2}, {1, 2, 3, 4});
  int swept = 0;
  for (const std::string& op : registry.Types()) {
    if (TakesStringsOrIsNotATensorOp(op)) continue;
    const ir::OpDef* def = registry.Find(op);
    const int lo = std::max(def->min_inputs, 1);
    const int hi = def->max_inputs < 0 ? lo + 2 : std::min(def->max_inputs, 9);
    for (int n = lo; n <= hi; ++n) {
      for (const Tensor* rest : {&s, &ints, &floats}) {
        SCOPED_TRACE(absl::StrCat(op, " with ", n, " inputs, the rest ", DTypeName(rest->dtype())));
        std::vector<const Tensor*> inputs(n, rest);
        inputs[0] = &s;
        auto attrs = required.find(op);
        absl::StatusOr<std::vector<Tensor>> out =
            RunOp(op, inputs, attrs == required.end() ? std::vector<std::pair<std::string, AttrValue>>{} : attrs->second,
                  def->max_outputs < 0 ? 1 : def->min_outputs);
        ASSERT_FALSE(out.ok()) << op << " took a string tensor";
        EXPECT_THAT(out.status().message(), AllOf(HasSubstr(op), HasSubstr("string")));
      }
    }
    ++swept;
  }
  EXPECT_GT(swept, 100);
}

}  // namespace
}  // namespace grove::testing
