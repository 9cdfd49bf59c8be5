// Helpers of the peer gRPC plane, for the cluster box's .cc files only (it
// includes gRPC): the channel a manager opens to a peer, and the mapping
// between tierkv statuses and gRPC statuses on that plane.
#ifndef TIERKV_CLUSTER_PEER_RPC_H_
#define TIERKV_CLUSTER_PEER_RPC_H_

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "cluster/peer_credentials.h"
#include "peer.pb.h"
#include "tierkv/status.h"

namespace tierkv {

struct PeerCredentials {
  std::shared_ptr<grpc::ChannelCredentials> channel;
  std::shared_ptr<grpc::ServerCredentials> server;
  // The transport seam: when set, PeerChannel asks it for the channel to an
  // endpoint (in-process channels in the scaling benchmark) instead of dialing.
  std::function<std::shared_ptr<grpc::Channel>(const std::string&)> dial;
};

class PeerServer;
// An in-process channel to a started PeerServer (no socket).
std::shared_ptr<grpc::Channel> InProcessChannel(PeerServer& server);

// A channel to a peer's --addr (its advertised endpoint); `creds` null: plaintext.
std::shared_ptr<grpc::Channel> PeerChannel(const std::string& endpoint,
                                           const PeerCredentials* creds);
// The peer gRPC server's credentials (plaintext for null).
std::shared_ptr<grpc::ServerCredentials> PeerServerCredentials(const PeerCredentials* creds);

// A per-item status on the peer API (peer.GrantedItem: code and message).
void SetItemStatus(peer::GrantedItem* item, const Status& st);
Status ItemStatus(const peer::GrantedItem& item);  // an unknown code is INTERNAL

// The deadline of a peer call `ms` from now.
inline std::chrono::system_clock::time_point PeerDeadline(int64_t ms) {
  return std::chrono::system_clock::now() + std::chrono::milliseconds(ms);
}

// NOT_FOUND, INVALID_ARGUMENT, NO_SPACE (RESOURCE_EXHAUSTED) and UNAVAILABLE
// keep their meaning; every other failure is INTERNAL.
grpc::Status ToGrpc(const Status& st);
// The reverse; a failure without an answer (UNAVAILABLE, DEADLINE_EXCEEDED,
// CANCELLED, ...) is UNAVAILABLE.
Status FromGrpc(const grpc::Status& st);

}  // namespace tierkv

#endif  // TIERKV_CLUSTER_PEER_RPC_H_
