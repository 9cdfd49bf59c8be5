// Internal layout of the store's shards. Only store*.cc include this.
#ifndef TIERKV_STORE_STORE_INTERNAL_H_
#define TIERKV_STORE_STORE_INTERNAL_H_

#include <atomic>
#include <condition_variable>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "common/composite_key.h"
#include "media/checksum.h"
#include "media/offset_allocator.h"
#include "store/eviction_queue.h"
#include "store/lru_queue.h"
#include "store/store.h"

namespace tierkv {

// One replica's bytes in the DRAM pool.
struct Store::Blob {
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
  uint64_t alloc_id = 0;
  uint64_t owner = 0;      // session that holds the write grant
  std::string name_space;  // of that session: the object's once committed
  int64_t alloc_deadline = 0;
};

// One replica on SSD. Shared by the index and by readers doing I/O on it; when
// the last reference goes, the blob is queued for freeing (Store::DrainSsdTrash).
struct Store::SsdReplica {
  SsdBlob blob;
};

struct Store::Entry {
  std::unique_ptr<Blob> current;    // READABLE on DRAM
  std::unique_ptr<Blob> pending;    // ALLOCATED, awaiting commit
  std::shared_ptr<SsdReplica> ssd;  // READABLE on SSD
  int64_t last_access = 0;
  uint64_t generation = 0;  // of the value held (current and ssd hold the same one)
  std::string name_space;   // of the put that created the value ("" = none)
  uint64_t dram_seq = 0;    // change sequence at which `current` was announced stored
  uint64_t ssd_seq = 0;     // ... and `ssd`
  QueueHook dram_hook;      // in shard.dram_queue while `current` is
  QueueHook ssd_hook;       // in shard.ssd_queue while `ssd` is
  bool readable() const { return current != nullptr || ssd != nullptr; }  // on some medium
};

// A shard's lock. A plain mutex, except that a long reader (the snapshot) that
// takes it again and again can give way: while a reader has announced itself
// (BeginYielding), lock() counts its waiters, and LockAfterWaiters() lets them
// in first. Without it an unfair mutex hands the lock straight back to the
// reader, and a writer on that shard waits for the whole scan.
class ShardMutex {
 public:
  void lock() {
    if (!yielding_.load(std::memory_order_relaxed)) {
      mu_.lock();
      return;
    }
    waiting_.fetch_add(1, std::memory_order_relaxed);
    mu_.lock();
    waiting_.fetch_sub(1, std::memory_order_relaxed);
  }
  bool try_lock() { return mu_.try_lock(); }
  void unlock() { mu_.unlock(); }

  void BeginYielding() { yielding_.fetch_add(1, std::memory_order_relaxed); }
  void EndYielding() { yielding_.fetch_sub(1, std::memory_order_relaxed); }
  // Waits (a bounded number of scheduler yields) for counted waiters to get the
  // lock, then locks.
  void LockAfterWaiters() {
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

struct LeaseRecord {
  void* blob = nullptr;  // Store::Blob*; null once expired (a tombstone)
  int64_t deadline = 0;
  uint64_t owner = 0;
};

struct Store::Shard {
  Shard(uint32_t i, uint64_t seed, EvictPolicy policy)
      : index(i), id_state(seed), dram_queue(MakeEvictionQueue(policy)) {}
  const uint32_t index;  // position in shards_, carried in alloc and lease ids
  ShardMutex mu;
  uint64_t id_state;  // generator of this shard's alloc and lease ids (mu held)
  Map map;            // composite key -> entry
  // The order of victims: entries with a DRAM replica (--evict-policy), and
  // entries with an SSD replica (always LRU).
  std::unique_ptr<EvictionQueue> dram_queue;
  LruQueue ssd_queue;
  // SSD -> DRAM copies in flight, by composite key: gets of a key being
  // rewarmed wait for that copy instead of reading again.
  SingleFlight<std::string, Status> rewarms;
  std::unordered_map<uint64_t, Map::value_type*> pending;  // alloc id -> entry
  std::unordered_map<uint64_t, LeaseRecord> leases;        // lease id -> record
  // Nodes of ended leases kept for the next ones (at most kSpareLeaseNodes),
  // so a get's lease and release allocate nothing in the steady state.
  static constexpr size_t kSpareLeaseNodes = 64;
  std::vector<decltype(leases)::node_type> spare_leases;
  void AddLease(uint64_t id, const LeaseRecord& rec) {
    if (spare_leases.empty()) {
      leases.emplace(id, rec);
      return;
    }
    decltype(leases)::node_type node = std::move(spare_leases.back());
    spare_leases.pop_back();
    node.key() = id;
    node.mapped() = rec;
    leases.insert(std::move(node));
  }
  void DropLease(decltype(leases)::iterator it) {
    decltype(leases)::node_type node = leases.extract(it);
    if (spare_leases.size() < kSpareLeaseNodes) spare_leases.push_back(std::move(node));
  }
  std::unordered_map<uint64_t, std::pair<Blob*, uint64_t>> pins;  // pin id -> (replica, owner)
  std::unordered_map<Blob*, std::unique_ptr<Blob>> zombies;
  uint64_t zombie_bytes = 0;
  uint64_t readable = 0;     // entries readable on some medium
  uint64_t ssd_objects = 0;  // entries with an SSD replica
};

struct Store::Victim {
  int64_t last_access;
  uint32_t shard;
  std::string composite;
  uint64_t dram_bytes = 0;  // its DRAM extent when chosen (what evicting it frees)
};

// How often a read of an SSD-only object rewarms it before giving up with RETRY
// (each time the fresh DRAM copy was evicted again before it could be held).
inline constexpr int kColdAttempts = 4;

}  // namespace tierkv

#endif  // TIERKV_STORE_STORE_INTERNAL_H_
