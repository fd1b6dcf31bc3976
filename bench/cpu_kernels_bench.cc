// The CPU backend's oneDNN path (lib/backends/cpu/onednn.h) against its
// reference kernels, in one process, interleaved: each iteration runs one
// session whose plans were made with oneDNN and one whose plans were made with
// the reference kernels (cpu::ScopedOneDnn at the first run of each shape),
// on the same input. Counters: the median milliseconds of each and
// ref_over_onednn, the reference's median over oneDNN's.
//  - BM_SmallCnn/B: four Conv 3x3 + Relu + MaxPool 2x2 blocks (3 -> 16 -> 32
//    -> 64 -> 64 channels) on 64x64 images, then GlobalAveragePool: the
//    small-CNN shape of issue 14, batch B.
//  - BM_SmallCnnChains/B: the same CNN on oneDNN, planned with its steps
//    chained (FuseOneDnnChains: one step whose links hand each other oneDNN's
//    blocked layout) against planned without (each step reorders its input
//    and output); counters chained_ms, unchained_ms, unchained_over_chained.
//  - BM_CnnConv/L: the CNN's Conv L alone (batch 1), the op oneDNN replaces.
//  - BM_CnnConvRelu/L: the CNN's Conv L + Relu (batch 1): one fused oneDNN
//    step (Relu as a post-op) against the two reference steps.
//  - BM_CnnMaxPool/L: the CNN's MaxPool L alone (batch 1).
//  - BM_GemmGelu/T: Gemm (transB, bias) 256x1024 + Gelu, T tokens: one fused
//    step against the reference Gemm and Gelu.
//  - BM_BatchNorm/C: BatchNormalization (inference) of [8, C, 28, 28].
//  - BM_Softmax/N: Softmax over the last axis of [12 * 128, N] (attention
//    scores of 12 heads, 128 queries, N keys).
//  - BM_Mlp/T: a GEMM-heavy block, T tokens of width 256: MatMul 256x1024,
//    Relu, MatMul 1024x256, then Gemm (transB, bias) 256x256.
//
//   build/bench/cpu_kernels_bench --benchmark_min_time=2
#include <algorithm>
#include <chrono>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "benchmark/benchmark.h"
#include "grove/grove.h"
#include "lib/backends/cpu/activation_fusion.h"
#include "lib/backends/cpu/onednn.h"

namespace grove {
namespace {

std::vector<float> RandomValues(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-0.5f, 0.5f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = dist(rng);
  return v;
}

std::shared_ptr<const Model> SmallCnn() {
  static std::shared_ptr<const Model> model = [] {
    ModelBuilder b;
    b.AddSymbol("batch", 1, 64);
    b.AddInput("x", DType::kF32, {"batch", 3, 64, 64});
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
    return *Model::LoadFromBuffer(*b.Finish());
  }();
  return model;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// Runs `model` on `input` through two sessions, interleaved, and reports both
// medians and their ratio.
void CompareSessions(benchmark::State& state, const std::shared_ptr<const Model>& model,
                     const std::vector<TensorView>& inputs) {
  SessionOptions options;
  options.device = Device::kCpu;
  std::unique_ptr<Session> fast = *Session::Create(model, options);
  std::unique_ptr<Session> ref = *Session::Create(model, options);
  auto run = [&](Session& s, bool onednn) {
    cpu::ScopedOneDnn scope(onednn);  // the plan's choice, made at the first run
    const auto t0 = std::chrono::steady_clock::now();
    absl::StatusOr<std::vector<TensorView>> out = s.Run(inputs);
    const auto t1 = std::chrono::steady_clock::now();
    if (!out.ok()) state.SkipWithError(std::string(out.status().message()).c_str());
    return std::chrono::duration<double, std::milli>(t1 - t0).count();
  };
  run(*fast, true);  // plans
  run(*ref, false);
  std::vector<double> fast_ms, ref_ms;
  for (auto _ : state) {
    fast_ms.push_back(run(*fast, true));
    ref_ms.push_back(run(*ref, false));
  }
  const double f = Median(fast_ms), r = Median(ref_ms);
  state.counters["onednn_ms"] = f;
  state.counters["reference_ms"] = r;
  state.counters["ref_over_onednn"] = f > 0 ? r / f : 0;
}

void BM_SmallCnn(benchmark::State& state) {
  const int64_t batch = state.range(0);
  const std::vector<float> x = RandomValues(batch * 3 * 64 * 64, 1);
  const TensorView in(DType::kF32, {batch, 3, 64, 64}, x.data());
  CompareSessions(state, SmallCnn(), {in});
}
BENCHMARK(BM_SmallCnn)->Arg(1)->Arg(8)->Unit(benchmark::kMillisecond);

void BM_SmallCnnChains(benchmark::State& state) {
  const int64_t batch = state.range(0);
  const std::vector<float> x = RandomValues(batch * 3 * 64 * 64, 1);
  const std::vector<TensorView> inputs = {TensorView(DType::kF32, {batch, 3, 64, 64}, x.data())};
  SessionOptions options;
  options.device = Device::kCpu;
  std::unique_ptr<Session> chained = *Session::Create(SmallCnn(), options);
  std::unique_ptr<Session> unchained = *Session::Create(SmallCnn(), options);
  const bool before = cpu::OneDnnChainsEnabled();
  auto run = [&](Session& s, bool chains) {
    cpu::SetOneDnnChainsEnabled(chains);  // the plan's choice, made at the first run
    const auto t0 = std::chrono::steady_clock::now();
    absl::StatusOr<std::vector<TensorView>> out = s.Run(inputs);
    const auto t1 = std::chrono::steady_clock::now();
    if (!out.ok()) state.SkipWithError(std::string(out.status().message()).c_str());
    return std::chrono::duration<double, std::milli>(t1 - t0).count();
  };
  run(*chained, true);  // plans
  run(*unchained, false);
  std::vector<double> chained_ms, unchained_ms;
  for (auto _ : state) {
    chained_ms.push_back(run(*chained, true));
    unchained_ms.push_back(run(*unchained, false));
  }
  cpu::SetOneDnnChainsEnabled(before);
  const double c = Median(chained_ms), u = Median(unchained_ms);
  state.counters["chained_ms"] = c;
  state.counters["unchained_ms"] = u;
  state.counters["unchained_over_chained"] = c > 0 ? u / c : 0;
}
BENCHMARK(BM_SmallCnnChains)->Arg(1)->Arg(8)->Unit(benchmark::kMillisecond);

void BM_CnnConv(benchmark::State& state) {
  const int layer = static_cast<int>(state.range(0));
  const int64_t channels[] = {3, 16, 32, 64, 64};
  const int64_t c = channels[layer], m = channels[layer + 1], size = 64 >> layer;
  ModelBuilder b;
  b.AddInput("x", DType::kF32, {1, c, size, size});
  b.AddWeight("w", DType::kF32, {m, c, 3, 3}, RandomValues(m * c * 9, 10 + layer));
  b.AddWeight("b", DType::kF32, {m}, RandomValues(m, 20 + layer));
  b.AddOp("Conv", {"x", "w", "b"}, {"y"}, {{"pads", std::vector<int64_t>{1, 1, 1, 1}}});
  b.AddOutput("y");
  const std::shared_ptr<const Model> model = *Model::LoadFromBuffer(*b.Finish());
  const std::vector<float> x = RandomValues(c * size * size, 2);
  const TensorView in(DType::kF32, {1, c, size, size}, x.data());
  CompareSessions(state, model, {in});
}
BENCHMARK(BM_CnnConv)->DenseRange(0, 3)->Unit(benchmark::kMillisecond);

void BM_CnnConvRelu(benchmark::State& state) {
  const int layer = static_cast<int>(state.range(0));
  const int64_t channels[] = {3, 16, 32, 64, 64};
  const int64_t c = channels[layer], m = channels[layer + 1], size = 64 >> layer;
  ModelBuilder b;
  b.AddInput("x", DType::kF32, {1, c, size, size});
  b.AddWeight("w", DType::kF32, {m, c, 3, 3}, RandomValues(m * c * 9, 10 + layer));
  b.AddWeight("b", DType::kF32, {m}, RandomValues(m, 20 + layer));
  b.AddOp("Conv", {"x", "w", "b"}, {"h"}, {{"pads", std::vector<int64_t>{1, 1, 1, 1}}});
  b.AddOp("Relu", {"h"}, {"y"});
  b.AddOutput("y");
  const std::shared_ptr<const Model> model = *Model::LoadFromBuffer(*b.Finish());
  const std::vector<float> x = RandomValues(c * size * size, 2);
  const TensorView in(DType::kF32, {1, c, size, size}, x.data());
  CompareSessions(state, model, {in});
}
BENCHMARK(BM_CnnConvRelu)->DenseRange(0, 3)->Unit(benchmark::kMillisecond);

void BM_CnnMaxPool(benchmark::State& state) {
  const int layer = static_cast<int>(state.range(0));
  const int64_t channels[] = {16, 32, 64, 64};
  const int64_t c = channels[layer], size = 64 >> layer;
  ModelBuilder b;
  b.AddInput("x", DType::kF32, {1, c, size, size});
  b.AddOp("MaxPool", {"x"}, {"y"},
          {{"kernel_shape", std::vector<int64_t>{2, 2}}, {"strides", std::vector<int64_t>{2, 2}}});
  b.AddOutput("y");
  const std::shared_ptr<const Model> model = *Model::LoadFromBuffer(*b.Finish());
  const std::vector<float> x = RandomValues(c * size * size, 3);
  const TensorView in(DType::kF32, {1, c, size, size}, x.data());
  CompareSessions(state, model, {in});
}
BENCHMARK(BM_CnnMaxPool)->DenseRange(0, 3)->Unit(benchmark::kMillisecond);

std::shared_ptr<const Model> Mlp() {
  static std::shared_ptr<const Model> model = [] {
    ModelBuilder b;
    b.AddSymbol("tokens", 1, 4096);
    b.AddInput("x", DType::kF32, {"tokens", 256});
    b.AddWeight("w1", DType::kF32, {256, 1024}, RandomValues(256 * 1024, 31));
    b.AddWeight("w2", DType::kF32, {1024, 256}, RandomValues(1024 * 256, 32));
    b.AddWeight("w3", DType::kF32, {256, 256}, RandomValues(256 * 256, 33));
    b.AddWeight("b3", DType::kF32, {256}, RandomValues(256, 34));
    b.AddOp("MatMul", {"x", "w1"}, {"h"});
    b.AddOp("Relu", {"h"}, {"r"});
    b.AddOp("MatMul", {"r", "w2"}, {"o"});
    b.AddOp("Gemm", {"o", "w3", "b3"}, {"y"}, {{"transB", int64_t{1}}});
    b.AddOutput("y");
    return *Model::LoadFromBuffer(*b.Finish());
  }();
  return model;
}

void BM_Mlp(benchmark::State& state) {
  const int64_t tokens = state.range(0);
  const std::vector<float> x = RandomValues(tokens * 256, 3);
  const TensorView in(DType::kF32, {tokens, 256}, x.data());
  CompareSessions(state, Mlp(), {in});
}
BENCHMARK(BM_Mlp)->Arg(1)->Arg(16)->Arg(128)->Unit(benchmark::kMillisecond);

void BM_GemmGelu(benchmark::State& state) {
  static std::shared_ptr<const Model> model = [] {
    ModelBuilder b;
    b.AddSymbol("tokens", 1, 4096);
    b.AddInput("x", DType::kF32, {"tokens", 256});
    b.AddWeight("w", DType::kF32, {1024, 256}, RandomValues(1024 * 256, 41));
    b.AddWeight("b", DType::kF32, {1024}, RandomValues(1024, 42));
    b.AddOp("Gemm", {"x", "w", "b"}, {"h"}, {{"transB", int64_t{1}}});
    b.AddOp("Gelu", {"h"}, {"y"});
    b.AddOutput("y");
    return *Model::LoadFromBuffer(*b.Finish());
  }();
  const int64_t tokens = state.range(0);
  const std::vector<float> x = RandomValues(tokens * 256, 4);
  const TensorView in(DType::kF32, {tokens, 256}, x.data());
  CompareSessions(state, model, {in});
}
BENCHMARK(BM_GemmGelu)->Arg(1)->Arg(16)->Arg(128)->Unit(benchmark::kMillisecond);

void BM_BatchNorm(benchmark::State& state) {
  const int64_t c = state.range(0);
  ModelBuilder b;
  b.AddInput("x", DType::kF32, {8, c, 28, 28});
  b.AddWeight("scale", DType::kF32, {c}, RandomValues(c, 51));
  b.AddWeight("b", DType::kF32, {c}, RandomValues(c, 52));
  b.AddWeight("mean", DType::kF32, {c}, RandomValues(c, 53));
  std::vector<float> var = RandomValues(c, 54);
  for (float& v : var) v += 1.0f;
  b.AddWeight("var", DType::kF32, {c}, var);
  b.AddOp("BatchNormalization", {"x", "scale", "b", "mean", "var"}, {"y"});
  b.AddOutput("y");
  const std::shared_ptr<const Model> model = *Model::LoadFromBuffer(*b.Finish());
  const std::vector<float> x = RandomValues(8 * c * 28 * 28, 5);
  const TensorView in(DType::kF32, {8, c, 28, 28}, x.data());
  CompareSessions(state, model, {in});
}
BENCHMARK(BM_BatchNorm)->Arg(16)->Arg(64)->Unit(benchmark::kMillisecond);

void BM_Softmax(benchmark::State& state) {
  const int64_t n = state.range(0), rows = 12 * 128;
  ModelBuilder b;
  b.AddInput("x", DType::kF32, {rows, n});
  b.AddOp("Softmax", {"x"}, {"y"});
  b.AddOutput("y");
  const std::shared_ptr<const Model> model = *Model::LoadFromBuffer(*b.Finish());
  std::vector<float> x = RandomValues(rows * n, 6);
  for (float& v : x) v *= 16.0f;
  const TensorView in(DType::kF32, {rows, n}, x.data());
  CompareSessions(state, model, {in});
}
BENCHMARK(BM_Softmax)->Arg(16)->Arg(128)->Arg(512)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace grove

BENCHMARK_MAIN();
