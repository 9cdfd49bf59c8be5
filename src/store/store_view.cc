// Whole-store views: the snapshot with its change-feed watermark, and the
// figures behind /metrics.
#include <algorithm>

#include "store/store_internal.h"

namespace tierkv {
void Store::ForEachReadable(const std::function<void(const ReplicaEvent&)>& fn) const {
  Snapshot(1024, [&](std::span<const SnapshotRecord> records) {
    for (const SnapshotRecord& r : records) {
      ReplicaEvent ev{r.tenant, r.key, r.group_id, r.medium, r.size};
      ev.generation = r.generation;
      ev.sequence = r.sequence;
      fn(ev);
    }
  });
}

// The watermark is read first. A change with a sequence <= S was made under its
// shard's lock before S was read, so the copy of that shard (taken under the
// same lock, later) sees it; a replica announced after S is left out of the
// pages, because the feed delivers it.
uint64_t Store::Snapshot(size_t page_size,
                         const std::function<void(std::span<const SnapshotRecord>)>& page) const {
  const uint64_t watermark = feed_.last_sequence();
  std::vector<SnapshotRecord> records;
  auto flush = [&] {
    if (!records.empty()) page(records);
    records.clear();
  };
  for (const auto& shard_ptr : shards_) {
    std::vector<SnapshotRecord> copied;
    {
      std::lock_guard<std::mutex> lock(shard_ptr->mu);
      for (const auto& kv : shard_ptr->map) {
        const Entry& e = kv.second;
        if (const Blob* b = e.current.get(); b != nullptr && e.dram_seq <= watermark) {
          copied.push_back({std::string(TenantOf(kv.first)), std::string(KeyOf(kv.first)),
                            b->group_id, Medium::kDram, b->size, e.generation, e.dram_seq});
        }
        if (const SsdReplica* r = e.ssd.get(); r != nullptr && e.ssd_seq <= watermark) {
          copied.push_back({std::string(TenantOf(kv.first)), std::string(KeyOf(kv.first)),
                            r->blob.header.group_id, Medium::kSsd, r->blob.header.size,
                            e.generation, e.ssd_seq});
        }
      }
    }
    for (SnapshotRecord& r : copied) {
      records.push_back(std::move(r));
      if (records.size() >= std::max<size_t>(page_size, 1)) flush();
    }
  }
  flush();
  return watermark;
}

StoreStats Store::Stats() const {
  StoreStats s;
  for (const auto& shard_ptr : shards_) {
    std::lock_guard<std::mutex> lock(shard_ptr->mu);
    s.objects += shard_ptr->readable;
    s.pending_allocs += shard_ptr->pending.size();
    for (const auto& [id, rec] : shard_ptr->leases) s.active_leases += rec.blob != nullptr;
    s.zombie_bytes += shard_ptr->zombie_bytes;
    s.tier.ssd_objects += shard_ptr->ssd_objects;
  }
  {
    std::lock_guard<std::mutex> lock(quarantine_mu_);
    s.quarantined_bytes = quarantined_bytes_;
  }
  s.evicted_objects = evicted_objects_.load(std::memory_order_relaxed);
  s.evicted_bytes = evicted_bytes_.load(std::memory_order_relaxed);
  s.eviction_rounds = eviction_rounds_.load(std::memory_order_relaxed);
  s.revoked_allocs = revoked_allocs_.load(std::memory_order_relaxed);
  s.expired_leases = expired_leases_.load(std::memory_order_relaxed);
  s.get_hits_dram = get_hits_dram_.load(std::memory_order_relaxed);
  s.evicting = evicting_.load(std::memory_order_relaxed) > 0;
  s.dram = dram_->Stats();
  if (ssd_) {
    TierStats& t = s.tier;
    t.enabled = true;
    t.engine = std::string(ssd_->file().engine());
    t.direct = ssd_->file().direct();
    t.ssd = ssd_->Stats();
    auto get = [](const std::atomic<uint64_t>& a) { return a.load(std::memory_order_relaxed); };
    t.flush_blobs = get(tier_.flush_blobs);
    t.flush_bytes = get(tier_.flush_bytes);
    t.flush_failed = get(tier_.flush_failed);
    t.demoted = get(tier_.demoted);
    t.rewarm = get(tier_.rewarm);
    t.rewarm_failed = get(tier_.rewarm_failed);
    t.rewarm_bytes = get(tier_.rewarm_bytes);
    t.rewarm_bytes_current = get(tier_.rewarm_bytes_current);
    t.rewarm_waiting = get(tier_.rewarm_waiting);
    t.get_hits_ssd = get(tier_.get_hits_ssd);
    t.ssd_evicted_objects = get(tier_.ssd_evicted_objects);
    t.ssd_evicted_bytes = get(tier_.ssd_evicted_bytes);
    t.io_errors = get(tier_.io_errors);
    t.corrupt_blobs = get(tier_.corrupt_blobs);
    t.prefetch_scheduled = get(tier_.prefetch_scheduled);
    t.write_through_dropped = get(tier_.write_through_dropped);
    t.recovered = recovery_;
  }
  return s;
}

}  // namespace tierkv
