// The client listener's families for /metrics: connections, requests and
// the client-reported metrics' bookkeeping (the reported values themselves
// are contract families, rendered by http/metrics_text.cc).
#include "common/metric_sink.h"
#include "server/client_metrics.h"
#include "server/server.h"

namespace tierkv {
namespace {

constexpr MetricFamily kConns{"tierkv_server_connections", "gauge",
                              "Client connections open now, working or idle"};
constexpr MetricFamily kWorking{"tierkv_server_connections_working", "gauge",
                                "Client connections being served by a worker thread now"};
constexpr MetricFamily kAccepted{"tierkv_server_connections_accepted_total", "counter",
                                 "Client connections accepted"};
constexpr MetricFamily kRefused{"tierkv_server_connections_refused_total", "counter",
                                "Client connections refused: max-open-connections, all working"};
constexpr MetricFamily kShed{"tierkv_server_connections_shed_total", "counter",
                             "Idle client connections closed to make room for a new one"};
constexpr MetricFamily kHandshake{"tierkv_server_handshake_timeouts_total", "counter",
                                  "Client connections closed for not completing HELLO in time"};
constexpr MetricFamily kProtocol{"tierkv_server_protocol_errors_total", "counter",
                                 "Client connections closed for an unusable byte stream"};
constexpr MetricFamily kRequests{"tierkv_server_requests_total", "counter",
                                 "Client requests received"};
constexpr MetricFamily kWaits{"tierkv_server_request_waits_total", "counter",
                              "Client requests by how their session awaited them: busy-polling, "
                              "paced (asleep until shortly before it was due, then polling) "
                              "or asleep"};
constexpr MetricFamily kWorkers{"tierkv_server_worker_threads", "gauge",
                                "Worker threads serving client connections"};
constexpr MetricFamily kReportRanks{"tierkv_client_metric_ranks", "gauge",
                                    "Client ranks whose reported transfer metrics are kept"};
constexpr MetricFamily kReportsRefused{"tierkv_client_metric_reports_refused_total", "counter",
                                       "Client metric reports refused over max-metric-ranks"};
constexpr MetricFamily kReportsInvalid{
    "tierkv_client_metric_reports_invalid_total", "counter",
    "Client metric reports refused for non-finite or negative values"};

}  // namespace

void Server::ReportMetrics(MetricSink& sink) const {
  const ServerStats s = Stats();
  sink.One(kConns, s.connections_current);
  sink.One(kWorking, s.connections_working);
  sink.One(kAccepted, s.connections_total);
  sink.One(kRefused, s.connections_refused);
  sink.One(kShed, s.connections_shed);
  sink.One(kHandshake, s.handshake_timeouts);
  sink.One(kProtocol, s.protocol_errors);
  sink.One(kRequests, s.requests);
  const auto waits = [&s](RequestWait how) { return s.request_waits[static_cast<int>(how)]; };
  sink.ByLabel(kWaits, "how",
               {{"polled", waits(RequestWait::kPolled)},
                {"paced", waits(RequestWait::kPaced)},
                {"slept", waits(RequestWait::kSlept)}});
  sink.One(kWorkers, s.worker_threads);
  client_metrics_.ReportMetrics(sink);
  registered_.ReportMetrics(sink);
}

void ClientMetrics::ReportMetrics(MetricSink& sink) const {
  const ClientMetricsStats s = Stats();
  sink.One(kReportRanks, s.ranks);
  sink.One(kReportsRefused, s.refused_reports);
  sink.One(kReportsInvalid, s.rejected_reports);
}

}  // namespace tierkv
