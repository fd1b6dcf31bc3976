// Runtime overheads on CPU, each against a baseline in the same process:
//  - BM_SessionRun_Chain200 vs BM_DirectKernels_Chain200: the same 200-op
//    chain run through Session::Run on a plan-cache hit, and the same kernels,
//    prepared once, invoked back to back on preallocated buffers (an invoke
//    that fails skips the benchmark: the floor would be wrong). The
//    difference divided by the op count is the runtime's per-op overhead
//    (counter ns_overhead_per_op is computed from both in BM_PerOpOverhead).
//  - BM_Plan_Chain200: building an ExecutionPlan (shape inference, folding,
//    memory planning) for a 200-op model: the cost of a plan-cache miss.
//  - BM_StepHistory/B: a 64-step decoder loop keeping every step three ways
//    (scan output, a carried sequence, a growing tensor), timed interleaved.
//  - BM_MemoryPlan/*: arena bytes against the lower bound per demo model.
#include <chrono>
#include <cstdint>
#include <memory>
#include <utility>

#include "benchmark/benchmark.h"
#include "grove/grove.h"
#include "lib/ir/op_registry.h"
#include "lib/runtime/execution_plan.h"
#include "lib/runtime/model_impl.h"
#include "models/demo_models.h"

namespace grove {
namespace {

constexpr int kChainOps = 200;
constexpr int64_t kBatch = 1;  // tiny tensors: the run is mostly overhead

std::shared_ptr<const Model> ChainModel() {
  static std::shared_ptr<const Model> model = *Model::LoadFromBuffer(*demo::BuildChain(kChainOps));
  return model;
}

// The chain's kernels, called directly on buffers planned once: no binding,
// no cache lookup, no executor. The floor the session is measured against.
struct DirectChain {
  std::vector<Tensor> values;
  std::vector<std::vector<TensorView*>> ins, outs;
  std::vector<TensorView> views;
  std::vector<const ir::Node*> nodes;
  std::vector<ir::KernelFn> kernels;
  // Each kernel's prepare ran once, as a plan's does; its workspace.
  std::vector<ir::PreparedKernel> prepared;
  std::vector<std::unique_ptr<uint8_t[]>> workspaces;

  explicit DirectChain(const Model& model) {
    const ir::Graph& g = model.impl().graph();
    views.reserve(g.tensors.size());
    std::vector<int> view_of(g.tensors.size(), -1);
    auto view = [&](int t, std::vector<int64_t> shape) {
      if (view_of[t] < 0) {
        const ir::TensorDecl& d = g.tensors[t];
        if (d.is_weight) {
          views.emplace_back(d.dtype, ir::ToConcrete(d.shape), static_cast<const void*>(d.data));
        } else {
          values.push_back(*Tensor::Create(DType::kF32, shape));
          views.push_back(values.back().view());
        }
        view_of[t] = static_cast<int>(views.size()) - 1;
      }
      return &views[view_of[t]];
    };
    view(g.subgraphs[0].inputs[0], {kBatch, 64});
    for (const ir::Node& n : g.subgraphs[0].nodes) {
      std::vector<TensorView*> in, out;
      for (int t : n.inputs) in.push_back(view(t, {kBatch, 64}));
      for (int t : n.outputs) out.push_back(view(t, {kBatch, 64}));
      ins.push_back(in);
      outs.push_back(out);
      nodes.push_back(&n);
      kernels.push_back(n.def->kernels[0]);
    }
    prepared.resize(nodes.size());
    workspaces.resize(nodes.size());
    for (size_t i = 0; i < nodes.size(); ++i) {
      const ir::PrepareFn prepare = nodes[i]->def->prepares[0];
      if (prepare == nullptr) continue;
      ir::KernelContext ctx(*nodes[i], ins[i], outs[i], nullptr);
      absl::StatusOr<ir::PreparedKernel> p = prepare(ctx);
      if (!p.ok()) continue;  // Run's invoke then reports it (and the floor is wrong: BM_PerOpOverhead checks)
      prepared[i] = *std::move(p);
      // 64 bytes of slack so the workspace can start 64-byte aligned.
      workspaces[i] = std::make_unique<uint8_t[]>(prepared[i].workspace_bytes + 64);
    }
  }
  void* Workspace(size_t i) {
    if (prepared[i].workspace_bytes == 0) return nullptr;
    const auto at = reinterpret_cast<uintptr_t>(workspaces[i].get());
    return reinterpret_cast<void*>((at + 63) / 64 * 64);
  }
  // The kernels' statuses, all OK when every invoke ran.
  bool Run() {
    bool ok = true;
    for (size_t i = 0; i < nodes.size(); ++i) {
      ir::KernelContext ctx(*nodes[i], ins[i], outs[i], nullptr);
      if (prepared[i].params != nullptr) ctx.SetPrepared(&prepared[i], Workspace(i));
      ok &= kernels[i](ctx).ok();
    }
    return ok;
  }
};

void BM_DirectKernels_Chain200(benchmark::State& state) {
  DirectChain chain(*ChainModel());
  if (!chain.Run()) state.SkipWithError("a kernel failed");
  for (auto _ : state) benchmark::DoNotOptimize(chain.Run());
  state.counters["ops"] = kChainOps + 1;
}
BENCHMARK(BM_DirectKernels_Chain200);

void BM_SessionRun_Chain200(benchmark::State& state) {
  auto session = *Session::Create(ChainModel(), {});
  std::vector<float> x(kBatch * 64, 0.5f);
  TensorView in(DType::kF32, {kBatch, 64}, x.data());
  if (!session->Run({in}).ok()) state.SkipWithError("run failed");
  for (auto _ : state) benchmark::DoNotOptimize(session->Run({in}));
  state.counters["ops"] = kChainOps + 1;
}
BENCHMARK(BM_SessionRun_Chain200);

// Both in one benchmark, interleaved, so machine noise hits them alike.
void BM_PerOpOverhead(benchmark::State& state) {
  auto session = *Session::Create(ChainModel(), {});
  DirectChain chain(*ChainModel());
  if (!chain.Run()) state.SkipWithError("a kernel of the direct chain failed: the floor would be wrong");
  std::vector<float> x(kBatch * 64, 0.5f);
  TensorView in(DType::kF32, {kBatch, 64}, x.data());
  double session_ns = 0, direct_ns = 0;
  int64_t n = 0;
  for (auto _ : state) {
    auto t0 = std::chrono::steady_clock::now();
    benchmark::DoNotOptimize(session->Run({in}));
    auto t1 = std::chrono::steady_clock::now();
    chain.Run();
    auto t2 = std::chrono::steady_clock::now();
    session_ns += std::chrono::duration<double, std::nano>(t1 - t0).count();
    direct_ns += std::chrono::duration<double, std::nano>(t2 - t1).count();
    ++n;
  }
  state.counters["session_ns_per_op"] = session_ns / n / (kChainOps + 1);
  state.counters["direct_ns_per_op"] = direct_ns / n / (kChainOps + 1);
  state.counters["ns_overhead_per_op"] = (session_ns - direct_ns) / n / (kChainOps + 1);
  state.counters["session_over_direct"] = session_ns / direct_ns;
}
BENCHMARK(BM_PerOpOverhead);

void BM_Plan_Chain200(benchmark::State& state) {
  const ir::Graph& g = ChainModel()->impl().graph();
  std::vector<runtime::ValueSig> inputs = {{DType::kF32, {32, 64}}};
  for (auto _ : state) {
    auto plan = runtime::ExecutionPlan::Build(g, 0, inputs, {}, nullptr);
    if (!plan.ok()) state.SkipWithError(std::string(plan.status().message()).c_str());
    benchmark::DoNotOptimize(plan);
  }
  state.counters["ops"] = kChainOps + 1;
  state.counters["us_per_op"] = benchmark::Counter(kChainOps + 1, benchmark::Counter::kIsIterationInvariantRate |
                                                                      benchmark::Counter::kInvert);
}
BENCHMARK(BM_Plan_Chain200)->Unit(benchmark::kMicrosecond);

// A 64-step decoder loop keeping every step's state three ways, timed
// interleaved on the same inputs: a Loop scan output (the baseline), a
// sequence carried through the Loop (PyTorch's list.append) and a tensor that
// grows by one row per step (torch.cat in the loop). Counters: each one's
// time per run over the scan's, and the plans the run needed.
void BM_StepHistory(benchmark::State& state) {
  constexpr int64_t kSteps = 64;
  const int64_t batch = state.range(0);
  const demo::History kinds[] = {demo::History::kScan, demo::History::kList, demo::History::kConcat};
  std::vector<std::unique_ptr<Session>> sessions;
  for (demo::History h : kinds) {
    SessionOptions options;
    options.device = Device::kCpu;
    sessions.push_back(*Session::Create(*Model::LoadFromBuffer(*demo::BuildStepHistory(h)), options));
  }
  Tensor steps = *Tensor::Create(DType::kI64, {});
  *steps.as<int64_t>() = kSteps;
  Tensor h0 = *Tensor::Create(DType::kF32, {batch, 64});
  for (int64_t i = 0; i < batch * 64; ++i) h0.as<float>()[i] = 0.01f * static_cast<float>(i % 97);
  const std::vector<Value> inputs = {Value(steps), Value(h0)};
  for (auto& s : sessions) {
    absl::StatusOr<std::vector<Value>> out = s->RunValues(inputs);
    if (!out.ok()) {
      state.SkipWithError(std::string(out.status().message()).c_str());
      return;
    }
    if (out->size() != 1 || (*out)[0].tensor().shape() != std::vector<int64_t>{kSteps, batch, 64}) {
      state.SkipWithError("a history model gave no [steps, batch, 64] history");
      return;
    }
  }
  double ns[3] = {0, 0, 0};
  int64_t n = 0;
  for (auto _ : state) {
    for (int k = 0; k < 3; ++k) {
      auto t0 = std::chrono::steady_clock::now();
      benchmark::DoNotOptimize(sessions[k]->RunValues(inputs));
      ns[k] += std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
    }
    ++n;
  }
  state.counters["scan_us"] = ns[0] / n / 1e3;
  state.counters["list_over_scan"] = ns[1] / ns[0];
  state.counters["concat_over_scan"] = ns[2] / ns[0];
  state.counters["plans_scan"] = static_cast<double>(sessions[0]->stats().plans_created);
  state.counters["plans_list"] = static_cast<double>(sessions[1]->stats().plans_created);
  state.counters["plans_concat"] = static_cast<double>(sessions[2]->stats().plans_created);
}
BENCHMARK(BM_StepHistory)->Arg(1)->Arg(32)->Unit(benchmark::kMicrosecond);

void MemoryPlan(benchmark::State& state, absl::StatusOr<std::vector<uint8_t>> bytes,
                std::vector<std::vector<int64_t>> shapes) {
  auto session = *Session::Create(*Model::LoadFromBuffer(*bytes), {});
  MemoryReport report;
  for (auto _ : state) report = *session->Reshape(shapes);
  state.counters["arena_bytes"] = double(report.arena_bytes);
  state.counters["lower_bound_bytes"] = double(report.lower_bound_bytes);
  state.counters["arena_over_bound"] =
      report.lower_bound_bytes ? double(report.arena_bytes) / double(report.lower_bound_bytes) : 1.0;
}
BENCHMARK_CAPTURE(MemoryPlan, mlp_b512, demo::BuildMlp(), {{512, 16}});
BENCHMARK_CAPTURE(MemoryPlan, transformer_b4_s128, demo::BuildTransformerBlock(), {{4, 128, 32}});
BENCHMARK_CAPTURE(MemoryPlan, early_exit_b16, demo::BuildEarlyExit(), {{16, 8}});
BENCHMARK_CAPTURE(MemoryPlan, loop_n64, demo::BuildLoop(), {{}, {64}, {}});
BENCHMARK_CAPTURE(MemoryPlan, chain200_b32, demo::BuildChain(200), {{32, 64}});

}  // namespace
}  // namespace grove

BENCHMARK_MAIN();
