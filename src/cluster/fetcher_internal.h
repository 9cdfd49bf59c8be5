// What the remote read path's source files share besides fetch_types.h
// (fetcher.cc: routing, authorization, releases; segment_reader.cc: the READ
// stage; fetcher_pull.cc: a drain's Pull): range sizing and the tracepoints.
// Private to src/cluster.
#ifndef TIERKV_CLUSTER_FETCHER_INTERNAL_H_
#define TIERKV_CLUSTER_FETCHER_INTERNAL_H_

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/tracer.h"
#include "peer.grpc.pb.h"

namespace tierkv {

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
