// The definitions RemoteFetcher's source files share (fetcher.cc: routing,
// authorization, releases; fetcher_read.cc: the READ stage; fetcher_pull.cc:
// a drain's Pull). Private
// to src/cluster.
#ifndef TIERKV_CLUSTER_FETCHER_INTERNAL_H_
#define TIERKV_CLUSTER_FETCHER_INTERNAL_H_

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "cluster/fetcher.h"
#include "common/tracer.h"
#include "peer.grpc.pb.h"

namespace tierkv {

struct RemoteFetcher::Item {
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
  // Whether the owner granted the value the index named (same size), or any
  // value when any_generation.
  bool GrantedAsIndexed(const GrantAnswer& ans) const {
    return ans.status.ok() && (any_generation || ans.size == loc.size);
  }
};

struct RemoteFetcher::Segment {
  std::vector<Item*> items;
};

struct RemoteFetcher::Authorized {
  Status call;          // the authorization as a whole
  uint64_t ticket = 0;  // to release (also when the answer was lost)
  bool slot = false;    // holds a grant slot
  std::vector<GrantAnswer> answers;
  bool first_done = false;  // the first item came with the answer and is stored
};

namespace fetcher_internal {

// A value is read in ranges of at least this many bytes.
inline constexpr uint64_t kMinRange = 4ull << 20;

// How many ranges a value of `size` bytes is read in, `most` at most.
inline size_t RangesFor(uint64_t size, size_t most) {
  return static_cast<size_t>(std::clamp<uint64_t>(size / kMinRange, 1, std::max<size_t>(most, 1)));
}

// Requester-side stages of a remote read, on /metrics/ptracer (listed from
// the first remote read on).
struct Traces {
  Tracepoint* const fetch = Tracer::Global().Get("TP_REMOTE_FETCH");
  Tracepoint* const authorize = Tracer::Global().Get("TP_REMOTE_AUTHORIZE");
  Tracepoint* const read = Tracer::Global().Get("TP_REMOTE_READ");
  Tracepoint* const store = Tracer::Global().Get("TP_REMOTE_STORE");
};
inline const Traces& Trace() {
  static const Traces traces;
  return traces;
}

}  // namespace fetcher_internal

}  // namespace tierkv

#endif  // TIERKV_CLUSTER_FETCHER_INTERNAL_H_
