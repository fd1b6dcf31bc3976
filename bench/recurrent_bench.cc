// One f32 LSTM layer (with bias and initial states, Y, Y_h and Y_c out) on
// the CPU's paths, in one process, interleaved: grove's fused kernel
// (lib/backends/cpu/recurrent_lstm.h; on the CPU's best ISA, and on AVX2),
// oneDNN's RNN primitive and the reference kernel, each a session whose plan
// was made with its path (the switches are read at the first run of a
// shape). Counters: the median microseconds of each (fused_us, avx2_us,
// onednn_us, reference_us) and onednn_over_fused.
//  - BM_Lstm/batch/seq/input/hidden.
//
//   build/bench/recurrent_bench --benchmark_min_time=1
#include <algorithm>
#include <chrono>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "benchmark/benchmark.h"
#include "grove/grove.h"
#include "lib/backends/cpu/onednn.h"
#include "lib/backends/cpu/recurrent_lstm.h"

namespace grove {
namespace {

std::vector<float> RandomValues(int64_t n, uint32_t seed, float scale) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-scale, scale);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = dist(rng);
  return v;
}

std::vector<uint8_t> Bytes(const std::vector<float>& v) {
  const auto* p = reinterpret_cast<const uint8_t*>(v.data());
  return std::vector<uint8_t>(p, p + v.size() * sizeof(float));
}

std::shared_ptr<const Model> Lstm(int64_t input, int64_t hidden) {
  ModelBuilder b;
  b.AddSymbol("seq", 1, 4096);
  b.AddSymbol("batch", 1, 4096);
  b.AddInput("x", DType::kF32, {"seq", "batch", input});
  b.AddInput("h0", DType::kF32, {1, "batch", hidden});
  b.AddInput("c0", DType::kF32, {1, "batch", hidden});
  b.AddWeight("w", DType::kF32, {1, 4 * hidden, input}, Bytes(RandomValues(4 * hidden * input, 1, 0.3f)));
  b.AddWeight("r", DType::kF32, {1, 4 * hidden, hidden}, Bytes(RandomValues(4 * hidden * hidden, 2, 0.3f)));
  b.AddWeight("b", DType::kF32, {1, 8 * hidden}, Bytes(RandomValues(8 * hidden, 3, 0.3f)));
  b.AddOp("LSTM", {"x", "w", "r", "b", "", "h0", "c0"}, {"y", "y_h", "y_c"}, {{"hidden_size", hidden}});
  b.AddOutput("y");
  b.AddOutput("y_h");
  b.AddOutput("y_c");
  return *Model::LoadFromBuffer(*b.Finish());
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

void BM_Lstm(benchmark::State& state) {
  const int64_t batch = state.range(0), seq = state.range(1), input = state.range(2), hidden = state.range(3);
  const std::shared_ptr<const Model> model = Lstm(input, hidden);
  const std::vector<float> x = RandomValues(seq * batch * input, 4, 1.0f);
  const std::vector<float> h0 = RandomValues(batch * hidden, 5, 0.5f), c0 = RandomValues(batch * hidden, 6, 0.5f);
  const std::vector<TensorView> inputs = {TensorView(DType::kF32, {seq, batch, input}, x.data()),
                                          TensorView(DType::kF32, {1, batch, hidden}, h0.data()),
                                          TensorView(DType::kF32, {1, batch, hidden}, c0.data())};
  SessionOptions options;
  options.device = Device::kCpu;
  constexpr int kPaths = 4;  // fused, fused on AVX2, oneDNN, reference
  std::unique_ptr<Session> sessions[kPaths];
  for (auto& s : sessions) s = *Session::Create(model, options);
  auto run = [&](int path) {
    // The plan's choice, made at the first run.
    cpu::ScopedLstmKernel fused(path <= 1 ? cpu::LstmKernelMode::kAlways : cpu::LstmKernelMode::kOff, path == 0);
    cpu::ScopedOneDnn onednn(path == 2);
    const auto t0 = std::chrono::steady_clock::now();
    absl::StatusOr<std::vector<TensorView>> out = sessions[path]->Run(inputs);
    const auto t1 = std::chrono::steady_clock::now();
    if (!out.ok()) state.SkipWithError(std::string(out.status().message()).c_str());
    return std::chrono::duration<double, std::micro>(t1 - t0).count();
  };
  std::vector<double> us[kPaths];
  for (int path = 0; path < kPaths; ++path) run(path);  // plans
  for (auto _ : state) {
    for (int path = 0; path < kPaths; ++path) us[path].push_back(run(path));
  }
  const double fused = Median(us[0]), onednn = Median(us[2]);
  state.counters["fused_us"] = fused;
  state.counters["avx2_us"] = Median(us[1]);
  state.counters["onednn_us"] = onednn;
  state.counters["reference_us"] = Median(us[3]);
  state.counters["onednn_over_fused"] = fused > 0 ? onednn / fused : 0;
}
BENCHMARK(BM_Lstm)
    ->Args({1, 1, 16, 32})
    ->Args({1, 128, 16, 32})
    ->Args({4, 64, 16, 32})
    ->Args({4, 64, 32, 32})
    ->Args({16, 64, 32, 32})
    ->Args({64, 64, 32, 32})
    ->Args({1, 64, 64, 128})
    ->Args({8, 64, 64, 128})
    ->Args({16, 64, 128, 128})
    ->Args({1, 32, 128, 256})
    ->Args({8, 32, 128, 256})
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace grove

BENCHMARK_MAIN();
