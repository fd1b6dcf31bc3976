// Sequences and optionals through the public API: Session::RunValues, the
// sequence and optional ops against hand-computed results, a sequence carried
// through a Loop (the shape of PyTorch's list-append decoders), and the
// errors for values of the wrong kind, dtype or shape.
#include <vector>

#include "gmock/gmock.h"
#include "grove/grove.h"
#include "gtest/gtest.h"
#include "models/demo_models.h"
#include "test/model_test_util.h"

namespace grove {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;
using testing::CpuSession;
using testing::LoadOrDie;
using testing::ScalarI64;
using testing::TensorF32;
using testing::ToVector;

// x f32[n,3], y f32[k,3] -> s = [x, y]; s2 = insert(s, x at 0) = [x, x, y];
// len(s2), s2[-1], concat(s2, axis 0), erase(s2) = [x, x], split(x, [1, n-1]).
std::shared_ptr<const Model> SequenceOpsModel() {
  ModelBuilder b;
  b.AddSymbol("n", 2, 8);
  b.AddSymbol("k", 1, 8);
  b.AddInput("x", DType::kF32, {"n", 3});
  b.AddInput("y", DType::kF32, {"k", 3});
  b.AddWeight("zero", DType::kI64, {}, std::vector<int64_t>{0});
  b.AddWeight("last", DType::kI32, {}, std::vector<int32_t>{-1});
  b.AddOp("SequenceConstruct", {"x", "y"}, {"s"});
  b.AddOp("SequenceInsert", {"s", "x", "zero"}, {"s2"});
  b.AddOp("SequenceLength", {"s2"}, {"len"});
  b.AddOp("SequenceAt", {"s2", "last"}, {"at"});
  b.AddOp("ConcatFromSequence", {"s2"}, {"cat"}, {{"axis", int64_t{0}}});
  b.AddOp("SequenceErase", {"s2"}, {"s3"});
  b.AddOp("Shape", {"x"}, {"xs"});
  b.AddWeight("one", DType::kI64, {1}, std::vector<int64_t>{1});
  b.AddWeight("zero1", DType::kI64, {1}, std::vector<int64_t>{0});
  b.AddOp("Gather", {"xs", "zero1"}, {"n1"});
  b.AddOp("Sub", {"n1", "one"}, {"rest"});
  b.AddOp("Concat", {"one", "rest"}, {"lengths"}, {{"axis", int64_t{0}}});
  b.AddOp("SplitToSequence", {"x", "lengths"}, {"parts"}, {{"axis", int64_t{0}}});
  for (const char* out : {"len", "at", "cat", "s3", "parts"}) b.AddOutput(out);
  return LoadOrDie(b.Finish());
}

TEST(SequenceTest, OpsFollowOnnxSemantics) {
  std::shared_ptr<const Model> model = SequenceOpsModel();
  ASSERT_EQ(model->outputs().size(), 5u);
  EXPECT_EQ(model->outputs()[3].kind, ValueKind::kSequence);
  EXPECT_EQ(model->outputs()[3].dtype, DType::kF32);
  EXPECT_EQ(model->outputs()[1].kind, ValueKind::kTensor);
  std::unique_ptr<Session> s = CpuSession(model);
  const std::vector<float> xv = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  const std::vector<float> yv = {-1, -2, -3};
  absl::StatusOr<std::vector<Value>> outs =
      s->RunValues({Value(TensorF32({3, 3}, xv)), Value(TensorF32({1, 3}, yv))});
  ASSERT_TRUE(outs.ok()) << outs.status();
  EXPECT_EQ(*(*outs)[0].tensor().as<int64_t>(), 3);
  EXPECT_EQ((*outs)[1].tensor().shape(), (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(ToVector((*outs)[1].tensor().view()), yv);
  std::vector<float> cat = xv;
  cat.insert(cat.end(), xv.begin(), xv.end());
  cat.insert(cat.end(), yv.begin(), yv.end());
  EXPECT_EQ((*outs)[2].tensor().shape(), (std::vector<int64_t>{7, 3}));
  EXPECT_EQ(ToVector((*outs)[2].tensor().view()), cat);
  const Value& s3 = (*outs)[3];
  ASSERT_EQ(s3.kind(), ValueKind::kSequence);
  ASSERT_EQ(s3.items().size(), 2u);
  EXPECT_EQ(ToVector(s3.items()[1].view()), xv);
  const Value& parts = (*outs)[4];
  ASSERT_EQ(parts.items().size(), 2u);
  EXPECT_EQ(parts.items()[0].shape(), (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(parts.items()[1].shape(), (std::vector<int64_t>{2, 3}));
  EXPECT_THAT(ToVector(parts.items()[1].view()), ElementsAre(4, 5, 6, 7, 8, 9));

  // Another shape: a new plan, same semantics.
  outs = s->RunValues({Value(TensorF32({2, 3}, {1, 1, 1, 2, 2, 2})), Value(TensorF32({2, 3}, {3, 3, 3, 4, 4, 4}))});
  ASSERT_TRUE(outs.ok()) << outs.status();
  EXPECT_EQ((*outs)[2].tensor().shape(), (std::vector<int64_t>{6, 3}));
  EXPECT_THAT(ToVector((*outs)[1].tensor().view()), ElementsAre(3, 3, 3, 4, 4, 4));
}

TEST(SequenceTest, RunRefersSequenceOutputsToRunValues) {
  std::unique_ptr<Session> s = CpuSession(SequenceOpsModel());
  Tensor x = TensorF32({2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor y = TensorF32({1, 3}, {1, 2, 3});
  absl::StatusOr<std::vector<TensorView>> outs = s->Run({x.view(), y.view()});
  ASSERT_FALSE(outs.ok());
  EXPECT_THAT(outs.status().message(), HasSubstr("output 's3' is a seq(f32); use Session::RunValues"));
  // The session stays usable.
  EXPECT_TRUE(s->RunValues({Value(x), Value(y)}).ok());
}

TEST(SequenceTest, LoopCarriesASequence) {
  std::shared_ptr<const Model> model = LoadOrDie(testing::BuildSequenceLoop());
  ASSERT_EQ(model->outputs().size(), 2u);
  EXPECT_EQ(model->outputs()[1].kind, ValueKind::kSequence);
  std::unique_ptr<Session> s = CpuSession(model);
  for (int64_t m : {4, 1, 4, 7}) {
    SCOPED_TRACE(m);
    absl::StatusOr<std::vector<Value>> outs = s->RunValues({Value(ScalarI64(m)), Value(TensorF32({2}, {1, -2}))});
    ASSERT_TRUE(outs.ok()) << outs.status();
    const Tensor& stacked = (*outs)[0].tensor();
    ASSERT_EQ(stacked.shape(), (std::vector<int64_t>{m, 2}));
    std::vector<float> want;
    for (int64_t i = 0; i < m; ++i) {
      want.push_back(static_cast<float>(i));
      want.push_back(-2.0f * static_cast<float>(i));
    }
    EXPECT_EQ(ToVector(stacked.view()), want);
    ASSERT_EQ((*outs)[1].items().size(), static_cast<size_t>(m));
    EXPECT_THAT(ToVector((*outs)[1].items()[m - 1].view()), ElementsAreArray({want[2 * m - 2], want[2 * m - 1]}));
  }
  // The body plans twice (an empty list, then a list of f32[2]); every other
  // trip and the repeated m = 4 hit the cache.
  const SessionStats st = s->stats();
  EXPECT_LE(st.plans_created, 6);
  EXPECT_GT(st.plan_cache_hits, 10);

  // Zero trips leave the list empty: concatenating it is an error, not a crash.
  absl::StatusOr<std::vector<Value>> none = s->RunValues({Value(ScalarI64(0)), Value(TensorF32({2}, {1, 2}))});
  ASSERT_FALSE(none.ok());
  EXPECT_THAT(none.status().message(), HasSubstr("concatenates an empty sequence"));
}

// A sequence input concatenated; an optional input tested and unwrapped.
std::shared_ptr<const Model> ValueInputsModel() {
  ModelBuilder b;
  b.AddInput("parts", ValueKind::kSequence, DType::kF32, std::vector<Dim>{"rows", 2});
  b.AddSymbol("rows", 0, 16);
  b.AddInput("maybe", ValueKind::kOptionalTensor, DType::kF32);
  b.AddOp("ConcatFromSequence", {"parts"}, {"joined"}, {{"axis", int64_t{0}}});
  b.AddOp("OptionalHasElement", {"maybe"}, {"has"});
  b.AddOp("Identity", {"maybe"}, {"same"});
  b.AddOutput("joined");
  b.AddOutput("has");
  b.AddOutput("same");
  return LoadOrDie(b.Finish());
}

TEST(SequenceTest, SequenceAndOptionalInputs) {
  std::shared_ptr<const Model> model = ValueInputsModel();
  ASSERT_EQ(model->inputs().size(), 2u);
  EXPECT_EQ(model->inputs()[0].kind, ValueKind::kSequence);
  EXPECT_EQ(model->inputs()[1].kind, ValueKind::kOptionalTensor);
  EXPECT_EQ(model->outputs()[2].kind, ValueKind::kOptionalTensor);
  std::unique_ptr<Session> s = CpuSession(model);
  Value parts = Value::Sequence(DType::kF32, {TensorF32({1, 2}, {1, 2}), TensorF32({2, 2}, {3, 4, 5, 6})});
  absl::StatusOr<std::vector<Value>> outs =
      s->RunValues({parts, Value::None(ValueKind::kOptionalTensor, DType::kF32)});
  ASSERT_TRUE(outs.ok()) << outs.status();
  EXPECT_THAT(ToVector((*outs)[0].tensor().view()), ElementsAre(1, 2, 3, 4, 5, 6));
  EXPECT_EQ(*(*outs)[1].tensor().as<uint8_t>(), 0);
  EXPECT_FALSE((*outs)[2].has_value());

  outs = s->RunValues({parts, Value::Some(Value(TensorF32({3}, {7, 8, 9})))});
  ASSERT_TRUE(outs.ok()) << outs.status();
  EXPECT_EQ(*(*outs)[1].tensor().as<uint8_t>(), 1);
  ASSERT_TRUE((*outs)[2].has_value());
  EXPECT_THAT(ToVector((*outs)[2].tensor().view()), ElementsAre(7, 8, 9));
}

TEST(SequenceTest, RejectsValuesOfTheWrongKindDTypeOrShape) {
  std::unique_ptr<Session> s = CpuSession(ValueInputsModel());
  const Value none = Value::None(ValueKind::kOptionalTensor, DType::kF32);
  struct Bad {
    Value parts;
    Value maybe;
    const char* message;
  };
  const Bad cases[] = {
      {Value(TensorF32({1, 2}, {1, 2})), none, "input 'parts' (seq(f32)[rows, 2]): given f32[1, 2]"},
      {Value::Sequence(DType::kI64), none, "given seq(i64) of 0"},
      {Value::Sequence(DType::kF32, {TensorF32({1, 3}, {1, 2, 3})}), none, "item 0 has shape [1, 3]"},
      {Value::Sequence(DType::kF32, {TensorF32({2}, {1, 2})}), none, "item 0 has shape [2]"},
      {Value::Sequence(DType::kF32, {Tensor::Create(DType::kI32, {1, 2}).value()}), none, "item 0 is i32"},
      {Value::Sequence(DType::kF32, {TensorF32({1, 2}, {1, 2})}), Value::None(ValueKind::kOptionalSequence, DType::kF32),
       "input 'maybe' (optional(f32)): given optional(seq(f32)) (absent)"},
      {Value::Sequence(DType::kF32), none, "concatenates an empty sequence"},
  };
  for (const Bad& c : cases) {
    absl::StatusOr<std::vector<Value>> outs = s->RunValues({c.parts, c.maybe});
    ASSERT_FALSE(outs.ok()) << c.message;
    EXPECT_THAT(outs.status().message(), HasSubstr(c.message));
  }
  absl::StatusOr<std::vector<Value>> one = s->RunValues({none});
  ASSERT_FALSE(one.ok());
  EXPECT_THAT(one.status().message(), HasSubstr("the model takes 2 inputs (parts, maybe), given 1"));
  // Run speaks tensors only.
  Tensor t = TensorF32({1, 2}, {1, 2});
  absl::StatusOr<std::vector<TensorView>> run = s->Run({t.view(), t.view()});
  ASSERT_FALSE(run.ok());
  EXPECT_THAT(run.status().message(), HasSubstr("input 'parts' is a seq(f32); use Session::RunValues"));
}

TEST(SequenceTest, PositionsOutOfRangeAreErrors) {
  ModelBuilder b;
  b.AddInput("x", DType::kF32, {2});
  b.AddInput("p", DType::kI64, {});
  b.AddOp("SequenceConstruct", {"x", "x"}, {"s"});
  b.AddOp("SequenceAt", {"s", "p"}, {"at"});
  b.AddOutput("at");
  std::unique_ptr<Session> s = CpuSession(LoadOrDie(b.Finish()));
  Tensor x = TensorF32({2}, {1, 2});
  for (int64_t p : {-2, 1}) {
    absl::StatusOr<std::vector<TensorView>> ok = s->Run({x.view(), ScalarI64(p).view()});
    EXPECT_TRUE(ok.ok()) << ok.status();
  }
  for (int64_t p : {-3, 2}) {
    absl::StatusOr<std::vector<TensorView>> bad = s->Run({x.view(), ScalarI64(p).view()});
    ASSERT_FALSE(bad.ok());
    EXPECT_THAT(bad.status().message(), HasSubstr("outside [-2, 1] for a sequence of 2 items"));
  }
}

// A body that returns its carried inputs in another order: every output is
// read before any carried value is overwritten.
TEST(LoopTest, BodyMaySwapItsCarriedValues) {
  std::unique_ptr<Session> s = CpuSession(LoadOrDie(testing::BuildSwapLoop()));
  for (int64_t m : {0, 1, 2, 3}) {
    SCOPED_TRACE(m);
    absl::StatusOr<std::vector<Value>> outs =
        s->RunValues({Value(ScalarI64(m)), Value(TensorF32({2}, {1, 2})), Value(TensorF32({2}, {3, 4}))});
    ASSERT_TRUE(outs.ok()) << outs.status();
    const std::vector<float> a = {1, 2}, b = {3, 4};
    EXPECT_EQ(ToVector((*outs)[0].tensor().view()), m % 2 == 0 ? a : b);
    EXPECT_EQ(ToVector((*outs)[1].tensor().view()), m % 2 == 0 ? b : a);
  }
}

// The demo's three ways to keep a decoder's every step (a scan output, a
// list carried through the Loop, a growing tensor) give the same history.
TEST(SequenceTest, StepHistoryThreeWaysAgree) {
  std::vector<std::vector<float>> histories;
  for (demo::History h : {demo::History::kScan, demo::History::kList, demo::History::kConcat}) {
    std::unique_ptr<Session> s = CpuSession(LoadOrDie(demo::BuildStepHistory(h)));
    std::vector<float> h0(2 * 64);
    for (size_t i = 0; i < h0.size(); ++i) h0[i] = 0.01f * static_cast<float>(i % 13);
    absl::StatusOr<std::vector<Value>> outs = s->RunValues({Value(ScalarI64(5)), Value(TensorF32({2, 64}, h0))});
    ASSERT_TRUE(outs.ok()) << outs.status();
    ASSERT_EQ(outs->size(), 1u);
    ASSERT_EQ((*outs)[0].tensor().shape(), (std::vector<int64_t>{5, 2, 64}));
    histories.push_back(ToVector((*outs)[0].tensor().view()));
  }
  EXPECT_EQ(histories[1], histories[0]);
  EXPECT_EQ(histories[2], histories[0]);
}

TEST(SequenceTest, ModelBuilderRoundTripsValueKinds) {
  ModelBuilder b;
  b.AddInput("s", ValueKind::kOptionalSequence, DType::kI32, std::vector<Dim>{3});
  b.AddOp("OptionalGetElement", {"s"}, {"seq"});
  b.AddOp("SequenceLength", {"seq"}, {"n"});
  b.AddOutput("n");
  std::shared_ptr<const Model> model = LoadOrDie(b.Finish());
  ASSERT_EQ(model->inputs().size(), 1u);
  EXPECT_EQ(model->inputs()[0].kind, ValueKind::kOptionalSequence);
  EXPECT_EQ(model->inputs()[0].dtype, DType::kI32);
  ASSERT_EQ(model->inputs()[0].shape.size(), 1u);
  EXPECT_EQ(model->inputs()[0].shape[0].value, 3);
  std::unique_ptr<Session> s = CpuSession(model);
  Tensor item = Tensor::Create(DType::kI32, {3}).value();
  absl::StatusOr<std::vector<Value>> outs =
      s->RunValues({Value::Some(Value::Sequence(DType::kI32, {item, item, item}))});
  ASSERT_TRUE(outs.ok()) << outs.status();
  EXPECT_EQ(*(*outs)[0].tensor().as<int64_t>(), 3);
  outs = s->RunValues({Value::None(ValueKind::kOptionalSequence, DType::kI32)});
  ASSERT_FALSE(outs.ok());
  EXPECT_THAT(outs.status().message(), HasSubstr("the optional(seq(i32)) input is absent"));
}

}  // namespace
}  // namespace grove
