// TransferView: the remote read path's families for /metrics, in one place
// for the REST server: the requester's fetcher, the owner's grants, its peer
// port's gate and its data channel, each reporting its own.
//
// Thread-safety: thread-safe (everything it reads is).
#ifndef TIERKV_MANAGER_TRANSFER_VIEW_H_
#define TIERKV_MANAGER_TRANSFER_VIEW_H_

#include <atomic>

#include "cluster/fetcher.h"
#include "cluster/grants.h"
#include "cluster/peer_server.h"
#include "common/metric_sink.h"
#include "transfer/data_server.h"

namespace tierkv {

class TransferView final : public MetricSource {
 public:
  TransferView(const RemoteFetcher* fetcher, const GrantTable* grants,
               const transfer::DataServer* data)
      : fetcher_(fetcher), grants_(grants), data_(data) {}
  void ReportMetrics(MetricSink& sink) const override;
  // The peer port's gate counters come from `peer` from now on (it must
  // outlive this view, or be unset first with nullptr); zeros until then.
  void SetPeer(const PeerServer* peer) { peer_.store(peer); }

 private:
  std::atomic<const PeerServer*> peer_{nullptr};
  const RemoteFetcher* const fetcher_;
  const GrantTable* const grants_;
  const transfer::DataServer* const data_;
};

}  // namespace tierkv

#endif  // TIERKV_MANAGER_TRANSFER_VIEW_H_
