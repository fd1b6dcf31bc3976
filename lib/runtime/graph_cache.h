// The CUDA graphs a session holds, across all its plans: each plan segment's
// graph lives in its PlanInstance (SegmentGraph) and is registered here, so
// the session can count them (SessionStats::graphs_held, graph_nodes,
// graph_bytes) and drop the least recently used past
// SessionOptions::max_cached_graphs. A graph goes with its plan when the
// plan cache drops the plan.
#ifndef GROVE_LIB_RUNTIME_GRAPH_CACHE_H_
#define GROVE_LIB_RUNTIME_GRAPH_CACHE_H_

#include <array>
#include <cstdint>
#include <list>
#include <memory>
#include <string>

#include "grove/grove.h"
#include "lib/runtime/backend.h"

namespace grove::runtime {

class GraphCache;

// One captured graph, held by its segment's slot (SegmentGraph::held).
class HeldGraph {
 public:
  ~HeldGraph();
  HeldGraph(const HeldGraph&) = delete;
  HeldGraph& operator=(const HeldGraph&) = delete;
  const BackendGraph& graph() const { return *graph_; }
  BackendGraph& graph() { return *graph_; }

 private:
  friend class GraphCache;
  HeldGraph(GraphCache& cache, std::unique_ptr<BackendGraph> graph, std::unique_ptr<HeldGraph>* slot)
      : cache_(cache), graph_(std::move(graph)), slot_(slot) {}
  GraphCache& cache_;
  std::unique_ptr<BackendGraph> graph_;
  std::unique_ptr<HeldGraph>* slot_;  // the owner, reset when evicted
  std::list<HeldGraph*>::iterator lru_;
};

// A plan segment's graphs (one SegmentGraph per segment of a PlanInstance,
// or of a shape bucket, whose exact plans share them: BucketFamily).
// A graph replays the addresses it captured. A segment that has a graph
// and meets a new set of buffer addresses refreshes its least recently used
// graph for them (its kernels' parameters rewritten, Backend::BeginRefresh:
// one host pass, one parameter copy) where the backend can; a set it met
// before (recurring: a body inside a Loop whose carried values alternate
// between two buffers) gets a graph of its own, up to kVariants. Past that,
// or where graphs cannot be refreshed, the least recently used graph is
// refreshed or replaced by a new capture.
struct SegmentGraph {
  static constexpr int kVariants = 4;
  static constexpr int kMet = 2 * kVariants;
  struct Variant {
    std::unique_ptr<HeldGraph> held;  // null: none (yet, or evicted)
    uint64_t fingerprint = 0;         // of the buffer addresses it captured
    uint64_t last_used = 0;
    uint64_t params_of = 0;           // the PlanInstance::serial whose parameters it holds
  };
  std::array<Variant, kVariants> variants;  // fixed: HeldGraph keeps a pointer into it
  std::array<uint64_t, kMet> met{};         // the address sets met last (fingerprints; a ring)
  int met_next = 0;                         // where the next one goes in `met`
  int replaced = 0;                         // variants dropped for a new set of addresses
  std::string no_graph;                     // set: runs step by step for good, and why
  std::string no_refresh;                   // set: its graphs cannot be refreshed (Backend::BeginRefresh), why
};

class GraphCache {
 public:
  explicit GraphCache(SessionStats& stats) : stats_(stats) {}
  ~GraphCache() = default;  // every HeldGraph is gone by then (plans go first)

  // Stores `graph` in *slot (a SegmentGraph's `held`), newest in use.
  void Hold(std::unique_ptr<BackendGraph> graph, std::unique_ptr<HeldGraph>* slot);
  // Moves the graph in *from to *to (another segment slot), keeping its
  // place in the LRU order.
  void Move(std::unique_ptr<HeldGraph>* from, std::unique_ptr<HeldGraph>* to) {
    *to = std::move(*from);
    if (*to != nullptr) (*to)->slot_ = to;
  }
  // Marks the graph most recently used.
  void Touch(HeldGraph& held) { lru_.splice(lru_.end(), lru_, held.lru_); }
  // Drops least recently used graphs until fewer than `limit` are held
  // (0: no limit), so one more fits.
  void MakeRoom(int limit);
  // Drops least recently used graphs, never the newest, while their bytes
  // are above `byte_limit` (0: no limit).
  void TrimBytes(int64_t byte_limit);
  int64_t size() const { return static_cast<int64_t>(lru_.size()); }

 private:
  friend class HeldGraph;
  SessionStats& stats_;
  std::list<HeldGraph*> lru_;  // least recently used first
};

}  // namespace grove::runtime

#endif  // GROVE_LIB_RUNTIME_GRAPH_CACHE_H_
