// GPU benchmarks, each against a baseline in the same process (they skip with
// a message where there is no GPU):
//  - BM_MatMul_Grove/M/K/N vs BM_MatMul_Cublas/M/K/N: one MatMul through a
//    grove session on the CUDA backend (device inputs and outputs, plan-cache
//    hit, stream synced per call) against cublasSgemm called directly on the
//    same sizes (synced per call). The ratio is grove's per-op cost over cuBLAS.
//  - BM_Softmax_Grove: a Softmax row kernel through a session, with the GB/s
//    it reaches.
//  - BM_Mlp_Cuda vs BM_Mlp_Cpu: the demo MLP at batch 256 on both backends.
//  - BM_Chain200_Graphs vs BM_Chain200_Eager: a 200-op chain replayed as one
//    CUDA graph vs launched kernel by kernel (SessionOptions::cuda_graphs);
//    BM_Fill200_BareGraph vs BM_Fill200_Launched: 200 tiny kernels captured
//    and replayed through the device API alone vs launched (the floor).
//  - BM_GrowingSeq_{Buckets,Exact,Eager}: a sequence growing 1..64 token by
//    token through the transformer block: one graph per shape bucket
//    (refreshed per length) vs a graph per length vs every kernel launched.
//  - BM_SmallM_Cuda/M/N/K/F: a small-M product, cuBLASLt's first heuristic
//    pick (F = 0) vs the gemv family's cost-model pick (F = 1), 16 back to
//    back (counter us_per_product).
//  - BM_Attention_Cuda/S/F: attention over Q, K, V [1, 8, S, 64] (MatMul with
//    Transpose(K), Div, Softmax, MatMul) planned unfused (F = 0: cuBLASLt and
//    the Div and Softmax kernels) or as one FusedAttention step in the form
//    the step picks (F = 1), its fused kernel (F = 2) or its GEMM form
//    (F = 3: cuBLASLt's products around one probabilities kernel; see
//    cuda::AttentionForm), device inputs and outputs; BM_AttentionF16_Cuda/S/F
//    the same in f16, F = 4 the kernel form without tensor cores;
//    BM_CausalAttentionF16_Cuda/S/F the f16 one with a causal mask;
//    BM_DecodeAttention_Cuda/S/F: one query row a head against S keys.
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <vector>

#include "absl/strings/str_cat.h"
#include "benchmark/benchmark.h"
#include "grove/grove.h"
#include "jit/kernels/fill_params.h"
#include "jit/cost_model.h"
#include "jit/kernel_config.h"
#include "jit/kernels/gemv_params.h"
#include "jit/module.h"
#include "lib/backends/cuda/cuda_kernels.h"
#include "lib/backends/cuda/device.h"
#include "lib/backends/cuda/kernel_choice.h"
#include "lib/backends/cuda/tiled_gemm.h"
#include "lib/backends/cuda/variant_launch.h"
#include "lib/runtime/attention_fusion.h"
#include "models/demo_models.h"

namespace grove {
namespace {

std::shared_ptr<cuda::Device> GpuOrSkip(benchmark::State& state) {
  absl::StatusOr<std::shared_ptr<cuda::Device>> d = cuda::OpenCudaDevice(0);
  if (!d.ok()) {
    state.SkipWithError(std::string(d.status().message()).c_str());
    return nullptr;
  }
  return *d;
}

std::shared_ptr<const Model> OneOpModel(const std::string& op, std::vector<std::vector<int64_t>> in_shapes) {
  ModelBuilder b;
  std::vector<std::string> names;
  for (size_t i = 0; i < in_shapes.size(); ++i) {
    names.push_back(absl::StrCat("x", i));
    std::vector<Dim> dims(in_shapes[i].begin(), in_shapes[i].end());
    b.AddInput(names.back(), DType::kF32, dims);
  }
  b.AddOp(op, names, {"y"});
  b.AddOutput("y");
  return *Model::LoadFromBuffer(*b.Finish());
}

struct DeviceTensor {
  std::shared_ptr<cuda::Device> device;
  void* ptr = nullptr;
  DeviceTensor(std::shared_ptr<cuda::Device> d, size_t bytes) : device(std::move(d)) {
    ptr = device->Allocate(bytes).value();
    device->MemsetAsync(ptr, 0, bytes, nullptr).IgnoreError();
    device->Synchronize(nullptr).IgnoreError();
  }
  ~DeviceTensor() { device->Free(ptr); }
};

void BM_MatMul_Grove(benchmark::State& state) {
  std::shared_ptr<cuda::Device> dev = GpuOrSkip(state);
  if (dev == nullptr) return;
  const int64_t m = state.range(0), k = state.range(1), n = state.range(2);
  SessionOptions options;
  options.device = Device::kCuda;
  options.strict_device = true;
  auto session = Session::Create(OneOpModel("MatMul", {{m, k}, {k, n}}), options);
  if (!session.ok()) {
    state.SkipWithError(std::string(session.status().message()).c_str());
    return;
  }
  DeviceTensor a(dev, m * k * 4), b(dev, k * n * 4), c(dev, m * n * 4);
  std::vector<TensorView> in = {TensorView(DType::kF32, {m, k}, a.ptr), TensorView(DType::kF32, {k, n}, b.ptr)};
  std::vector<TensorView> out = {TensorView(DType::kF32, {m, n}, c.ptr)};
  if (absl::Status s = (*session)->RunInto(in, out); !s.ok()) {
    state.SkipWithError(std::string(s.message()).c_str());
    return;
  }
  for (auto _ : state) benchmark::DoNotOptimize((*session)->RunInto(in, out));
  state.counters["GFLOPS"] = benchmark::Counter(2.0 * m * n * k * state.iterations(), benchmark::Counter::kIsRate,
                                                benchmark::Counter::kIs1000);
}

void BM_MatMul_Cublas(benchmark::State& state) {
  std::shared_ptr<cuda::Device> dev = GpuOrSkip(state);
  if (dev == nullptr) return;
  const int64_t m = state.range(0), k = state.range(1), n = state.range(2);
  DeviceTensor a(dev, m * k * 4), b(dev, k * n * 4), c(dev, m * n * 4);
  cublasHandle_t handle;
  cublasCreate(&handle);
  cudaStream_t stream;
  cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
  cublasSetStream(handle, stream);
  const float alpha = 1, beta = 0;
  // Row-major C = A B is column-major C^T = B^T A^T.
  for (auto _ : state) {
    cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &alpha, static_cast<const float*>(b.ptr), n,
                static_cast<const float*>(a.ptr), k, &beta, static_cast<float*>(c.ptr), n);
    cudaStreamSynchronize(stream);
  }
  state.counters["GFLOPS"] = benchmark::Counter(2.0 * m * n * k * state.iterations(), benchmark::Counter::kIsRate,
                                                benchmark::Counter::kIs1000);
  cublasDestroy(handle);
  cudaStreamDestroy(stream);
}

// Small-M products (decode shapes): A [M, K] times B [K, N], f32, as the
// kernels run them without a session: cuBLASLt's first heuristic answer
// (Device::Gemm, F = 0) or the gemv family's cost-model pick (F = 1; the
// variant a MatMul step takes when its estimate beats the vendor GEMM's,
// lib/backends/cuda/linalg.cc), kSmallMRepeats products back to back an
// iteration, then one synchronisation. Issue 13's goal: the family at least
// cuBLASLt's speed for M = 1..64.
constexpr int kSmallMRepeats = 16;

void BM_SmallM_Cuda(benchmark::State& state) {
  std::shared_ptr<cuda::Device> dev = GpuOrSkip(state);
  if (dev == nullptr) return;
  const int64_t m = state.range(0), n = state.range(1), k = state.range(2);
  const bool gemv = state.range(3) != 0;
  DeviceTensor a(dev, m * k * 4), b(dev, k * n * 4), c(dev, m * n * 4);
  absl::StatusOr<cuda::Stream> stream = dev->CreateStream();
  if (!stream.ok()) {
    state.SkipWithError(std::string(stream.status().message()).c_str());
    return;
  }
  const cuda::GemmDesc g{
      .dtype = DType::kF32, .m = m, .n = n, .k = k, .a = a.ptr, .lda = k, .b = b.ptr, .ldb = n, .c = c.ptr, .ldc = n};
  const jit::KernelProblem problem{"gemv", {DType::kF32}, {{"batch", 1}, {"k", k}, {"m", m}, {"n", n}, {"transb", 0}}};
  const jit::KernelFamily* family = jit::FindKernelFamily("gemv");
  const jit::KernelConfig pick = jit::BestVariant(*family, problem, cuda::DeviceTraits(*dev)).config;
  const cuda::VariantLaunch v = cuda::LaunchOf(pick, problem);
  const grove_k::GemvParams p = cuda::ProductParams(g);
  auto run = [&]() -> absl::Status {
    for (int r = 0; r < kSmallMRepeats; ++r) {
      absl::Status s = gemv ? dev->Launch(v.module, "gemv", v.dims, &p, sizeof(p), *stream) : dev->Gemm(g, *stream);
      if (!s.ok()) return s;
    }
    return dev->Synchronize(*stream);
  };
  if (absl::Status s = run(); !s.ok()) {  // compiles the module, plans the GEMM
    state.SkipWithError(std::string(s.message()).c_str());
    return;
  }
  for (auto _ : state) benchmark::DoNotOptimize(run());
  state.counters["us_per_product"] = benchmark::Counter(
      static_cast<double>(state.iterations()) * kSmallMRepeats, benchmark::Counter::kIsRate | benchmark::Counter::kInvert,
      benchmark::Counter::kIs1000);
  state.SetLabel(gemv ? pick.Name() : "cuBLASLt");
  dev->DestroyStream(*stream);
}
BENCHMARK(BM_SmallM_Cuda)
    ->ArgsProduct({{1, 4, 16, 64}, {768, 3072}, {768, 3072}, {0, 1}})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

void MatMulSizes(benchmark::internal::Benchmark* b) {
  b->Args({1, 768, 768})->Args({64, 1024, 1024})->Args({512, 1024, 4096})->Args({2048, 2048, 2048});
  b->Unit(benchmark::kMicrosecond)->UseRealTime();
}
BENCHMARK(BM_MatMul_Grove)->Apply(MatMulSizes);
BENCHMARK(BM_MatMul_Cublas)->Apply(MatMulSizes);

// Attention over Q [1, 8, sq, 64] and K, V [1, 8, sk, 64] of `dtype`, planned
// unfused (form 0) or fused (1: the step's pick, 2: the kernel form, 3: the
// GEMM form, 4: the kernel form without tensor cores: f16 and bf16 run
// attention_mma in 1 and 2 where the kernel form is picked), device inputs
// and outputs.
void Attention(benchmark::State& state, int64_t sq, int64_t sk, int64_t form, DType dtype = DType::kF32,
               bool causal = false) {
  const bool fused = form != 0;
  std::shared_ptr<cuda::Device> dev = GpuOrSkip(state);
  if (dev == nullptr) return;
  SessionOptions options;
  options.device = Device::kCuda;
  options.strict_device = true;
  auto session = Session::Create(*Model::LoadFromBuffer(*demo::BuildAttention(sq, sk, 8, 64, dtype, causal)), options);
  if (!session.ok()) {
    state.SkipWithError(std::string(session.status().message()).c_str());
    return;
  }
  const size_t el = dtype == DType::kF32 ? 4 : 2;
  const size_t q_bytes = static_cast<size_t>(8 * sq * 64) * el, kv_bytes = static_cast<size_t>(8 * sk * 64) * el;
  DeviceTensor q(dev, q_bytes), k(dev, kv_bytes), v(dev, kv_bytes), y(dev, q_bytes);
  const std::vector<int64_t> q_shape = {1, 8, sq, 64}, kv_shape = {1, 8, sk, 64};
  std::vector<TensorView> in = {TensorView(dtype, q_shape, q.ptr), TensorView(dtype, kv_shape, k.ptr),
                                TensorView(dtype, kv_shape, v.ptr)};
  std::vector<TensorView> out = {TensorView(dtype, q_shape, y.ptr)};
  // All read when the plan is made, by the first run.
  runtime::SetAttentionFusionEnabled(fused);
  cuda::SetAttentionForm(form == 2 || form == 4 ? cuda::AttentionForm::kKernel
                                                : form == 3 ? cuda::AttentionForm::kGemm : cuda::AttentionForm::kAuto);
  cuda::SetAttentionTensorCores(form != 4);
  const absl::Status first = (*session)->RunInto(in, out);
  runtime::SetAttentionFusionEnabled(true);
  cuda::SetAttentionForm(cuda::AttentionForm::kAuto);
  cuda::SetAttentionTensorCores(true);
  if (!first.ok()) {
    state.SkipWithError(std::string(first.message()).c_str());
    return;
  }
  for (auto _ : state) benchmark::DoNotOptimize((*session)->RunInto(in, out));
  state.counters["form"] = static_cast<double>(form);
}

void BM_Attention_Cuda(benchmark::State& state) { Attention(state, state.range(0), state.range(0), state.range(1)); }
BENCHMARK(BM_Attention_Cuda)
    ->ArgsProduct({{256, 512, 1024, 2048}, {1, 2, 3, 0}})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

// The same in f16: the kernel form on tensor cores (2) against cuBLASLt's
// GEMM form (3), the CUDA-core tiled kernel (4) and the unfused chain (0).
void BM_AttentionF16_Cuda(benchmark::State& state) {
  Attention(state, state.range(0), state.range(0), state.range(1), DType::kF16);
}
BENCHMARK(BM_AttentionF16_Cuda)
    ->ArgsProduct({{256, 512, 1024, 2048}, {1, 2, 3, 4, 0}})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

// The same with a causal mask (a Where filling -inf, as a GPT's prefill):
// the tiled kernels stop each tile of query rows at its diagonal, about half
// the work; the GEMM form and the unfused chain compute every score.
void BM_CausalAttentionF16_Cuda(benchmark::State& state) {
  Attention(state, state.range(0), state.range(0), state.range(1), DType::kF16, true);
}
BENCHMARK(BM_CausalAttentionF16_Cuda)
    ->ArgsProduct({{256, 512, 1024, 2048}, {1, 2, 3, 4, 0}})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

// A decode step: one query row a head against S keys (a KV cache).
void BM_DecodeAttention_Cuda(benchmark::State& state) { Attention(state, 1, state.range(0), state.range(1)); }
BENCHMARK(BM_DecodeAttention_Cuda)
    ->ArgsProduct({{128, 512, 2048, 8192}, {1, 2, 3, 0}})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

void BM_Softmax_Grove(benchmark::State& state) {
  std::shared_ptr<cuda::Device> dev = GpuOrSkip(state);
  if (dev == nullptr) return;
  const int64_t rows = state.range(0), cols = state.range(1);
  SessionOptions options;
  options.device = Device::kCuda;
  auto session = Session::Create(OneOpModel("Softmax", {{rows, cols}}), options);
  if (!session.ok()) {
    state.SkipWithError(std::string(session.status().message()).c_str());
    return;
  }
  DeviceTensor x(dev, rows * cols * 4), y(dev, rows * cols * 4);
  std::vector<TensorView> in = {TensorView(DType::kF32, {rows, cols}, x.ptr)};
  std::vector<TensorView> out = {TensorView(DType::kF32, {rows, cols}, y.ptr)};
  if (absl::Status s = (*session)->RunInto(in, out); !s.ok()) {
    state.SkipWithError(std::string(s.message()).c_str());
    return;
  }
  for (auto _ : state) benchmark::DoNotOptimize((*session)->RunInto(in, out));
  state.counters["GB/s"] = benchmark::Counter(8.0 * rows * cols * state.iterations(), benchmark::Counter::kIsRate,
                                              benchmark::Counter::kIs1000);
  state.counters["cpu_fallbacks"] = static_cast<double>((*session)->stats().cpu_fallback_steps);
}
BENCHMARK(BM_Softmax_Grove)->Args({32, 1024})->Args({4096, 4096})->Unit(benchmark::kMicrosecond)->UseRealTime();

void Mlp(benchmark::State& state, Device device) {
  if (device == Device::kCuda && GpuOrSkip(state) == nullptr) return;
  SessionOptions options;
  options.device = device;
  auto session = Session::Create(*Model::LoadFromBuffer(*demo::BuildMlp()), options);
  if (!session.ok()) {
    state.SkipWithError(std::string(session.status().message()).c_str());
    return;
  }
  const int64_t batch = 256;
  std::vector<float> x(batch * 16, 0.5f);
  std::vector<TensorView> in = {TensorView(DType::kF32, {batch, 16}, x.data())};
  for (auto _ : state) benchmark::DoNotOptimize((*session)->Run(in));
  state.counters["cpu_fallbacks"] = static_cast<double>((*session)->stats().cpu_fallback_steps);
}
void BM_Mlp_Cuda(benchmark::State& state) { Mlp(state, Device::kCuda); }
void BM_Mlp_Cpu(benchmark::State& state) { Mlp(state, Device::kCpu); }
BENCHMARK(BM_Mlp_Cuda)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_Mlp_Cpu)->Unit(benchmark::kMicrosecond)->UseRealTime();

// A 200-op chain at batch 1 (launch-bound: each kernel is tiny), device input
// and outputs, graphs on vs off: the ratio is what replaying one graph saves
// over 200 single launches (goal: <= 0.15).
void Chain(benchmark::State& state, GraphMode graphs) {
  std::shared_ptr<cuda::Device> gpu = GpuOrSkip(state);
  if (gpu == nullptr) return;
  SessionOptions options;
  options.device = Device::kCuda;
  options.outputs_on_device = true;
  options.cuda_graphs = graphs;
  auto session = Session::Create(*Model::LoadFromBuffer(*demo::BuildChain(200)), options);
  if (!session.ok()) {
    state.SkipWithError(std::string(session.status().message()).c_str());
    return;
  }
  std::vector<float> x(64, 0.25f);
  void* dx = gpu->Allocate(x.size() * 4).value();
  (void)gpu->CopyAsync(dx, x.data(), x.size() * 4, nullptr);
  (void)gpu->Synchronize(nullptr);
  std::vector<TensorView> in = {TensorView(DType::kF32, {1, 64}, dx)};
  (void)(*session)->Run(in);  // plan, capture
  for (auto _ : state) benchmark::DoNotOptimize((*session)->Run(in));
  const SessionStats s = (*session)->stats();
  state.counters["graph_replays"] = static_cast<double>(s.graph_replays);
  state.counters["launches_outside_graphs"] = static_cast<double>(s.launches_outside_graphs);
  gpu->Free(dx);
}
void BM_Chain200_Graphs(benchmark::State& state) { Chain(state, GraphMode::kOn); }
void BM_Chain200_Eager(benchmark::State& state) { Chain(state, GraphMode::kOff); }
BENCHMARK(BM_Chain200_Graphs)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_Chain200_Eager)->Unit(benchmark::kMicrosecond)->UseRealTime();

// The floor under the chain's ratio: 200 tiny kernels (a fill of 64
// elements each) captured straight through the device API and replayed
// with cudaGraphLaunch, against the same 200 launched one by one; each
// iteration synchronizes once. No session, no planning, no parameter
// refresh: what a graph of 200 nodes costs on this GPU and driver.
void Fill200(benchmark::State& state, bool graph) {
  std::shared_ptr<cuda::Device> gpu = GpuOrSkip(state);
  if (gpu == nullptr) return;
  absl::StatusOr<cuda::Stream> stream = gpu->CreateStream();
  if (!stream.ok()) {
    state.SkipWithError(std::string(stream.status().message()).c_str());
    return;
  }
  void* buf = gpu->Allocate(64 * 4).value();
  const jit::ModuleSpec module{"fill", {DType::kI32}};
  const cuda::LaunchDims dims = cuda::Grid1D(64, 64);
  auto launch_all = [&]() -> absl::Status {
    for (int i = 0; i < 200; ++i) {
      const grove_k::FillParams p{buf, 64, nullptr, static_cast<uint64_t>(i)};
      if (absl::Status st = gpu->Launch(module, "fill", dims, &p, sizeof(p), *stream); !st.ok()) return st;
    }
    return absl::OkStatus();
  };
  absl::Status st = launch_all();  // compiles the module outside the capture
  if (st.ok()) st = gpu->Synchronize(*stream);
  std::unique_ptr<cuda::DeviceGraph> g;
  if (st.ok() && graph) {
    st = gpu->BeginCapture(*stream);
    if (st.ok()) st = launch_all();
    absl::StatusOr<std::unique_ptr<cuda::DeviceGraph>> ended = gpu->EndCapture(*stream);
    if (st.ok()) st = ended.status();
    if (st.ok()) g = *std::move(ended);
  }
  if (!st.ok()) {
    state.SkipWithError(std::string(st.message()).c_str());
  } else {
    for (auto _ : state) {
      absl::Status run = graph ? gpu->LaunchGraph(*g, *stream) : launch_all();
      if (run.ok()) run = gpu->Synchronize(*stream);
      if (!run.ok()) {
        state.SkipWithError(std::string(run.message()).c_str());
        break;
      }
    }
  }
  g.reset();
  gpu->Free(buf);
  gpu->DestroyStream(*stream);
}
void BM_Fill200_BareGraph(benchmark::State& state) { Fill200(state, true); }
void BM_Fill200_Launched(benchmark::State& state) { Fill200(state, false); }
BENCHMARK(BM_Fill200_BareGraph)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_Fill200_Launched)->Unit(benchmark::kMicrosecond)->UseRealTime();

// A sequence that grows token by token (Grape's case): the demo transformer
// block at batch 1, sequence 1..64 in turn per iteration (64 runs, inputs
// written into the session's InputBuffer), three ways: shape buckets (one
// graph per bucket, refreshed per length), exact shapes (a graph per
// length, captured once) and graphs off (every kernel launched). Counters:
// graphs captured and the session's arena bytes (buckets and lengths share
// one stable arena) against the largest plan's arena.
void GrowingSeq(benchmark::State& state, GraphMode graphs, bool buckets) {
  std::shared_ptr<cuda::Device> gpu = GpuOrSkip(state);
  if (gpu == nullptr) return;
  SessionOptions options;
  options.device = Device::kCuda;
  options.outputs_on_device = true;
  options.cuda_graphs = graphs;
  if (!buckets) options.shape_buckets = {{"*", "exact"}};
  auto session = Session::Create(*Model::LoadFromBuffer(*demo::BuildTransformerBlock()), options);
  if (!session.ok()) {
    state.SkipWithError(std::string(session.status().message()).c_str());
    return;
  }
  constexpr int64_t kMaxSeq = 64, kDim = 32;
  std::vector<float> x(kMaxSeq * kDim, 0.125f);
  auto run_all = [&]() -> absl::Status {
    for (int64_t seq = 1; seq <= kMaxSeq; ++seq) {
      absl::StatusOr<TensorView> in = (*session)->InputBuffer("x", std::vector<int64_t>{1, seq, kDim});
      if (!in.ok()) return in.status();
      if (absl::Status st = gpu->CopyAsync(in->data, x.data(), seq * kDim * 4, nullptr); !st.ok()) return st;
      absl::StatusOr<std::vector<TensorView>> out = (*session)->Run({*in});
      if (!out.ok()) return out.status();
    }
    return gpu->Synchronize(nullptr);
  };
  if (absl::Status st = run_all(); !st.ok()) {  // plans, captures
    state.SkipWithError(std::string(st.message()).c_str());
    return;
  }
  for (auto _ : state) {
    if (absl::Status st = run_all(); !st.ok()) {
      state.SkipWithError(std::string(st.message()).c_str());
      return;
    }
  }
  const SessionStats s = (*session)->stats();
  uint64_t largest = 0;
  if (absl::StatusOr<MemoryReport> r = (*session)->Reshape({{1, kMaxSeq, kDim}}); r.ok()) largest = r->arena_bytes;
  state.counters["runs_per_iter"] = static_cast<double>(kMaxSeq);
  state.counters["graphs_captured"] = static_cast<double>(s.graphs_captured);
  state.counters["graph_refreshes"] = static_cast<double>(s.graph_refreshes);
  state.counters["launches_outside_graphs"] = static_cast<double>(s.launches_outside_graphs);
  state.counters["arena_bytes"] = static_cast<double>(s.arena_bytes);
  state.counters["largest_plan_arena_bytes"] = static_cast<double>(largest);
}
void BM_GrowingSeq_Buckets(benchmark::State& state) { GrowingSeq(state, GraphMode::kOn, true); }
void BM_GrowingSeq_Exact(benchmark::State& state) { GrowingSeq(state, GraphMode::kOn, false); }
void BM_GrowingSeq_Eager(benchmark::State& state) { GrowingSeq(state, GraphMode::kOff, false); }
BENCHMARK(BM_GrowingSeq_Buckets)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_GrowingSeq_Exact)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_GrowingSeq_Eager)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace grove

BENCHMARK_MAIN();
