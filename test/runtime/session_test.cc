// End-to-end tests through the C++ API: the demo models against naive
// references, binding errors, the plan cache, control flow, threads.
#include <cmath>
#include <thread>

#include "gmock/gmock.h"
#include "grove/grove.h"
#include "gtest/gtest.h"
#include "lib/runtime/model_impl.h"
#include "models/demo_models.h"
#include "test/model_test_util.h"

namespace grove {
namespace {

using ::testing::HasSubstr;
using testing::LoadOrDie;
using testing::MatMulRef;
using testing::RandomF32;
using testing::ToVector;
using testing::WeightF32;

void ExpectNear(const std::vector<float>& got, const std::vector<float>& want, float tol) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], tol * (1.0f + std::fabs(want[i]))) << "element " << i;
  }
}

void AddBias(std::vector<float>& x, const std::vector<float>& b) {
  for (size_t i = 0; i < x.size(); ++i) x[i] += b[i % b.size()];
}

void SoftmaxRows(std::vector<float>& x, int64_t n) {
  for (size_t r = 0; r < x.size() / n; ++r) {
    float* row = x.data() + r * n;
    float mx = row[0], sum = 0;
    for (int64_t j = 0; j < n; ++j) mx = std::max(mx, row[j]);
    for (int64_t j = 0; j < n; ++j) sum += (row[j] = std::exp(row[j] - mx));
    for (int64_t j = 0; j < n; ++j) row[j] /= sum;
  }
}

std::vector<float> MlpRef(const Model& m, const std::vector<float>& x, int64_t batch) {
  std::vector<float> h = MatMulRef(x, WeightF32(m, "fc1.w"), batch, 16, 32);
  AddBias(h, WeightF32(m, "fc1.b"));
  for (float& v : h) v = std::max(v, 0.0f);
  std::vector<float> y = MatMulRef(h, WeightF32(m, "fc2.w"), batch, 32, 4);
  AddBias(y, WeightF32(m, "fc2.b"));
  SoftmaxRows(y, 4);
  return y;
}

std::vector<float> TransformerRef(const Model& m, const std::vector<float>& x, int64_t batch, int64_t seq) {
  const int64_t d = 32;
  std::vector<float> out;
  for (int64_t b = 0; b < batch; ++b) {
    std::vector<float> xb(x.begin() + b * seq * d, x.begin() + (b + 1) * seq * d);
    auto q = MatMulRef(xb, WeightF32(m, "wq"), seq, d, d);
    auto k = MatMulRef(xb, WeightF32(m, "wk"), seq, d, d);
    auto v = MatMulRef(xb, WeightF32(m, "wv"), seq, d, d);
    std::vector<float> scores(seq * seq);
    for (int64_t i = 0; i < seq; ++i) {
      for (int64_t j = 0; j < seq; ++j) {
        float s = 0;
        for (int64_t p = 0; p < d; ++p) s += q[i * d + p] * k[j * d + p];
        scores[i * seq + j] = s / std::sqrt(float(d));
      }
    }
    SoftmaxRows(scores, seq);
    auto ctx = MatMulRef(scores, v, seq, seq, d);
    auto proj = MatMulRef(ctx, WeightF32(m, "wo"), seq, d, d);
    std::vector<float> norm(seq * d);
    for (int64_t i = 0; i < seq; ++i) {
      float mean = 0;
      for (int64_t p = 0; p < d; ++p) mean += xb[i * d + p] + proj[i * d + p];
      mean /= d;
      for (int64_t p = 0; p < d; ++p) norm[i * d + p] = xb[i * d + p] + proj[i * d + p] - mean;
    }
    auto h = MatMulRef(norm, WeightF32(m, "ff1.w"), seq, d, 64);
    AddBias(h, WeightF32(m, "ff1.b"));
    for (float& e : h) e = std::max(e, 0.0f);
    auto f = MatMulRef(h, WeightF32(m, "ff2.w"), seq, 64, d);
    AddBias(f, WeightF32(m, "ff2.b"));
    for (int64_t i = 0; i < seq * d; ++i) out.push_back(norm[i] + f[i]);
  }
  return out;
}

std::unique_ptr<Session> NewSession(std::shared_ptr<const Model> m, SessionOptions o = {}) {
  auto s = Session::Create(std::move(m), o);
  EXPECT_TRUE(s.ok()) << s.status();
  return std::move(*s);
}

TEST(SessionTest, MlpMatchesReferenceAtManyBatchSizes) {
  auto model = LoadOrDie(demo::BuildMlp());
  auto session = NewSession(model);
  for (int64_t batch : {1, 3, 7, 64}) {
    std::vector<float> x = RandomF32(batch * 16, static_cast<uint32_t>(batch));
    auto out = session->Run({TensorView(DType::kF32, {batch, 16}, x.data())});
    ASSERT_TRUE(out.ok()) << out.status();
    ASSERT_EQ(out->size(), 1u);
    EXPECT_EQ((*out)[0].shape, (std::vector<int64_t>{batch, 4}));
    ExpectNear(ToVector((*out)[0]), MlpRef(*model, x, batch), 1e-5f);
  }
}

// With symbolic inputs the outputs are described (symbolic shape inference)
// on first use of outputs() or Summary(), once: loading, making a session
// and running it (Run, RunInto, RunValues, their errors) need only the
// outputs' names.
TEST(ModelOutputsTest, DescribedOnFirstUseNotByLoadSessionsOrRuns) {
  auto model = LoadOrDie(demo::BuildMlp());
  EXPECT_FALSE(model->impl().outputs_described());
  auto session = NewSession(model);
  std::vector<float> x = RandomF32(3 * 16, 3);
  const TensorView in(DType::kF32, {3, 16}, x.data());
  auto out = session->Run({in});
  ASSERT_TRUE(out.ok()) << out.status();
  std::vector<float> y(12), wrong(15);
  ASSERT_TRUE(session->RunInto({in}, {TensorView(DType::kF32, {3, 4}, y.data())}).ok());
  EXPECT_THAT(std::string(session->RunInto({in}, {}).message()), HasSubstr("the model has 1 outputs, given 0 buffers"));
  EXPECT_THAT(std::string(session->RunInto({in}, {TensorView(DType::kF32, {3, 5}, wrong.data())}).message()),
              HasSubstr("output 'y' is f32"));
  std::vector<Value> values;
  values.emplace_back(Tensor::CopyOf(in).value());
  ASSERT_TRUE(session->RunValues(values).ok());
  EXPECT_EQ(model->output_names(), std::vector<std::string>{"y"});  // the public way to the names
  EXPECT_FALSE(model->impl().outputs_described());

  const std::vector<TensorInfo>& outputs = model->outputs();
  EXPECT_TRUE(model->impl().outputs_described());
  EXPECT_EQ(&model->outputs(), &outputs);
  ASSERT_EQ(outputs.size(), 1u);
  EXPECT_EQ(outputs[0].name, "y");
  EXPECT_EQ(outputs[0].dtype, DType::kF32);
  EXPECT_EQ(outputs[0].kind, ValueKind::kTensor);
  ASSERT_EQ(outputs[0].shape.size(), 2u);
  EXPECT_TRUE(outputs[0].shape[0].is_symbolic());
  EXPECT_EQ(outputs[0].shape[0].symbol, "batch");
  EXPECT_EQ(outputs[0].shape[1].value, 4);
  EXPECT_EQ(model->Summary().shape_inference_note, "");
}

// Fixed input shapes are planned at load (a failure there is a load error),
// which describes the outputs too.
TEST(ModelOutputsTest, FixedInputsAreDescribedAtLoad) {
  ModelBuilder b;
  b.AddInput("x", DType::kF32, {2, 3});
  b.AddOp("Relu", {"x"}, {"y"});
  b.AddOutput("y");
  auto model = LoadOrDie(b.Finish());
  EXPECT_TRUE(model->impl().outputs_described());
  ASSERT_EQ(model->outputs().size(), 1u);
  ASSERT_EQ(model->outputs()[0].shape.size(), 2u);
  EXPECT_EQ(model->outputs()[0].shape[1].value, 3);
}

TEST(SessionTest, TransformerBlockMatchesReference) {
  auto model = LoadOrDie(demo::BuildTransformerBlock());
  auto session = NewSession(model);
  for (auto [batch, seq] : std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {2, 5}, {3, 17}, {1, 64}}) {
    std::vector<float> x = RandomF32(batch * seq * 32, static_cast<uint32_t>(batch * 100 + seq));
    auto out = session->Run({TensorView(DType::kF32, {batch, seq, 32}, x.data())});
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ((*out)[0].shape, (std::vector<int64_t>{batch, seq, 32}));
    ExpectNear(ToVector((*out)[0]), TransformerRef(*model, x, batch, seq), 1e-4f);
  }
}

TEST(SessionTest, ShapeArithmeticIsFoldedAtPlanTime) {
  auto model = LoadOrDie(demo::BuildTransformerBlock());
  auto session = NewSession(model);
  auto report = session->Reshape({{2, 9, 32}});
  ASSERT_TRUE(report.ok()) << report.status();
  // Shape, Gather, 2 Concats fold; both Reshapes' shape inputs are then known.
  EXPECT_EQ(report->num_folded_tensors, 4);
  EXPECT_EQ(report->num_dynamic_tensors, 0);
}

TEST(SessionTest, PlanCacheReusesPlansAndReplansNewShapes) {
  auto model = LoadOrDie(demo::BuildMlp());
  auto session = NewSession(model);
  std::vector<float> x3 = RandomF32(3 * 16, 1), x5 = RandomF32(5 * 16, 2);
  TensorView in3(DType::kF32, {3, 16}, x3.data()), in5(DType::kF32, {5, 16}, x5.data());
  auto first = session->Run({in3});
  ASSERT_TRUE(first.ok());
  const std::vector<float> first_values = ToVector((*first)[0]);
  EXPECT_EQ(session->stats().plans_created, 1);
  EXPECT_EQ(session->stats().plan_cache_hits, 0);
  ASSERT_TRUE(session->Run({in3}).ok());
  EXPECT_EQ(session->stats().plans_created, 1);
  EXPECT_EQ(session->stats().plan_cache_hits, 1);
  ASSERT_TRUE(session->Run({in5}).ok());
  EXPECT_EQ(session->stats().plans_created, 2);
  auto again = session->Run({in3});
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(session->stats().plans_created, 2);
  EXPECT_EQ(session->stats().plan_cache_hits, 2);
  EXPECT_EQ(ToVector((*again)[0]), first_values);  // bit for bit
  EXPECT_EQ(session->stats().runs, 4);
}

TEST(SessionTest, LeastRecentlyUsedPlansAreEvicted) {
  auto model = LoadOrDie(demo::BuildMlp());
  SessionOptions opts;
  opts.max_cached_plans = 2;
  auto session = NewSession(model, opts);
  std::vector<std::vector<float>> firsts;
  for (int64_t b : {1, 2, 3, 1}) {
    std::vector<float> x = RandomF32(b * 16, 9);
    auto out = session->Run({TensorView(DType::kF32, {b, 16}, x.data())});
    ASSERT_TRUE(out.ok());
    ExpectNear(ToVector((*out)[0]), MlpRef(*model, x, b), 1e-5f);
  }
  EXPECT_EQ(session->stats().plans_created, 4);
  EXPECT_EQ(session->stats().plans_evicted, 2);
}

// A Loop whose carried tensor grows one row per trip needs a body plan per
// length. With more lengths than the cache holds, least-recently-used order
// would evict the plan each next trip needs, every run; the session instead
// gives up the most recently used one, so a repeated run replans only what
// does not fit.
TEST(SessionTest, PlansOfALoopLongerThanTheCacheMostlySurvive) {
  auto model = LoadOrDie(demo::BuildStepHistory(demo::History::kConcat));
  SessionOptions opts;
  opts.max_cached_plans = 8;
  auto session = NewSession(model, opts);
  Tensor steps = Tensor::Create(DType::kI64, {}).value();
  *steps.as<int64_t>() = 12;
  std::vector<float> h0 = RandomF32(2 * 64, 3);
  std::vector<float> first;
  for (int run = 0; run < 4; ++run) {
    const int64_t before = session->stats().plans_created;
    auto out = session->Run({steps.view(), TensorView(DType::kF32, {2, 64}, h0.data())});
    ASSERT_TRUE(out.ok()) << out.status();
    ASSERT_EQ((*out)[0].shape, (std::vector<int64_t>{12, 2, 64}));
    if (run == 0) {
      first = ToVector((*out)[0]);
      EXPECT_GE(session->stats().plans_created, 12);  // one per length, and main
    } else {
      EXPECT_EQ(ToVector((*out)[0]), first);
      // 13 plans (main and 12 lengths) in 8 places: 8 - 1 stay, 13 - 7 are
      // made again (least-recently-used order would remake all 13).
      EXPECT_LE(session->stats().plans_created - before, 13 - 8 + 1) << "run " << run;
    }
  }
}

TEST(SessionTest, BindingErrorsNameTheTensorAndDim) {
  auto model = LoadOrDie(demo::BuildMlp());
  auto session = NewSession(model);
  std::vector<float> x(2000 * 16);
  std::vector<double> xd(16);
  auto run = [&](std::vector<TensorView> in) { return session->Run(in).status(); };
  EXPECT_THAT(std::string(run({}).message()), HasSubstr("takes 1 inputs (x), given 0"));
  EXPECT_THAT(std::string(run({TensorView(DType::kF64, {1, 16}, xd.data())}).message()),
              HasSubstr("input 'x' (f32[batch, 16]): given dtype f64"));
  EXPECT_THAT(std::string(run({TensorView(DType::kF32, {16}, x.data())}).message()), HasSubstr("given rank 1"));
  EXPECT_THAT(std::string(run({TensorView(DType::kF32, {2, 15}, x.data())}).message()),
              HasSubstr("dim 1 is 15, wants 16"));
  EXPECT_THAT(std::string(run({TensorView(DType::kF32, {2000, 16}, x.data())}).message()),
              HasSubstr("dim 0 (batch) is 2000, outside batch's range 1..1024"));
  EXPECT_THAT(std::string(run({TensorView(DType::kF32, {0, 16}, x.data())}).message()), HasSubstr("outside"));
  EXPECT_THAT(std::string(run({TensorView(DType::kF32, {2, 16}, static_cast<void*>(nullptr))}).message()),
              HasSubstr("data is null"));
  // Still usable.
  EXPECT_TRUE(session->Run({TensorView(DType::kF32, {2, 16}, x.data())}).ok());
}

TEST(SessionTest, SymbolsMustAgreeAcrossInputs) {
  ModelBuilder b;
  b.AddSymbol("n", 1, 10);
  b.AddInput("a", DType::kF32, {"n"});
  b.AddInput("b", DType::kF32, {"n"});
  b.AddOp("Add", {"a", "b"}, {"y"});
  b.AddOutput("y");
  auto session = NewSession(LoadOrDie(b.Finish()));
  std::vector<float> a(4), c(5);
  auto s = session->Run({TensorView(DType::kF32, {4}, a.data()), TensorView(DType::kF32, {5}, c.data())});
  EXPECT_THAT(std::string(s.status().message()), HasSubstr("dim 0 (n) is 5 but input 'a' gives n = 4"));
}

TEST(SessionTest, ZeroSizeAndScalarTensorsRun) {
  ModelBuilder b;
  b.AddSymbol("n", 0, 10);
  b.AddInput("x", DType::kF32, {"n", 4});
  b.AddInput("s", DType::kF32, {});
  b.AddOp("Relu", {"x"}, {"r"});
  b.AddOp("Add", {"r", "s"}, {"y"});
  b.AddOp("Mul", {"s", "s"}, {"sq"});
  b.AddOutput("y");
  b.AddOutput("sq");
  auto session = NewSession(LoadOrDie(b.Finish()));
  float s = 3.0f;
  auto out = session->Run({TensorView(DType::kF32, {0, 4}, static_cast<void*>(nullptr)),
                           TensorView(DType::kF32, {}, &s)});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].shape, (std::vector<int64_t>{0, 4}));
  EXPECT_TRUE((*out)[1].shape.empty());
  EXPECT_EQ(*(*out)[1].as<float>(), 9.0f);
}

TEST(SessionTest, RunIntoWritesCallerBuffers) {
  auto model = LoadOrDie(demo::BuildMlp());
  auto session = NewSession(model);
  std::vector<float> x = RandomF32(2 * 16, 4), y(2 * 4, -1.0f);
  TensorView in(DType::kF32, {2, 16}, x.data());
  ASSERT_TRUE(session->RunInto({in}, {TensorView(DType::kF32, {2, 4}, y.data())}).ok());
  ExpectNear(y, MlpRef(*model, x, 2), 1e-5f);
  auto bad = session->RunInto({in}, {TensorView(DType::kF32, {3, 4}, y.data())});
  EXPECT_THAT(std::string(bad.message()), HasSubstr("caller's buffer is f32[3, 4]"));
}

TEST(SessionTest, DevicesWithoutCuda) {
  auto model = LoadOrDie(demo::BuildMlp());
  SessionOptions cuda;
  cuda.device = Device::kCuda;
  EXPECT_EQ(Session::Create(model, cuda).status().code(), absl::StatusCode::kFailedPrecondition);
  auto session = NewSession(model);  // kAuto
  EXPECT_EQ(session->device(), Device::kCpu);
  EXPECT_FALSE(Session::Create(nullptr, {}).ok());
}

TEST(ControlFlowTest, EarlyExitTakesBothBranches) {
  auto model = LoadOrDie(demo::BuildEarlyExit());
  auto session = NewSession(model);
  for (int64_t batch : {1, 4}) {
    std::vector<float> pos(batch * 8), neg(batch * 8);
    for (int64_t i = 0; i < batch * 8; ++i) {
      pos[i] = 0.1f * float(i % 5 + 1);
      neg[i] = -pos[i];
    }
    auto deep = session->Run({TensorView(DType::kF32, {batch, 8}, pos.data())});
    ASSERT_TRUE(deep.ok()) << deep.status();
    EXPECT_EQ((*deep)[0].shape, (std::vector<int64_t>{batch, 8}));
    std::vector<float> h = MatMulRef(pos, WeightF32(*model, "deep1"), batch, 8, 8);
    for (float& v : h) v = std::max(v, 0.0f);
    ExpectNear(ToVector((*deep)[0]), MatMulRef(h, WeightF32(*model, "deep2"), batch, 8, 8), 1e-5f);

    auto shallow = session->Run({TensorView(DType::kF32, {batch, 8}, neg.data())});
    ASSERT_TRUE(shallow.ok()) << shallow.status();
    EXPECT_EQ((*shallow)[0].shape, (std::vector<int64_t>{batch, 3}));
    ExpectNear(ToVector((*shallow)[0]), MatMulRef(neg, WeightF32(*model, "shallow"), batch, 8, 3), 1e-5f);
  }
  // The output width depends on data: the plan cannot know it.
  std::vector<std::vector<int64_t>> shapes;
  auto report = session->Reshape({{4, 8}}, &shapes);
  ASSERT_TRUE(report.ok());
  EXPECT_EQ(shapes[0], (std::vector<int64_t>{4, -1}));
}

struct LoopRef {
  std::vector<float> final_value;
  std::vector<float> sums;
};

LoopRef RunLoopRef(std::vector<float> v, int64_t trips, float limit) {
  LoopRef r;
  for (int64_t i = 0; i < trips; ++i) {
    float sum = 0;
    for (float& e : v) sum += (e = e * 2.0f + float(i));
    r.sums.push_back(sum);
    if (!(sum < limit)) break;
  }
  r.final_value = v;
  return r;
}

TEST(ControlFlowTest, LoopFollowsTripCountAndCondition) {
  auto model = LoadOrDie(demo::BuildLoop());
  auto session = NewSession(model);
  for (auto [n, trips, limit] : std::vector<std::tuple<int64_t, int64_t, float>>{
           {4, 5, 1e9f}, {4, 10, 100.0f}, {7, 0, 1e9f}, {1, 3, -1.0f}, {16, 12, 1e6f}}) {
    std::vector<float> x = RandomF32(n, static_cast<uint32_t>(n + trips));
    auto out = session->Run({TensorView(DType::kI64, {}, &trips), TensorView(DType::kF32, {n}, x.data()),
                             TensorView(DType::kF32, {}, &limit)});
    ASSERT_TRUE(out.ok()) << out.status();
    LoopRef ref = RunLoopRef(x, trips, limit);
    EXPECT_EQ((*out)[0].shape, (std::vector<int64_t>{n}));
    ExpectNear(ToVector((*out)[0]), ref.final_value, 1e-5f);
    EXPECT_EQ((*out)[1].shape, (std::vector<int64_t>{static_cast<int64_t>(ref.sums.size())}));
    ExpectNear(ToVector((*out)[1]), ref.sums, 1e-5f);
  }
  // The body is planned once per shape and then hit every iteration.
  EXPECT_GT(session->stats().plan_cache_hits, 10);
}

TEST(ControlFlowTest, LoopBodyWithGrowingShapes) {
  // Each iteration appends one element: the carried value's shape changes.
  ModelBuilder g;
  g.AddSymbol("len", 1, 100);
  g.AddInput("m", DType::kI64, {});
  g.AddInput("x", DType::kF32, {1});
  g.AddWeight("one", DType::kF32, {1}, std::vector<float>{1.0f});
  const int gb = g.AddSubgraph("grow");
  g.AddInput("i", DType::kI64, {});
  g.AddInput("c", DType::kBool, {});
  g.AddInput("v", DType::kF32, {"len"});
  g.AddOp("Identity", {"c"}, {"c_out"});
  g.AddOp("Concat", {"v", "one"}, {"v_next"}, {{"axis", int64_t{0}}});
  g.AddOutput("c_out");
  g.AddOutput("v_next");
  g.SetSubgraph(0);
  g.AddOp("Loop", {"m", "", "x"}, {"y"}, {{"body", SubgraphRef{gb}}});
  g.AddOutput("y");
  auto session = NewSession(LoadOrDie(g.Finish()));
  int64_t m = 6;
  float x = 5.0f;
  auto out = session->Run({TensorView(DType::kI64, {}, &m), TensorView(DType::kF32, {1}, &x)});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(ToVector((*out)[0]), (std::vector<float>{5, 1, 1, 1, 1, 1, 1}));
}

TEST(MemoryPlanTest, ArenaWithinFivePercentOfLowerBound) {
  struct Case {
    absl::StatusOr<std::vector<uint8_t>> (*build)();
    std::vector<std::vector<int64_t>> shapes;
  };
  const std::vector<Case> cases = {
      {demo::BuildMlp, {{1, 16}}}, {demo::BuildMlp, {{512, 16}}},
      {demo::BuildTransformerBlock, {{1, 7, 32}}}, {demo::BuildTransformerBlock, {{4, 128, 32}}},
      {demo::BuildEarlyExit, {{16, 8}}}, {demo::BuildLoop, {{}, {64}, {}}},
      {[] { return demo::BuildChain(200); }, {{32, 64}}},
  };
  for (const Case& c : cases) {
    auto session = NewSession(LoadOrDie(c.build()));
    auto report = session->Reshape(c.shapes);
    ASSERT_TRUE(report.ok()) << report.status();
    EXPECT_LE(double(report->arena_bytes), 1.05 * double(report->lower_bound_bytes))
        << "arena " << report->arena_bytes << " lower bound " << report->lower_bound_bytes;
    if (report->arena_bytes > 0) EXPECT_FALSE(report->peak_tensors.empty());
  }
}

TEST(ThreadTest, FourSessionsShareOneModel) {
  auto model = LoadOrDie(demo::BuildTransformerBlock());
  const std::vector<std::pair<int64_t, int64_t>> shapes = {{1, 3}, {2, 8}, {1, 16}, {3, 5}};
  // Serial answers first.
  std::vector<std::vector<float>> inputs, serial;
  {
    auto session = NewSession(model);
    for (size_t i = 0; i < shapes.size(); ++i) {
      auto [b, s] = shapes[i];
      inputs.push_back(RandomF32(b * s * 32, static_cast<uint32_t>(i)));
      auto out = session->Run({TensorView(DType::kF32, {b, s, 32}, inputs[i].data())});
      ASSERT_TRUE(out.ok());
      serial.push_back(ToVector((*out)[0]));
    }
  }
  std::vector<int> mismatches(4, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      auto session = Session::Create(model, {});
      if (!session.ok()) {
        mismatches[t] = 1000;
        return;
      }
      for (int rep = 0; rep < 20; ++rep) {
        const size_t i = (t + rep) % shapes.size();
        auto [b, s] = shapes[i];
        auto out = (*session)->Run({TensorView(DType::kF32, {b, s, 32}, inputs[i].data())});
        if (!out.ok() || ToVector((*out)[0]) != serial[i]) ++mismatches[t];
      }
    });
  }
  for (std::thread& th : threads) th.join();
  EXPECT_EQ(mismatches, (std::vector<int>{0, 0, 0, 0}));
}

}  // namespace
}  // namespace grove

namespace grove {
namespace {

// A step's workspace is planned in the arena beside the values; when it is
// live at the memory peak, Reshape's report names it (it used to index the
// values with it: found by the fuzz regressions' AveragePool seed).
TEST(SessionReshapeTest, WorkspacesAtThePeakAreReported) {
  ModelBuilder b;
  b.AddInput("x", DType::kF32, {1, 1, 4, 4});
  b.AddOp("AveragePool", {"x"}, {"y"}, {{"kernel_shape", AttrValue(std::vector<int64_t>{2, 2})}});
  b.AddOutput("y");
  std::shared_ptr<const Model> model = LoadOrDie(b.Finish());
  SessionOptions options;
  options.device = Device::kCpu;
  std::unique_ptr<Session> s = Session::Create(model, options).value();
  absl::StatusOr<MemoryReport> report = s->Reshape({{1, 1, 4, 4}});
  ASSERT_TRUE(report.ok()) << report.status();
  // The peak is the pool's step: its output, and its workspace if the
  // kernel declares one, which is named after the step, not a value.
  bool named = false;
  for (const PeakTensor& t : report->peak_tensors) {
    const bool workspace = t.name.find("workspace of ") == 0 && t.name.find("(AveragePool)") != std::string::npos;
    EXPECT_TRUE(t.name == "y" || workspace) << t.name;
    named |= workspace;
  }
  EXPECT_TRUE(named) << "the pool's workspace is live at its step, the peak";
  std::vector<float> x(16, 1.0f);
  absl::StatusOr<std::vector<TensorView>> y = s->Run({TensorView(DType::kF32, {1, 1, 4, 4}, x.data())});
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ((*y)[0].shape, (std::vector<int64_t>{1, 1, 3, 3}));
}

}  // namespace
}  // namespace grove
