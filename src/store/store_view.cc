// Whole-store views: the snapshot with its change-feed watermark, and the
// figures behind /metrics.
#include <algorithm>

#include "store/store_admin.h"
#include "store/store_internal.h"

namespace tierkv {
void StoreAdmin::ForEachReadable(const std::function<void(const ReplicaEvent&)>& fn) const {
  Snapshot(1024, [&](std::span<const SnapshotRecord> records) {
    for (const SnapshotRecord& r : records) {
      ReplicaEvent ev;
      ev.tenant = r.tenant;
      ev.key = r.key;
      ev.group_id = r.group_id;
      ev.medium = r.medium;
      ev.size = r.size;
      ev.generation = r.generation;
      ev.sequence = r.sequence;
      ev.name_space = r.name_space;
      fn(ev);
    }
  });
}

// The watermark is read first. A change with a sequence <= S was made under its
// shard's lock before S was read, so a later copy of that entry (taken under the
// same lock) sees it; a replica announced after S is left out of the pages,
// because the feed delivers it. An entry removed before its copy is taken is
// simply absent: its removal is after S and also comes from the feed.
//
// A shard is copied a slice of hash buckets at a time, releasing its lock in
// between, so a writer never waits for more than one slice. Entries never move
// between buckets unless the table rehashes; if the bucket count changed between
// slices, the shard's copy is thrown away and taken again, so no entry is seen
// twice or missed.
uint64_t StoreAdmin::Snapshot(
    size_t page_size, const std::function<void(std::span<const SnapshotRecord>)>& page) const {
  const Store& s = *store_;
  constexpr size_t kSliceBuckets = 64;
  const uint64_t watermark = s.feed_.last_sequence();
  std::vector<SnapshotRecord> records;
  auto flush = [&] {
    if (!records.empty()) page(records);
    records.clear();
  };
  std::vector<SnapshotRecord> copied;
  for (const auto& shard_ptr : s.shards_) {
    Store::Shard& shard = *shard_ptr;
    copied.clear();
    size_t buckets = 0;
    shard.mu.BeginYielding();
    for (size_t next = 0;;) {
      if (next == 0) {
        shard.mu.lock();
      } else {
        shard.mu.LockAfterWaiters();  // writers queued behind the last slice go first
      }
      ShardLock lock(shard.mu, std::adopt_lock);
      if (next == 0) {
        buckets = shard.map.bucket_count();
      } else if (shard.map.bucket_count() != buckets) {
        copied.clear();  // rehashed: start this shard again
        buckets = shard.map.bucket_count();
        next = 0;
      }
      const size_t end = std::min(buckets, next + kSliceBuckets);
      for (size_t b = next; b < end; ++b) {
        for (auto it = shard.map.begin(b); it != shard.map.end(b); ++it)
          Store::CopyReadable(*it, watermark, &copied);
      }
      next = end;
      if (next >= buckets) break;
    }
    shard.mu.EndYielding();
    for (SnapshotRecord& r : copied) {
      records.push_back(std::move(r));
      if (records.size() >= std::max<size_t>(page_size, 1)) flush();
    }
  }
  flush();
  return watermark;
}

void Store::CopyReadable(const Map::value_type& kv, uint64_t watermark,
                         std::vector<SnapshotRecord>* out) {
  const Entry& e = kv.second;
  // Memory is one record however many of HBM and DRAM hold it, as announced.
  if (const Blob* b = e.current.get(); b != nullptr && e.memory_seq <= watermark) {
    out->push_back({std::string(TenantOf(kv.first)), std::string(KeyOf(kv.first)), b->group_id,
                    Medium::kDram, b->size, e.generation, e.memory_seq, e.name_space});
  } else if (const HbmReplica* h = e.hbm.get(); h != nullptr && e.memory_seq <= watermark) {
    out->push_back({std::string(TenantOf(kv.first)), std::string(KeyOf(kv.first)), h->group_id,
                    Medium::kHbm, h->size, e.generation, e.memory_seq, e.name_space});
  }
  if (const SsdReplica* r = e.ssd.get(); r != nullptr && e.ssd_seq <= watermark) {
    out->push_back({std::string(TenantOf(kv.first)), std::string(KeyOf(kv.first)),
                    r->blob.header.group_id, Medium::kSsd, r->blob.header.size, e.generation,
                    e.ssd_seq, e.name_space});
  }
}

StoreStats StoreAdmin::Stats() const {
  const Store& st = *store_;
  StoreStats s;
  for (const auto& shard_ptr : st.shards_) {
    ShardLock lock(shard_ptr->mu);
    s.objects += shard_ptr->readable;
    s.pending_allocs += shard_ptr->pending.size();
    for (const auto& [id, rec] : shard_ptr->leases) s.active_leases += rec.live();
    s.zombie_bytes += shard_ptr->zombie_bytes;
    s.tier.ssd_objects += shard_ptr->ssd_objects;
    s.hbm.objects += shard_ptr->hbm_queue.size();  // every HBM replica is in it
  }
  s.quarantined_bytes = st.quarantine_.bytes();
  s.evicted_objects = st.evicted_objects_.load(std::memory_order_relaxed);
  s.evicted_bytes = st.evicted_bytes_.load(std::memory_order_relaxed);
  s.eviction_rounds = st.eviction_rounds_.load(std::memory_order_relaxed);
  s.revoked_allocs = st.revoked_allocs_.load(std::memory_order_relaxed);
  s.expired_leases = st.expired_leases_.load(std::memory_order_relaxed);
  s.get_hits_dram = st.get_hits_dram_.load(std::memory_order_relaxed);
  s.evicting = st.evicting_.load(std::memory_order_relaxed) > 0;
  s.dram = st.dram_->Stats();
  if (st.ssd_) st.ssd_->Fill(&s.tier);
  if (st.hbm_) {
    const Store::HbmCounters& c = st.hbm_counters_;
    auto load = [](const std::atomic<uint64_t>& v) { return v.load(std::memory_order_relaxed); };
    s.hbm.enabled = true;
    s.hbm.promoted = load(c.promoted);
    s.hbm.promoted_bytes = load(c.promoted_bytes);
    s.hbm.demoted = load(c.demoted);
    s.hbm.demoted_bytes = load(c.demoted_bytes);
    s.hbm.dropped = load(c.dropped);
    s.hbm.evicted = load(c.evicted);
    s.hbm.warmed = load(c.warmed);
    s.hbm.warmed_bytes = load(c.warmed_bytes);
    s.hbm.get_hits = load(c.get_hits);
    s.hbm.copy_failures = load(c.copy_failures);
    s.hbm.device_reads = load(c.device_reads);
    s.hbm.device_puts = load(c.device_puts);
  }
  return s;
}

}  // namespace tierkv
