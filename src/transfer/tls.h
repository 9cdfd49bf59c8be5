// TLS material of the peer plane (--peer-tls-cert, --peer-tls-key,
// --peer-tls-ca): one certificate and key for this manager, and the CA that
// must have signed every peer's. Used by peer gRPC (cluster/peer_rpc.h) and the
// data channel (both sides require and verify the other's certificate).
#ifndef TIERKV_TRANSFER_TLS_H_
#define TIERKV_TRANSFER_TLS_H_

#include <string>

#include "tierkv/status.h"

namespace tierkv::transfer {

struct TlsFiles {
  std::string cert;  // PEM certificate chain
  std::string key;   // PEM private key
  std::string ca;    // PEM CA certificate(s) peers' certificates must chain to
  bool enabled() const { return !cert.empty(); }
};

// The whole file. INVALID_ARGUMENT naming `what` and the path when it cannot be read.
Result<std::string> ReadPem(const std::string& path, const std::string& what);

}  // namespace tierkv::transfer

#endif  // TIERKV_TRANSFER_TLS_H_
