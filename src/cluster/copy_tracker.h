// CopyTracker: keeps the copies this manager fetched from other managers no
// staler than its views of their owners (docs/cluster.md, "Copies follow
// their owner").
//
// A copy is a value the remote read path committed here (a DRAM-only local
// object). The tracker remembers where it came from: the owner (node id and
// runtime UUID), the owner's generation of the value, and the owner's change
// sequence read after the value was pinned for the READ. Whenever the view of
// that owner changes, the copy is judged against it and dropped here
// (StoreAdmin::RemoveIfAt, only while it is still the value fetched) once the view
// shows the owner's value replaced or removed:
// - a complete view that holds a newer generation of the key, or, when it
//   has reached the copy's sequence, no longer the same one (another value,
//   or none): dropped;
// - a complete view that has not reached the copy's sequence yet and does
//   not show a newer value: kept (the changes still to come are judged);
// - no complete view (its stream broke and is being re-established): kept,
//   and judged when the new snapshot is installed;
// - nothing came from the owner for the stall bound after its stream failed
//   (the inventory calls DropOwner), or the owner left or is another
//   incarnation now: every copy from it is dropped.
// A copy that ends here (evicted, removed, replaced by a local put) ends its
// tracking through the store's observer calls.
//
// Thread-safety: thread-safe. Lock order: a store shard lock (observer calls)
// before the tracker's, the tracker's before the index's; the store is never
// called with the tracker's lock held.
#ifndef TIERKV_CLUSTER_COPY_TRACKER_H_
#define TIERKV_CLUSTER_COPY_TRACKER_H_

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "cluster/global_index.h"
#include "store/observer.h"
#include "store/store.h"

namespace tierkv {

struct CopyStats {
  uint64_t tracked = 0;        // copies held here now
  uint64_t dropped_stale = 0;  // dropped: their owner's view shows them replaced or removed
  uint64_t dropped_lost = 0;   // dropped: their owner's stream failed, or the owner left
};

class CopyTracker final : public ReplicaObserver {
 public:
  // Where a copy came from.
  struct Source {
    std::string owner;        // node id
    std::string owner_uuid;   // its runtime UUID
    uint64_t generation = 0;  // the owner's generation of the value
    uint64_t sequence = 0;    // the owner's change sequence read after the pin (0: unknown)
  };

  // Neither owned; both must outlive the tracker. Register the tracker with
  // the store (Store::AddObserver) before the store is used.
  CopyTracker(Store* store, const GlobalIndex* index) : store_(store), index_(index) {}

  // A copy of `source`'s value of (tenant, key) was committed here at
  // `local_generation`. Returns false when the view already shows that value
  // replaced or removed: the copy is then not tracked, and removed unless
  // `keep_stale` (the caller removes it once it has read it).
  bool Track(std::string_view tenant, std::string_view key, uint64_t local_generation,
             Source source, bool keep_stale = false);

  // The view of `owner` changed; call after the index applied it.
  void OnChanges(const std::string& owner, std::span<const InventoryDelta> changes);
  void OnInstalled(const std::string& owner);
  // Nothing came from `owner` for the stall bound since its stream failed:
  // its copies are dropped.
  void DropOwner(const std::string& owner);
  // The live members other than this one (node id -> runtime UUID): copies
  // from any other owner or incarnation are dropped.
  void Retain(const std::map<std::string, std::string>& live);

  CopyStats Stats() const;
  // Reports the tierkv_remote_copies* families of `stats` (a tracker's, or
  // zeros where none tracks copies; cluster_metrics.cc).
  static void ReportMetrics(const CopyStats& stats, MetricSink& sink);

  // ReplicaObserver: a copy whose DRAM replica ends here is no longer tracked.
  void OnStored(const ReplicaEvent&) override {}
  void OnRemoved(const ReplicaEvent& event) override;
  void OnTenantCleared(std::string_view tenant) override;

 private:
  struct Copy {
    std::string tenant, key;
    uint64_t local_generation = 0;
    Source source;
  };
  using Hash = OwnerView::KeyHash;
  struct HashOfHash {
    size_t operator()(const Hash& h) const { return static_cast<size_t>(h.lo); }
  };
  struct Victim {
    std::string tenant, key;
    uint64_t local_generation = 0;
  };

  // Whether `c` must go now (mu_ held; reads the index).
  bool StaleLocked(const Hash& h, const Copy& c) const;
  // Stops tracking `h` and queues its copy for removal (mu_ held).
  void EvictLocked(const Hash& h, std::vector<Victim>& out);
  // EvictLocked for every copy of `owner` (the stale ones only, if asked).
  std::vector<Victim> EvictOwnerLocked(const std::string& owner, bool only_stale);
  // Removes the victims' copies (mu_ not held).
  void Remove(const std::vector<Victim>& victims, std::atomic<uint64_t>& counter);

  Store* const store_;
  const GlobalIndex* const index_;
  mutable std::mutex mu_;
  std::unordered_map<Hash, Copy, HashOfHash> copies_;
  std::unordered_map<std::string, std::unordered_set<Hash, HashOfHash>> by_owner_;
  std::atomic<uint64_t> dropped_stale_{0}, dropped_lost_{0};
  std::atomic<size_t> size_{0};  // copies_.size(): observer calls skip an empty tracker
};

}  // namespace tierkv

#endif  // TIERKV_CLUSTER_COPY_TRACKER_H_
