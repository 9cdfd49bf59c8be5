// TransferView: the remote read path's counters for /metrics: the requester's
// fetcher, the owner's grants and its data channel.
//
// Thread-safety: thread-safe (everything it reads is).
#ifndef TIERKV_MANAGER_TRANSFER_VIEW_H_
#define TIERKV_MANAGER_TRANSFER_VIEW_H_

#include <atomic>

#include "cluster/fetcher.h"
#include "cluster/grants.h"
#include "cluster/peer_server.h"
#include "http/ports/cluster.h"
#include "transfer/data_server.h"

namespace tierkv {

class TransferView final : public RemoteReadStatsProvider {
 public:
  TransferView(const RemoteFetcher* fetcher, const GrantTable* grants,
               const transfer::DataServer* data)
      : fetcher_(fetcher), grants_(grants), data_(data) {}
  RemoteReadStats Transfer() const override;
  // The peer port's gate counters come from `peer` from now on (it must
  // outlive this view, or be unset first with nullptr).
  void SetPeer(const PeerServer* peer) { peer_.store(peer); }

 private:
  std::atomic<const PeerServer*> peer_{nullptr};
  const RemoteFetcher* const fetcher_;
  const GrantTable* const grants_;
  const transfer::DataServer* const data_;
};

}  // namespace tierkv

#endif  // TIERKV_MANAGER_TRANSFER_VIEW_H_
