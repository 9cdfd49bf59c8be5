// tierkv-server: one manager per host.
//
// Starts the DRAM pool, the store, the client listeners and (when configured)
// the KV event stream, prints where it listens, and serves until SIGTERM or
// SIGINT, then stops gracefully: no new connections, in-flight requests
// answered, queued events published, exit status 0.
#include <signal.h>
#include <spdlog/spdlog.h>

#include <cstdio>
#include <string>
#include <vector>

#include "common/units.h"
#include "manager/config.h"
#include "manager/manager.h"

namespace {

int Fail(const tierkv::Status& st) {
  std::fprintf(stderr, "tierkv-server: %s\n", st.ToString().c_str());
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace tierkv;
  // Signals are taken synchronously by main (sigwait); every thread inherits the mask.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  bool exit_now = false;
  std::string message;
  Result<ManagerConfig> config =
      ParseManagerConfig(std::vector<std::string>(argv + 1, argv + argc), &exit_now, &message);
  if (!config.ok()) return Fail(config.status());
  if (exit_now) {
    std::fputs(message.c_str(), stdout);
    return 0;
  }
  spdlog::set_level(spdlog::level::from_str(config->log_level));

  Result<std::unique_ptr<Manager>> manager = Manager::Create(*config);
  if (!manager.ok()) return Fail(manager.status());
  Manager& m = **manager;
  if (Status st = m.Start(); !st.ok()) return Fail(st);

  spdlog::info("tierkv-server ready: node {}, rank {}, DRAM pool {} ({} in huge pages)",
               config->node_id, m.config().server.rank, FormatByteSize(m.store().pool().capacity()),
               FormatByteSize(m.store().pool().huge_page_bytes()));
  if (const HbmTier* hbm = m.hbm(); hbm != nullptr) {
    spdlog::info("HBM tier: {} on {} device(s) ({}); objects stay in DRAM for now",
                 FormatByteSize(hbm->capacity()), hbm->pools().size(),
                 hbm->backend() == "host" ? "stand-in devices of host memory" : "CUDA");
  }
  if (!m.ssd_error().empty()) {
    spdlog::error("SSD tier unavailable, serving from DRAM only: {}", m.ssd_error());
  } else if (m.store().has_ssd()) {
    const TierStats t = m.store().admin().Stats().tier;
    spdlog::info(
        "SSD tier: {} in {}, {} I/O{}; recovered {} objects ({}), dropped {} corrupt and {} "
        "duplicate blobs",
        FormatByteSize(t.ssd.capacity), config->ssd.dir, t.engine, t.direct ? " (O_DIRECT)" : "",
        t.recovered.blobs, FormatByteSize(t.recovered.bytes), t.recovered.corrupt,
        t.recovered.duplicates);
    std::printf("ssd tier on %s (%s)\n", config->ssd.dir.c_str(), t.engine.c_str());
  }
  if (!m.server().uds_address().empty()) {
    std::printf("listening on %s (shared memory, mode %04o)\n", m.server().uds_address().c_str(),
                config->server.uds_mode);
  }
  if (!m.server().tcp_address().empty()) {
    std::printf("listening on %s\n", m.server().tcp_address().c_str());
  }
  std::printf("rest api on %s\n", m.rest().url().c_str());
  if (config->kv_events) {
    std::printf("kv events on %s\n", config->events.endpoint.c_str());
    if (!config->events.replay_endpoint.empty()) {
      std::printf("kv events replay on %s\n", config->events.replay_endpoint.c_str());
    }
  }
  if (Membership* mem = m.membership()) {
    std::printf("cluster %s: node %s, rank %u, epoch %llu\n", config->cluster.cluster_name.c_str(),
                config->node_id.c_str(), mem->rank(),
                static_cast<unsigned long long>(mem->epoch()));
    std::printf("peer api on %s%s\n", config->cluster.addr.c_str(),
                config->cluster.peer_tls_cert.empty() ? "" : " (mutual TLS)");
    if (config->cluster.peer_tls_cert.empty()) {
      spdlog::warn(
          "the peer plane (--addr, --data-addr) is plaintext and unauthenticated: anyone who can "
          "reach those ports can read this manager's objects, and impersonate a live member "
          "(its names are in etcd) to list or drain them; run it on a trusted network, or set "
          "--peer-tls-cert/--peer-tls-key/--peer-tls-ca");
    }
  }
  std::fflush(stdout);

  int sig = 0;
  sigwait(&stop_signals, &sig);
  spdlog::info("signal {} received: stopping", sig);
  m.Stop();
  const ServerStats s = m.server().Stats();
  spdlog::info("stopped after {} connections and {} requests", s.connections_total, s.requests);
  if (m.exiting_for_fence()) {
    spdlog::error("exiting with status 3: the cluster registration was fenced (--on-fence exit)");
    return 3;
  }
  return 0;
}
