#include "lib/runtime/graph_cache.h"

namespace grove::runtime {

HeldGraph::~HeldGraph() {
  cache_.lru_.erase(lru_);
  --cache_.stats_.graphs_held;
  cache_.stats_.graph_nodes -= graph_->nodes();
  cache_.stats_.graph_bytes -= graph_->bytes();
}

void GraphCache::Hold(std::unique_ptr<BackendGraph> graph, std::unique_ptr<HeldGraph>* slot) {
  ++stats_.graphs_held;
  stats_.graph_nodes += graph->nodes();
  stats_.graph_bytes += graph->bytes();
  auto* held = new HeldGraph(*this, std::move(graph), slot);
  held->lru_ = lru_.insert(lru_.end(), held);
  slot->reset(held);
}

void GraphCache::MakeRoom(int limit) {
  if (limit <= 0) return;
  while (!lru_.empty() && static_cast<int64_t>(lru_.size()) >= limit) {
    HeldGraph* oldest = lru_.front();
    oldest->slot_->reset();  // erases it from lru_
    ++stats_.graphs_evicted;
  }
}

void GraphCache::TrimBytes(int64_t byte_limit) {
  if (byte_limit <= 0) return;
  while (lru_.size() > 1 && stats_.graph_bytes > byte_limit) {
    HeldGraph* oldest = lru_.front();
    oldest->slot_->reset();  // erases it from lru_
    ++stats_.graphs_evicted;
  }
}

}  // namespace grove::runtime
