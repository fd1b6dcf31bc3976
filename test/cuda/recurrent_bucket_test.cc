// LSTM, GRU and RNN models in a session with CUDA graphs and shape buckets on
// the emulated device: run at several sequence lengths and batches inside
// one bucket, then at the same shapes again. The recurrent step serves its
// whole bucket (one launch per direction that reads the actual length,
// batch and sequence_lens from its refreshed parameters), so the first pass
// captures one graph, refreshed for every other shape, the second captures
// nothing, nothing launches outside the graph and no segment is pinned to
// exact shapes, sequence_lens a model input included (checked on the
// device: a bad length fails the run with the CPU's message). Every run
// equals, bit for bit, a session with graphs off (step-by-step launches)
// and, within the recurrent tests' bound, the CPU.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "grove/grove.h"
#include "gtest/gtest.h"
#include "lib/backends/backends.h"
#include "lib/backends/cuda/emulated_device.h"
#include "test/op_test_util.h"
#include "test/recurrent_test_util.h"

namespace grove {
namespace {

using testing::RecurrentPattern;
using testing::RecurrentSpec;

struct BucketCase : RecurrentSpec {
  // sequence_lens: 0 none; 1 a weight (so batch stays fixed), each entry <=
  // the shortest seq; 2 a model input "lens" (checked on the device).
  int lengths = 0;
};

std::vector<uint8_t> Bytes(const std::vector<float>& v) {
  std::vector<uint8_t> b(v.size() * sizeof(float));
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

// The model of `c`: x (and h0, c0 when asked) inputs over symbols seq and
// batch (batch fixed at c.batch with sequence_lens a weight), W, R, B
// weights; every output of the op is a model output.
std::shared_ptr<const Model> BuildModel(const BucketCase& c) {
  const int64_t g = c.gates(), h = c.hidden, nd = c.dirs();
  ModelBuilder b;
  b.AddSymbol("seq", 1, 64);
  b.AddSymbol("batch", 1, 16);
  const Dim batch = c.lengths == 1 ? Dim(c.batch) : Dim("batch");
  b.AddInput("x", DType::kF32, c.layout == 0 ? std::vector<Dim>{"seq", batch, c.input}
                                              : std::vector<Dim>{batch, "seq", c.input});
  const std::vector<Dim> state = c.layout == 0 ? std::vector<Dim>{nd, batch, h} : std::vector<Dim>{batch, nd, h};
  b.AddWeight("w", DType::kF32, {nd, g * h, c.input}, Bytes(RecurrentPattern(nd * g * h * c.input, 2, 0.6f)));
  b.AddWeight("r", DType::kF32, {nd, g * h, h}, Bytes(RecurrentPattern(nd * g * h * h, 3, 0.6f)));
  b.AddWeight("b", DType::kF32, {nd, 2 * g * h}, Bytes(RecurrentPattern(nd * 2 * g * h, 4, 0.5f)));
  std::vector<std::string> in = {"x", "w", "r", "b", "", "", ""};
  if (c.lengths == 2) {
    b.AddInput("lens", DType::kI32, {batch});
    in[4] = "lens";
  }
  if (c.lengths == 1) {
    std::vector<int32_t> lens;
    for (int64_t i = 0; i < c.batch; ++i) lens.push_back(static_cast<int32_t>(1 + i % 3));
    b.AddWeight("lens", DType::kI32, {c.batch}, lens);
    in[4] = "lens";
  }
  if (c.initial_h) {
    b.AddInput("h0", DType::kF32, state);
    in[5] = "h0";
  }
  if (c.initial_c) {
    b.AddInput("c0", DType::kF32, state);
    in[6] = "c0";
  }
  if (c.op != "LSTM") in.pop_back();
  while (in.back().empty()) in.pop_back();
  std::vector<std::string> out = {"y", "y_h"};
  if (c.op == "LSTM") out.push_back("y_c");
  b.AddOp(c.op, in, out, testing::RecurrentAttrs(c));
  for (const std::string& o : out) b.AddOutput(o);
  absl::StatusOr<std::vector<uint8_t>> bytes = b.Finish();
  EXPECT_TRUE(bytes.ok()) << bytes.status();
  absl::StatusOr<std::shared_ptr<const Model>> model = Model::LoadFromBuffer(*bytes);
  EXPECT_TRUE(model.ok()) << model.status();
  return *model;
}

// The inputs at (seq, batch).
std::vector<Tensor> Inputs(const BucketCase& c, int64_t seq, int64_t batch, int seed) {
  using Shape = std::vector<int64_t>;
  const int64_t nd = c.dirs(), h = c.hidden;
  const Shape x = c.layout == 0 ? Shape{seq, batch, c.input} : Shape{batch, seq, c.input};
  const Shape state = c.layout == 0 ? Shape{nd, batch, h} : Shape{batch, nd, h};
  std::vector<Tensor> t;
  t.push_back(testing::MakeTensor<float>(DType::kF32, x, RecurrentPattern(seq * batch * c.input, seed, 1.0f)));
  if (c.lengths == 2) {
    std::vector<int32_t> lens;
    for (int64_t i = 0; i < batch; ++i) lens.push_back(static_cast<int32_t>(1 + (i + seed) % seq));
    t.push_back(testing::MakeTensor<int32_t>(DType::kI32, {batch}, lens));
  }
  for (int k = 0; k < (c.initial_h ? 1 : 0) + (c.initial_c ? 1 : 0); ++k) {
    t.push_back(testing::MakeTensor<float>(DType::kF32, state, RecurrentPattern(nd * batch * h, seed + 5 + k, 0.8f)));
  }
  return t;
}

absl::StatusOr<std::vector<Tensor>> Run(Session& s, const std::vector<Tensor>& in) {
  std::vector<TensorView> views;
  for (const Tensor& t : in) views.push_back(t.view());
  absl::StatusOr<std::vector<TensorView>> out = s.Run(views);
  if (!out.ok()) return out.status();
  std::vector<Tensor> copies;
  for (const TensorView& v : *out) copies.push_back(Tensor::CopyOf(v).value());
  return copies;
}

void ExpectBucketServed(const BucketCase& c) {
  SCOPED_TRACE(::testing::Message() << c.op << " " << c.direction << " layout " << c.layout << " lbr "
                                    << c.linear_before_reset << " h0 " << c.initial_h << " c0 " << c.initial_c
                                    << " lengths " << c.lengths);
  std::shared_ptr<const Model> model = BuildModel(c);
  ASSERT_NE(model, nullptr);
  absl::StatusOr<std::unique_ptr<Session>> graphs =
      internal::CreateSessionOnDevice(model, SessionOptions(), cuda::NewEmulatedDevice());
  ASSERT_TRUE(graphs.ok()) << graphs.status();
  SessionOptions off;
  off.cuda_graphs = GraphMode::kOff;
  absl::StatusOr<std::unique_ptr<Session>> eager =
      internal::CreateSessionOnDevice(model, off, cuda::NewEmulatedDevice());
  ASSERT_TRUE(eager.ok()) << eager.status();
  absl::StatusOr<std::unique_ptr<Session>> cpu = Session::Create(model, SessionOptions());
  ASSERT_TRUE(cpu.ok()) << cpu.status();

  // Inside the default buckets seq (5, 8] and batch (2, 4]; the bound itself
  // second. With sequence_lens the batch is the model's.
  struct Shape {
    int64_t seq, batch;
  };
  std::vector<Shape> shapes = {{5, 3}, {8, 4}, {7, 3}, {6, 4}};
  if (c.lengths == 1) shapes = {{5, c.batch}, {8, c.batch}, {6, c.batch}};
  for (int pass = 0; pass < 2; ++pass) {
    const SessionStats before = (*graphs)->stats();
    for (size_t i = 0; i < shapes.size(); ++i) {
      SCOPED_TRACE(::testing::Message() << "pass " << pass << ", seq " << shapes[i].seq << ", batch "
                                        << shapes[i].batch);
      const std::vector<Tensor> in = Inputs(c, shapes[i].seq, shapes[i].batch, static_cast<int>(i) + pass);
      absl::StatusOr<std::vector<Tensor>> got = Run(**graphs, in);
      ASSERT_TRUE(got.ok()) << got.status();
      absl::StatusOr<std::vector<Tensor>> want = Run(**eager, in);
      ASSERT_TRUE(want.ok()) << want.status();
      absl::StatusOr<std::vector<Tensor>> ref = Run(**cpu, in);
      ASSERT_TRUE(ref.ok()) << ref.status();
      ASSERT_EQ(got->size(), want->size());
      ASSERT_EQ(got->size(), ref->size());
      for (size_t k = 0; k < got->size(); ++k) {
        const TensorView g = (*got)[k].view(), w = (*want)[k].view(), r = (*ref)[k].view();
        ASSERT_EQ(g.shape, w.shape) << "output " << k;
        ASSERT_EQ(g.shape, r.shape) << "output " << k;
        EXPECT_EQ(std::memcmp(g.data, w.data, g.byte_size()), 0) << "output " << k << " differs from graphs off";
        int reported = 0;
        for (int64_t e = 0; e < g.num_elements(); ++e) {
          const float gv = g.as<const float>()[e], rv = r.as<const float>()[e];
          if (!(std::fabs(gv - rv) <= 1e-5 + 1e-4 * std::fabs(rv)) && reported++ < 3) {
            ADD_FAILURE() << "output " << k << " element " << e << " is " << gv << ", the CPU's " << rv;
          }
        }
      }
    }
    const SessionStats after = (*graphs)->stats();
    EXPECT_EQ(after.graphs_captured - before.graphs_captured, pass == 0 ? 1 : 0) << after.bucket_fallback_reason;
    EXPECT_EQ(after.graph_replays - before.graph_replays, static_cast<int64_t>(shapes.size()) - (pass == 0 ? 1 : 0));
    EXPECT_GT(after.graph_refreshes - before.graph_refreshes, 0);
    EXPECT_EQ(after.segments_run_eagerly, 0) << after.graph_fallback_reason;
    EXPECT_EQ(after.launches_outside_graphs, 0);
    EXPECT_EQ(after.buckets_made, 1);
    EXPECT_EQ(after.bucket_fallback_reason, "");
  }
  if (c.lengths != 2) return;
  // A length past the sequence: the CPU's error, from the device's check at
  // the run's wait; the session stays usable.
  std::vector<Tensor> bad = Inputs(c, 6, 3, 0);
  bad[1].as<int32_t>()[2] = 7;
  absl::StatusOr<std::vector<Tensor>> cpu_error = Run(**cpu, bad);
  ASSERT_FALSE(cpu_error.ok());
  absl::StatusOr<std::vector<Tensor>> error = Run(**graphs, bad);
  ASSERT_FALSE(error.ok());
  EXPECT_EQ(error.status().message(), cpu_error.status().message());
  EXPECT_TRUE(Run(**graphs, Inputs(c, 6, 3, 1)).ok());
}

// A case: `states` gives initial_h (and initial_c to an LSTM).
BucketCase Case(const char* op, const char* direction, int64_t layout, bool states, int64_t lbr = 0,
                int lengths = 0) {
  BucketCase c;
  c.op = op;
  c.direction = direction;
  c.layout = layout;
  c.initial_h = states;
  c.initial_c = states && c.op == "LSTM";
  c.linear_before_reset = lbr;
  c.lengths = lengths;
  return c;
}

TEST(CudaRecurrentBucketTest, LstmDirectionsStatesAndLayouts) {
  for (const char* dir : {"forward", "reverse", "bidirectional"}) {
    for (int64_t layout : {0, 1}) {
      for (bool states : {false, true}) ExpectBucketServed(Case("LSTM", dir, layout, states));
    }
  }
}

TEST(CudaRecurrentBucketTest, SequenceLengths) {
  for (const char* op : {"LSTM", "GRU", "RNN"}) {
    for (const char* dir : {"forward", "reverse", "bidirectional"}) {
      for (int lengths : {1, 2}) ExpectBucketServed(Case(op, dir, 0, /*states=*/true, 0, lengths));
    }
  }
}

TEST(CudaRecurrentBucketTest, GruAndRnn) {
  for (int64_t lbr : {0, 1}) ExpectBucketServed(Case("GRU", "bidirectional", 0, /*states=*/true, lbr));
  ExpectBucketServed(Case("RNN", "reverse", 1, /*states=*/false));
}

}  // namespace
}  // namespace grove
