// Store: construction, validation, and the per-object lifecycle.
// Batches live in store_batch.cc, space and eviction in store_space.cc.
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

constexpr uint32_t kMaxTenantBytes = 128;

int64_t MsToNs(int64_t ms) { return ms * 1'000'000; }

uint64_t RandomSeed() {
  uint64_t seed = 0;
  if (getrandom(&seed, sizeof(seed), 0) != sizeof(seed)) {
    seed = static_cast<uint64_t>(std::random_device{}()) << 32 ^ std::random_device{}();
  }
  return seed;
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
    : options_(options),
      clock_(options.clock ? options.clock : RealClock()),
      dram_(std::move(dram)),
      feed_(options.journal_bytes) {
  shards_.reserve(options_.shards);
  for (uint32_t i = 0; i < options_.shards; ++i) {
    shards_.push_back(std::make_unique<Shard>(i, RandomSeed()));
  }
}

Store::~Store() {
  Stop();
  DrainSsdTrash();
  // The index dies with the store; the SSD replicas it holds stay on disk.
  closing_ = true;
  shards_.clear();
}

void Store::AddObserver(ReplicaObserver* observer) { observers_.push_back(observer); }

Status Store::ValidateTenant(std::string_view tenant) const {
  if (tenant.empty()) return InvalidArgument("tenant must not be empty");
  if (tenant.size() > kMaxTenantBytes) {
    return Status(Code::kTooLarge, "tenant is " + std::to_string(tenant.size()) +
                                       " bytes; the limit is " + std::to_string(kMaxTenantBytes));
  }
  if (tenant.find('\0') != std::string_view::npos) {
    return InvalidArgument("tenant must not contain NUL bytes");
  }
  return Status::Ok();
}

Status Store::ValidateKey(std::string_view key) const {
  if (key.empty()) return InvalidArgument("key must not be empty");
  if (key.size() > options_.max_key_bytes) {
    return Status(Code::kTooLarge, "key is " + std::to_string(key.size()) +
                                       " bytes; the limit (max-key-bytes) is " +
                                       std::to_string(options_.max_key_bytes));
  }
  return Status::Ok();
}

Status Store::ValidatePut(std::string_view key, uint64_t size, const PutOptions& options) const {
  if (Status st = ValidateKey(key); !st.ok()) return st;
  if (size == 0) return InvalidArgument("size must be at least 1 byte");
  if (size > options_.max_object_bytes) {
    return Status(Code::kTooLarge, "value is " + std::to_string(size) +
                                       " bytes; the limit (max-object-bytes) is " +
                                       std::to_string(options_.max_object_bytes));
  }
  if (options.group_id.size() > options_.max_group_bytes) {
    return Status(Code::kTooLarge, "group_id is " + std::to_string(options.group_id.size()) +
                                       " bytes; the limit (max-group-bytes) is " +
                                       std::to_string(options_.max_group_bytes));
  }
  return Status::Ok();
}

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

// Ids are 56 unpredictable bits above the shard index: splitmix64 over a
// per-shard state seeded from the kernel's random source. An id is only ever
// honoured for the session it was granted to; being hard to guess keeps a buggy
// client from hitting a live id of its own by accident.
uint64_t Store::NextId(Shard& shard) {
  for (;;) {
    uint64_t z = (shard.id_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    const uint64_t id = (z << 8) | shard.index;
    if ((z << 8) == 0 || shard.pending.count(id) != 0 || shard.leases.count(id) != 0 ||
        shard.pins.count(id) != 0) {
      continue;
    }
    return id;
  }
}

// ---------------------------------------------------------------------------
// Announcements and small helpers (shard lock held).

void Store::Announce(Map::value_type& kv, std::string_view group, uint64_t size, Medium medium,
                     bool stored, RemoveCause cause) {
  ReplicaEvent ev{TenantOf(kv.first), KeyOf(kv.first), group, medium, size, cause};
  ev.generation = kv.second.generation;
  ev.sequence = feed_.Append(stored ? ChangeKind::kStored : ChangeKind::kRemoved, ev);
  if (stored) (medium == Medium::kSsd ? kv.second.ssd_seq : kv.second.dram_seq) = ev.sequence;
  for (ReplicaObserver* o : observers_) {
    if (stored) {
      o->OnStored(ev);
    } else {
      o->OnRemoved(ev);
    }
  }
}

void Store::AnnounceStored(Map::value_type& kv, const Blob& blob) {
  Announce(kv, blob.group_id, blob.size, Medium::kDram, true, RemoveCause::kRemoved);
}

void Store::AnnounceRemoved(Map::value_type& kv, const Blob& blob, RemoveCause cause) {
  Announce(kv, blob.group_id, blob.size, Medium::kDram, false, cause);
}

bool Store::LeasedLocked(const Blob& blob, int64_t now) const {
  return blob.leases > 0 && now <= blob.lease_deadline;
}

void Store::TouchLocked(Shard& shard, Map::value_type& kv, int64_t now) {
  Entry& e = kv.second;
  e.last_access = now;
  if (e.in_lru) {
    shard.lru.splice(shard.lru.begin(), shard.lru, e.lru_pos);
  } else if (e.current) {
    shard.lru.push_front(&kv);
    e.lru_pos = shard.lru.begin();
    e.in_lru = true;
  }
  if (e.in_ssd_lru) shard.ssd_lru.splice(shard.ssd_lru.begin(), shard.ssd_lru, e.ssd_lru_pos);
}

void Store::FreeZombieLocked(Shard& shard, Blob* blob) {
  if (!blob->zombie || blob->leases > 0 || blob->pins > 0) return;
  shard.zombie_bytes -= blob->extent.size;
  FreeExtent(blob->extent, blob->size);
  shard.zombies.erase(blob);
}

void Store::UnpinLocked(Shard& shard, Blob* blob) {
  --blob->pins;
  FreeZombieLocked(shard, blob);
}

// A readable blob leaves the index: free it now, or keep it as a zombie while
// read leases still point at it.
void Store::RetireLocked(Shard& shard, std::unique_ptr<Blob> blob) {
  if (blob->leases > 0 && !LeasedLocked(*blob, clock_->NowNanos())) {
    ReapShardLocked(shard, clock_->NowNanos());  // detaches the expired lease records
  }
  if (blob->leases > 0 || blob->pins > 0) {
    blob->zombie = true;
    shard.zombie_bytes += blob->extent.size;
    Blob* raw = blob.get();
    shard.zombies.emplace(raw, std::move(blob));
    return;
  }
  FreeExtent(blob->extent, blob->size);
}

void Store::DropPendingLocked(Shard& shard, Map::iterator it, bool revoked) {
  std::unique_ptr<Blob> blob = std::move(it->second.pending);
  shard.pending.erase(blob->alloc_id);
  if (revoked && blob->owner != 0) {
    // The writer may still be copying into the range: keep it out of reuse until
    // its session ends.
    std::lock_guard<std::mutex> lock(quarantine_mu_);
    quarantine_[blob->owner].emplace_back(blob->extent, blob->size);
    quarantined_bytes_ += blob->extent.size;
  } else {
    FreeExtent(blob->extent, blob->size);
  }
  if (revoked) revoked_allocs_.fetch_add(1, std::memory_order_relaxed);
  EraseIfEmptyLocked(shard, it);
}

void Store::EraseIfEmptyLocked(Shard& shard, Map::iterator it) {
  Entry& e = it->second;
  if (e.current || e.pending || e.ssd) return;
  if (e.in_lru) shard.lru.erase(e.lru_pos);
  shard.map.erase(it);
}

// Detaches expired leases from their blobs (freeing zombies whose last lease
// ended) and forgets tombstones older than lease_tombstone_ms.
size_t Store::ReapShardLocked(Shard& shard, int64_t now) {
  size_t expired = 0;
  const int64_t tombstone_ns = MsToNs(options_.lease_tombstone_ms);
  for (auto it = shard.leases.begin(); it != shard.leases.end();) {
    LeaseRecord& rec = it->second;
    if (rec.blob != nullptr && now > rec.deadline) {
      Blob* blob = static_cast<Blob*>(rec.blob);
      rec.blob = nullptr;
      --blob->leases;
      ++expired;
      FreeZombieLocked(shard, blob);
    }
    if (rec.blob == nullptr && now > rec.deadline + tombstone_ns) {
      it = shard.leases.erase(it);
    } else {
      ++it;
    }
  }
  expired_leases_.fetch_add(expired, std::memory_order_relaxed);
  return expired;
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
                                               const PutOptions& options, const Extent& extent) {
  auto [it, inserted] = shard.map.try_emplace(composite);
  auto blob = std::make_unique<Blob>();
  blob->extent = extent;
  blob->size = size;
  blob->group_id = std::string(options.group_id);
  blob->alloc_id = NextId(shard);
  blob->owner = caller.session;
  blob->name_space = std::string(caller.name_space);
  blob->alloc_deadline = clock_->NowNanos() + MsToNs(options_.alloc_timeout_ms);
  AllocGrant grant{blob->alloc_id, extent.offset, size, dram_->base() + extent.offset};
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
  Status st = ValidateTenant(ref.tenant);
  if (st.ok()) st = ValidatePut(ref.key, size, options);
  if (!st.ok()) return finish(st);
  const std::string composite = Composite(ref.tenant, ref.key);
  Shard& shard = ShardFor(composite);
  {
    std::lock_guard<std::mutex> lock(shard.mu);
    st = CheckPutLocked(shard, composite, options);
  }
  if (!st.ok()) return finish(st);
  Result<Extent> space = AllocateSpace(size);
  if (!space.ok()) return finish(space.status());
  std::lock_guard<std::mutex> lock(shard.mu);
  st = CheckPutLocked(shard, composite, options);  // a racing put may have won meanwhile
  if (!st.ok()) {
    FreeExtent(*space, size);
    return finish(st);
  }
  return finish(InstallPendingLocked(shard, composite, caller, size, options, *space));
}

Status Store::CommitLocked(Shard& shard, uint64_t alloc_id, uint64_t session) {
  auto pit = shard.pending.find(alloc_id);
  if (pit == shard.pending.end() || pit->second->second.pending->owner != session) {
    return NotFound("unknown alloc id (never granted, already committed, or revoked)");
  }
  Map::value_type& kv = *pit->second;
  Entry& e = kv.second;
  const int64_t now = clock_->NowNanos();
  if (now > e.pending->alloc_deadline) {
    DropPendingLocked(shard, shard.map.find(kv.first), /*revoked=*/true);
    return Status(Code::kLeaseExpired, "the write grant expired before commit (alloc-timeout-ms)");
  }
  shard.pending.erase(pit);
  std::unique_ptr<Blob> blob = std::move(e.pending);
  blob->alloc_id = 0;
  blob->owner = 0;
  if (!e.readable()) ++shard.readable;
  if (e.current) {
    std::unique_ptr<Blob> old = std::move(e.current);
    AnnounceRemoved(kv, *old, RemoveCause::kReplaced);
    RetireLocked(shard, std::move(old));
  }
  if (e.ssd) DropSsdLocked(shard, kv, RemoveCause::kReplaced);
  e.generation = next_generation_.fetch_add(1, std::memory_order_relaxed);  // a new value
  e.name_space = std::move(blob->name_space);
  e.current = std::move(blob);
  TouchLocked(shard, kv, now);
  AnnounceStored(kv, *e.current);
  if (ssd_ && options_.ssd_write_through) {
    EnqueueTierJob([this, index = shard.index,
                    composite = kv.first] { MoveDown(index, composite, -1, /*drop_dram=*/false); },
                   /*droppable=*/true);
  }
  return Status::Ok();
}

Status Store::Commit(const Caller& caller, uint64_t alloc_id) {
  Shard& shard = ShardOfId(alloc_id);
  Status st;
  {
    std::lock_guard<std::mutex> lock(shard.mu);
    st = CommitLocked(shard, alloc_id, caller.session);
  }
  DrainSsdTrash();  // an upsert may have replaced an SSD replica
  op_stats_.Record(Op::kUpdateState, st.code(), caller.rank);
  return st;
}

Status Store::Abort(const Caller& caller, uint64_t alloc_id) {
  Shard& shard = ShardOfId(alloc_id);
  std::lock_guard<std::mutex> lock(shard.mu);
  auto pit = shard.pending.find(alloc_id);
  if (pit == shard.pending.end() || pit->second->second.pending->owner != caller.session) {
    return NotFound("unknown alloc id");
  }
  DropPendingLocked(shard, shard.map.find(pit->second->first), /*revoked=*/false);
  return Status::Ok();
}

// ---------------------------------------------------------------------------
// Reads.

Result<LeaseGrant> Store::LeaseLocked(Shard& shard, const std::string& composite,
                                      const Caller& caller, bool* cold, bool from_ssd) {
  auto it = shard.map.find(composite);
  if (it == shard.map.end() || !it->second.current) {
    if (cold != nullptr) *cold = it != shard.map.end() && it->second.ssd != nullptr;
    return NotFound("key not found");
  }
  Blob& blob = *it->second.current;
  const int64_t now = clock_->NowNanos();
  const int64_t deadline = now + MsToNs(options_.lease_ms);
  const uint64_t id = NextId(shard);
  shard.leases.emplace(id, LeaseRecord{&blob, deadline, caller.session});
  ++blob.leases;
  blob.lease_deadline = std::max(blob.lease_deadline, deadline);
  (from_ssd ? tier_.get_hits_ssd : get_hits_dram_).fetch_add(1, std::memory_order_relaxed);
  TouchLocked(shard, *it, now);
  return LeaseGrant{id, blob.extent.offset, blob.size, deadline,
                    dram_->base() + blob.extent.offset};
}

Result<LeaseGrant> Store::Lease(const Caller& caller, const ObjectRef& ref) {
  Status st = ValidateTenant(ref.tenant);
  if (st.ok()) st = ValidateKey(ref.key);
  if (!st.ok()) {
    op_stats_.Record(Op::kGet, st.code(), caller.rank);
    return st;
  }
  const std::string composite = Composite(ref.tenant, ref.key);
  Shard& shard = ShardFor(composite);
  bool cold = false;
  Result<LeaseGrant> r = [&] {
    std::lock_guard<std::mutex> lock(shard.mu);
    return LeaseLocked(shard, composite, caller, &cold);
  }();
  if (cold) r = LeaseCold(shard, composite, caller);
  op_stats_.Record(Op::kGet, r.code(), caller.rank);
  return r;
}

Status Store::ReleaseLocked(Shard& shard, uint64_t lease_id, uint64_t session) {
  auto it = shard.leases.find(lease_id);
  if (it == shard.leases.end() || it->second.owner != session) {
    return NotFound("unknown lease id");
  }
  LeaseRecord rec = it->second;
  shard.leases.erase(it);
  if (rec.blob == nullptr) {
    return Status(Code::kLeaseExpired, "the read lease expired before release; discard the copy");
  }
  Blob* blob = static_cast<Blob*>(rec.blob);
  --blob->leases;
  const bool expired = clock_->NowNanos() > rec.deadline;
  if (expired) expired_leases_.fetch_add(1, std::memory_order_relaxed);
  FreeZombieLocked(shard, blob);
  if (expired) {
    return Status(Code::kLeaseExpired, "the read lease expired before release; discard the copy");
  }
  return Status::Ok();
}

Status Store::Release(const Caller& caller, uint64_t lease_id) {
  Shard& shard = ShardOfId(lease_id);
  std::lock_guard<std::mutex> lock(shard.mu);
  return ReleaseLocked(shard, lease_id, caller.session);
}

// ---------------------------------------------------------------------------
// Lookups and removal.

Result<ObjectInfo> Store::QueryLocked(Shard& shard, const std::string& composite) {
  auto it = shard.map.find(composite);
  if (it == shard.map.end() || !it->second.readable()) return NotFound("key not found");
  const Entry& e = it->second;
  const int64_t now = clock_->NowNanos();
  const int64_t wall_now = clock_->NowUnixMillis();
  ObjectInfo info;
  info.state = ReplicaState::kReadable;
  info.name_space = e.name_space;
  if (e.ssd) {
    info.size = e.ssd->blob.header.size;
    info.group_id = e.ssd->blob.header.group_id;
    info.media |= MediumBit(Medium::kSsd);
  }
  if (e.current) {
    const Blob& blob = *e.current;
    info.size = blob.size;
    info.group_id = blob.group_id;
    info.media |= MediumBit(Medium::kDram);
    info.active_leases = LeasedLocked(blob, now) ? blob.leases : 0;
    if (info.active_leases > 0) {
      info.lease_expires_unix_ms = wall_now + (blob.lease_deadline - now) / 1'000'000;
    }
  }
  info.last_access_unix_ms = wall_now - (now - it->second.last_access) / 1'000'000;
  return info;
}

Status Store::Exist(const Caller& caller, const ObjectRef& ref) {
  Status st = ValidateTenant(ref.tenant);
  if (st.ok()) st = ValidateKey(ref.key);
  if (st.ok()) {
    const std::string composite = Composite(ref.tenant, ref.key);
    Shard& shard = ShardFor(composite);
    std::lock_guard<std::mutex> lock(shard.mu);
    auto it = shard.map.find(composite);
    if (it == shard.map.end() || !it->second.readable()) st = NotFound("key not found");
  }
  op_stats_.Record(Op::kExistKey, st.code(), caller.rank);
  return st;
}

Result<ObjectInfo> Store::Query(const Caller& caller, const ObjectRef& ref) {
  Status st = ValidateTenant(ref.tenant);
  if (st.ok()) st = ValidateKey(ref.key);
  if (!st.ok()) {
    op_stats_.Record(Op::kQuery, st.code(), caller.rank);
    return st;
  }
  const std::string composite = Composite(ref.tenant, ref.key);
  Shard& shard = ShardFor(composite);
  Result<ObjectInfo> r = [&] {
    std::lock_guard<std::mutex> lock(shard.mu);
    return QueryLocked(shard, composite);
  }();
  op_stats_.Record(Op::kQuery, r.code(), caller.rank);
  return r;
}

Status Store::RemoveLocked(Shard& shard, const std::string& composite) {
  auto it = shard.map.find(composite);
  if (it == shard.map.end() || !it->second.readable()) return NotFound("key not found");
  Entry& e = it->second;
  --shard.readable;
  if (e.current) {
    std::unique_ptr<Blob> old = std::move(e.current);
    if (e.in_lru) {
      shard.lru.erase(e.lru_pos);
      e.in_lru = false;
    }
    AnnounceRemoved(*it, *old, RemoveCause::kRemoved);
    RetireLocked(shard, std::move(old));
  }
  if (e.ssd) DropSsdLocked(shard, *it, RemoveCause::kRemoved);
  EraseIfEmptyLocked(shard, it);
  return Status::Ok();
}

Status Store::Remove(const Caller& caller, const ObjectRef& ref) {
  Status st = ValidateTenant(ref.tenant);
  if (st.ok()) st = ValidateKey(ref.key);
  if (st.ok()) {
    const std::string composite = Composite(ref.tenant, ref.key);
    Shard& shard = ShardFor(composite);
    {
      std::lock_guard<std::mutex> lock(shard.mu);
      st = RemoveLocked(shard, composite);
    }
    DrainSsdTrash();  // the removal is on disk when the call returns
  }
  op_stats_.Record(Op::kRemove, st.code(), caller.rank);
  return st;
}

// Linearizable with concurrent puts: every shard is locked (in index order, the
// only order in which more than one shard lock is ever held) from the first
// removal until `cleared` has been announced. A put that commits meanwhile
// waits, so its `stored` comes after `cleared` and the object survives; one
// committed before is removed here and announced before `cleared`. `cleared`
// is announced only when the tenant is empty at that moment.
RemoveAllResult Store::RemoveTenant(std::string_view tenant, bool force) {
  RemoveAllResult out;
  {
    std::vector<std::unique_lock<std::mutex>> locks;
    locks.reserve(shards_.size());
    for (auto& shard_ptr : shards_) locks.emplace_back(shard_ptr->mu);
    const int64_t now = clock_->NowNanos();
    for (auto& shard_ptr : shards_) {
      Shard& shard = *shard_ptr;
      for (auto it = shard.map.begin(); it != shard.map.end();) {
        auto next = std::next(it);
        if (TenantOf(it->first) == tenant) {
          Entry& e = it->second;
          const bool has_current = e.readable();
          if (e.pending) {
            if (force) {
              DropPendingLocked(shard, it, /*revoked=*/true);  // erases the entry if nothing else
            } else {
              ++out.skipped;
            }
          }
          if (has_current) {
            if (!force && e.current && LeasedLocked(*e.current, now)) {
              ++out.skipped;
            } else {
              ++out.removed;
              (void)RemoveLocked(shard, it->first);
            }
          }
        }
        it = next;
      }
    }
    if (out.removed > 0 && out.skipped == 0) {
      out.cleared = true;
      feed_.AppendCleared(tenant);
      for (ReplicaObserver* o : observers_) o->OnTenantCleared(tenant);
    }
  }
  DrainSsdTrash();  // SSD frees do I/O: never under a shard lock
  return out;
}

Result<RemoveAllResult> Store::RemoveAll(const Caller& caller, std::string_view tenant,
                                         bool force) {
  Status st = ValidateTenant(tenant);
  if (!st.ok()) {
    op_stats_.Record(Op::kRemoveAll, st.code(), caller.rank);
    return st;
  }
  RemoveAllResult out = RemoveTenant(tenant, force);
  op_stats_.Record(Op::kRemoveAll, Code::kOk, caller.rank);
  return out;
}

Result<RemoveAllResult> Store::RemoveAllTenants(const Caller& caller, bool force) {
  std::set<std::string> tenants;
  for (auto& shard_ptr : shards_) {
    std::lock_guard<std::mutex> lock(shard_ptr->mu);
    for (const auto& kv : shard_ptr->map) tenants.emplace(TenantOf(kv.first));
  }
  RemoveAllResult total;
  for (const std::string& t : tenants) {
    const RemoveAllResult r = RemoveTenant(t, force);
    total.removed += r.removed;
    total.skipped += r.skipped;
  }
  total.cleared = total.skipped == 0 && total.removed > 0;
  op_stats_.Record(Op::kRemoveAll, Code::kOk, caller.rank);
  return total;
}

size_t Store::CountReadable(std::string_view tenant, std::span<const std::string> keys) const {
  size_t n = 0;
  for (const std::string& key : keys) {
    if (!ValidateTenant(tenant).ok() || !ValidateKey(key).ok()) continue;
    const std::string composite = Composite(tenant, key);
    Shard& shard = *shards_[ShardIndex(composite)];
    std::lock_guard<std::mutex> lock(shard.mu);
    auto it = shard.map.find(composite);
    n += it != shard.map.end() && it->second.readable() ? 1 : 0;
  }
  return n;
}

size_t Store::EvictKeys(std::string_view tenant, std::span<const std::string> keys) {
  size_t n = 0;
  for (const std::string& key : keys) {
    if (!ValidateTenant(tenant).ok() || !ValidateKey(key).ok()) continue;
    const std::string composite = Composite(tenant, key);
    Shard& shard = ShardFor(composite);
    int64_t last_access = 0;
    bool dram = false;
    {
      std::lock_guard<std::mutex> lock(shard.mu);
      auto it = shard.map.find(composite);
      if (it == shard.map.end() || !it->second.readable()) continue;
      last_access = it->second.last_access;
      dram = it->second.current != nullptr;
    }
    const Victim victim{last_access, shard.index, composite};
    n += (dram ? EvictVictim(victim) : EvictSsdVictim(victim)) ? 1 : 0;
  }
  DrainSsdTrash();
  return n;
}

Result<std::vector<std::string>> Store::ListKeys(const Caller& caller, std::string_view tenant,
                                                 std::string_view prefix, size_t limit) {
  Status st = ValidateTenant(tenant);
  if (!st.ok()) {
    op_stats_.Record(Op::kGetAllKeys, st.code(), caller.rank);
    return st;
  }
  std::vector<std::string> keys;
  for (auto& shard_ptr : shards_) {
    std::lock_guard<std::mutex> lock(shard_ptr->mu);
    for (const auto& kv : shard_ptr->map) {
      if (!kv.second.readable() || TenantOf(kv.first) != tenant) continue;
      std::string_view key = KeyOf(kv.first);
      if (key.substr(0, prefix.size()) == prefix) keys.emplace_back(key);
    }
  }
  std::sort(keys.begin(), keys.end());
  if (limit > 0 && keys.size() > limit) keys.resize(limit);
  op_stats_.Record(Op::kGetAllKeys, Code::kOk, caller.rank);
  return keys;
}

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
