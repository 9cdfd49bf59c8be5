#include "server/client_metrics.h"

namespace tierkv {

void ClientMetrics::Report(const proto::ReportMetricsRequest& report, int64_t now_ms) {
  std::lock_guard<std::mutex> lock(mu_);
  Entry& e = ranks_[report.rank];
  e.view.rank = report.rank;
  for (const proto::OpWindow& o : report.ops) {
    e.view.ops[o.op] = o;
    e.view.present[o.op] = true;
  }
  e.last_ms = now_ms;
}

std::vector<RankMetricView> ClientMetrics::Snapshot(int64_t now_ms) {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<RankMetricView> out;
  for (auto it = ranks_.begin(); it != ranks_.end();) {
    const int64_t age = now_ms - it->second.last_ms;
    if (age > forget_after_ms_) {
      it = ranks_.erase(it);
      continue;
    }
    RankMetricView v = it->second.view;
    v.stale = age > stale_after_ms_;
    out.push_back(v);
    ++it;
  }
  return out;
}

}  // namespace tierkv
