// GlobalIndex: the installed views of every other owner (what each peer
// stores, in this manager's scope), kept apart from the local store.
//
// A view is built hidden (staging) by an InventoryFollower and installed whole
// when its snapshot validated; deltas then update it in place. A view whose
// stream broke stays as partial hints: its entries are still returned, marked
// not complete. A member that leaves is forgotten at once. Lookups say where a
// key is (owner, medium, generation) and whether absence is proved: only when
// every expected owner has a complete view.
//
// Thread-safety: thread-safe (a reader-writer lock; lookups share it).
#ifndef TIERKV_CLUSTER_GLOBAL_INDEX_H_
#define TIERKV_CLUSTER_GLOBAL_INDEX_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <shared_mutex>
#include <span>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "common/metric_sink.h"
#include "http/ports/cluster.h"
#include "tierkv/types.h"

namespace tierkv {

// One owner's replicas of one key, as kept in its view.
struct RemoteEntry {
  uint64_t generation = 0;
  uint64_t size = 0;
  uint32_t tenant = 0;      // index into the view's name table
  uint32_t name_space = 0;  // index into the view's name table ("" = none)
  bool dram = false;
  bool ssd = false;
};

// A change as an owner streams it (plain form of peer.InventoryChange).
struct InventoryDelta {
  enum Kind : uint8_t { kStored, kRemoved, kCleared };
  Kind kind = kStored;
  std::string tenant;
  std::string key;
  std::string name_space;
  Medium medium = Medium::kDram;
  uint64_t size = 0;
  uint64_t generation = 0;
};

// One owner's view. Keys are held as 128-bit hashes of "tenant\0key"
// (xxh3-128), not as strings: about 72 bytes an object instead of 180. Two
// keys of one view would have to collide in 128 bits to be confused; an entry
// is a location hint in any case, which the owner validates (generation and
// key) before it lends any bytes. Tenants and namespaces are interned.
class OwnerView {
 public:
  struct KeyHash {
    uint64_t lo = 0, hi = 0;
    bool operator==(const KeyHash&) const = default;
  };
  // The 128-bit hash a view keys "tenant\0key" by (the same in every view).
  static KeyHash HashOf(std::string_view tenant, std::string_view key);

  void Apply(const InventoryDelta& d);
  // Applies `changes` in order, as Apply one by one; the index loads of a
  // window of changes are started together, so their cache misses overlap.
  void ApplyAll(std::span<const InventoryDelta> changes);
  size_t size() const { return entries_.size(); }
  // Approximate heap bytes (table nodes and buckets, names), charged to
  // --index-budget.
  size_t bytes() const { return entries_.size() * kEntryCost + names_bytes_; }
  const RemoteEntry* Find(std::string_view tenant, std::string_view key) const;
  const RemoteEntry* Find(const KeyHash& h) const;
  const std::string& Name(uint32_t id) const { return names_[id]; }

 private:
  struct HashOfHash {
    size_t operator()(const KeyHash& k) const { return static_cast<size_t>(k.lo); }
  };
  // Node (next pointer, key, entry, allocator header) and its bucket.
  static constexpr size_t kEntryCost = 8 + sizeof(KeyHash) + sizeof(RemoteEntry) + 8 + 8;
  void Apply(const InventoryDelta& d, const KeyHash& h);
  uint32_t Intern(const std::string& name);

  std::unordered_map<KeyHash, RemoteEntry, HashOfHash> entries_;
  std::vector<std::string> names_{std::string()};  // id 0 = ""
  std::unordered_map<std::string, uint32_t> name_ids_{{"", 0}};
  size_t names_bytes_ = 0;
  uint32_t last_name_ = 0;  // the name interned last (changes in a row share names)
};

struct RemoteLocation {
  std::string owner;
  std::string owner_uuid;
  uint32_t rank = 0;
  Medium medium = Medium::kDram;
  uint64_t size = 0;
  uint64_t generation = 0;
  bool complete = false;  // from a complete view (false: a partial hint)
  std::string name_space;
};

struct IndexLookup {
  std::vector<RemoteLocation> locations;
  // No location and every expected owner's view is complete: the key is
  // proved absent from the cluster (in scope). Otherwise absence is unknown.
  bool absence_proved = false;
  std::string incomplete_owner;  // one expected owner without a complete view ("" if none)
};

// One owner's view of one key, as CopyTracker judges a copy by it.
struct OwnerEntry {
  enum State : uint8_t {
    kGone,      // the owner is not expected, or is another incarnation now
    kPartial,   // no complete view of it (its stream broke, or none yet)
    kComplete,  // a complete view, at `watermark`
  };
  State state = kGone;
  uint64_t watermark = 0;  // the owner's change sequence the view reflects
  bool found = false;
  uint64_t generation = 0;  // when found
};

struct IndexStats {
  uint64_t expected = 0;  // live members other than this manager
  uint64_t complete = 0;
  uint64_t partial = 0;
  uint64_t missing = 0;  // expected owners without any view yet
  uint64_t staging = 0;
  uint64_t entries = 0;
  uint64_t bytes = 0;  // active views + staging
  uint64_t budget = 0;
  uint64_t installs = 0;
  uint64_t resets = 0;          // views dropped for a journal overflow or a bad stream
  uint64_t refused_budget = 0;  // views refused because they would not fit
  uint64_t rejected_views = 0;  // snapshots that failed the inventory's validation
};

class GlobalIndex {
 public:
  explicit GlobalIndex(uint64_t budget_bytes) : budget_(budget_bytes) {}

  // A live member whose view a lookup expects: its incarnation (runtime UUID
  // and epoch) and rank.
  struct Expected {
    std::string uuid;
    uint32_t rank = 0;
    uint64_t epoch = 0;
  };
  // The owners a lookup expects a view from (live members but this one), by
  // node id. Views of owners not listed, or listed with another incarnation,
  // are forgotten at once.
  void SetExpected(const std::map<std::string, Expected>& owners);

  // Staging bytes: a follower reserves what its hidden view grows by; false
  // when active + staging would pass the budget (the view is then refused).
  void BeginStaging();
  bool ReserveStaging(uint64_t bytes);
  // The hidden view was refused or abandoned: give back what it reserved.
  void AbandonStaging(uint64_t bytes, bool over_budget);

  // Replaces `owner`'s view (its staging reservation, `staged` bytes, moves to
  // the active view).
  // Ignored when the owner is no longer expected or `uuid` is not its runtime.
  void Install(const std::string& owner, const std::string& uuid, std::unique_ptr<OwnerView> view,
               uint64_t watermark, uint64_t staged);
  // Applies contiguous changes up to `to_sequence`; false when the owner has no
  // complete view at `from_sequence - 1` (the caller resets its stream).
  bool ApplyDeltas(const std::string& owner, uint64_t from_sequence, uint64_t to_sequence,
                   const std::vector<InventoryDelta>& changes);
  // The stream broke: keep the entries as partial hints.
  void MarkPartial(const std::string& owner, bool reset);

  IndexLookup Lookup(std::string_view tenant, std::string_view key) const;
  // What the view of `owner`, of incarnation `uuid`, says of the key hashed `h`.
  OwnerEntry EntryOf(const std::string& owner, std::string_view uuid,
                     const OwnerView::KeyHash& h) const;
  IndexStats Stats() const;
  // A snapshot of an owner failed the inventory's validation (counted as
  // a refused view).
  void CountRejectedView() { rejected_views_.fetch_add(1, std::memory_order_relaxed); }
  // Reports the tierkv_index_* families (cluster_metrics.cc).
  void ReportMetrics(MetricSink& sink) const;
  // What a wait for a fence taken by `owner` sees now; FenceSeen says what
  // each field means.
  FenceSeen Seen(const FenceOwner& owner) const;
  // Waits until the complete view of `owner.node` reaches `sequence` (an
  // inventory fence) or `deadline` passes, without polling: installs, deltas
  // and membership changes wake the waiters. With `owner.uuid` named only a
  // view of that incarnation counts: a restarted owner numbers its changes
  // anew, so another incarnation's watermark says nothing about the fence.
  // Returns what it saw last; at once when the node is not (or no longer) an
  // expected owner, or the fence's incarnation has left the membership: its
  // UUID was seen to leave, or its epoch is below the newest seen of the node.
  FenceSeen AwaitFence(const FenceOwner& owner, uint64_t sequence,
                       std::chrono::steady_clock::time_point deadline) const;

 private:
  struct Owner {
    std::string uuid;
    uint32_t rank = 0;
    bool complete = false;
    uint64_t watermark = 0;
    std::unique_ptr<OwnerView> view;
  };
  uint64_t ActiveBytesLocked() const;
  // What a fence wait sees now (mu_ held).
  FenceSeen SeenLocked(const FenceOwner& owner) const;
  // Remembers that incarnation `uuid` left (mu_ held exclusively).
  void RetireLocked(const std::string& uuid);
  // Remembers `epoch` as the newest of `node` seen, if it is (mu_ held
  // exclusively).
  void NoteEpochLocked(const std::string& node, uint64_t epoch);
  // Wakes AwaitFence callers (after mu_ is released).
  void NotifyAdvanced() const;

  const uint64_t budget_;
  mutable std::shared_mutex mu_;
  std::map<std::string, Owner> owners_;  // expected owners, with or without a view
  // Incarnations that left the membership (the newest 4096), so that a fence
  // of one is answered at once.
  std::unordered_set<std::string> retired_;
  std::deque<std::string> retired_order_;
  // The newest epoch seen of each node (the newest 4096 nodes), kept after it
  // leaves: a fence of a lower epoch is of an incarnation that has left.
  std::unordered_map<std::string, uint64_t> newest_epoch_;
  std::deque<std::string> epoch_order_;
  uint64_t staging_bytes_ = 0;
  uint64_t staging_views_ = 0;
  uint64_t installs_ = 0, resets_ = 0, refused_budget_ = 0;
  std::atomic<uint64_t> rejected_views_{0};
  // Fence waiters: lock order wait_mu_ then mu_.
  mutable std::mutex wait_mu_;
  mutable std::condition_variable advanced_;
  mutable int waiters_ = 0;  // guarded by wait_mu_
};

}  // namespace tierkv

#endif  // TIERKV_CLUSTER_GLOBAL_INDEX_H_
