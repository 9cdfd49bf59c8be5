#include "manager/manager.h"

#include <sched.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <set>
#include <thread>

#include "cluster/etcd_metadata.h"

namespace tierkv {

namespace {

// The CPUs this process may run on (its affinity mask), at least 1.
size_t UsableCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    return static_cast<size_t>(std::max(1, CPU_COUNT(&set)));
  }
  return std::max(1u, std::thread::hardware_concurrency());
}

}  // namespace

Status Manager::OpenSsd() {
  const SsdConfig& c = config_.ssd;
  std::error_code ec;
  std::filesystem::create_directories(c.dir, ec);
  if (ec) return Status(Code::kIoError, "cannot create --ssd-dir " + c.dir + ": " + ec.message());
  BlockFileOptions o;
  o.use_io_uring = c.io_engine != "pread";
  o.require_io_uring = c.io_engine == "io_uring";
  o.use_direct = c.direct;
  Result<std::unique_ptr<BlockFile>> file =
      OpenBlockFile((std::filesystem::path(c.dir) / "tierkv-ssd.dat").string(), c.size, o);
  if (!file.ok()) return file.status();
  std::vector<SsdBlob> recovered;
  SsdRecoveryStats stats;
  Result<std::unique_ptr<SsdTier>> tier = SsdTier::Open(std::move(*file), &recovered, &stats);
  if (!tier.ok()) return tier.status();
  return store_->AttachSsd(std::move(*tier), std::move(recovered), stats);
}

Status Manager::PrepareCluster() {
  const ClusterConfig& cl = config_.cluster;
  etcd::ClientOptions eo;
  eo.endpoints = cl.etcd_endpoints;
  Result<std::unique_ptr<etcd::Client>> client = etcd::Client::Create(eo);
  if (!client.ok()) return client.status();
  etcd_ = std::move(*client);
  MembershipOptions mo;
  mo.cluster = cl.cluster_name;
  mo.node_id = config_.node_id;
  mo.endpoint = cl.advertise_addr;
  mo.data_endpoint = cl.data_addr;
  mo.rest_url = config_.rest.url;
  mo.ttl_secs = cl.ttl_secs;
  mo.rejoin = cl.on_fence == "rejoin";
  if (cl.rank_given) mo.rank = config_.server.rank;
  membership_ = std::make_unique<Membership>(mo, etcd_.get(), RealClock());
  Result<uint32_t> rank = membership_->Prepare();
  if (!rank.ok()) return rank.status();
  config_.server.rank = *rank;
  config_.rest.rank = *rank;
  if (!cl.dp_rank_given) config_.events.envelope.dp_rank = *rank;
  return Status::Ok();
}

Status Manager::WireRemoteReads() {
  const ClusterConfig& cl = config_.cluster;
  Membership* mem = membership_.get();
  const transfer::TlsFiles tls{cl.peer_tls_cert, cl.peer_tls_key, cl.peer_tls_ca};
  Result<std::shared_ptr<const PeerCredentials>> creds = LoadPeerCredentials(tls);
  if (!creds.ok()) return creds.status();
  peer_credentials_ = std::move(*creds);
  GrantOptions go;
  go.runtime_uuid = mem->runtime_uuid();
  go.budget_bytes = cl.transfer_budget;
  go.grant_timeout_ms = cl.grant_timeout_ms;
  go.admitting = [mem] { return mem->admitting(); };
  go.members = &live_members_;
  grants_ = std::make_unique<GrantTable>(go, store_.get());
  transfer::DataServerOptions dso;
  dso.listen = cl.data_addr;
  dso.tls = tls;
  if (const uint32_t every = config_.inject_read_checksum_failures; every > 0) {
    auto calls = std::make_shared<std::atomic<uint64_t>>(0);
    dso.corrupt_read = [every, calls] { return ++*calls % every == 0; };
  }
  if (dso.listen.empty()) {  // the --addr host, a port of the system's choosing
    dso.listen = cl.addr.substr(0, cl.addr.rfind(':')) + ":0";
  }
  data_grants_ = std::make_unique<DataChannelGrants>(grants_.get());
  data_server_ = std::make_unique<transfer::DataServer>(dso, data_grants_.get());
  transfer::TcpTransportOptions to;
  to.connections_per_peer = cl.data_connections;
  to.spin_us = config_.server.spin_us;
  to.tls = tls;
  Result<std::unique_ptr<transfer::TcpTransport>> transport = transfer::TcpTransport::Create(to);
  if (!transport.ok()) return transport.status();
  transport_ = std::move(*transport);
  FetcherOptions fo;
  fo.node_id = config_.node_id;
  fo.runtime_uuid = mem->runtime_uuid();
  // READs of one segment, or ranges of one value, at once: one per data
  // connection, and no more than the CPUs this manager may run on. Each
  // READ's receive and checksum keep a core busy, so more of them would only
  // take turns on the same cores (docs/cluster.md, the data channel).
  fo.parallel_reads = std::min<size_t>(static_cast<size_t>(cl.data_connections), UsableCpus());
  fo.lookahead = cl.remote_lookahead;
  fo.authorize_over_data = cl.remote_authorize_via == "data";
  fo.credentials = peer_credentials_;
  fetcher_ = std::make_unique<RemoteFetcher>(fo, store_.get(), index_.get(), transport_.get(),
                                             copies_.get());
  transfer_view_ =
      std::make_unique<TransferView>(fetcher_.get(), grants_.get(), data_server_.get());
  return Status::Ok();
}

Status Manager::StartDataChannel() {
  if (Status st = data_server_->Start(); !st.ok()) return st;
  const ClusterConfig& cl = config_.cluster;
  std::string advertised = cl.data_addr;
  if (advertised.empty()) {
    advertised = cl.advertise_addr.substr(0, cl.advertise_addr.rfind(':')) + ":" +
                 std::to_string(data_server_->port());
  }
  membership_->set_data_endpoint(advertised);
  grants_->Start();
  return Status::Ok();
}

Result<std::unique_ptr<Manager>> Manager::Create(const ManagerConfig& config) {
  std::unique_ptr<Manager> m(new Manager(config));
  if (config.cluster.enabled()) {
    if (Status st = m->PrepareCluster(); !st.ok()) return st;
  }
  const ManagerConfig& cfg = m->config_;  // with the cluster's rank
  if (cfg.hbm.enabled()) {
    // Asked for HBM that cannot be had: the manager does not start.
    Result<std::unique_ptr<HbmTier>> hbm = HbmTier::Open(cfg.hbm);
    if (!hbm.ok()) return hbm.status();
    m->hbm_ = std::move(*hbm);
  }
  Result<std::unique_ptr<DramPool>> pool = DramPool::Create(cfg.dram_size, cfg.dram_huge_pages);
  if (!pool.ok()) return pool.status();
  if (const uint32_t every = cfg.inject_alloc_failures; every > 0) {
    auto calls = std::make_shared<std::atomic<uint64_t>>(0);
    (*pool)->SetAllocationFaultHook([every, calls](uint64_t) { return ++*calls % every == 0; });
  }
  StoreOptions store_options = cfg.store;
  if (const uint32_t every = cfg.inject_commit_failures; every > 0) {
    auto calls = std::make_shared<std::atomic<uint64_t>>(0);
    store_options.commit_fault_hook = [every, calls] { return ++*calls % every == 0; };
  }
  Result<std::unique_ptr<Store>> store = Store::Create(store_options, std::move(*pool));
  if (!store.ok()) return store.status();
  m->store_ = std::move(*store);
  if (m->hbm_) {
    if (Status st = m->store_->AttachHbm(m->hbm_.get()); !st.ok()) return st;
  }
  if (m->membership_) {
    // Copies fetched from other managers follow their owners' views; the
    // tracker observes the store from the start (before the SSD tier).
    m->index_ = std::make_unique<GlobalIndex>(cfg.cluster.index_budget);
    m->copies_ = std::make_unique<CopyTracker>(m->store_.get(), m->index_.get());
    m->store_->AddObserver(m->copies_.get());
  }
  if (cfg.kv_events) {
    Store* s = m->store_.get();
    m->publisher_ = std::make_unique<events::KvEventPublisher>(
        cfg.events, [s](const std::function<void(const ReplicaEvent&)>& fn) {
          s->admin().ForEachReadable(fn);
        });
    m->store_->AddObserver(m->publisher_.get());
  }
  if (!cfg.ssd.dir.empty()) {
    if (Status st = m->OpenSsd(); !st.ok()) m->ssd_error_ = st.ToString();
  }
  m->server_ = std::make_unique<Server>(cfg.server, m->store_.get());
  HaStateProvider* ha = &m->standalone_ha_;
  ClusterIndexView* index_view = nullptr;
  if (m->membership_) {
    m->metadata_ = std::make_unique<EtcdMetadataStore>(
        m->etcd_.get(), Membership::Prefix(cfg.cluster.cluster_name) + "metadata/");
    ha = m->membership_.get();
    Membership* mem = m->membership_.get();
    InventoryOptions io;
    io.node_id = cfg.node_id;
    io.runtime_uuid = mem->runtime_uuid();
    io.epoch = [mem] { return mem->epoch(); };
    io.admitting = [mem] { return mem->admitting(); };
    io.members = &m->live_members_;
    io.coalesce_ms = cfg.cluster.coalesce_ms;
    io.stall_ms = cfg.cluster.stall_ms;
    io.scope_kind = cfg.cluster.scope_kind;
    io.scope_namespaces = cfg.cluster.scope_namespaces;
    if (Status st = m->WireRemoteReads(); !st.ok()) return st;
    io.credentials = m->peer_credentials_;
    m->inventory_ =
        std::make_unique<Inventory>(io, m->store_.get(), m->index_.get(), m->copies_.get());
    Inventory* inv = m->inventory_.get();
    RemoteFetcher* fetcher = m->fetcher_.get();
    GrantTable* grants = m->grants_.get();
    LiveMembers* live_members = &m->live_members_;
    mem->SetListener([inv, fetcher, grants, live_members](const std::vector<MemberView>& members) {
      live_members->Set(members);  // before anything that could serve a newcomer
      inv->SetMembers(members);
      fetcher->SetMembers(members);
      std::set<std::string> live;
      for (const MemberView& v : members) live.insert(v.runtime_uuid);
      grants->ReleaseDeparted(live);  // a requester that left holds nothing here
    });
    // A new incarnation after a fence: nothing of the old one survives it.
    mem->SetIncarnationListener([inv, fetcher, grants](const std::string& uuid) {
      grants->SetRuntimeUuid(uuid);
      fetcher->SetRuntimeUuid(uuid);
      inv->SetRuntimeUuid(uuid);
    });
    if (cfg.cluster.on_fence == "exit") {
      Manager* self = m.get();
      mem->SetFenceListener([self] {
        self->exiting_for_fence_.store(true);
        kill(getpid(), SIGTERM);  // main's sigwait stops the manager, then exits 3
      });
    }
    m->index_view_ = std::make_unique<ClusterIndexAdapter>(
        m->index_.get(), inv, mem, cfg.cluster.scope_kind, cfg.cluster.scope_namespaces);
    index_view = m->index_view_.get();
    m->catalog_ = std::make_unique<IndexCatalog>(m->index_.get(), fetcher, cfg.cluster.scope_kind,
                                                 cfg.cluster.scope_namespaces);
    m->server_->SetCatalog(m->catalog_.get());
    m->drain_ = std::make_unique<DrainJobs>(mem, cfg.node_id, m->peer_credentials_,
                                            [mem] { return mem->NextCounterValue("drain-jobs"); });
  } else {
    Result<std::unique_ptr<FileMetadataStore>> meta = FileMetadataStore::Open(cfg.data_dir);
    if (!meta.ok()) return meta.status();
    m->metadata_ = std::move(*meta);
  }
  RestOptions rest = cfg.rest;
  rest.ssd_configured = !cfg.ssd.dir.empty();
  rest.ssd_error = m->ssd_error_;
  m->rest_ = std::make_unique<RestServer>(
      rest, RestDeps{m->store_.get(), m->server_.get(), m->publisher_.get(), ha, m->metadata_.get(),
                     index_view, m->transfer_view_.get(), m->drain_.get(), nullptr, m->hbm_.get()});
  return m;
}

Manager::~Manager() { Stop(); }

Status Manager::Start() {
  if (publisher_) {
    if (Status st = publisher_->Start(); !st.ok()) return st;
  }
  if (Status st = server_->Start(); !st.ok()) {
    Stop();
    return st;
  }
  if (Status st = rest_->Start(); !st.ok()) {
    Stop();
    return st;
  }
  store_->Start();
  if (membership_) {
    Membership* mem = membership_.get();
    peer_server_ = std::make_unique<PeerServer>([mem] {
      return PeerIdentity{mem->node_id(), mem->runtime_uuid(), mem->epoch(),
                          mem->rank(),    kStreamProtocol,     mem->cluster_uuid()};
    });
    peer_server_->SetInventory(inventory_.get());
    peer_server_->SetGrants(grants_.get());
    peer_server_->SetMembers(&live_members_);
    peer_server_->SetDrainParticipant(store_.get(), fetcher_.get(), index_.get(),
                                      config_.cluster.scope_kind == "all");
    membership_->set_rest_url(rest_->url());
    Status st = StartDataChannel();
    PeerGateOptions gate;
    gate.max_connections = config_.cluster.peer_max_connections;
    gate.handshake_timeout_ms = config_.cluster.peer_handshake_timeout_ms;
    gate.idle_timeout_ms = config_.cluster.peer_idle_timeout_ms;
    if (st.ok()) st = peer_server_->Start(config_.cluster.addr, peer_credentials_.get(), gate);
    if (st.ok()) transfer_view_->SetPeer(peer_server_.get());
    if (st.ok()) st = membership_->Register();
    if (!st.ok()) {
      Stop();
      return st;
    }
  }
  started_ = true;
  return Status::Ok();
}

void Manager::Stop() {
  // Leave the cluster first: fence, let peer calls finish, then give up the
  // lease and the member record.
  if (drain_) drain_->Stop();  // a running job stops between batches
  if (membership_) membership_->BeginShutdown();
  if (inventory_) inventory_->Stop();      // owner streams end with a reset, followers stop
  if (peer_server_) peer_server_->Stop();  // authorizations in flight end
  if (data_server_) data_server_->Stop();  // then the READs
  if (grants_) grants_->Stop();            // and the pins they held
  if (membership_) membership_->Leave();
  if (server_) server_->Stop();
  if (rest_) rest_->Stop();
  if (store_) store_->Stop();
  if (publisher_) publisher_->Stop();
  started_ = false;
}

}  // namespace tierkv
