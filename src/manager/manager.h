// Manager: one tierkv-server's components, wired together.
//
// Owns the DRAM pool and the store (with the SSD tier when --ssd-dir is set),
// the client listeners, and the optional KV event publisher (registered as a
// store observer). An SSD tier that cannot be opened (directory not writable,
// file locked by another manager, I/O error during recovery) does not stop the
// manager: it serves from DRAM alone and ssd_error() says why. Start brings them up in
// dependency order; Stop takes them down in reverse: client listeners first (no
// new work), then the store's background thread, then the event publisher
// (which drains what the last requests announced).
//
// Thread-safety: Start and Stop from one thread; accessors from any.
#ifndef TIERKV_MANAGER_MANAGER_H_
#define TIERKV_MANAGER_MANAGER_H_

#include <atomic>
#include <memory>
#include <string>

#include "cluster/cluster_index.h"
#include "cluster/drain.h"
#include "cluster/fetcher.h"
#include "cluster/global_index.h"
#include "cluster/grant_service.h"
#include "cluster/grants.h"
#include "cluster/inventory.h"
#include "cluster/live_members.h"
#include "cluster/membership.h"
#include "cluster/peer_credentials.h"
#include "cluster/peer_server.h"
#include "common/clock.h"
#include "etcd/etcd_client.h"
#include "events/publisher.h"
#include "http/ports/cluster.h"
#include "http/rest_server.h"
#include "manager/config.h"
#include "manager/remote_catalog.h"
#include "manager/transfer_view.h"
#include "meta/metadata_store.h"
#include "server/server.h"
#include "store/store.h"
#include "transfer/data_server.h"
#include "transfer/tcp_transport.h"

namespace tierkv {

class Manager {
 public:
  // Creates the pool and the store (nothing listens yet). Errors as
  // DramPool::Create / Store::Create.
  static Result<std::unique_ptr<Manager>> Create(const ManagerConfig& config);
  ~Manager();

  // Binds every listener and starts the threads. Errors name the address.
  Status Start();
  void Stop();

  const ManagerConfig& config() const { return config_; }
  Store& store() { return *store_; }
  Server& server() { return *server_; }
  // Null unless --kv-events-endpoint is set.
  events::KvEventPublisher* publisher() { return publisher_.get(); }
  // Why the configured SSD tier could not be opened ("" when it was, or when
  // none is configured). The manager then serves from DRAM alone.
  const std::string& ssd_error() const { return ssd_error_; }
  // The HBM pools (--hbm-devices); null without them.
  const HbmTier* hbm() const { return hbm_.get(); }
  // With --on-fence exit: the registration was fenced and the process was
  // asked to stop (SIGTERM to itself); it should exit with status 3.
  bool exiting_for_fence() const { return exiting_for_fence_.load(); }
  RestServer& rest() { return *rest_; }
  // Null in standalone mode.
  Membership* membership() { return membership_.get(); }
  GlobalIndex* global_index() { return index_.get(); }

 private:
  explicit Manager(const ManagerConfig& config) : config_(config) {}
  Status OpenSsd();
  Status PrepareCluster();   // etcd client, membership, format check, rank
  Status WireRemoteReads();  // peer credentials, grants, data channel, fetcher
  Status StartDataChannel();

  ManagerConfig config_;
  std::unique_ptr<HbmTier> hbm_;  // before the store: outlives what will place objects there
  std::unique_ptr<Store> store_;
  std::unique_ptr<Server> server_;
  std::unique_ptr<events::KvEventPublisher> publisher_;
  std::unique_ptr<MetadataStore> metadata_;
  StandaloneHaState standalone_ha_;
  std::unique_ptr<etcd::Client> etcd_;
  LiveMembers live_members_;  // peer requests are served to these only (set by membership_)
  std::unique_ptr<Membership> membership_;
  std::unique_ptr<PeerServer> peer_server_;
  std::unique_ptr<GlobalIndex> index_;
  std::unique_ptr<CopyTracker> copies_;  // declared after index_: it reads the index
  std::unique_ptr<Inventory> inventory_;
  std::unique_ptr<ClusterIndexAdapter> index_view_;
  // Remote reads. Destroyed in reverse: the data channel before the grants it
  // reads through, the grants before the store they pin.
  std::shared_ptr<const PeerCredentials> peer_credentials_;  // null: plaintext
  std::unique_ptr<GrantTable> grants_;
  std::unique_ptr<DataChannelGrants> data_grants_;  // the data channel's view of grants_
  std::unique_ptr<transfer::DataServer> data_server_;
  std::unique_ptr<transfer::TcpTransport> transport_;
  std::unique_ptr<RemoteFetcher> fetcher_;
  std::unique_ptr<TransferView> transfer_view_;
  std::unique_ptr<DrainJobs> drain_;
  std::unique_ptr<IndexCatalog> catalog_;
  std::unique_ptr<RestServer> rest_;
  std::string ssd_error_;
  std::atomic<bool> exiting_for_fence_{false};
  bool started_ = false;
};

}  // namespace tierkv

#endif  // TIERKV_MANAGER_MANAGER_H_
