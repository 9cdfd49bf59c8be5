// ChangeFeed: the store's sequenced change log.
//
// Every announcement of the store (a replica stored on a medium, a replica
// removed from a medium, a tenant cleared) gets a store-wide sequence number,
// strictly increasing, assigned while the store holds the lock that makes the
// transition visible (the object's shard lock; all of them for a clear). With a
// journal (journal_bytes > 0) the most recent changes are kept in order, up to
// that many bytes; a reader that asks for changes the journal no longer holds is
// told so (FeedRead::behind) and must take a new snapshot (StoreAdmin::Snapshot).
//
// An upsert announces the old value's removal (cause kReplaced) and then the
// new value's store, under one shard lock. stable_sequence() is the newest
// sequence at which no such pair is half announced: a reader that stops there
// never sees a replaced value gone without its replacement (a peer's view
// would otherwise hold the key as absent until its next batch).
//
// Cost: without a journal, one atomic increment per announcement; with one, a
// short critical section and a copy of the names into a ring of recycled
// entries (no allocation once the ring has grown to its steady size, unless a
// name outgrows the entry's string capacity).
//
// Thread-safety: every method is thread-safe.
#ifndef TIERKV_STORE_CHANGE_FEED_H_
#define TIERKV_STORE_CHANGE_FEED_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "store/observer.h"

namespace tierkv {

enum class ChangeKind : uint8_t { kStored, kRemoved, kCleared };

struct Change {
  uint64_t sequence = 0;
  ChangeKind kind = ChangeKind::kStored;
  std::string tenant;
  std::string key;  // empty for kCleared
  std::string group_id;
  std::string name_space;  // of the value ("" = none; empty for kCleared)
  Medium medium = Medium::kDram;
  uint64_t size = 0;
  uint64_t generation = 0;
  RemoveCause cause = RemoveCause::kRemoved;
};

struct FeedRead {
  bool behind = false;          // changes after `after` were dropped: re-snapshot
  uint64_t first_kept = 0;      // oldest sequence still in the journal
  uint64_t last = 0;            // newest sequence assigned
  std::vector<Change> changes;  // contiguous, in order, sequence > after
};

class ChangeFeed {
 public:
  explicit ChangeFeed(size_t journal_bytes) : budget_(journal_bytes) {}

  // Assigns the next sequence to the change described by `event` (kStored or
  // kRemoved) and journals it. Returns the sequence.
  uint64_t Append(ChangeKind kind, const ReplicaEvent& event);
  uint64_t AppendCleared(std::string_view tenant);

  uint64_t last_sequence() const { return last_.load(std::memory_order_acquire); }
  // The newest sequence that ends no upsert half way (see above); equal to
  // last_sequence() without a journal.
  uint64_t stable_sequence() const;
  bool journaled() const { return budget_ > 0; }

  // Up to `max` changes with sequence > `after`, in order. behind is set when
  // some of them are gone (or there is no journal and any exist).
  FeedRead ReadAfter(uint64_t after, size_t max) const;
  // The same, into `out` (every field set): the changes are assigned over the
  // ones `out` already holds, so a follower that reuses one FeedRead costs no
  // allocation in its steady state and holds the feed's lock (which every
  // announcement takes) only for the copy.
  void ReadAfter(uint64_t after, size_t max, FeedRead& out) const;

  size_t journal_bytes() const;

  // Blocks until stable_sequence() > `after` or `timeout_ms` pass; true when
  // it is. For stream owners that follow the feed.
  bool WaitAfter(uint64_t after, int64_t timeout_ms) const;

 private:
  static size_t Cost(const Change& c) {
    return sizeof(Change) + c.tenant.size() + c.key.size() + c.group_id.size() +
           c.name_space.size();
  }
  // The slot for the next change, the ring grown if full (mu_ held).
  Change& NextSlot();
  // Sequence, account, trim (`lock` holds mu_), then lets go of `lock` and
  // wakes the waiters.
  uint64_t Commit(Change& slot, std::unique_lock<std::mutex>& lock);
  // Opens or closes an upsert's pair for `c`, about to be committed (mu_ held).
  void TrackUpsert(const Change& c);
  const Change& At(size_t i) const { return ring_[(head_ + i) & (ring_.size() - 1)]; }

  const size_t budget_;
  std::atomic<uint64_t> last_{0};
  mutable std::mutex mu_;
  mutable std::condition_variable grew_;  // notified by every journaled change
  // The journal: count_ changes, sequences first_kept_ .. last_, contiguous,
  // starting at ring_[head_]; ring_.size() is a power of two.
  std::vector<Change> ring_;
  size_t head_ = 0;
  size_t count_ = 0;
  uint64_t first_kept_ = 1;
  size_t bytes_ = 0;
  // Upserts half announced: "tenant\0key" -> the sequence of the first
  // removal of the replaced value (mu_).
  std::vector<std::pair<std::string, uint64_t>> open_;
  std::atomic<uint64_t> stable_{0};
};

}  // namespace tierkv

#endif  // TIERKV_STORE_CHANGE_FEED_H_
