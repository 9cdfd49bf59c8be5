// The data channel's owner-side families for /metrics.
#include "transfer/data_server.h"

namespace tierkv::transfer {
namespace {

constexpr MetricFamily kConns{"tierkv_data_connections", "gauge", "Open data channel connections"};
constexpr MetricFamily kConnsTotal{"tierkv_data_connections_total", "counter",
                                   "Data channel connections, by result"};
constexpr MetricFamily kReads{"tierkv_data_reads_total", "counter",
                              "READs on the data channel, by result"};
constexpr MetricFamily kBytes{"tierkv_data_bytes_sent_total", "counter",
                              "Object bytes sent on the data channel"};
constexpr MetricFamily kReused{"tierkv_data_checksums_reused_total", "counter",
                               "READs answered with the kept checksum of their bytes, unhashed"};
constexpr MetricFamily kDecided{"tierkv_data_authorizations_decided_total", "counter",
                                "AUTHORIZEs on the data channel, by where they were decided"};

}  // namespace

void DataServer::ReportMetrics(MetricSink& sink) const {
  const DataServerStats d = Stats();
  sink.One(kConns, d.connections);
  sink.ByLabel(kConnsTotal, "result",
               {{"accepted", d.connections_total}, {"refused", d.refused}, {"shed", d.shed}});
  sink.ByLabel(kReads, "result", {{"sent", d.reads}, {"refused", d.refusals}});
  sink.One(kBytes, d.bytes_out);
  sink.One(kReused, d.checksums_reused);
  sink.ByLabel(kDecided, "where", {{"event_loop", d.decided_at_once}, {"pool", d.decided_on_pool}});
}

}  // namespace tierkv::transfer
