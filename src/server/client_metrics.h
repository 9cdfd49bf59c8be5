// ClientMetrics: what clients report about their own batch transfers
// (bandwidth windows and call latencies per operation), kept per client rank
// for the REST contract's memcache_bandwidth_* and memcache_metric_stale series.
//
// A rank's view is the latest report of any client of that rank. It is stale
// when no report came for `stale_after_ms`, and forgotten after `forget_after_ms`.
//
// Thread-safety: all methods are thread-safe.
#ifndef TIERKV_SERVER_CLIENT_METRICS_H_
#define TIERKV_SERVER_CLIENT_METRICS_H_

#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <vector>

#include "protocol/messages.h"

namespace tierkv {

struct RankMetricView {
  uint32_t rank = 0;
  bool stale = false;
  std::array<proto::OpWindow, 3> ops{};  // batch_put, batch_get, batch_exist
  std::array<bool, 3> present{};
};

class ClientMetrics {
 public:
  explicit ClientMetrics(int64_t stale_after_ms = 10000, int64_t forget_after_ms = 300000)
      : stale_after_ms_(stale_after_ms), forget_after_ms_(forget_after_ms) {}

  void Report(const proto::ReportMetricsRequest& report, int64_t now_ms);
  // Views by rank (ascending), dropping forgotten ones.
  std::vector<RankMetricView> Snapshot(int64_t now_ms);

 private:
  struct Entry {
    RankMetricView view;
    int64_t last_ms = 0;
  };
  const int64_t stale_after_ms_;
  const int64_t forget_after_ms_;
  std::mutex mu_;
  std::map<uint32_t, Entry> ranks_;
};

}  // namespace tierkv

#endif  // TIERKV_SERVER_CLIENT_METRICS_H_
