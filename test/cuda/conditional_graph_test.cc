// Conditional graph nodes (CUDA 12.4+; Device::ComposeGraph): on the
// emulated device, which builds them as a GPU does (the set_conditional
// kernel of jit/kernels/graph_cond.cuh sets each node's handle from a flag in
// device memory when the graph replays), at each level a driver may have:
// 2 (IF with an ELSE body), 1 (an else body as a second IF node), 0 (none:
// If runs host-driven). Then an If whose condition the device computes and
// whose branches give the same shapes, run by a session: the branch is picked on the device, with no read back of the
// condition, and the results equal the CPU's and the host-driven run's.
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "examples/models/demo_models.h"
#include "gtest/gtest.h"
#include "jit/kernels/graph_cond_params.h"
#include "lib/backends/backends.h"
#include "lib/backends/cuda/emulated_device.h"
#include "test/cuda_op_test_util.h"
#include "test/model_test_util.h"
#include "test/trace_test_util.h"

namespace grove {
namespace {

using cuda::Device;
using cuda::DeviceGraph;

// A graph of one memset of `value` into the 4 bytes at `dst`.
std::unique_ptr<DeviceGraph> MemsetGraph(Device& dev, void* dst, int value) {
  EXPECT_TRUE(dev.BeginCapture(nullptr).ok());
  EXPECT_TRUE(dev.MemsetAsync(dst, value, 4, nullptr).ok());
  absl::StatusOr<std::unique_ptr<DeviceGraph>> g = dev.EndCapture(nullptr);
  EXPECT_TRUE(g.ok()) << g.status();
  return g.ok() ? *std::move(g) : nullptr;
}

// A graph of one loop_step launch.
std::unique_ptr<DeviceGraph> LoopStepGraph(Device& dev, const grove_k::LoopStepParams& p) {
  EXPECT_TRUE(dev.BeginCapture(nullptr).ok());
  EXPECT_TRUE(dev.Launch(jit::ModuleSpec{"graph_cond", {DType::kU8}}, "loop_step", cuda::LaunchDims{}, &p,
                         sizeof(p), nullptr)
                  .ok());
  absl::StatusOr<std::unique_ptr<DeviceGraph>> g = dev.EndCapture(nullptr);
  EXPECT_TRUE(g.ok()) << g.status();
  return g.ok() ? *std::move(g) : nullptr;
}

template <typename T>
T Read(Device& dev, const void* p) {
  T v{};
  EXPECT_TRUE(dev.CopyAsync(&v, p, sizeof(T), nullptr).ok());
  return v;
}

template <typename T>
void Write(Device& dev, void* p, T v) {
  EXPECT_TRUE(dev.CopyAsync(p, &v, sizeof(T), nullptr).ok());
}

TEST(ConditionalGraphTest, IfNodePicksItsBodyByTheFlagAtEachReplay) {
  for (int level : {1, 2}) {
    SCOPED_TRACE(absl::StrCat("level ", level));
    std::shared_ptr<Device> dev = cuda::NewEmulatedDevice(level);
    ASSERT_EQ(dev->conditional_level(), level);
    void* flag = dev->Allocate(1).value();
    void* out = dev->Allocate(4).value();
    std::vector<Device::GraphPiece> pieces(2);
    pieces[0].graph = MemsetGraph(*dev, out, 0);
    pieces[1].kind = Device::PieceKind::kIf;
    pieces[1].flag = flag;
    pieces[1].bodies.push_back(MemsetGraph(*dev, out, 1));
    pieces[1].bodies.push_back(MemsetGraph(*dev, out, 2));
    absl::StatusOr<std::unique_ptr<DeviceGraph>> g = dev->ComposeGraph(std::move(pieces), nullptr);
    ASSERT_TRUE(g.ok()) << g.status();
    // The memset, the set kernel, the node(s) and the bodies' memsets.
    EXPECT_GE((*g)->num_nodes(), 4);
    for (uint8_t f : {1, 0, 0, 1, 7}) {
      Write<uint8_t>(*dev, flag, f);
      ASSERT_TRUE(dev->LaunchGraph(**g, nullptr).ok());
      EXPECT_EQ(Read<uint32_t>(*dev, out), f != 0 ? 0x01010101u : 0x02020202u) << "flag " << int{f};
    }
    // One body: nothing runs when the flag is 0.
    std::vector<Device::GraphPiece> only_then(1);
    only_then[0].kind = Device::PieceKind::kIf;
    only_then[0].flag = flag;
    only_then[0].bodies.push_back(MemsetGraph(*dev, out, 3));
    absl::StatusOr<std::unique_ptr<DeviceGraph>> g1 = dev->ComposeGraph(std::move(only_then), nullptr);
    ASSERT_TRUE(g1.ok()) << g1.status();
    Write<uint32_t>(*dev, out, 9);
    Write<uint8_t>(*dev, flag, 0);
    ASSERT_TRUE(dev->LaunchGraph(**g1, nullptr).ok());
    EXPECT_EQ(Read<uint32_t>(*dev, out), 9u);
    Write<uint8_t>(*dev, flag, 1);
    ASSERT_TRUE(dev->LaunchGraph(**g1, nullptr).ok());
    EXPECT_EQ(Read<uint32_t>(*dev, out), 0x03030303u);
    dev->Free(flag);
    dev->Free(out);
  }
}

// A WHILE node whose body is the trip counter of jit/kernels/graph_cond.cuh:
// it runs as many trips as the count read on the device, stops at the cap
// (and says so), and not at all for a count of 0 or a false condition.
TEST(ConditionalGraphTest, WhileNodeRunsTheTripsTheDeviceCounts) {
  std::shared_ptr<Device> dev = cuda::NewEmulatedDevice(2);
  auto* iter = static_cast<grove_k::i64*>(dev->Allocate(8).value());
  auto* trips = static_cast<grove_k::i64*>(dev->Allocate(8).value());
  auto* flag = static_cast<uint8_t*>(dev->Allocate(1).value());
  auto* cond = static_cast<uint8_t*>(dev->Allocate(1).value());
  auto* record = static_cast<grove_k::CheckRecord*>(dev->Allocate(sizeof(grove_k::CheckRecord)).value());
  auto make = [&](int64_t cap) {
    grove_k::LoopStepParams p{};
    p.iter = iter;
    p.flag = flag;
    p.trips_ptr = trips;
    p.cond_ptr = cond;
    p.cap = cap;
    p.check = grove_k::CheckSite{record, 5};
    p.init = 1;
    std::vector<Device::GraphPiece> pieces(2);
    pieces[0].graph = LoopStepGraph(*dev, p);
    p.init = 0;
    p.cond_ptr = nullptr;  // the body's condition: true
    p.cond_value = 1;
    pieces[1].kind = Device::PieceKind::kWhile;
    pieces[1].flag = flag;
    pieces[1].bodies.push_back(LoopStepGraph(*dev, p));
    absl::StatusOr<std::unique_ptr<DeviceGraph>> g = dev->ComposeGraph(std::move(pieces), nullptr);
    EXPECT_TRUE(g.ok()) << g.status();
    return g.ok() ? *std::move(g) : nullptr;
  };
  std::unique_ptr<DeviceGraph> g = make(/*cap=*/1000);
  ASSERT_NE(g, nullptr);
  for (int64_t n : {5, 0, 1, 17}) {
    Write<int64_t>(*dev, trips, n);
    Write<uint8_t>(*dev, cond, 1);
    Write<grove_k::CheckRecord>(*dev, record, grove_k::CheckRecord{});
    ASSERT_TRUE(dev->LaunchGraph(*g, nullptr).ok());
    EXPECT_EQ(Read<int64_t>(*dev, iter), n) << n << " trips";
    EXPECT_EQ(Read<uint8_t>(*dev, flag), 0);
    EXPECT_EQ(Read<grove_k::CheckRecord>(*dev, record).site, 0u);
  }
  Write<int64_t>(*dev, trips, 5);
  Write<uint8_t>(*dev, cond, 0);
  ASSERT_TRUE(dev->LaunchGraph(*g, nullptr).ok());
  EXPECT_EQ(Read<int64_t>(*dev, iter), 0) << "a false condition runs no trip";

  std::unique_ptr<DeviceGraph> capped_graph = make(/*cap=*/3);
  ASSERT_NE(capped_graph, nullptr);
  Write<int64_t>(*dev, trips, 10);
  Write<uint8_t>(*dev, cond, 1);
  Write<grove_k::CheckRecord>(*dev, record, grove_k::CheckRecord{});
  ASSERT_TRUE(dev->LaunchGraph(*capped_graph, nullptr).ok());
  EXPECT_EQ(Read<int64_t>(*dev, iter), 3);
  const grove_k::CheckRecord r = Read<grove_k::CheckRecord>(*dev, record);
  EXPECT_EQ(r.site, 5u) << "the cap reports to the check record";
  EXPECT_EQ(r.value, 3);
  EXPECT_EQ(r.bound, 3);
  for (void* p : {static_cast<void*>(iter), static_cast<void*>(trips), static_cast<void*>(flag),
                  static_cast<void*>(cond), static_cast<void*>(record)}) {
    dev->Free(p);
  }
}

TEST(ConditionalGraphTest, DevicesWithoutConditionalNodesSaySo) {
  std::shared_ptr<Device> dev = cuda::NewEmulatedDevice(0);
  EXPECT_EQ(dev->conditional_level(), 0);
  void* flag = dev->Allocate(1).value();
  std::vector<Device::GraphPiece> pieces(1);
  pieces[0].kind = Device::PieceKind::kIf;
  pieces[0].flag = flag;
  pieces[0].bodies.push_back(MemsetGraph(*dev, flag, 0));
  EXPECT_TRUE(absl::IsUnimplemented(dev->ComposeGraph(std::move(pieces), nullptr).status()));
  // Bad pieces are errors, not crashes.
  std::shared_ptr<Device> dev2 = cuda::NewEmulatedDevice(2);
  void* flag2 = dev2->Allocate(1).value();
  std::vector<Device::GraphPiece> none(1);
  none[0].kind = Device::PieceKind::kIf;
  none[0].flag = flag2;
  EXPECT_TRUE(absl::IsInvalidArgument(dev2->ComposeGraph(std::move(none), nullptr).status()));
  std::vector<Device::GraphPiece> host_flag(1);
  uint8_t on_host = 1;
  host_flag[0].kind = Device::PieceKind::kWhile;
  host_flag[0].flag = &on_host;
  host_flag[0].bodies.push_back(MemsetGraph(*dev2, flag2, 0));
  EXPECT_TRUE(absl::IsInvalidArgument(dev2->ComposeGraph(std::move(host_flag), nullptr).status()));
  dev->Free(flag);
  dev2->Free(flag2);
}

// x of [batch, 8] whose mean has the sign `sign`.
Tensor Input(int64_t batch, float sign, uint32_t seed) {
  Tensor t = Tensor::Create(DType::kF32, {batch, 8}).value();
  const std::vector<float> v = testing::RandomF32(batch * 8, seed);
  for (int64_t i = 0; i < batch * 8; ++i) t.as<float>()[i] = sign * (std::abs(v[i]) + 0.1f);
  return t;
}

std::vector<Tensor> RunOn(Session& s, const Tensor& x) {
  absl::StatusOr<std::vector<TensorView>> out = s.Run({x.view()});
  EXPECT_TRUE(out.ok()) << out.status();
  std::vector<Tensor> copies;
  if (!out.ok()) return copies;
  for (const TensorView& v : *out) copies.push_back(Tensor::CopyOf(v).value());
  return copies;
}

std::unique_ptr<Session> CpuSession(std::shared_ptr<const Model> model) {
  SessionOptions options;
  options.device = grove::Device::kCpu;
  return Session::Create(std::move(model), options).value();
}

// A refinement step: an If on ReduceMean(x) > 0 (computed on the device)
// whose branches give the same shape, [batch, 8] (a deep and a shallow
// path, one reading a weight the other does not), then an Add after it.
absl::StatusOr<std::vector<uint8_t>> BuildRefine() {
  ModelBuilder b;
  b.SetProducer("grove test: If with same-shaped branches");
  b.AddSymbol("batch", 1, 64);
  b.AddInput("x", DType::kF32, {"batch", 8});
  b.AddWeight("zero", DType::kF32, {}, std::vector<float>{0.0f});
  std::vector<float> w1(64), w2(64), w3(64);
  for (int i = 0; i < 64; ++i) {
    w1[i] = 0.05f * static_cast<float>((i * 7) % 11) - 0.25f;
    w2[i] = 0.04f * static_cast<float>((i * 5) % 13) - 0.2f;
    w3[i] = 0.03f * static_cast<float>((i * 3) % 17) - 0.2f;
  }
  b.AddWeight("w1", DType::kF32, {8, 8}, w1);
  b.AddWeight("w2", DType::kF32, {8, 8}, w2);
  b.AddWeight("w3", DType::kF32, {8, 8}, w3);
  b.AddOp("ReduceMean", {"x"}, {"m"}, {{"keepdims", int64_t{0}}});
  b.AddOp("Greater", {"m", "zero"}, {"go_deep"});
  const int deep = b.AddSubgraph("deep");
  b.AddOp("MatMul", {"x", "w1"}, {"d1"});
  b.AddOp("Relu", {"d1"}, {"d1a"});
  b.AddOp("MatMul", {"d1a", "w2"}, {"d2"});
  b.AddOutput("d2");
  const int shallow = b.AddSubgraph("shallow");
  b.AddOp("MatMul", {"x", "w3"}, {"s1"});
  b.AddOutput("s1");
  b.SetSubgraph(0);
  b.AddOp("If", {"go_deep"}, {"y"}, {{"then_branch", SubgraphRef{deep}}, {"else_branch", SubgraphRef{shallow}}},
          "refine");
  b.AddOp("Add", {"y", "x"}, {"z"});
  b.AddOutput("z");
  return b.Finish();
}

// With conditional nodes the If is one graph: after both branches were
// seen, a run reads back only its output (no condition), launches no
// kernel outside graphs and captures nothing; without them (level 0) each
// run also reads the condition. Every run equals the CPU's, at two batch
// sizes.
TEST(ConditionalGraphTest, AnIfPicksItsBranchOnTheDevice) {
  std::shared_ptr<const Model> model = testing::LoadOrDie(BuildRefine());
  std::unique_ptr<Session> cpu = CpuSession(model);
  SessionOptions options;
  options.shape_buckets = {{"*", "exact"}};
  int64_t reads_per_run[3] = {0, 0, 0};
  for (int level : {0, 1, 2}) {
    SCOPED_TRACE(absl::StrCat("level ", level));
    std::shared_ptr<Device> dev = cuda::NewEmulatedDevice(level);
    absl::StatusOr<std::unique_ptr<Session>> made = internal::CreateSessionOnDevice(model, options, dev);
    ASSERT_TRUE(made.ok()) << made.status();
    Session& gpu = **made;
    for (int64_t batch : {3, 5}) {
      for (int round = 0; round < 2; ++round) {
        for (float sign : {1.0f, -1.0f}) {
          const Tensor x = Input(batch, sign, 30 + round);
          const std::vector<Tensor> want = RunOn(*cpu, x);
          const std::vector<Tensor> got = RunOn(gpu, x);
          ASSERT_EQ(want.size(), got.size());
          EXPECT_EQ(testing::CompareTensors(want[0], got[0], 1e-5), "")
              << "batch " << batch << " round " << round << " sign " << sign;
        }
      }
    }
    const int64_t captured = gpu.stats().graphs_captured;
    for (float sign : {1.0f, -1.0f, 1.0f}) {
      const Tensor x = Input(5, sign, 77);
      const cuda::DeviceStats before = dev->stats();
      const std::vector<Tensor> got = RunOn(gpu, x);
      const cuda::DeviceStats after = dev->stats();
      const std::vector<Tensor> want = RunOn(*cpu, x);
      ASSERT_EQ(got.size(), want.size());
      EXPECT_EQ(testing::CompareTensors(want[0], got[0], 1e-5), "") << "sign " << sign;
      reads_per_run[level] = after.device_to_host_copies - before.device_to_host_copies;
      if (level > 0) EXPECT_EQ(after.launches, before.launches) << "every kernel ran inside a graph";
    }
    EXPECT_EQ(gpu.stats().graphs_captured, captured) << "a steady run captures nothing";
    // 8 + 3 runs with one If each: in graphs where the device has
    // conditional nodes, host-driven with the reason where it has none.
    const SessionStats st = gpu.stats();
    EXPECT_EQ(st.control_flow_in_graphs, level > 0 ? 11 : 0);
    EXPECT_EQ(st.control_flow_host_driven, level > 0 ? 0 : 11);
    if (level > 0) {
      EXPECT_EQ(st.control_flow_fallback_reason, "");
    } else {
      EXPECT_NE(st.control_flow_fallback_reason.find("has no conditional graph nodes"), std::string::npos)
          << st.control_flow_fallback_reason;
    }
  }
  // Host-driven: the condition and the output; on the device: the output.
  EXPECT_EQ(reads_per_run[0], reads_per_run[2] + 1);
  EXPECT_EQ(reads_per_run[1], reads_per_run[2]);
}

// Traced, an If run as one conditional graph is a graph event timed by
// the device (CUDA events around its launch) with the If's step event of
// no time inside it.
TEST(ConditionalGraphTest, ATracedIfGraphHasTheDevicesTime) {
  std::shared_ptr<const Model> model = testing::LoadOrDie(BuildRefine());
  SessionOptions options;
  options.shape_buckets = {{"*", "exact"}};
  options.trace_path = absl::StrCat(::testing::TempDir(), "/cond_trace_", getpid(), ".json");
  absl::StatusOr<std::unique_ptr<Session>> made =
      internal::CreateSessionOnDevice(model, options, cuda::NewEmulatedDevice(2));
  ASSERT_TRUE(made.ok()) << made.status();
  for (float sign : {1.0f, -1.0f, 1.0f}) RunOn(**made, Input(3, sign, 5));
  ASSERT_EQ((*made)->stats().control_flow_in_graphs, 3);
  made->reset();
  std::string error;
  const std::vector<testing::TraceEventView> events =
      testing::CompleteEvents(testing::ReadTextFile(options.trace_path), &error);
  ASSERT_EQ(error, "");
  int graphs = 0, steps = 0;
  for (const testing::TraceEventView& e : events) {
    if (e.cat == "graph" && e.name.find("(conditional graph)") != std::string::npos) {
      ++graphs;
      EXPECT_EQ(e.args["clock"].string, "cuda_events");
      EXPECT_GT(e.args["device_us"].number, 0);
      EXPECT_NEAR(e.dur, e.args["device_us"].number, 0.0015);
    }
    if (e.cat == "step" && e.args["graph"].string == "conditional") {
      ++steps;
      EXPECT_EQ(e.args["op"].string, "If");
      EXPECT_FALSE(e.args["timed"].boolean);
    }
  }
  EXPECT_EQ(graphs, 3);
  EXPECT_EQ(steps, 3);
  std::remove(options.trace_path.c_str());
}

// A Loop with carried values only: v doubled plus the trip number, and a
// trip counter c, until the trip count or until sum(v) reaches `limit`;
// then an Add after it. `scan`: the body also stacks each trip's v and trip
// number as scan outputs (outputs vs [trips, n] and is [trips]);
// `stop_early` false: the body passes its condition through (only the trip
// count stops it); `with_count` false: no M (a true constant starts it and
// the body's condition stops it).
absl::StatusOr<std::vector<uint8_t>> BuildCarriedLoop(bool scan = false, bool stop_early = true,
                                                      bool with_count = true) {
  ModelBuilder b;
  b.SetProducer(scan ? "grove test: Loop with scan outputs" : "grove test: Loop with fixed carried shapes");
  b.AddSymbol("n", 1, 1024);
  b.AddInput("trip_count", DType::kI64, {});
  b.AddInput("x", DType::kF32, {"n"});
  b.AddInput("limit", DType::kF32, {});
  b.AddWeight("two", DType::kF32, {}, std::vector<float>{2.0f});
  b.AddWeight("one", DType::kF32, {}, std::vector<float>{1.0f});
  b.AddWeight("zero", DType::kF32, {}, std::vector<float>{0.0f});
  if (!with_count) b.AddWeight("go", DType::kBool, {}, std::vector<uint8_t>{1});
  const int body = b.AddSubgraph("body");
  b.AddInput("i", DType::kI64, {});
  b.AddInput("cond_in", DType::kBool, {});
  b.AddInput("v", DType::kF32, {"n"});
  b.AddInput("c", DType::kF32, {});
  b.AddOp("Mul", {"v", "two"}, {"doubled"});
  b.AddOp("Cast", {"i"}, {"i_f"}, {{"to", int64_t(DType::kF32)}});
  b.AddOp("Add", {"doubled", "i_f"}, {"v_next"});
  b.AddOp("Add", {"c", "one"}, {"c_next"});
  b.AddOp("ReduceSum", {"v_next"}, {"sum"}, {{"keepdims", int64_t{0}}});
  b.AddOp("Less", {"sum", "limit"}, {"keep_going"});
  b.AddOutput(stop_early ? "keep_going" : "cond_in");
  b.AddOutput("v_next");
  b.AddOutput("c_next");
  std::vector<std::string> outs = {"final", "trips"};
  if (scan) {
    b.AddOutput("v_next");
    b.AddOutput("i_f");
    outs.push_back("vs");
    outs.push_back("is");
  }
  b.SetSubgraph(0);
  b.AddOp("Loop", {with_count ? "trip_count" : "", with_count ? "" : "go", "x", "zero"}, outs,
          {{"body", SubgraphRef{body}}}, "doubling");
  b.AddOp("Add", {"final", "x"}, {"y"});
  b.AddOutput("y");
  b.AddOutput("trips");
  if (scan) {
    b.AddOutput("vs");
    b.AddOutput("is");
  }
  return b.Finish();
}

std::vector<Tensor> RunLoop(Session& s, int64_t trips, int64_t n, float limit, absl::Status* status = nullptr) {
  Tensor m = Tensor::Create(DType::kI64, {}).value();
  m.as<int64_t>()[0] = trips;
  Tensor x = Tensor::Create(DType::kF32, {n}).value();
  for (int64_t i = 0; i < n; ++i) x.as<float>()[i] = 0.25f * static_cast<float>(i % 5) + 0.5f;
  Tensor l = Tensor::Create(DType::kF32, {}).value();
  l.as<float>()[0] = limit;
  absl::StatusOr<std::vector<TensorView>> out = s.Run({m.view(), x.view(), l.view()});
  if (status != nullptr) *status = out.status();
  if (status == nullptr) EXPECT_TRUE(out.ok()) << out.status();
  std::vector<Tensor> copies;
  if (!out.ok()) return copies;
  for (const TensorView& v : *out) copies.push_back(Tensor::CopyOf(v).value());
  return copies;
}

// The Loop tests' cases (trips, length, limit: 0 to 9 trips, two lengths,
// some stopped by the limit), run twice over on `gpu`, each run equal to
// the CPU's.
void ExpectLoopCasesMatchCpu(Session& cpu, Session& gpu) {
  struct Case {
    int64_t trips, n;
    float limit;
  };
  const Case cases[] = {{3, 6, 1e9f}, {0, 6, 1e9f}, {9, 6, 1e9f}, {9, 6, 100.0f}, {1, 6, 1e9f}, {5, 11, 60.0f}};
  for (int pass = 0; pass < 2; ++pass) {
    for (const Case& c : cases) {
      const std::vector<Tensor> want = RunLoop(cpu, c.trips, c.n, c.limit);
      const std::vector<Tensor> got = RunLoop(gpu, c.trips, c.n, c.limit);
      ASSERT_EQ(want.size(), got.size());
      for (size_t i = 0; i < want.size(); ++i) {
        EXPECT_EQ(testing::CompareTensors(want[i], got[i], 1e-5), "")
            << "pass " << pass << " trips " << c.trips << " n " << c.n << " limit " << c.limit << " output " << i;
      }
    }
  }
}

// For each conditional level of the emulated device (0: none, 1: IF and
// WHILE nodes, 2: with ELSE bodies), a session with exact shapes whose runs
// of the Loop cases equal the CPU's, then `check` on it.
void AtEachLevel(std::shared_ptr<const Model> model,
                 const std::function<void(int level, Device& dev, Session& gpu)>& check) {
  std::unique_ptr<Session> cpu = CpuSession(model);
  SessionOptions options;
  options.shape_buckets = {{"*", "exact"}};
  for (int level : {0, 1, 2}) {
    SCOPED_TRACE(absl::StrCat("level ", level));
    std::shared_ptr<Device> dev = cuda::NewEmulatedDevice(level);
    absl::StatusOr<std::unique_ptr<Session>> gpu = internal::CreateSessionOnDevice(model, options, dev);
    ASSERT_TRUE(gpu.ok()) << gpu.status();
    ExpectLoopCasesMatchCpu(*cpu, **gpu);
    check(level, *dev, **gpu);
  }
}

// A Loop whose carried shapes hold is one graph with a WHILE node: its
// trips are counted and decided on the device (by the trip count and by the
// body's condition), so a steady run reads back only its outputs whatever
// the number of trips, where host-driven it reads each trip's condition.
// Every run equals the CPU's, at 0 to 9 trips and two lengths.
TEST(ConditionalGraphTest, ALoopRunsItsTripsOnTheDevice) {
  std::shared_ptr<const Model> model = testing::LoadOrDie(BuildCarriedLoop());
  int64_t reads[3][2] = {};
  AtEachLevel(model, [&](int level, Device& dev, Session& gpu) {
    const int64_t captured = gpu.stats().graphs_captured;
    for (int k = 0; k < 2; ++k) {
      const int64_t trips = k == 0 ? 2 : 8;
      const cuda::DeviceStats before = dev.stats();
      RunLoop(gpu, trips, 6, 1e9f);
      const cuda::DeviceStats after = dev.stats();
      reads[level][k] = after.device_to_host_copies - before.device_to_host_copies;
      if (level > 0) EXPECT_EQ(after.launches, before.launches) << "every kernel ran inside a graph";
    }
    EXPECT_EQ(gpu.stats().graphs_captured, captured) << "a steady run captures nothing";
    EXPECT_EQ(gpu.stats().control_flow_in_graphs, level > 0 ? 14 : 0);
    EXPECT_EQ(gpu.stats().control_flow_host_driven, level > 0 ? 0 : 14);
  });
  // On the device: the same reads at 2 and 8 trips; host-driven: one more
  // per trip.
  EXPECT_EQ(reads[2][0], reads[2][1]);
  EXPECT_EQ(reads[1][1], reads[2][1]);
  EXPECT_EQ(reads[0][1] - reads[0][0], 6);
}

// SessionOptions::max_body_runs bounds the trips a WHILE node runs: the run
// fails with the Loop's message, and the session stays usable.
TEST(ConditionalGraphTest, ALoopInAGraphStopsAtTheBodyRunLimit) {
  std::shared_ptr<const Model> model = testing::LoadOrDie(BuildCarriedLoop());
  SessionOptions options;
  options.max_body_runs = 5;
  std::shared_ptr<Device> dev = cuda::NewEmulatedDevice(2);
  std::unique_ptr<Session> gpu = internal::CreateSessionOnDevice(model, options, dev).value();
  RunLoop(*gpu, 3, 4, 1e9f);  // captured and run within the limit
  absl::Status status;
  RunLoop(*gpu, 50, 4, 1e9f, &status);
  EXPECT_FALSE(status.ok());
  EXPECT_NE(status.message().find("Loop 'doubling'"), std::string::npos) << status;
  EXPECT_NE(status.message().find("inside its CUDA graph"), std::string::npos) << status;
  EXPECT_NE(status.message().find("max_body_runs"), std::string::npos) << status;
  const std::vector<Tensor> after = RunLoop(*gpu, 2, 4, 1e9f);
  EXPECT_EQ(after.size(), 2u);
}

// A Loop with scan outputs is one graph with a WHILE node too: each trip's
// slices are written at the trip the device counts. The trip count is read
// once before (the buffers are made for it) and, where the body's
// condition can stop it early, the trips run once after; so a steady run
// reads back as much at 2 trips as at 8, where host-driven it reads each
// trip's condition. Every run equals the CPU's, at 0 to 9 trips, two
// lengths, stopped by the count or by the condition.
TEST(ConditionalGraphTest, ALoopWithScanOutputsWritesThemOnTheDevice) {
  for (bool stop_early : {false, true}) {
    SCOPED_TRACE(stop_early ? "the body's condition stops it" : "the trip count stops it");
    std::shared_ptr<const Model> model = testing::LoadOrDie(BuildCarriedLoop(/*scan=*/true, stop_early));
    int64_t reads[3][2] = {};
    AtEachLevel(model, [&](int level, Device& dev, Session& gpu) {
      EXPECT_EQ(gpu.stats().control_flow_in_graphs, level > 0 ? 12 : 0) << gpu.stats().control_flow_fallback_reason;
      EXPECT_EQ(gpu.stats().control_flow_host_driven, level > 0 ? 0 : 12);
      const int64_t captured = gpu.stats().graphs_captured;
      for (int k = 0; k < 2; ++k) {
        const int64_t trips = k == 0 ? 2 : 8;
        RunLoop(gpu, trips, 6, 1e9f);  // buffers for this count (a power of two: 2, then 8)
        const cuda::DeviceStats before = dev.stats();
        const std::vector<Tensor> got = RunLoop(gpu, trips, 6, 1e9f);
        const cuda::DeviceStats after = dev.stats();
        ASSERT_EQ(got.size(), 4u);
        EXPECT_EQ(got[2].shape(), (std::vector<int64_t>{trips, 6}));
        EXPECT_EQ(got[3].shape(), (std::vector<int64_t>{trips}));
        reads[level][k] = after.device_to_host_copies - before.device_to_host_copies;
        if (level > 0) EXPECT_EQ(after.launches, before.launches) << "every kernel ran inside a graph";
      }
      if (level > 0) EXPECT_LE(gpu.stats().graphs_captured - captured, 2) << "at most one capture per new count";
    });
    EXPECT_EQ(reads[2][0], reads[2][1]);
    EXPECT_EQ(reads[1][1], reads[2][1]);
    EXPECT_EQ(reads[0][1] - reads[0][0], 6);
  }
}

// Without a trip count the scan outputs' length has no bound before the
// last trip: the host drives the loop (and says why), with the same results.
TEST(ConditionalGraphTest, AScanLoopWithoutATripCountStaysHostDriven) {
  std::shared_ptr<const Model> model =
      testing::LoadOrDie(BuildCarriedLoop(/*scan=*/true, /*stop_early=*/true, /*with_count=*/false));
  std::unique_ptr<Session> cpu = CpuSession(model);
  std::shared_ptr<Device> dev = cuda::NewEmulatedDevice(2);
  std::unique_ptr<Session> gpu = internal::CreateSessionOnDevice(model, {}, dev).value();
  for (float limit : {100.0f, 40.0f}) {
    const std::vector<Tensor> want = RunLoop(*cpu, 1, 6, limit);
    const std::vector<Tensor> got = RunLoop(*gpu, 1, 6, limit);
    ASSERT_EQ(want.size(), got.size());
    for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(testing::CompareTensors(want[i], got[i], 1e-5), "");
  }
  const SessionStats st = gpu->stats();
  EXPECT_EQ(st.control_flow_in_graphs, 0);
  EXPECT_EQ(st.control_flow_host_driven, 2);
  EXPECT_NE(st.control_flow_fallback_reason.find("no trip count"), std::string::npos)
      << st.control_flow_fallback_reason;
}

// Branches whose outputs differ in shape (the early-exit demo: [batch, 8]
// or [batch, 3]) stay host-driven, with the same results.
TEST(ConditionalGraphTest, BranchesOfDifferentShapesStayHostDriven) {
  std::shared_ptr<const Model> model = testing::LoadOrDie(demo::BuildEarlyExit());
  std::unique_ptr<Session> cpu = CpuSession(model);
  std::shared_ptr<Device> dev = cuda::NewEmulatedDevice(2);
  std::unique_ptr<Session> gpu = internal::CreateSessionOnDevice(model, {}, dev).value();
  for (float sign : {1.0f, -1.0f, 1.0f}) {
    const Tensor x = Input(3, sign, 5);
    const std::vector<Tensor> want = RunOn(*cpu, x);
    const cuda::DeviceStats before = dev->stats();
    const std::vector<Tensor> got = RunOn(*gpu, x);
    ASSERT_EQ(want.size(), got.size());
    EXPECT_EQ(testing::CompareTensors(want[0], got[0], 1e-5), "") << "sign " << sign;
    EXPECT_EQ(dev->stats().device_to_host_copies - before.device_to_host_copies, 2) << "the condition and y";
  }
  const SessionStats st = gpu->stats();
  EXPECT_EQ(st.control_flow_in_graphs, 0);
  EXPECT_EQ(st.control_flow_host_driven, 3);
  EXPECT_NE(st.control_flow_fallback_reason.find("different shapes"), std::string::npos)
      << st.control_flow_fallback_reason;
  // On the CPU, no If counts either way.
  EXPECT_EQ(cpu->stats().control_flow_in_graphs + cpu->stats().control_flow_host_driven, 0);
}

}  // namespace
}  // namespace grove
