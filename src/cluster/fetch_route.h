// The remote fetcher's pure decisions, apart from its I/O (cluster/fetcher.h):
// which owner a key is fetched from, why a key has no owner to fetch from,
// and how one owner's keys are cut into authorization segments.
//
// Thread-safety: pure functions of their arguments.
#ifndef TIERKV_CLUSTER_FETCH_ROUTE_H_
#define TIERKV_CLUSTER_FETCH_ROUTE_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "cluster/global_index.h"
#include "tierkv/status.h"

namespace tierkv {

// One location of a key whose owner is a reachable member now (a peer of
// that runtime UUID with a data endpoint), and the bytes this manager has in
// flight from that owner.
struct RouteCandidate {
  const RemoteLocation* location = nullptr;
  uint64_t inflight_bytes = 0;
};

// The candidate to fetch from: a DRAM replica before an SSD one, then the
// owner with fewer bytes in flight, then a complete view before a partial
// hint; the first of equals. nullopt when there is none.
std::optional<size_t> PickRoute(std::span<const RouteCandidate> candidates);

// NOT_FOUND naming why a key with no candidate cannot be fetched: owners
// named but none reachable, a view incomplete, or absent everywhere.
Status NoRoute(const IndexLookup& found);

// How much one segment (one authorization and its READs) may hold.
struct SegmentLimits {
  size_t items = 64;
  uint64_t bytes = 16ull << 20;   // of values
  uint64_t key_bytes = 1u << 20;  // of keys and tenants
};

// One item of a plan, as the cut sees it.
struct SegmentItem {
  uint64_t value_bytes = 0;
  uint64_t key_bytes = 0;  // its key and tenant
};

// Where each segment starts: a new one begins where the next item would pass
// a limit of the current one. An item over a limit by itself is a segment of
// its own. Empty for no items.
std::vector<size_t> CutSegments(std::span<const SegmentItem> items, const SegmentLimits& limits);

}  // namespace tierkv

#endif  // TIERKV_CLUSTER_FETCH_ROUTE_H_
