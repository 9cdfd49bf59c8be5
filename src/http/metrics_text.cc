#include "http/metrics_text.h"

#include <algorithm>
#include <cstdio>
#include <functional>
#include <initializer_list>
#include <utility>

#include "store/store_metrics.h"

namespace tierkv {
namespace {

// The contract's families that are not per-operation, in output order.
using Family = MetricFamily;

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
// Beyond the contract, the REST server's own: a configured SSD tier that
// did not start.
constexpr Family kSsdUnavailable{"tierkv_ssd_unavailable", "gauge",
                                 "1 when an SSD tier is configured but could not start (the "
                                 "manager serves from DRAM alone; /health gives the reason)"};

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

std::string RankLabel(uint32_t r) { return MetricLabel("rank", std::to_string(r)); }

// Medium labels of the capacity families: hbm and dram always, ssd only when
// it has capacity or usage (the contract's omission rule).
std::vector<Medium> CapacityMedia(const MetricsSnapshot& s) {
  std::vector<Medium> out = {Medium::kHbm, Medium::kDram};
  const int ssd = static_cast<int>(Medium::kSsd);
  if (s.medium_total[ssd] != 0 || s.medium_used[ssd] != 0) out.push_back(Medium::kSsd);
  return out;
}

void RenderOps(const MetricsSnapshot& s, MetricSink& w) {
  static constexpr const char* kKinds[4] = {"requests", "successes", "failures", "not_found"};
  static constexpr const char* kHelp[4] = {"requests", "successes", "failures",
                                           "not found results"};
  for (int i = 0; i < kOpCount; ++i) {
    const Op op = static_cast<Op>(i);
    const OpCounts total = s.ops->Get(op);
    for (int k = 0; k < 4; ++k) {
      if (k == 3 && !HasNotFound(op)) continue;
      const std::string name = "memcache_" + std::string(OpName(op)) + "_" + kKinds[k] + "_total";
      w.Family(name, "counter", std::string("Total number of ") + kOpDisplay[i] + " " + kHelp[k]);
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

void RenderClients(const MetricsSnapshot& s, MetricSink& w) {
  if (s.clients.empty()) return;  // only while some client rank is online
  w.Family(kStale);
  for (const auto& c : s.clients) w.Sample(kStale.name, RankLabel(c.rank), c.stale ? 1 : 0);
  auto per_op = [&](const Family& f, int ops, auto value) {
    w.Family(f);
    for (const auto& c : s.clients) {
      for (int o = 0; o < ops; ++o) {
        if (!c.present[o]) continue;
        w.SampleDouble(f.name, RankLabel(c.rank) + "," + MetricLabel("operation", kClientOps[o]),
                       value(c.ops[o]));
      }
    }
  };
  per_op(kBwBytes, 2, [](const proto::OpWindow& o) { return double(o.window_bytes); });
  per_op(kBwDuration, 3, [](const proto::OpWindow& o) { return double(o.window_duration_ms); });
  per_op(kBwBytesCum, 2, [](const proto::OpWindow& o) { return double(o.cum_bytes); });
  per_op(kBwDurationCum, 3, [](const proto::OpWindow& o) { return double(o.cum_duration_ms); });
  w.Family(kBwLatency);
  for (const auto& c : s.clients) {
    for (int o = 0; o < 3; ++o) {
      if (!c.present[o]) continue;
      const proto::OpWindow& op = c.ops[o];
      const std::pair<const char*, double> q[] = {
          {"P50", op.p50_s}, {"P90", op.p90_s}, {"P99", op.p99_s}, {"Avg", op.avg_s}};
      for (const auto& [name, v] : q) {
        w.SampleDouble(kBwLatency.name,
                       RankLabel(c.rank) + "," + MetricLabel("operation", kClientOps[o]) + "," +
                           MetricLabel("quantile", name),
                       v);
      }
    }
  }
  per_op(kBwRate, 2, [](const proto::OpWindow& o) { return o.bytes_per_sec; });
  // UBS IO: no such devices here; the rank-level series are 0 and the per-disk
  // families have no disks to report.
  for (const Family* f :
       {&kUbsDiskCap, &kUbsDiskUsed, &kUbsMemCap, &kUbsMemUsed, &kUbsDiskNum, &kUbsFaultNum}) {
    w.Family(*f);
    for (const auto& c : s.clients) w.Sample(f->name, RankLabel(c.rank), 0);
  }
  for (const Family& f : kUbsPerDisk) w.Family(f);
}

}  // namespace

std::string RenderPrometheus(const MetricsSnapshot& s) {
  PrometheusText w;
  // Capacity.
  w.Family(kSegmentCapacity);
  for (const auto& seg : s.segments) {
    w.Sample(kSegmentCapacity.name, MetricLabel("segment", seg.name), seg.total_bytes);
  }
  w.Family(kSegmentAllocated);
  for (const auto& seg : s.segments) {
    w.Sample(kSegmentAllocated.name, MetricLabel("segment", seg.name), seg.used_bytes);
  }
  const std::vector<Medium> media = CapacityMedia(s);
  w.Family(kTotalCapacity);
  for (Medium m : media) {
    w.Sample(kTotalCapacity.name, MetricLabel("medium", std::string(MediumName(m))),
             s.medium_total[static_cast<int>(m)]);
  }
  w.Family(kAllocated);
  for (Medium m : media) {
    w.Sample(kAllocated.name, MetricLabel("medium", std::string(MediumName(m))),
             s.medium_used[static_cast<int>(m)]);
  }
  // Operations.
  RenderOps(s, w);
  // Eviction, rewarm, hits.
  w.Family(kEvictOps);
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
  w.Family(kEvByType);
  static constexpr const char* kTypes[3] = {"stored", "removed", "cleared"};
  for (int i = 0; i < 3; ++i) {
    w.Sample(kEvByType.name, MetricLabel("type", kTypes[i]), e.published_by_type[i]);
  }
  w.Family(kEvByMedium);
  static constexpr const char* kMedia[4] = {"hbm", "dram", "ssd", "unknown"};
  for (int i = 0; i < 4; ++i) {
    w.Sample(kEvByMedium.name, MetricLabel("medium", kMedia[i]), e.published_by_medium[i]);
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
  // Beyond the contract: the store's own families, then the components'.
  ReportStoreMetrics(s.store, w);
  if (s.ssd_configured) w.One(kSsdUnavailable, s.store.tier.enabled ? 0 : 1);
  for (const MetricReporter& report : s.components) report(w);
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
