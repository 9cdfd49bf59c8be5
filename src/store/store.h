// Store: the single source of truth for what this manager holds.
//
// What it does: keeps the object index, the replica lifecycle (ALLOCATED ->
// READABLE -> REMOVING), write grants (two-phase put), read leases, eviction and
// the op counters, and announces every replica transition to its observers.
//
// The index is split into shards by a hash of (tenant, key); each shard has its
// own mutex, map, eviction queues, pending-alloc table and lease table, so clients
// working on different keys rarely meet on a lock. Batch calls sort their keys by
// shard and take each shard's lock once. Ids of allocs and leases carry their
// shard in the low 8 bits, so commit and release go straight to one shard; the
// other 56 bits are unpredictable, and an id is honoured only for the session
// it was granted to (any other caller gets NOT_FOUND and nothing changes).
//
// Memory safety with shared memory: a range of the pool is reused only when
// nobody can still legitimately touch it. A read lease blocks eviction and reuse
// until it is released or its deadline passes; a replica removed while leased
// stays allocated ("zombie") until its leases end. An uncommitted alloc whose
// grant times out is revoked (commit fails, the key is free again), but if the
// grant belongs to a live client session its range stays quarantined until that
// session ends, so a stalled writer can never scribble over someone else's object.
//
// Eviction (StoreOptions::evict_policy, docs/store.md): each shard orders its
// DRAM replicas in an EvictionQueue of the policy (S3FifoQueue, LruQueue) and
// its SSD replicas in an LruQueue. An eviction round takes each shard's next
// candidates (S3-FIFO: one; LRU: a few from the tail), sorts them by last
// access and moves the oldest one tier down until the goal is met. It runs on demand when an alloc
// finds no room (the alloc waits for it), and in the maintenance task whenever usage passes the
// high watermark, down to the low one.
//
// With an SSD tier (AttachSsd), a DRAM victim is demoted: written to SSD unless
// it already has an SSD replica, then dropped from DRAM; it is dropped outright
// when SSD has no room or fails. SSD victims are dropped. A get that finds only
// an SSD replica rewarms it (one reader per key; concurrent gets wait for it)
// into an ordinary DRAM replica; the SSD replica stays, so the next demotion of
// that object costs no write. SSD I/O never runs under a shard lock; a DRAM
// replica being written out is pinned, an SSD replica being read is held by a
// reference, and its extent is freed (header zeroed) only after the last one.
//
// With an HBM tier (AttachHbm, docs/hbm.md), a replica may also sit in a
// GPU's pool. /memory/prefetch copies a DRAM value up into HBM (the DRAM
// replica stays until DRAM eviction drops it); an HBM victim is copied down
// into DRAM (and so on to SSD) unless DRAM already holds it; a host get of a
// value held only in HBM copies it down into an ordinary DRAM replica first,
// the same single-flight way as a rewarm from SSD. To observers memory is one
// medium: announced stored when the first of an object's HBM and DRAM
// replicas appears (with that replica's medium), removed when the last goes.
//
// Thread-safety: every public method is thread-safe. Observers are called with a
// shard lock held (see observer.h).
#ifndef TIERKV_STORE_STORE_H_
#define TIERKV_STORE_STORE_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "common/clock.h"
#include "common/scheduler.h"
#include "common/single_flight.h"
#include "common/work_queue.h"
#include "media/dram_pool.h"
#include "media/hbm_tier.h"
#include "media/ssd_tier.h"
#include "store/change_feed.h"
#include "store/io_pool.h"
#include "store/key_rules.h"
#include "store/observer.h"
#include "store/op_stats.h"
#include "store/pin_budgets.h"
#include "store/quarantine.h"
#include "store/shard.h"
#include "store/ssd_stage.h"
#include "store/store_admin.h"
#include "store/store_types.h"
#include "tierkv/status.h"
#include "tierkv/types.h"

namespace tierkv {

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

  // Adds an SSD tier below DRAM, with the objects its recovery scan found (they
  // become readable SSD replicas and are announced to the observers registered
  // so far). Call once, after AddObserver and before Start or any other use.
  // Errors: INVALID_ARGUMENT (already attached, bad SSD watermarks). Recovered
  // blobs whose names are not valid keys here are freed and counted as corrupt.
  Status AttachSsd(std::unique_ptr<SsdTier> ssd, std::vector<SsdBlob> recovered,
                   const SsdRecoveryStats& recovery);
  bool has_ssd() const { return ssd_ != nullptr; }

  // Adds the HBM tier above DRAM: `hbm`'s pools (not owned; it must outlive
  // the store) hold the replicas /memory/prefetch moves up, under the DRAM
  // watermarks applied to each pool. Call once, before Start or any other use.
  // Errors: INVALID_ARGUMENT (already attached, null, no pools).
  Status AttachHbm(HbmTier* hbm);
  bool has_hbm() const { return hbm_ != nullptr; }
  // The HBM tier (AttachHbm); null without one.
  const HbmTier* hbm() const { return hbm_; }

  // Starts / stops the maintenance task on StoreOptions::scheduler (lease and
  // grant expiry, watermark eviction) and, with an SSD tier, the work queue of
  // write-through copies and prefetches (which AttachSsd starts too; Stop
  // drops what it has queued). Without them, tests drive
  // admin().RunMaintenance() themselves. After Stop no thread of the store
  // calls its observers.
  void Start();
  void Stop();

  // --- Two-phase put -------------------------------------------------------
  // Reserves `size` bytes for `ref`; the caller writes them at grant.offset of the
  // DRAM pool, then calls Commit. Evicts to make room when needed.
  // Errors: INVALID_ARGUMENT (empty key, bad tenant, size 0), TOO_LARGE (key or
  // size over the limits), DUPLICATED (readable and !upsert, or another put of the
  // key in flight), RETRY (upsert while another put of the key is in flight),
  // NO_SPACE (nothing more can be evicted, or larger than the pool). A group_id
  // over max_group_bytes is TOO_LARGE.
  // Counted as `alloc`.
  Result<AllocGrant> Alloc(const Caller& caller, const ObjectRef& ref, uint64_t size,
                           const PutOptions& options);
  // Makes the value readable (announces OnStored; for an upsert OnRemoved of the
  // old value first). Only the session that received the grant may commit or
  // abort it: for any other caller the id does not exist. Errors: NOT_FOUND
  // (unknown, foreign or revoked alloc id; nothing changes), LEASE_EXPIRED (the
  // grant timed out). Counted as `update_state`.
  // `known`: checksums the caller verified over the bytes it wrote (the
  // remote read path, which checked them against the owner's), kept with the
  // value. The caller answers for them: a wrong one is sent to later readers,
  // who then refuse the bytes. `generation` (optional) gets the committed
  // value's generation.
  Status Commit(const Caller& caller, uint64_t alloc_id, std::span<const KnownChecksum> known = {},
                uint64_t* generation = nullptr);
  // Drops an uncommitted alloc of `caller`'s session. Errors: NOT_FOUND. Not counted.
  Status Abort(const Caller& caller, uint64_t alloc_id);

  // --- Reads ---------------------------------------------------------------
  // Grants a read lease on the readable value: the caller may copy `size` bytes
  // at grant.offset until it calls Release or the deadline passes. A value held
  // only on SSD is rewarmed into DRAM first (the call waits for the read).
  // Errors: NOT_FOUND, INVALID_ARGUMENT, TOO_LARGE (key); for a cold value
  // NO_SPACE (no DRAM for the rewarm) or IO_ERROR (the SSD read failed, or the
  // replica failed its checksum and was dropped). Counted as `get`.
  // ReadHold::kLocate: a DRAM hit is answered without a lease (lease_id 0);
  // a rewarmed value is still leased.
  Result<LeaseGrant> Lease(const Caller& caller, const ObjectRef& ref,
                           ReadHold hold = ReadHold::kLease);
  // Ends a lease. OK means the bytes were never at risk while the lease was held;
  // LEASE_EXPIRED means the deadline passed first and the copy must be discarded;
  // NOT_FOUND for an unknown id or one granted to another session (the lease is
  // left as it is).
  Status Release(const Caller& caller, uint64_t lease_id);

  // --- Lookups and removal -------------------------------------------------
  Status Exist(const Caller& caller, const ObjectRef& ref);              // `exist_key`
  Result<ObjectInfo> Query(const Caller& caller, const ObjectRef& ref);  // `query`
  // Hides the value at once; memory is freed when its leases end. `remove`.
  Status Remove(const Caller& caller, const ObjectRef& ref);
  // Removes every readable object of `tenant`. Without `force`, leased objects and
  // in-flight puts are skipped. Announces OnTenantCleared only when something was
  // removed and nothing skipped. Linearizable with concurrent puts: all shards
  // are locked for its duration (other calls wait), so a concurrent put is either
  // removed (its `removed` announced before `cleared`) or announced after
  // `cleared` and kept. `remove_all`.
  Result<RemoveAllResult> RemoveAll(const Caller& caller, std::string_view tenant, bool force);
  // Readable keys of `tenant` starting with `prefix`, sorted, at most `limit`
  // (0 = no limit). `get_all_keys`.
  Result<std::vector<std::string>> ListKeys(const Caller& caller, std::string_view tenant,
                                            std::string_view prefix, size_t limit);

  // --- Batches: one status per item, in input order -------------------------
  std::vector<Result<AllocGrant>> BatchAlloc(const Caller& caller, std::string_view tenant,
                                             std::span<const AllocItem> items);
  std::vector<Status> BatchCommit(const Caller& caller, std::span<const uint64_t> alloc_ids);
  std::vector<Result<LeaseGrant>> BatchLease(const Caller& caller, std::string_view tenant,
                                             std::span<const std::string_view> keys,
                                             ReadHold hold = ReadHold::kLease);
  std::vector<Status> BatchRelease(const Caller& caller, std::span<const uint64_t> lease_ids);
  std::vector<Status> BatchExist(const Caller& caller, std::string_view tenant,
                                 std::span<const std::string_view> keys);
  std::vector<Result<ObjectInfo>> BatchQuery(const Caller& caller, std::string_view tenant,
                                             std::span<const std::string_view> keys);
  std::vector<Status> BatchRemove(const Caller& caller, std::string_view tenant,
                                  std::span<const std::string_view> keys);

  // --- Sessions and maintenance ---------------------------------------------
  // A client session ended: frees ranges quarantined for it. Call after aborting
  // its allocs and releasing its leases.
  void EndSession(uint64_t session);

  // --- Side doors (store_admin.h) -------------------------------------------
  // Operator actions, maintenance, snapshots and figures.
  StoreAdmin admin() { return StoreAdmin(*this); }
  // Pins of replicas for readers that hold no lease (remote grants).
  StorePins pins() { return StorePins(*this); }

  // --- Change feed ----------------------------------------------------------
  // Every announcement carries a sequence (ReplicaEvent::sequence) from this
  // feed; with StoreOptions::journal_bytes the recent ones can be read back.
  const ChangeFeed& feed() const { return feed_; }
  const DramPool& pool() const { return *dram_; }
  const StoreOptions& options() const { return options_; }
  Clock* clock() const { return clock_; }

  // What tenants, keys and puts must be (shared with the protocol edge).
  const KeyRules& rules() const { return rules_; }

 private:
  friend class StoreAdmin;
  friend class StorePins;
  using Blob = storage::Blob;
  using Entry = storage::Entry;
  using Shard = storage::Shard;
  using SsdReplica = storage::SsdReplica;
  using HbmReplica = storage::HbmReplica;
  using Map = storage::Map;
  struct Victim;

  Store(const StoreOptions& options, std::unique_ptr<DramPool> dram);

  Shard& ShardFor(std::string_view composite);
  Shard& ShardOfId(uint64_t id);
  uint32_t ShardIndex(std::string_view composite) const;
  // Item indices ordered by shard; *shard_of gets each item's shard index.
  std::vector<uint32_t> ShardOrder(std::span<const std::string> composites,
                                   std::vector<uint32_t>* shard_of) const;
  // Runs fn(shard, i) for every item i with valid[i], under its shard's lock,
  // shard by shard in windows of lookups whose loads overlap (store_batch.cc).
  template <typename Fn>
  void ForEachKey(const std::vector<std::string>& composites, const std::vector<bool>& valid,
                  Fn fn);

  // Per-item bodies; the shard lock is held by the caller.
  Status CheckPutLocked(Shard& shard, const std::string& composite, const PutOptions& options)
      TIERKV_REQUIRES(shard.mu);
  // `hbm_space`: a put into HBM (`extent` unused).
  Result<AllocGrant> InstallPendingLocked(Shard& shard, const std::string& composite,
                                          const Caller& caller, uint64_t size,
                                          const PutOptions& options, const Extent& extent,
                                          std::shared_ptr<HbmReplica> hbm_space = nullptr)
      TIERKV_REQUIRES(shard.mu);
  Status CommitLocked(Shard& shard, uint64_t alloc_id, uint64_t session,
                      std::span<const KnownChecksum> known = {}, uint64_t* generation = nullptr)
      TIERKV_REQUIRES(shard.mu);
  // NOT_FOUND with *cold set when no DRAM replica exists but an HBM or SSD
  // one does. `now`: the clock read once per call (once for a whole batch).
  // `from`: where the DRAM replica came from, for the hit counters (kDram: it
  // was there; kHbm, kSsd: copied up or down for this read).
  Result<LeaseGrant> LeaseLocked(Shard& shard, const std::string& composite, const Caller& caller,
                                 int64_t now, bool* cold = nullptr, Medium from = Medium::kDram,
                                 ReadHold hold = ReadHold::kLease) TIERKV_REQUIRES(shard.mu);
  // Lease of a cold key: rewarm, then lease (shard lock not held).
  Result<LeaseGrant> LeaseCold(Shard& shard, const std::string& composite, const Caller& caller);
  Status ReleaseLocked(Shard& shard, uint64_t lease_id, uint64_t session, int64_t now)
      TIERKV_REQUIRES(shard.mu);
  Result<ObjectInfo> QueryLocked(Shard& shard, const std::string& composite)
      TIERKV_REQUIRES(shard.mu);
  Status RemoveLocked(Shard& shard, const std::string& composite) TIERKV_REQUIRES(shard.mu);
  RemoveAllResult RemoveTenant(std::string_view tenant, bool force);  // uncounted
  // The maintenance pass, watermark eviction and the wait for the tier worker
  // (StoreAdmin exposes them).
  size_t RunMaintenance();
  size_t EvictDownTo(uint64_t target_used);
  size_t EvictSsdDownTo(uint64_t target_used);
  void WaitTierIdle();

  // Helpers for blobs and entries; shard lock held.
  void RetireLocked(Shard& shard, std::unique_ptr<Blob> blob) TIERKV_REQUIRES(shard.mu);
  void DropPendingLocked(Shard& shard, Map::iterator it, bool revoked) TIERKV_REQUIRES(shard.mu);
  void EraseIfEmptyLocked(Shard& shard, Map::iterator it) TIERKV_REQUIRES(shard.mu);
  // A DRAM replica appeared in kv (call after installing it) or left it (call
  // after taking it out): announced unless an HBM replica keeps memory held.
  void AnnounceStored(Map::value_type& kv, const Blob& blob);
  void AnnounceRemoved(Map::value_type& kv, const Blob& blob, RemoveCause cause);
  void Announce(Map::value_type& kv, std::string_view group, uint64_t size, Medium medium,
                bool stored, RemoveCause cause);
  void UnpinLocked(Shard& shard, Blob* blob) TIERKV_REQUIRES(shard.mu);
  // Appends kv's replicas announced at or before `watermark` (shard lock held).
  static void CopyReadable(const Map::value_type& kv, uint64_t watermark,
                           std::vector<SnapshotRecord>* out);
  void FreeZombieLocked(Shard& shard, Blob* blob) TIERKV_REQUIRES(shard.mu);
  size_t ReapShardLocked(Shard& shard, int64_t now) TIERKV_REQUIRES(shard.mu);

  // Space.
  Result<Extent> AllocateSpace(uint64_t size);
  void FreeExtent(const Extent& extent, uint64_t requested);
  // The next candidates of every shard's DRAM (or SSD) eviction queue that
  // `usable` accepts (called with the shard lock held), oldest first.
  using VictimFilter = std::function<bool(Shard&, const Map::value_type&, int64_t)>;
  std::vector<Victim> TailVictims(Medium medium, const VictimFilter& usable);
  std::vector<Victim> GatherVictims();
  bool EvictVictim(const Victim& victim);
  // Evicts victims in order until enough(in_flight); with an SSD tier up to
  // the queue depth of them are demoted side by side, and enough() is asked
  // as each starts with the DRAM bytes those still in flight will free.
  size_t EvictVictims(std::span<const Victim> victims,
                      const std::function<bool(uint64_t in_flight)>& enough);
  // Runs the next maintenance pass soon (nothing before Start).
  void WakeMaintenance();

  // SSD tier (store_tier.cc). None of these hold a shard lock on entry.
  void InstallSsdLocked(Shard& shard, Map::value_type& kv, std::shared_ptr<SsdReplica> replica)
      TIERKV_REQUIRES(shard.mu);
  std::shared_ptr<SsdReplica> DropSsdLocked(Shard& shard, Map::value_type& kv, RemoveCause cause)
      TIERKV_REQUIRES(shard.mu);
  // Writes the DRAM value of `composite` to SSD (if it has none yet); with
  // `drop_dram` the DRAM replica is dropped after, when nobody uses it and it
  // was not touched since `last_access` (-1: do not check). Returns whether the
  // DRAM replica was dropped.
  bool MoveDown(uint32_t shard_index, const std::string& composite, int64_t last_access,
                bool drop_dram);
  // Writes to SSD, dropping the oldest SSD replicas when it is full.
  Result<SsdBlob> WriteSsd(const BlobHeader& header, const void* value);
  // Single-flight rewarm of `composite` into DRAM, from its HBM replica when
  // it has one, else from SSD (`*source` gets which). OK when the object has
  // a DRAM replica afterwards (or changed meanwhile: the caller looks again).
  Status Rewarm(Shard& shard, const std::string& composite, Medium* source = nullptr);
  Status RunRewarm(Shard& shard, const std::string& composite,
                   const std::shared_ptr<SsdReplica>& replica,
                   const std::shared_ptr<FlightTicket<Status>>& ticket);
  bool EvictSsdVictim(const Victim& victim);
  std::vector<Victim> GatherSsdVictims();
  void DrainSsdTrash();
  bool SsdWritable() const { return ssd_ && ssd_->Writable(); }
  // HBM tier (store_hbm.cc). None of these hold a shard lock on entry.
  void InstallHbmLocked(Shard& shard, Map::value_type& kv, std::shared_ptr<HbmReplica> replica)
      TIERKV_REQUIRES(shard.mu);
  // Takes kv's HBM replica out of the index (announced as `cause` when no
  // DRAM replica keeps memory held); its range is freed with the last
  // reference.
  std::shared_ptr<HbmReplica> DropHbmLocked(Shard& shard, Map::value_type& kv, RemoveCause cause)
      TIERKV_REQUIRES(shard.mu);
  // Copies the DRAM value of `composite` into the HBM pool with the most room
  // (evicting HBM victims of that pool when full). Returns whether it did.
  bool Promote(Shard& shard, const std::string& composite);
  // `size` bytes in pool `pool`, evicting its oldest replicas when full.
  Result<Extent> AllocateHbm(uint32_t pool, uint64_t size);
  // Moves one HBM victim down: copied into DRAM unless DRAM holds the value
  // already, then dropped from HBM. Returns whether it left HBM.
  bool EvictHbmVictim(const Victim& victim);
  std::vector<Victim> GatherHbmVictims(uint32_t pool);
  size_t EvictHbmDownTo(uint32_t pool, uint64_t target_used);
  // Maintenance: each pool above the high watermark down to the low one.
  void EvictHbmToWatermarks();
  // The HBM half of Rewarm: copies `replica` into a fresh DRAM replica.
  Status RunWarmDown(Shard& shard, const std::string& composite,
                     const std::shared_ptr<HbmReplica>& replica,
                     const std::shared_ptr<FlightTicket<Status>>& ticket);
  // Copies an HBM replica's bytes into a fresh DRAM range (evicting DRAM when
  // full). The caller owns the range.
  Result<Extent> CopyHbmToDram(const HbmReplica& replica);
  static std::unique_ptr<Blob> DramReplicaOf(const HbmReplica& replica, const Extent& extent);
  // A read lease on kv's HBM replica (ReadHold::kLeaseDevice).
  Result<LeaseGrant> LeaseHbmLocked(Shard& shard, Map::value_type& kv, const Caller& caller,
                                    int64_t now) TIERKV_REQUIRES(shard.mu);
  // The pool with the most room.
  uint32_t RoomiestHbmPool() const;
  // Reserves `size` bytes for a put: in HBM when `options` asks for it and
  // there is room, else in DRAM (evicting as needed), and installs the
  // pending put (unless a racing put of the key won meanwhile).
  Result<AllocGrant> ReservePut(Shard& shard, const std::string& composite, const Caller& caller,
                                uint64_t size, const PutOptions& options);
  // A commit of a put into HBM: the reserved range becomes kv's HBM replica.
  void CommitHbmLocked(Shard& shard, Map::value_type& kv, std::unique_ptr<Blob> blob)
      TIERKV_REQUIRES(shard.mu);

  // Write-through copies and prefetches, on the tier's work queue (dropped
  // before StartTierWorker and after StopTierWorker).
  void EnqueueTierJob(std::function<void()> job, bool droppable);
  void StartTierWorker();
  void StopTierWorker();

  const StoreOptions options_;
  const KeyRules rules_{options_};
  Clock* const clock_;
  std::unique_ptr<DramPool> dram_;
  std::vector<std::unique_ptr<Shard>> shards_;
  std::vector<ReplicaObserver*> observers_;
  OpStats op_stats_;
  ChangeFeed feed_;
  std::atomic<uint64_t> next_generation_{1};

  std::mutex evict_mu_;  // one evictor at a time

  PinBudgets pin_budgets_;  // pins by owner (store_pin.cc)
  Quarantine quarantine_;   // ranges of expired grants, until their session ends

  std::atomic<uint64_t> evicted_objects_{0};
  std::atomic<uint64_t> evicted_bytes_{0};
  std::atomic<uint64_t> eviction_rounds_{0};
  std::atomic<uint64_t> revoked_allocs_{0};
  std::atomic<uint64_t> expired_leases_{0};
  std::atomic<uint64_t> get_hits_dram_{0};
  std::atomic<int> evicting_{0};

  // SSD tier (AttachSsd): the device, its I/O, trash, counters and queue.
  std::unique_ptr<SsdStage> ssd_;
  std::mutex ssd_evict_mu_;  // one SSD evictor at a time

  // HBM tier (AttachHbm): its pools and the counters of its moves.
  HbmTier* hbm_ = nullptr;
  std::mutex hbm_evict_mu_;  // one HBM evictor at a time (before evict_mu_)
  struct HbmCounters {
    std::atomic<uint64_t> promoted{0}, promoted_bytes{0}, demoted{0}, demoted_bytes{0}, dropped{0},
        evicted{0}, warmed{0}, warmed_bytes{0}, get_hits{0}, copy_failures{0}, device_reads{0},
        device_puts{0};
  };
  HbmCounters hbm_counters_;

  std::mutex maint_mu_;
  std::unique_ptr<PeriodicTask> maint_task_;  // maint_mu_; RunMaintenance every interval
};

}  // namespace tierkv

#endif  // TIERKV_STORE_STORE_H_
