// Store: the moves of the HBM tier that touch the index. Promotion (DRAM ->
// HBM, /memory/prefetch), HBM eviction (HBM -> DRAM, or dropped when DRAM
// holds the value already), and the copy down for a host read (HBM -> DRAM,
// single-flight with the SSD rewarm: Store::Rewarm). The pools themselves are
// HbmTier's (media/hbm_tier.h).
//
// Lock order: hbm_evict_mu_ -> evict_mu_ -> ssd_evict_mu_ -> a shard's mu.
// Copies to and from a GPU run with no shard lock held: the DRAM source is
// pinned, an HBM source is held by a reference (its range is freed with the
// last one).
#include <spdlog/spdlog.h>

#include "store/store.h"
#include "store/store_internal.h"

namespace tierkv {

Status Store::AttachHbm(HbmTier* hbm) {
  if (hbm_) return InvalidArgument("an HBM tier is already attached");
  if (hbm == nullptr || hbm->pools().empty()) return InvalidArgument("no HBM pools given");
  hbm_ = hbm;
  return Status::Ok();
}

// ---------------------------------------------------------------------------
// Replicas.

void Store::InstallHbmLocked(Shard& shard, Map::value_type& kv,
                             std::shared_ptr<HbmReplica> replica) {
  Entry& e = kv.second;
  e.hbm = std::move(replica);
  e.hbm_hook.owner = &kv;
  e.hbm_hook.key = &kv.first;
  shard.hbm_queue.Touch(e.hbm_hook);
  if (!e.current) {  // memory is announced once, by whichever replica comes first
    Announce(kv, e.hbm->group_id, e.hbm->size, Medium::kHbm, /*stored=*/true,
             RemoveCause::kRemoved);
  }
}

std::shared_ptr<Store::HbmReplica> Store::DropHbmLocked(Shard& shard, Map::value_type& kv,
                                                        RemoveCause cause) {
  Entry& e = kv.second;
  std::shared_ptr<HbmReplica> r = std::move(e.hbm);
  shard.hbm_queue.Erase(e.hbm_hook);
  if (!e.current) Announce(kv, r->group_id, r->size, Medium::kHbm, /*stored=*/false, cause);
  return r;
}

// ---------------------------------------------------------------------------
// Puts into HBM and reads out of it (GPU-to-GPU copies by the client).

void Store::CommitHbmLocked(Shard& shard, Map::value_type& kv, std::unique_ptr<Blob> blob) {
  std::shared_ptr<HbmReplica> replica = std::move(blob->hbm_space);
  replica->group_id = std::move(blob->group_id);
  replica->value_checksum = blob->digests.Find(0, blob->size, blob->size);  // 0: not known
  InstallHbmLocked(shard, kv, std::move(replica));  // announces it: no DRAM replica now
  shard.Touch(kv, clock_->NowNanos());
  hbm_counters_.device_puts.fetch_add(1, std::memory_order_relaxed);
}

Result<LeaseGrant> Store::LeaseHbmLocked(Shard& shard, Map::value_type& kv, const Caller& caller,
                                         int64_t now) {
  const std::shared_ptr<HbmReplica>& r = kv.second.hbm;
  shard.Touch(kv, now);
  hbm_counters_.device_reads.fetch_add(1, std::memory_order_relaxed);
  const int64_t deadline = now + options_.lease_ms * 1'000'000;
  const uint64_t id = shard.NextId();
  LeaseRecord rec;
  rec.hbm = r;  // the range stays allocated until the lease ends
  rec.deadline = deadline;
  rec.owner = caller.session;
  shard.AddLease(id, rec);
  LeaseGrant g{id, r->extent.offset, r->size, deadline, nullptr};
  g.medium = Medium::kHbm;
  g.pool = r->pool_index;
  return g;
}

// ---------------------------------------------------------------------------
// Space.

uint32_t Store::RoomiestHbmPool() const {
  uint32_t best = 0;
  uint64_t most_free = 0;
  for (uint32_t i = 0; i < hbm_->pools().size(); ++i) {
    const HbmPool& p = *hbm_->pools()[i];
    const uint64_t free = p.capacity() - std::min(p.capacity(), p.allocated_bytes());
    if (i == 0 || free > most_free) {
      best = i;
      most_free = free;
    }
  }
  return best;
}

Result<Extent> Store::AllocateHbm(uint32_t pool_index, uint64_t size) {
  HbmPool& pool = *hbm_->pools()[pool_index];
  if (size > pool.capacity()) {
    return Status(Code::kNoSpace, "value of " + std::to_string(size) +
                                      " bytes is larger than the HBM pool of GPU " +
                                      std::to_string(pool.device().ordinal()));
  }
  if (auto extent = pool.Allocate(size)) return *extent;
  std::lock_guard<std::mutex> lock(hbm_evict_mu_);
  for (;;) {
    if (auto extent = pool.Allocate(size)) return *extent;
    std::vector<Victim> victims = GatherHbmVictims(pool_index);
    bool progress = false;
    for (const Victim& v : victims) {
      progress |= EvictHbmVictim(v);
      if (auto extent = pool.Allocate(size)) return *extent;
    }
    if (!progress) break;
  }
  return Status(Code::kNoSpace, "the HBM pool of GPU " + std::to_string(pool.device().ordinal()) +
                                    " is full and every object in it is being copied");
}

std::vector<Store::Victim> Store::GatherHbmVictims(uint32_t pool) {
  return TailVictims(Medium::kHbm, [pool](Shard& shard, const Map::value_type& kv, int64_t) {
    shard.mu.AssertHeld();  // TailVictims holds it
    const Entry& e = kv.second;
    // In this pool, and not being copied.
    return e.hbm->pool_index == pool && e.hbm.use_count() == 1 && !shard.rewarms.InFlight(kv.first);
  });
}

size_t Store::EvictHbmDownTo(uint32_t pool_index, uint64_t target_used) {
  HbmPool& pool = *hbm_->pools()[pool_index];
  std::lock_guard<std::mutex> lock(hbm_evict_mu_);
  size_t evicted = 0;
  while (pool.allocated_bytes() > target_used) {
    size_t round = 0;
    for (const Victim& v : GatherHbmVictims(pool_index)) {
      round += EvictHbmVictim(v) ? 1 : 0;
      if (pool.allocated_bytes() <= target_used) break;
    }
    evicted += round;
    if (round == 0) break;
  }
  return evicted;
}

void Store::EvictHbmToWatermarks() {
  if (!hbm_) return;
  for (uint32_t i = 0; i < hbm_->pools().size(); ++i) {
    const HbmPool& pool = *hbm_->pools()[i];
    const uint64_t capacity = pool.capacity();
    if (pool.allocated_bytes() > static_cast<uint64_t>(options_.high_watermark * capacity)) {
      EvictHbmDownTo(i, static_cast<uint64_t>(options_.low_watermark * capacity));
    }
  }
}

// ---------------------------------------------------------------------------
// HBM -> DRAM.

// A DRAM replica at `extent` holding a copy of `replica` (its checksum kept).
std::unique_ptr<Store::Blob> Store::DramReplicaOf(const HbmReplica& replica, const Extent& extent) {
  auto blob = std::make_unique<Blob>();
  blob->extent = extent;
  blob->size = replica.size;
  blob->group_id = replica.group_id;
  if (replica.value_checksum != 0) {
    blob->digests.Remember(0, blob->size, blob->size, replica.value_checksum);
  }
  return blob;
}

Result<Extent> Store::CopyHbmToDram(const HbmReplica& replica) {
  Result<Extent> space = AllocateSpace(replica.size);
  if (!space.ok()) return space.status();
  Status st =
      replica.pool->Read(dram_->base() + space->offset, replica.extent.offset, replica.size);
  if (!st.ok()) {
    FreeExtent(*space, replica.size);
    hbm_counters_.copy_failures.fetch_add(1, std::memory_order_relaxed);
    spdlog::error("HBM tier: copy from GPU {} failed: {}", replica.pool->device().ordinal(),
                  st.message());
    return st;
  }
  return space;
}

bool Store::EvictHbmVictim(const Victim& victim) {
  Shard& shard = *shards_[victim.shard];
  std::shared_ptr<HbmReplica> replica;
  {
    ShardLock lock(shard.mu);
    auto it = shard.map.find(victim.composite);
    if (it == shard.map.end() || !it->second.hbm) return false;
    Entry& e = it->second;
    if (e.last_access != victim.last_access || e.hbm.use_count() > 1 ||
        shard.rewarms.InFlight(victim.composite)) {
      return false;
    }
    if (e.current) {  // DRAM holds it already: nothing to copy
      (void)DropHbmLocked(shard, *it, RemoveCause::kDemoted);
      hbm_counters_.dropped.fetch_add(1, std::memory_order_relaxed);
      return true;
    }
    replica = e.hbm;
  }
  // Copied down without the lock; gets of the key meanwhile copy it again
  // themselves (the rewarm flight), and the first one installed wins.
  Result<Extent> space = CopyHbmToDram(*replica);
  ShardLock lock(shard.mu);
  auto it = shard.map.find(victim.composite);
  const bool same = it != shard.map.end() && it->second.hbm == replica;
  if (!same) {  // removed or replaced meanwhile: nothing to move
    if (space.ok()) FreeExtent(*space, replica->size);
    return false;
  }
  Entry& e = it->second;
  if (space.ok() && !e.current) {
    e.current = DramReplicaOf(*replica, *space);
    shard.Touch(*it, e.last_access);  // keeps its age: the move is not a read
    hbm_counters_.demoted.fetch_add(1, std::memory_order_relaxed);
    hbm_counters_.demoted_bytes.fetch_add(replica->size, std::memory_order_relaxed);
  } else if (space.ok()) {
    FreeExtent(*space, replica->size);  // a get copied it down meanwhile
  }
  // Without a DRAM copy (no room, or the GPU failed) the replica still goes:
  // the value stays on SSD if it is there, else it is evicted.
  const bool kept = e.current || e.ssd;
  (void)DropHbmLocked(shard, *it, kept ? RemoveCause::kDemoted : RemoveCause::kEvicted);
  if (!kept) {
    --shard.readable;
    hbm_counters_.evicted.fetch_add(1, std::memory_order_relaxed);
    evicted_objects_.fetch_add(1, std::memory_order_relaxed);
    evicted_bytes_.fetch_add(replica->size, std::memory_order_relaxed);
    EraseIfEmptyLocked(shard, it);
  } else if (!space.ok()) {
    hbm_counters_.dropped.fetch_add(1, std::memory_order_relaxed);
  }
  return true;
}

Status Store::RunWarmDown(Shard& shard, const std::string& composite,
                          const std::shared_ptr<HbmReplica>& replica,
                          const std::shared_ptr<FlightTicket<Status>>& ticket) {
  Result<Extent> space = CopyHbmToDram(*replica);
  ShardLock lock(shard.mu);
  auto it = shard.map.find(composite);
  shard.rewarms.Forget(composite, ticket);
  if (!space.ok()) return space.status();
  const bool same = it != shard.map.end() && it->second.hbm == replica;
  if (!same || it->second.current) {  // removed, replaced or copied down meanwhile
    FreeExtent(*space, replica->size);
    return Status::Ok();
  }
  it->second.current = DramReplicaOf(*replica, *space);
  shard.Touch(*it, clock_->NowNanos());
  hbm_counters_.warmed.fetch_add(1, std::memory_order_relaxed);
  hbm_counters_.warmed_bytes.fetch_add(replica->size, std::memory_order_relaxed);
  return Status::Ok();
}

// ---------------------------------------------------------------------------
// DRAM -> HBM.

bool Store::Promote(Shard& shard, const std::string& composite) {
  Blob* pinned = nullptr;
  uint64_t size = 0;
  {
    ShardLock lock(shard.mu);
    auto it = shard.map.find(composite);
    if (it == shard.map.end() || !it->second.current || it->second.hbm) return false;
    if (it->second.current->dram_only) return false;  // another manager's value: stays in DRAM
    pinned = it->second.current.get();
    ++pinned->pins;  // neither evicted nor freed while it is copied
    size = pinned->size;
  }
  const uint32_t pool_index = RoomiestHbmPool();
  HbmPool& pool = *hbm_->pools()[pool_index];
  Result<Extent> space = AllocateHbm(pool_index, size);
  std::shared_ptr<HbmReplica> replica;
  if (space.ok()) {
    replica = std::make_shared<HbmReplica>(&pool, pool_index, *space, size);
    Status st = pool.Write(space->offset, dram_->base() + pinned->extent.offset, size);
    if (!st.ok()) {
      hbm_counters_.copy_failures.fetch_add(1, std::memory_order_relaxed);
      spdlog::error("HBM tier: copy to GPU {} failed: {}", pool.device().ordinal(), st.message());
      replica.reset();
    }
  }
  bool promoted = false;
  {
    ShardLock lock(shard.mu);
    auto it = shard.map.find(composite);
    const bool same = it != shard.map.end() && it->second.current.get() == pinned;
    if (replica && same && !it->second.hbm) {
      replica->group_id = pinned->group_id;
      replica->value_checksum = pinned->digests.Find(0, size, size);  // 0: not known
      InstallHbmLocked(shard, *it, replica);
      replica.reset();
      promoted = true;
      hbm_counters_.promoted.fetch_add(1, std::memory_order_relaxed);
      hbm_counters_.promoted_bytes.fetch_add(size, std::memory_order_relaxed);
    }
    UnpinLocked(shard, pinned);  // frees a replica removed meanwhile
  }
  return promoted;  // an unused replica gives its range back here
}

}  // namespace tierkv
