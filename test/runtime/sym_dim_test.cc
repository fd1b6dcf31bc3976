#include "lib/ir/sym_dim.h"

#include <cstdint>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "lib/ir/broadcast.h"
#include "lib/ir/graph.h"
#include "lib/ir/op_registry.h"

namespace grove::ir {
namespace {

TEST(SymDimTest, ConstantsFold) {
  EXPECT_EQ((SymDim(3) * SymDim(4)).value(), 12);
  EXPECT_EQ((SymDim(7) - SymDim(7)).value(), 0);
  EXPECT_EQ((SymDim(7) / SymDim(2)).value(), 3);
  EXPECT_EQ((SymDim(-7) / SymDim(2)).value(), -4);  // floor
  EXPECT_TRUE(SymDim(5).is_const());
}

TEST(SymDimTest, PolynomialsAreCanonical) {
  const SymDim b = SymDim::Symbol(0), s = SymDim::Symbol(1);
  EXPECT_EQ(b * s, s * b);
  EXPECT_EQ(b + s - b, s);
  EXPECT_EQ((b * s * SymDim(32)) / SymDim(32), b * s);
  EXPECT_EQ((b * s * SymDim(32)) / (b * s), SymDim(32));
  EXPECT_EQ(b.symbol_index(), 0);
  EXPECT_EQ((b * s).symbol_index(), -1);
  EXPECT_FALSE((b * s).is_const());
  const std::vector<std::string> names = {"batch", "seq"};
  EXPECT_EQ((b * s + SymDim(1)).ToString(names), "1+batch*seq");
}

// A constant is held without terms, however it was reached: from an int, or
// from a polynomial whose symbols cancel. Each compares, prints and divides
// the same way, and saturates instead of wrapping.
TEST(SymDimTest, ConstantsReachedAnyWayAreTheSame) {
  const SymDim b = SymDim::Symbol(0), s = SymDim::Symbol(1);
  const std::vector<std::string> names = {"batch", "seq"};
  EXPECT_EQ(SymDim(), SymDim(0));
  EXPECT_EQ((s + SymDim(3)) - s, SymDim(3));
  EXPECT_TRUE(((s + SymDim(3)) - s).is_const());
  EXPECT_EQ(((s + SymDim(3)) - s).value(), 3);
  EXPECT_EQ(s - s, SymDim(0));
  EXPECT_EQ((s - s).ToString(), "0");
  EXPECT_EQ((b * s - s * b + SymDim(-5)).ToString(names), "-5");
  EXPECT_EQ(s * SymDim(0), SymDim(0));
  EXPECT_EQ(SymDim(0) * s, SymDim(0));
  EXPECT_EQ(SymDim(1) * s, s);
  EXPECT_EQ((s * SymDim(1)).symbol_index(), 1);
  EXPECT_EQ((s + SymDim(0)).symbol_index(), 1);
  EXPECT_EQ((SymDim(2) * s + SymDim(4)) / SymDim(2), s + SymDim(2));
  EXPECT_EQ((SymDim(2) * s + SymDim(4)).ToString(names), "4+2*seq");
  EXPECT_EQ((SymDim(2) * s + SymDim(4)).value(), 0);  // not a constant
  EXPECT_EQ((SymDim(6) * s) / s, SymDim(6));
  EXPECT_TRUE((SymDim(6) / s).is_unknown());
  EXPECT_EQ(SymDim(0) / s, SymDim(0));
  EXPECT_EQ(SymDim(7) / SymDim(-1), SymDim(-7));
  EXPECT_NE(SymDim(3), s);
  EXPECT_NE(SymDim(3), s + SymDim(3));
  EXPECT_EQ((SymDim(INT64_MAX) + SymDim(1)).value(), INT64_MAX);
  EXPECT_EQ((SymDim(INT64_MIN) - SymDim(1)).value(), INT64_MIN);
  EXPECT_EQ((SymDim(INT64_MIN) / SymDim(-1)).value(), INT64_MAX);
  EXPECT_EQ((SymDim(int64_t{1} << 40) * SymDim(int64_t{1} << 40)).value(), INT64_MAX);
  EXPECT_EQ(((s + SymDim(INT64_MAX)) + SymDim(1) - s).value(), INT64_MAX);
}

// Attributes keep the order they were first set in; setting a name again
// replaces its value in place; typed getters fall back to their defaults.
TEST(AttributesTest, SetReplacesAndAllKeepsOrder) {
  Attributes a;
  EXPECT_FALSE(a.Has("axis"));
  EXPECT_EQ(a.Find("axis"), nullptr);
  a.Set("axis", int64_t{1});
  a.Set("perm", std::vector<int64_t>{2, 0, 1});
  a.Set("alpha", 0.5);
  a.Set("axis", int64_t{-1});
  ASSERT_EQ(a.all().size(), 3u);
  EXPECT_EQ(a.all()[0].first, "axis");
  EXPECT_EQ(a.all()[1].first, "perm");
  EXPECT_EQ(a.all()[2].first, "alpha");
  EXPECT_EQ(a.GetInt("axis", 0), -1);
  EXPECT_EQ(a.GetInts("perm"), (std::vector<int64_t>{2, 0, 1}));
  EXPECT_EQ(a.GetFloat("alpha", 0), 0.5);
  EXPECT_EQ(a.GetInt("alpha", 7), 0);  // a float read as an int truncates
  EXPECT_EQ(a.GetString("axis", "none"), "none");
  EXPECT_EQ(a.GetInt("ax", 9), 9);
  EXPECT_EQ(a.GetSubgraph("perm"), -1);
  EXPECT_TRUE(a.Has("alpha"));
}

TEST(SymDimTest, InexactDivisionIsUnknown) {
  const SymDim s = SymDim::Symbol(1);
  EXPECT_TRUE((s / SymDim(2)).is_unknown());
  EXPECT_TRUE((SymDim(6) / s).is_unknown());
}

TEST(SymDimTest, UnknownEqualsOnlyItself) {
  const SymDim u = SymDim::Unknown();
  const SymDim copy = u;
  EXPECT_EQ(u, copy);
  EXPECT_NE(u, SymDim::Unknown());
  EXPECT_TRUE((u + SymDim(1)).is_unknown());
  EXPECT_EQ(u * SymDim(0), SymDim(0));
}

TEST(BroadcastTest, SymbolicAndConstant) {
  const SymDim b = SymDim::Symbol(0);
  auto out = BroadcastShapes({SymShape{b, 1, 4}, SymShape{3, 1}});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(*out, (SymShape{b, 3, 4}));
  EXPECT_FALSE(BroadcastShapes({SymShape{2, 3}, SymShape{4, 3}}).ok());
  auto scalar = BroadcastShapes({SymShape{}, SymShape{}});
  ASSERT_TRUE(scalar.ok());
  EXPECT_TRUE(scalar->empty());
}

// The shapes are read where they are (a shape function's inputs): the same
// result as BroadcastShapes, the inputs untouched, the first of two
// different symbolic dims kept, and the dim at fault named.
TEST(BroadcastTest, ShapesByPointer) {
  const SymDim b = SymDim::Symbol(0), s = SymDim::Symbol(1);
  const SymShape x{b, 1, 4}, y{3, 1}, z{s, 3, 1};
  auto out = BroadcastShapePtrs({&x, &y, &z});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(*out, (SymShape{b, 3, 4}));
  EXPECT_EQ(*out, *BroadcastShapes({x, y, z}));
  EXPECT_EQ(x, (SymShape{b, 1, 4}));
  EXPECT_EQ(z, (SymShape{s, 3, 1}));

  const SymShape two{2, 3}, four{4, 3};
  auto bad = BroadcastShapePtrs({&two, &four});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "shapes do not broadcast: dim 0 is 2 in one input and 4 in another");
  EXPECT_EQ(BroadcastShapes({two, four}).status(), bad.status());

  auto none = BroadcastShapePtrs({});
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
}

TEST(NormalizeAxisTest, NegativeAndOutOfRange) {
  EXPECT_EQ(*NormalizeAxis(-1, 3), 2);
  EXPECT_EQ(*NormalizeAxis(0, 3), 0);
  EXPECT_FALSE(NormalizeAxis(3, 3).ok());
  EXPECT_FALSE(NormalizeAxis(-4, 3).ok());
}

}  // namespace
}  // namespace grove::ir

namespace grove::ir {
namespace {

TEST(BroadcastTest, SymbolicAgainstConstantTakesTheConstant) {
  const SymDim b = SymDim::Symbol(0);
  auto out = BroadcastShapes({SymShape{b, 3}, SymShape{5, 3}});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(*out, (SymShape{5, 3}));
  auto same = BroadcastShapes({SymShape{5, 3}, SymShape{b, 3}});
  ASSERT_TRUE(same.ok());
  EXPECT_EQ(*same, (SymShape{5, 3}));
}

}  // namespace
}  // namespace grove::ir
