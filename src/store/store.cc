// Store: construction, validation, ids, announcements (the change feed's one
// entry point), the replica helpers and the two-phase put. The rest of the
// store is split by responsibility: reads and leases (store_lease.cc), lookups
// and removal (store_lookup.cc), the operator's side door (store_admin.cc),
// snapshots and figures (store_view.cc), pins (store_pin.cc), batches (store_batch.cc), space and
// eviction (store_space.cc), the SSD tier (store_tier.cc), the feed (change_feed.cc).
#include "store/store.h"

#include <sys/random.h>
#include <xxhash.h>

#include <algorithm>
#include <bit>
#include <random>
#include <set>

#include "store/store_internal.h"

namespace tierkv {
namespace {

int64_t MsToNs(int64_t ms) { return ms * 1'000'000; }

uint64_t RandomSeed() {
  uint64_t seed = 0;
  if (getrandom(&seed, sizeof(seed), 0) != sizeof(seed)) {
    seed = static_cast<uint64_t>(std::random_device{}()) << 32 ^ std::random_device{}();
  }
  return seed;
}

// ThreadSanitizer follows at most 64 mutexes held by one thread at once. A
// tenant's clear holds every shard's, then the change feed's and the
// observers': a ThreadSanitizer build keeps at most 32 shards, so that the
// clear can be checked at all.
#if defined(__SANITIZE_THREAD__)  // GCC
constexpr bool kThreadSanitizer = true;
#elif defined(__has_feature)  // Clang
constexpr bool kThreadSanitizer = __has_feature(thread_sanitizer);
#else
constexpr bool kThreadSanitizer = false;
#endif

StoreOptions ForThisBuild(StoreOptions options) {
  if (kThreadSanitizer) options.shards = std::min<uint32_t>(options.shards, 32);
  return options;
}

}  // namespace

Result<std::unique_ptr<Store>> Store::Create(const StoreOptions& options,
                                             std::unique_ptr<DramPool> dram) {
  if (options.shards == 0 || options.shards > 256 || !std::has_single_bit(options.shards)) {
    return InvalidArgument("shards must be a power of two between 1 and 256");
  }
  if (options.lease_ms <= 0) return InvalidArgument("lease-ms must be positive");
  if (options.alloc_timeout_ms <= 0) return InvalidArgument("alloc-timeout-ms must be positive");
  if (!(options.low_watermark > 0 && options.low_watermark <= options.high_watermark &&
        options.high_watermark <= 1.0)) {
    return InvalidArgument("watermarks must satisfy 0 < low <= high <= 1");
  }
  if (options.max_key_bytes == 0) return InvalidArgument("max-key-bytes must be positive");
  if (!dram) return InvalidArgument("a DRAM pool is required");
  return std::unique_ptr<Store>(new Store(options, std::move(dram)));
}

Store::Store(const StoreOptions& options, std::unique_ptr<DramPool> dram)
    : options_(ForThisBuild(options)),
      clock_(options.clock ? options.clock : RealClock()),
      dram_(std::move(dram)),
      feed_(options.journal_bytes) {
  shards_.reserve(options_.shards);
  for (uint32_t i = 0; i < options_.shards; ++i) {
    shards_.push_back(std::make_unique<Shard>(i, RandomSeed(), options_.evict_policy));
  }
}

Store::~Store() {
  Stop();
  DrainSsdTrash();
  // The index dies with the store; the SSD replicas it holds stay on disk.
  if (ssd_) ssd_->Close();
  shards_.clear();
}

void Store::AddObserver(ReplicaObserver* observer) { observers_.push_back(observer); }

uint32_t Store::ShardIndex(std::string_view composite) const {
  return static_cast<uint32_t>(XXH3_64bits(composite.data(), composite.size()) &
                               (options_.shards - 1));
}

Store::Shard& Store::ShardFor(std::string_view composite) {
  return *shards_[ShardIndex(composite)];
}

Store::Shard& Store::ShardOfId(uint64_t id) {
  return *shards_[(id & 0xff) & (options_.shards - 1)];
}

// ---------------------------------------------------------------------------
// Announcements and small helpers (shard lock held).

void Store::Announce(Map::value_type& kv, std::string_view group, uint64_t size, Medium medium,
                     bool stored, RemoveCause cause) {
  ReplicaEvent ev;
  ev.tenant = TenantOf(kv.first);
  ev.key = KeyOf(kv.first);
  ev.group_id = group;
  ev.medium = medium;
  ev.size = size;
  ev.cause = cause;
  ev.generation = kv.second.generation;
  ev.name_space = kv.second.name_space;
  ev.sequence = feed_.Append(stored ? ChangeKind::kStored : ChangeKind::kRemoved, ev);
  if (stored) (medium == Medium::kSsd ? kv.second.ssd_seq : kv.second.memory_seq) = ev.sequence;
  for (ReplicaObserver* o : observers_) {
    if (stored) {
      o->OnStored(ev);
    } else {
      o->OnRemoved(ev);
    }
  }
}

void Store::AnnounceStored(Map::value_type& kv, const Blob& blob) {
  if (kv.second.hbm) return;  // memory was announced with the HBM replica
  Announce(kv, blob.group_id, blob.size, Medium::kDram, true, RemoveCause::kRemoved);
}

void Store::AnnounceRemoved(Map::value_type& kv, const Blob& blob, RemoveCause cause) {
  if (kv.second.hbm) return;  // the HBM replica still holds it in memory
  Announce(kv, blob.group_id, blob.size, Medium::kDram, false, cause);
}

void Store::FreeZombieLocked(Shard& shard, Blob* blob) {
  if (std::unique_ptr<Blob> freed = shard.TakeFreedZombie(blob)) {
    FreeExtent(freed->extent, freed->size);
  }
}

void Store::UnpinLocked(Shard& shard, Blob* blob) {
  --blob->pins;
  FreeZombieLocked(shard, blob);
}

// A readable blob leaves the index: free it now, or keep it as a zombie while
// read leases still point at it.
void Store::RetireLocked(Shard& shard, std::unique_ptr<Blob> blob) {
  if (blob->leases > 0 && !blob->Leased(clock_->NowNanos())) {
    ReapShardLocked(shard, clock_->NowNanos());  // detaches the expired lease records
  }
  if (blob->leases > 0 || blob->pins > 0) {
    shard.KeepZombie(std::move(blob));
    return;
  }
  FreeExtent(blob->extent, blob->size);
}

void Store::DropPendingLocked(Shard& shard, Map::iterator it, bool revoked) {
  std::unique_ptr<Blob> blob = std::move(it->second.pending);
  shard.pending.erase(blob->alloc_id);
  if (blob->hbm_space) {
    // A put into HBM: the range is freed with its last reference, or held for
    // a writer that may still be copying into it until its session ends.
    if (revoked && blob->owner != 0) quarantine_.Keep(blob->owner, std::move(blob->hbm_space));
  } else if (revoked && blob->owner != 0) {
    // The writer may still be copying into the range: keep it out of reuse until
    // its session ends.
    quarantine_.Hold(blob->owner, {blob->extent, blob->size});
  } else {
    FreeExtent(blob->extent, blob->size);
  }
  if (revoked) revoked_allocs_.fetch_add(1, std::memory_order_relaxed);
  EraseIfEmptyLocked(shard, it);
}

void Store::EraseIfEmptyLocked(Shard& shard, Map::iterator it) {
  Entry& e = it->second;
  if (e.current || e.pending || e.hbm || e.ssd) return;
  shard.EraseFromDramQueue(e);
  shard.map.erase(it);
}

// ---------------------------------------------------------------------------
// Two-phase put.

Status Store::CheckPutLocked(Shard& shard, const std::string& composite,
                             const PutOptions& options) {
  auto it = shard.map.find(composite);
  if (it == shard.map.end()) return Status::Ok();
  const Entry& e = it->second;
  if (e.pending) {
    if (options.upsert) return Status(Code::kRetry, "another put of this key is in progress");
    return Status(Code::kDuplicated, "a put of this key is already in progress");
  }
  if (e.readable() && !options.upsert) return Status(Code::kDuplicated, "key already exists");
  return Status::Ok();
}

Result<AllocGrant> Store::InstallPendingLocked(Shard& shard, const std::string& composite,
                                               const Caller& caller, uint64_t size,
                                               const PutOptions& options, const Extent& extent,
                                               std::shared_ptr<HbmReplica> hbm_space) {
  auto [it, inserted] = shard.map.try_emplace(composite);
  auto blob = std::make_unique<Blob>();
  blob->extent = extent;
  blob->size = size;
  blob->group_id = std::string(options.group_id);
  blob->dram_only = options.dram_only;
  blob->alloc_id = shard.NextId();
  blob->owner = caller.session;
  blob->name_space = std::string(caller.name_space);
  blob->alloc_deadline = clock_->NowNanos() + MsToNs(options_.alloc_timeout_ms);
  AllocGrant grant{blob->alloc_id, extent.offset, size, dram_->base() + extent.offset};
  if (hbm_space) {
    grant = AllocGrant{blob->alloc_id, hbm_space->extent.offset, size, nullptr,
                       Medium::kHbm,   hbm_space->pool_index};
    blob->hbm_space = std::move(hbm_space);
  }
  shard.pending.emplace(blob->alloc_id, &*it);
  it->second.pending = std::move(blob);
  return grant;
}

Result<AllocGrant> Store::Alloc(const Caller& caller, const ObjectRef& ref, uint64_t size,
                                const PutOptions& options) {
  auto finish = [&](Result<AllocGrant> r) {
    op_stats_.Record(Op::kAlloc, r.code(), caller.rank);
    return r;
  };
  Status st = rules_.Tenant(ref.tenant);
  if (st.ok()) st = rules_.Put(ref.key, size, options);
  if (!st.ok()) return finish(st);
  const std::string composite = Composite(ref.tenant, ref.key);
  Shard& shard = ShardFor(composite);
  {
    ShardLock lock(shard.mu);
    st = CheckPutLocked(shard, composite, options);
  }
  if (!st.ok()) return finish(st);
  return finish(ReservePut(shard, composite, caller, size, options));
}

Result<AllocGrant> Store::ReservePut(Shard& shard, const std::string& composite,
                                     const Caller& caller, uint64_t size,
                                     const PutOptions& options) {
  std::shared_ptr<HbmReplica> in_hbm;
  if (options.medium == Medium::kHbm && hbm_ && !options.dram_only) {
    const uint32_t pool = RoomiestHbmPool();
    // No room in HBM (everything there being read): the put goes to DRAM.
    if (Result<Extent> space = AllocateHbm(pool, size); space.ok()) {
      in_hbm = std::make_shared<HbmReplica>(hbm_->pools()[pool].get(), pool, *space, size);
    }
  }
  Result<Extent> space = in_hbm ? Result<Extent>(Extent{}) : AllocateSpace(size);
  if (!space.ok()) return space.status();
  ShardLock lock(shard.mu);
  Status st = CheckPutLocked(shard, composite, options);  // a racing put may have won meanwhile
  if (!st.ok()) {
    if (!in_hbm) FreeExtent(*space, size);
    return st;  // an unused HBM range goes back with `in_hbm`
  }
  return InstallPendingLocked(shard, composite, caller, size, options, *space, std::move(in_hbm));
}

Status Store::CommitLocked(Shard& shard, uint64_t alloc_id, uint64_t session,
                           std::span<const KnownChecksum> known, uint64_t* generation) {
  auto pit = shard.pending.find(alloc_id);
  if (pit == shard.pending.end() || pit->second->second.pending->owner != session) {
    return NotFound("unknown alloc id (never granted, already committed, or revoked)");
  }
  Map::value_type& kv = *pit->second;
  Entry& e = kv.second;
  const int64_t now = clock_->NowNanos();
  const bool injected = options_.commit_fault_hook && options_.commit_fault_hook();
  if (now > e.pending->alloc_deadline || injected) {
    DropPendingLocked(shard, shard.map.find(kv.first), /*revoked=*/true);
    return Status(Code::kLeaseExpired, std::string("the write grant expired before commit (") +
                                           (injected ? "injected" : "alloc-timeout-ms") + ")");
  }
  shard.pending.erase(pit);
  std::unique_ptr<Blob> blob = std::move(e.pending);
  blob->alloc_id = 0;
  blob->owner = 0;
  for (const KnownChecksum& k : known) {
    blob->digests.Remember(k.offset, k.length, blob->size, k.digest);
  }
  if (!e.readable()) ++shard.readable;
  // HBM first: the DRAM replica, if any, then announces memory gone.
  if (e.hbm) DropHbmLocked(shard, kv, RemoveCause::kReplaced);
  if (e.current) {
    std::unique_ptr<Blob> old = std::move(e.current);
    AnnounceRemoved(kv, *old, RemoveCause::kReplaced);
    RetireLocked(shard, std::move(old));
  }
  if (e.ssd) DropSsdLocked(shard, kv, RemoveCause::kReplaced);
  e.generation = next_generation_.fetch_add(1, std::memory_order_relaxed);  // a new value
  if (generation != nullptr) *generation = e.generation;
  e.name_space = std::move(blob->name_space);
  if (blob->hbm_space) {  // a put into HBM
    CommitHbmLocked(shard, kv, std::move(blob));
    return Status::Ok();
  }
  e.current = std::move(blob);
  shard.Touch(kv, now);
  AnnounceStored(kv, *e.current);
  if (ssd_ && options_.ssd_write_through && !e.current->dram_only) {
    EnqueueTierJob([this, index = shard.index,
                    composite = kv.first] { MoveDown(index, composite, -1, /*drop_dram=*/false); },
                   /*droppable=*/true);
  }
  return Status::Ok();
}

Status Store::Commit(const Caller& caller, uint64_t alloc_id, std::span<const KnownChecksum> known,
                     uint64_t* generation) {
  Shard& shard = ShardOfId(alloc_id);
  Status st;
  {
    ShardLock lock(shard.mu);
    st = CommitLocked(shard, alloc_id, caller.session, known, generation);
  }
  DrainSsdTrash();  // an upsert may have replaced an SSD replica
  op_stats_.Record(Op::kUpdateState, st.code(), caller.rank);
  return st;
}

Status Store::Abort(const Caller& caller, uint64_t alloc_id) {
  Shard& shard = ShardOfId(alloc_id);
  ShardLock lock(shard.mu);
  auto pit = shard.pending.find(alloc_id);
  if (pit == shard.pending.end() || pit->second->second.pending->owner != caller.session) {
    return NotFound("unknown alloc id");
  }
  DropPendingLocked(shard, shard.map.find(pit->second->first), /*revoked=*/false);
  return Status::Ok();
}

}  // namespace tierkv
