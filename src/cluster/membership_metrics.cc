// Membership's families for /metrics: this manager's registration, the
// coordinator election, and the etcd client and watch under them.
#include "cluster/membership.h"

namespace tierkv {
namespace {

constexpr MetricFamily kMembers{"tierkv_cluster_members", "gauge",
                                "Live members in this manager's view of the cluster"};
constexpr MetricFamily kRegistered{
    "tierkv_cluster_registered", "gauge",
    "1 while this manager's registration is valid (remote admission)"};
constexpr MetricFamily kFenced{"tierkv_cluster_fenced", "gauge",
                               "1 while the registration is fenced (local service only until this "
                               "manager joins again as a new incarnation, or restarts)"};
constexpr MetricFamily kState{
    "tierkv_membership_state", "gauge",
    "1 for this manager's membership state: starting, registered (valid), "
    "unknown (registered, validity lapsed, not fenced yet), fenced"};
constexpr MetricFamily kFences{"tierkv_membership_fences_total", "counter",
                               "Registrations fenced since start"};
constexpr MetricFamily kRejoins{
    "tierkv_membership_rejoins_total", "counter",
    "New incarnations registered after a fence (same process, DRAM and SSD kept)"};
constexpr MetricFamily kLastRejoin{
    "tierkv_membership_last_rejoin_timestamp_seconds", "gauge",
    "When this manager last joined again as a new incarnation (0: never)"};
constexpr MetricFamily kValidity{"tierkv_cluster_registration_validity_seconds", "gauge",
                                 "Seconds of registration validity left (0 when not valid)"};
constexpr MetricFamily kCoordinator{"tierkv_cluster_coordinator", "gauge",
                                    "1 while this manager is the elected coordinator"};
constexpr MetricFamily kElections{"tierkv_cluster_coordinator_elections_total", "counter",
                                  "Times this manager was elected coordinator"};
constexpr MetricFamily kRenewFailures{"tierkv_cluster_lease_renew_failures_total", "counter",
                                      "Membership lease keepalive streams that failed"};
constexpr MetricFamily kEtcdErrors{"tierkv_cluster_etcd_errors_total", "counter",
                                   "Failed etcd requests by kind"};
constexpr MetricFamily kEtcdFailovers{"tierkv_cluster_etcd_failovers_total", "counter",
                                      "Moves of the etcd client to another endpoint"};
constexpr MetricFamily kWatch{"tierkv_cluster_watch_events_total", "counter",
                              "Membership watch recoveries by kind"};

}  // namespace

void Membership::ReportMetrics(MetricSink& sink) const {
  uint64_t members = 0;
  {
    std::lock_guard<std::mutex> lock(view_mu_);
    members = members_.size();
  }
  const int64_t now = clock_->NowNanos();
  const bool registered = registered_.load();
  const bool fenced = fenced_.load();
  const double validity = ValidAt(now) ? (valid_until_.load() - now) / 1e9 : 0;
  const bool valid = registered && !fenced && validity > 0;
  sink.One(kMembers, members);
  sink.One(kRegistered, valid);
  sink.One(kFenced, fenced);
  sink.ByLabel(kState, "state",
               {{"starting", !registered && !fenced},
                {"registered", valid},
                {"unknown", registered && !fenced && !valid},
                {"fenced", fenced}});
  sink.One(kFences, fences_.load());
  sink.One(kRejoins, rejoins_.load());
  sink.One(kLastRejoin, static_cast<uint64_t>(last_rejoin_ms_.load() / 1000));
  sink.OneDouble(kValidity, validity);
  sink.One(kCoordinator, elected_.load() && !fenced);
  sink.One(kElections, coordinator_changes_.load());
  sink.One(kRenewFailures, keeper_.renew_failures());
  const etcd::ClientStats c = client_->Stats();
  sink.ByLabel(kEtcdErrors, "kind",
               {{"unavailable", c.unavailable}, {"timeout", c.timeout}, {"refused", c.refused}});
  sink.One(kEtcdFailovers, c.failovers);
  sink.ByLabel(kWatch, "kind",
               {{"reconnect", watcher_.reconnects()},
                {"compacted", watcher_.compactions()},
                {"resync", watcher_.resyncs()}});
}

}  // namespace tierkv
