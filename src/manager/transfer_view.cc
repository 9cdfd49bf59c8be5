#include "manager/transfer_view.h"

namespace tierkv {

void TransferView::ReportMetrics(MetricSink& sink) const {
  fetcher_->ReportMetrics(sink);
  grants_->ReportMetrics(sink);
  const PeerServer* peer = peer_.load();
  PeerGate::ReportMetrics(peer != nullptr ? peer->GateStats() : PeerGateStats{}, sink);
  data_->ReportMetrics(sink);
}

}  // namespace tierkv
