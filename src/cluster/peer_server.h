// PeerServer: the manager's peer gRPC listener (--addr), serving the
// tierkv.peer.Peer service (proto/peer/peer.proto): Identify (who answers on
// this address), the inventory streams (cluster/inventory.h), the source
// grants (cluster/grants.h) and gRPC's standard health service.
//
// Thread-safety: Start/Stop from one thread.
#ifndef TIERKV_CLUSTER_PEER_SERVER_H_
#define TIERKV_CLUSTER_PEER_SERVER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "cluster/peer_gate.h"
#include "tierkv/status.h"

namespace grpc {
class Channel;
}

namespace tierkv {

class Inventory;
class GlobalIndex;
class GrantTable;
class RemoteFetcher;
class LiveMembers;
class Store;
struct PeerCredentials;

struct PeerIdentity {
  std::string node_id;
  std::string runtime_uuid;
  uint64_t epoch = 0;
  uint32_t rank = 0;
  std::string stream_protocol;
  std::string cluster_uuid;
};

class PeerServer {
 public:
  // `identity` is called on gRPC threads for each Identify; it must be
  // thread-safe and quick.
  explicit PeerServer(std::function<PeerIdentity()> identity);
  ~PeerServer();
  // The inventory streams' owner side (before Start; may be null).
  void SetInventory(Inventory* inventory);
  // The source grants' owner side, Authorize and Release (before Start; may be null).
  void SetGrants(GrantTable* grants);
  // Drain requests (DrainList, Pull, Drop) are served only to a caller that
  // is a live member (before Start; null: to anyone).
  void SetMembers(const LiveMembers* members);
  // Drain jobs' participant side (before Start): DrainList and Drop on
  // `store`, Pull through `fetcher` (answering `store`'s fence); Drop first
  // waits (bounded) until `index`'s view of the pulling target covers that
  // fence, and Pull until its view of the source covers the listing.
  // `every_namespace`: this manager's metadata scope is every namespace, so
  // a value its covered view of the source does not show is gone from the
  // source (with a narrower scope it may only be out of scope).
  void SetDrainParticipant(Store* store, RemoteFetcher* fetcher, const GlobalIndex* index,
                           bool every_namespace);
  // `credentials` null: plaintext; else mutual TLS (a client must present a
  // certificate the CA signed). Errors: UNAVAILABLE naming the address when it
  // cannot be bound.
  // The public port is a PeerGate (cluster/peer_gate.h) in front of the gRPC
  // server, which listens on a loopback port of its own: `limits` bound the
  // connections (its `listen` and `backend` are filled here).
  Status Start(const std::string& addr, const PeerCredentials* credentials = nullptr,
               PeerGateOptions limits = {});
  // Stops accepting, lets calls in flight finish for up to `grace_ms`.
  void Stop(int64_t grace_ms = 2000);
  int port() const { return port_; }
  PeerGateStats GateStats() const;

 private:
  friend std::shared_ptr<grpc::Channel> InProcessChannel(PeerServer& server);
  struct Impl;
  std::unique_ptr<Impl> impl_;
  int port_ = 0;
};

}  // namespace tierkv

#endif  // TIERKV_CLUSTER_PEER_SERVER_H_
