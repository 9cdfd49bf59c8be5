#include "server/client_metrics.h"

#include <cmath>
#include <string>

namespace tierkv {
namespace {

bool Valid(double v) { return std::isfinite(v) && v >= 0; }

bool Valid(const proto::OpWindow& o) {
  return Valid(o.bytes_per_sec) && Valid(o.p50_s) && Valid(o.p90_s) && Valid(o.p99_s) &&
         Valid(o.avg_s);
}

}  // namespace

Status ClientMetrics::Report(uint64_t session, const proto::ReportMetricsRequest& report,
                             int64_t now_ms) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const proto::OpWindow& o : report.ops) {
    if (!Valid(o)) {
      ++rejected_;
      return InvalidArgument("report_metrics: rates and latencies must be finite and >= 0");
    }
  }
  auto it = ranks_.find(report.rank);
  if (it == ranks_.end()) {
    if (ranks_.size() >= max_ranks_) {
      ++refused_;
      return Status(Code::kNoSpace, "report_metrics: " + std::to_string(max_ranks_) +
                                        " client ranks are reporting already (max-metric-ranks)");
    }
    it = ranks_.emplace(report.rank, Entry{}).first;
  }
  Entry& e = it->second;
  e.view.rank = report.rank;
  for (const proto::OpWindow& o : report.ops) {
    e.view.ops[o.op] = o;
    e.view.present[o.op] = true;
  }
  e.last_ms = now_ms;
  e.sessions.insert(session);
  by_session_[session].insert(report.rank);
  return Status::Ok();
}

void ClientMetrics::EndSession(uint64_t session) {
  std::lock_guard<std::mutex> lock(mu_);
  auto s = by_session_.find(session);
  if (s == by_session_.end()) return;
  for (uint32_t rank : s->second) {
    auto it = ranks_.find(rank);
    if (it == ranks_.end()) continue;
    it->second.sessions.erase(session);
    if (it->second.sessions.empty()) ranks_.erase(it);
  }
  by_session_.erase(s);
}

std::vector<RankMetricView> ClientMetrics::Snapshot(int64_t now_ms) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<RankMetricView> out;
  out.reserve(ranks_.size());
  for (const auto& [rank, e] : ranks_) {
    RankMetricView v = e.view;
    v.stale = now_ms - e.last_ms > stale_after_ms_;
    out.push_back(v);
  }
  return out;
}

ClientMetricsStats ClientMetrics::Stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return {ranks_.size(), refused_, rejected_};
}

}  // namespace tierkv
