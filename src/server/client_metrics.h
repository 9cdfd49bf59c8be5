// ClientMetrics: what clients report about their own batch transfers
// (bandwidth windows and call latencies per operation), kept per client rank
// for the REST contract's memcache_bandwidth_* and memcache_metric_stale series.
//
// A rank's view is the latest report of any client of that rank. It is stale
// when no report came for `stale_after_ms`, and it is dropped as soon as no live
// session has reported it (EndSession of the last one), so the series of a
// client that went away disappear with it.
//
// Bounded: at most `max_ranks` ranks are tracked at once; a report for a new
// rank beyond that is refused (NO_SPACE) and counted, and what is tracked is
// left as it is. Values must be finite and not negative (INVALID_ARGUMENT).
//
// Thread-safety: all methods are thread-safe.
#ifndef TIERKV_SERVER_CLIENT_METRICS_H_
#define TIERKV_SERVER_CLIENT_METRICS_H_

#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <set>
#include <unordered_map>
#include <vector>

#include "common/metric_sink.h"
#include "protocol/messages.h"
#include "tierkv/status.h"

namespace tierkv {

struct RankMetricView {
  uint32_t rank = 0;
  bool stale = false;
  std::array<proto::OpWindow, 3> ops{};  // batch_put, batch_get, batch_exist
  std::array<bool, 3> present{};
};

struct ClientMetricsStats {
  uint64_t ranks = 0;             // tracked now
  uint64_t refused_reports = 0;   // over max_ranks
  uint64_t rejected_reports = 0;  // non-finite or negative values
};

class ClientMetrics {
 public:
  explicit ClientMetrics(size_t max_ranks = 1024, int64_t stale_after_ms = 10000)
      : max_ranks_(max_ranks), stale_after_ms_(stale_after_ms) {}

  // Records `report` made by `session`. Errors: INVALID_ARGUMENT (a value is
  // NaN, infinite or negative), NO_SPACE (a new rank while max_ranks are tracked).
  Status Report(uint64_t session, const proto::ReportMetricsRequest& report, int64_t now_ms);
  // The session is gone: ranks no other live session reported are dropped.
  void EndSession(uint64_t session);
  // Views by rank (ascending).
  std::vector<RankMetricView> Snapshot(int64_t now_ms) const;
  ClientMetricsStats Stats() const;
  // Reports the tierkv_client_metric_* families (server_metrics.cc).
  void ReportMetrics(MetricSink& sink) const;

 private:
  struct Entry {
    RankMetricView view;
    int64_t last_ms = 0;
    std::set<uint64_t> sessions;  // live sessions that reported this rank
  };
  const size_t max_ranks_;
  const int64_t stale_after_ms_;
  mutable std::mutex mu_;
  std::map<uint32_t, Entry> ranks_;
  std::unordered_map<uint64_t, std::set<uint32_t>> by_session_;
  uint64_t refused_ = 0;
  uint64_t rejected_ = 0;
};

}  // namespace tierkv

#endif  // TIERKV_SERVER_CLIENT_METRICS_H_
