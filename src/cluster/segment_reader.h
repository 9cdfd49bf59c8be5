// SegmentReader: the READ stage of a remote read (docs/cluster.md, "Remote
// reads"). For a segment an owner granted, each item is read over the data
// channel straight into a local allocation (a large value as several ranges
// at once, one per data connection the segment's other READs leave free),
// verified against the owner's checksums as it arrives, and committed: from
// then on an ordinary local value, tracked as a copy when it is a get's. A
// drain's Pull of a key already held here reads the source's value into
// memory of its own and compares the two instead.
//
// Thread-safety: thread-safe; every call blocks only its caller.
#ifndef TIERKV_CLUSTER_SEGMENT_READER_H_
#define TIERKV_CLUSTER_SEGMENT_READER_H_

#include <cstdint>
#include <span>
#include <vector>

#include "cluster/copy_tracker.h"
#include "cluster/fetch_types.h"
#include "cluster/grant_releaser.h"
#include "media/checksum.h"
#include "store/store.h"
#include "transfer/transport.h"

namespace tierkv {

class SegmentReader {
 public:
  // None owned; all must outlive the reader. `copies` may be null (fetched
  // values are not tracked). `parallel_reads`: data connections per owner.
  SegmentReader(Store* store, transfer::DataTransport* transport, CopyTracker* copies,
                size_t parallel_reads, FetchCounters* counters)
      : store_(store),
        transport_(transport),
        copies_(copies),
        parallel_reads_(parallel_reads),
        counters_(counters) {}

  // READs the granted items of `seg` (the first one skipped when it came with
  // the authorization) and sets every item's status; false when the owner is
  // unreachable (the items not attempted then miss, naming it).
  bool ReadSegment(FetchPeer& peer, FetchSegment& seg, const FetchGrant& grant);
  // READs [0, size) of granted item `index` into `dest` (pieces of `size`
  // bytes in all) as `ranges` ranges at once; *verified gets each range and
  // the checksum it was verified against. An unreachable owner's UNAVAILABLE
  // first, else the first error (IO_ERROR: a checksum mismatch, counted).
  Status ReadRanges(FetchPeer& peer, uint64_t ticket, uint32_t index, const GrantAnswer& answer,
                    std::span<const MemoryPiece> dest, size_t ranges,
                    std::vector<KnownChecksum>* verified);
  // A FetchInto item whose `size` bytes are in its memory, verified: sets its
  // status and size and the counters.
  void FinishInto(FetchItem& item, uint64_t size);
  // Commits a fetched value's allocation with the checksums its READs were
  // verified against, and sets the item's status and the counters.
  void CommitFetched(FetchItem& item, const Caller& caller, uint64_t alloc_id,
                     std::span<const KnownChecksum> verified);
  // How an item's local allocation is made: a get's copy is DRAM-only.
  static PutOptions AllocOptions(const FetchItem& item);

 private:
  // Allocates, READs, verifies and commits one granted item; the READ's
  // error (UNAVAILABLE: the owner is unreachable), else OK.
  Status ReadOne(FetchPeer& peer, FetchItem& item, uint64_t ticket, uint32_t index,
                 const GrantAnswer& answer, size_t ranges);
  // ReadOne for a FetchInto item: READs and verifies straight into its memory.
  Status ReadInto(FetchPeer& peer, FetchItem& item, uint64_t ticket, uint32_t index,
                  const GrantAnswer& answer, size_t ranges);
  // Counts a READ that failed, and sets the item's miss.
  void ReadFailed(FetchPeer& peer, FetchItem& item, const Status& st);
  // A Pull of a key held here: READs the granted item into memory of its own
  // and sets the item's status by comparing it with the value held here (OK
  // when the bytes are the same); the READ's error, else OK. When the key is
  // no longer held here, sets *not_held, reads nothing and leaves the status.
  Status CompareHeld(FetchPeer& peer, FetchItem& item, uint64_t ticket, uint32_t index,
                     const GrantAnswer& answer, size_t ranges, bool* not_held);

  Store* const store_;
  transfer::DataTransport* const transport_;
  CopyTracker* const copies_;
  const size_t parallel_reads_;
  FetchCounters* const counters_;
};

}  // namespace tierkv

#endif  // TIERKV_CLUSTER_SEGMENT_READER_H_
