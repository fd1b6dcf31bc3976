// A Loop inside a CUDA graph (Executor::RunLoopGraph): a Loop whose carried
// shapes hold across trips runs as one graph whose WHILE node runs its trips
// on the device, its trip counter and condition set by a one-thread kernel;
// scan outputs are written inside the body's graph at the trip the device
// counts. The If's graphs, the shared composition and the overview are in
// control_graphs.cc.
#include "lib/runtime/executor.h"

#include <algorithm>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "lib/ir/value_type.h"
#include "lib/runtime/execution_plan.h"
#include "lib/runtime/step_host.h"
#include "lib/runtime/trace.h"

namespace grove::runtime {
namespace {

// The most bytes a Loop's scan outputs may hold for its trip count inside a
// graph (buffers for every trip the count allows, made before it runs).
constexpr uint64_t kMaxScanGraphBytes = uint64_t{1} << 30;

}  // namespace

absl::StatusOr<bool> Executor::RunLoopGraph(PlanInstance& inst, size_t s) {
  const ExecutionPlan& p = *inst.plan;
  const PlanStep& step = p.steps()[s];
  SegmentGraph& g = ControlGraph(inst, s);
  if (!g.no_graph.empty()) return false;
  auto host_driven = [&](absl::string_view why) { return HostDriven(g, *step.node, "each trip's condition read back", why); };
  // A run that can be stopped (a deadline, a cancellation token) keeps its
  // loops on the host, which checks both per trip: a WHILE node's trips run
  // without it, so a long loop would overrun the deadline by its whole length.
  if (interruptible_) return host_driven("the run can be stopped (a deadline or a cancellation token)");

  TensorView* const* ptrs = inst.ptrs.data() + inst.step_ptrs[s];
  const TensorView* const* host = inst.host_ptrs.data() + inst.step_ptrs[s];
  const int num_inputs = static_cast<int>(step.inputs.size());
  const int n = std::max(num_inputs - 2, 0);
  const int k = static_cast<int>(step.outputs.size()) - n;  // scan outputs
  if (k < 0) return host_driven("it has fewer outputs than carried values");
  Backend::LoopStep init;
  init.init = true;
  init.trips_value = std::numeric_limits<int64_t>::max();
  if (num_inputs > 0 && ptrs[0] != nullptr) {
    const TensorView& m = *ptrs[0];
    if (m.dtype != DType::kI64 || m.num_elements() != 1) return host_driven("its trip count is not one int64");
    if (host[0] != nullptr && host[0]->data != nullptr) {
      init.trips_value = *static_cast<const int64_t*>(host[0]->data);
    } else if (backend_.IsDevicePointer(m.data)) {
      init.trips = static_cast<const int64_t*>(m.data);
    } else {
      return host_driven("its trip count is not in device memory");
    }
  }
  if (num_inputs > 1 && ptrs[1] != nullptr) {
    const TensorView& c = *ptrs[1];
    if (c.dtype != DType::kBool || c.num_elements() != 1) return host_driven("its condition is not one bool");
    if (host[1] != nullptr && host[1]->data != nullptr) {
      init.cond_value = *static_cast<const uint8_t*>(host[1]->data) != 0;
    } else if (backend_.IsDevicePointer(c.data)) {
      init.cond = static_cast<const uint8_t*>(c.data);
    } else {
      return host_driven("its condition is not in device memory");
    }
  }
  // Scan outputs: each trip's slice is written inside the graph at the trip
  // the device counts, into buffers for as many trips as the count allows,
  // so the count must be known before the loop runs (read back once when
  // only the device has it; the host-driven loop reads it too).
  int64_t capacity = 0, count = 0;
  if (k > 0) {
    int64_t m = init.trips_value;
    if (init.trips != nullptr) {
      if (absl::Status st = backend_.CopyAsync(&m, init.trips, sizeof(m)); !st.ok()) return st;
      if (absl::Status st = backend_.Synchronize(); !st.ok()) return st;
    }
    if (m == std::numeric_limits<int64_t>::max()) {
      return host_driven("it has scan outputs and no trip count (their length has no bound before the last trip)");
    }
    if (options_.max_body_runs > 0) m = std::min<int64_t>(m, options_.max_body_runs);
    count = std::max<int64_t>(m, 0);
    // Rounded up to a power of two, so a count that changes run by run
    // rarely makes buffers (and graphs) anew.
    capacity = 1;
    while (capacity < m && capacity < (int64_t{1} << 40)) capacity *= 2;
    if (m <= 0) capacity = 0;
  }
  std::vector<TensorView> initial(n);
  for (int i = 0; i < n; ++i) {
    if (ptrs[2 + i] == nullptr) return host_driven("a carried value is omitted");
    initial[i] = *ptrs[2 + i];
    if (ir::IsBoxed(initial[i].dtype)) return host_driven("it carries a sequence or optional");
    if (initial[i].byte_size() > 0 && !backend_.IsDevicePointer(initial[i].data)) {
      return host_driven("a carried value is not in device memory");
    }
  }

  // The loop's own buffers: trip counter, flag, the body's true condition,
  // the carried values and their staging copies.
  if (inst.loop_states.size() != p.steps().size()) inst.loop_states.resize(p.steps().size());
  std::unique_ptr<PlanInstance::LoopState>& state = inst.loop_states[s];
  if (state == nullptr) state = std::make_unique<PlanInstance::LoopState>(&backend_);
  if (absl::Status st = state->scalars.Reserve(16); !st.ok()) return st;
  uint8_t* const scalars = state->scalars.data();
  int64_t* const iter = reinterpret_cast<int64_t*>(scalars);
  uint8_t* const flag = scalars + 8;
  uint8_t* const one = scalars + 9;
  std::vector<TensorView> carried(n), staged(n);
  while (static_cast<int>(state->carried.size()) < n) {
    state->carried.push_back(std::make_unique<Buffer>(&backend_));
    state->staged.push_back(std::make_unique<Buffer>(&backend_));
  }
  for (int i = 0; i < n; ++i) {
    if (absl::Status st = state->carried[i]->Reserve(initial[i].byte_size()); !st.ok()) return st;
    if (absl::Status st = state->staged[i]->Reserve(initial[i].byte_size()); !st.ok()) return st;
    carried[i] = TensorView(initial[i].dtype, initial[i].shape, static_cast<void*>(state->carried[i]->data()));
    staged[i] = TensorView(initial[i].dtype, initial[i].shape, static_cast<void*>(state->staged[i]->data()));
  }

  // The body's plan for these carried shapes.
  const int body_sg = step.node->attrs.GetSubgraph("body");
  if (body_sg <= 0 || body_sg >= static_cast<int>(graph_.subgraphs.size())) return host_driven("it has no body");
  const ir::Subgraph& sg = graph_.subgraphs[body_sg];
  std::vector<TensorView> inputs;
  inputs.reserve(2 + n);
  inputs.push_back(TensorView(DType::kI64, {}, static_cast<void*>(iter)));
  inputs.push_back(TensorView(DType::kBool, {}, static_cast<void*>(one)));
  for (const TensorView& c : carried) inputs.push_back(c);
  std::vector<TensorView> captures;
  uint64_t fingerprint = 0xcbf29ce484222325u;
  auto mix = [&fingerprint](uint64_t x) { fingerprint = (fingerprint ^ x) * 0x100000001b3u; };
  for (int t : sg.captures) {
    const int v = p.ValueOf(t);
    if (v < 0) return absl::InternalError(absl::StrCat("capture '", graph_.tensors[t].name, "' is not in scope"));
    captures.push_back(inst.views[v]);
    mix(reinterpret_cast<uintptr_t>(inst.views[v].data));
  }
  absl::StatusOr<PlanInstance*> planned = GetPlan(body_sg, inputs, captures);
  if (!planned.ok()) return host_driven(absl::StrCat("its body does not plan: ", planned.status().message()));
  PlanInstance& body = **planned;
  ++body.active;
  absl::Cleanup inactive = [&body] { --body.active; };
  const ExecutionPlan& bp = *body.plan;
  if (bp.output_values().size() != static_cast<size_t>(1 + n + k)) return host_driven("its body gives other outputs");
  // Whether the loop runs exactly its trip count (no condition stops it
  // early: none given, and the body's passes its own through or is a true
  // constant), so that the scan outputs' length is known without a read.
  bool runs_count = init.cond == nullptr;
  {
    const PlanValue& c = bp.values()[bp.output_values()[0]];
    if (c.dtype != DType::kBool || !c.shape_known || ir::NumElements(c.shape) != 1) {
      return host_driven("its body's condition is not one bool");
    }
    const bool passed = c.kind == Storage::kInput && c.position == 1;
    const bool constant_true = (c.kind == Storage::kWeight || c.kind == Storage::kFolded) && c.data != nullptr &&
                               *static_cast<const uint8_t*>(c.data) != 0;
    runs_count = runs_count && (passed || constant_true);
  }
  for (int i = 0; i < n; ++i) {
    const PlanValue& o = bp.values()[bp.output_values()[1 + i]];
    if (o.dtype != initial[i].dtype || !o.shape_known || o.shape != initial[i].shape) {
      return host_driven(absl::StrCat("carried value ", i, " changes shape or type across trips"));
    }
  }
  std::vector<TensorView> outs(n + k);
  for (int i = 0; i < n; ++i) {
    const int v = step.outputs[i];
    if (v < 0) continue;
    if (absl::Status st = inst.dynamic[v]->Reserve(initial[i].byte_size()); !st.ok()) return st;
    outs[i] = TensorView(initial[i].dtype, initial[i].shape, static_cast<void*>(inst.dynamic[v]->data()));
  }
  // Each scan output: [trips, slice...], in a buffer for `capacity` trips;
  // its length is the trip count, or the trips the device ran (read back
  // after the graph).
  const int64_t trips_known = runs_count ? (init.cond_value ? count : 0) : -1;
  std::vector<uint64_t> slice_bytes(k, 0);
  for (int j = 0; j < k; ++j) {
    const PlanValue& o = bp.values()[bp.output_values()[1 + n + j]];
    if (!o.shape_known || ir::IsBoxed(o.dtype) || o.dtype == DType::kUnknown) {
      return host_driven(absl::StrCat("its scan output ", j, " has a shape or type known only when the body runs"));
    }
    std::vector<int64_t> shape{capacity};
    shape.insert(shape.end(), o.shape.begin(), o.shape.end());
    absl::StatusOr<uint64_t> bytes = ir::CheckedByteSize(o.dtype, shape, step.node->Describe());
    if (!bytes.ok() || *bytes > kMaxScanGraphBytes) {
      return host_driven(absl::StrCat("its scan output ", j, " for ", capacity, " trips would pass ",
                                      kMaxScanGraphBytes >> 20, " MiB (the host-driven loop grows it trip by trip)"));
    }
    slice_bytes[j] = capacity > 0 ? *bytes / static_cast<uint64_t>(capacity) : 0;
    const int v = step.outputs[n + j];
    if (v < 0) continue;
    if (absl::Status st = inst.dynamic[v]->Reserve(*bytes); !st.ok()) return st;
    shape[0] = trips_known >= 0 ? trips_known : capacity;
    if (trips_known == 0) shape = {0};  // no trip: [0], as the host-driven loop gives
    outs[n + j] = TensorView(o.dtype, std::move(shape), static_cast<void*>(inst.dynamic[v]->data()));
  }
  // After the graph ran: the scan outputs' length, read back unless known.
  auto scan_lengths = [&]() -> absl::Status {
    if (k == 0 || trips_known >= 0) return absl::OkStatus();
    int64_t ran = 0;
    if (absl::Status st = backend_.CopyAsync(&ran, iter, sizeof(ran)); !st.ok()) return st;
    if (absl::Status st = backend_.Synchronize(); !st.ok()) return st;
    if (ran < 0 || ran > capacity) {
      return absl::InternalError(absl::StrCat(step.node->Describe(), ": its graph ran ", ran, " trips for ", capacity,
                                              " slices"));
    }
    for (int j = 0; j < k; ++j) {
      if (step.outputs[n + j] < 0) continue;
      std::vector<int64_t>& shape = inst.views[step.outputs[n + j]].shape;
      if (ran == 0) shape = {0};  // no trip: [0], as the host-driven loop gives
      else shape[0] = ran;
    }
    return absl::OkStatus();
  };
  mix(reinterpret_cast<uintptr_t>(init.trips));
  mix(static_cast<uint64_t>(init.trips_value));
  mix(reinterpret_cast<uintptr_t>(init.cond));
  mix(init.cond_value ? 1 : 0);
  mix(reinterpret_cast<uintptr_t>(scalars));
  for (int i = 0; i < n; ++i) {
    mix(reinterpret_cast<uintptr_t>(initial[i].data));
    mix(reinterpret_cast<uintptr_t>(carried[i].data));
    mix(reinterpret_cast<uintptr_t>(staged[i].data));
    mix(reinterpret_cast<uintptr_t>(outs[i].data));
  }
  mix(static_cast<uint64_t>(capacity));
  for (int j = 0; j < k; ++j) mix(reinterpret_cast<uintptr_t>(outs[n + j].data));
  mix(reinterpret_cast<uintptr_t>(&body));
  mix(body.serial);

  bool hit = false;
  SegmentGraph::Variant* slot = ControlVariant(g, fingerprint, &hit);
  if (slot == nullptr) {
    return host_driven(absl::StrCat("its body or buffers changed more than ", kMaxReplacedGraphs, " times"));
  }
  if (hit) {
    if (absl::Status st = LaunchControlGraph(inst, s, *slot, fingerprint, /*replay=*/true, outs); !st.ok()) return st;
    if (absl::Status st = scan_lengths(); !st.ok()) return st;
    return true;
  }

  if (std::string why = UncapturableBody(body); !why.empty()) return host_driven(absl::StrCat("its body ", why));
  // The body's condition input: true on every trip it runs.
  static const uint8_t kTrue = 1;
  if (absl::Status st = backend_.CopyAsync(one, &kTrue, 1); !st.ok()) return st;
  Backend::LoopStep next = init;
  next.init = false;
  init.iter = next.iter = iter;
  init.flag = next.flag = flag;
  init.cap = next.cap = options_.max_body_runs > 0 ? options_.max_body_runs : (int64_t{1} << 40);

  graphs_.MakeRoom(options_.max_cached_graphs);
  // Captures what `queue` queues as a graph; null after host_driven.
  auto capture = [&](const std::function<absl::Status()>& queue) -> std::unique_ptr<BackendGraph> {
    const int64_t kernels_before = stats_.kernels_run;
    if (absl::Status st = backend_.BeginCapture(); !st.ok()) {
      ++stats_.graph_capture_failures;
      host_driven(absl::StrCat("its capture could not start: ", st.message()));
      return nullptr;
    }
    absl::Status run = queue();
    absl::StatusOr<std::unique_ptr<BackendGraph>> captured = backend_.EndCapture();
    stats_.kernels_run = kernels_before;  // recorded, not run
    if (!run.ok() || !captured.ok()) {
      ++stats_.graph_capture_failures;
      host_driven(absl::StrCat("its capture failed: ", (!run.ok() ? run : captured.status()).message()));
      return nullptr;
    }
    return *std::move(captured);
  };
  auto copy = [&](const TensorView& to, const TensorView& from) {
    return to.byte_size() == 0 ? absl::OkStatus() : backend_.CopyAsync(to.data, from.data, to.byte_size());
  };
  std::unique_ptr<BackendGraph> before = capture([&]() -> absl::Status {
    for (int i = 0; i < n; ++i) {
      if (absl::Status st = copy(carried[i], initial[i]); !st.ok()) return st;
    }
    return backend_.QueueLoopStep(*step.node, init);
  });
  if (before == nullptr) return false;
  std::unique_ptr<BackendGraph> trip = capture([&]() -> absl::Status {
    if (absl::Status st = BindInputs(body, inputs, captures); !st.ok()) return st;
    // The next trip's condition: the body's output (bound now: it may be
    // an input passed through).
    next.cond = static_cast<const uint8_t*>(body.views[bp.output_values()[0]].data);
    for (size_t t = 0; t < bp.steps().size(); ++t) {
      if (bp.steps()[t].outputs_empty) continue;
      if (absl::Status st = RunStep(body, t); !st.ok()) return st;
    }
    // This trip's scan slices, at the trip the counter holds (before the
    // carried values are written: a slice may be one of them).
    for (int j = 0; j < k; ++j) {
      if (step.outputs[n + j] < 0 || slice_bytes[j] == 0) continue;
      Backend::ScanWrite w;
      w.dst = outs[n + j].data;
      w.src = body.views[bp.output_values()[1 + n + j]].data;
      w.bytes = slice_bytes[j];
      w.iter = iter;
      w.limit = capacity;
      if (absl::Status st = backend_.QueueScanWrite(w); !st.ok()) return st;
    }
    // Through staging: a body may return its carried values in another
    // order (a swap), so each is copied out before any is written.
    for (int i = 0; i < n; ++i) {
      if (absl::Status st = copy(staged[i], body.views[bp.output_values()[1 + i]]); !st.ok()) return st;
    }
    for (int i = 0; i < n; ++i) {
      if (absl::Status st = copy(carried[i], staged[i]); !st.ok()) return st;
    }
    return backend_.QueueLoopStep(*step.node, next);
  });
  if (trip == nullptr) return false;
  std::unique_ptr<BackendGraph> after = capture([&]() -> absl::Status {
    for (int i = 0; i < n; ++i) {
      if (step.outputs[i] < 0) continue;
      if (absl::Status st = copy(outs[i], carried[i]); !st.ok()) return st;
    }
    return absl::OkStatus();
  });
  if (after == nullptr) return false;
  std::vector<Backend::GraphPiece> pieces(3);
  pieces[0].graph = std::move(before);
  pieces[1].kind = Backend::PieceKind::kWhile;
  pieces[1].flag = flag;
  pieces[1].bodies.push_back(std::move(trip));
  pieces[2].graph = std::move(after);
  absl::StatusOr<bool> ran =
      ComposeAndLaunch(inst, s, g, *slot, fingerprint, std::move(pieces), outs, "each trip's condition read back");
  if (!ran.ok() || !*ran) return ran;
  if (absl::Status st = scan_lengths(); !st.ok()) return st;
  return true;
}

}  // namespace grove::runtime
