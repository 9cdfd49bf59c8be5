// The store's two side doors, apart from its data path (store.h):
//
// - StoreAdmin: what operators and the manager itself do to the store as a
//   whole (REST /memory/*, DELETE /all_keys, watermark maintenance, snapshots
//   and figures, dropping a stale copy). None of it is counted as a client
//   operation except RemoveAllTenants.
// - StorePins: DRAM replicas held for readers that are not a local session's
//   lease (remote grants, transfers), charged to their owner's byte budget.
//
// Both are handles: cheap to copy, holding a reference to the store, which must
// outlive them. Every method is thread-safe, as the store's are.
#ifndef TIERKV_STORE_STORE_ADMIN_H_
#define TIERKV_STORE_STORE_ADMIN_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>

#include "store/observer.h"
#include "store/op_stats.h"
#include "store/store_types.h"
#include "tierkv/status.h"
#include "tierkv/types.h"

namespace tierkv {

class Store;

class StoreAdmin {
 public:
  explicit StoreAdmin(Store& store) : store_(&store) {}

  // How many of `keys` are readable now.
  size_t CountReadable(std::string_view tenant, std::span<const std::string> keys) const;
  // Moves the given keys one tier down from the highest medium holding them:
  // an HBM replica is moved into DRAM (dropped when DRAM holds the value
  // already); an unleased DRAM replica is demoted (to SSD when there is one,
  // else dropped); an object held only on SSD is dropped. Counted as
  // evictions. Returns how many objects moved.
  size_t EvictKeys(std::string_view tenant, std::span<const std::string> keys);
  // Moves the given keys one tier up: schedules a background rewarm of each
  // key held only on SSD (into DRAM), and with an HBM tier copies each key
  // held in DRAM but not in HBM up into HBM (at once: no disk involved; a
  // copy of another manager's value stays in DRAM). Returns how many keys
  // were scheduled or copied.
  size_t Prefetch(std::string_view tenant, std::span<const std::string> keys);
  // Waits until every scheduled rewarm and write-through copy has finished.
  void WaitTierIdle();

  // Removes `ref` only while its readable value is at `generation`: NOT_FOUND
  // (nothing changes) when the key is gone or holds another value. A manager
  // action (a stale copy dropped), not counted as a client remove.
  Status RemoveIfAt(const ObjectRef& ref, uint64_t generation);
  // Store::RemoveAll for every tenant (the REST contract's DELETE /all_keys),
  // counted as one remove_all call. Announces OnTenantCleared per tenant emptied.
  Result<RemoveAllResult> RemoveAllTenants(const Caller& caller, bool force);

  // Expires leases and revokes allocs past their deadlines, then evicts down to
  // the low watermark if usage is above the high one (per tier). Returns DRAM
  // objects evicted. The store's maintenance task runs it every interval.
  size_t RunMaintenance();
  // Evicts unleased readable replicas, oldest first, until at most `target_used`
  // bytes are allocated. Returns objects evicted.
  size_t EvictDownTo(uint64_t target_used);
  // Drops SSD replicas, oldest first, until at most `target_used` SSD bytes are
  // allocated. Returns replicas dropped.
  size_t EvictSsdDownTo(uint64_t target_used);

  // A consistent view of everything readable, delivered in pages of at most
  // `page_size` records (`page` runs without any store lock held; it may take
  // its time, puts and removes go on meanwhile). Returns the watermark S: the
  // pages plus every change with sequence > S (feed().ReadAfter(S, ...)) give
  // exactly the store's state; no replica is in both, none is in neither. A
  // removal after S may name a replica the pages never had.
  uint64_t Snapshot(size_t page_size,
                    const std::function<void(std::span<const SnapshotRecord>)>& page) const;
  // Calls `fn` for every readable replica (one call per medium), as OnStored
  // announced it, from a Snapshot: `fn` may take its time.
  void ForEachReadable(const std::function<void(const ReplicaEvent&)>& fn) const;

  // The figures behind /metrics.
  StoreStats Stats() const;
  const OpStats& op_stats() const;

 private:
  Store* store_;
};

class StorePins {
 public:
  explicit StorePins(Store& store) : store_(&store) {}

  // Pins the DRAM replica of `ref` (an object held only on SSD or in HBM is
  // copied into DRAM first) if its value is at `generation` (0: whatever value is there). Until
  // Unpin, or ReleaseAll(owner), the bytes are neither evicted, demoted nor
  // reused; a remove or upsert hides the old value at once and frees its range
  // after the last pin. Each pin charges its replica's allocated bytes to
  // `owner`'s budget of `budget_bytes` (0: unlimited); a replica pinned more
  // than once by one owner is charged once. Errors: NOT_FOUND (no such key, or
  // not at `generation`), NO_SPACE (the owner's budget is spent, or no DRAM
  // for the rewarm), RETRY, IO_ERROR, INVALID_ARGUMENT, TOO_LARGE as for
  // Store::Lease. Not counted as a client get. With `may_rewarm` false a value
  // held only on SSD is not rewarmed: RETRY ("held only on SSD") at once,
  // nothing pinned, so the call never waits for the disk (a value held in
  // HBM is still copied down: no disk in that).
  Result<PinGrant> Pin(uint64_t owner, const ObjectRef& ref, uint64_t generation,
                       uint64_t budget_bytes, bool may_rewarm = true);
  // Releases one pin of `owner`. NOT_FOUND for an unknown id or another owner's.
  Status Unpin(uint64_t owner, uint64_t pin_id);
  // Releases every pin of `owner` (it went away); returns how many.
  size_t ReleaseAll(uint64_t owner);
  // Bytes charged to `owner` now.
  uint64_t Bytes(uint64_t owner) const;

 private:
  Store* store_;
};

}  // namespace tierkv

#endif  // TIERKV_STORE_STORE_ADMIN_H_
