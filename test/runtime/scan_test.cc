// Scan through the public API: a running sum over a sequence axis, forward
// and reverse, scan axes other than 0, against sums computed here; and its
// errors.
#include <vector>

#include "gmock/gmock.h"
#include "grove/grove.h"
#include "gtest/gtest.h"
#include "test/model_test_util.h"

namespace grove {
namespace {

using ::testing::HasSubstr;
using testing::LoadOrDie;
using testing::TensorF32;
using testing::ToVector;

// state s f32[c]; scan input x f32[c, t] scanned along axis 1 in
// `in_direction`; the body adds each slice to s and emits s (stacked along
// output axis `out_axis`, in `out_direction`) and s * slice.
std::shared_ptr<const Model> RunningSum(int64_t in_direction, int64_t out_axis, int64_t out_direction) {
  ModelBuilder b;
  b.AddSymbol("c", 1, 8);
  b.AddSymbol("t", 1, 64);
  b.AddInput("s0", DType::kF32, {"c"});
  b.AddInput("x", DType::kF32, {"c", "t"});
  const int body = b.AddSubgraph("step");
  b.AddInput("s", DType::kF32, {});
  b.AddInput("slice", DType::kF32, {});
  b.AddOp("Add", {"s", "slice"}, {"s_next"});
  b.AddOp("Mul", {"s", "slice"}, {"prod"});
  b.AddOutput("s_next");
  b.AddOutput("s_next");
  b.AddOutput("prod");
  b.SetSubgraph(0);
  b.AddOp("Scan", {"s0", "x"}, {"total", "sums", "prods"},
          {{"body", SubgraphRef{body}},
           {"num_scan_inputs", int64_t{1}},
           {"scan_input_axes", std::vector<int64_t>{1}},
           {"scan_input_directions", std::vector<int64_t>{in_direction}},
           {"scan_output_axes", std::vector<int64_t>{out_axis, 0}},
           {"scan_output_directions", std::vector<int64_t>{out_direction, 0}}});
  b.AddOutput("total");
  b.AddOutput("sums");
  b.AddOutput("prods");
  return LoadOrDie(b.Finish());
}

struct Expected {
  std::vector<float> total, sums, prods;  // sums as [t, c] or [c, t] by out_axis
};

Expected Reference(const std::vector<float>& s0, const std::vector<float>& x, int64_t c, int64_t t, bool reverse_in,
                   int64_t out_axis, bool reverse_out) {
  std::vector<float> s = s0;
  std::vector<std::vector<float>> sums, prods;
  for (int64_t step = 0; step < t; ++step) {
    const int64_t at = reverse_in ? t - 1 - step : step;
    std::vector<float> prod(c);
    for (int64_t i = 0; i < c; ++i) {
      prod[i] = s[i] * x[i * t + at];
      s[i] += x[i * t + at];
    }
    sums.push_back(s);
    prods.push_back(prod);
  }
  Expected e;
  e.total = s;
  for (int64_t step = 0; step < t; ++step) {
    for (float v : prods[step]) e.prods.push_back(v);
  }
  e.sums.resize(c * t);
  for (int64_t step = 0; step < t; ++step) {
    const int64_t slot = reverse_out ? t - 1 - step : step;
    for (int64_t i = 0; i < c; ++i) {
      e.sums[out_axis == 0 ? slot * c + i : i * t + slot] = sums[step][i];
    }
  }
  return e;
}

TEST(ScanTest, RunningSumInEveryDirection) {
  const int64_t c = 3, t = 4;
  const std::vector<float> s0 = {1, -1, 0.5f};
  std::vector<float> x(c * t);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 5) - 1.5f;
  for (int64_t in_dir : {0, 1}) {
    for (int64_t out_axis : {0, 1, -1}) {
      for (int64_t out_dir : {0, 1}) {
        SCOPED_TRACE(::testing::PrintToString(std::vector<int64_t>{in_dir, out_axis, out_dir}));
        SessionOptions options;
        options.device = Device::kCpu;
        std::unique_ptr<Session> s = Session::Create(RunningSum(in_dir, out_axis, out_dir), options).value();
        Tensor s0_t = TensorF32({c}, s0), x_t = TensorF32({c, t}, x);
        absl::StatusOr<std::vector<TensorView>> outs = s->Run({s0_t.view(), x_t.view()});
        ASSERT_TRUE(outs.ok()) << outs.status();
        const int64_t axis = out_axis < 0 ? out_axis + 2 : out_axis;
        const Expected want = Reference(s0, x, c, t, in_dir == 1, axis, out_dir == 1);
        EXPECT_EQ(ToVector((*outs)[0]), want.total);
        EXPECT_EQ((*outs)[1].shape, (axis == 0 ? std::vector<int64_t>{t, c} : std::vector<int64_t>{c, t}));
        EXPECT_EQ(ToVector((*outs)[1]), want.sums);
        EXPECT_EQ((*outs)[2].shape, (std::vector<int64_t>{t, c}));
        EXPECT_EQ(ToVector((*outs)[2]), want.prods);
      }
    }
  }
}

TEST(ScanTest, ScanInputsMustAgreeInLength) {
  ModelBuilder b;
  b.AddInput("a", DType::kF32, {2, 3});
  b.AddInput("b", DType::kF32, {2, 4});
  const int body = b.AddSubgraph("step");
  b.AddInput("u", DType::kF32, {});
  b.AddInput("v", DType::kF32, {});
  b.AddOp("Add", {"u", "v"}, {"w"});
  b.AddOutput("w");
  b.SetSubgraph(0);
  b.AddOp("Scan", {"a", "b"}, {"ws"},
          {{"body", SubgraphRef{body}}, {"num_scan_inputs", int64_t{2}},
           {"scan_input_axes", std::vector<int64_t>{1, 1}}});
  b.AddOutput("ws");
  absl::StatusOr<std::vector<uint8_t>> bytes = b.Finish();
  ASSERT_TRUE(bytes.ok());
  absl::StatusOr<std::shared_ptr<const Model>> model = Model::LoadFromBuffer(*bytes);
  // The lengths are static, so the load-time plan already finds it.
  ASSERT_FALSE(model.ok());
  EXPECT_THAT(model.status().message(), HasSubstr("scan input 1 has 4 positions along its axis, input 0 has 3"));
}

TEST(ScanTest, AttributeCountsAreChecked) {
  ModelBuilder b;
  b.AddInput("x", DType::kF32, {2, 3});
  const int body = b.AddSubgraph("step");
  b.AddInput("v", DType::kF32, {});
  b.AddOp("Neg", {"v"}, {"w"});
  b.AddOutput("w");
  b.SetSubgraph(0);
  b.AddOp("Scan", {"x"}, {"ws"},
          {{"body", SubgraphRef{body}}, {"num_scan_inputs", int64_t{1}},
           {"scan_output_axes", std::vector<int64_t>{0, 1}}});
  b.AddOutput("ws");
  absl::StatusOr<std::shared_ptr<const Model>> model = Model::LoadFromBuffer(b.Finish().value());
  ASSERT_FALSE(model.ok());
  EXPECT_THAT(model.status().message(), HasSubstr("scan_output_axes and scan_output_directions need 1 values each"));
}

}  // namespace
}  // namespace grove
