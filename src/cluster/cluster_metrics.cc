// The cluster box's families for /metrics, each reported by the component
// that counts it: the global index and the inventory streams, the remote
// fetcher and its copies, the owner's grants, the peer port's gate and the
// drain jobs. (Membership's are in membership_metrics.cc; the data channel's
// in transfer/data_server_metrics.cc.)
#include "cluster/copy_tracker.h"
#include "cluster/drain.h"
#include "cluster/fetcher.h"
#include "cluster/global_index.h"
#include "cluster/grants.h"
#include "cluster/inventory.h"
#include "cluster/peer_gate.h"

namespace tierkv {
namespace {

constexpr MetricFamily kIxViews{"tierkv_index_owner_views", "gauge",
                                "Other owners' views in the global index by state"};
constexpr MetricFamily kIxEntries{"tierkv_index_entries", "gauge",
                                  "Keys in the global index's views"};
constexpr MetricFamily kIxBytes{"tierkv_index_bytes", "gauge",
                                "Global index memory (installed and staging views)"};
constexpr MetricFamily kIxBudget{"tierkv_index_budget_bytes", "gauge", "--index-budget"};
constexpr MetricFamily kIxInstalls{"tierkv_index_installs_total", "counter",
                                   "Owner views installed after a validated snapshot"};
constexpr MetricFamily kIxResets{"tierkv_index_resets_total", "counter",
                                 "Complete owner views dropped to partial (stream broke or reset)"};
constexpr MetricFamily kIxRefused{"tierkv_index_refused_views_total", "counter",
                                  "Owner views refused, by reason"};

constexpr MetricFamily kInvFrames{"tierkv_inventory_frames_total", "counter",
                                  "Inventory stream frames by direction"};
constexpr MetricFamily kInvBytes{"tierkv_inventory_bytes_total", "counter",
                                 "Inventory stream payload bytes by direction"};
constexpr MetricFamily kInvOwnerStreams{"tierkv_inventory_owner_streams", "gauge",
                                        "Inventory streams this manager serves now"};
constexpr MetricFamily kInvDeltaBuffer{"tierkv_inventory_delta_buffer_bytes", "gauge",
                                       "Changes encoded for the owner streams, held now"};
constexpr MetricFamily kInvSnapshots{"tierkv_inventory_snapshots_served_total", "counter",
                                     "Snapshots this manager served to peers"};
constexpr MetricFamily kInvResetsSent{"tierkv_inventory_resets_sent_total", "counter",
                                      "Streams ended because a peer fell behind the journal"};
constexpr MetricFamily kInvReplaced{
    "tierkv_inventory_owner_streams_replaced_total", "counter",
    "Streams cancelled by a newer stream of the same requester node"};
constexpr MetricFamily kInvRefused{
    "tierkv_inventory_owner_streams_refused_total", "counter",
    "Streams refused: no requester node, or too many requester nodes"};
constexpr MetricFamily kInvFailures{"tierkv_inventory_requester_failures_total", "counter",
                                    "Streams to other owners that broke"};
constexpr MetricFamily kInvStalls{
    "tierkv_inventory_requester_stalls_total", "counter",
    "Streams to other owners dropped for bringing no frame, not even a heartbeat, for "
    "--inventory-stall-ms"};

constexpr MetricFamily kFetched{"tierkv_remote_fetched_objects_total", "counter",
                                "Objects read from other managers and stored here"};
constexpr MetricFamily kFetchedBytes{"tierkv_remote_fetched_bytes_total", "counter",
                                     "Bytes read from other managers over the data channel"};
constexpr MetricFamily kMisses{"tierkv_remote_fetch_misses_total", "counter",
                               "Remote reads that ended in a bounded miss, by reason"};
constexpr MetricFamily kAuthorize{"tierkv_remote_authorize_calls_total", "counter",
                                  "Authorization calls to owners, by result"};
constexpr MetricFamily kReleases{"tierkv_remote_release_calls_total", "counter",
                                 "Grant releases sent to owners, by result"};
constexpr MetricFamily kLookahead{"tierkv_remote_lookahead_total", "counter",
                                  "Speculative authorizations discarded or retried"};
constexpr MetricFamily kStale{"tierkv_remote_stale_retries_total", "counter",
                              "Keys routed again after their owner refused a stale entry"};
constexpr MetricFamily kEarly{"tierkv_remote_early_reads_total", "counter",
                              "Values read behind their authorization on one data connection"};
constexpr MetricFamily kChecksum{
    "tierkv_remote_read_checksum_failures_total", "counter",
    "READs from other managers whose bytes did not match the owner's checksum (the get misses)"};
constexpr MetricFamily kInto{"tierkv_remote_read_into_objects_total", "counter",
                             "Objects read from other managers straight into a client's "
                             "registered memory (kept nowhere here)"};
constexpr MetricFamily kIntoBytes{"tierkv_remote_read_into_bytes_total", "counter",
                                  "Bytes read from other managers straight into a client's "
                                  "registered memory"};
constexpr MetricFamily kShared{"tierkv_remote_shared_fetches_total", "counter",
                               "Fetches that waited for a concurrent fetch of the same key"};
constexpr MetricFamily kAwaiting{"tierkv_remote_grants_awaiting_release", "gauge",
                                 "This manager's grants on owners not yet released"};
constexpr MetricFamily kCopies{
    "tierkv_remote_copies", "gauge",
    "Copies of other managers' values held here, following their owners"};
constexpr MetricFamily kCopiesDropped{
    "tierkv_remote_copies_dropped_total", "counter",
    "Copies dropped because their owner replaced or removed the value (stale), or its stream "
    "failed or it left (owner_lost)"};

constexpr MetricFamily kGrLive{"tierkv_grants_live", "gauge", "Source grants this owner holds now"};
constexpr MetricFamily kGrReserved{"tierkv_grants_reserved_bytes", "gauge",
                                   "Bytes pinned for peers' grants, charged to --transfer-budget"};
constexpr MetricFamily kGrBudget{"tierkv_grants_budget_bytes", "gauge", "--transfer-budget"};
constexpr MetricFamily kGrGiven{"tierkv_grants_given_total", "counter", "Source grants given"};
constexpr MetricFamily kGrCallsRefused{"tierkv_grants_calls_refused_total", "counter",
                                       "Authorizations refused whole, by reason"};
constexpr MetricFamily kGrItems{"tierkv_grants_items_total", "counter",
                                "Items of authorizations, by result"};
constexpr MetricFamily kGrEnded{"tierkv_grants_ended_total", "counter",
                                "Source grants ended, by cause"};
constexpr MetricFamily kGrWaits{"tierkv_grants_budget_waits_total", "counter",
                                "Authorizations that waited for the requester's own releases"};

constexpr MetricFamily kPeerConns{"tierkv_peer_connections", "gauge",
                                  "Open connections on the peer gRPC port (--addr)"};
constexpr MetricFamily kPeerConnsTotal{"tierkv_peer_connections_total", "counter",
                                       "Connections on the peer gRPC port, by outcome"};

constexpr MetricFamily kDrRunning{"tierkv_drain_jobs_running", "gauge",
                                  "Drain jobs this coordinator runs now (0 or 1)"};
constexpr MetricFamily kDrJobs{"tierkv_drain_jobs_total", "counter",
                               "Drain jobs this coordinator ran to an end, by final state"};
constexpr MetricFamily kDrObjects{"tierkv_drain_objects_total", "counter",
                                  "Objects of this coordinator's drain jobs, by outcome"};
constexpr MetricFamily kDrBytes{"tierkv_drain_bytes_moved_total", "counter",
                                "Bytes of the objects this coordinator's drain jobs moved"};

}  // namespace

void GlobalIndex::ReportMetrics(MetricSink& sink) const {
  const IndexStats s = Stats();
  sink.ByLabel(kIxViews, "state",
               {{"complete", s.complete},
                {"staging", s.staging},
                {"partial", s.partial},
                {"missing", s.missing}});
  sink.One(kIxEntries, s.entries);
  sink.One(kIxBytes, s.bytes);
  sink.One(kIxBudget, s.budget);
  sink.One(kIxInstalls, s.installs);
  sink.One(kIxResets, s.resets);
  sink.ByLabel(kIxRefused, "reason", {{"budget", s.refused_budget}, {"invalid", s.rejected_views}});
}

void Inventory::ReportMetrics(MetricSink& sink) const {
  const InventoryStats s = Stats();
  sink.ByLabel(kInvFrames, "direction", {{"in", s.frames_in}, {"out", s.frames_out}});
  sink.ByLabel(kInvBytes, "direction", {{"in", s.bytes_in}, {"out", s.bytes_out}});
  sink.One(kInvOwnerStreams, s.streams_out);
  sink.One(kInvDeltaBuffer, s.delta_buffer_bytes);
  sink.One(kInvSnapshots, s.snapshots_out);
  sink.One(kInvResetsSent, s.resets_out);
  sink.One(kInvReplaced, s.replaced_out);
  sink.One(kInvRefused, s.refused_out);
  sink.One(kInvFailures, s.stream_failures);
  sink.One(kInvStalls, s.stalls);
}

void RemoteFetcher::ReportMetrics(MetricSink& sink) const {
  const FetchStats s = Stats();
  sink.One(kFetched, s.objects);
  sink.One(kFetchedBytes, s.bytes);
  sink.ByLabel(kMisses, "reason",
               {{"not_indexed", s.miss_not_indexed},
                {"refused", s.miss_refused},
                {"budget", s.miss_budget},
                {"read_failed", s.miss_read},
                {"local_space", s.miss_local_space},
                {"grant_slots", s.miss_slots}});
  sink.ByLabel(
      kAuthorize, "result",
      {{"answered", s.authorizations - s.authorize_failures}, {"no_answer", s.authorize_failures}});
  sink.ByLabel(kReleases, "result", {{"ok", s.releases}, {"failed", s.release_failures}});
  sink.ByLabel(kLookahead, "kind",
               {{"discarded", s.lookahead_discarded}, {"retried", s.lookahead_retries}});
  sink.One(kStale, s.stale_retries);
  sink.One(kEarly, s.early_reads);
  sink.One(kChecksum, s.checksum_failures);
  sink.One(kInto, s.into_objects);
  sink.One(kIntoBytes, s.into_bytes);
  CopyTracker::ReportMetrics(copies_ != nullptr ? copies_->Stats() : CopyStats{}, sink);
  sink.One(kShared, s.shared_flights);
  sink.One(kAwaiting, s.grants_awaiting_release);
}

void CopyTracker::ReportMetrics(const CopyStats& s, MetricSink& sink) {
  sink.One(kCopies, s.tracked);
  sink.ByLabel(kCopiesDropped, "reason",
               {{"stale", s.dropped_stale}, {"owner_lost", s.dropped_lost}});
}

void GrantTable::ReportMetrics(MetricSink& sink) const {
  const GrantStats g = Stats();
  sink.One(kGrLive, g.sessions);
  sink.One(kGrReserved, g.reserved_bytes);
  sink.One(kGrBudget, g.budget_bytes);
  sink.One(kGrGiven, g.authorizations);
  sink.ByLabel(kGrCallsRefused, "reason",
               {{"sessions", g.refused_sessions}, {"other", g.refused_other}});
  sink.ByLabel(
      kGrItems, "result",
      {{"granted", g.items_granted}, {"stale", g.refused_stale}, {"budget", g.refused_budget}});
  sink.ByLabel(kGrEnded, "cause",
               {{"released", g.released}, {"expired", g.expired}, {"requester_left", g.departed}});
  sink.One(kGrWaits, g.budget_waits);
}

void PeerGate::ReportMetrics(const PeerGateStats& p, MetricSink& sink) {
  sink.One(kPeerConns, p.connections);
  sink.ByLabel(kPeerConnsTotal, "result",
               {{"accepted", p.accepted},
                {"shed", p.shed},
                {"handshake_timeout", p.handshake_timeouts},
                {"idle_closed", p.idle_closed},
                {"backend_failed", p.backend_failures}});
}

void DrainJobs::ReportMetrics(MetricSink& sink) const {
  const DrainStats d = Stats();
  sink.One(kDrRunning, d.running ? 1 : 0);
  sink.ByLabel(kDrJobs, "state",
               {{"done", d.jobs_done}, {"cancelled", d.jobs_cancelled}, {"failed", d.jobs_failed}});
  sink.ByLabel(
      kDrObjects, "outcome",
      {{"moved", d.objects_moved}, {"failed", d.objects_failed}, {"gone", d.objects_gone}});
  sink.One(kDrBytes, d.bytes_moved);
}

}  // namespace tierkv
