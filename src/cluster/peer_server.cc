#include "cluster/peer_server.h"

#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>

#include <chrono>

#include "cluster/inventory_stream.h"
#include "peer.grpc.pb.h"

namespace tierkv {
namespace {

class PeerService final : public tierkv::peer::Peer::Service {
 public:
  explicit PeerService(std::function<PeerIdentity()> identity) : identity_(std::move(identity)) {}
  grpc::Status Identify(grpc::ServerContext*, const peer::IdentifyRequest*,
                        peer::IdentifyResponse* out) override {
    const PeerIdentity id = identity_();
    out->set_node_id(id.node_id);
    out->set_runtime_uuid(id.runtime_uuid);
    out->set_epoch(id.epoch);
    out->set_rank(id.rank);
    out->set_stream_protocol(id.stream_protocol);
    out->set_cluster_uuid(id.cluster_uuid);
    return grpc::Status::OK;
  }

  grpc::Status Inventory(grpc::ServerContext* ctx, const peer::InventoryRequest* req,
                         grpc::ServerWriter<peer::InventoryFrame>* writer) override {
    if (inventory_ == nullptr) {
      return grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "no inventory on this manager");
    }
    tierkv::Inventory::ServeContext c{ctx, req, writer, grpc::Status::OK};
    inventory_->Serve(c);
    return c.status;
  }

  tierkv::Inventory* inventory_ = nullptr;

 private:
  std::function<PeerIdentity()> identity_;
};

}  // namespace

struct PeerServer::Impl {
  explicit Impl(std::function<PeerIdentity()> identity) : service(std::move(identity)) {}
  PeerService service;
  std::unique_ptr<grpc::Server> server;
};

PeerServer::PeerServer(std::function<PeerIdentity()> identity)
    : impl_(std::make_unique<Impl>(std::move(identity))) {}
PeerServer::~PeerServer() { Stop(0); }

void PeerServer::SetInventory(Inventory* inventory) { impl_->service.inventory_ = inventory; }

Status PeerServer::Start(const std::string& addr) {
  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  builder.RegisterService(&impl_->service);
  builder.AddListeningPort(addr, grpc::InsecureServerCredentials(), &port_);
  impl_->server = builder.BuildAndStart();
  if (!impl_->server || port_ == 0) {
    impl_->server.reset();
    return Status(Code::kUnavailable, "cannot listen on --addr " + addr + " (peer gRPC)");
  }
  return Status::Ok();
}

void PeerServer::Stop(int64_t grace_ms) {
  if (!impl_->server) return;
  impl_->server->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(grace_ms));
  impl_->server->Wait();
  impl_->server.reset();
}

}  // namespace tierkv
