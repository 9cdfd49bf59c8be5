#include "cluster/peer_server.h"

#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>

#include <algorithm>
#include <chrono>
#include <span>

#include "cluster/fetcher.h"
#include "cluster/global_index.h"
#include "cluster/grant_service.h"
#include "cluster/grants.h"
#include "cluster/inventory_stream.h"
#include "cluster/peer_limits.h"
#include "cluster/peer_rpc.h"
#include "common/bounded_count.h"
#include "peer.grpc.pb.h"

namespace tierkv {
namespace {

grpc::Status Unimplemented() {
  return grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "no drain participant on this manager");
}

// `gone` (Pull and Drop): the source no longer holds the listed value.
void AddResult(peer::ItemResults* out, const Status& st, bool gone = false) {
  peer::GrantedItem* item = out->add_items();
  SetItemStatus(item, st);
  item->set_gone(gone);
}

// How long Drop waits for this manager's view of the target to cover the
// target's fence (well inside the coordinator's 30 s Drop deadline), and
// Pull for its view of the source to reach the listing.
constexpr int64_t kDropFenceWaitMs = 10000;
// Drops and Pulls waiting for a fence at once (each holds a gRPC thread; one
// drain job sends one Pull or Drop at a time).
constexpr int kMaxFenceWaits = 8;
// The most keys of one Pull or Drop (a drain job sends 64 at most): a peer
// cannot make this manager fetch or check an unbounded batch in one call.
constexpr int kMaxDrainBatch = 256;

grpc::Status TooMany(int n) {
  return grpc::Status(
      grpc::StatusCode::INVALID_ARGUMENT,
      std::to_string(n) + " keys in one call; at most " + std::to_string(kMaxDrainBatch));
}
// Records per page of a drain listing (DrainList), at most kPeerMessageBytes
// of them.
constexpr size_t kDrainListPage = 1024;

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

  grpc::Status Authorize(grpc::ServerContext*, const peer::AuthorizeRequest* req,
                         peer::AuthorizeResponse* out) override {
    if (grants_ == nullptr) {
      return grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "no source grants on this manager");
    }
    return ToGrpc(ServeAuthorize(*grants_, *req, out));
  }

  grpc::Status Release(grpc::ServerContext*, const peer::ReleaseRequest* req,
                       peer::ReleaseResponse* out) override {
    if (grants_ == nullptr) {
      return grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "no source grants on this manager");
    }
    out->set_released(grants_->Release(req->requester_uuid(), req->ticket()));
    return grpc::Status::OK;
  }

  grpc::Status DrainList(grpc::ServerContext*, const peer::DrainListRequest* req,
                         grpc::ServerWriter<peer::DrainListResponse>* writer) override {
    if (store_ == nullptr) return Unimplemented();
    if (grpc::Status st = CheckCaller(req->caller()); !st.ok()) return st;
    const uint32_t medium = req->medium();
    bool alive = true;
    // A page of the snapshot at a time (written without a store lock held);
    // the coordinator lists each object of a whole node once.
    store_->admin().Snapshot(kDrainListPage, [&](std::span<const SnapshotRecord> page) {
      peer::DrainListResponse out;
      size_t bytes = 0;
      for (const SnapshotRecord& r : page) {
        if (medium != 255 && static_cast<uint32_t>(r.medium) != medium) continue;
        if (bytes >= kPeerMessageBytes) {
          if (alive) alive = writer->Write(out);
          out.Clear();
          bytes = 0;
        }
        bytes += PeerRecordBytes(r);
        peer::InventoryRecord* o = out.add_records();
        o->set_tenant(r.tenant);
        o->set_key(r.key);
        o->set_name_space(r.name_space);
        o->set_medium(static_cast<uint32_t>(r.medium));
        o->set_size(r.size);
        o->set_generation(r.generation);
        o->set_sequence(r.sequence);
      }
      if (alive && out.records_size() > 0) alive = writer->Write(out);
    });
    return alive ? grpc::Status::OK
                 : grpc::Status(grpc::StatusCode::CANCELLED, "the coordinator went away");
  }

  grpc::Status Pull(grpc::ServerContext* ctx, const peer::PullRequest* req,
                    peer::ItemResults* out) override {
    if (fetcher_ == nullptr) return Unimplemented();
    if (grpc::Status st = CheckCaller(req->caller()); !st.ok()) return st;
    if (req->keys_size() > kMaxDrainBatch) return TooMany(req->keys_size());
    if (req->source().empty() || req->generations_size() != req->keys_size()) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          "a Pull names the source and one generation per key");
    }
    // Waited for whatever the scope, so that the values listed are in the
    // index here when they are fetched. Once the view of the source here has
    // reached the listing, a value it does not show is no longer the
    // source's (removed or replaced since), when the view holds every
    // namespace and is of the listed incarnation.
    const bool reached =
        AwaitListing(*ctx, req->source(), req->source_uuid(), req->listed_sequence());
    const bool covered = reached && every_namespace_ && !req->source_uuid().empty();
    std::vector<std::string_view> keys(req->keys().begin(), req->keys().end());
    const std::span<const uint64_t> generations(req->generations().data(), req->generations_size());
    for (const RemoteFetcher::PullOutcome& o :
         fetcher_->Pull(req->tenant(), keys, req->source(), generations)) {
      AddResult(out, o.status, o.refused_by_source || (o.not_indexed && covered));
    }
    // Taken after the stores: a source that waits for its view of this owner
    // to cover it sees every copy this call made.
    const PeerIdentity self = identity_();
    out->mutable_fence()->set_owner(self.node_id);
    out->mutable_fence()->set_owner_uuid(self.runtime_uuid);
    out->mutable_fence()->set_epoch(self.epoch);
    out->mutable_fence()->set_sequence(store_->feed().last_sequence());
    return grpc::Status::OK;
  }

  grpc::Status Drop(grpc::ServerContext* ctx, const peer::DropRequest* req,
                    peer::ItemResults* out) override {
    if (store_ == nullptr) return Unimplemented();
    if (grpc::Status st = CheckCaller(req->caller()); !st.ok()) return st;
    if (req->items_size() > kMaxDrainBatch) return TooMany(req->items_size());
    if (Status st = AwaitFence(*ctx, req->fence()); !st.ok()) {
      for (int i = 0; i < req->items_size(); ++i) AddResult(out, st);
      return grpc::Status::OK;
    }
    constexpr uint64_t kDropPins = uint64_t{1} << 61;  // pin owner id for the check
    for (const peer::GrantItem& g : req->items()) {
      const ObjectRef ref{req->tenant(), g.key()};
      // Removed only while it is still the value that was moved.
      Result<PinGrant> pin = store_->pins().Pin(kDropPins, ref, g.generation(), 0);
      if (!pin.ok()) {
        AddResult(out, pin.status(), pin.status().code() == Code::kNotFound);  // removed, replaced
        continue;
      }
      (void)store_->pins().Unpin(kDropPins, pin->pin_id);
      AddResult(out, store_->Remove(Caller(0, 0), ref));
    }
    return grpc::Status::OK;
  }

  // Drain requests come from the coordinator, a live member.
  grpc::Status CheckCaller(const peer::PeerCaller& caller) const {
    if (members_ == nullptr) return grpc::Status::OK;
    Status st = members_->Check(caller.node_id(), caller.runtime_uuid());
    return st.ok() ? grpc::Status::OK
                   : grpc::Status(grpc::StatusCode::PERMISSION_DENIED, st.message());
  }

  tierkv::Inventory* inventory_ = nullptr;
  GrantTable* grants_ = nullptr;
  const LiveMembers* members_ = nullptr;
  Store* store_ = nullptr;
  RemoteFetcher* fetcher_ = nullptr;
  const GlobalIndex* index_ = nullptr;
  bool every_namespace_ = false;

 private:
  // How long the wait of one call for a fence may last: at most `cap`, and
  // over well before the caller's own deadline.
  static std::chrono::milliseconds WaitWithin(const grpc::ServerContext& ctx,
                                              std::chrono::milliseconds cap) {
    const auto caller_left = std::chrono::duration_cast<std::chrono::milliseconds>(
                                 ctx.deadline() - std::chrono::system_clock::now()) -
                             std::chrono::milliseconds(500);
    return std::clamp(caller_left, std::chrono::milliseconds(0), cap);
  }

  // Pull: waits until this manager's view of `source`, of incarnation
  // `uuid`, has reached `sequence` (the listing's). True when it has; false
  // when it has not in time, when no Pull or Drop wait is free, or when there
  // is nothing to wait for (sequence 0). Only a complete view of that
  // incarnation is waited for: one that lags catches up within a delta
  // batch, while one that is missing (a stream being reset, a view refused
  // by the index budget) or of another incarnation may stay so, and each
  // batch of a drain would wait in vain.
  bool AwaitListing(const grpc::ServerContext& ctx, const std::string& source,
                    const std::string& uuid, uint64_t sequence) const {
    if (sequence == 0 || index_ == nullptr) return false;
    if (index_->Seen({source, uuid}).covered.value_or(0) == 0) return false;
    const std::optional<BoundedCount::Slot> slot = fence_waits_.TryEnter();
    if (!slot) return false;
    const FenceSeen seen =
        index_->AwaitFence({source, uuid}, sequence,
                           std::chrono::steady_clock::now() +
                               WaitWithin(ctx, std::chrono::milliseconds(kDropFenceWaitMs)));
    return seen.covered && *seen.covered >= sequence;
  }

  // A drained value is removed only once this manager's own view of the
  // target shows the copy, so a get here never finds it in neither place.
  Status AwaitFence(const grpc::ServerContext& ctx, const peer::InventoryFence& fence) const {
    if (fence.owner().empty()) {  // nothing would show that a copy exists elsewhere
      return InvalidArgument(
          "a Drop names the fence of the target that holds the copies; "
          "the values are kept");
    }
    if (index_ == nullptr) {
      return Status(Code::kUnavailable, "no global index here to await the fence of " +
                                            fence.owner() + "; the copies are kept");
    }
    const std::optional<BoundedCount::Slot> slot = fence_waits_.TryEnter();
    if (!slot) {
      return Status(Code::kUnavailable, "too many drops awaiting fences (at most " +
                                            std::to_string(kMaxFenceWaits) +
                                            "); the copies are kept, retry later");
    }
    // Bounded, and answered before the caller's own deadline.
    const FenceOwner owner{fence.owner(), fence.owner_uuid(), fence.epoch()};
    const FenceSeen seen =
        index_->AwaitFence(owner, fence.sequence(),
                           std::chrono::steady_clock::now() +
                               WaitWithin(ctx, std::chrono::milliseconds(kDropFenceWaitMs)));
    Status st = FenceOutcome(owner, fence.sequence(), seen);
    if (st.ok()) return st;
    return Status(st.code(), st.message() + "; the copies are kept");
  }

  std::function<PeerIdentity()> identity_;
  mutable BoundedCount fence_waits_{kMaxFenceWaits};
};

}  // namespace

struct PeerServer::Impl {
  explicit Impl(std::function<PeerIdentity()> identity) : service(std::move(identity)) {}
  PeerService service;
  std::unique_ptr<grpc::Server> server;
  std::unique_ptr<PeerGate> gate;  // the public port
};

PeerServer::PeerServer(std::function<PeerIdentity()> identity)
    : impl_(std::make_unique<Impl>(std::move(identity))) {}
PeerServer::~PeerServer() { Stop(0); }

void PeerServer::SetInventory(Inventory* inventory) { impl_->service.inventory_ = inventory; }
void PeerServer::SetGrants(GrantTable* grants) { impl_->service.grants_ = grants; }
void PeerServer::SetMembers(const LiveMembers* members) { impl_->service.members_ = members; }
void PeerServer::SetDrainParticipant(Store* store, RemoteFetcher* fetcher, const GlobalIndex* index,
                                     bool every_namespace) {
  impl_->service.every_namespace_ = every_namespace;
  impl_->service.store_ = store;
  impl_->service.fetcher_ = fetcher;
  impl_->service.index_ = index;
}

Status PeerServer::Start(const std::string& addr, const PeerCredentials* credentials,
                         PeerGateOptions limits) {
  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  builder.RegisterService(&impl_->service);
  int grpc_port = 0;
  builder.AddListeningPort("127.0.0.1:0", PeerServerCredentials(credentials), &grpc_port);
  impl_->server = builder.BuildAndStart();
  if (!impl_->server || grpc_port == 0) {
    impl_->server.reset();
    return Status(Code::kUnavailable, "cannot listen on a loopback port (peer gRPC)");
  }
  limits.listen = addr;
  limits.backend = "127.0.0.1:" + std::to_string(grpc_port);
  impl_->gate = std::make_unique<PeerGate>(std::move(limits));
  if (Status st = impl_->gate->Start(); !st.ok()) {
    impl_->gate.reset();
    Stop(0);
    return st;
  }
  port_ = impl_->gate->port();
  return Status::Ok();
}

PeerGateStats PeerServer::GateStats() const {
  return impl_->gate ? impl_->gate->Stats() : PeerGateStats{};
}

void PeerServer::Stop(int64_t grace_ms) {
  if (impl_->gate) impl_->gate->Stop();  // no new connection; open ones end
  if (!impl_->server) return;
  impl_->server->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(grace_ms));
  impl_->server->Wait();
  impl_->server.reset();
}

}  // namespace tierkv

namespace tierkv {

std::shared_ptr<grpc::Channel> InProcessChannel(PeerServer& server) {
  return server.impl_->server->InProcessChannel(grpc::ChannelArguments());
}

}  // namespace tierkv
