// DeltaEncoder: the owner's changes in their stream form, encoded once for all
// the inventory streams it serves.
//
// Every stream sends the same changes (those of the store's change feed), each
// filtered by its requester's scope. Built per stream, each change cost every
// stream a copy out of the journal, a protobuf record of its own (several heap
// allocations) and its serialisation. The encoder reads each change from the
// feed once, serialises it once into a shared byte buffer, and a stream's
// batch is then a copy of the admitted changes' bytes behind its own header.
//
// The bytes of a batch are those protobuf gives a peer::DeltaBatch: the
// header's serialisation followed by each change's, which parses as one
// message (concatenated serialisations merge, and `changes` is repeated).
//
// What is kept: the changes from the oldest registered reader's position to
// the newest one read, never older than the feed's journal. With no reader
// registered it keeps nothing.
//
// Thread-safety: every method is thread-safe; one mutex, taken for the
// encoding of new changes and the copy of a batch. It takes the feed's lock
// inside its own (never the reverse).
#ifndef TIERKV_CLUSTER_DELTA_ENCODER_H_
#define TIERKV_CLUSTER_DELTA_ENCODER_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "peer.pb.h"
#include "store/change_feed.h"

namespace tierkv {

// A requester's scope, as the owner filters by it.
class InventoryScope {
 public:
  explicit InventoryScope(const peer::Scope& s);
  bool Admits(std::string_view name_space) const;

 private:
  peer::Scope::Kind kind_;
  std::set<std::string, std::less<>> names_;
};

struct SnapshotRecord;

// A snapshot record as a stream record.
void ToInventoryRecord(const SnapshotRecord& r, peer::InventoryRecord* out);

// A journal change as a stream change.
void ToInventoryChange(const Change& c, peer::InventoryChange* out);

// The bytes `frame` carries as its `delta` field, unparsed: a frame with no
// field set but these bytes, held as an unknown field of the delta's number,
// serializes exactly as one whose `delta` holds the batch they encode. The
// reference stays valid as long as `frame`; call once per frame.
std::string& UnparsedDelta(peer::InventoryFrame& frame);

class DeltaEncoder {
 public:
  // `feed` must outlive the encoder.
  explicit DeltaEncoder(const ChangeFeed& feed) : feed_(feed) {}

  // A stream's registration: while it exists, the encoder keeps the changes
  // after its position. Create and use from one thread (its stream's).
  class Reader {
   public:
    Reader(DeltaEncoder& encoder, uint64_t after);
    ~Reader();
    Reader(const Reader&) = delete;
    Reader& operator=(const Reader&) = delete;
    // The last sequence this reader has been given (or started after).
    uint64_t after() const { return after_; }

   private:
    friend class DeltaEncoder;
    DeltaEncoder& encoder_;
    uint64_t after_;
    std::multiset<uint64_t>::iterator position_;  // in encoder_.positions_
  };

  struct Batch {
    bool behind = false;       // the journal no longer has the reader's next change
    uint64_t from = 0;         // first sequence covered (the reader's position + 1)
    uint64_t to = 0;           // last sequence covered; to < from: nothing new
    size_t changes = 0;        // changes admitted to the batch
    uint64_t oldest_kept = 0;  // behind: the journal's oldest change
  };

  // The next batch of `reader`: the changes after its position up to
  // `until` (at most), of which those `scope` admits (and every cleared
  // tenant) go into `out`, replaced, as a serialized peer::DeltaBatch. The
  // batch ends early, after the change whose bytes take its changes to
  // `max_bytes` or more. Moves the reader to the batch's end. With
  // Batch::behind set, `out` is untouched and the reader must start over
  // from a snapshot.
  Batch Next(Reader& reader, uint64_t until, const InventoryScope& scope, size_t max_bytes,
             std::string& out);

  // Changes and bytes held now (for diagnostics and tests).
  size_t held_changes() const;
  size_t held_bytes() const;

 private:
  struct Entry {
    uint64_t at = 0;        // offset of the change's bytes in the buffer (since it began)
    uint32_t length = 0;    // its DeltaBatch bytes (tag, length, InventoryChange)
    uint32_t ns_bytes = 0;  // its namespace, stored right after them
    bool cleared = false;   // a cleared tenant: every scope admits it
  };

  // Appends the encoding of the feed's changes up to `until`; false when the
  // journal no longer has the next one (mu_ held).
  bool Extend(uint64_t until);
  // Starts the buffer over at sequence `first`, if the journal still has it;
  // false (the buffer untouched) if not (mu_ held).
  bool StartAt(uint64_t first);
  // Encodes the changes in read_ at the buffer's end (mu_ held).
  void Append();
  // Drops the changes no registered reader needs, and those the journal no
  // longer has (mu_ held).
  void Trim();
  uint64_t next() const { return first_ + entries_.size(); }

  const ChangeFeed& feed_;
  mutable std::mutex mu_;
  std::multiset<uint64_t> positions_;  // every registered reader's after() (mu_)
  uint64_t journal_first_ = 0;         // the journal's oldest change at the last read
  // Changes first_ .. first_ + entries_.size() - 1, contiguous; their bytes
  // start at buffer_[entries_.front().at - base_].
  uint64_t first_ = 0;  // 0: nothing held
  std::deque<Entry> entries_;
  std::string buffer_;
  uint64_t base_ = 0;                   // how many bytes were dropped from buffer_'s front
  FeedRead read_;                       // reused for every feed read
  peer::DeltaBatch one_;                // reused to encode each change (holds one)
  peer::DeltaBatch head_;               // reused to encode each batch's range
  std::vector<const Entry*> admitted_;  // a batch's changes in its reader's scope, reused
};

}  // namespace tierkv

#endif  // TIERKV_CLUSTER_DELTA_ENCODER_H_
