// The peer plane's credentials, opaque outside the cluster box's .cc files
// (cluster/peer_rpc.h defines them): plaintext, or mutual TLS from
// --peer-tls-cert/--peer-tls-key/--peer-tls-ca, for the peer gRPC server and
// the channels to peers alike.
#ifndef TIERKV_CLUSTER_PEER_CREDENTIALS_H_
#define TIERKV_CLUSTER_PEER_CREDENTIALS_H_

#include <memory>

#include "tierkv/status.h"
#include "transfer/tls.h"

namespace tierkv {

struct PeerCredentials;

// Null (plaintext) when `files` is not enabled. Errors: INVALID_ARGUMENT
// naming the file that cannot be read.
Result<std::shared_ptr<const PeerCredentials>> LoadPeerCredentials(const transfer::TlsFiles& files);

}  // namespace tierkv

#endif  // TIERKV_CLUSTER_PEER_CREDENTIALS_H_
