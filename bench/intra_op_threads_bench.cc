// SessionOptions::intra_op_threads: the same model through a session of one
// thread and a session of two, interleaved in one process (each iteration
// runs both on the same input, so a noisy machine slows both alike).
// Counters: the median milliseconds of each and speedup, one thread's median
// over two threads'.
//  - BM_Elementwise/N: Add (row broadcast), Mul, Sigmoid, Tanh, Relu over N
//    f32 elements (1,024: a decode step's size, which stays on one thread).
//  - BM_SoftmaxLayerNorm/R: Softmax then LayerNormalization over R rows of
//    1,024 (attention scores and a transformer's norm).
//  - BM_Transpose/N: an NxN f32 transpose and a Concat of it with its input.
//  - BM_ReduceSum/R: ReduceSum over the last dim of R rows of 1,024.
//  - BM_Attention/H/S/D: one fused attention step, H heads of D dims, S
//    tokens (the CPU kernel's row blocks of all heads in one Run).
//  - BM_EncoderBlock/S: a width-256 encoder block (one head) on S tokens:
//    oneDNN's MatMuls between Softmax, LayerNorm, Gelu and Adds.
//  - BM_SmallCnn/B: the small CNN of issue 14 (four Conv 3x3 + Relu +
//    MaxPool 2x2 blocks, 3 -> 16 -> 32 -> 64 -> 64 channels, 64x64,
//    GlobalAveragePool) at batch B: oneDNN's steps on the session's threads.
//
//   build/bench/intra_op_threads_bench --benchmark_min_time=1
#include <algorithm>
#include <chrono>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "benchmark/benchmark.h"
#include "grove/grove.h"

namespace grove {
namespace {

std::vector<float> RandomValues(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = dist(rng);
  return v;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

std::shared_ptr<const Model> Load(const ModelBuilder& b) { return *Model::LoadFromBuffer(*b.Finish()); }

// Runs `model` on `input` through a 1-thread and a 2-thread session,
// interleaved; reports both medians and their ratio.
void CompareThreads(benchmark::State& state, const std::shared_ptr<const Model>& model, const Tensor& input) {
  SessionOptions options;
  options.device = Device::kCpu;
  options.intra_op_threads = 1;
  std::unique_ptr<Session> one = *Session::Create(model, options);
  options.intra_op_threads = 2;
  std::unique_ptr<Session> two = *Session::Create(model, options);
  const std::vector<TensorView> inputs = {input.view()};
  auto run = [&](Session& s) {
    const auto t0 = std::chrono::steady_clock::now();
    absl::StatusOr<std::vector<TensorView>> out = s.Run(inputs);
    const auto t1 = std::chrono::steady_clock::now();
    if (!out.ok()) state.SkipWithError(std::string(out.status().message()).c_str());
    return std::chrono::duration<double, std::milli>(t1 - t0).count();
  };
  run(*one);  // plans
  run(*two);
  std::vector<double> one_ms, two_ms;
  bool two_first = false;
  for (auto _ : state) {
    // Alternate which goes first, so neither always runs on a warm cache.
    if (two_first) two_ms.push_back(run(*two));
    one_ms.push_back(run(*one));
    if (!two_first) two_ms.push_back(run(*two));
    two_first = !two_first;
  }
  const double a = Median(one_ms), b = Median(two_ms);
  state.counters["one_thread_ms"] = a;
  state.counters["two_threads_ms"] = b;
  state.counters["speedup"] = b > 0 ? a / b : 0;
}

Tensor Input(std::vector<int64_t> shape, uint32_t seed) {
  Tensor t = *Tensor::Create(DType::kF32, shape);
  const std::vector<float> v = RandomValues(t.view().num_elements(), seed);
  std::copy(v.begin(), v.end(), static_cast<float*>(t.data()));
  return t;
}

void BM_Elementwise(benchmark::State& state) {
  const int64_t n = state.range(0), cols = 256;
  ModelBuilder b;
  b.AddInput("x", DType::kF32, {n / cols, cols});
  b.AddWeight("bias", DType::kF32, {cols}, RandomValues(cols, 2));
  b.AddOp("Add", {"x", "bias"}, {"a"});
  b.AddOp("Mul", {"a", "x"}, {"m"});
  b.AddOp("Sigmoid", {"m"}, {"s"});
  b.AddOp("Tanh", {"s"}, {"t"});
  b.AddOp("Relu", {"t"}, {"y"});
  b.AddOutput("y");
  CompareThreads(state, Load(b), Input({n / cols, cols}, 1));
}
BENCHMARK(BM_Elementwise)->Arg(1 << 10)->Arg(1 << 16)->Arg(1 << 20)->Unit(benchmark::kMillisecond);

void BM_SoftmaxLayerNorm(benchmark::State& state) {
  const int64_t rows = state.range(0), cols = 1024;
  ModelBuilder b;
  b.AddInput("x", DType::kF32, {rows, cols});
  b.AddWeight("scale", DType::kF32, {cols}, RandomValues(cols, 3));
  b.AddWeight("bias", DType::kF32, {cols}, RandomValues(cols, 4));
  b.AddOp("Softmax", {"x"}, {"p"}, {{"axis", int64_t{-1}}});
  b.AddOp("LayerNormalization", {"p", "scale", "bias"}, {"y"}, {{"axis", int64_t{-1}}});
  b.AddOutput("y");
  CompareThreads(state, Load(b), Input({rows, cols}, 5));
}
BENCHMARK(BM_SoftmaxLayerNorm)->Arg(1)->Arg(64)->Arg(1024)->Unit(benchmark::kMillisecond);

void BM_Transpose(benchmark::State& state) {
  const int64_t n = state.range(0);
  ModelBuilder b;
  b.AddInput("x", DType::kF32, {n, n});
  b.AddOp("Transpose", {"x"}, {"t"}, {{"perm", std::vector<int64_t>{1, 0}}});
  b.AddOp("Concat", {"x", "t"}, {"y"}, {{"axis", int64_t{1}}});
  b.AddOutput("y");
  CompareThreads(state, Load(b), Input({n, n}, 6));
}
BENCHMARK(BM_Transpose)->Arg(64)->Arg(1024)->Unit(benchmark::kMillisecond);

void BM_ReduceSum(benchmark::State& state) {
  const int64_t rows = state.range(0), cols = 1024;
  ModelBuilder b;
  b.AddInput("x", DType::kF32, {rows, cols});
  b.AddWeight("axes", DType::kI64, {1}, std::vector<int64_t>{1});
  b.AddOp("ReduceSum", {"x", "axes"}, {"y"});
  b.AddOutput("y");
  CompareThreads(state, Load(b), Input({rows, cols}, 7));
}
BENCHMARK(BM_ReduceSum)->Arg(16)->Arg(1024)->Unit(benchmark::kMillisecond);

// Fused attention (one FusedAttention step: x as Q, K and V, the scores
// scaled) over H heads of D dims and S tokens, /H/S/D: the exported
// encoder's 4 heads of 8 dims at 256 tokens, 12 heads of 64 at 128.
void BM_Attention(benchmark::State& state) {
  const int64_t heads = state.range(0), seq = state.range(1), dim = state.range(2);
  ModelBuilder b;
  b.AddInput("x", DType::kF32, {1, heads, seq, dim});
  b.AddWeight("scale", DType::kF32, {}, std::vector<float>{0.35f});
  b.AddOp("Transpose", {"x"}, {"kt"}, {{"perm", std::vector<int64_t>{0, 1, 3, 2}}});
  b.AddOp("MatMul", {"x", "kt"}, {"scores"});
  b.AddOp("Mul", {"scores", "scale"}, {"scaled"});
  b.AddOp("Softmax", {"scaled"}, {"p"}, {{"axis", int64_t{-1}}});
  b.AddOp("MatMul", {"p", "x"}, {"y"});
  b.AddOutput("y");
  CompareThreads(state, Load(b), Input({1, heads, seq, dim}, 8));
}
BENCHMARK(BM_Attention)->Args({4, 256, 8})->Args({3, 256, 8})->Args({12, 128, 64})->Unit(benchmark::kMillisecond);

// An encoder block of width 256 (one head), S tokens: q, k, v, scores,
// Softmax, context and projection MatMuls (oneDNN), residual Adds, two
// LayerNorms and a 1024-wide feed-forward with Gelu: oneDNN's steps and the
// pool's kernels one after the other.
void BM_EncoderBlock(benchmark::State& state) {
  const int64_t seq = state.range(0), d = 256, ff = 1024;
  ModelBuilder b;
  b.AddInput("x", DType::kF32, {1, seq, d});
  for (const char* w : {"wq", "wk", "wv", "wo"}) b.AddWeight(w, DType::kF32, {d, d}, RandomValues(d * d, w[1]));
  b.AddWeight("w1", DType::kF32, {d, ff}, RandomValues(d * ff, 31));
  b.AddWeight("b1", DType::kF32, {ff}, RandomValues(ff, 32));
  b.AddWeight("w2", DType::kF32, {ff, d}, RandomValues(ff * d, 33));
  b.AddWeight("gamma", DType::kF32, {d}, RandomValues(d, 34));
  b.AddWeight("beta", DType::kF32, {d}, RandomValues(d, 35));
  b.AddWeight("scale", DType::kF32, {}, std::vector<float>{0.0625f});
  b.AddOp("MatMul", {"x", "wq"}, {"q"});
  b.AddOp("MatMul", {"x", "wk"}, {"k"});
  b.AddOp("MatMul", {"x", "wv"}, {"v"});
  b.AddOp("Transpose", {"k"}, {"kt"}, {{"perm", std::vector<int64_t>{0, 2, 1}}});
  b.AddOp("MatMul", {"q", "kt"}, {"scores"});
  b.AddOp("Mul", {"scores", "scale"}, {"scaled"});
  b.AddOp("Softmax", {"scaled"}, {"attn"}, {{"axis", int64_t{-1}}});
  b.AddOp("MatMul", {"attn", "v"}, {"ctx"});
  b.AddOp("MatMul", {"ctx", "wo"}, {"proj"});
  b.AddOp("Add", {"x", "proj"}, {"res1"});
  b.AddOp("LayerNormalization", {"res1", "gamma", "beta"}, {"n1"}, {{"axis", int64_t{-1}}});
  b.AddOp("MatMul", {"n1", "w1"}, {"h0"});
  b.AddOp("Add", {"h0", "b1"}, {"h1"});
  b.AddOp("Gelu", {"h1"}, {"h"});
  b.AddOp("MatMul", {"h", "w2"}, {"f"});
  b.AddOp("Add", {"n1", "f"}, {"res2"});
  b.AddOp("LayerNormalization", {"res2", "gamma", "beta"}, {"y"}, {{"axis", int64_t{-1}}});
  b.AddOutput("y");
  CompareThreads(state, Load(b), Input({1, seq, d}, 9));
}
BENCHMARK(BM_EncoderBlock)->Arg(16)->Arg(128)->Arg(384)->Unit(benchmark::kMillisecond);

void BM_SmallCnn(benchmark::State& state) {
  const int64_t batch = state.range(0);
  ModelBuilder b;
  b.AddInput("x", DType::kF32, {batch, 3, 64, 64});
  const int64_t channels[] = {3, 16, 32, 64, 64};
  std::string x = "x";
  for (int i = 0; i < 4; ++i) {
    const std::string s = std::to_string(i);
    const int64_t c = channels[i], m = channels[i + 1];
    b.AddWeight("w" + s, DType::kF32, {m, c, 3, 3}, RandomValues(m * c * 9, 10 + i));
    b.AddWeight("b" + s, DType::kF32, {m}, RandomValues(m, 20 + i));
    b.AddOp("Conv", {x, "w" + s, "b" + s}, {"conv" + s}, {{"pads", std::vector<int64_t>{1, 1, 1, 1}}});
    b.AddOp("Relu", {"conv" + s}, {"relu" + s});
    b.AddOp("MaxPool", {"relu" + s}, {"pool" + s},
            {{"kernel_shape", std::vector<int64_t>{2, 2}}, {"strides", std::vector<int64_t>{2, 2}}});
    x = "pool" + s;
  }
  b.AddOp("GlobalAveragePool", {x}, {"y"});
  b.AddOutput("y");
  CompareThreads(state, Load(b), Input({batch, 3, 64, 64}, 8));
}
BENCHMARK(BM_SmallCnn)->Arg(1)->Arg(8)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace grove

BENCHMARK_MAIN();
