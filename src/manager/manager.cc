#include "manager/manager.h"

#include <atomic>
#include <filesystem>

namespace tierkv {

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

Result<std::unique_ptr<Manager>> Manager::Create(const ManagerConfig& config) {
  std::unique_ptr<Manager> m(new Manager(config));
  Result<std::unique_ptr<DramPool>> pool = DramPool::Create(config.dram_size);
  if (!pool.ok()) return pool.status();
  if (const uint32_t every = config.inject_alloc_failures; every > 0) {
    auto calls = std::make_shared<std::atomic<uint64_t>>(0);
    (*pool)->SetAllocationFaultHook([every, calls](uint64_t) { return ++*calls % every == 0; });
  }
  Result<std::unique_ptr<Store>> store = Store::Create(config.store, std::move(*pool));
  if (!store.ok()) return store.status();
  m->store_ = std::move(*store);
  if (config.kv_events) {
    Store* s = m->store_.get();
    m->publisher_ = std::make_unique<events::KvEventPublisher>(
        config.events,
        [s](const std::function<void(const ReplicaEvent&)>& fn) { s->ForEachReadable(fn); });
    m->store_->AddObserver(m->publisher_.get());
  }
  if (!config.ssd.dir.empty()) {
    if (Status st = m->OpenSsd(); !st.ok()) m->ssd_error_ = st.ToString();
  }
  m->server_ = std::make_unique<Server>(config.server, m->store_.get());
  Result<std::unique_ptr<FileMetadataStore>> meta = FileMetadataStore::Open(config.data_dir);
  if (!meta.ok()) return meta.status();
  m->metadata_ = std::move(*meta);
  m->rest_ = std::make_unique<RestServer>(
      config.rest, RestDeps{m->store_.get(), m->server_.get(), m->publisher_.get(), &m->ha_,
                            m->metadata_.get()});
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
  started_ = true;
  return Status::Ok();
}

void Manager::Stop() {
  if (server_) server_->Stop();
  if (rest_) rest_->Stop();
  if (store_) store_->Stop();
  if (publisher_) publisher_->Stop();
  started_ = false;
}

}  // namespace tierkv
