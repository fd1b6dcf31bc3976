// CUDA LSTM, GRU and RNN on the emulated device against the CPU kernels:
// every direction and layout, biases, initial states, peepholes, sequence
// lengths (i32 and i64, host or device values), clip, input_forget,
// linear_before_reset, custom activations with alpha/beta, every output,
// empty batches and sequences, and the error paths. Each case runs both
// ways the kernel launches: step by step (plans of exact shapes) and one
// launch per direction (plans that serve a shape bucket), which give the
// same bits on the emulated device.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "lib/backends/cuda/emulated_device.h"
#include "test/cuda_op_test_util.h"
#include "test/op_test_util.h"
#include "test/recurrent_test_util.h"

namespace grove {
namespace {

using testing::CountCudaInvoke;
using testing::CudaRunOptions;
using testing::ExpectCudaMatchesCpu;
using testing::MakeTensor;
using testing::RunOpCuda;
using Attrs = std::vector<std::pair<std::string, AttrValue>>;

std::vector<float> Pattern(int64_t n, int seed, float scale = 0.6f) { return testing::RecurrentPattern(n, seed, scale); }

struct Spec : testing::RecurrentSpec {
  Spec() { bias = true; }
  std::vector<int64_t> lengths;  // empty: no sequence_lens
  DType lengths_dtype = DType::kI32;
  int outputs = 3;  // LSTM: Y, Y_h, Y_c; others at most 2
};

class CudaRecurrentTest : public ::testing::Test {
 protected:
  std::shared_ptr<cuda::Device> dev_ = testing::TestDevice();

  // `valid`: the CPU accepts the call (so the comparison is not vacuous).
  void Expect(const Spec& s, bool valid = true) {
    SCOPED_TRACE(::testing::Message() << s.op << " " << s.direction << " layout " << s.layout << " seq " << s.seq
                                      << " batch " << s.batch << " lens " << ::testing::PrintToString(s.lengths)
                                      << " lbr " << s.linear_before_reset << " clip " << s.clip);
    const int64_t g = s.gates(), nd = s.dirs(), h = s.hidden;
    const std::vector<int64_t> state =
        s.layout == 0 ? std::vector<int64_t>{nd, s.batch, h} : std::vector<int64_t>{s.batch, nd, h};
    const std::vector<int64_t> xs = s.layout == 0 ? std::vector<int64_t>{s.seq, s.batch, s.input}
                                                  : std::vector<int64_t>{s.batch, s.seq, s.input};
    Tensor x = MakeTensor<float>(DType::kF32, xs, Pattern(s.seq * s.batch * s.input, 1, 1.0f));
    Tensor w = MakeTensor<float>(DType::kF32, {nd, g * h, s.input}, Pattern(nd * g * h * s.input, 2));
    Tensor r = MakeTensor<float>(DType::kF32, {nd, g * h, h}, Pattern(nd * g * h * h, 3));
    Tensor b = MakeTensor<float>(DType::kF32, {nd, 2 * g * h}, Pattern(nd * 2 * g * h, 4));
    Tensor h0 = MakeTensor<float>(DType::kF32, state, Pattern(nd * s.batch * h, 5));
    Tensor c0 = MakeTensor<float>(DType::kF32, state, Pattern(nd * s.batch * h, 6));
    Tensor p = MakeTensor<float>(DType::kF32, {nd, 3 * h}, Pattern(nd * 3 * h, 7));
    Tensor lens;
    if (s.lengths_dtype == DType::kI64) {
      lens = MakeTensor<int64_t>(DType::kI64, {static_cast<int64_t>(s.lengths.size())}, s.lengths);
    } else {
      std::vector<int32_t> l(s.lengths.begin(), s.lengths.end());
      lens = MakeTensor<int32_t>(DType::kI32, {static_cast<int64_t>(l.size())}, l);
    }
    std::vector<const Tensor*> in = {&x, &w, &r, s.bias ? &b : nullptr, s.lengths.empty() ? nullptr : &lens,
                                     s.initial_h ? &h0 : nullptr};
    if (s.op == "LSTM") {
      in.push_back(s.initial_c ? &c0 : nullptr);
      in.push_back(s.peephole ? &p : nullptr);
    }
    while (!in.empty() && in.back() == nullptr) in.pop_back();
    const Attrs a = testing::RecurrentAttrs(s);
    const int outputs = s.op == "LSTM" ? s.outputs : std::min(s.outputs, 2);
    EXPECT_EQ(testing::RunOp(s.op, in, a, outputs).ok(), valid);
    for (bool bucket : {false, true}) {
      for (bool host : {true, false}) {
        SCOPED_TRACE(::testing::Message() << (bucket ? "whole sequence" : "step by step") << ", host values "
                                          << host);
        ExpectCudaMatchesCpu(*dev_, s.op, in, a, outputs, 1e-5,
                             CudaRunOptions{.host_values = host, .bucket_plan = bucket});
      }
    }
    if (!valid) return;
    absl::StatusOr<std::vector<Tensor>> steps = RunOpCuda(*dev_, s.op, in, a, outputs);
    absl::StatusOr<std::vector<Tensor>> whole = RunOpCuda(*dev_, s.op, in, a, outputs, {.bucket_plan = true});
    ASSERT_TRUE(steps.ok()) << steps.status();
    ASSERT_TRUE(whole.ok()) << whole.status();
    ASSERT_EQ(steps->size(), whole->size());
    for (size_t k = 0; k < steps->size(); ++k) {
      const TensorView sv = (*steps)[k].view(), wv = (*whole)[k].view();
      ASSERT_EQ(sv.shape, wv.shape) << "output " << k;
      if (dev_->emulated()) {
        // The emulated cuBLASLt sums in the order rnn_sequence does, so
        // the bits must not depend on how the sequence is launched.
        EXPECT_EQ(std::memcmp(sv.data, wv.data, sv.byte_size()), 0) << "output " << k << ": other bits per launch";
      } else {
        // A real cuBLASLt picks its algorithm (and so its summation order)
        // by M, which differs between a step's product and the whole
        // sequence's projection: equal within rounding, not bitwise.
        const auto* a = static_cast<const float*>(sv.data);
        const auto* b = static_cast<const float*>(wv.data);
        for (int64_t i = 0; i < sv.num_elements(); ++i) {
          ASSERT_NEAR(a[i], b[i], 2e-5 * (1.0 + std::abs(b[i]))) << "output " << k << " element " << i;
        }
      }
    }
  }
};

TEST_F(CudaRecurrentTest, EveryOpDirectionAndLayout) {
  for (const char* op : {"RNN", "GRU", "LSTM"}) {
    for (const char* dir : {"forward", "reverse", "bidirectional"}) {
      for (int64_t layout : {0, 1}) {
        Spec s;
        s.op = op;
        s.direction = dir;
        s.layout = layout;
        s.initial_h = true;
        s.initial_c = true;
        Expect(s);
        s.bias = false;
        s.initial_h = false;
        s.initial_c = false;
        s.batch = 3;
        s.hidden = 5;
        s.input = 1;
        Expect(s);
      }
    }
  }
}

TEST_F(CudaRecurrentTest, SequenceLengths) {
  for (const char* op : {"RNN", "GRU", "LSTM"}) {
    for (const char* dir : {"forward", "bidirectional"}) {
      for (int64_t layout : {0, 1}) {
        for (DType dt : {DType::kI32, DType::kI64}) {
          Spec s;
          s.op = op;
          s.direction = dir;
          s.layout = layout;
          s.seq = 4;
          s.batch = 3;
          s.lengths = {4, 0, 2};
          s.lengths_dtype = dt;
          s.initial_h = true;
          Expect(s);
        }
      }
    }
  }
}

TEST_F(CudaRecurrentTest, LstmOptions) {
  Spec s;
  s.peephole = true;
  s.initial_h = s.initial_c = true;
  s.direction = "bidirectional";
  Expect(s);
  s.input_forget = true;
  Expect(s);
  s.clip = 0.4;
  Expect(s);
  s.activations = {"HardSigmoid", "LeakyRelu", "ScaledTanh"};
  s.alphas = {0.3, 0.2, 0.9};
  s.betas = {0.4, 1.1};
  Expect(s);
  s.outputs = 1;
  Expect(s);
}

TEST_F(CudaRecurrentTest, GruLinearBeforeResetAndActivations) {
  for (int64_t lbr : {0, 1}) {
    Spec s;
    s.op = "GRU";
    s.linear_before_reset = lbr;
    s.direction = "bidirectional";
    s.initial_h = true;
    Expect(s);
    s.bias = false;
    Expect(s);
    s.bias = true;
    s.clip = 0.5;
    s.activations = {"Sigmoid", "Softsign", "Elu", "Softplus"};
    s.alphas = {0.7};
    Expect(s);
  }
}

TEST_F(CudaRecurrentTest, RnnActivations) {
  const std::vector<std::vector<std::string>> acts = {
      {"Relu"}, {"Tanh"}, {"Sigmoid"}, {"Affine"}, {"LeakyRelu"}, {"ThresholdedRelu"},
      {"ScaledTanh"}, {"HardSigmoid"}, {"Elu"}, {"Softsign"}, {"Softplus"}};
  for (const auto& act : acts) {
    Spec s;
    s.op = "RNN";
    s.activations = act;
    s.alphas = {0.35};
    s.betas = {0.25};
    s.initial_h = true;
    Expect(s);
  }
  Spec s;
  s.op = "RNN";
  s.direction = "bidirectional";
  s.activations = {"Relu", "Tanh"};
  Expect(s);
}

TEST_F(CudaRecurrentTest, EmptyBatchAndSequence) {
  for (const char* op : {"RNN", "GRU", "LSTM"}) {
    Spec s;
    s.op = op;
    s.batch = 0;
    Expect(s);
    Spec t;
    t.op = op;
    t.seq = 0;
    t.initial_h = true;
    t.direction = "bidirectional";
    Expect(t);
  }
}

// What a bucket's graph needs: in a bucketed plan the launches (and GEMMs)
// of one invoke do not depend on the sequence length or the batch; step by
// step they grow with the length (which is why such a plan cannot use it).
TEST_F(CudaRecurrentTest, BucketedLaunchesDoNotDependOnTheShape) {
  for (const char* op : {"RNN", "GRU", "LSTM"}) {
    for (int64_t lbr : {0, 1}) {
      if (lbr == 1 && std::string(op) != "GRU") continue;
      SCOPED_TRACE(::testing::Message() << op << " lbr " << lbr);
      cuda::DeviceCounts counts[2][2];  // [bucketed][shape]
      for (int bucketed = 0; bucketed < 2; ++bucketed) {
        for (int shape = 0; shape < 2; ++shape) {
          Spec s;
          s.op = op;
          s.linear_before_reset = lbr;
          s.direction = "bidirectional";
          s.initial_h = s.initial_c = true;
          s.seq = shape == 0 ? 2 : 7;
          s.batch = shape == 0 ? 1 : 3;
          const int64_t g = s.gates(), h = s.hidden;
          Tensor x = MakeTensor<float>(DType::kF32, {s.seq, s.batch, s.input}, Pattern(s.seq * s.batch * s.input, 1));
          Tensor w = MakeTensor<float>(DType::kF32, {2, g * h, s.input}, Pattern(2 * g * h * s.input, 2));
          Tensor r = MakeTensor<float>(DType::kF32, {2, g * h, h}, Pattern(2 * g * h * h, 3));
          Tensor b = MakeTensor<float>(DType::kF32, {2, 2 * g * h}, Pattern(4 * g * h, 4));
          Tensor h0 = MakeTensor<float>(DType::kF32, {2, s.batch, h}, Pattern(2 * s.batch * h, 5));
          std::vector<const Tensor*> in = {&x, &w, &r, &b, nullptr, &h0};
          absl::StatusOr<testing::InvokeCounts> c =
              CountCudaInvoke(*dev_, op, in, testing::RecurrentAttrs(s), 2, {.bucket_plan = bucketed == 1});
          ASSERT_TRUE(c.ok()) << c.status();
          EXPECT_FALSE(c->needs_host);
          EXPECT_EQ(c->counts.synchronizations, 0);
          EXPECT_EQ(c->counts.device_to_host_copies, 0);
          counts[bucketed][shape] = c->counts;
        }
      }
      EXPECT_EQ(counts[1][0].launches, counts[1][1].launches);
      EXPECT_EQ(counts[1][0].gemms, counts[1][1].gemms);
      EXPECT_EQ(counts[1][1].launches, 4);  // per direction: R transposed, the sequence
      EXPECT_EQ(counts[1][1].gemms, 2);     // per direction: the input projection
      EXPECT_LT(counts[0][0].launches + counts[0][0].gemms, counts[0][1].launches + counts[0][1].gemms);
    }
  }
}

// Lengths only the device holds are checked there (a deferred check, read
// at the run's wait): the CPU's message, both ways of launching, with steps
// and without (seq 0).
TEST_F(CudaRecurrentTest, BadDeviceLengthsGiveTheCpuMessage) {
  for (int64_t seq : {0, 3}) {
    for (const std::vector<int32_t>& bad : {std::vector<int32_t>{1, 4}, std::vector<int32_t>{-1, 0}}) {
      Spec s;
      s.seq = seq;
      s.direction = "bidirectional";
      Tensor x = MakeTensor<float>(DType::kF32, {seq, 2, 3}, Pattern(seq * 6, 1));
      Tensor w = MakeTensor<float>(DType::kF32, {2, 16, 3}, Pattern(96, 2));
      Tensor r = MakeTensor<float>(DType::kF32, {2, 16, 4}, Pattern(128, 3));
      Tensor lens = MakeTensor<int32_t>(DType::kI32, {2}, bad);
      const std::vector<const Tensor*> in = {&x, &w, &r, nullptr, &lens};
      absl::StatusOr<std::vector<Tensor>> cpu = testing::RunOp("LSTM", in, testing::RecurrentAttrs(s), 3);
      ASSERT_FALSE(cpu.ok());
      for (bool bucket : {false, true}) {
        for (bool host : {true, false}) {
          SCOPED_TRACE(::testing::Message() << "seq " << seq << " bucket " << bucket << " host " << host);
          absl::StatusOr<std::vector<Tensor>> got =
              RunOpCuda(*dev_, "LSTM", in, testing::RecurrentAttrs(s), 3, {.host_values = host, .bucket_plan = bucket});
          ASSERT_FALSE(got.ok());
          EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument);
          EXPECT_EQ(got.status().message(), cpu.status().message());
        }
      }
    }
  }
}

TEST_F(CudaRecurrentTest, ErrorsAndF64) {
  Spec s;
  s.lengths = {4, 1};  // longer than seq
  Expect(s, false);
  s.lengths = {-1, 1};
  Expect(s, false);
  Tensor x = MakeTensor<float>(DType::kF32, {3, 2, 3}, Pattern(18, 1));
  Tensor w = MakeTensor<float>(DType::kF32, {1, 16, 3}, Pattern(48, 2));
  Tensor r_bad = MakeTensor<float>(DType::kF32, {1, 16, 3}, Pattern(48, 3));
  ExpectCudaMatchesCpu(*dev_, "LSTM", {&x, &w, &r_bad}, {{"hidden_size", int64_t{4}}}, 3);
  Tensor r = MakeTensor<float>(DType::kF32, {1, 16, 4}, Pattern(64, 3));
  ExpectCudaMatchesCpu(*dev_, "LSTM", {&x, &w, &r}, {{"hidden_size", int64_t{4}}, {"direction", std::string("up")}}, 3);
  Tensor x64 = Tensor::CastOf(x.view(), DType::kF64).value(), w64 = Tensor::CastOf(w.view(), DType::kF64).value(),
         r64 = Tensor::CastOf(r.view(), DType::kF64).value();
  auto out = RunOpCuda(*dev_, "LSTM", {&x64, &w64, &r64}, {{"hidden_size", int64_t{4}}}, 3);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kUnimplemented) << out.status();
  // f16 and bf16 as well: the executor keeps them on the CPU, which computes them in f32.
  for (const DType half : {DType::kF16, DType::kBF16}) {
    Tensor xh = Tensor::CastOf(x.view(), half).value(), wh = Tensor::CastOf(w.view(), half).value(),
           rh = Tensor::CastOf(r.view(), half).value();
    auto half_out = RunOpCuda(*dev_, "LSTM", {&xh, &wh, &rh}, {{"hidden_size", int64_t{4}}}, 3);
    ASSERT_FALSE(half_out.ok());
    EXPECT_EQ(half_out.status().code(), absl::StatusCode::kUnimplemented) << half_out.status();
    EXPECT_NE(half_out.status().message().find(absl::StrCat("no CUDA kernel for ", DTypeName(half))),
              std::string::npos)
        << half_out.status();
  }
}

}  // namespace
}  // namespace grove
