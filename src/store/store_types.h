// The value types of the store's interface: options, callers, grants, leases,
// pins, snapshot records and statistics. Only store.h includes it.
#ifndef TIERKV_STORE_STORE_TYPES_H_
#define TIERKV_STORE_STORE_TYPES_H_

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "common/clock.h"
#include "common/scheduler.h"
#include "media/offset_allocator.h"
#include "media/ssd_tier.h"
#include "tierkv/types.h"

namespace tierkv {

class ValueDigests;  // media/checksum.h

// How DRAM victims are chosen (docs/store.md, "Eviction").
enum class EvictPolicy : uint8_t {
  kLru,     // least recently used: an access moves the object to the front
  kS3Fifo,  // S3-FIFO: a small probation FIFO, a main FIFO, a ghost of recent victims
};

inline constexpr int kMaxSsdQueueDepth = 64;

struct StoreOptions {
  uint32_t shards = 64;                // power of two, 1..256
  int64_t lease_ms = 2000;             // read lease length
  int64_t alloc_timeout_ms = 30000;    // an uncommitted alloc is revoked after this
  int64_t lease_tombstone_ms = 60000;  // how long an expired lease still answers LEASE_EXPIRED
  double high_watermark = 0.9;         // background eviction starts above this fill
  double low_watermark = 0.8;          // ... and stops at this one
  uint32_t max_key_bytes = 1024;
  uint64_t max_object_bytes = 256ull << 20;
  uint32_t max_group_bytes = 256;        // longest group_id accepted
  int64_t maintenance_interval_ms = 20;  // reaper / evictor period
  // SSD tier (only with AttachSsd).
  double ssd_high_watermark = 0.9;
  double ssd_low_watermark = 0.8;
  bool ssd_write_through = false;       // copy every committed object to SSD at once
  int64_t ssd_error_backoff_ms = 1000;  // no new SSD writes this long after an I/O error
  // Most SSD transfers the store keeps in flight for one eviction pass, batch
  // get or the prefetch queue (1: one at a time on the calling thread).
  int ssd_queue_depth = 8;  // 1 .. kMaxSsdQueueDepth
  Clock* clock = nullptr;   // null: the real clock
  // Runs the maintenance pass every maintenance_interval_ms after Start
  // (null: a thread of the store's own; tests pass a ManualScheduler).
  Scheduler* scheduler = nullptr;
  // Bytes of recent changes the change feed keeps for readers (0: none; the
  // sequence numbers are assigned all the same).
  size_t journal_bytes = 0;
  EvictPolicy evict_policy = EvictPolicy::kS3Fifo;  // DRAM victims (SSD victims are LRU)
  // Fault injection (--inject-commit-failures, tests): when set, a commit for
  // which the hook returns true is refused as if its write grant had expired
  // (the grant is revoked). The hook runs under a shard lock.
  std::function<bool()> commit_fault_hook = nullptr;
};

// One readable replica in a snapshot (StoreAdmin::Snapshot).
struct SnapshotRecord {
  std::string tenant;
  std::string key;
  std::string group_id;
  Medium medium = Medium::kDram;
  uint64_t size = 0;
  uint64_t generation = 0;
  uint64_t sequence = 0;   // the change at which this replica was announced stored
  std::string name_space;  // of the put that created the value ("" = none)
};

// Who makes a call: the session (for grant ownership and cleanup; 0 = the manager
// itself) and the client's declared rank (for per-rank counters).
struct Caller {
  Caller() = default;
  Caller(uint64_t s, uint32_t r, std::string_view ns = {}) : session(s), rank(r), name_space(ns) {}
  uint64_t session = 0;
  uint32_t rank = 0;
  std::string_view name_space;  // the session's declared namespace ("" = none); put records it
};

struct ObjectRef {
  std::string_view tenant;
  std::string_view key;
};

// A checksum (xxh3-64) the writer verified over bytes [offset, offset +
// length) of the value it wrote: kept with the value, so that a READ of
// those bytes sends it without hashing them again.
struct KnownChecksum {
  uint64_t offset = 0;
  uint64_t length = 0;
  uint64_t digest = 0;
};

struct PutOptions {
  std::string_view group_id;
  bool upsert = false;  // replace an existing readable value instead of DUPLICATED
  // A copy of another manager's value (the remote read path): it lives in
  // DRAM only. Evicted or demoted, it is dropped, never written to SSD, so no
  // copy outlives this process (its owner still holds the value).
  bool dram_only = false;
  // kHbm: reserve the value in an HBM pool (the one with most room, evicting
  // HBM victims when full), for a writer that copies into it from a GPU;
  // DRAM when there is no HBM tier or no room in it (AllocGrant::medium says
  // which). Values put into HBM live there until moved down.
  Medium medium = Medium::kDram;
};

struct AllocItem {
  std::string_view key;
  uint64_t size = 0;
  PutOptions options;
};

struct AllocGrant {
  uint64_t alloc_id = 0;
  uint64_t offset = 0;  // into the DRAM pool (what a shared-memory client is told)
  uint64_t size = 0;
  // The same bytes in this process: write them, then Commit. Null for HBM.
  uint8_t* data = nullptr;
  // kHbm: `offset` is into HBM pool `pool` (HbmTier::pools()), written by
  // the client through its import of that pool.
  Medium medium = Medium::kDram;
  uint32_t pool = 0;
};

// How a read holds the value it is given (Store::Lease, Store::BatchLease).
enum class ReadHold : uint8_t {
  kLease,   // a read lease: the range stays until released or the deadline
  kLocate,  // no hold: the reader checks the range's generation after its copy
  // A read lease on the HBM replica when the value has one (a reader that
  // copies GPU to GPU), else as kLease. A value held only in HBM is then not
  // copied down.
  kLeaseDevice,
};

// A readable value's place. With ReadHold::kLocate a DRAM hit has lease_id 0
// and deadline 0, and `generation` is its range's generation
// (DramPool::Generation) read while the value was live; the range may be freed
// at any time after the call. A leased grant has generation 0 (not needed).
struct LeaseGrant {
  uint64_t lease_id = 0;
  uint64_t offset = 0;
  uint64_t size = 0;
  int64_t deadline_nanos = 0;     // on the store clock (CLOCK_MONOTONIC for the real one)
  const uint8_t* data = nullptr;  // the bytes in this process (DRAM only), until Release
  uint32_t generation = 0;
  // kHbm (ReadHold::kLeaseDevice): `offset` is into HBM pool `pool`.
  Medium medium = Medium::kDram;
  uint32_t pool = 0;
};

// A pinned DRAM replica (StorePins::Pin): `size` bytes at `data` stay valid and
// unchanged until the pin is released.
struct PinGrant {
  uint64_t pin_id = 0;
  const uint8_t* data = nullptr;
  uint64_t size = 0;
  uint64_t generation = 0;
  // The checksums known of the value; whoever hashes the value or a range of
  // it may record them here. Valid while the pin is held.
  ValueDigests* digests = nullptr;
};

struct RemoveAllResult {
  uint64_t removed = 0;
  uint64_t skipped = 0;  // leased or in-flight objects left in place (force=false)
  bool cleared = false;  // the tenant was emptied and OnTenantCleared announced
};

// The SSD tier and movement between tiers. Zero without an SSD tier.
struct TierStats {
  bool enabled = false;
  std::string engine;   // "io_uring" / "pread"
  bool direct = false;  // O_DIRECT
  AllocatorStats ssd;
  uint64_t ssd_objects = 0;  // objects with an SSD replica
  uint64_t flush_blobs = 0;  // writes to SSD (demotion and write-through)
  uint64_t flush_bytes = 0;
  uint64_t flush_failed = 0;  // SSD writes that failed (no room, I/O error)
  uint64_t demoted = 0;       // DRAM replicas dropped with an SSD replica kept
  uint64_t rewarm = 0;        // SSD -> DRAM copies made
  uint64_t rewarm_failed = 0;
  uint64_t rewarm_bytes = 0;
  uint64_t rewarm_bytes_current = 0;  // in flight now
  uint64_t rewarm_waiting = 0;        // gets waiting for another get's rewarm now
  uint64_t get_hits_ssd = 0;          // gets served after a rewarm
  uint64_t ssd_evicted_objects = 0;
  uint64_t ssd_evicted_bytes = 0;
  uint64_t io_errors = 0;      // failed SSD reads and writes
  uint64_t corrupt_blobs = 0;  // replicas dropped for a bad checksum (reads)
  bool writes_paused = false;  // no SSD writes now: an I/O error's backoff is running
  uint64_t write_pauses = 0;   // backoffs started by I/O errors
  uint64_t prefetch_scheduled = 0;
  uint64_t write_through_dropped = 0;  // write-through jobs dropped (queue full)
  SsdRecoveryStats recovered;          // what the start-up scan found
};

// The HBM tier's moves. Zero without an HBM tier. The pools' own figures are
// HbmTier's (tierkv_hbm_capacity_bytes, tierkv_hbm_allocated_bytes).
struct HbmStats {
  bool enabled = false;
  uint64_t objects = 0;   // objects with an HBM replica
  uint64_t promoted = 0;  // DRAM -> HBM copies made (/memory/prefetch)
  uint64_t promoted_bytes = 0;
  uint64_t demoted = 0;  // HBM replicas moved down to DRAM to make room
  uint64_t demoted_bytes = 0;
  uint64_t dropped = 0;  // HBM replicas dropped, the value kept below (DRAM or SSD)
  uint64_t evicted = 0;  // HBM replicas dropped with no copy below: the value is gone
  uint64_t warmed = 0;   // HBM -> DRAM copies made for a read (the HBM replica stays)
  uint64_t warmed_bytes = 0;
  uint64_t get_hits = 0;       // gets served after such a copy
  uint64_t device_reads = 0;   // leases on HBM replicas (GPU-to-GPU reads)
  uint64_t device_puts = 0;    // values put straight into HBM
  uint64_t copy_failures = 0;  // copies to or from a GPU that failed (its error logged)
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
  TierStats tier;
  HbmStats hbm;
};

}  // namespace tierkv

#endif  // TIERKV_STORE_STORE_TYPES_H_
