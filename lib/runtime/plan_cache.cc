#include "lib/runtime/plan_cache.h"

#include "lib/ir/value_type.h"

namespace grove::runtime {

void PlanCache::Key(int subgraph, absl::Span<const TensorView> inputs, absl::Span<const TensorView> captures,
                    std::vector<int64_t>* key) {
  key->clear();
  key->push_back(subgraph);
  std::vector<int64_t> items;
  for (absl::Span<const TensorView> group : {inputs, captures}) {
    for (const TensorView& v : group) {
      key->push_back(static_cast<int64_t>(v.dtype));
      if (ir::IsBoxed(v.dtype)) {
        // By the shape its tensors share; -1 when they share no rank.
        const bool rank_known = ir::SharedItemShape(ir::BoxedValue(v), &items);
        key->push_back(rank_known ? static_cast<int64_t>(items.size()) : -1);
        key->insert(key->end(), items.begin(), items.end());
        continue;
      }
      key->push_back(static_cast<int64_t>(v.shape.size()));
      key->insert(key->end(), v.shape.begin(), v.shape.end());
    }
  }
}

PlanInstance* PlanCache::Find(const std::vector<int64_t>& key, uint64_t run) {
  auto it = plans_.find(key);
  if (it == plans_.end()) return nullptr;
  it->second->last_used = ++tick_;
  it->second->last_run = run;
  return it->second.get();
}

BucketFamily* PlanCache::FindFamily(const std::vector<int64_t>& key) {
  auto it = families_.find(key);
  return it == families_.end() ? nullptr : it->second.get();
}

BucketFamily& PlanCache::AddFamily(std::unique_ptr<BucketFamily> family) {
  BucketFamily& f = *family;
  families_.insert_or_assign(f.key, std::move(family));
  return f;
}

bool PlanCache::Insert(const std::vector<int64_t>& key, std::unique_ptr<PlanInstance> instance, uint64_t run,
                       int max_plans) {
  instance->last_used = ++tick_;
  instance->last_run = run;
  const PlanInstance* added = instance.get();
  plans_.insert_or_assign(key, std::move(instance));
  if (max_plans <= 0 || static_cast<int>(plans_.size()) <= max_plans) return false;
  auto victim = plans_.end(), newest = plans_.end();
  for (auto i = plans_.begin(); i != plans_.end(); ++i) {
    const PlanInstance& p = *i->second;
    if (i->second.get() == added || p.active > 0) continue;
    if (p.last_run != run) {
      if (victim == plans_.end() || p.last_used < victim->second->last_used) victim = i;
    } else if (newest == plans_.end() || p.last_used > newest->second->last_used) {
      newest = i;
    }
  }
  if (victim == plans_.end()) victim = newest;
  if (victim == plans_.end()) return false;
  plans_.erase(victim);
  return true;
}

}  // namespace grove::runtime
