// tierkv-server: one manager per host.
//
// Starts the DRAM pool, the store and the client listeners, prints where it
// listens, and serves until SIGTERM or SIGINT, then stops gracefully: no new
// connections, in-flight requests answered, exit status 0.
#include <signal.h>
#include <spdlog/spdlog.h>

#include <cstdio>
#include <string>
#include <vector>

#include "common/units.h"
#include "media/dram_pool.h"
#include "server/config.h"
#include "server/server.h"
#include "store/store.h"

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

  Result<std::unique_ptr<DramPool>> pool = DramPool::Create(config->dram_size);
  if (!pool.ok()) return Fail(pool.status());
  Result<std::unique_ptr<Store>> store = Store::Create(config->store, std::move(*pool));
  if (!store.ok()) return Fail(store.status());
  Server server(config->server, store->get());
  if (Status st = server.Start(); !st.ok()) return Fail(st);
  (*store)->Start();

  spdlog::info("tierkv-server ready: rank {}, DRAM pool {}", config->server.rank,
               FormatByteSize((*store)->dram().capacity()));
  if (!server.uds_address().empty()) {
    std::printf("listening on %s (shared memory, mode %04o)\n", server.uds_address().c_str(),
                config->server.uds_mode);
  }
  if (!server.tcp_address().empty()) {
    std::printf("listening on %s\n", server.tcp_address().c_str());
  }
  std::fflush(stdout);

  int sig = 0;
  sigwait(&stop_signals, &sig);
  spdlog::info("signal {} received: stopping", sig);
  server.Stop();
  (*store)->Stop();
  const ServerStats s = server.Stats();
  spdlog::info("stopped after {} connections and {} requests", s.connections_total, s.requests);
  return 0;
}
