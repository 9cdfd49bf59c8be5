#include "cluster/grant_client.h"

#include <grpcpp/grpcpp.h>

#include <map>
#include <mutex>

#include "cluster/peer_rpc.h"
#include "peer.grpc.pb.h"

namespace tierkv {
namespace {

class GrpcGrantClient final : public GrantClient {
 public:
  explicit GrpcGrantClient(std::shared_ptr<const PeerCredentials> credentials)
      : credentials_(std::move(credentials)) {}

  Status Authorize(const std::string& endpoint, const peer::AuthorizeRequest& req,
                   peer::AuthorizeResponse* resp, int64_t timeout_ms) override {
    grpc::ClientContext ctx;
    ctx.set_deadline(PeerDeadline(timeout_ms));
    const grpc::Status gs = Stub(endpoint)->Authorize(&ctx, req, resp);
    return gs.ok() ? Status::Ok() : FromGrpc(gs);
  }

  Status Release(const std::string& endpoint, const peer::ReleaseRequest& req,
                 int64_t timeout_ms) override {
    peer::ReleaseResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(PeerDeadline(timeout_ms));
    const grpc::Status gs = Stub(endpoint)->Release(&ctx, req, &resp);
    return gs.ok() ? Status::Ok() : FromGrpc(gs);
  }

  void Forget(const std::string& endpoint) override {
    std::lock_guard lock(mu_);
    stubs_.erase(endpoint);
  }

 private:
  std::shared_ptr<peer::Peer::Stub> Stub(const std::string& endpoint) {
    std::lock_guard lock(mu_);
    std::shared_ptr<peer::Peer::Stub>& stub = stubs_[endpoint];
    if (!stub) stub = peer::Peer::NewStub(PeerChannel(endpoint, credentials_.get()));
    return stub;
  }

  const std::shared_ptr<const PeerCredentials> credentials_;
  std::mutex mu_;
  std::map<std::string, std::shared_ptr<peer::Peer::Stub>> stubs_;
};

}  // namespace

std::unique_ptr<GrantClient> MakeGrpcGrantClient(
    std::shared_ptr<const PeerCredentials> credentials) {
  return std::make_unique<GrpcGrantClient>(std::move(credentials));
}

}  // namespace tierkv
