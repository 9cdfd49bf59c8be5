// Store: the moves of the SSD tier that touch the index. Demotion (DRAM ->
// SSD), rewarm (SSD -> DRAM, one read per key), SSD eviction, and recovery at
// attach; the device's side (I/O, trash, write pauses, counters, the queue of
// write-through copies and prefetches) is SsdStage (ssd_stage.h).
//
// Lock order: evict_mu_ -> ssd_evict_mu_ -> a shard's mu -> the stage's trash
// lock. SSD I/O runs with no shard lock held.
#include <spdlog/spdlog.h>

#include <algorithm>

#include "store/store.h"
#include "store/store_internal.h"

namespace tierkv {
Status Store::AttachSsd(std::unique_ptr<SsdTier> ssd, std::vector<SsdBlob> recovered,
                        const SsdRecoveryStats& recovery) {
  if (ssd_) return InvalidArgument("an SSD tier is already attached");
  if (!ssd) return InvalidArgument("no SSD tier given");
  if (!(options_.ssd_low_watermark > 0 &&
        options_.ssd_low_watermark <= options_.ssd_high_watermark &&
        options_.ssd_high_watermark <= 1.0)) {
    return InvalidArgument("SSD watermarks must satisfy 0 < low <= high <= 1");
  }
  if (options_.ssd_queue_depth < 1 || options_.ssd_queue_depth > kMaxSsdQueueDepth) {
    return InvalidArgument("the SSD queue depth must be between 1 and " +
                           std::to_string(kMaxSsdQueueDepth));
  }
  // Blobs whose names are not valid keys here are freed and counted as corrupt.
  SsdRecoveryStats found = recovery;
  std::vector<SsdBlob> valid;
  valid.reserve(recovered.size());
  for (SsdBlob& blob : recovered) {
    if (!rules_.Tenant(blob.header.tenant).ok() || !rules_.Key(blob.header.key).ok()) {
      ++found.corrupt;
      (void)ssd->Free(blob);
    } else {
      valid.push_back(std::move(blob));
    }
  }
  ssd_ = std::make_unique<SsdStage>(std::move(ssd), options_.ssd_queue_depth, clock_,
                                    options_.ssd_error_backoff_ms, found);
  const int64_t now = clock_->NowNanos();
  for (SsdBlob& blob : valid) {
    const std::string composite = Composite(blob.header.tenant, blob.header.key);
    Shard& shard = ShardFor(composite);
    ShardLock lock(shard.mu);
    auto [it, inserted] = shard.map.try_emplace(composite);
    if (!inserted) continue;  // the scan keeps one blob per key
    ++shard.readable;
    it->second.last_access = now;
    it->second.generation = next_generation_.fetch_add(1, std::memory_order_relaxed);
    InstallSsdLocked(shard, *it, ssd_->MakeReplica(std::move(blob)));
  }
  StartTierWorker();
  return Status::Ok();
}

// ---------------------------------------------------------------------------
// Replicas and the trash.

void Store::DrainSsdTrash() {
  if (ssd_) ssd_->DrainTrash();
}

void Store::InstallSsdLocked(Shard& shard, Map::value_type& kv,
                             std::shared_ptr<SsdReplica> replica) {
  Entry& e = kv.second;
  e.ssd = std::move(replica);
  ++shard.ssd_objects;
  e.ssd_hook.owner = &kv;
  e.ssd_hook.key = &kv.first;
  shard.ssd_queue.Touch(e.ssd_hook);
  const BlobHeader& h = e.ssd->blob.header;
  Announce(kv, h.group_id, h.size, Medium::kSsd, /*stored=*/true, RemoveCause::kRemoved);
}

std::shared_ptr<Store::SsdReplica> Store::DropSsdLocked(Shard& shard, Map::value_type& kv,
                                                        RemoveCause cause) {
  Entry& e = kv.second;
  std::shared_ptr<SsdReplica> r = std::move(e.ssd);
  --shard.ssd_objects;
  shard.ssd_queue.Erase(e.ssd_hook);
  Announce(kv, r->blob.header.group_id, r->blob.header.size, Medium::kSsd, /*stored=*/false, cause);
  return r;
}

// ---------------------------------------------------------------------------
// DRAM -> SSD.

Result<SsdBlob> Store::WriteSsd(const BlobHeader& header, const void* value) {
  return ssd_->Write(header, value, [this](uint64_t footprint) {
    // Full: drop the oldest SSD replicas until the blob fits.
    std::lock_guard<std::mutex> lock(ssd_evict_mu_);
    DrainSsdTrash();
    while (ssd_->device().Stats().largest_free < footprint) {
      std::vector<Victim> victims = GatherSsdVictims();
      bool progress = false;
      for (const Victim& v : victims) {
        progress |= EvictSsdVictim(v);
        DrainSsdTrash();
        if (ssd_->device().Stats().largest_free >= footprint) break;
      }
      if (!progress) break;
    }
  });
}

bool Store::MoveDown(uint32_t shard_index, const std::string& composite, int64_t last_access,
                     bool drop_dram) {
  Shard& shard = *shards_[shard_index];
  // Drops the DRAM replica if nobody uses it and it was not touched meanwhile.
  auto drop_if_idle = [&](Map::iterator it) {
    shard.mu.AssertHeld();  // called under the lock below
    Entry& e = it->second;
    const int64_t now = clock_->NowNanos();
    if (!drop_dram || e.current->Leased(now) || e.current->pins > 0) return false;
    if (last_access >= 0 && e.last_access != last_access) return false;
    if (e.current->leases > 0) ReapShardLocked(shard, now);
    std::unique_ptr<Blob> blob = std::move(e.current);
    if (!e.readable()) --shard.readable;
    shard.EraseFromDramQueue(e);
    const RemoveCause cause = e.ssd ? RemoveCause::kDemoted : RemoveCause::kEvicted;
    evicted_objects_.fetch_add(1, std::memory_order_relaxed);
    evicted_bytes_.fetch_add(blob->size, std::memory_order_relaxed);
    if (cause == RemoveCause::kDemoted)
      ssd_->counters.demoted.fetch_add(1, std::memory_order_relaxed);
    AnnounceRemoved(*it, *blob, cause);
    RetireLocked(shard, std::move(blob));
    EraseIfEmptyLocked(shard, it);
    return true;
  };

  Blob* pinned = nullptr;
  BlobHeader header;
  const uint8_t* value = nullptr;
  {
    ShardLock lock(shard.mu);
    auto it = shard.map.find(composite);
    if (it == shard.map.end() || !it->second.current) return false;
    Entry& e = it->second;
    if (last_access >= 0 && e.last_access != last_access) return false;
    if (e.current->pins > 0) return false;  // another copy to SSD is running
    if (e.ssd || e.current->dram_only || !SsdWritable() ||
        (drop_dram && e.current->Leased(clock_->NowNanos()))) {
      return drop_if_idle(it);
    }
    pinned = e.current.get();
    ++pinned->pins;
    header.tenant = std::string(TenantOf(composite));
    header.key = std::string(KeyOf(composite));
    header.group_id = pinned->group_id;
    header.size = pinned->size;
    value = dram_->base() + pinned->extent.offset;
  }
  Result<SsdBlob> written = WriteSsd(header, value);
  std::shared_ptr<SsdReplica> unused;  // released after the lock: its blob goes to the trash
  bool dropped = false;
  {
    ShardLock lock(shard.mu);
    auto it = shard.map.find(composite);
    const bool same = it != shard.map.end() && it->second.current.get() == pinned;
    // The checksum the SSD writer computed over these bytes; recorded before
    // the unpin, which frees a replica removed meanwhile.
    if (written.ok()) {
      pinned->digests.Remember(0, pinned->size, pinned->size, written->header.value_checksum);
    }
    UnpinLocked(shard, pinned);
    if (written.ok()) {
      auto replica = ssd_->MakeReplica(std::move(*written));
      if (same && !it->second.ssd) {
        InstallSsdLocked(shard, *it, std::move(replica));
      } else {
        unused = std::move(replica);  // removed or replaced while it was written
      }
    }
    if (same) dropped = drop_if_idle(it);
  }
  unused.reset();
  DrainSsdTrash();
  return dropped;
}

// ---------------------------------------------------------------------------
// SSD eviction.

std::vector<Store::Victim> Store::GatherSsdVictims() {
  return TailVictims(Medium::kSsd, [](Shard& shard, const Map::value_type& kv, int64_t) {
    shard.mu.AssertHeld();  // TailVictims holds it
    // Not being read.
    return kv.second.ssd.use_count() == 1 && !shard.rewarms.InFlight(kv.first);
  });
}

bool Store::EvictSsdVictim(const Victim& victim) {
  Shard& shard = *shards_[victim.shard];
  std::shared_ptr<SsdReplica> dropped;
  {
    ShardLock lock(shard.mu);
    auto it = shard.map.find(victim.composite);
    if (it == shard.map.end() || !it->second.ssd) return false;
    Entry& e = it->second;
    if (e.last_access != victim.last_access || e.ssd.use_count() > 1 ||
        shard.rewarms.InFlight(victim.composite)) {
      return false;
    }
    dropped = DropSsdLocked(shard, *it, RemoveCause::kEvicted);
    if (!e.readable()) --shard.readable;
    ssd_->counters.ssd_evicted_objects.fetch_add(1, std::memory_order_relaxed);
    ssd_->counters.ssd_evicted_bytes.fetch_add(dropped->blob.header.size,
                                               std::memory_order_relaxed);
    EraseIfEmptyLocked(shard, it);
  }
  return true;
}

size_t Store::EvictSsdDownTo(uint64_t target_used) {
  if (!ssd_) return 0;
  std::lock_guard<std::mutex> lock(ssd_evict_mu_);
  size_t evicted = 0;
  DrainSsdTrash();
  while (ssd_->device().Stats().allocated > target_used) {
    std::vector<Victim> victims = GatherSsdVictims();
    size_t round = 0;
    for (const Victim& v : victims) {
      round += EvictSsdVictim(v) ? 1 : 0;
      DrainSsdTrash();
      if (ssd_->device().Stats().allocated <= target_used) break;
    }
    evicted += round;
    if (round == 0) break;
  }
  return evicted;
}

// ---------------------------------------------------------------------------
// SSD -> DRAM.

Status Store::Rewarm(Shard& shard, const std::string& composite, Medium* source) {
  SingleFlight<std::string, Status>::Joined flight;
  std::shared_ptr<SsdReplica> replica;
  std::shared_ptr<HbmReplica> in_hbm;  // copied down from HBM instead: no disk read
  {
    ShardLock lock(shard.mu);
    auto it = shard.map.find(composite);
    if (it == shard.map.end() || !it->second.readable()) return NotFound("key not found");
    Entry& e = it->second;
    if (source != nullptr)
      *source = e.current ? Medium::kDram : e.hbm ? Medium::kHbm : Medium::kSsd;
    if (e.current) return Status::Ok();  // copied up or down meanwhile: a DRAM hit
    flight = shard.rewarms.Join(composite);
    if (flight.leader) {
      in_hbm = e.hbm;
      if (!in_hbm) replica = e.ssd;
    }
  }
  std::atomic<uint64_t>* waiting = ssd_ ? &ssd_->counters.rewarm_waiting : nullptr;
  if (!flight.leader) {
    if (waiting != nullptr) waiting->fetch_add(1, std::memory_order_relaxed);
    Status st = flight.ticket->Wait();
    if (waiting != nullptr) waiting->fetch_sub(1, std::memory_order_relaxed);
    return st;
  }
  Status st = in_hbm ? RunWarmDown(shard, composite, in_hbm, flight.ticket)
                     : RunRewarm(shard, composite, replica, flight.ticket);
  replica.reset();
  in_hbm.reset();
  flight.ticket->Finish(st);
  DrainSsdTrash();
  return st;
}

Status Store::RunRewarm(Shard& shard, const std::string& composite,
                        const std::shared_ptr<SsdReplica>& replica,
                        const std::shared_ptr<FlightTicket<Status>>& ticket) {
  const uint64_t size = replica->blob.header.size;
  ssd_->counters.rewarm_bytes_current.fetch_add(size, std::memory_order_relaxed);
  Result<Extent> space = AllocateSpace(size);
  Status st = space.status();
  if (space.ok()) st = ssd_->device().Read(replica->blob, dram_->base() + space->offset);
  ssd_->counters.rewarm_bytes_current.fetch_sub(size, std::memory_order_relaxed);

  ShardLock lock(shard.mu);
  auto it = shard.map.find(composite);
  const bool found = it != shard.map.end();
  shard.rewarms.Forget(composite, ticket);
  const bool same = found && it->second.ssd == replica;
  if (!st.ok()) {
    if (space.ok()) FreeExtent(*space, size);
    ssd_->counters.rewarm_failed.fetch_add(1, std::memory_order_relaxed);
    if (st.code() == Code::kNoSpace) return st;
    if (st.code() != Code::kProtocolError) {
      ssd_->NoteError(st, "read");
      return st;
    }
    // A bad checksum: the replica is never served again. The device answered,
    // so writes go on (pausing them would drop every demotion meanwhile).
    ssd_->counters.corrupt_blobs.fetch_add(1, std::memory_order_relaxed);
    if (same) {
      (void)DropSsdLocked(shard, *it, RemoveCause::kEvicted);
      if (!it->second.readable()) --shard.readable;
      EraseIfEmptyLocked(shard, it);
    }
    spdlog::error("SSD tier: {}; the replica was dropped", st.message());
    return Status(Code::kIoError, "the SSD copy of this key failed its checksum and was dropped");
  }
  if (!same || it->second.current) {  // removed, replaced or rewarmed meanwhile
    FreeExtent(*space, size);
    return Status::Ok();
  }
  auto blob = std::make_unique<Blob>();
  blob->extent = *space;
  blob->size = size;
  blob->group_id = replica->blob.header.group_id;
  blob->digests.Remember(0, size, size, replica->blob.header.value_checksum);  // verified
  it->second.current = std::move(blob);
  shard.Touch(*it, clock_->NowNanos());
  AnnounceStored(*it, *it->second.current);
  ssd_->counters.rewarm.fetch_add(1, std::memory_order_relaxed);
  ssd_->counters.rewarm_bytes.fetch_add(size, std::memory_order_relaxed);
  return Status::Ok();
}

Result<LeaseGrant> Store::LeaseCold(Shard& shard, const std::string& composite,
                                    const Caller& caller) {
  for (int attempt = 0; attempt < kColdAttempts; ++attempt) {
    Medium source = Medium::kDram;
    if (Status st = Rewarm(shard, composite, &source); !st.ok()) return st;
    bool cold = false;
    ShardLock lock(shard.mu);
    Result<LeaseGrant> r = LeaseLocked(shard, composite, caller, clock_->NowNanos(), &cold, source);
    if (r.ok() || !cold) return r;
  }
  return Status(Code::kRetry, "the rewarmed copy was evicted again before it could be read");
}

// ---------------------------------------------------------------------------
// Background jobs (write-through copies and prefetches).

void Store::EnqueueTierJob(std::function<void()> job, bool droppable) {
  ssd_->Post(std::move(job), droppable);
}

void Store::StartTierWorker() {
  ssd_->StartQueue(options_.scheduler ? options_.scheduler : ThreadScheduler());
}

void Store::StopTierWorker() {
  if (ssd_) ssd_->StopQueue();
}

void Store::WaitTierIdle() {
  if (ssd_) ssd_->WaitIdle();
}

}  // namespace tierkv
