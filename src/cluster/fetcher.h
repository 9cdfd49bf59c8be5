// RemoteFetcher: the requester's read path (docs/cluster.md, "Remote reads").
//
// A get that misses locally asks the fetcher for the keys. For each key the
// global index names the owners; the route prefers an owner holding the value
// in DRAM over one with it on SSD, then the owner with the fewest bytes in
// flight from this manager. Keys are grouped by owner into a fetch plan cut in
// segments (segment_items values, segment_bytes bytes and segment_key_bytes
// of keys at most); for each
// segment the owner is asked to authorize the exact values (key and
// generation) under a fresh ticket; its grant's items are then READ over the
// data channel straight into local allocations (made one item at a time, as
// they are consumed), their checksums verified, and committed: the value is
// an ordinary local object from then on, announced and advertised. Then the
// grant is released off the caller's path: the next authorization to the same
// owner carries the release, or the GrantReleaser's thread sends it alone after
// 2 ms (its grant slot stays taken until the owner answered). Over the data
// channel, the first item of a plan rides behind the authorization: its READ
// goes out on the same connection before the answer, so a single-key fetch
// costs one round trip to the owner.
//
// A large value is read as several ranges at once (one per data connection
// not taken by the segment's other READs, each of 4 MiB at least), so its
// bytes move over several connections and the owner's and this manager's
// cores share the copying and the checksums.
//
// Lookahead: while a segment's READs run, the next segment of the plan is
// authorized (one READ stage and one authorization per plan at most). A failed
// READ stage discards the grant already obtained for the next one; an
// authorization that failed while speculative is retried once when its turn
// comes. A key refused by the owner (gone, another generation, the owner's
// budget spent) or lost with its owner is a bounded miss: NOT_FOUND naming the
// reason, and a counter; a key refused as gone or replaced is asked again (up
// to three rounds): of the same owner for whatever value it holds now, or,
// when the index names the key on other managers only by then, of them.
// Every call is bounded by the authorization and data-channel deadlines;
// nothing waits without one.
//
// Grants awaiting release are bounded: per owner per_source_grants and in all
// global_grants; a fetch that cannot get a slot in time misses. A release that
// fails is counted and left to the owner's deadline. Two fetches of one key
// at once share one transfer (the second waits for the first).
//
// Parts: routing is pure (fetch_route.h); the Authorize and Release calls of
// peer gRPC go through a GrantClient (grant_client.h: tests stand the owner
// in, in the same process); releases wait in a GrantReleaser
// (grant_releaser.h); the READ stage is a SegmentReader (segment_reader.h);
// one fetch per key at a time is a SingleFlight.
//
// Thread-safety: thread-safe; every call blocks only its caller.
#ifndef TIERKV_CLUSTER_FETCHER_H_
#define TIERKV_CLUSTER_FETCHER_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include "cluster/copy_tracker.h"
#include "cluster/fetch_types.h"
#include "cluster/global_index.h"
#include "cluster/grant_client.h"
#include "cluster/grant_releaser.h"
#include "cluster/grants.h"
#include "cluster/peer_limits.h"
#include "cluster/runtime_id.h"
#include "cluster/segment_reader.h"
#include "common/single_flight.h"
#include "http/ports/cluster.h"
#include "store/store.h"
#include "transfer/transport.h"

namespace tierkv {

struct PeerCredentials;
namespace peer {
class AuthorizeRequest;
class AuthorizeResponse;
}  // namespace peer

struct FetcherOptions {
  std::string node_id;
  std::string runtime_uuid;
  int64_t authorize_timeout_ms = 5000;  // the owner's budget wait (3 s) fits inside
  int64_t release_timeout_ms = 2000;
  size_t segment_items = 64;
  uint64_t segment_bytes = 16ull << 20;
  // ... and about this many bytes of keys and tenants, so that a segment's
  // authorization fits an AUTHORIZE or a gRPC message (peer_limits.h).
  uint64_t segment_key_bytes = kPeerMessageBytes;
  size_t per_source_grants = 64;
  size_t global_grants = 1024;
  size_t parallel_reads = 4;  // READs of one segment at once (data connections per peer)
  bool lookahead = true;
  // Where authorizations go: the owner's data channel (AUTHORIZE, one round
  // trip on a kept connection) or peer gRPC (Peer/Authorize). Both carry the
  // same request and answer.
  bool authorize_over_data = true;
  std::shared_ptr<const PeerCredentials> credentials;  // null: plaintext
};

class RemoteFetcher {
 public:
  // None owned; all must outlive the fetcher. With `copies`, every value
  // fetched for a get is a DRAM-only copy tracked there (dropped once the
  // owner's view shows it replaced or removed); a drain's Pull is not.
  // `grant_client` makes the Authorize and Release calls of peer gRPC (null:
  // one of the fetcher's own, with options.credentials).
  RemoteFetcher(FetcherOptions options, Store* store, const GlobalIndex* index,
                transfer::DataTransport* transport, CopyTracker* copies = nullptr,
                GrantClient* grant_client = nullptr);
  ~RemoteFetcher();

  // The live members (their peer and data endpoints). Never blocks for long.
  void SetMembers(const std::vector<MemberView>& members);
  // This requester joined again as a new incarnation: its authorizations
  // name `uuid` from now on.
  void SetRuntimeUuid(const std::string& uuid) { runtime_id_.Set(uuid); }

  // Brings the keys of `tenant` held by other managers into the local store.
  // One status per key, in order: OK when the key is now local (fetched, or
  // stored locally meanwhile), NOT_FOUND with the reason otherwise (not in the
  // index, refused by its owner, the owner lost, no local space, ...).
  // With `superseded` (resized to one per key), a value its owner replaced
  // while it was read is still answered OK, kept here untracked, and its
  // local generation given there: the caller reads it once, then removes it
  // (Store::RemoveIfAt). Without, such a copy is removed at once and the key
  // asked again.
  std::vector<Status> Fetch(std::string_view tenant, std::span<const std::string_view> keys,
                            std::vector<uint64_t>* superseded = nullptr);

  // Reads the keys of `tenant` held by other managers straight into `dests`
  // (one per key: a client's registered memory), over the same grants and
  // READs as Fetch, keeping no copy here (nothing is allocated, stored or
  // announced). One result per key, in order: the value's size once all its
  // bytes are in place and verified; NOT_FOUND naming the reason as Fetch
  // (a READ that failed or did not match its checksum among them; the memory
  // may then hold part of the value); IntoDest::Fits's error when the value
  // the owner granted does not fit (nothing read). Never shares a concurrent
  // fetch of the same key.
  std::vector<Result<uint64_t>> FetchInto(std::string_view tenant,
                                          std::span<const std::string_view> keys,
                                          std::span<const IntoDest> dests);

  // A drain's copy (Peer/Pull): brings the values `source` holds at exactly
  // `generations` (one per key) into the local store, through the same grant
  // path. One status per key: OK once the source's value is local. A key
  // already held here is never replaced (either value may be the newer one):
  // the source's value is read into memory of its own and compared, OK when
  // the bytes are the same, NOT_FOUND ("holds another value") when not.
  // NOT_FOUND too when the index here does not show that value of the
  // source (`not_indexed`), when the source refused it as gone or of another
  // generation (`refused_by_source`), or when it could not be read or
  // stored. Never reads another owner's value, and never shares a concurrent
  // Fetch of the key.
  struct PullOutcome {
    Status status;
    bool not_indexed = false;
    bool refused_by_source = false;
  };
  std::vector<PullOutcome> Pull(std::string_view tenant, std::span<const std::string_view> keys,
                                std::string_view source, std::span<const uint64_t> generations);

  FetchStats Stats() const;
  // Reports the tierkv_remote_* families, the copies' among them
  // (cluster_metrics.cc).
  void ReportMetrics(MetricSink& sink) const;

 private:
  using Peer = FetchPeer;
  using Item = FetchItem;
  using Segment = FetchSegment;
  using Authorized = FetchGrant;

  std::shared_ptr<Peer> PeerOf(const std::string& node) const;
  // Runs `round`'s plans, then routes again the keys refused as stale
  // (kStaleRounds times at most).
  void RunRounds(std::string_view tenant, std::vector<Item*> round);
  // Routes `items` by the index and runs one plan per owner (in parallel).
  void RunPlans(const std::vector<Item*>& items);
  // Runs one owner's plan; fills the items' statuses.
  void RunPlan(const std::shared_ptr<Peer>& peer, std::vector<Item*>& items);
  // Authorizes `seg` under a new ticket. With `read_first`, over the data
  // channel, and when the first item is read whole, that item's READ goes
  // right behind the authorization on its connection (no round trip between
  // them), into an allocation made beforehand from the index's size; when the
  // grant and the READ both succeed the item is committed here
  // (Authorized::first_done), otherwise the allocation is dropped and the READ
  // stage treats the item as usual.
  Authorized Authorize(Peer& peer, Segment& seg, bool read_first);
  // A READ sent behind an authorization, and its outcome.
  struct EarlyRead {
    transfer::ReadRequest request;
    std::vector<MemoryPiece> dest;
    uint64_t digest = 0;
    Status status;
  };
  // One authorization round trip, over the data channel or peer gRPC
  // (options_.authorize_over_data), with `early` (not null) sent behind it on
  // the data channel. UNAVAILABLE: no usable answer.
  Status Call(Peer& peer, const peer::AuthorizeRequest& req, peer::AuthorizeResponse* resp,
              EarlyRead* early = nullptr);
  // Ends an authorization: its grant is released in the background (off the
  // caller's path); its slot is freed once the owner answered.
  void Finish(const std::shared_ptr<Peer>& peer, const Authorized& a);
  // Sends one release alone (the releaser's `send`).
  void Release(Peer& peer, uint64_t ticket);
  bool AcquireSlot(Peer& peer);
  void ReleaseSlot(Peer& peer);

  const FetcherOptions options_;
  RuntimeId runtime_id_{options_.runtime_uuid};  // the requester's incarnation now
  Store* const store_;
  const GlobalIndex* const index_;
  transfer::DataTransport* const transport_;
  CopyTracker* const copies_;                      // null: fetched values are not tracked
  std::unique_ptr<GrantClient> own_grant_client_;  // when none was given
  GrantClient* const grant_client_;

  mutable std::mutex peers_mu_;
  std::map<std::string, std::shared_ptr<Peer>> peers_;  // node id -> live member

  mutable std::mutex slots_mu_;
  std::condition_variable slots_cv_;
  size_t slots_used_ = 0;  // grants awaiting release, all owners

  SingleFlight<std::string, Status> flights_;  // fetches led here, by "tenant\0key"

  FetchCounters counters_;
  SegmentReader reader_{store_, transport_, copies_, options_.parallel_reads, &counters_};
  // Last: destroyed first, sending what it holds while the rest still works.
  std::unique_ptr<GrantReleaser> releaser_;
};

}  // namespace tierkv

#endif  // TIERKV_CLUSTER_FETCHER_H_
