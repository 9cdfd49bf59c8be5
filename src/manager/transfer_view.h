// TransferView: the remote read path's counters for /metrics: the requester's
// fetcher, the owner's grants and its data channel.
//
// Thread-safety: thread-safe (everything it reads is).
#ifndef TIERKV_MANAGER_TRANSFER_VIEW_H_
#define TIERKV_MANAGER_TRANSFER_VIEW_H_

#include "cluster/fetcher.h"
#include "cluster/grants.h"
#include "cluster/ha_state.h"
#include "transfer/data_server.h"

namespace tierkv {

class TransferView final : public TransferStatsProvider {
 public:
  TransferView(const RemoteFetcher* fetcher, const GrantTable* grants,
               const transfer::DataServer* data)
      : fetcher_(fetcher), grants_(grants), data_(data) {}
  TransferStats Transfer() const override;

 private:
  const RemoteFetcher* const fetcher_;
  const GrantTable* const grants_;
  const transfer::DataServer* const data_;
};

}  // namespace tierkv

#endif  // TIERKV_MANAGER_TRANSFER_VIEW_H_
