// Helpers of the peer gRPC plane, for the cluster box's .cc files only (it
// includes gRPC): the channel a manager opens to a peer, and the mapping
// between tierkv statuses and gRPC statuses on that plane.
#ifndef TIERKV_CLUSTER_PEER_RPC_H_
#define TIERKV_CLUSTER_PEER_RPC_H_

#include <grpcpp/grpcpp.h>

#include <functional>
#include <memory>
#include <string>

#include "cluster/peer_credentials.h"
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

// NOT_FOUND, INVALID_ARGUMENT, NO_SPACE (RESOURCE_EXHAUSTED) and UNAVAILABLE
// keep their meaning; every other failure is INTERNAL.
grpc::Status ToGrpc(const Status& st);
// The reverse; a failure without an answer (UNAVAILABLE, DEADLINE_EXCEEDED,
// CANCELLED, ...) is UNAVAILABLE.
Status FromGrpc(const grpc::Status& st);

}  // namespace tierkv

#endif  // TIERKV_CLUSTER_PEER_RPC_H_
