// GrantClient: the requester's side of an owner's Authorize and Release calls
// on peer gRPC, as the remote fetcher makes them (docs/cluster.md, "Remote
// reads"). The real one keeps one stub per owner endpoint; the fetcher's
// tests stand an owner's GrantTable in for it in the same process, so they
// need no gRPC server and can make an owner fail to answer at will.
//
// Thread-safety: every method from any thread.
#ifndef TIERKV_CLUSTER_GRANT_CLIENT_H_
#define TIERKV_CLUSTER_GRANT_CLIENT_H_

#include <cstdint>
#include <memory>
#include <string>

#include "tierkv/status.h"

namespace tierkv {

struct PeerCredentials;
namespace peer {
class AuthorizeRequest;
class AuthorizeResponse;
class ReleaseRequest;
}  // namespace peer

class GrantClient {
 public:
  virtual ~GrantClient() = default;
  // Asks the owner at `endpoint` (its peer address) to authorize `req`,
  // waiting `timeout_ms` at most. OK with `resp` filled when it answered;
  // the call's error otherwise (UNAVAILABLE or DEADLINE_EXCEEDED: no answer,
  // the grant may exist all the same).
  virtual Status Authorize(const std::string& endpoint, const peer::AuthorizeRequest& req,
                           peer::AuthorizeResponse* resp, int64_t timeout_ms) = 0;
  // Releases `req.ticket`'s grant; OK when the owner answered.
  virtual Status Release(const std::string& endpoint, const peer::ReleaseRequest& req,
                         int64_t timeout_ms) = 0;
  // The owner at `endpoint` left or moved: its connection may go.
  virtual void Forget(const std::string& endpoint) = 0;
};

// Over peer gRPC, with `credentials` (null: plaintext).
std::unique_ptr<GrantClient> MakeGrpcGrantClient(
    std::shared_ptr<const PeerCredentials> credentials);

}  // namespace tierkv

#endif  // TIERKV_CLUSTER_GRANT_CLIENT_H_
