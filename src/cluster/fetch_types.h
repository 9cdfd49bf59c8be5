// The remote read path's working types (RemoteFetcher, SegmentReader): one
// key being fetched, a segment of one owner's plan, an authorization's
// outcome, and the fetcher's counters. Private to src/cluster.
#ifndef TIERKV_CLUSTER_FETCH_TYPES_H_
#define TIERKV_CLUSTER_FETCH_TYPES_H_

#include <atomic>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "cluster/global_index.h"
#include "cluster/grants.h"
#include "common/memory_piece.h"
#include "tierkv/status.h"

namespace tierkv {

// Session id the fetcher's local allocations are made under (never a client's).
inline constexpr uint64_t kFetchSession = ~uint64_t{0} - 1;
// Pin owner of a Pull's comparison with a value held here.
inline constexpr uint64_t kCompareSession = ~uint64_t{0} - 2;

struct FetchItem {
  std::string_view tenant;
  std::string_view key;
  RemoteLocation loc;
  Status status = NotFound("not held by any other manager");
  bool attempted = false;    // its READ stage ran (ReadOne)
  bool stale = false;        // the owner refused it: gone, or another value now
  bool not_indexed = false;  // Pull: no index entry here of that owner's value
  // Pull: only this owner's value at this generation may be read.
  std::string_view only_owner;
  uint64_t only_generation = 0;
  // Asked of loc's owner at whatever generation it holds now (generation 0
  // in the authorization): after a stale refusal the index had not caught up
  // with. The grant's generation and size are taken as the item's.
  bool any_generation = false;
  bool same_owner = false;  // ... of loc's owner again, not routed by the index
  // The owner's change sequence its authorization answer carried.
  uint64_t owner_sequence = 0;
  // Fetch with `superseded`: a copy its owner replaced while it was read is
  // kept for the caller (its local generation here) instead of removed.
  bool keep_superseded = false;
  uint64_t superseded = 0;
  // FetchInto: the value is read straight into this memory (a client's
  // registered memory) and kept nowhere here; its size then goes in
  // `read_size`.
  const IntoDest* into = nullptr;
  uint64_t read_size = 0;
  // Whether the owner granted the value the index named (same size), or any
  // value when any_generation.
  bool GrantedAsIndexed(const GrantAnswer& ans) const {
    return ans.status.ok() && (any_generation || ans.size == loc.size);
  }
};

// One item per key of `tenant`, in order.
inline std::vector<FetchItem> ItemsFor(std::string_view tenant,
                                       std::span<const std::string_view> keys) {
  std::vector<FetchItem> items(keys.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    items[i].tenant = tenant;
    items[i].key = keys[i];
  }
  return items;
}

// A pointer to each of `items`, in order.
inline std::vector<FetchItem*> PointersTo(std::vector<FetchItem>& items) {
  std::vector<FetchItem*> out;
  out.reserve(items.size());
  for (FetchItem& it : items) out.push_back(&it);
  return out;
}

struct FetchSegment {
  std::vector<FetchItem*> items;
};

struct FetchGrant {
  Status call;          // the authorization as a whole
  uint64_t ticket = 0;  // to release (also when the answer was lost)
  bool slot = false;    // holds a grant slot
  std::vector<GrantAnswer> answers;
  bool first_done = false;  // the first item came with the answer and is stored
};

// What the fetcher counts, as a snapshot.
struct FetchStats {
  uint64_t fetches = 0;             // keys asked of the fetcher
  uint64_t objects = 0, bytes = 0;  // fetched and stored locally
  // Bounded misses, by reason.
  uint64_t miss_not_indexed = 0, miss_refused = 0, miss_budget = 0, miss_read = 0,
           miss_local_space = 0, miss_slots = 0;
  uint64_t authorizations = 0, authorize_failures = 0;  // calls; failures: no answer
  uint64_t releases = 0, release_failures = 0;
  uint64_t lookahead_discarded = 0, lookahead_retries = 0, shared_flights = 0;
  uint64_t stale_retries = 0;  // keys routed again after a stale refusal
  uint64_t early_reads = 0;    // first items read behind their authorization
  uint64_t grants_awaiting_release = 0;
  uint64_t checksum_failures = 0;             // READs whose bytes failed their checksum
  uint64_t into_objects = 0, into_bytes = 0;  // read straight into registered memory
};

// What the fetcher counts, as it counts it.
struct FetchCounters {
  std::atomic<uint64_t> fetches{0}, objects{0}, bytes{0}, miss_not_indexed{0}, miss_refused{0},
      miss_budget{0}, miss_read{0}, miss_local_space{0}, miss_slots{0}, authorizations{0},
      authorize_failures{0}, releases{0}, release_failures{0}, lookahead_discarded{0},
      lookahead_retries{0}, shared_flights{0}, stale_retries{0}, early_reads{0},
      checksum_failures{0}, into_objects{0}, into_bytes{0};
};

}  // namespace tierkv

#endif  // TIERKV_CLUSTER_FETCH_TYPES_H_
