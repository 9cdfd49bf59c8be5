// How large a peer message may grow. gRPC refuses a message over 4 MiB by
// default, and the data channel an AUTHORIZE over 4 MiB; keys may be up to
// 1 MiB (--max-key-bytes). So every peer message that carries a list of
// records or keys (inventory pages and deltas, drain listings and batches,
// authorizations) ends at about kPeerMessageBytes of them, whatever their
// count: one more record still fits.
#ifndef TIERKV_CLUSTER_PEER_LIMITS_H_
#define TIERKV_CLUSTER_PEER_LIMITS_H_

#include <cstddef>

namespace tierkv {

inline constexpr size_t kPeerMessageBytes = size_t{1} << 20;

// About what a record (anything with tenant, key and name_space strings, and
// a few numbers) adds to a peer message.
template <typename R>
size_t PeerRecordBytes(const R& r) {
  return r.tenant.size() + r.key.size() + r.name_space.size() + 40;
}

}  // namespace tierkv

#endif  // TIERKV_CLUSTER_PEER_LIMITS_H_
