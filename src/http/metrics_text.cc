#include "http/metrics_text.h"

#include <algorithm>
#include <cstdio>
#include <functional>
#include <initializer_list>
#include <utility>

namespace tierkv {
namespace {

// The metric families that are not per-operation, in output order.
struct Family {
  const char* name;
  const char* type;
  const char* help;
};

constexpr Family kSegmentCapacity{"memcache_segment_capacity_bytes", "gauge",
                                  "Segment total capacity in bytes"};
constexpr Family kSegmentAllocated{"memcache_segment_allocated_bytes", "gauge",
                                   "Segment allocated bytes"};
constexpr Family kTotalCapacity{"memcache_total_capacity_bytes", "gauge",
                                "Total capacity by medium in bytes"};
constexpr Family kAllocated{"memcache_allocated_bytes", "gauge", "Allocated bytes by medium"};
constexpr Family kEvictOps{"memcache_evict_operations_total", "counter",
                           "Total number of eviction operations"};
constexpr Family kEvictRunning{"memcache_evict_running", "gauge",
                               "Whether eviction (GC) is currently running (1=yes, 0=no)"};
constexpr Family kFlushBlobs{"memcache_flush_blobs_total", "counter",
                             "Total number of blobs flushed to SSD"};
constexpr Family kFlushBytes{"memcache_flush_bytes_total", "counter", "Total bytes flushed to SSD"};
constexpr Family kHitsDram{"memcache_get_hits_dram_total", "counter",
                           "Total number of Get hits served from DRAM"};
constexpr Family kHitsSsd{"memcache_get_hits_ssd_total", "counter",
                          "Total number of Get hits served from SSD (rewarm)"};
constexpr Family kRewarm{"memcache_rewarm_total", "counter",
                         "Total number of SSD->DRAM rewarm operations"};
constexpr Family kRewarmFailed{"memcache_rewarm_failed_total", "counter",
                               "Total number of failed SSD->DRAM rewarm operations"};
constexpr Family kRewarmBytes{"memcache_rewarm_bytes_total", "counter",
                              "Total bytes rewarmed from SSD to DRAM"};
constexpr Family kRewarmBytesCurrent{"memcache_rewarm_bytes_current", "gauge",
                                     "Current bytes occupied by rewarmed data"};
constexpr Family kStoredKeys{"memcache_stored_keys", "gauge", "Current number of stored keys"};
constexpr Family kEvPublished{"memcache_kv_events_published_total", "counter",
                              "Total KV cache events published"};
constexpr Family kEvByType{"memcache_kv_events_published_by_type_total", "counter",
                           "Total KV cache events published by event type"};
constexpr Family kEvByMedium{"memcache_kv_events_published_by_medium_total", "counter",
                             "Total KV cache events published by storage medium"};
constexpr Family kEvDropped{"memcache_kv_events_dropped_total", "counter",
                            "Total KV cache events dropped on queue pressure"};
constexpr Family kEvDroppedStored{"memcache_kv_events_dropped_stored_total", "counter",
                                  "Total KV cache stored events dropped on full queue"};
constexpr Family kEvDroppedHigh{
    "memcache_kv_events_dropped_high_priority_total", "counter",
    "Total KV cache removed or cleared events dropped after hard queue limit"};
constexpr Family kEvSkippedUnparsed{
    "memcache_kv_events_skipped_unparsed_total", "counter",
    "Total KV cache events that could not derive block_hashes from object key"};
constexpr Family kEvQueueSize{"memcache_kv_events_queue_size", "gauge",
                              "Current KV cache event queue size"};
constexpr Family kEvQueueCapacity{"memcache_kv_events_queue_capacity", "gauge",
                                  "Configured KV cache event soft queue capacity"};
constexpr Family kEvActive{"memcache_kv_events_publisher_active", "gauge",
                           "Whether KV event publishing is active"};
constexpr Family kEvLastSeq{"memcache_kv_events_last_sequence", "gauge",
                            "Last published KV event ZMQ sequence"};
constexpr Family kStale{"memcache_metric_stale", "gauge",
                        "Client metric stale status (1 = stale, 0 = fresh)"};
constexpr Family kBwBytes{"memcache_bandwidth_bytes", "gauge",
                          "Client bandwidth window bytes transferred"};
constexpr Family kBwDuration{"memcache_bandwidth_duration_ms", "gauge",
                             "Client bandwidth window duration in milliseconds"};
constexpr Family kBwBytesCum{"memcache_bandwidth_bytes_cum_total", "counter",
                             "Client bandwidth cumulative bytes transferred"};
constexpr Family kBwDurationCum{"memcache_bandwidth_duration_ms_cum_total", "counter",
                                "Client bandwidth cumulative duration in milliseconds"};
constexpr Family kBwLatency{"memcache_bandwidth_latency_seconds", "gauge",
                            "Client bandwidth operation latency in seconds"};
constexpr Family kBwRate{"memcache_bandwidth_bytes_per_sec", "gauge",
                         "Client bandwidth instantaneous bytes per second"};
constexpr Family kUbsDiskCap{"memcache_ubs_io_disk_capacity_bytes", "gauge",
                             "Client UBS IO SSD total capacity in bytes"};
constexpr Family kUbsDiskUsed{"memcache_ubs_io_disk_used_bytes", "gauge",
                              "Client UBS IO SSD used bytes"};
constexpr Family kUbsMemCap{"memcache_ubs_io_mem_capacity_bytes", "gauge",
                            "Client UBS IO memory total capacity in bytes"};
constexpr Family kUbsMemUsed{"memcache_ubs_io_mem_used_bytes", "gauge",
                             "Client UBS IO memory used bytes"};
constexpr Family kUbsDiskNum{"memcache_ubs_io_disk_num", "gauge", "Client UBS IO total disk count"};
constexpr Family kUbsFaultNum{"memcache_ubs_io_fault_disk_num", "gauge",
                              "Client UBS IO fault disk count"};
// Beyond the contract: the DRAM allocator's state (after every contract family).
constexpr Family kDramFragmentation{
    "tierkv_dram_fragmentation_ratio", "gauge",
    "DRAM pool external fragmentation: 1 - largest free range / free bytes"};
constexpr Family kDramLargestFree{"tierkv_dram_largest_free_bytes", "gauge",
                                  "Largest free range of the DRAM pool in bytes"};
constexpr Family kDramFreeRanges{"tierkv_dram_free_ranges", "gauge",
                                 "Number of free ranges in the DRAM pool"};
constexpr Family kDramRequested{"tierkv_dram_requested_bytes", "gauge",
                                "Bytes of live values in the DRAM pool before size-class rounding"};
// Beyond the contract: the SSD tier (only when one is attached).
constexpr Family kSsdInfo{"tierkv_ssd_info", "gauge",
                          "SSD tier I/O engine (io_uring or pread) and whether O_DIRECT is on"};
constexpr Family kSsdObjects{"tierkv_ssd_objects", "gauge", "Objects with a replica on SSD"};
constexpr Family kSsdDemoted{"tierkv_ssd_demoted_total", "counter",
                             "DRAM replicas dropped with an SSD replica kept (demotions)"};
constexpr Family kSsdFlushFailed{"tierkv_ssd_flush_failed_total", "counter",
                                 "SSD writes that failed (no room or I/O error)"};
constexpr Family kSsdEvicted{"tierkv_ssd_evicted_total", "counter", "SSD replicas evicted"};
constexpr Family kSsdEvictedBytes{"tierkv_ssd_evicted_bytes_total", "counter",
                                  "Bytes of SSD replicas evicted"};
constexpr Family kSsdIoErrors{"tierkv_ssd_io_errors_total", "counter",
                              "SSD reads, writes and frees that failed"};
constexpr Family kSsdCorrupt{"tierkv_ssd_corrupt_blobs_total", "counter",
                             "SSD replicas dropped because their value failed its checksum"};
constexpr Family kSsdRecovered{"tierkv_ssd_recovered_blobs", "gauge",
                               "Objects the start-up scan recovered from SSD"};
constexpr Family kSsdRecoveryCorrupt{"tierkv_ssd_recovery_corrupt_blobs", "gauge",
                                     "Blob headers the start-up scan found invalid and dropped"};
constexpr Family kSsdPrefetch{"tierkv_ssd_prefetch_scheduled_total", "counter",
                              "Rewarms scheduled by prefetch requests"};
constexpr Family kSsdPaused{"tierkv_ssd_writes_paused", "gauge",
                            "1 while SSD writes are paused after an I/O error (demotion drops)"};
constexpr Family kSsdPauses{"tierkv_ssd_write_pauses_total", "counter",
                            "Pauses of SSD writes started by I/O errors"};
constexpr Family kSsdUnavailable{"tierkv_ssd_unavailable", "gauge",
                                 "1 when an SSD tier is configured but could not start (the "
                                 "manager serves from DRAM alone; /health gives the reason)"};
// Beyond the contract: client connections and client-reported metrics.
constexpr Family kSrvConns{"tierkv_server_connections", "gauge",
                           "Client connections open now, working or idle"};
constexpr Family kSrvWorking{"tierkv_server_connections_working", "gauge",
                             "Client connections being served by a worker thread now"};
constexpr Family kSrvAccepted{"tierkv_server_connections_accepted_total", "counter",
                              "Client connections accepted"};
constexpr Family kSrvRefused{"tierkv_server_connections_refused_total", "counter",
                             "Client connections refused: max-open-connections, all working"};
constexpr Family kSrvShed{"tierkv_server_connections_shed_total", "counter",
                          "Idle client connections closed to make room for a new one"};
constexpr Family kSrvHandshake{"tierkv_server_handshake_timeouts_total", "counter",
                               "Client connections closed for not completing HELLO in time"};
constexpr Family kSrvProtocol{"tierkv_server_protocol_errors_total", "counter",
                              "Client connections closed for an unusable byte stream"};
constexpr Family kSrvRequests{"tierkv_server_requests_total", "counter",
                              "Client requests received"};
constexpr Family kSrvWaits{"tierkv_server_request_waits_total", "counter",
                           "Client requests by how their session awaited them: busy-polling, "
                           "paced (asleep until shortly before it was due, then polling) "
                           "or asleep"};
constexpr Family kSrvWorkers{"tierkv_server_worker_threads", "gauge",
                             "Worker threads serving client connections"};
constexpr Family kRepRanks{"tierkv_client_metric_ranks", "gauge",
                           "Client ranks whose reported transfer metrics are kept"};
constexpr Family kRepRefused{"tierkv_client_metric_reports_refused_total", "counter",
                             "Client metric reports refused over max-metric-ranks"};
constexpr Family kRepInvalid{"tierkv_client_metric_reports_invalid_total", "counter",
                             "Client metric reports refused for non-finite or negative values"};
constexpr Family kHttpConns{"tierkv_http_connections", "gauge", "REST API connections open now"};
constexpr Family kHttpAccepted{"tierkv_http_connections_accepted_total", "counter",
                               "REST API connections accepted"};
constexpr Family kHttpShed{"tierkv_http_connections_shed_total", "counter",
                           "REST API connections closed to make room for a new one"};
constexpr Family kHttpRefused{"tierkv_http_connections_refused_total", "counter",
                              "REST API connections refused while every one was being served"};
constexpr Family kHttpTimeouts{"tierkv_http_request_timeouts_total", "counter",
                               "REST API requests or responses that missed the request timeout"};
constexpr Family kHttpRequests{"tierkv_http_requests_total", "counter",
                               "REST API requests read completely"};
constexpr Family kClMembers{"tierkv_cluster_members", "gauge",
                            "Live members in this manager's view of the cluster"};
constexpr Family kClRegistered{"tierkv_cluster_registered", "gauge",
                               "1 while this manager's registration is valid (remote admission)"};
constexpr Family kClFenced{"tierkv_cluster_fenced", "gauge",
                           "1 while the registration is fenced (local service only until this "
                           "manager joins again as a new incarnation, or restarts)"};
constexpr Family kClState{"tierkv_membership_state", "gauge",
                          "1 for this manager's membership state: starting, registered (valid), "
                          "unknown (registered, validity lapsed, not fenced yet), fenced"};
constexpr Family kClFences{"tierkv_membership_fences_total", "counter",
                           "Registrations fenced since start"};
constexpr Family kClRejoins{"tierkv_membership_rejoins_total", "counter",
                            "New incarnations registered after a fence (same process, DRAM and "
                            "SSD kept)"};
constexpr Family kClLastRejoin{"tierkv_membership_last_rejoin_timestamp_seconds", "gauge",
                               "When this manager last joined again as a new incarnation (0: "
                               "never)"};
constexpr Family kClValidity{"tierkv_cluster_registration_validity_seconds", "gauge",
                             "Seconds of registration validity left (0 when not valid)"};
constexpr Family kClCoordinator{"tierkv_cluster_coordinator", "gauge",
                                "1 while this manager is the elected coordinator"};
constexpr Family kClCoordChanges{"tierkv_cluster_coordinator_elections_total", "counter",
                                 "Times this manager was elected coordinator"};
constexpr Family kClRenewFailures{"tierkv_cluster_lease_renew_failures_total", "counter",
                                  "Membership lease keepalive streams that failed"};
constexpr Family kClEtcdErrors{"tierkv_cluster_etcd_errors_total", "counter",
                               "Failed etcd requests by kind"};
constexpr Family kClEtcdFailovers{"tierkv_cluster_etcd_failovers_total", "counter",
                                  "Moves of the etcd client to another endpoint"};
constexpr Family kClWatch{"tierkv_cluster_watch_events_total", "counter",
                          "Membership watch recoveries by kind"};
constexpr Family kIxViews{"tierkv_index_owner_views", "gauge",
                          "Other owners' views in the global index by state"};
constexpr Family kIxEntries{"tierkv_index_entries", "gauge", "Keys in the global index's views"};
constexpr Family kIxBytes{"tierkv_index_bytes", "gauge",
                          "Global index memory (installed and staging views)"};
constexpr Family kIxBudget{"tierkv_index_budget_bytes", "gauge", "--index-budget"};
constexpr Family kIxInstalls{"tierkv_index_installs_total", "counter",
                             "Owner views installed after a validated snapshot"};
constexpr Family kIxResets{"tierkv_index_resets_total", "counter",
                           "Complete owner views dropped to partial (stream broke or reset)"};
constexpr Family kIxRefused{"tierkv_index_refused_views_total", "counter",
                            "Owner views refused, by reason"};
constexpr Family kInvFrames{"tierkv_inventory_frames_total", "counter",
                            "Inventory stream frames by direction"};
constexpr Family kInvBytes{"tierkv_inventory_bytes_total", "counter",
                           "Inventory stream payload bytes by direction"};
constexpr Family kInvOwnerStreams{"tierkv_inventory_owner_streams", "gauge",
                                  "Inventory streams this manager serves now"};
constexpr Family kInvDeltaBuffer{"tierkv_inventory_delta_buffer_bytes", "gauge",
                                 "Changes encoded for the owner streams, held now"};
constexpr Family kInvSnapshots{"tierkv_inventory_snapshots_served_total", "counter",
                               "Snapshots this manager served to peers"};
constexpr Family kInvResetsSent{"tierkv_inventory_resets_sent_total", "counter",
                                "Streams ended because a peer fell behind the journal"};
constexpr Family kInvReplaced{"tierkv_inventory_owner_streams_replaced_total", "counter",
                              "Streams cancelled by a newer stream of the same requester node"};
constexpr Family kInvRefused{"tierkv_inventory_owner_streams_refused_total", "counter",
                             "Streams refused: no requester node, or too many requester nodes"};
constexpr Family kInvFailures{"tierkv_inventory_requester_failures_total", "counter",
                              "Streams to other owners that broke"};
constexpr Family kInvStalls{"tierkv_inventory_requester_stalls_total", "counter",
                            "Streams to other owners dropped for bringing no frame, not even a "
                            "heartbeat, for --inventory-stall-ms"};
constexpr Family kTrFetched{"tierkv_remote_fetched_objects_total", "counter",
                            "Objects read from other managers and stored here"};
constexpr Family kTrFetchedBytes{"tierkv_remote_fetched_bytes_total", "counter",
                                 "Bytes read from other managers over the data channel"};
constexpr Family kTrMisses{"tierkv_remote_fetch_misses_total", "counter",
                           "Remote reads that ended in a bounded miss, by reason"};
constexpr Family kTrAuth{"tierkv_remote_authorize_calls_total", "counter",
                         "Authorization calls to owners, by result"};
constexpr Family kTrReleases{"tierkv_remote_release_calls_total", "counter",
                             "Grant releases sent to owners, by result"};
constexpr Family kTrLookahead{"tierkv_remote_lookahead_total", "counter",
                              "Speculative authorizations discarded or retried"};
constexpr Family kTrStale{"tierkv_remote_stale_retries_total", "counter",
                          "Keys routed again after their owner refused a stale entry"};
constexpr Family kTrCopies{"tierkv_remote_copies", "gauge",
                           "Copies of other managers' values held here, following their owners"};
constexpr Family kTrCopiesDropped{"tierkv_remote_copies_dropped_total", "counter",
                                  "Copies dropped because their owner replaced or removed the "
                                  "value (stale), or its stream failed or it left (owner_lost)"};
constexpr Family kTrEarly{"tierkv_remote_early_reads_total", "counter",
                          "Values read behind their authorization on one data connection"};
constexpr Family kTrShared{"tierkv_remote_shared_fetches_total", "counter",
                           "Fetches that waited for a concurrent fetch of the same key"};
constexpr Family kTrAwaiting{"tierkv_remote_grants_awaiting_release", "gauge",
                             "This manager's grants on owners not yet released"};
constexpr Family kDrRunning{"tierkv_drain_jobs_running", "gauge",
                            "Drain jobs this coordinator runs now (0 or 1)"};
constexpr Family kDrJobs{"tierkv_drain_jobs_total", "counter",
                         "Drain jobs this coordinator ran to an end, by final state"};
constexpr Family kDrObjects{"tierkv_drain_objects_total", "counter",
                            "Objects of this coordinator's drain jobs, by outcome"};
constexpr Family kDrBytes{"tierkv_drain_bytes_moved_total", "counter",
                          "Bytes of the objects this coordinator's drain jobs moved"};
constexpr Family kGrLive{"tierkv_grants_live", "gauge", "Source grants this owner holds now"};
constexpr Family kGrReserved{"tierkv_grants_reserved_bytes", "gauge",
                             "Bytes pinned for peers' grants, charged to --transfer-budget"};
constexpr Family kGrBudget{"tierkv_grants_budget_bytes", "gauge", "--transfer-budget"};
constexpr Family kGrGiven{"tierkv_grants_given_total", "counter", "Source grants given"};
constexpr Family kGrCallsRefused{"tierkv_grants_calls_refused_total", "counter",
                                 "Authorizations refused whole, by reason"};
constexpr Family kGrItems{"tierkv_grants_items_total", "counter",
                          "Items of authorizations, by result"};
constexpr Family kGrEnded{"tierkv_grants_ended_total", "counter", "Source grants ended, by cause"};
constexpr Family kGrWaits{"tierkv_grants_budget_waits_total", "counter",
                          "Authorizations that waited for the requester's own releases"};
constexpr Family kPeerConns{"tierkv_peer_connections", "gauge",
                            "Open connections on the peer gRPC port (--addr)"};
constexpr Family kPeerConnsTotal{"tierkv_peer_connections_total", "counter",
                                 "Connections on the peer gRPC port, by outcome"};
constexpr Family kDcConns{"tierkv_data_connections", "gauge", "Open data channel connections"};
constexpr Family kDcConnsTotal{"tierkv_data_connections_total", "counter",
                               "Data channel connections, by result"};
constexpr Family kDcReads{"tierkv_data_reads_total", "counter",
                          "READs on the data channel, by result"};
constexpr Family kDcBytes{"tierkv_data_bytes_sent_total", "counter",
                          "Object bytes sent on the data channel"};
constexpr Family kDcReused{"tierkv_data_checksums_reused_total", "counter",
                           "READs answered with the kept checksum of their bytes, unhashed"};
constexpr Family kDcDecided{"tierkv_data_authorizations_decided_total", "counter",
                            "AUTHORIZEs on the data channel, by where they were decided"};

constexpr Family kUbsPerDisk[] = {
    {"memcache_ubs_io_disk_status", "gauge",
     "Client UBS IO per-disk status (0=normal, non-zero=fault)"},
    {"memcache_ubs_io_disk_read_bandwidth_bytes_per_sec", "gauge",
     "Client UBS IO per-disk read bandwidth"},
    {"memcache_ubs_io_disk_write_bandwidth_bytes_per_sec", "gauge",
     "Client UBS IO per-disk write bandwidth"},
    {"memcache_ubs_io_disk_total_bandwidth_bytes_per_sec", "gauge",
     "Client UBS IO per-disk total bandwidth"},
};

// Display names of the operations for help texts ("Get", "BatchUpdateState").
constexpr const char* kOpDisplay[kOpCount] = {
    "Alloc",       "BatchAlloc", "Get",         "BatchGet",         "Remove",
    "BatchRemove", "RemoveAll",  "UpdateState", "BatchUpdateState", "Query",
    "BatchQuery",  "GetAllKeys", "ExistKey",    "BatchExistKey",    "Mount",
    "Unmount"};

// Operations with a not_found counter (the contract's list).
bool HasNotFound(Op op) {
  switch (op) {
    case Op::kGet:
    case Op::kBatchGet:
    case Op::kRemove:
    case Op::kBatchRemove:
    case Op::kUpdateState:
    case Op::kBatchUpdateState:
    case Op::kQuery:
    case Op::kBatchQuery:
    case Op::kExistKey:
    case Op::kBatchExistKey:
      return true;
    default:
      return false;
  }
}

constexpr const char* kClientOps[3] = {"batch_put", "batch_get", "batch_exist"};

class Writer {
 public:
  void Head(const Family& f) { Head(f.name, f.type, f.help); }
  void Head(const std::string& name, const char* type, const std::string& help) {
    out_ += "# HELP " + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
  }
  void Sample(const std::string& name, const std::string& labels, uint64_t v) {
    out_ += name;
    if (!labels.empty()) out_ += "{" + labels + "}";
    out_ += " " + std::to_string(v) + "\n";
  }
  void SampleF(const std::string& name, const std::string& labels, double v) {
    char buf[64];
    std::snprintf(buf, sizeof(buf), "%.9g", v);
    out_ += name;
    if (!labels.empty()) out_ += "{" + labels + "}";
    out_ += std::string(" ") + buf + "\n";
  }
  void One(const Family& f, uint64_t v) {
    Head(f);
    Sample(f.name, "", v);
  }
  // A family with one label: one sample per (label value, sample value).
  void ByLabel(const Family& f, const char* key,
               std::initializer_list<std::pair<const char*, uint64_t>> samples) {
    Head(f);
    for (const auto& [value, v] : samples) {
      Sample(f.name, std::string(key) + "=\"" + value + "\"", v);
    }
  }
  std::string Take() { return std::move(out_); }

 private:
  std::string out_;
};

std::string Label(const char* k, const std::string& v) { return std::string(k) + "=\"" + v + "\""; }
std::string RankLabel(uint32_t r) { return Label("rank", std::to_string(r)); }

// Medium labels of the capacity families: hbm and dram always, ssd only when
// it has capacity or usage (the contract's omission rule).
std::vector<Medium> CapacityMedia(const MetricsSnapshot& s) {
  std::vector<Medium> out = {Medium::kHbm, Medium::kDram};
  const int ssd = static_cast<int>(Medium::kSsd);
  if (s.medium_total[ssd] != 0 || s.medium_used[ssd] != 0) out.push_back(Medium::kSsd);
  return out;
}

void RenderOps(const MetricsSnapshot& s, Writer& w) {
  static constexpr const char* kKinds[4] = {"requests", "successes", "failures", "not_found"};
  static constexpr const char* kHelp[4] = {"requests", "successes", "failures",
                                           "not found results"};
  for (int i = 0; i < kOpCount; ++i) {
    const Op op = static_cast<Op>(i);
    const OpCounts total = s.ops->Get(op);
    for (int k = 0; k < 4; ++k) {
      if (k == 3 && !HasNotFound(op)) continue;
      const std::string name = "memcache_" + std::string(OpName(op)) + "_" + kKinds[k] + "_total";
      w.Head(name, "counter", std::string("Total number of ") + kOpDisplay[i] + " " + kHelp[k]);
      auto pick = [k](const OpCounts& c) {
        return k == 0 ? c.requests : k == 1 ? c.success : k == 2 ? c.failure : c.not_found;
      };
      w.Sample(name, "", pick(total));
      if (s.per_rank) {
        for (uint32_t r : s.ranks) w.Sample(name, RankLabel(r), pick(s.ops->GetForRank(op, r)));
      }
    }
  }
}

void RenderClients(const MetricsSnapshot& s, Writer& w) {
  if (s.clients.empty()) return;  // only while some client rank is online
  w.Head(kStale);
  for (const auto& c : s.clients) w.Sample(kStale.name, RankLabel(c.rank), c.stale ? 1 : 0);
  auto per_op = [&](const Family& f, int ops, auto value) {
    w.Head(f);
    for (const auto& c : s.clients) {
      for (int o = 0; o < ops; ++o) {
        if (!c.present[o]) continue;
        w.SampleF(f.name, RankLabel(c.rank) + "," + Label("operation", kClientOps[o]),
                  value(c.ops[o]));
      }
    }
  };
  per_op(kBwBytes, 2, [](const proto::OpWindow& o) { return double(o.window_bytes); });
  per_op(kBwDuration, 3, [](const proto::OpWindow& o) { return double(o.window_duration_ms); });
  per_op(kBwBytesCum, 2, [](const proto::OpWindow& o) { return double(o.cum_bytes); });
  per_op(kBwDurationCum, 3, [](const proto::OpWindow& o) { return double(o.cum_duration_ms); });
  w.Head(kBwLatency);
  for (const auto& c : s.clients) {
    for (int o = 0; o < 3; ++o) {
      if (!c.present[o]) continue;
      const proto::OpWindow& op = c.ops[o];
      const std::pair<const char*, double> q[] = {
          {"P50", op.p50_s}, {"P90", op.p90_s}, {"P99", op.p99_s}, {"Avg", op.avg_s}};
      for (const auto& [name, v] : q) {
        w.SampleF(kBwLatency.name,
                  RankLabel(c.rank) + "," + Label("operation", kClientOps[o]) + "," +
                      Label("quantile", name),
                  v);
      }
    }
  }
  per_op(kBwRate, 2, [](const proto::OpWindow& o) { return o.bytes_per_sec; });
  // UBS IO: no such devices here; the rank-level series are 0 and the per-disk
  // families have no disks to report.
  for (const Family* f :
       {&kUbsDiskCap, &kUbsDiskUsed, &kUbsMemCap, &kUbsMemUsed, &kUbsDiskNum, &kUbsFaultNum}) {
    w.Head(*f);
    for (const auto& c : s.clients) w.Sample(f->name, RankLabel(c.rank), 0);
  }
  for (const Family& f : kUbsPerDisk) w.Head(f);
}

void RenderDrain(Writer& w, const DrainStats& d) {
  w.One(kDrRunning, d.running ? 1 : 0);
  w.ByLabel(kDrJobs, "state",
            {{"done", d.jobs_done}, {"cancelled", d.jobs_cancelled}, {"failed", d.jobs_failed}});
  w.ByLabel(kDrObjects, "outcome",
            {{"moved", d.objects_moved}, {"failed", d.objects_failed}, {"gone", d.objects_gone}});
  w.One(kDrBytes, d.bytes_moved);
}

void RenderTransfer(Writer& w, const RemoteReadStats& t) {
  w.One(kTrFetched, t.objects);
  w.One(kTrFetchedBytes, t.bytes);
  w.ByLabel(kTrMisses, "reason",
            {{"not_indexed", t.miss_not_indexed},
             {"refused", t.miss_refused},
             {"budget", t.miss_budget},
             {"read_failed", t.miss_read},
             {"local_space", t.miss_local_space},
             {"grant_slots", t.miss_slots}});
  w.ByLabel(
      kTrAuth, "result",
      {{"answered", t.authorizations - t.authorize_failures}, {"no_answer", t.authorize_failures}});
  w.ByLabel(kTrReleases, "result", {{"ok", t.releases}, {"failed", t.release_failures}});
  w.ByLabel(kTrLookahead, "kind",
            {{"discarded", t.lookahead_discarded}, {"retried", t.lookahead_retries}});
  w.One(kTrStale, t.stale_retries);
  w.One(kTrEarly, t.early_reads);
  w.One(kTrCopies, t.copies);
  w.ByLabel(kTrCopiesDropped, "reason",
            {{"stale", t.copies_dropped_stale}, {"owner_lost", t.copies_dropped_lost}});
  w.One(kTrShared, t.shared_flights);
  w.One(kTrAwaiting, t.grants_awaiting_release);
  w.One(kGrLive, t.grants_live);
  w.One(kGrReserved, t.reserved_bytes);
  w.One(kGrBudget, t.budget_bytes);
  w.One(kGrGiven, t.grants_given);
  w.ByLabel(kGrCallsRefused, "reason",
            {{"sessions", t.refused_sessions}, {"other", t.refused_other}});
  w.ByLabel(
      kGrItems, "result",
      {{"granted", t.items_granted}, {"stale", t.refused_stale}, {"budget", t.refused_budget}});
  w.ByLabel(kGrEnded, "cause",
            {{"released", t.released}, {"expired", t.expired}, {"requester_left", t.departed}});
  w.One(kGrWaits, t.budget_waits);
  w.One(kPeerConns, t.peer_connections);
  w.ByLabel(kPeerConnsTotal, "result",
            {{"accepted", t.peer_accepted},
             {"shed", t.peer_shed},
             {"handshake_timeout", t.peer_handshake_timeouts},
             {"idle_closed", t.peer_idle_closed},
             {"backend_failed", t.peer_backend_failures}});
  w.One(kDcConns, t.data_connections);
  w.ByLabel(
      kDcConnsTotal, "result",
      {{"accepted", t.data_connections_total}, {"refused", t.data_refused}, {"shed", t.data_shed}});
  w.ByLabel(kDcReads, "result", {{"sent", t.data_reads}, {"refused", t.data_refusals}});
  w.One(kDcBytes, t.data_bytes_out);
  w.One(kDcReused, t.data_checksums_reused);
  w.ByLabel(kDcDecided, "where",
            {{"event_loop", t.data_decided_at_once}, {"pool", t.data_decided_on_pool}});
}

}  // namespace

std::string RenderPrometheus(const MetricsSnapshot& s) {
  Writer w;
  // Capacity.
  w.Head(kSegmentCapacity);
  for (const auto& seg : s.segments) {
    w.Sample(kSegmentCapacity.name, Label("segment", seg.name), seg.total_bytes);
  }
  w.Head(kSegmentAllocated);
  for (const auto& seg : s.segments) {
    w.Sample(kSegmentAllocated.name, Label("segment", seg.name), seg.used_bytes);
  }
  const std::vector<Medium> media = CapacityMedia(s);
  w.Head(kTotalCapacity);
  for (Medium m : media) {
    w.Sample(kTotalCapacity.name, Label("medium", std::string(MediumName(m))),
             s.medium_total[static_cast<int>(m)]);
  }
  w.Head(kAllocated);
  for (Medium m : media) {
    w.Sample(kAllocated.name, Label("medium", std::string(MediumName(m))),
             s.medium_used[static_cast<int>(m)]);
  }
  // Operations.
  RenderOps(s, w);
  // Eviction, rewarm, hits.
  w.Head(kEvictOps);
  w.Sample(kEvictOps.name, "", s.store.evicted_objects);
  if (s.per_rank) w.Sample(kEvictOps.name, RankLabel(s.rank), s.store.evicted_objects);
  w.One(kEvictRunning, s.store.evicting ? 1 : 0);
  w.One(kFlushBlobs, s.tiers.flush_blobs);
  w.One(kFlushBytes, s.tiers.flush_bytes);
  w.One(kHitsDram, s.store.get_hits_dram);
  w.One(kHitsSsd, s.tiers.get_hits_ssd);
  w.One(kRewarm, s.tiers.rewarm);
  w.One(kRewarmFailed, s.tiers.rewarm_failed);
  w.One(kRewarmBytes, s.tiers.rewarm_bytes);
  w.One(kRewarmBytesCurrent, s.tiers.rewarm_bytes_current);
  w.One(kStoredKeys, s.store.objects);
  // KV events.
  const events::PublisherStats& e = s.events;
  w.One(kEvPublished, e.published_events);
  w.Head(kEvByType);
  static constexpr const char* kTypes[3] = {"stored", "removed", "cleared"};
  for (int i = 0; i < 3; ++i) {
    w.Sample(kEvByType.name, Label("type", kTypes[i]), e.published_by_type[i]);
  }
  w.Head(kEvByMedium);
  static constexpr const char* kMedia[4] = {"hbm", "dram", "ssd", "unknown"};
  for (int i = 0; i < 4; ++i) {
    w.Sample(kEvByMedium.name, Label("medium", kMedia[i]), e.published_by_medium[i]);
  }
  w.One(kEvDropped, e.dropped_events);
  w.One(kEvDroppedStored, e.dropped_stored_events);
  w.One(kEvDroppedHigh, e.dropped_high_priority_events);
  w.One(kEvSkippedUnparsed, e.skipped_unparsed_keys);
  w.One(kEvQueueSize, e.queue_size);
  w.One(kEvQueueCapacity, s.events_queue_capacity);
  w.One(kEvActive, e.publisher_active ? 1 : 0);
  w.One(kEvLastSeq, e.last_sequence);
  // Client metrics.
  RenderClients(s, w);
  // Extensions.
  w.Head(kDramFragmentation);
  w.SampleF(kDramFragmentation.name, "", s.store.dram.fragmentation);
  w.One(kDramLargestFree, s.store.dram.largest_free);
  w.One(kDramFreeRanges, s.store.dram.free_ranges);
  w.One(kDramRequested, s.store.dram.requested);
  if (const TierStats& t = s.store.tier; t.enabled) {
    w.Head(kSsdInfo);
    w.Sample(kSsdInfo.name,
             Label("engine", t.engine) + "," + Label("direct", t.direct ? "true" : "false"), 1);
    w.One(kSsdObjects, t.ssd_objects);
    w.One(kSsdDemoted, t.demoted);
    w.One(kSsdFlushFailed, t.flush_failed);
    w.One(kSsdEvicted, t.ssd_evicted_objects);
    w.One(kSsdEvictedBytes, t.ssd_evicted_bytes);
    w.One(kSsdIoErrors, t.io_errors);
    w.One(kSsdCorrupt, t.corrupt_blobs);
    w.One(kSsdRecovered, t.recovered.blobs);
    w.One(kSsdRecoveryCorrupt, t.recovered.corrupt);
    w.One(kSsdPrefetch, t.prefetch_scheduled);
    w.One(kSsdPaused, t.writes_paused ? 1 : 0);
    w.One(kSsdPauses, t.write_pauses);
  }
  if (s.ssd_configured) w.One(kSsdUnavailable, s.store.tier.enabled ? 0 : 1);
  const ServerStats& sv = s.server;
  w.One(kSrvConns, sv.connections_current);
  w.One(kSrvWorking, sv.connections_working);
  w.One(kSrvAccepted, sv.connections_total);
  w.One(kSrvRefused, sv.connections_refused);
  w.One(kSrvShed, sv.connections_shed);
  w.One(kSrvHandshake, sv.handshake_timeouts);
  w.One(kSrvProtocol, sv.protocol_errors);
  w.One(kSrvRequests, sv.requests);
  w.ByLabel(kSrvWaits, "how",
            {{"polled", sv.request_waits[static_cast<int>(RequestWait::kPolled)]},
             {"paced", sv.request_waits[static_cast<int>(RequestWait::kPaced)]},
             {"slept", sv.request_waits[static_cast<int>(RequestWait::kSlept)]}});
  w.One(kSrvWorkers, sv.worker_threads);
  w.One(kRepRanks, s.client_reports.ranks);
  w.One(kRepRefused, s.client_reports.refused_reports);
  w.One(kRepInvalid, s.client_reports.rejected_reports);
  w.One(kHttpConns, s.http.connections);
  w.One(kHttpAccepted, s.http.accepted);
  w.One(kHttpShed, s.http.shed);
  w.One(kHttpRefused, s.http.refused);
  w.One(kHttpTimeouts, s.http.request_timeouts);
  w.One(kHttpRequests, s.http.requests);
  if (s.cluster_enabled) {
    const ClusterStats& c = s.cluster;
    w.One(kClMembers, c.members);
    w.One(kClRegistered, c.registered && !c.fenced && c.validity_seconds > 0);
    w.One(kClFenced, c.fenced);
    const bool valid = c.registered && !c.fenced && c.validity_seconds > 0;
    w.ByLabel(kClState, "state",
              {{"starting", !c.registered && !c.fenced},
               {"registered", valid},
               {"unknown", c.registered && !c.fenced && !valid},
               {"fenced", c.fenced}});
    w.One(kClFences, c.fences);
    w.One(kClRejoins, c.rejoins);
    w.One(kClLastRejoin, static_cast<uint64_t>(c.last_rejoin_unix_ms / 1000));
    w.Head(kClValidity);
    w.SampleF(kClValidity.name, "", c.validity_seconds);
    w.One(kClCoordinator, c.coordinator);
    w.One(kClCoordChanges, c.coordinator_changes);
    w.One(kClRenewFailures, c.lease_renew_failures);
    w.ByLabel(kClEtcdErrors, "kind",
              {{"unavailable", c.etcd_unavailable},
               {"timeout", c.etcd_timeouts},
               {"refused", c.etcd_refused}});
    w.One(kClEtcdFailovers, c.etcd_failovers);
    w.ByLabel(kClWatch, "kind",
              {{"reconnect", c.watch_reconnects},
               {"compacted", c.watch_compactions},
               {"resync", c.watch_resyncs}});
    const CoverageView& v = s.coverage;
    w.ByLabel(kIxViews, "state",
              {{"complete", v.complete},
               {"staging", v.staging},
               {"partial", v.partial},
               {"missing", v.missing}});
    w.One(kIxEntries, v.entries);
    w.One(kIxBytes, v.index_bytes);
    w.One(kIxBudget, v.index_budget);
    w.One(kIxInstalls, v.installs);
    w.One(kIxResets, v.resets);
    w.ByLabel(kIxRefused, "reason", {{"budget", v.refused_budget}, {"invalid", v.rejected_views}});
    w.ByLabel(kInvFrames, "direction", {{"in", v.frames_in}, {"out", v.frames_out}});
    w.ByLabel(kInvBytes, "direction", {{"in", v.bytes_in}, {"out", v.bytes_out}});
    w.One(kInvOwnerStreams, v.streams_out);
    w.One(kInvDeltaBuffer, v.delta_buffer_bytes);
    w.One(kInvSnapshots, v.snapshots_out);
    w.One(kInvResetsSent, v.resets_out);
    w.One(kInvReplaced, v.replaced_out);
    w.One(kInvRefused, v.refused_out);
    w.One(kInvFailures, v.stream_failures);
    w.One(kInvStalls, v.stalls);
    RenderTransfer(w, s.transfer);
    RenderDrain(w, s.drain);
  }
  return w.Take();
}

std::string RenderSummary(const MetricsSnapshot& s) {
  std::string out;
  auto field = [&out](const std::string& k, const std::string& v) {
    if (!out.empty()) out += ' ';
    out += k + "=" + v;
  };
  auto num = [&](const std::string& k, uint64_t v) { field(k, std::to_string(v)); };
  auto cap = [&](const std::string& k, Medium m) {
    const int i = static_cast<int>(m);
    field(k, std::to_string(s.medium_used[i]) + "/" + std::to_string(s.medium_total[i]));
  };
  num("keys", s.store.objects);
  num("evict", s.store.evicted_objects);
  num("rewarm", s.tiers.rewarm);
  num("rewarm_fail", s.tiers.rewarm_failed);
  num("rewarm_bytes_total", s.tiers.rewarm_bytes);
  num("rewarm_bytes_current", s.tiers.rewarm_bytes_current);
  num("flush_blobs", s.tiers.flush_blobs);
  num("flush_bytes", s.tiers.flush_bytes);
  num("get_hit_dram", s.store.get_hits_dram);
  num("get_hit_ssd", s.tiers.get_hits_ssd);
  cap("hbm_used", Medium::kHbm);
  cap("dram_used", Medium::kDram);
  cap("ssd_used", Medium::kSsd);
  for (int i = 0; i < kOpCount; ++i) {
    const Op op = static_cast<Op>(i);
    const OpCounts c = s.ops->Get(op);
    const std::string n(OpName(op));
    num(n + "_req", c.requests);
    num(n + "_success", c.success);
    num(n + "_fail", c.failure);
    if (HasNotFound(op)) num(n + "_not_found", c.not_found);
  }
  if (s.per_rank) {
    // Hits are attributed to the client rank that asked; eviction and tier
    // movement to this manager's own rank.
    std::vector<uint32_t> ranks = s.ranks;
    if (std::find(ranks.begin(), ranks.end(), s.rank) == ranks.end()) ranks.push_back(s.rank);
    std::sort(ranks.begin(), ranks.end());
    auto own = [&](uint32_t r, uint64_t v) { return r == s.rank ? v : 0; };
    const std::pair<const char*, std::function<uint64_t(uint32_t)>> fields[] = {
        {"evict_by_rank_", [&](uint32_t r) { return own(r, s.store.evicted_objects); }},
        {"get_hit_dram_by_rank_",
         [&](uint32_t r) { return s.ops->GetForRank(Op::kGet, r).success; }},
        {"get_hit_ssd_by_rank_", [&](uint32_t r) { return own(r, s.tiers.get_hits_ssd); }},
        {"rewarm_by_rank_", [&](uint32_t r) { return own(r, s.tiers.rewarm); }},
        {"rewarm_fail_by_rank_", [&](uint32_t r) { return own(r, s.tiers.rewarm_failed); }},
        {"rewarm_bytes_by_rank_", [&](uint32_t r) { return own(r, s.tiers.rewarm_bytes); }},
        {"rewarm_bytes_current_by_rank_",
         [&](uint32_t r) { return own(r, s.tiers.rewarm_bytes_current); }},
        {"flush_blobs_by_rank_", [&](uint32_t r) { return own(r, s.tiers.flush_blobs); }},
        {"flush_bytes_by_rank_", [&](uint32_t r) { return own(r, s.tiers.flush_bytes); }},
    };
    for (const auto& [base, value] : fields) {
      for (uint32_t r : ranks) num(base + std::to_string(r), value(r));
    }
  }
  return out;
}

}  // namespace tierkv
