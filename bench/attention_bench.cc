// Fused attention (lib/runtime/attention_fusion.h) against the unfused chain
// on the CPU, in one process, interleaved: each iteration runs one session
// whose plans fused the chain and one whose plans kept its steps (the
// switch is read when a shape is first planned). Q, K, V [1, 8, S, 64].
// Counters: the median milliseconds of each and unfused_over_fused.
//  - BM_Attention/S: MatMul(Q, Transpose(K)), Div by sqrt(64), Softmax,
//    MatMul with V (no mask).
//  - BM_CausalAttention/S: the same with Where(mask, -inf, scores) before
//    the Softmax, mask a bool [1, 1, S, S] input (true above the diagonal).
//  - BM_DecodeAttention/S: one query against S keys (a decode step with a
//    KV cache: Q [1, 8, 1, 64], K and V [1, 8, S, 64]), no mask.
//
//   build/bench/attention_bench --benchmark_min_time=1
#include <algorithm>
#include <chrono>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "benchmark/benchmark.h"
#include "grove/grove.h"
#include "lib/runtime/attention_fusion.h"

namespace grove {
namespace {

constexpr int64_t kHeads = 8, kDim = 64;

std::vector<float> RandomValues(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = dist(rng);
  return v;
}

std::shared_ptr<const Model> AttentionModel(bool causal, bool decode) {
  ModelBuilder b;
  b.AddSymbol("s", 1, 4096);
  b.AddInput("q", DType::kF32, {1, kHeads, decode ? Dim(1) : Dim("s"), kDim});
  for (const char* name : {"k", "v"}) b.AddInput(name, DType::kF32, {1, kHeads, "s", kDim});
  b.AddWeight("scale", DType::kF32, {}, std::vector<float>{8.0f});
  b.AddOp("Transpose", {"k"}, {"kt"}, {{"perm", std::vector<int64_t>{0, 1, 3, 2}}});
  b.AddOp("MatMul", {"q", "kt"}, {"scores"});
  b.AddOp("Div", {"scores", "scale"}, {"scaled"});
  std::string probs_in = "scaled";
  if (causal) {
    b.AddInput("mask", DType::kBool, {1, 1, "s", "s"});
    b.AddWeight("ninf", DType::kF32, {}, std::vector<float>{-std::numeric_limits<float>::infinity()});
    b.AddOp("Where", {"mask", "ninf", "scaled"}, {"masked"});
    probs_in = "masked";
  }
  b.AddOp("Softmax", {probs_in}, {"probs"}, {{"axis", int64_t{-1}}});
  b.AddOp("MatMul", {"probs", "v"}, {"y"});
  b.AddOutput("y");
  return *Model::LoadFromBuffer(*b.Finish());
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

void CompareFusedUnfused(benchmark::State& state, bool causal, bool decode = false) {
  const int64_t s = state.range(0), sq = decode ? 1 : s;
  const std::shared_ptr<const Model> model = AttentionModel(causal, decode);
  const int64_t n = kHeads * s * kDim;
  const std::vector<float> q = RandomValues(kHeads * sq * kDim, 1), k = RandomValues(n, 2), v = RandomValues(n, 3);
  std::vector<uint8_t> mask(static_cast<size_t>(s * s));
  for (int64_t i = 0; i < s; ++i) {
    for (int64_t j = 0; j < s; ++j) mask[i * s + j] = j > i ? 1 : 0;
  }
  std::vector<TensorView> inputs = {TensorView(DType::kF32, {1, kHeads, sq, kDim}, q.data()),
                                    TensorView(DType::kF32, {1, kHeads, s, kDim}, k.data()),
                                    TensorView(DType::kF32, {1, kHeads, s, kDim}, v.data())};
  if (causal) inputs.push_back(TensorView(DType::kBool, {1, 1, s, s}, mask.data()));
  SessionOptions options;
  options.device = Device::kCpu;
  std::unique_ptr<Session> fused = *Session::Create(model, options);
  std::unique_ptr<Session> unfused = *Session::Create(model, options);
  auto run = [&](Session& session, bool fuse) {
    runtime::SetAttentionFusionEnabled(fuse);  // the plan's choice, made at the first run
    const auto t0 = std::chrono::steady_clock::now();
    absl::StatusOr<std::vector<TensorView>> out = session.Run(inputs);
    const auto t1 = std::chrono::steady_clock::now();
    if (!out.ok()) state.SkipWithError(std::string(out.status().message()).c_str());
    return std::chrono::duration<double, std::milli>(t1 - t0).count();
  };
  run(*fused, true);  // plans
  run(*unfused, false);
  runtime::SetAttentionFusionEnabled(true);
  std::vector<double> fused_ms, unfused_ms;
  for (auto _ : state) {
    fused_ms.push_back(run(*fused, true));
    unfused_ms.push_back(run(*unfused, false));
  }
  runtime::SetAttentionFusionEnabled(true);
  const double f = Median(fused_ms), u = Median(unfused_ms);
  state.counters["fused_ms"] = f;
  state.counters["unfused_ms"] = u;
  state.counters["unfused_over_fused"] = f > 0 ? u / f : 0;
}

void BM_Attention(benchmark::State& state) { CompareFusedUnfused(state, false); }
BENCHMARK(BM_Attention)->Arg(64)->Arg(128)->Arg(256)->Arg(512)->Unit(benchmark::kMillisecond);

void BM_CausalAttention(benchmark::State& state) { CompareFusedUnfused(state, true); }
BENCHMARK(BM_CausalAttention)->Arg(64)->Arg(128)->Arg(256)->Arg(512)->Unit(benchmark::kMillisecond);

void BM_DecodeAttention(benchmark::State& state) { CompareFusedUnfused(state, false, true); }
BENCHMARK(BM_DecodeAttention)->Arg(512)->Arg(2048)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace grove

BENCHMARK_MAIN();
