// The Prometheus exposition (/metrics) and the one-line summary
// (/metrics/summary) of the REST contract, rendered from one snapshot.
//
// The contract's families (memcache_*), their types, help texts and labels
// live in one table in metrics_text.cc, in the contract's group order:
// capacity -> operations -> eviction / rewarm / hits -> stored_keys -> KV
// events -> client metrics. The families beyond the contract (tierkv_*) come
// after them, each reported by the component that counts it (MetricSink).
//
// Thread-safety: pure functions of their input.
#ifndef TIERKV_HTTP_METRICS_TEXT_H_
#define TIERKV_HTTP_METRICS_TEXT_H_

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "common/metric_sink.h"
#include "events/publisher.h"
#include "server/client_metrics.h"
#include "store/op_stats.h"
#include "store/store.h"
#include "tierkv/types.h"

namespace tierkv {

struct SegmentInfo {
  std::string name;  // rank-<rank>-<medium>
  Medium medium = Medium::kDram;
  uint64_t total_bytes = 0;
  uint64_t used_bytes = 0;
};

// Tier movement counters (SSD flush and rewarm); zero without an SSD tier.
struct TierCounters {
  uint64_t flush_blobs = 0, flush_bytes = 0;
  uint64_t rewarm = 0, rewarm_failed = 0, rewarm_bytes = 0, rewarm_bytes_current = 0;
  uint64_t get_hits_ssd = 0;
};

struct MetricsSnapshot {
  uint32_t rank = 0;      // this manager's rank
  bool per_rank = false;  // also emit per-rank series / summary fields
  std::vector<SegmentInfo> segments;
  std::array<uint64_t, kMediumCount> medium_total{};  // by Medium
  std::array<uint64_t, kMediumCount> medium_used{};
  const OpStats* ops = nullptr;
  std::vector<uint32_t> ranks;  // client ranks seen (per-rank series)
  StoreStats store;
  bool ssd_configured = false;  // --ssd-dir given (store.tier.enabled: it started)
  std::string ssd_error;        // why a configured SSD tier did not start
  TierCounters tiers;
  bool events_enabled = false;
  events::PublisherStats events;
  uint64_t events_queue_capacity = 0;  // configured, also when disabled
  std::vector<RankMetricView> clients;
  // The components' own families, after the contract's and the store's, in
  // this order (the server, the REST gate, and in cluster mode the cluster's).
  std::vector<MetricReporter> components;
};

// text/plain; version=0.0.4
std::string RenderPrometheus(const MetricsSnapshot& s);
// One line, fixed field order, no trailing newline.
std::string RenderSummary(const MetricsSnapshot& s);

}  // namespace tierkv

#endif  // TIERKV_HTTP_METRICS_TEXT_H_
