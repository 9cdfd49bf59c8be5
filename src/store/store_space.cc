// Store: space management. Allocation with on-demand eviction, the approximate
// LRU eviction rounds, lease/grant expiry, quarantine, and the maintenance thread.
#include <algorithm>

#include "common/tracer.h"
#include "store/store.h"
#include "store/store_internal.h"

namespace tierkv {
namespace {

// Candidates taken from the tail of each shard's LRU per eviction round.
constexpr size_t kVictimsPerShard = 8;
// How far up from the tail a shard is searched for unleased candidates.
constexpr size_t kMaxTailScan = 64;

// Marks an eviction round as running (memcache_evict_running).
class EvictingScope {
 public:
  explicit EvictingScope(std::atomic<int>& n) : n_(n) { n_.fetch_add(1); }
  ~EvictingScope() { n_.fetch_sub(1); }

 private:
  std::atomic<int>& n_;
};

}  // namespace

void Store::FreeExtent(const Extent& extent, uint64_t requested) {
  static Tracepoint* const tp = Tracer::Global().Get("TP_MMC_META_FREE");
  TraceScope scope(tp);
  dram_->Free(extent, requested);
  scope.End(true);
}

Result<Extent> Store::AllocateSpace(uint64_t size) {
  const uint64_t capacity = dram_->capacity();
  if (size > capacity) {
    return Status(Code::kNoSpace, "value of " + std::to_string(size) +
                                      " bytes is larger than the DRAM pool (" +
                                      std::to_string(capacity) + " bytes)");
  }
  if (auto extent = dram_->Allocate(size)) {
    if (dram_->allocated_bytes() > static_cast<uint64_t>(options_.high_watermark * capacity)) {
      WakeMaintenance();
    }
    return *extent;
  }
  // Full: evict just enough for this request (one evictor at a time), oldest
  // first, and leave the way down to the low watermark to the background thread
  // so the put that found the pool full does not pay for it.
  WakeMaintenance();
  std::lock_guard<std::mutex> evict_lock(evict_mu_);
  const uint64_t need = dram_->allocator().ClassSize(size);
  for (;;) {
    if (auto extent = dram_->Allocate(size)) return *extent;
    std::vector<Victim> victims = GatherVictims();
    if (victims.empty()) break;
    eviction_rounds_.fetch_add(1, std::memory_order_relaxed);
    EvictingScope evicting(evicting_);
    bool progress = false;
    for (const Victim& v : victims) {
      progress |= EvictVictim(v);
      if (dram_->Stats().largest_free >= need) break;
    }
    if (!progress) break;
  }
  if (auto extent = dram_->Allocate(size)) return *extent;
  return Status(Code::kNoSpace,
                "DRAM pool is full and every remaining object is leased or "
                "being written (" +
                    std::to_string(size) + " bytes requested)");
}

std::vector<Store::Victim> Store::TailVictims(Medium medium, const VictimFilter& usable) {
  // S3-FIFO gives one victim per shard: its FIFOs decide which, the clock
  // only which shard goes first.
  const size_t per_shard = medium == Medium::kDram && options_.evict_policy == EvictPolicy::kS3Fifo
                               ? 1
                               : kVictimsPerShard;
  std::vector<Victim> victims;
  std::vector<QueueHook*> picked;
  for (uint32_t i = 0; i < shards_.size(); ++i) {
    Shard& shard = *shards_[i];
    ShardLock lock(shard.mu);
    const int64_t now = clock_->NowNanos();
    EvictionQueue& queue = medium == Medium::kSsd   ? static_cast<EvictionQueue&>(shard.ssd_queue)
                           : medium == Medium::kHbm ? static_cast<EvictionQueue&>(shard.hbm_queue)
                                                    : *shard.dram_queue;
    picked.clear();
    queue.Victims(
        per_shard, kMaxTailScan,
        [&](const QueueHook& h) {
          return usable(shard, *static_cast<const Map::value_type*>(h.owner), now);
        },
        &picked);
    for (QueueHook* h : picked) {
      const Map::value_type& kv = *static_cast<const Map::value_type*>(h->owner);
      const Entry& e = kv.second;
      victims.push_back(Victim{e.last_access, i, kv.first, e.current ? e.current->extent.size : 0});
    }
  }
  std::sort(victims.begin(), victims.end(),
            [](const Victim& a, const Victim& b) { return a.last_access < b.last_access; });
  return victims;
}

std::vector<Store::Victim> Store::GatherVictims() {
  const Shard* reaped = nullptr;  // expired leases are detached once per shard
  return TailVictims(Medium::kDram, [&](Shard& shard, const Map::value_type& kv, int64_t now) {
    shard.mu.AssertHeld();  // TailVictims holds it
    const Entry& e = kv.second;
    if (e.current->pins > 0) return false;  // being copied to SSD
    if (e.current->leases == 0) return true;
    if (e.current->Leased(now)) return false;
    if (reaped != &shard) {
      ReapShardLocked(shard, now);
      reaped = &shard;
    }
    return true;
  });
}

bool Store::EvictVictim(const Victim& victim) {
  if (ssd_) return MoveDown(victim.shard, victim.composite, victim.last_access, /*drop_dram=*/true);
  Shard& shard = *shards_[victim.shard];
  ShardLock lock(shard.mu);
  auto it = shard.map.find(victim.composite);
  if (it == shard.map.end() || !it->second.current) return false;
  Entry& e = it->second;
  const int64_t now = clock_->NowNanos();
  if (e.last_access != victim.last_access || e.current->Leased(now)) return false;
  if (e.current->leases > 0) ReapShardLocked(shard, now);
  std::unique_ptr<Blob> blob = std::move(e.current);
  if (!e.readable()) --shard.readable;  // an HBM replica may still hold it
  shard.EraseFromDramQueue(e);
  evicted_objects_.fetch_add(1, std::memory_order_relaxed);
  evicted_bytes_.fetch_add(blob->size, std::memory_order_relaxed);
  AnnounceRemoved(*it, *blob, RemoveCause::kEvicted);
  RetireLocked(shard, std::move(blob));
  EraseIfEmptyLocked(shard, it);
  return true;
}

size_t Store::EvictVictims(std::span<const Victim> victims,
                           const std::function<bool(uint64_t)>& enough) {
  // Up to the queue depth of demotions in flight (one worker, on this thread,
  // without SSD or at depth 1). Each worker takes the oldest victim not yet
  // decided, and starts its demotion only if the target is not met counting
  // the DRAM that those in flight will free; victims are decided in order
  // (oldest first) whichever worker runs first.
  std::atomic<size_t> count{0};
  std::mutex mu;           // serialises enough() and guards:
  uint64_t in_flight = 0;  // DRAM bytes the demotions running now will free
  size_t next = 0;         // the oldest victim not yet decided
  bool done = false;
  auto worker = [&] {
    for (;;) {
      const Victim* v = nullptr;
      {
        std::lock_guard<std::mutex> lock(mu);
        if (done || next == victims.size() || (done = enough(in_flight))) return;
        v = &victims[next++];
        in_flight += v->dram_bytes;
      }
      count += EvictVictim(*v) ? 1 : 0;
      std::lock_guard<std::mutex> lock(mu);
      in_flight -= v->dram_bytes;
    }
  };
  const size_t workers = ssd_ ? std::min<size_t>(victims.size(), ssd_->depth()) : 1;
  if (workers <= 1) {
    worker();
  } else {
    ssd_->io().RunAll(std::vector<std::function<void()>>(workers, worker));
  }
  return count.load();
}

size_t Store::EvictDownTo(uint64_t target_used) {
  std::lock_guard<std::mutex> evict_lock(evict_mu_);
  size_t evicted = 0;
  while (dram_->allocated_bytes() > target_used) {
    std::vector<Victim> victims = GatherVictims();
    if (victims.empty()) break;
    eviction_rounds_.fetch_add(1, std::memory_order_relaxed);
    EvictingScope evicting(evicting_);
    const size_t round = EvictVictims(victims, [&](uint64_t in_flight) {
      const uint64_t used = dram_->allocated_bytes();
      return used <= target_used + std::min(used, in_flight);
    });
    evicted += round;
    if (round == 0) break;
  }
  return evicted;
}

size_t Store::RunMaintenance() {
  const int64_t now = clock_->NowNanos();
  for (auto& shard_ptr : shards_) {
    Shard& shard = *shard_ptr;
    ShardLock lock(shard.mu);
    ReapShardLocked(shard, now);
    for (auto pit = shard.pending.begin(); pit != shard.pending.end();) {
      Map::value_type* kv = pit->second;
      ++pit;  // DropPendingLocked erases the current element
      if (now > kv->second.pending->alloc_deadline) {
        DropPendingLocked(shard, shard.map.find(kv->first), /*revoked=*/true);
      }
    }
  }
  // HBM first: its victims move into DRAM; then DRAM, whose demotions fill
  // SSD, which is then brought back down.
  EvictHbmToWatermarks();
  size_t evicted = 0;
  const uint64_t capacity = dram_->capacity();
  if (dram_->allocated_bytes() > static_cast<uint64_t>(options_.high_watermark * capacity)) {
    evicted = EvictDownTo(static_cast<uint64_t>(options_.low_watermark * capacity));
  }
  DrainSsdTrash();
  if (ssd_) {
    const uint64_t ssd_capacity = ssd_->device().Stats().capacity;
    if (ssd_->device().Stats().allocated >
        static_cast<uint64_t>(options_.ssd_high_watermark * ssd_capacity)) {
      EvictSsdDownTo(static_cast<uint64_t>(options_.ssd_low_watermark * ssd_capacity));
    }
  }
  return evicted;
}

void Store::EndSession(uint64_t session) {
  for (const auto& [extent, requested] : quarantine_.Release(session)) {
    FreeExtent(extent, requested);
  }
}

void Store::Start() {
  if (ssd_) StartTierWorker();
  std::lock_guard<std::mutex> lock(maint_mu_);
  if (maint_task_) return;
  Scheduler* scheduler = options_.scheduler ? options_.scheduler : ThreadScheduler();
  maint_task_ = scheduler->Every(std::chrono::milliseconds(options_.maintenance_interval_ms),
                                 [this] { RunMaintenance(); });
}

void Store::Stop() {
  std::unique_ptr<PeriodicTask> task;
  {
    std::lock_guard<std::mutex> lock(maint_mu_);
    task = std::move(maint_task_);
  }
  task.reset();  // waits for a pass in progress (which may wake it: not under maint_mu_)
  StopTierWorker();
}

void Store::WakeMaintenance() {
  std::lock_guard<std::mutex> lock(maint_mu_);
  if (maint_task_) maint_task_->Wake();
}

}  // namespace tierkv
