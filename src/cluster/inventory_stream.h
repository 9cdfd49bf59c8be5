// Internal to src/cluster: the gRPC types behind Inventory::ServeContext.
#ifndef TIERKV_CLUSTER_INVENTORY_STREAM_H_
#define TIERKV_CLUSTER_INVENTORY_STREAM_H_

#include <grpcpp/grpcpp.h>

#include "cluster/inventory.h"
#include "peer.grpc.pb.h"

namespace tierkv {

struct Inventory::ServeContext {
  grpc::ServerContext* server = nullptr;
  const peer::InventoryRequest* request = nullptr;
  grpc::ServerWriter<peer::InventoryFrame>* writer = nullptr;
  grpc::Status status;  // what the handler returns
};

}  // namespace tierkv

#endif  // TIERKV_CLUSTER_INVENTORY_STREAM_H_
