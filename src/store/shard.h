// One shard of the store's index: its map of entries, the tables of pending
// allocs, leases, pins and zombies, its two eviction queues and its lock.
// Only the store's own files include this (through store.h's private part).
//
// A shard's fields are guarded by its lock (`mu`), and Clang checks it: the
// fields carry TIERKV_GUARDED_BY, the functions that need the lock carry
// TIERKV_REQUIRES (the ctest `thread_safety_analysis` fails on any finding).
// What a shard can do on its own (ids, the lease table, the queues, zombie
// bookkeeping) are its methods; what also touches the pool, the observers or
// the store's counters are the store's `*Locked` functions, which require the
// shard's lock the same way.
#ifndef TIERKV_STORE_SHARD_H_
#define TIERKV_STORE_SHARD_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/single_flight.h"
#include "common/thread_annotations.h"
#include "media/checksum.h"
#include "media/hbm_pool.h"
#include "media/offset_allocator.h"
#include "media/ssd_blob.h"
#include "store/eviction_queue.h"
#include "store/lru_queue.h"
#include "tierkv/status.h"

namespace tierkv::storage {

struct HbmReplica;

// One replica's bytes in the DRAM pool.
struct Blob {
  Extent extent;
  uint64_t size = 0;  // value length
  std::string group_id;
  uint32_t leases = 0;         // lease records pointing here
  int64_t lease_deadline = 0;  // latest deadline among them
  uint32_t pins = 0;           // being copied to SSD: not evicted, not freed
  bool zombie = false;         // removed from the index, kept alive by leases or pins
  bool dram_only = false;      // PutOptions::dram_only: dropped, never demoted
  // Checksums (ValueChecksum) of the value and of ranges of it, once something
  // computed them: the SSD tier when it wrote or read the value, READs on the
  // data channel. The bytes of a committed blob never change, so they stay true.
  ValueDigests digests;
  // Pending (ALLOCATED) blobs only:
  // A put into HBM (PutOptions::medium): its range, becoming the HBM replica
  // at commit; `extent` is then unused.
  std::shared_ptr<HbmReplica> hbm_space;
  uint64_t alloc_id = 0;
  uint64_t owner = 0;      // session that holds the write grant
  std::string name_space;  // of that session: the object's once committed
  int64_t alloc_deadline = 0;

  // A lease is held on it at `now`.
  bool Leased(int64_t now) const { return leases > 0 && now <= lease_deadline; }
};

// One replica on SSD. Shared by the index and by readers doing I/O on it; when
// the last reference goes, the blob is queued for freeing (the store's trash).
struct SsdReplica {
  SsdBlob blob;
};

// One replica in an HBM pool. Shared by the index and by copies out of it
// running without the shard lock; the range goes back to its pool when the
// last reference goes.
struct HbmReplica {
  HbmReplica(HbmPool* pool, uint32_t pool_index, Extent extent, uint64_t size)
      : pool(pool), pool_index(pool_index), extent(extent), size(size) {}
  ~HbmReplica() { pool->Free(extent, size); }
  HbmReplica(const HbmReplica&) = delete;
  HbmReplica& operator=(const HbmReplica&) = delete;

  HbmPool* const pool;
  const uint32_t pool_index;  // in HbmTier::pools()
  const Extent extent;
  const uint64_t size;  // value length
  std::string group_id;
  uint64_t value_checksum = 0;  // of the whole value (ValueChecksum); 0: not known
};

struct Entry {
  std::unique_ptr<Blob> current;    // READABLE on DRAM
  std::unique_ptr<Blob> pending;    // ALLOCATED, awaiting commit
  std::shared_ptr<HbmReplica> hbm;  // READABLE on HBM
  std::shared_ptr<SsdReplica> ssd;  // READABLE on SSD
  int64_t last_access = 0;
  uint64_t generation = 0;  // of the value held (every replica holds the same one)
  std::string name_space;   // of the put that created the value ("" = none)
  // Change sequence at which memory (`current` or `hbm`: one medium to
  // observers) was announced stored, and `ssd`.
  uint64_t memory_seq = 0;
  uint64_t ssd_seq = 0;
  QueueHook dram_hook;  // in the shard's dram_queue while `current` is
  QueueHook hbm_hook;   // in the shard's hbm_queue while `hbm` is
  QueueHook ssd_hook;   // in the shard's ssd_queue while `ssd` is
  bool in_memory() const { return current != nullptr || hbm != nullptr; }
  bool readable() const { return in_memory() || ssd != nullptr; }  // on some medium
};

using Map = std::unordered_map<std::string, Entry>;

// A shard's lock. A plain mutex, except that a long reader (the snapshot) that
// takes it again and again can give way: while a reader has announced itself
// (BeginYielding), lock() counts its waiters, and LockAfterWaiters() lets them
// in first. Without it an unfair mutex hands the lock straight back to the
// reader, and a writer on that shard waits for the whole scan.
class TIERKV_CAPABILITY("mutex") ShardMutex {
 public:
  void lock() TIERKV_ACQUIRE() {
    if (!yielding_.load(std::memory_order_relaxed)) {
      mu_.lock();
      return;
    }
    waiting_.fetch_add(1, std::memory_order_relaxed);
    mu_.lock();
    waiting_.fetch_sub(1, std::memory_order_relaxed);
  }
  bool try_lock() TIERKV_TRY_ACQUIRE(true) { return mu_.try_lock(); }
  void unlock() TIERKV_RELEASE() { mu_.unlock(); }
  // For code the analysis cannot follow (a callback run under the lock its
  // caller took): states that the lock is held. Checks nothing at run time.
  void AssertHeld() const TIERKV_ASSERT_CAPABILITY(this) {}

  void BeginYielding() { yielding_.fetch_add(1, std::memory_order_relaxed); }
  void EndYielding() { yielding_.fetch_sub(1, std::memory_order_relaxed); }
  // Waits (a bounded number of scheduler yields) for counted waiters to get the
  // lock, then locks.
  void LockAfterWaiters() TIERKV_ACQUIRE() {
    for (int i = 0; i < 64 && waiting_.load(std::memory_order_relaxed) > 0; ++i) {
      std::this_thread::yield();
    }
    mu_.lock();
  }

 private:
  std::mutex mu_;
  std::atomic<uint32_t> yielding_{0};
  std::atomic<uint32_t> waiting_{0};
};

// Holds a shard's lock for its scope (std::lock_guard, visible to the analysis).
class TIERKV_SCOPED_CAPABILITY ShardLock {
 public:
  explicit ShardLock(ShardMutex& mu) TIERKV_ACQUIRE(mu) : mu_(mu) { mu_.lock(); }
  // Takes over a lock the caller already holds.
  ShardLock(ShardMutex& mu, std::adopt_lock_t) TIERKV_REQUIRES(mu) : mu_(mu) {}
  ~ShardLock() TIERKV_RELEASE() { mu_.unlock(); }
  ShardLock(const ShardLock&) = delete;
  ShardLock& operator=(const ShardLock&) = delete;

 private:
  ShardMutex& mu_;
};

struct LeaseRecord {
  Blob* blob = nullptr;  // a DRAM lease; null once expired (a tombstone)
  int64_t deadline = 0;
  uint64_t owner = 0;
  std::shared_ptr<HbmReplica> hbm;  // an HBM lease (ReadHold::kLeaseDevice): keeps its range
  bool live() const { return blob != nullptr || hbm != nullptr; }
};

class Shard {
 public:
  Shard(uint32_t index, uint64_t seed, EvictPolicy policy)
      : index(index), dram_queue(MakeEvictionQueue(policy)), id_state_(seed) {}
  Shard(const Shard&) = delete;
  Shard& operator=(const Shard&) = delete;

  const uint32_t index;  // position in the store's shards, carried in alloc and lease ids
  mutable ShardMutex mu;

  Map map TIERKV_GUARDED_BY(mu);  // composite key -> entry
  // The order of victims: entries with a DRAM replica (--evict-policy), and
  // entries with an HBM or an SSD replica (always LRU).
  std::unique_ptr<EvictionQueue> dram_queue TIERKV_GUARDED_BY(mu);
  LruQueue hbm_queue TIERKV_GUARDED_BY(mu);
  LruQueue ssd_queue TIERKV_GUARDED_BY(mu);
  // SSD or HBM -> DRAM copies in flight, by composite key: gets of a key being
  // rewarmed wait for that copy instead of reading again. Thread-safe itself.
  SingleFlight<std::string, Status> rewarms;
  std::unordered_map<uint64_t, Map::value_type*> pending TIERKV_GUARDED_BY(mu);  // alloc id
  std::unordered_map<uint64_t, LeaseRecord> leases TIERKV_GUARDED_BY(mu);        // lease id
  std::unordered_map<uint64_t, std::pair<Blob*, uint64_t>> pins
      TIERKV_GUARDED_BY(mu);  // pin id -> (replica, owner)
  std::unordered_map<Blob*, std::unique_ptr<Blob>> zombies TIERKV_GUARDED_BY(mu);
  uint64_t zombie_bytes TIERKV_GUARDED_BY(mu) = 0;
  uint64_t readable TIERKV_GUARDED_BY(mu) = 0;     // entries readable on some medium
  uint64_t ssd_objects TIERKV_GUARDED_BY(mu) = 0;  // entries with an SSD replica

  // A fresh alloc, lease or pin id of this shard: 56 unpredictable bits above
  // the shard's index, unused by any live id here.
  uint64_t NextId() TIERKV_REQUIRES(mu);

  // Lease records, reusing the nodes of ended leases (at most kSpareLeaseNodes),
  // so a get's lease and release allocate nothing in the steady state.
  void AddLease(uint64_t id, const LeaseRecord& rec) TIERKV_REQUIRES(mu);
  void DropLease(std::unordered_map<uint64_t, LeaseRecord>::iterator it) TIERKV_REQUIRES(mu);

  // A read of `kv` at `now` (or its new value): its last access, and its place
  // in the queues of the media it is on.
  void Touch(Map::value_type& kv, int64_t now) TIERKV_REQUIRES(mu);
  // Takes e's DRAM replica off the DRAM queue.
  void EraseFromDramQueue(Entry& e) TIERKV_REQUIRES(mu) { dram_queue->Erase(e.dram_hook); }

  // A replica left the index while leases or pins still hold it: kept here.
  void KeepZombie(std::unique_ptr<Blob> blob) TIERKV_REQUIRES(mu);
  // `blob`, if it is a zombie nothing holds any more: out of the zombies, for
  // the caller to free its range. Null otherwise.
  std::unique_ptr<Blob> TakeFreedZombie(Blob* blob) TIERKV_REQUIRES(mu);

 private:
  static constexpr size_t kSpareLeaseNodes = 64;
  uint64_t id_state_ TIERKV_GUARDED_BY(mu);  // generator of this shard's ids
  std::vector<std::unordered_map<uint64_t, LeaseRecord>::node_type> spare_leases_
      TIERKV_GUARDED_BY(mu);
};

}  // namespace tierkv::storage

#endif  // TIERKV_STORE_SHARD_H_
