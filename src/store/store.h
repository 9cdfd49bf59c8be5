// Store: the single source of truth for what this manager holds.
//
// What it does: keeps the object index, the replica lifecycle (ALLOCATED ->
// READABLE -> REMOVING), write grants (two-phase put), read leases, eviction and
// the op counters, and announces every replica transition to its observers.
//
// The index is split into shards by a hash of (tenant, key); each shard has its
// own mutex, map, LRU list, pending-alloc table and lease table, so clients
// working on different keys rarely meet on a lock. Batch calls sort their keys by
// shard and take each shard's lock once. Ids of allocs and leases carry their
// shard in the low 8 bits, so commit and release go straight to one shard.
//
// Memory safety with shared memory: a range of the pool is reused only when
// nobody can still legitimately touch it. A read lease blocks eviction and reuse
// until it is released or its deadline passes; a replica removed while leased
// stays allocated ("zombie") until its leases end. An uncommitted alloc whose
// grant times out is revoked (commit fails, the key is free again), but if the
// grant belongs to a live client session its range stays quarantined until that
// session ends, so a stalled writer can never scribble over someone else's object.
//
// Eviction (approximate LRU): each shard keeps an exact LRU list of readable
// replicas; an eviction round takes a few unleased candidates from the tail of
// every shard, sorts them by last access and drops the oldest until the goal is
// met. It runs on demand when an alloc finds no room (the alloc waits for it),
// and in a background thread whenever usage passes the high watermark, down to
// the low one.
//
// Thread-safety: every public method is thread-safe. Observers are called with a
// shard lock held (see observer.h).
#ifndef TIERKV_STORE_STORE_H_
#define TIERKV_STORE_STORE_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include "common/clock.h"
#include "media/dram_pool.h"
#include "store/observer.h"
#include "store/op_stats.h"
#include "tierkv/status.h"
#include "tierkv/types.h"

namespace tierkv {

struct StoreOptions {
  uint32_t shards = 64;                // power of two, 1..256
  int64_t lease_ms = 2000;             // read lease length
  int64_t alloc_timeout_ms = 30000;    // an uncommitted alloc is revoked after this
  int64_t lease_tombstone_ms = 60000;  // how long an expired lease still answers LEASE_EXPIRED
  double high_watermark = 0.9;         // background eviction starts above this fill
  double low_watermark = 0.8;          // ... and stops at this one
  uint32_t max_key_bytes = 1024;
  uint64_t max_object_bytes = 256ull << 20;
  int64_t maintenance_interval_ms = 20;  // reaper / evictor period
  Clock* clock = nullptr;                // null: the real clock
};

// Who makes a call: the session (for grant ownership and cleanup; 0 = the manager
// itself) and the client's declared rank (for per-rank counters).
struct Caller {
  uint64_t session = 0;
  uint32_t rank = 0;
};

struct ObjectRef {
  std::string_view tenant;
  std::string_view key;
};

struct PutOptions {
  std::string_view group_id;
  bool upsert = false;  // replace an existing readable value instead of DUPLICATED
};

struct AllocItem {
  std::string_view key;
  uint64_t size = 0;
  PutOptions options;
};

struct AllocGrant {
  uint64_t alloc_id = 0;
  uint64_t offset = 0;  // into the DRAM pool
  uint64_t size = 0;
};

struct LeaseGrant {
  uint64_t lease_id = 0;
  uint64_t offset = 0;
  uint64_t size = 0;
  int64_t deadline_nanos = 0;  // on the store clock (CLOCK_MONOTONIC for the real one)
};

struct RemoveAllResult {
  uint64_t removed = 0;
  uint64_t skipped = 0;  // leased or in-flight objects left in place (force=false)
  bool cleared = false;  // the tenant was emptied and OnTenantCleared announced
};

struct StoreStats {
  uint64_t objects = 0;  // readable objects
  uint64_t pending_allocs = 0;
  uint64_t active_leases = 0;
  uint64_t zombie_bytes = 0;  // removed but still leased
  uint64_t quarantined_bytes = 0;
  uint64_t evicted_objects = 0;
  uint64_t evicted_bytes = 0;
  uint64_t eviction_rounds = 0;
  uint64_t revoked_allocs = 0;
  uint64_t expired_leases = 0;
  uint64_t get_hits_dram = 0;  // leases granted on a DRAM replica
  bool evicting = false;       // an eviction round is running now
  AllocatorStats dram;
};

class Store {
 public:
  // Takes ownership of `dram`. Errors: INVALID_ARGUMENT for inconsistent options.
  static Result<std::unique_ptr<Store>> Create(const StoreOptions& options,
                                               std::unique_ptr<DramPool> dram);
  ~Store();
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  // Registers an observer (not owned; must outlive the store). Call before any
  // other thread uses the store.
  void AddObserver(ReplicaObserver* observer);

  // Starts / stops the background maintenance thread (lease and grant expiry,
  // watermark eviction). Without it, tests drive RunMaintenance() themselves.
  void Start();
  void Stop();

  // --- Two-phase put -------------------------------------------------------
  // Reserves `size` bytes for `ref`; the caller writes them at grant.offset of the
  // DRAM pool, then calls Commit. Evicts to make room when needed.
  // Errors: INVALID_ARGUMENT (empty key, bad tenant, size 0), TOO_LARGE (key or
  // size over the limits), DUPLICATED (readable and !upsert, or another put of the
  // key in flight), RETRY (upsert while another put of the key is in flight),
  // NO_SPACE (nothing more can be evicted, or larger than the pool).
  // Counted as `alloc`.
  Result<AllocGrant> Alloc(const Caller& caller, const ObjectRef& ref, uint64_t size,
                           const PutOptions& options);
  // Makes the value readable (announces OnStored; for an upsert OnRemoved of the
  // old value first). Errors: NOT_FOUND (unknown or revoked alloc id),
  // LEASE_EXPIRED (the grant timed out). Counted as `update_state`.
  Status Commit(const Caller& caller, uint64_t alloc_id);
  // Drops an uncommitted alloc. Errors: NOT_FOUND. Not counted.
  Status Abort(uint64_t alloc_id);

  // --- Reads ---------------------------------------------------------------
  // Grants a read lease on the readable value: the caller may copy `size` bytes
  // at grant.offset until it calls Release or the deadline passes.
  // Errors: NOT_FOUND, INVALID_ARGUMENT, TOO_LARGE (key). Counted as `get`.
  Result<LeaseGrant> Lease(const Caller& caller, const ObjectRef& ref);
  // Ends a lease. OK means the bytes were never at risk while the lease was held;
  // LEASE_EXPIRED means the deadline passed first and the copy must be discarded;
  // NOT_FOUND for an unknown id.
  Status Release(uint64_t lease_id);

  // --- Lookups and removal -------------------------------------------------
  Status Exist(const Caller& caller, const ObjectRef& ref);              // `exist_key`
  Result<ObjectInfo> Query(const Caller& caller, const ObjectRef& ref);  // `query`
  // Hides the value at once; memory is freed when its leases end. `remove`.
  Status Remove(const Caller& caller, const ObjectRef& ref);
  // Removes every readable object of `tenant`. Without `force`, leased objects and
  // in-flight puts are skipped. Announces OnTenantCleared only when something was
  // removed and nothing skipped. `remove_all`.
  Result<RemoveAllResult> RemoveAll(const Caller& caller, std::string_view tenant, bool force);
  // RemoveAll for every tenant (the REST contract's DELETE /all_keys), counted
  // as one remove_all call. Announces OnTenantCleared per tenant emptied.
  Result<RemoveAllResult> RemoveAllTenants(const Caller& caller, bool force);
  // Readable keys of `tenant` starting with `prefix`, sorted, at most `limit`
  // (0 = no limit). `get_all_keys`.
  Result<std::vector<std::string>> ListKeys(const Caller& caller, std::string_view tenant,
                                            std::string_view prefix, size_t limit);

  // --- Batches: one status per item, in input order -------------------------
  std::vector<Result<AllocGrant>> BatchAlloc(const Caller& caller, std::string_view tenant,
                                             std::span<const AllocItem> items);
  std::vector<Status> BatchCommit(const Caller& caller, std::span<const uint64_t> alloc_ids);
  std::vector<Result<LeaseGrant>> BatchLease(const Caller& caller, std::string_view tenant,
                                             std::span<const std::string_view> keys);
  std::vector<Status> BatchRelease(std::span<const uint64_t> lease_ids);
  std::vector<Status> BatchExist(const Caller& caller, std::string_view tenant,
                                 std::span<const std::string_view> keys);
  std::vector<Result<ObjectInfo>> BatchQuery(const Caller& caller, std::string_view tenant,
                                             std::span<const std::string_view> keys);
  std::vector<Status> BatchRemove(const Caller& caller, std::string_view tenant,
                                  std::span<const std::string_view> keys);

  // --- Operator actions (REST /memory/*); not counted as client operations ---
  // How many of `keys` are readable now.
  size_t CountReadable(std::string_view tenant, std::span<const std::string> keys) const;
  // Evicts the given keys' unleased readable replicas (one tier down; with no
  // lower tier that drops them), announced with cause kEvicted and counted as
  // evictions. Returns how many were evicted.
  size_t EvictKeys(std::string_view tenant, std::span<const std::string> keys);

  // --- Sessions and maintenance ---------------------------------------------
  // A client session ended: frees ranges quarantined for it. Call after aborting
  // its allocs and releasing its leases.
  void EndSession(uint64_t session);
  // Expires leases and revokes allocs past their deadlines, then evicts down to
  // the low watermark if usage is above the high one. Returns objects evicted.
  size_t RunMaintenance();
  // Evicts unleased readable replicas, oldest first, until at most `target_used`
  // bytes are allocated. Returns objects evicted.
  size_t EvictDownTo(uint64_t target_used);

  // Calls `fn` for every readable replica, as OnStored announced it. Each shard
  // is copied under its lock and visited after, so `fn` may take its time (and
  // must not assume a consistent cut across shards).
  void ForEachReadable(const std::function<void(const ReplicaEvent&)>& fn) const;

  StoreStats Stats() const;
  const OpStats& op_stats() const { return op_stats_; }
  DramPool& dram() { return *dram_; }
  const StoreOptions& options() const { return options_; }
  Clock* clock() const { return clock_; }

  // Validation shared with the protocol edge. INVALID_ARGUMENT / TOO_LARGE.
  Status ValidateTenant(std::string_view tenant) const;
  Status ValidateKey(std::string_view key) const;

 private:
  struct Blob;
  struct Entry;
  struct Shard;
  struct Victim;
  using Map = std::unordered_map<std::string, Entry>;

  Store(const StoreOptions& options, std::unique_ptr<DramPool> dram);

  Shard& ShardFor(std::string_view composite);
  Shard& ShardOfId(uint64_t id);
  uint32_t ShardIndex(std::string_view composite) const;
  uint64_t NextId(uint32_t shard_index);
  std::vector<uint32_t> ShardOrder(std::span<const std::string> composites) const;

  // Per-item bodies; the shard lock is held by the caller.
  Status CheckPutLocked(Shard& shard, const std::string& composite, const PutOptions& options);
  Result<AllocGrant> InstallPendingLocked(Shard& shard, const std::string& composite,
                                          const Caller& caller, uint64_t size,
                                          const PutOptions& options, const Extent& extent);
  Status CommitLocked(Shard& shard, uint64_t alloc_id);
  Result<LeaseGrant> LeaseLocked(Shard& shard, const std::string& composite, const Caller& caller);
  Status ReleaseLocked(Shard& shard, uint64_t lease_id);
  Result<ObjectInfo> QueryLocked(Shard& shard, const std::string& composite);
  Status RemoveLocked(Shard& shard, const std::string& composite);
  RemoveAllResult RemoveTenant(std::string_view tenant, bool force);  // uncounted

  // Helpers for blobs and entries; shard lock held.
  void RetireLocked(Shard& shard, std::unique_ptr<Blob> blob);
  void DropPendingLocked(Shard& shard, Map::iterator it, bool revoked);
  void EraseIfEmptyLocked(Shard& shard, Map::iterator it);
  void TouchLocked(Shard& shard, Map::value_type& kv, int64_t now);
  void AnnounceStored(const Map::value_type& kv, const Blob& blob);
  void AnnounceRemoved(const Map::value_type& kv, const Blob& blob, RemoveCause cause);
  size_t ReapShardLocked(Shard& shard, int64_t now);
  bool LeasedLocked(const Blob& blob, int64_t now) const;

  // Space.
  Result<Extent> AllocateSpace(uint64_t size);
  void FreeExtent(const Extent& extent, uint64_t requested);
  std::vector<Victim> GatherVictims();
  bool EvictVictim(const Victim& victim);
  void MaintenanceLoop();

  const StoreOptions options_;
  Clock* const clock_;
  std::unique_ptr<DramPool> dram_;
  std::vector<std::unique_ptr<Shard>> shards_;
  std::vector<ReplicaObserver*> observers_;
  OpStats op_stats_;
  std::atomic<uint64_t> next_id_{1};

  std::mutex evict_mu_;  // one evictor at a time

  mutable std::mutex quarantine_mu_;
  std::unordered_map<uint64_t, std::vector<std::pair<Extent, uint64_t>>> quarantine_;
  uint64_t quarantined_bytes_ = 0;

  std::atomic<uint64_t> evicted_objects_{0};
  std::atomic<uint64_t> evicted_bytes_{0};
  std::atomic<uint64_t> eviction_rounds_{0};
  std::atomic<uint64_t> revoked_allocs_{0};
  std::atomic<uint64_t> expired_leases_{0};
  std::atomic<uint64_t> get_hits_dram_{0};
  std::atomic<int> evicting_{0};

  std::mutex maint_mu_;
  std::condition_variable maint_cv_;
  bool stopping_ = false;
  bool maint_kick_ = false;
  std::thread maint_thread_;
};

}  // namespace tierkv

#endif  // TIERKV_STORE_STORE_H_
