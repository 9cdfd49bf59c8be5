// StoreAdmin: operator actions over keys (count, evict, prefetch), the
// manager's removals, and the maintenance entry points; StorePins' other
// half (Pin) is in store_pin.cc, snapshots and figures in store_view.cc.
#include "store/store_admin.h"

#include <set>

#include "store/store_internal.h"

namespace tierkv {

size_t StoreAdmin::CountReadable(std::string_view tenant, std::span<const std::string> keys) const {
  const Store& s = *store_;
  size_t n = 0;
  for (const std::string& key : keys) {
    if (!s.rules_.Tenant(tenant).ok() || !s.rules_.Key(key).ok()) continue;
    const std::string composite = Composite(tenant, key);
    Store::Shard& shard = *s.shards_[s.ShardIndex(composite)];
    ShardLock lock(shard.mu);
    auto it = shard.map.find(composite);
    n += it != shard.map.end() && it->second.readable() ? 1 : 0;
  }
  return n;
}

size_t StoreAdmin::EvictKeys(std::string_view tenant, std::span<const std::string> keys) {
  Store& s = *store_;
  size_t n = 0;
  std::vector<Store::Victim> in_dram;  // demoted together, up to the SSD queue depth
  for (const std::string& key : keys) {
    if (!s.rules_.Tenant(tenant).ok() || !s.rules_.Key(key).ok()) continue;
    const std::string composite = Composite(tenant, key);
    Store::Shard& shard = s.ShardFor(composite);
    int64_t last_access = 0;
    bool hbm = false;
    bool dram = false;
    uint64_t dram_bytes = 0;
    {
      ShardLock lock(shard.mu);
      auto it = shard.map.find(composite);
      if (it == shard.map.end() || !it->second.readable()) continue;
      last_access = it->second.last_access;
      hbm = it->second.hbm != nullptr;
      dram = it->second.current != nullptr;
      if (dram) dram_bytes = it->second.current->extent.size;
    }
    Store::Victim victim{last_access, shard.index, composite, dram_bytes};
    if (hbm) {
      n += s.EvictHbmVictim(victim) ? 1 : 0;
    } else if (dram) {
      in_dram.push_back(std::move(victim));
    } else {
      n += s.EvictSsdVictim(victim) ? 1 : 0;
    }
  }
  n += s.EvictVictims(in_dram, [](uint64_t) { return false; });
  s.DrainSsdTrash();
  return n;
}

size_t StoreAdmin::Prefetch(std::string_view tenant, std::span<const std::string> keys) {
  Store& s = *store_;
  if ((!s.ssd_ && !s.hbm_) || !s.rules_.Tenant(tenant).ok()) return 0;
  size_t n = 0;
  size_t scheduled = 0;
  for (const std::string& key : keys) {
    if (!s.rules_.Key(key).ok()) continue;
    std::string composite = Composite(tenant, key);
    Store::Shard& shard = s.ShardFor(composite);
    bool up_to_hbm = false;
    {
      ShardLock lock(shard.mu);
      auto it = shard.map.find(composite);
      if (it == shard.map.end()) continue;
      const Store::Entry& e = it->second;
      up_to_hbm = s.hbm_ && e.current && !e.hbm && !e.current->dram_only;
      if (!up_to_hbm && (!s.ssd_ || e.in_memory() || !e.ssd || shard.rewarms.InFlight(composite))) {
        continue;
      }
    }
    if (up_to_hbm) {
      n += s.Promote(shard, composite) ? 1 : 0;
      continue;
    }
    s.EnqueueTierJob(
        [&s, &shard, composite = std::move(composite)] { (void)s.Rewarm(shard, composite); },
        /*droppable=*/false);
    ++scheduled;
  }
  if (s.ssd_) s.ssd_->counters.prefetch_scheduled.fetch_add(scheduled, std::memory_order_relaxed);
  return n + scheduled;
}

void StoreAdmin::WaitTierIdle() { store_->WaitTierIdle(); }

Status StoreAdmin::RemoveIfAt(const ObjectRef& ref, uint64_t generation) {
  Store& s = *store_;
  if (Status st = s.rules_.Ref(ref); !st.ok()) return st;
  const std::string composite = Composite(ref.tenant, ref.key);
  Store::Shard& shard = s.ShardFor(composite);
  Status st;
  {
    ShardLock lock(shard.mu);
    auto it = shard.map.find(composite);
    if (it == shard.map.end() || !it->second.readable() || it->second.generation != generation) {
      return NotFound("not held at generation " + std::to_string(generation));
    }
    st = s.RemoveLocked(shard, composite);
  }
  s.DrainSsdTrash();
  return st;
}

Result<RemoveAllResult> StoreAdmin::RemoveAllTenants(const Caller& caller, bool force) {
  Store& s = *store_;
  std::set<std::string> tenants;
  for (auto& shard_ptr : s.shards_) {
    ShardLock lock(shard_ptr->mu);
    for (const auto& kv : shard_ptr->map) tenants.emplace(TenantOf(kv.first));
  }
  RemoveAllResult total;
  for (const std::string& t : tenants) {
    const RemoveAllResult r = s.RemoveTenant(t, force);
    total.removed += r.removed;
    total.skipped += r.skipped;
  }
  total.cleared = total.skipped == 0 && total.removed > 0;
  s.op_stats_.Record(Op::kRemoveAll, Code::kOk, caller.rank);
  return total;
}

size_t StoreAdmin::RunMaintenance() { return store_->RunMaintenance(); }
size_t StoreAdmin::EvictDownTo(uint64_t target_used) { return store_->EvictDownTo(target_used); }
size_t StoreAdmin::EvictSsdDownTo(uint64_t target_used) {
  return store_->EvictSsdDownTo(target_used);
}
const OpStats& StoreAdmin::op_stats() const { return store_->op_stats_; }

}  // namespace tierkv
